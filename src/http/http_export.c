/*
 * http_export.c: POST /c/{col}/_export (docs/API.md, docs/BUCKET.md "Export"):
 * the collection's live documents as zstd-compressed JSON lines, one object in
 * the bucket, exports/{col}/{index_txn}-{UTC time}.jsonl.zst.
 *
 * The loop thread only checks the request and starts a thread; the thread waits
 * for the index to cover every write made before the request, takes the index
 * snapshot of the collection, reads each live document's stored bytes from the
 * store (one short store_get each, so writers are never held up), compresses
 * them into an unlinked temporary file in the data directory, maps that file
 * and puts it into the bucket (in parts on S3 when it passes the multipart
 * threshold). Memory stays bounded by the compressor's buffers: the object is
 * in the page cache, not on the heap. When the object is in the bucket the
 * thread hands the job back to the loop with a message, and the loop answers.
 */
#include "http/http_internal.h"
#include "hlog/hlog.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define EXPORT_MAX_RUNNING 2            /* exports at once; more get 429 */
#define EXPORT_INDEX_WAIT_MS 300000     /* longest wait for the index to catch up (a fresh
                                           bulk load of 200 000 documents took over 30 s) */
#define EXPORT_ZSTD_LEVEL 3
#define EXPORT_CHUNK (256u << 10)       /* documents gathered before each compression step */

typedef struct export_job {
    h2o_multithread_message_t done;     /* to the loop when finished */
    h2o_linklist_t link;                /* srv->exports->jobs (loop thread) */
    server *srv;
    http_call call;
    struct export_job **guard;          /* in the request's pool; NULL once the client left */
    pthread_t thread;
    uint32_t db;
    uint64_t want_txn;                  /* every write before the request */
    _Atomic int cancel;
    /* the outcome, written by the thread */
    int status;                         /* HTTP status */
    char code[32], msg[600];
    char key[BUCKET_KEY_MAX + 1];
    uint64_t docs, bytes, raw_bytes, txn, ms;
} export_job;

struct http_exports {
    h2o_multithread_receiver_t receiver;
    h2o_linklist_t jobs;
    size_t running;
};

static void job_fail(export_job *j, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void job_fail(export_job *j, int status, const char *code, const char *fmt, ...)
{
    j->status = status;
    snprintf(j->code, sizeof j->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->msg, sizeof j->msg, fmt, ap);
    va_end(ap);
}

/* ---- the export thread ---- */

typedef struct export_writer {
    ZSTD_CCtx *z;
    int fd;
    hanu_buf in, out;
    uint64_t written;                   /* compressed bytes in the file */
} export_writer;

/* Compresses what is gathered in w->in (all of it, and the frame's end when last). */
static int writer_flush(export_writer *w, int last)
{
    ZSTD_inBuffer in = { w->in.data, w->in.len, 0 };
    for (;;) {
        ZSTD_outBuffer out = { w->out.data, w->out.cap, 0 };
        size_t left = ZSTD_compressStream2(w->z, &out, &in, last ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(left)) return HANU_ERR_NOMEM;
        if (out.pos && hanu_write_full(w->fd, w->out.data, out.pos) != HANU_OK) return HANU_ERR_IO;
        w->written += out.pos;
        if (last ? left == 0 : in.pos == in.size) break;
    }
    w->in.len = 0;
    return HANU_OK;
}

/* Appends one document as one line: a stored document is valid JSON, so a raw
   CR or LF in it can only be whitespace between tokens and becomes a space. */
static int writer_add(export_writer *w, const uint8_t *doc, size_t len)
{
    if (hanu_buf_reserve(&w->in, len + 1) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *p = w->in.data + w->in.len;
    for (size_t i = 0; i < len; i++) p[i] = doc[i] == '\n' || doc[i] == '\r' ? ' ' : doc[i];
    p[len] = '\n';
    w->in.len += len + 1;
    return w->in.len >= EXPORT_CHUNK ? writer_flush(w, 0) : HANU_OK;
}

/* A temporary file nobody can see, in the data directory (the object can be
   larger than memory, and /tmp may be small). */
static int open_temp(server *srv)
{
    const char *dir = srv->opt.store.data_dir ? srv->opt.store.data_dir : ".";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    char path[4096];
    snprintf(path, sizeof path, "%s/.export-XXXXXX", dir);
    fd = mkstemp(path);
    if (fd >= 0) unlink(path);
    return fd;
}

/* Writes every live document of the snapshot (at most none when snap is NULL). */
static int write_documents(export_job *j, const index_snapshot *snap, export_writer *w)
{
    store *st = j->srv->store;
    hanu_buf doc = {0};
    int rc = HANU_OK;
    /* Millions of documents take minutes: a line every 10 s in the log, and the
       counts in _status (exports) for `hanudb export`'s own progress line. */
    uint64_t docs_at_most = 0;
    for (uint32_t s = 0; snap && s < snap->nsegments; s++) docs_at_most += index_segment_docs(snap->segments[s].seg);
    char what[STORE_DB_NAME_MAX + 40];
    snprintf(what, sizeof what, "exporting collection \"%s\"", j->call.col);
    hlog_progress progress;
    hlog_progress_begin(&progress, "export", what, "documents", 0, docs_at_most);
    char field[DOCS_EXPIRE_FIELD_MAX + 1];
    int expiry = http_expire_field(&j->call, field);
    uint64_t now = hanu_wall_ms();
    for (uint32_t s = 0; snap && s < snap->nsegments && rc == HANU_OK; s++) {
        const index_segment *seg = snap->segments[s].seg;
        uint32_t n = index_segment_docs(seg);
        for (uint32_t ord = 0; ord < n && rc == HANU_OK; ord++) {
            if (!index_snapshot_live(snap, s, ord)) continue;
            if ((ord & 1023) == 0 && atomic_load(&j->cancel)) return HANU_ERR_STOPPED;
            size_t id_len;
            const char *id = index_segment_doc_id(seg, ord, &id_len);
            uint64_t token;
            hanu_buf_reset(&doc);
            int got = store_get(st, j->db, id, id_len, &doc, &token);
            if (got == HANU_ERR_NOT_FOUND) continue;   /* deleted since the snapshot */
            if (got == HANU_OK && expiry && docs_expired((const char *)doc.data, doc.len, field, now)) continue;
            if (got != HANU_OK) rc = got;
            else if ((rc = writer_add(w, doc.data, doc.len)) == HANU_OK) {
                j->docs++;
                j->raw_bytes += doc.len + 1;
                atomic_fetch_add(&j->srv->export_docs, 1);
                atomic_fetch_add(&j->srv->export_bytes, doc.len + 1);
                hlog_progress_update(&progress, j->raw_bytes, j->docs);
            }
        }
    }
    hlog_progress_clear(&progress);
    hanu_buf_free(&doc);
    return rc == HANU_OK ? writer_flush(w, 1) : rc;
}

/* exports/{col}/{txn}-{YYYYMMDDTHHMMSS.mmmZ}.jsonl.zst */
static void export_key(export_job *j)
{
    uint64_t now = hanu_wall_ms();
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y%m%dT%H%M%S", &tm);
    snprintf(j->key, sizeof j->key, "exports/%s/%llu-%s.%03uZ.jsonl.zst", j->call.col, (unsigned long long)j->txn,
             when, (unsigned)(now % 1000));
}

/* Puts the file's bytes (mapped, not copied) as the object. */
static void put_file(export_job *j, int fd, uint64_t size)
{
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    if (size && map == MAP_FAILED) {
        job_fail(j, 500, "internal", "cannot map the export's temporary file");
        return;
    }
    export_key(j);
    char err[512] = "";
    int rc = bucket_put_if_absent(j->srv->bucket, j->key, size ? map : "", (size_t)size, NULL, err, sizeof err);
    if (size) munmap(map, size);
    if (rc == HANU_OK) j->bytes = size;
    else if (rc == HANU_ERR_EXISTS) job_fail(j, 409, "export_exists", "%s is already in the bucket", j->key);
    else job_fail(j, 502, "bucket_failed", "cannot put %s into the bucket: %s", j->key, err[0] ? err : hanu_status_str(rc));
}

static int first_entry(void *ctx, const store_change *c)
{
    *(uint64_t *)ctx = c->txn;
    return 1;
}

uint64_t http_next_record_txn(store *st, uint64_t from)
{
    store_feed *f;
    uint64_t txn = 0;
    size_t got = 0;
    if (store_feed_open(st, from, &f) != HANU_OK) return from;   /* cannot tell: wait for from */
    if (store_feed_next(f, 1, first_entry, &txn, &got) != HANU_OK) txn = from;
    store_feed_close(f);
    return got ? txn : 0;
}

/* Waits until the index holds every record up to want_txn: OK, BUSY after
   EXPORT_INDEX_WAIT_MS, STOPPED (the indexer failed) or INVALID (cancelled). The
   target is the last record at or below want_txn, not want_txn itself: after a
   crash the numbering jumps ahead, and txns no record has are never indexed. */
static int wait_for_index(export_job *j)
{
    store *st = j->srv->store;
    indexer *ix = j->srv->indexer;
    int rc = HANU_OK;
    for (uint32_t waited = 0; waited < EXPORT_INDEX_WAIT_MS; waited += 200) {   /* slices: shutdown */
        if (atomic_load(&j->cancel)) return HANU_ERR_INVALID;
        uint64_t itxn = indexer_txn(ix);
        if (itxn >= j->want_txn) return HANU_OK;
        uint64_t next = http_next_record_txn(st, itxn + 1);
        if (next == 0 || next > j->want_txn) return HANU_OK;
        rc = indexer_wait_txn(ix, next, 200);
        if (rc != HANU_OK && rc != HANU_ERR_BUSY) return rc;
    }
    return HANU_ERR_BUSY;
}

static void export_collection_run(export_job *j);

static void export_collection(export_job *j)
{
    server *srv = j->srv;
    atomic_fetch_add(&srv->exports_running, 1);
    export_collection_run(j);
    atomic_fetch_sub(&srv->exports_running, 1);
}

static void export_collection_run(export_job *j)
{
    server *srv = j->srv;
    int rc = wait_for_index(j);
    if (rc == HANU_ERR_INVALID) {
        job_fail(j, 503, "shutting_down", "the server is shutting down");
        return;
    }
    if (rc == HANU_ERR_BUSY) {
        job_fail(j, 503, "index_behind", "the index did not reach txn %llu within %u ms",
                 (unsigned long long)j->want_txn, EXPORT_INDEX_WAIT_MS);
        return;
    }
    if (rc != HANU_OK) {
        job_fail(j, 503, "index_failed", "the indexer stopped after a failed write; restart the server");
        return;
    }
    j->txn = indexer_txn(srv->indexer);   /* read before the snapshot: the snapshot covers it */
    index_snapshot *snap = index_snapshot_acquire(srv->indexer, j->db);
    if (snap) j->txn = snap->index_txn;
    export_writer w = { .z = ZSTD_createCCtx(), .fd = open_temp(srv) };
    if (!w.z || w.fd < 0 || hanu_buf_reserve(&w.out, ZSTD_CStreamOutSize()) != HANU_OK) {
        job_fail(j, 500, "internal", "cannot start the export: %s", w.fd < 0 ? "no temporary file in the data "
                 "directory" : "out of memory");
    } else {
        ZSTD_CCtx_setParameter(w.z, ZSTD_c_compressionLevel, EXPORT_ZSTD_LEVEL);
        w.out.cap = ZSTD_CStreamOutSize();
        rc = write_documents(j, snap, &w);
        if (rc == HANU_ERR_STOPPED) job_fail(j, 503, "shutting_down", "the server is shutting down");
        else if (rc != HANU_OK) job_fail(j, 500, "internal", "cannot write the export: %s", hanu_status_str(rc));
        else put_file(j, w.fd, w.written);
    }
    if (snap) index_snapshot_release(snap);
    if (w.fd >= 0) close(w.fd);
    ZSTD_freeCCtx(w.z);
    hanu_buf_free(&w.in);
    hanu_buf_free(&w.out);
}

static void *export_thread(void *arg)
{
    export_job *j = arg;
    uint64_t t0 = hanu_now_ns();
    j->status = 200;
    export_collection(j);
    j->ms = (hanu_now_ns() - t0) / 1000000;
    h2o_multithread_send_message(&j->srv->exports->receiver, &j->done);
    return NULL;
}

/* ---- the loop thread ---- */

static void on_req_gone(void *p)
{
    export_job *j = *(export_job **)p;
    if (j) j->guard = NULL;   /* nobody to answer; the thread finishes its object anyway */
}

static void answer(export_job *j)
{
    if (!j->guard) return;
    *j->guard = NULL;   /* answering may free the request's pool */
    j->guard = NULL;
    http_call *c = &j->call;
    if (j->status != 200) {
        http_error(c, j->status, j->code, "%s", j->msg);
        return;
    }
    hanu_buf b = {0};
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "key", 3);
    json_write_string(&w, j->key, strlen(j->key));
    const server_json_field f[] = {
        { "docs", j->docs }, { "bytes", j->bytes }, { "raw_bytes", j->raw_bytes }, { "txn", j->txn }, { "ms", j->ms },
    };
    server_json_fields(&w, f, sizeof f / sizeof *f);
    json_write_object_end(&w);
    http_send(c, 200, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

static void finish(server *srv, export_job *j)
{
    pthread_join(j->thread, NULL);
    h2o_linklist_unlink(&j->link);
    srv->exports->running--;
    answer(j);
    free(j);
}

static void on_export_messages(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages)
{
    (void)receiver;
    while (!h2o_linklist_is_empty(messages)) {
        h2o_multithread_message_t *m = H2O_STRUCT_FROM_MEMBER(h2o_multithread_message_t, link, messages->next);
        h2o_linklist_unlink(&m->link);
        export_job *j = H2O_STRUCT_FROM_MEMBER(export_job, done, m);
        finish(j->srv, j);
    }
}

/* An empty body, or an empty JSON object (options may come later). */
static int body_is_empty(h2o_req_t *req)
{
    const char *p = req->entity.base, *end = p ? p + req->entity.len : NULL;
    if (!p) return 1;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    if (p == end) return 1;
    if (*p++ != '{') return 0;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    if (p == end || *p++ != '}') return 0;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p == end;
}

void http_export(http_call *c)
{
    server *srv = c->srv;
    if (!http_token_allows(c, c->col, 1)) {
        http_error(c, 403, "forbidden", "exporting writes to the bucket: this token may not write collection \"%s\"",
                   c->col);
        return;
    }
    if (!body_is_empty(c->req)) {
        http_error(c, 400, "invalid_request", "_export takes no options: send no body or {}");
        return;
    }
    if (c->col[0] == '.') {   /* bucket key components never start with '.' */
        http_error(c, 400, "invalid_collection", "a collection whose name starts with '.' cannot be exported");
        return;
    }
    uint32_t db;
    if (http_find_collection(c, 0, &db)) return;
    if (!srv->bucket) {
        http_error(c, 501, "no_bucket", "export writes to the bucket: start the server with --bucket URL");
        return;
    }
    if (srv->stopping) {
        http_error(c, 503, "shutting_down", "the server is shutting down");
        return;
    }
    if (!srv->exports) {
        http_error(c, 500, "internal", "exports did not start (out of memory)");
        return;
    }
    if (srv->exports->running >= EXPORT_MAX_RUNNING) {
        http_error(c, 429, "too_many_exports", "%d exports are running; try again when one is done",
                   EXPORT_MAX_RUNNING);
        return;
    }
    export_job *j = calloc(1, sizeof *j);
    if (!j) {
        http_error(c, 500, "internal", "out of memory");
        return;
    }
    j->srv = srv;
    j->call = *c;
    j->db = db;
    j->want_txn = store_last_txn(srv->store);
    j->guard = h2o_mem_alloc_shared(&c->req->pool, sizeof *j->guard, on_req_gone);
    *j->guard = j;
    if (pthread_create(&j->thread, NULL, export_thread, j) != 0) {
        *j->guard = NULL;
        free(j);
        http_error(c, 503, "busy", "cannot start a thread for the export");
        return;
    }
    h2o_linklist_insert(&srv->exports->jobs, &j->link);
    srv->exports->running++;
}

void http_export_start(server *srv)
{
    struct http_exports *ex = calloc(1, sizeof *ex);
    if (!ex) return;   /* http_export answers 500 without it */
    h2o_linklist_init_anchor(&ex->jobs);
    h2o_multithread_register_receiver(srv->queue, &ex->receiver, on_export_messages);
    srv->exports = ex;
}

void http_export_stop(server *srv)
{
    struct http_exports *ex = srv->exports;
    if (!ex) return;
    for (h2o_linklist_t *n = ex->jobs.next; n != &ex->jobs; n = n->next)
        atomic_store(&H2O_STRUCT_FROM_MEMBER(export_job, link, n)->cancel, 1);
    /* Each thread finishes (a put in flight completes) and says so on the queue. */
    while (!h2o_linklist_is_empty(&ex->jobs)) h2o_evloop_run(srv->loop, 10);
    h2o_multithread_unregister_receiver(srv->queue, &ex->receiver);
    free(ex);
    srv->exports = NULL;
}
