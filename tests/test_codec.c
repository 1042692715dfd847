/*
 * test_codec: round trips of the integer codecs (constant, frame of
 * reference at every bit width, raw) over strides 1 and 4, partial unpacks
 * and single-value reads. Relies on src/codec.
 */
#include "codec/codec.h"
#include "test.h"

static uint64_t rng_state = 0x1234567;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void round_trip(const uint64_t *v, size_t n, size_t stride, int want_code)
{
    static uint8_t buf[70000 * 8 + CODEC_SLACK];
    static uint64_t out[70000 * 4];
    codec_desc d = codec_plan(v, n, stride);
    if (want_code >= 0) CHECK_EQ(d.code, want_code);
    size_t len = codec_pack(d, v, n, stride, buf);
    CHECK_EQ(len, codec_payload_size(d.code, n));
    codec_unpack(d, buf, 0, n, out, stride);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (out[i * stride] != v[i * stride]) bad++;
        if (codec_get(d, buf, i) != v[i * stride]) bad++;
    }
    CHECK_EQ(bad, 0);
    if (n > 3) {   /* partial unpack from the middle */
        size_t first = n / 3, k = n / 2;
        codec_unpack(d, buf, first, k, out, 1);
        bad = 0;
        for (size_t i = 0; i < k; i++) bad += out[i] != v[(first + i) * stride];
        CHECK_EQ(bad, 0);
    }
}

static void test_codec_constant(void)
{
    uint64_t v[300];
    for (int i = 0; i < 300; i++) v[i] = 0xDEADBEEFCAFEULL;
    round_trip(v, 300, 1, CODEC_CONST);
    round_trip(v, 1, 1, CODEC_CONST);
    CHECK_EQ(codec_payload_size(CODEC_CONST, 300), 0);
}

static void test_codec_for_every_width(void)
{
    static uint64_t v[4096 * 4];
    for (unsigned b = 1; b <= CODEC_FOR_MAX_BITS; b++) {
        uint64_t base = rnd();
        uint64_t mask = (UINT64_C(1) << b) - 1;
        size_t sizes[] = { 2, 7, 63, 64, 65, 255, 256, 1000, 4096 };
        for (size_t s = 0; s < HANU_ARRAY_LEN(sizes); s++) {
            size_t n = sizes[s];
            for (size_t i = 0; i < n * 4; i++) v[i] = base + (rnd() & mask);
            v[0] = base;                 /* pin min and max so the width is exactly b */
            v[4] = base + mask;
            v[1] = base;
            v[5] = base + mask;
            if (n < 2) continue;
            round_trip(v, n, 4, (int)b);
            round_trip(v, n, 1, -1);
        }
    }
}

static void test_codec_raw(void)
{
    static uint64_t v[5000];
    for (int i = 0; i < 5000; i++) v[i] = rnd();
    v[0] = 0;
    v[1] = UINT64_MAX;
    round_trip(v, 5000, 1, CODEC_RAW);
    round_trip(v, 1250, 4, CODEC_RAW);
    /* 57..64-bit spans go raw */
    uint64_t w[2] = { 5, 5 + (UINT64_C(1) << 56) };
    round_trip(w, 2, 1, CODEC_RAW);
    uint64_t x[2] = { 5, 5 + (UINT64_C(1) << 56) - 1 };
    round_trip(x, 2, 1, 56);
}

static void test_codec_payload_sizes(void)
{
    CHECK_EQ(codec_payload_size(1, 8), 1);
    CHECK_EQ(codec_payload_size(1, 9), 2);
    CHECK_EQ(codec_payload_size(33, 256), 33 * 32);
    CHECK_EQ(codec_payload_size(CODEC_RAW, 10), 80);
    CHECK(codec_code_valid(0) && codec_code_valid(56) && codec_code_valid(64));
    CHECK(!codec_code_valid(57) && !codec_code_valid(63) && !codec_code_valid(65));
}

int main(void)
{
    RUN(test_codec_constant);
    RUN(test_codec_for_every_width);
    RUN(test_codec_raw);
    RUN(test_codec_payload_sizes);
    TEST_DONE();
}
