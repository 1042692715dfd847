/*
 * resp_ttl.c: per-key expiry on the Redis face: SET's EX/PX/EXAT/PXAT/KEEPTTL,
 * GETEX, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME,
 * PEXPIRETIME and PERSIST, with redis-server 7.0's answers and errors word for
 * word (its t_string.c and expire.c are the model, cited by function).
 *
 * The expiry is part of the key's record (the store's log op 6): changing it
 * writes the value again with the new expiry, so the key's token changes, and a
 * follower, a rebuild and a restart see the same expiry. An expired key is
 * absent to every read at once; the writer's sweep deletes it later.
 */
#include "resp/resp_internal.h"

#include <stdio.h>

#define ERR_NOT_INT "ERR value is not an integer or out of range"

static int is_two(const resp_arg *a, char x, char y)
{
    return a->len == 2 && (a->p[0] | 32) == x && (a->p[1] | 32) == y;
}

/* parseExtendedStringArgumentsOrReply: an option is refused (syntax error) when an
   option it excludes came before it; EX twice is allowed (the last one counts). */
int resp_parse_xopts(resp_conn *c, const resp_arg *argv, size_t argc, size_t from, int is_set, resp_xopts *o)
{
    o->flags = 0;
    o->expire = NULL;
    const int timed = RESP_X_EX | RESP_X_PX | RESP_X_EXAT | RESP_X_PXAT;
    for (size_t j = from; j < argc; j++) {
        const resp_arg *a = &argv[j];
        int has_next = j + 1 < argc, f = o->flags, take = 0;
        if (is_two(a, 'n', 'x') && !(f & RESP_X_XX) && is_set) o->flags |= RESP_X_NX;
        else if (is_two(a, 'x', 'x') && !(f & RESP_X_NX) && is_set) o->flags |= RESP_X_XX;
        else if (resp_arg_is(a, "get") && is_set) o->flags |= RESP_X_GET;
        else if (resp_arg_is(a, "keepttl") && !(f & (RESP_X_PERSIST | timed)) && is_set) o->flags |= RESP_X_KEEPTTL;
        else if (resp_arg_is(a, "persist") && !is_set && !(f & (timed | RESP_X_KEEPTTL))) o->flags |= RESP_X_PERSIST;
        else if (is_two(a, 'e', 'x') && !(f & (RESP_X_KEEPTTL | RESP_X_PERSIST | RESP_X_EXAT | RESP_X_PX | RESP_X_PXAT)) && has_next)
            take = RESP_X_EX;
        else if (is_two(a, 'p', 'x') && !(f & (RESP_X_KEEPTTL | RESP_X_PERSIST | RESP_X_EX | RESP_X_EXAT | RESP_X_PXAT)) && has_next)
            take = RESP_X_PX;
        else if (resp_arg_is(a, "exat") && !(f & (RESP_X_KEEPTTL | RESP_X_PERSIST | RESP_X_EX | RESP_X_PX | RESP_X_PXAT)) && has_next)
            take = RESP_X_EXAT;
        else if (resp_arg_is(a, "pxat") && !(f & (RESP_X_KEEPTTL | RESP_X_PERSIST | RESP_X_EX | RESP_X_EXAT | RESP_X_PX)) && has_next)
            take = RESP_X_PXAT;
        else {
            resp_err(c, "ERR syntax error");
            return 0;
        }
        if (take) {
            o->flags |= take;
            o->expire = &argv[++j];
        }
    }
    return 1;
}

static void err_expire_time(resp_conn *c, const char *cmd)
{
    resp_w_errorf(&c->gc.out, "ERR invalid expire time in '%s' command", cmd);
    c->rs->errors++;
}

/* getExpireMillisecondsOrReply */
int resp_xopts_when(resp_conn *c, const resp_xopts *o, const char *cmd, uint64_t *when)
{
    *when = 0;
    if (!o->expire) return 1;
    int64_t ms;
    if (!resp_parse_i64(o->expire->p, o->expire->len, &ms)) { resp_err(c, ERR_NOT_INT); return 0; }
    int seconds = (o->flags & (RESP_X_EX | RESP_X_EXAT)) != 0;
    if (ms <= 0 || (seconds && ms > INT64_MAX / 1000)) { err_expire_time(c, cmd); return 0; }
    if (seconds) ms *= 1000;
    if (o->flags & (RESP_X_EX | RESP_X_PX)) {
        int64_t now = (int64_t)store_now_ms();
        if (ms > INT64_MAX - now) { err_expire_time(c, cmd); return 0; }   /* Redis's sum turns negative */
        ms += now;
    }
    *when = (uint64_t)ms;
    return 1;
}

uint64_t resp_set_expiry(resp_conn *c, const resp_db *db, const resp_arg *key, const resp_xopts *o, uint64_t when)
{
    if (when) return when;
    uint64_t kept = 0;
    if (o->flags & RESP_X_KEEPTTL) resp_key_expiry(c, db, key, &kept);
    return kept;
}

/* Writes the key's value again with a new expiry (0: none), or deletes it when the
   expiry has passed (Redis deletes at once: expireGenericCommand, getexCommand). */
static int restage(resp_conn *c, const resp_arg *key, const uint8_t *v, size_t n, uint64_t expire, uint8_t type)
{
    if (expire && expire <= store_now_ms()) return resp_stage(c, STORE_DELETE, key, NULL, 0, 0);
    return resp_stage_typed(c, STORE_SET, key, v, n, expire, type);
}

/* getexCommand: the expiry's errors come only for a key that exists. */
void resp_cmd_getex(resp_conn *c, const resp_arg *argv, size_t argc)
{
    resp_xopts o;
    if (!resp_parse_xopts(c, argv, argc, 2, 0, &o)) return;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    uint64_t expire = 0, when = 0;
    int r = resp_read(c, &db, &argv[1], &v, &n, &expire);
    if (r < 0) return;
    if (!r) { resp_w_null(&c->gc.out, c->proto); return; }
    if (!resp_xopts_when(c, &o, "getex", &when)) return;
    /* The value is answered before the write, which may move the bytes v points to. */
    size_t start = c->gc.out.len;
    resp_w_bulk(&c->gc.out, v, n);
    int rc = HANU_OK;
    if (when) rc = restage(c, &argv[1], v, n, when, LOG_TYPE_STRING);
    else if ((o.flags & RESP_X_PERSIST) && expire) rc = restage(c, &argv[1], v, n, 0, LOG_TYPE_STRING);
    if (rc) {
        c->gc.out.len = start;
        resp_err(c, "ERR out of memory");
    }
}

static int parse_expire_flags(resp_conn *c, const resp_arg *argv, size_t argc, int *nx, int *xx, int *gt, int *lt)
{
    *nx = *xx = *gt = *lt = 0;
    for (size_t j = 3; j < argc; j++) {
        const resp_arg *a = &argv[j];
        if (resp_arg_is(a, "nx")) *nx = 1;
        else if (resp_arg_is(a, "xx")) *xx = 1;
        else if (resp_arg_is(a, "gt")) *gt = 1;
        else if (resp_arg_is(a, "lt")) *lt = 1;
        else {
            resp_w_errorf(&c->gc.out, "ERR Unsupported option %.*s", (int)a->len, (const char *)a->p);
            c->rs->errors++;
            return 0;
        }
    }
    if (*nx && (*xx || *gt || *lt)) {
        resp_err(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return 0;
    }
    if (*gt && *lt) {
        resp_err(c, "ERR GT and LT options at the same time are not compatible");
        return 0;
    }
    return 1;
}

/* expireGenericCommand: EXPIRE and PEXPIRE count from now, EXPIREAT and PEXPIREAT
   from the epoch; negative times are allowed (the key is deleted). */
void resp_cmd_expire(resp_conn *c, const resp_arg *argv, size_t argc)
{
    const resp_arg *name = &argv[0];
    int ms_unit = (name->p[0] | 32) == 'p';
    int at = name->len == (size_t)(ms_unit ? 9 : 8);   /* pexpireat / expireat */
    int nx, xx, gt, lt;
    if (!parse_expire_flags(c, argv, argc, &nx, &xx, &gt, &lt)) return;
    int64_t when;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &when)) { resp_err(c, ERR_NOT_INT); return; }
    char cmd[16];
    snprintf(cmd, sizeof cmd, "%s%s%s", ms_unit ? "p" : "", "expire", at ? "at" : "");
    if (!ms_unit) {
        if (when > INT64_MAX / 1000 || when < INT64_MIN / 1000) { err_expire_time(c, cmd); return; }
        when *= 1000;
    }
    int64_t base = at ? 0 : (int64_t)store_now_ms();
    if (when > INT64_MAX - base) { err_expire_time(c, cmd); return; }
    when += base;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    uint64_t current = 0;
    uint8_t type;
    int r = resp_read_typed(c, &db, &argv[1], &v, &n, &current, &type);
    if (r < 0) return;
    if (!r) { resp_w_int(&c->gc.out, 0); return; }
    /* Without an expiry the key counts as expiring never (GT never passes, LT always). */
    int64_t cur = current ? (int64_t)current : -1;
    if ((nx && cur != -1) || (xx && cur == -1) || (gt && (when <= cur || cur == -1)) ||
        (lt && cur != -1 && when >= cur)) {
        resp_w_int(&c->gc.out, 0);
        return;
    }
    /* A time at or before the epoch is already past: the key goes. */
    if (restage(c, &argv[1], v, n, when > 0 ? (uint64_t)when : 1, type) != HANU_OK) resp_err(c, "ERR out of memory");
    else resp_w_int(&c->gc.out, 1);
}

/* ttlGenericCommand and expiretimeGenericCommand: -2 no key, -1 no expiry. */
void resp_cmd_ttl(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    const resp_arg *name = &argv[0];
    int ms = (name->p[0] | 32) == 'p';
    int absolute = name->len > 4;   /* (p)expiretime */
    resp_db db = resp_current_db(c);
    uint64_t expire;
    if (!resp_key_expiry(c, &db, &argv[1], &expire)) { resp_w_int(&c->gc.out, -2); return; }
    if (!expire) { resp_w_int(&c->gc.out, -1); return; }
    if (absolute) { resp_w_int(&c->gc.out, (int64_t)(ms ? expire : expire / 1000)); return; }
    uint64_t now = store_now_ms();
    int64_t left = expire > now ? (int64_t)(expire - now) : 0;
    resp_w_int(&c->gc.out, ms ? left : (left + 500) / 1000);
}

void resp_cmd_persist(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    uint64_t expire = 0;
    uint8_t type;
    int r = resp_read_typed(c, &db, &argv[1], &v, &n, &expire, &type);
    if (r < 0) return;
    if (!r || !expire) { resp_w_int(&c->gc.out, 0); return; }
    if (restage(c, &argv[1], v, n, 0, type) != HANU_OK) resp_err(c, "ERR out of memory");
    else resp_w_int(&c->gc.out, 1);
}
