/*
 * kv_proto.c: request decoding and response encoding for the key-value
 * protocol (kv_proto.h, docs/PROTOCOL.md). Every length is checked against
 * the bytes that are really there before it is used.
 */
#include "kv/kv_proto.h"

int kv_read_header(const uint8_t *p, size_t avail, uint8_t *op, uint8_t *flags, uint32_t *len)
{
    if (avail < HKV_REQ_HEADER) return 1;
    *op = p[0];
    *flags = p[1];
    *len = hanu_get_u32(p + 2);
    return 0;
}

typedef struct cursor {
    const uint8_t *p;
    size_t left;
} cursor;

/* A u8 length (1 to max) then that many bytes; msgs: missing, bad length, past the payload. */
static int take_short(cursor *c, const uint8_t **out, uint8_t *len, unsigned max, const char *const msgs[3],
                      const char **why)
{
    if (c->left < 1) { *why = msgs[0]; return HANU_ERR_INVALID; }
    uint8_t n = c->p[0];
    if (n == 0 || n > max) { *why = msgs[1]; return HANU_ERR_INVALID; }
    if (c->left - 1 < n) { *why = msgs[2]; return HANU_ERR_INVALID; }
    *out = c->p + 1;
    *len = n;
    c->p += 1 + n;
    c->left -= 1 + (size_t)n;
    return HANU_OK;
}

static int take_db(cursor *c, kv_request *r, const char **why)
{
    static const char *const msgs[3] = { "missing database name", "database name must be 1 to 64 bytes",
                                         "database name runs past the payload" };
    return take_short(c, &r->db, &r->db_len, 64, msgs, why);
}

/* Auth: u8 length (1-255), then the token's bytes. */
static int take_secret(cursor *c, kv_request *r, const char **why)
{
    static const char *const msgs[3] = { "missing token", "token must be 1 to 255 bytes",
                                         "token runs past the payload" };
    return take_short(c, &r->secret, &r->secret_len, HKV_AUTH_TOKEN_MAX, msgs, why);
}

static int take_bytes(cursor *c, const uint8_t **out, uint32_t *len, const char *what, const char **why)
{
    if (c->left < 4) { *why = what; return HANU_ERR_INVALID; }
    uint32_t n = hanu_get_u32(c->p);
    if (c->left - 4 < n) { *why = what; return HANU_ERR_INVALID; }
    *out = c->p + 4;
    *len = n;
    c->p += 4 + (size_t)n;
    c->left -= 4 + (size_t)n;
    return HANU_OK;
}

static int take_key(cursor *c, kv_request *r, const kv_limits *lim, const char **why)
{
    int rc = take_bytes(c, &r->key, &r->key_len, "key length runs past the payload", why);
    if (rc) return rc;
    if (r->key_len == 0) { *why = "empty key"; return HANU_ERR_INVALID; }
    if (r->key_len > lim->max_key) { *why = "key longer than the key limit"; return HANU_ERR_TOO_LARGE; }
    return HANU_OK;
}

static int take_value(cursor *c, kv_request *r, const kv_limits *lim, const char **why)
{
    int rc = take_bytes(c, &r->value, &r->value_len, "value length runs past the payload", why);
    if (rc) return rc;
    if (r->value_len > lim->max_value) { *why = "value larger than the value limit"; return HANU_ERR_TOO_LARGE; }
    return HANU_OK;
}

static int take_token(cursor *c, kv_request *r, const char **why)
{
    if (c->left < 8) { *why = "missing token"; return HANU_ERR_INVALID; }
    r->token = hanu_get_u64(c->p);
    c->p += 8;
    c->left -= 8;
    return HANU_OK;
}

static int take_ttl(cursor *c, kv_request *r, const char **why)
{
    if (c->left < 8) { *why = "missing ttl"; return HANU_ERR_INVALID; }
    r->ttl_ms = hanu_get_u64(c->p);
    c->p += 8;
    c->left -= 8;
    if (r->ttl_ms == 0 || r->ttl_ms > HKV_TTL_MAX_MS) {
        *why = "ttl must be 1 to 3153600000000 ms (100 years)";
        return HANU_ERR_INVALID;
    }
    return HANU_OK;
}

static int take_batch(cursor *c, kv_request *r, const kv_limits *lim, const char **why)
{
    if (c->left < 4) { *why = "missing batch count"; return HANU_ERR_INVALID; }
    r->batch_count = hanu_get_u32(c->p);
    c->p += 4;
    c->left -= 4;
    if (r->batch_count == 0) { *why = "empty batch"; return HANU_ERR_INVALID; }
    if (r->batch_count > HKV_BATCH_MAX) { *why = "batch has more than 10000 items"; return HANU_ERR_TOO_LARGE; }
    r->batch = c->p;
    size_t start_left = c->left;
    for (uint32_t i = 0; i < r->batch_count; i++) {
        if (c->left < 1) { *why = "batch item runs past the payload"; return HANU_ERR_INVALID; }
        uint8_t kind = c->p[0];
        c->p++;
        c->left--;
        if (kind > 1) { *why = "batch item kind must be 0 (set) or 1 (delete)"; return HANU_ERR_INVALID; }
        kv_request item = {0};
        int rc = take_key(c, &item, lim, why);
        if (rc == HANU_OK && kind == 0) rc = take_value(c, &item, lim, why);
        if (rc) return rc;
    }
    r->batch_len = start_left - c->left;
    return HANU_OK;
}

int kv_parse_request(uint8_t op, uint8_t flags, const uint8_t *payload, uint32_t len,
                     const kv_limits *lim, kv_request *req, const char **why)
{
    memset(req, 0, sizeof *req);
    req->op = op;
    if (flags & ~3u) { *why = "unknown flag bits"; return HANU_ERR_INVALID; }
    req->durability = flags & 3u;
    if (req->durability == 3) { *why = "reserved durability value 3"; return HANU_ERR_INVALID; }
    cursor c = { payload, len };
    int rc = HANU_OK;
    switch (op) {
    case HKV_OP_STATS: case HKV_OP_PING: case HKV_OP_CLOSE:
        break;
    case HKV_OP_CREATE: case HKV_OP_INFO: case HKV_OP_DROP:
        rc = take_db(&c, req, why);
        break;
    case HKV_OP_GET: case HKV_OP_DELETE: case HKV_OP_TTL:
        rc = take_db(&c, req, why);
        if (!rc) rc = take_key(&c, req, lim, why);
        break;
    case HKV_OP_SET: case HKV_OP_SET_IF_EXISTS: case HKV_OP_SET_IF_NOT_EXISTS:
        rc = take_db(&c, req, why);
        if (!rc) rc = take_key(&c, req, lim, why);
        if (!rc) rc = take_value(&c, req, lim, why);
        break;
    case HKV_OP_COMPARE_SET:
        rc = take_db(&c, req, why);
        if (!rc) rc = take_key(&c, req, lim, why);
        if (!rc) rc = take_token(&c, req, why);
        if (!rc) rc = take_value(&c, req, lim, why);
        break;
    case HKV_OP_SET_TTL:
        rc = take_db(&c, req, why);
        if (!rc) rc = take_key(&c, req, lim, why);
        if (!rc) rc = take_ttl(&c, req, why);
        if (!rc) rc = take_value(&c, req, lim, why);
        break;
    case HKV_OP_COMPARE_DELETE:
        rc = take_db(&c, req, why);
        if (!rc) rc = take_key(&c, req, lim, why);
        if (!rc) rc = take_token(&c, req, why);
        break;
    case HKV_OP_WRITE_BATCH:
        rc = take_db(&c, req, why);
        if (!rc) rc = take_batch(&c, req, lim, why);
        break;
    case HKV_OP_AUTH:
        rc = take_secret(&c, req, why);
        break;
    default:
        *why = "unknown op code";
        return HANU_ERR_INVALID;
    }
    if (rc) return rc;
    if (c.left != 0) { *why = "trailing bytes after the last field"; return HANU_ERR_INVALID; }
    return HANU_OK;
}

int kv_batch_next(const kv_request *req, size_t *pos, uint8_t *kind, const uint8_t **key,
                  uint32_t *key_len, const uint8_t **value, uint32_t *value_len)
{
    if (*pos >= req->batch_len) return 0;
    const uint8_t *p = req->batch + *pos;
    *kind = p[0];
    *key_len = hanu_get_u32(p + 1);
    *key = p + 5;
    size_t used = 5 + (size_t)*key_len;
    if (*kind == 0) {
        *value_len = hanu_get_u32(p + used);
        *value = p + used + 4;
        used += 4 + (size_t)*value_len;
    } else {
        *value = NULL;
        *value_len = 0;
    }
    *pos += used;
    return 1;
}

int kv_respond(hanu_buf *out, uint8_t status, const void *payload, size_t len)
{
    int rc = hanu_buf_reserve(out, HKV_RESP_HEADER + len);
    if (rc) return rc;
    uint8_t *p = out->data + out->len;
    p[0] = status;
    hanu_put_u32(p + 1, (uint32_t)len);
    if (len) memcpy(p + HKV_RESP_HEADER, payload, len);
    out->len += HKV_RESP_HEADER + len;
    return HANU_OK;
}

int kv_respond_token(hanu_buf *out, uint8_t status, uint64_t token)
{
    uint8_t t[8];
    hanu_put_u64(t, token);
    return kv_respond(out, status, t, 8);
}
