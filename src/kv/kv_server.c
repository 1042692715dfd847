/*
 * kv_server.c: key-value protocol connections on the event loop.
 *
 * Every connection reads frames, runs them against the store and appends the
 * responses, in request order, to its output buffer. A response to a write at
 * durability `local` is a gate: it and everything after it on that connection
 * wait until the log reports its txn durable, so answers stay in order and no
 * write is acknowledged before its fdatasync. A write at durability `none` is
 * gated too, until the frame is in the page cache: in a preallocated file the
 * frame waits in the log's buffer until the loop's store_flush at the end of
 * the iteration, so a process crash cannot lose an answered write and a failed
 * pwrite never yields Ok. The gates, the output and its flow control are the
 * core's (server/gated_conn.h, shared with the Redis face). Nothing here blocks
 * the loop.
 *
 * With --tokens a connection must present a token (the Auth op) before anything
 * but Ping and Close; the token's scope and read-only flag then apply to every op,
 * as tokens.h rules them for HTTP too.
 */
#include "kv/kv.h"
#include "server/gated_conn.h"
#include "hlog/hlog.h"
#include "docs/docs.h"
#include "kvlist/kvlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Failed Auth ops a connection may make; the last one's answer closes it, so that
   guessing costs a connection (and its handshake) every few tries. */
#define KV_AUTH_MAX_FAILURES 3
/* The largest payload read before Auth (an Auth's): nothing bigger is buffered
   for a client that has not shown a token. */
#define KV_PREAUTH_PAYLOAD_MAX (1u + HKV_AUTH_TOKEN_MAX)
#define KV_MSG_AUTH_FIRST "authenticate first: this server has --tokens; send Auth (op 0x14) with a token"
/* The expiry sweep (store_expire_sweep): every tick it looks at a bounded slice of
   the keys with an expiry and deletes the expired ones with one record, so it
   never holds the loop long (a few hundred microseconds at most). */
#define KV_TTL_TICK_MS 100
#define KV_TTL_SCAN_PER_TICK 2048
#define KV_TTL_DELETE_PER_TICK 512
/* The Redis lists' reclaim pass (kvlist_gc_step) looks at this many records of the
   system database per tick: a whole pass over a million chunks takes minutes, and a
   tick costs a few hundred microseconds at most. */
#define KV_LIST_GC_SCAN_PER_TICK 1024

struct kv_conn {
    gated_conn gc;              /* first: sock->data points at both */
    uint64_t discard;           /* payload bytes of a refused frame still to skip */
    const auth_token *token;    /* the Auth op's token; NULL before it or without --tokens */
    unsigned auth_failures;
    uint64_t last_active_ns;
};

static void on_read(h2o_socket_t *sock, const char *err);
static void process_input(kv_conn *c);

static void conn_free(gated_conn *gc)
{
    gc->srv->nconns--;
    free(gc);
}

static void conn_resume(gated_conn *gc) { process_input((kv_conn *)gc); }

static const gated_ops kv_conn_ops = { .on_read = on_read, .resume = conn_resume, .close = conn_free };

static void respond_msg(kv_conn *c, uint8_t status, const char *msg)
{
    kv_respond(&c->gc.out, status, msg, strlen(msg));
    c->gc.srv->errors++;
}

/* Maps a store error to the protocol's answer. */
static void respond_store_error(kv_conn *c, const kv_request *r, int rc, int key_op)
{
    switch (rc) {
    case HANU_ERR_NOT_FOUND:
        kv_respond(&c->gc.out, key_op ? HKV_WIRE_KEY_NOT_FOUND : HKV_WIRE_DB_NOT_FOUND, NULL, 0);
        return;
    case HANU_ERR_EXISTS:
        kv_respond(&c->gc.out, key_op ? HKV_WIRE_KEY_ALREADY_EXISTS : HKV_WIRE_DB_ALREADY_EXISTS, NULL, 0);
        return;
    case HANU_ERR_TOO_LARGE: respond_msg(c, HKV_WIRE_PAYLOAD_TOO_LARGE, "request exceeds a size limit"); return;
    case HANU_ERR_INVALID: respond_msg(c, HKV_WIRE_INVALID_REQUEST, "invalid request"); return;
    default:
        respond_msg(c, HKV_WIRE_INTERNAL_ERROR, hanu_status_str(rc));
        if (rc != HANU_ERR_NOMEM) {
            char name[80];
            snprintf(name, sizeof name, "database \"%.*s\"", r->db ? (int)r->db_len : 7,
                     r->db ? (const char *)r->db : "default");
            server_log_write_failure("kv", name, rc);
        }
        return;
    }
}

static void respond_refused(kv_conn *c, const docs_error *e)
{
    respond_msg(c, e->status == 413 ? HKV_WIRE_PAYLOAD_TOO_LARGE : HKV_WIRE_INVALID_REQUEST, e->message);
}

/* Answers a successful write: Ok + token, gated on durability when asked. */
static void respond_written(kv_conn *c, uint64_t txn, uint8_t durability)
{
    size_t start = c->gc.out.len;
    kv_respond_token(&c->gc.out, HKV_WIRE_OK, txn);
    gated_gate_write(&c->gc, start, txn, durability);
}

/* Sends the JSON object built in srv->scratch, or an internal error. */
static void respond_json(kv_conn *c, const json_writer *w)
{
    hanu_buf *b = &c->gc.srv->scratch;
    if (json_writer_status(w) != HANU_OK) respond_msg(c, HKV_WIRE_INTERNAL_ERROR, "cannot build the answer");
    else kv_respond(&c->gc.out, HKV_WIRE_OK, (const char *)b->data, b->len);
}

static void respond_stats(kv_conn *c)
{
    server *srv = c->gc.srv;
    uint64_t list_chunks = 0, list_owners = 0;   /* a scan of the system database: STATS is not hot */
    kvlist_count(srv->store, &list_chunks, &list_owners);
    store_stats st;
    store_get_stats(srv->store, &st);
    json_writer w;
    srv->scratch.len = 0;
    json_writer_init(&w, &srv->scratch);
    json_write_object_begin(&w);
    const server_json_field f[] = {
        { "keys", st.keys }, { "databases", st.databases }, { "files", st.files },
        { "disk_bytes", st.disk_bytes }, { "dead_bytes", st.dead_bytes }, { "memory_bytes", st.memory_bytes },
        { "log_bytes_written", st.log_bytes_written }, { "prealloc_bytes", st.prealloc_bytes },
        { "syncs", st.syncs }, { "sync_us", st.sync_ns / 1000 }, { "frames", st.frames },
        { "rotations", st.rotations }, { "compactions", st.compactions },
        { "compaction_lock_max_us", st.compaction_lock_max_us }, { "last_txn", st.last_txn },
        { "durable_txn", st.durable_txn }, { "startup_ms", st.startup_ms }, { "connections", srv->nconns },
        { "connections_total", srv->connections_total }, { "requests", srv->requests },
        { "errors", srv->errors }, { "keys_expired", srv->keys_expired },
        { "list_chunks", list_chunks }, { "list_owners", list_owners },
        { "list_records_reclaimed", srv->list_records_reclaimed }
    };
    server_json_fields(&w, f, sizeof f / sizeof *f);
    json_write_key(&w, "store_failed", 12);
    json_write_bool(&w, store_failed(srv->store));
    json_write_object_end(&w);
    respond_json(c, &w);
}

static void respond_info(kv_conn *c, uint32_t id)
{
    store_db_info info;
    if (store_db_info_get(c->gc.srv->store, id, &info) != HANU_OK) {
        kv_respond(&c->gc.out, HKV_WIRE_DB_NOT_FOUND, NULL, 0);
        return;
    }
    json_writer w;
    c->gc.srv->scratch.len = 0;
    json_writer_init(&w, &c->gc.srv->scratch);
    json_write_object_begin(&w);
    json_write_key(&w, "name", 4);
    json_write_string(&w, info.name, strlen(info.name));
    const server_json_field f[] = {
        { "id", info.id }, { "keys", info.keys }, { "expiring", info.expiring }, { "bytes", info.bytes },
        { "memory", info.memory }
    };
    server_json_fields(&w, f, sizeof f / sizeof *f);
    json_write_object_end(&w);
    respond_json(c, &w);
}

/* Auth: without --tokens any token is Ok (a client set up with one works against
   both kinds of server); with them, an unknown token is Unauthorized, leaves the
   connection unauthenticated, and the KV_AUTH_MAX_FAILURES-th closes it. The
   token itself is never logged nor echoed. */
static void respond_auth(kv_conn *c, const kv_request *r)
{
    server *srv = c->gc.srv;
    if (!srv->tokens.n) { kv_respond(&c->gc.out, HKV_WIRE_OK, NULL, 0); return; }
    c->token = auth_tokens_find(&srv->tokens, r->secret, r->secret_len);
    if (c->token) { kv_respond(&c->gc.out, HKV_WIRE_OK, NULL, 0); return; }
    if (++c->auth_failures < KV_AUTH_MAX_FAILURES) { respond_msg(c, HKV_WIRE_UNAUTHORIZED, "unknown token"); return; }
    respond_msg(c, HKV_WIRE_UNAUTHORIZED, "unknown token; too many failed Auth ops, closing the connection");
    c->gc.close_after_flush = 1;
}

/* Whether the connection's token lets op at r's database through; else the
   Forbidden answer is sent. Ops without a database (Stats) need only a token. */
static int token_allows(kv_conn *c, const kv_request *r, int is_write)
{
    if (!c->token || !r->db || auth_token_allows(c->token, (const char *)r->db, r->db_len, is_write))
        return 1;
    char msg[160];
    if (is_write && !c->token->read_write)
        snprintf(msg, sizeof msg, "a read-only token cannot write");
    else if (store_db_name_valid((const char *)r->db, r->db_len))
        snprintf(msg, sizeof msg, "the token does not cover the database \"%.*s\"", (int)r->db_len, (const char *)r->db);
    else
        snprintf(msg, sizeof msg, "the token does not cover that database");
    respond_msg(c, HKV_WIRE_FORBIDDEN, msg);
    return 0;
}

static int ensure_ops(server *srv, size_t n)
{
    if (n <= srv->ops_cap) return HANU_OK;
    void *p = realloc(srv->ops_scratch, n * sizeof(store_op));
    if (!p) return HANU_ERR_NOMEM;
    srv->ops_scratch = p;
    srv->ops_cap = n;
    return HANU_OK;
}

static void handle_request(kv_conn *c, uint8_t op, uint8_t flags, const uint8_t *payload, uint32_t len)
{
    server *srv = c->gc.srv;
    store *st = srv->store;
    kv_request r;
    const char *why = "invalid request";
    srv->requests++;
    /* Before Auth only Ping and Close: not even a parse error tells a stranger anything. */
    if (srv->tokens.n && !c->token && op != HKV_OP_PING && op != HKV_OP_CLOSE && op != HKV_OP_AUTH) {
        respond_msg(c, HKV_WIRE_UNAUTHORIZED, KV_MSG_AUTH_FIRST);
        return;
    }
    int rc = kv_parse_request(op, flags, payload, len, &srv->limits, &r, &why);
    if (rc) {
        respond_msg(c, rc == HANU_ERR_TOO_LARGE ? HKV_WIRE_PAYLOAD_TOO_LARGE : HKV_WIRE_INVALID_REQUEST, why);
        return;
    }
    if (op == HKV_OP_AUTH) { respond_auth(c, &r); return; }
    int is_write = kv_op_writes(op);
    /* Before DbNotFound, so that a token cannot probe names outside its scope. */
    if (!token_allows(c, &r, is_write)) return;
    if (is_write && !server_accepts_writes(srv)) {
        /* InvalidRequest keeps old clients working; the message starts with the code. */
        char url[LEASE_URL_MAX + 1], msg[LEASE_URL_MAX + 160];
        int known = server_leader_url(srv, url, sizeof url);
        snprintf(msg, sizeof msg, "not_leader: this node is %s and accepts no writes; the leader is %s",
                 server_not_leader_why(srv),
                 known ? url : "unknown here");
        respond_msg(c, HKV_WIRE_INVALID_REQUEST, msg);
        return;
    }
    if (is_write && r.durability == HKV_DUR_BUCKET && !srv->sealer) {
        respond_msg(c, HKV_WIRE_INVALID_REQUEST, "bucket durability is not available (start the server with --bucket URL)");
        return;
    }
    if (is_write && srv->stopping) {
        respond_msg(c, HKV_WIRE_INTERNAL_ERROR, "server is shutting down");
        return;
    }
    uint32_t db = 0;
    if (op != HKV_OP_STATS && op != HKV_OP_PING && op != HKV_OP_CLOSE && op != HKV_OP_CREATE) {
        if (store_db_lookup(st, (const char *)r.db, r.db_len, &db) != HANU_OK) {
            if (op == HKV_OP_DROP && !store_db_name_valid((const char *)r.db, r.db_len))
                respond_msg(c, HKV_WIRE_INVALID_REQUEST, "database names use only A-Z a-z 0-9 _ . -");
            else
                kv_respond(&c->gc.out, HKV_WIRE_DB_NOT_FOUND, NULL, 0);
            return;
        }
    }
    uint64_t txn = 0, current = 0;
    docs_error refused;   /* a write into a collection that is no document (docs.h) */
    switch (op) {
    case HKV_OP_STATS: respond_stats(c); return;
    case HKV_OP_PING: kv_respond(&c->gc.out, HKV_WIRE_PONG, NULL, 0); return;
    case HKV_OP_CLOSE:
        kv_respond(&c->gc.out, HKV_WIRE_OK, NULL, 0);
        c->gc.close_after_flush = 1;
        return;
    case HKV_OP_INFO: respond_info(c, db); return;
    case HKV_OP_CREATE:
        rc = store_db_create(st, (const char *)r.db, r.db_len, STORE_DB_KV, &txn);
        if (rc == HANU_ERR_INVALID) { respond_msg(c, HKV_WIRE_INVALID_REQUEST, "database names use only A-Z a-z 0-9 _ . -"); return; }
        if (rc) { respond_store_error(c, &r, rc, 0); return; }
        respond_written(c, txn, r.durability);
        return;
    case HKV_OP_DROP:
        rc = store_db_drop(st, (const char *)r.db, r.db_len, &txn);
        if (rc == HANU_ERR_INVALID) { respond_msg(c, HKV_WIRE_INVALID_REQUEST, "the default database cannot be dropped"); return; }
        if (rc) { respond_store_error(c, &r, rc, 0); return; }
        respond_written(c, txn, r.durability);
        return;
    case HKV_OP_GET: {
        size_t start = c->gc.out.len;
        if (hanu_buf_reserve(&c->gc.out, HKV_RESP_HEADER + 8) != HANU_OK) { respond_store_error(c, &r, HANU_ERR_NOMEM, 1); return; }
        c->gc.out.len += HKV_RESP_HEADER + 8;
        rc = store_get(st, db, r.key, r.key_len, &c->gc.out, &txn);
        if (rc) {
            c->gc.out.len = start;
            respond_store_error(c, &r, rc, 1);
            return;
        }
        uint8_t *h = c->gc.out.data + start;
        h[0] = HKV_WIRE_KEY_VALUE_TOKEN;
        hanu_put_u32(h + 1, (uint32_t)(c->gc.out.len - start - HKV_RESP_HEADER));
        hanu_put_u64(h + 5, txn);
        return;
    }
    case HKV_OP_SET: case HKV_OP_SET_IF_EXISTS: case HKV_OP_SET_IF_NOT_EXISTS: case HKV_OP_COMPARE_SET:
    case HKV_OP_DELETE: case HKV_OP_COMPARE_DELETE: {
        store_op sop = { (op == HKV_OP_DELETE || op == HKV_OP_COMPARE_DELETE) ? STORE_DELETE : STORE_SET,
                         r.key, r.key_len, r.value, r.value_len };
        int cond = (op == HKV_OP_SET_IF_EXISTS || op == HKV_OP_DELETE) ? STORE_COND_EXISTS
                 : op == HKV_OP_SET_IF_NOT_EXISTS ? STORE_COND_NOT_EXISTS
                 : (op == HKV_OP_COMPARE_SET || op == HKV_OP_COMPARE_DELETE) ? STORE_COND_TOKEN
                 : STORE_COND_NONE;
        rc = docs_kv_write(st, db, &sop, 1, cond, r.token, srv->limits.max_value, &txn, &current, &refused);
        if (rc && refused.code) { respond_refused(c, &refused); return; }
        if (rc == HANU_ERR_MISMATCH) { kv_respond_token(&c->gc.out, HKV_WIRE_KEY_TOKEN_MISMATCH, current); return; }
        if (rc) { respond_store_error(c, &r, rc, 1); return; }
        respond_written(c, txn, r.durability);
        return;
    }
    case HKV_OP_SET_TTL: {
        uint8_t kind = STORE_DB_KV;
        if (store_db_kind(st, db, &kind) == HANU_OK && kind != STORE_DB_KV) {
            respond_msg(c, HKV_WIRE_INVALID_REQUEST, "a TTL is for key-value databases; this one is a collection");
            return;
        }
        store_op sop = { STORE_SET, r.key, r.key_len, r.value, r.value_len };
        uint64_t expire = store_now_ms() + r.ttl_ms;
        rc = store_write_expiring(st, db, &sop, &expire, 1, STORE_COND_NONE, 0, &txn, NULL);
        if (rc) { respond_store_error(c, &r, rc, 1); return; }
        respond_written(c, txn, r.durability);
        return;
    }
    case HKV_OP_TTL: {
        uint64_t expire = 0;
        rc = store_expiry(st, db, r.key, r.key_len, &expire, &txn);
        if (rc) { respond_store_error(c, &r, rc, 1); return; }
        uint64_t now = store_now_ms();
        uint8_t p[HKV_TTL_PAYLOAD];
        hanu_put_u64(p, txn);
        hanu_put_u64(p + 8, expire);
        hanu_put_u64(p + 16, expire ? (expire > now ? expire - now : 1) : 0);
        kv_respond(&c->gc.out, HKV_WIRE_OK, p, sizeof p);
        return;
    }
    case HKV_OP_WRITE_BATCH: {
        if (ensure_ops(srv, r.batch_count)) { respond_store_error(c, &r, HANU_ERR_NOMEM, 1); return; }
        store_op *ops = srv->ops_scratch;
        size_t pos = 0, n = 0;
        uint8_t kind;
        const uint8_t *k, *v;
        uint32_t kl, vl;
        while (kv_batch_next(&r, &pos, &kind, &k, &kl, &v, &vl))
            ops[n++] = (store_op){ kind == 0 ? STORE_SET : STORE_DELETE, k, kl, v, vl };
        rc = docs_kv_write(st, db, ops, n, STORE_COND_NONE, 0, srv->limits.max_value, &txn, NULL, &refused);
        if (rc && refused.code) { respond_refused(c, &refused); return; }
        if (rc) { respond_store_error(c, &r, rc, 1); return; }
        respond_written(c, txn, r.durability);
        return;
    }
    default:
        respond_msg(c, HKV_WIRE_INVALID_REQUEST, "unknown op code");
    }
}

/* Runs every whole frame in the socket's input, up to the output's high water. */
static void process_input(kv_conn *c)
{
    server *srv = c->gc.srv;
    h2o_socket_t *sock = c->gc.sock;
    for (;;) {
        h2o_buffer_t *in = sock->input;
        if (c->gc.close_after_flush) { h2o_buffer_consume(&sock->input, in->size); break; }
        if (c->discard) {
            size_t n = (size_t)HANU_MIN((uint64_t)in->size, c->discard);
            if (!n) break;
            h2o_buffer_consume(&sock->input, n);
            c->discard -= n;
            continue;
        }
        uint8_t op, flags;
        uint32_t len;
        if (kv_read_header((const uint8_t *)in->bytes, in->size, &op, &flags, &len)) break;
        if (srv->tokens.n && !c->token && len > KV_PREAUTH_PAYLOAD_MAX) {
            srv->requests++;
            respond_msg(c, HKV_WIRE_UNAUTHORIZED, KV_MSG_AUTH_FIRST " (a larger frame before Auth closes the connection)");
            c->gc.close_after_flush = 1;
            continue;
        }
        if (len > srv->limits.max_frame) {
            char msg[128];
            snprintf(msg, sizeof msg, "request payload of %u bytes exceeds the frame limit of %u bytes",
                     len, srv->limits.max_frame);
            srv->requests++;
            respond_msg(c, HKV_WIRE_PAYLOAD_TOO_LARGE, msg);
            h2o_buffer_consume(&sock->input, HKV_REQ_HEADER);
            c->discard = len;
            continue;
        }
        if (in->size < HKV_REQ_HEADER + (size_t)len) break;
        handle_request(c, op, flags, (const uint8_t *)in->bytes + HKV_REQ_HEADER, len);
        h2o_buffer_consume(&sock->input, HKV_REQ_HEADER + (size_t)len);
        if (c->gc.out.len > GATED_OUT_HIGH_WATER) break;
    }
    gated_after_input(&c->gc);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    kv_conn *c = sock->data;
    if (!c) return;
    if (err) { gated_close(&c->gc); return; }
    server_poll_durable(c->gc.srv);
    /* A failed sync may have closed this very connection (the socket is freed later). */
    if (!(c = sock->data)) return;
    c->last_active_ns = hanu_now_ns();
    process_input(c);
}

static void on_conn(server *srv, h2o_socket_t *sock)
{
    kv_conn *c = srv->nconns < srv->opt.max_connections ? calloc(1, sizeof *c) : NULL;
    if (!c) { h2o_socket_close(sock); return; }
    c->last_active_ns = hanu_now_ns();
    srv->nconns++;
    srv->connections_total++;
    if (srv->nconns == 1) kv_sweep_idle(srv);
    gated_open(&c->gc, srv, sock, &kv_conn_ops, &srv->conns);
}

static int kv_bind(server *srv, char *err, size_t errcap)
{
    const char *addr = srv->opt.kv_addr;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (server_parse_addr(addr, &ss, &sl) != 0) {
        snprintf(err, errcap, "cannot parse address \"%s\" (want HOST:PORT)", addr);
        return HANU_ERR_INVALID;
    }
    char shown[300];
    snprintf(shown, sizeof shown, "%s (--kv-addr)", addr);
    if (server_bind(&ss, sl, shown, &srv->kv_fd, err, errcap) != HANU_OK) return HANU_ERR_IO;
    if (!srv->tokens.n && !server_addr_is_loopback(&ss))
        hlog_warn("kv", "without --tokens the key-value protocol needs no authentication and "
                "reaches every database and collection; %s is not a loopback address", addr);
    return HANU_OK;
}

static void on_ttl_tick(h2o_timeout_entry_t *entry);

static int kv_listen(server *srv, char *err, size_t errcap)
{
    h2o_timeout_init(srv->loop, &srv->ttl_timeout, KV_TTL_TICK_MS);
    srv->ttl_entry.cb = on_ttl_tick;
    h2o_timeout_link(srv->loop, &srv->ttl_timeout, &srv->ttl_entry);
    if (server_listen(srv, &srv->kv_fd, on_conn, &srv->kv_listener) != HANU_OK) {
        snprintf(err, errcap, "out of memory");
        return HANU_ERR_NOMEM;
    }
    hlog_info("server", "key-value protocol listening on %s%s", srv->opt.kv_addr,
              srv->tokens.n ? ", tokens required (the Auth op)" : "");
    return HANU_OK;
}

/* The expiry sweep's and the list reclaim pass's tick: on the writer only (a follower
   hides expired keys on reads and replays its leader's deletes; it never deletes on
   its own). */
static void on_ttl_tick(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, ttl_entry, entry);
    size_t n = 0;
    if (!srv->stopping && server_accepts_writes(srv) &&
        store_expire_sweep(srv->store, store_now_ms(), KV_TTL_SCAN_PER_TICK, KV_TTL_DELETE_PER_TICK, &n) == HANU_OK)
        srv->keys_expired += n;
    size_t reclaimed = 0;
    if (!srv->stopping && server_accepts_writes(srv) &&
        kvlist_gc_step(srv->store, &srv->list_gc_cursor, KV_LIST_GC_SCAN_PER_TICK, &reclaimed) == HANU_OK)
        srv->list_records_reclaimed += reclaimed;
    /* With no key that has an expiry and no list record reclaimed, look once a second,
       not ten times: an idle server does not wake for nothing (reads hide a lapsed key
       meanwhile anyway). */
    if (!srv->stopping)
        h2o_timeout_link(srv->loop,
                         store_expiring_keys(srv->store) || reclaimed ? &srv->ttl_timeout : &srv->sweep_timeout,
                         &srv->ttl_entry);
}

static void kv_shutdown_begin(server *srv)
{
    if (h2o_timeout_is_linked(&srv->ttl_entry)) h2o_timeout_unlink(&srv->ttl_entry);
    server_unlisten(&srv->kv_listener);
    gated_pause_all(&srv->conns);
}

static size_t kv_busy_connections(server *srv) { return gated_busy_count(&srv->conns); }

static void kv_close_all(server *srv) { gated_close_all(&srv->conns); }

/* A start-up that failed before kv_listen: the port bound but never accepted on. */
static void kv_unbind(server *srv)
{
    if (srv->kv_fd >= 0) close(srv->kv_fd);
    srv->kv_fd = -1;
}

static void on_sweep(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, sweep_entry, entry);
    uint64_t now = hanu_now_ns(), limit = (uint64_t)srv->opt.idle_timeout_ms * 1000000ull;
    h2o_linklist_t *n = srv->conns.next;
    while (n != &srv->conns) {
        kv_conn *c = H2O_STRUCT_FROM_MEMBER(kv_conn, gc.link, n);
        n = n->next;
        if (now - c->last_active_ns > limit && !gated_has_gates(&c->gc) && !h2o_socket_is_writing(c->gc.sock))
            gated_close(&c->gc);
    }
    if (srv->nconns) kv_sweep_idle(srv);
}

/* Arms the once-a-second idle sweep; it runs only while connections exist. */
void kv_sweep_idle(server *srv)
{
    if (h2o_timeout_is_linked(&srv->sweep_entry)) return;
    srv->sweep_entry.cb = on_sweep;
    h2o_timeout_link(srv->loop, &srv->sweep_timeout, &srv->sweep_entry);
}

const server_face kv_face = {
    .name = "kv", .bind = kv_bind, .listen = kv_listen, .shutdown_begin = kv_shutdown_begin,
    .busy = kv_busy_connections, .stop = kv_close_all, .unbind = kv_unbind,
};
