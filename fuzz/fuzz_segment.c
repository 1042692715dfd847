/*
 * fuzz_segment.c: libFuzzer target for the segment decoder (src/bucket/segment.h),
 * the reader of every segment a rebuild or audit fetches from a bucket. A random
 * input rarely carries a valid SHA-256 trailer, so the input's length picks how much
 * of it is made valid first, to reach the checks behind the trailer:
 *   length % 3 == 0  the bytes as they are;
 *   length % 3 == 1  the header's compressed length and the trailer fixed;
 *   length % 3 == 2  the first 96 bytes are a header, the rest uncompressed records:
 *                    compressed, lengths and trailer fixed (reaches the record walk).
 * A decoded segment must hold exactly the header's record count, each record inside
 * the decoded bytes, in txn order; nothing may crash or read out of bounds.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <zstd.h>
#include "bucket/segment.h"

static void check(const uint8_t *data, size_t size)
{
    segment s;
    char err[256];
    if (segment_decode(data, size, &s, err, sizeof err) != HANU_OK) {
        assert(err[0] != 0);
        return;
    }
    const segment_header *h = &s.header;
    assert(h->record_count >= 1 && h->first_txn <= h->last_txn);
    uint64_t prev = h->first_txn;
    for (uint32_t i = 0; i < h->record_count; i++) {
        const segment_record *r = &s.records[i];
        assert(r->key >= s.raw && r->key + r->key_len <= s.raw + h->raw_len);
        assert(r->value >= s.raw && r->value + r->value_len <= s.raw + h->raw_len);
        assert(r->txn >= prev && r->txn <= h->last_txn);
        prev = r->txn;
    }
    assert(prev == h->last_txn);
    segment_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size % 3 == 0 || size < SEGMENT_HEADER_SIZE) {
        check(data, size);
        return 0;
    }
    size_t payload = size - SEGMENT_HEADER_SIZE;
    size_t bound = size % 3 == 2 ? ZSTD_compressBound(payload) : payload;
    uint8_t *obj = malloc(SEGMENT_HEADER_SIZE + bound + SEGMENT_HASH_SIZE);
    if (!obj) abort();
    memcpy(obj, data, SEGMENT_HEADER_SIZE);
    size_t clen = payload;
    if (size % 3 == 2) {
        clen = ZSTD_compress(obj + SEGMENT_HEADER_SIZE, bound, data + SEGMENT_HEADER_SIZE, payload, 1);
        assert(!ZSTD_isError(clen));
        hanu_put_u64(obj + 80, payload);   /* raw length */
    } else if (payload) {
        memcpy(obj + SEGMENT_HEADER_SIZE, data + SEGMENT_HEADER_SIZE, payload);
    }
    hanu_put_u64(obj + 88, clen);          /* compressed length */
    SHA256(obj, SEGMENT_HEADER_SIZE + clen, obj + SEGMENT_HEADER_SIZE + clen);
    check(obj, SEGMENT_HEADER_SIZE + clen + SEGMENT_HASH_SIZE);
    free(obj);
    return 0;
}
