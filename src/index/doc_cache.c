/*
 * doc_cache.c: the hot-document cache (docs/INDEX.md, "The document cache").
 * Compact copies of stored documents keyed by (db, _id), bounded in bytes,
 * least recently used out first, in shards so that readers on many threads
 * rarely meet on one lock.
 *
 * Why it never serves a stale document: every entry keeps the txn (the store's
 * token) of the version it copied, and a get serves it only when store_lookup
 * says that txn is still the key's current version at the moment of the get.
 * Txns never repeat, so equal tokens mean the same bytes; whatever a reader
 * has seen before its get (its own write's txn, a newer read) is at or below
 * the current version, which the cache then either has exactly or does not
 * serve. Invalidation on put and delete (the indexer calls it for every
 * change in the feed) only frees the memory of dead copies early; a copy that
 * races with a write (read before it, inserted after its invalidation) is
 * never served either, for the same reason.
 */
#include "index/index.h"
#include "store/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 16
#define ENTRY_OVERHEAD 64        /* bytes counted per entry besides id and document */
#define DOC_MAX_SHARE 8          /* a document larger than a shard's budget / this is not kept */

typedef struct entry {
    struct entry *next;          /* hash chain */
    struct entry *older, *newer; /* recency list */
    uint32_t db, id_len;
    uint64_t hash, txn;
    size_t doc_len;
    char *id, *doc;              /* one allocation after the entry */
} entry;

typedef struct shard {
    pthread_mutex_t mu;
    entry **buckets;
    size_t nbuckets, n;
    uint64_t bytes, budget;
    entry *newest, *oldest;
} shard;

struct doc_cache {
    shard shards[SHARDS];
    atomic_uint_fast64_t hits, misses, evictions, invalidations;
};

static uint64_t key_hash(uint32_t db, const char *id, size_t len)
{
    return hanu_hash64(id, len, db * 0x9e3779b97f4a7c15ull + 1);
}

static size_t entry_size(const entry *e) { return ENTRY_OVERHEAD + e->id_len + e->doc_len; }

doc_cache *doc_cache_new(uint64_t max_bytes)
{
    doc_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_init(&c->shards[i].mu, NULL);
        c->shards[i].budget = max_bytes / SHARDS;
    }
    return c;
}

void doc_cache_free(doc_cache *c)
{
    if (!c) return;
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        for (entry *e = s->newest, *next; e; e = next) {
            next = e->older;
            free(e);
        }
        free(s->buckets);
        pthread_mutex_destroy(&s->mu);
    }
    free(c);
}

static entry **find_slot(shard *s, uint32_t db, const char *id, size_t len, uint64_t h)
{
    if (!s->nbuckets) return NULL;
    entry **p = &s->buckets[h & (s->nbuckets - 1)];
    for (; *p; p = &(*p)->next)
        if ((*p)->hash == h && (*p)->db == db && (*p)->id_len == len && memcmp((*p)->id, id, len) == 0) return p;
    return p;
}

static void unlink_recency(shard *s, entry *e)
{
    if (e->older) e->older->newer = e->newer;
    else s->oldest = e->newer;
    if (e->newer) e->newer->older = e->older;
    else s->newest = e->older;
    e->older = e->newer = NULL;
}

static void push_newest(shard *s, entry *e)
{
    e->older = s->newest;
    e->newer = NULL;
    if (s->newest) s->newest->newer = e;
    s->newest = e;
    if (!s->oldest) s->oldest = e;
}

/* Removes the entry *slot points at (mu held). */
static void remove_at(shard *s, entry **slot)
{
    entry *e = *slot;
    *slot = e->next;
    unlink_recency(s, e);
    s->bytes -= entry_size(e);
    s->n--;
    free(e);
}

static void grow_buckets(shard *s)
{
    if (s->n + 1 <= s->nbuckets) return;
    size_t n = s->nbuckets ? s->nbuckets * 2 : 256;
    entry **b = calloc(n, sizeof *b);
    if (!b) return;   /* chains just get longer */
    for (size_t i = 0; i < s->nbuckets; i++)
        for (entry *e = s->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    free(s->buckets);
    s->buckets = b;
    s->nbuckets = n;
}

void doc_cache_invalidate(doc_cache *c, uint32_t db, const char *id, size_t len)
{
    if (!c) return;
    uint64_t h = key_hash(db, id, len);
    shard *s = &c->shards[h % SHARDS];
    pthread_mutex_lock(&s->mu);
    entry **slot = find_slot(s, db, id, len, h);
    if (slot && *slot) {
        remove_at(s, slot);
        atomic_fetch_add(&c->invalidations, 1);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Keeps a copy of (db, id) at txn, evicting the least recently used. */
static void insert(doc_cache *c, shard *s, uint32_t db, const char *id, size_t len, uint64_t h,
                   const void *doc, size_t doc_len, uint64_t txn)
{
    size_t size = ENTRY_OVERHEAD + len + doc_len;
    if (size > s->budget / DOC_MAX_SHARE) return;
    entry *e = malloc(sizeof *e + len + doc_len);
    if (!e) return;
    *e = (entry){ .db = db, .id_len = (uint32_t)len, .hash = h, .txn = txn, .doc_len = doc_len };
    e->id = (char *)(e + 1);
    e->doc = e->id + len;
    if (len) memcpy(e->id, id, len);
    if (doc_len) memcpy(e->doc, doc, doc_len);
    pthread_mutex_lock(&s->mu);
    entry **slot = find_slot(s, db, id, len, h);
    if (slot && *slot) remove_at(s, slot);   /* whichever copy is older, the token check decides */
    while (s->oldest && s->bytes + size > s->budget) {
        entry *old = s->oldest;
        remove_at(s, find_slot(s, old->db, old->id, old->id_len, old->hash));
        atomic_fetch_add(&c->evictions, 1);
    }
    grow_buckets(s);
    if (!s->nbuckets) {
        pthread_mutex_unlock(&s->mu);
        free(e);
        return;
    }
    slot = &s->buckets[h & (s->nbuckets - 1)];
    e->next = *slot;
    *slot = e;
    push_newest(s, e);
    s->bytes += size;
    s->n++;
    pthread_mutex_unlock(&s->mu);
}

int doc_cache_get(doc_cache *c, store *st, uint32_t db, const char *id, size_t len, hanu_buf *out,
                  uint64_t *txn)
{
    if (!c) return store_get(st, db, id, len, out, txn);
    uint64_t current;
    int rc = store_lookup(st, db, id, len, &current);
    if (rc) return rc;
    uint64_t h = key_hash(db, id, len);
    shard *s = &c->shards[h % SHARDS];
    pthread_mutex_lock(&s->mu);
    entry **slot = find_slot(s, db, id, len, h);
    entry *e = slot ? *slot : NULL;
    if (e && e->txn == current) {   /* the store's current version: serve it */
        unlink_recency(s, e);
        push_newest(s, e);
        rc = hanu_buf_append(out, e->doc, e->doc_len);
        pthread_mutex_unlock(&s->mu);
        if (!rc) {
            atomic_fetch_add(&c->hits, 1);
            if (txn) *txn = current;
        }
        return rc;
    }
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add(&c->misses, 1);
    size_t start = out->len;
    uint64_t got;
    rc = store_get(st, db, id, len, out, &got);
    if (rc) return rc;
    insert(c, s, db, id, len, h, out->data + start, out->len - start, got);
    if (txn) *txn = got;
    return HANU_OK;
}

void doc_cache_get_stats(doc_cache *c, doc_cache_stats *st)
{
    *st = (doc_cache_stats){0};
    if (!c) return;
    st->hits = atomic_load(&c->hits);
    st->misses = atomic_load(&c->misses);
    st->evictions = atomic_load(&c->evictions);
    st->invalidations = atomic_load(&c->invalidations);
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        pthread_mutex_lock(&s->mu);
        st->bytes += s->bytes;
        st->entries += s->n;
        st->budget += s->budget;
        pthread_mutex_unlock(&s->mu);
    }
}
