/*
 * test_store_watch.c: the registry of WATCHed keys (store_watch): a write that puts
 * or deletes a watched key counts a touch, also when it creates and deletes the key
 * again (the token cannot see that); other keys, other databases and the expiry
 * sweep's deletes do not; two watchers of one key share it until both unwatch; a
 * table of thousands of keys grows and shrinks and keeps every count right.
 */
#include "test.h"
#include "test_store_util.h"
#include "store/store.h"

static int put(store *s, uint32_t db, const char *k, const char *v)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t = 0;
    return store_write(s, db, &op, 1, STORE_COND_NONE, 0, &t, NULL);
}

static int del(store *s, uint32_t db, const char *k)
{
    store_op op = { .kind = STORE_DELETE, .key = k, .key_len = strlen(k) };
    uint64_t t = 0;
    return store_write(s, db, &op, 1, STORE_COND_NONE, 0, &t, NULL);
}

static uint64_t touches(store *s, uint32_t db, const char *k)
{
    return store_watch_touches(s, db, k, strlen(k));
}

static void test_create_and_delete_counts(void)
{
    store *s = test_store_open(test_tmpdir("watch-basic"));
    REQUIRE(s);
    const uint32_t db = STORE_DEFAULT_DB_ID;
    uint64_t n = 99;
    CHECK_EQ(store_watch(s, db, "w", 1, &n), HANU_OK);
    CHECK_EQ(n, 0);
    CHECK_EQ(put(s, db, "other", "x"), HANU_OK);
    CHECK_EQ(touches(s, db, "w"), 0);
    /* created and deleted again: absent at both ends, two touches */
    CHECK_EQ(put(s, db, "w", "x"), HANU_OK);
    CHECK_EQ(del(s, db, "w"), HANU_OK);
    CHECK_EQ(touches(s, db, "w"), 2);
    uint64_t t;
    CHECK_EQ(store_lookup(s, db, "w", 1, &t), HANU_ERR_NOT_FOUND);
    /* a delete of a missing key is a record too: Redis would not count it, but the
       callers (DEL of a missing key) write nothing, so it never comes here */
    store_watch_touch(s, db, "w", 1);
    CHECK_EQ(touches(s, db, "w"), 3);
    /* another database's key of the same name is another key */
    uint64_t txn;
    uint32_t other;
    REQUIRE(store_db_create(s, "other", 5, STORE_DB_KV, &txn) == HANU_OK);
    REQUIRE(store_db_lookup(s, "other", 5, &other) == HANU_OK);
    CHECK_EQ(put(s, other, "w", "x"), HANU_OK);
    CHECK_EQ(touches(s, db, "w"), 3);
    /* a second watcher shares the count; the key stays registered until both go */
    CHECK_EQ(store_watch(s, db, "w", 1, &n), HANU_OK);
    CHECK_EQ(n, 3);
    store_unwatch(s, db, "w", 1);
    CHECK_EQ(put(s, db, "w", "y"), HANU_OK);
    CHECK_EQ(touches(s, db, "w"), 4);
    store_unwatch(s, db, "w", 1);
    CHECK_EQ(put(s, db, "w", "z"), HANU_OK);
    CHECK_EQ(touches(s, db, "w"), 0);   /* no longer watched */
    store_close(s);
}

/* The expiry sweep deletes keys that already read as absent: no touch (Redis keeps
   an EXEC whose key had expired when it was watched). */
static void test_sweep_does_not_touch(void)
{
    store *s = test_store_open(test_tmpdir("watch-sweep"));
    REQUIRE(s);
    const uint32_t db = STORE_DEFAULT_DB_ID;
    store_op op = { STORE_SET, "e", 1, "v", 1 };
    uint64_t expire = store_now_ms() - 1, t, n = 0;
    REQUIRE(store_write_expiring(s, db, &op, &expire, 1, STORE_COND_NONE, 0, &t, NULL) == HANU_OK);
    CHECK_EQ(store_watch(s, db, "e", 1, &n), HANU_OK);
    size_t deleted = 0;
    CHECK_EQ(store_expire_sweep(s, store_now_ms(), 1000, 1000, &deleted), HANU_OK);
    CHECK_EQ(deleted, 1);
    CHECK_EQ(touches(s, db, "e"), 0);
    CHECK_EQ(put(s, db, "e", "again"), HANU_OK);
    CHECK_EQ(touches(s, db, "e"), 1);
    store_unwatch(s, db, "e", 1);
    store_close(s);
}

/* Thousands of keys: the table grows, half of them go (the runs shift back over
   the holes), and every remaining key still counts its own writes only. */
static void test_many_keys(void)
{
    store *s = test_store_open(test_tmpdir("watch-many"));
    REQUIRE(s);
    const uint32_t db = STORE_DEFAULT_DB_ID;
    enum { N = 3000 };
    char k[32];
    uint64_t n;
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "key%d", i);
        REQUIRE(store_watch(s, db, k, strlen(k), &n) == HANU_OK);
    }
    for (int i = 0; i < N; i += 2) {
        snprintf(k, sizeof k, "key%d", i);
        store_unwatch(s, db, k, strlen(k));
    }
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "key%d", i);
        for (int j = 0; j <= i % 3; j++) REQUIRE(put(s, db, k, "v") == HANU_OK);
    }
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "key%d", i);
        uint64_t want = i % 2 ? (uint64_t)(i % 3 + 1) : 0;
        wrong += touches(s, db, k) != want;
    }
    CHECK_EQ(wrong, 0);
    for (int i = 1; i < N; i += 2) {
        snprintf(k, sizeof k, "key%d", i);
        store_unwatch(s, db, k, strlen(k));
    }
    CHECK_EQ(touches(s, db, "key1"), 0);
    store_close(s);
}

int main(void)
{
    RUN(test_create_and_delete_counts);
    RUN(test_sweep_does_not_touch);
    RUN(test_many_keys);
    TEST_DONE();
}
