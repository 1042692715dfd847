/*
 * quad_write.c: commits of the facts kernel: append (borrowed and owned),
 * retire, and group commit with a durable watermark.
 *
 * A commit is built in the handle's one frame buffer under wlock, written
 * with one positional write at the end of the log (appends waiting at the
 * same time are combined into that write, each its own frame), and published
 * (chunks, then epoch) before wlock is released. Durable commits then wait
 * outside the lock: the first waiter becomes the leader, waits the group window, reads
 * written_epoch, runs one fdatasync and advances the durable watermark to what
 * it read, waking everyone it covered. Every fdatasync goes through qf_sync
 * (quad_file.c): the first failure freezes the durable watermark and stops
 * the store (DESIGN.md, "When the disk says no"). Relies on quad_file.c for
 * encoding.
 */
#include "quad/quad_internal.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The leader's grouping window. It waits until as many commits are pending
 * as the previous sync covered (a steady set of writers is all in), checking
 * every 20 us, or, without that estimate, while commits keep arriving; never
 * longer than four windows. Measured with 64 writers x 40 commits on 2 busy
 * cores: a plain 200 us sleep needed 59-75 fdatasyncs for 2560 commits,
 * "while commits keep arriving" 41-43 (ideal 40) but idled after the last
 * writer; the group-size target keeps the grouping without the idle tail. */
static void leader_window(quad *q, uint32_t window_us)
{
    uint64_t start = hanu_now_ns(), limit = 4 * (uint64_t)window_us * 1000;
    uint64_t target = q->last_group;
    uint64_t seen = atomic_load(&q->written_epoch), quiet_since = start;
    for (;;) {
        uint64_t now = hanu_now_ns();
        uint64_t written = atomic_load(&q->written_epoch);
        if (target && written - atomic_load(&q->durable) >= target) break;
        if (written != seen) { seen = written; quiet_since = now; }
        if (now - start >= limit) break;
        if (!target && now - start >= (uint64_t)window_us * 1000 &&
            now - quiet_since >= (uint64_t)window_us * 500) break;
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
    }
}

void quad_durable_raise(quad *q, uint64_t epoch)
{
    uint64_t d = atomic_load(&q->durable);
    while (d < epoch && !atomic_compare_exchange_weak(&q->durable, &d, epoch)) {}
    quad_stream_notify(q);
}

static void seq_wait(_Atomic uint32_t *w, uint32_t seen)
{
    (void)syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void seq_wake_all(_Atomic uint32_t *w)
{
    (void)syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* The leader's sync (q->leader taken by the caller): covers everything
 * written by the end of the window, then hands leadership back and wakes
 * every sleeper on sync_seq. After a failed sync nothing is synced again
 * (qf_sync refuses), and the sleepers find sync_failed. */
static void lead_sync(quad *q, uint32_t window_us)
{
    if (window_us && !atomic_load(&q->sync_failed)) leader_window(q, window_us);
    uint64_t target = atomic_load(&q->written_epoch);
    uint64_t before = atomic_load(&q->durable), covered;
    if (target > before && qf_sync(q, &covered) == 0) q->last_group = covered - before;
    atomic_store(&q->leader, 0);
    atomic_fetch_add(&q->sync_seq, 1);
    seq_wake_all(&q->sync_seq);
}

static int take_leader(quad *q)
{
    int idle = 0;
    return atomic_compare_exchange_strong(&q->leader, &idle, 1);
}

/* Waits until epoch e is durable. Without a mutex: a pthread mutex and
 * condition variable made every woken waiter queue for the mutex in turn
 * (with 64 writers, futex lock handoffs were the largest cost of a commit). */
int quad_wait_durable(quad *q, uint64_t e, uint32_t window_us)
{
    for (;;) {
        /* durable is frozen once a sync failed, so this never trusts a later sync */
        if (atomic_load(&q->durable) >= e) return 0;
        if (atomic_load(&q->sync_failed))   /* IO: the failed sync was to cover e */
            return e <= q->failed_epoch ? HANU_ERR_IO : HANU_ERR_STOPPED;
        uint32_t seen = atomic_load(&q->sync_seq);   /* before the leader check: no lost wake-up */
        if (take_leader(q)) {
            if (atomic_load(&q->durable) < e) lead_sync(q, window_us);
            else {
                atomic_store(&q->leader, 0);
                atomic_fetch_add(&q->sync_seq, 1);
                seq_wake_all(&q->sync_seq);
            }
            continue;
        }
        seq_wait(&q->sync_seq, seen);
    }
}

static int finish_commit(quad *q, uint64_t epoch, int durability)
{
    if (durability == QUAD_BUFFERED) return 0;
    return quad_wait_durable(q, epoch, durability == QUAD_GROUP ? q->opt.group_window_us : 0);
}

/* Writes the frames in q->fbuf ([0, len)) at the tail; on failure zeroes what
 * may have been written so that no partial frame is left behind. */
static int frame_write(quad *q, size_t len)
{
    int rc = quad_pwrite(q, q->fbuf, len, q->tail);
    if (rc) {
        memset(q->fbuf, 0, len);
        (void)quad_pwrite(q, q->fbuf, len, q->tail);
    }
    return rc;
}

/* The next automatic checkpoint waits for at least as many log bytes as this
 * one took: its cost stays a fraction of the log however large the directory
 * grows, and a failed checkpoint is not retried by the next commit (a failed
 * sync stops the store; this commit stands either way). */
static void maybe_checkpoint(quad *q)
{
    if (!q->opt.checkpoint_bytes || q->tail < q->ckpt_next) return;
    (void)qf_checkpoint_locked(q);
    uint64_t took = q->ckpt_bytes;
    q->ckpt_next = q->tail + (took > q->opt.checkpoint_bytes ? took : q->opt.checkpoint_bytes);
}

static int valid_durability(int d)
{
    return d == QUAD_BUFFERED || d == QUAD_DURABLE || d == QUAD_GROUP;
}

/* ---- appends, combined ----
 * A writer pushes its request on q->append_pending and whoever holds wlock
 * (the writer itself when the lock is free) encodes every pending request as
 * its own frame, one after the other in the frame buffer, writes them with
 * one pwrite and publishes them. Buffered writers sleep on append_seq until
 * their request is marked done; durable ones sleep on sync_seq only, and the
 * writer of a batch becomes the sync leader at once when none is running
 * (else the running leader's wake-up lets one of them lead): one sleep and
 * one wake-up per durable commit. Measured with 64 writers of 64 facts: each
 * commit taking the lock, writing and handing the lock on cost about 10 us of
 * serialised lock hand-offs and system calls per commit, which bounded group
 * commit well below what one fdatasync per group allows. */
typedef struct quad_append_req {
    const quad_fact *facts;
    size_t n;
    uint64_t c0, nch, epoch;   /* set when encoded */
    int durability;
    int rc;
    _Atomic int done;
    struct quad_append_req *next;
} quad_append_req;

#define QUAD_COMBINE_BYTES (1u << 20)   /* frames written by one pwrite, about */

/* Encodes facts as one append frame at q->fbuf + off, chunks from c0, at
 * epoch; chunk structs are filled but not published. */
static int append_encode(quad *q, const quad_fact *facts, size_t n, size_t off, uint64_t c0,
                         uint64_t epoch, size_t *flen_out, uint64_t *nch_out)
{
    const uint32_t R = q->chunk_rows;
    size_t nch = (n + R - 1) / R;
    size_t bound = QF_FRAME_HDR + 4;
    for (size_t i = 0; i < nch; i++) {
        uint32_t rows = (uint32_t)(n - i * R < R ? n - i * R : R);
        bound += qf_chunk_bound(q, rows);
    }
    if (bound > QF_MAX_BODY) return HANU_ERR_TOO_LARGE;
    int rc = qf_fbuf_reserve(q, off + bound);
    if (rc) return rc;
    for (size_t i = 0; i < nch; i++) {
        rc = quad_chunk_slot_reserve(q, c0 + i);
        if (rc) return rc;
    }
    uint8_t *f = q->fbuf + off, *p = f + QF_FRAME_HDR;
    hanu_put_u32(p, (uint32_t)nch);
    p += 4;
    for (size_t done = 0; done < nch; done++) {
        uint32_t rows = (uint32_t)(n - done * R < R ? n - done * R : R);
        quad_chunk *ch = quad_chunk_at(q, c0 + done);
        size_t len = qf_chunk_encode(q, facts + done * R, rows, c0 + done, p, ch);
        if (len == 0) {
            for (size_t i = 0; i < done; i++) quad_chunk_free(quad_chunk_at(q, c0 + i));
            return HANU_ERR_NOMEM;
        }
        ch->off += q->tail + off + (uint64_t)(p - f);
        ch->epoch = epoch;
        p += len;
    }
    size_t flen = (size_t)(p - f);
    qf_frame_finish(f, QF_T_APPEND, epoch, c0, flen - QF_FRAME_HDR);
    *flen_out = flen;
    *nch_out = nch;
    return 0;
}

/* Encodes, writes and publishes the requests [r, ...) up to about
 * QUAD_COMBINE_BYTES of frames (wlock held); returns the first request not
 * taken. Completed requests are marked done last: their memory belongs to
 * writers that return as soon as they see it. */
/* What a drain completed, for the wake-ups after wlock is released. */
enum { DONE_BUFFERED = 1, DONE_DURABLE_FAILED = 2, DONE_GROUP = 4, DONE_DURABLE = 8 };

static quad_append_req *append_batch(quad *q, quad_append_req *r, unsigned *done)
{
    uint64_t c = atomic_load_explicit(&q->nchunks, memory_order_relaxed);
    uint64_t e = atomic_load_explicit(&q->epoch, memory_order_relaxed);
    size_t off = 0;
    quad_append_req *first = r;
    for (; r && off < QUAD_COMBINE_BYTES; r = r->next) {
        if (atomic_load(&q->stopped)) { r->rc = HANU_ERR_STOPPED; continue; }
        size_t flen;
        r->rc = append_encode(q, r->facts, r->n, off, c, e + 1, &flen, &r->nch);
        if (r->rc) continue;
        r->c0 = c;
        r->epoch = ++e;
        c += r->nch;
        off += flen;
    }
    int wrc = off ? frame_write(q, off) : 0;
    for (quad_append_req *x = first; x != r; x = x->next) {
        if (x->rc) continue;
        if (wrc) {
            x->rc = wrc;
            for (uint64_t i = 0; i < x->nch; i++) quad_chunk_free(quad_chunk_at(q, x->c0 + i));
            continue;
        }
        for (uint64_t i = 0; i < x->nch; i++) quad_chunk_count_lanes(q, quad_chunk_at(q, x->c0 + i), 1);
        q->facts += x->n;
    }
    if (off && !wrc) {
        q->tail += off;
        atomic_store_explicit(&q->nchunks, c, memory_order_release);
        atomic_store_explicit(&q->epoch, e, memory_order_release);
        qf_written(q, e);
        maybe_checkpoint(q);
    }
    for (quad_append_req *x = first; x != r;) {
        quad_append_req *next = x->next;
        if (x->durability == QUAD_BUFFERED) *done |= DONE_BUFFERED;
        else if (x->rc) *done |= DONE_DURABLE_FAILED;
        else *done |= x->durability == QUAD_DURABLE ? DONE_DURABLE : DONE_GROUP;
        atomic_store_explicit(&x->done, 1, memory_order_release);
        x = next;
    }
    return r;
}

/* Takes every pending request, oldest first (wlock held); returns the
 * DONE_ flags of what it completed. */
static unsigned append_drain(quad *q)
{
    quad_append_req *list = atomic_exchange(&q->append_pending, NULL), *fifo = NULL;
    unsigned done = 0;
    while (list) {
        quad_append_req *next = list->next;
        list->next = fifo;
        fifo = list;
        list = next;
    }
    while (fifo) fifo = append_batch(q, fifo, &done);
    return done;
}

/* may_lead: the caller is a durable writer, which may run the sync for the
 * batches it wrote; anyone else (a buffered writer, retire, stats) wakes the
 * durable writers instead, so that a buffered call never waits for a sync. */
static void wlock_release(quad *q, int may_lead)
{
    for (;;) {
        unsigned done = append_drain(q);
        pthread_mutex_unlock(&q->wlock);
        if (done & DONE_BUFFERED) {
            atomic_fetch_add(&q->append_seq, 1);
            if (atomic_load(&q->append_sleepers)) seq_wake_all(&q->append_seq);
        }
        if ((done & (DONE_DURABLE | DONE_GROUP)) && may_lead) {
            /* lead the sync that covers them, unless one is running: its
             * wake-up lets a writer of this batch lead the next */
            if (take_leader(q)) lead_sync(q, done & DONE_DURABLE ? 0 : q->opt.group_window_us);
        } else if (done & (DONE_DURABLE | DONE_GROUP | DONE_DURABLE_FAILED)) {
            atomic_fetch_add(&q->sync_seq, 1);   /* their writers sleep on sync_seq */
            seq_wake_all(&q->sync_seq);
        }
        /* a request pushed while the lock was held but after the drain is
         * seen here, or its writer's trylock succeeds */
        atomic_thread_fence(memory_order_seq_cst);
        if (!atomic_load(&q->append_pending)) return;
        if (pthread_mutex_trylock(&q->wlock) != 0) return;
    }
}

void quad_wlock_release(quad *q)
{
    wlock_release(q, 0);
}

/* Appends through the combining queue and waits until the frame is written. */
static int append_combined(quad *q, const quad_fact *facts, size_t n, int durability,
                           quad_id *first_id, uint64_t *epoch_out)
{
    quad_append_req r = { .facts = facts, .n = n, .durability = durability };
    atomic_init(&r.done, 0);
    quad_append_req *head = atomic_load(&q->append_pending);
    do r.next = head; while (!atomic_compare_exchange_weak(&q->append_pending, &head, &r));
    int durable = durability != QUAD_BUFFERED;
    if (pthread_mutex_trylock(&q->wlock) == 0) wlock_release(q, durable);
    _Atomic uint32_t *word = durability == QUAD_BUFFERED ? &q->append_seq : &q->sync_seq;
    while (!atomic_load_explicit(&r.done, memory_order_acquire)) {
        uint32_t seen = atomic_load(word);
        if (atomic_load_explicit(&r.done, memory_order_acquire)) break;
        if (durable && pthread_mutex_trylock(&q->wlock) == 0) {
            wlock_release(q, 1);   /* woken by a sync while still pending: write it */
            continue;
        }
        if (durability == QUAD_BUFFERED) atomic_fetch_add(&q->append_sleepers, 1);
        seq_wait(word, seen);
        if (durability == QUAD_BUFFERED) atomic_fetch_sub(&q->append_sleepers, 1);
    }
    if (r.rc) return r.rc;
    if (first_id) *first_id = QUAD_ID(r.c0, 0);
    *epoch_out = r.epoch;
    return 0;
}

int quad_append(quad *q, const quad_fact *facts, size_t n, int durability,
                quad_id *first_id, uint64_t *epoch_out)
{
    if (!q || !facts || n == 0 || !valid_durability(durability)) return HANU_ERR_INVALID;
    if ((q->opt.flags & QUAD_RDONLY) || quad_forked(q)) return HANU_ERR_INVALID;
    if (n > QUAD_MAX_BATCH) return HANU_ERR_TOO_LARGE;
    uint64_t epoch = 0;
    int rc = append_combined(q, facts, n, durability, first_id, &epoch);
    if (rc) return rc;
    if (epoch_out) *epoch_out = epoch;
    return finish_commit(q, epoch, durability);
}

int quad_append_owned(quad *q, quad_fact *facts, size_t n, int durability,
                      void (*release)(void *ctx, quad_fact *facts), void *ctx,
                      quad_id *first_id, uint64_t *epoch_out)
{
    int rc = HANU_ERR_INVALID;
    uint64_t epoch = 0;
    if (q && facts && n > 0 && valid_durability(durability) && !(q->opt.flags & QUAD_RDONLY) &&
        !quad_forked(q))
        rc = n > QUAD_MAX_BATCH ? HANU_ERR_TOO_LARGE : append_combined(q, facts, n, durability, first_id, &epoch);
    /* the buffer is handed back as soon as it is encoded, before the durable wait */
    if (facts) {
        if (release) release(ctx, facts); else free(facts);
    }
    if (rc) return rc;
    if (epoch_out) *epoch_out = epoch;
    return finish_commit(q, epoch, durability);
}

/* Returns ids with the ids of each chunk next to each other: ids itself when
 * the chunks already come in runs (ascending or descending), else a copy
 * grouped by a counting sort on the chunk number (measured: random retires
 * are bound by cache misses on the chunk's retirement set, so touching each
 * chunk once pays for the sort). Falls back to ids when memory is short. */
static const quad_id *group_by_chunk(quad *q, const quad_id *ids, size_t n)
{
    uint64_t lo = QUAD_ID_CHUNK(ids[0]), hi = lo, prev = lo;
    int dir = 0, mono = 1;
    for (size_t i = 1; i < n; i++) {
        uint64_t c = QUAD_ID_CHUNK(ids[i]);
        if (c != prev) {
            int d = c > prev ? 1 : -1;
            if (dir == 0) dir = d; else if (d != dir) mono = 0;
            prev = c;
        }
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    uint64_t range = hi - lo + 1;
    if (mono || range > 4 * (uint64_t)n + 65536) return ids;
    if (q->wids_cap < n) {
        quad_id *w = realloc(q->wids, n * sizeof *w);
        if (!w) return ids;
        q->wids = w;
        q->wids_cap = n;
    }
    if (q->whist_cap < range + 1) {
        uint32_t *h = realloc(q->whist, (range + 1) * sizeof *h);
        if (!h) return ids;
        q->whist = h;
        q->whist_cap = range + 1;
    }
    uint32_t *h = q->whist;
    memset(h, 0, (range + 1) * sizeof *h);
    for (size_t i = 0; i < n; i++) h[QUAD_ID_CHUNK(ids[i]) - lo + 1]++;
    for (uint64_t k = 1; k <= range; k++) h[k] += h[k - 1];
    for (size_t i = 0; i < n; i++) q->wids[h[QUAD_ID_CHUNK(ids[i]) - lo]++] = ids[i];
    return q->wids;
}

static int retire_locked(quad *q, const quad_id *ids, size_t n, uint64_t *epoch_out)
{
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        uint64_t c = QUAD_ID_CHUNK(ids[i]);
        if (c >= nch || QUAD_ID_SLOT(ids[i]) >= quad_chunk_at(q, c)->rows)
            return HANU_ERR_NOT_FOUND;
    }
    size_t bound = QF_FRAME_HDR + 4 + n * 8 + (n / QF_RETIRE_BLOCK + 1) * 9;
    if (bound > QF_MAX_BODY) return HANU_ERR_TOO_LARGE;
    int rc = qf_fbuf_reserve(q, bound);
    if (rc) return rc;
    uint64_t epoch = atomic_load_explicit(&q->epoch, memory_order_relaxed) + 1;
    size_t body = qf_ids_encode(ids, n, q->fbuf + QF_FRAME_HDR);
    qf_frame_finish(q->fbuf, QF_T_RETIRE, epoch, n, body);
    rc = frame_write(q, QF_FRAME_HDR + body);
    if (rc) return rc;
    q->tail += QF_FRAME_HDR + body;
    ids = group_by_chunk(q, ids, n);
    uint64_t added = 0;
    pthread_rwlock_wrlock(&q->rlock);
    for (size_t i = 0; i < n && rc == 0;) {
        /* a run of ids in one chunk: when the chunk ends up dense anyway, go
         * dense first and set epochs in a tight loop */
        uint64_t c = QUAD_ID_CHUNK(ids[i]);
        size_t j = i + 1;
        while (j < n && QUAD_ID_CHUNK(ids[j]) == c) j++;
        quad_chunk *ch = quad_chunk_at(q, c);
        uint32_t have = ch->ret ? ch->ret->count : 0;
        if ((ch->ret && quad_retset_is_dense(ch->ret)) || have + (j - i) > ch->rows / QUAD_DENSE_DIV) {
            rc = qf_retset_make_dense(ch);
            quad_retset *rs = ch->ret;
            size_t k = i;
            int idx = 0;   /* this commit's index in rs->dense, taken at its first new row */
            uint32_t fresh = 0;
            for (; rc == 0 && k < j && !rs->wide; k++) {
                uint32_t slot = QUAD_ID_SLOT(ids[k]);
                if (rs->dense[slot]) continue;
                if (!idx && (idx = qf_dense_index(rs, ch->rows, epoch)) <= 0) {
                    rc = idx < 0 ? idx : 0;
                    break;   /* gone wide: the loop below */
                }
                rs->dense[slot] = (uint16_t)idx;
                fresh++;
            }
            if (rs) rs->count += fresh;
            added += fresh;
            for (; rc == 0 && k < j; k++) {
                int r = qf_dense_set(rs, ch->rows, QUAD_ID_SLOT(ids[k]), epoch);
                if (r < 0) rc = r; else added += (uint64_t)r;
            }
        } else {
            for (size_t k = i; k < j && rc == 0; k++) {
                int r = qf_retire_apply(q, ids[k], epoch);
                if (r < 0) rc = r; else added += (uint64_t)r;
            }
        }
        i = j;
    }
    /* out of memory after the frame is written: the file is ahead of memory;
     * stop writes so that a reopen brings them back in line */
    if (rc) atomic_store(&q->stopped, 1);
    pthread_rwlock_unlock(&q->rlock);
    atomic_fetch_add_explicit(&q->retired, added, memory_order_relaxed);
    atomic_store_explicit(&q->epoch, epoch, memory_order_release);
    qf_written(q, epoch);
    if (epoch_out) *epoch_out = epoch;
    if (rc == 0) maybe_checkpoint(q);
    return rc;
}

int quad_retire(quad *q, const quad_id *ids, size_t n, int durability, uint64_t *epoch_out)
{
    if (!q || !ids || n == 0 || !valid_durability(durability)) return HANU_ERR_INVALID;
    if ((q->opt.flags & QUAD_RDONLY) || quad_forked(q)) return HANU_ERR_INVALID;
    if (n > QUAD_MAX_BATCH) return HANU_ERR_TOO_LARGE;
    pthread_mutex_lock(&q->wlock);
    uint64_t epoch = 0;
    int rc = atomic_load(&q->stopped) ? HANU_ERR_STOPPED : retire_locked(q, ids, n, &epoch);
    quad_wlock_release(q);
    if (rc) return rc;
    if (epoch_out) *epoch_out = epoch;
    return finish_commit(q, epoch, durability);
}

int quad_sync(quad *q)
{
    if (!q || quad_forked(q)) return HANU_ERR_INVALID;
    if (q->opt.flags & QUAD_RDONLY) return 0;
    if (atomic_load(&q->sync_failed)) return HANU_ERR_STOPPED;
    uint64_t e = atomic_load(&q->written_epoch);
    if (atomic_load(&q->durable) >= e) return 0;
    return quad_wait_durable(q, e, 0);
}
