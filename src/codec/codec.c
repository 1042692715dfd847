/*
 * codec.c: constant / frame-of-reference / raw encodings of u64 sequences
 * (see codec.h for the format). The packer keeps a 64-bit accumulator and
 * stores whole words; the unpacker does one unaligned 8-byte load per value,
 * which is why both need CODEC_SLACK bytes after a payload.
 */
#include "codec/codec.h"

codec_desc codec_plan(const uint64_t *v, size_t n, size_t stride)
{
    uint64_t lo = v[0], hi = v[0];
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i * stride];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
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

size_t codec_pack(codec_desc d, const uint64_t *v, size_t n, size_t stride, uint8_t *out)
{
    if (d.code == CODEC_CONST) return 0;
    if (d.code == CODEC_RAW) {
        for (size_t i = 0; i < n; i++) hanu_put_u64(out + i * 8, v[i * stride]);
        return n * 8;
    }
    const unsigned b = d.code;
    const uint64_t base = d.base;
    uint64_t acc = 0;
    unsigned fill = 0;
    uint8_t *o = out;
    for (size_t i = 0; i < n; i++) {
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
    const uint64_t mask = (UINT64_C(1) << b) - 1, base = d.base;
    size_t bp = first * b;
    for (size_t i = 0; i < n; i++, bp += b) {
        uint64_t w = hanu_get_u64(payload + (bp >> 3)) >> (bp & 7);
        out[i * stride] = base + (w & mask);
    }
}
