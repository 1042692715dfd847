/*
 * server.c: the core of the hanudb serve process: event loop, store, durable
 * notifications from the commit thread, signals, the faces' start and graceful
 * shutdown (through their server_face tables).
 */
#include "server/server_internal.h"
#include "hlog/hlog.h"
#include "replica/chain.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <unistd.h>


/* The CPUs this process may run on (taskset, cgroup cpusets), not those the
 * machine has: a server pinned to one core with a query thread per machine
 * core only switches between them (measured: _find 7 000/s with two threads
 * on one core, 10 500/s with one). */
static long usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

void server_options_default(server_options *o)
{
    memset(o, 0, sizeof *o);
    store_options_default(&o->store);
    o->kv_addr = "127.0.0.1:8787";
    o->max_frame = (16u << 20) + 64;
    o->idle_timeout_ms = 300000;
    o->max_connections = 10000;
    o->resp_durability = HKV_DUR_LOCAL;
    o->http_addr = "127.0.0.1:8080";
    o->max_body = 16u << 20;
    o->http_header_timeout_ms = 10000;
    o->http_body_timeout_ms = 10000;
    o->http_idle_timeout_ms = 75000;
    o->idempotency_ttl_s = 86400;
    o->seal_interval_ms = 1000;
    o->index_commit_ms = 500;
    o->index_max_segment_bytes = 256u << 20;
    o->doc_cache_bytes = 64u << 20;
    o->min_txn_wait_ms = 5000;
    o->filter_cache_bytes = INDEX_BITSET_CACHE_DEFAULT_BYTES;
    long cpus = usable_cpus();
    o->query_threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (uint32_t)cpus;
    o->query_queue = 1024;
    o->query_inline_postings = cpus == 1 ? QUERY_INLINE_ONE_CPU : 0;
    o->snapshot_segments = 64;
    o->snapshot_interval_ms = 600000;
    o->retain_ms = SNAPSHOT_RETAIN_DEFAULT_MS;
}

int server_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr + strlen(addr) - 1) return -1;
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof host) return -1;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    char *h = host;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') { host[hl - 1] = '\0'; h = host + 1; }
    if (!*h) h = "0.0.0.0";
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV | AI_PASSIVE }, *res = NULL;
    if (getaddrinfo(h, colon + 1, &hints, &res) != 0 || !res) return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int server_addr_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return 0;
}

/* What a listener's socket carries: the server and the face's connection handler. */
typedef struct listener {
    server *srv;
    void (*on_conn)(server *srv, h2o_socket_t *sock);
} listener;

static void on_accept(h2o_socket_t *sock, const char *err)
{
    listener *l = sock->data;
    if (err) return;
    for (int i = 0; i < 64; i++) {
        h2o_socket_t *conn = h2o_evloop_socket_accept(sock);
        if (!conn) break;
        if (l->srv->stopping) { h2o_socket_close(conn); continue; }
        int one = 1;
        setsockopt(h2o_socket_get_fd(conn), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        l->on_conn(l->srv, conn);
    }
}

int server_bind(const struct sockaddr_storage *ss, socklen_t sl, const char *shown, int *out, char *err,
                size_t errcap)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)ss, sl) != 0 || listen(fd, 1024) != 0) {
        snprintf(err, errcap, "cannot listen on %s: %s", shown, strerror(errno));
        if (fd >= 0) close(fd);
        return HANU_ERR_IO;
    }
    *out = fd;
    return HANU_OK;
}

int server_listen(server *srv, int *fd, void (*on_conn)(server *srv, h2o_socket_t *sock), h2o_socket_t **out)
{
    listener *l = malloc(sizeof *l);
    if (!l) return HANU_ERR_NOMEM;
    *l = (listener){ srv, on_conn };
    *out = h2o_evloop_socket_create(srv->loop, *fd, H2O_SOCKET_FLAG_DONT_READ);
    *fd = -1;   /* the h2o socket has it now */
    (*out)->data = l;
    h2o_socket_read_start(*out, on_accept);
    return HANU_OK;
}

void server_unlisten(h2o_socket_t **sock)
{
    if (!*sock) return;
    free((*sock)->data);
    h2o_socket_read_stop(*sock);
    h2o_socket_close(*sock);
    *sock = NULL;
}

/* Commit thread: publish the durable txn and wake the loop (at most one message queued). */
static void on_durable_from_log(void *ctx, uint64_t txn, int failed)
{
    server *srv = ctx;
    atomic_store(&srv->durable_txn, txn);
    if (failed) atomic_store(&srv->store_failed, 1);
    if (!atomic_exchange(&srv->durable_msg_pending, 1))
        h2o_multithread_send_message(&srv->durable_receiver, &srv->durable_msg);
}

/* Indexer thread: the index's snapshots cover more; wake the loop for the queries
   held for it (the same message as the durable one). */
static void on_index_published(void *ctx, uint64_t txn)
{
    server *srv = ctx;
    (void)txn;
    if (!atomic_exchange(&srv->durable_msg_pending, 1))
        h2o_multithread_send_message(&srv->durable_receiver, &srv->durable_msg);
}

/* Sealer thread: the bucket holds every record up to txn; wake the loop. */
void server_on_sealed(void *ctx, uint64_t txn)
{
    server *srv = ctx;
    atomic_store(&srv->sealed_txn, txn);
    if (!atomic_exchange(&srv->durable_msg_pending, 1))
        h2o_multithread_send_message(&srv->durable_receiver, &srv->durable_msg);
}

/* Loop thread: releases what waited for a sync (or for the bucket) when the durable
 * (or sealed) txn moved since the last look, or the store or the sealer failed. */
void server_poll_durable(server *srv)
{
    uint64_t durable = atomic_load(&srv->durable_txn);
    int failed = atomic_load(&srv->store_failed);
    if (durable != srv->waits.reached[WAIT_DURABLE] || failed != srv->waits.failed[WAIT_DURABLE])
        waiters_advance(&srv->waits, WAIT_DURABLE, durable, failed);
    if (!srv->sealer) return;
    uint64_t sealed = atomic_load(&srv->sealed_txn);
    if (sealed > srv->waits.reached[WAIT_BUCKET]) waiters_advance(&srv->waits, WAIT_BUCKET, sealed, 0);
}

/* Loop thread, once a second: a sealer that stopped for good (fenced by another
   writer, or a damaged chain) fails every bucket wait and ends the process. */
void server_check_sealer(server *srv)
{
    char msg[512] = "";
    /* A lost lease stops the sealer too; server_role_tick says why (exit status 5). */
    if (!srv->sealer || srv->fenced || srv->lease_lost || sealer_status(srv->sealer, msg, sizeof msg) == HANU_OK)
        return;
    hlog_error("server", "the bucket sealer stopped: %s; shutting down", msg[0] ? msg : "unknown reason");
    srv->fenced = 1;
    srv->stopping = 1;
    waiters_advance(&srv->waits, WAIT_BUCKET, srv->waits.reached[WAIT_BUCKET], 1);
}

/* Twin buckets: objects only one side has are copied to the other before the
   sealer reads the chain (docs/BUCKET.md, "Twin buckets"). */
static int remirror_twin(bucket *b, char *err, size_t errcap)
{
    bucket_twin_stats st;
    uint64_t t0 = hanu_now_ns();
    int rc = bucket_twin_remirror(b, "", &st, err, errcap);
    hlog_info("server", "twin buckets: %llu and %llu objects; copied %llu to the first and %llu to the "
            "second (%llu bytes) in %llu ms%s%s", (unsigned long long)st.listed[0],
            (unsigned long long)st.listed[1], (unsigned long long)st.copied_to[0], (unsigned long long)st.copied_to[1],
            (unsigned long long)st.bytes_copied, (unsigned long long)((hanu_now_ns() - t0) / 1000000),
            st.differ ? "; objects of different sizes on the two sides, first: " : "", st.differ ? st.first_problem : "");
    return rc;
}

/* A writer (or a lease node, which may become one) writes only to a bucket that
   fences: a second writer's segment put must collide, a stale lease holder's
   compare-and-swap must fail (docs/BUCKET.md, "The fencing probe"). A follower
   writes nothing and is not probed. */
static int probe_fencing(server *srv, char *err, size_t errcap)
{
    int rc = HANU_OK;
    for (int attempt = 0; attempt < 3; attempt++)   /* the bucket's own retries are behind each request */
        if ((rc = bucket_probe_fencing(srv->bucket, err, errcap)) != HANU_ERR_IO) break;
    if (rc == HANU_ERR_UNSUPPORTED && srv->opt.unsafe_no_fencing) {
        hlog_warn("server", "%s; starting anyway (--unsafe-no-fencing): two writers on this bucket "
                "would overwrite each other's segments and lose acknowledged writes", err);
        return HANU_OK;
    }
    if (rc == HANU_ERR_UNSUPPORTED) {
        size_t n = strlen(err);
        snprintf(err + n, errcap - n, "; refusing to write to it (serve --unsafe-no-fencing starts anyway, "
                 "for one writer only)");
    }
    return rc;
}

void server_log_write_failure(const char *face, const char *what, int rc)
{
    static hlog_limiter nospace, stopped, other;
    hlog_limiter *l = rc == HANU_ERR_NOSPACE ? &nospace : rc == HANU_ERR_STOPPED ? &stopped : &other;
    hlog_limited(l, 10000, HLOG_ERROR, face, "a write to %s failed: %s%s", what, hanu_status_str(rc),
                 rc == HANU_ERR_NOSPACE ? " (the data directory's disk is full)"
                 : rc == HANU_ERR_STOPPED ? " (the log failed earlier; restart the server)" : "");
}

/* The bucket's own lines (failed writes, retries; rate limited there): the sealer's
   failed puts reach the log this way. */
static void log_bucket(void *ctx, const char *line)
{
    (void)ctx;
    hlog_warn("bucket", "%s", line);
}

/* The bucket itself, before the store: a rebuild reads it first. */
int server_bucket_open(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    bucket_options bo;
    bucket_options_default(&bo);
    bo.latency_put_ms = o->bucket_latency_put_ms;
    bo.latency_get_ms = o->bucket_latency_get_ms;
    bo.fail_rate = o->bucket_fail_rate;
    bo.timeout_rate = o->bucket_timeout_rate;
    bo.ignore_conditions = o->bucket_ignore_conditions ? BUCKET_IGNORE_IF_NONE_MATCH | BUCKET_IGNORE_IF_MATCH : 0;
    if (o->bucket_connect_timeout_ms) bo.connect_timeout_ms = o->bucket_connect_timeout_ms;
    if (o->bucket_request_timeout_ms) bo.request_timeout_ms = o->bucket_request_timeout_ms;
    bo.log = log_bucket;
    int rc = o->bucket_url2 ? bucket_twin_open(o->bucket_url, o->bucket_url2, &bo, &srv->bucket, err, errcap)
                            : bucket_open(o->bucket_url, &bo, &srv->bucket, err, errcap);
    if (rc == HANU_OK && !o->follow) rc = probe_fencing(srv, err, errcap);
    if (rc != HANU_OK && srv->bucket) {
        bucket_close(srv->bucket);
        srv->bucket = NULL;
    }
    return rc;
}

/* A plain writer about to rebuild: a chain extended within the window was most
   likely extended by a writer still running (a second server started by mistake on
   an empty directory), which the rebuilt one would fence. Refused unless --takeover.
   The stamp is the other writer's wall clock: one ahead of ours counts as now. A
   damaged last segment is left to the rebuild, which reports it (exit 4); a bucket
   that cannot be read stops the start. */
static int refuse_live_writer(server *srv, char *err, size_t errcap)
{
    segment_header h;
    if (srv->opt.takeover) return HANU_OK;
    int rc = chain_last_segment(srv->bucket, &h, err, errcap);
    if (rc == HANU_ERR_CORRUPT || rc == HANU_ERR_NOT_FOUND) {
        err[0] = '\0';
        return HANU_OK;
    }
    if (rc) return rc;
    uint64_t now = hanu_wall_ms(), age = now > h.timestamp_ms ? now - h.timestamp_ms : 0;
    uint64_t window = HANU_MAX((uint64_t)SERVER_TAKEOVER_WINDOW_MS, 3ull * srv->opt.seal_interval_ms);
    if (age >= window) return HANU_OK;
    srv->writer_live = 1;
    snprintf(err, errcap, "the bucket's chain was extended %.1f s ago by another writer (segment %llu, txn %llu), "
             "less than %.0f s ago: it is likely still running and would be fenced; if that writer is gone, "
             "start with --takeover (or wait %.0f s)", (double)age / 1000.0, (unsigned long long)h.sequence,
             (unsigned long long)h.last_txn, (double)window / 1000.0, (double)(window - age) / 1000.0);
    return HANU_ERR_BUSY;
}

/* Before the store opens: whether DATA is to be rebuilt from the bucket (empty, or an
   unfinished rebuild), and if so the directory and the snapshot's files. */
static int rebuild_begin(server *srv, int *rebuilding, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    const char *data = o->store.data_dir ? o->store.data_dir : ".";
    *rebuilding = 0;
    if (!o->bucket_url) return HANU_OK;
    int rc = server_bucket_open(srv, err, errcap);
    /* A follower or standby on an empty directory starts from the newest snapshot (so
       that retention may remove the chain's start) and then follows the chain itself
       (follower.h); it must not move its numbering as a rebuilt writer does. */
    if (rc == HANU_OK && (o->follow || o->lease)) {
        int wanted = 0;
        rc = rebuild_wanted(data, srv->bucket, &wanted, err, errcap);
        if (rc == HANU_OK && wanted) rc = rebuild_prepare(data, srv->bucket, 0, 0, 0, &srv->rebuild, err, errcap);
        return rc;
    }
    if (rc == HANU_OK) rc = rebuild_wanted(data, srv->bucket, rebuilding, err, errcap);
    if (rc || !*rebuilding) return rc;
    if ((rc = refuse_live_writer(srv, err, errcap)) != HANU_OK) return rc;
    srv->rebuild_started_ns = hanu_now_ns();
    rc = rebuild_prepare(data, srv->bucket, 0, 0, 1, &srv->rebuild, err, errcap);
    if (rc == HANU_OK && srv->rebuild.resumed)
        hlog_info("server", "%s holds an interrupted rebuild (%s): resuming it from %s before serving", data,
                REBUILD_MARKER, o->bucket_url);
    else if (rc == HANU_OK)
        hlog_info("server", "%s is empty and %s holds a chain: rebuilding before serving", data, o->bucket_url);
    return rc;
}

/* After the store and the index opened: the chain replayed to its end, the sealer's
   watermark at the end, numbering moved above anything the lost machine handed out. */
static int rebuild_end(server *srv, char *err, size_t errcap)
{
    const char *data = srv->opt.store.data_dir ? srv->opt.store.data_dir : ".";
    rebuild_replay_options ro = { .who = "rebuild" };
    int rc = rebuild_replay(srv->store, srv->bucket, &ro, &srv->rebuild, err, errcap);
    if (rc == HANU_OK) rc = rebuild_finish(srv->store, srv->bucket, data, &srv->rebuild, err, errcap);
    if (rc) return rc;
    srv->rebuild.ms = (hanu_now_ns() - srv->rebuild_started_ns) / 1000000;
    srv->rebuilt = 1;
    hlog_info("server", "rebuilt from the bucket in %llu ms (fetch %llu ms, replay %llu ms, CPU %llu ms): "
            "%llu segments, %llu records up to txn %llu; new writes get txns from %llu",
            (unsigned long long)srv->rebuild.ms, (unsigned long long)srv->rebuild.fetch_ms,
            (unsigned long long)srv->rebuild.replay_ms, (unsigned long long)srv->rebuild.cpu_ms,
            (unsigned long long)srv->rebuild.segments,
            (unsigned long long)srv->rebuild.records, (unsigned long long)srv->rebuild.last_txn,
            (unsigned long long)srv->rebuild.next_txn);
    return HANU_OK;
}

/* Opens the bucket and starts the sealer when --bucket is given; a follower or a
   standby opens its follower instead (server_role.c). */
static int open_bucket(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    if (o->follow || o->lease) return server_role_open(srv, err, errcap);
    if (!o->bucket_url) return HANU_OK;
    int rc = srv->bucket ? HANU_OK : server_bucket_open(srv, err, errcap);
    if (rc) return rc;
    if (o->bucket_url2 && (rc = remirror_twin(srv->bucket, err, errcap)) != HANU_OK) {
        bucket_close(srv->bucket);
        srv->bucket = NULL;
        return rc;
    }
    sealer_options so;
    sealer_options_default(&so);
    so.seal_interval_ms = o->seal_interval_ms ? o->seal_interval_ms : 1000;
    if (o->seal_mb) so.seal_bytes = (uint64_t)o->seal_mb << 20;
    so.on_sealed = server_on_sealed;
    so.ctx = srv;
    rc = sealer_open(srv->store, srv->bucket, &so, &srv->sealer, err, errcap);
    if (rc) {
        bucket_close(srv->bucket);
        srv->bucket = NULL;
        return rc;
    }
    uint64_t sealed = sealer_sealed_txn(srv->sealer);
    hlog_info("server", "sealing the log into %s (bucket holds txns up to %llu)", o->bucket_url,
            (unsigned long long)sealed);
    atomic_store(&srv->sealed_txn, sealed);
    srv->waits.reached[WAIT_BUCKET] = sealed;
    return HANU_OK;
}

/* Loop thread: the snapshotter asked for the active log file to be sealed (the
   loop is the store's writer thread, so no write lands in between). */
static void on_snapshot_messages(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, snap_receiver, receiver);
    while (!h2o_linklist_is_empty(messages)) h2o_linklist_unlink(messages->next);
    pthread_mutex_lock(&srv->snap_mu);
    if (srv->snap_rotate_asked && !srv->snap_refuse) {
        uint64_t t0 = hanu_now_ns();
        srv->snap_rotate_rc = snapshot_rotate_here(srv->store, &srv->snap_rotate_txn, &srv->snap_rotate_file);
        srv->snap_loop_us_last = (hanu_now_ns() - t0) / 1000;
        if (srv->snap_loop_us_last > srv->snap_loop_us_max) srv->snap_loop_us_max = srv->snap_loop_us_last;
        srv->snap_rotate_asked = 0;
        srv->snap_rotate_done = 1;
        pthread_cond_broadcast(&srv->snap_cv);
    }
    pthread_mutex_unlock(&srv->snap_mu);
}

/* Snapshot thread: has the loop rotate and waits for it (STOPPED once the loop
   no longer serves it, at shutdown). */
static int rotate_on_loop(void *ctx, uint64_t *txn, uint32_t *active_file)
{
    server *srv = ctx;
    pthread_mutex_lock(&srv->snap_mu);
    int refused = srv->snap_refuse;
    srv->snap_rotate_asked = !refused;
    srv->snap_rotate_done = 0;
    pthread_mutex_unlock(&srv->snap_mu);
    if (refused) return HANU_ERR_STOPPED;
    h2o_multithread_send_message(&srv->snap_receiver, &srv->snap_msg);
    pthread_mutex_lock(&srv->snap_mu);
    while (!srv->snap_rotate_done && !srv->snap_refuse) pthread_cond_wait(&srv->snap_cv, &srv->snap_mu);
    int rc = srv->snap_rotate_done ? srv->snap_rotate_rc : HANU_ERR_STOPPED;
    *txn = srv->snap_rotate_txn;
    *active_file = srv->snap_rotate_file;
    pthread_mutex_unlock(&srv->snap_mu);
    return rc;
}

/* Snapshot thread: the index commits up to txn (its files go in the snapshot). */
static int index_commit_for_snapshot(void *ctx, uint64_t txn)
{
    server *srv = ctx;
    return indexer_wait_txn(srv->indexer, txn, 600000);   /* a large backlog takes minutes */
}

/* Starts the snapshotter once the sealer runs (--bucket, or a promotion). */
int server_snapshots_open(server *srv, char *err, size_t errcap)
{
    if (!srv->sealer || srv->snapshotter) return HANU_OK;
    pthread_mutex_init(&srv->snap_mu, NULL);
    pthread_cond_init(&srv->snap_cv, NULL);
    h2o_multithread_register_receiver(srv->queue, &srv->snap_receiver, on_snapshot_messages);
    snapshot_options so;
    snapshot_options_default(&so);
    so.data_dir = srv->opt.store.data_dir ? srv->opt.store.data_dir : ".";
    /* With --no-index there is no index to wait for nor to copy (a restored node
       builds its own from the log). */
    so.index_dir = srv->indexer ? "index" : NULL;
    so.every_segments = srv->opt.snapshot_segments;
    so.interval_ms = srv->opt.snapshot_interval_ms;
    so.retain_ms = srv->opt.retain_ms;
    so.max_bytes = srv->opt.retain_max_bytes;
    so.rotate = rotate_on_loop;
    so.index_commit = srv->indexer ? index_commit_for_snapshot : NULL;
    so.ctx = srv;
    int rc = snapshot_open(srv->store, srv->bucket, srv->sealer, &so, &srv->snapshotter, err, errcap);
    if (rc != HANU_OK) h2o_multithread_unregister_receiver(srv->queue, &srv->snap_receiver);
    return rc;
}

/* Before the sealer closes: no more rotations, the thread stopped. */
static void close_snapshots(server *srv)
{
    if (!srv->snapshotter) return;
    pthread_mutex_lock(&srv->snap_mu);
    srv->snap_refuse = 1;
    pthread_cond_broadcast(&srv->snap_cv);
    pthread_mutex_unlock(&srv->snap_mu);
    snapshot_close(srv->snapshotter);
    srv->snapshotter = NULL;
    h2o_multithread_unregister_receiver(srv->queue, &srv->snap_receiver);
}

/* Loop thread. */
static void on_durable_messages(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, durable_receiver, receiver);
    while (!h2o_linklist_is_empty(messages)) h2o_linklist_unlink(messages->next);
    atomic_store(&srv->durable_msg_pending, 0);
    server_role_tick(srv);
    server_poll_durable(srv);
    /* the index published: e.g. fresh queries held for it */
    for (size_t i = 0; i < srv->nfaces; i++)
        if (srv->faces[i]->wake) srv->faces[i]->wake(srv);
}

static void on_signal(h2o_socket_t *sock, const char *err)
{
    server *srv = sock->data;
    (void)err;
    /* Whole signalfd_siginfo records: SIGHUP reopens the log files, the others stop. */
    size_t n = sock->input->size / sizeof(struct signalfd_siginfo);
    for (size_t i = 0; i < n; i++) {
        struct signalfd_siginfo si;   /* copied: h2o's buffer need not be aligned for it */
        memcpy(&si, sock->input->bytes + i * sizeof si, sizeof si);
        if (si.ssi_signo == SIGHUP) {
            hlog_reopen();
            continue;
        }
        if (!srv->stopping) hlog_info("server", "shutting down: finishing in-flight requests");
        srv->stopping = 1;
    }
    h2o_buffer_consume(&sock->input, n * sizeof(struct signalfd_siginfo));
}

/* The indexer follows the store from DATA/index on its own thread. */
static int open_index(server *srv, char *err, size_t errcap)
{
    if (srv->opt.no_index) return HANU_OK;
    const char *data = srv->opt.store.data_dir ? srv->opt.store.data_dir : ".";
    size_t n = strlen(data) + sizeof "/index";
    char *dir = malloc(n);
    if (!dir) return HANU_ERR_NOMEM;
    snprintf(dir, n, "%s/index", data);
    indexer_options io;
    indexer_options_default(&io);
    io.dir = dir;
    io.commit_interval_ms = srv->opt.index_commit_ms;
    io.nice = srv->opt.index_nice;
    index_bitset_cache_configure(srv->opt.filter_cache_bytes);
    io.merge_policy = srv->opt.merge_policy;
    io.max_segment_bytes = srv->opt.index_max_segment_bytes;
    io.doc_cache_bytes = srv->opt.doc_cache_bytes;
    io.on_publish = on_index_published;
    io.publish_ctx = srv;
    int rc = indexer_open(srv->store, &io, &srv->indexer, err, errcap);
    free(dir);
    return rc;
}

/* The store and the index on DATA (once a rebuild's snapshot is in place). */
static int open_data(server *srv, const store_options *so, char *err, size_t errcap)
{
    char why[1024] = "";
    int rc = store_open(so, &srv->store, why, sizeof why);
    if (rc) {
        snprintf(err, errcap, "cannot open the store: %s", why[0] ? why : hanu_status_str(rc));
        return rc;
    }
    atomic_store(&srv->durable_txn, store_durable_txn(srv->store));
    waiters_init(&srv->waits, store_durable_txn(srv->store));
    srv->fresh_start_txn = store_last_txn(srv->store);
    srv->fresh_start_record = store_last_record_txn(srv->store);
    if ((rc = open_index(srv, why, sizeof why)) != HANU_OK) {
        snprintf(err, errcap, "cannot open the index: %s", why);
        store_close(srv->store);
        srv->store = NULL;
    }
    return rc;
}

/* A follower or standby whose data directory is behind the bucket's retention (the
   follower refused it with NOT_FOUND) re-boots from the newest snapshot, as on an empty
   directory. Everything in a follower's directory came from the bucket, so it is
   discarded; a directory that ran a sealer (a writer's, or a promoted standby's) may
   hold writes the bucket lacks and is refused as before. */
static int reboot_behind(server *srv, const store_options *so, const char *why, char *err, size_t errcap)
{
    const char *data = so->data_dir ? so->data_dir : ".";
    store_watermark wm[16];
    size_t n = store_watermark_list(srv->store, wm, 16);
    for (size_t i = 0; i < n && i < 16; i++)
        if (!strcmp(wm[i].name, SEALER_WATERMARK)) {
            hlog_error("server", "%s ran a sealer: a writer's directory may hold writes the bucket lacks, so it "
                    "is not discarded; move it away and start again", data);
            snprintf(err, errcap, "%.900s", why);
            return HANU_ERR_NOT_FOUND;
        }
    hlog_warn("server", "%s is behind the bucket's retention (%s): discarding it and re-booting from the "
            "newest snapshot", data, why);
    indexer_close(srv->indexer);
    srv->indexer = NULL;
    store_close(srv->store);
    srv->store = NULL;
    int rebuilding = 0;
    int rc = rebuild_discard(data, err, errcap);
    if (rc == HANU_OK) rc = rebuild_begin(srv, &rebuilding, err, errcap);
    if (rc == HANU_OK) rc = open_data(srv, so, err, errcap);
    if (rc == HANU_OK) rc = open_bucket(srv, err, errcap);
    return rc;
}

/* Loop thread: a follower behind retention serves what it has for a grace period
   (_status and /metrics say why), then stops with its own exit status. A standby
   stops at once: it must not take the lease meanwhile (its promotion would refuse,
   and the group would wait out a TTL for nothing). */
void server_check_behind(server *srv)
{
    if (!atomic_load(&srv->behind_retention) || srv->stopping) return;
    uint64_t now = hanu_now_ns();
    if (!srv->behind_stop_ns) {
        uint32_t grace = srv->lease ? 0 : SERVER_BEHIND_GRACE_MS;
        srv->behind_stop_ns = now + grace * 1000000ull;
        char when[32] = "now";
        if (grace) snprintf(when, sizeof when, "in %.0f s", grace / 1000.0);
        hlog_warn("server", "this node fell behind the bucket's retention and serves stale data: stopping %s "
                "with exit status %d; started again, it re-boots from the newest snapshot", when,
                SERVER_EXIT_BEHIND_RETENTION);
    }
    if (now >= srv->behind_stop_ns) srv->stopping = 1;
}

/* Ports bound but never accepted on (a start-up that failed). */
static void unbind_faces(server *srv)
{
    for (size_t i = 0; i < srv->nfaces; i++) srv->faces[i]->unbind(srv);
}

/* Each face in turn; the first failure's err stops the rest. */
static int bind_faces(server *srv, char *err, size_t errcap)
{
    int rc = HANU_OK;
    for (size_t i = 0; rc == HANU_OK && i < srv->nfaces; i++) rc = srv->faces[i]->bind(srv, err, errcap);
    return rc;
}

static int listen_faces(server *srv, char *err, size_t errcap)
{
    int rc = HANU_OK;
    for (size_t i = 0; rc == HANU_OK && i < srv->nfaces; i++) rc = srv->faces[i]->listen(srv, err, errcap);
    return rc;
}

static size_t faces_busy(server *srv)
{
    size_t busy = 0;
    for (size_t i = 0; i < srv->nfaces; i++) busy += srv->faces[i]->busy(srv);
    return busy;
}

/* How long the loop may sleep with nothing to do. With a sealer it wakes at least once
   a second to look at it; a leader wakes when its lease would lapse without a renewal
   (every write checks the lease itself: this only notices the loss); a standby looks
   for its promotion, and a follower behind retention counts down its grace period,
   every 100 ms. An idle server on the defaults wakes once a second. */
static int loop_wait_ms(server *srv)
{
    if (srv->behind_stop_ns || (srv->lease && srv->role != ROLE_LEADER)) return 100;
    int ms = srv->sealer ? 1000 : INT32_MAX;
    if (srv->lease) {
        uint64_t until = lease_keeper_valid_until(srv->lease), now = hanu_now_ns();
        uint64_t left = until > now ? (until - now) / 1000000u + 1 : 0;
        if (left < (uint64_t)ms) ms = (int)left;
    }
    return ms;
}

int server_run(const server_options *o, const server_face *const *faces, size_t nfaces)
{
    server *srv = calloc(1, sizeof *srv);
    if (!srv) return 2;
    srv->opt = *o;
    srv->faces = faces;
    srv->nfaces = nfaces;
    srv->limits = (kv_limits){ o->store.max_key ? o->store.max_key : 1024,
                               o->store.max_value ? o->store.max_value : (1u << 20), o->max_frame };
    h2o_linklist_init_anchor(&srv->conns);

    /* Signals go to a signalfd on the loop; block them before any thread starts so
       every thread inherits the mask. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv->loop = h2o_evloop_create();
    srv->queue = h2o_multithread_create_queue(srv->loop);
    h2o_multithread_register_receiver(srv->queue, &srv->durable_receiver, on_durable_messages);
    h2o_timeout_init(srv->loop, &srv->sweep_timeout, 1000);

    store_options so = o->store;
    so.on_durable = on_durable_from_log;
    so.ctx = srv;
    char err[1024] = "";
    /* What can fail on its own goes before anything is made on disk (the data
       directory, DATA.bucket): both ports, the tokens and the certificate, and
       another server holding the directory. The ports only accept once the
       store is open; connections made meanwhile wait in the backlog. */
    srv->kv_fd = srv->http_fd = -1;
    /* Tokens guard both faces, so they load whether HTTP is on or not. */
    int rc = auth_tokens_load(&srv->tokens, o->tokens_file, o->tokens, err, sizeof err);
    if (rc == HANU_OK) rc = bind_faces(srv, err, sizeof err);
    if (rc == HANU_OK) rc = store_lock_check(so.data_dir ? so.data_dir : ".", err, sizeof err);
    if (rc) {
        hlog_error("server", "%s", err);
        unbind_faces(srv);
        return 2;
    }
    int rebuilding = 0;
    rc = rebuild_begin(srv, &rebuilding, err, sizeof err);
    if (rc) {
        hlog_error("server", "bucket %s: %s", o->bucket_url, err[0] ? err : hanu_status_str(rc));
        bucket_close(srv->bucket);
        return srv->writer_live ? SERVER_EXIT_WRITER_LIVE : 2;
    }
    if (open_data(srv, &so, err, sizeof err) != HANU_OK) {
        hlog_error("server", "%s", err);
        return 2;
    }
    if (rebuilding && (rc = rebuild_end(srv, err, sizeof err)) != HANU_OK) {
        hlog_error("server", "rebuild from %s failed: %s", o->bucket_url, err[0] ? err : hanu_status_str(rc));
        bucket_close(srv->bucket);
        indexer_close(srv->indexer);
        store_close(srv->store);
        return rc == HANU_ERR_CORRUPT ? SERVER_EXIT_BROKEN_CHAIN : 2;
    }
    rc = open_bucket(srv, err, sizeof err);
    if (rc == HANU_ERR_NOT_FOUND && (o->follow || o->lease)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", err);
        rc = reboot_behind(srv, &so, why, err, sizeof err);
    }
    if (rc != HANU_OK) {
        hlog_error("server", "bucket %s: %s", o->bucket_url, err[0] ? err : hanu_status_str(rc));
        indexer_close(srv->indexer);
        store_close(srv->store);
        return rc == HANU_ERR_FENCED ? SERVER_EXIT_FENCED : 2;
    }
    if ((rc = server_snapshots_open(srv, err, sizeof err)) != HANU_OK) {
        hlog_error("server", "snapshots: %s", err[0] ? err : hanu_status_str(rc));
        sealer_close(srv->sealer);
        bucket_close(srv->bucket);
        indexer_close(srv->indexer);
        store_close(srv->store);
        return 2;
    }
    if (listen_faces(srv, err, sizeof err) != HANU_OK) {
        hlog_error("server", "%s", err);
        auth_tokens_free(&srv->tokens);
        server_role_close(srv);
        close_snapshots(srv);
        sealer_close(srv->sealer);
        bucket_close(srv->bucket);
        indexer_close(srv->indexer);
        store_close(srv->store);
        return 2;
    }
    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    h2o_socket_t *sig = h2o_evloop_socket_create(srv->loop, sfd, 0);
    sig->data = srv;
    h2o_socket_read_start(sig, on_signal);

    uint64_t sealer_checked_ns = 0;
    while (!srv->stopping) {
        h2o_evloop_run(srv->loop, loop_wait_ms(srv));
        server_role_tick(srv);
        server_check_behind(srv);
        if (srv->sealer && hanu_now_ns() - sealer_checked_ns > 1000000000ull) {
            sealer_checked_ns = hanu_now_ns();
            server_check_sealer(srv);
        }
        /* One pwrite for every write of this iteration; answers of `none` writes
           leave only now (a failed pwrite fails them through on_durable instead). */
        if (store_flush(srv->store) == HANU_OK)
            waiters_advance(&srv->waits, WAIT_WRITTEN, store_written_txn(srv->store), 0);
    }

    /* Graceful shutdown: no new connections or requests, answer what was asked. */
    for (size_t i = nfaces; i-- > 0;) faces[i]->shutdown_begin(srv);
    store_sync(srv->store);
    /* Bucket answers can still go; not after the lease was lost (another node may write now). */
    if (srv->sealer && !srv->fenced && !srv->lease_lost) sealer_seal_upto(srv->sealer, store_written_txn(srv->store));
    uint64_t deadline = hanu_now_ns() + 5000000000ull;
    while (faces_busy(srv) && hanu_now_ns() < deadline)
        h2o_evloop_run(srv->loop, 50);
    /* Let h2o flush the answers it was handed. */
    for (int i = 0; i < 10; i++) h2o_evloop_run(srv->loop, 10);
    for (size_t i = nfaces; i-- > 0;) faces[i]->stop(srv);
    h2o_socket_read_stop(sig);
    h2o_socket_close(sig);
    h2o_evloop_run(srv->loop, 0);
    close_snapshots(srv);        /* before the sealer and the store it uses */
    sealer_close(srv->sealer);   /* before the store it reads */
    srv->sealer = NULL;
    server_role_close(srv);      /* after the last seal: may hand the lease on; before the store */
    bucket_close(srv->bucket);
    indexer_close(srv->indexer);   /* before the store it follows */
    store_close(srv->store);
    /* The sealer's and the commit thread's last messages may still be queued (h2o
       asserts none is left when the receiver goes): take them now that no thread is
       left to send more. */
    h2o_evloop_run(srv->loop, 0);
    hlog_info("server", "stopped cleanly");
    h2o_multithread_unregister_receiver(srv->queue, &srv->durable_receiver);
    hanu_buf_free(&srv->scratch);
    free(srv->ops_scratch);
    auth_tokens_free(&srv->tokens);
    int status = srv->fenced ? SERVER_EXIT_FENCED : srv->lease_lost ? SERVER_EXIT_LEASE_LOST
               : atomic_load(&srv->behind_retention) ? SERVER_EXIT_BEHIND_RETENTION
               : atomic_load(&srv->promotion_failed) ? 2 : 0;
    return status;
}
