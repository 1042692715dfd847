/*
 * bitset_cache.c: a process-wide cache of filter bitmaps (CRoaring), keyed by
 * segment and by the bytes that name the bitmap (an equality term key, or the
 * "scalar at path" set of a column). A segment never changes after it is
 * written, so an entry stays right for as long as the segment is open; the
 * deletions of the segment are applied by the query after the lookup, which
 * is why a new deletion generation does not empty the cache.
 * index_segment_close forgets the segment's entries, so a mapping reused at
 * the same address never meets old entries. Bounded in bytes (LRU).
 */
#include "index/index.h"

#include <pthread.h>
#include <roaring/roaring.h>
#include <stdlib.h>

#define CACHE_MIN_BUCKETS 4096   /* hash chains; doubled to keep at most one entry per chain on average */
#define CACHE_ENTRY_OVERHEAD 96

typedef struct entry {
    struct entry *chain;                 /* same hash bucket */
    struct entry *newer, *older;         /* LRU list */
    struct entry *seg_next, *seg_prev;   /* the segment's entries (index_segment_cache_slot) */
    const index_segment *seg;
    uint64_t hash, bytes;
    roaring_bitmap_t *bm;
    size_t key_len;
    uint8_t key[];
} entry;

static struct {
    pthread_mutex_t mu;
    entry **buckets;
    size_t nbuckets;                     /* a power of two */
    entry *newest, *oldest;
    uint64_t max_bytes, bytes, entries, hits, misses;
} cache = { .mu = PTHREAD_MUTEX_INITIALIZER, .max_bytes = INDEX_BITSET_CACHE_DEFAULT_BYTES };

static uint64_t key_hash(const index_segment *seg, const uint8_t *key, size_t len)
{
    return hanu_hash64(key, len, (uint64_t)(uintptr_t)seg);
}

static void lru_unlink(entry *e)
{
    if (e->newer) e->newer->older = e->older; else cache.newest = e->older;
    if (e->older) e->older->newer = e->newer; else cache.oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(entry *e)
{
    e->older = cache.newest;
    e->newer = NULL;
    if (cache.newest) cache.newest->newer = e; else cache.oldest = e;
    cache.newest = e;
}

static void drop(entry *e)
{
    entry **p = &cache.buckets[e->hash & (cache.nbuckets - 1)];
    while (*p != e) p = &(*p)->chain;
    *p = e->chain;
    lru_unlink(e);
    if (e->seg_next) e->seg_next->seg_prev = e->seg_prev;
    if (e->seg_prev) e->seg_prev->seg_next = e->seg_next;
    else *index_segment_cache_slot(e->seg) = e->seg_next;
    cache.bytes -= e->bytes;
    cache.entries--;
    roaring_bitmap_free(e->bm);
    free(e);
}

/* Doubles the chains (the first call makes them). */
static int grow(void)
{
    size_t n = cache.nbuckets ? cache.nbuckets * 2 : CACHE_MIN_BUCKETS;
    entry **b = calloc(n, sizeof *b);
    if (!b) return HANU_ERR_NOMEM;
    for (size_t i = 0; i < cache.nbuckets; i++)
        for (entry *e = cache.buckets[i], *next; e; e = next) {
            next = e->chain;
            e->chain = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    free(cache.buckets);
    cache.buckets = b;
    cache.nbuckets = n;
    return HANU_OK;
}

static void shrink_to(uint64_t bytes)
{
    while (cache.bytes > bytes && cache.oldest) drop(cache.oldest);
}

void index_bitset_cache_configure(uint64_t max_bytes)
{
    pthread_mutex_lock(&cache.mu);
    cache.max_bytes = max_bytes;
    shrink_to(max_bytes);
    pthread_mutex_unlock(&cache.mu);
}

struct roaring_bitmap_s *index_bitset_cache_get(const index_segment *seg, const uint8_t *key, size_t len)
{
    uint64_t h = key_hash(seg, key, len);
    roaring_bitmap_t *copy = NULL;
    pthread_mutex_lock(&cache.mu);
    entry *e = cache.nbuckets ? cache.buckets[h & (cache.nbuckets - 1)] : NULL;
    while (e && !(e->hash == h && e->seg == seg && e->key_len == len && memcmp(e->key, key, len) == 0)) e = e->chain;
    if (e) {
        lru_unlink(e);
        lru_push(e);
        copy = roaring_bitmap_copy(e->bm);
    }
    if (copy) cache.hits++;
    else cache.misses++;
    pthread_mutex_unlock(&cache.mu);
    return copy;
}

void index_bitset_cache_put(const index_segment *seg, const uint8_t *key, size_t len,
                            const struct roaring_bitmap_s *bm)
{
    uint64_t bytes = roaring_bitmap_size_in_bytes(bm) + len + CACHE_ENTRY_OVERHEAD;
    pthread_mutex_lock(&cache.mu);
    int fits = bytes <= cache.max_bytes / 4;   /* one entry may not flush most of the cache */
    pthread_mutex_unlock(&cache.mu);
    if (!fits) return;
    entry *e = malloc(sizeof *e + len);
    if (!e) return;
    *e = (entry){ .seg = seg, .hash = key_hash(seg, key, len), .bytes = bytes, .key_len = len };
    memcpy(e->key, key, len);
    if (!(e->bm = roaring_bitmap_copy(bm))) { free(e); return; }
    roaring_bitmap_run_optimize(e->bm);
    pthread_mutex_lock(&cache.mu);
    if (cache.entries >= cache.nbuckets && grow() != HANU_OK) {
        pthread_mutex_unlock(&cache.mu);
        roaring_bitmap_free(e->bm);
        free(e);
        return;
    }
    entry **head = &cache.buckets[e->hash & (cache.nbuckets - 1)], *old = *head;
    while (old && !(old->hash == e->hash && old->seg == seg && old->key_len == len && memcmp(old->key, key, len) == 0))
        old = old->chain;
    if (old) drop(old);   /* two queries built the same bitmap at once */
    e->chain = *head;
    *head = e;
    lru_push(e);
    void **list = index_segment_cache_slot(seg);
    e->seg_next = *list;
    if (e->seg_next) e->seg_next->seg_prev = e;
    *list = e;
    cache.bytes += bytes;
    cache.entries++;
    shrink_to(cache.max_bytes);
    pthread_mutex_unlock(&cache.mu);
}

void index_bitset_cache_forget(const index_segment *seg)
{
    pthread_mutex_lock(&cache.mu);
    void **list = index_segment_cache_slot(seg);
    while (*list) drop(*list);
    pthread_mutex_unlock(&cache.mu);
}

void index_bitset_cache_get_stats(index_bitset_cache_stats *st)
{
    pthread_mutex_lock(&cache.mu);
    *st = (index_bitset_cache_stats){ cache.hits, cache.misses, cache.bytes, cache.entries, cache.max_bytes };
    pthread_mutex_unlock(&cache.mu);
}
