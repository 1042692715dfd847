/*
 * fuzz_filter.c: libFuzzer target for the filter parser and evaluator
 * (src/query/query.h). Every input is parsed as a filter: a failure must be
 * an invalid_query status with a message that starts with "filter" and is
 * valid UTF-8; a success must give a well-formed AST (kids after their
 * parent, in range; field clauses with a path; $in within its limit), must
 * evaluate to 0 or 1 on fixed documents and on the input itself, and
 * {"$not":<input>} must match exactly the other documents. Inputs that are
 * JSON also go through the sort and aggregation parsers (and aggs_eval).
 */
#include "query/query.h"

#include <assert.h>
#include <stdlib.h>

static const char *const docs_text[] = {
    "{\"_id\":\"a\",\"a\":1,\"b\":{\"c\":[1,\"x\",null,{\"d\":true}]},\"e\":\"\",\"f\":[[1],[]]}",
    "{\"_id\":\"b\",\"a\":[1,2.5,-3e2],\"a.b\":\"y\",\"b\":null}",
    "{}",
    "[1,{\"a\":2}]",
};

static void check_message(const query_error *err, const char *prefix)
{
    assert(strncmp(err->msg, prefix, strlen(prefix)) == 0);
    hanu_buf b = { 0 };
    assert(json_escape_string(&b, err->msg, strlen(err->msg)) == 0);    /* valid UTF-8 */
    hanu_buf_free(&b);
}

static void check_ast(const filter *f)
{
    size_t n;
    const filter_node *nodes = filter_nodes(f, &n);
    assert(n >= 1 && n <= FILTER_MAX_NODES);
    for (size_t i = 0; i < n; i++) {
        const filter_node *x = &nodes[i];
        switch (x->op) {
        case FILTER_AND: case FILTER_OR: case FILTER_NOR: case FILTER_NOT:
            assert(x->count == 0 || (x->first > i && x->first + x->count <= n));
            assert(x->op != FILTER_NOT || x->count == 1);
            break;
        case FILTER_IN: case FILTER_NIN:
            assert(x->operand && x->operand->type == JSON_ARRAY && json_len(x->operand) <= FILTER_MAX_IN_VALUES);
            /* fall through */
        default:
            assert(x->path && x->path_len >= 1 && x->path_len <= QUERY_MAX_PATH_BYTES);
            assert(x->op == FILTER_EXISTS || x->operand);
        }
    }
}

static void check_json_parsers(const char *in, size_t len, json_doc **roots_docs)
{
    json_doc *d;
    if (json_doc_parse(in, len, NULL, &d, NULL) != 0) return;
    const json_value *root = json_doc_root(d);
    query_error err;
    sort_spec s;
    int rc = sort_parse(root, "sort", &s, &err);
    if (rc == 0) {
        assert(s.n >= 1 && s.n <= SORT_MAX_KEYS);
        const json_value *keys[SORT_MAX_KEYS];
        for (size_t i = 0; i < HANU_ARRAY_LEN(docs_text); i++)
            if (sort_keys_of(&s, json_doc_root(roots_docs[i]), keys, &err) != 0) check_message(&err, "sort.");
    } else {
        check_message(&err, "sort");
    }
    aggs_spec a;
    rc = aggs_parse(in, root, "aggs", &a, &err);
    if (rc == 0) {
        const json_value *roots[HANU_ARRAY_LEN(docs_text)];
        for (size_t i = 0; i < HANU_ARRAY_LEN(docs_text); i++) roots[i] = json_doc_root(roots_docs[i]);
        hanu_buf out = { 0 };
        rc = aggs_eval(&a, roots, HANU_ARRAY_LEN(roots), &out, &err);
        if (rc == 0) assert(json_validate((const char *)out.data, out.len, NULL, NULL) == 0);
        else check_message(&err, "aggs");
        hanu_buf_free(&out);
        aggs_free(&a);
    } else {
        assert(rc == HANU_ERR_INVALID || rc == HANU_ERR_TOO_LARGE);
        check_message(&err, "aggs");
    }
    json_doc_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    json_doc *docs[HANU_ARRAY_LEN(docs_text)];
    for (size_t i = 0; i < HANU_ARRAY_LEN(docs_text); i++)
        if (json_doc_parse(docs_text[i], strlen(docs_text[i]), NULL, &docs[i], NULL) != 0) abort();

    filter *f = NULL;
    query_error err;
    int rc = filter_parse(in, size, "filter", &f, &err);
    if (rc == 0) {
        check_ast(f);
        int m[HANU_ARRAY_LEN(docs_text)];
        for (size_t i = 0; i < HANU_ARRAY_LEN(docs_text); i++) {
            m[i] = filter_match_value(f, json_doc_root(docs[i]));
            assert(m[i] == 0 || m[i] == 1);
        }
        int self = filter_match(f, in, size);
        assert(self == 0 || self == 1);
        hanu_buf neg = { 0 };
        filter *nf = NULL;
        if (hanu_buf_append(&neg, "{\"$not\":", 8) == 0 && hanu_buf_append(&neg, in, size) == 0 &&
            hanu_buf_append(&neg, "}", 1) == 0 &&
            filter_parse((const char *)neg.data, neg.len, "filter", &nf, NULL) == 0) {
            for (size_t i = 0; i < HANU_ARRAY_LEN(docs_text); i++)
                assert(filter_match_value(nf, json_doc_root(docs[i])) == !m[i]);
        }
        filter_free(nf);
        hanu_buf_free(&neg);
        filter_free(f);
    } else {
        assert(rc == HANU_ERR_INVALID || rc == HANU_ERR_TOO_LARGE || rc == HANU_ERR_NOMEM);
        if (rc != HANU_ERR_NOMEM) check_message(&err, "filter");
    }
    check_json_parsers(in, size, docs);
    for (size_t i = 0; i < HANU_ARRAY_LEN(docs_text); i++) json_doc_free(docs[i]);
    return 0;
}
