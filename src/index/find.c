/*
 * find.c: the query executor over a snapshot (docs/QUERY.md, "How _find
 * runs"). Each filter node gives, per segment, two CRoaring bitmaps: the
 * documents it surely matches and those it may match (sure is a subset of
 * maybe). Terms give "maybe" (a document with the term at the path may match)
 * and the column of the path gives "sure": where the column holds one scalar
 * (not missing, not an array), the document's value at the path is exactly
 * that scalar, so the term decides. $and/$or intersect/unite both sets, and a
 * negation swaps them (not-sure = all - maybe, not-maybe = all - sure), so
 * $ne, $nin, $not, $nor and $exists are exact where their operand is. Only
 * maybe - sure is read from the store and checked with filter_match; where
 * the column holds one scalar that set is empty. So the answer always equals
 * filter_match over the collection's documents.
 *
 * Sort reads the sort paths' columns and keeps the best offset+limit hits in
 * a heap; a document is read only when a column cannot tell its sort value
 * (missing: it may be an object or a long string; multi; an integer past
 * 2^53, which a column keeps as a double), and for the hits returned.
 */
#include "index/index.h"
#include "json/json.h"
#include "query/query.h"
#include "store/store.h"

#include <math.h>
#include <roaring/roaring.h>
#include <stdlib.h>

#define EXACT_LIMIT INDEX_EXACT_LIMIT      /* 2^53: doubles hold every integer below it */
#define KEY_SCALAR_SET 0xfe              /* cache key type byte: "scalar at path" */
#define FIND_BATCH 64                    /* matches whose columns are prefetched together */

typedef roaring_bitmap_t bitmap;

/* Per segment: sure is a subset of maybe. */
typedef struct tri {
    bitmap *sure, *maybe;
} tri;

typedef struct seg_ctx {
    const index_segment *seg;
    uint32_t docs;
} seg_ctx;

static bitmap *bm_all(uint32_t docs)
{
    return docs ? roaring_bitmap_from_range(0, docs, 1) : roaring_bitmap_create();
}

static void tri_free(tri *t)
{
    if (t->sure) roaring_bitmap_free(t->sure);
    if (t->maybe) roaring_bitmap_free(t->maybe);
    *t = (tri){0};
}

static int tri_take(tri *t, bitmap *sure, bitmap *maybe)
{
    *t = (tri){ sure, maybe };
    if (sure && maybe) return HANU_OK;
    tri_free(t);
    return HANU_ERR_NOMEM;
}

static int tri_nothing(tri *t)
{
    return tri_take(t, roaring_bitmap_create(), roaring_bitmap_create());
}

/* Nothing sure, anything possible: the index cannot tell. */
static int tri_unknown(const seg_ctx *c, tri *t)
{
    return tri_take(t, roaring_bitmap_create(), bm_all(c->docs));
}

/* ---- bitmaps from terms and columns ---- */

static void add_postings(bitmap *out, const index_segment *seg, uint32_t term)
{
    index_postings p;
    index_postings_open(&p, seg, term);
    while (p.doc != INDEX_ORD_END) {
        roaring_bitmap_add_many(out, p.n - p.pos, p.ords + p.pos);
        index_postings_advance(&p, p.ords[p.n - 1] + 1);
    }
}

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int d = memcmp(a, b, al < bl ? al : bl);
    return d ? d : (al > bl) - (al < bl);
}

/* Documents with a term in the key range (each bound inclusive or not). */
static bitmap *key_range(const index_segment *seg, const uint8_t *lo, size_t lo_len, int lo_incl,
                         const uint8_t *hi, size_t hi_len, int hi_incl)
{
    bitmap *out = roaring_bitmap_create();
    if (!out) return NULL;
    uint32_t terms = index_segment_terms(seg);
    for (uint32_t t = index_segment_term_lower_bound(seg, lo, lo_len); t < terms; t++) {
        size_t len;
        const uint8_t *key = index_segment_term(seg, t, &len, NULL);
        if (!lo_incl && key_cmp(key, len, lo, lo_len) == 0) continue;
        int d = key_cmp(key, len, hi, hi_len);
        if (d > 0 || (d == 0 && !hi_incl)) break;
        add_postings(out, seg, t);
    }
    return out;
}

/* Terms in fewer documents than this are decoded each time rather than cached: their
   postings are one block or two, and the cache's hash, lock, chain walk and copy cost
   more than decoding them (a find on `user=X` spent 7% of its CPU in the cache). */
#define TERM_CACHE_MIN_DOCS 512

/* The documents holding one term (cached per segment when it is common). */
static bitmap *term_bitmap(const index_segment *seg, const uint8_t *key, size_t len)
{
    uint32_t t = index_segment_term_find(seg, key, len), df = 0;
    if (t != UINT32_MAX) (void)index_segment_term(seg, t, &(size_t){ 0 }, &df);
    bitmap *b;
    if (df >= TERM_CACHE_MIN_DOCS && (b = index_bitset_cache_get(seg, key, len))) return b;
    if (!(b = roaring_bitmap_create())) return NULL;
    if (t != UINT32_MAX) add_postings(b, seg, t);
    if (df >= TERM_CACHE_MIN_DOCS) index_bitset_cache_put(seg, key, len, b);
    return b;
}

/* The column of a path when it tells the path's whole value. Only for a
 * top-level field: a leaf below an object inside an array has a column value
 * too ({"o":[{"x":3}]} gives o.x = 3, as {"o":{"x":3}} does), yet the path
 * walk also reaches "missing" in the array's other objects, nothing at all
 * through an array of arrays, and sort refuses it; the index does not record
 * that an array was crossed, so dotted paths are decided on the documents. */
static const index_column *exact_column(const index_segment *seg, const char *path, size_t path_len)
{
    return memchr(path, '.', path_len) ? NULL : index_segment_column(seg, path, path_len);
}

/* The documents whose column at path holds one scalar (cached per segment). */
static bitmap *scalar_set(const index_segment *seg, const char *path, size_t path_len)
{
    uint8_t key[QUERY_MAX_PATH_BYTES + 2];
    memcpy(key, path, path_len);
    key[path_len] = 0;
    key[path_len + 1] = KEY_SCALAR_SET;
    bitmap *b = index_bitset_cache_get(seg, key, path_len + 2);
    if (b) return b;
    if (!(b = roaring_bitmap_create())) return NULL;
    const index_column *col = exact_column(seg, path, path_len);
    uint32_t docs = index_segment_docs(seg), buf[256], n = 0;
    for (uint32_t d = 0; col && d < docs; d++) {
        enum index_col_tag tag = index_column_tag(col, d);
        if (tag >= INDEX_COL_NULL && tag <= INDEX_COL_STRING) buf[n++] = d;
        if (n == 256) { roaring_bitmap_add_many(b, n, buf); n = 0; }
    }
    roaring_bitmap_add_many(b, n, buf);
    index_bitset_cache_put(seg, key, path_len + 2, b);
    return b;
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
    return len <= INDEX_PATH_MAX && !memchr(p, 0, len);
}

/* The term key of scalar v at path (0 when v is no keyword term: null, long string...). */
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
    case JSON_NULL:
        return index_key(key, n->path, n->path_len, INDEX_KEY_NULL, NULL, 0, 0);
    default:
        return 0;
    }
}

/* ---- cost estimates: where to run a query ---- */

static uint64_t add_capped(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The documents of the term of v at n's path, over the snapshot; UINT64_MAX
   when v has no term (null, an array, an object, a long string): its
   equality looks at every document of the path. */
static uint64_t value_estimate(const index_snapshot *snap, const filter_node *n, const json_value *v)
{
    uint8_t key[INDEX_KEY_MAX];
    size_t len = v->type == JSON_NULL ? 0 : value_key(key, n, v), tl;
    if (!len) return UINT64_MAX;
    uint64_t docs = 0;
    index_snapshot_term_prefetch(snap, key, len);   /* the segments' cache misses together */
    for (uint32_t s = 0; s < snap->nsegments; s++) {
        uint32_t t = index_segment_term_find(snap->segments[s].seg, key, len), df = 0;
        if (t != UINT32_MAX) index_segment_term(snap->segments[s].seg, t, &tl, &df);
        docs += df;
    }
    return docs;
}

static uint64_t node_estimate(const index_snapshot *snap, const filter_node *nodes, uint32_t i)
{
    const filter_node *n = &nodes[i];
    uint64_t cost = 0;
    switch (n->op) {
    case FILTER_AND:
        if (!n->count)   /* {}: every document */
            for (uint32_t s = 0; s < snap->nsegments; s++) cost += index_segment_docs(snap->segments[s].seg);
        for (uint32_t k = 0; k < n->count; k++) cost = add_capped(cost, node_estimate(snap, nodes, n->first + k));
        return cost;
    case FILTER_EQ:
        return value_estimate(snap, n, n->operand);
    case FILTER_IN:
        for (size_t k = 0; k < json_len(n->operand); k++)
            cost = add_capped(cost, value_estimate(snap, n, json_at(n->operand, k)));
        return cost;
    default:   /* ranges, $ne, $exists, $or, $not...: their cost is not in the term table */
        return UINT64_MAX;
    }
}

uint64_t index_find_estimate(const index_snapshot *snap, const filter *f)
{
    size_t nn = 0;
    const filter_node *nodes = f ? filter_nodes(f, &nn) : NULL;
    if (!snap) return 0;
    if (!nn) return node_estimate(snap, &(filter_node){ .op = FILTER_AND }, 0);
    return node_estimate(snap, nodes, 0);
}

/* sure &= with; maybe = maybe (for "sure only where the column is scalar"). */
static int and_into(bitmap *b, const bitmap *with)
{
    roaring_bitmap_and_inplace(b, with);
    return HANU_OK;
}

/* $eq v. A document holding v at the path has v's term (arrays add their
 * elements' terms at the array's path), so the term is "maybe"; where the
 * column holds one scalar that scalar is the whole value, so "sure". */
static int eq_tri(const seg_ctx *c, const filter_node *n, const json_value *v, tri *out)
{
    uint8_t key[INDEX_KEY_MAX];
    bitmap *scalar = scalar_set(c->seg, n->path, n->path_len);
    if (!scalar) return HANU_ERR_NOMEM;
    size_t len = value_key(key, n, v);
    int rc;
    if (v->type == JSON_NULL) {
        /* null matches missing too: sure where the column holds null, impossible where it holds another scalar */
        bitmap *nulls = term_bitmap(c->seg, key, len), *maybe = bm_all(c->docs);
        if (nulls && maybe) {
            roaring_bitmap_and_inplace(nulls, scalar);
            roaring_bitmap_andnot_inplace(maybe, scalar);
            roaring_bitmap_or_inplace(maybe, nulls);
        }
        rc = tri_take(out, nulls, maybe);
    } else if (!len) {
        /* an array, object or long string: never equal to a scalar column value */
        bitmap *maybe = bm_all(c->docs);
        if (maybe) roaring_bitmap_andnot_inplace(maybe, scalar);
        rc = tri_take(out, roaring_bitmap_create(), maybe);
    } else {
        bitmap *maybe = term_bitmap(c->seg, key, len);
        bitmap *sure = maybe ? roaring_bitmap_copy(maybe) : NULL;
        if (sure) {
            if (v->type == JSON_NUMBER && fabs(v->u.num.d) >= EXACT_LIMIT) roaring_bitmap_clear(sure);
            else and_into(sure, scalar);
        }
        rc = tri_take(out, sure, maybe);
    }
    roaring_bitmap_free(scalar);
    return rc;
}

static void tri_or(tri *into, tri *kid)
{
    roaring_bitmap_or_inplace(into->sure, kid->sure);
    roaring_bitmap_or_inplace(into->maybe, kid->maybe);
    tri_free(kid);
}

static void tri_and(tri *into, tri *kid)
{
    roaring_bitmap_and_inplace(into->sure, kid->sure);
    roaring_bitmap_and_inplace(into->maybe, kid->maybe);
    tri_free(kid);
}

static int tri_not(const seg_ctx *c, tri *t)
{
    bitmap *sure = roaring_bitmap_flip(t->maybe, 0, c->docs), *maybe = roaring_bitmap_flip(t->sure, 0, c->docs);
    tri_free(t);
    return tri_take(t, sure, maybe);
}

static int in_tri(const seg_ctx *c, const filter_node *n, tri *out)
{
    int rc = tri_nothing(out);
    for (size_t k = 0; k < json_len(n->operand) && !rc; k++) {
        tri kid;
        rc = eq_tri(c, n, json_at(n->operand, k), &kid);
        if (!rc) tri_or(out, &kid);
    }
    return rc;
}

/* $gt $gte $lt $lte: within one type only (QUERY.md). */
static int range_tri(const seg_ctx *c, const filter_node *n, tri *out)
{
    const json_value *v = n->operand;
    int strict = n->op == FILTER_GT || n->op == FILTER_LT, upward = n->op == FILTER_GT || n->op == FILTER_GTE;
    if (v->type == JSON_NULL) {   /* $gte/$lte null mean $eq null; $gt/$lt null match nothing */
        if (strict) return tri_nothing(out);
        return eq_tri(c, n, v, out);
    }
    if (v->type == JSON_BOOL) {   /* false < true: the booleans in range, as equalities */
        int rc = tri_nothing(out);
        for (int b = 0; b <= 1 && !rc; b++) {
            int cmp = b - v->u.boolean;
            if (!(upward ? (strict ? cmp > 0 : cmp >= 0) : (strict ? cmp < 0 : cmp <= 0))) continue;
            json_value bv = { .type = JSON_BOOL, .u.boolean = b };
            tri kid;
            rc = eq_tri(c, n, &bv, &kid);
            if (!rc) tri_or(out, &kid);
        }
        return rc;
    }
    int number = v->type == JSON_NUMBER;
    if (!number && (v->type != JSON_STRING || v->u.str.len > INDEX_KEYWORD_MAX)) return tri_unknown(c, out);
    /* Numbers past 2^53 may share a key with their neighbours: bounds inclusive, nothing sure. */
    int exact = !number || fabs(v->u.num.d) < EXACT_LIMIT;
    enum index_key_type type = number ? INDEX_KEY_NUMBER : INDEX_KEY_STRING;
    uint8_t bound[INDEX_KEY_MAX], end[INDEX_KEY_MAX + 72];
    size_t bound_len = value_key(bound, n, v);
    size_t end_len = index_key(end, n->path, n->path_len, type, "", 0, 0);
    if (number) end_len -= 8;   /* path \0 type: below every value of the type */
    uint8_t *lo = end, *hi = bound;
    size_t lo_len = end_len, hi_len = bound_len;
    if (upward) {
        memset(end + end_len, 0xff, INDEX_KEYWORD_MAX + 9);   /* above every value of the type */
        end_len += INDEX_KEYWORD_MAX + 9;
        lo = bound; lo_len = bound_len; hi = end; hi_len = end_len;
    }
    bitmap *maybe = key_range(c->seg, lo, lo_len, upward ? !strict || !exact : 1, hi, hi_len,
                              upward ? 1 : !strict || !exact);
    bitmap *scalar = scalar_set(c->seg, n->path, n->path_len), *sure = NULL;
    if (maybe && scalar) {
        sure = roaring_bitmap_and(maybe, scalar);
        if (sure && !exact) roaring_bitmap_clear(sure);
        /* a string longer than a keyword has no term: possible wherever the column is not scalar */
        if (sure && !number) {
            bitmap *all = bm_all(c->docs);
            if (all) {
                roaring_bitmap_andnot_inplace(all, scalar);
                roaring_bitmap_or_inplace(maybe, all);
                roaring_bitmap_free(all);
            } else {
                roaring_bitmap_free(sure);
                sure = NULL;
            }
        }
    }
    if (scalar) roaring_bitmap_free(scalar);
    return tri_take(out, sure, maybe);
}

static int node_tri(const seg_ctx *c, const filter_node *nodes, uint32_t i, tri *out)
{
    const filter_node *n = &nodes[i];
    int rc;
    switch (n->op) {
    case FILTER_AND:
    case FILTER_OR:
    case FILTER_NOR:
        rc = n->op == FILTER_AND ? tri_take(out, bm_all(c->docs), bm_all(c->docs)) : tri_nothing(out);
        for (uint32_t k = 0; k < n->count && !rc; k++) {
            tri kid;
            rc = node_tri(c, nodes, n->first + k, &kid);
            if (rc) break;
            if (n->op == FILTER_AND) tri_and(out, &kid);
            else tri_or(out, &kid);
        }
        if (rc) tri_free(out);
        return rc || n->op != FILTER_NOR ? rc : tri_not(c, out);
    case FILTER_NOT:
        rc = node_tri(c, nodes, n->first, out);
        return rc ? rc : tri_not(c, out);
    default:
        break;
    }
    if (!n->path || !path_indexed(n->path, n->path_len)) return tri_unknown(c, out);
    switch (n->op) {
    case FILTER_EQ: return eq_tri(c, n, n->operand, out);
    case FILTER_NE:
        rc = eq_tri(c, n, n->operand, out);
        return rc ? rc : tri_not(c, out);
    case FILTER_IN: return in_tri(c, n, out);
    case FILTER_NIN:
        rc = in_tri(c, n, out);
        return rc ? rc : tri_not(c, out);
    case FILTER_GT: case FILTER_GTE: case FILTER_LT: case FILTER_LTE:
        return range_tri(c, n, out);
    case FILTER_EXISTS: {
        /* a scalar column value exists; missing may hide an object, an empty array or a long string */
        bitmap *scalar = scalar_set(c->seg, n->path, n->path_len);
        rc = tri_take(out, scalar, bm_all(c->docs));
        return rc || n->exists ? rc : tri_not(c, out);
    }
    default:
        return tri_unknown(c, out);
    }
}

/* ---- the matches of a filter ---- */

typedef struct matches {
    bitmap **seg;                   /* per snapshot segment: live matching ordinals */
    uint32_t n;
    size_t checked;
} matches;

static void matches_free(matches *m)
{
    for (uint32_t s = 0; m->seg && s < m->n; s++)
        if (m->seg[s]) roaring_bitmap_free(m->seg[s]);
    free(m->seg);
    *m = (matches){0};
}

typedef struct check_ctx {
    store *st;
    const index_snapshot *snap;
    uint32_t s;
    const filter *f;
    bitmap *into;
    hanu_buf val;
    size_t checked;
    int rc;
} check_ctx;

/* Reads one uncertain document and asks filter_match. */
static bool check_one(uint32_t ord, void *p)
{
    check_ctx *c = p;
    size_t len;
    const char *id = index_segment_doc_id(c->snap->segments[c->s].seg, ord, &len);
    uint64_t token;
    hanu_buf_reset(&c->val);
    c->checked++;
    int rc = store_get(c->st, c->snap->db, id, len, &c->val, &token);
    if (rc == HANU_ERR_NOT_FOUND) return true;   /* deleted after the snapshot */
    if (rc) { c->rc = rc; return false; }
    int m = filter_match(c->f, (const char *)c->val.data, c->val.len);
    if (m == 1) roaring_bitmap_add(c->into, ord);
    else if (m < 0 && m != HANU_ERR_INVALID) { c->rc = m; return false; }
    return true;
}

static int find_matches(store *st, const index_snapshot *snap, const filter *f, matches *m)
{
    *m = (matches){ calloc(snap->nsegments ? snap->nsegments : 1, sizeof *m->seg), snap->nsegments, 0 };
    if (!m->seg) return HANU_ERR_NOMEM;
    size_t nn;
    const filter_node *nodes = filter_nodes(f, &nn);
    check_ctx cc = { .st = st, .snap = snap, .f = f };
    int rc = HANU_OK;
    for (uint32_t s = 0; s < snap->nsegments && !rc; s++) {
        const index_snapshot_segment *ss = &snap->segments[s];
        seg_ctx c = { ss->seg, index_segment_docs(ss->seg) };
        tri t;
        rc = node_tri(&c, nodes, 0, &t);
        if (rc) break;
        roaring_bitmap_remove_many(t.sure, ss->ndeleted, ss->deleted);
        roaring_bitmap_remove_many(t.maybe, ss->ndeleted, ss->deleted);
        roaring_bitmap_andnot_inplace(t.maybe, t.sure);
        cc.s = s;
        cc.into = t.sure;
        roaring_iterate(t.maybe, check_one, &cc);
        rc = cc.rc;
        m->seg[s] = t.sure;
        t.sure = NULL;
        tri_free(&t);
    }
    m->checked = cc.checked;
    hanu_buf_free(&cc.val);
    if (rc) matches_free(m);
    return rc;
}

/* ---- sorting on columns ---- */

/* A candidate hit in the heap: its sort values (copies; strings point into
 * the segment's dictionary or into doc) and its _id. The id is read from the
 * segment only when needed (a tie on every key, a stored document to read, a
 * hit returned): reading it for every match cost a cache miss per match. */
typedef struct entry {
    uint32_t seg, ord;
    const char *id;                 /* NULL until entry_id */
    size_t id_len;
    json_doc *doc;                  /* when a value had to come from the stored document */
    uint32_t nulls;                 /* bit i: key i is missing or null */
    uint32_t from_cols;             /* 1: every key came from seg's columns (strs holds string ordinals) */
    uint32_t strs[SORT_MAX_KEYS];   /* key i a string from the column: its dictionary ordinal */
    json_value keys[];
} entry;

#define NO_SEG UINT32_MAX           /* an entry of no segment (the after cursor): its id is set */

/* The kept hits: entries stay in their slots of v; the max-heap orders slot
 * numbers, so that sifting moves 4 bytes, not an entry. */
typedef struct heap {
    const sort_spec *sort;
    const index_snapshot *snap;
    size_t nkeys, esize, n, cap;
    char *v;
    uint32_t *order;                /* order[0]: the slot of the worst kept hit */
} heap;

static entry *at(const heap *h, size_t i) { return (entry *)(h->v + i * h->esize); }
static entry *heap_at(const heap *h, size_t i) { return at(h, h->order[i]); }

static void entry_id(const heap *h, entry *e)
{
    if (!e->id) e->id = index_segment_doc_id(h->snap->segments[e->seg].seg, e->ord, &e->id_len);
}

static int type_rank(enum json_type t)
{
    switch (t) {
    case JSON_NUMBER: return 1;
    case JSON_STRING: return 2;
    default: return 5;   /* JSON_BOOL: the only other type a column gives */
    }
}

/* Key i of two entries whose keys all came from columns, as query_value_compare
 * orders them: numbers below 2^53 compare exactly as doubles, strings of one
 * segment by dictionary ordinal (the dictionary is sorted bytewise, distinct). */
static int column_key_cmp(const entry *a, const entry *b, size_t i)
{
    const json_value *x = &a->keys[i], *y = &b->keys[i];
    if (x->type != y->type) return type_rank(x->type) < type_rank(y->type) ? -1 : 1;
    switch (x->type) {
    case JSON_NUMBER: return (x->u.num.d > y->u.num.d) - (x->u.num.d < y->u.num.d);
    case JSON_STRING:
        if (a->seg == b->seg) return (a->strs[i] > b->strs[i]) - (a->strs[i] < b->strs[i]);
        return query_value_compare(x, y);
    default: return (x->u.boolean > y->u.boolean) - (x->u.boolean < y->u.boolean);
    }
}

/* Key i of two entries in the sort's direction: below 0 when a comes first. */
static int entry_key_cmp(const heap *h, const entry *a, const entry *b, size_t i)
{
    int an = a->nulls >> i & 1, bn = b->nulls >> i & 1, c;
    if (an || bn) c = bn - an;   /* null (or missing) sorts first */
    else if (a->from_cols && b->from_cols) c = column_key_cmp(a, b, i);
    else c = query_value_compare(&a->keys[i], &b->keys[i]);
    return h->sort->keys[i].descending ? -c : c;
}

/* sort_compare over entries: the keys, then the _id (read now if not yet). */
static int entry_cmp(const heap *h, entry *a, entry *b)
{
    for (size_t i = 0; i < h->nkeys; i++) {
        int c = entry_key_cmp(h, a, b, i);
        if (c) return c;
    }
    entry_id(h, a);
    entry_id(h, b);
    int c = memcmp(a->id, b->id, a->id_len < b->id_len ? a->id_len : b->id_len);
    if (c) return c < 0 ? -1 : 1;
    return (a->id_len > b->id_len) - (a->id_len < b->id_len);
}

/* Max-heap: the worst kept hit on top. The slot at position i moves down to
   where it belongs ("hole" sifting: one store a level). */
static void sift_down(heap *h, size_t i)
{
    uint32_t slot = h->order[i];
    entry *e = at(h, slot);
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, big = l;
        if (l >= h->n) break;
        if (r < h->n && entry_cmp(h, heap_at(h, r), heap_at(h, l)) > 0) big = r;
        if (entry_cmp(h, heap_at(h, big), e) <= 0) break;
        h->order[i] = h->order[big];
        i = big;
    }
    h->order[i] = slot;
}

static void sift_up(heap *h, size_t i)
{
    uint32_t slot = h->order[i];
    entry *e = at(h, slot);
    while (i > 0 && entry_cmp(h, heap_at(h, (i - 1) / 2), e) < 0) {
        h->order[i] = h->order[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->order[i] = slot;
}

/* Offers e (the caller's scratch); keeps at most k. */
static int heap_offer(heap *h, entry *e, size_t k)
{
    if (h->n < k) {
        if (h->n == h->cap) {
            size_t cap = h->cap ? h->cap * 2 : 64;
            if (cap > k) cap = k;
            char *v = realloc(h->v, cap * h->esize);
            if (v) h->v = v;
            uint32_t *order = v ? realloc(h->order, cap * sizeof *order) : NULL;
            if (!order) return HANU_ERR_NOMEM;
            h->order = order;
            h->cap = cap;
        }
        memcpy(at(h, h->n), e, h->esize);
        h->order[h->n] = (uint32_t)h->n;
        sift_up(h, h->n++);
    } else if (entry_cmp(h, e, heap_at(h, 0)) < 0) {
        json_doc_free(heap_at(h, 0)->doc);
        memcpy(heap_at(h, 0), e, h->esize);
        sift_down(h, 0);
    } else {
        json_doc_free(e->doc);
    }
    e->doc = NULL;
    return HANU_OK;
}

static void set_key(entry *e, size_t i, const json_value *v)
{
    if (!v || v->type == JSON_NULL) { e->nulls |= 1u << i; return; }
    e->keys[i] = *v;
    e->keys[i].key = NULL;
}

static json_value number_value(double d)
{
    return (json_value){ .type = JSON_NUMBER, .is_int = d == floor(d), .u.num = { d, (int64_t)d } };
}

/* The sort values of one matching document, from the columns where they
 * tell; 1 when the document is gone from the store (skip it). */
static int entry_keys(store *st, const heap *h, const index_column *const *cols, entry *e, query_error *err)
{
    const sort_spec *sort = h->sort;
    int need_doc = 0;
    e->nulls = 0;
    e->from_cols = 1;
    e->doc = NULL;
    for (size_t i = 0; i < sort->n && !need_doc; i++) {
        enum index_col_tag tag = cols[i] ? index_column_tag(cols[i], e->ord) : INDEX_COL_MISSING;
        json_value v = { .type = JSON_NULL };
        switch (tag) {
        case INDEX_COL_NULL: break;
        case INDEX_COL_FALSE: case INDEX_COL_TRUE:
            v = (json_value){ .type = JSON_BOOL, .u.boolean = tag == INDEX_COL_TRUE };
            break;
        case INDEX_COL_NUMBER: {
            double d = index_column_number(cols[i], e->ord);
            if (fabs(d) >= EXACT_LIMIT) { need_doc = 1; break; }
            v = number_value(d);
            break;
        }
        case INDEX_COL_STRING: {
            size_t len;
            e->strs[i] = index_column_string_ord(cols[i], e->ord);
            const char *s = index_column_dict(cols[i], e->strs[i], &len);
            v = (json_value){ .type = JSON_STRING, .u.str = { s, len } };
            break;
        }
        default:   /* missing may be an object or a long string; multi is refused or sorts by its first */
            need_doc = 1;
        }
        set_key(e, i, &v);
    }
    if (!need_doc) return 0;
    e->from_cols = 0;
    entry_id(h, e);
    hanu_buf val = {0};
    uint64_t token;
    int rc = store_get(st, h->snap->db, e->id, e->id_len, &val, &token);
    if (rc == HANU_ERR_NOT_FOUND) { hanu_buf_free(&val); return 1; }
    if (!rc) rc = json_doc_parse((const char *)val.data, val.len, NULL, &e->doc, NULL);
    hanu_buf_free(&val);
    if (rc) return rc == HANU_ERR_INVALID ? 1 : rc;
    const json_value *keys[SORT_MAX_KEYS];
    rc = sort_keys_of(sort, json_doc_root(e->doc), keys, err);
    if (rc) { json_doc_free(e->doc); e->doc = NULL; return rc; }
    e->nulls = 0;
    for (size_t i = 0; i < sort->n; i++) set_key(e, i, keys[i]);
    return 0;
}

/* ---- cursors: positions as json values ---- */

static void cursor_entry(const index_cursor *c, entry *e)
{
    e->seg = NO_SEG;
    e->id = c->id;
    e->id_len = c->id_len;
    e->nulls = 0;
    e->from_cols = 0;
    e->doc = NULL;
    for (uint32_t i = 0; i < c->nkeys; i++) {
        const index_cursor_key *k = &c->keys[i];
        json_value v = { .type = k->type };
        if (k->type == JSON_NUMBER) { v.is_int = k->is_int; v.u.num.i = k->i; v.u.num.d = k->d; }
        else if (k->type == JSON_BOOL) v.u.boolean = k->boolean;
        else if (k->type == JSON_STRING) { v.u.str.ptr = c->bytes + k->str_off; v.u.str.len = k->str_len; }
        set_key(e, i, &v);
    }
}

static int entry_cursor(const heap *h, entry *e, uint64_t txn, index_cursor *c, query_error *err)
{
    memset(c, 0, offsetof(index_cursor, bytes));
    c->txn_bound = txn;
    c->sort_hash = index_sort_hash(h->sort);
    c->nkeys = (uint32_t)h->nkeys;
    memcpy(c->id, e->id, e->id_len);
    c->id_len = e->id_len;
    for (size_t i = 0; i < h->nkeys; i++) {
        index_cursor_key *k = &c->keys[i];
        const json_value *v = &e->keys[i];
        k->type = e->nulls & (1u << i) ? JSON_NULL : v->type;
        if (k->type == JSON_NUMBER) { k->is_int = v->is_int; k->i = v->u.num.i; k->d = v->u.num.d; }
        else if (k->type == JSON_BOOL) k->boolean = v->u.boolean;
        else if (k->type == JSON_STRING) {
            if (v->u.str.len > sizeof c->bytes - c->used) {
                snprintf(err->msg, sizeof err->msg, "sort.%s: a sort value is too long for a cursor (over %d bytes)",
                         h->sort->keys[i].path, INDEX_CURSOR_BYTES_MAX);
                return HANU_ERR_INVALID;
            }
            memcpy(c->bytes + c->used, v->u.str.ptr, v->u.str.len);
            k->str_off = c->used;
            k->str_len = (uint32_t)v->u.str.len;
            c->used += (uint32_t)v->u.str.len;
        }
    }
    return HANU_OK;
}

/* ---- early termination (docs/QUERY.md, "How _find and _aggs run") ---- */

/* How one segment's matches are walked for a sort. Only where no match of the
 * segment can need its stored document (a one-key sort on a column of exact
 * numbers, or the _id order), so that skipping matches changes no count. */
typedef struct seg_plan {
    uint32_t s;
    int ordered;        /* 1: the matches come in sort order forward, -1 backward, 0: any order */
    int backward;       /* walk the matches from the last ordinal */
    int bounded;        /* best: the best first key any document of the segment has */
    double best;
    const index_column_blocks *blocks;   /* per-block bounds of the sort column, or NULL */
} seg_plan;

static seg_plan plan_segment(const index_segment *seg, uint32_t s, const sort_spec *sort)
{
    seg_plan p = { .s = s };
    if (sort->n == 0) {
        p.ordered = index_segment_ids_ascending(seg) ? 1 : 0;
        return p;
    }
    const index_column *c = sort->n == 1 ? exact_column(seg, sort->keys[0].path, strlen(sort->keys[0].path)) : NULL;
    double lo, hi;
    unsigned order = c ? index_column_number_order(c, &lo, &hi) : 0;
    if (!(order & INDEX_COL_ALL_NUMBERS)) return p;
    int desc = sort->keys[0].descending;
    p.bounded = 1;
    p.best = desc ? hi : lo;
    unsigned forward = desc ? INDEX_COL_NONINCREASING : INDEX_COL_NONDECREASING;
    unsigned backward = desc ? INDEX_COL_NONDECREASING : INDEX_COL_NONINCREASING;
    p.ordered = order & forward ? 1 : order & backward ? -1 : 0;
    p.blocks = index_column_number_blocks(c);
    p.backward = p.ordered < 0;
    if (!p.ordered && p.blocks) {   /* nearly sorted: start from the end whose block is best */
        const index_column_blocks *bk = p.blocks;
        p.backward = desc ? bk->max[bk->n - 1] > bk->max[0] : bk->min[bk->n - 1] < bk->min[0];
    }
    return p;
}

/* Bounded segments first, best bound first: the heap fills with the best
 * values early and the other segments are skipped or cut short. */
static int plan_cmp(const void *a, const void *b, void *sort)
{
    const seg_plan *x = a, *y = b;
    if (x->bounded != y->bounded) return y->bounded - x->bounded;
    if (x->bounded && x->best != y->best) {
        int c = x->best < y->best ? -1 : 1;
        return ((const sort_spec *)sort)->keys[0].descending ? -c : c;
    }
    return (x->s > y->s) - (x->s < y->s);
}

static seg_plan *plan_segments(const index_snapshot *snap, const sort_spec *sort, const matches *m)
{
    seg_plan *plans = calloc(m->n ? m->n : 1, sizeof *plans);
    if (!plans) return NULL;
    for (uint32_t s = 0; s < m->n; s++) plans[s] = plan_segment(snap->segments[s].seg, s, sort);
    if (sort->n == 1) qsort_r(plans, m->n, sizeof *plans, plan_cmp, (void *)sort);
    return plans;
}

/* Whether e sorts after the full heap's worst hit, and every match after e in
 * an ordered segment with it: on the first key alone (a tie on it may still
 * enter by _id), or on the _id when that is the order. */
static int entry_worse(heap *h, entry *e)
{
    entry *top = heap_at(h, 0);
    return h->nkeys ? entry_key_cmp(h, e, top, 0) > 0 : entry_cmp(h, e, top) > 0;
}

/* Whether a first key of best sorts after the full heap's worst hit. */
static int bound_worse(const heap *h, double best)
{
    union { entry e; char bytes[sizeof(entry) + sizeof(json_value)]; } probe = {0};
    probe.e.seg = NO_SEG;
    probe.e.from_cols = 1;
    probe.e.keys[0] = number_value(best);
    return entry_key_cmp(h, &probe.e, heap_at(h, 0), 0) > 0;
}

/* Whether the block of ord (a segment with per-block bounds) cannot enter
 * the full heap: its best value sorts after the worst hit's first key. */
static int block_worse(heap *h, size_t k, const index_column_blocks *bk, uint32_t ord)
{
    if (!bk || h->n != k) return 0;
    uint32_t b = ord / INDEX_COL_BLOCK;
    int desc = h->sort->keys[0].descending;
    double best = desc ? bk->max[b] : bk->min[b];
    const entry *top = heap_at(h, 0);
    if (top->from_cols && !(top->nulls & 1) && top->keys[0].type == JSON_NUMBER) {   /* the usual case, no probe */
        double worst = top->keys[0].u.num.d;
        return desc ? best < worst : best > worst;
    }
    return bound_worse(h, best);
}

/* The next batch of a segment's matches, forward or backward. */
static uint32_t read_batch(roaring_uint32_iterator_t *it, int backward, uint32_t *ords)
{
    if (!backward) return roaring_read_uint32_iterator(it, ords, FIND_BATCH);
    uint32_t n = 0;
    while (n < FIND_BATCH && it->has_value) {
        ords[n++] = it->current_value;
        roaring_previous_uint32_iterator(it);
    }
    return n;
}

/* ---- find ---- */

/* The stored documents of the page's entries [from, h->n), in one batch;
 * one deleted since the snapshot is left out. */
static int read_hits(store *st, uint32_t db, const heap *h, size_t from, index_hits *out)
{
    size_t n = h->n - from;
    store_get_item *items = calloc(n, sizeof *items);
    hanu_buf vals = {0};
    if (!items) return HANU_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const entry *x = at(h, from + i);
        items[i].key = x->id;
        items[i].key_len = x->id_len;
    }
    int rc = store_get_many(st, db, items, n, &vals);
    if (!rc) rc = index_hits_take(out, items, n, &vals);
    hanu_buf_free(&vals);
    free(items);
    return rc;
}

static int cmp_entries(const void *a, const void *b, void *h)
{
    return entry_cmp(h, (entry *)a, (entry *)b);   /* ids are all read before the sort: nothing changes */
}

int index_find_ex(store *st, const index_snapshot *snap, const filter *f, const index_find_opts *o,
                  index_hits *out, index_cursor *next, int *next_valid, query_error *err)
{
    *out = (index_hits){0};
    if (next_valid) *next_valid = 0;
    if (!snap) return HANU_OK;
    static const sort_spec by_id;
    const sort_spec *sort = o->sort && o->sort->n ? o->sort : &by_id;
    matches m;
    int rc = find_matches(st, snap, f, &m);
    if (rc) return rc;
    out->checked = m.checked;
    for (uint32_t s = 0; s < m.n; s++) out->total += roaring_bitmap_get_cardinality(m.seg[s]);
    if (o->count_only) { matches_free(&m); return HANU_OK; }

    heap h = { .sort = sort, .snap = snap, .nkeys = sort->n, .esize = sizeof(entry) + sort->n * sizeof(json_value) };
    h.esize = (h.esize + 7) & ~(size_t)7;
    size_t k = o->limit ? o->offset + o->limit : SIZE_MAX;
    entry *e = calloc(1, h.esize), *after = NULL;
    if (o->after) {
        after = calloc(1, h.esize);
        if (after) cursor_entry(o->after, after);
    }
    rc = e && (after || !o->after) ? HANU_OK : HANU_ERR_NOMEM;
    size_t remaining = 0;   /* matches after the cursor */
    size_t sorted = 0;      /* matches whose sort values were read */
    seg_plan *plans = rc ? NULL : plan_segments(snap, sort, &m);
    if (!rc && !plans) rc = HANU_ERR_NOMEM;
    for (uint32_t p = 0; p < m.n && !rc; p++) {
        const seg_plan *pl = &plans[p];
        uint32_t s = pl->s;
        if (pl->bounded && h.n == k && bound_worse(&h, pl->best)) {
            remaining += roaring_bitmap_get_cardinality(m.seg[s]);   /* all after the heap's worst, so after the cursor */
            continue;
        }
        const index_segment *seg = snap->segments[s].seg;
        const index_column *cols[SORT_MAX_KEYS];
        for (size_t i = 0; i < sort->n; i++) cols[i] = exact_column(seg, sort->keys[i].path, strlen(sort->keys[i].path));
        roaring_uint32_iterator_t it;
        if (pl->backward) roaring_init_iterator_last(m.seg[s], &it);
        else roaring_init_iterator(m.seg[s], &it);
        uint32_t ords[FIND_BATCH], n;
        int stop = 0;
        /* matches a batch at a time: their column values are sparse in the
           mapping, one cache miss each, so they are all asked for first */
        while (!rc && !stop && (n = read_batch(&it, pl->backward, ords)) > 0) {
            for (uint32_t b = 0; b < n; b++)
                for (size_t i = 0; i < sort->n; i++)
                    if (cols[i] && !block_worse(&h, k, pl->blocks, ords[b])) index_column_prefetch(cols[i], ords[b]);
            for (uint32_t b = 0; b < n && !rc; b++) {
                if (block_worse(&h, k, pl->blocks, ords[b])) {   /* its block cannot enter: after the cursor too */
                    remaining++;
                    continue;
                }
                e->seg = s;
                e->ord = ords[b];
                e->id = NULL;
                sorted++;
                int r = entry_keys(st, &h, cols, e, err);
                if (r == 1) { out->total--; continue; }
                if (r) { rc = r; break; }
                if (pl->ordered && h.n == k && entry_worse(&h, e)) {
                    /* every later match of the segment is as bad: count them, stop */
                    uint64_t upto = roaring_bitmap_rank(m.seg[s], ords[b]);
                    remaining += pl->ordered > 0 ? roaring_bitmap_get_cardinality(m.seg[s]) - upto + 1 : upto;
                    stop = 1;
                    break;
                }
                if (after && entry_cmp(&h, e, after) <= 0) { json_doc_free(e->doc); e->doc = NULL; continue; }
                remaining++;
                rc = heap_offer(&h, e, k);
            }
        }
    }
    free(plans);
    out->sorted = sorted;
    for (size_t i = 0; i < h.n; i++) entry_id(&h, at(&h, i));
    if (!rc && h.n) qsort_r(h.v, h.n, h.esize, cmp_entries, &h);
    size_t from = o->offset < h.n ? o->offset : h.n;
    if (!rc && h.n > from) rc = read_hits(st, snap->db, &h, from, out);
    /* A hit deleted after the snapshot left the page: the count leaves it too, so
       that count and hits describe the same documents. */
    if (!rc && h.n > from) out->total -= HANU_MIN(out->total, h.n - from - out->n);
    if (!rc && o->limit && h.n > from && remaining > o->offset + o->limit && next && next_valid) {
        rc = entry_cursor(&h, at(&h, h.n - 1), o->index_txn, next, err);
        *next_valid = rc == HANU_OK;
    }
    for (size_t i = 0; i < h.n; i++) json_doc_free(at(&h, i)->doc);
    free(h.v);
    free(h.order);
    free(e);
    free(after);
    matches_free(&m);
    if (rc) index_hits_free(out);
    return rc;
}

int index_find(store *st, const index_snapshot *snap, const filter *f, const sort_spec *sort,
               size_t offset, size_t limit, index_hits *out, query_error *err)
{
    index_find_opts o = { .sort = sort, .offset = offset, .limit = limit };
    return index_find_ex(st, snap, f, &o, out, NULL, NULL, err);
}

int index_hit_fill(index_hit *hit, const char *id, size_t id_len, uint64_t txn, const void *doc, size_t doc_len)
{
    char *p = malloc(id_len + 1 + doc_len);   /* one allocation a hit: id, NUL, the document */
    if (!p) return HANU_ERR_NOMEM;
    memcpy(p, id, id_len);
    p[id_len] = '\0';
    if (doc_len) memcpy(p + id_len + 1, doc, doc_len);
    *hit = (index_hit){ p, id_len, txn, p + id_len + 1, doc_len };
    return HANU_OK;
}

int index_hits_take(index_hits *out, const store_get_item *items, size_t n, hanu_buf *vals)
{
    size_t found = 0, id_bytes = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].rc != HANU_ERR_NOT_FOUND) { found++; id_bytes += items[i].key_len + 1; }
    if (out->n || out->block) return HANU_ERR_INVALID;
    if (!found) return HANU_OK;
    index_hit *hits = realloc(out->hits, found * sizeof *hits);
    if (!hits) return HANU_ERR_NOMEM;
    out->hits = hits;
    out->cap = found;
    size_t ids_at = vals->len;
    if (hanu_buf_reserve(vals, id_bytes)) return HANU_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        if (items[i].rc != HANU_ERR_NOT_FOUND) {
            memcpy(vals->data + vals->len, items[i].key, items[i].key_len);
            vals->data[vals->len + items[i].key_len] = '\0';
            vals->len += items[i].key_len + 1;
        }
    char *base = (char *)vals->data, *id = base + ids_at;
    for (size_t i = 0; i < n; i++)
        if (items[i].rc != HANU_ERR_NOT_FOUND) {
            out->hits[out->n++] = (index_hit){ id, items[i].key_len, items[i].token, base + items[i].off, items[i].len };
            id += items[i].key_len + 1;
        }
    out->block = base;
    *vals = (hanu_buf){0};
    return HANU_OK;
}

void index_hits_free(index_hits *h)
{
    if (h->block) free(h->block);   /* every id and doc */
    else
        for (size_t i = 0; i < h->n; i++) free(h->hits[i].id);   /* doc is in the same allocation */
    free(h->hits);
    *h = (index_hits){0};
}

/* ---- aggregations over columns ---- */

typedef struct agg_run {
    store *st;
    const index_snapshot *snap;
    agg_state *state;
    const index_column *col;
    uint32_t s;
    uint64_t *ord_counts;           /* per dictionary ordinal */
    uint64_t bools[2];
    query_error *err;
    hanu_buf val;
    int rc;
} agg_run;

/* A document whose column cannot tell: its values from the stored bytes. */
static int agg_from_doc(agg_run *r, uint32_t ord)
{
    size_t len;
    const char *id = index_segment_doc_id(r->snap->segments[r->s].seg, ord, &len);
    uint64_t token;
    hanu_buf_reset(&r->val);
    int rc = store_get(r->st, r->snap->db, id, len, &r->val, &token);
    if (rc) return rc == HANU_ERR_NOT_FOUND ? HANU_OK : rc;
    json_doc *d;
    if (json_doc_parse((const char *)r->val.data, r->val.len, NULL, &d, NULL)) return HANU_OK;
    rc = agg_state_add_doc(r->state, json_doc_root(d), r->err);
    json_doc_free(d);
    return rc;
}

static bool agg_one(uint32_t ord, void *p)
{
    agg_run *r = p;
    enum index_col_tag tag = r->col ? index_column_tag(r->col, ord) : INDEX_COL_MISSING;
    switch (tag) {
    case INDEX_COL_NULL: break;
    case INDEX_COL_FALSE: case INDEX_COL_TRUE: r->bools[tag == INDEX_COL_TRUE]++; break;
    case INDEX_COL_STRING: r->ord_counts[index_column_string_ord(r->col, ord)]++; break;
    case INDEX_COL_NUMBER: {
        double d = index_column_number(r->col, ord);
        if (fabs(d) >= EXACT_LIMIT) { r->rc = agg_from_doc(r, ord); break; }
        json_value v = { .type = JSON_NUMBER, .is_int = d == floor(d), .u.num = { d, (int64_t)d } };
        r->rc = agg_state_add_value(r->state, &v, 1, r->err);
        break;
    }
    default:
        r->rc = agg_from_doc(r, ord);
    }
    return r->rc == HANU_OK;
}

static int agg_segment(agg_run *r, const bitmap *docs)
{
    uint32_t dict = r->col ? index_column_dict_size(r->col) : 0;
    r->ord_counts = calloc(dict ? dict : 1, sizeof *r->ord_counts);
    r->bools[0] = r->bools[1] = 0;
    if (!r->ord_counts) return HANU_ERR_NOMEM;
    roaring_iterate(docs, agg_one, r);
    int rc = r->rc;
    for (uint32_t i = 0; i < dict && !rc; i++) {
        size_t len;
        const char *s = index_column_dict(r->col, i, &len);
        json_value v = { .type = JSON_STRING, .u.str = { s, len } };
        rc = agg_state_add_value(r->state, &v, r->ord_counts[i], r->err);
    }
    for (int b = 0; b < 2 && !rc; b++) {
        json_value v = { .type = JSON_BOOL, .u.boolean = b };
        rc = agg_state_add_value(r->state, &v, r->bools[b], r->err);
    }
    free(r->ord_counts);
    r->ord_counts = NULL;
    return rc;
}

int index_aggs(store *st, const index_snapshot *snap, const filter *f, const aggs_spec *a, hanu_buf *out,
               size_t *count, query_error *err)
{
    static const index_snapshot empty;
    if (!snap) snap = &empty;
    *count = 0;
    matches m;
    int rc = find_matches(st, snap, f, &m);
    if (rc) return rc;
    for (uint32_t s = 0; s < m.n; s++) *count += roaring_bitmap_get_cardinality(m.seg[s]);
    json_writer w;
    json_writer_init(&w, out);
    json_write_object_begin(&w);
    for (size_t i = 0; i < a->n && !rc; i++) {
        const agg_spec *spec = &a->aggs[i];
        agg_run r = { .st = st, .snap = snap, .err = err };
        matches narrow = {0};
        rc = agg_state_new(spec, &r.state);
        if (!rc && spec->filter) rc = find_matches(st, snap, spec->filter, &narrow);
        for (uint32_t s = 0; s < m.n && !rc; s++) {
            bitmap *docs = m.seg[s];
            if (spec->filter && !(docs = roaring_bitmap_and(m.seg[s], narrow.seg[s]))) rc = HANU_ERR_NOMEM;
            r.s = s;
            r.col = exact_column(snap->segments[s].seg, spec->field, strlen(spec->field));
            if (!rc) rc = agg_segment(&r, docs);
            if (spec->filter && docs) roaring_bitmap_free(docs);
        }
        if (!rc) rc = agg_state_write(r.state, &w);
        agg_state_free(r.state);
        hanu_buf_free(&r.val);
        matches_free(&narrow);
    }
    json_write_object_end(&w);
    matches_free(&m);
    return rc ? rc : json_writer_status(&w);
}
