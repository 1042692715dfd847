/*
 * keydir.h (internal to store): the in-memory key directory of one database,
 * key -> location of its newest record (file, value offset, length) and txn.
 *
 * Open addressing with linear probing; a slot is one u64: the top 16 bits are
 * a tag from the key's hash, the low 48 bits the entry pointer (x86-64 user
 * addresses fit in 47 bits), so most probes never touch a wrong entry.
 * Deletion shifts the following run back (no tombstones).
 * Not thread-safe: the store's mutex guards it.
 */
#ifndef HANU_KEYDIR_H
#define HANU_KEYDIR_H

#include <stddef.h>
#include <stdint.h>

typedef struct kd_entry {
    uint64_t txn;
    uint32_t file_id;
    uint32_t value_off;     /* absolute offset of the value bytes in the file */
    uint32_t value_len;
    uint32_t hash_lo;       /* low half of the key's hash: rehash without rehashing keys */
    uint16_t key_len;
    uint8_t flags;          /* KD_EXPIRES: the key's expiry follows its bytes */
    uint8_t key[];
} kd_entry;

/* An entry of a key with an expiry carries it (u64, ms since the epoch) right after
   the key bytes, so a key without one pays nothing for the feature but this byte. */
#define KD_EXPIRES 1u
/* The key's newest record is an op 7 holding a Redis list (LOG_TYPE_LIST): reads
   answer the type from the entry, and the record ends with LOG_TYPED_SIZE bytes. */
#define KD_LIST 2u

static inline uint8_t kd_entry_type(const kd_entry *e) { return (e->flags & KD_LIST) ? 1 : 0; }

static inline uint64_t kd_entry_expiry(const kd_entry *e)
{
    if (!(e->flags & KD_EXPIRES)) return 0;
    uint64_t v;
    __builtin_memcpy(&v, e->key + e->key_len, sizeof v);
    return v;
}
/* Whether the entry's key has expired at now_ms (never when it has no expiry). */
static inline int kd_entry_expired(const kd_entry *e, uint64_t now_ms)
{
    return (e->flags & KD_EXPIRES) && kd_entry_expiry(e) <= now_ms;
}

typedef struct keydir {
    uint64_t *slots;
    size_t cap;             /* power of two, or 0 */
    size_t count;
    size_t entry_bytes;     /* bytes allocated for entries, for memory reporting */
} keydir;

void keydir_init(keydir *kd);
/* Makes room for n keys in all without growing (start-up sizes tables from hints). */
int keydir_reserve(keydir *kd, size_t n);
void keydir_free(keydir *kd);
uint64_t keydir_hash(const void *key, size_t len);
kd_entry *keydir_get(const keydir *kd, const void *key, uint16_t len, uint64_t hash);
/* The entry of the key with this hash whose newest record is at (file_id, value_off),
   or NULL: a location names one record, so the key bytes need not be compared
   (compaction repoints entries this way without reading the old file again). */
kd_entry *keydir_get_at(const keydir *kd, uint64_t hash, uint32_t file_id, uint32_t value_off);
/* Starts loading the slot a key will probe first (bulk loads issue it ahead). */
static inline void keydir_prefetch(const keydir *kd, uint64_t hash)
{
    if (kd->cap) __builtin_prefetch(&kd->slots[hash & (kd->cap - 1)]);
}
/* Second stage, a few keys later: the slot is in cache by then, so start loading the
   entry it points to (the first probe's, which is nearly always the key's). */
static inline void keydir_prefetch_entry(const keydir *kd, uint64_t hash)
{
    if (!kd->cap) return;
    uint64_t s = kd->slots[hash & (kd->cap - 1)];
    if (s) __builtin_prefetch((const void *)(uintptr_t)(s & ((1ull << 48) - 1)));
}
/* Inserts or updates; expire_ms 0: no expiry; type a LOG_TYPE_* (0: string). *old gets a copy of the previous location
   and flags (old->key_len = 0 when new). Returns 0 or HANU_ERR_NOMEM. */
int keydir_put(keydir *kd, const void *key, uint16_t len, uint64_t hash, uint64_t txn,
               uint32_t file_id, uint32_t value_off, uint32_t value_len, uint64_t expire_ms,
               uint8_t type, kd_entry *old);
/* Removes; returns 1 and copies the location to *old when the key was there, else 0. */
int keydir_delete(keydir *kd, const void *key, uint16_t len, uint64_t hash, kd_entry *old);
/* Iteration: *pos starts at 0; returns the next entry or NULL at the end. */
kd_entry *keydir_next(const keydir *kd, size_t *pos);
/* Resumable iteration that survives growth (Redis's SCAN): *cursor starts at 0 and is 0
   again when every home slot was visited. Home slots go in reverse-binary order, and a
   home slot's entries (those whose hash puts them there, found along its probe run) are
   given to fn together, so a table that doubles between calls only splits each home slot
   in two that the order has not passed yet: a key present from the first call to the last
   is given at least once. Stops after the home slot where `want` entries were given, or
   after 10 * want empty home slots. */
void keydir_scan(const keydir *kd, uint64_t *cursor, size_t want, void (*fn)(void *ctx, kd_entry *e), void *ctx);
size_t keydir_memory(const keydir *kd);   /* slots + entries, bytes */

#endif
