/*
 * test_kv_proto.c: the key-value request decoder and response encoder on
 * exact bytes: the examples of docs/PROTOCOL.md, every field cut short, limits.
 */
#include "test.h"
#include "kv/kv_proto.h"

static const kv_limits LIM = { 1024, 1u << 20, 16u << 20 };

static size_t hex(const char *s, uint8_t *out)
{
    size_t n = 0;
    while (*s) {
        if (*s == ' ') { s++; continue; }
        unsigned v;
        sscanf(s, "%2x", &v);
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

static void test_protocol_md_set_example(void)
{
    uint8_t b[64];
    size_t n = hex("07 00 17000000 07 64656661756c74 02000000 6b31 05000000 68656c6c6f", b);
    uint8_t op, flags;
    uint32_t len;
    REQUIRE(kv_read_header(b, n, &op, &flags, &len) == 0);
    CHECK_EQ(op, HKV_OP_SET);
    CHECK_EQ(len, n - HKV_REQ_HEADER);
    kv_request r;
    const char *why = NULL;
    REQUIRE(kv_parse_request(op, flags, b + 6, len, &LIM, &r, &why) == HANU_OK);
    CHECK(r.db_len == 7 && memcmp(r.db, "default", 7) == 0);
    CHECK(r.key_len == 2 && memcmp(r.key, "k1", 2) == 0);
    CHECK(r.value_len == 5 && memcmp(r.value, "hello", 5) == 0);
    CHECK_EQ(r.durability, HKV_DUR_LOCAL);
    /* Every shorter payload is invalid, never a crash or an over-read. */
    for (uint32_t cut = 0; cut < len; cut++)
        CHECK(kv_parse_request(op, flags, b + 6, cut, &LIM, &r, &why) == HANU_ERR_INVALID);
    CHECK_EQ(kv_read_header(b, 5, &op, &flags, &len), 1);
}

static void test_compare_set_example_and_response(void)
{
    uint8_t b[64];
    size_t n = hex("10 00 1f000000 07 64656661756c74 02000000 6b31 2900000000000000 05000000 776f726c64", b);
    kv_request r;
    const char *why;
    REQUIRE(kv_parse_request(b[0], b[1], b + 6, (uint32_t)(n - 6), &LIM, &r, &why) == HANU_OK);
    CHECK_EQ(r.token, 41);
    hanu_buf out = {0};
    kv_respond_token(&out, HKV_WIRE_KEY_TOKEN_MISMATCH, 42);
    uint8_t want[16];
    size_t wn = hex("07 08000000 2a00000000000000", want);
    CHECK(out.len == wn && memcmp(out.data, want, wn) == 0);
    hanu_buf_free(&out);
}

static void test_flags_and_ops(void)
{
    kv_request r;
    const char *why;
    CHECK(kv_parse_request(HKV_OP_PING, 0x04, NULL, 0, &LIM, &r, &why) == HANU_ERR_INVALID);
    CHECK(kv_parse_request(HKV_OP_PING, 0x03, NULL, 0, &LIM, &r, &why) == HANU_ERR_INVALID);
    CHECK(kv_parse_request(HKV_OP_PING, 0x01, NULL, 0, &LIM, &r, &why) == HANU_OK);
    CHECK_EQ(r.durability, HKV_DUR_NONE);
    CHECK(kv_parse_request(0x0A, 0, NULL, 0, &LIM, &r, &why) == HANU_ERR_INVALID);
    uint8_t junk[1] = { 0 };
    CHECK(kv_parse_request(HKV_OP_PING, 0, junk, 1, &LIM, &r, &why) == HANU_ERR_INVALID);
}

static void test_limits(void)
{
    uint8_t b[2200];
    kv_request r;
    const char *why;
    b[0] = 1; b[1] = 'd';
    hanu_put_u32(b + 2, 1025);
    memset(b + 6, 'k', 1025);
    CHECK(kv_parse_request(HKV_OP_GET, 0, b, 6 + 1025, &LIM, &r, &why) == HANU_ERR_TOO_LARGE);
    hanu_put_u32(b + 2, 1024);
    CHECK(kv_parse_request(HKV_OP_GET, 0, b, 6 + 1024, &LIM, &r, &why) == HANU_OK);
    b[0] = 65;
    CHECK(kv_parse_request(HKV_OP_INFO, 0, b, 66, &LIM, &r, &why) == HANU_ERR_INVALID);
}

static void test_batch_items(void)
{
    hanu_buf p = {0};
    uint8_t t[4];
    hanu_buf_append(&p, "\x07" "default", 8);
    hanu_put_u32(t, 2); hanu_buf_append(&p, t, 4);
    hanu_buf_append(&p, "\x00", 1);
    hanu_put_u32(t, 1); hanu_buf_append(&p, t, 4); hanu_buf_append(&p, "a", 1);
    hanu_put_u32(t, 3); hanu_buf_append(&p, t, 4); hanu_buf_append(&p, "one", 3);
    hanu_buf_append(&p, "\x01", 1);
    hanu_put_u32(t, 1); hanu_buf_append(&p, t, 4); hanu_buf_append(&p, "b", 1);
    kv_request r;
    const char *why;
    REQUIRE(kv_parse_request(HKV_OP_WRITE_BATCH, 0, p.data, (uint32_t)p.len, &LIM, &r, &why) == HANU_OK);
    size_t pos = 0;
    uint8_t kind;
    const uint8_t *k, *v;
    uint32_t kl, vl;
    REQUIRE(kv_batch_next(&r, &pos, &kind, &k, &kl, &v, &vl));
    CHECK(kind == 0 && kl == 1 && k[0] == 'a' && vl == 3 && memcmp(v, "one", 3) == 0);
    REQUIRE(kv_batch_next(&r, &pos, &kind, &k, &kl, &v, &vl));
    CHECK(kind == 1 && kl == 1 && k[0] == 'b' && vl == 0);
    CHECK(!kv_batch_next(&r, &pos, &kind, &k, &kl, &v, &vl));
    for (uint32_t cut = 0; cut < p.len; cut++)
        CHECK(kv_parse_request(HKV_OP_WRITE_BATCH, 0, p.data, cut, &LIM, &r, &why) != HANU_OK);
    hanu_buf_free(&p);
}

/* Auth: u8 length then the token, as PROTOCOL.md's example; every cut and bad length refused. */
static void test_auth(void)
{
    uint8_t b[300];
    size_t n = hex("14 00 0e000000 0d 61646d696e2d746f6b656e2d31", b);
    kv_request r;
    const char *why = NULL;
    REQUIRE(kv_parse_request(b[0], b[1], b + 6, (uint32_t)(n - 6), &LIM, &r, &why) == HANU_OK);
    CHECK(r.op == HKV_OP_AUTH && r.secret_len == 13 && memcmp(r.secret, "admin-token-1", 13) == 0);
    CHECK(r.db == NULL && r.key == NULL);
    CHECK(!kv_op_writes(HKV_OP_AUTH) && kv_op_writes(HKV_OP_WRITE_BATCH) && kv_op_writes(HKV_OP_CREATE));
    CHECK(!kv_op_writes(HKV_OP_GET) && !kv_op_writes(HKV_OP_STATS) && !kv_op_writes(0x7f));
    for (uint32_t cut = 0; cut < n - 6; cut++)
        CHECK(kv_parse_request(HKV_OP_AUTH, 0, b + 6, cut, &LIM, &r, &why) == HANU_ERR_INVALID);
    uint8_t zero = 0;
    CHECK(kv_parse_request(HKV_OP_AUTH, 0, &zero, 1, &LIM, &r, &why) == HANU_ERR_INVALID);
    CHECK(strcmp(why, "token must be 1 to 255 bytes") == 0);
    b[6 + 14] = 'x';      /* a trailing byte */
    CHECK(kv_parse_request(HKV_OP_AUTH, 0, b + 6, 15, &LIM, &r, &why) == HANU_ERR_INVALID);
    /* the longest token */
    b[0] = 255;
    memset(b + 1, 't', 255);
    REQUIRE(kv_parse_request(HKV_OP_AUTH, 0, b, 256, &LIM, &r, &why) == HANU_OK);
    CHECK_EQ(r.secret_len, 255);
}

/* SetTtl and Ttl (docs/PROTOCOL.md's examples): every cut is invalid, and the ttl
   must be 1 ms to 100 years. */
static void test_set_ttl_and_ttl(void)
{
    uint8_t b[64];
    size_t n = hex("15 00 1f000000 07 64656661756c74 02000000 6b31 60ea000000000000 05000000 68656c6c6f", b);
    kv_request r;
    const char *why = NULL;
    uint32_t len = (uint32_t)(n - HKV_REQ_HEADER);
    REQUIRE(kv_parse_request(b[0], b[1], b + 6, len, &LIM, &r, &why) == HANU_OK);
    CHECK_EQ(r.ttl_ms, 60000);
    CHECK(r.key_len == 2 && memcmp(r.key, "k1", 2) == 0);
    CHECK(r.value_len == 5 && memcmp(r.value, "hello", 5) == 0);
    CHECK(kv_op_writes(HKV_OP_SET_TTL));
    CHECK(!kv_op_writes(HKV_OP_TTL));
    for (uint32_t cut = 0; cut < len; cut++)
        CHECK(kv_parse_request(b[0], b[1], b + 6, cut, &LIM, &r, &why) == HANU_ERR_INVALID);
    const uint64_t bad[] = { 0, HKV_TTL_MAX_MS + 1, UINT64_MAX };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hanu_put_u64(b + 6 + 8 + 6, bad[i]);
        CHECK(kv_parse_request(b[0], b[1], b + 6, len, &LIM, &r, &why) == HANU_ERR_INVALID);
        CHECK(strstr(why, "ttl must be 1 to") != NULL);
    }
    hanu_put_u64(b + 6 + 8 + 6, HKV_TTL_MAX_MS);
    CHECK(kv_parse_request(b[0], b[1], b + 6, len, &LIM, &r, &why) == HANU_OK);
    n = hex("16 00 0e000000 07 64656661756c74 02000000 6b31", b);
    REQUIRE(kv_parse_request(b[0], b[1], b + 6, (uint32_t)(n - 6), &LIM, &r, &why) == HANU_OK);
    CHECK(r.key_len == 2 && memcmp(r.key, "k1", 2) == 0);
}

int main(void)
{
    RUN(test_protocol_md_set_example);
    RUN(test_compare_set_example_and_response);
    RUN(test_flags_and_ops);
    RUN(test_limits);
    RUN(test_batch_items);
    RUN(test_auth);
    RUN(test_set_ttl_and_ttl);
    TEST_DONE();
}
