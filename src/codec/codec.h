/*
 * codec: integer sequence codecs shared by the facts kernel and the index.
 *
 * A sequence of u64 values (read with a stride, so one lane of an array of
 * structs can be encoded in place) is stored with one of three encodings,
 * whichever is smallest:
 *   constant  every value equals `base`; no payload bytes;
 *   for       frame of reference: value - base bit packed in `bits` bits
 *             (1..CODEC_FOR_MAX_BITS), LSB first, little-endian, no padding;
 *   raw       8 bytes per value, little-endian.
 * A codec_desc (code + base) describes one encoded sequence; the caller keeps
 * it beside the payload. Relies only on base.h (LE load/store).
 *
 * Slack rule: the decoders load 8 bytes at a time, so every buffer a payload is
 * decoded from must have CODEC_SLACK readable bytes after the payload's end,
 * and every buffer codec_pack writes to must have CODEC_SLACK writable bytes
 * after the payload's end (their contents there are unspecified).
 */
#ifndef HANU_CODEC_H
#define HANU_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define CODEC_CONST 0          /* code 0: constant */
#define CODEC_RAW 64           /* code 64: raw u64 */
#define CODEC_FOR_MAX_BITS 56  /* codes 1..56: frame of reference with that many bits */
#define CODEC_SLACK 8

typedef struct codec_desc {
    uint8_t code;     /* CODEC_CONST, 1..CODEC_FOR_MAX_BITS, or CODEC_RAW */
    uint64_t base;    /* constant value or frame of reference; 0 for raw */
} codec_desc;

/* True when code is one of the three valid encodings. */
static inline int codec_code_valid(unsigned code)
{
    return code == CODEC_RAW || code <= CODEC_FOR_MAX_BITS;
}

/* Payload bytes of n values encoded with code. */
static inline size_t codec_payload_size(unsigned code, size_t n)
{
    if (code == CODEC_CONST) return 0;
    if (code == CODEC_RAW) return n * 8;
    return (n * code + 7) / 8;
}

/* Chooses the smallest encoding for v[0], v[stride], ... v[(n-1)*stride]; n > 0. */
codec_desc codec_plan(const uint64_t *v, size_t n, size_t stride);

/* codec_plan for the four interleaved sequences v[4i + l], l = 0..3, in one
 * pass (the four lanes of an array of facts); n > 0. */
void codec_plan4(const uint64_t *v, size_t n, codec_desc out[4]);

/* Encodes the values with d (from codec_plan) into out; returns payload bytes
 * written (codec_payload_size(d.code, n)). */
size_t codec_pack(codec_desc d, const uint64_t *v, size_t n, size_t stride, uint8_t *out);

/* Decodes n values starting at value index `first` of the payload into
 * out[0], out[stride], ... */
void codec_unpack(codec_desc d, const uint8_t *payload, size_t first, size_t n,
                  uint64_t *out, size_t stride);

/* The value at index i of the payload. */
static inline uint64_t codec_get(codec_desc d, const uint8_t *payload, size_t i)
{
    if (d.code == CODEC_CONST) return d.base;
    if (d.code == CODEC_RAW) return hanu_get_u64(payload + i * 8);
    size_t bp = i * d.code;
    uint64_t w = hanu_get_u64(payload + (bp >> 3)) >> (bp & 7);
    return d.base + (w & ((UINT64_C(1) << d.code) - 1));
}

#endif
