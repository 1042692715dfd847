/*
 * resp_internal.h: the Redis face's connections, its command table and the
 * staging of a command's writes (resp_server.c runs connections, resp_cmd.c
 * the key commands, resp_admin.c the connection and server commands).
 *
 * Writes: a command stages its sets and deletes (reads see what it staged),
 * and the dispatcher commits them as one store write (one log record) after
 * it: MSET, RENAME, DEL of many keys and a whole MULTI/EXEC are atomic. Every
 * write of every face runs on the event loop thread and a command reads and
 * commits without yielding, so a read-modify-write (INCR, APPEND, GETSET...)
 * cannot interleave with another writer, and EXEC compares WATCHed tokens in
 * that same uninterrupted step.
 */
#ifndef HANU_RESP_INTERNAL_H
#define HANU_RESP_INTERNAL_H

#include "server/gated_conn.h"
#include "resp/resp.h"
#include "resp/resp_proto.h"

#define RESP_DATABASES 16              /* SELECT 0..15, as redis-server's default */
#define RESP_NAME_MAX 128              /* CLIENT SETNAME */
#define RESP_MULTI_MAX 100000u         /* commands queued in one MULTI */
#define RESP_WATCH_MAX 10000u          /* keys WATCHed by one connection */
#define RESP_AUTH_MAX_FAILURES 3       /* failed AUTHs before the connection closes */

typedef struct resp_staged {
    uint8_t kind;          /* STORE_SET or STORE_DELETE */
    size_t koff, klen, voff, vlen;   /* into the staging arena */
    uint64_t expire;       /* a set's expiry, wall-clock ms since the epoch (0: none) */
    uint8_t type;          /* a set's Redis type (LOG_TYPE_*: 0 a string, LOG_TYPE_LIST) */
} resp_staged;

typedef struct resp_watch {
    char db[STORE_DB_NAME_MAX + 1];
    size_t koff, klen;     /* into watch_keys */
    int present;
    uint64_t token;
    int registered;        /* in the store's registry (store_watch) under db_id */
    uint32_t db_id;
    uint64_t touches;      /* the registry's count at WATCH */
} resp_watch;

typedef struct resp_server resp_server;

/* A connection: the core's gated output (server/gated_conn.h; WAIT's answer is a
   soft gate there: ":1" becomes ":0" when the bucket does not hold the write in
   time), then the face's own state. */
typedef struct resp_conn {
    gated_conn gc;              /* first: sock->data points at both */
    resp_server *rs;
    resp_request req;
    size_t need;                /* input bytes the parser wants before trying again */
    uint64_t id;
    int proto;                  /* 2 or 3 */
    char db[STORE_DB_NAME_MAX + 1];   /* the SELECTed database's name */
    int db_index;               /* its SELECT index, -1 when SELECTed by name */
    char name[RESP_NAME_MAX + 1];
    const auth_token *token;
    int authed;                 /* no tokens, or AUTH succeeded */
    unsigned auth_failures;
    uint8_t durability;         /* HKV_DUR_* */
    uint64_t last_write_txn;    /* WAIT waits for it */
    /* MULTI: the queued commands' arguments (lengths then bytes), and their count */
    int in_multi, multi_failed, in_exec;
    hanu_buf queued;
    size_t nqueued;
    resp_watch *watches;
    size_t nwatches, wcap;
    hanu_buf watch_keys;
    uint64_t created_ns, last_active_ns;
    char addr[64], laddr[64];
    const char *last_cmd;       /* the last command's name (a static string), for CLIENT INFO */
    /* db's id and kind as last looked up, while the store's database generation is
       db_gen - 1 (0: look again; set whenever db changes) */
    uint64_t db_gen;
    uint32_t db_id;
    uint8_t db_kind;
    int db_exists;
} resp_conn;

struct resp_server {
    server *srv;
    int fd;
    h2o_socket_t *listener;
    h2o_linklist_t conns;
    size_t nconns;
    uint64_t next_id;
    uint64_t commands, errors, connections_total, rejected_connections;
    uint64_t started_ns;
    h2o_timeout_t wait_timeout;          /* WAIT deadlines, checked every 100 ms */
    h2o_timeout_entry_t wait_entry;
    size_t timed_waits;
    /* the command being run: its staged writes and the database they go to */
    resp_staged *staged;
    size_t nstaged, scap;
    hanu_buf arena;
    hanu_buf val;                        /* a value read from the store */
    store_op *ops;
    uint64_t *expires;                   /* the ops' expiries (ops_cap of them) */
    uint8_t *types;                      /* the ops' Redis types (ops_cap of them) */
    size_t ops_cap;
    int dirty_db;                        /* a database was created for the staged writes */
    uint32_t list_ids;                   /* lists the staged writes create (each gets its own id) */
};

/* The database a command works on: its id, or absent (reads see it empty; the
   first write creates it). */
typedef struct resp_db {
    uint32_t id;
    int exists;
} resp_db;

typedef void (*resp_cmd_fn)(resp_conn *c, const resp_arg *argv, size_t argc);

enum resp_cmd_flags {
    RESP_CMD_WRITE = 1,        /* refused on followers and for read-only tokens */
    RESP_CMD_NOAUTH = 2,       /* allowed before AUTH */
    RESP_CMD_NOMULTI = 4,      /* run at once even inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET) */
    RESP_CMD_KEYS = 8,         /* reads or writes keys of the SELECTed database */
};

typedef struct resp_command {
    const char *name;          /* lower case */
    int arity;                 /* redis-server's: exact when > 0, at least -arity when < 0 */
    int flags;
    resp_cmd_fn fn;
    int first_key, last_key, step;
    const char *group, *summary;
} resp_command;

extern const resp_command resp_commands[];
extern const size_t resp_ncommands;
const resp_command *resp_command_find(const uint8_t *name, size_t len);

/* resp_server.c: the dispatcher, also EXEC's */
void resp_run(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_err(resp_conn *c, const char *msg);
/* The database a command of c works on (its SELECT), looked up now. */
resp_db resp_current_db(resp_conn *c);
int resp_arg_is(const resp_arg *a, const char *lower);
/* Redis's glob-style pattern (KEYS, SCAN MATCH, CONFIG GET): * ? [abc] [^a] [a-z] \\x. */
int resp_glob(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn);
/* Redis's answer to a wrong number of arguments. */
void resp_err_arity(resp_conn *c, const char *name);

#define RESP_ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

/* Staging (resp_cmd.c): reads of key see what the command staged before. */
/* A value of any type: 1 found (*v valid until the next read or stage), 0 absent,
   -1 error answered. *expire (unless NULL) gets the key's expiry, 0 when it has
   none; *type its LOG_TYPE_*. An expired key is absent (the store's lazy expiry;
   a staged set's expiry the same). */
int resp_read_typed(resp_conn *c, const resp_db *db, const resp_arg *key, const uint8_t **v, size_t *vlen,
                    uint64_t *expire, uint8_t *type);
/* A string: resp_read_typed that answers -WRONGTYPE (and returns -1) for any other type. */
int resp_read(resp_conn *c, const resp_db *db, const resp_arg *key, const uint8_t **v, size_t *vlen,
              uint64_t *expire);
/* expire: a set's expiry (0: none; a set without one clears the key's, as SET does). */
int resp_stage(resp_conn *c, uint8_t kind, const resp_arg *key, const void *v, size_t vlen, uint64_t expire);
/* resp_stage of a value of Redis type type (LOG_TYPE_*). */
int resp_stage_typed(resp_conn *c, uint8_t kind, const resp_arg *key, const void *v, size_t vlen, uint64_t expire,
                     uint8_t type);
/* Stages, or answers out of memory: 1 staged. */
int resp_stage_or_answer(resp_conn *c, uint8_t kind, const resp_arg *key, const void *v, size_t vlen,
                         uint64_t expire);
/* A record of the system database (a list's chunk or owner, kvlist.h) as the staged
   writes leave it, copied to out: OK, NOT_FOUND or a store error (not answered). Stage its
   writes with the kinds STORE_SYSTEM_SET and STORE_SYSTEM_DELETE. */
int resp_read_system(resp_conn *c, const resp_arg *key, hanu_buf *out);
/* The key's expiry (0: none) without its value: 1 found, 0 absent. */
int resp_key_expiry(resp_conn *c, const resp_db *db, const resp_arg *key, uint64_t *expire);
/* The same with its Redis type (LOG_TYPE_*). */
int resp_key_meta(resp_conn *c, const resp_db *db, const resp_arg *key, uint64_t *expire, uint8_t *type);
/* Whether key exists (staged or in the store): 1, 0, or -1 (error answered). */
int resp_exists(resp_conn *c, const resp_db *db, const resp_arg *key);
/* A key or value past the server's limits: answered, returns 0. */
int resp_check_key(resp_conn *c, const resp_arg *key);
int resp_check_value_len(resp_conn *c, size_t len);
void resp_stage_reset(resp_server *rs);
/* Keys the staged writes create (absent from the store, matching pattern unless NULL),
   appended to out as bulks when out; their count, or -1 out of memory. */
int64_t resp_staged_new_keys(resp_conn *c, const resp_db *db, const resp_arg *pattern, hanu_buf *out);
/* How the staged writes change the database's key count (DBSIZE inside EXEC). */
int64_t resp_staged_key_delta(resp_conn *c, const resp_db *db);
/* Commits the staged writes as one record; answers from reply_start are
   replaced by an error when it fails. txn 0: nothing staged. */
int resp_commit(resp_conn *c, size_t reply_start, uint64_t *txn);

/* resp_admin.c: connection and server commands */
void resp_cmd_ping(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_echo(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_hello(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_auth(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_select(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_info(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_client(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_command(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_config(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_wait(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_quit(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_reset(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_multi(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_exec(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_discard(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_watch(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_unwatch(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_dbsize(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_flushdb(resp_conn *c, const resp_arg *argv, size_t argc);

/* resp_ttl.c: per-key expiry (SET's options, GETEX, EXPIRE..., TTL, PERSIST) */
enum resp_xflags {
    RESP_X_NX = 1, RESP_X_XX = 2, RESP_X_GET = 4, RESP_X_KEEPTTL = 8, RESP_X_PERSIST = 16,
    RESP_X_EX = 32, RESP_X_PX = 64, RESP_X_EXAT = 128, RESP_X_PXAT = 256,
};
typedef struct resp_xopts {
    int flags;                 /* enum resp_xflags */
    const resp_arg *expire;    /* the argument after EX, PX, EXAT or PXAT */
} resp_xopts;
/* SET's (is_set) or GETEX's options from argv[from]: 1, or 0 with the error answered. */
int resp_parse_xopts(resp_conn *c, const resp_arg *argv, size_t argc, size_t from, int is_set, resp_xopts *o);
/* The options' expiry as wall-clock ms (0: none asked): 1, or 0 with the error answered. */
int resp_xopts_when(resp_conn *c, const resp_xopts *o, const char *cmd, uint64_t *when);
/* SET's expiry for a key: when asked, the key's own under KEEPTTL, else none. */
uint64_t resp_set_expiry(resp_conn *c, const resp_db *db, const resp_arg *key, const resp_xopts *o, uint64_t when);
void resp_cmd_getex(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_expire(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_ttl(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_persist(resp_conn *c, const resp_arg *argv, size_t argc);
/* resp_list.c: Redis lists (LPUSH, RPUSH, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET,
   LREM, LTRIM and the PUSHX forms), kept in chunks (kvlist.h): */
void resp_cmd_push(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_pop(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_llen(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_lrange(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_lindex(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_lset(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_lrem(resp_conn *c, const resp_arg *argv, size_t argc);
void resp_cmd_ltrim(resp_conn *c, const resp_arg *argv, size_t argc);
/* RENAME stages the head (v, n) at key to: this stages the list's owner record
   naming to (before the head's own staging, which may move v): 1, 0 answered. */
int resp_list_renamed(resp_conn *c, const uint8_t *v, size_t n, const resp_arg *to);

/* A WAIT with a deadline was gated: its expiry is checked every 100 ms meanwhile. */
void resp_arm_wait_check(resp_server *rs);
void resp_unwatch_all(resp_conn *c);
void resp_multi_clear(resp_conn *c);

#endif
