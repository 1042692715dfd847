/*
 * quad_read.c: reads of the facts kernel: the sharded cache of compressed
 * lane payloads, gather (ids in any order into caller order) and scan.
 *
 * Gather groups ids by chunk without sorting when the chunks of the request
 * are monotonic (ascending or descending runs), otherwise with a counting sort
 * on the chunk number (qsort for very sparse requests). Pass 1 takes the lane
 * payloads it needs from the cache without locks, inside a reader section
 * (quad_internal.h, qc_cache). Pass 2 reads all misses of the request together through quad_io.c:
 * one read per chunk covering its adjacent missing lanes (then cached), or,
 * for a chunk with few requested ids, one read per run of needed microblocks
 * (not cached). Pass 3 decodes straight into the caller's array: microblock
 * ranges for consecutive ids, otherwise one value per id and lane through a
 * task list run with prefetch, so a point read never decodes a chunk.
 * Relies on codec and the chunk directory (quad_internal.h).
 */
#include "quad/quad_internal.h"

#include <sched.h>
#include <stdlib.h>

/* ---- cache ---- */

/* Runs of 16 consecutive chunks share a shard, so a miss-heavy gather that
 * visits chunks in order finds the shard it just used. */
static uint32_t qc_shard_of(uint64_t chunk)
{
    return (uint32_t)(chunk >> 4) & (QC_SHARDS - 1);
}

int qc_init(qc_cache *c, size_t limit)
{
    memset(c, 0, sizeof *c);
    c->shard_limit = limit / QC_SHARDS;
    atomic_init(&c->gen, 1);
    for (int i = 0; i < QC_SHARDS; i++) pthread_mutex_init(&c->shard[i].mu, NULL);
    return 0;
}

/* ---- reader sections (epoch-based reclamation) ---- */

static _Atomic unsigned reader_seq;
/* Every gather touches the two hot thread-locals, so they use the
 * initial-exec model: one %fs-relative load, also in the shared library built
 * with -fPIC (where the default would call __tls_get_addr). They take 12 bytes
 * of the static TLS that glibc keeps spare for libraries loaded with dlopen. */
#define QUAD_HOT_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static QUAD_HOT_TLS unsigned tls_reader_slot = UINT32_MAX;

/* Opens a reader section: entries reachable now stay allocated until
 * qc_read_end. Never fails; spins only with more than QC_READERS sections
 * open at once. */
qc_reader *qc_read_begin(qc_cache *c)
{
    if (tls_reader_slot == UINT32_MAX)
        tls_reader_slot = atomic_fetch_add_explicit(&reader_seq, 1, memory_order_relaxed) % QC_READERS;
    uint64_t g = atomic_load(&c->gen);
    for (unsigned k = 0;; k++) {
        qc_reader *r = &c->readers[(tls_reader_slot + k) % QC_READERS];
        uint64_t idle = 0;
        /* seq_cst: the slot is visible before any entry pointer is loaded */
        if (atomic_compare_exchange_strong(&r->gen, &idle, g)) return r;
        if (k && k % QC_READERS == 0) sched_yield();
    }
}

void qc_read_end(qc_reader *r)
{
    atomic_store_explicit(&r->gen, 0, memory_order_release);
}

/* The oldest generation a reader section is open at (UINT64_MAX: none). */
static uint64_t qc_oldest_reader(qc_cache *c)
{
    uint64_t m = UINT64_MAX;
    for (unsigned i = 0; i < QC_READERS; i++) {
        uint64_t g = atomic_load(&c->readers[i].gen);
        if (g && g < m) m = g;
    }
    return m;
}

/* Frees the shard's evicted entries no open reader section can hold (lock held). */
static void qc_reclaim(qc_cache *c, qc_shard *s)
{
    if (!s->dead) return;
    uint64_t oldest = qc_oldest_reader(c);
    qc_entry **pp = &s->dead;
    while (*pp) {
        qc_entry *e = *pp;
        if (e->dead_gen < oldest) {
            *pp = e->next_dead;
            s->dead_bytes -= e->len;
            atomic_fetch_sub_explicit(&c->dead_bytes, e->len, memory_order_relaxed);
            free(e);
        } else {
            pp = &e->next_dead;
        }
    }
}

/* Unlinks e from its chunk and its shard (lock held); it is freed by
 * qc_reclaim once the reader sections that might hold it have ended. */
static void qc_evict(qc_cache *c, qc_shard *s, qc_entry *e)
{
    atomic_store(&e->chunk->cached[e->lane], NULL);   /* seq_cst: before the generation moves */
    qc_entry *last = s->arr[--s->count];
    s->arr[e->idx] = last;
    last->idx = e->idx;
    s->bytes -= e->len;
    /* readers that entered at a generation <= dead_gen may hold e; later ones
     * load the pointer after this unlink and cannot */
    e->dead_gen = atomic_fetch_add(&c->gen, 1);
    e->next_dead = s->dead;
    s->dead = e;
    s->dead_bytes += e->len;
    atomic_fetch_add_explicit(&c->dead_bytes, e->len, memory_order_relaxed);
}

/* A shard frees its evicted entries only when it evicts again, so with a
 * sweep that moves from shard to shard they add up to a multiple of
 * cache_bytes; a gather calls this between its blocks once they pass half of it. */
void qc_reclaim_all(qc_cache *c)
{
    for (int i = 0; i < QC_SHARDS; i++) {
        qc_shard *s = &c->shard[i];
        pthread_mutex_lock(&s->mu);
        qc_reclaim(c, s);
        pthread_mutex_unlock(&s->mu);
    }
}

/* Evicts every entry of ch (the cleaner, before it swaps the chunk's payload):
 * they are freed once the reader sections that may hold them have ended. */
void qc_forget_chunk(qc_cache *c, uint64_t chunk_no, quad_chunk *ch)
{
    qc_shard *s = &c->shard[qc_shard_of(chunk_no)];
    pthread_mutex_lock(&s->mu);
    for (unsigned l = 0; l <= QC_ROWS; l++) {
        qc_entry *e = atomic_load(&ch->cached[l]);
        if (e) qc_evict(c, s, e);
    }
    atomic_store_explicit(&ch->cused, 0, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

/* Waits until every reader section open at the call has ended (sections
 * opened later see the generation after the bump). */
void qc_grace(qc_cache *c)
{
    uint64_t g = atomic_fetch_add(&c->gen, 1) + 1;
    while (qc_oldest_reader(c) < g) sched_yield();
}

/* CLOCK: evicts entries not used since the hand last passed until the shard
 * is within limit (everything when limit is 0), then frees what it can. */
static void qc_shrink(qc_cache *c, qc_shard *s, size_t limit)
{
    uint32_t steps = 2 * s->count + 2;
    while (s->bytes > limit && s->count && steps--) {
        if (s->hand >= s->count) s->hand = 0;
        qc_entry *e = s->arr[s->hand];
        quad_chunk *ch = e->chunk;
        uint8_t bit = (uint8_t)(1u << e->lane);
        if (!(atomic_load_explicit(&ch->cused, memory_order_relaxed) & bit) || limit == 0) {
            qc_evict(c, s, e);   /* the last entry moved into the hand's slot */
        } else {
            atomic_fetch_and_explicit(&ch->cused, (uint8_t)~bit, memory_order_relaxed);
            s->hand++;
        }
    }
    qc_reclaim(c, s);
}

void qc_drop(qc_cache *c)
{
    for (int i = 0; i < QC_SHARDS; i++) {
        qc_shard *s = &c->shard[i];
        pthread_mutex_lock(&s->mu);
        qc_shrink(c, s, 0);
        pthread_mutex_unlock(&s->mu);
    }
}

/* At close: no reader is left. */
void qc_free(qc_cache *c)
{
    for (int i = 0; i < QC_SHARDS; i++) {
        qc_shard *s = &c->shard[i];
        for (uint32_t k = 0; k < s->count; k++) free(s->arr[k]);
        while (s->dead) {
            qc_entry *e = s->dead;
            s->dead = e->next_dead;
            free(e);
        }
        free(s->arr);
        s->arr = NULL;
        s->count = 0;
        pthread_mutex_destroy(&s->mu);
    }
}

/* Caches ne (allocated by the caller with CODEC_SLACK bytes after its len)
 * as entry `lane` (0-3 or QC_ROWS) of ch and returns it, valid until the
 * caller's reader section ends; when another thread cached it first, frees
 * ne and returns that entry. When the shard cannot grow, returns ne uncached
 * and sets *detached: the caller frees it after use. */
static qc_entry *qc_insert_entry(qc_cache *c, uint64_t chunk_no, quad_chunk *ch, unsigned lane,
                                 qc_entry *ne, int *detached)
{
    *detached = 0;
    ne->chunk = ch;
    ne->lane = lane;
    ne->next_dead = NULL;
    qc_shard *s = &c->shard[qc_shard_of(chunk_no)];
    pthread_mutex_lock(&s->mu);
    qc_entry *e = atomic_load(&ch->cached[lane]);
    if (e) {
        pthread_mutex_unlock(&s->mu);
        free(ne);
        return e;
    }
    if (s->count == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 256;
        qc_entry **na = realloc(s->arr, nc * sizeof *na);
        if (!na) {
            pthread_mutex_unlock(&s->mu);
            *detached = 1;
            return ne;
        }
        s->arr = na;
        s->cap = nc;
    }
    ne->idx = s->count;
    s->arr[s->count++] = ne;
    atomic_store(&ch->cached[lane], ne);
    atomic_fetch_or_explicit(&ch->cused, (uint8_t)(1u << lane), memory_order_relaxed);
    s->bytes += ne->len;
    qc_shrink(c, s, c->shard_limit);
    pthread_mutex_unlock(&s->mu);
    return ne;
}

/* qc_insert_entry with a copy of data as the payload of lane `lane`; NULL
 * when out of memory. */
static qc_entry *qc_insert(qc_cache *c, uint64_t chunk_no, quad_chunk *ch, unsigned lane,
                           const void *data, size_t len, int *detached)
{
    qc_entry *ne = malloc(sizeof *ne + len + CODEC_SLACK);
    if (!ne) return NULL;
    memcpy(ne->data, data, len);
    memset(ne->data + len, 0, CODEC_SLACK);
    ne->len = (uint32_t)len;
    return qc_insert_entry(c, chunk_no, ch, lane, ne, detached);
}

/* ---- retirement lookups ---- */

uint64_t quad_retire_epoch(const quad_retset *r, uint32_t slot)
{
    if (quad_retset_is_dense(r)) return quad_dense_epoch(r, slot);
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
    uint8_t detached;        /* entries (bit per ent[]) not cached, freed after use */
    uint8_t sparse;          /* missing lanes read by microblock, not cached */
    uint8_t vis_done;        /* visibility settled while listing tasks */
    qc_entry *ent[5];        /* lane payloads, or ent[QC_ROWS] alone: the row form */
    size_t rbuf_off;         /* where the missing lanes were read */
    uint32_t rlane_lo;       /* first lane of that read */
} grun;

/* One value to extract for a scattered id: the payload word holding it, its
 * shift, and where it goes. */
typedef struct gtask {
    const uint8_t *p;
    uint64_t base;
    uint64_t *dst;
    uint8_t code, sh;
} gtask;

typedef struct gscratch {
    uint32_t *perm; size_t perm_cap;
    grun *runs; size_t runs_cap;
    uint32_t *hist; size_t hist_cap;
    uint64_t *keys; size_t keys_cap;
    uint8_t *rbuf; size_t rbuf_cap;
    quad_ioreq *reqs; size_t reqs_cap;
    quad_id *ids; size_t ids_cap;
    struct gtask *tasks; size_t tasks_cap;
    struct rtask *rtasks; size_t rtasks_cap;
    quad_fact *rowtmp;       /* ROW_SLICE rows decoded while building a row form */
    int any_detached;        /* some run holds an uncached entry to free */
} gscratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static QUAD_HOT_TLS gscratch *tls_scratch;

static void scratch_free(void *p)
{
    gscratch *g = p;
    if (!g) return;
    free(g->perm); free(g->runs); free(g->hist); free(g->keys);
    free(g->rbuf); free(g->reqs); free(g->ids); free(g->tasks);
    free(g->rtasks); free(g->rowtmp);
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
    if (need > SIZE_MAX / 2 / elem) return HANU_ERR_NOMEM;   /* nc * 2 * elem must not wrap */
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

/* A microblock's payload within its lane's payload; NULL for a lane without
 * payload (all constant: nothing is read, and NULL + 0 is undefined). */
static inline const uint8_t *payload_at(const uint8_t *lane, uint32_t off)
{
    return lane ? lane + off : NULL;
}

/* Decodes lane l of a run of consecutive ids (r->consec) into out: whole
 * microblock ranges with the unrolled unpackers. */
static void run_decode_range(const quad *q, const quad_chunk *ch, const grun *r, unsigned l,
                             const uint8_t *lp, const quad_id *ids, quad_fact *out)
{
    const uint32_t base_off = ch->lane_off[l], shift = q->mb_shift;
    uint32_t s0 = QUAD_ID_SLOT(ids[r->start]), s1 = s0 + r->len;
    for (uint32_t m = s0 >> shift; m < ch->nmb && (m << shift) < s1; m++) {
        uint32_t ms = m << shift, me = ms + q->mb_rows;
        uint32_t a = s0 > ms ? s0 : ms, b = s1 < me ? s1 : me;
        const quad_mb *mb = quad_mb_at(ch, l, m);
        codec_desc d = { mb->code, mb->base };
        codec_unpack(d, payload_at(lp, mb->off - base_off), a - ms, b - a,
                     &out[r->start + (a - s0)].lane[l], 4);
    }
}

/* Visibility of a scattered id settled while its tasks are listed, for a
 * run whose chunk is visible and has no retirement to consult: only the slot
 * decides. NULL: settled later by run_visibility. */
typedef struct gvis {
    uint8_t *present;
    size_t *not_visible;
    unsigned mask;
} gvis;

static inline int slot_visible(const gvis *v, const quad_chunk *ch, uint32_t slot, uint32_t pos,
                               quad_fact *out)
{
    int ok = slot < ch->rows;
    if (v) {
        if (v->present) v->present[pos] = (uint8_t)ok;
        if (!ok) {
            (*v->not_visible)++;
            for (unsigned l = 0; l < 4; l++)
                if (v->mask & (1u << l)) out[pos].lane[l] = 0;
        }
    }
    return ok;
}

/* Lists the values to extract for a run of scattered ids (constants are
 * written at once). The tasks of the whole request are run afterwards with a
 * prefetch ahead, because a random request has only a few ids per chunk and
 * is bound by cache misses on the payloads (measured). */
static gtask *run_point_tasks(const quad *q, const quad_chunk *ch, const grun *r, unsigned mask,
                              const uint8_t *const lp[4], const quad_id *ids,
                              const uint32_t *perm, quad_fact *out, const gvis *v, gtask *t)
{
    const uint32_t mbmask = q->mb_rows - 1, shift = q->mb_shift;
    for (uint32_t k = 0; k < r->len; k++) {
        uint32_t pos = perm ? perm[r->start + k] : r->start + k;
        uint32_t slot = QUAD_ID_SLOT(ids[pos]);
        if (!slot_visible(v, ch, slot, pos, out)) continue;
        uint32_t row = quad_prow(ch, slot);
        uint32_t m = row >> shift, sm = row & mbmask;
        for (unsigned l = 0; l < 4; l++) {
            if (!(mask & (1u << l))) continue;
            const quad_mb *mb = quad_mb_at(ch, l, m);
            if (mb->code == CODEC_CONST) {
                out[pos].lane[l] = mb->base;
                continue;
            }
            size_t bit = (size_t)sm * mb->code;
            t->p = lp[l] + (mb->off - ch->lane_off[l]) + (bit >> 3);
            t->base = mb->base;
            t->dst = &out[pos].lane[l];
            t->code = mb->code;
            t->sh = (uint8_t)(bit & 7);
            t++;
        }
    }
    return t;
}

static void run_tasks(const gtask *t, size_t n)
{
    enum { PF = 16 };
    for (size_t k = 0; k < n; k++) {
        if (k + PF < n) __builtin_prefetch(t[k + PF].p);
        uint64_t w = hanu_get_u64(t[k].p);
        if (t[k].code == CODEC_RAW) *t[k].dst = w;
        else *t[k].dst = t[k].base + ((w >> t[k].sh) & ((UINT64_C(1) << t[k].code) - 1));
    }
}

/* ---- row form ----
 * Scattered reads of all lanes cost one cache miss per lane in the
 * lane-major payloads. For a chunk read at random more than once, the cache
 * also keeps a row form: each row's lanes side by side, each lane as an
 * offset from the chunk's smallest value in as few whole bytes as its range
 * needs (constant lanes take none). Still compressed (6 bytes a structured
 * fact against 4.3 in lane form, 32 for entropy), and a point read of every
 * lane touches one cache line. Built from cached lanes only, never on a cold
 * read, and evicted like any entry. */
typedef struct rtask {
    const uint8_t *p;          /* the row */
    const qrow_form *f;
    uint64_t *dst;             /* out[pos].lane */
} rtask;

#define ROW_SLICE 256u

/* The row layout of ch: per lane, the lowest value any microblock may hold
 * and as many whole bytes as the lane's range needs. */
void quad_row_layout(const quad_chunk *ch, qrow_form *f)
{
    memset(f, 0, sizeof *f);
    for (unsigned l = 0; l < 4; l++) {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t m = 0; m < ch->nmb; m++) {
            const quad_mb *mb = quad_mb_at(ch, l, m);
            uint64_t top = mb->base;
            if (mb->code == CODEC_RAW) { lo = 0; hi = UINT64_MAX; break; }
            if (mb->code != CODEC_CONST) {
                uint64_t span = (UINT64_C(1) << mb->code) - 1;
                top = mb->base > UINT64_MAX - span ? UINT64_MAX : mb->base + span;
            }
            if (mb->base < lo) lo = mb->base;
            if (top > hi) hi = top;
        }
        uint64_t range = hi - lo;
        unsigned bytes = range ? (unsigned)(64 - __builtin_clzll(range) + 7) / 8 : 0;
        f->base[l] = lo;
        f->mask[l] = bytes == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * bytes)) - 1;
        f->off[l] = bytes ? f->row_bytes : 0;
        f->row_bytes += bytes;
    }
}

/* Builds the row form of ch from the payloads of its lanes (lp[l], NULL for
 * a lane without payload); NULL when out of memory. */
static qc_entry *row_form_build(const quad *q, gscratch *g, const quad_chunk *ch, const uint8_t *const lp[4])
{
    qrow_form f;
    quad_row_layout(ch, &f);
    const uint32_t prows = quad_prows(ch);
    size_t body = (size_t)prows * f.row_bytes;
    size_t len = sizeof f + body;
    qc_entry *e = malloc(sizeof *e + len + CODEC_SLACK);
    if (!e) return NULL;
    e->len = (uint32_t)len;
    memcpy(e->data, &f, sizeof f);
    uint8_t *rows = e->data + sizeof f;
    memset(rows + body, 0, CODEC_SLACK);
    if (!g->rowtmp && !(g->rowtmp = malloc(ROW_SLICE * sizeof *g->rowtmp))) { free(e); return NULL; }
    /* decode ROW_SLICE rows at a time (never a whole microblock, which may be
     * as large as the chunk), then lay them out; each 8-byte store spills
     * into bytes written after it, the last into the slack */
    for (uint32_t r0 = 0; r0 < prows; r0 += ROW_SLICE) {
        uint32_t n = prows - r0 < ROW_SLICE ? prows - r0 : ROW_SLICE;
        for (unsigned l = 0; l < 4; l++) {
            if (!f.mask[l]) continue;
            for (uint32_t done = 0; done < n;) {
                uint32_t row = r0 + done, m = row >> q->mb_shift, in_mb = row & (q->mb_rows - 1);
                uint32_t k = q->mb_rows - in_mb < n - done ? q->mb_rows - in_mb : n - done;
                const quad_mb *mb = quad_mb_at(ch, l, m);
                codec_desc d = { mb->code, mb->base };
                codec_unpack(d, payload_at(lp[l], mb->off - ch->lane_off[l]), in_mb, k,
                             &g->rowtmp[done].lane[l], 4);
                done += k;
            }
        }
        uint8_t *dst = rows + (size_t)r0 * f.row_bytes;
        for (uint32_t i = 0; i < n; i++, dst += f.row_bytes)
            for (unsigned l = 0; l < 4; l++)
                if (f.mask[l]) hanu_put_u64(dst + f.off[l], g->rowtmp[i].lane[l] - f.base[l]);
    }
    return e;
}

/* Lists one task per id of a scattered run read through the row form. */
static rtask *run_row_tasks(const quad_chunk *ch, const grun *r, const quad_id *ids,
                            const uint32_t *perm, quad_fact *out, const gvis *v, rtask *t)
{
    const qrow_form *f = (const qrow_form *)r->ent[QC_ROWS]->data;
    const uint8_t *rows = r->ent[QC_ROWS]->data + sizeof *f;
    for (uint32_t k = 0; k < r->len; k++) {
        uint32_t pos = perm ? perm[r->start + k] : r->start + k;
        uint32_t slot = QUAD_ID_SLOT(ids[pos]);
        if (!slot_visible(v, ch, slot, pos, out)) continue;
        t->p = rows + (size_t)quad_prow(ch, slot) * f->row_bytes;
        t->f = f;
        t->dst = out[pos].lane;
        t++;
    }
    return t;
}

/* Lane l of the row at p: one unaligned load and a mask (a constant lane
 * loads row bytes and masks them to 0; the entry has slack after its rows). */
static inline uint64_t row_lane(const qrow_form *f, const uint8_t *p, unsigned l)
{
    return f->base[l] + (hanu_get_u64(p + f->off[l]) & f->mask[l]);
}

static void run_rtasks(const rtask *t, size_t n, unsigned mask)
{
    enum { PF = 16 };
    if (mask == QUAD_LANES_ALL) {
        for (size_t k = 0; k < n; k++) {
            if (k + PF < n) __builtin_prefetch(t[k + PF].p);
            const qrow_form *f = t[k].f;
            for (unsigned l = 0; l < 4; l++) t[k].dst[l] = row_lane(f, t[k].p, l);
        }
        return;
    }
    for (size_t k = 0; k < n; k++) {
        if (k + PF < n) __builtin_prefetch(t[k + PF].p);
        const qrow_form *f = t[k].f;
        for (unsigned l = 0; l < 4; l++)
            if (mask & (1u << l)) t[k].dst[l] = row_lane(f, t[k].p, l);
    }
}

/* Marks visibility of one run's ids; returns the number not visible. */
static size_t run_visibility(const quad_chunk *ch, const quad_retset *ret, const grun *r,
                             uint64_t snap, const quad_id *ids, const uint32_t *perm, unsigned mask,
                             quad_fact *out, uint8_t *present)
{
    size_t missing = 0;
    for (uint32_t k = 0; k < r->len; k++) {
        uint32_t pos = perm ? perm[r->start + k] : r->start + k;
        int vis = r->valid;
        if (vis) {
            uint32_t slot = QUAD_ID_SLOT(ids[pos]);
            if (slot >= ch->rows) vis = 0;
            else if (ret) {
                uint64_t e = quad_retire_epoch(ret, slot);
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

/* A run with few ids touches few of its chunk's microblocks: read those only */
#define QUAD_SPARSE_DIV 4

/* Adds to g->reqs (at *k) the reads of the microblocks a sparse run needs, for
 * each missing lane, one read per run of adjacent microblocks, into the run's
 * read area at the same offsets as in the file (so payload pointers work as
 * for a whole lane; bytes of microblocks not read are never decoded). */
static int sparse_requests(const quad *q, gscratch *g, const quad_chunk *ch, const grun *r,
                           const quad_id *ids, const uint32_t *perm, size_t *k)
{
    uint64_t bits[(1u << 20) / 64 / 64];   /* nmb <= chunk_rows / 64 <= 16384 */
    size_t words = (ch->nmb + 63) / 64;
    memset(bits, 0, words * sizeof *bits);
    for (uint32_t j = 0; j < r->len; j++) {
        uint32_t slot = QUAD_ID_SLOT(ids[perm ? perm[r->start + j] : r->start + j]);
        if (slot >= ch->rows) continue;
        uint32_t m = quad_prow(ch, slot) >> q->mb_shift;
        bits[m / 64] |= UINT64_C(1) << (m % 64);
    }
    uint8_t *area = g->rbuf + r->rbuf_off - ch->lane_off[r->rlane_lo];
    for (unsigned l = 0; l < 4; l++) {
        if (!(r->missing & (1u << l))) continue;
        for (uint32_t m = 0; m < ch->nmb;) {
            if (!(bits[m / 64] & (UINT64_C(1) << (m % 64)))) { m++; continue; }
            uint32_t e = m;
            while (e + 1 < ch->nmb && (bits[(e + 1) / 64] & (UINT64_C(1) << ((e + 1) % 64)))) e++;
            uint32_t from = quad_mb_at(ch, l, m)->off;
            uint32_t to = e + 1 < ch->nmb ? quad_mb_at(ch, l, e + 1)->off : ch->lane_off[l + 1];
            if (to > from) {
                if (GROW(g, reqs, *k + 1)) return HANU_ERR_NOMEM;
                area = g->rbuf + r->rbuf_off - ch->lane_off[r->rlane_lo];
                quad_ioreq *rq = &g->reqs[(*k)++];
                rq->buf = area + from;
                rq->len = to - from;
                rq->off = ch->off + from;
                rq->rc = 0;
            }
            m = e + 1;
        }
    }
    return 0;
}

/* Builds and caches the row form of ch when every lane with a payload is
 * cached (*rf stays NULL otherwise). Returns 0 or HANU_ERR_NOMEM. */
static int row_form_try(quad *q, gscratch *g, uint64_t chunk_no, quad_chunk *ch, qc_entry **rf,
                        uint8_t *detached)
{
    const uint8_t *lp[4];
    for (unsigned l = 0; l < 4; l++) {
        lp[l] = NULL;
        if (!lane_len(ch, l)) continue;
        qc_entry *e = atomic_load(&ch->cached[l]);
        if (!e) return 0;
        lp[l] = e->data;
    }
    qc_entry *ne = row_form_build(q, g, ch, lp);
    if (!ne) return HANU_ERR_NOMEM;
    int det;
    *rf = qc_insert_entry(&q->cache, chunk_no, ch, QC_ROWS, ne, &det);
    if (det) {
        *detached |= (uint8_t)(1u << QC_ROWS);
        g->any_detached = 1;
    }
    return 0;
}

/* A request that looks random: its first ids fall in many chunks, not in
 * one direction. Ordered requests decode microblock ranges faster. */
static int looks_random(const quad_id *ids, size_t n)
{
    if (n < 64) return 0;
    int up = 0, down = 0;
    for (size_t i = 1; i < 16; i++) {
        uint64_t a = QUAD_ID_CHUNK(ids[i - 1]), b = QUAD_ID_CHUNK(ids[i]);
        up += b > a;
        down += b < a;
    }
    return up >= 3 && down >= 3;
}

/* A random request whose chunks all have a row form: every id in the
 * caller's order, its row prefetched ROW_AHEAD ids before it is read, with
 * no grouping by chunk (measured on a 4M-fact store: grouping, the per-chunk
 * bookkeeping and the task list took more time than the rows' cache misses).
 * Returns 1 when done; 0 as soon as an id's chunk has no row form, leaving
 * the request to the general path (which rewrites every output). */
#define ROW_AHEAD 16
static int gather_rows_direct(quad *q, uint64_t snap, uint64_t nch, int with_ret, const quad_id *ids,
                              size_t n, unsigned mask, quad_fact *out, uint8_t *present,
                              size_t *not_visible)
{
    struct { const uint8_t *p; const qrow_form *f; } ring[ROW_AHEAD];
    size_t nv = 0;
    for (size_t i = 0; i < n + ROW_AHEAD; i++) {
        if (i >= ROW_AHEAD) {   /* id i - ROW_AHEAD: its row was prefetched, read it */
            size_t k = i - ROW_AHEAD;
            const uint8_t *p = ring[k % ROW_AHEAD].p;
            const qrow_form *f = ring[k % ROW_AHEAD].f;
            if (present) present[k] = p != NULL;
            if (!p) nv++;
            for (unsigned l = 0; l < 4; l++)
                if (mask & (1u << l))
                    out[k].lane[l] = p ? row_lane(f, p, l) : 0;
        }
        if (i >= n) continue;
        uint64_t c = QUAD_ID_CHUNK(ids[i]);
        uint32_t slot = QUAD_ID_SLOT(ids[i]);
        const uint8_t *p = NULL;
        const qrow_form *f = NULL;
        if (c < nch) {
            quad_chunk *ch = quad_chunk_at(q, c);
            if (ch->epoch <= snap && slot < ch->rows) {
                uint64_t e = with_ret && ch->ret ? quad_retire_epoch(ch->ret, slot) : 0;
                if (e == 0 || e > snap) {
                    qc_entry *rf = atomic_load(&ch->cached[QC_ROWS]);
                    if (!rf) return 0;
                    if (!(atomic_load_explicit(&ch->cused, memory_order_relaxed) & (1u << QC_ROWS)))
                        atomic_fetch_or_explicit(&ch->cused, (uint8_t)(1u << QC_ROWS), memory_order_relaxed);
                    /* the row's address from the chunk, not the entry's header,
                     * so both misses are in flight at once */
                    f = (const qrow_form *)rf->data;
                    p = rf->data + sizeof *f + (size_t)quad_prow(ch, slot) * ch->row_bytes;
                    __builtin_prefetch(p);
                    __builtin_prefetch(f);
                    __builtin_prefetch((const uint8_t *)f + 64);
                }
            }
        }
        ring[i % ROW_AHEAD].p = p;
        ring[i % ROW_AHEAD].f = f;
    }
    atomic_fetch_add_explicit(&q->cache.hits, n - nv, memory_order_relaxed);
    *not_visible += nv;
    return 1;
}

/* with_ret: retirement state may be read (rlock held); without it no retire
 * is at an epoch <= snap, so retirements are ignored (see gather_at). */
static int gather_block(quad *q, gscratch *g, uint64_t snap, uint64_t nch, int with_ret,
                        const quad_id *ids, size_t n, unsigned mask, quad_fact *out,
                        uint8_t *present, size_t *not_visible)
{
    if (looks_random(ids, n) &&
        gather_rows_direct(q, snap, nch, with_ret, ids, n, mask, out, present, not_visible))
        return 0;
    size_t nruns;
    int use_perm;
    int rc = group_ids(g, ids, n, &nruns, &use_perm);
    if (rc) return rc;
    const uint32_t *perm = use_perm ? g->perm : NULL;

    /* pass 1: cache lookups, without locks (the caller's reader section
     * keeps every entry found here allocated) */
    size_t nmiss = 0, rbytes = 0;
    uint64_t hits = 0, misses = 0;
    for (size_t i = 0; i < nruns; i++) {
        grun *r = &g->runs[i];
        r->valid = r->chunk < nch && quad_chunk_at(q, r->chunk)->epoch <= snap;
        if (!r->valid) continue;
        quad_chunk *ch = quad_chunk_at(q, r->chunk);
        /* a relocated chunk without kept rows: nothing is visible at snap
         * (>= its horizon); with some, consecutive slots are not consecutive rows */
        if (ch->live && ch->live->live == 0) { r->valid = 0; continue; }
        if (r->consec && (ch->live || QUAD_ID_SLOT(ids[r->start]) + (uint64_t)r->len > ch->rows))
            r->consec = 0;
        unsigned need = 0;
        for (unsigned l = 0; l < 4; l++)
            if ((mask & (1u << l)) && lane_len(ch, l)) need |= 1u << l;
        if (!need) continue;
        unsigned used = atomic_load_explicit(&ch->cused, memory_order_relaxed);
        if (!r->consec) {
            qc_entry *rf = atomic_load(&ch->cached[QC_ROWS]);
            if (!rf && (used & QC_SCATTERED)) {
                rc = row_form_try(q, g, r->chunk, ch, &rf, &r->detached);
                if (rc) goto release;
            }
            if (rf) {
                hits++;
                r->ent[QC_ROWS] = rf;
                if (!(used & (1u << QC_ROWS)))
                    atomic_fetch_or_explicit(&ch->cused, (uint8_t)(1u << QC_ROWS), memory_order_relaxed);
                continue;
            }
        }
        for (unsigned l = 0; l < 4; l++) {
            if (!(need & (1u << l))) continue;
            qc_entry *e = atomic_load(&ch->cached[l]);
            if (e) {
                hits++;
                r->ent[l] = e;
                if (!(used & (1u << l)))   /* CLOCK bit: written only when clear */
                    atomic_fetch_or_explicit(&ch->cused, (uint8_t)(1u << l), memory_order_relaxed);
            } else {
                misses++;
                r->missing |= (uint8_t)(1u << l);
            }
        }
        if (r->missing) {
            unsigned lo = (unsigned)__builtin_ctz(r->missing), hi = 31u - (unsigned)__builtin_clz(r->missing);
            r->rlane_lo = lo;
            r->rbuf_off = rbytes;
            rbytes += ch->lane_off[hi + 1] - ch->lane_off[lo] + CODEC_SLACK;
            /* few ids in a chunk of many microblocks: read only their
             * microblocks and leave the cache alone */
            r->sparse = (uint64_t)r->len * QUAD_SPARSE_DIV <= ch->nmb;
            nmiss++;
        } else if (!r->consec && !(used & QC_SCATTERED)) {
            /* read at random with its lanes cached: the next such read builds the row form */
            atomic_fetch_or_explicit(&ch->cused, (uint8_t)QC_SCATTERED, memory_order_relaxed);
        }
    }
    if (hits) atomic_fetch_add_explicit(&q->cache.hits, hits, memory_order_relaxed);
    if (misses) atomic_fetch_add_explicit(&q->cache.misses, misses, memory_order_relaxed);

    /* pass 2: read every miss of the request together (one read per chunk
     * covering its adjacent missing lanes, or per run of needed microblocks
     * for sparse runs), then cache the whole lanes */
    if (nmiss) {
        if (GROW(g, rbuf, rbytes)) { rc = HANU_ERR_NOMEM; goto release; }
        size_t k = 0;
        for (size_t i = 0; i < nruns && rc == 0; i++) {
            grun *r = &g->runs[i];
            if (!r->valid || !r->missing) continue;
            const quad_chunk *ch = quad_chunk_at(q, r->chunk);
            if (r->sparse) {
                rc = sparse_requests(q, g, ch, r, ids, perm, &k);
                continue;
            }
            if (GROW(g, reqs, k + 1)) { rc = HANU_ERR_NOMEM; break; }
            unsigned hi = 31u - (unsigned)__builtin_clz(r->missing);
            quad_ioreq *rq = &g->reqs[k++];
            rq->buf = g->rbuf + r->rbuf_off;
            rq->len = ch->lane_off[hi + 1] - ch->lane_off[r->rlane_lo];
            rq->off = ch->off + ch->lane_off[r->rlane_lo];
            rq->rc = 0;
        }
        if (rc == 0 && k) rc = quad_io_read(q, g->reqs, k);
        if (rc) goto release;
        for (size_t i = 0; i < nruns; i++) {
            grun *r = &g->runs[i];
            if (!r->valid || !r->missing || r->sparse) continue;
            const quad_chunk *ch = quad_chunk_at(q, r->chunk);
            const uint8_t *base = g->rbuf + r->rbuf_off - ch->lane_off[r->rlane_lo];
            for (unsigned l = 0; l < 4; l++) {
                if (!(r->missing & (1u << l))) continue;
                int detached;
                r->ent[l] = qc_insert(&q->cache, r->chunk, quad_chunk_at(q, r->chunk), l,
                                      base + ch->lane_off[l], lane_len(ch, l), &detached);
                if (!r->ent[l]) { rc = HANU_ERR_NOMEM; goto release; }
                if (detached) {
                    r->detached |= (uint8_t)(1u << l);
                    g->any_detached = 1;
                }
            }
        }
    }

    /* pass 3: decode into caller order: consecutive runs by microblock ranges,
     * scattered ids through the task list, then visibility */
    size_t nlanes = (size_t)__builtin_popcount(mask);
    if (GROW(g, tasks, n * nlanes)) { rc = HANU_ERR_NOMEM; goto release; }
    if (GROW(g, rtasks, n)) { rc = HANU_ERR_NOMEM; goto release; }
    gtask *t = g->tasks;
    rtask *rt = g->rtasks;
    const gvis vis = { present, not_visible, mask };
    for (size_t i = 0; i < nruns; i++) {
        grun *r = &g->runs[i];
        if (!r->valid) continue;
        const quad_chunk *ch = quad_chunk_at(q, r->chunk);
        const gvis *v = NULL;
        if (!r->consec && !(with_ret && ch->ret)) {
            v = &vis;
            r->vis_done = 1;
        }
        if (r->ent[QC_ROWS]) {
            rt = run_row_tasks(ch, r, ids, perm, out, v, rt);
            continue;
        }
        const uint8_t *lp[4];
        for (unsigned l = 0; l < 4; l++) {
            lp[l] = r->ent[l] ? r->ent[l]->data : NULL;
            if (r->sparse && (r->missing & (1u << l)))   /* this run's read area, lane l */
                lp[l] = g->rbuf + r->rbuf_off + (ch->lane_off[l] - ch->lane_off[r->rlane_lo]);
        }
        if (r->consec) {
            for (unsigned l = 0; l < 4; l++)
                if (mask & (1u << l)) run_decode_range(q, ch, r, l, lp[l], ids, out);
        } else {
            t = run_point_tasks(q, ch, r, mask, lp, ids, perm, out, v, t);
        }
    }
    run_tasks(g->tasks, (size_t)(t - g->tasks));
    run_rtasks(g->rtasks, (size_t)(rt - g->rtasks), mask);
    for (size_t i = 0; i < nruns; i++) {
        grun *r = &g->runs[i];
        if (r->vis_done) continue;
        const quad_chunk *ch = r->valid ? quad_chunk_at(q, r->chunk) : NULL;
        const quad_retset *ret = ch && with_ret ? ch->ret : NULL;
        if (!ch || ret || !r->consec)
            *not_visible += run_visibility(ch, ret, r, snap, ids, perm, mask, out, present);
        else if (present)
            memset(present + r->start, 1, r->len);   /* consecutive, in range, none retired */
    }

release:
    for (size_t i = 0; i < nruns && g->any_detached; i++) {
        grun *r = &g->runs[i];
        for (unsigned l = 0; l <= QC_ROWS; l++)
            if (r->detached & (1u << l)) free(r->ent[l]);
    }
    g->any_detached = 0;
    return rc;
}

#define GATHER_BLOCK (1u << 16)

static int gather_at(quad *q, uint64_t snap, const quad_id *ids, size_t n, unsigned mask,
                     quad_fact *out, uint8_t *present, size_t *not_visible)
{
    gscratch *g = scratch_get();
    if (!g) return HANU_ERR_NOMEM;
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_acquire);
    /* snap was read (acquire) before this load, and a retire bumps `retired`
     * before it publishes its epoch: when it is 0 here, no retire is at an
     * epoch <= snap and the retirement state need not (must not, unlocked) be read */
    int locked = atomic_load(&q->retired) != 0;
    if (locked) pthread_rwlock_rdlock(&q->rlock);
    int rc = 0;
    /* a reader section per block: entries evicted during a section are freed
     * only after it ends, so one section over a huge gather would hold every
     * payload it read (memory bounded by the request, not cache_bytes) */
    for (size_t i = 0; i < n && rc == 0; i += GATHER_BLOCK) {
        size_t k = n - i < GATHER_BLOCK ? n - i : GATHER_BLOCK;
        qc_reader *rd = qc_read_begin(&q->cache);
        /* the cleaner swaps a chunk's payload under the write lock after a
         * grace period (qc_grace): a section that sees no retirement after it
         * opened began before that grace period ended, and the cleaner waits
         * for it; one that sees a retirement takes the lock first */
        if (!locked && atomic_load(&q->retired) != 0) {
            qc_read_end(rd);
            pthread_rwlock_rdlock(&q->rlock);
            locked = 1;
            rd = qc_read_begin(&q->cache);
        }
        rc = gather_block(q, g, snap, nch, locked, ids + i, k, mask, out + i,
                          present ? present + i : NULL, not_visible);
        qc_read_end(rd);
        if (atomic_load_explicit(&q->cache.dead_bytes, memory_order_relaxed) > q->cache.shard_limit * (QC_SHARDS / 2))
            qc_reclaim_all(&q->cache);
    }
    if (locked) pthread_rwlock_unlock(&q->rlock);
    return rc;
}

static uint64_t resolve_snapshot(quad *q, uint64_t snapshot)
{
    uint64_t cur = atomic_load_explicit(&q->epoch, memory_order_acquire);
    return snapshot == 0 || snapshot > cur ? cur : snapshot;
}

#define EXISTS_BLOCK 64

/* Existence at snap from the chunk directory and the retirement state only:
 * no lane payload, no cache entry, no reader section. Consecutive ids of one
 * chunk reuse its row count and retirement set, so an ordered request costs a
 * compare and a store per id (a retirement lookup more in a retired chunk).
 * Returns the number of ids not visible. */
static size_t exists_at(quad *q, uint64_t snap, const quad_id *ids, size_t n, uint8_t *present)
{
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_acquire);
    /* as in gather_at: 0 here means no retire is at an epoch <= snap */
    int locked = atomic_load_explicit(&q->retired, memory_order_acquire) != 0;
    if (locked) pthread_rwlock_rdlock(&q->rlock);
    size_t nv = 0;
    uint64_t cur = UINT64_MAX;
    uint32_t rows = 0;
    const quad_retset *ret = NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = QUAD_ID_CHUNK(ids[i]);
        uint32_t slot = QUAD_ID_SLOT(ids[i]);
        /* a block of ids all in the current chunk, which has no retirement:
         * two passes the compiler vectorises; tried only when the block's
         * last id is in the chunk too, so random ids pay one compare */
        if (c == cur && !ret && n - i >= EXISTS_BLOCK && QUAD_ID_CHUNK(ids[i + EXISTS_BLOCK - 1]) == c) {
            uint64_t other = 0;
            for (size_t k = 0; k < EXISTS_BLOCK; k++) other |= QUAD_ID_CHUNK(ids[i + k]) ^ c;
            if (other == 0) {
                size_t vis = 0;
                if (present)
                    for (size_t k = 0; k < EXISTS_BLOCK; k++) {
                        uint8_t v = QUAD_ID_SLOT(ids[i + k]) < rows;
                        present[i + k] = v;
                        vis += v;
                    }
                else
                    for (size_t k = 0; k < EXISTS_BLOCK; k++) vis += QUAD_ID_SLOT(ids[i + k]) < rows;
                nv += EXISTS_BLOCK - vis;
                i += EXISTS_BLOCK - 1;
                continue;
            }
        }
        if (c != cur) {
            cur = c;
            rows = 0;
            ret = NULL;
            if (c < nch) {
                const quad_chunk *ch = quad_chunk_at(q, c);
                if (ch->epoch <= snap) {    /* else appended after the snapshot */
                    rows = ch->rows;
                    ret = locked ? ch->ret : NULL;
                }
            }
        }
        int vis = slot < rows;
        if (vis && ret) {
            uint64_t e = quad_retire_epoch(ret, slot);
            vis = e == 0 || e > snap;
        }
        if (present) present[i] = (uint8_t)vis;
        nv += (size_t)!vis;
    }
    if (locked) pthread_rwlock_unlock(&q->rlock);
    return nv;
}

int quad_gather(quad *q, uint64_t snapshot, const quad_id *ids, size_t n,
                unsigned lane_mask, quad_fact *out, uint8_t *present)
{
    /* lane_mask 0 is an existence check: out is not touched and may be NULL */
    if (!q || (n && (!ids || (!out && lane_mask))) || lane_mask > QUAD_LANES_ALL)
        return HANU_ERR_INVALID;
    if (quad_forked(q)) return HANU_ERR_INVALID;
    if (n == 0) return 0;
    uint64_t snap = resolve_snapshot(q, snapshot);
    if (snap < atomic_load(&q->gone_below)) return HANU_ERR_GONE;
    if (lane_mask == 0)
        return exists_at(q, snap, ids, n, present) && !present ? HANU_ERR_NOT_FOUND : 0;
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
    if (quad_forked(q)) return HANU_ERR_INVALID;
    *n_out = 0;
    *next = from;
    if (cap == 0) return 0;
    /* a page never needs more than the store holds (cap may be SIZE_MAX) */
    uint64_t facts_max = atomic_load_explicit(&q->nchunks, memory_order_acquire) * (uint64_t)q->chunk_rows;
    if (cap > facts_max) cap = facts_max ? (size_t)facts_max : 1;
    gscratch *g = scratch_get();
    if (!g) return HANU_ERR_NOMEM;
    quad_id *ids = ids_out;
    if (!ids) {
        if (GROW(g, ids, cap)) return HANU_ERR_NOMEM;
        ids = g->ids;
    }
    uint64_t snap = resolve_snapshot(q, snapshot);
    if (snap < atomic_load(&q->gone_below)) return HANU_ERR_GONE;
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_acquire);
    uint64_t c = QUAD_ID_CHUNK(from);
    uint32_t s = QUAD_ID_SLOT(from);
    size_t cnt = 0;
    int locked = atomic_load_explicit(&q->retired, memory_order_acquire) != 0;
    if (locked) pthread_rwlock_rdlock(&q->rlock);
    while (c < nch && cnt < cap) {
        const quad_chunk *ch = quad_chunk_at(q, c);
        if (ch->epoch > snap) break;          /* chunks are appended in epoch order */
        const quad_retset *ret = locked ? ch->ret : NULL;
        for (; s < ch->rows && cnt < cap; s++) {
            if (ret) {
                uint64_t e = quad_retire_epoch(ret, s);
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
