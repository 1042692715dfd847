/*
 * resp_admin.c: the connection and server commands of the Redis face (HELLO,
 * AUTH, SELECT, CLIENT, INFO, COMMAND, CONFIG, WAIT, WATCH, RESET...).
 */
#include "resp/resp_internal.h"
#include "hanudb_version.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define REDIS_VERSION "7.0.0"   /* the redis-server whose commands and answers this face follows */

void resp_cmd_ping(resp_conn *c, const resp_arg *argv, size_t argc)
{
    if (argc > 2) { resp_err_arity(c, "ping"); return; }
    if (argc == 2) resp_w_bulk(&c->gc.out, argv[1].p, argv[1].len);
    else resp_w_simple(&c->gc.out, "PONG");
}

void resp_cmd_echo(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_w_bulk(&c->gc.out, argv[1].p, argv[1].len);
}

/* A --tokens token (user "default" only): 1 accepted; else the answer is sent. */
static int try_auth(resp_conn *c, const resp_arg *user, const resp_arg *pass)
{
    server *srv = c->gc.srv;
    if (!srv->tokens.n) {
        if (!user) {
            resp_err(c, "ERR AUTH <password> called without any password configured for the default user. "
                        "Are you sure your configuration is correct?");
            return 0;
        }
        if (resp_arg_is(user, "default")) return 1;
    } else if (!user || resp_arg_is(user, "default")) {
        const auth_token *t = auth_tokens_find(&srv->tokens, pass->p, pass->len);
        if (t) {
            c->token = t;
            c->authed = 1;
            return 1;
        }
    }
    resp_err(c, "WRONGPASS invalid username-password pair or user is disabled.");
    /* guessing costs a connection every few tries, as on the binary protocol */
    if (++c->auth_failures >= RESP_AUTH_MAX_FAILURES) c->gc.close_after_flush = 1;
    return 0;
}

void resp_cmd_auth(resp_conn *c, const resp_arg *argv, size_t argc)
{
    if (argc > 3) { resp_err(c, "ERR syntax error"); return; }
    if (try_auth(c, argc == 3 ? &argv[1] : NULL, &argv[argc - 1])) resp_w_simple(&c->gc.out, "OK");
}

static int valid_client_name(const resp_arg *a)
{
    if (a->len > RESP_NAME_MAX) return 0;
    for (size_t i = 0; i < a->len; i++)
        if (a->p[i] < '!' || a->p[i] > '~') return 0;
    return 1;
}

static void set_name(resp_conn *c, const resp_arg *a)
{
    memcpy(c->name, a->p, a->len);
    c->name[a->len] = '\0';
}

void resp_cmd_hello(resp_conn *c, const resp_arg *argv, size_t argc)
{
    int64_t ver = c->proto;
    if (argc >= 2) {
        if (!resp_parse_i64(argv[1].p, argv[1].len, &ver)) {
            resp_err(c, "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (ver < 2 || ver > 3) { resp_err(c, "NOPROTO unsupported protocol version"); return; }
    }
    const resp_arg *user = NULL, *pass = NULL, *name = NULL;
    for (size_t i = 2; i < argc; i++) {
        if (resp_arg_is(&argv[i], "auth") && i + 2 < argc) {
            user = &argv[i + 1];
            pass = &argv[i + 2];
            i += 2;
        } else if (resp_arg_is(&argv[i], "setname") && i + 1 < argc) {
            name = &argv[++i];
        } else {
            resp_w_errorf(&c->gc.out, "ERR Syntax error in HELLO option '%.*s'", (int)HANU_MIN(argv[i].len, 64),
                          (const char *)argv[i].p);
            c->rs->errors++;
            return;
        }
    }
    if (pass && !try_auth(c, user, pass)) return;
    if (!c->authed) {
        resp_err(c, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> "
                    "AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol "
                    "version at the same time");
        return;
    }
    if (name) {
        if (!valid_client_name(name)) {
            resp_err(c, "ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        set_name(c, name);
    }
    c->proto = (int)ver;
    hanu_buf *o = &c->gc.out;
    resp_w_map(o, c->proto, 7);
    resp_w_bulk_str(o, "server");
    resp_w_bulk_str(o, "hanudb");
    resp_w_bulk_str(o, "version");
    resp_w_bulk_str(o, REDIS_VERSION);
    resp_w_bulk_str(o, "proto");
    resp_w_int(o, c->proto);
    resp_w_bulk_str(o, "id");
    resp_w_int(o, (int64_t)c->id);
    resp_w_bulk_str(o, "mode");
    resp_w_bulk_str(o, "standalone");
    resp_w_bulk_str(o, "role");
    resp_w_bulk_str(o, server_accepts_writes(c->gc.srv) ? "master" : "replica");
    resp_w_bulk_str(o, "modules");
    resp_w_array(o, 0);
}

/* SELECT n is the database "default" for 0 and "dbN" for 1..15; SELECT name (not
   a number) picks an existing database by name, HanuDB's own. */
void resp_cmd_select(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    int64_t n;
    if (resp_parse_i64(argv[1].p, argv[1].len, &n)) {
        if (n < 0 || n >= RESP_DATABASES) { resp_err(c, "ERR DB index is out of range"); return; }
        if (n == 0) snprintf(c->db, sizeof c->db, "default");
        else snprintf(c->db, sizeof c->db, "db%d", (int)n);
        c->db_gen = 0;
        c->db_index = (int)n;
        resp_w_simple(&c->gc.out, "OK");
        return;
    }
    uint32_t id;
    if (!store_db_name_valid((const char *)argv[1].p, argv[1].len) ||
        store_db_lookup(c->gc.srv->store, (const char *)argv[1].p, argv[1].len, &id) != HANU_OK) {
        resp_err(c, "ERR value is not an integer or out of range");
        return;
    }
    memcpy(c->db, argv[1].p, argv[1].len);
    c->db[argv[1].len] = '\0';
    c->db_gen = 0;
    c->db_index = -1;
    resp_w_simple(&c->gc.out, "OK");
}

/* The SELECT index of a database name, or -1. */
static int db_index_of(const char *name)
{
    if (!strcmp(name, "default")) return 0;
    int64_t n;
    if (strncmp(name, "db", 2) || !resp_parse_i64((const uint8_t *)name + 2, strlen(name) - 2, &n) || n < 1 ||
        n >= RESP_DATABASES)
        return -1;
    return (int)n;
}

static const char *durability_name(uint8_t d)
{
    return d == HKV_DUR_NONE ? "none" : d == HKV_DUR_BUCKET ? "bucket" : "local";
}

static void client_line(resp_conn *c, hanu_buf *b)
{
    uint64_t now = hanu_now_ns();
    char line[768];
    int n = snprintf(line, sizeof line,
                     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu flags=%s db=%d multi=%d "
                     "qbuf=%zu obl=0 oll=0 omem=%zu cmd=%s user=default redir=-1 resp=%d db-name=%s durability=%s\n",
                     (unsigned long long)c->id, c->addr, c->laddr, h2o_socket_get_fd(c->gc.sock), c->name,
                     (unsigned long long)((now - c->created_ns) / 1000000000ull),
                     (unsigned long long)((now - c->last_active_ns) / 1000000000ull), c->in_multi ? "x" : "N",
                     c->db_index < 0 ? 0 : c->db_index, c->in_multi ? (int)c->nqueued : -1,
                     c->gc.sock->input ? c->gc.sock->input->size : 0, c->gc.out.len, c->last_cmd, c->proto, c->db,
                     durability_name(c->durability));
    hanu_buf_append(b, line, (size_t)HANU_MIN(n, (int)sizeof line - 1));
}

void resp_cmd_client(resp_conn *c, const resp_arg *argv, size_t argc)
{
    const resp_arg *sub = &argv[1];
    if (resp_arg_is(sub, "setname") && argc == 3) {
        if (!valid_client_name(&argv[2])) {
            resp_err(c, "ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        set_name(c, &argv[2]);
        resp_w_simple(&c->gc.out, "OK");
    } else if (resp_arg_is(sub, "getname") && argc == 2) {
        if (c->name[0]) resp_w_bulk_str(&c->gc.out, c->name);
        else resp_w_null(&c->gc.out, c->proto);
    } else if (resp_arg_is(sub, "id") && argc == 2) {
        resp_w_int(&c->gc.out, (int64_t)c->id);
    } else if ((resp_arg_is(sub, "info") && argc == 2) || (resp_arg_is(sub, "list") && argc == 2)) {
        hanu_buf b = { 0 };
        if (resp_arg_is(sub, "info")) client_line(c, &b);
        else
            for (h2o_linklist_t *n = c->rs->conns.next; n != &c->rs->conns; n = n->next)
                client_line(H2O_STRUCT_FROM_MEMBER(resp_conn, gc.link, n), &b);
        resp_w_verbatim(&c->gc.out, c->proto, b.data, b.len);
        hanu_buf_free(&b);
    } else if (resp_arg_is(sub, "durability") && argc <= 3) {
        if (argc == 2) { resp_w_bulk_str(&c->gc.out, durability_name(c->durability)); return; }
        uint8_t d;
        if (resp_arg_is(&argv[2], "none")) d = HKV_DUR_NONE;
        else if (resp_arg_is(&argv[2], "local")) d = HKV_DUR_LOCAL;
        else if (resp_arg_is(&argv[2], "bucket")) d = HKV_DUR_BUCKET;
        else { resp_err(c, "ERR CLIENT DURABILITY is none, local or bucket"); return; }
        if (d == HKV_DUR_BUCKET && !c->gc.srv->sealer) {
            resp_err(c, "ERR bucket durability is not available (start the server with --bucket URL)");
            return;
        }
        c->durability = d;
        resp_w_simple(&c->gc.out, "OK");
    } else if (resp_arg_is(sub, "setname") || resp_arg_is(sub, "getname") || resp_arg_is(sub, "id") ||
               resp_arg_is(sub, "info") || resp_arg_is(sub, "list")) {
        resp_w_errorf(&c->gc.out, "ERR wrong number of arguments for 'client|%.*s' command", (int)HANU_MIN(sub->len, 32),
                      (const char *)sub->p);
        c->rs->errors++;
    } else {
        resp_w_errorf(&c->gc.out, "ERR unknown subcommand '%.*s'. Try CLIENT HELP.", (int)HANU_MIN(sub->len, 128),
                      (const char *)sub->p);
        c->rs->errors++;
    }
}

/* ---- INFO ---- */

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2) rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int want_section(const resp_arg *argv, size_t argc, const char *name, int in_default)
{
    if (argc < 2) return in_default;
    for (size_t i = 1; i < argc; i++)
        if (resp_arg_is(&argv[i], name) || resp_arg_is(&argv[i], "all") || resp_arg_is(&argv[i], "everything") ||
            (in_default && resp_arg_is(&argv[i], "default")))
            return 1;
    return 0;
}

static void addf(hanu_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(hanu_buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) hanu_buf_append(b, line, (size_t)HANU_MIN(n, (int)sizeof line - 1));
}

static void section(hanu_buf *b, const char *title)
{
    if (b->len) hanu_buf_append(b, "\r\n", 2);
    addf(b, "# %s\r\n", title);
}

void resp_cmd_info(resp_conn *c, const resp_arg *argv, size_t argc)
{
    server *srv = c->gc.srv;
    resp_server *rs = c->rs;
    store_stats st;
    store_get_stats(srv->store, &st);
    hanu_buf b = { 0 };
    uint64_t up = (hanu_now_ns() - rs->started_ns) / 1000000000ull;
    if (want_section(argv, argc, "server", 1)) {
        section(&b, "Server");
        addf(&b, "redis_version:%s\r\nhanudb_version:%d.%d.%d\r\nredis_mode:standalone\r\nos:Linux\r\n"
                 "arch_bits:%d\r\nprocess_id:%d\r\ntcp_port:%s\r\nuptime_in_seconds:%llu\r\nuptime_in_days:%llu\r\n",
             REDIS_VERSION, HANUDB_VERSION_MAJOR, HANUDB_VERSION_MINOR, HANUDB_VERSION_PATCH, (int)sizeof(void *) * 8,
             (int)getpid(), strrchr(srv->opt.resp_addr, ':') ? strrchr(srv->opt.resp_addr, ':') + 1 : "",
             (unsigned long long)up, (unsigned long long)(up / 86400));
    }
    if (want_section(argv, argc, "clients", 1)) {
        section(&b, "Clients");
        addf(&b, "connected_clients:%zu\r\nmaxclients:%u\r\n", rs->nconns, srv->opt.max_connections);
    }
    if (want_section(argv, argc, "memory", 1)) {
        section(&b, "Memory");
        addf(&b, "used_memory:%llu\r\nused_memory_rss:%llu\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
             (unsigned long long)st.memory_bytes, (unsigned long long)rss_bytes());
    }
    if (want_section(argv, argc, "persistence", 1)) {
        section(&b, "Persistence");
        addf(&b, "loading:0\r\nrdb_changes_since_last_save:0\r\naof_enabled:%d\r\nhanudb_durability:%s\r\n"
                 "hanudb_last_txn:%llu\r\nhanudb_durable_txn:%llu\r\nhanudb_bucket_txn:%llu\r\nhanudb_disk_bytes:%llu\r\n",
             srv->opt.resp_durability != HKV_DUR_NONE, durability_name(srv->opt.resp_durability),
             (unsigned long long)st.last_txn, (unsigned long long)st.durable_txn,
             (unsigned long long)srv->waits.reached[WAIT_BUCKET], (unsigned long long)st.disk_bytes);
    }
    if (want_section(argv, argc, "stats", 1)) {
        section(&b, "Stats");
        addf(&b, "total_connections_received:%llu\r\ntotal_commands_processed:%llu\r\nrejected_connections:%llu\r\n"
                 "expired_keys:%llu\r\ntotal_error_replies:%llu\r\n", (unsigned long long)rs->connections_total,
             (unsigned long long)rs->commands, (unsigned long long)rs->rejected_connections,
             (unsigned long long)srv->keys_expired, (unsigned long long)rs->errors);
    }
    if (want_section(argv, argc, "replication", 1)) {
        section(&b, "Replication");
        int leader = server_accepts_writes(srv);
        addf(&b, "role:%s\r\nhanudb_role:%s\r\nconnected_slaves:0\r\n", leader ? "master" : "slave",
             server_role_name(srv));
        char url[LEASE_URL_MAX + 1];
        if (!leader && server_leader_url(srv, url, sizeof url)) addf(&b, "hanudb_leader:%s\r\n", url);
    }
    if (want_section(argv, argc, "keyspace", 1)) {
        section(&b, "Keyspace");
        store_db_info infos[64];
        size_t n = store_db_list(srv->store, infos, 64);
        for (size_t i = 0; i < n && i < 64; i++) {
            int idx = db_index_of(infos[i].name);
            if (idx >= 0 && infos[i].keys) addf(&b, "db%d:keys=%llu,expires=%llu,avg_ttl=0\r\n", idx, (unsigned long long)infos[i].keys,
                                            (unsigned long long)infos[i].expiring);
        }
    }
    resp_w_verbatim(&c->gc.out, c->proto, b.data, b.len);
    hanu_buf_free(&b);
}

/* ---- COMMAND ---- */

static void command_entry(hanu_buf *o, int proto, const resp_command *cmd)
{
    resp_w_array(o, 10);
    resp_w_bulk_str(o, cmd->name);
    resp_w_int(o, cmd->arity);
    int nf = 0;
    const char *flags[4];
    if (cmd->flags & RESP_CMD_WRITE) flags[nf++] = "write";
    else if (cmd->flags & RESP_CMD_KEYS) flags[nf++] = "readonly";
    if (cmd->flags & RESP_CMD_NOAUTH) flags[nf++] = "no_auth";
    if (cmd->flags & RESP_CMD_NOMULTI) flags[nf++] = "no_multi";
    resp_w_set(o, proto, (size_t)nf);
    for (int i = 0; i < nf; i++) resp_w_simple(o, flags[i]);
    resp_w_int(o, cmd->first_key);
    resp_w_int(o, cmd->last_key);
    resp_w_int(o, cmd->step);
    resp_w_set(o, proto, 0);   /* ACL categories */
    resp_w_set(o, proto, 0);   /* tips */
    resp_w_array(o, 0);        /* key specs */
    resp_w_array(o, 0);        /* subcommands */
}

static void command_docs(hanu_buf *o, int proto, const resp_command *cmd)
{
    resp_w_bulk_str(o, cmd->name);
    resp_w_map(o, proto, 3);
    resp_w_bulk_str(o, "summary");
    resp_w_bulk_str(o, cmd->summary);
    resp_w_bulk_str(o, "since");
    resp_w_bulk_str(o, "1.0.0");
    resp_w_bulk_str(o, "group");
    resp_w_bulk_str(o, cmd->group);
}

void resp_cmd_command(resp_conn *c, const resp_arg *argv, size_t argc)
{
    hanu_buf *o = &c->gc.out;
    if (argc == 1) {
        resp_w_array(o, resp_ncommands);
        for (size_t i = 0; i < resp_ncommands; i++) command_entry(o, c->proto, &resp_commands[i]);
    } else if (resp_arg_is(&argv[1], "count") && argc == 2) {
        resp_w_int(o, (int64_t)resp_ncommands);
    } else if (resp_arg_is(&argv[1], "list") && argc == 2) {
        resp_w_array(o, resp_ncommands);
        for (size_t i = 0; i < resp_ncommands; i++) resp_w_bulk_str(o, resp_commands[i].name);
    } else if (resp_arg_is(&argv[1], "info")) {
        resp_w_array(o, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            const resp_command *cmd = resp_command_find(argv[i].p, argv[i].len);
            if (cmd) command_entry(o, c->proto, cmd);
            else resp_w_null_array(o, c->proto);
        }
    } else if (resp_arg_is(&argv[1], "docs")) {
        size_t n = 0;
        for (size_t i = 2; i < argc; i++) n += resp_command_find(argv[i].p, argv[i].len) != NULL;
        resp_w_map(o, c->proto, argc == 2 ? resp_ncommands : n);
        if (argc == 2)
            for (size_t i = 0; i < resp_ncommands; i++) command_docs(o, c->proto, &resp_commands[i]);
        for (size_t i = 2; i < argc; i++) {
            const resp_command *cmd = resp_command_find(argv[i].p, argv[i].len);
            if (cmd) command_docs(o, c->proto, cmd);
        }
    } else {
        resp_w_errorf(o, "ERR unknown subcommand '%.*s'. Try COMMAND HELP.", (int)HANU_MIN(argv[1].len, 128),
                      (const char *)argv[1].p);
        c->rs->errors++;
    }
}

/* ---- CONFIG GET: a few read-only items ---- */

void resp_cmd_config(resp_conn *c, const resp_arg *argv, size_t argc)
{
    if (!resp_arg_is(&argv[1], "get")) {
        resp_w_errorf(&c->gc.out, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.", (int)HANU_MIN(argv[1].len, 128),
                      (const char *)argv[1].p);
        c->rs->errors++;
        return;
    }
    if (argc < 3) { resp_err_arity(c, "config|get"); return; }
    server *srv = c->gc.srv;
    char maxclients[16], port[16], bulk[16];
    snprintf(maxclients, sizeof maxclients, "%u", srv->opt.max_connections);
    const char *colon = strrchr(srv->opt.resp_addr, ':');
    snprintf(port, sizeof port, "%s", colon ? colon + 1 : "");
    snprintf(bulk, sizeof bulk, "%u", srv->limits.max_value);
    uint8_t d = srv->opt.resp_durability;
    const char *items[][2] = {
        { "appendfsync", d == HKV_DUR_NONE ? "everysec" : "always" },
        { "appendonly", "yes" },
        { "databases", "16" },
        { "maxclients", maxclients },
        { "maxmemory", "0" },
        { "maxmemory-policy", "noeviction" },
        { "port", port },
        { "proto-max-bulk-len", bulk },
        { "save", "" },
        { "timeout", "0" },
    };
    size_t nitems = sizeof items / sizeof *items, n = 0;
    int hit[sizeof items / sizeof *items] = { 0 };
    for (size_t i = 0; i < nitems; i++)
        for (size_t a = 2; a < argc; a++)
            if (resp_glob(argv[a].p, argv[a].len, (const uint8_t *)items[i][0], strlen(items[i][0])) ||
                resp_arg_is(&argv[a], items[i][0])) {
                hit[i] = 1;
                n++;
                break;
            }
    resp_w_map(&c->gc.out, c->proto, n);
    for (size_t i = 0; i < nitems; i++)
        if (hit[i]) {
            resp_w_bulk_str(&c->gc.out, items[i][0]);
            resp_w_bulk_str(&c->gc.out, items[i][1]);
        }
}

/* ---- WAIT: the bucket is the one replica; 1 once it holds the connection's last write ---- */

void resp_cmd_wait(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    int64_t want, timeout;
    if (!resp_parse_i64(argv[1].p, argv[1].len, &want)) { resp_err(c, "ERR value is not an integer or out of range"); return; }
    if (!resp_parse_i64(argv[2].p, argv[2].len, &timeout)) {
        resp_err(c, "ERR timeout is not an integer or out of range");
        return;
    }
    if (timeout < 0) { resp_err(c, "ERR timeout is negative"); return; }
    server *srv = c->gc.srv;
    if (!srv->sealer) { resp_w_int(&c->gc.out, 0); return; }
    uint64_t txn = c->last_write_txn;
    int there = txn == 0 || server_reached(srv, WAIT_BUCKET, txn);
    if (there || want <= 0 || c->in_exec) { resp_w_int(&c->gc.out, there); return; }
    size_t start = c->gc.out.len;
    resp_w_int(&c->gc.out, 1);
    gated_gate g = { .start = start, .txn = txn, .mark = WAIT_BUCKET, .soft = 1,
                    .deadline_ns = timeout ? hanu_now_ns() + (uint64_t)timeout * 1000000ull : 0 };
    if (gated_add_gate(&c->gc, g) != HANU_OK) { c->gc.out.len = start; resp_err(c, "ERR out of memory"); return; }
    if (g.deadline_ns) resp_arm_wait_check(c->rs);
    server_want_mark(srv, WAIT_BUCKET, txn);
}

void resp_cmd_quit(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    resp_w_simple(&c->gc.out, "OK");
    c->gc.close_after_flush = 1;
}

void resp_cmd_reset(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    resp_multi_clear(c);
    resp_unwatch_all(c);
    c->proto = 2;
    snprintf(c->db, sizeof c->db, "default");
    c->db_gen = 0;
    c->db_index = 0;
    c->name[0] = '\0';
    c->durability = c->gc.srv->opt.resp_durability;
    c->authed = c->gc.srv->tokens.n == 0;
    c->token = NULL;
    resp_w_simple(&c->gc.out, "RESET");
}

/* ---- WATCH ---- */

void resp_unwatch_all(resp_conn *c)
{
    for (size_t i = 0; i < c->nwatches; i++) {
        const resp_watch *w = &c->watches[i];
        if (w->registered) store_unwatch(c->gc.srv->store, w->db_id, c->watch_keys.data + w->koff, w->klen);
    }
    c->nwatches = 0;
    c->watch_keys.len = 0;
}

void resp_cmd_unwatch(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    resp_unwatch_all(c);
    resp_w_simple(&c->gc.out, "OK");
}

void resp_cmd_watch(resp_conn *c, const resp_arg *argv, size_t argc)
{
    if (c->in_multi) { resp_err(c, "ERR WATCH inside MULTI is not allowed"); return; }
    if (c->nwatches + argc - 1 > RESP_WATCH_MAX) { resp_err(c, "ERR too many WATCHed keys"); return; }
    if (c->nwatches + argc - 1 > c->wcap) {
        size_t ncap = HANU_MAX(c->wcap * 2, c->nwatches + argc - 1);
        resp_watch *nw = realloc(c->watches, ncap * sizeof *nw);
        if (!nw) { resp_err(c, "ERR out of memory"); return; }
        c->watches = nw;
        c->wcap = ncap;
    }
    resp_db db = resp_current_db(c);
    for (size_t i = 1; i < argc; i++) {
        resp_watch *w = &c->watches[c->nwatches];
        snprintf(w->db, sizeof w->db, "%s", c->db);
        w->koff = c->watch_keys.len;
        w->klen = argv[i].len;
        w->token = 0;
        w->present = db.exists && argv[i].len && argv[i].len <= c->gc.srv->limits.max_key &&
                     store_lookup(c->gc.srv->store, db.id, argv[i].p, argv[i].len, &w->token) == HANU_OK;
        if (hanu_buf_append(&c->watch_keys, argv[i].p, argv[i].len) != HANU_OK) { resp_err(c, "ERR out of memory"); return; }
        /* The registry sees a key created and deleted again, which the token cannot;
           a database that does not exist yet has no id to register under. */
        w->registered = 0;
        w->db_id = db.id;
        if (db.exists) {
            int rc = store_watch(c->gc.srv->store, db.id, argv[i].p, argv[i].len, &w->touches);
            if (rc != HANU_OK) { resp_err(c, rc == HANU_ERR_TOO_LARGE ? "ERR too many WATCHed keys" : "ERR out of memory"); return; }
            w->registered = 1;
        }
        c->nwatches++;
    }
    resp_w_simple(&c->gc.out, "OK");
}

void resp_cmd_dbsize(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    resp_db db = resp_current_db(c);
    store_db_info info;
    int64_t n = db.exists && store_db_info_get(c->gc.srv->store, db.id, &info) == HANU_OK ? (int64_t)info.keys : 0;
    resp_w_int(&c->gc.out, n + resp_staged_key_delta(c, &db));
}

/* ---- FLUSHDB: deletes in records of at most FLUSH_CHUNK keys (not one atomic record) ---- */

#define FLUSH_CHUNK 50000u

static int collect_key(void *ctx, const uint8_t *key, size_t klen, const uint8_t *v, size_t vlen)
{
    (void)v; (void)vlen;
    hanu_buf *b = ctx;
    uint32_t l = (uint32_t)klen;
    return hanu_buf_append(b, &l, sizeof l) != HANU_OK || hanu_buf_append(b, key, klen) != HANU_OK;
}

void resp_cmd_flushdb(resp_conn *c, const resp_arg *argv, size_t argc)
{
    if (argc > 2 || (argc == 2 && !resp_arg_is(&argv[1], "sync") && !resp_arg_is(&argv[1], "async"))) {
        resp_err(c, "ERR syntax error");
        return;
    }
    server *srv = c->gc.srv;
    if (!srv->opt.resp_allow_flushdb) {
        resp_err(c, "ERR FLUSHDB is disabled on this server (start it with --resp-allow-flushdb)");
        return;
    }
    resp_db db = resp_current_db(c);
    size_t start = c->gc.out.len;
    if (!db.exists) { resp_w_simple(&c->gc.out, "OK"); return; }
    hanu_buf keys = { 0 };
    int rc = store_scan(srv->store, db.id, collect_key, &keys);
    if (c->in_exec) {   /* inside EXEC: the deletes join the transaction's one record */
        for (size_t pos = 0; rc == HANU_OK && pos < keys.len;) {
            uint32_t l;
            memcpy(&l, keys.data + pos, sizeof l);
            const resp_arg k = { keys.data + pos + sizeof l, l };
            rc = resp_stage(c, STORE_DELETE, &k, NULL, 0, 0);
            pos += sizeof l + l;
        }
        hanu_buf_free(&keys);
        if (rc) resp_w_errorf(&c->gc.out, "ERR FLUSHDB failed: %s", hanu_status_str(rc));
        else resp_w_simple(&c->gc.out, "OK");
        return;
    }
    store_op *ops = calloc(FLUSH_CHUNK, sizeof *ops);
    uint64_t txn = 0;
    size_t pos = 0;
    if (!ops) rc = HANU_ERR_NOMEM;
    while (rc == HANU_OK && pos < keys.len) {
        size_t n = 0;
        while (n < FLUSH_CHUNK && pos < keys.len) {
            uint32_t l;
            memcpy(&l, keys.data + pos, sizeof l);
            ops[n++] = (store_op){ .kind = STORE_DELETE, .key = keys.data + pos + sizeof l, .key_len = l };
            pos += sizeof l + l;
        }
        rc = store_write(srv->store, db.id, ops, n, STORE_COND_NONE, 0, &txn, NULL);
    }
    free(ops);
    hanu_buf_free(&keys);
    if (rc) { resp_w_errorf(&c->gc.out, "ERR FLUSHDB failed: %s", hanu_status_str(rc)); c->rs->errors++; return; }
    resp_w_simple(&c->gc.out, "OK");
    if (txn) {
        c->last_write_txn = txn;
        gated_gate_write(&c->gc, start, txn, c->durability);
    }
}
