/*
 * test_client.c: the key-value client library without a HanuDB server.
 * Request encoding is compared byte for byte with docs/PROTOCOL.md's hex
 * examples (and hand-derived frames for the ops it has no example of);
 * response decoding is fed every status, truncated frames, oversized lengths,
 * wrong payload shapes and random bytes. The connection layer is run against
 * a tiny fake server thread on 127.0.0.1 that answers with canned bytes,
 * split into single bytes, or not at all (timeouts, closed connections).
 */
#include "hanudb_client.h"
#include "test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ---- */

/* Parses hex digits (spaces ignored) into out; returns the byte count. */
static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int half = -1;
    for (const char *p = hex; *p; p++) {
        int v;
        if (*p >= '0' && *p <= '9') v = *p - '0';
        else if (*p >= 'a' && *p <= 'f') v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F') v = *p - 'A' + 10;
        else continue;
        if (half < 0) {
            half = v;
        } else {
            if (n < cap)
                out[n] = (uint8_t)(half << 4 | v);
            n++;
            half = -1;
        }
    }
    return n;
}

/* Encodes req and checks the frame equals hex exactly. */
static int encodes_to(const hkv_request *req, const char *hex)
{
    uint8_t want[512];
    size_t wn = unhex(hex, want, sizeof want);
    hkv_buf b = {0};
    int rc = hkv_encode(&b, req);
    int ok = rc == HKV_OK && b.len == wn && memcmp(b.data, want, wn) == 0;
    if (!ok) {
        fprintf(stderr, "  op 0x%02x rc %d got:", req->op, rc);
        for (size_t i = 0; i < b.len; i++)
            fprintf(stderr, " %02x", b.data[i]);
        fprintf(stderr, "\n  want: %s\n", hex);
    }
    hkv_buf_free(&b);
    return ok;
}

static int decode_hex(uint8_t op, const char *hex, hkv_response *r, uint8_t *store)
{
    size_t n = unhex(hex, store, 256);
    return hkv_decode(op, store, n, 0, r, NULL);
}

/* ---- encoding: the examples of docs/PROTOCOL.md ---- */

static void test_encode_protocol_examples(void)
{
    hkv_request ping = { .op = HKV_OP_PING };
    CHECK(encodes_to(&ping, "01 00 00000000"));

    hkv_request set = { .op = HKV_OP_SET, .db = "default", .key = "k1", .key_len = 2,
                        .value = "hello", .value_len = 5 };
    CHECK(encodes_to(&set, "07 00 17000000 07 64656661756c74 02000000 6b31 "
                           "05000000 68656c6c6f"));
    set.durability = HKV_DUR_NONE;
    CHECK(encodes_to(&set, "07 01 17000000 07 64656661756c74 02000000 6b31 "
                           "05000000 68656c6c6f"));

    hkv_request get = { .op = HKV_OP_GET, .db = "default", .key = "k1", .key_len = 2 };
    CHECK(encodes_to(&get, "06 00 0e000000 07 64656661756c74 02000000 6b31"));

    hkv_request cas = { .op = HKV_OP_COMPARE_SET, .db = "default", .key = "k1", .key_len = 2,
                        .token = 41, .value = "world", .value_len = 5 };
    CHECK(encodes_to(&cas, "10 00 1f000000 07 64656661756c74 02000000 6b31 "
                           "2900000000000000 05000000 776f726c64"));

    hkv_request set_ttl = { .op = HKV_OP_SET_TTL, .db = "default", .key = "k1", .key_len = 2,
                            .token = 60000, .value = "hello", .value_len = 5 };
    CHECK(encodes_to(&set_ttl, "15 00 1f000000 07 64656661756c74 02000000 6b31 "
                               "60ea000000000000 05000000 68656c6c6f"));
    hkv_request ttl = { .op = HKV_OP_TTL, .db = "default", .key = "k1", .key_len = 2 };
    CHECK(encodes_to(&ttl, "16 00 0e000000 07 64656661756c74 02000000 6b31"));
}

/* ---- encoding: every other op, derived by hand from the field rules ---- */

static void test_encode_every_op(void)
{
    hkv_request q;
    q = (hkv_request){ .op = HKV_OP_STATS };
    CHECK(encodes_to(&q, "00 00 00000000"));
    q = (hkv_request){ .op = HKV_OP_CLOSE };
    CHECK(encodes_to(&q, "02 00 00000000"));
    q = (hkv_request){ .op = HKV_OP_CREATE, .db = "db1" };
    CHECK(encodes_to(&q, "03 00 04000000 03 646231"));
    q = (hkv_request){ .op = HKV_OP_INFO };     /* NULL db is "default" */
    CHECK(encodes_to(&q, "04 00 08000000 07 64656661756c74"));
    q = (hkv_request){ .op = HKV_OP_DROP, .db = "db1", .durability = HKV_DUR_NONE };
    CHECK(encodes_to(&q, "05 01 04000000 03 646231"));
    q = (hkv_request){ .op = HKV_OP_SET_IF_EXISTS, .key = "k1", .key_len = 2,
                       .value = "hello", .value_len = 5 };
    CHECK(encodes_to(&q, "08 00 17000000 07 64656661756c74 02000000 6b31 "
                         "05000000 68656c6c6f"));
    q.op = HKV_OP_SET_IF_NOT_EXISTS;
    CHECK(encodes_to(&q, "09 00 17000000 07 64656661756c74 02000000 6b31 "
                         "05000000 68656c6c6f"));
    q = (hkv_request){ .op = HKV_OP_SET, .db = "a", .key = "k", .key_len = 1,
                       .value = NULL, .value_len = 0 };     /* empty value is allowed */
    CHECK(encodes_to(&q, "07 00 0b000000 01 61 01000000 6b 00000000"));
    q = (hkv_request){ .op = HKV_OP_DELETE, .db = "default", .key = "k1", .key_len = 2 };
    CHECK(encodes_to(&q, "11 00 0e000000 07 64656661756c74 02000000 6b31"));
    q = (hkv_request){ .op = HKV_OP_COMPARE_DELETE, .db = "default", .key = "k1",
                       .key_len = 2, .token = 42 };
    CHECK(encodes_to(&q, "12 00 16000000 07 64656661756c74 02000000 6b31 "
                         "2a00000000000000"));
    hkv_batch_item items[2] = {
        { .kind = HKV_BATCH_SET, .key = "k1", .key_len = 2, .value = "hello", .value_len = 5 },
        { .kind = HKV_BATCH_DELETE, .key = "k2", .key_len = 2 },
    };
    q = (hkv_request){ .op = HKV_OP_WRITE_BATCH, .db = "default", .durability = HKV_DUR_BUCKET,
                       .items = items, .item_count = 2 };
    CHECK(encodes_to(&q, "13 02 23000000 07 64656661756c74 02000000 "
                         "00 02000000 6b31 05000000 68656c6c6f "
                         "01 02000000 6b32"));
    q.item_count = 0;
    CHECK(encodes_to(&q, "13 02 0c000000 07 64656661756c74 00000000"));
    /* Auth: u8 length, then the token (PROTOCOL.md's example) */
    q = (hkv_request){ .op = HKV_OP_AUTH, .key = "admin-token-1", .key_len = 13 };
    CHECK(encodes_to(&q, "14 00 0e000000 0d 61646d696e2d746f6b656e2d31"));
}

static void test_encode_appends_frames(void)
{
    hkv_buf b = {0};
    hkv_request ping = { .op = HKV_OP_PING };
    hkv_request get = { .op = HKV_OP_GET, .key = "k1", .key_len = 2 };
    REQUIRE(hkv_encode(&b, &ping) == HKV_OK);
    REQUIRE(hkv_encode(&b, &get) == HKV_OK);
    REQUIRE(hkv_encode(&b, &ping) == HKV_OK);
    uint8_t want[64];
    size_t n = unhex("01 00 00000000 06 00 0e000000 07 64656661756c74 02000000 6b31 "
                     "01 00 00000000", want, sizeof want);
    CHECK_EQ(b.len, n);
    CHECK(memcmp(b.data, want, n) == 0);
    hkv_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
}

static void test_encode_rejects_bad_arguments(void)
{
    char long_name[66];
    memset(long_name, 'a', 65);
    long_name[65] = 0;
    char max_name[65];
    memset(max_name, 'b', 64);
    max_name[64] = 0;
    hkv_buf b = {0};
    hkv_request ok = { .op = HKV_OP_PING };
    REQUIRE(hkv_encode(&b, &ok) == HKV_OK);
    size_t before = b.len;

    const char *bad_dbs[] = { "", long_name, "a b", "a/b", "caf\xc3\xa9", "x:y" };
    for (size_t i = 0; i < N_ELEMS(bad_dbs); i++) {
        hkv_request q = { .op = HKV_OP_CREATE, .db = bad_dbs[i] };
        CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    }
    hkv_request q = { .op = HKV_OP_CREATE, .db = max_name };
    CHECK_EQ(hkv_encode(&b, &q), HKV_OK);
    CHECK_EQ(b.len, before + 6 + 1 + 64);
    before = b.len;
    q = (hkv_request){ .op = HKV_OP_CREATE, .db = "A-z_0.9" };
    CHECK_EQ(hkv_encode(&b, &q), HKV_OK);
    before = b.len;

    q = (hkv_request){ .op = HKV_OP_GET, .key = "", .key_len = 0 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = HKV_OP_GET, .key = NULL, .key_len = 3 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = HKV_OP_GET, .key = "k", .key_len = (size_t)UINT32_MAX + 1 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = HKV_OP_SET, .key = "k", .key_len = 1, .value = NULL,
                       .value_len = 4 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = HKV_OP_SET, .key = "k", .key_len = 1, .durability = 3 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = 0x0a };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = 0x15 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = HKV_OP_AUTH };                   /* no token */
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    static const char long_token[HKV_AUTH_TOKEN_MAX + 1] = {0};
    q = (hkv_request){ .op = HKV_OP_AUTH, .key = long_token, .key_len = sizeof long_token };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    hkv_batch_item bad_kind = { .kind = 2, .key = "k", .key_len = 1 };
    q = (hkv_request){ .op = HKV_OP_WRITE_BATCH, .items = &bad_kind, .item_count = 1 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    hkv_batch_item empty_key = { .kind = HKV_BATCH_DELETE, .key = "", .key_len = 0 };
    q = (hkv_request){ .op = HKV_OP_WRITE_BATCH, .items = &empty_key, .item_count = 1 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    q = (hkv_request){ .op = HKV_OP_WRITE_BATCH, .items = NULL, .item_count = 1 };
    CHECK_EQ(hkv_encode(&b, &q), HKV_ERR_ARG);
    CHECK_EQ(b.len, before);     /* failures wrote nothing */
    hkv_buf_free(&b);
}

/* ---- decoding ---- */

static void test_decode_protocol_examples(void)
{
    uint8_t s[256];
    hkv_response r;
    CHECK_EQ(decode_hex(HKV_OP_PING, "01 00000000", &r, s), HKV_OK);
    CHECK_EQ(r.status, HKV_OK);
    CHECK_EQ(r.wire_status, HKV_WIRE_PONG);
    CHECK_EQ(r.frame_len, 5);

    CHECK_EQ(decode_hex(HKV_OP_SET, "00 08000000 2a00000000000000", &r, s), HKV_OK);
    CHECK_EQ(r.status, HKV_OK);
    CHECK(r.has_token);
    CHECK_EQ(r.token, 42);
    CHECK_EQ(r.data_len, 0);
    CHECK_EQ(r.frame_len, 13);

    CHECK_EQ(decode_hex(HKV_OP_GET, "04 0d000000 2a00000000000000 68656c6c6f", &r, s), HKV_OK);
    CHECK_EQ(r.status, HKV_OK);
    CHECK_EQ(r.token, 42);
    CHECK_EQ(r.data_len, 5);
    CHECK(memcmp(r.data, "hello", 5) == 0);

    CHECK_EQ(decode_hex(HKV_OP_COMPARE_SET, "07 08000000 2a00000000000000", &r, s), HKV_OK);
    CHECK_EQ(r.status, HKV_KEY_TOKEN_MISMATCH);
    CHECK(r.has_token);
    CHECK_EQ(r.token, 42);

    /* Ttl: the token, then the expiry and the ms left in data */
    CHECK_EQ(decode_hex(HKV_OP_TTL, "00 18000000 2a00000000000000 e803000000000000 6400000000000000", &r, s),
             HKV_OK);
    CHECK_EQ(r.status, HKV_OK);
    CHECK_EQ(r.token, 42);
    CHECK_EQ(r.data_len, 16);
    CHECK_EQ(r.data[0], 0xe8);
    CHECK_EQ(r.data[8], 0x64);
    CHECK_EQ(decode_hex(HKV_OP_TTL, "05 00000000", &r, s), HKV_OK);
    CHECK_EQ(r.status, HKV_KEY_NOT_FOUND);
    CHECK_EQ(decode_hex(HKV_OP_SET_TTL, "00 08000000 2a00000000000000", &r, s), HKV_OK);
    CHECK_EQ(r.token, 42);
}

static void test_decode_each_status(void)
{
    uint8_t s[256];
    hkv_response r;
    struct { uint8_t op; const char *hex; int status; uint32_t data_len; } cases[] = {
        { HKV_OP_GET, "02 00000000", HKV_DB_NOT_FOUND, 0 },
        { HKV_OP_CREATE, "03 00000000", HKV_DB_ALREADY_EXISTS, 0 },
        { HKV_OP_GET, "05 00000000", HKV_KEY_NOT_FOUND, 0 },
        { HKV_OP_DELETE, "05 00000000", HKV_KEY_NOT_FOUND, 0 },
        { HKV_OP_SET_IF_NOT_EXISTS, "06 00000000", HKV_KEY_ALREADY_EXISTS, 0 },
        { HKV_OP_COMPARE_DELETE, "07 08000000 0100000000000000", HKV_KEY_TOKEN_MISMATCH, 0 },
        { HKV_OP_SET, "08 03000000 626164", HKV_INVALID_REQUEST, 3 },
        { 0x0a, "08 03000000 626164", HKV_INVALID_REQUEST, 3 },   /* unknown op */
        { HKV_OP_SET, "09 03000000 626967", HKV_PAYLOAD_TOO_LARGE, 3 },
        { HKV_OP_SET, "10 06000000 6e6f7370616365", HKV_INTERNAL_ERROR, 6 },
        { HKV_OP_PING, "08 00000000", HKV_INVALID_REQUEST, 0 },
        { HKV_OP_CREATE, "00 00000000", HKV_OK, 0 },             /* no token */
        { HKV_OP_DROP, "00 08000000 0700000000000000", HKV_OK, 0 },  /* token */
        { HKV_OP_CLOSE, "00 00000000", HKV_OK, 0 },
        { HKV_OP_STATS, "00 02000000 7b7d", HKV_OK, 2 },
        { HKV_OP_GET, "04 08000000 0900000000000000", HKV_OK, 0 },   /* empty value */
        /* an 8-byte Info JSON is text, not a token */
        { HKV_OP_INFO, "00 08000000 7b2261223a31327d", HKV_OK, 8 },
        { HKV_OP_AUTH, "00 00000000", HKV_OK, 0 },
        { HKV_OP_AUTH, "11 03000000 626164", HKV_UNAUTHORIZED, 3 },
        { HKV_OP_GET, "11 03000000 626164", HKV_UNAUTHORIZED, 3 },
        { HKV_OP_STATS, "11 00000000", HKV_UNAUTHORIZED, 0 },
        { HKV_OP_SET, "12 02000000 726f", HKV_FORBIDDEN, 2 },
        { HKV_OP_CREATE, "12 02000000 726f", HKV_FORBIDDEN, 2 },
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int rc = decode_hex(cases[i].op, cases[i].hex, &r, s);
        if (rc != HKV_OK || r.status != cases[i].status || r.data_len != cases[i].data_len)
            fprintf(stderr, "  case %zu: rc %d status %d len %u\n", i, rc, r.status,
                    r.data_len);
        CHECK_EQ(rc, HKV_OK);
        CHECK_EQ(r.status, cases[i].status);
        CHECK_EQ(r.data_len, cases[i].data_len);
    }
    CHECK_EQ(decode_hex(HKV_OP_DROP, "00 08000000 0700000000000000", &r, s), HKV_OK);
    CHECK(r.has_token && r.token == 7);
    CHECK_EQ(decode_hex(HKV_OP_CREATE, "00 00000000", &r, s), HKV_OK);
    CHECK(!r.has_token);
    CHECK_EQ(decode_hex(HKV_OP_INFO, "00 08000000 7b2261223a31327d", &r, s), HKV_OK);
    CHECK(!r.has_token && memcmp(r.data, "{\"a\":12}", 8) == 0);
    CHECK_EQ(decode_hex(HKV_OP_SET, "10 06000000 6e6f7370616365", &r, s), HKV_OK);
    CHECK(memcmp(r.data, "nospac", 6) == 0);
}

static void test_decode_rejects_wrong_shapes(void)
{
    uint8_t s[256];
    hkv_response r;
    struct { uint8_t op; const char *hex; } cases[] = {
        { HKV_OP_SET, "00 04000000 2a000000" },          /* token not 8 bytes */
        { HKV_OP_SET, "00 00000000" },                   /* write without a token */
        { HKV_OP_CREATE, "00 04000000 2a000000" },
        { HKV_OP_CLOSE, "00 08000000 2a00000000000000" },
        { HKV_OP_GET, "04 07000000 2a000000000000" },    /* token cut short */
        { HKV_OP_COMPARE_SET, "07 00000000" },
        { HKV_OP_COMPARE_SET, "07 09000000 2a0000000000000000" },
        { HKV_OP_GET, "05 01000000 00" },                /* KeyNotFound has no payload */
        { HKV_OP_PING, "01 01000000 00" },
        { HKV_OP_GET, "01 00000000" },                   /* Pong answers only Ping */
        { HKV_OP_PING, "00 00000000" },
        { HKV_OP_SET, "04 08000000 2a00000000000000" },  /* KeyValueToken answers only Get */
        { HKV_OP_SET, "05 00000000" },                   /* Set never says KeyNotFound */
        { HKV_OP_GET, "07 08000000 2a00000000000000" },
        { HKV_OP_SET, "06 00000000" },
        { HKV_OP_GET, "03 00000000" },
        { HKV_OP_STATS, "02 00000000" },                 /* Stats names no database */
        { HKV_OP_AUTH, "00 08000000 2a00000000000000" }, /* Auth's Ok is empty */
        { HKV_OP_AUTH, "12 00000000" },                  /* Auth is never Forbidden */
        { HKV_OP_AUTH, "02 00000000" },                  /* Auth names no database */
        { HKV_OP_TTL, "00 08000000 2a00000000000000" },  /* Ttl's Ok is 24 bytes */
        { HKV_OP_SET_TTL, "05 00000000" },               /* SetTtl never says KeyNotFound */
        { HKV_OP_PING, "0a 00000000" },                  /* unknown statuses */
        { HKV_OP_PING, "13 00000000" },
        { HKV_OP_PING, "ff 00000000" },
        { 0x0a, "ff 00000000" },
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        int rc = decode_hex(cases[i].op, cases[i].hex, &r, s);
        if (rc != HKV_ERR_PROTOCOL)
            fprintf(stderr, "  case %zu (%s): rc %d\n", i, cases[i].hex, rc);
        CHECK_EQ(rc, HKV_ERR_PROTOCOL);
    }
}

static void test_decode_truncated_needs_more(void)
{
    uint8_t s[64];
    size_t n = unhex("04 0d000000 2a00000000000000 68656c6c6f", s, sizeof s);
    hkv_response r;
    for (size_t len = 0; len < n; len++) {
        size_t need = 0;
        CHECK_EQ(hkv_decode(HKV_OP_GET, s, len, 0, &r, &need), HKV_ERR_INCOMPLETE);
        CHECK_EQ(need, len < 5 ? 5 : n);
    }
    CHECK_EQ(hkv_decode(HKV_OP_GET, s, n, 0, &r, NULL), HKV_OK);
    CHECK_EQ(r.frame_len, n);
    /* An incomplete frame of an impossible status is refused as soon as the
     * header is there, without waiting for the payload. */
    CHECK_EQ(hkv_decode(HKV_OP_SET, s, 5, 0, &r, NULL), HKV_ERR_PROTOCOL);
}

static void test_decode_oversized_length(void)
{
    uint8_t s[16];
    hkv_response r;
    size_t need = 0;
    size_t n = unhex("00 ffffffff", s, sizeof s);
    CHECK_EQ(hkv_decode(HKV_OP_STATS, s, n, 0, &r, &need), HKV_ERR_PROTOCOL);
    n = unhex("00 41000001", s, sizeof s);    /* 16 MiB + 64 + 1 */
    CHECK_EQ(hkv_decode(HKV_OP_STATS, s, n, 0, &r, &need), HKV_ERR_PROTOCOL);
    n = unhex("00 40000001", s, sizeof s);
    s[1] = 0x40; s[2] = 0x00; s[3] = 0x00; s[4] = 0x01;   /* exactly the default limit */
    CHECK_EQ(hkv_decode(HKV_OP_STATS, s, n, 0, &r, &need), HKV_ERR_INCOMPLETE);
    CHECK_EQ(need, 5 + HKV_DEFAULT_MAX_RESPONSE);
    n = unhex("04 0d000000 2a00000000000000 68656c6c6f", s, sizeof s);
    CHECK_EQ(hkv_decode(HKV_OP_GET, s, n, 12, &r, &need), HKV_ERR_PROTOCOL);
    CHECK_EQ(hkv_decode(HKV_OP_GET, s, n, 13, &r, &need), HKV_OK);
}

static void test_decode_back_to_back_frames(void)
{
    uint8_t s[64];
    size_t n = unhex("01 00000000 00 08000000 2a00000000000000 05 00000000 ff", s, sizeof s);
    hkv_response r;
    size_t off = 0;
    CHECK_EQ(hkv_decode(HKV_OP_PING, s + off, n - off, 0, &r, NULL), HKV_OK);
    off += r.frame_len;
    CHECK_EQ(hkv_decode(HKV_OP_SET, s + off, n - off, 0, &r, NULL), HKV_OK);
    CHECK_EQ(r.token, 42);
    off += r.frame_len;
    CHECK_EQ(hkv_decode(HKV_OP_DELETE, s + off, n - off, 0, &r, NULL), HKV_OK);
    CHECK_EQ(r.status, HKV_KEY_NOT_FOUND);
    off += r.frame_len;
    CHECK_EQ(off, n - 1);
    size_t need = 0;
    CHECK_EQ(hkv_decode(HKV_OP_PING, s + off, n - off, 0, &r, &need), HKV_ERR_INCOMPLETE);
    CHECK_EQ(need, 5);
}

/* Random, bit-flipped and zeroed input: the decoder answers one of its three
 * results and never claims more bytes than it was given. */
static void test_decode_random_input(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint8_t s[64];
    const uint8_t ops[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
                            0x10, 0x11, 0x12, 0x13, 0x0a, 0xff };
    size_t base = unhex("04 0d000000 2a00000000000000 68656c6c6f", s, sizeof s);
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 200000; iter++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t len = (size_t)(x % sizeof s);
        uint8_t buf[64];
        if (iter % 3 == 0) {
            for (size_t i = 0; i < len; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                buf[i] = (uint8_t)x;
            }
            if (len >= 5 && (x & 1))
                buf[2] = buf[3] = buf[4] = 0;   /* plausible lengths */
        } else if (iter % 3 == 1) {
            memcpy(buf, s, base);
            buf[(x >> 8) % base] ^= (uint8_t)(1u << ((x >> 16) & 7));
            len = base;
        } else {
            memset(buf, 0, sizeof buf);
        }
        uint8_t op = ops[(x >> 24) % sizeof ops];
        hkv_response r;
        size_t need = 0;
        int rc = hkv_decode(op, buf, len, 64, &r, &need);
        if (rc == HKV_OK) {
            ok++;
            if (r.frame_len > len || r.data + r.data_len > buf + len)
                bad++;
        } else if (rc == HKV_ERR_INCOMPLETE) {
            if (need <= len || need > 5 + 64)
                bad++;
        } else if (rc != HKV_ERR_PROTOCOL) {
            bad++;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK(ok > 0);
}

static void test_status_names(void)
{
    CHECK(strcmp(hkv_status_str(HKV_OK), "ok") == 0);
    CHECK(strcmp(hkv_status_str(HKV_KEY_NOT_FOUND), "key not found") == 0);
    CHECK(strcmp(hkv_status_str(HKV_ERR_TIMEOUT), "timeout") == 0);
    CHECK(strcmp(hkv_status_str(12345), "unknown status") == 0);
    CHECK_EQ(HKV_INTERNAL_ERROR, -HKV_WIRE_INTERNAL_ERROR);
    CHECK(!hkv_is_client_error(HKV_OK));
    CHECK(!hkv_is_client_error(HKV_INTERNAL_ERROR));
    CHECK(hkv_is_client_error(HKV_ERR_IO));
    CHECK(hkv_is_client_error(HKV_ERR_NOMEM));
    CHECK_EQ(HKV_KEY_TOKEN_MISMATCH, -HKV_WIRE_KEY_TOKEN_MISMATCH);
    CHECK_EQ(HKV_UNAUTHORIZED, -HKV_WIRE_UNAUTHORIZED);
    CHECK_EQ(HKV_FORBIDDEN, -HKV_WIRE_FORBIDDEN);
    CHECK(strcmp(hkv_status_str(HKV_UNAUTHORIZED), "unauthorized") == 0);
    CHECK(strcmp(hkv_status_str(HKV_FORBIDDEN), "forbidden") == 0);
}

/* ---- the connection layer against a fake server ---- */

struct fake_step {
    size_t expect;        /* request bytes to read before answering */
    const uint8_t *reply;
    size_t reply_len;     /* 0: say nothing (the client must time out) */
};

struct fake {
    int lfd;
    int port;
    struct fake_step steps[4];
    int nsteps;
    int byte_by_byte;     /* write replies one byte at a time */
    int close_early;      /* close without answering */
    uint8_t got[16384];
    size_t got_len;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    size_t expect = 0;
    for (int s = 0; s < f->nsteps; s++) {
        const struct fake_step *st = &f->steps[s];
        expect += st->expect;
        while (f->got_len < expect) {
            ssize_t n = read(fd, f->got + f->got_len, sizeof f->got - f->got_len);
            if (n <= 0)
                goto out;
            f->got_len += (size_t)n;
        }
        if (f->close_early || st->reply_len == 0)
            break;
        if (f->byte_by_byte) {
            for (size_t i = 0; i < st->reply_len; i++) {
                if (write(fd, st->reply + i, 1) != 1)
                    goto out;
                usleep(100);
            }
        } else if (write(fd, st->reply, st->reply_len) != (ssize_t)st->reply_len) {
            goto out;
        }
    }
    if (!f->close_early) {
        char c;
        while (read(fd, &c, 1) > 0) {}     /* until the client closes */
    }
out:
    close(fd);
    return NULL;
}

static int fake_start(struct fake *f, pthread_t *th)
{
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(f->lfd, 4) != 0 || getsockname(f->lfd, (struct sockaddr *)&a, &al) != 0)
        return -1;
    f->port = ntohs(a.sin_port);
    return pthread_create(th, NULL, fake_main, f);
}

static hkv_conn *fake_connect(struct fake *f, int io_timeout_ms)
{
    char addr[64], err[128];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f->port);
    hkv_options o = { .io_timeout_ms = io_timeout_ms };
    hkv_conn *c = NULL;
    if (hkv_connect(addr, &o, &c, err, sizeof err) != HKV_OK)
        fprintf(stderr, "  connect: %s\n", err);
    return c;
}

static void test_conn_blocking_calls_on_split_response(void)
{
    uint8_t r1[32], r2[32], r3[32];
    struct fake f = { .byte_by_byte = 1, .nsteps = 3 };
    /* Get, CompareSet, Set with durability bucket */
    f.steps[0] = (struct fake_step){ 20, r1,
        unhex("04 0d000000 2a00000000000000 68656c6c6f", r1, sizeof r1) };
    f.steps[1] = (struct fake_step){ 37, r2, unhex("07 08000000 2b00000000000000", r2, sizeof r2) };
    f.steps[2] = (struct fake_step){ 30, r3,
        unhex("08 0c000000 62616420726571756573742e", r3, sizeof r3) };
    pthread_t th;
    REQUIRE(fake_start(&f, &th) == 0);
    hkv_conn *c = fake_connect(&f, 5000);
    REQUIRE(c != NULL);
    hkv_buf v = {0};
    uint64_t tok = 0;
    CHECK_EQ(hkv_get(c, "default", "k1", 2, &v, &tok), HKV_OK);
    CHECK_EQ(tok, 42);
    CHECK(v.len == 5 && memcmp(v.data, "hello", 5) == 0);
    CHECK_EQ(hkv_compare_set(c, "default", "k1", 2, 41, "world", 5, HKV_DUR_LOCAL, &tok),
             HKV_KEY_TOKEN_MISMATCH);
    CHECK_EQ(tok, 43);
    CHECK_EQ(hkv_set(c, "db1", "k1", 2, "valuevalue", 10, HKV_DUR_BUCKET, &tok),
             HKV_INVALID_REQUEST);
    CHECK(strcmp(hkv_errmsg(c), "bad request.") == 0);
    /* Bad arguments fail before sending and leave the connection usable. */
    CHECK_EQ(hkv_get(c, "no such/db", "k", 1, &v, &tok), HKV_ERR_ARG);
    CHECK_EQ(hkv_get(c, NULL, "", 0, &v, &tok), HKV_ERR_ARG);
    CHECK_EQ(hkv_set(c, NULL, "k", 1, "v", 1, 7, &tok), HKV_ERR_ARG);
    hkv_close(c);
    pthread_join(th, NULL);
    close(f.lfd);
    uint8_t want[128];
    size_t wn = unhex("06 00 0e000000 07 64656661756c74 02000000 6b31 "
                      "10 00 1f000000 07 64656661756c74 02000000 6b31 2900000000000000 "
                      "05000000 776f726c64 "
                      "07 02 18000000 03 646231 02000000 6b31 0a000000 76616c756576616c7565",
                      want, sizeof want);
    CHECK_EQ(f.got_len, wn);
    CHECK(memcmp(f.got, want, wn) == 0);
    hkv_buf_free(&v);
}

/* hkv_auth: the frame sent, Unauthorized and Forbidden with the server's message
   in hkv_errmsg, and arguments refused before anything is sent. */
static void test_conn_auth(void)
{
    uint8_t r1[32], r2[32], r3[32];
    struct fake f = { .nsteps = 3 };
    f.steps[0] = (struct fake_step){ 20, r1, unhex("11 0d000000 756e6b6e6f776e20746f6b656e", r1, sizeof r1) };
    f.steps[1] = (struct fake_step){ 20, r2, unhex("00 00000000", r2, sizeof r2) };
    f.steps[2] = (struct fake_step){ 20, r3, unhex("12 02000000 726f", r3, sizeof r3) };
    pthread_t th;
    REQUIRE(fake_start(&f, &th) == 0);
    hkv_conn *c = fake_connect(&f, 5000);
    REQUIRE(c != NULL);
    CHECK_EQ(hkv_auth(c, "wrong-token-9"), HKV_UNAUTHORIZED);
    CHECK(strcmp(hkv_errmsg(c), "unknown token") == 0);
    CHECK_EQ(hkv_auth(c, NULL), HKV_ERR_ARG);
    CHECK_EQ(hkv_auth(c, ""), HKV_ERR_ARG);
    char long_token[HKV_AUTH_TOKEN_MAX + 2];
    memset(long_token, 'x', sizeof long_token - 1);
    long_token[sizeof long_token - 1] = 0;
    CHECK_EQ(hkv_auth(c, long_token), HKV_ERR_ARG);
    CHECK(strstr(hkv_errmsg(c), "xxx") == NULL);      /* the token is never in the message */
    CHECK_EQ(hkv_auth(c, "admin-token-1"), HKV_OK);
    CHECK_EQ(hkv_set(c, NULL, "k1", 2, "v", 1, HKV_DUR_LOCAL, NULL), HKV_FORBIDDEN);
    CHECK(strcmp(hkv_errmsg(c), "ro") == 0);
    hkv_close(c);
    pthread_join(th, NULL);
    close(f.lfd);
    uint8_t want[128];
    size_t wn = unhex("14 00 0e000000 0d 77726f6e672d746f6b656e2d39 "
                      "14 00 0e000000 0d 61646d696e2d746f6b656e2d31 "
                      "07 00 13000000 07 64656661756c74 02000000 6b31 01000000 76", want, sizeof want);
    CHECK_EQ(f.got_len, wn);
    CHECK(memcmp(f.got, want, wn) == 0);
}

static void test_conn_pipeline_in_order(void)
{
    enum { N = 2000 };
    /* N pings then one Set: every reply arrives at once. */
    static uint8_t reply[N * 5 + 13];
    for (int i = 0; i < N; i++) {
        reply[i * 5] = 0x01;
        memset(reply + i * 5 + 1, 0, 4);
    }
    unhex("00 08000000 0500000000000000", reply + N * 5, 13);
    struct fake f = { .nsteps = 1 };
    f.steps[0] = (struct fake_step){ N * 6 + 25, reply, sizeof reply };
    pthread_t th;
    REQUIRE(fake_start(&f, &th) == 0);
    hkv_conn *c = fake_connect(&f, 5000);
    REQUIRE(c != NULL);
    hkv_request ping = { .op = HKV_OP_PING };
    for (int i = 0; i < N; i++)
        REQUIRE(hkv_pipe_add(c, &ping) == HKV_OK);
    hkv_request set = { .op = HKV_OP_SET, .key = "k1", .key_len = 2, .value = "v", .value_len = 1,
                        .durability = HKV_DUR_NONE };
    REQUIRE(hkv_pipe_add(c, &set) == HKV_OK);
    CHECK_EQ(hkv_pipe_pending(c), N + 1);
    CHECK_EQ(hkv_ping(c), HKV_ERR_ARG);   /* blocking calls refuse while responses are due */
    CHECK_EQ(hkv_pipe_send(c), HKV_OK);
    hkv_response r;
    int pongs = 0;
    for (int i = 0; i < N; i++)
        pongs += hkv_pipe_recv(c, &r) == HKV_OK && r.wire_status == HKV_WIRE_PONG;
    CHECK_EQ(pongs, N);
    CHECK_EQ(hkv_pipe_recv(c, &r), HKV_OK);
    CHECK(r.has_token && r.token == 5);
    CHECK_EQ(hkv_pipe_pending(c), 0);
    CHECK_EQ(hkv_pipe_recv(c, &r), HKV_ERR_ARG);
    hkv_close(c);
    pthread_join(th, NULL);
    close(f.lfd);
    CHECK_EQ(f.got_len, N * 6 + 25);
}

/* A server that answers each Ping as it reads it and blocks on its writes:
 * a pipeline far larger than the socket buffers deadlocks unless the client
 * reads responses while it is still sending. */
struct echo_server { int lfd; long pings; };

static void *echo_main(void *arg)
{
    struct echo_server *e = arg;
    int fd = accept(e->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    static uint8_t in[65536], out[65536 / 6 * 5 + 5];
    size_t carry = 0;
    for (;;) {
        ssize_t n = read(fd, in + carry, sizeof in - carry);
        if (n <= 0)
            break;
        size_t have = carry + (size_t)n, reqs = have / 6;
        memset(out, 0, reqs * 5);
        for (size_t i = 0; i < reqs; i++)
            out[i * 5] = 0x01;
        if (write(fd, out, reqs * 5) != (ssize_t)(reqs * 5))
            break;
        e->pings += (long)reqs;
        carry = have - reqs * 6;
        memmove(in, in + reqs * 6, carry);
    }
    close(fd);
    return NULL;
}

static void test_conn_long_pipeline_no_deadlock(void)
{
    enum { N = 2000000 };   /* 12 MB of requests, 10 MB of responses */
    struct echo_server e = {0};
    struct fake f = {0};
    pthread_t th;
    e.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    REQUIRE(bind(e.lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(e.lfd, 1) == 0);
    REQUIRE(getsockname(e.lfd, (struct sockaddr *)&a, &al) == 0);
    REQUIRE(pthread_create(&th, NULL, echo_main, &e) == 0);
    f.port = ntohs(a.sin_port);
    hkv_conn *c = fake_connect(&f, 10000);
    REQUIRE(c != NULL);
    hkv_request ping = { .op = HKV_OP_PING };
    for (int i = 0; i < N; i++)
        REQUIRE(hkv_pipe_add(c, &ping) == HKV_OK);
    CHECK_EQ(hkv_pipe_send(c), HKV_OK);
    long pongs = 0;
    hkv_response r;
    while (hkv_pipe_pending(c) > 0 && hkv_pipe_recv(c, &r) == HKV_OK)
        pongs++;
    CHECK_EQ(pongs, N);
    hkv_close(c);
    pthread_join(th, NULL);
    close(e.lfd);
    CHECK_EQ(e.pings, N);
}

static void test_conn_timeout_and_close(void)
{
    struct fake f = { .nsteps = 1 };
    f.steps[0].expect = 6;
    pthread_t th;
    REQUIRE(fake_start(&f, &th) == 0);
    hkv_conn *c = fake_connect(&f, 100);
    REQUIRE(c != NULL);
    uint64_t t0 = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    CHECK_EQ(hkv_ping(c), HKV_ERR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 - t0;
    CHECK(ms >= 90 && ms < 2000);
    CHECK_EQ(hkv_ping(c), HKV_ERR_IO);    /* broken after a timeout */
    hkv_close(c);
    pthread_join(th, NULL);
    close(f.lfd);

    struct fake g = { .nsteps = 1, .close_early = 1 };
    g.steps[0].expect = 6;
    REQUIRE(fake_start(&g, &th) == 0);
    c = fake_connect(&g, 5000);
    REQUIRE(c != NULL);
    CHECK_EQ(hkv_ping(c), HKV_ERR_IO);
    CHECK(strstr(hkv_errmsg(c), "closed") != NULL);
    hkv_close(c);
    pthread_join(th, NULL);
    close(g.lfd);
}

static void test_conn_protocol_error_breaks(void)
{
    uint8_t reply[16];
    size_t rn = unhex("04 08000000 2a00000000000000", reply, sizeof reply);  /* to a Ping */
    struct fake f = { .nsteps = 1 };
    f.steps[0] = (struct fake_step){ 6, reply, rn };
    pthread_t th;
    REQUIRE(fake_start(&f, &th) == 0);
    hkv_conn *c = fake_connect(&f, 5000);
    REQUIRE(c != NULL);
    CHECK_EQ(hkv_ping(c), HKV_ERR_PROTOCOL);
    CHECK(strstr(hkv_errmsg(c), "unexpected") != NULL);
    CHECK_EQ(hkv_ping(c), HKV_ERR_IO);
    hkv_close(c);
    pthread_join(th, NULL);
    close(f.lfd);
}

static void test_connect_errors(void)
{
    hkv_conn *c = (hkv_conn *)1;
    char err[128];
    CHECK_EQ(hkv_connect("nocolon", NULL, &c, err, sizeof err), HKV_ERR_ARG);
    CHECK(c == NULL);
    CHECK(strstr(err, "HOST:PORT") != NULL);
    CHECK_EQ(hkv_connect("127.0.0.1:", NULL, &c, err, sizeof err), HKV_ERR_ARG);
    CHECK_EQ(hkv_connect(":80", NULL, &c, err, sizeof err), HKV_ERR_ARG);
    CHECK_EQ(hkv_connect("127.0.0.1:80x", NULL, &c, err, sizeof err), HKV_ERR_ARG);
    CHECK_EQ(hkv_connect("[::1", NULL, &c, err, sizeof err), HKV_ERR_ARG);
    /* A port nobody listens on: bind one, close it, connect. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    REQUIRE(getsockname(fd, (struct sockaddr *)&a, &al) == 0);
    close(fd);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    CHECK_EQ(hkv_connect(addr, NULL, &c, err, sizeof err), HKV_ERR_IO);
    CHECK(strstr(err, "refused") != NULL);
    CHECK(c == NULL);
}

int main(void)
{
    RUN(test_encode_protocol_examples);
    RUN(test_encode_every_op);
    RUN(test_encode_appends_frames);
    RUN(test_encode_rejects_bad_arguments);
    RUN(test_decode_protocol_examples);
    RUN(test_decode_each_status);
    RUN(test_decode_rejects_wrong_shapes);
    RUN(test_decode_truncated_needs_more);
    RUN(test_decode_oversized_length);
    RUN(test_decode_back_to_back_frames);
    RUN(test_decode_random_input);
    RUN(test_status_names);
    RUN(test_conn_blocking_calls_on_split_response);
    RUN(test_conn_auth);
    RUN(test_conn_pipeline_in_order);
    RUN(test_conn_long_pipeline_no_deadlock);
    RUN(test_conn_timeout_and_close);
    RUN(test_conn_protocol_error_breaks);
    RUN(test_connect_errors);
    TEST_DONE();
}
