/*
 * peer_pg: the documents benchmark's workload (bench/docgen.h documents, the
 * docbench read mix) against PostgreSQL through libpq, for scale
 * (docs/PERFORMANCE.md, "Peers"; bench/peers.sh starts a throwaway server).
 *
 *   peer_pg --conn CONNINFO --docs N [--writes M] [--duration S] [--clients C]
 *           [--mix get=50,find=25,search=25] [--seed S]
 *
 * Table docs(id text primary key, doc jsonb, tsv tsvector generated from title and
 * body) with an index on (doc->>'user', (doc->>'ts')::bigint) and a GIN index on
 * tsv. Write phase: N documents; the first N - M loaded in transactions of 1 000,
 * the last M (default 20 000) timed as single-statement transactions from C
 * clients at once (synchronous_commit on: every commit flushed, group commit
 * across clients, as HanuDB's `local`). Read phase: C clients for S seconds: get by
 * id, find (user = X order by ts desc limit 20), search (one vocabulary word with
 * the documents' Zipf skew, kind = Y, best 10 by ts_rank: PostgreSQL has no BM25).
 * Prints one JSON object.
 */
#include "peer_common.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct config {
    const char *conn;
    long docs, writes, duration, clients, seed;
    int mix[OP_COUNT];
} config;

static struct docgen gen;
static atomic_long next_write;
static atomic_int stop_reading;

static PGconn *connect_or_die(const char *conninfo)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "peer_pg: connect: %s", PQerrorMessage(c));
        exit(1);
    }
    return c;
}

static void exec_or_die(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "peer_pg: %s: %s", sql, PQerrorMessage(c));
        exit(1);
    }
    PQclear(r);
}

static void insert_doc(PGconn *c, long i)
{
    char doc[DOCGEN_DOC_MAX + 64], id[32];
    size_t n = docgen_doc(&gen, (uint64_t)i, doc);
    doc[n] = 0;
    snprintf(id, sizeof id, "d%08ld", i);
    const char *params[2] = { id, doc };
    PGresult *r = PQexecPrepared(c, "ins", 2, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "peer_pg: insert: %s", PQerrorMessage(c));
        exit(1);
    }
    PQclear(r);
}

static void prepare_insert(PGconn *c)
{
    PGresult *r = PQprepare(c, "ins", "INSERT INTO docs(id, doc) VALUES($1, $2::jsonb)", 2, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) { fprintf(stderr, "peer_pg: %s", PQerrorMessage(c)); exit(1); }
    PQclear(r);
}

typedef struct client {
    const config *cfg;
    pthread_t thread;
    uint64_t rng;
    peer_latencies lat;
} client;

static void *write_loop(void *arg)
{
    client *cl = arg;
    PGconn *c = connect_or_die(cl->cfg->conn);
    prepare_insert(c);
    long i;
    while ((i = atomic_fetch_add(&next_write, 1)) < cl->cfg->docs) insert_doc(c, i);
    PQfinish(c);
    return NULL;
}

static void *read_loop(void *arg)
{
    client *cl = arg;
    const config *cfg = cl->cfg;
    PGconn *c = connect_or_die(cfg->conn);
    const char *sql[OP_COUNT] = {
        "SELECT doc::text FROM docs WHERE id = $1",
        "SELECT id, doc::text FROM docs WHERE doc->>'user' = $1 ORDER BY (doc->>'ts')::bigint DESC LIMIT 20",
        "SELECT id, doc::text, ts_rank(tsv, q) AS score FROM docs, plainto_tsquery('simple', $1) q"
        " WHERE tsv @@ q AND doc->>'kind' = $2 ORDER BY score DESC LIMIT 10",
    };
    for (int op = 0; op < OP_COUNT; op++) {
        PGresult *r = PQprepare(c, op_names[op], sql[op], 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) { fprintf(stderr, "peer_pg: %s", PQerrorMessage(c)); exit(1); }
        PQclear(r);
    }
    char a[32], b[32];
    while (!atomic_load(&stop_reading)) {
        int op = peer_pick_op(cfg->mix, &cl->rng);
        const char *params[2] = { a, b };
        int np = 1;
        if (op == OP_GET) {
            snprintf(a, sizeof a, "d%08u", docgen_below(&cl->rng, (uint32_t)cfg->docs));
        } else if (op == OP_FIND) {
            docgen_user(docgen_below(&cl->rng, DOCGEN_USERS), a);
        } else {
            size_t wl;
            const char *w = docgen_word(&gen, docgen_zipf(&gen, &cl->rng), &wl);
            snprintf(a, sizeof a, "%.*s", (int)wl, w);
            snprintf(b, sizeof b, "%s", docgen_kind(docgen_below(&cl->rng, DOCGEN_KINDS)));
            np = 2;
        }
        double t0 = peer_now_s();
        PGresult *r = PQexecPrepared(c, op_names[op], np, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            fprintf(stderr, "peer_pg: %s: %s", op_names[op], PQerrorMessage(c));
            exit(1);
        }
        PQclear(r);
        peer_note(&cl->lat, op, (uint64_t)((peer_now_s() - t0) * 1e9));
    }
    PQfinish(c);
    return NULL;
}

static double run_clients(const config *cfg, client *cs, void *(*fn)(void *), long duration)
{
    double t0 = peer_now_s();
    for (long i = 0; i < cfg->clients; i++) pthread_create(&cs[i].thread, NULL, fn, &cs[i]);
    if (duration) {
        struct timespec d = { duration, 0 };
        nanosleep(&d, NULL);
        atomic_store(&stop_reading, 1);
    }
    for (long i = 0; i < cfg->clients; i++) pthread_join(cs[i].thread, NULL);
    return peer_now_s() - t0;
}

static void print_reads(const config *cfg, client *cs, double secs)
{
    printf(",\"read_seconds\":%.2f,\"clients\":%ld", secs, cfg->clients);
    peer_latencies **ls = malloc((size_t)cfg->clients * sizeof *ls);
    if (!ls) exit(1);
    for (long i = 0; i < cfg->clients; i++) ls[i] = &cs[i].lat;
    peer_print_reads(ls, cfg->clients, secs);
    free(ls);
}

int main(int argc, char **argv)
{
    config cfg = { .docs = 100000, .writes = 20000, .duration = 10, .clients = 32, .seed = 1,
                   .mix = { 50, 25, 25 } };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = !v;
        if (!bad && strcmp(a, "--conn") == 0) cfg.conn = v;
        else if (!bad && strcmp(a, "--docs") == 0) bad = bench_parse_long(v, 1, 100000000, &cfg.docs);
        else if (!bad && strcmp(a, "--writes") == 0) bad = bench_parse_long(v, 1, 100000000, &cfg.writes);
        else if (!bad && strcmp(a, "--duration") == 0) bad = bench_parse_long(v, 1, 3600, &cfg.duration);
        else if (!bad && strcmp(a, "--clients") == 0) bad = bench_parse_long(v, 1, 512, &cfg.clients);
        else if (!bad && strcmp(a, "--seed") == 0) bad = bench_parse_long(v, 0, 1L << 40, &cfg.seed);
        else if (!bad && strcmp(a, "--mix") == 0) bad = peer_parse_mix(v, cfg.mix);
        else bad = 1;
        if (bad) {
            fprintf(stderr, "usage: peer_pg --conn CONNINFO --docs N [--writes M] [--duration S] "
                            "[--clients C] [--mix get=50,find=25,search=25] [--seed S]\n");
            return 2;
        }
        i++;
    }
    if (!cfg.conn) { fprintf(stderr, "peer_pg: --conn CONNINFO is required\n"); return 2; }
    if (cfg.writes > cfg.docs) cfg.writes = cfg.docs;
    docgen_init(&gen, (uint64_t)cfg.seed);

    PGconn *c = connect_or_die(cfg.conn);
    exec_or_die(c, "DROP TABLE IF EXISTS docs");
    exec_or_die(c, "CREATE TABLE docs(id text PRIMARY KEY, doc jsonb NOT NULL, tsv tsvector GENERATED ALWAYS AS"
                   " (to_tsvector('simple', coalesce(doc->>'title','') || ' ' || coalesce(doc->>'body',''))) STORED)");
    exec_or_die(c, "CREATE INDEX docs_user_ts ON docs((doc->>'user'), ((doc->>'ts')::bigint))");
    exec_or_die(c, "CREATE INDEX docs_tsv ON docs USING gin(tsv)");
    prepare_insert(c);
    long bulk = cfg.docs - cfg.writes;
    for (long i = 0; i < bulk; i++) {
        if (i % 1000 == 0) exec_or_die(c, "BEGIN");
        insert_doc(c, i);
        if (i % 1000 == 999 || i == bulk - 1) exec_or_die(c, "COMMIT");
    }
    exec_or_die(c, "ANALYZE docs");
    PQfinish(c);

    client *cs = calloc((size_t)cfg.clients, sizeof *cs);
    for (long i = 0; i < cfg.clients; i++) {
        cs[i].cfg = &cfg;
        cs[i].rng = (uint64_t)cfg.seed * 1000003u + (uint64_t)i;
    }
    atomic_store(&next_write, bulk);
    double wsecs = run_clients(&cfg, cs, write_loop, 0);
    printf("{\"peer\":\"postgresql\",\"docs\":%ld,\"timed_writes\":%ld,\"write_seconds\":%.2f,"
           "\"writes_per_s\":%.0f", cfg.docs, cfg.writes, wsecs, (double)cfg.writes / wsecs);
    double rsecs = run_clients(&cfg, cs, read_loop, cfg.duration);
    print_reads(&cfg, cs, rsecs);
    printf("}\n");
    for (long i = 0; i < cfg.clients; i++)
        peer_latencies_free(&cs[i].lat);
    free(cs);
    return 0;
}
