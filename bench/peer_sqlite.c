/*
 * peer_sqlite: the documents benchmark's workload (bench/docgen.h documents, the
 * docbench read mix) run against SQLite in-process, for scale (docs/PERFORMANCE.md,
 * "Peers"). Not the same shape as docbench: no network, no HTTP, no JSON parsing of
 * requests, so SQLite is favoured on reads; on writes SQLite has one writer and no
 * group commit.
 *
 *   peer_sqlite --db PATH --docs N [--writes M] [--duration S] [--threads T] [--sync full|normal]
 *               [--mix get=50,find=25,search=25] [--seed S]
 *
 * Write phase: N documents, the last M (default 2 000) timed at one transaction each
 * (WAL, synchronous=FULL by default: every commit fsynced, as HanuDB's `local`), the
 * others loaded 1 000 to a transaction first, into a table with generated columns
 * user, kind, ts, an index (user, ts) and an FTS5 table over title and body (its
 * ranking is bm25). Read phase: T threads, each with its own connection, for S
 * seconds: get by id, find (user = X order by ts desc limit 20), search (one
 * vocabulary word with the documents' Zipf skew, kind = Y, best 10 by bm25, with
 * the documents). Prints one JSON object.
 */
#include "peer_common.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct config {
    const char *db;
    long docs, writes, duration, threads, seed;
    int sync_full;
    int mix[OP_COUNT];
} config;

static struct docgen gen;

static void die(sqlite3 *db, const char *what)
{
    fprintf(stderr, "peer_sqlite: %s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
    exit(1);
}

static sqlite3 *open_db(const char *path, int sync_full)
{
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) die(db, "open");
    sqlite3_busy_timeout(db, 10000);   /* before the pragmas: two readers opening at once contend on WAL mode */
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;",
             sync_full ? "FULL" : "NORMAL");
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(db, "pragma");
    return db;
}

static void write_phase(const config *c, double *secs, long *bytes)
{
    sqlite3 *db = open_db(c->db, c->sync_full);
    const char *schema =
        "CREATE TABLE docs(id TEXT PRIMARY KEY, doc TEXT NOT NULL,"
        " user TEXT GENERATED ALWAYS AS (json_extract(doc,'$.user')) VIRTUAL,"
        " kind TEXT GENERATED ALWAYS AS (json_extract(doc,'$.kind')) VIRTUAL,"
        " ts INTEGER GENERATED ALWAYS AS (json_extract(doc,'$.ts')) VIRTUAL);"
        "CREATE INDEX docs_user_ts ON docs(user, ts);"
        "CREATE VIRTUAL TABLE docs_fts USING fts5(title, body);";
    if (sqlite3_exec(db, schema, NULL, NULL, NULL) != SQLITE_OK) die(db, "schema");
    sqlite3_stmt *ins, *fts;
    if (sqlite3_prepare_v2(db, "INSERT INTO docs(id, doc) VALUES(?, ?)", -1, &ins, NULL) ||
        sqlite3_prepare_v2(db, "INSERT INTO docs_fts(rowid, title, body) VALUES(last_insert_rowid(),"
                           " json_extract(?1,'$.title'), json_extract(?1,'$.body'))", -1, &fts, NULL))
        die(db, "prepare");
    char doc[DOCGEN_DOC_MAX + 64], id[32];
    double t0 = peer_now_s();
    *bytes = 0;
    /* The first docs - writes documents are loaded 1 000 to a transaction, untimed;
       the last `writes` one to a transaction, timed. */
    long bulk = c->docs - c->writes;
    for (long i = 0; i < c->docs; i++) {
        if (i == bulk) t0 = peer_now_s();
        size_t n = docgen_doc(&gen, (uint64_t)i, doc);
        *bytes += (long)n;
        snprintf(id, sizeof id, "d%08ld", i);
        int own = i >= bulk || i % 1000 == 0;
        if (own && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL)) die(db, "begin");
        sqlite3_bind_text(ins, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, doc, (int)n, SQLITE_STATIC);
        sqlite3_bind_text(fts, 1, doc, (int)n, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE || sqlite3_step(fts) != SQLITE_DONE) die(db, "insert");
        sqlite3_reset(ins);
        sqlite3_reset(fts);
        int last = i >= bulk || i % 1000 == 999 || i == bulk - 1;
        if (last && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL)) die(db, "commit");
    }
    *secs = peer_now_s() - t0;
    sqlite3_finalize(ins);
    sqlite3_finalize(fts);
    sqlite3_close(db);
}

typedef struct reader {
    const config *c;
    pthread_t thread;
    uint64_t rng;
    peer_latencies lat;
    long rows;
} reader;

static atomic_int stop_reading;

static void *read_loop(void *arg)
{
    reader *r = arg;
    sqlite3 *db = open_db(r->c->db, r->c->sync_full);
    sqlite3_stmt *st[OP_COUNT];
    if (sqlite3_prepare_v2(db, "SELECT doc FROM docs WHERE id = ?", -1, &st[OP_GET], NULL) ||
        sqlite3_prepare_v2(db, "SELECT id, doc FROM docs WHERE user = ? ORDER BY ts DESC LIMIT 20", -1,
                           &st[OP_FIND], NULL) ||
        sqlite3_prepare_v2(db, "SELECT d.id, d.doc, bm25(docs_fts) AS score FROM docs_fts JOIN docs d"
                           " ON d.rowid = docs_fts.rowid WHERE docs_fts MATCH ? AND d.kind = ?"
                           " ORDER BY score LIMIT 10", -1, &st[OP_SEARCH], NULL))
        die(db, "prepare");
    char id[32], user[8];
    while (!atomic_load(&stop_reading)) {
        int op = peer_pick_op(r->c->mix, &r->rng);
        sqlite3_stmt *s = st[op];
        if (op == OP_GET) {
            snprintf(id, sizeof id, "d%08u", docgen_below(&r->rng, (uint32_t)r->c->docs));
            sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
        } else if (op == OP_FIND) {
            docgen_user(docgen_below(&r->rng, DOCGEN_USERS), user);
            sqlite3_bind_text(s, 1, user, -1, SQLITE_TRANSIENT);
        } else {
            size_t wl;
            const char *w = docgen_word(&gen, docgen_zipf(&gen, &r->rng), &wl);
            sqlite3_bind_text(s, 1, w, (int)wl, SQLITE_TRANSIENT);
            sqlite3_bind_text(s, 2, docgen_kind(docgen_below(&r->rng, DOCGEN_KINDS)), -1, SQLITE_STATIC);
        }
        double t0 = peer_now_s();
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            (void)sqlite3_column_text(s, 1 - (op == OP_GET));
            r->rows++;
        }
        if (rc != SQLITE_DONE) die(db, "query");
        sqlite3_reset(s);
        peer_note(&r->lat, op, (uint64_t)((peer_now_s() - t0) * 1e9));
    }
    for (int i = 0; i < OP_COUNT; i++) sqlite3_finalize(st[i]);
    sqlite3_close(db);
    return NULL;
}

static void read_phase(const config *c)
{
    reader *rs = calloc((size_t)c->threads, sizeof *rs);
    for (long i = 0; i < c->threads; i++) {
        rs[i].c = c;
        rs[i].rng = (uint64_t)c->seed * 1000003u + (uint64_t)i;
        pthread_create(&rs[i].thread, NULL, read_loop, &rs[i]);
    }
    double t0 = peer_now_s();
    struct timespec d = { c->duration, 0 };
    nanosleep(&d, NULL);
    atomic_store(&stop_reading, 1);
    for (long i = 0; i < c->threads; i++) pthread_join(rs[i].thread, NULL);
    double secs = peer_now_s() - t0;
    printf(",\"read_seconds\":%.2f,\"threads\":%ld", secs, c->threads);
    peer_latencies **ls = malloc((size_t)c->threads * sizeof *ls);
    if (!ls) exit(1);
    for (long i = 0; i < c->threads; i++) ls[i] = &rs[i].lat;
    peer_print_reads(ls, c->threads, secs);
    free(ls);
    for (long i = 0; i < c->threads; i++) peer_latencies_free(&rs[i].lat);
    free(rs);
}

int main(int argc, char **argv)
{
    config c = { .docs = 100000, .writes = 2000, .duration = 10, .threads = 2, .seed = 1, .sync_full = 1,
                 .mix = { 50, 25, 25 } };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = !v;
        if (!bad && strcmp(a, "--db") == 0) c.db = v;
        else if (!bad && strcmp(a, "--docs") == 0) bad = bench_parse_long(v, 1, 100000000, &c.docs);
        else if (!bad && strcmp(a, "--writes") == 0) bad = bench_parse_long(v, 1, 100000000, &c.writes);
        else if (!bad && strcmp(a, "--duration") == 0) bad = bench_parse_long(v, 1, 3600, &c.duration);
        else if (!bad && strcmp(a, "--threads") == 0) bad = bench_parse_long(v, 1, 256, &c.threads);
        else if (!bad && strcmp(a, "--seed") == 0) bad = bench_parse_long(v, 0, 1L << 40, &c.seed);
        else if (!bad && strcmp(a, "--sync") == 0) c.sync_full = strcmp(v, "normal") != 0;
        else if (!bad && strcmp(a, "--mix") == 0) bad = peer_parse_mix(v, c.mix);
        else bad = 1;
        if (bad) {
            fprintf(stderr, "usage: peer_sqlite --db PATH --docs N [--writes M] [--duration S] [--threads T] "
                            "[--sync full|normal] [--mix get=50,find=25,search=25] [--seed S]\n");
            return 2;
        }
        i++;
    }
    if (c.writes > c.docs) c.writes = c.docs;
    if (!c.db) { fprintf(stderr, "peer_sqlite: --db PATH is required (a new file)\n"); return 2; }
    docgen_init(&gen, (uint64_t)c.seed);
    double secs;
    long bytes;
    write_phase(&c, &secs, &bytes);
    printf("{\"peer\":\"sqlite %s\",\"docs\":%ld,\"timed_writes\":%ld,\"sync\":\"%s\",\"write_seconds\":%.2f,\"writes_per_s\":%.0f,"
           "\"avg_doc_bytes\":%.0f", sqlite3_libversion(), c.docs, c.writes, c.sync_full ? "full" : "normal", secs,
           (double)c.writes / secs, (double)bytes / (double)c.docs);
    read_phase(&c);
    printf("}\n");
    return 0;
}
