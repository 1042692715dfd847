/*
 * test_docs_body.c: document and batch bodies of the documents API: _id
 * insertion keeps every other byte, ids from the URL and the body, errors
 * with their HTTP status, batch decoding.
 */
#include "test.h"
#include "server/docs_body.h"

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

int main(void)
{
    RUN(test_prepare_inserts_id_keeps_bytes);
    RUN(test_prepare_errors);
    RUN(test_batch_decode);
    TEST_DONE();
}
