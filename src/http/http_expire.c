/*
 * http_expire.c: expiring documents (docs/API.md "Expiring documents"), after
 * MongoDB's TTL indexes.
 *
 *   PUT /c/{col} {"expire_after_field":"expires_at"}   (null removes the option)
 *
 * The option is a record of the documents layer in the system database
 * (docs_expire.c), written through the log like any write: replicated, in the
 * bucket, kept across restarts. Reads filter at once: a document whose field is
 * at or before now is not found (GET), not listed, not a hit of _find or
 * _search, not exported. Deleting it is the sweep's: once a second, on the
 * leader only (a follower or standby applies the leader's deletes), it walks
 * the collection's index snapshot a slice at a time (SWEEP_DOCS_PER_TICK
 * documents read, SWEEP_DELETES_PER_TICK deletes) and deletes each expired
 * document with an ordinary delete conditioned on the version it read, so a
 * document renewed in between is kept. Each delete is its own log record.
 * Without the index (--no-index) the sweep cannot walk a collection: reads
 * still hide expired documents, nothing deletes them.
 */
#include "http/http_internal.h"
#include "hlog/hlog.h"

#include <stdio.h>
#include <stdlib.h>

#define SWEEP_DOCS_PER_TICK 10000        /* about 20 ms of the loop a second */
#define SWEEP_DELETES_PER_TICK 1000

/* ---- the option ---- */

void http_collection_options(http_call *c)
{
    server *srv = c->srv;
    store *st = srv->store;
    h2o_req_t *req = c->req;
    if (!http_write_allowed(c)) return;
    json_doc *d = NULL;
    json_error je;
    if (json_doc_parse(req->entity.base, req->entity.len, NULL, &d, &je) != HANU_OK) {
        http_error(c, 400, "invalid_json", "%s", je.msg);
        return;
    }
    const json_value *root = json_doc_root(d), *f = json_get(root, "expire_after_field");
    const char *field = NULL;
    size_t fl = 0;
    int bad = root->type != JSON_OBJECT || json_len(root) != (f ? 1u : 0u);
    if (!bad && f && f->type != JSON_NULL &&
        (json_as_string(f, &field, &fl) != HANU_OK || !docs_expire_field_valid(field, fl)))
        bad = 2;
    if (bad) {
        json_doc_free(d);
        http_error(c, 400, "invalid_request", bad == 2 ? "expire_after_field must be null or the name of a top-level "
                   "field: 1-256 bytes without control characters" : "a collection's options are an object with "
                   "one member, expire_after_field");
        return;
    }
    size_t len = strlen(c->col);
    uint32_t db;
    uint64_t created = 0, txn = 0;
    int rc = docs_collection_open(st, c->col, len, &db, &created);
    char key[DOCS_OPTIONS_KEY_MAX];
    size_t kl = docs_options_key(c->col, key);
    hanu_buf rec = {0};
    if (rc == HANU_OK) {
        store_op op = { field ? STORE_SYSTEM_SET : STORE_SYSTEM_DELETE, key, kl, NULL, 0 };
        if (field) {
            docs_options_record(field, fl, &rec);
            op.value = rec.data;
            op.value_len = rec.len;
        }
        rc = store_write(st, db, &op, 1, STORE_COND_NONE, 0, &txn, NULL);
    }
    if (rc == HANU_ERR_MISMATCH || rc == HANU_ERR_NOT_FOUND) {
        http_find_collection(c, 0, &db);   /* answers 409 wrong_kind */
    } else if (rc) {
        http_store_failure(c, rc);
    } else {
        hanu_buf rest = {0};
        json_writer w;
        http_answer_begin(&w, &rest);
        json_write_key(&w, "name", 4);
        json_write_string(&w, c->col, len);
        json_write_key(&w, "created", 7);
        json_write_bool(&w, created != 0);
        json_write_key(&w, "expire_after_field", 18);
        if (field) json_write_string(&w, field, fl);
        else json_write_null(&w);
        http_answer_end(&w);
        if (created) {
            h2o_iovec_t loc = http_location(c, NULL, 0);
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, loc.base, loc.len);
        }
        http_reply_written(c, created ? 201 : 200, txn, rest.data, rest.len, 0);
        hanu_buf_free(&rest);
    }
    hanu_buf_free(&rec);
    json_doc_free(d);
}

void http_expire_describe(http_call *c, json_writer *w)
{
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
    if (!docs_expire_field(c->srv->store, c->col, field)) return;
    json_write_key(w, "expire_after_field", 18);
    json_write_string(w, field, strlen(field));
}

void http_expire_forget(http_call *c)
{
    char key[DOCS_OPTIONS_KEY_MAX];
    size_t kl = docs_options_key(c->col, key);
    uint64_t token, txn;
    store *st = c->srv->store;
    if (store_lookup(st, STORE_SYSTEM_DB_ID, key, kl, &token) != HANU_OK) return;
    store_op op = { STORE_SYSTEM_DELETE, key, kl, NULL, 0 };
    if (store_write(st, STORE_SYSTEM_DB_ID, &op, 1, STORE_COND_NONE, 0, &txn, NULL) != HANU_OK)
        hlog_warn("http", "collection \"%s\" was dropped but its expiry option stays (a write failed): a collection "
                  "created again under its name would expire documents by it", c->col);
}

/* ---- reads ---- */

int http_expire_field(const http_call *c, char field[DOCS_EXPIRE_FIELD_MAX + 1])
{
    return docs_expire_field(c->srv->store, c->col, field);
}

size_t http_expire_drop_hits(const http_call *c, index_hits *h, double *scores)
{
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
    if (!h->n || !http_expire_field(c, field)) return 0;
    uint64_t now = hanu_wall_ms();
    size_t kept = 0;
    for (size_t i = 0; i < h->n; i++) {
        if (docs_expired(h->hits[i].doc, h->hits[i].doc_len, field, now)) {
            if (!h->block) free(h->hits[i].id);   /* its doc is in the same allocation */
            continue;
        }
        if (scores) scores[kept] = scores[i];
        h->hits[kept++] = h->hits[i];
    }
    size_t dropped = h->n - kept;
    h->n = kept;
    h->total = h->total >= dropped ? h->total - dropped : 0;
    return dropped;
}

/* ---- the sweep ---- */

struct http_expire_sweep {
    h2o_timeout_entry_t tick;
    uint32_t db;                        /* the collection being swept (its snapshot below) */
    char col[STORE_DB_NAME_MAX + 1];
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
    index_snapshot *snap;
    uint32_t seg, ord;
    hanu_buf doc;
};

/* The next collection after db (by id) that has an expiry option; 0 when none. */
static int next_collection(server *srv, struct http_expire_sweep *s, uint32_t after)
{
    size_t n = store_db_list(srv->store, NULL, 0);
    store_db_info *infos = calloc(n ? n : 1, sizeof *infos);
    if (!infos) return 0;
    n = store_db_list(srv->store, infos, n);
    const store_db_info *best = NULL, *first = NULL;
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        const store_db_info *in = &infos[i];
        if (in->kind != STORE_DB_COLLECTION || !docs_expire_field(srv->store, in->name, field)) continue;
        if (!first || in->id < first->id) first = in;
        if (in->id > after && (!best || in->id < best->id)) best = in;
    }
    if (!best) best = first;   /* round robin */
    int found = best != NULL;
    if (found) {
        s->db = best->id;
        snprintf(s->col, sizeof s->col, "%s", best->name);
        docs_expire_field(srv->store, best->name, s->field);
    }
    free(infos);
    return found;
}

static void sweep_tick(server *srv, struct http_expire_sweep *s)
{
    store *st = srv->store;
    if (!s->snap) {
        if (!next_collection(srv, s, s->db)) return;
        s->snap = index_snapshot_acquire(srv->indexer, s->db);
        s->seg = s->ord = 0;
        if (!s->snap) return;
    }
    uint64_t now = hanu_wall_ms();
    size_t read = 0, deleted = 0;
    const index_snapshot *snap = s->snap;
    for (; s->seg < snap->nsegments; s->seg++, s->ord = 0) {
        const index_segment *seg = snap->segments[s->seg].seg;
        uint32_t n = index_segment_docs(seg);
        for (; s->ord < n; s->ord++) {
            if (read >= SWEEP_DOCS_PER_TICK || deleted >= SWEEP_DELETES_PER_TICK) return;   /* the next tick goes on */
            if (!index_snapshot_live(snap, s->seg, s->ord)) continue;
            size_t id_len;
            const char *id = index_segment_doc_id(seg, s->ord, &id_len);
            uint64_t token, txn;
            hanu_buf_reset(&s->doc);
            read++;
            if (store_get(st, s->db, id, id_len, &s->doc, &token) != HANU_OK) continue;
            if (!docs_expired((const char *)s->doc.data, s->doc.len, s->field, now)) continue;
            store_op op = { STORE_DELETE, id, id_len, NULL, 0 };
            int rc = store_write(st, s->db, &op, 1, STORE_COND_TOKEN, token, &txn, NULL);
            if (rc == HANU_OK) {
                deleted++;
                srv->expired_docs++;
            } else if (rc != HANU_ERR_MISMATCH && rc != HANU_ERR_NOT_FOUND) {   /* changed meanwhile: kept */
                server_log_write_failure("http", "the expiry sweep", rc);
                return;
            }
        }
    }
    index_snapshot_release(s->snap);   /* the pass is done; the next tick takes the next collection */
    s->snap = NULL;
}

static void on_sweep(h2o_timeout_entry_t *entry)
{
    struct http_expire_sweep *s = H2O_STRUCT_FROM_MEMBER(struct http_expire_sweep, tick, entry);
    server *srv = *(server **)(s + 1);
    /* The leader only: a follower or standby gets the leader's deletes through the log. */
    if (!srv->stopping && srv->indexer && server_accepts_writes(srv) && !store_failed(srv->store)) sweep_tick(srv, s);
    h2o_timeout_link(srv->loop, &srv->sweep_timeout, &s->tick);
}

void http_expire_start(server *srv)
{
    struct http_expire_sweep *s = calloc(1, sizeof *s + sizeof(server *));
    if (!s) return;
    *(server **)(s + 1) = srv;
    s->tick.cb = on_sweep;
    srv->expire_sweep = s;
    h2o_timeout_link(srv->loop, &srv->sweep_timeout, &s->tick);
}

void http_expire_stop(server *srv)
{
    struct http_expire_sweep *s = srv->expire_sweep;
    if (!s) return;
    if (h2o_timeout_is_linked(&s->tick)) h2o_timeout_unlink(&s->tick);
    if (s->snap) index_snapshot_release(s->snap);
    hanu_buf_free(&s->doc);
    free(s);
    srv->expire_sweep = NULL;
}
