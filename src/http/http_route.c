/*
 * http_route.c: from a request to its handler: the path's shape (exact
 * segments, percent-decoded), the methods each path answers (Allow, OPTIONS),
 * the checks every request passes in order (framing, body size, Host, token,
 * query parameters and Hanu-* headers, JSON-only bodies, names, durability),
 * then the handler.
 */
#include "http/http_internal.h"
#include "docs/docs.h"
#include "http/http_guard.h"
#include "console/console.h"

#include <stdio.h>

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

ssize_t http_decode_segment(const char *s, size_t len, char *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '%') {
            if (i + 2 >= len) return -1;
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h < 0 || l < 0) return -1;
            ch = (char)(h * 16 + l);
            i += 2;
        }
        if (n >= cap) return -1;
        out[n++] = ch;
    }
    return (ssize_t)n;
}

enum { M_GET = 1, M_HEAD = 2, M_PUT = 4, M_POST = 8, M_DELETE = 16, M_OPTIONS = 32, M_PATCH = 64 };

static unsigned method_bit(h2o_req_t *req)
{
    const char *m = req->method.base;
    switch (req->method.len) {
    case 3: return !memcmp(m, "GET", 3) ? M_GET : !memcmp(m, "PUT", 3) ? M_PUT : 0;
    case 4: return !memcmp(m, "POST", 4) ? M_POST : !memcmp(m, "HEAD", 4) ? M_HEAD : 0;
    case 5: return !memcmp(m, "PATCH", 5) ? M_PATCH : 0;
    case 6: return !memcmp(m, "DELETE", 6) ? M_DELETE : 0;
    case 7: return !memcmp(m, "OPTIONS", 7) ? M_OPTIONS : 0;
    default: return 0;
    }
}

#define DUR HTTP_PARAM_BIT(HTTP_PARAM_DURABILITY)
#define RET HTTP_PARAM_BIT(HTTP_PARAM_RETURN)
#define MIN_TXN HTTP_PARAM_BIT(HTTP_PARAM_MIN_TXN)
#define READ_ONLY_METHODS .methods = M_GET | M_HEAD | M_OPTIONS, .allow = "GET, HEAD, OPTIONS"
/* Each path: the methods it answers (its Allow header, the CORS preflight's methods),
   its pattern (in messages), and the query parameters each method accepts; anything
   else is 400 invalid_parameter. HEAD takes GET's; OPTIONS (a browser's preflight
   carries the real request's URL) those of any method of the path. */
static const struct path_spec {
    unsigned methods;
    const char *allow, *pattern;
    unsigned get, put, post, del, patch;   /* HTTP_PARAM_BIT masks */
} paths[PATH_COUNT] = {
    [PATH_UNKNOWN] = { .allow = "", .pattern = "" },
    [PATH_HEALTH] = { READ_ONLY_METHODS, .pattern = "/_health" },
    [PATH_STATUS] = { READ_ONLY_METHODS, .pattern = "/_status" },
    [PATH_METRICS] = { READ_ONLY_METHODS, .pattern = "/metrics" },
    [PATH_COLLECTIONS] = { READ_ONLY_METHODS, .pattern = "/c" },
    [PATH_COLLECTION] = { M_GET | M_HEAD | M_PUT | M_DELETE | M_OPTIONS, "GET, HEAD, PUT, DELETE, OPTIONS",
                          "/c/{collection}", .put = DUR, .del = DUR },
    [PATH_DOCS] = { M_GET | M_HEAD | M_POST | M_OPTIONS, "GET, HEAD, POST, OPTIONS", "/c/{collection}/docs",
                    .get = HTTP_PARAM_BIT(HTTP_PARAM_LIMIT) | HTTP_PARAM_BIT(HTTP_PARAM_AFTER) |
                           HTTP_PARAM_BIT(HTTP_PARAM_FORMAT) | MIN_TXN, .post = DUR },
    [PATH_DOC] = { M_GET | M_HEAD | M_PUT | M_PATCH | M_DELETE | M_OPTIONS, "GET, HEAD, PUT, PATCH, DELETE, OPTIONS",
                   "/c/{collection}/docs/{id}", .get = MIN_TXN, .put = DUR, .del = DUR, .patch = DUR | RET },
    [PATH_DOC_UPDATE] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/docs/{id}/_update", .post = DUR | RET },
    [PATH_UPDATE] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_update", .post = DUR },
    [PATH_DELETE_QUERY] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_delete", .post = DUR },
    [PATH_IMPORT] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_import",
                      .post = DUR | HTTP_PARAM_BIT(HTTP_PARAM_FIRST_LINE) },
    [PATH_BATCH] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_batch", .post = DUR },
    [PATH_FIND] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_find", .get = 0 },
    [PATH_SEARCH] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_search", .get = 0 },
    [PATH_AGGS] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_aggs", .get = 0 },
    [PATH_SNAPSHOT] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/_admin/snapshot", .get = 0 },
    [PATH_EXPORT] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/c/{collection}/_export", .get = 0 },
    [PATH_AUDIT] = { M_POST | M_OPTIONS, "POST, OPTIONS", "/_admin/audit", .get = 0 },
};
#undef DUR
#undef RET
#undef MIN_TXN

/* The query parameters a method of a path accepts. */
static unsigned params_of(const struct path_spec *p, unsigned m)
{
    switch (m) {
    case M_GET: case M_HEAD: return p->get;
    case M_PUT: return p->put;
    case M_POST: return p->post;
    case M_DELETE: return p->del;
    case M_PATCH: return p->patch;
    case M_OPTIONS: return p->get | p->put | p->post | p->del | p->patch;
    default: return 0;
    }
}

/* Splits the path (without the query) into its segments and names the route. An
   empty segment (a trailing or doubled slash) matches nothing: clients send
   "/c/x/docs/.." as "/c/x/", which must not be "/c/x". */
int http_match_path(const char *path, size_t len, const char *seg[HTTP_MAX_SEGMENTS], size_t segl[HTTP_MAX_SEGMENTS])
{
    const char *p = path, *end = path + len;
    if (p == end || *p != '/') return PATH_UNKNOWN;
    p++;
    size_t n = 0;
    for (;;) {
        if (n == HTTP_MAX_SEGMENTS) return PATH_UNKNOWN;   /* more segments than any route has */
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *e = slash ? slash : end;
        if (e == p) return PATH_UNKNOWN;
        seg[n] = p;
        segl[n++] = (size_t)(e - p);
        if (!slash) break;
        p = slash + 1;
    }
#define SEG_IS(i, s) (segl[i] == sizeof s - 1 && !memcmp(seg[i], s, sizeof s - 1))
    if (n == 1) {
        if (SEG_IS(0, "_health")) return PATH_HEALTH;
        if (SEG_IS(0, "_status")) return PATH_STATUS;
        if (SEG_IS(0, "metrics")) return PATH_METRICS;
        if (SEG_IS(0, "c")) return PATH_COLLECTIONS;
        return PATH_UNKNOWN;
    }
    if (n == 2 && SEG_IS(0, "_admin") && SEG_IS(1, "snapshot")) return PATH_SNAPSHOT;
    if (n == 2 && SEG_IS(0, "_admin") && SEG_IS(1, "audit")) return PATH_AUDIT;
    if (!SEG_IS(0, "c")) return PATH_UNKNOWN;
    if (n == 2) return PATH_COLLECTION;
    if (n == 3 && SEG_IS(2, "docs")) return PATH_DOCS;
    if (n == 3 && SEG_IS(2, "_batch")) return PATH_BATCH;
    if (n == 3 && SEG_IS(2, "_find")) return PATH_FIND;
    if (n == 3 && SEG_IS(2, "_search")) return PATH_SEARCH;
    if (n == 3 && SEG_IS(2, "_aggs")) return PATH_AGGS;
    if (n == 3 && SEG_IS(2, "_export")) return PATH_EXPORT;
    if (n == 3 && SEG_IS(2, "_update")) return PATH_UPDATE;
    if (n == 3 && SEG_IS(2, "_delete")) return PATH_DELETE_QUERY;
    if (n == 3 && SEG_IS(2, "_import")) return PATH_IMPORT;
    if (n == 4 && SEG_IS(2, "docs")) return PATH_DOC;
    if (n == 5 && SEG_IS(2, "docs") && SEG_IS(4, "_update")) return PATH_DOC_UPDATE;
#undef SEG_IS
    return PATH_UNKNOWN;
}

/* The route a request is counted under in the metrics. */
static int route_of(int path, unsigned m)
{
    if (m == M_OPTIONS) return ROUTE_PREFLIGHT;
    switch (path) {
    case PATH_HEALTH: return ROUTE_HEALTH;
    case PATH_STATUS: return ROUTE_STATUS;
    case PATH_METRICS: return ROUTE_METRICS;
    case PATH_COLLECTIONS: return ROUTE_COLLECTIONS;
    case PATH_COLLECTION: return ROUTE_COLLECTION;
    case PATH_DOCS: return m & (M_GET | M_HEAD) ? ROUTE_DOC_LIST : ROUTE_DOC_POST;
    case PATH_FIND: return ROUTE_FIND;
    case PATH_SEARCH: return ROUTE_SEARCH;
    case PATH_AGGS: return ROUTE_AGGS;
    case PATH_SNAPSHOT: return ROUTE_SNAPSHOT;
    case PATH_EXPORT: return ROUTE_EXPORT;
    case PATH_AUDIT: return ROUTE_AUDIT;
    case PATH_BATCH: return ROUTE_BATCH;
    case PATH_DOC_UPDATE: return ROUTE_DOC_UPDATE;
    case PATH_UPDATE: return ROUTE_UPDATE;
    case PATH_DELETE_QUERY: return ROUTE_DELETE_QUERY;
    case PATH_IMPORT: return ROUTE_IMPORT;
    case PATH_DOC:
        return m & (M_GET | M_HEAD) ? ROUTE_DOC_GET : m == M_PUT ? ROUTE_DOC_PUT
             : m == M_DELETE ? ROUTE_DOC_DELETE : m == M_PATCH ? ROUTE_DOC_PATCH : ROUTE_OTHER;
    default: return ROUTE_OTHER;
    }
}

static void parse_durability(http_call *c, int *bad)
{
    *bad = 0;
    c->durability = HKV_DUR_LOCAL;
    const h2o_iovec_t *q = http_param(c, HTTP_PARAM_DURABILITY);
    const h2o_iovec_t *h = http_header(c->req, H2O_STRLIT("hanu-durability"));
    if (h) q = h;   /* the header wins */
    const char *v = q ? q->base : NULL;
    size_t vl = q ? q->len : 0;
    if (!v) return;
    if (vl == 4 && !memcmp(v, "none", 4)) c->durability = HKV_DUR_NONE;
    else if (vl == 5 && !memcmp(v, "local", 5)) c->durability = HKV_DUR_LOCAL;
    else if (vl == 6 && !memcmp(v, "bucket", 6)) c->durability = HKV_DUR_BUCKET;
    else *bad = 1;
}

int http_content_type_is(h2o_req_t *req, const char *type)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1);
    if (i < 0) return 0;
    const h2o_iovec_t *v = &req->headers.entries[i].value;
    const char *p = v->base, *end = p + v->len;
    size_t tl = strlen(type);
    if (v->len == tl && !memcmp(p, type, tl)) return 1;   /* what clients send */
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if ((size_t)(end - p) < tl) return 0;
    for (size_t i = 0; i < tl; i++, p++)   /* case-insensitive, no locale */
        if (*p != type[i] && !(*p >= 'A' && *p <= 'Z' && *p + 32 == type[i])) return 0;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    return p == end || *p == ';';   /* parameters (charset) allowed */
}

static int content_type_is_json(h2o_req_t *req)
{
    return http_content_type_is(req, "application/json");
}

static int is_dot_segment(const char *s, size_t n)
{
    return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

/* 421 on a follower or standby: {"error":{"code":"not_leader","message":..,"leader":URL|null}}. */
static void not_leader(http_call *c)
{
    char url[LEASE_URL_MAX + 1], msg[160];
    int known = server_leader_url(c->srv, url, sizeof url);
    snprintf(msg, sizeof msg, "this node is %s and accepts no writes; send them to the leader%s",
             server_not_leader_why(c->srv),
             known ? "" : " (unknown here)");
    hanu_buf b = {0};
    http_error_json(&b, "not_leader", msg);
    if (b.len >= 2) {
        b.len -= 2;   /* reopen the error object for its leader */
        hanu_buf_append(&b, ",\"leader\":", 10);
        if (known) json_escape_string(&b, url, strlen(url));
        else hanu_buf_append(&b, "null", 4);
        hanu_buf_append(&b, "}}", 2);
    }
    c->srv->errors++;
    http_send(c, 421, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

int http_on_req(server *srv, h2o_req_t *req)
{
    server_poll_durable(srv);   /* answers waiting for a finished sync go first */
    http_call call = { .srv = srv, .req = req, .route = ROUTE_OTHER, .start_ns = hanu_now_ns() };
    http_call *c = &call;
    if (http_guard_answer(req)) return 0;   /* framing refused (http_guard.c) */
    const h2o_iovec_t *too_large = http_header(req, H2O_STRLIT("x-hanu-body-too-large"));
    if (too_large) {
        /* The body was not read (http_guard.c): answer and close the connection. */
        req->http1_is_persistent = 0;
        http_error(c, 413, "too_large", "request body of %.*s bytes; the limit is %u (--max-body)",
                   (int)HANU_MIN(too_large->len, 20), too_large->base, srv->opt.max_body);
        return 0;
    }
    if (!srv->tokens.n && !http_host_allowed(srv, req)) {
        h2o_iovec_t a = req->input.authority;
        http_error(c, 403, "host_not_allowed", "Host \"%.*s\" is not served: without --tokens only loopback "
                   "names with port %u are, and --allowed-hosts", (int)HANU_MIN(a.len, 100),
                   a.base ? a.base : "", srv->http_port);
        return 0;
    }
    const char *seg[HTTP_MAX_SEGMENTS];
    size_t segl[HTTP_MAX_SEGMENTS];
    int path = http_match_path(req->path.base, req->query_at != SIZE_MAX ? req->query_at : req->path.len,
                               seg, segl);
    unsigned m = method_bit(req);
    size_t console_bytes = 0;   /* the web console's files (src/console), counted as route "other" */
    int console_status = path == PATH_UNKNOWN && !srv->opt.no_console ? console_answer(req, &console_bytes) : 0;
    if (console_status) { http_answered(c, console_status, console_bytes); return 0; }
    if (path == PATH_UNKNOWN) {
        http_error(c, 404, "not_found", "no such route; see docs/API.md");
        return 0;
    }
    c->route = route_of(path, m);
    const struct path_spec *spec = &paths[path];
    if (m != M_OPTIONS && !(spec->methods & m)) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, spec->allow, strlen(spec->allow));
        http_error(c, 405, "method_not_allowed", "%.*s is not allowed here; use %s",
                   (int)HANU_MIN(req->method.len, 20), req->method.base, spec->allow);
        return 0;
    }
    /* Preflights carry no credentials; /_health is always open. */
    c->token = srv->tokens.n ? http_find_token(srv, req) : NULL;
    int open_route = m == M_OPTIONS || path == PATH_HEALTH ||
                     ((path == PATH_STATUS || path == PATH_METRICS) && srv->opt.open_metrics);
    if (srv->tokens.n && !c->token && !open_route) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL, H2O_STRLIT("Bearer"));
        http_error(c, 401, "unauthorized", "%s", http_header(req, H2O_STRLIT("authorization"))
                   ? "unknown bearer token" : "this server needs an Authorization: Bearer token");
        return 0;
    }
    /* After the token: a 401 does not tell a stranger the route's parameters. */
    if (!http_params_parse(c, params_of(spec, m), spec->pattern)) return 0;
    if (m == M_OPTIONS) {
        http_reply_options(c, spec->allow);
        return 0;
    }
    if (path == PATH_HEALTH) {
        http_reply(c, 200, "{\"ok\":true}", 11, 0);
        return 0;
    }
    /* _snapshot, _audit and _export take no options: a bare POST (no body, no Content-Type) is fine. */
    int takes_body = (m == M_POST && path != PATH_SNAPSHOT && path != PATH_AUDIT && path != PATH_EXPORT) ||
                     (path == PATH_DOC && m == M_PUT);
    if (m == M_PATCH && !content_type_is_json(req) && !http_content_type_is(req, "application/merge-patch+json")) {
        /* RFC 5789 3.1: the patch formats this resource takes */
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("accept-patch"), 0, NULL,
                              H2O_STRLIT("application/merge-patch+json, application/json"));
        http_error(c, 415, "unsupported_media_type", "a PATCH is a merge patch (Content-Type: "
                   "application/merge-patch+json) or update operators (Content-Type: application/json)");
        return 0;
    }
    if (path == PATH_IMPORT && m == M_POST && !http_content_type_is(req, "application/x-ndjson")) {
        http_error(c, 415, "unsupported_media_type", "an import body is NDJSON (one JSON document a line), sent "
                   "with Content-Type: application/x-ndjson");
        return 0;
    }
    if (m != M_PATCH && path != PATH_IMPORT && (takes_body || req->entity.len) && !content_type_is_json(req)) {
        http_error(c, 415, "unsupported_media_type", "the body must be JSON, sent with "
                   "Content-Type: application/json");
        return 0;
    }
    if (path == PATH_STATUS) { http_status_reply(c); return 0; }
    if (path == PATH_METRICS) { http_metrics_reply(c); return 0; }
    if (path == PATH_COLLECTIONS) { http_collections_list(c); return 0; }
    /* An audit only reads the bucket: a follower or a standby runs it too. */
    if (path == PATH_AUDIT) { http_audit(c); return 0; }
    int is_write = (m & (M_PUT | M_DELETE | M_PATCH)) ||
                   (m == M_POST && path != PATH_FIND && path != PATH_SEARCH && path != PATH_AGGS);
    if (is_write && !server_accepts_writes(srv)) { not_leader(c); return 0; }
    if (path == PATH_SNAPSHOT) { http_snapshot(c); return 0; }
    ssize_t cl = http_decode_segment(seg[1], segl[1], c->col, STORE_DB_NAME_MAX);
    if (cl <= 0 || is_dot_segment(c->col, (size_t)cl) || !store_db_name_valid(c->col, (size_t)cl)) {
        http_error(c, 400, "invalid_collection", "collection names are 1-64 bytes of A-Z a-z 0-9 _ . -, "
                   "do not start with _ and are not . or ..");
        return 0;
    }
    c->col[cl] = '\0';
    int bad_durability;
    parse_durability(c, &bad_durability);
    if (bad_durability) {
        http_error(c, 400, "invalid_request", "durability must be none, local or bucket");
        return 0;
    }
    if (path == PATH_COLLECTION) { http_collection(c); return 0; }
    if (path == PATH_BATCH) { http_batch(c); return 0; }
    if (path == PATH_EXPORT) { http_export(c); return 0; }
    if (path == PATH_UPDATE || path == PATH_DELETE_QUERY) { http_update_query(c); return 0; }
    if (path == PATH_IMPORT) { http_import(c); return 0; }
    if (c->route == ROUTE_DOC_LIST && http_param(c, HTTP_PARAM_FORMAT)) { http_ndjson_export(c); return 0; }
    if (path == PATH_FIND || path == PATH_SEARCH || path == PATH_AGGS || c->route == ROUTE_DOC_LIST) {
        http_query(c);
        return 0;
    }
    if (path == PATH_DOCS) { http_doc_write(c); return 0; }
    ssize_t il = http_decode_segment(seg[3], segl[3], c->id, DOCS_ID_MAX);
    if (il <= 0 || !docs_id_valid(c->id, (size_t)il)) {
        http_error(c, 400, "invalid_id", "document ids are 1-256 bytes without '/' or control characters, "
                   "are not . or .., and are percent-encoded in URLs");
        return 0;
    }
    c->id_len = (size_t)il;
    c->id[il] = '\0';
    if (m & (M_GET | M_HEAD)) http_doc_get(c);
    else if (m == M_PATCH || path == PATH_DOC_UPDATE) http_doc_update(c);
    else http_doc_write(c);
    return 0;
}

