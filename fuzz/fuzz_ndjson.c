/*
 * fuzz_ndjson.c: libFuzzer target for the NDJSON import body (docs_ndjson.c),
 * the bytes of POST /c/{col}/_import: every line the splitter hands out lies
 * inside the input, holds no LF, is not blank, and the line numbers grow; each
 * line prepared as a document is a valid JSON object whose "_id" is the id
 * reported, or is refused with a 400 or 413. Nothing may crash or leak.
 */
#include <assert.h>
#include <string.h>
#include "json/json.h"
#include "docs/docs.h"

static void fixed_id(void *ctx, char out[21])
{
    (void)ctx;
    memcpy(out, "0123456789ABCDEFGHJK", 21);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    docs_ndjson_reader r;
    docs_ndjson_init(&r, in, size, 1);
    hanu_buf out = {0}, scratch = {0};
    const char *line;
    size_t len;
    uint64_t last = 0, lines = 0;
    while (docs_ndjson_next(&r, &line, &len)) {
        assert(line >= in && line + len <= in + size);
        assert(!memchr(line, '\n', len));
        assert(r.line > last);
        last = r.line;
        lines++;
        char id[DOCS_ID_MAX + 1];
        size_t id_len = 0;
        docs_error e;
        if (docs_ndjson_prepare(line, len, 4096, id, &id_len, fixed_id, NULL, &out, &scratch, &e) == HANU_OK) {
            json_error je;
            assert(json_validate((const char *)out.data, out.len, NULL, &je) == HANU_OK);
            char found[DOCS_ID_MAX + 1];
            size_t flen = 0;
            assert(docs_id_find((const char *)out.data, out.len, found, sizeof found, &flen) == HANU_OK);
            assert(flen == id_len && memcmp(found, id, flen) == 0 && docs_id_valid(id, id_len));
            assert(out.len <= 4096);
        } else {
            assert(e.status == 400 || e.status == 413);
        }
    }
    assert(lines + r.blank == r.line);
    hanu_buf_free(&out);
    hanu_buf_free(&scratch);
    return 0;
}
