/*
 * facts_stream.c: a projection fed by the facts library's commit stream
 * (quad_stream_*): a count of live facts per lane-0 value, kept in a state
 * file of its own together with the stream position it covers, so that it
 * survives restarts and applies every commit exactly once. The program
 * writes some facts, lets the projection take part of them, "restarts"
 * (closes everything), writes and retires more, resumes the projection from
 * its saved position and checks the counts against a full scan.
 *
 *   cc facts_stream.c $(pkg-config --cflags --libs hanuquad) -o facts_stream
 *   ./facts_stream DIR      # DIR/facts.quad and DIR/counts.state
 */
#define _POSIX_C_SOURCE 200809L   /* fileno, fsync */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <quad.h>

#define MAX_VALUES 64

/* The projection: lane-0 value -> live facts, and the next epoch to apply. */
typedef struct counts {
    uint64_t position;
    size_t n;
    uint64_t value[MAX_VALUES];
    int64_t count[MAX_VALUES];
} counts;

static int fail(const char *what, int rc)
{
    fprintf(stderr, "facts_stream: %s: %s %s\n", what, hanu_status_str(rc), quad_last_error());
    return 1;
}

static int add(counts *c, uint64_t value, int64_t delta)
{
    size_t i = 0;
    while (i < c->n && c->value[i] != value) i++;
    if (i == c->n) {
        if (c->n == MAX_VALUES) return -1;
        c->value[c->n] = value;
        c->count[c->n++] = 0;
    }
    c->count[i] += delta;
    return 0;
}

/* The state file: "position P" then one "value count" line per value.
 * Missing: the projection starts at the first commit. */
static int load(const char *path, counts *c)
{
    memset(c, 0, sizeof *c);
    c->position = 1;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fscanf(f, "position %" SCNu64 "\n", &c->position) == 1;
    uint64_t v;
    int64_t k;
    while (ok && fscanf(f, "%" SCNu64 " %" SCNd64 "\n", &v, &k) == 2) ok = add(c, v, k) == 0;
    fclose(f);
    return ok ? 0 : -1;
}

/* Written to a temporary file, synced and renamed over the old one: the
 * counts and the position they cover change together or not at all. */
static int save(const char *path, const counts *c)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "position %" PRIu64 "\n", c->position);
    for (size_t i = 0; i < c->n; i++) fprintf(f, "%" PRIu64 " %" PRId64 "\n", c->value[i], c->count[i]);
    int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, path) == 0 ? 0 : -1;
}

/* Applies up to max_commits durable commits from the saved position on. */
static int project(quad *q, const char *state, int max_commits)
{
    counts c;
    if (load(state, &c) != 0) { fprintf(stderr, "facts_stream: bad state file\n"); return 1; }
    quad_stream *s;
    int rc = quad_stream_open(q, c.position, QUAD_LANE(0), &s);
    if (rc) return fail("stream open", rc);
    quad_commit cm;
    int applied = 0;
    while (applied < max_commits && (rc = quad_stream_next(s, 0, &cm)) == 1) {
        /* an append adds its facts; a retire takes back the facts it retired */
        int64_t delta = cm.kind == QUAD_COMMIT_APPEND ? 1 : -1;
        for (size_t i = 0; i < cm.n; i++)
            if (add(&c, cm.facts[i].lane[0], delta) != 0) { rc = -1; break; }
        c.position = cm.epoch + 1;
        applied++;
    }
    quad_stream_close(s);
    if (rc < 0) return fail("stream", rc);
    if (save(state, &c) != 0) { fprintf(stderr, "facts_stream: cannot save the state\n"); return 1; }
    printf("projection: applied %d commits, next epoch %" PRIu64 ":", applied, c.position);
    for (size_t i = 0; i < c.n; i++) printf(" %" PRIu64 "=%" PRId64, c.value[i], c.count[i]);
    printf("\n");
    return 0;
}

/* Appends n facts whose lane 0 cycles through the values 1..k (subject,
 * colour, ...: the lanes mean what the program says). */
static int write_facts(quad *q, size_t n, uint64_t k, quad_id *first)
{
    quad_fact f[64];
    for (size_t i = 0; i < n; i++) f[i] = (quad_fact){ { 1 + i % k, 100 + i, 7, 0 } };
    uint64_t epoch;
    int rc = quad_append(q, f, n, QUAD_DURABLE, first, &epoch);
    if (rc) return fail("append", rc);
    printf("appended %zu facts at epoch %" PRIu64 "\n", n, epoch);
    return 0;
}

/* Counts lane-0 values of every live fact with a scan (the reference). */
static int scan_counts(quad *q, counts *c)
{
    memset(c, 0, sizeof *c);
    quad_fact page[32];
    quad_id from = 0, next;
    size_t n;
    do {
        int rc = quad_scan(q, 0, from, QUAD_LANE(0), page, NULL, 32, &n, &next);
        if (rc) return rc;
        for (size_t i = 0; i < n; i++) add(c, page[i].lane[0], 1);
        from = next;
    } while (n > 0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: facts_stream DIR\n"); return 2; }
    char store[4096], state[4096];
    snprintf(store, sizeof store, "%s/facts.quad", argv[1]);
    snprintf(state, sizeof state, "%s/counts.state", argv[1]);

    quad *q;
    int rc = quad_open(store, NULL, &q);
    if (rc) return fail("open", rc);
    quad_id first;
    if (write_facts(q, 12, 3, &first) || write_facts(q, 8, 4, NULL) || write_facts(q, 5, 2, NULL)) return 1;
    /* the projection takes two of the three commits, then everything stops */
    if (project(q, state, 2)) return 1;
    rc = quad_close(q);
    if (rc) return fail("close", rc);
    printf("restart\n");

    rc = quad_open(store, NULL, &q);
    if (rc) return fail("reopen", rc);
    quad_id gone[3] = { first, quad_batch_id(first, quad_chunk_rows(q), 3), first };   /* a repeat too */
    uint64_t epoch;
    rc = quad_retire(q, gone, 3, QUAD_DURABLE, &epoch);
    if (rc) return fail("retire", rc);
    printf("retired 2 facts of value 1 at epoch %" PRIu64 "\n", epoch);
    if (write_facts(q, 6, 6, NULL)) return 1;
    /* resumed from its own position: the third commit and everything after */
    if (project(q, state, 1000)) return 1;

    counts want, got;
    if (load(state, &got) != 0) return 1;
    rc = scan_counts(q, &want);
    if (rc) return fail("scan", rc);
    int same = want.n <= got.n;
    for (size_t i = 0; i < got.n && same; i++) {
        int64_t w = 0;
        for (size_t j = 0; j < want.n; j++) if (want.value[j] == got.value[i]) w = want.count[j];
        same = w == got.count[i];
    }
    printf("projection matches a full scan: %s\n", same ? "yes" : "NO");
    rc = quad_close(q);
    if (rc) return fail("close", rc);
    return same ? 0 : 1;
}
