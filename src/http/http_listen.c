/*
 * http_listen.c: the documents API's HTTP/1.1 side on h2o (libh2o-evloop), in
 * the same event loop as the key-value protocol: options, listener and TLS,
 * start and stop, and the idempotency sweep. The other concerns have their
 * own files: http_route.c (paths and checks), http_auth.c (tokens, Host,
 * CORS), http_reply.c (answers, held until their watermark), http_status.c
 * (_status and /metrics).
 *
 * HTTP/2 is never registered and upgrades are off: Debian's h2o 2.2.5 predates
 * the fix for HTTP/2 "rapid reset" (CVE-2023-44487).
 */
#include "http/http_internal.h"
#include "hlog/hlog.h"
#include "http/http_guard.h"
#include "docs/docs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    return http_on_req(*(server **)(self + 1), req);
}

static void on_http_conn(server *srv, h2o_socket_t *sock)
{
    h2o_accept(&srv->http_accept, sock);
}

/* Idempotency keys past their time are deleted in the background, a batch at a time,
   every half TTL (1 s to 60 s): a lookup already ignores them, this frees their memory. */
static void on_expire_sweep(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, expire_entry, entry);
    size_t n = 0;
    if (!srv->stopping && server_accepts_writes(srv) && docs_idem_expire(srv->store, hanu_wall_ms(), 10000, &n) == HANU_OK)
        srv->idempotency_expired += n;
    h2o_timeout_link(srv->loop, &srv->expire_timeout, &srv->expire_entry);
}

/* The TLS context of --tls-cert and --tls-key into srv->http_accept. */
static int load_tls(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    if (!o->tls_cert || !*o->tls_cert) return HANU_OK;
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(ssl, TLS1_2_VERSION);
    if (!o->tls_key || SSL_CTX_use_certificate_chain_file(ssl, o->tls_cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ssl, o->tls_key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ssl) != 1) {
        snprintf(err, errcap, "cannot load TLS certificate %s and key %s: %s", o->tls_cert,
                 o->tls_key ? o->tls_key : "(missing --tls-key)", ERR_reason_error_string(ERR_get_error()));
        SSL_CTX_free(ssl);
        return HANU_ERR_INVALID;
    }
    srv->http_accept.ssl_ctx = ssl;   /* no ALPN registered: HTTP/1.1 only */
    return HANU_OK;
}

static int http_off(const server_options *o)
{
    return !o->http_addr || !*o->http_addr || !strcmp(o->http_addr, "off");
}

int http_bind(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    if (http_off(o)) return HANU_OK;
    int rc = http_auth_start(srv, err, errcap);
    if (rc) return rc;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (server_parse_addr(o->http_addr, &ss, &sl) != 0) {
        snprintf(err, errcap, "cannot parse --http-addr \"%s\" (want HOST:PORT)", o->http_addr);
        return HANU_ERR_INVALID;
    }
    if (!srv->tokens.n && !server_addr_is_loopback(&ss)) {
        /* No tokens: anyone who can connect could read and write everything. */
        uint16_t port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port;
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        memset(&ss, 0, sizeof ss);
        in->sin_family = AF_INET;
        in->sin_port = port;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof *in;
        hlog_warn("http", "no tokens configured (--tokens): HTTP listens on loopback only, "
                "127.0.0.1:%u, instead of %s", ntohs(port), o->http_addr);
    }
    if ((rc = load_tls(srv, err, errcap)) != HANU_OK) return rc;
    char shown[300];
    snprintf(shown, sizeof shown, "%s (--http-addr)", o->http_addr);
    if (server_bind(&ss, sl, shown, &srv->http_fd, err, errcap) != HANU_OK) return HANU_ERR_IO;
    struct sockaddr_storage bound;   /* the real port, also when asked for port 0 */
    socklen_t bl = sizeof bound;
    if (getsockname(srv->http_fd, (struct sockaddr *)&bound, &bl) == 0)
        srv->http_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                           : ((struct sockaddr_in *)&bound)->sin_port);
    srv->http_authority_len = (size_t)snprintf(srv->http_authority, sizeof srv->http_authority, "127.0.0.1:%u",
                                               srv->http_port);
    if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, srv->http_shown, sizeof srv->http_shown);
        snprintf(srv->http_shown + strlen(srv->http_shown), 8, ":%u", ntohs(((struct sockaddr_in *)&ss)->sin_port));
    } else {
        snprintf(srv->http_shown, sizeof srv->http_shown, "%s", o->http_addr);
    }
    return HANU_OK;
}

int http_start(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    srv->started_ms = hanu_wall_ms();
    if (http_off(o)) return HANU_OK;
    http_reply_start(srv);
    if (http_query_start(srv) != HANU_OK) {
        snprintf(err, errcap, "cannot start %u query threads", o->query_threads);
        return HANU_ERR_NOMEM;
    }
    http_snapshot_start(srv);
    if (http_audit_start(srv) != HANU_OK) {
        snprintf(err, errcap, "out of memory");
        return HANU_ERR_NOMEM;
    }
    http_export_start(srv);
    http_expire_start(srv);
    http_import_start(srv);
    uint64_t every = o->idempotency_ttl_s * 500;
    h2o_timeout_init(srv->loop, &srv->expire_timeout, every < 1000 ? 1000 : every > 60000 ? 60000 : every);
    srv->expire_entry.cb = on_expire_sweep;
    h2o_timeout_link(srv->loop, &srv->expire_timeout, &srv->expire_entry);
    http_guard_set_body_limit(o->max_body);
    h2o_config_init(&srv->http_globalconf);
    srv->http_globalconf.http1.upgrade_to_http2 = 0;
    srv->http_globalconf.max_request_entity_size = o->max_body;
    /* h2o's one deadline (idle, head and body together) is replaced by http_timeout.c's. */
    srv->http_globalconf.http1.req_timeout = 24ull * 3600 * 1000;
    srv->http_globalconf.server_name = h2o_iovec_init(H2O_STRLIT("hanudb"));
    h2o_hostconf_t *host = h2o_config_register_host(&srv->http_globalconf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    h2o_handler_t *handler = h2o_create_handler(path, sizeof(h2o_handler_t) + sizeof(server *));
    *(server **)(handler + 1) = srv;
    handler->on_req = on_req;
    h2o_context_init(&srv->http_ctx, srv->loop, &srv->http_globalconf);
    if (http_timeout_start(srv) != HANU_OK ||
        server_listen(srv, &srv->http_fd, on_http_conn, &srv->http_listener) != HANU_OK) {
        snprintf(err, errcap, "out of memory");
        return HANU_ERR_NOMEM;
    }
    srv->http_accept.ctx = &srv->http_ctx;
    srv->http_accept.hosts = srv->http_globalconf.hosts;
    srv->http_on = 1;
    hlog_info("http", "documents API (HTTP%s) listening on %s%s", srv->http_accept.ssl_ctx ? "S" : "",
            srv->http_shown, srv->tokens.n ? ", bearer tokens required" : "");
    return HANU_OK;
}

void http_shutdown_begin(server *srv)
{
    server_unlisten(&srv->http_listener);
    http_query_stop(srv);
    http_snapshot_stop(srv);
    http_audit_stop(srv);
    http_export_stop(srv);
    http_import_stop(srv);
}

size_t http_busy(server *srv) { return srv->parked_count + http_query_busy(srv); }

void http_stop(server *srv)
{
    http_query_close(srv);   /* joins the query workers; answers what they finished */
    /* Whatever is still held gets its answer now (the final sync happened). */
    server_poll_durable(srv);
    http_reply_stop(srv);
    http_expire_stop(srv);
    if (h2o_timeout_is_linked(&srv->expire_entry)) h2o_timeout_unlink(&srv->expire_entry);
    http_timeout_stop(srv);
    /* The h2o context and its keep-alive connections end with the process: h2o 2.2.5
       has no way to close them gracefully. */
    srv->http_on = 0;
    http_auth_stop(srv);
    http_audit_free(srv);
    hanu_buf_free(&srv->http_scratch);
}

/* A start-up that failed before http_start: the port bound but never accepted on. */
static void http_unbind(server *srv)
{
    if (srv->http_fd >= 0) close(srv->http_fd);
    srv->http_fd = -1;
}

const server_face http_face = {
    .name = "http", .bind = http_bind, .listen = http_start, .wake = http_query_wake,
    .shutdown_begin = http_shutdown_begin, .busy = http_busy, .stop = http_stop, .unbind = http_unbind,
};
