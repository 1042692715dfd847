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
 * pwrite never yields Ok. A connection holds one waiter (waiters.h), queued on
 * its first closed gate. Nothing here blocks the loop.
 *
 * With --tokens a connection must present a token (the Auth op) before anything
 * but Ping and Close; the token's scope and read-only flag then apply to every op,
 * as tokens.h rules them for HTTP too.
 */
#include "server/server_internal.h"
#include "hlog/hlog.h"
#include "docs/docs.h"

#include <stdio.h>
#include <stdlib.h>

#define KV_OUT_HIGH_WATER (8u << 20)   /* stop reading a client that does not read */
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

typedef struct kv_gate {
    size_t start;          /* offset of the gated response in out */
    uint64_t txn;
    int mark;              /* enum waiter_mark: server_wait_mark of the durability asked */
} kv_gate;

struct kv_conn {
    server *srv;
    h2o_socket_t *sock;
    h2o_linklist_t link;        /* srv->conns */
    waiter wait;                /* queued on the first closed gate while there is one */
    hanu_buf out;               /* responses not yet handed to the socket */
    hanu_buf sending;           /* bytes the socket is writing now */
    kv_gate *gates;
    size_t ghead, ngates, gcap;
    uint64_t discard;           /* payload bytes of a refused frame still to skip */
    const auth_token *token;    /* the Auth op's token; NULL before it or without --tokens */
    unsigned auth_failures;
    uint64_t last_active_ns;
    int close_after_flush;
    int read_paused;
};

static void conn_flush(kv_conn *c);
static void on_read(h2o_socket_t *sock, const char *err);
static void process_input(kv_conn *c);

static void conn_close(kv_conn *c)
{
    server *srv = c->srv;
    waiters_cancel(&srv->waits, &c->wait);
    h2o_linklist_unlink(&c->link);
    srv->nconns--;
    c->sock->data = NULL;
    h2o_socket_close(c->sock);
    hanu_buf_free(&c->out);
    hanu_buf_free(&c->sending);
    free(c->gates);
    free(c);
}

static int conn_has_gates(const kv_conn *c) { return c->ghead < c->ngates; }

/* Skips the gates whose condition holds: txn synced (local) or written (none). */
static void pass_open_gates(kv_conn *c)
{
    while (c->ghead < c->ngates && server_reached(c->srv, c->gates[c->ghead].mark, c->gates[c->ghead].txn))
        c->ghead++;
}

/* fsyncgate: what waited for a failed sync is never acknowledged. Keeps what was
   answerable and closes after it, so the client sees an unknown outcome, not a success. */
static void fail_closed_gates(kv_conn *c)
{
    pass_open_gates(c);
    if (conn_has_gates(c)) c->out.len = c->gates[c->ghead].start;
    c->ghead = c->ngates = 0;
    c->close_after_flush = 1;
}

static void on_gate_released(waiter *w, int outcome)
{
    kv_conn *c = H2O_STRUCT_FROM_MEMBER(kv_conn, wait, w);
    if (outcome != WAITER_REACHED) fail_closed_gates(c);
    conn_flush(c);
}

/* Passes the open gates and queues the connection's waiter on the first closed one. */
static void arm_gates(kv_conn *c)
{
    pass_open_gates(c);
    if (!conn_has_gates(c)) { waiters_cancel(&c->srv->waits, &c->wait); return; }
    const kv_gate *g = &c->gates[c->ghead];
    if (c->wait.queued) {
        if (c->wait.txn == g->txn && c->wait.mark == g->mark) return;
        waiters_cancel(&c->srv->waits, &c->wait);
    }
    if (waiters_add(&c->srv->waits, &c->wait, g->mark, g->txn, 0, on_gate_released) == WAITER_FAILED)
        fail_closed_gates(c);
}

static void on_write_done(h2o_socket_t *sock, const char *err)
{
    kv_conn *c = sock->data;
    if (!c) return;
    if (err) { conn_close(c); return; }
    c->sending.len = 0;
    conn_flush(c);
}

/* Hands every releasable response to the socket (one write in flight at a time). */
static void conn_flush(kv_conn *c)
{
    server *srv = c->srv;
    arm_gates(c);
    if (h2o_socket_is_writing(c->sock)) return;
    size_t releasable = conn_has_gates(c) ? c->gates[c->ghead].start : c->out.len;
    if (releasable == 0) {
        if (!conn_has_gates(c)) {
            c->ghead = c->ngates = 0;
            if (c->close_after_flush) { conn_close(c); return; }
        }
        goto resume;
    }
    if (releasable == c->out.len) {
        hanu_buf t = c->sending;
        c->sending = c->out;
        c->out = t;
        c->out.len = 0;
    } else {
        c->sending.len = 0;
        if (hanu_buf_append(&c->sending, c->out.data, releasable) != HANU_OK) { conn_close(c); return; }
        hanu_buf_consume(&c->out, releasable);
    }
    for (size_t i = c->ghead; i < c->ngates; i++) c->gates[i].start -= releasable;
    if (!conn_has_gates(c)) c->ghead = c->ngates = 0;
    h2o_iovec_t iov = h2o_iovec_init(c->sending.data, c->sending.len);
    h2o_socket_write(c->sock, &iov, 1, on_write_done);
resume:
    if (c->read_paused && !c->close_after_flush && c->out.len < KV_OUT_HIGH_WATER / 2 && !srv->stopping) {
        c->read_paused = 0;
        h2o_socket_read_start(c->sock, on_read);
        /* frames read before the pause wait in the input: no new read would run them */
        if (c->sock->input->size) process_input(c);
    }
}

/* Gates the response at start; conn_flush queues the waiter. */
static int add_gate(kv_conn *c, size_t start, uint64_t txn, int mark)
{
    if (c->ngates == c->gcap) {
        if (c->ghead > 0) {
            memmove(c->gates, c->gates + c->ghead, (c->ngates - c->ghead) * sizeof *c->gates);
            c->ngates -= c->ghead;
            c->ghead = 0;
        } else {
            size_t ncap = c->gcap ? c->gcap * 2 : 8;
            kv_gate *ng = realloc(c->gates, ncap * sizeof *ng);
            if (!ng) return HANU_ERR_NOMEM;
            c->gates = ng;
            c->gcap = ncap;
        }
    }
    c->gates[c->ngates++] = (kv_gate){ start, txn, mark };
    return HANU_OK;
}

static void respond_msg(kv_conn *c, uint8_t status, const char *msg)
{
    kv_respond(&c->out, status, msg, strlen(msg));
    c->srv->errors++;
}

/* Maps a store error to the protocol's answer. */
static void respond_store_error(kv_conn *c, const kv_request *r, int rc, int key_op)
{
    switch (rc) {
    case HANU_ERR_NOT_FOUND:
        kv_respond(&c->out, key_op ? HKV_WIRE_KEY_NOT_FOUND : HKV_WIRE_DB_NOT_FOUND, NULL, 0);
        return;
    case HANU_ERR_EXISTS:
        kv_respond(&c->out, key_op ? HKV_WIRE_KEY_ALREADY_EXISTS : HKV_WIRE_DB_ALREADY_EXISTS, NULL, 0);
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
    size_t start = c->out.len;
    kv_respond_token(&c->out, HKV_WIRE_OK, txn);
    /* `none` is released after the loop's pwrite (no lock taken here). */
    int mark = server_wait_mark(durability);
    if (server_reached(c->srv, mark, txn)) return;
    if (add_gate(c, start, txn, mark) != HANU_OK) { c->out.len = start; c->close_after_flush = 1; return; }
    server_want_mark(c->srv, mark, txn);
}

/* Sends the JSON object built in srv->scratch, or an internal error. */
static void respond_json(kv_conn *c, const json_writer *w)
{
    hanu_buf *b = &c->srv->scratch;
    if (json_writer_status(w) != HANU_OK) respond_msg(c, HKV_WIRE_INTERNAL_ERROR, "cannot build the answer");
    else kv_respond(&c->out, HKV_WIRE_OK, (const char *)b->data, b->len);
}

static void respond_stats(kv_conn *c)
{
    server *srv = c->srv;
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
        { "errors", srv->errors }, { "keys_expired", srv->keys_expired }
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
    if (store_db_info_get(c->srv->store, id, &info) != HANU_OK) {
        kv_respond(&c->out, HKV_WIRE_DB_NOT_FOUND, NULL, 0);
        return;
    }
    json_writer w;
    c->srv->scratch.len = 0;
    json_writer_init(&w, &c->srv->scratch);
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
    server *srv = c->srv;
    if (!srv->tokens.n) { kv_respond(&c->out, HKV_WIRE_OK, NULL, 0); return; }
    c->token = auth_tokens_find(&srv->tokens, r->secret, r->secret_len);
    if (c->token) { kv_respond(&c->out, HKV_WIRE_OK, NULL, 0); return; }
    if (++c->auth_failures < KV_AUTH_MAX_FAILURES) { respond_msg(c, HKV_WIRE_UNAUTHORIZED, "unknown token"); return; }
    respond_msg(c, HKV_WIRE_UNAUTHORIZED, "unknown token; too many failed Auth ops, closing the connection");
    c->close_after_flush = 1;
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
    server *srv = c->srv;
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
                kv_respond(&c->out, HKV_WIRE_DB_NOT_FOUND, NULL, 0);
            return;
        }
    }
    uint64_t txn = 0, current = 0;
    docs_error refused;   /* a write into a collection that is no document (docs.h) */
    switch (op) {
    case HKV_OP_STATS: respond_stats(c); return;
    case HKV_OP_PING: kv_respond(&c->out, HKV_WIRE_PONG, NULL, 0); return;
    case HKV_OP_CLOSE:
        kv_respond(&c->out, HKV_WIRE_OK, NULL, 0);
        c->close_after_flush = 1;
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
        size_t start = c->out.len;
        if (hanu_buf_reserve(&c->out, HKV_RESP_HEADER + 8) != HANU_OK) { respond_store_error(c, &r, HANU_ERR_NOMEM, 1); return; }
        c->out.len += HKV_RESP_HEADER + 8;
        rc = store_get(st, db, r.key, r.key_len, &c->out, &txn);
        if (rc) {
            c->out.len = start;
            respond_store_error(c, &r, rc, 1);
            return;
        }
        uint8_t *h = c->out.data + start;
        h[0] = HKV_WIRE_KEY_VALUE_TOKEN;
        hanu_put_u32(h + 1, (uint32_t)(c->out.len - start - HKV_RESP_HEADER));
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
        if (rc == HANU_ERR_MISMATCH) { kv_respond_token(&c->out, HKV_WIRE_KEY_TOKEN_MISMATCH, current); return; }
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
        kv_respond(&c->out, HKV_WIRE_OK, p, sizeof p);
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
    server *srv = c->srv;
    h2o_socket_t *sock = c->sock;
    for (;;) {
        h2o_buffer_t *in = sock->input;
        if (c->close_after_flush) { h2o_buffer_consume(&sock->input, in->size); break; }
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
            c->close_after_flush = 1;
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
        if (c->out.len > KV_OUT_HIGH_WATER) break;
    }
    if ((c->out.len > KV_OUT_HIGH_WATER || c->close_after_flush) && !c->read_paused) {
        c->read_paused = 1;
        h2o_socket_read_stop(sock);
    }
    conn_flush(c);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    kv_conn *c = sock->data;
    if (!c) return;
    if (err) { conn_close(c); return; }
    server_poll_durable(c->srv);
    /* A failed sync may have closed this very connection (the socket is freed later). */
    if (!(c = sock->data)) return;
    c->last_active_ns = hanu_now_ns();
    process_input(c);
}

static void on_conn(server *srv, h2o_socket_t *sock)
{
    kv_conn *c = srv->nconns < srv->opt.max_connections ? calloc(1, sizeof *c) : NULL;
    if (!c) { h2o_socket_close(sock); return; }
    c->srv = srv;
    c->sock = sock;
    c->last_active_ns = hanu_now_ns();
    sock->data = c;
    h2o_linklist_insert(&srv->conns, &c->link);
    srv->nconns++;
    srv->connections_total++;
    if (srv->nconns == 1) kv_sweep_idle(srv);
    h2o_socket_read_start(sock, on_read);
}

int kv_bind(server *srv, const char *addr, char *err, size_t errcap)
{
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

int kv_listen(server *srv, char *err, size_t errcap)
{
    h2o_timeout_init(srv->loop, &srv->ttl_timeout, KV_TTL_TICK_MS);
    srv->ttl_entry.cb = on_ttl_tick;
    h2o_timeout_link(srv->loop, &srv->ttl_timeout, &srv->ttl_entry);
    if (server_listen(srv, &srv->kv_fd, on_conn, &srv->kv_listener) == HANU_OK) return HANU_OK;
    snprintf(err, errcap, "out of memory");
    return HANU_ERR_NOMEM;
}

/* The expiry sweep's tick: on the writer only (a follower hides expired keys on reads
   and replays its leader's deletes; it never deletes on its own). */
static void on_ttl_tick(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, ttl_entry, entry);
    size_t n = 0;
    if (!srv->stopping && server_accepts_writes(srv) &&
        store_expire_sweep(srv->store, store_now_ms(), KV_TTL_SCAN_PER_TICK, KV_TTL_DELETE_PER_TICK, &n) == HANU_OK)
        srv->keys_expired += n;
    if (!srv->stopping) h2o_timeout_link(srv->loop, &srv->ttl_timeout, &srv->ttl_entry);
}

void kv_shutdown_begin(server *srv)
{
    if (h2o_timeout_is_linked(&srv->ttl_entry)) h2o_timeout_unlink(&srv->ttl_entry);
    server_unlisten(&srv->kv_listener);
    for (h2o_linklist_t *n = srv->conns.next; n != &srv->conns; n = n->next) {
        kv_conn *c = H2O_STRUCT_FROM_MEMBER(kv_conn, link, n);
        if (!c->read_paused) {
            h2o_socket_read_stop(c->sock);
            c->read_paused = 1;
        }
    }
}

size_t kv_busy_connections(server *srv)
{
    size_t busy = 0;
    for (h2o_linklist_t *n = srv->conns.next; n != &srv->conns; n = n->next) {
        kv_conn *c = H2O_STRUCT_FROM_MEMBER(kv_conn, link, n);
        if (c->out.len || conn_has_gates(c) || h2o_socket_is_writing(c->sock)) busy++;
    }
    return busy;
}

void kv_close_all(server *srv)
{
    while (!h2o_linklist_is_empty(&srv->conns))
        conn_close(H2O_STRUCT_FROM_MEMBER(kv_conn, link, srv->conns.next));
}

static void on_sweep(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, sweep_entry, entry);
    uint64_t now = hanu_now_ns(), limit = (uint64_t)srv->opt.idle_timeout_ms * 1000000ull;
    h2o_linklist_t *n = srv->conns.next;
    while (n != &srv->conns) {
        kv_conn *c = H2O_STRUCT_FROM_MEMBER(kv_conn, link, n);
        n = n->next;
        if (now - c->last_active_ns > limit && !conn_has_gates(c) && !h2o_socket_is_writing(c->sock))
            conn_close(c);
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
