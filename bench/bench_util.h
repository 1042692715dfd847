/*
 * bench_util.h: the small pieces the benchmark programs share: strict integer
 * option parsing, sorting latencies and nearest-rank percentiles.
 */
#ifndef HANU_BENCH_UTIL_H
#define HANU_BENCH_UTIL_H

#include <errno.h>
#include <math.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* A whole decimal number in [min, max]; 0, or -1 for anything else. */
static inline int bench_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Sends buf[*off, len) on a non-blocking socket registered with epfd (event data
   ptr). When the socket is full it arms EPOLLOUT and returns 0, to be called again
   when writable; 0 once all is sent; -1 on a send error (errno set). */
static inline int bench_send_pending(int epfd, int fd, void *ptr, const void *buf, size_t len, size_t *off)
{
    while (*off < len) {
        ssize_t n = send(fd, (const char *)buf + *off, len - *off, MSG_NOSIGNAL);
        if (n > 0) {
            *off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = ptr };
            epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
            return 0;
        } else {
            return -1;
        }
    }
    return 0;
}

/* qsort comparator for uint64_t. */
static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Index of the nearest-rank p-th percentile (0-100) of n sorted values; n > 0. */
static inline size_t bench_rank_index(size_t n, double p)
{
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return rank - 1;
}

#endif
