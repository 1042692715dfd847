/*
 * test_docs_body.c: document and batch bodies of the documents API: _id
 * insertion keeps every other byte, ids from the URL and the body, errors
 * with their HTTP status, batch decoding, the _id helpers and new ids.
 */
#include "test.h"
#include "docs/docs.h"

static void fixed_id(void *ctx, char out[21])
{
    (void)ctx;
    memcpy(out, "06H2RPFYGR0000000000", 21);
}

static void test_prepare_inserts_id_keeps_bytes(void)
{
    hanu_buf out = {0};
    docs_error e;
    char id[DOCS_ID_MAX + 1] = "alice";
    size_t id_len = 5;
    const char *in = " { \"b\" : [1, 2.50] , \"a\":null }";
    REQUIRE(docs_prepare(in, strlen(in), 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_OK);
    const char *want = " {\"_id\":\"alice\", \"b\" : [1, 2.50] , \"a\":null }";
    CHECK(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0);
    id_len = 0;
    REQUIRE(docs_prepare("{}", 2, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_OK);
    CHECK(id_len == 20 && !strcmp(id, "06H2RPFYGR0000000000"));
    CHECK(out.len == 30 && !memcmp(out.data, "{\"_id\":\"06H2RPFYGR0000000000\"}", 30));
    id_len = 0;
    REQUIRE(docs_prepare("{\"x\":1,\"_id\":\"mine\"}", 20, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_OK);
    CHECK(id_len == 4 && !strcmp(id, "mine"));
    CHECK(out.len == 20);   /* kept as sent */
    hanu_buf_free(&out);
}

static void test_prepare_errors(void)
{
    hanu_buf out = {0};
    docs_error e;
    char id[DOCS_ID_MAX + 1] = "a";
    size_t id_len = 1;
    CHECK(docs_prepare("[1]", 3, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_ERR_INVALID);
    CHECK(e.status == 400 && !strcmp(e.code, "invalid_request"));
    CHECK(docs_prepare("{\"a\":", 5, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_ERR_INVALID);
    CHECK(!strcmp(e.code, "invalid_json") && strstr(e.message, "end of input"));
    CHECK(docs_prepare("{\"_id\":\"b\"}", 11, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_ERR_INVALID);
    CHECK(!strcmp(e.code, "invalid_id"));
    CHECK(docs_prepare("{\"_id\":7}", 9, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_ERR_INVALID);
    id_len = 0;
    CHECK(docs_prepare("{\"_id\":\"a/b\"}", 13, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_ERR_INVALID);
    char big[200];
    memset(big, ' ', sizeof big);
    big[0] = '{';
    big[sizeof big - 1] = '}';
    id_len = 1;
    CHECK(docs_prepare(big, sizeof big, 100, id, &id_len, fixed_id, NULL, &out, &e) == HANU_ERR_TOO_LARGE);
    CHECK(e.status == 413);
    CHECK(!docs_id_valid("", 0) && !docs_id_valid("a\nb", 3) && docs_id_valid("\xe2\x9c\x93 ok", 6));
    /* dot segments: clients collapse them in URLs, so they cannot be ids */
    CHECK(!docs_id_valid(".", 1) && !docs_id_valid("..", 2));
    CHECK(docs_id_valid("...", 3) && docs_id_valid(".a", 2) && docs_id_valid("a.", 2));
    id_len = 0;
    CHECK(docs_prepare("{\"_id\":\"..\"}", 12, 1024, id, &id_len, fixed_id, NULL, &out, &e) == HANU_ERR_INVALID);
    hanu_buf_free(&out);
}

static void test_batch_decode(void)
{
    const char *in = "{\"ops\":[{\"op\":\"put\",\"id\":\"p1\",\"doc\":{ \"v\" : 1 }},"
                     "{\"op\":\"put\",\"doc\":{\"_id\":\"p2\"}},{\"op\":\"put\",\"doc\":{}},"
                     "{\"op\":\"delete\",\"id\":\"gone\"}]}";
    docs_batch b;
    docs_error e;
    REQUIRE(docs_batch_decode(in, strlen(in), 1024, fixed_id, NULL, &b, &e) == HANU_OK);
    REQUIRE(b.n == 4);
    CHECK(!memcmp(b.arena.data + b.items[0].doc_off, "{\"_id\":\"p1\", \"v\" : 1 }", b.items[0].doc_len));
    CHECK(b.items[1].id_len == 2 && !memcmp(b.arena.data + b.items[1].id_off, "p2", 2));
    CHECK(b.items[2].id_len == 20);
    CHECK(b.items[3].is_delete && b.items[3].id_len == 4);
    docs_batch_free(&b);
    const char *bad[] = { "{\"ops\":[]}", "{}", "[]", "{\"ops\":[{\"op\":\"x\",\"id\":\"a\"}]}",
                          "{\"ops\":[{\"op\":\"delete\"}]}", "{\"ops\":[{\"op\":\"put\",\"id\":\"a\",\"doc\":1}]}",
                          "{\"ops\":[{\"op\":\"put\",\"id\":\"a\",\"doc\":{\"_id\":\"b\"}}]}" };
    for (size_t i = 0; i < HANU_ARRAY_LEN(bad); i++) {
        CHECK(docs_batch_decode(bad[i], strlen(bad[i]), 1024, fixed_id, NULL, &b, &e) == HANU_ERR_INVALID);
        CHECK(e.status == 400);
    }
}

/* ---- the _id rule on JSON (moved from the json module) ---- */

static void test_id_insert_and_find(void)
{
    hanu_buf out = { 0 };
    char id[64];
    size_t n;
    CHECK_EQ(docs_id_insert("{\"a\":1}", 7, "x1", 2, &out), 0);
    const char *want = "{\"_id\":\"x1\",\"a\":1}";
    CHECK(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0);
    CHECK_EQ(docs_id_find((char *)out.data, out.len, id, sizeof id, &n), 0);
    CHECK(n == 2 && strcmp(id, "x1") == 0);
    out.len = 0;
    CHECK_EQ(docs_id_insert(" { \n} ", 6, "q\"", 2, &out), 0);
    want = " {\"_id\":\"q\\\"\" \n} ";
    CHECK(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0);
    CHECK_EQ(docs_id_find((char *)out.data, out.len, id, sizeof id, &n), 0);
    CHECK(n == 2 && memcmp(id, "q\"", 2) == 0);
    out.len = 0;
    CHECK_EQ(docs_id_insert("{\"_id\":\"a\"}", 11, "b", 1, &out), HANU_ERR_EXISTS);
    CHECK_EQ(docs_id_insert("{\"\\u005fid\":5}", 14, "b", 1, &out), HANU_ERR_EXISTS);
    CHECK_EQ(docs_id_insert("[1]", 3, "b", 1, &out), HANU_ERR_INVALID);
    CHECK_EQ(docs_id_insert("{\"a\":", 5, "b", 1, &out), HANU_ERR_INVALID);
    CHECK_EQ(docs_id_insert("{}", 2, "\xff", 1, &out), HANU_ERR_INVALID);
    CHECK_EQ(out.len, 0);
    /* nested _id does not count; top-level wins wherever it is */
    const char *d = "{\"x\":{\"_id\":\"inner\"},\"y\":[{\"_id\":1}],\"_id\":\"top\\u00e9\"}";
    CHECK_EQ(docs_id_find(d, strlen(d), id, sizeof id, &n), 0);
    CHECK(n == 5 && memcmp(id, "top\xc3\xa9", 5) == 0);
    CHECK_EQ(docs_id_find(d, strlen(d), id, 3, &n), HANU_ERR_TOO_LARGE);
    CHECK_EQ(n, 5);
    d = "{\"x\":{\"_id\":\"inner\"}}";
    CHECK_EQ(docs_id_find(d, strlen(d), id, sizeof id, &n), HANU_ERR_NOT_FOUND);
    CHECK_EQ(docs_id_find("{\"_id\":7}", 9, id, sizeof id, &n), HANU_ERR_INVALID);
    CHECK_EQ(docs_id_find("\"_id\"", 5, id, sizeof id, &n), HANU_ERR_INVALID);
    CHECK_EQ(docs_id_find("{\"_id\":\"a\",\"_id\":\"b\"}", 21, id, sizeof id, &n), HANU_ERR_INVALID);
    hanu_buf_free(&out);
}

static void test_new_ids_sort_by_time(void)
{
    uint64_t last = 0, seq = 0;
    char a[DOCS_NEW_ID_LEN + 1], b[DOCS_NEW_ID_LEN + 1], c[DOCS_NEW_ID_LEN + 1];
    docs_id_new(&last, &seq, 1000, a);
    docs_id_new(&last, &seq, 999, b);      /* the clock stepped back: same ms, next sequence */
    docs_id_new(&last, &seq, 1001, c);
    CHECK(strlen(a) == DOCS_NEW_ID_LEN && strcmp(a, b) < 0 && strcmp(b, c) < 0);
    CHECK(last == 1001 && seq == 1);
    CHECK(strcmp(a, "00000003X00000000000") == 0);   /* 1000 ms = 0b1111101000, sequence 0 */
}

int main(void)
{
    RUN(test_prepare_inserts_id_keeps_bytes);
    RUN(test_prepare_errors);
    RUN(test_batch_decode);
    RUN(test_id_insert_and_find);
    RUN(test_new_ids_sort_by_time);
    TEST_DONE();
}
