/*
 * test_quad_model: randomized operations on the facts kernel checked against
 * a trivial in-memory reference (arrays of facts with their append and
 * retire epochs): append (borrowed and owned, both shapes, every durability),
 * retire, snapshots, gather in random order with random lane masks and
 * invalid ids, existence checks (lane mask 0), scan, checkpoint, cache drops and reopen, snapshot
 * holds and the cleaner (relocated chunks read as the model at every snapshot at or above the
 * horizon, held snapshots keep theirs, older ones answer HANU_ERR_GONE); after each reopen every
 * id at every sampled snapshot still answered (folds loaded from checkpoints). Several seeds and
 * chunk geometries.
 */
#include <stdlib.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

typedef struct model {
    quad_fact *facts;
    quad_id *ids;
    uint64_t *added, *retired;
    size_t n, cap;
} model;

static void model_push(model *m, const quad_fact *f, quad_id id, uint64_t epoch)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 1024;
        m->facts = realloc(m->facts, m->cap * sizeof *m->facts);
        m->ids = realloc(m->ids, m->cap * sizeof *m->ids);
        m->added = realloc(m->added, m->cap * sizeof *m->added);
        m->retired = realloc(m->retired, m->cap * sizeof *m->retired);
    }
    m->facts[m->n] = *f;
    m->ids[m->n] = id;
    m->added[m->n] = epoch;
    m->retired[m->n] = 0;
    m->n++;
}

static int model_visible(const model *m, size_t i, uint64_t snap)
{
    return m->added[i] <= snap && (m->retired[i] == 0 || m->retired[i] > snap);
}

/* ids are appended in id order, so the index of an id is found by bisection */
static long model_find(const model *m, quad_id id)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->ids[mid] < id) lo = mid + 1; else hi = mid;
    }
    return lo < m->n && m->ids[lo] == id ? (long)lo : -1;
}

static int failures;

static void run_model(uint64_t seed, uint32_t rows, uint32_t mb, int ops)
{
    tq_rng = seed;
    char path[600];
    snprintf(path, sizeof path, "%s/m.quad", test_tmpdir("model"));
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = rows;
    o.microblock_rows = mb;
    o.cache_bytes = (tq_rand() & 1) ? (1 << 20) : (64 << 10);
    o.io_backend = (int)(tq_rand() % 2);
    o.checkpoint_bytes = (tq_rand() & 1) ? (256 << 10) : 0;
    o.group_window_us = 0;
    quad *q = NULL;
    REQUIRE(quad_open(path, &o, &q) == 0);
    model m = { 0 };
    uint64_t snaps[16] = { 0 };
    int nsnaps = 0;
    quad_fact *buf = malloc(5000 * sizeof *buf), *out = malloc(5000 * sizeof *out);
    quad_id *qids = malloc(5000 * sizeof *qids);
    long *idx = malloc(5000 * sizeof *idx);
    uint8_t *present = malloc(5000), *exists = malloc(5000);
    uint64_t ts = 1, gone = 0, relocated = 0;
    quad_hold *holds[4];
    uint64_t held[4];
    int nholds = 0;
    for (int op = 0; op < ops && !test_current_failed; op++) {
        unsigned r = (unsigned)(tq_rand() % 100);
        if (r < 25) {   /* append */
            size_t k = 1 + tq_rand() % ((tq_rand() & 3) ? 300 : 4999);
            quad_fact *src = buf;
            if (tq_rand() & 1) tq_structured(buf, k, &ts); else tq_entropy(buf, k);
            int dur = (int)(tq_rand() % 10 == 0 ? 1 + tq_rand() % 2 : QUAD_BUFFERED);
            quad_id first;
            uint64_t ep;
            if (tq_rand() % 4 == 0) {
                quad_fact *own = malloc(k * sizeof *own);
                memcpy(own, buf, k * sizeof *own);
                REQUIRE(quad_append_owned(q, own, k, dur, NULL, NULL, &first, &ep) == 0);
            } else {
                REQUIRE(quad_append(q, src, k, dur, &first, &ep) == 0);
            }
            CHECK_EQ(ep, quad_epoch(q));
            for (size_t i = 0; i < k; i++) model_push(&m, &buf[i], quad_batch_id(first, rows, i), ep);
        } else if (r < 40 && m.n) {   /* retire */
            size_t k = 1 + tq_rand() % ((tq_rand() & 1) ? 10 : 2000);
            for (size_t i = 0; i < k; i++) {
                idx[i] = (long)(tq_rand() % m.n);
                qids[i] = m.ids[idx[i]];
            }
            int invalid = tq_rand() % 10 == 0;
            if (invalid) qids[k / 2] = QUAD_ID(QUAD_ID_CHUNK(m.ids[m.n - 1]) + 1, 0);
            uint64_t ep = 0;
            int rc = quad_retire(q, qids, k, QUAD_BUFFERED, &ep);
            if (invalid) {
                CHECK_EQ(rc, HANU_ERR_NOT_FOUND);
            } else {
                REQUIRE(rc == 0);
                for (size_t i = 0; i < k; i++)
                    if (!m.retired[idx[i]]) m.retired[idx[i]] = ep;
            }
        } else if (r < 45) {
            uint64_t s;
            quad_snapshot(q, &s);
            snaps[nsnaps++ % 16] = s;
        } else if (r < 80 && m.n) {   /* gather */
            size_t k = 1 + tq_rand() % 4999;
            int mode = (int)(tq_rand() % 3);
            size_t start = tq_rand() % m.n;
            for (size_t i = 0; i < k; i++) {
                if (mode == 0) idx[i] = (long)(tq_rand() % m.n);
                else if (mode == 1) idx[i] = (long)((start + i) % m.n);
                else idx[i] = (long)(m.n - 1 - (start + i) % m.n);
                qids[i] = m.ids[idx[i]];
                if (tq_rand() % 50 == 0) {
                    qids[i] = (tq_rand() & 1) ? QUAD_ID(QUAD_ID_CHUNK(m.ids[m.n - 1]) + 1 + tq_rand() % 5, 0)
                                              : QUAD_ID(QUAD_ID_CHUNK(qids[i]), rows + tq_rand() % 100);
                    idx[i] = -1;
                }
            }
            uint64_t snap = 0, eff = quad_epoch(q);
            if (nholds && tq_rand() % 3 == 0) snap = held[tq_rand() % (unsigned)nholds];
            else if (nsnaps && (tq_rand() & 1)) snap = snaps[tq_rand() % (nsnaps < 16 ? nsnaps : 16)];
            if (snap) eff = snap;   /* snapshot 0 means the latest epoch */
            unsigned mask = 1 + (unsigned)(tq_rand() % 15);
            memset(out, 0x5A, k * sizeof *out);
            if (eff < gone) {   /* below the horizon of a clean */
                CHECK_EQ(quad_gather(q, snap, qids, k, mask, out, present), HANU_ERR_GONE);
                CHECK_EQ(quad_gather(q, snap, qids, k, 0, NULL, present), HANU_ERR_GONE);
                continue;
            }
            REQUIRE(quad_gather(q, snap, qids, k, mask, out, present) == 0);
            size_t bad = 0;
            for (size_t i = 0; i < k; i++) {
                int vis = idx[i] >= 0 && model_visible(&m, (size_t)idx[i], eff);
                int wrong = present[i] != vis || (vis && !tq_fact_eq(&out[i], &m.facts[idx[i]], mask));
                if (wrong && bad == 0)
                    fprintf(stderr, "  first bad: pos %zu id %llx present %d want %d mask %x lane0 %llx want %llx\n",
                            i, (unsigned long long)qids[i], present[i], vis, mask,
                            (unsigned long long)out[i].lane[0],
                            (unsigned long long)(idx[i] >= 0 ? m.facts[idx[i]].lane[0] : 0));
                bad += wrong;
                for (unsigned l = 0; l < 4; l++)
                    if (!(mask & (1u << l)) && out[i].lane[l] != 0x5A5A5A5A5A5A5A5AULL) bad++;
            }
            if (bad) fprintf(stderr, "  seed %llu op %d gather mode %d: %zu bad of %zu\n",
                             (unsigned long long)seed, op, mode, bad, k);
            CHECK_EQ(bad, 0);
            /* the existence check (lane mask 0) agrees with the model, and
             * without present[] says whether every id is visible */
            memset(exists, 0x77, k);
            REQUIRE(quad_gather(q, snap, qids, k, 0, NULL, exists) == 0);
            size_t absent = 0, wrong_exists = 0;
            for (size_t i = 0; i < k; i++) {
                int vis = idx[i] >= 0 && model_visible(&m, (size_t)idx[i], eff);
                wrong_exists += exists[i] != vis;
                absent += !vis;
            }
            CHECK_EQ(wrong_exists, 0);
            CHECK_EQ(quad_gather(q, snap, qids, k, 0, NULL, NULL), absent ? HANU_ERR_NOT_FOUND : 0);
        } else if (r < 88 && m.n) {   /* scan */
            size_t from = tq_rand() % m.n, cap = 1 + tq_rand() % 3000;
            uint64_t eff = quad_epoch(q);
            size_t nout;
            quad_id next;
            REQUIRE(quad_scan(q, 0, m.ids[from], QUAD_LANES_ALL, out, qids, cap, &nout, &next) == 0);
            size_t j = from, bad = 0;
            for (size_t i = 0; i < nout; i++) {
                while (j < m.n && !model_visible(&m, j, eff)) j++;
                if (j >= m.n || qids[i] != m.ids[j] || !tq_fact_eq(&out[i], &m.facts[j], 0xF)) bad++;
                j++;
            }
            if (nout < cap) {   /* reached the end: nothing visible after j */
                while (j < m.n && !model_visible(&m, j, eff)) j++;
                if (j != m.n) bad++;
            }
            CHECK_EQ(bad, 0);
        } else if (r < 91) {
            CHECK_EQ(quad_checkpoint(q), 0);
        } else if (r < 94) {
            quad_cache_drop(q);
        } else if (r < 97) {   /* hold or release a snapshot, then clean */
            if (nholds < 4 && (tq_rand() & 1)) {
                REQUIRE(quad_snapshot_hold(q, &held[nholds], &holds[nholds]) == 0);
                nholds++;
            } else if (nholds) {
                quad_snapshot_release(holds[0]);
                memmove(holds, holds + 1, (size_t)(nholds - 1) * sizeof *holds);
                memmove(held, held + 1, (size_t)(nholds - 1) * sizeof *held);
                nholds--;
            }
            uint64_t want = quad_epoch(q);   /* the clean syncs first */
            for (int i = 0; i < nholds; i++) if (held[i] < want) want = held[i];
            double th = (double)(1 + tq_rand() % 4) / 4.0;
            quad_clean_stats cs;
            REQUIRE(quad_clean(q, th, &cs) == 0);
            CHECK_EQ(cs.horizon, want);
            if (cs.chunks_relocated && cs.horizon > gone) gone = cs.horizon;
            relocated += cs.chunks_relocated;
            quad_stats st;
            quad_stats_get(q, &st);
            CHECK_EQ(st.gone_below, gone);
        } else {   /* reopen */
            while (nholds) quad_snapshot_release(holds[--nholds]);
            CHECK_EQ(quad_close(q), 0);
            q = NULL;
            REQUIRE(quad_open(path, &o, &q) == 0);
            quad_stats st;
            quad_stats_get(q, &st);
            CHECK_EQ(st.facts, m.n);
            size_t ret = 0;
            for (size_t i = 0; i < m.n; i++) ret += m.retired[i] != 0;
            CHECK_EQ(st.retired, ret);
            /* the retirement state as loaded (folds at gone_below included)
             * is the model's at the latest epoch and every sampled snapshot
             * still answered; existence checks of every id */
            CHECK_EQ(st.gone_below, gone);
            for (int si = -1; si < (nsnaps < 16 ? nsnaps : 16); si++) {
                uint64_t eff = si < 0 ? quad_epoch(q) : snaps[si];
                if (eff < gone || eff == 0) continue;   /* snapshot 0 reads the latest */
                size_t wrong = 0;
                for (size_t at = 0; at < m.n; at += 5000) {
                    size_t k = m.n - at < 5000 ? m.n - at : 5000;
                    REQUIRE(quad_gather(q, eff, m.ids + at, k, 0, NULL, exists) == 0 || !m.n);
                    for (size_t i = 0; i < k; i++) wrong += exists[i] != model_visible(&m, at + i, eff);
                }
                CHECK_EQ(wrong, 0);
            }
        }
    }
    (void)model_find;
    fprintf(stderr, "  seed %llu: %llu chunk relocations, gone below %llu of %llu epochs\n",
            (unsigned long long)seed, (unsigned long long)relocated, (unsigned long long)gone,
            (unsigned long long)quad_epoch(q));
    while (nholds) quad_snapshot_release(holds[--nholds]);
    quad_close(q);
    free(buf); free(out); free(qids); free(idx); free(present); free(exists);
    free(m.facts); free(m.ids); free(m.added); free(m.retired);
    if (test_current_failed) failures++;
}

static void test_model_default_geometry(void)
{
    for (uint64_t s = 1; s <= 4; s++) run_model(s * 7919, 4096, 256, 1000);
}

static void test_model_small_chunks(void)
{
    for (uint64_t s = 1; s <= 4; s++) run_model(s * 104729, 64, 64, 1000);
    run_model(99, 512, 128, 400);
    run_model(100, 65536, 1024, 200);
}

int main(void)
{
    RUN(test_model_default_geometry);
    RUN(test_model_small_chunks);
    TEST_DONE();
}
