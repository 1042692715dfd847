/*
 * http_docs.c: the documents API's handlers over HTTP (docs/API.md): routing
 * glue and answers. Collections, ids, bodies and idempotency records are the
 * documents layer's (src/docs); the store keeps them.
 *
 * A collection is a store database of kind collection (the key-value protocol
 * reads it too); a document is the value under its id. Every write answers
 * {"txn":N,...} once durable at the requested level.
 */
#include "http/http_internal.h"
#include "docs/docs.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- helpers ---- */

static void wrong_kind(http_call *c)
{
    http_error(c, 409, "wrong_kind", "\"%s\" is a key-value database: the documents API works on "
               "collections only (docs/API.md, kinds of databases)", c->col);
}

void http_store_failure(http_call *c, int rc)
{
    if (rc == HANU_ERR_TOO_LARGE) http_error(c, 413, "too_large", "document or key over the size limit");
    else if (rc == HANU_ERR_INVALID) http_error(c, 400, "invalid_request", "invalid write");
    else if (rc == HANU_ERR_STOPPED) http_error(c, 503, "store_stopped", "%s", hanu_status_str(rc));
    else http_error(c, 500, "internal", "write failed: %s", hanu_status_str(rc));
    if (rc != HANU_ERR_TOO_LARGE && rc != HANU_ERR_INVALID) {
        char name[STORE_DB_NAME_MAX + 16];
        snprintf(name, sizeof name, "collection \"%s\"", c->col);
        server_log_write_failure("http", name, rc);
    }
}

int http_find_collection(http_call *c, int create, uint32_t *db)
{
    store *st = c->srv->store;
    size_t len = strlen(c->col);
    uint64_t txn;
    int rc = create ? docs_collection_open(st, c->col, len, db, &txn) : docs_collection_lookup(st, c->col, len, db);
    if (rc == HANU_OK) return rc;
    if (rc == HANU_ERR_NOT_FOUND) http_error(c, 404, "collection_not_found", "collection \"%s\" does not exist", c->col);
    else if (rc == HANU_ERR_MISMATCH) wrong_kind(c);
    else if (rc == HANU_ERR_TOO_LARGE) http_error(c, 413, "too_large", "too many collections (at most %d)", STORE_MAX_DATABASES);
    else http_error(c, 500, "internal", "cannot create collection \"%s\": %s", c->col, hanu_status_str(rc));
    return rc;
}

void http_new_id(void *ctx, char out[DOCS_NEW_ID_LEN + 1])
{
    server *srv = ctx;
    docs_id_new(&srv->id_last_ms, &srv->id_seq, hanu_wall_ms(), out);
}

/* The answer of a write after its leading {"txn":N (what an idempotency record
   keeps): an object written with w into rest, whose '{' http_answer_end turns into ','. */
void http_answer_begin(json_writer *w, hanu_buf *rest)
{
    hanu_buf_reset(rest);
    json_writer_init(w, rest);
    json_write_object_begin(w);
}

void http_answer_end(json_writer *w)
{
    json_write_object_end(w);
    if (json_writer_status(w) == HANU_OK) w->out->data[0] = ',';
}

/* Sends {"txn":N + rest (which closes the object), parked until durable when asked. */
void http_reply_written(http_call *c, int status, uint64_t txn, const uint8_t *rest, size_t rest_len, int etag)
{
    hanu_buf b = {0};
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "txn", 3);
    json_write_int64(&w, (int64_t)txn);
    if (etag) {   /* the new version's tag, in the body and as the ETag header */
        char t[32];
        int n = snprintf(t, sizeof t, "\"%llu\"", (unsigned long long)txn);
        json_write_key(&w, "etag", 4);
        json_write_string(&w, t, (size_t)n);
        h2o_add_header(&c->req->pool, &c->req->res.headers, H2O_TOKEN_ETAG, NULL,
                       h2o_strdup(&c->req->pool, t, (size_t)n).base, (size_t)n);
    }
    hanu_buf_append(&b, rest, rest_len);
    http_reply_write(c, status, (const char *)b.data, b.len, txn);
    hanu_buf_free(&b);
}

const h2o_iovec_t *http_idem_header(http_call *c, int *bad)
{
    *bad = 0;
    const h2o_iovec_t *k = http_header(c->req, H2O_STRLIT("idempotency-key"));
    if (k && (k->len == 0 || k->len > DOCS_IDEM_KEY_MAX)) *bad = 1;
    return k;
}

size_t http_idem_store_key(const http_call *c, const h2o_iovec_t *k, char out[DOCS_IDEM_STORE_KEY_MAX])
{
    return docs_idem_key(c->col, c->token ? c->token->scope : NULL, k->base, k->len, out);
}

void http_idem_fingerprint(const http_call *c, uint8_t out[DOCS_IDEM_FINGERPRINT])
{
    h2o_req_t *req = c->req;
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    docs_idem_fingerprint(req->method.base, req->method.len, req->path.base, plen, req->entity.base,
                          req->entity.len, out);
}

/* Replays the answer stored with an idempotency key; 1 when it answered: the first
   answer, or 422 when the key was first used for another request. */
int http_idem_replay(http_call *c, const h2o_iovec_t *k, const uint8_t fp[DOCS_IDEM_FINGERPRINT], int etag)
{
    char key[DOCS_IDEM_STORE_KEY_MAX];
    hanu_buf v = {0};
    docs_idem_answer a;
    int rc = docs_idem_lookup(c->srv->store, key, http_idem_store_key(c, k, key), fp, hanu_wall_ms(), &v, &a);
    if (rc == HANU_ERR_MISMATCH)
        http_error(c, 422, "idempotency_key_mismatch", "Idempotency-Key \"%.*s\" was first used for "
                   "another request (method, path or body differ); use a new key", (int)k->len, k->base);
    if (rc == HANU_OK) {
        h2o_add_header_by_str(&c->req->pool, &c->req->res.headers, H2O_STRLIT("idempotent-replayed"), 0, NULL,
                              H2O_STRLIT("true"));
        if (a.location_len) {
            h2o_iovec_t l = h2o_strdup(&c->req->pool, (const char *)a.location, a.location_len);
            h2o_add_header(&c->req->pool, &c->req->res.headers, H2O_TOKEN_LOCATION, NULL, l.base, l.len);
        }
        /* The first request may still be waiting for its sync: so does its replay. */
        http_reply_written(c, a.status, a.txn, a.rest, a.rest_len, etag);
    }
    hanu_buf_free(&v);
    return rc == HANU_OK || rc == HANU_ERR_MISMATCH;
}

/* The idempotency record of an answer, expiring after the configured TTL. */
void http_idem_record(http_call *c, int status, const uint8_t fp[DOCS_IDEM_FINGERPRINT], h2o_iovec_t location,
                        const hanu_buf *rest, hanu_buf *out)
{
    docs_idem_answer a = { status, (const uint8_t *)location.base, location.len, rest->data, rest->len, 0 };
    docs_idem_record(hanu_wall_ms() + c->srv->opt.idempotency_ttl_s * 1000, &a, fp, out);
}

int http_idem_begin(http_call *c, const h2o_iovec_t **ik, uint8_t fp[DOCS_IDEM_FINGERPRINT], int etag)
{
    int bad;
    *ik = http_idem_header(c, &bad);
    if (bad) { http_error(c, 400, "invalid_request", "Idempotency-Key must be 1-128 bytes"); return 1; }
    if (*ik) http_idem_fingerprint(c, fp);
    return *ik && http_idem_replay(c, *ik, fp, etag);
}

int http_write_allowed(http_call *c)
{
    if (!http_token_allows(c, c->col, 1)) {
        http_error(c, 403, "forbidden", "this token may not write to collection \"%s\"", c->col);
        return 0;
    }
    if (c->durability == HKV_DUR_BUCKET && !c->srv->sealer) {
        http_error(c, 501, "not_implemented", "durability=bucket needs a bucket: start the server with --bucket URL");
        return 0;
    }
    if (c->srv->stopping) {
        http_error(c, 503, "shutting_down", "the server is shutting down");
        return 0;
    }
    return 1;
}

/* ---- collections ---- */

void http_collections_list(http_call *c)
{
    store *st = c->srv->store;
    size_t n = store_db_list(st, NULL, 0);
    store_db_info *infos = calloc(n ? n : 1, sizeof *infos);
    n = infos ? store_db_list(st, infos, n) : 0;
    hanu_buf b = {0};
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "collections", 11);
    json_write_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
        if (infos[i].kind == STORE_DB_KV || !http_token_allows(c, infos[i].name, 0)) continue;
        json_write_object_begin(&w);
        json_write_key(&w, "name", 4);
        json_write_string(&w, infos[i].name, strlen(infos[i].name));
        json_write_key(&w, "count", 5);
        json_write_int64(&w, (int64_t)infos[i].keys);
        json_write_key(&w, "bytes", 5);
        json_write_int64(&w, (int64_t)infos[i].bytes);
        json_write_object_end(&w);
    }
    json_write_array_end(&w);
    json_write_object_end(&w);
    http_reply(c, 200, (const char *)b.data, b.len, 0);
    hanu_buf_free(&b);
    free(infos);
}

static void collection_get(http_call *c)
{
    uint32_t db;
    if (!http_token_allows(c, c->col, 0)) {
        http_error(c, 403, "forbidden", "this token may not read collection \"%s\"", c->col);
        return;
    }
    if (http_find_collection(c, 0, &db)) return;
    store_db_info info;
    store_db_info_get(c->srv->store, db, &info);
    hanu_buf b = {0};
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "name", 4);
    json_write_string(&w, info.name, strlen(info.name));
    json_write_key(&w, "count", 5);
    json_write_int64(&w, (int64_t)info.keys);
    json_write_key(&w, "bytes", 5);
    json_write_int64(&w, (int64_t)info.bytes);
    http_expire_describe(c, &w);
    json_write_object_end(&w);
    http_reply(c, 200, (const char *)b.data, b.len, 0);
    hanu_buf_free(&b);
}

/* PUT (create, or 200 when it exists) and DELETE of a collection. */
static void collection_write(http_call *c, int is_delete)
{
    store *st = c->srv->store;
    h2o_req_t *req = c->req;
    size_t len = strlen(c->col);
    uint32_t db;
    uint64_t txn = 0;
    if (!http_write_allowed(c)) return;
    int rc = is_delete ? docs_collection_lookup(st, c->col, len, &db) : docs_collection_open(st, c->col, len, &db, &txn);
    if (rc == HANU_OK && is_delete) rc = store_db_drop(st, c->col, len, &txn);
    if (rc == HANU_OK && is_delete) http_expire_forget(c);
    if (rc == HANU_ERR_MISMATCH) { wrong_kind(c); return; }
    if (rc == HANU_ERR_NOT_FOUND) {
        http_error(c, 404, "collection_not_found", "collection \"%s\" does not exist", c->col);
        return;
    }
    if (rc) { http_store_failure(c, rc); return; }
    hanu_buf rest = {0};
    json_writer w;
    http_answer_begin(&w, &rest);
    json_write_key(&w, "name", 4);
    json_write_string(&w, c->col, len);
    json_write_key(&w, is_delete ? "dropped" : "created", 7);
    json_write_bool(&w, txn != 0);
    http_answer_end(&w);
    if (txn == 0) {   /* it existed: nothing was written */
        rest.data[0] = '{';
        http_reply(c, 200, (const char *)rest.data, rest.len, 0);
    } else {
        int status = is_delete ? 200 : 201;
        if (!is_delete) {
            h2o_iovec_t loc = http_location(c, NULL, 0);
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, loc.base, loc.len);
        }
        http_reply_written(c, status, txn, rest.data, rest.len, 0);
    }
    hanu_buf_free(&rest);
}

void http_collection(http_call *c)
{
    h2o_req_t *req = c->req;
    if ((req->method.len == 3 && !memcmp(req->method.base, "GET", 3)) ||
        (req->method.len == 4 && !memcmp(req->method.base, "HEAD", 4)))
        collection_get(c);
    else if (req->method.len == 3 && !memcmp(req->method.base, "PUT", 3) && req->entity.len)
        http_collection_options(c);   /* http_expire.c */
    else if (req->method.len == 3 && !memcmp(req->method.base, "PUT", 3))
        collection_write(c, 0);
    else if (req->method.len == 6 && !memcmp(req->method.base, "DELETE", 6))
        collection_write(c, 1);
    else
        http_error(c, 405, "method_not_allowed", "use GET, PUT or DELETE on a collection");
}

/* ---- documents ---- */

static int parse_txn(const char *p, const char *e, uint64_t *txn)
{
    if (p == e || e - p > 19) return 0;
    uint64_t n = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9') return 0;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    *txn = n;
    return 1;
}

/* How an If-Match or If-None-Match header compares with a document (RFC 9110 13.1):
   1 when it is "*" and the document exists, or one of its entity-tags is the
   document's txn; 0 when none is; -1 when it does not parse. A weak tag W/"n" counts
   only when weak is set: If-Match compares strongly, so it never matches there. A
   bare txn (42) is read as "42". Every header line of the name counts. */
static int etags_match(h2o_req_t *req, const h2o_token_t *name, int exists, uint64_t txn, int weak)
{
    int found = 0;
    for (ssize_t i = -1; (i = h2o_find_header(&req->headers, name, i)) >= 0;) {
        const h2o_iovec_t *v = &req->headers.entries[i].value;
        const char *p = v->base, *end = p + v->len;
        for (;;) {
            while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
            if (p == end) break;
            if (*p == '*') {
                p++;
                found |= exists;
            } else {
                int is_weak = end - p >= 2 && p[0] == 'W' && p[1] == '/';
                const char *s, *e;
                if (is_weak) p += 2;
                if (p < end && *p == '"') {
                    s = ++p;
                    while (p < end && *p != '"') p++;
                    if (p == end) return -1;
                    e = p++;
                } else {
                    s = p;
                    while (p < end && *p >= '0' && *p <= '9') p++;
                    e = p;
                    if (s == e || is_weak) return -1;
                }
                uint64_t n;
                if (exists && (weak || !is_weak) && parse_txn(s, e, &n) && n == txn) found = 1;
            }
            while (p < end && (*p == ' ' || *p == '\t')) p++;
            if (p < end && *p != ',') return -1;
        }
    }
    return found;
}

/* If-Match, then If-None-Match (RFC 9110 13.2.2), against a document that exists
   (at txn) or not. 1: go on (*conditional tells whether there was a condition);
   otherwise the answer (304, 400 or 412) was sent. */
int http_preconditions(http_call *c, int exists, uint64_t txn, int is_read, int *conditional)
{
    h2o_req_t *req = c->req;
    int has_im = h2o_find_header(&req->headers, H2O_TOKEN_IF_MATCH, -1) >= 0;
    int has_inm = h2o_find_header(&req->headers, H2O_TOKEN_IF_NONE_MATCH, -1) >= 0;
    *conditional = has_im || has_inm;
    if (has_im) {
        int r = etags_match(req, H2O_TOKEN_IF_MATCH, exists, txn, 0);
        if (r < 0) {
            http_error(c, 400, "invalid_request", "If-Match must be * or entity-tags like \"42\"");
            return 0;
        }
        if (!r && exists) {
            http_error(c, 412, "precondition_failed", "document \"%s\" is at txn %llu, which If-Match "
                       "does not name (a weak W/ tag never matches)", c->id, (unsigned long long)txn);
            return 0;
        }
        if (!r) {
            http_error(c, 412, "precondition_failed", "document \"%s\" does not exist (If-Match)", c->id);
            return 0;
        }
    }
    if (has_inm) {
        int r = etags_match(req, H2O_TOKEN_IF_NONE_MATCH, exists, txn, 1);
        if (r < 0) {
            http_error(c, 400, "invalid_request", "If-None-Match must be * or entity-tags like \"42\"");
            return 0;
        }
        if (r && is_read) {
            http_reply_doc(c, NULL, 0, txn);   /* 304 */
            return 0;
        }
        if (r) {
            http_error(c, 412, "precondition_failed", "document \"%s\" exists at txn %llu (If-None-Match)",
                       c->id, (unsigned long long)txn);
            return 0;
        }
    }
    return 1;
}

static void doc_get_now(http_call *c);

void http_doc_get(http_call *c)
{
    if (!http_token_allows(c, c->col, 0)) {
        http_error(c, 403, "forbidden", "this token may not read collection \"%s\"", c->col);
        return;
    }
    /* Read-your-writes on a follower: held until it has applied min_txn (before the
       404 of a collection it may not have replayed yet). */
    uint64_t min_txn;
    if (!http_param_min_txn(c, &min_txn)) return;
    if (min_txn > store_last_txn(c->srv->store)) {
        http_hold_for_store(c, min_txn, doc_get_now);
        return;
    }
    doc_get_now(c);
}

static void doc_get_now(http_call *c)
{
    uint32_t db;
    if (http_find_collection(c, 0, &db)) return;
    hanu_buf *b = &c->srv->http_scratch;
    hanu_buf_reset(b);
    uint64_t txn;
    if (store_get(c->srv->store, db, c->id, c->id_len, b, &txn) != HANU_OK) {
        /* Conditions are not evaluated when the answer would be 404 (RFC 9110 13.2.1). */
        http_error(c, 404, "not_found", "no document \"%s\" in collection \"%s\"", c->id, c->col);
        return;
    }
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
    if (http_expire_field(c, field) && docs_expired((const char *)b->data, b->len, field, hanu_wall_ms())) {
        http_error(c, 404, "not_found", "no document \"%s\" in collection \"%s\" (expired)", c->id, c->col);
        return;
    }
    int conditional;
    if (!http_preconditions(c, 1, txn, 1, &conditional)) return;
    http_reply_doc(c, b->data, b->len, txn);
}

void http_body_error(http_call *c, const docs_error *e)
{
    http_error(c, e->status, e->code, "%s", e->message);
}

void http_doc_write(http_call *c)
{
    server *srv = c->srv;
    store *st = srv->store;
    h2o_req_t *req = c->req;
    int is_delete = c->route == ROUTE_DOC_DELETE, is_post = c->route == ROUTE_DOC_POST;
    if (!http_write_allowed(c)) return;
    const h2o_iovec_t *ik;
    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    if (http_idem_begin(c, &ik, fp, 0)) return;
    if (!is_post && !docs_id_valid(c->id, c->id_len)) {
        http_error(c, 400, "invalid_id", "document ids are 1-256 bytes without '/' or control characters");
        return;
    }
    hanu_buf *doc = &srv->http_scratch;
    if (!is_delete) {
        docs_error e;
        if (is_post) c->id_len = 0;
        if (docs_prepare(req->entity.base ? req->entity.base : "", req->entity.len, srv->limits.max_value,
                         c->id, &c->id_len, http_new_id, srv, doc, &e)) {
            http_body_error(c, &e);
            return;
        }
    }
    uint32_t db;
    if (http_find_collection(c, !is_delete, &db)) return;
    uint64_t txn = 0, current = 0, old = 0;
    int existed = store_lookup(st, db, c->id, c->id_len, &old) == HANU_OK;
    int conditional;
    if (!http_preconditions(c, existed, old, 0, &conditional)) return;
    /* Checked above; the store checks again in the write: the document must still be as seen. */
    int cond = STORE_COND_NONE;
    if (conditional && existed) cond = STORE_COND_TOKEN;
    else if (conditional && !is_delete) cond = STORE_COND_NOT_EXISTS;
    if (is_delete && cond == STORE_COND_NONE) cond = STORE_COND_EXISTS;   /* 404 for a missing id */
    /* The answer, without its txn, is known before the write: it goes into the same
       log record as the idempotency key. */
    hanu_buf rest = {0}, idem = {0};
    json_writer w;
    http_answer_begin(&w, &rest);
    json_write_key(&w, "_id", 3);
    json_write_string(&w, c->id, c->id_len);
    json_write_key(&w, is_delete ? "deleted" : "created", 7);
    json_write_bool(&w, is_delete || !existed);
    http_answer_end(&w);
    int status = is_delete || existed ? 200 : 201;
    h2o_iovec_t location = status == 201 ? http_location(c, c->id, c->id_len) : h2o_iovec_init(NULL, 0);
    store_op ops[2];
    size_t nops = 0;
    ops[nops++] = (store_op){ is_delete ? STORE_DELETE : STORE_SET, c->id, c->id_len,
                              is_delete ? NULL : doc->data, is_delete ? 0 : doc->len };
    char ikey[DOCS_IDEM_STORE_KEY_MAX];
    if (ik) {
        http_idem_record(c, status, fp, location, &rest, &idem);
        ops[nops++] = docs_idem_op(ikey, http_idem_store_key(c, ik, ikey), &idem);
    }
    int rc = store_write(st, db, ops, nops, cond, old, &txn, &current);
    if (rc == HANU_OK) {
        if (location.len)
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, location.base, location.len);
        http_reply_written(c, status, txn, rest.data, rest.len, 0);
    } else if (rc == HANU_ERR_MISMATCH || rc == HANU_ERR_EXISTS ||
               (rc == HANU_ERR_NOT_FOUND && (cond == STORE_COND_TOKEN || conditional))) {
        http_error(c, 412, "precondition_failed", "document \"%s\" changed while the request was checked", c->id);
    } else if (rc == HANU_ERR_NOT_FOUND) {
        http_error(c, 404, "not_found", "no document \"%s\" in collection \"%s\"", c->id, c->col);
    } else {
        http_store_failure(c, rc);
    }
    hanu_buf_free(&rest);
    hanu_buf_free(&idem);
}

/* ---- batches ---- */

void http_batch(http_call *c)
{
    server *srv = c->srv;
    h2o_req_t *req = c->req;
    if (!http_write_allowed(c)) return;
    const h2o_iovec_t *ik;
    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    if (http_idem_begin(c, &ik, fp, 0)) return;
    docs_batch batch;
    docs_error e;
    if (docs_batch_decode(req->entity.base ? req->entity.base : "", req->entity.len, srv->limits.max_value,
                          http_new_id, srv, &batch, &e)) {
        http_body_error(c, &e);
        return;
    }
    uint32_t db;
    if (http_find_collection(c, 1, &db)) { docs_batch_free(&batch); return; }
    size_t n = batch.n;
    store_op *sops = calloc(n + 1, sizeof *sops);
    hanu_buf rest = {0}, idem = {0};
    json_writer w;
    http_answer_begin(&w, &rest);
    json_write_key(&w, "results", 7);
    json_write_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
        const docs_batch_item *it = &batch.items[i];
        const char *idp = (const char *)batch.arena.data + it->id_off;
        sops[i] = (store_op){ it->is_delete ? STORE_DELETE : STORE_SET, idp, it->id_len,
                              it->is_delete ? NULL : batch.arena.data + it->doc_off, it->doc_len };
        json_write_object_begin(&w);
        json_write_key(&w, "_id", 3);
        json_write_string(&w, idp, it->id_len);
        json_write_key(&w, "op", 2);
        json_write_string(&w, it->is_delete ? "delete" : "put", it->is_delete ? 6 : 3);
        json_write_object_end(&w);
    }
    json_write_array_end(&w);
    http_answer_end(&w);
    size_t nops = n;
    char ikey[DOCS_IDEM_STORE_KEY_MAX];
    if (ik) {
        http_idem_record(c, 200, fp, h2o_iovec_init(NULL, 0), &rest, &idem);
        sops[nops++] = docs_idem_op(ikey, http_idem_store_key(c, ik, ikey), &idem);
    }
    uint64_t txn;
    int rc = store_write(srv->store, db, sops, nops, STORE_COND_NONE, 0, &txn, NULL);
    if (rc == HANU_OK) http_reply_written(c, 200, txn, rest.data, rest.len, 0);
    else http_store_failure(c, rc);
    free(sops);
    hanu_buf_free(&rest);
    hanu_buf_free(&idem);
    docs_batch_free(&batch);
}
