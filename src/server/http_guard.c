/*
 * http_guard.c: refuses HTTP/1 requests with conflicting duplicate
 * Content-Length headers, which h2o 2.2.5 (like libmicrohttpd and libevent,
 * measured) accepts, framing the body by the first one: a request-smuggling
 * hazard behind any proxy that frames by another.
 *
 * h2o parses request heads with picohttpparser's phr_parse_request, which
 * libh2o-evloop calls through its PLT. This file defines that symbol in the
 * hanudb executable (exported with --export-dynamic-symbol in the Makefile),
 * calls the library's own parser, and renames a second Content-Length whose
 * value differs to "x-hanu-conflicting-content-length". h2o then frames the
 * request by the first one as before, and the handler answers 400 and closes
 * the connection (http.c).
 *
 * It also renames a Content-Length above the body limit to
 * "x-hanu-body-too-large", so that h2o hands the request over without reading
 * the body and the handler answers 413 with a JSON error and closes, instead
 * of h2o's own plain-text 413. Nothing else is changed.
 *
 * The errors h2o answers by itself (a chunked body that grows over the limit,
 * which no header announces; a malformed request; an Expect it does not
 * support) go through h2o_send_error_generic, also through the PLT: the
 * executable defines it too (exported the same way) and answers them with the
 * API's JSON error body instead of plain text, with h2o's status, reason and
 * connection handling.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <h2o.h>

static uint64_t body_limit = UINT64_MAX;

void http_guard_set_body_limit(uint64_t limit) { body_limit = limit; }

/* Digits only, at most 19 of them; UINT64_MAX otherwise (h2o then refuses it itself). */
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

struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

typedef int (*phr_parse_request_fn)(const char *, size_t, const char **, size_t *, const char **, size_t *,
                                    int *, struct phr_header *, size_t *, size_t);

int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len);

int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len)
{
    static phr_parse_request_fn real;
    if (!real) real = (phr_parse_request_fn)dlsym(RTLD_NEXT, "phr_parse_request");
    if (!real) return -1;
    int r = real(buf, len, method, method_len, path, path_len, minor_version, headers, num_headers, last_len);
    if (r <= 0) return r;
    struct phr_header *first = NULL;
    for (size_t i = 0; i < *num_headers; i++) {
        struct phr_header *h = &headers[i];
        if (!h->name || h->name_len != 14 || strncasecmp(h->name, "content-length", 14) != 0) continue;
        if (!first) {
            first = h;
            uint64_t n = parse_length(h->value, h->value_len);
            if (n != UINT64_MAX && n > body_limit) {
                /* Writable: h2o lowercases header names in place. */
                static char too_large[] = "x-hanu-body-too-large";
                h->name = too_large;
                h->name_len = sizeof too_large - 1;
                return r;
            }
            continue;
        }
        if (h->value_len != first->value_len || memcmp(h->value, first->value, h->value_len) != 0) {
            /* Writable: h2o lowercases header names in place. */
            static char marker[] = "x-hanu-conflicting-content-length";
            h->name = marker;
            h->name_len = sizeof marker - 1;
        }
    }
    return r;
}

typedef void (*send_error_fn)(h2o_req_t *, int, const char *, const char *, int);

void h2o_send_error_generic(h2o_req_t *req, int status, const char *reason, const char *body, int flags)
{
    static send_error_fn real;
    if (!real) real = (send_error_fn)dlsym(RTLD_NEXT, "h2o_send_error_generic");
    h2o_hostconf_t **hosts = req->conn && req->conn->ctx ? req->conn->ctx->globalconf->hosts : NULL;
    if (req->pathconf == NULL) {
        /* Not routed yet (the body was still being read): bind it to our only host,
           as h2o's own setup would. */
        if (!hosts || !hosts[0]) {
            if (real) real(req, status, reason, body, flags);
            return;
        }
        h2o_req_bind_conf(req, hosts[0], &hosts[0]->fallback_path);
    }
    if (flags & H2O_SEND_ERROR_HTTP1_CLOSE_CONNECTION) req->http1_is_persistent = 0;
    char msg[256];
    size_t m = 0;
    for (const char *p = body ? body : ""; *p && m + 7 < sizeof msg; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\') { msg[m++] = '\\'; msg[m++] = (char)ch; }
        else if (ch < 0x20) m += (size_t)snprintf(msg + m, sizeof msg - m, "\\u%04x", ch);
        else msg[m++] = (char)ch;
    }
    msg[m] = '\0';
    const char *code = status == 413 ? "too_large" : status == 400 ? "invalid_request"
                     : status == 417 ? "expectation_failed" : "http_error";
    size_t cap = m + 64;
    char *json = h2o_mem_alloc_pool(&req->pool, cap);
    int n = snprintf(json, cap, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, msg);
    req->res.status = status;
    req->res.reason = reason;
    req->res.content_length = (size_t)n;
    if (!(flags & H2O_SEND_ERROR_KEEP_HEADERS)) memset(&req->res.headers, 0, sizeof req->res.headers);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
    h2o_send_inline(req, json, (size_t)n);
}

/* Referenced from http.c so that the linker keeps this object in the executable. */
int http_guard_linked(void) { return 1; }
