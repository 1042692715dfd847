/*
 * console.c: serves the embedded console files. Every answer carries a
 * Content-Security-Policy that allows the page's own origin only (scripts,
 * styles, fetches), so the console can load or send nothing elsewhere even
 * if a document it shows held markup; the files are revalidated on every load
 * (Cache-Control: no-cache, strong ETag) so a new binary's console is never
 * mixed with an old one's.
 */
#include "console/console.h"

#include <stdio.h>
#include <string.h>

#define CSP "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

int console_owns(const char *path, size_t len)
{
    size_t pl = sizeof CONSOLE_PREFIX - 1;
    return len >= pl && !memcmp(path, CONSOLE_PREFIX, pl) && (len == pl || path[pl] == '/');
}

const console_file *console_lookup(const char *path, size_t len)
{
    size_t pl = sizeof CONSOLE_PREFIX;   /* with its slash */
    if (!console_owns(path, len) || len < pl || len > CONSOLE_PATH_MAX) return NULL;
    const char *name = path + pl;
    size_t nl = len - pl;
    if (nl == 0) {
        name = "index.html";
        nl = 10;
    }
    for (size_t i = 0; i < console_file_count; i++)
        if (strlen(console_files[i].path) == nl && !memcmp(console_files[i].path, name, nl))
            return &console_files[i];
    return NULL;
}

int console_etag_matches(const char *v, size_t len, const char *etag)
{
    size_t el = strlen(etag);
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        if (i == len) break;
        if (v[i] == '*') return 1;
        if (len - i >= 2 && v[i] == 'W' && v[i + 1] == '/') i += 2;   /* weak comparison */
        size_t start = i;
        if (i < len && v[i] == '"') {
            i++;
            while (i < len && v[i] != '"') i++;
            if (i < len) i++;
        } else {
            while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t') i++;
        }
        if (i - start == el && !memcmp(v + start, etag, el)) return 1;
        while (i < len && v[i] != ',') i++;   /* skip whatever follows a malformed tag */
    }
    return 0;
}

static void add_header(h2o_req_t *req, const char *name, const char *value)
{
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 0, NULL, value, strlen(value));
}

static size_t send_json_error(h2o_req_t *req, int status, const char *reason, const char *code, const char *msg)
{
    char body[256];
    int n = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, msg);
    req->res.status = status;
    req->res.reason = reason;
    req->res.content_length = (size_t)n;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
    h2o_send_inline(req, body, (size_t)n);   /* copied into the pool */
    return (size_t)n;
}

int console_answer(h2o_req_t *req, size_t *bytes)
{
    *bytes = 0;
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    const char *path = req->path.base;
    if (!console_owns(path, plen)) return 0;
    int get = req->method.len == 3 && !memcmp(req->method.base, "GET", 3);
    int head = req->method.len == 4 && !memcmp(req->method.base, "HEAD", 4);
    if (!get && !head) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT("GET, HEAD"));
        *bytes = send_json_error(req, 405, "Method Not Allowed", "method_not_allowed",
                                 "the console's files answer GET and HEAD");
        return 405;
    }
    if (plen == sizeof CONSOLE_PREFIX - 1) {   /* relative links need the slash */
        req->res.status = 308;
        req->res.reason = "Permanent Redirect";
        add_header(req, "location", CONSOLE_PREFIX "/");
        req->res.content_length = 0;
        h2o_send_inline(req, "", 0);
        return 308;
    }
    const console_file *f = console_lookup(path, plen);
    if (!f) {
        *bytes = send_json_error(req, 404, "Not Found", "not_found",
                                 "no such file of the console; the console is at /_console/");
        return 404;
    }
    add_header(req, "content-security-policy", CSP);
    add_header(req, "x-content-type-options", "nosniff");
    add_header(req, "referrer-policy", "no-referrer");
    add_header(req, "cache-control", "no-cache");
    add_header(req, "etag", f->etag);
    ssize_t inm = h2o_find_header(&req->headers, H2O_TOKEN_IF_NONE_MATCH, -1);
    if (inm >= 0 && console_etag_matches(req->headers.entries[inm].value.base,
                                         req->headers.entries[inm].value.len, f->etag)) {
        req->res.status = 304;
        req->res.reason = "Not Modified";
        h2o_send_inline(req, "", 0);
        return 304;
    }
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = f->len;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, f->content_type,
                   strlen(f->content_type));
    /* The bytes are static: sent as they are, not copied into the request's pool. */
    static h2o_generator_t generator = { NULL, NULL };
    h2o_start_response(req, &generator);
    h2o_iovec_t body = h2o_iovec_init(f->data, f->len);
    h2o_send(req, head ? NULL : &body, head ? 0 : 1, H2O_SEND_STATE_FINAL);   /* h2o leaves HEAD to us here */
    *bytes = head ? 0 : f->len;
    return 200;
}
