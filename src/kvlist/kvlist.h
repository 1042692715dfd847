/*
 * kvlist: how a Redis list of the Redis face is kept in the store (docs/FORMATS.md,
 * "Redis lists"), so that a push or a pop costs one chunk and the list's head, not
 * the whole list.
 *
 * The user key holds the list's head, a value of type LOG_TYPE_LIST (log op 7):
 * the list's id, and per chunk its sequence number, element count and element
 * bytes. The elements live in chunks, records of the system database
 * (STORE_SYSTEM_DB_ID) under the key "rlst\0" 'c' id seq, each encoded as a list
 * value of the old format (u32 count, then u32 length and bytes per element). The
 * record "rlst\0" 'o' id names the key that owns list id (its database's name and
 * key): the background pass (kvlist_gc_step) deletes chunks and owners whose head
 * is gone (DEL, SET over the list, an expiry, FLUSHDB, a write of another face).
 * The id never repeats, so RENAME moves only the head (and rewrites the owner).
 *
 * A head of the old format (the whole list in the user key's value, before
 * chunks) reads as a list of one chunk held inline; the next write converts it.
 *
 * Every function here is pure but kvlist_gc_step and kvlist_count (they read the
 * store; the writer thread calls the first, any thread the second).
 */
#ifndef HANU_KVLIST_H
#define HANU_KVLIST_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "store/store.h"

/* Limits (docs/RESP.md): a chunk takes elements while it holds fewer than
   KVLIST_CHUNK_MAX_ELEMS and its encoding stays within KVLIST_CHUNK_TARGET_BYTES
   (an element bigger than that gets a chunk of its own, up to --max-value). */
#define KVLIST_CHUNK_MAX_ELEMS 256u
#define KVLIST_CHUNK_TARGET_BYTES 8192u
#define KVLIST_MAX_CHUNKS 16384u
#define KVLIST_MAX_ELEMS 4194304u                 /* elements in one list */
#define KVLIST_MAX_BYTES (1ull << 30)             /* element bytes in one list */
#define KVLIST_ELEM_OVERHEAD 4u                   /* an element's length in a chunk */
#define KVLIST_CHUNK_OVERHEAD 4u                  /* a chunk's count */

#define KVLIST_MAGIC 0xFFFFFFFFu                  /* never an old list's count */
#define KVLIST_VERSION 1
#define KVLIST_HEAD_FIXED 21u                     /* magic, version, id, next seq, chunk count */
#define KVLIST_HEAD_PER_CHUNK 12u                 /* seq, count, bytes */
#define KVLIST_PREFIX "rlst"                      /* with its NUL: 5 bytes */
#define KVLIST_PREFIX_LEN 5u
#define KVLIST_CHUNK_KEY_LEN (KVLIST_PREFIX_LEN + 1 + 8 + 4)
#define KVLIST_OWNER_KEY_LEN (KVLIST_PREFIX_LEN + 1 + 8)

typedef struct kvlist_elem {
    const uint8_t *p;
    uint32_t len;
} kvlist_elem;

typedef struct kvlist_chunk_ref {
    uint32_t seq;
    uint32_t count;            /* elements, at least one */
    uint32_t bytes;            /* element bytes, without the framing */
} kvlist_chunk_ref;

typedef struct kvlist_head {
    uint64_t id;               /* 0: the old format, the whole list inline */
    uint32_t next_seq;         /* the next chunk gets it (or the next free one) */
    uint32_t nchunks, cap;
    kvlist_chunk_ref *chunks;  /* malloc'd */
    uint64_t count, bytes;     /* sums over the chunks */
    const uint8_t *inline_value;   /* old format: the value, its single chunk */
    size_t inline_len;
} kvlist_head;

/* A chunk's encoding (also the old format's whole value): 1 with *count when v
   holds exactly count elements, else 0. */
int kvlist_chunk_valid(const uint8_t *v, size_t n, uint32_t *count);
/* The elements of a valid chunk into a[0..count). */
void kvlist_chunk_split(const uint8_t *v, uint32_t count, kvlist_elem *a);
/* Appends the encoding of a[0..n) to out. */
int kvlist_chunk_encode(const kvlist_elem *a, uint32_t n, hanu_buf *out);

/* Decodes a head of either format: OK, CORRUPT (not a list's value, or past the
   limits), NOMEM. An old-format head points into v (inline_value). */
int kvlist_head_decode(const uint8_t *v, size_t n, kvlist_head *h);
/* The encoding of a new-format head (h->id != 0), appended to out. */
int kvlist_head_encode(const kvlist_head *h, hanu_buf *out);
size_t kvlist_head_size(uint32_t nchunks);
void kvlist_head_free(kvlist_head *h);
/* The chunk holding element index (< h->count) and its offset there. O(chunks). */
void kvlist_locate(const kvlist_head *h, uint64_t index, uint32_t *chunk, uint32_t *offset);
/* A sequence number no chunk of h has, from h->next_seq on (which moves past it). */
uint32_t kvlist_new_seq(kvlist_head *h);
/* Makes room for n more chunk refs. */
int kvlist_head_reserve(kvlist_head *h, uint32_t n);

/* How many of a[0..n) the next chunk takes, packing from the front (from_end 0) or
   from the back (1: the chunk ends at a[n - 1]). At least one when n > 0. */
uint32_t kvlist_pack(const kvlist_elem *a, uint32_t n, int from_end);

void kvlist_chunk_key(uint8_t out[KVLIST_CHUNK_KEY_LEN], uint64_t id, uint32_t seq);
void kvlist_owner_key(uint8_t out[KVLIST_OWNER_KEY_LEN], uint64_t id);
/* An owner record's value: the database's name, a NUL, the key. */
int kvlist_owner_encode(const char *db, const uint8_t *key, size_t key_len, hanu_buf *out);

/* Reads chunk i of h from the store (system database) into out (reset first) and
   checks it: OK, CORRUPT (missing or not what the head says), or a store error.
   For an old-format head, the inline value. */
int kvlist_chunk_read(store *s, const kvlist_head *h, uint32_t i, hanu_buf *out);

/* The background pass (writer thread, leader only): looks at up to max_scan keys
   of the system database from *cursor (0 starts a pass, 0 again at its end) and
   deletes, in one record, the chunks and owners of lists whose head is gone or
   no longer names them. *reclaimed gets how many keys it deleted. */
int kvlist_gc_step(store *s, uint64_t *cursor, size_t max_scan, size_t *reclaimed);
/* How many chunk and owner records the system database holds (a whole scan). */
int kvlist_count(store *s, uint64_t *chunks, uint64_t *owners);

#endif
