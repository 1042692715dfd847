/*
 * segment: the format of one sealed segment object, the unit the bucket holds the
 * log in (docs/FORMATS.md, "Segment object"). Pure: bytes in, bytes out, no I/O.
 *
 *   header (96 bytes) | zstd frame of the records | trailer: SHA-256 of all before it
 *
 * Segments form a chain: segment n+1 carries the trailer of segment n as its
 * prev_hash, its sequence is n+1 and its first txn is above n's last txn. The
 * records are the change feed's entries (store.h, store_change) in txn order; one
 * record of the log with several entries gives several entries of one txn.
 */
#ifndef HANU_SEGMENT_H
#define HANU_SEGMENT_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"

#define SEGMENT_MAGIC "HSEG"
#define SEGMENT_VERSION 1
#define SEGMENT_HEADER_SIZE 96
#define SEGMENT_HASH_SIZE 32                    /* SHA-256 */
#define SEGMENT_RECORD_HEADER_SIZE 21           /* txn u64, db u32, op u8, key_len u32, value_len u32 */
#define SEGMENT_MAX_RECORDS 10000000u
#define SEGMENT_MAX_RAW (512u << 20)            /* uncompressed records of one segment */
#define SEGMENT_MAX_KEY (64u << 10)
#define SEGMENT_MAX_VALUE (256u << 20)
#define SEGMENT_OP_MIN 1                        /* store_change.op: 1 put .. 6 put with expiry, 7 typed put */
#define SEGMENT_OP_MAX 7

/* One entry; key and value point into the caller's memory (encode) or into the
   decoded segment (decode). */
typedef struct segment_record {
    uint64_t txn;
    uint32_t db;
    uint8_t op;
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *value;
    uint32_t value_len;
} segment_record;

typedef struct segment_header {
    uint64_t sequence;                          /* 1, 2, 3... */
    uint64_t first_txn;
    uint64_t last_txn;
    uint32_t record_count;                      /* at least 1: an idle sealer writes nothing */
    uint64_t timestamp_ms;                      /* wall clock at sealing, ms since the epoch */
    uint8_t prev_hash[SEGMENT_HASH_SIZE];       /* trailer of the previous segment; zeros for sequence 1 */
    uint64_t raw_len;                           /* records' bytes before compression */
    uint64_t compressed_len;                    /* bytes of the zstd frame */
    uint8_t hash[SEGMENT_HASH_SIZE];            /* this segment's trailer (the next one's prev_hash) */
} segment_header;

/* ---- encoding: add records in txn order, then seal ---- */
typedef struct segment_builder {
    hanu_buf raw;                               /* the uncompressed records */
    uint32_t count;
    uint64_t first_txn, last_txn;
} segment_builder;

void segment_builder_init(segment_builder *b);
/* Appends one record. INVALID when its txn is below the previous record's or its op is
   unknown; TOO_LARGE past a SEGMENT_MAX_* limit; NOMEM. */
int segment_builder_add(segment_builder *b, const segment_record *r);
static inline size_t segment_builder_raw_len(const segment_builder *b) { return b->raw.len; }
/* Compresses the records (zstd at level) into one segment object appended to out, and
   fills *header (hash included). INVALID when no record was added. The builder is
   reset for the next segment. */
int segment_seal(segment_builder *b, uint64_t sequence, const uint8_t prev_hash[SEGMENT_HASH_SIZE],
                 uint64_t timestamp_ms, int level, hanu_buf *out, segment_header *header);
void segment_builder_free(segment_builder *b);

/* ---- decoding ---- */
/* Checks the header and the trailer only (no decompression): CORRUPT with a precise
   message in err when the object is short, long, of another magic or version, or its
   trailer does not match. */
int segment_read_header(const uint8_t *data, size_t len, segment_header *out, char *err, size_t errcap);

typedef struct segment {
    segment_header header;
    segment_record *records;                    /* header.record_count of them */
    uint8_t *raw;                               /* the decompressed records they point into */
} segment;

/* Full validation: the header and trailer, the zstd frame's size, every record's
   lengths, the record count and txn order against the header. On success the caller
   owns *out and frees it with segment_free. CORRUPT with a precise message otherwise. */
int segment_decode(const uint8_t *data, size_t len, segment *out, char *err, size_t errcap);
void segment_free(segment *s);

/* ---- names in the bucket ---- */
/* "segments/" and the sequence in 20 digits, so that listing order is sequence order. */
#define SEGMENT_KEY_PREFIX "segments/"
#define SEGMENT_KEY_SIZE (sizeof SEGMENT_KEY_PREFIX + 20)   /* with the NUL */
void segment_key(uint64_t sequence, char out[SEGMENT_KEY_SIZE]);
/* The sequence a key names: 0, or INVALID for any other key (a stray object). */
int segment_key_parse(const char *key, uint64_t *sequence);

/* ---- the chain ---- */
typedef struct segment_chain {
    uint64_t next_sequence;                     /* what the next segment must carry */
    uint8_t prev_hash[SEGMENT_HASH_SIZE];
    uint64_t last_txn;                          /* the next segment's first txn must be above */
} segment_chain;

/* A chain starting from nothing: sequence 1, zero prev_hash, any txn above 0. */
void segment_chain_init(segment_chain *c);
/* Accepts the next segment's header or refuses it with CORRUPT and a message naming
   the problem: a missing or repeated sequence, a prev_hash that is not the previous
   trailer, txns not above the previous segment's. On success the chain advances. */
int segment_chain_next(segment_chain *c, const segment_header *h, char *err, size_t errcap);

#endif
