/*
 * find.c: the first query executor over a snapshot. The index narrows, the
 * brute-force evaluator decides: each filter node gives a superset of the
 * documents it matches (per segment, sorted live ordinals, or "all" when the
 * index cannot answer it: $ne, $nin, $not, $nor, $exists, null (it matches
 * missing), arrays and objects as operands, long strings, positional paths),
 * AND intersects, OR unites, and every candidate is then checked with
 * filter_match on its stored bytes (store_get). So the result always equals
 * filter_match over the collection's documents. Sorting parses the matches
 * and orders them with the query module's sort keys.
 */
#include "index/index.h"
#include "json/json.h"
#include "query/query.h"
#include "store/store.h"

#include <stdlib.h>

typedef struct cand {            /* candidates: all documents, or sorted ordinals per segment */
    int all;
    uint32_t **ords;
    uint32_t *n;
} cand;

static void cand_free(cand *c, uint32_t nseg)
{
    for (uint32_t i = 0; c->ords && i < nseg; i++) free(c->ords[i]);
    free(c->ords);
    free(c->n);
    *c = (cand){0};
}

static int cand_init(cand *c, uint32_t nseg, int all)
{
    *c = (cand){ all, calloc(nseg ? nseg : 1, sizeof *c->ords), calloc(nseg ? nseg : 1, sizeof *c->n) };
    return c->ords && c->n ? HANU_OK : HANU_ERR_NOMEM;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted, without repeats. */
static uint32_t uniq(uint32_t *v, uint32_t n)
{
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_u32);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!k || v[k - 1] != v[i]) v[k++] = v[i];
    return k;
}

/* Adds the postings of keys [lo, hi] (byte order, inclusive) of segment s. */
static int add_range(cand *c, const index_segment *seg, uint32_t s, const uint8_t *lo, size_t lo_len,
                     const uint8_t *hi, size_t hi_len)
{
    uint32_t terms = index_segment_terms(seg);
    for (uint32_t t = index_segment_term_lower_bound(seg, lo, lo_len); t < terms; t++) {
        size_t len;
        uint32_t df;
        const uint8_t *key = index_segment_term(seg, t, &len, &df);
        size_t m = len < hi_len ? len : hi_len;
        int d = memcmp(key, hi, m);
        if (d > 0 || (d == 0 && len > hi_len)) break;
        uint32_t *p = realloc(c->ords[s], (c->n[s] + df) * sizeof *p);
        if (!p) return HANU_ERR_NOMEM;
        c->ords[s] = p;
        index_postings pc;
        index_postings_open(&pc, seg, t);
        for (uint32_t o = pc.doc; o != INDEX_ORD_END; o = index_postings_next(&pc))
            p[c->n[s]++] = o;
    }
    return HANU_OK;
}

/* A path the terms know: no positional (all-digit) part. */
static int path_indexed(const char *p, size_t len)
{
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && p[i] != '.') continue;
        size_t k = start;
        while (k < i && p[k] >= '0' && p[k] <= '9') k++;
        if (k == i) return 0;   /* empty or all digits */
        start = i + 1;
    }
    return len <= INDEX_PATH_MAX;
}

/* The term key of value v at path (0 when v is no keyword term, or null). */
static size_t value_key(uint8_t *key, const filter_node *n, const json_value *v)
{
    switch (v->type) {
    case JSON_BOOL:
        return index_key(key, n->path, n->path_len, v->u.boolean ? INDEX_KEY_TRUE : INDEX_KEY_FALSE, NULL, 0, 0);
    case JSON_NUMBER:
        return index_key(key, n->path, n->path_len, INDEX_KEY_NUMBER, NULL, 0, v->u.num.d);
    case JSON_STRING:
        if (v->u.str.len > INDEX_KEYWORD_MAX) return 0;
        return index_key(key, n->path, n->path_len, INDEX_KEY_STRING, v->u.str.ptr, v->u.str.len, 0);
    default:
        return 0;
    }
}

static int node_cand(const index_snapshot *snap, const filter_node *nodes, uint32_t i, cand *out);

static int combine(const index_snapshot *snap, const filter_node *nodes, const filter_node *n, int is_and,
                   cand *out)
{
    uint32_t nseg = snap->nsegments;
    int rc = cand_init(out, nseg, is_and);
    for (uint32_t k = 0; k < n->count && !rc; k++) {
        cand kid;
        rc = node_cand(snap, nodes, n->first + k, &kid);
        if (rc) break;
        if (is_and && !kid.all) {
            for (uint32_t s = 0; s < nseg; s++) {
                if (out->all) {
                    out->ords[s] = kid.ords[s];
                    out->n[s] = kid.n[s];
                    kid.ords[s] = NULL;
                    continue;
                }
                uint32_t w = 0, a = 0, b = 0;
                while (a < out->n[s] && b < kid.n[s]) {
                    if (out->ords[s][a] < kid.ords[s][b]) a++;
                    else if (out->ords[s][a] > kid.ords[s][b]) b++;
                    else { out->ords[s][w++] = out->ords[s][a]; a++; b++; }
                }
                out->n[s] = w;
            }
            out->all = 0;
        } else if (!is_and && !out->all) {
            if (kid.all) out->all = 1;
            for (uint32_t s = 0; s < nseg && !out->all && !rc; s++) {
                uint32_t *p = realloc(out->ords[s], (out->n[s] + kid.n[s] + 1) * sizeof *p);
                if (!p) { rc = HANU_ERR_NOMEM; break; }
                if (kid.n[s]) memcpy(p + out->n[s], kid.ords[s], kid.n[s] * sizeof *p);
                out->ords[s] = p;
                out->n[s] = uniq(p, out->n[s] + kid.n[s]);
            }
        }
        cand_free(&kid, nseg);
    }
    return rc;
}

static int node_cand(const index_snapshot *snap, const filter_node *nodes, uint32_t i, cand *out)
{
    const filter_node *n = &nodes[i];
    uint32_t nseg = snap->nsegments;
    if (n->op == FILTER_AND || n->op == FILTER_OR) return combine(snap, nodes, n, n->op == FILTER_AND, out);
    int rc = cand_init(out, nseg, 1);
    if (rc || !n->path || !path_indexed(n->path, n->path_len)) return rc;
    uint8_t lo[INDEX_KEY_MAX], hi[INDEX_KEY_MAX];
    size_t lo_len = 0, hi_len = 0;
    const json_value *v = n->operand;
    switch (n->op) {
    case FILTER_EQ:
        if (!(lo_len = value_key(lo, n, v))) return rc;
        for (uint32_t s = 0; s < nseg && !rc; s++) rc = add_range(out, snap->segments[s].seg, s, lo, lo_len, lo, lo_len);
        break;
    case FILTER_IN:
        for (size_t k = 0; k < json_len(v); k++)
            if (!value_key(lo, n, json_at(v, k))) return rc;   /* null, arrays...: not answered */
        for (size_t k = 0; k < json_len(v) && !rc; k++) {
            lo_len = value_key(lo, n, json_at(v, k));
            for (uint32_t s = 0; s < nseg && !rc; s++) rc = add_range(out, snap->segments[s].seg, s, lo, lo_len, lo, lo_len);
        }
        break;
    case FILTER_GT:
    case FILTER_GTE:
    case FILTER_LT:
    case FILTER_LTE:
        /* Numbers only (strings may be longer than a keyword); bounds inclusive, checked later. */
        if (v->type != JSON_NUMBER) return rc;
        lo_len = index_key(lo, n->path, n->path_len, INDEX_KEY_NUMBER, NULL, 0, 0);
        hi_len = lo_len;
        if (n->op == FILTER_GT || n->op == FILTER_GTE) {
            index_key(lo, n->path, n->path_len, INDEX_KEY_NUMBER, NULL, 0, v->u.num.d);
            memset(hi + hi_len - 8, 0xff, 8);
            memcpy(hi, lo, hi_len - 8);
        } else {
            index_key(hi, n->path, n->path_len, INDEX_KEY_NUMBER, NULL, 0, v->u.num.d);
            memset(lo + lo_len - 8, 0, 8);
        }
        for (uint32_t s = 0; s < nseg && !rc; s++) rc = add_range(out, snap->segments[s].seg, s, lo, lo_len, hi, hi_len);
        break;
    default:
        return rc;
    }
    out->all = 0;
    for (uint32_t s = 0; s < nseg; s++) out->n[s] = uniq(out->ords[s], out->n[s]);
    return rc;
}

static int append_hit(index_hits *h, const char *id, size_t len, uint64_t txn, const hanu_buf *doc)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        index_hit *p = realloc(h->hits, cap * sizeof *p);
        if (!p) return HANU_ERR_NOMEM;
        h->hits = p;
        h->cap = cap;
    }
    char *copy = malloc(len + 1), *bytes = malloc(doc->len ? doc->len : 1);
    if (!copy || !bytes) {
        free(copy);
        free(bytes);
        return HANU_ERR_NOMEM;
    }
    memcpy(copy, id, len);
    copy[len] = '\0';
    if (doc->len) memcpy(bytes, doc->data, doc->len);
    h->hits[h->n++] = (index_hit){ copy, len, txn, bytes, doc->len };
    return HANU_OK;
}

static int cmp_hit_id(const void *a, const void *b)
{
    const index_hit *x = a, *y = b;
    size_t m = x->id_len < y->id_len ? x->id_len : y->id_len;
    int d = memcmp(x->id, y->id, m);
    return d ? d : (x->id_len > y->id_len) - (x->id_len < y->id_len);
}

/* Checks one candidate against its stored document. */
static int check(store *st, const index_snapshot *snap, const filter *f, uint32_t s, uint32_t ord,
                 hanu_buf *val, index_hits *out)
{
    if (!index_snapshot_live(snap, s, ord)) return HANU_OK;
    out->checked++;
    size_t len;
    const char *id = index_segment_doc_id(snap->segments[s].seg, ord, &len);
    uint64_t token;
    hanu_buf_reset(val);
    int rc = store_get(st, snap->db, id, len, val, &token);
    if (rc == HANU_ERR_NOT_FOUND) return HANU_OK;   /* deleted after the snapshot */
    if (rc) return rc;
    int m = filter_match(f, (const char *)val->data, val->len);
    if (m < 0) return m == HANU_ERR_INVALID ? HANU_OK : m;
    return m ? append_hit(out, id, len, token, val) : HANU_OK;
}

/* A hit with its parsed document and sort keys. */
typedef struct sorted_hit {
    index_hit hit;
    json_doc *doc;
    const json_value *keys[SORT_MAX_KEYS];
} sorted_hit;

static int cmp_sorted(const void *a, const void *b, void *spec)
{
    const sorted_hit *x = a, *y = b;
    return sort_compare(spec, x->keys, x->hit.id, x->hit.id_len, y->keys, y->hit.id, y->hit.id_len);
}

static int sort_hits(index_hits *h, const sort_spec *spec, query_error *err)
{
    sorted_hit *v = calloc(h->n, sizeof *v);
    if (!v) return HANU_ERR_NOMEM;
    int rc = HANU_OK;
    for (size_t i = 0; i < h->n && !rc; i++) {
        v[i].hit = h->hits[i];
        rc = json_doc_parse(h->hits[i].doc, h->hits[i].doc_len, NULL, &v[i].doc, NULL);
        if (!rc) rc = sort_keys_of(spec, json_doc_root(v[i].doc), v[i].keys, err);
    }
    if (!rc) {
        qsort_r(v, h->n, sizeof *v, cmp_sorted, (void *)spec);
        for (size_t i = 0; i < h->n; i++) h->hits[i] = v[i].hit;
    }
    for (size_t i = 0; i < h->n; i++) json_doc_free(v[i].doc);
    free(v);
    return rc;
}

/* Keeps hits[offset .. offset+limit). */
static void slice(index_hits *h, size_t offset, size_t limit)
{
    h->total = h->n;
    size_t from = offset < h->n ? offset : h->n;
    size_t to = limit && limit < h->n - from ? from + limit : h->n;
    for (size_t i = 0; i < h->n; i++)
        if (i < from || i >= to) {
            free(h->hits[i].id);
            free(h->hits[i].doc);
        }
    if (to > from) memmove(h->hits, h->hits + from, (to - from) * sizeof *h->hits);
    h->n = to - from;
}

int index_find(store *st, const index_snapshot *snap, const filter *f, const sort_spec *sort,
               size_t offset, size_t limit, index_hits *out, query_error *err)
{
    *out = (index_hits){0};
    if (!snap) return HANU_OK;
    size_t nn;
    const filter_node *nodes = filter_nodes(f, &nn);
    cand c;
    int rc = node_cand(snap, nodes, 0, &c);
    hanu_buf val = {0};
    for (uint32_t s = 0; s < snap->nsegments && !rc; s++) {
        uint32_t docs = index_segment_docs(snap->segments[s].seg);
        uint32_t n = c.all ? docs : c.n[s];
        for (uint32_t k = 0; k < n && !rc; k++) rc = check(st, snap, f, s, c.all ? k : c.ords[s][k], &val, out);
    }
    hanu_buf_free(&val);
    cand_free(&c, snap->nsegments);
    if (!rc && out->n) {
        if (sort && sort->n) rc = sort_hits(out, sort, err);
        else qsort(out->hits, out->n, sizeof *out->hits, cmp_hit_id);
    }
    if (rc) index_hits_free(out);
    else slice(out, offset, limit);
    return rc;
}

void index_hits_free(index_hits *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->hits[i].id);
        free(h->hits[i].doc);
    }
    free(h->hits);
    *h = (index_hits){0};
}
