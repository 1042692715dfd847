/*
 * client_conn.c: the socket half of the key-value client: connect with a
 * timeout, a send buffer and a receive buffer per connection, pipelining
 * (hkv_pipe_*) and the blocking one-call-per-op API built on it. Framing is
 * done by client_wire.c (hkv_encode / hkv_decode).
 *
 * The socket is non-blocking; every wait is a poll() bounded by the
 * connection's timeouts. Invariant: ops[ops_head..ops.len) holds, in order,
 * the op of every request added and not yet answered; its responses arrive in
 * that order (PROTOCOL.md), which is how hkv_decode knows each frame's shape.
 */
#include "hanudb_client.h"
#include "base/base.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK (64u * 1024)

struct hkv_conn {
    int fd;
    int broken;               /* set by IO/timeout/protocol failures */
    int io_timeout_ms;
    uint32_t max_response;
    hkv_buf wbuf;             /* encoded requests; wbuf[woff..len) not yet sent */
    size_t woff;
    hkv_buf rbuf;             /* received bytes; rbuf[roff..len) not yet decoded */
    size_t roff;
    size_t last_frame;        /* bytes of the frame last returned, dropped on the next call */
    hkv_buf ops;              /* op byte of each pending request */
    size_t ops_head;
    char err[256];
};

static void set_err(hkv_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(hkv_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static int fail(hkv_conn *c, int status, const char *what)
{
    if (status == HKV_ERR_IO || status == HKV_ERR_TIMEOUT || status == HKV_ERR_PROTOCOL)
        c->broken = 1;
    set_err(c, "%s", what);
    return status;
}

static int fail_errno(hkv_conn *c, const char *what)
{
    c->broken = 1;
    set_err(c, "%s: %s", what, strerror(errno));
    return HKV_ERR_IO;
}

/* ---- connect ---- */

/* Splits "HOST:PORT" or "[V6]:PORT" into host and port strings. */
static int split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon, *h = addr;
    size_t hlen;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':')
            return HKV_ERR_ARG;
        h = addr + 1;
        hlen = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return HKV_ERR_ARG;
        hlen = (size_t)(colon - addr);
    }
    size_t plen = strlen(colon + 1);
    if (hlen == 0 || hlen >= hostlen || plen == 0 || plen >= portlen)
        return HKV_ERR_ARG;
    for (const char *q = colon + 1; *q; q++)
        if (*q < '0' || *q > '9')
            return HKV_ERR_ARG;
    memcpy(host, h, hlen);
    host[hlen] = 0;
    memcpy(port, colon + 1, plen + 1);
    return HKV_OK;
}

/* Waits for fd to become ready for events; HKV_OK, HKV_ERR_TIMEOUT or HKV_ERR_IO. */
static int wait_fd(int fd, short events, int timeout_ms, short *revents)
{
    struct pollfd pfd = { .fd = fd, .events = events };
    for (;;) {
        int n = poll(&pfd, 1, timeout_ms);
        if (n > 0) {
            if (revents)
                *revents = pfd.revents;
            return HKV_OK;
        }
        if (n == 0)
            return HKV_ERR_TIMEOUT;
        if (errno != EINTR)
            return HKV_ERR_IO;
    }
}

static int try_connect(const struct addrinfo *ai, int timeout_ms, int *fd_out, int *err_out)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
        *err_out = errno;
        return HKV_ERR_IO;
    }
    int rc = HKV_OK;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            *err_out = errno;
            rc = HKV_ERR_IO;
        } else {
            rc = wait_fd(fd, POLLOUT, timeout_ms, NULL);
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (rc == HKV_OK && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
                soerr = errno;
            if (rc == HKV_OK && soerr != 0) {
                *err_out = soerr;
                rc = HKV_ERR_IO;
            } else if (rc != HKV_OK) {
                *err_out = rc == HKV_ERR_TIMEOUT ? ETIMEDOUT : errno;
            }
        }
    }
    if (rc != HKV_OK) {
        close(fd);
        return rc;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *fd_out = fd;
    return HKV_OK;
}

int hkv_connect(const char *addr, const hkv_options *opt, hkv_conn **out,
                char *errbuf, size_t errlen)
{
    *out = NULL;
    hkv_options o = opt ? *opt : (hkv_options){0};
    int ctimeout = o.connect_timeout_ms == 0 ? 5000 : o.connect_timeout_ms;
    char host[256], port[16];
    if (!addr || split_addr(addr, host, sizeof host, port, sizeof port) != HKV_OK) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "bad address \"%s\": want HOST:PORT",
                     addr ? addr : "(null)");
        return HKV_ERR_ARG;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "resolve %s: %s", host, gai_strerror(gai));
        return HKV_ERR_IO;
    }
    int fd = -1, err = 0, rc = HKV_ERR_IO;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        rc = try_connect(ai, ctimeout, &fd, &err);
        if (rc == HKV_OK)
            break;
    }
    freeaddrinfo(res);
    if (rc != HKV_OK) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "connect %s: %s", addr,
                     rc == HKV_ERR_TIMEOUT ? "timed out" : strerror(err));
        return rc;
    }
    hkv_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "out of memory");
        return HKV_ERR_NOMEM;
    }
    c->fd = fd;
    c->io_timeout_ms = o.io_timeout_ms == 0 ? 30000 : o.io_timeout_ms;
    c->max_response = o.max_response ? o.max_response : HKV_DEFAULT_MAX_RESPONSE;
    *out = c;
    return HKV_OK;
}

void hkv_close(hkv_conn *c)
{
    if (!c)
        return;
    close(c->fd);
    hkv_buf_free(&c->wbuf);
    hkv_buf_free(&c->rbuf);
    hkv_buf_free(&c->ops);
    free(c);
}

const char *hkv_errmsg(const hkv_conn *c) { return c ? c->err : "no connection"; }

int hkv_fd(const hkv_conn *c) { return c->fd; }

size_t hkv_pipe_pending(const hkv_conn *c) { return c->ops.len - c->ops_head; }

/* ---- buffered I/O ---- */

/* Drops the frame returned by the last hkv_pipe_recv and compacts rbuf. */
static void drop_last_frame(hkv_conn *c)
{
    c->roff += c->last_frame;
    c->last_frame = 0;
    if (c->roff == c->rbuf.len) {
        c->roff = c->rbuf.len = 0;
    } else if (c->roff > c->rbuf.cap / 2) {
        memmove(c->rbuf.data, c->rbuf.data + c->roff, c->rbuf.len - c->roff);
        c->rbuf.len -= c->roff;
        c->roff = 0;
    }
}

/* One non-blocking recv into rbuf; *got = 0 when nothing was there. */
static int recv_some(hkv_conn *c, size_t want, size_t *got)
{
    *got = 0;
    if (want < READ_CHUNK)
        want = READ_CHUNK;
    if (hkv_buf_reserve(&c->rbuf, want) != HKV_OK)
        return fail(c, HKV_ERR_NOMEM, "out of memory for the response");
    for (;;) {
        ssize_t n = recv(c->fd, c->rbuf.data + c->rbuf.len, c->rbuf.cap - c->rbuf.len,
                         MSG_DONTWAIT);
        if (n > 0) {
            c->rbuf.len += (size_t)n;
            *got = (size_t)n;
            return HKV_OK;
        }
        if (n == 0)
            return fail(c, HKV_ERR_IO, "the server closed the connection");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return HKV_OK;
        return fail_errno(c, "recv");
    }
}

int hkv_pipe_send(hkv_conn *c)
{
    if (c->broken)
        return fail(c, HKV_ERR_IO, "connection is broken by an earlier error");
    while (c->woff < c->wbuf.len) {
        ssize_t n = send(c->fd, c->wbuf.data + c->woff, c->wbuf.len - c->woff,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->woff += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return fail_errno(c, "send");
        /* Socket full: wait, draining responses meanwhile so the server can go on. */
        short rev = 0;
        int rc = wait_fd(c->fd, POLLOUT | POLLIN, c->io_timeout_ms, &rev);
        if (rc == HKV_ERR_TIMEOUT)
            return fail(c, rc, "timed out sending the request");
        if (rc != HKV_OK)
            return fail_errno(c, "poll");
        if (rev & (POLLIN | POLLHUP | POLLERR)) {
            size_t got;
            rc = recv_some(c, 0, &got);
            if (rc != HKV_OK)
                return rc;
        }
    }
    c->woff = c->wbuf.len = 0;
    return HKV_OK;
}

int hkv_pipe_add(hkv_conn *c, const hkv_request *req)
{
    if (c->broken)
        return fail(c, HKV_ERR_IO, "connection is broken by an earlier error");
    if (hkv_buf_reserve(&c->ops, 1) != HKV_OK)
        return fail(c, HKV_ERR_NOMEM, "out of memory");
    int rc = hkv_encode(&c->wbuf, req);
    if (rc == HKV_ERR_ARG)
        return fail(c, rc, "invalid request arguments (db name must be 1-64 characters of "
                           "[A-Za-z0-9_.-], keys 1 byte or more, durability local/none/bucket)");
    if (rc != HKV_OK)
        return fail(c, rc, "out of memory encoding the request");
    c->ops.data[c->ops.len++] = req->op;
    return HKV_OK;
}

/* Copies a response's message (or the status name) into c->err. */
static void note_failure(hkv_conn *c, const hkv_response *r)
{
    if (r->data_len > 0 && (r->status == HKV_INVALID_REQUEST ||
                            r->status == HKV_PAYLOAD_TOO_LARGE ||
                            r->status == HKV_INTERNAL_ERROR || r->status == HKV_UNAUTHORIZED ||
                            r->status == HKV_FORBIDDEN)) {
        size_t n = r->data_len < sizeof c->err ? r->data_len : sizeof c->err - 1;
        memcpy(c->err, r->data, n);
        c->err[n] = 0;
    } else {
        set_err(c, "%s", hkv_status_str(r->status));
    }
}

int hkv_pipe_recv(hkv_conn *c, hkv_response *resp)
{
    drop_last_frame(c);
    if (c->broken)
        return fail(c, HKV_ERR_IO, "connection is broken by an earlier error");
    if (hkv_pipe_pending(c) == 0)
        return fail(c, HKV_ERR_ARG, "no request is waiting for a response");
    int rc = hkv_pipe_send(c);
    if (rc != HKV_OK)
        return rc;
    uint8_t op = c->ops.data[c->ops_head];
    for (;;) {
        size_t need = 0;
        rc = hkv_decode(op, c->rbuf.data + c->roff, c->rbuf.len - c->roff,
                        c->max_response, resp, &need);
        if (rc == HKV_OK)
            break;
        if (rc == HKV_ERR_PROTOCOL) {
            const uint8_t *h = c->rbuf.data + c->roff;
            set_err(c, "malformed or unexpected response to op 0x%02x (status 0x%02x, "
                       "length %u)", op, h[0],
                    (unsigned)h[1] | (unsigned)h[2] << 8 | (unsigned)h[3] << 16 |
                    (unsigned)h[4] << 24);
            c->broken = 1;
            return rc;
        }
        size_t have = c->rbuf.len - c->roff, got = 0;
        rc = recv_some(c, need - have, &got);
        if (rc != HKV_OK)
            return rc;
        if (got == 0) {
            rc = wait_fd(c->fd, POLLIN, c->io_timeout_ms, NULL);
            if (rc == HKV_ERR_TIMEOUT)
                return fail(c, rc, "timed out waiting for the response");
            if (rc != HKV_OK)
                return fail_errno(c, "poll");
        }
    }
    c->last_frame = resp->frame_len;
    if (++c->ops_head == c->ops.len)
        c->ops_head = c->ops.len = 0;
    if (resp->status != HKV_OK)
        note_failure(c, resp);
    else
        c->err[0] = 0;
    return resp->status;
}

/* ---- blocking calls ---- */

static int call(hkv_conn *c, const hkv_request *req, hkv_response *resp)
{
    if (c->broken)
        return fail(c, HKV_ERR_IO, "connection is broken by an earlier error");
    if (hkv_pipe_pending(c) != 0)
        return fail(c, HKV_ERR_ARG, "pipelined responses are still unread");
    int rc = hkv_pipe_add(c, req);
    if (rc != HKV_OK)
        return rc;
    return hkv_pipe_recv(c, resp);
}

static int copy_out(hkv_conn *c, hkv_buf *dst, const hkv_response *r)
{
    if (!dst)
        return HKV_OK;
    dst->len = 0;
    if (hkv_buf_reserve(dst, r->data_len) != HKV_OK)
        return fail(c, HKV_ERR_NOMEM, "out of memory for the value");
    if (r->data_len)
        memcpy(dst->data, r->data, r->data_len);
    dst->len = r->data_len;
    return HKV_OK;
}

/* Runs a write-shaped call and stores the token when one came back. */
static int call_token(hkv_conn *c, const hkv_request *req, uint64_t *token)
{
    hkv_response r;
    int rc = call(c, req, &r);
    if ((rc == HKV_OK || rc == HKV_KEY_TOKEN_MISMATCH) && r.has_token && token)
        *token = r.token;
    return rc;
}

int hkv_ping(hkv_conn *c)
{
    hkv_request q = { .op = HKV_OP_PING };
    hkv_response r;
    return call(c, &q, &r);
}

int hkv_auth(hkv_conn *c, const char *token)
{
    size_t n = token ? strlen(token) : 0;
    if (n == 0 || n > HKV_AUTH_TOKEN_MAX)
        return fail(c, HKV_ERR_ARG, "a token is 1 to 255 bytes");
    hkv_request q = { .op = HKV_OP_AUTH, .key = token, .key_len = n };
    hkv_response r;
    return call(c, &q, &r);
}

int hkv_stats(hkv_conn *c, hkv_buf *json)
{
    hkv_request q = { .op = HKV_OP_STATS };
    hkv_response r;
    int rc = call(c, &q, &r);
    return rc == HKV_OK ? copy_out(c, json, &r) : rc;
}

int hkv_create(hkv_conn *c, const char *db, int durability, uint64_t *token)
{
    hkv_request q = { .op = HKV_OP_CREATE, .durability = (uint8_t)durability, .db = db };
    if (durability < 0 || durability > HKV_DUR_BUCKET)
        return fail(c, HKV_ERR_ARG, "bad durability");
    return call_token(c, &q, token);
}

int hkv_info(hkv_conn *c, const char *db, hkv_buf *json)
{
    hkv_request q = { .op = HKV_OP_INFO, .db = db };
    hkv_response r;
    int rc = call(c, &q, &r);
    return rc == HKV_OK ? copy_out(c, json, &r) : rc;
}

int hkv_drop(hkv_conn *c, const char *db, int durability, uint64_t *token)
{
    hkv_request q = { .op = HKV_OP_DROP, .durability = (uint8_t)durability, .db = db };
    if (durability < 0 || durability > HKV_DUR_BUCKET)
        return fail(c, HKV_ERR_ARG, "bad durability");
    return call_token(c, &q, token);
}

int hkv_get(hkv_conn *c, const char *db, const void *key, size_t key_len,
            hkv_buf *value, uint64_t *token)
{
    hkv_request q = { .op = HKV_OP_GET, .db = db, .key = key, .key_len = key_len };
    hkv_response r;
    int rc = call(c, &q, &r);
    if (rc != HKV_OK)
        return rc;
    if (token)
        *token = r.token;
    return copy_out(c, value, &r);
}

static int set_like(hkv_conn *c, uint8_t op, const char *db, const void *key, size_t key_len,
                    uint64_t expected, const void *value, size_t value_len, int durability,
                    uint64_t *token)
{
    if (durability < 0 || durability > HKV_DUR_BUCKET)
        return fail(c, HKV_ERR_ARG, "bad durability");
    hkv_request q = { .op = op, .durability = (uint8_t)durability, .db = db, .key = key,
                      .key_len = key_len, .value = value, .value_len = value_len,
                      .token = expected };
    return call_token(c, &q, token);
}

int hkv_set(hkv_conn *c, const char *db, const void *key, size_t key_len,
            const void *value, size_t value_len, int durability, uint64_t *token)
{
    return set_like(c, HKV_OP_SET, db, key, key_len, 0, value, value_len, durability, token);
}

int hkv_set_if_exists(hkv_conn *c, const char *db, const void *key, size_t key_len,
                      const void *value, size_t value_len, int durability, uint64_t *token)
{
    return set_like(c, HKV_OP_SET_IF_EXISTS, db, key, key_len, 0, value, value_len,
                    durability, token);
}

int hkv_set_if_not_exists(hkv_conn *c, const char *db, const void *key, size_t key_len,
                          const void *value, size_t value_len, int durability,
                          uint64_t *token)
{
    return set_like(c, HKV_OP_SET_IF_NOT_EXISTS, db, key, key_len, 0, value, value_len,
                    durability, token);
}

int hkv_compare_set(hkv_conn *c, const char *db, const void *key, size_t key_len,
                    uint64_t expected, const void *value, size_t value_len,
                    int durability, uint64_t *token)
{
    return set_like(c, HKV_OP_COMPARE_SET, db, key, key_len, expected, value, value_len,
                    durability, token);
}

int hkv_delete(hkv_conn *c, const char *db, const void *key, size_t key_len,
               int durability, uint64_t *token)
{
    return set_like(c, HKV_OP_DELETE, db, key, key_len, 0, NULL, 0, durability, token);
}

int hkv_set_ttl(hkv_conn *c, const char *db, const void *key, size_t key_len, uint64_t ttl_ms,
                const void *value, size_t value_len, int durability, uint64_t *token)
{
    return set_like(c, HKV_OP_SET_TTL, db, key, key_len, ttl_ms, value, value_len, durability, token);
}

int hkv_ttl(hkv_conn *c, const char *db, const void *key, size_t key_len, uint64_t *expire_ms,
            uint64_t *left_ms, uint64_t *token)
{
    hkv_request q = { .op = HKV_OP_TTL, .db = db, .key = key, .key_len = key_len };
    hkv_response r;
    int rc = call(c, &q, &r);
    if (rc != HKV_OK)
        return rc;
    if (token)
        *token = r.token;
    if (expire_ms)
        *expire_ms = hanu_get_u64(r.data);
    if (left_ms)
        *left_ms = hanu_get_u64(r.data + 8);
    return HKV_OK;
}

int hkv_compare_delete(hkv_conn *c, const char *db, const void *key, size_t key_len,
                       uint64_t expected, int durability, uint64_t *token)
{
    return set_like(c, HKV_OP_COMPARE_DELETE, db, key, key_len, expected, NULL, 0,
                    durability, token);
}

int hkv_write_batch(hkv_conn *c, const char *db, const hkv_batch_item *items,
                    size_t count, int durability, uint64_t *token)
{
    if (durability < 0 || durability > HKV_DUR_BUCKET)
        return fail(c, HKV_ERR_ARG, "bad durability");
    hkv_request q = { .op = HKV_OP_WRITE_BATCH, .durability = (uint8_t)durability, .db = db,
                      .items = items, .item_count = count };
    return call_token(c, &q, token);
}
