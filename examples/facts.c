/*
 * facts.c: the facts library (libhanuquad, quad.h) from a program of its own.
 * Appends a batch of facts durably, retires one, reads two back with a gather
 * and all of them with a scan, reopens the file and shows the epoch survived.
 *
 *   cc facts.c $(pkg-config --cflags --libs hanuquad) -o facts && ./facts /tmp/f.quad
 */
#include <inttypes.h>
#include <stdio.h>
#include <quad.h>

static int fail(const char *what, int rc)
{
    fprintf(stderr, "facts: %s: %s %s\n", what, hanu_status_str(rc), quad_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: facts FILE\n"); return 2; }
    printf("quad %s (headers %s)\n", quad_version(), HANUDB_VERSION);

    quad *q;
    int rc = quad_open(argv[1], NULL, &q);
    if (rc) return fail("open", rc);

    /* subject, predicate, object, source: the lanes mean what the program says */
    quad_fact facts[3] = { { { 1, 10, 100, 7 } }, { { 2, 10, 200, 7 } }, { { 3, 11, 300, 7 } } };
    quad_id first;
    uint64_t epoch;
    rc = quad_append(q, facts, 3, QUAD_DURABLE, &first, &epoch);
    if (rc) return fail("append", rc);
    printf("appended 3 facts at epoch %" PRIu64 "\n", epoch);

    quad_id second = quad_batch_id(first, quad_chunk_rows(q), 1);
    rc = quad_retire(q, &second, 1, QUAD_DURABLE, &epoch);
    if (rc) return fail("retire", rc);
    printf("retired fact 2 at epoch %" PRIu64 "\n", epoch);

    quad_id ids[2] = { first, second };
    quad_fact out[2];
    uint8_t present[2];
    rc = quad_gather(q, 0, ids, 2, QUAD_LANE(0) | QUAD_LANE(2), out, present);
    if (rc) return fail("gather", rc);
    for (int i = 0; i < 2; i++)
        if (present[i]) printf("gather: fact %d lane0=%" PRIu64 " lane2=%" PRIu64 "\n", i + 1, out[i].lane[0], out[i].lane[2]);
        else printf("gather: fact %d is retired\n", i + 1);

    quad_fact page[8];
    size_t n;
    quad_id next;
    rc = quad_scan(q, 0, 0, QUAD_LANES_ALL, page, NULL, 8, &n, &next);
    if (rc) return fail("scan", rc);
    for (size_t i = 0; i < n; i++)
        printf("scan: %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
               page[i].lane[0], page[i].lane[1], page[i].lane[2], page[i].lane[3]);

    rc = quad_close(q);
    if (rc) return fail("close", rc);
    rc = quad_open(argv[1], NULL, &q);
    if (rc) return fail("reopen", rc);
    printf("reopened at epoch %" PRIu64 "\n", quad_epoch(q));

    /* an error has a code and a name */
    quad_id missing = QUAD_ID(1000, 0);
    rc = quad_retire(q, &missing, 1, QUAD_BUFFERED, NULL);
    printf("retire of a missing id: %d (%s)\n", rc, hanu_status_str(rc));
    return quad_close(q) ? 1 : 0;
}
