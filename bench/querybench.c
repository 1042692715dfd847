/*
 * querybench: the index's CPU per query without a server (issue 25): docbench's
 * find (user = X sorted by ts descending, limit 20) and search (one vocabulary
 * word, uniform or Zipf, filter kind = Y, limit 10, count up to 1000) run
 * in-process on a data directory that a docbench write phase filled, so that
 * neither HTTP, the network nor the other engineers' load on the client's core
 * blurs a change of a few microseconds. Time is the thread's CPU time over
 * every query (parsing excluded: the filter, sort and words are parsed once
 * before); queries come from a fixed seed, so two builds run the same ones.
 * The checksum covers every answer (ids, scores, count, count relation): two
 * builds that print different checksums gave different answers.
 *   querybench --data DIR [--collection bench] [--op find|search]
 *              [--search-words uniform|zipf] [--queries N] [--rounds N] [--seed N]
 *              [--track-total N]
 * --track-total: the search's count limit (default 1000, as track_total's).
 * The data directory is opened as the server opens it (its log is replayed, the
 * index read and caught up): no server may run on it at the same time.
 */
#include "index/index.h"
#include "json/json.h"
#include "query/query.h"
#include "store/store.h"
#include "docgen.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FIND_LIMIT 20
#define SEARCH_LIMIT 10
#define SEARCH_TRACK_TOTAL 1000   /* the default of track_total (docs/QUERY.md) */
#define MAX_QUERIES 1000000

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

typedef struct query {
    filter *f;
    sort_spec sort;
    search_query q;
} query;

static int parse_query(const struct docgen *g, uint64_t *rng, int search, int zipf, query *out)
{
    char body[128];
    query_error qe;
    memset(out, 0, sizeof *out);
    if (!search) {
        char user[8];
        docgen_user(docgen_below(rng, DOCGEN_USERS), user);
        int n = snprintf(body, sizeof body, "{\"user\":\"%s\"}", user);
        json_doc *sd = NULL;
        if (filter_parse(body, (size_t)n, "filter", &out->f, &qe) != HANU_OK ||
            json_doc_parse("{\"ts\":-1}", 9, NULL, &sd, NULL) != HANU_OK)
            return -1;
        int rc = sort_parse(json_doc_root(sd), "sort", &out->sort, &qe);
        json_doc_free(sd);
        return rc == HANU_OK ? 0 : -1;
    }
    size_t wl;
    uint32_t rank = zipf ? docgen_zipf(g, rng) : docgen_below(rng, DOCGEN_VOCAB);
    const char *w = docgen_word(g, rank, &wl);
    const char *kind = docgen_kind(docgen_below(rng, DOCGEN_KINDS));
    int n = snprintf(body, sizeof body, "{\"kind\":\"%s\"}", kind);
    if (filter_parse(body, (size_t)n, "filter", &out->f, &qe) != HANU_OK) return -1;
    return search_query_parse(w, wl, &out->q, &qe) == HANU_OK ? 0 : -1;
}

static void query_free(query *q)
{
    filter_free(q->f);
    search_query_free(&q->q);
}

/* One query; adds its answer to *sum. */
static uint64_t track_total = SEARCH_TRACK_TOTAL;

static int run(store *st, const index_snapshot *snap, int search, const query *q, uint64_t *sum)
{
    if (!search) {
        index_find_opts o = { .sort = &q->sort, .limit = FIND_LIMIT };
        index_hits h;
        query_error qe;
        int rc = index_find_ex(st, snap, q->f, &o, &h, NULL, NULL, &qe);
        if (rc) return rc;
        for (size_t i = 0; i < h.n; i++) *sum = mix(*sum, h.hits[i].id, h.hits[i].id_len);
        *sum = mix(*sum, &h.total, sizeof h.total);
        index_hits_free(&h);
        return HANU_OK;
    }
    index_search_opts o = { .limit = SEARCH_LIMIT, .count_upto = track_total };
    index_search_result r;
    int rc = index_search_ex(st, snap, &q->q, q->f, NULL, 0, &o, &r);
    if (rc) return rc;
    for (size_t i = 0; i < r.hits.n; i++) {
        *sum = mix(*sum, r.hits.hits[i].id, r.hits.hits[i].id_len);
        *sum = mix(*sum, &r.scores[i], sizeof r.scores[i]);
    }
    *sum = mix(*sum, &r.hits.total, sizeof r.hits.total);
    *sum = mix(*sum, &r.total_gte, sizeof r.total_gte);
    index_search_result_free(&r);
    return HANU_OK;
}

static void usage(void)
{
    fprintf(stderr, "usage: querybench --data DIR [--collection bench] [--op find|search]\n"
                    "                  [--search-words uniform|zipf] [--queries N] [--rounds N] [--seed N]\n"
                    "                  [--track-total N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *data = NULL, *col = "bench", *op = "search", *words = "uniform";
    unsigned long queries = 20000, rounds = 3;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *k = argv[i], *v = argv[++i];
        if (strcmp(k, "--data") == 0) data = v;
        else if (strcmp(k, "--collection") == 0) col = v;
        else if (strcmp(k, "--op") == 0) op = v;
        else if (strcmp(k, "--search-words") == 0) words = v;
        else if (strcmp(k, "--queries") == 0) queries = strtoul(v, NULL, 10);
        else if (strcmp(k, "--rounds") == 0) rounds = strtoul(v, NULL, 10);
        else if (strcmp(k, "--seed") == 0) seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "--track-total") == 0) track_total = strtoull(v, NULL, 10);
        else usage();
    }
    int search = strcmp(op, "search") == 0, zipf = strcmp(words, "zipf") == 0;
    if (!data || (!search && strcmp(op, "find") != 0) || (!zipf && strcmp(words, "uniform") != 0) ||
        queries == 0 || queries > MAX_QUERIES || rounds == 0 || rounds > 100)
        usage();

    store_options so;
    store_options_default(&so);
    so.data_dir = data;
    so.quiet = 1;
    so.background_compaction = 0;
    char err[512] = "", dir[4096];
    store *st = NULL;
    if (store_open(&so, &st, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "querybench: store: %s\n", err);
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/index", data);
    indexer_options io;
    indexer_options_default(&io);
    io.dir = dir;
    io.quiet = 1;
    io.merge_policy = INDEX_MERGE_NONE;   /* the segments as the server left them */
    indexer *ix = NULL;
    uint32_t db;
    int rc = indexer_open(st, &io, &ix, err, sizeof err);
    if (rc == HANU_OK) rc = indexer_wait_txn(ix, store_last_txn(st), 600000);
    if (rc == HANU_OK) rc = store_db_lookup(st, col, strlen(col), &db);
    if (rc != HANU_OK) {
        fprintf(stderr, "querybench: index: %s %s\n", hanu_status_str(rc), err);
        return 1;
    }
    index_snapshot *snap = index_snapshot_acquire(ix, db);
    struct docgen *g = malloc(sizeof *g);
    query *qs = calloc(queries, sizeof *qs);
    if (!snap || !g || !qs) return 1;
    docgen_init(g, 1);
    uint64_t rng = seed;
    for (unsigned long i = 0; i < queries; i++)
        if (parse_query(g, &rng, search, zipf, &qs[i]) != 0) {
            fprintf(stderr, "querybench: query %lu does not parse\n", i);
            return 1;
        }
    uint64_t live = 0;
    for (uint32_t s = 0; s < snap->nsegments; s++)
        live += index_segment_docs(snap->segments[s].seg) - snap->segments[s].ndeleted;
    printf("querybench: %s, %s words, %lu queries, %u segments, %" PRIu64 " live documents\n", op,
           search ? words : "-", queries, snap->nsegments, live);
    for (unsigned long r = 0; r < rounds; r++) {
        uint64_t sum = 14695981039346656037ull;
        double t0 = cpu_s();
        for (unsigned long i = 0; i < queries && rc == HANU_OK; i++) rc = run(st, snap, search, &qs[i], &sum);
        double t = cpu_s() - t0;
        if (rc != HANU_OK) {
            fprintf(stderr, "querybench: %s\n", hanu_status_str(rc));
            return 1;
        }
        printf("round %lu: %.2f us CPU per query, checksum %016" PRIx64 "\n", r + 1, t * 1e6 / (double)queries, sum);
    }
    for (unsigned long i = 0; i < queries; i++) query_free(&qs[i]);
    free(qs);
    free(g);
    index_snapshot_release(snap);
    indexer_close(ix);
    store_close(st);
    return 0;
}
