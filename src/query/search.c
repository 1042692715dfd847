/*
 * search.c: the search box language (`q`) and BM25. A query is split on
 * ASCII whitespace into pieces: `word`, `+word`, `-word`, `"a phrase"`,
 * `+"a phrase"`, `-"a phrase"`. Each piece goes through the same tokenizer
 * as the documents (text/text.h), so "Café" finds "CAFÉ"; a piece that
 * yields several tokens ("e-mail") is a phrase, one that yields none ("--")
 * is dropped.
 */
#include "query/query_internal.h"
#include "text/text.h"

#include <math.h>
#include <stdlib.h>

typedef struct piece_tokens {
    hanu_buf *text;                 /* token bytes, NUL-separated */
    size_t offs[SEARCH_MAX_PHRASE_TOKENS];
    size_t lens[SEARCH_MAX_PHRASE_TOKENS];
    uint32_t n;
    int too_many;
} piece_tokens;

static int collect_token(void *ctx, const text_token *tok)
{
    piece_tokens *pt = ctx;
    if (pt->n == SEARCH_MAX_PHRASE_TOKENS) { pt->too_many = 1; return 1; }
    pt->offs[pt->n] = pt->text->len;
    pt->lens[pt->n] = tok->len;
    pt->n++;
    return hanu_buf_append(pt->text, tok->bytes, tok->len + 1) ? HANU_ERR_NOMEM : 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Token offsets are kept in the clause's pointers while text grows, then fixed up. */
static int add_clause(search_query *out, size_t *cap, search_occur occur, const piece_tokens *pt)
{
    if (out->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        search_clause *c = realloc(out->clauses, nc * sizeof *c);
        if (!c) return HANU_ERR_NOMEM;
        out->clauses = c;
        *cap = nc;
    }
    search_clause *c = &out->clauses[out->n++];
    memset(c, 0, sizeof *c);
    c->occur = occur;
    c->n_tokens = pt->n;
    for (uint32_t i = 0; i < pt->n; i++) {
        c->tokens[i] = (const char *)(uintptr_t)pt->offs[i];
        c->lens[i] = pt->lens[i];
    }
    return 0;
}

static int parse_pieces(const char *q, size_t len, search_query *out, hanu_buf *text, query_error *err)
{
    size_t cap = 0, i = 0;
    while (i < len) {
        while (i < len && is_space(q[i])) i++;
        if (i == len) break;
        size_t at = i;
        search_occur occur = SEARCH_SHOULD;
        if (q[i] == '+' || q[i] == '-') occur = q[i++] == '+' ? SEARCH_MUST : SEARCH_MUST_NOT;
        size_t start = i, end;
        if (i < len && q[i] == '"') {
            const char *close = memchr(q + i + 1, '"', len - i - 1);
            if (!close) return query_fail(err, HANU_ERR_INVALID, "q", "unterminated phrase at byte %zu", at);
            start = i + 1;
            end = (size_t)(close - q);
            i = end + 1;
        } else {
            while (i < len && !is_space(q[i])) i++;
            end = i;
        }
        piece_tokens pt = { .text = text, .n = 0, .too_many = 0 };
        int rc = text_tokenize(q + start, end - start, collect_token, &pt, NULL);
        if (pt.too_many)
            return query_fail(err, HANU_ERR_TOO_LARGE, "q", "phrase at byte %zu has more than %d words",
                              at, SEARCH_MAX_PHRASE_TOKENS);
        if (rc == HANU_ERR_INVALID) return query_fail(err, rc, "q", "not valid UTF-8 at byte %zu", at);
        if (rc) return rc;
        if (pt.n == 0) continue;
        if (out->n == SEARCH_MAX_CLAUSES)
            return query_fail(err, HANU_ERR_TOO_LARGE, "q", "more than %d words and phrases", SEARCH_MAX_CLAUSES);
        if ((rc = add_clause(out, &cap, occur, &pt)) != 0) return rc;
    }
    return 0;
}

int search_query_parse(const char *q, size_t len, search_query *out, query_error *err)
{
    memset(out, 0, sizeof *out);
    if (len > SEARCH_MAX_QUERY_BYTES)
        return query_fail(err, HANU_ERR_TOO_LARGE, "q", "longer than %d bytes", SEARCH_MAX_QUERY_BYTES);
    hanu_buf text = { 0 };
    int rc = parse_pieces(q, len, out, &text, err);
    int positive = 0;
    for (size_t i = 0; rc == 0 && i < out->n; i++) positive |= out->clauses[i].occur != SEARCH_MUST_NOT;
    if (rc == 0 && !positive) rc = query_fail(err, HANU_ERR_INVALID, "q", "no words to search for");
    if (rc) {
        hanu_buf_free(&text);
        search_query_free(out);
        return rc;
    }
    out->text = (char *)text.data;      /* owned now; fix the offsets into pointers */
    for (size_t i = 0; i < out->n; i++)
        for (uint32_t t = 0; t < out->clauses[i].n_tokens; t++)
            out->clauses[i].tokens[t] = out->text + (uintptr_t)out->clauses[i].tokens[t];
    return 0;
}

void search_query_free(search_query *q)
{
    free(q->clauses);
    free(q->text);
    memset(q, 0, sizeof *q);
}

double bm25_idf(uint64_t n_docs, uint64_t df)
{
    double n = (double)n_docs, d = (double)df;
    return log(1.0 + (n - d + 0.5) / (d + 0.5));
}

double bm25_score(double tf, double dl, double avgdl, uint64_t n_docs, uint64_t df)
{
    if (tf <= 0 || n_docs == 0) return 0;
    double idf = bm25_idf(n_docs, df);
    double norm = avgdl > 0 ? dl / avgdl : 1.0;
    return idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * norm));
}
