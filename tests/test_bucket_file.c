/*
 * test_bucket_file.c: the bucket interface on its file:/// backend: every operation's
 * exact outcome, key and URL checks, list order, counters by class, processes racing
 * put-if-absent and compare-and-swap (exactly one wins each round, no update lost),
 * injected failures retried without loss, and the fencing probe.
 */
#include "test.h"
#include <dirent.h>
#include "test_bucket.h"
#include <openssl/sha.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "bucket/bucket.h"

static char url[600];

static bucket *open_bucket(const char *name, const bucket_options *o)
{
    snprintf(url, sizeof url, "file://%s/objects", test_tmpdir(name));
    bucket *b = NULL;
    char err[256] = "";
    if (bucket_open(url, o, &b, err, sizeof err) != HANU_OK) fprintf(stderr, "bucket_open: %s\n", err);
    return b;
}

static void sha_hex(const char *s, char out[65])
{
    uint8_t h[32];
    SHA256((const uint8_t *)s, strlen(s), h);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static int get_string(bucket *b, const char *key, char *out, size_t cap)
{
    hanu_buf got = {0};
    int rc = bucket_get(b, key, &got, NULL, NULL, 0);
    if (rc == HANU_OK) snprintf(out, cap, "%.*s", (int)got.len, (const char *)got.data);
    hanu_buf_free(&got);
    return rc;
}

static void test_bucket_file_round_trip(void)
{
    bucket *b = open_bucket("round", NULL);
    REQUIRE(b);
    char err[256], hex[65], s[64];
    bucket_object_info info;
    CHECK_EQ(bucket_put(b, "dir/obj", "hello world", 11, &info, err, sizeof err), HANU_OK);
    sha_hex("hello world", hex);
    CHECK(strcmp(info.etag, hex) == 0);
    CHECK_EQ(info.size, 11);
    memset(&info, 0, sizeof info);
    CHECK_EQ(bucket_head(b, "dir/obj", &info, err, sizeof err), HANU_OK);
    CHECK(strcmp(info.etag, hex) == 0 && info.size == 11);
    CHECK_EQ(get_string(b, "dir/obj", s, sizeof s), HANU_OK);
    CHECK(strcmp(s, "hello world") == 0);

    hanu_buf got = {0};
    CHECK_EQ(bucket_get_range(b, "dir/obj", 6, 3, &got, err, sizeof err), HANU_OK);
    CHECK(got.len == 3 && memcmp(got.data, "wor", 3) == 0);
    got.len = 0;
    CHECK_EQ(bucket_get_range(b, "dir/obj", 8, 100, &got, err, sizeof err), HANU_OK);   /* clipped */
    CHECK(got.len == 3 && memcmp(got.data, "rld", 3) == 0);
    got.len = 0;
    CHECK_EQ(bucket_get_range(b, "dir/obj", 11, 1, &got, err, sizeof err), HANU_ERR_INVALID);
    CHECK(strcmp(err, "bucket: range at 11 is past the end of dir/obj (11 bytes)") == 0);
    CHECK_EQ(got.len, 0);

    CHECK_EQ(bucket_put(b, "dir/obj", "", 0, &info, err, sizeof err), HANU_OK);   /* replace, empty */
    CHECK_EQ(get_string(b, "dir/obj", s, sizeof s), HANU_OK);
    CHECK(strcmp(s, "") == 0);
    CHECK_EQ(bucket_delete(b, "dir/obj", err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_get(b, "dir/obj", &got, NULL, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK_EQ(bucket_head(b, "dir/obj", &info, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK_EQ(bucket_delete(b, "dir/obj", err, sizeof err), HANU_OK);   /* absent: still OK */
    CHECK_EQ(bucket_get_range(b, "nothing", 0, 1, &got, err, sizeof err), HANU_ERR_NOT_FOUND);

    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.class_a, 4);   /* put, put, delete, delete */
    CHECK_EQ(c.class_b, 9);   /* head, get, 3 ranges, get, then get, head and range of absent keys */
    CHECK_EQ(c.retries, 0);
    CHECK_EQ(c.bytes_up, 11);
    hanu_buf_free(&got);
    bucket_close(b);
}

static void test_bucket_file_conditional(void)
{
    bucket *b = open_bucket("cond", NULL);
    REQUIRE(b);
    char err[256], s[64];
    bucket_object_info first, second;
    CHECK_EQ(bucket_put_if_absent(b, "seg/000001", "one", 3, &first, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_put_if_absent(b, "seg/000001", "two", 3, NULL, err, sizeof err), HANU_ERR_EXISTS);
    CHECK(strcmp(err, "bucket: seg/000001 exists") == 0);
    CHECK_EQ(get_string(b, "seg/000001", s, sizeof s), HANU_OK);
    CHECK(strcmp(s, "one") == 0);

    CHECK_EQ(bucket_compare_and_swap(b, "lease", first.etag, "x", 1, NULL, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK_EQ(bucket_compare_and_swap(b, "seg/000001", NULL, "x", 1, NULL, err, sizeof err), HANU_ERR_INVALID);
    CHECK_EQ(bucket_compare_and_swap(b, "seg/000001", "0123", "x", 1, NULL, err, sizeof err), HANU_ERR_MISMATCH);
    CHECK_EQ(bucket_compare_and_swap(b, "seg/000001", first.etag, "three", 5, &second, err, sizeof err), HANU_OK);
    CHECK(strcmp(first.etag, second.etag) != 0);
    CHECK_EQ(bucket_compare_and_swap(b, "seg/000001", first.etag, "four", 4, NULL, err, sizeof err),
             HANU_ERR_MISMATCH);
    CHECK_EQ(get_string(b, "seg/000001", s, sizeof s), HANU_OK);
    CHECK(strcmp(s, "three") == 0);
    CHECK_EQ(bucket_probe_fencing(b, err, sizeof err), HANU_OK);
    bucket_close(b);
}

static void test_bucket_file_list(void)
{
    bucket *b = open_bucket("list", NULL);
    REQUIRE(b);
    const char *keys[] = { "b", "a/c/d", "ab", "a-b", "a/b", "a.b", "probe/x" };
    for (size_t i = 0; i < HANU_ARRAY_LEN(keys); i++)
        CHECK_EQ(bucket_put(b, keys[i], keys[i], strlen(keys[i]), NULL, NULL, 0), HANU_OK);
    char err[256];
    listed c = {0};
    CHECK_EQ(bucket_list(b, "", collect_key, &c, err, sizeof err), HANU_OK);
    const char *all[] = { "a-b", "a.b", "a/b", "a/c/d", "ab", "b", "probe/x" };   /* bytewise: - . / */
    CHECK_EQ(c.n, 7);
    for (int i = 0; i < 7 && i < c.n; i++) {
        CHECK(strcmp(c.keys[i], all[i]) == 0);
        CHECK_EQ(c.sizes[i], strlen(all[i]));
    }
    memset(&c, 0, sizeof c);
    CHECK_EQ(bucket_list(b, "a/", collect_key, &c, err, sizeof err), HANU_OK);
    CHECK(c.n == 2 && strcmp(c.keys[0], "a/b") == 0 && strcmp(c.keys[1], "a/c/d") == 0);
    memset(&c, 0, sizeof c);
    CHECK_EQ(bucket_list(b, "a", collect_key, &c, err, sizeof err), HANU_OK);
    CHECK_EQ(c.n, 5);
    memset(&c, 0, sizeof c);
    CHECK_EQ(bucket_list(b, "a/c/d", collect_key, &c, err, sizeof err), HANU_OK);
    CHECK(c.n == 1 && strcmp(c.keys[0], "a/c/d") == 0);
    memset(&c, 0, sizeof c);
    CHECK_EQ(bucket_list(b, "zz", collect_key, &c, err, sizeof err), HANU_OK);
    CHECK_EQ(c.n, 0);
    memset(&c, 0, sizeof c);
    c.stop_after = 2;
    CHECK_EQ(bucket_list(b, "", collect_key, &c, err, sizeof err), HANU_OK);
    CHECK_EQ(c.n, 2);
    bucket_counters k;
    bucket_get_counters(b, &k);
    CHECK_EQ(k.class_a, 7 + 6);
    CHECK_EQ(k.class_b, 0);
    bucket_close(b);
}

static void test_bucket_file_refuses_bad_input(void)
{
    bucket *b = open_bucket("bad", NULL);
    REQUIRE(b);
    char err[256], long_key[BUCKET_KEY_MAX + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = 0;
    const char *bad[] = { "", "/a", "a//b", ".x", "a/.x", "a/", "a b", "a\\b", "../x", long_key };
    for (size_t i = 0; i < HANU_ARRAY_LEN(bad); i++) {
        CHECK_EQ(bucket_put(b, bad[i], "v", 1, NULL, err, sizeof err), HANU_ERR_INVALID);
        CHECK_EQ(bucket_delete(b, bad[i], err, sizeof err), HANU_ERR_INVALID);
    }
    long_key[BUCKET_KEY_MAX] = 0;
    CHECK_EQ(bucket_put(b, long_key, "v", 1, NULL, err, sizeof err), HANU_ERR_INVALID);
    CHECK(strcmp(err, "bucket: key component longer than 255 bytes") == 0);
    long_key[200] = long_key[400] = '/';
    CHECK_EQ(bucket_put(b, long_key, "v", 1, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_list(b, "/", collect_key, &(listed){0}, err, sizeof err), HANU_ERR_INVALID);
    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.class_a, 1);   /* refused input sends nothing */
    bucket_close(b);

    bucket *x = NULL;
    CHECK_EQ(bucket_open("http://host/x", NULL, &x, err, sizeof err), HANU_ERR_INVALID);
    CHECK(strcmp(err, "bucket: URL must start with file:/// or s3://") == 0);
    CHECK_EQ(bucket_open("file://relative/x", NULL, &x, err, sizeof err), HANU_ERR_INVALID);
    CHECK(strcmp(err, "bucket: a file URL is file:///ABSOLUTE/PATH") == 0);
    CHECK_EQ(bucket_open("s3://ab", NULL, &x, err, sizeof err), HANU_ERR_INVALID);
    bucket_options o;
    bucket_options_default(&o);
    o.fail_rate = 0.7;
    o.timeout_rate = 0.3;
    CHECK_EQ(bucket_open("file:///tmp/x", &o, &x, err, sizeof err), HANU_ERR_INVALID);
    CHECK(x == NULL);
}

enum { RACERS = 6, ROUNDS = 25, INCREMENTS = 15 };

/* Each racer: put-if-absent on every round's key, then compare-and-swap from the same
   ETag on every round's second key, then increments of a counter by compare-and-swap. */
static void racer(int id, int *results)
{
    bucket *b = NULL;
    if (bucket_open(url, NULL, &b, NULL, 0) != HANU_OK) _exit(3);
    char key[64], value[64], init_etag[65];
    sha_hex("initial", init_etag);
    for (int r = 0; r < ROUNDS; r++) {
        snprintf(key, sizeof key, "race/absent-%02d", r);
        snprintf(value, sizeof value, "racer %d", id);
        results[(r * RACERS + id) * 2] = bucket_put_if_absent(b, key, value, strlen(value), NULL, NULL, 0);
        snprintf(key, sizeof key, "race/cas-%02d", r);
        results[(r * RACERS + id) * 2 + 1] =
            bucket_compare_and_swap(b, key, init_etag, value, strlen(value), NULL, NULL, 0);
    }
    for (int i = 0; i < INCREMENTS; i++) {
        for (;;) {
            hanu_buf got = {0};
            bucket_object_info info;
            if (bucket_get(b, "race/counter", &got, &info, NULL, 0) != HANU_OK) _exit(4);
            int n = atoi(got.len ? (const char *)got.data : "0");
            hanu_buf_free(&got);
            snprintf(value, sizeof value, "%d", n + 1);
            int rc = bucket_compare_and_swap(b, "race/counter", info.etag, value, strlen(value) + 1, NULL, NULL, 0);
            if (rc == HANU_OK) break;
            if (rc != HANU_ERR_MISMATCH) _exit(5);
        }
    }
    bucket_close(b);
    _exit(0);
}

static void test_bucket_file_processes_race(void)
{
    bucket *b = open_bucket("race", NULL);
    REQUIRE(b);
    char key[64];
    for (int r = 0; r < ROUNDS; r++) {
        snprintf(key, sizeof key, "race/cas-%02d", r);
        CHECK_EQ(bucket_put(b, key, "initial", 7, NULL, NULL, 0), HANU_OK);
    }
    CHECK_EQ(bucket_put(b, "race/counter", "0", 2, NULL, NULL, 0), HANU_OK);
    int *results = mmap(NULL, sizeof(int) * ROUNDS * RACERS * 2, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    REQUIRE(results != MAP_FAILED);
    int go[2];
    REQUIRE(pipe(go) == 0);
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0) _exit(2);   /* all start together when the pipe closes */
            racer(i, results);
        }
    }
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < RACERS; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int kind = 0; kind < 2; kind++) {
            int winners = 0, winner = -1, losers = 0;
            for (int i = 0; i < RACERS; i++) {
                int rc = results[(r * RACERS + i) * 2 + kind];
                if (rc == HANU_OK) winners++, winner = i;
                if (rc == (kind ? HANU_ERR_MISMATCH : HANU_ERR_EXISTS)) losers++;
            }
            CHECK_EQ(winners, 1);
            CHECK_EQ(losers, RACERS - 1);
            char want[32], s[64];
            snprintf(want, sizeof want, "racer %d", winner);
            snprintf(key, sizeof key, kind ? "race/cas-%02d" : "race/absent-%02d", r);
            CHECK_EQ(get_string(b, key, s, sizeof s), HANU_OK);
            CHECK(strcmp(s, want) == 0);
        }
    }
    char s[64];
    CHECK_EQ(get_string(b, "race/counter", s, sizeof s), HANU_OK);
    CHECK_EQ(atoi(s), RACERS * INCREMENTS);   /* no increment lost */
    munmap(results, sizeof(int) * ROUNDS * RACERS * 2);
    bucket_close(b);
}

static void test_bucket_file_injected_failures(void)
{
    bucket_options o;
    bucket_options_default(&o);
    o.fail_rate = 0.3;
    o.timeout_rate = 0.2;
    o.fail_seed = 42;
    o.max_attempts = 30;
    o.backoff_base_ms = 1;
    o.backoff_max_ms = 2;
    bucket *b = open_bucket("inject", &o);
    REQUIRE(b);
    char key[32], value[32], err[256];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "seg/%03d", i);
        snprintf(value, sizeof value, "segment %d", i);
        CHECK_EQ(bucket_put_if_absent(b, key, value, strlen(value), NULL, err, sizeof err), HANU_OK);
    }
    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK(c.retries > 10);                      /* half the requests fail at first */
    CHECK(c.class_a > 40);
    CHECK_EQ(bucket_put_if_absent(b, "seg/003", "another", 7, NULL, err, sizeof err), HANU_ERR_EXISTS);
    /* compare-and-swap chains: an answer lost after the swap resolves to OK on retry */
    bucket_object_info info;
    CHECK_EQ(bucket_put(b, "lease", "0", 1, &info, err, sizeof err), HANU_OK);
    for (int i = 1; i <= 20; i++) {
        snprintf(value, sizeof value, "%d", i);
        CHECK_EQ(bucket_compare_and_swap(b, "lease", info.etag, value, strlen(value), &info, err, sizeof err), HANU_OK);
    }
    CHECK_EQ(get_string(b, "lease", value, sizeof value), HANU_OK);
    CHECK(strcmp(value, "20") == 0);
    char s[64];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "seg/%03d", i);
        snprintf(value, sizeof value, "segment %d", i);
        CHECK_EQ(get_string(b, key, s, sizeof s), HANU_OK);
        CHECK(strcmp(s, value) == 0);
    }
    bucket_close(b);

    /* Without retries the failures reach the caller, each with its message. */
    o.max_attempts = 1;
    o.fail_rate = 0.5;
    o.timeout_rate = 0;
    b = open_bucket("inject1", &o);
    REQUIRE(b);
    int failed = 0, ok = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "k%d", i);
        int rc = bucket_put(b, key, "v", 1, NULL, err, sizeof err);
        if (rc == HANU_OK) ok++;
        else if (rc == HANU_ERR_IO && strcmp(err, "bucket: 503 Slow Down (injected)") == 0) failed++;
    }
    CHECK_EQ(ok + failed, 40);
    CHECK(failed > 5 && ok > 5);
    bucket_get_counters(b, &c);
    CHECK_EQ(c.retries, 0);
    bucket_close(b);
}

static void test_bucket_file_latency(void)
{
    bucket_options o;
    bucket_options_default(&o);
    o.latency_put_ms = 30;
    o.latency_get_ms = 20;
    bucket *b = open_bucket("latency", &o);
    REQUIRE(b);
    uint64_t t0 = hanu_now_ns();
    CHECK_EQ(bucket_put(b, "k", "v", 1, NULL, NULL, 0), HANU_OK);
    uint64_t t1 = hanu_now_ns();
    char s[8];
    CHECK_EQ(get_string(b, "k", s, sizeof s), HANU_OK);
    uint64_t t2 = hanu_now_ns();
    CHECK(t1 - t0 >= 30000000ull);   /* lower bounds only: a sleep never ends early */
    CHECK(t2 - t1 >= 20000000ull);
    bucket_close(b);
}

/* The root is opened once: a root removed, or moved away and replaced by another
   folder, fails every put and delete (no folder created, nothing acknowledged into
   the stranger); renamed back, it works again. */
static void test_bucket_file_root_fence(void)
{
    bucket_options o;
    bucket_options_default(&o);
    o.max_attempts = 1;   /* the refusal is retryable: one attempt shows it at once */
    bucket *b = open_bucket("fence", &o);
    REQUIRE(b);
    char root[600], away[640], err[512], s[16], path[700];
    snprintf(root, sizeof root, "%s", url + 7);
    snprintf(away, sizeof away, "%s-away", root);
    CHECK_EQ(bucket_put(b, "seg/1", "one", 3, NULL, err, sizeof err), HANU_OK);

    /* removed entirely: put fails and nothing recreates the root */
    REQUIRE(rename(root, away) == 0);
    CHECK_EQ(bucket_put_if_absent(b, "seg/2", "two", 3, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK(strstr(err, "was moved or replaced") != NULL);
    CHECK_EQ(bucket_put(b, "seg/2", "two", 3, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK_EQ(bucket_compare_and_swap(b, "seg/1", "x", "two", 3, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK_EQ(bucket_delete(b, "seg/1", err, sizeof err), HANU_ERR_IO);
    struct stat st;
    CHECK(stat(root, &st) != 0 && errno == ENOENT);

    /* another, empty folder at the path: still refused, and it stays empty */
    REQUIRE(mkdir(root, 0755) == 0);
    CHECK_EQ(bucket_put_if_absent(b, "seg/2", "two", 3, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK(strstr(err, "another folder is there now") != NULL);
    snprintf(path, sizeof path, "%s/seg", root);
    CHECK(stat(path, &st) != 0 && errno == ENOENT);
    REQUIRE(rmdir(root) == 0);

    /* renamed back: works again, into the very folder the chain is in */
    REQUIRE(rename(away, root) == 0);
    CHECK_EQ(bucket_put_if_absent(b, "seg/2", "two", 3, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(get_string(b, "seg/1", s, sizeof s), HANU_OK);
    CHECK(strcmp(s, "one") == 0);
    listed l = {0};
    CHECK_EQ(bucket_list(b, "seg/", collect_key, &l, err, sizeof err), HANU_OK);
    CHECK(l.n == 2 && strcmp(l.keys[1], "seg/2") == 0);

    /* deleted for good: the put needing a new folder says the root is gone, retryable */
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    REQUIRE(system(cmd) == 0);
    CHECK_EQ(bucket_put(b, "fresh/1", "x", 1, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK(strstr(err, "was moved or replaced (No such file or directory)") != NULL);
    CHECK(stat(root, &st) != 0 && errno == ENOENT);
    bucket_close(b);

    /* create_root = 0 (audit, restore): a missing root is NOT_FOUND, and not created */
    o.create_root = 0;
    char missing[700];
    snprintf(missing, sizeof missing, "file://%s/nothing-here", test_tmpdir("fence-missing"));
    bucket *x = NULL;
    CHECK_EQ(bucket_open(missing, &o, &x, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK(strstr(err, "does not exist") != NULL);
    CHECK(stat(missing + 7, &st) != 0 && errno == ENOENT);
}

/* A file URL's path is absolute, without "." or ".." components. */
static void test_bucket_file_refuses_dot_paths(void)
{
    const char *bad[] = { "file:///tmp/a/../b", "file:///tmp/./b", "file:///tmp/..", "file:///../tmp" };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bucket *x = NULL;
        CHECK_EQ(bucket_open(bad[i], NULL, &x, err, sizeof err), HANU_ERR_INVALID);
        CHECK(strstr(err, "component: spell the bucket's folder without") != NULL);
        CHECK(x == NULL);
    }
}

/* The fencing probe refuses a store that ignores either precondition, names which,
   and leaves no probe object behind. */
static void test_bucket_file_probe_refuses_ignored_conditions(void)
{
    static const struct { int ignore; const char *want; } cases[] = {
        { BUCKET_IGNORE_IF_NONE_MATCH, "does not honour put-if-absent (If-None-Match: *)" },
        { BUCKET_IGNORE_IF_MATCH, "does not honour compare-and-swap (If-Match)" },
        { BUCKET_IGNORE_IF_NONE_MATCH | BUCKET_IGNORE_IF_MATCH, "does not honour put-if-absent" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bucket_options o;
        bucket_options_default(&o);
        o.ignore_conditions = cases[i].ignore;
        bucket *b = open_bucket("probe-ignored", &o);
        REQUIRE(b);
        char err[512] = "";
        CHECK_EQ(bucket_probe_fencing(b, err, sizeof err), HANU_ERR_UNSUPPORTED);
        CHECK(strstr(err, cases[i].want) != NULL);
        listed l = {0};
        CHECK_EQ(bucket_list(b, "probe/", collect_key, &l, err, sizeof err), HANU_OK);
        CHECK_EQ(l.n, 0);
        bucket_close(b);
    }
}

static int guard_calls, guard_answer;

static int count_guard(void *ctx)
{
    (void)ctx;
    guard_calls++;
    return guard_answer;
}

/* A guarded put asks its guard once, after the temporary file is written, and a
   refusal leaves nothing: no object, no temporary file, STOPPED (not retried). */
static void test_bucket_file_guarded_put(void)
{
    bucket *b = open_bucket("guard", NULL);
    REQUIRE(b);
    char err[256];
    guard_calls = 0;
    guard_answer = 0;
    CHECK_EQ(bucket_put_if_absent_guarded(b, "segments/1", "abc", 3, count_guard, NULL, NULL, err, sizeof err),
             HANU_ERR_STOPPED);
    CHECK_EQ(guard_calls, 1);
    CHECK(strstr(err, "called off by its guard") != NULL);
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(b, "segments/1", &got, NULL, err, sizeof err), HANU_ERR_NOT_FOUND);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/segments", bucket_url(b) + 7);
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *e; d && (e = readdir(d));) entries += e->d_name[0] != '.';
    if (d) closedir(d);
    CHECK_EQ(entries, 0);
    guard_answer = 1;
    CHECK_EQ(bucket_put_if_absent_guarded(b, "segments/1", "abc", 3, count_guard, NULL, NULL, err, sizeof err),
             HANU_OK);
    CHECK_EQ(guard_calls, 2);
    CHECK_EQ(bucket_get(b, "segments/1", &got, NULL, err, sizeof err), HANU_OK);
    CHECK(got.len == 3 && !memcmp(got.data, "abc", 3));
    hanu_buf_free(&got);
    bucket_close(b);
}

int main(void)
{
    RUN(test_bucket_file_round_trip);
    RUN(test_bucket_file_conditional);
    RUN(test_bucket_file_list);
    RUN(test_bucket_file_refuses_bad_input);
    RUN(test_bucket_file_processes_race);
    RUN(test_bucket_file_injected_failures);
    RUN(test_bucket_file_latency);
    RUN(test_bucket_file_root_fence);
    RUN(test_bucket_file_refuses_dot_paths);
    RUN(test_bucket_file_probe_refuses_ignored_conditions);
    RUN(test_bucket_file_guarded_put);
    TEST_DONE();
}
