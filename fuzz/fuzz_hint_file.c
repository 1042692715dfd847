/*
 * fuzz_hint_file.c: libFuzzer target for hint files, read the way start-up reads
 * them. A store whose sealed files are compacted (one data file and its hint) is
 * made once, in /dev/shm so that its syncs are cheap; each input replaces that
 * hint file and the store is opened. A hint it refuses must fall back to scanning
 * the data file, so the store always opens and every key reads back the value
 * last written, unless the input carries a valid checksum of its own (a forged
 * hint is not damage a checksum can catch; inputs of odd length get one). Nothing
 * may crash or read out of bounds. A third of the keys carry an expiry (log op 6,
 * whose expiry the hint leaves in the data file), some of them already past: each
 * reads back with its expiry, or absent.
 */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/base.h"
#include "log/log.h"
#include "store/store.h"

enum { KEYS = 200 };
static char dir[128], hint_path[200];
static uint8_t *original;
static size_t original_len;

static store *open_quiet(void)
{
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.prealloc = LOG_PREALLOC_APPEND;
    o.file_size = 64 << 10;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    char err[512];
    int rc = store_open(&o, &s, err, sizeof err);
    if (rc != HANU_OK) fprintf(stderr, "fuzz_hint_file: store_open: %s\n", err);
    return rc == HANU_OK ? s : NULL;
}

static void value_of(int i, char *v, size_t cap) { snprintf(v, cap, "value-%d-%0*d", i, i % 40, 7); }

/* Key i's expiry after the last round: none, far ahead, or past (then it reads absent). */
#define FAR_MS 4102444800000ull
static uint64_t expiry_of(int i) { return i % 3 ? 0 : i % 2 ? 1000 + (uint64_t)i : FAR_MS + (uint64_t)i; }

static int count_key(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    (void)key; (void)key_len; (void)value; (void)value_len;
    (*(int *)ctx)++;
    return 0;
}

static void remove_dir(void)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz_hint_file: could not remove %s\n", dir);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/hanudb-fuzz-hint-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    store *s = open_quiet();
    if (!s) abort();
    char k[32], v[64];
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < KEYS; i++) {
            snprintf(k, sizeof k, "key-%d", i);
            value_of(round == 2 ? i : -i, v, sizeof v);
            store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
            uint64_t txn, expire = round == 2 ? expiry_of(i) : (uint64_t)(i % 2) * FAR_MS;
            if (store_write_expiring(s, 0, &op, &expire, 1, STORE_COND_NONE, 0, &txn, NULL) != HANU_OK) abort();
        }
    store_rotate(s);
    store_sync(s);
    char err[512];
    if (store_compact(s, 1, err, sizeof err) != HANU_OK) abort();
    store_close(s);
    snprintf(hint_path, sizeof hint_path, "%s/log/000001.hint", dir);
    int fd = open(hint_path, O_RDONLY);
    if (fd < 0) abort();
    original_len = (size_t)lseek(fd, 0, SEEK_END);
    original = malloc(original_len);
    if (!original || pread(fd, original, original_len, 0) != (ssize_t)original_len) abort();
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!original) setup();
    /* Inputs of odd length get a correct checksum, so that the checks behind it
       (counts, lengths, offsets) are reached too. */
    uint8_t *hint = malloc(size + 1);
    if (!hint) abort();
    memcpy(hint, data, size);
    if (size >= 5 && size % 2) hanu_put_u32(hint + size - 4, hanu_checksum32(hint, size - 4));
    int fd = open(hint_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || (size && write(fd, hint, size) != (ssize_t)size)) abort();
    close(fd);
    int forged = size >= 4 && !(size == original_len && memcmp(hint, original, size) == 0) &&
                 hanu_get_u32(hint + size - 4) == hanu_checksum32(hint, size - 4);
    free(hint);
    store *s = open_quiet();
    assert(s != NULL);
    char k[32], v[64];
    hanu_buf got = {0};
    int live = 0, scanned = 0;
    for (int i = 0; i < KEYS; i++) {
        snprintf(k, sizeof k, "key-%d", i);
        got.len = 0;
        uint64_t token = 0, expire = 0;
        int rc = store_get(s, 0, k, strlen(k), &got, &token);
        int erc = store_expiry(s, 0, k, strlen(k), &expire, &token);
        if (forged) continue;
        uint64_t want = expiry_of(i);
        if (want && want < FAR_MS) {
            assert(rc == HANU_ERR_NOT_FOUND && erc == HANU_ERR_NOT_FOUND);
            continue;
        }
        value_of(i, v, sizeof v);
        assert(rc == HANU_OK && got.len == strlen(v) && memcmp(got.data, v, got.len) == 0);
        assert(erc == HANU_OK && expire == want);
        live++;
    }
    assert(store_scan(s, 0, count_key, &scanned) == HANU_OK);
    assert(forged || scanned == live);
    hanu_buf_free(&got);
    store_close(s);
    return 0;
}
