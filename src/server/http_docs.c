/*
 * http_docs.c: the documents API's handlers: collections, documents, atomic
 * batches and idempotency keys, on top of the store (docs/API.md).
 *
 * A collection is a store database of the same name (the key-value protocol
 * sees it too); a document is the value under its id, stored as the exact
 * bytes the client sent, with "_id" inserted first when it was missing.
 * Every write answers {"txn":N,...} once durable at the requested level.
 */
#include "server/http_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define IDEM_KEY_MAX 128
#define BATCH_MAX_OPS 10000

/* ---- helpers ---- */

static int find_collection(http_call *c, int create, uint32_t *db)
{
    store *st = c->srv->store;
    size_t len = strlen(c->col);
    if (store_db_lookup(st, c->col, len, db) == HANU_OK) return HANU_OK;
    if (!create) {
        http_error(c, 404, "collection_not_found", "collection \"%s\" does not exist", c->col);
        return HANU_ERR_NOT_FOUND;
    }
    uint64_t txn;
    int rc = store_db_create(st, c->col, len, &txn);
    if (rc == HANU_OK) rc = store_db_lookup(st, c->col, len, db);
    if (rc == HANU_ERR_TOO_LARGE) {
        http_error(c, 413, "too_large", "too many collections (at most %d)", STORE_MAX_DATABASES);
        return rc;
    }
    if (rc) http_error(c, 500, "internal", "cannot create collection \"%s\": %s", c->col, hanu_status_str(rc));
    return rc;
}

static void store_failure(http_call *c, int rc)
{
    if (rc == HANU_ERR_TOO_LARGE) http_error(c, 413, "too_large", "document or key over the size limit");
    else if (rc == HANU_ERR_INVALID) http_error(c, 400, "invalid_request", "invalid write");
    else if (rc == HANU_ERR_STOPPED) http_error(c, 503, "store_stopped", "%s", hanu_status_str(rc));
    else http_error(c, 500, "internal", "write failed: %s", hanu_status_str(rc));
}

static int valid_id(const char *id, size_t len)
{
    if (len == 0 || len > 256) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == '/') return 0;
    return 1;
}

/* 20 characters of Crockford base32: 48 bits of milliseconds then a 52-bit
   sequence, so ids sort by creation time within this server. */
static void new_id(server *srv, char out[21])
{
    static const char alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    uint64_t ms = hanu_wall_ms();
    if (ms <= srv->id_last_ms) ms = srv->id_last_ms;
    else srv->id_seq = 0;
    srv->id_last_ms = ms;
    uint64_t seq = srv->id_seq++;
    uint64_t hi = ms & ((1ull << 48) - 1), lo = seq & ((1ull << 52) - 1);
    /* 100 bits: hi (48) then lo (52), five bits a character. */
    for (int i = 19; i >= 0; i--) {
        int bit = i * 5;           /* bit position from the top of the 100 */
        unsigned val = 0;
        for (int b = 0; b < 5; b++) {
            int pos = bit + b;     /* 0 = most significant */
            unsigned one = pos < 48 ? (unsigned)((hi >> (47 - pos)) & 1) : (unsigned)((lo >> (99 - pos)) & 1);
            val = (val << 1) | one;
        }
        out[i] = alphabet[val];
    }
    out[20] = '\0';
}

static const h2o_iovec_t *idempotency_key(http_call *c, int *bad)
{
    *bad = 0;
    const h2o_iovec_t *k = http_header(c->req, H2O_STRLIT("idempotency-key"));
    if (k && (k->len == 0 || k->len > IDEM_KEY_MAX)) *bad = 1;
    return k;
}

/* System-database key of an idempotency key: "idem" NUL collection NUL key. */
static size_t idem_store_key(const http_call *c, const h2o_iovec_t *k, char *out)
{
    size_t cl = strlen(c->col), n = 0;
    memcpy(out, "idem", 5);
    n = 5;
    memcpy(out + n, c->col, cl + 1);
    n += cl + 1;
    memcpy(out + n, k->base, k->len);
    return n + k->len;
}

/* Replays the stored answer of an idempotency key; 1 when it did. */
static int idem_replay(http_call *c, const h2o_iovec_t *k)
{
    char key[5 + STORE_DB_NAME_MAX + 1 + IDEM_KEY_MAX];
    size_t kl = idem_store_key(c, k, key);
    hanu_buf v = {0};
    uint64_t token;
    if (store_get(c->srv->store, STORE_SYSTEM_DB_ID, key, kl, &v, &token) != HANU_OK || v.len < 10) {
        hanu_buf_free(&v);
        return 0;
    }
    uint64_t expires = hanu_get_u64(v.data);
    int status = hanu_get_u16(v.data + 8);
    if (expires < hanu_wall_ms()) { hanu_buf_free(&v); return 0; }
    hanu_buf body = {0};
    char head[48];
    int n = snprintf(head, sizeof head, "{\"txn\":%llu", (unsigned long long)token);
    hanu_buf_append(&body, head, (size_t)n);
    hanu_buf_append(&body, v.data + 10, v.len - 10);
    h2o_add_header_by_str(&c->req->pool, &c->req->res.headers, H2O_STRLIT("idempotent-replayed"), 0, NULL,
                          H2O_STRLIT("true"));
    /* The first request may still be waiting for its sync: so does its replay. */
    http_reply(c, status, (const char *)body.data, body.len,
               c->durability == KV_DURABLE_LOCAL ? token : 0);
    hanu_buf_free(&body);
    hanu_buf_free(&v);
    return 1;
}

/* The idempotency record: u64 expiry (ms) | u16 status | the answer after its txn. */
static void idem_record(http_call *c, int status, const char *rest, size_t rest_len, hanu_buf *out)
{
    uint8_t h[10];
    hanu_put_u64(h, hanu_wall_ms() + c->srv->opt.idempotency_ttl_s * 1000);
    hanu_put_u16(h + 8, (uint16_t)status);
    hanu_buf_reset(out);
    hanu_buf_append(out, h, sizeof h);
    hanu_buf_append(out, rest, rest_len);
}

/* Sends {"txn":N + rest, parked until durable when asked. */
static void reply_written(http_call *c, int status, uint64_t txn, const char *rest, size_t rest_len)
{
    hanu_buf b = {0};
    char head[48];
    int n = snprintf(head, sizeof head, "{\"txn\":%llu", (unsigned long long)txn);
    hanu_buf_append(&b, head, (size_t)n);
    hanu_buf_append(&b, rest, rest_len);
    http_reply(c, status, (const char *)b.data, b.len, c->durability == KV_DURABLE_LOCAL ? txn : 0);
    hanu_buf_free(&b);
}

static int check_write_allowed(http_call *c)
{
    if (!http_token_allows(c, c->col, 1)) {
        http_error(c, 403, "forbidden", "this token may not write to collection \"%s\"", c->col);
        return 0;
    }
    if (c->durability == KV_DURABLE_BUCKET) {
        http_error(c, 501, "not_implemented", "durability=bucket needs a bucket, which this server does not have yet");
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
    n = store_db_list(st, infos, n);
    hanu_buf b = {0};
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "collections", 11);
    json_write_array_begin(&w);
    for (size_t i = 0; i < n; i++) {
        if (!http_token_allows(c, infos[i].name, 0)) continue;
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

void http_collection(http_call *c)
{
    store *st = c->srv->store;
    h2o_req_t *req = c->req;
    uint32_t db;
    uint64_t txn;
    char rest[160];
    int n;
    if (req->method.len == 3 && !memcmp(req->method.base, "GET", 3)) {
        if (!http_token_allows(c, c->col, 0)) {
            http_error(c, 403, "forbidden", "this token may not read collection \"%s\"", c->col);
            return;
        }
        if (find_collection(c, 0, &db)) return;
        store_db_info info;
        store_db_info_get(st, db, &info);
        char body[200];
        n = snprintf(body, sizeof body, "{\"name\":\"%s\",\"count\":%llu,\"bytes\":%llu}", info.name,
                     (unsigned long long)info.keys, (unsigned long long)info.bytes);
        http_reply(c, 200, body, (size_t)n, 0);
        return;
    }
    if (req->method.len == 3 && !memcmp(req->method.base, "PUT", 3)) {
        if (!check_write_allowed(c)) return;
        if (store_db_lookup(st, c->col, strlen(c->col), &db) == HANU_OK) {
            n = snprintf(rest, sizeof rest, "{\"name\":\"%s\",\"created\":false}", c->col);
            http_reply(c, 200, rest, (size_t)n, 0);
            return;
        }
        int rc = store_db_create(st, c->col, strlen(c->col), &txn);
        if (rc) { store_failure(c, rc); return; }
        n = snprintf(rest, sizeof rest, ",\"name\":\"%s\",\"created\":true}", c->col);
        reply_written(c, 201, txn, rest, (size_t)n);
        return;
    }
    if (req->method.len == 6 && !memcmp(req->method.base, "DELETE", 6)) {
        if (!check_write_allowed(c)) return;
        int rc = store_db_drop(st, c->col, strlen(c->col), &txn);
        if (rc == HANU_ERR_NOT_FOUND) {
            http_error(c, 404, "collection_not_found", "collection \"%s\" does not exist", c->col);
            return;
        }
        if (rc == HANU_ERR_INVALID) {
            http_error(c, 400, "invalid_collection", "the default database cannot be dropped");
            return;
        }
        if (rc) { store_failure(c, rc); return; }
        n = snprintf(rest, sizeof rest, ",\"name\":\"%s\",\"dropped\":true}", c->col);
        reply_written(c, 200, txn, rest, (size_t)n);
        return;
    }
    http_error(c, 405, "method_not_allowed", "use GET, PUT or DELETE on a collection");
}

/* ---- documents ---- */

void http_doc_get(http_call *c)
{
    if (!http_token_allows(c, c->col, 0)) {
        http_error(c, 403, "forbidden", "this token may not read collection \"%s\"", c->col);
        return;
    }
    uint32_t db;
    if (find_collection(c, 0, &db)) return;
    hanu_buf *b = &c->srv->http_scratch;
    hanu_buf_reset(b);
    uint64_t txn;
    if (store_get(c->srv->store, db, c->id, c->id_len, b, &txn) != HANU_OK) {
        http_error(c, 404, "not_found", "no document \"%s\" in collection \"%s\"", c->id, c->col);
        return;
    }
    http_reply_doc(c, b->data, b->len, txn);
}

/* Parses an If-Match value: "123", W/"123" or 123. */
static int parse_if_match(const h2o_iovec_t *v, uint64_t *txn)
{
    const char *p = v->base, *e = v->base + v->len;
    if (e - p >= 2 && p[0] == 'W' && p[1] == '/') p += 2;
    if (p < e && *p == '"') { p++; if (e > p && e[-1] == '"') e--; else return 0; }
    if (p == e || e - p > 19) return 0;
    uint64_t n = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9') return 0;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    *txn = n;
    return 1;
}

/* Validates a document body and puts the bytes to store in out (with "_id" added).
   id/id_len: the URL's id (PUT) or empty (POST: taken from the body or made). */
static int prepare_doc(http_call *c, const char *in, size_t len, char *id, size_t *id_len, hanu_buf *out)
{
    json_error err;
    if (json_validate(in, len, NULL, &err) != HANU_OK) {
        http_error(c, 400, "invalid_json", "%s", err.msg);
        return -1;
    }
    size_t i = 0;
    while (i < len && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r')) i++;
    if (i == len || in[i] != '{') {
        http_error(c, 400, "invalid_request", "a document must be a JSON object");
        return -1;
    }
    char found[257];
    size_t flen = 0;
    int rc = json_id_find(in, len, found, sizeof found, &flen);
    hanu_buf_reset(out);
    if (rc == HANU_OK) {
        if (!valid_id(found, flen)) {
            http_error(c, 400, "invalid_id", "\"_id\" must be 1-256 bytes without '/' or control characters");
            return -1;
        }
        if (*id_len && (flen != *id_len || memcmp(found, id, flen))) {
            http_error(c, 400, "invalid_id", "the document's \"_id\" differs from the id in the URL");
            return -1;
        }
        memcpy(id, found, flen);
        id[flen] = '\0';
        *id_len = flen;
        hanu_buf_append(out, in, len);
        return 0;
    }
    if (rc == HANU_ERR_TOO_LARGE) {
        http_error(c, 400, "invalid_id", "\"_id\" is longer than 256 bytes");
        return -1;
    }
    if (rc != HANU_ERR_NOT_FOUND) {
        http_error(c, 400, "invalid_id", "\"_id\" must be a string");
        return -1;
    }
    if (!*id_len) {
        new_id(c->srv, id);
        *id_len = 20;
    }
    if (json_id_insert(in, len, id, *id_len, out) != HANU_OK) {
        http_error(c, 400, "invalid_id", "the id is not valid UTF-8");
        return -1;
    }
    return 0;
}

void http_doc_write(http_call *c)
{
    server *srv = c->srv;
    store *st = srv->store;
    h2o_req_t *req = c->req;
    int is_delete = c->route == ROUTE_DOC_DELETE, is_post = c->route == ROUTE_DOC_POST;
    if (!check_write_allowed(c)) return;
    int bad;
    const h2o_iovec_t *ik = idempotency_key(c, &bad);
    if (bad) { http_error(c, 400, "invalid_request", "Idempotency-Key must be 1-128 bytes"); return; }
    if (ik && idem_replay(c, ik)) return;
    if (!is_post && !valid_id(c->id, c->id_len)) {
        http_error(c, 400, "invalid_id", "document ids are 1-256 bytes without '/' or control characters");
        return;
    }
    hanu_buf *doc = &srv->http_scratch;
    if (!is_delete) {
        if (req->entity.len > srv->limits.max_value + 300u) {
            http_error(c, 413, "too_large", "document of %zu bytes; the limit is %u", req->entity.len,
                       srv->limits.max_value);
            return;
        }
        if (is_post) c->id_len = 0;
        if (prepare_doc(c, req->entity.base ? req->entity.base : "", req->entity.len, c->id, &c->id_len, doc))
            return;
        if (doc->len > srv->limits.max_value) {
            http_error(c, 413, "too_large", "document of %zu bytes; the limit is %u", doc->len,
                       srv->limits.max_value);
            return;
        }
    }
    uint32_t db;
    if (find_collection(c, !is_delete, &db)) return;
    int cond = STORE_COND_NONE;
    uint64_t want = 0, current = 0, txn = 0, old;
    const h2o_iovec_t *im = http_header(req, H2O_STRLIT("if-match"));
    const h2o_iovec_t *inm = http_header(req, H2O_STRLIT("if-none-match"));
    if (im) {
        if (!parse_if_match(im, &want)) {
            http_error(c, 400, "invalid_request", "If-Match must be a txn, like \"42\"");
            return;
        }
        cond = STORE_COND_TOKEN;
    } else if (inm && inm->len == 1 && inm->base[0] == '*') {
        cond = STORE_COND_NOT_EXISTS;
    }
    int existed = store_lookup(st, db, c->id, c->id_len, &old) == HANU_OK;
    /* The answer, without its txn, is known before the write: it goes into the same
       log record as the idempotency key. */
    hanu_buf rest = {0}, idem = {0};
    hanu_buf_append(&rest, ",\"_id\":", 7);
    json_escape_string(&rest, c->id, c->id_len);
    int status = 200;
    if (is_delete) hanu_buf_append(&rest, ",\"deleted\":true}", 16);
    else {
        status = existed ? 200 : 201;
        hanu_buf_append(&rest, existed ? ",\"created\":false}" : ",\"created\":true}", existed ? 17 : 16);
    }
    store_op ops[2];
    size_t nops = 0;
    ops[nops++] = (store_op){ is_delete ? STORE_DELETE : STORE_SET, c->id, c->id_len,
                              is_delete ? NULL : doc->data, is_delete ? 0 : doc->len };
    char ikey[5 + STORE_DB_NAME_MAX + 1 + IDEM_KEY_MAX];
    if (ik) {
        idem_record(c, status, (const char *)rest.data, rest.len, &idem);
        ops[nops++] = (store_op){ STORE_SYSTEM_SET, ikey, idem_store_key(c, ik, ikey), idem.data, idem.len };
    }
    int rc = store_write(st, db, ops, nops, cond, want, &txn, &current);
    if (rc == HANU_OK) {
        reply_written(c, status, txn, (const char *)rest.data, rest.len);
    } else if (rc == HANU_ERR_MISMATCH) {
        http_error(c, 412, "precondition_failed", "document \"%s\" is at txn %llu, not %llu", c->id,
                   (unsigned long long)current, (unsigned long long)want);
    } else if (rc == HANU_ERR_EXISTS) {
        http_error(c, 412, "precondition_failed", "document \"%s\" exists (If-None-Match: *)", c->id);
    } else if (rc == HANU_ERR_NOT_FOUND && cond == STORE_COND_TOKEN) {
        http_error(c, 412, "precondition_failed", "document \"%s\" does not exist (If-Match)", c->id);
    } else if (rc == HANU_ERR_NOT_FOUND) {
        http_error(c, 404, "not_found", "no document \"%s\" in collection \"%s\"", c->id, c->col);
    } else {
        store_failure(c, rc);
    }
    hanu_buf_free(&rest);
    hanu_buf_free(&idem);
}

/* ---- batches ---- */

typedef struct batch_item {
    int is_delete;
    size_t id_off, id_len, doc_off, doc_len;
} batch_item;

void http_batch(http_call *c)
{
    server *srv = c->srv;
    h2o_req_t *req = c->req;
    if (!check_write_allowed(c)) return;
    int bad;
    const h2o_iovec_t *ik = idempotency_key(c, &bad);
    if (bad) { http_error(c, 400, "invalid_request", "Idempotency-Key must be 1-128 bytes"); return; }
    if (ik && idem_replay(c, ik)) return;
    json_doc *jd = NULL;
    json_error err;
    const char *in = req->entity.base ? req->entity.base : "";
    if (json_doc_parse(in, req->entity.len, NULL, &jd, &err) != HANU_OK) {
        http_error(c, 400, "invalid_json", "%s", err.msg);
        return;
    }
    const json_value *ops = json_get(json_doc_root(jd), "ops");
    size_t n = json_len(ops);
    if (!ops || ops->type != JSON_ARRAY || n == 0) {
        json_doc_free(jd);
        http_error(c, 400, "invalid_request", "the body must be {\"ops\":[...]} with at least one op");
        return;
    }
    if (n > BATCH_MAX_OPS) {
        json_doc_free(jd);
        http_error(c, 413, "too_large", "a batch holds at most %d ops, this one %zu", BATCH_MAX_OPS, n);
        return;
    }
    batch_item *items = calloc(n, sizeof *items);
    hanu_buf arena = {0}, one = {0};
    int failed = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        const json_value *op = json_at(ops, i);
        const char *kind, *id = NULL;
        size_t kind_len, id_len = 0;
        if (json_as_string(json_get(op, "op"), &kind, &kind_len) != HANU_OK) {
            http_error(c, 400, "invalid_request", "ops[%zu]: \"op\" must be \"put\" or \"delete\"", i);
            failed = 1;
            break;
        }
        const json_value *idv = json_get(op, "id");
        if (idv && (json_as_string(idv, &id, &id_len) != HANU_OK || !valid_id(id, id_len))) {
            http_error(c, 400, "invalid_id", "ops[%zu]: \"id\" must be a string of 1-256 bytes without '/'", i);
            failed = 1;
            break;
        }
        char idbuf[257];
        size_t idl = id_len;
        if (id) memcpy(idbuf, id, id_len);
        if (kind_len == 6 && !memcmp(kind, "delete", 6)) {
            if (!id) { http_error(c, 400, "invalid_request", "ops[%zu]: a delete needs an \"id\"", i); failed = 1; break; }
            items[i].is_delete = 1;
        } else if (kind_len == 3 && !memcmp(kind, "put", 3)) {
            const json_value *d = json_get(op, "doc");
            if (!d || d->type != JSON_OBJECT) {
                http_error(c, 400, "invalid_request", "ops[%zu]: a put needs a \"doc\" object", i);
                failed = 1;
                break;
            }
            if (prepare_doc(c, in + d->start, d->end - d->start, idbuf, &idl, &one)) { failed = 1; break; }
            if (one.len > srv->limits.max_value) {
                http_error(c, 413, "too_large", "ops[%zu]: document of %zu bytes; the limit is %u", i, one.len,
                           srv->limits.max_value);
                failed = 1;
                break;
            }
            items[i].doc_off = arena.len;
            items[i].doc_len = one.len;
            hanu_buf_append(&arena, one.data, one.len);
        } else {
            http_error(c, 400, "invalid_request", "ops[%zu]: \"op\" must be \"put\" or \"delete\"", i);
            failed = 1;
            break;
        }
        items[i].id_off = arena.len;
        items[i].id_len = idl;
        hanu_buf_append(&arena, idbuf, idl);
    }
    uint32_t db;
    if (!failed && find_collection(c, 1, &db)) failed = 1;
    if (!failed) {
        store_op *sops = calloc(n + 1, sizeof *sops);
        hanu_buf rest = {0}, idem = {0};
        hanu_buf_append(&rest, ",\"results\":[", 12);
        for (size_t i = 0; i < n; i++) {
            const char *idp = (const char *)arena.data + items[i].id_off;
            sops[i] = (store_op){ items[i].is_delete ? STORE_DELETE : STORE_SET, idp, items[i].id_len,
                                  items[i].is_delete ? NULL : arena.data + items[i].doc_off,
                                  items[i].doc_len };
            hanu_buf_append(&rest, i ? ",{\"_id\":" : "{\"_id\":", i ? 8 : 7);
            json_escape_string(&rest, idp, items[i].id_len);
            hanu_buf_append(&rest, items[i].is_delete ? ",\"op\":\"delete\"}" : ",\"op\":\"put\"}",
                            items[i].is_delete ? 15 : 12);
        }
        hanu_buf_append(&rest, "]}", 2);
        size_t nops = n;
        char ikey[5 + STORE_DB_NAME_MAX + 1 + IDEM_KEY_MAX];
        if (ik) {
            idem_record(c, 200, (const char *)rest.data, rest.len, &idem);
            sops[nops++] = (store_op){ STORE_SYSTEM_SET, ikey, idem_store_key(c, ik, ikey), idem.data, idem.len };
        }
        uint64_t txn;
        int rc = store_write(srv->store, db, sops, nops, STORE_COND_NONE, 0, &txn, NULL);
        if (rc == HANU_OK) reply_written(c, 200, txn, (const char *)rest.data, rest.len);
        else store_failure(c, rc);
        free(sops);
        hanu_buf_free(&rest);
        hanu_buf_free(&idem);
    }
    free(items);
    hanu_buf_free(&arena);
    hanu_buf_free(&one);
    json_doc_free(jd);
}
