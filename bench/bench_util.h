/*
 * bench_util.h: the small pieces the benchmark programs share: strict integer
 * option parsing, sorting latencies and nearest-rank percentiles.
 */
#ifndef HANU_BENCH_UTIL_H
#define HANU_BENCH_UTIL_H

#include <errno.h>
#include <math.h>
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
