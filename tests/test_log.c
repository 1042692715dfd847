/*
 * test_log.c: the frame and file-header codecs, fed good, truncated, zeroed and
 * bit-flipped bytes.
 */
#include "test.h"
#include "log/log.h"

static void build_frame(hanu_buf *b, uint64_t txn)
{
    log_frame_begin(b);
    log_frame_add(b, LOG_OP_PUT, 0, "alpha", 5, "one", 3);
    log_frame_add(b, LOG_OP_DELETE, 7, "beta", 4, NULL, 0);
    log_frame_finish(b, txn);
}

static void test_frame_round_trip(void)
{
    hanu_buf b = {0};
    build_frame(&b, 42);
    log_frame f;
    CHECK_EQ(log_frame_decode(b.data, b.len, &f, NULL), LOG_FRAME_OK);
    CHECK_EQ(f.txn, 42);
    CHECK_EQ(f.entry_count, 2);
    CHECK_EQ(f.size, b.len);
    uint32_t pos = 0;
    log_entry e;
    REQUIRE(log_frame_next_entry(&f, &pos, &e));
    CHECK_EQ(e.op, LOG_OP_PUT);
    CHECK(e.key_len == 5 && memcmp(e.key, "alpha", 5) == 0);
    CHECK(e.value_len == 3 && memcmp(e.value, "one", 3) == 0);
    CHECK(memcmp(b.data + e.value_offset, "one", 3) == 0);
    REQUIRE(log_frame_next_entry(&f, &pos, &e));
    CHECK_EQ(e.op, LOG_OP_DELETE);
    CHECK_EQ(e.db, 7);
    CHECK_EQ(e.value_len, 0);
    CHECK(!log_frame_next_entry(&f, &pos, &e));
    hanu_buf_free(&b);
}

static void test_frame_truncated_is_torn(void)
{
    hanu_buf b = {0};
    build_frame(&b, 1);
    for (size_t n = 1; n < b.len; n++) {
        log_frame f;
        int r = log_frame_decode(b.data, n, &f, NULL);
        CHECK(r == LOG_FRAME_TORN);
    }
    hanu_buf_free(&b);
}

static void test_frame_zeroed_is_end(void)
{
    uint8_t zeros[64] = {0};
    log_frame f;
    CHECK_EQ(log_frame_decode(zeros, sizeof zeros, &f, NULL), LOG_FRAME_END);
    CHECK_EQ(log_frame_decode(zeros, 5, &f, NULL), LOG_FRAME_END);
    CHECK_EQ(log_frame_decode(zeros, 0, &f, NULL), LOG_FRAME_END);
}

static void test_frame_every_bit_flip_detected(void)
{
    hanu_buf b = {0};
    build_frame(&b, 9);
    for (size_t i = 0; i < b.len * 8; i++) {
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
        log_frame f;
        const char *why = NULL;
        int r = log_frame_decode(b.data, b.len, &f, &why);
        CHECK(r != LOG_FRAME_OK);
        b.data[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    log_frame f;
    CHECK_EQ(log_frame_decode(b.data, b.len, &f, NULL), LOG_FRAME_OK);
    hanu_buf_free(&b);
}

static void test_file_header(void)
{
    uint8_t buf[LOG_FILE_HEADER_SIZE];
    log_file_header h = { .flags = LOG_FLAG_COMPACTED, .file_id = 12, .covers_first = 5,
                          .covers_last = 99, .generation = 3 }, g;
    log_file_header_encode(buf, &h);
    CHECK_EQ(log_file_header_decode(buf, &g), HANU_OK);
    CHECK_EQ(g.file_id, 12);
    CHECK_EQ(g.covers_first, 5);
    CHECK_EQ(g.covers_last, 99);
    CHECK_EQ(g.generation, 3);
    CHECK_EQ(g.flags, LOG_FLAG_COMPACTED);
    for (size_t i = 0; i < sizeof buf * 8; i++) {
        buf[i / 8] ^= (uint8_t)(1u << (i % 8));
        CHECK(log_file_header_decode(buf, &g) != HANU_OK);
        buf[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    memset(buf, 0, sizeof buf);
    CHECK(log_file_header_decode(buf, &g) != HANU_OK);
}

static void test_entry_limits(void)
{
    hanu_buf b = {0};
    log_frame_begin(&b);
    CHECK_EQ(log_frame_add(&b, LOG_OP_PUT, 0, "k", 1, NULL, LOG_MAX_FRAME_BODY), HANU_ERR_TOO_LARGE);
    hanu_buf_free(&b);
}

int main(void)
{
    RUN(test_frame_round_trip);
    RUN(test_frame_truncated_is_torn);
    RUN(test_frame_zeroed_is_end);
    RUN(test_frame_every_bit_flip_detected);
    RUN(test_file_header);
    RUN(test_entry_limits);
    TEST_DONE();
}
