/*
 * fuzz_search_query.c: libFuzzer target for the search-query parser and the
 * tokenizer (src/query/query.h, src/text/text.h). A parsed query has 1 to
 * SEARCH_MAX_CLAUSES clauses, at least one not excluded, each with 1 to
 * SEARCH_MAX_PHRASE_TOKENS tokens of 1 to TEXT_MAX_TOKEN_BYTES bytes of
 * valid UTF-8; a refusal is invalid_query with a "q: " message. The
 * tokenizer, run on the input directly, gives tokens of the same shape at
 * increasing positions, fewer than its position count.
 */
#include "query/query.h"
#include "text/text.h"

#include <assert.h>

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
