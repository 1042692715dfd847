/*
 * fuzz_update.c: libFuzzer target for updates (docs_update.c): the input is a
 * stored document and an update, split at the first NUL byte; the byte before
 * nothing (the first one) picks operators or a merge patch. A parsed update
 * applied to a document gives a valid JSON object that keeps the document's
 * "_id", the same bytes when applied twice to the same document, or a 400 with
 * nothing in out. The generic RFC 7396 merge must give valid JSON too. Nothing
 * may crash or leak.
 */
#include <assert.h>
#include <string.h>
#include "json/json.h"
#include "docs/docs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int kind = data[0] & 1 ? DOCS_UPDATE_MERGE_PATCH : DOCS_UPDATE_OPERATORS;
    const char *in = (const char *)data + 1;
    size_t len = size - 1;
    const char *nul = memchr(in, 0, len);
    const char *doc = nul ? in : "{\"_id\":\"x\",\"a\":{\"b\":[1,2,{\"c\":\"s\"}]},\"n\":5}";
    size_t doc_len = nul ? (size_t)(nul - in) : strlen(doc);
    const char *up = nul ? nul + 1 : in;
    size_t up_len = nul ? len - doc_len - 1 : len;

    docs_update *u;
    docs_error e;
    hanu_buf out = {0}, again = {0};
    if (docs_update_parse(up, up_len, kind, &u, &e) == HANU_OK) {
        int changed, changed2;
        int rc = docs_update_apply(u, doc, doc_len, 1234567, &out, &changed, &e);
        if (rc == HANU_OK) {
            json_error je;
            assert(json_validate((const char *)out.data, out.len, NULL, &je) == HANU_OK);
            assert(out.len && out.data[0] == '{');
            char id1[DOCS_ID_MAX + 1], id2[DOCS_ID_MAX + 1];
            size_t l1 = 0, l2 = 0;
            int r1 = docs_id_find(doc, doc_len, id1, sizeof id1, &l1);
            int r2 = docs_id_find((const char *)out.data, out.len, id2, sizeof id2, &l2);
            if (r1 == HANU_OK) assert(r2 == HANU_OK && l1 == l2 && !memcmp(id1, id2, l1));
            assert(docs_update_apply(u, doc, doc_len, 1234567, &again, &changed2, &e) == HANU_OK);
            assert(again.len == out.len && !memcmp(again.data, out.data, out.len) && changed == changed2);
        } else {
            assert(out.len == 0);
            assert(e.status == 400 || rc == HANU_ERR_NOMEM);
        }
        docs_update_free(u);
    } else {
        assert(e.status == 400 || e.status == 500);
    }
    if (kind == DOCS_UPDATE_MERGE_PATCH && docs_merge_patch(doc, doc_len, up, up_len, &out) == HANU_OK)
        assert(json_validate((const char *)out.data, out.len, NULL, NULL) == HANU_OK);
    hanu_buf_free(&out);
    hanu_buf_free(&again);
    return 0;
}
