/*
 * fuzz_search_query.c: libFuzzer target for the search-query parser and the
 * tokenizer (src/query/query.h, src/text/text.h). A parsed query has 1 to
 * SEARCH_MAX_CLAUSES clauses, at least one not excluded, each with 1 to
 * SEARCH_MAX_PHRASE_TOKENS tokens of 1 to TEXT_MAX_TOKEN_BYTES bytes of
 * valid UTF-8; a refusal is invalid_query with a "q: " message. The
 * tokenizer, run on the input directly, gives tokens of the same shape at
 * increasing positions, fewer than its position count. Parsed queries also
 * run through search_eval on fixed documents (scores -1 or finite, >= 0).
 */
#include "query/query.h"
#include "text/text.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

static const char *const docs_text[] = {
    "{\"_id\":\"a\",\"t\":\"The quick brown fox, don't\",\"n\":{\"s\":[\"quick dog\",\"caf\u00e9 3.14\"]}}",
    "{\"t\":\"\",\"x\":1}",
    "{\"t\":\"e mail a b c\"}",
};

/* search_eval on fixed documents: -1 or a finite score >= 0 each. */
static void check_eval(const search_query *q)
{
    json_doc *d[3];
    const json_value *roots[3];
    for (int i = 0; i < 3; i++) {
        if (json_doc_parse(docs_text[i], strlen(docs_text[i]), NULL, &d[i], NULL) != 0) abort();
        roots[i] = json_doc_root(d[i]);
    }
    double scores[3];
    static const char *const fields[] = { "n" };
    for (size_t nf = 0; nf <= 1; nf++) {
        assert(search_eval(q, fields, nf, roots, 3, scores) == 0);
        for (int i = 0; i < 3; i++) assert(scores[i] == -1 || (isfinite(scores[i]) && scores[i] >= 0));
    }
    for (int i = 0; i < 3; i++) json_doc_free(d[i]);
}

static void check_utf8(const char *s, size_t len)
{
    hanu_buf b = { 0 };
    assert(json_escape_string(&b, s, len) == 0);
    hanu_buf_free(&b);
}

typedef struct seen {
    uint32_t count;
    int64_t last_position;
} seen;

static int check_token(void *ctx, const text_token *t)
{
    seen *s = ctx;
    assert(t->len >= 1 && t->len <= TEXT_MAX_TOKEN_BYTES && strlen(t->bytes) <= t->len);
    assert((int64_t)t->position > s->last_position);
    check_utf8(t->bytes, t->len);
    s->last_position = t->position;
    s->count++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    search_query q;
    query_error err;
    int rc = search_query_parse(in, size, &q, &err);
    if (rc == 0) {
        assert(q.n >= 1 && q.n <= SEARCH_MAX_CLAUSES);
        int positive = 0;
        for (size_t i = 0; i < q.n; i++) {
            const search_clause *c = &q.clauses[i];
            assert(c->occur == SEARCH_SHOULD || c->occur == SEARCH_MUST || c->occur == SEARCH_MUST_NOT);
            positive |= c->occur != SEARCH_MUST_NOT;
            assert(c->n_tokens >= 1 && c->n_tokens <= SEARCH_MAX_PHRASE_TOKENS);
            for (uint32_t t = 0; t < c->n_tokens; t++) {
                assert(c->lens[t] >= 1 && c->lens[t] <= TEXT_MAX_TOKEN_BYTES);
                check_utf8(c->tokens[t], c->lens[t]);
            }
        }
        assert(positive);
        check_eval(&q);
        search_query_free(&q);
    } else {
        assert(rc == HANU_ERR_INVALID || rc == HANU_ERR_TOO_LARGE || rc == HANU_ERR_NOMEM);
        if (rc != HANU_ERR_NOMEM) {
            assert(strncmp(err.msg, "q: ", 3) == 0);
            check_utf8(err.msg, strlen(err.msg));
        }
    }
    seen s = { 0, -1 };
    uint32_t positions = 0;
    rc = text_tokenize(in, size, check_token, &s, &positions);
    assert(rc == 0 || rc == HANU_ERR_INVALID || rc == HANU_ERR_NOMEM || rc == HANU_ERR_TOO_LARGE);
    if (rc == 0) assert(s.count <= positions);
    return 0;
}
