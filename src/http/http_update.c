/*
 * http_update.c: partial updates over HTTP (docs/API.md "Updates"):
 *
 *   PATCH /c/{col}/docs/{id}            a merge patch (application/merge-patch+json)
 *                                       or update operators (application/json)
 *   POST  /c/{col}/docs/{id}/_update    {"update":{operators},"upsert":bool}
 *   POST  /c/{col}/_update              {"filter":..,"update":..,"limit":N,"upsert":bool}
 *   POST  /c/{col}/_delete              {"filter":..,"limit":N}
 *
 * Why no update is ever lost: every handler here runs on the event loop, the
 * one thread that writes, and reads the current bytes, applies the update and
 * calls store_write without yielding in between; the write is also conditional
 * on the version read (STORE_COND_TOKEN), so a change of that rule would show
 * as 409 conflict, never as a lost field.
 *
 * By filter: the request waits (in http_query.c, without blocking the loop)
 * until the index covers the store's last txn when it came, so that it sees
 * every write answered before it; then the index answers the filter, and each
 * hit's current bytes are read and the filter evaluated again on them (a
 * document changed since the index saw it is re-evaluated, not refused). All the
 * changes, and the idempotency record, are one store_write: one log record, all
 * or nothing. More than DOCS_BATCH_MAX_OPS matches without a limit is refused.
 */
#include "http/http_internal.h"
#include "docs/docs.h"
#include "query/query.h"
#include "http/http_guard.h"

#include <stdio.h>
#include <stdlib.h>

#define UPDATE_MAX_DOCS DOCS_BATCH_MAX_OPS   /* one request changes at most this many documents */

static int want_document(http_call *c, int *bad)
{
    const h2o_iovec_t *v = http_param(c, HTTP_PARAM_RETURN);
    *bad = v && !(v->len == 8 && !memcmp(v->base, "document", 8));
    if (*bad) http_error(c, 400, "invalid_parameter", "return must be \"document\" (the new document in the answer)");
    return v && !*bad;
}

static const char *body_of(http_call *c, size_t *len)
{
    *len = c->req->entity.base ? c->req->entity.len : 0;
    return c->req->entity.base ? c->req->entity.base : "";
}

/* A member of the request body that must be a boolean. */
static int member_bool(http_call *c, const json_value *v, const char *name, int *out)
{
    if (json_as_bool(v, out) == HANU_OK) return 1;
    http_error(c, 400, "invalid_request", "%s: must be true or false", name);
    return 0;
}

/* ---- by id ---- */

/* {"update":{..},"upsert":bool}: *u parsed; 0 and the answer sent when bad. */
static int parse_update_body(http_call *c, docs_update **u, int *upsert)
{
    size_t len;
    const char *in = body_of(c, &len);
    json_doc *d;
    json_error je;
    if (json_doc_parse(in, len, NULL, &d, &je) != HANU_OK) {
        http_error(c, 400, "invalid_json", "%s", je.msg);
        return 0;
    }
    const json_value *root = json_doc_root(d), *uv = NULL;
    int ok = 1;
    if (root->type != JSON_OBJECT) {
        http_error(c, 400, "invalid_request", "the body must be {\"update\":{operators},\"upsert\":false}");
        ok = 0;
    }
    for (size_t i = 0; ok && i < json_len(root); i++) {
        const json_value *m = json_at(root, i);
        if (!strcmp(m->key, "update")) uv = m;
        else if (!strcmp(m->key, "upsert")) ok = member_bool(c, m, "upsert", upsert);
        else {
            http_error(c, 400, "invalid_request", "%.64s: unknown member (update, upsert)", m->key);
            ok = 0;
        }
    }
    if (ok && !uv) {
        http_error(c, 400, "invalid_request", "update: missing (an object of operators, like {\"$set\":{..}})");
        ok = 0;
    }
    docs_error e;
    if (ok && docs_update_parse(in + uv->start, uv->end - uv->start, DOCS_UPDATE_OPERATORS, u, &e)) {
        http_body_error(c, &e);
        ok = 0;
    }
    json_doc_free(d);
    return ok;
}

/* {"_id":"<id>"}: what an upsert applies its update to. */
static void new_doc(const char *id, size_t id_len, hanu_buf *out)
{
    json_writer w;
    hanu_buf_reset(out);
    json_writer_init(&w, out);
    json_write_object_begin(&w);
    json_write_key(&w, "_id", 3);
    json_write_string(&w, id, id_len);
    json_write_object_end(&w);
}

void http_doc_update(http_call *c)
{
    server *srv = c->srv;
    store *st = srv->store;
    h2o_req_t *req = c->req;
    if (!http_write_allowed(c)) return;
    int bad, with_doc = want_document(c, &bad);
    if (bad) return;
    const h2o_iovec_t *ik;
    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    if (http_idem_begin(c, &ik, fp, 1)) return;
    docs_update *u = NULL;
    int upsert = 0;
    docs_error e;
    if (c->route == ROUTE_DOC_PATCH) {
        int merge = http_content_type_is(req, "application/merge-patch+json");
        size_t len;
        const char *in = body_of(c, &len);
        if (docs_update_parse(in, len, merge ? DOCS_UPDATE_MERGE_PATCH : DOCS_UPDATE_OPERATORS, &u, &e)) {
            http_body_error(c, &e);
            return;
        }
    } else if (!parse_update_body(c, &u, &upsert)) {
        return;
    }
    uint32_t db;
    hanu_buf cur = {0}, out = {0}, doc = {0}, rest = {0}, idem = {0};
    if (http_find_collection(c, upsert, &db)) goto done;
    uint64_t old = 0, txn = 0, current = 0;
    int existed = store_get(st, db, c->id, c->id_len, &cur, &old) == HANU_OK;
    int conditional;
    if (!http_preconditions(c, existed, old, 0, &conditional)) goto done;
    if (!existed && !upsert) {
        /* RFC 7396 defines a patch of nothing, but a document is made by PUT or an upsert. */
        http_error(c, 404, "not_found", "no document \"%s\" in collection \"%s\"%s", c->id, c->col,
                   c->route == ROUTE_DOC_PATCH ? " (PATCH changes a document; PUT creates one)" : "");
        goto done;
    }
    if (!existed) new_doc(c->id, c->id_len, &cur);
    int changed;
    if (docs_update_apply(u, (const char *)cur.data, cur.len, hanu_wall_ms(), &out, &changed, &e)) {
        http_body_error(c, &e);
        goto done;
    }
    /* The document checks of a PUT: limits, the "_id" rule. */
    size_t id_len = c->id_len;
    if (docs_prepare((const char *)out.data, out.len, srv->limits.max_value, c->id, &id_len, http_new_id, srv, &doc, &e)) {
        http_body_error(c, &e);
        goto done;
    }
    json_writer w;
    http_answer_begin(&w, &rest);
    json_write_key(&w, "_id", 3);
    json_write_string(&w, c->id, c->id_len);
    if (!existed) {
        json_write_key(&w, "upserted", 8);
        json_write_bool(&w, 1);
    }
    if (with_doc) {
        json_write_key(&w, "doc", 3);
        json_write_raw(&w, (const char *)doc.data, doc.len);
    }
    http_answer_end(&w);
    int status = existed ? 200 : 201;
    h2o_iovec_t location = status == 201 ? http_location(c, c->id, c->id_len) : h2o_iovec_init(NULL, 0);
    store_op ops[2] = { { STORE_SET, c->id, c->id_len, doc.data, doc.len } };
    size_t nops = 1;
    char ikey[DOCS_IDEM_STORE_KEY_MAX];
    if (ik) {
        http_idem_record(c, status, fp, location, &rest, &idem);
        ops[nops++] = docs_idem_op(ikey, http_idem_store_key(c, ik, ikey), &idem);
    }
    /* On the version read: nothing can come between on this thread, and the store checks it again. */
    int rc = store_write(st, db, ops, nops, existed ? STORE_COND_TOKEN : STORE_COND_NOT_EXISTS, old, &txn, &current);
    if (rc == HANU_OK) {
        if (location.len)
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, location.base, location.len);
        http_reply_written(c, status, txn, rest.data, rest.len, 1);
    } else if (rc == HANU_ERR_MISMATCH || rc == HANU_ERR_EXISTS || rc == HANU_ERR_NOT_FOUND) {
        http_error(c, 409, "conflict", "document \"%s\" changed while the update was applied; retry", c->id);
    } else {
        http_store_failure(c, rc);
    }
done:
    docs_update_free(u);
    hanu_buf_free(&cur);
    hanu_buf_free(&out);
    hanu_buf_free(&doc);
    hanu_buf_free(&rest);
    hanu_buf_free(&idem);
}

/* ---- by filter ---- */

typedef struct query_body {
    json_doc *dom;
    filter *filter;
    const json_value *filter_value;
    docs_update *update;
    size_t limit;               /* 0: every match (at most UPDATE_MAX_DOCS) */
    int upsert;
} query_body;

static void query_body_free(query_body *q)
{
    filter_free(q->filter);
    docs_update_free(q->update);
    json_doc_free(q->dom);
}

/* The body of _update or _delete; 0 and the answer sent when bad. */
static int parse_query_body(http_call *c, query_body *q)
{
    int is_update = c->route == ROUTE_UPDATE;
    const char *what = is_update ? "{\"filter\":{..},\"update\":{..},\"limit\":N,\"upsert\":false}"
                                 : "{\"filter\":{..},\"limit\":N}";
    size_t len;
    const char *in = body_of(c, &len);
    json_error je;
    *q = (query_body){ 0 };
    if (json_doc_parse(in, len, NULL, &q->dom, &je) != HANU_OK) {
        http_error(c, 400, "invalid_json", "%s", je.msg);
        return 0;
    }
    const json_value *root = json_doc_root(q->dom), *uv = NULL;
    if (root->type != JSON_OBJECT) {
        http_error(c, 400, "invalid_request", "the body must be %s", what);
        return 0;
    }
    for (size_t i = 0; i < json_len(root); i++) {
        const json_value *m = json_at(root, i);
        int64_t n;
        if (!strcmp(m->key, "filter")) q->filter_value = m;
        else if (is_update && !strcmp(m->key, "update")) uv = m;
        else if (is_update && !strcmp(m->key, "upsert")) { if (!member_bool(c, m, "upsert", &q->upsert)) return 0; }
        else if (!strcmp(m->key, "limit")) {
            if (json_as_int64(m, &n) != HANU_OK || n < 1 || n > UPDATE_MAX_DOCS) {
                http_error(c, 400, "invalid_request", "limit: must be an integer from 1 to %d", UPDATE_MAX_DOCS);
                return 0;
            }
            q->limit = (size_t)n;
        } else {
            http_error(c, 400, "invalid_request", "%.64s: unknown member; the body is %s", m->key, what);
            return 0;
        }
    }
    if (!q->filter_value) {
        http_error(c, 400, "invalid_request", "filter: missing (every document: {})");
        return 0;
    }
    if (is_update && !uv) {
        http_error(c, 400, "invalid_request", "update: missing (an object of operators, like {\"$set\":{..}})");
        return 0;
    }
    query_error qe = { "" };
    int rc = filter_parse_value(in, q->filter_value, "filter", &q->filter, &qe);
    if (rc == HANU_ERR_NOMEM) { http_error(c, 500, "internal", "out of memory"); return 0; }
    if (rc) { http_error(c, 400, "invalid_query", "%s", qe.msg); return 0; }
    docs_error e;
    if (uv && docs_update_parse(in + uv->start, uv->end - uv->start, DOCS_UPDATE_OPERATORS, &q->update, &e)) {
        http_body_error(c, &e);
        return 0;
    }
    return 1;
}

void http_update_query(http_call *c)
{
    if (!http_write_allowed(c)) return;
    int bad;
    http_idem_header(c, &bad);
    if (bad) { http_error(c, 400, "invalid_request", "Idempotency-Key must be 1-128 bytes"); return; }
    query_body q;
    int ok = parse_query_body(c, &q);   /* a bad body is refused before any wait */
    query_body_free(&q);
    if (ok) http_query(c);              /* waits for the index, then http_update_query_run */
}

/* The upsert's new document: the filter's top-level equalities ({"a":1},
   {"a":{"$eq":1}}, dotted paths made objects), its "_id" when it gives one,
   then the update. 0 and the answer sent when it cannot be made. */
static int upsert_doc(http_call *c, const query_body *q, char id[DOCS_ID_MAX + 1], size_t *id_len, hanu_buf *out)
{
    size_t len;
    const char *in = body_of(c, &len);
    const json_value *fv = q->filter_value;
    hanu_buf set = {0}, base = {0}, tmp = {0};
    int ok = 1, n = 0;
    *id_len = 0;
    hanu_buf_append(&set, "{\"$set\":{", 9);
    for (size_t i = 0; i < json_len(fv); i++) {
        const json_value *m = json_at(fv, i), *v = m;
        if (m->key[0] == '$') continue;
        if (m->type == JSON_OBJECT && json_len(m) && json_at(m, 0)->key[0] == '$') {
            v = json_len(m) == 1 ? json_get(m, "$eq") : NULL;
            if (!v) continue;   /* a condition, not a value */
        }
        if (!strcmp(m->key, "_id")) {
            const char *s;
            size_t sl;
            if (json_as_string(v, &s, &sl) != HANU_OK || !docs_id_valid(s, sl)) {
                http_error(c, 400, "invalid_id", "upsert: the filter's \"_id\" must be a valid document id");
                ok = 0;
                break;
            }
            memcpy(id, s, sl);
            id[sl] = '\0';
            *id_len = sl;
            continue;
        }
        if (n++) hanu_buf_append(&set, ",", 1);
        json_escape_string(&set, m->key, m->key_len);
        hanu_buf_append(&set, ":", 1);
        hanu_buf_append(&set, in + v->start, v->end - v->start);
    }
    hanu_buf_append(&set, "}}", 2);
    if (ok && !*id_len) {
        http_new_id(c->srv, id);
        *id_len = strlen(id);
    }
    docs_update *su = NULL;
    docs_error e;
    int changed;
    if (ok) {
        new_doc(id, *id_len, &base);
        if (n && docs_update_parse((const char *)set.data, set.len, DOCS_UPDATE_OPERATORS, &su, &e) == HANU_OK) {
            if (docs_update_apply(su, (const char *)base.data, base.len, hanu_wall_ms(), &tmp, &changed, &e) == HANU_OK) {
                hanu_buf_reset(&base);
                hanu_buf_append(&base, tmp.data, tmp.len);
            }
        }
        if (docs_update_apply(q->update, (const char *)base.data, base.len, hanu_wall_ms(), out, &changed, &e)) {
            http_body_error(c, &e);
            ok = 0;
        }
    }
    docs_update_free(su);
    hanu_buf_free(&set);
    hanu_buf_free(&base);
    hanu_buf_free(&tmp);
    return ok;
}

/* 400 too_many with the count in the error object. */
static void too_many(http_call *c, size_t total)
{
    char msg[200];
    snprintf(msg, sizeof msg, "%zu documents match the filter; one request changes at most %d, all or nothing: "
             "narrow the filter or pass a limit", total, UPDATE_MAX_DOCS);
    hanu_buf b = {0};
    http_error_json(&b, "too_many", msg);
    if (b.len >= 2) {
        b.len -= 2;   /* reopen the error object for its count */
        char tail[48];
        int n = snprintf(tail, sizeof tail, ",\"matched\":%zu}}", total);
        hanu_buf_append(&b, tail, (size_t)n);
    }
    c->srv->errors++;
    http_send(c, 400, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

void http_update_query_run(http_call *c, uint32_t db)
{
    server *srv = c->srv;
    store *st = srv->store;
    int is_update = c->route == ROUTE_UPDATE;
    const h2o_iovec_t *ik;
    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    if (http_idem_begin(c, &ik, fp, 0)) return;
    query_body q;
    if (!parse_query_body(c, &q)) { query_body_free(&q); return; }
    index_hits hits = { 0 };
    query_error qe = { "" };
    uint64_t itxn = indexer_txn(srv->indexer);
    index_snapshot *snap = index_snapshot_acquire(srv->indexer, db);
    index_find_opts o = { .limit = q.limit ? q.limit : UPDATE_MAX_DOCS + 1, .index_txn = itxn };
    int rc = index_find_ex(st, snap, q.filter, &o, &hits, NULL, NULL, &qe);
    if (snap) index_snapshot_release(snap);
    hanu_buf arena = {0}, cur = {0}, out = {0}, rest = {0}, idem = {0};
    store_op *ops = NULL;
    size_t *offs = NULL;
    if (rc) {
        if (rc == HANU_ERR_INVALID) http_error(c, 400, "invalid_query", "%s", qe.msg);
        else http_error(c, 500, "internal", "query failed: %s", hanu_status_str(rc));
        goto done;
    }
    if (!q.limit && hits.total > UPDATE_MAX_DOCS) { too_many(c, hits.total); goto done; }
    /* ops point into arena, which grows: offsets first, pointers at the end. */
    ops = calloc(hits.n + 2, sizeof *ops);
    offs = calloc(2 * (hits.n + 2), sizeof *offs);
    if (!ops || !offs) { http_error(c, 500, "internal", "out of memory"); goto done; }
    size_t nops = 0, matched = 0, modified = 0;
    uint64_t now = hanu_wall_ms();
    for (size_t i = 0; i < hits.n; i++) {
        const index_hit *h = &hits.hits[i];
        uint64_t token;   /* unused: the loop writes nothing before the store_write below */
        hanu_buf_reset(&cur);
        if (store_get(st, db, h->id, h->id_len, &cur, &token) != HANU_OK) continue;   /* deleted since */
        /* The index may have decided on an older version: the current bytes decide. */
        if (filter_match(q.filter, (const char *)cur.data, cur.len) != 1) continue;
        matched++;
        size_t id_off = arena.len;
        hanu_buf_append(&arena, h->id, h->id_len);
        if (!is_update) {
            offs[2 * nops] = id_off;
            ops[nops++] = (store_op){ STORE_DELETE, NULL, h->id_len, NULL, 0 };
            continue;
        }
        int changed;
        docs_error e;
        if (docs_update_apply(q.update, (const char *)cur.data, cur.len, now, &out, &changed, &e)) {
            http_error(c, e.status, e.code, "document \"%.*s\": %s (nothing was changed)", (int)HANU_MIN(h->id_len, 100),
                       h->id, e.message);
            goto done;
        }
        if (!changed) continue;
        if (out.len > srv->limits.max_value) {
            http_error(c, 413, "too_large", "document \"%.*s\" would be %zu bytes; the limit is %u (nothing was "
                       "changed)", (int)HANU_MIN(h->id_len, 100), h->id, out.len, srv->limits.max_value);
            goto done;
        }
        offs[2 * nops] = id_off;
        offs[2 * nops + 1] = arena.len;
        hanu_buf_append(&arena, out.data, out.len);
        ops[nops++] = (store_op){ STORE_SET, NULL, h->id_len, NULL, out.len };
        modified++;
    }
    char up_id[DOCS_ID_MAX + 1];
    size_t up_id_len = 0;
    int status = 200;
    if (is_update && !matched && q.upsert) {
        if (!upsert_doc(c, &q, up_id, &up_id_len, &out)) goto done;
        uint64_t t;
        if (store_lookup(st, db, up_id, up_id_len, &t) == HANU_OK) {
            http_error(c, 409, "conflict", "upsert: document \"%s\" exists and does not match the filter", up_id);
            goto done;
        }
        docs_error e;
        size_t l = up_id_len;
        hanu_buf_reset(&cur);
        if (docs_prepare((const char *)out.data, out.len, srv->limits.max_value, up_id, &l, http_new_id, srv, &cur, &e)) {
            http_body_error(c, &e);
            goto done;
        }
        offs[2 * nops] = arena.len;
        hanu_buf_append(&arena, up_id, up_id_len);
        offs[2 * nops + 1] = arena.len;
        hanu_buf_append(&arena, cur.data, cur.len);
        ops[nops++] = (store_op){ STORE_SET, NULL, up_id_len, NULL, cur.len };
        status = 201;
    }
    for (size_t i = 0; i < nops; i++) {
        ops[i].key = arena.data + offs[2 * i];
        if (ops[i].kind == STORE_SET) ops[i].value = arena.data + offs[2 * i + 1];
    }
    json_writer w;
    http_answer_begin(&w, &rest);
    if (is_update) {
        server_json_u64(&w, "matched", matched);
        server_json_u64(&w, "modified", modified);
        json_write_key(&w, "upserted_id", 11);
        if (up_id_len) json_write_string(&w, up_id, up_id_len);
        else json_write_null(&w);
    } else {
        server_json_u64(&w, "deleted", matched);
    }
    http_answer_end(&w);
    h2o_iovec_t location = status == 201 ? http_location(c, up_id, up_id_len) : h2o_iovec_init(NULL, 0);
    char ikey[DOCS_IDEM_STORE_KEY_MAX];
    if (ik) {
        http_idem_record(c, status, fp, location, &rest, &idem);
        ops[nops++] = docs_idem_op(ikey, http_idem_store_key(c, ik, ikey), &idem);
    }
    uint64_t txn = store_last_txn(st);   /* nothing to write: the answer is as of the last txn */
    rc = nops ? store_write(st, db, ops, nops, STORE_COND_NONE, 0, &txn, NULL) : HANU_OK;
    if (rc) { http_store_failure(c, rc); goto done; }
    if (location.len)
        h2o_add_header(&c->req->pool, &c->req->res.headers, H2O_TOKEN_LOCATION, NULL, location.base, location.len);
    http_reply_written(c, status, txn, rest.data, rest.len, 0);
done:
    free(ops);
    free(offs);
    index_hits_free(&hits);
    query_body_free(&q);
    hanu_buf_free(&arena);
    hanu_buf_free(&cur);
    hanu_buf_free(&out);
    hanu_buf_free(&rest);
    hanu_buf_free(&idem);
}
