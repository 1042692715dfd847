/*
 * test_store_ttl.c: per-key expiry in the store: the expiry is part of the record
 * (log op 6) and survives reopen, compaction, hints and replay; an expired key is
 * absent to every read and write condition at once; the sweep deletes expired keys
 * with ordinary delete records; a version-1 log (written before op 6) still opens.
 */
#include "test.h"
#include "test_store_util.h"
#include <fcntl.h>
#include <sys/stat.h>
#include "store/store.h"
#include "log/log.h"

static int put_exp(store *s, const char *k, const char *v, uint64_t expire, uint64_t *txn)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t = 0;
    int rc = store_write_expiring(s, STORE_DEFAULT_DB_ID, &op, &expire, 1, STORE_COND_NONE, 0, &t, NULL);
    if (txn) *txn = t;
    return rc;
}

static int get_rc(store *s, const char *k)
{
    hanu_buf b = {0};
    uint64_t t;
    int rc = store_get(s, STORE_DEFAULT_DB_ID, k, strlen(k), &b, &t);
    hanu_buf_free(&b);
    return rc;
}

static uint64_t expiry_of(store *s, const char *k)
{
    uint64_t e = 0, t;
    if (store_expiry(s, STORE_DEFAULT_DB_ID, k, strlen(k), &e, &t) != HANU_OK) return UINT64_MAX;
    return e;
}

static int count_key(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    (void)key; (void)key_len; (void)value; (void)value_len;
    (*(int *)ctx)++;
    return 0;
}

static int scan_count(store *s)
{
    int n = 0;
    store_scan(s, STORE_DEFAULT_DB_ID, count_key, &n);
    return n;
}

static store_db_info info_of(store *s)
{
    store_db_info i;
    memset(&i, 0, sizeof i);
    store_db_info_get(s, STORE_DEFAULT_DB_ID, &i);
    return i;
}

/* Every read and condition hides an expired key; the expiry and the keys' count
   come back the same after a reopen (the expiry is in the record). */
static void test_expired_key_is_absent_everywhere(void)
{
    const char *dir = test_tmpdir("ttl-absent");
    store *s = test_store_open(dir);
    REQUIRE(s);
    uint64_t now = store_now_ms(), later = now + 3600 * 1000, t_live, t_dead;
    CHECK_EQ(put_exp(s, "live", "L", later, &t_live), HANU_OK);
    CHECK_EQ(put_exp(s, "dead", "D", now - 1, &t_dead), HANU_OK);
    CHECK_EQ(put_exp(s, "plain", "P", 0, NULL), HANU_OK);
    for (int round = 0; round < 2; round++) {
        CHECK_EQ(get_rc(s, "live"), HANU_OK);
        CHECK_EQ(get_rc(s, "plain"), HANU_OK);
        CHECK_EQ(get_rc(s, "dead"), HANU_ERR_NOT_FOUND);
        CHECK_EQ(expiry_of(s, "live"), later);
        CHECK_EQ(expiry_of(s, "plain"), 0);
        CHECK_EQ(expiry_of(s, "dead"), UINT64_MAX);
        uint64_t tok;
        CHECK_EQ(store_lookup(s, 0, "dead", 4, &tok), HANU_ERR_NOT_FOUND);
        CHECK_EQ(store_lookup(s, 0, "live", 4, &tok), HANU_OK);
        CHECK_EQ(tok, t_live);
        store_get_item it[3] = { { .key = "live", .key_len = 4 }, { .key = "dead", .key_len = 4 },
                                 { .key = "plain", .key_len = 5 } };
        hanu_buf out = {0};
        CHECK_EQ(store_get_many(s, 0, it, 3, &out), HANU_OK);
        CHECK_EQ(it[0].rc, HANU_OK);
        CHECK_EQ(it[0].len, 1);
        CHECK_EQ(it[1].rc, HANU_ERR_NOT_FOUND);
        CHECK_EQ(it[2].rc, HANU_OK);
        hanu_buf_free(&out);
        CHECK_EQ(scan_count(s), 2);
        /* Counted until the sweep deletes it (as Redis's DBSIZE counts it). */
        CHECK_EQ(info_of(s).keys, 3);
        CHECK_EQ(info_of(s).expiring, 2);
        CHECK_EQ(info_of(s).bytes, 4 + 1 + 4 + 1 + 5 + 1);   /* the expiry is not value bytes */
        store_close(s);
        s = test_store_open(dir);
        REQUIRE(s);
    }
    /* Conditions: an expired key does not exist. */
    store_op op = { STORE_SET, "dead", 4, "again", 5 };
    uint64_t txn, cur = 0;
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_EXISTS, 0, &txn, NULL), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_TOKEN, t_dead, &txn, &cur), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_NOT_EXISTS, 0, &txn, NULL), HANU_OK);
    CHECK_EQ(get_rc(s, "dead"), HANU_OK);
    CHECK_EQ(expiry_of(s, "dead"), 0);   /* a set without an expiry clears it */
    CHECK_EQ(info_of(s).expiring, 1);
    /* Setting it again with an expiry, then without (PERSIST's write). */
    CHECK_EQ(put_exp(s, "live", "L2", later + 5, NULL), HANU_OK);
    CHECK_EQ(expiry_of(s, "live"), later + 5);
    CHECK_EQ(put_exp(s, "live", "L3", 0, NULL), HANU_OK);
    CHECK_EQ(expiry_of(s, "live"), 0);
    CHECK_EQ(info_of(s).expiring, 0);
    store_close(s);
}

/* The wall clock passing the expiry hides the key with no write. */
static void test_expiry_lapses(void)
{
    store *s = test_store_open(test_tmpdir("ttl-lapse"));
    REQUIRE(s);
    CHECK_EQ(put_exp(s, "k", "v", store_now_ms() + 150, NULL), HANU_OK);
    uint64_t last = store_last_txn(s);
    CHECK_EQ(get_rc(s, "k"), HANU_OK);
    usleep(300 * 1000);
    CHECK_EQ(get_rc(s, "k"), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_last_txn(s), last);   /* reads never write */
    store_close(s);
}

static int count_op(void *ctx, const store_change *c)
{
    if (c->op < 8) ((int *)ctx)[c->op]++;
    return 0;
}

/* The sweep deletes expired keys only, in bounded steps, with delete records that
   a reopen replays. */
static void test_sweep_deletes_expired_keys(void)
{
    const char *dir = test_tmpdir("ttl-sweep");
    store *s = test_store_open(dir);
    REQUIRE(s);
    uint64_t now = store_now_ms();
    char k[32];
    for (int i = 0; i < 300; i++) {
        snprintf(k, sizeof k, "k%03d", i);
        CHECK_EQ(put_exp(s, k, "v", i % 3 == 0 ? now - 10 : i % 3 == 1 ? now + 3600000 : 0, NULL), HANU_OK);
    }
    uint64_t before = store_last_txn(s);
    size_t total = 0, deleted = 0;
    int calls = 0;
    do {
        CHECK_EQ(store_expire_sweep(s, store_now_ms(), 64, 16, &deleted), HANU_OK);
        CHECK(deleted <= 16);
        total += deleted;
        calls++;
    } while ((deleted || calls < 40) && calls < 200);
    CHECK_EQ(total, 100);
    CHECK_EQ(info_of(s).keys, 200);
    CHECK_EQ(info_of(s).expiring, 100);
    CHECK(store_last_txn(s) > before);
    /* Ordinary delete records in the log, which the feed (the bucket, followers) carries. */
    store_sync(s);
    store_feed *f;
    REQUIRE(store_feed_open(s, before + 1, &f) == HANU_OK);
    int ops[8] = {0};
    size_t got;
    do {
        CHECK_EQ(store_feed_next(f, 100, count_op, ops, &got), HANU_OK);
    } while (got);
    store_feed_close(f);
    CHECK_EQ(ops[LOG_OP_DELETE], 100);
    CHECK_EQ(ops[LOG_OP_PUT] + ops[LOG_OP_PUT_EXPIRING], 0);
    for (int i = 0; i < 300; i++) {
        snprintf(k, sizeof k, "k%03d", i);
        CHECK_EQ(get_rc(s, k), i % 3 == 0 ? HANU_ERR_NOT_FOUND : HANU_OK);
    }
    /* Nothing more to do: no write. */
    before = store_last_txn(s);
    for (int i = 0; i < 20; i++) CHECK_EQ(store_expire_sweep(s, store_now_ms(), 1000, 1000, &deleted), HANU_OK);
    CHECK_EQ(store_last_txn(s), before);
    store_close(s);
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(info_of(s).keys, 200);
    CHECK_EQ(info_of(s).expiring, 100);
    store_close(s);
}

/* The sweep moves from database to database (those without a key with an expiry are
   passed over), survives a database dropped under it, and deletes in each database with
   records of that database. */
static void test_sweep_goes_round_the_databases(void)
{
    store *s = test_store_open(test_tmpdir("ttl-sweep-dbs"));
    REQUIRE(s);
    uint64_t txn, past = store_now_ms() - 5;
    const char *names[] = { "a", "b", "c" };
    uint32_t ids[3];
    char k[32];
    for (int d = 0; d < 3; d++) {
        REQUIRE(store_db_create(s, names[d], 1, STORE_DB_KV, &txn) == HANU_OK);
        REQUIRE(store_db_lookup(s, names[d], 1, &ids[d]) == HANU_OK);
        for (int i = 0; i < 50; i++) {
            snprintf(k, sizeof k, "k%d", i);
            store_op op = { STORE_SET, k, strlen(k), "v", 1 };
            uint64_t e = d == 1 ? 0 : past;   /* b holds no expiry */
            CHECK_EQ(store_write_expiring(s, ids[d], &op, &e, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
        }
    }
    size_t deleted = 0, total = 0;
    CHECK_EQ(store_expire_sweep(s, store_now_ms(), 10, 100, &deleted), HANU_OK);
    total += deleted;
    CHECK_EQ(store_db_drop(s, "a", 1, &txn), HANU_OK);   /* possibly the one being swept */
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(store_expire_sweep(s, store_now_ms(), 10, 100, &deleted), HANU_OK);
        total += deleted;
    }
    store_db_info info;
    CHECK_EQ(store_db_info_get(s, ids[2], &info), HANU_OK);
    CHECK_EQ(info.keys, 0);
    CHECK_EQ(info.expiring, 0);
    CHECK_EQ(store_db_info_get(s, ids[1], &info), HANU_OK);
    CHECK_EQ(info.keys, 50);
    CHECK(total >= 50 && total <= 100);   /* c's 50, and what it took of a before the drop */
    store_close(s);
}

/* Compaction keeps the expiry in the records it copies and in the hints it writes;
   an expired key stays absent across compaction and restart (no older put of it
   comes back), before and after the sweep deleted it. */
static void test_compaction_and_hints_keep_expiry(void)
{
    const char *dir = test_tmpdir("ttl-compact");
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.file_size = 64 << 10;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    char err[512], k[32], v[64];
    REQUIRE(store_open(&o, &s, err, sizeof err) == HANU_OK);
    uint64_t base = store_now_ms() + 3600 * 1000;
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 300; i++) {
            snprintf(k, sizeof k, "key%03d", i);
            snprintf(v, sizeof v, "r%d-%03d-................", round, i);
            /* Last round: a third expire in an hour, a third already expired (older
               plain puts of them lie in older files), a third have none. */
            uint64_t e = round < 9 ? (i % 2 ? base + (uint64_t)round : 0)
                                   : i % 3 == 0 ? base + (uint64_t)i : i % 3 == 1 ? store_now_ms() - 1 : 0;
            CHECK_EQ(put_exp(s, k, v, e, NULL), HANU_OK);
        }
    }
    store_sync(s);
    store_stats st;
    store_get_stats(s, &st);
    CHECK(st.files >= 3);
    for (int pass = 0; pass < 4; pass++) {
        if (pass == 1) {   /* the sweep deletes the expired third, then all is compacted again */
            size_t deleted = 0, total = 0;
            for (int c = 0; c < 50; c++) {
                CHECK_EQ(store_expire_sweep(s, store_now_ms(), 1000, 1000, &deleted), HANU_OK);
                total += deleted;
            }
            CHECK_EQ(total, 100);
            store_rotate(s);
            store_sync(s);
        }
        if (pass < 2) CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
        if (pass == 3) {   /* a damaged hint: the data file is scanned, same answers */
            char hint[700];
            snprintf(hint, sizeof hint, "%s/log/000001.hint", dir);
            int fd = open(hint, O_RDWR);
            REQUIRE(fd >= 0);
            REQUIRE(pwrite(fd, "X", 1, 50) == 1);
            close(fd);
        }
        if (pass >= 2) {
            store_close(s);
            s = NULL;
            REQUIRE(store_open(&o, &s, err, sizeof err) == HANU_OK);
        }
        for (int i = 0; i < 300; i++) {
            snprintf(k, sizeof k, "key%03d", i);
            if (i % 3 == 1) {
                CHECK_EQ(get_rc(s, k), HANU_ERR_NOT_FOUND);
                continue;
            }
            hanu_buf b = {0};
            uint64_t t;
            CHECK_EQ(store_get(s, 0, k, strlen(k), &b, &t), HANU_OK);
            snprintf(v, sizeof v, "r9-%03d-................", i);
            CHECK(b.len == strlen(v) && memcmp(b.data, v, b.len) == 0);
            hanu_buf_free(&b);
            CHECK_EQ(expiry_of(s, k), i % 3 == 0 ? base + (uint64_t)i : 0);
        }
        CHECK_EQ(info_of(s).keys, pass == 0 ? 300 : 200);
    }
    store_close(s);
}

typedef struct replay_ctx {
    store *dst;
    store_change c[8];
    size_t n;
    uint64_t txn;
    int failed;
    int seen6;   /* an op 6 came through the feed */
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
    r->seen6 |= c->op == LOG_OP_PUT_EXPIRING;
    r->c[r->n++] = *c;
    return 0;
}

/* The feed delivers op 6 with its expiry; a replica replaying it holds the same expiry
   and hides the same keys (a follower and a rebuild agree with the writer). */
static void test_replay_keeps_expiry(void)
{
    store *a = test_store_open(test_tmpdir("ttl-replay-a"));
    store *b = NULL;
    REQUIRE(a);
    uint64_t later = store_now_ms() + 3600 * 1000;
    CHECK_EQ(put_exp(a, "later", "x", later, NULL), HANU_OK);
    CHECK_EQ(put_exp(a, "gone", "y", store_now_ms() - 1, NULL), HANU_OK);
    CHECK_EQ(put_exp(a, "plain", "z", 0, NULL), HANU_OK);
    store_sync(a);
    b = test_store_open(test_tmpdir("ttl-replay-b"));
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
    CHECK(r.seen6);
    CHECK(!r.failed);
    CHECK_EQ(expiry_of(b, "later"), later);
    CHECK_EQ(expiry_of(b, "plain"), 0);
    CHECK_EQ(get_rc(b, "gone"), HANU_ERR_NOT_FOUND);
    CHECK_EQ(info_of(b).keys, 3);
    /* An op 6 too short to hold its expiry is refused. */
    store_change bad = { store_last_txn(b) + 1, LOG_OP_PUT_EXPIRING, 0, (const uint8_t *)"k", 1,
                         (const uint8_t *)"1234567", 7 };
    CHECK_EQ(store_replay(b, bad.txn, &bad, 1), HANU_ERR_INVALID);
    store_close(a);
    store_close(b);
}

/* Rewrites a file's header as version 1 (what the code before op 6 wrote). */
static int make_version1(const char *path)
{
    int fd = open(path, O_RDWR);
    if (fd < 0) return -1;
    uint8_t h[LOG_FILE_HEADER_SIZE];
    int ok = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h;
    h[8] = 1;
    hanu_put_u32(h + 36, hanu_checksum32(h, 36));
    ok = ok && pwrite(fd, h, sizeof h, 0) == (ssize_t)sizeof h;
    close(fd);
    return ok ? 0 : -1;
}

/* A version-1 data file still opens; a version 3 header is refused. */
static void test_version1_log_opens(void)
{
    const char *dir = test_tmpdir("ttl-v1");
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/log/000001.log", dir);
    store *s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(put_exp(s, "old", "value", 0, NULL), HANU_OK);
    store_close(s);
    REQUIRE(make_version1(path) == 0);
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(get_rc(s, "old"), HANU_OK);
    CHECK_EQ(expiry_of(s, "old"), 0);
    store_close(s);
    /* The header decoder takes versions 1 to 3 (op 7, typed puts), nothing newer. */
    uint8_t h[LOG_FILE_HEADER_SIZE];
    log_file_header fh = { .file_id = 7 }, back;
    for (int version = 0; version <= 4; version++) {
        log_file_header_encode(h, &fh);
        h[8] = (uint8_t)version;
        hanu_put_u32(h + 36, hanu_checksum32(h, 36));
        CHECK_EQ(log_file_header_decode(h, &back), version >= 1 && version <= 3 ? HANU_OK : HANU_ERR_CORRUPT);
    }
    (void)err;
}

/* A data directory the version before op 6 wrote (tests/data/store-v1: version-1 log
   files, a version-1 hint from its offline compaction, a second database) opens with
   every key; a key with an expiry written into it survives a reopen, and a compaction
   (version-2 files and hints beside the old, already compacted file 1, whose version-1
   hint the last reopen still reads). */
static void test_fixture_from_version1_opens(void)
{
    const char *dir = test_tmpdir("ttl-fixture");
    char cmd[1400], path[700], v[300];
    snprintf(cmd, sizeof cmd, "cp -r tests/data/store-v1/log tests/data/store-v1/meta '%s'/", dir);
    REQUIRE(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/log/000001.hint", dir);
    struct stat st;
    REQUIRE(stat(path, &st) == 0);
    memset(v, 'v', 200);
    v[200] = '\0';
    char want[310];
    snprintf(want, sizeof want, "r2-%s", v);
    uint64_t later = store_now_ms() + 3600 * 1000;
    for (int round = 0; round < 3; round++) {
        store *s = test_store_open(dir);
        REQUIRE(s);
        CHECK_EQ(info_of(s).keys, 160 + (round > 0));
        char k[32];
        for (int i = 1; i <= 150; i++) {
            snprintf(k, sizeof k, "key%d", i);
            hanu_buf b = {0};
            uint64_t t;
            int rc = store_get(s, 0, k, strlen(k), &b, &t);
            CHECK_EQ(rc, i % 5 == 0 ? HANU_ERR_NOT_FOUND : HANU_OK);
            if (rc == HANU_OK) CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0);
            hanu_buf_free(&b);
        }
        CHECK_EQ(get_rc(s, "single40"), HANU_OK);
        uint32_t other;
        CHECK_EQ(store_db_lookup(s, "other", 5, &other), HANU_OK);
        uint64_t t;
        CHECK_EQ(store_lookup(s, other, "ok", 2, &t), HANU_OK);
        if (round == 0) CHECK_EQ(put_exp(s, "fresh", "f", later, NULL), HANU_OK);
        CHECK_EQ(expiry_of(s, "fresh"), later);
        if (round == 1) {   /* every sealed file rewritten, in the new version */
            char err[256];
            store_rotate(s);
            CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
        }
        store_close(s);
    }
    uint8_t h[LOG_FILE_HEADER_SIZE];
    snprintf(path, sizeof path, "%s/log/000001.log", dir);
    int fd = open(path, O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h);
    close(fd);
    CHECK_EQ(h[8], 1);
}

/* The frame decoder refuses an op 6 whose value cannot hold the expiry. */
static void test_short_expiring_put_is_damage(void)
{
    hanu_buf b = {0};
    REQUIRE(log_frame_begin(&b) == HANU_OK);
    REQUIRE(log_frame_add(&b, LOG_OP_PUT_EXPIRING, 0, "k", 1, "1234567", 7) == HANU_OK);
    log_frame_finish(&b, 1);
    log_frame f;
    const char *why = NULL;
    CHECK_EQ(log_frame_decode(b.data, b.len, &f, &why), LOG_FRAME_BAD);
    CHECK(why && strstr(why, "expir"));
    REQUIRE(log_frame_begin(&b) == HANU_OK);
    REQUIRE(log_frame_add_put(&b, LOG_OP_PUT, 0, "k", 1, "v", 1, 1234567890123ull) == HANU_OK);
    log_frame_finish(&b, 1);
    CHECK_EQ(log_frame_decode(b.data, b.len, &f, &why), LOG_FRAME_OK);
    uint32_t pos = 0;
    log_entry e;
    REQUIRE(log_frame_next_entry(&f, &pos, &e));
    CHECK_EQ(e.op, LOG_OP_PUT_EXPIRING);
    CHECK_EQ(e.value_len, 1 + LOG_EXPIRY_SIZE);
    CHECK_EQ(e.expire_ms, 1234567890123ull);
    hanu_buf_free(&b);
}

int main(void)
{
    RUN(test_expired_key_is_absent_everywhere);
    RUN(test_expiry_lapses);
    RUN(test_sweep_deletes_expired_keys);
    RUN(test_sweep_goes_round_the_databases);
    RUN(test_compaction_and_hints_keep_expiry);
    RUN(test_replay_keeps_expiry);
    RUN(test_version1_log_opens);
    RUN(test_fixture_from_version1_opens);
    RUN(test_short_expiring_put_is_damage);
    TEST_DONE();
}
