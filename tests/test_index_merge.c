/*
 * test_index_merge.c: merges and the hot-document cache.
 * A merged segment is byte for byte the segment a builder writes from the
 * same live documents (every term, frequency, column and text length
 * carried), and its ordinal map is exact; the policy picks exactly the
 * segments docs/INDEX.md says; the indexer merges in the background under
 * writes, overwrites and deletes, and the index stays the store's live
 * documents, also after a restart, with every merged-away file gone once no
 * snapshot holds it; the document cache serves only the current version.
 */
#include "test.h"
#include "test_index_util.h"
#include "index/index.h"
#include "store/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

static unsigned seed = 777;
static unsigned rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
}

/* A document with every kind of leaf: numbers, short and long strings, arrays, nesting, text. */
static int gen_doc(char *out, size_t cap, int i)
{
    static const char *words[] = { "alpha", "beta", "gamma", "delta", "Éclair", "zeta", "eta" };
    char text[200] = "";
    size_t tl = 0;
    for (unsigned w = 0, n = 1 + rnd() % 6; w < n; w++)
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "%s%s", w ? " " : "", words[rnd() % 7]);
    const char *shapes[] = { "\"arr\":[1,2,%u]", "\"arr\":%u", "\"arr\":null", "\"flag\":true,\"x\":%u" };
    char extra[64];
    snprintf(extra, sizeof extra, shapes[rnd() % 4], rnd() % 50);
    int n = snprintf(out, cap,
                     "{\"_id\":\"d%04d\",\"n\":%d.5,\"tag\":\"t%u\",\"obj\":{\"y\":%s,\"s\":\"%s\"},%s,"
                     "\"long\":\"%s this string is longer than sixty-four bytes so it is text only, never a keyword\"}",
                     i, (int)(rnd() % 100) - 50, rnd() % 5, rnd() % 2 ? "false" : "-0.0", text, extra, text);
    return n;
}

static int read_file(const char *path, hanu_buf *out)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return HANU_ERR_IO;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) hanu_buf_append(out, buf, (size_t)n);
    close(fd);
    return n < 0 ? HANU_ERR_IO : HANU_OK;
}

#define NDOCS 420
#define NSEGS 3

static void test_merge_equals_direct_build(void)
{
    const char *dir = test_tmpdir("merge-bytes");
    static char docs[NDOCS][512];
    static int deleted[NDOCS];
    index_segment *segs[NSEGS];
    index_merge_input in[NSEGS];
    uint32_t *del[NSEGS], *map[NSEGS];
    index_builder *direct = index_builder_new();
    REQUIRE(direct);
    int per = NDOCS / NSEGS, live = 0;
    for (int s = 0; s < NSEGS; s++) {
        index_builder *b = index_builder_new();
        REQUIRE(b);
        del[s] = malloc(per * sizeof **del);
        map[s] = malloc(per * sizeof **map);
        uint32_t nd = 0;
        for (int k = 0; k < per; k++) {
            int i = s * per + k;
            int len = gen_doc(docs[i], sizeof docs[i], i);
            char id[16];
            snprintf(id, sizeof id, "d%04d", i);
            CHECK_EQ(index_add_document(b, id, 5, 100 + (uint64_t)i, docs[i], (size_t)len), HANU_OK);
            deleted[i] = s == 1 ? k % 2 == 0 : rnd() % 4 == 0;   /* segment 1: half gone */
            if (deleted[i]) del[s][nd++] = (uint32_t)k;
            else {
                CHECK_EQ(index_add_document(direct, id, 5, 100 + (uint64_t)i, docs[i], (size_t)len), HANU_OK);
                live++;
            }
        }
        char path[700];
        snprintf(path, sizeof path, "%s/in-%d.hix", dir, s);
        CHECK_EQ(index_builder_write(b, path), HANU_OK);
        index_builder_free(b);
        char err[256];
        REQUIRE(index_segment_open(path, &segs[s], err, sizeof err) == HANU_OK);
        in[s] = (index_merge_input){ segs[s], del[s], nd };
    }
    char merged[700], built[700];
    snprintf(merged, sizeof merged, "%s/merged.hix", dir);
    snprintf(built, sizeof built, "%s/built.hix", dir);
    uint32_t docs_out = 0;
    CHECK_EQ(index_merge_write(in, NSEGS, merged, map, &docs_out), HANU_OK);
    CHECK_EQ(docs_out, live);
    CHECK_EQ(index_builder_write(direct, built), HANU_OK);
    index_builder_free(direct);
    hanu_buf a = { 0 }, b = { 0 };
    CHECK_EQ(read_file(merged, &a), HANU_OK);
    CHECK_EQ(read_file(built, &b), HANU_OK);
    CHECK(a.len > 1000);
    CHECK_EQ(a.len, b.len);
    CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    hanu_buf_free(&a);
    hanu_buf_free(&b);
    /* The map: deleted ordinals go nowhere, live ones count up in input order. */
    uint32_t next = 0;
    for (int s = 0; s < NSEGS; s++)
        for (int k = 0; k < per; k++) {
            if (deleted[s * per + k]) CHECK_EQ(map[s][k], INDEX_ORD_END);
            else CHECK_EQ(map[s][k], next++);
        }
    /* Merging nothing live writes an empty, valid segment. */
    uint32_t all[1] = { 0 };
    index_merge_input one = { segs[0], all, 0 };
    for (uint32_t k = 0; k < (uint32_t)per; k++) del[0][k] = k;
    one.deleted = del[0];
    one.ndeleted = (uint32_t)per;
    snprintf(merged, sizeof merged, "%s/empty.hix", dir);
    CHECK_EQ(index_merge_write(&one, 1, merged, map, &docs_out), HANU_OK);
    CHECK_EQ(docs_out, 0);
    index_segment *empty = NULL;
    char err[256];
    CHECK_EQ(index_segment_open(merged, &empty, err, sizeof err), HANU_OK);
    if (empty) CHECK_EQ(index_segment_docs(empty), 0);
    index_segment_close(empty);
    for (int s = 0; s < NSEGS; s++) {
        index_segment_close(segs[s]);
        free(del[s]);
        free(map[s]);
    }
}

/* ---- the streaming merge against the builder's ---- */

/* A document of a wider shape: a field only some segments have, strings shared
 * across segments and some held only by deleted documents, common words (postings
 * of many blocks), rare words, numbers of both signs, -0.0, arrays, nulls. */
static int gen_wide_doc(char *out, size_t cap, int seg, int i)
{
    static const char *common[] = { "the", "of", "and", "merge", "stream", "segment" };
    char text[400] = "";
    size_t tl = 0;
    for (unsigned w = 0, n = rnd() % 12; w < n; w++) {
        if (rnd() % 3) tl += (size_t)snprintf(text + tl, sizeof text - tl, " %s", common[rnd() % 6]);
        else tl += (size_t)snprintf(text + tl, sizeof text - tl, " w%u", rnd() % 5000);
    }
    char only[64] = "";
    if (seg % 3 == 0) snprintf(only, sizeof only, "\"seg%d\":%d,", seg, i);   /* a column few inputs have */
    const char *vals[] = { "null", "true", "-0.0", "[1,2]", "\"s\"", "1e300", "-7.25" };
    return snprintf(out, cap,
                    "{\"_id\":\"m%06d\",%s\"n\":%d,\"k\":\"v%u\",\"rare\":\"r%d\",\"mixed\":%s,\"t\":\"%s\","
                    "\"deep\":{\"a\":[%u,\"x%u\"],\"b\":\"%s\"}}",
                    i, only, (int)(rnd() % 2000) - 1000, rnd() % 300, i, vals[rnd() % 7], text, rnd() % 9,
                    rnd() % 40, tl > 20 ? text + tl - 20 : text);
}

/* Segment files of NIN inputs with deletions (one input all deleted, one none),
 * merged by the streaming merge and by the builder: the same bytes, the same
 * maps, and the streamed file passes the reader's checks. Then the merged
 * segments merge again (many blocks per term, several chunks per column, more
 * than one buffer of output), and an existing file is refused. */
#define NIN 9
#define PER_IN 1400
static void test_stream_equals_rebuild(void)
{
    const char *dir = test_tmpdir("merge-stream");
    index_segment *segs[NIN];
    index_merge_input in[NIN];
    uint32_t *del[NIN], *map_a[NIN], *map_b[NIN];
    static char doc[2048];
    char err[256], path[700];
    for (int s = 0; s < NIN; s++) {
        index_builder *b = index_builder_new();
        REQUIRE(b);
        del[s] = malloc(PER_IN * sizeof **del);
        map_a[s] = malloc(PER_IN * sizeof **map_a);
        map_b[s] = malloc(PER_IN * sizeof **map_b);
        uint32_t nd = 0;
        for (int k = 0; k < PER_IN; k++) {
            int i = s * PER_IN + k;
            int len = gen_wide_doc(doc, sizeof doc, s, i);
            char id[16];
            int idn = snprintf(id, sizeof id, "m%06d", i);
            REQUIRE(index_add_document(b, id, (size_t)idn, 1000 + (uint64_t)i, doc, (size_t)len) == HANU_OK);
            int gone = s == 2 ? 1 : s == 4 ? 0 : s == 6 ? k < PER_IN / 2 : rnd() % 5 == 0;
            if (gone) del[s][nd++] = (uint32_t)k;
        }
        snprintf(path, sizeof path, "%s/in-%d.hix", dir, s);
        CHECK_EQ(index_builder_write(b, path), HANU_OK);
        index_builder_free(b);
        REQUIRE(index_segment_open(path, &segs[s], err, sizeof err) == HANU_OK);
        in[s] = (index_merge_input){ segs[s], del[s], nd };
    }
    /* Merge in two groups and then the two results, comparing every file. */
    index_segment *mid[2] = { NULL, NULL };
    uint32_t groups[3][2] = { { 0, 5 }, { 5, NIN }, { 0, 2 } };
    for (int g = 0; g < 3; g++) {
        index_merge_input *gin = g < 2 ? in + groups[g][0] : NULL, two[2];
        uint32_t n = groups[g][1] - groups[g][0], *ma[NIN], *mb[NIN];
        if (g == 2) {
            for (int j = 0; j < 2; j++) {
                two[j] = (index_merge_input){ mid[j], NULL, 0 };
                ma[j] = malloc((index_segment_docs(mid[j]) + 1) * sizeof **ma);
                mb[j] = malloc((index_segment_docs(mid[j]) + 1) * sizeof **mb);
            }
            gin = two;
        } else {
            for (uint32_t j = 0; j < n; j++) {
                ma[j] = map_a[groups[g][0] + j];
                mb[j] = map_b[groups[g][0] + j];
            }
        }
        char streamed[700], rebuilt[700];
        snprintf(streamed, sizeof streamed, "%s/stream-%d.hix", dir, g);
        snprintf(rebuilt, sizeof rebuilt, "%s/rebuild-%d.hix", dir, g);
        uint32_t docs_a = 0, docs_b = 0;
        CHECK_EQ(index_merge_write(gin, n, streamed, ma, &docs_a), HANU_OK);
        CHECK_EQ(index_merge_write_rebuild(gin, n, rebuilt, mb, &docs_b), HANU_OK);
        CHECK_EQ(docs_a, docs_b);
        CHECK(docs_a > 0);
        hanu_buf a = { 0 }, b = { 0 };
        CHECK_EQ(read_file(streamed, &a), HANU_OK);
        CHECK_EQ(read_file(rebuilt, &b), HANU_OK);
        CHECK_EQ(a.len, b.len);
        CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
        if (g == 2) CHECK(a.len > (2u << 20));   /* past the read-back buffer and many region buffers */
        hanu_buf_free(&a);
        hanu_buf_free(&b);
        for (uint32_t j = 0; j < n; j++)
            CHECK(memcmp(ma[j], mb[j], index_segment_docs(gin[j].seg) * sizeof **ma) == 0);
        index_segment *check = NULL;
        CHECK_EQ(index_segment_open(streamed, &check, err, sizeof err), HANU_OK);
        if (check) CHECK_EQ(index_segment_docs(check), docs_a);
        if (g < 2) mid[g] = check;
        else {
            /* A word common to every input: its postings span many blocks. */
            uint32_t t = check ? index_segment_term_find(check, (const uint8_t *)"t\0\6the", 6) : UINT32_MAX;
            uint32_t df = 0;
            if (t != UINT32_MAX) index_segment_term(check, t, &(size_t){ 0 }, &df);
            CHECK(df > 10 * INDEX_BLOCK);
            index_segment_close(check);
            for (int j = 0; j < 2; j++) {
                free(ma[j]);
                free(mb[j]);
            }
            /* The file exists: refused, and left as it was. */
            CHECK_EQ(index_merge_write(two, 2, streamed, ma, &docs_a), HANU_ERR_EXISTS);
            CHECK_EQ(index_segment_open(streamed, &check, err, sizeof err), HANU_OK);
            index_segment_close(check);
        }
    }
    /* The deleted ordinals map nowhere, the rest count up in input order. */
    uint32_t next = 0;
    for (int s = 0; s < 5; s++) {
        uint32_t k = 0;
        for (uint32_t ord = 0; ord < PER_IN; ord++) {
            int gone = k < in[s].ndeleted && in[s].deleted[k] == ord;
            if (gone) k++;
            CHECK_EQ(map_a[s][ord], gone ? INDEX_ORD_END : next++);
        }
    }
    for (int j = 0; j < 2; j++) index_segment_close(mid[j]);
    for (int s = 0; s < NIN; s++) {
        index_segment_close(segs[s]);
        free(del[s]);
        free(map_a[s]);
        free(map_b[s]);
    }
}

/* ---- the policy ---- */

#define KB 1024ull
#define MB (1024ull * 1024ull)

static uint32_t pick(enum index_merge_policy p, const index_merge_candidate *c, uint32_t n, uint64_t max,
                     char *out, size_t cap)
{
    uint32_t idx[64];
    uint32_t got = index_merge_pick(p, c, n, max, idx);
    size_t len = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < got; i++) len += (size_t)snprintf(out + len, cap - len, "%s%u", i ? "," : "", idx[i]);
    return got;
}

static void test_policy(void)
{
    char got[256];
    index_merge_candidate c[40];
    for (int i = 0; i < 40; i++) c[i] = (index_merge_candidate){ (uint64_t)(100 + i) * KB, 1000, 0 };
    CHECK_EQ(pick(INDEX_MERGE_DEFAULT, c, 3, 256 * MB, got, sizeof got), 0);   /* fewer than the factor */
    CHECK_EQ(pick(INDEX_MERGE_DEFAULT, c, 4, 256 * MB, got, sizeof got), 4);
    CHECK(strcmp(got, "0,1,2,3") == 0);
    /* Twelve in the lowest tier: the ten smallest, in index order. */
    for (int i = 0; i < 12; i++) c[i].bytes = (uint64_t)(500 - 10 * i) * KB;
    CHECK_EQ(pick(INDEX_MERGE_DEFAULT, c, 12, 256 * MB, got, sizeof got), 10);
    CHECK(strcmp(got, "2,3,4,5,6,7,8,9,10,11") == 0);
    /* The cap: only what fits under max_bytes together. */
    for (int i = 0; i < 4; i++) c[i].bytes = (uint64_t)(900 + 10 * i) * KB;
    CHECK_EQ(pick(INDEX_MERGE_DEFAULT, c, 4, 2 * MB, got, sizeof got), 2);
    CHECK(strcmp(got, "0,1") == 0);
    /* Tiers: two small ones wait, four of about 2 MB (the next tier) merge. */
    index_merge_candidate t[6] = { { 2 * MB, 10, 0 }, { 100 * KB, 10, 0 }, { 3 * MB, 10, 0 },
                                   { 2500 * KB, 10, 0 }, { 200 * KB, 10, 0 }, { 3500 * KB, 10, 0 } };
    CHECK_EQ(pick(INDEX_MERGE_DEFAULT, t, 6, 256 * MB, got, sizeof got), 4);
    CHECK(strcmp(got, "0,2,3,5") == 0);
    /* Live size counts: 8 MB with three quarters deleted is a 2 MB segment, so
     * tier 1 holds 0, 3 and 5 (2 is now in tier 3): no tier is full, but 5 is
     * mostly deleted and is rewritten alone. */
    t[5] = (index_merge_candidate){ 8 * MB, 100, 75 };
    t[2].bytes = 20 * MB;
    CHECK_EQ(pick(INDEX_MERGE_DEFAULT, t, 6, 256 * MB, got, sizeof got), 1);
    CHECK(strcmp(got, "5") == 0);
    /* Past half the cap a segment is done. */
    index_merge_candidate big[4] = { { 200 * MB, 10, 0 }, { 200 * MB, 10, 0 }, { 200 * MB, 10, 0 }, { 200 * MB, 10, 0 } };
    CHECK_EQ(pick(INDEX_MERGE_DEFAULT, big, 4, 256 * MB, got, sizeof got), 0);
    /* Lazy: nothing up to 32 segments, then the smallest ten. */
    for (int i = 0; i < 40; i++) c[i] = (index_merge_candidate){ (uint64_t)(1000 - i) * KB, 1000, 0 };
    CHECK_EQ(pick(INDEX_MERGE_LAZY, c, 32, 256 * MB, got, sizeof got), 0);
    CHECK_EQ(pick(INDEX_MERGE_LAZY, c, 33, 256 * MB, got, sizeof got), 10);
    CHECK(strcmp(got, "23,24,25,26,27,28,29,30,31,32") == 0);
    CHECK_EQ(pick(INDEX_MERGE_NONE, c, 40, 256 * MB, got, sizeof got), 0);
    enum index_merge_policy p;
    CHECK_EQ(index_merge_policy_parse("lazy", &p), HANU_OK);
    CHECK_EQ(p, INDEX_MERGE_LAZY);
    CHECK_EQ(index_merge_policy_parse("tiered", &p), HANU_ERR_INVALID);
}

/* ---- the indexer merges under churn ---- */

#define IDS 300
static char data_dir[512], index_dir[600];
static uint64_t model_txn[IDS];
static int model_live[IDS];

static store *open_store(void) { return test_index_store_open(data_dir, 0); }

static indexer *open_indexer(store *st, int policy) { return test_indexer_open(st, index_dir, policy); }

static void write_round(store *st, uint32_t db, int n)
{
    for (int k = 0; k < n; k++) {
        int i = (int)(rnd() % IDS);
        char id[16], doc[512];
        snprintf(id, sizeof id, "d%04d", i);
        int len = gen_doc(doc, sizeof doc, i);
        int del = rnd() % 5 == 0;
        store_op op = { del ? STORE_DELETE : STORE_SET, id, 5, doc, del ? 0 : (size_t)len };
        uint64_t txn;
        CHECK_EQ(store_write(st, db, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
        model_live[i] = !del;
        if (!del) model_txn[i] = txn;
    }
    store_flush(st);
}

/* The snapshot holds each live id once at its newest txn, nothing else. */
static void check_index(indexer *ix, uint32_t db)
{
    int seen[IDS] = { 0 }, want = 0, got = 0;
    for (int i = 0; i < IDS; i++) want += model_live[i];
    index_snapshot *snap = index_snapshot_acquire(ix, db);
    REQUIRE(snap);
    for (uint32_t s = 0; s < snap->nsegments; s++)
        for (uint32_t ord = 0; ord < index_segment_docs(snap->segments[s].seg); ord++) {
            if (!index_snapshot_live(snap, s, ord)) continue;
            size_t len;
            const char *id = index_segment_doc_id(snap->segments[s].seg, ord, &len);
            int i = atoi(id + 1);
            REQUIRE(len == 5 && i >= 0 && i < IDS);
            CHECK(model_live[i] && !seen[i]);
            CHECK_EQ(index_segment_doc_txn(snap->segments[s].seg, ord), model_txn[i]);
            seen[i] = 1;
            got++;
        }
    CHECK_EQ(got, want);
    CHECK_EQ(snap->live_docs, want);
    index_snapshot_release(snap);
}

static int count_files(const char *prefix)
{
    DIR *d = opendir(index_dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' && strncmp(de->d_name, prefix, strlen(prefix)) == 0) n++;
    if (d) closedir(d);
    return n;
}

/* Waits (bounded) until no merge runs and none is due; returns the stats. */
static indexer_stats settle(store *st, indexer *ix)
{
    indexer_stats s;
    for (int i = 0; i < 2000; i++) {
        indexer_commit_now(ix);
        CHECK_EQ(indexer_wait_txn(ix, store_last_txn(st), 10000), HANU_OK);
        indexer_get_stats(ix, &s);
        /* Also the durable half of the last commit: it removes the files a merge
           retired (the txn waited for may have been committed before that merge). */
        if (!s.merging && !s.committing) break;
        usleep(5000);
    }
    return s;
}

static void test_indexer_merges(void)
{
    snprintf(data_dir, sizeof data_dir, "%s", test_tmpdir("merge-indexer"));
    snprintf(index_dir, sizeof index_dir, "%s/index", data_dir);
    memset(model_live, 0, sizeof model_live);
    store *st = open_store();
    REQUIRE(st);
    uint64_t txn;
    REQUIRE(store_db_create(st, "c", 1, STORE_DB_COLLECTION, &txn) == HANU_OK);
    uint32_t db;
    REQUIRE(store_db_lookup(st, "c", 1, &db) == HANU_OK);

    /* Without merges every commit adds a segment. */
    indexer *ix = open_indexer(st, INDEX_MERGE_NONE);
    REQUIRE(ix);
    for (int round = 0; round < 12; round++) {
        write_round(st, db, 60);
        CHECK_EQ(indexer_wait_txn(ix, store_last_txn(st), 10000), HANU_OK);
    }
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.merges, 0);
    CHECK(s.segments >= 10);
    uint64_t unmerged = s.segments;
    check_index(ix, db);
    indexer_close(ix);

    /* With the default policy the open starts merging what is there; a snapshot
     * taken before keeps its files until it is released. */
    ix = open_indexer(st, INDEX_MERGE_DEFAULT);
    REQUIRE(ix);
    index_snapshot *old = index_snapshot_acquire(ix, db);
    REQUIRE(old);
    char first[700];
    snprintf(first, sizeof first, "%s/seg-%llu.hix", index_dir, (unsigned long long)old->segments[0].id);
    for (int round = 0; round < 20; round++) {
        write_round(st, db, 40);
        CHECK_EQ(indexer_wait_txn(ix, store_last_txn(st), 10000), HANU_OK);
    }
    s = settle(st, ix);
    CHECK(s.merges >= 2);
    CHECK(s.merge_docs > 0 && s.merge_bytes > 0);
    CHECK_EQ(s.merges_abandoned, 0);
    CHECK(s.segments < unmerged);
    CHECK(s.segments < INDEX_MERGE_FACTOR * 3);
    check_index(ix, db);
    CHECK(access(first, F_OK) == 0);   /* merged away, still held */
    index_snapshot_release(old);
    CHECK(access(first, F_OK) != 0);
    /* Every file is named by the commit: segments and deletion lists only. */
    CHECK_EQ(count_files("seg-"), (int)s.segments);
    CHECK_EQ(count_files(""), count_files("seg-") + count_files("del-") + 1);
    CHECK_EQ(count_files("COMMIT"), 1);
    indexer_close(ix);

    /* The merged index is what the next open finds, whole. */
    ix = open_indexer(st, INDEX_MERGE_NONE);
    REQUIRE(ix);
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.rebuilt, 0);
    CHECK_EQ(s.index_txn, store_last_txn(st));
    check_index(ix, db);
    indexer_close(ix);
    store_close(st);
}

/* ---- the document cache ---- */

static void test_doc_cache(void)
{
    snprintf(data_dir, sizeof data_dir, "%s", test_tmpdir("merge-cache"));
    store *st = open_store();
    REQUIRE(st);
    uint64_t txn, t1, t2, got;
    REQUIRE(store_db_create(st, "c", 1, STORE_DB_COLLECTION, &txn) == HANU_OK);
    uint32_t db;
    REQUIRE(store_db_lookup(st, "c", 1, &db) == HANU_OK);
    doc_cache *c = doc_cache_new(16 * 64 * 1024);   /* 64 KiB a shard */
    REQUIRE(c);
    store_op op = { STORE_SET, "a", 1, "{\"v\":1}", 7 };
    CHECK_EQ(store_write(st, db, &op, 1, STORE_COND_NONE, 0, &t1, NULL), HANU_OK);
    hanu_buf b = { 0 };
    CHECK_EQ(doc_cache_get(c, st, db, "a", 1, &b, &got), HANU_OK);
    CHECK_EQ(got, t1);
    CHECK(b.len == 7 && memcmp(b.data, "{\"v\":1}", 7) == 0);
    hanu_buf_reset(&b);
    CHECK_EQ(doc_cache_get(c, st, db, "a", 1, &b, &got), HANU_OK);
    CHECK(b.len == 7 && memcmp(b.data, "{\"v\":1}", 7) == 0);
    doc_cache_stats cs;
    doc_cache_get_stats(c, &cs);
    CHECK_EQ(cs.hits, 1);
    CHECK_EQ(cs.misses, 1);
    CHECK_EQ(cs.entries, 1);
    /* A newer version, nobody invalidates: the copy is not served. */
    op.value = "{\"v\":22}";
    op.value_len = 8;
    CHECK_EQ(store_write(st, db, &op, 1, STORE_COND_NONE, 0, &t2, NULL), HANU_OK);
    hanu_buf_reset(&b);
    CHECK_EQ(doc_cache_get(c, st, db, "a", 1, &b, &got), HANU_OK);
    CHECK_EQ(got, t2);
    CHECK(b.len == 8 && memcmp(b.data, "{\"v\":22}", 8) == 0);
    /* Deleted: not found, whatever the cache holds. */
    store_op del = { STORE_DELETE, "a", 1, NULL, 0 };
    CHECK_EQ(store_write(st, db, &del, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    hanu_buf_reset(&b);
    CHECK_EQ(doc_cache_get(c, st, db, "a", 1, &b, &got), HANU_ERR_NOT_FOUND);
    doc_cache_invalidate(c, db, "a", 1);
    doc_cache_get_stats(c, &cs);
    CHECK_EQ(cs.invalidations, 1);
    CHECK_EQ(cs.entries, 0);
    CHECK_EQ(cs.bytes, 0);
    /* Bounded: a thousand 1 KiB documents stay within the budget. */
    char doc[1100];
    memset(doc, 'x', sizeof doc);
    doc[0] = '"';
    doc[1023] = '"';
    for (int i = 0; i < 1000; i++) {
        char id[16];
        int n = snprintf(id, sizeof id, "k%d", i);
        store_op put = { STORE_SET, id, (size_t)n, doc, 1024 };
        CHECK_EQ(store_write(st, db, &put, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
        hanu_buf_reset(&b);
        CHECK_EQ(doc_cache_get(c, st, db, id, (size_t)n, &b, &got), HANU_OK);
        CHECK_EQ(b.len, 1024);
    }
    doc_cache_get_stats(c, &cs);
    CHECK(cs.bytes <= cs.budget);
    CHECK(cs.evictions > 0);
    CHECK(cs.entries > 100);
    hanu_buf_free(&b);
    doc_cache_free(c);
    store_close(st);
}

int main(void)
{
    RUN(test_merge_equals_direct_build);
    RUN(test_stream_equals_rebuild);
    RUN(test_policy);
    RUN(test_indexer_merges);
    RUN(test_doc_cache);
    TEST_DONE();
}
