/*
 * write.c: the JSON writer. Appends compact JSON to a hanu_buf and places the
 * commas and colons itself: has_items[d] says whether the container open at
 * depth d already holds a value, after_key that the next value follows a key.
 * Strings are checked to be UTF-8 and escaped ('"', '\\', and bytes below
 * 0x20, with the short forms \n \r \t \b \f where they exist); doubles use
 * the shortest %.15g..%.17g that reads back to the same value.
 */
#include "json/json_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void json_writer_init(json_writer *w, hanu_buf *out)
{
    w->out = out;
    w->status = HANU_OK;
    w->depth = 0;
    w->after_key = 0;
    w->has_items[0] = 0;
}

int json_writer_status(const json_writer *w) { return w->status; }

static int stick(json_writer *w, int rc)
{
    if (rc && !w->status) w->status = rc;
    return rc;
}

/* The separator before a value or key at the current position. */
static int sep(json_writer *w)
{
    if (w->status) return w->status;
    if (w->after_key) { w->after_key = 0; return HANU_OK; }
    if (w->has_items[w->depth]) return stick(w, hanu_buf_append(w->out, ",", 1));
    w->has_items[w->depth] = 1;
    return HANU_OK;
}

int json_escape_string(hanu_buf *out, const char *str, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *s = len ? (const uint8_t *)str : (const uint8_t *)"";
    int rc = hanu_buf_reserve(out, len + 2);
    if (rc) return rc;
    size_t start = out->len;
    out->data[out->len++] = '"';
    size_t i = 0, run = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') { i++; continue; }
        if (c >= 0x80) {
            int n = json_utf8_seq(s + i, len - i);
            if (!n) { out->len = start; return HANU_ERR_INVALID; }
            i += (size_t)n;
            continue;
        }
        /* flush the plain run, then the escape */
        if ((rc = hanu_buf_append(out, s + run, i - run))) { out->len = start; return rc; }
        char e[6] = { '\\', 0 };
        size_t en = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        default:
            e[1] = 'u'; e[2] = '0'; e[3] = '0'; e[4] = hex[c >> 4]; e[5] = hex[c & 15];
            en = 6;
        }
        if ((rc = hanu_buf_append(out, e, en))) { out->len = start; return rc; }
        i++;
        run = i;
    }
    if ((rc = hanu_buf_append(out, s + run, len - run)) || (rc = hanu_buf_append(out, "\"", 1))) {
        out->len = start;
        return rc;
    }
    return HANU_OK;
}

static int open_c(json_writer *w, char c)
{
    int rc = sep(w);
    if (rc) return rc;
    if (w->depth >= JSON_WRITER_MAX_DEPTH) return stick(w, HANU_ERR_TOO_LARGE);
    rc = hanu_buf_append(w->out, &c, 1);
    if (rc) return stick(w, rc);
    w->depth++;
    w->has_items[w->depth] = 0;
    return HANU_OK;
}

static int close_c(json_writer *w, char c)
{
    if (w->status) return w->status;
    if (w->depth == 0 || w->after_key) return stick(w, HANU_ERR_INVALID);
    w->depth--;
    return stick(w, hanu_buf_append(w->out, &c, 1));
}

int json_write_object_begin(json_writer *w) { return open_c(w, '{'); }
int json_write_object_end(json_writer *w) { return close_c(w, '}'); }
int json_write_array_begin(json_writer *w) { return open_c(w, '['); }
int json_write_array_end(json_writer *w) { return close_c(w, ']'); }

int json_write_key(json_writer *w, const char *k, size_t len)
{
    if (w->status) return w->status;
    if (w->after_key) return stick(w, HANU_ERR_INVALID);
    int rc = sep(w);
    if (rc) return rc;
    if ((rc = json_escape_string(w->out, k, len)) || (rc = hanu_buf_append(w->out, ":", 1)))
        return stick(w, rc);
    w->after_key = 1;
    return HANU_OK;
}

int json_write_string(json_writer *w, const char *s, size_t len)
{
    int rc = sep(w);
    if (rc) return rc;
    return stick(w, json_escape_string(w->out, s, len));
}

int json_write_int64(json_writer *w, int64_t v)
{
    int rc = sep(w);
    if (rc) return rc;
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)v);
    return stick(w, hanu_buf_append(w->out, buf, (size_t)n));
}

int json_write_double(json_writer *w, double v)
{
    if (w->status) return w->status;
    if (!isfinite(v)) return stick(w, HANU_ERR_INVALID);
    int rc = sep(w);
    if (rc) return rc;
    char buf[40];
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* keep it a double on the way back: 100.0 is written "100.0", not "100" */
    if (!memchr(buf, '.', (size_t)n) && !memchr(buf, 'e', (size_t)n)) {
        buf[n++] = '.';
        buf[n++] = '0';
    }
    return stick(w, hanu_buf_append(w->out, buf, (size_t)n));
}

int json_write_bool(json_writer *w, int v)
{
    int rc = sep(w);
    if (rc) return rc;
    return stick(w, v ? hanu_buf_append(w->out, "true", 4) : hanu_buf_append(w->out, "false", 5));
}

int json_write_null(json_writer *w)
{
    int rc = sep(w);
    if (rc) return rc;
    return stick(w, hanu_buf_append(w->out, "null", 4));
}

int json_write_raw(json_writer *w, const char *p, size_t len)
{
    int rc = sep(w);
    if (rc) return rc;
    return stick(w, hanu_buf_append(w->out, p, len));
}
