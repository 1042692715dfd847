/*
 * segment_write.c: the streaming merge (docs/INDEX.md, "Merges"). The live
 * documents of the inputs are written straight from the inputs' files to the
 * output file, section by section, through a few bounded buffers: terms are
 * merged k-way in key order from the inputs' sorted term tables, each merged
 * term's postings decoded block by block, remapped through the ordinal maps
 * and encoded again; columns are packed a chunk of documents at a time. The
 * file is byte for byte what index_merge_write_rebuild (the builder fed the
 * same documents) writes, without holding the documents, postings or file in
 * memory: the memory bound is written down in docs/INDEX.md.
 *
 * Sections whose place depends on sizes found later are written by their own
 * buffered region writers at offsets computed ahead (a first pass over the
 * term keys counts the merged terms); the header and the column table, known
 * only at the end, are written last with pwrite, and the footer's checksum is
 * computed by reading the file back.
 */
#include "index/index.h"
#include "index/segment_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#define REGION_BUF (256u << 10)        /* each region writer's buffer */
#define WRITEBACK_BYTES (8u << 20)     /* dirty bytes a region leaves before starting their writeback */
#define COLUMN_CHUNK 4096u             /* column values packed at once; a multiple of 8 */
#define READBACK_BUF (1u << 20)

/* ------------------------------------------------------------ region writer */

/* A buffered writer of one section of the file: bytes go to [off, ...) in order. */
typedef struct region {
    int fd;
    uint64_t off;               /* file offset of buf[0] */
    uint8_t *buf;
    size_t len;
    uint64_t unsynced;          /* writeback is started below this offset */
    uint64_t started;           /* and not yet waited for from here */
} region;

static int region_open(region *r, int fd, uint64_t off)
{
    *r = (region){ .fd = fd, .off = off, .unsynced = off, .started = off };
    r->buf = malloc(REGION_BUF + CODEC_SLACK);
    return r->buf ? HANU_OK : HANU_ERR_NOMEM;
}

static int region_flush(region *r)
{
    if (!r->len) return HANU_OK;
    int rc = hanu_pwrite_full(r->fd, r->buf, r->len, (off_t)r->off);
    if (rc) return rc;
    r->off += r->len;
    r->len = 0;
    /* Start the writeback of what this region wrote and wait for the piece
       started before it, so that a merge leaves at most about two pieces a
       region dirty or under writeback rather than the whole file until its
       fdatasync. Errors show at that fdatasync. */
    if (r->off - r->unsynced >= WRITEBACK_BYTES) {
        (void)sync_file_range(r->fd, (off_t)r->unsynced, (off_t)(r->off - r->unsynced), SYNC_FILE_RANGE_WRITE);
        if (r->unsynced > r->started)
            (void)sync_file_range(r->fd, (off_t)r->started, (off_t)(r->unsynced - r->started),
                                  SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        r->started = r->unsynced;
        r->unsynced = r->off;
    }
    return HANU_OK;
}

static uint64_t region_pos(const region *r) { return r->off + r->len; }

static int region_put(region *r, const void *p, size_t n)
{
    if (r->len + n > REGION_BUF) {
        int rc = region_flush(r);
        if (rc) return rc;
        if (n > REGION_BUF) {
            rc = hanu_pwrite_full(r->fd, p, n, (off_t)r->off);
            if (!rc) r->off += n;
            return rc;
        }
    }
    memcpy(r->buf + r->len, p, n);
    r->len += n;
    return HANU_OK;
}

static int region_put_u32(region *r, uint32_t v)
{
    uint8_t b[4];
    hanu_put_u32(b, v);
    return region_put(r, b, 4);
}

static int region_pad8(region *r)
{
    static const uint8_t zero[8];
    return region_put(r, zero, (8 - (region_pos(r) & 7)) & 7);
}

/* Moves the writer past n bytes that another writer fills. */
static int region_skip(region *r, uint64_t n)
{
    int rc = region_flush(r);
    if (!rc) r->off += n;
    return rc;
}

static void region_close(region *r)
{
    free(r->buf);
    r->buf = NULL;
}

/* ------------------------------------------------------------ k-way heap */

/* Sources ordered by their current key, ties by source number (input order). */
typedef struct kheap {
    uint32_t *heap, n;
    const uint8_t **key;        /* per source: its current key */
    size_t *len;
} kheap;

static int kheap_init(kheap *h, uint32_t sources)
{
    size_t n = sources ? sources : 1;
    h->heap = malloc(n * sizeof *h->heap);
    h->key = malloc(n * sizeof *h->key);
    h->len = malloc(n * sizeof *h->len);
    h->n = 0;
    return h->heap && h->key && h->len ? HANU_OK : HANU_ERR_NOMEM;
}

static void kheap_free(kheap *h)
{
    free(h->heap);
    free(h->key);
    free(h->len);
}

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, HANU_MIN(al, bl));
    return c ? c : (al > bl) - (al < bl);
}

static int kheap_less(const kheap *h, uint32_t a, uint32_t b)
{
    int c = key_cmp(h->key[a], h->len[a], h->key[b], h->len[b]);
    return c ? c < 0 : a < b;
}

/* Adds source s, whose key and len are set. */
static void kheap_push(kheap *h, uint32_t s)
{
    uint32_t i = h->n++;
    while (i && kheap_less(h, s, h->heap[(i - 1) / 2])) {
        h->heap[i] = h->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->heap[i] = s;
}

static uint32_t kheap_pop(kheap *h)
{
    uint32_t top = h->heap[0], last = h->heap[--h->n], i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && kheap_less(h, h->heap[c + 1], h->heap[c])) c++;
        if (!kheap_less(h, h->heap[c], last)) break;
        h->heap[i] = h->heap[c];
        i = c;
    }
    if (h->n) h->heap[i] = last;
    return top;
}

/* Pops every source whose key equals the smallest; they come in source order. */
static uint32_t kheap_pop_equal(kheap *h, uint32_t *out)
{
    uint32_t k = 0, first = kheap_pop(h);
    out[k++] = first;
    while (h->n && key_cmp(h->key[h->heap[0]], h->len[h->heap[0]], h->key[first], h->len[first]) == 0)
        out[k++] = kheap_pop(h);
    return k;
}

/* ------------------------------------------------------------ the merge */

/* A column path of the output and its column in each input (NULL where absent). */
typedef struct merge_column {
    const uint8_t *path;
    uint32_t path_len;
    const index_column **in;
} merge_column;

typedef struct merger {
    const index_merge_input *in;
    uint32_t n, docs;
    uint32_t *const *map;
    uint8_t *has_deleted;       /* per input */
    int fd;
    region main, table, keys;
    merge_column *cols;
    uint32_t ncols;
    const index_column **col_refs;
    kheap heap;
    uint32_t *pos, *hits;       /* per input: next term or dictionary entry; sources of a key */
    const index_column **lens;  /* per input: the text-length column of the current term's path */
    const uint8_t *lens_path;
    size_t lens_path_len;
    hanu_buf payloads, blocks;  /* one term's, until its block table is placed */
    uint32_t nterms;
    uint64_t key_total;
    uint64_t txns;              /* where the txns start */
    double impact_avgdl;        /* a0 of the output's block impacts (0: none) */
    int impacts;                /* the current term's blocks carry impacts (a whole-text word) */
} merger;

/* The ordinal maps, ids and txns. */
static int write_documents(merger *m)
{
    uint64_t id_total = 0;
    m->docs = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        const index_merge_input *in = &m->in[i];
        uint32_t docs = index_segment_docs(in->seg), k = 0;
        for (uint32_t ord = 0; ord < docs; ord++) {
            while (k < in->ndeleted && in->deleted[k] < ord) k++;
            if (k < in->ndeleted && in->deleted[k] == ord) {
                m->map[i][ord] = INDEX_ORD_END;
                m->has_deleted[i] = 1;
                continue;
            }
            if (m->docs >= INDEX_SEGMENT_MAX_DOCS) return HANU_ERR_TOO_LARGE;
            m->map[i][ord] = m->docs++;
        }
    }
    uint8_t header[SEG_HEADER] = { 0 };
    int rc = region_put(&m->main, header, sizeof header);   /* written last */
    if (!rc) rc = region_put_u32(&m->main, 0);
    for (int pass = 0; pass < 3 && !rc; pass++) {   /* id offsets, id bytes, txns */
        if (pass == 2) {
            if ((rc = region_pad8(&m->main))) break;
            m->txns = region_pos(&m->main);
        }
        for (uint32_t i = 0; i < m->n && !rc; i++) {
            const index_segment *seg = m->in[i].seg;
            uint32_t docs = index_segment_docs(seg);
            for (uint32_t ord = 0; ord < docs && !rc; ord++) {
                if (m->map[i][ord] == INDEX_ORD_END) continue;
                size_t len;
                const char *id = index_segment_doc_id(seg, ord, &len);
                if (pass == 0) {
                    id_total += len;
                    if (id_total > UINT32_MAX) return HANU_ERR_TOO_LARGE;
                    rc = region_put_u32(&m->main, (uint32_t)id_total);
                } else if (pass == 1) {
                    rc = region_put(&m->main, id, len);
                } else {
                    uint8_t t[8];
                    hanu_put_u64(t, index_segment_doc_txn(seg, ord));
                    rc = region_put(&m->main, t, 8);
                }
            }
        }
    }
    return rc;
}

/* Starts the k-way merge of the inputs' term keys. */
static void terms_start(merger *m)
{
    m->heap.n = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        m->pos[i] = 0;
        if (index_segment_terms(m->in[i].seg) == 0) continue;
        m->heap.key[i] = index_segment_term(m->in[i].seg, 0, &m->heap.len[i], NULL);
        kheap_push(&m->heap, i);
    }
}

/* The next merged key: its sources in m->hits (returns how many, 0 at the end). */
static uint32_t terms_next(merger *m, uint32_t prev_hits)
{
    for (uint32_t k = 0; k < prev_hits; k++) {
        uint32_t i = m->hits[k];
        if (++m->pos[i] == index_segment_terms(m->in[i].seg)) continue;
        m->heap.key[i] = index_segment_term(m->in[i].seg, m->pos[i], &m->heap.len[i], NULL);
        kheap_push(&m->heap, i);
    }
    return m->heap.n ? kheap_pop_equal(&m->heap, m->hits) : 0;
}

/* Whether input i's term t has a posting of a live document. */
static int term_live(const merger *m, uint32_t i, uint32_t t)
{
    if (!m->has_deleted[i]) return 1;
    index_postings p;
    index_postings_open(&p, m->in[i].seg, t);
    for (uint32_t b = 0; b < p.nblocks; b++) {
        if (b) index_postings_load(&p, b);
        for (uint32_t k = 0; k < p.n; k++)
            if (m->map[i][p.ords[k]] != INDEX_ORD_END) return 1;
    }
    return 0;
}

/* First pass: how many terms and key bytes the output holds, to place its sections. */
static int count_terms(merger *m)
{
    m->nterms = 0;
    m->key_total = 0;
    terms_start(m);
    for (uint32_t h = terms_next(m, 0); h; h = terms_next(m, h)) {
        int live = 0;
        for (uint32_t k = 0; k < h && !live; k++) live = term_live(m, m->hits[k], m->pos[m->hits[k]]);
        if (!live) continue;
        m->nterms++;
        m->key_total += m->heap.len[m->hits[0]];
        if (m->key_total > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    }
    return HANU_OK;
}

static const merge_column *find_column(const merger *m, const uint8_t *path, size_t len)
{
    uint32_t lo = 0, hi = m->ncols;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(m->cols[mid].path, m->cols[mid].path_len, path, len);
        if (c == 0) return &m->cols[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* Points m->lens at the inputs' text-length columns of key's field (the word's
 * field, or the whole text ""), or at nothing for keywords: what a block's
 * shortest field length is read from (the builder's length_column). */
static void lengths_for(merger *m, const uint8_t *key, size_t len)
{
    const uint8_t *nul = memchr(key, 0, len);
    const merge_column *c = NULL;
    size_t path_len = nul ? (size_t)(nul - key) : 0;
    int word = nul && path_len + 1 < len && (nul[1] == INDEX_KEY_WORD || nul[1] == INDEX_KEY_ALL_WORD);
    m->impacts = word && path_len == 0 && nul[1] == INDEX_KEY_ALL_WORD && m->impact_avgdl > 0;
    if (word && m->lens_path && m->lens_path_len == path_len && memcmp(m->lens_path, key, path_len) == 0) return;
    if (word) c = find_column(m, key, path_len);
    m->lens_path = word ? key : NULL;
    m->lens_path_len = path_len;
    for (uint32_t i = 0; i < m->n; i++) m->lens[i] = c ? c->in[i] : NULL;
}

/* One term's postings as the builder encodes them (write_postings), buffered until the term ends. */
typedef struct block_acc {
    uint64_t deltas[INDEX_BLOCK], tfs[INDEX_BLOCK];
    uint32_t n, max_tf, min_len, df, nblocks;
    block_impact impact;
    int64_t prev;
} block_acc;

static int encode_block(merger *m, block_acc *a)
{
    codec_desc dd = codec_plan(a->deltas, a->n, 1), td = codec_plan(a->tfs, a->n, 1);
    if (td.base > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    size_t bytes = codec_payload_size(dd.code, a->n) + codec_payload_size(td.code, a->n);
    int rc = hanu_buf_reserve(&m->payloads, bytes + 2 * CODEC_SLACK);
    if (!rc) rc = hanu_buf_reserve(&m->blocks, SEG_BLOCK);
    if (rc) return rc;
    uint8_t *e = m->blocks.data + m->blocks.len;
    memset(e, 0, SEG_BLOCK);
    hanu_put_u64(e + SEG_B_PAYLOAD, m->payloads.len);   /* relative until the term is placed */
    hanu_put_u32(e + SEG_B_LAST, (uint32_t)a->prev);
    hanu_put_u32(e + SEG_B_COUNT, a->n);
    hanu_put_u32(e + SEG_B_MAX_TF, a->max_tf);
    hanu_put_u32(e + SEG_B_MIN_LEN, a->min_len);
    e[SEG_B_DOC_CODE] = dd.code;
    e[SEG_B_TF_CODE] = td.code;
    hanu_put_u16(e + SEG_B_IMPACT, (uint16_t)(m->impacts ? block_impact_of(&a->impact, m->impact_avgdl) : 0));
    hanu_put_u32(e + SEG_B_TF_BASE, (uint32_t)td.base);
    hanu_put_u64(e + SEG_B_DOC_BASE, dd.base);
    m->blocks.len += SEG_BLOCK;
    m->payloads.len += codec_pack(dd, a->deltas, a->n, 1, m->payloads.data + m->payloads.len);
    m->payloads.len += codec_pack(td, a->tfs, a->n, 1, m->payloads.data + m->payloads.len);
    a->nblocks++;
    a->n = 0;
    a->max_tf = 0;
    a->min_len = UINT32_MAX;
    block_impact_reset(&a->impact);
    return HANU_OK;
}

/* The current key's postings from its sources, in input order (so in new ordinal order). */
static int merge_postings(merger *m, uint32_t hits, block_acc *a)
{
    *a = (block_acc){ .min_len = UINT32_MAX, .prev = -1 };
    block_impact_reset(&a->impact);
    m->payloads.len = m->blocks.len = 0;
    for (uint32_t k = 0; k < hits; k++) {
        uint32_t i = m->hits[k];
        const uint32_t *map = m->map[i];
        const index_column *lens = m->lens[i];
        index_postings p;
        index_postings_open(&p, m->in[i].seg, m->pos[i]);
        for (uint32_t b = 0; b < p.nblocks; b++) {
            if (b) index_postings_load(&p, b);
            for (uint32_t j = 0; j < p.n; j++) {
                uint32_t ord = map[p.ords[j]];
                if (ord == INDEX_ORD_END) continue;
                uint32_t tf = p.tfs[j], len = lens ? index_column_text_length(lens, p.ords[j]) : 0;
                a->deltas[a->n] = (uint64_t)((int64_t)ord - a->prev - 1);
                a->tfs[a->n] = tf;
                a->prev = ord;
                a->max_tf = HANU_MAX(a->max_tf, tf);
                a->min_len = HANU_MIN(a->min_len, len);
                if (m->impacts) block_impact_add(&a->impact, tf, len, m->impact_avgdl);
                a->df++;
                if (++a->n == INDEX_BLOCK) {
                    int rc = encode_block(m, a);
                    if (rc) return rc;
                }
            }
        }
    }
    return a->n ? encode_block(m, a) : HANU_OK;
}

/* Second pass: the term table, keys and postings, each through its own region. */
static int write_terms(merger *m)
{
    block_acc *a = malloc(sizeof *a);
    if (!a) return HANU_ERR_NOMEM;
    uint32_t key_off = 0;
    int rc = HANU_OK;
    terms_start(m);
    for (uint32_t h = terms_next(m, 0); h && !rc; h = terms_next(m, h)) {
        const uint8_t *key = m->heap.key[m->hits[0]];
        size_t key_len = m->heap.len[m->hits[0]];
        lengths_for(m, key, key_len);
        if ((rc = merge_postings(m, h, a)) || !a->df) continue;
        uint64_t at = region_pos(&m->main), payloads = at + (uint64_t)a->nblocks * SEG_BLOCK;
        for (uint32_t b = 0; b < a->nblocks; b++) {
            uint8_t *e = m->blocks.data + (size_t)b * SEG_BLOCK;
            hanu_put_u64(e + SEG_B_PAYLOAD, payloads + hanu_get_u64(e + SEG_B_PAYLOAD));
        }
        uint8_t entry[SEG_TERM] = { 0 };
        hanu_put_u32(entry + SEG_T_KEY_OFF, key_off);
        hanu_put_u32(entry + SEG_T_KEY_LEN, (uint32_t)key_len);
        hanu_put_u32(entry + SEG_T_DF, a->df);
        hanu_put_u32(entry + SEG_T_BLOCKS, a->nblocks);
        hanu_put_u64(entry + SEG_T_POSTINGS, at);
        key_off += (uint32_t)key_len;
        rc = region_put(&m->table, entry, sizeof entry);
        if (!rc) rc = region_put(&m->keys, key, key_len);
        if (!rc) rc = region_put(&m->main, m->blocks.data, m->blocks.len);
        if (!rc) rc = region_put(&m->main, m->payloads.data, m->payloads.len);
        if (!rc) rc = region_pad8(&m->main);
    }
    free(a);
    return rc;
}

/* ------------------------------------------------------------ columns */

static int cmp_column_ref(const void *x, const void *y)
{
    const index_column *a = *(const index_column *const *)x, *b = *(const index_column *const *)y;
    size_t al, bl;
    const char *ap = index_column_path(a, &al), *bp = index_column_path(b, &bl);
    return key_cmp((const uint8_t *)ap, al, (const uint8_t *)bp, bl);
}

/* Every column path of the inputs with its column in each (paths are sorted in each input). */
static int gather_columns(merger *m)
{
    size_t total = 0;
    for (uint32_t i = 0; i < m->n; i++) total += index_segment_column_count(m->in[i].seg);
    const index_column **all = malloc((total ? total : 1) * sizeof *all);
    m->cols = calloc(total ? total : 1, sizeof *m->cols);
    m->col_refs = calloc((total ? total : 1) * (m->n ? m->n : 1), sizeof *m->col_refs);
    if (!all || !m->cols || !m->col_refs) {
        free(all);
        return HANU_ERR_NOMEM;
    }
    size_t k = 0;
    for (uint32_t i = 0; i < m->n; i++)
        for (uint32_t c = 0; c < index_segment_column_count(m->in[i].seg); c++)
            all[k++] = index_segment_column_at(m->in[i].seg, c);
    qsort(all, total, sizeof *all, cmp_column_ref);
    m->ncols = 0;
    for (size_t j = 0; j < total; j++) {
        size_t len;
        const uint8_t *path = (const uint8_t *)index_column_path(all[j], &len);
        if (m->ncols && key_cmp(m->cols[m->ncols - 1].path, m->cols[m->ncols - 1].path_len, path, len) == 0)
            continue;
        m->cols[m->ncols] = (merge_column){ path, (uint32_t)len, m->col_refs + (size_t)m->ncols * m->n };
        m->ncols++;
    }
    free(all);
    for (uint32_t i = 0; i < m->n; i++)
        for (uint32_t c = 0; c < index_segment_column_count(m->in[i].seg); c++) {
            const index_column *col = index_segment_column_at(m->in[i].seg, c);
            size_t len;
            const uint8_t *path = (const uint8_t *)index_column_path(col, &len);
            ((merge_column *)find_column(m, path, len))->in[i] = col;
        }
    return HANU_OK;
}

/* What one pass over a column's live documents finds out. */
typedef struct column_stats {
    int exists;                 /* some live document has a value or a text length here */
    uint64_t text_total;
    uint64_t tag_lo, tag_hi, len_lo, len_hi, num_lo, num_hi;
    int numbers;                /* some live document holds a number */
} column_stats;

/* Per input, per dictionary entry: 1 when a live document holds it, then its rank + 1. */
static int column_scan(merger *m, const merge_column *c, column_stats *s, uint32_t **used)
{
    *s = (column_stats){ .tag_lo = UINT64_MAX, .len_lo = UINT64_MAX, .num_lo = UINT64_MAX };
    for (uint32_t i = 0; i < m->n; i++) {
        const index_column *col = c->in[i];
        uint32_t docs = index_segment_docs(m->in[i].seg);
        if (col) {
            used[i] = calloc(index_column_dict_size(col) ? index_column_dict_size(col) : 1, sizeof **used);
            if (!used[i]) return HANU_ERR_NOMEM;
        }
        for (uint32_t ord = 0; ord < docs; ord++) {
            if (m->map[i][ord] == INDEX_ORD_END) continue;
            uint64_t tag = col ? index_column_tag(col, ord) : 0, len = col ? index_column_text_length(col, ord) : 0;
            if (tag || len) s->exists = 1;
            s->text_total += len;
            s->tag_lo = HANU_MIN(s->tag_lo, tag);
            s->tag_hi = HANU_MAX(s->tag_hi, tag);
            s->len_lo = HANU_MIN(s->len_lo, len);
            s->len_hi = HANU_MAX(s->len_hi, len);
            if (tag == INDEX_COL_NUMBER) {
                uint64_t bits = index_number_bits(index_column_number(col, ord));
                s->numbers = 1;
                s->num_lo = HANU_MIN(s->num_lo, bits);
                s->num_hi = HANU_MAX(s->num_hi, bits);
            } else if (tag == INDEX_COL_STRING) {
                used[i][index_column_string_ord(col, ord)] = 1;
            }
        }
    }
    if (!s->numbers) s->num_hi = UINT64_MAX;   /* every value is the smallest present one: none */
    return HANU_OK;
}

/* a0 of the output's impacts: its whole-text column's total (as column_scan
 * sums it, the total the reader divides) over its documents. */
static void impact_avgdl(merger *m)
{
    const merge_column *c = find_column(m, (const uint8_t *)"", 0);
    uint64_t total = 0;
    for (uint32_t i = 0; c && i < m->n; i++) {
        uint32_t docs = index_segment_docs(m->in[i].seg);
        for (uint32_t ord = 0; c->in[i] && ord < docs; ord++)
            if (m->map[i][ord] != INDEX_ORD_END) total += index_column_text_length(c->in[i], ord);
    }
    m->impact_avgdl = total && m->docs ? (double)total / (double)m->docs : 0;
}

/* The head of input i's dictionary at its next used entry; 0 when none is left. */
static int dict_head(merger *m, const index_column *col, uint32_t i, uint32_t *const *used)
{
    uint32_t n = index_column_dict_size(col);
    while (m->pos[i] < n && !used[i][m->pos[i]]) m->pos[i]++;
    if (m->pos[i] == n) return 0;
    m->heap.key[i] = (const uint8_t *)index_column_dict(col, m->pos[i], &m->heap.len[i]);
    return 1;
}

/* The merged dictionary in order, written as the builder's write_dictionary
 * does: pass 0 ranks the entries and writes the offsets, pass 1 the bytes. */
static int write_dictionary(merger *m, const merge_column *c, uint32_t *const *used, uint32_t *dict_n)
{
    int rc = HANU_OK;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        uint32_t rank = 0, total = 0;
        m->heap.n = 0;
        for (uint32_t i = 0; i < m->n; i++) {
            m->pos[i] = 0;
            if (c->in[i] && dict_head(m, c->in[i], i, used)) kheap_push(&m->heap, i);
        }
        while (m->heap.n && !rc) {
            uint32_t h = kheap_pop_equal(&m->heap, m->hits);
            size_t len = m->heap.len[m->hits[0]];
            if (pass == 0) {
                if (total + len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
                rc = region_put_u32(&m->main, total);
            } else {
                rc = region_put(&m->main, m->heap.key[m->hits[0]], len);
            }
            total += (uint32_t)len;
            for (uint32_t k = 0; k < h; k++) {
                uint32_t i = m->hits[k];
                if (pass == 0) used[i][m->pos[i]] = rank + 1;
                m->pos[i]++;
                if (dict_head(m, c->in[i], i, used)) kheap_push(&m->heap, i);
            }
            rank++;
        }
        if (pass == 0 && !rc) rc = region_put_u32(&m->main, total);
        *dict_n = rank;
    }
    return rc ? rc : region_pad8(&m->main);
}

/* The value a part holds for input i's document ord (the builder's write_column). */
static uint64_t part_value(int part, const index_column *col, uint32_t ord, uint32_t *const used,
                           const column_stats *s)
{
    uint64_t tag = col ? index_column_tag(col, ord) : 0;
    switch (part) {
    case SEG_PART_TAGS: return tag;
    case SEG_PART_NUMBERS:
        return tag == INDEX_COL_NUMBER ? index_number_bits(index_column_number(col, ord)) : s->num_lo;
    case SEG_PART_ORDS: return tag == INDEX_COL_STRING ? used[index_column_string_ord(col, ord)] - 1 : 0;
    default: return col ? index_column_text_length(col, ord) : 0;
    }
}

/* One part over all documents, packed COLUMN_CHUNK values at a time (a multiple of
 * 8 values packs to whole bytes, so the chunks join into the one payload). */
static int write_part(merger *m, const merge_column *c, int part, codec_desc d, uint32_t *const *used,
                      const column_stats *s, uint64_t *chunk, uint8_t *packed)
{
    uint32_t n = 0;
    int rc = HANU_OK;
    for (uint32_t i = 0; i < m->n && !rc; i++) {
        uint32_t docs = index_segment_docs(m->in[i].seg);
        for (uint32_t ord = 0; ord < docs && !rc; ord++) {
            if (m->map[i][ord] == INDEX_ORD_END) continue;
            chunk[n++] = part_value(part, c->in[i], ord, used ? used[i] : NULL, s);
            if (n == COLUMN_CHUNK) {
                rc = region_put(&m->main, packed, codec_pack(d, chunk, n, 1, packed));
                n = 0;
            }
        }
    }
    if (n && !rc) rc = region_put(&m->main, packed, codec_pack(d, chunk, n, 1, packed));
    return rc ? rc : region_pad8(&m->main);
}

static codec_desc plan_range(uint32_t docs, uint64_t lo, uint64_t hi)
{
    if (!docs) return (codec_desc){ CODEC_CONST, 0 };
    uint64_t v[2] = { lo, hi };
    return codec_plan(v, 2, 1);
}

/* One column: its path, dictionary and four parts; its table entry into e. */
static int write_column(merger *m, const merge_column *c, const column_stats *s, uint32_t *const *used,
                        uint8_t *e, uint64_t *chunk, uint8_t *packed)
{
    hanu_put_u64(e + SEG_C_PATH, region_pos(&m->main));
    hanu_put_u32(e + SEG_C_PATH_LEN, c->path_len);
    hanu_put_u64(e + SEG_C_TEXT_TOTAL, s->text_total);
    int rc = region_put(&m->main, c->path, c->path_len);
    if (!rc) rc = region_pad8(&m->main);
    if (rc) return rc;
    hanu_put_u64(e + SEG_C_DICT, region_pos(&m->main));
    uint32_t dict_n = 0;
    if ((rc = write_dictionary(m, c, used, &dict_n))) return rc;
    hanu_put_u32(e + SEG_C_DICT_N, dict_n);
    /* Ranks are dense and each is held by a live document, so the ordinals run
       from 0 (also the value of a document without a string) to dict_n - 1. */
    codec_desc plans[SEG_PARTS] = {
        [SEG_PART_TAGS] = plan_range(m->docs, s->tag_lo, s->tag_hi),
        [SEG_PART_NUMBERS] = plan_range(m->docs, s->num_lo, s->num_hi),
        [SEG_PART_ORDS] = plan_range(m->docs, 0, dict_n ? dict_n - 1 : 0),
        [SEG_PART_LENGTHS] = plan_range(m->docs, s->len_lo, s->len_hi),
    };
    for (int part = 0; part < SEG_PARTS && !rc; part++) {
        uint8_t *p = e + SEG_C_PARTS + part * SEG_C_PART;
        hanu_put_u64(p, region_pos(&m->main));
        hanu_put_u64(p + 8, plans[part].base);
        p[16] = plans[part].code;
        rc = write_part(m, c, part, plans[part], used, s, chunk, packed);
    }
    return rc;
}

static void free_used(uint32_t **used, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(used[i]);
        used[i] = NULL;
    }
}

/* The columns that live documents use, in path order; the table is written last (*table). */
static int write_columns(merger *m, uint64_t *table_at, uint8_t **table, uint32_t *ncols_out)
{
    uint32_t **used = calloc(m->n ? m->n : 1, sizeof *used);
    uint8_t *exists = calloc(m->ncols ? m->ncols : 1, 1);
    uint64_t *chunk = malloc(COLUMN_CHUNK * sizeof *chunk);
    uint8_t *packed = malloc(COLUMN_CHUNK * 8 + CODEC_SLACK);
    int rc = used && exists && chunk && packed ? HANU_OK : HANU_ERR_NOMEM;
    column_stats s;
    uint32_t out = 0;
    /* Which columns the output has, to place the table before their data. */
    for (uint32_t c = 0; c < m->ncols && !rc; c++) {
        rc = column_scan(m, &m->cols[c], &s, used);
        exists[c] = s.exists;
        out += s.exists;
        free_used(used, m->n);
    }
    *table_at = region_pos(&m->main);
    *table = calloc(out ? out : 1, SEG_COLUMN);
    if (!rc && !*table) rc = HANU_ERR_NOMEM;
    if (!rc) rc = region_skip(&m->main, (uint64_t)out * SEG_COLUMN);
    for (uint32_t c = 0, k = 0; c < m->ncols && !rc; c++) {
        if (!exists[c]) continue;
        rc = column_scan(m, &m->cols[c], &s, used);
        if (!rc) rc = write_column(m, &m->cols[c], &s, used, *table + (size_t)k++ * SEG_COLUMN, chunk, packed);
        free_used(used, m->n);
    }
    if (used) free_used(used, m->n);
    free(used);
    free(exists);
    free(chunk);
    free(packed);
    *ncols_out = out;
    return rc;
}

/* ------------------------------------------------------------ the file */

/* The footer: the checksum of every byte written, read back from the file. */
static int write_footer(int fd, uint64_t end)
{
    XXH3_state_t *st = XXH3_createState();
    uint8_t *buf = malloc(READBACK_BUF);
    int rc = st && buf ? HANU_OK : HANU_ERR_NOMEM;
    if (!rc && XXH3_64bits_reset_withSeed(st, 0) != XXH_OK) rc = HANU_ERR_NOMEM;
    for (uint64_t at = 0; at < end && !rc; at += READBACK_BUF) {
        size_t n = (size_t)HANU_MIN((uint64_t)READBACK_BUF, end - at);
        rc = hanu_pread_full(fd, buf, n, (off_t)at);
        if (rc == HANU_ERR_CORRUPT) rc = HANU_ERR_IO;
        if (!rc) XXH3_64bits_update(st, buf, n);
    }
    if (!rc) {
        uint8_t footer[SEG_FOOTER];
        hanu_put_u64(footer, XXH3_64bits_digest(st));
        memcpy(footer + 8, SEG_END_MAGIC, 8);
        rc = hanu_pwrite_full(fd, footer, sizeof footer, (off_t)end);
    }
    XXH3_freeState(st);
    free(buf);
    return rc;
}

static int merge_file(merger *m)
{
    int rc = region_open(&m->main, m->fd, 0);
    if (!rc) rc = region_open(&m->table, m->fd, 0);
    if (!rc) rc = region_open(&m->keys, m->fd, 0);
    if (!rc) rc = write_documents(m);
    if (!rc) rc = gather_columns(m);
    if (!rc) rc = count_terms(m);
    if (rc) return rc;
    impact_avgdl(m);
    uint64_t term_table = region_pos(&m->main), keys = term_table + (uint64_t)m->nterms * SEG_TERM;
    uint64_t postings = (keys + m->key_total + 7) & ~(uint64_t)7;
    if ((rc = region_skip(&m->main, postings - term_table))) return rc;
    /* The keys' padding up to the postings is never written: a hole reads as zeros. */
    m->table.off = m->table.unsynced = m->table.started = term_table;
    m->keys.off = m->keys.unsynced = m->keys.started = keys;
    if ((rc = write_terms(m))) return rc;
    if (region_pos(&m->table) != keys || region_pos(&m->keys) != keys + m->key_total)
        return HANU_ERR_CORRUPT;   /* the inputs changed between the two passes */
    uint64_t postings_len = region_pos(&m->main) - postings, col_table = 0;
    uint8_t *cols = NULL;
    uint32_t ncols = 0;
    rc = write_columns(m, &col_table, &cols, &ncols);
    uint64_t end = region_pos(&m->main);
    if (!rc) rc = region_flush(&m->main);
    if (!rc) rc = region_flush(&m->table);
    if (!rc) rc = region_flush(&m->keys);
    if (!rc) rc = hanu_pwrite_full(m->fd, cols, (size_t)ncols * SEG_COLUMN, (off_t)col_table);
    free(cols);
    if (rc) return rc;
    uint8_t header[SEG_HEADER] = { 0 };
    memcpy(header, SEG_MAGIC, 8);
    hanu_put_u32(header + SEG_H_VERSION, SEG_VERSION);
    hanu_put_u32(header + SEG_H_DOCS, m->docs);
    hanu_put_u32(header + SEG_H_TERMS, m->nterms);
    hanu_put_u32(header + SEG_H_COLUMNS, ncols);
    hanu_put_u64(header + SEG_H_IDS, SEG_HEADER);
    hanu_put_u64(header + SEG_H_TXNS, m->txns);
    hanu_put_u64(header + SEG_H_TERM_TABLE, term_table);
    hanu_put_u64(header + SEG_H_KEYS, keys);
    hanu_put_u64(header + SEG_H_KEYS_LEN, m->key_total);
    hanu_put_u64(header + SEG_H_COLUMN_TABLE, col_table);
    hanu_put_u64(header + SEG_H_POSTINGS, postings);
    hanu_put_u64(header + SEG_H_POSTINGS_LEN, postings_len);
    rc = hanu_pwrite_full(m->fd, header, sizeof header, 0);
    if (!rc && ftruncate(m->fd, (off_t)end) != 0) rc = HANU_ERR_IO;   /* a trailing hole reads whole */
    return rc ? rc : write_footer(m->fd, end);
}

int index_merge_write(const index_merge_input *in, uint32_t n, const char *path, uint32_t **map,
                      uint32_t *docs_out)
{
    return index_merge_write_ex(in, n, path, map, docs_out, 1);
}

int index_merge_write_ex(const index_merge_input *in, uint32_t n, const char *path, uint32_t **map,
                         uint32_t *docs_out, int sync)
{
    merger m = { .in = in, .n = n, .map = map };
    m.has_deleted = calloc(n ? n : 1, 1);
    m.pos = malloc((n ? n : 1) * sizeof *m.pos);
    m.hits = malloc((n ? n : 1) * sizeof *m.hits);
    m.lens = calloc(n ? n : 1, sizeof *m.lens);
    int rc = m.has_deleted && m.pos && m.hits && m.lens ? kheap_init(&m.heap, n) : HANU_ERR_NOMEM;
    m.fd = -1;
    if (!rc) {
        m.fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (m.fd < 0) rc = errno == EEXIST ? HANU_ERR_EXISTS : HANU_ERR_IO;
    }
    if (!rc) rc = merge_file(&m);
    if (!rc && sync && fdatasync(m.fd) != 0) rc = HANU_ERR_IO;
    if (m.fd >= 0 && close(m.fd) != 0 && !rc) rc = HANU_ERR_IO;
    if (rc && m.fd >= 0) unlink(path);
    region_close(&m.main);
    region_close(&m.table);
    region_close(&m.keys);
    kheap_free(&m.heap);
    hanu_buf_free(&m.payloads);
    hanu_buf_free(&m.blocks);
    free(m.has_deleted);
    free(m.pos);
    free(m.hits);
    free(m.lens);
    free(m.cols);
    free(m.col_refs);
    if (!rc && docs_out) *docs_out = m.docs;
    return rc;
}
