/*
 * test_store_promises.c: the store keeps every promise it makes, also across
 * crashes and failed syncs. Each test reproduces a defect found on an earlier
 * version (it failed there) and checks the exact outcome.
 *
 * Crashes are real: a child process does the work and ends with _exit (a process
 * crash: what it wrote is in the page cache, its buffers are gone); a power loss
 * is built by cutting the unsynced bytes from the files. fdatasync is interposed
 * by this program (the store's calls resolve to the definition below), to fail
 * once as Linux does after a writeback error, or to stall a background sync.
 */
#include "test.h"
#include "store/store_internal.h"
#include "log/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

/* ---- fdatasync interposition ---- */

/* The next fdatasync of the file at fail_sync_path reports EIO (once): other
   threads sync other files meanwhile (the next file, meta/txn). */
static _Atomic int fail_next_sync;
static char fail_sync_path[700];

static int fd_is(int fd, const char *path)
{
    char link[64], got[700];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, got, sizeof got - 1);
    if (n < 0) return 0;
    got[n] = '\0';
    return strcmp(got, path) == 0;
}

static void arm_sync_failure(const char *dir, const char *log_file)
{
    char rel[700];
    snprintf(rel, sizeof rel, "%s/log/%s", dir, log_file);
    if (!realpath(rel, fail_sync_path)) snprintf(fail_sync_path, sizeof fail_sync_path, "%s", rel);
    atomic_store(&fail_next_sync, 1);
}
static _Atomic int stall_next_bg_sync;    /* the next one from another thread waits 100 ms */
static _Atomic int bg_sync_stalled;
static pthread_t main_thread;
static _Atomic int fail_next_fsync;       /* the next fsync of fail_fsync_path (a directory) reports EIO */
static char fail_fsync_path[700];

int fsync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (atomic_load(&fail_next_fsync) && fd_is(fd, fail_fsync_path) && atomic_exchange(&fail_next_fsync, 0)) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

/* While set, fdatasync from other threads waits (a slow device), for at most 3 s;
   hold_timed_out says a sync had to give up waiting. */
static _Atomic int hold_bg_syncs, hold_timed_out;

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (!pthread_equal(pthread_self(), main_thread)) {
        int waited = 0;
        while (atomic_load(&hold_bg_syncs) && waited < 3000) { usleep(1000); waited++; }
        if (waited >= 3000) atomic_store(&hold_timed_out, 1);
    }
    if (!pthread_equal(pthread_self(), main_thread) && atomic_exchange(&stall_next_bg_sync, 0)) {
        atomic_store(&bg_sync_stalled, 1);
        usleep(100000);
    }
    if (atomic_load(&fail_next_sync) && fd_is(fd, fail_sync_path) && atomic_exchange(&fail_next_sync, 0)) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

/* ---- helpers ---- */

static store *open_with(const char *dir, int prealloc, char *err)
{
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.prealloc = prealloc;
    o.file_size = 1 << 20;
    o.lazy_sync_ms = 60000;          /* writes nobody waits for stay unsynced */
    o.commit_window_us = 0;
    o.background_compaction = 0;
    o.quiet = 1;
    store *s = NULL;
    if (store_open(&o, &s, err, 512) != HANU_OK) {
        fprintf(stderr, "  open %s: %s\n", dir, err);
        return NULL;
    }
    return s;
}

static int put(store *s, const char *k, const char *v, uint64_t *txn)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t = 0;
    int rc = store_write(s, 0, &op, 1, STORE_COND_NONE, 0, &t, NULL);
    if (txn) *txn = t;
    return rc;
}

static int del(store *s, const char *k)
{
    store_op op = { STORE_DELETE, k, strlen(k), NULL, 0 };
    uint64_t t;
    return store_write(s, 0, &op, 1, STORE_COND_NONE, 0, &t, NULL);
}

/* The value of k as a string ("" when not found), and its token. */
static const char *get(store *s, const char *k, uint64_t *token)
{
    static char out[256];
    hanu_buf v = {0};
    uint64_t t = 0;
    out[0] = '\0';
    if (store_get(s, 0, k, strlen(k), &v, &t) == HANU_OK)
        snprintf(out, sizeof out, "%.*s", (int)v.len, (const char *)v.data);
    if (token) *token = t;
    hanu_buf_free(&v);
    return out;
}

/* Runs fn in a child that then crashes (_exit without closing the store). */
static int in_crashing_child(void (*fn)(const char *dir, int fd), const char *dir, uint64_t *out)
{
    int p[2];
    if (pipe(p) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        main_thread = pthread_self();
        fn(dir, p[1]);
        _exit(0);
    }
    close(p[1]);
    uint64_t v = 0;
    ssize_t n = read(p[0], &v, sizeof v);
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    if (out) *out = v;
    return n == (ssize_t)sizeof v && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void report(int fd, uint64_t v) { if (write(fd, &v, sizeof v) != sizeof v) _exit(3); }

/* ---- defect 1: compaction and unsynced writes ---- */

/* k=v1 synced in file 1; k=v2 applied but not written; file 1 compacted; crash. */
static void child_overwrite_then_compact(const char *dir, int fd)
{
    char err[512];
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    if (!s) _exit(2);
    if (put(s, "k", "v1", NULL) || store_sync(s) || store_rotate(s) || store_wait_log_complete(s)) _exit(2);
    if (put(s, "k", "v2", NULL)) _exit(2);
    char cerr[512];
    int rc = store_compact(s, 1, cerr, sizeof cerr);
    report(fd, (uint64_t)rc);
}

static void test_compaction_keeps_value_an_unsynced_write_replaces(void)
{
    char err[512];
    const char *dir = test_tmpdir("floor-put");
    uint64_t rc;
    REQUIRE(in_crashing_child(child_overwrite_then_compact, dir, &rc) == 0);
    CHECK_EQ(rc, HANU_OK);
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "k", NULL), "v1") == 0);   /* was: not found, neither value */
    store_close(s);
}

/* k=v0 in file 1, an acknowledged delete in file 2, k=v2 not written; file 2
   compacted alone; crash. (Each rotation's sync is awaited: frames appended while
   it is owed are written by the commit thread once it is done, and v2 must stay
   unwritten.) */
static void child_delete_then_compact(const char *dir, int fd)
{
    char err[512];
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    if (!s) _exit(2);
    if (put(s, "k", "v0", NULL) || store_sync(s) || store_rotate(s)) _exit(2);
    if (del(s, "k") || store_sync(s) || store_rotate(s) || store_wait_log_complete(s)) _exit(2);
    if (put(s, "k", "v2", NULL)) _exit(2);
    char cerr[512];
    report(fd, (uint64_t)store_compact_file(s, 2, cerr, sizeof cerr));
}

static void test_compaction_keeps_tombstone_an_unsynced_write_replaces(void)
{
    char err[512];
    const char *dir = test_tmpdir("floor-del");
    uint64_t rc;
    REQUIRE(in_crashing_child(child_delete_then_compact, dir, &rc) == 0);
    CHECK_EQ(rc, HANU_OK);
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "k", NULL), "") == 0);   /* was: v0, a deleted value back */
    store_close(s);
}

/* In the oldest file: k=v1 and its acknowledged delete, then k=v9 not written;
   the oldest file compacted; crash. The put is kept (v9 may be lost), so the
   delete that hides it must be kept too (found by the crash-state checker). */
static void child_oldest_tombstone(const char *dir, int fd)
{
    char err[512], cerr[512];
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    if (!s) _exit(2);
    if (put(s, "k", "v1", NULL) || del(s, "k") || store_sync(s) || store_rotate(s) || store_wait_log_complete(s)) _exit(2);
    if (put(s, "k", "v9", NULL)) _exit(2);
    report(fd, (uint64_t)store_compact_file(s, 1, cerr, sizeof cerr));
}

static void test_oldest_file_keeps_tombstone_of_a_kept_put(void)
{
    char err[512];
    const char *dir = test_tmpdir("floor-oldest");
    uint64_t rc;
    REQUIRE(in_crashing_child(child_oldest_tombstone, dir, &rc) == 0);
    CHECK_EQ(rc, HANU_OK);
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "k", NULL), "") == 0);   /* was: v1, a deleted value back */
    store_close(s);
}

/* Once the durable mark settles, the same records do go. */
static void test_compaction_drops_what_a_durable_write_replaces(void)
{
    char err[512], cerr[512];
    const char *dir = test_tmpdir("floor-ok");
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    REQUIRE(s);
    CHECK_EQ(put(s, "k", "v1", NULL), HANU_OK);
    CHECK_EQ(put(s, "gone", "x", NULL), HANU_OK);
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(put(s, "k", "v2", NULL), HANU_OK);
    CHECK_EQ(del(s, "gone"), HANU_OK);
    CHECK_EQ(store_sync(s), HANU_OK);
    store_stats before, after;
    store_get_stats(s, &before);
    CHECK_EQ(store_compact(s, 1, cerr, sizeof cerr), HANU_OK);
    store_get_stats(s, &after);
    CHECK(after.disk_bytes < before.disk_bytes);
    pthread_mutex_lock(&s->mu);
    store_file *f1 = store_file_get(s, 1);
    uint64_t f1_records = f1 ? f1->record_bytes : 999;
    pthread_mutex_unlock(&s->mu);
    CHECK_EQ(f1_records, 0);   /* both records of file 1 were superseded durably */
    store_close(s);
    s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "k", NULL), "v2") == 0);
    CHECK(strcmp(get(s, "gone", NULL), "") == 0);
    store_close(s);
}

/* After a failed fdatasync nothing is compacted, online or in the background. */
static void test_no_compaction_after_failed_sync(void)
{
    char err[512], cerr[512];
    const char *dir = test_tmpdir("floor-failed");
    store *s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    REQUIRE(s);
    for (int i = 0; i < 50; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        CHECK_EQ(put(s, k, "old", NULL), HANU_OK);
    }
    CHECK_EQ(store_sync(s), HANU_OK);
    CHECK_EQ(store_rotate(s), HANU_OK);
    for (int i = 0; i < 50; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        CHECK_EQ(put(s, k, "new", NULL), HANU_OK);
    }
    arm_sync_failure(dir, "000002.log");
    CHECK_EQ(store_sync(s), HANU_ERR_STOPPED);
    CHECK(store_failed(s));
    store_stats st;
    store_get_stats(s, &st);
    CHECK_EQ(store_compact(s, 1, cerr, sizeof cerr), HANU_ERR_STOPPED);
    CHECK(strstr(cerr, "failed fdatasync") != NULL);
    store_stats st2;
    store_get_stats(s, &st2);
    CHECK_EQ(st2.compactions, st.compactions);
    CHECK_EQ(st2.durable_txn, st.durable_txn);   /* frozen */
    store_close(s);
    /* Every acknowledged (synced) value is there after a restart. */
    s = open_with(dir, LOG_PREALLOC_ZEROFILL, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "k7", NULL), "old") == 0 || strcmp(get(s, "k7", NULL), "new") == 0);
    store_close(s);
}

/* A merge whose directory fsync fails keeps the files it replaced. */
static void test_merge_keeps_sources_when_dir_fsync_fails(void)
{
    char err[512], cerr[512], path[700];
    const char *dir = test_tmpdir("merge-dirsync");
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    for (int f = 0; f < 4; f++) {   /* files 1..4, small, sealed */
        char k[16];
        snprintf(k, sizeof k, "k%d", f);
        CHECK_EQ(put(s, k, "v", NULL), HANU_OK);
        CHECK_EQ(store_rotate(s), HANU_OK);
    }
    CHECK_EQ(store_sync(s), HANU_OK);
    for (uint32_t f = 1; f <= 4; f++) CHECK_EQ(store_compact_file(s, f, cerr, sizeof cerr), HANU_OK);
    usleep(100000);   /* the next file is prepared: its own directory fsync is done */
    store_stats st;
    store_get_stats(s, &st);
    char logdir[700];
    snprintf(logdir, sizeof logdir, "%s/log", dir);
    if (!realpath(logdir, fail_fsync_path)) snprintf(fail_fsync_path, sizeof fail_fsync_path, "%s", logdir);
    atomic_store(&fail_next_fsync, 1);   /* the merge's fsync of log/ after its rename */
    int rc = store_compact(s, 1, cerr, sizeof cerr);
    atomic_store(&fail_next_fsync, 0);
    CHECK(rc != HANU_OK);
    int present = 0;
    for (int f = 1; f <= 4; f++) {
        snprintf(path, sizeof path, "%s/log/%06d.log", dir, f);
        present += access(path, F_OK) == 0;
    }
    CHECK_EQ(present, 4);   /* was: the sources unlinked after the failed fsync */
    store_stats st2;
    store_get_stats(s, &st2);
    CHECK_EQ(st2.compactions, st.compactions + 1);   /* it was the merge that failed */
    store_close(s);
    s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    for (int f = 0; f < 4; f++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", f);
        CHECK(strcmp(get(s, k, NULL), "v") == 0);
    }
    store_close(s);
}

/* ---- defect 2: one thread syncs the active file ---- */

static _Atomic uint64_t reported_durable;
static void on_durable_record(void *ctx, uint64_t txn, int failed)
{
    (void)ctx;
    if (!failed && txn > atomic_load(&reported_durable)) atomic_store(&reported_durable, txn);
}

static int append_one(log_writer *w, uint64_t *txn)
{
    hanu_buf b = {0};
    log_location loc;
    int rc = log_frame_begin(&b);
    if (rc == HANU_OK) rc = log_frame_add(&b, LOG_OP_PUT, 0, "k", 1, "v", 1);
    if (rc == HANU_OK) rc = log_writer_append(w, &b, txn, &loc, NULL);
    hanu_buf_free(&b);
    return rc;
}

/* A log writer on DIR/log (1 MiB files) whose durable reports go to reported_durable. */
static log_writer *open_log_in(const char *dir, enum log_prealloc prealloc)
{
    char logdir[600];
    snprintf(logdir, sizeof logdir, "%s/log", dir);
    if (mkdir(logdir, 0755) != 0) return NULL;
    atomic_store(&reported_durable, 0);
    log_options o = { .dir = logdir, .file_size = 1 << 20, .prealloc = prealloc, .on_durable = on_durable_record };
    log_writer *w = NULL;
    return log_writer_open(&o, 1, LOG_FILE_HEADER_SIZE, 1, &w) == HANU_OK ? w : NULL;
}

/* A rotation's sync used to race the commit thread's on the same file: the error
   went to one of them, the other's fdatasync returned 0 and published the txn. */
static void test_rotation_sync_error_is_never_acknowledged(void)
{
    const char *dir = test_tmpdir("sync-race");
    log_writer *w = open_log_in(dir, LOG_PREALLOC_APPEND);
    REQUIRE(w);
    uint64_t t1, t2;
    CHECK_EQ(append_one(w, &t1), HANU_OK);
    CHECK_EQ(log_writer_sync(w), HANU_OK);
    CHECK_EQ(log_writer_durable_txn(w), t1);
    usleep(100000);   /* the next file is prepared (its own fdatasync) */
    atomic_store(&bg_sync_stalled, 0);
    atomic_store(&stall_next_bg_sync, 1);
    CHECK_EQ(append_one(w, &t2), HANU_OK);   /* written now: the commit thread syncs it */
    for (int i = 0; i < 200 && !atomic_load(&bg_sync_stalled); i++) usleep(1000);
    CHECK(atomic_load(&bg_sync_stalled));
    arm_sync_failure(dir, "000001.log");     /* the writeback of t2's page failed */
    CHECK_EQ(log_writer_rotate(w, NULL), HANU_ERR_STOPPED);
    usleep(200000);
    CHECK(log_writer_failed(w));
    CHECK_EQ(log_writer_durable_txn(w), t1);  /* was: t2, acknowledged after the EIO */
    CHECK_EQ(atomic_load(&reported_durable), t1);
    log_writer_close(w);
}

/* The first frame at a file offset, 0 when the bytes there are zeros (nothing written). */
static uint32_t frame_len_at(const char *dir, const char *file, uint64_t off)
{
    char path[700];
    snprintf(path, sizeof path, "%s/log/%s", dir, file);
    int fd = open(path, O_RDONLY);
    uint8_t h[4] = {0};
    if (fd >= 0 && pread(fd, h, 4, (off_t)off) != 4) memset(h, 0, 4);
    if (fd >= 0) close(fd);
    return hanu_get_u32(h);
}

/* A rotation used to wait for the sealed file's fdatasync on the writer thread (a
   snapshot's 3 ms pause of the event loop). It returns at once now; the frames that
   follow stay off the new file until the old one is whole on disk, and when that
   sync fails none of them is ever written or acknowledged. */
static void test_rotation_does_not_wait_for_the_device(void)
{
    for (int failing = 0; failing < 2; failing++) {
        const char *dir = test_tmpdir(failing ? "rotate-fail" : "rotate-fast");
        log_writer *w = open_log_in(dir, LOG_PREALLOC_FALLOCATE);
        REQUIRE(w);
        uint64_t t1, t2, t3;
        CHECK_EQ(append_one(w, &t1), HANU_OK);
        CHECK_EQ(log_writer_sync(w), HANU_OK);
        usleep(100000);   /* the next file is prepared (its own fdatasync) */
        atomic_store(&hold_timed_out, 0);
        atomic_store(&hold_bg_syncs, 1);
        CHECK_EQ(append_one(w, &t2), HANU_OK);
        CHECK_EQ(log_writer_flush(w), HANU_OK);
        if (failing) arm_sync_failure(dir, "000001.log");
        uint32_t sealed = 0;
        CHECK_EQ(log_writer_rotate(w, &sealed), HANU_OK);
        CHECK(!atomic_load(&hold_timed_out));            /* was: waited until the device answered */
        CHECK_EQ(sealed, 1);
        CHECK_EQ(log_writer_complete_below(w), 1);        /* file 1's sync is owed */
        CHECK_EQ(append_one(w, &t3), HANU_OK);
        CHECK_EQ(log_writer_flush(w), HANU_OK);
        CHECK_EQ(log_writer_written_txn(w), t2);          /* t3 is held in memory */
        CHECK_EQ(frame_len_at(dir, "000002.log", LOG_FILE_HEADER_SIZE), 0);
        CHECK_EQ(log_writer_durable_txn(w), t1);
        atomic_store(&hold_bg_syncs, 0);
        if (!failing) {
            CHECK_EQ(log_writer_wait_durable(w, t3), HANU_OK);
            CHECK_EQ(log_writer_complete_below(w), 2);
            CHECK(frame_len_at(dir, "000002.log", LOG_FILE_HEADER_SIZE) > 0);
            /* The sealed file's preallocated megabyte after its seal went back (was: kept). */
            char p1[700];
            snprintf(p1, sizeof p1, "%s/log/000001.log", dir);
            struct stat st;
            CHECK(stat(p1, &st) == 0 && st.st_size == 1 << 20);
            CHECK((uint64_t)st.st_blocks * 512 <= 64 << 10);
        } else {
            CHECK_EQ(log_writer_wait_durable(w, t3), HANU_ERR_STOPPED);
            CHECK(log_writer_failed(w));
            CHECK_EQ(log_writer_durable_txn(w), t1);
            CHECK_EQ(atomic_load(&reported_durable), t1);
            CHECK_EQ(frame_len_at(dir, "000002.log", LOG_FILE_HEADER_SIZE), 0);   /* never written */
        }
        log_writer_close(w);
    }
}

/* ---- defect 4: txns never repeat ---- */

static void child_write_seen_then_crash(const char *dir, int fd)
{
    char err[512];
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    if (!s) _exit(2);
    uint64_t t;
    if (put(s, "k", "a", &t) || store_sync(s)) _exit(2);
    if (put(s, "k", "b", NULL)) _exit(2);
    uint64_t seen;
    get(s, "k", &seen);     /* a reader saw b's token before it was durable */
    report(fd, seen);
}

/* Cuts log/000001.log after its first n frames: a power loss lost the rest. */
static int cut_after_frames(const char *dir, int n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/log/000001.log", dir);
    int fd = open(path, O_RDWR);
    if (fd < 0) return -1;
    uint64_t off = LOG_FILE_HEADER_SIZE;
    for (int i = 0; i < n; i++) {
        uint8_t h[4];
        if (pread(fd, h, 4, (off_t)off) != 4) { close(fd); return -1; }
        off += LOG_FRAME_HEADER_SIZE + hanu_get_u32(h);
    }
    int rc = ftruncate(fd, (off_t)off);
    close(fd);
    return rc;
}

static void test_tokens_never_repeat_after_power_loss(void)
{
    char err[512];
    const char *dir = test_tmpdir("txn-reuse");
    uint64_t seen;
    REQUIRE(in_crashing_child(child_write_seen_then_crash, dir, &seen) == 0);
    REQUIRE(seen > 0);
    REQUIRE(cut_after_frames(dir, 1) == 0);   /* b's frame was never synced */
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    uint64_t tok;
    CHECK(strcmp(get(s, "k", &tok), "a") == 0);
    CHECK(tok < seen);
    uint64_t t;
    CHECK_EQ(put(s, "k", "c", &t), HANU_OK);
    CHECK(t > seen);   /* was: t == seen, so a CompareSet with b's token won */
    store_op cas = { STORE_SET, "k", 1, "d", 1 };
    uint64_t t2, cur;
    CHECK_EQ(store_write(s, 0, &cas, 1, STORE_COND_TOKEN, seen, &t2, &cur), HANU_ERR_MISMATCH);
    store_close(s);
    /* A clean stop leaves no gap: the next start goes on at the next txn. */
    s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    uint64_t t3;
    CHECK_EQ(put(s, "k", "e", &t3), HANU_OK);
    CHECK_EQ(t3, t + 1);
    store_close(s);
    /* And after another crash the new numbering survives recovery and compaction. */
    s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    char cerr[512];
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(store_compact(s, 1, cerr, sizeof cerr), HANU_OK);
    store_close(s);
    s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "k", &tok), "e") == 0);
    CHECK_EQ(tok, t3);
    store_close(s);
}

/* A damaged reservation is refused, never guessed. */
static void test_damaged_reservation_refused(void)
{
    char err[512], path[600];
    const char *dir = test_tmpdir("txn-damaged");
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    CHECK_EQ(put(s, "k", "a", NULL), HANU_OK);
    store_close(s);
    snprintf(path, sizeof path, "%s/meta/txn", dir);
    int fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    CHECK(pwrite(fd, "\xff", 1, 9) == 1);
    close(fd);
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.quiet = 1;
    CHECK_EQ(store_open(&o, &s, err, sizeof err), HANU_ERR_CORRUPT);
}

/* ---- torn tail or damage: the durable mark decides ---- */

static void child_synced_then_unsynced(const char *dir, int fd)
{
    char err[512];
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    if (!s) _exit(2);
    if (put(s, "six", "6", NULL) || store_sync(s)) _exit(2);
    if (put(s, "seven", "7", NULL)) _exit(2);   /* written, never synced */
    report(fd, 1);
}

/* Flips one byte of frame n (0-based) of the given file. */
static int flip_in_frame(const char *dir, uint32_t file_id, int n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/log/%06u.log", dir, file_id);
    int fd = open(path, O_RDWR);
    if (fd < 0) return -1;
    uint64_t off = LOG_FILE_HEADER_SIZE;
    for (int i = 0; i < n; i++) {
        uint8_t h[4];
        if (pread(fd, h, 4, (off_t)off) != 4) { close(fd); return -1; }
        off += LOG_FRAME_HEADER_SIZE + hanu_get_u32(h);
    }
    uint8_t c;
    int rc = pread(fd, &c, 1, (off_t)off + LOG_FRAME_HEADER_SIZE + 3) == 1 ? 0 : -1;
    c ^= 0x40;
    if (rc == 0 && pwrite(fd, &c, 1, (off_t)off + LOG_FRAME_HEADER_SIZE + 3) != 1) rc = -1;
    close(fd);
    return rc;
}

static void test_torn_tail_opens_damage_refused(void)
{
    char err[512];
    const char *dir = test_tmpdir("mark");
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    for (int i = 0; i < 5; i++) CHECK_EQ(put(s, "k", "v", NULL), HANU_OK);
    store_close(s);                         /* durable mark: txn 5, in file 1 */
    REQUIRE(in_crashing_child(child_synced_then_unsynced, dir, NULL) == 0);   /* file 2 */
    char copy[700];
    snprintf(copy, sizeof copy, "rm -rf '%s.copy' && cp -a '%s' '%s.copy'", dir, dir, dir);
    REQUIRE(system(copy) == 0);
    /* Garbage in the unsynced frame (txn 7): a torn tail, opens without salvage. */
    REQUIRE(flip_in_frame(dir, 2, 1) == 0);
    s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "six", NULL), "6") == 0);
    CHECK(strcmp(get(s, "seven", NULL), "") == 0);
    store_close(s);
    char q[700];
    snprintf(q, sizeof q, "%s/quarantine", dir);
    struct stat st;
    CHECK(stat(q, &st) == 0);               /* the torn bytes were kept */
    /* Damage in a frame at or below the durable mark (txn 5): refused. */
    snprintf(copy, sizeof copy, "%s.copy", dir);
    REQUIRE(flip_in_frame(copy, 1, 4) == 0);
    store_options o;
    store_options_default(&o);
    o.data_dir = copy;
    o.quiet = 1;
    o.background_compaction = 0;
    CHECK_EQ(store_open(&o, &s, err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "log/000001.log") != NULL);
}

/* A trailing file with no readable frame: moved to quarantine/ when it holds any
   byte, removed when it is all zeros (a file prepared ahead). */
static void test_trailing_unreadable_file_quarantined(void)
{
    char err[512], path[700];
    const char *dir = test_tmpdir("trailing");
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    CHECK_EQ(put(s, "k", "v", NULL), HANU_OK);
    store_close(s);
    uint8_t junk[200], zeros[200] = {0};
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 37 + 11);
    snprintf(path, sizeof path, "%s/log/000098.log", dir);
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fwrite(zeros, 1, sizeof zeros, f) == sizeof zeros && fclose(f) == 0);
    snprintf(path, sizeof path, "%s/log/000099.log", dir);
    f = fopen(path, "wb");
    REQUIRE(f && fwrite(junk, 1, sizeof junk, f) == sizeof junk && fclose(f) == 0);
    s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    CHECK(strcmp(get(s, "k", NULL), "v") == 0);
    store_close(s);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/quarantine/000099.log", dir);
    CHECK(access(path, F_OK) == 0);
    snprintf(path, sizeof path, "%s/quarantine/000098.log", dir);
    CHECK(access(path, F_OK) != 0);
}

/* ---- smaller ones ---- */

static void test_batch_delete_of_missing_key(void)
{
    char err[512];
    const char *dir = test_tmpdir("batch-del");
    store *s = open_with(dir, LOG_PREALLOC_APPEND, err);
    REQUIRE(s);
    store_op one = { STORE_DELETE, "nope", 4, NULL, 0 };
    uint64_t t;
    CHECK_EQ(store_write(s, 0, &one, 1, STORE_COND_NONE, 0, &t, NULL), HANU_OK);
    CHECK_EQ(store_write(s, 0, &one, 1, STORE_COND_EXISTS, 0, &t, NULL), HANU_ERR_NOT_FOUND);
    store_close(s);
}

static void test_dot_names_refused(void)
{
    CHECK(!store_db_name_valid(".", 1));
    CHECK(!store_db_name_valid("..", 2));
    CHECK(!store_db_name_valid("...", 3));
    CHECK(store_db_name_valid("a.b", 3));
    CHECK(store_db_name_valid(".hidden", 7));
}

int main(void)
{
    main_thread = pthread_self();
    RUN(test_compaction_keeps_value_an_unsynced_write_replaces);
    RUN(test_compaction_keeps_tombstone_an_unsynced_write_replaces);
    RUN(test_oldest_file_keeps_tombstone_of_a_kept_put);
    RUN(test_compaction_drops_what_a_durable_write_replaces);
    RUN(test_no_compaction_after_failed_sync);
    RUN(test_merge_keeps_sources_when_dir_fsync_fails);
    RUN(test_rotation_sync_error_is_never_acknowledged);
    RUN(test_rotation_does_not_wait_for_the_device);
    RUN(test_tokens_never_repeat_after_power_loss);
    RUN(test_damaged_reservation_refused);
    RUN(test_torn_tail_opens_damage_refused);
    RUN(test_trailing_unreadable_file_quarantined);
    RUN(test_batch_delete_of_missing_key);
    RUN(test_dot_names_refused);
    TEST_DONE();
}
