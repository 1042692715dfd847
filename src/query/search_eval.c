/*
 * search_eval.c: brute-force full-text search, the definition the index's
 * block-max WAND must reproduce (contract in query.h). Two passes over the
 * documents: the first tokenizes each one and counts every clause's
 * occurrences (tf), from which document frequencies follow; the second
 * decides matches and sums BM25. Quadratic in nothing but slow by design:
 * tests only.
 */
#include "query/query_internal.h"
#include "text/text.h"

#include <math.h>
#include <stdlib.h>

/* The tokens of one document: bytes in text, then per token its value and position. */
typedef struct doc_tokens {
    hanu_buf text;
    struct tok { size_t off, len; uint32_t value, position; } *v;
    size_t n, cap;
    uint32_t value;             /* index of the string value being tokenized */
    uint32_t length;            /* positions used: the BM25 document length */
    int status;
} doc_tokens;

static int keep_token(void *ctx, const text_token *t)
{
    doc_tokens *d = ctx;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        struct tok *nv = realloc(d->v, cap * sizeof *nv);
        if (!nv) return HANU_ERR_NOMEM;
        d->v = nv;
        d->cap = cap;
    }
    d->v[d->n++] = (struct tok){ d->text.len, t->len, d->value, t->position };
    return hanu_buf_append(&d->text, t->bytes, t->len) ? HANU_ERR_NOMEM : 0;
}

static int field_selected(const char *path, size_t len, const char *const *fields, size_t n_fields)
{
    if (n_fields == 0) return 1;
    for (size_t i = 0; i < n_fields; i++) {
        size_t f = strlen(fields[i]);
        if (len >= f && memcmp(path, fields[i], f) == 0 && (len == f || path[f] == '.')) return 1;
    }
    return 0;
}

/* Walks v at the dotted path p[0..len), tokenizing the selected strings. A
 * path too long to hold (len == SIZE_MAX) is below any field a query can
 * name: its strings count only when no fields are given. */
static void gather_text(doc_tokens *d, const json_value *v, char *p, size_t len, size_t cap,
                        const char *const *fields, size_t n_fields, int top)
{
    if (d->status) return;
    if (v->type == JSON_STRING) {
        if (len == SIZE_MAX ? n_fields != 0 : !field_selected(p, len, fields, n_fields)) return;
        uint32_t used = 0;
        int rc = text_tokenize(v->u.str.ptr, v->u.str.len, keep_token, d, &used);
        if (rc) d->status = rc;
        d->length += used;
        d->value++;
        return;
    }
    if (v->type != JSON_ARRAY && v->type != JSON_OBJECT) return;
    for (size_t i = 0; i < v->u.kids.n; i++) {
        const json_value *k = &v->u.kids.items[i];
        size_t klen = len;
        if (v->type == JSON_OBJECT && len != SIZE_MAX) {
            if (top && strcmp(k->key, "_id") == 0) continue;
            size_t need = (len ? 1 : 0) + k->key_len;
            if (len + need >= cap) {
                gather_text(d, k, p, SIZE_MAX, cap, fields, n_fields, 0);
                continue;
            }
            if (len) p[klen++] = '.';
            memcpy(p + klen, k->key, k->key_len);
            klen += k->key_len;
            p[klen] = '\0';
        }
        gather_text(d, k, p, klen, cap, fields, n_fields, 0);
    }
}

static int token_is(const doc_tokens *d, size_t i, const char *tok, size_t len)
{
    return d->v[i].len == len && memcmp(d->text.data + d->v[i].off, tok, len) == 0;
}

/* Occurrences of a clause (a word, or a phrase: consecutive positions of one value). */
static uint32_t clause_tf(const doc_tokens *d, const search_clause *c)
{
    uint32_t tf = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (!token_is(d, i, c->tokens[0], c->lens[0])) continue;
        uint32_t k = 1;
        for (; k < c->n_tokens; k++) {
            size_t j = i + k;
            if (j >= d->n || d->v[j].value != d->v[i].value || d->v[j].position != d->v[i].position + k ||
                !token_is(d, j, c->tokens[k], c->lens[k]))
                break;
        }
        tf += k == c->n_tokens;
    }
    return tf;
}

/* Document frequency of one word: in how many documents it occurs. */
static uint64_t word_df(const uint32_t *tfs, const doc_tokens *all, size_t n, const search_query *q,
                        const char *tok, size_t len)
{
    for (size_t c = 0; c < q->n; c++)   /* a word that is a clause of its own: counted already */
        if (q->clauses[c].n_tokens == 1 && q->clauses[c].lens[0] == len && memcmp(q->clauses[c].tokens[0], tok, len) == 0) {
            uint64_t df = 0;
            for (size_t d = 0; d < n; d++) df += tfs[d * q->n + c] > 0;
            return df;
        }
    uint64_t df = 0;
    for (size_t d = 0; d < n; d++) {
        int found = 0;
        for (size_t i = 0; i < all[d].n && !found; i++) found = token_is(&all[d], i, tok, len);
        df += found;
    }
    return df;
}

int search_eval(const search_query *q, const char *const *fields, size_t n_fields,
                const json_value *const *docs, size_t n, double *scores)
{
    size_t cells = n * q->n;
    doc_tokens *all = calloc(n ? n : 1, sizeof *all);
    uint32_t *tfs = calloc(cells ? cells : 1, sizeof *tfs);
    double *idf = calloc(q->n ? q->n : 1, sizeof *idf);
    int rc = all && tfs && idf ? 0 : HANU_ERR_NOMEM;
    char path[QUERY_MAX_PATH_BYTES + 1];
    uint64_t total = 0;
    for (size_t d = 0; d < n && rc == 0; d++) {
        path[0] = '\0';
        gather_text(&all[d], docs[d], path, 0, sizeof path, fields, n_fields, 1);
        rc = all[d].status;
        total += all[d].length;
        for (size_t c = 0; c < q->n && rc == 0; c++) tfs[d * q->n + c] = clause_tf(&all[d], &q->clauses[c]);
    }
    for (size_t c = 0; c < q->n && rc == 0; c++)
        for (uint32_t t = 0; t < q->clauses[c].n_tokens; t++) {
            uint64_t df = word_df(tfs, all, n, q, q->clauses[c].tokens[t], q->clauses[c].lens[t]);
            idf[c] += bm25_idf(n, df);
        }
    double avgdl = n ? (double)total / (double)n : 0;
    for (size_t d = 0; d < n && rc == 0; d++) {
        int has_must = 0, ok = 1, any = 0;
        double score = 0;
        for (size_t c = 0; c < q->n; c++) {
            const search_clause *cl = &q->clauses[c];
            uint32_t tf = tfs[d * q->n + c];
            if (cl->occur == SEARCH_MUST_NOT) { ok &= tf == 0; continue; }
            if (cl->occur == SEARCH_MUST) { has_must = 1; ok &= tf > 0; }
            if (tf == 0) continue;
            any = 1;
            double norm = avgdl > 0 ? all[d].length / avgdl : 1.0;
            score += idf[c] * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * norm));
        }
        scores[d] = ok && (has_must || any) ? score : -1;
    }
    for (size_t d = 0; all && d < n; d++) {
        hanu_buf_free(&all[d].text);
        free(all[d].v);
    }
    free(all);
    free(tfs);
    free(idf);
    return rc;
}

int search_doc_tfs(const search_query *q, const char *const *fields, size_t n_fields,
                   const json_value *doc, uint32_t *tfs, uint32_t *length)
{
    doc_tokens d = {0};
    char path[QUERY_MAX_PATH_BYTES + 1] = "";
    gather_text(&d, doc, path, 0, sizeof path, fields, n_fields, 1);
    for (size_t c = 0; c < q->n && d.status == 0; c++) tfs[c] = clause_tf(&d, &q->clauses[c]);
    *length = d.length;
    hanu_buf_free(&d.text);
    free(d.v);
    return d.status;
}
