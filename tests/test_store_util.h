/*
 * test_store_util.h: what store tests share: opening a small quiet store, and a
 * store's whole state as text (every database with its kind, every
 * key=value@token, sorted) to compare two stores that must hold the same.
 */
#ifndef HANU_TEST_STORE_UTIL_H
#define HANU_TEST_STORE_UTIL_H

#include "store/store.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 MiB log files, no background compaction, no start-up messages. */
static inline store *test_store_open(const char *dir)
{
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.file_size = 1 << 20;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    char err[512];
    if (store_open(&o, &s, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "  store_open %s: %s\n", dir, err);
        return NULL;
    }
    return s;
}

static inline int strcmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "db key=value@token" lines of every database, sorted, for comparing two stores. */
static inline int dump_line(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    hanu_buf *b = ctx;
    char line[600];
    int n = snprintf(line, sizeof line, "%.*s=%.*s\n", (int)key_len, (const char *)key, (int)value_len,
                     (const char *)value);
    return hanu_buf_append(b, line, (size_t)n);
}

static inline void dump(store *s, hanu_buf *out)
{
    store_db_info infos[32];
    size_t n = store_db_list(s, infos, 32);
    for (size_t i = 0; i < n; i++) {
        hanu_buf keys = { 0 };
        char head[128];
        int hn = snprintf(head, sizeof head, "[%u %s kind %u]\n", infos[i].id, infos[i].name, infos[i].kind);
        hanu_buf_append(out, head, (size_t)hn);
        store_scan(s, infos[i].id, dump_line, &keys);
        /* store_scan's order is the key directory's: sort lines to compare. */
        size_t nl = 0;
        char *lines[4096];
        for (char *p = (char *)keys.data; keys.len && p < (char *)keys.data + keys.len && nl < 4096;) {
            lines[nl++] = p;
            p = memchr(p, '\n', (size_t)((char *)keys.data + keys.len - p)) + 1;
        }
        qsort(lines, nl, sizeof *lines, strcmp_lines);
        for (size_t k = 0; k < nl; k++) {
            size_t len = (size_t)(strchr(lines[k], '\n') - lines[k]) + 1;
            hanu_buf_append(out, lines[k], len);
            /* the token of each key */
            char *eq = memchr(lines[k], '=', len);
            uint64_t token = 0;
            store_lookup(s, infos[i].id, lines[k], (size_t)(eq - lines[k]), &token);
            char t[32];
            int tn = snprintf(t, sizeof t, "@%llu\n", (unsigned long long)token);
            hanu_buf_append(out, t, (size_t)tn);
        }
        hanu_buf_free(&keys);
    }
}

static inline int same_state(store *a, store *b)
{
    hanu_buf da = { 0 }, db = { 0 };
    dump(a, &da);
    dump(b, &db);
    int same = da.len == db.len && da.len && memcmp(da.data, db.data, da.len) == 0;
    if (!same) fprintf(stderr, "  A:\n%.*s  B:\n%.*s", (int)da.len, (char *)da.data, (int)db.len, (char *)db.data);
    hanu_buf_free(&da);
    hanu_buf_free(&db);
    return same;
}

#endif
