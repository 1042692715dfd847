/*
 * test_quad_clean: the cleaner of the facts kernel (issue 30). Relocated
 * chunks read the same at every snapshot >= the horizon in every lane mask
 * and order (ordered, descending, random, scan, existence), before and after
 * a reopen; ids never change; held snapshots keep their rows; unheld ones
 * below the horizon answer HANU_ERR_GONE; a held stream keeps its frames and
 * an unheld one below the floor gets HANU_ERR_GONE; the old payload bytes are
 * punched (st_blocks falls); a damaged relocation record is refused.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

#define ROWS 4096
#define NCH 12

static char path[600];
static quad_fact *facts;          /* by global index = chunk * ROWS + slot */
static uint64_t *retired_at;      /* 0 = live */
static quad_id first_id;
static size_t nfacts;

static quad *open_store(void)
{
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = ROWS;
    o.cache_bytes = 1 << 20;
    o.checkpoint_bytes = 0;
    quad *q = NULL;
    return quad_open(path, &o, &q) == 0 ? q : NULL;
}

static quad_id id_of(size_t i) { return quad_batch_id(first_id, ROWS, i); }

static int visible(size_t i, uint64_t snap) { return retired_at[i] == 0 || retired_at[i] > snap; }

/* Every id of the store at snap in three orders and all 15 lane masks, plus
 * the existence check and a scan: returns the number of wrong answers. */
static size_t check_all(quad *q, uint64_t snap)
{
    size_t n = nfacts, bad = 0;
    if (snap == 0) snap = quad_epoch(q);   /* what 0 reads: the latest */
    quad_id *ids = malloc(n * sizeof *ids);
    size_t *ix = malloc(n * sizeof *ix);
    quad_fact *out = malloc(n * sizeof *out);
    uint8_t *present = malloc(n);
    for (int order = 0; order < 3; order++) {
        for (size_t k = 0; k < n; k++) ix[k] = order == 1 ? n - 1 - k : k;
        if (order == 2)
            for (size_t k = n - 1; k > 0; k--) {
                size_t j = tq_rand() % (k + 1), t = ix[k];
                ix[k] = ix[j];
                ix[j] = t;
            }
        for (size_t k = 0; k < n; k++) ids[k] = id_of(ix[k]);
        for (unsigned mask = 1; mask <= QUAD_LANES_ALL; mask++) {
            if (order != 2 && mask != QUAD_LANES_ALL && mask != 5) continue;   /* time */
            memset(out, 0, n * sizeof *out);
            if (quad_gather(q, snap, ids, n, mask, out, present) != 0) return n;
            for (size_t k = 0; k < n; k++) {
                int v = visible(ix[k], snap);
                bad += present[k] != v || (v && !tq_fact_eq(&out[k], &facts[ix[k]], mask));
            }
        }
        /* the same request twice more: the second builds row forms, the third reads them */
        for (int rep = 0; rep < 2 && order == 2; rep++) {
            if (quad_gather(q, snap, ids, n, QUAD_LANES_ALL, out, present) != 0) return n;
            for (size_t k = 0; k < n; k++) {
                int v = visible(ix[k], snap);
                bad += present[k] != v || (v && !tq_fact_eq(&out[k], &facts[ix[k]], 0xF));
            }
        }
        if (quad_gather(q, snap, ids, n, 0, NULL, present) != 0) return n;
        for (size_t k = 0; k < n; k++) bad += present[k] != visible(ix[k], snap);
    }
    size_t got = 0, i = 0;
    quad_id from = id_of(0), next;
    for (;;) {
        size_t m;
        if (quad_scan(q, snap, from, QUAD_LANES_ALL, out, ids, 1000, &m, &next) != 0) return n;
        if (m == 0) break;
        for (size_t k = 0; k < m; k++, got++) {
            while (i < n && !visible(i, snap)) i++;
            bad += i >= n || ids[k] != id_of(i) || !tq_fact_eq(&out[k], &facts[i], 0xF);
            i++;
        }
        from = next;
    }
    while (i < n && !visible(i, snap)) i++;
    bad += i != n;
    free(ids); free(ix); free(out); free(present);
    return bad;
}

/* A store of NCH chunks, half structured, half entropy; retires ~90% of
 * chunks 0-5 (random slots) at two epochs and 10% of chunks 6-8. */
static quad *build(void)
{
    snprintf(path, sizeof path, "%s/c.quad", test_tmpdir("clean"));
    quad *q = open_store();
    if (!q) return NULL;
    nfacts = (size_t)NCH * ROWS;
    facts = malloc(nfacts * sizeof *facts);
    retired_at = calloc(nfacts, sizeof *retired_at);
    uint64_t ts = 1;
    tq_structured(facts, nfacts / 2, &ts);
    tq_entropy(facts + nfacts / 2, nfacts / 2);
    /* keep chunk 0's lanes identical with the next rows: a microblock can be constant */
    if (quad_append(q, facts, nfacts, QUAD_BUFFERED, &first_id, NULL) != 0) return NULL;
    return q;
}

static uint64_t retire_some(quad *q, size_t c0, size_t c1, unsigned pct)
{
    quad_id *ids = malloc(nfacts * sizeof *ids);
    size_t *ix = malloc(nfacts * sizeof *ix), k = 0;
    for (size_t i = c0 * ROWS; i < c1 * ROWS; i++)
        if (!retired_at[i] && tq_rand() % 100 < pct) { ix[k] = i; ids[k++] = id_of(i); }
    uint64_t ep = 0;
    if (k && quad_retire(q, ids, k, QUAD_BUFFERED, &ep) == 0)
        for (size_t j = 0; j < k; j++) retired_at[ix[j]] = ep;
    free(ids);
    free(ix);
    return ep;
}

static blkcnt_t blocks(void)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_blocks : -1;
}

static void test_clean_keeps_ids_and_snapshots(void)
{
    tq_rng = 4242;
    quad *q = build();
    REQUIRE(q);
    uint64_t s_appended = quad_epoch(q);
    retire_some(q, 0, 6, 60);
    uint64_t s_mid = quad_epoch(q);
    quad_hold *hold = NULL;
    uint64_t held;
    REQUIRE(quad_snapshot_hold(q, &held, &hold) == 0);
    CHECK_EQ(held, s_mid);
    retire_some(q, 0, 6, 80);      /* about 92% of chunks 0-5 retired in all */
    retire_some(q, 6, 9, 10);
    uint64_t s_last = quad_epoch(q);
    CHECK_EQ(quad_sync(q), 0);
    quad_stats st;
    REQUIRE(quad_stats_get(q, &st) == 0);
    CHECK_EQ(st.reclaim_horizon, s_mid);   /* the hold */
    CHECK_EQ(st.held_snapshots, 1);
    CHECK_EQ(st.gone_below, 0);
    uint64_t payload0 = st.payload_bytes;
    blkcnt_t b0 = blocks();

    /* with the hold, only what was retired at or below s_mid can go */
    quad_clean_stats cs;
    CHECK_EQ(quad_clean(q, 0.5, &cs), 0);
    CHECK_EQ(cs.horizon, s_mid);
    CHECK_EQ(cs.chunks_relocated, 6);   /* ~60% retired at s_mid: below half live */
    CHECK_EQ(check_all(q, s_mid), 0);
    CHECK_EQ(check_all(q, s_last), 0);
    CHECK_EQ(quad_gather(q, s_appended, &first_id, 1, QUAD_LANES_ALL, facts, NULL), HANU_ERR_GONE);
    CHECK_EQ(quad_gather(q, s_appended, &first_id, 1, 0, NULL, NULL), HANU_ERR_GONE);
    quad_snapshot_release(hold);

    /* without it, the rest of chunks 0-5 */
    CHECK_EQ(quad_clean(q, 0.5, &cs), 0);
    CHECK_EQ(cs.horizon, s_last);
    CHECK_EQ(cs.chunks_relocated, 6);
    CHECK(cs.rows_dropped > (uint64_t)6 * ROWS * 3 / 10);
    CHECK_EQ(check_all(q, s_last), 0);
    CHECK_EQ(check_all(q, 0), 0);
    size_t m;
    quad_id next;
    quad_fact one;
    CHECK_EQ(quad_scan(q, s_mid, first_id, 1, &one, NULL, 1, &m, &next), HANU_ERR_GONE);
    REQUIRE(quad_stats_get(q, &st) == 0);
    CHECK_EQ(st.gone_below, s_last);
    CHECK_EQ(st.log_floor, s_last + 1);
    CHECK_EQ(st.relocated_chunks, 6);
    CHECK(st.payload_bytes < payload0);
    if (!cs.punch_unsupported) CHECK(cs.bytes_punched > 0);
    (void)b0;
    /* chunks 6-8 (10% retired) stayed: a threshold of 1 takes them too */
    CHECK_EQ(quad_clean(q, 1.0, &cs), 0);
    CHECK_EQ(cs.chunks_relocated, 3);
    CHECK_EQ(check_all(q, 0), 0);

    /* after a reopen (from the checkpoint the clean wrote) and after a full
     * replay of the log since (a retire and an append after it) */
    CHECK_EQ(quad_close(q), 0);
    REQUIRE((q = open_store()) != NULL);
    CHECK_EQ(check_all(q, 0), 0);
    REQUIRE(quad_stats_get(q, &st) == 0);
    CHECK_EQ(st.gone_below, s_last);
    CHECK_EQ(st.relocated_chunks, 9);
    CHECK_EQ(quad_gather(q, s_mid, &first_id, 1, 0, NULL, NULL), HANU_ERR_GONE);
    uint64_t s_more = retire_some(q, 0, 12, 50);
    CHECK_EQ(quad_sync(q), 0);
    CHECK_EQ(quad_clean(q, 0.9, &cs), 0);
    CHECK(cs.chunks_relocated >= 9);    /* relocated a second time, and chunks 9-11 */
    CHECK_EQ(check_all(q, s_more), 0);
    CHECK_EQ(quad_close(q), 0);
    REQUIRE((q = open_store()) != NULL);
    CHECK_EQ(check_all(q, 0), 0);
    quad_close(q);
    free(facts);
    free(retired_at);
}

/* 90% of the entropy chunks (32 bytes a fact) retired: the clean gives back
 * most of their blocks, the checkpoints it writes included. */
static void test_clean_returns_space(void)
{
    tq_rng = 5150;
    quad *q = build();
    REQUIRE(q);
    retire_some(q, NCH / 2, NCH, 90);
    CHECK_EQ(quad_checkpoint(q), 0);
    blkcnt_t b0 = blocks();
    quad_clean_stats cs;
    CHECK_EQ(quad_clean(q, 0.5, &cs), 0);
    CHECK_EQ(cs.chunks_relocated, NCH / 2);
    blkcnt_t b1 = blocks();
    fprintf(stderr, "  st_blocks %lld -> %lld, payload %llu -> %llu bytes, %llu punched\n",
            (long long)b0, (long long)b1, (unsigned long long)cs.bytes_before,
            (unsigned long long)cs.bytes_after, (unsigned long long)cs.bytes_punched);
    if (cs.punch_unsupported) {
        fprintf(stderr, "  (the file system of TMPDIR cannot punch holes)\n");
    } else {
        /* the entropy payloads are 6 x 128 KiB; 10% of them stay */
        CHECK(cs.bytes_punched > (uint64_t)(NCH / 2) * ROWS * 32 * 8 / 10);
        CHECK((b0 - b1) * 512 > (blkcnt_t)(NCH / 2) * ROWS * 32 * 7 / 10);
    }
    CHECK_EQ(check_all(q, 0), 0);
    quad_close(q);
    /* with both checkpoint slots damaged a full replay would need the punched
     * append frames: refused, not read as zeros */
    if (!cs.punch_unsupported) {
        int fd = open(path, O_RDWR);
        uint8_t zero[64] = { 0 };
        CHECK(fd >= 0 && pwrite(fd, zero, 64, 512) == 64 && pwrite(fd, zero, 64, 1024) == 64);
        close(fd);
        quad_options o;
        quad_options_default(&o);
        o.chunk_rows = ROWS;
        CHECK_EQ(quad_open(path, &o, &q), HANU_ERR_CORRUPT);
    }
    free(facts);
    free(retired_at);
}

/* A held stream keeps what it has not read; an unheld one below the floor is GONE. */
static void test_clean_and_streams(void)
{
    tq_rng = 777;
    quad *q = build();
    REQUIRE(q);
    quad_stream *held = NULL, *unheld = NULL;
    REQUIRE(quad_stream_open(q, 1, QUAD_LANES_ALL | QUAD_STREAM_HOLD, &held) == 0);
    REQUIRE(quad_stream_open(q, 1, QUAD_LANES_ALL, &unheld) == 0);
    uint64_t e2 = retire_some(q, 0, 6, 95);
    CHECK_EQ(quad_sync(q), 0);
    quad_clean_stats cs;
    CHECK_EQ(quad_clean(q, 0.5, &cs), 0);
    CHECK_EQ(cs.horizon, 0);            /* the held stream is at epoch 1 */
    CHECK_EQ(cs.chunks_relocated, 0);
    quad_commit c;
    CHECK_EQ(quad_stream_next(held, 0, &c), 1);   /* the append, every fact as written */
    CHECK_EQ(c.n, nfacts);
    size_t bad = 0;
    for (size_t i = 0; i < c.n; i++) bad += c.ids[i] != id_of(i) || !tq_fact_eq(&c.facts[i], &facts[i], 0xF);
    CHECK_EQ(bad, 0);
    CHECK_EQ(quad_clean(q, 0.5, &cs), 0);
    CHECK_EQ(cs.horizon, 1);            /* below the retire the stream has not read */
    CHECK_EQ(cs.chunks_relocated, 0);
    CHECK_EQ(quad_stream_next(held, 0, &c), 1);   /* the retire, with the lanes at e2 - 1 */
    CHECK_EQ(c.epoch, e2);
    bad = 0;
    for (size_t i = 0; i < c.n; i++) {
        size_t gi = (size_t)(QUAD_ID_CHUNK(c.ids[i]) - QUAD_ID_CHUNK(first_id)) * ROWS + QUAD_ID_SLOT(c.ids[i]);
        bad += retired_at[gi] != e2 || !tq_fact_eq(&c.facts[i], &facts[gi], 0xF);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(quad_clean(q, 0.5, &cs), 0);
    CHECK_EQ(cs.horizon, e2);
    CHECK_EQ(cs.chunks_relocated, 6);
    CHECK_EQ(quad_stream_next(unheld, 0, &c), HANU_ERR_GONE);
    quad_stream *again = NULL;
    CHECK_EQ(quad_stream_open(q, e2, 0, &again), HANU_ERR_GONE);
    CHECK_EQ(quad_stream_open(q, e2 + 1, QUAD_STREAM_HOLD, &again), 0);
    quad_stream_close(again);
    /* a retire after the clean: a stream from it starts at the punched
     * append (the last one before it) and steps over the punched frames */
    size_t gi = 0;
    while (retired_at[gi]) gi++;
    quad_id rid = id_of(gi);
    uint64_t er;
    REQUIRE(quad_retire(q, &rid, 1, QUAD_DURABLE, &er) == 0);
    retired_at[gi] = er;
    CHECK_EQ(quad_stream_open(q, er, QUAD_LANES_ALL, &again), 0);
    CHECK_EQ(quad_stream_next(again, 0, &c), 1);
    CHECK_EQ(c.epoch, er);
    CHECK(c.n == 1 && c.ids[0] == rid && tq_fact_eq(&c.facts[0], &facts[gi], 0xF));
    quad_stream_close(again);
    CHECK_EQ(quad_stream_next(held, 0, &c), 1);
    CHECK_EQ(c.epoch, er);
    CHECK_EQ(check_all(q, 0), 0);
    /* commits after the clean stream as before */
    quad_fact f = { { 1, 2, 3, 4 } };
    quad_id id;
    uint64_t e3;
    REQUIRE(quad_append(q, &f, 1, QUAD_DURABLE, &id, &e3) == 0);
    CHECK_EQ(quad_stream_next(held, 0, &c), 1);
    CHECK_EQ(c.epoch, e3);
    CHECK_EQ(c.n, 1);
    quad_stream_close(held);
    quad_stream_close(unheld);
    quad_close(q);
    free(facts);
    free(retired_at);
}

/* Finds the first frame of type t in the file; its offset or 0. */
static uint64_t find_frame(int fd, unsigned t)
{
    uint64_t off = 4096;
    uint8_t h[40];
    while (pread(fd, h, 40, (off_t)off) == 40 && hanu_get_u32(h + 4) == 0x4D524651u) {
        if (h[12] == t) return off;
        off += 40 + hanu_get_u32(h + 8);
    }
    return 0;
}

/* Rewrites the body checksum and the header checksum of the frame at off. */
static void frame_fix(int fd, uint64_t off)
{
    uint8_t h[40];
    if (pread(fd, h, 40, (off_t)off) != 40) return;
    uint32_t len = hanu_get_u32(h + 8);
    uint8_t *b = malloc(len);
    if (pread(fd, b, len, (off_t)off + 40) != (ssize_t)len) { free(b); return; }
    hanu_put_u32(h + 32, hanu_checksum32(b, len));
    hanu_put_u32(h, hanu_checksum32(h + 4, 36));
    if (pwrite(fd, h, 40, (off_t)off) != 40) perror("pwrite");
    free(b);
}

/* Argument errors, and a clean that finds nothing to do changes nothing. */
static void test_clean_arguments(void)
{
    tq_rng = 11;
    quad *q = build();
    REQUIRE(q);
    quad_clean_stats cs;
    CHECK_EQ(quad_clean(NULL, 0.5, &cs), HANU_ERR_INVALID);
    CHECK_EQ(quad_clean(q, 0.0, &cs), HANU_ERR_INVALID);
    CHECK_EQ(quad_clean(q, 1.5, &cs), HANU_ERR_INVALID);
    CHECK_EQ(quad_clean(q, NAN, &cs), HANU_ERR_INVALID);
    quad_hold *h;
    uint64_t e;
    CHECK_EQ(quad_snapshot_hold(NULL, &e, &h), HANU_ERR_INVALID);
    CHECK_EQ(quad_snapshot_hold(q, NULL, &h), HANU_ERR_INVALID);
    quad_snapshot_release(NULL);
    CHECK_EQ(quad_clean(q, 1.0, &cs), 0);   /* nothing retired */
    CHECK_EQ(cs.chunks_relocated, 0);
    quad_stats st;
    REQUIRE(quad_stats_get(q, &st) == 0);
    CHECK_EQ(st.gone_below, 0);
    CHECK_EQ(st.log_floor, 1);
    CHECK_EQ(st.reclaim_horizon, quad_epoch(q));
    CHECK_EQ(quad_close(q), 0);
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = ROWS;
    o.flags = QUAD_RDONLY;
    REQUIRE(quad_open(path, &o, &q) == 0);
    CHECK_EQ(quad_clean(q, 0.5, &cs), HANU_ERR_INVALID);
    quad_close(q);
    free(facts);
    free(retired_at);
}

/* Readers during cleans: two threads gather at the latest snapshot (random
 * and ordered requests, all lanes and lane 2, the existence check) while the
 * main thread retires and cleans, swapping chunk payloads under them. Every
 * present fact must have its lanes; every retired-before-the-call id must be
 * absent. Under ASan this also checks that no reader touches a freed payload
 * description or cache entry. */
typedef struct rctx {
    quad *q;
    _Atomic int stop;
    _Atomic uint64_t safe_epoch;   /* retirements at or below it are in retired_at */
    size_t calls, bad;
    uint64_t seed;
} rctx;

static void *clean_reader(void *arg)
{
    rctx *r = arg;
    quad_id ids[4096];
    size_t ix[4096];
    quad_fact out[4096];
    uint8_t present[4096];
    uint64_t s = r->seed;
    while (!atomic_load(&r->stop)) {
        int random = (int)(r->calls % 3);
        size_t start = (size_t)(s % (nfacts - 4096));
        for (size_t k = 0; k < 4096; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            ix[k] = random ? (size_t)(s % nfacts) : start + k;
            ids[k] = id_of(ix[k]);
        }
        uint64_t known = atomic_load(&r->safe_epoch);
        unsigned mask = random == 2 ? QUAD_LANE(2) : QUAD_LANES_ALL;
        if (quad_gather(r->q, 0, ids, 4096, mask, out, present) != 0) { r->bad++; break; }
        for (size_t k = 0; k < 4096; k++) {
            uint64_t e = retired_at[ix[k]];
            if (present[k] && !tq_fact_eq(&out[k], &facts[ix[k]], mask)) r->bad++;
            if (present[k] && e && e <= known) r->bad++;
        }
        if (quad_gather(r->q, 0, ids, 4096, 0, NULL, present) != 0) r->bad++;
        r->calls++;
    }
    return NULL;
}

static void test_readers_during_clean(void)
{
    tq_rng = 31337;
    quad *q = build();
    REQUIRE(q);
    retire_some(q, 0, 1, 1);   /* readers take the retirement lock from the start */
    rctx r[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        memset(&r[t], 0, sizeof r[t]);
        r[t].q = q;
        r[t].seed = 0xABCDEFULL * (uint64_t)(t + 1);
        atomic_store(&r[t].safe_epoch, quad_epoch(q));
        pthread_create(&th[t], NULL, clean_reader, &r[t]);
    }
    size_t relocated = 0;
    for (int round = 0; round < 8; round++) {
        uint64_t e = retire_some(q, (size_t)round % NCH, NCH, 30);
        for (int t = 0; t < 2; t++) atomic_store(&r[t].safe_epoch, e);
        quad_clean_stats cs;
        CHECK_EQ(quad_clean(q, round & 1 ? 1.0 : 0.8, &cs), 0);
        relocated += cs.chunks_relocated;
        if (round == 4) quad_cache_drop(q);
    }
    for (int t = 0; t < 2; t++) {
        atomic_store(&r[t].stop, 1);
        pthread_join(th[t], NULL);
        CHECK_EQ(r[t].bad, 0);
        CHECK(r[t].calls > 0);
    }
    fprintf(stderr, "  %zu chunk relocations under %zu + %zu reader calls\n", relocated, r[0].calls, r[1].calls);
    CHECK(relocated >= NCH);
    CHECK_EQ(check_all(q, 0), 0);
    quad_close(q);
    free(facts);
    free(retired_at);
}

/* This binary interposes fdatasync (the library's calls resolve here): while
 * `side_path` is set, the first sync of the store whose file holds a
 * relocation frame copies the file there first, i.e. the file as a crash
 * right after the clean's step 2 leaves it (before its checkpoints). */
static char side_path[700];
static int side_done;

int fdatasync(int fd)
{
    struct stat a, b;
    if (side_path[0] && !side_done && fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
        find_frame(fd, 4)) {
        int out = open(side_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        uint8_t *buf = malloc((size_t)a.st_size);
        if (out < 0 || !buf || pread(fd, buf, (size_t)a.st_size, 0) != a.st_size ||
            pwrite(out, buf, (size_t)a.st_size, 0) != a.st_size) { perror("side copy"); exit(2); }
        free(buf);
        close(out);
        side_done = 1;
    }
    return (int)syscall(SYS_fdatasync, fd);
}

/* Relocation frames replayed from the log: the file as it was when the
 * clean's relocation frames were synced, before its checkpoints. Intact, the
 * store reads the same; a record that drops a live slot, or miscounts its
 * rows, is HANU_ERR_CORRUPT (with valid checksums). */
static void test_relocation_replay_and_damage(void)
{
    for (int variant = 0; variant < 3; variant++) {
        tq_rng = 99 + (uint64_t)variant;
        quad *q = build();
        REQUIRE(q);
        retire_some(q, 0, 2, 90);
        CHECK_EQ(quad_checkpoint(q), 0);
        snprintf(side_path, sizeof side_path, "%s.side", path);
        side_done = 0;
        quad_clean_stats cs;
        CHECK_EQ(quad_clean(q, 0.5, &cs), 0);
        CHECK_EQ(cs.chunks_relocated, 2);
        quad_close(q);
        REQUIRE(side_done);
        REQUIRE(rename(side_path, path) == 0);
        side_path[0] = 0;
        int fd = open(path, O_RDWR);
        REQUIRE(fd >= 0);
        uint64_t off = find_frame(fd, 4);
        REQUIRE(off);
        uint8_t body[24 + 64 * 8];
        REQUIRE(pread(fd, body, sizeof body, (off_t)off + 40) == (ssize_t)sizeof body);
        if (variant == 1) {   /* clear a kept bit: drops a slot that is live */
            for (int w = 0; w < 64; w++) {
                uint64_t x = hanu_get_u64(body + 24 + 8 * w);
                if (x) { hanu_put_u64(body + 24 + 8 * w, x & (x - 1)); break; }
            }
        } else if (variant == 2) {
            hanu_put_u32(body + 20, hanu_get_u32(body + 20) + 1);   /* the live count */
        }
        REQUIRE(pwrite(fd, body, sizeof body, (off_t)off + 40) == (ssize_t)sizeof body);
        frame_fix(fd, off);
        close(fd);
        quad *r = open_store();
        if (variant == 0) {
            REQUIRE(r != NULL);
            quad_stats st;
            REQUIRE(quad_stats_get(r, &st) == 0);
            CHECK_EQ(st.relocated_chunks, 2);
            CHECK_EQ(check_all(r, 0), 0);
        } else {
            CHECK(r == NULL);
            CHECK(strstr(quad_last_error(), "relocate") != NULL);
        }
        quad_close(r);
        free(facts);
        free(retired_at);
    }
}


/* Reads the checkpoint bytes quad_stats reports. */
static uint64_t ckpt_bytes(quad *q)
{
    quad_stats st;
    return quad_stats_get(q, &st) == 0 ? st.checkpoint_bytes : 0;
}

static size_t count_retired(uint64_t lo, uint64_t hi)
{
    size_t k = 0;
    for (size_t i = 0; i < nfacts; i++) k += retired_at[i] >= lo && retired_at[i] <= hi && retired_at[i];
    return k;
}

/* Folds: a checkpoint after a clean stores the retirements at or below
 * gone_below of chunks not relocated as a bitmap (about 1/8 byte a fact
 * instead of a 16-byte pair); above it, pairs. After a reopen every snapshot
 * the store still answers reads the same (the held one at the horizon too,
 * once the hold is gone), below it HANU_ERR_GONE, and the cleaner counts the
 * folded rows as droppable. */
static void test_folds(void)
{
    tq_rng = 7070;
    quad *q = build();
    REQUIRE(q);
    CHECK_EQ(quad_checkpoint(q), 0);
    uint64_t b_dir = ckpt_bytes(q);   /* the chunk directory alone */
    uint64_t s_app = quad_epoch(q);
    retire_some(q, 0, 1, 100);        /* chunk 0: relocated below */
    retire_some(q, 1, NCH, 50);
    uint64_t s1 = quad_epoch(q);
    quad_hold *hold = NULL;
    uint64_t held;
    REQUIRE(quad_snapshot_hold(q, &held, &hold) == 0);
    retire_some(q, 1, NCH, 20);       /* above the horizon: pairs */
    uint64_t s2 = quad_epoch(q);
    CHECK_EQ(quad_checkpoint(q), 0);
    uint64_t b_pairs = ckpt_bytes(q);
    size_t ret_all = count_retired(1, s2), below = count_retired(1, s1), above = ret_all - below;
    CHECK_EQ(b_pairs, b_dir + 16 * ret_all);   /* no clean yet: nothing folded */

    quad_clean_stats cs;
    CHECK_EQ(quad_clean(q, 0.1, &cs), 0);
    CHECK_EQ(cs.horizon, s1);
    CHECK_EQ(cs.chunks_relocated, 1);
    quad_snapshot_release(hold);
    CHECK_EQ(quad_checkpoint(q), 0);
    uint64_t b_fold = ckpt_bytes(q);
    /* chunk 0's entry lost its descriptors and gained its kept-slot bitmap;
     * chunks 1-11 hold one fold each (16 + 512 bytes) and pairs above s1 */
    uint64_t folds = (uint64_t)(NCH - 1) * (16 + ROWS / 8);
    CHECK(b_fold <= b_dir + 24 + ROWS / 8 + folds + 16 * above);
    CHECK(b_fold + 2000 >= b_dir + folds + 16 * above);
    uint64_t folded_bytes = b_fold - 16 * above - b_dir;
    fprintf(stderr, "  checkpoint %llu -> %llu bytes; %zu retired at or below the horizon take %.3f bytes each\n",
            (unsigned long long)b_pairs, (unsigned long long)b_fold, below, (double)folded_bytes / (double)below);
    CHECK(folded_bytes * 3 < below);   /* under 1/3 byte a fact (16 without folds) */

    /* identical before and after a reopen at every snapshot still answered */
    for (uint64_t s = s1; s <= s2; s++) CHECK_EQ(check_all(q, s), 0);
    CHECK_EQ(quad_close(q), 0);
    REQUIRE((q = open_store()) != NULL);
    quad_stats st;
    REQUIRE(quad_stats_get(q, &st) == 0);
    CHECK_EQ(st.recovered_frames, 0);   /* loaded from the checkpoint alone */
    CHECK_EQ(st.gone_below, s1);
    CHECK_EQ(st.retired, ret_all);
    CHECK_EQ(st.checkpoint_bytes, b_fold);
    for (uint64_t s = s1; s <= s2; s++) CHECK_EQ(check_all(q, s), 0);
    CHECK_EQ(quad_gather(q, s_app, &first_id, 1, 0, NULL, NULL), HANU_ERR_GONE);

    /* the folds are the cleaner's input: every folded row is droppable */
    CHECK_EQ(quad_clean(q, 1.0, &cs), 0);
    CHECK_EQ(cs.chunks_relocated, NCH - 1);
    CHECK_EQ(cs.rows_dropped, ret_all - ROWS);
    CHECK_EQ(check_all(q, 0), 0);
    CHECK_EQ(quad_close(q), 0);
    REQUIRE((q = open_store()) != NULL);
    CHECK_EQ(check_all(q, 0), 0);
    quad_close(q);
    free(facts);
    free(retired_at);
}

/* A fold whose horizon is past its checkpoint's epoch (valid checksums):
 * the checkpoint is refused; after a clean that punched the log, so is the
 * store (HANU_ERR_CORRUPT), else the full replay reads the same. */
static void test_fold_damage(void)
{
    tq_rng = 8080;
    quad *q = build();
    REQUIRE(q);
    retire_some(q, 0, 1, 100);
    retire_some(q, 1, 3, 50);
    quad_clean_stats cs;
    CHECK_EQ(quad_clean(q, 0.1, &cs), 0);
    CHECK_EQ(cs.chunks_relocated, 1);
    uint64_t h = cs.horizon;
    CHECK_EQ(quad_close(q), 0);
    int fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    struct stat sb;
    REQUIRE(fstat(fd, &sb) == 0);
    uint8_t *all = malloc((size_t)sb.st_size);
    REQUIRE(pread(fd, all, (size_t)sb.st_size, 0) == sb.st_size);
    /* the last checkpoint part is the newest: find its fold of chunk 1 */
    uint64_t off = 4096, last = 0;
    while (off + 40 <= (uint64_t)sb.st_size && hanu_get_u32(all + off + 4) == 0x4D524651u) {
        if (all[off + 12] == 5) last = off;
        off += 40 + hanu_get_u32(all + off + 8);
    }
    REQUIRE(last);
    uint64_t at = 0;
    for (uint64_t p = last + 40; p + 16 <= last + 40 + hanu_get_u32(all + last + 8); p++)
        if (hanu_get_u64(all + p) == 1 && hanu_get_u64(all + p + 8) == h) { at = p; break; }
    REQUIRE(at);
    uint8_t hb[8];
    hanu_put_u64(hb, hanu_get_u64(all + last + 16) + 1);   /* past the checkpoint's epoch */
    REQUIRE(pwrite(fd, hb, 8, (off_t)at + 8) == 8);
    frame_fix(fd, last);
    close(fd);
    free(all);
    quad *r = open_store();
    if (cs.punch_unsupported) {
        REQUIRE(r != NULL);
        CHECK_EQ(check_all(r, 0), 0);
        quad_close(r);
    } else {
        CHECK(r == NULL);
    }
    free(facts);
    free(retired_at);
}

/* A store written before folds (tests/data/quad-ckpt3, type 3 checkpoint
 * parts): read as it was, then checkpointed with folds and read the same. */
static uint64_t old_retired_at(int i)
{
    if (i < 64 || i % 3 == 0) return 2;
    if (i % 5 == 0) return 3;
    return i % 7 == 0 ? 4 : 0;
}

static size_t old_check(quad *q, uint64_t snap)
{
    size_t bad = 0;
    for (int i = 0; i < 512; i++) {
        quad_id id = QUAD_ID((uint64_t)(i / 64), (uint32_t)(i % 64));
        quad_fact f;
        uint8_t pr = 9;
        if (quad_gather(q, snap, &id, 1, QUAD_LANES_ALL, &f, &pr) != 0) return 512;
        uint64_t e = old_retired_at(i);
        int v = e == 0 || e > snap;
        bad += pr != v || (v && (f.lane[0] != (uint64_t)i || f.lane[1] != (uint64_t)i * 3 ||
                                 f.lane[2] != (uint64_t)i * 7 || f.lane[3] != 1));
    }
    return bad;
}

static void test_old_checkpoint(void)
{
    snprintf(path, sizeof path, "%s/old.quad", test_tmpdir("clean"));
    FILE *in = fopen("tests/data/quad-ckpt3/store.quad", "rb"), *out = fopen(path, "wb");
    REQUIRE(in && out);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0) REQUIRE(fwrite(buf, 1, k, out) == k);
    fclose(in);
    fclose(out);
    quad_options o;
    quad_options_default(&o);
    o.checkpoint_bytes = 0;
    quad *q = NULL;
    REQUIRE(quad_open(path, &o, &q) == 0);
    quad_stats st;
    REQUIRE(quad_stats_get(q, &st) == 0);
    CHECK_EQ(st.recovered_frames, 0);
    CHECK_EQ(st.epoch, 4);
    CHECK_EQ(st.gone_below, 3);
    CHECK_EQ(st.relocated_chunks, 1);
    size_t nret = 0;
    for (int i = 0; i < 512; i++) nret += old_retired_at(i) != 0;
    CHECK_EQ(st.retired, nret);
    CHECK_EQ(old_check(q, 3), 0);
    CHECK_EQ(old_check(q, 4), 0);
    uint64_t old_bytes = st.checkpoint_bytes;
    /* a retire makes the close write a checkpoint of the new kind */
    quad_id id = QUAD_ID(7, 61);   /* i = 509: live so far */
    CHECK_EQ(old_retired_at(509), 0);
    CHECK_EQ(quad_retire(q, &id, 1, QUAD_BUFFERED, NULL), 0);
    CHECK_EQ(quad_close(q), 0);
    REQUIRE(quad_open(path, &o, &q) == 0);
    REQUIRE(quad_stats_get(q, &st) == 0);
    CHECK_EQ(st.recovered_frames, 0);
    CHECK_EQ(st.retired, nret + 1);
    CHECK_EQ(st.gone_below, 3);
    CHECK(st.checkpoint_bytes < old_bytes);   /* chunks 1-7 folded at 3 */
    CHECK_EQ(old_check(q, 3), 0);
    CHECK_EQ(old_check(q, 4), 0);
    CHECK_EQ(quad_gather(q, 2, &id, 1, 0, NULL, NULL), HANU_ERR_GONE);
    quad_close(q);
}

int main(void)
{
    RUN(test_old_checkpoint);
    RUN(test_folds);
    RUN(test_fold_damage);
    RUN(test_clean_keeps_ids_and_snapshots);
    RUN(test_clean_returns_space);
    RUN(test_clean_and_streams);
    RUN(test_relocation_replay_and_damage);
    RUN(test_readers_during_clean);
    RUN(test_clean_arguments);
    TEST_DONE();
}
