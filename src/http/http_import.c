/*
 * http_import.c: POST /c/{col}/_import (docs/API.md "Import"): an NDJSON body,
 * one document a line, written in chunks of at most IMPORT_CHUNK_DOCS documents
 * or IMPORT_CHUNK_BYTES bytes, each chunk one store_write (one log record, all
 * or nothing, like a _batch). A line that is not a document is counted and
 * listed by its line number (the first IMPORT_ERRORS_MAX of them) and the rest
 * of the body goes on. The answer, once the last chunk is durable at the
 * request's level, is a summary:
 *
 *   {"txn":N,"lines":L,"imported":I,"failed":F,"blank":B,"chunks":C,
 *    "errors":[{"line":3,"code":"invalid_json","message":"..."}],"errors_omitted":0}
 *
 * Memory. h2o 2.2.5 hands a handler the whole body once it has arrived (request
 * bodies are streamed to handlers only from h2o 2.3 on), so one request is held
 * in memory whole, within --max-body; what the import adds is one chunk. A file
 * of any size is imported in constant memory by sending it as several requests
 * cut at line boundaries (`hanudb import` does, with ?first_line= so that the
 * line numbers of errors are the file's).
 *
 * The loop thread is not held for a whole body: a step prepares and writes
 * chunks for about IMPORT_STEP_MS, then yields for a millisecond (a timeout: h2o
 * runs a zero one again before any I/O) so that other requests run between
 * chunks. A client that leaves stops the import after the chunk in hand (what
 * was written stays); a server that stops answers 503 with how far it got.
 *
 * Idempotency-Key: its record joins the last chunk's write, so a replay answers
 * the same summary; a request that failed part way (a store error) stored none,
 * and its retry writes the committed chunks again (same ids, new versions;
 * generated ids are new ids).
 */
#include "http/http_internal.h"
#include "http/http_guard.h"

#include <stdio.h>
#include <stdlib.h>

#define IMPORT_CHUNK_DOCS 1000           /* documents in one log record */
#define IMPORT_CHUNK_BYTES (4u << 20)    /* ... or this many bytes of them */
#define IMPORT_ERRORS_MAX 100            /* line errors listed in the answer */
#define IMPORT_STEP_MS 10                /* the loop's time one step takes at most (about) */
#define IMPORT_FIRST_LINE_MAX (1ull << 53)

typedef struct import_item {
    size_t id_off, id_len, doc_off, doc_len;   /* in the chunk's arena */
} import_item;

typedef struct import_run {
    http_call call;                      /* a copy: the request outlives http_on_req */
    h2o_timeout_entry_t yield;           /* the next step (srv->import_timeout) */
    h2o_linklist_t link;                 /* srv->imports */
    struct import_run **guard;           /* in the request's pool; the client left when freed */
    const h2o_iovec_t *ik;               /* Idempotency-Key, or NULL */
    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    uint32_t db;
    docs_ndjson_reader rd;
    uint64_t first_line;                 /* of the body */
    uint64_t chunk_from;                 /* the line the chunk in hand starts at */
    hanu_buf doc, scratch;
    import_item items[IMPORT_CHUNK_DOCS];
    store_op ops[IMPORT_CHUNK_DOCS + 1];
    size_t n;
    hanu_buf arena;
    /* the summary */
    uint64_t imported, failed, chunks, last_txn;
    hanu_buf errors;                     /* the "errors" array's members, comma-separated */
    size_t listed;
} import_run;

/* One more line error for the answer (the first IMPORT_ERRORS_MAX are listed). */
static void add_error(import_run *r, uint64_t line, const docs_error *e)
{
    r->failed++;
    if (r->listed >= IMPORT_ERRORS_MAX) return;
    json_writer w;
    if (r->listed++) hanu_buf_append(&r->errors, ",", 1);
    json_writer_init(&w, &r->errors);
    json_write_object_begin(&w);
    json_write_key(&w, "line", 4);
    json_write_int64(&w, (int64_t)line);
    json_write_key(&w, "code", 4);
    json_write_string(&w, e->code, strlen(e->code));
    json_write_key(&w, "message", 7);
    json_write_string(&w, e->message, strlen(e->message));
    json_write_object_end(&w);
}

/* Writes the chunk (and extra, the idempotency record, when given) as one record. */
static int write_chunk(import_run *r, const store_op *extra)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        const import_item *it = &r->items[i];
        r->ops[n++] = (store_op){ STORE_SET, r->arena.data + it->id_off, it->id_len, r->arena.data + it->doc_off,
                                  it->doc_len };
    }
    if (extra) r->ops[n++] = *extra;
    if (!n) return HANU_OK;
    uint64_t txn;
    int rc = store_write(r->call.srv->store, r->db, r->ops, n, STORE_COND_NONE, 0, &txn, NULL);
    if (rc != HANU_OK) return rc;
    r->last_txn = txn;
    r->imported += r->n;
    if (r->n) r->chunks++;
    r->n = 0;
    hanu_buf_reset(&r->arena);
    return HANU_OK;
}

/* ?first_line=N: the number of the body's first line (1 by default). */
static int first_line_of(http_call *c, uint64_t *out)
{
    *out = 1;
    const h2o_iovec_t *v = http_param(c, HTTP_PARAM_FIRST_LINE);
    if (!v) return 1;
    uint64_t n = 0;
    for (size_t i = 0; i < v->len && n <= IMPORT_FIRST_LINE_MAX; i++) {
        if (v->base[i] < '0' || v->base[i] > '9') { n = 0; break; }
        n = n * 10 + (uint64_t)(v->base[i] - '0');
    }
    if (!v->len || n < 1 || n > IMPORT_FIRST_LINE_MAX) {
        http_error(c, 400, "invalid_parameter", "first_line must be an integer from 1 to 2^53");
        return 0;
    }
    *out = n;
    return 1;
}

static void write_summary(import_run *r, hanu_buf *rest)
{
    const docs_ndjson_reader *rd = &r->rd;
    /* written before the last chunk, which it counts */
    json_writer w;
    http_answer_begin(&w, rest);
    const server_json_field f[] = {
        { "lines", rd->line + 1 - r->first_line }, { "imported", r->imported + r->n }, { "failed", r->failed },
        { "blank", rd->blank }, { "chunks", r->chunks + (r->n > 0) },
    };
    server_json_fields(&w, f, sizeof f / sizeof *f);
    json_write_key(&w, "errors", 6);
    json_write_array_begin(&w);
    json_write_raw(&w, (const char *)r->errors.data, r->errors.len);
    json_write_array_end(&w);
    json_write_key(&w, "errors_omitted", 14);
    json_write_int64(&w, (int64_t)(r->failed - r->listed));
    http_answer_end(&w);
}

/* Leaves the server's list and its timer; the request is answered or gone. */
static void run_free(import_run *r)
{
    if (h2o_timeout_is_linked(&r->yield)) h2o_timeout_unlink(&r->yield);
    h2o_linklist_unlink(&r->link);
    if (r->guard) *r->guard = NULL;
    hanu_buf_free(&r->doc);
    hanu_buf_free(&r->scratch);
    hanu_buf_free(&r->arena);
    hanu_buf_free(&r->errors);
    free(r);
}

static void on_req_gone(void *p)
{
    import_run *r = *(import_run **)p;
    if (!r) return;
    r->guard = NULL;   /* the client left: stop after what is written */
    run_free(r);
}

/* Before answering: answering may free the request's pool, and with it the guard. */
static void detach(import_run *r)
{
    if (r->guard) *r->guard = NULL;
    r->guard = NULL;
}

/* The answer after a store error: committed chunks stay, the message says how far. */
static void answer_failure(import_run *r, int rc)
{
    detach(r);
    int status = rc == HANU_ERR_STOPPED ? 503 : rc == HANU_ERR_TOO_LARGE || rc == HANU_ERR_INVALID ? 413 : 500;
    http_error(&r->call, status, status == 503 ? "store_stopped" : status == 413 ? "too_large" : "internal",
               "the chunk from line %llu was not written (%s); the %llu documents before it were imported",
               (unsigned long long)r->chunk_from, hanu_status_str(rc), (unsigned long long)r->imported);
    if (status != 413) server_log_write_failure("http", "an import", rc);
}

/* The last chunk with the idempotency record, then the summary. */
static void finish(import_run *r)
{
    http_call *c = &r->call;
    hanu_buf rest = {0}, idem = {0};
    write_summary(r, &rest);
    store_op extra, *xp = NULL;
    char ikey[DOCS_IDEM_STORE_KEY_MAX];
    if (r->ik) {
        http_idem_record(c, 200, r->fp, h2o_iovec_init(NULL, 0), &rest, &idem);
        extra = docs_idem_op(ikey, http_idem_store_key(c, r->ik, ikey), &idem);
        xp = &extra;
    }
    int rc = write_chunk(r, xp);
    if (rc == HANU_OK) detach(r);
    if (rc == HANU_OK && r->last_txn) {
        http_reply_written(c, 200, r->last_txn, rest.data, rest.len, 0);
    } else if (rc == HANU_OK) {   /* nothing written: no document, no key */
        hanu_buf b = {0};
        hanu_buf_append(&b, "{\"txn\":0", 8);
        hanu_buf_append(&b, rest.data, rest.len);
        http_reply(c, 200, (const char *)b.data, b.len, 0);
        hanu_buf_free(&b);
    } else {
        answer_failure(r, rc);
    }
    hanu_buf_free(&rest);
    hanu_buf_free(&idem);
}

/* Prepares lines and writes full chunks for about IMPORT_STEP_MS: 1 when the body
   is done (answered), 0 when more follows, -1 after a store error (answered). */
static int step(import_run *r)
{
    server *srv = r->call.srv;
    uint64_t until = hanu_now_ns() + IMPORT_STEP_MS * 1000000ull;
    const char *line;
    size_t len;
    while (docs_ndjson_next(&r->rd, &line, &len)) {
        char id[DOCS_ID_MAX + 1];
        size_t id_len;
        docs_error e;
        if (docs_ndjson_prepare(line, len, srv->limits.max_value, id, &id_len, http_new_id, srv, &r->doc,
                                &r->scratch, &e)) {
            add_error(r, r->rd.line, &e);
            continue;
        }
        /* A full chunk is written only once another document follows: the last one
           carries the idempotency record. */
        int wrote = 0;
        if (r->n == IMPORT_CHUNK_DOCS || r->arena.len + r->doc.len > IMPORT_CHUNK_BYTES) {
            int rc = write_chunk(r, NULL);
            if (rc != HANU_OK) { answer_failure(r, rc); return -1; }
            r->chunk_from = r->rd.line;
            wrote = 1;
        }
        import_item *it = &r->items[r->n];
        it->id_off = r->arena.len;
        it->id_len = id_len;
        if (hanu_buf_append(&r->arena, id, id_len) || hanu_buf_append(&r->arena, r->doc.data, r->doc.len)) {
            answer_failure(r, HANU_ERR_NOMEM);
            return -1;
        }
        it->doc_off = it->id_off + id_len;
        it->doc_len = r->doc.len;
        r->n++;
        if (wrote && hanu_now_ns() >= until) return 0;   /* the loop serves others in between */
    }
    finish(r);
    return 1;
}

static void run_step(import_run *r)
{
    server *srv = r->call.srv;
    if (srv->stopping) {
        detach(r);
        http_error(&r->call, 503, "shutting_down", "the server is stopping: the import stopped at line %llu; the "
                   "%llu documents before it were imported", (unsigned long long)r->chunk_from,
                   (unsigned long long)r->imported);
    } else if (step(r) == 0) {
        h2o_timeout_link(srv->loop, &srv->import_timeout, &r->yield);
        return;
    }
    run_free(r);   /* answered */
}

static void on_yield(h2o_timeout_entry_t *entry)
{
    run_step(H2O_STRUCT_FROM_MEMBER(import_run, yield, entry));
}

void http_import(http_call *c)
{
    server *srv = c->srv;
    h2o_req_t *req = c->req;
    if (!http_write_allowed(c)) return;
    const h2o_iovec_t *ik;
    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    if (http_idem_begin(c, &ik, fp, 0)) return;
    uint64_t first;
    uint32_t db;
    if (!first_line_of(c, &first) || http_find_collection(c, 1, &db)) return;
    if (!srv->imports.next) {
        http_error(c, 503, "shutting_down", "the server is not serving imports");
        return;
    }
    import_run *r = calloc(1, sizeof *r);
    if (!r) { http_error(c, 500, "internal", "out of memory"); return; }
    r->call = *c;
    r->call.answer = NULL;
    r->ik = ik;
    if (ik) memcpy(r->fp, fp, sizeof fp);
    r->db = db;
    r->first_line = r->chunk_from = first;
    docs_ndjson_init(&r->rd, req->entity.base ? req->entity.base : "", req->entity.len, first);
    r->yield.cb = on_yield;
    r->guard = h2o_mem_alloc_shared(&req->pool, sizeof *r->guard, on_req_gone);
    *r->guard = r;
    h2o_linklist_insert(&srv->imports, &r->link);
    run_step(r);
}

void http_import_start(server *srv)
{
    h2o_linklist_init_anchor(&srv->imports);
    h2o_timeout_init(srv->loop, &srv->import_timeout, 1);
}

void http_import_stop(server *srv)
{
    if (!srv->imports.next) return;   /* never started (HTTP off) */
    while (!h2o_linklist_is_empty(&srv->imports)) {
        import_run *r = H2O_STRUCT_FROM_MEMBER(import_run, link, srv->imports.next);
        run_step(r);   /* srv->stopping: answers 503 and frees */
    }
    h2o_timeout_dispose(srv->loop, &srv->import_timeout);
    srv->imports.next = NULL;
}
