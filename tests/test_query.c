/*
 * test_query.c: the query module's filters, sort and aggregations
 * (src/query/query.h) on one fixed data set of 30 documents with nested
 * objects, arrays, mixed types and missing fields. Every filter case lists
 * the exact ids it must match (worked out by hand from the rules in
 * docs/QUERY.md); every bad query its exact message. A randomized property
 * test then checks algebraic identities ($nor = not $or, $in = $or of $eq,
 * $not $gt against $lte on missing fields, ...) on thousands of generated
 * filters over the same documents.
 */
#include "query/query.h"
#include "test.h"

#include <stdint.h>

static const char *const dataset[] = {
    "{\"_id\":\"d01\",\"age\":30,\"kind\":\"user\",\"name\":\"ann\",\"tags\":[\"a\",\"b\"],\"addr\":{\"city\":\"Oslo\",\"zip\":\"0150\"}}",
    "{\"_id\":\"d02\",\"age\":25,\"kind\":\"user\",\"name\":\"bob\",\"tags\":[\"b\",\"c\"],\"addr\":{\"city\":\"Bergen\"}}",
    "{\"_id\":\"d03\",\"age\":\"30\",\"kind\":\"user\",\"name\":\"cid\",\"tags\":[]}",
    "{\"_id\":\"d04\",\"age\":null,\"kind\":\"admin\",\"name\":\"dan\",\"tags\":[\"a\"],\"addr\":{\"city\":\"Oslo\"}}",
    "{\"_id\":\"d05\",\"kind\":\"admin\",\"name\":\"eve\",\"tags\":\"a\"}",
    "{\"_id\":\"d06\",\"age\":41.5,\"kind\":\"user\",\"name\":\"fay\",\"tags\":[\"c\",[\"a\"]],\"items\":[{\"sku\":\"x1\",\"qty\":2},{\"sku\":\"x2\",\"qty\":5}]}",
    "{\"_id\":\"d07\",\"age\":30.0,\"kind\":\"bot\",\"name\":\"gus\",\"items\":[{\"sku\":\"x2\",\"qty\":1},{\"sku\":\"x3\"}]}",
    "{\"_id\":\"d08\",\"age\":[20,35],\"kind\":\"user\",\"name\":\"hal\",\"items\":[]}",
    "{\"_id\":\"d09\",\"age\":9007199254740993,\"kind\":\"user\",\"name\":\"ivy\"}",
    "{\"_id\":\"d10\",\"age\":9007199254740992.0,\"kind\":\"user\",\"name\":\"jon\"}",
    "{\"_id\":\"d11\",\"age\":true,\"kind\":\"bot\",\"name\":\"kim\"}",
    "{\"_id\":\"d12\",\"age\":false,\"kind\":\"bot\",\"name\":\"lee\",\"tags\":[null]}",
    "{\"_id\":\"d13\",\"age\":-5,\"kind\":\"user\",\"name\":\"max\",\"a.b\":1}",
    "{\"_id\":\"d14\",\"age\":0,\"kind\":\"user\",\"name\":\"ned\",\"a\":{\"b\":1}}",
    "{\"_id\":\"d15\",\"age\":1e2,\"kind\":\"user\",\"name\":\"ola\",\"a\":{\"b\":[1,2]}}",
    "{\"_id\":\"d16\",\"age\":-0.5,\"kind\":\"guest\",\"name\":\"pat\",\"a\":[{\"b\":2},{\"c\":3}]}",
    "{\"_id\":\"d17\",\"age\":100,\"kind\":\"guest\",\"name\":\"quy\",\"a\":{\"b\":null}}",
    "{\"_id\":\"d18\",\"age\":\"abc\",\"kind\":\"guest\",\"name\":\"ray\",\"a\":{\"b\":{\"c\":1}}}",
    "{\"_id\":\"d19\",\"age\":[],\"kind\":\"guest\",\"name\":\"sam\",\"tags\":[\"a\",\"a\"]}",
    "{\"_id\":\"d20\",\"age\":[null,5],\"kind\":\"guest\",\"name\":\"tia\"}",
    "{\"_id\":\"d21\",\"age\":{\"v\":1},\"kind\":\"guest\",\"name\":\"uma\"}",
    "{\"_id\":\"d22\",\"age\":\"\",\"kind\":null,\"name\":\"vic\"}",
    "{\"_id\":\"d23\",\"age\":1,\"name\":\"wes\",\"tags\":[[\"a\",\"b\"]],\"n\":{\"deep\":{\"er\":{\"x\":\"y\"}}}}",
    "{\"_id\":\"d24\",\"age\":2,\"kind\":\"user\",\"name\":\"xia\",\"tags\":[\"A\"]}",
    "{\"_id\":\"d25\",\"age\":3,\"kind\":\"User\",\"name\":\"yan\",\"score\":1.5}",
    "{\"_id\":\"d26\",\"age\":4,\"kind\":\"user\",\"name\":\"zed\",\"score\":-2}",
    "{\"_id\":\"d27\",\"age\":5,\"kind\":\"user\",\"name\":\"1\",\"score\":1}",
    "{\"_id\":\"d28\",\"age\":6,\"kind\":\"user\",\"name\":1,\"score\":1.0}",
    "{\"_id\":\"d29\",\"age\":7,\"kind\":\"user\",\"name\":true,\"score\":\"1\"}",
    "{\"_id\":\"d30\",\"age\":8,\"kind\":\"user\",\"name\":[1,\"1\"],\"score\":[1,2,3]}",
};
#define N_DOCS ((int)HANU_ARRAY_LEN(dataset))

static json_doc *docs[N_DOCS];
static const json_value *roots[N_DOCS];

static void load_dataset(void)
{
    for (int i = 0; i < N_DOCS; i++) {
        if (json_doc_parse(dataset[i], strlen(dataset[i]), NULL, &docs[i], NULL) != 0) {
            fprintf(stderr, "dataset document %d is not JSON\n", i + 1);
            exit(2);
        }
        roots[i] = json_doc_root(docs[i]);
    }
}

/* The ids a filter matches, "d01 d03 ...". */
static void matching_ids(const filter *f, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < N_DOCS; i++)
        if (filter_match_value(f, roots[i]) == 1)
            len += (size_t)snprintf(out + len, cap - len, "%sd%02d", len ? " " : "", i + 1);
}

/* "!d04 d05" means every document but those. */
static void expand_expected(const char *want, char *out, size_t cap)
{
    if (want[0] != '!') { snprintf(out, cap, "%s", want); return; }
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < N_DOCS; i++) {
        char id[16];
        snprintf(id, sizeof id, "d%02d", i + 1);
        if (strstr(want, id)) continue;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", id);
    }
}

static const struct { const char *filter, *ids; } cases[] = {
    /* implicit equality, typed */
    { "{\"kind\":\"user\"}", "d01 d02 d03 d06 d08 d09 d10 d13 d14 d15 d24 d26 d27 d28 d29 d30" },
    { "{\"age\":30}", "d01 d07" },
    { "{\"age\":\"30\"}", "d03" },
    { "{\"age\":null}", "d04 d05 d20" },
    { "{\"kind\":null}", "d22 d23" },
    { "{\"name\":1}", "d28 d30" },
    { "{\"score\":1}", "d27 d28 d30" },
    { "{\"age\":9007199254740992}", "d10" },
    /* arrays: any element, or the whole array; one level only */
    { "{\"tags\":\"a\"}", "d01 d04 d05 d19" },
    { "{\"tags\":[\"a\",\"b\"]}", "d01 d23" },
    { "{\"tags\":[]}", "d03" },
    { "{\"age\":[20,35]}", "d08" },
    { "{\"age\":{\"$eq\":[]}}", "d19" },
    /* dotted paths, embedded documents, positions, literal dotted keys */
    { "{\"addr.city\":\"Oslo\"}", "d01 d04" },
    { "{\"addr\":{\"city\":\"Oslo\"}}", "d04" },
    { "{\"a.b\":1}", "d13 d14 d15" },
    { "{\"a.b\":null}", "!d13 d14 d15 d18" },
    { "{\"a.b.c\":1}", "d18" },
    { "{\"items.sku\":\"x2\"}", "d06 d07" },
    { "{\"items.0.sku\":\"x2\"}", "d07" },
    { "{\"items.qty\":{\"$gt\":1}}", "d06" },
    { "{\"n.deep.er.x\":\"y\"}", "d23" },
    { "{\"age\":{\"v\":1}}", "d21" },
    { "{\"age.v\":1}", "d21" },
    /* ranges compare within one type; arrays by any element */
    { "{\"age\":{\"$gt\":30}}", "d06 d08 d09 d10 d15 d17" },
    { "{\"age\":{\"$gte\":30}}", "d01 d06 d07 d08 d09 d10 d15 d17" },
    { "{\"age\":{\"$lt\":1}}", "d13 d14 d16" },
    { "{\"age\":{\"$lte\":1}}", "d13 d14 d16 d23" },
    { "{\"age\":{\"$gt\":\"2\"}}", "d03 d18" },
    { "{\"age\":{\"$lt\":\"a\"}}", "d03 d22" },
    { "{\"age\":{\"$gt\":false}}", "d11" },
    { "{\"age\":{\"$gte\":null}}", "d04 d05 d20" },
    { "{\"age\":{\"$gt\":null}}", "" },
    { "{\"age\":{\"$gt\":9007199254740992}}", "d09" },
    { "{\"age\":{\"$lt\":9007199254740993}}",
      "d01 d02 d06 d07 d08 d10 d13 d14 d15 d16 d17 d20 d23 d24 d25 d26 d27 d28 d29 d30" },
    { "{\"age\":{\"$gt\":20,\"$lt\":30}}", "d02 d08" },
    { "{\"age\":{\"$gte\":4,\"$lte\":6}}", "d20 d26 d27 d28" },
    { "{\"age\":{\"$lte\":5}}", "d13 d14 d16 d20 d23 d24 d25 d26 d27" },
    /* negations match missing fields */
    { "{\"kind\":{\"$ne\":\"user\"}}", "d04 d05 d07 d11 d12 d16 d17 d18 d19 d20 d21 d22 d23 d25" },
    { "{\"age\":{\"$ne\":null}}", "!d04 d05 d20" },
    { "{\"tags\":{\"$nin\":[\"a\",\"b\"]}}", "!d01 d02 d04 d05 d19" },
    { "{\"age\":{\"$not\":{\"$gt\":5}}}", "d03 d04 d05 d11 d12 d13 d14 d16 d18 d19 d20 d21 d22 d23 d24 d25 d26 d27" },
    { "{\"items.qty\":{\"$exists\":false}}", "!d06 d07" },
    /* $in */
    { "{\"tags\":{\"$in\":[\"c\",null]}}",
      "d02 d06 d07 d08 d09 d10 d11 d12 d13 d14 d15 d16 d17 d18 d20 d21 d22 d25 d26 d27 d28 d29 d30" },
    { "{\"name\":{\"$in\":[\"1\",true]}}", "d27 d29 d30" },
    { "{\"score\":{\"$in\":[]}}", "" },
    { "{\"score\":{\"$nin\":[]}}", "!" },
    /* $exists */
    { "{\"score\":{\"$exists\":true}}", "d25 d26 d27 d28 d29 d30" },
    { "{\"age\":{\"$exists\":false}}", "d05" },
    { "{\"kind\":{\"$exists\":true}}", "!d23" },
    { "{\"items.qty\":{\"$exists\":true}}", "d06 d07" },
    /* logical operators and combinations */
    { "{}", "!" },
    { "{\"$or\":[{\"kind\":\"admin\"},{\"age\":{\"$gt\":90}}]}", "d04 d05 d09 d10 d15 d17" },
    { "{\"$and\":[{\"kind\":\"user\"},{\"age\":{\"$lt\":3}}]}", "d13 d14 d24" },
    { "{\"$nor\":[{\"kind\":\"user\"},{\"kind\":\"guest\"}]}", "d04 d05 d07 d11 d12 d22 d23 d25" },
    { "{\"$not\":{\"kind\":\"user\"}}", "d04 d05 d07 d11 d12 d16 d17 d18 d19 d20 d21 d22 d23 d25" },
    { "{\"kind\":\"user\",\"age\":{\"$gte\":5,\"$lt\":8}}", "d27 d28 d29" },
    { "{\"$or\":[{\"a.b\":2},{\"a.c\":3}]}", "d15 d16" },
    { "{\"$and\":[{\"$or\":[{\"kind\":\"bot\"},{\"kind\":\"admin\"}]},{\"$nor\":[{\"tags\":\"a\"}]}]}", "d07 d11 d12" },
    { "{\"kind\":{\"$in\":[\"user\",\"User\"]},\"name\":{\"$gt\":\"x\"}}", "d24 d25 d26" },
    { "{\"$or\":[{\"age\":{\"$exists\":false}},{\"age\":null}]}", "d04 d05 d20" },
};

static void test_filter_cases(void)
{
    for (size_t i = 0; i < HANU_ARRAY_LEN(cases); i++) {
        filter *f = NULL;
        query_error err;
        int rc = filter_parse(cases[i].filter, strlen(cases[i].filter), "filter", &f, &err);
        if (rc != 0) {
            fprintf(stderr, "  case %zu %s: parse failed: %s\n", i, cases[i].filter, err.msg);
            CHECK(rc == 0);
            continue;
        }
        char got[512], want[512];
        matching_ids(f, got, sizeof got);
        expand_expected(cases[i].ids, want, sizeof want);
        if (strcmp(got, want) != 0) {
            fprintf(stderr, "  case %zu %s\n    want %s\n    got  %s\n", i, cases[i].filter, want, got);
            CHECK(strcmp(got, want) == 0);
        }
        filter_free(f);
    }
}

/* Positions and null on arrays (docs/QUERY.md, "Arrays, positions and null"),
 * MongoDB's rules: a numeric segment picks an element that is then compared
 * whole, never looked into when it is an array itself; {"a":null} matches a
 * missing a, null and an array holding null, not [] nor [1]. */
static void test_positions_and_null(void)
{
    static const char *const docs_pn[] = {
        "{\"_id\":\"p1\",\"a\":[[42]]}",
        "{\"_id\":\"p2\",\"a\":[42]}",
        "{\"_id\":\"p3\",\"a\":[[42],42]}",
        "{\"_id\":\"p4\",\"a\":[{\"0\":42}]}",
        "{\"_id\":\"n1\"}",
        "{\"_id\":\"n2\",\"a\":null}",
        "{\"_id\":\"n3\",\"a\":[null]}",
        "{\"_id\":\"n4\",\"a\":[]}",
        "{\"_id\":\"n5\",\"a\":[1]}",
    };
    static const struct { const char *filter, *ids; } pn[] = {
        { "{\"a.0\":42}", "p2 p4" },
        { "{\"a.0\":[42]}", "p1 p3" },
        { "{\"a.0\":{\"$gt\":40}}", "p2 p4" },
        { "{\"a.0\":{\"$in\":[42,7]}}", "p2 p4" },
        { "{\"a.0\":{\"$ne\":42}}", "p1 p3 n1 n2 n3 n4 n5" },
        { "{\"a.0.0\":42}", "p1 p3 p4" },
        { "{\"a\":42}", "p2 p3" },
        { "{\"a\":[42]}", "p1 p2 p3" },
        { "{\"a\":null}", "n1 n2 n3" },
        { "{\"a\":{\"$ne\":null}}", "p1 p2 p3 p4 n4 n5" },
        { "{\"a\":{\"$in\":[null]}}", "n1 n2 n3" },
        { "{\"a\":{\"$gte\":null}}", "n1 n2 n3" },
        { "{\"a\":{\"$exists\":true}}", "p1 p2 p3 p4 n2 n3 n4 n5" },
    };
    for (size_t i = 0; i < HANU_ARRAY_LEN(pn); i++) {
        filter *f = NULL;
        query_error err;
        REQUIRE(filter_parse(pn[i].filter, strlen(pn[i].filter), "filter", &f, &err) == HANU_OK);
        char got[256] = "";
        size_t n = 0;
        for (size_t d = 0; d < HANU_ARRAY_LEN(docs_pn); d++) {
            int m = filter_match(f, docs_pn[d], strlen(docs_pn[d]));
            CHECK(m == 0 || m == 1);
            if (m == 1) n += (size_t)snprintf(got + n, sizeof got - n, "%s%.2s", n ? " " : "", docs_pn[d] + 8);
        }
        if (strcmp(got, pn[i].ids) != 0) {
            fprintf(stderr, "  %s\n    want %s\n    got  %s\n", pn[i].filter, pn[i].ids, got);
            CHECK(strcmp(got, pn[i].ids) == 0);
        }
        filter_free(f);
    }
}

static void test_filter_match_raw_bytes(void)
{
    filter *f;
    REQUIRE(filter_parse("{\"a\":1}", 7, "filter", &f, NULL) == 0);
    CHECK_EQ(filter_match(f, "{\"a\":[0,1]}", 11), 1);
    CHECK_EQ(filter_match(f, "{\"a\":2}", 7), 0);
    CHECK_EQ(filter_match(f, "{\"a\":", 5), HANU_ERR_INVALID);
    filter_free(f);
}

/* The HTTP layer's use: one request body, its DOM, each part parsed from it. */
static void test_parse_from_request_body(void)
{
    const char *body = "{\"filter\":{\"kind\":\"bot\",\"age\":{\"$exists\":true}},\"sort\":[{\"name\":-1}],"
                       "\"aggs\":{\"k\":{\"terms\":{\"field\":\"kind\"},\"filter\":{\"x\":{\"$bad\":1}}}}}";
    json_doc *d;
    REQUIRE(json_doc_parse(body, strlen(body), NULL, &d, NULL) == 0);
    const json_value *root = json_doc_root(d);
    filter *f;
    query_error err;
    REQUIRE(filter_parse_value(body, json_get(root, "filter"), "filter", &f, &err) == 0);
    char got[256];
    matching_ids(f, got, sizeof got);
    CHECK(strcmp(got, "d07 d11 d12") == 0);
    sort_spec s;
    CHECK_EQ(sort_parse(json_get(root, "sort"), "sort", &s, &err), 0);
    CHECK(s.n == 1 && strcmp(s.keys[0].path, "name") == 0 && s.keys[0].descending);
    aggs_spec a;
    CHECK_EQ(aggs_parse(body, json_get(root, "aggs"), "aggs", &a, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "aggs.k.filter.x: unknown operator $bad") == 0);
    json_doc_free(d);
    /* the filter owns its bytes: it still works after the body's DOM is gone */
    CHECK_EQ(filter_match(f, dataset[6], strlen(dataset[6])), 1);
    filter_free(f);
}

static void test_filter_ast_shape(void)
{
    const char *q = "{\"a\":{\"$gt\":1,\"$lt\":5},\"$or\":[{\"b\":2},{\"c\":{\"$in\":[1,2]}}]}";
    filter *f;
    REQUIRE(filter_parse(q, strlen(q), "filter", &f, NULL) == 0);
    size_t n;
    const filter_node *nodes = filter_nodes(f, &n);
    CHECK_EQ(n, 7);
    CHECK_EQ(nodes[0].op, FILTER_AND);
    CHECK_EQ(nodes[0].count, 2);
    const filter_node *a = &nodes[nodes[0].first];
    CHECK_EQ(a->op, FILTER_AND);
    CHECK_EQ(nodes[a->first].op, FILTER_GT);
    CHECK(strcmp(nodes[a->first].path, "a") == 0);
    CHECK_EQ(nodes[a->first + 1].op, FILTER_LT);
    const filter_node *or = &nodes[nodes[0].first + 1];
    CHECK_EQ(or->op, FILTER_OR);
    CHECK_EQ(nodes[or->first].op, FILTER_EQ);
    CHECK_EQ(nodes[or->first + 1].op, FILTER_IN);
    CHECK_EQ(json_len(nodes[or->first + 1].operand), 2);
    filter_free(f);
}

static int parse_error(const char *q, char *msg, size_t cap)
{
    filter *f = NULL;
    query_error err = { "" };
    int rc = filter_parse(q, strlen(q), "filter", &f, &err);
    snprintf(msg, cap, "%s", err.msg);
    filter_free(f);
    return rc;
}

static void check_error(const char *q, int want_rc, const char *want_msg)
{
    char msg[QUERY_ERROR_MSG_MAX];
    int rc = parse_error(q, msg, sizeof msg);
    if (rc != want_rc || strcmp(msg, want_msg) != 0) {
        fprintf(stderr, "  %.80s\n    want %d \"%s\"\n    got  %d \"%s\"\n", q, want_rc, want_msg, rc, msg);
        test_current_failed = 1;
    }
}

static const struct { const char *filter; int rc; const char *msg; } error_cases[] = {
    { "{\"$and\":[{\"age\":1},{\"age\":{\"$foo\":1}}]}", HANU_ERR_INVALID,
      "filter.$and[1].age: unknown operator $foo" },
    { "{\"$foo\":1}", HANU_ERR_INVALID,
      "filter: unknown operator $foo" },
    { "[1]", HANU_ERR_INVALID,
      "filter: must be a filter object, not an array" },
    { "{\"$and\":[]}", HANU_ERR_INVALID,
      "filter.$and: needs a non-empty array of filter objects" },
    { "{\"$or\":{\"a\":1}}", HANU_ERR_INVALID,
      "filter.$or: needs a non-empty array of filter objects" },
    { "{\"$or\":[{},1]}", HANU_ERR_INVALID,
      "filter.$or[1]: must be a filter object, not a number" },
    { "{\"$not\":[]}", HANU_ERR_INVALID,
      "filter.$not: needs a filter object, not an array" },
    { "{\"age\":{\"$gt\":[1]}}", HANU_ERR_INVALID,
      "filter.age.$gt: operand must be a number, string, boolean or null, not an array" },
    { "{\"age\":{\"$in\":5}}", HANU_ERR_INVALID,
      "filter.age.$in: needs an array, not a number" },
    { "{\"age\":{\"$exists\":1}}", HANU_ERR_INVALID,
      "filter.age.$exists: needs true or false, not a number" },
    { "{\"age\":{\"$not\":{\"x\":1}}}", HANU_ERR_INVALID,
      "filter.age.$not: needs an object of operators, not a filter object" },
    { "{\"age\":{\"$not\":{\"$gt\":{\"x\":1}}}}", HANU_ERR_INVALID,
      "filter.age.$not.$gt: operand must be a number, string, boolean or null, not an object" },
    { "{\"age\":{\"$gt\":1,\"x\":2}}", HANU_ERR_INVALID,
      "filter.age: x is not an operator (an object with operators holds only operators)" },
    { "{\"a..b\":1}", HANU_ERR_INVALID,
      "filter.a..b: empty segment in field path" },
    { "{\"a.\":1}", HANU_ERR_INVALID,
      "filter.a.: empty segment in field path" },
    { "{\"\":1}", HANU_ERR_INVALID,
      "filter.: empty field path" },
    { "{\"a.$b\":1}", HANU_ERR_INVALID,
      "filter.a.$b: a field path segment cannot start with $" },
    { "{\"a\":", HANU_ERR_INVALID,
      "filter: unexpected end of input" },
};

static void test_filter_errors(void)
{
    for (size_t i = 0; i < HANU_ARRAY_LEN(error_cases); i++)
        check_error(error_cases[i].filter, error_cases[i].rc, error_cases[i].msg);

    /* limits, each a named constant */
    hanu_buf b = { 0 };
    for (int i = 0; i <= FILTER_MAX_DEPTH; i++) hanu_buf_append(&b, "{\"$or\":[", 8);
    hanu_buf_append(&b, "{\"a\":1}", 7);
    for (int i = 0; i <= FILTER_MAX_DEPTH; i++) hanu_buf_append(&b, "]}", 2);
    hanu_buf_append(&b, "", 1);
    char want[QUERY_ERROR_MSG_MAX];
    check_error((char *)b.data, HANU_ERR_TOO_LARGE,
                "filter.$or[0].$or[0].$or[0].$or[0].$or[0].$or[0].$or[0].$or[0].$or[0].$or[0].$or[0].$or[0]"
                ".$or[0].$or[0].$or[0].$or[0].$or: filter nested deeper than 16 levels");
    b.len = 0;
    hanu_buf_append(&b, "{\"$or\":[", 8);
    for (int i = 0; i < FILTER_MAX_NODES; i++) hanu_buf_append(&b, i ? ",{\"a\":1}" : "{\"a\":1}", i ? 8 : 7);
    hanu_buf_append(&b, "]}", 3);
    snprintf(want, sizeof want, "filter.$or: more than %d clauses in the filter", FILTER_MAX_NODES);
    check_error((char *)b.data, HANU_ERR_TOO_LARGE, want);
    b.len = 0;
    hanu_buf_append(&b, "{\"a\":{\"$in\":[", 13);
    for (int i = 0; i <= FILTER_MAX_IN_VALUES; i++) hanu_buf_append(&b, i ? ",1" : "1", i ? 2 : 1);
    hanu_buf_append(&b, "]}}", 4);
    snprintf(want, sizeof want, "filter.a.$in: more than %d values", FILTER_MAX_IN_VALUES);
    check_error((char *)b.data, HANU_ERR_TOO_LARGE, want);
    b.len = 0;
    hanu_buf_append(&b, "{\"", 2);
    for (int i = 0; i <= QUERY_MAX_PATH_BYTES; i++) hanu_buf_append(&b, "p", 1);
    hanu_buf_append(&b, "\":1}", 5);
    char msg[QUERY_ERROR_MSG_MAX];
    CHECK_EQ(parse_error((char *)b.data, msg, sizeof msg), HANU_ERR_TOO_LARGE);
    CHECK(strstr(msg, ": field path longer than 256 bytes") != NULL);
    hanu_buf_free(&b);

    /* exactly at the limits is fine */
    b = (hanu_buf){ 0 };
    hanu_buf_append(&b, "{\"a\":{\"$in\":[", 13);
    for (int i = 0; i < FILTER_MAX_IN_VALUES; i++) hanu_buf_append(&b, i ? ",1" : "1", i ? 2 : 1);
    hanu_buf_append(&b, "]}}", 4);
    CHECK_EQ(parse_error((char *)b.data, msg, sizeof msg), 0);
    hanu_buf_free(&b);
}

/* ---- randomized identities ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static const char *const rand_paths[] = { "age", "kind", "name", "tags", "score", "a.b", "items.qty", "addr.city",
                                          "missing", "items.sku" };
static const char *const rand_values[] = { "1", "30", "5", "-0.5", "1e2", "\"1\"", "\"a\"", "\"user\"", "\"Oslo\"",
                                           "null", "true", "false", "\"x2\"", "\"\"", "[]", "[\"a\",\"b\"]",
                                           "9007199254740993", "2", "\"abc\"", "0" };
static const char *const rand_scalars[] = { "1", "30", "5", "-0.5", "\"1\"", "\"a\"", "\"user\"", "true", "false",
                                            "\"x2\"", "2", "\"abc\"", "0", "100" };

static const char *pick(const char *const *v, size_t n) { return v[rnd((uint32_t)n)]; }
#define PICK(a) pick(a, HANU_ARRAY_LEN(a))

/* One random field clause as JSON text. */
static void rand_clause(char *out, size_t cap)
{
    static const char *const ops[] = { "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists" };
    const char *path = PICK(rand_paths);
    const char *op = PICK(ops);
    if (strcmp(op, "$exists") == 0)
        snprintf(out, cap, "{\"%s\":{\"$exists\":%s}}", path, rnd(2) ? "true" : "false");
    else if (strcmp(op, "$in") == 0 || strcmp(op, "$nin") == 0)
        snprintf(out, cap, "{\"%s\":{\"%s\":[%s,%s]}}", path, op, PICK(rand_values), PICK(rand_values));
    else if (op[1] == 'g' || op[1] == 'l')
        snprintf(out, cap, "{\"%s\":{\"%s\":%s}}", path, op, PICK(rand_scalars));
    else
        snprintf(out, cap, "{\"%s\":{\"%s\":%s}}", path, op, PICK(rand_values));
}

/* Matches of a filter text over the data set as a bit mask (30 documents). */
static uint32_t mask_of(const char *q)
{
    filter *f;
    query_error err;
    if (filter_parse(q, strlen(q), "filter", &f, &err) != 0) {
        fprintf(stderr, "  generated filter did not parse: %s: %s\n", q, err.msg);
        test_current_failed = 1;
        return 0xFFFFFFFFu;
    }
    uint32_t m = 0;
    for (int i = 0; i < N_DOCS; i++) m |= (uint32_t)(filter_match_value(f, roots[i]) == 1) << i;
    filter_free(f);
    return m;
}

#define ALL_DOCS ((1u << N_DOCS) - 1)

static void expect_mask(uint32_t got, uint32_t want, const char *what, const char *q)
{
    if (got != want) {
        fprintf(stderr, "  identity %s fails on %s (got %08x want %08x)\n", what, q, got, want);
        test_current_failed = 1;
    }
}

/* A random filter tree (as text) and, computed from its parts, the mask it must match. */
static uint32_t rand_tree(char *out, size_t cap, int depth)
{
    int kind = depth >= 3 ? 0 : (int)rnd(5);
    if (kind == 0) {
        rand_clause(out, cap);
        return mask_of(out);
    }
    static const char *const names[] = { "", "$and", "$or", "$nor", "$not" };
    size_t len = 0;
    uint32_t m = kind == 1 ? ALL_DOCS : 0;
    int n = kind == 4 ? 1 : 1 + (int)rnd(3);
    len += (size_t)snprintf(out, cap, kind == 4 ? "{\"$not\":" : "{\"%s\":[", names[kind]);
    for (int i = 0; i < n && len < cap; i++) {
        if (i) out[len++] = ',';
        uint32_t k = rand_tree(out + len, cap - len, depth + 1);
        len += strlen(out + len);
        if (kind == 1) m &= k;
        else m |= k;
    }
    snprintf(out + len, cap - len, kind == 4 ? "}" : "]}");
    return kind == 3 || kind == 4 ? ~m & ALL_DOCS : m;
}

static void test_filter_identities(void)
{
    char q[4096], a[512], b[512];
    for (int iter = 0; iter < 3000 && !test_current_failed; iter++) {
        /* composition: a tree matches what its parts say */
        uint32_t want = rand_tree(q, sizeof q, 0);
        expect_mask(mask_of(q), want, "tree", q);

        rand_clause(a, sizeof a);
        rand_clause(b, sizeof b);
        uint32_t ma = mask_of(a), mb = mask_of(b);
        snprintf(q, sizeof q, "{\"$nor\":[%s,%s]}", a, b);
        uint32_t nor = mask_of(q);
        snprintf(q, sizeof q, "{\"$or\":[%s,%s]}", a, b);
        expect_mask(nor, ~mask_of(q) & ALL_DOCS, "$nor = not $or", q);
        snprintf(q, sizeof q, "{\"$and\":[%s,%s]}", a, b);
        expect_mask(mask_of(q), ma & mb, "$and", q);

        const char *p = PICK(rand_paths), *v1 = PICK(rand_values), *v2 = PICK(rand_values);
        const char *s = PICK(rand_scalars);
        snprintf(q, sizeof q, "{\"%s\":{\"$in\":[%s,%s]}}", p, v1, v2);
        uint32_t in = mask_of(q);
        snprintf(q, sizeof q, "{\"$or\":[{\"%s\":{\"$eq\":%s}},{\"%s\":{\"$eq\":%s}}]}", p, v1, p, v2);
        expect_mask(in, mask_of(q), "$in = $or of $eq", q);
        snprintf(q, sizeof q, "{\"%s\":{\"$nin\":[%s,%s]}}", p, v1, v2);
        expect_mask(mask_of(q), ~in & ALL_DOCS, "$nin = not $in", q);
        snprintf(q, sizeof q, "{\"%s\":%s}", p, v1);
        uint32_t eq = mask_of(q);
        snprintf(q, sizeof q, "{\"%s\":{\"$ne\":%s}}", p, v1);
        expect_mask(mask_of(q), ~eq & ALL_DOCS, "$ne = not $eq", q);

        /* ranges: $gte = $gt or $eq (non-null scalar); a two-operator object is their $and */
        snprintf(q, sizeof q, "{\"%s\":{\"$gt\":%s}}", p, s);
        uint32_t gt = mask_of(q);
        snprintf(q, sizeof q, "{\"%s\":{\"$eq\":%s}}", p, s);
        uint32_t eqs = mask_of(q);
        snprintf(q, sizeof q, "{\"%s\":{\"$gte\":%s}}", p, s);
        expect_mask(mask_of(q), gt | eqs, "$gte = $gt or $eq", q);
        snprintf(q, sizeof q, "{\"%s\":{\"$lte\":%s}}", p, s);
        uint32_t lte = mask_of(q);
        snprintf(q, sizeof q, "{\"%s\":{\"$gt\":%s,\"$lte\":%s}}", p, s, s);
        expect_mask(mask_of(q), gt & lte, "operator object = $and", q);

        /* $not $gt differs from $lte exactly on the documents with no value of the operand's type */
        snprintf(q, sizeof q, "{\"%s\":{\"$not\":{\"$gt\":%s}}}", p, s);
        uint32_t not_gt = mask_of(q);
        expect_mask(not_gt, ~gt & ALL_DOCS, "$not $gt = not $gt", q);
        CHECK((lte & ~not_gt) == (lte & gt));   /* $lte and $gt can both hold only via different array elements */
        snprintf(q, sizeof q, "{\"%s\":{\"$exists\":false}}", p);
        uint32_t missing = mask_of(q);
        expect_mask(not_gt & missing, missing, "$not $gt matches missing", q);
        expect_mask(lte & missing, 0, "$lte never matches missing", q);
    }
}

/* ---- sort ---- */

static void collect_values(const json_value *v, const json_value **out, size_t *n, size_t cap)
{
    if (*n < cap) out[(*n)++] = v;
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT)
        for (size_t i = 0; i < v->u.kids.n; i++) collect_values(&v->u.kids.items[i], out, n, cap);
}

/* query_value_compare is a total order over every value of the data set
 * (documents, their members and elements): antisymmetric and transitive,
 * and equality is what $eq uses. */
static void test_value_order_is_total(void)
{
    static const json_value *vals[400];
    size_t n = 0;
    for (int i = 0; i < N_DOCS; i++) collect_values(roots[i], vals, &n, HANU_ARRAY_LEN(vals));
    REQUIRE(n > 200 && n < HANU_ARRAY_LEN(vals));
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            int ab = query_value_compare(vals[a], vals[b]);
            if (ab != -query_value_compare(vals[b], vals[a])) { CHECK(!"antisymmetric"); return; }
            if ((ab == 0) != query_value_equal(vals[a], vals[b])) { CHECK(!"equal"); return; }
            for (size_t c = 0; c < n; c += 3) {
                int bc = query_value_compare(vals[b], vals[c]);
                if (ab <= 0 && bc <= 0 && query_value_compare(vals[a], vals[c]) > 0) { CHECK(!"transitive"); return; }
            }
        }
    CHECK_EQ(query_value_compare(NULL, vals[0]), -1);     /* missing sorts first, before any document */
}

static int sort_error(const char *spec, char *msg, size_t cap)
{
    json_doc *d;
    if (json_doc_parse(spec, strlen(spec), NULL, &d, NULL) != 0) return 99;
    sort_spec s;
    query_error err = { "" };
    int rc = sort_parse(json_doc_root(d), "sort", &s, &err);
    snprintf(msg, cap, "%s", err.msg);
    json_doc_free(d);
    return rc;
}

typedef struct sortable {
    const json_value *keys[SORT_MAX_KEYS];
    const char *id;
    size_t id_len;
} sortable;

static const sort_spec *cur_spec;
static int cmp_sortable(const void *x, const void *y)
{
    const sortable *a = x, *b = y;
    return sort_compare(cur_spec, a->keys, a->id, a->id_len, b->keys, b->id, b->id_len);
}

/* Sorts the data set without the listed ids; "" on success, else the error. */
static void sorted_ids(const char *spec_json, const char *skip, char *out, size_t cap)
{
    json_doc *d;
    REQUIRE(json_doc_parse(spec_json, strlen(spec_json), NULL, &d, NULL) == 0);
    sort_spec spec;
    query_error err;
    REQUIRE(sort_parse(json_doc_root(d), "sort", &spec, &err) == 0);
    sortable v[N_DOCS];
    int n = 0;
    out[0] = '\0';
    for (int i = 0; i < N_DOCS; i++) {
        char id[16];
        snprintf(id, sizeof id, "d%02d", i + 1);
        if (strstr(skip, id)) continue;
        if (sort_keys_of(&spec, roots[i], v[n].keys, &err) != 0) {
            snprintf(out, cap, "error %s", err.msg);
            json_doc_free(d);
            return;
        }
        const json_value *idv = json_get(roots[i], "_id");
        v[n].id = idv->u.str.ptr;
        v[n].id_len = idv->u.str.len;
        n++;
    }
    cur_spec = &spec;
    qsort(v, (size_t)n, sizeof v[0], cmp_sortable);
    size_t len = 0;
    for (int i = 0; i < n; i++) len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "", v[i].id);
    json_doc_free(d);
}

static void expect_sorted(const char *spec, const char *skip, const char *want)
{
    char got[512];
    sorted_ids(spec, skip, got, sizeof got);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "  sort %s\n    want %s\n    got  %s\n", spec, want, got);
        test_current_failed = 1;
    }
}

static void test_sort(void)
{
    /* the order across types: missing = null < numbers < strings < booleans; ties by _id */
    expect_sorted("{\"age\":1}", "d08 d19 d20 d21",
                  "d04 d05 d13 d16 d14 d23 d24 d25 d26 d27 d28 d29 d30 d02 d01 d07 d06 d15 d17 d10 d09 d22 d03 d18 d12 d11");
    expect_sorted("[{\"kind\":1},{\"name\":-1}]", "d30",
                  "d23 d22 d25 d05 d04 d12 d11 d07 d21 d20 d19 d18 d17 d16 "
                  "d29 d26 d24 d15 d14 d13 d10 d09 d08 d06 d03 d02 d01 d27 d28");
    expect_sorted("{\"addr.city\":-1,\"_id\":-1}", "",
                  "d04 d01 d02 d30 d29 d28 d27 d26 d25 d24 d23 d22 d21 d20 d19 d18 d17 d16 d15 d14 d13 d12 d11 "
                  "d10 d09 d08 d07 d06 d05 d03");
    expect_sorted("{\"score\":-1}", "", "error sort.score: cannot sort on an array path (document \"d30\")");
    expect_sorted("{\"age\":1}", "", "error sort.age: cannot sort on an array path (document \"d08\")");
    expect_sorted("{\"age\":1}", "d08 d19 d20", "error sort.age: cannot sort on an object path (document \"d21\")");
    expect_sorted("{\"items.qty\":1}", "", "error sort.items.qty: cannot sort on an array path (document \"d06\")");

    char msg[QUERY_ERROR_MSG_MAX];
    CHECK_EQ(sort_error("{\"ts\":2}", msg, sizeof msg), HANU_ERR_INVALID);
    CHECK(strcmp(msg, "sort.ts: must be 1 (ascending) or -1 (descending)") == 0);
    CHECK_EQ(sort_error("[{\"a\":1,\"b\":1}]", msg, sizeof msg), HANU_ERR_INVALID);
    CHECK(strcmp(msg, "sort[0]: must be an object with one field, as {\"ts\":-1}") == 0);
    CHECK_EQ(sort_error("\"ts\"", msg, sizeof msg), HANU_ERR_INVALID);
    CHECK(strcmp(msg, "sort: must be an object or an array of objects") == 0);
    CHECK_EQ(sort_error("{}", msg, sizeof msg), HANU_ERR_INVALID);
    CHECK(strcmp(msg, "sort: needs at least one field") == 0);
    CHECK_EQ(sort_error("[{\"a\":1},{\"a\":-1}]", msg, sizeof msg), HANU_ERR_INVALID);
    CHECK(strcmp(msg, "sort[1].a: the same field twice in one sort") == 0);
    CHECK_EQ(sort_error("{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1}", msg, sizeof msg),
             HANU_ERR_TOO_LARGE);
    CHECK(strcmp(msg, "sort.i: more than 8 sort keys") == 0);
    CHECK_EQ(sort_error("{\"a\":1.0}", msg, sizeof msg), HANU_ERR_INVALID);
}

/* ---- aggregations ---- */

static int run_aggs(const char *spec, char *out, size_t cap)
{
    json_doc *d;
    if (json_doc_parse(spec, strlen(spec), NULL, &d, NULL) != 0) return 99;
    aggs_spec a;
    query_error err = { "" };
    int rc = aggs_parse(spec, json_doc_root(d), "aggs", &a, &err);
    if (rc == 0) {
        hanu_buf b = { 0 };
        rc = aggs_eval(&a, roots, N_DOCS, &b, &err);
        if (rc == 0) snprintf(out, cap, "%.*s", (int)b.len, (const char *)b.data);
        hanu_buf_free(&b);
        aggs_free(&a);
    }
    if (rc) snprintf(out, cap, "%s", err.msg);
    json_doc_free(d);
    return rc;
}

static void expect_aggs(const char *spec, int want_rc, const char *want)
{
    char got[2048];
    int rc = run_aggs(spec, got, sizeof got);
    if (rc != want_rc || strcmp(got, want) != 0) {
        fprintf(stderr, "  aggs %s\n    want %d %s\n    got  %d %s\n", spec, want_rc, want, rc, got);
        test_current_failed = 1;
    }
}

static const struct { const char *spec; int rc; const char *msg; } aggs_error_cases[] = {
    { "{\"x\":{\"terms\":{\"field\":\"a\",\"size\":0}}}", HANU_ERR_INVALID,
      "aggs.x.terms: \"size\" must be an integer from 1 to 1000" },
    { "{\"x\":{\"avg\":{}}}", HANU_ERR_INVALID,
      "aggs.x: unknown key \"avg\"" },
    { "{\"x\":{\"filter\":{}}}", HANU_ERR_INVALID,
      "aggs.x: needs one of terms, stats or histogram" },
    { "{\"x\":{\"terms\":{\"field\":\"a\"},\"stats\":{\"field\":\"a\"}}}", HANU_ERR_INVALID,
      "aggs.x: holds more than one aggregation" },
    { "{\"x\":{\"histogram\":{\"field\":\"a\",\"interval\":0}}}", HANU_ERR_INVALID,
      "aggs.x.histogram: needs \"interval\", a number above 0" },
    { "{\"x\":{\"stats\":{\"field\":\"a..b\"}}}", HANU_ERR_INVALID,
      "aggs.x.stats.field: empty segment in field path" },
    { "{\"x\":{\"stats\":{}}}", HANU_ERR_INVALID,
      "aggs.x.stats: needs \"field\", a field path string" },
    { "{\"x\":{\"terms\":{\"field\":\"a\"},\"filter\":{\"a\":{\"$bad\":1}}}}", HANU_ERR_INVALID,
      "aggs.x.filter.a: unknown operator $bad" },
    { "{}", HANU_ERR_INVALID,
      "aggs: must be an object of named aggregations" },
    { "{\"h\":{\"histogram\":{\"field\":\"age\",\"interval\":1e-300}}}", HANU_ERR_TOO_LARGE,
      "aggs: h: value 9.0072e+15 is out of the histogram's range" },
};

static void test_aggs(void)
{
    expect_aggs("{\"k\":{\"terms\":{\"field\":\"kind\",\"size\":3}}}", 0,
                "{\"k\":{\"buckets\":[{\"key\":\"user\",\"count\":16},{\"key\":\"guest\",\"count\":6},"
                "{\"key\":\"bot\",\"count\":3}],\"other\":3}}");
    expect_aggs("{\"t\":{\"terms\":{\"field\":\"tags\"}}}", 0,
                "{\"t\":{\"buckets\":[{\"key\":\"a\",\"count\":4},{\"key\":\"b\",\"count\":2},"
                "{\"key\":\"c\",\"count\":2},{\"key\":\"A\",\"count\":1}],\"other\":0}}");
    expect_aggs("{\"t\":{\"terms\":{\"field\":\"nothing\"}},\"h\":{\"histogram\":{\"field\":\"kind\",\"interval\":1}}}", 0,
                "{\"t\":{\"buckets\":[],\"other\":0},\"h\":{\"buckets\":[]}}");
    expect_aggs("{\"s\":{\"terms\":{\"field\":\"score\"}}}", 0,
                "{\"s\":{\"buckets\":[{\"key\":1,\"count\":3},{\"key\":-2,\"count\":1},{\"key\":1.5,\"count\":1},"
                "{\"key\":2,\"count\":1},{\"key\":3,\"count\":1},{\"key\":\"1\",\"count\":1}],\"other\":0}}");
    expect_aggs("{\"s\":{\"stats\":{\"field\":\"age\"},\"filter\":{\"kind\":\"user\",\"age\":{\"$lt\":1000}}},"
                "\"none\":{\"stats\":{\"field\":\"nothing\"}}}", 0,
                "{\"s\":{\"count\":14,\"min\":-5,\"max\":100,\"sum\":278.5,\"avg\":19.892857142857142},"
                "\"none\":{\"count\":0,\"min\":null,\"max\":null,\"sum\":0,\"avg\":null}}");
    expect_aggs("{\"h\":{\"histogram\":{\"field\":\"age\",\"interval\":10},\"filter\":{\"age\":{\"$lt\":1000}}}}", 0,
                "{\"h\":{\"buckets\":[{\"key\":-10,\"count\":2},{\"key\":0,\"count\":10},{\"key\":20,\"count\":2},"
                "{\"key\":30,\"count\":3},{\"key\":40,\"count\":1},{\"key\":100,\"count\":2}]}}");

    for (size_t i = 0; i < HANU_ARRAY_LEN(aggs_error_cases); i++)
        expect_aggs(aggs_error_cases[i].spec, aggs_error_cases[i].rc, aggs_error_cases[i].msg);
    /* a name cut to 64 bytes in a message is cut before a whole character, not inside one */
    char spec[128], want[128];
    snprintf(spec, sizeof spec, "{\"x\":{\"%.63s\xc3\xa9\":1}}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    snprintf(want, sizeof want, "aggs.x: unknown key \"%.63s\"", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    expect_aggs(spec, HANU_ERR_INVALID, want);
}

int main(void)
{
    load_dataset();
    RUN(test_filter_cases);
    RUN(test_positions_and_null);
    RUN(test_filter_match_raw_bytes);
    RUN(test_filter_ast_shape);
    RUN(test_parse_from_request_body);
    RUN(test_filter_errors);
    RUN(test_filter_identities);
    RUN(test_value_order_is_total);
    RUN(test_sort);
    RUN(test_aggs);
    for (int i = 0; i < N_DOCS; i++) json_doc_free(docs[i]);
    TEST_DONE();
}
