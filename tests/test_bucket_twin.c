/*
 * test_bucket_twin.c: twin buckets (bucket.h) over two real file:/// buckets: a put
 * lands in both, one side failing (the file backend's injected 503s) fails the put,
 * reads fall back to the other side, a list is the union, a collision on either
 * side fences, counters add up per side, and re-mirroring after one side's folder
 * was deleted entirely restores every object byte for byte.
 */
#include "test.h"
#include "test_bucket.h"
#include "bucket/bucket.h"

static char dir[2][512], urls[2][1100];

/* Two fresh folders; opts[i] (may be NULL) for side i. */
static bucket *open_twin(const char *name, const bucket_options *o0, const bucket_options *o1)
{
    for (int i = 0; i < 2; i++) {
        char n[64];
        snprintf(n, sizeof n, "%s-%d", name, i);
        snprintf(dir[i], sizeof dir[i], "%.500s", test_tmpdir(n));
        snprintf(urls[i], sizeof urls[i], "file://%s/objects", dir[i]);
    }
    bucket *a = NULL, *b = NULL, *t = NULL;
    char err[256] = "";
    if (bucket_open(urls[0], o0, &a, err, sizeof err) != HANU_OK ||
        bucket_open(urls[1], o1, &b, err, sizeof err) != HANU_OK ||
        bucket_twin_join(a, b, &t, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "open twin: %s\n", err);
        return NULL;
    }
    return t;
}

/* The bytes of key on one side, compared with want. */
static int side_has(bucket *t, int side, const char *key, const char *want)
{
    hanu_buf got = {0};
    int rc = bucket_get(bucket_twin_side(t, side), key, &got, NULL, NULL, 0);
    int same = rc == HANU_OK && got.len == strlen(want) && memcmp(got.data, want, got.len) == 0;
    hanu_buf_free(&got);
    return rc == HANU_ERR_NOT_FOUND ? 0 : same ? 1 : -1;
}

static void test_twin_put_reaches_both(void)
{
    bucket *t = open_twin("both", NULL, NULL);
    REQUIRE(t);
    CHECK(bucket_twin_side(t, 0) && bucket_twin_side(t, 1) && !bucket_twin_side(bucket_twin_side(t, 0), 0));
    char err[512] = "";
    bucket_object_info info;
    CHECK_EQ(bucket_put(t, "seg/1", "one", 3, &info, err, sizeof err), HANU_OK);
    CHECK_EQ(info.size, 3);
    CHECK_EQ(bucket_put_if_absent(t, "seg/2", "two", 3, NULL, err, sizeof err), HANU_OK);
    for (int side = 0; side < 2; side++) {
        CHECK_EQ(side_has(t, side, "seg/1", "one"), 1);
        CHECK_EQ(side_has(t, side, "seg/2", "two"), 1);
    }
    /* Compare-and-swap with the twin's ETag (the first side's) reaches both. */
    CHECK_EQ(bucket_compare_and_swap(t, "seg/1", info.etag, "uno", 3, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_compare_and_swap(t, "seg/1", info.etag, "eins", 4, NULL, err, sizeof err), HANU_ERR_MISMATCH);
    CHECK_EQ(side_has(t, 0, "seg/1", "uno"), 1);
    CHECK_EQ(side_has(t, 1, "seg/1", "uno"), 1);
    /* Counters: one put and one put-if-absent and one CAS per side is 3 class-A each
       (the second CAS was refused by the first side only); the twin's are the sum. */
    bucket_counters c0, c1, ct;
    bucket_get_counters(bucket_twin_side(t, 0), &c0);
    bucket_get_counters(bucket_twin_side(t, 1), &c1);
    bucket_get_counters(t, &ct);
    CHECK_EQ(c0.class_a, 4);
    CHECK_EQ(c1.class_a, 3);
    CHECK_EQ(ct.class_a, c0.class_a + c1.class_a);
    CHECK_EQ(ct.class_b, c0.class_b + c1.class_b);
    CHECK_EQ(bucket_delete(t, "seg/2", err, sizeof err), HANU_OK);
    CHECK_EQ(side_has(t, 0, "seg/2", "two"), 0);
    CHECK_EQ(side_has(t, 1, "seg/2", "two"), 0);
    CHECK_EQ(bucket_probe_fencing(t, err, sizeof err), HANU_OK);
    bucket_close(t);
}

static int guard_asks;
static int guard_once(void *ctx)   /* says yes to the first ask only (a lease lost meanwhile) */
{
    (void)ctx;
    return ++guard_asks == 1;
}

/* A guarded put asks the guard again on each side, right before the object appears
   there: a lease lost after the twin's first ask puts the segment in neither bucket. */
static void test_twin_guard_is_asked_by_each_side(void)
{
    bucket *t = open_twin("guard", NULL, NULL);
    REQUIRE(t);
    char err[512] = "";
    guard_asks = 0;
    CHECK_EQ(bucket_put_if_absent_guarded(t, "seg/1", "one", 3, guard_once, NULL, NULL, err, sizeof err),
             HANU_ERR_STOPPED);
    CHECK_EQ(guard_asks, 3);   /* the twin's ask, then each side's */
    CHECK_EQ(side_has(t, 0, "seg/1", "one"), 0);
    CHECK_EQ(side_has(t, 1, "seg/1", "one"), 0);
    CHECK(strstr(err, "called off by its guard") != NULL);
    bucket_close(t);
}

static void test_twin_one_side_failing_fails_the_put(void)
{
    bucket_options bad;
    bucket_options_default(&bad);
    bad.fail_rate = 0.999999;   /* every request answered 503 (injected), one attempt */
    bad.max_attempts = 1;
    bucket *t = open_twin("failing", NULL, &bad);
    REQUIRE(t);
    char err[512] = "";
    CHECK_EQ(bucket_put(t, "seg/1", "one", 3, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK(strstr(err, "second bucket") != NULL);
    CHECK_EQ(bucket_put_if_absent(t, "seg/2", "two", 3, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK_EQ(bucket_delete(t, "seg/1", err, sizeof err), HANU_ERR_IO);
    bucket_close(t);

    /* The same with the first side failing; reads then come from the second. */
    t = open_twin("failing-first", &bad, NULL);
    REQUIRE(t);
    CHECK_EQ(bucket_put(t, "seg/1", "one", 3, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK(strstr(err, "first bucket") != NULL);
    CHECK_EQ(side_has(t, 1, "seg/1", "one"), 1);   /* the healthy side got it: no undo */
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(t, "seg/1", &got, NULL, err, sizeof err), HANU_OK);
    CHECK(got.len == 3 && memcmp(got.data, "one", 3) == 0);
    got.len = 0;
    CHECK_EQ(bucket_get_range(t, "seg/1", 1, 5, &got, err, sizeof err), HANU_OK);
    CHECK(got.len == 2 && memcmp(got.data, "ne", 2) == 0);
    bucket_object_info info;
    CHECK_EQ(bucket_head(t, "seg/1", &info, err, sizeof err), HANU_OK);
    CHECK_EQ(info.size, 3);
    hanu_buf_free(&got);
    bucket_close(t);
}

static void test_twin_reads_fall_back_and_lists_unite(void)
{
    bucket *t = open_twin("fallback", NULL, NULL);
    REQUIRE(t);
    char err[512] = "";
    CHECK_EQ(bucket_put(bucket_twin_side(t, 0), "k/a", "A", 1, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_put(bucket_twin_side(t, 1), "k/b", "BB", 2, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_put(t, "k/c", "CCC", 3, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_put(bucket_twin_side(t, 1), "other", "x", 1, NULL, err, sizeof err), HANU_OK);
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(t, "k/b", &got, NULL, err, sizeof err), HANU_OK);   /* only on the second */
    CHECK(got.len == 2 && memcmp(got.data, "BB", 2) == 0);
    got.len = 0;
    CHECK_EQ(bucket_get(t, "k/none", &got, NULL, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK_EQ(got.len, 0);
    hanu_buf_free(&got);
    listed l = {0};
    CHECK_EQ(bucket_list(t, "k/", collect_key, &l, err, sizeof err), HANU_OK);
    CHECK_EQ(l.n, 3);
    CHECK(!strcmp(l.keys[0], "k/a") && !strcmp(l.keys[1], "k/b") && !strcmp(l.keys[2], "k/c"));
    CHECK(l.sizes[0] == 1 && l.sizes[1] == 2 && l.sizes[2] == 3);
    bucket_close(t);
}

static void test_twin_collision_on_either_side_fences(void)
{
    for (int side = 0; side < 2; side++) {
        bucket *t = open_twin(side ? "collide-1" : "collide-0", NULL, NULL);
        REQUIRE(t);
        char err[512] = "";
        /* Another writer put segment 7 into one of the buckets only. */
        CHECK_EQ(bucket_put(bucket_twin_side(t, side), "seg/7", "theirs", 6, NULL, err, sizeof err), HANU_OK);
        CHECK_EQ(bucket_put_if_absent(t, "seg/7", "ours", 4, NULL, err, sizeof err), HANU_ERR_FENCED);
        CHECK(strstr(err, "seg/7") != NULL);
        CHECK_EQ(side_has(t, side, "seg/7", "theirs"), 1);   /* never replaced */
        /* On both sides: a plain collision, what the sealer reads back and stops on. */
        CHECK_EQ(bucket_put(bucket_twin_side(t, 1 - side), "seg/8", "theirs", 6, NULL, err, sizeof err), HANU_OK);
        CHECK_EQ(bucket_put(bucket_twin_side(t, side), "seg/8", "theirs", 6, NULL, err, sizeof err), HANU_OK);
        CHECK_EQ(bucket_put_if_absent(t, "seg/8", "ours", 4, NULL, err, sizeof err), HANU_ERR_EXISTS);
        /* Our own bytes on one side (an earlier put that landed there only) count as put. */
        CHECK_EQ(bucket_put(bucket_twin_side(t, side), "seg/9", "ours", 4, NULL, err, sizeof err), HANU_OK);
        CHECK_EQ(bucket_put_if_absent(t, "seg/9", "ours", 4, NULL, err, sizeof err), HANU_OK);
        CHECK_EQ(side_has(t, 1 - side, "seg/9", "ours"), 1);
        bucket_close(t);
    }
}

static void test_twin_remirror_restores_a_deleted_folder(void)
{
    bucket *t = open_twin("remirror", NULL, NULL);
    REQUIRE(t);
    char err[512] = "", key[64], body[64];
    enum { N = 40 };
    uint64_t segment_bytes = 0;
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "segments/%020d", i + 1);
        snprintf(body, sizeof body, "segment body %d %0*d", i, i, 0);
        segment_bytes += strlen(body);
        CHECK_EQ(bucket_put_if_absent(t, key, body, strlen(body), NULL, err, sizeof err), HANU_OK);
    }
    CHECK_EQ(bucket_put(t, "snapshots/m1", "manifest", 8, NULL, err, sizeof err), HANU_OK);
    /* The second bucket's folder goes entirely: the open twin refuses to write into a
       root that is gone; a new start (as serve's) creates it, then an object lands
       there only. */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/objects'", dir[1]);
    REQUIRE(system(cmd) == 0);
    CHECK_EQ(bucket_put(bucket_twin_side(t, 1), "snapshots/m2", "manifest 2", 10, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK(strstr(err, "was moved or replaced") != NULL);
    bucket_close(t);
    bucket *a = NULL, *b = NULL;
    REQUIRE(bucket_open(urls[0], NULL, &a, err, sizeof err) == HANU_OK);
    REQUIRE(bucket_open(urls[1], NULL, &b, err, sizeof err) == HANU_OK);
    REQUIRE(bucket_twin_join(a, b, &t, err, sizeof err) == HANU_OK);
    CHECK_EQ(bucket_put(bucket_twin_side(t, 1), "snapshots/m2", "manifest 2", 10, NULL, err, sizeof err), HANU_OK);
    /* Reads still work, from whichever side has the object. */
    CHECK_EQ(side_has(t, 1, "segments/00000000000000000003", "x"), 0);
    bucket_twin_stats st;
    int rc = bucket_twin_remirror(t, "", &st, err, sizeof err);
    if (rc != HANU_OK) fprintf(stderr, "  remirror: %s\n", err);
    CHECK_EQ(rc, HANU_OK);
    CHECK_EQ(st.listed[0], N + 1);
    CHECK_EQ(st.listed[1], 1);
    CHECK_EQ(st.copied_to[1], N + 1);
    CHECK_EQ(st.copied_to[0], 1);
    CHECK_EQ(st.differ, 0);
    CHECK_EQ(st.failed, 0);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "segments/%020d", i + 1);
        snprintf(body, sizeof body, "segment body %d %0*d", i, i, 0);
        CHECK_EQ(side_has(t, 1, key, body), 1);
        CHECK_EQ(side_has(t, 0, key, body), 1);
    }
    CHECK_EQ(side_has(t, 1, "snapshots/m1", "manifest"), 1);
    CHECK_EQ(side_has(t, 0, "snapshots/m2", "manifest 2"), 1);
    CHECK_EQ(st.bytes_copied, segment_bytes + 8 + 10);
    /* A second run finds nothing to do. */
    CHECK_EQ(bucket_twin_remirror(t, "", &st, err, sizeof err), HANU_OK);
    CHECK_EQ(st.copied_to[0] + st.copied_to[1], 0);
    CHECK_EQ(st.listed[0], N + 2);
    CHECK_EQ(st.listed[1], N + 2);
    /* Same key, different sizes: reported, left alone. */
    CHECK_EQ(bucket_put(bucket_twin_side(t, 1), "snapshots/m1", "longer manifest", 15, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_twin_remirror(t, "snapshots/", &st, err, sizeof err), HANU_OK);
    CHECK_EQ(st.differ, 1);
    CHECK(!strcmp(st.first_problem, "snapshots/m1"));
    CHECK_EQ(side_has(t, 0, "snapshots/m1", "manifest"), 1);
    /* No twin: refused. */
    CHECK_EQ(bucket_twin_remirror(bucket_twin_side(t, 0), "", &st, err, sizeof err), HANU_ERR_INVALID);
    bucket_close(t);
}

static void test_twin_open_refuses_one_url_twice(void)
{
    bucket *t = NULL;
    char err[256] = "";
    CHECK_EQ(bucket_twin_open("file:///tmp/x", "file:///tmp/x", NULL, &t, err, sizeof err), HANU_ERR_INVALID);
    CHECK(t == NULL && strstr(err, "same") != NULL);
    CHECK_EQ(bucket_twin_open("file:///tmp/x", "nope://y", NULL, &t, err, sizeof err), HANU_ERR_INVALID);
    CHECK(t == NULL);
}

int main(void)
{
    RUN(test_twin_put_reaches_both);
    RUN(test_twin_guard_is_asked_by_each_side);
    RUN(test_twin_one_side_failing_fails_the_put);
    RUN(test_twin_reads_fall_back_and_lists_unite);
    RUN(test_twin_collision_on_either_side_fences);
    RUN(test_twin_remirror_restores_a_deleted_folder);
    RUN(test_twin_open_refuses_one_url_twice);
    TEST_DONE();
}
