/*
 * resp_parse.c: RESP requests, multibulk and inline, as redis-server reads them
 * (networking.c: processMultibulkBuffer, processInlineBuffer; sds.c:
 * sdssplitargs), with a limit on every size. A call parses one whole command
 * from the start of the buffer, or says how many bytes it needs first, so that
 * a command arriving in pieces is scanned again only once enough is there.
 */
#include "resp/resp_proto.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void resp_request_free(resp_request *r)
{
    free(r->argv);
    hanu_buf_free(&r->arena);
    *r = (resp_request){0};
}

static int push_arg(resp_request *r, const uint8_t *p, size_t len)
{
    if (r->argc == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 16;
        resp_arg *nv = realloc(r->argv, ncap * sizeof *nv);
        if (!nv) return HANU_ERR_NOMEM;
        r->argv = nv;
        r->cap = ncap;
    }
    r->argv[r->argc++] = (resp_arg){ p, len };
    return HANU_OK;
}

int resp_parse_u64(const uint8_t *p, size_t n, uint64_t *v)
{
    if (n == 0 || n > 20) return 0;
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (acc > (UINT64_MAX - d) / 10) return 0;
        acc = acc * 10 + d;
    }
    *v = acc;
    return 1;
}

int resp_parse_i64(const uint8_t *p, size_t n, int64_t *v)
{
    if (n == 0 || n > 20) return 0;
    size_t i = 0;
    int neg = 0;
    if (p[0] == '-') {
        neg = 1;
        if (++i == n) return 0;
    }
    if (p[i] == '0') {   /* "0" alone; no leading zeros, no "-0" */
        if (n != 1) return 0;
        *v = 0;
        return 1;
    }
    uint64_t acc = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (acc > (UINT64_MAX - d) / 10) return 0;
        acc = acc * 10 + d;
    }
    if (neg) {
        if (acc > (uint64_t)INT64_MAX + 1) return 0;
        *v = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    } else {
        if (acc > (uint64_t)INT64_MAX) return 0;
        *v = (int64_t)acc;
    }
    return 1;
}

#define RESP_LD_MAX_CHARS (5 * 1024)

int resp_parse_ld(const uint8_t *p, size_t n, long double *v)
{
    char buf[RESP_LD_MAX_CHARS + 1];
    if (n == 0 || n > RESP_LD_MAX_CHARS) return 0;
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (isspace((unsigned char)buf[0])) return 0;
    char *end;
    errno = 0;
    long double x = strtold(buf, &end);
    if ((size_t)(end - buf) != n || isnan(x)) return 0;
    if (errno == ERANGE && (x == HUGE_VALL || x == -HUGE_VALL || fpclassify(x) == FP_ZERO)) return 0;
    *v = x;
    return 1;
}

size_t resp_format_ld(long double v, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%.17Lf", v);
    if (n < 0 || (size_t)n >= cap) return 0;
    if (strchr(out, '.')) {   /* "3.50000" -> "3.5", "3.000" -> "3" */
        while (n > 0 && out[n - 1] == '0') n--;
        if (n > 0 && out[n - 1] == '.') n--;
    }
    if (n == 2 && out[0] == '-' && out[1] == '0') { out[0] = '0'; n = 1; }
    out[n] = '\0';
    return (size_t)n;
}

/* The line at in[pos..): its length (without CRLF) and where the next byte is, or
   -1 (no CRLF yet) or -2 (longer than the limit without one). */
static ptrdiff_t find_line(const uint8_t *in, size_t n, size_t pos, uint32_t max_line, size_t *next)
{
    const uint8_t *cr = memchr(in + pos, '\r', n - pos);
    if (!cr || (size_t)(cr - in) + 1 >= n) return n - pos > max_line ? -2 : -1;
    size_t len = (size_t)(cr - (in + pos));
    if (len > max_line) return -2;
    *next = (size_t)(cr - in) + 2;
    return (ptrdiff_t)len;
}

static int parse_multibulk(resp_request *r, const uint8_t *in, size_t n, const resp_limits *lim,
                           size_t *consumed, size_t *need, const char **err)
{
    size_t pos = 1, next;
    ptrdiff_t ll = find_line(in, n, pos, lim->max_inline, &next);
    if (ll == -2) { *err = "Protocol error: too big mbulk count string"; return RESP_PARSE_ERROR; }
    if (ll < 0) { *need = n + 1; return RESP_PARSE_MORE; }
    int64_t count;
    if (!resp_parse_i64(in + pos, (size_t)ll, &count) || count > (int64_t)lim->max_args) {
        *err = "Protocol error: invalid multibulk length";
        return RESP_PARSE_ERROR;
    }
    if (lim->unauthenticated && count > 10) { *err = "Protocol error: unauthenticated multibulk length"; return RESP_PARSE_ERROR; }
    pos = next;
    uint64_t total = 0;
    for (int64_t i = 0; i < count; i++) {
        if (pos >= n) { *need = pos + 1; return RESP_PARSE_MORE; }
        ll = find_line(in, n, pos + 1, lim->max_inline, &next);
        if (in[pos] != '$') {
            static char msg[40];   /* one byte varies; a static buffer is fine on the loop thread */
            memcpy(msg, "Protocol error: expected '$', got ' '", 38);
            msg[35] = (char)in[pos];
            *err = msg;
            return RESP_PARSE_ERROR;
        }
        if (ll == -2) { *err = "Protocol error: too big bulk count string"; return RESP_PARSE_ERROR; }
        if (ll < 0) { *need = n + 1; return RESP_PARSE_MORE; }
        int64_t blen;
        if (!resp_parse_i64(in + pos + 1, (size_t)ll, &blen) || blen < 0 || blen > (int64_t)lim->max_bulk ||
            (total += (uint64_t)blen) > lim->max_request) {
            *err = "Protocol error: invalid bulk length";
            return RESP_PARSE_ERROR;
        }
        if (lim->unauthenticated && blen > 16384) { *err = "Protocol error: unauthenticated bulk length"; return RESP_PARSE_ERROR; }
        pos = next;
        if (n - pos < (size_t)blen + 2) { *need = pos + (size_t)blen + 2; return RESP_PARSE_MORE; }
        if (in[pos + blen] != '\r' || in[pos + blen + 1] != '\n') {
            *err = "Protocol error: expected '\\r\\n' after a bulk string";
            return RESP_PARSE_ERROR;
        }
        if (push_arg(r, in + pos, (size_t)blen) != HANU_OK) { *err = "ERR out of memory"; return RESP_PARSE_ERROR; }
        pos += (size_t)blen + 2;
    }
    *consumed = pos;
    return RESP_PARSE_OK;
}

static int hex_digit(uint8_t c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int is_blank(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\0'; }

/* sdssplitargs over line[0..len): the words go into the arena, their ends into
   ends[]; 0, or -1 for unbalanced quotes. */
static int split_inline(resp_request *r, const uint8_t *line, size_t len, const resp_limits *lim, const char **err)
{
    size_t i = 0;
    size_t starts_len = 0;
    hanu_buf *a = &r->arena;
    a->len = 0;
    /* Offsets first (the arena may move while it grows), pointers at the end. */
    size_t *offs = NULL, ocap = 0;
    int rc = RESP_PARSE_OK;
    for (;;) {
        while (i < len && isspace(line[i])) i++;
        if (i >= len) break;
        if (starts_len + 1 > lim->max_args) { *err = "Protocol error: invalid multibulk length"; rc = RESP_PARSE_ERROR; break; }
        if (starts_len + 2 > ocap) {
            size_t ncap = ocap ? ocap * 2 : 32;
            size_t *no = realloc(offs, ncap * sizeof *no);
            if (!no) { *err = "ERR out of memory"; rc = RESP_PARSE_ERROR; break; }
            offs = no;
            ocap = ncap;
        }
        offs[starts_len] = a->len;
        int inq = 0, insq = 0, done = 0;
        while (!done && rc == RESP_PARSE_OK) {
            uint8_t c = i < len ? line[i] : 0;
            uint8_t add = 0;
            int have = 0;
            if (inq) {
                if (i >= len) { rc = RESP_PARSE_ERROR; break; }
                if (c == '\\' && i + 3 < len && line[i + 1] == 'x' && hex_digit(line[i + 2]) >= 0 &&
                    hex_digit(line[i + 3]) >= 0) {
                    add = (uint8_t)(hex_digit(line[i + 2]) * 16 + hex_digit(line[i + 3]));
                    have = 1;
                    i += 3;
                } else if (c == '\\' && i + 1 < len) {
                    i++;
                    switch (line[i]) {
                    case 'n': add = '\n'; break;
                    case 'r': add = '\r'; break;
                    case 't': add = '\t'; break;
                    case 'b': add = '\b'; break;
                    case 'a': add = '\a'; break;
                    default: add = line[i]; break;
                    }
                    have = 1;
                } else if (c == '"') {
                    /* the closing quote must be followed by a blank or the end */
                    if (i + 1 < len && !isspace(line[i + 1])) { rc = RESP_PARSE_ERROR; break; }
                    done = 1;
                } else {
                    add = c;
                    have = 1;
                }
            } else if (insq) {
                if (i >= len) { rc = RESP_PARSE_ERROR; break; }
                if (c == '\\' && i + 1 < len && line[i + 1] == '\'') {
                    i++;
                    add = '\'';
                    have = 1;
                } else if (c == '\'') {
                    if (i + 1 < len && !isspace(line[i + 1])) { rc = RESP_PARSE_ERROR; break; }
                    done = 1;
                } else {
                    add = c;
                    have = 1;
                }
            } else if (i >= len || is_blank(c)) {
                done = 1;
            } else if (c == '"') {
                inq = 1;
            } else if (c == '\'') {
                insq = 1;
            } else {
                add = c;
                have = 1;
            }
            if (have && hanu_buf_append(a, &add, 1) != HANU_OK) { *err = "ERR out of memory"; rc = RESP_PARSE_ERROR; }
            if (i < len) i++;
        }
        if (rc != RESP_PARSE_OK) {
            if (!*err) *err = "Protocol error: unbalanced quotes in request";
            break;
        }
        offs[++starts_len] = a->len;
    }
    static const uint8_t none[1];   /* "" "" alone leaves the arena unallocated */
    const uint8_t *base = a->data ? a->data : none;
    for (size_t k = 0; rc == RESP_PARSE_OK && k < starts_len; k++)
        if (push_arg(r, base + offs[k], offs[k + 1] - offs[k]) != HANU_OK) {
            *err = "ERR out of memory";
            rc = RESP_PARSE_ERROR;
        }
    free(offs);
    return rc;
}

static int parse_inline(resp_request *r, const uint8_t *in, size_t n, const resp_limits *lim, size_t *consumed,
                        size_t *need, const char **err)
{
    const uint8_t *nl = memchr(in, '\n', n > (size_t)lim->max_inline + 1 ? (size_t)lim->max_inline + 1 : n);
    if (!nl) {
        if (n > lim->max_inline) { *err = "Protocol error: too big inline request"; return RESP_PARSE_ERROR; }
        *need = n + 1;
        return RESP_PARSE_MORE;
    }
    size_t len = (size_t)(nl - in);
    *consumed = len + 1;
    if (len && in[len - 1] == '\r') len--;
    *err = NULL;
    return split_inline(r, in, len, lim, err);
}

int resp_parse(resp_request *r, const uint8_t *in, size_t n, const resp_limits *lim, size_t *consumed,
               size_t *need, const char **err)
{
    r->argc = 0;
    *need = n + 1;
    if (n == 0) return RESP_PARSE_MORE;
    return in[0] == '*' ? parse_multibulk(r, in, n, lim, consumed, need, err)
                        : parse_inline(r, in, n, lim, consumed, need, err);
}
