/*
 * peer_common.h: what the peer benchmarks (peer_pg, peer_sqlite) share: the
 * read mix's operations and its parsing, per-client latency lists, the clock,
 * and the read phase's JSON figures.
 */
#ifndef HANU_PEER_COMMON_H
#define HANU_PEER_COMMON_H

#include "bench_util.h"
#include "docgen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_GET, OP_FIND, OP_SEARCH, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "get", "find", "search" };

/* One client's latencies, nanoseconds, per operation. */
typedef struct peer_latencies {
    uint64_t *lat[OP_COUNT];
    size_t n[OP_COUNT], cap[OP_COUNT];
} peer_latencies;

static inline double peer_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline void peer_note(peer_latencies *l, int op, uint64_t ns)
{
    if (l->n[op] == l->cap[op]) {
        l->cap[op] = l->cap[op] ? l->cap[op] * 2 : 4096;
        l->lat[op] = realloc(l->lat[op], l->cap[op] * sizeof(uint64_t));
        if (!l->lat[op]) exit(1);
    }
    l->lat[op][l->n[op]++] = ns;
}

static inline void peer_latencies_free(peer_latencies *l)
{
    for (int op = 0; op < OP_COUNT; op++) free(l->lat[op]);
}

/* "get=50,find=25,search=25" into weights; -1 when malformed or all zero. */
static inline int peer_parse_mix(const char *s, int mix[OP_COUNT])
{
    memset(mix, 0, OP_COUNT * sizeof *mix);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq) return -1;
        *eq = 0;
        int op = -1;
        for (int i = 0; i < OP_COUNT; i++) if (strcmp(tok, op_names[i]) == 0) op = i;
        long v;
        if (op < 0 || bench_parse_long(eq + 1, 0, 1000, &v)) return -1;
        mix[op] = (int)v;
    }
    return mix[0] + mix[1] + mix[2] > 0 ? 0 : -1;
}

/* The next operation drawn by the mix's weights. */
static inline int peer_pick_op(const int mix[OP_COUNT], uint64_t *rng)
{
    uint32_t pick = docgen_below(rng, (uint32_t)(mix[0] + mix[1] + mix[2]));
    return pick < (uint32_t)mix[0] ? OP_GET : pick < (uint32_t)(mix[0] + mix[1]) ? OP_FIND : OP_SEARCH;
}

/* Prints ,"op_per_s":..,"op_p50_us":..,"op_p99_us":.. per operation over all
   clients' latencies, then ,"reads_per_s":.. */
static inline void peer_print_reads(peer_latencies *const *ls, long clients, double secs)
{
    size_t all = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        size_t n = 0, k = 0;
        for (long i = 0; i < clients; i++) n += ls[i]->n[op];
        all += n;
        if (!n) continue;
        uint64_t *v = malloc(n * sizeof *v);
        if (!v) exit(1);
        for (long i = 0; i < clients; i++) {
            memcpy(v + k, ls[i]->lat[op], ls[i]->n[op] * sizeof *v);
            k += ls[i]->n[op];
        }
        qsort(v, n, sizeof *v, bench_cmp_u64);
        printf(",\"%s_per_s\":%.0f,\"%s_p50_us\":%.1f,\"%s_p99_us\":%.1f", op_names[op], (double)n / secs,
               op_names[op], (double)v[bench_rank_index(n, 50)] / 1e3, op_names[op],
               (double)v[bench_rank_index(n, 99)] / 1e3);
        free(v);
    }
    printf(",\"reads_per_s\":%.0f", (double)all / secs);
}

#endif
