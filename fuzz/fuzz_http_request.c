/*
 * fuzz_http_request.c: libFuzzer target for HTTP/1 request framing: raw bytes
 * as a client would send them on one connection, read the way h2o 2.2.5 reads
 * them, through src/http/http_guard.c: the head by phr_parse_request (the
 * library's parser, then the guard's checks), the body by Content-Length or by
 * the guard's chunked decoder, then the next pipelined request, until a head
 * is refused (the server answers and closes) or the input ends.
 *
 * Checked: every head the guard lets through obeys the framing rules (the
 * guard's own verdict on it is 0, one framing at most, Host rules, no bare LF,
 * no folded line); an unfinished head is never longer than the limits; and the
 * incremental chunked decoder, fed in pieces as h2o feeds it, agrees byte for
 * byte with a one-shot reference decoder written from the rules in
 * http_guard.h (accepts, refuses or waits on the same input, decodes the same
 * body, leaves the same bytes for the next request).
 *
 * The router (http_route.c) is not reached: it needs a running server and store; the
 * end-to-end test tests/e2e_http_framing.py covers it.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "http/http_guard.h"

static int hexv(unsigned char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int text(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

/* One-shot reference: 1 complete (*used bytes consumed), 0 incomplete, -1 error. */
static int ref_decode(const unsigned char *in, size_t n, unsigned char *out, size_t *outlen, size_t *used)
{
    size_t pos = 0, o = 0;
#define NEED() do { if (pos == n) return 0; } while (0)
    for (;;) {
        size_t size = 0, digits = 0;
        int v;
        while (pos < n && (v = hexv(in[pos])) >= 0) {
            if (digits == 16) return -1;
            size = size * 16 + (size_t)v;
            digits++;
            pos++;
        }
        NEED();
        if (!digits) return -1;
        int ws = 0;
        while (pos < n && (in[pos] == ' ' || in[pos] == '\t')) { pos++; ws = 1; }
        NEED();
        if (in[pos] == ';') {
            pos++;
            size_t ext = 0;
            while (pos < n && in[pos] != '\r') {
                if (!text(in[pos]) || ++ext > HTTP_GUARD_MAX_CHUNK_EXT) return -1;
                pos++;
            }
            NEED();
        } else if (ws) {
            return -1;
        }
        if (in[pos] != '\r') return -1;
        pos++;
        NEED();
        if (in[pos++] != '\n') return -1;
        if (size == 0) break;
        if (n - pos < size) return 0;
        memcpy(out + o, in + pos, size);
        o += size;
        pos += size;
        NEED();
        if (in[pos++] != '\r') return -1;
        NEED();
        if (in[pos++] != '\n') return -1;
    }
    size_t total = 0;
    for (;;) {
        NEED();
        if (in[pos] == '\r') {
            pos++;
            NEED();
            if (in[pos++] != '\n') return -1;
            break;
        }
        if (in[pos] == ' ' || in[pos] == '\t') return -1;
        while (pos < n && in[pos] != '\r') {
            if (!text(in[pos]) || ++total > HTTP_GUARD_MAX_TRAILERS) return -1;
            pos++;
        }
        NEED();
        if (++total > HTTP_GUARD_MAX_TRAILERS) return -1;
        pos++;
        NEED();
        if (in[pos++] != '\n') return -1;
    }
#undef NEED
    *outlen = o;
    *used = pos;
    return 1;
}

/* Decodes in[0..n) the way h2o does, in pieces cut by `seed`, and compares with the
   reference. Returns the bytes consumed when the body is complete, 0 otherwise. */
static size_t check_chunked(const unsigned char *in, size_t n, unsigned seed)
{
    unsigned char *work = malloc(n ? n : 1), *ref = malloc(n ? n : 1);
    size_t reflen = 0, ref_used = 0;
    int want = ref_decode(in, n, ref, &reflen, &ref_used);
    struct phr_chunked_decoder d;
    memset(&d, 0, sizeof d);
    d.consume_trailer = 1;
    size_t fed = 0, decoded = 0, result = 0;
    ssize_t r = -2;
    while (fed < n && r == -2) {
        size_t piece = 1 + (seed % 7 == 0 ? n - fed - 1 : seed % (n - fed));
        if (piece > n - fed) piece = n - fed;
        seed = seed * 1103515245u + 12345u;
        memcpy(work + decoded, in + fed, piece);   /* new bytes go after the decoded ones, as in h2o */
        size_t sz = piece;
        r = phr_decode_chunked(&d, (char *)work + decoded, &sz);
        assert(sz <= piece);
        decoded += sz;
        fed += piece;
        if (r >= 0) {
            assert((size_t)r <= piece - sz);
            /* The undecoded tail follows the body: it and the unfed rest are the next request. */
            assert(memcmp(work + decoded, in + fed - (size_t)r, (size_t)r) == 0);
            result = fed - (size_t)r;   /* bytes of the body, framing included */
        }
    }
    if (want == 1) {
        assert(r >= 0 && decoded == reflen && memcmp(work, ref, reflen) == 0);
        assert(result == ref_used);
    } else if (want == 0) {
        assert(r == -2 && fed == n);
    } else {
        assert(r == -1);
        result = 0;
    }
    free(work);
    free(ref);
    return want == 1 ? result : 0;
}

static int header_is(const struct phr_header *h, const char *name)
{
    return h->name && h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    http_guard_set_body_limit(1u << 16);
    if (size < 1) return 0;
    unsigned seed = data[0];
    const uint8_t *in = data + 1;
    size_t len = size - 1, pos = 0;
    while (pos < len) {
        size_t n = len - pos;
        char *buf = malloc(n);   /* exactly n: reading past it is an ASan report */
        memcpy(buf, in + pos, n);
        const char *method, *path;
        size_t method_len, path_len, nh = 100;
        int minor;
        struct phr_header headers[100];
        /* As h2o does on a slow connection: first a prefix, then everything, with last_len. */
        size_t cut = seed % (n + 1);
        size_t parsed = cut;
        int r = phr_parse_request(buf, cut, &method, &method_len, &path, &path_len, &minor, headers, &nh, 0);
        if (r == -2 && cut < n) {
            parsed = n;
            nh = 100;
            r = phr_parse_request(buf, n, &method, &method_len, &path, &path_len, &minor, headers, &nh, cut);
        }
        if (r == -2) {
            assert(n <= HTTP_GUARD_MAX_HEAD);
            free(buf);
            break;
        }
        if (r == -1) {
            /* Only empty lines: h2o closes without an answer. */
            assert(parsed <= 4);
            for (size_t i = 0; i < parsed; i++) assert(buf[i] == '\r' || buf[i] == '\n');
            free(buf);
            break;
        }
        assert(r > 0 && (size_t)r <= n);
        if (nh >= 1 && header_is(&headers[0], "x-hanu-refused")) {
            assert(nh == 2 && header_is(&headers[1], "x-hanu-status"));
            free(buf);
            break;   /* answered and closed */
        }
        /* Let through: the rules hold. */
        const char *msg = NULL;
        struct phr_header copy[100];
        memcpy(copy, headers, nh * sizeof *headers);
        const struct phr_header *te = NULL, *cl = NULL;
        size_t hosts = 0;
        int too_large = 0;
        for (size_t i = 0; i < nh; i++) {
            assert(copy[i].name != NULL);
            if (header_is(&copy[i], "x-hanu-body-too-large")) {
                copy[i].name = "content-length";
                too_large = 1;
            }
            if (header_is(&copy[i], "transfer-encoding")) { assert(!te); te = &copy[i]; }
            if (header_is(&copy[i], "content-length")) cl = &copy[i];
            if (header_is(&copy[i], "host")) hosts++;
        }
        assert(http_guard_check_head(buf, (size_t)r, method, method_len, minor, copy, nh, &msg) == 0);
        assert(!(te && cl) && !(te && minor == 0) && hosts <= 1 && (minor == 0 || hosts == 1));
        for (int i = 1; i < r; i++) assert(buf[i] != '\n' || buf[i - 1] == '\r');
        size_t next = (size_t)r;
        if (te) {
            assert(te->value_len == 7 && strncasecmp(te->value, "chunked", 7) == 0);
            size_t used = check_chunked((const unsigned char *)buf + r, n - (size_t)r, seed);
            free(buf);
            if (!used) break;
            next += used;
        } else if (cl) {
            size_t body = 0;
            for (size_t i = 0; i < cl->value_len; i++) body = body * 10 + (size_t)(cl->value[i] - '0');
            free(buf);
            if (too_large || body > n - next) break;   /* 413 and close, or the body is not all here */
            next += body;
        } else {
            free(buf);
        }
        pos += next;
        seed = seed * 1103515245u + 12345u;
    }
    return 0;
}
