/*
 * quad_write.c: commits of the facts kernel: append (borrowed and owned),
 * retire, and group commit with a durable watermark.
 *
 * A commit is built in the handle's one frame buffer under wlock, written
 * with one positional write at the end of the log, and published (chunks,
 * then epoch) before wlock is released. Durable commits then wait outside the
 * lock: the first waiter becomes the leader, waits the group window, reads
 * written_epoch, runs one fdatasync and advances the durable watermark to what
 * it read, waking everyone it covered. A failed fdatasync stops the store
 * (DESIGN.md, "When the disk says no"). Relies on quad_file.c for encoding.
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
}

static void seq_wait(_Atomic uint32_t *w, uint32_t seen)
{
    (void)syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void seq_wake_all(_Atomic uint32_t *w)
{
    (void)syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Waits until epoch e is durable. Without a mutex: a pthread mutex and
 * condition variable made every woken waiter queue for the mutex in turn
 * (with 64 writers, futex lock handoffs were the largest cost of a commit). */
int quad_wait_durable(quad *q, uint64_t e, uint32_t window_us)
{
    for (;;) {
        if (atomic_load(&q->durable) >= e) return 0;
        if (atomic_load(&q->sync_failed)) return HANU_ERR_IO;
        uint32_t seen = atomic_load(&q->sync_seq);   /* before the leader check: no lost wake-up */
        int idle = 0;
        if (!atomic_compare_exchange_strong(&q->leader, &idle, 1)) {
            seq_wait(&q->sync_seq, seen);
            continue;
        }
        if (atomic_load(&q->durable) < e) {
            if (window_us) leader_window(q, window_us);
            uint64_t target = atomic_load(&q->written_epoch);
            uint64_t before = atomic_load(&q->durable);
            if (fdatasync(q->fd) == 0) {
                if (target > before) q->last_group = target - before;
                quad_durable_raise(q, target);
            } else {
                atomic_store(&q->sync_failed, 1);
                atomic_store(&q->stopped, 1);
            }
            atomic_fetch_add(&q->syncs, 1);
        }
        atomic_store(&q->leader, 0);
        atomic_fetch_add(&q->sync_seq, 1);
        seq_wake_all(&q->sync_seq);
    }
}

static int finish_commit(quad *q, uint64_t epoch, int durability)
{
    if (durability == QUAD_BUFFERED) return 0;
    return quad_wait_durable(q, epoch, durability == QUAD_GROUP ? q->opt.group_window_us : 0);
}

/* Writes the frame in q->fbuf ([0, len)) at the tail; on failure zeroes what
 * may have been written so that no partial frame is left behind. */
static int frame_write(quad *q, size_t len)
{
    int rc = hanu_pwrite_full(q->fd, q->fbuf, len, (off_t)q->tail);
    if (rc) {
        memset(q->fbuf, 0, len);
        (void)hanu_pwrite_full(q->fd, q->fbuf, len, (off_t)q->tail);
    }
    return rc;
}

static void maybe_checkpoint(quad *q)
{
    if (q->opt.checkpoint_bytes && q->tail - q->ckpt_tail >= q->opt.checkpoint_bytes)
        (void)qf_checkpoint_locked(q);   /* a failure stops the store; this commit stands */
}

static int valid_durability(int d)
{
    return d == QUAD_BUFFERED || d == QUAD_DURABLE || d == QUAD_GROUP;
}

static int append_locked(quad *q, const quad_fact *facts, size_t n, quad_id *first_id,
                         uint64_t *epoch_out)
{
    const uint32_t R = q->chunk_rows;
    uint64_t c0 = atomic_load_explicit(&q->nchunks, memory_order_relaxed);
    size_t nch = (n + R - 1) / R;
    size_t bound = QF_FRAME_HDR + 4;
    for (size_t i = 0; i < nch; i++) {
        uint32_t rows = (uint32_t)(n - i * R < R ? n - i * R : R);
        bound += qf_chunk_bound(q, rows);
    }
    if (bound > QF_MAX_BODY) return HANU_ERR_TOO_LARGE;
    int rc = qf_fbuf_reserve(q, bound);
    if (rc) return rc;
    for (size_t i = 0; i < nch; i++) {
        rc = quad_chunk_slot_reserve(q, c0 + i);
        if (rc) return rc;
    }
    uint64_t epoch = atomic_load_explicit(&q->epoch, memory_order_relaxed) + 1;
    uint8_t *f = q->fbuf, *p = f + QF_FRAME_HDR;
    hanu_put_u32(p, (uint32_t)nch);
    p += 4;
    size_t done;
    for (done = 0; done < nch; done++) {
        uint32_t rows = (uint32_t)(n - done * R < R ? n - done * R : R);
        quad_chunk *ch = quad_chunk_at(q, c0 + done);
        size_t len = qf_chunk_encode(q, facts + done * R, rows, c0 + done, p, ch);
        if (len == 0) { rc = HANU_ERR_NOMEM; break; }
        ch->off += q->tail + (uint64_t)(p - f);
        ch->epoch = epoch;
        p += len;
    }
    size_t flen = (size_t)(p - f);
    if (rc == 0) {
        qf_frame_finish(f, QF_T_APPEND, epoch, c0, flen - QF_FRAME_HDR);
        rc = frame_write(q, flen);
    }
    if (rc) {
        for (size_t i = 0; i < done; i++) quad_chunk_free(quad_chunk_at(q, c0 + i));
        return rc;
    }
    for (size_t i = 0; i < nch; i++) quad_chunk_count_lanes(q, quad_chunk_at(q, c0 + i));
    q->facts += n;
    q->tail += flen;
    atomic_store_explicit(&q->nchunks, c0 + nch, memory_order_release);
    atomic_store_explicit(&q->epoch, epoch, memory_order_release);
    atomic_store_explicit(&q->written_epoch, epoch, memory_order_release);
    if (first_id) *first_id = QUAD_ID(c0, 0);
    if (epoch_out) *epoch_out = epoch;
    maybe_checkpoint(q);
    return 0;
}

int quad_append(quad *q, const quad_fact *facts, size_t n, int durability,
                quad_id *first_id, uint64_t *epoch_out)
{
    if (!q || !facts || n == 0 || !valid_durability(durability)) return HANU_ERR_INVALID;
    if (q->opt.flags & QUAD_RDONLY) return HANU_ERR_INVALID;
    if (n > QUAD_MAX_BATCH) return HANU_ERR_TOO_LARGE;
    pthread_mutex_lock(&q->wlock);
    uint64_t epoch = 0;
    int rc = atomic_load(&q->stopped) ? HANU_ERR_STOPPED
                                      : append_locked(q, facts, n, first_id, &epoch);
    pthread_mutex_unlock(&q->wlock);
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
    if (q && facts && n > 0 && valid_durability(durability) && !(q->opt.flags & QUAD_RDONLY)) {
        if (n > QUAD_MAX_BATCH) {
            rc = HANU_ERR_TOO_LARGE;
        } else {
            pthread_mutex_lock(&q->wlock);
            rc = atomic_load(&q->stopped) ? HANU_ERR_STOPPED
                                          : append_locked(q, facts, n, first_id, &epoch);
            pthread_mutex_unlock(&q->wlock);
        }
    }
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
        if ((ch->ret && ch->ret->dense) || have + (j - i) > ch->rows / QUAD_DENSE_DIV) {
            rc = qf_retset_make_dense(ch);
            if (rc == 0) {
                uint64_t *d = ch->ret->dense;
                uint32_t fresh = 0;
                for (size_t k = i; k < j; k++) {
                    uint32_t slot = QUAD_ID_SLOT(ids[k]);
                    fresh += d[slot] == 0;
                    d[slot] = d[slot] ? d[slot] : epoch;
                }
                ch->ret->count += fresh;
                added += fresh;
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
    atomic_store_explicit(&q->written_epoch, epoch, memory_order_release);
    if (epoch_out) *epoch_out = epoch;
    if (rc == 0) maybe_checkpoint(q);
    return rc;
}

int quad_retire(quad *q, const quad_id *ids, size_t n, int durability, uint64_t *epoch_out)
{
    if (!q || !ids || n == 0 || !valid_durability(durability)) return HANU_ERR_INVALID;
    if (q->opt.flags & QUAD_RDONLY) return HANU_ERR_INVALID;
    if (n > QUAD_MAX_BATCH) return HANU_ERR_TOO_LARGE;
    pthread_mutex_lock(&q->wlock);
    uint64_t epoch = 0;
    int rc = atomic_load(&q->stopped) ? HANU_ERR_STOPPED : retire_locked(q, ids, n, &epoch);
    pthread_mutex_unlock(&q->wlock);
    if (rc) return rc;
    if (epoch_out) *epoch_out = epoch;
    return finish_commit(q, epoch, durability);
}

int quad_sync(quad *q)
{
    if (!q) return HANU_ERR_INVALID;
    if (q->opt.flags & QUAD_RDONLY) return 0;
    uint64_t e = atomic_load(&q->written_epoch);
    if (atomic_load(&q->durable) >= e) return 0;
    return quad_wait_durable(q, e, 0);
}
