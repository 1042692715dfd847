/*
 * log_writer.c: the active data file, rotation, the group-commit thread and
 * the thread that prepares the next data file ahead of time.
 *
 * One writer thread calls log_writer_append. In a preallocated file (zerofill,
 * fallocate: the blocks exist, so a write cannot fail for space) the frame is
 * only copied into a pending buffer, and log_writer_flush writes everything
 * pending with one pwrite (the server flushes once per event-loop iteration;
 * measured: one pwrite per frame cost ~3 us of the loop's ~14 us per write).
 * In append mode every frame is written at once, so that a full disk fails
 * only its own write. A txn counts as written once its bytes are in the file.
 * The commit thread waits for written > durable, calls fdatasync once for all
 * of them, advances the durable txn and reports it through on_durable.
 *
 * With a commit window (the store's default: 100 us), group commit adapts its
 * size: after a sync of n frames the commit thread waits, at most the window,
 * until n frames are written again before it syncs, so that writers answered
 * together are synced together instead of splitting into two alternating
 * groups. Measured with 32 writers, server on one core, quiet machine, two runs
 * each: no window 55-58k writes/s (15 frames per sync); 100 us 71-74k (31);
 * 200 us 65-71k; 300 us 65-69k. A failed fdatasync is final
 * (fsyncgate): the writer is marked failed, nothing after the last good sync is
 * ever reported durable, and every later append fails with HANU_ERR_STOPPED.
 *
 * Every file but the newest is complete on disk before the first frame goes
 * into the next one; recovery relies on that to tell a torn tail (newest file
 * only) from damage (anywhere else). In a preallocated log, rotation does not
 * wait for that sync: it writes the seal, hands the old file to the commit
 * thread (sealing_fd) and goes on into the new file, whose frames stay in the
 * pending buffer until the commit thread has synced the old file (seal
 * included) and writes them itself. The writer thread never waits for the
 * device (a snapshot's rotation measured 3.1 ms on the loop, all of it the
 * fdatasync), and no byte of the new file can reach the disk before the old
 * file is whole there. Append mode writes every frame at once, so its rotation
 * still waits for the sync.
 */
#include "log/log.h"
#include "hlog/hlog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct log_writer {
    log_options opt;
    char dir[1024];

    /* Owned by the writer thread. */
    int fd;                       /* active file */
    uint32_t active_id;
    uint64_t write_offset;
    uint64_t active_limit;        /* rotation size of the active file */
    uint64_t next_txn;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;       /* commit thread waits for work */
    pthread_cond_t durable_cv;    /* log_writer_sync waits here */
    pthread_cond_t prep_cv;       /* prep thread waits for a request */
    uint64_t written_txn;         /* under mu */
    int commit_fd;                /* fd the commit thread must sync; under mu */
    int syncing_fd;               /* fd being synced now, -1 if none; under mu */
    int close_after_sync_fd;      /* old fd to close once its sync ends; under mu */
    /* A sealed file whose sync is still owed (preallocated rotation), -1 if none:
       until the commit thread has synced it, nothing is written to the new file
       (flush_locked keeps the frames pending). Under mu. */
    int sealing_fd;
    uint32_t sealing_id;
    uint64_t sealing_end, sealing_size;   /* its seal's end, its preallocated size */
    int commit_waiting;           /* commit thread sleeps on work_cv; under mu */
    /* Rotation asks the commit thread for a sync of the file it seals instead of
       calling fdatasync itself: one thread syncs the active file, so a writeback
       error (reported once per open file) cannot be seen by one caller and missed
       by the other. Under mu. */
    uint64_t sync_requests, syncs_done;
    int stop;                     /* under mu */
    _Atomic uint64_t durable_txn;
    _Atomic uint64_t wanted_txn;  /* highest txn someone waits to be durable */
    _Atomic int lazy_waiting;     /* commit thread waits out lazy_sync_ms */
    _Atomic int failed;

    /* Txn reservation (opt.reserve_path): txns up to `reserved` may be handed out;
       the preparing thread extends it to reserve_target. Under mu. */
    uint64_t reserved, reserve_target;
    int reserve_error;
    uint64_t reserve_asked;       /* writer thread's copy of reserve_target */
    uint64_t recovered_last;      /* last txn recovery found: the durable mark at open */
    uint64_t first_txn_of_run;    /* the mark moves only once a txn of this run is durable */
    int resumed_clean;            /* open resumed above the log at a clean stop's jump */
    char reserve_path[1100];

    /* Next file prepared ahead: under mu. */
    int prep_wanted;
    int prep_fd;                  /* -1 until ready */
    uint32_t prep_id;
    int prep_error;

    pthread_t commit_thread, prep_thread;

    /* Frames appended but not yet in the file (preallocated modes): under mu. */
    hanu_buf pending;
    uint64_t pending_offset;      /* file offset of pending.data[0] */
    uint64_t pending_last_txn;
    int active_preallocated;      /* the active file's blocks are reserved */
    uint64_t group_target;        /* frames the last sync covered: commit thread only */
    int commit_waiting_group;     /* commit thread waits for group_target; under mu */

    _Atomic uint64_t stat_bytes, stat_prealloc, stat_syncs, stat_frames, stat_rotations, stat_sync_ns;
};

int log_file_create(const char *dir, uint32_t file_id, enum log_prealloc prealloc, uint64_t file_size,
                    const log_file_header *h, int *fd_out)
{
    char path[1200];
    log_file_path(path, sizeof path, dir, file_id, "log");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return (errno == ENOSPC || errno == EDQUOT) ? HANU_ERR_NOSPACE : HANU_ERR_IO;
    uint8_t hdr[LOG_FILE_HEADER_SIZE];
    log_file_header_encode(hdr, h);
    int rc = hanu_pwrite_full(fd, hdr, sizeof hdr, 0);
    if (rc == HANU_OK && prealloc == LOG_PREALLOC_FALLOCATE && file_size > sizeof hdr) {
        if (fallocate(fd, 0, 0, (off_t)file_size) != 0)
            rc = (errno == ENOSPC || errno == EDQUOT) ? HANU_ERR_NOSPACE : HANU_ERR_IO;
    } else if (rc == HANU_OK && prealloc == LOG_PREALLOC_ZEROFILL && file_size > sizeof hdr) {
        static const uint8_t zeros[1 << 16];
        for (uint64_t off = sizeof hdr; off < file_size && rc == HANU_OK; off += sizeof zeros)
            rc = hanu_pwrite_full(fd, zeros, HANU_MIN(sizeof zeros, file_size - off), (off_t)off);
    }
    if (rc == HANU_OK && fdatasync(fd) != 0) rc = HANU_ERR_IO;
    if (rc == HANU_OK) rc = hanu_fsync_dir(dir);
    if (rc != HANU_OK) {
        close(fd);
        unlink(path);
        return rc;
    }
    *fd_out = fd;
    return HANU_OK;
}

static void undo_partial_write(log_writer *w, uint64_t off, size_t len);
static int reserve_txns(log_writer *w);

#define PENDING_FLUSH_BYTES (256u << 10)
#define PENDING_HOLD_MAX_BYTES (64u << 20)   /* frames held behind a sealed file's sync */

/* Writes the pending frames (mu held). A failure here is final: the frames were
   already applied in memory, and their blocks were reserved, so it is an I/O
   error, handled like a failed fdatasync. */
static int flush_locked(log_writer *w)
{
    if (!w->pending.len || w->sealing_fd >= 0) return HANU_OK;   /* held: see sealing_fd */
    int rc = hanu_pwrite_full(w->fd, w->pending.data, w->pending.len, (off_t)w->pending_offset);
    if (rc) {
        atomic_store(&w->failed, 1);
        hlog_error("store", "writing %zu bytes to log file %06u failed: %s; the store "
                "refuses writes until restarted.", w->pending.len, w->active_id, strerror(errno));
        pthread_cond_broadcast(&w->durable_cv);
        pthread_cond_broadcast(&w->work_cv);
        return HANU_ERR_STOPPED;
    }
    atomic_fetch_add(&w->stat_bytes, w->pending.len);
    w->pending_offset += w->pending.len;
    w->pending.len = 0;
    w->written_txn = w->pending_last_txn;
    if (w->commit_waiting && (!w->commit_waiting_group ||
                              w->written_txn - atomic_load(&w->durable_txn) >= w->group_target))
        pthread_cond_signal(&w->work_cv);
    return HANU_OK;
}

int log_writer_flush(log_writer *w)
{
    pthread_mutex_lock(&w->mu);
    int rc = flush_locked(w);
    pthread_mutex_unlock(&w->mu);
    if (rc && w->opt.on_durable) w->opt.on_durable(w->opt.ctx, atomic_load(&w->durable_txn), 1);
    return rc;
}

int log_writer_read_pending(log_writer *w, uint32_t file_id, uint64_t off, size_t len, hanu_buf *out)
{
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    /* A frame is pending whole or written whole: flushes write the buffer at once. */
    if (file_id == w->active_id && w->pending.len && off >= w->pending_offset &&
        off + len <= w->pending_offset + w->pending.len)
        rc = hanu_buf_append(out, w->pending.data + (off - w->pending_offset), len) == HANU_OK ? 1 : HANU_ERR_NOMEM;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static void *prep_main(void *arg)
{
    log_writer *w = arg;
    /* Background work: below the writer thread (SCHED_BATCH, nice 10). */
    (void)hanu_thread_background(10);
    pthread_mutex_lock(&w->mu);
    uint64_t mark = w->recovered_last, mark_ns = 0;   /* durable mark last recorded, and when */
    for (;;) {
        while (!w->stop && !w->prep_wanted && w->reserve_target <= w->reserved) {
            if (!w->reserve_path[0]) { pthread_cond_wait(&w->prep_cv, &w->mu); continue; }
            /* Once a second, record how far the log is durable (a cheap mark that
               lets recovery tell damage from a torn tail). */
            uint64_t now = hanu_now_ns();
            if (now - mark_ns >= 1000000000ull && atomic_load(&w->durable_txn) > mark &&
                atomic_load(&w->durable_txn) >= w->first_txn_of_run && !atomic_load(&w->failed))
                break;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            pthread_cond_timedwait(&w->prep_cv, &w->mu, &until);
        }
        if (w->stop) break;
        uint64_t durable = atomic_load(&w->durable_txn);
        if (durable < w->first_txn_of_run) durable = mark;
        if (w->reserve_path[0] && (w->reserve_target > w->reserved || (!w->prep_wanted && durable > mark))) {
            uint64_t target = HANU_MAX(w->reserve_target, w->reserved);
            pthread_mutex_unlock(&w->mu);
            int rc = log_txn_reserve_write(w->reserve_path, target, durable);
            pthread_mutex_lock(&w->mu);
            if (rc == HANU_OK) { w->reserved = target; mark = durable; }
            else { w->reserve_error = rc; w->reserve_target = w->reserved; }
            mark_ns = hanu_now_ns();
            pthread_cond_broadcast(&w->prep_cv);
            continue;
        }
        uint32_t id = w->prep_id;
        pthread_mutex_unlock(&w->mu);
        log_file_header h = { .file_id = id };
        int fd = -1;
        int rc = log_file_create(w->dir, id, w->opt.prealloc, w->opt.file_size, &h, &fd);
        if (rc == HANU_OK && w->opt.prealloc == LOG_PREALLOC_ZEROFILL)
            atomic_fetch_add(&w->stat_prealloc, w->opt.file_size);
        pthread_mutex_lock(&w->mu);
        w->prep_wanted = 0;
        w->prep_fd = fd;
        w->prep_error = rc;
        pthread_cond_broadcast(&w->prep_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void *commit_main(void *arg)
{
    log_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->written_txn == atomic_load(&w->durable_txn) &&
               w->sync_requests == w->syncs_done) {
            w->commit_waiting = 1;
            pthread_cond_wait(&w->work_cv, &w->mu);
            w->commit_waiting = 0;
        }
        if ((w->written_txn == atomic_load(&w->durable_txn) && w->sync_requests == w->syncs_done) ||
            atomic_load(&w->failed)) {
            if (w->stop) break;
            if (atomic_load(&w->failed)) { /* nothing more is ever durable */
                pthread_cond_wait(&w->work_cv, &w->mu);
                continue;
            }
        }
        /* Nobody waits for these frames (durability none): let them gather for up to
           lazy_sync_ms, unless a waiter turns up. Each sync costs the core I/O
           submissions and wake-ups: measured, see docs/PERFORMANCE.md. */
        if (w->opt.lazy_sync_ms && !w->stop && w->sync_requests == w->syncs_done &&
            atomic_load(&w->wanted_txn) <= atomic_load(&w->durable_txn)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)w->opt.lazy_sync_ms * 1000000ull;
            until.tv_sec += (time_t)(ns / 1000000000ull);
            until.tv_nsec = (long)(ns % 1000000000ull);
            atomic_store(&w->lazy_waiting, 1);
            while (!w->stop && !atomic_load(&w->failed) && w->sync_requests == w->syncs_done &&
                   atomic_load(&w->wanted_txn) <= atomic_load(&w->durable_txn))
                if (pthread_cond_timedwait(&w->work_cv, &w->mu, &until) != 0) break;
            atomic_store(&w->lazy_waiting, 0);
            if (atomic_load(&w->failed)) continue;
        }
        /* Wait for as many frames as the last sync covered, for at most the window. */
        if (w->opt.commit_window_us && w->group_target > 1 && !w->stop &&
            w->sync_requests == w->syncs_done &&
            w->written_txn - atomic_load(&w->durable_txn) < w->group_target) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)w->opt.commit_window_us * 1000;
            until.tv_sec += (time_t)(ns / 1000000000ull);
            until.tv_nsec = (long)(ns % 1000000000ull);
            w->commit_waiting = w->commit_waiting_group = 1;
            while (!w->stop && !atomic_load(&w->failed) &&
                   w->written_txn - atomic_load(&w->durable_txn) < w->group_target)
                if (pthread_cond_timedwait(&w->work_cv, &w->mu, &until) != 0) break;
            w->commit_waiting = w->commit_waiting_group = 0;
            if (atomic_load(&w->failed)) continue;
        }
        uint64_t target = w->written_txn, request = w->sync_requests;
        if (target > atomic_load(&w->durable_txn)) w->group_target = target - atomic_load(&w->durable_txn);
        /* A sealed file first: while it is owed, every written frame is in it or before it. */
        int sealing = w->sealing_fd >= 0;
        int fd = sealing ? w->sealing_fd : w->commit_fd;
        w->syncing_fd = fd;
        pthread_mutex_unlock(&w->mu);

        uint64_t t0 = hanu_now_ns();
        int rc = fdatasync(fd);
        int err = errno;
        atomic_fetch_add(&w->stat_sync_ns, hanu_now_ns() - t0);
        atomic_fetch_add(&w->stat_syncs, 1);

        pthread_mutex_lock(&w->mu);
        w->syncing_fd = -1;
        if (w->close_after_sync_fd >= 0) {
            close(w->close_after_sync_fd);
            w->close_after_sync_fd = -1;
        }
        if (rc != 0) {
            atomic_store(&w->failed, 1);
            hlog_error("store", "fdatasync of the active log file failed: %s. "
                    "No write after txn %llu is acknowledged; the store refuses writes "
                    "until it is restarted.", strerror(err),
                    (unsigned long long)atomic_load(&w->durable_txn));
            pthread_cond_broadcast(&w->durable_cv);
            pthread_mutex_unlock(&w->mu);
            if (w->opt.on_durable) w->opt.on_durable(w->opt.ctx, atomic_load(&w->durable_txn), 1);
            pthread_mutex_lock(&w->mu);
            continue;
        }
        /* A write that failed meanwhile (flush_locked) froze the durable mark too. */
        if (atomic_load(&w->failed)) continue;
        atomic_store(&w->durable_txn, target);
        w->syncs_done = request;
        int punch_fd = -1;
        uint64_t punch_from = 0, punch_to = 0;
        if (sealing) {
            /* The old file is whole on disk: the new one's frames may go now. */
            punch_fd = w->sealing_fd;
            punch_from = (w->sealing_end + 4095) & ~4095ull;
            punch_to = w->sealing_size;
            w->sealing_fd = -1;
            w->sealing_id = 0;
            if (flush_locked(w) != HANU_OK) {
                close(punch_fd);
                pthread_mutex_unlock(&w->mu);
                if (w->opt.on_durable) w->opt.on_durable(w->opt.ctx, atomic_load(&w->durable_txn), 1);
                pthread_mutex_lock(&w->mu);
                continue;
            }
        }
        pthread_cond_broadcast(&w->durable_cv);
        pthread_mutex_unlock(&w->mu);
        if (w->opt.on_durable) w->opt.on_durable(w->opt.ctx, target, 0);
        if (punch_fd >= 0) {
            /* The preallocated space after the seal is never read: give it back (a
               snapshot seals files that are mostly empty). Best effort. */
            if (punch_to > punch_from)
                (void)fallocate(punch_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)punch_from,
                                (off_t)(punch_to - punch_from));
            close(punch_fd);
        }
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void request_prep(log_writer *w)
{
    /* Called with mu held. */
    w->prep_wanted = 1;
    w->prep_fd = -1;
    w->prep_error = 0;
    w->prep_id = w->active_id + 1;
    pthread_cond_broadcast(&w->prep_cv);
}

int log_writer_open(const log_options *opt, uint32_t active_id, uint64_t write_offset,
                    uint64_t next_txn, log_writer **out)
{
    log_writer *w = calloc(1, sizeof *w);
    if (!w) return HANU_ERR_NOMEM;
    w->opt = *opt;
    if (!w->opt.file_size) w->opt.file_size = 64ull << 20;
    snprintf(w->dir, sizeof w->dir, "%s", opt->dir);
    w->opt.dir = w->dir;
    w->active_id = active_id;
    w->active_limit = w->opt.file_size;
    uint64_t continues_from = 0;
    if (opt->reserve_path) {
        snprintf(w->reserve_path, sizeof w->reserve_path, "%s", opt->reserve_path);
        uint64_t r = 0, mark = 0;
        w->recovered_last = next_txn - 1;
        int rc = log_txn_reserve_read(w->reserve_path, &r, &mark);
        /* 2^63 txns are never reached: a larger value is damage, not a position. */
        if (rc == HANU_OK && (r > (UINT64_MAX >> 1) || mark > r)) rc = HANU_ERR_CORRUPT;
        if (rc != HANU_OK && rc != HANU_ERR_NOT_FOUND) { free(w); return rc; }
        if (rc == HANU_OK && r >= next_txn) {
            continues_from = next_txn;
            next_txn = r + 1;
            w->resumed_clean = log_txn_reserve_clean(w->reserve_path);
        }
        w->reserved = w->reserve_target = w->reserve_asked = next_txn - 1 + LOG_TXN_RESERVE_BLOCK;
        rc = log_txn_reserve_write(w->reserve_path, w->reserved, w->recovered_last);
        if (rc) { free(w); return rc; }
    }
    w->next_txn = next_txn;
    w->first_txn_of_run = next_txn;
    w->written_txn = next_txn - 1;
    atomic_store(&w->durable_txn, next_txn - 1);
    w->syncing_fd = w->close_after_sync_fd = w->sealing_fd = -1;
    w->prep_fd = -1;

    char path[1200];
    log_file_path(path, sizeof path, w->dir, active_id, "log");
    int fd = open(path, O_RDWR | O_CLOEXEC), created = 0;
    if (fd < 0 && errno == ENOENT) {
        created = 1;
        /* The first file after start-up is created inline; a zero-filled one is kept
           small (8 MiB, about 10 ms to fill) so start-up stays fast, and the files after
           it are prepared ahead at full size. Measured: fdatasync after an append
           2.8 ms median on this VM's disk, after overwriting zero-filled blocks 174 us. */
        log_file_header h = { .file_id = active_id, .covers_first = continues_from };
        if (w->opt.prealloc == LOG_PREALLOC_ZEROFILL && w->active_limit > (8u << 20))
            w->active_limit = 8u << 20;
        int rc = log_file_create(w->dir, active_id, w->opt.prealloc, w->active_limit, &h, &fd);
        if (rc) { free(w); return rc; }
        write_offset = LOG_FILE_HEADER_SIZE;
    } else if (fd < 0 || continues_from) {
        /* Skipping txns needs a new file whose header says so. */
        if (fd >= 0) close(fd);
        free(w);
        return fd < 0 ? HANU_ERR_IO : HANU_ERR_EXISTS;
    }
    w->fd = fd;
    w->commit_fd = fd;
    w->write_offset = write_offset < LOG_FILE_HEADER_SIZE ? LOG_FILE_HEADER_SIZE : write_offset;
    w->pending_offset = w->write_offset;
    /* An existing file is treated as not preallocated: its tail may be a hole. */
    w->active_preallocated = created && w->opt.prealloc != LOG_PREALLOC_APPEND;

    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work_cv, NULL);
    pthread_cond_init(&w->durable_cv, NULL);
    pthread_cond_init(&w->prep_cv, NULL);
    pthread_mutex_lock(&w->mu);
    request_prep(w);
    pthread_mutex_unlock(&w->mu);
    if (pthread_create(&w->commit_thread, NULL, commit_main, w) != 0 ||
        pthread_create(&w->prep_thread, NULL, prep_main, w) != 0) {
        close(fd);
        free(w);
        return HANU_ERR_NOMEM;
    }
    *out = w;
    return HANU_OK;
}

void log_writer_close(log_writer *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    while (w->sealing_fd >= 0 && !atomic_load(&w->failed)) pthread_cond_wait(&w->durable_cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    log_writer_flush(w);
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->work_cv);
    pthread_cond_broadcast(&w->prep_cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->commit_thread, NULL);
    pthread_join(w->prep_thread, NULL);
    if (w->prep_fd >= 0) {
        /* An unused prepared file holds no frames; remove it so the directory stays tidy. */
        char path[1200];
        log_file_path(path, sizeof path, w->dir, w->prep_id, "log");
        close(w->prep_fd);
        unlink(path);
    }
    if (w->close_after_sync_fd >= 0) close(w->close_after_sync_fd);
    if (w->sealing_fd >= 0) close(w->sealing_fd);   /* after a failure: it is never synced */
    close(w->fd);
    /* Every frame written is durable: the next start goes on at next_txn, without a
       gap, also after a jump with no frame after it (a rebuild's, a promotion's): the
       txns it skipped were never handed out, and the jump itself is kept. */
    if (w->reserve_path[0] && !atomic_load(&w->failed) && atomic_load(&w->durable_txn) == w->written_txn) {
        /* Nothing written in this run: its empty file goes at the next start, so
           the durable mark stays where recovery found it. */
        uint64_t mark = w->written_txn >= w->first_txn_of_run ? w->written_txn : w->recovered_last;
        (void)log_txn_reserve_write_clean(w->reserve_path, w->next_txn - 1, mark);
    }
    hanu_buf_free(&w->pending);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work_cv);
    pthread_cond_destroy(&w->durable_cv);
    pthread_cond_destroy(&w->prep_cv);
    free(w);
}

/* Waits for a sync of the active file that starts after this call (everything
   written to it so far is then on disk). STOPPED when it or an earlier one failed. */
static int sync_by_commit_thread(log_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t ticket = ++w->sync_requests;
    pthread_cond_signal(&w->work_cv);
    while (!atomic_load(&w->failed) && w->syncs_done < ticket) pthread_cond_wait(&w->durable_cv, &w->mu);
    int rc = atomic_load(&w->failed) ? HANU_ERR_STOPPED : HANU_OK;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Waits until no sealed file's sync is owed (mu held): STOPPED after a failure. */
static int wait_sealed_locked(log_writer *w)
{
    while (w->sealing_fd >= 0 && !atomic_load(&w->failed)) pthread_cond_wait(&w->durable_cv, &w->mu);
    return atomic_load(&w->failed) ? HANU_ERR_STOPPED : HANU_OK;
}

static int wait_sealed(log_writer *w)
{
    pthread_mutex_lock(&w->mu);
    int rc = wait_sealed_locked(w);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Seals the active file and starts the next. wait: return only once the old file
   is synced (append mode always waits: its frames are written at once). */
static int rotate(log_writer *w, uint32_t *sealed_id, int wait)
{
    if (atomic_load(&w->failed)) return HANU_ERR_STOPPED;
    /* One owed file at a time: the previous rotation's sync first (rare: it takes
       a file's worth of frames, or two snapshots within one sync). */
    if (wait_sealed(w) != HANU_OK) return HANU_ERR_STOPPED;
    if (log_writer_flush(w) != HANU_OK) return HANU_ERR_STOPPED;
    if (w->opt.prealloc == LOG_PREALLOC_APPEND) wait = 1;
    /* The seal and one fdatasync per file keep every sealed file complete on disk. */
    uint8_t seal[LOG_FRAME_HEADER_SIZE];
    log_seal_encode(seal, w->next_txn - 1);
    int src = hanu_pwrite_full(w->fd, seal, sizeof seal, (off_t)w->write_offset);
    if (src) {
        undo_partial_write(w, w->write_offset, sizeof seal);
        return src;
    }
    if (wait && sync_by_commit_thread(w) != HANU_OK) return HANU_ERR_STOPPED;
    pthread_mutex_lock(&w->mu);
    while (w->prep_wanted && !w->stop) pthread_cond_wait(&w->prep_cv, &w->mu);
    int new_fd = w->prep_fd, rc = w->prep_error;
    uint32_t new_id = w->prep_id;
    w->prep_fd = -1;
    pthread_mutex_unlock(&w->mu);
    if (new_fd < 0) {
        /* The prepared file failed (no space?): try once more inline. */
        new_id = w->active_id + 1;
        log_file_header h = { .file_id = new_id };
        rc = log_file_create(w->dir, new_id, w->opt.prealloc, w->opt.file_size, &h, &new_fd);
        if (rc) {
            pthread_mutex_lock(&w->mu);
            request_prep(w);   /* retried ahead of the next rotation attempt */
            pthread_mutex_unlock(&w->mu);
            return rc;
        }
    }
    (void)rc;
    pthread_mutex_lock(&w->mu);
    int old_fd = w->fd;
    uint32_t old_id = w->active_id;
    uint64_t seal_end = w->write_offset + LOG_FRAME_HEADER_SIZE, old_limit = w->active_limit;
    if (sealed_id) *sealed_id = old_id;
    w->fd = new_fd;
    w->active_id = new_id;
    w->write_offset = LOG_FILE_HEADER_SIZE;
    w->pending_offset = LOG_FILE_HEADER_SIZE;
    w->active_limit = w->opt.file_size;
    w->active_preallocated = w->opt.prealloc != LOG_PREALLOC_APPEND;
    w->commit_fd = new_fd;
    if (!wait) {
        /* The commit thread syncs it (a cycle already syncing it may have missed
           the seal, so it is synced again) and closes it. */
        w->sealing_fd = old_fd;
        w->sealing_id = old_id;
        w->sealing_end = seal_end;
        w->sealing_size = old_limit;
        w->sync_requests++;
        pthread_cond_signal(&w->work_cv);
    } else if (w->syncing_fd == old_fd) {
        w->close_after_sync_fd = old_fd;
    } else {
        close(old_fd);
    }
    request_prep(w);
    pthread_mutex_unlock(&w->mu);
    atomic_fetch_add(&w->stat_rotations, 1);
    return HANU_OK;
}

int log_writer_rotate(log_writer *w, uint32_t *sealed_id)
{
    return rotate(w, sealed_id, 0);
}

uint32_t log_writer_complete_below(log_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint32_t id = w->sealing_fd >= 0 ? w->sealing_id : w->active_id;
    pthread_mutex_unlock(&w->mu);
    return id;
}

int log_writer_wait_complete(log_writer *w)
{
    return wait_sealed(w);
}

/* Asks the preparing thread to reserve the next block of txns; waits only when
   next_txn is not covered yet (it has half a block to finish). */
static int reserve_txns(log_writer *w)
{
    pthread_mutex_lock(&w->mu);
    if (w->reserve_target < w->next_txn + LOG_TXN_RESERVE_BLOCK / 2) {
        w->reserve_target = w->next_txn - 1 + LOG_TXN_RESERVE_BLOCK;
        pthread_cond_broadcast(&w->prep_cv);
    }
    while (w->reserved < w->next_txn && !w->reserve_error && !w->stop)
        pthread_cond_wait(&w->prep_cv, &w->mu);
    int rc = w->reserved >= w->next_txn ? HANU_OK : w->reserve_error ? w->reserve_error : HANU_ERR_STOPPED;
    w->reserve_error = 0;   /* after a failure the next append asks again */
    w->reserve_asked = w->reserve_target;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int log_txn_reserve_read(const char *path, uint64_t *reserved, uint64_t *durable)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? HANU_ERR_NOT_FOUND : HANU_ERR_IO;
    uint8_t b[LOG_TXN_RESERVE_SIZE];
    int rc = hanu_pread_full(fd, b, sizeof b, 0);
    close(fd);
    if (rc || memcmp(b, "HANUTXN", 8) != 0 || hanu_get_u32(b + 24) != hanu_checksum32(b, 24))
        return HANU_ERR_CORRUPT;
    *reserved = hanu_get_u64(b + 8);
    *durable = hanu_get_u64(b + 16);
    return HANU_OK;
}

static int reserve_write(const char *path, uint64_t reserved, uint64_t durable, int clean)
{
    uint8_t b[LOG_TXN_RESERVE_CLEAN_SIZE];
    memcpy(b, "HANUTXN", 8);
    hanu_put_u64(b + 8, reserved);
    hanu_put_u64(b + 16, durable);
    hanu_put_u32(b + 24, hanu_checksum32(b, 24));
    memcpy(b + LOG_TXN_RESERVE_SIZE, "HANUCLN", 8);
    hanu_put_u32(b + LOG_TXN_RESERVE_SIZE + 8, hanu_checksum32(b, LOG_TXN_RESERVE_SIZE + 8));
    return hanu_replace_file(path, b, clean ? LOG_TXN_RESERVE_CLEAN_SIZE : LOG_TXN_RESERVE_SIZE);
}

int log_txn_reserve_write(const char *path, uint64_t reserved, uint64_t durable)
{
    return reserve_write(path, reserved, durable, 0);
}

int log_txn_reserve_write_clean(const char *path, uint64_t reserved, uint64_t durable)
{
    return reserve_write(path, reserved, durable, 1);
}

int log_txn_reserve_clean(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t b[LOG_TXN_RESERVE_CLEAN_SIZE + 1];
    ssize_t n = pread(fd, b, sizeof b, 0);
    close(fd);
    return n == LOG_TXN_RESERVE_CLEAN_SIZE && !memcmp(b + LOG_TXN_RESERVE_SIZE, "HANUCLN", 8) &&
           hanu_get_u32(b + 24) == hanu_checksum32(b, 24) &&
           hanu_get_u32(b + LOG_TXN_RESERVE_SIZE + 8) == hanu_checksum32(b, LOG_TXN_RESERVE_SIZE + 8);
}

int log_writer_resumed_clean(log_writer *w) { return w->resumed_clean; }

/* Puts the bytes a failed write may have left back the way they were. */
static void undo_partial_write(log_writer *w, uint64_t off, size_t len)
{
    struct stat st;
    if (fstat(w->fd, &st) != 0) return;
    if (w->opt.prealloc == LOG_PREALLOC_APPEND || (uint64_t)st.st_size <= off + len) {
        if ((uint64_t)st.st_size > off && ftruncate(w->fd, (off_t)off) == 0) return;
    }
    static const uint8_t zeros[4096];
    for (uint64_t at = off; at < off + len && at < (uint64_t)st.st_size; at += sizeof zeros)
        if (hanu_pwrite_full(w->fd, zeros, HANU_MIN(sizeof zeros, off + len - at), (off_t)at)) break;
}

/* Numbering jumps from next_txn to txn: the active file is sealed and the next one's
   header says the log continues at the old next_txn, so recovery accepts a first
   frame above it (the rule for txns lost in a crash). The header is synced before
   any frame can follow it, so no power loss leaves frames in a file that does not
   say why they skip. */
static int jump_to(log_writer *w, uint64_t txn, uint32_t *rotated_from)
{
    uint64_t continues_from = w->next_txn;
    int rc = rotate(w, rotated_from, 1);
    if (rc) return rc;
    log_file_header h = { .file_id = w->active_id, .covers_first = continues_from };
    uint8_t head[LOG_FILE_HEADER_SIZE];
    log_file_header_encode(head, &h);
    if (hanu_pwrite_full(w->fd, head, sizeof head, 0) != HANU_OK) return HANU_ERR_IO;
    if (sync_by_commit_thread(w) != HANU_OK) return HANU_ERR_STOPPED;
    w->next_txn = txn;
    return HANU_OK;
}

int log_writer_append_at(log_writer *w, hanu_buf *b, uint64_t txn, log_location *loc,
                         uint32_t *rotated_from)
{
    if (rotated_from) *rotated_from = 0;
    if (txn < w->next_txn || txn > (UINT64_MAX >> 1)) return HANU_ERR_INVALID;
    if (atomic_load(&w->failed)) return HANU_ERR_STOPPED;
    if (txn > w->next_txn) {
        int rc = jump_to(w, txn, rotated_from);
        if (rc) return rc;
    }
    uint64_t got;
    uint32_t rotated_again = 0;
    int rc = log_writer_append(w, b, &got, loc, &rotated_again);
    if (rotated_again && rotated_from) *rotated_from = rotated_again;
    return rc;
}

int log_writer_skip_to(log_writer *w, uint64_t txn)
{
    if (txn > (UINT64_MAX >> 1)) return HANU_ERR_INVALID;
    if (txn <= w->next_txn) return HANU_OK;
    int rc = jump_to(w, txn, NULL);
    if (rc == HANU_OK && w->reserve_path[0]) rc = reserve_txns(w);   /* durable before it returns */
    return rc;
}

int log_writer_append(log_writer *w, hanu_buf *b, uint64_t *txn, log_location *loc,
                      uint32_t *rotated_from)
{
    if (rotated_from) *rotated_from = 0;
    if (atomic_load(&w->failed)) return HANU_ERR_STOPPED;
    if (b->len > UINT32_MAX - LOG_FILE_HEADER_SIZE) return HANU_ERR_TOO_LARGE;
    /* Room is kept for the seal that ends every file. */
    if (w->write_offset + b->len + LOG_FRAME_HEADER_SIZE > w->active_limit &&
        w->write_offset > LOG_FILE_HEADER_SIZE) {
        int rc = rotate(w, rotated_from, 0);
        if (rc) return rc;
    }
    if (w->write_offset + b->len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    if (w->reserve_path[0] && w->next_txn + LOG_TXN_RESERVE_BLOCK / 2 > w->reserve_asked) {
        int rc = reserve_txns(w);
        if (rc) return rc;
    }
    log_frame_finish(b, w->next_txn);
    if (w->active_preallocated && w->write_offset + b->len <= w->active_limit) {
        /* The blocks are reserved: the bytes go to the file with the next flush. */
        pthread_mutex_lock(&w->mu);
        int rc = hanu_buf_append(&w->pending, b->data, b->len);
        if (rc == HANU_OK) {
            w->pending_last_txn = w->next_txn;
            /* Held behind a sealed file's sync: bounded, then the writer waits. */
            if (w->sealing_fd >= 0 && w->pending.len >= PENDING_HOLD_MAX_BYTES &&
                wait_sealed_locked(w) != HANU_OK)
                rc = HANU_ERR_STOPPED;
            else if (w->pending.len >= PENDING_FLUSH_BYTES)
                rc = flush_locked(w);
        }
        pthread_mutex_unlock(&w->mu);
        if (rc == HANU_ERR_STOPPED && w->opt.on_durable)
            w->opt.on_durable(w->opt.ctx, atomic_load(&w->durable_txn), 1);
        if (rc == HANU_ERR_NOMEM) return rc;
        *txn = w->next_txn;
        loc->file_id = w->active_id;
        loc->offset = (uint32_t)w->write_offset;
        w->write_offset += b->len;
        w->next_txn++;
        atomic_fetch_add(&w->stat_frames, 1);
        return rc == HANU_ERR_STOPPED ? HANU_OK : rc;   /* applied; it will never be acknowledged */
    }
    if (wait_sealed(w) != HANU_OK || log_writer_flush(w) != HANU_OK) return HANU_ERR_STOPPED;
    int rc = hanu_pwrite_full(w->fd, b->data, b->len, (off_t)w->write_offset);
    if (rc) {
        int err = errno;
        undo_partial_write(w, w->write_offset, b->len);
        errno = err;
        return rc;
    }
    *txn = w->next_txn;
    loc->file_id = w->active_id;
    loc->offset = (uint32_t)w->write_offset;
    w->write_offset += b->len;
    w->next_txn++;
    atomic_fetch_add(&w->stat_bytes, b->len);
    atomic_fetch_add(&w->stat_frames, 1);
    pthread_mutex_lock(&w->mu);
    w->pending_offset = w->write_offset;
    w->written_txn = *txn;
    if (w->commit_waiting && (!w->commit_waiting_group ||
                              w->written_txn - atomic_load(&w->durable_txn) >= w->group_target))
        pthread_cond_signal(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    return HANU_OK;
}

uint64_t log_writer_next_txn(const log_writer *w) { return w->next_txn; }
uint64_t log_writer_durable_txn(const log_writer *w) { return atomic_load(&((log_writer *)w)->durable_txn); }
uint32_t log_writer_active_id(const log_writer *w) { return w->active_id; }

uint64_t log_writer_written_txn(log_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t t = w->written_txn;
    pthread_mutex_unlock(&w->mu);
    return t;
}
int log_writer_failed(const log_writer *w) { return atomic_load(&((log_writer *)w)->failed); }

void log_writer_want_durable(log_writer *w, uint64_t txn)
{
    uint64_t cur = atomic_load(&w->wanted_txn);
    while (cur < txn && !atomic_compare_exchange_weak(&w->wanted_txn, &cur, txn)) {}
    if (atomic_load(&w->lazy_waiting)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_signal(&w->work_cv);
        pthread_mutex_unlock(&w->mu);
    }
}

int log_writer_wait_durable(log_writer *w, uint64_t txn)
{
    log_writer_want_durable(w, txn);
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->work_cv);
    while (!atomic_load(&w->failed) && atomic_load(&w->durable_txn) < txn && !w->stop)
        pthread_cond_wait(&w->durable_cv, &w->mu);
    int rc = atomic_load(&w->durable_txn) >= txn ? HANU_OK : HANU_ERR_STOPPED;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int log_writer_sync(log_writer *w)
{
    (void)wait_sealed(w);   /* the held frames are written once it is synced */
    log_writer_flush(w);
    pthread_mutex_lock(&w->mu);
    uint64_t cur = atomic_load(&w->wanted_txn);
    while (cur < w->written_txn && !atomic_compare_exchange_weak(&w->wanted_txn, &cur, w->written_txn)) {}
    pthread_cond_signal(&w->work_cv);
    while (!atomic_load(&w->failed) && atomic_load(&w->durable_txn) < w->written_txn)
        pthread_cond_wait(&w->durable_cv, &w->mu);
    int rc = atomic_load(&w->failed) ? HANU_ERR_STOPPED : HANU_OK;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void log_writer_get_stats(log_writer *w, log_writer_stats *s)
{
    s->bytes_written = atomic_load(&w->stat_bytes);
    s->prealloc_bytes = atomic_load(&w->stat_prealloc);
    s->syncs = atomic_load(&w->stat_syncs);
    s->frames = atomic_load(&w->stat_frames);
    s->rotations = atomic_load(&w->stat_rotations);
    s->sync_ns = atomic_load(&w->stat_sync_ns);
}
