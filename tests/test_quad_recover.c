/*
 * test_quad_recover: the facts kernel's recovery rules on damaged files: a
 * torn tail (truncated at many offsets, or zeroed in place) loses only the
 * last commit and is repaired; a bit flip before the tail is
 * HANU_ERR_CORRUPT (QUAD_SALVAGE keeps the commits before it); damaged file
 * headers and checkpoint slots; a torn slot sector spares the header. Files are damaged by copying and editing
 * them, as a crash would leave them.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

enum { COMMITS = 6, PER = 700 };
static quad_fact facts[COMMITS * PER];
static quad_id ids[COMMITS * PER];
static uint64_t ends[COMMITS + 1];   /* file_bytes after commit i (ends[0]: empty) */
static char dir[512], base_path[600];

/* Builds a store of COMMITS appends, left as after a crash (copied before
 * close, so no closing checkpoint). All but the last are durable, so the
 * durable mark covers them: damage there is refused, the last frame is the
 * unsynced tail. */
static void build_base(int checkpoint_first)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir("recover"));
    snprintf(base_path, sizeof base_path, "%s/base.quad", dir);
    char live[700];
    snprintf(live, sizeof live, "%s/live.quad", dir);
    quad_options o;
    quad_options_default(&o);
    o.chunk_rows = 256;
    o.microblock_rows = 64;
    quad *q = NULL;
    if (quad_open(live, &o, &q) != 0) { CHECK(0); return; }
    uint64_t ts = 0;
    tq_structured(facts, COMMITS * PER, &ts);
    quad_stats st;
    quad_stats_get(q, &st);
    ends[0] = st.file_bytes;
    for (int c = 0; c < COMMITS; c++) {
        quad_id first;
        CHECK_EQ(quad_append(q, facts + c * PER, PER, c < COMMITS - 1 ? QUAD_DURABLE : QUAD_BUFFERED,
                             &first, NULL), 0);
        for (int i = 0; i < PER; i++) ids[c * PER + i] = quad_batch_id(first, 256, (size_t)i);
        if (c == 1 && checkpoint_first) CHECK_EQ(quad_checkpoint(q), 0);
        quad_stats_get(q, &st);
        ends[c + 1] = st.file_bytes;
    }
    char cmd[1500];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", live, base_path);
    CHECK_EQ(system(cmd), 0);
    quad_close(q);
}

static void copy_to(const char *dst)
{
    char cmd[1500];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", base_path, dst);
    if (system(cmd) != 0) CHECK(0);
}

/* Opens path and checks that exactly the first `commits` appends are there. */
static void expect_commits(const char *path, unsigned flags, int commits)
{
    quad_options o;
    quad_options_default(&o);
    o.flags = flags;
    quad *q = NULL;
    int rc = quad_open(path, &o, &q);
    CHECK_EQ(rc, 0);
    if (rc) return;
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK_EQ(st.facts, (uint64_t)commits * PER);
    static quad_fact out[COMMITS * PER];
    if (commits > 0) {
        CHECK_EQ(quad_gather(q, 0, ids, (size_t)commits * PER, QUAD_LANES_ALL, out, NULL), 0);
        size_t bad = 0;
        for (size_t i = 0; i < (size_t)commits * PER; i++) bad += !tq_fact_eq(&out[i], &facts[i], 0xF);
        CHECK_EQ(bad, 0);
    }
    uint8_t present[1];
    if (commits < COMMITS) {
        CHECK_EQ(quad_gather(q, 0, &ids[commits * PER], 1, QUAD_LANES_ALL, out, present), 0);
        CHECK_EQ(present[0], 0);
    }
    quad_close(q);
}

static void test_recover_torn_tail_truncated(void)
{
    build_base(0);
    char p[700];
    snprintf(p, sizeof p, "%s/torn.quad", dir);
    uint64_t last = ends[COMMITS - 1], end = ends[COMMITS];
    uint64_t cuts[] = { last + 1, last + 31, last + 32, last + 33, last + 100, (last + end) / 2, end - 1 };
    for (size_t i = 0; i < HANU_ARRAY_LEN(cuts); i++) {
        copy_to(p);
        CHECK_EQ(truncate(p, (off_t)cuts[i]), 0);
        expect_commits(p, 0, COMMITS - 1);
        /* the repaired file takes new commits and reopens cleanly */
        quad *q = NULL;
        CHECK_EQ(quad_open(p, NULL, &q), 0);
        if (!q) continue;
        quad_id first;
        CHECK_EQ(quad_append(q, facts, 10, QUAD_DURABLE, &first, NULL), 0);
        CHECK_EQ(QUAD_ID_CHUNK(first), QUAD_ID_CHUNK(ids[(COMMITS - 1) * PER - 1]) + 1);
        quad_close(q);
        q = NULL;
        CHECK_EQ(quad_open(p, NULL, &q), 0);
        quad_stats st;
        if (q) { quad_stats_get(q, &st); CHECK_EQ(st.facts, (COMMITS - 1) * PER + 10); }
        quad_close(q);
    }
    /* cut exactly at a frame boundary before the durable mark: synced
     * commits are gone, which no power loss does: refused (salvage keeps 3) */
    copy_to(p);
    CHECK_EQ(truncate(p, (off_t)ends[3]), 0);
    quad *q = NULL;
    CHECK_EQ(quad_open(p, NULL, &q), HANU_ERR_CORRUPT);
    CHECK(strstr(quad_last_error(), "durable mark") != NULL);
    expect_commits(p, QUAD_SALVAGE, 3);
}

static void patch(const char *p, uint64_t off, const void *bytes, size_t n)
{
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    CHECK_EQ(hanu_pwrite_full(fd, bytes, n, (off_t)off), 0);
    close(fd);
}

static uint8_t peek(const char *p, uint64_t off)
{
    uint8_t b = 0;
    int fd = open(p, O_RDONLY);
    CHECK_EQ(hanu_pread_full(fd, &b, 1, (off_t)off), 0);
    close(fd);
    return b;
}

static void test_recover_torn_tail_zeroed_in_place(void)
{
    build_base(0);
    char p[700];
    snprintf(p, sizeof p, "%s/zero.quad", dir);
    static uint8_t zeros[4096];
    uint64_t last = ends[COMMITS - 1], end = ends[COMMITS];
    copy_to(p);   /* a page of the last frame never reached the disk */
    patch(p, last + (end - last) / 2, zeros, (size_t)HANU_MIN(4096, (end - last) / 3));
    expect_commits(p, 0, COMMITS - 1);
    copy_to(p);   /* the header of the last frame never reached the disk */
    patch(p, last, zeros, 32);
    expect_commits(p, 0, COMMITS - 1);
}

static void test_recover_bit_flip_before_tail_is_corrupt(void)
{
    build_base(0);
    char p[700];
    snprintf(p, sizeof p, "%s/flip.quad", dir);
    uint64_t end_check = ends[COMMITS - 1];   /* flips before the last frame */
    int corrupt = 0, tried = 0;
    for (int t = 0; t < 60; t++) {
        uint64_t off = ends[0] + tq_rand() % (end_check - ends[0]);
        copy_to(p);
        uint8_t b = peek(p, off) ^ (uint8_t)(1u << (tq_rand() % 8));
        patch(p, off, &b, 1);
        quad *q = NULL;
        int rc = quad_open(p, NULL, &q);
        tried++;
        corrupt += rc == HANU_ERR_CORRUPT;
        if (rc == 0) {
            fprintf(stderr, "  flip at %llu not detected\n", (unsigned long long)off);
            quad_close(q);
        }
        /* salvage keeps every commit before the damaged frame */
        int k = 0;
        while (k < COMMITS && ends[k + 1] <= off) k++;
        expect_commits(p, QUAD_SALVAGE, k);
    }
    CHECK_EQ(corrupt, tried);
}

static void test_recover_damaged_headers(void)
{
    build_base(1);
    char p[700];
    snprintf(p, sizeof p, "%s/hdr.quad", dir);
    static uint8_t zeros[64];
    quad *q = NULL;
    copy_to(p);   /* file header zeroed */
    patch(p, 0, zeros, 64);
    CHECK_EQ(quad_open(p, NULL, &q), HANU_ERR_CORRUPT);
    copy_to(p);   /* magic flipped */
    uint8_t b = peek(p, 5) ^ 1;
    patch(p, 5, &b, 1);
    CHECK_EQ(quad_open(p, NULL, &q), HANU_ERR_CORRUPT);
    copy_to(p);   /* a file shorter than its header */
    CHECK_EQ(truncate(p, 100), 0);
    CHECK_EQ(quad_open(p, NULL, &q), HANU_ERR_CORRUPT);
    copy_to(p);   /* both checkpoint slots damaged: full replay still works */
    patch(p, 64, zeros, 64);
    patch(p, 128, zeros, 64);
    expect_commits(p, 0, COMMITS);
    copy_to(p);   /* intact checkpoint: replay starts after it */
    q = NULL;
    CHECK_EQ(quad_open(p, NULL, &q), 0);
    quad_stats st;
    if (q) { quad_stats_get(q, &st); CHECK_EQ(st.recovered_frames, COMMITS - 2); }
    quad_close(q);
    copy_to(p);   /* an empty file and a zeroed header-only file start fresh */
    CHECK_EQ(truncate(p, 0), 0);
    expect_commits(p, 0, 0);
}

/* A torn write of a checkpoint slot may leave its whole 512-byte sector
 * garbage (where sectors are not atomic): that must cost at most that slot.
 * The slots are found by their magic ("QCKP"), so this reads any layout; in
 * version 1 the newest slot shared sector 0 with the file header. */
static void test_recover_torn_slot_sector_keeps_header(void)
{
    build_base(1);
    char p[700];
    snprintf(p, sizeof p, "%s/slot.quad", dir);
    copy_to(p);
    int fd = open(p, O_RDONLY);
    uint8_t h[4096];
    REQUIRE(hanu_pread_full(fd, h, sizeof h, 0) == 0);
    close(fd);
    uint64_t best = 0, seq = 0;
    for (size_t off = 64; off + 64 <= sizeof h; off += 64) {
        if (hanu_get_u32(h + off + 4) != 0x504B4351u) continue;
        if (hanu_get_u64(h + off + 8) >= seq) { seq = hanu_get_u64(h + off + 8); best = off; }
    }
    REQUIRE(best != 0);
    uint8_t garbage[512];
    for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)tq_rand();
    patch(p, best / 512 * 512, garbage, sizeof garbage);
    expect_commits(p, 0, COMMITS);
}

int main(void)
{
    RUN(test_recover_torn_tail_truncated);
    RUN(test_recover_torn_tail_zeroed_in_place);
    RUN(test_recover_bit_flip_before_tail_is_corrupt);
    RUN(test_recover_damaged_headers);
    RUN(test_recover_torn_slot_sector_keeps_header);
    TEST_DONE();
}
