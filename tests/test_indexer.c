/*
 * test_indexer.c: the indexer thread over a real store in a temporary folder.
 * After puts, overwrites and deletes across collections and a key-value
 * database, the published snapshot holds exactly the store's live documents
 * (each id once, at its newest txn; the key-value database not at all); a
 * restart resumes from COMMIT without rewriting segments and without losing
 * what came after it; a damaged segment is rebuilt from the log; leftover
 * files of an interrupted commit are removed; the watermark holds compaction.
 * index_find equals filter_match over every stored document for hundreds of
 * generated filters.
 */
#include "test.h"
#include "test_index_util.h"
#include "index/index.h"
#include "json/json.h"
#include "query/query.h"
#include "store/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#define IDS 150

/* What the store should hold per collection: the newest txn of each id. */
typedef struct model {
    uint32_t db;
    uint64_t txn[IDS];
    int live[IDS];
} model;

static char data_dir[512], index_dir[600];

static store *store_at(void) { return test_index_store_open(data_dir, 1 << 20); }

static indexer *indexer_at(store *st) { return test_indexer_open(st, index_dir, INDEX_MERGE_DEFAULT); }

static void id_of(int i, char *out)
{
    snprintf(out, 16, "d%03d", i);
}

static int put_doc(store *st, model *m, int i, unsigned salt)
{
    char id[16], doc[128];
    id_of(i, id);
    int len = snprintf(doc, sizeof doc, "{\"_id\":\"%s\",\"n\":%u,\"tag\":\"t%u\",\"text\":\"word w%u\"}",
                       id, salt, salt % 7, salt % 13);
    store_op op = { STORE_SET, id, strlen(id), doc, (size_t)len };
    uint64_t txn;
    int rc = store_write(st, m->db, &op, 1, STORE_COND_NONE, 0, &txn, NULL);
    if (rc == HANU_OK) {
        m->txn[i] = txn;
        m->live[i] = 1;
    }
    return rc;
}

static int delete_doc(store *st, model *m, int i)
{
    char id[16];
    id_of(i, id);
    store_op op = { STORE_DELETE, id, strlen(id), NULL, 0 };
    uint64_t txn;
    int rc = store_write(st, m->db, &op, 1, STORE_COND_NONE, 0, &txn, NULL);
    if (rc == HANU_OK) m->live[i] = 0;
    return rc;
}

/* The snapshot's live documents are the model's, each once, at its txn, and the store agrees. */
static void check_equal(store *st, indexer *ix, const model *m)
{
    int seen[IDS] = {0}, want = 0, got = 0;
    for (int i = 0; i < IDS; i++) want += m->live[i];
    index_snapshot *snap = index_snapshot_acquire(ix, m->db);
    if (!want) {
        CHECK(snap == NULL || snap->live_docs == 0);
    } else {
        REQUIRE(snap != NULL);
    }
    for (uint32_t s = 0; snap && s < snap->nsegments; s++) {
        const index_segment *seg = snap->segments[s].seg;
        for (uint32_t ord = 0; ord < index_segment_docs(seg); ord++) {
            if (!index_snapshot_live(snap, s, ord)) continue;
            size_t len;
            const char *id = index_segment_doc_id(seg, ord, &len);
            int i = -1;
            if (len == 4 && id[0] == 'd') i = atoi(id + 1);
            REQUIRE(i >= 0 && i < IDS);
            CHECK(m->live[i]);
            CHECK_EQ(seen[i], 0);
            CHECK_EQ(index_segment_doc_txn(seg, ord), m->txn[i]);
            seen[i] = 1;
            got++;
        }
    }
    CHECK_EQ(got, want);
    if (snap) CHECK_EQ(snap->live_docs, (uint64_t)want);
    index_snapshot_release(snap);
    for (int i = 0; i < IDS; i++) {
        char id[16];
        id_of(i, id);
        hanu_buf v = {0};
        uint64_t token = 0;
        CHECK_EQ(store_get(st, m->db, id, strlen(id), &v, &token), m->live[i] ? HANU_OK : HANU_ERR_NOT_FOUND);
        if (m->live[i]) CHECK_EQ(token, m->txn[i]);   /* the store's token is the txn */
        hanu_buf_free(&v);
    }
}

static unsigned rnd_state = 12345;
static unsigned rnd(void)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return rnd_state >> 8;
}

/* n random puts (3 in 4) and deletes over the collections, and puts in kv. */
static void churn(store *st, model *cols, int ncols, uint32_t kv, int n)
{
    for (int k = 0; k < n; k++) {
        model *m = &cols[rnd() % (unsigned)ncols];
        int i = (int)(rnd() % IDS);
        if (rnd() % 4) CHECK_EQ(put_doc(st, m, i, rnd() % 1000), HANU_OK);
        else CHECK_EQ(delete_doc(st, m, i), HANU_OK);
        if (k % 10 == 0) {
            model junk = { .db = kv };
            CHECK_EQ(put_doc(st, &junk, i, 1), HANU_OK);
        }
    }
}

static uint32_t create(store *st, const char *name, uint8_t kind)
{
    uint64_t txn;
    uint32_t id = UINT32_MAX;
    if (store_db_create(st, name, strlen(name), kind, &txn) == HANU_OK) store_db_lookup(st, name, strlen(name), &id);
    return id;
}

/* The feed sees what is in the log file: flush this (writer) thread's frames first. */
static int wait_all(store *st, indexer *ix)
{
    store_flush(st);
    return indexer_wait_txn(ix, store_last_txn(st), 10000);
}

/* The files of the index folder, "name:inode" in readdir order (sorted by the caller). */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_files(char *out, size_t cap)
{
    char *names[256];
    int n = 0;
    DIR *d = opendir(index_dir);
    struct dirent *de;
    while (d && (de = readdir(d)) && n < 256) {
        if (de->d_name[0] == '.') continue;
        char path[1200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", index_dir, de->d_name);
        if (stat(path, &sb) != 0) continue;
        names[n] = malloc(300);
        snprintf(names[n], 300, "%s:%lu:%lld", de->d_name, (unsigned long)sb.st_ino, (long long)sb.st_size);
        n++;
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s ", names[i]);
        free(names[i]);
    }
}

static int file_exists(const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", index_dir, name);
    return access(path, F_OK) == 0;
}

static void set_dirs(const char *name)
{
    snprintf(data_dir, sizeof data_dir, "%s", test_tmpdir(name));
    snprintf(index_dir, sizeof index_dir, "%s/index", data_dir);
}

/* Writes, overwrites and deletes; the kv database stays out; a dropped collection goes. */
static void test_live_equals_store(void)
{
    set_dirs("indexer-live");
    store *st = store_at();
    REQUIRE(st);
    model cols[2] = { { .db = create(st, "a", STORE_DB_COLLECTION) }, { .db = create(st, "b", STORE_DB_COLLECTION) } };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    for (int round = 0; round < 4; round++) {
        churn(st, cols, 2, kv, 300);
        CHECK_EQ(wait_all(st, ix), HANU_OK);
        check_equal(st, ix, &cols[0]);
        check_equal(st, ix, &cols[1]);
        CHECK(index_snapshot_acquire(ix, kv) == NULL);
    }
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.index_txn, store_last_txn(st));
    CHECK_EQ(s.lag_txns, 0);
    CHECK(s.segments >= 2);

    /* A snapshot held across a commit keeps what it saw. */
    index_snapshot *old = index_snapshot_acquire(ix, cols[1].db);
    REQUIRE(old);
    uint64_t old_live = old->live_docs;
    uint64_t txn;
    CHECK_EQ(store_db_drop(st, "b", 1, &txn), HANU_OK);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    CHECK(index_snapshot_acquire(ix, cols[1].db) == NULL);
    uint32_t segs;
    uint64_t live, bytes;
    indexer_collection_stats(ix, cols[1].db, &segs, &live, &bytes);
    CHECK_EQ(segs, 0);
    CHECK_EQ(old->live_docs, old_live);
    /* Files are gone once no snapshot holds them (a merge may have retired some
     * of them before the drop: those go with this release). */
    uint64_t ids[64];
    uint32_t nids = old->nsegments < 64 ? old->nsegments : 64;
    for (uint32_t i = 0; i < nids; i++) {
        ids[i] = old->segments[i].id;
        CHECK(index_segment_docs(old->segments[i].seg) > 0);
    }
    index_snapshot_release(old);
    for (uint32_t i = 0; i < nids; i++) {
        char name[64];
        snprintf(name, sizeof name, "seg-%llu.hix", (unsigned long long)ids[i]);
        CHECK(!file_exists(name));
    }
    check_equal(st, ix, &cols[0]);
    indexer_collection_stats(ix, cols[0].db, &segs, &live, &bytes);
    CHECK(segs >= 1 && bytes > 0);
    indexer_close(ix);
    store_close(st);
}

/* Restart: no re-indexing (same files), nothing lost after the last commit. */
static void test_restart_resumes(void)
{
    set_dirs("indexer-restart");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "a", STORE_DB_COLLECTION) };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    churn(st, &col, 1, kv, 400);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    uint64_t committed = indexer_txn(ix);
    indexer_close(ix);

    static char before[8192], after[8192];
    list_files(before, sizeof before);
    ix = indexer_at(st);
    REQUIRE(ix);
    CHECK_EQ(indexer_txn(ix), committed);
    check_equal(st, ix, &col);
    list_files(after, sizeof after);
    CHECK(strcmp(before, after) == 0);

    /* Writes after the last commit, then a stop before the next one. */
    churn(st, &col, 1, kv, 200);
    indexer_close(ix);
    store_close(st);
    st = store_at();
    REQUIRE(st);
    ix = indexer_at(st);
    REQUIRE(ix);
    CHECK_EQ(indexer_txn(ix), committed);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.rebuilt, 0);
    indexer_close(ix);
    store_close(st);
}

/* One flipped byte in a segment: detected at open, rebuilt from the log, equal again. */
static void test_damaged_segment_rebuilds(void)
{
    set_dirs("indexer-damage");
    store *st = store_at();
    REQUIRE(st);
    model cols[2] = { { .db = create(st, "a", STORE_DB_COLLECTION) }, { .db = create(st, "b", STORE_DB_COLLECTION) } };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    for (int round = 0; round < 3; round++) {
        churn(st, cols, 2, kv, 200);
        CHECK_EQ(wait_all(st, ix), HANU_OK);
    }
    indexer_close(ix);
    /* A segment the last COMMIT names (a published snapshot may hold a refresh's
       segment that a merge or the close removed since: flaked under load). */
    index_commit committed;
    char err[256] = "";
    REQUIRE(index_commit_read(index_dir, &committed, err, sizeof err) == HANU_OK);
    REQUIRE(committed.nsegments > 0);
    char path[1200];
    snprintf(path, sizeof path, "%s/seg-%llu.hix", index_dir, (unsigned long long)committed.segments[0].segment);
    index_commit_free(&committed);

    int fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t byte;
    CHECK_EQ(pread(fd, &byte, 1, 100), 1);
    byte ^= 0x40;
    CHECK_EQ(pwrite(fd, &byte, 1, 100), 1);
    close(fd);

    ix = indexer_at(st);
    REQUIRE(ix);
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.rebuilt, 1);
    CHECK_EQ(s.index_txn, 0);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &cols[0]);
    check_equal(st, ix, &cols[1]);
    CHECK(index_snapshot_acquire(ix, kv) == NULL);
    indexer_close(ix);

    /* The rebuilt index is trusted at the next open. */
    ix = indexer_at(st);
    REQUIRE(ix);
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.rebuilt, 0);
    CHECK_EQ(s.index_txn, store_last_txn(st));
    indexer_close(ix);
    store_close(st);
}

/* A crash between writing a segment and renaming COMMIT leaves files no commit names. */
static void test_leftovers_removed(void)
{
    set_dirs("indexer-leftover");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "a", STORE_DB_COLLECTION) };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    churn(st, &col, 1, kv, 100);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    indexer_close(ix);

    /* What an interrupted commit leaves: a whole new segment, a deletion list, COMMIT.tmp. */
    index_builder *b = index_builder_new();
    REQUIRE(b);
    CHECK_EQ(index_add_document(b, "d000", 4, 1, "{\"_id\":\"d000\"}", 14), HANU_OK);
    char path[1200];
    snprintf(path, sizeof path, "%s/seg-900.hix", index_dir);
    CHECK_EQ(index_builder_write(b, path), HANU_OK);
    index_builder_free(b);
    uint32_t ord = 0;
    snprintf(path, sizeof path, "%s/del-900-1", index_dir);
    CHECK_EQ(index_deletes_write(path, 900, 1, &ord, 1), HANU_OK);
    snprintf(path, sizeof path, "%s/COMMIT.tmp", index_dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("half", f);
    fclose(f);

    ix = indexer_at(st);
    REQUIRE(ix);
    CHECK(!file_exists("seg-900.hix"));
    CHECK(!file_exists("del-900-1"));
    CHECK(!file_exists("COMMIT.tmp"));
    CHECK(file_exists("COMMIT"));
    check_equal(st, ix, &col);
    churn(st, &col, 1, kv, 100);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    indexer_close(ix);
    store_close(st);
}

/* With the indexer stopped behind, compaction keeps what it has not indexed. */
static void test_watermark_holds_compaction(void)
{
    set_dirs("indexer-floor");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "a", STORE_DB_COLLECTION) };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    churn(st, &col, 1, kv, 200);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    uint64_t committed = indexer_txn(ix);
    indexer_close(ix);

    /* Overwrite everything several times over a few files, then compact all of them. */
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < IDS; i++) CHECK_EQ(put_doc(st, &col, i, (unsigned)(round * 1000 + i)), HANU_OK);
        CHECK_EQ(store_rotate(st), HANU_OK);
    }
    for (int i = 0; i < IDS; i += 3) CHECK_EQ(delete_doc(st, &col, i), HANU_OK);
    CHECK_EQ(store_sync(st), HANU_OK);
    CHECK_EQ(store_floor(st), committed);
    char err[256];
    CHECK_EQ(store_compact(st, 1, err, sizeof err), HANU_OK);

    ix = indexer_at(st);
    REQUIRE(ix);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    CHECK_EQ(store_floor(st), store_last_txn(st));
    indexer_close(ix);
    store_close(st);
}

/* Commits without a waiter: on the interval, and at once on indexer_commit_now. */
static int reaches(indexer *ix, uint64_t txn)
{
    for (int i = 0; i < 2000 && indexer_txn(ix) < txn; i++) usleep(5000);
    return indexer_txn(ix) >= txn;
}

static void test_commit_triggers(void)
{
    set_dirs("indexer-triggers");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "a", STORE_DB_COLLECTION) };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    churn(st, &col, 1, kv, 50);
    store_flush(st);
    indexer_commit_now(ix);
    CHECK(reaches(ix, store_last_txn(st)));
    check_equal(st, ix, &col);
    /* A txn nobody wrote yet: the wait ends at its timeout with BUSY. */
    CHECK_EQ(indexer_wait_txn(ix, store_last_txn(st) + 1, 20), HANU_ERR_BUSY);
    indexer_close(ix);

    indexer_options o;
    indexer_options_default(&o);
    o.dir = index_dir;
    o.commit_interval_ms = 20;
    o.quiet = 1;
    char err[512] = "";
    REQUIRE(indexer_open(st, &o, &ix, err, sizeof err) == HANU_OK);
    churn(st, &col, 1, kv, 50);
    store_flush(st);
    CHECK(reaches(ix, store_last_txn(st)));
    check_equal(st, ix, &col);
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK(s.commits >= 1);
    CHECK_EQ(s.failed, 0);
    indexer_close(ix);
    store_close(st);
}

/* The pending bound (pending_cut_bytes): an indexer that reads far more than the
 * bound in one go (it opens behind the whole churn) writes the pending versions out
 * as segments each time they pass it, so what it holds never exceeds the bound by
 * more than one record; the segments are published and synced by the commit as a
 * refresh's are, overwrites and deletes across them stay exact, and a stop before
 * the commit (as a crash) finds the index at its last commit and indexes the rest
 * again. With no bound (the code before it) the commit wrote one segment. */
static indexer *indexer_bounded(store *st, uint64_t cut)
{
    indexer_options o;
    indexer_options_default(&o);
    o.dir = index_dir;
    o.commit_interval_ms = 600000;   /* only a waiter commits */
    o.quiet = 1;
    o.merge_policy = INDEX_MERGE_NONE;   /* the segments the cuts wrote stay countable */
    o.pending_cut_bytes = cut;
    char err[512] = "";
    indexer *ix = NULL;
    if (indexer_open(st, &o, &ix, err, sizeof err) != HANU_OK) fprintf(stderr, "  indexer: %s\n", err);
    return ix;
}

static void test_pending_bound(void)
{
    enum { CUT = 4096, RECORD_MAX = 256 };   /* one put's id, text and entry: well under RECORD_MAX */
    set_dirs("indexer-bound");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "a", STORE_DB_COLLECTION) };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    churn(st, &col, 1, kv, 3000);   /* about 2250 puts: some 50 times the bound */
    indexer *ix = indexer_bounded(st, CUT);
    REQUIRE(ix);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK(s.cuts >= 20);
    CHECK(s.pending_bytes_peak >= CUT);
    CHECK(s.pending_bytes_peak < CUT + RECORD_MAX);
    CHECK_EQ(s.refreshes, 0);
    uint32_t nsegs;
    uint64_t live, bytes;
    indexer_collection_stats(ix, col.db, &nsegs, &live, &bytes);
    CHECK(nsegs > 1);
    uint64_t committed = indexer_txn(ix);
    CHECK_EQ(committed, store_last_txn(st));
    /* More than the bound again, then a stop before any commit: the cut segments are
       files COMMIT does not name, removed at the open, and their records read again. */
    churn(st, &col, 1, kv, 1000);
    store_flush(st);
    for (int i = 0; i < 2000; i++) {
        indexer_get_stats(ix, &s);
        if (s.cuts >= 30) break;
        usleep(1000);
    }
    CHECK(s.cuts >= 30);
    CHECK_EQ(indexer_txn(ix), committed);
    indexer_close(ix);
    ix = indexer_bounded(st, CUT);
    REQUIRE(ix);
    CHECK_EQ(indexer_txn(ix), committed);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    indexer_close(ix);
    ix = indexer_at(st);   /* the default bound: a restart finds the same */
    REQUIRE(ix);
    CHECK_EQ(indexer_txn(ix), store_last_txn(st));
    check_equal(st, ix, &col);
    indexer_close(ix);
    store_close(st);
}

/* A refresh publishes without a commit: readers see the churn (puts and deletes)
 * while COMMIT and the watermark stay where they were; the refresh's segments
 * are made durable by the next commit, and a restart before it (a crash) finds
 * the index at its last commit and indexes the rest again. */
static void test_refresh_publishes_without_commit(void)
{
    set_dirs("indexer-refresh");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "a", STORE_DB_COLLECTION) };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    indexer *ix = indexer_at(st);   /* commit interval 600 s: only a waiter commits */
    REQUIRE(ix);
    churn(st, &col, 1, kv, 80);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    uint64_t committed = indexer_txn(ix);
    for (int round = 0; round < 3; round++) {
        churn(st, &col, 1, kv, 60);
        for (int i = 0; i < 5; i++) CHECK_EQ(delete_doc(st, &col, i), HANU_OK);   /* deletes of committed ones */
        store_flush(st);
        uint64_t want = store_last_txn(st);
        indexer_refresh_upto(ix, want);
        for (int i = 0; i < 2000 && indexer_visible_txn(ix) < want; i++) usleep(1000);
        CHECK(indexer_visible_txn(ix) >= want);
        CHECK_EQ(indexer_txn(ix), committed);   /* no commit */
        check_equal(st, ix, &col);
    }
    /* Many small refreshes: the refresh segments are merged among themselves as
       they come (4 of a size class into one), so they stay few. */
    for (int round = 0; round < 60; round++) {
        churn(st, &col, 1, kv, 3);
        store_flush(st);
        uint64_t want = store_last_txn(st);
        indexer_refresh_upto(ix, want);
        for (int i = 0; i < 2000 && indexer_visible_txn(ix) < want; i++) usleep(500);
        CHECK(indexer_visible_txn(ix) >= want);
    }
    check_equal(st, ix, &col);
    uint32_t nsegs;
    uint64_t live, bytes;
    indexer_collection_stats(ix, col.db, &nsegs, &live, &bytes);
    CHECK(nsegs <= 12);
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK(s.refreshes >= 63);
    CHECK_EQ(s.index_txn, committed);
    indexer_close(ix);   /* a stop before the commit: as a crash, COMMIT is the old one */

    ix = indexer_at(st);
    REQUIRE(ix);
    CHECK_EQ(indexer_txn(ix), committed);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    /* refresh, then commit: the refresh's segments go into COMMIT synced */
    churn(st, &col, 1, kv, 40);
    store_flush(st);
    indexer_refresh_upto(ix, store_last_txn(st));
    for (int i = 0; i < 2000 && indexer_visible_txn(ix) < store_last_txn(st); i++) usleep(1000);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    CHECK_EQ(indexer_txn(ix), store_last_txn(st));
    indexer_close(ix);
    ix = indexer_at(st);
    REQUIRE(ix);
    CHECK_EQ(indexer_txn(ix), store_last_txn(st));
    check_equal(st, ix, &col);
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.rebuilt, 0);
    indexer_close(ix);
    store_close(st);
}

/* ---- index_find against filter_match ---- */

#define FIND_DOCS 500

/* arr.0: a position, which the index leaves to the documents (and [[7]] to the whole-element rule) */
static const char *const fields[] = { "n", "tag", "flag", "arr", "obj.x", "none", "arr.0" };
#define NFIELDS 7

/* A scalar operand of the kind that field holds (sometimes of another kind). */
static int operand(char *out, size_t cap, int field)
{
    switch (rnd() % 9 == 0 ? (int)(rnd() % 4) : field == 6 && rnd() % 5 == 0 ? 5 : field) {
    case 0: case 3: case 4: case 6: return snprintf(out, cap, "%d", (int)(rnd() % 24) - 2);
    case 1: return snprintf(out, cap, "\"t%u\"", rnd() % 8);
    case 2: return snprintf(out, cap, rnd() % 2 ? "true" : "false");
    default: return snprintf(out, cap, rnd() % 2 ? "null" : "\"x\"");
    }
}

static int gen_filter(char *out, size_t cap, int depth);

static int gen_clause(char *out, size_t cap, int depth, unsigned *used)
{
    static const char *const ops[] = { "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists" };
    int field = (int)(rnd() % NFIELDS), len = 0;
    char v[64];
    unsigned pick = rnd() % 12, logic_pick = pick == 0 ? rnd() % 2 : 2;
    unsigned key = depth < 3 && pick < 2 ? 1u << (NFIELDS + logic_pick) : 1u << field;
    if (*used & key) return 0;
    *used |= key;
    if (depth < 3 && pick < 2) {
        const char *logic = logic_pick == 0 ? "$and" : logic_pick == 1 ? "$or" : "$nor";
        len = snprintf(out, cap, "\"%s\":[", logic);
        int kids = 1 + (int)(rnd() % 3);
        for (int k = 0; k < kids; k++) {
            if (k) len += snprintf(out + len, cap - (size_t)len, ",");
            len += gen_filter(out + len, cap - (size_t)len, depth + 1);
        }
        return len + snprintf(out + len, cap - (size_t)len, "]");
    }
    if (pick < 5) {
        operand(v, sizeof v, field);
        return snprintf(out, cap, "\"%s\":%s", fields[field], v);
    }
    const char *op = ops[rnd() % 9];
    if (strcmp(op, "$exists") == 0) return snprintf(out, cap, "\"%s\":{\"$exists\":%s}", fields[field], rnd() % 2 ? "true" : "false");
    if (strcmp(op, "$in") == 0 || strcmp(op, "$nin") == 0) {
        len = snprintf(out, cap, "\"%s\":{\"%s\":[", fields[field], op);
        int vals = (int)(rnd() % 4);
        for (int k = 0; k < vals; k++) {
            operand(v, sizeof v, field);
            len += snprintf(out + len, cap - (size_t)len, "%s%s", k ? "," : "", v);
        }
        return len + snprintf(out + len, cap - (size_t)len, "]}");
    }
    operand(v, sizeof v, field);
    if (rnd() % 6 == 0) return snprintf(out, cap, "\"%s\":{\"$not\":{\"%s\":%s}}", fields[field], op, v);
    return snprintf(out, cap, "\"%s\":{\"%s\":%s}", fields[field], op, v);
}

static int gen_filter(char *out, size_t cap, int depth)
{
    int len = snprintf(out, cap, "{");
    int clauses = (int)(rnd() % 3);
    unsigned used = 0;   /* keys of this object so far: one object names a key once */
    for (int k = 0; k < clauses; k++) {
        if (len > 1) len += snprintf(out + len, cap - (size_t)len, ",");
        int wrote = gen_clause(out + len, cap - (size_t)len, depth, &used);
        if (wrote) len += wrote;
        else if (len > 1 && out[len - 1] == ',') len--;   /* the key was taken */
    }
    return len + snprintf(out + len, cap - (size_t)len, "}");
}

/* No sort (by _id) half the time, else one or two keys of n, tag, flag, obj.x. */
static void gen_sort(sort_spec *sort)
{
    static const char *const paths[] = { "n", "tag", "flag", "obj.x" };
    memset(sort, 0, sizeof *sort);
    if (rnd() % 2) return;
    sort->n = 1 + rnd() % 2;
    for (size_t k = 0; k < sort->n; k++) {
        snprintf(sort->keys[k].path, sizeof sort->keys[k].path, "%s", paths[rnd() % 4]);
        sort->keys[k].descending = (int)(rnd() % 2);
    }
}

typedef struct brute_doc {
    int i;
    json_doc *doc;
    const json_value *keys[SORT_MAX_KEYS];
    char id[16];
} brute_doc;

static int cmp_brute(const void *a, const void *b, void *spec)
{
    const brute_doc *x = a, *y = b;
    return sort_compare(spec, x->keys, x->id, strlen(x->id), y->keys, y->id, strlen(y->id));
}

/* The brute-force answer: matching indexes in order, -1 terminated (malloc'd). */
static int *brute_find(const filter *f, char (*docs)[256], const sort_spec *sort, size_t offset, size_t limit,
                       int *rc, size_t *total)
{
    brute_doc *v = calloc(FIND_DOCS, sizeof *v);
    int *out = malloc((FIND_DOCS + 1) * sizeof *out);
    size_t n = 0;
    *rc = HANU_OK;
    for (int i = 0; i < FIND_DOCS; i++) {
        if (!docs[i][0] || filter_match(f, docs[i], strlen(docs[i])) != 1) continue;
        brute_doc *d = &v[n++];
        d->i = i;
        snprintf(d->id, sizeof d->id, "k%03d", i);
        json_doc_parse(docs[i], strlen(docs[i]), NULL, &d->doc, NULL);
        query_error e;
        if (sort->n && sort_keys_of(sort, json_doc_root(d->doc), d->keys, &e) != HANU_OK) *rc = HANU_ERR_INVALID;
    }
    if (*rc == HANU_OK && sort->n) qsort_r(v, n, sizeof *v, cmp_brute, (void *)sort);
    size_t k = 0;
    for (size_t j = offset; j < n && (!limit || k < limit); j++) out[k++] = v[j].i;
    out[k] = -1;
    *total = n;
    for (size_t j = 0; j < n; j++) json_doc_free(v[j].doc);
    free(v);
    return out;
}

static void test_find_equals_filter_match(void)
{
    set_dirs("indexer-find");
    store *st = store_at();
    REQUIRE(st);
    uint32_t db = create(st, "a", STORE_DB_COLLECTION);
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    static char docs[FIND_DOCS][256];
    /* Three commits, with overwrites and deletes between them: several segments and deletions. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < FIND_DOCS; i++) {
            if (round && rnd() % 3) continue;
            char *d = docs[i];
            int len = snprintf(d, 256, "{\"_id\":\"k%03d\"", i);
            if (rnd() % 8) len += snprintf(d + len, 256 - (size_t)len, ",\"n\":%s", rnd() % 10 ? "" : "\"5\"");
            if (d[len - 1] == ':') len += snprintf(d + len, 256 - (size_t)len, "%d", (int)(rnd() % 20));
            if (rnd() % 8) len += snprintf(d + len, 256 - (size_t)len, ",\"tag\":\"t%u\"", rnd() % 7);
            if (rnd() % 2) len += snprintf(d + len, 256 - (size_t)len, ",\"flag\":%s", rnd() % 3 ? "true" : "null");
            unsigned shape = rnd() % 8;   /* the null rule and nested arrays: [null], [], [[x],y] */
            if (shape < 4) len += snprintf(d + len, 256 - (size_t)len, ",\"arr\":[%u,%u]", rnd() % 20, rnd() % 20);
            else if (shape == 4) len += snprintf(d + len, 256 - (size_t)len, ",\"arr\":[[%u],%u]", rnd() % 20, rnd() % 20);
            else if (shape == 5) len += snprintf(d + len, 256 - (size_t)len, ",\"arr\":%s", rnd() % 2 ? "[null]" : "[]");
            else if (shape == 6) len += snprintf(d + len, 256 - (size_t)len, ",\"arr\":null");
            if (rnd() % 2) len += snprintf(d + len, 256 - (size_t)len, ",\"obj\":{\"x\":%u}", rnd() % 20);
            else if (rnd() % 3 == 0) len += snprintf(d + len, 256 - (size_t)len, ",\"obj\":[{\"x\":%u},{\"x\":3}]", rnd() % 20);
            snprintf(d + len, 256 - (size_t)len, "}");
            char id[16];
            snprintf(id, sizeof id, "k%03d", i);
            int del = round && rnd() % 5 == 0;
            store_op op = { del ? STORE_DELETE : STORE_SET, id, strlen(id), d, del ? 0 : strlen(d) };
            uint64_t txn;
            CHECK_EQ(store_write(st, db, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
            if (del) d[0] = '\0';
        }
        CHECK_EQ(wait_all(st, ix), HANU_OK);
    }
    index_snapshot *snap = index_snapshot_acquire(ix, db);
    REQUIRE(snap);
    CHECK(snap->nsegments >= 2);
    int nonempty = 0, sorted = 0, refused = 0;
    for (int q = 0; q < 600; q++) {
        char text[4096];
        gen_filter(text, sizeof text, 0);
        filter *f = NULL;
        query_error qe;
        if (filter_parse(text, strlen(text), "filter", &f, &qe) != HANU_OK) {
            fprintf(stderr, "  generated %s: %s\n", text, qe.msg);
            CHECK(0);
            continue;
        }
        sort_spec sort;
        gen_sort(&sort);
        size_t offset = rnd() % 4 ? 0 : rnd() % 50, limit = rnd() % 3 ? 0 : 1 + rnd() % 40;
        index_hits hits;
        query_error find_err;
        int rc = index_find(st, snap, f, &sort, offset, limit, &hits, &find_err);
        int want_rc;
        size_t want_total;
        int *want = brute_find(f, docs, &sort, offset, limit, &want_rc, &want_total);
        REQUIRE(want);
        int same = rc == want_rc;
        for (size_t k = 0; same && rc == HANU_OK && k <= hits.n; k++) {
            if (k == hits.n) { same = want[k] < 0 && hits.total == want_total; break; }
            char id[16];
            snprintf(id, sizeof id, "k%03d", want[k]);
            same = want[k] >= 0 && strcmp(hits.hits[k].id, id) == 0 &&
                   hits.hits[k].doc_len == strlen(docs[want[k]]) &&
                   memcmp(hits.hits[k].doc, docs[want[k]], hits.hits[k].doc_len) == 0;
        }
        if (!same) fprintf(stderr, "  filter %s sort %zu keys offset %zu limit %zu: rc %d/%d, %zu hits of %zu, want %zu\n",
                           text, sort.n, offset, limit, rc, want_rc, rc ? 0 : hits.n, rc ? 0 : hits.total, want_total);
        CHECK(same);
        free(want);
        sorted += rc == HANU_OK && sort.n && hits.n > 1;
        refused += rc == HANU_ERR_INVALID;
        if (rc) {
            filter_free(f);
            continue;
        }
        nonempty += hits.n > 0;
        index_hits_free(&hits);
        filter_free(f);
    }
    CHECK(nonempty > 100);
    CHECK(sorted > 50);
    CHECK(refused > 10);   /* sort on obj.x where obj is an array */

    /* The index narrows: an equality and a range read no document, their AND with an array few. */
    static const char *const narrow[] = { "{\"tag\":\"t3\"}", "{\"n\":{\"$gte\":17}}",
                                          "{\"tag\":{\"$in\":[\"t1\",\"t2\"]},\"arr\":{\"$lt\":3}}" };
    for (int q = 0; q < 3; q++) {
        filter *f = NULL;
        query_error qe;
        REQUIRE(filter_parse(narrow[q], strlen(narrow[q]), "filter", &f, &qe) == HANU_OK);
        index_hits hits;
        CHECK_EQ(index_find(st, snap, f, NULL, 0, 0, &hits, &qe), HANU_OK);
        /* single-valued columns make an equality and a range exact: no document read */
        if (q < 2) CHECK(hits.checked == 0 && hits.total > 0);
        else CHECK(hits.checked > 0 && hits.checked < snap->live_docs / 4);   /* arr is an array: checked */
        index_hits_free(&hits);
        filter_free(f);
    }
    index_snapshot_release(snap);
    indexer_close(ix);
    store_close(st);
}

/* A collection's documents are scanned once, unchecked (the documents face checked
 * them when written). Bytes that are no JSON document in a collection all the same
 * (written here through the store) are left out, and the batch's other documents,
 * before and after them, are indexed. */
static void test_collection_bytes_not_json_left_out(void)
{
    set_dirs("indexer-notjson");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "c", STORE_DB_COLLECTION) };
    static const char *const bad[] = { "{\"_id\":\"bad0\",\"text\":\"cut", "not json", "{\"a\":1}{", "[1," };
    for (int i = 0; i < 40; i++) {
        CHECK_EQ(put_doc(st, &col, i, (unsigned)i), HANU_OK);
        if (i % 10 != 5) continue;
        char id[16];
        snprintf(id, sizeof id, "bad%d", i / 10);
        store_op op = { STORE_SET, id, strlen(id), bad[i / 10], strlen(bad[i / 10]) };
        uint64_t txn;
        CHECK_EQ(store_write(st, col.db, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    }
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    indexer_stats stats;
    indexer_get_stats(ix, &stats);
    CHECK_EQ(stats.live_docs, 40);
    indexer_close(ix);
    store_close(st);
}

/* Issue 24: the feed is filtered to collections. Key-value records reach no callback, yet
 * the index watermark passes them; a database dropped and created again as a collection
 * within one feed batch is indexed from its create on. */
static void test_kv_records_filtered(void)
{
    set_dirs("indexer-filter");
    store *st = store_at();
    REQUIRE(st);
    model col = { .db = create(st, "a", STORE_DB_COLLECTION) };
    uint32_t kv = create(st, "k", STORE_DB_KV);
    for (int i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof key, "x%d", i);
        store_op op = { STORE_SET, key, strlen(key), "not json", 8 };
        uint64_t txn;
        CHECK_EQ(store_write(st, i % 2 ? kv : STORE_DEFAULT_DB_ID, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    }
    uint64_t txn;
    CHECK_EQ(store_db_drop(st, "k", 1, &txn), HANU_OK);
    model again = { .db = create(st, "k", STORE_DB_COLLECTION) };
    for (int i = 0; i < 20; i++) CHECK_EQ(put_doc(st, &again, i, 3), HANU_OK);
    for (int i = 0; i < 10; i++) CHECK_EQ(put_doc(st, &col, i, 5), HANU_OK);
    /* Opened after the writes: its first feed batch holds all of them. */
    indexer *ix = indexer_at(st);
    REQUIRE(ix);
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    check_equal(st, ix, &col);
    check_equal(st, ix, &again);
    CHECK(kv == again.db || index_snapshot_acquire(ix, kv) == NULL);
    /* Key-value writes only: the watermark follows them at the next commit. */
    for (int i = 0; i < 2000; i++) {
        store_op op = { STORE_SET, "hot", 3, "v", 1 };
        CHECK_EQ(store_write(st, STORE_DEFAULT_DB_ID, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
        if (i % 64 == 0) store_flush(st);
    }
    CHECK_EQ(wait_all(st, ix), HANU_OK);
    indexer_stats s;
    indexer_get_stats(ix, &s);
    CHECK_EQ(s.index_txn, store_last_txn(st));
    CHECK_EQ(s.live_docs, 30);
    store_watermark wm[STORE_MAX_WATERMARKS];
    size_t nw = store_watermark_list(st, wm, STORE_MAX_WATERMARKS);
    int found = 0;
    for (size_t i = 0; i < nw; i++)
        if (strcmp(wm[i].name, "index") == 0) {
            found = 1;
            CHECK_EQ(wm[i].txn, store_last_txn(st));
        }
    CHECK(found);
    indexer_close(ix);
    store_close(st);
}

int main(void)
{
    RUN(test_live_equals_store);
    RUN(test_kv_records_filtered);
    RUN(test_collection_bytes_not_json_left_out);
    RUN(test_restart_resumes);
    RUN(test_damaged_segment_rebuilds);
    RUN(test_leftovers_removed);
    RUN(test_watermark_holds_compaction);
    RUN(test_commit_triggers);
    RUN(test_refresh_publishes_without_commit);
    RUN(test_pending_bound);
    RUN(test_find_equals_filter_match);
    TEST_DONE();
}
