/*
 * test_resp_proto.c: the Redis protocol's request parser and reply writer on
 * exact bytes: multibulk and inline requests, every frame cut short, hostile
 * framing (huge, negative and malformed lengths, nesting, long lines), and the
 * RESP2/RESP3 replies.
 */
#include "test.h"
#include "resp/resp_proto.h"

static const resp_limits LIM = { .max_args = 1024, .max_bulk = 1u << 20, .max_inline = 64 * 1024,
                                 .max_request = 4u << 20 };

/* Parses s completely: result, and for OK the arguments joined by '|'. */
static int parse(const char *s, size_t n, char *joined, size_t *consumed, const char **err)
{
    resp_request r = { 0 };
    size_t need = 0, used = 0;
    *err = NULL;
    int rc = resp_parse(&r, (const uint8_t *)s, n, &LIM, &used, &need, err);
    if (rc == RESP_PARSE_MORE && need <= n) rc = -1;   /* need must ask for more than there is */
    joined[0] = '\0';
    size_t off = 0;
    for (size_t i = 0; rc == RESP_PARSE_OK && i < r.argc; i++)
        off += (size_t)snprintf(joined + off, 256 - off, "%s%.*s", i ? "|" : "", (int)r.argv[i].len, (const char *)r.argv[i].p);
    if (consumed) *consumed = used;
    resp_request_free(&r);
    return rc;
}

static void test_multibulk(void)
{
    char j[256];
    const char *err;
    size_t used;
    const char *s = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nREST";
    CHECK_EQ(parse(s, strlen(s), j, &used, &err), RESP_PARSE_OK);
    CHECK(strcmp(j, "SET|k|hello") == 0);
    CHECK_EQ(used, strlen(s) - 4);
    /* every cut is MORE, never an error or a read past the end */
    for (size_t cut = 0; cut < strlen(s) - 4; cut++) CHECK_EQ(parse(s, cut, j, NULL, &err), RESP_PARSE_MORE);
    /* binary bytes and an empty argument */
    const char b[] = "*2\r\n$3\r\na\0b\r\n$0\r\n\r\n";
    resp_request r = { 0 };
    size_t need;
    REQUIRE(resp_parse(&r, (const uint8_t *)b, sizeof b - 1, &LIM, &used, &need, &err) == RESP_PARSE_OK);
    CHECK(r.argc == 2 && r.argv[0].len == 3 && memcmp(r.argv[0].p, "a\0b", 3) == 0 && r.argv[1].len == 0);
    resp_request_free(&r);
    /* *0 and *-1 are skipped (no arguments), as redis-server does */
    CHECK_EQ(parse("*0\r\n", 4, j, &used, &err), RESP_PARSE_OK);
    CHECK_EQ(used, 4);
    CHECK_EQ(parse("*-1\r\n", 5, j, &used, &err), RESP_PARSE_OK);
}

static void test_need_hint(void)
{
    /* a big bulk's header known: the parser asks for the whole bulk at once */
    const char *s = "*1\r\n$100\r\nab";
    resp_request r = { 0 };
    size_t need = 0, used;
    const char *err;
    CHECK_EQ(resp_parse(&r, (const uint8_t *)s, strlen(s), &LIM, &used, &need, &err), RESP_PARSE_MORE);
    CHECK_EQ(need, 4 + 6 + 100 + 2);
    resp_request_free(&r);
}

static void expect_error(const char *s, size_t n, const char *want)
{
    char j[256];
    const char *err = NULL;
    int rc = parse(s, n, j, NULL, &err);
    CHECK_EQ(rc, RESP_PARSE_ERROR);
    if (rc == RESP_PARSE_ERROR && strcmp(err, want) != 0) {
        fprintf(stderr, "  got \"%s\", want \"%s\"\n", err, want);
        CHECK(0);
    }
}

static void test_hostile_framing(void)
{
    expect_error("*99999999999999999999\r\n", 24, "Protocol error: invalid multibulk length");
    expect_error("*1025\r\n", 7, "Protocol error: invalid multibulk length");        /* max_args */
    expect_error("*x\r\n", 4, "Protocol error: invalid multibulk length");
    expect_error("*+1\r\n", 5, "Protocol error: invalid multibulk length");
    expect_error("*01\r\n", 5, "Protocol error: invalid multibulk length");
    expect_error("*1\r\n$-1\r\n", 9, "Protocol error: invalid bulk length");
    expect_error("*1\r\n$-5\r\n", 9, "Protocol error: invalid bulk length");
    expect_error("*1\r\n$1048577\r\n", 14, "Protocol error: invalid bulk length");      /* max_bulk */
    expect_error("*1\r\n$9223372036854775808\r\n", 26, "Protocol error: invalid bulk length");
    expect_error("*1\r\n$abc\r\n", 10, "Protocol error: invalid bulk length");
    /* nesting: a request is a flat array of bulk strings */
    expect_error("*1\r\n*1\r\n$1\r\na\r\n", 15, "Protocol error: expected '$', got '*'");
    expect_error("*1\r\n:1\r\n", 8, "Protocol error: expected '$', got ':'");
    /* the bulk must end with CRLF exactly where its length says */
    expect_error("*1\r\n$1\r\nab\r\n", 12, "Protocol error: expected '\\r\\n' after a bulk string");
    /* lines without CRLF past 64 KiB */
    size_t big = 70 * 1024;
    char *p = malloc(big);
    REQUIRE(p);
    memset(p, '1', big);
    p[0] = '*';
    expect_error(p, big, "Protocol error: too big mbulk count string");
    memcpy(p, "*1\r\n$", 5);
    expect_error(p, big, "Protocol error: too big bulk count string");
    memset(p, 'a', big);
    expect_error(p, big, "Protocol error: too big inline request");
    free(p);
    /* the sum of the arguments is held to max_request */
    resp_limits small = LIM;
    small.max_request = 5;
    resp_request r = { 0 };
    size_t used, need;
    const char *err;
    const char *s = "*2\r\n$3\r\nabc\r\n$3\r\ndef\r\n";
    CHECK_EQ(resp_parse(&r, (const uint8_t *)s, strlen(s), &small, &used, &need, &err), RESP_PARSE_ERROR);
    /* before AUTH, redis-server's lower limits */
    small = LIM;
    small.unauthenticated = 1;
    CHECK_EQ(resp_parse(&r, (const uint8_t *)"*11\r\n", 5, &small, &used, &need, &err), RESP_PARSE_ERROR);
    CHECK(strcmp(err, "Protocol error: unauthenticated multibulk length") == 0);
    CHECK_EQ(resp_parse(&r, (const uint8_t *)"*1\r\n$16385\r\n", 12, &small, &used, &need, &err), RESP_PARSE_ERROR);
    CHECK(strcmp(err, "Protocol error: unauthenticated bulk length") == 0);
    resp_request_free(&r);
}

static void test_inline(void)
{
    char j[256];
    const char *err;
    size_t used;
    CHECK_EQ(parse("SET k v\r\n", 9, j, &used, &err), RESP_PARSE_OK);
    CHECK(strcmp(j, "SET|k|v") == 0);
    CHECK_EQ(used, 9);
    CHECK_EQ(parse("  get   k\n", 10, j, &used, &err), RESP_PARSE_OK);
    CHECK(strcmp(j, "get|k") == 0);
    CHECK_EQ(parse("set \"a b\\x41\\n\" 'it\\'s'\n", 24, j, &used, &err), RESP_PARSE_OK);
    CHECK(strcmp(j, "set|a bA\n|it's") == 0);
    CHECK_EQ(parse("\r\n", 2, j, &used, &err), RESP_PARSE_OK);   /* an empty line: no arguments */
    CHECK_EQ(used, 2);
    CHECK_EQ(parse("get k", 5, j, &used, &err), RESP_PARSE_MORE);
    expect_error("set \"abc\n", 9, "Protocol error: unbalanced quotes in request");
    expect_error("set \"abc\"x\n", 11, "Protocol error: unbalanced quotes in request");
    expect_error("set 'abc\n", 9, "Protocol error: unbalanced quotes in request");
}

static void test_numbers(void)
{
    int64_t v;
    CHECK(resp_parse_i64((const uint8_t *)"-9223372036854775808", 20, &v) && v == INT64_MIN);
    CHECK(resp_parse_i64((const uint8_t *)"9223372036854775807", 19, &v) && v == INT64_MAX);
    CHECK(!resp_parse_i64((const uint8_t *)"9223372036854775808", 19, &v));
    CHECK(!resp_parse_i64((const uint8_t *)"-0", 2, &v));
    CHECK(!resp_parse_i64((const uint8_t *)" 1", 2, &v));
    CHECK(!resp_parse_i64((const uint8_t *)"", 0, &v));
    long double d;
    CHECK(resp_parse_ld((const uint8_t *)"1.5", 3, &d) && d == 1.5L);
    CHECK(!resp_parse_ld((const uint8_t *)"nan", 3, &d));
    CHECK(!resp_parse_ld((const uint8_t *)" 1", 2, &d));
    char s[64];
    resp_format_ld(3.0L, s, sizeof s);
    CHECK(strcmp(s, "3") == 0);
    resp_format_ld(10.5L, s, sizeof s);
    CHECK(strcmp(s, "10.5") == 0);
    resp_format_ld(-0.0L, s, sizeof s);
    CHECK(strcmp(s, "0") == 0);
}

static void test_replies(void)
{
    hanu_buf b = { 0 };
    resp_w_simple(&b, "OK");
    resp_w_error(&b, "ERR bad\r\nline");
    resp_w_int(&b, -42);
    resp_w_int(&b, INT64_MIN);
    resp_w_bulk(&b, "hi", 2);
    resp_w_bulk(&b, "", 0);
    resp_w_null(&b, 2);
    resp_w_null(&b, 3);
    resp_w_null_array(&b, 2);
    resp_w_map(&b, 2, 2);
    resp_w_map(&b, 3, 2);
    resp_w_set(&b, 3, 1);
    resp_w_double(&b, 3, 1.5);
    resp_w_double(&b, 2, 1.5);
    resp_w_verbatim(&b, 3, "ab", 2);
    resp_w_verbatim(&b, 2, "ab", 2);
    const char *want = "+OK\r\n-ERR bad  line\r\n:-42\r\n:-9223372036854775808\r\n$2\r\nhi\r\n$0\r\n\r\n$-1\r\n_\r\n"
                       "*-1\r\n*4\r\n%2\r\n~1\r\n,1.5\r\n$3\r\n1.5\r\n=6\r\ntxt:ab\r\n$2\r\nab\r\n";
    CHECK_EQ(b.len, strlen(want));
    CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0);
    hanu_buf_free(&b);
}

int main(void)
{
    RUN(test_multibulk);
    RUN(test_need_hint);
    RUN(test_hostile_framing);
    RUN(test_inline);
    RUN(test_numbers);
    RUN(test_replies);
    TEST_DONE();
}
