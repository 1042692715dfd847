/*
 * test_index_files.c: the index's deletion lists and commit file read back
 * exactly; damage, a file of another segment or generation, and inconsistent
 * entries are refused; a leftover COMMIT.tmp never replaces the commit.
 */
#include "test.h"
#include "index/index.h"

#include <fcntl.h>

static void flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    uint8_t c;
    if (fd < 0 || pread(fd, &c, 1, at) != 1) abort();
    c ^= 0x20;
    if (pwrite(fd, &c, 1, at) != 1) abort();
    close(fd);
}

static void test_deletion_lists(void)
{
    const char *dir = test_tmpdir("idx-del");
    char path[700];
    static uint32_t ords[5000];
    uint32_t n = 0;
    for (uint32_t o = 3; o < 1000000 && n < 5000; o += 1 + (o * 7919u) % 400) ords[n++] = o;
    uint32_t shapes[][2] = { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 2, 2 }, { 5000, 3 } };   /* count, first */
    for (size_t i = 0; i < HANU_ARRAY_LEN(shapes); i++) {
        snprintf(path, sizeof path, "%s/del-%zu", dir, i);
        uint32_t count = shapes[i][0] < n ? shapes[i][0] : n;
        CHECK_EQ(index_deletes_write(path, 7, (uint32_t)i + 1, ords, count), HANU_OK);
        uint32_t *back, m;
        char err[300];
        CHECK_EQ(index_deletes_read(path, 7, (uint32_t)i + 1, 1000000, &back, &m, err, sizeof err), HANU_OK);
        CHECK_EQ(m, count);
        CHECK(count == 0 || memcmp(back, ords, count * sizeof *ords) == 0);
        free(back);
        CHECK_EQ(index_deletes_read(path, 8, (uint32_t)i + 1, 1000000, &back, &m, err, sizeof err), HANU_ERR_CORRUPT);
        CHECK_EQ(index_deletes_read(path, 7, (uint32_t)i + 2, 1000000, &back, &m, err, sizeof err), HANU_ERR_CORRUPT);
        if (count) CHECK_EQ(index_deletes_read(path, 7, (uint32_t)i + 1, ords[count - 1], &back, &m, err, sizeof err),
                            HANU_ERR_CORRUPT);   /* an ordinal beyond the segment */
        CHECK_EQ(index_deletes_write(path, 7, (uint32_t)i + 1, ords, count), HANU_ERR_EXISTS);
    }
    snprintf(path, sizeof path, "%s/del-unsorted", dir);
    uint32_t unsorted[] = { 5, 5 };
    CHECK_EQ(index_deletes_write(path, 1, 1, unsorted, 2), HANU_ERR_INVALID);
    snprintf(path, sizeof path, "%s/del-4", dir);
    for (off_t at = 0; at < 60; at += 3) {
        flip_byte(path, at);
        uint32_t *back, m;
        CHECK_EQ(index_deletes_read(path, 7, 5, 1000000, &back, &m, NULL, 0), HANU_ERR_CORRUPT);
        flip_byte(path, at);
    }
    uint32_t *back, m;
    CHECK_EQ(index_deletes_read(path, 7, 5, 1000000, &back, &m, NULL, 0), HANU_OK);
    free(back);
}

static void test_commit_round_trip(void)
{
    const char *dir = test_tmpdir("idx-commit");
    index_commit c = { 0 };
    char err[300];
    CHECK_EQ(index_commit_read(dir, &c, err, sizeof err), HANU_ERR_NOT_FOUND);
    index_commit_segment segs[3] = {
        { 1, 4, 1000, 0, 0 }, { 5, 4, 200, 17, 2 }, { 9, 6, 1, 1, 1 },
    };
    index_commit w = { 12345, 10, 3, segs };
    CHECK_EQ(index_commit_write(dir, &w), HANU_OK);
    CHECK_EQ(index_commit_read(dir, &c, err, sizeof err), HANU_OK);
    CHECK_EQ(c.index_txn, 12345);
    CHECK_EQ(c.next_file, 10);
    CHECK_EQ(c.nsegments, 3);
    CHECK(c.segments && memcmp(c.segments, segs, sizeof segs) == 0);
    index_commit_free(&c);

    /* a crash after writing COMMIT.tmp but before the rename: the old commit stands */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s/COMMIT.tmp", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0 && write(fd, "garbage", 7) == 7);
    close(fd);
    CHECK_EQ(index_commit_read(dir, &c, err, sizeof err), HANU_OK);
    CHECK_EQ(c.index_txn, 12345);
    index_commit_free(&c);
    w.index_txn = 20000;   /* the next commit replaces both */
    CHECK_EQ(index_commit_write(dir, &w), HANU_OK);
    CHECK_EQ(access(tmp, F_OK), -1);
    CHECK_EQ(index_commit_read(dir, &c, err, sizeof err), HANU_OK);
    CHECK_EQ(c.index_txn, 20000);
    index_commit_free(&c);

    /* inconsistent entries are refused even with a valid checksum */
    index_commit_segment bad[][2] = {
        { { 5, 1, 10, 0, 0 }, { 5, 1, 10, 0, 0 } },     /* ids not increasing */
        { { 1, 1, 10, 11, 1 }, { 2, 1, 1, 0, 0 } },     /* more deleted than docs */
        { { 1, 1, 10, 3, 0 }, { 2, 1, 1, 0, 0 } },      /* deletions without a file */
        { { 1, 1, 10, 0, 0 }, { 99, 1, 1, 0, 0 } },     /* id not below next_file */
    };
    for (size_t i = 0; i < HANU_ARRAY_LEN(bad); i++) {
        index_commit b = { 1, 10, 2, bad[i] };
        CHECK_EQ(index_commit_write(dir, &b), HANU_OK);
        err[0] = 0;
        CHECK_EQ(index_commit_read(dir, &c, err, sizeof err), HANU_ERR_CORRUPT);
        CHECK(strstr(err, "inconsistent") != NULL);
    }
    CHECK_EQ(index_commit_write(dir, &w), HANU_OK);
    char path[700];
    snprintf(path, sizeof path, "%s/COMMIT", dir);
    for (off_t at = 0; at < 32 + 3 * 24 + 8; at += 5) {
        flip_byte(path, at);
        CHECK_EQ(index_commit_read(dir, &c, NULL, 0), HANU_ERR_CORRUPT);
        flip_byte(path, at);
    }
    CHECK_EQ(index_commit_read(dir, &c, NULL, 0), HANU_OK);
    index_commit_free(&c);
}

int main(void)
{
    RUN(test_deletion_lists);
    RUN(test_commit_round_trip);
    TEST_DONE();
}
