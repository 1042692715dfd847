/*
 * fuzz_http_params.c: libFuzzer target for the query-string split of
 * src/http/http_params.c (http_query_split), which every route runs on the
 * request's query before anything else reads it.
 *
 * The first byte picks the mask of accepted parameters; the rest is the query.
 * Checked: a split that passes names only accepted parameters, each value inside
 * the scratch room, NUL-terminated and never longer than the query; writing the
 * values back out fully percent-encoded and splitting again gives the same
 * values; a refusal names bytes of the query (unknown) or a known parameter.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "http/http_internal.h"

static void encode(char *out, size_t *n, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[(*n)++] = '%';
        out[(*n)++] = hex[ch >> 4];
        out[(*n)++] = hex[ch & 15];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) return 0;
    unsigned accepted = data[0] & ((1u << HTTP_PARAM_COUNT) - 1);
    const char *q = (const char *)data + 1;
    size_t len = size - 1;
    char *scratch = malloc(len + HTTP_PARAM_COUNT);
    h2o_iovec_t params[HTTP_PARAM_COUNT];
    http_query_fault f;
    if (!http_query_split(q, len, accepted, scratch, params, &f)) {
        assert(f.kind >= HTTP_QUERY_UNKNOWN && f.kind <= HTTP_QUERY_MALFORMED);
        if (f.kind == HTTP_QUERY_UNKNOWN) assert(f.name >= q && f.name + f.name_len <= q + len);
        else assert(f.name_len > 0 && f.name_len < 16);
        free(scratch);
        return 0;
    }
    /* Names are short: the encoded query is at most 3x the values plus the names. */
    char *again = malloc(3 * len + 64 * HTTP_PARAM_COUNT);
    size_t n = 0;
    for (int p = 0; p < HTTP_PARAM_COUNT; p++) {
        if (!params[p].base) continue;
        assert(accepted & HTTP_PARAM_BIT(p));
        assert(params[p].base >= scratch && params[p].base + params[p].len < scratch + len + HTTP_PARAM_COUNT);
        assert(params[p].len <= len && params[p].base[params[p].len] == '\0');
        if (n) again[n++] = '&';
        const char *name = http_param_name((enum http_param)p);
        memcpy(again + n, name, strlen(name));
        n += strlen(name);
        again[n++] = '=';
        encode(again, &n, params[p].base, params[p].len);
    }
    char *scratch2 = malloc(n + HTTP_PARAM_COUNT);
    h2o_iovec_t params2[HTTP_PARAM_COUNT];
    assert(http_query_split(again, n, accepted, scratch2, params2, &f));
    for (int p = 0; p < HTTP_PARAM_COUNT; p++) {
        assert(!params[p].base == !params2[p].base);
        if (params[p].base)
            assert(params[p].len == params2[p].len && memcmp(params[p].base, params2[p].base, params[p].len) == 0);
    }
    free(scratch2);
    free(again);
    free(scratch);
    return 0;
}
