/*
 * quad_read.c: reads of the facts kernel: the sharded cache of compressed
 * lane payloads, gather (ids in any order into caller order) and scan.
 *
 * Gather groups ids by chunk without sorting when the chunks of the request
 * are monotonic (ascending or descending runs), otherwise with a counting sort
 * on the chunk number (qsort for very sparse requests). For every chunk it
 * needs, it takes the lane payloads it needs from the cache (one shard lock
 * per chunk); the misses of the whole request are read together, one read per
 * chunk covering its adjacent missing lanes, through quad_io.c (a pool of
 * blocking threads or io_uring), then cached. Values are decoded straight
 * into the caller's array: whole microblock ranges for consecutive ids,
 * single values (codec_get) otherwise, so a point read never decodes a
 * chunk. Relies on codec and the chunk directory (quad_internal.h).
 */
#include "quad/quad_internal.h"

#include <stdlib.h>

/* ---- cache ---- */

static uint32_t qc_shard_of(uint64_t chunk)
{
    return (uint32_t)((chunk * UINT64_C(0x9E3779B97F4A7C15)) >> 60) & (QC_SHARDS - 1);
}

static uint32_t qc_bucket(uint64_t key, uint32_t mask)
{
    return (uint32_t)((key * UINT64_C(0xD6E8FEB86659FD93)) >> 32) & mask;
}

int qc_init(qc_cache *c, size_t limit)
{
    memset(c, 0, sizeof *c);
    c->shard_limit = limit / QC_SHARDS;
    for (int i = 0; i < QC_SHARDS; i++) {
        qc_shard *s = &c->shard[i];
        pthread_mutex_init(&s->mu, NULL);
        s->mask = 255;
        s->table = calloc(s->mask + 1, sizeof *s->table);
        if (!s->table) return HANU_ERR_NOMEM;
    }
    return 0;
}

static void lru_unlink(qc_shard *s, qc_entry *e)
{
    if (e->prev) e->prev->next = e->next; else s->lru_head = e->next;
    if (e->next) e->next->prev = e->prev; else s->lru_tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(qc_shard *s, qc_entry *e)
{
    e->prev = NULL;
    e->next = s->lru_head;
    if (s->lru_head) s->lru_head->prev = e; else s->lru_tail = e;
    s->lru_head = e;
}

static void hash_remove(qc_shard *s, qc_entry *e)
{
    qc_entry **pp = &s->table[qc_bucket(e->key, s->mask)];
    while (*pp && *pp != e) pp = &(*pp)->hnext;
    if (*pp) *pp = e->hnext;
}

/* Removes e from the shard (lock held); frees it unless referenced. */
static void qc_evict(qc_shard *s, qc_entry *e)
{
    hash_remove(s, e);
    lru_unlink(s, e);
    s->count--;
    s->bytes -= e->len;
    if (e->refs) e->dead = 1; else free(e);
}

static void qc_shrink(qc_shard *s, size_t limit)
{
    qc_entry *e = s->lru_tail;
    while (s->bytes > limit && e) {
        qc_entry *prev = e->prev;
        if (e->refs == 0) qc_evict(s, e);
        e = prev;
    }
}

void qc_drop(qc_cache *c)
{
    for (int i = 0; i < QC_SHARDS; i++) {
        qc_shard *s = &c->shard[i];
        pthread_mutex_lock(&s->mu);
        qc_shrink(s, 0);
        pthread_mutex_unlock(&s->mu);
    }
}

void qc_free(qc_cache *c)
{
    for (int i = 0; i < QC_SHARDS; i++) {
        qc_shard *s = &c->shard[i];
        if (!s->table) continue;
        qc_entry *e = s->lru_head;
        while (e) {
            qc_entry *n = e->next;
            free(e);
            e = n;
        }
        free(s->table);
        s->table = NULL;
        pthread_mutex_destroy(&s->mu);
    }
}

static qc_entry *qc_find_locked(qc_shard *s, uint64_t key)
{
    qc_entry *e = s->table[qc_bucket(key, s->mask)];
    while (e && e->key != key) e = e->hnext;
    return e;
}

static void qc_grow_locked(qc_shard *s)
{
    uint32_t nm = s->mask * 2 + 1;
    qc_entry **nt = calloc((size_t)nm + 1, sizeof *nt);
    if (!nt) return;
    for (uint32_t b = 0; b <= s->mask; b++) {
        qc_entry *e = s->table[b];
        while (e) {
            qc_entry *n = e->hnext;
            uint32_t nb = qc_bucket(e->key, nm);
            e->hnext = nt[nb];
            nt[nb] = e;
            e = n;
        }
    }
    free(s->table);
    s->table = nt;
    s->mask = nm;
}

/* Inserts a copy of data as key and returns it referenced; when key is already
 * cached, returns that entry referenced instead. NULL when out of memory. */
static qc_entry *qc_insert(qc_cache *c, uint64_t chunk, uint64_t key, const void *data, size_t len)
{
    qc_entry *ne = malloc(sizeof *ne + len + CODEC_SLACK);
    if (!ne) return NULL;
    memcpy(ne->data, data, len);
    memset(ne->data + len, 0, CODEC_SLACK);
    ne->key = key;
    ne->len = (uint32_t)len;
    ne->refs = 1;
    ne->dead = 0;
    qc_shard *s = &c->shard[qc_shard_of(chunk)];
    pthread_mutex_lock(&s->mu);
    qc_entry *e = qc_find_locked(s, key);
    if (e) {
        e->refs++;
        pthread_mutex_unlock(&s->mu);
        free(ne);
        return e;
    }
    if (s->count >= s->mask) qc_grow_locked(s);
    uint32_t b = qc_bucket(key, s->mask);
    ne->hnext = s->table[b];
    s->table[b] = ne;
    lru_push_front(s, ne);
    s->count++;
    s->bytes += len;
    qc_shrink(s, c->shard_limit);
    pthread_mutex_unlock(&s->mu);
    return ne;
}

/* ---- retirement lookups ---- */

uint64_t quad_retire_epoch(const quad_retset *r, uint32_t slot)
{
    if (r->dense) return r->dense[slot];
    uint32_t lo = 0, hi = r->count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (r->slots[mid] < slot) lo = mid + 1; else hi = mid;
    }
    return lo < r->count && r->slots[lo] == slot ? r->epochs[lo] : 0;
}

/* ---- per-thread scratch (grow-only, reused across calls) ---- */

typedef struct grun {
    uint64_t chunk;
    uint32_t start, len;     /* into perm (sorted) or into ids (identity) */
    uint8_t consec;          /* identity order, ids consecutive ascending */
    uint8_t valid;           /* chunk exists at the snapshot */
    uint8_t missing;         /* lanes to read from the file */
    qc_entry *ent[4];
    size_t rbuf_off;         /* where the missing lanes were read */
    uint32_t rlane_lo;       /* first lane of that read */
} grun;

typedef struct gscratch {
    uint32_t *perm; size_t perm_cap;
    grun *runs; size_t runs_cap;
    uint32_t *hist; size_t hist_cap;
    uint64_t *keys; size_t keys_cap;
    uint8_t *rbuf; size_t rbuf_cap;
    quad_ioreq *reqs; size_t reqs_cap;
    quad_id *ids; size_t ids_cap;
} gscratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local gscratch *tls_scratch;

static void scratch_free(void *p)
{
    gscratch *g = p;
    if (!g) return;
    free(g->perm); free(g->runs); free(g->hist); free(g->keys);
    free(g->rbuf); free(g->reqs); free(g->ids);
    free(g);
}

static void scratch_key_init(void) { (void)pthread_key_create(&scratch_key, scratch_free); }

static gscratch *scratch_get(void)
{
    if (tls_scratch) return tls_scratch;
    pthread_once(&scratch_once, scratch_key_init);
    gscratch *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    (void)pthread_setspecific(scratch_key, g);
    tls_scratch = g;
    return g;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (*cap >= need) return 0;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return HANU_ERR_NOMEM;
    *p = np;
    *cap = nc;
    return 0;
}
#define GROW(g, field, need) grow((void **)&(g)->field, &(g)->field##_cap, (need), sizeof *(g)->field)

static int push_run(gscratch *g, size_t *nruns, uint64_t chunk, size_t start, size_t len, int consec)
{
    if (GROW(g, runs, *nruns + 1)) return HANU_ERR_NOMEM;
    grun *r = &g->runs[(*nruns)++];
    memset(r, 0, sizeof *r);
    r->chunk = chunk;
    r->start = (uint32_t)start;
    r->len = (uint32_t)len;
    r->consec = (uint8_t)consec;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Groups ids[0..n) (n < 2^24) by chunk into g->runs; *use_perm tells whether
 * runs index g->perm (sorted) or ids directly. */
static int group_ids(gscratch *g, const quad_id *ids, size_t n, size_t *nruns, int *use_perm)
{
    *nruns = 0;
    *use_perm = 0;
    uint64_t prev = QUAD_ID_CHUNK(ids[0]), lo = prev, hi = prev;
    size_t start = 0;
    int consec = 1, dir = 0, mono = 1;
    for (size_t i = 1; i < n; i++) {
        uint64_t c = QUAD_ID_CHUNK(ids[i]);
        if (c != prev) {
            if (mono) {
                int d = c > prev ? 1 : -1;
                if (dir == 0) dir = d; else if (d != dir) mono = 0;
                if (mono && push_run(g, nruns, prev, start, i - start, consec)) return HANU_ERR_NOMEM;
            }
            lo = c < lo ? c : lo;
            hi = c > hi ? c : hi;
            start = i;
            consec = 1;
            prev = c;
        } else if (ids[i] != ids[i - 1] + 1) {
            consec = 0;
        }
    }
    if (mono) return push_run(g, nruns, prev, start, n - start, consec);

    /* not monotonic: sort positions by chunk */
    *nruns = 0;
    *use_perm = 1;
    if (GROW(g, perm, n)) return HANU_ERR_NOMEM;
    uint64_t range = hi - lo + 1;
    if (range <= 4 * (uint64_t)n + 65536) {
        if (GROW(g, hist, range + 1)) return HANU_ERR_NOMEM;
        memset(g->hist, 0, (range + 1) * sizeof *g->hist);
        for (size_t i = 0; i < n; i++) g->hist[QUAD_ID_CHUNK(ids[i]) - lo + 1]++;
        for (uint64_t k = 1; k <= range; k++) g->hist[k] += g->hist[k - 1];
        for (size_t i = 0; i < n; i++) g->perm[g->hist[QUAD_ID_CHUNK(ids[i]) - lo]++] = (uint32_t)i;
    } else {
        if (GROW(g, keys, n)) return HANU_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) g->keys[i] = (QUAD_ID_CHUNK(ids[i]) << 24) | i;
        qsort(g->keys, n, sizeof *g->keys, cmp_u64);
        for (size_t i = 0; i < n; i++) g->perm[i] = (uint32_t)(g->keys[i] & 0xFFFFFF);
    }
    start = 0;
    prev = QUAD_ID_CHUNK(ids[g->perm[0]]);
    for (size_t k = 1; k < n; k++) {
        uint64_t c = QUAD_ID_CHUNK(ids[g->perm[k]]);
        if (c != prev) {
            if (push_run(g, nruns, prev, start, k - start, 0)) return HANU_ERR_NOMEM;
            start = k;
            prev = c;
        }
    }
    return push_run(g, nruns, prev, start, n - start, 0);
}

static inline uint32_t lane_len(const quad_chunk *ch, unsigned l)
{
    return ch->lane_off[l + 1] - ch->lane_off[l];
}

/* Decodes lane l of one run into out. */
static void run_decode_lane(const quad *q, const quad_chunk *ch, const grun *r, unsigned l,
                            const uint8_t *lp, const quad_id *ids, const uint32_t *perm,
                            quad_fact *out)
{
    const quad_mb *mbs = &ch->mb[l * ch->nmb];
    const uint32_t base_off = ch->lane_off[l], mbmask = q->mb_rows - 1, shift = q->mb_shift;
    if (r->consec) {
        uint32_t s0 = QUAD_ID_SLOT(ids[r->start]), s1 = s0 + r->len;
        for (uint32_t m = s0 >> shift; m < ch->nmb && (m << shift) < s1; m++) {
            uint32_t ms = m << shift, me = ms + q->mb_rows;
            uint32_t a = s0 > ms ? s0 : ms, b = s1 < me ? s1 : me;
            codec_desc d = { mbs[m].code, mbs[m].base };
            codec_unpack(d, lp + (mbs[m].off - base_off), a - ms, b - a,
                         &out[r->start + (a - s0)].lane[l], 4);
        }
        return;
    }
    /* one value per id; the payload word of the id PF ahead is prefetched
     * (measured: random 4096-id gathers are bound by L3 latency here) */
    enum { PF = 16 };
    for (uint32_t k = 0; k < r->len; k++) {
        if (k + PF < r->len) {
            uint32_t pp = perm ? perm[r->start + k + PF] : r->start + k + PF;
            uint32_t ps = QUAD_ID_SLOT(ids[pp]);
            if (ps < ch->rows) {
                const quad_mb *pm = &mbs[ps >> shift];
                __builtin_prefetch(lp + (pm->off - base_off) + (((size_t)(ps & mbmask) * (pm->code & 127)) >> 3));
            }
        }
        uint32_t pos = perm ? perm[r->start + k] : r->start + k;
        uint32_t slot = QUAD_ID_SLOT(ids[pos]);
        if (slot >= ch->rows) continue;
        const quad_mb *mb = &mbs[slot >> shift];
        codec_desc d = { mb->code, mb->base };
        out[pos].lane[l] = codec_get(d, lp + (mb->off - base_off), slot & mbmask);
    }
}

/* Marks visibility of one run's ids; returns the number not visible. */
static size_t run_visibility(const quad_chunk *ch, const grun *r, uint64_t snap,
                             const quad_id *ids, const uint32_t *perm, unsigned mask,
                             quad_fact *out, uint8_t *present)
{
    size_t missing = 0;
    for (uint32_t k = 0; k < r->len; k++) {
        uint32_t pos = perm ? perm[r->start + k] : r->start + k;
        int vis = r->valid;
        if (vis) {
            uint32_t slot = QUAD_ID_SLOT(ids[pos]);
            if (slot >= ch->rows) vis = 0;
            else if (ch->ret) {
                uint64_t e = quad_retire_epoch(ch->ret, slot);
                vis = e == 0 || e > snap;
            }
        }
        if (present) present[pos] = (uint8_t)vis;
        if (!vis) {
            missing++;
            for (unsigned l = 0; l < 4; l++)
                if (mask & (1u << l)) out[pos].lane[l] = 0;
        }
    }
    return missing;
}

static int gather_block(quad *q, gscratch *g, uint64_t snap, uint64_t nch, const quad_id *ids,
                        size_t n, unsigned mask, quad_fact *out, uint8_t *present,
                        size_t *not_visible)
{
    size_t nruns;
    int use_perm;
    int rc = group_ids(g, ids, n, &nruns, &use_perm);
    if (rc) return rc;
    const uint32_t *perm = use_perm ? g->perm : NULL;

    /* pass 1: cache lookups, one shard lock per chunk */
    size_t nmiss = 0, rbytes = 0;
    for (size_t i = 0; i < nruns; i++) {
        grun *r = &g->runs[i];
        r->valid = r->chunk < nch && quad_chunk_at(q, r->chunk)->epoch <= snap;
        if (!r->valid) continue;
        if (r->consec && QUAD_ID_SLOT(ids[r->start]) + (uint64_t)r->len > quad_chunk_at(q, r->chunk)->rows)
            r->consec = 0;
        const quad_chunk *ch = quad_chunk_at(q, r->chunk);
        unsigned need = 0;
        for (unsigned l = 0; l < 4; l++)
            if ((mask & (1u << l)) && lane_len(ch, l)) need |= 1u << l;
        if (!need) continue;
        qc_shard *s = &q->cache.shard[qc_shard_of(r->chunk)];
        pthread_mutex_lock(&s->mu);
        for (unsigned l = 0; l < 4; l++) {
            if (!(need & (1u << l))) continue;
            qc_entry *e = qc_find_locked(s, (r->chunk << 2) | l);
            if (e) {
                e->refs++;
                s->hits++;
                if (s->lru_head != e) { lru_unlink(s, e); lru_push_front(s, e); }
                r->ent[l] = e;
            } else {
                s->misses++;
                r->missing |= (uint8_t)(1u << l);
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (r->missing) {
            unsigned lo = (unsigned)__builtin_ctz(r->missing), hi = 31u - (unsigned)__builtin_clz(r->missing);
            r->rlane_lo = lo;
            r->rbuf_off = rbytes;
            rbytes += ch->lane_off[hi + 1] - ch->lane_off[lo] + CODEC_SLACK;
            nmiss++;
        }
    }

    /* pass 2: read every miss of the request together, then cache it */
    if (nmiss) {
        if (GROW(g, rbuf, rbytes) || GROW(g, reqs, nmiss)) { rc = HANU_ERR_NOMEM; goto release; }
        size_t k = 0;
        for (size_t i = 0; i < nruns; i++) {
            grun *r = &g->runs[i];
            if (!r->valid || !r->missing) continue;
            const quad_chunk *ch = quad_chunk_at(q, r->chunk);
            unsigned hi = 31u - (unsigned)__builtin_clz(r->missing);
            quad_ioreq *rq = &g->reqs[k++];
            rq->buf = g->rbuf + r->rbuf_off;
            rq->len = ch->lane_off[hi + 1] - ch->lane_off[r->rlane_lo];
            rq->off = ch->off + ch->lane_off[r->rlane_lo];
            rq->rc = 0;
        }
        rc = quad_io_read(q, g->reqs, nmiss);
        if (rc) goto release;
        for (size_t i = 0; i < nruns; i++) {
            grun *r = &g->runs[i];
            if (!r->valid || !r->missing) continue;
            const quad_chunk *ch = quad_chunk_at(q, r->chunk);
            const uint8_t *base = g->rbuf + r->rbuf_off - ch->lane_off[r->rlane_lo];
            for (unsigned l = 0; l < 4; l++) {
                if (!(r->missing & (1u << l))) continue;
                r->ent[l] = qc_insert(&q->cache, r->chunk, (r->chunk << 2) | l,
                                      base + ch->lane_off[l], lane_len(ch, l));
                if (!r->ent[l]) { rc = HANU_ERR_NOMEM; goto release; }
            }
        }
    }

    /* pass 3: decode into caller order */
    for (size_t i = 0; i < nruns; i++) {
        grun *r = &g->runs[i];
        const quad_chunk *ch = r->valid ? quad_chunk_at(q, r->chunk) : NULL;
        if (ch) {
            for (unsigned l = 0; l < 4; l++) {
                if (!(mask & (1u << l))) continue;
                run_decode_lane(q, ch, r, l, r->ent[l] ? r->ent[l]->data : NULL, ids, perm, out);
            }
        }
        if (!ch || ch->ret || !r->consec)
            *not_visible += run_visibility(ch, r, snap, ids, perm, mask, out, present);
        else if (present)
            memset(present + r->start, 1, r->len);   /* consecutive, in range, none retired */
    }

release:
    for (size_t i = 0; i < nruns; i++) {
        grun *r = &g->runs[i];
        if (!r->ent[0] && !r->ent[1] && !r->ent[2] && !r->ent[3]) continue;
        qc_shard *s = &q->cache.shard[qc_shard_of(r->chunk)];
        pthread_mutex_lock(&s->mu);
        for (unsigned l = 0; l < 4; l++) {
            qc_entry *e = r->ent[l];
            if (!e) continue;
            r->ent[l] = NULL;
            if (--e->refs == 0 && e->dead) free(e);
        }
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

#define GATHER_BLOCK (1u << 16)

static int gather_at(quad *q, uint64_t snap, const quad_id *ids, size_t n, unsigned mask,
                     quad_fact *out, uint8_t *present, size_t *not_visible)
{
    gscratch *g = scratch_get();
    if (!g) return HANU_ERR_NOMEM;
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_acquire);
    int locked = atomic_load_explicit(&q->retired, memory_order_acquire) != 0;
    if (locked) pthread_rwlock_rdlock(&q->rlock);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i += GATHER_BLOCK) {
        size_t k = n - i < GATHER_BLOCK ? n - i : GATHER_BLOCK;
        rc = gather_block(q, g, snap, nch, ids + i, k, mask, out + i, present ? present + i : NULL,
                          not_visible);
    }
    if (locked) pthread_rwlock_unlock(&q->rlock);
    return rc;
}

static uint64_t resolve_snapshot(quad *q, uint64_t snapshot)
{
    uint64_t cur = atomic_load_explicit(&q->epoch, memory_order_acquire);
    return snapshot == 0 || snapshot > cur ? cur : snapshot;
}

int quad_gather(quad *q, uint64_t snapshot, const quad_id *ids, size_t n,
                unsigned lane_mask, quad_fact *out, uint8_t *present)
{
    if (!q || (n && (!ids || !out)) || lane_mask == 0 || lane_mask > QUAD_LANES_ALL)
        return HANU_ERR_INVALID;
    if (n == 0) return 0;
    uint64_t snap = resolve_snapshot(q, snapshot);
    size_t not_visible = 0;
    int rc = gather_at(q, snap, ids, n, lane_mask, out, present, &not_visible);
    if (rc) return rc;
    return (!present && not_visible) ? HANU_ERR_NOT_FOUND : 0;
}

int quad_scan(quad *q, uint64_t snapshot, quad_id from, unsigned lane_mask,
              quad_fact *out, quad_id *ids_out, size_t cap, size_t *n_out, quad_id *next)
{
    if (!q || !out || !n_out || !next || lane_mask == 0 || lane_mask > QUAD_LANES_ALL)
        return HANU_ERR_INVALID;
    *n_out = 0;
    *next = from;
    if (cap == 0) return 0;
    gscratch *g = scratch_get();
    if (!g) return HANU_ERR_NOMEM;
    quad_id *ids = ids_out;
    if (!ids) {
        if (GROW(g, ids, cap)) return HANU_ERR_NOMEM;
        ids = g->ids;
    }
    uint64_t snap = resolve_snapshot(q, snapshot);
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_acquire);
    uint64_t c = QUAD_ID_CHUNK(from);
    uint32_t s = QUAD_ID_SLOT(from);
    size_t cnt = 0;
    int locked = atomic_load_explicit(&q->retired, memory_order_acquire) != 0;
    if (locked) pthread_rwlock_rdlock(&q->rlock);
    while (c < nch && cnt < cap) {
        const quad_chunk *ch = quad_chunk_at(q, c);
        if (ch->epoch > snap) break;          /* chunks are appended in epoch order */
        for (; s < ch->rows && cnt < cap; s++) {
            if (ch->ret) {
                uint64_t e = quad_retire_epoch(ch->ret, s);
                if (e != 0 && e <= snap) continue;
            }
            ids[cnt++] = QUAD_ID(c, s);
        }
        if (s >= ch->rows) { c++; s = 0; }
    }
    if (locked) pthread_rwlock_unlock(&q->rlock);
    *next = QUAD_ID(c, s);
    if (cnt == 0) return 0;
    size_t not_visible = 0;
    int rc = gather_at(q, snap, ids, cnt, lane_mask, out, NULL, &not_visible);
    if (rc) return rc;
    *n_out = cnt;
    return 0;
}
