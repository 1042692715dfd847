/*
 * test_quad_concurrent: readers gather and scan while writers append and
 * retire on the same handle. Every fact a reader sees present must carry the
 * exact lanes it was appended with, and a snapshot taken by a reader must not
 * change while writers go on. Meant to run under ThreadSanitizer too.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"

#define W 2
#define R 3
#define BATCH 50
#define ROUNDS 200

static quad *q;
static quad_id firsts[W][ROUNDS];
static _Atomic int acked[W];
static _Atomic int readers_bad;
static _Atomic int stop;
static _Atomic long reads;

static uint64_t lane_of(int w, int s, int i, int l)
{
    uint64_t x = ((uint64_t)w << 40) ^ ((uint64_t)s << 16) ^ ((uint64_t)i << 2) ^ (uint64_t)l;
    x *= 0x9E3779B97F4A7C15ULL;
    return x ^ (x >> 29);
}

/* Runs fn(i) for i in [0, n) on n threads (n <= 64) and waits for all. */
static void run_threads(void *(*fn)(void *), int n)
{
    pthread_t th[64];
    for (intptr_t i = 0; i < n; i++) pthread_create(&th[i], NULL, fn, (void *)i);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void *writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    quad_fact f[BATCH];
    for (int s = 0; s < ROUNDS; s++) {
        for (int i = 0; i < BATCH; i++)
            for (int l = 0; l < 4; l++) f[i].lane[l] = lane_of(w, s, i, l);
        quad_id first;
        if (quad_append(q, f, BATCH, (s % 25 == 0) ? QUAD_GROUP : QUAD_BUFFERED, &first, NULL) != 0) {
            atomic_fetch_add(&readers_bad, 1000);
            return NULL;
        }
        firsts[w][s] = first;
        atomic_store(&acked[w], s + 1);
        if (s % 3 == 0) {
            quad_id rid = first + (quad_id)(s % BATCH);
            if (quad_retire(q, &rid, 1, QUAD_BUFFERED, NULL) != 0) atomic_fetch_add(&readers_bad, 1000);
        }
    }
    return NULL;
}

static void *reader(void *arg)
{
    uint64_t seed = (uint64_t)(intptr_t)arg * 7919 + 1;
    quad_fact out[BATCH * 4];
    quad_id ids[BATCH * 4];
    uint8_t present[BATCH * 4];
    int wv[BATCH * 4], sv[BATCH * 4], iv[BATCH * 4];
    while (!atomic_load(&stop)) {
        int k = 0;
        for (int j = 0; j < 4; j++) {
            seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
            int w = (int)(seed % W);
            int n = atomic_load(&acked[w]);
            if (n == 0) continue;
            int s = (int)((seed >> 8) % (uint64_t)n);
            for (int i = 0; i < BATCH; i++) {
                ids[k] = firsts[w][s] + (quad_id)i;
                wv[k] = w; sv[k] = s; iv[k] = i;
                k++;
            }
        }
        if (k == 0) continue;
        atomic_fetch_add(&reads, 1);
        uint64_t snap;
        quad_snapshot(q, &snap);
        if (quad_gather(q, snap, ids, (size_t)k, QUAD_LANES_ALL, out, present) != 0) {
            atomic_fetch_add(&readers_bad, 1);
            continue;
        }
        int seen = 0;
        for (int j = 0; j < k; j++) {
            if (!present[j]) continue;
            seen++;
            for (int l = 0; l < 4; l++)
                if (out[j].lane[l] != lane_of(wv[j], sv[j], iv[j], l)) { atomic_fetch_add(&readers_bad, 1); break; }
        }
        /* the same snapshot again: the same set must be present */
        if (quad_gather(q, snap, ids, (size_t)k, QUAD_LANE(1), out, present) != 0) atomic_fetch_add(&readers_bad, 1);
        int seen2 = 0;
        for (int j = 0; j < k; j++) seen2 += present[j];
        if (seen2 != seen) atomic_fetch_add(&readers_bad, 1);
        size_t nout;
        quad_id next;
        if (quad_scan(q, snap, ids[0], QUAD_LANE(0), out, ids, BATCH, &nout, &next) != 0)
            atomic_fetch_add(&readers_bad, 1);
        usleep(20);   /* 3 readers on a 2-core machine must not starve the writers */
    }
    return NULL;
}

static void test_readers_during_writes(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/c.quad", test_tmpdir("concurrent"));
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 64;
    o.microblock_rows = 64;
    o.cache_bytes = 256 << 10;
    o.group_window_us = 20;
    o.checkpoint_bytes = 512 << 10;
    REQUIRE(quad_open(path, &o, &q) == 0);
    pthread_t wt[W], rt[R];
    for (intptr_t i = 0; i < R; i++) pthread_create(&rt[i], NULL, reader, (void *)i);
    for (intptr_t i = 0; i < W; i++) pthread_create(&wt[i], NULL, writer, (void *)i);
    for (int i = 0; i < W; i++) pthread_join(wt[i], NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < R; i++) pthread_join(rt[i], NULL);
    CHECK_EQ(atomic_load(&readers_bad), 0);
    CHECK(atomic_load(&reads) > 0);
    fprintf(stderr, "  %ld reader rounds during the writes\n", atomic_load(&reads));
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK_EQ(st.facts, (uint64_t)W * ROUNDS * BATCH);
    CHECK_EQ(st.retired, (uint64_t)W * ((ROUNDS + 2) / 3));
    CHECK_EQ(quad_close(q), 0);
}

/* Many writers committing durably at once, through the shared sync: every
 * call that returns 0 finds its epoch under the durable watermark, no commit
 * is lost, and the syncs are shared (fewer than the commits) or at most one
 * per commit. */
enum { GW = 16, GROUNDS = 40 };
static _Atomic int group_bad;

static void *group_writer(void *arg)
{
    intptr_t w = (intptr_t)arg;
    quad_fact f[8];
    for (int r = 0; r < GROUNDS; r++) {
        for (int i = 0; i < 8; i++)
            for (int l = 0; l < 4; l++) f[i].lane[l] = (uint64_t)w << 40 | (uint64_t)r << 8 | (uint64_t)i;
        uint64_t e = 0;
        int dur = (r % 4 == 3) ? QUAD_DURABLE : QUAD_GROUP;
        if (quad_append(q, f, 8, dur, NULL, &e) != 0 || quad_durable_epoch(q) < e)
            atomic_fetch_add(&group_bad, 1);
    }
    return NULL;
}

static void test_group_commit_many_writers(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/g.quad", test_tmpdir("group"));
    quad_options o;
    quad_options_default(&o);
    o.group_window_us = 50;
    REQUIRE(quad_open(path, &o, &q) == 0);
    run_threads(group_writer, GW);
    CHECK_EQ(atomic_load(&group_bad), 0);
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK_EQ(st.facts, (uint64_t)GW * GROUNDS * 8);
    CHECK_EQ(st.epoch, (uint64_t)GW * GROUNDS);
    CHECK_EQ(st.durable_epoch, st.epoch);
    CHECK(st.syncs >= 1 && st.syncs <= st.epoch);
    fprintf(stderr, "  %llu commits, %llu fdatasyncs\n", (unsigned long long)st.epoch,
            (unsigned long long)st.syncs);
    CHECK_EQ(quad_close(q), 0);
}

/* Writers of every durability at once, borrowed and owned, with a batch
 * that is too large now and then, all going through the combined write:
 * every call gets its own epoch and its own ids, a failed request leaves no
 * trace, durable calls return durable, and a reopen reads every fact back. */
enum { MW = 12, MROUNDS = 150 };
typedef struct mixed_rec {
    quad_id first;
    uint64_t epoch;
    uint32_t n;
} mixed_rec;
static mixed_rec mixed[MW][MROUNDS];
static _Atomic int mixed_bad;

static uint32_t mixed_n(int w, int r) { return 1 + (uint32_t)((w * 131 + r * 29) % 300); }

static void mixed_fill(quad_fact *f, int w, int r, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (int l = 0; l < 4; l++) f[i].lane[l] = l == 1 ? (uint64_t)w : lane_of(w, r, (int)i, l) >> (l * 8);
}

static void *mixed_writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    quad_fact *f = malloc(300 * sizeof *f);
    for (int r = 0; r < MROUNDS; r++) {
        uint32_t n = mixed_n(w, r);
        int dur = (w + r) % 3 == 0 ? QUAD_BUFFERED : (w + r) % 3 == 1 ? QUAD_DURABLE : QUAD_GROUP;
        mixed_rec *m = &mixed[w][r];
        m->n = n;
        if (r % 37 == 5) {   /* too large (over 2^24 facts): refused, nothing written */
            static const quad_fact big;
            if (quad_append(q, &big, ((size_t)1 << 24) + 1, dur, &m->first, &m->epoch) != HANU_ERR_TOO_LARGE)
                atomic_fetch_add(&mixed_bad, 1);
            m->n = 0;
            continue;
        }
        int rc;
        if (r % 4 == 3) {
            quad_fact *own = malloc(n * sizeof *own);
            mixed_fill(own, w, r, n);
            rc = quad_append_owned(q, own, n, dur, NULL, NULL, &m->first, &m->epoch);
        } else {
            mixed_fill(f, w, r, n);
            rc = quad_append(q, f, n, dur, &m->first, &m->epoch);
        }
        if (rc != 0 || (dur != QUAD_BUFFERED && quad_durable_epoch(q) < m->epoch)) atomic_fetch_add(&mixed_bad, 1);
    }
    free(f);
    return NULL;
}

static void test_mixed_writers_combined(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/x.quad", test_tmpdir("mixed"));
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 128;
    o.microblock_rows = 64;
    o.group_window_us = 30;
    REQUIRE(quad_open(path, &o, &q) == 0);
    run_threads(mixed_writer, MW);
    CHECK_EQ(atomic_load(&mixed_bad), 0);
    /* epochs: each call its own, together exactly 1..commits */
    static uint8_t seen_epoch[MW * MROUNDS + 1];
    uint64_t commits = 0, facts = 0;
    for (int w = 0; w < MW; w++)
        for (int r = 0; r < MROUNDS; r++) {
            if (!mixed[w][r].n) continue;
            commits++;
            facts += mixed[w][r].n;
            uint64_t e = mixed[w][r].epoch;
            CHECK(e >= 1 && e <= MW * MROUNDS && !seen_epoch[e]);
            if (e >= 1 && e <= MW * MROUNDS) seen_epoch[e] = 1;
        }
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK_EQ(st.epoch, commits);
    CHECK_EQ(st.facts, facts);
    CHECK_EQ(quad_close(q), 0);
    REQUIRE(quad_open(path, &o, &q) == 0);
    quad_fact want[300], got[300];
    quad_id ids[300];
    size_t bad = 0;
    for (int w = 0; w < MW; w++)
        for (int r = 0; r < MROUNDS; r++) {
            uint32_t n = mixed[w][r].n;
            if (!n) continue;
            mixed_fill(want, w, r, n);
            for (uint32_t i = 0; i < n; i++) ids[i] = quad_batch_id(mixed[w][r].first, 128, i);
            if (quad_gather(q, 0, ids, n, QUAD_LANES_ALL, got, NULL) != 0) { bad++; continue; }
            for (uint32_t i = 0; i < n; i++)
                for (int l = 0; l < 4; l++) bad += got[i].lane[l] != want[i].lane[l];
        }
    CHECK_EQ(bad, 0);
    CHECK_EQ(quad_close(q), 0);
    q = NULL;
}

/* A write that fails (the file size limit, RLIMIT_FSIZE, stands in for a
 * full disk) fails only the commits combined into it: writers racing into
 * the limit each get either success or HANU_ERR_IO, every success reads back
 * after a reopen, and writes go on once the limit is lifted. */
enum { FW = 4, FROUNDS = 60 };
static quad_id fail_first[FW][FROUNDS];
static int fail_rc[FW][FROUNDS];

static void *limit_writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    quad_fact f[64];
    for (int r = 0; r < FROUNDS; r++) {
        mixed_fill(f, w, r, 64);
        fail_rc[w][r] = quad_append(q, f, 64, QUAD_BUFFERED, &fail_first[w][r], NULL);
    }
    return NULL;
}

static void test_write_failure_fails_its_batch_only(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/f.quad", test_tmpdir("fsize"));
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 64;
    o.microblock_rows = 64;
    o.checkpoint_bytes = 0;
    REQUIRE(quad_open(path, &o, &q) == 0);
    quad_stats st;
    quad_stats_get(q, &st);
    struct rlimit old, lim;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = st.file_bytes + 40 * 1024;   /* room for about half the commits */
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    run_threads(limit_writer, FW);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    int ok = 0, failed = 0, other = 0;
    for (int w = 0; w < FW; w++)
        for (int r = 0; r < FROUNDS; r++) {
            if (fail_rc[w][r] == 0) ok++;
            else if (fail_rc[w][r] == HANU_ERR_IO) failed++;
            else other++;
        }
    fprintf(stderr, "  %d commits written, %d refused at the size limit\n", ok, failed);
    CHECK(ok > 0);
    CHECK(failed > 0);
    CHECK_EQ(other, 0);
    quad_fact extra[64];
    mixed_fill(extra, 99, 0, 64);
    quad_id xfirst;
    CHECK_EQ(quad_append(q, extra, 64, QUAD_DURABLE, &xfirst, NULL), 0);
    quad_stats_get(q, &st);
    CHECK_EQ(st.facts, (uint64_t)(ok + 1) * 64);
    CHECK_EQ(quad_close(q), 0);
    REQUIRE(quad_open(path, &o, &q) == 0);
    quad_stats_get(q, &st);
    CHECK_EQ(st.facts, (uint64_t)(ok + 1) * 64);
    quad_fact want[64], got[64];
    quad_id ids[64];
    size_t bad = 0;
    for (int w = 0; w <= FW; w++)
        for (int r = 0; r < (w == FW ? 1 : FROUNDS); r++) {
            if (w < FW && fail_rc[w][r]) continue;
            mixed_fill(want, w == FW ? 99 : w, r, 64);
            quad_id first = w == FW ? xfirst : fail_first[w][r];
            for (int i = 0; i < 64; i++) ids[i] = quad_batch_id(first, 64, (size_t)i);
            if (quad_gather(q, 0, ids, 64, QUAD_LANES_ALL, got, NULL) != 0) { bad++; continue; }
            for (int i = 0; i < 64; i++)
                for (int l = 0; l < 4; l++) bad += got[i].lane[l] != want[i].lane[l];
        }
    CHECK_EQ(bad, 0);
    CHECK_EQ(quad_close(q), 0);
    q = NULL;
}

/* Readers gather at random (building row forms) from a cache a tenth the
 * size of the data while another thread empties it again and again: entries
 * are evicted under the readers' feet and must stay readable until their
 * gathers end (the ASan build catches a use after free), and every value is
 * exact. */
enum { EN = 20000, ER = 2, EROUNDS = 3000 };
static quad_fact evict_facts[EN];
static quad_id evict_ids[EN];
static _Atomic int evict_bad, evict_stop;

static void *evict_reader(void *arg)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)((intptr_t)arg + 1);
    quad_id req[512];
    size_t src[512];
    quad_fact out[512];
    for (int round = 0; round < EROUNDS; round++) {
        for (int i = 0; i < 512; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            src[i] = s % EN;
            req[i] = evict_ids[src[i]];
        }
        unsigned mask = round % 3 ? QUAD_LANES_ALL : 1u + (unsigned)(s % 15);
        if (quad_gather(q, 0, req, 512, mask, out, NULL) != 0) { atomic_fetch_add(&evict_bad, 1); continue; }
        for (int i = 0; i < 512; i++)
            for (int l = 0; l < 4; l++)
                if ((mask & (1u << l)) && out[i].lane[l] != evict_facts[src[i]].lane[l]) {
                    atomic_fetch_add(&evict_bad, 1);
                    break;
                }
    }
    return NULL;
}

static void *evict_dropper(void *arg)
{
    (void)arg;
    while (!atomic_load(&evict_stop)) {
        quad_cache_drop(q);
        usleep(200);
    }
    return NULL;
}

static void test_readers_while_cache_evicts(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/e.quad", test_tmpdir("evict"));
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 256;
    o.microblock_rows = 64;
    o.cache_bytes = 64 << 10;
    REQUIRE(quad_open(path, &o, &q) == 0);
    for (size_t i = 0; i < EN; i++)
        for (int l = 0; l < 4; l++) evict_facts[i].lane[l] = l == 1 ? 9 : lane_of(7, (int)i, 0, l) >> (l * 16);
    quad_id first;
    REQUIRE(quad_append(q, evict_facts, EN, QUAD_BUFFERED, &first, NULL) == 0);
    for (size_t i = 0; i < EN; i++) evict_ids[i] = quad_batch_id(first, 256, i);
    pthread_t rt[ER], dt;
    pthread_create(&dt, NULL, evict_dropper, NULL);
    for (intptr_t i = 0; i < ER; i++) pthread_create(&rt[i], NULL, evict_reader, (void *)i);
    for (int i = 0; i < ER; i++) pthread_join(rt[i], NULL);
    atomic_store(&evict_stop, 1);
    pthread_join(dt, NULL);
    CHECK_EQ(atomic_load(&evict_bad), 0);
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK(st.cache_hits > 0);
    CHECK(st.cache_misses > 0);
    CHECK_EQ(quad_close(q), 0);
    q = NULL;
}

int main(void)
{
    RUN(test_readers_during_writes);
    RUN(test_group_commit_many_writers);
    RUN(test_mixed_writers_combined);
    RUN(test_write_failure_fails_its_batch_only);
    RUN(test_readers_while_cache_evicts);
    TEST_DONE();
}
