/*
 * http_index_stats.c: what /_status and /metrics show of the index's merges,
 * its segments per collection and the hot-document cache (docs/INDEX.md,
 * docs/OPERATIONS.md). Called from http_index_status and http_index_metrics.
 */
#include "http_internal.h"
#include "index/index.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_LISTED 4096   /* collections listed one by one; more are summed only */

/* Every collection with indexed documents: name, segments, live documents, bytes. */
typedef struct coll_row {
    char name[STORE_DB_NAME_MAX + 1];
    uint32_t segments;
    uint64_t live_docs, bytes;
} coll_row;

static size_t collection_rows(server *srv, coll_row **out)
{
    *out = NULL;
    size_t n = store_db_list(srv->store, NULL, 0);
    if (n > MAX_LISTED) n = MAX_LISTED;
    store_db_info *infos = calloc(n ? n : 1, sizeof *infos);
    coll_row *rows = calloc(n ? n : 1, sizeof *rows);
    if (!infos || !rows) {
        free(infos);
        free(rows);
        return 0;
    }
    n = HANU_MIN(n, store_db_list(srv->store, infos, n));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (infos[i].kind == STORE_DB_KV) continue;
        coll_row *r = &rows[k];
        indexer_collection_stats(srv->indexer, infos[i].id, &r->segments, &r->live_docs, &r->bytes);
        snprintf(r->name, sizeof r->name, "%s", infos[i].name);
        k++;
    }
    free(infos);
    *out = rows;
    return k;
}

void http_index_more_status(server *srv, json_writer *w)
{
    indexer_stats st;
    indexer_get_stats(srv->indexer, &st);
    const server_json_field f[] = {
        { "merges", st.merges }, { "merges_abandoned", st.merges_abandoned },
        { "merge_bytes", st.merge_bytes }, { "merge_docs", st.merge_docs }, { "merge_ms", st.merge_ms },
        { "rebuild_target_txn", st.rebuild_target_txn },
    };
    server_json_fields(w, f, sizeof f / sizeof *f);
    json_write_key(w, "merging", 7);
    json_write_bool(w, st.merging);
    json_write_key(w, "rebuilt", 7);
    json_write_bool(w, st.rebuilt);
    json_write_key(w, "rebuilding", 10);
    json_write_bool(w, st.rebuilding);
    doc_cache_stats cs;
    indexer_doc_cache_stats(srv->indexer, &cs);
    json_write_key(w, "doc_cache", 9);
    json_write_object_begin(w);
    const server_json_field cf[] = {
        { "hits", cs.hits }, { "misses", cs.misses }, { "bytes", cs.bytes }, { "entries", cs.entries },
        { "budget", cs.budget }, { "evictions", cs.evictions }, { "invalidations", cs.invalidations },
    };
    server_json_fields(w, cf, sizeof cf / sizeof *cf);
    json_write_object_end(w);
    coll_row *rows;
    size_t n = collection_rows(srv, &rows);
    json_write_key(w, "collections", 11);
    json_write_object_begin(w);
    for (size_t i = 0; i < n; i++) {
        json_write_key(w, rows[i].name, strlen(rows[i].name));
        json_write_object_begin(w);
        const server_json_field rf[] = { { "index_segments", rows[i].segments },
                                         { "live_docs", rows[i].live_docs }, { "bytes", rows[i].bytes } };
        server_json_fields(w, rf, sizeof rf / sizeof *rf);
        json_write_object_end(w);
    }
    json_write_object_end(w);
    free(rows);
}

static void metric(hanu_buf *b, const char *name, const char *type, const char *help, uint64_t v)
{
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name,
                     (unsigned long long)v);
    if (n > 0) hanu_buf_append(b, line, HANU_MIN((size_t)n, sizeof line - 1));
}

void http_index_more_metrics(server *srv, hanu_buf *b)
{
    indexer_stats st;
    indexer_get_stats(srv->indexer, &st);
    doc_cache_stats cs;
    indexer_doc_cache_stats(srv->indexer, &cs);
    metric(b, "hanudb_index_merges_total", "counter", "Merges of index segments installed.", st.merges);
    metric(b, "hanudb_index_merges_abandoned_total", "counter", "Merges dropped: failed, or their collection was dropped.",
           st.merges_abandoned);
    metric(b, "hanudb_index_merge_bytes_total", "counter", "Bytes of segments written by merges.", st.merge_bytes);
    metric(b, "hanudb_index_merge_docs_total", "counter", "Documents written by merges.", st.merge_docs);
    char secs[64];
    snprintf(secs, sizeof secs, "%.3f", (double)st.merge_ms / 1000.0);
    char line[512];
    int len = snprintf(line, sizeof line, "# HELP hanudb_index_merge_seconds_total Time spent merging.\n"
                       "# TYPE hanudb_index_merge_seconds_total counter\nhanudb_index_merge_seconds_total %s\n", secs);
    if (len > 0) hanu_buf_append(b, line, HANU_MIN((size_t)len, sizeof line - 1));
    metric(b, "hanudb_index_merging", "gauge", "1 while a merge runs.", (uint64_t)st.merging);
    metric(b, "hanudb_index_rebuilding", "gauge", "1 while the index is rebuilt from the log.", (uint64_t)st.rebuilding);
    metric(b, "hanudb_doc_cache_hits_total", "counter", "Documents served from the hot-document cache.", cs.hits);
    metric(b, "hanudb_doc_cache_misses_total", "counter", "Documents the cache did not hold current.", cs.misses);
    metric(b, "hanudb_doc_cache_bytes", "gauge", "Bytes held by the hot-document cache.", cs.bytes);
    metric(b, "hanudb_doc_cache_evictions_total", "counter", "Copies evicted to stay in budget.", cs.evictions);
    metric(b, "hanudb_doc_cache_invalidations_total", "counter", "Copies dropped by a put or delete.",
           cs.invalidations);
    coll_row *rows;
    size_t n = collection_rows(srv, &rows);
    hanu_buf_append(b, "# HELP hanudb_index_collection_segments Segments of one collection's index.\n"
                       "# TYPE hanudb_index_collection_segments gauge\n",
                    strlen("# HELP hanudb_index_collection_segments Segments of one collection's index.\n"
                           "# TYPE hanudb_index_collection_segments gauge\n"));
    for (size_t i = 0; i < n; i++) {
        len = snprintf(line, sizeof line, "hanudb_index_collection_segments{collection=\"%s\"} %u\n", rows[i].name,
                       rows[i].segments);
        if (len > 0) hanu_buf_append(b, line, HANU_MIN((size_t)len, sizeof line - 1));
    }
    free(rows);
}
