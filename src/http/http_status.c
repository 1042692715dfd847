/*
 * http_status.c: what the server says about itself: /_status (JSON) and
 * /metrics (Prometheus text, 0.0.4), the one place where every face's
 * counters are shown: HTTP requests by route and status and their latency,
 * the key-value face, the store and its watermarks, the waiters, and the
 * standard process_* families read from /proc. Every family has HELP and
 * TYPE and passes `promtool check metrics`.
 */
#include "http/http_internal.h"
#include "hlog/hlog.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

_Static_assert(ROUTE_COUNT <= HTTP_ROUTE_SLOTS, "the server's counters need a slot for every route");

static const char *route_names[ROUTE_COUNT] = {
    "health", "status", "metrics", "collections", "collection", "doc_get", "doc_put",
    "doc_post", "doc_delete", "batch", "preflight", "other", "find", "search", "aggs", "doc_list", "snapshot", "export",
    "doc_patch", "doc_update", "update", "delete_query", "import", "doc_ndjson", "audit",
};
/* Every status the server answers has a slot; the last one counts anything else
   (h2o's own answers), shown as status="other". */
static const int status_codes[HTTP_STATUS_SLOTS] = {
    200, 201, 202, 204, 304, 308, 400, 401, 403, 404, 405, 408, 409, 412, 413, 414, 415, 421, 422, 429,
    431, 500, 501, 502, 503, 0,
};
static const uint64_t latency_le_us[HTTP_LATENCY_BUCKETS] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
    1000000, 2500000, 5000000,
};

void http_answered(http_call *c, int status, size_t bytes)
{
    http_count_request(c->srv, c->route, status, c->start_ns);
    if (!hlog_access_enabled()) return;
    /* The token's name is its scope (a hash), never the token. */
    char name[24] = "";
    if (c->token) snprintf(name, sizeof name, "t:%s", c->token->scope);
    h2o_req_t *req = c->req;
    hlog_access(req->input.method.base, req->input.method.len, req->input.path.base, req->input.path.len, status,
                bytes, (hanu_now_ns() - c->start_ns) / 1000, name);
}

void http_count_request(server *srv, int route, int status, uint64_t start_ns)
{
    int slot = HTTP_STATUS_SLOTS - 1;
    for (int i = 0; i < HTTP_STATUS_SLOTS - 1 && status_codes[i]; i++)
        if (status_codes[i] == status) { slot = i; break; }
    srv->http_requests[route][slot]++;
    uint64_t us = (hanu_now_ns() - start_ns) / 1000;
    int b = 0;
    while (b < HTTP_LATENCY_BUCKETS && us > latency_le_us[b]) b++;
    if (b < HTTP_LATENCY_BUCKETS) srv->http_latency[route][b]++;   /* beyond: only in +Inf */
    srv->http_latency[route][HTTP_LATENCY_BUCKETS] += us;
    srv->http_latency_count[route]++;
}

/* ---- /_status ---- */

/* A "Name:  N kB" line of /proc/self/status, in bytes (0 when missing). */
static uint64_t status_kb(const char *text, const char *name)
{
    const char *p = strstr(text, name);
    return p ? strtoull(p + strlen(name), NULL, 10) * 1024 : 0;
}

/* The process's memory as the kernel counts it: resident now, its peak, and the
   anonymous part (the heap and maps; the rest is file pages the kernel may drop). */
static void process_memory(json_writer *w)
{
    char text[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return;
    text[n] = 0;
    json_write_key(w, "process", 7);
    json_write_object_begin(w);
    const server_json_field f[] = {
        { "rss_bytes", status_kb(text, "\nVmRSS:") }, { "peak_rss_bytes", status_kb(text, "\nVmHWM:") },
        { "anon_bytes", status_kb(text, "\nRssAnon:") },
    };
    server_json_fields(w, f, sizeof f / sizeof *f);
    json_write_object_end(w);
}

void http_status_reply(http_call *c)
{
    server *srv = c->srv;
    store_stats st;
    store_get_stats(srv->store, &st);
    hanu_buf b = {0};
    json_writer w;
    json_writer_init(&w, &b);
    json_write_object_begin(&w);
    const server_json_field f[] = {
        { "txn", st.last_txn }, { "durable_txn", st.durable_txn }, { "floor_txn", store_floor(srv->store) },
        { "collections", st.databases }, { "keys", st.keys }, { "disk_bytes", st.disk_bytes },
        { "memory_bytes", st.memory_bytes }, { "log_bytes_written", st.log_bytes_written },
        { "syncs", st.syncs }, { "parked_writes", srv->parked_count }, { "files", st.files },
        { "compactions", st.compactions }, { "uptime_s", (hanu_wall_ms() - srv->started_ms) / 1000 },
        { "expired_docs", srv->expired_docs },
    };
    server_json_fields(&w, f, sizeof f / sizeof *f);
    json_write_key(&w, "store_failed", 12);
    json_write_bool(&w, store_failed(srv->store));
    process_memory(&w);
    /* Every projection that holds the compaction floor down, by name. */
    json_write_key(&w, "watermarks", 10);
    json_write_object_begin(&w);
    store_watermark wm[STORE_MAX_WATERMARKS];
    size_t nw = store_watermark_list(srv->store, wm, STORE_MAX_WATERMARKS);
    for (size_t i = 0; i < nw && i < STORE_MAX_WATERMARKS; i++) server_json_u64(&w, wm[i].name, wm[i].txn);
    json_write_object_end(&w);
    if (srv->sealer) {   /* the bucket: what is sealed there and what it cost */
        sealer_stats ss;
        sealer_get_stats(srv->sealer, &ss);
        bucket_counters bc;
        bucket_get_counters(srv->bucket, &bc);
        json_write_key(&w, "bucket", 6);
        json_write_object_begin(&w);
        const server_json_field bf[] = {
            { "class_a", ss.class_a }, { "class_b", ss.class_b }, { "sealed_txn", ss.sealed_txn },
            { "segment", ss.sequence }, { "segments_put", ss.segments }, { "bytes_put", ss.bytes },
            { "failed_puts", ss.failed_puts }, { "last_upload_ms", ss.last_upload_ms },
            { "retries", bc.retries }, { "bytes_up", bc.bytes_up },
        };
        server_json_fields(&w, bf, sizeof bf / sizeof *bf);
        json_write_key(&w, "sealer_ok", 9);
        json_write_bool(&w, ss.status == HANU_OK);
        json_write_key(&w, "exports", 7);   /* progress of POST /c/{col}/_export */
        json_write_object_begin(&w);
        const server_json_field ef[] = {
            { "running", atomic_load(&srv->exports_running) }, { "documents", atomic_load(&srv->export_docs) },
            { "bytes", atomic_load(&srv->export_bytes) },
        };
        server_json_fields(&w, ef, sizeof ef / sizeof *ef);
        json_write_object_end(&w);
        http_snapshot_status(srv, &w);
        http_audit_status(srv, &w);
        if (srv->rebuilt) {   /* this start rebuilt the data directory from the bucket */
            json_write_key(&w, "rebuild", 7);
            json_write_object_begin(&w);
            const server_json_field rf[] = {
                { "ms", srv->rebuild.ms }, { "fetch_ms", srv->rebuild.fetch_ms },
                { "replay_ms", srv->rebuild.replay_ms }, { "cpu_ms", srv->rebuild.cpu_ms },
                { "records", srv->rebuild.records },
                { "segments", srv->rebuild.segments }, { "bytes", srv->rebuild.bytes },
                { "last_txn", srv->rebuild.last_txn }, { "next_txn", srv->rebuild.next_txn },
            };
            server_json_fields(&w, rf, sizeof rf / sizeof *rf);
            json_write_object_end(&w);
        }
        if (bucket_twin_side(srv->bucket, 0)) {   /* twin buckets: each side's own requests */
            json_write_key(&w, "twin", 4);
            json_write_array_begin(&w);
            for (int side = 0; side < 2; side++) {
                bucket *one = bucket_twin_side(srv->bucket, side);
                bucket_counters bc;
                bucket_get_counters(one, &bc);
                json_write_object_begin(&w);
                json_write_key(&w, "url", 3);
                json_write_string(&w, bucket_url(one), strlen(bucket_url(one)));
                const server_json_field tf[] = { { "class_a", bc.class_a }, { "class_b", bc.class_b },
                                                 { "retries", bc.retries } };
                server_json_fields(&w, tf, sizeof tf / sizeof *tf);
                json_write_object_end(&w);
            }
            json_write_array_end(&w);
        }
        json_write_object_end(&w);
    } else if (srv->bucket && srv->audit) {   /* a follower reads the bucket, seals nothing: only its audit */
        json_write_key(&w, "bucket", 6);
        json_write_object_begin(&w);
        http_audit_status(srv, &w);
        json_write_object_end(&w);
    }
    server_role_status(srv, &w);
    http_index_status(srv, &w);
    json_write_object_end(&w);
    if (json_writer_status(&w) != HANU_OK) http_error(c, 500, "internal", "cannot build the status");
    else http_reply(c, 200, (const char *)b.data, b.len, 0);
    hanu_buf_free(&b);
}

/* ---- /metrics ---- */

static void text(hanu_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text(hanu_buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) hanu_buf_append(b, line, HANU_MIN((size_t)n, sizeof line - 1));
}

/* The HELP and TYPE lines every family starts with. */
static void family(hanu_buf *b, const char *name, const char *type, const char *help)
{
    text(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family of one sample without labels. */
static void scalar(hanu_buf *b, const char *name, const char *type, const char *help, uint64_t v)
{
    family(b, name, type, help);
    text(b, "%s %llu\n", name, (unsigned long long)v);
}

static void scalar_double(hanu_buf *b, const char *name, const char *type, const char *help, double v)
{
    family(b, name, type, help);
    text(b, "%s %.6f\n", name, v);
}

static void http_families(hanu_buf *b, server *srv)
{
    family(b, "hanudb_http_requests_total", "counter", "HTTP requests by route and status.");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int s = 0; s < HTTP_STATUS_SLOTS; s++)
            if (srv->http_requests[r][s] && status_codes[s])
                text(b, "hanudb_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", route_names[r],
                     status_codes[s], (unsigned long long)srv->http_requests[r][s]);
            else if (srv->http_requests[r][s])
                text(b, "hanudb_http_requests_total{route=\"%s\",status=\"other\"} %llu\n", route_names[r],
                     (unsigned long long)srv->http_requests[r][s]);
    family(b, "hanudb_http_request_duration_seconds", "histogram",
           "Time from request to answer, including the wait for durability.");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        if (!srv->http_latency_count[r]) continue;
        uint64_t cum = 0;
        for (int i = 0; i < HTTP_LATENCY_BUCKETS; i++) {
            cum += srv->http_latency[r][i];
            text(b, "hanudb_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                 route_names[r], (double)latency_le_us[i] / 1e6, (unsigned long long)cum);
        }
        text(b, "hanudb_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
             route_names[r], (unsigned long long)srv->http_latency_count[r]);
        text(b, "hanudb_http_request_duration_seconds_sum{route=\"%s\"} %g\n", route_names[r],
             (double)srv->http_latency[r][HTTP_LATENCY_BUCKETS] / 1e6);
        text(b, "hanudb_http_request_duration_seconds_count{route=\"%s\"} %llu\n", route_names[r],
             (unsigned long long)srv->http_latency_count[r]);
    }
    scalar(b, "hanudb_http_parked_writes", "gauge", "HTTP answers to writes held until their watermark.",
           srv->parked_count);
    scalar(b, "hanudb_idempotency_keys_expired_total", "counter",
           "Idempotency keys deleted by the background sweep after their time.", srv->idempotency_expired);
    scalar(b, "hanudb_expired_documents_total", "counter",
           "Documents deleted by the expiry sweep (collections with expire_after_field).", srv->expired_docs);
}

static void kv_families(hanu_buf *b, server *srv)
{
    scalar(b, "hanudb_kv_requests_total", "counter", "Key-value protocol requests.", srv->requests);
    scalar(b, "hanudb_errors_total", "counter",
           "Answers that were errors, key-value and HTTP (status 400 and above).", srv->errors);
    scalar(b, "hanudb_kv_connections", "gauge", "Open key-value protocol connections.", srv->nconns);
    scalar(b, "hanudb_kv_connections_total", "counter", "Key-value protocol connections accepted.",
           srv->connections_total);
    scalar(b, "hanudb_waiters", "gauge",
           "Held answers: HTTP answers and key-value connections waiting for a watermark.", srv->waits.count);
}

/* Replication: the role, and a follower's position and lag (docs/REPLICATION.md). */
static void role_families(hanu_buf *b, server *srv)
{
    family(b, "hanudb_role", "gauge", "1 for this node's role: leader, follower or standby.");
    text(b, "hanudb_role{role=\"%s\"} 1\n", server_role_name(srv));
    if (!srv->follower) return;
    follower_stats fs;
    follower_get_stats(srv->follower, &fs);
    scalar(b, "hanudb_follower_txn", "gauge", "Last txn applied from the bucket's chain.", fs.txn);
    scalar(b, "hanudb_follower_segment", "gauge", "Sequence of the last segment applied.", fs.segment);
    scalar(b, "hanudb_follower_lag_txns", "gauge", "Txns the leader announced in its lease and this node "
           "has not applied.", server_follower_lag_txns(srv, &fs));
    scalar_double(b, "hanudb_follower_lag_seconds", "gauge", "Time from sealing to applying of the last "
                  "segment applied.", (double)fs.lag_ms / 1000.0);
    scalar(b, "hanudb_follower_polls_total", "counter", "Polls of the bucket's chain.", fs.polls);
    scalar(b, "hanudb_follower_poll_errors_total", "counter", "Polls that failed.", fs.poll_errors);
    scalar(b, "hanudb_follower_records_total", "counter", "Records replayed from the bucket.", fs.records);
    scalar(b, "hanudb_follower_behind_retention", "gauge", "1 when the segments this node needs next were "
           "removed by retention: it stops and re-boots from the newest snapshot.", (uint64_t)fs.behind_retention);
}

static void store_families(hanu_buf *b, server *srv)
{
    store_stats st;
    store_get_stats(srv->store, &st);
    scalar(b, "hanudb_txn", "gauge", "Last txn handed out.", st.last_txn);
    scalar(b, "hanudb_durable_txn", "gauge", "Every txn up to it is fdatasync'd.", st.durable_txn);
    scalar(b, "hanudb_log_bytes_written_total", "counter", "Bytes of frames written to the log.",
           st.log_bytes_written);
    scalar(b, "hanudb_log_prealloc_bytes_total", "counter", "Bytes zero-filled or allocated ahead of the log.",
           st.prealloc_bytes);
    scalar(b, "hanudb_syncs_total", "counter", "fdatasync calls of the group commit.", st.syncs);
    scalar(b, "hanudb_keys", "gauge", "Live keys in every database and collection.", st.keys);
    scalar(b, "hanudb_collections", "gauge", "Databases and collections.", st.databases);
    scalar(b, "hanudb_disk_bytes", "gauge", "Bytes of the log's data files.", st.disk_bytes);
    scalar(b, "hanudb_log_files", "gauge", "Data files of the log.", st.files);
    scalar(b, "hanudb_floor_txn", "gauge",
           "Compaction floor: the minimum of the durable txn and every watermark.", store_floor(srv->store));
    family(b, "hanudb_watermark_txn", "gauge", "Txn up to which a projection of the log has consumed it.");
    store_watermark wm[STORE_MAX_WATERMARKS];
    size_t nw = store_watermark_list(srv->store, wm, STORE_MAX_WATERMARKS);
    for (size_t i = 0; i < nw && i < STORE_MAX_WATERMARKS; i++)
        text(b, "hanudb_watermark_txn{name=\"%s\"} %llu\n", wm[i].name, (unsigned long long)wm[i].txn);
    if (srv->sealer) {
        sealer_stats ss;
        sealer_get_stats(srv->sealer, &ss);
        scalar(b, "hanudb_bucket_sealed_txn", "gauge", "Highest txn the bucket holds.", ss.sealed_txn);
        scalar(b, "hanudb_bucket_segment", "gauge", "Sequence number of the chain's last segment.", ss.sequence);
        /* One family with the class as a label (promtool reads "_b_" as a unit). */
        family(b, "hanudb_bucket_requests_total", "counter",
               "Bucket requests by class: A (put, list, delete), B (get, head).");
        text(b, "hanudb_bucket_requests_total{class=\"A\"} %llu\n", (unsigned long long)ss.class_a);
        text(b, "hanudb_bucket_requests_total{class=\"B\"} %llu\n", (unsigned long long)ss.class_b);
        scalar(b, "hanudb_bucket_bytes_put_total", "counter", "Bytes of segments put by this process.", ss.bytes);
        scalar(b, "hanudb_bucket_failed_puts_total", "counter", "Segment puts that failed and were tried again.",
               ss.failed_puts);
        if (bucket_twin_side(srv->bucket, 0)) {   /* twin buckets: each side's own requests */
            family(b, "hanudb_bucket_side_requests_total", "counter",
                   "Requests of each of the twin buckets by class (side 0: the first --bucket).");
            for (int side = 0; side < 2; side++) {
                bucket_counters bc;
                bucket_get_counters(bucket_twin_side(srv->bucket, side), &bc);
                text(b, "hanudb_bucket_side_requests_total{side=\"%d\",class=\"A\"} %llu\n", side,
                     (unsigned long long)bc.class_a);
                text(b, "hanudb_bucket_side_requests_total{side=\"%d\",class=\"B\"} %llu\n", side,
                     (unsigned long long)bc.class_b);
            }
        }
    }
    if (srv->bucket) {
        int running, last = http_audit_last(srv, &running);
        scalar(b, "hanudb_bucket_audit_running", "gauge", "1 while an audit of the bucket (POST /_admin/audit) runs.",
               running);
        if (last >= 0)
            scalar(b, "hanudb_bucket_audit_ok", "gauge", "1 the last finished audit of the bucket passed, 0 it failed.",
                   (uint64_t)last);
    }
    role_families(b, srv);
    scalar(b, "hanudb_keydir_bytes", "gauge", "Memory of the key directories.", st.memory_bytes);
    scalar(b, "hanudb_compactions_total", "counter", "Compactions finished.", st.compactions);
    scalar_double(b, "hanudb_compaction_lock_max_seconds", "gauge",
                  "Longest time a compaction held the store lock.", (double)st.compaction_lock_max_us / 1e6);
    scalar(b, "hanudb_store_failed", "gauge", "1 once a write or sync of the log failed (until a restart).",
           store_failed(srv->store) ? 1 : 0);
}

/* Fields of /proc/self/stat after the command name (which may hold spaces):
   field 14 utime and 15 stime are at index 11 and 12, 22 starttime at 19. */
static int proc_stat_fields(unsigned long long *out, int n)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p += 2;   /* ") " then field 3, the state */
    for (int i = 0; i < n; i++) {
        while (*p == ' ') p++;
        if (!*p) return -1;
        out[i] = strtoull(p, &p, 10);   /* the state letter reads as 0 */
        if (i == 0) while (*p && *p != ' ') p++;
    }
    return 0;
}

static unsigned long long boot_time_s(void)
{
    char line[256];
    unsigned long long btime = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1) break;
    fclose(f);
    return btime;
}

static size_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1;   /* the directory's own descriptor */
}

/* The process_* families every Prometheus client library exports. */
static void process_families(hanu_buf *b)
{
    double tick = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    unsigned long long f[20];
    if (proc_stat_fields(f, 20) == 0) {
        scalar_double(b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
                      (double)(f[11] + f[12]) / tick);
        scalar_double(b, "process_start_time_seconds", "gauge",
                      "Start time of the process since unix epoch in seconds.",
                      (double)boot_time_s() + (double)f[19] / tick);
    }
    unsigned long long vm = 0, rss = 0;
    FILE *sf = fopen("/proc/self/statm", "r");
    if (sf) {
        if (fscanf(sf, "%llu %llu", &vm, &rss) == 2) {
            scalar(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                   (uint64_t)((double)vm * page));
            scalar(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                   (uint64_t)((double)rss * page));
        }
        fclose(sf);
    }
    scalar(b, "process_open_fds", "gauge", "Number of open file descriptors.", open_fds());
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        scalar(b, "process_max_fds", "gauge", "Maximum number of open file descriptors.", (uint64_t)rl.rlim_cur);
}

void http_metrics_reply(http_call *c)
{
    server *srv = c->srv;
    hanu_buf b = {0};
    http_families(&b, srv);
    kv_families(&b, srv);
    store_families(&b, srv);
    http_index_metrics(srv, &b);
    process_families(&b);
    c->req->res.status = 200;
    c->req->res.reason = "OK";
    c->req->res.content_length = b.len;
    h2o_add_header(&c->req->pool, &c->req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("text/plain; version=0.0.4"));
    h2o_send_inline(c->req, (const char *)b.data, b.len);
    http_answered(c, 200, b.len);
    hanu_buf_free(&b);
}
