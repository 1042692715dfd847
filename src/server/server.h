/*
 * server: the core of the hanudb serve process: one h2o event loop thread, the
 * listeners, the store underneath, roles and the lease, and the waiters that turn
 * the log's (and the bucket's) watermarks into answers. The faces that speak to
 * clients (src/http, src/kv, src/resp) plug in through a server_face each;
 * the core knows them only through that table.
 */
#ifndef HANU_SERVER_H
#define HANU_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include "store/store.h"

typedef struct server_options {
    store_options store;
    const char *kv_addr;            /* HOST:PORT, default 127.0.0.1:8787 */
    uint32_t max_frame;             /* request payload limit, default 16 MiB + 64 */
    uint32_t idle_timeout_ms;       /* close idle connections, default 300 000 */
    uint32_t max_connections;       /* default 10 000 */
    /* the Redis protocol (src/resp, docs/RESP.md) */
    const char *resp_addr;          /* HOST:PORT; NULL, "" or "off": none (the default) */
    uint8_t resp_durability;        /* a connection's durability until CLIENT DURABILITY: HKV_DUR_LOCAL */
    int resp_allow_flushdb;         /* FLUSHDB deletes; else it is refused */
    /* documents over HTTP */
    const char *http_addr;          /* HOST:PORT, default 127.0.0.1:8080; "" or "off": none */
    const char *tls_cert, *tls_key; /* PEM files: serve HTTPS */
    const char *tokens_file;        /* "TOKEN ro|rw *|col1,col2" lines */
    const char *tokens;             /* the same lines inline (HANUDB_TOKENS), ';' or newline separated */
    const char *cors_origins;       /* comma-separated origins, or "*" */
    const char *cors_allow_headers; /* request headers allowed besides the built-in ones */
    const char *allowed_hosts;      /* without tokens: Host values accepted besides loopback */
    uint32_t max_body;              /* request body limit, default 16 MiB */
    uint32_t http_header_timeout_ms;  /* a request head, from its first byte: 408; default 10 000 */
    uint32_t http_body_timeout_ms;    /* longest pause in a request body: 408; default 10 000 */
    uint32_t http_idle_timeout_ms;    /* keep-alive connection between requests: closed; default 75 000 */
    uint64_t idempotency_ttl_s;     /* default 86 400 */
    int open_metrics;               /* /metrics and /_status without a token */
    int no_console;                 /* --no-console: no web console at /_console/ (src/console) */
    /* the bucket (docs/BUCKET.md): NULL = none (hanudb serve passes file://DATA.bucket
       unless --bucket or --no-bucket); an empty DATA with a non-empty bucket is rebuilt */
    const char *bucket_url;         /* file:///path or s3://bucket/prefix */
    const char *bucket_url2;        /* a second bucket: twin buckets (bucket_twin_open) */
    uint32_t seal_interval_ms;      /* default 1000 */
    uint32_t seal_mb;               /* a segment is sealed sooner once this many MB of records wait (default 4) */
    uint32_t bucket_latency_put_ms, bucket_latency_get_ms;   /* simulated object store */
    /* replication (docs/REPLICATION.md): a follower applies the bucket's chain and
       refuses writes; with a lease, nodes take over writing when the writer is gone */
    int follow;                     /* --follow: read-only replica of bucket_url */
    int lease;                      /* --lease: standby that takes the lease when it can */
    uint32_t lease_ttl_ms;          /* default 10 000 */
    uint32_t poll_ms;               /* a follower polls the chain this often, default 1000 */
    const char *advertise;          /* URL written into the lease, shown by followers' 421s */
    int takeover;                   /* --takeover: rebuild and write although another writer extended
                                       the chain within SERVER_TAKEOVER_WINDOW_MS */
    uint32_t snapshot_segments;     /* with a bucket: a snapshot every N segments (default 64; 0: only when asked) */
    uint64_t snapshot_interval_ms;  /* at most one policy snapshot per interval, and one once it passed with new
                                       segments (default 600000; 0: the segment count alone) */
    uint64_t retain_ms;             /* restores reach back this far (default 24 h; SNAPSHOT_RETAIN_FOREVER) */
    uint64_t retain_max_bytes;      /* the size guard of retention (0: none) */
    double bucket_fail_rate, bucket_timeout_rate;          /* injected failures (tests) */
    int bucket_ignore_conditions;   /* tests: the bucket ignores conditional puts (bucket_options) */
    uint32_t bucket_connect_timeout_ms, bucket_request_timeout_ms;   /* 0: bucket_options' defaults */
    int unsafe_no_fencing;          /* start on a bucket that fails the fencing probe (warned) */
    /* the documents index (DATA/index) and the queries over it */
    uint32_t index_commit_ms;       /* the indexer commits this often, default 500 */
    int index_nice;                 /* the indexer thread's nice value, 0..19, default 0 */
    uint32_t min_txn_wait_ms;       /* longest a query waits for its min_txn, default 5000 */
    uint64_t filter_cache_bytes;    /* cached equality-filter bitmaps, default 64 MiB; 0: none */
    int no_index;                   /* no documents index: queries answer 503 index_off */
    int merge_policy;               /* enum index_merge_policy, default INDEX_MERGE_DEFAULT */
    uint64_t index_max_segment_bytes;   /* merges make no larger segment (default 256 MiB) */
    uint64_t doc_cache_bytes;       /* the hot-document cache (default 64 MiB; 0: none) */
    uint32_t query_threads;         /* query workers, default the online CPUs; 0: on the loop */
    uint32_t query_queue;           /* queries waiting for a worker before 503 overloaded, default 1024 */
    uint64_t query_inline_postings; /* a find or search estimated to read at most this many postings runs
                                       on the loop; default 4096 on one CPU, else 0 (never) */
} server_options;

/* --query-inline-postings on one CPU: a thread's handoff there costs more than
   a query of a few thousand postings (docs/QUERY.md, "Execution"). */
#define QUERY_INLINE_ONE_CPU 4096

/* Exit status of serve when another writer extended the bucket's chain (fenced). */
#define SERVER_EXIT_FENCED 3
/* Exit status of serve when a rebuild from the bucket found the chain broken (a
   segment damaged, missing, out of order or foreign): nothing is served. */
#define SERVER_EXIT_BROKEN_CHAIN 4
/* Exit status of serve when a lease holder could not renew its lease in time. */
#define SERVER_EXIT_LEASE_LOST 5
/* Exit status of serve when a writer that would rebuild from the bucket finds the
   chain extended by another writer within the window (max of this and three seal
   intervals): that writer is likely alive, and would be fenced. --takeover skips it. */
#define SERVER_EXIT_WRITER_LIVE 6
/* Exit status of a follower or standby that fell behind the bucket's retention (the
   segments it needed next were removed after a snapshot): restarted (a supervisor's
   Restart=), it re-boots from the newest snapshot. A follower serves its stale state
   for SERVER_BEHIND_GRACE_MS first, saying so in _status and /metrics; a standby
   stops at once. */
#define SERVER_EXIT_BEHIND_RETENTION 7
#define SERVER_BEHIND_GRACE_MS 3000u
#define SERVER_TAKEOVER_WINDOW_MS 10000u

struct server;

/* A face of the serve process: how the core starts, wakes, drains and stops it
   (docs/ARCHITECTURE.md, "The server core"). Each op runs on the loop thread,
   never per request: a face's connections are its own (a plain socket face uses
   server/gated_conn.h for its output). */
typedef struct server_face {
    const char *name;
    /* Binds the face's port (off: nothing) and checks its options, before anything
       is made on disk; err says what failed. */
    int (*bind)(struct server *srv, char *err, size_t errcap);
    /* Accepts on the bound port, once the store is open. */
    int (*listen)(struct server *srv, char *err, size_t errcap);
    /* A watermark moved or the index published (NULL: nothing held for them). */
    void (*wake)(struct server *srv);
    /* Shutdown: no new connections nor requests; what was read is still answered. */
    void (*shutdown_begin)(struct server *srv);
    /* Status: how many answers (connections, held requests) are still owed. */
    size_t (*busy)(struct server *srv);
    /* Closes every connection and frees the face's state. */
    void (*stop)(struct server *srv);
    /* A start-up that failed after bind, before listen: releases the port. */
    void (*unbind)(struct server *srv);
} server_face;

void server_options_default(server_options *o);
/* Runs faces[0..nfaces) until SIGINT/SIGTERM, then shuts down gracefully: binds and
   accepts in that order, drains and stops in the reverse. Returns the exit status;
   prints what went wrong on stderr. */
int server_run(const server_options *o, const server_face *const *faces, size_t nfaces);

#endif
