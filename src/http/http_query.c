/*
 * http_query.c: the queries over the documents index (docs/API.md,
 * docs/QUERY.md): POST /c/{col}/_find, _search and _aggs, and GET
 * /c/{col}/docs, the listing by id.
 *
 * A request body is parsed and checked whole first (400 invalid_query with the
 * query module's message, which names the JSON path). Fresh by default: a query
 * sees every write acknowledged before it arrived. Its target is the newest record
 * of its collection at arrival (every write to it answered so far, at any
 * durability, is at or below it; on a follower, what it has applied; and every
 * record the log held at the start), or its min_txn when higher;
 * "fresh":false leaves only min_txn. When the index's published snapshots do
 * not cover the target yet (one atomic load each: nothing else is paid when
 * nothing was written since the last publish), the query is held in
 * srv->query_waits: the indexer is asked for a refresh (a publish without a
 * commit, indexer_refresh_upto) and wakes the loop when it has published; a
 * 2 ms loop timer also looks, for the deadline. The event loop never blocks on
 * the indexer; past --min-txn-wait-ms the answer is 503 index_behind with the
 * index's txn in the error object. A get by id or the listing with ?min_txn=
 * is held the same way until the store has applied that txn (a follower).
 *
 * Execution is the first, synchronous version, on the loop thread: index_find
 * narrows with the index and decides with filter_match on the stored bytes.
 * A search runs index_search_ex (block-max WAND over the text postings, BM25
 * with the collection's statistics, equal to search_eval's); `track_total`
 * says how many matches it counts before it prunes (default 1000).
 * The listing reads the store, not the index: it is current without min_txn.
 */
#include "http/http_internal.h"
#include "docs/docs.h"
#include "query/query.h"
#include "http/http_guard.h"
#include "http/query_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#define QUERY_DEFAULT_LIMIT 20
#define QUERY_MAX_LIMIT 1000
#define QUERY_MAX_OFFSET 1000000
#define LIST_DEFAULT_LIMIT 100
#define SEARCH_MAX_FIELDS 16
#define SEARCH_DEFAULT_TRACK_TOTAL 1000
#define SEARCH_MAX_TRACK_TOTAL 10000000
#define QUERY_WAIT_POLL_MS 2
#define QUERY_CHECK_MS 20

/* A query body, parsed. */
typedef struct query_req {
    json_doc *dom;
    filter *filter;
    sort_spec sort;
    size_t limit, offset;
    int count_only;
    uint64_t min_txn;
    search_query q;
    const char *fields[SEARCH_MAX_FIELDS];
    size_t nfields;
    aggs_spec *aggs;
    index_cursor *after;        /* _find, _search: resume after this position */
    uint64_t track_total;       /* _search: count exactly up to this many (INDEX_SEARCH_COUNT_ALL: all) */
    int fresh;                  /* see every write acknowledged before the query (default 1) */
} query_req;

static void query_req_free(query_req *r)
{
    filter_free(r->filter);
    search_query_free(&r->q);
    if (r->aggs) aggs_free(r->aggs);
    free(r->aggs);
    free(r->after);
    json_doc_free(r->dom);
}

static void invalid_query(http_call *c, const char *msg)
{
    http_error(c, 400, "invalid_query", "%s", msg);
}

/* A non-negative integer member at most max; 0 and an answer sent when it is not. */
static int member_uint(http_call *c, const json_value *v, const char *name, uint64_t min, uint64_t max,
                       uint64_t *out)
{
    int64_t n;
    if (json_as_int64(v, &n) != HANU_OK || n < (int64_t)min || (uint64_t)n > max) {
        http_error(c, 400, "invalid_query", "%s: must be an integer from %llu to %llu", name,
                   (unsigned long long)min, (unsigned long long)max);
        return 0;
    }
    *out = (uint64_t)n;
    return 1;
}

static int parse_fields(http_call *c, const json_value *v, query_req *r)
{
    size_t n = json_len(v);
    if (v->type != JSON_ARRAY || n == 0 || n > SEARCH_MAX_FIELDS) {
        http_error(c, 400, "invalid_query", "fields: must be an array of 1 to %d field paths", SEARCH_MAX_FIELDS);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const json_value *f = json_at(v, i);
        size_t len;
        if (json_as_string(f, &r->fields[i], &len) != HANU_OK || len == 0 || len > QUERY_MAX_PATH_BYTES) {
            http_error(c, 400, "invalid_query", "fields[%zu]: must be a field path of 1 to %d bytes", i,
                       QUERY_MAX_PATH_BYTES);
            return 0;
        }
    }
    r->nfields = n;
    return 1;
}

/* The members each route takes, besides min_txn and fresh. */
static const char *const find_members[] = { "filter", "sort", "limit", "offset", "count", "after", "fields", NULL };
static const char *const search_members[] = { "q", "fields", "filter", "limit", "offset", "after", "track_total",
                                               NULL };
static const char *const aggs_members[] = { "aggs", "filter", NULL };

static int known_member(const char *const *names, const char *key)
{
    for (; *names; names++)
        if (!strcmp(*names, key)) return 1;
    return !strcmp(key, "min_txn") || !strcmp(key, "fresh");
}

/* Parses the body in[0..len) of c's route into r (which points into in);
   0 and the answer sent when it is not a valid query. */
static int parse_query(http_call *c, query_req *r, const char *in, size_t len)
{
    json_error je;
    query_error qe = { "" };
    *r = (query_req){ .limit = QUERY_DEFAULT_LIMIT, .track_total = SEARCH_DEFAULT_TRACK_TOTAL, .fresh = 1 };
    if (json_doc_parse(in, len, NULL, &r->dom, &je) != HANU_OK) {
        http_error(c, 400, "invalid_json", "%s", je.msg);
        return 0;
    }
    const json_value *root = json_doc_root(r->dom);
    if (root->type != JSON_OBJECT) {
        invalid_query(c, "the body must be a JSON object");
        return 0;
    }
    const char *const *names = c->route == ROUTE_FIND ? find_members
                             : c->route == ROUTE_SEARCH ? search_members : aggs_members;
    const json_value *fv = NULL, *q = NULL, *aggs = NULL, *after = NULL;
    for (size_t i = 0; i < json_len(root); i++) {
        const json_value *v = json_at(root, i);
        const char *k = v->key;
        uint64_t u;
        int bval;
        if (!known_member(names, k)) {
            http_error(c, 400, "invalid_query", "%.64s: unknown member of a %s request", k,
                       c->route == ROUTE_FIND ? "_find" : c->route == ROUTE_SEARCH ? "_search" : "_aggs");
            return 0;
        }
        if (!strcmp(k, "filter")) fv = v;
        else if (!strcmp(k, "q")) q = v;
        else if (!strcmp(k, "aggs")) aggs = v;
        else if (!strcmp(k, "after")) after = v;
        else if (!strcmp(k, "fields")) { if (!parse_fields(c, v, r)) return 0; }
        else if (!strcmp(k, "sort")) {
            int rc = sort_parse(v, "sort", &r->sort, &qe);
            if (rc) { invalid_query(c, qe.msg); return 0; }
        } else if (!strcmp(k, "limit")) {
            if (!member_uint(c, v, "limit", 1, QUERY_MAX_LIMIT, &u)) return 0;
            r->limit = (size_t)u;
        } else if (!strcmp(k, "offset")) {
            if (!member_uint(c, v, "offset", 0, QUERY_MAX_OFFSET, &u)) return 0;
            r->offset = (size_t)u;
        } else if (!strcmp(k, "min_txn")) {
            if (!member_uint(c, v, "min_txn", 0, INT64_MAX, &r->min_txn)) return 0;
        } else if (!strcmp(k, "track_total")) {
            int64_t n;
            if (json_as_bool(v, &bval) == HANU_OK) r->track_total = bval ? INDEX_SEARCH_COUNT_ALL : 0;
            else if (json_as_int64(v, &n) == HANU_OK && n >= 0 && n <= SEARCH_MAX_TRACK_TOTAL) r->track_total = (uint64_t)n;
            else {
                http_error(c, 400, "invalid_query", "track_total: must be true, false or an integer from 0 to %d",
                           SEARCH_MAX_TRACK_TOTAL);
                return 0;
            }
        } else if (!strcmp(k, "count")) {
            if (json_as_bool(v, &bval) != HANU_OK) { invalid_query(c, "count: must be true or false"); return 0; }
            r->count_only = bval;
        } else if (!strcmp(k, "fresh")) {
            if (json_as_bool(v, &bval) != HANU_OK) { invalid_query(c, "fresh: must be true or false"); return 0; }
            r->fresh = bval;
        }
    }
    int rc = fv ? filter_parse_value(in, fv, "filter", &r->filter, &qe)
                : filter_parse("{}", 2, "filter", &r->filter, &qe);
    if (rc == HANU_OK && c->route == ROUTE_SEARCH) {
        const char *s;
        size_t sl;
        if (!q || json_as_string(q, &s, &sl) != HANU_OK) {
            invalid_query(c, "q: must be a string of words to search for");
            return 0;
        }
        rc = search_query_parse(s, sl, &r->q, &qe);
    }
    if (rc == HANU_OK && c->route == ROUTE_AGGS) {
        if (!aggs) { invalid_query(c, "aggs: missing (an object of named aggregations)"); return 0; }
        r->aggs = calloc(1, sizeof *r->aggs);
        rc = r->aggs ? aggs_parse(in, aggs, "aggs", r->aggs, &qe) : HANU_ERR_NOMEM;
    }
    if (rc == HANU_OK && after && after->type != JSON_NULL) {
        const char *s;
        size_t sl;
        int bad = 0;
        if (!(r->after = malloc(sizeof *r->after))) rc = HANU_ERR_NOMEM;
        else if (json_as_string(after, &s, &sl) != HANU_OK) bad = 1;
        else if (c->route == ROUTE_SEARCH)
            bad = index_search_cursor_decode(s, sl, index_search_hash(&r->q, r->fields, r->nfields), r->after) != HANU_OK;
        else bad = index_cursor_decode(s, sl, &r->sort, r->after) != HANU_OK;
        if (rc == HANU_OK && bad) {
            invalid_query(c, "after: not a cursor from \"next\" of this query (changed, cut, or of another sort)");
            return 0;
        }
        /* a later page never reads an older index than the page that made the cursor */
        if (r->after->txn_bound > r->min_txn) r->min_txn = r->after->txn_bound;
    }
    if (rc == HANU_ERR_NOMEM) { http_error(c, 500, "internal", "out of memory"); return 0; }
    if (rc) { invalid_query(c, qe.msg); return 0; }
    return 1;
}

/* ---- answers ---- */

static void write_hit(json_writer *w, const index_hit *h)
{
    json_write_key(w, "_id", 3);
    json_write_string(w, h->id, h->id_len);
    json_write_key(w, "txn", 3);
    json_write_int64(w, (int64_t)h->txn);
    json_write_key(w, "doc", 3);
    json_write_raw(w, h->doc, h->doc_len);
}

/* About the bytes of an answer of hits (ids rarely need escaping), per_hit more a hit. */
static size_t answer_size(const index_hits *h, size_t per_hit)
{
    size_t n = 256;
    for (size_t i = 0; i < h->n; i++) n += h->hits[i].doc_len + h->hits[i].id_len + 48 + per_hit;
    return n;
}

static void send_built(http_call *c, json_writer *w, hanu_buf *b)
{
    if (json_writer_status(w) != HANU_OK) http_error(c, 500, "internal", "cannot build the answer");
    else http_reply_buf(c, 200, b);
}

/* Closes an _aggs answer: "count", "index_txn"; sends it. */
static void finish_answer(http_call *c, json_writer *w, hanu_buf *b, size_t count, uint64_t itxn)
{
    server_json_u64(w, "count", count);
    server_json_u64(w, "index_txn", itxn);
    json_write_object_end(w);
    send_built(c, w, b);
}

static void find_failed(http_call *c, int rc, const query_error *qe)
{
    if (rc == HANU_ERR_INVALID) invalid_query(c, qe->msg);
    else http_error(c, 500, "internal", "query failed: %s", hanu_status_str(rc));
}

static size_t write_projection(json_writer *w, const char *in, const json_value *v, const char *const *paths,
                               const size_t *lens, size_t n, int skip_id);

/* An array on a projected path, as MongoDB's find projection gives it: object
 * elements projected, array elements projected the same way in turn, other
 * elements left out ({"a":[[1,{"x":2}],{"x":3},5]} with a.x: {"a":[[{"x":2}],{"x":3}]}). */
static void write_projected_array(json_writer *w, const char *in, const json_value *arr, const char *const *paths,
                                  const size_t *lens, size_t n)
{
    json_write_array_begin(w);
    for (size_t e = 0; e < json_len(arr); e++) {
        const json_value *x = json_at(arr, e);
        if (x->type == JSON_ARRAY) {
            write_projected_array(w, in, x, paths, lens, n);
        } else if (x->type == JSON_OBJECT) {
            json_write_object_begin(w);
            write_projection(w, in, x, paths, lens, n, 0);
            json_write_object_end(w);
        }
    }
    json_write_array_end(w);
}

/* Writes the members of v that the fields (dotted paths, relative to v) name;
 * objects on the way are kept with only what is below them, arrays with their
 * object and array elements projected. Returns the number of members written. */
static size_t write_projection(json_writer *w, const char *in, const json_value *v, const char *const *paths,
                               const size_t *lens, size_t n, int skip_id)
{
    size_t wrote = 0;
    for (size_t i = 0; i < json_len(v); i++) {
        const json_value *m = json_at(v, i);
        if (skip_id && !strcmp(m->key, "_id")) continue;
        const char *sub[SEARCH_MAX_FIELDS];
        size_t sublen[SEARCH_MAX_FIELDS], nsub = 0;
        int whole = 0;
        for (size_t f = 0; f < n; f++) {
            if (lens[f] == m->key_len && !memcmp(paths[f], m->key, m->key_len)) whole = 1;
            else if (lens[f] > m->key_len && paths[f][m->key_len] == '.' && !memcmp(paths[f], m->key, m->key_len)) {
                sub[nsub] = paths[f] + m->key_len + 1;
                sublen[nsub++] = lens[f] - m->key_len - 1;
            }
        }
        if (whole) {
            json_write_key(w, m->key, m->key_len);
            json_write_raw(w, in + m->start, m->end - m->start);
            wrote++;
        } else if (nsub && m->type == JSON_OBJECT) {
            json_write_key(w, m->key, m->key_len);
            json_write_object_begin(w);
            write_projection(w, in, m, sub, sublen, nsub, 0);
            json_write_object_end(w);
            wrote++;
        } else if (nsub && m->type == JSON_ARRAY) {
            json_write_key(w, m->key, m->key_len);
            write_projected_array(w, in, m, sub, sublen, nsub);
            wrote++;
        }
    }
    return wrote;
}

/* A hit whose doc holds only the requested fields and _id. */
static void write_projected_hit(json_writer *w, const index_hit *h, const query_req *r)
{
    json_doc *d;
    if (json_doc_parse(h->doc, h->doc_len, NULL, &d, NULL) != HANU_OK) { write_hit(w, h); return; }
    const json_value *root = json_doc_root(d);
    size_t lens[SEARCH_MAX_FIELDS];
    for (size_t i = 0; i < r->nfields; i++) lens[i] = strlen(r->fields[i]);
    json_write_key(w, "_id", 3);
    json_write_string(w, h->id, h->id_len);
    json_write_key(w, "txn", 3);
    json_write_int64(w, (int64_t)h->txn);
    json_write_key(w, "doc", 3);
    json_write_object_begin(w);
    const json_value *id = json_get(root, "_id");
    if (id) {
        json_write_key(w, "_id", 3);
        json_write_raw(w, h->doc + id->start, id->end - id->start);
    }
    write_projection(w, h->doc, root, r->fields, lens, r->nfields, 1);
    json_write_object_end(w);
    json_doc_free(d);
}

/* "next": the cursor of the page after this one, or null. */
static void write_next(json_writer *w, const index_cursor *next)
{
    json_write_key(w, "next", 4);
    if (!next) { json_write_null(w); return; }
    char text[INDEX_CURSOR_TEXT_MAX + 1];
    size_t tl = index_cursor_encode(next, text, sizeof text);
    json_write_string(w, text, tl);
}

static void run_find(http_call *c, query_req *r, uint64_t itxn, const index_snapshot *snap)
{
    index_hits h;
    query_error qe = { "" };
    index_cursor *next = r->count_only ? NULL : malloc(sizeof *next);
    int has_next = 0;
    index_find_opts o = { .sort = &r->sort, .offset = r->offset, .limit = r->limit, .count_only = r->count_only,
                          .after = r->after, .index_txn = itxn };
    int rc = !next && !r->count_only ? HANU_ERR_NOMEM : index_find_ex(c->srv->store, snap, r->filter, &o, &h, next,
                                                                         &has_next, &qe);
    if (rc) { free(next); find_failed(c, rc, &qe); return; }
    http_expire_drop_hits(c, &h, NULL);   /* until the sweep deletes them (http_expire.c) */
    hanu_buf b = {0};
    hanu_buf_reserve(&b, answer_size(&h, 0));   /* no regrowing: the documents are most of it */
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    if (!r->count_only) {
        json_write_key(&w, "hits", 4);
        json_write_array_begin(&w);
        for (size_t i = 0; i < h.n; i++) {
            json_write_object_begin(&w);
            if (r->nfields) write_projected_hit(&w, &h.hits[i], r);
            else write_hit(&w, &h.hits[i]);
            json_write_object_end(&w);
        }
        json_write_array_end(&w);
    }
    server_json_u64(&w, "count", h.total);
    if (!r->count_only) {
        write_next(&w, has_next ? next : NULL);
    }
    server_json_u64(&w, "index_txn", itxn);
    json_write_object_end(&w);
    send_built(c, &w, &b);
    free(next);
    hanu_buf_free(&b);
    index_hits_free(&h);
}

static void run_aggs(http_call *c, query_req *r, uint64_t itxn, const index_snapshot *snap)
{
    query_error qe = { "" };
    hanu_buf out = {0}, b = {0};
    size_t count = 0;
    int rc = index_aggs(c->srv->store, snap, r->filter, r->aggs, &out, &count, &qe);
    if (rc == HANU_ERR_TOO_LARGE || rc == HANU_ERR_INVALID) {
        invalid_query(c, qe.msg);
    } else if (rc) {
        http_error(c, 500, "internal", "aggregation failed: %s", hanu_status_str(rc));
    } else {
        json_writer w;
        json_writer_init(&w, &b);
        json_write_object_begin(&w);
        json_write_key(&w, "aggs", 4);
        json_write_raw(&w, (const char *)out.data, out.len);
        finish_answer(c, &w, &b, count, itxn);
    }
    hanu_buf_free(&out);
    hanu_buf_free(&b);
}

static void run_search(http_call *c, query_req *r, uint64_t itxn, const index_snapshot *snap)
{
    index_search_result res;
    index_search_opts o = { .offset = r->offset, .limit = r->limit, .count_upto = r->track_total,
                            .after = r->after, .index_txn = itxn };
    int rc = index_search_ex(c->srv->store, snap, &r->q, r->filter, r->fields, r->nfields, &o, &res);
    if (rc) {
        http_error(c, 500, "internal", "search failed: %s", hanu_status_str(rc));
        return;
    }
    http_expire_drop_hits(c, &res.hits, res.scores);
    hanu_buf b = {0};
    hanu_buf_reserve(&b, answer_size(&res.hits, 32));
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "hits", 4);
    json_write_array_begin(&w);
    for (size_t k = 0; k < res.hits.n; k++) {
        json_write_object_begin(&w);
        write_hit(&w, &res.hits.hits[k]);
        json_write_key(&w, "score", 5);
        json_write_double(&w, res.scores[k]);
        json_write_object_end(&w);
    }
    json_write_array_end(&w);
    server_json_u64(&w, "count", res.hits.total);
    json_write_key(&w, "count_relation", 14);
    json_write_string(&w, res.total_gte ? "gte" : "eq", res.total_gte ? 3 : 2);
    write_next(&w, res.next);
    server_json_u64(&w, "index_txn", itxn);
    json_write_object_end(&w);
    send_built(c, &w, &b);
    hanu_buf_free(&b);
    index_search_result_free(&res);
}

/* ---- the listing by id (from the store) ---- */

typedef struct id_list {
    const char *after;
    size_t after_len;
    char **ids;                  /* NUL-terminated: ids hold no NUL (docs_id_valid) */
    size_t n, cap;
    int failed;
} id_list;

static int id_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int d = memcmp(a, b, HANU_MIN(al, bl));
    return d ? d : (al > bl) - (al < bl);
}

static int collect_id(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    id_list *l = ctx;
    (void)value;
    (void)value_len;
    if (l->after && id_cmp((const char *)key, key_len, l->after, l->after_len) <= 0) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids) { l->failed = 1; return 1; }
        l->ids = ids;
        l->cap = cap;
    }
    char *id = malloc(key_len + 1);
    if (!id) { l->failed = 1; return 1; }
    memcpy(id, key, key_len);
    id[key_len] = '\0';
    l->ids[l->n++] = id;
    return 0;
}

static int cmp_id_ptr(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    return strcmp(x, y);
}

/* The listing's parameters. */
typedef struct list_req {
    size_t limit;
    char after[DOCS_ID_MAX + 1];
    size_t after_len;           /* 0: from the first id */
} list_req;

/* Reads limit and after (http_params.c decoded them) into l; 0 and the answer sent when bad. */
static int parse_list(http_call *c, list_req *l)
{
    size_t limit = LIST_DEFAULT_LIMIT;
    const h2o_iovec_t *v = http_param(c, HTTP_PARAM_LIMIT);
    if (v) {
        char *end;
        unsigned long n = strtoul(v->base, &end, 10);
        if (!v->len || v->len > 15 || *end || v->base[0] < '0' || v->base[0] > '9' || n < 1 || n > QUERY_MAX_LIMIT) {
            http_error(c, 400, "invalid_request", "limit must be an integer from 1 to %d", QUERY_MAX_LIMIT);
            return 0;
        }
        limit = n;
    }
    l->limit = limit;
    v = http_param(c, HTTP_PARAM_AFTER);
    if (v) {
        if (!v->len || v->len > DOCS_ID_MAX) {
            http_error(c, 400, "invalid_request", "after must be a percent-encoded document id");
            return 0;
        }
        memcpy(l->after, v->base, v->len);
        l->after_len = v->len;
    }
    return 1;
}

/* The listing itself (any thread: c has no request, the answer is kept). */
static void list_docs(http_call *c, uint32_t db, const list_req *lr)
{
    size_t limit = lr->limit;
    id_list l = { .after = lr->after_len ? lr->after : NULL, .after_len = lr->after_len };
    store *st = c->srv->store;
    int rc = store_scan(st, db, collect_id, &l);
    if (!rc && l.failed) rc = HANU_ERR_NOMEM;
    if (!rc) qsort(l.ids, l.n, sizeof *l.ids, cmp_id_ptr);
    hanu_buf b = {0}, docbuf = {0}, *doc = &docbuf;
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
    int expiry = http_expire_field(c, field);
    uint64_t now = hanu_wall_ms();
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "docs", 4);
    json_write_array_begin(&w);
    size_t shown = 0, last = 0;
    for (size_t i = 0; !rc && i < l.n && shown < limit; i++) {
        index_hit hit = { .id = l.ids[i], .id_len = strlen(l.ids[i]) };
        hanu_buf_reset(doc);
        if (store_get(st, db, hit.id, hit.id_len, doc, &hit.txn) != HANU_OK) continue;
        if (expiry && docs_expired((const char *)doc->data, doc->len, field, now)) continue;
        hit.doc = (char *)doc->data;
        hit.doc_len = doc->len;
        json_write_object_begin(&w);
        write_hit(&w, &hit);
        json_write_object_end(&w);
        shown++;
        last = i;
    }
    json_write_array_end(&w);
    json_write_key(&w, "next", 4);
    if (shown == limit && last + 1 < l.n) json_write_string(&w, l.ids[last], strlen(l.ids[last]));
    else json_write_null(&w);
    json_write_object_end(&w);
    if (rc) http_error(c, 500, "internal", "cannot list the documents: %s", hanu_status_str(rc));
    else send_built(c, &w, &b);
    hanu_buf_free(&b);
    hanu_buf_free(&docbuf);
    for (size_t i = 0; i < l.n; i++) free(l.ids[i]);
    free(l.ids);
}

/* ---- queries held for their min_txn ---- */

typedef struct query_wait {
    h2o_linklist_t link;
    http_call call;
    uint64_t min_txn, deadline_ns, held_ns;
    int on_store;                /* waits for the store to apply min_txn, not for the index */
    void (*resume)(http_call *c);   /* runs the request once min_txn is reached */
    struct query_wait **guard;   /* in the request's pool; points back here until released */
} query_wait;

static void on_wait_req_gone(void *p)
{
    query_wait *qw = *(query_wait **)p;
    if (!qw) return;
    /* The client left: nobody to answer. */
    h2o_linklist_unlink(&qw->link);
    free(qw);
}

static void release_wait(query_wait *qw)
{
    h2o_linklist_unlink(&qw->link);
    *qw->guard = NULL;   /* answering may free the request's pool */
}

/* 503 with code and a message, and the txn this node has reached as field `field`. */
static void behind(http_call *c, const char *code, const char *what, const char *field, uint64_t min_txn,
                   uint64_t reached)
{
    char msg[160];
    snprintf(msg, sizeof msg, "%s txn %llu, below min_txn %llu, after %u ms (--min-txn-wait-ms)", what,
             (unsigned long long)reached, (unsigned long long)min_txn, c->srv->opt.min_txn_wait_ms);
    hanu_buf b = {0};
    http_error_json(&b, code, msg);
    if (b.len >= 2) {
        b.len -= 2;   /* reopen the error object for the reached txn */
        char tail[64];
        int n = snprintf(tail, sizeof tail, ",\"%s\":%llu}}", field, (unsigned long long)reached);
        hanu_buf_append(&b, tail, (size_t)n);
    }
    c->srv->errors++;
    http_send(c, 503, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

static void index_behind(http_call *c, uint64_t min_txn, uint64_t itxn)
{
    behind(c, "index_behind", "the index is at", "index_txn", min_txn, itxn);
}

/* 503 store_behind: this node has not applied min_txn within --min-txn-wait-ms. */
static void store_behind(http_call *c, uint64_t min_txn, uint64_t applied)
{
    behind(c, "store_behind", "this node has applied", "applied_txn", min_txn, applied);
}

static void run_query(http_call *c, int waited);
static void resume_query(http_call *c) { run_query(c, 1); }

/* Answers every held request whose txn is reached, whose deadline passed, or whose
   index failed (loop thread). */
static void poll_waits(server *srv)
{
    uint64_t itxn = srv->indexer ? indexer_visible_txn(srv->indexer) : 0, now = hanu_now_ns();
    uint64_t applied = store_last_txn(srv->store);
    int failed = srv->indexer && indexer_failed(srv->indexer);
    h2o_linklist_t *anchor = &srv->query_waits;
    for (h2o_linklist_t *n = anchor->next; n != anchor;) {
        query_wait *qw = H2O_STRUCT_FROM_MEMBER(query_wait, link, n);
        n = n->next;
        uint64_t at = qw->on_store ? applied : itxn;
        int dead = !qw->on_store && failed;
        if (at < qw->min_txn && !dead && now < qw->deadline_ns) continue;
        release_wait(qw);
        http_call c = qw->call;
        uint64_t min_txn = qw->min_txn;
        int on_store = qw->on_store;
        srv->query_held++;
        srv->query_held_ns += now - qw->held_ns;
        void (*resume)(http_call *) = qw->resume;
        free(qw);
        if (at >= min_txn) resume(&c);
        else if (dead) http_error(&c, 503, "index_failed", "the indexer stopped after a failed write; "
                                  "restart the server");
        else if (on_store) store_behind(&c, min_txn, applied);
        else index_behind(&c, min_txn, itxn);
    }
}

static void on_query_wait_poll(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, query_wait_entry, entry);
    poll_waits(srv);
    if (!h2o_linklist_is_empty(&srv->query_waits) && !h2o_timeout_is_linked(&srv->query_wait_entry))
        h2o_timeout_link(srv->loop, &srv->query_wait_timeout, &srv->query_wait_entry);
}

void http_query_wake(server *srv)
{
    if (srv->query_waits.next && !h2o_linklist_is_empty(&srv->query_waits)) poll_waits(srv);
}

/* Holds c until min_txn is reached (by the index's published snapshots, or with
   on_store by the store), then calls resume(c); 0 and an answer sent when it cannot. */
static int hold_until(http_call *c, uint64_t min_txn, int on_store, void (*resume)(http_call *c))
{
    server *srv = c->srv;
    query_wait *qw = malloc(sizeof *qw);
    if (!qw) { http_error(c, 500, "internal", "out of memory"); return 0; }
    *qw = (query_wait){ .call = *c, .min_txn = min_txn, .on_store = on_store, .resume = resume,
                        .held_ns = hanu_now_ns(),
                        .deadline_ns = c->start_ns + (uint64_t)srv->opt.min_txn_wait_ms * 1000000u };
    qw->guard = h2o_mem_alloc_shared(&c->req->pool, sizeof *qw->guard, on_wait_req_gone);
    *qw->guard = qw;
    h2o_linklist_insert(&srv->query_waits, &qw->link);
    if (!on_store) indexer_refresh_upto(srv->indexer, min_txn);
    if (!h2o_timeout_is_linked(&srv->query_wait_entry))
        h2o_timeout_link(srv->loop, &srv->query_wait_timeout, &srv->query_wait_entry);
    return 1;
}

static int hold_query(http_call *c, uint64_t min_txn)
{
    return hold_until(c, min_txn, 0, resume_query);
}

int http_hold_for_store(http_call *c, uint64_t min_txn, void (*resume)(http_call *c))
{
    if (c->srv->stopping) {
        http_error(c, 503, "shutting_down", "the server is shutting down");
        return 1;
    }
    hold_until(c, min_txn, 1, resume);
    return 1;
}

void http_query_stop(server *srv)
{
    if (!srv->query_waits.next) return;   /* never started (HTTP off) */
    if (h2o_timeout_is_linked(&srv->query_wait_entry)) h2o_timeout_unlink(&srv->query_wait_entry);
    while (!h2o_linklist_is_empty(&srv->query_waits)) {
        query_wait *qw = H2O_STRUCT_FROM_MEMBER(query_wait, link, srv->query_waits.next);
        release_wait(qw);
        http_call c = qw->call;
        free(qw);
        http_error(&c, 503, "shutting_down", "the server is shutting down");
    }
}

/* ---- execution: on a query worker, or on the loop with --query-threads 0 ---- */

/* One query handed to a worker: everything it needs, copied off the request. */
typedef struct query_task {
    query_job job;              /* the pool's part (first: a job is its task) */
    h2o_linklist_t link;        /* srv->query_tasks while in the pool (loop thread) */
    http_call call;             /* call.req is touched only on the loop */
    struct query_task **guard;  /* in the request's pool; points back here until answered; NULL: h2o freed it */
    uint32_t db;
    char *body;                 /* a copy of the request body: r points into it */
    query_req r;
    list_req list;
    http_answer answer;         /* built by the worker, sent by the loop */
} query_task;

static void task_free(query_task *t)
{
    query_req_free(&t->r);
    free(t->body);
    hanu_buf_free(&t->answer.body);
    free(t);
}

/* Runs the query on a snapshot taken now and keeps its answer (any thread). */
static void task_run(query_job *job)
{
    query_task *t = (query_task *)job;
    http_call c = t->call;
    c.req = NULL;                /* the request belongs to the loop */
    c.answer = &t->answer;
    if (c.route == ROUTE_DOC_LIST) { list_docs(&c, t->db, &t->list); return; }
    indexer *ix = c.srv->indexer;
    uint64_t itxn = indexer_visible_txn(ix);   /* read before the snapshot: it covers it */
    index_snapshot *snap = index_snapshot_acquire(ix, t->db);
    if (c.route == ROUTE_FIND) run_find(&c, &t->r, itxn, snap);
    else if (c.route == ROUTE_SEARCH) run_search(&c, &t->r, itxn, snap);
    else run_aggs(&c, &t->r, itxn, snap);
    if (snap) index_snapshot_release(snap);
}

/* Loop thread: sends what the worker built. */
static void task_answer(query_task *t)
{
    http_call *c = &t->call;
    if (!t->answer.status) http_error(c, 500, "internal", "out of memory building the answer");
    else http_reply_buf(c, t->answer.status, &t->answer.body);
}

/* Loop thread: a job came back from the pool. */
static void task_done(query_job *job)
{
    query_task *t = (query_task *)job;
    h2o_linklist_unlink(&t->link);
    if (!t->guard) { task_free(t); return; }   /* h2o freed the request: nobody to answer */
    *t->guard = NULL;   /* answering may free the request's pool */
    if (atomic_load(&job->cancelled)) {
        /* The peer closed (query_check): a short answer ends the request, and the connection. */
        t->call.req->http1_is_persistent = 0;
        http_error(&t->call, 503, "cancelled", "the client closed its connection before the answer");
    } else if (!job->ran) {
        http_error(&t->call, 503, "shutting_down", "the server is shutting down");
    } else {
        task_answer(t);
    }
    task_free(t);
}

static void on_task_req_gone(void *p)
{
    query_task *t = *(query_task **)p;
    if (!t) return;
    t->guard = NULL;   /* the request and this guard are being freed */
    query_pool_cancel(t->call.srv->query_pool, &t->job);   /* freed when it comes back */
}

/* Whether the client of req closed its side (FIN or RST). h2o 2.2.5 does not read a
   connection while its request is being answered, so it would not notice; a peek
   does, and sees pipelined bytes as a live client. */
static int client_gone(h2o_req_t *req)
{
    h2o_socket_t *sock = req->conn->callbacks->get_socket ? req->conn->callbacks->get_socket(req->conn) : NULL;
    if (!sock) return 0;
    char b;
    ssize_t n = recv(h2o_socket_get_fd(sock), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Every QUERY_CHECK_MS while queries are in the pool: those whose client left are
   cancelled, so that a worker skips them (or its answer is dropped). */
static void on_query_check(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, query_check_entry, entry);
    h2o_linklist_t *anchor = &srv->query_tasks;
    for (h2o_linklist_t *n = anchor->next; n != anchor; n = n->next) {
        query_task *t = H2O_STRUCT_FROM_MEMBER(query_task, link, n);
        if (t->guard && !atomic_load(&t->job.cancelled) && client_gone(t->call.req))
            query_pool_cancel(srv->query_pool, &t->job);
    }
    if (!h2o_linklist_is_empty(anchor)) h2o_timeout_link(srv->loop, &srv->query_check_timeout, entry);
}

/* 1 when t is a find or search that reads at most --query-inline-postings
   postings (index_find_estimate, index_search_estimate): on one core a
   thread's handoff, and the preemptions while it runs, cost more than that. */
static int cheap_enough(server *srv, const query_task *t)
{
    uint64_t limit = srv->opt.query_inline_postings;
    if (!limit || (t->call.route != ROUTE_FIND && t->call.route != ROUTE_SEARCH)) return 0;
    index_snapshot *snap = index_snapshot_acquire(srv->indexer, t->db);
    uint64_t cost = t->call.route == ROUTE_FIND ? index_find_estimate(snap, t->r.filter)
                                                : index_search_estimate(snap, &t->r.q, t->r.filter);
    if (snap) index_snapshot_release(snap);
    return cost <= limit;
}

/* Runs t on a worker, or here without a pool or when cheap; t is consumed. */
static void dispatch(query_task *t)
{
    server *srv = t->call.srv;
    int cheap = srv->query_pool && cheap_enough(srv, t);
    srv->query_inline += (uint64_t)cheap;
    if (!srv->query_pool || cheap) {   /* on the loop: --query-threads 0, or cheap enough */
        task_run(&t->job);
        task_answer(t);
        task_free(t);
        return;
    }
    if (query_pool_submit(srv->query_pool, &t->job) != HANU_OK) {
        h2o_req_t *req = t->call.req;
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
        http_error(&t->call, 503, "overloaded", "%u queries are waiting for a worker already (--query-queue); "
                   "retry later", srv->opt.query_queue);
        task_free(t);
        return;
    }
    /* Done runs on this thread, later: the guard is in place before it can. */
    t->guard = h2o_mem_alloc_shared(&t->call.req->pool, sizeof *t->guard, on_task_req_gone);
    *t->guard = t;
    h2o_linklist_insert(&srv->query_tasks, &t->link);
    if (!h2o_timeout_is_linked(&srv->query_check_entry))
        h2o_timeout_link(srv->loop, &srv->query_check_timeout, &srv->query_check_entry);
}

/* ---- entry ---- */

/* The request body's min_txn, 0 when it has none or is not a JSON object. */
static uint64_t body_min_txn(h2o_req_t *req)
{
    json_doc *d;
    if (!req->entity.base || json_doc_parse(req->entity.base, req->entity.len, NULL, &d, NULL) != HANU_OK) return 0;
    const json_value *root = json_doc_root(d), *v = root->type == JSON_OBJECT ? json_get(root, "min_txn") : NULL;
    int64_t n = 0;
    if (!v || json_as_int64(v, &n) != HANU_OK || n < 0) n = 0;
    json_doc_free(d);
    return (uint64_t)n;
}

/* The txn of the newest write to collection db that may have been acknowledged: the
   newest record applied to it (a `none` answer leaves once its frame is written,
   `local` and `bucket` ones later; on a follower, the last applied), and at least
   every record the log held at the start (the index may still be catching up with
   them). Writes to other collections and databases do not hold this query: a stream
   of key-value writes or of another collection's keeps its fresh reads unheld. */
static uint64_t fresh_target(server *srv, uint32_t db)
{
    store_db_info info;
    uint64_t t = HANU_MIN(srv->fresh_start_txn, srv->fresh_start_record);
    if (store_db_info_get(srv->store, db, &info) == HANU_OK && info.last_txn > t) t = info.last_txn;
    return t;
}

static void run_query(http_call *c, int waited)
{
    server *srv = c->srv;
    if (!http_token_allows(c, c->col, 0)) {
        http_error(c, 403, "forbidden", "this token may not read collection \"%s\"", c->col);
        return;
    }
    uint32_t db;
    if (!waited && c->route == ROUTE_DOC_LIST) {
        /* Read-your-writes on a follower: the listing reads the store, held until it
           has applied min_txn. */
        uint64_t min_txn;
        if (!http_param_min_txn(c, &min_txn)) return;
        if (min_txn > store_last_txn(srv->store)) { http_hold_for_store(c, min_txn, resume_query); return; }
    }
    if (!waited && srv->indexer && c->route != ROUTE_DOC_LIST &&
        docs_collection_lookup(srv->store, c->col, strlen(c->col), &db) == HANU_ERR_NOT_FOUND) {
        /* A follower may not yet have replayed the collection's creation: with a
           min_txn beyond its log, wait for it before saying the collection is missing. */
        uint64_t want = body_min_txn(c->req);
        if (want > store_last_txn(srv->store)) { hold_query(c, want); return; }
    }
    if (http_find_collection(c, 0, &db)) return;
    if (c->route == ROUTE_UPDATE || c->route == ROUTE_DELETE_QUERY) {
        /* Writes by filter (http_update.c) see every write answered before they came:
           held until the index covers their collection's newest record, then run here,
           on the loop. */
        if (!srv->indexer) { http_error(c, 503, "index_off", "the server runs with --no-index"); return; }
        if (indexer_failed(srv->indexer)) {
            http_error(c, 503, "index_failed", "the indexer stopped after a failed write (see \"failure\" in "
                       "/_status); restart the server");
            return;
        }
        uint64_t last = fresh_target(srv, db);
        if (!waited && indexer_visible_txn(srv->indexer) < last) {
            if (srv->stopping) http_error(c, 503, "shutting_down", "the server is shutting down");
            else hold_query(c, last);
            return;
        }
        http_update_query_run(c, db);
        return;
    }
    query_task *t = calloc(1, sizeof *t);
    if (!t) { http_error(c, 500, "internal", "out of memory"); return; }
    t->call = *c;
    t->db = db;
    if (c->route == ROUTE_DOC_LIST) {
        if (parse_list(c, &t->list)) dispatch(t);
        else task_free(t);
        return;
    }
    if (!srv->indexer) {
        task_free(t);
        http_error(c, 503, "index_off", "the server runs with --no-index");
        return;
    }
    if (indexer_failed(srv->indexer)) {   /* its answers would be stale forever, not lagging */
        task_free(t);
        http_error(c, 503, "index_failed", "the indexer stopped after a failed write (see \"failure\" in "
                   "/_status); restart the server");
        return;
    }
    /* The worker must not read the request (its client may leave): the body is copied. */
    h2o_req_t *req = c->req;
    size_t len = req->entity.base ? req->entity.len : 2;
    t->body = malloc(len + 1);
    if (!t->body) { task_free(t); http_error(c, 500, "internal", "out of memory"); return; }
    memcpy(t->body, req->entity.base ? req->entity.base : "{}", len);
    t->body[len] = '\0';
    if (!parse_query(c, &t->r, t->body, len)) { task_free(t); return; }
    uint64_t min_txn = t->r.min_txn;
    if (t->r.fresh) {
        uint64_t acked = fresh_target(srv, db);
        if (acked > min_txn) min_txn = acked;
    }
    if (!waited && min_txn > indexer_visible_txn(srv->indexer)) {
        /* Held on the loop, not on a worker: a wait costs a list entry, never a thread. */
        task_free(t);
        if (srv->stopping) http_error(c, 503, "shutting_down", "the server is shutting down");
        else hold_query(c, min_txn);
        return;
    }
    dispatch(t);
}

void http_query(http_call *c)
{
    run_query(c, 0);
}

int http_query_start(server *srv)
{
    h2o_linklist_init_anchor(&srv->query_waits);
    h2o_timeout_init(srv->loop, &srv->query_wait_timeout, QUERY_WAIT_POLL_MS);
    srv->query_wait_entry.cb = on_query_wait_poll;
    h2o_linklist_init_anchor(&srv->query_tasks);
    h2o_timeout_init(srv->loop, &srv->query_check_timeout, QUERY_CHECK_MS);
    srv->query_check_entry.cb = on_query_check;
    if (!srv->opt.query_threads) return HANU_OK;
    return query_pool_create(srv->loop, srv->opt.query_threads, srv->opt.query_queue, task_run, task_done,
                             &srv->query_pool);
}

void http_query_close(server *srv)
{
    query_pool *p = srv->query_pool;
    query_pool_close(p);      /* hands every task back through task_done */
    srv->query_pool = NULL;   /* what comes in from now on runs on the loop */
    if (srv->query_tasks.next && h2o_timeout_is_linked(&srv->query_check_entry))
        h2o_timeout_unlink(&srv->query_check_entry);
}

size_t http_query_busy(server *srv)
{
    if (!srv->query_pool) return 0;
    query_pool_stats st;
    query_pool_get_stats(srv->query_pool, &st);
    return st.in_flight;
}

/* ---- status and metrics ---- */

void http_index_status(server *srv, json_writer *w)
{
    if (!srv->indexer) return;   /* --no-index */
    indexer_stats st;
    indexer_get_stats(srv->indexer, &st);
    json_write_key(w, "index", 5);
    json_write_object_begin(w);
    const server_json_field f[] = {
        { "index_txn", st.index_txn }, { "lag_txns", st.lag_txns }, { "segments", st.segments },
        { "bytes", st.bytes }, { "live_docs", st.live_docs }, { "commits", st.commits },
        { "visible_txn", st.visible_txn }, { "refreshes", st.refreshes },
    };
    server_json_fields(w, f, sizeof f / sizeof *f);
    json_write_key(w, "failed", 6);
    json_write_bool(w, st.failed);
    if (st.failed) {
        json_write_key(w, "failure", 7);
        json_write_string(w, st.failure, strlen(st.failure));
    }
    index_bitset_cache_stats cs;
    index_bitset_cache_get_stats(&cs);
    json_write_key(w, "filter_cache", 12);
    json_write_object_begin(w);
    const server_json_field cf[] = { { "hits", cs.hits }, { "misses", cs.misses }, { "bytes", cs.bytes },
                                     { "entries", cs.entries }, { "max_bytes", cs.max_bytes } };
    server_json_fields(w, cf, sizeof cf / sizeof *cf);
    json_write_object_end(w);
    http_index_more_status(srv, w);
    json_write_object_end(w);
    query_pool_stats qs = {0};
    if (srv->query_pool) query_pool_get_stats(srv->query_pool, &qs);
    json_write_key(w, "query", 5);
    json_write_object_begin(w);
    const server_json_field q[] = {
        { "threads", qs.threads }, { "queue_cap", qs.queue_cap }, { "queued", qs.queued },
        { "running", qs.running }, { "jobs", qs.jobs }, { "rejected", qs.rejected },
        { "cancelled", qs.cancelled }, { "busy_ms", qs.busy_ns / 1000000 }, { "wait_ms", qs.wait_ns / 1000000 },
        { "held", srv->query_held }, { "held_us", srv->query_held_ns / 1000 },
    };
    server_json_fields(w, q, sizeof q / sizeof *q);
    json_write_object_end(w);
}

typedef struct metric_family { const char *name, *type, *help; } metric_family;

static void u64_families(hanu_buf *b, const metric_family *fam, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char line[512];
        int len = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", fam[i].name, fam[i].help,
                           fam[i].name, fam[i].type, fam[i].name, (unsigned long long)v[i]);
        if (len > 0) hanu_buf_append(b, line, HANU_MIN((size_t)len, sizeof line - 1));
    }
}

static void query_metrics(server *srv, hanu_buf *b)
{
    query_pool_stats qs = {0};
    if (srv->query_pool) query_pool_get_stats(srv->query_pool, &qs);
    static const metric_family fam[] = {
        { "hanudb_query_threads", "gauge", "Query worker threads (0: queries run on the event loop)." },
        { "hanudb_query_queue_capacity", "gauge", "Queries that may wait for a worker (--query-queue)." },
        { "hanudb_query_queue_length", "gauge", "Queries waiting for a worker now." },
        { "hanudb_query_running", "gauge", "Queries on a worker now." },
        { "hanudb_query_jobs_total", "counter", "Queries finished by the workers." },
        { "hanudb_query_rejected_total", "counter", "Queries answered 503 overloaded: the queue was full." },
        { "hanudb_query_cancelled_total", "counter", "Queries whose client left before the answer." },
        { "hanudb_query_inline_total", "counter", "Queries run on the event loop as cheap enough (--query-inline-postings)." },
        { "hanudb_query_held_total", "counter", "Queries held until the index covered their writes (fresh or min_txn)." },
        { "hanudb_query_busy_seconds_total", "counter", "Time the workers spent running queries." },
        { "hanudb_query_wait_seconds_total", "counter", "Time queries spent waiting for a worker." },
        { "hanudb_query_held_seconds_total", "counter", "Time queries spent held until the index covered their writes." },
    };
    const uint64_t v[] = { qs.threads, qs.queue_cap, qs.queued, qs.running, qs.jobs, qs.rejected, qs.cancelled,
                           srv->query_inline, srv->query_held };
    u64_families(b, fam, v, sizeof v / sizeof *v);
    const double secs[] = { (double)qs.busy_ns / 1e9, (double)qs.wait_ns / 1e9, (double)srv->query_held_ns / 1e9 };
    for (size_t i = 0; i < 3; i++) {
        const metric_family *f = &fam[sizeof v / sizeof *v + i];
        char line[512];
        int len = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.6f\n", f->name, f->help,
                           f->name, f->type, f->name, secs[i]);
        if (len > 0) hanu_buf_append(b, line, HANU_MIN((size_t)len, sizeof line - 1));
    }
}

void http_index_metrics(server *srv, hanu_buf *b)
{
    if (!srv->indexer) return;   /* --no-index */
    indexer_stats st;
    indexer_get_stats(srv->indexer, &st);
    static const metric_family fam[] = {
        { "hanudb_index_txn", "gauge", "Every txn up to it is in the documents index." },
        { "hanudb_index_lag_txns", "gauge", "Txns written to the log and not yet in the index." },
        { "hanudb_index_segments", "gauge", "Segments of the documents index, every collection." },
        { "hanudb_index_bytes", "gauge", "Bytes of the index's segments." },
        { "hanudb_index_commits_total", "counter", "Commits of the indexer since the start." },
        { "hanudb_index_visible_txn", "gauge", "Every txn up to it is in the snapshots queries read (commits and refreshes)." },
        { "hanudb_index_refreshes_total", "counter", "Publishes without a commit, asked by fresh queries." },
        { "hanudb_filter_cache_hits_total", "counter", "Filter bitmaps found in the cache." },
        { "hanudb_filter_cache_misses_total", "counter", "Filter bitmaps built from postings or columns." },
        { "hanudb_filter_cache_bytes", "gauge", "Bytes held by the filter bitmap cache." },
    };
    index_bitset_cache_stats cs;
    index_bitset_cache_get_stats(&cs);
    const uint64_t v[] = { st.index_txn, st.lag_txns, st.segments, st.bytes, st.commits, st.visible_txn, st.refreshes,
                           cs.hits, cs.misses, cs.bytes };
    u64_families(b, fam, v, sizeof v / sizeof *v);
    http_index_more_metrics(srv, b);
    query_metrics(srv, b);
}
