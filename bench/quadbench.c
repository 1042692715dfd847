/*
 * quadbench: benchmark of the facts kernel (include/quad.h), the facts
 * workloads of the benchmark plan (docs/QUAD.md, Measurements). It first measures this machine's limits in the
 * same run (memcpy bandwidth, ordered and random 32-byte reads from memory,
 * fdatasync latency after a 4 KiB append; see measure_limits for what each
 * read probe measures) and prints every result beside the limit it is bounded
 * by, as a fraction: random gathers of the structured store against
 * independent random reads over 16 MiB (its cached payload is about that
 * size), of the entropy store against the same over the whole table.
 *
 *   quadbench [--quick] [--dir PATH] [--json] [--only LIST]
 *
 * --only runs only the listed parts (comma separated: append, gather,
 * backends, retire, stream, group, sweep, size, clean, fold, device; the limits always
 * run). `device` is not in the default set: it compares cold reads that
 * really reach the device, buffered (the store file's pages dropped with
 * posix_fadvise(DONTNEED) before every call) against QUAD_IO_DIRECT, and
 * appends of both to the disk directory.
 * --dir is the on-disk directory (default /tmp); tmpfs runs use /dev/shm.
 * The table (with progress) goes to stdout, or to stderr with --json, which
 * prints {"limits": {...}, "results": [{"name", "value", "unit", ...}]} at
 * the end. Buffers are allocated and touched once and reused: first touch of
 * new memory is slow on these VMs.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "quad.h"
#include "base/base.h"

static int quick, json;
static const char *disk_dir = "/tmp";
static const char *shm_dir = "/dev/shm";
static const char *only;   /* NULL: every part */
static FILE *tbl;

/* ---- results ---- */
typedef struct result {
    char name[96];
    double value;
    char unit[16];
    double limit;     /* 0 when no limit applies */
    char limit_name[24];
} result;
static result results[256];
static int nresults;
static double lim_memcpy_gbs, lim_memcpy_facts, lim_ordered, lim_random, lim_fsync_us;
/* random reads over 16 MiB: the structured gather store's cached payload is
 * about that size, so its random gathers are compared with this one */
static double lim_random_small;

static void report(const char *name, double value, const char *unit, double limit, const char *lname)
{
    result *r = &results[nresults < 255 ? nresults++ : 255];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->value = value;
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    r->limit = limit;
    snprintf(r->limit_name, sizeof r->limit_name, "%s", lname ? lname : "");
    if (limit > 0)
        fprintf(tbl, "  %-66s %12.2f %-9s %6.1f%% of %s\n", name, value, unit, 100.0 * value / limit, lname);
    else
        fprintf(tbl, "  %-66s %12.2f %-9s\n", name, value, unit);
    fflush(tbl);
}

static void section(const char *s)
{
    fprintf(tbl, "\n%s\n", s);
    fflush(tbl);
}

static double now_s(void) { return (double)hanu_now_ns() / 1e9; }

/* The calling thread's CPU time (user and system): time spent preempted on
 * this loaded machine does not count. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---- data ---- */
#define POOL (1u << 20)
static quad_fact *structured, *entropy;

static void make_data(void)
{
    structured = malloc(POOL * sizeof *structured);
    entropy = malloc(POOL * sizeof *entropy);
    if (!structured || !entropy) { fprintf(stderr, "out of memory\n"); exit(1); }
    uint64_t ts = 1700000000000ULL;
    for (size_t i = 0; i < POOL; i++) {
        ts += rnd() & 15;
        structured[i].lane[0] = 500000 + rnd() % 1000;
        structured[i].lane[1] = 77;
        structured[i].lane[2] = ts;
        structured[i].lane[3] = 9000000 + (rnd() & 4095);
        for (int l = 0; l < 4; l++) entropy[i].lane[l] = rnd();
    }
}

static void store_path(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/quadbench-%d-%s.quad", dir, (int)getpid(), name);
    unlink(out);
}

static int io_backend = QUAD_IO_THREADS;
static unsigned open_flags;   /* QUAD_IO_DIRECT for the device part */
static int drop_fd = -1;      /* cold gathers drop this file's page cache first (device part) */
static size_t cold_calls;     /* cold gathers per run when set (device part) */

static quad *open_store(const char *path, uint32_t rows, uint32_t mb, uint32_t window_us)
{
    quad_options o;
    quad_options_default(&o);
    o.io_backend = io_backend;
    o.flags = open_flags;
    o.chunk_rows = rows;
    o.microblock_rows = mb < rows ? mb : rows;
    o.group_window_us = window_us;
    o.cache_bytes = (size_t)512 << 20;
    o.checkpoint_bytes = 0;
    quad *q = NULL;
    int rc = quad_open(path, &o, &q);
    if (rc) { fprintf(stderr, "open %s: %s\n", path, hanu_status_str(rc)); exit(1); }
    return q;
}

/* ---- limits ---- */
static void measure_limits(void)
{
    section("machine limits (this run)");
    size_t sz = (size_t)(quick ? 64 : 256) << 20;
    uint8_t *a = malloc(sz), *b = malloc(sz);
    memset(a, 1, sz);
    memset(b, 2, sz);
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        double t = now_s();
        memcpy(b, a, sz);
        t = now_s() - t;
        if (t < best) best = t;
        a[r] = b[sz - 1 - (size_t)r];
    }
    lim_memcpy_gbs = (double)sz / best / 1e9;
    lim_memcpy_facts = lim_memcpy_gbs * 1e9 / 32 / 1e6;
    report("memcpy bandwidth", lim_memcpy_gbs, "GB/s", 0, NULL);
    report("memcpy as 32-byte facts", lim_memcpy_facts, "M/s", 0, NULL);
    /* 32-byte records read from a table of as many facts as the gather store
     * holds (4M, 1M quick; 4 KiB pages), best of 3:
     *   ordered      one pass in order;
     *   random       independent loads at precomputed random positions: the
     *                loads do not depend on each other, so the core keeps many
     *                misses in flight, as a gather can (this is the limit the
     *                random gathers are compared with);
     *   small table  the same over 16 MiB, about the cached compressed payload
     *                of the structured gather store;
     *   dependent    each position comes from the previous load (a pointer
     *                chase over one random cycle): memory latency, one miss at
     *                a time; shown for contrast only. */
    size_t n = quick ? (1u << 20) : (4u << 20);
    quad_fact *t = (quad_fact *)a;
    if (n * sizeof *t > sz) n = sz / sizeof *t;
    uint32_t *idx = (uint32_t *)b;
    size_t nidx = 4u << 20;
    uint64_t sum = 0;
    double best_o = 1e9, best_r = 1e9, best_s = 1e9;
    size_t nsmall = ((size_t)16 << 20) / sizeof *t;
    for (int r = 0; r < 3; r++) {
        double tt = now_s();
        for (size_t i = 0; i < n; i++) sum += t[i].lane[0] ^ t[i].lane[3];
        tt = now_s() - tt;
        if (tt < best_o) best_o = tt;
    }
    for (int pass = 0; pass < 2; pass++) {
        size_t range = pass ? nsmall : n;
        for (size_t i = 0; i < nidx; i++) idx[i] = (uint32_t)(rnd() % range);
        for (int r = 0; r < 3; r++) {
            double tt = now_s();
            for (size_t i = 0; i < nidx; i++) {
                const quad_fact *f = &t[idx[i]];
                sum += f->lane[0] ^ f->lane[1] ^ f->lane[2] ^ f->lane[3];
            }
            tt = now_s() - tt;
            double *best = pass ? &best_s : &best_r;
            if (tt < *best) *best = tt;
        }
    }
    lim_ordered = (double)n / best_o / 1e6;
    lim_random = (double)nidx / best_r / 1e6;
    lim_random_small = (double)nidx / best_s / 1e6;
    /* one random cycle through the table (Sattolo), lane 0 holds the next position */
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd() % i;
        uint32_t x = idx[i]; idx[i] = idx[j]; idx[j] = x;
    }
    for (size_t i = 0; i < n; i++) t[i].lane[0] = idx[i];
    size_t ndep = quick ? (1u << 18) : (1u << 20), cur = 0;
    double tt = now_s();
    for (size_t i = 0; i < ndep; i++) cur = t[cur].lane[0] ^ (t[cur].lane[1] & 0);
    tt = now_s() - tt;
    double lim_dependent = (double)ndep / tt / 1e6;
    if ((sum ^ cur) == 42) fprintf(tbl, " ");
    char name[96];
    snprintf(name, sizeof name, "ordered 32-byte reads from memory (%zuM facts)", n >> 20);
    report(name, lim_ordered, "M/s", 0, NULL);
    snprintf(name, sizeof name, "random 32-byte reads, independent (%zuM facts)", n >> 20);
    report(name, lim_random, "M/s", 0, NULL);
    report("random 32-byte reads, independent (16 MiB table)", lim_random_small, "M/s", 0, NULL);
    snprintf(name, sizeof name, "random 32-byte reads, dependent chain (%zuM facts)", n >> 20);
    report(name, lim_dependent, "M/s", 0, NULL);
    free(a);
    free(b);
    /* fdatasync after a 4 KiB append, on the disk directory */
    char p[600];
    store_path(p, sizeof p, disk_dir, "fsync");
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    uint8_t page[4096];
    memset(page, 7, sizeof page);
    int reps = quick ? 30 : 100;
    double lat[100];
    for (int i = 0; i < reps; i++) {
        double s = now_s();
        if (hanu_pwrite_full(fd, page, sizeof page, (off_t)i * 4096) != 0 || fdatasync(fd) != 0) {
            fprintf(stderr, "fsync probe failed\n");
            break;
        }
        lat[i] = (now_s() - s) * 1e6;
    }
    close(fd);
    unlink(p);
    lim_fsync_us = median(lat, reps);
    report("fdatasync after 4 KiB append (median)", lim_fsync_us, "us", 0, NULL);
}

/* ---- append ---- */
static void release_keep(void *ctx, quad_fact *f) { (void)ctx; (void)f; }

static double run_append(const char *dir, const quad_fact *data, size_t batch, int durability,
                         int owned, size_t total, quad_stats *st_out)
{
    char p[600];
    store_path(p, sizeof p, dir, "append");
    quad *q = open_store(p, 4096, 256, 0);
    /* warm the frame buffer and file once */
    (void)quad_append(q, data, batch, QUAD_BUFFERED, NULL, NULL);
    /* the caller's batches come from a window of two batches (at least 64 Ki
     * facts), in cache as if just produced, as an application's would be */
    size_t window = 2 * batch < 65536 ? 65536 : 2 * batch;
    size_t done = 0, off = 0;
    double t = now_s();
    while (done < total) {
        if (off + batch > window) off = 0;
        int rc = owned ? quad_append_owned(q, (quad_fact *)&data[off], batch, durability, release_keep,
                                           NULL, NULL, NULL)
                       : quad_append(q, data + off, batch, durability, NULL, NULL);
        if (rc) { fprintf(stderr, "append: %s\n", hanu_status_str(rc)); exit(1); }
        done += batch;
        off += batch;
    }
    t = now_s() - t;
    if (st_out) quad_stats_get(q, st_out);
    quad_close(q);
    unlink(p);
    return (double)done / t / 1e6;
}

static void bench_append(const char *dir, const char *dname)
{
    char title[128];
    snprintf(title, sizeof title, "append (%s)", dname);
    section(title);
    size_t batches[] = { 64, 4096, 65536 };
    for (int shape = 0; shape < 2; shape++) {
        const quad_fact *data = shape ? entropy : structured;
        for (size_t b = 0; b < 3; b++) {
            for (int dur = 0; dur < 2; dur++) {
                for (int owned = 0; owned < 2; owned++) {
                    size_t total;
                    if (dur) total = batches[b] * (size_t)(quick ? 8 : 24);
                    else total = quick ? (batches[b] == 64 ? 200000 : 2000000) : (batches[b] == 64 ? 1000000 : 8000000);
                    if (total < batches[b]) total = batches[b];
                    double v[3];
                    int reps = quick ? 1 : 3;
                    for (int r = 0; r < reps; r++) v[r] = run_append(dir, data, batches[b], dur ? QUAD_DURABLE : QUAD_BUFFERED, owned, total, NULL);
                    char name[96];
                    snprintf(name, sizeof name, "append %s %zu %s %s %s", shape ? "entropy" : "structured",
                             batches[b], dur ? "durable" : "buffered", owned ? "owned" : "borrowed", dname);
                    report(name, median(v, reps), "M facts/s", lim_memcpy_facts, "memcpy");
                }
            }
        }
    }
}

/* ---- bytes per fact and recovery ---- */
static void bench_size_and_recovery(const char *dir, const char *dname)
{
    char title[128];
    snprintf(title, sizeof title, "bytes per fact and recovery (%s)", dname);
    section(title);
    size_t total = quick ? (1u << 20) : (4u << 20);
    for (int shape = 0; shape < 2; shape++) {
        char p[600], cp[700];
        store_path(p, sizeof p, dir, "size");
        quad *q = open_store(p, 4096, 256, 0);
        const quad_fact *data = shape ? entropy : structured;
        for (size_t done = 0; done < total; done += 65536)
            (void)quad_append(q, data + done % POOL, 65536, QUAD_BUFFERED, NULL, NULL);
        quad_sync(q);
        quad_stats st;
        quad_stats_get(q, &st);
        char name[96];
        snprintf(name, sizeof name, "bytes per %s fact (4096-row chunks) %s", shape ? "entropy" : "structured", dname);
        report(name, (double)st.file_bytes / (double)st.facts, "B/fact", 0, NULL);
        /* a copy without the closing checkpoint: full replay */
        snprintf(cp, sizeof cp, "%s.nockpt", p);
        char cmd[1500];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", p, cp);
        if (system(cmd) != 0) fprintf(stderr, "cp failed\n");
        quad_close(q);
        for (int k = 0; k < 2; k++) {
            double v[3];
            uint64_t frames = 0;
            for (int r = 0; r < 3; r++) {
                quad_options o;
                quad_options_default(&o);
                o.flags = QUAD_RDONLY;   /* read-only: closing writes no checkpoint */
                double t = now_s();
                if (quad_open(k ? p : cp, &o, &q) != 0) { fprintf(stderr, "reopen failed\n"); exit(1); }
                v[r] = (now_s() - t) * 1e3;
                quad_stats_get(q, &st);
                frames = st.recovered_frames;
                quad_close(q);
            }
            snprintf(name, sizeof name, "open %zuM %s facts, %s (%llu frames replayed) %s", total >> 20,
                     shape ? "entropy" : "structured", k ? "after checkpoint" : "full replay",
                     (unsigned long long)frames, dname);
            report(name, median(v, 3), "ms", 0, NULL);
        }
        unlink(cp);
        unlink(p);
    }
}

/* ---- gather ---- */
/* Each worker draws its random requests before the clock starts (drawing
 * one misses the cache 4 096 times, which is not the gather's work): as many
 * ids as the store holds, so that the rows touched do not stay in the CPU's
 * caches between rounds (32 requests did: 70 M ids/s against 47-51), and
 * cycles through them; ordered requests start at a random run, copied
 * between gathers. Workers wait for each other, then time gathers only. */
typedef struct gctx {
    quad *q;
    quad_id *ids;          /* the store's ids */
    size_t n;
    int random, cold;
    unsigned mask;
    size_t calls;
    double rate;           /* this worker's ids/s while inside quad_gather */
    double t0, t1;         /* first and last clock reading of the timed loop */
    uint64_t seed;
    pthread_barrier_t *start;
} gctx;

static void *gather_worker(void *arg)
{
    gctx *g = arg;
    size_t nreq = g->random ? g->n / 4096 : 1;
    quad_id *ring = malloc(nreq * 4096 * sizeof *ring);
    quad_fact *out = malloc(4096 * sizeof *out);
    uint8_t *present = malloc(4096);   /* existence checks (mask 0) fill it */
    if (!ring || !out || !present) { fprintf(stderr, "out of memory\n"); exit(1); }
    memset(out, 0, 4096 * sizeof *out);
    uint64_t s = g->seed;
    for (size_t k = 0; k < nreq && g->random; k++) {
        quad_id *req = ring + (size_t)k * 4096;
        for (int i = 0; i < 4096; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            req[i] = g->ids[s % g->n];
        }
    }
    pthread_barrier_wait(g->start);
    double spent = 0;
    g->t0 = now_s();
    for (size_t c = 0; c < g->calls; c++) {
        quad_id *req = ring + (c % nreq) * 4096;
        if (!g->random) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            memcpy(req, g->ids + (s % (g->n / 4096)) * 4096, 4096 * sizeof *req);
        }
        if (g->cold) quad_cache_drop(g->q);
        if (g->cold && drop_fd >= 0) (void)posix_fadvise(drop_fd, 0, 0, POSIX_FADV_DONTNEED);
        double t = now_s();
        int rc = quad_gather(g->q, 0, req, 4096, g->mask, out, g->mask ? NULL : present);
        spent += now_s() - t;
        if (rc) { fprintf(stderr, "gather: %s\n", hanu_status_str(rc)); exit(1); }
    }
    g->t1 = now_s();
    g->rate = 4096.0 * (double)g->calls / spent / 1e6;
    free(ring);
    free(out);
    free(present);
    return NULL;
}

/* Runs `threads` workers; returns the sum of their in-gather rates, or with
 * wall set the ids of all of them over the wall time from the first start to
 * the last end (the honest aggregate when threads outnumber cores). */
static double run_gather_threads(quad *q, quad_id *ids, size_t n, int random, int cold, unsigned mask,
                                 int threads, int wall)
{
    gctx g[8];
    pthread_t th[8];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    size_t calls = cold ? (cold_calls ? cold_calls : quick ? 100 : 400) : (quick ? 300 : 1500);
    for (int t = 0; t < threads; t++) {
        g[t] = (gctx){ q, ids, n, random, cold, mask, calls, 0, 0, 0, 0x1234567ULL * (uint64_t)(t + 1), &start };
        pthread_create(&th[t], NULL, gather_worker, &g[t]);
    }
    double total = 0, t0 = 0, t1 = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        total += g[t].rate;
        if (t == 0 || g[t].t0 < t0) t0 = g[t].t0;
        if (t == 0 || g[t].t1 > t1) t1 = g[t].t1;
    }
    pthread_barrier_destroy(&start);
    return wall ? 4096.0 * (double)calls * threads / (t1 - t0) / 1e6 : total;
}

static double run_gather(quad *q, quad_id *ids, size_t n, int random, int cold, unsigned mask, int threads)
{
    return run_gather_threads(q, ids, n, random, cold, mask, threads, 0);
}

static double run_gather_wall(quad *q, quad_id *ids, size_t n, int random, int cold, unsigned mask, int threads)
{
    return run_gather_threads(q, ids, n, random, cold, mask, threads, 1);
}

/* Existence checks per second of the thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
 * which time spent preempted does not inflate: the figure that holds on a
 * shared, loaded machine. Ordered requests point into the store's id array
 * (no copy in the loop); random ones are drawn before the clock. */
static double run_exists_cpu(quad *q, const quad_id *ids, size_t n, int random)
{
    size_t nreq = n / 4096, calls = quick ? 2000 : 8000;
    quad_id *ring = NULL;
    if (random) {
        ring = malloc(nreq * 4096 * sizeof *ring);
        if (!ring) { fprintf(stderr, "out of memory\n"); exit(1); }
        for (size_t i = 0; i < nreq * 4096; i++) ring[i] = ids[rnd() % n];
    }
    static uint8_t present[4096];
    double t = thread_cpu_s();
    for (size_t c = 0; c < calls; c++) {
        const quad_id *req = (random ? ring : ids) + (c * 7919 % nreq) * 4096;
        if (quad_gather(q, 0, req, 4096, 0, NULL, present) != 0) { fprintf(stderr, "exists failed\n"); exit(1); }
    }
    t = thread_cpu_s() - t;
    free(ring);
    return 4096.0 * (double)calls / t / 1e6;
}

static quad *build_store(const char *p, const quad_fact *data, size_t total, uint32_t rows, uint32_t mb,
                         quad_id *ids)
{
    quad *q = open_store(p, rows, mb, 0);
    for (size_t done = 0; done < total; done += 65536) {
        quad_id first;
        (void)quad_append(q, data + done % POOL, 65536, QUAD_BUFFERED, &first, NULL);
        for (size_t i = 0; i < 65536; i++) ids[done + i] = quad_batch_id(first, rows, i);
    }
    return q;
}

/* A tmpfs store of `total` facts of one shape (0 structured, 1 entropy) in
 * the default geometry; its path goes to p. */
static quad *shape_store(char *p, size_t cap, const char *name, int shape, size_t total, quad_id *ids)
{
    store_path(p, cap, shm_dir, name);
    return build_store(p, shape ? entropy : structured, total, 4096, 256, ids);
}

/* Brings the store's cache to its steady state: every lane (ordered
 * gathers), then two random passes, after which every chunk read at random
 * has its row form (built on a chunk's second random read). */
static void warm(quad *q, quad_id *ids, size_t n)
{
    quad_fact *out = malloc(65536 * sizeof *out);
    quad_id *req = malloc(65536 * sizeof *req);
    for (size_t i = 0; i < n; i += 65536)
        (void)quad_gather(q, 0, ids + i, n - i < 65536 ? n - i : 65536, QUAD_LANES_ALL, out, NULL);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i += 65536) {
            for (size_t k = 0; k < 65536; k++) req[k] = ids[rnd() % n];
            (void)quad_gather(q, 0, req, 65536, QUAD_LANES_ALL, out, NULL);
        }
    free(req);
    free(out);
}

static void bench_gather(void)
{
    section("gather 4096 ids (tmpfs store)");
    size_t total = quick ? (1u << 20) : (4u << 20);
    quad_id *ids = malloc(total * sizeof *ids);
    for (int shape = 0; shape < 2; shape++) {
        char p[600];
        quad *q = shape_store(p, sizeof p, "gather", shape, total, ids);
        warm(q, ids, total);
        const char *sn = shape ? "entropy" : "structured";
        for (int random = 0; random < 2; random++) {
            for (int cold = 0; cold < 2; cold++) {
                for (int lanes = 0; lanes < 2; lanes++) {
                    if (shape && lanes) continue;
                    double v[3];
                    int reps = quick ? 1 : 3;
                    for (int r = 0; r < reps; r++)
                        v[r] = run_gather(q, ids, total, random, cold, lanes ? QUAD_LANE(2) : QUAD_LANES_ALL, 1);
                    if (cold) warm(q, ids, total);
                    char name[96];
                    snprintf(name, sizeof name, "gather %s %s %s %s", sn, random ? "random" : "ordered",
                             lanes ? "lane 2" : "all lanes", cold ? "cold" : "cached");
                    report(name, median(v, reps), "M ids/s",
                           random ? (shape ? lim_random : lim_random_small) : lim_ordered,
                           random ? (shape ? "random reads" : "random 16MiB") : "ordered reads");
                }
            }
        }
        if (!shape) {
            /* existence checks: the chunk directory only, no lane data */
            for (int random = 0; random < 2; random++) {
                double v[3];
                int reps = quick ? 1 : 3;
                for (int r = 0; r < reps; r++) v[r] = run_gather(q, ids, total, random, 0, 0, 1);
                char name[96];
                snprintf(name, sizeof name, "exists 4096 %s ids", random ? "random" : "ordered");
                report(name, median(v, reps), "M ids/s", random ? lim_random_small : lim_ordered,
                       random ? "random 16MiB" : "ordered reads");
                for (int r = 0; r < 3; r++) v[r] = run_exists_cpu(q, ids, total, random);
                snprintf(name, sizeof name, "exists 4096 %s ids, per thread CPU second", random ? "random" : "ordered");
                report(name, median(v, 3), "M ids/s", random ? lim_random_small : lim_ordered,
                       random ? "random 16MiB" : "ordered reads");
            }
            int tc[] = { 1, 2, 4, 8 };
            for (int k = 0; k < 4; k++) {
                for (int random = 0; random < 2; random++) {
                    double v = run_gather_wall(q, ids, total, random, 0, QUAD_LANES_ALL, tc[k]);
                    char name[96];
                    snprintf(name, sizeof name, "gather structured %s all lanes cached, %d threads",
                             random ? "random" : "ordered", tc[k]);
                    report(name, v, "M ids/s", random ? lim_random_small : lim_ordered,
                           random ? "random 16MiB" : "ordered reads");
                }
            }
        }
        quad_close(q);
        unlink(p);
    }
    free(ids);
}

static void bench_backends(void)
{
    section("cold gather by I/O backend (structured, our cache dropped, page cache warm, tmpfs)");
    size_t total = quick ? (1u << 20) : (4u << 20);
    quad_id *ids = malloc(total * sizeof *ids);
    const char *names[] = { "inline pread", "I/O threads", "io_uring" };
    for (int b = 0; b < 3; b++) {
        char p[600];
        store_path(p, sizeof p, shm_dir, "backend");
        io_backend = b;
        quad_options o;
        quad_options_default(&o);
        o.io_backend = b;
        quad *probe = NULL;
        if (quad_open(p, &o, &probe) != 0) {
            fprintf(tbl, "  %s: not available here\n", names[b]);
            unlink(p);
            continue;
        }
        quad_close(probe);
        unlink(p);
        quad *q = build_store(p, structured, total, 4096, 256, ids);
        for (int random = 0; random < 2; random++) {
            char name[96];
            snprintf(name, sizeof name, "gather %s all lanes cold, %s", random ? "random" : "ordered", names[b]);
            report(name, run_gather(q, ids, total, random, 1, QUAD_LANES_ALL, 1), "M ids/s",
                   random ? lim_random : lim_ordered, random ? "random reads" : "ordered reads");
        }
        quad_close(q);
        unlink(p);
    }
    io_backend = QUAD_IO_THREADS;
    free(ids);
}

/* ---- retire ---- */
static void bench_retire(void)
{
    section("retire 4096 ids, buffered (tmpfs store)");
    size_t total = quick ? (1u << 20) : (4u << 20);
    quad_id *ids = malloc(total * sizeof *ids);
    for (int random = 0; random < 2; random++) {
        char p[600];
        store_path(p, sizeof p, shm_dir, "retire");
        quad *q = build_store(p, structured, total, 4096, 256, ids);
        if (random)
            for (size_t i = total - 1; i > 0; i--) { size_t j = rnd() % (i + 1); quad_id t = ids[i]; ids[i] = ids[j]; ids[j] = t; }
        size_t calls = (total / 4096) / 2;   /* retire half of the store */
        double t = now_s();
        for (size_t c = 0; c < calls; c++)
            if (quad_retire(q, ids + c * 4096, 4096, QUAD_BUFFERED, NULL) != 0) { fprintf(stderr, "retire failed\n"); exit(1); }
        t = now_s() - t;
        report(random ? "retire 4096 random ids" : "retire 4096 ordered ids", 4096.0 * (double)calls / t / 1e6,
               "M ids/s", random ? lim_random : lim_ordered, random ? "random reads" : "ordered reads");
        quad_close(q);
        unlink(p);
    }
    free(ids);
}

/* ---- group commit ---- */
typedef struct wctx { quad *q; int rounds; int fail; } wctx;

static void *group_writer(void *arg)
{
    wctx *w = arg;
    for (int r = 0; r < w->rounds; r++)
        if (quad_append(w->q, structured + (size_t)r * 64, 64, QUAD_GROUP, NULL, NULL) != 0) w->fail = 1;
    return NULL;
}

static void bench_group(const char *dir, const char *dname)
{
    char title[128];
    snprintf(title, sizeof title, "group commit, 64 writers x 64 facts (%s)", dname);
    section(title);
    /* baseline: one writer, one fdatasync per 64-fact commit, same file system */
    double base_commits;
    {
        char p[600];
        store_path(p, sizeof p, dir, "group1");
        quad *q = open_store(p, 4096, 256, 0);
        int n = quick ? 100 : 500;   /* a few hundred ms: shorter runs varied by 20% */
        double t = now_s();
        for (int r = 0; r < n; r++) (void)quad_append(q, structured + (size_t)r * 64 % POOL, 64, QUAD_DURABLE, NULL, NULL);
        t = now_s() - t;
        base_commits = n / t;
        char name[96];
        snprintf(name, sizeof name, "one writer, one fdatasync per 64-fact commit, commits/s %s", dname);
        report(name, base_commits, "commits/s", 0, NULL);
        quad_close(q);
        unlink(p);
    }
    uint32_t windows[] = { 0, 200 };
    for (int k = 0; k < 2; k++) {
        char p[600];
        store_path(p, sizeof p, dir, "group");
        quad *q = open_store(p, 4096, 256, windows[k]);
        int rounds = quick ? 40 : 200;
        pthread_t th[64];
        wctx w[64];
        double t = now_s();
        for (int i = 0; i < 64; i++) {
            w[i] = (wctx){ q, rounds, 0 };
            pthread_create(&th[i], NULL, group_writer, &w[i]);
        }
        for (int i = 0; i < 64; i++) pthread_join(th[i], NULL);
        t = now_s() - t;
        quad_stats st;
        quad_stats_get(q, &st);
        double commits = 64.0 * rounds / t;
        double one_fsync = 1e6 / lim_fsync_us;   /* commits/s with one fsync each */
        char name[96];
        snprintf(name, sizeof name, "group commit window %u us, commits/s %s", windows[k], dname);
        report(name, commits, "commits/s", 0, NULL);
        snprintf(name, sizeof name, "group commit window %u us, facts/s %s", windows[k], dname);
        report(name, commits * 64 / 1e6, "M facts/s", 0, NULL);
        snprintf(name, sizeof name, "group commit window %u us, x one 4 KiB fsync per commit %s", windows[k], dname);
        report(name, commits / one_fsync, "x", 0, NULL);
        snprintf(name, sizeof name, "group commit window %u us, x one-writer durable commits %s", windows[k], dname);
        report(name, commits / base_commits, "x", 0, NULL);
        snprintf(name, sizeof name, "group commit window %u us, commits per fdatasync %s", windows[k], dname);
        report(name, 64.0 * rounds / (double)(st.syncs ? st.syncs : 1), "commits", 0, NULL);
        quad_close(q);
        unlink(p);
    }
}

/* ---- chunk and microblock sweep ---- */
static void bench_sweep(void)
{
    section("chunk size sweep (structured, tmpfs, microblock 256 or the chunk)");
    size_t total = quick ? (1u << 19) : (2u << 20);
    quad_id *ids = malloc(total * sizeof *ids);
    uint32_t sizes[] = { 256, 1024, 4096, 16384, 65536 };
    quad_fact one;
    for (size_t s = 0; s < 5; s++) {
        char p[600];
        store_path(p, sizeof p, shm_dir, "sweep");
        quad *q = build_store(p, structured, total, sizes[s], 256, ids);
        quad_stats st;
        quad_stats_get(q, &st);
        char name[96];
        snprintf(name, sizeof name, "chunk %u: bytes per structured fact", sizes[s]);
        report(name, (double)st.file_bytes / (double)st.facts, "B/fact", 0, NULL);
        warm(q, ids, total);
        snprintf(name, sizeof name, "chunk %u: ordered gather cached", sizes[s]);
        report(name, run_gather(q, ids, total, 0, 0, QUAD_LANES_ALL, 1), "M ids/s", lim_ordered, "ordered reads");
        snprintf(name, sizeof name, "chunk %u: random gather cached", sizes[s]);
        report(name, run_gather(q, ids, total, 1, 0, QUAD_LANES_ALL, 1), "M ids/s", lim_random_small, "random 16MiB");
        /* point reads: one random id per call, cold (cache dropped) and cached */
        for (int cold = 1; cold >= 0; cold--) {
            int reps = quick ? 300 : 1000;
            if (!cold) warm(q, ids, total);
            double t = now_s();
            for (int i = 0; i < reps; i++) {
                if (cold) quad_cache_drop(q);
                quad_id id = ids[rnd() % total];
                (void)quad_gather(q, 0, &id, 1, QUAD_LANES_ALL, &one, NULL);
            }
            t = now_s() - t;
            snprintf(name, sizeof name, "chunk %u: point read %s", sizes[s], cold ? "cold" : "cached");
            report(name, t / reps * 1e6, "us", 0, NULL);
        }
        quad_close(q);
        unlink(p);
    }
    section("microblock sweep (structured, 4096-row chunks)");
    uint32_t mbs[] = { 64, 256, 1024, 4096 };
    for (size_t s = 0; s < 4; s++) {
        char p[600];
        store_path(p, sizeof p, shm_dir, "mb");
        quad *q = build_store(p, structured, total, 4096, mbs[s], ids);
        quad_stats st;
        quad_stats_get(q, &st);
        char name[96];
        snprintf(name, sizeof name, "microblock %u: bytes per structured fact", mbs[s]);
        report(name, (double)st.file_bytes / (double)st.facts, "B/fact", 0, NULL);
        warm(q, ids, total);
        snprintf(name, sizeof name, "microblock %u: ordered gather cached", mbs[s]);
        report(name, run_gather(q, ids, total, 0, 0, QUAD_LANES_ALL, 1), "M ids/s", lim_ordered, "ordered reads");
        snprintf(name, sizeof name, "microblock %u: random gather cached", mbs[s]);
        report(name, run_gather(q, ids, total, 1, 0, QUAD_LANES_ALL, 1), "M ids/s", lim_random_small, "random 16MiB");
        quad_close(q);
        unlink(p);
    }
    free(ids);
}

/* ---- stream ----
 * Replay of a whole store through the durable commit stream (every commit
 * of 65 536 facts, page cache warm, tmpfs): reading the log window by
 * window, checksums and decoding of the lanes asked for. */
/* Returns facts per wall second; *per_cpu gets them per thread CPU second. */
static double run_stream(quad *q, unsigned lanes, size_t total, double *per_cpu)
{
    quad_stream *s = NULL;
    if (quad_stream_open(q, 1, lanes, &s) != 0) { fprintf(stderr, "stream open failed\n"); exit(1); }
    quad_commit c;
    size_t facts = 0;
    uint64_t sum = 0;
    double t = now_s(), cpu = thread_cpu_s();
    int rc;
    while ((rc = quad_stream_next(s, 0, &c)) == 1) {
        facts += c.n;
        if (c.facts) sum += c.facts[c.n - 1].lane[0];
    }
    t = now_s() - t;
    *per_cpu = (double)facts / (thread_cpu_s() - cpu) / 1e6;
    quad_stream_close(s);
    if (rc != 0 || facts != total) {
        fprintf(stderr, "stream: %d, %zu of %zu facts (%llu)\n", rc, facts, total, (unsigned long long)sum);
        exit(1);
    }
    return (double)facts / t / 1e6;
}

static void bench_stream(void)
{
    section("stream replay (tmpfs store, commits of 65 536 facts)");
    size_t total = quick ? (1u << 20) : (4u << 20);
    quad_id *ids = malloc(total * sizeof *ids);
    for (int shape = 0; shape < 2; shape++) {
        char p[600];
        quad *q = shape_store(p, sizeof p, "stream", shape, total, ids);
        if (quad_sync(q) != 0) { fprintf(stderr, "sync failed\n"); exit(1); }
        static const unsigned masks[2] = { QUAD_LANES_ALL, QUAD_LANE(0) };
        for (int m = 0; m < 2; m++) {
            if (shape && m) continue;
            double v[3], cpu[3];
            for (int r = 0; r < 3; r++) v[r] = run_stream(q, masks[m], total, &cpu[r]);
            char name[96];
            if (!shape && !m) snprintf(name, sizeof name, "stream replay");
            else snprintf(name, sizeof name, "stream replay %s %s", shape ? "entropy" : "structured",
                          m ? "lane 0" : "all lanes");
            report(name, median(v, 3), "M facts/s", lim_memcpy_facts, "memcpy");
            strcat(name, ", per thread CPU second");
            report(name, median(cpu, 3), "M facts/s", lim_memcpy_facts, "memcpy");
        }
        quad_close(q);
        unlink(p);
    }
    free(ids);
}

/* ---- device-bound reads and writes: the page cache against QUAD_IO_DIRECT ----
 * One disk store of structured facts (closed with a checkpoint). Each cold
 * gather first drops our cache and, for a buffered handle, the file's pages
 * (outside the timed call), so both read from the device; a direct handle
 * never fills the page cache. Point reads: one random id, lanes 0-2, cold. */
static double point_reads_us(quad *q, const quad_id *ids, size_t n, int reps)
{
    double *lat = malloc((size_t)reps * sizeof *lat);
    for (int i = 0; i < reps; i++) {
        quad_cache_drop(q);
        if (drop_fd >= 0) (void)posix_fadvise(drop_fd, 0, 0, POSIX_FADV_DONTNEED);
        quad_id id = ids[rnd() % n];
        quad_fact out;
        double t = now_s();
        if (quad_gather(q, 0, &id, 1, 0x7, &out, NULL) != 0) { fprintf(stderr, "point read failed\n"); exit(1); }
        lat[i] = (now_s() - t) * 1e6;
    }
    double m = median(lat, reps);
    free(lat);
    return m;
}

/* The device itself, through O_DIRECT: sequential 1 MiB reads of a file of
 * `mib` MiB, and random 4 KiB reads (one at a time). */
static void device_limits(const char *p, size_t mib)
{
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    void *buf = NULL;
    if (fd < 0 || posix_memalign(&buf, 4096, 1u << 20) != 0) { fprintf(tbl, "  no O_DIRECT probe here\n"); goto out; }
    memset(buf, 0x5A, 1u << 20);
    for (size_t i = 0; i < mib; i++)
        if (hanu_pwrite_full(fd, buf, 1u << 20, (off_t)(i << 20)) != 0) { fprintf(stderr, "probe write failed\n"); exit(1); }
    (void)fdatasync(fd);
    double v[3], lat[200];
    for (int r = 0; r < 3; r++) {
        double t = now_s();
        for (size_t i = 0; i < mib; i++) (void)hanu_pread_full(fd, buf, 1u << 20, (off_t)(i << 20));
        v[r] = (double)mib / (now_s() - t);
    }
    report("device: O_DIRECT sequential 1 MiB reads", median(v, 3), "MiB/s", 0, NULL);
    for (int i = 0; i < 200; i++) {
        double t = now_s();
        (void)hanu_pread_full(fd, buf, 4096, (off_t)((rnd() % (mib * 256)) * 4096));
        lat[i] = (now_s() - t) * 1e6;
    }
    report("device: O_DIRECT random 4 KiB read (median)", median(lat, 200), "us", 0, NULL);
out:
    free(buf);
    if (fd >= 0) close(fd);
    unlink(p);
}

static void bench_device(void)
{
    section("device-bound (disk store; buffered: page cache dropped before each call; direct: QUAD_IO_DIRECT)");
    size_t total = quick ? (1u << 20) : (4u << 20);
    quad_id *ids = malloc(total * sizeof *ids);
    char p[600];
    store_path(p, sizeof p, disk_dir, "probe");
    device_limits(p, quick ? 32 : 128);
    store_path(p, sizeof p, disk_dir, "device");
    quad_close(build_store(p, structured, total, 4096, 256, ids));
    const char *bn[] = { "inline pread", "I/O threads", "io_uring" };
    for (int b = 0; b < 3; b++) {
        for (int direct = 0; direct < 2; direct++) {
            io_backend = b;
            open_flags = direct ? QUAD_IO_DIRECT : 0;
            quad_options o;
            quad_options_default(&o);
            o.io_backend = b;
            o.flags = open_flags;
            quad *q = NULL;
            if (quad_open(p, &o, &q) != 0) {
                fprintf(tbl, "  %s%s: not available here (%s)\n", bn[b], direct ? ", direct" : "", quad_last_error());
                continue;
            }
            drop_fd = direct ? -1 : open(p, O_RDONLY);
            const char *mode = direct ? "direct" : "buffered";
            for (int random = 0; random < 2; random++) {
                /* a random request reads lanes of most chunks: the whole store */
                cold_calls = random ? (quick ? 5 : 10) : (quick ? 100 : 200);
                double v[3];
                for (int r = 0; r < 3; r++) v[r] = run_gather(q, ids, total, random, 1, QUAD_LANES_ALL, 1);
                char name[96];
                snprintf(name, sizeof name, "device: gather %s all lanes cold, %s, %s", random ? "random" : "ordered",
                         mode, bn[b]);
                report(name, median(v, 3), "M ids/s", 0, NULL);
            }
            cold_calls = 0;
            if (b == 0) {
                char name[96];
                double v[3];
                for (int r = 0; r < 3; r++) v[r] = point_reads_us(q, ids, total, quick ? 100 : 300);
                snprintf(name, sizeof name, "device: point read cold (3 lanes), %s", mode);
                report(name, median(v, 3), "us", 0, NULL);
            }
            if (drop_fd >= 0) close(drop_fd);
            drop_fd = -1;
            quad_close(q);
        }
    }
    unlink(p);
    io_backend = QUAD_IO_THREADS;
    /* appends to the disk: through the page cache or straight to the device */
    size_t batches[] = { 64, 65536 };
    for (int direct = 0; direct < 2; direct++) {
        open_flags = direct ? QUAD_IO_DIRECT : 0;
        for (int k = 0; k < 2; k++) {
            for (int dur = 0; dur < 2; dur++) {
                size_t total_facts = dur ? batches[k] * (quick ? 8 : 24) : (batches[k] == 64 ? 200000 : 2000000);
                double v[3];
                for (int r = 0; r < 3; r++)
                    v[r] = run_append(disk_dir, structured, batches[k], dur ? QUAD_DURABLE : QUAD_BUFFERED, 0,
                                      total_facts, NULL);
                char name[96];
                snprintf(name, sizeof name, "device: append structured %zu %s, %s", batches[k],
                         dur ? "durable" : "buffered", direct ? "direct" : "buffered");
                report(name, median(v, 3), "M facts/s", lim_memcpy_facts, "memcpy");
            }
        }
    }
    open_flags = 0;
    free(ids);
}

/* ---- clean ---- */

/* A reader during the clean: random and ordered 4096-id gathers in turn
 * (all lanes, present[] since most ids are retired), each timed inside the
 * call, until stop. */
typedef struct cread {
    quad *q;
    const quad_id *ids;
    size_t n;
    _Atomic int stop;
    double spent[2];
    size_t calls[2];
} cread;

static void *clean_reader(void *arg)
{
    cread *r = arg;
    quad_id *req = malloc(4096 * sizeof *req);
    quad_fact *out = malloc(4096 * sizeof *out);
    uint8_t *present = malloc(4096);
    uint64_t s = 0xC1EA4ULL;
    for (size_t c = 0; !atomic_load(&r->stop); c++) {
        int random = (int)(c & 1);
        for (int i = 0; i < 4096; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            if (random) req[i] = r->ids[s % r->n];
        }
        const quad_id *q_ids = random ? req : r->ids + (s % (r->n / 4096)) * 4096;
        double t = now_s();
        int rc = quad_gather(r->q, 0, q_ids, 4096, QUAD_LANES_ALL, out, present);
        r->spent[random] += now_s() - t;
        r->calls[random]++;
        if (rc) { fprintf(stderr, "gather during clean: %s\n", hanu_status_str(rc)); exit(1); }
    }
    free(req);
    free(out);
    free(present);
    return NULL;
}

static double alloc_mib(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (double)st.st_blocks * 512.0 / (1 << 20) : 0;
}

/* Shuffles ids and retires the first 90% of them in 4096-id commits; returns
 * how many. */
static size_t retire_most(quad *q, quad_id *ids, size_t total)
{
    for (size_t i = total - 1; i > 0; i--) { size_t j = rnd() % (i + 1); quad_id t = ids[i]; ids[i] = ids[j]; ids[j] = t; }
    size_t nret = total / 10 * 9;
    for (size_t k = 0; k < nret; k += 4096)
        if (quad_retire(q, ids + k, nret - k < 4096 ? nret - k : 4096, QUAD_BUFFERED, NULL) != 0) {
            fprintf(stderr, "retire failed\n");
            exit(1);
        }
    return nret;
}

/* 4M structured facts (1M with --quick) on disk, 90% retired at random, then
 * quad_clean(0.5): allocated bytes before and after, the cleaner's rate, and
 * a reader's gather rates before and while it runs. */
static void bench_clean(const char *dir, const char *dname)
{
    char sec[96];
    snprintf(sec, sizeof sec, "clean: 90%% of the facts retired, quad_clean(0.5) (%s)", dname);
    section(sec);
    size_t total = quick ? (1u << 20) : (4u << 20);
    quad_id *ids = malloc(total * sizeof *ids), *shuf = malloc(total * sizeof *shuf);
    char p[600];
    store_path(p, sizeof p, dir, "clean");
    quad *q = build_store(p, structured, total, 4096, 256, ids);
    memcpy(shuf, ids, total * sizeof *ids);
    retire_most(q, shuf, total);
    if (quad_checkpoint(q) != 0) { fprintf(stderr, "checkpoint failed\n"); exit(1); }
    double before = alloc_mib(p);
    warm(q, ids, total);
    cread base = { .q = q, .ids = ids, .n = total };
    pthread_t th;
    pthread_create(&th, NULL, clean_reader, &base);
    struct timespec ts = { 0, 300 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    atomic_store(&base.stop, 1);
    pthread_join(th, NULL);
    cread during = { .q = q, .ids = ids, .n = total };
    pthread_create(&th, NULL, clean_reader, &during);
    quad_clean_stats cs;
    double t = now_s();
    int rc = quad_clean(q, 0.5, &cs);
    t = now_s() - t;
    atomic_store(&during.stop, 1);
    pthread_join(th, NULL);
    if (rc) { fprintf(stderr, "clean: %s\n", hanu_status_str(rc)); exit(1); }
    double after = alloc_mib(p);
    report("clean: allocated MiB before", before, "MiB", 0, "");
    report("clean: allocated MiB after", after, "MiB", 0, "");
    report("clean: chunks relocated", (double)cs.chunks_relocated, "chunks", 0, "");
    report("clean: time", t * 1e3, "ms", 0, "");
    report("clean: kept facts rewritten per second", (double)cs.rows_kept / t / 1e6, "M facts/s", lim_memcpy_facts, "memcpy");
    report("clean: bytes returned per second", (double)cs.bytes_punched / t / (1 << 20), "MiB/s", 0, "");
    for (int random = 0; random < 2; random++) {
        char name[96];
        snprintf(name, sizeof name, "gather 4096 %s ids, all lanes, before the clean", random ? "random" : "ordered");
        report(name, 4096.0 * (double)base.calls[random] / base.spent[random] / 1e6, "M ids/s", 0, "");
        snprintf(name, sizeof name, "gather 4096 %s ids, all lanes, during the clean (%zu calls)",
                 random ? "random" : "ordered", during.calls[random]);
        report(name, during.calls[random] ? 4096.0 * (double)during.calls[random] / during.spent[random] / 1e6 : 0,
               "M ids/s", 0, "");
    }
    quad_close(q);
    unlink(p);
    free(ids);
    free(shuf);
}

static void print_json(void)
{
    printf("{\"limits\": {\"memcpy_gbs\": %.3f, \"memcpy_facts_mps\": %.2f, \"ordered_reads_mps\": %.2f, "
           "\"random_reads_mps\": %.2f, \"random_reads_16mib_mps\": %.2f, \"fdatasync_us\": %.1f},\n \"results\": [\n",
           lim_memcpy_gbs, lim_memcpy_facts, lim_ordered, lim_random, lim_random_small, lim_fsync_us);
    for (int i = 0; i < nresults; i++) {
        const result *r = &results[i];
        printf("  {\"name\": \"%s\", \"value\": %.4f, \"unit\": \"%s\"", r->name, r->value, r->unit);
        if (r->limit > 0) printf(", \"fraction_of_limit\": %.4f, \"limit\": \"%s\"", r->value / r->limit, r->limit_name);
        printf("}%s\n", i + 1 < nresults ? "," : "");
    }
    printf(" ]}\n");
}

/* Folds: the clean row's store (90% retired at random), checkpointed before
 * any clean (a 16-byte pair a retired fact), then quad_clean(0.09), which
 * relocates only the few chunks under 9% live and folds the others' retired
 * rows at its horizon (a bit a row). Checkpoint bytes and the time of a
 * reopen (which loads the checkpoint and nothing else) before and after. */
static double reopen_ms(quad **q, const char *p)
{
    quad_close(*q);
    double t = now_s();
    *q = open_store(p, 4096, 256, 0);
    return (now_s() - t) * 1e3;
}

static void bench_fold(const char *dir, const char *dname)
{
    char sec[96];
    snprintf(sec, sizeof sec, "fold: 90%% of the facts retired, checkpoint before and after quad_clean(0.09) (%s)", dname);
    section(sec);
    size_t total = quick ? (1u << 20) : (4u << 20);
    quad_id *ids = malloc(total * sizeof *ids);
    char p[600];
    store_path(p, sizeof p, dir, "fold");
    quad *q = build_store(p, structured, total, 4096, 256, ids);
    size_t nret = retire_most(q, ids, total);
    quad_stats st;
    if (quad_checkpoint(q) != 0 || quad_stats_get(q, &st) != 0) { fprintf(stderr, "checkpoint failed\n"); exit(1); }
    double b0 = (double)st.checkpoint_bytes, t0 = reopen_ms(&q, p);
    quad_clean_stats cs;
    if (quad_clean(q, 0.09, &cs) != 0 || quad_stats_get(q, &st) != 0) { fprintf(stderr, "clean failed\n"); exit(1); }
    double b1 = (double)st.checkpoint_bytes, t1 = reopen_ms(&q, p);
    report("fold: checkpoint MiB, pairs (before the clean)", b0 / (1 << 20), "MiB", 0, "");
    report("fold: checkpoint MiB, folds (after it)", b1 / (1 << 20), "MiB", 0, "");
    report("fold: checkpoint bytes per retired fact, pairs", b0 / (double)nret, "bytes", 0, "");
    report("fold: checkpoint bytes per retired fact, folds", b1 / (double)nret, "bytes", 0, "");
    report("fold: chunks relocated by the clean", (double)cs.chunks_relocated, "chunks", 0, "");
    report("fold: open, checkpoint with pairs", t0, "ms", 0, "");
    report("fold: open, checkpoint with folds", t1, "ms", 0, "");
    quad_close(q);
    unlink(p);
    free(ids);
}

/* True when part `name` is selected by --only (a comma-separated list). */
static int want(const char *name)
{
    if (!only) return 1;
    size_t len = strlen(name);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && !strncmp(p, name, len)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) disk_dir = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: quadbench [--quick] [--dir PATH] [--json] [--only LIST]\n");
            return 2;
        }
    }
    tbl = json ? stderr : stdout;
    struct stat sb;
    if (stat(shm_dir, &sb) != 0) shm_dir = disk_dir;
    double t0 = now_s();
    fprintf(tbl, "quadbench%s: disk dir %s, tmpfs dir %s\n", quick ? " --quick" : "", disk_dir, shm_dir);
    make_data();
    measure_limits();
    if (want("append")) {
        bench_append(shm_dir, "tmpfs");
        bench_append(disk_dir, "disk");
    }
    if (want("gather")) bench_gather();
    if (want("backends")) bench_backends();
    if (want("retire")) bench_retire();
    if (want("stream")) bench_stream();
    if (want("group")) bench_group(disk_dir, "disk");
    if (want("sweep")) bench_sweep();
    if (want("clean")) bench_clean(disk_dir, "disk");
    if (want("fold")) bench_fold(disk_dir, "disk");
    if (only && want("device")) bench_device();
    if (want("size")) {
        bench_size_and_recovery(shm_dir, "tmpfs");
        bench_size_and_recovery(disk_dir, "disk");
    }
    fprintf(tbl, "\ndone in %.1f s\n", now_s() - t0);
    if (json) print_json();
    free(structured);
    free(entropy);
    return 0;
}
