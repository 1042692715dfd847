/*
 * test.h: the few macros unit tests use. A test program calls RUN(fn) for each
 * test function and ends with TEST_DONE(); a failed CHECK prints file:line and
 * marks the test failed, the program exits non-zero when any test failed.
 */
#ifndef HANU_TEST_H
#define HANU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

static int test_failed_count;
static int test_current_failed;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    test_current_failed = 1; } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { \
    fprintf(stderr, "  FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, _a, _b); \
    test_current_failed = 1; } } while (0)
#define REQUIRE(cond) do { if (!(cond)) { \
    fprintf(stderr, "  FAIL %s:%d: %s (fatal)\n", __FILE__, __LINE__, #cond); \
    test_current_failed = 1; return; } } while (0)

#define RUN(fn) do { test_current_failed = 0; fn(); \
    fprintf(stderr, "%s %s\n", test_current_failed ? "FAIL" : "ok  ", #fn); \
    if (test_current_failed) test_failed_count++; } while (0)
#define TEST_DONE() return test_failed_count ? 1 : 0

/* The directories test_tmpdir made: removed when the program ends with every test
   passed (kept after a failure, to look at), by the process that made them only (a
   forked child's exit must not remove its parent's). Without this every run left its
   stores behind: 2 GB in /var/tmp after a day of runs. */
static char test_tmpdirs[64][512];
static int test_ntmpdirs;
static pid_t test_tmpdir_owner;

static void test_tmpdir_cleanup(void)
{
    if (getpid() != test_tmpdir_owner || test_failed_count) return;
    for (int i = 0; i < test_ntmpdirs; i++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%.511s'", test_tmpdirs[i]);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", test_tmpdirs[i]);
    }
}

/* A fresh empty directory under $TMPDIR (or /tmp) for this test; caller frees nothing. */
static inline const char *test_tmpdir(const char *name)
{
    static char path[512];
    const char *base = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/hanudb-test-%d-%s", base ? base : "/tmp", (int)getpid(), name);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
    if (system(cmd) != 0) { perror("mkdir"); exit(2); }
    if (test_tmpdir_owner != getpid()) {   /* first call in this process */
        test_tmpdir_owner = getpid();
        test_ntmpdirs = 0;
        atexit(test_tmpdir_cleanup);
    }
    int known = 0;
    for (int i = 0; i < test_ntmpdirs; i++) known |= !strcmp(test_tmpdirs[i], path);
    if (!known && test_ntmpdirs < 64) snprintf(test_tmpdirs[test_ntmpdirs++], sizeof test_tmpdirs[0], "%s", path);
    return path;
}

#endif
