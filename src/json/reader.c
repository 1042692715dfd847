/*
 * reader.c: the validating JSON tokenizer behind json_scan, json_doc_parse and
 * the _id helpers (contract in json_internal.h). One pass over the bytes,
 * no allocation except a malloc'd copy for a long number that ends exactly at
 * the end of the input (strtod needs a terminator there).
 *
 * Validation follows RFC 8259 strictly: whitespace is space, tab, CR, LF;
 * numbers follow the grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?;
 * strings are well-formed UTF-8 (Unicode table 3-7: no overlongs, no
 * surrogates, nothing above U+10FFFF), have no raw byte below 0x20, and every
 * \u escape of a surrogate is one half of a high+low pair. Duplicate keys are
 * compared after unescaping, through a table of (32-bit hash, key offset)
 * entries per open object: objects of up to DUP_LINEAR keys are checked on
 * every key (so the error comes at the duplicate), larger ones by sorting
 * their entries when the object closes, which keeps a huge object O(n log n).
 */
#include "json/json_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum {
    S_VALUE,            /* a value must come (top level, after ':' or an array ',') */
    S_VALUE_OR_END,     /* just after '[' */
    S_KEY_OR_END,       /* just after '{' */
    S_KEY,              /* after ',' in an object */
    S_AFTER,            /* after a value: ',' or the closing bracket (or end of input) */
    S_DONE,
};

#define DUP_LINEAR 32

int jr_fail(jreader *r, int code, size_t off, int at_byte, const char *fmt, ...)
{
    if (r->err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(r->err->msg, sizeof r->err->msg, fmt, ap);
        va_end(ap);
        if (n < 0) n = 0;
        if (at_byte && (size_t)n < sizeof r->err->msg)
            snprintf(r->err->msg + n, sizeof r->err->msg - (size_t)n, " at byte %zu", off);
        r->err->offset = off;
    }
    return code;
}

static int fail_eof(jreader *r)
{
    return jr_fail(r, HANU_ERR_INVALID, r->len, 0, "unexpected end of input");
}

int jr_init(jreader *r, const char *in, size_t len, const json_opts *opts,
            void *scratch, size_t scratch_len, json_error *err)
{
    r->p = in ? (const uint8_t *)in : (const uint8_t *)"";
    r->len = len;
    r->pos = 0;
    r->state = S_VALUE;
    r->depth = 0;
    r->max_depth = opts && opts->max_depth > 0 ? opts->max_depth : JSON_DEFAULT_MAX_DEPTH;
    if (r->max_depth > JSON_MAX_DEPTH_CAP) r->max_depth = JSON_MAX_DEPTH_CAP;
    r->dup_check = !(opts && opts->allow_duplicate_keys);
    static uint64_t no_scratch[1];
    if (!scratch) { scratch = no_scratch; scratch_len = 0; }
    r->scratch = scratch;
    r->front = 0;
    uintptr_t end = (uintptr_t)scratch + scratch_len;
    end &= ~(uintptr_t)7;
    if (end < (uintptr_t)scratch) end = (uintptr_t)scratch;
    r->kend = (uint64_t *)end;
    r->ktop = 0;
    r->scratch_full = 0;
    r->err = err;
    if (err) { err->offset = 0; err->msg[0] = 0; }
    if (len >= UINT32_MAX)
        return jr_fail(r, HANU_ERR_TOO_LARGE, 0, 0, "document of %zu bytes is too large", len);
    return HANU_OK;
}

/* ---- bytes ---- */

static inline int is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static inline int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Non-zero when one of the 8 bytes may be '"', '\\', below 0x20 or above 0x7F
 * (false positives possible, false negatives not). */
static inline uint64_t swar_special(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    uint64_t lt = (x - ones * 0x20) & ~x;
    uint64_t zq = (q - ones) & ~q;
    uint64_t zb = (b - ones) & ~b;
    return (x | lt | zq | zb) & high;
}

static inline int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The 4 hex digits at s as a code unit, or -1. */
static inline long hex4(const uint8_t *s)
{
    int a = hexval(s[0]), b = hexval(s[1]), c = hexval(s[2]), d = hexval(s[3]);
    if ((a | b | c | d) < 0) return -1;
    return (long)((a << 12) | (b << 8) | (c << 4) | d);
}

static inline int utf8_put(uint32_t cp, uint8_t *o)
{
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | cp >> 6); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12); o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18); o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the validated escape at p[*i] (a backslash) into o; returns bytes. */
static int unescape_one(const uint8_t *p, size_t *i, uint8_t *o)
{
    uint8_t e = p[*i + 1];
    *i += 2;
    switch (e) {
    case 'b': o[0] = '\b'; return 1;
    case 'f': o[0] = '\f'; return 1;
    case 'n': o[0] = '\n'; return 1;
    case 'r': o[0] = '\r'; return 1;
    case 't': o[0] = '\t'; return 1;
    case 'u': break;
    default: o[0] = e; return 1;        /* '"', '\\', '/' */
    }
    uint32_t cp = (uint32_t)hex4(p + *i);
    *i += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        uint32_t lo = (uint32_t)hex4(p + *i + 2);
        *i += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return utf8_put(cp, o);
}

size_t jr_unescape(const uint8_t *p, size_t start, size_t end, uint8_t *out)
{
    size_t i = start + 1, stop = end - 1, n = 0;
    while (i < stop) {
        const uint8_t *bs = memchr(p + i, '\\', stop - i);
        size_t run = bs ? (size_t)(bs - (p + i)) : stop - i;
        memcpy(out + n, p + i, run);
        n += run;
        i += run;
        if (i < stop) n += (size_t)unescape_one(p, &i, out + n);
    }
    return n;
}

/* Byte iterator over the unescaped content of a validated string token. */
typedef struct str_iter {
    const uint8_t *p;
    size_t i;
    uint8_t buf[4];
    int n, k;
} str_iter;

static inline int str_iter_next(str_iter *s)
{
    if (s->k < s->n) return s->buf[s->k++];
    uint8_t c = s->p[s->i];
    if (c == '"') return -1;
    if (c != '\\') { s->i++; return c; }
    s->n = unescape_one(s->p, &s->i, s->buf);
    s->k = 1;
    return s->buf[0];
}

/* FNV-1a over the unescaped bytes: equal keys, however escaped, hash alike. */
static uint32_t key_hash(const uint8_t *p, size_t start)
{
    str_iter it = { .p = p, .i = start + 1 };
    uint32_t h = 2166136261u;
    int c;
    while ((c = str_iter_next(&it)) >= 0) { h ^= (uint32_t)c; h *= 16777619u; }
    return h;
}

static int key_equal(const uint8_t *p, size_t a, size_t b)
{
    str_iter x = { .p = p, .i = a + 1 }, y = { .p = p, .i = b + 1 };
    for (;;) {
        int c = str_iter_next(&x), d = str_iter_next(&y);
        if (c != d) return 0;
        if (c < 0) return 1;
    }
}

/* ---- strings ---- */

static int scan_string(jreader *r, jtok *t)
{
    const uint8_t *p = r->p;
    size_t len = r->len, i = r->pos + 1, saved = 0;
    int esc = 0;
    for (;;) {
        while (i + 8 <= len) {
            uint64_t x;
            memcpy(&x, p + i, 8);
            if (swar_special(x)) break;
            i += 8;
        }
        if (i >= len)
            return jr_fail(r, HANU_ERR_INVALID, len, 0,
                           "unexpected end of input in the string starting at byte %zu", r->pos);
        uint8_t c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') { i++; continue; }
        if (c == '"') break;
        if (c == '\\') {
            esc = 1;
            if (i + 1 >= len) return fail_eof(r);
            uint8_t e = p[i + 1];
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                e == 'r' || e == 't') {
                i += 2;
                saved += 1;
                continue;
            }
            if (e != 'u') {
                if (e >= 0x20 && e < 0x7F)
                    return jr_fail(r, HANU_ERR_INVALID, i, 1, "invalid escape '\\%c' in string", e);
                return jr_fail(r, HANU_ERR_INVALID, i, 1, "invalid escape in string");
            }
            if (i + 6 > len) return fail_eof(r);
            long cp = hex4(p + i + 2);
            if (cp < 0) return jr_fail(r, HANU_ERR_INVALID, i, 1, "invalid \\u escape (needs 4 hex digits)");
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return jr_fail(r, HANU_ERR_INVALID, i, 1, "lone low surrogate \\u%04lX", cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (i + 12 > len) {
                    if (i + 6 == len || (p[i + 6] == '\\' && (i + 7 == len || p[i + 7] == 'u')))
                        return fail_eof(r);
                    return jr_fail(r, HANU_ERR_INVALID, i, 1, "lone high surrogate \\u%04lX", cp);
                }
                long lo = p[i + 6] == '\\' && p[i + 7] == 'u' ? hex4(p + i + 8) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return jr_fail(r, HANU_ERR_INVALID, i, 1, "lone high surrogate \\u%04lX", cp);
                i += 12;
                saved += 12 - 4;
                continue;
            }
            saved += 6 - (cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3);
            i += 6;
            continue;
        }
        if (c < 0x20)
            return jr_fail(r, HANU_ERR_INVALID, i, 1,
                           "control character 0x%02X in string (must be escaped)", c);
        int n = json_utf8_seq(p + i, len - i);
        if (!n) return jr_fail(r, HANU_ERR_INVALID, i, 1, "invalid UTF-8");
        i += (size_t)n;
    }
    t->start = r->pos;
    t->end = i + 1;
    t->escaped = esc;
    t->ulen = (i - r->pos - 1) - saved;
    r->pos = i + 1;
    return HANU_OK;
}

/* ---- numbers ---- */

static const double pow10_tbl[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* strtod of the validated token p[start..end). strtod stops at the first byte
 * that cannot continue a number; after a valid JSON number inside the input
 * that byte is a delimiter, so only a token that ends the input needs a copy. */
static int slow_double(jreader *r, size_t start, size_t end, double *out)
{
    const char *s = (const char *)r->p + start;
    char stackbuf[128], *heap = NULL, *endp;
    size_t n = end - start;
    if (end >= r->len) {
        char *b = stackbuf;
        if (n >= sizeof stackbuf) {
            heap = malloc(n + 1);
            if (!heap) return jr_fail(r, HANU_ERR_NOMEM, start, 1, "out of memory reading a number");
            b = heap;
        }
        memcpy(b, s, n);
        b[n] = 0;
        s = b;
    }
    errno = 0;
    *out = strtod(s, &endp);
    size_t used = (size_t)(endp - s);
    free(heap);
    if (used != n) return jr_fail(r, HANU_ERR_INVALID, start, 1, "invalid number");
    return HANU_OK;
}

static int scan_number(jreader *r, jtok *t)
{
    const uint8_t *p = r->p;
    size_t len = r->len, start = r->pos, i = start;
    int neg = 0;
    if (p[i] == '-') { neg = 1; i++; }
    if (i >= len) return fail_eof(r);
    size_t ds = i;
    if (p[i] == '0') {
        i++;
        if (i < len && is_digit(p[i]))
            return jr_fail(r, HANU_ERR_INVALID, start, 1, "invalid number (leading zero)");
    } else if (is_digit(p[i])) {
        while (i < len && is_digit(p[i])) i++;
    } else {
        return jr_fail(r, HANU_ERR_INVALID, start, 1, "invalid number (expected a digit after '-')");
    }
    size_t int_end = i, frac_start = 0, frac_end = 0;
    int has_exp = 0;
    if (i < len && p[i] == '.') {
        i++;
        if (i >= len) return fail_eof(r);
        if (!is_digit(p[i]))
            return jr_fail(r, HANU_ERR_INVALID, i, 1, "invalid number (expected a digit after '.')");
        frac_start = i;
        while (i < len && is_digit(p[i])) i++;
        frac_end = i;
    }
    long e10 = 0;
    int exp_long = 0;
    if (i < len && (p[i] == 'e' || p[i] == 'E')) {
        has_exp = 1;
        i++;
        int eneg = 0;
        if (i < len && (p[i] == '+' || p[i] == '-')) { eneg = p[i] == '-'; i++; }
        if (i >= len) return fail_eof(r);
        if (!is_digit(p[i]))
            return jr_fail(r, HANU_ERR_INVALID, i, 1, "invalid number (expected a digit in the exponent)");
        while (i < len && is_digit(p[i])) {
            if (e10 < 100000) e10 = e10 * 10 + (p[i] - '0'); else exp_long = 1;
            i++;
        }
        if (eneg) e10 = -e10;
    }
    t->kind = JT_NUMBER;
    t->start = start;
    t->end = i;
    t->is_int = 0;
    t->i64 = 0;
    r->pos = i;

    /* Mantissa of up to 19 significant digits, exactly. */
    uint64_t m = 0;
    int nd = 0, overflow = 0;
    for (size_t k = ds; k < int_end; k++) {
        if (nd == 0 && p[k] == '0') continue;
        if (nd < 19) { m = m * 10 + (uint64_t)(p[k] - '0'); nd++; } else { overflow = 1; break; }
    }
    if (!frac_start && !has_exp) {
        if (!overflow) {
            if (!neg && m <= (uint64_t)INT64_MAX) { t->is_int = 1; t->i64 = (int64_t)m; }
            else if (neg && m <= (uint64_t)INT64_MAX + 1) {
                t->is_int = 1;
                t->i64 = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
            }
        }
        if (t->is_int) {
            t->d = neg ? -(double)m : (double)m;
            return HANU_OK;
        }
    } else if (!overflow && !exp_long) {
        long fe = 0;
        for (size_t k = frac_start; k < frac_end; k++) {
            if (nd == 0 && p[k] == '0') { fe++; continue; }
            if (nd < 19) { m = m * 10 + (uint64_t)(p[k] - '0'); nd++; fe++; } else { overflow = 1; break; }
        }
        long x = e10 - fe;
        if (!overflow && m == 0) { t->d = neg ? -0.0 : 0.0; return HANU_OK; }
        /* Clinger's fast path: both m and 10^|x| are exact doubles, so one
         * IEEE multiply or divide rounds correctly. */
        if (!overflow && m <= (1ull << 53) && x >= -22 && x <= 22) {
            double d = (double)m;
            d = x < 0 ? d / pow10_tbl[-x] : d * pow10_tbl[x];
            t->d = neg ? -d : d;
            return HANU_OK;
        }
    }
    int rc = slow_double(r, start, i, &t->d);
    if (rc) return rc;
    if (isinf(t->d))
        return jr_fail(r, HANU_ERR_INVALID, start, 1, "number out of range (overflows a double)");
    return HANU_OK;
}

/* ---- literals ---- */

static int scan_literal(jreader *r, jtok *t, const char *word, size_t n, int kind)
{
    size_t i = r->pos;
    for (size_t k = 0; k < n; k++) {
        if (i + k >= r->len) return fail_eof(r);
        if (r->p[i + k] != (uint8_t)word[k])
            return jr_fail(r, HANU_ERR_INVALID, i, 1, "invalid literal (expected '%s')", word);
    }
    t->kind = kind;
    t->start = i;
    t->end = i + n;
    r->pos = i + n;
    return HANU_OK;
}

/* ---- duplicate keys ---- */

static int fail_dup(jreader *r, size_t off)
{
    /* Quote the key as written, cut on a UTF-8 boundary so the message stays valid. */
    size_t s = off + 1, e = s;
    while (r->p[e] != '"') e += r->p[e] == '\\' ? 2 : 1;
    size_t n = e - s, max = 40;
    const char *ell = "";
    if (n > max) {
        n = max;
        while (n > 0 && (r->p[s + n] & 0xC0) == 0x80) n--;
        ell = "...";
    }
    return jr_fail(r, HANU_ERR_INVALID, off, 1, "duplicate key \"%.*s%s\"", (int)n,
                   (const char *)r->p + s, ell);
}

static int push_key(jreader *r, const jtok *t)
{
    uint64_t entry = (uint64_t)key_hash(r->p, t->start) << 32 | (uint64_t)t->start;
    size_t base = r->kbase[r->depth], nkeys = r->ktop - base;
    if (nkeys < DUP_LINEAR) {
        for (size_t k = base; k < r->ktop; k++) {
            uint64_t other = r->kend[-1 - (ptrdiff_t)k];
            if (other >> 32 == entry >> 32 && key_equal(r->p, (size_t)(uint32_t)other, t->start))
                return fail_dup(r, t->start);
        }
    }
    if (jr_room(r) < r->front + sizeof(uint64_t)) {
        r->scratch_full = 1;
        return jr_fail(r, HANU_ERR_NOMEM, t->start, 1, "scratch buffer too small for the key table");
    }
    r->ktop++;
    r->kend[-(ptrdiff_t)r->ktop] = entry;
    return HANU_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Checks an object that had more than DUP_LINEAR keys; the error names the
 * earliest second occurrence. Entries sort by hash, then by offset. */
static int check_large_object(jreader *r)
{
    size_t base = r->kbase[r->depth], n = r->ktop - base;
    uint64_t *v = r->kend - r->ktop;
    qsort(v, n, sizeof *v, cmp_u64);
    size_t best = SIZE_MAX;
    for (size_t a = 0; a < n; a++) {
        for (size_t b = a + 1; b < n && v[b] >> 32 == v[a] >> 32; b++) {
            size_t oa = (uint32_t)v[a], ob = (uint32_t)v[b];
            if (ob < best && key_equal(r->p, oa, ob)) best = ob;
        }
    }
    if (best != SIZE_MAX) return fail_dup(r, best);
    return HANU_OK;
}

/* ---- the grammar ---- */

static int open_container(jreader *r, jtok *t, int is_obj)
{
    if (r->depth >= r->max_depth)
        return jr_fail(r, HANU_ERR_TOO_LARGE, r->pos, 1, "nesting deeper than %d", r->max_depth);
    r->depth++;
    r->is_obj[r->depth] = (uint8_t)is_obj;
    r->kbase[r->depth] = r->ktop;
    t->kind = is_obj ? JT_OBJ_BEGIN : JT_ARR_BEGIN;
    t->start = r->pos;
    t->end = r->pos + 1;
    r->pos++;
    r->state = is_obj ? S_KEY_OR_END : S_VALUE_OR_END;
    return HANU_OK;
}

static int close_container(jreader *r, jtok *t)
{
    int is_obj = r->is_obj[r->depth];
    if (is_obj && r->dup_check && r->ktop - r->kbase[r->depth] > DUP_LINEAR) {
        int rc = check_large_object(r);
        if (rc) return rc;
    }
    r->ktop = r->kbase[r->depth];
    r->depth--;
    t->kind = is_obj ? JT_OBJ_END : JT_ARR_END;
    t->start = r->pos;
    t->end = r->pos + 1;
    r->pos++;
    r->state = S_AFTER;
    return HANU_OK;
}

static int fail_unexpected(jreader *r, const char *expected)
{
    uint8_t c = r->p[r->pos];
    if (c > 0x20 && c < 0x7F)
        return jr_fail(r, HANU_ERR_INVALID, r->pos, 1, "unexpected character '%c'%s%s", c,
                       expected ? ", expected " : "", expected ? expected : "");
    return jr_fail(r, HANU_ERR_INVALID, r->pos, 1, "unexpected byte 0x%02X%s%s", c,
                   expected ? ", expected " : "", expected ? expected : "");
}

static int scan_value(jreader *r, jtok *t)
{
    switch (r->p[r->pos]) {
    case '{': return open_container(r, t, 1);
    case '[': return open_container(r, t, 0);
    case '"': {
        int rc = scan_string(r, t);
        if (rc) return rc;
        t->kind = JT_STRING;
        break;
    }
    case 't': { int rc = scan_literal(r, t, "true", 4, JT_TRUE); if (rc) return rc; break; }
    case 'f': { int rc = scan_literal(r, t, "false", 5, JT_FALSE); if (rc) return rc; break; }
    case 'n': { int rc = scan_literal(r, t, "null", 4, JT_NULL); if (rc) return rc; break; }
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9': {
        int rc = scan_number(r, t);
        if (rc) return rc;
        break;
    }
    default:
        return fail_unexpected(r, "a value");
    }
    r->state = S_AFTER;
    return HANU_OK;
}

static int scan_key(jreader *r, jtok *t)
{
    if (r->p[r->pos] != '"') return fail_unexpected(r, "a string key");
    int rc = scan_string(r, t);
    if (rc) return rc;
    t->kind = JT_KEY;
    if (r->dup_check && (rc = push_key(r, t))) return rc;
    while (r->pos < r->len && is_ws(r->p[r->pos])) r->pos++;
    if (r->pos >= r->len) return fail_eof(r);
    if (r->p[r->pos] != ':') return fail_unexpected(r, "':' after a key");
    r->pos++;
    r->state = S_VALUE;
    return HANU_OK;
}

int jr_next(jreader *r, jtok *t)
{
    const uint8_t *p = r->p;
    size_t len = r->len;
    for (;;) {
        while (r->pos < len && is_ws(p[r->pos])) r->pos++;
        if (r->state == S_DONE || (r->state == S_AFTER && r->depth == 0)) {
            if (r->pos < len) return fail_unexpected(r, "the end of the document");
            r->state = S_DONE;
            t->kind = JT_EOF;
            t->start = t->end = len;
            return HANU_OK;
        }
        if (r->pos >= len) return fail_eof(r);
        uint8_t c = p[r->pos];
        switch (r->state) {
        case S_VALUE:
            return scan_value(r, t);
        case S_VALUE_OR_END:
            if (c == ']') return close_container(r, t);
            return scan_value(r, t);
        case S_KEY_OR_END:
            if (c == '}') return close_container(r, t);
            return scan_key(r, t);
        case S_KEY:
            return scan_key(r, t);
        case S_AFTER: {
            int is_obj = r->is_obj[r->depth];
            if (c == ',') {
                r->pos++;
                r->state = is_obj ? S_KEY : S_VALUE;
                continue;
            }
            if (c == (is_obj ? '}' : ']')) return close_container(r, t);
            return fail_unexpected(r, is_obj ? "',' or '}'" : "',' or ']'");
        }
        }
        return jr_fail(r, HANU_ERR_INVALID, r->pos, 1, "internal reader state");
    }
}
