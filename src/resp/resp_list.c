/*
 * resp_list.c: Redis lists on the Redis face: LPUSH, RPUSH, LPUSHX, RPUSHX,
 * LPOP, RPOP (with a count), LLEN, LRANGE, LINDEX, LSET, LREM and LTRIM, with
 * redis-server 7.0's answers and errors word for word (its t_list.c is the model:
 * which argument is checked before the key is looked up, and what a missing key
 * answers, follow it command by command).
 *
 * A list is kept in chunks (kvlist.h): the user key holds its head (type
 * LOG_TYPE_LIST, log op 7), the elements live in chunk records of the system
 * database. A command stages the chunks it changes and the head again, so each
 * change is one record that rewrites the user key (its token moves, which WATCH
 * and the binary protocol's tokens rely on): a push or a pop costs the edge chunk
 * and the head, LINDEX and LSET a walk over the head's chunk counts. A command
 * that fails after staging chunks takes them back (list_rollback). An emptied
 * list is deleted with its chunks and owner; a changed list keeps its expiry.
 * A head of the old format (the whole list in one value) is converted by the
 * next write command.
 */
#include "resp/resp_internal.h"
#include "kvlist/kvlist.h"

#include <stdio.h>
#include <stdlib.h>

#define ERR_NOT_INT "ERR value is not an integer or out of range"
#define ERR_DAMAGED "ERR the list's value is damaged"

/* A list being read or changed by one command. */
typedef struct qlist {
    kvlist_head h;
    uint64_t expire;
    hanu_buf raw;              /* the head's value as read (an old-format head points into it) */
    int new_id;                /* a new id: its owner record goes with the head */
    size_t mark_staged, mark_arena;   /* the staging before this command's own */
} qlist;

/* A chunk's elements, read into its own buffer. */
typedef struct qchunk {
    hanu_buf raw;
    kvlist_elem *a;
    uint32_t n, cap;
} qchunk;

static void qchunk_free(qchunk *k)
{
    hanu_buf_free(&k->raw);
    free(k->a);
}

static void list_free(qlist *q)
{
    kvlist_head_free(&q->h);
    hanu_buf_free(&q->raw);
}

static int answer_nomem(resp_conn *c)
{
    resp_err(c, "ERR out of memory");
    return 0;
}

/* Takes back what this command staged (an error after some chunks were staged). */
static void list_rollback(resp_conn *c, const qlist *q)
{
    c->rs->nstaged = q->mark_staged;
    c->rs->arena.len = q->mark_arena;
}

/* The list at key into *q: 1, 0 absent (q empty), -1 answered (another type, or a
   damaged head). q is always to be freed. */
static int list_load(resp_conn *c, const resp_arg *key, qlist *q)
{
    memset(q, 0, sizeof *q);
    q->mark_staged = c->rs->nstaged;
    q->mark_arena = c->rs->arena.len;
    resp_db db = resp_current_db(c);
    const uint8_t *v;
    size_t n;
    uint8_t type;
    int r = resp_read_typed(c, &db, key, &v, &n, &q->expire, &type);
    if (r <= 0) return r;
    if (type != LOG_TYPE_LIST) { resp_err(c, RESP_ERR_WRONGTYPE); return -1; }
    if (hanu_buf_append(&q->raw, v, n) != HANU_OK) return answer_nomem(c) - 1;
    int rc = kvlist_head_decode(q->raw.data, q->raw.len, &q->h);
    if (rc == HANU_ERR_NOMEM) return answer_nomem(c) - 1;
    if (rc) { resp_err(c, ERR_DAMAGED); return -1; }
    return 1;
}

/* Chunk i of q's list into k: OK, CORRUPT (missing, or not what the head says),
   NOMEM or a store error; nothing answered (chunk_answer does). */
static int chunk_get(resp_conn *c, const qlist *q, uint32_t i, qchunk *k)
{
    k->raw.len = 0;
    if (!q->h.id) {
        if (hanu_buf_append(&k->raw, q->h.inline_value, q->h.inline_len) != HANU_OK) return HANU_ERR_NOMEM;
    } else {
        uint8_t key[KVLIST_CHUNK_KEY_LEN];
        kvlist_chunk_key(key, q->h.id, q->h.chunks[i].seq);
        const resp_arg ka = { key, sizeof key };
        int r = resp_read_system(c, &ka, &k->raw);
        if (r) return r == HANU_ERR_NOT_FOUND ? HANU_ERR_CORRUPT : r;
    }
    uint32_t n;
    if (!kvlist_chunk_valid(k->raw.data, k->raw.len, &n) || n != q->h.chunks[i].count) return HANU_ERR_CORRUPT;
    if (n > k->cap) {
        kvlist_elem *a = realloc(k->a, n * sizeof *a);
        if (!a) return HANU_ERR_NOMEM;
        k->a = a;
        k->cap = n;
    }
    kvlist_chunk_split(k->raw.data, n, k->a);
    k->n = n;
    return HANU_OK;
}

static void chunk_answer(resp_conn *c, int rc)
{
    if (rc == HANU_ERR_CORRUPT) resp_err(c, ERR_DAMAGED);
    else if (rc == HANU_ERR_NOMEM) resp_err(c, "ERR out of memory");
    else {
        resp_w_errorf(&c->gc.out, "ERR %s", hanu_status_str(rc));
        c->rs->errors++;
    }
}

/* chunk_get that answers its error: 1, or 0 answered. */
static int chunk_read(resp_conn *c, const qlist *q, uint32_t i, qchunk *k)
{
    int rc = chunk_get(c, q, i, k);
    if (rc) chunk_answer(c, rc);
    return rc == HANU_OK;
}

/* A list id never used before: the next txn (every record below it was numbered
   before, so every id made then is below this one) and a count within the record. */
static uint64_t new_list_id(resp_conn *c)
{
    return ((store_last_txn(c->gc.srv->store) + 1) << 20) | c->rs->list_ids++;
}

/* The largest chunk encoding: the target, or less under a small --max-value. */
static uint32_t chunk_cap(resp_conn *c)
{
    return HANU_MIN(KVLIST_CHUNK_TARGET_BYTES, c->gc.srv->limits.max_value);
}

static uint32_t pack(resp_conn *c, const kvlist_elem *a, uint32_t n, int from_end)
{
    uint32_t cap = chunk_cap(c), k = kvlist_pack(a, n, from_end);
    if (cap >= KVLIST_CHUNK_TARGET_BYTES) return k;
    uint64_t bytes = KVLIST_CHUNK_OVERHEAD;   /* a small --max-value: fewer per chunk */
    uint32_t t = 0;
    while (t < k) {
        uint64_t next = bytes + KVLIST_ELEM_OVERHEAD + a[from_end ? n - 1 - t : t].len;
        if (t > 0 && next > cap) break;
        bytes = next;
        t++;
    }
    return t;
}

static int stage_system(resp_conn *c, uint8_t kind, const uint8_t *key, size_t klen, const void *v, size_t vlen)
{
    const resp_arg ka = { key, klen };
    return resp_stage_typed(c, kind, &ka, v, vlen, 0, LOG_TYPE_STRING) == HANU_OK;
}

/* Replaces chunks [from, to) of q's list by a[0..n) packed into chunks (from the
   back when from_end), staging the chunks it writes and deleting those it drops:
   1 with *made chunks, or 0 answered (too many chunks; out of memory). The
   replaced chunks' numbers are reused first, then new ones are taken. */
static int list_replace(resp_conn *c, qlist *q, uint32_t from, uint32_t to, const kvlist_elem *a, uint32_t n,
                        int from_end, uint32_t *made)
{
    kvlist_head *h = &q->h;
    uint32_t m = 0, cap = 16, *sizes = malloc(cap * sizeof *sizes);
    if (!sizes) return answer_nomem(c);
    for (uint32_t done = 0; done < n; m++) {   /* chunk sizes, in pack order */
        if (m == cap) {
            uint32_t *ns = realloc(sizes, 2 * cap * sizeof *ns);
            if (!ns) { free(sizes); return answer_nomem(c); }
            sizes = ns;
            cap *= 2;
        }
        sizes[m] = from_end ? pack(c, a, n - done, 1) : pack(c, a + done, n - done, 0);
        done += sizes[m];
    }
    for (uint32_t i = 0; from_end && i < m / 2; i++) {
        uint32_t t = sizes[i];
        sizes[i] = sizes[m - 1 - i];
        sizes[m - 1 - i] = t;
    }
    uint32_t old = to - from;
    uint64_t nchunks = (uint64_t)h->nchunks - old + m;
    if (nchunks > KVLIST_MAX_CHUNKS || kvlist_head_size((uint32_t)nchunks) > c->gc.srv->limits.max_value) {
        free(sizes);
        resp_w_errorf(&c->gc.out, "ERR a list holds at most %u chunks, and its head must fit --max-value",
                      KVLIST_MAX_CHUNKS);
        c->rs->errors++;
        return 0;
    }
    uint32_t *seqs = malloc((m ? m : 1) * sizeof *seqs);
    if (!seqs || kvlist_head_reserve(h, m) != HANU_OK) { free(sizes); free(seqs); return answer_nomem(c); }
    for (uint32_t i = 0; i < m; i++) seqs[i] = i < old ? h->chunks[from + i].seq : kvlist_new_seq(h);
    uint8_t key[KVLIST_CHUNK_KEY_LEN];
    int ok = 1;
    for (uint32_t i = m; ok && i < old; i++) {
        kvlist_chunk_key(key, h->id, h->chunks[from + i].seq);
        ok = stage_system(c, STORE_SYSTEM_DELETE, key, sizeof key, NULL, 0);
    }
    memmove(h->chunks + from + m, h->chunks + to, (h->nchunks - to) * sizeof *h->chunks);
    h->nchunks = (uint32_t)nchunks;
    hanu_buf enc = { 0 };
    for (uint32_t i = 0; ok && i < m; i++) {
        kvlist_chunk_ref r = { .seq = seqs[i], .count = sizes[i], .bytes = 0 };
        for (uint32_t k = 0; k < sizes[i]; k++) r.bytes += a[k].len;
        h->chunks[from + i] = r;
        enc.len = 0;
        kvlist_chunk_key(key, h->id, r.seq);
        ok = kvlist_chunk_encode(a, sizes[i], &enc) == HANU_OK &&
             stage_system(c, STORE_SYSTEM_SET, key, sizeof key, enc.data, enc.len);
        a += sizes[i];
    }
    hanu_buf_free(&enc);
    free(sizes);
    free(seqs);
    if (!ok) return answer_nomem(c);
    h->count = h->bytes = 0;
    for (uint32_t i = 0; i < h->nchunks; i++) {
        h->count += h->chunks[i].count;
        h->bytes += h->chunks[i].bytes;
    }
    if (made) *made = m;
    return 1;
}

/* A list that is new (absent) or of the old format gets an id (and chunks) of its
   own before it changes: 1, or 0 answered. The old format's inline value counts as
   chunk 0, a record that was never written. */
static int list_own(resp_conn *c, qlist *q)
{
    if (q->h.id) return 1;
    qchunk k = { 0 };
    int had = q->h.nchunks != 0, ok = !had || chunk_read(c, q, 0, &k);
    if (ok) {
        q->h.id = new_list_id(c);
        q->new_id = 1;
        q->h.next_seq = had ? 1 : 0;
        if (had) q->h.chunks[0].seq = 0;
        ok = !had || list_replace(c, q, 0, 1, k.a, k.n, 0, NULL);
    }
    qchunk_free(&k);
    return ok;
}

/* Stages q's head at key (a delete of the list when it is empty): 1, or 0 answered
   (the staged chunks taken back). */
static int list_commit(resp_conn *c, const resp_arg *key, qlist *q)
{
    uint8_t okey[KVLIST_OWNER_KEY_LEN];
    kvlist_owner_key(okey, q->h.id);
    int ok;
    if (!q->h.count) {
        ok = resp_stage(c, STORE_DELETE, key, NULL, 0, 0) == HANU_OK &&
             (!q->h.id || stage_system(c, STORE_SYSTEM_DELETE, okey, sizeof okey, NULL, 0));
    } else {
        hanu_buf b = { 0 };
        ok = kvlist_head_encode(&q->h, &b) == HANU_OK &&
             resp_stage_typed(c, STORE_SET, key, b.data, b.len, q->expire, LOG_TYPE_LIST) == HANU_OK;
        if (ok && q->new_id) {
            b.len = 0;
            ok = kvlist_owner_encode(c->db, key->p, key->len, &b) == HANU_OK &&
                 stage_system(c, STORE_SYSTEM_SET, okey, sizeof okey, b.data, b.len);
        }
        hanu_buf_free(&b);
    }
    if (ok) return 1;
    list_rollback(c, q);
    return answer_nomem(c);
}

int resp_list_renamed(resp_conn *c, const uint8_t *v, size_t n, const resp_arg *to)
{
    kvlist_head h;
    int rc = kvlist_head_decode(v, n, &h);
    if (rc == HANU_ERR_NOMEM) return answer_nomem(c);
    if (rc) { resp_err(c, ERR_DAMAGED); return 0; }
    uint64_t id = h.id;
    kvlist_head_free(&h);
    if (!id) return 1;   /* the old format: no chunks, no owner */
    uint8_t okey[KVLIST_OWNER_KEY_LEN];
    kvlist_owner_key(okey, id);
    hanu_buf b = { 0 };
    int ok = kvlist_owner_encode(c->db, to->p, to->len, &b) == HANU_OK &&
             stage_system(c, STORE_SYSTEM_SET, okey, sizeof okey, b.data, b.len);
    hanu_buf_free(&b);
    return ok ? 1 : answer_nomem(c);
}

/* ---- the commands ---- */

/* Whether an element of len bytes fits a chunk of its own under --max-value: 1, or
   0 answered. */
static int elem_fits(resp_conn *c, size_t len)
{
    uint32_t framing = KVLIST_CHUNK_OVERHEAD + KVLIST_ELEM_OVERHEAD;
    if (len + framing <= c->gc.srv->limits.max_value) return 1;
    resp_w_errorf(&c->gc.out, "ERR a list element of %zu bytes is past the server's --max-value of %u bytes "
                  "(less %u bytes of framing)", len, c->gc.srv->limits.max_value, framing);
    c->rs->errors++;
    return 0;
}

/* Whether the elements argv[2..argc) fit one list with what it holds (the limits
   of kvlist.h): 1, or 0 answered. */
static int push_fits(resp_conn *c, const qlist *q, const resp_arg *argv, size_t argc)
{
    uint64_t bytes = q->h.bytes;
    for (size_t i = 2; i < argc; i++) {
        if (!elem_fits(c, argv[i].len)) return 0;
        bytes += argv[i].len;
    }
    if (q->h.count + (argc - 2) <= KVLIST_MAX_ELEMS && bytes <= KVLIST_MAX_BYTES) return 1;
    resp_w_errorf(&c->gc.out, "ERR a list holds at most %u elements and %llu bytes", KVLIST_MAX_ELEMS,
                  (unsigned long long)KVLIST_MAX_BYTES);
    c->rs->errors++;
    return 0;
}

/* Whether chunk i can take one more element of len bytes. */
static int chunk_takes(resp_conn *c, const kvlist_chunk_ref *r, uint32_t len)
{
    uint64_t size = KVLIST_CHUNK_OVERHEAD + (uint64_t)KVLIST_ELEM_OVERHEAD * r->count + r->bytes;
    return r->count < KVLIST_CHUNK_MAX_ELEMS && size + KVLIST_ELEM_OVERHEAD + len <= chunk_cap(c);
}

/* LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...]: pushGenericCommand. Only
   the edge chunk is read and written again (or a new one made beside it). */
void resp_cmd_push(resp_conn *c, const resp_arg *argv, size_t argc)
{
    int left = (argv[0].p[0] | 32) == 'l', only_existing = argv[0].len == 6;
    if (!resp_check_key(c, &argv[1])) return;
    qlist q;
    qchunk k = { 0 };
    int r = list_load(c, &argv[1], &q);
    if (r < 0 || (!r && only_existing) || !push_fits(c, &q, argv, argc) || !list_own(c, &q)) {
        if (r == 0 && only_existing) resp_w_int(&c->gc.out, 0);
        list_rollback(c, &q);
        list_free(&q);
        return;
    }
    uint32_t added = (uint32_t)(argc - 2), nedge = 0;
    kvlist_elem *a = malloc((added + KVLIST_CHUNK_MAX_ELEMS) * sizeof *a);
    int ok = a != NULL;
    if (!ok) answer_nomem(c);
    /* the new elements in list order (LPUSH a b c puts c first), beside the edge chunk's */
    uint32_t edge = left ? 0 : q.h.nchunks - 1;
    const resp_arg *beside = &argv[2];   /* the new element next to the edge chunk, both ways */
    int use_edge = ok && q.h.nchunks && chunk_takes(c, &q.h.chunks[edge], (uint32_t)beside->len);
    if (use_edge) {
        ok = chunk_read(c, &q, edge, &k);
        nedge = ok ? k.n : 0;
    }
    if (ok) {
        uint32_t at = 0;
        if (!left) for (uint32_t i = 0; i < nedge; i++) a[at++] = k.a[i];
        for (uint32_t i = 0; i < added; i++) {
            const resp_arg *e = &argv[left ? argc - 1 - i : 2 + i];
            a[at++] = (kvlist_elem){ e->p, (uint32_t)e->len };
        }
        if (left) for (uint32_t i = 0; i < nedge; i++) a[at++] = k.a[i];
        uint32_t from = use_edge ? edge : (left ? 0 : q.h.nchunks);
        ok = list_replace(c, &q, from, from + (use_edge ? 1 : 0), a, at, left, NULL) &&
             list_commit(c, &argv[1], &q);
    }
    if (ok) resp_w_int(&c->gc.out, (int64_t)q.h.count);
    else list_rollback(c, &q);
    free(a);
    qchunk_free(&k);
    list_free(&q);
}

/* LPOP and RPOP key [count]: popGenericCommand. Whole chunks go; the one popped
   into is written again. */
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
    qlist q;
    int r = list_load(c, &argv[1], &q);
    if (r <= 0) {
        if (!r && has_count) resp_w_null_array(&c->gc.out, c->proto);
        else if (!r) resp_w_null(&c->gc.out, c->proto);
        list_free(&q);
        return;
    }
    if (has_count && want == 0) { resp_w_array(&c->gc.out, 0); list_free(&q); return; }
    if (!list_own(c, &q)) { list_rollback(c, &q); list_free(&q); return; }
    uint64_t take = has_count ? HANU_MIN((uint64_t)want, q.h.count) : 1, left_to_take = take;
    hanu_buf reply = { 0 };   /* goes out once the write is staged: an error replaces it */
    if (has_count) resp_w_array(&reply, take);
    qchunk k = { 0 };
    uint32_t whole = 0, n = q.h.nchunks, nrest = 0;
    int ok = 1;
    const kvlist_elem *rest = NULL;
    while (ok && left_to_take) {   /* RPOP answers the last element first */
        ok = chunk_read(c, &q, left ? whole : n - 1 - whole, &k);
        uint32_t here = ok ? (uint32_t)HANU_MIN(left_to_take, k.n) : 0;
        for (uint32_t i = 0; i < here; i++) {
            const kvlist_elem *e = &k.a[left ? i : k.n - 1 - i];
            if (resp_w_bulk(&reply, e->p, e->len) != HANU_OK) ok = answer_nomem(c);
        }
        left_to_take -= here;
        if (ok && here == k.n) whole++;
        else if (ok) {
            rest = left ? k.a + here : k.a;
            nrest = k.n - here;
        }
    }
    uint32_t span = whole + (nrest ? 1 : 0);
    if (ok) ok = list_replace(c, &q, left ? 0 : n - span, left ? span : n, rest, nrest, left, NULL) &&
                 list_commit(c, &argv[1], &q);
    if (!ok) list_rollback(c, &q);
    else if (hanu_buf_append(&c->gc.out, reply.data, reply.len) != HANU_OK) {
        list_rollback(c, &q);
        answer_nomem(c);
    }
    hanu_buf_free(&reply);
    qchunk_free(&k);
    list_free(&q);
}

void resp_cmd_llen(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    qlist q;
    int r = list_load(c, &argv[1], &q);
    if (r >= 0) resp_w_int(&c->gc.out, r ? (int64_t)q.h.count : 0);
    list_free(&q);
}

/* Redis's range of [start, end] over count elements (negative: from the end):
   0 when empty, else 1 with *lo..*hi inclusive. */
static int list_range(int64_t start, int64_t end, uint64_t count, uint64_t *lo, uint64_t *hi)
{
    int64_t len = (int64_t)count;
    if (start < 0) start = len + start;
    if (end < 0) end = len + end;
    if (start < 0) start = 0;
    if (start > end || start >= len) return 0;
    if (end >= len) end = len - 1;
    *lo = (uint64_t)start;
    *hi = (uint64_t)end;
    return 1;
}

static int parse_two(resp_conn *c, const resp_arg *a, const resp_arg *b, int64_t *x, int64_t *y)
{
    if (resp_parse_i64(a->p, a->len, x) && resp_parse_i64(b->p, b->len, y)) return 1;
    resp_err(c, ERR_NOT_INT);
    return 0;
}

/* LRANGE's and LTRIM's start: both indexes are read before the key (lrangeCommand,
   ltrimCommand); *in_range says whether [*lo, *hi] holds any element. As list_load. */
static int load_range(resp_conn *c, const resp_arg *argv, qlist *q, uint64_t *lo, uint64_t *hi, int *in_range)
{
    int64_t start, end;
    *in_range = 0;
    memset(q, 0, sizeof *q);
    if (!parse_two(c, &argv[2], &argv[3], &start, &end)) return -1;
    int r = list_load(c, &argv[1], q);
    *in_range = r > 0 && list_range(start, end, q->h.count, lo, hi);
    return r;
}

void resp_cmd_lrange(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    qlist q;
    uint64_t lo = 0, hi = 0;
    int in_range;
    int r = load_range(c, argv, &q, &lo, &hi, &in_range);
    if (r >= 0 && !in_range) resp_w_array(&c->gc.out, 0);
    if (r < 0 || !in_range) { list_free(&q); return; }
    size_t start = c->gc.out.len;
    resp_w_array(&c->gc.out, hi - lo + 1);
    uint32_t ci, off;
    kvlist_locate(&q.h, lo, &ci, &off);
    qchunk k = { 0 };
    uint64_t left = hi - lo + 1;
    for (; left; ci++, off = 0) {
        int rc = chunk_get(c, &q, ci, &k);
        if (rc) {   /* the error replaces the elements */
            c->gc.out.len = start;
            chunk_answer(c, rc);
            break;
        }
        for (uint32_t i = off; i < k.n && left; i++, left--) resp_w_bulk(&c->gc.out, k.a[i].p, k.a[i].len);
    }
    qchunk_free(&k);
    list_free(&q);
}

/* An index (negative: from the end) as a position, or UINT64_MAX when outside. */
static uint64_t list_index(int64_t index, uint64_t count)
{
    if (index < 0) index += (int64_t)count;
    return index < 0 || (uint64_t)index >= count ? UINT64_MAX : (uint64_t)index;
}

/* LINDEX key index: the key is looked up before the index is read. */
void resp_cmd_lindex(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    qlist q;
    int r = list_load(c, &argv[1], &q);
    int64_t index;
    uint64_t at;
    if (r == 0) resp_w_null(&c->gc.out, c->proto);
    else if (r < 0) {}
    else if (!resp_parse_i64(argv[2].p, argv[2].len, &index)) resp_err(c, ERR_NOT_INT);
    else if ((at = list_index(index, q.h.count)) == UINT64_MAX) resp_w_null(&c->gc.out, c->proto);
    else {
        uint32_t ci, off;
        kvlist_locate(&q.h, at, &ci, &off);
        qchunk k = { 0 };
        if (chunk_read(c, &q, ci, &k)) resp_w_bulk(&c->gc.out, k.a[off].p, k.a[off].len);
        qchunk_free(&k);
    }
    list_free(&q);
}

void resp_cmd_lset(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    qlist q;
    int r = list_load(c, &argv[1], &q);
    int64_t index;
    uint64_t at;
    if (r == 0) resp_err(c, "ERR no such key");
    else if (r < 0) {}
    else if (!resp_parse_i64(argv[2].p, argv[2].len, &index)) resp_err(c, ERR_NOT_INT);
    else if ((at = list_index(index, q.h.count)) == UINT64_MAX) resp_err(c, "ERR index out of range");
    else if (elem_fits(c, argv[3].len) && list_own(c, &q)) {
        uint32_t ci, off;
        kvlist_locate(&q.h, at, &ci, &off);
        qchunk k = { 0 };
        int ok = chunk_read(c, &q, ci, &k);
        if (ok) {
            k.a[off] = (kvlist_elem){ argv[3].p, (uint32_t)argv[3].len };
            ok = list_replace(c, &q, ci, ci + 1, k.a, k.n, 0, NULL) && list_commit(c, &argv[1], &q);
        }
        if (ok) resp_w_simple(&c->gc.out, "OK");
        else list_rollback(c, &q);
        qchunk_free(&k);
    } else {
        list_rollback(c, &q);
    }
    list_free(&q);
}

/* LREM key count element: count > 0 from the head, < 0 from the tail, 0 all. Each
   chunk with a match is written again without it. */
void resp_cmd_lrem(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    int64_t want;
    if (!resp_parse_i64(argv[2].p, argv[2].len, &want)) { resp_err(c, ERR_NOT_INT); return; }
    qlist q;
    int r = list_load(c, &argv[1], &q);
    if (r <= 0) {
        if (!r) resp_w_int(&c->gc.out, 0);
        list_free(&q);
        return;
    }
    const resp_arg *x = &argv[3];
    uint64_t limit = want == 0 ? UINT64_MAX : want < 0 ? (uint64_t)0 - (uint64_t)want : (uint64_t)want;
    uint64_t removed = 0;
    qchunk k = { 0 };
    int ok = list_own(c, &q), backward = want < 0;
    uint32_t ci = backward ? q.h.nchunks : 0;
    while (ok && removed < limit && (backward ? ci > 0 : ci < q.h.nchunks)) {
        if (backward) ci--;
        ok = chunk_read(c, &q, ci, &k);
        uint8_t drop[KVLIST_CHUNK_MAX_ELEMS];   /* chunk_read checked the head's count: at most this */
        uint64_t before = removed;
        for (uint32_t t = 0; ok && t < k.n; t++) {
            uint32_t i = backward ? k.n - 1 - t : t;
            drop[i] = removed < limit && k.a[i].len == x->len && (x->len == 0 || memcmp(k.a[i].p, x->p, x->len) == 0);
            removed += drop[i];
        }
        uint32_t kept = 0, made = 1;
        for (uint32_t i = 0; ok && i < k.n; i++)
            if (!drop[i]) k.a[kept++] = k.a[i];
        if (ok && removed != before) ok = list_replace(c, &q, ci, ci + 1, k.a, kept, 0, &made);
        if (!backward) ci += made;
    }
    if (ok && removed) ok = list_commit(c, &argv[1], &q);
    if (ok) resp_w_int(&c->gc.out, (int64_t)removed);
    if (!ok || !removed) list_rollback(c, &q);   /* nothing removed: no write (not even an old list's conversion) */
    qchunk_free(&k);
    list_free(&q);
}

/* LTRIM key start stop: a range outside the list empties (deletes) it. The chunks
   outside go; the two at the range's ends are written again. */
void resp_cmd_ltrim(resp_conn *c, const resp_arg *argv, size_t argc)
{
    (void)argc;
    qlist q;
    uint64_t lo = 0, hi = 0;
    int in_range;
    int r = load_range(c, argv, &q, &lo, &hi, &in_range);
    if (r <= 0 || (in_range && lo == 0 && hi + 1 == q.h.count)) {
        /* Nothing trimmed: no write, but Redis counts the LTRIM as a change of the key
           (it aborts a transaction that WATCHes it). */
        if (r > 0) store_watch_touch(c->gc.srv->store, resp_current_db(c).id, argv[1].p, argv[1].len);
        if (r >= 0) resp_w_simple(&c->gc.out, "OK");
        list_free(&q);
        return;
    }
    qchunk k = { 0 };
    int ok = list_own(c, &q);
    if (ok && !in_range) ok = list_replace(c, &q, 0, q.h.nchunks, NULL, 0, 0, NULL);
    else if (ok) {
        uint32_t clo, olo, chi, ohi;
        kvlist_locate(&q.h, lo, &clo, &olo);
        kvlist_locate(&q.h, hi, &chi, &ohi);
        ok = chunk_read(c, &q, chi, &k);
        if (ok && clo == chi) {
            ok = list_replace(c, &q, 0, q.h.nchunks, k.a + olo, ohi - olo + 1, 0, NULL);
        } else if (ok) {
            ok = list_replace(c, &q, chi, q.h.nchunks, k.a, ohi + 1, 0, NULL) && chunk_read(c, &q, clo, &k) &&
                 list_replace(c, &q, 0, clo + 1, k.a + olo, k.n - olo, 0, NULL);
        }
    }
    if (ok) ok = list_commit(c, &argv[1], &q);
    if (ok) resp_w_simple(&c->gc.out, "OK");
    else list_rollback(c, &q);
    qchunk_free(&k);
    list_free(&q);
}
