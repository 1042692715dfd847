/*
 * test_store_types.c: a value's Redis type in the store (log op 7, the Redis face's
 * lists): the type and the expiry are part of the record and survive reopen,
 * compaction, hints (and a damaged hint's scan of the data file) and replay on a
 * follower; a string write over a typed key makes it a string again; the decoder
 * and store_replay refuse an op 7 without its type or with an unknown one.
 */
#include "test.h"
#include "test_store_util.h"
#include <fcntl.h>
#include "store/store.h"
#include "log/log.h"

static int put_typed(store *s, const char *k, const char *v, uint64_t expire, uint8_t type)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t = 0;
    return store_write_typed(s, STORE_DEFAULT_DB_ID, &op, &expire, &type, 1, STORE_COND_NONE, 0, &t, NULL);
}

/* The key's value, expiry and type as they read back (value "" and type 255: absent). */
static void check_key(store *s, const char *k, const char *want, uint64_t want_expire, uint8_t want_type)
{
    hanu_buf b = {0};
    uint64_t t, e = 0;
    uint8_t type = 255;
    int rc = store_get_typed(s, STORE_DEFAULT_DB_ID, k, strlen(k), &b, &t, &e, &type);
    CHECK_EQ(rc, HANU_OK);
    if (rc == HANU_OK) {
        CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0);
        CHECK_EQ(e, want_expire);
        CHECK_EQ(type, want_type);
    }
    uint8_t meta_type = 255;
    CHECK_EQ(store_key_meta(s, STORE_DEFAULT_DB_ID, k, strlen(k), &e, &t, &meta_type), HANU_OK);
    CHECK_EQ(meta_type, want_type);
    hanu_buf_free(&b);
}

static int count_lists(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len,
                       uint8_t type)
{
    (void)key; (void)key_len; (void)value; (void)value_len;
    *(int *)ctx += type == LOG_TYPE_LIST;
    return 0;
}

/* Reopen, compaction with hints, a damaged hint: the type and expiry come back. */
static void test_type_survives_reopen_and_compaction(void)
{
    const char *dir = test_tmpdir("types-compact");
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.file_size = 64 << 10;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    char err[512], k[32], v[64];
    REQUIRE(store_open(&o, &s, err, sizeof err) == HANU_OK);
    uint64_t later = store_now_ms() + 3600 * 1000;
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 300; i++) {
            snprintf(k, sizeof k, "key%03d", i);
            snprintf(v, sizeof v, "r%d-%03d-................", round, i);
            /* last round: a third lists, a third lists with an expiry, a third strings
               (whose older records were lists) */
            uint8_t type = round < 9 ? (uint8_t)(i % 2) : i % 3 < 2 ? LOG_TYPE_LIST : LOG_TYPE_STRING;
            uint64_t e = round == 9 && i % 3 == 1 ? later + (uint64_t)i : 0;
            CHECK_EQ(put_typed(s, k, v, e, type), HANU_OK);
        }
    }
    store_sync(s);
    for (int pass = 0; pass < 4; pass++) {
        if (pass < 2) CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
        if (pass == 3) {   /* a damaged hint: the data file is scanned, same answers */
            char hint[700];
            snprintf(hint, sizeof hint, "%s/log/000001.hint", dir);
            int fd = open(hint, O_RDWR);
            REQUIRE(fd >= 0);
            REQUIRE(pwrite(fd, "X", 1, 50) == 1);
            close(fd);
        }
        if (pass >= 1) {
            store_close(s);
            s = NULL;
            REQUIRE(store_open(&o, &s, err, sizeof err) == HANU_OK);
        }
        for (int i = 0; i < 300; i++) {
            snprintf(k, sizeof k, "key%03d", i);
            snprintf(v, sizeof v, "r9-%03d-................", i);
            check_key(s, k, v, i % 3 == 1 ? later + (uint64_t)i : 0, i % 3 < 2 ? LOG_TYPE_LIST : LOG_TYPE_STRING);
        }
        int lists = 0;
        CHECK_EQ(store_scan_typed(s, STORE_DEFAULT_DB_ID, count_lists, &lists), HANU_OK);
        CHECK_EQ(lists, 200);
    }
    store_close(s);
}

typedef struct replay_ctx {
    store *dst;
    store_change c[8];
    size_t n;
    uint64_t txn;
    int failed, seen7;
} replay_ctx;

static void replay_flush(replay_ctx *r)
{
    if (r->n && store_replay(r->dst, r->txn, r->c, r->n) != HANU_OK) r->failed = 1;
    r->n = 0;
}

static int replay_one(void *ctx, const store_change *c)
{
    replay_ctx *r = ctx;
    if (r->n && c->txn != r->txn) replay_flush(r);
    if (r->n == 8) { r->failed = 1; return 1; }
    r->txn = c->txn;
    r->seen7 |= c->op == LOG_OP_PUT_TYPED;
    r->c[r->n++] = *c;
    return 0;
}

/* The feed delivers op 7 whole; a follower replaying it holds the same type. */
static void test_replay_keeps_type(void)
{
    store *a = test_store_open(test_tmpdir("types-replay-a"));
    REQUIRE(a);
    uint64_t later = store_now_ms() + 3600 * 1000;
    CHECK_EQ(put_typed(a, "list", "x", 0, LOG_TYPE_LIST), HANU_OK);
    CHECK_EQ(put_typed(a, "timed", "y", later, LOG_TYPE_LIST), HANU_OK);
    CHECK_EQ(put_typed(a, "plain", "z", 0, LOG_TYPE_STRING), HANU_OK);
    CHECK_EQ(put_typed(a, "was", "w", 0, LOG_TYPE_LIST), HANU_OK);
    CHECK_EQ(put_typed(a, "was", "s", 0, LOG_TYPE_STRING), HANU_OK);
    store_sync(a);
    store *b = test_store_open(test_tmpdir("types-replay-b"));
    REQUIRE(b);
    store_feed *f;
    REQUIRE(store_feed_open(a, 1, &f) == HANU_OK);
    replay_ctx r = { .dst = b };
    size_t got;
    do {
        CHECK_EQ(store_feed_next(f, 100, replay_one, &r, &got), HANU_OK);
        replay_flush(&r);
    } while (got);
    store_feed_close(f);
    CHECK(r.seen7);
    CHECK(!r.failed);
    check_key(b, "list", "x", 0, LOG_TYPE_LIST);
    check_key(b, "timed", "y", later, LOG_TYPE_LIST);
    check_key(b, "plain", "z", 0, LOG_TYPE_STRING);
    check_key(b, "was", "s", 0, LOG_TYPE_STRING);
    /* an op 7 too short for its trailer, or of type 0 or unknown, is refused */
    uint8_t v[LOG_TYPED_SIZE + 1] = { 'v' };
    store_change bad = { store_last_txn(b) + 1, LOG_OP_PUT_TYPED, 0, (const uint8_t *)"k", 1, v, LOG_TYPED_SIZE - 1 };
    CHECK_EQ(store_replay(b, bad.txn, &bad, 1), HANU_ERR_INVALID);
    bad.value_len = sizeof v;
    v[LOG_TYPED_SIZE] = 0;
    CHECK_EQ(store_replay(b, bad.txn, &bad, 1), HANU_ERR_INVALID);
    v[LOG_TYPED_SIZE] = LOG_TYPE_MAX + 1;
    CHECK_EQ(store_replay(b, bad.txn, &bad, 1), HANU_ERR_INVALID);
    v[LOG_TYPED_SIZE] = LOG_TYPE_LIST;
    CHECK_EQ(store_replay(b, bad.txn, &bad, 1), HANU_OK);
    check_key(b, "k", "v", 0, LOG_TYPE_LIST);
    /* a write of an unknown type is refused */
    CHECK_EQ(put_typed(a, "k", "v", 0, LOG_TYPE_MAX + 1), HANU_ERR_INVALID);
    store_close(a);
    store_close(b);
}

/* The frame decoder: an op 7 carries value, expiry and type; without them, or with
   type 0 or an unknown type, the frame is damage. */
static void test_typed_frames(void)
{
    hanu_buf b = {0};
    log_frame f;
    const char *why = NULL;
    REQUIRE(log_frame_begin(&b) == HANU_OK);
    REQUIRE(log_frame_add_typed(&b, LOG_OP_PUT, 3, "k", 1, "abc", 3, 42, LOG_TYPE_LIST) == HANU_OK);
    log_frame_finish(&b, 1);
    CHECK_EQ(log_frame_decode(b.data, b.len, &f, &why), LOG_FRAME_OK);
    uint32_t pos = 0;
    log_entry e;
    REQUIRE(log_frame_next_entry(&f, &pos, &e));
    CHECK_EQ(e.op, LOG_OP_PUT_TYPED);
    CHECK_EQ(e.value_len, 3 + LOG_TYPED_SIZE);
    CHECK_EQ(e.expire_ms, 42);
    CHECK_EQ(e.type, LOG_TYPE_LIST);
    /* a copy of the entry (compaction's) is the same record */
    hanu_buf c = {0};
    REQUIRE(log_frame_begin(&c) == HANU_OK);
    REQUIRE(log_frame_add(&c, e.op, e.db, e.key, e.key_len, e.value, e.value_len) == HANU_OK);
    log_frame_finish(&c, 1);
    CHECK(c.len == b.len && memcmp(c.data, b.data, b.len) == 0);
    const uint8_t bad_types[] = { LOG_TYPE_STRING, LOG_TYPE_MAX + 1 };
    for (size_t i = 0; i < sizeof bad_types; i++) {
        b.data[b.len - 1] = bad_types[i];
        log_frame_finish(&b, 1);
        CHECK_EQ(log_frame_decode(b.data, b.len, &f, &why), LOG_FRAME_BAD);
        CHECK(why && strstr(why, "type"));
    }
    REQUIRE(log_frame_begin(&b) == HANU_OK);
    REQUIRE(log_frame_add(&b, LOG_OP_PUT_TYPED, 0, "k", 1, "12345678", 8) == HANU_OK);
    log_frame_finish(&b, 1);
    CHECK_EQ(log_frame_decode(b.data, b.len, &f, &why), LOG_FRAME_BAD);
    hanu_buf_free(&b);
    hanu_buf_free(&c);
}

int main(void)
{
    RUN(test_type_survives_reopen_and_compaction);
    RUN(test_replay_keeps_type);
    RUN(test_typed_frames);
    TEST_DONE();
}
