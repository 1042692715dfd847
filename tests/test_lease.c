/*
 * test_lease.c: the lease object and its keeper (src/replica/lease.h) on a real file
 * bucket: the object's exact bytes and the decoder's refusals; five keepers racing
 * for one lease promote exactly one; a holder that stops renewing is replaced after
 * its TTL by a keeper whose term is one higher; a holder whose lease is replaced
 * behind its back finds out at its next renewal and is LOST.
 */
#include "test.h"
#include "bucket/bucket.h"
#include "replica/lease.h"

#include <stdatomic.h>

static bucket *open_bucket(const char *dir)
{
    char url[600];
    snprintf(url, sizeof url, "file://%s", dir);
    bucket *b = NULL;
    char err[256];
    if (bucket_open(url, NULL, &b, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "  bucket_open: %s\n", err);
        return NULL;
    }
    return b;
}

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

static lease_keeper *start(bucket *b, const char *holder, uint32_t ttl_ms)
{
    lease_keeper_options o = { .holder = holder, .url = "http://x", .ttl_ms = ttl_ms, .check_ms = 20,
                               .promote = count_promotion };
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

int main(void)
{
    RUN(test_object_round_trip_and_refusals);
    RUN(test_racers_promote_exactly_one_and_a_silent_holder_is_replaced);
    RUN(test_replaced_behind_its_back_is_lost);
    TEST_DONE();
}
