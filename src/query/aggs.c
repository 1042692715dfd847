/*
 * aggs.c: aggregation specs and their brute-force evaluation (the oracle for
 * the index's column-based aggregations). Values are gathered with the same
 * path walk as filters, arrays flattened one level, so a document with
 * "tags":["a","b"] counts once in the bucket of "a" and once in that of "b".
 * A document counts at most once per bucket.
 */
#include "query/query_internal.h"

#include <math.h>
#include <stdlib.h>

/* ---- parsing ---- */

static int check_keys(const json_value *obj, const char *const *allowed, const char *json_path,
                      query_error *err)
{
    for (size_t i = 0; i < obj->u.kids.n; i++) {
        const char *k = obj->u.kids.items[i].key;
        int ok = 0;
        for (size_t a = 0; allowed[a]; a++) ok |= strcmp(k, allowed[a]) == 0;
        if (!ok)
            return query_fail(err, HANU_ERR_INVALID, json_path, "unknown key \"%.*s\"",
                              (int)query_utf8_prefix(k, strlen(k), 64), k);
    }
    return 0;
}

static int parse_body(const json_value *body, agg_spec *a, json_path_buf *jp, query_error *err)
{
    static const char *const terms_keys[] = { "field", "size", NULL };
    static const char *const stats_keys[] = { "field", NULL };
    static const char *const histogram_keys[] = { "field", "interval", NULL };
    const char *const *allowed = a->kind == AGG_TERMS ? terms_keys : a->kind == AGG_STATS ? stats_keys
                                                                                          : histogram_keys;
    if (body->type != JSON_OBJECT) return query_fail(err, HANU_ERR_INVALID, jp->s, "must be an object");
    int rc = check_keys(body, allowed, jp->s, err);
    if (rc) return rc;
    const json_value *field = json_get(body, "field");
    const char *f;
    size_t flen;
    if (json_as_string(field, &f, &flen) != 0)
        return query_fail(err, HANU_ERR_INVALID, jp->s, "needs \"field\", a field path string");
    size_t mark = json_path_push_key(jp, "field", 5);
    rc = query_path_check(f, flen, jp->s, err);
    json_path_restore(jp, mark);
    if (rc) return rc;
    memcpy(a->field, f, flen + 1);
    if (a->kind == AGG_TERMS) {
        const json_value *size = json_get(body, "size");
        int64_t n = AGGS_DEFAULT_TERMS_SIZE;
        if (size && (json_as_int64(size, &n) != 0 || n < 1 || n > AGGS_MAX_TERMS_SIZE))
            return query_fail(err, HANU_ERR_INVALID, jp->s, "\"size\" must be an integer from 1 to %d",
                              AGGS_MAX_TERMS_SIZE);
        a->size = (uint32_t)n;
    } else if (a->kind == AGG_HISTOGRAM) {
        if (json_as_double(json_get(body, "interval"), &a->interval) != 0 || !(a->interval > 0))
            return query_fail(err, HANU_ERR_INVALID, jp->s, "needs \"interval\", a number above 0");
    }
    return 0;
}

static int parse_agg(const char *input, const json_value *m, agg_spec *a, json_path_buf *jp, query_error *err)
{
    static const char *const agg_keys[] = { "terms", "stats", "histogram", "filter", NULL };
    if (m->key_len == 0 || m->key_len > QUERY_MAX_PATH_BYTES || memchr(m->key, '\0', m->key_len))
        return query_fail(err, HANU_ERR_INVALID, jp->s, "an aggregation name has 1 to %d bytes and no NUL",
                          QUERY_MAX_PATH_BYTES);
    memcpy(a->name, m->key, m->key_len + 1);
    if (m->type != JSON_OBJECT) return query_fail(err, HANU_ERR_INVALID, jp->s, "must be an object");
    int rc = check_keys(m, agg_keys, jp->s, err);
    if (rc) return rc;
    const json_value *body = NULL;
    for (size_t i = 0; i < m->u.kids.n; i++) {
        const json_value *k = &m->u.kids.items[i];
        agg_kind kind = strcmp(k->key, "terms") == 0 ? AGG_TERMS : strcmp(k->key, "stats") == 0 ? AGG_STATS
                      : strcmp(k->key, "histogram") == 0 ? AGG_HISTOGRAM : 0;
        if (!kind) continue;
        if (body) return query_fail(err, HANU_ERR_INVALID, jp->s, "holds more than one aggregation");
        body = k;
        a->kind = kind;
    }
    if (!body) return query_fail(err, HANU_ERR_INVALID, jp->s, "needs one of terms, stats or histogram");
    size_t mark = json_path_push_key(jp, body->key, body->key_len);
    rc = parse_body(body, a, jp, err);
    json_path_restore(jp, mark);
    const json_value *fv = json_get(m, "filter");
    if (rc == 0 && fv) {
        mark = json_path_push_key(jp, "filter", 6);
        rc = filter_parse_value(input, fv, jp->s, &a->filter, err);
        json_path_restore(jp, mark);
    }
    return rc;
}

int aggs_parse(const char *input, const json_value *v, const char *json_path, aggs_spec *out, query_error *err)
{
    memset(out, 0, sizeof *out);
    if (v->type != JSON_OBJECT || v->u.kids.n == 0)
        return query_fail(err, HANU_ERR_INVALID, json_path, "must be an object of named aggregations");
    if (v->u.kids.n > AGGS_MAX)
        return query_fail(err, HANU_ERR_TOO_LARGE, json_path, "more than %d aggregations", AGGS_MAX);
    json_path_buf jp;
    json_path_init(&jp, json_path);
    for (size_t i = 0; i < v->u.kids.n; i++) {
        const json_value *m = &v->u.kids.items[i];
        size_t mark = json_path_push_key(&jp, m->key, m->key_len);
        out->n = i + 1;
        int rc = parse_agg(input, m, &out->aggs[i], &jp, err);
        json_path_restore(&jp, mark);
        if (rc) { aggs_free(out); return rc; }
    }
    return 0;
}

void aggs_free(aggs_spec *a)
{
    for (size_t i = 0; i < a->n; i++) filter_free(a->aggs[i].filter);
    memset(a, 0, sizeof *a);
}

/* ---- evaluation ---- */

/* The values of one document at a field: scalars reached, arrays flattened. */
typedef struct value_list {
    const json_value **v;
    size_t n, cap;
    int nomem;
} value_list;

static void list_add(value_list *l, const json_value *v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        const json_value **nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) { l->nomem = 1; return; }
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

static int gather(void *ctx, const json_value *v, int whole)
{
    value_list *l = ctx;
    (void)whole;   /* aggregations take the elements of any array reached */
    if (!v) return 0;
    if (v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->u.kids.n; i++) list_add(l, &v->u.kids.items[i]);
    } else {
        list_add(l, v);
    }
    return 0;
}

static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Terms are strings of at most TERMS_MAX_STRING_CHARS characters, numbers
 * and booleans (the index's exact terms without null). */
static int is_term(const json_value *v)
{
    if (v->type == JSON_STRING) return utf8_chars(v->u.str.ptr, v->u.str.len) <= TERMS_MAX_STRING_CHARS;
    return v->type == JSON_NUMBER || v->type == JSON_BOOL;
}

/* A bucket owns its key (a copy: string bytes in `str`). */
typedef struct bucket {
    json_value key;             /* terms */
    char *str;
    double num;                 /* histogram */
    uint64_t count;
    uint64_t last_doc;          /* the document that counted last: once per doc */
} bucket;

struct agg_state {
    const agg_spec *a;
    bucket *b;
    size_t n, cap;
    uint32_t *slots;            /* open addressing over b: index + 1, 0 free */
    size_t nslots;
    uint64_t docs;              /* documents added with agg_state_add_doc */
    uint64_t count;             /* stats */
    double sum;
    json_value min, max;
    int has_min;
    value_list vals;
};

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* Equal keys hash equal: numbers by value (1 and 1.0), strings by bytes. */
static uint64_t key_hash(const agg_state *s, const json_value *v)
{
    if (s->a->kind == AGG_HISTOGRAM) {
        double d = v->u.num.d == 0 ? 0 : v->u.num.d;
        uint64_t bits;
        memcpy(&bits, &d, 8);
        return mix(bits);
    }
    switch (v->type) {
    case JSON_STRING: return hanu_hash64(v->u.str.ptr, v->u.str.len, 5);
    case JSON_BOOL: return mix(2 + (uint64_t)v->u.boolean);
    default: {
        double d = v->is_int ? (double)v->u.num.i : v->u.num.d;
        if (d == 0) d = 0;
        uint64_t bits;
        memcpy(&bits, &d, 8);
        return mix(bits ^ 4);
    }
    }
}

static int bucket_same(const agg_state *s, const bucket *b, const json_value *v)
{
    return s->a->kind == AGG_HISTOGRAM ? b->num == v->u.num.d : query_value_equal(&b->key, v);
}

static int rehash(agg_state *s)
{
    size_t nslots = s->nslots ? s->nslots * 2 : 64;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return HANU_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++) {
        json_value k = s->b[i].key;
        if (s->a->kind == AGG_HISTOGRAM) k.u.num.d = s->b[i].num;
        size_t at = key_hash(s, &k) & (nslots - 1);
        while (slots[at]) at = (at + 1) & (nslots - 1);
        slots[at] = (uint32_t)i + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
    return 0;
}

/* The bucket of v (for a histogram, v holds the bucket key), created when new;
 * *b = NULL with 0 when the histogram is full (the caller reports it). */
static int bucket_of(agg_state *s, const json_value *v, bucket **out)
{
    *out = NULL;
    if (2 * (s->n + 1) > s->nslots && rehash(s)) return HANU_ERR_NOMEM;
    size_t at = key_hash(s, v) & (s->nslots - 1);
    for (; s->slots[at]; at = (at + 1) & (s->nslots - 1))
        if (bucket_same(s, &s->b[s->slots[at] - 1], v)) { *out = &s->b[s->slots[at] - 1]; return 0; }
    if (s->a->kind == AGG_HISTOGRAM && s->n == AGGS_MAX_HISTOGRAM_BUCKETS) return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        bucket *nb = realloc(s->b, cap * sizeof *nb);
        if (!nb) return HANU_ERR_NOMEM;
        s->b = nb;
        s->cap = cap;
    }
    bucket *b = &s->b[s->n];
    memset(b, 0, sizeof *b);
    b->key = *v;
    b->key.key = NULL;
    b->num = v->u.num.d;
    if (s->a->kind == AGG_TERMS && v->type == JSON_STRING) {
        if (!(b->str = malloc(v->u.str.len + 1))) return HANU_ERR_NOMEM;
        memcpy(b->str, v->u.str.ptr, v->u.str.len);
        b->str[v->u.str.len] = '\0';
        b->key.u.str.ptr = b->str;
    }
    s->slots[at] = (uint32_t)++s->n;
    *out = b;
    return 0;
}

static int by_count_then_key(const void *x, const void *y)
{
    const bucket *a = x, *b = y;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return query_value_compare(&a->key, &b->key);
}

static int by_number(const void *x, const void *y)
{
    const bucket *a = x, *b = y;
    return (a->num > b->num) - (a->num < b->num);
}

/* Numbers are written as integers when they are ones (1 and 1.0 are one key). */
static void write_number(json_writer *w, double d, const json_value *v)
{
    if (v && v->is_int) json_write_int64(w, v->u.num.i);
    else if (!isfinite(d)) json_write_null(w);     /* a sum that overflowed a double */
    else if (d == floor(d) && fabs(d) < 9007199254740992.0) json_write_int64(w, (int64_t)d);
    else json_write_double(w, d);
}

static void write_value(json_writer *w, const json_value *v)
{
    switch (v->type) {
    case JSON_STRING: json_write_string(w, v->u.str.ptr, v->u.str.len); break;
    case JSON_NUMBER: write_number(w, v->u.num.d, v); break;
    case JSON_BOOL: json_write_bool(w, v->u.boolean); break;
    default: json_write_null(w); break;
    }
}

/* Counts v for n documents; doc is the document's number for once-per-doc
 * (0: n distinct documents that each hold v once). */
static int add_one(agg_state *s, const json_value *v, uint64_t n, uint64_t doc, query_error *err)
{
    const agg_spec *a = s->a;
    json_value hv;
    if (a->kind == AGG_TERMS) {
        if (!is_term(v)) return 0;
    } else if (v->type != JSON_NUMBER) {
        return 0;
    } else if (a->kind == AGG_STATS) {
        s->count += n;
        s->sum += v->u.num.d * (double)n;
        if (!s->has_min || query_value_compare(v, &s->min) < 0) s->min = *v;
        if (!s->has_min || query_value_compare(v, &s->max) > 0) s->max = *v;
        s->has_min = 1;
        return 0;
    } else {
        double key = floor(v->u.num.d / a->interval) * a->interval;
        if (!isfinite(key))
            return query_fail(err, HANU_ERR_TOO_LARGE, "aggs", "%.*s: value %g is out of the histogram's range",
                              (int)query_utf8_prefix(a->name, strlen(a->name), 64), a->name, v->u.num.d);
        hv = (json_value){ .type = JSON_NUMBER, .u.num.d = key };
        v = &hv;
    }
    bucket *b;
    int rc = bucket_of(s, v, &b);
    if (rc) return rc;
    if (!b)
        return query_fail(err, HANU_ERR_TOO_LARGE, "aggs", "%.*s: more than %d histogram buckets",
                          (int)query_utf8_prefix(a->name, strlen(a->name), 64), a->name, AGGS_MAX_HISTOGRAM_BUCKETS);
    if (!doc) b->count += n;
    else if (b->last_doc != doc) { b->count++; b->last_doc = doc; }
    return 0;
}

int agg_state_new(const agg_spec *a, agg_state **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return HANU_ERR_NOMEM;
    (*out)->a = a;
    return 0;
}

void agg_state_free(agg_state *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->b[i].str);
    free(s->b);
    free(s->slots);
    free(s->vals.v);
    free(s);
}

int agg_state_add_value(agg_state *s, const json_value *v, uint64_t n, query_error *err)
{
    return n ? add_one(s, v, n, 0, err) : 0;
}

int agg_state_add_doc(agg_state *s, const json_value *root, query_error *err)
{
    s->vals.n = 0;
    query_path_walk(root, s->a->field, strlen(s->a->field), gather, &s->vals);
    if (s->vals.nomem) return HANU_ERR_NOMEM;
    uint64_t doc = ++s->docs;
    for (size_t i = 0; i < s->vals.n; i++) {
        int rc = add_one(s, s->vals.v[i], 1, doc, err);
        if (rc) return rc;
    }
    return 0;
}

static void write_buckets(json_writer *w, const agg_spec *a, agg_state *bs)
{
    size_t shown = bs->n;
    uint64_t other = 0;
    if (a->kind == AGG_TERMS) {
        if (bs->n > 1) qsort(bs->b, bs->n, sizeof *bs->b, by_count_then_key);
        shown = HANU_MIN(bs->n, (size_t)a->size);
        for (size_t i = shown; i < bs->n; i++) other += bs->b[i].count;
    } else {
        if (bs->n > 1) qsort(bs->b, bs->n, sizeof *bs->b, by_number);
    }
    json_write_key(w, "buckets", 7);
    json_write_array_begin(w);
    for (size_t i = 0; i < shown; i++) {
        json_write_object_begin(w);
        json_write_key(w, "key", 3);
        if (a->kind == AGG_TERMS) write_value(w, &bs->b[i].key);
        else write_number(w, bs->b[i].num, NULL);
        json_write_key(w, "count", 5);
        json_write_int64(w, (int64_t)bs->b[i].count);
        json_write_object_end(w);
    }
    json_write_array_end(w);
    if (a->kind == AGG_TERMS) {
        json_write_key(w, "other", 5);
        json_write_int64(w, (int64_t)other);
    }
}

static void write_stats(json_writer *w, const agg_state *s)
{
    json_write_key(w, "count", 5);
    json_write_int64(w, (int64_t)s->count);
    json_write_key(w, "min", 3);
    if (s->has_min) write_value(w, &s->min); else json_write_null(w);
    json_write_key(w, "max", 3);
    if (s->has_min) write_value(w, &s->max); else json_write_null(w);
    json_write_key(w, "sum", 3);
    write_number(w, s->sum, NULL);
    json_write_key(w, "avg", 3);
    if (s->count) write_number(w, s->sum / (double)s->count, NULL); else json_write_null(w);
}

int agg_state_write(agg_state *s, json_writer *w)
{
    const agg_spec *a = s->a;
    free(s->slots);   /* sorting moves the buckets */
    s->slots = NULL;
    s->nslots = 0;
    json_write_key(w, a->name, strlen(a->name));
    json_write_object_begin(w);
    if (a->kind == AGG_STATS) write_stats(w, s);
    else write_buckets(w, a, s);
    json_write_object_end(w);
    return json_writer_status(w);
}

static int eval_one(const agg_spec *a, const json_value *const *docs, size_t n, json_writer *w, query_error *err)
{
    agg_state *s;
    int rc = agg_state_new(a, &s);
    for (size_t d = 0; d < n && rc == 0; d++)
        if (!a->filter || filter_match_value(a->filter, docs[d])) rc = agg_state_add_doc(s, docs[d], err);
    if (rc == 0) rc = agg_state_write(s, w);
    agg_state_free(s);
    return rc;
}

int aggs_eval(const aggs_spec *a, const json_value *const *docs, size_t n, hanu_buf *out, query_error *err)
{
    json_writer w;
    json_writer_init(&w, out);
    json_write_object_begin(&w);
    for (size_t i = 0; i < a->n; i++) {
        int rc = eval_one(&a->aggs[i], docs, n, &w, err);
        if (rc) return rc;
    }
    json_write_object_end(&w);
    return json_writer_status(&w);
}
