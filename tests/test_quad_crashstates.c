/*
 * test_quad_crashstates: the facts kernel under a power-loss simulator. A
 * single-threaded workload (appends and retires of every durability, syncs,
 * checkpoints, automatic checkpoints, close and reopen, a crash of the
 * process and reopen) runs against a store
 * file; this binary interposes fdatasync (it defines it; the library's calls
 * resolve here). At every fdatasync of the store file it compares the file
 * with its image at the previous successful fdatasync and builds the disk
 * states a power loss at that moment could leave:
 *   - bytes synced before are kept; a 512-byte sector that is rewritten is
 *     either old or new (sectors are atomic; a page of 4 KiB is not);
 *   - each changed 4 KiB page is new, old, torn at 512 bytes (any mix of new
 *     and old sectors), and its sectors past the synced end of the file are
 *     new, zero or garbage; or the file keeps its synced length.
 * With up to three changed pages every combination of page modes is built
 * (at least 64 states, torn and garbage pages drawn anew), else a random
 * sample of 96. Each state is opened (no QUAD_SALVAGE: it must open)
 * and checked: every commit acknowledged durable by then (a durable call that
 * returned 0, or an epoch quad_durable_epoch reported) is there with its exact
 * lanes, every acknowledged retirement holds, the epoch is at least the
 * acknowledged one, and every commit the state recovered is exactly what was
 * written. Every fourth state is closed and opened again. A subscriber
 * follows the store through a durable commit stream (polled after every
 * step, resumed after every close and crash): no state may lack an epoch it
 * was given, each state's own stream delivers exactly the commits recovered,
 * and the subscriber's position can be resumed there. States at the syncs
 * of the very first open (creating the file, before anything could be
 * acknowledged) are skipped.
 * The workload also runs the cleaner (quad_clean, its syncs cut like any
 * other, the hole punching after them seen by the next sync): every
 * recovered append must then read its exact lanes at the later of its epoch
 * and the state's clean horizon (the facts not retired by then), so no id
 * may read relocated or punched bytes wrongly; the subscriber holds its
 * position (QUAD_STREAM_HOLD), which keeps the horizon below what it has
 * not read, and a state's own stream starts at its log floor.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

/* The sanitizer build (make asan) runs a third of the workload: it is ten
 * times slower per state, and the plain build already checks every state. */
#if defined(__SANITIZE_ADDRESS__)
#define STEPS 80
#define MIN_STATES 3000
#else
#define STEPS 240
#define MIN_STATES 10000
#endif

#define PAGE 4096
#define SECTOR 512
#define MAX_OPS 1200

/* ---- the workload's model ---- */
typedef struct op {
    int kind;              /* 1 append, 2 retire */
    uint64_t epoch;
    quad_id first;         /* append: first id */
    uint32_t n;            /* append: facts */
    uint64_t seed;         /* append: lanes of fact i come from (seed, i) */
    quad_id id;            /* retire: one id */
} op;

static op ops[MAX_OPS];
static uint32_t wl_rows = 64;   /* the workload store's chunk_rows */
static uint64_t wl_ckpt = 24 << 10;   /* and checkpoint_bytes */
static size_t nops;
static uint64_t acked;     /* highest epoch acknowledged durable */
static int armed;          /* the store was opened once: states count */
static uint64_t quad_epoch_last;

static quad_fact fact_at(uint64_t seed, uint32_t i)
{
    quad_fact f;
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL + i;
    for (int l = 0; l < 4; l++) {
        x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ULL; x ^= x >> 29;
        f.lane[l] = l == 1 ? 7 : (l == 2 ? seed * 1000 + i : x);
    }
    return f;
}

/* ---- the simulator ---- */
static char store_path[600], state_path[600];
static uint8_t *prev, *cur, *img;
static size_t plen, cap;
static long states, violations, syncs_seen;
static int checking;

static struct { char what[80]; long n; } kinds[16];

static void report(const char *what, const char *mode)
{
    violations++;
    for (size_t k = 0; k < HANU_ARRAY_LEN(kinds); k++) {
        if (kinds[k].n && strcmp(kinds[k].what, what) != 0) continue;
        snprintf(kinds[k].what, sizeof kinds[k].what, "%s", what);
        kinds[k].n++;
        break;
    }
    if (violations <= 10)
        fprintf(stderr, "  VIOLATION at sync %ld (%s): %s\n", syncs_seen, mode, what);
}

static int cmp_id(const void *a, const void *b)
{
    quad_id x = *(const quad_id *)a, y = *(const quad_id *)b;
    return x < y ? -1 : x > y;
}

/* Ids the workload retired at or below an epoch, sorted (retired_upto). */
static quad_id gone_ids[MAX_OPS];
static size_t ngone_ids;

static void retired_upto(uint64_t e)
{
    ngone_ids = 0;
    for (size_t i = 0; i < nops; i++)
        if (ops[i].kind == 2 && ops[i].epoch <= e) gone_ids[ngone_ids++] = ops[i].id;
    qsort(gone_ids, ngone_ids, sizeof *gone_ids, cmp_id);
}

/* The append o read at snap: its facts with their exact lanes, except those
 * in gone_ids (snap above o's epoch only: retired at or below snap). */
static int gather_eq(quad *q, uint64_t snap, const op *o)
{
    static quad_fact got[1024];
    static quad_id ids[1024];
    static uint8_t pr[1024];
    for (uint32_t i = 0; i < o->n; i++) ids[i] = quad_batch_id(o->first, wl_rows, i);
    if (quad_gather(q, snap, ids, o->n, QUAD_LANES_ALL, got, pr) != 0) return 0;
    for (uint32_t i = 0; i < o->n; i++) {
        quad_fact w = fact_at(o->seed, i);
        int gone = snap > o->epoch && bsearch(&ids[i], gone_ids, ngone_ids, sizeof *gone_ids, cmp_id);
        if (gone ? pr[i] : (!pr[i] || !tq_fact_eq(&got[i], &w, 0xF))) return 0;
    }
    return 1;
}

/* The fact an id was appended with (ids of ops[] only). */
static int fact_of_id(quad_id id, quad_fact *f)
{
    for (size_t i = 0; i < nops; i++) {
        const op *x = &ops[i];
        if (x->kind != 1 || QUAD_ID_CHUNK(id) < QUAD_ID_CHUNK(x->first)) continue;
        uint64_t k = (QUAD_ID_CHUNK(id) - QUAD_ID_CHUNK(x->first)) * wl_rows + QUAD_ID_SLOT(id);
        if (k >= x->n) continue;
        *f = fact_at(x->seed, (uint32_t)k);
        return 1;
    }
    return 0;
}

/* 1 when a delivered commit is exactly what the workload committed at its epoch. */
static int commit_matches(const quad_commit *c)
{
    const op *x = NULL;
    for (size_t i = 0; i < nops && !x; i++)
        if (ops[i].epoch == c->epoch) x = &ops[i];
    /* the commit of a call still running (its sync is being checked): ops[nops]
     * holds what it writes, but not yet its epoch and first id */
    int inflight = !x && c->epoch == (nops ? ops[nops - 1].epoch : 0) + 1;
    if (inflight) x = &ops[nops];
    if (!x || c->kind != x->kind || !c->facts) return 0;
    if (x->kind == 1) {
        if (c->n != x->n) return 0;
        quad_id first = inflight ? c->ids[0] : x->first;
        for (uint32_t i = 0; i < x->n; i++) {
            quad_fact w = fact_at(x->seed, i);
            if (c->ids[i] != quad_batch_id(first, wl_rows, i) || !tq_fact_eq(&c->facts[i], &w, 0xF)) return 0;
        }
        return 1;
    }
    quad_fact w;   /* the workload retires one id not retired before */
    return c->n == 1 && c->ids[0] == x->id && fact_of_id(x->id, &w) && tq_fact_eq(&c->facts[0], &w, 0xF);
}

/* ---- the subscriber: a durable stream over the workload's store ---- */
static quad_stream *sub;
static uint64_t delivered;   /* highest epoch the durable stream delivered */
static long stream_checks;

/* Reads the state's whole stream: every commit exact, in order, up to its
 * epoch; and the subscriber's position must be open-able there. */
static void verify_stream(quad *q, const char *mode)
{
    quad_stream *s = NULL;
    if (quad_stream_open(q, delivered + 1, QUAD_LANES_ALL, &s) != 0) {
        report("the subscriber's position cannot be resumed", mode);
        return;
    }
    quad_stream_close(s);
    quad_stats st;
    quad_stats_get(q, &st);   /* a clean moved the log floor: the stream starts there */
    if (quad_stream_open(q, st.log_floor, QUAD_LANES_ALL, &s) != 0) { report("stream open failed", mode); return; }
    quad_commit c;
    uint64_t want = st.log_floor;
    int rc;
    while ((rc = quad_stream_next(s, 0, &c)) == 1) {
        if (c.epoch != want++ || !commit_matches(&c)) { report("the stream delivered a wrong commit", mode); break; }
    }
    if (rc < 0) report("the stream failed", mode);
    else if (want != quad_epoch(q) + 1) report("the stream stopped before the recovered epoch", mode);
    quad_stream_close(s);
    stream_checks++;
}

/* Opens the state file and checks every promise; returns 0 when it held. */
static void verify_state(const char *mode, int reopen)
{
    quad_options o;
    quad_options_default(&o);
    o.io_backend = QUAD_IO_INLINE;
    o.cache_bytes = 1 << 20;
    for (int round = 0; round <= reopen; round++) {
        quad *q = NULL;
        int rc = quad_open(state_path, &o, &q);
        if (rc) {
            char m[80];
            snprintf(m, sizeof m, "open failed with %d%s", rc, round ? " (second open)" : "");
            report(m, mode);
            return;
        }
        uint64_t e = quad_epoch(q);
        if (e < acked) report("epoch below the acknowledged durable epoch", mode);
        if (e < delivered) report("the durable stream delivered a commit this state lost", mode);
        if (round == reopen) verify_stream(q, mode);
        quad_stats st;
        quad_stats_get(q, &st);
        uint64_t gone = st.gone_below;   /* older snapshots answer HANU_ERR_GONE */
        if (gone > e) report("the clean horizon is past the recovered epoch", mode);
        retired_upto(gone);
        for (size_t i = 0; i < nops; i++) {
            const op *x = &ops[i];
            if (x->epoch > e) continue;   /* not recovered: fine unless acknowledged (above) */
            if (x->kind == 1) {
                if (!gather_eq(q, x->epoch > gone ? x->epoch : gone, x))
                    report("a recovered append differs or is missing", mode);
            } else {
                quad_fact f;
                uint8_t pr = 1;
                if (quad_gather(q, 0, &x->id, 1, QUAD_LANES_ALL, &f, &pr) != 0 || pr)
                    report("a recovered retirement does not hold", mode);
            }
        }
        if (quad_close(q) != 0) report("close failed", mode);
    }
}

static void put_state(size_t len)
{
    int fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || hanu_pwrite_full(fd, img, len, 0) != 0) { perror("state"); exit(2); }
    close(fd);
}

enum { M_NEW, M_OLD, M_TORN, M_ZERO, M_GARBAGE, M_MODES };
static const char *mode_names = "notzg";

/* Applies mode m to page p of img (img starts as prev). */
static void apply_page(size_t p, int m, size_t clen)
{
    for (size_t s = p * PAGE / SECTOR; s < (p + 1) * PAGE / SECTOR; s++) {
        size_t off = s * SECTOR;
        if (off >= clen && off >= plen) break;
        int fresh = off >= plen;   /* no synced byte in this sector */
        if (memcmp(prev + off, cur + off, SECTOR) == 0) continue;
        int take_new;
        switch (m) {
        case M_NEW: take_new = 1; break;
        case M_OLD: take_new = 0; break;
        case M_TORN: take_new = (int)(tq_rand() & 1); break;
        default: take_new = fresh ? -1 : (int)(tq_rand() & 1); break;
        }
        if (take_new == 1) memcpy(img + off, cur + off, SECTOR);
        else if (take_new == 0) memcpy(img + off, prev + off, SECTOR);
        else if (m == M_ZERO) memset(img + off, 0, SECTOR);
        else for (size_t k = 0; k < SECTOR; k++) img[off + k] = (uint8_t)tq_rand();
    }
}

static void crash_states(size_t clen)
{
    size_t len = clen > plen ? clen : plen;
    size_t npages = (len + PAGE - 1) / PAGE;
    static size_t changed[1 << 16];
    size_t nch = 0;
    for (size_t p = 0; p < npages; p++) {
        size_t a = p * PAGE, b = a + PAGE < len ? a + PAGE : len;
        if (memcmp(prev + a, cur + a, b - a) != 0 && nch < HANU_ARRAY_LEN(changed)) changed[nch++] = p;
    }
    size_t combos = 1;
    for (size_t i = 0; i < nch && combos <= 4096; i++) combos *= M_MODES;
    int exhaustive = nch <= 3;
    /* small combination sets are repeated: torn pages and garbage differ each time */
    size_t n = exhaustive ? (combos < 64 ? 64 : combos) : 96;
    char mode[64];
    for (size_t k = 0; k <= n; k++) {
        memcpy(img, prev, len);
        size_t slen = clen;
        if (k == n) {   /* the file keeps its synced length; rewritten sectors old or new */
            if (clen <= plen) continue;
            slen = plen;
            for (size_t i = 0; i < nch; i++) apply_page(changed[i], M_TORN, plen);
            snprintf(mode, sizeof mode, "synced length %zu of %zu", plen, clen);
        } else {
            size_t code = k % combos;
            size_t w = 0;
            for (size_t i = 0; i < nch; i++) {
                int m = exhaustive ? (int)(code % M_MODES) : (int)(tq_rand() % M_MODES);
                code /= M_MODES;
                apply_page(changed[i], m, clen);
                if (w + 2 < sizeof mode) mode[w++] = mode_names[m];
            }
            mode[w] = 0;
        }
        put_state(slen);
        states++;
        verify_state(mode, (states & 3) == 0);
    }
}

static int is_store(int fd)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(store_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int fdatasync(int fd)
{
    if (checking || !is_store(fd)) return (int)syscall(SYS_fdatasync, fd);
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    size_t clen = (size_t)st.st_size;
    if (clen + PAGE > cap) {
        size_t nc = (clen + PAGE) * 2;
        prev = realloc(prev, nc);
        cur = realloc(cur, nc);
        img = realloc(img, nc);
        if (!prev || !cur || !img) exit(2);
        memset(prev + cap, 0, nc - cap);
        cap = nc;
    }
    memset(cur, 0, cap);
    if (hanu_pread_full(fd, cur, clen, 0) != 0) exit(2);
    if (armed) {
        checking = 1;
        syncs_seen++;
        crash_states(clen);
        checking = 0;
    }
    int rc = (int)syscall(SYS_fdatasync, fd);
    if (rc == 0) {
        memcpy(prev, cur, cap);
        plen = clen;
    }
    return rc;
}

/* ---- the workload ---- */

static quad *wl_open(void)
{
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = wl_rows;
    o.microblock_rows = 64;
    o.group_window_us = 0;
    o.io_backend = QUAD_IO_INLINE;
    o.checkpoint_bytes = wl_ckpt;
    quad *q = NULL;
    if (quad_open(store_path, &o, &q) != 0) return NULL;
    return q;
}

static void note_durable(quad *q)
{
    uint64_t d = quad_durable_epoch(q);
    if (d > acked) acked = d;
}

/* The subscriber takes whatever its durable stream has now (polled). */
static void subscriber_poll(void)
{
    quad_commit c;
    int rc;
    while ((rc = quad_stream_next(sub, 0, &c)) == 1) {
        if (c.epoch != delivered + 1 || !commit_matches(&c)) report("the live stream delivered a wrong commit", "live");
        delivered = c.epoch;
    }
    if (rc < 0) report("the live stream failed", "live");
}

/* A restart of the subscriber: it resumes after the last epoch it took. */
static void subscriber_open(quad *q)
{
    if (quad_stream_open(q, delivered + 1, QUAD_LANES_ALL | QUAD_STREAM_HOLD, &sub) != 0) {
        report("the subscriber could not resume", "live");
        exit(1);
    }
}

/* A crash of the process: what the page cache holds is the file, but only
 * `prev` is on the disk. Simulated with a copy of the file that takes the
 * store's place (the checker keeps prev as its synced image); the old handle
 * is then closed on the old file, which is no longer watched. */
static quad *crash_process(quad *q, const char *dir)
{
    static int gen;
    char next[600];
    snprintf(next, sizeof next, "%s/store%d.quad", dir, ++gen);
    int in = open(store_path, O_RDONLY), out = open(next, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    struct stat st;
    if (in < 0 || out < 0 || fstat(in, &st) != 0) return NULL;
    uint8_t *b = malloc((size_t)st.st_size);
    if (!b || hanu_pread_full(in, b, (size_t)st.st_size, 0) != 0 ||
        hanu_pwrite_full(out, b, (size_t)st.st_size, 0) != 0) return NULL;
    free(b);
    close(in);
    close(out);
    char old[600];
    snprintf(old, sizeof old, "%s", store_path);
    snprintf(store_path, sizeof store_path, "%s", next);
    quad_stream_close(sub);
    (void)quad_close(q);
    unlink(old);
    q = wl_open();
    if (q) subscriber_open(q);
    return q;
}

static long cleans, relocated, punched;

/* A directory for the store and the states, on tmpfs when there is one: a
 * state's open and close sync three times, which on a disk made the run ten
 * times slower. Sets store_path and state_path. */
static void work_dir(char *dir, size_t cap, const char *name)
{
    snprintf(dir, cap, "/dev/shm/hanudb-%s-%d", name, (int)getpid());
    if (mkdir(dir, 0700) != 0) snprintf(dir, cap, "%s", test_tmpdir(name));
    snprintf(store_path, sizeof store_path, "%s/store.quad", dir);
    snprintf(state_path, sizeof state_path, "%s/state.quad", dir);
}

static void test_power_loss_at_every_sync(void)
{
    char dir[520];
    work_dir(dir, sizeof dir, "crashstates");
    quad *q = wl_open();
    REQUIRE(q);
    subscriber_open(q);
    armed = 1;
    static const int dur[] = { QUAD_BUFFERED, QUAD_DURABLE, QUAD_GROUP, QUAD_BUFFERED };
    for (int step = 0; step < STEPS && nops < MAX_OPS; step++) {
        uint64_t r = tq_rand() % 100;
        if (r < 55) {
            op *x = &ops[nops];
            x->kind = 1;
            x->n = 1 + (uint32_t)(tq_rand() % (r < 10 ? 200 : 40));
            x->seed = (uint64_t)step + 1;
            static quad_fact f[256];
            for (uint32_t i = 0; i < x->n; i++) f[i] = fact_at(x->seed, i);
            int d = dur[tq_rand() % 4];
            REQUIRE(quad_append(q, f, x->n, d, &x->first, &x->epoch) == 0);
            nops++;
            if (d != QUAD_BUFFERED) acked = x->epoch;
        } else if (r < 75 && nops > 0) {
            const op *a = &ops[tq_rand() % nops];
            if (a->kind != 1) continue;
            op *x = &ops[nops];
            x->kind = 2;
            x->id = quad_batch_id(a->first, wl_rows, (size_t)(tq_rand() % a->n));
            int already = 0;
            for (size_t i = 0; i < nops; i++) already |= ops[i].kind == 2 && ops[i].id == x->id;
            if (already) continue;
            int d = dur[tq_rand() % 4];
            REQUIRE(quad_retire(q, &x->id, 1, d, &x->epoch) == 0);
            nops++;
            if (d != QUAD_BUFFERED) acked = x->epoch;
        } else if (r < 85) {
            REQUIRE(quad_sync(q) == 0);
            acked = quad_epoch(q);
        } else if (r < 88) {
            REQUIRE(quad_checkpoint(q) == 0);
        } else if (r < 92) {
            quad_clean_stats cs;
            REQUIRE(quad_clean(q, (tq_rand() & 1) ? 1.0 : 0.9, &cs) == 0);
            cleans++;
            relocated += cs.chunks_relocated;
            punched += cs.bytes_punched;
        } else if (r < 95) {
            q = crash_process(q, dir);
            REQUIRE(q);
        } else {
            uint64_t e = quad_epoch(q);
            quad_stream_close(sub);
            REQUIRE(quad_close(q) == 0);
            acked = e;   /* a successful close leaves everything durable */
            q = wl_open();
            REQUIRE(q);
            subscriber_open(q);
        }
        note_durable(q);
        subscriber_poll();
    }
    quad_stream_close(sub);
    quad_epoch_last = quad_epoch(q);
    CHECK_EQ(quad_close(q), 0);
    unlink(store_path);
    unlink(state_path);
    rmdir(dir);
    fprintf(stderr, "  %zu operations, %ld syncs, %ld crash states (%ld streamed), %ld violations; "
            "the subscriber took %llu of %llu epochs\n", nops, syncs_seen, states, stream_checks, violations,
            (unsigned long long)delivered, (unsigned long long)quad_epoch_last);
    fprintf(stderr, "  %ld cleans relocated %ld chunks and punched %ld bytes\n", cleans, relocated, punched);
    for (size_t k = 0; k < HANU_ARRAY_LEN(kinds) && kinds[k].n; k++)
        fprintf(stderr, "    %ld x %s\n", kinds[k].n, kinds[k].what);
    CHECK(states >= MIN_STATES);
    CHECK_EQ(violations, 0);
}

/* The cleaner on chunks large enough that their payloads have whole pages
 * to punch (512 rows, about 9 KiB each): four appends, 90% of the first two
 * retired one id per commit, a sync, a clean (its syncs cut), an append whose
 * sync sees the punched pages, a close and reopen. */
static void test_power_loss_during_clean(void)
{
    nops = 0;
    acked = delivered = 0;
    armed = 0;
    plen = 0;
    if (prev) memset(prev, 0, cap);
    wl_rows = 512;
    wl_ckpt = 64 << 20;   /* no checkpoint but the clean's: the punched appends follow the last slot */
    char dir[520];
    work_dir(dir, sizeof dir, "crashclean");
    quad *q = wl_open();
    REQUIRE(q);
    subscriber_open(q);
    armed = 1;
    long states0 = states;
    static quad_fact f[512];
    for (int k = 0; k < 4; k++) {
        op *x = &ops[nops];
        x->kind = 1;
        x->n = 512;
        x->seed = 1000 + (uint64_t)k;
        for (uint32_t i = 0; i < x->n; i++) f[i] = fact_at(x->seed, i);
        REQUIRE(quad_append(q, f, x->n, k == 3 ? QUAD_DURABLE : QUAD_BUFFERED, &x->first, &x->epoch) == 0);
        nops++;
    }
    acked = quad_durable_epoch(q);
    subscriber_poll();
    for (int a = 0; a < 2; a++)
        for (uint32_t i = 0; i < 512; i++) {
            if (i % 10 == 3) continue;
            op *x = &ops[nops];
            x->kind = 2;
            x->id = quad_batch_id(ops[a].first, wl_rows, i);
            REQUIRE(quad_retire(q, &x->id, 1, QUAD_BUFFERED, &x->epoch) == 0);
            nops++;
        }
    REQUIRE(quad_sync(q) == 0);
    acked = quad_epoch(q);
    subscriber_poll();
    quad_clean_stats cs;
    REQUIRE(quad_clean(q, 0.5, &cs) == 0);
    CHECK_EQ(cs.chunks_relocated, 2);
    CHECK_EQ(cs.horizon, acked);
    if (!cs.punch_unsupported) CHECK(cs.bytes_punched >= 2 * 4096);
    op *x = &ops[nops];
    x->kind = 1;
    x->n = 100;
    x->seed = 2000;
    for (uint32_t i = 0; i < x->n; i++) f[i] = fact_at(x->seed, i);
    REQUIRE(quad_append(q, f, x->n, QUAD_DURABLE, &x->first, &x->epoch) == 0);
    nops++;
    acked = x->epoch;
    subscriber_poll();
    quad_stream_close(sub);
    CHECK_EQ(quad_close(q), 0);
    REQUIRE((q = wl_open()) != NULL);
    subscriber_open(q);
    subscriber_poll();
    quad_stream_close(sub);
    CHECK_EQ(quad_close(q), 0);
    unlink(store_path);
    unlink(state_path);
    rmdir(dir);
    fprintf(stderr, "  clean of 2 chunks: %llu bytes punched, %ld crash states, %ld violations in all\n",
            (unsigned long long)cs.bytes_punched, states - states0, violations);
    CHECK(states - states0 >= 300);
    CHECK_EQ(violations, 0);
}

int main(void)
{
    /* Every state mallocs and frees images the size of the store file: kept in the heap instead
       of mmap'd and unmapped each time, they are not faulted in page by page again (a quarter of
       the CPU time it took). */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    RUN(test_power_loss_at_every_sync);
    RUN(test_power_loss_during_clean);
    TEST_DONE();
}
