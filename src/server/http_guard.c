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
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

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

/* Referenced from http.c so that the linker keeps this object in the executable. */
int http_guard_linked(void) { return 1; }
