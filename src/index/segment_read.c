/*
 * Segment reader: maps a segment file and validates all of it once at open
 * (checksum, bounds of every section, sorted keys, every postings block
 * decoded and checked), so that lookups and cursors afterwards need no checks.
 */
#include "index/index.h"
#include "index/segment_format.h"
#include "query/query.h"

#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct index_column {
    const uint8_t *path;
    uint32_t path_len, dict_n;
    const uint8_t *dict_off, *dict_bytes;
    uint64_t text_total;
    unsigned number_order;          /* INDEX_COL_ORDER_* flags (number_order at open) */
    double number_min, number_max;  /* when INDEX_COL_ALL_NUMBERS */
    index_column_blocks blocks;     /* when INDEX_COL_ALL_NUMBERS and memory allowed (n 0 otherwise) */
    void *blocks_mem;
    codec_desc desc[SEG_PARTS];
    const uint8_t *part[SEG_PARTS];
};

struct index_segment {
    const uint8_t *map;
    size_t size;
    uint32_t docs, nterms, ncols;
    const uint8_t *id_off, *id_bytes, *txns, *terms, *keys;
    index_column *cols;
    int ids_ascending;          /* every id is larger than the one before it */
    uint32_t min_ord, max_ord;  /* where the smallest and the largest id are */
    uint32_t version;
    double impact_avgdl;        /* index_segment_impact_avgdl */
    void *cache_entries;        /* the bitset cache's entries of this segment (bitset_cache.c, its lock) */
    _Atomic uint64_t *term_hints;   /* TERM_HINTS slots, NULL for a small term table */
};

/* A term lookup is a binary search over the mapped term table: about 20 steps
 * and twice as many cache misses on a table of a million terms, and a query
 * asks for the same key several times (its cost estimate, the collection's
 * statistics, then its cursors) and in every segment. Each segment keeps the
 * answer of its last lookups in TERM_HINTS slots chosen by the key's hash:
 * a slot holds 32 more bits of the hash and a position; the position is
 * verified against the table before use (it is the lower bound of key
 * exactly when the key there is >= key and the one before is < key), so a
 * stale or colliding slot costs a search, never a wrong answer, and the
 * slots need no lock (relaxed atomics, 64 KB a segment). The hash bits only
 * spare the verification's cache misses when another key holds the slot. */
#define TERM_HINTS 8192
#define HINT_TAG 0xffffffff00000000ull   /* the hash bits a slot keeps beside its position */
#define TERM_HINTS_MIN_TERMS 1024   /* below: the search stays in a few cache lines anyway */

void **index_segment_cache_slot(const index_segment *seg)
{
    /* The one mutable part of an open segment, owned by the cache under its lock. */
    return &((index_segment *)seg)->cache_entries;
}

static int fail(char *err, size_t cap, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return HANU_ERR_CORRUPT;
}

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, HANU_MIN(al, bl));
    return c ? c : (al > bl) - (al < bl);
}

/* True when [off, off + len) lies inside the body (before the footer). */
static int inside(const index_segment *s, uint64_t off, uint64_t len)
{
    uint64_t body = s->size - SEG_FOOTER;
    return off <= body && len <= body - off;
}

static int check_postings(index_segment *s, uint32_t term, char *err, size_t cap)
{
    const uint8_t *e = s->terms + (size_t)term * SEG_TERM;
    uint32_t df = hanu_get_u32(e + SEG_T_DF), nblocks = hanu_get_u32(e + SEG_T_BLOCKS);
    uint64_t table = hanu_get_u64(e + SEG_T_POSTINGS);
    if (df == 0 || nblocks != (df + INDEX_BLOCK - 1) / INDEX_BLOCK ||
        !inside(s, table, (uint64_t)nblocks * SEG_BLOCK))
        return fail(err, cap, "term %u: postings table out of bounds", term);
    int64_t prev = -1;
    uint32_t seen = 0;
    for (uint32_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = s->map + table + (size_t)b * SEG_BLOCK;
        uint32_t n = hanu_get_u32(blk + SEG_B_COUNT);
        unsigned dc = blk[SEG_B_DOC_CODE], tc = blk[SEG_B_TF_CODE];
        uint64_t payload = hanu_get_u64(blk + SEG_B_PAYLOAD);
        if (n == 0 || n > INDEX_BLOCK || !codec_code_valid(dc) || !codec_code_valid(tc) ||
            !inside(s, payload, codec_payload_size(dc, n) + codec_payload_size(tc, n)))
            return fail(err, cap, "term %u block %u: bad header", term, b);
        uint64_t d[INDEX_BLOCK];
        codec_unpack((codec_desc){ (uint8_t)dc, hanu_get_u64(blk + SEG_B_DOC_BASE) }, s->map + payload,
                     0, n, d, 1);
        for (uint32_t i = 0; i < n; i++) {
            if (d[i] >= s->docs) return fail(err, cap, "term %u: ordinal out of range", term);
            prev += (int64_t)d[i] + 1;
            if (prev >= (int64_t)s->docs) return fail(err, cap, "term %u: ordinal out of range", term);
        }
        if ((uint32_t)prev != hanu_get_u32(blk + SEG_B_LAST))
            return fail(err, cap, "term %u block %u: last ordinal mismatch", term, b);
        seen += n;
    }
    return seen == df ? HANU_OK : fail(err, cap, "term %u: count mismatch", term);
}

static int check_terms(index_segment *s, char *err, size_t cap)
{
    const uint8_t *h = s->map;
    uint64_t table = hanu_get_u64(h + SEG_H_TERM_TABLE), keys = hanu_get_u64(h + SEG_H_KEYS);
    uint64_t keys_len = hanu_get_u64(h + SEG_H_KEYS_LEN);
    if (!inside(s, table, (uint64_t)s->nterms * SEG_TERM) || !inside(s, keys, keys_len))
        return fail(err, cap, "term table out of bounds");
    s->terms = s->map + table;
    s->keys = s->map + keys;
    const uint8_t *prev = NULL;
    size_t prev_len = 0;
    for (uint32_t i = 0; i < s->nterms; i++) {
        const uint8_t *e = s->terms + (size_t)i * SEG_TERM;
        uint64_t off = hanu_get_u32(e + SEG_T_KEY_OFF), len = hanu_get_u32(e + SEG_T_KEY_LEN);
        if (len == 0 || len > INDEX_KEY_MAX || off > keys_len || len > keys_len - off)
            return fail(err, cap, "term %u: key out of bounds", i);
        const uint8_t *k = s->keys + off;
        if (prev && key_cmp(prev, prev_len, k, len) >= 0) return fail(err, cap, "term %u: keys not sorted", i);
        prev = k;
        prev_len = len;
        int rc = check_postings(s, i, err, cap);
        if (rc) return rc;
    }
    return HANU_OK;
}

static int by_max_desc(const void *a, const void *b, void *blk)
{
    const index_column_blocks *k = blk;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (k->max[x] != k->max[y]) return k->max[x] > k->max[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static int by_min_asc(const void *a, const void *b, void *blk)
{
    const index_column_blocks *k = blk;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (k->min[x] != k->min[y]) return k->min[x] < k->min[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* Least and largest value per block of INDEX_COL_BLOCK ordinals of a column of
 * exact numbers, and the blocks in the order a descending and an ascending
 * sort visit them: a nearly sorted column (timestamps written by many clients
 * at once) gives a find its top k from a few blocks. 24 bytes a block; none
 * when the memory is not there (the find then reads every match). */
static void number_blocks(index_column *c, uint32_t docs)
{
    uint32_t n = (docs + INDEX_COL_BLOCK - 1) / INDEX_COL_BLOCK;
    char *mem = malloc((size_t)n * (2 * sizeof(double) + 2 * sizeof(uint32_t)));
    if (!mem) return;
    double *min = (double *)mem, *max = min + n;
    uint32_t *desc = (uint32_t *)(max + n), *asc = desc + n;
    for (uint32_t b = 0; b < n; b++) {
        uint32_t end = HANU_MIN(docs, (b + 1) * INDEX_COL_BLOCK);
        min[b] = max[b] = index_column_number(c, b * INDEX_COL_BLOCK);
        for (uint32_t d = b * INDEX_COL_BLOCK + 1; d < end; d++) {
            double v = index_column_number(c, d);
            min[b] = v < min[b] ? v : min[b];
            max[b] = v > max[b] ? v : max[b];
        }
        desc[b] = asc[b] = b;
    }
    c->blocks = (index_column_blocks){ .n = n, .min = min, .max = max, .by_max_desc = desc, .by_min_asc = asc };
    qsort_r(desc, n, sizeof *desc, by_max_desc, &c->blocks);
    qsort_r(asc, n, sizeof *asc, by_min_asc, &c->blocks);
    c->blocks_mem = mem;
}

/* Whether every value of the column is a number a double holds exactly, its
 * least and largest, and whether the values never fall or never rise from one
 * ordinal to the next: what lets a find sorted on the column stop early or skip
 * the segment (find.c). A constant column is both. */
static void number_order(index_column *c, uint32_t docs)
{
    c->number_order = 0;
    if (!docs || codec_get(c->desc[SEG_PART_TAGS], c->part[SEG_PART_TAGS], 0) != INDEX_COL_NUMBER) return;
    unsigned order = INDEX_COL_ALL_NUMBERS | INDEX_COL_NONDECREASING | INDEX_COL_NONINCREASING;
    double prev = index_column_number(c, 0), lo = prev, hi = prev;
    for (uint32_t d = 0; d < docs; d++) {
        if (index_column_tag(c, d) != INDEX_COL_NUMBER) return;
        double v = index_column_number(c, d);
        if (!(fabs(v) < INDEX_EXACT_LIMIT)) return;
        if (v < prev) order &= ~(unsigned)INDEX_COL_NONDECREASING;
        if (v > prev) order &= ~(unsigned)INDEX_COL_NONINCREASING;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        prev = v;
    }
    c->number_order = order;
    c->number_min = lo;
    c->number_max = hi;
    number_blocks(c, docs);
}

static int check_columns(index_segment *s, char *err, size_t cap)
{
    uint64_t table = hanu_get_u64(s->map + SEG_H_COLUMN_TABLE);
    if (!inside(s, table, (uint64_t)s->ncols * SEG_COLUMN)) return fail(err, cap, "column table out of bounds");
    s->cols = calloc(s->ncols ? s->ncols : 1, sizeof *s->cols);
    if (!s->cols) return HANU_ERR_NOMEM;
    for (uint32_t i = 0; i < s->ncols; i++) {
        const uint8_t *e = s->map + table + (size_t)i * SEG_COLUMN;
        index_column *c = &s->cols[i];
        uint64_t path = hanu_get_u64(e + SEG_C_PATH), dict = hanu_get_u64(e + SEG_C_DICT);
        c->path_len = hanu_get_u32(e + SEG_C_PATH_LEN);
        c->dict_n = hanu_get_u32(e + SEG_C_DICT_N);
        c->text_total = hanu_get_u64(e + SEG_C_TEXT_TOTAL);
        if (c->path_len > INDEX_PATH_MAX || !inside(s, path, c->path_len) ||
            !inside(s, dict, ((uint64_t)c->dict_n + 1) * 4))
            return fail(err, cap, "column %u: out of bounds", i);
        c->path = s->map + path;
        if (i && key_cmp(s->cols[i - 1].path, s->cols[i - 1].path_len, c->path, c->path_len) >= 0)
            return fail(err, cap, "column %u: paths not sorted", i);
        c->dict_off = s->map + dict;
        c->dict_bytes = c->dict_off + ((size_t)c->dict_n + 1) * 4;
        uint32_t last = 0;
        for (uint32_t j = 0; j <= c->dict_n; j++) {
            uint32_t o = hanu_get_u32(c->dict_off + (size_t)j * 4);
            if (o < last || (j == 0 && o != 0)) return fail(err, cap, "column %u: dictionary offsets", i);
            last = o;
        }
        if (!inside(s, dict + ((uint64_t)c->dict_n + 1) * 4, last))
            return fail(err, cap, "column %u: dictionary out of bounds", i);
        for (int p = 0; p < SEG_PARTS; p++) {
            const uint8_t *pe = e + SEG_C_PARTS + p * SEG_C_PART;
            c->desc[p] = (codec_desc){ pe[16], hanu_get_u64(pe + 8) };
            uint64_t at = hanu_get_u64(pe);
            if (!codec_code_valid(c->desc[p].code) || !inside(s, at, codec_payload_size(c->desc[p].code, s->docs)))
                return fail(err, cap, "column %u part %d: out of bounds", i, p);
            c->part[p] = s->map + at;
        }
        for (uint32_t d = 0; d < s->docs; d++) {
            uint64_t tag = codec_get(c->desc[SEG_PART_TAGS], c->part[SEG_PART_TAGS], d);
            if (tag > INDEX_COL_MULTI) return fail(err, cap, "column %u: bad tag", i);
            if (tag == INDEX_COL_STRING && codec_get(c->desc[SEG_PART_ORDS], c->part[SEG_PART_ORDS], d) >= c->dict_n)
                return fail(err, cap, "column %u: string ordinal out of range", i);
            if (codec_get(c->desc[SEG_PART_LENGTHS], c->part[SEG_PART_LENGTHS], d) > UINT32_MAX)
                return fail(err, cap, "column %u: text length out of range", i);
        }
        number_order(c, s->docs);
    }
    return HANU_OK;
}

static int ord_id_cmp(const index_segment *s, uint32_t a, const index_segment *t, uint32_t b)
{
    size_t al, bl;
    const uint8_t *x = (const uint8_t *)index_segment_doc_id(s, a, &al);
    const uint8_t *y = (const uint8_t *)index_segment_doc_id(t, b, &bl);
    return key_cmp(x, al, y, bl);
}

/* Whether ordinals follow the ids (the usual case: ids made in write order)
 * and where the extreme ids are, so that ties on a sort key or a score are
 * mostly broken without reading ids (index_doc_id_cmp). One pass at open,
 * which reads the whole file for its checksum anyway. */
static void id_order(index_segment *s)
{
    s->ids_ascending = 1;
    s->min_ord = s->max_ord = 0;
    for (uint32_t d = 1; d < s->docs; d++) {
        if (s->ids_ascending && ord_id_cmp(s, d - 1, s, d) < 0) {   /* the smallest stays at 0 */
            s->max_ord = d;
            continue;
        }
        s->ids_ascending = 0;
        if (ord_id_cmp(s, d, s, s->min_ord) < 0) s->min_ord = d;
        if (ord_id_cmp(s, d, s, s->max_ord) > 0) s->max_ord = d;
    }
}

static int check(index_segment *s, char *err, size_t cap)
{
    if (s->size < SEG_HEADER + SEG_FOOTER || memcmp(s->map, SEG_MAGIC, 8) != 0 ||
        memcmp(s->map + s->size - 8, SEG_END_MAGIC, 8) != 0)
        return fail(err, cap, "not a segment file (magic)");
    s->version = hanu_get_u32(s->map + SEG_H_VERSION);
    if (s->version < SEG_VERSION_MIN || s->version > SEG_VERSION)
        return fail(err, cap, "segment version %u not supported", s->version);
    if (hanu_get_u64(s->map + s->size - SEG_FOOTER) != hanu_hash64(s->map, s->size - SEG_FOOTER, 0))
        return fail(err, cap, "checksum mismatch");
    s->docs = hanu_get_u32(s->map + SEG_H_DOCS);
    s->nterms = hanu_get_u32(s->map + SEG_H_TERMS);
    s->ncols = hanu_get_u32(s->map + SEG_H_COLUMNS);
    uint64_t ids = hanu_get_u64(s->map + SEG_H_IDS), txns = hanu_get_u64(s->map + SEG_H_TXNS);
    if (s->docs > INDEX_SEGMENT_MAX_DOCS || !inside(s, ids, ((uint64_t)s->docs + 1) * 4) ||
        !inside(s, txns, (uint64_t)s->docs * 8))
        return fail(err, cap, "document tables out of bounds");
    s->id_off = s->map + ids;
    s->id_bytes = s->id_off + ((size_t)s->docs + 1) * 4;
    s->txns = s->map + txns;
    uint32_t last = 0;
    for (uint32_t d = 0; d <= s->docs; d++) {
        uint32_t o = hanu_get_u32(s->id_off + (size_t)d * 4);
        if (o < last || (d == 0 && o != 0)) return fail(err, cap, "id offsets not increasing");
        last = o;
    }
    if (!inside(s, ids + ((uint64_t)s->docs + 1) * 4, last)) return fail(err, cap, "ids out of bounds");
    id_order(s);
    int rc = check_terms(s, err, cap);
    if (!rc) rc = check_columns(s, err, cap);
    const index_column *text = rc ? NULL : index_segment_column(s, "", 0);
    if (text && s->version >= 2 && s->docs && index_column_text_total(text))
        s->impact_avgdl = (double)index_column_text_total(text) / (double)s->docs;
    return rc;
}

uint32_t index_block_impact(uint32_t tf, uint32_t len, double a0)
{
    double ratio = tf / (tf + BM25_K1 * (1 - BM25_B + BM25_B * (len / a0)));
    double q = floor(ratio * INDEX_IMPACT_ONE) + 1;   /* above the ratio by at least one step */
    return q >= INDEX_IMPACT_ONE ? 65535u : (uint32_t)q;
}

double index_segment_impact_avgdl(const index_segment *seg) { return seg->impact_avgdl; }

uint32_t index_postings_block_impact(const index_postings *p, uint32_t b)
{
    return p->seg->impact_avgdl > 0 ? hanu_get_u16(p->blocks + (size_t)b * SEG_BLOCK + SEG_B_IMPACT) : 0;
}

int index_segment_open(const char *path, index_segment **out, char *err, size_t errcap)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(err, errcap, "cannot open %s", path);
        return HANU_ERR_IO;
    }
    struct stat st;
    index_segment *s = calloc(1, sizeof *s);
    int rc = s ? HANU_OK : HANU_ERR_NOMEM;
    if (!rc && fstat(fd, &st) != 0) rc = HANU_ERR_IO;
    if (!rc && (st.st_size < SEG_HEADER + SEG_FOOTER || (uint64_t)st.st_size > SIZE_MAX / 2))
        rc = fail(err, errcap, "not a segment file (size %lld)", (long long)st.st_size);
    if (!rc) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) rc = HANU_ERR_IO;
        else {
            s->map = m;
            s->size = (size_t)st.st_size;
            rc = check(s, err, errcap);
        }
    }
    close(fd);
    if (!rc && s->nterms >= TERM_HINTS_MIN_TERMS) {
        s->term_hints = malloc(TERM_HINTS * sizeof *s->term_hints);
        if (!s->term_hints) rc = HANU_ERR_NOMEM;
        for (uint32_t i = 0; !rc && i < TERM_HINTS; i++) atomic_init(&s->term_hints[i], UINT32_MAX);   /* no position */
    }
    if (rc) {
        index_segment_close(s);
        return rc;
    }
    *out = s;
    return HANU_OK;
}

void index_segment_close(index_segment *s)
{
    if (!s) return;
    index_bitset_cache_forget(s);   /* its cached filter bitmaps die with the mapping */
    if (s->map) munmap((void *)s->map, s->size);
    for (uint32_t i = 0; s->cols && i < s->ncols; i++) free(s->cols[i].blocks_mem);
    free(s->cols);
    free((void *)s->term_hints);
    free(s);
}

uint32_t index_segment_docs(const index_segment *s) { return s->docs; }
uint64_t index_segment_bytes(const index_segment *s) { return s->size; }

const char *index_segment_doc_id(const index_segment *s, uint32_t ord, size_t *len)
{
    uint32_t a = hanu_get_u32(s->id_off + (size_t)ord * 4), b = hanu_get_u32(s->id_off + (size_t)ord * 4 + 4);
    *len = b - a;
    return (const char *)s->id_bytes + a;
}

int index_segment_ids_ascending(const index_segment *s) { return s->ids_ascending; }

int index_segment_id_ranges_cmp(const index_segment *a, const index_segment *b)
{
    if (a == b || !a->docs || !b->docs) return 0;
    if (ord_id_cmp(a, a->max_ord, b, b->min_ord) < 0) return -1;
    if (ord_id_cmp(b, b->max_ord, a, a->min_ord) < 0) return 1;
    return 0;
}

int index_doc_id_cmp(const index_segment *a, uint32_t oa, const index_segment *b, uint32_t ob)
{
    if (a == b && a->ids_ascending) return (oa > ob) - (oa < ob);
    if (a != b && a->docs && b->docs) {
        if (ord_id_cmp(a, a->max_ord, b, b->min_ord) < 0) return -1;
        if (ord_id_cmp(b, b->max_ord, a, a->min_ord) < 0) return 1;
    }
    int c = ord_id_cmp(a, oa, b, ob);
    return (c > 0) - (c < 0);
}

uint64_t index_segment_doc_txn(const index_segment *s, uint32_t ord)
{
    return hanu_get_u64(s->txns + (size_t)ord * 8);
}

/* ---------------------------------------------------------------- terms */

uint32_t index_segment_terms(const index_segment *s) { return s->nterms; }

const uint8_t *index_segment_term(const index_segment *s, uint32_t i, size_t *len, uint32_t *df)
{
    const uint8_t *e = s->terms + (size_t)i * SEG_TERM;
    *len = hanu_get_u32(e + SEG_T_KEY_LEN);
    if (df) *df = hanu_get_u32(e + SEG_T_DF);
    return s->keys + hanu_get_u32(e + SEG_T_KEY_OFF);
}

static int term_cmp(const index_segment *s, uint32_t i, const uint8_t *key, size_t len)
{
    size_t kl;
    const uint8_t *k = index_segment_term(s, i, &kl, NULL);
    return key_cmp(k, kl, key, len);
}

/* Whether position i (<= nterms) is the lower bound of key. */
static int is_lower_bound(const index_segment *s, uint32_t i, const uint8_t *key, size_t len)
{
    if (i < s->nterms) {
        int c = term_cmp(s, i, key, len);
        if (c == 0) return 1;   /* keys are unique: the one equal key is the bound */
        if (c < 0) return 0;
    }
    return i == 0 || term_cmp(s, i - 1, key, len) < 0;
}

uint32_t index_segment_term_lower_bound(const index_segment *s, const uint8_t *key, size_t len)
{
    _Atomic uint64_t *slot = NULL;
    uint64_t tag = 0;
    if (s->term_hints) {
        uint64_t h = hanu_hash64(key, len, 0);
        slot = &s->term_hints[h & (TERM_HINTS - 1)];
        tag = h & HINT_TAG;
        uint64_t v = atomic_load_explicit(slot, memory_order_relaxed);
        uint32_t hint = (uint32_t)v;
        if ((v & HINT_TAG) == tag && hint <= s->nterms && is_lower_bound(s, hint, key, len)) return hint;
    }
    uint32_t lo = 0, hi = s->nterms;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (term_cmp(s, mid, key, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (slot) atomic_store_explicit(slot, tag | lo, memory_order_relaxed);
    return lo;
}

/* The term the hint slot of hash h names in s, or UINT32_MAX (no hints, the
 * slot another key's, or the position past the last term). */
static uint32_t hinted_term(const index_segment *s, uint64_t h)
{
    if (!s->term_hints) return UINT32_MAX;
    uint64_t v = atomic_load_explicit(&s->term_hints[h & (TERM_HINTS - 1)], memory_order_relaxed);
    return (v & HINT_TAG) == (h & HINT_TAG) && (uint32_t)v < s->nterms ? (uint32_t)v : UINT32_MAX;
}

void index_snapshot_term_prefetch(const index_snapshot *snap, const uint8_t *key, size_t len)
{
    uint64_t h = hanu_hash64(key, len, 0);
    const index_snapshot_segment *ss = snap->segments;
    for (uint32_t i = 0; i < snap->nsegments; i++)   /* the slots */
        if (ss[i].seg->term_hints) __builtin_prefetch(&ss[i].seg->term_hints[h & (TERM_HINTS - 1)]);
    for (uint32_t i = 0; i < snap->nsegments; i++) {   /* the terms they name */
        uint32_t t = hinted_term(ss[i].seg, h);
        if (t != UINT32_MAX) __builtin_prefetch(ss[i].seg->terms + (size_t)t * SEG_TERM);
    }
    for (uint32_t i = 0; i < snap->nsegments; i++) {   /* their key bytes */
        uint32_t t = hinted_term(ss[i].seg, h);
        size_t kl;
        if (t != UINT32_MAX) __builtin_prefetch(index_segment_term(ss[i].seg, t, &kl, NULL));
    }
}

uint32_t index_segment_term_find(const index_segment *s, const uint8_t *key, size_t len)
{
    uint32_t i = index_segment_term_lower_bound(s, key, len);
    if (i == s->nterms) return UINT32_MAX;
    size_t kl;
    const uint8_t *k = index_segment_term(s, i, &kl, NULL);
    return key_cmp(k, kl, key, len) == 0 ? i : UINT32_MAX;
}

/* ------------------------------------------------------------- postings */

static void load_block(index_postings *p)
{
    const uint8_t *blk = p->blocks + (size_t)p->block * SEG_BLOCK;
    uint32_t n = hanu_get_u32(blk + SEG_B_COUNT);
    const uint8_t *payload = p->seg->map + hanu_get_u64(blk + SEG_B_PAYLOAD);
    codec_desc dd = { blk[SEG_B_DOC_CODE], hanu_get_u64(blk + SEG_B_DOC_BASE) };
    codec_desc td = { blk[SEG_B_TF_CODE], hanu_get_u32(blk + SEG_B_TF_BASE) };
    uint64_t v[INDEX_BLOCK];
    codec_unpack(dd, payload, 0, n, v, 1);
    int64_t prev = p->block ? (int64_t)hanu_get_u32(blk - SEG_BLOCK + SEG_B_LAST) : -1;
    for (uint32_t i = 0; i < n; i++) {
        prev += (int64_t)v[i] + 1;
        p->ords[i] = (uint32_t)prev;
    }
    codec_unpack(td, payload + codec_payload_size(dd.code, n), 0, n, v, 1);
    for (uint32_t i = 0; i < n; i++) p->tfs[i] = (uint32_t)v[i];
    p->n = n;
    p->pos = 0;
}

void index_postings_open(index_postings *p, const index_segment *s, uint32_t term)
{
    const uint8_t *e = s->terms + (size_t)term * SEG_TERM;
    p->seg = s;
    p->blocks = s->map + hanu_get_u64(e + SEG_T_POSTINGS);
    p->nblocks = hanu_get_u32(e + SEG_T_BLOCKS);
    p->block = 0;
    load_block(p);
    p->doc = p->ords[0];
    p->tf = p->tfs[0];
}

uint32_t index_postings_advance(index_postings *p, uint32_t target)
{
    if (p->doc == INDEX_ORD_END || p->doc >= target) return p->doc;
    /* Skip whole blocks by their last ordinal before decoding one. */
    if (hanu_get_u32(p->blocks + (size_t)p->block * SEG_BLOCK + SEG_B_LAST) < target) {
        do {
            if (++p->block == p->nblocks) return p->doc = INDEX_ORD_END;
        } while (hanu_get_u32(p->blocks + (size_t)p->block * SEG_BLOCK + SEG_B_LAST) < target);
        load_block(p);
    }
    while (p->ords[p->pos] < target) p->pos++;   /* the block's last is >= target */
    p->doc = p->ords[p->pos];
    p->tf = p->tfs[p->pos];
    return p->doc;
}

void index_postings_load(index_postings *p, uint32_t b)
{
    p->block = b;
    load_block(p);
    p->doc = p->ords[0];
    p->tf = p->tfs[0];
}

uint32_t index_postings_block_last(const index_postings *p)
{
    return hanu_get_u32(p->blocks + (size_t)p->block * SEG_BLOCK + SEG_B_LAST);
}

uint32_t index_postings_block_max_tf(const index_postings *p)
{
    return hanu_get_u32(p->blocks + (size_t)p->block * SEG_BLOCK + SEG_B_MAX_TF);
}

uint32_t index_postings_block_min_length(const index_postings *p)
{
    return hanu_get_u32(p->blocks + (size_t)p->block * SEG_BLOCK + SEG_B_MIN_LEN);
}

/* -------------------------------------------------------------- columns */

const index_column *index_segment_column(const index_segment *s, const char *path, size_t len)
{
    uint32_t lo = 0, hi = s->ncols;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(s->cols[mid].path, s->cols[mid].path_len, (const uint8_t *)path, len);
        if (c == 0) return &s->cols[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

uint32_t index_segment_column_count(const index_segment *s) { return s->ncols; }

const index_column *index_segment_column_at(const index_segment *s, uint32_t i) { return &s->cols[i]; }

const char *index_column_path(const index_column *c, size_t *len)
{
    *len = c->path_len;
    return (const char *)c->path;
}

enum index_col_tag index_column_tag(const index_column *c, uint32_t ord)
{
    return (enum index_col_tag)codec_get(c->desc[SEG_PART_TAGS], c->part[SEG_PART_TAGS], ord);
}

static void prefetch_part(const index_column *c, int part, uint32_t ord)
{
    codec_desc d = c->desc[part];
    if (d.code == CODEC_CONST) return;
    size_t byte = d.code == CODEC_RAW ? (size_t)ord * 8 : ((size_t)ord * d.code) >> 3;
    __builtin_prefetch(c->part[part] + byte);
}

void index_column_prefetch(const index_column *c, uint32_t ord)
{
    prefetch_part(c, SEG_PART_TAGS, ord);
    prefetch_part(c, SEG_PART_NUMBERS, ord);
    prefetch_part(c, SEG_PART_ORDS, ord);
}

double index_column_number(const index_column *c, uint32_t ord)
{
    return index_number_from_bits(codec_get(c->desc[SEG_PART_NUMBERS], c->part[SEG_PART_NUMBERS], ord));
}

uint32_t index_column_string_ord(const index_column *c, uint32_t ord)
{
    return (uint32_t)codec_get(c->desc[SEG_PART_ORDS], c->part[SEG_PART_ORDS], ord);
}

void index_column_string_is(const index_column *c, const uint32_t *ords, uint32_t n, uint32_t sord, int8_t *out)
{
    codec_desc td = c->desc[SEG_PART_TAGS], od = c->desc[SEG_PART_ORDS];
    const uint8_t *tags = c->part[SEG_PART_TAGS], *strs = c->part[SEG_PART_ORDS];
    if (td.code == CODEC_CONST) {   /* one tag for every document: a field of one type, the usual case */
        if (td.base != INDEX_COL_STRING || sord == UINT32_MAX) {
            memset(out, td.base == INDEX_COL_MULTI ? -1 : 0, n);
            return;
        }
        for (uint32_t i = 0; i < n; i++) out[i] = codec_get(od, strs, ords[i]) == sord;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t tag = codec_get(td, tags, ords[i]);
        out[i] = tag == INDEX_COL_MULTI ? -1
               : tag == INDEX_COL_STRING && sord != UINT32_MAX && codec_get(od, strs, ords[i]) == sord;
    }
}

uint32_t index_column_dict_size(const index_column *c) { return c->dict_n; }

uint32_t index_column_dict_find(const index_column *c, const char *s, size_t len)
{
    uint32_t lo = 0, hi = c->dict_n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        size_t ml;
        const uint8_t *m = (const uint8_t *)index_column_dict(c, mid, &ml);
        if (key_cmp(m, ml, (const uint8_t *)s, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    size_t fl;
    const char *f = lo < c->dict_n ? index_column_dict(c, lo, &fl) : NULL;
    return f && fl == len && memcmp(f, s, len) == 0 ? lo : UINT32_MAX;
}

const char *index_column_dict(const index_column *c, uint32_t i, size_t *len)
{
    uint32_t a = hanu_get_u32(c->dict_off + (size_t)i * 4), b = hanu_get_u32(c->dict_off + (size_t)i * 4 + 4);
    *len = b - a;
    return (const char *)c->dict_bytes + a;
}

uint32_t index_column_text_length(const index_column *c, uint32_t ord)
{
    return (uint32_t)codec_get(c->desc[SEG_PART_LENGTHS], c->part[SEG_PART_LENGTHS], ord);
}

uint64_t index_column_text_total(const index_column *c) { return c->text_total; }

const index_column_blocks *index_column_number_blocks(const index_column *c)
{
    return c->blocks.n ? &c->blocks : NULL;
}

unsigned index_column_number_order(const index_column *c, double *min, double *max)
{
    *min = c->number_min;
    *max = c->number_max;
    return c->number_order;
}

