/*
 * resp_write.c: replies in RESP2 or RESP3. RESP3's types (null, map, set,
 * double, verbatim) fall back to what redis-server sends a RESP2 client.
 */
#include "resp/resp_proto.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Decimal digits of v, written backwards from end; returns the first byte. */
static char *u64_digits(uint64_t v, char *end)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

/* "<type><v>\r\n" */
static int type_num(hanu_buf *b, char type, int64_t v)
{
    char tmp[32], *end = tmp + sizeof tmp;
    *--end = '\n';
    *--end = '\r';
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *p = u64_digits(mag, end);
    if (v < 0) *--p = '-';
    *--p = type;
    return hanu_buf_append(b, p, (size_t)(tmp + sizeof tmp - p));
}

size_t resp_bulk_header(char out[24], size_t n)
{
    char tmp[24], *end = tmp + sizeof tmp;
    *--end = '\n';
    *--end = '\r';
    char *p = u64_digits(n, end);
    *--p = '$';
    size_t len = (size_t)(tmp + sizeof tmp - p);
    memcpy(out, p, len);
    return len;
}

static int line(hanu_buf *b, char type, const char *s, size_t n)
{
    if (hanu_buf_reserve(b, n + 3) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *d = b->data + b->len;
    d[0] = (uint8_t)type;
    memcpy(d + 1, s, n);
    d[n + 1] = '\r';
    d[n + 2] = '\n';
    b->len += n + 3;
    return HANU_OK;
}

int resp_w_simple(hanu_buf *b, const char *s) { return line(b, '+', s, strlen(s)); }

int resp_w_error(hanu_buf *b, const char *s)
{
    /* an error is one line: a CR or LF inside would desynchronise the client */
    char clean[512];
    size_t n = strlen(s);
    if (n >= sizeof clean) n = sizeof clean - 1;
    for (size_t i = 0; i < n; i++) clean[i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    return line(b, '-', clean, n);
}

int resp_w_errorf(hanu_buf *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return resp_w_error(b, msg);
}

int resp_w_int(hanu_buf *b, int64_t v) { return type_num(b, ':', v); }
int resp_w_array(hanu_buf *b, size_t n) { return type_num(b, '*', (int64_t)n); }

int resp_w_bulk(hanu_buf *b, const void *p, size_t n)
{
    char h[24];
    size_t hl = resp_bulk_header(h, n);
    if (hanu_buf_reserve(b, hl + n + 2) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *d = b->data + b->len;
    memcpy(d, h, hl);
    if (n) memcpy(d + hl, p, n);
    d[hl + n] = '\r';
    d[hl + n + 1] = '\n';
    b->len += hl + n + 2;
    return HANU_OK;
}

int resp_w_bulk_str(hanu_buf *b, const char *s) { return resp_w_bulk(b, s, strlen(s)); }

int resp_w_null(hanu_buf *b, int proto) { return proto >= 3 ? hanu_buf_append(b, "_\r\n", 3) : hanu_buf_append(b, "$-1\r\n", 5); }

int resp_w_null_array(hanu_buf *b, int proto)
{
    return proto >= 3 ? hanu_buf_append(b, "_\r\n", 3) : hanu_buf_append(b, "*-1\r\n", 5);
}

int resp_w_map(hanu_buf *b, int proto, size_t pairs)
{
    return proto >= 3 ? type_num(b, '%', (int64_t)pairs) : type_num(b, '*', (int64_t)(pairs * 2));
}

int resp_w_set(hanu_buf *b, int proto, size_t n) { return type_num(b, proto >= 3 ? '~' : '*', (int64_t)n); }

int resp_w_double(hanu_buf *b, int proto, double v)
{
    char s[64];
    if (isinf(v)) snprintf(s, sizeof s, "%s", v > 0 ? "inf" : "-inf");
    else snprintf(s, sizeof s, "%.17g", v);
    return proto >= 3 ? line(b, ',', s, strlen(s)) : resp_w_bulk(b, s, strlen(s));
}

int resp_w_verbatim(hanu_buf *b, int proto, const void *p, size_t n)
{
    if (proto < 3) return resp_w_bulk(b, p, n);
    char h[32];
    int hl = snprintf(h, sizeof h, "=%zu\r\ntxt:", n + 4);
    if (hanu_buf_append(b, h, (size_t)hl) != HANU_OK || hanu_buf_append(b, p, n) != HANU_OK) return HANU_ERR_NOMEM;
    return hanu_buf_append(b, "\r\n", 2);
}
