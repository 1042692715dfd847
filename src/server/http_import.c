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
 * Idempotency-Key: its record joins the last chunk's write, so a replay answers
 * the same summary; a request that failed part way (a store error) stored none,
 * and its retry writes the committed chunks again (same ids, new versions;
 * generated ids are new ids).
 */
#include "server/http_internal.h"
#include "server/http_guard.h"

#include <stdio.h>
#include <stdlib.h>

#define IMPORT_CHUNK_DOCS 1000           /* documents in one log record */
#define IMPORT_CHUNK_BYTES (4u << 20)    /* ... or this many bytes of them */
#define IMPORT_ERRORS_MAX 100            /* line errors listed in the answer */
#define IMPORT_FIRST_LINE_MAX (1ull << 53)

typedef struct import_item {
    size_t id_off, id_len, doc_off, doc_len;   /* in the chunk's arena */
} import_item;

typedef struct import_run {
    http_call *c;
    uint32_t db;
    import_item items[IMPORT_CHUNK_DOCS];
    store_op ops[IMPORT_CHUNK_DOCS + 1];
    size_t n;
    hanu_buf arena;
    uint64_t first_line;                 /* of the body */
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
    int rc = store_write(r->c->srv->store, r->db, r->ops, n, STORE_COND_NONE, 0, &txn, NULL);
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

static void write_summary(import_run *r, const docs_ndjson_reader *rd, hanu_buf *rest)
{
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

static void import_body(http_call *c, import_run *r, const h2o_iovec_t *ik, const uint8_t *fp)
{
    server *srv = c->srv;
    h2o_req_t *req = c->req;
    uint64_t first;
    if (!first_line_of(c, &first)) return;
    if (http_find_collection(c, 1, &r->db)) return;
    docs_ndjson_reader rd;
    docs_ndjson_init(&rd, req->entity.base ? req->entity.base : "", req->entity.len, first);
    r->first_line = first;
    hanu_buf doc = {0}, scratch = {0}, rest = {0}, idem = {0};
    const char *line;
    size_t len;
    int rc = HANU_OK;
    uint64_t chunk_from = first;
    while (rc == HANU_OK && docs_ndjson_next(&rd, &line, &len)) {
        char id[DOCS_ID_MAX + 1];
        size_t id_len;
        docs_error e;
        if (docs_ndjson_prepare(line, len, srv->limits.max_value, id, &id_len, http_new_id, srv, &doc, &scratch,
                                &e)) {
            add_error(r, rd.line, &e);
            continue;
        }
        /* A full chunk is written only once another document follows: the last one
           carries the idempotency record. */
        if (r->n == IMPORT_CHUNK_DOCS || r->arena.len + doc.len > IMPORT_CHUNK_BYTES) {
            rc = write_chunk(r, NULL);
            chunk_from = rd.line;
            if (rc != HANU_OK) break;
        }
        import_item *it = &r->items[r->n];
        it->id_off = r->arena.len;
        it->id_len = id_len;
        if (hanu_buf_append(&r->arena, id, id_len) || hanu_buf_append(&r->arena, doc.data, doc.len)) {
            rc = HANU_ERR_NOMEM;
            break;
        }
        it->doc_off = it->id_off + id_len;
        it->doc_len = doc.len;
        r->n++;
    }
    if (rc == HANU_OK) {
        write_summary(r, &rd, &rest);
        store_op extra, *xp = NULL;
        char ikey[DOCS_IDEM_STORE_KEY_MAX];
        if (ik) {
            http_idem_record(c, 200, fp, h2o_iovec_init(NULL, 0), &rest, &idem);
            extra = docs_idem_op(ikey, http_idem_store_key(c, ik, ikey), &idem);
            xp = &extra;
        }
        rc = write_chunk(r, xp);
    }
    if (rc == HANU_OK && r->last_txn) {
        http_reply_written(c, 200, r->last_txn, rest.data, rest.len, 0);
    } else if (rc == HANU_OK) {   /* nothing written: no document, no key */
        hanu_buf b = {0};
        hanu_buf_append(&b, "{\"txn\":0", 8);
        hanu_buf_append(&b, rest.data, rest.len);
        http_reply(c, 200, (const char *)b.data, b.len, 0);
        hanu_buf_free(&b);
    } else {
        /* Committed chunks stay: the message says how far it got. */
        int status = rc == HANU_ERR_STOPPED ? 503 : rc == HANU_ERR_TOO_LARGE || rc == HANU_ERR_INVALID ? 413 : 500;
        http_error(c, status, status == 503 ? "store_stopped" : status == 413 ? "too_large" : "internal",
                   "the chunk from line %llu was not written (%s); the %llu documents before it were imported",
                   (unsigned long long)chunk_from, hanu_status_str(rc), (unsigned long long)r->imported);
        if (status != 413) server_log_write_failure("http", "an import", rc);
    }
    hanu_buf_free(&doc);
    hanu_buf_free(&scratch);
    hanu_buf_free(&rest);
    hanu_buf_free(&idem);
}

void http_import(http_call *c)
{
    if (!http_write_allowed(c)) return;
    int bad;
    const h2o_iovec_t *ik = http_idem_header(c, &bad);
    if (bad) { http_error(c, 400, "invalid_request", "Idempotency-Key must be 1-128 bytes"); return; }
    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    if (ik) http_idem_fingerprint(c, fp);
    if (ik && http_idem_replay(c, ik, fp, 0)) return;
    import_run *r = calloc(1, sizeof *r);
    if (!r) { http_error(c, 500, "internal", "out of memory"); return; }
    r->c = c;
    import_body(c, r, ik, fp);
    hanu_buf_free(&r->arena);
    hanu_buf_free(&r->errors);
    free(r);
}
