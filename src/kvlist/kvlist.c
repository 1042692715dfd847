/*
 * kvlist.c: the chunked Redis list's encodings and its background reclaim pass
 * (kvlist.h says the shape).
 */
#include "kvlist/kvlist.h"

#include <stdlib.h>
#include <string.h>

/* ---- chunks ---- */

int kvlist_chunk_valid(const uint8_t *v, size_t n, uint32_t *count)
{
    if (n < KVLIST_CHUNK_OVERHEAD) return 0;
    uint32_t want = hanu_get_u32(v);
    size_t pos = KVLIST_CHUNK_OVERHEAD;
    for (uint32_t i = 0; i < want; i++) {
        if (n - pos < KVLIST_ELEM_OVERHEAD) return 0;
        uint32_t len = hanu_get_u32(v + pos);
        pos += KVLIST_ELEM_OVERHEAD;
        if (n - pos < len) return 0;
        pos += len;
    }
    if (pos != n) return 0;
    *count = want;
    return 1;
}

void kvlist_chunk_split(const uint8_t *v, uint32_t count, kvlist_elem *a)
{
    size_t pos = KVLIST_CHUNK_OVERHEAD;
    for (uint32_t i = 0; i < count; i++) {
        a[i].len = hanu_get_u32(v + pos);
        a[i].p = v + pos + KVLIST_ELEM_OVERHEAD;
        pos += KVLIST_ELEM_OVERHEAD + a[i].len;
    }
}

int kvlist_chunk_encode(const kvlist_elem *a, uint32_t n, hanu_buf *out)
{
    size_t total = KVLIST_CHUNK_OVERHEAD;
    for (uint32_t i = 0; i < n; i++) total += KVLIST_ELEM_OVERHEAD + a[i].len;
    if (hanu_buf_reserve(out, total) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *w = out->data + out->len;
    hanu_put_u32(w, n);
    w += KVLIST_CHUNK_OVERHEAD;
    for (uint32_t i = 0; i < n; i++) {
        hanu_put_u32(w, a[i].len);
        if (a[i].len) memcpy(w + KVLIST_ELEM_OVERHEAD, a[i].p, a[i].len);
        w += KVLIST_ELEM_OVERHEAD + a[i].len;
    }
    out->len += total;
    return HANU_OK;
}

uint32_t kvlist_pack(const kvlist_elem *a, uint32_t n, int from_end)
{
    uint64_t bytes = KVLIST_CHUNK_OVERHEAD;
    uint32_t k = 0;
    while (k < n && k < KVLIST_CHUNK_MAX_ELEMS) {
        const kvlist_elem *e = &a[from_end ? n - 1 - k : k];
        uint64_t next = bytes + KVLIST_ELEM_OVERHEAD + e->len;
        if (k > 0 && next > KVLIST_CHUNK_TARGET_BYTES) break;
        bytes = next;
        k++;
    }
    return k;
}

/* ---- heads ---- */

size_t kvlist_head_size(uint32_t nchunks) { return KVLIST_HEAD_FIXED + (size_t)nchunks * KVLIST_HEAD_PER_CHUNK; }

int kvlist_head_reserve(kvlist_head *h, uint32_t n)
{
    if ((uint64_t)h->nchunks + n <= h->cap) return HANU_OK;
    uint64_t want = (uint64_t)h->nchunks + n, cap = h->cap ? h->cap : 8;
    while (cap < want) cap *= 2;
    if (cap > UINT32_MAX) return HANU_ERR_NOMEM;
    kvlist_chunk_ref *c = realloc(h->chunks, (size_t)cap * sizeof *c);
    if (!c) return HANU_ERR_NOMEM;
    h->chunks = c;
    h->cap = (uint32_t)cap;
    return HANU_OK;
}

int kvlist_head_decode(const uint8_t *v, size_t n, kvlist_head *h)
{
    memset(h, 0, sizeof *h);
    if (n >= 4 && hanu_get_u32(v) != KVLIST_MAGIC) {   /* the old format: one inline chunk */
        uint32_t count;
        if (!kvlist_chunk_valid(v, n, &count)) return HANU_ERR_CORRUPT;
        h->inline_value = v;
        h->inline_len = n;
        if (!count) return HANU_OK;
        if (kvlist_head_reserve(h, 1) != HANU_OK) return HANU_ERR_NOMEM;
        h->chunks[0] = (kvlist_chunk_ref){ .seq = 0, .count = count,
                                           .bytes = (uint32_t)(n - KVLIST_CHUNK_OVERHEAD - 4ull * count) };
        h->nchunks = 1;
        h->count = count;
        h->bytes = h->chunks[0].bytes;
        return HANU_OK;
    }
    if (n < KVLIST_HEAD_FIXED || v[4] != KVLIST_VERSION) return HANU_ERR_CORRUPT;
    uint64_t id = hanu_get_u64(v + 5);
    uint32_t nchunks = hanu_get_u32(v + 17);
    if (id == 0 || nchunks > KVLIST_MAX_CHUNKS || n != kvlist_head_size(nchunks)) return HANU_ERR_CORRUPT;
    if (kvlist_head_reserve(h, nchunks ? nchunks : 1) != HANU_OK) return HANU_ERR_NOMEM;
    h->id = id;
    h->next_seq = hanu_get_u32(v + 13);
    const uint8_t *p = v + KVLIST_HEAD_FIXED;
    for (uint32_t i = 0; i < nchunks; i++, p += KVLIST_HEAD_PER_CHUNK) {
        kvlist_chunk_ref r = { hanu_get_u32(p), hanu_get_u32(p + 4), hanu_get_u32(p + 8) };
        if (r.count == 0 || r.count > KVLIST_CHUNK_MAX_ELEMS) {
            kvlist_head_free(h);
            return HANU_ERR_CORRUPT;
        }
        h->chunks[i] = r;
        h->count += r.count;
        h->bytes += r.bytes;
    }
    h->nchunks = nchunks;
    if (h->count > KVLIST_MAX_ELEMS || h->bytes > KVLIST_MAX_BYTES) {
        kvlist_head_free(h);
        return HANU_ERR_CORRUPT;
    }
    return HANU_OK;
}

int kvlist_head_encode(const kvlist_head *h, hanu_buf *out)
{
    size_t n = kvlist_head_size(h->nchunks);
    if (hanu_buf_reserve(out, n) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *w = out->data + out->len;
    hanu_put_u32(w, KVLIST_MAGIC);
    w[4] = KVLIST_VERSION;
    hanu_put_u64(w + 5, h->id);
    hanu_put_u32(w + 13, h->next_seq);
    hanu_put_u32(w + 17, h->nchunks);
    w += KVLIST_HEAD_FIXED;
    for (uint32_t i = 0; i < h->nchunks; i++, w += KVLIST_HEAD_PER_CHUNK) {
        hanu_put_u32(w, h->chunks[i].seq);
        hanu_put_u32(w + 4, h->chunks[i].count);
        hanu_put_u32(w + 8, h->chunks[i].bytes);
    }
    out->len += n;
    return HANU_OK;
}

void kvlist_head_free(kvlist_head *h)
{
    free(h->chunks);
    memset(h, 0, sizeof *h);
}

void kvlist_locate(const kvlist_head *h, uint64_t index, uint32_t *chunk, uint32_t *offset)
{
    uint32_t i = 0;
    if (index >= h->count / 2) {   /* from the back: the tail is as near as the head */
        uint64_t after = h->count;
        i = h->nchunks;
        while (i > 0 && after - h->chunks[i - 1].count > index) after -= h->chunks[--i].count;
        i--;
        *chunk = i;
        *offset = (uint32_t)(index - (after - h->chunks[i].count));
        return;
    }
    while (index >= h->chunks[i].count) index -= h->chunks[i++].count;
    *chunk = i;
    *offset = (uint32_t)index;
}

uint32_t kvlist_new_seq(kvlist_head *h)
{
    for (;;) {   /* the numbers wrap after 2^32 chunks: skip one still in use */
        uint32_t seq = h->next_seq++;
        uint32_t i = 0;
        while (i < h->nchunks && h->chunks[i].seq != seq) i++;
        if (i == h->nchunks) return seq;
    }
}

/* ---- keys ---- */

void kvlist_chunk_key(uint8_t out[KVLIST_CHUNK_KEY_LEN], uint64_t id, uint32_t seq)
{
    memcpy(out, KVLIST_PREFIX, KVLIST_PREFIX_LEN);
    out[KVLIST_PREFIX_LEN] = 'c';
    hanu_put_u64(out + KVLIST_PREFIX_LEN + 1, id);
    hanu_put_u32(out + KVLIST_PREFIX_LEN + 9, seq);
}

void kvlist_owner_key(uint8_t out[KVLIST_OWNER_KEY_LEN], uint64_t id)
{
    memcpy(out, KVLIST_PREFIX, KVLIST_PREFIX_LEN);
    out[KVLIST_PREFIX_LEN] = 'o';
    hanu_put_u64(out + KVLIST_PREFIX_LEN + 1, id);
}

int kvlist_owner_encode(const char *db, const uint8_t *key, size_t key_len, hanu_buf *out)
{
    if (hanu_buf_append(out, db, strlen(db) + 1) != HANU_OK) return HANU_ERR_NOMEM;
    return hanu_buf_append(out, key, key_len);
}

int kvlist_chunk_read(store *s, const kvlist_head *h, uint32_t i, hanu_buf *out)
{
    hanu_buf_reset(out);
    if (!h->id) return hanu_buf_append(out, h->inline_value, h->inline_len);
    uint8_t key[KVLIST_CHUNK_KEY_LEN];
    kvlist_chunk_key(key, h->id, h->chunks[i].seq);
    uint64_t token;
    int rc = store_get(s, STORE_SYSTEM_DB_ID, key, sizeof key, out, &token);
    if (rc == HANU_ERR_NOT_FOUND) return HANU_ERR_CORRUPT;
    if (rc) return rc;
    uint32_t count;
    if (!kvlist_chunk_valid(out->data, out->len, &count) || count != h->chunks[i].count) return HANU_ERR_CORRUPT;
    return HANU_OK;
}

/* ---- the background reclaim pass ---- */

typedef struct gc_key {
    uint64_t id;
    uint32_t seq;
    uint8_t owner;             /* 1: the owner record, 0: a chunk */
} gc_key;

typedef struct gc_ctx {
    gc_key *keys;
    size_t n, cap;
    int nomem;
} gc_ctx;

static int gc_collect(void *p, const uint8_t *key, size_t klen, const uint8_t *v, size_t vlen, uint8_t type)
{
    (void)v, (void)vlen, (void)type;
    gc_ctx *x = p;
    if (klen <= KVLIST_PREFIX_LEN || memcmp(key, KVLIST_PREFIX, KVLIST_PREFIX_LEN) != 0) return 0;
    int owner = key[KVLIST_PREFIX_LEN] == 'o';
    if (!(owner && klen == KVLIST_OWNER_KEY_LEN) && !(key[KVLIST_PREFIX_LEN] == 'c' && klen == KVLIST_CHUNK_KEY_LEN))
        return 0;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        gc_key *k = realloc(x->keys, cap * sizeof *k);
        if (!k) { x->nomem = 1; return 0; }
        x->keys = k;
        x->cap = cap;
    }
    x->keys[x->n++] = (gc_key){ hanu_get_u64(key + KVLIST_PREFIX_LEN + 1),
                                owner ? 0 : hanu_get_u32(key + KVLIST_PREFIX_LEN + 9), (uint8_t)owner };
    return 0;
}

static int gc_key_cmp(const void *a, const void *b)
{
    const gc_key *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return (int)x->owner - (int)y->owner;
}

/* The live head of list id (its owner's key holds a list of that id): OK with *h,
   NOT_FOUND when the list is gone, or a store error. */
static int gc_live_head(store *s, uint64_t id, hanu_buf *scratch, kvlist_head *h)
{
    uint8_t okey[KVLIST_OWNER_KEY_LEN];
    kvlist_owner_key(okey, id);
    uint64_t token, expire;
    hanu_buf_reset(scratch);
    int rc = store_get(s, STORE_SYSTEM_DB_ID, okey, sizeof okey, scratch, &token);
    if (rc) return rc;
    const uint8_t *nul = memchr(scratch->data, 0, scratch->len);
    if (!nul || (size_t)(nul - scratch->data) > STORE_DB_NAME_MAX) return HANU_ERR_NOT_FOUND;
    uint32_t db;
    rc = store_db_lookup(s, (const char *)scratch->data, (size_t)(nul - scratch->data), &db);
    if (rc) return rc;
    size_t koff = (size_t)(nul + 1 - scratch->data);
    hanu_buf val = { 0 };
    uint8_t type;
    rc = store_get_typed(s, db, scratch->data + koff, scratch->len - koff, &val, &token, &expire, &type);
    if (rc == HANU_OK && (type != LOG_TYPE_LIST || kvlist_head_decode(val.data, val.len, h) != HANU_OK))
        rc = HANU_ERR_NOT_FOUND;
    hanu_buf_free(&val);   /* a new-format head keeps no pointer into it */
    if (rc) return rc;
    if (h->id != id) { kvlist_head_free(h); return HANU_ERR_NOT_FOUND; }
    return HANU_OK;
}

int kvlist_gc_step(store *s, uint64_t *cursor, size_t max_scan, size_t *reclaimed)
{
    *reclaimed = 0;
    gc_ctx x = { 0 };
    int rc = store_scan_step(s, STORE_SYSTEM_DB_ID, cursor, max_scan, gc_collect, &x);
    if (rc == HANU_OK && x.nomem) rc = HANU_ERR_NOMEM;
    if (rc || !x.n) { free(x.keys); return rc; }
    qsort(x.keys, x.n, sizeof *x.keys, gc_key_cmp);
    hanu_buf scratch = { 0 }, keys = { 0 };
    size_t ndead = 0;
    for (size_t i = 0; rc == HANU_OK && i < x.n;) {
        size_t end = i;
        while (end < x.n && x.keys[end].id == x.keys[i].id) end++;
        kvlist_head h;
        int live = gc_live_head(s, x.keys[i].id, &scratch, &h);
        if (live != HANU_OK && live != HANU_ERR_NOT_FOUND) { rc = live; break; }
        for (size_t k = i; rc == HANU_OK && k < end; k++) {
            int keep = 0;
            if (live == HANU_OK && x.keys[k].owner) keep = 1;
            for (uint32_t c = 0; live == HANU_OK && !keep && c < h.nchunks; c++) keep = h.chunks[c].seq == x.keys[k].seq;
            if (keep) continue;
            uint8_t key[KVLIST_CHUNK_KEY_LEN];
            if (x.keys[k].owner) kvlist_owner_key(key, x.keys[k].id);
            else kvlist_chunk_key(key, x.keys[k].id, x.keys[k].seq);
            uint8_t len = x.keys[k].owner ? KVLIST_OWNER_KEY_LEN : KVLIST_CHUNK_KEY_LEN;
            if (hanu_buf_append(&keys, &len, 1) != HANU_OK || hanu_buf_append(&keys, key, len) != HANU_OK)
                rc = HANU_ERR_NOMEM;
            ndead++;
        }
        if (live == HANU_OK) kvlist_head_free(&h);
        i = end;
    }
    store_op *ops = rc == HANU_OK && ndead ? calloc(ndead, sizeof *ops) : NULL;
    if (rc == HANU_OK && ndead && !ops) rc = HANU_ERR_NOMEM;
    if (rc == HANU_OK && ndead) {
        size_t pos = 0;
        for (size_t k = 0; k < ndead; k++) {
            uint8_t len = keys.data[pos];
            ops[k] = (store_op){ .kind = STORE_SYSTEM_DELETE, .key = keys.data + pos + 1, .key_len = len };
            pos += 1u + len;
        }
        uint64_t txn;
        rc = store_write(s, STORE_SYSTEM_DB_ID, ops, ndead, STORE_COND_NONE, 0, &txn, NULL);
        if (rc == HANU_OK) *reclaimed = ndead;
    }
    free(ops);
    free(x.keys);
    hanu_buf_free(&scratch);
    hanu_buf_free(&keys);
    return rc;
}

static int count_one(void *p, const uint8_t *key, size_t klen, const uint8_t *v, size_t vlen, uint8_t type)
{
    uint64_t *n = p;
    gc_ctx x = { 0 };
    gc_key one;
    x.keys = &one;
    x.cap = 1;
    gc_collect(&x, key, klen, v, vlen, type);
    if (x.n) n[one.owner]++;
    return 0;
}

int kvlist_count(store *s, uint64_t *chunks, uint64_t *owners)
{
    uint64_t n[2] = { 0, 0 };
    int rc = store_scan_typed(s, STORE_SYSTEM_DB_ID, count_one, n);
    *chunks = n[0];
    *owners = n[1];
    return rc;
}
