/*
 * test_quad_direct: QUAD_IO_DIRECT (docs/QUAD.md, "Direct I/O"). The page
 * cache stays empty (mincore) through appends, checkpoints, cold gathers,
 * streams and recovery; a file system that refuses O_DIRECT (ramfs, mounted
 * in a private mount namespace) fails the open with HANU_ERR_UNSUPPORTED and
 * leaves no file; the read-modify-write of partial 4 KiB blocks writes exactly
 * the bytes a buffered store writes (frames starting and ending on a block
 * edge, ending one byte before one, inside one block, across many, larger
 * than the 4 MiB bounce, slots beside frames); a store of unaligned length
 * written without the flag reads, streams and grows with it; a file cut under
 * an open handle reads as HANU_ERR_CORRUPT, not zeros; cold gathers from three
 * threads at once read right with every backend. Last, a subset of the
 * quad test programs runs again with QUAD_TEST_DIRECT=1 (tests/quad_shapes.h)
 * on a disk directory. Stores live under the first of $TMPDIR, /var/tmp,
 * /tmp that is not tmpfs or ramfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"
#undef quad_open   /* this program sets QUAD_IO_DIRECT itself, store by store */

#define BLOCK 4096u
static char self_dir[512];   /* where the other test programs are */

static quad *open_flags(const char *p, unsigned flags, int backend, size_t cache)
{
    quad_options o;
    quad_options_default(&o);
    o.flags = flags;
    o.io_backend = backend;
    o.cache_bytes = cache;
    o.checkpoint_bytes = 0;
    quad *q = NULL;
    int rc = quad_open(p, &o, &q);
    if (rc) fprintf(stderr, "  open %s: %s %s\n", p, hanu_status_str(rc), quad_last_error());
    return q;
}

static uint64_t log_end(quad *q)
{
    quad_stats st;
    quad_stats_get(q, &st);
    return st.file_bytes;
}

static uint64_t file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Pages of the file in the page cache. */
static size_t resident_pages(const char *p)
{
    int fd = open(p, O_RDONLY);
    if (fd < 0) return (size_t)-1;
    size_t len = (size_t)file_size(p), pages = (len + 4095) / 4096, n = 0;
    void *m = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    unsigned char *vec = malloc(pages + 1);
    if (m != MAP_FAILED && vec && mincore(m, len, vec) == 0)
        for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
    else n = (size_t)-1;
    if (m != MAP_FAILED) munmap(m, len);
    free(vec);
    close(fd);
    return n;
}

/* Every id (ordered, then at random) against facts, with the cache dropped. */
static size_t mismatches(quad *q, const quad_fact *facts, const quad_id *ids, size_t n)
{
    quad_fact *out = malloc(n * sizeof *out);
    quad_id *req = malloc(n * sizeof *req);
    size_t *src = malloc(n * sizeof *src);
    size_t bad = 0;
    quad_cache_drop(q);
    if (quad_gather(q, 0, ids, n, QUAD_LANES_ALL, out, NULL) != 0) bad = n;
    for (size_t i = 0; i < n && !bad; i++) bad += !tq_fact_eq(&out[i], &facts[i], 0xF);
    quad_cache_drop(q);
    for (size_t i = 0; i < n; i++) { src[i] = tq_rand() % n; req[i] = ids[src[i]]; }
    if (quad_gather(q, 0, req, n, QUAD_LANES_ALL, out, NULL) != 0) bad += n;
    else for (size_t i = 0; i < n; i++) bad += !tq_fact_eq(&out[i], &facts[src[i]], 0xF);
    free(out); free(req); free(src);
    return bad;
}

/* Facts delivered by a stream from epoch 1 (all lanes), or -1. */
static long stream_facts(quad *q)
{
    quad_stream *s = NULL;
    if (quad_stream_open(q, 1, QUAD_LANES_ALL | QUAD_STREAM_COMMITTED, &s) != 0) return -1;
    quad_commit c;
    long n = 0;
    int rc;
    while ((rc = quad_stream_next(s, 0, &c)) == 1) n += c.kind == QUAD_COMMIT_APPEND ? (long)c.n : 0;
    quad_stream_close(s);
    return rc == 0 ? n : -1;
}

/* Appends facts in batches of `batch`; ids out. */
static int append_all(quad *q, const quad_fact *facts, size_t n, size_t batch, quad_id *ids)
{
    for (size_t done = 0; done < n; done += batch) {
        size_t k = n - done < batch ? n - done : batch;
        quad_id first;
        if (quad_append(q, facts + done, k, QUAD_BUFFERED, &first, NULL) != 0) return -1;
        for (size_t i = 0; i < k; i++) ids[done + i] = quad_batch_id(first, quad_chunk_rows(q), i);
    }
    return 0;
}

static void test_page_cache_bypassed(void)
{
    const char *dir = test_tmpdir("bypass");
    size_t n = 200000;
    quad_fact *facts = malloc(n * sizeof *facts);
    quad_id *ids = malloc(n * sizeof *ids);
    REQUIRE(facts && ids);
    tq_entropy(facts, n);
    for (int direct = 1; direct >= 0; direct--) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s.quad", dir, direct ? "direct" : "buffered");
        quad *q = open_flags(p, direct ? QUAD_IO_DIRECT : 0, QUAD_IO_THREADS, 1u << 20);
        REQUIRE(q);
        REQUIRE(append_all(q, facts, n, 5000, ids) == 0);
        CHECK_EQ(quad_sync(q), 0);
        CHECK_EQ(mismatches(q, facts, ids, n), 0);
        CHECK_EQ(stream_facts(q), (long)n);
        CHECK_EQ(quad_close(q), 0);
        q = open_flags(p, direct ? QUAD_IO_DIRECT : 0, QUAD_IO_URING, 1u << 20);
        REQUIRE(q);
        CHECK_EQ(mismatches(q, facts, ids, n), 0);
        CHECK_EQ(quad_close(q), 0);
        size_t res = resident_pages(p);
        fprintf(stderr, "  %s: %zu of %llu pages in the page cache\n", direct ? "direct" : "buffered", res,
                (unsigned long long)(file_size(p) / 4096));
        /* the buffered twin shows that mincore sees what the store read */
        if (direct) CHECK_EQ(res, 0);
        else CHECK(res > 0 && res != (size_t)-1);
    }
    free(facts);
    free(ids);
}

/* Runs in a child with a private mount namespace: 0 passed, 1 failed, 77
 * when no ramfs can be mounted here. */
static int refused_in_ramfs(const char *dir)
{
    if (unshare(CLONE_NEWNS) != 0) return 77;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 77;
    if (mount("none", dir, "ramfs", 0, NULL) != 0) return 77;
    char p[700];
    snprintf(p, sizeof p, "%s/r.quad", dir);
    quad *q = NULL;
    quad_options o;
    quad_options_default(&o);
    o.flags = QUAD_IO_DIRECT;
    CHECK_EQ(quad_open(p, &o, &q), HANU_ERR_UNSUPPORTED);
    CHECK(q == NULL);
    CHECK(strstr(quad_last_error(), "O_DIRECT") && strstr(quad_last_error(), p));
    CHECK(access(p, F_OK) != 0);   /* the refused open removed the file it created */
    /* no silent fallback: without the flag the page cache is used */
    o.flags = 0;
    CHECK_EQ(quad_open(p, &o, &q), 0);
    quad_fact f = { { 1, 2, 3, 4 } };
    quad_id id = 0;
    if (q) CHECK_EQ(quad_append(q, &f, 1, QUAD_DURABLE, &id, NULL), 0);
    CHECK_EQ(quad_close(q), 0);
    uint64_t size = file_size(p);
    /* an existing store: refused, and left as it was */
    o.flags = QUAD_IO_DIRECT;
    CHECK_EQ(quad_open(p, &o, &q), HANU_ERR_UNSUPPORTED);
    o.flags = QUAD_IO_DIRECT | QUAD_RDONLY;
    CHECK_EQ(quad_open(p, &o, &q), HANU_ERR_UNSUPPORTED);
    CHECK_EQ(file_size(p), size);
    o.flags = 0;
    CHECK_EQ(quad_open(p, &o, &q), 0);
    quad_fact back = { { 0, 0, 0, 0 } };
    if (q) CHECK_EQ(quad_gather(q, 0, &id, 1, QUAD_LANES_ALL, &back, NULL), 0);
    CHECK(tq_fact_eq(&back, &f, 0xF));
    CHECK_EQ(quad_close(q), 0);
    return test_current_failed ? 1 : 0;
}

static void test_refused_where_o_direct_is_not_supported(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("ramfs"));
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(refused_in_ramfs(dir));
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        fprintf(stderr, "  skipped: no ramfs can be mounted here (needs CAP_SYS_ADMIN)\n");
        return;
    }
    CHECK_EQ(WEXITSTATUS(st), 0);
}

/* One operation on both stores: an append of k entropy facts (k > 0) or a
 * retire of ids[at] (k == 0). */
static int both(quad *a, quad *b, const quad_fact *f, size_t k, quad_id *ids, size_t at, int dur)
{
    quad *qs[2] = { a, b };
    for (int i = 0; i < 2; i++) {
        quad_id first;
        int rc = k ? quad_append(qs[i], f, k, dur, &first, NULL) : quad_retire(qs[i], &ids[at], 1, dur, NULL);
        if (rc) return rc;
        for (size_t j = 0; j < k; j++) ids[at + j] = quad_batch_id(first, quad_chunk_rows(qs[i]), j);
    }
    return log_end(a) == log_end(b) ? 0 : -1;
}

static int same_bytes(const char *pa, const char *pb, uint64_t from, uint64_t to)
{
    int fa = open(pa, O_RDONLY), fb = open(pb, O_RDONLY);
    size_t len = (size_t)(to - from);
    uint8_t *x = malloc(len + 1), *y = malloc(len + 1);
    int same = fa >= 0 && fb >= 0 && x && y && hanu_pread_full(fa, x, len, (off_t)from) == 0 &&
               hanu_pread_full(fb, y, len, (off_t)from) == 0 && memcmp(x, y, len) == 0;
    free(x); free(y);
    if (fa >= 0) close(fa);
    if (fb >= 0) close(fb);
    return same;
}

static int zeros_after(const char *p, uint64_t from)
{
    uint64_t size = file_size(p);
    if (size < from) return 0;
    size_t len = (size_t)(size - from);
    uint8_t *x = malloc(len + 1);
    int fd = open(p, O_RDONLY);
    int z = fd >= 0 && x && hanu_pread_full(fd, x, len, (off_t)from) == 0 && hanu_is_zero(x, len);
    free(x);
    if (fd >= 0) close(fd);
    return z;
}

/* Opens p with and without the flag in turn: facts [skip, n) by id, and the
 * n facts appended through the stream. */
static void check_both_ways(const char *p, const quad_fact *f, const quad_id *ids, size_t n, size_t skip)
{
    for (int direct = 0; direct < 2; direct++) {
        quad *q = open_flags(p, direct ? QUAD_IO_DIRECT : 0, QUAD_IO_THREADS, 1u << 20);
        REQUIRE(q);
        CHECK_EQ(mismatches(q, f + skip, ids + skip, n - skip), 0);
        CHECK_EQ(stream_facts(q), (long)n);
        CHECK_EQ(quad_close(q), 0);
    }
}

static void test_block_edges_write_what_buffered_writes(void)
{
    const char *dir = test_tmpdir("edges");
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s/buffered.quad", dir);
    snprintf(pb, sizeof pb, "%s/direct.quad", dir);
    size_t cap = 400000;
    quad_fact *f = malloc(cap * sizeof *f);
    quad_id *ids = malloc(cap * sizeof *ids);
    REQUIRE(f && ids);
    tq_entropy(f, cap);
    quad *a = open_flags(pa, 0, QUAD_IO_INLINE, 1u << 20), *b = open_flags(pb, QUAD_IO_DIRECT, QUAD_IO_INLINE, 1u << 20);
    REQUIRE(a && b);
    size_t n = 0;
    /* an entropy frame of k <= 256 facts takes 64 + 32 k bytes, a retire of
     * one id 53: the log starts at 4096, so 126 facts end on the next edge */
    REQUIRE(both(a, b, f, 126, ids, n, QUAD_BUFFERED) == 0);
    n += 126;
    CHECK_EQ(log_end(b), 2 * BLOCK);                     /* starts and ends on an edge */
    REQUIRE(both(a, b, f + n, 121, ids, n, QUAD_DURABLE) == 0);   /* starts on one, ends inside */
    n += 121;
    for (int i = 0; i < 3; i++) REQUIRE(both(a, b, NULL, 0, ids, (size_t)i, QUAD_BUFFERED) == 0);
    CHECK_EQ(log_end(b), 3 * BLOCK - 1);                 /* one byte before an edge */
    REQUIRE(both(a, b, NULL, 0, ids, 3, QUAD_BUFFERED) == 0);     /* across it */
    CHECK_EQ(log_end(b), 3 * BLOCK + 52);
    REQUIRE(both(a, b, f + n, 1, ids, n, QUAD_BUFFERED) == 0);    /* inside one block */
    n += 1;
    REQUIRE(both(a, b, f + n, 150000, ids, n, QUAD_GROUP) == 0);  /* 4.8 MB: two bounce pieces */
    n += 150000;
    CHECK(log_end(b) % BLOCK != 0);
    CHECK_EQ(quad_checkpoint(a), 0);
    CHECK_EQ(quad_checkpoint(b), 0);
    while (n < cap - 300) {   /* many sizes, retires between */
        size_t k = 1 + tq_rand() % 300;
        REQUIRE(both(a, b, f + n, k, ids, n, (tq_rand() & 7) ? QUAD_BUFFERED : QUAD_DURABLE) == 0);
        n += k;
        if (tq_rand() & 1) REQUIRE(both(a, b, NULL, 0, ids, 4 + (size_t)(tq_rand() % 200), QUAD_BUFFERED) == 0);
        if (n > 200000) break;
    }
    uint64_t end = log_end(b);
    CHECK_EQ(mismatches(b, f + 204, ids + 204, n - 204), 0);   /* past the ids retired at random */
    CHECK(same_bytes(pa, pb, BLOCK, end));
    CHECK_EQ(file_size(pb) % BLOCK, 0);
    CHECK(zeros_after(pb, end));
    CHECK_EQ(quad_close(a), 0);
    CHECK_EQ(quad_close(b), 0);
    /* the checkpoint at close too, and both open either way with every fact */
    end = file_size(pa);
    CHECK(same_bytes(pa, pb, BLOCK, end));
    CHECK(zeros_after(pb, end));
    quad *q = open_flags(pb, QUAD_IO_DIRECT, QUAD_IO_INLINE, 1u << 20);
    REQUIRE(q);
    CHECK_EQ(log_end(q), end);
    CHECK_EQ(quad_close(q), 0);
    check_both_ways(pb, f, ids, n, 204);
    free(f);
    free(ids);
}

static void test_unaligned_store_opened_direct(void)
{
    char p[700];
    snprintf(p, sizeof p, "%s/u.quad", test_tmpdir("unaligned"));
    size_t n = 50000, m = 777, batch = 3333;   /* a batch per 4096-row chunk */
    quad_fact *f = malloc((n + m) * sizeof *f);
    quad_id *ids = malloc((n + m) * sizeof *ids);
    REQUIRE(f && ids);
    uint64_t ts = 1700000000000ULL;
    tq_structured(f, n + m, &ts);
    /* written without the flag by a process that ends without closing: the
     * file ends with the last append frame, inside a block */
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        quad *c = open_flags(p, 0, QUAD_IO_INLINE, 1u << 20);
        int rc = c ? append_all(c, f, n, batch, ids) : -1;
        _exit(rc == 0 && quad_sync(c) == 0 ? 0 : 1);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    for (size_t i = 0; i < n; i++) ids[i] = QUAD_ID(i / batch, i % batch);
    CHECK(file_size(p) % BLOCK != 0);
    quad *q = open_flags(p, QUAD_IO_DIRECT, QUAD_IO_INLINE, 1u << 20);
    REQUIRE(q);
    CHECK_EQ(log_end(q), file_size(p));
    CHECK_EQ(mismatches(q, f, ids, n), 0);   /* the last lanes' windows run past the end of the file */
    CHECK_EQ(stream_facts(q), (long)n);
    REQUIRE(append_all(q, f + n, m, m, ids + n) == 0);   /* rewrites the block the file ended in */
    CHECK_EQ(mismatches(q, f, ids, n + m), 0);
    CHECK_EQ(quad_close(q), 0);
    CHECK_EQ(file_size(p) % BLOCK, 0);
    check_both_ways(p, f, ids, n + m, 0);
    free(f);
    free(ids);
}

static void test_cut_file_reads_corrupt(void)
{
    char p[700];
    snprintf(p, sizeof p, "%s/c.quad", test_tmpdir("cut"));
    size_t n = 8192;
    quad_fact *f = malloc(n * sizeof *f), *out = malloc(n * sizeof *out);
    quad_id *ids = malloc(n * sizeof *ids);
    REQUIRE(f && out && ids);
    tq_entropy(f, n);
    quad *q = open_flags(p, QUAD_IO_DIRECT, QUAD_IO_INLINE, 1u << 20);
    REQUIRE(q);
    REQUIRE(append_all(q, f, n, 4096, ids) == 0);
    CHECK_EQ(quad_sync(q), 0);
    /* cut the file 100 bytes before the end of the log, inside a block */
    REQUIRE(truncate(p, (off_t)(log_end(q) - 100)) == 0);
    quad_cache_drop(q);
    CHECK_EQ(quad_gather(q, 0, ids + 4096, 4096, QUAD_LANE(3), out, NULL), HANU_ERR_CORRUPT);
    quad_cache_drop(q);
    CHECK_EQ(quad_gather(q, 0, ids, 4096, QUAD_LANES_ALL, out, NULL), 0);   /* the first chunk is whole */
    size_t bad = 0;
    for (size_t i = 0; i < 4096; i++) bad += !tq_fact_eq(&out[i], &f[i], 0xF);
    CHECK_EQ(bad, 0);
    quad_close(q);
    free(f); free(out); free(ids);
}

typedef struct reader_ctx {
    quad *q;
    const quad_fact *facts;
    const quad_id *ids;
    size_t n, bad;
    uint64_t seed;
} reader_ctx;

/* Cold random gathers (the cache dropped before each) while other threads do
 * the same: batches share the handle's kept arena or take their own. */
static void *cold_reader(void *arg)
{
    reader_ctx *r = arg;
    quad_id req[4096];
    size_t src[4096];
    quad_fact *out = malloc(4096 * sizeof *out);
    for (int call = 0; call < 40 && out; call++) {
        for (int i = 0; i < 4096; i++) {
            r->seed ^= r->seed << 13; r->seed ^= r->seed >> 7; r->seed ^= r->seed << 17;
            src[i] = r->seed % r->n;
            req[i] = r->ids[src[i]];
        }
        quad_cache_drop(r->q);
        if (quad_gather(r->q, 0, req, 4096, QUAD_LANES_ALL, out, NULL) != 0) { r->bad += 4096; continue; }
        for (int i = 0; i < 4096; i++) r->bad += !tq_fact_eq(&out[i], &r->facts[src[i]], 0xF);
    }
    free(out);
    return NULL;
}

static void test_concurrent_cold_gathers(void)
{
    char p[700];
    snprintf(p, sizeof p, "%s/t.quad", test_tmpdir("threads"));
    size_t n = 300000;
    quad_fact *f = malloc(n * sizeof *f);
    quad_id *ids = malloc(n * sizeof *ids);
    REQUIRE(f && ids);
    uint64_t ts = 1700000000000ULL;
    tq_structured(f, n, &ts);
    for (int b = QUAD_IO_INLINE; b <= QUAD_IO_URING; b++) {
        quad *q = open_flags(p, QUAD_IO_DIRECT, b, 4u << 20);
        REQUIRE(q);
        if (b == QUAD_IO_INLINE) REQUIRE(append_all(q, f, n, 65536, ids) == 0);
        reader_ctx r[3];
        pthread_t th[3];
        for (int t = 0; t < 3; t++) {
            r[t] = (reader_ctx){ .q = q, .facts = f, .ids = ids, .n = n, .seed = 0x9E3779B9ULL * (uint64_t)(t + 1) };
            REQUIRE(pthread_create(&th[t], NULL, cold_reader, &r[t]) == 0);
        }
        for (int t = 0; t < 3; t++) {
            pthread_join(th[t], NULL);
            CHECK_EQ(r[t].bad, 0);
        }
        CHECK_EQ(quad_close(q), 0);
    }
    free(f);
    free(ids);
}

/* The promise and recovery programs, the crash-state checker and the stream
 * tests, each run whole with QUAD_TEST_DIRECT=1 (about 30 s; test_quad_model
 * and test_quad_basic pass too but take 15-65 s more, every small commit being
 * a device write: QUAD_DIRECT_PROGRAMS="recover model ..." picks others). */
static void test_quad_programs_with_direct_io(void)
{
    static const char *dflt[] = { "recover", "promises", "crash", "crashstates", "stream" };
    const char *progs[16];
    size_t np = 0;
    char *list = getenv("QUAD_DIRECT_PROGRAMS") ? strdup(getenv("QUAD_DIRECT_PROGRAMS")) : NULL;
    if (list) {
        for (char *save = NULL, *t = strtok_r(list, " ,", &save); t && np < 16; t = strtok_r(NULL, " ,", &save))
            progs[np++] = t;
    } else {
        for (; np < sizeof dflt / sizeof *dflt; np++) progs[np] = dflt[np];
    }
    char logs[600];
    snprintf(logs, sizeof logs, "%s", test_tmpdir("programs"));
    for (size_t i = 0; i < np; i++) {
        char cmd[1400], bin[700];
        snprintf(bin, sizeof bin, "%s/test_quad_%s", self_dir, progs[i]);
        if (access(bin, X_OK) != 0) {
            fprintf(stderr, "  %s is not built (make builds every test program)\n", bin);
            CHECK(0);
            continue;
        }
        snprintf(cmd, sizeof cmd, "QUAD_TEST_DIRECT=1 '%s' >'%s/%s.log' 2>&1", bin, logs, progs[i]);
        double t = (double)hanu_now_ns() / 1e9;
        int st = system(cmd);
        fprintf(stderr, "  %s with QUAD_IO_DIRECT: %s (%.1f s)\n", progs[i],
                st == 0 ? "ok" : "FAILED", (double)hanu_now_ns() / 1e9 - t);
        if (st != 0) {
            snprintf(cmd, sizeof cmd, "tail -20 '%s/%s.log' >&2", logs, progs[i]);
            (void)system(cmd);
        }
        CHECK_EQ(st, 0);
    }
    free(list);
}

/* The first of $TMPDIR, /var/tmp, /tmp that is a disk (not tmpfs or ramfs). */
static void pick_disk_dir(void)
{
    const char *cand[] = { getenv("TMPDIR"), "/var/tmp", "/tmp" };
    for (int i = 0; i < 3; i++) {
        struct statfs sf;
        if (!cand[i] || statfs(cand[i], &sf) != 0) continue;
        unsigned long type = (unsigned long)sf.f_type;
        if (type == 0x01021994UL /* tmpfs */ || type == 0x858458f6UL /* ramfs */) continue;
        setenv("TMPDIR", cand[i], 1);
        return;
    }
    fprintf(stderr, "note: no disk directory found, stores live in tmpfs\n");
}

int main(int argc, char **argv)
{
    (void)argc;
    char *dup = strdup(argv[0]);
    snprintf(self_dir, sizeof self_dir, "%s", dirname(dup));
    free(dup);
    pick_disk_dir();
    fprintf(stderr, "stores under %s\n", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    RUN(test_page_cache_bypassed);
    RUN(test_refused_where_o_direct_is_not_supported);
    RUN(test_block_edges_write_what_buffered_writes);
    RUN(test_unaligned_store_opened_direct);
    RUN(test_cut_file_reads_corrupt);
    RUN(test_concurrent_cold_gathers);
    if (!getenv("QUAD_DIRECT_SKIP_PROGRAMS")) RUN(test_quad_programs_with_direct_io);
    TEST_DONE();
}
