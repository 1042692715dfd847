/*
 * store_watch.c: the keys some Redis connection WATCHes, each with a count of the
 * writes that touched it (store.h: store_watch).
 *
 * A key's token says whether it changed while it exists, but not that it was
 * created and deleted again between WATCH and EXEC: both ends see "absent". Redis
 * aborts that EXEC, so the write path counts touches of watched keys here.
 *
 * Open addressing with linear probing on the 64-bit hash of (database, key);
 * deletion shifts the run back. Two keys with one hash share a count: at worst a
 * spurious abort, never a missed one. Guarded by the store's mutex; empty (and
 * free for every write) while nobody watches.
 */
#include "store/store_internal.h"

#include <stdlib.h>

#define WATCH_MAX_KEYS (1u << 24)   /* watched keys in all: beyond, WATCH fails */

static uint64_t watch_key(uint32_t db, const void *key, size_t key_len)
{
    uint64_t k = keydir_hash(key, key_len) ^ ((uint64_t)db * 0x9E3779B97F4A7C15ull);
    return k ? k : 1;   /* 0 marks a free slot */
}

static size_t watch_find(const store *s, uint64_t k)
{
    size_t mask = s->watch_cap - 1, i = (size_t)(k ^ (k >> 29)) & mask;
    while (s->watch[i].key && s->watch[i].key != k) i = (i + 1) & mask;
    return i;
}

static int watch_grow(store *s)
{
    size_t ncap = s->watch_cap ? s->watch_cap * 2 : 64;
    store_watched *old = s->watch, *n = calloc(ncap, sizeof *n);
    if (!n) return HANU_ERR_NOMEM;
    size_t ocap = s->watch_cap;
    s->watch = n;
    s->watch_cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key) s->watch[watch_find(s, old[i].key)] = old[i];
    free(old);
    return HANU_OK;
}

int store_watch(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *touches)
{
    uint64_t k = watch_key(db, key, key_len);
    int rc = HANU_OK;
    pthread_mutex_lock(&s->mu);
    if (s->watch_count >= WATCH_MAX_KEYS) rc = HANU_ERR_TOO_LARGE;
    else if ((s->watch_count + 1) * 2 > s->watch_cap) rc = watch_grow(s);
    if (rc == HANU_OK) {
        store_watched *w = &s->watch[watch_find(s, k)];
        if (!w->key) {
            *w = (store_watched){ .key = k };
            s->watch_count++;
        }
        w->refs++;
        *touches = w->touches;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void store_unwatch(store *s, uint32_t db, const void *key, size_t key_len)
{
    uint64_t k = watch_key(db, key, key_len);
    pthread_mutex_lock(&s->mu);
    if (s->watch_count) {
        size_t mask = s->watch_cap - 1, i = watch_find(s, k);
        if (s->watch[i].key && --s->watch[i].refs == 0) {
            s->watch[i].key = 0;
            s->watch_count--;
            /* Shift the rest of the run back over the hole. */
            for (size_t j = (i + 1) & mask; s->watch[j].key; j = (j + 1) & mask) {
                size_t home = (size_t)(s->watch[j].key ^ (s->watch[j].key >> 29)) & mask;
                if (((j - home) & mask) >= ((j - i) & mask)) {
                    s->watch[i] = s->watch[j];
                    s->watch[j].key = 0;
                    i = j;
                }
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
}

uint64_t store_watch_touches(store *s, uint32_t db, const void *key, size_t key_len)
{
    uint64_t k = watch_key(db, key, key_len), n = 0;
    pthread_mutex_lock(&s->mu);
    if (s->watch_count) {
        const store_watched *w = &s->watch[watch_find(s, k)];
        if (w->key) n = w->touches;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void store_watch_touch_locked(store *s, uint32_t db, const void *key, size_t key_len)
{
    if (!s->watch_count) return;
    store_watched *w = &s->watch[watch_find(s, watch_key(db, key, key_len))];
    if (w->key) w->touches++;
}

void store_watch_touch(store *s, uint32_t db, const void *key, size_t key_len)
{
    pthread_mutex_lock(&s->mu);
    store_watch_touch_locked(s, db, key, key_len);
    pthread_mutex_unlock(&s->mu);
}
