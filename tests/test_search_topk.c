/*
 * test_search_topk.c: index_search over a real store and indexer. BM25 scores
 * equal the hand-computed values of QUERY.md's corpus even when it is split
 * over two segments and a deleted document holds the query's words; on
 * random corpora (several segments, overwrites and deletes) thousands of
 * random queries (words, +must, -not, phrases, fields, filters the columns
 * decide and filters only the document decides, offsets) give the same hits
 * and scores as search_eval + filter_match over the live documents, the
 * pruned top k equals the exhaustive one, and pruning skips work. Counting
 * up to a random threshold (0, small, large, around the exact count, all)
 * and then pruning gives the same top k, an exact count when it says "eq"
 * and the threshold when it says "gte"; paging with the cursor (through its
 * text form) gives exactly the exhaustive ranking, also when the segments
 * are merged between two pages.
 */
#include "test.h"
#include "test_index_util.h"
#include "index/index.h"
#include "json/json.h"
#include "query/query.h"
#include "store/store.h"

#include <math.h>
#include <unistd.h>

static char data_dir[512], index_dir[600];

static void set_dirs(const char *name)
{
    snprintf(data_dir, sizeof data_dir, "%s", test_tmpdir(name));
    snprintf(index_dir, sizeof index_dir, "%s/index", data_dir);
}

static store *open_store(void) { return test_index_store_open(data_dir, 0); }

static indexer *open_indexer(store *st) { return test_indexer_open(st, index_dir, INDEX_MERGE_DEFAULT); }

static uint32_t make_collection(store *st)
{
    uint64_t txn;
    uint32_t id = UINT32_MAX;
    if (store_db_create(st, "c", 1, STORE_DB_COLLECTION, &txn) == HANU_OK) store_db_lookup(st, "c", 1, &id);
    return id;
}

static int put(store *st, uint32_t db, const char *id, const char *doc)
{
    store_op op = { doc ? STORE_SET : STORE_DELETE, id, strlen(id), doc, doc ? strlen(doc) : 0 };
    uint64_t txn;
    return store_write(st, db, &op, 1, STORE_COND_NONE, 0, &txn, NULL);
}

/* One commit of everything written so far: a new segment, new deletions. */
static int commit(store *st, indexer *ix)
{
    store_flush(st);
    return indexer_wait_txn(ix, store_last_txn(st), 10000);
}

static int search(store *st, const index_snapshot *snap, const char *q, const char *filter_json,
                  const char *const *fields, size_t nfields, size_t offset, size_t limit, unsigned flags,
                  index_search_result *out)
{
    search_query sq;
    filter *f = NULL;
    query_error qe;
    int rc = search_query_parse(q, strlen(q), &sq, &qe);
    if (rc) return rc;
    const char *fj = filter_json ? filter_json : "{}";
    rc = filter_parse(fj, strlen(fj), "filter", &f, &qe);
    if (!rc) rc = index_search(st, snap, &sq, f, fields, nfields, offset, limit, flags, out);
    filter_free(f);
    search_query_free(&sq);
    return rc;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-12; }

/* A page's cursor through its text form, as a client sends it back. */
static int cursor_round_trip(const index_cursor *next, const search_query *q, const char *const *fields,
                             size_t nfields, index_cursor *out)
{
    static char text[INDEX_CURSOR_TEXT_MAX + 1];
    size_t n = index_cursor_encode(next, text, sizeof text);
    return index_search_cursor_decode(text, n, index_search_hash(q, fields, nfields), out);
}

static void test_bm25_hand_values(void)
{
    set_dirs("search-bm25");
    store *st = open_store();
    REQUIRE(st);
    uint32_t db = make_collection(st);
    indexer *ix = open_indexer(st);
    REQUIRE(ix);
    /* QUERY.md's corpus over two segments; "gone" would change every
     * statistic if its deletion were not subtracted. */
    CHECK_EQ(put(st, db, "d1", "{\"t\":\"The quick brown fox\"}"), HANU_OK);
    CHECK_EQ(put(st, db, "d2", "{\"t\":\"the lazy DOG\"}"), HANU_OK);
    CHECK_EQ(put(st, db, "gone", "{\"t\":\"quick dog dog quick dog quick quick words and more words\"}"), HANU_OK);
    CHECK_EQ(commit(st, ix), HANU_OK);
    CHECK_EQ(put(st, db, "d3", "{\"t\":\"The quick dog jumps over the dog\"}"), HANU_OK);
    CHECK_EQ(put(st, db, "gone", NULL), HANU_OK);
    CHECK_EQ(commit(st, ix), HANU_OK);
    index_snapshot *snap = index_snapshot_acquire(ix, db);
    REQUIRE(snap);
    CHECK_EQ(snap->nsegments, 2);
    CHECK_EQ(snap->live_docs, 3);
    index_search_result r;
    REQUIRE(search(st, snap, "quick dog", NULL, NULL, 0, 0, 10, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    CHECK_EQ(r.hits.n, 3);
    CHECK_EQ(r.hits.total, 3);
    const char *want_ids[] = { "d3", "d2", "d1" };
    const double want[] = { 0.9567714097, 0.5504225012, 0.4991762683 };
    for (size_t i = 0; i < 3 && i < r.hits.n; i++) {
        CHECK(strcmp(r.hits.hits[i].id, want_ids[i]) == 0);
        CHECK(fabs(r.scores[i] - want[i]) < 1e-9);
    }
    const char *d3 = "{\"t\":\"The quick dog jumps over the dog\"}";
    CHECK(r.hits.n == 3 && r.hits.hits[0].doc_len == strlen(d3) && memcmp(r.hits.hits[0].doc, d3, strlen(d3)) == 0);
    index_search_result_free(&r);
    /* A phrase: occurrences as tf, the sum of its words' idf (ln 1.6 each). */
    REQUIRE(search(st, snap, "\"quick dog\"", NULL, NULL, 0, 0, 10, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    CHECK_EQ(r.hits.n, 1);
    double idf = 2 * log(1.6), norm = 7 / (14 / 3.0);
    CHECK(r.hits.n == 1 && fabs(r.scores[0] - idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * norm))) < 1e-12);
    index_search_result_free(&r);
    /* +must, -not, a filter on the columns, limit and offset. */
    REQUIRE(search(st, snap, "+dog -lazy", NULL, NULL, 0, 0, 10, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    CHECK(r.hits.n == 1 && strcmp(r.hits.hits[0].id, "d3") == 0);
    index_search_result_free(&r);
    REQUIRE(search(st, snap, "quick dog", NULL, NULL, 0, 1, 1, 0, &r) == HANU_OK);
    CHECK(r.hits.n == 1 && strcmp(r.hits.hits[0].id, "d2") == 0 && fabs(r.scores[0] - want[1]) < 1e-9);
    index_search_result_free(&r);
    index_snapshot_release(snap);
    indexer_close(ix);
    store_close(st);
}

/* ---------------------------------------------------------- random corpora */

#define VOCAB 24
#define MAX_DOCS 520
static unsigned rng_state;
static unsigned rnd(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 16) & 0x7fff;
}

/* Skewed: low word numbers are common (big postings, several blocks). */
static unsigned word(void)
{
    unsigned a = rnd() % VOCAB, b = rnd() % VOCAB;
    return a < b ? a : b;
}

static int words(char *out, size_t cap, unsigned n)
{
    int len = 0;
    out[0] = '\0';   /* n may be 0 */
    for (unsigned i = 0; i < n && (size_t)len < cap; i++)
        len += snprintf(out + len, cap - (size_t)len, "%sw%u", i ? " " : "", word());
    return len;
}

static void gen_doc(char *d, size_t cap)
{
    char a[200], b[200], c[120], e[120];
    words(a, sizeof a, 1 + rnd() % 14);
    words(b, sizeof b, rnd() % 6);
    words(c, sizeof c, rnd() % 4);
    words(e, sizeof e, rnd() % 4);
    static const char *const kinds[] = { "\"a\"", "\"b\"", "\"c\"", "[\"a\",\"b\"]", "7" };
    int len = snprintf(d, cap, "{\"t\":\"%s\",\"kind\":%s,\"n\":%u", a, kinds[rnd() % 5], rnd() % 100);
    if (rnd() % 3) len += snprintf(d + len, cap - (size_t)len, ",\"u\":{\"v\":\"%s\",\"w\":[\"%s\",\"%s\"]}", b, c, e);
    else if (rnd() % 2) len += snprintf(d + len, cap - (size_t)len, ",\"u\":\"%s\"", b);
    snprintf(d + len, cap - (size_t)len, "}");
}

static void gen_query(char *q, size_t cap)
{
    unsigned n = 1 + rnd() % 4;
    int len = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned kind = rnd() % 20;
        const char *sign = kind < 11 ? "" : kind < 15 ? "+" : kind < 17 ? "-" : rnd() % 3 ? "" : rnd() % 2 ? "+" : "-";
        if (kind < 17) len += snprintf(q + len, cap - (size_t)len, "%s%sw%u", i ? " " : "", sign, word());
        else len += snprintf(q + len, cap - (size_t)len, "%s%s\"w%u w%u\"", i ? " " : "", sign, word(), word());
    }
}

static const char *const filters[] = {
    NULL, NULL, NULL, "{\"kind\":\"a\"}", "{\"kind\":{\"$in\":[\"b\",7]}}", "{\"n\":{\"$gte\":40}}",
    "{\"$or\":[{\"kind\":\"c\"},{\"n\":{\"$lt\":20}}]}", "{\"kind\":\"b\",\"n\":{\"$ne\":3}}",
    /* column tests a block at a time (a string) beside others per document, a string no document
       holds, a path no document has */
    "{\"kind\":\"a\",\"n\":{\"$in\":[1,2,3,5,8,13,21,34,55,89]}}", "{\"kind\":\"zzz\"}", "{\"nokey\":\"a\"}",
};
static const char *const fields_a[] = { "t" }, *const fields_b[] = { "u" }, *const fields_c[] = { "u.w", "t" };

typedef struct ranked { double score; const char *id; } ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return strcmp(x->id, y->id);
}

typedef struct corpus {
    char docs[MAX_DOCS][400];
    char ids[MAX_DOCS][16];
    int live[MAX_DOCS];
    json_doc *parsed[MAX_DOCS];
} corpus;

typedef struct tally {
    uint64_t scored_pruned, scored_all, skips;
    int nonempty;
    uint64_t gte, eq, pages, paged_queries;
    uint64_t scored_thr, scored_thr_exact;   /* small thresholds vs exhaustive, same queries */
} tally;

/* track_total: n, 0, small, large, around the exact count nw, or all. */
static uint64_t pick_threshold(size_t nw)
{
    switch (rnd() % 7) {
    case 0: return 0;
    case 1: return 1 + rnd() % 5;
    case 2: return 1000;
    case 3: return INDEX_SEARCH_COUNT_ALL;
    case 4: return nw;
    case 5: return nw ? nw - 1 : 0;
    default: return nw + 1;
    }
}

static void run_corpus(unsigned seed, int ndocs, int nqueries, tally *t)
{
    static corpus c;
    memset(&c, 0, sizeof c);
    rng_state = seed;
    char name[32];
    snprintf(name, sizeof name, "search-rand-%u", seed);
    set_dirs(name);
    store *st = open_store();
    REQUIRE(st);
    uint32_t db = make_collection(st);
    /* No merges: the four rounds stay four segments. With merges, how many the snapshot
       holds is a race between a merge of the four and the test's acquire (the commit's
       durable half, on its own thread, gives the merge time to finish first);
       test_pages_across_a_merge covers merges. */
    indexer *ix = test_indexer_open(st, index_dir, INDEX_MERGE_NONE);
    REQUIRE(ix);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < ndocs; i++) {
            if (round && rnd() % 4) continue;
            snprintf(c.ids[i], sizeof c.ids[i], "k%04d", i);
            int del = round && c.live[i] && rnd() % 3 == 0;
            if (!del) gen_doc(c.docs[i], sizeof c.docs[i]);
            CHECK_EQ(put(st, db, c.ids[i], del ? NULL : c.docs[i]), HANU_OK);
            c.live[i] = !del;
        }
        CHECK_EQ(commit(st, ix), HANU_OK);
    }
    index_snapshot *snap = index_snapshot_acquire(ix, db);
    REQUIRE(snap);
    CHECK(snap->nsegments >= 3);
    const json_value *roots[MAX_DOCS];
    int which[MAX_DOCS], n = 0;
    for (int i = 0; i < ndocs; i++) {
        if (!c.live[i]) continue;
        REQUIRE(json_doc_parse(c.docs[i], strlen(c.docs[i]), NULL, &c.parsed[i], NULL) == HANU_OK);
        roots[n] = json_doc_root(c.parsed[i]);
        which[n++] = i;
    }
    CHECK_EQ(snap->live_docs, n);
    static double scores[MAX_DOCS];
    static ranked want[MAX_DOCS];
    for (int qn = 0; qn < nqueries; qn++) {
        char qtext[256];
        gen_query(qtext, sizeof qtext);
        search_query sq;
        query_error qe;
        if (search_query_parse(qtext, strlen(qtext), &sq, &qe) != HANU_OK) continue;   /* only -words */
        const char *fj = filters[rnd() % (sizeof filters / sizeof *filters)];
        unsigned fk = rnd() % 6;
        const char *const *fields = fk == 3 ? fields_a : fk == 4 ? fields_b : fk == 5 ? fields_c : NULL;
        size_t nfields = fk == 3 || fk == 4 ? 1 : fk == 5 ? 2 : 0;
        size_t offset = rnd() % 4 ? 0 : rnd() % 8, limit = 1 + rnd() % (rnd() % 3 ? 10 : 60);
        filter *f = NULL;
        REQUIRE(filter_parse(fj ? fj : "{}", strlen(fj ? fj : "{}"), "filter", &f, &qe) == HANU_OK);
        /* The oracle: search_eval and filter_match over the live documents. */
        REQUIRE(search_eval(&sq, fields, nfields, roots, (size_t)n, scores) == HANU_OK);
        size_t nw = 0;
        for (int k = 0; k < n; k++)
            if (scores[k] >= 0 && filter_match_value(f, roots[k]) == 1) want[nw++] = (ranked){ scores[k], c.ids[which[k]] };
        qsort(want, nw, sizeof *want, cmp_ranked);
        index_search_result pruned, counted, all;
        int rc1 = index_search(st, snap, &sq, f, fields, nfields, offset, limit, 0, &pruned);
        int rc2 = index_search(st, snap, &sq, f, fields, nfields, offset, limit, INDEX_SEARCH_COUNT, &counted);
        int rc3 = index_search(st, snap, &sq, f, fields, nfields, offset, limit, INDEX_SEARCH_EXHAUSTIVE, &all);
        REQUIRE(rc1 == HANU_OK && rc2 == HANU_OK && rc3 == HANU_OK);
        size_t expect = nw > offset ? (nw - offset < limit ? nw - offset : limit) : 0;
        int same = pruned.hits.n == expect && counted.hits.n == expect && all.hits.n == expect &&
                   counted.hits.total == nw;
        for (size_t k = 0; same && k < expect; k++) {
            const ranked *w = &want[offset + k];
            same = strcmp(pruned.hits.hits[k].id, w->id) == 0 && near(pruned.scores[k], w->score) &&
                   strcmp(counted.hits.hits[k].id, w->id) == 0 && counted.scores[k] == pruned.scores[k] &&
                   strcmp(all.hits.hits[k].id, w->id) == 0 && all.scores[k] == pruned.scores[k];
        }
        if (!same) {
            fprintf(stderr, "  seed %u q %s filter %s fields %zu offset %zu limit %zu: %zu/%zu/%zu hits, total %zu, want %zu of %zu\n",
                    seed, qtext, fj ? fj : "{}", nfields, offset, limit, pruned.hits.n, counted.hits.n, all.hits.n,
                    counted.hits.total, expect, nw);
            for (size_t k = 0; k < expect || k < pruned.hits.n; k++)
                fprintf(stderr, "    %zu: want %s %.17g got %s %.17g\n", k, k < expect ? want[offset + k].id : "-",
                        k < expect ? want[offset + k].score : 0, k < pruned.hits.n ? pruned.hits.hits[k].id : "-",
                        k < pruned.hits.n ? pruned.scores[k] : 0);
        }
        CHECK(same);
        t->nonempty += expect > 0;
        t->scored_pruned += pruned.scored;
        t->scored_all += all.scored;
        t->skips += pruned.skipped_blocks;
        /* Counting up to a threshold, then pruning: the same page, the count
         * exact when "eq", the threshold (below the exact count) when "gte". */
        uint64_t thr = pick_threshold(nw);
        index_search_opts o = { .offset = offset, .limit = limit, .count_upto = thr };
        index_search_result tt;
        REQUIRE(index_search_ex(st, snap, &sq, f, fields, nfields, &o, &tt) == HANU_OK);
        int ok = tt.hits.n == expect && (tt.next != NULL) == (nw > offset + limit);
        for (size_t k = 0; ok && k < expect; k++)
            ok = strcmp(tt.hits.hits[k].id, all.hits.hits[k].id) == 0 && tt.scores[k] == all.scores[k];
        if (tt.total_gte) ok = ok && tt.hits.total == thr && thr < nw && tt.hits.total >= (thr < nw ? thr : nw);
        else ok = ok && tt.hits.total == nw;
        if (!ok)
            fprintf(stderr, "  seed %u q %s filter %s threshold %llu: %zu hits, count %llu %s, want %zu of %zu\n", seed,
                    qtext, fj ? fj : "{}", (unsigned long long)thr, tt.hits.n, (unsigned long long)tt.hits.total,
                    tt.total_gte ? "gte" : "eq", expect, nw);
        CHECK(ok);
        t->gte += tt.total_gte;
        t->eq += !tt.total_gte;
        if (thr <= 5) {
            t->scored_thr += tt.scored;
            t->scored_thr_exact += all.scored;
        }
        index_search_result_free(&tt);
        /* Paging with the cursor: every page the next slice of the ranking. */
        if (qn % 3 == 0) {
            static index_cursor cur;
            size_t ngot = 0, page = 1 + rnd() % 7, npages = 0;
            o = (index_search_opts){ .limit = page, .count_upto = pick_threshold(nw) };
            for (int more = 1; more && npages <= nw + 1 && !test_current_failed;) {
                index_search_result pr;
                REQUIRE(index_search_ex(st, snap, &sq, f, fields, nfields, &o, &pr) == HANU_OK);
                npages++;
                CHECK(pr.hits.n == (nw - ngot < page ? nw - ngot : page));
                CHECK(pr.total_gte ? pr.hits.total < nw : pr.hits.total == nw);
                for (size_t k = 0; k < pr.hits.n && ngot < nw; k++, ngot++)
                    CHECK(strcmp(pr.hits.hits[k].id, want[ngot].id) == 0 && near(pr.scores[k], want[ngot].score));
                more = pr.next != NULL;
                CHECK(more == (ngot < nw));
                if (more) {
                    REQUIRE(cursor_round_trip(pr.next, &sq, fields, nfields, &cur) == HANU_OK);
                    o.after = &cur;
                    if (npages == 1 && nw > ngot + 1) {   /* after and offset together */
                        index_search_opts oo = o;
                        oo.offset = 1;
                        index_search_result po;
                        REQUIRE(index_search_ex(st, snap, &sq, f, fields, nfields, &oo, &po) == HANU_OK);
                        CHECK(po.hits.n > 0 && strcmp(po.hits.hits[0].id, want[ngot + 1].id) == 0);
                        index_search_result_free(&po);
                    }
                }
                index_search_result_free(&pr);
            }
            CHECK_EQ(ngot, nw);
            t->pages += npages;
            t->paged_queries++;
        }
        index_search_result_free(&pruned);
        index_search_result_free(&counted);
        index_search_result_free(&all);
        filter_free(f);
        search_query_free(&sq);
        if (test_current_failed) break;
    }
    for (int i = 0; i < ndocs; i++) json_doc_free(c.parsed[i]);
    index_snapshot_release(snap);
    indexer_close(ix);
    store_close(st);
}

static void test_topk_equals_exhaustive(void)
{
    tally t = { 0 };
    run_corpus(1, 500, 1100, &t);
    run_corpus(3, 520, 1100, &t);
    fprintf(stderr, "  %d queries with hits; documents scored: %llu pruned, %llu exhaustive; %llu block skips\n",
            t.nonempty, (unsigned long long)t.scored_pruned, (unsigned long long)t.scored_all,
            (unsigned long long)t.skips);
    fprintf(stderr, "  thresholds: %llu counts eq, %llu gte; threshold <= 5 scored %llu of %llu; "
            "%llu queries paged in %llu pages\n", (unsigned long long)t.eq, (unsigned long long)t.gte,
            (unsigned long long)t.scored_thr, (unsigned long long)t.scored_thr_exact,
            (unsigned long long)t.paged_queries, (unsigned long long)t.pages);
    CHECK(t.nonempty > 1500);   /* two filters match nothing */
    CHECK(t.scored_pruned < t.scored_all);   /* WAND skipped documents (small corpora: the bench measures how many) */
    CHECK(t.skips > 0);
    CHECK(t.gte > 100 && t.eq > 100);        /* both sides of every threshold were reached */
    CHECK(t.scored_thr < t.scored_thr_exact);   /* past a small threshold the loop prunes */
    CHECK(t.paged_queries > 500 && t.pages > 2 * t.paged_queries);
}

/* Block impacts and counting apart. Every block holds a long document with
 * the word ten times and a one-word document: the old bound (largest tf,
 * shortest length: of two documents) beats the two best documents' scores,
 * the impact (both of one document) does not, so with a page of one the
 * blocks after the first are skipped. A count of every match comes from the
 * postings (no filter) or the columns (a filter) without scoring them all,
 * and is exact. */
static void test_impacts_and_counting_apart(void)
{
    set_dirs("search-impacts");
    store *st = open_store();
    REQUIRE(st);
    uint32_t db = make_collection(st);
    indexer *ix = open_indexer(st);
    REQUIRE(ix);
    char doc[1200], id[32];
    int n = 1280, with_a = 0, x_with_a = 0, with_x = 0;
    for (int i = 0; i < n; i++) {
        int len = 0;
        if (i == 0) len = snprintf(doc, sizeof doc, "{\"t\":\"w w w w w w w w w w w w\"");   /* best: tf 12 */
        else if (i == 1) len = snprintf(doc, sizeof doc, "{\"t\":\"w w w w w w w w w w w\"");   /* then tf 11 */
        else if (i % 128 == 2) {
            len = snprintf(doc, sizeof doc, "{\"t\":\"w w w w w w w w w w");
            for (int k = 0; k < 90; k++) len += snprintf(doc + len, sizeof doc - (size_t)len, " f");
            len += snprintf(doc + len, sizeof doc - (size_t)len, "\"");
        } else if (i % 128 == 3) len = snprintf(doc, sizeof doc, "{\"t\":\"w\"");
        else len = snprintf(doc, sizeof doc, "{\"t\":\"w x y z v\"");
        int a = i % 3 == 0 || i == 1;
        with_a += a;
        int x = i > 1 && i % 128 != 2 && i % 128 != 3;   /* "w x y z v": x once, every length 5 */
        with_x += x;
        x_with_a += x && a;
        snprintf(doc + len, sizeof doc - (size_t)len, ",\"k\":\"%s\"}", a ? "a" : "b");
        snprintf(id, sizeof id, "d%05d", i);
        CHECK_EQ(put(st, db, id, doc), HANU_OK);
    }
    CHECK_EQ(put(st, db, "other", "{\"t\":\"nothing here\",\"k\":\"a\"}"), HANU_OK);
    CHECK_EQ(commit(st, ix), HANU_OK);
    index_snapshot *snap = index_snapshot_acquire(ix, db);
    REQUIRE(snap);
    CHECK_EQ(snap->nsegments, 1);
    index_search_result r, all;
    REQUIRE(search(st, snap, "w", NULL, NULL, 0, 0, 1, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    REQUIRE(search(st, snap, "w", NULL, NULL, 0, 0, 1, INDEX_SEARCH_COUNT | INDEX_SEARCH_EXHAUSTIVE, &all) == HANU_OK);
    CHECK(r.hits.n == 1 && strcmp(r.hits.hits[0].id, "d00000") == 0);
    CHECK(all.hits.n == 1 && r.hits.n == 1 && r.scores[0] == all.scores[0]);
    CHECK(r.hits.total == (uint64_t)n && !r.total_gte && all.hits.total == (uint64_t)n);
    CHECK(r.skipped_blocks >= 8);     /* every block after the first */
    CHECK(r.scored < 300);            /* not every match for the count */
    index_search_result_free(&r);
    index_search_result_free(&all);
    /* a filter the columns decide: the count reads columns, not scores */
    REQUIRE(search(st, snap, "w", "{\"k\":\"a\"}", NULL, 0, 0, 1, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    CHECK(r.hits.n == 1 && strcmp(r.hits.hits[0].id, "d00000") == 0);
    CHECK(r.hits.total == (uint64_t)with_a && !r.total_gte);
    CHECK(r.scored < 300);
    index_search_result_free(&r);
    /* every document of "x" scores the same, so none is pruned by score: a
       filtered count scores only the documents the filter passes */
    REQUIRE(search(st, snap, "x", "{\"k\":\"a\"}", NULL, 0, 0, 1, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    REQUIRE(search(st, snap, "x", "{\"k\":\"a\"}", NULL, 0, 0, 1, INDEX_SEARCH_COUNT | INDEX_SEARCH_EXHAUSTIVE,
                   &all) == HANU_OK);
    CHECK(r.hits.total == (uint64_t)x_with_a && !r.total_gte && all.hits.total == (uint64_t)x_with_a);
    CHECK(r.hits.n == 1 && all.hits.n == 1 && strcmp(r.hits.hits[0].id, all.hits.hits[0].id) == 0);
    CHECK(r.scores[0] == all.scores[0]);
    CHECK(r.scored <= (uint64_t)x_with_a);   /* was every document of x: with_x */
    CHECK(with_x > 2 * x_with_a);
    index_search_result_free(&r);
    index_search_result_free(&all);
    /* a limit of the count: the limit, "gte" */
    index_search_opts o = { .limit = 1, .count_upto = 100 };
    search_query sq;
    query_error qe;
    REQUIRE(search_query_parse("w", 1, &sq, &qe) == HANU_OK);
    REQUIRE(index_search_ex(st, snap, &sq, NULL, NULL, 0, &o, &r) == HANU_OK);
    CHECK(r.hits.total == 100 && r.total_gte && r.hits.n == 1);
    index_search_result_free(&r);
    search_query_free(&sq);
    index_snapshot_release(snap);
    indexer_close(ix);
    store_close(st);
}

/* A cursor names (score, _id), not a segment's ordinal: pages taken before
 * and after the segments merge are still the exhaustive ranking's slices. */
static void test_pages_across_a_merge(void)
{
    set_dirs("search-merge");
    rng_state = 7;
    store *st = open_store();
    REQUIRE(st);
    uint32_t db = make_collection(st);
    indexer *ix = test_indexer_open(st, index_dir, INDEX_MERGE_NONE);
    REQUIRE(ix);
    static char doc[400];
    for (int round = 0; round < 6; round++) {   /* six small segments, overwrites between them */
        for (int i = 0; i < 60; i++) {
            char id[16];
            snprintf(id, sizeof id, "m%03d", round < 3 ? round * 60 + i : (int)(rnd() % 180));
            gen_doc(doc, sizeof doc);
            CHECK_EQ(put(st, db, id, doc), HANU_OK);
        }
        CHECK_EQ(commit(st, ix), HANU_OK);
    }
    index_snapshot *a = index_snapshot_acquire(ix, db);
    REQUIRE(a);
    uint32_t segs_before = a->nsegments;
    CHECK_EQ(segs_before, 6);
    search_query sq;
    query_error qe;
    const char *qtext = "w0 w1 w3 \"w1 w2\"";
    REQUIRE(search_query_parse(qtext, strlen(qtext), &sq, &qe) == HANU_OK);
    index_search_result all, p;
    REQUIRE(index_search(st, a, &sq, NULL, NULL, 0, 0, 1000, INDEX_SEARCH_EXHAUSTIVE, &all) == HANU_OK);
    CHECK(all.hits.n > 40);
    index_search_opts o = { .limit = 7, .count_upto = 10 };
    REQUIRE(index_search_ex(st, a, &sq, NULL, NULL, 0, &o, &p) == HANU_OK);
    static index_cursor cur;
    REQUIRE(p.next && cursor_round_trip(p.next, &sq, NULL, 0, &cur) == HANU_OK);
    size_t ngot = 0;
    for (size_t k = 0; k < p.hits.n; k++, ngot++)
        CHECK(strcmp(p.hits.hits[k].id, all.hits.hits[ngot].id) == 0 && p.scores[k] == all.scores[ngot]);
    index_search_result_free(&p);
    index_snapshot_release(a);
    indexer_close(ix);
    /* The same index with merges on: the six segments merge. */
    ix = test_indexer_open(st, index_dir, INDEX_MERGE_DEFAULT);
    REQUIRE(ix);
    index_snapshot *b = NULL;
    for (int i = 0; i < 2000; i++) {
        indexer_stats ss;
        indexer_commit_now(ix);
        CHECK_EQ(indexer_wait_txn(ix, store_last_txn(st), 10000), HANU_OK);
        indexer_get_stats(ix, &ss);
        b = index_snapshot_acquire(ix, db);
        REQUIRE(b);
        if (!ss.merging && b->nsegments < segs_before) break;
        index_snapshot_release(b);
        b = NULL;
        usleep(5000);
    }
    REQUIRE(b);
    CHECK(b->nsegments < segs_before);
    for (int more = 1; more && !test_current_failed;) {
        o.after = &cur;
        REQUIRE(index_search_ex(st, b, &sq, NULL, NULL, 0, &o, &p) == HANU_OK);
        for (size_t k = 0; k < p.hits.n; k++, ngot++)
            CHECK(ngot < all.hits.n && strcmp(p.hits.hits[k].id, all.hits.hits[ngot].id) == 0 &&
                  p.scores[k] == all.scores[ngot]);
        more = p.next != NULL;
        if (more) REQUIRE(cursor_round_trip(p.next, &sq, NULL, 0, &cur) == HANU_OK);
        index_search_result_free(&p);
    }
    CHECK_EQ(ngot, all.hits.n);
    /* A cursor of another query, or a _find cursor, is refused. */
    search_query other;
    REQUIRE(search_query_parse("w0 w1", 5, &other, &qe) == HANU_OK);
    static char text[INDEX_CURSOR_TEXT_MAX + 1];
    size_t tl = index_cursor_encode(&cur, text, sizeof text);
    CHECK_EQ(index_search_cursor_decode(text, tl, index_search_hash(&other, NULL, 0), &cur), HANU_ERR_INVALID);
    static const char *const fl[] = { "t" };
    CHECK_EQ(index_search_cursor_decode(text, tl, index_search_hash(&sq, fl, 1), &cur), HANU_ERR_INVALID);
    CHECK_EQ(index_cursor_decode(text, tl, NULL, &cur), HANU_ERR_INVALID);
    CHECK_EQ(index_search_cursor_decode(text, tl, index_search_hash(&sq, NULL, 0), &cur), HANU_OK);
    search_query_free(&other);
    search_query_free(&sq);
    index_search_result_free(&all);
    index_snapshot_release(b);
    indexer_close(ix);
    store_close(st);
}

/* A filtered count tests a block of postings at a time against a string
 * column (block_verdicts): three segments whose `k` column has one tag for
 * every document (arrays, numbers, strings: a constant tag), a fourth of
 * mixed tags and a deleted document; the count of "w" with k = "a" and the
 * best hit equal what the documents say. */
static void test_filter_verdicts_per_block(void)
{
    set_dirs("search-verdicts");
    store *st = open_store();
    REQUIRE(st);
    uint32_t db = make_collection(st);
    indexer *ix = test_indexer_open(st, index_dir, INDEX_MERGE_NONE);
    REQUIRE(ix);
    static const char *const shapes[4][3] = {
        { "[\"a\",\"b\"]", "[\"c\"]", "[\"b\",\"a\"]" },   /* arrays: the stored document decides */
        { "7", "8", "9" },                               /* numbers */
        { "\"a\"", "\"b\"", "\"c\"" },                   /* strings */
        { "\"a\"", "[\"a\"]", "true" },                   /* mixed */
    };
    static const int has_a[4][3] = { { 1, 0, 1 }, { 0, 0, 0 }, { 1, 0, 0 }, { 1, 1, 0 } };
    int want = 0;
    char id[32], doc[200];
    for (int seg = 0; seg < 4; seg++) {
        for (int i = 0; i < 300; i++) {   /* more than two blocks of postings */
            snprintf(id, sizeof id, "s%d-%03d", seg, i);
            snprintf(doc, sizeof doc, "{\"t\":\"w%s\",\"k\":%s}", i == 150 ? " w" : "", shapes[seg][i % 3]);
            CHECK_EQ(put(st, db, id, doc), HANU_OK);
            want += has_a[seg][i % 3];
        }
        if (seg == 3) {
            CHECK_EQ(put(st, db, "s3-000", NULL), HANU_OK);   /* k "a": no longer counted */
            want--;
        }
        CHECK_EQ(commit(st, ix), HANU_OK);
    }
    index_snapshot *snap = index_snapshot_acquire(ix, db);
    REQUIRE(snap);
    CHECK_EQ(snap->nsegments, 4);
    index_search_result r;
    REQUIRE(search(st, snap, "w", "{\"k\":\"a\"}", NULL, 0, 0, 1, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    CHECK(r.hits.total == (uint64_t)want && !r.total_gte);
    /* tf 2 in the shortest text (k's strings are text too: s0-150's array makes it longer), the
       smaller _id of the two */
    CHECK(r.hits.n == 1 && strcmp(r.hits.hits[0].id, "s2-150") == 0);
    index_search_result_free(&r);
    REQUIRE(search(st, snap, "w", "{\"k\":\"c\"}", NULL, 0, 0, 1, INDEX_SEARCH_COUNT, &r) == HANU_OK);
    CHECK(r.hits.total == 200 && !r.total_gte);   /* 100 arrays ["c"], 100 strings "c" */
    index_search_result_free(&r);
    index_snapshot_release(snap);
    indexer_close(ix);
    store_close(st);
}

int main(void)
{
    RUN(test_bm25_hand_values);
    RUN(test_topk_equals_exhaustive);
    RUN(test_pages_across_a_merge);
    RUN(test_impacts_and_counting_apart);
    RUN(test_filter_verdicts_per_block);
    TEST_DONE();
}
