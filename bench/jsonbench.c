/*
 * jsonbench.c: speed of the JSON module on the benchmark's ~450-byte document
 * (docs/BENCHMARKS.md: user, kind, two tags, ts, a 5-word title and a ~50-word
 * body). Runs json_scan with a leaf callback, json_validate, json_doc_parse
 * and a writer round trip over the same document repeatedly and prints MB/s
 * and documents/s for each.
 *   usage: jsonbench [seconds-per-case, default 1]
 */
#include "json/json.h"

#include <stdio.h>
#include <stdlib.h>

static const char DOC[] =
    "{\"user\":\"user-0421\",\"kind\":\"comment\",\"tags\":[\"storage\",\"replication\"],"
    "\"ts\":1718040123456,\"title\":\"bucket segments survive machine loss\","
    "\"body\":\"the sealer compresses new records with zstd into one object named by its "
    "sequence number and every segment carries the hash of the previous one so a gap or "
    "a reorder is an error never skipped while followers poll for the next segment verify "
    "it and apply it \\\"quoted\\\" caf\\u00e9\",\"score\":0.8125,\"draft\":false}";

static volatile uint64_t sink;

static int on_leaf(void *ctx, const json_leaf *l)
{
    (void)ctx;
    sink += l->path_len + l->str_len + (uint64_t)l->type;
    return 0;
}

static void report(const char *what, uint64_t iters, uint64_t ns, size_t len)
{
    double s = (double)ns / 1e9;
    printf("%-28s %8.0f MB/s %10.0f docs/s\n", what, (double)iters * (double)len / s / 1e6,
           (double)iters / s);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    size_t len = sizeof DOC - 1;
    uint8_t scratch[4096];
    json_error err;
    if (json_scan(DOC, len, NULL, scratch, sizeof scratch, on_leaf, NULL, &err)) {
        fprintf(stderr, "jsonbench: %s\n", err.msg);
        return 1;
    }
    printf("document: %zu bytes\n", len);
    uint64_t budget = (uint64_t)(secs * 1e9);

    for (int c = 0; c < 4; c++) {
        uint64_t iters = 0, t0 = hanu_now_ns(), t;
        hanu_buf out = { 0 };
        do {
            for (int k = 0; k < 1000; k++) {
                if (c == 0) {
                    json_scan(DOC, len, NULL, scratch, sizeof scratch, on_leaf, NULL, &err);
                } else if (c == 1) {
                    json_validate(DOC, len, NULL, &err);
                } else if (c == 2) {
                    json_doc *doc;
                    if (json_doc_parse(DOC, len, NULL, &doc, &err) == 0) {
                        sink += json_len(json_doc_root(doc));
                        json_doc_free(doc);
                    }
                } else {
                    json_doc *doc;
                    if (json_doc_parse(DOC, len, NULL, &doc, &err) == 0) {
                        const json_value *root = json_doc_root(doc);
                        json_writer w;
                        out.len = 0;
                        json_writer_init(&w, &out);
                        json_write_object_begin(&w);
                        for (size_t i = 0; i < json_len(root); i++) {
                            const json_value *m = json_at(root, i);
                            json_write_key(&w, m->key, m->key_len);
                            if (m->type == JSON_STRING) json_write_string(&w, m->u.str.ptr, m->u.str.len);
                            else if (m->type == JSON_NUMBER && m->is_int) json_write_int64(&w, m->u.num.i);
                            else if (m->type == JSON_NUMBER) json_write_double(&w, m->u.num.d);
                            else json_write_raw(&w, DOC + m->start, m->end - m->start);
                        }
                        json_write_object_end(&w);
                        sink += out.len;
                        json_doc_free(doc);
                    }
                }
            }
            iters += 1000;
            t = hanu_now_ns() - t0;
        } while (t < budget);
        hanu_buf_free(&out);
        static const char *names[] = { "json_scan (leaves + paths)", "json_validate",
                                       "json_doc_parse + free", "parse + write back" };
        report(names[c], iters, t, len);
    }
    return 0;
}
