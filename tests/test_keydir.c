/*
 * test_keydir.c: the key directory hash table against a plain reference
 * array under a long random mix of inserts, updates and deletes (backward-shift
 * deletion is where open addressing goes wrong), plus growth and reservation.
 */
#include "test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store/keydir.h"
#include "base/base.h"

#define NKEYS 5000

typedef struct ref { int present; uint64_t txn; uint32_t off; uint64_t expire; } ref;

static void key_of(int i, char *k, uint16_t *len)
{
    *len = (uint16_t)snprintf(k, 32, "k%d", i * 7919);
}

static void test_random_against_reference(void)
{
    keydir kd;
    keydir_init(&kd);
    static ref r[NKEYS];
    memset(r, 0, sizeof r);
    uint64_t seed = 12345;
    size_t present = 0;
    for (int step = 0; step < 300000; step++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int i = (int)((seed >> 33) % NKEYS);
        int op = (int)((seed >> 20) % 3);
        char k[32];
        uint16_t len;
        key_of(i, k, &len);
        uint64_t h = keydir_hash(k, len);
        kd_entry old;
        if (op < 2) {
            /* A third of the puts carry an expiry: entries gain and lose it in place. */
            uint64_t expire = (seed >> 40) % 3 == 0 ? 1700000000000ull + (uint64_t)step : 0;
            REQUIRE(keydir_put(&kd, k, len, h, (uint64_t)step, 1, (uint32_t)step * 2, 5, expire, 0, &old) == HANU_OK);
            CHECK_EQ(old.key_len != 0, r[i].present);
            if (r[i].present) CHECK_EQ(old.txn, r[i].txn);
            if (r[i].present) CHECK_EQ((old.flags & KD_EXPIRES) != 0, r[i].expire != 0);
            if (!r[i].present) present++;
            r[i] = (ref){ 1, (uint64_t)step, (uint32_t)step * 2, expire };
        } else {
            int had = keydir_delete(&kd, k, len, h, &old);
            CHECK_EQ(had, r[i].present);
            if (had) { CHECK_EQ(old.txn, r[i].txn); present--; }
            r[i].present = 0;
        }
        if (step % 10000 == 0) {
            for (int j = 0; j < NKEYS; j++) {
                key_of(j, k, &len);
                kd_entry *e = keydir_get(&kd, k, len, keydir_hash(k, len));
                CHECK_EQ(e != NULL, r[j].present);
                if (e && r[j].present) {
                    CHECK_EQ(e->txn, r[j].txn);
                    CHECK_EQ(e->value_off, r[j].off);
                    CHECK_EQ(kd_entry_expiry(e), r[j].expire);
                    CHECK_EQ(e->key_len, len);
                    CHECK(memcmp(e->key, k, len) == 0);
                }
            }
            CHECK_EQ(kd.count, present);
        }
    }
    size_t pos = 0, seen = 0;
    while (keydir_next(&kd, &pos)) seen++;
    CHECK_EQ(seen, present);
    keydir_free(&kd);
}

static void test_reserve_and_binary_keys(void)
{
    keydir kd;
    keydir_init(&kd);
    REQUIRE(keydir_reserve(&kd, 100000) == HANU_OK);
    size_t cap = kd.cap;
    CHECK(cap * 3 >= 100000 * 4);
    kd_entry old;
    for (uint32_t i = 0; i < 100000; i++) {
        uint8_t k[8] = { 0, (uint8_t)i, 0, (uint8_t)(i >> 8), 0, (uint8_t)(i >> 16), 0xff, 0 };
        REQUIRE(keydir_put(&kd, k, 8, keydir_hash(k, 8), i, 2, i, 0, 0, 0, &old) == HANU_OK);
    }
    CHECK_EQ(kd.cap, cap);    /* no growth after the reservation */
    CHECK_EQ(kd.count, 100000);
    uint8_t k[8] = { 0, 77, 0, 0, 0, 0, 0xff, 0 };
    kd_entry *e = keydir_get(&kd, k, 8, keydir_hash(k, 8));
    REQUIRE(e);
    CHECK_EQ(e->txn, 77);
    CHECK(keydir_get(&kd, k, 7, keydir_hash(k, 7)) == NULL);   /* prefix is another key */
    /* By location: only the record the entry points at finds it. */
    CHECK(keydir_get_at(&kd, keydir_hash(k, 8), 2, 77) == e);
    CHECK(keydir_get_at(&kd, keydir_hash(k, 8), 2, 78) == NULL);
    CHECK(keydir_get_at(&kd, keydir_hash(k, 8), 3, 77) == NULL);
    for (uint32_t i = 0; i < 100000; i += 997) {
        uint8_t q[8] = { 0, (uint8_t)i, 0, (uint8_t)(i >> 8), 0, (uint8_t)(i >> 16), 0xff, 0 };
        kd_entry *x = keydir_get_at(&kd, keydir_hash(q, 8), 2, i);
        CHECK(x && x->txn == i && x->key_len == 8 && memcmp(x->key, q, 8) == 0);
    }
    CHECK(keydir_memory(&kd) > 100000 * 8);
    keydir_free(&kd);
}

/* keydir_scan: every key present from the first step to the last is given at least once,
   while the table grows (and runs shift from deletions) between steps; the old SCAN
   cursor (a count of keys passed) skipped keys once the table grew. */
typedef struct seen_set {
    unsigned char seen[20000];
    size_t given;
} seen_set;

static void note_seen(void *ctx, kd_entry *e)
{
    seen_set *s = ctx;
    char k[16];
    memcpy(k, e->key, e->key_len);
    k[e->key_len] = 0;
    int i = atoi(k + 1);
    if (i >= 0 && i < 20000) s->seen[i] = 1;
    s->given++;
}

static void scan_put(keydir *kd, int i)
{
    char k[16];
    int len = snprintf(k, sizeof k, "k%d", i);
    kd_entry old;
    REQUIRE(keydir_put(kd, k, (uint16_t)len, keydir_hash(k, (size_t)len), 1, 1, 0, 1, 0, 0, &old) == HANU_OK);
}

static void test_scan_survives_growth(void)
{
    for (int round = 0; round < 3; round++) {
        keydir kd;
        keydir_init(&kd);
        for (int i = 0; i < 1000; i++) scan_put(&kd, i);   /* present all along */
        for (int i = 10000; i < 10300; i++) scan_put(&kd, i);   /* deleted midway */
        static seen_set s;
        memset(&s, 0, sizeof s);
        uint64_t cursor = 0;
        int steps = 0, grown = 0;
        do {
            keydir_scan(&kd, &cursor, 7, note_seen, &s);
            steps++;
            if (steps == 5 + round * 20) {   /* grow the table twice over, and shift runs */
                size_t cap = kd.cap;
                for (int i = 1000; i < 1000 + 3000 * (round + 1); i++) scan_put(&kd, i);
                for (int i = 10000; i < 10300; i++) {
                    char k[16];
                    int len = snprintf(k, sizeof k, "k%d", i);
                    kd_entry old;
                    keydir_delete(&kd, k, (uint16_t)len, keydir_hash(k, (size_t)len), &old);
                }
                grown = kd.cap > cap;
            }
        } while (cursor != 0 && steps < 100000);
        CHECK(grown);
        CHECK_EQ(cursor, 0);
        int missing = 0;
        for (int i = 0; i < 1000; i++) missing += !s.seen[i];
        CHECK_EQ(missing, 0);
        CHECK(s.given < 3 * kd.count);   /* a pass, not a pass per step */
        keydir_free(&kd);
    }
    /* an empty table ends at once */
    keydir kd;
    keydir_init(&kd);
    uint64_t cursor = 12345;
    seen_set s = {0};
    keydir_scan(&kd, &cursor, 10, note_seen, &s);
    CHECK_EQ(cursor, 0);
    CHECK_EQ(s.given, 0);
}

int main(void)
{
    RUN(test_random_against_reference);
    RUN(test_reserve_and_binary_keys);
    RUN(test_scan_survives_growth);
    TEST_DONE();
}
