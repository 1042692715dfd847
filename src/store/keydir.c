/*
 * keydir.c: the key directory hash table described in keydir.h.
 */
#include "store/keydir.h"

#include <stdlib.h>
#include <string.h>
#include "base/base.h"

#define KD_PTR_MASK ((1ull << 48) - 1)
#define KD_TAG(h) (((h) >> 48) | 1)   /* never 0, so a used slot is never 0 */
#define KD_SEED 0x9e3779b97f4a7c15ull

void keydir_init(keydir *kd) { memset(kd, 0, sizeof *kd); }

void keydir_free(keydir *kd)
{
    for (size_t i = 0; i < kd->cap; i++)
        if (kd->slots[i]) free((void *)(uintptr_t)(kd->slots[i] & KD_PTR_MASK));
    free(kd->slots);
    keydir_init(kd);
}

uint64_t keydir_hash(const void *key, size_t len) { return hanu_hash64(key, len, KD_SEED); }

static inline kd_entry *slot_entry(uint64_t s) { return (kd_entry *)(uintptr_t)(s & KD_PTR_MASK); }

/* Copies the location fields only: an entry is allocated to its key's length, so a
   whole-struct copy would read past the allocation. */
static void copy_location(kd_entry *dst, const kd_entry *src)
{
    dst->txn = src->txn;
    dst->file_id = src->file_id;
    dst->value_off = src->value_off;
    dst->value_len = src->value_len;
    dst->hash_lo = src->hash_lo;
    dst->flags = src->flags;
}

static size_t entry_size(uint16_t key_len, uint64_t expire_ms)
{
    return offsetof(kd_entry, key) + key_len + (expire_ms ? sizeof expire_ms : 0);
}

static size_t entry_size_of(const kd_entry *e)
{
    return entry_size(e->key_len, e->flags & KD_EXPIRES);
}

static size_t find_slot(const keydir *kd, const void *key, uint16_t len, uint64_t hash, int *found)
{
    size_t mask = kd->cap - 1, i = hash & mask;
    uint64_t tag = KD_TAG(hash);
    for (;;) {
        uint64_t s = kd->slots[i];
        if (!s) { *found = 0; return i; }
        if ((s >> 48) == tag) {
            kd_entry *e = slot_entry(s);
            if (e->key_len == len && memcmp(e->key, key, len) == 0) { *found = 1; return i; }
        }
        i = (i + 1) & mask;
    }
}

kd_entry *keydir_get(const keydir *kd, const void *key, uint16_t len, uint64_t hash)
{
    if (!kd->count) return NULL;
    int found;
    size_t i = find_slot(kd, key, len, hash, &found);
    return found ? slot_entry(kd->slots[i]) : NULL;
}

kd_entry *keydir_get_at(const keydir *kd, uint64_t hash, uint32_t file_id, uint32_t value_off)
{
    if (!kd->count) return NULL;
    size_t mask = kd->cap - 1, i = hash & mask;
    uint64_t tag = KD_TAG(hash);
    for (;; i = (i + 1) & mask) {
        uint64_t s = kd->slots[i];
        if (!s) return NULL;
        if ((s >> 48) != tag) continue;
        kd_entry *e = slot_entry(s);
        if (e->file_id == file_id && e->value_off == value_off) return e;
    }
}

static int resize(keydir *kd, size_t ncap)
{
    uint64_t *ns = calloc(ncap, sizeof *ns);
    if (!ns) return HANU_ERR_NOMEM;
    for (size_t i = 0; i < kd->cap; i++) {
        uint64_t s = kd->slots[i];
        if (!s) continue;
        size_t j = slot_entry(s)->hash_lo & (ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = s;
    }
    free(kd->slots);
    kd->slots = ns;
    kd->cap = ncap;
    return HANU_OK;
}

static int grow(keydir *kd) { return resize(kd, kd->cap ? kd->cap * 2 : 64); }

int keydir_reserve(keydir *kd, size_t n)
{
    size_t cap = kd->cap ? kd->cap : 64;
    while (n * 4 > cap * 3) cap *= 2;
    return cap == kd->cap ? HANU_OK : resize(kd, cap);
}

int keydir_put(keydir *kd, const void *key, uint16_t len, uint64_t hash, uint64_t txn,
               uint32_t file_id, uint32_t value_off, uint32_t value_len, uint64_t expire_ms,
               uint8_t type, kd_entry *old)
{
    old->key_len = 0;
    if ((kd->count + 1) * 4 > kd->cap * 3) {   /* load factor <= 0.75 */
        int rc = grow(kd);
        if (rc) return rc;
    }
    int found;
    size_t i = find_slot(kd, key, len, hash, &found);
    kd_entry *e;
    if (found) {
        e = slot_entry(kd->slots[i]);
        copy_location(old, e);
        old->key_len = len ? len : 1;
        if (!(e->flags & KD_EXPIRES) != !expire_ms) {   /* the entry gains or loses its expiry */
            size_t was = entry_size_of(e), now = entry_size(len, expire_ms);
            kd_entry *n = malloc(now);
            if (!n) return HANU_ERR_NOMEM;
            if ((uintptr_t)n & ~KD_PTR_MASK) { free(n); return HANU_ERR_NOMEM; }
            memcpy(n, e, was < now ? was : now);
            free(e);
            e = n;
            kd->slots[i] = (KD_TAG(hash) << 48) | (uint64_t)(uintptr_t)e;
            kd->entry_bytes += now - was;
        }
    } else {
        e = malloc(entry_size(len, expire_ms));
        if (!e) return HANU_ERR_NOMEM;
        if ((uintptr_t)e & ~KD_PTR_MASK) { free(e); return HANU_ERR_NOMEM; }
        e->key_len = len;
        e->hash_lo = (uint32_t)hash;
        memcpy(e->key, key, len);
        kd->slots[i] = (KD_TAG(hash) << 48) | (uint64_t)(uintptr_t)e;
        kd->count++;
        kd->entry_bytes += entry_size(len, expire_ms);
    }
    e->flags = (uint8_t)((expire_ms ? KD_EXPIRES : 0) | (type ? KD_LIST : 0));
    if (expire_ms) memcpy(e->key + len, &expire_ms, sizeof expire_ms);
    e->txn = txn;
    e->file_id = file_id;
    e->value_off = value_off;
    e->value_len = value_len;
    return HANU_OK;
}

int keydir_delete(keydir *kd, const void *key, uint16_t len, uint64_t hash, kd_entry *old)
{
    if (!kd->count) return 0;
    int found;
    size_t i = find_slot(kd, key, len, hash, &found);
    if (!found) return 0;
    kd_entry *e = slot_entry(kd->slots[i]);
    if (old) { copy_location(old, e); old->key_len = len; }
    kd->entry_bytes -= entry_size_of(e);
    free(e);
    kd->count--;
    /* Backward-shift deletion keeps every probe run unbroken. */
    size_t mask = kd->cap - 1, hole = i, j = i;
    kd->slots[hole] = 0;
    for (;;) {
        j = (j + 1) & mask;
        uint64_t s = kd->slots[j];
        if (!s) break;
        kd_entry *m = slot_entry(s);
        size_t home = m->hash_lo & mask;
        /* m may move to hole when its home is not cyclically in (hole, j]. */
        int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            kd->slots[hole] = s;
            kd->slots[j] = 0;
            hole = j;
        }
    }
    return 1;
}

kd_entry *keydir_next(const keydir *kd, size_t *pos)
{
    while (*pos < kd->cap) {
        uint64_t s = kd->slots[(*pos)++];
        if (s) return slot_entry(s);
    }
    return NULL;
}

static uint64_t reverse_bits(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((v & 0x0F0F0F0F0F0F0F0Full) << 4);
    return __builtin_bswap64(v);
}

void keydir_scan(const keydir *kd, uint64_t *cursor, size_t want, void (*fn)(void *ctx, kd_entry *e), void *ctx)
{
    if (!kd->cap) { *cursor = 0; return; }
    uint64_t mask = kd->cap - 1, v = *cursor;
    size_t given = 0, empty = 0;
    do {
        uint64_t home = v & mask;
        int any = 0;
        /* the run from home to the first empty slot holds every entry whose home it is */
        for (uint64_t at = home; kd->slots[at]; at = (at + 1) & mask) {
            kd_entry *e = slot_entry(kd->slots[at]);
            if ((e->hash_lo & mask) != home) continue;
            fn(ctx, e);
            given++;
            any = 1;
        }
        if (!any) empty++;
        /* the next cursor: increment the reversed bits under the mask */
        v |= ~mask;
        v = reverse_bits(v);
        v++;
        v = reverse_bits(v);
    } while (v && given < want && empty < 10 * want);
    *cursor = v;
}

size_t keydir_memory(const keydir *kd)
{
    return kd->cap * sizeof(uint64_t) + kd->entry_bytes;
}
