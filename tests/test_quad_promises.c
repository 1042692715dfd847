/*
 * test_quad_promises: what the facts kernel promises about durability and
 * recovery, each case from issue 16 as a program outside the kernel would
 * meet it. This binary interposes fdatasync and fsync (it defines them; the
 * library's calls resolve here): a test arms `fail_syncs` and the next calls
 * fail with EIO, as Linux reports a writeback error once per open file and
 * then returns 0 again. Damage is made by editing copies of store files.
 *
 *   failed syncs: a durable commit covered only by a failed fdatasync is
 *     never acknowledged, the durable epoch freezes, later durable calls,
 *     quad_sync and quad_close return HANU_ERR_STOPPED;
 *   reopen: recovery syncs before it calls anything durable;
 *   damage before the durable mark is HANU_ERR_CORRUPT naming the offset, and
 *     nothing on disk is destroyed; loss past it (unsynced) opens without
 *     salvage;
 *   checkpoints: a failing one is not retried by every commit;
 *   bad input: quad_scan with a huge cap, a checkpoint chunk offset near 2^64,
 *     a failed directory fsync at creation;
 *   one owner: a second handle is refused (HANU_ERR_BUSY), a child after fork
 *     is refused;
 *   memory of one huge gather stays near cache_bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

/* ---- interposed syncs ---- */
static _Atomic int fail_syncs;      /* the next n fdatasync/fsync calls fail */
static _Atomic long sync_calls;
static _Atomic long long pwrite_bytes;
static _Atomic int fail_dir_fsync;  /* fsync (the library uses it for directories) fails */

int fdatasync(int fd)
{
    atomic_fetch_add(&sync_calls, 1);
    int n = atomic_load(&fail_syncs);
    while (n > 0 && !atomic_compare_exchange_weak(&fail_syncs, &n, n - 1)) {}
    if (n > 0) { errno = EIO; return -1; }
    return (int)syscall(SYS_fdatasync, fd);
}

int fsync(int fd)
{
    if (atomic_load(&fail_dir_fsync)) { errno = EIO; return -1; }
    int n = atomic_load(&fail_syncs);
    while (n > 0 && !atomic_compare_exchange_weak(&fail_syncs, &n, n - 1)) {}
    if (n > 0) { errno = EIO; return -1; }
    return (int)syscall(SYS_fsync, fd);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    atomic_fetch_add(&pwrite_bytes, (long long)n);
    return syscall(SYS_pwrite64, fd, buf, n, off);
}

static char dir[512];

static const char *path_in(const char *name)
{
    static char p[4][700];
    static int k;
    k = (k + 1) & 3;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static quad *open_small(const char *path, unsigned flags)
{
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 64;
    o.microblock_rows = 64;
    o.io_backend = QUAD_IO_INLINE;
    o.flags = flags;
    quad *q = NULL;
    int rc = quad_open(path, &o, &q);
    if (rc) fprintf(stderr, "  open %s: %d %s\n", path, rc, quad_last_error());
    return q;
}

static quad_fact fact_of(uint64_t k)
{
    quad_fact f = { { k, k * 3 + 1, 1000 + k, ~k } };
    return f;
}

static void append_one(quad *q, uint64_t k, int durability, int want_rc)
{
    quad_fact f = fact_of(k);
    CHECK_EQ(quad_append(q, &f, 1, durability, NULL, NULL), want_rc);
}

/* ---- 1. failed syncs ---- */

static void test_failed_sync_in_checkpoint_never_acknowledged(void)
{
    quad_options o;
    quad_options_default(&o);
    o.checkpoint_bytes = 1;   /* a checkpoint (and its syncs) in every commit */
    o.io_backend = QUAD_IO_INLINE;
    quad *q = NULL;
    REQUIRE(quad_open(path_in("ck.quad"), &o, &q) == 0);
    atomic_store(&fail_syncs, 1);
    quad_fact f = fact_of(1);
    int rc = quad_append(q, &f, 1, QUAD_DURABLE, NULL, NULL);
    CHECK(rc == HANU_ERR_IO || rc == HANU_ERR_STOPPED);
    CHECK_EQ(quad_durable_epoch(q), 0);
    append_one(q, 2, QUAD_DURABLE, HANU_ERR_STOPPED);
    CHECK_EQ(quad_sync(q), HANU_ERR_STOPPED);
    CHECK_EQ(quad_durable_epoch(q), 0);
    CHECK_EQ(quad_close(q), HANU_ERR_STOPPED);
}

static void test_failed_checkpoint_then_sync_is_stopped(void)
{
    quad *q = open_small(path_in("ck2.quad"), 0);
    REQUIRE(q);
    append_one(q, 1, QUAD_BUFFERED, 0);
    atomic_store(&fail_syncs, 1);
    CHECK_EQ(quad_checkpoint(q), HANU_ERR_IO);
    CHECK_EQ(quad_sync(q), HANU_ERR_STOPPED);   /* the next fdatasync would return 0 */
    CHECK_EQ(quad_durable_epoch(q), 0);
    append_one(q, 2, QUAD_BUFFERED, HANU_ERR_STOPPED);
    CHECK_EQ(quad_close(q), HANU_ERR_STOPPED);
}

static void test_failed_leader_sync_freezes_durable_epoch(void)
{
    quad *q = open_small(path_in("lead.quad"), 0);
    REQUIRE(q);
    append_one(q, 1, QUAD_DURABLE, 0);
    CHECK_EQ(quad_durable_epoch(q), 1);
    append_one(q, 2, QUAD_BUFFERED, 0);
    atomic_store(&fail_syncs, 1);
    append_one(q, 3, QUAD_DURABLE, HANU_ERR_IO);   /* its sync failed */
    CHECK_EQ(quad_durable_epoch(q), 1);
    append_one(q, 4, QUAD_DURABLE, HANU_ERR_STOPPED);
    append_one(q, 5, QUAD_GROUP, HANU_ERR_STOPPED);
    quad_id id = QUAD_ID(0, 0);
    CHECK_EQ(quad_retire(q, &id, 1, QUAD_DURABLE, NULL), HANU_ERR_STOPPED);
    CHECK_EQ(quad_sync(q), HANU_ERR_STOPPED);
    CHECK_EQ(quad_durable_epoch(q), 1);
    /* reads go on */
    quad_fact out[3];
    quad_id ids[3] = { QUAD_ID(0, 0), QUAD_ID(1, 0), QUAD_ID(2, 0) };
    CHECK_EQ(quad_gather(q, 0, ids, 3, QUAD_LANES_ALL, out, NULL), 0);
    CHECK_EQ(out[2].lane[0], 3);
    CHECK_EQ(quad_close(q), HANU_ERR_STOPPED);
    /* the file still opens, with what reached it */
    q = open_small(path_in("lead.quad"), 0);
    CHECK(q != NULL);
    if (q) CHECK(quad_epoch(q) >= 1);
    CHECK_EQ(quad_close(q), 0);
}

/* ---- 3. reopen ---- */

static void test_reopen_syncs_before_claiming_durable(void)
{
    const char *p = path_in("reopen.quad");
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {   /* ten buffered commits, then exit without sync or close */
        quad *q = open_small(p, 0);
        if (!q) _exit(2);
        for (uint64_t k = 0; k < 10; k++) {
            quad_fact f = fact_of(k);
            if (quad_append(q, &f, 1, QUAD_BUFFERED, NULL, NULL) != 0) _exit(3);
        }
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    long before = atomic_load(&sync_calls);
    quad *q = open_small(p, 0);
    REQUIRE(q);
    CHECK_EQ(quad_epoch(q), 10);
    CHECK_EQ(quad_durable_epoch(q), 10);
    CHECK(atomic_load(&sync_calls) > before);   /* durable only after a sync */
    quad_close(q);
    /* read-only: cannot sync, so claims only what the durable mark covers */
    q = open_small(p, QUAD_RDONLY);
    REQUIRE(q);
    CHECK_EQ(quad_epoch(q), 10);
    quad_close(q);
}

/* ---- 2 and 4. damage before and after the durable mark ---- */

enum { NCOMMITS = 10, PER = 100 };
static uint64_t ends[NCOMMITS + 1];

/* NCOMMITS durable commits of PER facts (chunk_rows 64: 2 chunks each), then
 * closed as a crash leaves it: copied while open. */
static void build_durable(const char *path, int durable_upto)
{
    const char *live = path_in("live.quad");
    unlink(live);
    quad *q = open_small(live, 0);
    if (!q) { CHECK(0); return; }
    quad_stats st;
    quad_stats_get(q, &st);
    ends[0] = st.file_bytes;
    static quad_fact f[PER];
    for (int c = 0; c < NCOMMITS; c++) {
        for (int i = 0; i < PER; i++) f[i] = fact_of((uint64_t)c * PER + (uint64_t)i);
        CHECK_EQ(quad_append(q, f, PER, c < durable_upto ? QUAD_DURABLE : QUAD_BUFFERED, NULL, NULL), 0);
        quad_stats_get(q, &st);
        ends[c + 1] = st.file_bytes;
    }
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", live, path);
    CHECK_EQ(system(cmd), 0);
    quad_close(q);
}

static void patch(const char *p, uint64_t off, const void *bytes, size_t n)
{
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    CHECK_EQ(pwrite(fd, bytes, n, (off_t)off), (long long)n);
    close(fd);
}

static uint8_t *slurp(const char *p, size_t *n)
{
    int fd = open(p, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return NULL;
    uint8_t *b = malloc((size_t)st.st_size + 1);
    *n = (size_t)st.st_size;
    if (b && hanu_pread_full(fd, b, *n, 0) != 0) { free(b); b = NULL; }
    close(fd);
    return b;
}

/* Opens p expecting HANU_ERR_CORRUPT whose message names `off`, twice, and
 * checks that the failed opens changed no byte of the file. */
static void expect_refused_at(const char *p, uint64_t off)
{
    size_t n0, n1;
    uint8_t *b0 = slurp(p, &n0);
    for (int k = 0; k < 2; k++) {
        quad *q = NULL;
        quad_options o;
        quad_options_default(&o);
        CHECK_EQ(quad_open(p, &o, &q), HANU_ERR_CORRUPT);
        char want[64];
        snprintf(want, sizeof want, "offset %llu", (unsigned long long)off);
        if (!strstr(quad_last_error(), want)) {
            fprintf(stderr, "  message: %s (want %s)\n", quad_last_error(), want);
            CHECK(0);
        }
    }
    uint8_t *b1 = slurp(p, &n1);
    CHECK(b0 && b1 && n0 == n1 && memcmp(b0, b1, n0) == 0);
    free(b0);
    free(b1);
}

static void expect_epoch(const char *p, unsigned flags, uint64_t epoch)
{
    quad *q = open_small(p, flags);
    CHECK(q != NULL);
    if (!q) return;
    CHECK_EQ(quad_epoch(q), epoch);
    quad_close(q);
}

static void test_damage_in_durable_log_is_refused(void)
{
    const char *p = path_in("dmg.quad");
    static const uint8_t zeros[4096];
    /* 32 zero bytes at commit 4 (the fifth frame) of ten durable commits */
    build_durable(p, NCOMMITS);
    patch(p, ends[4], zeros, 32);
    expect_refused_at(p, ends[4]);
    expect_epoch(p, QUAD_SALVAGE, 4);
    expect_epoch(p, 0, 4);   /* salvaged for good: the lowered mark is on the disk */
    /* the first log page lost */
    build_durable(p, NCOMMITS);
    patch(p, ends[0], zeros, 4096);
    expect_refused_at(p, ends[0]);
    /* one flipped bit in commit 4's length */
    build_durable(p, NCOMMITS);
    size_t n;
    uint8_t *b = slurp(p, &n);
    REQUIRE(b);
    uint8_t x = b[ends[4] + 8] ^ 0x10;
    free(b);
    patch(p, ends[4] + 8, &x, 1);
    expect_refused_at(p, ends[4]);
}

static void test_unsynced_damage_opens_without_salvage(void)
{
    const char *p = path_in("loss.quad");
    static uint8_t garbage[4096];
    for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)tq_rand();
    /* commits 1-3 durable, 4-10 written but never synced; a power loss
     * keeps some later pages and loses one in the middle */
    build_durable(p, 3);
    patch(p, ends[5] + 100, garbage, 1000);
    expect_epoch(p, 0, 5);
    build_durable(p, 3);
    static const uint8_t zeros[4096];
    patch(p, ends[4], zeros, 4096);
    expect_epoch(p, 0, 4);
    /* and the repaired file keeps going */
    quad *q = open_small(p, 0);
    REQUIRE(q);
    append_one(q, 7, QUAD_DURABLE, 0);
    CHECK_EQ(quad_epoch(q), 5);
    CHECK_EQ(quad_close(q), 0);
    expect_epoch(p, 0, 5);
}

/* ---- 5. a failing checkpoint is not retried by every commit ---- */

static void test_failed_checkpoint_not_retried_per_commit(void)
{
    const char *p = path_in("cliff.quad");
    quad_options o;
    quad_options_default(&o);
    o.io_backend = QUAD_IO_INLINE;
    quad *q = NULL;
    REQUIRE(quad_open(p, &o, &q) == 0);
    enum { N = 1 << 16 };
    static quad_fact f[N];
    static quad_id ids[N];
    uint64_t ts = 0;
    tq_structured(f, N, &ts);
    quad_id first;
    REQUIRE(quad_append(q, f, N, QUAD_BUFFERED, &first, NULL) == 0);
    for (size_t i = 0; i < N; i++) ids[i] = quad_batch_id(first, 4096, i);
    /* every other fact: a checkpoint of about 512 KiB of pairs */
    for (size_t i = 0; i < N / 2; i++) ids[i] = ids[2 * i];
    REQUIRE(quad_retire(q, ids, N / 2, QUAD_BUFFERED, NULL) == 0);
    CHECK_EQ(quad_close(q), 0);
    o.checkpoint_bytes = 4096;   /* due after a few commits */
    REQUIRE(quad_open(p, &o, &q) == 0);
    quad_stats st;
    quad_stats_get(q, &st);
    struct rlimit old, lim;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = st.file_bytes + (256 << 10);   /* room for commits, not a checkpoint */
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    long long w0 = atomic_load(&pwrite_bytes);
    int ok = 0;
    for (int i = 0; i < 100; i++) ok += quad_append(q, f, 64, QUAD_BUFFERED, NULL, NULL) == 0;
    long long written = atomic_load(&pwrite_bytes) - w0;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    fprintf(stderr, "  100 commits wrote %lld bytes with the checkpoint failing\n", written);
    CHECK_EQ(ok, 100);
    CHECK(written < (4 << 20));   /* retried per commit: 100 x 2 x 512 KiB */
    CHECK_EQ(quad_close(q), 0);   /* the file limit is gone: the closing checkpoint works */
}

static void test_checkpoint_split_across_frames(void)
{
    const char *p = path_in("split.quad");
    quad_options o;
    quad_options_default(&o);
    o.io_backend = QUAD_IO_INLINE;
    quad *q = NULL;
    REQUIRE(quad_open(p, &o, &q) == 0);
    enum { N = 1 << 19 };   /* 8 MiB of pairs: three checkpoint parts */
    quad_fact *f = malloc(N * sizeof *f);
    quad_id *ids = malloc(N * sizeof *ids);
    REQUIRE(f && ids);
    uint64_t ts = 0;
    tq_structured(f, N, &ts);
    quad_id first;
    REQUIRE(quad_append(q, f, N, QUAD_BUFFERED, &first, NULL) == 0);
    for (size_t i = 0; i < N; i++) ids[i] = quad_batch_id(first, 4096, i);
    REQUIRE(quad_retire(q, ids, N - 3, QUAD_BUFFERED, NULL) == 0);
    quad_stats st0, st1;
    quad_stats_get(q, &st0);
    CHECK_EQ(quad_checkpoint(q), 0);
    quad_stats_get(q, &st1);
    CHECK(st1.file_bytes - st0.file_bytes > (8u << 20));
    CHECK_EQ(quad_close(q), 0);
    REQUIRE(quad_open(p, &o, &q) == 0);
    quad_stats_get(q, &st1);
    CHECK_EQ(st1.recovered_frames, 0);   /* loaded from the checkpoint */
    CHECK_EQ(st1.retired, N - 3);
    uint8_t pr[4];
    quad_fact out[4];
    CHECK_EQ(quad_gather(q, 0, ids + N - 4, 4, QUAD_LANES_ALL, out, pr), 0);
    CHECK(pr[0] == 0 && pr[1] && pr[2] && pr[3]);
    CHECK(tq_fact_eq(&out[3], &f[N - 1], 0xF));
    quad_close(q);
    free(f);
    free(ids);
}

/* ---- 6. bad input ---- */

static void test_scan_with_huge_cap(void)
{
    quad *q = open_small(path_in("scan.quad"), 0);
    REQUIRE(q);
    static quad_fact f[100], out[100];
    for (int i = 0; i < 100; i++) f[i] = fact_of((uint64_t)i);
    REQUIRE(quad_append(q, f, 100, QUAD_BUFFERED, NULL, NULL) == 0);
    size_t caps[] = { SIZE_MAX / 8 + 1, SIZE_MAX, SIZE_MAX / 2 };
    for (size_t k = 0; k < HANU_ARRAY_LEN(caps); k++) {
        size_t n = 0;
        quad_id next;
        CHECK_EQ(quad_scan(q, 0, 0, QUAD_LANES_ALL, out, NULL, caps[k], &n, &next), 0);
        CHECK_EQ(n, 100);
        CHECK(tq_fact_eq(&out[99], &f[99], 0xF));
    }
    quad_close(q);
}

/* The frame offset of the newest checkpoint: its slot is found by magic
 * ("QCKP", seq at +8, frame offset at +16) anywhere in the header region, so
 * that this also reads a version 1 file (slots at 64 and 128). */
static uint64_t newest_ckpt_frame(const uint8_t *b)
{
    uint64_t best = 0, seq = 0;
    for (size_t off = 64; off + 64 <= 4096; off += 64) {
        const uint8_t *s = b + off;
        if (hanu_get_u32(s + 4) == 0x504B4351u && hanu_get_u64(s + 8) >= seq) {
            seq = hanu_get_u64(s + 8);
            best = hanu_get_u64(s + 16);
        }
    }
    return best;
}

static void test_checkpoint_offset_wrap_is_refused(void)
{
    const char *p = path_in("wrap.quad");
    quad *q = open_small(p, 0);
    REQUIRE(q);
    static quad_fact f[200];
    for (int i = 0; i < 200; i++) f[i] = fact_of((uint64_t)i);
    REQUIRE(quad_append(q, f, 200, QUAD_BUFFERED, NULL, NULL) == 0);
    CHECK_EQ(quad_close(q), 0);
    size_t n;
    uint8_t *b = slurp(p, &n);
    REQUIRE(b);
    uint64_t frame = newest_ckpt_frame(b);
    REQUIRE(frame >= 4096 && frame < n);
    /* version 2: 40-byte header, body and header checksums; version 1:
     * 32-byte header, one checksum over [4, 32 + body) */
    int v2 = b[12] == 2;
    size_t hdr = v2 ? 40 : 32;
    uint32_t body = hanu_get_u32(b + frame + 8);
    uint64_t e = frame + hdr + 16;   /* the first chunk entry's payload offset */
    hanu_put_u64(b + e, UINT64_MAX - 16);   /* offset + length wraps past 2^64 */
    if (v2) {
        hanu_put_u32(b + frame + 32, hanu_checksum32(b + frame + 40, body));
        hanu_put_u32(b + frame, hanu_checksum32(b + frame + 4, 36));
    } else {
        hanu_put_u32(b + frame, hanu_checksum32(b + frame + 4, 28 + (size_t)body));
    }
    int fd = open(p, O_WRONLY | O_TRUNC);
    CHECK_EQ(hanu_pwrite_full(fd, b, n, 0), 0);
    close(fd);
    free(b);
    /* the checkpoint is refused; the full replay has every fact */
    q = open_small(p, 0);
    REQUIRE(q);
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK(st.recovered_frames > 0);
    quad_id ids[2] = { QUAD_ID(0, 0), QUAD_ID(3, 7) };
    quad_fact out[2];
    CHECK_EQ(quad_gather(q, 0, ids, 2, QUAD_LANES_ALL, out, NULL), 0);
    CHECK(tq_fact_eq(&out[1], &f[3 * 64 + 7], 0xF));
    quad_close(q);
}

static void test_failed_directory_fsync_fails_creation(void)
{
    const char *p = path_in("dirsync.quad");
    quad *q = NULL;
    quad_options o;
    quad_options_default(&o);
    o.io_backend = QUAD_IO_INLINE;
    /* fdatasync of the new header passes, the directory's fsync fails */
    atomic_store(&fail_dir_fsync, 1);
    CHECK_EQ(quad_open(p, &o, &q), HANU_ERR_IO);
    atomic_store(&fail_dir_fsync, 0);
    CHECK(q == NULL);
    CHECK_EQ(quad_open(p, &o, &q), 0);
    quad_close(q);
}

/* ---- 7. one owner ---- */

static void test_second_handle_is_refused(void)
{
    const char *p = path_in("owner.quad");
    quad *a = open_small(p, 0);
    REQUIRE(a);
    quad_options o;
    quad_options_default(&o);
    quad *b = NULL;
    CHECK_EQ(quad_open(p, &o, &b), HANU_ERR_BUSY);
    CHECK(strstr(quad_last_error(), "open in another handle") != NULL);
    o.flags = QUAD_RDONLY;
    CHECK_EQ(quad_open(p, &o, &b), HANU_ERR_BUSY);
    /* another process is refused as well */
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        quad *c = NULL;
        quad_options oc;
        quad_options_default(&oc);
        _exit(quad_open(p, &oc, &c) == HANU_ERR_BUSY ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(quad_close(a), 0);
    b = open_small(p, 0);
    CHECK(b != NULL);
    quad_close(b);
}

static void test_handle_refused_in_child_after_fork(void)
{
    const char *p = path_in("fork.quad");
    quad *q = open_small(p, 0);
    REQUIRE(q);
    append_one(q, 1, QUAD_DURABLE, 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        quad_fact f = fact_of(2), out;
        quad_id id = QUAD_ID(0, 0);
        int bad = 0;
        bad |= quad_append(q, &f, 1, QUAD_DURABLE, NULL, NULL) != HANU_ERR_INVALID;
        bad |= quad_retire(q, &id, 1, QUAD_DURABLE, NULL) != HANU_ERR_INVALID;
        bad |= quad_gather(q, 0, &id, 1, QUAD_LANES_ALL, &out, NULL) != HANU_ERR_INVALID;
        bad |= quad_sync(q) != HANU_ERR_INVALID;
        bad |= quad_checkpoint(q) != HANU_ERR_INVALID;
        bad |= quad_close(q) != HANU_ERR_INVALID;
        _exit(bad);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    append_one(q, 3, QUAD_DURABLE, 0);
    CHECK_EQ(quad_close(q), 0);
    q = open_small(p, 0);
    REQUIRE(q);
    CHECK_EQ(quad_epoch(q), 2);
    quad_close(q);
}

/* ---- 8. io_uring reads interrupted by signals ---- */

static void on_signal(int sig) { (void)sig; }
static _Atomic int uring_running;

static void *signal_storm(void *arg)
{
    pthread_t target = *(pthread_t *)arg;
    while (atomic_load(&uring_running)) {
        pthread_kill(target, SIGUSR1);
        usleep(20);
    }
    return NULL;
}

static void test_uring_reads_survive_signals(void)
{
    const char *p = path_in("uring.quad");
    quad_options o;
    quad_options_default(&o);
    o.io_backend = QUAD_IO_URING;
    o.cache_bytes = 4 << 20;
    quad *q = NULL;
    if (quad_open(p, &o, &q) != 0) { fprintf(stderr, "  io_uring unavailable here, skipped\n"); return; }
    enum { N = 1 << 17 };
    static quad_fact f[N], out[N];
    static quad_id ids[N];
    tq_entropy(f, N);   /* 4 MiB: every gather goes through the ring */
    quad_id first;
    REQUIRE(quad_append(q, f, N, QUAD_BUFFERED, &first, NULL) == 0);
    for (size_t i = 0; i < N; i++) ids[i] = quad_batch_id(first, 4096, i);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;   /* no SA_RESTART: waits return EINTR */
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t self = pthread_self(), th;
    atomic_store(&uring_running, 1);
    pthread_create(&th, NULL, signal_storm, &self);
    size_t bad = 0, errs = 0;
    for (int round = 0; round < 60; round++) {
        quad_cache_drop(q);
        memset(out, 0, sizeof out);
        if (quad_gather(q, 0, ids, N, QUAD_LANES_ALL, out, NULL) != 0) { errs++; continue; }
        for (size_t i = 0; i < N; i++) bad += !tq_fact_eq(&out[i], &f[i], 0xF);
        /* and from the cache it filled */
        if (quad_gather(q, 0, ids, N, QUAD_LANES_ALL, out, NULL) != 0) { errs++; continue; }
        for (size_t i = 0; i < N; i++) bad += !tq_fact_eq(&out[i], &f[i], 0xF);
    }
    atomic_store(&uring_running, 0);
    pthread_join(th, NULL);
    signal(SIGUSR1, SIG_DFL);
    CHECK_EQ(errs, 0);
    CHECK_EQ(bad, 0);
    quad_close(q);
}

/* ---- 8. one huge gather keeps memory near cache_bytes ---- */

static _Atomic int sampling;
static _Atomic size_t heap_peak;

static void *heap_sampler(void *arg)
{
    (void)arg;
    while (atomic_load(&sampling)) {
        struct mallinfo2 mi = mallinfo2();
        size_t used = mi.uordblks + mi.hblkhd;
        if (used > atomic_load(&heap_peak)) atomic_store(&heap_peak, used);
        usleep(200);
    }
    return NULL;
}

static void test_huge_gather_memory_bounded_by_cache(void)
{
    const char *p = path_in("mem.quad");
    quad_options o;
    quad_options_default(&o);
    o.io_backend = QUAD_IO_INLINE;
    o.cache_bytes = 1 << 20;
    quad *q = NULL;
    REQUIRE(quad_open(p, &o, &q) == 0);
    enum { N = 1 << 21 };
    quad_fact *f = malloc(N * sizeof *f);
    quad_id *ids = malloc(N * sizeof *ids);
    REQUIRE(f && ids);
    tq_entropy(f, N);   /* 64 MiB of payload */
    quad_id first;
    REQUIRE(quad_append(q, f, N / 2, QUAD_BUFFERED, &first, NULL) == 0);
    quad_id first2;
    REQUIRE(quad_append(q, f + N / 2, N / 2, QUAD_BUFFERED, &first2, NULL) == 0);
    for (size_t i = 0; i < N / 2; i++) {
        ids[i] = quad_batch_id(first, 4096, i);
        ids[N / 2 + i] = quad_batch_id(first2, 4096, i);
    }
    memset(f, 0, N * sizeof *f);   /* touched: the output buffer is not new memory */
    quad_cache_drop(q);
    struct mallinfo2 mi = mallinfo2();
    size_t base = mi.uordblks + mi.hblkhd;
    atomic_store(&heap_peak, base);
    atomic_store(&sampling, 1);
    pthread_t th;
    pthread_create(&th, NULL, heap_sampler, NULL);
    CHECK_EQ(quad_gather(q, 0, ids, N, QUAD_LANES_ALL, f, NULL), 0);
    atomic_store(&sampling, 0);
    pthread_join(th, NULL);
    size_t extra = atomic_load(&heap_peak) - base;
    fprintf(stderr, "  a %u-id gather with a 1 MiB cache held at most %zu KiB more heap\n",
            (unsigned)N, extra >> 10);
    CHECK(extra < (24u << 20));
    quad_close(q);
    free(f);
    free(ids);
}

/* QUAD_TEST_ONLY=name,name runs only those tests (to try one on older code). */
#define RUN_SEL(fn) do { const char *o_ = getenv("QUAD_TEST_ONLY"); \
    if (!o_ || strstr(o_, #fn)) RUN(fn); } while (0)

int main(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir("promises"));
    RUN_SEL(test_failed_sync_in_checkpoint_never_acknowledged);
    RUN_SEL(test_failed_checkpoint_then_sync_is_stopped);
    RUN_SEL(test_failed_leader_sync_freezes_durable_epoch);
    RUN_SEL(test_reopen_syncs_before_claiming_durable);
    RUN_SEL(test_damage_in_durable_log_is_refused);
    RUN_SEL(test_unsynced_damage_opens_without_salvage);
    RUN_SEL(test_failed_checkpoint_not_retried_per_commit);
    RUN_SEL(test_checkpoint_split_across_frames);
    RUN_SEL(test_scan_with_huge_cap);
    RUN_SEL(test_checkpoint_offset_wrap_is_refused);
    RUN_SEL(test_failed_directory_fsync_fails_creation);
    RUN_SEL(test_second_handle_is_refused);
    RUN_SEL(test_handle_refused_in_child_after_fork);
    RUN_SEL(test_uring_reads_survive_signals);
    RUN_SEL(test_huge_gather_memory_bounded_by_cache);
    TEST_DONE();
}
