/*
 * test_ndjson.c: the NDJSON import body (docs_ndjson.c): lines split at LF with
 * CRLF, blank lines counted and skipped, a last line without LF, line numbers
 * from first_line; each line prepared as a document, with the foreign "_id"
 * forms taken (integers, {"$oid":...}) and every other one refused with the
 * line's error code.
 */
#include "test.h"
#include "docs/docs.h"

static void fixed_id(void *ctx, char out[21])
{
    (void)ctx;
    memcpy(out, "06H2RPFYGR0000000000", 21);
}

static void test_split_lines(void)
{
    const char *in = "{\"a\":1}\r\n\n  \t\r\n{\"b\":2}\n{\"c\":3}";
    docs_ndjson_reader r;
    docs_ndjson_init(&r, in, strlen(in), 1);
    const char *line;
    size_t len;
    REQUIRE(docs_ndjson_next(&r, &line, &len) == 1);
    CHECK(r.line == 1 && len == 7 && !memcmp(line, "{\"a\":1}", 7));   /* the CR is dropped */
    REQUIRE(docs_ndjson_next(&r, &line, &len) == 1);
    CHECK(r.line == 4 && len == 7 && !memcmp(line, "{\"b\":2}", 7));   /* lines 2 and 3 are blank */
    CHECK(r.blank == 2);
    REQUIRE(docs_ndjson_next(&r, &line, &len) == 1);
    CHECK(r.line == 5 && len == 7 && !memcmp(line, "{\"c\":3}", 7));   /* no LF at the end */
    CHECK(docs_ndjson_next(&r, &line, &len) == 0);
    CHECK(docs_ndjson_next(&r, &line, &len) == 0);
    /* first_line numbers the body's lines; an empty body has none; a trailing LF adds none */
    docs_ndjson_init(&r, "x\n", 2, 41);
    REQUIRE(docs_ndjson_next(&r, &line, &len) == 1);
    CHECK(r.line == 41 && len == 1);
    CHECK(docs_ndjson_next(&r, &line, &len) == 0 && r.line == 41);
    docs_ndjson_init(&r, "", 0, 1);
    CHECK(docs_ndjson_next(&r, &line, &len) == 0 && r.line == 0 && r.blank == 0);
    docs_ndjson_init(&r, "\n\n", 2, 1);
    CHECK(docs_ndjson_next(&r, &line, &len) == 0 && r.line == 2 && r.blank == 2);
}

/* Prepares one line: its rc, and the stored bytes and id when it was taken. */
static int prep(const char *line, uint32_t max_doc, hanu_buf *out, char id[DOCS_ID_MAX + 1], docs_error *e)
{
    hanu_buf scratch = {0};
    size_t id_len = 0;
    int rc = docs_ndjson_prepare(line, strlen(line), max_doc, id, &id_len, fixed_id, NULL, out, &scratch, e);
    if (rc == HANU_OK) CHECK(strlen(id) == id_len);
    hanu_buf_free(&scratch);
    return rc;
}

static int stored_is(const hanu_buf *b, const char *want)
{
    return b->len == strlen(want) && !memcmp(b->data, want, b->len);
}

static void test_prepare_ids(void)
{
    hanu_buf out = {0};
    char id[DOCS_ID_MAX + 1];
    docs_error e;
    REQUIRE(prep("{\"_id\":\"a\",\"x\":1}", 1024, &out, id, &e) == HANU_OK);
    CHECK(!strcmp(id, "a") && stored_is(&out, "{\"_id\":\"a\",\"x\":1}"));
    REQUIRE(prep("{\"x\":1}", 1024, &out, id, &e) == HANU_OK);
    CHECK(!strcmp(id, "06H2RPFYGR0000000000") && stored_is(&out, "{\"_id\":\"06H2RPFYGR0000000000\",\"x\":1}"));
    /* an integer _id (Elasticsearch's, mongoexport's numbers) is its digits, in place */
    REQUIRE(prep("{\"x\":1, \"_id\" : -42 ,\"y\":2}", 1024, &out, id, &e) == HANU_OK);
    CHECK(!strcmp(id, "-42") && stored_is(&out, "{\"x\":1, \"_id\" : \"-42\" ,\"y\":2}"));
    /* MongoDB extended JSON: {"$oid": "<24 hex>"} */
    REQUIRE(prep("{\"_id\":{ \"$oid\" : \"5f1a2b3c4d5e6f7a8b9c0d1E\" },\"n\":{\"$date\":\"2020-01-01T00:00:00Z\"}}", 1024,
                 &out, id, &e) == HANU_OK);
    CHECK(!strcmp(id, "5f1a2b3c4d5e6f7a8b9c0d1E"));
    CHECK(stored_is(&out, "{\"_id\":\"5f1a2b3c4d5e6f7a8b9c0d1E\",\"n\":{\"$date\":\"2020-01-01T00:00:00Z\"}}"));
    hanu_buf_free(&out);
}

static void test_prepare_errors(void)
{
    hanu_buf out = {0};
    char id[DOCS_ID_MAX + 1];
    docs_error e;
    static const struct { const char *line; int status; const char *code; } cases[] = {
        { "not json", 400, "invalid_json" },
        { "{\"a\":1", 400, "invalid_json" },
        { "{\"a\":1} {\"b\":2}", 400, "invalid_json" },   /* two values on one line */
        { "[1,2]", 400, "invalid_request" },
        { "\"x\"", 400, "invalid_request" },
        { "{\"_id\":1.5}", 400, "invalid_id" },
        { "{\"_id\":1e3}", 400, "invalid_id" },
        { "{\"_id\":true}", 400, "invalid_id" },
        { "{\"_id\":null}", 400, "invalid_id" },
        { "{\"_id\":[\"a\"]}", 400, "invalid_id" },
        { "{\"_id\":{\"$oid\":\"5f1a\"}}", 400, "invalid_id" },
        { "{\"_id\":{\"$oid\":\"5f1a2b3c4d5e6f7a8b9c0d1g\"}}", 400, "invalid_id" },
        { "{\"_id\":{\"$oid\":\"5f1a2b3c4d5e6f7a8b9c0d1e\",\"x\":1}}", 400, "invalid_id" },
        { "{\"_id\":\"a/b\"}", 400, "invalid_id" },
        { "{\"_id\":\"..\"}", 400, "invalid_id" },
        { "{\"_id\":\"\"}", 400, "invalid_id" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = prep(cases[i].line, 1024, &out, id, &e);
        CHECK(rc == HANU_ERR_INVALID);
        CHECK(e.status == cases[i].status && !strcmp(e.code, cases[i].code));
        if (rc != HANU_ERR_INVALID || strcmp(e.code, cases[i].code)) printf("  case %zu: %s -> %s\n", i, cases[i].line, e.code);
    }
    /* too large: a line past the limit is refused before it is parsed, a document
       past it after its _id is added */
    char big[2000];
    memset(big, ' ', sizeof big);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    big[sizeof big - 1] = '\0';
    CHECK(prep(big, 1024, &out, id, &e) == HANU_ERR_TOO_LARGE && e.status == 413 && !strcmp(e.code, "too_large"));
    char near[1010];
    memset(near, ' ', sizeof near);
    near[0] = '{';
    near[sizeof near - 2] = '}';
    near[sizeof near - 1] = '\0';
    CHECK(prep(near, 1024, &out, id, &e) == HANU_ERR_TOO_LARGE && !strcmp(e.code, "too_large"));
    hanu_buf_free(&out);
}

int main(void)
{
    RUN(test_split_lines);
    RUN(test_prepare_ids);
    RUN(test_prepare_errors);
    TEST_DONE();
}
