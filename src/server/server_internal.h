/*
 * server_internal.h: the serve process's state, shared by the core (src/server)
 * and its faces (src/http, src/kv, src/resp), and the core's calls for them.
 */
#ifndef HANU_SERVER_INTERNAL_H
#define HANU_SERVER_INTERNAL_H

#include <stdatomic.h>
#include <h2o.h>
#include <h2o/multithread.h>
#include "server/server.h"
#include "kv/kv_proto.h"
#include "server/waiters.h"
#include "server/tokens.h"
#include "bucket/bucket.h"
#include "replica/rebuild.h"
#include "replica/sealer.h"
#include "replica/follower.h"
#include "replica/lease.h"
#include "replica/snapshot.h"
#include "json/json.h"
#include "index/index.h"

typedef struct kv_conn kv_conn;

#define HTTP_LATENCY_BUCKETS 16
#define HTTP_STATUS_SLOTS 26
#define HTTP_ROUTE_SLOTS 32          /* at least ROUTE_COUNT (http_internal.h) */

typedef struct server {
    server_options opt;
    kv_limits limits;
    h2o_evloop_t *loop;
    store *store;
    indexer *indexer;               /* DATA/index: the documents index (http_query.c reads it) */
    h2o_socket_t *kv_listener;
    int kv_fd, http_fd;             /* bound before anything is created on disk; -1 once accepting */

    /* Durable notifications from the commit thread. */
    h2o_multithread_queue_t *queue;
    h2o_multithread_receiver_t durable_receiver;
    h2o_multithread_message_t durable_msg;
    _Atomic int durable_msg_pending;
    _Atomic uint64_t durable_txn;
    /* the bucket and its sealer (NULL without --bucket); the sealer thread publishes
       sealed_txn and wakes the loop with the durable message */
    bucket *bucket;
    sealer *sealer;
    _Atomic uint64_t sealed_txn;
    int fenced;                     /* the sealer stopped for good: exit with its status */
    /* replication (server_role.c): the role is the loop's; the lease thread promotes
       and hands the new sealer over through `promoted` and the durable message */
    int role;                       /* enum server_role */
    follower *follower;             /* --follow and --lease (NULL: a plain writer) */
    lease_keeper *lease;            /* --lease */
    _Atomic(sealer *) promoted;
    _Atomic int promotion_failed;
    int lease_lost;                 /* the lease expired unrenewed: exit with its status */
    _Atomic int behind_retention;   /* the follower fell behind retention (its thread says so) */
    uint64_t behind_stop_ns;        /* loop: when the process stops for that (0: not yet) */
    rebuild_stats rebuild;          /* this start rebuilt DATA from the bucket when rebuilt */
    int rebuilt;
    int writer_live;                /* start-up refused: another writer extended the chain just now */
    uint64_t rebuild_started_ns;
    _Atomic int store_failed;
    /* The store's last txn and newest record when it opened: fresh queries never wait
       for the txns a restart numbered over (http_query.c, fresh_target). */
    uint64_t fresh_start_txn, fresh_start_record;
    waiters waits;                  /* answers of both faces held for a watermark (loop thread) */
    auth_tokens tokens;             /* --tokens, for both faces (tokens.h); n 0: auth is off */
    struct resp_server *resp;       /* the Redis protocol (src/resp); NULL without --resp-addr */
    const server_face *const *faces;   /* server_run's, in start order */
    size_t nfaces;

    h2o_linklist_t conns;           /* every kv connection */
    size_t nconns;
    h2o_timeout_t idle_timeout;
    h2o_timeout_t sweep_timeout;
    h2o_timeout_entry_t sweep_entry;
    struct http_expire_sweep *expire_sweep;   /* http_expire.c, on sweep_timeout */
    h2o_linklist_t imports;         /* http_import.c: imports between two chunks */
    h2o_timeout_t import_timeout;   /* 1 ms: an import's next step, after other work */
    uint64_t expired_docs;          /* deleted by the expiry sweep */
    h2o_timeout_t ttl_timeout;         /* the expiry sweep's tick (kv_server.c) */
    h2o_timeout_entry_t ttl_entry;
    uint64_t keys_expired;             /* keys the expiry sweep deleted */
    uint64_t list_gc_cursor;           /* where the lists' reclaim pass is (kvlist_gc_step) */
    uint64_t list_records_reclaimed;   /* chunks and owners of gone lists it deleted */

    int stopping;
    hanu_buf scratch;
    void *ops_scratch;              /* store_op array for batches */
    size_t ops_cap;

    uint64_t requests, errors, connections_total;

    /* documents over HTTP (http_*.c) */
    h2o_globalconf_t http_globalconf;
    h2o_context_t http_ctx;
    h2o_accept_ctx_t http_accept;
    h2o_socket_t *http_listener;
    int http_on;
    size_t parked_count;            /* HTTP answers held in waits */
    char **cors;
    size_t ncors;
    char *cors_allow_headers;       /* the Access-Control-Allow-Headers value */
    char **allowed_hosts;           /* --allowed-hosts, lower case */
    size_t nallowed_hosts;
    uint16_t http_port;             /* the port HTTP listens on (Host check) */
    char http_authority[24];        /* "127.0.0.1:PORT": the Host check's fast path */
    char http_shown[64];            /* the address HTTP listens on, as printed */
    size_t http_authority_len;
    hanu_buf http_scratch;
    struct http_timeouts *http_timeouts;   /* http_timeout.c */
    uint64_t id_last_ms, id_seq;
    uint64_t http_requests[HTTP_ROUTE_SLOTS][HTTP_STATUS_SLOTS];        /* route x status slot */
    uint64_t http_latency[HTTP_ROUTE_SLOTS][HTTP_LATENCY_BUCKETS + 1];  /* route x bucket, last = sum in us */
    uint64_t http_latency_count[HTTP_ROUTE_SLOTS];
    uint64_t started_ms;
    h2o_timeout_t parked_timeout;
    h2o_timeout_entry_t parked_entry;
    h2o_timeout_t expire_timeout;
    h2o_timeout_entry_t expire_entry;
    uint64_t idempotency_expired;
    /* snapshots (replica/snapshot.h): its thread asks the loop to rotate the log
       (a message, then waits on snap_cv); POST /_admin/snapshot requests wait in
       snapshot_waits (http_snapshot.c) */
    snapshotter *snapshotter;
    h2o_multithread_receiver_t snap_receiver;
    h2o_multithread_message_t snap_msg;
    pthread_mutex_t snap_mu;
    pthread_cond_t snap_cv;
    int snap_rotate_asked, snap_rotate_done, snap_rotate_rc, snap_refuse;
    uint64_t snap_rotate_txn;
    uint32_t snap_rotate_file;
    /* The loop's own time in a snapshot's rotation (the old file's fdatasync), the last
       and the longest: what a snapshot costs the write path. Under snap_mu. */
    uint64_t snap_loop_us_last, snap_loop_us_max;
    h2o_linklist_t snapshot_waits;
    struct audit_job *audit;        /* POST /_admin/audit and its state (http_audit.c) */
    h2o_timeout_t snapshot_wait_timeout;
    h2o_timeout_entry_t snapshot_wait_entry;
    h2o_linklist_t query_waits;     /* queries held for their min_txn (http_query.c) */
    h2o_timeout_t query_wait_timeout;
    h2o_timeout_entry_t query_wait_entry;
    struct query_pool *query_pool;  /* the query workers (http_query.c); NULL: queries run on the loop */
    h2o_linklist_t query_tasks;     /* queries in the pool, checked for clients that left */
    uint64_t query_inline;          /* queries run on the loop as cheap enough (--query-inline-postings) */
    uint64_t query_held, query_held_ns;   /* queries held for the index (fresh or min_txn), and how long */
    h2o_timeout_t query_check_timeout;
    h2o_timeout_entry_t query_check_entry;
    struct http_exports *exports;   /* exports running on their threads (http_export.c) */
    /* Exports' progress for _status (any thread): running now, and documents and raw
       bytes written by every export since the start. */
    _Atomic uint64_t exports_running, export_docs, export_bytes;
} server;

enum server_role { ROLE_LEADER = 0, ROLE_FOLLOWER, ROLE_STANDBY };

/* Replication (server_role.c). Opens the bucket and the follower (applies the chain)
   and, with --lease, starts the lease thread; NOT used by a plain writer. */
int server_role_open(server *srv, char *err, size_t errcap);
/* Loop thread, every iteration: adopts a finished promotion, fences a writer whose
   lease is past (stops writes, exits SERVER_EXIT_LEASE_LOST). */
void server_role_tick(server *srv);
/* Loop thread: a follower behind retention stops the process (exit status
   SERVER_EXIT_BEHIND_RETENTION) after SERVER_BEHIND_GRACE_MS. */
void server_check_behind(server *srv);
/* Stops the lease thread and the follower, closes a sealer promoted but not adopted. */
void server_role_close(server *srv);
/* A leader that has not lost its lease, and whose lease is valid now: a write checks
   the lease itself, not only the loop's last look (a process stopped and resumed
   handles its buffered requests before anything else). */
int server_accepts_writes(server *srv);
const char *server_role_name(const server *srv);
/* Why writes are refused, for the not_leader message: "a follower", "a standby", or
   "a leader without a valid lease". */
const char *server_not_leader_why(const server *srv);
/* The leader's advertised URL as last seen in the lease, into buf: 0 when unknown. */
int server_leader_url(server *srv, char *buf, size_t cap);
/* "role", "follower" and "lease" members of _status. */
void server_role_status(server *srv, json_writer *w);
/* The follower's lag behind the leader in txns: what the leader announced in its last
   lease renewal and this node has not applied (0 without a lease); behind retention,
   the chain's last txn as then seen minus the applied one. */
uint64_t server_follower_lag_txns(server *srv, const follower_stats *fs);

/* Releases answers gated on syncs that completed since the last call; the
 * kv read path calls it too, so that a busy loop answers without waiting
 * for the commit thread's message (measured: 73-79 us later on average). */
void server_poll_durable(server *srv);
void server_check_sealer(server *srv);
/* Sealer thread's callback: publishes the sealed txn and wakes the loop. */
void server_on_sealed(void *ctx, uint64_t txn);
/* Opens srv->bucket from the options (--bucket, simulated latencies). */
int server_bucket_open(server *srv, char *err, size_t errcap);
/* Starts the snapshotter once srv->sealer runs (at start-up, or on the loop thread
   when a standby is promoted); OK and nothing done without a sealer. */
int server_snapshots_open(server *srv, char *err, size_t errcap);

/* Whether txn has reached mark: the loop's view, or for the log's own marks the
   durable txn as the commit thread last published it (fresher than the view). */
static inline int server_reached(server *srv, int mark, uint64_t txn)
{
    return waiters_state(&srv->waits, mark, txn) == WAITER_REACHED ||
           (mark <= WAIT_DURABLE && txn <= atomic_load(&srv->durable_txn));
}

/* The watermark an answer at a durability level waits for (kv_durability values). */
static inline int server_wait_mark(uint8_t durability)
{
    return durability == HKV_DUR_LOCAL ? WAIT_DURABLE : durability == HKV_DUR_BUCKET ? WAIT_BUCKET : WAIT_WRITTEN;
}

/* An answer now waits for mark: make it come soon. The log syncs at once for
   `local` and `bucket`; for `bucket` the sealer also seals now instead of at its next
   interval, so bucket writes wait for one put, not for the interval (an idle or
   `local`-only server still seals at most once an interval). */
static inline void server_want_mark(server *srv, int mark, uint64_t txn)
{
    if (mark == WAIT_WRITTEN) return;
    store_want_durable(srv->store, txn);
    if (mark == WAIT_BUCKET && srv->sealer) sealer_seal_upto(srv->sealer, txn);
}

/* A write refused for the server's own reason (no space, a failed log, the store
   stopped): logged with its cause, at most one line per 10 s and cause, whichever
   face refused it. face: "http" or "kv"; what: the collection or database. */
void server_log_write_failure(const char *face, const char *what, int rc);

/* "key":v in an object being written (stats and status answers of both faces). */
static inline void server_json_u64(json_writer *w, const char *key, uint64_t v)
{
    json_write_key(w, key, strlen(key));
    json_write_int64(w, (int64_t)v);
}

typedef struct server_json_field { const char *key; uint64_t v; } server_json_field;

static inline void server_json_fields(json_writer *w, const server_json_field *f, size_t n)
{
    for (size_t i = 0; i < n; i++) server_json_u64(w, f[i].key, f[i].v);
}

int server_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len);
int server_addr_is_loopback(const struct sockaddr_storage *ss);
/* Binds and listens on ss (shown: the address as the user gave it, for err): the
   port is taken (connections wait in the backlog) but nothing is accepted yet. */
int server_bind(const struct sockaddr_storage *ss, socklen_t sl, const char *shown, int *fd, char *err,
                size_t errcap);
/* Accepts on the bound *fd (taken: set to -1); every accepted socket (TCP_NODELAY,
   none while stopping) goes to on_conn. */
int server_listen(server *srv, int *fd, void (*on_conn)(server *srv, h2o_socket_t *sock), h2o_socket_t **out);
/* Stops accepting and closes the listener, if any. */
void server_unlisten(h2o_socket_t **sock);

#endif
