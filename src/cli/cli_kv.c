/*
 * cli_kv.c: `hanudb kv`, the command-line client of the key-value server.
 * One command per run (ping, get, set, del, ttl, create, drop, info, stats,
 * batch), built on the blocking calls of include/hanudb_client.h, after an
 * Auth when a token is given (--token or HANUDB_TOKEN).
 *
 * Output: values, tokens and JSON on stdout, one per line; messages on
 * stderr. Exit status: 0 ok, 1 key or database not found, 2 any other error
 * (bad usage, connection failure, error response).
 */
#include "cli/cli.h"
#include "hanudb_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_DEFAULT_ADDR "127.0.0.1:8787"

static void kv_usage(FILE *out)
{
    fputs(
"usage: hanudb kv [OPTIONS] COMMAND [ARGS]\n"
"\n"
"commands:\n"
"  ping            check that the server answers (prints \"pong\")\n"
"  get KEY         print the value of KEY, then a newline\n"
"  set KEY VALUE   store VALUE under KEY; print the write's token (with --ttl the key\n"
"                  expires after that time; without, a set clears any expiry)\n"
"  ttl KEY         print the milliseconds KEY has left, or \"none\" when it does not expire\n"
"  del KEY         delete KEY; print the delete's token\n"
"  create DB       create database DB\n"
"  drop DB         drop database DB\n"
"  info [DB]       print the JSON info of DB (default: --db)\n"
"  stats           print the server's counters (JSON)\n"
"  batch           read lines \"set KEY VALUE\" or \"del KEY\" from stdin (VALUE is the\n"
"                  rest of the line; blank lines and lines starting with # are\n"
"                  skipped) and write them as one atomic WriteBatch; print its token\n"
"\n"
"options:\n"
"  --addr HOST:PORT     server (default $HANUDB_KV_ADDR, else " KV_DEFAULT_ADDR ")\n"
"  --db NAME            database (default \"default\")\n"
"  --durability LEVEL   local (default: after fdatasync), none, or bucket\n"
"  --ttl DURATION       set: the key expires after DURATION: a number with a unit,\n"
"                       ms, s, m, h or d (\"30s\", \"1500ms\"; a bare number is seconds)\n"
"  --timeout MS         connect and I/O timeout (default 30000)\n"
"  --token TOKEN        authenticate with TOKEN first (a server with --tokens needs\n"
"                       one); default $HANUDB_TOKEN, which keeps it out of ps\n"
"  --help               this text\n"
"\n"
"exit status: 0 ok, 1 key or database not found, 2 any other error\n", out);
}

static int kv_bad_usage(const char *msg, const char *arg)
{
    fprintf(stderr, "hanudb kv: %s%s%s\n(see hanudb kv --help)\n", msg, arg ? ": " : "",
            arg ? arg : "");
    return 2;
}

/* Exit status for a call's result; prints the failure on stderr. */
static int kv_result(hkv_conn *c, const char *cmd, int rc)
{
    if (rc == HKV_OK)
        return 0;
    const char *msg = hkv_errmsg(c);
    const char *name = hkv_status_str(rc);
    if (msg[0] && strcmp(msg, name) != 0)
        fprintf(stderr, "hanudb kv: %s: %s: %s\n", cmd, name, msg);
    else
        fprintf(stderr, "hanudb kv: %s: %s\n", cmd, name);
    return (rc == HKV_KEY_NOT_FOUND || rc == HKV_DB_NOT_FOUND) ? 1 : 2;
}

static void print_token(int has, uint64_t token)
{
    if (has)
        printf("%" PRIu64 "\n", token);
    else
        puts("ok");
}

static void print_bytes_line(const hkv_buf *b)
{
    if (b->len)
        fwrite(b->data, 1, b->len, stdout);
    putchar('\n');
}

/* ---- batch: lines from stdin ---- */

struct kv_batch {
    char **lines;             /* owned: each item's key and value point into one */
    hkv_batch_item *items;
    size_t count, cap;
};

static void kv_batch_free(struct kv_batch *b)
{
    for (size_t i = 0; i < b->count; i++)
        free(b->lines[i]);
    free(b->lines);
    free(b->items);
}

/* Parses one line (its newline removed) into an item; 0 or an error message. */
static const char *kv_parse_line(char *line, hkv_batch_item *it)
{
    char *sp;
    if (strncmp(line, "set ", 4) == 0) {
        char *key = line + 4;
        sp = strchr(key, ' ');
        if (!sp || sp == key)
            return "want \"set KEY VALUE\"";
        *sp = 0;
        *it = (hkv_batch_item){ .kind = HKV_BATCH_SET, .key = key, .key_len = strlen(key),
                                .value = sp + 1, .value_len = strlen(sp + 1) };
        return NULL;
    }
    if (strncmp(line, "del ", 4) == 0) {
        char *key = line + 4;
        if (!key[0] || strchr(key, ' '))
            return "want \"del KEY\"";
        *it = (hkv_batch_item){ .kind = HKV_BATCH_DELETE, .key = key, .key_len = strlen(key) };
        return NULL;
    }
    return "want \"set KEY VALUE\" or \"del KEY\"";
}

static int kv_read_batch(FILE *in, struct kv_batch *b)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t lineno = 0;
    while ((n = getline(&line, &cap, in)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (n == 0 || line[0] == '#')
            continue;
        if ((size_t)n != strlen(line)) {
            fprintf(stderr, "hanudb kv: batch: line %zu: contains a NUL byte\n", lineno);
            free(line);
            return 2;
        }
        if (b->count == HKV_BATCH_MAX) {
            fprintf(stderr, "hanudb kv: batch: more than %u items\n", HKV_BATCH_MAX);
            free(line);
            return 2;
        }
        if (b->count == b->cap) {
            size_t nc = b->cap ? b->cap * 2 : 64;
            char **nl = realloc(b->lines, nc * sizeof *nl);
            if (nl)
                b->lines = nl;
            hkv_batch_item *ni = nl ? realloc(b->items, nc * sizeof *ni) : NULL;
            if (!ni) {
                fprintf(stderr, "hanudb kv: batch: out of memory\n");
                free(line);
                return 2;
            }
            b->items = ni;
            b->cap = nc;
        }
        const char *err = kv_parse_line(line, &b->items[b->count]);
        if (err) {
            fprintf(stderr, "hanudb kv: batch: line %zu: %s\n", lineno, err);
            free(line);
            return 2;
        }
        b->lines[b->count++] = line;     /* the item points into it: keep it */
        line = NULL;
        cap = 0;
    }
    free(line);
    if (ferror(in)) {
        fprintf(stderr, "hanudb kv: batch: reading stdin failed\n");
        return 2;
    }
    if (b->count == 0) {
        fprintf(stderr, "hanudb kv: batch: no items on stdin\n");
        return 2;
    }
    return 0;
}

/* ---- main ---- */

struct kv_args {
    const char *addr, *db, *token;
    int durability, timeout_ms;
    uint64_t ttl_ms;          /* set --ttl; 0: none */
    const char *pos[4];       /* command and its arguments */
    int npos;
};

/* "30s", "1500ms", "5m", "2h", "1d" or a bare number of seconds, as ms: 0 when
   malformed, zero or over the protocol's 100 years. */
static uint64_t kv_parse_duration(const char *v)
{
    char *end;
    if (v[0] < '0' || v[0] > '9')
        return 0;
    unsigned long long n = strtoull(v, &end, 10);
    static const struct { const char *unit; uint64_t ms; } units[] = {
        { "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "d", 86400000 },
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) != 0)
            continue;
        if (n == 0 || n > HKV_TTL_MAX_MS / units[i].ms)
            return 0;
        return n * units[i].ms;
    }
    return 0;
}

/* Value of --name VALUE or --name=VALUE at argv[*i]; NULL when absent. */
static const char *kv_opt_value(int argc, char **argv, int *i, const char *name, int *err)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != 0)
        return NULL;
    if (*i + 1 >= argc) {
        *err = 1;
        return NULL;
    }
    return argv[++*i];
}

static int kv_parse_args(int argc, char **argv, struct kv_args *a)
{
    const char *env = getenv("HANUDB_KV_ADDR"), *tok = getenv("HANUDB_TOKEN");
    *a = (struct kv_args){ .addr = env && env[0] ? env : KV_DEFAULT_ADDR, .db = "default",
                           .token = tok && tok[0] ? tok : NULL,
                           .durability = HKV_DUR_LOCAL, .timeout_ms = 30000 };
    int opts_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        int err = 0;
        if (!opts_done && strcmp(arg, "-h") == 0) {
            kv_usage(stdout);
            return -1;
        }
        if (opts_done || arg[0] != '-' || arg[1] != '-') {
            if (a->npos == (int)(sizeof a->pos / sizeof a->pos[0]))
                return kv_bad_usage("too many arguments", arg);
            a->pos[a->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            opts_done = 1;
        } else if (strcmp(arg, "--help") == 0) {
            kv_usage(stdout);
            return -1;
        } else if ((v = kv_opt_value(argc, argv, &i, "--addr", &err)) != NULL) {
            a->addr = v;
        } else if ((v = kv_opt_value(argc, argv, &i, "--db", &err)) != NULL) {
            a->db = v;
        } else if ((v = kv_opt_value(argc, argv, &i, "--durability", &err)) != NULL) {
            if (strcmp(v, "local") == 0) a->durability = HKV_DUR_LOCAL;
            else if (strcmp(v, "none") == 0) a->durability = HKV_DUR_NONE;
            else if (strcmp(v, "bucket") == 0) a->durability = HKV_DUR_BUCKET;
            else return kv_bad_usage("--durability wants local, none or bucket", v);
        } else if ((v = kv_opt_value(argc, argv, &i, "--token", &err)) != NULL) {
            /* Never echoed: a bad token is named only by its length. */
            if (!v[0] || strlen(v) > HKV_AUTH_TOKEN_MAX)
                return kv_bad_usage("--token wants 1 to 255 bytes", NULL);
            a->token = v;
        } else if ((v = kv_opt_value(argc, argv, &i, "--ttl", &err)) != NULL) {
            a->ttl_ms = kv_parse_duration(v);
            if (!a->ttl_ms)
                return kv_bad_usage("--ttl wants a duration such as 30s, 1500ms, 5m, 2h or 1d "
                                    "(at most 100 years)", v);
        } else if ((v = kv_opt_value(argc, argv, &i, "--timeout", &err)) != NULL) {
            char *end;
            long ms = strtol(v, &end, 10);
            if (*end || end == v || ms <= 0 || ms > 86400000)
                return kv_bad_usage("--timeout wants milliseconds", v);
            a->timeout_ms = (int)ms;
        } else if (err) {
            return kv_bad_usage("option needs a value", arg);
        } else {
            return kv_bad_usage("unknown option", arg);
        }
        if (err)
            return kv_bad_usage("option needs a value", arg);
    }
    if (a->npos == 0)
        return kv_bad_usage("no command given", NULL);
    if (a->ttl_ms && strcmp(a->pos[0], "set") != 0)
        return kv_bad_usage("--ttl applies to set only, not", a->pos[0]);
    return 0;
}

/* Checks that the command got exactly want arguments (or up to want_max). */
static int kv_nargs(const struct kv_args *a, int want, int want_max)
{
    int got = a->npos - 1;
    if (got < want || got > want_max) {
        kv_bad_usage("wrong number of arguments for", a->pos[0]);
        return 2;
    }
    return 0;
}

static int kv_run(hkv_conn *c, const struct kv_args *a)
{
    const char *cmd = a->pos[0];
    uint64_t tok = 0;
    int rc;
    if (strcmp(cmd, "ping") == 0) {
        rc = hkv_ping(c);
        if (rc == HKV_OK)
            puts("pong");
        return kv_result(c, cmd, rc);
    }
    if (strcmp(cmd, "get") == 0) {
        hkv_buf v = {0};
        rc = hkv_get(c, a->db, a->pos[1], strlen(a->pos[1]), &v, &tok);
        if (rc == HKV_OK)
            print_bytes_line(&v);
        hkv_buf_free(&v);
        return kv_result(c, cmd, rc);
    }
    if (strcmp(cmd, "set") == 0) {
        size_t kl = strlen(a->pos[1]), vl = strlen(a->pos[2]);
        rc = a->ttl_ms ? hkv_set_ttl(c, a->db, a->pos[1], kl, a->ttl_ms, a->pos[2], vl, a->durability, &tok)
                       : hkv_set(c, a->db, a->pos[1], kl, a->pos[2], vl, a->durability, &tok);
        if (rc == HKV_OK)
            print_token(1, tok);
        return kv_result(c, cmd, rc);
    }
    if (strcmp(cmd, "ttl") == 0) {
        uint64_t expire = 0, left = 0;
        rc = hkv_ttl(c, a->db, a->pos[1], strlen(a->pos[1]), &expire, &left, &tok);
        if (rc == HKV_OK && expire)
            printf("%" PRIu64 "\n", left);
        else if (rc == HKV_OK)
            puts("none");
        return kv_result(c, cmd, rc);
    }
    if (strcmp(cmd, "del") == 0) {
        rc = hkv_delete(c, a->db, a->pos[1], strlen(a->pos[1]), a->durability, &tok);
        if (rc == HKV_OK)
            print_token(1, tok);
        return kv_result(c, cmd, rc);
    }
    if (strcmp(cmd, "create") == 0 || strcmp(cmd, "drop") == 0) {
        uint64_t none = UINT64_MAX;
        tok = none;
        rc = cmd[0] == 'c' ? hkv_create(c, a->pos[1], a->durability, &tok)
                           : hkv_drop(c, a->pos[1], a->durability, &tok);
        if (rc == HKV_OK)
            print_token(tok != none, tok);
        return kv_result(c, cmd, rc);
    }
    if (strcmp(cmd, "info") == 0 || strcmp(cmd, "stats") == 0) {
        hkv_buf json = {0};
        rc = cmd[0] == 'i' ? hkv_info(c, a->npos > 1 ? a->pos[1] : a->db, &json)
                           : hkv_stats(c, &json);
        if (rc == HKV_OK)
            print_bytes_line(&json);
        hkv_buf_free(&json);
        return kv_result(c, cmd, rc);
    }
    /* batch */
    struct kv_batch b = {0};
    int st = kv_read_batch(stdin, &b);
    if (st == 0) {
        rc = hkv_write_batch(c, a->db, b.items, b.count, a->durability, &tok);
        if (rc == HKV_OK)
            print_token(1, tok);
        st = kv_result(c, cmd, rc);
    }
    kv_batch_free(&b);
    return st;
}

int cli_kv_main(int argc, char **argv)
{
    struct kv_args a;
    int st = kv_parse_args(argc, argv, &a);
    if (st != 0)
        return st < 0 ? 0 : st;
    static const struct { const char *name; int min, max; } cmds[] = {
        { "ping", 0, 0 }, { "get", 1, 1 }, { "set", 2, 2 }, { "del", 1, 1 }, { "ttl", 1, 1 },
        { "create", 1, 1 }, { "drop", 1, 1 }, { "info", 0, 1 }, { "stats", 0, 0 },
        { "batch", 0, 0 },
    };
    size_t i;
    for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(a.pos[0], cmds[i].name) == 0)
            break;
    if (i == sizeof cmds / sizeof cmds[0])
        return kv_bad_usage("unknown command", a.pos[0]);
    if (kv_nargs(&a, cmds[i].min, cmds[i].max) != 0)
        return 2;
    if (a.npos > 1 && a.pos[1][0] == 0)
        return kv_bad_usage("empty argument for", a.pos[0]);

    hkv_options o = { .connect_timeout_ms = a.timeout_ms, .io_timeout_ms = a.timeout_ms };
    hkv_conn *c = NULL;
    char err[300];
    int rc = hkv_connect(a.addr, &o, &c, err, sizeof err);
    if (rc != HKV_OK) {
        fprintf(stderr, "hanudb kv: %s\n", err);
        return 2;
    }
    /* The server's answer to a bad token never holds it, so kv_result may print it. */
    rc = a.token ? hkv_auth(c, a.token) : HKV_OK;
    st = rc == HKV_OK ? kv_run(c, &a) : kv_result(c, "auth", rc);
    hkv_close(c);
    if (fflush(stdout) != 0 && st == 0) {
        perror("hanudb kv: stdout");
        st = 2;
    }
    return st;
}
