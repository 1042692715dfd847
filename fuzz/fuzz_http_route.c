/*
 * fuzz_http_route.c: libFuzzer target for what the router reads from a request
 * besides its framing (src/http/http_route.c, http_auth.c): the path split
 * into segments and named, each segment percent-decoded, and the Host value
 * split into name and port.
 *
 * Checked: a named path has exactly the segments its shape says, non-empty,
 * inside the input and without '/'; a decoded segment is never longer than
 * its input or the room given, equals its input when it has no '%', and
 * decodes back from its own full percent-encoding; an authority that parses
 * has a non-empty host inside the input and a port of 0..65535 after a ':'.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "http/http_internal.h"

static const size_t segments_of[PATH_COUNT] = {
    [PATH_HEALTH] = 1, [PATH_STATUS] = 1, [PATH_METRICS] = 1, [PATH_COLLECTIONS] = 1,
    [PATH_COLLECTION] = 2, [PATH_DOCS] = 3, [PATH_BATCH] = 3, [PATH_DOC] = 4,
    [PATH_FIND] = 3, [PATH_SEARCH] = 3, [PATH_AGGS] = 3, [PATH_SNAPSHOT] = 2, [PATH_EXPORT] = 3,
    [PATH_DOC_UPDATE] = 5, [PATH_UPDATE] = 3, [PATH_DELETE_QUERY] = 3, [PATH_IMPORT] = 3, [PATH_AUDIT] = 2,
};

/* A path added to the router but not to the table above fails at once, not when the
   fuzzer happens to reach it (PATH_IMPORT was missing for a day). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (int p = PATH_UNKNOWN + 1; p < PATH_COUNT; p++) assert(segments_of[p] > 0);
    return 0;
}

static void check_segment(const char *s, size_t len)
{
    char out[300], again[300], enc[3 * sizeof out];
    ssize_t n = http_decode_segment(s, len, out, sizeof out);
    if (n < 0) return;
    assert((size_t)n <= len && (size_t)n <= sizeof out);
    if (!memchr(s, '%', len)) assert((size_t)n == len && memcmp(out, s, len) == 0);
    static const char hex[] = "0123456789abcdef";
    for (ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)out[i];
        enc[3 * i] = '%';
        enc[3 * i + 1] = hex[ch >> 4];
        enc[3 * i + 2] = hex[ch & 15];
    }
    ssize_t m = http_decode_segment(enc, 3 * (size_t)n, again, sizeof again);
    assert(m == n && memcmp(again, out, (size_t)n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    const char *seg[HTTP_MAX_SEGMENTS];
    size_t segl[HTTP_MAX_SEGMENTS];
    int path = http_match_path(in, size, seg, segl);
    assert(path >= PATH_UNKNOWN && path < PATH_COUNT);
    assert(path == PATH_UNKNOWN || segments_of[path] > 0);   /* a named path missing from the table above */
    for (size_t i = 0; path != PATH_UNKNOWN && i < segments_of[path]; i++) {
        assert(seg[i] > in && seg[i] + segl[i] <= in + size && segl[i] > 0);
        assert(!memchr(seg[i], '/', segl[i]) && seg[i][-1] == '/');
        check_segment(seg[i], segl[i]);
    }
    if (path != PATH_UNKNOWN)
        assert(seg[segments_of[path] - 1] + segl[segments_of[path] - 1] == in + size);
    check_segment(in, size);

    size_t host_len;
    long port;
    if (http_split_authority(in, size, &host_len, &port)) {
        assert(host_len > 0 && host_len <= size);
        assert(port >= -1 && port <= 65535);
        if (port >= 0) assert(host_len < size && in[host_len] == ':');
    }
    return 0;
}
