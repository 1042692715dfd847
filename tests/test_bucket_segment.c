/*
 * test_bucket_segment.c: the segment format (src/bucket/segment.h). Round trips of
 * records, then every kind of damage (corrupted, truncated, extended, reordered,
 * missing and extra segments) refused with its own exact message.
 */
#include "test.h"
#include <openssl/sha.h>
#include "bucket/segment.h"

static const uint8_t zero_hash[SEGMENT_HASH_SIZE];

/* Seals segment seq with n records starting at txn first (two entries share each odd txn). */
static void make_segment(uint64_t seq, const uint8_t prev[SEGMENT_HASH_SIZE], uint64_t first, int n,
                         hanu_buf *out, segment_header *h)
{
    segment_builder b;
    segment_builder_init(&b);
    char key[32], value[64];
    uint64_t txn = first;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key-%llu-%d", (unsigned long long)seq, i);
        snprintf(value, sizeof value, "value %d of segment %llu", i, (unsigned long long)seq);
        segment_record r = { txn, (uint32_t)(i % 3), (uint8_t)(i % 4 == 3 ? 2 : 1), (const uint8_t *)key,
                             (uint32_t)strlen(key), (const uint8_t *)value,
                             (uint32_t)(i % 4 == 3 ? 0 : strlen(value)) };
        if (segment_builder_add(&b, &r) != HANU_OK) abort();
        if (i % 2 == 1) txn++;
    }
    out->len = 0;
    if (segment_seal(&b, seq, prev, 1700000000000ull + seq, 3, out, h) != HANU_OK) abort();
    segment_builder_free(&b);
}

static void test_segment_round_trip(void)
{
    hanu_buf obj = {0};
    segment_header h;
    make_segment(1, zero_hash, 10, 100, &obj, &h);
    CHECK_EQ(h.record_count, 100);
    CHECK_EQ(h.first_txn, 10);
    CHECK_EQ(h.last_txn, 10 + 49);
    CHECK_EQ(obj.len, SEGMENT_HEADER_SIZE + h.compressed_len + SEGMENT_HASH_SIZE);
    segment s;
    char err[200] = "";
    REQUIRE(segment_decode(obj.data, obj.len, &s, err, sizeof err) == HANU_OK);
    CHECK_EQ(s.header.sequence, 1);
    CHECK_EQ(s.header.timestamp_ms, 1700000000001ull);
    CHECK(memcmp(s.header.hash, h.hash, SEGMENT_HASH_SIZE) == 0);
    CHECK(memcmp(s.header.hash, obj.data + obj.len - SEGMENT_HASH_SIZE, SEGMENT_HASH_SIZE) == 0);
    CHECK_EQ(s.records[0].txn, 10);
    CHECK_EQ(s.records[1].txn, 10);
    CHECK_EQ(s.records[99].txn, 59);
    CHECK_EQ(s.records[5].db, 2);
    CHECK_EQ(s.records[3].op, 2);
    CHECK_EQ(s.records[3].value_len, 0);
    CHECK(s.records[7].key_len == strlen("key-1-7") && memcmp(s.records[7].key, "key-1-7", 7) == 0);
    const char *v = "value 8 of segment 1";
    CHECK(s.records[8].value_len == strlen(v) && memcmp(s.records[8].value, v, strlen(v)) == 0);
    segment_free(&s);
    hanu_buf_free(&obj);
}

static void test_segment_builder_refuses(void)
{
    segment_builder b;
    segment_builder_init(&b);
    hanu_buf out = {0};
    segment_header h;
    CHECK_EQ(segment_seal(&b, 1, zero_hash, 0, 3, &out, &h), HANU_ERR_INVALID);   /* empty */
    segment_record r = { 5, 0, 1, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1 };
    CHECK_EQ(segment_builder_add(&b, &r), HANU_OK);
    r.txn = 4;
    CHECK_EQ(segment_builder_add(&b, &r), HANU_ERR_INVALID);                        /* txn goes back */
    r.txn = 6;
    r.op = 9;
    CHECK_EQ(segment_builder_add(&b, &r), HANU_ERR_INVALID);                        /* unknown op */
    r.op = 1;
    r.key_len = SEGMENT_MAX_KEY + 1;
    CHECK_EQ(segment_builder_add(&b, &r), HANU_ERR_TOO_LARGE);
    CHECK_EQ(b.count, 1);
    segment_builder_free(&b);
    hanu_buf_free(&out);
}

static void expect_refused(const uint8_t *data, size_t len, const char *message)
{
    segment s;
    char err[200] = "";
    int rc = segment_decode(data, len, &s, err, sizeof err);
    CHECK_EQ(rc, HANU_ERR_CORRUPT);
    if (strcmp(err, message) != 0) {
        fprintf(stderr, "  got \"%s\"\n  expected \"%s\"\n", err, message);
        CHECK(strcmp(err, message) == 0);
    }
}

/* Rewrites the trailer after an edit, as a forger (or a bug before hashing) would. */
static void rehash(hanu_buf *obj)
{
    segment_header h;
    char err[200];
    size_t body = obj->len - SEGMENT_HASH_SIZE;
    SHA256(obj->data, body, obj->data + body);
    CHECK_EQ(segment_read_header(obj->data, obj->len, &h, err, sizeof err), HANU_OK);
}

static void test_segment_damage_detected(void)
{
    hanu_buf obj = {0}, copy = {0};
    segment_header h;
    make_segment(7, zero_hash, 100, 40, &obj, &h);
    size_t full = obj.len;
    char msg[200];

    /* a flipped bit anywhere in the payload or the header */
    for (size_t at = 0; at < full - SEGMENT_HASH_SIZE; at += 13) {
        copy.len = 0;
        hanu_buf_append(&copy, obj.data, obj.len);
        if (at >= 80 && at < 96) continue;   /* the length fields: the next cases */
        copy.data[at] ^= 0x10;
        segment s;
        char err[200];
        CHECK_EQ(segment_decode(copy.data, copy.len, &s, err, sizeof err), HANU_ERR_CORRUPT);
    }
    copy.len = 0;
    hanu_buf_append(&copy, obj.data, obj.len);
    copy.data[SEGMENT_HEADER_SIZE + 3] ^= 1;
    expect_refused(copy.data, copy.len, "segment 7: trailer checksum mismatch");
    copy.data[SEGMENT_HEADER_SIZE + 3] ^= 1;
    copy.data[full - 1] ^= 1;
    expect_refused(copy.data, copy.len, "segment 7: trailer checksum mismatch");

    /* truncated: by one byte, to the header, to nothing */
    snprintf(msg, sizeof msg, "segment 7 truncated: %zu bytes, header says %zu", full - 1, full);
    expect_refused(obj.data, full - 1, msg);
    expect_refused(obj.data, SEGMENT_HEADER_SIZE + SEGMENT_HASH_SIZE - 1,
                   "segment truncated: 127 bytes, shorter than header and trailer");
    expect_refused(obj.data, 0, "segment truncated: 0 bytes, shorter than header and trailer");

    /* extended */
    copy.len = 0;
    hanu_buf_append(&copy, obj.data, obj.len);
    hanu_buf_append(&copy, "xyz", 3);
    expect_refused(copy.data, copy.len, "segment 7: 3 bytes after the trailer");

    /* zeroed */
    copy.len = 0;
    hanu_buf_append(&copy, obj.data, obj.len);
    memset(copy.data, 0, copy.len);
    expect_refused(copy.data, copy.len, "not a segment: bad magic");

    /* a header that lies under a valid trailer: each field checked against the records */
    snprintf(msg, sizeof msg, "segment 7: compressed frame does not declare %llu bytes",
             (unsigned long long)h.raw_len + 1);
    const struct { size_t at; int width; uint64_t value; const char *message; } lies[] = {
        { 32, 4, 41, "segment 7: record 40 truncated" },                  /* record count */
        { 32, 4, 39, "segment 7: 29 bytes after the last record" },
        { 24, 8, 120, "segment 7: last record txn 119, header says 120" },  /* last txn */
        { 24, 8, 118, "segment 7: record 38 txn 119 out of order" },
        { 80, 8, h.raw_len + 1, msg },                                      /* raw length */
    };
    for (size_t i = 0; i < HANU_ARRAY_LEN(lies); i++) {
        copy.len = 0;
        hanu_buf_append(&copy, obj.data, obj.len);
        if (lies[i].width == 4) hanu_put_u32(copy.data + lies[i].at, (uint32_t)lies[i].value);
        else hanu_put_u64(copy.data + lies[i].at, lies[i].value);
        rehash(&copy);
        expect_refused(copy.data, copy.len, lies[i].message);
    }
    copy.len = 0;
    hanu_buf_append(&copy, obj.data, obj.len);
    copy.data[4] = 2;                   /* version */
    expect_refused(copy.data, copy.len, "segment version 2 unknown (expected 1)");
    hanu_buf_free(&obj);
    hanu_buf_free(&copy);
}

static void test_segment_records_out_of_order(void)
{
    /* Records whose txns go back, sealed by hand (the builder refuses them). */
    segment_builder b;
    segment_builder_init(&b);
    segment_record r = { 9, 0, 1, (const uint8_t *)"a", 1, (const uint8_t *)"1", 1 };
    segment_builder_add(&b, &r);
    r.txn = 12;
    segment_builder_add(&b, &r);
    r.txn = 13;
    segment_builder_add(&b, &r);
    hanu_put_u64(b.raw.data + 2 * (SEGMENT_RECORD_HEADER_SIZE + 2), 11);   /* third record: 13 -> 11 */
    b.last_txn = 13;
    hanu_buf obj = {0};
    segment_header h;
    REQUIRE(segment_seal(&b, 3, zero_hash, 0, 1, &obj, &h) == HANU_OK);
    expect_refused(obj.data, obj.len, "segment 3: record 2 txn 11 out of order");
    segment_builder_free(&b);
    hanu_buf_free(&obj);
}

static void expect_chain_refuses(segment_chain *c, const segment_header *h, const char *message)
{
    char err[200] = "";
    segment_chain saved = *c;
    CHECK_EQ(segment_chain_next(c, h, err, sizeof err), HANU_ERR_CORRUPT);
    if (strcmp(err, message) != 0) {
        fprintf(stderr, "  got \"%s\"\n  expected \"%s\"\n", err, message);
        CHECK(strcmp(err, message) == 0);
    }
    CHECK(memcmp(&saved, c, sizeof saved) == 0);   /* a refused segment leaves the chain as it was */
}

static void test_segment_chain(void)
{
    enum { N = 5 };
    hanu_buf obj[N] = {{0}};
    segment_header h[N];
    uint8_t prev[SEGMENT_HASH_SIZE] = {0};
    for (int i = 0; i < N; i++) {
        make_segment((uint64_t)i + 1, prev, 1 + 10 * (uint64_t)i, 20, &obj[i], &h[i]);
        memcpy(prev, h[i].hash, SEGMENT_HASH_SIZE);
    }
    char err[200];
    segment_chain c;
    segment_chain_init(&c);
    for (int i = 0; i < N; i++) {
        segment_header read;
        REQUIRE(segment_read_header(obj[i].data, obj[i].len, &read, err, sizeof err) == HANU_OK);
        CHECK_EQ(segment_chain_next(&c, &read, err, sizeof err), HANU_OK);
    }
    CHECK_EQ(c.next_sequence, N + 1);
    CHECK_EQ(c.last_txn, 1 + 10 * (N - 1) + 9);

    /* missing: 1, 2, then 4 */
    segment_chain_init(&c);
    segment_chain_next(&c, &h[0], err, sizeof err);
    segment_chain_next(&c, &h[1], err, sizeof err);
    expect_chain_refuses(&c, &h[3], "segment 4 where 3 was expected: segment 3 is missing");
    /* reordered: 1, 2, 3, then 2 again */
    segment_chain_next(&c, &h[2], err, sizeof err);
    expect_chain_refuses(&c, &h[1], "segment 2 where 4 was expected: out of order or repeated");
    /* a missing first segment */
    segment_chain_init(&c);
    expect_chain_refuses(&c, &h[1], "segment 2 where 1 was expected: segment 1 is missing");

    /* extra: another writer's segment 3 after the same 2 (same sequence, other records) */
    hanu_buf fork = {0};
    segment_header fork_h;
    make_segment(3, h[1].hash, 21, 4, &fork, &fork_h);
    segment_chain_init(&c);
    for (int i = 0; i < 3; i++) segment_chain_next(&c, &h[i], err, sizeof err);
    expect_chain_refuses(&c, &fork_h, "segment 3 where 4 was expected: out of order or repeated");
    /* a segment 4 sealed after the fork does not follow the real 3 */
    hanu_buf after_fork = {0};
    segment_header after_h;
    make_segment(4, fork_h.hash, 31, 4, &after_fork, &after_h);
    expect_chain_refuses(&c, &after_h, "segment 4: previous hash does not match segment 3's trailer");
    /* txns that do not grow across segments */
    hanu_buf stale = {0};
    segment_header stale_h;
    make_segment(4, h[2].hash, 30, 4, &stale, &stale_h);
    expect_chain_refuses(&c, &stale_h, "segment 4: first txn 30 not above the previous last txn 30");
    hanu_buf_free(&fork);
    hanu_buf_free(&after_fork);
    hanu_buf_free(&stale);
    for (int i = 0; i < N; i++) hanu_buf_free(&obj[i]);
}

static void test_segment_keys(void)
{
    char key[SEGMENT_KEY_SIZE];
    segment_key(7, key);
    CHECK(strcmp(key, "segments/00000000000000000007") == 0);
    uint64_t seq = 0;
    CHECK_EQ(segment_key_parse(key, &seq), HANU_OK);
    CHECK_EQ(seq, 7);
    segment_key(UINT64_MAX, key);
    CHECK(strcmp(key, "segments/18446744073709551615") == 0);
    CHECK_EQ(segment_key_parse(key, &seq), HANU_OK);
    CHECK(seq == UINT64_MAX);
    char a[SEGMENT_KEY_SIZE], b[SEGMENT_KEY_SIZE];
    segment_key(9, a);
    segment_key(10, b);
    CHECK(strcmp(a, b) < 0);   /* listing order is sequence order */
    const char *bad[] = { "segments/0000000000000000007", "segments/000000000000000000070", "segment/00000000000000000007",
                          "segments/0000000000000000000x", "segments/00000000000000000000", "segments/99999999999999999999" };
    for (size_t i = 0; i < HANU_ARRAY_LEN(bad); i++) CHECK_EQ(segment_key_parse(bad[i], &seq), HANU_ERR_INVALID);
}

int main(void)
{
    RUN(test_segment_keys);
    RUN(test_segment_round_trip);
    RUN(test_segment_builder_refuses);
    RUN(test_segment_damage_detected);
    RUN(test_segment_records_out_of_order);
    RUN(test_segment_chain);
    TEST_DONE();
}
