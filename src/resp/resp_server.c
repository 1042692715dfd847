/*
 * resp_server.c: Redis protocol connections on the serve process's event loop.
 *
 * A read parses every whole command in the input and runs each, appending the
 * answers in order to the connection's output (pipelining: the writes of one
 * read all reach the log before the loop's one store_flush and share its
 * group commit). The answer to a write is a gate, as on the binary protocol
 * (src/kv): it and everything after it wait until the write reaches the
 * connection's durability (CLIENT DURABILITY, default --resp-durability):
 * `none` its pwrite, `local` its fdatasync, `bucket` the sealer's segment.
 * The gates, the output and its flow control are the core's
 * (server/gated_conn.h, shared with the binary protocol).
 */
#include "resp/resp_internal.h"
#include "hlog/hlog.h"
#include "docs/docs.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define RESP_WAIT_CHECK_MS 100

static void on_read(h2o_socket_t *sock, const char *err);
static void process_input(resp_conn *c);

static resp_server *rs_of(server *srv) { return srv->resp; }

static void conn_free(gated_conn *gc)
{
    resp_conn *c = (resp_conn *)gc;
    c->rs->nconns--;
    resp_unwatch_all(c);
    hanu_buf_free(&c->queued);
    hanu_buf_free(&c->watch_keys);
    resp_request_free(&c->req);
    free(c->watches);
    free(c);
}

/* Commands read before a pause: run them once the parser has what it asked for. */
static void conn_resume(gated_conn *gc)
{
    resp_conn *c = (resp_conn *)gc;
    if (gc->sock->input->size >= c->need) process_input(c);
}

/* WAIT: the answer says whether the bucket holds the write; never a failure. */
static void wait_done(gated_conn *gc, gated_gate *g, int reached)
{
    resp_conn *c = (resp_conn *)gc;
    if (g->deadline_ns) c->rs->timed_waits--;
    if (!reached) gc->out.data[g->start + 1] = '0';
}

static const gated_ops resp_conn_ops = {
    .on_read = on_read, .resume = conn_resume, .soft_done = wait_done, .close = conn_free,
};

void resp_err(resp_conn *c, const char *msg)
{
    resp_w_error(&c->gc.out, msg);
    c->rs->errors++;
}

void resp_err_arity(resp_conn *c, const char *name)
{
    resp_w_errorf(&c->gc.out, "ERR wrong number of arguments for '%s' command", name);
    c->rs->errors++;
}

int resp_arg_is(const resp_arg *a, const char *lower)
{
    size_t n = strlen(lower);
    return a->len == n && strncasecmp((const char *)a->p, lower, n) == 0;
}

resp_db resp_current_db(resp_conn *c)
{
    store *st = c->gc.srv->store;
    uint64_t gen = store_db_generation(st) + 1;
    if (c->db_gen != gen) {   /* a lock and a walk of the databases, once, not per command */
        c->db_exists = store_db_lookup(st, c->db, strlen(c->db), &c->db_id) == HANU_OK &&
                       store_db_kind(st, c->db_id, &c->db_kind) == HANU_OK;
        c->db_gen = gen;
    }
    return (resp_db){ c->db_exists ? c->db_id : 0, c->db_exists };
}

/* redis-server's unknown command: the name, then arguments quoted while fewer than
   128 bytes of them were written (each cut to what is left of the 128). */
static void err_unknown(resp_conn *c, const resp_arg *argv, size_t argc)
{
    char msg[512];
    size_t n = (size_t)snprintf(msg, sizeof msg, "ERR unknown command '%.*s', with args beginning with: ",
                                (int)HANU_MIN(argv[0].len, 128), (const char *)argv[0].p);
    size_t args = 0;
    for (size_t i = 1; i < argc && args < 128; i++) {
        int w = snprintf(msg + n, sizeof msg - n, "'%.*s' ", (int)HANU_MIN(argv[i].len, 128 - args),
                         (const char *)argv[i].p);
        n += (size_t)w;
        args += (size_t)w;
    }
    for (size_t i = 0; i < n; i++)
        if (msg[i] == '\r' || msg[i] == '\n') msg[i] = ' ';
    resp_err(c, msg);
}

/* Queues a command inside MULTI: its argument count, then each length and its bytes. */
static int queue_command(resp_conn *c, const resp_arg *argv, size_t argc)
{
    if (c->nqueued >= RESP_MULTI_MAX) return HANU_ERR_TOO_LARGE;
    uint64_t n = argc;
    int rc = hanu_buf_append(&c->queued, &n, sizeof n);
    for (size_t i = 0; rc == HANU_OK && i < argc; i++) {
        uint64_t l = argv[i].len;
        rc = hanu_buf_append(&c->queued, &l, sizeof l);
        if (rc == HANU_OK) rc = hanu_buf_append(&c->queued, argv[i].p, argv[i].len);
    }
    if (rc == HANU_OK) c->nqueued++;
    return rc;
}

static int write_refused(resp_conn *c, const resp_command *cmd)
{
    server *srv = c->gc.srv;
    if (c->token && !c->token->read_write) {
        resp_w_errorf(&c->gc.out, "NOPERM this user has no permissions to run the '%s' command", cmd->name);
        c->rs->errors++;
        return 1;
    }
    if (!server_accepts_writes(srv)) {
        char url[LEASE_URL_MAX + 1];
        if (server_leader_url(srv, url, sizeof url))
            resp_w_errorf(&c->gc.out, "READONLY You can't write against a read only replica. The leader is %s", url);
        else
            resp_w_error(&c->gc.out, "READONLY You can't write against a read only replica.");
        c->rs->errors++;
        return 1;
    }
    if (srv->stopping) { resp_err(c, "ERR server is shutting down"); return 1; }
    if (c->durability == HKV_DUR_BUCKET && !srv->sealer) {
        resp_err(c, "ERR bucket durability is not available (start the server with --bucket URL)");
        return 1;
    }
    return 0;
}

static int scope_refused(resp_conn *c)
{
    if (!c->token || auth_token_allows(c->token, c->db, strlen(c->db), 0)) return 0;
    resp_w_errorf(&c->gc.out, "NOPERM the token does not cover the database \"%s\"", c->db);
    c->rs->errors++;
    return 1;
}

void resp_run(resp_conn *c, const resp_arg *argv, size_t argc)
{
    resp_server *rs = c->rs;
    rs->commands++;
    const resp_command *cmd = resp_command_find(argv[0].p, argv[0].len);
    c->last_cmd = cmd ? cmd->name : "NULL";
    if (!cmd) {
        err_unknown(c, argv, argc);
        if (c->in_multi) c->multi_failed = 1;
        return;
    }
    if ((cmd->arity > 0 && argc != (size_t)cmd->arity) || (cmd->arity < 0 && argc < (size_t)-cmd->arity)) {
        resp_err_arity(c, cmd->name);
        if (c->in_multi) c->multi_failed = 1;
        return;
    }
    if (!c->authed && !(cmd->flags & RESP_CMD_NOAUTH)) {
        resp_err(c, "NOAUTH Authentication required.");
        if (c->in_multi) c->multi_failed = 1;
        return;
    }
    if (((cmd->flags & RESP_CMD_WRITE) && write_refused(c, cmd)) || ((cmd->flags & RESP_CMD_KEYS) && scope_refused(c))) {
        if (c->in_multi) c->multi_failed = 1;
        return;
    }
    if (c->in_multi && !(cmd->flags & RESP_CMD_NOMULTI)) {
        if (cmd->fn == resp_cmd_select) {
            resp_err(c, "ERR SELECT inside MULTI is not supported by HanuDB (a transaction is one database's record)");
            c->multi_failed = 1;
            return;
        }
        if (queue_command(c, argv, argc) != HANU_OK) {
            resp_err(c, "ERR too many commands in this MULTI");
            c->multi_failed = 1;
            return;
        }
        resp_w_simple(&c->gc.out, "QUEUED");
        return;
    }
    cmd->fn(c, argv, argc);
}

/* Runs one command outside EXEC: its staged writes are one record. */
static void run_one(resp_conn *c, const resp_arg *argv, size_t argc)
{
    resp_server *rs = c->rs;
    size_t start = c->gc.out.len;
    resp_stage_reset(rs);
    resp_run(c, argv, argc);
    uint64_t txn = 0;
    if (rs->nstaged && resp_commit(c, start, &txn) == HANU_OK && txn) gated_gate_write(&c->gc, start, txn, c->durability);
    resp_stage_reset(rs);
}

void resp_multi_clear(resp_conn *c)
{
    c->in_multi = c->multi_failed = 0;
    c->queued.len = 0;
    c->nqueued = 0;
}

void resp_cmd_multi(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    if (c->in_multi) { resp_err(c, "ERR MULTI calls can not be nested"); return; }
    c->in_multi = 1;
    resp_w_simple(&c->gc.out, "OK");
}

void resp_cmd_discard(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    if (!c->in_multi) { resp_err(c, "ERR DISCARD without MULTI"); return; }
    resp_multi_clear(c);
    resp_unwatch_all(c);
    resp_w_simple(&c->gc.out, "OK");
}

/* Whether every WATCHed key still has the token (or absence) it had. */
static int watches_hold(resp_conn *c)
{
    store *st = c->gc.srv->store;
    for (size_t i = 0; i < c->nwatches; i++) {
        const resp_watch *w = &c->watches[i];
        uint32_t id;
        uint64_t token = 0;
        int present = store_db_lookup(st, w->db, strlen(w->db), &id) == HANU_OK &&
                      store_lookup(st, id, c->watch_keys.data + w->koff, w->klen, &token) == HANU_OK;
        if (present != w->present || (present && token != w->token)) return 0;
        if (w->registered && store_watch_touches(st, w->db_id, c->watch_keys.data + w->koff, w->klen) != w->touches)
            return 0;
    }
    return 1;
}

void resp_cmd_exec(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    resp_server *rs = c->rs;
    if (!c->in_multi) { resp_err(c, "ERR EXEC without MULTI"); return; }
    if (c->multi_failed) {
        resp_multi_clear(c);
        resp_unwatch_all(c);
        resp_err(c, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    /* The WATCH check and the commit below run without yielding to the loop:
       no other write of any face comes between them. */
    if (!watches_hold(c)) {
        resp_multi_clear(c);
        resp_unwatch_all(c);
        resp_w_null_array(&c->gc.out, c->proto);
        return;
    }
    size_t n = c->nqueued, start = c->gc.out.len;
    hanu_buf q = c->queued;   /* taken: commands run below may not queue more (in_multi is off) */
    c->queued = (hanu_buf){0};
    resp_multi_clear(c);
    resp_unwatch_all(c);
    resp_arg *args = NULL;
    size_t acap = 0, pos = 0;
    resp_stage_reset(rs);
    resp_w_array(&c->gc.out, n);
    c->in_exec = 1;   /* nothing inside gates its own answer: the EXEC's answer is one */
    for (size_t i = 0; i < n; i++) {
        uint64_t na;
        memcpy(&na, q.data + pos, sizeof na);
        pos += sizeof na;
        if (na > acap) {
            resp_arg *nv = realloc(args, na * sizeof *nv);
            if (!nv) { c->gc.out.len = start; resp_err(c, "ERR out of memory"); goto done; }
            args = nv;
            acap = na;
        }
        for (uint64_t k = 0; k < na; k++) {
            uint64_t l;
            memcpy(&l, q.data + pos, sizeof l);
            pos += sizeof l;
            args[k] = (resp_arg){ q.data + pos, l };
            pos += l;
        }
        resp_run(c, args, na);
    }
    uint64_t txn = 0;
    if (rs->nstaged && resp_commit(c, start, &txn) == HANU_OK && txn) gated_gate_write(&c->gc, start, txn, c->durability);
done:
    c->in_exec = 0;
    resp_stage_reset(rs);
    free(args);
    hanu_buf_free(&q);
}

/* Answers a protocol error the way redis-server does, and closes after it. */
static void protocol_error(resp_conn *c, const char *err)
{
    char msg[160];
    snprintf(msg, sizeof msg, "%s%s", strncmp(err, "ERR ", 4) ? "ERR " : "", err);
    resp_err(c, msg);
    c->gc.close_after_flush = 1;
}

/* Runs every whole command in the socket's input, up to the output's high water. */
static void process_input(resp_conn *c)
{
    server *srv = c->gc.srv;
    h2o_socket_t *sock = c->gc.sock;
    h2o_buffer_t *in = sock->input;
    resp_limits lim = {
        .max_args = RESP_DEFAULT_MAX_ARGS, .max_bulk = srv->limits.max_frame,
        .max_inline = RESP_DEFAULT_MAX_INLINE, .max_request = srv->limits.max_frame,
    };
    size_t pos = 0;
    while (!c->gc.close_after_flush && c->gc.out.len <= GATED_OUT_HIGH_WATER && in->size - pos >= c->need) {
        lim.unauthenticated = !c->authed;
        size_t used = 0, need = 0;
        const char *perr = NULL;
        int pr = resp_parse(&c->req, (const uint8_t *)in->bytes + pos, in->size - pos, &lim, &used, &need, &perr);
        if (pr == RESP_PARSE_MORE) { c->need = need; break; }
        c->need = 0;
        if (pr == RESP_PARSE_ERROR) { protocol_error(c, perr); break; }
        if (c->req.argc) run_one(c, c->req.argv, c->req.argc);
        pos += used;
    }
    if (c->gc.close_after_flush) pos = in->size;
    /* need was counted from the first unparsed byte, which is now the buffer's start */
    h2o_buffer_consume(&sock->input, pos);
    gated_after_input(&c->gc);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    resp_conn *c = sock->data;
    if (!c) return;
    if (err) { gated_close(&c->gc); return; }
    server_poll_durable(c->gc.srv);
    if (!(c = sock->data)) return;   /* a failed sync closed it */
    c->last_active_ns = hanu_now_ns();
    process_input(c);
}

static void sock_name(h2o_socket_t *sock, int peer, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = peer ? h2o_socket_getpeername(sock, (struct sockaddr *)&ss) : h2o_socket_getsockname(sock, (struct sockaddr *)&ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sl && ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (sl && ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    snprintf(out, cap, "%s:%d", host, port);
}

static void on_conn(server *srv, h2o_socket_t *sock)
{
    resp_server *rs = rs_of(srv);
    resp_conn *c = rs->nconns < srv->opt.max_connections ? calloc(1, sizeof *c) : NULL;
    if (!c) { rs->rejected_connections++; h2o_socket_close(sock); return; }
    c->rs = rs;
    c->id = ++rs->next_id;
    c->proto = 2;
    c->authed = srv->tokens.n == 0;
    c->durability = srv->opt.resp_durability;
    snprintf(c->db, sizeof c->db, "default");
    c->created_ns = c->last_active_ns = hanu_now_ns();
    c->last_cmd = "NULL";
    sock_name(sock, 1, c->addr, sizeof c->addr);
    sock_name(sock, 0, c->laddr, sizeof c->laddr);
    rs->nconns++;
    rs->connections_total++;
    gated_open(&c->gc, srv, sock, &resp_conn_ops, &rs->conns);
}

static void on_wait_check(h2o_timeout_entry_t *entry)
{
    resp_server *rs = H2O_STRUCT_FROM_MEMBER(resp_server, wait_entry, entry);
    waiters_expire(&rs->srv->waits, hanu_now_ns());
    if (rs->timed_waits) h2o_timeout_link(rs->srv->loop, &rs->wait_timeout, &rs->wait_entry);
}

void resp_arm_wait_check(resp_server *rs)
{
    rs->timed_waits++;
    if (!h2o_timeout_is_linked(&rs->wait_entry)) h2o_timeout_link(rs->srv->loop, &rs->wait_timeout, &rs->wait_entry);
}

int resp_bind(server *srv, char *err, size_t errcap)
{
    const char *addr = srv->opt.resp_addr;
    if (!addr || !addr[0] || !strcmp(addr, "off")) return HANU_OK;
    resp_server *rs = calloc(1, sizeof *rs);
    if (!rs) { snprintf(err, errcap, "out of memory"); return HANU_ERR_NOMEM; }
    rs->srv = srv;
    rs->fd = -1;
    rs->started_ns = hanu_now_ns();
    h2o_linklist_init_anchor(&rs->conns);
    srv->resp = rs;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (server_parse_addr(addr, &ss, &sl) != 0) {
        snprintf(err, errcap, "cannot parse address \"%s\" (--resp-addr wants HOST:PORT)", addr);
        return HANU_ERR_INVALID;
    }
    char shown[300];
    snprintf(shown, sizeof shown, "%s (--resp-addr)", addr);
    if (server_bind(&ss, sl, shown, &rs->fd, err, errcap) != HANU_OK) return HANU_ERR_IO;
    if (!srv->tokens.n && !server_addr_is_loopback(&ss))
        hlog_warn("resp", "without --tokens the Redis protocol needs no AUTH and reaches every database; "
                  "%s is not a loopback address", addr);
    return HANU_OK;
}

int resp_listen(server *srv, char *err, size_t errcap)
{
    resp_server *rs = rs_of(srv);
    if (!rs) return HANU_OK;
    if (server_listen(srv, &rs->fd, on_conn, &rs->listener) != HANU_OK) {
        snprintf(err, errcap, "out of memory");
        return HANU_ERR_NOMEM;
    }
    h2o_timeout_init(srv->loop, &rs->wait_timeout, RESP_WAIT_CHECK_MS);
    rs->wait_entry.cb = on_wait_check;
    hlog_info("resp", "Redis protocol listening on %s%s, durability %s", srv->opt.resp_addr,
              srv->tokens.n ? ", AUTH required (--tokens)" : "",
              srv->opt.resp_durability == HKV_DUR_NONE ? "none" : srv->opt.resp_durability == HKV_DUR_BUCKET ? "bucket" : "local");
    return HANU_OK;
}

void resp_shutdown_begin(server *srv)
{
    resp_server *rs = rs_of(srv);
    if (!rs) return;
    server_unlisten(&rs->listener);
    gated_pause_all(&rs->conns);
}

size_t resp_busy(server *srv)
{
    resp_server *rs = rs_of(srv);
    /* a WAIT for the bucket (a soft gate) does not hold the shutdown */
    return rs ? gated_busy_count(&rs->conns) : 0;
}

void resp_stop(server *srv)
{
    resp_server *rs = rs_of(srv);
    if (!rs) return;
    gated_close_all(&rs->conns);
    server_unlisten(&rs->listener);
    if (rs->fd >= 0) close(rs->fd);
    if (h2o_timeout_is_linked(&rs->wait_entry)) h2o_timeout_unlink(&rs->wait_entry);
    free(rs->staged);
    free(rs->ops);
    free(rs->expires);
    free(rs->types);
    hanu_buf_free(&rs->arena);
    hanu_buf_free(&rs->val);
    free(rs);
    srv->resp = NULL;
}

const server_face resp_face = {
    .name = "resp", .bind = resp_bind, .listen = resp_listen, .shutdown_begin = resp_shutdown_begin,
    .busy = resp_busy, .stop = resp_stop, .unbind = resp_stop,
};
