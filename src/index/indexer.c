/*
 * indexer.c: the thread that keeps DATA/index a projection of every
 * collection (docs/INDEX.md, "The indexer"). It reads the change feed from its
 * watermark, keeps the newest version per _id of each collection in memory,
 * and at each commit writes a segment per changed collection, the deletion
 * lists of the segments that lost documents, then COMMIT; only then it
 * advances the watermark and publishes immutable snapshots to readers.
 *
 * State has two copies on purpose: the working state (dbstate, touched only by
 * the indexer thread, and by indexer_open before it starts) and the published
 * snapshots (under mu, reference counted), so that a query never sees a
 * half-applied commit.
 *
 * Between two commits a refresh (indexer_refresh_upto, Lucene's near-real-time
 * reopen) publishes what the feed brought without making it durable: the
 * pending versions become a segment written without fdatasync and the new
 * deletions are folded in memory; the next commit syncs those segments and
 * writes the deletion lists before COMMIT names them. A crash before that
 * commit loses nothing: COMMIT does not name them, the open removes them and
 * the feed brings their records again.
 *
 * A commit has two halves. The indexer thread prepares it (what a refresh
 * does, plus the deletion lists' next generations and COMMIT's contents,
 * copied) and publishes at once; the commit thread then does what takes the
 * disk's time (the fdatasyncs, the deletion files, COMMIT, the removal of
 * what it no longer names, the watermark) while the indexer goes on reading
 * and refreshing: a commit's syncs took 150-280 ms under a write load, which
 * every fresh query arriving meanwhile would otherwise wait out. One commit
 * is in flight at a time.
 */
#include "index/index.h"
#include "hlog/hlog.h"
#include "json/json.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WATERMARK "index"
#define FEED_BATCH 512                 /* records per store_feed_next */
#define UNCOMMITTED_BYTES_MAX (64u << 20) /* commit early past this much indexed since the last commit */
#define PENDING_CUT_DEFAULT (8u << 20) /* write pending documents out as a segment past this much text */
#define PENDING_ENTRY_BYTES 64        /* what a pending version holds besides its text and id */
#define STAGE_BYTES_MAX (4u << 20)     /* one feed step stops after the record that passes this */
#define IDLE_POLL_MS 5                 /* caught up while records keep coming: poll again after this */
#define IDLE_POLLS_BEFORE_SLEEP 20     /* then this many empty polls in a row: sleep until an append */
#define IDLE_SLEEP_MAX_S 60            /* a sleep's bound, a safety net (an append wakes it at once) */
#define KIND_UNKNOWN (-1)
#define ID_PREFETCH_AHEAD 4            /* apply_pending looks up the committed id map this far ahead */
#define MERGE_NICE 10                  /* merges run at this lower priority */
#define PROGRESS_EVERY_NS 1000000000ull /* rebuild progress lines at most this often */

/* ------------------------------------------------------- the id map */

/* Open addressing with linear probing and backward-shift removal; keys are
 * borrowed (a segment's mapped id, or a pending entry's copy). */
typedef struct id_slot {
    const char *id;         /* NULL: empty */
    uint32_t len;
    uint32_t ord;
    uint64_t val;
} id_slot;

typedef struct id_map {
    id_slot *slots;
    size_t cap, n;          /* cap a power of two */
} id_map;

static size_t id_home(const id_map *m, const char *id, size_t len)
{
    return (size_t)hanu_hash64(id, len, 0) & (m->cap - 1);
}

static id_slot *id_map_find(id_map *m, const char *id, size_t len)
{
    if (!m->n) return NULL;
    for (size_t i = id_home(m, id, len);; i = (i + 1) & (m->cap - 1)) {
        id_slot *s = &m->slots[i];
        if (!s->id) return NULL;
        if (s->len == len && memcmp(s->id, id, len) == 0) return s;
    }
}

static int id_map_grow(id_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    id_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return HANU_ERR_NOMEM;
    id_map old = *m;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.slots[i].id) continue;
        size_t j = id_home(m, old.slots[i].id, old.slots[i].len);
        while (m->slots[j].id) j = (j + 1) & (cap - 1);
        m->slots[j] = old.slots[i];
    }
    free(old.slots);
    return HANU_OK;
}

/* Adds the entry of an id known not to be in the map (one probe, no comparison). */
static int id_map_add(id_map *m, const char *id, size_t len, uint64_t val, uint32_t ord)
{
    if ((m->n + 1) * 4 > m->cap * 3 && id_map_grow(m)) return HANU_ERR_NOMEM;
    size_t i = id_home(m, id, len);
    while (m->slots[i].id) i = (i + 1) & (m->cap - 1);
    m->slots[i] = (id_slot){ id, (uint32_t)len, ord, val };
    m->n++;
    return HANU_OK;
}


static void id_map_remove(id_map *m, id_slot *s)
{
    size_t hole = (size_t)(s - m->slots), mask = m->cap - 1;
    m->slots[hole].id = NULL;
    m->n--;
    /* Shift back every later entry of the run whose home is not between the hole and it. */
    for (size_t i = (hole + 1) & mask; m->slots[i].id; i = (i + 1) & mask) {
        size_t home = id_home(m, m->slots[i].id, m->slots[i].len);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            m->slots[hole] = m->slots[i];
            m->slots[i].id = NULL;
            hole = i;
        }
    }
}

static void id_map_clear(id_map *m)
{
    free(m->slots);
    *m = (id_map){0};
}

/* ------------------------------------------------------- working state */

typedef struct seg_ref {         /* an open segment, shared by the state and snapshots */
    index_segment *seg;
    uint64_t id;
    atomic_uint refs;
    char *unlink_path;           /* merged away: the file goes with the last reference */
} seg_ref;

typedef struct u32_vec {
    uint32_t *v;
    uint32_t n, cap;
} u32_vec;

typedef struct coll_seg {
    seg_ref *ref;
    u32_vec deleted;             /* sorted: as of the last commit */
    u32_vec fresh;               /* deleted since then, unsorted */
    uint32_t generation;         /* of the deletion list on disk (0: none) */
    uint8_t unsynced;            /* written by a refresh: fdatasync before COMMIT names it */
    uint8_t del_dirty;           /* deleted holds more than its list on disk */
} coll_seg;

/* The pending ids' bytes: chunks that never move (the id map borrows them), so
 * a pending version allocates nothing but when a chunk fills. */
#define ID_CHUNK_BYTES (64u << 10)
typedef struct id_chunk {
    struct id_chunk *next;
    size_t used, cap;
    char bytes[];
} id_chunk;

typedef struct pending_doc {
    char *id;                    /* in the dbstate's id chunks */
    size_t id_len;
    uint64_t txn;
    int is_delete;
    size_t doc_off, doc_len;     /* in the dbstate's arena */
} pending_doc;

typedef struct dbstate {
    uint32_t db;
    int kind;                    /* enum store_db_kind, or KIND_UNKNOWN */
    int dirty;                   /* publish a new snapshot at the next commit */
    int refreshed;               /* changed by the refresh under way: its refresh segments may merge */
    uint32_t epoch;              /* counts resets (drop, create): a merge of an older epoch is void */
    coll_seg *segs;              /* increasing id */
    uint32_t nsegs, segcap;
    id_map committed;            /* _id -> (segment id, ordinal) */
    id_map pending_ids;          /* _id -> index into pending */
    pending_doc *pending;
    size_t npending, pendcap;
    hanu_buf arena;
    id_chunk *ids;               /* the pending ids, newest chunk first */
} dbstate;

typedef struct snap_impl {       /* index_snapshot first: a cast gets back here */
    index_snapshot pub;
    atomic_uint refs;
    seg_ref **refs_of;
    uint64_t bytes;
} snap_impl;

typedef struct published {
    uint32_t db;
    snap_impl *snap;
} published;

/* A merge handed to the merge thread: its inputs as of the commit that
 * scheduled it (their references held, deletions copied), and its result. */
typedef struct merge_job {
    uint32_t db, epoch;
    uint64_t out_id;             /* seg-<out_id>.hix, from next_file */
    uint32_t n;
    seg_ref **in;
    uint32_t **deleted, *ndeleted;
    uint32_t **map;              /* per input: old ordinal -> new, INDEX_ORD_END when dropped */
    uint64_t bytes_in;
    /* the result */
    index_segment *out;
    uint32_t docs;
    uint64_t ns;
    int rc;
} merge_job;

/* A feed entry of a collection, copied during the feed's callback and applied after it
 * returns (the entry points into the feed's mapping only during the call). Entries of
 * other databases are skipped by the feed's filter and never copied. */
typedef struct staged {
    uint64_t txn;
    uint8_t op;
    uint32_t db;
    size_t key_off, key_len, val_off, val_len;
} staged;

struct indexer {
    store *st;
    indexer_options opt;
    char dir[1024];
    char failure[256];           /* why the indexer stopped (under mu), "" while it runs */

    /* indexer thread only */
    dbstate **dbs;               /* sorted by db */
    size_t ndbs, dbcap;
    store_feed *feed;
    uint64_t consumed;           /* every record up to it is in the working state */
    uint64_t next_file;
    uint64_t pending_bytes;      /* pending versions' text, ids and entries (PENDING_ENTRY_BYTES) */
    uint64_t uncommitted_bytes;  /* pending_bytes summed since the last commit (cuts included) */
    int stage_full;              /* the last feed step stopped at STAGE_BYTES_MAX */
    uint64_t last_commit_ns;
    staged *stage;
    size_t nstage, stagecap;
    int stage_failed;            /* a callback could not copy an entry (NOMEM) */
    int feed_more;               /* the last feed_step stopped at its limits, not at the end */
    hanu_buf stage_arena;
    char (*doomed)[64];          /* files to remove once the next commit is durable */
    size_t ndoomed, doomcap;
    seg_ref **retired;           /* merged away: released once the next commit is durable */
    size_t nretired, retcap;
    size_t merge_cursor;         /* the collection the next merge search starts at */
    uint64_t rebuild_target, last_progress_ns;
    doc_cache *cache;

    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake;         /* the thread: a waiter or stop */
    pthread_cond_t committed_cv; /* waiters: a commit or a failure */
    published *pubs;
    size_t npubs, pubcap;
    uint64_t committed_txn, commits, segments, bytes, live_docs;
    uint64_t wanted_txn;         /* the highest txn a waiter waits for */
    uint64_t refresh_wanted;     /* publish at least up to here as soon as the feed has it */
    uint64_t refreshes, cuts, pending_bytes_peak;
    int waiters, commit_asked, stop, rebuilt, rebuilding;
    _Atomic int failed;          /* set under mu; read without it by indexer_failed (every query) */
    pthread_t thread;
    int started;
    _Atomic uint64_t visible_txn; /* every record up to it is in the published snapshots */

    /* the commit thread (the durable half of a commit); djob and committing under mu */
    pthread_t commit_thread;
    int commit_started, commit_stop;
    pthread_cond_t commit_cv;
    struct durable_job *djob;    /* prepared, not yet taken by the commit thread */
    int committing;              /* a durable half is queued or running */

    /* the merge thread; job and its state under mu */
    pthread_t merge_thread;
    int merge_started;
    pthread_cond_t merge_cv;
    merge_job *job;
    int job_state;               /* JOB_NONE, JOB_QUEUED, JOB_RUNNING, JOB_DONE */
    uint64_t merges, merges_abandoned, merge_bytes, merge_docs, merge_ns;
};

/* INSTALLING: taken by the commit that installs it, which may queue the next. */
enum { JOB_NONE, JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_INSTALLING };

static void say(const indexer *ix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const indexer *ix, const char *fmt, ...)
{
    if (ix->opt.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    hlog_v(HLOG_INFO, "index", fmt, ap);
    va_end(ap);
}

/* The collection's name for log lines ("#id" once it was dropped). */
static const char *collection_name(const indexer *ix, uint32_t db, char *buf, size_t cap)
{
    store_db_info info;
    if (store_db_info_get(ix->st, db, &info) == HANU_OK) snprintf(buf, cap, "\"%s\"", info.name);
    else snprintf(buf, cap, "#%" PRIu32 " (dropped)", db);
    return buf;
}

/* Logs why the indexer stops and keeps the first such reason for _status. */
static void note_failure(indexer *ix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_failure(indexer *ix, const char *fmt, ...)
{
    char msg[sizeof ix->failure];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    say(ix, "%s", msg);
    pthread_mutex_lock(&ix->mu);
    if (!ix->failure[0]) snprintf(ix->failure, sizeof ix->failure, "%s", msg);
    pthread_mutex_unlock(&ix->mu);
}

static int u32_push(u32_vec *v, uint32_t x)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 16;
        uint32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p) return HANU_ERR_NOMEM;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return HANU_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void seg_ref_release(seg_ref *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        index_segment_close(r->seg);
        if (r->unlink_path) unlink(r->unlink_path);
        free(r->unlink_path);
        free(r);
    }
}

static void seg_path(const indexer *ix, uint64_t id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/seg-%" PRIu64 ".hix", ix->dir, id);
}

static void del_name(uint64_t seg, uint32_t gen, char *out, size_t cap)
{
    snprintf(out, cap, "del-%" PRIu64 "-%" PRIu32, seg, gen);
}

static void del_path(const indexer *ix, uint64_t seg, uint32_t gen, char *out, size_t cap)
{
    char name[64];
    del_name(seg, gen, name, sizeof name);
    snprintf(out, cap, "%s/%s", ix->dir, name);
}

static int doom(indexer *ix, const char *name)
{
    if (ix->ndoomed == ix->doomcap) {
        size_t cap = ix->doomcap ? ix->doomcap * 2 : 16;
        char(*p)[64] = realloc(ix->doomed, cap * sizeof *p);
        if (!p) return HANU_ERR_NOMEM;
        ix->doomed = p;
        ix->doomcap = cap;
    }
    snprintf(ix->doomed[ix->ndoomed++], 64, "%s", name);
    return HANU_OK;
}

/* A copy of id in d's id chunks; NULL when out of memory. */
static char *pending_id_copy(dbstate *d, const char *id, size_t len)
{
    id_chunk *c = d->ids;
    if (!c || c->cap - c->used < len) {
        size_t cap = len > ID_CHUNK_BYTES ? len : ID_CHUNK_BYTES;
        id_chunk *n = malloc(sizeof *n + cap);
        if (!n) return NULL;
        *n = (id_chunk){ .next = c, .used = 0, .cap = cap };
        d->ids = c = n;
    }
    char *p = c->bytes + c->used;
    memcpy(p, id, len);
    c->used += len;
    return p;
}

/* Frees the id chunks; keep_one: the newest stays, emptied, for the next pending ids. */
static void pending_ids_free(dbstate *d, int keep_one)
{
    id_chunk *c = d->ids, *keep = keep_one && c && c->cap == ID_CHUNK_BYTES ? c : NULL;
    if (keep) c = c->next;
    while (c) {
        id_chunk *next = c->next;
        free(c);
        c = next;
    }
    d->ids = keep;
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
    }
}

static void pending_clear(dbstate *d)
{
    pending_ids_free(d, 1);
    d->npending = 0;
    id_map_clear(&d->pending_ids);
    hanu_buf_free(&d->arena);
}

/* Forgets the collection's segments; their files go with the next commit when doom. */
static int dbstate_reset(indexer *ix, dbstate *d, int doom_files)
{
    int rc = HANU_OK;
    for (uint32_t i = 0; i < d->nsegs; i++) {
        coll_seg *s = &d->segs[i];
        char name[64];
        if (doom_files) {
            snprintf(name, sizeof name, "seg-%" PRIu64 ".hix", s->ref->id);
            if (!rc) rc = doom(ix, name);
            del_name(s->ref->id, s->generation, name, sizeof name);
            if (!rc && s->generation) rc = doom(ix, name);
        }
        seg_ref_release(s->ref);
        free(s->deleted.v);
        free(s->fresh.v);
    }
    free(d->segs);
    d->segs = NULL;
    d->nsegs = d->segcap = 0;
    id_map_clear(&d->committed);
    pending_clear(d);
    pending_ids_free(d, 0);
    free(d->pending);
    d->pending = NULL;
    d->pendcap = 0;
    d->dirty = 1;
    d->epoch++;
    return rc;
}

static dbstate *db_find(indexer *ix, uint32_t db, size_t *at)
{
    size_t lo = 0, hi = ix->ndbs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ix->dbs[mid]->db < db) lo = mid + 1;
        else hi = mid;
    }
    if (at) *at = lo;
    return lo < ix->ndbs && ix->dbs[lo]->db == db ? ix->dbs[lo] : NULL;
}

static dbstate *db_get(indexer *ix, uint32_t db)
{
    size_t at;
    dbstate *d = db_find(ix, db, &at);
    if (d) return d;
    if (ix->ndbs == ix->dbcap) {
        size_t cap = ix->dbcap ? ix->dbcap * 2 : 16;
        dbstate **p = realloc(ix->dbs, cap * sizeof *p);
        if (!p) return NULL;
        ix->dbs = p;
        ix->dbcap = cap;
    }
    d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->db = db;
    d->kind = KIND_UNKNOWN;
    memmove(ix->dbs + at + 1, ix->dbs + at, (ix->ndbs - at) * sizeof *ix->dbs);
    ix->dbs[at] = d;
    ix->ndbs++;
    return d;
}

static coll_seg *seg_find(dbstate *d, uint64_t id)
{
    uint32_t lo = 0, hi = d->nsegs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (d->segs[mid].ref->id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < d->nsegs && d->segs[lo].ref->id == id ? &d->segs[lo] : NULL;
}

/* Appends an opened segment (ids only grow) and maps its live documents. */
static int seg_add(dbstate *d, index_segment *seg, uint64_t id, uint32_t *deleted, uint32_t ndeleted,
                   uint32_t generation)
{
    seg_ref *r = NULL;
    if (d->nsegs == d->segcap) {
        uint32_t cap = d->segcap ? d->segcap * 2 : 8;
        coll_seg *p = realloc(d->segs, cap * sizeof *p);
        if (p) {
            d->segs = p;
            d->segcap = cap;
        }
    }
    if (d->nsegs < d->segcap) r = calloc(1, sizeof *r);
    if (!r) {
        index_segment_close(seg);
        free(deleted);
        return HANU_ERR_NOMEM;
    }
    r->seg = seg;
    r->id = id;
    atomic_init(&r->refs, 1);
    d->segs[d->nsegs++] = (coll_seg){ .ref = r, .deleted = { deleted, ndeleted, ndeleted }, .generation = generation };
    uint32_t docs = index_segment_docs(seg), k = 0;
    for (uint32_t ord = 0; ord < docs; ord++) {
        if (k < ndeleted && deleted[k] == ord) { k++; continue; }
        size_t len;
        const char *doc_id = index_segment_doc_id(seg, ord, &len);
        /* Two live versions of one id: the index cannot be trusted. */
        if (id_map_find(&d->committed, doc_id, len)) return HANU_ERR_CORRUPT;
        int rc = id_map_add(&d->committed, doc_id, len, id, ord);
        if (rc) return rc;
    }
    return HANU_OK;
}

static int is_collection(int kind)
{
    return kind == STORE_DB_COLLECTION || kind == STORE_DB_UNTYPED;
}

/* ------------------------------------------------------- snapshots */

static void snap_free(snap_impl *s)
{
    for (uint32_t i = 0; i < s->pub.nsegments; i++) {
        seg_ref_release(s->refs_of[i]);
        free((void *)s->pub.segments[i].deleted);
    }
    free(s->refs_of);
    free(s->pub.segments);
    free(s);
}

void index_snapshot_release(index_snapshot *snap)
{
    snap_impl *s = (snap_impl *)snap;
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) snap_free(s);
}

int index_snapshot_live(const index_snapshot *snap, uint32_t i, uint32_t ord)
{
    const index_snapshot_segment *s = &snap->segments[i];
    return !s->ndeleted || bsearch(&ord, s->deleted, s->ndeleted, sizeof *s->deleted, cmp_u32) == NULL;
}

/* A snapshot of d's state as committed (NULL *out when it has no segments). */
static int snap_make(const dbstate *d, uint64_t txn, snap_impl **out)
{
    *out = NULL;
    if (!d->nsegs) return HANU_OK;
    snap_impl *s = calloc(1, sizeof *s);
    if (!s) return HANU_ERR_NOMEM;
    atomic_init(&s->refs, 1);
    s->pub.db = d->db;
    s->pub.index_txn = txn;
    s->pub.segments = calloc(d->nsegs, sizeof *s->pub.segments);
    s->refs_of = calloc(d->nsegs, sizeof *s->refs_of);
    if (!s->pub.segments || !s->refs_of) {
        snap_free(s);
        return HANU_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < d->nsegs; i++) {
        const coll_seg *c = &d->segs[i];
        uint32_t *del = NULL;
        if (c->deleted.n) {
            del = malloc(c->deleted.n * sizeof *del);
            if (!del) {
                snap_free(s);
                return HANU_ERR_NOMEM;
            }
            memcpy(del, c->deleted.v, c->deleted.n * sizeof *del);
        }
        atomic_fetch_add(&c->ref->refs, 1);
        s->refs_of[i] = c->ref;
        s->pub.segments[i] = (index_snapshot_segment){ c->ref->seg, c->ref->id, del, c->deleted.n };
        s->pub.nsegments = i + 1;
        s->pub.live_docs += index_segment_docs(c->ref->seg) - c->deleted.n;
        s->bytes += index_segment_bytes(c->ref->seg);
    }
    *out = s;
    return HANU_OK;
}

/* Replaces db's published snapshot (mu held); NULL removes it. */
static int publish_locked(indexer *ix, uint32_t db, snap_impl *snap)
{
    size_t i = 0;
    while (i < ix->npubs && ix->pubs[i].db != db) i++;
    if (i == ix->npubs) {
        if (!snap) return HANU_OK;
        if (ix->npubs == ix->pubcap) {
            size_t cap = ix->pubcap ? ix->pubcap * 2 : 16;
            published *p = realloc(ix->pubs, cap * sizeof *p);
            if (!p) return HANU_ERR_NOMEM;
            ix->pubs = p;
            ix->pubcap = cap;
        }
        ix->pubs[ix->npubs++] = (published){ db, NULL };
    }
    snap_impl *old = ix->pubs[i].snap;
    if (old) {
        ix->segments -= old->pub.nsegments;
        ix->bytes -= old->bytes;
        ix->live_docs -= old->pub.live_docs;
        index_snapshot_release(&old->pub);
    }
    if (snap) {
        ix->pubs[i].snap = snap;
        ix->segments += snap->pub.nsegments;
        ix->bytes += snap->bytes;
        ix->live_docs += snap->pub.live_docs;
    } else {
        ix->pubs[i] = ix->pubs[--ix->npubs];
    }
    return HANU_OK;
}

index_snapshot *index_snapshot_acquire(indexer *ix, uint32_t db)
{
    index_snapshot *out = NULL;
    pthread_mutex_lock(&ix->mu);
    for (size_t i = 0; i < ix->npubs; i++)
        if (ix->pubs[i].db == db) {
            atomic_fetch_add(&ix->pubs[i].snap->refs, 1);
            out = &ix->pubs[i].snap->pub;
            break;
        }
    pthread_mutex_unlock(&ix->mu);
    return out;
}

/* Publishes a new snapshot of every dirty collection as of txn. */
static int publish_dirty(indexer *ix, uint64_t txn)
{
    int rc = HANU_OK;
    for (size_t i = 0; i < ix->ndbs && !rc; i++) {
        dbstate *d = ix->dbs[i];
        if (!d->dirty) continue;
        snap_impl *s;
        rc = snap_make(d, txn, &s);
        if (rc) break;
        pthread_mutex_lock(&ix->mu);
        rc = publish_locked(ix, d->db, s);
        pthread_mutex_unlock(&ix->mu);
        if (rc) snap_free(s);
        d->dirty = 0;
    }
    return rc;
}

/* ------------------------------------------------------- the feed */

/* The feed's filter (issue 24): the puts and deletes of a database known not to be a
 * collection (key-value databases, "default", the system database) are skipped by the
 * feed before any callback or copy. A database whose kind is not known yet (the first
 * record of one created before the committed txn, or one dropped earlier in this batch)
 * is taken, and apply_staged decides; from then on its kind is known. Untyped databases
 * (from logs older than kinds) stay indexed: they may hold documents. */
static int want_db(void *ctx, uint32_t db)
{
    indexer *ix = ctx;
    if (db == STORE_SYSTEM_DB_ID) return 0;
    dbstate *d = db_find(ix, db, NULL);
    return !d || d->kind == KIND_UNKNOWN || is_collection(d->kind);
}

static int stage_change(void *ctx, const store_change *c)
{
    indexer *ix = ctx;
    if (c->db == STORE_SYSTEM_DB_ID) return 0;
    if (c->op == LOG_OP_PUT || c->op == LOG_OP_DELETE) {
        dbstate *d = db_find(ix, c->db, NULL);
        if (d && d->kind == STORE_DB_KV) return 0;   /* key-value databases are not indexed */
    } else if (c->op == LOG_OP_CREATE_DB || c->op == LOG_OP_DROP_DB) {
        /* The filter judges the rest of this batch by the new kind at once (a put of a
           database created again staged before the create is reset by it in apply_staged). */
        dbstate *d = c->op == LOG_OP_CREATE_DB ? db_get(ix, c->db) : db_find(ix, c->db, NULL);
        if (c->op == LOG_OP_CREATE_DB && !d) return ix->stage_failed = 1;
        if (d) d->kind = c->op == LOG_OP_DROP_DB ? KIND_UNKNOWN : c->value_len ? c->value[0] : STORE_DB_UNTYPED;
    }
    if (ix->nstage == ix->stagecap) {
        size_t cap = ix->stagecap ? ix->stagecap * 2 : 256;
        staged *p = realloc(ix->stage, cap * sizeof *p);
        if (!p) return ix->stage_failed = 1;
        ix->stage = p;
        ix->stagecap = cap;
    }
    staged *s = &ix->stage[ix->nstage];
    *s = (staged){ c->txn, c->op, c->db, ix->stage_arena.len, c->key_len, 0, c->value_len };
    if (hanu_buf_append(&ix->stage_arena, c->key, c->key_len)) return ix->stage_failed = 1;
    s->val_off = ix->stage_arena.len;
    if (hanu_buf_append(&ix->stage_arena, c->value, c->value_len)) return ix->stage_failed = 1;
    ix->nstage++;
    /* Bounded batches: the feed stops after this record (a record is never split). */
    if (ix->stage_arena.len >= STAGE_BYTES_MAX) ix->stage_full = 1;
    return ix->stage_full;
}

/* The newest version of id wins; a delete replaces a pending put. */
static int pending_set(indexer *ix, dbstate *d, const char *id, size_t id_len, uint64_t txn,
                       const uint8_t *doc, size_t doc_len, int is_delete)
{
    id_slot *slot = id_map_find(&d->pending_ids, id, id_len);
    pending_doc *p;
    if (slot) {
        p = &d->pending[slot->val];
    } else {
        if (d->npending == d->pendcap) {
            size_t cap = d->pendcap ? d->pendcap * 2 : 64;
            pending_doc *np = realloc(d->pending, cap * sizeof *np);
            if (!np) return HANU_ERR_NOMEM;
            d->pending = np;
            d->pendcap = cap;
        }
        p = &d->pending[d->npending];
        p->id = pending_id_copy(d, id, id_len);
        if (!p->id) return HANU_ERR_NOMEM;
        p->id_len = id_len;
        int rc = id_map_add(&d->pending_ids, p->id, id_len, d->npending, 0);   /* not found above */
        if (rc) return rc;   /* the copy stays in its chunk until the next clear */
        d->npending++;
    }
    p->txn = txn;
    p->is_delete = is_delete;
    p->doc_off = d->arena.len;
    p->doc_len = doc_len;
    /* Deletes count too (their id, entry and map slot): a flood of them is bounded as well. */
    ix->pending_bytes += doc_len + id_len + PENDING_ENTRY_BYTES;
    return hanu_buf_append(&d->arena, doc, doc_len);
}

static int apply_staged(indexer *ix, const staged *s)
{
    const uint8_t *key = ix->stage_arena.data + s->key_off;
    const uint8_t *val = ix->stage_arena.data + s->val_off;
    dbstate *d = db_get(ix, s->db);
    if (!d) return HANU_ERR_NOMEM;
    switch (s->op) {
    case LOG_OP_CREATE_DB:
        /* A new database at this id: it starts empty (untyped ones have no kind byte). */
        d->kind = s->val_len ? val[0] : STORE_DB_UNTYPED;
        return d->nsegs || d->npending ? dbstate_reset(ix, d, 1) : HANU_OK;
    case LOG_OP_DROP_DB: {
        int rc = dbstate_reset(ix, d, 1);
        d->kind = KIND_UNKNOWN;
        return rc;
    }
    case LOG_OP_PUT:
    case LOG_OP_DELETE:
        if (d->kind == KIND_UNKNOWN) {
            uint8_t kind;
            /* Gone by now: a drop follows in the feed, which removes what this adds. */
            d->kind = store_db_kind(ix->st, s->db, &kind) == HANU_OK ? kind : STORE_DB_COLLECTION;
        }
        if (!is_collection(d->kind)) return HANU_OK;
        doc_cache_invalidate(ix->cache, s->db, (const char *)key, s->key_len);
        return pending_set(ix, d, (const char *)key, s->key_len, s->txn, val, s->val_len,
                           s->op == LOG_OP_DELETE);
    default:
        return HANU_OK;
    }
}

static int apply_pending(indexer *ix, dbstate *d);

/* Writes the pending documents out as segments now, as a refresh does but without
 * publishing (the next refresh or commit publishes them, the commit syncs them): a
 * segment builder's memory grows with the documents it holds, so an indexer that is
 * behind would otherwise hold everything it read since the last commit. */
static int cut(indexer *ix)
{
    int rc = HANU_OK;
    for (size_t i = 0; i < ix->ndbs && !rc; i++)
        if (ix->dbs[i]->npending) rc = apply_pending(ix, ix->dbs[i]);
    if (rc) {
        note_failure(ix, "writing pending documents at txn %" PRIu64 " failed: %s; the indexer stops (a "
                     "restart resumes from the last commit)", ix->consumed, hanu_status_str(rc));
        return rc;
    }
    ix->uncommitted_bytes += ix->pending_bytes;
    ix->pending_bytes = 0;
    pthread_mutex_lock(&ix->mu);
    ix->cuts++;
    pthread_mutex_unlock(&ix->mu);
    return HANU_OK;
}

static int bound_pending(indexer *ix)
{
    if (ix->pending_bytes > ix->pending_bytes_peak) {
        pthread_mutex_lock(&ix->mu);
        ix->pending_bytes_peak = ix->pending_bytes;
        pthread_mutex_unlock(&ix->mu);
    }
    return ix->pending_bytes >= ix->opt.pending_cut_bytes ? cut(ix) : HANU_OK;
}

/* Reads up to one batch of the feed into the working state (at most FEED_BATCH records
 * and about STAGE_BYTES_MAX of them); *got records. */
static int feed_step(indexer *ix, size_t *got)
{
    ix->nstage = 0;
    ix->stage_failed = 0;
    ix->stage_full = 0;
    hanu_buf_reset(&ix->stage_arena);
    uint64_t skipped0, skipped1;
    store_feed_get_stats(ix->feed, NULL, &skipped0);
    int rc = store_feed_next(ix->feed, FEED_BATCH, stage_change, ix, got);
    store_feed_get_stats(ix->feed, NULL, &skipped1);
    /* A full batch, or the most one call skips: the feed holds more at once. */
    ix->feed_more = *got >= FEED_BATCH || skipped1 - skipped0 >= STORE_FEED_SKIP_MAX || ix->stage_full;
    if (!rc && ix->stage_failed) rc = HANU_ERR_NOMEM;   /* a record half staged: never skip it */
    if (rc) {
        note_failure(ix, "the change feed failed at txn %" PRIu64 ": %s", store_feed_position(ix->feed),
                     hanu_status_str(rc));
        return rc;
    }
    for (size_t i = 0; i < ix->nstage && !rc; i++) {
        /* About every millisecond of indexing, let a waiting event loop run first: on
           one core a write that arrives mid-batch otherwise waits out the batch. */
        if ((i & 63) == 63) sched_yield();
        rc = apply_staged(ix, &ix->stage[i]);
        /* At the end of each record: past the bound, the pending documents become a
           segment, so they never exceed it by more than one record. */
        if (!rc && (i + 1 == ix->nstage || ix->stage[i + 1].txn != ix->stage[i].txn)) rc = bound_pending(ix);
    }
    if (rc) return rc;
    uint64_t pos = store_feed_position(ix->feed);
    if (pos > 0 && pos - 1 > ix->consumed) ix->consumed = pos - 1;
    return HANU_OK;
}

/* ------------------------------------------------------- the commit */

/* The builder of d's pending puts. check: each document's JSON is checked first
 * and bytes that are no document are left out (index_add_document checks as it
 * scans, but a failure leaves part of the document in the builder). */
static int build_pending(const dbstate *d, int check, index_builder **out, uint32_t *nput)
{
    index_builder *b = NULL;
    int rc = HANU_OK;
    *nput = 0;
    for (size_t i = 0; i < d->npending && !rc; i++) {
        const pending_doc *p = &d->pending[i];
        if (p->is_delete) continue;
        const char *doc = (const char *)d->arena.data + p->doc_off;
        if (check && json_validate(doc, p->doc_len, NULL, NULL) != HANU_OK) continue;
        if (!b && !(b = index_builder_new())) rc = HANU_ERR_NOMEM;
        if (!rc) rc = index_add_document(b, p->id, p->id_len, p->txn, doc, p->doc_len);
        (*nput)++;
    }
    *out = b;
    return rc;
}

/* Turns d's pending versions into deletions of what they replace and one new
 * segment, written without fdatasync: the commit that first names it syncs it
 * (on the commit thread). */
static int apply_pending(indexer *ix, dbstate *d)
{
    index_builder *b = NULL;
    uint32_t nput = 0;
    int rc = HANU_OK;
    for (size_t i = 0; i < d->npending && !rc; i++) {
        pending_doc *p = &d->pending[i];
        if (i + ID_PREFETCH_AHEAD < d->npending && d->committed.n) {   /* the map is large: a miss per id */
            const pending_doc *ahead = &d->pending[i + ID_PREFETCH_AHEAD];
            __builtin_prefetch(&d->committed.slots[id_home(&d->committed, ahead->id, ahead->id_len)]);
        }
        id_slot *old = id_map_find(&d->committed, p->id, p->id_len);
        if (old) {
            coll_seg *s = seg_find(d, old->val);
            rc = s ? u32_push(&s->fresh, old->ord) : HANU_ERR_CORRUPT;
            id_map_remove(&d->committed, old);
        }
    }
    /* A collection's documents were checked when written (the documents face), so
       they are scanned once, by index_add_document; should one fail all the same,
       the builder is made again with every document checked first. An untyped
       database may hold bytes that are no document: checked first, not indexed. */
    if (!rc) {
        int check = d->kind != STORE_DB_COLLECTION;
        rc = build_pending(d, check, &b, &nput);
        if (rc && rc != HANU_ERR_NOMEM && !check) {
            index_builder_free(b);
            rc = build_pending(d, 1, &b, &nput);
        }
    }
    if (!rc && nput) {
        uint64_t id = ix->next_file++;
        char path[1200], err[256];
        seg_path(ix, id, path, sizeof path);
        index_segment *seg = NULL;
        rc = index_builder_write_ex(b, path, 0);
        if (!rc) rc = index_segment_open(path, &seg, err, sizeof err);
        if (!rc) rc = seg_add(d, seg, id, NULL, 0, 0);
        if (!rc) d->segs[d->nsegs - 1].unsynced = 1;
        if (rc) note_failure(ix, "cannot write %s: %s", path, hanu_status_str(rc));
    }
    index_builder_free(b);
    pending_clear(d);
    d->dirty = 1;
    return rc;
}

/* Folds a segment's fresh deletions into its sorted list (in memory). */
static int fold_deletions(coll_seg *s)
{
    if (!s->fresh.n) return HANU_OK;
    for (uint32_t i = 0; i < s->fresh.n; i++) {
        int rc = u32_push(&s->deleted, s->fresh.v[i]);
        if (rc) return rc;
    }
    s->fresh.n = 0;
    s->del_dirty = 1;
    qsort(s->deleted.v, s->deleted.n, sizeof *s->deleted.v, cmp_u32);
    return HANU_OK;
}

/* The durable half of a commit, prepared by the indexer thread (everything it
 * needs copied or handed over) and done by the commit thread. */
typedef struct del_write {
    uint64_t seg;
    uint32_t generation, n;
    uint32_t *ords;              /* sorted */
} del_write;

typedef struct durable_job {
    uint64_t txn;
    uint64_t *sync;              /* refresh segments to fdatasync before COMMIT names them */
    size_t nsync, synccap;
    del_write *dels;             /* deletion lists to write */
    size_t ndels, delcap;
    index_commit commit;
    char (*doomed)[64];          /* files to remove once COMMIT is durable */
    size_t ndoomed;
    seg_ref **retired;           /* merged away: released once COMMIT is durable */
    size_t nretired;
} durable_job;

static void durable_free(durable_job *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->ndels; i++) free(j->dels[i].ords);
    for (size_t i = 0; i < j->nretired; i++) seg_ref_release(j->retired[i]);
    free(j->sync);
    free(j->dels);
    free(j->commit.segments);
    free(j->doomed);
    free(j->retired);
    free(j);
}

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return HANU_OK;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, c * size);
    if (!p) return HANU_ERR_NOMEM;
    *v = p;
    *cap = c;
    return HANU_OK;
}

/* Folds a segment's fresh deletions and, when its list changed since the last
 * commit, stages the list's next generation in j (a copy). Returns 1 in *empty
 * when nothing of the segment is live any more (its file is doomed instead). */
static int stage_deletions(indexer *ix, coll_seg *s, durable_job *j, int *empty)
{
    *empty = 0;
    int rc = fold_deletions(s);
    if (rc || !s->del_dirty) return rc;
    s->del_dirty = 0;
    char name[64];
    if (s->generation) {
        del_name(s->ref->id, s->generation, name, sizeof name);
        rc = doom(ix, name);
        if (rc) return rc;
    }
    if (s->deleted.n == index_segment_docs(s->ref->seg)) {
        *empty = 1;
        snprintf(name, sizeof name, "seg-%" PRIu64 ".hix", s->ref->id);
        return doom(ix, name);
    }
    if (grow((void **)&j->dels, &j->delcap, j->ndels, sizeof *j->dels)) return HANU_ERR_NOMEM;
    uint32_t *ords = malloc(s->deleted.n * sizeof *ords);
    if (!ords) return HANU_ERR_NOMEM;
    memcpy(ords, s->deleted.v, s->deleted.n * sizeof *ords);
    j->dels[j->ndels++] = (del_write){ s->ref->id, ++s->generation, s->deleted.n, ords };
    return HANU_OK;
}

/* Makes a refresh's segment file durable (the commit's fsync of the folder
 * makes its name durable). */
static int sync_segment(indexer *ix, uint64_t id)
{
    char path[1200];
    seg_path(ix, id, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd < 0 || fdatasync(fd) != 0 ? HANU_ERR_IO : HANU_OK;
    if (fd >= 0) close(fd);
    if (rc) note_failure(ix, "cannot write %s durably (fdatasync): %s", path, strerror(errno));
    return rc;
}

/* The snapshots now cover txn: readers see it from the next acquire on. */
static void published_upto(indexer *ix, uint64_t txn)
{
    if (txn <= atomic_load(&ix->visible_txn)) return;
    atomic_store(&ix->visible_txn, txn);
    if (ix->opt.on_publish) ix->opt.on_publish(ix->opt.publish_ctx, txn);
}

static int cmp_commit_seg(const void *a, const void *b)
{
    uint64_t x = ((const index_commit_segment *)a)->segment, y = ((const index_commit_segment *)b)->segment;
    return x < y ? -1 : x > y;
}

/* COMMIT's contents for the working state as of txn (c->segments malloc'd). */
static int commit_contents(indexer *ix, uint64_t txn, index_commit *out)
{
    size_t n = 0;
    for (size_t i = 0; i < ix->ndbs; i++) n += ix->dbs[i]->nsegs;
    index_commit c = { txn, ix->next_file, (uint32_t)n, calloc(n ? n : 1, sizeof(index_commit_segment)) };
    if (!c.segments) return HANU_ERR_NOMEM;
    n = 0;
    for (size_t i = 0; i < ix->ndbs; i++)
        for (uint32_t j = 0; j < ix->dbs[i]->nsegs; j++) {
            const coll_seg *s = &ix->dbs[i]->segs[j];
            c.segments[n++] = (index_commit_segment){ s->ref->id, ix->dbs[i]->db,
                                                      index_segment_docs(s->ref->seg), s->deleted.n,
                                                      s->generation };
        }
    qsort(c.segments, n, sizeof *c.segments, cmp_commit_seg);
    *out = c;
    return HANU_OK;
}


/* ------------------------------------------------------- merges */

static void job_free(merge_job *j)
{
    if (!j) return;
    for (uint32_t i = 0; i < j->n; i++) {
        if (j->in) seg_ref_release(j->in[i]);
        if (j->deleted) free(j->deleted[i]);
        if (j->map) free(j->map[i]);
    }
    free(j->in);
    free(j->deleted);
    free(j->ndeleted);
    free(j->map);
    if (j->out) index_segment_close(j->out);
    free(j);
}

/* A job for segments pick[0..n) of d, holding their references. */
static merge_job *job_make(indexer *ix, dbstate *d, const uint32_t *pick, uint32_t n)
{
    merge_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->db = d->db;
    j->epoch = d->epoch;
    j->in = calloc(n, sizeof *j->in);
    j->deleted = calloc(n, sizeof *j->deleted);
    j->ndeleted = calloc(n, sizeof *j->ndeleted);
    j->map = calloc(n, sizeof *j->map);
    if (!j->in || !j->deleted || !j->ndeleted || !j->map) {
        job_free(j);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++, j->n++) {
        const coll_seg *s = &d->segs[pick[i]];
        uint32_t docs = index_segment_docs(s->ref->seg);
        j->map[i] = malloc((docs ? docs : 1) * sizeof **j->map);
        j->deleted[i] = malloc((s->deleted.n ? s->deleted.n : 1) * sizeof **j->deleted);
        atomic_fetch_add(&s->ref->refs, 1);
        j->in[i] = s->ref;
        if (!j->map[i] || !j->deleted[i]) {
            j->n++;
            job_free(j);
            return NULL;
        }
        if (s->deleted.n) memcpy(j->deleted[i], s->deleted.v, s->deleted.n * sizeof **j->deleted);
        j->ndeleted[i] = s->deleted.n;
        j->bytes_in += index_segment_bytes(s->ref->seg);
    }
    j->out_id = ix->next_file++;
    return j;
}

/* Right after a commit (no fresh deletions): hands the merge the policy
 * picks to the merge thread, looking at the collections in turn. */
static void merge_schedule(indexer *ix)
{
    if (ix->opt.merge_policy == INDEX_MERGE_NONE || !ix->merge_started) return;
    pthread_mutex_lock(&ix->mu);
    int busy = ix->job_state != JOB_NONE && ix->job_state != JOB_INSTALLING;
    pthread_mutex_unlock(&ix->mu);
    if (busy) return;
    for (size_t k = 0; k < ix->ndbs; k++) {
        size_t at = (ix->merge_cursor + k) % ix->ndbs;
        dbstate *d = ix->dbs[at];
        if (!d->nsegs) continue;
        index_merge_candidate *c = malloc(d->nsegs * sizeof *c);
        uint32_t *pick = malloc(d->nsegs * sizeof *pick);
        uint32_t n = 0;
        if (c && pick) {
            for (uint32_t i = 0; i < d->nsegs; i++)
                c[i] = (index_merge_candidate){ index_segment_bytes(d->segs[i].ref->seg),
                                                index_segment_docs(d->segs[i].ref->seg),
                                                d->segs[i].deleted.n + d->segs[i].fresh.n };
            n = index_merge_pick(ix->opt.merge_policy, c, d->nsegs, ix->opt.max_segment_bytes, pick);
        }
        merge_job *j = n ? job_make(ix, d, pick, n) : NULL;
        free(c);
        free(pick);
        if (!j) continue;
        ix->merge_cursor = at + 1;
        char name[STORE_DB_NAME_MAX + 24];
        say(ix, "merge of %u segment(s) of collection %s (%" PRIu64 " bytes) into seg-%" PRIu64
            " started", j->n, collection_name(ix, j->db, name, sizeof name), j->bytes_in, j->out_id);
        pthread_mutex_lock(&ix->mu);
        ix->job = j;
        ix->job_state = JOB_QUEUED;
        pthread_cond_signal(&ix->merge_cv);
        pthread_mutex_unlock(&ix->mu);
        return;
    }
}

/* The merge thread's work: writes and opens the merged segment. */
static void merge_run(indexer *ix, merge_job *j)
{
    uint64_t t0 = hanu_now_ns();
    char path[1200], err[256] = "";
    seg_path(ix, j->out_id, path, sizeof path);
    index_merge_input *in = calloc(j->n, sizeof *in);
    j->rc = in ? HANU_OK : HANU_ERR_NOMEM;
    for (uint32_t i = 0; in && i < j->n; i++)
        in[i] = (index_merge_input){ j->in[i]->seg, j->deleted[i], j->ndeleted[i] };
    if (!j->rc) j->rc = index_merge_write(in, j->n, path, j->map, &j->docs);
    if (!j->rc) j->rc = index_segment_open(path, &j->out, err, sizeof err);
    if (j->rc) say(ix, "merge into seg-%" PRIu64 " failed: %s %s", j->out_id, hanu_status_str(j->rc), err);
    free(in);
    /* Tests make merges slow so that a kill lands in one. */
    for (uint32_t waited = 0; waited < ix->opt.merge_delay_ms; waited += 10) {
        pthread_mutex_lock(&ix->mu);
        int stop = ix->stop;
        pthread_mutex_unlock(&ix->mu);
        if (stop) break;
        usleep(10000);
    }
    j->ns = hanu_now_ns() - t0;
}

static void *merge_main(void *arg)
{
    indexer *ix = arg;
    /* Below the writers and readers: a merge only saves future query work. */
    if (hanu_thread_background(MERGE_NICE) != 0)
        say(ix, "cannot lower the merge thread's priority: %s", strerror(errno));
    pthread_mutex_lock(&ix->mu);
    while (!ix->stop) {
        if (ix->job_state != JOB_QUEUED) {
            pthread_cond_wait(&ix->merge_cv, &ix->mu);
            continue;
        }
        merge_job *j = ix->job;
        ix->job_state = JOB_RUNNING;
        pthread_mutex_unlock(&ix->mu);
        merge_run(ix, j);
        pthread_mutex_lock(&ix->mu);
        ix->job_state = JOB_DONE;
        pthread_cond_signal(&ix->wake);
    }
    pthread_mutex_unlock(&ix->mu);
    return NULL;
}

static int retire(indexer *ix, seg_ref *r)
{
    if (ix->nretired == ix->retcap) {
        size_t cap = ix->retcap ? ix->retcap * 2 : 16;
        seg_ref **p = realloc(ix->retired, cap * sizeof *p);
        if (!p) return HANU_ERR_NOMEM;
        ix->retired = p;
        ix->retcap = cap;
    }
    ix->retired[ix->nretired++] = r;
    return HANU_OK;
}

/* Once the commit without them is durable (commit thread): each merged-away
 * file goes when the last snapshot that holds it is released. */
static void release_retired(indexer *ix, durable_job *j)
{
    for (size_t i = 0; i < j->nretired; i++) {
        char path[1200];
        seg_path(ix, j->retired[i]->id, path, sizeof path);
        j->retired[i]->unlink_path = strdup(path);
        seg_ref_release(j->retired[i]);
    }
    j->nretired = 0;
}

/* Moves an input's live documents to the merged segment: its deletions since
 * the merge began become deletions of the merged segment, and the _id map
 * points at the new ordinals (and borrows the new segment's id bytes). */
static int move_input(dbstate *d, coll_seg *s, const uint32_t *map, coll_seg *ns)
{
    const u32_vec *lists[2] = { &s->deleted, &s->fresh };
    for (int l = 0; l < 2; l++)
        for (uint32_t k = 0; k < lists[l]->n; k++) {
            uint32_t m = map[lists[l]->v[k]];
            if (m != INDEX_ORD_END && u32_push(&ns->fresh, m)) return HANU_ERR_NOMEM;
        }
    uint32_t docs = index_segment_docs(s->ref->seg);
    for (uint32_t ord = 0; ord < docs; ord++) {
        if (map[ord] == INDEX_ORD_END) continue;
        size_t len, nlen;
        const char *id = index_segment_doc_id(s->ref->seg, ord, &len);
        id_slot *slot = id_map_find(&d->committed, id, len);
        if (!slot || slot->val != s->ref->id || slot->ord != ord) continue;   /* deleted since */
        slot->id = index_segment_doc_id(ns->ref->seg, map[ord], &nlen);
        slot->val = ns->ref->id;
        slot->ord = map[ord];
    }
    return HANU_OK;
}

/* An input emptied while the merge ran (every document replaced or deleted,
 * the segment already gone from the commit): all its documents are deletions. */
static int drop_input(const merge_job *j, uint32_t i, coll_seg *ns)
{
    uint32_t docs = index_segment_docs(j->in[i]->seg);
    for (uint32_t ord = 0; ord < docs; ord++)
        if (j->map[i][ord] != INDEX_ORD_END && u32_push(&ns->fresh, j->map[i][ord])) return HANU_ERR_NOMEM;
    return HANU_OK;
}

/* Swaps a finished merge into the working state; the commit it is part of
 * makes it durable. A collection dropped or created again meanwhile voids it. */
static int merge_install(indexer *ix, merge_job *j)
{
    dbstate *d = db_find(ix, j->db, NULL);
    char path[1200];
    seg_path(ix, j->out_id, path, sizeof path);
    int ok = !j->rc && d && d->epoch == j->epoch;
    if (!ok || !j->docs) {
        unlink(path);
        if (!ok && !j->rc) say(ix, "merge into seg-%" PRIu64 " abandoned: its collection was dropped", j->out_id);
        pthread_mutex_lock(&ix->mu);
        if (ok) ix->merges++;
        else ix->merges_abandoned++;
        pthread_mutex_unlock(&ix->mu);
        if (!ok) return HANU_OK;
    }
    coll_seg ns = { .ref = NULL };
    if (j->docs) {
        ns.ref = calloc(1, sizeof *ns.ref);
        if (!ns.ref) return HANU_ERR_NOMEM;
        ns.ref->seg = j->out;
        ns.ref->id = j->out_id;
        atomic_init(&ns.ref->refs, 1);
        j->out = NULL;
    }
    int rc = HANU_OK;
    for (uint32_t i = 0; i < j->n && !rc; i++) {
        coll_seg *s = seg_find(d, j->in[i]->id);
        if (!s) {
            if (ns.ref) rc = drop_input(j, i, &ns);
            continue;
        }
        if (ns.ref) rc = move_input(d, s, j->map[i], &ns);
        char name[64];
        del_name(s->ref->id, s->generation, name, sizeof name);
        if (!rc && s->generation) rc = doom(ix, name);
        if (!rc) rc = retire(ix, s->ref);
        if (rc) break;
        free(s->deleted.v);
        free(s->fresh.v);
        memmove(s, s + 1, (size_t)(d->segs + d->nsegs - s - 1) * sizeof *s);
        d->nsegs--;
    }
    if (!rc && ns.ref) {   /* room: n >= 1 inputs just left */
        uint32_t at = 0;
        while (at < d->nsegs && d->segs[at].ref->id < ns.ref->id) at++;
        memmove(d->segs + at + 1, d->segs + at, (d->nsegs - at) * sizeof *d->segs);
        d->segs[at] = ns;
        d->nsegs++;
        ns.ref = NULL;
    }
    if (ns.ref) {
        seg_ref_release(ns.ref);
        free(ns.fresh.v);
        return rc;
    }
    d->dirty = 1;
    uint64_t bytes = 0;
    coll_seg *m = seg_find(d, j->out_id);
    if (m) bytes = index_segment_bytes(m->ref->seg);
    pthread_mutex_lock(&ix->mu);
    if (j->docs) ix->merges++;
    ix->merge_bytes += bytes;
    ix->merge_docs += j->docs;
    ix->merge_ns += j->ns;
    pthread_mutex_unlock(&ix->mu);
    char name[STORE_DB_NAME_MAX + 24];
    say(ix, "merged %u segment(s) of collection %s into seg-%" PRIu64 ": %" PRIu32
        " documents, %" PRIu64 " bytes, %" PRIu64 " ms", j->n, collection_name(ix, j->db, name, sizeof name),
        j->out_id, j->docs, bytes, j->ns / 1000000);
    return HANU_OK;
}

/* Rebuild progress on stderr, at most once a second, and its end. */
static void rebuild_progress(indexer *ix, uint64_t txn)
{
    if (!ix->rebuilding) return;
    uint64_t now = hanu_now_ns();
    if (txn >= ix->rebuild_target) {
        say(ix, "rebuild done: txn %" PRIu64 " reached", txn);
        pthread_mutex_lock(&ix->mu);
        ix->rebuilding = 0;
        pthread_mutex_unlock(&ix->mu);
    } else if (now - ix->last_progress_ns >= PROGRESS_EVERY_NS) {
        say(ix, "rebuilding: txn %" PRIu64 " of %" PRIu64 " (%" PRIu64 "%%)", txn, ix->rebuild_target,
            txn * 100 / ix->rebuild_target);
        ix->last_progress_ns = now;
    }
}

/* The commit's first half, on the indexer thread: installs a finished merge,
 * turns the pending versions into a segment, stages the deletion lists,
 * builds COMMIT's contents, publishes, and hands the rest to the commit thread
 * (commit_durable). */
static int commit(indexer *ix)
{
    uint64_t txn = ix->consumed;
    durable_job *dj = calloc(1, sizeof *dj);
    if (!dj) return HANU_ERR_NOMEM;
    dj->txn = txn;
    int rc = HANU_OK;
    merge_job *done = NULL;
    pthread_mutex_lock(&ix->mu);
    if (ix->job_state == JOB_DONE) {
        done = ix->job;
        ix->job = NULL;
        ix->job_state = JOB_INSTALLING;   /* still "merging" in the stats until the next is queued */
    }
    pthread_mutex_unlock(&ix->mu);
    if (done) rc = merge_install(ix, done);
    job_free(done);
    for (size_t i = 0; i < ix->ndbs && !rc; i++)
        if (ix->dbs[i]->npending) rc = apply_pending(ix, ix->dbs[i]);
    for (size_t i = 0; i < ix->ndbs && !rc; i++) {
        dbstate *d = ix->dbs[i];
        for (uint32_t k = 0; k < d->nsegs && !rc; k++) {
            coll_seg *s = &d->segs[k];
            int empty;
            if (s->unsynced) {
                rc = grow((void **)&dj->sync, &dj->synccap, dj->nsync, sizeof *dj->sync);
                if (rc) break;
                dj->sync[dj->nsync++] = s->ref->id;
                s->unsynced = 0;
            }
            rc = stage_deletions(ix, s, dj, &empty);
            if (rc || !empty) continue;
            d->dirty = 1;   /* a refresh may have published it already, all deleted */
            seg_ref_release(s->ref);
            free(s->deleted.v);
            free(s->fresh.v);
            memmove(s, s + 1, (d->nsegs - k - 1) * sizeof *s);
            d->nsegs--;
            k--;
        }
    }
    if (!rc) rc = commit_contents(ix, txn, &dj->commit);
    if (!rc) rc = publish_dirty(ix, txn);
    if (rc) {
        durable_free(dj);
        note_failure(ix, "commit at txn %" PRIu64 " failed: %s; the indexer stops (a restart resumes "
                     "from the last commit)", txn, hanu_status_str(rc));
        return rc;
    }
    /* What goes once this COMMIT is durable is the commit thread's now. */
    dj->doomed = ix->doomed;
    dj->ndoomed = ix->ndoomed;
    ix->doomed = NULL;
    ix->ndoomed = ix->doomcap = 0;
    dj->retired = ix->retired;
    dj->nretired = ix->nretired;
    ix->retired = NULL;
    ix->nretired = ix->retcap = 0;
    merge_schedule(ix);
    pthread_mutex_lock(&ix->mu);
    if (ix->job_state == JOB_INSTALLING) ix->job_state = JOB_NONE;
    ix->djob = dj;
    ix->committing = 1;
    pthread_cond_signal(&ix->commit_cv);
    pthread_mutex_unlock(&ix->mu);
    rebuild_progress(ix, txn);
    ix->pending_bytes = 0;
    ix->uncommitted_bytes = 0;
    ix->last_commit_ns = hanu_now_ns();
    published_upto(ix, txn);
    return HANU_OK;
}

/* The commit's second half, on the commit thread: the refresh segments synced,
 * the deletion lists written, COMMIT replaced; then what it no longer names is
 * removed and the watermark advances. */
static int commit_durable(indexer *ix, durable_job *j)
{
    int rc = HANU_OK;
    for (size_t i = 0; i < j->nsync && !rc; i++) rc = sync_segment(ix, j->sync[i]);
    for (size_t i = 0; i < j->ndels && !rc; i++) {
        char path[1200];
        del_path(ix, j->dels[i].seg, j->dels[i].generation, path, sizeof path);
        rc = index_deletes_write(path, j->dels[i].seg, j->dels[i].generation, j->dels[i].ords, j->dels[i].n);
        if (rc) note_failure(ix, "cannot write %s: %s", path, hanu_status_str(rc));
    }
    if (!rc && (rc = index_commit_write(ix->dir, &j->commit)) != HANU_OK)
        note_failure(ix, "cannot write %s/COMMIT: %s", ix->dir, hanu_status_str(rc));
    if (!rc) {
        char path[1200];
        for (size_t i = 0; i < j->ndoomed; i++) {
            snprintf(path, sizeof path, "%s/%s", ix->dir, j->doomed[i]);
            unlink(path);
        }
        release_retired(ix, j);
        rc = store_watermark_advance(ix->st, WATERMARK, j->txn);
    }
    if (rc) {
        note_failure(ix, "commit at txn %" PRIu64 " failed: %s; the indexer stops (a restart resumes "
                     "from the last commit)", j->txn, hanu_status_str(rc));
        return rc;
    }
    pthread_mutex_lock(&ix->mu);
    ix->committed_txn = j->txn;
    ix->commits++;
    pthread_cond_broadcast(&ix->committed_cv);
    pthread_mutex_unlock(&ix->mu);
    return HANU_OK;
}

static void *commit_main(void *arg)
{
    indexer *ix = arg;
    /* the indexer's own work, its priority (a waiting query needs the commit too) */
    if (ix->opt.nice > 0) (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), ix->opt.nice);
    pthread_mutex_lock(&ix->mu);
    while (ix->djob || !ix->commit_stop) {
        if (!ix->djob) {
            pthread_cond_wait(&ix->commit_cv, &ix->mu);
            continue;
        }
        durable_job *j = ix->djob;
        ix->djob = NULL;
        int failed = ix->failed;
        pthread_mutex_unlock(&ix->mu);
        int rc = failed ? HANU_ERR_STOPPED : commit_durable(ix, j);
        durable_free(j);
        pthread_mutex_lock(&ix->mu);
        ix->committing = 0;
        if (rc && !ix->failed) {
            ix->failed = 1;
            pthread_cond_broadcast(&ix->committed_cv);
        }
        pthread_cond_signal(&ix->wake);   /* the indexer may commit again */
    }
    pthread_mutex_unlock(&ix->mu);
    return NULL;
}

/* Refresh segments pile up: one a refresh, about 100 a second under a write load
 * with fresh queries, faster than merges (installed at commits) fold them. So
 * among the segments no COMMIT names yet, TAIL_FACTOR of one size class (docs,
 * in powers of TAIL_FACTOR) are merged at once into one, itself unsynced: a
 * collection holds a few of them per power of TAIL_FACTOR of what was written
 * since the last commit, and a document is rewritten once per class it climbs. */
#define TAIL_FACTOR 4
#define TAIL_CLASSES 16

static uint32_t size_class(uint32_t docs)
{
    uint32_t c = 0;
    while (docs >= TAIL_FACTOR && c < TAIL_CLASSES - 1) {
        docs /= TAIL_FACTOR;
        c++;
    }
    return c;
}

/* Merges segments at[0..n) of d (unsynced, their deletions folded) into one
 * unsynced segment; their files go with their last reader (no COMMIT names them). */
static int merge_now(indexer *ix, dbstate *d, const uint32_t *at, uint32_t n)
{
    index_merge_input in[TAIL_FACTOR];
    uint32_t *map[TAIL_FACTOR] = {0}, docs = 0;
    int rc = HANU_OK;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const coll_seg *s = &d->segs[at[i]];
        in[i] = (index_merge_input){ s->ref->seg, s->deleted.v, s->deleted.n };
        uint32_t nd = index_segment_docs(s->ref->seg);
        if (!(map[i] = malloc((nd ? nd : 1) * sizeof **map))) rc = HANU_ERR_NOMEM;
    }
    uint64_t id = ix->next_file++;
    char path[1200], err[256] = "";
    seg_path(ix, id, path, sizeof path);
    coll_seg ns = { .ref = NULL, .unsynced = 1 };
    if (!rc) rc = index_merge_write_ex(in, n, path, map, &docs, 0);
    if (!rc && docs) {
        index_segment *seg = NULL;
        rc = index_segment_open(path, &seg, err, sizeof err);
        if (!rc && !(ns.ref = calloc(1, sizeof *ns.ref))) {
            index_segment_close(seg);
            rc = HANU_ERR_NOMEM;
        }
        if (!rc) {
            ns.ref->seg = seg;
            ns.ref->id = id;
            atomic_init(&ns.ref->refs, 1);
        }
    } else if (!rc) {
        unlink(path);
    }
    for (uint32_t i = 0; i < n && !rc && ns.ref; i++) rc = move_input(d, &d->segs[at[i]], map[i], &ns);
    for (uint32_t i = 0; i < n; i++) free(map[i]);
    if (rc) {
        if (ns.ref) seg_ref_release(ns.ref);
        free(ns.fresh.v);
        note_failure(ix, "cannot merge refresh segments into %s: %s %s", path, hanu_status_str(rc), err);
        return rc;
    }
    for (uint32_t i = n; i-- > 0;) {   /* at is increasing: from the back, the indexes stay right */
        coll_seg *s = &d->segs[at[i]];
        char old[1200];
        seg_path(ix, s->ref->id, old, sizeof old);
        s->ref->unlink_path = strdup(old);
        seg_ref_release(s->ref);
        free(s->deleted.v);
        free(s->fresh.v);
        memmove(s, s + 1, (size_t)(d->segs + d->nsegs - s - 1) * sizeof *s);
        d->nsegs--;
    }
    if (ns.ref) d->segs[d->nsegs++] = ns;   /* room: n >= 2 left; the newest id goes last */
    d->dirty = 1;
    return HANU_OK;
}

static int merge_tail(indexer *ix, dbstate *d)
{
    for (;;) {
        uint32_t count[TAIL_CLASSES] = {0}, at[TAIL_FACTOR], n = 0, c;
        for (uint32_t k = 0; k < d->nsegs; k++)
            if (d->segs[k].unsynced) count[size_class(index_segment_docs(d->segs[k].ref->seg))]++;
        for (c = 0; c < TAIL_CLASSES && count[c] < TAIL_FACTOR; c++) {}
        if (c == TAIL_CLASSES) return HANU_OK;
        for (uint32_t k = 0; k < d->nsegs && n < TAIL_FACTOR; k++)
            if (d->segs[k].unsynced && size_class(index_segment_docs(d->segs[k].ref->seg)) == c) at[n++] = k;
        int rc = merge_now(ix, d, at, n);
        if (rc) return rc;
    }
}

/* Publishes what the feed brought since the last publish, not durably (see the
 * top of this file): no fdatasync, no deletion file, no COMMIT. */
static int refresh(indexer *ix)
{
    uint64_t txn = ix->consumed;
    int rc = HANU_OK;
    for (size_t i = 0; i < ix->ndbs && !rc; i++) {
        dbstate *d = ix->dbs[i];
        if (d->npending) rc = apply_pending(ix, d);
        for (uint32_t j = 0; j < d->nsegs && !rc; j++) {
            if (!d->segs[j].fresh.n) continue;
            rc = fold_deletions(&d->segs[j]);
            d->dirty = 1;
        }
        d->refreshed = d->dirty;
    }
    if (!rc) rc = publish_dirty(ix, txn);
    if (!rc) {
        ix->uncommitted_bytes += ix->pending_bytes;
        ix->pending_bytes = 0;
        pthread_mutex_lock(&ix->mu);
        ix->refreshes++;
        pthread_mutex_unlock(&ix->mu);
        published_upto(ix, txn);   /* the readers held for txn go now, before the merges below */
    }
    /* Then the refresh segments merged among themselves, published again (the same txn). */
    for (size_t i = 0; i < ix->ndbs && !rc; i++) {
        if (ix->dbs[i]->refreshed) rc = merge_tail(ix, ix->dbs[i]);
        ix->dbs[i]->refreshed = 0;
    }
    if (!rc) rc = publish_dirty(ix, txn);
    if (rc) {
        note_failure(ix, "refresh at txn %" PRIu64 " failed: %s; the indexer stops (a restart resumes "
                     "from the last commit)", txn, hanu_status_str(rc));
        return rc;
    }
    return HANU_OK;
}

/* ------------------------------------------------------- the thread */

/* The store's append kick (writer thread): the sleeping indexer has a record to read. */
static void kick(void *arg)
{
    indexer *ix = arg;
    pthread_mutex_lock(&ix->mu);
    pthread_cond_signal(&ix->wake);
    pthread_mutex_unlock(&ix->mu);
}

/* Waits for the next poll; after IDLE_POLLS_BEFORE_SLEEP empty ones, with nothing left
   to commit, until the next append (or a waiter, a refresh, a merge, stop): an idle
   server's indexer does not wake 200 times a second. mu held. */
static void idle_wait(indexer *ix, unsigned *empty_polls)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int sleep = *empty_polls >= IDLE_POLLS_BEFORE_SLEEP && ix->consumed <= ix->committed_txn && !ix->committing;
    if (sleep) {
        store_arm_append_kick(ix->st);
        if (store_last_txn(ix->st) > ix->consumed) return;   /* appended before the arm */
        ts.tv_sec += IDLE_SLEEP_MAX_S;
    } else {
        ts.tv_nsec += IDLE_POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
    }
    pthread_cond_timedwait(&ix->wake, &ix->mu, &ts);
}

static void *indexer_main(void *arg)
{
    indexer *ix = arg;
    unsigned empty_polls = 0;
    uint64_t interval_ns = (uint64_t)ix->opt.commit_interval_ms * 1000000u;
    /* Writes first when asked: a thread may always lower its own priority (raising it back
       would need CAP_SYS_NICE, so the value is fixed for the run). */
    /* Not SCHED_BATCH: a fresh query waits for this thread to reach its txn, and
       batch scheduling delayed its wake-ups behind the loop (bench/fresh-p99.sh: find
       and search p99 20.8 ms against 14-16 ms). Writes first only when asked. */
    if (ix->opt.nice > 0 && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), ix->opt.nice) != 0)
        say(ix, "cannot lower the indexer thread's priority: %s", strerror(errno));
    merge_schedule(ix);   /* what the last run left to merge */
    pthread_mutex_lock(&ix->mu);
    while (!ix->stop && !ix->failed) {
        pthread_mutex_unlock(&ix->mu);
        size_t got = 0;
        uint64_t consumed_before = ix->consumed;
        int rc = feed_step(ix, &got);
        pthread_mutex_lock(&ix->mu);
        empty_polls = ix->consumed == consumed_before ? empty_polls + 1 : 0;
        /* A waiter's commit comes once the feed reaches its txn, not one per batch. */
        int waited = ix->waiters && ix->wanted_txn > ix->committed_txn && ix->consumed >= ix->wanted_txn;
        int due = !ix->committing &&
                  ((ix->consumed > ix->committed_txn &&
                    (waited || ix->commit_asked ||
                     ix->uncommitted_bytes + ix->pending_bytes > UNCOMMITTED_BYTES_MAX ||
                     hanu_now_ns() - ix->last_commit_ns >= interval_ns)) ||
                   ix->job_state == JOB_DONE);   /* a finished merge goes in with a commit */
        /* A refresh once the feed reaches what a reader waits for (or has no more). */
        uint64_t visible = atomic_load(&ix->visible_txn);
        int refresh_due = ix->refresh_wanted > visible && ix->consumed > visible &&
                          (ix->consumed >= ix->refresh_wanted || !ix->feed_more);
        if (!rc && due) {
            ix->commit_asked = 0;
            pthread_mutex_unlock(&ix->mu);
            rc = commit(ix);
            pthread_mutex_lock(&ix->mu);
        } else if (!rc && refresh_due) {
            pthread_mutex_unlock(&ix->mu);
            rc = refresh(ix);
            pthread_mutex_lock(&ix->mu);
        } else if (!rc && !ix->feed_more &&
                   !(got && ix->waiters && ix->wanted_txn > ix->consumed) &&
                   !(got && ix->refresh_wanted > ix->consumed)) {
            /* Caught up: wait for the next poll (or a waiter) instead of coming back after
               every group commit's few records; what arrives meanwhile is read as one batch.
               A full batch is followed at once, so the lag under load stays bounded. */
            idle_wait(ix, &empty_polls);
        }
        if (rc) {
            ix->failed = 1;
            if (!ix->failure[0])
                snprintf(ix->failure, sizeof ix->failure, "stopped after txn %" PRIu64 ": %s", ix->committed_txn,
                         hanu_status_str(rc));
            pthread_cond_broadcast(&ix->committed_cv);
        }
    }
    pthread_mutex_unlock(&ix->mu);
    return NULL;
}

int indexer_wait_txn(indexer *ix, uint64_t txn, uint32_t timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)timeout_ms * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    int rc = HANU_OK;
    pthread_mutex_lock(&ix->mu);
    ix->waiters++;
    if (txn > ix->wanted_txn) ix->wanted_txn = txn;
    pthread_cond_signal(&ix->wake);
    while (ix->committed_txn < txn && !ix->failed)
        if (pthread_cond_timedwait(&ix->committed_cv, &ix->mu, &ts) == ETIMEDOUT) break;
    if (ix->committed_txn < txn) rc = ix->failed ? HANU_ERR_STOPPED : HANU_ERR_BUSY;
    ix->waiters--;
    pthread_mutex_unlock(&ix->mu);
    return rc;
}

void indexer_refresh_upto(indexer *ix, uint64_t txn)
{
    if (txn <= atomic_load(&ix->visible_txn)) return;
    pthread_mutex_lock(&ix->mu);
    if (txn > ix->refresh_wanted) {
        ix->refresh_wanted = txn;
        pthread_cond_signal(&ix->wake);
    }
    pthread_mutex_unlock(&ix->mu);
}

uint64_t indexer_visible_txn(indexer *ix)
{
    return atomic_load(&ix->visible_txn);
}

void indexer_commit_now(indexer *ix)
{
    pthread_mutex_lock(&ix->mu);
    ix->commit_asked = 1;
    pthread_cond_signal(&ix->wake);
    pthread_mutex_unlock(&ix->mu);
}

uint64_t indexer_txn(indexer *ix)
{
    pthread_mutex_lock(&ix->mu);
    uint64_t t = ix->committed_txn;
    pthread_mutex_unlock(&ix->mu);
    return t;
}

int indexer_failed(indexer *ix)
{
    return atomic_load(&ix->failed);
}

void indexer_get_stats(indexer *ix, indexer_stats *st)
{
    uint64_t last = store_last_txn(ix->st);
    pthread_mutex_lock(&ix->mu);
    *st = (indexer_stats){ ix->committed_txn, last > ix->committed_txn ? last - ix->committed_txn : 0,
                           ix->segments, ix->bytes, ix->live_docs, ix->commits, ix->rebuilt, ix->failed,
                           ix->merges, ix->merges_abandoned, ix->merge_bytes, ix->merge_docs,
                           ix->merge_ns / 1000000, ix->job_state != JOB_NONE, ix->rebuilding,
                           ix->rebuild_target, "", atomic_load(&ix->visible_txn), ix->refreshes, ix->cuts,
                           ix->pending_bytes_peak, ix->committing };
    snprintf(st->failure, sizeof st->failure, "%s", ix->failure);
    pthread_mutex_unlock(&ix->mu);
}

void indexer_collection_stats(indexer *ix, uint32_t db, uint32_t *segments, uint64_t *live_docs,
                              uint64_t *bytes)
{
    *segments = 0;
    *live_docs = *bytes = 0;
    pthread_mutex_lock(&ix->mu);
    for (size_t i = 0; i < ix->npubs; i++)
        if (ix->pubs[i].db == db) {
            *segments = ix->pubs[i].snap->pub.nsegments;
            *live_docs = ix->pubs[i].snap->pub.live_docs;
            *bytes = ix->pubs[i].snap->bytes;
        }
    pthread_mutex_unlock(&ix->mu);
}

/* ------------------------------------------------------- open and close */

void indexer_options_default(indexer_options *o)
{
    *o = (indexer_options){ .commit_interval_ms = 500, .merge_policy = INDEX_MERGE_DEFAULT,
                            .max_segment_bytes = 256u << 20, .doc_cache_bytes = 64u << 20,
                            .pending_cut_bytes = PENDING_CUT_DEFAULT };
}

int index_doc_get(indexer *ix, uint32_t db, const char *id, size_t len, hanu_buf *out, uint64_t *txn)
{
    return doc_cache_get(ix->cache, ix->st, db, id, len, out, txn);
}

void indexer_doc_cache_stats(indexer *ix, doc_cache_stats *st)
{
    doc_cache_get_stats(ix->cache, st);
}

static void free_state(indexer *ix)
{
    for (size_t i = 0; i < ix->ndbs; i++) {
        dbstate_reset(ix, ix->dbs[i], 0);
        free(ix->dbs[i]);
    }
    free(ix->dbs);
    ix->dbs = NULL;
    ix->ndbs = ix->dbcap = 0;
    ix->ndoomed = 0;
}

/* Opens every segment and deletion list the commit names. */
static int load_commit(indexer *ix, const index_commit *c, char *err, size_t errcap)
{
    for (uint32_t i = 0; i < c->nsegments; i++) {
        const index_commit_segment *e = &c->segments[i];
        char path[1200];
        seg_path(ix, e->segment, path, sizeof path);
        index_segment *seg = NULL;
        int rc = index_segment_open(path, &seg, err, errcap);
        if (rc) {   /* the message names the file: an operator looks at it */
            char name[64];
            int n = snprintf(name, sizeof name, "seg-%" PRIu64 ".hix: ", e->segment);
            size_t have = strnlen(err, errcap);
            if (n > 0 && have + (size_t)n < errcap) {   /* prefix in place */
                memmove(err + n, err, have + 1);
                memcpy(err, name, (size_t)n);
            }
            return rc;
        }
        if (index_segment_docs(seg) != e->docs) {
            snprintf(err, errcap, "seg-%" PRIu64 ".hix: %u documents, the commit says %u", e->segment,
                     index_segment_docs(seg), e->docs);
            index_segment_close(seg);
            return HANU_ERR_CORRUPT;
        }
        uint32_t *del = NULL, ndel = 0;
        if (e->del_generation) {
            del_path(ix, e->segment, e->del_generation, path, sizeof path);
            rc = index_deletes_read(path, e->segment, e->del_generation, e->docs, &del, &ndel, err, errcap);
            if (!rc && ndel != e->deleted) {
                snprintf(err, errcap, "del-%" PRIu64 "-%u: %u deletions, the commit says %u", e->segment,
                         e->del_generation, ndel, e->deleted);
                rc = HANU_ERR_CORRUPT;
            }
            if (rc) {
                free(del);
                index_segment_close(seg);
                return rc;
            }
        }
        dbstate *d = db_get(ix, e->db);
        if (!d) {
            index_segment_close(seg);
            free(del);
            rc = HANU_ERR_NOMEM;
        } else {
            d->kind = STORE_DB_COLLECTION;
            d->dirty = 1;
            rc = seg_add(d, seg, e->segment, del, ndel, e->del_generation);
            if (rc == HANU_ERR_CORRUPT) snprintf(err, errcap, "seg-%" PRIu64 ".hix: an _id live twice", e->segment);
        }
        if (rc) return rc;   /* seg_add owns seg and del, also when it fails */
    }
    return HANU_OK;
}

/* 1 when the commit names file (COMMIT, a segment, or a current deletion list). */
static int named(const index_commit *c, const char *file)
{
    if (strcmp(file, "COMMIT") == 0) return 1;
    uint64_t id;
    uint32_t gen;
    char tail;
    for (uint32_t i = 0; i < c->nsegments; i++) {
        const index_commit_segment *e = &c->segments[i];
        if (sscanf(file, "seg-%" SCNu64 ".hi%c", &id, &tail) == 2 && id == e->segment) {
            char want[64];
            snprintf(want, sizeof want, "seg-%" PRIu64 ".hix", id);
            if (strcmp(file, want) == 0) return 1;
        }
        if (e->del_generation && sscanf(file, "del-%" SCNu64 "-%" SCNu32, &id, &gen) == 2 &&
            id == e->segment && gen == e->del_generation) {
            char want[64];
            del_name(id, gen, want, sizeof want);
            if (strcmp(file, want) == 0) return 1;
        }
    }
    return 0;
}

/* Deletes every file of DIR the commit does not name (all of them with NULL). */
static int remove_leftovers(indexer *ix, const index_commit *c)
{
    DIR *dir = opendir(ix->dir);
    if (!dir) return HANU_ERR_IO;
    struct dirent *de;
    size_t removed = 0;
    char path[1400];
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.') continue;
        if (c && named(c, de->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", ix->dir, de->d_name);
        if (unlink(path) == 0) removed++;
    }
    closedir(dir);
    if (removed) say(ix, "removed %zu file(s) no commit names", removed);
    return removed ? hanu_fsync_dir(ix->dir) : HANU_OK;
}

int indexer_open(store *st, const indexer_options *o, indexer **out, char *err, size_t errcap)
{
    indexer *ix = calloc(1, sizeof *ix);
    if (!ix) return HANU_ERR_NOMEM;
    ix->st = st;
    ix->opt = *o;
    if (!ix->opt.commit_interval_ms) ix->opt.commit_interval_ms = 500;
    if (!ix->opt.pending_cut_bytes) ix->opt.pending_cut_bytes = PENDING_CUT_DEFAULT;
    if (!ix->opt.max_segment_bytes) ix->opt.max_segment_bytes = 256u << 20;
    const char *delay = getenv("HANUDB_TEST_MERGE_DELAY_MS");   /* tests only: see merge_run */
    if (delay && !ix->opt.merge_delay_ms) ix->opt.merge_delay_ms = (uint32_t)strtoul(delay, NULL, 10);
    if (ix->opt.doc_cache_bytes && !(ix->cache = doc_cache_new(ix->opt.doc_cache_bytes))) {
        free(ix);
        return HANU_ERR_NOMEM;
    }
    snprintf(ix->dir, sizeof ix->dir, "%s", o->dir);
    pthread_mutex_init(&ix->mu, NULL);
    pthread_cond_init(&ix->wake, NULL);
    pthread_cond_init(&ix->committed_cv, NULL);
    pthread_cond_init(&ix->merge_cv, NULL);
    pthread_cond_init(&ix->commit_cv, NULL);
    uint64_t watermark = 0;
    int rc = hanu_mkdir_p(ix->dir);
    if (rc) snprintf(err, errcap, "cannot create %s: %s", ix->dir, strerror(errno));
    if (!rc) {
        rc = store_watermark_register(st, WATERMARK, &watermark);
        if (rc) snprintf(err, errcap, "cannot register the index watermark: %s", hanu_status_str(rc));
    }
    index_commit c = {0};
    char why[512] = "";
    int have = 0;
    if (!rc) {
        int r = index_commit_read(ix->dir, &c, why, sizeof why);
        if (r == HANU_OK) {
            have = 1;
            r = load_commit(ix, &c, why, sizeof why);
        }
        if (r == HANU_ERR_NOMEM) rc = r;
        else if (r != HANU_OK && r != HANU_ERR_NOT_FOUND) {
            /* Never use an index that cannot be trusted: start over from the log. */
            say(ix, "the index cannot be trusted (%s); rebuilding it from the log", why);
            free_state(ix);
            index_commit_free(&c);
            c = (index_commit){0};
            have = 0;
            ix->rebuilt = ix->rebuilding = 1;
            ix->rebuild_target = store_last_txn(st);
            ix->last_progress_ns = 0;   /* the first commit of the rebuild shows where it is */
        }
    }
    if (!rc) rc = remove_leftovers(ix, have ? &c : NULL);
    if (!rc) {
        ix->committed_txn = ix->consumed = have ? c.index_txn : 0;
        ix->next_file = have ? c.next_file : 1;
        if (ix->next_file == 0) ix->next_file = 1;
        if (have && c.index_txn < watermark)
            say(ix, "COMMIT is at txn %" PRIu64 ", the watermark at %" PRIu64 "; resuming from the commit",
                c.index_txn, watermark);
        rc = publish_dirty(ix, ix->committed_txn);
        atomic_store(&ix->visible_txn, ix->committed_txn);
    }
    index_commit_free(&c);
    if (!rc) rc = store_feed_open(st, ix->committed_txn + 1, &ix->feed);
    if (!rc) store_feed_filter(ix->feed, want_db, ix);
    if (!rc && ix->rebuilding && !ix->rebuild_target) ix->rebuilding = 0;   /* an empty log */
    if (!rc && ix->opt.merge_policy != INDEX_MERGE_NONE) {
        if (pthread_create(&ix->merge_thread, NULL, merge_main, ix) != 0) rc = HANU_ERR_NOMEM;
        else {
            ix->merge_started = 1;
            pthread_setname_np(ix->merge_thread, "hanu-merge");   /* names in top and perf */
        }
    }
    if (!rc) {
        if (pthread_create(&ix->commit_thread, NULL, commit_main, ix) != 0) rc = HANU_ERR_NOMEM;
        else {
            ix->commit_started = 1;
            pthread_setname_np(ix->commit_thread, "hanu-commit");
        }
    }
    if (!rc) {
        ix->last_commit_ns = hanu_now_ns();
        store_set_append_kick(st, kick, ix);
        if (pthread_create(&ix->thread, NULL, indexer_main, ix) != 0) rc = HANU_ERR_NOMEM;
        else {
            ix->started = 1;
            pthread_setname_np(ix->thread, "hanu-indexer");
        }
    }
    if (rc) {
        if (!err[0]) snprintf(err, errcap, "cannot open the index: %s", hanu_status_str(rc));
        indexer_close(ix);
        return rc;
    }
    say(ix, "open at txn %" PRIu64 "%s", ix->committed_txn, ix->rebuilt ? " (rebuilding)" : "");
    if (ix->rebuilding) say(ix, "rebuilding: txn 0 of %" PRIu64 " (0%%)", ix->rebuild_target);
    *out = ix;
    return HANU_OK;
}

void indexer_close(indexer *ix)
{
    if (!ix) return;
    if (ix->started) {
        store_set_append_kick(ix->st, NULL, NULL);   /* no write runs now (indexer.h) */
        pthread_mutex_lock(&ix->mu);
        ix->stop = 1;
        pthread_cond_broadcast(&ix->wake);
        pthread_mutex_unlock(&ix->mu);
        pthread_join(ix->thread, NULL);
    }
    if (ix->commit_started) {   /* after the indexer: a commit it handed over is finished first */
        pthread_mutex_lock(&ix->mu);
        ix->commit_stop = 1;
        pthread_cond_broadcast(&ix->commit_cv);
        pthread_mutex_unlock(&ix->mu);
        pthread_join(ix->commit_thread, NULL);
    }
    durable_free(ix->djob);   /* only when the thread never started */
    if (ix->merge_started) {
        pthread_mutex_lock(&ix->mu);
        ix->stop = 1;
        pthread_cond_broadcast(&ix->merge_cv);
        pthread_mutex_unlock(&ix->mu);
        pthread_join(ix->merge_thread, NULL);
    }
    if (ix->job) {   /* never installed: its file is a leftover the next open removes */
        char path[1200];
        seg_path(ix, ix->job->out_id, path, sizeof path);
        if (ix->job_state == JOB_DONE) unlink(path);
        job_free(ix->job);
    }
    for (size_t i = 0; i < ix->nretired; i++) seg_ref_release(ix->retired[i]);
    free(ix->retired);
    while (ix->npubs) {
        pthread_mutex_lock(&ix->mu);
        publish_locked(ix, ix->pubs[0].db, NULL);
        pthread_mutex_unlock(&ix->mu);
    }
    free(ix->pubs);
    free_state(ix);
    if (ix->feed) store_feed_close(ix->feed);
    free(ix->stage);
    hanu_buf_free(&ix->stage_arena);
    free(ix->doomed);
    pthread_mutex_destroy(&ix->mu);
    pthread_cond_destroy(&ix->wake);
    pthread_cond_destroy(&ix->committed_cv);
    pthread_cond_destroy(&ix->merge_cv);
    pthread_cond_destroy(&ix->commit_cv);
    doc_cache_free(ix->cache);
    free(ix);
}
