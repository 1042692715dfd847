/*
 * resp_cmd.c: the key commands of the Redis face (strings: every value is a
 * Redis string), the staging of their writes, and the command table.
 * Answers and errors are redis-server 7.0's, word for word.
 */
#include "resp/resp_internal.h"
#include "docs/docs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define ERR_NOT_INT "ERR value is not an integer or out of range"
#define ERR_SYNTAX "ERR syntax error"
#define ERR_TOO_BIG "ERR string exceeds maximum allowed size (proto-max-bulk-len)"

/* ---- staging ---- */

void resp_stage_reset(resp_server *rs)
{
    rs->nstaged = 0;
    rs->arena.len = 0;
    rs->list_ids = 0;
}

static int same_key(const resp_server *rs, const resp_staged *s, const resp_arg *key)
{
    return s->klen == key->len && memcmp(rs->arena.data + s->koff, key->p, key->len) == 0;
}

static int staged_system(const resp_staged *s) { return s->kind == STORE_SYSTEM_SET || s->kind == STORE_SYSTEM_DELETE; }

/* The newest staged write of key (of the SELECTed database, or of the system
   database when system), or NULL. */
static const resp_staged *staged_find_in(const resp_server *rs, const resp_arg *key, int system)
{
    for (size_t i = rs->nstaged; i-- > 0;)
        if (staged_system(&rs->staged[i]) == system && same_key(rs, &rs->staged[i], key)) return &rs->staged[i];
    return NULL;
}

static const resp_staged *staged_find(const resp_server *rs, const resp_arg *key)
{
    return staged_find_in(rs, key, 0);
}

/* Whether a staged write leaves the key absent (a delete, or a set already expired). */
static int staged_absent(const resp_staged *s)
{
    return s->kind == STORE_DELETE || (s->expire && s->expire <= store_now_ms());
}

int resp_check_key(resp_conn *c, const resp_arg *key)
{
    if (key->len == 0) { resp_err(c, "ERR HanuDB keys are at least one byte long"); return 0; }
    if (key->len > c->gc.srv->limits.max_key) {
        resp_w_errorf(&c->gc.out, "ERR key of %zu bytes exceeds the server's --max-key of %u bytes", key->len,
                      c->gc.srv->limits.max_key);
        c->rs->errors++;
        return 0;
    }
    return 1;
}

int resp_check_value_len(resp_conn *c, size_t len)
{
    if (len <= c->gc.srv->limits.max_value) return 1;
    resp_err(c, ERR_TOO_BIG);
    return 0;
}

static void store_error(resp_conn *c, int rc)
{
    resp_w_errorf(&c->gc.out, "ERR %s", hanu_status_str(rc));
    c->rs->errors++;
}

int resp_read(resp_conn *c, const resp_db *db, const resp_arg *key, const uint8_t **v, size_t *vlen,
              uint64_t *expire)
{
    uint8_t type;
    int r = resp_read_typed(c, db, key, v, vlen, expire, &type);
    if (r > 0 && type != LOG_TYPE_STRING) { resp_err(c, RESP_ERR_WRONGTYPE); return -1; }
    return r;
}

int resp_read_typed(resp_conn *c, const resp_db *db, const resp_arg *key, const uint8_t **v, size_t *vlen,
                    uint64_t *expire, uint8_t *type)
{
    resp_server *rs = c->rs;
    const resp_staged *s = staged_find(rs, key);
    uint64_t ignored;
    if (!expire) expire = &ignored;
    *type = LOG_TYPE_STRING;
    if (s) {
        if (staged_absent(s)) return 0;
        *v = rs->arena.data + s->voff;
        *vlen = s->vlen;
        *expire = s->expire;
        *type = s->type;
        return 1;
    }
    if (!db->exists || key->len == 0 || key->len > c->gc.srv->limits.max_key) return 0;
    rs->val.len = 0;
    uint64_t token;
    int rc = store_get_typed(c->gc.srv->store, db->id, key->p, key->len, &rs->val, &token, expire, type);
    if (rc == HANU_ERR_NOT_FOUND) return 0;
    if (rc) { store_error(c, rc); return -1; }
    *v = rs->val.data;
    *vlen = rs->val.len;
    return 1;
}

int resp_read_system(resp_conn *c, const resp_arg *key, hanu_buf *out)
{
    resp_server *rs = c->rs;
    const resp_staged *s = staged_find_in(rs, key, 1);
    out->len = 0;
    if (s) {
        if (s->kind == STORE_SYSTEM_DELETE) return HANU_ERR_NOT_FOUND;
        return hanu_buf_append(out, rs->arena.data + s->voff, s->vlen);
    }
    uint64_t token;
    return store_get(c->gc.srv->store, STORE_SYSTEM_DB_ID, key->p, key->len, out, &token);
}

int resp_exists(resp_conn *c, const resp_db *db, const resp_arg *key)
{
    const resp_staged *s = staged_find(c->rs, key);
    if (s) return !staged_absent(s);
    uint64_t token;
    if (!db->exists || key->len == 0 || key->len > c->gc.srv->limits.max_key) return 0;
    return store_lookup(c->gc.srv->store, db->id, key->p, key->len, &token) == HANU_OK;
}

int resp_key_expiry(resp_conn *c, const resp_db *db, const resp_arg *key, uint64_t *expire)
{
    uint8_t type;
    return resp_key_meta(c, db, key, expire, &type);
}

int resp_key_meta(resp_conn *c, const resp_db *db, const resp_arg *key, uint64_t *expire, uint8_t *type)
{
    const resp_staged *s = staged_find(c->rs, key);
    *expire = 0;
    *type = LOG_TYPE_STRING;
    if (s) {
        if (staged_absent(s)) return 0;
        *expire = s->expire;
        *type = s->type;
        return 1;
    }
    uint64_t token;
    if (!db->exists || key->len == 0 || key->len > c->gc.srv->limits.max_key) return 0;
    return store_key_meta(c->gc.srv->store, db->id, key->p, key->len, expire, &token, type) == HANU_OK;
}

/* Appends p[0..n) to the arena; p may point into the arena itself. */
static int arena_put(hanu_buf *a, const void *p, size_t n, size_t *off)
{
    const uint8_t *src = p;
    int inside = n && src >= a->data && src < a->data + a->len;
    size_t src_off = inside ? (size_t)(src - a->data) : 0;
    if (hanu_buf_reserve(a, n) != HANU_OK) return HANU_ERR_NOMEM;
    if (inside) src = a->data + src_off;
    *off = a->len;
    if (n) memmove(a->data + a->len, src, n);
    a->len += n;
    return HANU_OK;
}

int resp_stage(resp_conn *c, uint8_t kind, const resp_arg *key, const void *v, size_t vlen, uint64_t expire)
{
    return resp_stage_typed(c, kind, key, v, vlen, expire, LOG_TYPE_STRING);
}

int resp_stage_typed(resp_conn *c, uint8_t kind, const resp_arg *key, const void *v, size_t vlen, uint64_t expire,
                     uint8_t type)
{
    resp_server *rs = c->rs;
    if (rs->nstaged == rs->scap) {
        size_t ncap = rs->scap ? rs->scap * 2 : 64;
        resp_staged *ns = realloc(rs->staged, ncap * sizeof *ns);
        if (!ns) return HANU_ERR_NOMEM;
        rs->staged = ns;
        rs->scap = ncap;
    }
    resp_staged s = { .kind = kind, .klen = key->len, .vlen = kind == STORE_DELETE ? 0 : vlen,
                      .expire = kind == STORE_DELETE ? 0 : expire, .type = kind == STORE_DELETE ? 0 : type };
    if (arena_put(&rs->arena, key->p, key->len, &s.koff) != HANU_OK ||
        arena_put(&rs->arena, v, s.vlen, &s.voff) != HANU_OK)
        return HANU_ERR_NOMEM;
    rs->staged[rs->nstaged++] = s;
    return HANU_OK;
}

int resp_stage_or_answer(resp_conn *c, uint8_t kind, const resp_arg *key, const void *v, size_t vlen,
                         uint64_t expire)
{
    if (resp_stage(c, kind, key, v, vlen, expire) == HANU_OK) return 1;
    resp_err(c, "ERR out of memory");
    return 0;
}

/* Stages a write that leaves the key without an expiry (SET, MSET, GETSET...). */
static int stage(resp_conn *c, uint8_t kind, const resp_arg *key, const void *v, size_t vlen)
{
    return resp_stage_or_answer(c, kind, key, v, vlen, 0);
}

int resp_commit(resp_conn *c, size_t reply_start, uint64_t *txn)
{
    resp_server *rs = c->rs;
    store *st = c->gc.srv->store;
    *txn = 0;
    if (!rs->nstaged) return HANU_OK;
    if (rs->nstaged > rs->ops_cap) {
        store_op *no = realloc(rs->ops, rs->nstaged * sizeof *no);
        if (no) rs->ops = no;
        uint64_t *ne = no ? realloc(rs->expires, rs->nstaged * sizeof *ne) : NULL;
        if (ne) rs->expires = ne;
        uint8_t *nt = ne ? realloc(rs->types, rs->nstaged * sizeof *nt) : NULL;
        if (!nt) { c->gc.out.len = reply_start; resp_err(c, "ERR out of memory"); return HANU_ERR_NOMEM; }
        rs->types = nt;
        rs->ops_cap = rs->nstaged;
    }
    int expiring = 0, typed = 0;
    for (size_t i = 0; i < rs->nstaged; i++) {
        const resp_staged *s = &rs->staged[i];
        rs->ops[i] = (store_op){ .kind = s->kind, .key = rs->arena.data + s->koff, .key_len = s->klen,
                                 .value = rs->arena.data + s->voff, .value_len = s->vlen };
        rs->expires[i] = s->expire;
        rs->types[i] = s->type;
        expiring |= s->expire != 0;
        typed |= s->type != LOG_TYPE_STRING || staged_system(s);   /* a list's chunks: store_write_typed */
    }
    resp_db db = resp_current_db(c);
    int rc = HANU_OK;
    if (!db.exists) {   /* SELECT n's database comes with its first write */
        uint64_t ctxn;
        rc = store_db_create(st, c->db, strlen(c->db), STORE_DB_KV, &ctxn);
        if (rc == HANU_OK || rc == HANU_ERR_EXISTS) {
            db = resp_current_db(c);
            rc = db.exists ? HANU_OK : HANU_ERR_NOT_FOUND;
        }
    }
    uint32_t id = db.id;
    uint8_t kind = c->db_kind;
    docs_error refused = { 0 };
    if (rc == HANU_OK && (expiring || typed) && kind != STORE_DB_KV) {
        /* The documents API's index reads no expiry and no type: collections hold
           JSON documents for good. */
        c->gc.out.len = reply_start;
        resp_w_errorf(&c->gc.out, "ERR %s key-value databases: \"%s\" is a collection",
                      typed ? "lists are for" : "per-key TTL is for", c->db);
        c->rs->errors++;
        return HANU_ERR_INVALID;
    }
    if (rc == HANU_OK && (expiring || typed))
        rc = store_write_typed(st, id, rs->ops, rs->expires, typed ? rs->types : NULL, rs->nstaged, STORE_COND_NONE,
                               0, txn, NULL);
    else if (rc == HANU_OK && kind == STORE_DB_KV)
        rc = store_write(st, id, rs->ops, rs->nstaged, STORE_COND_NONE, 0, txn, NULL);
    else if (rc == HANU_OK)   /* an untyped database or a collection: documents' rules */
        rc = docs_kv_write(st, id, rs->ops, rs->nstaged, STORE_COND_NONE, 0, c->gc.srv->limits.max_value, txn, NULL,
                           &refused);
    if (rc == HANU_OK) {
        c->last_write_txn = *txn;
        return HANU_OK;
    }
    c->gc.out.len = reply_start;
    if (refused.code) resp_w_errorf(&c->gc.out, "ERR %s", refused.message);
    else if (rc == HANU_ERR_TOO_LARGE)
        resp_w_errorf(&c->gc.out, "ERR one write holds at most %u keys and values within the server's limits",
                      LOG_MAX_ENTRIES_PER_FRAME);
    else {
        resp_w_errorf(&c->gc.out, "ERR write failed: %s", hanu_status_str(rc));
        char what[100];
        snprintf(what, sizeof what, "database \"%s\"", c->db);
        if (rc != HANU_ERR_NOMEM) server_log_write_failure("resp", what, rc);
    }
    c->rs->errors++;
    *txn = 0;
    return rc;
}

/* ---- strings ---- */

/* Appends key's value as a bulk (or the null), straight from the store when
   nothing is staged. */
static void reply_value(resp_conn *c, const resp_db *db, const resp_arg *key, int nil_if_not_string)
{
    if (c->rs->nstaged || !db->exists || key->len == 0 || key->len > c->gc.srv->limits.max_key) {
        const uint8_t *v;
        size_t n;
        uint8_t type;
        int r = resp_read_typed(c, db, key, &v, &n, NULL, &type);
        if (r > 0 && type != LOG_TYPE_STRING) {
            if (nil_if_not_string) resp_w_null(&c->gc.out, c->proto);
            else resp_err(c, RESP_ERR_WRONGTYPE);
        } else if (r > 0) resp_w_bulk(&c->gc.out, v, n);
        else if (r == 0) resp_w_null(&c->gc.out, c->proto);
        return;
    }
    /* the value lands after room for the longest header, which then moves next to it */
    hanu_buf *o = &c->gc.out;
    size_t start = o->len;
    const size_t room = 16;
    if (hanu_buf_reserve(o, room) != HANU_OK) { resp_err(c, "ERR out of memory"); return; }
    o->len += room;
    uint64_t token, expire;
    uint8_t type;
    int rc = store_get_typed(c->gc.srv->store, db->id, key->p, key->len, o, &token, &expire, &type);
    if (rc == HANU_OK && type != LOG_TYPE_STRING) {   /* MGET answers nil for it, GET the error */
        o->len = start;
        if (nil_if_not_string) resp_w_null(o, c->proto);
        else resp_err(c, RESP_ERR_WRONGTYPE);
        return;
    }
    if (rc) {
        o->len = start;
        if (rc == HANU_ERR_NOT_FOUND) resp_w_null(o, c->proto);
        else store_error(c, rc);
        return;
    }
    size_t vlen = o->len - start - room;
    char h[24];
    size_t hl = resp_bulk_header(h, vlen);
    memmove(o->data + start + hl, o->data + start + room, vlen);
    memcpy(o->data + start, h, hl);
    o->len = start + hl + vlen;
    hanu_buf_append(o, "\r\n", 2);
}

static void cmd_get(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    reply_value(c, &db, &argv[1], 0);
}

static void cmd_mget(resp_conn *c, const resp_arg *argv, size_t argc)
{
    resp_db db = resp_current_db(c);
    resp_w_array(&c->gc.out, argc - 1);
    for (size_t i = 1; i < argc; i++) reply_value(c, &db, &argv[i], 1);
}

static void cmd_set(resp_conn *c, const resp_arg *argv, size_t argc)
{
    resp_xopts o;
    uint64_t when;
    if (!resp_parse_xopts(c, argv, argc, 3, 1, &o)) return;
    /* redis-server checks the expiry before the key and value (setGenericCommand) */
    if (!resp_xopts_when(c, &o, "set", &when)) return;
    if (!resp_check_key(c, &argv[1]) || !resp_check_value_len(c, argv[2].len)) return;
    resp_db db = resp_current_db(c);
    int exists;
    if (o.flags & RESP_X_GET) {
        const uint8_t *v;
        size_t n;
        exists = resp_read(c, &db, &argv[1], &v, &n, NULL);
        if (exists < 0) return;
        if (exists) resp_w_bulk(&c->gc.out, v, n);
        else resp_w_null(&c->gc.out, c->proto);
    } else {
        exists = (o.flags & (RESP_X_NX | RESP_X_XX)) ? resp_exists(c, &db, &argv[1]) : 0;
    }
    if (((o.flags & RESP_X_NX) && exists) || ((o.flags & RESP_X_XX) && !exists)) {
        if (!(o.flags & RESP_X_GET)) resp_w_null(&c->gc.out, c->proto);
        return;
    }
    uint64_t expire = resp_set_expiry(c, &db, &argv[1], &o, when);
    if (!resp_stage_or_answer(c, STORE_SET, &argv[1], argv[2].p, argv[2].len, expire)) return;
    if (!(o.flags & RESP_X_GET)) resp_w_simple(&c->gc.out, "OK");
}

static void cmd_setnx(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    if (!resp_check_key(c, &argv[1]) || !resp_check_value_len(c, argv[2].len)) return;
    resp_db db = resp_current_db(c);
    if (resp_exists(c, &db, &argv[1])) { resp_w_int(&c->gc.out, 0); return; }
    if (stage(c, STORE_SET, &argv[1], argv[2].p, argv[2].len)) resp_w_int(&c->gc.out, 1);
}

static void cmd_getset(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    if (!resp_check_key(c, &argv[1]) || !resp_check_value_len(c, argv[2].len)) return;
    resp_db db = resp_current_db(c);
    size_t start = c->gc.out.len;
    reply_value(c, &db, &argv[1], 0);
    if (c->gc.out.len > start && c->gc.out.data[start] == '-') return;
    if (resp_stage(c, STORE_SET, &argv[1], argv[2].p, argv[2].len, 0) != HANU_OK) {
        c->gc.out.len = start;
        resp_err(c, "ERR out of memory");
    }
}

static void cmd_getdel(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    int r = resp_read(c, &db, &argv[1], &v, &n, NULL);
    if (r < 0) return;
    if (!r) { resp_w_null(&c->gc.out, c->proto); return; }
    resp_w_bulk(&c->gc.out, v, n);
    stage(c, STORE_DELETE, &argv[1], NULL, 0);
}

static void cmd_mset(resp_conn *c, const resp_arg *argv, size_t argc)
{
    if (argc % 2 == 0) { resp_err_arity(c, argv[0].len == 4 ? "mset" : "msetnx"); return; }
    int nx = argv[0].len == 6;
    resp_db db = resp_current_db(c);
    for (size_t i = 1; i < argc; i += 2) {
        if (!resp_check_key(c, &argv[i]) || !resp_check_value_len(c, argv[i + 1].len)) return;
        if (nx && resp_exists(c, &db, &argv[i])) { resp_w_int(&c->gc.out, 0); return; }
    }
    for (size_t i = 1; i < argc; i += 2)
        if (!stage(c, STORE_SET, &argv[i], argv[i + 1].p, argv[i + 1].len)) return;
    if (nx) resp_w_int(&c->gc.out, 1);
    else resp_w_simple(&c->gc.out, "OK");
}

static void cmd_del(resp_conn *c, const resp_arg *argv, size_t argc)
{
    resp_db db = resp_current_db(c);
    int64_t n = 0;
    for (size_t i = 1; i < argc; i++) {
        if (resp_exists(c, &db, &argv[i]) != 1) continue;
        if (!stage(c, STORE_DELETE, &argv[i], NULL, 0)) return;
        n++;
    }
    resp_w_int(&c->gc.out, n);
}

static void cmd_exists(resp_conn *c, const resp_arg *argv, size_t argc)
{
    resp_db db = resp_current_db(c);
    int64_t n = 0;
    for (size_t i = 1; i < argc; i++) n += resp_exists(c, &db, &argv[i]) == 1;
    resp_w_int(&c->gc.out, n);
}

static void cmd_type(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    uint64_t expire;
    uint8_t type;
    if (!resp_key_meta(c, &db, &argv[1], &expire, &type)) resp_w_simple(&c->gc.out, "none");
    else resp_w_simple(&c->gc.out, type == LOG_TYPE_LIST ? "list" : "string");
}

static void incr_by(resp_conn *c, const resp_arg *key, int64_t by)
{
    if (!resp_check_key(c, key)) return;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    uint64_t expire = 0;   /* INCR and its kin keep the key's expiry, as Redis does */
    int r = resp_read(c, &db, key, &v, &n, &expire);
    if (r < 0) return;
    int64_t cur = 0;
    if (r && !resp_parse_i64(v, n, &cur)) { resp_err(c, ERR_NOT_INT); return; }
    if ((by < 0 && cur < 0 && by < INT64_MIN - cur) || (by > 0 && cur > 0 && by > INT64_MAX - cur)) {
        resp_err(c, "ERR increment or decrement would overflow");
        return;
    }
    cur += by;
    char s[24];
    int sl = snprintf(s, sizeof s, "%lld", (long long)cur);
    if (resp_stage_or_answer(c, STORE_SET, key, s, (size_t)sl, expire)) resp_w_int(&c->gc.out, cur);
}

static void cmd_incr(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    incr_by(c, &argv[1], argv[0].p[0] == 'd' || argv[0].p[0] == 'D' ? -1 : 1);
}

static void cmd_incrby(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    int64_t by;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &by)) { resp_err(c, ERR_NOT_INT); return; }
    if (argv[0].p[0] == 'd' || argv[0].p[0] == 'D') {
        if (by == INT64_MIN) { resp_err(c, "ERR decrement would overflow"); return; }
        by = -by;
    }
    incr_by(c, &argv[1], by);
}

static void cmd_incrbyfloat(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    if (!resp_check_key(c, &argv[1])) return;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    long double cur = 0, by;
    uint64_t expire = 0;
    int r = resp_read(c, &db, &argv[1], &v, &n, &expire);
    if (r < 0) return;
    if ((r && !resp_parse_ld(v, n, &cur)) || !resp_parse_ld(argv[2].p, argv[2].len, &by)) {
        resp_err(c, "ERR value is not a valid float");
        return;
    }
    cur += by;
    if (isnan(cur) || isinf(cur)) { resp_err(c, "ERR increment would produce NaN or Infinity"); return; }
    char s[5200];
    size_t sl = resp_format_ld(cur, s, sizeof s);
    if (!sl) { resp_err(c, "ERR value is not a valid float"); return; }
    if (resp_stage_or_answer(c, STORE_SET, &argv[1], s, sl, expire)) resp_w_bulk(&c->gc.out, s, sl);
}

static void cmd_append(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    if (!resp_check_key(c, &argv[1])) return;
    resp_db db = resp_current_db(c);
    const uint8_t *v = NULL;
    size_t n = 0;
    uint64_t expire = 0;
    int r = resp_read(c, &db, &argv[1], &v, &n, &expire);
    if (r < 0 || !resp_check_value_len(c, n + argv[2].len)) return;
    /* old and new joined in the read buffer, which a store read may have filled */
    hanu_buf *t = &c->rs->val;
    if (r && v != t->data) { t->len = 0; if (hanu_buf_append(t, v, n) != HANU_OK) { resp_err(c, "ERR out of memory"); return; } }
    if (!r) t->len = 0;
    if (hanu_buf_append(t, argv[2].p, argv[2].len) != HANU_OK) { resp_err(c, "ERR out of memory"); return; }
    if (resp_stage_or_answer(c, STORE_SET, &argv[1], t->data, t->len, expire)) resp_w_int(&c->gc.out, (int64_t)t->len);
}

static void cmd_strlen(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n = 0;
    int r = resp_read(c, &db, &argv[1], &v, &n, NULL);
    if (r >= 0) resp_w_int(&c->gc.out, r ? (int64_t)n : 0);
}

static void cmd_getrange(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    int64_t start, end;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &start) || !resp_parse_i64(argv[3].p, argv[3].len, &end)) {
        resp_err(c, ERR_NOT_INT);
        return;
    }
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n = 0;
    int r = resp_read(c, &db, &argv[1], &v, &n, NULL);
    if (r < 0) return;
    /* redis-server's getrangeCommand */
    if (start < 0 && end < 0 && start > end) { resp_w_bulk(&c->gc.out, "", 0); return; }
    int64_t len = (int64_t)n;
    if (start < 0) start = len + start;
    if (end < 0) end = len + end;
    if (start < 0) start = 0;
    if (end < 0) end = 0;
    if (end >= len) end = len - 1;
    if (!r || start > end || len == 0) { resp_w_bulk(&c->gc.out, "", 0); return; }
    resp_w_bulk(&c->gc.out, v + start, (size_t)(end - start + 1));
}

static void cmd_setrange(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    int64_t off;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &off)) { resp_err(c, ERR_NOT_INT); return; }
    if (off < 0) { resp_err(c, "ERR offset is out of range"); return; }
    if (!resp_check_key(c, &argv[1])) return;
    resp_db db = resp_current_db(c);
    const uint8_t *v = NULL;
    size_t n = 0;
    uint64_t expire = 0;
    int r = resp_read(c, &db, &argv[1], &v, &n, &expire);
    if (r < 0) return;
    if (argv[3].len == 0) { resp_w_int(&c->gc.out, r ? (int64_t)n : 0); return; }
    if ((uint64_t)off + argv[3].len > 512u * 1024 * 1024) { resp_err(c, ERR_TOO_BIG); return; }
    size_t total = HANU_MAX(n, (size_t)off + argv[3].len);
    if (!resp_check_value_len(c, total)) return;
    hanu_buf *t = &c->rs->val;
    if (r && v != t->data) { t->len = 0; if (hanu_buf_append(t, v, n) != HANU_OK) { resp_err(c, "ERR out of memory"); return; } }
    if (!r) t->len = 0;
    if (hanu_buf_reserve(t, total - t->len) != HANU_OK) { resp_err(c, "ERR out of memory"); return; }
    if (total > t->len) memset(t->data + t->len, 0, total - t->len);
    memcpy(t->data + off, argv[3].p, argv[3].len);
    t->len = total;
    if (resp_stage_or_answer(c, STORE_SET, &argv[1], t->data, t->len, expire)) resp_w_int(&c->gc.out, (int64_t)total);
}

static void rename_key(resp_conn *c, const resp_arg *argv, int nx)
{
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    uint64_t expire = 0;   /* the expiry and the type move with the key */
    uint8_t type;
    int r = resp_read_typed(c, &db, &argv[1], &v, &n, &expire, &type);
    if (r < 0) return;
    if (!r) { resp_err(c, "ERR no such key"); return; }
    if (!resp_check_key(c, &argv[2])) return;
    int same = argv[1].len == argv[2].len && !memcmp(argv[1].p, argv[2].p, argv[1].len);
    if (nx && (same || resp_exists(c, &db, &argv[2]) == 1)) { resp_w_int(&c->gc.out, 0); return; }
    /* a list's chunks stay where they are: its owner record names the new key */
    if (!same && type == LOG_TYPE_LIST && !resp_list_renamed(c, v, n, &argv[2])) return;
    if (!same && resp_stage_typed(c, STORE_SET, &argv[2], v, n, expire, type) != HANU_OK) {
        resp_err(c, "ERR out of memory");
        return;
    }
    if (!same && !stage(c, STORE_DELETE, &argv[1], NULL, 0)) return;
    if (nx) resp_w_int(&c->gc.out, 1);
    else resp_w_simple(&c->gc.out, "OK");
}

static void cmd_rename(resp_conn *c, const resp_arg *argv, size_t argc) { (void)argc; rename_key(c, argv, 0); }
static void cmd_renamenx(resp_conn *c, const resp_arg *argv, size_t argc) { (void)argc; rename_key(c, argv, 1); }

/* ---- keys of the whole database ---- */

/* '[...]' at p[*i] (the '['): whether ch is in the class; *i moves past it. */
static int glob_class(const uint8_t *p, size_t n, size_t *i, uint8_t ch)
{
    size_t k = *i + 1;
    int neg = k < n && p[k] == '^', hit = 0;
    if (neg) k++;
    while (k < n && p[k] != ']') {
        if (p[k] == '\\' && k + 1 < n) {
            k++;
            hit |= p[k] == ch;
        } else if (k + 2 < n && p[k + 1] == '-' && p[k + 2] != ']') {
            uint8_t lo = p[k], hi = p[k + 2];
            if (lo > hi) { uint8_t t = lo; lo = hi; hi = t; }
            hit |= ch >= lo && ch <= hi;
            k += 2;
        } else {
            hit |= p[k] == ch;
        }
        k++;
    }
    *i = k < n ? k + 1 : k;
    return neg ? !hit : hit;
}

/* Redis's glob-style MATCH: * ? [abc] [^a] [a-z] and \x; linear backtracking on '*'. */
int resp_glob(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
    while (si < sn) {
        if (pi < pn) {
            uint8_t ch = p[pi];
            if (ch == '*') { star_p = ++pi; star_s = si; continue; }
            if (ch == '?') { pi++; si++; continue; }
            if (ch == '[') {
                size_t np = pi;
                if (glob_class(p, pn, &np, s[si])) { pi = np; si++; continue; }
            } else {
                size_t np = pi;
                if (ch == '\\' && np + 1 < pn) ch = p[++np];
                if (ch == s[si]) { pi = np + 1; si++; continue; }
            }
        }
        if (star_p == SIZE_MAX) return 0;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < pn && p[pi] == '*') pi++;
    return pi == pn;
}

typedef struct key_walk {
    hanu_buf *out;
    const resp_arg *pattern;       /* NULL: every key */
    int want_type;                 /* SCAN TYPE: 1 + the LOG_TYPE_* asked, -1 an unknown one (nothing), 0 any */
    int target;                    /* RANDOMKEY: the first key only */
    const resp_server *staged;     /* KEYS: a key deleted earlier in the transaction is gone */
    size_t found;
    int rc;
} key_walk;

static int walk_key(void *ctx, const uint8_t *key, size_t klen, const uint8_t *v, size_t vlen, uint8_t type)
{
    key_walk *w = ctx;
    (void)v; (void)vlen;
    if (w->target && w->found) return 1;
    if (w->want_type < 0 || (w->want_type > 0 && w->want_type != 1 + type)) return 0;
    if (w->pattern && !resp_glob(w->pattern->p, w->pattern->len, key, klen)) return 0;
    if (w->staged && w->staged->nstaged) {
        const resp_arg k = { key, klen };
        const resp_staged *s = staged_find(w->staged, &k);
        if (s && staged_absent(s)) return 0;
    }
    if (resp_w_bulk(w->out, key, klen) != HANU_OK) { w->rc = HANU_ERR_NOMEM; return 1; }
    w->found++;
    return w->target && w->found == 1;
}

/* The staged keys whose newest write is of kind and that the store holds (present)
   or not; those matching pattern (NULL: all) go to out as bulks when out. */
static int64_t staged_keys(resp_conn *c, const resp_db *db, uint8_t kind, int present, const resp_arg *pattern,
                           hanu_buf *out)
{
    const resp_server *rs = c->rs;
    int64_t n = 0;
    for (size_t i = 0; i < rs->nstaged; i++) {
        const resp_staged *s = &rs->staged[i];
        const resp_arg k = { rs->arena.data + s->koff, s->klen };
        uint64_t token;
        if (staged_find(rs, &k) != s || s->kind != kind) continue;   /* its newest write only */
        int held = db->exists && store_lookup(c->gc.srv->store, db->id, k.p, k.len, &token) == HANU_OK;
        if (held != present || (pattern && !resp_glob(pattern->p, pattern->len, k.p, k.len))) continue;
        if (out && resp_w_bulk(out, k.p, k.len) != HANU_OK) return -1;
        n++;
    }
    return n;
}

int64_t resp_staged_new_keys(resp_conn *c, const resp_db *db, const resp_arg *pattern, hanu_buf *out)
{
    return staged_keys(c, db, STORE_SET, 0, pattern, out);
}

int64_t resp_staged_key_delta(resp_conn *c, const resp_db *db)
{
    return staged_keys(c, db, STORE_SET, 0, NULL, NULL) - staged_keys(c, db, STORE_DELETE, 1, NULL, NULL);
}

static int is_all(const resp_arg *p) { return p->len == 1 && p->p[0] == '*'; }

static void cmd_keys(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    hanu_buf keys = { 0 };
    key_walk w = { .out = &keys, .pattern = is_all(&argv[1]) ? NULL : &argv[1], .staged = c->rs };
    int rc = db.exists ? store_scan_typed(c->gc.srv->store, db.id, walk_key, &w) : HANU_OK;
    if (rc == HANU_OK) rc = w.rc;
    /* keys the transaction created before this KEYS */
    int64_t created = resp_staged_new_keys(c, &db, w.pattern, &keys);
    if (created < 0) rc = HANU_ERR_NOMEM;
    else w.found += (size_t)created;
    if (rc) store_error(c, rc);
    else if (resp_w_array(&c->gc.out, w.found) == HANU_OK) hanu_buf_append(&c->gc.out, keys.data, keys.len);
    hanu_buf_free(&keys);
}

/* SCAN's cursor is a position in the database's table in reverse-binary order, as
   Redis's: a key present for the whole scan is returned at least once, also when the
   table grows meanwhile, and each call costs about COUNT keys (docs/RESP.md). */
static void cmd_scan(resp_conn *c, const resp_arg *argv, size_t argc)
{
    int64_t count = 10;
    uint64_t cursor;
    if (!resp_parse_u64(argv[1].p, argv[1].len, &cursor)) { resp_err(c, "ERR invalid cursor"); return; }
    key_walk w = { 0 };
    for (size_t i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) { resp_err(c, ERR_SYNTAX); return; }
        if (resp_arg_is(&argv[i], "count")) {
            if (!resp_parse_i64(argv[i + 1].p, argv[i + 1].len, &count)) { resp_err(c, ERR_NOT_INT); return; }
            if (count < 1) { resp_err(c, ERR_SYNTAX); return; }
        } else if (resp_arg_is(&argv[i], "match")) {
            w.pattern = is_all(&argv[i + 1]) ? NULL : &argv[i + 1];
        } else if (resp_arg_is(&argv[i], "type")) {
            w.want_type = resp_arg_is(&argv[i + 1], "string") ? 1 + LOG_TYPE_STRING
                        : resp_arg_is(&argv[i + 1], "list")   ? 1 + LOG_TYPE_LIST : -1;
        } else {
            resp_err(c, ERR_SYNTAX);
            return;
        }
    }
    resp_db db = resp_current_db(c);
    hanu_buf keys = { 0 };
    w.out = &keys;
    uint64_t next = cursor;
    int rc = db.exists ? store_scan_step(c->gc.srv->store, db.id, &next, (size_t)HANU_MIN(count, 1 << 20), walk_key, &w)
                       : HANU_OK;
    if (!db.exists) next = 0;
    if (rc == HANU_OK) rc = w.rc;
    if (rc) { store_error(c, rc); hanu_buf_free(&keys); return; }
    char cur[24];
    int cl = snprintf(cur, sizeof cur, "%llu", (unsigned long long)next);
    resp_w_array(&c->gc.out, 2);
    resp_w_bulk(&c->gc.out, cur, (size_t)cl);
    resp_w_array(&c->gc.out, w.found);
    hanu_buf_append(&c->gc.out, keys.data, keys.len);
    hanu_buf_free(&keys);
}

static void cmd_randomkey(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argv; (void)argc;
    resp_db db = resp_current_db(c);
    store_db_info info;
    if (!db.exists || store_db_info_get(c->gc.srv->store, db.id, &info) != HANU_OK || info.keys == 0) {
        resp_w_null(&c->gc.out, c->proto);
        return;
    }
    /* A scan step from a random cursor: the keys of the next non-empty home slot (at
       most 10 empty ones looked at per step), the first of them. A few steps, then
       every key from the start: the table may hold only expired keys. */
    key_walk w = { .out = &c->gc.out, .target = 1 };
    size_t start = c->gc.out.len;
    int rc = HANU_OK;
    for (int step = 0; rc == HANU_OK && !w.rc && !w.found && step < 8; step++) {
        uint64_t cursor = ((uint64_t)random() << 31) ^ (uint64_t)random();
        rc = store_scan_step(c->gc.srv->store, db.id, &cursor, 1, walk_key, &w);
    }
    if (rc == HANU_OK && !w.rc && !w.found) rc = store_scan_typed(c->gc.srv->store, db.id, walk_key, &w);
    if (rc == HANU_OK) rc = w.rc;
    if (rc) { c->gc.out.len = start; store_error(c, rc); }
    else if (!w.found) resp_w_null(&c->gc.out, c->proto);
}

/* ---- compare-and-set with the binary protocol's tokens (HANU.*) ---- */

/* HANU.GET key: [value, token] or the null. */
static void cmd_hanu_get(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    const resp_staged *s = staged_find(c->rs, &argv[1]);
    if (s) { resp_err(c, "ERR HANU.GET of a key written earlier in this transaction has no token yet"); return; }
    c->rs->val.len = 0;
    uint64_t token;
    int rc = db.exists && argv[1].len && argv[1].len <= c->gc.srv->limits.max_key
           ? store_get(c->gc.srv->store, db.id, argv[1].p, argv[1].len, &c->rs->val, &token) : HANU_ERR_NOT_FOUND;
    if (rc == HANU_ERR_NOT_FOUND) { resp_w_null_array(&c->gc.out, c->proto); return; }
    if (rc) { store_error(c, rc); return; }
    resp_w_array(&c->gc.out, 2);
    resp_w_bulk(&c->gc.out, c->rs->val.data, c->rs->val.len);
    resp_w_int(&c->gc.out, (int64_t)token);
}

/* HANU.CAS key token value / HANU.CAD key token: the write happens only while the
   key's token is still token; else -MISMATCH with the current one, or -NOTFOUND. */
static void cmd_hanu_cas(resp_conn *c, const resp_arg *argv, size_t argc)
{
    int del = argc == 3;   /* HANU.CAD; the table holds each to its arity */
    int64_t want;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &want)) { resp_err(c, ERR_NOT_INT); return; }
    if (!resp_check_key(c, &argv[1]) || (!del && !resp_check_value_len(c, argv[3].len))) return;
    if (staged_find(c->rs, &argv[1])) { resp_err(c, "MISMATCH the key was written earlier in this transaction"); return; }
    resp_db db = resp_current_db(c);
    uint64_t token;
    if (!db.exists || store_lookup(c->gc.srv->store, db.id, argv[1].p, argv[1].len, &token) != HANU_OK) {
        resp_err(c, "NOTFOUND no such key");
        return;
    }
    if (token != (uint64_t)want) {
        resp_w_errorf(&c->gc.out, "MISMATCH the key's token is %llu", (unsigned long long)token);
        c->rs->errors++;
        return;
    }
    if (stage(c, del ? STORE_DELETE : STORE_SET, &argv[1], del ? NULL : argv[3].p, del ? 0 : argv[3].len))
        resp_w_simple(&c->gc.out, "OK");
}

/* ---- the table ---- */

enum { W = RESP_CMD_WRITE, N = RESP_CMD_NOAUTH, M = RESP_CMD_NOMULTI, K = RESP_CMD_KEYS };

const resp_command resp_commands[] = {
    { "append", 3, W | K, cmd_append, 1, 1, 1, "string", "Appends a string to the value of a key." },
    { "auth", -2, N | M, resp_cmd_auth, 0, 0, 0, "connection", "Authenticates the connection (a --tokens token)." },
    { "client", -2, M, resp_cmd_client, 0, 0, 0, "connection", "Connection commands, and DURABILITY none|local|bucket." },
    { "command", -1, M, resp_cmd_command, 0, 0, 0, "server", "Returns detailed information about all commands." },
    { "config", -2, 0, resp_cmd_config, 0, 0, 0, "server", "CONFIG GET of a few read-only items." },
    { "dbsize", 1, K, resp_cmd_dbsize, 0, 0, 0, "server", "Returns the number of keys in the database." },
    { "decr", 2, W | K, cmd_incr, 1, 1, 1, "string", "Decrements the integer value of a key by one." },
    { "decrby", 3, W | K, cmd_incrby, 1, 1, 1, "string", "Decrements a number from the integer value of a key." },
    { "del", -2, W | K, cmd_del, 1, -1, 1, "generic", "Deletes one or more keys." },
    { "discard", 1, M, resp_cmd_discard, 0, 0, 0, "transactions", "Discards a transaction." },
    { "echo", 2, 0, resp_cmd_echo, 0, 0, 0, "connection", "Returns the given string." },
    { "exec", 1, M, resp_cmd_exec, 0, 0, 0, "transactions", "Executes all commands in a transaction: one log record." },
    { "exists", -2, K, cmd_exists, 1, -1, 1, "generic", "Determines whether one or more keys exist." },
    { "expire", -3, W | K, resp_cmd_expire, 1, 1, 1, "generic", "Sets the expiration time of a key in seconds." },
    { "expireat", -3, W | K, resp_cmd_expire, 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix timestamp." },
    { "expiretime", 2, K, resp_cmd_ttl, 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix timestamp." },
    { "flushdb", -1, W | K, resp_cmd_flushdb, 0, 0, 0, "server", "Deletes every key of the database (--resp-allow-flushdb)." },
    { "get", 2, K, cmd_get, 1, 1, 1, "string", "Returns the string value of a key." },
    { "getdel", 2, W | K, cmd_getdel, 1, 1, 1, "string", "Returns the string value of a key after deleting the key." },
    { "getex", -2, W | K, resp_cmd_getex, 1, 1, 1, "string", "Returns the string value of a key after setting its expiration time." },
    { "getrange", 4, K, cmd_getrange, 1, 1, 1, "string", "Returns a substring of the string stored at a key." },
    { "getset", 3, W | K, cmd_getset, 1, 1, 1, "string", "Returns the previous string value of a key after setting it to a new value." },
    { "hanu.cad", 3, W | K, cmd_hanu_cas, 1, 1, 1, "hanudb", "Deletes a key only while its token is the given one." },
    { "hanu.cas", 4, W | K, cmd_hanu_cas, 1, 1, 1, "hanudb", "Sets a key only while its token is the given one." },
    { "hanu.get", 2, K, cmd_hanu_get, 1, 1, 1, "hanudb", "Returns a key's value and its token." },
    { "hello", -1, N | M, resp_cmd_hello, 0, 0, 0, "connection", "Handshakes with the server (HELLO 3: RESP3)." },
    { "incr", 2, W | K, cmd_incr, 1, 1, 1, "string", "Increments the integer value of a key by one." },
    { "incrby", 3, W | K, cmd_incrby, 1, 1, 1, "string", "Increments the integer value of a key by a number." },
    { "incrbyfloat", 3, W | K, cmd_incrbyfloat, 1, 1, 1, "string", "Increments the floating point value of a key by a number." },
    { "info", -1, 0, resp_cmd_info, 0, 0, 0, "server", "Returns information and statistics about the server." },
    { "keys", 2, K, cmd_keys, 0, 0, 0, "generic", "Returns all key names that match a pattern." },
    { "lindex", 3, K, resp_cmd_lindex, 1, 1, 1, "list", "Returns an element from a list by its index." },
    { "llen", 2, K, resp_cmd_llen, 1, 1, 1, "list", "Returns the length of a list." },
    { "lpop", -2, W | K, resp_cmd_pop, 1, 1, 1, "list", "Returns the first elements in a list after removing it." },
    { "lpush", -3, W | K, resp_cmd_push, 1, 1, 1, "list", "Prepends one or more elements to a list." },
    { "lpushx", -3, W | K, resp_cmd_push, 1, 1, 1, "list", "Prepends one or more elements to a list only when the list exists." },
    { "lrange", 4, K, resp_cmd_lrange, 1, 1, 1, "list", "Returns a range of elements from a list." },
    { "lrem", 4, W | K, resp_cmd_lrem, 1, 1, 1, "list", "Removes elements from a list." },
    { "lset", 4, W | K, resp_cmd_lset, 1, 1, 1, "list", "Sets the value of an element in a list by its index." },
    { "ltrim", 4, W | K, resp_cmd_ltrim, 1, 1, 1, "list", "Removes elements from both ends a list." },
    { "mget", -2, K, cmd_mget, 1, -1, 1, "string", "Atomically returns the string values of one or more keys." },
    { "mset", -3, W | K, cmd_mset, 1, -1, 2, "string", "Atomically creates or modifies the string values of one or more keys." },
    { "msetnx", -3, W | K, cmd_mset, 1, -1, 2, "string", "Atomically sets keys only when none of them exist." },
    { "multi", 1, M, resp_cmd_multi, 0, 0, 0, "transactions", "Starts a transaction." },
    { "persist", 2, W | K, resp_cmd_persist, 1, 1, 1, "generic", "Removes the expiration time of a key." },
    { "pexpire", -3, W | K, resp_cmd_expire, 1, 1, 1, "generic", "Sets the expiration time of a key in milliseconds." },
    { "pexpireat", -3, W | K, resp_cmd_expire, 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp." },
    { "pexpiretime", 2, K, resp_cmd_ttl, 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix milliseconds timestamp." },
    { "ping", -1, 0, resp_cmd_ping, 0, 0, 0, "connection", "Returns the server's liveliness response." },
    { "pttl", 2, K, resp_cmd_ttl, 1, 1, 1, "generic", "Returns the expiration time in milliseconds of a key." },
    { "quit", -1, N | M, resp_cmd_quit, 0, 0, 0, "connection", "Closes the connection." },
    { "randomkey", 1, K, cmd_randomkey, 0, 0, 0, "generic", "Returns a random key name from the database." },
    { "rename", 3, W | K, cmd_rename, 1, 2, 1, "generic", "Renames a key and overwrites the destination." },
    { "renamenx", 3, W | K, cmd_renamenx, 1, 2, 1, "generic", "Renames a key only when the target key name doesn't exist." },
    { "reset", 1, N | M, resp_cmd_reset, 0, 0, 0, "connection", "Resets the connection." },
    { "rpop", -2, W | K, resp_cmd_pop, 1, 1, 1, "list", "Returns and removes the last elements of a list." },
    { "rpush", -3, W | K, resp_cmd_push, 1, 1, 1, "list", "Appends one or more elements to a list." },
    { "rpushx", -3, W | K, resp_cmd_push, 1, 1, 1, "list", "Appends an element to a list only when the list exists." },
    { "scan", -2, K, cmd_scan, 0, 0, 0, "generic", "Iterates over the key names in the database." },
    { "select", 2, 0, resp_cmd_select, 0, 0, 0, "connection", "Changes the selected database (docs/RESP.md: 0 is default)." },
    { "set", -3, W | K, cmd_set, 1, 1, 1, "string", "Sets the string value of a key." },
    { "setnx", 3, W | K, cmd_setnx, 1, 1, 1, "string", "Set the string value of a key only when the key doesn't exist." },
    { "setrange", 4, W | K, cmd_setrange, 1, 1, 1, "string", "Overwrites a part of a string value with another by an offset." },
    { "strlen", 2, K, cmd_strlen, 1, 1, 1, "string", "Returns the length of a string value." },
    { "ttl", 2, K, resp_cmd_ttl, 1, 1, 1, "generic", "Returns the expiration time in seconds of a key." },
    { "type", 2, K, cmd_type, 1, 1, 1, "generic", "Determines the type of value stored at a key." },
    { "unlink", -2, W | K, cmd_del, 1, -1, 1, "generic", "Deletes one or more keys." },
    { "unwatch", 1, M, resp_cmd_unwatch, 0, 0, 0, "transactions", "Forgets about watched keys of a transaction." },
    { "wait", 3, 0, resp_cmd_wait, 0, 0, 0, "generic", "Waits until the connection's writes are in the bucket." },
    { "watch", -2, M | K, resp_cmd_watch, 1, -1, 1, "transactions", "Monitors changes to keys to abort a transaction." },
};
const size_t resp_ncommands = sizeof resp_commands / sizeof *resp_commands;

const resp_command *resp_command_find(const uint8_t *name, size_t len)
{
    char low[16];
    if (len == 0 || len >= sizeof low) return NULL;
    for (size_t i = 0; i < len; i++) low[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
    low[len] = '\0';
    size_t lo = 0, hi = resp_ncommands;   /* the table is sorted by name */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int d = strcmp(low, resp_commands[mid].name);
        if (d == 0) return &resp_commands[mid];
        if (d < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}
