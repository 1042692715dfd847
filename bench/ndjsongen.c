/*
 * ndjsongen: docbench's documents (bench/docgen.h, the same bytes for the same
 * seed) as NDJSON on standard output, one a line, each with "_id":"d<i>" first,
 * for `hanudb import` and bench/ndjson.sh.
 *   build/bench/ndjsongen [--docs N (1000000)] [--seed S (1)] [--no-ids]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "docgen.h"

int main(int argc, char **argv)
{
    unsigned long long docs = 1000000, seed = 1;
    int ids = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--docs") && i + 1 < argc) docs = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--no-ids")) ids = 0;
        else {
            fprintf(stderr, "usage: ndjsongen [--docs N] [--seed S] [--no-ids]\n");
            return 2;
        }
    }
    static struct docgen g;
    docgen_init(&g, seed);
    static char doc[DOCGEN_DOC_MAX + 64], line[DOCGEN_DOC_MAX + 128];
    static char out[1 << 20];
    setvbuf(stdout, out, _IOFBF, sizeof out);
    for (unsigned long long i = 0; i < docs; i++) {
        size_t n = docgen_doc(&g, i, doc);
        if (ids) {   /* {"_id":"d00000042", + the rest after its '{' */
            int k = snprintf(line, sizeof line, "{\"_id\":\"d%08llu\",", i);
            memcpy(line + k, doc + 1, n - 1);
            line[k + n - 1] = '\n';
            fwrite(line, 1, (size_t)k + n, stdout);
        } else {
            doc[n] = '\n';
            fwrite(doc, 1, n + 1, stdout);
        }
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
