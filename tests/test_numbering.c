/*
 * test_numbering.c: txn ranges claimed in a real file bucket (src/replica/numbering.h):
 * the first claim is the chain's last txn + 2^32; a claim with the same chain end
 * (a writer after one that never sealed) goes above the earlier claim, not onto it;
 * eight threads claiming at once get eight different bases; the highest claim's
 * term is read back; a stray object under numbering/ is ignored.
 */
#include "test.h"
#include "replica/numbering.h"

#include <pthread.h>

static bucket *open_bucket(const char *dir)
{
    char url[600], err[256];
    snprintf(url, sizeof url, "file://%s", dir);
    bucket *b = NULL;
    if (bucket_open(url, NULL, &b, err, sizeof err) != HANU_OK) fprintf(stderr, "  bucket_open: %s\n", err);
    return b;
}

static void test_claims_never_repeat_a_base(void)
{
    bucket *b = open_bucket(test_tmpdir("numbering"));
    REQUIRE(b);
    char err[256];
    uint64_t base = 0, top = 0, term = 0;
    CHECK_EQ(numbering_highest(b, &top, &term, err, sizeof err), HANU_OK);
    CHECK_EQ(top, 0);
    CHECK_EQ(numbering_claim(b, 1000, 2, &base, err, sizeof err), HANU_OK);
    CHECK_EQ(base, 1000 + NUMBERING_GAP);
    /* The chain did not move (that writer never sealed): the next range is above it. */
    CHECK_EQ(numbering_claim(b, 1000, 3, &base, err, sizeof err), HANU_OK);
    CHECK_EQ(base, 1000 + 2 * NUMBERING_GAP);
    /* A chain past every claim: its end decides. */
    uint64_t far = 7 * NUMBERING_GAP + 5;
    CHECK_EQ(numbering_claim(b, far, 4, &base, err, sizeof err), HANU_OK);
    CHECK_EQ(base, far + NUMBERING_GAP);
    CHECK_EQ(numbering_highest(b, &top, &term, err, sizeof err), HANU_OK);
    CHECK_EQ(top, far + NUMBERING_GAP);
    CHECK_EQ(term, 4);
    REQUIRE(bucket_put(b, NUMBERING_KEY_PREFIX "stray", "x", 1, NULL, err, sizeof err) == HANU_OK);
    CHECK_EQ(numbering_highest(b, &top, &term, err, sizeof err), HANU_OK);
    CHECK_EQ(top, far + NUMBERING_GAP);
    bucket_close(b);
}

typedef struct racer {
    bucket *b;
    uint64_t base;
    int rc;
} racer;

static void *claim_one(void *arg)
{
    racer *r = arg;
    char err[256];
    r->rc = numbering_claim(r->b, 50, 1, &r->base, err, sizeof err);
    return NULL;
}

static void test_racing_claims_get_different_bases(void)
{
    bucket *b = open_bucket(test_tmpdir("numbering-race"));
    REQUIRE(b);
    enum { N = 8 };
    racer r[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (racer){ b, 0, -1 };
        REQUIRE(pthread_create(&t[i], NULL, claim_one, &r[i]) == 0);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(r[i].rc, HANU_OK);
        CHECK(r[i].base >= 50 + NUMBERING_GAP && (r[i].base - 50) % NUMBERING_GAP == 0);
        for (int j = 0; j < i; j++) CHECK(r[i].base != r[j].base);
    }
    bucket_close(b);
}

int main(void)
{
    RUN(test_claims_never_repeat_a_base);
    RUN(test_racing_claims_get_different_bases);
    TEST_DONE();
}
