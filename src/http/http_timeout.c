/*
 * http_timeout.c: the HTTP/1 connection deadlines h2o 2.2.5 does not have.
 *
 * h2o has one timer per connection (globalconf.http1.req_timeout, 10 s by
 * default), started when it waits for a request and stopped when the request
 * is handed over: it covers idle keep-alive, the head and the whole body at
 * once, and closes without an answer. A 1 MB PUT at 60 KB/s was cut at 10.1 s.
 * http_listen.c sets that timer out of the way (a day) and this file keeps three:
 *
 *   header  (--http-header-timeout-ms) the whole head, from its first byte, or
 *           from connecting while nothing was sent: 408 with the JSON body, or
 *           a plain close when nothing was sent;
 *   body    (--http-body-timeout-ms) the longest wait for more bytes of a body
 *           that is being read: 408 with the JSON body;
 *   idle    (--http-idle-timeout-ms) a kept-alive connection between requests:
 *           closed without an answer.
 *
 * h2o's connection structure is private, so a sweep every tick (an eighth of
 * the shortest deadline, 10 ms to 1 s) walks the connections through h2o's own
 * foreach_request and reads only public fields: the request's version (0 until
 * the head is parsed), pathconf (set once it is handed to a handler), its
 * timestamps, the socket's input buffer and bytes written. What needs memory
 * between sweeps (when a keep-alive connection went idle, when a body last
 * grew) is kept in an array sorted by request address, rebuilt every tick.
 * Deadlines are thus kept within one tick. A connection is closed by shutting
 * its socket down: h2o then reads end-of-file and frees it by its own path.
 */
#include "http/http_internal.h"
#include "http/http_guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

enum { PHASE_IDLE, PHASE_HEAD, PHASE_BODY, PHASE_BUSY };

typedef struct watch {
    h2o_req_t *req;
    h2o_socket_t *sock;
    size_t marker;                /* idle: bytes written; body: bytes buffered */
    uint64_t since_ms;            /* idle since, or the body's last progress */
    int phase;
} watch;

struct http_timeouts {
    server *srv;
    watch *old, *cur;             /* last tick's and this tick's, sorted by req */
    size_t nold, ncur, cap;
    uint64_t now_ms;
    h2o_timeout_t tick;
    h2o_timeout_entry_t entry;
};

/* h2o's timestamps (connected_at, request_begin_at) and its cached clock are wall-clock times. */
static uint64_t ms_of(const struct timeval *tv) { return (uint64_t)tv->tv_sec * 1000 + (uint64_t)tv->tv_usec / 1000; }

static int collect(h2o_req_t *req, void *data)
{
    struct http_timeouts *t = data;
    if (t->ncur == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        watch *o = realloc(t->old, cap * sizeof *o);
        if (!o) return 0;   /* out of memory: this tick watches fewer connections */
        t->old = o;
        watch *c = realloc(t->cur, cap * sizeof *c);
        if (!c) return 0;
        t->cur = c;
        t->cap = cap;
    }
    h2o_socket_t *sock = req->conn->callbacks->get_socket ? req->conn->callbacks->get_socket(req->conn) : NULL;
    if (!sock) return 0;
    int phase = req->version == 0 ? (sock->input->size == 0 ? PHASE_IDLE : PHASE_HEAD)
              : req->pathconf == NULL ? PHASE_BODY : PHASE_BUSY;
    /* A response written since the last tick ends an idle stretch; body bytes that
       arrived are progress (h2o buffers the body, decoded if chunked, until it is whole).
       sock->bytes_read is not kept up to date by h2o 2.2.5's event loop (measured). */
    size_t marker = phase == PHASE_BODY ? sock->input->size : sock->bytes_written;
    t->cur[t->ncur++] = (watch){ req, sock, marker, t->now_ms, phase };
    return 0;
}

static int by_req(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const watch *)a)->req, y = (uintptr_t)((const watch *)b)->req;
    return x < y ? -1 : x > y;
}

static void close_silently(h2o_socket_t *sock) { shutdown(h2o_socket_get_fd(sock), SHUT_RDWR); }

/* 408 with the JSON body, then close; only a close while a write is under way. */
static void answer_timeout(h2o_req_t *req, h2o_socket_t *sock, const char *msg)
{
    if (h2o_socket_is_writing(sock)) {
        close_silently(sock);
        return;
    }
    h2o_socket_read_stop(sock);
    http_guard_send_error(req, 408, "Request Timeout", msg, 1);
}

/* Returns 1 when it ended the connection of w. */
static int enforce(struct http_timeouts *t, const watch *w)
{
    const server_options *o = &t->srv->opt;
    char msg[128];
    switch (w->phase) {
    case PHASE_IDLE:
        if (w->sock->bytes_written == 0) {
            /* No request yet on this connection: the header deadline, from connecting. */
            if (t->now_ms - ms_of(&w->req->conn->connected_at) < o->http_header_timeout_ms) return 0;
        } else if (t->now_ms - w->since_ms < o->http_idle_timeout_ms) {
            return 0;
        }
        close_silently(w->sock);
        return 1;
    case PHASE_HEAD: {
        const struct timeval *begin = &w->req->timestamps.request_begin_at;
        uint64_t from = begin->tv_sec ? ms_of(begin) : w->since_ms;
        if (t->now_ms - from < o->http_header_timeout_ms) return 0;
        snprintf(msg, sizeof msg, "the request head did not arrive within %u ms (--http-header-timeout-ms)",
                 o->http_header_timeout_ms);
        answer_timeout(w->req, w->sock, msg);
        return 1;
    }
    case PHASE_BODY:
        if (t->now_ms - w->since_ms < o->http_body_timeout_ms) return 0;
        snprintf(msg, sizeof msg, "no byte of the request body for %u ms (--http-body-timeout-ms)",
                 o->http_body_timeout_ms);
        answer_timeout(w->req, w->sock, msg);
        return 1;
    default:
        return 0;   /* being answered: the handler's business (parked writes have their own deadline) */
    }
}

static void on_tick(h2o_timeout_entry_t *entry)
{
    struct http_timeouts *t = H2O_STRUCT_FROM_MEMBER(struct http_timeouts, entry, entry);
    server *srv = t->srv;
    t->now_ms = ms_of(h2o_get_timestamp(&srv->http_ctx, NULL, NULL));
    t->ncur = 0;
    srv->http_globalconf.http1.callbacks.foreach_request(&srv->http_ctx, collect, t);
    if (t->ncur > 1) qsort(t->cur, t->ncur, sizeof *t->cur, by_req);   /* cur is NULL before the first connection */
    /* Carry the idle and progress clocks over from the last tick when nothing happened
       in between: same connection, same phase, same marker. */
    for (size_t i = 0, j = 0; i < t->ncur; i++) {
        watch *w = &t->cur[i];
        while (j < t->nold && (uintptr_t)t->old[j].req < (uintptr_t)w->req) j++;
        const watch *p = j < t->nold && t->old[j].req == w->req ? &t->old[j] : NULL;
        if (p && p->sock == w->sock && p->phase == w->phase && p->marker == w->marker)
            w->since_ms = p->since_ms;
    }
    /* Then act: ending a connection may free it at once, so each watch is used once. */
    for (size_t i = 0; i < t->ncur; i++)
        if (enforce(t, &t->cur[i])) t->cur[i].sock = NULL;   /* never matches again */
    watch *swap = t->old;
    t->old = t->cur;
    t->cur = swap;
    t->nold = t->ncur;
    h2o_timeout_link(srv->loop, &t->tick, &t->entry);
}

int http_timeout_start(server *srv)
{
    const server_options *o = &srv->opt;
    struct http_timeouts *t = calloc(1, sizeof *t);
    if (!t) return HANU_ERR_NOMEM;
    t->srv = srv;
    uint32_t shortest = HANU_MIN(o->http_header_timeout_ms, HANU_MIN(o->http_body_timeout_ms, o->http_idle_timeout_ms));
    uint64_t tick = shortest / 8;
    h2o_timeout_init(srv->loop, &t->tick, tick < 10 ? 10 : tick > 1000 ? 1000 : tick);
    t->entry.cb = on_tick;
    h2o_timeout_link(srv->loop, &t->tick, &t->entry);
    srv->http_timeouts = t;
    return HANU_OK;
}

void http_timeout_stop(server *srv)
{
    struct http_timeouts *t = srv->http_timeouts;
    if (!t) return;
    if (h2o_timeout_is_linked(&t->entry)) h2o_timeout_unlink(&t->entry);
    h2o_timeout_dispose(srv->loop, &t->tick);
    free(t->old);
    free(t->cur);
    free(t);
    srv->http_timeouts = NULL;
}
