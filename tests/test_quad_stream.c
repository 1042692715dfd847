/*
 * test_quad_stream: the facts kernel's commit stream (quad_stream_*). Every
 * commit of a random workload (appends of both shapes across chunk
 * boundaries, retires with repeats and ids retired before, automatic and
 * explicit checkpoints) is delivered in epoch order with its exact ids and
 * lanes, from every starting epoch, before and after a reopen; the durable
 * stream waits for a sync and the committed one does not; a blocked reader
 * wakes on a commit; positions out of range are refused; a held stream is a
 * floor; a reader follows a writer thread commit by commit.
 */
#include <pthread.h>
#include <stdlib.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

static char path[600];

static quad *open_store(uint64_t ckpt_bytes)
{
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 256;
    o.microblock_rows = 64;
    o.io_backend = QUAD_IO_INLINE;
    o.cache_bytes = 1 << 20;
    o.checkpoint_bytes = ckpt_bytes;
    o.group_window_us = 0;
    quad *q = NULL;
    int rc = quad_open(path, &o, &q);
    if (rc) fprintf(stderr, "  open: %s\n", hanu_status_str(rc));
    return q;
}

/* ---- the model: what each epoch's commit must deliver ---- */
typedef struct mcommit {
    int kind;
    size_t n;
    quad_id *ids;          /* appended, or newly retired (ascending) */
    quad_fact *facts;      /* appended, or the retired facts */
} mcommit;

#define MAX_COMMITS 400
static mcommit model[MAX_COMMITS + 1];   /* by epoch */
static uint64_t last_epoch;
static quad_id *all_ids;
static quad_fact *all_facts;
static uint64_t *retired_at;             /* by index into all_ids */
static size_t nall;

static void model_free(void)
{
    for (uint64_t e = 1; e <= last_epoch; e++) { free(model[e].ids); free(model[e].facts); }
    memset(model, 0, sizeof model);
    last_epoch = 0;
    free(all_ids); free(all_facts); free(retired_at);
    all_ids = NULL; all_facts = NULL; retired_at = NULL;
    nall = 0;
}

static int cmp_id(const void *a, const void *b)
{
    quad_id x = *(const quad_id *)a, y = *(const quad_id *)b;
    return x < y ? -1 : x > y;
}

static void do_append(quad *q, size_t n, int durability)
{
    static uint64_t ts = 1;
    quad_fact *f = malloc(n * sizeof *f);
    if (tq_rand() & 1) tq_structured(f, n, &ts); else tq_entropy(f, n);
    quad_id first;
    uint64_t e;
    REQUIRE(quad_append(q, f, n, durability, &first, &e) == 0);
    REQUIRE(e == last_epoch + 1 && e <= MAX_COMMITS);
    mcommit *m = &model[e];
    m->kind = QUAD_COMMIT_APPEND;
    m->n = n;
    m->facts = f;
    m->ids = malloc(n * sizeof *m->ids);
    all_ids = realloc(all_ids, (nall + n) * sizeof *all_ids);
    all_facts = realloc(all_facts, (nall + n) * sizeof *all_facts);
    retired_at = realloc(retired_at, (nall + n) * sizeof *retired_at);
    for (size_t i = 0; i < n; i++) {
        m->ids[i] = quad_batch_id(first, 256, i);
        all_ids[nall] = m->ids[i];
        all_facts[nall] = f[i];
        retired_at[nall++] = 0;
    }
    last_epoch = e;
}

/* Retires k ids picked at random (repeats and ids retired before included). */
static void do_retire(quad *q, size_t k, int durability)
{
    quad_id *ids = malloc(k * sizeof *ids);
    size_t *pick = malloc(k * sizeof *pick);
    for (size_t i = 0; i < k; i++) {
        pick[i] = (size_t)(tq_rand() % nall);
        if (i && tq_rand() % 8 == 0) pick[i] = pick[i - 1];
        ids[i] = all_ids[pick[i]];
    }
    uint64_t e;
    REQUIRE(quad_retire(q, ids, k, durability, &e) == 0);
    REQUIRE(e == last_epoch + 1 && e <= MAX_COMMITS);
    mcommit *m = &model[e];
    m->kind = QUAD_COMMIT_RETIRE;
    m->ids = malloc(k * sizeof *m->ids);
    m->facts = malloc(k * sizeof *m->facts);
    for (size_t i = 0; i < k; i++) {
        if (retired_at[pick[i]]) continue;   /* before, or a repeat in this call */
        retired_at[pick[i]] = e;
        m->ids[m->n++] = ids[i];
    }
    qsort(m->ids, m->n, sizeof *m->ids, cmp_id);
    for (size_t i = 0; i < m->n; i++) {   /* ids ascend in append order */
        size_t lo = 0, hi = nall;
        while (lo < hi) { size_t mid = (lo + hi) / 2; if (all_ids[mid] < m->ids[i]) lo = mid + 1; else hi = mid; }
        m->facts[i] = all_facts[lo];
    }
    last_epoch = e;
    free(ids);
    free(pick);
}

/* Compares a delivered commit with the model; returns the mismatches. */
static size_t commit_diff(const quad_commit *c, unsigned lanes)
{
    if (c->epoch == 0 || c->epoch > last_epoch) return 1;
    const mcommit *m = &model[c->epoch];
    if (c->kind != m->kind || c->n != m->n) return 1;
    if ((lanes == 0) != (c->facts == NULL)) return 1;
    size_t bad = 0;
    for (size_t i = 0; i < c->n; i++) {
        bad += c->ids[i] != m->ids[i];
        if (!lanes) continue;
        bad += !tq_fact_eq(&c->facts[i], &m->facts[i], lanes);
        for (unsigned l = 0; l < 4; l++)
            if (!(lanes & (1u << l))) bad += c->facts[i].lane[l] != 0;
    }
    return bad;
}

/* Reads a stream from `from` until it has nothing more (polled); checks each
 * commit and that it ends at `until`. Returns the mismatches. */
static size_t read_all(quad *q, uint64_t from, unsigned flags, uint64_t until)
{
    quad_stream *s = NULL;
    if (quad_stream_open(q, from, flags, &s) != 0) return 1000000;
    size_t bad = 0;
    uint64_t want = from ? from : 1;
    quad_commit c;
    int rc;
    while ((rc = quad_stream_next(s, 0, &c)) == 1) {
        if (c.epoch != want) { bad++; break; }
        bad += commit_diff(&c, flags & QUAD_LANES_ALL);
        want++;
    }
    bad += rc != 0;
    bad += want != until + 1;
    bad += quad_stream_position(s) != want;
    quad_stream_close(s);
    return bad;
}

static void random_workload(quad *q, int commits)
{
    for (int i = 0; i < commits; i++) {
        unsigned r = (unsigned)(tq_rand() % 100);
        int d = tq_rand() % 6 == 0 ? QUAD_DURABLE : QUAD_BUFFERED;
        if (r < 55 || nall == 0) {
            size_t n = 1 + tq_rand() % (r < 10 ? 3000 : 300);
            do_append(q, n, d);
        } else if (r < 95) {
            do_retire(q, 1 + tq_rand() % (r < 60 ? 500 : 20), d);
        } else {
            REQUIRE(quad_checkpoint(q) == 0);
        }
    }
}

static void test_stream_delivers_every_commit_exactly(void)
{
    snprintf(path, sizeof path, "%s/s.quad", test_tmpdir("stream_exact"));
    tq_rng = 4242;
    quad *q = open_store(48 << 10);   /* automatic checkpoints between commits */
    REQUIRE(q);
    random_workload(q, 150);
    REQUIRE(quad_sync(q) == 0);
    static const unsigned flag_sets[] = { QUAD_LANES_ALL, QUAD_LANE(0), QUAD_LANE(1) | QUAD_LANE(3), 0,
                                          QUAD_LANES_ALL | QUAD_STREAM_COMMITTED };
    for (int round = 0; round < 2 && !test_current_failed; round++) {
        size_t bad = 0;
        for (uint64_t from = 0; from <= last_epoch + 1; from++)
            bad += read_all(q, from, flag_sets[from % 5], last_epoch);
        CHECK_EQ(bad, 0);
        /* more commits after the reopen, then again from every epoch */
        CHECK_EQ(quad_close(q), 0);
        q = open_store(48 << 10);
        REQUIRE(q);
        if (round == 0) {
            random_workload(q, 60);
            REQUIRE(quad_sync(q) == 0);
        }
    }
    quad_stats st;
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK(st.recovered_frames < last_epoch);   /* the reopen loaded a checkpoint */
    quad_close(q);
    model_free();
}

typedef struct waiter {
    quad_stream *s;
    int timeout_ms;
    int rc;
    quad_commit c;
} waiter;

static void *wait_one(void *arg)
{
    waiter *w = arg;
    w->rc = quad_stream_next(w->s, w->timeout_ms, &w->c);
    return NULL;
}

static void test_stream_durable_waits_for_sync(void)
{
    snprintf(path, sizeof path, "%s/s.quad", test_tmpdir("stream_durable"));
    tq_rng = 77;
    quad *q = open_store(0);
    REQUIRE(q);
    quad_stream *dur = NULL, *com = NULL;
    REQUIRE(quad_stream_open(q, 1, QUAD_LANES_ALL, &dur) == 0);
    REQUIRE(quad_stream_open(q, 1, QUAD_LANES_ALL | QUAD_STREAM_COMMITTED, &com) == 0);
    quad_commit c;
    CHECK_EQ(quad_stream_next(dur, 0, &c), 0);
    CHECK_EQ(quad_stream_next(dur, 30, &c), 0);   /* nothing came: the timeout */
    do_append(q, 100, QUAD_BUFFERED);
    do_append(q, 10, QUAD_BUFFERED);
    /* written, not durable: the committed stream has them, the durable one not */
    CHECK_EQ(quad_stream_next(com, 0, &c), 1);
    CHECK(c.epoch == 1 && commit_diff(&c, QUAD_LANES_ALL) == 0);
    CHECK_EQ(quad_stream_next(com, 0, &c), 1);
    CHECK(c.epoch == 2 && commit_diff(&c, QUAD_LANES_ALL) == 0);
    CHECK_EQ(quad_stream_next(com, 0, &c), 0);
    CHECK_EQ(quad_stream_next(dur, 0, &c), 0);
    CHECK(quad_durable_epoch(q) < 1);
    REQUIRE(quad_sync(q) == 0);
    CHECK_EQ(quad_stream_next(dur, 0, &c), 1);
    CHECK(c.epoch == 1 && commit_diff(&c, QUAD_LANES_ALL) == 0);
    CHECK_EQ(quad_stream_next(dur, 0, &c), 1);
    CHECK_EQ(c.epoch, 2);
    /* a reader blocked without a timeout wakes when a durable commit lands */
    waiter w = { .s = dur, .timeout_ms = -1 };
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, wait_one, &w) == 0);
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    do_retire(q, 5, QUAD_DURABLE);
    pthread_join(th, NULL);
    CHECK_EQ(w.rc, 1);
    CHECK(w.c.epoch == 3 && w.c.kind == QUAD_COMMIT_RETIRE && commit_diff(&w.c, QUAD_LANES_ALL) == 0);
    /* a blocked reader of the durable stream is woken by quad_sync too */
    w = (waiter){ .s = dur, .timeout_ms = 10000 };
    REQUIRE(pthread_create(&th, NULL, wait_one, &w) == 0);
    nanosleep(&ts, NULL);
    do_append(q, 7, QUAD_BUFFERED);
    nanosleep(&ts, NULL);
    REQUIRE(quad_sync(q) == 0);
    pthread_join(th, NULL);
    CHECK_EQ(w.rc, 1);
    CHECK_EQ(w.c.epoch, 4);
    quad_stream_close(dur);
    quad_stream_close(com);
    quad_close(q);
    model_free();
}

static void test_stream_positions_and_floor(void)
{
    snprintf(path, sizeof path, "%s/s.quad", test_tmpdir("stream_pos"));
    tq_rng = 99;
    quad *q = open_store(0);
    REQUIRE(q);
    for (int i = 0; i < 5; i++) do_append(q, 50, QUAD_DURABLE);
    quad_stream *s = NULL;
    CHECK_EQ(quad_stream_open(q, 7, 0, &s), HANU_ERR_NOT_FOUND);   /* past epoch + 1 */
    CHECK(s == NULL);
    CHECK_EQ(quad_stream_open(q, 1, 0x10, &s), HANU_ERR_INVALID);
    CHECK_EQ(quad_stream_open(q, 1, 0, NULL), HANU_ERR_INVALID);
    CHECK_EQ(quad_stream_open(NULL, 1, 0, &s), HANU_ERR_INVALID);
    CHECK_EQ(quad_stream_next(NULL, 0, NULL), HANU_ERR_INVALID);
    /* epoch + 1: nothing yet, then the next commit */
    REQUIRE(quad_stream_open(q, 6, QUAD_LANE(2), &s) == 0);
    quad_commit c;
    CHECK_EQ(quad_stream_next(s, 0, &c), 0);
    do_append(q, 3, QUAD_DURABLE);
    CHECK_EQ(quad_stream_next(s, 0, &c), 1);
    CHECK(c.epoch == 6 && commit_diff(&c, QUAD_LANE(2)) == 0);
    CHECK_EQ(quad_stream_position(s), 7);
    /* an unheld stream is not known to the store */
    quad_stats st;
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK(st.held_streams == 0 && st.stream_floor == 0 && st.log_floor == 1);
    quad_stream_close(s);
    /* held streams: the floor is the lowest position, and moves with it */
    quad_stream *h1 = NULL, *h2 = NULL;
    REQUIRE(quad_stream_open(q, 3, QUAD_STREAM_HOLD, &h1) == 0);
    REQUIRE(quad_stream_open(q, 0, QUAD_STREAM_HOLD, &h2) == 0);
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK(st.held_streams == 2 && st.stream_floor == 1);
    CHECK_EQ(quad_stream_next(h2, 0, &c), 1);
    CHECK_EQ(quad_stream_next(h2, 0, &c), 1);
    CHECK_EQ(quad_stream_next(h2, 0, &c), 1);
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK_EQ(st.stream_floor, 3);
    CHECK_EQ(quad_stream_next(h2, 0, &c), 1);
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK_EQ(st.stream_floor, 3);   /* h1 still at 3 */
    quad_stream_close(h1);
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK(st.held_streams == 1 && st.stream_floor == 5);
    quad_stream_close(h2);
    CHECK_EQ(quad_stats_get(q, &st), 0);
    CHECK(st.held_streams == 0 && st.stream_floor == 0);
    quad_stream_close(NULL);
    quad_close(q);
    model_free();
}

/* ---- a reader following a writer thread ---- */
typedef struct wctx {
    quad *q;
    int commits;
} wctx;

static quad_fact fact_of(uint64_t epoch, size_t i)
{
    quad_fact f = { { epoch, i, epoch * 1000003 + i, (epoch ^ i) * 0x9E3779B97F4A7C15ULL } };
    return f;
}

static void *writer(void *arg)
{
    wctx *w = arg;
    quad_fact *f = malloc(700 * sizeof *f);
    for (int k = 0; k < w->commits; k++) {
        uint64_t e = quad_epoch(w->q) + 1;   /* the only writer: the next epoch */
        size_t n = 1 + (size_t)(e * 7919 % 700);
        for (size_t i = 0; i < n; i++) f[i] = fact_of(e, i);
        uint64_t got;
        if (quad_append(w->q, f, n, k % 50 == 0 ? QUAD_DURABLE : QUAD_BUFFERED, NULL, &got) != 0 || got != e)
            break;
    }
    free(f);
    return NULL;
}

static void test_stream_follows_a_writer(void)
{
    snprintf(path, sizeof path, "%s/s.quad", test_tmpdir("stream_follow"));
    quad *q = open_store(256 << 10);
    REQUIRE(q);
    enum { COMMITS = 3000 };
    quad_stream *s = NULL;
    REQUIRE(quad_stream_open(q, 1, QUAD_LANES_ALL | QUAD_STREAM_COMMITTED, &s) == 0);
    wctx w = { q, COMMITS };
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, writer, &w) == 0);
    uint64_t want = 1;
    size_t bad = 0;
    quad_commit c;
    while (want <= COMMITS && bad == 0) {
        int rc = quad_stream_next(s, 5000, &c);
        if (rc != 1) { bad++; fprintf(stderr, "  next: %d at %llu\n", rc, (unsigned long long)want); break; }
        size_t n = 1 + (size_t)(want * 7919 % 700);
        bad += c.epoch != want || c.kind != QUAD_COMMIT_APPEND || c.n != n;
        for (size_t i = 0; i < c.n && bad == 0; i++) {
            quad_fact f = fact_of(want, i);
            bad += !tq_fact_eq(&c.facts[i], &f, QUAD_LANES_ALL);
        }
        want++;
    }
    pthread_join(th, NULL);
    CHECK_EQ(bad, 0);
    CHECK_EQ(quad_stream_next(s, 0, &c), 0);
    quad_stream_close(s);
    quad_close(q);
}

int main(void)
{
    RUN(test_stream_delivers_every_commit_exactly);
    RUN(test_stream_durable_waits_for_sync);
    RUN(test_stream_positions_and_floor);
    RUN(test_stream_follows_a_writer);
    TEST_DONE();
}
