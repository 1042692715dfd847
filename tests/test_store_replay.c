/*
 * test_store_replay.c: a store fed another store's change feed with store_replay
 * holds the same keys, values, tokens and databases, keeps them across restarts,
 * skips what it already holds, and survives gaps in the numbering (txns a crashed
 * writer lost) and store_skip_txns, never handing out a txn twice.
 */
#include "test.h"
#include "store/store.h"
#include "log/log.h"
#include "test_store_util.h"

static uint64_t put(store *s, uint32_t db, const char *k, const char *v)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t = 0;
    if (store_write(s, db, &op, 1, STORE_COND_NONE, 0, &t, NULL) != HANU_OK) return 0;
    return t;
}

/* Records copied out of a feed: entries grouped by txn, bytes owned here. */
typedef struct copied {
    store_change entries[4096];
    uint8_t bytes[1 << 20];
    size_t nentries, used;
} copied;

static int copy_change(void *ctx, const store_change *c)
{
    copied *cp = ctx;
    if (cp->nentries == 4096 || cp->used + c->key_len + c->value_len > sizeof cp->bytes) return 1;
    store_change *e = &cp->entries[cp->nentries++];
    *e = *c;
    memcpy(cp->bytes + cp->used, c->key, c->key_len);
    e->key = cp->bytes + cp->used;
    cp->used += c->key_len;
    if (c->value_len) memcpy(cp->bytes + cp->used, c->value, c->value_len);
    e->value = cp->bytes + cp->used;
    cp->used += c->value_len;
    return 0;
}

static void read_feed(store *s, copied *cp)
{
    store_feed *f = NULL;
    if (store_feed_open(s, 1, &f) != HANU_OK) return;
    size_t got;
    do got = 0; while (store_feed_next(f, 256, copy_change, cp, &got) == HANU_OK && got);
    store_feed_close(f);
}

/* Replays every record of cp into s; returns how many were refused with EXISTS. */
static int replay_all(store *s, const copied *cp, int *failures)
{
    int existed = 0;
    for (size_t i = 0; i < cp->nentries;) {
        size_t j = i;
        while (j < cp->nentries && cp->entries[j].txn == cp->entries[i].txn) j++;
        int rc = store_replay(s, cp->entries[i].txn, &cp->entries[i], j - i);
        if (rc == HANU_ERR_EXISTS) existed++;
        else if (rc != HANU_OK) (*failures)++;
        i = j;
    }
    return existed;
}

static void test_replay_copies_everything(void)
{
    char da[512], db[512];
    snprintf(da, sizeof da, "%s", test_tmpdir("replay-src"));
    snprintf(db, sizeof db, "%s", test_tmpdir("replay-dst"));
    store *a = test_store_open(da), *b = test_store_open(db);
    REQUIRE(a && b);
    uint64_t t;
    REQUIRE(store_db_create(a, "users", 5, STORE_DB_COLLECTION, &t) == HANU_OK);
    uint32_t users;
    REQUIRE(store_db_lookup(a, "users", 5, &users) == HANU_OK);
    for (int i = 0; i < 300; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "k%03d", i);
        snprintf(v, sizeof v, "value %d", i);
        REQUIRE(put(a, i % 2 ? users : STORE_DEFAULT_DB_ID, k, v));
    }
    store_op batch[3] = { { STORE_SET, "x", 1, "1", 1 }, { STORE_DELETE, "k001", 4, NULL, 0 },
                          { STORE_SYSTEM_SET, "idem", 4, "rec", 3 } };
    REQUIRE(store_write(a, users, batch, 3, STORE_COND_NONE, 0, &t, NULL) == HANU_OK);
    REQUIRE(store_db_create(a, "gone", 4, STORE_DB_KV, &t) == HANU_OK);
    REQUIRE(store_db_drop(a, "gone", 4, &t) == HANU_OK);
    REQUIRE(store_db_create(a, "later", 5, STORE_DB_KV, &t) == HANU_OK);

    static copied cp;
    memset(&cp, 0, sizeof cp);
    REQUIRE(store_flush(a) == HANU_OK);
    read_feed(a, &cp);
    REQUIRE(cp.nentries > 300);
    int failures = 0;
    CHECK_EQ(replay_all(b, &cp, &failures), 0);
    CHECK_EQ(failures, 0);
    CHECK_EQ(store_last_txn(b), store_last_txn(a));
    CHECK(same_state(a, b));
    /* Replaying again changes nothing: every record is already held. */
    int records = 0;
    for (size_t i = 0; i < cp.nentries; i++) records += !i || cp.entries[i].txn != cp.entries[i - 1].txn;
    CHECK_EQ(replay_all(b, &cp, &failures), records);
    CHECK_EQ(failures, 0);
    store_close(b);
    b = test_store_open(db);
    REQUIRE(b);
    CHECK(same_state(a, b));
    /* The replica writes on with the next txn. */
    uint64_t next = put(b, STORE_DEFAULT_DB_ID, "own", "write");
    CHECK_EQ(next, store_last_txn(a) + 1);
    store_close(a);
    store_close(b);
}

static store_change change(uint64_t txn, const char *key, const char *value)
{
    return (store_change){ txn, LOG_OP_PUT, STORE_DEFAULT_DB_ID, (const uint8_t *)key, strlen(key),
                           (const uint8_t *)value, strlen(value) };
}

static void test_gaps_survive_restart(void)
{
    const char *dir = test_tmpdir("replay-gaps");
    store *s = test_store_open(dir);
    REQUIRE(s);
    store_change c;
    for (uint64_t t = 1; t <= 5; t++) {
        c = change(t, "a", "1");
        REQUIRE(store_replay(s, t, &c, 1) == HANU_OK);
    }
    c = change(100, "b", "2");
    CHECK_EQ(store_replay(s, 100, &c, 1), HANU_OK);
    c = change(200, "c", "3");        /* a second gap right after the first */
    CHECK_EQ(store_replay(s, 200, &c, 1), HANU_OK);
    c = change(201, "d", "4");
    CHECK_EQ(store_replay(s, 201, &c, 1), HANU_OK);
    c = change(150, "e", "5");        /* below what it holds */
    CHECK_EQ(store_replay(s, 150, &c, 1), HANU_ERR_EXISTS);
    c = change(300, "f", "6");        /* entries of another txn than the record's */
    CHECK_EQ(store_replay(s, 301, &c, 1), HANU_ERR_INVALID);
    CHECK_EQ(store_last_txn(s), 201);
    store_close(s);
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(store_last_txn(s), 201);
    uint64_t token = 0;
    CHECK_EQ(store_lookup(s, STORE_DEFAULT_DB_ID, "b", 1, &token), HANU_OK);
    CHECK_EQ(token, 100);
    CHECK_EQ(store_lookup(s, STORE_DEFAULT_DB_ID, "c", 1, &token), HANU_OK);
    CHECK_EQ(token, 200);
    CHECK_EQ(store_lookup(s, STORE_DEFAULT_DB_ID, "e", 1, &token), HANU_ERR_NOT_FOUND);
    CHECK_EQ(put(s, STORE_DEFAULT_DB_ID, "own", "x"), 202);
    store_close(s);
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(store_last_txn(s), 202);
    store_close(s);
}

static void test_skip_is_durable(void)
{
    const char *dir = test_tmpdir("replay-skip");
    store *s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(put(s, STORE_DEFAULT_DB_ID, "a", "1"), 1);
    CHECK_EQ(store_skip_txns(s, 1ull << 32), HANU_OK);
    /* Closed cleanly before any write at the new numbering: it still holds after a
       restart, exactly (the stop was clean: no block of txns is skipped as after a
       crash; issue 26 item 13). */
    store_close(s);
    s = test_store_open(dir);
    REQUIRE(s);
    uint64_t t = put(s, STORE_DEFAULT_DB_ID, "b", "2");
    CHECK_EQ(t, 1ull << 32);
    uint64_t token = 0;
    CHECK_EQ(store_lookup(s, STORE_DEFAULT_DB_ID, "a", 1, &token), HANU_OK);
    CHECK_EQ(token, 1);
    /* A skip while the active file holds frames, then writes at once. */
    uint64_t before = store_last_txn(s);
    CHECK_EQ(store_skip_txns(s, before + 1000), HANU_OK);
    CHECK_EQ(put(s, STORE_DEFAULT_DB_ID, "c", "3"), before + 1000);
    CHECK_EQ(store_skip_txns(s, 5), HANU_OK);   /* never backwards */
    CHECK_EQ(put(s, STORE_DEFAULT_DB_ID, "d", "4"), before + 1001);
    store_close(s);
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(store_last_txn(s), before + 1001);
    CHECK_EQ(store_lookup(s, STORE_DEFAULT_DB_ID, "c", 1, &token), HANU_OK);
    CHECK_EQ(token, before + 1000);
    store_close(s);
}

/* A skip and then a crash (meta/txn as the running process left it): the next
   start still jumps past the whole reserved block, so no txn seen before the crash
   can come again. */
static void test_skip_then_crash_keeps_the_jump(void)
{
    const char *dir = test_tmpdir("replay-skip-crash");
    store *s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(put(s, STORE_DEFAULT_DB_ID, "a", "1"), 1);
    CHECK_EQ(store_skip_txns(s, 1ull << 32), HANU_OK);
    char path[600];
    snprintf(path, sizeof path, "%s/meta/txn", dir);
    uint8_t running[64];
    FILE *f = fopen(path, "rb");
    REQUIRE(f);
    size_t n = fread(running, 1, sizeof running, f);
    fclose(f);
    CHECK_EQ(n, LOG_TXN_RESERVE_SIZE);
    store_close(s);
    CHECK_EQ(log_txn_reserve_clean(path), 1);
    f = fopen(path, "wb");   /* the crash: the clean stop never wrote its mark */
    REQUIRE(f);
    CHECK_EQ(fwrite(running, 1, n, f), n);
    fclose(f);
    CHECK_EQ(log_txn_reserve_clean(path), 0);
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(put(s, STORE_DEFAULT_DB_ID, "b", "2"), (1ull << 32) + LOG_TXN_RESERVE_BLOCK);
    store_close(s);
}

int main(void)
{
    RUN(test_replay_copies_everything);
    RUN(test_gaps_survive_restart);
    RUN(test_skip_is_durable);
    RUN(test_skip_then_crash_keeps_the_jump);
    TEST_DONE();
}
