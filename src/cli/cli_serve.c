/*
 * cli_serve.c: hanudb serve and hanudb compact: option handling around
 * server_run and store_compact.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "index/index.h"
#include "log/log.h"
#include "replica/snapshot.h"
#include "server/server.h"
#include "http/http.h"
#include "kv/kv.h"
#include "resp/resp.h"
#include "hanudb_protocol.h"
#include "hlog/hlog.h"

typedef struct store_flags {
    const char *data, *prealloc;
    uint64_t file_size, commit_window_us, lazy_sync_ms, max_key, max_value;
    double compact_ratio;
    int no_compaction;
    int salvage;
} store_flags;

static int apply_store_flags(const store_flags *f, store_options *so)
{
    so->data_dir = f->data;
    so->file_size = f->file_size;
    so->commit_window_us = (uint32_t)f->commit_window_us;
    if (f->lazy_sync_ms > 1000) {
        fprintf(stderr, "hanudb: --lazy-sync-ms must be at most 1000\n");
        return 2;
    }
    so->lazy_sync_ms = (uint32_t)f->lazy_sync_ms;
    so->compact_ratio = f->compact_ratio;
    so->background_compaction = !f->no_compaction;
    so->salvage = f->salvage;
    if (f->file_size < (64u << 10) || f->file_size > (1ull << 31)) {
        fprintf(stderr, "hanudb: --file-size must be between 64K and 2G\n");
        return 2;
    }
    if (f->max_key < 1 || f->max_key > 65535) {
        fprintf(stderr, "hanudb: --max-key must be between 1 and 65535\n");
        return 2;
    }
    if (f->max_value > (256u << 20)) {
        fprintf(stderr, "hanudb: --max-value must be at most 256M\n");
        return 2;
    }
    so->max_key = (uint32_t)f->max_key;
    so->max_value = (uint32_t)f->max_value;
    if (log_prealloc_parse(f->prealloc, &so->prealloc) != HANU_OK) {
        fprintf(stderr, "hanudb: --prealloc must be append, fallocate or zerofill\n");
        return 2;
    }
    return 0;
}

/* The flags start from the store's own defaults, so that both say the same. */
static void default_store_flags(store_flags *f)
{
    store_options d;
    store_options_default(&d);
    memset(f, 0, sizeof *f);
    f->data = d.data_dir;
    f->prealloc = log_prealloc_name(d.prealloc);
    f->file_size = d.file_size;
    f->max_key = d.max_key;
    f->max_value = d.max_value;
    f->compact_ratio = d.compact_ratio;
    f->commit_window_us = d.commit_window_us;
    f->lazy_sync_ms = d.lazy_sync_ms;
    f->no_compaction = !d.background_compaction;
}

/* Removes "." and empty components of an absolute path and applies ".." to the
   component before it, in place: a bucket URL may have neither (docs/BUCKET.md). */
static void normalise_path(char *path)
{
    char *out = path;   /* writes the result over the input, never ahead of it */
    for (const char *p = path; *p;) {
        while (*p == '/') p++;
        const char *end = strchrnul(p, '/');
        size_t n = (size_t)(end - p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (out > path && *--out != '/') {
            }
        } else if (n && !(n == 1 && p[0] == '.')) {
            *out++ = '/';
            memmove(out, p, n);
            out += n;
        }
        p = end;
    }
    if (out == path) *out++ = '/';
    *out = 0;
}

/* The embedded default bucket: the folder DATA.bucket beside the data directory, as
   an absolute file:// URL without "." or ".." (production puts the bucket on another
   machine). */
static int default_bucket_url(const char *data, char *url, size_t cap)
{
    char cwd[4096] = "", path[8300];
    if (data[0] != '/' && !getcwd(cwd, sizeof cwd)) return -1;
    size_t len = strlen(data);
    while (len > 1 && data[len - 1] == '/') len--;   /* "data/" is "data" */
    int n = snprintf(path, sizeof path, "%s/%.*s.bucket", cwd, (int)len, data);
    if (n < 0 || (size_t)n >= sizeof path) return -1;
    normalise_path(path);
    n = snprintf(url, cap, "file://%s", path);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int cli_serve_main(int argc, char **argv)
{
    server_options o;
    server_options_default(&o);
    store_flags f;
    default_store_flags(&f);
    const char *kv_addr = o.kv_addr;
    const char *resp_durability = "local";
    uint64_t max_frame = o.max_frame, idle_ms = o.idle_timeout_ms, max_conns = o.max_connections;
    uint64_t max_body = o.max_body, idem_ttl = o.idempotency_ttl_s;
    uint64_t seal_ms = o.seal_interval_ms, seal_mb = 4, lat_put = 0, lat_get = 0, snapshot_segments = o.snapshot_segments;
    uint64_t bucket_connect_ms = 2000, bucket_request_ms = 10000;
    const char *snapshot_interval = "10m", *retain = "24h";
    double retain_max_gb = 0;
    cli_str_twice buckets = { { NULL, NULL }, 0, 0 };
    int no_bucket = 0;
    char bucket_url[4200];
    uint64_t index_commit_ms = o.index_commit_ms, min_txn_wait_ms = o.min_txn_wait_ms;
    uint64_t index_nice = (uint64_t)o.index_nice;
    uint64_t lease_ttl_s = 10, poll_ms = 1000;
    uint64_t max_segment_mb = o.index_max_segment_bytes >> 20, doc_cache_bytes = o.doc_cache_bytes;
    const char *merge_policy = "default";
    uint64_t query_threads = o.query_threads, query_queue = o.query_queue, query_inline = o.query_inline_postings;
    uint64_t header_ms = o.http_header_timeout_ms, body_ms = o.http_body_timeout_ms, http_idle_ms = o.http_idle_timeout_ms;
    const char *log_format = "text", *log_file = NULL, *access_log = NULL;
    cli_opt opts[] = {
        { "data", CLI_STR, &f.data, "data directory (default ./data)" },
        { "kv-addr", CLI_STR, &kv_addr, "key-value protocol address HOST:PORT (default 127.0.0.1:8787)" },
        { "resp-addr", CLI_STR, &o.resp_addr, "Redis protocol (RESP2/RESP3) address HOST:PORT, or off (default off; docs/RESP.md)" },
        { "resp-durability", CLI_STR, &resp_durability, "a Redis connection's durability until CLIENT DURABILITY: "
                                                         "none|local|bucket (default local)" },
        { "resp-allow-flushdb", CLI_FLAG, &o.resp_allow_flushdb, "FLUSHDB over the Redis protocol deletes every key "
                                                                  "of the database (default: refused)" },
        { "file-size", CLI_SIZE, &f.file_size, "log file rotation size (default 64M)" },
        { "prealloc", CLI_STR, &f.prealloc, "how log files get blocks: append|fallocate|zerofill (default zerofill)" },
        { "commit-window-us", CLI_U64, &f.commit_window_us, "most a group commit waits to gather as many writes as its last sync covered; 0: none (default 100)" },
        { "lazy-sync-ms", CLI_U64, &f.lazy_sync_ms, "writes acknowledged with durability none are synced within this; 0: at once (default 10)" },
        { "max-key", CLI_SIZE, &f.max_key, "largest key in bytes (default 1024)" },
        { "max-value", CLI_SIZE, &f.max_value, "largest value in bytes (default 1M)" },
        { "max-frame", CLI_SIZE, &max_frame, "largest request payload (default 16M+64)" },
        { "idle-timeout-ms", CLI_U64, &idle_ms, "close key-value connections idle this long (default 300000; HTTP: --http-idle-timeout-ms)" },
        { "max-connections", CLI_U64, &max_conns, "most concurrent connections (default 10000)" },
        { "compact-ratio", CLI_DOUBLE, &f.compact_ratio, "compact a sealed file past this dead fraction (default 0.5)" },
        { "no-compaction", CLI_FLAG, &f.no_compaction, "no background compaction" },
        { "salvage", CLI_FLAG, &f.salvage, "start although synced frames are damaged: keep what is readable, "
          "copy the rest to DATA/quarantine/ (docs/OPERATIONS.md)" },
        { "http-addr", CLI_STR, &o.http_addr, "documents API address HOST:PORT, or off (default 127.0.0.1:8080)" },
        { "tls-cert", CLI_STR, &o.tls_cert, "PEM certificate chain: serve HTTPS" },
        { "tls-key", CLI_STR, &o.tls_key, "PEM private key for --tls-cert" },
        { "tokens", CLI_STR, &o.tokens_file, "bearer tokens: a FILE of lines \"TOKEN ro|rw *|col1,col2\", "
                                             "or those lines inline separated by ';'; they guard HTTP and the key-value port (its Auth op)" },
        { "cors-origins", CLI_STR, &o.cors_origins, "allowed CORS origins, comma-separated, or *" },
        { "cors-allow-headers", CLI_STR, &o.cors_allow_headers, "request headers a CORS request may send "
                                                               "besides the API's and tracing ones, comma-separated" },
        { "allowed-hosts", CLI_STR, &o.allowed_hosts, "without --tokens: Host names accepted besides loopback, "
                                                     "comma-separated (NAME or NAME:PORT, or *)" },
        { "max-body", CLI_SIZE, &max_body, "largest HTTP request body (default 16M)" },
        { "http-header-timeout-ms", CLI_U64, &header_ms, "HTTP: 408 when a request head takes longer, from its first byte "
                                                          "(or close a connection that sends nothing) (default 10000)" },
        { "http-body-timeout-ms", CLI_U64, &body_ms, "HTTP: 408 when a request body pauses longer (default 10000)" },
        { "http-idle-timeout-ms", CLI_U64, &http_idle_ms, "HTTP: close keep-alive connections idle this long (default 75000)" },
        { "idempotency-ttl", CLI_U64, &idem_ttl, "seconds an Idempotency-Key is remembered (default 86400)" },
        { "open-metrics", CLI_FLAG, &o.open_metrics, "serve /metrics and /_status without a token" },
        { "no-console", CLI_FLAG, &o.no_console, "no web console at /_console/ (its files answer 404)" },
        { "bucket", CLI_STR_TWICE, &buckets, "seal the log into this bucket: file:///path or s3://bucket/prefix "
                                             "(docs/BUCKET.md); default file://DATA.bucket beside --data; twice: "
                                             "twin buckets, every object written to both" },
        { "no-bucket", CLI_FLAG, &no_bucket, "run without a bucket (the log alone; no durability bucket, "
                                             "no rebuild)" },
        { "seal-interval-ms", CLI_U64, &seal_ms, "with --bucket: at most one segment per interval (default 1000)" },
        { "seal-mb", CLI_U64, &seal_mb, "with --bucket: seal sooner once this many MB of records wait (1..64, default 4)" },
        { "bucket-latency-put-ms", CLI_U64, &lat_put, "with --bucket: simulated latency of every put/list/delete" },
        { "bucket-latency-get-ms", CLI_U64, &lat_get, "with --bucket: simulated latency of every get/head" },
        { "snapshot-segments", CLI_U64, &snapshot_segments, "with --bucket: a snapshot after this many segments, when "
          "the log written since the last one is at least half the state, with --snapshot-interval 0; "
          "0: only POST /_admin/snapshot (default 64)" },
        { "snapshot-interval", CLI_STR, &snapshot_interval, "with --bucket: at most one snapshot per interval, and one "
          "once it passed with new segments (30s, 10m, 1h; 0: the segment count alone) (default 10m)" },
        { "retain", CLI_STR, &retain, "with --bucket: how far back restores reach; older snapshots and the segments "
          "only they need are deleted (90m, 24h, 7d; 0: the newest snapshot only; forever) (default 24h)" },
        { "retain-max-gb", CLI_DOUBLE, &retain_max_gb, "with --bucket: the size guard: past this many GB of "
          "snapshot files and segments, the oldest snapshots go even inside --retain (logged) (default 0: none)" },
        { "bucket-connect-timeout-ms", CLI_U64, &bucket_connect_ms, "with an s3:// bucket: a connection not made "
          "in this long fails (and is retried) (100..600000, default 2000)" },
        { "bucket-request-timeout-ms", CLI_U64, &bucket_request_ms, "with an s3:// bucket: a request whose bytes "
          "stop flowing this long fails (and is retried); large bodies may take longer while they move "
          "(100..600000, default 10000)" },
        { "bucket-fail-rate", CLI_DOUBLE, &o.bucket_fail_rate, "tests: share of bucket requests failing "
                                                                "with a 503 before they act (0..0.9)" },
        { "bucket-timeout-rate", CLI_DOUBLE, &o.bucket_timeout_rate, "tests: share of bucket requests that act "
                                                                      "and lose their answer (0..0.9)" },
        { "bucket-ignore-conditions", CLI_FLAG, &o.bucket_ignore_conditions, "tests: the bucket ignores "
          "conditional puts (If-None-Match, If-Match), as some S3-compatible stores do" },
        { "unsafe-no-fencing", CLI_FLAG, &o.unsafe_no_fencing, "start although the bucket fails the fencing probe "
          "(ignores conditional puts): safe only while no second writer or lease node ever uses it" },
        { "takeover", CLI_FLAG, &o.takeover, "rebuild an empty DATA from the bucket and write although another "
          "writer extended its chain in the last 10 s (or 3 seal intervals): that writer must be gone (it is fenced)" },
        { "follow", CLI_FLAG, &o.follow, "with --bucket: a read-only replica that applies the bucket's chain "
                                         "and answers writes with 421 not_leader (docs/REPLICATION.md)" },
        { "lease", CLI_FLAG, &o.lease, "with --bucket: start as a standby follower; take the writer's lease "
                                       "when it is free or expired and become the leader" },
        { "lease-ttl", CLI_U64, &lease_ttl_s, "with --lease: seconds a lease lasts unrenewed (default 10)" },
        { "poll-ms", CLI_U64, &poll_ms, "with --follow or --lease: poll the bucket for new segments this often "
                                        "(default 1000, at least 100)" },
        { "advertise", CLI_STR, &o.advertise, "with --lease: this node's URL, written into the lease and shown "
                                              "to clients that write to a follower" },
        { "index-commit-ms", CLI_U64, &index_commit_ms, "the documents index commits new segments this often "
                                                        "(default 500)" },
        { "index-nice", CLI_U64, &index_nice, "nice value of the indexer thread, 0 to 19: above 0 writes go first "
                                              "on a busy CPU and the index lag grows instead (default 0)" },
        { "filter-cache-bytes", CLI_SIZE, &o.filter_cache_bytes, "bytes of cached equality-filter bitmaps of the "
                                                                  "index, 0: none (default 64M)" },
        { "min-txn-wait-ms", CLI_U64, &min_txn_wait_ms, "longest a query waits for the index to cover the writes "
                                                        "before it (fresh) or its min_txn, then 503 index_behind; a get "
                                                        "or listing with ?min_txn= for the store to apply it, then 503 "
                                                        "store_behind (default 5000, at most 60000)" },
        { "no-index", CLI_FLAG, &o.no_index, "no documents index: _find, _search and _aggs answer 503 index_off" },
        { "merge-policy", CLI_STR, &merge_policy, "index merges: default (tiered), lazy (past 32 segments a "
                                                  "collection), none (default: default)" },
        { "index-max-segment-mb", CLI_U64, &max_segment_mb, "merges make no index segment larger (default 256)" },
        { "doc-cache-bytes", CLI_SIZE, &doc_cache_bytes, "hot-document cache size; 0: none (default 64M)" },
        { "query-threads", CLI_U64, &query_threads, "threads that run queries off the event loop; 0: on the loop "
                                                    "(default the CPUs the process may run on, at most 256)" },
        { "query-queue", CLI_U64, &query_queue, "queries that may wait for a query thread, then 503 overloaded "
                                                "(default 1024, 1 to 1000000)" },
        { "query-inline-postings", CLI_U64, &query_inline, "a find or search estimated to read at most N postings "
                                                           "runs on the loop, not a thread (default 4096 on one CPU, "
                                                           "else 0: never)" },
        { "log-format", CLI_STR, &log_format, "text (TIME LEVEL subsystem: message) or json (one object a line) "
                                              "(default text)" },
        { "log-file", CLI_STR, &log_file, "append the log to FILE instead of stderr (SIGHUP opens it again)" },
        { "access-log", CLI_STR, &access_log, "one line per HTTP answer (method, path, status, bytes, microseconds, "
                                              "token name) to FILE, or - for stdout (SIGHUP opens it again)" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("serve", "Runs the HanuDB server on DATA until SIGINT or SIGTERM.", opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if ((rc = apply_store_flags(&f, &o.store))) return rc;
    int format;
    char log_err[4400];
    if (hlog_format_parse(log_format, &format) != 0) {
        fprintf(stderr, "hanudb: --log-format must be text or json, not \"%s\"\n", log_format);
        return 2;
    }
    if (hlog_configure(format, log_file, log_err, sizeof log_err) != HANU_OK ||
        hlog_access_open(access_log, log_err, sizeof log_err) != HANU_OK) {
        fprintf(stderr, "hanudb: %s\n", log_err);
        return 2;
    }
    o.bucket_url = buckets.v[0];
    o.bucket_url2 = buckets.v[1];
    if ((o.follow || o.lease) && !o.bucket_url) {   /* the leader's bucket, not DATA.bucket */
        fprintf(stderr, "hanudb: --follow and --lease need --bucket URL\n");
        return 2;
    }
    if (no_bucket && o.bucket_url) {
        fprintf(stderr, "hanudb: --bucket and --no-bucket exclude each other\n");
        return 2;
    }
    if (no_bucket) {
        o.bucket_url = NULL;
    } else if (!o.bucket_url) {
        if (default_bucket_url(f.data, bucket_url, sizeof bucket_url) != 0) {
            fprintf(stderr, "hanudb: cannot make the default bucket path from --data %s\n", f.data);
            return 2;
        }
        o.bucket_url = bucket_url;
    }
    if (max_frame < 1024 || max_frame > (1ull << 30)) {
        fprintf(stderr, "hanudb: --max-frame must be between 1K and 1G\n");
        return 2;
    }
    o.kv_addr = kv_addr;
    if (!strcmp(resp_durability, "none")) o.resp_durability = HKV_DUR_NONE;
    else if (!strcmp(resp_durability, "local")) o.resp_durability = HKV_DUR_LOCAL;
    else if (!strcmp(resp_durability, "bucket")) o.resp_durability = HKV_DUR_BUCKET;
    else {
        fprintf(stderr, "hanudb: --resp-durability must be none, local or bucket, not \"%s\"\n", resp_durability);
        return 2;
    }
    if (o.resp_durability == HKV_DUR_BUCKET && !o.bucket_url) {
        fprintf(stderr, "hanudb: --resp-durability bucket needs a bucket (not --no-bucket)\n");
        return 2;
    }
    o.max_frame = (uint32_t)max_frame;
    o.idle_timeout_ms = (uint32_t)idle_ms;
    o.max_connections = (uint32_t)max_conns;
    if (max_body < 1024 || max_body > (1ull << 30)) {
        fprintf(stderr, "hanudb: --max-body must be between 1K and 1G\n");
        return 2;
    }
    o.max_body = (uint32_t)max_body;
    uint64_t *timeouts[] = { &header_ms, &body_ms, &http_idle_ms };
    for (size_t i = 0; i < 3; i++) {
        if (*timeouts[i] < 10 || *timeouts[i] > 86400000) {
            fprintf(stderr, "hanudb: --http-*-timeout-ms must be between 10 and 86400000\n");
            return 2;
        }
    }
    o.http_header_timeout_ms = (uint32_t)header_ms;
    o.http_body_timeout_ms = (uint32_t)body_ms;
    o.http_idle_timeout_ms = (uint32_t)http_idle_ms;
    o.idempotency_ttl_s = idem_ttl;
    if (seal_ms < 10 || seal_ms > 3600000 || lat_put > 600000 || lat_get > 600000) {
        fprintf(stderr, "hanudb: --seal-interval-ms must be 10..3600000, bucket latencies at most 600000\n");
        return 2;
    }
    if (seal_mb < 1 || seal_mb > 64) {
        fprintf(stderr, "hanudb: --seal-mb must be 1..64\n");
        return 2;
    }
    o.seal_mb = (uint32_t)seal_mb;
    if (!(o.bucket_fail_rate >= 0 && o.bucket_fail_rate <= 0.9 && o.bucket_timeout_rate >= 0 &&
          o.bucket_timeout_rate <= 0.9)) {
        fprintf(stderr, "hanudb: --bucket-fail-rate and --bucket-timeout-rate must be between 0 and 0.9\n");
        return 2;
    }
    o.seal_interval_ms = (uint32_t)seal_ms;
    if (bucket_connect_ms < 100 || bucket_connect_ms > 600000 || bucket_request_ms < 100 ||
        bucket_request_ms > 600000) {
        fprintf(stderr, "hanudb: --bucket-connect-timeout-ms and --bucket-request-timeout-ms must be 100..600000\n");
        return 2;
    }
    o.bucket_connect_timeout_ms = (uint32_t)bucket_connect_ms;
    o.bucket_request_timeout_ms = (uint32_t)bucket_request_ms;
    o.bucket_latency_put_ms = (uint32_t)lat_put;
    o.bucket_latency_get_ms = (uint32_t)lat_get;
    if (snapshot_segments > 1000000) {
        fprintf(stderr, "hanudb: --snapshot-segments must be at most 1000000\n");
        return 2;
    }
    o.snapshot_segments = (uint32_t)snapshot_segments;
    if (cli_parse_duration_ms(snapshot_interval, &o.snapshot_interval_ms) != 0 ||
        o.snapshot_interval_ms > 7 * 86400000ull) {
        fprintf(stderr, "hanudb: --snapshot-interval must be a duration up to 7d (30s, 10m, 1h), or 0\n");
        return 2;
    }
    if (!strcmp(retain, "forever")) {
        o.retain_ms = SNAPSHOT_RETAIN_FOREVER;
    } else if (cli_parse_duration_ms(retain, &o.retain_ms) != 0) {
        fprintf(stderr, "hanudb: --retain must be a duration (90m, 24h, 7d), 0 or forever\n");
        return 2;
    }
    if (!(retain_max_gb >= 0 && retain_max_gb <= 1e9)) {
        fprintf(stderr, "hanudb: --retain-max-gb must be between 0 and 1e9\n");
        return 2;
    }
    o.retain_max_bytes = (uint64_t)(retain_max_gb * 1e9);
    if (index_commit_ms < 1 || index_commit_ms > 3600000) {
        fprintf(stderr, "hanudb: --index-commit-ms must be between 1 and 3600000\n");
        return 2;
    }
    if (min_txn_wait_ms > 60000) {
        fprintf(stderr, "hanudb: --min-txn-wait-ms must be at most 60000\n");
        return 2;
    }
    o.index_commit_ms = (uint32_t)index_commit_ms;
    if (index_nice > 19) {
        fprintf(stderr, "hanudb: --index-nice must be between 0 and 19\n");
        return 2;
    }
    o.index_nice = (int)index_nice;
    if (lease_ttl_s < 1 || lease_ttl_s > 3600 || poll_ms < 100 || poll_ms > 60000) {
        fprintf(stderr, "hanudb: --lease-ttl must be 1..3600 seconds, --poll-ms 100..60000\n");
        return 2;
    }
    o.lease_ttl_ms = (uint32_t)(lease_ttl_s * 1000);
    o.poll_ms = (uint32_t)poll_ms;
    enum index_merge_policy policy;
    if (index_merge_policy_parse(merge_policy, &policy) != HANU_OK) {
        fprintf(stderr, "hanudb: --merge-policy must be default, lazy or none\n");
        return 2;
    }
    if (max_segment_mb < 1 || max_segment_mb > 65536 || doc_cache_bytes > (1ull << 40)) {
        fprintf(stderr, "hanudb: --index-max-segment-mb must be 1..65536, --doc-cache-bytes at most 1T\n");
        return 2;
    }
    o.merge_policy = (int)policy;
    o.index_max_segment_bytes = max_segment_mb << 20;
    o.doc_cache_bytes = doc_cache_bytes;
    o.min_txn_wait_ms = (uint32_t)min_txn_wait_ms;
    if (query_threads > 256 || query_queue < 1 || query_queue > 1000000) {
        fprintf(stderr, "hanudb: --query-threads must be at most 256 and --query-queue from 1 to 1000000\n");
        return 2;
    }
    o.query_threads = (uint32_t)query_threads;
    o.query_queue = (uint32_t)query_queue;
    o.query_inline_postings = query_inline;
    /* The faces, in start order: their ports bind and accept in it (docs/ARCHITECTURE.md). */
    static const server_face *const faces[] = { &http_face, &kv_face, &resp_face };
    return server_run(&o, faces, sizeof faces / sizeof *faces);
}

typedef struct compact_progress {
    hlog_progress p;
    uint64_t bytes_in, files;
} compact_progress;

/* Each compacted file moves the progress line (in place on a terminal, every 10 s in a log). */
static void on_compacted(void *ctx, uint32_t file_id, uint64_t before, uint64_t after)
{
    compact_progress *cp = ctx;
    (void)file_id;
    (void)after;
    cp->bytes_in += before;
    cp->files++;
    hlog_progress_update(&cp->p, cp->bytes_in, cp->files);
}

int cli_compact_main(int argc, char **argv)
{
    store_flags f;
    default_store_flags(&f);
    cli_opt opts[] = {
        { "data", CLI_STR, &f.data, "data directory (default ./data)" },
        { "file-size", CLI_SIZE, &f.file_size, "log file rotation size (default 64M)" },
        { "prealloc", CLI_STR, &f.prealloc, "append|fallocate|zerofill (default zerofill)" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("compact", "Compacts every sealed data file of a stopped server and writes hint files.",
                       opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    store_options so;
    store_options_default(&so);
    if ((rc = apply_store_flags(&f, &so))) return rc;
    so.background_compaction = 0;
    so.on_compacted = on_compacted;
    compact_progress cp = {0};
    so.ctx = &cp;   /* on_durable is not set here: the context is on_compacted's */
    store *s = NULL;
    char err[1024] = "";
    if (store_open(&so, &s, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "hanudb compact: %s\n", err);
        return 2;
    }
    store_stats before, after;
    store_get_stats(s, &before);
    hlog_progress_begin(&cp.p, "compact", "compacting", "files", before.disk_bytes, 0);
    /* Seal the active file so that everything written so far can be compacted. */
    rc = store_rotate(s);
    if (rc == HANU_OK) rc = store_sync(s);
    if (rc == HANU_OK) rc = store_compact(s, 1, err, sizeof err);
    store_get_stats(s, &after);
    store_close(s);
    hlog_progress_end(&cp.p, cp.bytes_in, cp.files, rc ? "failed" : "compacted");
    if (rc) {
        fprintf(stderr, "hanudb compact: %s\n", err[0] ? err : hanu_status_str(rc));
        return 2;
    }
    printf("compacted %llu files: %.1f MB -> %.1f MB on disk, %llu keys\n",
           (unsigned long long)after.compactions, (double)before.disk_bytes / 1e6,
           (double)after.disk_bytes / 1e6, (unsigned long long)after.keys);
    return 0;
}
