/*
 * http_ndjson.c: GET /c/{col}/docs?format=ndjson (docs/API.md "Export as
 * NDJSON"): every live document of the collection, one a line (its stored
 * bytes), as one chunked answer, taken at one snapshot.
 *
 * The snapshot. The request first waits (on the loop, polling) until the index
 * covers every write made before it, then acquires the collection's index
 * snapshot: its set of documents and, for each, the txn of its version. The
 * answer's Hanu-Txn header is that snapshot's index txn. A document is read from
 * the store and sent when the store still has that version; a document changed
 * or deleted since is read at its snapshot txn from the log (the log is the
 * store: the old record is still there, read through the change feed), so a
 * write during the export never shows and no document is torn. Compaction may
 * drop an old version once the newer one is below the floor (docs/FORMATS.md);
 * should that happen to a version the export still needs, the answer is cut
 * (no final chunk: the client sees a broken transfer, never a wrong set).
 *
 * Memory: one chunk of about NDJSON_CHUNK bytes at a time; the next is made
 * when h2o has sent it (the generator's proceed), so a slow client holds one
 * chunk, and the loop is held for one chunk's work at a time.
 */
#include "http/http_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define NDJSON_CHUNK (256u << 10)
#define NDJSON_WAIT_MS 30000            /* longest wait for the index to catch up */

typedef struct ndjson_stream {
    h2o_generator_t gen;                /* first: h2o calls proceed and stop with it */
    h2o_timeout_entry_t wait;           /* polling the index (srv->snapshot_wait_timeout) */
    http_call call;                     /* srv, req, route, start_ns, token, col */
    uint32_t db;
    uint64_t want_txn, deadline_ns;
    index_snapshot *snap;
    uint32_t seg, ord;                  /* the next document */
    hanu_buf chunk, doc;
    uint64_t docs, bytes;
    int started, finished;
    uint64_t now_ms;                    /* expired documents are left out (http_expire.c) */
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
} ndjson_stream;

static void stream_dispose(void *p)
{
    ndjson_stream *s = p;
    if (h2o_timeout_is_linked(&s->wait)) h2o_timeout_unlink(&s->wait);
    if (s->snap) index_snapshot_release(s->snap);
    hanu_buf_free(&s->chunk);
    hanu_buf_free(&s->doc);
}

typedef struct old_version {
    uint32_t db;
    const char *id;
    size_t id_len;
    uint64_t txn;
    hanu_buf *out;
    int found;
} old_version;

static int take_old(void *ctx, const store_change *c)
{
    old_version *v = ctx;
    if (c->txn != v->txn) return 1;   /* the record is gone: compacted away */
    if (c->db == v->db && c->op == 1 && c->key_len == v->id_len && !memcmp(c->key, v->id, v->id_len)) {
        v->found = hanu_buf_append(v->out, c->value, c->value_len) == HANU_OK;
    }
    return 0;
}

/* The version of a document at txn, read from the log record of that txn. */
static int read_version(store *st, uint32_t db, const char *id, size_t id_len, uint64_t txn, hanu_buf *out)
{
    store_feed *f;
    if (store_feed_open(st, txn, &f) != HANU_OK) return HANU_ERR_NOT_FOUND;
    old_version v = { db, id, id_len, txn, out, 0 };
    size_t got = 0;
    int rc = store_feed_next(f, 1, take_old, &v, &got);
    store_feed_close(f);
    return rc == HANU_OK && v.found ? HANU_OK : HANU_ERR_NOT_FOUND;
}

/* Appends one document as one line: a stored document is valid JSON, so a raw CR
   or LF in it can only be whitespace between tokens and becomes a space. */
static int add_line(hanu_buf *b, const uint8_t *doc, size_t len)
{
    if (hanu_buf_reserve(b, len + 1) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *p = b->data + b->len;
    memcpy(p, doc, len);
    if (memchr(doc, '\n', len) || memchr(doc, '\r', len))
        for (size_t i = 0; i < len; i++)
            if (p[i] == '\n' || p[i] == '\r') p[i] = ' ';
    p[len] = '\n';
    b->len += len + 1;
    return HANU_OK;
}

/* Fills the chunk with the next documents: 1 when the collection is done, 0 when
   more follow, -1 when a document's version could not be read. */
static int fill_chunk(ndjson_stream *s)
{
    store *st = s->call.srv->store;
    const index_snapshot *snap = s->snap;
    hanu_buf_reset(&s->chunk);
    for (; snap && s->seg < snap->nsegments; s->seg++, s->ord = 0) {
        const index_segment *seg = snap->segments[s->seg].seg;
        uint32_t n = index_segment_docs(seg);
        for (; s->ord < n; s->ord++) {
            if (s->chunk.len >= NDJSON_CHUNK) return 0;
            if (!index_snapshot_live(snap, s->seg, s->ord)) continue;
            size_t id_len;
            const char *id = index_segment_doc_id(seg, s->ord, &id_len);
            uint64_t want = index_segment_doc_txn(seg, s->ord), token = 0;
            hanu_buf_reset(&s->doc);
            int rc = store_get(st, s->db, id, id_len, &s->doc, &token);
            if (rc != HANU_OK || token != want) {   /* changed or deleted since the snapshot */
                hanu_buf_reset(&s->doc);
                if (read_version(st, s->db, id, id_len, want, &s->doc) != HANU_OK) return -1;
            }
            if (s->field[0] && docs_expired((const char *)s->doc.data, s->doc.len, s->field, s->now_ms)) continue;
            if (add_line(&s->chunk, s->doc.data, s->doc.len) != HANU_OK) return -1;
            s->docs++;
        }
    }
    return 1;
}

static void send_next(ndjson_stream *s)
{
    h2o_req_t *req = s->call.req;
    int r = fill_chunk(s);
    h2o_iovec_t v = h2o_iovec_init(s->chunk.data ? (char *)s->chunk.data : "", s->chunk.len);
    s->bytes += v.len;
    if (r != 0) {
        s->finished = 1;
        http_answered(&s->call, 200, s->bytes);
        if (r < 0) {
            char col[STORE_DB_NAME_MAX + 40];
            snprintf(col, sizeof col, "the NDJSON export of \"%s\"", s->call.col);
            server_log_write_failure("http", col, HANU_ERR_NOT_FOUND);
        }
    }
    h2o_send(req, &v, 1, r == 0 ? H2O_SEND_STATE_IN_PROGRESS : r > 0 ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_ERROR);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    send_next((ndjson_stream *)gen);
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    ndjson_stream *s = (ndjson_stream *)gen;
    if (!s->finished) http_answered(&s->call, 200, s->bytes);   /* the client left */
    s->finished = 1;
}

static void start_stream(ndjson_stream *s)
{
    http_call *c = &s->call;
    h2o_req_t *req = c->req;
    s->snap = index_snapshot_acquire(c->srv->indexer, s->db);
    s->now_ms = hanu_wall_ms();
    http_expire_field(c, s->field);
    uint64_t at = s->snap ? s->snap->index_txn : indexer_txn(c->srv->indexer);
    char txn[24];
    int n = snprintf(txn, sizeof txn, "%llu", (unsigned long long)at);
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = SIZE_MAX;   /* chunked */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/x-ndjson"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("hanu-txn"), 0, NULL,
                          h2o_strdup(&req->pool, txn, (size_t)n).base, (size_t)n);
    http_add_cors(c->srv, req);
    s->gen.proceed = on_proceed;
    s->gen.stop = on_stop;
    s->started = 1;
    h2o_start_response(req, &s->gen);
    if (req->method.len == 4) {   /* HEAD: the head only */
        s->finished = 1;
        http_answered(c, 200, 0);
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
        return;
    }
    send_next(s);
}

/* 1 when the index covers every write made before the request. */
static int index_ready(ndjson_stream *s)
{
    indexer *ix = s->call.srv->indexer;
    uint64_t itxn = indexer_txn(ix);
    if (itxn >= s->want_txn) return 1;
    uint64_t next = http_next_record_txn(s->call.srv->store, itxn + 1);
    return next == 0 || next > s->want_txn;
}

static void on_wait(h2o_timeout_entry_t *entry)
{
    ndjson_stream *s = H2O_STRUCT_FROM_MEMBER(ndjson_stream, wait, entry);
    server *srv = s->call.srv;
    if (srv->stopping) {
        http_error(&s->call, 503, "shutting_down", "the server is shutting down");
    } else if (indexer_failed(srv->indexer)) {
        http_error(&s->call, 503, "index_failed", "the indexer stopped after a failed write; restart the server");
    } else if (index_ready(s)) {
        start_stream(s);
    } else if (hanu_now_ns() > s->deadline_ns) {
        http_error(&s->call, 503, "index_behind", "the index did not reach txn %llu within %u ms",
                   (unsigned long long)s->want_txn, NDJSON_WAIT_MS);
    } else {
        indexer_commit_now(srv->indexer);
        h2o_timeout_link(srv->loop, &srv->snapshot_wait_timeout, &s->wait);
    }
}

void http_ndjson_export(http_call *c)
{
    server *srv = c->srv;
    const h2o_iovec_t *f = http_param(c, HTTP_PARAM_FORMAT);
    if (f->len != 6 || memcmp(f->base, "ndjson", 6) != 0) {
        http_error(c, 400, "invalid_parameter", "format must be ndjson (without it the listing is JSON pages)");
        return;
    }
    if (http_param(c, HTTP_PARAM_LIMIT) || http_param(c, HTTP_PARAM_AFTER)) {
        http_error(c, 400, "invalid_parameter", "format=ndjson streams the whole collection: limit and after "
                   "do not apply");
        return;
    }
    if (!http_token_allows(c, c->col, 0)) {
        http_error(c, 403, "forbidden", "this token may not read collection \"%s\"", c->col);
        return;
    }
    uint32_t db;
    if (http_find_collection(c, 0, &db)) return;
    if (!srv->indexer) {
        http_error(c, 503, "index_off", "format=ndjson reads the collection at an index snapshot: the server "
                   "runs with --no-index");
        return;
    }
    ndjson_stream *s = h2o_mem_alloc_shared(&c->req->pool, sizeof *s, stream_dispose);
    memset(s, 0, sizeof *s);
    s->call = *c;
    s->call.answer = NULL;
    s->db = db;
    s->want_txn = store_last_txn(srv->store);
    s->deadline_ns = c->start_ns + (uint64_t)NDJSON_WAIT_MS * 1000000u;
    s->wait.cb = on_wait;
    if (index_ready(s)) { start_stream(s); return; }
    indexer_commit_now(srv->indexer);
    h2o_timeout_link(srv->loop, &srv->snapshot_wait_timeout, &s->wait);
}
