/*
 * hanudb_protocol.h: the wire constants of HanuDB's binary key-value protocol
 * (docs/PROTOCOL.md, version 1): op codes, response statuses, durability flags,
 * frame header sizes and limits. The one definition, shared by the server
 * (src/kv/kv_proto.h) and the client library (hanudb_client.h).
 */
#ifndef HANUDB_PROTOCOL_H
#define HANUDB_PROTOCOL_H

/* ---- wire constants (docs/PROTOCOL.md) ---- */
enum hkv_op {
    HKV_OP_STATS = 0x00,
    HKV_OP_PING = 0x01,
    HKV_OP_CLOSE = 0x02,
    HKV_OP_CREATE = 0x03,
    HKV_OP_INFO = 0x04,
    HKV_OP_DROP = 0x05,
    HKV_OP_GET = 0x06,
    HKV_OP_SET = 0x07,
    HKV_OP_SET_IF_EXISTS = 0x08,
    HKV_OP_SET_IF_NOT_EXISTS = 0x09,
    HKV_OP_COMPARE_SET = 0x10,
    HKV_OP_DELETE = 0x11,
    HKV_OP_COMPARE_DELETE = 0x12,
    HKV_OP_WRITE_BATCH = 0x13,
    HKV_OP_AUTH = 0x14,          /* presents a --tokens token for the rest of the connection */
    HKV_OP_SET_TTL = 0x15,       /* Set with a time to live: db key u64 ttl_ms value */
    HKV_OP_TTL = 0x16,           /* a key's expiry: db key; Ok with HKV_TTL_PAYLOAD bytes */
};

enum hkv_wire_status {
    HKV_WIRE_OK = 0x00,
    HKV_WIRE_PONG = 0x01,
    HKV_WIRE_DB_NOT_FOUND = 0x02,
    HKV_WIRE_DB_ALREADY_EXISTS = 0x03,
    HKV_WIRE_KEY_VALUE_TOKEN = 0x04,
    HKV_WIRE_KEY_NOT_FOUND = 0x05,
    HKV_WIRE_KEY_ALREADY_EXISTS = 0x06,
    HKV_WIRE_KEY_TOKEN_MISMATCH = 0x07,
    HKV_WIRE_INVALID_REQUEST = 0x08,
    HKV_WIRE_PAYLOAD_TOO_LARGE = 0x09,
    HKV_WIRE_INTERNAL_ERROR = 0x10,
    HKV_WIRE_UNAUTHORIZED = 0x11,    /* no Auth yet, or an unknown token */
    HKV_WIRE_FORBIDDEN = 0x12,       /* the token's scope or read-only flag refuses the op */
};

/* Durability of a write (request flags bits 0-1). Ignored by reads. */
enum hkv_durability {
    HKV_DUR_LOCAL = 0,   /* acknowledged after the fdatasync covering the record (default) */
    HKV_DUR_NONE = 1,    /* acknowledged once applied in memory and written to the page cache */
    HKV_DUR_BUCKET = 2,  /* copied to the bucket; servers without one answer InvalidRequest */
};

#define HKV_REQ_HEADER 6u            /* op, flags, u32 length */
#define HKV_RESP_HEADER 5u           /* status, u32 length */
#define HKV_DB_NAME_MAX 64u
#define HKV_BATCH_MAX 10000u         /* server limit on WriteBatch items */
#define HKV_AUTH_TOKEN_MAX 255u      /* bytes of the token an Auth op carries */
#define HKV_DEFAULT_MAX_RESPONSE (16u * 1024 * 1024 + 64)
#define HKV_TTL_MAX_MS 3153600000000ull   /* SetTtl's longest time to live: 100 years */
#define HKV_TTL_PAYLOAD 24u          /* Ttl's answer: u64 token | u64 expiry (ms since the epoch,
                                        0: none) | u64 ms left (0: none) */

#endif
