/*
 * http_params.c: the query string, parsed once per request against the
 * parameters its route accepts, and the Hanu-* request headers. A parameter the
 * route does not know, or one given twice, is refused (400 invalid_parameter)
 * instead of ignored: a misspelt ?durabilty=bucket must not quietly answer at
 * `local`, and a second value must not quietly lose to the first.
 */
#include "http/http_internal.h"

#include <stdio.h>
#include <strings.h>

static const char *const param_names[HTTP_PARAM_COUNT] = {
    [HTTP_PARAM_DURABILITY] = "durability",
    [HTTP_PARAM_LIMIT] = "limit",
    [HTTP_PARAM_AFTER] = "after",
    [HTTP_PARAM_RETURN] = "return",
    [HTTP_PARAM_FORMAT] = "format",
    [HTTP_PARAM_FIRST_LINE] = "first_line",
    [HTTP_PARAM_MIN_TXN] = "min_txn",
};

/* The request headers of the Hanu- prefix the server reads (on every route: a
   client may set Hanu-Durability once for all its requests; reads ignore it). */
static const char *const hanu_headers[] = { "hanu-durability" };
#define HANU_PREFIX "hanu-"

/* A name as the message shows it: at most 64 bytes, printable ASCII, the rest '?'
   (the JSON of the error must stay valid whatever bytes the client sent). */
static void shown_name(const char *s, size_t len, char out[68])
{
    size_t n = HANU_MIN(len, 64);
    for (size_t i = 0; i < n; i++) out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    memcpy(out + n, len > 64 ? "..." : "", len > 64 ? 4 : 1);
}

/* "durability, limit" or "none": the parameters of a mask, for the message. */
static void accepted_list(unsigned accepted, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int p = 0; p < HTTP_PARAM_COUNT; p++)
        if (accepted & HTTP_PARAM_BIT(p))
            n += (size_t)snprintf(out + n, cap - HANU_MIN(n, cap), "%s%s", n ? ", " : "", param_names[p]);
    if (!n) snprintf(out, cap, "none");
}

/* 400 invalid_parameter naming the parameter and the route (METHOD PATTERN). */
static int refuse(http_call *c, int repeated, const char *name, size_t len, const char *pattern, unsigned accepted)
{
    char shown[68], list[128];
    shown_name(name, len, shown);
    accepted_list(accepted, list, sizeof list);
    h2o_iovec_t m = c->req->method;
    if (repeated)
        http_error(c, 400, "invalid_parameter", "query parameter \"%s\" given twice for %.*s %s; each at most once",
                   shown, (int)HANU_MIN(m.len, 20), m.base, pattern);
    else
        http_error(c, 400, "invalid_parameter", "unknown query parameter \"%s\" for %.*s %s; accepted: %s", shown,
                   (int)HANU_MIN(m.len, 20), m.base, pattern, list);
    return 0;
}

/* Every Hanu-* header is one the server reads, and comes once. */
static int check_headers(http_call *c)
{
    const h2o_headers_t *hs = &c->req->headers;
    int seen[sizeof hanu_headers / sizeof *hanu_headers] = {0};
    for (size_t i = 0; i < hs->size; i++) {
        const h2o_iovec_t *name = hs->entries[i].name;
        if (name->len < sizeof HANU_PREFIX - 1 || strncasecmp(name->base, HANU_PREFIX, sizeof HANU_PREFIX - 1)) continue;
        size_t k = 0, n = sizeof hanu_headers / sizeof *hanu_headers;
        while (k < n && !(strlen(hanu_headers[k]) == name->len && !strncasecmp(hanu_headers[k], name->base, name->len)))
            k++;
        char shown[68];
        shown_name(name->base, name->len, shown);
        if (k == n) {
            http_error(c, 400, "invalid_parameter", "unknown request header \"%s\"; the server reads only Hanu-Durability",
                       shown);
            return 0;
        }
        if (seen[k]++) {
            http_error(c, 400, "invalid_parameter", "header \"%s\" given twice", shown);
            return 0;
        }
    }
    return 1;
}

int http_query_split(const char *q, size_t len, unsigned accepted, char *scratch, h2o_iovec_t params[HTTP_PARAM_COUNT],
                     http_query_fault *fault)
{
    const char *end = q + len;
    char *out = scratch;
    memset(params, 0, sizeof(h2o_iovec_t) * HTTP_PARAM_COUNT);
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *e = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(e - q));
        const char *ne = eq ? eq : e;   /* "?limit" is limit with an empty value */
        if (e > q) {                    /* empty pieces ("?", "a=1&&b=2") name nothing */
            char name[16];
            ssize_t nl = http_decode_segment(q, (size_t)(ne - q), name, sizeof name);
            int p = 0;
            while (nl >= 0 && p < HTTP_PARAM_COUNT &&
                   !(strlen(param_names[p]) == (size_t)nl && !memcmp(param_names[p], name, (size_t)nl)))
                p++;
            if (nl < 0 || p == HTTP_PARAM_COUNT || !(accepted & HTTP_PARAM_BIT(p))) {
                *fault = (http_query_fault){ .kind = HTTP_QUERY_UNKNOWN, .name = q, .name_len = (size_t)(ne - q) };
                return 0;
            }
            if (params[p].base) {
                *fault = (http_query_fault){ .kind = HTTP_QUERY_REPEATED, .name = param_names[p],
                                             .name_len = strlen(param_names[p]) };
                return 0;
            }
            const char *v = eq ? eq + 1 : e;
            ssize_t vl = http_decode_segment(v, (size_t)(e - v), out, (size_t)(e - v));
            if (vl < 0) {
                *fault = (http_query_fault){ .kind = HTTP_QUERY_MALFORMED, .name = param_names[p],
                                             .name_len = strlen(param_names[p]) };
                return 0;
            }
            out[vl] = '\0';
            params[p] = h2o_iovec_init(out, (size_t)vl);
            out += vl + 1;
        }
        q = amp ? amp + 1 : end;
    }
    return 1;
}

int http_params_parse(http_call *c, unsigned accepted, const char *pattern)
{
    h2o_req_t *req = c->req;
    memset(c->params, 0, sizeof c->params);
    if (!check_headers(c)) return 0;
    if (req->query_at == SIZE_MAX) return 1;
    size_t len = req->path.len - req->query_at - 1;
    char *scratch = h2o_mem_alloc_pool(&req->pool, len + HTTP_PARAM_COUNT);   /* every value and its NUL */
    http_query_fault f;
    if (http_query_split(req->path.base + req->query_at + 1, len, accepted, scratch, c->params, &f)) return 1;
    if (f.kind == HTTP_QUERY_MALFORMED) {
        http_error(c, 400, "invalid_parameter", "query parameter \"%.*s\": malformed percent-encoding",
                   (int)f.name_len, f.name);
        return 0;
    }
    return refuse(c, f.kind == HTTP_QUERY_REPEATED, f.name, f.name_len, pattern, accepted);
}

const char *http_param_name(enum http_param p)
{
    return param_names[p];
}

const h2o_iovec_t *http_param(const http_call *c, enum http_param p)
{
    return c->params[p].base ? &c->params[p] : NULL;
}

int http_param_min_txn(http_call *c, uint64_t *out)
{
    *out = 0;
    const h2o_iovec_t *v = http_param(c, HTTP_PARAM_MIN_TXN);
    if (!v) return 1;
    uint64_t n = 0;
    int ok = v->len > 0 && v->len <= 19;   /* at most INT64_MAX, as the body's min_txn */
    for (size_t i = 0; ok && i < v->len; i++) {
        ok = v->base[i] >= '0' && v->base[i] <= '9';
        n = n * 10 + (uint64_t)(v->base[i] - '0');
    }
    if (!ok || n > INT64_MAX) {
        http_error(c, 400, "invalid_parameter", "query parameter \"min_txn\": must be an integer from 0 to %lld",
                   (long long)INT64_MAX);
        return 0;
    }
    *out = n;
    return 1;
}
