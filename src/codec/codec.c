/*
 * codec.c: constant / frame-of-reference / raw encodings of u64 sequences
 * (see codec.h for the format). The packer keeps a 64-bit accumulator and
 * stores whole words; the unpacker does one unaligned 8-byte load per value,
 * which is why both need CODEC_SLACK bytes after a payload.
 */
#include "codec/codec.h"

static codec_desc plan_from_range(uint64_t lo, uint64_t hi)
{
    codec_desc d;
    if (lo == hi) {
        d.code = CODEC_CONST;
        d.base = lo;
        return d;
    }
    unsigned bits = 64u - (unsigned)__builtin_clzll(hi - lo);
    if (bits > CODEC_FOR_MAX_BITS) {
        d.code = CODEC_RAW;
        d.base = 0;
    } else {
        d.code = (uint8_t)bits;
        d.base = lo;
    }
    return d;
}

/* The four lanes' ranges in one pass with eight independent min/max chains
 * (measured: an AVX-512 vpminuq/vpmaxuq version was 30% slower here, its
 * two dependency chains serialise). */
void codec_plan4(const uint64_t *v, size_t n, codec_desc out[4])
{
    uint64_t lo0 = v[0], hi0 = v[0], lo1 = v[1], hi1 = v[1];
    uint64_t lo2 = v[2], hi2 = v[2], lo3 = v[3], hi3 = v[3];
    for (size_t i = 1; i < n; i++) {
        const uint64_t *f = v + i * 4;
        uint64_t a = f[0], b = f[1], c = f[2], d = f[3];
        lo0 = a < lo0 ? a : lo0; hi0 = a > hi0 ? a : hi0;
        lo1 = b < lo1 ? b : lo1; hi1 = b > hi1 ? b : hi1;
        lo2 = c < lo2 ? c : lo2; hi2 = c > hi2 ? c : hi2;
        lo3 = d < lo3 ? d : lo3; hi3 = d > hi3 ? d : hi3;
    }
    out[0] = plan_from_range(lo0, hi0);
    out[1] = plan_from_range(lo1, hi1);
    out[2] = plan_from_range(lo2, hi2);
    out[3] = plan_from_range(lo3, hi3);
}

codec_desc codec_plan(const uint64_t *v, size_t n, size_t stride)
{
    uint64_t lo = v[0], hi = v[0];
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i * stride];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    return plan_from_range(lo, hi);
}

/* Packs groups of 8 values of a constant width b into b bytes each; every
 * shift is a compile-time constant once inlined into a switch case. Writes up
 * to 8 bytes past the last group (the CODEC_SLACK rule). */
static inline __attribute__((always_inline)) void
pack_groups(const uint64_t *v, size_t stride, size_t groups, const unsigned b, uint64_t base,
            uint8_t *o)
{
    for (size_t g = 0; g < groups; g++, v += 8 * stride, o += b) {
        uint64_t acc = 0;
        unsigned fill = 0;
        uint8_t *p = o;
#pragma GCC unroll 8
        for (unsigned j = 0; j < 8; j++) {
            uint64_t x = v[j * stride] - base;
            acc |= x << fill;
            fill += b;
            if (fill >= 64) {
                hanu_put_u64(p, acc);
                p += 8;
                fill -= 64;
                acc = fill ? x >> (b - fill) : 0;
            }
        }
        if (fill) hanu_put_u64(p, acc);
    }
}

size_t codec_pack(codec_desc d, const uint64_t *v, size_t n, size_t stride, uint8_t *out)
{
    if (d.code == CODEC_CONST) return 0;
    if (d.code == CODEC_RAW) {
        for (size_t i = 0; i < n; i++) hanu_put_u64(out + i * 8, v[i * stride]);
        return n * 8;
    }
    const unsigned b = d.code;
    const uint64_t base = d.base;
    size_t groups = n / 8;
    switch (b) {
#define PACK_CASE(B) case B: pack_groups(v, stride, groups, B, base, out); break;
    PACK_CASE(1) PACK_CASE(2) PACK_CASE(3) PACK_CASE(4) PACK_CASE(5) PACK_CASE(6) PACK_CASE(7)
    PACK_CASE(8) PACK_CASE(9) PACK_CASE(10) PACK_CASE(11) PACK_CASE(12) PACK_CASE(13) PACK_CASE(14)
    PACK_CASE(15) PACK_CASE(16) PACK_CASE(17) PACK_CASE(18) PACK_CASE(19) PACK_CASE(20) PACK_CASE(21)
    PACK_CASE(22) PACK_CASE(23) PACK_CASE(24) PACK_CASE(25) PACK_CASE(26) PACK_CASE(27) PACK_CASE(28)
    PACK_CASE(29) PACK_CASE(30) PACK_CASE(31) PACK_CASE(32) PACK_CASE(33) PACK_CASE(34) PACK_CASE(35)
    PACK_CASE(36) PACK_CASE(37) PACK_CASE(38) PACK_CASE(39) PACK_CASE(40) PACK_CASE(41) PACK_CASE(42)
    PACK_CASE(43) PACK_CASE(44) PACK_CASE(45) PACK_CASE(46) PACK_CASE(47) PACK_CASE(48) PACK_CASE(49)
    PACK_CASE(50) PACK_CASE(51) PACK_CASE(52) PACK_CASE(53) PACK_CASE(54) PACK_CASE(55) PACK_CASE(56)
#undef PACK_CASE
    default: groups = 0; break;
    }
    /* the rest (fewer than 8 values) starts on a byte boundary */
    uint64_t acc = 0;
    unsigned fill = 0;
    uint8_t *o = out + groups * b;
    for (size_t i = groups * 8; i < n; i++) {
        uint64_t x = v[i * stride] - base;
        acc |= x << fill;
        fill += b;
        if (fill >= 64) {
            hanu_put_u64(o, acc);
            o += 8;
            fill -= 64;
            /* b <= 56, so the shift is < 64; when fill == 0 it yields 0. */
            acc = x >> (b - fill);
        }
    }
    if (fill > 0) hanu_put_u64(o, acc);
    return codec_payload_size(b, n);
}

static void unpack_generic(const uint8_t *payload, size_t first, size_t n, unsigned b,
                           uint64_t base, uint64_t *out, size_t stride)
{
    const uint64_t mask = (UINT64_C(1) << b) - 1;
    size_t bp = first * b;
    for (size_t i = 0; i < n; i++, bp += b) {
        uint64_t w = hanu_get_u64(payload + (bp >> 3)) >> (bp & 7);
        out[i * stride] = base + (w & mask);
    }
}

/* Groups of 8 values of a constant width b: every offset and shift inside a
 * group is a compile-time constant once this is inlined into a switch case
 * (measured: about twice the generic loop's speed). */
static inline __attribute__((always_inline)) void
unpack_groups(const uint8_t *p, size_t groups, const unsigned b, uint64_t base, uint64_t *out,
              size_t stride)
{
    const uint64_t mask = (UINT64_C(1) << b) - 1;
    for (size_t g = 0; g < groups; g++, p += b, out += 8 * stride) {
#pragma GCC unroll 8
        for (unsigned j = 0; j < 8; j++) {
            unsigned bp = j * b;
            uint64_t w = hanu_get_u64(p + (bp >> 3)) >> (bp & 7);
            out[j * stride] = base + (w & mask);
        }
    }
}

void codec_unpack(codec_desc d, const uint8_t *payload, size_t first, size_t n,
                  uint64_t *out, size_t stride)
{
    if (d.code == CODEC_CONST) {
        for (size_t i = 0; i < n; i++) out[i * stride] = d.base;
        return;
    }
    if (d.code == CODEC_RAW) {
        const uint8_t *p = payload + first * 8;
        if (stride == 1) {
            memcpy(out, p, n * 8);
            return;
        }
        for (size_t i = 0; i < n; i++) out[i * stride] = hanu_get_u64(p + i * 8);
        return;
    }
    const unsigned b = d.code;
    size_t i = 0;
    /* head until the value index is a multiple of 8, where groups of 8 values
     * start on a byte boundary (8 * b bits = b bytes) */
    size_t head = (8 - (first & 7)) & 7;
    if (head > n) head = n;
    unpack_generic(payload, first, head, b, d.base, out, stride);
    i = head;
    size_t groups = (n - i) / 8;
    if (groups) {
        const uint8_t *p = payload + ((first + i) * b >> 3);
        uint64_t *o = out + i * stride;
        switch (b) {
#define UNPACK_CASE(B) case B: unpack_groups(p, groups, B, d.base, o, stride); break;
        UNPACK_CASE(1) UNPACK_CASE(2) UNPACK_CASE(3) UNPACK_CASE(4) UNPACK_CASE(5) UNPACK_CASE(6)
        UNPACK_CASE(7) UNPACK_CASE(8) UNPACK_CASE(9) UNPACK_CASE(10) UNPACK_CASE(11) UNPACK_CASE(12)
        UNPACK_CASE(13) UNPACK_CASE(14) UNPACK_CASE(15) UNPACK_CASE(16) UNPACK_CASE(17) UNPACK_CASE(18)
        UNPACK_CASE(19) UNPACK_CASE(20) UNPACK_CASE(21) UNPACK_CASE(22) UNPACK_CASE(23) UNPACK_CASE(24)
        UNPACK_CASE(25) UNPACK_CASE(26) UNPACK_CASE(27) UNPACK_CASE(28) UNPACK_CASE(29) UNPACK_CASE(30)
        UNPACK_CASE(31) UNPACK_CASE(32) UNPACK_CASE(33) UNPACK_CASE(34) UNPACK_CASE(35) UNPACK_CASE(36)
        UNPACK_CASE(37) UNPACK_CASE(38) UNPACK_CASE(39) UNPACK_CASE(40) UNPACK_CASE(41) UNPACK_CASE(42)
        UNPACK_CASE(43) UNPACK_CASE(44) UNPACK_CASE(45) UNPACK_CASE(46) UNPACK_CASE(47) UNPACK_CASE(48)
        UNPACK_CASE(49) UNPACK_CASE(50) UNPACK_CASE(51) UNPACK_CASE(52) UNPACK_CASE(53) UNPACK_CASE(54)
        UNPACK_CASE(55) UNPACK_CASE(56)
#undef UNPACK_CASE
        default: unpack_generic(payload, first + i, groups * 8, b, d.base, o, stride); break;
        }
        i += groups * 8;
    }
    unpack_generic(payload, first + i, n - i, b, d.base, out + i * stride, stride);
}
