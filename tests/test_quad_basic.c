/*
 * test_quad_basic: the facts kernel's contract on fixed cases: round trips of
 * both shapes across batch and chunk sizes, gather orders and lane masks,
 * retire with snapshots (sparse and dense), scan, checkpoint and reopen,
 * owned appends, argument errors and every cold-read backend.
 */
#include <stdlib.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

static char path[600];

static void set_path(const char *name)
{
    snprintf(path, sizeof path, "%s/facts.quad", test_tmpdir(name));
}

static quad *open_with(uint32_t rows, uint32_t mb, int backend, size_t cache)
{
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = rows;
    o.microblock_rows = mb;
    o.io_backend = backend;
    o.cache_bytes = cache;
    quad *q = NULL;
    int rc = quad_open(path, &o, &q);
    if (rc) fprintf(stderr, "  open: %s\n", hanu_status_str(rc));
    return q;
}

/* Gathers req[0..n) with each of the 15 lane masks into out; returns the
 * lanes that differ from facts[src[i]] plus lanes outside the mask that
 * were written. */
static size_t check_every_mask(quad *q, const quad_id *req, size_t n, const quad_fact *facts,
                               const size_t *src, quad_fact *out)
{
    size_t bad = 0;
    for (unsigned mask = 1; mask <= QUAD_LANES_ALL; mask++) {
        memset(out, 0xCD, n * sizeof *out);
        CHECK_EQ(quad_gather(q, 0, req, n, mask, out, NULL), 0);
        for (size_t i = 0; i < n; i++) {
            bad += !tq_fact_eq(&out[i], &facts[src[i]], mask);
            for (unsigned l = 0; l < 4; l++)
                if (!(mask & (1u << l))) bad += out[i].lane[l] != 0xCDCDCDCDCDCDCDCDULL;
        }
    }
    return bad;
}

/* Checks every id of the store in several orders against facts[]. */
static void verify_all(quad *q, const quad_fact *facts, const quad_id *ids, size_t n)
{
    quad_fact *out = calloc(n, sizeof *out);
    quad_id *order = malloc(n * sizeof *order);
    size_t *src = malloc(n * sizeof *src);
    uint8_t *present = malloc(n);
    /* ascending */
    CHECK_EQ(quad_gather(q, 0, ids, n, QUAD_LANES_ALL, out, NULL), 0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !tq_fact_eq(&out[i], &facts[i], 0xF);
    CHECK_EQ(bad, 0);
    /* descending, single lanes */
    for (size_t i = 0; i < n; i++) { order[i] = ids[n - 1 - i]; src[i] = n - 1 - i; }
    for (unsigned l = 0; l < 4; l++) {
        memset(out, 0xAB, n * sizeof *out);
        CHECK_EQ(quad_gather(q, 0, order, n, QUAD_LANE(l), out, present), 0);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            bad += out[i].lane[l] != facts[src[i]].lane[l] || !present[i];
            for (unsigned o = 0; o < 4; o++) if (o != l) bad += out[i].lane[o] != 0xABABABABABABABABULL;
        }
        CHECK_EQ(bad, 0);
    }
    /* random with duplicates, lanes 0 and 2 */
    for (size_t i = 0; i < n; i++) { src[i] = tq_rand() % n; order[i] = ids[src[i]]; }
    CHECK_EQ(quad_gather(q, 0, order, n, QUAD_LANE(0) | QUAD_LANE(2), out, NULL), 0);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += !tq_fact_eq(&out[i], &facts[src[i]], 0x5);
    CHECK_EQ(bad, 0);
    free(out); free(order); free(src); free(present);
}

static void round_trip_case(int structured, uint32_t rows, uint32_t mb, size_t batch, size_t total,
                            int backend, size_t cache)
{
    set_path("rt");
    quad *q = open_with(rows, mb, backend, cache);
    REQUIRE(q);
    quad_fact *facts = malloc(total * sizeof *facts);
    quad_id *ids = malloc(total * sizeof *ids);
    uint64_t ts = 1700000000000ULL;
    if (structured) tq_structured(facts, total, &ts); else tq_entropy(facts, total);
    for (size_t done = 0; done < total; done += batch) {
        size_t k = total - done < batch ? total - done : batch;
        quad_id first;
        uint64_t ep;
        REQUIRE(quad_append(q, facts + done, k, QUAD_BUFFERED, &first, &ep) == 0);
        for (size_t i = 0; i < k; i++) ids[done + i] = quad_batch_id(first, quad_chunk_rows(q), i);
    }
    verify_all(q, facts, ids, total);
    quad_cache_drop(q);
    verify_all(q, facts, ids, total);
    /* cold point reads and small scattered gathers (the sparse read path) */
    size_t bad = 0;
    for (int i = 0; i < 200; i++) {
        quad_cache_drop(q);
        quad_id pick[3];
        size_t src[3];
        for (int j = 0; j < 3; j++) { src[j] = tq_rand() % total; pick[j] = ids[src[j]]; }
        quad_fact out3[3];
        size_t k = (i & 1) ? 1 : 3;
        unsigned mask = 1 + (unsigned)(tq_rand() % 15);
        if (quad_gather(q, 0, pick, k, mask, out3, NULL) != 0) { bad++; continue; }
        for (size_t j = 0; j < k; j++) bad += !tq_fact_eq(&out3[j], &facts[src[j]], mask);
    }
    CHECK_EQ(bad, 0);
    quad_stats st;
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK_EQ(st.facts, total);
    if (batch >= 63 && structured) CHECK(st.lanes_const > 0 && st.lanes_for > 0);
    if (batch >= 63 && !structured) CHECK(st.lanes_raw > 0);
    CHECK_EQ(quad_close(q), 0);
    q = open_with(rows, mb, backend, cache);
    REQUIRE(q);
    verify_all(q, facts, ids, total);
    CHECK_EQ(quad_close(q), 0);
    free(facts);
    free(ids);
}

static void test_round_trip_shapes_and_sizes(void)
{
    size_t batches[] = { 1, 63, 4096, 4097, 10000 };
    for (int s = 0; s < 2; s++)
        for (size_t b = 0; b < HANU_ARRAY_LEN(batches); b++)
            round_trip_case(s, 4096, 256, batches[b], batches[b] * 3 > 20000 ? 20000 : batches[b] * 3,
                            QUAD_IO_THREADS, 1 << 20);
    round_trip_case(1, 64, 64, 1000, 5000, QUAD_IO_INLINE, 1 << 20);
    round_trip_case(1, 1024, 128, 777, 9000, QUAD_IO_INLINE, 0);          /* no cache at all */
    round_trip_case(0, 65536, 4096, 70000, 70000, QUAD_IO_THREADS, 64 << 20);
}

static void test_io_uring_backend(void)
{
    set_path("uring");
    quad *q = open_with(4096, 256, QUAD_IO_URING, 1 << 20);
    if (!q) { fprintf(stderr, "  io_uring unavailable here, skipped\n"); return; }
    quad_close(q);
    /* entropy: 20000 facts in 5 chunks, 640 KB, large enough to go through the ring */
    round_trip_case(0, 4096, 256, 5000, 20000, QUAD_IO_URING, 1 << 20);
    round_trip_case(1, 4096, 256, 5000, 20000, QUAD_IO_URING, 1 << 20);
}

static void test_retire_snapshot_sparse_and_dense(void)
{
    set_path("retire");
    quad *q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    enum { N = 1024 };
    static quad_fact facts[N], out[N];
    static quad_id ids[N];
    static uint8_t present[N];
    uint64_t ts = 0;
    tq_structured(facts, N, &ts);
    quad_id first;
    REQUIRE(quad_append(q, facts, N, QUAD_BUFFERED, &first, NULL) == 0);
    for (size_t i = 0; i < N; i++) ids[i] = quad_batch_id(first, 256, i);
    uint64_t snap1;
    CHECK_EQ(quad_snapshot(q, &snap1), 0);
    /* sparse: 3 ids of chunk 0; dense: 200 ids of chunk 1 */
    quad_id r1[3] = { ids[5], ids[0], ids[5] };
    uint64_t e1;
    CHECK_EQ(quad_retire(q, r1, 3, QUAD_BUFFERED, &e1), 0);
    CHECK_EQ(e1, snap1 + 1);
    quad_id r2[200];
    for (int i = 0; i < 200; i++) r2[i] = ids[256 + (i * 37) % 256];
    CHECK_EQ(quad_retire(q, r2, 200, QUAD_DURABLE, NULL), 0);
    quad_id bogus[2] = { ids[1], QUAD_ID(99, 0) };
    CHECK_EQ(quad_retire(q, bogus, 2, QUAD_BUFFERED, NULL), HANU_ERR_NOT_FOUND);

    for (int round = 0; round < 2; round++) {
        quad_stats st;
        quad_stats_get(q, &st);
        CHECK_EQ(st.retired, 2 + 200);
        CHECK_EQ(quad_gather(q, 0, ids, N, QUAD_LANES_ALL, out, NULL), HANU_ERR_NOT_FOUND);
        CHECK_EQ(quad_gather(q, 0, ids, N, QUAD_LANES_ALL, out, present), 0);
        size_t live = 0, bad = 0;
        for (size_t i = 0; i < N; i++) {
            live += present[i];
            if (present[i]) bad += !tq_fact_eq(&out[i], &facts[i], 0xF);
            else bad += out[i].lane[0] != 0;
        }
        CHECK_EQ(live, N - 202);
        CHECK_EQ(bad, 0);
        CHECK(!present[0] && !present[5] && present[1]);
        /* the old snapshot still sees everything */
        CHECK_EQ(quad_gather(q, snap1, ids, N, QUAD_LANES_ALL, out, NULL), 0);
        bad = 0;
        for (size_t i = 0; i < N; i++) bad += !tq_fact_eq(&out[i], &facts[i], 0xF);
        CHECK_EQ(bad, 0);
        /* snapshot between the two retires */
        CHECK_EQ(quad_gather(q, e1, ids, N, QUAD_LANES_ALL, out, present), 0);
        live = 0;
        for (size_t i = 0; i < N; i++) live += present[i];
        CHECK_EQ(live, N - 2);
        /* reopen and check the same again */
        CHECK_EQ(quad_close(q), 0);
        q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
        REQUIRE(q);
    }
    quad_close(q);
}

/* Checks present[] at every snapshot from 1 to last against want[] (the retire
 * epoch per slot, 0 = live); returns the number of mismatches. */
static size_t check_retire_epochs(quad *q, const quad_id *ids, const uint64_t *want, size_t n,
                                  uint64_t last, quad_fact *out, uint8_t *present)
{
    size_t bad = 0;
    for (uint64_t snap = 1; snap <= last; snap++) {
        if (quad_gather(q, snap, ids, n, QUAD_LANE(1), out, present) != 0) return n;
        for (size_t i = 0; i < n; i++) bad += present[i] != (want[i] == 0 || want[i] > snap);
    }
    return bad;
}

/* One chunk retired by many commits over interleaved slots: it starts
 * sparse, turns dense with more distinct retire epochs than the dense set's
 * first epoch table holds, re-retires keep their first epoch, and every
 * snapshot still sees exactly the right facts after a checkpoint and reopen
 * (the checkpoint lists retirements in slot order, not epoch order). Both
 * widths of the dense index: 256-row chunks (u16) and 65536-row chunks (u32). */
static void test_dense_retire_epochs_survive_reopen(void)
{
    static const uint32_t rows_of[2] = { 256, 65536 };
    for (int w = 0; w < 2; w++) {
        uint32_t R = rows_of[w];
        set_path(w ? "dense_wide" : "dense_narrow");
        quad *q = open_with(R, 64, QUAD_IO_INLINE, 1 << 20);
        REQUIRE(q);
        quad_fact *facts = malloc(R * sizeof *facts), *out = malloc(R * sizeof *out);
        quad_id *ids = malloc(R * sizeof *ids), *batch = malloc(R * sizeof *batch);
        uint64_t *want = calloc(R, sizeof *want);
        uint8_t *present = malloc(R);
        uint64_t ts = 1;
        tq_structured(facts, R, &ts);
        quad_id first;
        uint64_t e0;
        REQUIRE(quad_append(q, facts, R, QUAD_BUFFERED, &first, &e0) == 0);
        for (uint32_t i = 0; i < R; i++) ids[i] = quad_batch_id(first, R, i);
        enum { K = 40 };
        uint64_t last = e0, retired = 0;
        for (int k = 0; k < K; k++) {
            size_t m = 0;
            /* slots whose (slot * 7) % 50 == k, newest first, plus two already retired */
            for (uint32_t i = R; i-- > 0;)
                if ((i * 7u) % 50u == (uint32_t)k) batch[m++] = ids[i];
            if (k > 0) { batch[m++] = ids[0]; batch[m++] = ids[(R / 2) | 1]; }
            uint64_t e;
            CHECK_EQ(quad_retire(q, batch, m, QUAD_BUFFERED, &e), 0);
            CHECK_EQ(e, last + 1);
            last = e;
            for (size_t j = 0; j < m; j++) {
                uint32_t slot = QUAD_ID_SLOT(batch[j]);
                if (!want[slot]) { want[slot] = e; retired++; }
            }
        }
        quad_stats st;
        quad_stats_get(q, &st);
        CHECK_EQ(st.retired, retired);
        CHECK_EQ(retired, R == 256 ? 206u : 52428u);   /* the slots with (slot*7)%50 < 40 */
        CHECK_EQ(check_retire_epochs(q, ids, want, R, last, out, present), 0);
        CHECK_EQ(quad_close(q), 0);   /* checkpoint, then load it */
        q = open_with(R, 64, QUAD_IO_INLINE, 1 << 20);
        REQUIRE(q);
        quad_stats_get(q, &st);
        CHECK_EQ(st.retired, retired);
        CHECK_EQ(st.recovered_frames, 0);
        CHECK_EQ(check_retire_epochs(q, ids, want, R, last, out, present), 0);
        quad_close(q);
        free(facts); free(out); free(ids); free(batch); free(want); free(present);
    }
}

/* Scattered gathers (random order, so ids are grouped by chunk) that mix
 * visible ids, slots past a short chunk's end and chunks that do not exist:
 * present[] is exact, the masked lanes of missing ids are zeroed, other lanes
 * are left alone, and without present[] the call reports HANU_ERR_NOT_FOUND
 * after filling the visible ids. Checked without any retirement (visibility is
 * settled while the values are located) and again after one. */
static void test_gather_scattered_missing_ids(void)
{
    set_path("scattered_missing");
    quad *q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    enum { N = 1000, K = 600 };   /* chunks 0..3; chunk 3 holds 232 rows */
    static quad_fact facts[N], out[K];
    static quad_id req[K];
    static int src[K];
    static uint8_t present[K];
    uint64_t ts = 3;
    tq_structured(facts, N, &ts);
    quad_id first;
    REQUIRE(quad_append(q, facts, N, QUAD_BUFFERED, &first, NULL) == 0);
    for (int round = 0; round < 2; round++) {
        int retired_src = 17;   /* retired before round 1 */
        size_t want_missing = 0;
        for (int i = 0; i < K; i++) {
            unsigned r = (unsigned)(tq_rand() % 10);
            if (r == 0) { req[i] = QUAD_ID(3, 232 + tq_rand() % 24); src[i] = -1; }
            else if (r == 1) { req[i] = QUAD_ID(4 + tq_rand() % 3, tq_rand() % 256); src[i] = -1; }
            else if (r == 2 && round == 1) { src[i] = retired_src; req[i] = quad_batch_id(first, 256, 17); }
            else { src[i] = (int)(tq_rand() % N); req[i] = quad_batch_id(first, 256, (size_t)src[i]); }
            if (round == 1 && src[i] == retired_src) src[i] = -1;
            want_missing += src[i] < 0;
        }
        CHECK(want_missing > 0);
        unsigned mask = QUAD_LANE(0) | QUAD_LANE(3);
        memset(out, 0x77, sizeof out);
        CHECK_EQ(quad_gather(q, 0, req, K, mask, out, present), 0);
        size_t bad = 0, missing = 0;
        for (int i = 0; i < K; i++) {
            missing += !present[i];
            bad += present[i] != (src[i] >= 0);
            if (src[i] >= 0) bad += !tq_fact_eq(&out[i], &facts[src[i]], mask);
            else bad += out[i].lane[0] != 0 || out[i].lane[3] != 0;
            bad += out[i].lane[1] != 0x7777777777777777ULL || out[i].lane[2] != 0x7777777777777777ULL;
        }
        CHECK_EQ(bad, 0);
        CHECK_EQ(missing, want_missing);
        memset(out, 0x77, sizeof out);
        CHECK_EQ(quad_gather(q, 0, req, K, QUAD_LANES_ALL, out, NULL), HANU_ERR_NOT_FOUND);
        bad = 0;
        for (int i = 0; i < K; i++) bad += src[i] >= 0 && !tq_fact_eq(&out[i], &facts[src[i]], 0xF);
        CHECK_EQ(bad, 0);
        if (round == 0) {
            quad_id one = quad_batch_id(first, 256, (size_t)retired_src);
            CHECK_EQ(quad_retire(q, &one, 1, QUAD_BUFFERED, NULL), 0);
        }
    }
    quad_close(q);
}

/* Chunks that mix every kind of field: a 3-bit lane, a full 64-bit lane, a
 * 60-bit lane, a constant; then narrow rows next to rows of a few bits.
 * Ordered, random, descending and single-lane gathers, cached and after the
 * cache is dropped, return exactly what was appended. */
static void test_every_field_width(void)
{
    set_path("row_widths");
    quad *q = open_with(1024, 64, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    enum { N = 4000 };
    static quad_fact facts[N], out[N];
    static quad_id ids[N], req[N];
    static size_t src[N];
    for (size_t i = 0; i < N; i++) {
        if (i < 2048) {   /* chunks 0-1: wide rows */
            facts[i].lane[0] = 100 + tq_rand() % 7;
            facts[i].lane[1] = tq_rand();
            facts[i].lane[2] = (UINT64_C(1) << 62) + (tq_rand() >> 4);
            facts[i].lane[3] = 42;
        } else if (i < 3072) {   /* chunk 2: 60-bit rows of narrow fields (a load per field) */
            facts[i].lane[0] = 5 + tq_rand() % (1u << 20);
            facts[i].lane[1] = 1000 + tq_rand() % (1u << 19);
            facts[i].lane[2] = 7 + i % 2;
            facts[i].lane[3] = UINT64_MAX - tq_rand() % (1u << 20);
        } else {                 /* chunk 3: 20-bit rows (one load per row) */
            facts[i].lane[0] = 5;
            facts[i].lane[1] = 1000 + tq_rand() % 3;
            facts[i].lane[2] = 9 + i % 2;
            facts[i].lane[3] = UINT64_MAX - tq_rand() % 100000;
        }
    }
    quad_id first;
    REQUIRE(quad_append(q, facts, N, QUAD_BUFFERED, &first, NULL) == 0);
    for (size_t i = 0; i < N; i++) ids[i] = quad_batch_id(first, 1024, i);
    for (int pass = 0; pass < 3; pass++) {   /* cold, cached, cold again */
        if (pass == 2) quad_cache_drop(q);
        size_t bad = 0;
        memset(out, 0, sizeof out);
        CHECK_EQ(quad_gather(q, 0, ids, N, QUAD_LANES_ALL, out, NULL), 0);
        for (size_t i = 0; i < N; i++) bad += !tq_fact_eq(&out[i], &facts[i], 0xF);
        for (size_t i = 0; i < N; i++) { src[i] = tq_rand() % N; req[i] = ids[src[i]]; }
        bad += check_every_mask(q, req, N, facts, src, out);
        for (size_t i = 0; i < N; i++) { src[i] = N - 1 - (i * 3) % N; req[i] = ids[src[i]]; }
        CHECK_EQ(quad_gather(q, 0, req, N, QUAD_LANE(1) | QUAD_LANE(2), out, NULL), 0);
        for (size_t i = 0; i < N; i++) bad += !tq_fact_eq(&out[i], &facts[src[i]], 0x6);
        CHECK_EQ(bad, 0);
        if (pass == 0) quad_cache_drop(q);
    }
    quad_close(q);
}

/* Random reads of chunks whose lanes are cached build each chunk's row form
 * on the second visit (the cache grows then, and only then) and read through
 * it: exact values for every lane mask, ids past a chunk's rows absent with
 * zeroed lanes, retired ids absent except in an older snapshot, partial last
 * chunk, microblocks larger than the build slice, and again after the cache
 * is dropped. */
static void test_row_form_random_reads(void)
{
    static const uint32_t geo[][2] = { { 4096, 256 }, { 1024, 1024 }, { 64, 64 } };
    enum { N = 10000 };
    static quad_fact facts[N], out[N];
    static quad_id ids[N], req[N];
    static size_t src[N];
    static uint8_t present[N];
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        set_path("row_form");
        uint32_t rows = geo[g][0];
        quad *q = open_with(rows, geo[g][1], QUAD_IO_INLINE, 64 << 20);
        REQUIRE(q);
        uint64_t ts = 7;
        for (size_t i = 0; i < N; i += 500) {   /* shapes alternate every 500 facts */
            if ((i / 500) % 3 == 0) tq_structured(facts + i, 500, &ts);
            else if ((i / 500) % 3 == 1) tq_entropy(facts + i, 500);
            else for (size_t k = i; k < i + 500; k++) {   /* a lane at the top of the range */
                facts[k].lane[0] = UINT64_MAX - (tq_rand() & 0xFFFF);
                facts[k].lane[1] = k;
                facts[k].lane[2] = 3;
                facts[k].lane[3] = tq_rand() & 1;
            }
        }
        quad_id first;
        REQUIRE(quad_append(q, facts, N, QUAD_BUFFERED, &first, NULL) == 0);
        for (size_t i = 0; i < N; i++) ids[i] = quad_batch_id(first, rows, i);
        CHECK_EQ(quad_gather(q, 0, ids, N, QUAD_LANES_ALL, out, NULL), 0);   /* caches every lane */
        for (size_t i = 0; i < N; i++) { src[i] = tq_rand() % N; req[i] = ids[src[i]]; }
        quad_stats a, b, c;
        quad_stats_get(q, &a);
        CHECK_EQ(quad_gather(q, 0, req, N, QUAD_LANES_ALL, out, NULL), 0);   /* marks the chunks */
        quad_stats_get(q, &b);
        CHECK_EQ(b.cache_bytes, a.cache_bytes);
        size_t bad = 0;
        for (size_t i = 0; i < N; i++) bad += !tq_fact_eq(&out[i], &facts[src[i]], 0xF);
        bad += check_every_mask(q, req, N, facts, src, out);   /* the first builds the row forms */
        quad_stats_get(q, &c);
        CHECK(c.cache_bytes > b.cache_bytes);
        CHECK_EQ(bad, 0);
        /* ids past the rows of the partial last chunk and of a full one */
        uint64_t last = QUAD_ID_CHUNK(ids[N - 1]);
        req[7] = QUAD_ID(last, (uint32_t)(N % rows ? N % rows : rows - 1) + (N % rows ? 0 : 1));
        req[8] = QUAD_ID(QUAD_ID_CHUNK(ids[0]), rows + 5);
        memset(out, 0xCD, sizeof out);
        CHECK_EQ(quad_gather(q, 0, req, N, QUAD_LANES_ALL, out, present), 0);
        for (size_t i = 0; i < N; i++) {
            if (i == 7 || i == 8) {
                int absent_ok = N % rows == 0 && i == 7 ? 1 : !present[i];
                bad += !absent_ok || (!present[i] && (out[i].lane[0] | out[i].lane[3]) != 0);
            } else {
                bad += !present[i] || !tq_fact_eq(&out[i], &facts[src[i]], 0xF);
            }
        }
        CHECK_EQ(bad, 0);
        /* retirements: absent now, present in the snapshot before them */
        uint64_t before;
        quad_snapshot(q, &before);
        quad_id gone[3] = { req[0], req[100], req[N - 1] };
        REQUIRE(quad_retire(q, gone, 3, QUAD_BUFFERED, NULL) == 0);
        CHECK_EQ(quad_gather(q, 0, req, N, QUAD_LANES_ALL, out, present), 0);
        for (size_t i = 0; i < N; i++) {
            if (i == 7 || i == 8) continue;
            int dead = req[i] == gone[0] || req[i] == gone[1] || req[i] == gone[2];
            bad += present[i] == dead || (!dead && !tq_fact_eq(&out[i], &facts[src[i]], 0xF));
        }
        CHECK_EQ(quad_gather(q, before, req, N, QUAD_LANE(1) | QUAD_LANE(3), out, present), 0);
        for (size_t i = 0; i < N; i++)
            if (i != 7 && i != 8) bad += !present[i] || !tq_fact_eq(&out[i], &facts[src[i]], 0xA);
        CHECK_EQ(bad, 0);
        quad_cache_drop(q);
        quad_stats_get(q, &c);
        CHECK_EQ(c.cache_bytes, 0);
        for (int pass = 0; pass < 3; pass++) {   /* cold, marked, row forms again */
            memset(out, 0xCD, sizeof out);
            CHECK_EQ(quad_gather(q, before, req, N, QUAD_LANES_ALL, out, present), 0);
            for (size_t i = 0; i < N; i++)
                if (i != 7 && i != 8) bad += !present[i] || !tq_fact_eq(&out[i], &facts[src[i]], 0xF);
        }
        CHECK_EQ(bad, 0);
        quad_close(q);
    }
}

/* A dense chunk retired again and again (ids already retired keep their
 * epoch): more than 65536 such commits must not grow the chunk's table of
 * retire epochs past what its 16-bit row index can name, so a row retired
 * afterwards still has exactly its own epoch. */
static void test_dense_reretire_keeps_epochs(void)
{
    set_path("reretire");
    quad *q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    static quad_fact facts[256], out[256];
    static quad_id ids[256];
    static uint8_t present[256];
    uint64_t ts = 9;
    tq_structured(facts, 256, &ts);
    quad_id first;
    REQUIRE(quad_append(q, facts, 256, QUAD_BUFFERED, &first, NULL) == 0);
    for (int i = 0; i < 256; i++) ids[i] = quad_batch_id(first, 256, (size_t)i);
    uint64_t e_dense;
    CHECK_EQ(quad_retire(q, ids, 20, QUAD_BUFFERED, &e_dense), 0);   /* 20 > 256/16: dense */
    int fails = 0;
    for (int k = 0; k < 66000; k++) fails += quad_retire(q, &ids[k % 20], 1, QUAD_BUFFERED, NULL) != 0;
    CHECK_EQ(fails, 0);
    uint64_t e_late;
    CHECK_EQ(quad_retire(q, &ids[100], 1, QUAD_BUFFERED, &e_late), 0);
    CHECK_EQ(e_late, e_dense + 66001);
    for (int round = 0; round < 2; round++) {
        quad_stats st;
        quad_stats_get(q, &st);
        CHECK_EQ(st.retired, 21);
        uint64_t snaps[3] = { e_dense - 1, e_late - 1, e_late };
        for (int k = 0; k < 3; k++) {
            CHECK_EQ(quad_gather(q, snaps[k], ids, 256, QUAD_LANES_ALL, out, present), 0);
            size_t bad = 0;
            for (int i = 0; i < 256; i++) {
                int want = k == 0 || (i >= 20 && (i != 100 || k < 2));
                bad += present[i] != want;
            }
            CHECK_EQ(bad, 0);
        }
        CHECK_EQ(quad_close(q), 0);   /* and the same from the checkpoint */
        q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
        REQUIRE(q);
    }
    quad_close(q);
}

/* One chunk retired by more commits than its 16-bit dense index can name
 * (70 000 commits of one new row each): the set goes wide on the way and
 * every row keeps exactly its own epoch, in memory, after a replay of the
 * log (a copy of the file taken before any checkpoint) and from the
 * checkpoint written at close. */
static size_t wide_check(quad *q, const quad_id *ids, const uint64_t *ep, int rows)
{
    static quad_fact out[1 << 17];
    static uint8_t present[1 << 17];
    static const int probes[] = { 0, 1, 8191, 8192, 65534, 65535, 65536, 69999 };
    size_t bad = 0;
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        int k = probes[p];
        CHECK_EQ(quad_gather(q, ep[k] - 1, ids, (size_t)rows, QUAD_LANE(0), out, present), 0);
        for (int i = 0; i < rows; i++) bad += present[i] != (i >= k);
        CHECK_EQ(quad_gather(q, ep[k], &ids[k], 1, QUAD_LANE(0), out, present), 0);
        bad += present[0] != 0;
    }
    return bad;
}

static void test_dense_goes_wide_past_65535_epochs(void)
{
    enum { ROWS = 1 << 17, N = 70000 };
    set_path("wide");
    quad *q = open_with(ROWS, 1024, QUAD_IO_INLINE, 8 << 20);
    REQUIRE(q);
    static quad_fact facts[ROWS];
    static quad_id ids[ROWS];
    static uint64_t ep[N];
    uint64_t ts = 1;
    tq_structured(facts, ROWS, &ts);
    quad_id first;
    REQUIRE(quad_append(q, facts, ROWS, QUAD_BUFFERED, &first, NULL) == 0);
    for (size_t i = 0; i < ROWS; i++) ids[i] = quad_batch_id(first, ROWS, i);
    int fails = 0;
    for (int k = 0; k < N; k++) fails += quad_retire(q, &ids[k], 1, QUAD_BUFFERED, &ep[k]) != 0;
    CHECK_EQ(fails, 0);
    CHECK_EQ(wide_check(q, ids, ep, ROWS), 0);
    char live[600], copy[600];
    memcpy(live, path, sizeof live);
    snprintf(copy, sizeof copy, "%s", test_tmpdir("wide_copy"));
    REQUIRE(strlen(copy) + 12 < sizeof copy);
    strcat(copy, "/facts.quad");
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", live, copy);
    REQUIRE(system(cmd) == 0);
    CHECK_EQ(quad_close(q), 0);
    for (int from_ckpt = 0; from_ckpt < 2; from_ckpt++) {   /* the copy replays; the original has a checkpoint */
        memcpy(path, from_ckpt ? live : copy, sizeof path);
        q = open_with(ROWS, 1024, QUAD_IO_INLINE, 8 << 20);
        REQUIRE(q);
        quad_stats st;
        quad_stats_get(q, &st);
        CHECK_EQ(st.retired, N);
        CHECK(from_ckpt ? st.recovered_frames == 0 : st.recovered_frames >= N);
        CHECK_EQ(wide_check(q, ids, ep, ROWS), 0);
        quad_close(q);
    }
}

static void test_scan_pages_in_id_order(void)
{
    set_path("scan");
    quad *q = open_with(64, 64, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    enum { N = 500 };
    static quad_fact facts[N], out[N];
    static quad_id ids[N], sids[N];
    tq_entropy(facts, N);
    size_t done = 0;
    while (done < N) {
        size_t k = N - done < 77 ? N - done : 77;
        quad_id first;
        REQUIRE(quad_append(q, facts + done, k, QUAD_BUFFERED, &first, NULL) == 0);
        for (size_t i = 0; i < k; i++) ids[done + i] = quad_batch_id(first, 64, i);
        done += k;
    }
    quad_id rm[2] = { ids[3], ids[100] };
    uint64_t snap;
    quad_snapshot(q, &snap);
    CHECK_EQ(quad_retire(q, rm, 2, QUAD_BUFFERED, NULL), 0);
    quad_id from = 0;
    size_t got = 0, nout, bad = 0;
    quad_id next;
    for (;;) {
        CHECK_EQ(quad_scan(q, 0, from, QUAD_LANES_ALL, out, sids, 33, &nout, &next), 0);
        if (nout == 0) break;
        for (size_t i = 0; i < nout; i++) {   /* ids[3] and ids[100] are skipped */
            size_t idx = got + i;
            idx += idx >= 3;
            idx += idx >= 100;
            bad += sids[i] != ids[idx] || !tq_fact_eq(&out[i], &facts[idx], 0xF);
        }
        got += nout;
        from = next;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(got, N - 2);
    /* at the snapshot before the retire, everything */
    CHECK_EQ(quad_scan(q, snap, 0, QUAD_LANE(1), out, NULL, N, &nout, &next), 0);
    CHECK_EQ(nout, N);
    quad_close(q);
}

/* What the release callback saw: the buffer, the context, and whether the
 * commit was already readable when the buffer came back. */
static int released;
static quad_fact *released_ptr;
static void *released_ctx;
static quad *release_q;
static quad_id release_first;
static int release_saw_commit;

static void release_cb(void *ctx, quad_fact *f)
{
    released++;
    released_ptr = f;
    released_ctx = ctx;
    if (release_q) {   /* the facts were encoded from f before it came back */
        quad_fact got;
        quad_id id = quad_batch_id(release_first, 4096, 4999);
        release_saw_commit = quad_gather(release_q, 0, &id, 1, QUAD_LANES_ALL, &got, NULL) == 0 &&
                             tq_fact_eq(&got, &f[4999], 0xF);
    }
    free(f);
}

static void test_owned_append_releases_once(void)
{
    set_path("owned");
    quad *q = open_with(4096, 256, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    quad_fact *f = malloc(5000 * sizeof *f);
    quad_fact *copy = malloc(5000 * sizeof *copy);
    uint64_t ts = 5;
    tq_structured(f, 5000, &ts);
    memcpy(copy, f, 5000 * sizeof *f);
    quad_id first;
    int ctx_tag;
    released = 0;
    release_q = q;
    release_first = QUAD_ID(0, 0);   /* the first append of an empty store */
    CHECK_EQ(quad_append_owned(q, f, 5000, QUAD_DURABLE, release_cb, &ctx_tag, &first, NULL), 0);
    CHECK_EQ(first, QUAD_ID(0, 0));
    /* handed back once, the very buffer (no copy was taken), with the caller's
     * context, after the commit was readable and before the call returned */
    CHECK_EQ(released, 1);
    CHECK(released_ptr == f);
    CHECK(released_ctx == &ctx_tag);
    CHECK_EQ(release_saw_commit, 1);
    release_q = NULL;
    quad_id ids[5000];
    for (size_t i = 0; i < 5000; i++) ids[i] = quad_batch_id(first, 4096, i);
    quad_fact *out = malloc(5000 * sizeof *out);
    CHECK_EQ(quad_gather(q, 0, ids, 5000, QUAD_LANES_ALL, out, NULL), 0);
    CHECK(memcmp(out, copy, 5000 * sizeof *out) == 0);
    CHECK_EQ(quad_durable_epoch(q), 1);
    /* errors still release, exactly once, and commit nothing */
    quad_fact *g = malloc(sizeof *g);
    CHECK_EQ(quad_append_owned(q, g, 1, 99, release_cb, NULL, NULL, NULL), HANU_ERR_INVALID);
    CHECK_EQ(released, 2);
    CHECK(released_ptr == g);
    g = malloc(sizeof *g);
    CHECK_EQ(quad_append_owned(q, g, 0, QUAD_BUFFERED, release_cb, NULL, NULL, NULL), HANU_ERR_INVALID);
    CHECK_EQ(released, 3);
    g = malloc(sizeof *g);
    CHECK_EQ(quad_append_owned(NULL, g, 1, QUAD_BUFFERED, release_cb, NULL, NULL, NULL), HANU_ERR_INVALID);
    CHECK_EQ(released, 4);
    g = malloc(sizeof *g);
    CHECK_EQ(quad_append_owned(q, g, (size_t)1 << 25, QUAD_BUFFERED, release_cb, NULL, NULL, NULL),
             HANU_ERR_TOO_LARGE);
    CHECK_EQ(released, 5);
    CHECK_EQ(quad_epoch(q), 1);
    /* release NULL: the store frees the buffer with free() (the sanitizer
     * build's leak check fails otherwise) */
    g = malloc(3 * sizeof *g);
    tq_structured(g, 3, &ts);
    quad_fact keep[3];
    memcpy(keep, g, sizeof keep);
    CHECK_EQ(quad_append_owned(q, g, 3, QUAD_BUFFERED, NULL, NULL, &first, NULL), 0);
    CHECK_EQ(released, 5);
    quad_id ids3[3] = { first, first + 1, first + 2 };
    CHECK_EQ(quad_gather(q, 0, ids3, 3, QUAD_LANES_ALL, out, NULL), 0);
    CHECK(memcmp(out, keep, sizeof keep) == 0);
    free(out);
    free(copy);
    quad_close(q);
}

static void test_bad_arguments(void)
{
    set_path("args");
    quad *q = open_with(4096, 256, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    quad_fact f = { { 1, 2, 3, 4 } }, out;
    quad_id id;
    CHECK_EQ(quad_append(q, &f, 0, QUAD_BUFFERED, &id, NULL), HANU_ERR_INVALID);
    CHECK_EQ(quad_append(q, &f, 1, 7, &id, NULL), HANU_ERR_INVALID);
    CHECK_EQ(quad_append(q, &f, 1, QUAD_BUFFERED, &id, NULL), 0);
    CHECK_EQ(quad_gather(q, 0, &id, 1, 0, NULL, NULL), 0);   /* an existence check */
    CHECK_EQ(quad_gather(q, 0, NULL, 1, 0, NULL, NULL), HANU_ERR_INVALID);
    CHECK_EQ(quad_gather(q, 0, &id, 1, 0x10, &out, NULL), HANU_ERR_INVALID);
    CHECK_EQ(quad_gather(q, 0, &id, 0, QUAD_LANES_ALL, &out, NULL), 0);
    quad_id missing[3] = { QUAD_ID(0, 1), QUAD_ID(5, 0), QUAD_ID(0, 1u << 23) };
    for (int i = 0; i < 3; i++)
        CHECK_EQ(quad_gather(q, 0, &missing[i], 1, QUAD_LANES_ALL, &out, NULL), HANU_ERR_NOT_FOUND);
    CHECK_EQ(quad_gather(q, 0, &id, 1, QUAD_LANES_ALL, &out, NULL), 0);
    CHECK(tq_fact_eq(&out, &f, 0xF));
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 100;
    quad *bad = NULL;
    CHECK_EQ(quad_open(path, &o, &bad), HANU_ERR_INVALID);
    CHECK_EQ(quad_close(q), 0);
    o.chunk_rows = 4096;
    o.flags = QUAD_RDONLY;
    char nopath[700];
    snprintf(nopath, sizeof nopath, "%s.absent", path);
    CHECK_EQ(quad_open(nopath, &o, &bad), HANU_ERR_NOT_FOUND);
    CHECK_EQ(quad_open(path, &o, &bad), 0);
    CHECK_EQ(quad_append(bad, &f, 1, QUAD_BUFFERED, NULL, NULL), HANU_ERR_INVALID);
    CHECK_EQ(quad_gather(bad, 0, &id, 1, QUAD_LANES_ALL, &out, NULL), 0);
    quad_close(bad);
}

/* Lane mask 0 answers existence at a snapshot from the chunk directory and
 * the retirement state: the right answer before and after appends and
 * retires (sparse and dense chunks, ids past a chunk's rows or past the last
 * chunk, in any order), out untouched, and no lane payload read or cached
 * (the cache counters do not move, also with the cache emptied first). */
static void test_exists_reads_no_lane_data(void)
{
    set_path("exists");
    quad *q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    enum { N = 1024 };
    static quad_fact facts[N];
    static quad_id ids[N + 3];
    static uint8_t present[N + 3];
    uint64_t ts = 0;
    tq_structured(facts, N, &ts);
    quad_id first;
    uint64_t e_append, e_sparse, e_dense;
    REQUIRE(quad_append(q, facts, N / 2, QUAD_BUFFERED, &first, &e_append) == 0);
    REQUIRE(quad_append(q, facts + N / 2, N / 2, QUAD_BUFFERED, NULL, NULL) == 0);
    for (size_t i = 0; i < N; i++) ids[i] = quad_batch_id(first, 256, i);
    ids[N] = QUAD_ID(QUAD_ID_CHUNK(ids[N - 1]) + 1, 0);   /* no such chunk */
    ids[N + 1] = QUAD_ID(0, 256);                         /* past the chunk's rows */
    ids[N + 2] = ids[3];
    quad_id sparse[2] = { ids[3], ids[700] };
    REQUIRE(quad_retire(q, sparse, 2, QUAD_BUFFERED, &e_sparse) == 0);
    quad_id dense[100];
    for (int i = 0; i < 100; i++) dense[i] = ids[256 + i * 2];
    REQUIRE(quad_retire(q, dense, 100, QUAD_BUFFERED, &e_dense) == 0);
    /* reversed order too: chunks visited backwards */
    static quad_id rev[N + 3];
    for (size_t i = 0; i < N + 3; i++) rev[i] = ids[N + 2 - i];
    for (int round = 0; round < 2; round++) {
        quad_cache_drop(q);
        quad_stats before, after;
        CHECK_EQ(quad_stats_get(q, &before), 0);
        quad_fact sentinel = { { 7, 7, 7, 7 } };
        const uint64_t snaps[4] = { e_append, e_sparse - 1, e_sparse, e_dense };
        size_t bad = 0;
        for (int s = 0; s < 4; s++) {
            for (int dir = 0; dir < 2; dir++) {
                const quad_id *req = dir ? rev : ids;
                memset(present, 0xEE, sizeof present);
                CHECK_EQ(quad_gather(q, snaps[s], req, N + 3, 0, &sentinel, present), 0);
                for (size_t k = 0; k < N + 3; k++) {
                    size_t i = dir ? N + 2 - k : k;
                    int want;
                    if (i >= N && i != N + 2) want = 0;
                    else {
                        size_t f = i == N + 2 ? 3 : i;
                        want = f < N / 2 || snaps[s] > e_append;
                        if (f == 3 || f == 700) want = want && snaps[s] < e_sparse;
                        if (f >= 256 && f < 456 && f % 2 == 0) want = want && snaps[s] < e_dense;
                    }
                    bad += present[k] != want;
                }
            }
        }
        CHECK_EQ(bad, 0);
        CHECK(tq_fact_eq(&sentinel, &(quad_fact){ { 7, 7, 7, 7 } }, 0xF));
        CHECK_EQ(quad_gather(q, e_append, ids, N / 2, 0, NULL, NULL), 0);
        CHECK_EQ(quad_gather(q, e_append, ids, N / 2 + 1, 0, NULL, NULL), HANU_ERR_NOT_FOUND);
        CHECK_EQ(quad_gather(q, 0, ids + 4, 10, 0, NULL, NULL), 0);
        CHECK_EQ(quad_stats_get(q, &after), 0);
        CHECK_EQ(after.cache_hits, before.cache_hits);
        CHECK_EQ(after.cache_misses, before.cache_misses);
        CHECK_EQ(after.cache_bytes, 0);
        CHECK_EQ(quad_close(q), 0);   /* the same after a checkpoint and reopen */
        q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
        REQUIRE(q);
    }
    quad_close(q);
}

static void test_checkpoint_limits_replay(void)
{
    set_path("ckpt");
    quad *q = open_with(256, 64, QUAD_IO_INLINE, 1 << 20);
    REQUIRE(q);
    static quad_fact facts[20000], out[20000];
    static quad_id ids[20000];
    uint64_t ts = 0;
    tq_structured(facts, 20000, &ts);
    for (size_t i = 0; i < 20000; i += 100) {
        quad_id first;
        REQUIRE(quad_append(q, facts + i, 100, QUAD_BUFFERED, &first, NULL) == 0);
        for (size_t k = 0; k < 100; k++) ids[i + k] = quad_batch_id(first, 256, k);
    }
    CHECK_EQ(quad_retire(q, ids + 10, 5, QUAD_BUFFERED, NULL), 0);
    CHECK_EQ(quad_checkpoint(q), 0);
    quad_fact extra[10];
    tq_entropy(extra, 10);
    quad_id xfirst;
    CHECK_EQ(quad_append(q, extra, 10, QUAD_BUFFERED, &xfirst, NULL), 0);
    CHECK_EQ(quad_retire(q, ids + 20, 1, QUAD_BUFFERED, NULL), 0);
    /* reopen without close: simulate a crash by duplicating the file first */
    char copy[700], cmd[1500];
    snprintf(copy, sizeof copy, "%s.copy", path);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, copy);
    CHECK_EQ(system(cmd), 0);
    quad_close(q);
    quad_options o;
    quad_options_default(&o);
    REQUIRE(quad_open(copy, &o, &q) == 0);
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK_EQ(st.recovered_frames, 2);
    CHECK_EQ(st.facts, 20010);
    CHECK_EQ(st.retired, 6);
    uint8_t present[20000];
    CHECK_EQ(quad_gather(q, 0, ids, 20000, QUAD_LANES_ALL, out, present), 0);
    size_t bad = 0, live = 0;
    for (size_t i = 0; i < 20000; i++) {
        live += present[i];
        if (present[i]) bad += !tq_fact_eq(&out[i], &facts[i], 0xF);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(live, 20000 - 6);
    CHECK_EQ(quad_gather(q, 0, &xfirst, 1, QUAD_LANES_ALL, out, NULL), 0);
    CHECK(tq_fact_eq(&out[0], &extra[0], 0xF));
    quad_close(q);
}

int main(void)
{
    RUN(test_round_trip_shapes_and_sizes);
    RUN(test_io_uring_backend);
    RUN(test_retire_snapshot_sparse_and_dense);
    RUN(test_scan_pages_in_id_order);
    RUN(test_every_field_width);
    RUN(test_row_form_random_reads);
    RUN(test_gather_scattered_missing_ids);
    RUN(test_dense_retire_epochs_survive_reopen);
    RUN(test_dense_reretire_keeps_epochs);
    RUN(test_dense_goes_wide_past_65535_epochs);
    RUN(test_owned_append_releases_once);
    RUN(test_bad_arguments);
    RUN(test_exists_reads_no_lane_data);
    RUN(test_checkpoint_limits_replay);
    TEST_DONE();
}
