/*
 * resp_proto: the Redis protocol's request parser and reply writer (RESP2 and
 * RESP3). Pure functions over byte buffers: no sockets, no store, so they are
 * unit-tested (tests/test_resp_proto.c) and fuzzed (fuzz/fuzz_resp_request.c)
 * on their own.
 *
 * Requests come as a multibulk (`*N\r\n` then N bulk strings `$L\r\n...\r\n`)
 * or as an inline line (words split on blanks, "double" and 'single' quotes
 * as redis-server reads them). A request is a flat array of bulk strings:
 * anything nested is a protocol error, so the nesting limit is one level.
 * Every size has a limit (resp_limits); a violation is an error whose message
 * is redis-server's own ("Protocol error: invalid bulk length", ...): the
 * connection answers it and closes, as redis-server does.
 */
#ifndef HANU_RESP_PROTO_H
#define HANU_RESP_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"

typedef struct resp_limits {
    uint32_t max_args;        /* arguments of one command (redis-server: 1M) */
    uint32_t max_bulk;        /* bytes of one argument */
    uint32_t max_inline;      /* bytes of an inline line, and of a `*N` / `$L` line (64 KiB) */
    uint64_t max_request;     /* bytes of one whole command */
    int unauthenticated;      /* before AUTH: redis-server's own lower limits (10 args, 16 KiB bulks) */
} resp_limits;

#define RESP_DEFAULT_MAX_ARGS (1u << 20)
#define RESP_DEFAULT_MAX_INLINE (64u * 1024)

typedef struct resp_arg {
    const uint8_t *p;
    size_t len;
} resp_arg;

/* One parsed command. argv points into the input (multibulk) or into the
   request's own arena (inline, whose quotes are unescaped). Reused across calls;
   resp_request_free releases it. */
typedef struct resp_request {
    resp_arg *argv;
    size_t argc, cap;
    hanu_buf arena;
} resp_request;

enum resp_parse_result {
    RESP_PARSE_OK = 0,        /* a command (argc may be 0: an empty line or `*0`, skipped) */
    RESP_PARSE_MORE,          /* incomplete: *need says how many bytes the buffer must hold first */
    RESP_PARSE_ERROR,         /* *err: redis-server's message, without "-ERR " */
};

/* Parses one command at in[0..n). OK: *consumed bytes belong to it. MORE: *need is a
   lower bound of the bytes the next attempt needs (at least n + 1). */
int resp_parse(resp_request *r, const uint8_t *in, size_t n, const resp_limits *lim, size_t *consumed,
               size_t *need, const char **err);
void resp_request_free(resp_request *r);

/* ---- replies; proto is 2 or 3 (HELLO). Every writer returns HANU_OK or NOMEM. ---- */
int resp_w_simple(hanu_buf *b, const char *s);            /* +s */
int resp_w_error(hanu_buf *b, const char *s);             /* -s (s holds its code: "ERR ...") */
int resp_w_errorf(hanu_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int resp_w_int(hanu_buf *b, int64_t v);                   /* :v */
int resp_w_bulk(hanu_buf *b, const void *p, size_t n);    /* $n */
int resp_w_bulk_str(hanu_buf *b, const char *s);
int resp_w_null(hanu_buf *b, int proto);                  /* $-1 or _ */
int resp_w_null_array(hanu_buf *b, int proto);            /* *-1 or _ */
int resp_w_array(hanu_buf *b, size_t n);                  /* *n */
int resp_w_map(hanu_buf *b, int proto, size_t pairs);     /* %n, or *2n in RESP2 */
int resp_w_set(hanu_buf *b, int proto, size_t n);         /* ~n, or *n */
int resp_w_double(hanu_buf *b, int proto, double v);      /* ,v, or a bulk string in RESP2 */
int resp_w_verbatim(hanu_buf *b, int proto, const void *p, size_t n);   /* =n txt:..., or a bulk */
/* The bytes of the header of a bulk of n bytes ("$n\r\n"): writes into out, returns its length. */
size_t resp_bulk_header(char out[24], size_t n);

/* Redis's number parsing: a whole decimal integer in int64 range, no blanks or '+'. */
int resp_parse_i64(const uint8_t *p, size_t n, int64_t *v);
/* An unsigned decimal (SCAN's cursor, up to 2^64 - 1): 1 and *v, or 0. */
int resp_parse_u64(const uint8_t *p, size_t n, uint64_t *v);
/* A finite long double as redis-server reads INCRBYFLOAT's operands. */
int resp_parse_ld(const uint8_t *p, size_t n, long double *v);
/* Formats v as redis-server's INCRBYFLOAT answers (17 significant digits, no trailing zeros). */
size_t resp_format_ld(long double v, char *out, size_t cap);

#endif
