/*
 * test_index_util.h: opening a store and its documents indexer the way the
 * index tests do: quiet, no background compaction, and commits only when a
 * test waits for one (the interval is ten minutes away).
 */
#ifndef HANU_TEST_INDEX_UTIL_H
#define HANU_TEST_INDEX_UTIL_H

#include "index/index.h"
#include "store/store.h"

#include <stdio.h>

/* file_size 0: the store's default log file size. NULL on failure (printed). */
static inline store *test_index_store_open(const char *data_dir, uint64_t file_size)
{
    store_options o;
    store_options_default(&o);
    o.data_dir = data_dir;
    if (file_size) o.file_size = file_size;
    o.quiet = 1;
    o.background_compaction = 0;
    char err[512];
    store *s = NULL;
    if (store_open(&o, &s, err, sizeof err) != HANU_OK) fprintf(stderr, "  store: %s\n", err);
    return s;
}

/* The indexer with its index files in index_dir and this merge policy. */
static inline indexer *test_indexer_open(store *st, const char *index_dir, int merge_policy)
{
    indexer_options o;
    indexer_options_default(&o);
    o.dir = index_dir;
    o.commit_interval_ms = 600000;
    o.quiet = 1;
    o.merge_policy = merge_policy;
    char err[512] = "";
    indexer *ix = NULL;
    if (indexer_open(st, &o, &ix, err, sizeof err) != HANU_OK) fprintf(stderr, "  indexer: %s\n", err);
    return ix;
}

#endif
