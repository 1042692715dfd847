/*
 * test_lease.c: the lease object and its keeper (src/replica/lease.h) on a real file
 * bucket: the object's exact bytes and the decoder's refusals; five keepers racing
 * for one lease promote exactly one; a holder that stops renewing is replaced after
 * its TTL by a keeper whose term is one higher; a holder whose lease is replaced
 * behind its back finds out at its next renewal and is LOST; lost answers (to a
 * take and to renewals) do not lose the lease; an unreadable lease object is
 * rewritten by its holder, and taken by a standby only after a TTL; terms only
 * grow, also after the object was deleted.
 */
#include "test.h"
#include "bucket/bucket.h"
#include "replica/lease.h"

#include <stdatomic.h>

static bucket *open_bucket_with(const char *dir, const bucket_options *o)
{
    char url[600];
    snprintf(url, sizeof url, "file://%s", dir);
    bucket *b = NULL;
    char err[256];
    if (bucket_open(url, o, &b, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "  bucket_open: %s\n", err);
        return NULL;
    }
    return b;
}

static bucket *open_bucket(const char *dir) { return open_bucket_with(dir, NULL); }

static void test_object_round_trip_and_refusals(void)
{
    lease l, d;
    memset(&l, 0, sizeof l);   /* padding too: the round trip is compared bytewise */
    strcpy(l.holder, "node-1");
    strcpy(l.url, "http://10.0.0.1:8080");
    l.expires_ms = 1700000000123ull;
    l.term = 7;
    l.txn = 4294967301ull;
    hanu_buf b = {0};
    REQUIRE(lease_encode(&l, &b) == HANU_OK);
    const char want[] = "{\"holder\":\"node-1\",\"url\":\"http://10.0.0.1:8080\",\"expires_ms\":1700000000123,"
                        "\"term\":7,\"txn\":4294967301}";
    CHECK(b.len == sizeof want - 1 && !memcmp(b.data, want, b.len));
    char err[256];
    CHECK(lease_decode((const char *)b.data, b.len, &d, err, sizeof err) == HANU_OK);
    CHECK(!memcmp(&l, &d, sizeof l));
    hanu_buf_free(&b);
    const char *bad[] = {
        "", "[]", "{}", "nonsense",
        "{\"holder\":\"a\",\"url\":\"\",\"expires_ms\":1,\"term\":0,\"txn\":0}",          /* term 0 */
        "{\"holder\":\"\",\"url\":\"\",\"expires_ms\":1,\"term\":1,\"txn\":0}",           /* no holder */
        "{\"holder\":\"a b\",\"url\":\"\",\"expires_ms\":1,\"term\":1,\"txn\":0}",        /* bad char */
        "{\"holder\":\"a\",\"url\":\"\",\"expires_ms\":-1,\"term\":1,\"txn\":0}",         /* negative */
        "{\"holder\":\"a\",\"url\":\"\",\"expires_ms\":1.5,\"term\":1,\"txn\":0}",        /* not an integer */
        "{\"holder\":\"a\",\"url\":\"\",\"expires_ms\":1,\"term\":1,\"txn\":0,\"x\":1}",  /* extra member */
        "{\"holder\":\"a\",\"url\":\"\",\"expires_ms\":1,\"term\":1}",                    /* missing txn */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(lease_decode(bad[i], strlen(bad[i]), &d, err, sizeof err) == HANU_ERR_CORRUPT);
        CHECK(err[0] != 0);
    }
    CHECK(lease_expired(&l, l.expires_ms + 100, 100) == 0);
    CHECK(lease_expired(&l, l.expires_ms + 101, 100) == 1);
}

static atomic_int promotions;
static _Atomic uint64_t promoted_term;

static int count_promotion(void *ctx, uint64_t term)
{
    (void)ctx;
    atomic_fetch_add(&promotions, 1);
    atomic_store(&promoted_term, term);
    return 0;
}

static _Atomic uint64_t chain_txn;   /* what current_txn answers: the chain a standby followed */

static uint64_t followed_txn(void *ctx)
{
    (void)ctx;
    return atomic_load(&chain_txn);
}

static lease_keeper *start(bucket *b, const char *holder, uint32_t ttl_ms)
{
    lease_keeper_options o = { .holder = holder, .url = "http://x", .ttl_ms = ttl_ms, .check_ms = 20,
                               .promote = count_promotion, .current_txn = followed_txn };
    lease_keeper *k = NULL;
    char err[256];
    if (lease_keeper_start(b, &o, &k, err, sizeof err) != HANU_OK) fprintf(stderr, "  start: %s\n", err);
    return k;
}

static int state_of(lease_keeper *k)
{
    lease_keeper_status st;
    lease_keeper_get(k, &st);
    return st.state;
}

/* Waits until exactly `want` promotions happened (at most 10 s). */
static int wait_promotions(int want)
{
    for (int i = 0; i < 1000 && atomic_load(&promotions) < want; i++) usleep(10000);
    return atomic_load(&promotions);
}

static void test_racers_promote_exactly_one_and_a_silent_holder_is_replaced(void)
{
    bucket *b = open_bucket(test_tmpdir("lease-race"));
    REQUIRE(b);
    atomic_store(&promotions, 0);
    enum { N = 5 };
    lease_keeper *k[N];
    char names[N][24];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "racer-%d", i);
        k[i] = start(b, names[i], 600);
        REQUIRE(k[i]);
    }
    CHECK_EQ(wait_promotions(1), 1);
    usleep(900000);   /* past one TTL: renewals keep it, nobody else promotes */
    CHECK_EQ(atomic_load(&promotions), 1);
    CHECK_EQ(atomic_load(&promoted_term), 1);
    int holder = -1, holders = 0;
    for (int i = 0; i < N; i++)
        if (state_of(k[i]) == LEASE_HOLDING) { holder = i; holders++; }
    CHECK_EQ(holders, 1);
    REQUIRE(holder >= 0);
    CHECK(lease_keeper_may_write(k[holder], hanu_now_ns()));
    lease seen;
    char etag[BUCKET_ETAG_MAX + 1], err[256];
    CHECK(lease_read(b, &seen, etag, err, sizeof err) == HANU_OK);
    CHECK(!strcmp(seen.holder, names[holder]) && seen.term == 1 && !strcmp(seen.url, "http://x"));

    /* The holder goes silent (its thread stops, the lease is left to expire). */
    uint64_t stopped_ms = hanu_wall_ms();
    lease_keeper_stop(k[holder]);
    k[holder] = NULL;
    CHECK_EQ(wait_promotions(2), 2);
    CHECK(hanu_wall_ms() >= stopped_ms + 600 - 600 / 3);   /* not before the old lease's expiry */
    CHECK_EQ(atomic_load(&promoted_term), 2);
    CHECK(lease_read(b, &seen, etag, err, sizeof err) == HANU_OK);
    CHECK(seen.term == 2 && strcmp(seen.holder, names[holder]) != 0);
    for (int i = 0; i < N; i++) lease_keeper_stop(k[i]);
    bucket_close(b);
}

static int slow_promotion(void *ctx, uint64_t term)   /* ctx: the result to give */
{
    usleep(1500000);   /* twice the TTL of the test below */
    atomic_fetch_add(&promotions, 1);
    atomic_store(&promoted_term, term);
    return *(int *)ctx;
}

/* A promotion longer than the TTL (a long chain to apply, a slow bucket) keeps the
   lease: the keeper renews it meanwhile, and a rival cannot take it. One that fails
   ends FAILED and stops renewing. */
static void test_a_slow_promotion_keeps_the_lease(void)
{
    bucket *b = open_bucket(test_tmpdir("lease-slow"));
    REQUIRE(b);
    for (int fail = 0; fail < 2; fail++) {
        atomic_store(&promotions, 0);
        int result = fail ? -1 : 0;
        lease_keeper_options o = { .holder = "slow", .url = "http://x", .ttl_ms = 750, .check_ms = 20,
                                   .promote = slow_promotion, .ctx = &result };
        lease_keeper *k = NULL, *rival = NULL;
        char err[256];
        REQUIRE(lease_keeper_start(b, &o, &k, err, sizeof err) == HANU_OK);
        for (int i = 0; i < 200 && state_of(k) != LEASE_PROMOTING; i++) usleep(5000);
        CHECK_EQ(state_of(k), LEASE_PROMOTING);
        rival = start(b, "rival", 750);
        REQUIRE(rival);
        usleep(1000000);   /* past the TTL, still promoting */
        CHECK_EQ(state_of(k), LEASE_PROMOTING);
        CHECK(lease_keeper_may_write(k, hanu_now_ns()));
        CHECK_EQ(state_of(rival), LEASE_STANDBY);
        CHECK_EQ(wait_promotions(1), 1);
        for (int i = 0; i < 200 && state_of(k) == LEASE_PROMOTING; i++) usleep(5000);
        lease_keeper_status st;
        lease_keeper_get(k, &st);
        CHECK(st.renewals >= 1);
        CHECK_EQ(st.state, fail ? LEASE_FAILED : LEASE_HOLDING);
        CHECK_EQ(lease_keeper_may_write(k, hanu_now_ns()), !fail);
        lease_keeper_stop_and_release(k, 1);   /* a standby takes the released lease at once */
        CHECK_EQ(wait_promotions(2), 2);
        /* promote() returned: the keeper marks HOLDING when its promoter thread ends */
        for (int i = 0; i < 400 && state_of(rival) != LEASE_HOLDING; i++) usleep(5000);
        CHECK_EQ(state_of(rival), LEASE_HOLDING);
        lease_keeper_stop_and_release(rival, 1);
    }
    bucket_close(b);
}

static void test_replaced_behind_its_back_is_lost(void)
{
    bucket *b = open_bucket(test_tmpdir("lease-lost"));
    REQUIRE(b);
    atomic_store(&promotions, 0);
    lease_keeper *k = start(b, "victim", 900);
    REQUIRE(k);
    CHECK_EQ(wait_promotions(1), 1);
    for (int i = 0; i < 200 && state_of(k) != LEASE_HOLDING; i++) usleep(5000);
    /* Another node writes its own lease over it (as a take-over by CAS would). */
    lease other = { .holder = "usurper", .expires_ms = hanu_wall_ms() + 60000, .term = 2 };
    hanu_buf buf = {0};
    REQUIRE(lease_encode(&other, &buf) == HANU_OK);
    char err[256];
    CHECK(bucket_put(b, LEASE_KEY, buf.data, buf.len, NULL, err, sizeof err) == HANU_OK);
    hanu_buf_free(&buf);
    for (int i = 0; i < 400 && state_of(k) != LEASE_LOST; i++) usleep(5000);
    CHECK_EQ(state_of(k), LEASE_LOST);
    CHECK(!lease_keeper_may_write(k, hanu_now_ns()));
    lease seen;
    char etag[BUCKET_ETAG_MAX + 1];
    CHECK(lease_read(b, &seen, etag, err, sizeof err) == HANU_OK && !strcmp(seen.holder, "usurper"));
    lease_keeper_stop(k);
    bucket_close(b);
}

static int put_raw(bucket *b, const char *bytes)
{
    char err[256];
    return bucket_put(b, LEASE_KEY, bytes, strlen(bytes), NULL, err, sizeof err);
}

static int put_lease(bucket *b, const char *holder, uint64_t term, uint64_t expires_ms)
{
    lease l;
    memset(&l, 0, sizeof l);
    snprintf(l.holder, sizeof l.holder, "%s", holder);
    l.term = term;
    l.expires_ms = expires_ms;
    hanu_buf buf = {0};
    char err[256];
    int rc = lease_encode(&l, &buf);
    if (rc == HANU_OK) rc = bucket_put(b, LEASE_KEY, buf.data, buf.len, NULL, err, sizeof err);
    hanu_buf_free(&buf);
    return rc;
}

static lease read_lease(bucket *b)
{
    lease l;
    char etag[BUCKET_ETAG_MAX + 1], err[256];
    if (lease_read(b, &l, etag, err, sizeof err) != HANU_OK) memset(&l, 0, sizeof l);
    return l;
}

/* A third of all requests act but lose their answer, and the bucket does not try
   again (one attempt: as when every retry of a request failed): the take is
   recognised as ours (term 1, no wait for a TTL), and no renewal whose answer was
   lost ends the lease (the next one's ETag no longer matches: it reads back). */
static void test_lost_answers_do_not_lose_the_lease(void)
{
    bucket_options bo;
    bucket_options_default(&bo);
    bo.timeout_rate = 0.3;
    bo.fail_seed = 7;
    bo.max_attempts = 1;
    const char *dir = test_tmpdir("lease-lost-answers");
    bucket *b = open_bucket_with(dir, &bo), *clean = open_bucket(dir);   /* the test reads without faults */
    REQUIRE(b && clean);
    atomic_store(&promotions, 0);
    atomic_store(&chain_txn, 0);
    lease_keeper *k = start(b, "lonely", 900);
    REQUIRE(k);
    CHECK_EQ(wait_promotions(1), 1);
    CHECK_EQ(atomic_load(&promoted_term), 1);
    for (int i = 0; i < 30; i++) {   /* 3 s: about ten renewals, a third of them answered late */
        usleep(100000);
        CHECK(state_of(k) == LEASE_HOLDING || state_of(k) == LEASE_PROMOTING);
    }
    lease_keeper_status st;
    lease_keeper_get(k, &st);
    CHECK(st.renewals >= 5);
    CHECK_EQ(st.state, LEASE_HOLDING);
    CHECK_EQ(read_lease(clean).term, 1);
    lease_keeper_stop(k);
    bucket_close(clean);
    bucket_close(b);
}

/* Unreadable bytes in the lease object: the holder rewrites them at its next
   renewal and keeps its term; with no holder, a standby takes the object over only
   once it has stayed unreadable for a TTL and the margin. */
static void test_unreadable_lease_is_recovered(void)
{
    bucket *b = open_bucket(test_tmpdir("lease-unreadable"));
    REQUIRE(b);
    atomic_store(&promotions, 0);
    atomic_store(&chain_txn, 0);
    REQUIRE(put_lease(b, "gone", 4, 1) == HANU_OK);   /* expired long ago */
    lease_keeper *k = start(b, "holder", 600);
    REQUIRE(k);
    CHECK_EQ(wait_promotions(1), 1);
    CHECK_EQ(atomic_load(&promoted_term), 5);
    REQUIRE(put_raw(b, "{\"holder\":") == HANU_OK);
    usleep(700000);   /* past a renewal */
    CHECK_EQ(state_of(k), LEASE_HOLDING);
    lease l = read_lease(b);
    CHECK(!strcmp(l.holder, "holder") && l.term == 5);
    lease_keeper_stop(k);

    REQUIRE(put_raw(b, "garbage") == HANU_OK);
    uint64_t t0 = hanu_now_ns();
    lease_keeper *s = start(b, "standby", 600);
    REQUIRE(s);
    CHECK_EQ(wait_promotions(2), 2);
    CHECK(hanu_now_ns() - t0 >= 700ull * 1000000u);   /* TTL 600 + margin 100 */
    l = read_lease(b);
    CHECK(!strcmp(l.holder, "standby") && l.term == 1);   /* it saw no term: nothing followed */
    lease_keeper_stop(s);
    bucket_close(b);
}

/* A deleted lease object does not restart the terms: a standby that saw term 7
   takes term 8; one that saw nothing, but followed a chain written under term 4
   (txns past 3 * 2^32), takes term 5. */
static void test_terms_only_grow(void)
{
    bucket *b = open_bucket(test_tmpdir("lease-terms"));
    REQUIRE(b);
    atomic_store(&promotions, 0);
    atomic_store(&chain_txn, 0);
    REQUIRE(put_lease(b, "other", 7, hanu_wall_ms() + 600000) == HANU_OK);
    lease_keeper *k = start(b, "watcher", 600);
    REQUIRE(k);
    usleep(200000);
    CHECK_EQ(atomic_load(&promotions), 0);
    char err[256];
    REQUIRE(bucket_delete(b, LEASE_KEY, err, sizeof err) == HANU_OK);
    CHECK_EQ(wait_promotions(1), 1);
    CHECK_EQ(atomic_load(&promoted_term), 8);
    lease_keeper_stop(k);

    REQUIRE(bucket_delete(b, LEASE_KEY, err, sizeof err) == HANU_OK);
    atomic_store(&chain_txn, (3ull << 32) + 12);
    k = start(b, "fresh", 600);
    REQUIRE(k);
    CHECK_EQ(wait_promotions(2), 2);
    CHECK_EQ(atomic_load(&promoted_term), 5);
    CHECK_EQ(read_lease(b).term, 5);
    lease_keeper_stop(k);
    bucket_close(b);
}

int main(void)
{
    RUN(test_object_round_trip_and_refusals);
    RUN(test_racers_promote_exactly_one_and_a_silent_holder_is_replaced);
    RUN(test_a_slow_promotion_keeps_the_lease);
    RUN(test_replaced_behind_its_back_is_lost);
    RUN(test_lost_answers_do_not_lose_the_lease);
    RUN(test_unreadable_lease_is_recovered);
    RUN(test_terms_only_grow);
    TEST_DONE();
}
