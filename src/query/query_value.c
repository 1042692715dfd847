/*
 * query_value.c: what every part of the query module leans on: the total
 * order over JSON values, error messages with their JSON path, field path
 * checks and the MongoDB-style path walk (query_internal.h).
 */
#include "query/query_internal.h"

#include <stdarg.h>
#include <stdio.h>

/* ---- errors ---- */

/* Drops a UTF-8 sequence cut short at the end of s[0..len). */
static size_t utf8_trim_cut(const char *s, size_t len)
{
    size_t i = len, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0) return len;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return need == back + 1 ? len : i - 1;
}

size_t query_utf8_prefix(const char *s, size_t len, size_t max)
{
    if (len <= max) return len;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80) max--;
    return max;
}

int query_fail(query_error *err, int status, const char *json_path, const char *fmt, ...)
{
    if (!err) return status;
    int n = snprintf(err->msg, sizeof err->msg, "%s: ", json_path);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof err->msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    size_t len = strlen(err->msg);
    err->msg[utf8_trim_cut(err->msg, len)] = '\0';
    return status;
}

void json_path_init(json_path_buf *p, const char *root)
{
    snprintf(p->s, sizeof p->s, "%s", root);
    p->len = strlen(p->s);
}

static size_t json_path_append(json_path_buf *p, const char *fmt, const char *key, size_t n)
{
    size_t old = p->len;
    if (old < sizeof p->s - 1) {
        int w = key ? snprintf(p->s + old, sizeof p->s - old, fmt, (int)HANU_MIN(n, 100), key)
                    : snprintf(p->s + old, sizeof p->s - old, fmt, n);
        if (w > 0) p->len = HANU_MIN(old + (size_t)w, sizeof p->s - 1);
        p->len = utf8_trim_cut(p->s, p->len);
        p->s[p->len] = '\0';
    }
    return old;
}

size_t json_path_push_key(json_path_buf *p, const char *key, size_t key_len)
{
    return json_path_append(p, ".%.*s", key, key_len);
}

size_t json_path_push_index(json_path_buf *p, size_t i)
{
    return json_path_append(p, "[%zu]", NULL, i);
}

int query_path_check(const char *path, size_t len, const char *json_path, query_error *err)
{
    if (len == 0) return query_fail(err, HANU_ERR_INVALID, json_path, "empty field path");
    if (len > QUERY_MAX_PATH_BYTES)
        return query_fail(err, HANU_ERR_TOO_LARGE, json_path, "field path longer than %d bytes",
                          QUERY_MAX_PATH_BYTES);
    if (memchr(path, '\0', len)) return query_fail(err, HANU_ERR_INVALID, json_path, "NUL in a field path");
    size_t seg = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || path[i] == '.') {
            if (i == seg) return query_fail(err, HANU_ERR_INVALID, json_path, "empty segment in field path");
            seg = i + 1;
        } else if (i == seg && path[i] == '$') {
            return query_fail(err, HANU_ERR_INVALID, json_path,
                              "a field path segment cannot start with $");
        }
    }
    return 0;
}

/* ---- order ---- */

/* Type ranks of the total order: missing = null < numbers < strings < objects < arrays < booleans. */
static int type_rank(const json_value *v)
{
    if (!v) return 0;
    switch (v->type) {
    case JSON_NULL: return 0;
    case JSON_NUMBER: return 1;
    case JSON_STRING: return 2;
    case JSON_OBJECT: return 3;
    case JSON_ARRAY: return 4;
    case JSON_BOOL: return 5;
    }
    return 6;
}

static int cmp3(double a, double b) { return (a > b) - (a < b); }

/* An int64 against a double, exactly (2^63 does not fit, and neither does a fraction). */
static int compare_int_double(int64_t i, double d)
{
    if (d >= 9223372036854775808.0) return -1;
    if (d < -9223372036854775808.0) return 1;
    int64_t t = (int64_t)d;         /* truncates toward zero, in range */
    if (i != t) return (i > t) - (i < t);
    double frac = d - (double)t;
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

static int compare_numbers(const json_value *a, const json_value *b)
{
    if (a->is_int && b->is_int) return (a->u.num.i > b->u.num.i) - (a->u.num.i < b->u.num.i);
    if (a->is_int) return compare_int_double(a->u.num.i, b->u.num.d);
    if (b->is_int) return -compare_int_double(b->u.num.i, a->u.num.d);
    return cmp3(a->u.num.d, b->u.num.d);
}

static int compare_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, HANU_MIN(alen, blen));
    if (c) return c < 0 ? -1 : 1;
    return (alen > blen) - (alen < blen);
}

int query_value_compare(const json_value *a, const json_value *b)
{
    int ra = type_rank(a), rb = type_rank(b);
    if (ra != rb) return ra < rb ? -1 : 1;
    if (!a || !b || a->type == JSON_NULL) return 0;
    switch (a->type) {
    case JSON_NUMBER: return compare_numbers(a, b);
    case JSON_STRING: return compare_bytes(a->u.str.ptr, a->u.str.len, b->u.str.ptr, b->u.str.len);
    case JSON_BOOL: return (a->u.boolean > b->u.boolean) - (a->u.boolean < b->u.boolean);
    case JSON_ARRAY:
    case JSON_OBJECT: {
        size_t na = a->u.kids.n, nb = b->u.kids.n;
        for (size_t i = 0; i < na && i < nb; i++) {
            const json_value *x = &a->u.kids.items[i], *y = &b->u.kids.items[i];
            if (a->type == JSON_OBJECT) {
                int c = compare_bytes(x->key, x->key_len, y->key, y->key_len);
                if (c) return c;
            }
            int c = query_value_compare(x, y);
            if (c) return c;
        }
        return (na > nb) - (na < nb);
    }
    default: return 0;
    }
}

int query_value_equal(const json_value *a, const json_value *b)
{
    return query_value_compare(a, b) == 0;
}

/* ---- the path walk ---- */

typedef struct walk {
    query_visit_fn fn;
    void *ctx;
    size_t visits;
} walk;

static int walk_yield(walk *w, const json_value *v, int whole)
{
    w->visits++;
    return w->fn(w->ctx, v, whole);
}

/* A numeric segment: digits only, no leading zero (except "0" itself). */
static int segment_index(const char *s, size_t n, size_t *idx)
{
    if (n == 0 || n > 9 || (n > 1 && s[0] == '0')) return 0;
    size_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (size_t)(s[i] - '0');
    }
    *idx = v;
    return 1;
}

static int walk_value(walk *w, const json_value *v, const char *path, size_t len);

/* An object: every member whose name is the rest of the path or a prefix of
 * it ending at a '.', so {"a":{"b":1}} and {"a.b":1} both reach "a.b" (as
 * the index's leaf paths do). */
static int walk_object(walk *w, const json_value *obj, const char *path, size_t len)
{
    size_t before = w->visits;
    for (size_t i = 0; i < obj->u.kids.n; i++) {
        const json_value *m = &obj->u.kids.items[i];
        size_t k = m->key_len;
        if (k > len || memcmp(m->key, path, k) != 0) continue;
        int rc = 0;
        if (k == len) rc = walk_yield(w, m, 0);
        else if (path[k] == '.') rc = walk_value(w, m, path + k + 1, len - k - 1);
        if (rc) return rc;
    }
    return w->visits == before ? walk_yield(w, NULL, 0) : 0;
}

static int walk_array(walk *w, const json_value *arr, const char *path, size_t len)
{
    size_t before = w->visits;
    const char *dot = memchr(path, '.', len);
    size_t seg = dot ? (size_t)(dot - path) : len;
    size_t idx;
    int rc = 0;
    if (segment_index(path, seg, &idx) && idx < arr->u.kids.n) {
        const json_value *e = &arr->u.kids.items[idx];
        rc = dot ? walk_value(w, e, dot + 1, len - seg - 1) : walk_yield(w, e, 1);
        if (rc) return rc;
    }
    for (size_t i = 0; i < arr->u.kids.n; i++) {
        const json_value *e = &arr->u.kids.items[i];
        if (e->type != JSON_OBJECT) continue;
        if ((rc = walk_object(w, e, path, len)) != 0) return rc;
    }
    return w->visits == before ? walk_yield(w, NULL, 0) : 0;
}

static int walk_value(walk *w, const json_value *v, const char *path, size_t len)
{
    if (v->type == JSON_OBJECT) return walk_object(w, v, path, len);
    if (v->type == JSON_ARRAY) return walk_array(w, v, path, len);
    return walk_yield(w, NULL, 0);
}

int query_path_walk(const json_value *root, const char *path, size_t len, query_visit_fn fn, void *ctx)
{
    walk w = { .fn = fn, .ctx = ctx, .visits = 0 };
    return walk_value(&w, root, path, len);
}
