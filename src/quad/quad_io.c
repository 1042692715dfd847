/*
 * quad_io.c: cold reads of the facts kernel. quad_io_read runs a batch of
 * positional reads (a gather's misses: whole lanes of a chunk, or runs of
 * microblocks) with the backend chosen at open: inline pread, a small pool of
 * blocking I/O threads (the caller helps drain the queue while it waits), or
 * io_uring (liburing), one ring per handle; small batches are always read
 * inline. A short read is HANU_ERR_CORRUPT: the directory said the bytes
 * exist. Relies on base (pread) and liburing, which is loaded with dlopen
 * when a handle first asks for QUAD_IO_URING: a program that never does
 * neither links nor loads it (only liburing.h is needed to build).
 */
#include "quad/quad_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct io_item {
    quad_ioreq *req;
    size_t *remaining;
} io_item;

struct quad_io {
    int backend;
    int fd;
    int direct;                      /* QUAD_IO_DIRECT: requests are aligned windows */
    pthread_mutex_t arena_mu;        /* the kept aligned arena of direct batches */
    uint8_t *arena;
    size_t arena_cap;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    io_item *queue;
    size_t qhead, qlen, qcap;
    int stop;
    pthread_t *th;
    uint32_t nth;
    int ring_ok;
    int ring_broken;                 /* ring_mu: a submit or wait failed for good */
    pthread_mutex_t ring_mu;
    struct io_uring ring;
};

/* The four liburing calls that are not inline in liburing.h (2.x ABI). */
static struct {
    int (*queue_init)(unsigned entries, struct io_uring *ring, unsigned flags);
    void (*queue_exit)(struct io_uring *ring);
    int (*submit)(struct io_uring *ring);
    int (*get_cqe)(struct io_uring *ring, struct io_uring_cqe **cqe, unsigned submit,
                   unsigned wait_nr, sigset_t *sigmask);
} uring_lib;
static int uring_lib_ok;
static pthread_once_t uring_lib_once = PTHREAD_ONCE_INIT;

/* Never unloaded: rings of open handles point into it. */
static void uring_lib_load(void)
{
    void *h = dlopen("liburing.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    *(void **)&uring_lib.queue_init = dlsym(h, "io_uring_queue_init");
    *(void **)&uring_lib.queue_exit = dlsym(h, "io_uring_queue_exit");
    *(void **)&uring_lib.submit = dlsym(h, "io_uring_submit");
    *(void **)&uring_lib.get_cqe = dlsym(h, "__io_uring_get_cqe");
    uring_lib_ok = uring_lib.queue_init && uring_lib.queue_exit && uring_lib.submit && uring_lib.get_cqe;
}

/* io_uring_wait_cqe of liburing.h, through the loaded library. */
static int uring_wait_cqe(struct io_uring *ring, struct io_uring_cqe **cqe)
{
    if (!__io_uring_peek_cqe(ring, cqe, NULL) && *cqe) return 0;
    return uring_lib.get_cqe(ring, cqe, 0, 1, NULL);
}

#define RING_DEPTH 128
#define QUAD_IO_INLINE_BYTES (128u << 10)

/* A direct window may run past the end of the file: len becomes what was
 * read, and quad_io_read checks that it covers the bytes asked for. */
static void do_read(quad_io *io, quad_ioreq *r)
{
    if (!io->direct) {
        r->rc = hanu_pread_full(io->fd, r->buf, r->len, (off_t)r->off);
        return;
    }
    size_t got = 0;
    r->rc = quad_dio_pread_upto(io->fd, r->buf, r->len, r->off, &got);
    r->len = got;
}

/* Pops one item (lock held); 0 when the queue is empty. */
static int pop_locked(quad_io *io, io_item *it)
{
    if (io->qhead == io->qlen) return 0;
    *it = io->queue[io->qhead++];
    if (io->qhead == io->qlen) io->qhead = io->qlen = 0;
    return 1;
}

static void run_item_unlocked(quad_io *io, io_item *it)
{
    pthread_mutex_unlock(&io->mu);
    do_read(io, it->req);
    pthread_mutex_lock(&io->mu);
    if (--*it->remaining == 0) pthread_cond_broadcast(&io->done_cv);
}

static void *io_worker(void *arg)
{
    quad_io *io = arg;
    pthread_mutex_lock(&io->mu);
    while (!io->stop) {
        io_item it;
        if (pop_locked(io, &it)) run_item_unlocked(io, &it);
        else pthread_cond_wait(&io->work_cv, &io->mu);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

int quad_io_open(quad *q)
{
    quad_io *io = calloc(1, sizeof *io);
    if (!io) return HANU_ERR_NOMEM;
    io->backend = q->opt.io_backend;
    io->fd = q->fd;
    io->direct = q->dio != NULL;
    pthread_mutex_init(&io->mu, NULL);
    pthread_mutex_init(&io->ring_mu, NULL);
    pthread_mutex_init(&io->arena_mu, NULL);
    pthread_cond_init(&io->work_cv, NULL);
    pthread_cond_init(&io->done_cv, NULL);
    q->io = io;
    if (io->backend == QUAD_IO_THREADS) {
        io->th = calloc(q->opt.io_threads, sizeof *io->th);
        if (!io->th) return HANU_ERR_NOMEM;
        for (uint32_t i = 0; i < q->opt.io_threads; i++) {
            if (pthread_create(&io->th[i], NULL, io_worker, io) != 0) return HANU_ERR_NOMEM;
            io->nth++;
        }
    } else if (io->backend == QUAD_IO_URING) {
        pthread_once(&uring_lib_once, uring_lib_load);
        if (!uring_lib_ok) {
            quad_set_error("%s: io_uring asked for, but liburing.so.2 cannot be loaded", q->path);
            return HANU_ERR_UNSUPPORTED;
        }
        int rc = uring_lib.queue_init(RING_DEPTH, &io->ring, 0);
        if (rc != 0) {
            quad_set_error("%s: io_uring_queue_init: %s", q->path, strerror(-rc));
            return HANU_ERR_UNSUPPORTED;
        }
        io->ring_ok = 1;
    }
    return 0;
}

void quad_io_close(quad *q)
{
    quad_io *io = q->io;
    if (!io) return;
    pthread_mutex_lock(&io->mu);
    io->stop = 1;
    pthread_cond_broadcast(&io->work_cv);
    pthread_mutex_unlock(&io->mu);
    for (uint32_t i = 0; i < io->nth; i++) pthread_join(io->th[i], NULL);
    if (io->ring_ok) uring_lib.queue_exit(&io->ring);
    free(io->th);
    free(io->queue);
    pthread_mutex_destroy(&io->mu);
    pthread_mutex_destroy(&io->ring_mu);
    pthread_mutex_destroy(&io->arena_mu);
    free(io->arena);
    pthread_cond_destroy(&io->work_cv);
    pthread_cond_destroy(&io->done_cv);
    free(io);
    q->io = NULL;
}

static int read_threads(quad_io *io, quad_ioreq *reqs, size_t n)
{
    size_t remaining = n;
    pthread_mutex_lock(&io->mu);
    if (io->qlen + n > io->qcap) {
        size_t nc = io->qcap ? io->qcap : 64;
        while (nc < io->qlen + n) nc *= 2;
        io_item *nq = realloc(io->queue, nc * sizeof *nq);
        if (!nq) { pthread_mutex_unlock(&io->mu); return HANU_ERR_NOMEM; }
        io->queue = nq;
        io->qcap = nc;
    }
    for (size_t i = 0; i < n; i++) io->queue[io->qlen++] = (io_item){ &reqs[i], &remaining };
    pthread_cond_broadcast(&io->work_cv);
    while (remaining > 0) {
        io_item it;
        if (pop_locked(io, &it)) run_item_unlocked(io, &it);
        else pthread_cond_wait(&io->done_cv, &io->mu);
    }
    pthread_mutex_unlock(&io->mu);
    return 0;
}

static int uring_retry(int rc)
{
    return rc == -EINTR || rc == -EAGAIN || rc == -ETIME;
}

/* Reads through the ring, RING_DEPTH requests at a time. A request counts as
 * read only when its own completion arrived (rc starts as HANU_ERR_IO), and
 * every submitted request is reaped before the next batch: a signal that
 * interrupts a wait (EINTR) interrupts the wait, not the reads, so an early
 * return would leave reads landing in buffers already decoded and their
 * completions in the next batch. A ring that fails otherwise is not used
 * again (pread from then on). */

static void read_uring(quad_io *io, quad_ioreq *reqs, size_t n)
{
    pthread_mutex_lock(&io->ring_mu);
    size_t done = 0;
    while (done < n && !io->ring_broken) {
        size_t k = n - done < RING_DEPTH ? n - done : RING_DEPTH, queued = 0;
        for (; queued < k; queued++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
            if (!sqe) break;
            quad_ioreq *r = &reqs[done + queued];
            r->rc = HANU_ERR_IO;
            io_uring_prep_read(sqe, io->fd, r->buf, (unsigned)r->len, r->off);
            io_uring_sqe_set_data64(sqe, done + queued);
        }
        size_t submitted = 0;
        while (submitted < queued) {
            int s = uring_lib.submit(&io->ring);
            if (s > 0) submitted += (size_t)s;
            else if (!uring_retry(s)) break;
        }
        size_t got = 0;
        while (got < submitted) {
            struct io_uring_cqe *cqe;
            int w = uring_wait_cqe(&io->ring, &cqe);
            if (uring_retry(w)) continue;
            if (w < 0) break;
            uint64_t i = io_uring_cqe_get_data64(cqe);
            if (i >= done && i < done + queued) {
                quad_ioreq *r = &reqs[i];
                /* short or failed reads are finished with pread, which reports the error */
                if (cqe->res < 0 || (size_t)cqe->res != r->len) do_read(io, r);
                else r->rc = 0;
            }
            io_uring_cqe_seen(&io->ring, cqe);
            got++;
        }
        /* (a wait that fails for good with reads in flight is a known gap:
         * they may still land; never seen, docs/QUAD.md) */
        if (got < submitted || submitted < queued || queued < k) io->ring_broken = 1;
        for (size_t i = done; i < done + k; i++)
            if (reqs[i].rc) do_read(io, &reqs[i]);
        done += k;
    }
    pthread_mutex_unlock(&io->ring_mu);
    for (size_t i = done; i < n; i++) do_read(io, &reqs[i]);
}

static int read_batch(quad_io *io, quad_ioreq *reqs, size_t n)
{
    int rc = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += reqs[i].len;
    /* a hand-off to the pool or the ring costs more than a few small preads
     * (measured on tmpfs: a cold 3-lane point read took 3 us inline, 15-20 us
     * through the pool, 80 us through io_uring, which punts to kernel workers) */
    if (n <= 4 || bytes < QUAD_IO_INLINE_BYTES || io->backend == QUAD_IO_INLINE) {
        for (size_t i = 0; i < n; i++) do_read(io, &reqs[i]);
    } else if (io->backend == QUAD_IO_THREADS) {
        rc = read_threads(io, reqs, n);
    } else {
        read_uring(io, reqs, n);
    }
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (reqs[i].rc) return reqs[i].rc;
    return 0;
}

#define DIO_MERGE (1u << 20)   /* adjacent windows are merged up to this size */
/* A direct batch's arena is kept for the next one up to this size: first
 * touching fresh memory is slow on these VMs (a random cold gather of a 4M-fact
 * store reads 17 MiB of windows: 0.07 M ids/s with a new arena per batch, 0.11-0.12
 * with the arena kept, inline reads). */
#define DIO_ARENA_KEEP (32u << 20)

/* An aligned arena of len bytes: the kept one when free (*kept set), else a new one. */
static uint8_t *arena_get(quad_io *io, size_t len, int *kept)
{
    *kept = 0;
    if (len <= DIO_ARENA_KEEP && pthread_mutex_trylock(&io->arena_mu) == 0) {
        if (io->arena_cap < len) {
            void *p = NULL;
            if (posix_memalign(&p, QD_BLOCK, len) != 0) {
                pthread_mutex_unlock(&io->arena_mu);
                return NULL;
            }
            free(io->arena);
            io->arena = p;
            io->arena_cap = len;
        }
        *kept = 1;
        return io->arena;
    }
    void *p = NULL;
    return posix_memalign(&p, QD_BLOCK, len ? len : QD_BLOCK) == 0 ? p : NULL;
}

static void arena_put(quad_io *io, uint8_t *a, int kept)
{
    if (kept) pthread_mutex_unlock(&io->arena_mu);
    else free(a);
}

/* QUAD_IO_DIRECT: each request becomes the 4 KiB-aligned window that covers
 * it; windows of requests in ascending file order that touch or overlap are
 * merged (lanes of neighbouring chunks share their edge blocks). The windows
 * are read through the backend into one aligned arena, then copied out. */
static int read_direct(quad_io *io, quad_ioreq *reqs, size_t n)
{
    quad_ioreq *win = malloc(n * sizeof *win);
    size_t *at = malloc(n * sizeof *at), *wi = malloc(n * sizeof *wi);
    uint8_t *arena = NULL;
    int kept = 0;
    int rc = (win && at && wi) ? 0 : HANU_ERR_NOMEM;
    size_t nw = 0, total = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t a = reqs[i].off & ~(uint64_t)(QD_BLOCK - 1);
        uint64_t e = (reqs[i].off + reqs[i].len + QD_BLOCK - 1) & ~(uint64_t)(QD_BLOCK - 1);
        quad_ioreq *w = nw ? &win[nw - 1] : NULL;
        if (w && a >= w->off && a <= w->off + w->len && e - w->off <= DIO_MERGE) {
            if (e > w->off + w->len) w->len = (size_t)(e - w->off);
        } else {
            win[nw++] = (quad_ioreq){ .off = a, .len = (size_t)(e - a) };
        }
        wi[i] = nw - 1;
        at[i] = (size_t)(reqs[i].off - win[nw - 1].off);
    }
    for (size_t w = 0; w < nw; w++) total += win[w].len;
    if (rc == 0 && !(arena = arena_get(io, total, &kept))) rc = HANU_ERR_NOMEM;
    if (rc == 0) {
        size_t pos = 0;
        for (size_t w = 0; w < nw; w++) {
            win[w].buf = arena + pos;
            pos += win[w].len;
        }
        rc = read_batch(io, win, nw);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        const quad_ioreq *w = &win[wi[i]];
        /* the file ended inside the window before the bytes asked for */
        if (w->len < at[i] + reqs[i].len) rc = HANU_ERR_CORRUPT;
        else memcpy(reqs[i].buf, (uint8_t *)w->buf + at[i], reqs[i].len);
    }
    for (size_t i = 0; i < n; i++) reqs[i].rc = rc;
    if (arena) arena_put(io, arena, kept);
    free(win);
    free(at);
    free(wi);
    return rc;
}

int quad_io_read(quad *q, quad_ioreq *reqs, size_t n)
{
    quad_io *io = q->io;
    if (n == 0) return 0;
    return io->direct ? read_direct(io, reqs, n) : read_batch(io, reqs, n);
}
