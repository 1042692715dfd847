/*
 * hanudb_client.h: the C client of HanuDB's key-value server (`hanudb serve
 * --kv-addr`), speaking the binary protocol of docs/PROTOCOL.md (version 1).
 *
 * This header is the whole contract of the client library. It has three
 * layers, each usable on its own:
 *
 *   1. Pure encode/decode (no sockets, no allocation except growing the
 *      caller's hkv_buf): hkv_encode() appends one request frame to a buffer;
 *      hkv_decode() parses one response frame out of bytes received. These
 *      are what an event-loop client (bench/kvbench.c) or a fuzzer uses.
 *   2. A blocking connection (hkv_connect / hkv_close) with one call per
 *      operation: hkv_ping(), hkv_get(), hkv_set(), ... Each call sends one
 *      request and waits for its response.
 *   3. Pipelining on the same connection: hkv_pipe_add() encodes many
 *      requests, hkv_pipe_send() writes them, hkv_pipe_recv() returns their
 *      responses one by one, in the order the requests were added.
 *
 * Status codes
 * ------------
 * Every function that can fail returns an int: HKV_OK (0) on success, else a
 * negative code of enum hkv_status. A failure status sent by the server is
 * returned as the negated wire code (KeyNotFound 0x05 -> HKV_KEY_NOT_FOUND
 * == -5); the success statuses Ok, Pong and KeyValueToken all map to HKV_OK.
 * Client-side failures are HKV_ERR_* (-100 and below).
 *
 * After HKV_ERR_IO, HKV_ERR_TIMEOUT or HKV_ERR_PROTOCOL the connection is
 * broken (the byte stream may be out of step with the requests): every later
 * call on it returns HKV_ERR_IO at once; hkv_close() it and connect again.
 * Any other status leaves the connection usable.
 *
 * Authentication
 * --------------
 * A server started with --tokens answers HKV_UNAUTHORIZED to every op but
 * Ping and Close until the connection presents a token with hkv_auth(); the
 * token's scope and read-only flag then apply to every later call on that
 * connection (HKV_FORBIDDEN). Authentication belongs to the connection: the
 * library never reconnects on its own, so after hkv_close() and
 * hkv_connect() call hkv_auth() again.
 *
 * Error text
 * ----------
 * hkv_errmsg(conn) describes the last failed call on a connection: the
 * server's message for InvalidRequest, PayloadTooLarge, InternalError,
 * Unauthorized and Forbidden
 * (e.g. "no space left on device"), a client-side description otherwise
 * ("connect 127.0.0.1:8787: Connection refused"). The string is owned by the
 * connection and valid until the next call on it.
 *
 * Ownership
 * ---------
 * An hkv_buf is owned by the caller: zero-initialise it ({0}), pass it to as
 * many calls as you like (the library replaces its contents and grows it
 * with realloc as needed, so a reused buffer stops allocating), and free it
 * with hkv_buf_free(). Keys, values and database names passed in are only
 * read during the call. hkv_response pointers borrow memory owned by the
 * input buffer (hkv_decode) or by the connection (hkv_pipe_recv).
 *
 * Threads
 * -------
 * The library has no global state. An hkv_conn must be used by one thread at
 * a time (no internal locking); different connections may be used from
 * different threads freely. The pure functions are reentrant. Writes use
 * MSG_NOSIGNAL, so a closed peer never raises SIGPIPE.
 */
#ifndef HANUDB_CLIENT_H
#define HANUDB_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include "hanudb_protocol.h"
#include "hanudb_version.h"   /* HANUDB_VERSION* */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ---- */
enum hkv_status {
    HKV_OK = 0,                        /* Ok, Pong or KeyValueToken */
    /* Failure statuses sent by the server: -(wire code). */
    HKV_DB_NOT_FOUND = -0x02,
    HKV_DB_ALREADY_EXISTS = -0x03,
    HKV_KEY_NOT_FOUND = -0x05,
    HKV_KEY_ALREADY_EXISTS = -0x06,
    HKV_KEY_TOKEN_MISMATCH = -0x07,    /* *token receives the key's current token */
    HKV_INVALID_REQUEST = -0x08,       /* hkv_errmsg() has the server's message */
    HKV_PAYLOAD_TOO_LARGE = -0x09,     /* hkv_errmsg() names the limit */
    HKV_INTERNAL_ERROR = -0x10,        /* hkv_errmsg(): I/O error, no space, store stopped */
    HKV_UNAUTHORIZED = -0x11,          /* server has --tokens: no hkv_auth yet, or an unknown token */
    HKV_FORBIDDEN = -0x12,             /* the token is read-only, or does not cover the database */
    /* Client-side failures. */
    HKV_ERR_IO = -100,          /* connect/send/recv failed or the server closed: conn broken */
    HKV_ERR_TIMEOUT = -101,     /* connect or I/O timeout expired: conn broken */
    HKV_ERR_PROTOCOL = -102,    /* malformed or unexpected response: conn broken */
    HKV_ERR_ARG = -103,         /* bad argument (db name, empty key, size > u32); nothing sent */
    HKV_ERR_NOMEM = -104,       /* allocation failed; nothing sent */
    HKV_ERR_INCOMPLETE = -105,  /* hkv_decode only: more bytes needed (not an error) */
};

/* True for the client-side HKV_ERR_* codes, false for HKV_OK and server statuses. */
static inline int hkv_is_client_error(int status) { return status <= HKV_ERR_IO; }

/* A short static name for a status: "key not found", "timeout", ... Never NULL. */
const char *hkv_status_str(int status);

/* The version the library was built as ("0.1.0"; HANUDB_VERSION is the
 * headers'). Static string. */
const char *hanudb_client_version(void);

/* ---- buffers ---- */
/* A growable byte buffer owned by the caller: data[0..len) are valid bytes,
 * cap is the allocated size. Start from {0}; free with hkv_buf_free(). */
typedef struct hkv_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} hkv_buf;

/* Makes room for extra more bytes after len. HKV_OK or HKV_ERR_NOMEM. */
int hkv_buf_reserve(hkv_buf *b, size_t extra);
/* Frees data and zeroes the struct; safe on a zeroed buffer. */
void hkv_buf_free(hkv_buf *b);

/* ---- requests ---- */
enum hkv_batch_kind { HKV_BATCH_SET = 0, HKV_BATCH_DELETE = 1 };

typedef struct hkv_batch_item {
    uint8_t kind;          /* HKV_BATCH_SET or HKV_BATCH_DELETE */
    const void *key;
    size_t key_len;        /* 1 .. UINT32_MAX (the server's limit is lower, default 1 024) */
    const void *value;     /* set only; may be NULL when value_len is 0 */
    size_t value_len;
} hkv_batch_item;

/* One request. Fields an op does not use are ignored. */
typedef struct hkv_request {
    uint8_t op;                   /* enum hkv_op */
    uint8_t durability;           /* enum hkv_durability */
    const char *db;               /* NUL-terminated, 1-64 chars of [A-Za-z0-9_.-];
                                     NULL means "default" */
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    uint64_t token;               /* CompareSet, CompareDelete: the expected token */
                                  /* (Auth: the --tokens token goes in key/key_len, 1-255 bytes) */
    const hkv_batch_item *items;  /* WriteBatch */
    size_t item_count;
} hkv_request;

/*
 * Appends the frame of req to out (out->len grows by the frame size; earlier
 * contents are kept, so many requests can be encoded back to back).
 * Returns HKV_OK, HKV_ERR_ARG (unknown op, durability over 2, a bad db name,
 * an empty key, an unknown batch kind, a length or the payload over
 * UINT32_MAX) or
 * HKV_ERR_NOMEM; on failure out->len is unchanged. Server-side limits (key
 * and value size, batch items) are left to the server to enforce.
 */
int hkv_encode(hkv_buf *out, const hkv_request *req);

/* ---- responses ---- */
typedef struct hkv_response {
    uint8_t wire_status;     /* enum hkv_wire_status as received */
    int status;              /* HKV_OK or the negated failure status */
    int has_token;           /* 1 when token is set (writes, Get, KeyTokenMismatch) */
    uint64_t token;
    const uint8_t *data;     /* Get: the value; Stats/Info: JSON text; InvalidRequest,
                                PayloadTooLarge, InternalError: the message; else empty */
    uint32_t data_len;
    uint32_t frame_len;      /* header + payload bytes this frame occupied */
} hkv_response;

/*
 * Parses the response frame at the start of buf[0..len), answering a request
 * whose op was op (the response's shape depends on it).
 *
 * Returns:
 *  HKV_OK: *resp filled, resp->frame_len bytes used; resp->data points into buf.
 *  HKV_ERR_INCOMPLETE: the frame is not complete; *need is the total number
 *      of bytes required (5 while the header is incomplete, else 5 + length).
 *  HKV_ERR_PROTOCOL: length over max_payload (0 means HKV_DEFAULT_MAX_RESPONSE),
 *      an unknown status, a status this op cannot answer, or a payload of
 *      the wrong size for the status (e.g. a token that is not 8 bytes).
 * need may be NULL. Never reads outside buf[0..len).
 */
int hkv_decode(uint8_t op, const uint8_t *buf, size_t len, uint32_t max_payload,
               hkv_response *resp, size_t *need);

/* ---- connections ---- */
typedef struct hkv_conn hkv_conn;

typedef struct hkv_options {
    int connect_timeout_ms;   /* 0: 5 000; < 0: wait forever */
    int io_timeout_ms;        /* longest wait for one read or write; 0: 30 000; < 0: forever */
    uint32_t max_response;    /* largest response payload accepted; 0: HKV_DEFAULT_MAX_RESPONSE */
} hkv_options;

/*
 * Connects to addr, "HOST:PORT" (HOST a name, an IPv4 address or [IPv6]),
 * with TCP_NODELAY. opt may be NULL for the defaults. On success *out owns a
 * connection to be freed with hkv_close(). On failure *out is NULL, the
 * return is HKV_ERR_ARG (bad address), HKV_ERR_IO, HKV_ERR_TIMEOUT or
 * HKV_ERR_NOMEM, and when errbuf is not NULL a message is written to
 * errbuf[0..errlen) (NUL-terminated, truncated to fit).
 */
int hkv_connect(const char *addr, const hkv_options *opt, hkv_conn **out,
                char *errbuf, size_t errlen);

/* Closes the socket and frees the connection (and any unread responses).
 * Does not send the Close op. NULL is allowed. */
void hkv_close(hkv_conn *c);

/* The last failure on c (see "Error text"); "" after a success. */
const char *hkv_errmsg(const hkv_conn *c);

/* The socket descriptor (for poll or setsockopt); owned by c. */
int hkv_fd(const hkv_conn *c);

/*
 * Blocking calls: send one request, wait for its response. They return
 * HKV_ERR_ARG when pipelined responses are still unread (hkv_pipe_pending).
 * db NULL means "default". token may be NULL; when it is not, it receives
 * the record's token on success (the write's txn, or the value's token for
 * Get) and the key's current token on HKV_KEY_TOKEN_MISMATCH; it is left
 * alone otherwise. Create and Drop set *token only if the server sent one.
 */
int hkv_ping(hkv_conn *c);
/*
 * Presents token (NUL-terminated, 1-255 bytes) for the rest of the connection.
 * HKV_OK: later calls run with the token's rights (a server without --tokens
 * answers HKV_OK to any token). HKV_UNAUTHORIZED: unknown token, the connection
 * stays unauthenticated; the server closes it after its third failed Auth
 * (later calls: HKV_ERR_IO). HKV_ERR_ARG: empty or over 255 bytes, nothing sent.
 * The token is not kept by the library nor put in hkv_errmsg().
 */
int hkv_auth(hkv_conn *c, const char *token);
/* JSON text of server counters into json (replaced, not NUL-terminated). */
int hkv_stats(hkv_conn *c, hkv_buf *json);
int hkv_create(hkv_conn *c, const char *db, int durability, uint64_t *token);
/* JSON {"name":..,"id":..,"keys":..,"bytes":..} into json. HKV_DB_NOT_FOUND. */
int hkv_info(hkv_conn *c, const char *db, hkv_buf *json);
int hkv_drop(hkv_conn *c, const char *db, int durability, uint64_t *token);
/* The value replaces value's contents (value->len = its size). HKV_KEY_NOT_FOUND. */
int hkv_get(hkv_conn *c, const char *db, const void *key, size_t key_len,
            hkv_buf *value, uint64_t *token);
int hkv_set(hkv_conn *c, const char *db, const void *key, size_t key_len,
            const void *value, size_t value_len, int durability, uint64_t *token);
/* HKV_KEY_NOT_FOUND when the key is absent. */
int hkv_set_if_exists(hkv_conn *c, const char *db, const void *key, size_t key_len,
                      const void *value, size_t value_len, int durability, uint64_t *token);
/* HKV_KEY_ALREADY_EXISTS when the key is present. */
int hkv_set_if_not_exists(hkv_conn *c, const char *db, const void *key, size_t key_len,
                          const void *value, size_t value_len, int durability,
                          uint64_t *token);
/* Sets only when the key's token is expected: HKV_KEY_NOT_FOUND, HKV_KEY_TOKEN_MISMATCH. */
int hkv_compare_set(hkv_conn *c, const char *db, const void *key, size_t key_len,
                    uint64_t expected, const void *value, size_t value_len,
                    int durability, uint64_t *token);
int hkv_delete(hkv_conn *c, const char *db, const void *key, size_t key_len,
               int durability, uint64_t *token);
/* Set with a time to live of ttl_ms (1 .. HKV_TTL_MAX_MS): the key expires then
   (the server's clock). A plain set of the key later clears its expiry. */
int hkv_set_ttl(hkv_conn *c, const char *db, const void *key, size_t key_len, uint64_t ttl_ms,
                const void *value, size_t value_len, int durability, uint64_t *token);
/* A key's expiry: *expire_ms (ms since the epoch) and *left_ms, both 0 when it has
   none; *token its token (any may be NULL). HKV_KEY_NOT_FOUND. */
int hkv_ttl(hkv_conn *c, const char *db, const void *key, size_t key_len, uint64_t *expire_ms,
            uint64_t *left_ms, uint64_t *token);
int hkv_compare_delete(hkv_conn *c, const char *db, const void *key, size_t key_len,
                       uint64_t expected, int durability, uint64_t *token);
/* All items in one record (one token), applied all or nothing; at most
 * HKV_BATCH_MAX items (more: HKV_PAYLOAD_TOO_LARGE from the server). */
int hkv_write_batch(hkv_conn *c, const char *db, const hkv_batch_item *items,
                    size_t count, int durability, uint64_t *token);

/*
 * Pipelining. hkv_pipe_add() encodes req into the connection's send buffer
 * (nothing is sent; HKV_ERR_ARG/HKV_ERR_NOMEM leave the buffer unchanged).
 * hkv_pipe_send() writes every queued byte; while the socket is not
 * writable it reads the responses already arriving into the receive buffer,
 * so a long pipeline cannot deadlock with a server that stops reading while
 * its answers are unread. hkv_pipe_recv() returns the next response in
 * order (sending what is still queued first); resp->data borrows from the
 * connection and stays valid until the next call on c. The call returns
 * resp->status (HKV_OK or a server failure, the response is filled in both
 * cases), or HKV_ERR_* with resp untouched; HKV_ERR_ARG when nothing is
 * pending. hkv_errmsg() holds the server's message after a failure status.
 */
int hkv_pipe_add(hkv_conn *c, const hkv_request *req);
int hkv_pipe_send(hkv_conn *c);
int hkv_pipe_recv(hkv_conn *c, hkv_response *resp);
/* Requests added and not yet answered through hkv_pipe_recv. */
size_t hkv_pipe_pending(const hkv_conn *c);

#ifdef __cplusplus
}
#endif

#endif
