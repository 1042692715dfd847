/*
 * kvstartup.c: start-up time of the key-value store with millions of keys,
 * before and after compaction, and key-directory memory per key.
 *
 *   kvstartup [--dir PATH] [--keys N] [--overwrite-rounds R] [--value-size N] [--json]
 *
 * Fills N keys (16 bytes, as kvbench) in batches, overwrites them R more times so
 * the log holds dead records, then times store_open three ways: scanning the
 * log, after an offline compaction (from hint files), and again warm.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store/store.h"
#include "log/log.h"

/* Opens dir without start-up lines or background compaction; exits on failure. */
static store *open_quiet(const char *dir)
{
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    char err[512];
    if (store_open(&o, &s, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "kvstartup: open: %s\n", err);
        exit(2);
    }
    return s;
}

static double open_ms(const char *dir, store_stats *st)
{
    uint64_t t0 = hanu_now_ns();
    store *s = open_quiet(dir);
    double ms = (double)(hanu_now_ns() - t0) / 1e6;
    store_get_stats(s, st);
    store_close(s);
    return ms;
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp/hanudb-kvstartup";
    uint64_t keys = 2000000, rounds = 1, vsize = 128;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--keys") && i + 1 < argc) keys = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--overwrite-rounds") && i + 1 < argc) rounds = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--value-size") && i + 1 < argc) vsize = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: kvstartup [--dir PATH] [--keys N] [--overwrite-rounds R] "
                            "[--value-size N] [--json]\n");
            return 2;
        }
    }
    if (!keys || vsize > (1 << 20)) { fprintf(stderr, "kvstartup: bad --keys or --value-size\n"); return 2; }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 2;

    store *s = open_quiet(dir);
    char err[512];
    enum { BATCH = 1000 };
    store_op ops[BATCH];
    char (*kbuf)[24] = malloc(BATCH * 24);
    char *val = malloc(vsize);
    memset(val, 'v', vsize);
    uint64_t t0 = hanu_now_ns(), written = 0, total = keys * (rounds + 1);
    for (uint64_t r = 0; r <= rounds; r++) {
        for (uint64_t base = 0; base < keys; base += BATCH) {
            size_t n = 0;
            for (uint64_t k = base; k < keys && n < BATCH; k++, n++) {
                snprintf(kbuf[n], 24, "key-%012llu", (unsigned long long)(k % 1000000000000ull));
                ops[n] = (store_op){ STORE_SET, kbuf[n], 16, val, vsize };
            }
            uint64_t txn;
            if (store_write(s, 0, ops, n, STORE_COND_NONE, 0, &txn, NULL) != HANU_OK) {
                fprintf(stderr, "kvstartup: write failed\n");
                return 2;
            }
            written += n;
            if ((written / BATCH) % 1000 == 0)
                fprintf(stderr, "\rfill: %llu / %llu records", (unsigned long long)written, (unsigned long long)total);
        }
    }
    store_sync(s);
    store_stats st;
    store_get_stats(s, &st);
    fprintf(stderr, "\rfill: %llu records in %.1f s                \n", (unsigned long long)written,
            (double)(hanu_now_ns() - t0) / 1e9);
    store_close(s);

    store_stats scan_st, hint_st, warm_st;
    double scan_ms = open_ms(dir, &scan_st);
    fprintf(stderr, "open by scanning %llu files: %.0f ms\n", (unsigned long long)scan_st.files, scan_ms);
    /* Offline compaction, as `hanudb compact` does it. */
    s = open_quiet(dir);
    t0 = hanu_now_ns();
    store_rotate(s);
    store_sync(s);
    if (store_compact(s, 1, err, sizeof err) != HANU_OK) { fprintf(stderr, "kvstartup: compact: %s\n", err); return 2; }
    double compact_s = (double)(hanu_now_ns() - t0) / 1e9;
    store_close(s);
    double hint_ms = open_ms(dir, &hint_st);
    double warm_ms = open_ms(dir, &warm_st);
    double bytes_per_key = (double)scan_st.memory_bytes / (double)scan_st.keys;
    if (json) {
        printf("{\"keys\":%llu,\"records\":%llu,\"value_size\":%llu,\"disk_bytes_before\":%llu,"
               "\"disk_bytes_after\":%llu,\"startup_scan_ms\":%.1f,\"compact_s\":%.2f,"
               "\"startup_hints_ms\":%.1f,\"startup_hints_warm_ms\":%.1f,\"keydir_bytes_per_key\":%.1f}\n",
               (unsigned long long)keys, (unsigned long long)written, (unsigned long long)vsize,
               (unsigned long long)st.disk_bytes, (unsigned long long)hint_st.disk_bytes, scan_ms, compact_s,
               hint_ms, warm_ms, bytes_per_key);
    } else {
        printf("keys                     %llu (%llu records written)\n", (unsigned long long)keys,
               (unsigned long long)written);
        printf("disk before / after      %.1f MB / %.1f MB\n", (double)st.disk_bytes / 1e6,
               (double)hint_st.disk_bytes / 1e6);
        printf("start-up, scanning log   %.0f ms\n", scan_ms);
        printf("offline compaction       %.2f s\n", compact_s);
        printf("start-up, hint files     %.0f ms (warm: %.0f ms)\n", hint_ms, warm_ms);
        printf("key directory            %.1f bytes/key (16-byte keys)\n", bytes_per_key);
    }
    free(kbuf);
    free(val);
    return 0;
}
