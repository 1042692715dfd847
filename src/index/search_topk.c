/*
 * search_topk.c: full-text search over a snapshot, BM25 top-k by block-max
 * WAND (Ding and Suel, SIGIR 2011). The rules are in docs/QUERY.md ("Search
 * execution"); in short:
 *
 *   - statistics are the collection's: N live documents, the average text
 *     length and each word's document frequency summed over every segment
 *     minus its deleted documents, so scores equal search_eval's over the
 *     live documents, however they are split into segments;
 *   - each positive clause (a word, or a phrase: the conjunction of its
 *     words) is a cursor over one segment's postings; with `fields` a word's
 *     cursor is the union of its per-field postings over every path at or
 *     below the fields;
 *   - a block's largest term frequency and shortest length bound every score
 *     in it; WAND picks the first document whose clauses' segment bounds can
 *     still beat the k-th score, the block bounds then either skip to the end
 *     of the shortest block or let the document be scored;
 *   - +must clauses are intersected first (leapfrog), and their blocks skip
 *     the same way; a query of one +must clause is peeled to a plain word so
 *     that WAND prunes it; -not words are looked up by cursor;
 *   - equality and $in filters on scalars walk their keyword postings as one
 *     more cursor the loops leapfrog with, and are decided on the columns
 *     inside the loop; phrases, -phrases and any other filter are checked on
 *     the stored document, only for documents whose bound can enter the top k;
 *   - a whole-text word's blocks also carry an impact (segment version 2):
 *     the best (tf, length) of one document, a far tighter bound than the
 *     pair of the largest tf and the shortest length; one plain word ranks
 *     its blocks of largest impact first and passes over documents whose tf
 *     cannot rank at the block's shortest length;
 *   - counting (track_total) of one word, unfiltered or filtered by columns,
 *     runs apart from the ranking (block headers, or the columns in the same
 *     pass) and the ranking prunes from its start; any other count runs the
 *     loops without pruning until it passes its limit, then switches pruning
 *     on where it stands: every step of WAND is valid from any heap, so the
 *     top k stays exact;
 *   - a cursor (after) keeps out of the heap every document at or before its
 *     (score, _id): the heap is the top k of what follows it, and the
 *     threshold prunes as without a cursor.
 */
#include "index/index.h"
#include "index/segment_format.h"
#include "json/json.h"
#include "query/query.h"
#include "store/store.h"

#include <math.h>
#include <stdlib.h>

#define SCORE_SLACK 1e-9          /* relative: bounds summed in another order round differently */
#define EXACT_DOUBLE_INT 9007199254740992.0   /* 2^53: column doubles are exact integers below */

/* ------------------------------------------------------------ word cursors */

/* One word in one segment: the union of its postings over the selected paths
 * (one key, the whole text's, without fields). */
typedef struct word_iter {
    index_postings *subs;
    uint32_t nsubs;
    uint32_t doc, tf;
    double impact_scale;        /* one whole-text key with block impacts: bound = idf * scale * impact; else 0 */
} word_iter;

static uint32_t block_u32(const index_postings *p, uint32_t b, size_t field)
{
    return hanu_get_u32(p->blocks + (size_t)b * SEG_BLOCK + field);
}

/* The block of p that holds its first ordinal >= target, searched from its
 * current block without decoding; UINT32_MAX when there is none. */
static uint32_t block_at(const index_postings *p, uint32_t target)
{
    if (p->doc == INDEX_ORD_END) return UINT32_MAX;
    /* nearly always the current block or the next: no search (WAND asks at every pivot) */
    if (block_u32(p, p->block, SEG_B_LAST) >= target) return p->block;
    if (p->block + 1 < p->nblocks && block_u32(p, p->block + 1, SEG_B_LAST) >= target) return p->block + 1;
    uint32_t lo = p->block, hi = p->nblocks;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (block_u32(p, mid, SEG_B_LAST) < target) lo = mid + 1;
        else hi = mid;
    }
    return lo == p->nblocks ? UINT32_MAX : lo;
}

static void wi_settle(word_iter *w)
{
    uint32_t doc = INDEX_ORD_END, tf = 0;
    for (uint32_t i = 0; i < w->nsubs; i++) {
        if (w->subs[i].doc < doc) { doc = w->subs[i].doc; tf = 0; }
        if (w->subs[i].doc == doc && doc != INDEX_ORD_END) tf += w->subs[i].tf;
    }
    w->doc = doc;
    w->tf = tf;
}

static uint32_t wi_advance(word_iter *w, uint32_t target)
{
    if (w->doc >= target) return w->doc;
    for (uint32_t i = 0; i < w->nsubs; i++)
        if (w->subs[i].doc < target) index_postings_advance(&w->subs[i], target);
    wi_settle(w);
    return w->doc;
}

/* Bounds of the word over [target, *last]: summed largest frequencies, the
 * shortest length. *last is INDEX_ORD_END (and *max_tf 0) past its end. */
static void wi_block(const word_iter *w, uint32_t target, uint32_t *last, uint32_t *max_tf, uint32_t *min_len,
                     uint32_t *impact)
{
    *last = INDEX_ORD_END;
    *max_tf = 0;
    *min_len = UINT32_MAX;
    *impact = 0;
    for (uint32_t i = 0; i < w->nsubs; i++) {
        uint32_t b = block_at(&w->subs[i], target);
        if (b == UINT32_MAX) continue;
        if (w->impact_scale > 0) *impact = index_postings_block_impact(&w->subs[i], b);   /* nsubs is 1 */
        *last = HANU_MIN(*last, block_u32(&w->subs[i], b, SEG_B_LAST));
        *max_tf += block_u32(&w->subs[i], b, SEG_B_MAX_TF);
        *min_len = HANU_MIN(*min_len, block_u32(&w->subs[i], b, SEG_B_MIN_LEN));
    }
}

/* The same over every block of the word in the segment. */
static void wi_bound(const word_iter *w, uint32_t *max_tf, uint32_t *min_len, uint32_t *impact)
{
    *max_tf = 0;
    *min_len = UINT32_MAX;
    *impact = 0;
    for (uint32_t i = 0; i < w->nsubs; i++) {
        const index_postings *p = &w->subs[i];
        uint32_t tf = 0;
        for (uint32_t b = 0; b < p->nblocks; b++) {
            tf = HANU_MAX(tf, block_u32(p, b, SEG_B_MAX_TF));
            *min_len = HANU_MIN(*min_len, block_u32(p, b, SEG_B_MIN_LEN));
            if (w->impact_scale > 0) *impact = HANU_MAX(*impact, index_postings_block_impact(p, b));
        }
        *max_tf += tf;
    }
}

/* ------------------------------------------------------ the whole search */

typedef struct heap_entry {
    double score;
    uint32_t seg, ord;
    const char *id;             /* NULL until a tie on the score needs it (entry_id) */
    size_t id_len;
} heap_entry;

/* A filter the columns decide: $and of equality and $in on scalar values. */
typedef struct col_test {
    const char *path;
    size_t path_len;
    const json_value *vals;     /* one value (equality), or the array of $in */
    int is_in;
} col_test;

enum filter_kind { FILTER_NONE, FILTER_COLUMNS, FILTER_DOC };

typedef struct search_ctx {
    store *st;
    const index_snapshot *snap;
    const search_query *q;
    const filter *f;
    const char *const *fields;
    size_t nfields;
    int prune, count;           /* count: still counting (no pruning until it stops) */
    int apart;                  /* still counting apart from the ranking (count_add) */
    int exhaustive, total_gte;
    uint64_t count_upto;
    const index_cursor *after;
    search_occur *occur;        /* per clause, after peeling */
    double *idf;                /* per clause: the sum of its words' idf */
    uint64_t n_docs;
    double avgdl;
    enum filter_kind fkind;
    col_test tests[FILTER_MAX_NODES];
    uint32_t ntests;
    heap_entry *heap;
    size_t nheap, k;
    uint64_t total;
    uint64_t gone;              /* hits of the page deleted after the snapshot */
    uint32_t *tfs;              /* per clause, of a document read back */
    int8_t *ids_ascending;      /* per segment (segment_id_order) */
    int8_t *seg_order;          /* per pair of segments: index_segment_id_ranges_cmp */
    hanu_buf val;
    index_search_result *out;
} search_ctx;

/* One clause in one segment: its words' cursors; doc is the next ordinal
 * where every word occurs (INDEX_ORD_END when done). */
typedef struct clause_run {
    uint32_t clause;
    word_iter w[SEARCH_MAX_PHRASE_TOKENS];
    uint32_t nw;
    uint32_t doc;
    double ub;                  /* bound of any score of the clause in the segment */
    uint32_t bc_from, bc_last;  /* cl_block's last answer holds for targets in [bc_from, bc_last] */
    double bc_bound;
    int bc_valid;
} clause_run;

typedef struct seg_run {
    search_ctx *x;
    uint32_t s;
    const index_segment *seg;
    const index_column **lens;  /* the selected text-length columns */
    uint32_t nlens;
    const index_column **tcols; /* per col_test: its column, or NULL */
    uint32_t *tords;            /* per col_test value (tord_at[t] on): a string's dictionary ordinal */
    uint32_t *tord_at;
    word_iter *fiters;          /* per col_test: the postings of its keyword terms */
    int fseek;                  /* the loops jump with fiters (the filter is the sparser side) */
    clause_run *runs;           /* per clause */
    clause_run **pos, **must, **neg;
    uint32_t npos, nmust, nneg;
} seg_run;

static double bm25_part(const search_ctx *x, double idf, double tf, double dl)
{
    double norm = x->avgdl > 0 ? dl / x->avgdl : 1.0;
    return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * norm));
}

/* Bound of the scores of a word's block (or segment): BM25 of the largest tf
 * and the shortest length, or, tighter, of the block's impact when the word
 * has them (one whole-text key of a version-2 segment). */
static double word_bound(const search_ctx *x, const word_iter *w, double idf, uint32_t max_tf, uint32_t min_len,
                         uint32_t impact)
{
    double b = bm25_part(x, idf, max_tf, min_len);
    if (impact && w->impact_scale > 0) b = HANU_MIN(b, idf * w->impact_scale * impact);
    return b;
}

/* impact_scale of a word in seg (index.h, "Block impacts"): (k1 + 1) / one
 * step / min(1, a0 / avgdl); 0 when the bound does not apply. */
static double impact_scale(const search_ctx *x, const index_segment *seg, const word_iter *w)
{
    double a0 = index_segment_impact_avgdl(seg);
    if (x->nfields || w->nsubs != 1 || a0 <= 0 || x->avgdl <= 0) return 0;
    return (BM25_K1 + 1) / INDEX_IMPACT_ONE / HANU_MIN(1.0, a0 / x->avgdl);
}

/* The id of e, read from its segment once: documents of equal scores are
 * compared by id, the heap's worst entry against every tying candidate. */
static void entry_id(const search_ctx *x, heap_entry *e)
{
    if (!e->id) e->id = index_segment_doc_id(x->snap->segments[e->seg].seg, e->ord, &e->id_len);
}

static int id_cmp(const search_ctx *x, heap_entry *a, heap_entry *b)
{
    if (a->seg == b->seg) {
        if (x->ids_ascending[a->seg]) return (a->ord > b->ord) - (a->ord < b->ord);
    } else {
        int c = x->seg_order[(size_t)a->seg * x->snap->nsegments + b->seg];
        if (c) return c;
    }
    entry_id(x, a);
    entry_id(x, b);
    int c = memcmp(a->id, b->id, HANU_MIN(a->id_len, b->id_len));
    return c ? (c > 0) - (c < 0) : (a->id_len > b->id_len) - (a->id_len < b->id_len);
}

/* What decides ties between the snapshot's segments without ids, once per search. */
static int segment_id_order(search_ctx *x)
{
    uint32_t n = x->snap->nsegments;
    x->ids_ascending = calloc(n ? n : 1, 1);
    x->seg_order = calloc(n ? (size_t)n * n : 1, 1);
    if (!x->ids_ascending || !x->seg_order) return HANU_ERR_NOMEM;
    for (uint32_t a = 0; a < n; a++) {
        x->ids_ascending[a] = (int8_t)index_segment_ids_ascending(x->snap->segments[a].seg);
        for (uint32_t b = 0; b < n; b++)
            x->seg_order[(size_t)a * n + b] =
                (int8_t)index_segment_id_ranges_cmp(x->snap->segments[a].seg, x->snap->segments[b].seg);
    }
    return HANU_OK;
}

/* a ranks below b: a lower score, or the same score and a larger _id. */
static int worse(const search_ctx *x, heap_entry *a, heap_entry *b)
{
    if (a->score != b->score) return a->score < b->score;
    return id_cmp(x, a, b) > 0;
}

static void sift_down(search_ctx *x, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < x->nheap && worse(x, &x->heap[l], &x->heap[m])) m = l;
        if (r < x->nheap && worse(x, &x->heap[r], &x->heap[m])) m = r;
        if (m == i) return;
        heap_entry t = x->heap[i];
        x->heap[i] = x->heap[m];
        x->heap[m] = t;
        i = m;
    }
}

static void heap_offer(search_ctx *x, heap_entry e)
{
    if (x->k == 0) return;
    if (x->nheap < x->k) {
        size_t i = x->nheap++;
        x->heap[i] = e;
        while (i && worse(x, &x->heap[i], &x->heap[(i - 1) / 2])) {
            heap_entry t = x->heap[i];
            x->heap[i] = x->heap[(i - 1) / 2];
            x->heap[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (worse(x, &x->heap[0], &e)) {
        x->heap[0] = e;
        sift_down(x, 0);
    }
}

/* Whether document (score, d of segment s) comes strictly after the cursor:
 * a lower score, or the same score and a larger _id. */
static int after_cursor(const search_ctx *x, double score, uint32_t s, uint32_t d)
{
    const index_cursor *a = x->after;
    if (!a || score < a->keys[0].d) return 1;
    if (score > a->keys[0].d) return 0;
    size_t len;
    const char *id = index_segment_doc_id(x->snap->segments[s].seg, d, &len);
    int c = memcmp(id, a->id, HANU_MIN(len, a->id_len));
    return c ? c > 0 : len > a->id_len;
}

/* One more match: counted while the count is under its limit; the match past
 * the limit stops counting and switches pruning on. */
static void count_match(search_ctx *x)
{
    if (!x->count) return;
    if (x->total < x->count_upto) { x->total++; return; }
    x->count = 0;
    x->total_gte = 1;
    x->prune = !x->exhaustive;
}

/* n more matches counted apart from the ranking (count_word): past the limit
 * the count stops at it. */
static void count_add(search_ctx *x, uint64_t n)
{
    if (!x->apart || !n) return;
    if (n <= x->count_upto - x->total) { x->total += n; return; }   /* total <= count_upto always */
    x->total = x->count_upto;
    x->apart = 0;
    x->total_gte = 1;
}

/* Whether a score bound can still enter the top k (ties may, by _id). */
static int can_beat(const search_ctx *x, double bound)
{
    if (!x->prune || x->nheap < x->k) return 1;
    double t = x->heap[0].score;
    return bound >= t - SCORE_SLACK * fabs(t);
}

/* ------------------------------------------------------------ clauses */

/* Moves to the first ordinal >= target where every word occurs. */
static uint32_t cl_seek(clause_run *r, uint32_t target)
{
    uint32_t d = target;
    for (uint32_t i = 0; i < r->nw;) {
        uint32_t got = wi_advance(&r->w[i], d);
        if (got == INDEX_ORD_END) return r->doc = INDEX_ORD_END;
        if (got > d) { d = got; i = 0; continue; }   /* every word again, from d */
        i++;
    }
    return r->doc = d;
}

static uint32_t cl_advance(clause_run *r, uint32_t target)
{
    return r->doc >= target ? r->doc : cl_seek(r, target);   /* INDEX_ORD_END stays */
}

/* Bound of the clause's scores over [target, *last]. A phrase occurs at most
 * as often as its rarest word, in a text at least as long as any word's. */
static double cl_block_compute(const seg_run *r, const clause_run *c, uint32_t target, uint32_t *last)
{
    uint32_t tf = UINT32_MAX, len = 0, impact = 0;
    *last = INDEX_ORD_END;
    for (uint32_t i = 0; i < c->nw; i++) {
        uint32_t l, mtf, ml;
        wi_block(&c->w[i], target, &l, &mtf, &ml, &impact);
        if (l == INDEX_ORD_END) { *last = INDEX_ORD_END; return 0; }   /* no match from target on */
        *last = HANU_MIN(*last, l);
        tf = HANU_MIN(tf, mtf);
        len = HANU_MAX(len, ml);
    }
    /* a phrase's bound stays (tf, len): its words' impacts are of other tfs */
    return word_bound(r->x, &c->w[0], r->x->idf[c->clause], tf, len, c->nw == 1 ? impact : 0);
}

static double cl_block(const seg_run *r, clause_run *c, uint32_t target, uint32_t *last)
{
    /* WAND asks at every pivot, mostly within the same blocks: every word's
       block is the same for any target up to the answer's last */
    if (c->bc_valid && target >= c->bc_from && target <= c->bc_last) {
        *last = c->bc_last;
        return c->bc_bound;
    }
    double bound = cl_block_compute(r, c, target, last);
    c->bc_valid = 1;
    c->bc_from = target;
    c->bc_last = *last;
    c->bc_bound = bound;
    return bound;
}

static double cl_bound(const seg_run *r, const clause_run *c)
{
    uint32_t tf = UINT32_MAX, len = 0, impact = 0;
    for (uint32_t i = 0; i < c->nw; i++) {
        uint32_t mtf, ml;
        wi_bound(&c->w[i], &mtf, &ml, &impact);
        tf = HANU_MIN(tf, mtf);
        len = HANU_MAX(len, ml);
    }
    return c->nw ? word_bound(r->x, &c->w[0], r->x->idf[c->clause], tf, len, c->nw == 1 ? impact : 0) : 0;
}

/* ------------------------------------------------------------ segments */

/* The text-length columns of the selected text in seg: the whole text's, or
 * every path at or below one of the fields (at most QUERY_MAX_PATH_BYTES, as
 * search_eval walks them). Sorted by path, each once. */
static int select_lengths(const search_ctx *x, const index_segment *seg, const index_column ***out, uint32_t *n)
{
    uint32_t ncols = index_segment_column_count(seg);
    *n = 0;
    *out = calloc(ncols ? ncols : 1, sizeof **out);
    if (!*out) return HANU_ERR_NOMEM;
    if (!x->nfields) {
        const index_column *c = index_segment_column(seg, "", 0);
        if (c) (*out)[(*n)++] = c;
        return HANU_OK;
    }
    for (uint32_t i = 0; i < ncols; i++) {
        const index_column *c = index_segment_column_at(seg, i);
        size_t len;
        const char *p = index_column_path(c, &len);
        if (!index_column_text_total(c) || len == 0 || len > QUERY_MAX_PATH_BYTES) continue;
        for (size_t k = 0; k < x->nfields; k++) {
            size_t fl = strlen(x->fields[k]);
            if (len >= fl && memcmp(p, x->fields[k], fl) == 0 && (len == fl || p[fl] == '.')) {
                (*out)[(*n)++] = c;
                break;
            }
        }
    }
    return HANU_OK;
}

/* Opens the cursors of one word over the selected paths (none when the
 * segment does not have it). */
static int wi_open(word_iter *w, const index_segment *seg, const index_column *const *lens, uint32_t nlens,
                   int whole_text, const char *tok, size_t tok_len)
{
    uint8_t key[INDEX_KEY_MAX];
    uint32_t nkeys = whole_text ? 1 : nlens;
    w->subs = malloc((nkeys ? nkeys : 1) * sizeof *w->subs);
    w->nsubs = 0;
    w->impact_scale = 0;
    if (!w->subs) return HANU_ERR_NOMEM;
    for (uint32_t i = 0; i < nkeys; i++) {
        size_t plen = 0;
        const char *path = whole_text ? "" : index_column_path(lens[i], &plen);
        size_t klen = index_key(key, path, plen, whole_text ? INDEX_KEY_ALL_WORD : INDEX_KEY_WORD, tok, tok_len, 0);
        uint32_t t = klen ? index_segment_term_find(seg, key, klen) : UINT32_MAX;
        if (t != UINT32_MAX) index_postings_open(&w->subs[w->nsubs++], seg, t);
    }
    wi_settle(w);
    return HANU_OK;
}

/* Live documents of the segment holding the word: the postings' count minus
 * the deleted ones among them (looked up by cursor when deletions are fewer
 * than postings), or the live union when the word has several paths. */
static uint64_t wi_live_df(word_iter *w, const index_snapshot_segment *ss, uint32_t s, const index_snapshot *snap)
{
    if (w->nsubs == 1 && ss->ndeleted < w->subs[0].nblocks * (uint64_t)INDEX_BLOCK) {
        index_postings *p = &w->subs[0];
        uint64_t df = 0;
        for (uint32_t b = 0; b < p->nblocks; b++) df += block_u32(p, b, SEG_B_COUNT);
        for (uint32_t i = 0; i < ss->ndeleted; i++) df -= index_postings_advance(p, ss->deleted[i]) == ss->deleted[i];
        return df;
    }
    uint64_t df = 0;
    for (uint32_t d = w->doc; d != INDEX_ORD_END; d = wi_advance(w, d + 1)) df += index_snapshot_live(snap, s, d);
    return df;
}

/* The keyword term of one scalar at path (0 when it has none). */
static size_t scalar_key(uint8_t *key, const col_test *ct, const json_value *v)
{
    if (v->type == JSON_STRING)
        return index_key(key, ct->path, ct->path_len, INDEX_KEY_STRING, v->u.str.ptr, v->u.str.len, 0);
    if (v->type == JSON_NUMBER) return index_key(key, ct->path, ct->path_len, INDEX_KEY_NUMBER, NULL, 0, v->u.num.d);
    return index_key(key, ct->path, ct->path_len, v->u.boolean ? INDEX_KEY_TRUE : INDEX_KEY_FALSE, NULL, 0, 0);
}

/* The documents a column test can match are among the postings of its values'
 * keyword terms (array elements included): their union is its cursor. */
static int filter_iter_open(word_iter *w, const index_segment *seg, const col_test *ct)
{
    size_t n = ct->is_in ? json_len(ct->vals) : 1;
    w->subs = malloc((n ? n : 1) * sizeof *w->subs);
    w->nsubs = 0;
    w->impact_scale = 0;
    if (!w->subs) return HANU_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        uint8_t key[INDEX_KEY_MAX];
        size_t klen = scalar_key(key, ct, ct->is_in ? json_at(ct->vals, i) : ct->vals);
        uint32_t t = klen ? index_segment_term_find(seg, key, klen) : UINT32_MAX;
        if (t != UINT32_MAX) index_postings_open(&w->subs[w->nsubs++], seg, t);
    }
    wi_settle(w);
    return HANU_OK;
}

/* The first ordinal >= d that every column test's postings hold: documents
 * before it cannot pass the filter, so the loops jump there. */
static uint32_t filter_seek(seg_run *r, uint32_t d)
{
    for (uint32_t t = 0; r->fseek && t < r->x->ntests;) {
        uint32_t got = wi_advance(&r->fiters[t], d);
        if (got == INDEX_ORD_END) return INDEX_ORD_END;
        if (got > d) { d = got; t = 0; continue; }
        t++;
    }
    return d;
}

/* At most how many documents a word's postings hold (whole blocks). */
static uint64_t wi_size(const word_iter *w)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < w->nsubs; i++) n += (uint64_t)w->subs[i].nblocks * INDEX_BLOCK;
    return n;
}

static uint64_t cl_size(const clause_run *c)
{
    uint64_t n = UINT64_MAX;
    for (uint32_t i = 0; i < c->nw; i++) n = HANU_MIN(n, wi_size(&c->w[i]));
    return c->nw ? n : 0;
}

/* Whether seeking the filter's postings saves work: only when they are
 * sparser than what drives the loop (the +must intersection, else the union
 * of the positive clauses), by ratio. A dense filter (one `kind` of five)
 * under a rare word would decode nearly every block of its postings for
 * nothing; evaluate tests the columns of each candidate anyway. one_word
 * scans so cheaply that the filter must skip most of its postings to pay
 * (measured: a filter of 20 % of the documents under a word in 26 % was 2.6x
 * slower seeking than scanning); WAND's steps cost more, so any sparser filter
 * pays there. */
#define FILTER_SEEK_RATIO_ONE_WORD 4
static int filter_worth_seeking(const seg_run *r, uint64_t ratio)
{
    uint64_t filter = UINT64_MAX, driving = 0;
    for (uint32_t t = 0; t < r->x->ntests; t++) filter = HANU_MIN(filter, wi_size(&r->fiters[t]));
    if (r->nmust) {
        driving = UINT64_MAX;
        for (uint32_t i = 0; i < r->nmust; i++) driving = HANU_MIN(driving, cl_size(r->must[i]));
    } else {
        for (uint32_t i = 0; i < r->npos; i++) driving += cl_size(r->pos[i]);
    }
    return filter < driving / ratio;
}

/* The shape one_word takes (with a filter that does not seek). */
static int one_word_shape(const seg_run *r)
{
    return r->x->q->n == 1 && r->npos == 1 && !r->nmust && !r->nneg && r->pos[0]->nw == 1 &&
           r->pos[0]->w[0].nsubs == 1;
}

static void seg_run_free(seg_run *r)
{
    for (size_t c = 0; r->runs && c < r->x->q->n; c++)
        for (uint32_t i = 0; i < r->runs[c].nw; i++) free(r->runs[c].w[i].subs);
    free(r->runs);
    free(r->pos);
    free(r->lens);
    for (uint32_t t = 0; r->fiters && t < r->x->ntests; t++) free(r->fiters[t].subs);
    free(r->fiters);
    free(r->tcols);
    free(r->tords);
    free(r->tord_at);
    memset(r, 0, sizeof *r);
}

/* The dictionary ordinal of every string a column test compares with. */
static int test_ordinals(seg_run *r)
{
    const search_ctx *x = r->x;
    size_t total = 0;
    r->tord_at = calloc(x->ntests + 1, sizeof *r->tord_at);
    if (!r->tord_at) return HANU_ERR_NOMEM;
    for (uint32_t t = 0; t < x->ntests; t++) {
        r->tord_at[t] = (uint32_t)total;
        total += x->tests[t].is_in ? json_len(x->tests[t].vals) : 1;
    }
    r->tords = malloc((total ? total : 1) * sizeof *r->tords);
    if (!r->tords) return HANU_ERR_NOMEM;
    for (uint32_t t = 0; t < x->ntests; t++) {
        const col_test *ct = &x->tests[t];
        size_t n = ct->is_in ? json_len(ct->vals) : 1;
        for (size_t i = 0; i < n; i++) {
            const json_value *v = ct->is_in ? json_at(ct->vals, i) : ct->vals;
            r->tords[r->tord_at[t] + i] = v->type == JSON_STRING && r->tcols[t]
                ? index_column_dict_find(r->tcols[t], v->u.str.ptr, v->u.str.len) : UINT32_MAX;
        }
    }
    return HANU_OK;
}

static int seg_run_open(seg_run *r, search_ctx *x, uint32_t s)
{
    const search_query *q = x->q;
    memset(r, 0, sizeof *r);
    r->x = x;
    r->s = s;
    r->seg = x->snap->segments[s].seg;
    int rc = select_lengths(x, r->seg, &r->lens, &r->nlens);
    r->runs = calloc(q->n ? q->n : 1, sizeof *r->runs);
    r->pos = calloc(3 * (q->n ? q->n : 1), sizeof *r->pos);
    r->tcols = calloc(x->ntests ? x->ntests : 1, sizeof *r->tcols);
    if (rc || !r->runs || !r->pos || !r->tcols) return rc ? rc : HANU_ERR_NOMEM;
    r->must = r->pos + q->n;
    r->neg = r->must + q->n;
    r->fiters = calloc(x->ntests ? x->ntests : 1, sizeof *r->fiters);
    if (!r->fiters) return HANU_ERR_NOMEM;
    for (uint32_t t = 0; t < x->ntests && !rc; t++) {
        r->tcols[t] = index_segment_column(r->seg, x->tests[t].path, x->tests[t].path_len);
        rc = filter_iter_open(&r->fiters[t], r->seg, &x->tests[t]);
    }
    if (!rc) rc = test_ordinals(r);
    for (uint32_t c = 0; c < q->n && !rc; c++) {
        const search_clause *cl = &q->clauses[c];
        clause_run *cr = &r->runs[c];
        cr->clause = c;
        for (uint32_t t = 0; t < cl->n_tokens && !rc; t++, cr->nw++) {
            rc = wi_open(&cr->w[t], r->seg, r->lens, r->nlens, x->nfields == 0, cl->tokens[t], cl->lens[t]);
            cr->w[t].impact_scale = rc ? 0 : impact_scale(x, r->seg, &cr->w[t]);
        }
        if (rc) break;
        cl_seek(cr, 0);
        if (x->occur[c] == SEARCH_MUST_NOT) { r->neg[r->nneg++] = cr; continue; }
        cr->ub = cl_bound(r, cr);
        r->pos[r->npos++] = cr;
        if (x->occur[c] == SEARCH_MUST) r->must[r->nmust++] = cr;
    }
    if (!rc && x->ntests) r->fseek = filter_worth_seeking(r, one_word_shape(r) ? FILTER_SEEK_RATIO_ONE_WORD : 1);
    return rc;
}

/* ------------------------------------------------------------ documents */

static uint32_t doc_length(const seg_run *r, uint32_t d)
{
    uint32_t len = 0;
    for (uint32_t i = 0; i < r->nlens; i++) len += index_column_text_length(r->lens[i], d);
    return len;
}

/* Whether the column holds v at d; a string by its dictionary ordinal in
 * this segment (sord, looked up once per segment: UINT32_MAX when absent). */
static int col_value_equal(const index_column *c, uint32_t d, enum index_col_tag tag, const json_value *v,
                           uint32_t sord)
{
    switch (v->type) {
    case JSON_STRING:
        return tag == INDEX_COL_STRING && sord != UINT32_MAX && index_column_string_ord(c, d) == sord;
    case JSON_NUMBER: return tag == INDEX_COL_NUMBER && index_column_number(c, d) == v->u.num.d;
    case JSON_BOOL: return tag == (v->u.boolean ? INDEX_COL_TRUE : INDEX_COL_FALSE);
    default: return 0;
    }
}

/* Column test t on document d: 1 or 0 when its column decides, -1 when the
 * path holds several values there (the stored document decides). */
static int test_match(const seg_run *r, uint32_t t, uint32_t d)
{
    const col_test *ct = &r->x->tests[t];
    const index_column *c = r->tcols[t];
    enum index_col_tag tag = c ? index_column_tag(c, d) : INDEX_COL_MISSING;
    if (tag == INDEX_COL_MULTI) return -1;
    const uint32_t *sords = r->tords + r->tord_at[t];
    int m = 0;
    if (!ct->is_in) m = col_value_equal(c, d, tag, ct->vals, sords[0]);
    for (size_t i = 0; ct->is_in && !m && i < json_len(ct->vals); i++)
        m = col_value_equal(c, d, tag, json_at(ct->vals, i), sords[i]);
    return m;
}

/* Two verdicts of an $and: 0 when either fails, else -1 when either needs
 * the stored document, else 1. */
static int8_t verdict_and(int8_t a, int8_t b)
{
    return a == 0 || b == 0 ? 0 : a < 0 || b < 0 ? -1 : 1;
}

/* 1 or 0 when the columns decide the filter for document d, -1 when a path
 * holds several values there (the stored document decides). */
static int columns_match(const seg_run *r, uint32_t d)
{
    int8_t v = 1;
    for (uint32_t t = 0; t < r->x->ntests && v; t++) v = verdict_and(v, (int8_t)test_match(r, t, d));
    return v;
}

/* columns_match of every document of p's decoded block into v: a test of
 * one string a block at a time (index_column_string_is: no call and no
 * dispatch per document, where a filtered count tests every posting), any
 * other test per document. */
static void block_verdicts(const seg_run *r, const index_postings *p, int8_t *v)
{
    int8_t tv[INDEX_BLOCK];
    if (!r->x->ntests) memset(v, 1, p->n);   /* an $and of nothing */
    for (uint32_t t = 0; t < r->x->ntests; t++) {
        const col_test *ct = &r->x->tests[t];
        int8_t *out = t ? tv : v;   /* the first test's verdicts are the $and's so far */
        if (!ct->is_in && ct->vals->type == JSON_STRING && r->tcols[t])
            index_column_string_is(r->tcols[t], p->ords, p->n, r->tords[r->tord_at[t]], out);
        else
            for (uint32_t i = 0; i < p->n; i++) out[i] = t && !v[i] ? 0 : (int8_t)test_match(r, t, p->ords[i]);
        for (uint32_t i = 0; t && i < p->n; i++) v[i] = verdict_and(v[i], tv[i]);
    }
}

/* Reads document d back and checks what the index cannot: the filter, and
 * the occurrences of phrases (tfs). 1 when it may match, 0 when not. */
static int read_back(seg_run *r, uint32_t d, int check_filter, int phrases)
{
    search_ctx *x = r->x;
    size_t len;
    const char *id = index_segment_doc_id(r->seg, d, &len);
    uint64_t token;
    hanu_buf_reset(&x->val);
    x->out->verified++;
    int rc = store_get(x->st, x->snap->db, id, len, &x->val, &token);
    if (rc == HANU_ERR_NOT_FOUND) return 0;   /* deleted after the snapshot */
    if (rc) return rc;
    json_doc *doc = NULL;
    rc = json_doc_parse((const char *)x->val.data, x->val.len, NULL, &doc, NULL);
    if (rc) return rc == HANU_ERR_INVALID ? 0 : rc;
    const json_value *root = json_doc_root(doc);
    int ok = 1;
    if (check_filter) ok = filter_match_value(x->f, root) == 1;
    if (ok && phrases) {
        uint32_t dl;
        rc = search_doc_tfs(x->q, x->fields, x->nfields, root, x->tfs, &dl);
        if (rc) ok = rc;
    }
    json_doc_free(doc);
    return ok;
}

static int admit(seg_run *r, uint32_t d, double score, double dl, int phrases, int filter_passed);

/* Document d, where every +must clause occurs (or, without one, at least one
 * positive clause's words): decides and scores it. */
static int evaluate(seg_run *r, uint32_t d)
{
    search_ctx *x = r->x;
    if (!index_snapshot_live(x->snap, r->s, d)) return HANU_OK;
    int phrases = 0;
    for (uint32_t i = 0; i < r->nneg; i++) {
        clause_run *n = r->neg[i];
        if (cl_advance(n, d) != d) continue;
        if (n->nw == 1) return HANU_OK;
        phrases = 1;   /* all its words are here: the document says whether the phrase is */
    }
    double dl = doc_length(r, d), score = 0;
    for (uint32_t i = 0; i < x->q->n; i++) {   /* in clause order, as search_eval sums */
        const clause_run *c = &r->runs[i];
        if (x->occur[i] == SEARCH_MUST_NOT || c->doc != d) continue;
        uint32_t tf = UINT32_MAX;
        for (uint32_t w = 0; w < c->nw; w++) tf = HANU_MIN(tf, c->w[w].tf);   /* a phrase: a bound */
        phrases |= c->nw > 1;
        score += bm25_part(x, x->idf[c->clause], tf, dl);
    }
    x->out->scored++;
    if (!x->count && !can_beat(x, score)) return HANU_OK;
    return admit(r, d, score, dl, phrases, 0);
}

/* Document d, whose score (with phrases: a bound) can still rank or is
 * counted: the filter (unless filter_passed: the count apart decided it),
 * the cursor, the phrases' exact score, then the count and the heap. */
static int admit(seg_run *r, uint32_t d, double score, double dl, int phrases, int filter_passed)
{
    search_ctx *x = r->x;
    /* the filter's columns only for a score that can still rank (or is counted) */
    int need_filter = x->fkind == FILTER_DOC && !filter_passed;
    if (x->fkind == FILTER_COLUMNS && !filter_passed) {
        int m = columns_match(r, d);
        if (m == 0) return HANU_OK;
        need_filter = m < 0;
    }
    /* without phrases the score is exact: a document the cursor keeps out
     * needs no reading unless it is counted */
    if (!x->count && !phrases && !after_cursor(x, score, r->s, d)) return HANU_OK;
    if (phrases || need_filter) {
        int ok = read_back(r, d, need_filter, phrases);
        if (ok <= 0) return ok;
    }
    if (phrases) {   /* the exact score, in clause order as the bound was summed */
        score = 0;
        int any = 0;
        for (uint32_t i = 0; i < r->nneg; i++)
            if (r->neg[i]->doc == d && x->tfs[r->neg[i]->clause]) return HANU_OK;
        for (uint32_t i = 0; i < x->q->n; i++) {
            const clause_run *c = &r->runs[i];
            if (x->occur[i] == SEARCH_MUST_NOT) continue;
            uint32_t tf = c->doc != d ? 0 : c->nw > 1 ? x->tfs[c->clause] : c->w[0].tf;
            if (!tf && x->occur[c->clause] == SEARCH_MUST) return HANU_OK;
            if (!tf) continue;
            any = 1;
            score += bm25_part(x, x->idf[c->clause], tf, dl);
        }
        if (!any) return HANU_OK;
    }
    count_match(x);
    if (after_cursor(x, score, r->s, d)) heap_offer(x, (heap_entry){ .score = score, .seg = r->s, .ord = d });
    return HANU_OK;
}

/* ------------------------------------------------------------ counting */

/* Whether the count is a matter of postings and columns, without scores: one
 * plain word (or one +must word, peeled), no filter or one the columns decide
 * (docs/QUERY.md, "Counting without scoring"). */
static int count_apart(const search_ctx *x)
{
    return x->q->n == 1 && x->q->clauses[0].n_tokens == 1 && x->occur[0] == SEARCH_SHOULD &&
           x->fkind != FILTER_DOC;
}

/* 1 when live document d (of the segment's postings) passes the filter, 0
 * when not, from the columns' verdict on it (columns_match); the stored
 * document decides what the columns cannot. */
static int verdict_passes(seg_run *r, uint32_t d, int verdict)
{
    if (r->x->fkind == FILTER_NONE) return 1;
    return verdict >= 0 ? verdict : read_back(r, d, 1, 0);
}

static int count_passes(seg_run *r, uint32_t d)
{
    return verdict_passes(r, d, r->x->fkind == FILTER_NONE ? 1 : columns_match(r, d));
}

/* Counts the segment's live documents holding the word and passing the
 * filter, up to the limit, scoring none: without a filter from the block
 * headers (a block is decoded only when a deleted ordinal falls in its
 * range), else a block at a time with the columns (cursors of their own: the
 * ranking's start where they stand). */
static int count_word(seg_run *r)
{
    search_ctx *x = r->x;
    const index_snapshot_segment *ss = &x->snap->segments[r->s];
    const search_clause *cl = &x->q->clauses[0];
    word_iter w;
    int rc = wi_open(&w, r->seg, r->lens, r->nlens, x->nfields == 0, cl->tokens[0], cl->lens[0]);
    if (!rc && w.nsubs == 1) {
        index_postings *p = &w.subs[0];
        uint32_t del = 0;   /* the deleted ordinals are sorted: walked with the postings */
        for (uint32_t b = 0; b < p->nblocks && x->apart && !rc; b++) {
            uint32_t last = block_u32(p, b, SEG_B_LAST), n = block_u32(p, b, SEG_B_COUNT);
            if (x->fkind != FILTER_NONE || (del < ss->ndeleted && ss->deleted[del] <= last)) {
                int8_t verdict[INDEX_BLOCK];
                index_postings_load(p, b);
                if (x->fkind == FILTER_COLUMNS) block_verdicts(r, p, verdict);
                n = 0;
                for (uint32_t i = 0; i < p->n && rc >= 0; i++) {
                    uint32_t d = p->ords[i];
                    while (del < ss->ndeleted && ss->deleted[del] < d) del++;
                    if (del < ss->ndeleted && ss->deleted[del] == d) continue;
                    rc = verdict_passes(r, d, x->fkind == FILTER_COLUMNS ? verdict[i] : 1);
                    if (rc > 0) n++;
                }
                if (rc > 0) rc = HANU_OK;
            }
            while (del < ss->ndeleted && ss->deleted[del] <= last) del++;
            count_add(x, n);
        }
    } else if (!rc) {   /* a union of paths (fields) */
        for (uint32_t d = w.doc; d != INDEX_ORD_END && x->apart && rc >= 0; d = wi_advance(&w, d + 1)) {
            if (!index_snapshot_live(x->snap, r->s, d)) continue;
            rc = count_passes(r, d);
            if (rc > 0) count_add(x, 1);
        }
        if (rc > 0) rc = HANU_OK;
    }
    free(w.subs);
    return rc;
}

/* ------------------------------------------------------------ the loops */

static void sort_by_doc(clause_run **v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        clause_run *t = v[i];
        uint32_t j = i;
        for (; j && v[j - 1]->doc > t->doc; j--) v[j] = v[j - 1];
        v[j] = t;
    }
}

/* Plain clauses only: WAND over the segment bounds, then the block bounds. */
static int wand(seg_run *r)
{
    search_ctx *x = r->x;
    clause_run **cur = r->pos;
    uint32_t n = r->npos;
    for (;;) {
        if (!x->k && !x->count) return HANU_OK;   /* nothing to rank, nothing to count */
        sort_by_doc(cur, n);
        double acc = 0;
        int64_t p = -1;
        for (uint32_t i = 0; i < n && cur[i]->doc != INDEX_ORD_END; i++) {
            acc += cur[i]->ub;
            if (can_beat(x, acc)) { p = i; break; }
        }
        if (p < 0) return HANU_OK;
        uint32_t d = cur[p]->doc;
        uint32_t f = filter_seek(r, d);
        if (f != d) {   /* nothing in [d, f) passes the filter, nothing before d can rank */
            for (int64_t i = 0; i <= p; i++) cl_advance(cur[i], f);
            continue;
        }
        while ((uint32_t)p + 1 < n && cur[p + 1]->doc == d) p++;
        if (x->prune && x->nheap == x->k) {
            double b = 0;
            uint32_t last = INDEX_ORD_END;
            for (int64_t i = 0; i <= p; i++) {
                uint32_t l;
                b += cl_block(r, cur[i], d, &l);
                last = HANU_MIN(last, l);
            }
            if (!can_beat(x, b)) {
                uint32_t next = last == INDEX_ORD_END ? INDEX_ORD_END : last + 1;
                if ((uint32_t)p + 1 < n && cur[p + 1]->doc < next) next = cur[p + 1]->doc;
                x->out->skipped_blocks++;
                for (int64_t i = 0; i <= p; i++)
                    if (next == INDEX_ORD_END) cur[i]->doc = INDEX_ORD_END;
                    else cl_advance(cur[i], next);
                continue;
            }
        }
        if (cur[0]->doc == d) {
            int rc = evaluate(r, d);
            if (rc) return rc;
            for (int64_t i = 0; i <= p; i++) cl_advance(cur[i], d + 1);
        } else {
            for (int64_t i = 0; i < p; i++) cl_advance(cur[i], d);
        }
    }
}

/* The largest tf whose score at a block's shortest length cannot enter the
 * top k as it stands: the block's documents with at most that tf are passed
 * over without their length or score (0: none are). The score is increasing
 * in tf, so the inverse of BM25 gives it; bm25_part itself confirms it. */
static uint32_t tf_floor(const search_ctx *x, double idf, uint32_t min_len, uint32_t max_tf)
{
    if (!x->prune || x->count || !x->k || x->nheap < x->k || max_tf == 0) return 0;
    double per = idf * (BM25_K1 + 1), r = per > 0 ? x->heap[0].score / per : 0;
    double K = BM25_K1 * (1 - BM25_B + BM25_B * (x->avgdl > 0 ? min_len / x->avgdl : 1.0));
    if (r <= 0) return 0;
    double v = r >= 1 ? max_tf : r * K / (1 - r);
    uint32_t c = v >= max_tf ? max_tf : (uint32_t)v;
    for (int step = 0; c && can_beat(x, bm25_part(x, idf, c, min_len)); step++, c--)
        if (step == 4) return 0;   /* the estimate is off by more than rounding: pass over none */
    return c;
}

/* One block of one_word: skipped when its bound cannot enter the top k, else
 * decoded; a document's score comes first (its tf from the block, its length
 * from the column), documents whose tf cannot rank even at the block's
 * shortest length are passed over, and only a score that can still rank pays
 * for the filter. *del: where the walk of the sorted deleted ordinals is. */
static int one_word_block(seg_run *r, index_postings *p, uint32_t b, uint32_t *del, int count)
{
    search_ctx *x = r->x;
    const clause_run *c = r->pos[0];
    const index_snapshot_segment *ss = &x->snap->segments[r->s];
    double idf = x->idf[c->clause];
    uint32_t max_tf = block_u32(p, b, SEG_B_MAX_TF), min_len = block_u32(p, b, SEG_B_MIN_LEN);
    count = count && x->apart;   /* counting visits every block */
    if (x->prune && x->nheap == x->k && !count) {
        double bound = word_bound(x, &c->w[0], idf, max_tf, min_len, index_postings_block_impact(p, b));
        if (!can_beat(x, bound)) { x->out->skipped_blocks++; return HANU_OK; }
    }
    if (b != p->block) index_postings_load(p, b);
    int8_t verdict[INDEX_BLOCK];
    if (count && x->fkind == FILTER_COLUMNS) block_verdicts(r, p, verdict);
    uint32_t below = tf_floor(x, idf, min_len, max_tf);
    for (uint32_t i = 0; i < p->n; i++) {
        if (p->tfs[i] <= below && !(count && x->apart)) continue;
        uint32_t d = p->ords[i];
        while (*del < ss->ndeleted && ss->deleted[*del] < d) (*del)++;
        if (*del < ss->ndeleted && ss->deleted[*del] == d) continue;
        int passed = 0;
        if (count && x->apart) {
            int m = verdict_passes(r, d, x->fkind == FILTER_COLUMNS ? verdict[i] : 1);
            if (m < 0) return m;
            count_add(x, (uint64_t)m);
            /* a document the filter refuses is not scored: admit would refuse it too */
            if (!m || p->tfs[i] <= below) continue;
            passed = 1;
        }
        double score = bm25_part(x, idf, p->tfs[i], doc_length(r, d));
        x->out->scored++;
        if (!x->count && !can_beat(x, score)) continue;
        int rc = admit(r, d, score, 0, 0, passed);
        if (rc) return rc;
        if (!x->k && !x->count) return HANU_OK;
        below = tf_floor(x, idf, min_len, max_tf);   /* the threshold may have risen */
    }
    return HANU_OK;
}

/* The want blocks of largest impact first (at most ONE_WORD_FIRST, half
 * of the word's blocks; in ordinal order into first): they raise the threshold to near its last value at once,
 * so that the pass in order skips nearly every other block. Any visiting
 * order gives the same top k (the heap orders by score, then _id). */
#define ONE_WORD_FIRST 64
static uint32_t best_blocks(const index_postings *p, uint32_t *first, uint32_t want)
{
    uint32_t imp[ONE_WORD_FIRST], n = 0;
    for (uint32_t b = 0; b < p->nblocks; b++) {   /* the largest impacts: a min-heap of ONE_WORD_FIRST */
        uint32_t v = index_postings_block_impact(p, b);
        if (n < want) {
            uint32_t i = n++;
            for (; i && imp[(i - 1) / 2] > v; i = (i - 1) / 2) { imp[i] = imp[(i - 1) / 2]; first[i] = first[(i - 1) / 2]; }
            imp[i] = v;
            first[i] = b;
        } else if (v > imp[0]) {
            uint32_t i = 0;
            for (;;) {
                uint32_t l = 2 * i + 1, m = l + 1 < n && imp[l + 1] < imp[l] ? l + 1 : l;
                if (l >= n || imp[m] >= v) break;
                imp[i] = imp[m];
                first[i] = first[m];
                i = m;
            }
            imp[i] = v;
            first[i] = b;
        }
    }
    for (uint32_t i = 1; i < n; i++)   /* ordinal order */
        for (uint32_t j = i; j && first[j - 1] > first[j]; j--) {
            uint32_t t = first[j];
            first[j] = first[j - 1];
            first[j - 1] = t;
        }
    return n;
}

/* The first deleted ordinal at or after the first ordinal of block b. */
static uint32_t deleted_from(const index_snapshot_segment *ss, const index_postings *p, uint32_t b)
{
    uint32_t from = b ? block_u32(p, b - 1, SEG_B_LAST) + 1 : 0, lo = 0, hi = ss->ndeleted;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ss->deleted[mid] < from) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* One plain word over one key (no fields, no +must, -not or phrase, the
 * filter not seeking): the commonest search, block at a time. With count,
 * the count apart is taken in the same pass (a filter's test on every
 * document while it runs: blocks are not skipped until it ends); else the
 * blocks of largest impact come first, unless the count is the ranking's
 * (it needs the ordinal order to switch pruning on). The decisions and the
 * sums are evaluate's, in the same order. */
static int one_word(seg_run *r, int count)
{
    search_ctx *x = r->x;
    clause_run *c = r->pos[0];
    index_postings *p = &c->w[0].subs[0];
    const index_snapshot_segment *ss = &x->snap->segments[r->s];
    uint32_t first[ONE_WORD_FIRST], nfirst = 0, del = 0, at = 0;
    count = count && x->apart;
    if (x->prune && x->nheap == x->k && !count && !can_beat(x, c->ub)) return HANU_OK;
    if (x->prune && !x->count && !count && x->k && c->w[0].impact_scale > 0)
        nfirst = best_blocks(p, first, HANU_MIN(ONE_WORD_FIRST, p->nblocks / 2));
    for (uint32_t i = 0; i < nfirst; i++) {
        del = deleted_from(ss, p, first[i]);
        int rc = one_word_block(r, p, first[i], &del, 0);
        if (rc) return rc;
    }
    del = 0;
    for (uint32_t b = 0; b < p->nblocks; b++) {
        if (!x->k && !x->count && !(count && x->apart)) return HANU_OK;   /* nothing to rank or count */
        if (at < nfirst && first[at] == b) { at++; continue; }   /* done first */
        int rc = one_word_block(r, p, b, &del, count);
        if (rc) return rc;
    }
    return HANU_OK;
}

/* +must clauses: their intersection drives; blocks of every positive clause
 * bound what a stretch of it can score. */
static int conjunction(seg_run *r)
{
    search_ctx *x = r->x;
    for (;;) {
        if (!x->k && !x->count) return HANU_OK;
        uint32_t d = r->must[0]->doc;
        for (int agree = 0; !agree;) {   /* leapfrog until every +must clause is at d */
            agree = 1;
            for (uint32_t i = 0; i < r->nmust; i++) {
                uint32_t got = cl_advance(r->must[i], d);
                if (got == INDEX_ORD_END) return HANU_OK;
                if (got > d) { d = got; agree = 0; }
            }
        }
        uint32_t f = filter_seek(r, d);
        if (f == INDEX_ORD_END) return HANU_OK;
        if (f != d) {
            cl_advance(r->must[0], f);
            continue;
        }
        if (x->prune && x->nheap == x->k) {
            double b = 0;
            uint32_t last = INDEX_ORD_END;
            for (uint32_t i = 0; i < r->npos; i++) {
                uint32_t l;
                b += cl_block(r, r->pos[i], d, &l);
                last = HANU_MIN(last, l);
            }
            if (!can_beat(x, b)) {
                x->out->skipped_blocks++;
                if (last == INDEX_ORD_END) return HANU_OK;
                cl_advance(r->must[0], last + 1);
                continue;
            }
        }
        for (uint32_t i = 0; i < r->npos; i++) cl_advance(r->pos[i], d);
        int rc = evaluate(r, d);
        if (rc) return rc;
        cl_advance(r->must[0], d + 1);
    }
}

/* ------------------------------------------------------------ set-up */

static int path_plain(const char *p, size_t len)
{
    if (len == 0 || len > INDEX_PATH_MAX || memchr(p, 0, len)) return 0;
    for (size_t start = 0, i = 0; i <= len; i++) {
        if (i < len && p[i] != '.') continue;
        size_t digits = 0;
        while (start + digits < i && p[start + digits] >= '0' && p[start + digits] <= '9') digits++;
        if (digits == i - start) return 0;   /* empty, or a position */
        start = i + 1;
    }
    return 1;
}

static int column_safe(const json_value *v)
{
    if (v->type == JSON_STRING) return v->u.str.len <= INDEX_KEYWORD_MAX;
    if (v->type == JSON_NUMBER) return fabs(v->u.num.d) < EXACT_DOUBLE_INT;
    return v->type == JSON_BOOL;
}

/* Collects the $and of equality/$in tests under node i; 0 when the filter
 * holds anything else. */
/* 1 when the filter is equalities tested on the candidates' columns; x NULL:
   only says so. */
static int collect_tests(search_ctx *x, const filter_node *nodes, uint32_t i)
{
    const filter_node *n = &nodes[i];
    if (n->op == FILTER_AND) {
        for (uint32_t k = 0; k < n->count; k++)
            if (!collect_tests(x, nodes, n->first + k)) return 0;
        return 1;
    }
    if ((n->op != FILTER_EQ && n->op != FILTER_IN) || !path_plain(n->path, n->path_len)) return 0;
    if (n->op == FILTER_EQ && !column_safe(n->operand)) return 0;
    for (size_t k = 0; n->op == FILTER_IN && k < json_len(n->operand); k++)
        if (!column_safe(json_at(n->operand, k))) return 0;
    if (x) x->tests[x->ntests++] = (col_test){ n->path, n->path_len, n->operand, n->op == FILTER_IN };
    return 1;
}

static void classify_filter(search_ctx *x)
{
    size_t nn = 0;
    const filter_node *nodes = x->f ? filter_nodes(x->f, &nn) : NULL;
    x->fkind = FILTER_NONE;
    if (!nn || (nodes[0].op == FILTER_AND && nodes[0].count == 0)) return;
    x->fkind = collect_tests(x, nodes, 0) ? FILTER_COLUMNS : FILTER_DOC;
    if (x->fkind == FILTER_DOC) x->ntests = 0;
}

/* Documents of a segment without deletions holding a word anywhere in its text. */
static uint32_t whole_text_df(const index_segment *seg, const char *tok, size_t tok_len)
{
    uint8_t key[INDEX_KEY_MAX];
    size_t klen = index_key(key, "", 0, INDEX_KEY_ALL_WORD, tok, tok_len, 0);
    uint32_t t = klen ? index_segment_term_find(seg, key, klen) : UINT32_MAX, df = 0;
    size_t len;
    if (t != UINT32_MAX) index_segment_term(seg, t, &len, &df);
    return df;
}

/* The whole-text keys of the query's words are looked up in every segment
 * next: their cache misses are taken together first (index.h). */
static void prefetch_words(const index_snapshot *snap, const search_query *q)
{
    for (size_t c = 0; c < q->n; c++)
        for (uint32_t k = 0; k < q->clauses[c].n_tokens; k++) {
            uint8_t key[INDEX_KEY_MAX];
            size_t klen = index_key(key, "", 0, INDEX_KEY_ALL_WORD, q->clauses[c].tokens[k], q->clauses[c].lens[k], 0);
            if (klen) index_snapshot_term_prefetch(snap, key, klen);
        }
}

uint64_t index_search_estimate(const index_snapshot *snap, const search_query *q, const filter *f)
{
    if (!snap) return 0;
    prefetch_words(snap, q);
    size_t nn = 0;
    const filter_node *nodes = f ? filter_nodes(f, &nn) : NULL;
    uint64_t cost = 0;
    /* a filter of plain equalities costs a column test per candidate, counted with the words */
    if (nn && !(nodes[0].op == FILTER_AND && nodes[0].count == 0) && !collect_tests(NULL, nodes, 0))
        cost = index_find_estimate(snap, f);
    for (uint32_t s = 0; s < snap->nsegments; s++)
        for (size_t c = 0; c < q->n; c++)
            for (uint32_t k = 0; k < q->clauses[c].n_tokens; k++) {
                uint32_t df = whole_text_df(snap->segments[s].seg, q->clauses[c].tokens[k], q->clauses[c].lens[k]);
                cost = cost > UINT64_MAX - df ? UINT64_MAX : cost + df;
            }
    return cost;
}

/* N, the average length and every clause's idf over the live documents. */
static int collection_stats(search_ctx *x)
{
    const index_snapshot *snap = x->snap;
    uint64_t total = 0;
    uint64_t *df = calloc(x->q->n * SEARCH_MAX_PHRASE_TOKENS + 1, sizeof *df);
    if (!df) return HANU_ERR_NOMEM;
    int rc = HANU_OK;
    x->n_docs = 0;
    if (!x->nfields) prefetch_words(snap, x->q);
    for (uint32_t s = 0; s < snap->nsegments && !rc; s++) {
        const index_snapshot_segment *ss = &snap->segments[s];
        x->n_docs += index_segment_docs(ss->seg) - ss->ndeleted;
        const index_column **lens;
        uint32_t nlens;
        if ((rc = select_lengths(x, ss->seg, &lens, &nlens)) != HANU_OK) break;
        for (uint32_t i = 0; i < nlens; i++) {
            total += index_column_text_total(lens[i]);
            for (uint32_t k = 0; k < ss->ndeleted; k++) total -= index_column_text_length(lens[i], ss->deleted[k]);
        }
        for (size_t c = 0; c < x->q->n && !rc; c++)
            for (uint32_t t = 0; t < x->q->clauses[c].n_tokens && !rc; t++) {
                if (!x->nfields && !ss->ndeleted) {   /* the term table's count: no postings opened */
                    df[c * SEARCH_MAX_PHRASE_TOKENS + t] += whole_text_df(ss->seg, x->q->clauses[c].tokens[t],
                                                                          x->q->clauses[c].lens[t]);
                    continue;
                }
                word_iter w;
                rc = wi_open(&w, ss->seg, lens, nlens, x->nfields == 0, x->q->clauses[c].tokens[t],
                             x->q->clauses[c].lens[t]);
                if (!rc) df[c * SEARCH_MAX_PHRASE_TOKENS + t] += wi_live_df(&w, ss, s, snap);
                free(w.subs);
            }
        free(lens);
    }
    x->avgdl = x->n_docs ? (double)total / (double)x->n_docs : 0;
    for (size_t c = 0; c < x->q->n && !rc; c++) {
        x->idf[c] = 0;
        for (uint32_t t = 0; t < x->q->clauses[c].n_tokens; t++)
            x->idf[c] += bm25_idf(x->n_docs, df[c * SEARCH_MAX_PHRASE_TOKENS + t]);
    }
    free(df);
    return rc;
}

/* The position of entry e as a cursor of the page (txn bound itxn). */
static int make_next(search_ctx *x, const heap_entry *e, uint64_t itxn)
{
    size_t len;
    const char *id = index_segment_doc_id(x->snap->segments[e->seg].seg, e->ord, &len);
    if (len == 0 || len > INDEX_CURSOR_ID_MAX) return HANU_ERR_INVALID;   /* ids are at most DOCS_ID_MAX */
    index_cursor *c = calloc(1, sizeof *c);
    if (!c) return HANU_ERR_NOMEM;
    c->txn_bound = itxn;
    c->sort_hash = index_search_hash(x->q, x->fields, x->nfields);
    c->nkeys = 1;
    c->keys[0].type = JSON_NUMBER;
    c->keys[0].d = e->score;
    memcpy(c->id, id, len);
    c->id[len] = '\0';
    c->id_len = len;
    x->out->next = c;
    return HANU_OK;
}

/* The page: the heap's entries best first, [offset, offset + limit), each
 * with its stored bytes; next when the heap holds one more (k is one more
 * than offset + limit). */
static int collect_page(search_ctx *x, size_t offset, size_t limit, uint64_t itxn)
{
    index_search_result *out = x->out;
    size_t n = x->nheap;
    heap_entry *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) return HANU_ERR_NOMEM;
    for (size_t i = n; i > 0; i--) {   /* pop the worst: fills from the back */
        sorted[i - 1] = x->heap[0];
        x->heap[0] = x->heap[--x->nheap];
        sift_down(x, 0);
    }
    size_t want = n > offset ? HANU_MIN(n - offset, limit) : 0;
    out->hits.hits = calloc(want ? want : 1, sizeof *out->hits.hits);
    out->scores = calloc(want ? want : 1, sizeof *out->scores);
    store_get_item *items = calloc(want ? want : 1, sizeof *items);
    int rc = out->hits.hits && out->scores && items ? HANU_OK : HANU_ERR_NOMEM;
    for (size_t i = 0; i < want && !rc; i++) {
        const heap_entry *e = &sorted[offset + i];
        items[i].key = index_segment_doc_id(x->snap->segments[e->seg].seg, e->ord, &items[i].key_len);
    }
    hanu_buf_reset(&x->val);
    if (!rc && want) rc = store_get_many(x->st, x->snap->db, items, want, &x->val);
    if (!rc && want) rc = index_hits_take(&out->hits, items, want, &x->val);   /* deleted after the snapshot: left out */
    for (size_t i = 0, k = 0; i < want && !rc; i++) {
        if (items[i].rc != HANU_ERR_NOT_FOUND) out->scores[k++] = sorted[offset + i].score;
        else x->gone++;
    }
    free(items);
    if (!rc && want && n > offset + want) rc = make_next(x, &sorted[offset + want - 1], itxn);
    free(sorted);
    return rc;
}

int index_search_ex(store *st, const index_snapshot *snap, const search_query *q, const filter *f,
                    const char *const *fields, size_t nfields, const index_search_opts *o,
                    index_search_result *out)
{
    memset(out, 0, sizeof *out);
    if (!snap || !q->n) return HANU_OK;
    size_t offset = o->offset, limit = o->limit;
    search_ctx x = { .st = st, .snap = snap, .q = q, .f = f, .fields = fields, .nfields = nfields,
                     .count = 1, .count_upto = o->count_upto, .after = o->after,
                     .exhaustive = (o->flags & INDEX_SEARCH_EXHAUSTIVE) != 0, .out = out };
    /* one more than the page: whether a next page exists */
    x.k = limit && limit < SIZE_MAX - 1 && offset < SIZE_MAX - 1 - limit ? offset + limit + 1 : 0;
    x.occur = calloc(q->n, sizeof *x.occur);
    x.idf = calloc(q->n, sizeof *x.idf);
    x.tfs = calloc(q->n, sizeof *x.tfs);
    x.heap = malloc((x.k ? x.k : 1) * sizeof *x.heap);
    int rc = x.occur && x.idf && x.tfs && x.heap ? HANU_OK : HANU_ERR_NOMEM;
    size_t should = 0, must = 0;
    for (size_t c = 0; c < q->n && !rc; c++) {
        x.occur[c] = q->clauses[c].occur;
        should += x.occur[c] == SEARCH_SHOULD;
        must += x.occur[c] == SEARCH_MUST;
    }
    /* One +must clause and nothing else to rank: the same as a plain word, and
     * WAND prunes plain words. */
    for (size_t c = 0; c < q->n && !rc && must == 1 && should == 0; c++)
        if (x.occur[c] == SEARCH_MUST) x.occur[c] = SEARCH_SHOULD;
    if (!rc) {
        classify_filter(&x);
        rc = collection_stats(&x);
    }
    if (!rc) rc = segment_id_order(&x);
    /* A count of postings and columns runs apart and the ranking prunes from
       its start; any other count is the ranking's, unpruned until its limit. */
    if (!rc && count_apart(&x)) {
        x.apart = 1;
        x.count = 0;
        x.prune = !x.exhaustive;
    }
    for (uint32_t s = 0; s < snap->nsegments && !rc && (x.k || x.count || x.apart); s++) {
        seg_run r;
        rc = seg_run_open(&r, &x, s);
        int one = !rc && one_word_shape(&r) && !r.fseek;
        /* a filter's count rides one_word's pass; without a filter the headers count */
        int fused = one && x.apart && x.fkind == FILTER_COLUMNS;
        if (!rc && x.apart && !fused) rc = count_word(&r);
        if (!rc) rc = r.nmust ? conjunction(&r) : one ? one_word(&r, fused) : wand(&r);
        seg_run_free(&r);
    }
    if (!rc) rc = collect_page(&x, offset, limit, o->index_txn);
    /* A hit deleted after the snapshot left the page: the count leaves it too, so
       that an exact count and the hits describe the same documents. */
    out->hits.total = x.total_gte ? x.total : x.total - HANU_MIN(x.total, x.gone);
    out->total_gte = x.total_gte;
    hanu_buf_free(&x.val);
    free(x.occur);
    free(x.idf);
    free(x.tfs);
    free(x.ids_ascending);
    free(x.seg_order);
    free(x.heap);
    if (rc) index_search_result_free(out);
    return rc;
}

int index_search(store *st, const index_snapshot *snap, const search_query *q, const filter *f,
                 const char *const *fields, size_t nfields, size_t offset, size_t limit, unsigned flags,
                 index_search_result *out)
{
    index_search_opts o = { .offset = offset, .limit = limit, .flags = flags & INDEX_SEARCH_EXHAUSTIVE,
                            .count_upto = flags & INDEX_SEARCH_COUNT ? INDEX_SEARCH_COUNT_ALL : 0 };
    return index_search_ex(st, snap, q, f, fields, nfields, &o, out);
}

void index_search_result_free(index_search_result *r)
{
    index_hits_free(&r->hits);
    free(r->scores);
    free(r->next);
    memset(r, 0, sizeof *r);
}
