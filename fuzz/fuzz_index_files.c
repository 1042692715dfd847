/*
 * fuzz_index_files.c: libFuzzer target for the index's small files, the
 * commit (DIR/COMMIT) and deletion lists (del-<segment>-<generation>), which
 * the indexer reads at every start. The first input byte picks the file, the
 * rest becomes it with its trailing hash patched in (so that the checks behind
 * the checksum are reached). Reading must refuse it with HANU_ERR_CORRUPT or
 * return entries that keep the promises of index.h.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "index/index.h"

static char dir[128], file[200];

static void check_commit(void)
{
    index_commit c;
    char err[200];
    int rc = index_commit_read(dir, &c, err, sizeof err);
    if (rc == HANU_OK) {
        for (uint32_t i = 0; i < c.nsegments; i++) {
            if (i && c.segments[i].segment <= c.segments[i - 1].segment) abort();
            if (c.segments[i].deleted > c.segments[i].docs) abort();
        }
        index_commit_free(&c);
    } else if (rc != HANU_ERR_CORRUPT) {
        abort();
    }
}

static void check_deletes(uint32_t max_ord)
{
    uint32_t *ords = NULL, n = 0;
    char err[200];
    int rc = index_deletes_read(file, 7, 3, max_ord, &ords, &n, err, sizeof err);
    if (rc == HANU_OK) {
        for (uint32_t i = 0; i < n; i++)
            if (ords[i] >= max_ord || (i && ords[i] <= ords[i - 1])) abort();
    } else if (rc != HANU_ERR_CORRUPT) {
        abort();
    }
    free(ords);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/hanudb-fuzz-idx-%d", (int)getpid());
        mkdir(dir, 0755);
    }
    if (size < 1) return 0;
    int is_commit = data[0] & 1;
    uint32_t max_ord = 1u + data[0] * 97u;
    data++;
    size--;
    uint8_t *copy = malloc(size + 8);
    if (!copy) return 0;
    memcpy(copy, data, size);
    hanu_put_u64(copy + size, hanu_hash64(copy, size, 0));
    if (is_commit) snprintf(file, sizeof file, "%s/COMMIT", dir);
    else snprintf(file, sizeof file, "%s/del-7-3", dir);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || hanu_write_full(fd, copy, size + 8) != HANU_OK) abort();
    close(fd);
    if (is_commit) check_commit();
    else check_deletes(max_ord);
    unlink(file);
    free(copy);
    return 0;
}
