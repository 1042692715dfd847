/*
 * segment.c: encoding, validating decoding and chain checks of segment objects
 * (segment.h; the layout is in docs/FORMATS.md, "Segment object"). The decoder
 * trusts nothing: every length is checked against what is left before it is used,
 * and the zstd frame must declare and produce exactly the header's raw length.
 */
#include "bucket/segment.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <zstd.h>

/* Header layout (little-endian), offsets in bytes. */
enum {
    OFF_MAGIC = 0,            /* 4 */
    OFF_VERSION = 4,          /* 1 */
    OFF_FLAGS = 5,            /* 1, zero */
    OFF_RESERVED = 6,         /* 2, zero */
    OFF_SEQUENCE = 8,
    OFF_FIRST_TXN = 16,
    OFF_LAST_TXN = 24,
    OFF_COUNT = 32,           /* u32 */
    OFF_RESERVED2 = 36,       /* u32, zero */
    OFF_TIMESTAMP = 40,
    OFF_PREV_HASH = 48,       /* 32 */
    OFF_RAW_LEN = 80,
    OFF_COMPRESSED_LEN = 88,
};
_Static_assert(OFF_COMPRESSED_LEN + 8 == SEGMENT_HEADER_SIZE, "segment header layout");

static int fail(char *err, size_t errcap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errcap, const char *fmt, ...)
{
    if (err && errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return HANU_ERR_CORRUPT;
}

void segment_builder_init(segment_builder *b) { memset(b, 0, sizeof *b); }

void segment_builder_free(segment_builder *b)
{
    hanu_buf_free(&b->raw);
    segment_builder_init(b);
}

int segment_builder_add(segment_builder *b, const segment_record *r)
{
    if (r->op < SEGMENT_OP_MIN || r->op > SEGMENT_OP_MAX) return HANU_ERR_INVALID;
    if (b->count && r->txn < b->last_txn) return HANU_ERR_INVALID;
    if (r->txn == 0) return HANU_ERR_INVALID;
    if (r->key_len > SEGMENT_MAX_KEY || r->value_len > SEGMENT_MAX_VALUE) return HANU_ERR_TOO_LARGE;
    size_t need = SEGMENT_RECORD_HEADER_SIZE + (size_t)r->key_len + r->value_len;
    if (b->count >= SEGMENT_MAX_RECORDS || b->raw.len + need > SEGMENT_MAX_RAW) return HANU_ERR_TOO_LARGE;
    if (hanu_buf_reserve(&b->raw, need) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *p = b->raw.data + b->raw.len;
    hanu_put_u64(p, r->txn);
    hanu_put_u32(p + 8, r->db);
    p[12] = r->op;
    hanu_put_u32(p + 13, r->key_len);
    hanu_put_u32(p + 17, r->value_len);
    if (r->key_len) memcpy(p + SEGMENT_RECORD_HEADER_SIZE, r->key, r->key_len);
    if (r->value_len) memcpy(p + SEGMENT_RECORD_HEADER_SIZE + r->key_len, r->value, r->value_len);
    b->raw.len += need;
    if (!b->count) b->first_txn = r->txn;
    b->last_txn = r->txn;
    b->count++;
    return HANU_OK;
}

int segment_seal(segment_builder *b, uint64_t sequence, const uint8_t prev_hash[SEGMENT_HASH_SIZE],
                 uint64_t timestamp_ms, int level, hanu_buf *out, segment_header *h)
{
    if (!b->count || sequence == 0) return HANU_ERR_INVALID;
    size_t bound = ZSTD_compressBound(b->raw.len);
    size_t start = out->len;
    if (hanu_buf_reserve(out, SEGMENT_HEADER_SIZE + bound + SEGMENT_HASH_SIZE) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *hdr = out->data + start;
    size_t clen = ZSTD_compress(hdr + SEGMENT_HEADER_SIZE, bound, b->raw.data, b->raw.len, level);
    if (ZSTD_isError(clen)) return HANU_ERR_INVALID;
    memset(h, 0, sizeof *h);
    h->sequence = sequence;
    h->first_txn = b->first_txn;
    h->last_txn = b->last_txn;
    h->record_count = b->count;
    h->timestamp_ms = timestamp_ms;
    memcpy(h->prev_hash, prev_hash, SEGMENT_HASH_SIZE);
    h->raw_len = b->raw.len;
    h->compressed_len = clen;
    memset(hdr, 0, SEGMENT_HEADER_SIZE);
    memcpy(hdr + OFF_MAGIC, SEGMENT_MAGIC, 4);
    hdr[OFF_VERSION] = SEGMENT_VERSION;
    hanu_put_u64(hdr + OFF_SEQUENCE, sequence);
    hanu_put_u64(hdr + OFF_FIRST_TXN, h->first_txn);
    hanu_put_u64(hdr + OFF_LAST_TXN, h->last_txn);
    hanu_put_u32(hdr + OFF_COUNT, h->record_count);
    hanu_put_u64(hdr + OFF_TIMESTAMP, timestamp_ms);
    memcpy(hdr + OFF_PREV_HASH, prev_hash, SEGMENT_HASH_SIZE);
    hanu_put_u64(hdr + OFF_RAW_LEN, h->raw_len);
    hanu_put_u64(hdr + OFF_COMPRESSED_LEN, clen);
    size_t body = SEGMENT_HEADER_SIZE + clen;
    SHA256(hdr, body, h->hash);
    memcpy(hdr + body, h->hash, SEGMENT_HASH_SIZE);
    out->len = start + body + SEGMENT_HASH_SIZE;
    hanu_buf_reset(&b->raw);
    b->count = 0;
    b->first_txn = b->last_txn = 0;
    return HANU_OK;
}

int segment_read_header(const uint8_t *data, size_t len, segment_header *h, char *err, size_t errcap)
{
    if (len < SEGMENT_HEADER_SIZE + SEGMENT_HASH_SIZE)
        return fail(err, errcap, "segment truncated: %zu bytes, shorter than header and trailer", len);
    if (memcmp(data + OFF_MAGIC, SEGMENT_MAGIC, 4) != 0) return fail(err, errcap, "not a segment: bad magic");
    if (data[OFF_VERSION] != SEGMENT_VERSION)
        return fail(err, errcap, "segment version %u unknown (expected %u)", data[OFF_VERSION], SEGMENT_VERSION);
    memset(h, 0, sizeof *h);
    h->sequence = hanu_get_u64(data + OFF_SEQUENCE);
    h->first_txn = hanu_get_u64(data + OFF_FIRST_TXN);
    h->last_txn = hanu_get_u64(data + OFF_LAST_TXN);
    h->record_count = hanu_get_u32(data + OFF_COUNT);
    h->timestamp_ms = hanu_get_u64(data + OFF_TIMESTAMP);
    memcpy(h->prev_hash, data + OFF_PREV_HASH, SEGMENT_HASH_SIZE);
    h->raw_len = hanu_get_u64(data + OFF_RAW_LEN);
    h->compressed_len = hanu_get_u64(data + OFF_COMPRESSED_LEN);
    uint64_t expect = (uint64_t)len - SEGMENT_HEADER_SIZE - SEGMENT_HASH_SIZE;
    if (h->compressed_len < expect)
        return fail(err, errcap, "segment %" PRIu64 ": %" PRIu64 " bytes after the trailer",
                    h->sequence, expect - h->compressed_len);
    if (h->compressed_len > expect)
        return fail(err, errcap, "segment %" PRIu64 " truncated: %zu bytes, header says %" PRIu64,
                    h->sequence, len, h->compressed_len + SEGMENT_HEADER_SIZE + SEGMENT_HASH_SIZE);
    size_t body = len - SEGMENT_HASH_SIZE;
    SHA256(data, body, h->hash);
    if (memcmp(h->hash, data + body, SEGMENT_HASH_SIZE) != 0)
        return fail(err, errcap, "segment %" PRIu64 ": trailer checksum mismatch", h->sequence);
    if (data[OFF_FLAGS] || hanu_get_u16(data + OFF_RESERVED) || hanu_get_u32(data + OFF_RESERVED2))
        return fail(err, errcap, "segment %" PRIu64 ": reserved header bytes not zero", h->sequence);
    if (h->sequence == 0) return fail(err, errcap, "segment sequence 0");
    if (h->record_count == 0 || h->record_count > SEGMENT_MAX_RECORDS)
        return fail(err, errcap, "segment %" PRIu64 ": record count %" PRIu32 " out of range", h->sequence,
                    h->record_count);
    if (h->first_txn == 0 || h->first_txn > h->last_txn)
        return fail(err, errcap, "segment %" PRIu64 ": txn range %" PRIu64 "..%" PRIu64 " invalid", h->sequence,
                    h->first_txn, h->last_txn);
    if (h->raw_len > SEGMENT_MAX_RAW ||
        h->raw_len < (uint64_t)h->record_count * SEGMENT_RECORD_HEADER_SIZE)
        return fail(err, errcap, "segment %" PRIu64 ": raw length %" PRIu64 " invalid for %" PRIu32 " records",
                    h->sequence, h->raw_len, h->record_count);
    return HANU_OK;
}

/* Walks the decompressed records, checking each against the header. */
static int parse_records(segment *s, char *err, size_t errcap)
{
    const segment_header *h = &s->header;
    const uint8_t *p = s->raw, *end = s->raw + h->raw_len;
    uint64_t prev_txn = h->first_txn;
    for (uint32_t i = 0; i < h->record_count; i++) {
        if ((size_t)(end - p) < SEGMENT_RECORD_HEADER_SIZE)
            return fail(err, errcap, "segment %" PRIu64 ": record %" PRIu32 " truncated", h->sequence, i);
        segment_record *r = &s->records[i];
        r->txn = hanu_get_u64(p);
        r->db = hanu_get_u32(p + 8);
        r->op = p[12];
        r->key_len = hanu_get_u32(p + 13);
        r->value_len = hanu_get_u32(p + 17);
        p += SEGMENT_RECORD_HEADER_SIZE;
        if (r->op < SEGMENT_OP_MIN || r->op > SEGMENT_OP_MAX)
            return fail(err, errcap, "segment %" PRIu64 ": record %" PRIu32 " has unknown op %u", h->sequence, i, r->op);
        if (r->key_len > SEGMENT_MAX_KEY || r->value_len > SEGMENT_MAX_VALUE ||
            (uint64_t)r->key_len + r->value_len > (uint64_t)(end - p))
            return fail(err, errcap, "segment %" PRIu64 ": record %" PRIu32 " length exceeds the segment",
                        h->sequence, i);
        r->key = p;
        p += r->key_len;
        r->value = p;
        p += r->value_len;
        if (r->txn < prev_txn || r->txn > h->last_txn || (i == 0 && r->txn != h->first_txn))
            return fail(err, errcap, "segment %" PRIu64 ": record %" PRIu32 " txn %" PRIu64 " out of order",
                        h->sequence, i, r->txn);
        prev_txn = r->txn;
    }
    if (p != end) return fail(err, errcap, "segment %" PRIu64 ": %zu bytes after the last record", h->sequence,
                              (size_t)(end - p));
    if (prev_txn != h->last_txn)
        return fail(err, errcap, "segment %" PRIu64 ": last record txn %" PRIu64 ", header says %" PRIu64,
                    h->sequence, prev_txn, h->last_txn);
    return HANU_OK;
}

int segment_decode(const uint8_t *data, size_t len, segment *s, char *err, size_t errcap)
{
    memset(s, 0, sizeof *s);
    int rc = segment_read_header(data, len, &s->header, err, errcap);
    if (rc != HANU_OK) return rc;
    const segment_header *h = &s->header;
    const uint8_t *frame = data + SEGMENT_HEADER_SIZE;
    unsigned long long declared = ZSTD_getFrameContentSize(frame, h->compressed_len);
    if (declared != h->raw_len)
        return fail(err, errcap, "segment %" PRIu64 ": compressed frame does not declare %" PRIu64 " bytes",
                    h->sequence, h->raw_len);
    s->raw = malloc(h->raw_len ? h->raw_len : 1);
    s->records = calloc(h->record_count, sizeof *s->records);
    if (!s->raw || !s->records) {
        segment_free(s);
        return HANU_ERR_NOMEM;
    }
    size_t got = ZSTD_decompress(s->raw, h->raw_len, frame, h->compressed_len);
    if (ZSTD_isError(got) || got != h->raw_len)
        rc = fail(err, errcap, "segment %" PRIu64 ": records do not decompress", h->sequence);
    else
        rc = parse_records(s, err, errcap);
    if (rc != HANU_OK) segment_free(s);
    return rc;
}

void segment_free(segment *s)
{
    free(s->records);
    free(s->raw);
    s->records = NULL;
    s->raw = NULL;
}

void segment_key(uint64_t sequence, char out[SEGMENT_KEY_SIZE])
{
    snprintf(out, SEGMENT_KEY_SIZE, SEGMENT_KEY_PREFIX "%020" PRIu64, sequence);
}

int segment_key_parse(const char *key, uint64_t *sequence)
{
    size_t plen = sizeof SEGMENT_KEY_PREFIX - 1;
    if (strlen(key) != plen + 20 || strncmp(key, SEGMENT_KEY_PREFIX, plen) != 0) return HANU_ERR_INVALID;
    uint64_t v = 0;
    for (const char *p = key + plen; *p; p++) {
        uint64_t digit = (uint64_t)(*p - '0');
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - digit) / 10) return HANU_ERR_INVALID;
        v = v * 10 + digit;
    }
    if (v == 0) return HANU_ERR_INVALID;
    *sequence = v;
    return HANU_OK;
}

void segment_chain_init(segment_chain *c)
{
    memset(c, 0, sizeof *c);
    c->next_sequence = 1;
}

int segment_chain_next(segment_chain *c, const segment_header *h, char *err, size_t errcap)
{
    if (h->sequence > c->next_sequence)
        return fail(err, errcap, "segment %" PRIu64 " where %" PRIu64 " was expected: segment %" PRIu64 " is missing",
                    h->sequence, c->next_sequence, c->next_sequence);
    if (h->sequence < c->next_sequence)
        return fail(err, errcap, "segment %" PRIu64 " where %" PRIu64 " was expected: out of order or repeated",
                    h->sequence, c->next_sequence);
    if (memcmp(h->prev_hash, c->prev_hash, SEGMENT_HASH_SIZE) != 0)
        return fail(err, errcap, "segment %" PRIu64 ": previous hash does not match segment %" PRIu64 "'s trailer",
                    h->sequence, h->sequence - 1);
    if (h->first_txn <= c->last_txn)
        return fail(err, errcap, "segment %" PRIu64 ": first txn %" PRIu64 " not above the previous last txn %" PRIu64,
                    h->sequence, h->first_txn, c->last_txn);
    c->next_sequence = h->sequence + 1;
    memcpy(c->prev_hash, h->hash, SEGMENT_HASH_SIZE);
    c->last_txn = h->last_txn;
    return HANU_OK;
}
