/*
 * kv_proto: the binary key-value protocol's request decoder and response
 * encoder (docs/PROTOCOL.md). Pure functions over byte buffers: no sockets,
 * no store, so they are unit-tested and fuzzed on their own.
 */
#ifndef HANU_KV_PROTO_H
#define HANU_KV_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "hanudb_protocol.h"

typedef struct kv_limits {
    uint32_t max_key;       /* default 1024 */
    uint32_t max_value;     /* default 1 MiB */
    uint32_t max_frame;     /* payload bytes, default 16 MiB + 64 */
} kv_limits;

typedef struct kv_request {
    uint8_t op;
    uint8_t durability;
    const uint8_t *db;
    uint8_t db_len;
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *value;
    uint32_t value_len;
    uint64_t token;
    uint64_t ttl_ms;        /* SetTtl: 1 .. HKV_TTL_MAX_MS */
    const uint8_t *secret;  /* Auth: the token's bytes */
    uint8_t secret_len;
    uint32_t batch_count;
    const uint8_t *batch;   /* items, validated */
    size_t batch_len;
} kv_request;

/* Ops that write (refused by followers, read-only tokens, a stopping server). */
static inline int kv_op_writes(uint8_t op)
{
    return op == HKV_OP_CREATE || op == HKV_OP_DROP || (op >= HKV_OP_SET && op <= HKV_OP_WRITE_BATCH) ||
           op == HKV_OP_SET_TTL;
}

/* Reads a request header: 0 with op/flags/len filled, or 1 when fewer than 6 bytes. */
int kv_read_header(const uint8_t *p, size_t avail, uint8_t *op, uint8_t *flags, uint32_t *len);

/* Decodes a payload. Returns HANU_OK, HANU_ERR_INVALID or HANU_ERR_TOO_LARGE with
   a static message in *why. The request points into payload. */
int kv_parse_request(uint8_t op, uint8_t flags, const uint8_t *payload, uint32_t len,
                     const kv_limits *lim, kv_request *req, const char **why);

/* Iterates a validated batch: *pos starts at 0; returns 1 per item, 0 at the end. */
int kv_batch_next(const kv_request *req, size_t *pos, uint8_t *kind, const uint8_t **key,
                  uint32_t *key_len, const uint8_t **value, uint32_t *value_len);

/* Appends one response frame to out. */
int kv_respond(hanu_buf *out, uint8_t status, const void *payload, size_t len);
int kv_respond_token(hanu_buf *out, uint8_t status, uint64_t token);

#endif
