/*
 * http_snapshot.c: POST /_admin/snapshot, the explicit trigger of a snapshot
 * (docs/BUCKET.md, "Snapshots"), and the snapshot part of /_status. A snapshot
 * takes seconds and needs the loop itself (the log is rotated on the loop
 * thread), so the request is handed to the snapshotter's thread and held here;
 * a timer polls for its end and answers with what it did.
 */
#include "http/http_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define SNAPSHOT_POLL_MS 20

typedef struct snapshot_wait {
    h2o_linklist_t link;
    http_call call;
    uint64_t ticket;
    struct snapshot_wait **guard;   /* in the request's pool; points back here until released */
} snapshot_wait;

static void on_req_gone(void *p)
{
    snapshot_wait *sw = *(snapshot_wait **)p;
    if (!sw) return;
    /* The client left: the snapshot goes on, nobody is answered. */
    h2o_linklist_unlink(&sw->link);
    free(sw);
}

static void release(snapshot_wait *sw)
{
    h2o_linklist_unlink(&sw->link);
    *sw->guard = NULL;   /* answering may free the request's pool */
}

static void answer(http_call *c, int rc, const snapshot_result *r, const char *err)
{
    if (rc != HANU_OK) {
        c->srv->errors++;
        http_error(c, rc == HANU_ERR_STOPPED ? 503 : 500, "snapshot_failed", "%s", err[0] ? err : hanu_status_str(rc));
        return;
    }
    hanu_buf b = { 0 };
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    json_write_key(&w, "manifest", 8);
    json_write_string(&w, r->manifest, strlen(r->manifest));
    const server_json_field f[] = {
        { "txn", r->txn }, { "index_txn", r->index_txn }, { "replay_sequence", r->replay_sequence },
        { "files", r->files }, { "files_uploaded", r->files_uploaded }, { "bytes", r->bytes },
        { "bytes_uploaded", r->bytes_uploaded }, { "rotate_us", r->rotate_us }, { "pin_ms", r->pin_ms },
        { "ms", r->ms },
        { "deleted_manifests", r->deleted_manifests }, { "deleted_files", r->deleted_files },
        { "deleted_segments", r->deleted_segments },
    };
    server_json_fields(&w, f, sizeof f / sizeof *f);
    json_write_object_end(&w);
    if (json_writer_status(&w) != HANU_OK) http_error(c, 500, "internal", "cannot build the answer");
    else http_send(c, 200, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

static void on_poll(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, snapshot_wait_entry, entry);
    h2o_linklist_t *anchor = &srv->snapshot_waits;
    for (h2o_linklist_t *n = anchor->next; n != anchor;) {
        snapshot_wait *sw = H2O_STRUCT_FROM_MEMBER(snapshot_wait, link, n);
        n = n->next;
        int rc;
        snapshot_result r;
        char err[512] = "";
        if (!snapshot_poll(srv->snapshotter, sw->ticket, &rc, &r, err, sizeof err)) continue;
        release(sw);
        http_call c = sw->call;
        free(sw);
        answer(&c, rc, &r, err);
    }
    if (!h2o_linklist_is_empty(anchor))
        h2o_timeout_link(srv->loop, &srv->snapshot_wait_timeout, &srv->snapshot_wait_entry);
}

void http_snapshot(http_call *c)
{
    server *srv = c->srv;
    if (c->token && !c->token->read_write) {
        http_error(c, 403, "forbidden", "a snapshot needs a read-write token");
        return;
    }
    if (!srv->snapshotter) {
        http_error(c, 409, "no_bucket", "snapshots go to the bucket: this server runs with --no-bucket");
        return;
    }
    if (store_last_txn(srv->store) == 0) {
        http_error(c, 409, "nothing_to_snapshot", "the data directory holds no record yet");
        return;
    }
    snapshot_wait *sw = malloc(sizeof *sw);
    if (!sw) { http_error(c, 500, "internal", "out of memory"); return; }
    *sw = (snapshot_wait){ .call = *c, .ticket = snapshot_request(srv->snapshotter) };
    sw->guard = h2o_mem_alloc_shared(&c->req->pool, sizeof *sw->guard, on_req_gone);
    *sw->guard = sw;
    h2o_linklist_insert(&srv->snapshot_waits, &sw->link);
    if (!h2o_timeout_is_linked(&srv->snapshot_wait_entry))
        h2o_timeout_link(srv->loop, &srv->snapshot_wait_timeout, &srv->snapshot_wait_entry);
}

void http_snapshot_start(server *srv)
{
    h2o_linklist_init_anchor(&srv->snapshot_waits);
    h2o_timeout_init(srv->loop, &srv->snapshot_wait_timeout, SNAPSHOT_POLL_MS);
    srv->snapshot_wait_entry.cb = on_poll;
}

void http_snapshot_stop(server *srv)
{
    if (!srv->snapshot_waits.next) return;   /* never started (HTTP off) */
    if (h2o_timeout_is_linked(&srv->snapshot_wait_entry)) h2o_timeout_unlink(&srv->snapshot_wait_entry);
    while (!h2o_linklist_is_empty(&srv->snapshot_waits)) {
        snapshot_wait *sw = H2O_STRUCT_FROM_MEMBER(snapshot_wait, link, srv->snapshot_waits.next);
        release(sw);
        http_call c = sw->call;
        free(sw);
        http_error(&c, 503, "shutting_down", "the server is shutting down");
    }
}

void http_snapshot_status(server *srv, json_writer *w)
{
    if (!srv->snapshotter) return;
    snapshot_stats st;
    snapshot_get_stats(srv->snapshotter, &st);
    pthread_mutex_lock(&srv->snap_mu);
    uint64_t loop_last = srv->snap_loop_us_last, loop_max = srv->snap_loop_us_max;
    pthread_mutex_unlock(&srv->snap_mu);
    json_write_key(w, "snapshot", 8);
    json_write_object_begin(w);
    const server_json_field f[] = {
        { "snapshots", st.snapshots }, { "failures", st.failures }, { "last_txn", st.last_txn },
        { "last_ms", st.last_ms }, { "bytes_uploaded", st.bytes_uploaded },
        { "every_segments", srv->opt.snapshot_segments }, { "interval_ms", srv->opt.snapshot_interval_ms },
        { "retain_ms", srv->opt.retain_ms == SNAPSHOT_RETAIN_FOREVER ? 0 : srv->opt.retain_ms },
        { "oldest_txn", st.oldest_txn }, { "oldest_ms", st.oldest_ms },
        { "loop_us_last", loop_last }, { "loop_us_max", loop_max },
    };
    server_json_fields(w, f, sizeof f / sizeof *f);
    json_write_object_end(w);
}
