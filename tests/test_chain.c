/*
 * test_chain.c: the chain reader (src/replica/chain.h) rebuilds a store from a real
 * file:// bucket that a real sealer filled: same databases, keys, values and tokens;
 * it resumes after a restart, follows new segments, stops exactly at a txn, and
 * refuses a corrupted, missing, reordered or extra segment with a message naming it.
 */
#include "test.h"
#include "bucket/bucket.h"
#include "bucket/segment.h"
#include "replica/chain.h"
#include "replica/sealer.h"
#include "store/store.h"
#include "test_store_util.h"

static bucket *open_bucket(const char *dir)
{
    char url[600], err[512];
    snprintf(url, sizeof url, "file://%s", dir);
    bucket *b = NULL;
    if (bucket_open(url, NULL, &b, err, sizeof err) != HANU_OK) fprintf(stderr, "  bucket_open: %s\n", err);
    return b;
}

static uint64_t put(store *s, const char *k, const char *v)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t = 0;
    return store_write(s, STORE_DEFAULT_DB_ID, &op, 1, STORE_COND_NONE, 0, &t, NULL) == HANU_OK ? t : 0;
}

/* The writer: a store, a sealer and its bucket; `segments` segments of `per` writes. */
typedef struct writer {
    char data[512], bucket_dir[512];
    store *s;
    bucket *b;
    sealer *z;
} writer;

static int writer_open(writer *w, const char *name)
{
    const char *dir = test_tmpdir(name);
    snprintf(w->data, sizeof w->data, "%s/data", dir);
    snprintf(w->bucket_dir, sizeof w->bucket_dir, "%.400s/bucket", dir);   /* beside data; no "..": refused */
    w->s = test_store_open(w->data);
    w->b = open_bucket(w->bucket_dir);
    if (!w->s || !w->b) return 0;
    sealer_options o;
    sealer_options_default(&o);
    o.seal_interval_ms = 60000;   /* segments only when asked */
    char err[512];
    if (sealer_open(w->s, w->b, &o, &w->z, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "  sealer_open: %s\n", err);
        return 0;
    }
    return 1;
}

/* Writes n records (one create db in the first call) and seals them as one segment. */
static int write_segment(writer *w, int from, int n)
{
    uint64_t last = 0;
    for (int i = from; i < from + n; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "k%04d", i % 150);   /* overwrites too */
        snprintf(v, sizeof v, "v%d", i);
        if (!(last = put(w->s, k, v))) return 0;
        if (i % 7 == 3) {
            store_op del = { STORE_DELETE, "k0001", 5, NULL, 0 };
            if (store_write(w->s, STORE_DEFAULT_DB_ID, &del, 1, STORE_COND_NONE, 0, &last, NULL)) return 0;
        }
    }
    if (store_flush(w->s) != HANU_OK) return 0;
    sealer_seal_upto(w->z, last);
    return sealer_wait(w->z, last, 30000) == HANU_OK;
}

static void writer_close(writer *w)
{
    sealer_close(w->z);
    store_close(w->s);
    bucket_close(w->b);
}

static int poll_all(store *s, bucket *b, const chain_options *o, uint64_t *applied, char *err, size_t errcap)
{
    chain_reader *r = NULL;
    if (chain_reader_open(b, s, o, &r) != HANU_OK) return HANU_ERR_NOMEM;
    int rc = chain_reader_poll(r, applied, err, errcap);
    if (rc == HANU_OK) rc = chain_reader_check_end(r, err, errcap);
    chain_reader_close(r);
    return rc;
}

static void test_rebuild_follow_and_resume(void)
{
    writer w;
    REQUIRE(writer_open(&w, "chain-a"));
    uint64_t t;
    REQUIRE(store_db_create(w.s, "users", 5, STORE_DB_COLLECTION, &t) == HANU_OK);
    for (int i = 0; i < 10; i++) REQUIRE(write_segment(&w, i * 40, 40));

    char copy[512];
    snprintf(copy, sizeof copy, "%s", test_tmpdir("chain-a-copy"));
    store *c = test_store_open(copy);
    REQUIRE(c);
    chain_options o;
    chain_options_default(&o);
    o.prefetch = 3;
    chain_reader *r = NULL;
    REQUIRE(chain_reader_open(w.b, c, &o, &r) == HANU_OK);
    uint64_t applied = 0;
    char err[512];
    CHECK_EQ(chain_reader_poll(r, &applied, err, sizeof err), HANU_OK);
    CHECK_EQ(applied, 10);
    CHECK_EQ(store_last_txn(c), store_last_txn(w.s));
    CHECK(same_state(w.s, c));
    /* Nothing new: nothing applied. */
    CHECK_EQ(chain_reader_poll(r, &applied, err, sizeof err), HANU_OK);
    CHECK_EQ(applied, 0);
    /* The writer goes on; the next poll follows. */
    REQUIRE(write_segment(&w, 400, 25));
    REQUIRE(write_segment(&w, 425, 25));
    CHECK_EQ(chain_reader_poll(r, &applied, err, sizeof err), HANU_OK);
    CHECK_EQ(applied, 2);
    CHECK(same_state(w.s, c));
    chain_progress p;
    chain_reader_progress(r, &p);
    CHECK_EQ(p.segments, 12);
    CHECK_EQ(p.sequence, 12);
    CHECK_EQ(p.skipped, 0);
    chain_reader_close(r);

    /* A restart of the copy positions after its last txn: only the new segment. */
    store_close(c);
    REQUIRE(write_segment(&w, 450, 30));
    c = test_store_open(copy);
    REQUIRE(c);
    CHECK_EQ(poll_all(c, w.b, &o, &applied, err, sizeof err), HANU_OK);
    CHECK_EQ(applied, 1);
    CHECK(same_state(w.s, c));
    store_close(c);
    writer_close(&w);
}

static void test_stop_at_txn(void)
{
    writer w;
    REQUIRE(writer_open(&w, "chain-stop"));
    for (int i = 0; i < 4; i++) REQUIRE(write_segment(&w, i * 30, 30));
    uint64_t stop = store_last_txn(w.s) / 2 + 3;   /* inside a segment */
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("chain-stop-copy"));
    store *c = test_store_open(dir);
    REQUIRE(c);
    chain_options o;
    chain_options_default(&o);
    o.stop_txn = stop;
    uint64_t applied = 0;
    chain_reader *r = NULL;
    REQUIRE(chain_reader_open(w.b, c, &o, &r) == HANU_OK);
    CHECK_EQ(chain_reader_poll(r, &applied, err, sizeof err), HANU_OK);
    CHECK(chain_reader_stopped(r));
    CHECK_EQ(store_last_txn(c), stop);
    chain_reader_close(r);
    /* Every key's token is at most stop, and a key written at stop is there. */
    uint64_t token = 0;
    char k[32];
    int found_stop = 0;
    for (int i = 0; i < 150; i++) {
        snprintf(k, sizeof k, "k%04d", i);
        if (store_lookup(c, STORE_DEFAULT_DB_ID, k, strlen(k), &token) == HANU_OK) {
            CHECK(token <= stop);
            found_stop |= token == stop;
        }
    }
    CHECK(found_stop || stop % 8 == 0);   /* stop may be a delete's txn */
    store_close(c);
    writer_close(&w);
}

/* Damage one bucket holding 5 segments by shell command, then rebuild into a fresh store. */
static int rebuild_after(const char *name, const char *damage, char *err, size_t errcap)
{
    writer w;
    if (!writer_open(&w, name)) return -1000;
    for (int i = 0; i < 5; i++)
        if (!write_segment(&w, i * 20, 20)) return -1001;
    writer_close(&w);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s/segments' && %s", w.bucket_dir, damage);
    if (system(cmd) != 0) return -1002;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/copy", w.bucket_dir);
    store *c = test_store_open(dir);
    bucket *b = open_bucket(w.bucket_dir);
    if (!c || !b) return -1003;
    uint64_t applied = 0;
    chain_options o;
    chain_options_default(&o);
    int rc = poll_all(c, b, &o, &applied, err, errcap);
    store_close(c);
    bucket_close(b);
    return rc;
}

#define SEG(n) "000000000000000000" #n

static void test_damage_is_refused(void)
{
    char err[512];
    CHECK_EQ(rebuild_after("chain-ok", "true", err, sizeof err), HANU_OK);
    /* A flipped byte in the third segment. */
    CHECK_EQ(rebuild_after("chain-flip", "printf 'X' | dd of=" SEG(03) " bs=1 seek=120 conv=notrunc 2>/dev/null",
                           err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "segment 3") != NULL);
    /* The third segment missing. */
    CHECK_EQ(rebuild_after("chain-gap", "rm " SEG(03), err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "segment 3 is missing") != NULL);
    /* The last two swapped. */
    CHECK_EQ(rebuild_after("chain-swap", "mv " SEG(04) " x && mv " SEG(05) " " SEG(04) " && mv x " SEG(05),
                           err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "segment 4") != NULL || (fprintf(stderr, "  swap: %s\n", err), 0));
    /* An extra segment: a copy of the last under the next number. */
    CHECK_EQ(rebuild_after("chain-extra", "cp " SEG(05) " " SEG(06), err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "segment 6") != NULL || (fprintf(stderr, "  extra: %s\n", err), 0));
    /* The last one truncated. */
    CHECK_EQ(rebuild_after("chain-short", "truncate -s 100 " SEG(05), err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "segment 5") != NULL);
}

static void test_gap_in_numbering(void)
{
    writer w;
    REQUIRE(writer_open(&w, "chain-skip"));
    REQUIRE(write_segment(&w, 0, 10));
    REQUIRE(store_skip_txns(w.s, 1ull << 33) == HANU_OK);
    REQUIRE(write_segment(&w, 10, 10));
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("chain-skip-copy"));
    store *c = test_store_open(dir);
    REQUIRE(c);
    uint64_t applied = 0;
    chain_options o;
    chain_options_default(&o);
    CHECK_EQ(poll_all(c, w.b, &o, &applied, err, sizeof err), HANU_OK);
    CHECK_EQ(applied, 2);
    CHECK_EQ(store_last_txn(c), store_last_txn(w.s));
    CHECK(store_last_txn(c) > (1ull << 33));
    CHECK(same_state(w.s, c));
    store_close(c);
    c = test_store_open(dir);   /* the copy's log holds the gap across a restart */
    REQUIRE(c);
    CHECK(same_state(w.s, c));
    store_close(c);
    writer_close(&w);
}

int main(void)
{
    RUN(test_rebuild_follow_and_resume);
    RUN(test_stop_at_txn);
    RUN(test_damage_is_refused);
    RUN(test_gap_in_numbering);
    TEST_DONE();
}
