/*
 * nullhttp: an HTTP/1.1 server that does no work, to measure what the client,
 * the kernel and the machine allow before any database is involved
 * (docs/PERFORMANCE.md, "The ceiling of the documents shape").
 *
 *   nullhttp --port N [--get-bytes B] [--find-bytes B] [--search-bytes B]
 *
 * One thread, one epoll loop, non-blocking keep-alive connections, like the
 * server's own loop. Each request is read whole (headers, then Content-Length
 * bytes of body) and answered at once from a response built at start-up: a GET
 * gets a body of --get-bytes, a POST to a path ending in /_find one of
 * --find-bytes, to /_search one of --search-bytes (defaults: the sizes HanuDB
 * answers docbench's get, find and search with), anything else "{}". Bodies
 * are valid JSON. Pipelined requests are answered in order. A malformed
 * request, one over 64 KiB or a chunked body closes the connection.
 */
#include "bench_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_REQUEST (64u << 10)
#define MAX_EVENTS 64

enum answer { ANSWER_GET, ANSWER_FIND, ANSWER_SEARCH, ANSWER_OTHER, N_ANSWERS };

typedef struct response {
    char *bytes;
    size_t len;
} response;

typedef struct conn {
    int fd;
    char in[MAX_REQUEST];
    size_t in_len;
    char *out;                      /* what is still to send */
    size_t out_len, out_off, out_cap;
} conn;

static response answers[N_ANSWERS];

/* "HTTP/1.1 200 OK" with a JSON body of exactly body_len bytes (at least 2). */
static int build_response(response *r, size_t body_len)
{
    char head[160];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: %zu\r\n"
                     "content-type: application/json\r\n\r\n", body_len);
    r->len = (size_t)h + body_len;
    r->bytes = malloc(r->len);
    if (!r->bytes) return -1;
    memcpy(r->bytes, head, (size_t)h);
    char *b = r->bytes + h;
    if (body_len < 10) {
        memset(b, ' ', body_len);
        b[0] = '{';
        b[body_len - 1] = '}';
    } else {   /* {"pad":"xxx...x"} */
        memcpy(b, "{\"pad\":\"", 8);
        memset(b + 8, 'x', body_len - 10);
        memcpy(b + body_len - 2, "\"}", 2);
    }
    return 0;
}

/* Length of the first whole request in c->in, 0 when more bytes are needed,
   -1 when it cannot be served; *which says which answer it gets. */
static long parse_request(const conn *c, enum answer *which)
{
    const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) return c->in_len >= MAX_REQUEST ? -1 : 0;
    size_t head_len = (size_t)(end - c->in) + 4;
    const char *sp = memchr(c->in, ' ', head_len);
    if (!sp) return -1;
    const char *path = sp + 1, *path_end = memchr(path, ' ', head_len - (size_t)(path - c->in));
    if (!path_end) return -1;
    size_t body_len = 0;
    for (const char *l = memchr(c->in, '\n', head_len); l && l + 1 < end; l = memchr(l + 1, '\n', (size_t)(end - l))) {
        if (!strncasecmp(l + 1, "content-length:", 15)) {
            long v;
            char num[24];
            const char *p = l + 16, *q = memchr(p, '\r', (size_t)(end + 2 - p));
            while (p < q && *p == ' ') p++;
            if (!q || (size_t)(q - p) >= sizeof num) return -1;
            memcpy(num, p, (size_t)(q - p));
            num[q - p] = 0;
            if (bench_parse_long(num, 0, MAX_REQUEST, &v)) return -1;
            body_len = (size_t)v;
        } else if (!strncasecmp(l + 1, "transfer-encoding:", 18)) {
            return -1;
        }
    }
    if (head_len + body_len > MAX_REQUEST) return -1;
    if (c->in_len < head_len + body_len) return 0;
    size_t plen = (size_t)(path_end - path);
    if (!strncmp(c->in, "GET ", 4)) *which = ANSWER_GET;
    else if (plen >= 6 && !memcmp(path_end - 6, "/_find", 6)) *which = ANSWER_FIND;
    else if (plen >= 8 && !memcmp(path_end - 8, "/_search", 8)) *which = ANSWER_SEARCH;
    else *which = ANSWER_OTHER;
    return (long)(head_len + body_len);
}

static int queue_answer(conn *c, const response *r)
{
    if (c->out_len + r->len > c->out_cap) {
        size_t cap = (c->out_len + r->len) * 2;
        char *p = realloc(c->out, cap);
        if (!p) return -1;
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, r->bytes, r->len);
    c->out_len += r->len;
    return 0;
}

static void close_conn(int epfd, conn *c)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->out);
    free(c);
}

/* Reads what is there, answers every whole request; -1: close the connection. */
static int on_readable(int epfd, conn *c)
{
    for (;;) {
        ssize_t n = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
        if (n == 0) return -1;
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return -1;
        }
        c->in_len += (size_t)n;
        long used;
        enum answer which;
        while ((used = parse_request(c, &which)) > 0) {
            if (queue_answer(c, &answers[which])) return -1;
            memmove(c->in, c->in + used, c->in_len - (size_t)used);
            c->in_len -= (size_t)used;
        }
        if (used < 0) return -1;
        if ((size_t)n < sizeof c->in) break;   /* a short read: the socket is empty */
    }
    int rc = bench_send_pending(epfd, c->fd, c, c->out, c->out_len, &c->out_off);
    if (rc) return -1;
    if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
    return 0;
}

static int on_writable(int epfd, conn *c)
{
    if (bench_send_pending(epfd, c->fd, c, c->out, c->out_len, &c->out_off)) return -1;
    if (c->out_off == c->out_len) {
        c->out_off = c->out_len = 0;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
    }
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: nullhttp --port N [--get-bytes B] [--find-bytes B] [--search-bytes B]\n"
                 "  defaults: --get-bytes 508 --find-bytes 10667 --search-bytes 5841\n");
}

int main(int argc, char **argv)
{
    long port = -1, sizes[3] = { 508, 10667, 5841 };
    static const char *const size_opts[3] = { "--get-bytes", "--find-bytes", "--search-bytes" };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        if (i + 1 >= argc) { usage(stderr); return 2; }
        int known = 0;
        if (!strcmp(argv[i], "--port")) {
            known = 1;
            if (bench_parse_long(argv[i + 1], 1, 65535, &port)) { fprintf(stderr, "nullhttp: bad --port\n"); return 2; }
        }
        for (int k = 0; k < 3; k++)
            if (!strcmp(argv[i], size_opts[k])) {
                known = 1;
                if (bench_parse_long(argv[i + 1], 2, 16 << 20, &sizes[k])) {
                    fprintf(stderr, "nullhttp: %s wants 2 to 16777216\n", size_opts[k]);
                    return 2;
                }
            }
        if (!known) { fprintf(stderr, "nullhttp: unknown option %s\n", argv[i]); usage(stderr); return 2; }
        i++;
    }
    if (port < 0) { usage(stderr); return 2; }
    for (int k = 0; k < 3; k++)
        if (build_response(&answers[k], (size_t)sizes[k])) return 1;
    if (build_response(&answers[ANSWER_OTHER], 2)) return 1;
    signal(SIGPIPE, SIG_IGN);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1024)) {
        perror("nullhttp: listen");
        return 1;
    }
    int epfd = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, evs[MAX_EVENTS];
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    printf("nullhttp: listening on 127.0.0.1:%ld\n", port);
    fflush(stdout);
    for (;;) {
        int n = epoll_wait(epfd, evs, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR) { perror("nullhttp: epoll_wait"); return 1; }
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (!c) {   /* the listener */
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    conn *nc = calloc(1, sizeof *nc);
                    if (!nc) { close(fd); continue; }
                    nc->fd = fd;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event cev = { .events = EPOLLIN, .data.ptr = nc };
                    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            int rc = 0;
            if (evs[i].events & EPOLLOUT) rc = on_writable(epfd, c);
            if (!rc && evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) rc = on_readable(epfd, c);
            if (rc) close_conn(epfd, c);
        }
    }
}
