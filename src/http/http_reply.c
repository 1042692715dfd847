/*
 * http_reply.c: how the documents API answers: status line, JSON body, CORS
 * headers and the request's count in the metrics, sent now or held in the
 * server's waiters (waiters.h) until the watermark the write asked for
 * covers its txn. h2o keeps no timeout on a request that waits for us, so a
 * held answer has a deadline of its own.
 */
#include "http/http_internal.h"
#include "http/http_guard.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* An answer held until its write reaches a watermark. */
typedef struct http_parked {
    waiter wait;
    server *srv;
    h2o_req_t *req;
    struct http_parked **guard;  /* in the request's pool; points back here until freed */
    int route;
    uint64_t start_ns;
    const auth_token *token;     /* for the access log */
    int status;
    char *body;                  /* in the request's pool */
    size_t len;
} http_parked;

#define PARKED_DEADLINE_NS (30ull * 1000000000ull)
#define LOG_FAILED_MESSAGE "writing or syncing the log failed: this write is not acknowledged and its " \
    "outcome is unknown; the store refuses writes until it is restarted"

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

static void set_response_head(http_call *c, int status, size_t len)
{
    h2o_req_t *req = c->req;
    req->res.status = status;
    req->res.reason = reason_of(status);
    /* A 304 has no body, and a Content-Length would claim the document's is 0. */
    req->res.content_length = status == 304 ? SIZE_MAX : len;
    if (status != 304)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                       H2O_STRLIT("application/json"));
    http_add_cors(c->srv, req);
}

void http_send(http_call *c, int status, const char *body, size_t len)
{
    set_response_head(c, status, len);
    h2o_send_inline(c->req, body, len);
    http_answered(c, status, len);
}

static void free_owned_body(void *p)
{
    free(*(void **)p);
}

static void http_send_owned(http_call *c, int status, hanu_buf *b)
{
    h2o_req_t *req = c->req;
    /* the request's pool frees the body when h2o is done with the request */
    void **owner = h2o_mem_alloc_shared(&req->pool, sizeof *owner, free_owned_body);
    *owner = b->data;
    h2o_iovec_t body = h2o_iovec_init(b->data ? (char *)b->data : "", b->len);
    *b = (hanu_buf){0};
    set_response_head(c, status, body.len);
    static h2o_generator_t generator = { NULL, NULL };
    h2o_start_response(req, &generator);
    if (h2o_memis(req->input.method.base, req->input.method.len, H2O_STRLIT("HEAD")))
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
    else
        h2o_send(req, &body, 1, H2O_SEND_STATE_FINAL);
    http_answered(c, status, body.len);
}

void http_send_empty(http_call *c, int status)
{
    h2o_req_t *req = c->req;
    req->res.status = status;
    req->res.reason = reason_of(status);
    req->res.content_length = 0;
    http_add_cors(c->srv, req);
    h2o_send_inline(req, "", 0);
    http_answered(c, status, 0);
}

static void send_error(http_call *c, int status, const char *code, const char *msg)
{
    hanu_buf b = {0};
    http_error_json(&b, code, msg);
    http_send(c, status, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

static void on_parked_req_gone(void *p)
{
    http_parked *pk = *(http_parked **)p;
    if (!pk) return;
    /* The client left: nobody to answer. */
    waiters_cancel(&pk->srv->waits, &pk->wait);
    pk->srv->parked_count--;
    free(pk);
}

static void on_parked_released(waiter *w, int outcome)
{
    http_parked *pk = H2O_STRUCT_FROM_MEMBER(http_parked, wait, w);
    server *srv = pk->srv;
    srv->parked_count--;
    *pk->guard = NULL;   /* sending may free the request's pool */
    http_call c = { .srv = srv, .req = pk->req, .route = pk->route, .start_ns = pk->start_ns, .token = pk->token };
    if (outcome == WAITER_REACHED)
        http_send(&c, pk->status, pk->body, pk->len);
    else if (outcome == WAITER_TIMED_OUT)
        send_error(&c, 503, "timeout", "the write is in the log but has not reached its durability level "
                   "(fdatasync, or the bucket) in 30 s; its outcome is unknown");
    else
        send_error(&c, 500, "internal", LOG_FAILED_MESSAGE);
    free(pk);
}

/* Once a second while answers are held: those past their deadline get a 503. */
static void on_parked_sweep(h2o_timeout_entry_t *entry)
{
    server *srv = H2O_STRUCT_FROM_MEMBER(server, parked_entry, entry);
    waiters_expire(&srv->waits, hanu_now_ns());
    if (srv->parked_count) h2o_timeout_link(srv->loop, &srv->parked_timeout, &srv->parked_entry);
}

void http_reply_start(server *srv)
{
    h2o_timeout_init(srv->loop, &srv->parked_timeout, 1000);
    srv->parked_entry.cb = on_parked_sweep;
}

void http_reply_stop(server *srv)
{
    if (h2o_timeout_is_linked(&srv->parked_entry)) h2o_timeout_unlink(&srv->parked_entry);
}

/* Sends now when txn has reached mark, else holds the answer in the waiters. */
static void reply_after(http_call *c, int status, const char *body, size_t len, int mark, uint64_t txn)
{
    server *srv = c->srv;
    if (c->answer) {   /* a query worker: the loop sends it later */
        c->answer->status = status;
        hanu_buf_reset(&c->answer->body);
        if (hanu_buf_append(&c->answer->body, body, len) != HANU_OK) c->answer->status = 0;
        return;
    }
    if (status >= 400) srv->errors++;
    if (!txn || server_reached(srv, mark, txn)) {
        http_send(c, status, body, len);
        return;
    }
    http_parked *pk = malloc(sizeof *pk);
    if (!pk) {
        send_error(c, 500, "internal", "out of memory");
        return;
    }
    *pk = (http_parked){ .srv = srv, .req = c->req, .route = c->route, .start_ns = c->start_ns,
                         .token = c->token, .status = status, .len = len };
    uint64_t deadline = mark == WAIT_WRITTEN ? 0 : c->start_ns + PARKED_DEADLINE_NS;
    if (waiters_add(&srv->waits, &pk->wait, mark, txn, deadline, on_parked_released) != WAITER_PENDING) {
        free(pk);   /* not reached, so the log failed */
        send_error(c, 500, "internal", LOG_FAILED_MESSAGE);
        return;
    }
    server_want_mark(srv, mark, txn);
    pk->body = h2o_mem_alloc_pool(&c->req->pool, len + 1);
    memcpy(pk->body, body, len);
    pk->guard = h2o_mem_alloc_shared(&c->req->pool, sizeof *pk->guard, on_parked_req_gone);
    *pk->guard = pk;
    srv->parked_count++;
    if (deadline && !h2o_timeout_is_linked(&srv->parked_entry))
        h2o_timeout_link(srv->loop, &srv->parked_timeout, &srv->parked_entry);
}

void http_reply_buf(http_call *c, int status, hanu_buf *b)
{
    if (c->answer) {   /* a query worker: the loop sends it later, without a copy */
        hanu_buf_free(&c->answer->body);
        c->answer->body = *b;
        c->answer->status = status;
        *b = (hanu_buf){0};
        return;
    }
    if (status >= 400) c->srv->errors++;
    http_send_owned(c, status, b);
}

void http_reply(http_call *c, int status, const char *body, size_t len, uint64_t wait_txn)
{
    reply_after(c, status, body, len, WAIT_DURABLE, wait_txn);
}

void http_reply_write(http_call *c, int status, const char *body, size_t len, uint64_t txn)
{
    /* `none`: the frame may still be in the log's buffer; the loop writes it, with
       every other of this iteration, before answering. */
    reply_after(c, status, body, len, server_wait_mark(c->durability), txn);
}

void http_error(http_call *c, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hanu_buf b = {0};
    http_error_json(&b, code, msg);
    http_reply(c, status, (const char *)b.data, b.len, 0);
    hanu_buf_free(&b);
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

