/*
 * http_guard.h: the HTTP/1 framing rules that h2o 2.2.5 does not keep itself,
 * so that every request has exactly one reading (no request smuggling), and
 * the JSON error body for the errors h2o answers on its own.
 *
 * h2o parses request heads with picohttpparser's phr_parse_request and chunked
 * bodies with phr_decode_chunked, both called through libh2o's PLT: the hanudb
 * executable defines them (exported with --export-dynamic-symbol in the
 * Makefile), so h2o uses ours. Ours calls the library's head parser and then
 * checks the head (http_guard_check_head); the chunk decoder is our own, strict
 * one. A refused head is handed to h2o as a stand-in request "GET /" that
 * carries only the guard's verdict (x-hanu-refused, x-hanu-status) and no body:
 * h2o reads nothing more, the handler calls http_guard_answer, which answers
 * with the JSON error and closes the connection. Clients cannot send x-hanu-*
 * headers themselves (refused), so the handler trusts them.
 *
 * Everything here runs on the event loop thread only.
 */
#ifndef HANU_HTTP_GUARD_H
#define HANU_HTTP_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <h2o.h>
#include "base/base.h"

#define HTTP_GUARD_MAX_REQUEST_LINE 8192         /* longer: 414 */
#define HTTP_GUARD_MAX_HEAD (64 * 1024)          /* request line and header fields; more: 431 */
#define HTTP_GUARD_MAX_CHUNK_EXT 255             /* bytes of ";extensions" on one chunk-size line */
#define HTTP_GUARD_MAX_TRAILERS (16 * 1024)      /* bytes of trailer fields after the last chunk */

/* picohttpparser's types, as libh2o 2.2.5 was built with them. */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
struct phr_chunked_decoder {
    size_t bytes_left_in_chunk;
    char consume_trailer;        /* set by the caller: read trailers up to the final CRLF */
    char _hex_count;
    char _state;
};

/* The interposed parser: the library's, then the checks below. Same contract as
   picohttpparser's (> 0: head length; -1: error; -2: incomplete), except that a
   refused head returns > 0 with the stand-in request described above. */
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len);

/* Strict chunked decoding, in place, incrementally (picohttpparser's contract:
   *bufsz becomes the decoded length; returns -2 while incomplete, -1 on an error,
   else the number of bytes after the body left undecoded at buf + *bufsz). A
   chunk-size line is hex digits, optional ";extensions" (spaces or tabs allowed
   before ';'), CRLF; chunk data ends with CRLF; trailer lines end with CRLF. */
ssize_t phr_decode_chunked(struct phr_chunked_decoder *decoder, char *buf, size_t *bufsz);
int phr_decode_chunked_is_in_data(struct phr_chunked_decoder *decoder);

/* The verdict on a head the parser accepted (buf[0..head_len) is the raw head):
   0 when it may be served, else 400, 414 or 431 with *msg set to a constant. */
int http_guard_check_head(const char *buf, size_t head_len, const char *method, size_t method_len,
                          int minor_version, const struct phr_header *headers, size_t num_headers,
                          const char **msg);

/* A Content-Length above this is answered 413 before the body is read. */
void http_guard_set_body_limit(uint64_t limit);

/* From the handler: when the guard refused this request, answers it (JSON error,
   connection closed) and returns 1; else 0. */
int http_guard_answer(h2o_req_t *req);

/* Sends {"error":{"code":...,"message":...}} with status and reason; closes the
   connection after it when close is set. Works on a request h2o has not routed. */
void http_guard_send_error(h2o_req_t *req, int status, const char *reason, const char *message, int close);
/* Appends the body of every error answer, {"error":{"code":...,"message":...}}, to b. */
void http_error_json(hanu_buf *b, const char *code, const char *msg);

#endif
