/*
 * merge.c: merging segments (docs/INDEX.md, "Merges"). A merge reads the
 * live documents of several segments back out of their files (ids, txns,
 * column values, text lengths, then every term's postings) and feeds them to
 * a builder with new ordinals, so the merged file is exactly the segment the
 * builder would have written from the documents themselves; no document is
 * parsed again. The policy that picks what to merge is pure and lives here
 * too; the indexer runs both (indexer.c).
 */
#include "index/index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Copies one document's column values and text lengths into the builder's current document. */
static int copy_columns(index_builder *b, const index_segment *seg, uint32_t ord)
{
    uint32_t ncols = index_segment_column_count(seg);
    for (uint32_t i = 0; i < ncols; i++) {
        const index_column *c = index_segment_column_at(seg, i);
        size_t plen;
        const char *path = index_column_path(c, &plen);
        int rc = HANU_OK;
        switch (index_column_tag(c, ord)) {
        case INDEX_COL_MISSING: break;
        case INDEX_COL_NULL: rc = index_builder_null(b, path, plen); break;
        case INDEX_COL_FALSE: rc = index_builder_bool(b, path, plen, 0); break;
        case INDEX_COL_TRUE: rc = index_builder_bool(b, path, plen, 1); break;
        case INDEX_COL_NUMBER: rc = index_builder_number(b, path, plen, index_column_number(c, ord)); break;
        case INDEX_COL_STRING: {
            size_t slen;
            const char *s = index_column_dict(c, index_column_string_ord(c, ord), &slen);
            rc = index_builder_string(b, path, plen, s, slen);
            break;
        }
        case INDEX_COL_MULTI: rc = index_builder_multi(b, path, plen); break;
        default: rc = HANU_ERR_CORRUPT;
        }
        uint32_t tokens = index_column_text_length(c, ord);
        if (!rc && tokens) rc = index_builder_text_length(b, path, plen, tokens);
        if (rc) return rc;
    }
    return HANU_OK;
}

/* Adds input seg's documents (those not deleted) and fills its ordinal map. */
static int copy_documents(index_builder *b, const index_merge_input *in, uint32_t *map, uint32_t *next)
{
    uint32_t docs = index_segment_docs(in->seg), k = 0;
    for (uint32_t ord = 0; ord < docs; ord++) {
        while (k < in->ndeleted && in->deleted[k] < ord) k++;
        if (k < in->ndeleted && in->deleted[k] == ord) {
            map[ord] = INDEX_ORD_END;
            continue;
        }
        size_t len;
        const char *id = index_segment_doc_id(in->seg, ord, &len);
        int rc = index_builder_doc(b, id, len, index_segment_doc_txn(in->seg, ord));
        if (!rc) rc = copy_columns(b, in->seg, ord);
        if (rc) return rc;
        map[ord] = (*next)++;
    }
    return HANU_OK;
}

/* Adds every posting of seg's live documents under their new ordinals. */
static int copy_postings(index_builder *b, const index_segment *seg, const uint32_t *map)
{
    uint32_t nterms = index_segment_terms(seg);
    for (uint32_t t = 0; t < nterms; t++) {
        size_t klen;
        uint32_t df;
        const uint8_t *key = index_segment_term(seg, t, &klen, &df);
        index_postings p;
        index_postings_open(&p, seg, t);
        for (uint32_t ord = p.doc; ord != INDEX_ORD_END; ord = index_postings_next(&p)) {
            if (map[ord] == INDEX_ORD_END) continue;
            int rc = index_builder_posting(b, key, klen, map[ord], p.tf);
            if (rc) return rc;
        }
    }
    return HANU_OK;
}

int index_merge_write(const index_merge_input *in, uint32_t n, const char *path, uint32_t **map,
                      uint32_t *docs_out)
{
    return index_merge_write_ex(in, n, path, map, docs_out, 1);
}

int index_merge_write_ex(const index_merge_input *in, uint32_t n, const char *path, uint32_t **map,
                         uint32_t *docs_out, int sync)
{
    index_builder *b = index_builder_new();
    if (!b) return HANU_ERR_NOMEM;
    uint32_t next = 0;
    int rc = HANU_OK;
    for (uint32_t i = 0; i < n && !rc; i++) rc = copy_documents(b, &in[i], map[i], &next);
    for (uint32_t i = 0; i < n && !rc; i++) rc = copy_postings(b, in[i].seg, map[i]);
    if (!rc) rc = index_builder_write_ex(b, path, sync);
    index_builder_free(b);
    if (!rc && docs_out) *docs_out = next;
    return rc;
}

/* ------------------------------------------------------------ the policy */

static _Thread_local const uint64_t *sort_live;   /* qsort has no context argument */

static int cmp_by_live(const void *a, const void *b)
{
    uint64_t x = sort_live[*(const uint32_t *)a], y = sort_live[*(const uint32_t *)b];
    return x < y ? -1 : x > y;
}

static int cmp_index(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t live_bytes(const index_merge_candidate *c)
{
    return c->docs ? (uint64_t)((double)c->bytes * (c->docs - c->deleted) / c->docs) : 0;
}

static uint32_t tier_of(uint64_t live)
{
    uint32_t t = 0;
    for (uint64_t top = INDEX_MERGE_FLOOR_BYTES; live >= top && t < 63; top *= INDEX_MERGE_FACTOR) t++;
    return t;
}

/* Takes the smallest of the n indexes in order (sorted by live size) while the
 * sum stays under max_bytes; returns how many, 0 when fewer than two fit. */
static uint32_t take_smallest(uint32_t *order, uint32_t n, const uint64_t *live, uint64_t max_bytes,
                              uint32_t *pick)
{
    sort_live = live;
    qsort(order, n, sizeof *order, cmp_by_live);
    uint64_t sum = 0;
    uint32_t k = 0;
    while (k < n && k < INDEX_MERGE_MAX_AT_ONCE && sum + live[order[k]] <= max_bytes) sum += live[order[k++]];
    if (k < 2) return 0;
    memcpy(pick, order, k * sizeof *pick);
    qsort(pick, k, sizeof *pick, cmp_index);
    return k;
}

uint32_t index_merge_pick(enum index_merge_policy policy, const index_merge_candidate *segs, uint32_t n,
                          uint64_t max_bytes, uint32_t *pick)
{
    if (policy == INDEX_MERGE_NONE || n == 0) return 0;
    uint64_t *live = malloc(n * sizeof *live);
    uint32_t *order = malloc(n * sizeof *order);
    uint32_t got = 0;
    if (!live || !order) goto out;
    for (uint32_t i = 0; i < n; i++) live[i] = live_bytes(&segs[i]);
    if (policy == INDEX_MERGE_LAZY) {
        if (n <= INDEX_MERGE_LAZY_SEGMENTS) goto out;
        for (uint32_t i = 0; i < n; i++) order[i] = i;
        got = take_smallest(order, n, live, max_bytes, pick);
        goto out;
    }
    /* Tiers from the lowest: the first with INDEX_MERGE_FACTOR segments merges. A
     * segment past half the cap is done growing (unless it is mostly deleted). */
    for (uint32_t tier = 0; tier < 64 && !got; tier++) {
        uint32_t m = 0, higher = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (live[i] > max_bytes / 2) continue;
            uint32_t t = tier_of(live[i]);
            if (t == tier) order[m++] = i;
            else if (t > tier) higher++;
        }
        if (m >= INDEX_MERGE_FACTOR) got = take_smallest(order, m, live, max_bytes, pick);
        if (!higher && !m) break;
    }
    for (uint32_t i = 0; i < n && !got; i++)
        if (segs[i].docs && (uint64_t)segs[i].deleted * 2 > segs[i].docs) {
            pick[0] = i;
            got = 1;
        }
out:
    free(live);
    free(order);
    return got;
}

int index_merge_policy_parse(const char *name, enum index_merge_policy *out)
{
    static const char *names[] = { "default", "lazy", "none" };
    for (int i = 0; i < 3; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (enum index_merge_policy)i;
            return HANU_OK;
        }
    return HANU_ERR_INVALID;
}
