/*
 * http_guard.c: HTTP/1 framing rules on top of h2o 2.2.5 (see http_guard.h for
 * how it is wired in). h2o and its parser, tried as an outside tester would,
 * let some bytes after a request run as a second request, or read a request
 * differently from other parsers a proxy may use. Refused here, each with 400
 * and the connection closed (RFC 9112 sections 2.2, 3.2, 5, 6, 7.1):
 *
 *   - Transfer-Encoding with Content-Length, or in an HTTP/1.0 request;
 *   - Transfer-Encoding other than exactly one "chunked" (h2o reads only the
 *     last line, so "cow" then "chunked" was chunked);
 *   - a Content-Length that is not 1-19 digits, or two that differ (h2o frames
 *     by the first);
 *   - a folded header line (obs-fold; h2o keeps it as a nameless header);
 *   - a line ended by a bare LF (the parser accepts it, a proxy may not);
 *   - a method that is not a token;
 *   - no Host, or two, in HTTP/1.1;
 *   - client headers named x-hanu-* (ours);
 *   - a chunk-size line other than hex digits, ";extensions", CRLF (the
 *     library's decoder ignored anything after the digits: "0x4a" read as 0).
 *
 * A request line over HTTP_GUARD_MAX_REQUEST_LINE is 414, a head over
 * HTTP_GUARD_MAX_HEAD or over h2o's 100 header fields is 431; any other head
 * the parser refuses is 400: all with the JSON error body (h2o itself writes a
 * plain-text "Bad Request" for those). A Content-Length over the body limit is
 * renamed "x-hanu-body-too-large" so that h2o does not read the body and the
 * handler answers 413 (http.c).
 *
 * The errors h2o answers by itself (a chunked body that grows over the limit, a
 * broken chunked body, an Expect it does not support) go through
 * h2o_send_error_generic, also through the PLT: defined here too, it answers
 * them with the JSON error body, with h2o's status, reason and connection
 * handling.
 */
#include "http/http_guard.h"
#include "json/json.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static uint64_t body_limit = UINT64_MAX;

void http_guard_set_body_limit(uint64_t limit) { body_limit = limit; }

/* Digits only, at most 19 of them; UINT64_MAX otherwise. */
static uint64_t parse_length(const char *v, size_t n)
{
    uint64_t x = 0;
    if (n == 0 || n > 19) return UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return UINT64_MAX;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    return x;
}

/* RFC 9110 5.6.2 tchar. */
static int is_tchar(unsigned char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) return 1;
    return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static int name_is(const struct phr_header *h, const char *name, size_t len)
{
    return h->name_len == len && strncasecmp(h->name, name, len) == 0;
}

/* Whether buf[0..len), after the one empty line the parser skips, holds more than
   HTTP_GUARD_MAX_REQUEST_LINE bytes before the request line's CRLF. */
static int request_line_too_long(const char *buf, size_t len)
{
    size_t start = len >= 2 && buf[0] == '\r' && buf[1] == '\n' ? 2 : len >= 1 && buf[0] == '\n' ? 1 : 0;
    size_t lim = HTTP_GUARD_MAX_REQUEST_LINE + 2;
    return len - start >= lim && !memchr(buf + start, '\n', lim);
}

int http_guard_check_head(const char *buf, size_t head_len, const char *method, size_t method_len,
                          int minor_version, const struct phr_header *headers, size_t num_headers,
                          const char **msg)
{
    for (const char *p = buf, *end = buf + head_len; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        if (p == buf || p[-1] != '\r') { *msg = "a line of the request head ends with a bare LF; use CRLF"; return 400; }
    if (request_line_too_long(buf, head_len)) { *msg = "the request line is longer than 8192 bytes"; return 414; }
    if (head_len > HTTP_GUARD_MAX_HEAD) { *msg = "the request head is larger than 65536 bytes"; return 431; }
    if (method_len == 0) { *msg = "malformed request line"; return 400; }
    for (size_t i = 0; i < method_len; i++)
        if (!is_tchar((unsigned char)method[i])) { *msg = "the method is not a token"; return 400; }
    const struct phr_header *cl = NULL, *te = NULL;
    size_t hosts = 0;
    for (size_t i = 0; i < num_headers; i++) {
        const struct phr_header *h = &headers[i];
        if (!h->name) { *msg = "folded header line (obs-fold)"; return 400; }
        if (h->name_len >= 7 && strncasecmp(h->name, "x-hanu-", 7) == 0) {
            *msg = "header names starting with x-hanu- are reserved";
            return 400;
        }
        if (name_is(h, "content-length", 14)) {
            if (parse_length(h->value, h->value_len) == UINT64_MAX) {
                *msg = "Content-Length must be 1 to 19 digits";
                return 400;
            }
            if (cl && (cl->value_len != h->value_len || memcmp(cl->value, h->value, h->value_len) != 0)) {
                *msg = "conflicting Content-Length headers";
                return 400;
            }
            cl = h;
        } else if (name_is(h, "transfer-encoding", 17)) {
            if (te) { *msg = "more than one Transfer-Encoding header"; return 400; }
            te = h;
        } else if (name_is(h, "host", 4)) {
            hosts++;
        }
    }
    if (te) {
        if (te->value_len != 7 || strncasecmp(te->value, "chunked", 7) != 0) {
            *msg = "Transfer-Encoding must be exactly \"chunked\"";
            return 400;
        }
        if (cl) { *msg = "Transfer-Encoding together with Content-Length"; return 400; }
        if (minor_version == 0) { *msg = "Transfer-Encoding in an HTTP/1.0 request"; return 400; }
    }
    if (hosts > 1) { *msg = "more than one Host header"; return 400; }
    if (hosts == 0 && minor_version >= 1) { *msg = "HTTP/1.1 request without a Host header"; return 400; }
    return 0;
}

/* The stand-in request for a refused head: "GET / HTTP/1.1" with the verdict.
   Names are writable because h2o lowercases header names in place. */
static char refused_name[] = "x-hanu-refused";
static char status_name[] = "x-hanu-status";

static int stand_in(int status, const char *msg, int ret, const char **method, size_t *method_len,
                    const char **path, size_t *path_len, int *minor_version, struct phr_header *headers,
                    size_t *num_headers, size_t capacity)
{
    if (capacity < 2) return -1;
    *method = "GET";
    *method_len = 3;
    *path = "/";
    *path_len = 1;
    *minor_version = 1;
    headers[0] = (struct phr_header){ refused_name, sizeof refused_name - 1, msg, strlen(msg) };
    const char *s = status == 414 ? "414" : status == 431 ? "431" : "400";
    headers[1] = (struct phr_header){ status_name, sizeof status_name - 1, s, 3 };
    *num_headers = 2;
    return ret;
}

typedef int (*phr_parse_request_fn)(const char *, size_t, const char **, size_t *, const char **, size_t *,
                                    int *, struct phr_header *, size_t *, size_t);

/* Only empty lines so far (h2o closes such a connection without an answer). */
static int crlf_only(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len)
{
    static phr_parse_request_fn real;
    if (!real) real = (phr_parse_request_fn)dlsym(RTLD_NEXT, "phr_parse_request");
    if (!real) return -1;
    size_t capacity = *num_headers;
    int r = real(buf, len, method, method_len, path, path_len, minor_version, headers, num_headers, last_len);
    const char *msg;
    int status;
    if (r == -2) {
        /* Incomplete: refuse as soon as it is too long, rather than read on. */
        if (request_line_too_long(buf, len))
            return stand_in(414, "the request line is longer than 8192 bytes", (int)len, method, method_len,
                            path, path_len, minor_version, headers, num_headers, capacity);
        if (len > HTTP_GUARD_MAX_HEAD)
            return stand_in(431, "the request head is larger than 65536 bytes", (int)len, method, method_len,
                            path, path_len, minor_version, headers, num_headers, capacity);
        return r;
    }
    if (r == -1) {
        if (len <= 4 && crlf_only(buf, len)) return r;
        /* Too many header fields is an error of the parser: see whether it is the only one. */
        static struct phr_header more[HTTP_GUARD_MAX_HEAD / 4 + 2];
        const char *m, *p;
        size_t ml, pl, n = sizeof more / sizeof more[0];
        int mv, r2 = real(buf, len, &m, &ml, &p, &pl, &mv, more, &n, 0);
        status = 400;
        msg = "malformed request head";
        if (r2 != -1) {
            status = 431;
            msg = "more than 100 header fields";
        } else if (request_line_too_long(buf, len)) {
            status = 414;
            msg = "the request line is longer than 8192 bytes";
        }
        return stand_in(status, msg, (int)len, method, method_len, path, path_len, minor_version, headers,
                        num_headers, capacity);
    }
    if ((status = http_guard_check_head(buf, (size_t)r, *method, *method_len, *minor_version, headers,
                                        *num_headers, &msg)) != 0)
        return stand_in(status, msg, r, method, method_len, path, path_len, minor_version, headers, num_headers, capacity);
    for (size_t i = 0; i < *num_headers; i++) {
        struct phr_header *h = &headers[i];
        if (name_is(h, "content-length", 14)) {
            if (parse_length(h->value, h->value_len) > body_limit) {
                /* Writable: h2o lowercases header names in place. */
                static char too_large[] = "x-hanu-body-too-large";
                h->name = too_large;
                h->name_len = sizeof too_large - 1;
            }
            break;
        }
    }
    return r;
}

/* ---- chunked bodies ---- */

enum {
    CHUNK_SIZE,       /* hex digits */
    CHUNK_SIZE_WS,    /* spaces or tabs after the digits: ';' must follow */
    CHUNK_EXT,        /* after ';' up to CR */
    CHUNK_SIZE_LF,    /* CR seen */
    CHUNK_DATA,
    CHUNK_DATA_CR,
    CHUNK_DATA_LF,
    TRAILER_START,    /* at the start of a trailer line or of the final CRLF */
    TRAILER_LINE,
    TRAILER_LF,
    END_LF,
};

static int hex_value(unsigned char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Field-value bytes: HTAB, visible ASCII, SP, obs-text. */
static int is_text(unsigned char ch) { return ch == '\t' || (ch >= 0x20 && ch != 0x7f); }

/* Decodes in place; bytes_left_in_chunk counts trailer bytes once the last chunk
   is read, _hex_count the digits and then the extension bytes of a size line. */
ssize_t phr_decode_chunked(struct phr_chunked_decoder *d, char *buf, size_t *bufsz)
{
    size_t dst = 0, src = 0, n = *bufsz;
    ssize_t ret = -2;
    unsigned char count = (unsigned char)d->_hex_count;
    while (src < n) {
        unsigned char ch = (unsigned char)buf[src];
        switch (d->_state) {
        case CHUNK_SIZE: {
            int v = hex_value(ch);
            if (v >= 0) {
                if (count == sizeof(size_t) * 2) goto Error;
                d->bytes_left_in_chunk = d->bytes_left_in_chunk * 16 + (size_t)v;
                count++;
            } else if (count == 0) {
                goto Error;
            } else if (ch == ';') {
                count = 0;
                d->_state = CHUNK_EXT;
            } else if (ch == ' ' || ch == '\t') {
                d->_state = CHUNK_SIZE_WS;
            } else if (ch == '\r') {
                d->_state = CHUNK_SIZE_LF;
            } else {
                goto Error;
            }
            src++;
            break;
        }
        case CHUNK_SIZE_WS:
            if (ch == ';') { count = 0; d->_state = CHUNK_EXT; }
            else if (ch != ' ' && ch != '\t') goto Error;
            src++;
            break;
        case CHUNK_EXT:
            if (ch == '\r') d->_state = CHUNK_SIZE_LF;
            else if (!is_text(ch) || count++ == HTTP_GUARD_MAX_CHUNK_EXT) goto Error;
            src++;
            break;
        case CHUNK_SIZE_LF:
            if (ch != '\n') goto Error;
            src++;
            count = 0;
            if (d->bytes_left_in_chunk != 0) {
                d->_state = CHUNK_DATA;
            } else if (d->consume_trailer) {
                d->_state = TRAILER_START;
            } else {
                goto Complete;
            }
            break;
        case CHUNK_DATA: {
            size_t take = n - src < d->bytes_left_in_chunk ? n - src : d->bytes_left_in_chunk;
            if (dst != src) memmove(buf + dst, buf + src, take);
            src += take;
            dst += take;
            d->bytes_left_in_chunk -= take;
            if (d->bytes_left_in_chunk == 0) d->_state = CHUNK_DATA_CR;
            break;
        }
        case CHUNK_DATA_CR:
            if (ch != '\r') goto Error;
            src++;
            d->_state = CHUNK_DATA_LF;
            break;
        case CHUNK_DATA_LF:
            if (ch != '\n') goto Error;
            src++;
            d->_state = CHUNK_SIZE;
            break;
        case TRAILER_START:
            if (ch == '\r') { src++; d->_state = END_LF; break; }
            if (ch == ' ' || ch == '\t') goto Error;   /* obs-fold */
            d->_state = TRAILER_LINE;
            /* fall through */
        case TRAILER_LINE:
            if (ch == '\r') d->_state = TRAILER_LF;
            else if (!is_text(ch)) goto Error;
            if (++d->bytes_left_in_chunk > HTTP_GUARD_MAX_TRAILERS) goto Error;
            src++;
            break;
        case TRAILER_LF:
            if (ch != '\n') goto Error;
            src++;
            d->_state = TRAILER_START;
            break;
        case END_LF:
            if (ch != '\n') goto Error;
            src++;
            goto Complete;
        default:
            goto Error;
        }
    }
    goto Exit;
Complete:
    d->_state = CHUNK_SIZE;
    d->bytes_left_in_chunk = 0;
    count = 0;
    ret = (ssize_t)(n - src);
    goto Exit;
Error:
    ret = -1;
Exit:
    d->_hex_count = (char)count;
    if (dst != src) memmove(buf + dst, buf + src, n - src);
    *bufsz = dst;
    return ret;
}

int phr_decode_chunked_is_in_data(struct phr_chunked_decoder *d) { return d->_state == CHUNK_DATA; }

/* ---- JSON errors ---- */

void http_error_json(hanu_buf *b, const char *code, const char *msg)
{
    json_writer w;
    json_writer_init(&w, b);
    json_write_object_begin(&w);
    json_write_key(&w, "error", 5);
    json_write_object_begin(&w);
    json_write_key(&w, "code", 4);
    json_write_string(&w, code, strlen(code));
    json_write_key(&w, "message", 7);
    hanu_buf quoted = {0};   /* a message quoting the request may not be UTF-8 */
    if (json_escape_string(&quoted, msg, strlen(msg)) != HANU_OK)
        json_escape_string(&quoted, "(message not valid UTF-8)", 25);
    json_write_raw(&w, (const char *)quoted.data, quoted.len);
    hanu_buf_free(&quoted);
    json_write_object_end(&w);
    json_write_object_end(&w);
}

void http_guard_send_error(h2o_req_t *req, int status, const char *reason, const char *message, int close)
{
    h2o_hostconf_t **hosts = req->conn && req->conn->ctx ? req->conn->ctx->globalconf->hosts : NULL;
    if (req->pathconf == NULL) {
        /* Not routed yet (the head or body was still being read): bind it to our only
           host, as h2o's own setup would. */
        if (!hosts || !hosts[0]) return;
        h2o_req_bind_conf(req, hosts[0], &hosts[0]->fallback_path);
    }
    if (close) req->http1_is_persistent = 0;
    const char *code = status == 413 ? "too_large" : status == 400 ? "invalid_request"
                     : status == 408 ? "request_timeout" : status == 414 ? "uri_too_long"
                     : status == 417 ? "expectation_failed" : status == 431 ? "headers_too_large" : "http_error";
    hanu_buf b = {0};
    http_error_json(&b, code, message ? message : "");
    size_t n = b.len;
    char *json = h2o_mem_alloc_pool(&req->pool, n + 1);
    memcpy(json, b.data, n);
    hanu_buf_free(&b);
    req->res.status = status;
    req->res.reason = reason;
    req->res.content_length = n;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
    h2o_send_inline(req, json, n);
}

typedef void (*send_error_fn)(h2o_req_t *, int, const char *, const char *, int);

void h2o_send_error_generic(h2o_req_t *req, int status, const char *reason, const char *body, int flags)
{
    h2o_hostconf_t **hosts = req->conn && req->conn->ctx ? req->conn->ctx->globalconf->hosts : NULL;
    if (req->pathconf == NULL && (!hosts || !hosts[0])) {
        static send_error_fn real;
        if (!real) real = (send_error_fn)dlsym(RTLD_NEXT, "h2o_send_error_generic");
        if (real) real(req, status, reason, body, flags);
        return;
    }
    if (!(flags & H2O_SEND_ERROR_KEEP_HEADERS)) memset(&req->res.headers, 0, sizeof req->res.headers);
    http_guard_send_error(req, status, reason, body, (flags & H2O_SEND_ERROR_HTTP1_CLOSE_CONNECTION) != 0);
}

int http_guard_answer(h2o_req_t *req)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-hanu-refused"), -1);
    if (i < 0) return 0;
    ssize_t s = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-hanu-status"), -1);
    int status = 400;
    if (s >= 0 && req->headers.entries[s].value.len == 3) {
        const char *v = req->headers.entries[s].value.base;
        status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
    }
    const char *reason = status == 414 ? "URI Too Long" : status == 431 ? "Request Header Fields Too Large"
                                                                        : "Bad Request";
    /* The message is one of this file's constants, NUL-terminated. */
    http_guard_send_error(req, status, reason, req->headers.entries[i].value.base, 1);
    return 1;
}
