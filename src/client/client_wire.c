/*
 * client_wire.c: the pure half of the key-value client: request encoding and
 * response decoding for docs/PROTOCOL.md (version 1), plus hkv_buf and status
 * names. No sockets here, so tests/test_client.c and fuzz/fuzz_client_decode.c
 * exercise it directly. Relies only on base.h's little-endian load/store.
 *
 * Decoding is strict: a response whose status the request's op cannot
 * produce, or whose payload has the wrong shape, is HKV_ERR_PROTOCOL. With one
 * response per request in order, such a frame means the stream is out of step
 * (or the server is wrong), and the caller must not trust what follows.
 */
#include "hanudb_client.h"
#include "base/base.h"

#include <assert.h>
#include <stdlib.h>

const char *hanudb_client_version(void)
{
    return HANUDB_VERSION;
}

const char *hkv_status_str(int status)
{
    switch (status) {
    case HKV_OK: return "ok";
    case HKV_DB_NOT_FOUND: return "database not found";
    case HKV_DB_ALREADY_EXISTS: return "database already exists";
    case HKV_KEY_NOT_FOUND: return "key not found";
    case HKV_KEY_ALREADY_EXISTS: return "key already exists";
    case HKV_KEY_TOKEN_MISMATCH: return "key token mismatch";
    case HKV_INVALID_REQUEST: return "invalid request";
    case HKV_PAYLOAD_TOO_LARGE: return "payload too large";
    case HKV_INTERNAL_ERROR: return "internal error";
    case HKV_UNAUTHORIZED: return "unauthorized";
    case HKV_FORBIDDEN: return "forbidden";
    case HKV_ERR_IO: return "connection error";
    case HKV_ERR_TIMEOUT: return "timeout";
    case HKV_ERR_PROTOCOL: return "protocol error";
    case HKV_ERR_ARG: return "invalid argument";
    case HKV_ERR_NOMEM: return "out of memory";
    case HKV_ERR_INCOMPLETE: return "incomplete response";
    default: return "unknown status";
    }
}

int hkv_buf_reserve(hkv_buf *b, size_t extra)
{
    if (extra <= b->cap - b->len)
        return HKV_OK;
    if (extra > SIZE_MAX / 2 - b->len)
        return HKV_ERR_NOMEM;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p)
        return HKV_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return HKV_OK;
}

void hkv_buf_free(hkv_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- encoding ---- */

/* Length of a valid db name, or 0 when it is not one. */
static size_t db_name_len(const char *db)
{
    size_t n = 0;
    for (; db[n]; n++) {
        char ch = db[n];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        if (!ok || n >= HKV_DB_NAME_MAX)
            return 0;
    }
    return n;
}

/* Which fields each op carries. */
enum { F_DB = 1, F_KEY = 2, F_VALUE = 4, F_TOKEN = 8, F_BATCH = 16, F_SECRET = 32 };

static int op_fields(uint8_t op)
{
    switch (op) {
    case HKV_OP_STATS: case HKV_OP_PING: case HKV_OP_CLOSE: return 0;
    case HKV_OP_CREATE: case HKV_OP_INFO: case HKV_OP_DROP: return F_DB;
    case HKV_OP_GET: case HKV_OP_DELETE: case HKV_OP_TTL: return F_DB | F_KEY;
    case HKV_OP_SET: case HKV_OP_SET_IF_EXISTS: case HKV_OP_SET_IF_NOT_EXISTS:
        return F_DB | F_KEY | F_VALUE;
    case HKV_OP_COMPARE_SET: return F_DB | F_KEY | F_TOKEN | F_VALUE;
    case HKV_OP_SET_TTL: return F_DB | F_KEY | F_TOKEN | F_VALUE;   /* the ttl in token */
    case HKV_OP_COMPARE_DELETE: return F_DB | F_KEY | F_TOKEN;
    case HKV_OP_WRITE_BATCH: return F_DB | F_BATCH;
    case HKV_OP_AUTH: return F_SECRET;      /* the token in key/key_len, u8-length-prefixed */
    default: return -1;
    }
}

/* Adds n to *total, failing when the sum leaves the u32 range of a length. */
static int add_len(uint64_t *total, uint64_t n)
{
    if (n > UINT32_MAX || *total + n > UINT32_MAX)
        return HKV_ERR_ARG;
    *total += n;
    return HKV_OK;
}

static uint8_t *put_bytes(uint8_t *p, const void *src, size_t n)
{
    if (n)
        memcpy(p, src, n);
    return p + n;
}

static uint8_t *put_lenbytes(uint8_t *p, const void *src, size_t n)
{
    hanu_put_u32(p, (uint32_t)n);
    return put_bytes(p + 4, src, n);
}

int hkv_encode(hkv_buf *out, const hkv_request *req)
{
    int fields = op_fields(req->op);
    if (fields < 0 || req->durability > HKV_DUR_BUCKET)
        return HKV_ERR_ARG;

    /* Validate and size the payload first, so a failure writes nothing. */
    uint64_t plen = 0;
    const char *db = req->db ? req->db : "default";
    size_t dblen = 0;
    if (fields & F_DB) {
        dblen = db_name_len(db);
        if (dblen == 0)
            return HKV_ERR_ARG;
        plen += 1 + dblen;
    }
    if (fields & F_KEY) {
        if (req->key_len == 0 || (!req->key && req->key_len) ||
            add_len(&plen, 4 + (uint64_t)req->key_len) != HKV_OK)
            return HKV_ERR_ARG;
    }
    if (fields & F_SECRET) {
        if (req->key_len == 0 || req->key_len > HKV_AUTH_TOKEN_MAX || !req->key)
            return HKV_ERR_ARG;
        plen += 1 + req->key_len;
    }
    if ((fields & F_TOKEN) && add_len(&plen, 8) != HKV_OK)
        return HKV_ERR_ARG;
    if (fields & F_VALUE) {
        if ((!req->value && req->value_len) ||
            add_len(&plen, 4 + (uint64_t)req->value_len) != HKV_OK)
            return HKV_ERR_ARG;
    }
    if (fields & F_BATCH) {
        if ((req->item_count && !req->items) || add_len(&plen, 4) != HKV_OK ||
            req->item_count > UINT32_MAX)
            return HKV_ERR_ARG;
        for (size_t i = 0; i < req->item_count; i++) {
            const hkv_batch_item *it = &req->items[i];
            if (it->kind > HKV_BATCH_DELETE || it->key_len == 0 || !it->key ||
                add_len(&plen, 1 + 4 + (uint64_t)it->key_len) != HKV_OK)
                return HKV_ERR_ARG;
            if (it->kind == HKV_BATCH_SET &&
                ((!it->value && it->value_len) ||
                 add_len(&plen, 4 + (uint64_t)it->value_len) != HKV_OK))
                return HKV_ERR_ARG;
        }
    }

    if (hkv_buf_reserve(out, HKV_REQ_HEADER + (size_t)plen) != HKV_OK)
        return HKV_ERR_NOMEM;
    uint8_t *start = out->data + out->len, *p = start;
    p[0] = req->op;
    p[1] = req->durability;
    hanu_put_u32(p + 2, (uint32_t)plen);
    p += HKV_REQ_HEADER;
    if (fields & F_DB) {
        *p++ = (uint8_t)dblen;
        p = put_bytes(p, db, dblen);
    }
    if (fields & F_KEY)
        p = put_lenbytes(p, req->key, req->key_len);
    if (fields & F_SECRET) {
        *p++ = (uint8_t)req->key_len;
        p = put_bytes(p, req->key, req->key_len);
    }
    if (fields & F_TOKEN) {
        hanu_put_u64(p, req->token);
        p += 8;
    }
    if (fields & F_VALUE)
        p = put_lenbytes(p, req->value, req->value_len);
    if (fields & F_BATCH) {
        hanu_put_u32(p, (uint32_t)req->item_count);
        p += 4;
        for (size_t i = 0; i < req->item_count; i++) {
            const hkv_batch_item *it = &req->items[i];
            *p++ = it->kind;
            p = put_lenbytes(p, it->key, it->key_len);
            if (it->kind == HKV_BATCH_SET)
                p = put_lenbytes(p, it->value, it->value_len);
        }
    }
    assert((size_t)(p - start) == HKV_REQ_HEADER + plen);
    out->len += (size_t)(p - start);
    return HKV_OK;
}

/* ---- decoding ---- */

/* The success status of each op and the shape of its Ok payload. */
enum ok_shape { OK_EMPTY, OK_TOKEN, OK_EMPTY_OR_TOKEN, OK_TEXT, OK_TTL };

static int op_known(uint8_t op) { return op_fields(op) >= 0; }

/* May op be answered with wire status st? Unknown ops accept any status. */
static int status_allowed(uint8_t op, uint8_t st)
{
    if (!op_known(op))
        return 1;
    int fields = op_fields(op);
    switch (st) {
    case HKV_WIRE_OK: return op != HKV_OP_PING && op != HKV_OP_GET;
    case HKV_WIRE_PONG: return op == HKV_OP_PING;
    case HKV_WIRE_KEY_VALUE_TOKEN: return op == HKV_OP_GET;
    case HKV_WIRE_DB_NOT_FOUND: return (fields & F_DB) != 0;
    case HKV_WIRE_DB_ALREADY_EXISTS: return op == HKV_OP_CREATE;
    case HKV_WIRE_KEY_NOT_FOUND:
        return op == HKV_OP_GET || op == HKV_OP_SET_IF_EXISTS || op == HKV_OP_COMPARE_SET ||
               op == HKV_OP_DELETE || op == HKV_OP_COMPARE_DELETE || op == HKV_OP_TTL;
    case HKV_WIRE_KEY_ALREADY_EXISTS: return op == HKV_OP_SET_IF_NOT_EXISTS;
    case HKV_WIRE_KEY_TOKEN_MISMATCH:
        return op == HKV_OP_COMPARE_SET || op == HKV_OP_COMPARE_DELETE;
    case HKV_WIRE_INVALID_REQUEST: case HKV_WIRE_PAYLOAD_TOO_LARGE:
    case HKV_WIRE_INTERNAL_ERROR: case HKV_WIRE_UNAUTHORIZED:
        return 1;
    case HKV_WIRE_FORBIDDEN: return op != HKV_OP_AUTH;
    default: return 0;
    }
}

static enum ok_shape ok_shape(uint8_t op)
{
    switch (op) {
    case HKV_OP_STATS: case HKV_OP_INFO: return OK_TEXT;
    case HKV_OP_CLOSE: case HKV_OP_AUTH: return OK_EMPTY;
    case HKV_OP_CREATE: case HKV_OP_DROP: return OK_EMPTY_OR_TOKEN;
    case HKV_OP_TTL: return OK_TTL;
    default: return op_known(op) ? OK_TOKEN : OK_TEXT;
    }
}

int hkv_decode(uint8_t op, const uint8_t *buf, size_t len, uint32_t max_payload,
               hkv_response *resp, size_t *need)
{
    if (max_payload == 0)
        max_payload = HKV_DEFAULT_MAX_RESPONSE;
    if (len < HKV_RESP_HEADER) {
        if (need)
            *need = HKV_RESP_HEADER;
        return HKV_ERR_INCOMPLETE;
    }
    uint8_t st = buf[0];
    uint32_t plen = hanu_get_u32(buf + 1);
    if (plen > max_payload || !status_allowed(op, st))
        return HKV_ERR_PROTOCOL;
    size_t total = (size_t)HKV_RESP_HEADER + plen;
    if (len < total) {
        if (need)
            *need = total;
        return HKV_ERR_INCOMPLETE;
    }
    const uint8_t *p = buf + HKV_RESP_HEADER;
    hkv_response r = {0};
    r.wire_status = st;
    r.frame_len = (uint32_t)total;
    r.data = p;   /* never NULL, so callers may memcpy from it with data_len 0 */
    switch (st) {
    case HKV_WIRE_OK: {
        r.status = HKV_OK;
        enum ok_shape shape = ok_shape(op);
        if (shape == OK_TEXT) {
            r.data_len = plen;
        } else if (shape == OK_TTL) {   /* token, then expiry and ms left in data */
            if (plen != HKV_TTL_PAYLOAD)
                return HKV_ERR_PROTOCOL;
            r.has_token = 1;
            r.token = hanu_get_u64(p);
            r.data = p + 8;
            r.data_len = plen - 8;
        } else if (plen == 8 && shape != OK_EMPTY) {
            r.has_token = 1;
            r.token = hanu_get_u64(p);
        } else if (!(plen == 0 && (shape == OK_EMPTY || shape == OK_EMPTY_OR_TOKEN))) {
            return HKV_ERR_PROTOCOL;
        }
        break;
    }
    case HKV_WIRE_PONG:
        if (plen != 0)
            return HKV_ERR_PROTOCOL;
        r.status = HKV_OK;
        break;
    case HKV_WIRE_KEY_VALUE_TOKEN:
        if (plen < 8)
            return HKV_ERR_PROTOCOL;
        r.status = HKV_OK;
        r.has_token = 1;
        r.token = hanu_get_u64(p);
        r.data = p + 8;
        r.data_len = plen - 8;
        break;
    case HKV_WIRE_KEY_TOKEN_MISMATCH:
        if (plen != 8)
            return HKV_ERR_PROTOCOL;
        r.status = HKV_KEY_TOKEN_MISMATCH;
        r.has_token = 1;
        r.token = hanu_get_u64(p);
        break;
    case HKV_WIRE_DB_NOT_FOUND: case HKV_WIRE_DB_ALREADY_EXISTS:
    case HKV_WIRE_KEY_NOT_FOUND: case HKV_WIRE_KEY_ALREADY_EXISTS:
        if (plen != 0)
            return HKV_ERR_PROTOCOL;
        r.status = -(int)st;
        break;
    case HKV_WIRE_INVALID_REQUEST: case HKV_WIRE_PAYLOAD_TOO_LARGE:
    case HKV_WIRE_INTERNAL_ERROR: case HKV_WIRE_UNAUTHORIZED: case HKV_WIRE_FORBIDDEN:
        r.status = -(int)st;
        r.data_len = plen;
        break;
    default:
        return HKV_ERR_PROTOCOL;
    }
    *resp = r;
    return HKV_OK;
}
