/*
 * Segment builder: collects one batch of documents in memory (terms with
 * their postings, columns by path) and writes the immutable segment file of
 * segment_format.h in one pass.
 */
#include "index/index.h"
#include "index/segment_format.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

/* A growable array of u32 (postings ordinals and term frequencies). */
typedef struct u32_vec {
    uint32_t *v;
    uint32_t n, cap;
} u32_vec;

static int u32_push(u32_vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? a->cap * 2 : 4;
        uint32_t *v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) return HANU_ERR_NOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return HANU_OK;
}

/* A term's postings: (ordinal, frequency) pairs in one array, so that a new
 * posting costs one append and one growth serves both. */
typedef struct build_term {
    uint32_t key_off, key_len;
    uint32_t *post;             /* post[2i] ordinal, post[2i + 1] term frequency */
    uint32_t n, cap;            /* postings */
    uint32_t last_ord;          /* the last posting's ordinal + 1 (0: none): counting a term
                                   reads no posting, it only appends (a store, not a miss) */
} build_term;

/* Where the terms' postings arrays live: carved from large blocks that are freed
 * together with the builder, so that a term's first postings (most terms have a
 * few: every _id has one) cost no malloc and its growth no realloc or free. An
 * array holds a power of two of pairs; when a term outgrows it, it moves to one
 * twice as large and the old one goes to the free list of its size, which the
 * next term to grow to that size takes. Arrays past ARENA_OWN_PAIRS pairs are
 * the term's own allocation, grown by realloc. */
#define ARENA_BLOCK_U32 (1u << 18)                /* 1 MiB a block */
#define ARENA_OWN_PAIRS (ARENA_BLOCK_U32 / 16)    /* larger arrays: their own allocation */
#define ARENA_SIZES 15                            /* 2^0 .. 2^14 pairs */
typedef struct post_arena {
    uint32_t **blocks;
    uint32_t nblocks, blocks_cap;
    uint32_t used;              /* u32s taken from the last block */
    uint32_t *free[ARENA_SIZES];   /* [log2 of pairs]: arrays given back, linked through their first bytes */
} post_arena;

/* An array of pairs pairs (a power of two, at most ARENA_OWN_PAIRS). A free
 * array's first bytes hold the next free one of its size. */
static uint32_t *arena_take(post_arena *a, uint32_t pairs)
{
    uint32_t size = (uint32_t)__builtin_ctz(pairs), n = 2 * pairs;
    uint32_t *p = a->free[size];
    if (p) {
        memcpy(&a->free[size], (const void *)p, sizeof a->free[size]);
        return p;
    }
    if (!a->nblocks || a->used + n > ARENA_BLOCK_U32) {
        if (a->nblocks == a->blocks_cap) {
            uint32_t cap = a->blocks_cap ? a->blocks_cap * 2 : 16;
            uint32_t **v = realloc(a->blocks, (size_t)cap * sizeof *v);
            if (!v) return NULL;
            a->blocks = v;
            a->blocks_cap = cap;
        }
        uint32_t *block = malloc((size_t)ARENA_BLOCK_U32 * sizeof *block);
        if (!block) return NULL;
        a->blocks[a->nblocks++] = block;
        a->used = 0;
    }
    p = a->blocks[a->nblocks - 1] + a->used;
    a->used += n;
    return p;
}

static void arena_give(post_arena *a, uint32_t *p, uint32_t pairs)
{
    uint32_t size = (uint32_t)__builtin_ctz(pairs);
    memcpy((void *)p, &a->free[size], sizeof a->free[size]);
    a->free[size] = p;
}

static void arena_free(post_arena *a)
{
    for (uint32_t i = 0; i < a->nblocks; i++) free(a->blocks[i]);
    free(a->blocks);
}

static int post_push(post_arena *a, build_term *t, uint32_t ord, uint32_t tf)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 2;
        uint32_t *p;
        if (cap > ARENA_OWN_PAIRS) {
            p = realloc(t->cap > ARENA_OWN_PAIRS ? t->post : NULL, (size_t)cap * 2 * sizeof *p);
            if (p && t->cap <= ARENA_OWN_PAIRS) memcpy(p, t->post, (size_t)t->n * 2 * sizeof *p);
        } else {
            p = arena_take(a, cap);
            if (p && t->n) {
                memcpy(p, t->post, (size_t)t->n * 2 * sizeof *p);
                arena_give(a, t->post, t->cap);
            }
        }
        if (!p) return HANU_ERR_NOMEM;
        t->post = p;
        t->cap = cap;
    }
    t->post[2 * t->n] = ord;
    t->post[2 * t->n + 1] = tf;
    t->n++;
    t->last_ord = ord + 1;
    return HANU_OK;
}

typedef struct build_column {
    uint32_t path_off, path_len;
    uint32_t last_doc;          /* ordinal of the last value set, UINT32_MAX if none */
    uint8_t *tags;              /* per doc, grown to the builder's doc count */
    double *nums;
    uint32_t *str_off, *str_len;   /* into the builder's strings */
    uint32_t *lengths;
    uint32_t cap;
    uint64_t text_total;
} build_column;

/* Open-addressing table from a byte key (in `bytes`) to an index into `items`.
 * A slot keeps the key's hash beside the index, so a probe compares keys only
 * when the hashes agree and growing the table rehashes no key. */
typedef struct key_table {
    uint64_t *slots;            /* (uint32_t)hash << 32 | (index + 1); 0 = empty */
    uint32_t nslots;
} key_table;

#define PEND_TERMS 16   /* terms interned together; the slot of the first is in cache by the last */

/* A distinct token of the batch's text: its bytes (in keys), its whole-text term,
 * its terms in its first two fields, and its occurrences in the current document
 * (counted in the item as the tokens come, taken to the postings once at the next
 * flush_words): a token costs one lookup of the word table, whose slot and item
 * stay in cache, and no posting. */
#define WORD_FIELDS 2      /* a word's first fields' terms kept in its item */
typedef struct build_word {
    uint32_t key_off, key_len;
    uint32_t all_term;          /* the whole text's term + 1; 0 until the token occurs */
    uint32_t field_of[WORD_FIELDS];   /* field + 1 (0: free), whose term is term_of */
    uint32_t term_of[WORD_FIELDS];
    uint32_t doc;               /* the document (ordinal + 1) the counts are of; 0: none */
    uint32_t all_count;         /* occurrences in that document: in the whole text, */
    uint32_t count_of[WORD_FIELDS];   /* in field_of[j] */
} build_word;

/* The word table: a slot holds the word's hash, its length and first 7 bytes, so
 * a probe for a word of at most 7 bytes (most words) compares it in the slot and
 * reads neither the word's item nor its key. */
typedef struct word_slot {
    uint32_t tag;               /* (uint32_t)hash: the home slot, and grows rehash nothing */
    uint32_t word;              /* index into words + 1; 0 = empty */
    uint64_t head;              /* up to 7 bytes of the word, the length (at most 255) above them */
} word_slot;

typedef struct word_table {
    word_slot *slots;
    uint32_t nslots;
} word_table;

/* A text field: the key prefix of its words (path NUL INDEX_KEY_WORD, in keys). */
typedef struct build_field {
    uint32_t key_off, key_len;
} build_field;

/* A token of the current document, kept until flush_words: its word's slot in
 * the word table is prefetched as it comes, so that the flush's lookups find the
 * slots in cache instead of waiting for each in turn. */
typedef struct doc_token {
    uint64_t hash;              /* key_hash of the token */
    uint32_t field;             /* UINT32_MAX: the whole text's word only */
    uint32_t off, len;          /* its bytes in doc_bytes */
    uint32_t word;              /* found by flush_words */
} doc_token;

/* A term of the word path: its key is a field's prefix (or the whole text's) and a word. */
typedef struct word_term {
    uint32_t term;
    uint32_t field;             /* UINT32_MAX: the whole text's */
    uint32_t word;
} word_term;

/* Open addressing from a non-zero u64 to a u32. */
typedef struct pair_table {
    uint64_t *keys;             /* 0 = empty */
    uint32_t *vals;
    uint32_t nslots, count;
} pair_table;

struct index_builder {
    uint32_t docs;
    hanu_buf ids;
    u32_vec id_off;
    uint64_t *txns;
    uint32_t txn_cap;
    hanu_buf keys;              /* term keys and column paths */
    build_term *terms;
    uint32_t nterms, terms_cap;
    post_arena posts;           /* the terms' postings */
    key_table term_index;
    uint32_t last_term;         /* the term index_builder_posting added to last, UINT32_MAX if none */
    uint32_t last_col;          /* the column column_for found last, UINT32_MAX if none (a
                                   string's value and its text length are at one path) */
    build_column *cols;
    uint32_t ncols, cols_cap;
    key_table col_index;
    hanu_buf strings;           /* column string values */
    /* Terms of the current document not yet interned (flush_terms): their
       table slots are prefetched as they arrive, so the lookups that follow
       overlap their cache misses instead of taking them one after another. */
    uint8_t pend_keys[PEND_TERMS][INDEX_KEY_MAX];
    uint32_t pend_len[PEND_TERMS];
    uint64_t pend_hash[PEND_TERMS];
    uint32_t npend;
    /* Text: each distinct token is interned once (words), and a text field's
       term is found by the integer pair (field, word), so a token of a field
       costs one byte-keyed lookup for both of its terms instead of two. */
    build_word *words;
    uint32_t nwords, words_cap;
    word_table word_index;
    build_field *fields;
    uint32_t nfields, fields_cap;
    key_table field_index;
    pair_table field_terms;      /* (field + 1) << 32 | word -> term */
    /* The current document's tokens and then its distinct words (their counts
       are in their items); kept from one document to the next, grown only with
       the largest document, so a document allocates nothing. */
    doc_token *doc_tokens;
    uint32_t ndoc_tokens, doc_tokens_cap;
    hanu_buf doc_bytes;         /* the tokens' bytes */
    u32_vec doc_words;
    void *scratch;              /* index_builder_scratch's */
    size_t scratch_len;
    word_term *word_terms;       /* every term made by the word path, for term_order */
    uint32_t nword_terms, word_terms_cap;
};

index_builder *index_builder_new(void)
{
    index_builder *b = calloc(1, sizeof *b);
    if (b && u32_push(&b->id_off, 0) != HANU_OK) {
        free(b);
        return NULL;
    }
    if (b) b->last_term = b->last_col = UINT32_MAX;
    return b;
}

void index_builder_free(index_builder *b)
{
    if (!b) return;
    for (uint32_t i = 0; i < b->nterms; i++)
        if (b->terms[i].cap > ARENA_OWN_PAIRS) free(b->terms[i].post);
    arena_free(&b->posts);
    for (uint32_t i = 0; i < b->ncols; i++) {
        build_column *c = &b->cols[i];
        free(c->tags);
        free(c->nums);
        free(c->str_off);
        free(c->str_len);
        free(c->lengths);
    }
    free(b->terms);
    free(b->cols);
    free(b->term_index.slots);
    free(b->col_index.slots);
    free(b->words);
    free(b->word_index.slots);
    free(b->fields);
    free(b->field_index.slots);
    free(b->field_terms.keys);
    free(b->field_terms.vals);
    free(b->word_terms);
    free(b->doc_words.v);
    free(b->doc_tokens);
    hanu_buf_free(&b->doc_bytes);
    free(b->scratch);
    free(b->id_off.v);
    free(b->txns);
    hanu_buf_free(&b->ids);
    hanu_buf_free(&b->keys);
    hanu_buf_free(&b->strings);
    free(b);
}

/* ---------------------------------------------------------------- keys */

/* The table's hash of a key: keys are short (a path and a word), so an inline
 * multiply-xorshift over 8-byte words beats a library call. Only this
 * process's tables use it; nothing hashed is stored. */
/* The last len (below 8) bytes of a key as a little-endian word, zeros above
 * them; whole: the key has at least 8 bytes before p + len. Loads whole words
 * (a memcpy of a variable length into a word is byte stores and then a load
 * that waits for them, a third of the cost of hashing a token). */
static inline uint64_t tail_word(const uint8_t *p, uint32_t len, int whole)
{
    if (len == 0) return 0;
    uint64_t w;
    uint32_t a, b;
    if (whole) {
        memcpy(&w, p + len - 8, 8);
        return w >> (64 - 8 * len);
    }
    if (len >= 4) {   /* two words of 4 that overlap: the same bytes where they do */
        memcpy(&a, p, 4);
        memcpy(&b, p + len - 4, 4);
        return a | (uint64_t)b << (8 * (len - 4));
    }
    return (uint64_t)p[0] | (uint64_t)p[len / 2] << (8 * (len / 2)) | (uint64_t)p[len - 1] << (8 * (len - 1));
}

static inline uint64_t key_hash(const uint8_t *p, uint32_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    int whole = len >= 8;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t w = tail_word(p, len, whole);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h *= 0xff51afd7ed558ccdull;
    return h ^ h >> 32;
}

/* Key equality for short keys without a call to memcmp. */
static inline int key_equal(const uint8_t *a, const uint8_t *b, uint32_t len)
{
    for (; len >= 8; a += 8, b += 8, len -= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return 0;
    }
    for (; len; a++, b++, len--)
        if (*a != *b) return 0;
    return 1;
}

/* Room for one more item in a growable array of n items (capacity doubled, from first). */
static int room_for_one(void **items, uint32_t n, uint32_t *cap, size_t item_size, uint32_t first)
{
    if (n < *cap) return HANU_OK;
    uint32_t ncap = *cap ? *cap * 2 : first;
    void *p = realloc(*items, (size_t)ncap * item_size);
    if (!p) return HANU_ERR_NOMEM;
    *items = p;
    *cap = ncap;
    return HANU_OK;
}

/* The key's (offset, length) pair sits at the start of every item. */
static const uint8_t *item_key(const hanu_buf *bytes, const void *items, size_t item_size,
                               uint32_t i, uint32_t *len)
{
    const uint32_t *kv = (const uint32_t *)((const char *)items + (size_t)i * item_size);
    *len = kv[1];
    return bytes->data + kv[0];
}

/* Finds key (hash h); returns its item index or UINT32_MAX, and the slot it is in or would go to. */
static uint32_t table_find(const key_table *t, const hanu_buf *bytes, const void *items,
                           size_t item_size, const uint8_t *key, uint32_t len, uint64_t h,
                           uint32_t *slot)
{
    if (!t->nslots) return UINT32_MAX;
    uint32_t mask = t->nslots - 1;
    uint32_t tag = (uint32_t)h;
    for (uint32_t s = tag & mask;; s = (s + 1) & mask) {
        uint64_t v = t->slots[s];
        if (!v) {
            *slot = s;
            return UINT32_MAX;
        }
        if ((uint32_t)(v >> 32) != tag) continue;
        uint32_t i = (uint32_t)v - 1, klen;
        const uint8_t *k = item_key(bytes, items, item_size, i, &klen);
        if (klen == len && key_equal(k, key, len)) {
            *slot = s;
            return i;
        }
    }
}

static int grow_table(key_table *t, uint32_t count)
{
    if ((uint64_t)(count + 1) * 2 <= t->nslots) return HANU_OK;
    uint32_t n = t->nslots ? t->nslots * 2 : 64;
    key_table fresh = { calloc(n, sizeof(uint64_t)), n };
    if (!fresh.slots) return HANU_ERR_NOMEM;
    for (uint32_t s = 0; s < t->nslots; s++) {   /* the stored hashes place every entry */
        uint64_t v = t->slots[s];
        if (!v) continue;
        uint32_t at = (uint32_t)(v >> 32) & (n - 1);
        while (fresh.slots[at]) at = (at + 1) & (n - 1);
        fresh.slots[at] = v;
    }
    free(t->slots);
    *t = fresh;
    return HANU_OK;
}

/* Index of the item with this key, added (zeroed, key copied) when new. */
static int intern_hashed(index_builder *b, key_table *t, void **items, uint32_t *count, uint32_t *cap,
                         size_t item_size, const uint8_t *key, uint32_t len, uint64_t h, uint32_t *out)
{
    int rc = grow_table(t, *count);
    if (rc) return rc;
    uint32_t slot = 0;
    uint32_t i = table_find(t, &b->keys, *items, item_size, key, len, h, &slot);
    if (i != UINT32_MAX) {
        *out = i;
        return HANU_OK;
    }
    if (*count == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 64;
        void *p = realloc(*items, (size_t)ncap * item_size);
        if (!p) return HANU_ERR_NOMEM;
        *items = p;
        *cap = ncap;
    }
    uint32_t off = (uint32_t)b->keys.len;
    if (b->keys.len + len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    if ((rc = hanu_buf_append(&b->keys, key, len))) return rc;
    uint32_t *kv = (uint32_t *)((char *)*items + (size_t)*count * item_size);
    memset(kv, 0, item_size);
    kv[0] = off;
    kv[1] = len;
    t->slots[slot] = (uint64_t)(uint32_t)h << 32 | (*count + 1);
    *out = (*count)++;
    return HANU_OK;
}

static int intern(index_builder *b, key_table *t, void **items, uint32_t *count, uint32_t *cap,
                  size_t item_size, const uint8_t *key, uint32_t len, uint32_t *out)
{
    return intern_hashed(b, t, items, count, cap, item_size, key, len, key_hash(key, len), out);
}

/* Interns the pending terms of the current document and counts them. */
static int flush_words(index_builder *b);

static int flush_terms(index_builder *b)
{
    int rc0 = flush_words(b);
    if (rc0) return rc0;
    uint32_t n = b->npend, ord = b->docs - 1;
    b->npend = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i;
        int rc = intern_hashed(b, &b->term_index, (void **)&b->terms, &b->nterms, &b->terms_cap,
                               sizeof(build_term), b->pend_keys[k], b->pend_len[k], b->pend_hash[k], &i);
        if (rc) return rc;
        build_term *t = &b->terms[i];
        if (t->last_ord == ord + 1) {
            t->post[2 * t->n - 1]++;
            continue;
        }
        if ((rc = post_push(&b->posts, t, ord, 1))) return rc;
    }
    return HANU_OK;
}

/* ------------------------------------------------------------ text words */

static inline uint32_t pair_home(uint64_t key, uint32_t mask)
{
    key *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(key >> 32) & mask;
}

/* The slot of key: its own, or the empty one it would take. */
static uint32_t pair_slot(const pair_table *t, uint64_t key)
{
    uint32_t mask = t->nslots - 1, s = pair_home(key, mask);
    while (t->keys[s] && t->keys[s] != key) s = (s + 1) & mask;
    return s;
}

static int pair_grow(pair_table *t)
{
    if ((uint64_t)(t->count + 1) * 2 <= t->nslots) return HANU_OK;
    uint32_t n = t->nslots ? t->nslots * 2 : 256;
    pair_table fresh = { calloc(n, sizeof(uint64_t)), malloc((size_t)n * sizeof(uint32_t)), n, t->count };
    if (!fresh.keys || !fresh.vals) {
        free(fresh.keys);
        free(fresh.vals);
        return HANU_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < t->nslots; i++) {
        if (!t->keys[i]) continue;
        uint32_t at = pair_slot(&fresh, t->keys[i]);
        fresh.keys[at] = t->keys[i];
        fresh.vals[at] = t->vals[i];
    }
    free(t->keys);
    free(t->vals);
    *t = fresh;
    return HANU_OK;
}

/* A new term keyed prefix then word (both copied into keys; neither may point into keys). */
static int new_term(index_builder *b, const uint8_t *prefix, uint32_t prefix_len, const uint8_t *word,
                    uint32_t word_len, uint32_t *out)
{
    int rc = room_for_one((void **)&b->terms, b->nterms, &b->terms_cap, sizeof *b->terms, 64);
    if (rc) return rc;
    if (b->keys.len + prefix_len + word_len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    uint32_t off = (uint32_t)b->keys.len;
    rc = hanu_buf_append(&b->keys, prefix, prefix_len);
    if (rc == HANU_OK) rc = hanu_buf_append(&b->keys, word, word_len);
    if (rc) return rc;
    build_term *t = &b->terms[b->nterms];
    memset(t, 0, sizeof *t);
    t->key_off = off;
    t->key_len = prefix_len + word_len;
    *out = b->nterms++;
    return HANU_OK;
}

/* count more occurrences of term i in the current document. */
static int term_occurs_n(index_builder *b, uint32_t i, uint32_t count)
{
    build_term *t = &b->terms[i];
    uint32_t ord = b->docs - 1;
    if (t->last_ord == ord + 1) {
        t->post[2 * t->n - 1] += count;
        return HANU_OK;
    }
    return post_push(&b->posts, t, ord, count);
}

static int term_occurs(index_builder *b, uint32_t i)
{
    return term_occurs_n(b, i, 1);
}

/* Notes a term made by the word path (term_order sorts those by ranks). */
static int note_word_term(index_builder *b, uint32_t term, uint32_t field, uint32_t word)
{
    int rc = room_for_one((void **)&b->word_terms, b->nword_terms, &b->word_terms_cap, sizeof *b->word_terms, 256);
    if (rc) return rc;
    b->word_terms[b->nword_terms++] = (word_term){ .term = term, .field = field, .word = word };
    return HANU_OK;
}

/* The whole text's term of word w (tok), made when new. */
static int all_term_of(index_builder *b, uint32_t w, const uint8_t *tok, uint32_t len, uint32_t *out)
{
    if (b->words[w].all_term == 0) {   /* stored plus one: a fresh word is zeroed */
        static const uint8_t all_prefix[2] = { 0, INDEX_KEY_ALL_WORD };
        uint32_t t;
        int rc = new_term(b, all_prefix, 2, tok, len, &t);
        if (rc == HANU_OK) rc = note_word_term(b, t, UINT32_MAX, w);
        if (rc) return rc;
        b->words[w].all_term = t + 1;
    }
    *out = b->words[w].all_term - 1;
    return HANU_OK;
}

/* Field field's term of word w (tok), made when new. */
static int field_term_of(index_builder *b, uint32_t field, uint32_t w, const uint8_t *tok, uint32_t len,
                         uint32_t *out)
{
    /* Most words occur in one or two fields: those terms are in the word's item,
       which flush_words has in cache; the pair table holds the others. */
    build_word *bw = &b->words[w];
    uint32_t slot = WORD_FIELDS;
    for (uint32_t j = 0; j < WORD_FIELDS; j++) {
        if (bw->field_of[j] == field + 1) {
            *out = bw->term_of[j];
            return HANU_OK;
        }
        if (!bw->field_of[j] && slot == WORD_FIELDS) slot = j;
    }
    int rc;
    uint64_t key = ((uint64_t)field + 1) << 32 | w;
    uint32_t at = 0;
    if (slot == WORD_FIELDS) {   /* a free slot in the item: the pair is new, not in the table */
        if ((rc = pair_grow(&b->field_terms))) return rc;
        at = pair_slot(&b->field_terms, key);
        if (b->field_terms.keys[at]) {
            *out = b->field_terms.vals[at];
            return HANU_OK;
        }
    }
    uint8_t prefix[INDEX_KEY_MAX];
    const build_field *f = &b->fields[field];
    if (f->key_len + len > INDEX_KEY_MAX) return HANU_ERR_INVALID;
    memcpy(prefix, b->keys.data + f->key_off, f->key_len);
    if ((rc = new_term(b, prefix, f->key_len, tok, len, out))) return rc;
    if ((rc = note_word_term(b, *out, field, w))) return rc;
    if (slot < WORD_FIELDS) {
        bw = &b->words[w];
        bw->field_of[slot] = field + 1;
        bw->term_of[slot] = *out;
        return HANU_OK;
    }
    b->field_terms.keys[at] = key;
    b->field_terms.vals[at] = *out;
    b->field_terms.count++;
    return HANU_OK;
}

static inline uint64_t word_head(const uint8_t *tok, uint32_t len)
{
    uint64_t h = tail_word(tok, len < 7 ? len : 7, 0);
    return h | (uint64_t)(len < 255 ? len : 255) << 56;
}

static int word_table_grow(word_table *t, uint32_t count)
{
    if ((uint64_t)(count + 1) * 2 <= t->nslots) return HANU_OK;
    uint32_t n = t->nslots ? t->nslots * 2 : 1024;
    word_slot *slots = calloc(n, sizeof *slots);
    if (!slots) return HANU_ERR_NOMEM;
    for (uint32_t i = 0; i < t->nslots; i++) {
        if (!t->slots[i].word) continue;
        uint32_t at = t->slots[i].tag & (n - 1);
        while (slots[at].word) at = (at + 1) & (n - 1);
        slots[at] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return HANU_OK;
}

/* The index of a distinct token whose key_hash is h (made when new). */
static int word_of_hashed(index_builder *b, const uint8_t *tok, uint32_t len, uint64_t h, uint32_t *w)
{
    word_table *t = &b->word_index;
    int rc = word_table_grow(t, b->nwords);
    if (rc) return rc;
    uint32_t tag = (uint32_t)h, mask = t->nslots - 1, at = tag & mask;
    uint64_t head = word_head(tok, len);
    for (;; at = (at + 1) & mask) {
        const word_slot *s = &t->slots[at];
        if (!s->word) break;
        if (s->tag != tag || s->head != head) continue;
        const build_word *bw = &b->words[s->word - 1];
        if (len <= 7 || (bw->key_len == len && key_equal(b->keys.data + bw->key_off + 7, tok + 7, len - 7))) {
            *w = s->word - 1;
            return HANU_OK;
        }
    }
    if ((rc = room_for_one((void **)&b->words, b->nwords, &b->words_cap, sizeof *b->words, 64))) return rc;
    if (b->keys.len + len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    uint32_t off = (uint32_t)b->keys.len;
    if ((rc = hanu_buf_append(&b->keys, tok, len))) return rc;
    b->words[b->nwords] = (build_word){ .key_off = off, .key_len = len, .all_term = 0 };
    t->slots[at] = (word_slot){ .tag = tag, .word = b->nwords + 1, .head = head };
    *w = b->nwords++;
    return HANU_OK;
}

/* The index of a distinct token (made when new). */
static int word_of(index_builder *b, const uint8_t *tok, uint32_t len, uint32_t *w)
{
    return word_of_hashed(b, tok, len, key_hash(tok, len), w);
}

static int count_token(index_builder *b, const doc_token *tok);

/* The current document's tokens, each counted in its word's item (the words
   found first, their items prefetched, then counted), then the document's words
   taken to the postings: the terms first (prefetched), then where each posting
   goes (prefetched for writing), then one posting a (term, document) with the
   summed count. */
static int flush_words(index_builder *b)
{
    uint32_t ntok = b->ndoc_tokens;
    b->ndoc_tokens = 0;
    doc_token *dt = b->doc_tokens;
    int rc = HANU_OK;
    for (uint32_t k = 0; k < ntok && rc == HANU_OK; k++) {
        rc = word_of_hashed(b, b->doc_bytes.data + dt[k].off, dt[k].len, dt[k].hash, &dt[k].word);
        if (rc == HANU_OK) __builtin_prefetch(&b->words[dt[k].word]);
    }
    for (uint32_t k = 0; k < ntok && rc == HANU_OK; k++) rc = count_token(b, &dt[k]);
    hanu_buf_reset(&b->doc_bytes);
    uint32_t n = b->doc_words.n;
    b->doc_words.n = 0;
    const uint32_t *dw = b->doc_words.v;
    build_word *words = b->words;
    for (uint32_t k = 0; k < n; k++) {
        const build_word *w = &words[dw[k]];
        __builtin_prefetch(&b->terms[w->all_term - 1]);
        for (uint32_t j = 0; j < WORD_FIELDS; j++)
            if (w->count_of[j]) __builtin_prefetch(&b->terms[w->term_of[j]]);
    }
    for (uint32_t k = 0; k < n; k++) {
        const build_word *w = &words[dw[k]];
        const build_term *t = &b->terms[w->all_term - 1];
        __builtin_prefetch(t->post + 2 * t->n, 1);
        for (uint32_t j = 0; j < WORD_FIELDS; j++)
            if (w->count_of[j]) {
                t = &b->terms[w->term_of[j]];
                __builtin_prefetch(t->post + 2 * t->n, 1);
            }
    }
    for (uint32_t k = 0; k < n; k++) {
        build_word *w = &words[dw[k]];
        if (rc == HANU_OK) rc = term_occurs_n(b, w->all_term - 1, w->all_count);
        for (uint32_t j = 0; j < WORD_FIELDS; j++) {
            if (w->count_of[j] && rc == HANU_OK) rc = term_occurs_n(b, w->term_of[j], w->count_of[j]);
            w->count_of[j] = 0;
        }
        w->doc = 0;   /* more tokens of this document after a flush start over */
    }
    return rc;
}

/* The word's counts for the current document, the word noted as the document's
   when its first token comes. */
static int word_in_doc(index_builder *b, uint32_t w)
{
    build_word *bw = &b->words[w];
    if (bw->doc == b->docs) return HANU_OK;
    int rc = u32_push(&b->doc_words, w);
    if (rc) return rc;
    bw->doc = b->docs;
    bw->all_count = 0;
    for (uint32_t j = 0; j < WORD_FIELDS; j++) bw->count_of[j] = 0;
    return HANU_OK;
}

int index_builder_text_field(index_builder *b, const uint8_t *prefix, size_t prefix_len, uint32_t *field)
{
    if (prefix_len < 2 || prefix_len > INDEX_KEY_MAX || prefix[prefix_len - 1] != INDEX_KEY_WORD ||
        prefix[prefix_len - 2] != 0 || memchr(prefix, 0, prefix_len - 2))
        return HANU_ERR_INVALID;
    return intern(b, &b->field_index, (void **)&b->fields, &b->nfields, &b->fields_cap, sizeof(build_field), prefix,
                  (uint32_t)prefix_len, field);
}

/* A token counted in its word's item (the word found by flush_words). */
static int count_token(index_builder *b, const doc_token *tok)
{
    uint32_t w = tok->word, field = tok->field, len = tok->len, term;
    const uint8_t *t = b->doc_bytes.data + tok->off;
    int rc = HANU_OK;
    if (!b->words[w].all_term) rc = all_term_of(b, w, t, len, &term);
    if (rc == HANU_OK) rc = word_in_doc(b, w);
    if (rc) return rc;
    b->words[w].all_count++;
    if (field == UINT32_MAX) return HANU_OK;
    for (uint32_t j = 0; j < WORD_FIELDS; j++)
        if (b->words[w].field_of[j] == field + 1) {
            b->words[w].count_of[j]++;
            return HANU_OK;
        }
    /* A field new to the word: its term is made (in a free slot of the item, or
       the pair table); in the table, the term is counted at once. */
    if ((rc = field_term_of(b, field, w, t, len, &term))) return rc;
    for (uint32_t j = 0; j < WORD_FIELDS; j++)
        if (b->words[w].field_of[j] == field + 1) {
            b->words[w].count_of[j]++;
            return HANU_OK;
        }
    return term_occurs(b, term);
}

int index_builder_word(index_builder *b, uint32_t field, const char *tok, size_t len)
{
    if (!b->docs) return HANU_ERR_INVALID;
    if (len > INDEX_KEYWORD_MAX || (field != UINT32_MAX && field >= b->nfields)) return HANU_ERR_INVALID;
    int rc = room_for_one((void **)&b->doc_tokens, b->ndoc_tokens, &b->doc_tokens_cap, sizeof *b->doc_tokens, 256);
    if (rc) return rc;
    if (b->doc_bytes.len + len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    uint64_t h = key_hash((const uint8_t *)tok, (uint32_t)len);
    const word_table *wt = &b->word_index;
    if (wt->nslots) __builtin_prefetch(&wt->slots[(uint32_t)h & (wt->nslots - 1)]);
    uint32_t off = (uint32_t)b->doc_bytes.len;
    if ((rc = hanu_buf_append(&b->doc_bytes, tok, len))) return rc;
    b->doc_tokens[b->ndoc_tokens++] = (doc_token){ .hash = h, .field = field, .off = off, .len = (uint32_t)len };
    return HANU_OK;
}

void *index_builder_scratch(index_builder *b, size_t len)
{
    if (len > b->scratch_len) {
        size_t cap = b->scratch_len ? b->scratch_len : 4096;
        while (cap < len) cap *= 2;
        void *p = malloc(cap);   /* the old contents are not kept: no copy */
        if (!p) return NULL;
        free(b->scratch);
        b->scratch = p;
        b->scratch_len = cap;
    }
    return b->scratch;
}

/* A word's key given whole (index_builder_term, a merge's postings) is found the
   way of index_builder_word: a word's terms live in one place only, and sort by
   ranks (term_order). 1 when key is a word's, with its term (made when new) or rc. */
static int word_key_term(index_builder *b, const uint8_t *key, size_t key_len, uint32_t *term, int *rc)
{
    const uint8_t *nul = memchr(key, 0, key_len);
    if (!nul || (size_t)(nul - key) + 2 > key_len) return 0;
    size_t prefix_len = (size_t)(nul - key) + 2;
    uint32_t w, field;
    const uint8_t *tok = key + prefix_len;
    uint32_t len = (uint32_t)(key_len - prefix_len);
    if (nul[1] == INDEX_KEY_ALL_WORD && nul == key) {
        *rc = word_of(b, tok, len, &w);
        if (*rc == HANU_OK) *rc = all_term_of(b, w, tok, len, term);
        return 1;
    }
    if (nul[1] != INDEX_KEY_WORD) return 0;
    *rc = index_builder_text_field(b, key, prefix_len, &field);
    if (*rc == HANU_OK) *rc = word_of(b, tok, len, &w);
    if (*rc == HANU_OK) *rc = field_term_of(b, field, w, tok, len, term);
    return 1;
}

/* ------------------------------------------------------------ documents */

int index_builder_doc(index_builder *b, const char *id, size_t id_len, uint64_t txn)
{
    int rc = flush_terms(b);   /* the previous document's */
    if (rc) return rc;
    if (b->docs >= INDEX_SEGMENT_MAX_DOCS) return HANU_ERR_TOO_LARGE;
    if (b->ids.len + id_len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    if (b->docs == b->txn_cap) {
        uint32_t cap = b->txn_cap ? b->txn_cap * 2 : 256;
        uint64_t *t = realloc(b->txns, (size_t)cap * sizeof *t);
        if (!t) return HANU_ERR_NOMEM;
        b->txns = t;
        b->txn_cap = cap;
    }
    rc = hanu_buf_append(&b->ids, id, id_len);
    if (!rc) rc = u32_push(&b->id_off, (uint32_t)b->ids.len);
    if (rc) return rc;
    b->txns[b->docs++] = txn;
    return HANU_OK;
}

int index_builder_term(index_builder *b, const uint8_t *key, size_t key_len)
{
    if (!b->docs) return HANU_ERR_INVALID;
    if (key_len == 0 || key_len > INDEX_KEY_MAX) return HANU_ERR_INVALID;
    int rc;
    uint32_t term;
    if (word_key_term(b, key, key_len, &term, &rc)) return rc == HANU_OK ? term_occurs(b, term) : rc;
    if (b->npend == PEND_TERMS) {
        int rc = flush_terms(b);
        if (rc) return rc;
    }
    uint32_t k = b->npend++;
    memcpy(b->pend_keys[k], key, key_len);
    b->pend_len[k] = (uint32_t)key_len;
    b->pend_hash[k] = key_hash(key, key_len);
    const key_table *t = &b->term_index;
    if (t->nslots) __builtin_prefetch(&t->slots[(uint32_t)b->pend_hash[k] & (t->nslots - 1)]);
    return HANU_OK;
}

/* A posting of an earlier document, for merges: ord below the document count
 * and above the term's last ordinal. */
int index_builder_posting(index_builder *b, const uint8_t *key, size_t key_len, uint32_t ord, uint32_t tf)
{
    int rc0 = flush_terms(b);
    if (rc0) return rc0;
    if (ord >= b->docs || tf == 0) return HANU_ERR_INVALID;
    if (key_len == 0 || key_len > INDEX_KEY_MAX) return HANU_ERR_INVALID;
    /* A merge adds a term's postings one after another: the same key as last time skips the table. */
    uint32_t i = b->last_term;
    if (i == UINT32_MAX || b->terms[i].key_len != key_len ||
        memcmp(b->keys.data + b->terms[i].key_off, key, key_len) != 0) {
        int rc;
        if (!word_key_term(b, key, key_len, &i, &rc))
            rc = intern(b, &b->term_index, (void **)&b->terms, &b->nterms, &b->terms_cap, sizeof(build_term), key,
                        (uint32_t)key_len, &i);
        if (rc) return rc;
        b->last_term = i;
    }
    build_term *t = &b->terms[i];
    if (t->n && t->post[2 * t->n - 2] >= ord) return HANU_ERR_INVALID;
    return post_push(&b->posts, t, ord, tf);
}

/* The column of path, its per-doc arrays grown to the current document. */
static int column_for(index_builder *b, const char *path, size_t len, build_column **out)
{
    if (!b->docs) return HANU_ERR_INVALID;
    uint32_t i = b->last_col;
    if (i == UINT32_MAX || b->cols[i].path_len != len ||
        !key_equal(b->keys.data + b->cols[i].path_off, (const uint8_t *)path, (uint32_t)len)) {
        if (len > INDEX_PATH_MAX || memchr(path, 0, len)) return HANU_ERR_INVALID;
        int rc = intern(b, &b->col_index, (void **)&b->cols, &b->ncols, &b->cols_cap,
                        sizeof(build_column), (const uint8_t *)path, (uint32_t)len, &i);
        if (rc) return rc;
        b->last_col = i;
    }
    build_column *c = &b->cols[i];
    if (c->cap == 0) c->last_doc = UINT32_MAX;
    if (c->cap < b->docs) {
        uint32_t cap = c->cap ? c->cap : 64;
        while (cap < b->docs) cap *= 2;
        uint8_t *tags = realloc(c->tags, cap);
        if (tags) c->tags = tags;
        double *nums = realloc(c->nums, (size_t)cap * sizeof *nums);
        if (nums) c->nums = nums;
        uint32_t *so = realloc(c->str_off, (size_t)cap * 4);
        if (so) c->str_off = so;
        uint32_t *sl = realloc(c->str_len, (size_t)cap * 4);
        if (sl) c->str_len = sl;
        uint32_t *ln = realloc(c->lengths, (size_t)cap * 4);
        if (ln) c->lengths = ln;
        if (!tags || !nums || !so || !sl || !ln) return HANU_ERR_NOMEM;
        memset(c->tags + c->cap, 0, cap - c->cap);
        memset(c->nums + c->cap, 0, (size_t)(cap - c->cap) * sizeof *nums);
        memset(c->str_off + c->cap, 0, (size_t)(cap - c->cap) * 4);
        memset(c->str_len + c->cap, 0, (size_t)(cap - c->cap) * 4);
        memset(c->lengths + c->cap, 0, (size_t)(cap - c->cap) * 4);
        c->cap = cap;
    }
    *out = c;
    return HANU_OK;
}

/* Sets the current document's value tag at the column; a second value makes it MULTI. */
static int column_value(index_builder *b, const char *path, size_t len, uint8_t tag,
                        build_column **out)
{
    build_column *c;
    int rc = column_for(b, path, len, &c);
    if (rc) return rc;
    uint32_t ord = b->docs - 1;
    if (c->tags[ord] != INDEX_COL_MISSING) tag = INDEX_COL_MULTI;
    c->tags[ord] = tag;
    c->last_doc = ord;
    *out = tag == INDEX_COL_MULTI ? NULL : c;
    return HANU_OK;
}

int index_builder_number(index_builder *b, const char *path, size_t len, double v)
{
    build_column *c;
    int rc = column_value(b, path, len, INDEX_COL_NUMBER, &c);
    if (!rc && c) c->nums[b->docs - 1] = v == 0 ? 0.0 : v;
    return rc;
}

int index_builder_string(index_builder *b, const char *path, size_t len, const char *s, size_t slen)
{
    if (slen > INDEX_KEYWORD_MAX) return HANU_OK;   /* text only */
    build_column *c;
    int rc = column_value(b, path, len, INDEX_COL_STRING, &c);
    if (rc || !c) return rc;
    if (b->strings.len + slen > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    c->str_off[b->docs - 1] = (uint32_t)b->strings.len;
    c->str_len[b->docs - 1] = (uint32_t)slen;
    return hanu_buf_append(&b->strings, s, slen);
}

int index_builder_bool(index_builder *b, const char *path, size_t len, int v)
{
    build_column *c;
    return column_value(b, path, len, v ? INDEX_COL_TRUE : INDEX_COL_FALSE, &c);
}

int index_builder_null(index_builder *b, const char *path, size_t len)
{
    build_column *c;
    return column_value(b, path, len, INDEX_COL_NULL, &c);
}

int index_builder_multi(index_builder *b, const char *path, size_t len)
{
    build_column *c;
    int rc = column_for(b, path, len, &c);
    if (!rc) c->tags[b->docs - 1] = INDEX_COL_MULTI;
    return rc;
}

int index_builder_text_length(index_builder *b, const char *path, size_t len, uint32_t tokens)
{
    build_column *c;
    int rc = column_for(b, path, len, &c);
    if (rc) return rc;
    uint32_t *l = &c->lengths[b->docs - 1];
    if (tokens > UINT32_MAX - *l) return HANU_ERR_TOO_LARGE;
    *l += tokens;
    c->text_total += tokens;
    return HANU_OK;
}

/* ---------------------------------------------------------------- write */

static int pad8(hanu_buf *out)
{
    static const uint8_t zero[8];
    return hanu_buf_append(out, zero, (8 - (out->len & 7)) & 7);
}

static int put_u32(hanu_buf *out, uint32_t v)
{
    uint8_t b[4];
    hanu_put_u32(b, v);
    return hanu_buf_append(out, b, 4);
}

static int put_u64(hanu_buf *out, uint64_t v)
{
    uint8_t b[8];
    hanu_put_u64(b, v);
    return hanu_buf_append(out, b, 8);
}

/* Appends n values encoded with the smallest codec; *d describes them. */
static int put_codec(hanu_buf *out, const uint64_t *v, size_t n, codec_desc *d)
{
    if (n == 0) {
        *d = (codec_desc){ CODEC_CONST, 0 };
        return HANU_OK;
    }
    *d = codec_plan(v, n, 1);
    size_t bytes = codec_payload_size(d->code, n);
    int rc = hanu_buf_reserve(out, bytes + CODEC_SLACK);
    if (rc) return rc;
    codec_pack(*d, v, n, 1, out->data + out->len);
    out->len += bytes;
    return HANU_OK;
}

static _Thread_local const index_builder *sort_builder;   /* qsort has no context argument */

static int cmp_keys(const uint8_t *a, uint32_t al, const uint8_t *bk, uint32_t bl)
{
    int c = memcmp(a, bk, HANU_MIN(al, bl));
    return c ? c : (al > bl) - (al < bl);
}

static int cmp_term(const void *x, const void *y)
{
    const build_term *a = &sort_builder->terms[*(const uint32_t *)x];
    const build_term *b = &sort_builder->terms[*(const uint32_t *)y];
    return cmp_keys(sort_builder->keys.data + a->key_off, a->key_len,
                    sort_builder->keys.data + b->key_off, b->key_len);
}

static int cmp_column(const void *x, const void *y)
{
    const build_column *a = &sort_builder->cols[*(const uint32_t *)x];
    const build_column *b = &sort_builder->cols[*(const uint32_t *)y];
    return cmp_keys(sort_builder->keys.data + a->path_off, a->path_len,
                    sort_builder->keys.data + b->path_off, b->path_len);
}

static uint32_t *sorted_order(const index_builder *b, uint32_t n, int (*cmp)(const void *, const void *))
{
    uint32_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order) return NULL;
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    sort_builder = b;
    qsort(order, n, sizeof *order, cmp);
    return order;
}

static _Thread_local const build_word *rank_words;
static _Thread_local const build_field *rank_fields;

static int cmp_word(const void *x, const void *y)
{
    const build_word *a = &rank_words[*(const uint32_t *)x], *b = &rank_words[*(const uint32_t *)y];
    return cmp_keys(sort_builder->keys.data + a->key_off, a->key_len, sort_builder->keys.data + b->key_off, b->key_len);
}

static int cmp_field(const void *x, const void *y)
{
    const build_field *a = &rank_fields[*(const uint32_t *)x], *b = &rank_fields[*(const uint32_t *)y];
    return cmp_keys(sort_builder->keys.data + a->key_off, a->key_len, sort_builder->keys.data + b->key_off, b->key_len);
}

static int cmp_u64_pair(const void *x, const void *y)
{
    const uint64_t *a = x, *b = y;   /* [0] the rank, [1] the term */
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Ranks of items 0..n-1 in the order cmp gives them. */
static uint32_t *ranks(uint32_t n, int (*cmp)(const void *, const void *))
{
    uint32_t *order = malloc((size_t)(n ? n : 1) * sizeof *order), *rank = malloc((size_t)(n ? n : 1) * sizeof *rank);
    if (!order || !rank) {
        free(order);
        free(rank);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    qsort(order, n, sizeof *order, cmp);
    for (uint32_t i = 0; i < n; i++) rank[order[i]] = i;
    free(order);
    return rank;
}

/* The terms in key order. A word term's key is its field's prefix (or the whole
   text's, "\0" INDEX_KEY_ALL_WORD) and then the word, and a prefix ends at the
   path's only NUL, so two word terms compare as (prefix, word): each distinct word
   and field is ranked once and the word terms sort by the two ranks, without
   reading a key. The other terms sort by their keys; the two lists merge. */
static uint32_t *term_order(const index_builder *b)
{
    uint32_t n = b->nterms, nw = b->nword_terms, ng = 0;
    sort_builder = b;
    rank_words = b->words;
    rank_fields = b->fields;
    uint32_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    uint32_t *word_rank = ranks(b->nwords, cmp_word), *field_rank = ranks(b->nfields, cmp_field);
    uint64_t *pairs = malloc((size_t)(nw ? nw : 1) * 2 * sizeof *pairs);
    uint8_t *is_word = calloc(n ? n : 1, 1);
    uint32_t *generic = malloc((size_t)(n ? n : 1) * sizeof *generic);
    if (!order || !word_rank || !field_rank || !pairs || !is_word || !generic) goto fail;
    /* A merge adds its terms in key order already: then there is nothing to sort. */
    uint32_t ascending = 1;
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    while (nw == 0 && ascending < n && cmp_term(&order[ascending - 1], &order[ascending]) < 0) ascending++;
    if (nw == 0 && ascending >= n) goto done;
    /* The whole text's prefix against the fields': "\0\7" is below every other
       path's prefix unless a field has the empty path ("\0\6"). */
    static const uint8_t all_prefix[2] = { 0, INDEX_KEY_ALL_WORD };
    uint32_t all_rank = 0;
    for (uint32_t f = 0; f < b->nfields; f++)
        if (cmp_keys(b->keys.data + b->fields[f].key_off, b->fields[f].key_len, all_prefix, 2) < 0) all_rank++;
    for (uint32_t i = 0; i < nw; i++) {
        const word_term *t = &b->word_terms[i];
        uint64_t prefix_rank = t->field == UINT32_MAX ? all_rank
                             : field_rank[t->field] + (field_rank[t->field] >= all_rank);
        pairs[2 * i] = prefix_rank << 32 | word_rank[t->word];
        pairs[2 * i + 1] = t->term;
        is_word[t->term] = 1;
    }
    qsort(pairs, nw, 2 * sizeof *pairs, cmp_u64_pair);
    for (uint32_t i = 0; i < n; i++)
        if (!is_word[i]) generic[ng++] = i;
    qsort(generic, ng, sizeof *generic, cmp_term);
    for (uint32_t i = 0, w = 0, g = 0; i < n; i++) {
        if (g == ng) order[i] = (uint32_t)pairs[2 * w++ + 1];
        else if (w == nw || cmp_term(&generic[g], &(uint32_t){ (uint32_t)pairs[2 * w + 1] }) < 0) order[i] = generic[g++];
        else order[i] = (uint32_t)pairs[2 * w++ + 1];
    }
done:
    free(word_rank);
    free(field_rank);
    free(pairs);
    free(is_word);
    free(generic);
    return order;
fail:
    free(order);
    free(word_rank);
    free(field_rank);
    free(pairs);
    free(is_word);
    free(generic);
    return NULL;
}

/* The text-length column a term's block minimum reads from: the word's own
 * field, or the whole text (""); NULL for keywords. */
static const build_column *length_column(const index_builder *b, const uint8_t *key, uint32_t len)
{
    const uint8_t *nul = memchr(key, 0, len);
    if (!nul || (size_t)(nul - key) + 1 >= len) return NULL;
    uint8_t type = nul[1];
    if (type != INDEX_KEY_WORD && type != INDEX_KEY_ALL_WORD) return NULL;
    uint32_t slot = 0, len_path = (uint32_t)(nul - key);
    uint32_t i = table_find(&b->col_index, &b->keys, b->cols, sizeof(build_column), key, len_path,
                            key_hash(key, len_path), &slot);
    return i == UINT32_MAX ? NULL : &b->cols[i];
}

/* a0 of the block impacts (index_block_impact) of a term: the whole text's
 * average length as the reader computes it from the written column, for the
 * whole text's words only; 0 (no impacts) for any other term. */
static double impact_avgdl(const index_builder *b, const uint8_t *key, uint32_t len, const build_column *lens)
{
    const uint8_t *nul = memchr(key, 0, len);
    if (!lens || !lens->text_total || !b->docs || nul != key || len < 2 || key[1] != INDEX_KEY_ALL_WORD) return 0;
    return (double)lens->text_total / (double)b->docs;
}

/* Writes one term's block table and payloads at the end of out. */
static int write_postings(hanu_buf *out, const build_term *t, const build_column *lens, double a0,
                          uint8_t *table_entry)
{
    uint32_t nblocks = (t->n + INDEX_BLOCK - 1) / INDEX_BLOCK;
    size_t table = out->len;
    int rc = hanu_buf_reserve(out, (size_t)nblocks * SEG_BLOCK);
    if (rc) return rc;
    memset(out->data + table, 0, (size_t)nblocks * SEG_BLOCK);
    out->len += (size_t)nblocks * SEG_BLOCK;
    hanu_put_u32(table_entry + SEG_T_DF, t->n);
    hanu_put_u32(table_entry + SEG_T_BLOCKS, nblocks);
    hanu_put_u64(table_entry + SEG_T_POSTINGS, table);
    uint64_t deltas[INDEX_BLOCK], tfs[INDEX_BLOCK];
    int64_t prev = -1;
    for (uint32_t blk = 0; blk < nblocks; blk++) {
        uint32_t first = blk * INDEX_BLOCK, n = HANU_MIN(INDEX_BLOCK, t->n - first);
        uint32_t max_tf = 0, min_len = UINT32_MAX;
        block_impact acc;
        block_impact_reset(&acc);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t ord = t->post[2 * (first + i)], tf = t->post[2 * (first + i) + 1];
            deltas[i] = (uint64_t)((int64_t)ord - prev - 1);
            prev = ord;
            tfs[i] = tf;
            max_tf = HANU_MAX(max_tf, tf);
            uint32_t l = lens && ord < lens->cap ? lens->lengths[ord] : 0;
            min_len = HANU_MIN(min_len, l);
            if (a0 > 0) block_impact_add(&acc, tf, l, a0);
        }
        uint32_t impact = a0 > 0 ? block_impact_of(&acc, a0) : 0;
        codec_desc dd, td;
        uint64_t payload = out->len;
        if ((rc = put_codec(out, deltas, n, &dd)) || (rc = put_codec(out, tfs, n, &td))) return rc;
        if (td.base > UINT32_MAX) return HANU_ERR_TOO_LARGE;
        uint8_t *e = out->data + table + (size_t)blk * SEG_BLOCK;
        hanu_put_u64(e + SEG_B_PAYLOAD, payload);
        hanu_put_u32(e + SEG_B_LAST, (uint32_t)prev);
        hanu_put_u32(e + SEG_B_COUNT, n);
        hanu_put_u32(e + SEG_B_MAX_TF, max_tf);
        hanu_put_u32(e + SEG_B_MIN_LEN, min_len);
        e[SEG_B_DOC_CODE] = dd.code;
        e[SEG_B_TF_CODE] = td.code;
        hanu_put_u16(e + SEG_B_IMPACT, (uint16_t)impact);
        hanu_put_u32(e + SEG_B_TF_BASE, (uint32_t)td.base);
        hanu_put_u64(e + SEG_B_DOC_BASE, dd.base);
    }
    return pad8(out);
}

static int cmp_string_ref(const void *x, const void *y)
{
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;   /* off << 32 | len */
    const uint8_t *s = sort_builder->strings.data;
    return cmp_keys(s + (a >> 32), (uint32_t)a, s + (b >> 32), (uint32_t)b);
}

static _Thread_local const uint64_t *sort_refs;

static int cmp_ref_ids(const void *x, const void *y)
{
    return cmp_string_ref(&sort_refs[*(const uint32_t *)x], &sort_refs[*(const uint32_t *)y]);
}

/* The sorted distinct strings of a column and, per doc, the ordinal into them.
   The distinct values are found by hashing (each doc's string compared once), and
   only they are sorted, when they did not come in order already (ids usually do). */
static int write_dictionary(hanu_buf *out, const index_builder *b, const build_column *c,
                            uint64_t *ords, uint32_t *dict_n)
{
    uint32_t docs = b->docs, distinct = 0, nslots = 16;
    while (nslots < 2 * (uint64_t)docs) nslots *= 2;
    uint64_t *refs = malloc((size_t)(docs ? docs : 1) * sizeof *refs);   /* distinct, as first seen */
    uint32_t *value = malloc((size_t)(docs ? docs : 1) * sizeof *value);   /* per doc: its distinct value */
    uint32_t *slots = calloc(nslots, sizeof *slots);                      /* distinct + 1; 0 empty */
    uint32_t *rank = NULL, *by_rank = NULL;
    int rc = refs && value && slots ? HANU_OK : HANU_ERR_NOMEM;
    const uint8_t *strs = b->strings.data;
    for (uint32_t d = 0; d < docs && !rc; d++) {
        value[d] = UINT32_MAX;
        if (d >= c->cap || c->tags[d] != INDEX_COL_STRING) continue;
        const uint8_t *p = strs + c->str_off[d];
        uint32_t len = c->str_len[d], at = (uint32_t)key_hash(p, len) & (nslots - 1);
        for (; slots[at]; at = (at + 1) & (nslots - 1)) {
            uint64_t r = refs[slots[at] - 1];
            if ((uint32_t)r == len && key_equal(strs + (r >> 32), p, len)) break;
        }
        if (!slots[at]) {
            refs[distinct] = (uint64_t)c->str_off[d] << 32 | len;
            slots[at] = ++distinct;
        }
        value[d] = slots[at] - 1;
    }
    sort_builder = b;
    uint32_t ascending = 1;
    while (!rc && ascending < distinct && cmp_string_ref(&refs[ascending - 1], &refs[ascending]) < 0) ascending++;
    if (!rc && ascending < distinct) {
        rank = malloc((size_t)distinct * sizeof *rank);
        by_rank = malloc((size_t)distinct * sizeof *by_rank);
        if (!rank || !by_rank) rc = HANU_ERR_NOMEM;
        for (uint32_t i = 0; i < distinct && !rc; i++) by_rank[i] = i;
        sort_refs = refs;
        if (!rc) qsort(by_rank, distinct, sizeof *by_rank, cmp_ref_ids);
        for (uint32_t i = 0; i < distinct && !rc; i++) rank[by_rank[i]] = i;
    }
    uint32_t total = 0;
    for (uint32_t i = 0; i < distinct && !rc; i++) {
        rc = put_u32(out, total);
        total += (uint32_t)refs[by_rank ? by_rank[i] : i];
    }
    if (!rc) rc = put_u32(out, total);
    for (uint32_t i = 0; i < distinct && !rc; i++) {
        uint64_t r = refs[by_rank ? by_rank[i] : i];
        rc = hanu_buf_append(out, strs + (r >> 32), (uint32_t)r);
    }
    for (uint32_t d = 0; d < docs && !rc; d++)
        ords[d] = value[d] == UINT32_MAX ? 0 : rank ? rank[value[d]] : value[d];
    free(refs);
    free(value);
    free(slots);
    free(rank);
    free(by_rank);
    *dict_n = distinct;
    return rc ? rc : pad8(out);
}

static int write_column(hanu_buf *out, const index_builder *b, const build_column *c, size_t entry,
                        uint64_t *scratch, uint64_t *ords)
{
    uint32_t docs = b->docs;
    uint8_t *e = out->data + entry;
    hanu_put_u64(e + SEG_C_PATH, out->len);
    hanu_put_u32(e + SEG_C_PATH_LEN, c->path_len);
    hanu_put_u64(e + SEG_C_TEXT_TOTAL, c->text_total);
    int rc = hanu_buf_append(out, b->keys.data + c->path_off, c->path_len);
    if (rc || (rc = pad8(out))) return rc;
    hanu_put_u64(out->data + entry + SEG_C_DICT, out->len);
    uint32_t dict_n;
    if ((rc = write_dictionary(out, b, c, ords, &dict_n))) return rc;
    hanu_put_u32(out->data + entry + SEG_C_DICT_N, dict_n);
    for (int part = 0; part < SEG_PARTS; part++) {
        uint64_t *values = part == SEG_PART_ORDS ? ords : scratch;   /* ords: from write_dictionary */
        if (part != SEG_PART_ORDS) {
            for (uint32_t d = 0; d < docs; d++) {
                int has = d < c->cap;
                scratch[d] = part == SEG_PART_TAGS ? (has ? c->tags[d] : 0)
                           : part == SEG_PART_LENGTHS ? (has ? c->lengths[d] : 0)
                           : has && c->tags[d] == INDEX_COL_NUMBER ? index_number_bits(c->nums[d])
                           : 0;
            }
            if (part == SEG_PART_NUMBERS) {   /* absent values take the smallest present one */
                uint64_t lo = UINT64_MAX;
                for (uint32_t d = 0; d < docs; d++)
                    if (d < c->cap && c->tags[d] == INDEX_COL_NUMBER) lo = HANU_MIN(lo, scratch[d]);
                for (uint32_t d = 0; d < docs; d++)
                    if (!(d < c->cap && c->tags[d] == INDEX_COL_NUMBER)) scratch[d] = lo;
            }
        }
        codec_desc desc;
        uint64_t at = out->len;
        if ((rc = put_codec(out, values, docs, &desc)) || (rc = pad8(out))) return rc;
        uint8_t *p = out->data + entry + SEG_C_PARTS + part * SEG_C_PART;
        hanu_put_u64(p, at);
        hanu_put_u64(p + 8, desc.base);
        p[16] = desc.code;
    }
    return HANU_OK;
}

/* Bytes the file takes at most, so that encode reserves its buffer once
 * instead of growing it by copies (the merged segments run to tens of MiB).
 * Codec payloads are bounded by their widest code: ordinal gaps and term
 * frequencies fit 32 bits, tags 8, string ordinals and text lengths 32,
 * numbers 64. */
static size_t encoded_bound(const index_builder *b)
{
    size_t docs = b->docs, n = SEG_HEADER + SEG_FOOTER + 4 * (docs + 1) + b->ids.len + 8 * docs + 32;
    n += (size_t)b->nterms * (SEG_TERM + 8) + b->keys.len;
    for (uint32_t i = 0; i < b->nterms; i++) {
        size_t postings = b->terms[i].n, blocks = (postings + INDEX_BLOCK - 1) / INDEX_BLOCK;
        n += blocks * (SEG_BLOCK + 2 * CODEC_SLACK) + 8 * postings + 8;
    }
    n += b->strings.len;
    n += (size_t)b->ncols * (SEG_COLUMN + 4 * 8 + 4 * (docs + 1) + (1 + 4 + 4 + 8) * docs + SEG_PARTS * CODEC_SLACK + 16);
    return n;
}

/* Lays out the whole file in memory. */
static int encode(index_builder *b, hanu_buf *out)
{
    (void)hanu_buf_reserve(out, encoded_bound(b));   /* a hint: without it the buffer grows */
    uint8_t header[SEG_HEADER] = { 0 };
    memcpy(header, SEG_MAGIC, 8);
    hanu_put_u32(header + SEG_H_VERSION, SEG_VERSION);
    hanu_put_u32(header + SEG_H_DOCS, b->docs);
    hanu_put_u32(header + SEG_H_TERMS, b->nterms);
    hanu_put_u32(header + SEG_H_COLUMNS, b->ncols);
    int rc = hanu_buf_append(out, header, sizeof header);
    if (rc) return rc;
    hanu_put_u64(out->data + SEG_H_IDS, out->len);
    for (uint32_t i = 0; i <= b->docs && !rc; i++) rc = put_u32(out, b->id_off.v[i]);
    if (!rc) rc = hanu_buf_append(out, b->ids.data, b->ids.len);
    if (!rc) rc = pad8(out);
    if (rc) return rc;
    hanu_put_u64(out->data + SEG_H_TXNS, out->len);
    for (uint32_t i = 0; i < b->docs && !rc; i++) rc = put_u64(out, b->txns[i]);

    uint32_t *order = term_order(b);
    if (!order) return HANU_ERR_NOMEM;
    size_t term_table = out->len;
    hanu_put_u64(out->data + SEG_H_TERM_TABLE, term_table);
    if (!rc) rc = hanu_buf_reserve(out, (size_t)b->nterms * SEG_TERM);
    if (!rc) {
        memset(out->data + out->len, 0, (size_t)b->nterms * SEG_TERM);
        out->len += (size_t)b->nterms * SEG_TERM;
        hanu_put_u64(out->data + SEG_H_KEYS, out->len);
    }
    uint32_t key_total = 0;
    for (uint32_t i = 0; i < b->nterms && !rc; i++) {
        const build_term *t = &b->terms[order[i]];
        uint8_t *e = out->data + term_table + (size_t)i * SEG_TERM;
        hanu_put_u32(e + SEG_T_KEY_OFF, key_total);
        hanu_put_u32(e + SEG_T_KEY_LEN, t->key_len);
        key_total += t->key_len;
        rc = hanu_buf_append(out, b->keys.data + t->key_off, t->key_len);
    }
    if (!rc) {
        hanu_put_u64(out->data + SEG_H_KEYS_LEN, key_total);
        rc = pad8(out);
    }
    size_t postings = out->len;
    if (!rc) hanu_put_u64(out->data + SEG_H_POSTINGS, postings);
    for (uint32_t i = 0; i < b->nterms && !rc; i++) {
        const build_term *t = &b->terms[order[i]];
        uint8_t entry[SEG_TERM];
        const uint8_t *key = b->keys.data + t->key_off;
        const build_column *lens = length_column(b, key, t->key_len);
        rc = write_postings(out, t, lens, impact_avgdl(b, key, t->key_len, lens), entry);
        if (!rc) memcpy(out->data + term_table + (size_t)i * SEG_TERM + SEG_T_DF, entry + SEG_T_DF,
                        SEG_TERM - SEG_T_DF);
    }
    free(order);
    if (rc) return rc;
    hanu_put_u64(out->data + SEG_H_POSTINGS_LEN, out->len - postings);

    order = sorted_order(b, b->ncols, cmp_column);
    uint64_t *scratch = malloc((size_t)(b->docs ? b->docs : 1) * 2 * sizeof *scratch);
    if (!order || !scratch) rc = HANU_ERR_NOMEM;
    size_t col_table = out->len;
    if (!rc) rc = hanu_buf_reserve(out, (size_t)b->ncols * SEG_COLUMN);
    if (!rc) {
        hanu_put_u64(out->data + SEG_H_COLUMN_TABLE, col_table);
        memset(out->data + out->len, 0, (size_t)b->ncols * SEG_COLUMN);
        out->len += (size_t)b->ncols * SEG_COLUMN;
    }
    for (uint32_t i = 0; i < b->ncols && !rc; i++)
        rc = write_column(out, b, &b->cols[order[i]], col_table + (size_t)i * SEG_COLUMN, scratch,
                          scratch + b->docs);
    free(order);
    free(scratch);
    if (rc) return rc;
    uint8_t footer[SEG_FOOTER];
    hanu_put_u64(footer, hanu_hash64(out->data, out->len, 0));
    memcpy(footer + 8, SEG_END_MAGIC, 8);
    return hanu_buf_append(out, footer, sizeof footer);
}

int index_builder_write(index_builder *b, const char *path)
{
    return index_builder_write_ex(b, path, 1);
}

int index_builder_write_ex(index_builder *b, const char *path, int sync)
{
    hanu_buf out = { 0 };
    int rc = flush_terms(b);
    if (!rc) rc = encode(b, &out);
    if (rc) {
        hanu_buf_free(&out);
        return rc;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) rc = errno == EEXIST ? HANU_ERR_EXISTS : HANU_ERR_IO;
    if (!rc) rc = hanu_write_full(fd, out.data, out.len);
    if (!rc && sync && fdatasync(fd) != 0) rc = HANU_ERR_IO;
    if (fd >= 0 && close(fd) != 0 && !rc) rc = HANU_ERR_IO;
    if (rc && fd >= 0) unlink(path);
    hanu_buf_free(&out);
    return rc;
}

/* ------------------------------------------------------------ term keys */

uint64_t index_number_bits(double v)
{
    if (v == 0) v = 0.0;   /* -0.0 and 0.0 are one value */
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return bits >> 63 ? ~bits : bits | UINT64_C(1) << 63;
}

double index_number_from_bits(uint64_t bits)
{
    bits = bits >> 63 ? bits & ~(UINT64_C(1) << 63) : ~bits;
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

size_t index_key(uint8_t *out, const char *path, size_t path_len, enum index_key_type type,
                 const char *value, size_t value_len, double num)
{
    if (path_len > INDEX_PATH_MAX || memchr(path, 0, path_len)) return 0;
    size_t n = path_len;
    memcpy(out, path, path_len);
    out[n++] = 0;
    out[n++] = (uint8_t)type;
    switch (type) {
    case INDEX_KEY_NUMBER: {
        uint64_t bits = index_number_bits(num);
        for (int i = 0; i < 8; i++) out[n + i] = (uint8_t)(bits >> (56 - 8 * i));   /* big-endian sorts */
        return n + 8;
    }
    case INDEX_KEY_STRING:
    case INDEX_KEY_WORD:
    case INDEX_KEY_ALL_WORD:
        if (value_len > INDEX_KEYWORD_MAX) return 0;
        memcpy(out + n, value, value_len);
        return n + value_len;
    default:
        return n;
    }
}
