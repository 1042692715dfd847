/*
 * http_auth.c: who may ask what. Bearer tokens (read-only or read-write, all
 * collections or some; the table is tokens.h's, shared with the key-value
 * protocol), or, without tokens, the Host check that keeps a DNS
 * rebinding page away from a loopback server; CORS for the origins allowed.
 */
#include "http/http_internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

const h2o_iovec_t *http_header(h2o_req_t *req, const char *name, size_t len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, len, -1);
    return i < 0 ? NULL : &req->headers.entries[i].value;
}

/* Response headers a page may read: ETag for If-Match, and what the API adds. */
#define CORS_EXPOSE_HEADERS "ETag, Hanu-Txn, Idempotent-Replayed, Location, Retry-After"
/* Request headers a page may send: the API's own and the usual tracing ones. */
#define CORS_ALLOW_HEADERS "Authorization, Content-Type, If-Match, If-None-Match, Idempotency-Key, " \
    "Hanu-Durability, traceparent, tracestate, X-Request-Id"

static const h2o_iovec_t *cors_origin(server *srv, h2o_req_t *req)
{
    const h2o_iovec_t *origin = http_header(req, H2O_STRLIT("origin"));
    if (!origin) return NULL;
    for (size_t i = 0; i < srv->ncors; i++) {
        const char *o = srv->cors[i];
        if (!strcmp(o, "*") || (strlen(o) == origin->len && !memcmp(o, origin->base, origin->len)))
            return origin;
    }
    return NULL;
}

void http_add_cors(server *srv, h2o_req_t *req)
{
    if (!srv->ncors) return;
    /* Every answer of a CORS server depends on Origin, also one without it: a cache
       must not hand an answer made for one origin (or none) to another. */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Origin"));
    const h2o_iovec_t *origin = cors_origin(srv, req);
    if (!origin) return;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL,
                   origin->base, origin->len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-expose-headers"), 0, NULL,
                          H2O_STRLIT(CORS_EXPOSE_HEADERS));
}

const auth_token *http_find_token(server *srv, h2o_req_t *req)
{
    const h2o_iovec_t *a = http_header(req, H2O_STRLIT("authorization"));
    if (!a || a->len < 8 || strncasecmp(a->base, "Bearer ", 7) != 0) return NULL;
    return auth_tokens_find(&srv->tokens, a->base + 7, a->len - 7);
}

int http_token_allows(const http_call *c, const char *col, int write)
{
    if (!c->srv->tokens.n) return 1;          /* auth off (loopback only) */
    return c->token && auth_token_allows(c->token, col, col ? strlen(col) : 0, write);
}

int http_split_authority(const char *s, size_t len, size_t *host_len, long *port)
{
    const char *end = s + len, *colon;
    if (len && s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb) return 0;
        colon = rb + 1 < end ? rb + 1 : NULL;
        if (colon && *colon != ':') return 0;
    } else {
        colon = memchr(s, ':', len);
    }
    *host_len = colon ? (size_t)(colon - s) : len;
    *port = -1;
    if (colon) {
        long v = 0;
        const char *p = colon + 1;
        if (p == end || end - p > 5) return 0;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9') return 0;
            v = v * 10 + (*p - '0');
        }
        if (v > 65535) return 0;
        *port = v;
    }
    return *host_len > 0;
}

static int is_loopback_host(const char *h, size_t n)
{
    char ip[16];
    if (n == 9 && !strncasecmp(h, "localhost", 9)) return 1;
    if (n == 5 && !memcmp(h, "[::1]", 5)) return 1;
    if (n >= sizeof ip) return 0;
    memcpy(ip, h, n);
    ip[n] = '\0';
    struct in_addr a;
    return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 reaches
   a loopback server, but its requests still say Host: evil.example. Without tokens,
   only loopback names with our port, and --allowed-hosts, are served. */
int http_host_allowed(server *srv, h2o_req_t *req)
{
    h2o_iovec_t a = req->input.authority;
    size_t hl;
    long port;
    /* What clients send almost always (measured: the general path below costs about
       500 instructions a request, 1.5% of a document write). */
    if (a.len == srv->http_authority_len && !memcmp(a.base, srv->http_authority, a.len)) return 1;
    if (!a.base || !http_split_authority(a.base, a.len, &hl, &port)) return 0;
    if (port < 0) port = srv->http_accept.ssl_ctx ? 443 : 80;
    if (port == srv->http_port && is_loopback_host(a.base, hl)) return 1;
    for (size_t i = 0; i < srv->nallowed_hosts; i++) {
        const char *e = srv->allowed_hosts[i];
        size_t el;
        long eport;
        if (!strcmp(e, "*")) return 1;
        if (http_split_authority(e, strlen(e), &el, &eport) && el == hl && !strncasecmp(e, a.base, hl) &&
            (eport < 0 || eport == port))
            return 1;
    }
    return 0;
}

/* A page of another site may send text/plain, form and multipart bodies without
   asking (a CORS "simple" request); application/json needs a preflight, which
   CORS then decides. So a body is read only when it says it is JSON. */

/* OPTIONS: the route's methods (allow), and a CORS preflight's answer for allowed origins. */
void http_reply_options(http_call *c, const char *allow)
{
    server *srv = c->srv;
    h2o_req_t *req = c->req;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, allow, strlen(allow));
    if (srv->ncors && cors_origin(srv, req)) {
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-methods"), 0, NULL,
                              allow, strlen(allow));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-headers"), 0, NULL,
                              srv->cors_allow_headers, strlen(srv->cors_allow_headers));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-max-age"), 0, NULL,
                              H2O_STRLIT("600"));
    }
    http_send_empty(c, 204);
}

int http_auth_start(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    if (o->cors_origins && *o->cors_origins) {
        char *copy = strdup(o->cors_origins), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') t++;
            srv->cors = realloc(srv->cors, (srv->ncors + 1) * sizeof(char *));
            srv->cors[srv->ncors++] = strdup(t);
        }
        free(copy);
    }
    /* The API's headers always; --cors-allow-headers adds to them. */
    hanu_buf hb = {0};
    hanu_buf_append(&hb, CORS_ALLOW_HEADERS, sizeof CORS_ALLOW_HEADERS - 1);
    if (o->cors_allow_headers && *o->cors_allow_headers) {
        hanu_buf_append(&hb, ", ", 2);
        hanu_buf_append(&hb, o->cors_allow_headers, strlen(o->cors_allow_headers));
    }
    hanu_buf_append(&hb, "", 1);
    srv->cors_allow_headers = (char *)hb.data;
    if (o->allowed_hosts && *o->allowed_hosts) {
        char *copy = strdup(o->allowed_hosts), *save = NULL;
        for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
            size_t hl;
            long port;
            if (strcmp(t, "*") && !http_split_authority(t, strlen(t), &hl, &port)) {
                snprintf(err, errcap, "--allowed-hosts: \"%s\" is not NAME or NAME:PORT", t);
                free(copy);
                return HANU_ERR_INVALID;
            }
            srv->allowed_hosts = realloc(srv->allowed_hosts, (srv->nallowed_hosts + 1) * sizeof(char *));
            srv->allowed_hosts[srv->nallowed_hosts++] = strdup(t);
        }
        free(copy);
    }
    return HANU_OK;
}

void http_auth_stop(server *srv)
{
    for (size_t i = 0; i < srv->ncors; i++) free(srv->cors[i]);
    free(srv->cors);
    free(srv->cors_allow_headers);
    for (size_t i = 0; i < srv->nallowed_hosts; i++) free(srv->allowed_hosts[i]);
    free(srv->allowed_hosts);
}
