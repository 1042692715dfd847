/*
 * resp_list.c: Redis lists on the Redis face: LPUSH, RPUSH, LPUSHX, RPUSHX,
 * LPOP, RPOP (with a count), LLEN, LRANGE, LINDEX, LSET, LREM and LTRIM, with
 * redis-server 7.0's answers and errors word for word (its t_list.c is the model:
 * which argument is checked before the key is looked up, and what a missing key
 * answers, follow it command by command).
 *
 * A list is one value of Redis type LOG_TYPE_LIST (the store's log op 7, which
 * keeps the type through restarts, compaction, followers and rebuilds), encoded
 * as resp_proto.h says. Every command that changes a list writes the whole value
 * again, as one record: simple and atomic, bounded by --max-value (docs/RESP.md
 * says what a push costs as the list grows). An emptied list is deleted, as Redis
 * deletes it; a changed list keeps its expiry.
 */
#include "resp/resp_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define ERR_NOT_INT "ERR value is not an integer or out of range"
#define LIST_HEADER 4
#define ELEM_HEADER 4

/* ---- the value's encoding ---- */

int resp_list_valid(const uint8_t *v, size_t n, uint32_t *count)
{
    if (n < LIST_HEADER) return 0;
    uint32_t want = hanu_get_u32(v);
    size_t pos = LIST_HEADER;
    for (uint32_t i = 0; i < want; i++) {
        if (n - pos < ELEM_HEADER) return 0;
        uint32_t len = hanu_get_u32(v + pos);
        pos += ELEM_HEADER;
        if (n - pos < len) return 0;
        pos += len;
    }
    if (pos != n) return 0;
    *count = want;
    return 1;
}

typedef struct list_elem {
    const uint8_t *p;
    uint32_t len;
} list_elem;

/* The elements of a valid encoding (resp_list_valid said so) into a[0..count). */
static void list_split(const uint8_t *v, uint32_t count, list_elem *a)
{
    size_t pos = LIST_HEADER;
    for (uint32_t i = 0; i < count; i++) {
        a[i].len = hanu_get_u32(v + pos);
        a[i].p = v + pos + ELEM_HEADER;
        pos += ELEM_HEADER + a[i].len;
    }
}

static int enc_elem(hanu_buf *b, const void *p, size_t len)
{
    uint8_t h[ELEM_HEADER];
    hanu_put_u32(h, (uint32_t)len);
    if (hanu_buf_append(b, h, sizeof h) != HANU_OK) return HANU_ERR_NOMEM;
    return len ? hanu_buf_append(b, p, len) : HANU_OK;
}

/* ---- reading and writing a list key ---- */

/* The list at key: 1 (*v, *n, *count, *expire set), 0 absent, -1 answered (the key
   holds another type, or its value is not a list's). */
static int list_read(resp_conn *c, const resp_db *db, const resp_arg *key, const uint8_t **v, size_t *n,
                     uint32_t *count, uint64_t *expire)
{
    uint8_t type;
    int r = resp_read_typed(c, db, key, v, n, expire, &type);
    if (r <= 0) return r;
    if (type != LOG_TYPE_LIST) { resp_err(c, RESP_ERR_WRONGTYPE); return -1; }
    if (!resp_list_valid(*v, *n, count)) { resp_err(c, "ERR the list's value is damaged"); return -1; }
    return 1;
}

/* The elements of the list at key, in a malloc'd array (*a, freed by the caller):
   as list_read. */
static int list_load(resp_conn *c, const resp_db *db, const resp_arg *key, list_elem **a, uint32_t *count,
                     uint64_t *expire)
{
    const uint8_t *v;
    size_t n;
    *a = NULL;
    int r = list_read(c, db, key, &v, &n, count, expire);
    if (r <= 0) return r;
    *a = malloc((*count ? *count : 1) * sizeof **a);
    if (!*a) { resp_err(c, "ERR out of memory"); return -1; }
    list_split(v, *count, *a);
    return 1;
}

/* The list of the SELECTed database at key, its elements malloc'd (l->a, freed by
   the caller): as list_read. */
typedef struct list_at {
    list_elem *a;
    uint32_t count;
    uint64_t expire;
} list_at;

static int load_key(resp_conn *c, const resp_arg *key, list_at *l)
{
    resp_db db = resp_current_db(c);
    return list_load(c, &db, key, &l->a, &l->count, &l->expire);
}

/* Whether an encoding of total bytes fits the server's --max-value; answers when not. */
static int list_fits(resp_conn *c, uint64_t total)
{
    if (total <= c->gc.srv->limits.max_value) return 1;
    resp_w_errorf(&c->gc.out, "ERR the list would take %llu bytes, past the server's --max-value of %u bytes",
                  (unsigned long long)total, c->gc.srv->limits.max_value);
    c->rs->errors++;
    return 0;
}

/* Stages a[from..to) as key's new list (a delete when empty), keeping expire, with
   elements at skip (UINT32_MAX: none) left out and the one at replace (if any)
   replaced by with: 1, or 0 answered. */
typedef struct list_edit {
    uint32_t from, to;
    const uint8_t *drop;       /* drop[i] != 0: element i is left out (NULL: none) */
    uint32_t replace;          /* UINT32_MAX: none */
    const resp_arg *with;
} list_edit;

static int list_store(resp_conn *c, const resp_arg *key, const list_elem *a, const list_edit *e, uint64_t expire)
{
    uint64_t total = LIST_HEADER;
    uint32_t kept = 0;
    for (uint32_t i = e->from; i < e->to; i++) {
        if (e->drop && e->drop[i]) continue;
        total += ELEM_HEADER + (i == e->replace ? e->with->len : a[i].len);
        kept++;
    }
    if (!kept) return resp_stage_or_answer(c, STORE_DELETE, key, NULL, 0, 0);
    if (!list_fits(c, total)) return 0;
    hanu_buf b = { 0 };
    int rc = hanu_buf_reserve(&b, (size_t)total);
    if (rc == HANU_OK) {
        hanu_put_u32(b.data, kept);
        b.len = LIST_HEADER;
    }
    for (uint32_t i = e->from; rc == HANU_OK && i < e->to; i++) {
        if (e->drop && e->drop[i]) continue;
        rc = i == e->replace ? enc_elem(&b, e->with->p, e->with->len) : enc_elem(&b, a[i].p, a[i].len);
    }
    if (rc == HANU_OK) rc = resp_stage_typed(c, STORE_SET, key, b.data, b.len, expire, LOG_TYPE_LIST);
    hanu_buf_free(&b);
    if (rc != HANU_OK) { resp_err(c, "ERR out of memory"); return 0; }
    return 1;
}

/* ---- the commands ---- */

/* LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...]: pushGenericCommand. The old
   elements are copied as they are encoded; only the new ones are encoded. */
void resp_cmd_push(resp_conn *c, const resp_arg *argv, size_t argc)
{
    int left = (argv[0].p[0] | 32) == 'l', only_existing = argv[0].len == 6;
    if (!resp_check_key(c, &argv[1])) return;
    resp_db db = resp_current_db(c);
    const uint8_t *v = NULL;
    size_t n = 0;
    uint32_t count = 0;
    uint64_t expire = 0;
    int r = list_read(c, &db, &argv[1], &v, &n, &count, &expire);
    if (r < 0) return;
    if (!r && only_existing) { resp_w_int(&c->gc.out, 0); return; }
    uint64_t total = r ? n : LIST_HEADER, added = argc - 2;
    for (size_t i = 2; i < argc; i++) total += ELEM_HEADER + argv[i].len;
    if (count + added > UINT32_MAX || !list_fits(c, total)) {
        if (count + added > UINT32_MAX) resp_err(c, "ERR the list would hold too many elements");
        return;
    }
    hanu_buf b = { 0 };
    int rc = hanu_buf_reserve(&b, (size_t)total);
    if (rc == HANU_OK) {
        hanu_put_u32(b.data, (uint32_t)(count + added));
        b.len = LIST_HEADER;
        if (!left && r) rc = hanu_buf_append(&b, v + LIST_HEADER, n - LIST_HEADER);
    }
    /* LPUSH a b c puts c first: each element goes in front of the ones before it */
    for (size_t k = 0; rc == HANU_OK && k < added; k++) {
        const resp_arg *e = &argv[left ? argc - 1 - k : 2 + k];
        rc = enc_elem(&b, e->p, e->len);
    }
    if (rc == HANU_OK && left && r) rc = hanu_buf_append(&b, v + LIST_HEADER, n - LIST_HEADER);
    if (rc == HANU_OK) rc = resp_stage_typed(c, STORE_SET, &argv[1], b.data, b.len, expire, LOG_TYPE_LIST);
    hanu_buf_free(&b);
    if (rc != HANU_OK) resp_err(c, "ERR out of memory");
    else resp_w_int(&c->gc.out, (int64_t)(count + added));
}

/* LPOP and RPOP key [count]: popGenericCommand. */
void resp_cmd_pop(resp_conn *c, const resp_arg *argv, size_t argc)
{
    int left = (argv[0].p[0] | 32) == 'l', has_count = argc == 3;
    if (argc > 3) { resp_err_arity(c, left ? "lpop" : "rpop"); return; }
    int64_t want = 0;
    if (has_count) {
        /* getPositiveLongFromObjectOrReply: one error for both */
        if (!resp_parse_i64(argv[2].p, argv[2].len, &want) || want < 0) {
            resp_err(c, "ERR value is out of range, must be positive");
            return;
        }
    }
    list_at l;
    int r = load_key(c, &argv[1], &l);
    if (r < 0) return;
    if (!r) {
        if (has_count) resp_w_null_array(&c->gc.out, c->proto);
        else resp_w_null(&c->gc.out, c->proto);
        return;
    }
    if (has_count && want == 0) { resp_w_array(&c->gc.out, 0); free(l.a); return; }
    uint32_t take = has_count ? (uint32_t)HANU_MIN((uint64_t)want, l.count) : 1;
    size_t start = c->gc.out.len;
    if (has_count) resp_w_array(&c->gc.out, take);
    for (uint32_t k = 0; k < take; k++) {   /* RPOP answers the last element first */
        const list_elem *e = &l.a[left ? k : l.count - 1 - k];
        resp_w_bulk(&c->gc.out, e->p, e->len);
    }
    /* Answered before the write, which may move the bytes the elements point to. */
    list_edit ed = { .from = left ? take : 0, .to = left ? l.count : l.count - take, .replace = UINT32_MAX };
    size_t answered = c->gc.out.len;
    if (!list_store(c, &argv[1], l.a, &ed, l.expire)) {   /* the error replaces the elements */
        hanu_buf *o = &c->gc.out;
        size_t elen = o->len - answered;
        memmove(o->data + start, o->data + answered, elen);
        o->len = start + elen;
    }
    free(l.a);
}

void resp_cmd_llen(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    uint32_t count = 0;
    uint64_t expire;
    int r = list_read(c, &db, &argv[1], &v, &n, &count, &expire);
    if (r >= 0) resp_w_int(&c->gc.out, r ? (int64_t)count : 0);
}

/* Redis's range of [start, end] over count elements (negative: from the end):
   0 when empty, else 1 with *lo..*hi inclusive. */
static int list_range(int64_t start, int64_t end, uint32_t count, uint32_t *lo, uint32_t *hi)
{
    int64_t len = count;
    if (start < 0) start = len + start;
    if (end < 0) end = len + end;
    if (start < 0) start = 0;
    if (start > end || start >= len) return 0;
    if (end >= len) end = len - 1;
    *lo = (uint32_t)start;
    *hi = (uint32_t)end;
    return 1;
}

static int parse_two(resp_conn *c, const resp_arg *a, const resp_arg *b, int64_t *x, int64_t *y)
{
    if (resp_parse_i64(a->p, a->len, x) && resp_parse_i64(b->p, b->len, y)) return 1;
    resp_err(c, ERR_NOT_INT);
    return 0;
}

/* LRANGE's and LTRIM's start: both indexes are read before the key (lrangeCommand,
   ltrimCommand); *in_range says whether [*lo, *hi] holds any element. As list_read. */
static int load_range(resp_conn *c, const resp_arg *argv, list_at *l, uint32_t *lo, uint32_t *hi, int *in_range)
{
    int64_t start, end;
    *in_range = 0;
    if (!parse_two(c, &argv[2], &argv[3], &start, &end)) return -1;
    int r = load_key(c, &argv[1], l);
    *in_range = r > 0 && list_range(start, end, l->count, lo, hi);
    return r;
}

void resp_cmd_lrange(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    list_at l;
    uint32_t lo = 0, hi = 0;
    int in_range;
    int r = load_range(c, argv, &l, &lo, &hi, &in_range);
    if (r < 0) return;
    if (!in_range) {
        resp_w_array(&c->gc.out, 0);
        free(l.a);
        return;
    }
    resp_w_array(&c->gc.out, hi - lo + 1);
    for (uint32_t i = lo; i <= hi; i++) resp_w_bulk(&c->gc.out, l.a[i].p, l.a[i].len);
    free(l.a);
}

/* An index (negative: from the end) as a position, or UINT32_MAX when outside. */
static uint32_t list_index(int64_t index, uint32_t count)
{
    if (index < 0) index += count;
    return index < 0 || index >= (int64_t)count ? UINT32_MAX : (uint32_t)index;
}

/* LINDEX key index: the key is looked up before the index is read. */
void resp_cmd_lindex(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    list_at l;
    int r = load_key(c, &argv[1], &l);
    if (r < 0) return;
    if (!r) { resp_w_null(&c->gc.out, c->proto); return; }
    int64_t index;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &index)) resp_err(c, ERR_NOT_INT);
    else if (list_index(index, l.count) == UINT32_MAX) resp_w_null(&c->gc.out, c->proto);
    else resp_w_bulk(&c->gc.out, l.a[list_index(index, l.count)].p, l.a[list_index(index, l.count)].len);
    free(l.a);
}

void resp_cmd_lset(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    list_at l;
    int r = load_key(c, &argv[1], &l);
    if (r < 0) return;
    if (!r) { resp_err(c, "ERR no such key"); return; }
    int64_t index;
    uint32_t at;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &index)) resp_err(c, ERR_NOT_INT);
    else if ((at = list_index(index, l.count)) == UINT32_MAX) resp_err(c, "ERR index out of range");
    else {
        list_edit ed = { .from = 0, .to = l.count, .replace = at, .with = &argv[3] };
        if (list_store(c, &argv[1], l.a, &ed, l.expire)) resp_w_simple(&c->gc.out, "OK");
    }
    free(l.a);
}

/* LREM key count element: count > 0 from the head, < 0 from the tail, 0 all. */
void resp_cmd_lrem(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    int64_t want;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &want)) { resp_err(c, ERR_NOT_INT); return; }
    list_at l;
    int r = load_key(c, &argv[1], &l);
    if (r < 0) return;
    if (!r) { resp_w_int(&c->gc.out, 0); return; }
    uint8_t *drop = calloc(l.count ? l.count : 1, 1);
    if (!drop) { free(l.a); resp_err(c, "ERR out of memory"); return; }
    const resp_arg *x = &argv[3];
    uint64_t limit = want == 0 ? UINT64_MAX : want < 0 ? (uint64_t)0 - (uint64_t)want : (uint64_t)want;
    uint64_t removed = 0;
    for (uint32_t k = 0; k < l.count && removed < limit; k++) {
        uint32_t i = want < 0 ? l.count - 1 - k : k;
        if (l.a[i].len == x->len && (x->len == 0 || memcmp(l.a[i].p, x->p, x->len) == 0)) {
            drop[i] = 1;
            removed++;
        }
    }
    list_edit ed = { .from = 0, .to = l.count, .drop = drop, .replace = UINT32_MAX };
    if (!removed || list_store(c, &argv[1], l.a, &ed, l.expire)) resp_w_int(&c->gc.out, (int64_t)removed);
    free(drop);
    free(l.a);
}

/* LTRIM key start stop: a range outside the list empties (deletes) it. */
void resp_cmd_ltrim(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    list_at l;
    uint32_t lo = 0, hi = 0;
    int in_range;
    int r = load_range(c, argv, &l, &lo, &hi, &in_range);
    if (r < 0) return;
    if (!r) { resp_w_simple(&c->gc.out, "OK"); return; }
    list_edit ed = { .from = 0, .to = 0, .replace = UINT32_MAX };
    if (in_range) {
        ed.from = lo;
        ed.to = hi + 1;
    }
    /* Nothing trimmed: no write, but Redis counts the LTRIM as a change of the key
       (it aborts a WATCHing transaction). */
    if (ed.from == 0 && ed.to == l.count) {
        store_watch_touch(c->gc.srv->store, resp_current_db(c).id, argv[1].p, argv[1].len);
        resp_w_simple(&c->gc.out, "OK");
    } else if (list_store(c, &argv[1], l.a, &ed, l.expire)) {
        resp_w_simple(&c->gc.out, "OK");
    }
    free(l.a);
}
