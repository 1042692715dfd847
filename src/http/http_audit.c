/*
 * http_audit.c: POST /_admin/audit runs replica/audit.h on the server's bucket
 * (docs/API.md, "Audit"), on a thread of its own at background priority, one at
 * a time; the request is answered at once (202) and `bucket.audit` of /_status
 * shows its progress and its end. An audit only reads the bucket, so a follower
 * runs it too. Shutdown stops a running audit between two objects and joins it.
 */
#include "http/http_internal.h"
#include "replica/audit.h"
#include "hlog/hlog.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { AUDIT_NEVER, AUDIT_RUNNING, AUDIT_PASSED, AUDIT_FAILED };
static const char *const state_names[] = { "never", "running", "ok", "failed" };

typedef struct audit_job audit_job;
struct audit_job {
    pthread_mutex_t mu;           /* guards everything below but stop */
    _Atomic int stop;
    pthread_t thread;
    int thread_live;              /* thread not joined yet (it may have finished) */
    bucket *bucket;               /* of the running audit */
    int state;
    uint64_t started_ms, finished_ms;
    audit_progress progress;
    audit_result result;          /* of the last finished audit (its keys freed) */
};

static void on_progress(void *ctx, const audit_progress *p)
{
    audit_job *a = ctx;
    pthread_mutex_lock(&a->mu);
    a->progress = *p;
    pthread_mutex_unlock(&a->mu);
}

static void *run(void *arg)
{
    audit_job *a = arg;
    hanu_thread_background(10);   /* it reads the whole bucket: the loop and the sealer come first */
    audit_options o = { .progress = on_progress, .ctx = a, .stop = &a->stop };
    audit_result r;
    int status = audit_bucket(a->bucket, &o, &r);
    audit_result_free(&r);   /* the keys: only the CLI's twin check reads them */
    if (status == AUDIT_OK)
        hlog_info("audit", "bucket audit ok: %llu segments, %u manifests, %llu bytes",
                  (unsigned long long)r.segments, r.snaps.manifests,
                  (unsigned long long)(r.segment_bytes + r.snaps.bytes));
    else if (status != AUDIT_STOPPED)
        hlog_error("audit", "bucket audit failed: %s%s%s", r.object, r.object[0] ? ": " : "", r.reason);
    pthread_mutex_lock(&a->mu);
    a->result = r;
    a->progress.segments_checked = r.segments;
    a->progress.manifests_checked = r.snaps.manifests;
    a->progress.bytes_read = r.segment_bytes + r.snaps.bytes;
    a->state = status == AUDIT_OK ? AUDIT_PASSED : AUDIT_FAILED;
    a->finished_ms = hanu_wall_ms();
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* The "audit" object: the state, its times, how far it got, the first problem. */
static void write_state(audit_job *a, json_writer *w)
{
    pthread_mutex_lock(&a->mu);
    int state = a->state;
    uint64_t started = a->started_ms, finished = a->finished_ms;
    audit_progress p = a->progress;
    uint64_t segments_total = p.segments_total, records = a->result.records, files = a->result.snaps.files;
    char object[BUCKET_KEY_MAX + 1], reason[AUDIT_REASON_MAX];
    snprintf(object, sizeof object, "%s", a->result.object);
    snprintf(reason, sizeof reason, "%s", a->result.reason);
    pthread_mutex_unlock(&a->mu);
    json_write_object_begin(w);
    json_write_key(w, "state", 5);
    json_write_string(w, state_names[state], strlen(state_names[state]));
    uint64_t ms = !started ? 0 : (state == AUDIT_RUNNING ? hanu_wall_ms() : finished) - started;
    const server_json_field f[] = {
        { "started_ms", started }, { "finished_ms", state == AUDIT_RUNNING ? 0 : finished }, { "ms", ms },
        { "segments", p.segments_checked }, { "segments_total", segments_total },
        { "manifests", p.manifests_checked }, { "files", state == AUDIT_RUNNING ? 0 : files },
        { "records", state == AUDIT_RUNNING ? 0 : records }, { "bytes", p.bytes_read },
    };
    server_json_fields(w, f, sizeof f / sizeof *f);
    if (state == AUDIT_FAILED) {
        json_write_key(w, "problem", 7);
        json_write_object_begin(w);
        json_write_key(w, "object", 6);
        json_write_string(w, object, strlen(object));
        json_write_key(w, "reason", 6);
        json_write_string(w, reason, strlen(reason));
        json_write_object_end(w);
    }
    json_write_object_end(w);
}

void http_audit(http_call *c)
{
    server *srv = c->srv;
    audit_job *a = srv->audit;
    if (c->token && !c->token->read_write) {
        http_error(c, 403, "forbidden", "an audit needs a read-write token");
        return;
    }
    if (!srv->bucket) {
        http_error(c, 409, "no_bucket", "the audit reads the bucket: this server runs with --no-bucket");
        return;
    }
    pthread_mutex_lock(&a->mu);
    if (a->state == AUDIT_RUNNING) {
        pthread_mutex_unlock(&a->mu);
        http_error(c, 409, "audit_running", "an audit of the bucket is running: /_status shows its progress");
        return;
    }
    pthread_mutex_unlock(&a->mu);
    if (a->thread_live) {   /* the last audit's thread has finished: its state says so */
        pthread_join(a->thread, NULL);
        a->thread_live = 0;
    }
    pthread_mutex_lock(&a->mu);
    a->state = AUDIT_RUNNING;
    a->bucket = srv->bucket;
    a->started_ms = hanu_wall_ms();
    a->finished_ms = 0;
    a->progress = (audit_progress){ .segments_total = 0 };
    memset(&a->result, 0, sizeof a->result);
    pthread_mutex_unlock(&a->mu);
    if (pthread_create(&a->thread, NULL, run, a) != 0) {
        pthread_mutex_lock(&a->mu);
        a->state = AUDIT_NEVER;
        a->started_ms = 0;
        pthread_mutex_unlock(&a->mu);
        http_error(c, 503, "no_thread", "cannot start the audit's thread");
        return;
    }
    a->thread_live = 1;
    hlog_info("audit", "bucket audit started");
    hanu_buf b = { 0 };
    json_writer w;
    json_writer_init(&w, &b);
    write_state(a, &w);
    if (json_writer_status(&w) != HANU_OK) http_error(c, 500, "internal", "cannot build the answer");
    else http_send(c, 202, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

int http_audit_start(server *srv)
{
    audit_job *a = calloc(1, sizeof *a);
    if (!a) return HANU_ERR_NOMEM;
    pthread_mutex_init(&a->mu, NULL);
    srv->audit = a;
    return HANU_OK;
}

void http_audit_stop(server *srv)
{
    audit_job *a = srv->audit;
    if (!a || !a->thread_live) return;
    atomic_store(&a->stop, 1);   /* it ends between two objects, before the bucket closes */
    pthread_join(a->thread, NULL);
    a->thread_live = 0;
}

void http_audit_free(server *srv)
{
    audit_job *a = srv->audit;
    if (!a) return;
    http_audit_stop(srv);
    pthread_mutex_destroy(&a->mu);
    free(a);
    srv->audit = NULL;
}

void http_audit_status(server *srv, json_writer *w)
{
    if (!srv->audit || !srv->bucket) return;
    json_write_key(w, "audit", 5);
    write_state(srv->audit, w);
}

int http_audit_last(server *srv, int *running)
{
    audit_job *a = srv->audit;
    if (!a) { *running = 0; return -1; }
    pthread_mutex_lock(&a->mu);
    int state = a->state, passed = a->result.status == AUDIT_OK;
    *running = state == AUDIT_RUNNING;
    int finished = a->finished_ms != 0;
    pthread_mutex_unlock(&a->mu);
    return !finished ? -1 : passed;
}
