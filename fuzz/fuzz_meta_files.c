/*
 * fuzz_meta_files.c: libFuzzer target for the small state files in DATA/meta/
 * (meta/txn: the txn reservation and durable mark; meta/watermarks), read the way
 * start-up reads them. A store with a few keys is made once in /dev/shm; each
 * input's first byte picks the file, the rest replaces it, and the store is
 * opened. It must open (and then every key reads back its value, and a new write
 * gets a txn above every txn ever handed out) or refuse with a message; nothing
 * may crash. Inputs of odd length get a valid checksum, so that the checks after
 * it are reached.
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

enum { KEYS = 20 };
static char dir[128];
static uint8_t saved_txn[64];
static size_t saved_txn_len;
static uint64_t last_txn;

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
    return store_open(&o, &s, err, sizeof err) == HANU_OK ? s : NULL;
}

static void remove_dir(void)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz_meta_files: could not remove %s\n", dir);
}

static void write_file(const char *name, const uint8_t *data, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/meta/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || (len && write(fd, data, len) != (ssize_t)len)) abort();
    close(fd);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/hanudb-fuzz-meta-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    store *s = open_quiet();
    if (!s) abort();
    char k[16];
    for (int i = 0; i < KEYS; i++) {
        snprintf(k, sizeof k, "k%d", i);
        store_op op = { STORE_SET, k, strlen(k), k, strlen(k) };
        if (store_write(s, 0, &op, 1, STORE_COND_NONE, 0, &last_txn, NULL) != HANU_OK) abort();
    }
    store_close(s);
    char path[256];
    snprintf(path, sizeof path, "%s/meta/txn", dir);
    int fd = open(path, O_RDONLY);
    if (fd < 0) abort();
    ssize_t n = read(fd, saved_txn, sizeof saved_txn);
    close(fd);
    if (n <= 0) abort();
    saved_txn_len = (size_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) { setup(); ready = 1; }
    if (size < 1 || size > 4096) return 0;
    int watermarks = data[0] & 1;
    uint8_t buf[4096];
    size_t len = size - 1;
    memcpy(buf, data + 1, len);
    if ((size & 1) && len >= 8) {   /* a valid checksum over what precedes the last 4 bytes */
        hanu_put_u32(buf + len - 4, hanu_checksum32(buf, len - 4));
    }
    write_file(watermarks ? "watermarks" : "txn", buf, len);
    store *s = open_quiet();
    if (s) {
        char k[16];
        for (int i = 0; i < KEYS; i++) {
            snprintf(k, sizeof k, "k%d", i);
            hanu_buf v = {0};
            uint64_t tok;
            assert(store_get(s, 0, k, strlen(k), &v, &tok) == HANU_OK);
            assert(v.len == strlen(k) && memcmp(v.data, k, v.len) == 0);
            hanu_buf_free(&v);
        }
        store_op op = { STORE_SET, "new", 3, "x", 1 };
        uint64_t t;
        assert(store_write(s, 0, &op, 1, STORE_COND_NONE, 0, &t, NULL) == HANU_OK);
        assert(t > last_txn);   /* never a txn handed out before */
        if (t > last_txn) last_txn = t;
        store_close(s);
    }
    /* Put the files back for the next input (start-up rewrote meta/txn). */
    char path[256];
    snprintf(path, sizeof path, "%s/meta/watermarks", dir);
    unlink(path);
    write_file("txn", saved_txn, saved_txn_len);
    return 0;
}
