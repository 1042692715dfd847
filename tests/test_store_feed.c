/*
 * test_store_feed.c: the change feed delivers every record once, in txn order,
 * across rotations and compactions; a registered watermark that stays behind
 * keeps what it has not consumed, through compaction and restart.
 */
#include "test.h"
#include "store/store.h"
#include "log/log.h"

#include <fcntl.h>
#include <pthread.h>

static store *open_at(const char *dir, char *err)
{
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.file_size = 1 << 20;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    if (store_open(&o, &s, err, 512) != HANU_OK) {
        fprintf(stderr, "  open: %s\n", err);
        return NULL;
    }
    return s;
}

static int put(store *s, uint32_t db, const char *k, const char *v, uint64_t *txn)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t;
    int rc = store_write(s, db, &op, 1, STORE_COND_NONE, 0, &t, NULL);
    if (txn) *txn = t;
    return rc;
}

/* What the feed delivered, one line per entry: "txn op db key=value". */
typedef struct seen {
    char text[16384];
    size_t len;
    uint64_t last_txn;
    int out_of_order;
    int stop_after;          /* stop after this many entries (0: never) */
    int entries;
} seen;

static int collect(void *ctx, const store_change *c)
{
    seen *s = ctx;
    if (c->txn < s->last_txn) s->out_of_order = 1;
    s->last_txn = c->txn;
    s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len, "%llu %u %u %.*s=%.*s\n",
                               (unsigned long long)c->txn, c->op, c->db, (int)c->key_len,
                               (const char *)c->key, (int)c->value_len, (const char *)c->value);
    s->entries++;
    return s->stop_after && s->entries >= s->stop_after;
}

static size_t drain(store_feed *f, seen *out)
{
    size_t total = 0, n;
    do {
        CHECK_EQ(store_feed_next(f, 3, collect, out, &n), HANU_OK);
        total += n;
    } while (n > 0);
    return total;
}

static void test_feed_in_txn_order_across_files(void)
{
    char err[512];
    const char *dir = test_tmpdir("feed-order");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint64_t t1, t2, tdb;
    CHECK_EQ(put(s, 0, "a", "1", &t1), HANU_OK);
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(store_db_create(s, "users", 5, STORE_DB_KV, &tdb), HANU_OK);
    uint32_t users;
    CHECK_EQ(store_db_lookup(s, "users", 5, &users), HANU_OK);
    store_op batch[2] = { { STORE_SET, "b", 1, "2", 1 }, { STORE_DELETE, "a", 1, NULL, 0 } };
    CHECK_EQ(store_write(s, 0, batch, 2, STORE_COND_NONE, 0, &t2, NULL), HANU_OK);
    CHECK_EQ(put(s, users, "alice", "{}", NULL), HANU_OK);
    CHECK_EQ(store_wait_log_complete(s), HANU_OK);   /* until then the new file's frames are held */
    CHECK_EQ(store_flush(s), HANU_OK);
    store_feed *f;
    CHECK_EQ(store_feed_open(s, 1, &f), HANU_OK);
    seen got = {0};
    CHECK_EQ(drain(f, &got), 4);
    char want[512];
    /* A create record carries the kind byte (STORE_DB_KV = 1). */
    snprintf(want, sizeof want, "1 1 0 a=1\n2 3 %u users=\001\n3 1 0 b=2\n3 2 0 a=\n4 1 %u alice={}\n", users, users);
    CHECK(strcmp(got.text, want) == 0);
    if (strcmp(got.text, want) != 0) fprintf(stderr, "  got:\n%s  want:\n%s", got.text, want);
    CHECK_EQ(store_feed_position(f), 5);
    /* A buffered write is delivered once it is in the file. */
    CHECK_EQ(put(s, 0, "c", "3", NULL), HANU_OK);
    hanu_buf v = {0};
    uint64_t tok;
    CHECK_EQ(store_get(s, 0, "c", 1, &v, &tok), HANU_OK);   /* read from the pending buffer */
    CHECK(v.len == 1 && v.data[0] == '3' && tok == 5);
    hanu_buf_free(&v);
    size_t n;
    got = (seen){0};
    CHECK_EQ(store_feed_next(f, 10, collect, &got, &n), HANU_OK);
    CHECK_EQ(n, 0);   /* the read did not write it */
    CHECK_EQ(store_flush(s), HANU_OK);
    CHECK_EQ(store_feed_next(f, 10, collect, &got, &n), HANU_OK);
    CHECK_EQ(n, 1);
    CHECK(strcmp(got.text, "5 1 0 c=3\n") == 0);
    /* A feed may start anywhere, and a callback may stop it after a record. */
    store_feed *g;
    CHECK_EQ(store_feed_open(s, 3, &g), HANU_OK);
    got = (seen){ .stop_after = 1 };
    CHECK_EQ(store_feed_next(g, 10, collect, &got, &n), HANU_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(store_feed_position(g), 4);
    store_feed_close(g);
    store_feed_close(f);
    CHECK_EQ(store_wait_durable(s, 5), HANU_OK);
    CHECK(store_durable_txn(s) >= 5);
    store_close(s);
}

static void test_watermark_behind_keeps_records(void)
{
    char err[512], cerr[512];
    const char *dir = test_tmpdir("feed-floor");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint64_t w;
    CHECK_EQ(store_watermark_register(s, "index", &w), HANU_OK);
    CHECK_EQ(w, 0);
    CHECK_EQ(store_watermark_register(s, "Bad Name", &w), HANU_ERR_INVALID);
    for (int i = 0; i < 20; i++) CHECK_EQ(put(s, 0, "k", i % 2 ? "odd" : "even", NULL), HANU_OK);
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(put(s, 0, "k", "last", NULL), HANU_OK);
    CHECK_EQ(store_sync(s), HANU_OK);
    CHECK_EQ(store_floor(s), 0);
    CHECK_EQ(store_compact(s, 1, cerr, sizeof cerr), HANU_OK);
    store_close(s);
    /* After a restart too, the watermark still holds the floor at 0. */
    s = open_at(dir, err);
    REQUIRE(s);
    store_watermark list[4];
    CHECK_EQ(store_watermark_list(s, list, 4), 1);
    CHECK(strcmp(list[0].name, "index") == 0 && list[0].txn == 0);
    CHECK_EQ(store_compact(s, 1, cerr, sizeof cerr), HANU_OK);
    store_feed *f;
    CHECK_EQ(store_feed_open(s, 1, &f), HANU_OK);
    seen got = {0};
    CHECK_EQ(drain(f, &got), 21);   /* every superseded record is still there */
    CHECK(!got.out_of_order);
    store_feed_close(f);
    /* The projection caught up: now compaction drops what is superseded. */
    CHECK_EQ(store_watermark_advance(s, "index", 21), HANU_OK);
    CHECK_EQ(store_watermark_advance(s, "index", 3), HANU_OK);   /* never moves back */
    CHECK_EQ(store_watermark_list(s, list, 4), 1);
    CHECK_EQ(list[0].txn, 21);
    CHECK_EQ(store_floor(s), 21);
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(store_compact(s, 1, cerr, sizeof cerr), HANU_OK);
    CHECK_EQ(store_feed_open(s, 1, &f), HANU_OK);
    got = (seen){0};
    CHECK_EQ(drain(f, &got), 1);
    CHECK(strcmp(got.text, "21 1 0 k=last\n") == 0);
    store_feed_close(f);
    CHECK_EQ(store_watermark_drop(s, "index"), HANU_OK);
    CHECK_EQ(store_watermark_drop(s, "index"), HANU_ERR_NOT_FOUND);
    store_close(s);
}

/* A compaction between two reads of a cursor: nothing delivered twice or lost. */
static void test_feed_survives_compaction_midway(void)
{
    char err[512], cerr[512];
    const char *dir = test_tmpdir("feed-midway");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint64_t w;
    CHECK_EQ(store_watermark_register(s, "sealer", &w), HANU_OK);
    char k[16];
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof k, "k%d", i);
        CHECK_EQ(put(s, 0, k, "v", NULL), HANU_OK);
        if (i % 3 == 2) CHECK_EQ(store_rotate(s), HANU_OK);
    }
    CHECK_EQ(store_sync(s), HANU_OK);
    store_feed *f;
    CHECK_EQ(store_feed_open(s, 1, &f), HANU_OK);
    seen got = {0};
    size_t n;
    CHECK_EQ(store_feed_next(f, 4, collect, &got, &n), HANU_OK);
    CHECK_EQ(n, 4);
    CHECK_EQ(store_compact(s, 1, cerr, sizeof cerr), HANU_OK);   /* merges files 1..3 */
    CHECK_EQ(drain(f, &got), 6);
    CHECK_EQ(got.entries, 10);
    CHECK(!got.out_of_order);
    CHECK(strstr(got.text, "4 1 0 k3=v\n5 1 0 k4=v\n") != NULL);
    store_feed_close(f);
    store_close(s);
}

static void test_damaged_watermarks_refused(void)
{
    char err[512], path[600];
    const char *dir = test_tmpdir("feed-damaged");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint64_t w;
    CHECK_EQ(store_watermark_register(s, "index", &w), HANU_OK);
    store_close(s);
    snprintf(path, sizeof path, "%s/meta/watermarks", dir);
    int fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    CHECK(pwrite(fd, "X", 1, 14) == 1);
    close(fd);
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.quiet = 1;
    CHECK_EQ(store_open(&o, &s, err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "meta/watermarks") != NULL);
}

/* Watermarks moved from several threads at once (an indexer's commit, the sealer, a
   snapshot registering its own and dropping it): the file is saved outside the store
   lock, and every save and registration must still succeed (they share the file's
   temporary: a registration once lost its rename to an advance, "I/O error"), and
   the file read at the next open holds the last values. */
typedef struct wm_thread {
    store *s;
    const char *name;
    int rounds, failures;
} wm_thread;

static void *advance_many(void *p)
{
    wm_thread *t = p;
    for (int i = 1; i <= t->rounds; i++) t->failures += store_watermark_advance(t->s, t->name, (uint64_t)i) != HANU_OK;
    return NULL;
}

static void *register_and_drop(void *p)
{
    wm_thread *t = p;
    uint64_t w;
    for (int i = 0; i < t->rounds; i++) {
        t->failures += store_watermark_register(t->s, t->name, &w) != HANU_OK;
        t->failures += store_watermark_drop(t->s, t->name) != HANU_OK;
    }
    return NULL;
}

static void test_watermarks_saved_from_many_threads(void)
{
    char err[512];
    const char *dir = test_tmpdir("feed-wm-threads");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint64_t w;
    REQUIRE(store_watermark_register(s, "index", &w) == HANU_OK);
    REQUIRE(store_watermark_register(s, "sealer", &w) == HANU_OK);
    wm_thread t[3] = { { s, "index", 300, 0 }, { s, "sealer", 300, 0 }, { s, "snapshot", 150, 0 } };
    pthread_t th[3];
    for (int i = 0; i < 3; i++) REQUIRE(pthread_create(&th[i], NULL, i < 2 ? advance_many : register_and_drop, &t[i]) == 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK_EQ(t[0].failures + t[1].failures + t[2].failures, 0);
    store_close(s);
    s = open_at(dir, err);
    REQUIRE(s);
    store_watermark list[8];
    size_t n = store_watermark_list(s, list, 8);
    CHECK_EQ(n, 2);
    for (size_t i = 0; i < n && i < 8; i++) CHECK_EQ(list[i].txn, 300);
    store_close(s);
}

/* A callback that stops on the first entry of a batch still gets the whole batch:
   a stop takes effect after the record, as store.h says (a sealer relies on it). */
static void test_stop_inside_a_record_delivers_all_of_it(void)
{
    char err[512];
    const char *dir = test_tmpdir("feed-stop");
    store *s = open_at(dir, err);
    REQUIRE(s);
    store_op ops[3] = {
        { STORE_SET, "a", 1, "1", 1 }, { STORE_SET, "b", 1, "2", 1 }, { STORE_DELETE, "c", 1, NULL, 0 },
    };
    uint64_t t1, t2;
    REQUIRE(store_write(s, 0, ops, 3, STORE_COND_NONE, 0, &t1, NULL) == HANU_OK);
    REQUIRE(put(s, 0, "d", "4", &t2) == HANU_OK);
    REQUIRE(store_flush(s) == HANU_OK);
    store_feed *f;
    REQUIRE(store_feed_open(s, t1, &f) == HANU_OK);
    static seen got;
    memset(&got, 0, sizeof got);
    got.stop_after = 1;
    size_t n = 0;
    CHECK_EQ(store_feed_next(f, 10, collect, &got, &n), HANU_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(got.entries, 3);
    CHECK_EQ(store_feed_position(f), t1 + 1);
    got.stop_after = 0;
    CHECK_EQ(store_feed_next(f, 10, collect, &got, &n), HANU_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(got.entries, 4);
    CHECK(strstr(got.text, "=4\n") != NULL);
    store_feed_close(f);
    store_close(s);
}

/* The indexer's filter (issue 24): a feed filtered to some databases delivers exactly
   their puts and deletes and every create and drop, skips the rest without a callback,
   and its position moves past the skipped records (a watermark following it too). */
static uint32_t wanted_db;
static int want_one(void *ctx, uint32_t db)
{
    (void)ctx;
    return db == wanted_db;
}

static void test_filtered_feed_skips_other_databases(void)
{
    char err[512];
    const char *dir = test_tmpdir("feed-filter");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint64_t tc, tk, t;
    REQUIRE(store_db_create(s, "coll", 4, STORE_DB_COLLECTION, &tc) == HANU_OK);
    REQUIRE(store_db_create(s, "kv", 2, STORE_DB_KV, &tk) == HANU_OK);
    uint32_t coll, kv;
    REQUIRE(store_db_lookup(s, "coll", 4, &coll) == HANU_OK);
    REQUIRE(store_db_lookup(s, "kv", 2, &kv) == HANU_OK);
    REQUIRE(put(s, STORE_DEFAULT_DB_ID, "d1", "x", NULL) == HANU_OK);
    REQUIRE(put(s, coll, "c1", "{}", NULL) == HANU_OK);
    REQUIRE(put(s, kv, "k1", "y", NULL) == HANU_OK);
    store_op del = { STORE_DELETE, "c1", 2, NULL, 0 };
    REQUIRE(store_write(s, coll, &del, 1, STORE_COND_NONE, 0, &t, NULL) == HANU_OK);
    REQUIRE(store_db_drop(s, "kv", 2, &t) == HANU_OK);
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) REQUIRE(put(s, STORE_DEFAULT_DB_ID, "d2", "z", &last) == HANU_OK);
    REQUIRE(store_flush(s) == HANU_OK);

    store_feed *f;
    REQUIRE(store_feed_open(s, tc, &f) == HANU_OK);
    wanted_db = coll;
    store_feed_filter(f, want_one, NULL);
    static seen got;
    memset(&got, 0, sizeof got);
    size_t n = drain(f, &got);
    CHECK_EQ(n, 5);   /* create coll, create kv, put c1, delete c1, drop kv */
    CHECK_EQ(got.entries, 5);
    CHECK(!got.out_of_order);
    char want[512];
    snprintf(want, sizeof want, "%llu 3 %u coll=\x02\n%llu 3 %u kv=\x01\n", (unsigned long long)tc, coll,
             (unsigned long long)tk, kv);
    CHECK(strncmp(got.text, want, strlen(want)) == 0);
    CHECK(strstr(got.text, " 1 0 ") == NULL);     /* no put of "default" */
    CHECK(strstr(got.text, "k1=") == NULL);       /* nor of the key-value database */
    CHECK(strstr(got.text, "c1={}") != NULL);
    CHECK(strstr(got.text, " 2 ") != NULL);       /* the delete of c1 */
    CHECK(strstr(got.text, " 4 ") != NULL);       /* the drop of kv */
    /* Past every skipped record, up to the last txn. */
    CHECK_EQ(store_feed_position(f), last + 1);
    uint64_t walked, skipped;
    store_feed_get_stats(f, &walked, &skipped);
    CHECK_EQ(skipped, 12);   /* d1, k1 and the ten d2 */
    store_feed_close(f);

    /* Unfiltered, the same range delivers everything. */
    REQUIRE(store_feed_open(s, tc, &f) == HANU_OK);
    memset(&got, 0, sizeof got);
    CHECK_EQ(drain(f, &got), 17);
    store_feed_close(f);
    store_close(s);
}

/* Issue 24: a feed that has caught up with the active file reads only the new frames on
   its next call; it used to walk (and checksum) the whole file again from its header. */
static void test_caught_up_feed_reads_only_new_frames(void)
{
    char err[512];
    const char *dir = test_tmpdir("feed-caught-up");
    store *s = open_at(dir, err);
    REQUIRE(s);
    for (int i = 0; i < 200; i++) REQUIRE(put(s, STORE_DEFAULT_DB_ID, "k", "v", NULL) == HANU_OK);
    REQUIRE(store_flush(s) == HANU_OK);
    store_feed *f;
    REQUIRE(store_feed_open(s, 1, &f) == HANU_OK);
    static seen got;
    memset(&got, 0, sizeof got);
    drain(f, &got);
    uint64_t w0, w1;
    store_feed_get_stats(f, &w0, NULL);
    for (int round = 0; round < 5; round++) {
        REQUIRE(put(s, STORE_DEFAULT_DB_ID, "k", "w", NULL) == HANU_OK);
        REQUIRE(store_flush(s) == HANU_OK);
        size_t n = 0;
        memset(&got, 0, sizeof got);
        CHECK_EQ(store_feed_next(f, 10, collect, &got, &n), HANU_OK);
        CHECK_EQ(n, 1);
        CHECK_EQ(store_feed_next(f, 10, collect, &got, &n), HANU_OK);
        CHECK_EQ(n, 0);
    }
    store_feed_get_stats(f, &w1, NULL);
    CHECK_EQ(w1 - w0, 5);
    store_feed_close(f);
    store_close(s);
}

int main(void)
{
    RUN(test_feed_in_txn_order_across_files);
    RUN(test_watermark_behind_keeps_records);
    RUN(test_feed_survives_compaction_midway);
    RUN(test_damaged_watermarks_refused);
    RUN(test_watermarks_saved_from_many_threads);
    RUN(test_stop_inside_a_record_delivers_all_of_it);
    RUN(test_filtered_feed_skips_other_databases);
    RUN(test_caught_up_feed_reads_only_new_frames);
    TEST_DONE();
}
