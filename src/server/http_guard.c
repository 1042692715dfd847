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
 * the connection (http.c). Nothing else is changed.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

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
    const struct phr_header *first = NULL;
    for (size_t i = 0; i < *num_headers; i++) {
        struct phr_header *h = &headers[i];
        if (!h->name || h->name_len != 14 || strncasecmp(h->name, "content-length", 14) != 0) continue;
        if (!first) { first = h; continue; }
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
