/*
 * http.c: the documents API's HTTP/1.1 side on h2o (libh2o-evloop), in the
 * same event loop as the key-value protocol: listener and TLS, routing (exact
 * paths, Allow, OPTIONS), bearer tokens or, without them, the Host check, the
 * JSON-only body rule, CORS, Prometheus metrics, status, and answers to writes
 * parked until the group commit that covers them (never blocking the loop).
 *
 * HTTP/2 is never registered and upgrades are off: Debian's h2o 2.2.5 predates
 * the fix for HTTP/2 "rapid reset" (CVE-2023-44487).
 */
#include "server/http_internal.h"
#include "docs/docs.h"
#include "server/http_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct http_parked {
    http_parked *next;
    h2o_req_t *req;              /* NULL once h2o freed the request (client gone) */
    http_parked **guard;         /* in the request's pool; points back here until freed */
    int route;
    uint64_t start_ns;
    uint64_t txn;
    int status;
    char *body;                  /* in the request's pool */
    size_t len;
};

#define PARKED_DEADLINE_NS (30ull * 1000000000ull)

static const char *route_names[ROUTE_COUNT] = {
    "health", "status", "metrics", "collections", "collection", "doc_get", "doc_put",
    "doc_post", "doc_delete", "batch", "preflight", "other",
};
static const int status_codes[HTTP_STATUS_SLOTS] = {
    200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 412, 413, 415, 421, 422, 500, 501, 503, 0, 0,
};
static const uint64_t latency_le_us[HTTP_LATENCY_BUCKETS] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
    1000000, 2500000, 5000000,
};

static const char *reason_of(int status)
{
    switch (status) {
    case 200: return "OK"; case 201: return "Created"; case 204: return "No Content";
    case 400: return "Bad Request"; case 401: return "Unauthorized"; case 403: return "Forbidden";
    case 404: return "Not Found"; case 405: return "Method Not Allowed"; case 409: return "Conflict";
    case 304: return "Not Modified";
    case 412: return "Precondition Failed"; case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type"; case 422: return "Unprocessable Content";
    case 500: return "Internal Server Error"; case 501: return "Not Implemented";
    case 503: return "Service Unavailable"; default: return "Error";
    }
}

static void count_request(server *srv, int route, int status, uint64_t start_ns)
{
    int slot = HTTP_STATUS_SLOTS - 1;
    for (int i = 0; i < HTTP_STATUS_SLOTS - 1 && status_codes[i]; i++)
        if (status_codes[i] == status) { slot = i; break; }
    srv->http_requests[route][slot]++;
    uint64_t us = (hanu_now_ns() - start_ns) / 1000;
    int b = 0;
    while (b < HTTP_LATENCY_BUCKETS && us > latency_le_us[b]) b++;
    if (b < HTTP_LATENCY_BUCKETS) srv->http_latency[route][b]++;   /* beyond: only in +Inf */
    srv->http_latency[route][HTTP_LATENCY_BUCKETS] += us;
    srv->http_latency_count[route]++;
}

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

static void add_cors(server *srv, h2o_req_t *req)
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

static void send_now(server *srv, h2o_req_t *req, int route, uint64_t start_ns, int status,
                     const char *body, size_t len)
{
    req->res.status = status;
    req->res.reason = reason_of(status);
    /* A 304 has no body, and a Content-Length would claim the document's is 0. */
    req->res.content_length = status == 304 ? SIZE_MAX : len;
    if (status != 304)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                       H2O_STRLIT("application/json"));
    add_cors(srv, req);
    h2o_send_inline(req, body, len);
    count_request(srv, route, status, start_ns);
}

static void on_parked_req_gone(void *p)
{
    http_parked *pk = *(http_parked **)p;
    if (pk) {
        pk->req = NULL;
        pk->guard = NULL;
    }
}

/* Frees a parked answer; the request (if still alive) must not point back to it. */
static void parked_free(http_parked *pk)
{
    if (pk->guard) *pk->guard = NULL;
    free(pk);
}

/* Queues an answer on a FIFO (txns only grow) until its txn is released. */
static void park(http_call *c, http_parked **head, http_parked **tail, int status, const char *body,
                 size_t len, uint64_t txn)
{
    server *srv = c->srv;
    http_parked *pk = calloc(1, sizeof *pk);
    if (!pk) {
        send_now(srv, c->req, c->route, c->start_ns, 500, "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}", 56);
        return;
    }
    pk->req = c->req;
    pk->route = c->route;
    pk->start_ns = c->start_ns;
    pk->txn = txn;
    pk->status = status;
    pk->body = h2o_mem_alloc_pool(&c->req->pool, len + 1);
    memcpy(pk->body, body, len);
    pk->len = len;
    http_parked **guard = h2o_mem_alloc_shared(&c->req->pool, sizeof *guard, on_parked_req_gone);
    *guard = pk;
    pk->guard = guard;
    if (*tail) (*tail)->next = pk;
    else *head = pk;
    *tail = pk;
    srv->parked_count++;
}

void http_reply(http_call *c, int status, const char *body, size_t len, uint64_t wait_txn)
{
    server *srv = c->srv;
    if (status >= 400) srv->errors++;
    if (!wait_txn || wait_txn <= atomic_load(&srv->durable_txn)) {
        send_now(srv, c->req, c->route, c->start_ns, status, body, len);
        return;
    }
    /* Park until the group commit covering wait_txn. */
    store_want_durable(srv->store, wait_txn);
    park(c, &srv->parked_head, &srv->parked_tail, status, body, len, wait_txn);
    if (!h2o_timeout_is_linked(&srv->parked_entry)) h2o_timeout_link(srv->loop, &srv->parked_timeout, &srv->parked_entry);
}

void http_reply_write(http_call *c, int status, const char *body, size_t len, uint64_t txn)
{
    server *srv = c->srv;
    if (c->durability == HKV_DUR_LOCAL) { http_reply(c, status, body, len, txn); return; }
    /* `none`: the frame may still be in the log's buffer; the loop writes it, with
       every other of this iteration, before answering (http_on_written). */
    if (txn <= atomic_load(&srv->durable_txn) || txn <= srv->written_txn) {
        send_now(srv, c->req, c->route, c->start_ns, status, body, len);
        return;
    }
    park(c, &srv->written_head, &srv->written_tail, status, body, len, txn);
}

/* h2o keeps no timeout on a request that waits for us: answer 503 to writes parked
   longer than PARKED_DEADLINE_NS (a disk that stopped answering), once a second. */
static void on_parked_sweep(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, parked_entry, entry);
    uint64_t now = hanu_now_ns();
    while (srv->parked_head && now - srv->parked_head->start_ns > PARKED_DEADLINE_NS) {
        http_parked *pk = srv->parked_head;
        srv->parked_head = pk->next;
        if (!srv->parked_head) srv->parked_tail = NULL;
        srv->parked_count--;
        if (pk->req) {
            static const char msg[] = "{\"error\":{\"code\":\"timeout\",\"message\":\"the write is in the "
                "log but its fdatasync has not completed in 30 s; its outcome is unknown\"}}";
            send_now(srv, pk->req, pk->route, pk->start_ns, 503, msg, sizeof msg - 1);
        }
        parked_free(pk);
    }
    if (srv->parked_head) h2o_timeout_link(srv->loop, &srv->parked_timeout, &srv->parked_entry);
}

void http_error(http_call *c, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hanu_buf b = {0};
    hanu_buf_append(&b, "{\"error\":{\"code\":", 17);
    json_escape_string(&b, code, strlen(code));
    hanu_buf_append(&b, ",\"message\":", 11);
    if (json_escape_string(&b, msg, strlen(msg)) != HANU_OK)
        json_escape_string(&b, "(message not valid UTF-8)", 25);
    hanu_buf_append(&b, "}}", 2);
    http_reply(c, status, (const char *)b.data, b.len, 0);
    hanu_buf_free(&b);
}

/* Sends the answers at the head of a list up to txn `upto`; with failed, the rest
   get the error: their writes are not acknowledged. */
static void release(server *srv, http_parked **head, http_parked **tail, uint64_t upto, int failed)
{
    while (*head && (failed || (*head)->txn <= upto)) {
        http_parked *pk = *head;
        *head = pk->next;
        if (!*head) *tail = NULL;
        srv->parked_count--;
        if (pk->req) {
            h2o_req_t *req = pk->req;
            if (pk->txn <= upto) {
                send_now(srv, req, pk->route, pk->start_ns, pk->status, pk->body, pk->len);
            } else {
                static const char msg[] = "{\"error\":{\"code\":\"internal\",\"message\":\"writing or "
                    "syncing the log failed: this write is not acknowledged and its outcome is unknown; "
                    "the store refuses writes until it is restarted\"}}";
                send_now(srv, req, pk->route, pk->start_ns, 500, msg, sizeof msg - 1);
            }
        }
        parked_free(pk);
    }
}

void http_on_durable(server *srv, uint64_t durable_txn, int failed)
{
    release(srv, &srv->parked_head, &srv->parked_tail, durable_txn, failed);
    /* A durable txn is written too; after a failure the unwritten ones fail. */
    release(srv, &srv->written_head, &srv->written_tail,
            failed ? HANU_MAX(durable_txn, srv->written_txn) : durable_txn, failed);
}

void http_on_written(server *srv, uint64_t written_txn)
{
    release(srv, &srv->written_head, &srv->written_tail, written_txn, 0);
}

void http_reply_doc(http_call *c, const uint8_t *doc, size_t len, uint64_t txn)
{
    if (!doc) len = 0;
    char etag[32];
    int n = snprintf(etag, sizeof etag, "\"%llu\"", (unsigned long long)txn);
    h2o_add_header(&c->req->pool, &c->req->res.headers, H2O_TOKEN_ETAG, NULL,
                   h2o_strdup(&c->req->pool, etag, (size_t)n).base, (size_t)n);
    h2o_add_header_by_str(&c->req->pool, &c->req->res.headers, H2O_STRLIT("hanu-txn"), 0, NULL,
                          h2o_strdup(&c->req->pool, etag + 1, (size_t)n - 2).base, (size_t)n - 2);
    http_reply(c, doc ? 200 : 304, doc ? (const char *)doc : "", len, 0);
}

/* RFC 3986's unreserved characters (A-Z a-z 0-9 - . _ ~), what an id keeps
   unescaped in a URL: a bit per ASCII character. */
static int url_unreserved(unsigned char ch)
{
    static const uint64_t bits[2] = { 0x03FF600000000000ull, 0x47FFFFFE87FFFFFEull };
    return ch < 128 && ((bits[ch >> 6] >> (ch & 63)) & 1);
}

h2o_iovec_t http_location(http_call *c, const char *id, size_t id_len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t cl = strlen(c->col);
    /* Built in the request's pool, at most 3 bytes an id byte: no malloc on the write path. */
    char *out = h2o_mem_alloc_pool(&c->req->pool, 3 + cl + 6 + 3 * id_len), *p = out;
    memcpy(p, "/c/", 3);
    memcpy(p + 3, c->col, cl);   /* collection names need no escaping */
    p += 3 + cl;
    if (id) {
        memcpy(p, "/docs/", 6);
        p += 6;
        for (size_t i = 0; i < id_len; i++) {
            unsigned char ch = (unsigned char)id[i];
            if (url_unreserved(ch)) {
                *p++ = (char)ch;
            } else {
                *p++ = '%';
                *p++ = hex[ch >> 4];
                *p++ = hex[ch & 15];
            }
        }
    }
    return h2o_iovec_init(out, (size_t)(p - out));
}

/* ---- auth ---- */

static int load_tokens(server *srv, const char *text, char *err, size_t errcap)
{
    char *copy = strdup(text), *save = NULL;
    int lineno = 0;
    for (char *line = strtok_r(copy, "\n;", &save); line; line = strtok_r(NULL, "\n;", &save)) {
        lineno++;
        while (*line == ' ' || *line == '\t' || *line == '\r') line++;
        if (!*line || *line == '#') continue;
        char tok[256], mode[8], cols[4096];
        int n = sscanf(line, "%255s %7s %4095s", tok, mode, cols);
        if (n != 3 || (strcmp(mode, "ro") && strcmp(mode, "rw")) || strlen(tok) < 8) {
            snprintf(err, errcap, "tokens line %d: want \"TOKEN ro|rw *|col1,col2\" with a token of "
                     "at least 8 characters", lineno);
            free(copy);
            return HANU_ERR_INVALID;
        }
        http_token *nt = realloc(srv->tokens, (srv->ntokens + 1) * sizeof *nt);
        if (!nt) { free(copy); return HANU_ERR_NOMEM; }
        srv->tokens = nt;
        http_token *t = &srv->tokens[srv->ntokens++];
        memset(t, 0, sizeof *t);
        t->token = strdup(tok);
        unsigned char md[32];
        SHA256((const unsigned char *)tok, strlen(tok), md);
        for (int i = 0; i < 8; i++) snprintf(t->scope + 2 * i, 3, "%02x", md[i]);
        t->read_write = !strcmp(mode, "rw");
        if (strcmp(cols, "*")) {
            char *s2 = NULL;
            for (char *col = strtok_r(cols, ",", &s2); col; col = strtok_r(NULL, ",", &s2)) {
                t->collections = realloc(t->collections, (t->ncollections + 1) * sizeof(char *));
                t->collections[t->ncollections++] = strdup(col);
            }
        }
    }
    free(copy);
    return HANU_OK;
}

static const http_token *find_token(server *srv, h2o_req_t *req)
{
    const h2o_iovec_t *a = http_header(req, H2O_STRLIT("authorization"));
    if (!a || a->len < 8 || strncasecmp(a->base, "Bearer ", 7) != 0) return NULL;
    const char *t = a->base + 7;
    size_t tl = a->len - 7;
    for (size_t i = 0; i < srv->ntokens; i++) {
        const char *k = srv->tokens[i].token;
        size_t kl = strlen(k);
        /* Compare every byte so that timing does not tell a prefix apart. */
        unsigned diff = (unsigned)(kl ^ tl);
        for (size_t j = 0; j < kl; j++) diff |= (unsigned)(k[j] ^ (j < tl ? t[j] : 0));
        if (!diff) return &srv->tokens[i];
    }
    return NULL;
}

int http_token_allows(const http_call *c, const char *col, int write)
{
    const http_token *t = c->token;
    if (!c->srv->ntokens) return 1;           /* auth off (loopback only) */
    if (!t || (write && !t->read_write)) return 0;
    if (!t->collections) return 1;            /* "*" */
    for (size_t i = 0; col && i < t->ncollections; i++)
        if (!strcmp(t->collections[i], col)) return 1;
    return 0;
}

/* ---- status and metrics ---- */

static void reply_status(http_call *c)
{
    server *srv = c->srv;
    store_stats st;
    store_get_stats(srv->store, &st);
    char head[1024];
    int n = snprintf(head, sizeof head,
        "{\"txn\":%llu,\"durable_txn\":%llu,\"floor_txn\":%llu,\"collections\":%llu,\"keys\":%llu,"
        "\"disk_bytes\":%llu,\"memory_bytes\":%llu,\"log_bytes_written\":%llu,\"syncs\":%llu,"
        "\"parked_writes\":%zu,\"files\":%llu,\"compactions\":%llu,\"uptime_s\":%llu,\"store_failed\":%s,"
        "\"watermarks\":{",
        (unsigned long long)st.last_txn, (unsigned long long)st.durable_txn,
        (unsigned long long)store_floor(srv->store),
        (unsigned long long)st.databases, (unsigned long long)st.keys, (unsigned long long)st.disk_bytes,
        (unsigned long long)st.memory_bytes, (unsigned long long)st.log_bytes_written,
        (unsigned long long)st.syncs, srv->parked_count, (unsigned long long)st.files,
        (unsigned long long)st.compactions, (unsigned long long)((hanu_wall_ms() - srv->started_ms) / 1000),
        store_failed(srv->store) ? "true" : "false");
    hanu_buf b = {0};
    hanu_buf_append(&b, head, (size_t)n);
    /* Every projection that holds the compaction floor down, by name. */
    store_watermark wm[STORE_MAX_WATERMARKS];
    size_t nw = store_watermark_list(srv->store, wm, STORE_MAX_WATERMARKS);
    for (size_t i = 0; i < nw && i < STORE_MAX_WATERMARKS; i++) {
        char one[96];
        int m = snprintf(one, sizeof one, "%s\"%s\":%llu", i ? "," : "", wm[i].name, (unsigned long long)wm[i].txn);
        hanu_buf_append(&b, one, (size_t)m);
    }
    hanu_buf_append(&b, "}}", 2);
    http_reply(c, 200, (const char *)b.data, b.len, 0);
    hanu_buf_free(&b);
}

static void metric(hanu_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void metric(hanu_buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) hanu_buf_append(b, line, HANU_MIN((size_t)n, sizeof line - 1));
}

static void reply_metrics(http_call *c)
{
    server *srv = c->srv;
    store_stats st;
    store_get_stats(srv->store, &st);
    hanu_buf b = {0};
    metric(&b, "# HELP hanudb_http_requests_total HTTP requests by route and status.\n"
               "# TYPE hanudb_http_requests_total counter\n");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int s = 0; s < HTTP_STATUS_SLOTS; s++)
            if (srv->http_requests[r][s])
                metric(&b, "hanudb_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", route_names[r],
                       status_codes[s], (unsigned long long)srv->http_requests[r][s]);
    metric(&b, "# HELP hanudb_http_request_duration_seconds Time from request to answer, including "
               "the wait for durability.\n# TYPE hanudb_http_request_duration_seconds histogram\n");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        if (!srv->http_latency_count[r]) continue;
        uint64_t cum = 0;
        for (int i = 0; i < HTTP_LATENCY_BUCKETS; i++) {
            cum += srv->http_latency[r][i];
            metric(&b, "hanudb_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                   route_names[r], (double)latency_le_us[i] / 1e6, (unsigned long long)cum);
        }
        metric(&b, "hanudb_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
               route_names[r], (unsigned long long)srv->http_latency_count[r]);
        metric(&b, "hanudb_http_request_duration_seconds_sum{route=\"%s\"} %g\n", route_names[r],
               (double)srv->http_latency[r][HTTP_LATENCY_BUCKETS] / 1e6);
        metric(&b, "hanudb_http_request_duration_seconds_count{route=\"%s\"} %llu\n", route_names[r],
               (unsigned long long)srv->http_latency_count[r]);
    }
    metric(&b, "# TYPE hanudb_txn gauge\nhanudb_txn %llu\n", (unsigned long long)st.last_txn);
    metric(&b, "# TYPE hanudb_durable_txn gauge\nhanudb_durable_txn %llu\n", (unsigned long long)st.durable_txn);
    metric(&b, "# TYPE hanudb_log_bytes_written_total counter\nhanudb_log_bytes_written_total %llu\n",
           (unsigned long long)st.log_bytes_written);
    metric(&b, "# TYPE hanudb_log_prealloc_bytes_total counter\nhanudb_log_prealloc_bytes_total %llu\n",
           (unsigned long long)st.prealloc_bytes);
    metric(&b, "# TYPE hanudb_syncs_total counter\nhanudb_syncs_total %llu\n", (unsigned long long)st.syncs);
    metric(&b, "# TYPE hanudb_keys gauge\nhanudb_keys %llu\n", (unsigned long long)st.keys);
    metric(&b, "# TYPE hanudb_collections gauge\nhanudb_collections %llu\n", (unsigned long long)st.databases);
    metric(&b, "# TYPE hanudb_disk_bytes gauge\nhanudb_disk_bytes %llu\n", (unsigned long long)st.disk_bytes);
    metric(&b, "# TYPE hanudb_log_files gauge\nhanudb_log_files %llu\n", (unsigned long long)st.files);
    metric(&b, "# HELP hanudb_floor_txn Compaction floor: the minimum of the durable txn and every watermark.\n"
               "# TYPE hanudb_floor_txn gauge\nhanudb_floor_txn %llu\n", (unsigned long long)store_floor(srv->store));
    store_watermark wm[STORE_MAX_WATERMARKS];
    size_t nw = store_watermark_list(srv->store, wm, STORE_MAX_WATERMARKS);
    metric(&b, "# HELP hanudb_watermark_txn Txn up to which a projection of the log has consumed it.\n"
               "# TYPE hanudb_watermark_txn gauge\n");
    for (size_t i = 0; i < nw && i < STORE_MAX_WATERMARKS; i++)
        metric(&b, "hanudb_watermark_txn{name=\"%s\"} %llu\n", wm[i].name, (unsigned long long)wm[i].txn);
    metric(&b, "# TYPE hanudb_keydir_bytes gauge\nhanudb_keydir_bytes %llu\n", (unsigned long long)st.memory_bytes);
    metric(&b, "# TYPE hanudb_compactions_total counter\nhanudb_compactions_total %llu\n",
           (unsigned long long)st.compactions);
    metric(&b, "# TYPE hanudb_compaction_lock_max_seconds gauge\nhanudb_compaction_lock_max_seconds %.6f\n",
           (double)st.compaction_lock_max_us / 1e6);
    metric(&b, "# TYPE hanudb_kv_requests_total counter\nhanudb_kv_requests_total %llu\n",
           (unsigned long long)srv->requests);
    metric(&b, "# TYPE hanudb_store_failed gauge\nhanudb_store_failed %d\n", store_failed(srv->store) ? 1 : 0);
    metric(&b, "# TYPE hanudb_idempotency_keys_expired_total counter\nhanudb_idempotency_keys_expired_total %llu\n",
           (unsigned long long)srv->idempotency_expired);
    c->req->res.status = 200;
    c->req->res.reason = "OK";
    c->req->res.content_length = b.len;
    h2o_add_header(&c->req->pool, &c->req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("text/plain; version=0.0.4"));
    h2o_send_inline(c->req, (const char *)b.data, b.len);
    count_request(srv, c->route, 200, c->start_ns);
    hanu_buf_free(&b);
}

/* ---- routing ---- */

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes one path segment into out; -1 when malformed or too long. */
static ssize_t decode_segment(const char *s, size_t len, char *out, size_t cap)
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

enum { M_GET = 1, M_HEAD = 2, M_PUT = 4, M_POST = 8, M_DELETE = 16, M_OPTIONS = 32 };

static unsigned method_bit(h2o_req_t *req)
{
    const char *m = req->method.base;
    switch (req->method.len) {
    case 3: return !memcmp(m, "GET", 3) ? M_GET : !memcmp(m, "PUT", 3) ? M_PUT : 0;
    case 4: return !memcmp(m, "POST", 4) ? M_POST : !memcmp(m, "HEAD", 4) ? M_HEAD : 0;
    case 6: return !memcmp(m, "DELETE", 6) ? M_DELETE : 0;
    case 7: return !memcmp(m, "OPTIONS", 7) ? M_OPTIONS : 0;
    default: return 0;
    }
}

/* What a path names, by its shape alone. */
enum http_path {
    PATH_UNKNOWN, PATH_HEALTH, PATH_STATUS, PATH_METRICS, PATH_COLLECTIONS, PATH_COLLECTION,
    PATH_DOCS, PATH_DOC, PATH_BATCH, PATH_COUNT
};

#define READ_ONLY_METHODS { M_GET | M_HEAD | M_OPTIONS, "GET, HEAD, OPTIONS" }
/* The methods each path answers: its Allow header, and the CORS preflight's methods. */
static const struct { unsigned methods; const char *allow; } path_methods[PATH_COUNT] = {
    [PATH_UNKNOWN] = { 0, "" },
    [PATH_HEALTH] = READ_ONLY_METHODS,
    [PATH_STATUS] = READ_ONLY_METHODS,
    [PATH_METRICS] = READ_ONLY_METHODS,
    [PATH_COLLECTIONS] = READ_ONLY_METHODS,
    [PATH_COLLECTION] = { M_GET | M_HEAD | M_PUT | M_DELETE | M_OPTIONS, "GET, HEAD, PUT, DELETE, OPTIONS" },
    [PATH_DOCS] = { M_POST | M_OPTIONS, "POST, OPTIONS" },
    [PATH_DOC] = { M_GET | M_HEAD | M_PUT | M_DELETE | M_OPTIONS, "GET, HEAD, PUT, DELETE, OPTIONS" },
    [PATH_BATCH] = { M_POST | M_OPTIONS, "POST, OPTIONS" },
};

/* Splits the path (without the query) into its segments and names the route. An
   empty segment (a trailing or doubled slash) matches nothing: clients send
   "/c/x/docs/.." as "/c/x/", which must not be "/c/x". */
static int match_path(h2o_req_t *req, const char *seg[4], size_t segl[4])
{
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    const char *p = req->path.base, *end = p + plen;
    if (p == end || *p != '/') return PATH_UNKNOWN;
    p++;
    size_t n = 0;
    for (;;) {
        if (n == 4) return PATH_UNKNOWN;   /* more segments than any route has */
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
    if (!SEG_IS(0, "c")) return PATH_UNKNOWN;
    if (n == 2) return PATH_COLLECTION;
    if (n == 3 && SEG_IS(2, "docs")) return PATH_DOCS;
    if (n == 3 && SEG_IS(2, "_batch")) return PATH_BATCH;
    if (n == 4 && SEG_IS(2, "docs")) return PATH_DOC;
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
    case PATH_DOCS: return ROUTE_DOC_POST;
    case PATH_BATCH: return ROUTE_BATCH;
    case PATH_DOC:
        return m & (M_GET | M_HEAD) ? ROUTE_DOC_GET : m == M_PUT ? ROUTE_DOC_PUT
             : m == M_DELETE ? ROUTE_DOC_DELETE : ROUTE_OTHER;
    default: return ROUTE_OTHER;
    }
}

static void parse_durability(http_call *c, int *bad)
{
    *bad = 0;
    c->durability = HKV_DUR_LOCAL;
    const char *v = NULL;
    size_t vl = 0;
    h2o_req_t *req = c->req;
    if (req->query_at != SIZE_MAX) {
        const char *q = req->path.base + req->query_at + 1, *end = req->path.base + req->path.len;
        while (q < end) {
            const char *amp = memchr(q, '&', (size_t)(end - q));
            const char *e = amp ? amp : end;
            if ((size_t)(e - q) > 11 && !memcmp(q, "durability=", 11)) { v = q + 11; vl = (size_t)(e - q - 11); }
            q = amp ? amp + 1 : end;
        }
    }
    const h2o_iovec_t *h = http_header(req, H2O_STRLIT("hanu-durability"));
    if (h) { v = h->base; vl = h->len; }
    if (!v) return;
    if (vl == 4 && !memcmp(v, "none", 4)) c->durability = HKV_DUR_NONE;
    else if (vl == 5 && !memcmp(v, "local", 5)) c->durability = HKV_DUR_LOCAL;
    else if (vl == 6 && !memcmp(v, "bucket", 6)) c->durability = HKV_DUR_BUCKET;
    else *bad = 1;
}

/* Splits HOST[:PORT] (HOST may be [v6]): the host's length, and the port, or -1
   when there is none; 0 when it does not parse. */
static int split_authority(const char *s, size_t len, size_t *host_len, long *port)
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
static int host_allowed(server *srv, h2o_req_t *req)
{
    h2o_iovec_t a = req->input.authority;
    size_t hl;
    long port;
    /* What clients send almost always (measured: the general path below costs about
       500 instructions a request, 1.5% of a document write). */
    if (a.len == srv->http_authority_len && !memcmp(a.base, srv->http_authority, a.len)) return 1;
    if (!a.base || !split_authority(a.base, a.len, &hl, &port)) return 0;
    if (port < 0) port = srv->http_accept.ssl_ctx ? 443 : 80;
    if (port == srv->http_port && is_loopback_host(a.base, hl)) return 1;
    for (size_t i = 0; i < srv->nallowed_hosts; i++) {
        const char *e = srv->allowed_hosts[i];
        size_t el;
        long eport;
        if (!strcmp(e, "*")) return 1;
        if (split_authority(e, strlen(e), &el, &eport) && el == hl && !strncasecmp(e, a.base, hl) &&
            (eport < 0 || eport == port))
            return 1;
    }
    return 0;
}

/* A page of another site may send text/plain, form and multipart bodies without
   asking (a CORS "simple" request); application/json needs a preflight, which
   CORS then decides. So a body is read only when it says it is JSON. */
static int content_type_is_json(h2o_req_t *req)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1);
    if (i < 0) return 0;
    const h2o_iovec_t *v = &req->headers.entries[i].value;
    const char *p = v->base, *end = p + v->len;
    static const char json[] = "application/json";
    if (v->len == sizeof json - 1 && !memcmp(p, json, sizeof json - 1)) return 1;   /* what clients send */
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if ((size_t)(end - p) < sizeof json - 1) return 0;
    for (size_t i = 0; i < sizeof json - 1; i++, p++)   /* case-insensitive, no locale */
        if (*p != json[i] && !(*p >= 'A' && *p <= 'Z' && *p + 32 == json[i])) return 0;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    return p == end || *p == ';';   /* parameters (charset) allowed */
}

static int is_dot_segment(const char *s, size_t n)
{
    return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

static void send_empty(http_call *c, int status)
{
    h2o_req_t *req = c->req;
    req->res.status = status;
    req->res.reason = reason_of(status);
    req->res.content_length = 0;
    add_cors(c->srv, req);
    h2o_send_inline(req, "", 0);
    count_request(c->srv, c->route, status, c->start_ns);
}

/* OPTIONS: the route's methods, and a CORS preflight's answer for allowed origins. */
static void reply_options(http_call *c, int path)
{
    server *srv = c->srv;
    h2o_req_t *req = c->req;
    const char *allow = path_methods[path].allow;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, allow, strlen(allow));
    if (srv->ncors && cors_origin(srv, req)) {
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-methods"), 0, NULL,
                              allow, strlen(allow));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-headers"), 0, NULL,
                              srv->cors_allow_headers, strlen(srv->cors_allow_headers));
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-max-age"), 0, NULL,
                              H2O_STRLIT("600"));
    }
    send_empty(c, 204);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    server *srv = *(server **)(self + 1);
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
    if (!srv->ntokens && !host_allowed(srv, req)) {
        h2o_iovec_t a = req->input.authority;
        http_error(c, 403, "host_not_allowed", "Host \"%.*s\" is not served: without --tokens only loopback "
                   "names with port %u are, and --allowed-hosts", (int)HANU_MIN(a.len, 100),
                   a.base ? a.base : "", srv->http_port);
        return 0;
    }
    const char *seg[4];
    size_t segl[4];
    int path = match_path(req, seg, segl);
    unsigned m = method_bit(req);
    if (path == PATH_UNKNOWN) {
        http_error(c, 404, "not_found", "no such route; see docs/API.md");
        return 0;
    }
    c->route = route_of(path, m);
    if (m == M_OPTIONS) {
        reply_options(c, path);
        return 0;
    }
    if (!(path_methods[path].methods & m)) {
        const char *allow = path_methods[path].allow;
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, allow, strlen(allow));
        http_error(c, 405, "method_not_allowed", "%.*s is not allowed here; use %s",
                   (int)HANU_MIN(req->method.len, 20), req->method.base, allow);
        return 0;
    }
    if (path == PATH_HEALTH) {
        http_reply(c, 200, "{\"ok\":true}", 11, 0);
        return 0;
    }
    c->token = srv->ntokens ? find_token(srv, req) : NULL;
    int open_route = (path == PATH_STATUS || path == PATH_METRICS) && srv->opt.open_metrics;
    if (srv->ntokens && !c->token && !open_route) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL, H2O_STRLIT("Bearer"));
        http_error(c, 401, "unauthorized", "%s", http_header(req, H2O_STRLIT("authorization"))
                   ? "unknown bearer token" : "this server needs an Authorization: Bearer token");
        return 0;
    }
    int takes_body = m == M_POST || (path == PATH_DOC && m == M_PUT);
    if ((takes_body || req->entity.len) && !content_type_is_json(req)) {
        http_error(c, 415, "unsupported_media_type", "the body must be JSON, sent with "
                   "Content-Type: application/json");
        return 0;
    }
    if (path == PATH_STATUS) { reply_status(c); return 0; }
    if (path == PATH_METRICS) { reply_metrics(c); return 0; }
    if (path == PATH_COLLECTIONS) { http_collections_list(c); return 0; }
    ssize_t cl = decode_segment(seg[1], segl[1], c->col, STORE_DB_NAME_MAX);
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
    if (path == PATH_DOCS) { http_doc_write(c); return 0; }
    ssize_t il = decode_segment(seg[3], segl[3], c->id, DOCS_ID_MAX);
    if (il <= 0 || !docs_id_valid(c->id, (size_t)il)) {
        http_error(c, 400, "invalid_id", "document ids are 1-256 bytes without '/' or control characters, "
                   "are not . or .., and are percent-encoded in URLs");
        return 0;
    }
    c->id_len = (size_t)il;
    c->id[il] = '\0';
    if (m & (M_GET | M_HEAD)) http_doc_get(c);
    else http_doc_write(c);
    return 0;
}

/* ---- listener ---- */

static void on_http_accept(h2o_socket_t *listener, const char *err)
{
    server *srv = listener->data;
    if (err) return;
    for (int i = 0; i < 64; i++) {
        h2o_socket_t *sock = h2o_evloop_socket_accept(listener);
        if (!sock) break;
        if (srv->stopping) { h2o_socket_close(sock); continue; }
        int one = 1;
        setsockopt(h2o_socket_get_fd(sock), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        h2o_accept(&srv->http_accept, sock);
    }
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return 0;
}

static int read_file(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return HANU_ERR_IO;
    hanu_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) hanu_buf_append(&b, chunk, n);
    fclose(f);
    hanu_buf_append(&b, "", 1);
    *out = (char *)b.data;
    return HANU_OK;
}

/* Idempotency keys past their time are deleted in the background, a batch at a time,
   every half TTL (1 s to 60 s): a lookup already ignores them, this frees their memory. */
static void on_expire_sweep(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, expire_entry, entry);
    size_t n = 0;
    if (!srv->stopping && docs_idem_expire(srv->store, hanu_wall_ms(), 10000, &n) == HANU_OK)
        srv->idempotency_expired += n;
    h2o_timeout_link(srv->loop, &srv->expire_timeout, &srv->expire_entry);
}

int http_start(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    srv->started_ms = hanu_wall_ms();
    if (!o->http_addr || !*o->http_addr || !strcmp(o->http_addr, "off")) return HANU_OK;
    if (o->tokens_file && *o->tokens_file && strchr(o->tokens_file, ' ')) {
        /* HANUDB_TOKENS="tok1 rw *;tok2 ro users": the lines themselves. */
        int rc = load_tokens(srv, o->tokens_file, err, errcap);
        if (rc) return rc;
    } else if (o->tokens_file && *o->tokens_file) {
        char *text = NULL;
        if (read_file(o->tokens_file, &text) != HANU_OK) {
            snprintf(err, errcap, "cannot read the tokens file %s: %s", o->tokens_file, strerror(errno));
            return HANU_ERR_IO;
        }
        int rc = load_tokens(srv, text, err, errcap);
        free(text);
        if (rc) return rc;
    }
    if (o->tokens && *o->tokens) {
        int rc = load_tokens(srv, o->tokens, err, errcap);
        if (rc) return rc;
    }
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
            if (strcmp(t, "*") && !split_authority(t, strlen(t), &hl, &port)) {
                snprintf(err, errcap, "--allowed-hosts: \"%s\" is not NAME or NAME:PORT", t);
                free(copy);
                return HANU_ERR_INVALID;
            }
            srv->allowed_hosts = realloc(srv->allowed_hosts, (srv->nallowed_hosts + 1) * sizeof(char *));
            srv->allowed_hosts[srv->nallowed_hosts++] = strdup(t);
        }
        free(copy);
    }
    struct sockaddr_storage ss;
    socklen_t sl;
    if (server_parse_addr(o->http_addr, &ss, &sl) != 0) {
        snprintf(err, errcap, "cannot parse --http-addr \"%s\" (want HOST:PORT)", o->http_addr);
        return HANU_ERR_INVALID;
    }
    if (!srv->ntokens && !is_loopback(&ss)) {
        /* No tokens: anyone who can connect could read and write everything. */
        uint16_t port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port;
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        memset(&ss, 0, sizeof ss);
        in->sin_family = AF_INET;
        in->sin_port = port;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof *in;
        fprintf(stderr, "hanudb: no tokens configured (--tokens): HTTP listens on loopback only, "
                "127.0.0.1:%u, instead of %s\n", ntohs(port), o->http_addr);
    }
    h2o_timeout_init(srv->loop, &srv->parked_timeout, 1000);
    srv->parked_entry.cb = on_parked_sweep;
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
    if (http_timeout_start(srv) != HANU_OK) {
        snprintf(err, errcap, "out of memory");
        return HANU_ERR_NOMEM;
    }
    srv->http_accept.ctx = &srv->http_ctx;
    srv->http_accept.hosts = srv->http_globalconf.hosts;
    if (o->tls_cert && *o->tls_cert) {
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
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 1024) != 0) {
        snprintf(err, errcap, "cannot listen on %s: %s", o->http_addr, strerror(errno));
        if (fd >= 0) close(fd);
        return HANU_ERR_IO;
    }
    struct sockaddr_storage bound;   /* the real port, also when asked for port 0 */
    socklen_t bl = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &bl) == 0)
        srv->http_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                           : ((struct sockaddr_in *)&bound)->sin_port);
    srv->http_authority_len = (size_t)snprintf(srv->http_authority, sizeof srv->http_authority, "127.0.0.1:%u",
                                               srv->http_port);
    srv->http_listener = h2o_evloop_socket_create(srv->loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    srv->http_listener->data = srv;
    h2o_socket_read_start(srv->http_listener, on_http_accept);
    srv->http_on = 1;
    char shown[INET6_ADDRSTRLEN + 8] = "";
    if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, shown, sizeof shown);
        snprintf(shown + strlen(shown), 8, ":%u", ntohs(((struct sockaddr_in *)&ss)->sin_port));
    } else {
        snprintf(shown, sizeof shown, "%s", o->http_addr);
    }
    fprintf(stderr, "hanudb: documents API (HTTP%s) listening on %s%s\n", srv->http_accept.ssl_ctx ? "S" : "",
            shown, srv->ntokens ? ", bearer tokens required" : "");
    return HANU_OK;
}

void http_shutdown_begin(server *srv)
{
    if (srv->http_listener) {
        h2o_socket_read_stop(srv->http_listener);
        h2o_socket_close(srv->http_listener);
        srv->http_listener = NULL;
    }
}

size_t http_busy(server *srv) { return srv->parked_count; }

void http_stop(server *srv)
{
    /* Whatever is still parked gets its answer now (the final sync happened). */
    http_on_durable(srv, atomic_load(&srv->durable_txn), store_failed(srv->store));
    if (h2o_timeout_is_linked(&srv->parked_entry)) h2o_timeout_unlink(&srv->parked_entry);
    if (h2o_timeout_is_linked(&srv->expire_entry)) h2o_timeout_unlink(&srv->expire_entry);
    http_timeout_stop(srv);
    /* The h2o context and its keep-alive connections end with the process: h2o 2.2.5
       has no way to close them gracefully. */
    srv->http_on = 0;
    for (size_t i = 0; i < srv->ntokens; i++) {
        free(srv->tokens[i].token);
        for (size_t j = 0; j < srv->tokens[i].ncollections; j++) free(srv->tokens[i].collections[j]);
        free(srv->tokens[i].collections);
    }
    free(srv->tokens);
    for (size_t i = 0; i < srv->ncors; i++) free(srv->cors[i]);
    free(srv->cors);
    free(srv->cors_allow_headers);
    for (size_t i = 0; i < srv->nallowed_hosts; i++) free(srv->allowed_hosts[i]);
    free(srv->allowed_hosts);
    hanu_buf_free(&srv->http_scratch);
}
