/*
 * quad_shapes.h: what the facts kernel's tests share: a xorshift PRNG and the
 * two fact shapes of the benchmarks (structured, entropy), a lane-masked
 * comparison, and QUAD_TEST_DIRECT (below).
 */
#ifndef HANU_TEST_QUAD_SHAPES_H
#define HANU_TEST_QUAD_SHAPES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "quad.h"
#include "base/base.h"

/* QUAD_TEST_DIRECT=1 in the environment opens every store of a test program
 * with QUAD_IO_DIRECT: test_quad_direct runs a subset of the quad test
 * programs that way, on a disk directory. */
static inline int tq_quad_open(const char *path, const quad_options *opt, quad **out)
{
    const char *e = getenv("QUAD_TEST_DIRECT");
    if (!e || strcmp(e, "1") != 0) return quad_open(path, opt, out);
    quad_options o;
    if (opt) o = *opt;
    else quad_options_default(&o);
    o.flags |= QUAD_IO_DIRECT;
    return quad_open(path, &o, out);
}
#define quad_open tq_quad_open

/* ---- fact shapes (docs/BENCHMARKS.md) and a PRNG ---- */
static uint64_t tq_rng = 88172645463325252ULL;
static inline uint64_t tq_rand(void)
{
    tq_rng ^= tq_rng << 13;
    tq_rng ^= tq_rng >> 7;
    tq_rng ^= tq_rng << 17;
    return tq_rng;
}

/* structured: lane0 from 1000 values, lane1 constant, lane2 timestamps
 * growing by 0-15, lane3 from 4096 values */
static inline void tq_structured(quad_fact *f, size_t n, uint64_t *ts)
{
    for (size_t i = 0; i < n; i++) {
        *ts += tq_rand() & 15;
        f[i].lane[0] = 1000000 + tq_rand() % 1000;
        f[i].lane[1] = 42;
        f[i].lane[2] = *ts;
        f[i].lane[3] = (tq_rand() & 4095) * 7919;
    }
}

static inline void tq_entropy(quad_fact *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int l = 0; l < 4; l++) f[i].lane[l] = tq_rand();
}

static inline int tq_fact_eq(const quad_fact *a, const quad_fact *b, unsigned mask)
{
    for (int l = 0; l < 4; l++)
        if ((mask & (1u << l)) && a->lane[l] != b->lane[l]) return 0;
    return 1;
}

#endif
