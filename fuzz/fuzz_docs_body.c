/*
 * fuzz_docs_body.c: libFuzzer target for the documents API's request bodies:
 * the same bytes decoded as a document (docs_prepare) and as a batch
 * (docs_batch_decode). A stored document must itself be a valid JSON object
 * whose "_id" is the id reported; nothing may crash or leak. The same bytes are
 * also read as a stored idempotency record (docs_idem_decode), which must stay
 * within them, and a record written back from what it read decodes the same.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include "json/json.h"
#include "docs/docs.h"

static void fixed_id(void *ctx, char out[21])
{
    (void)ctx;
    memcpy(out, "0123456789ABCDEFGHJK", 21);
}

static void check_stored(const uint8_t *doc, size_t len, const char *id, size_t id_len)
{
    json_error e;
    assert(json_validate((const char *)doc, len, NULL, &e) == HANU_OK);
    char found[DOCS_ID_MAX + 1];
    size_t flen = 0;
    assert(docs_id_find((const char *)doc, len, found, sizeof found, &flen) == HANU_OK);
    assert(flen == id_len && memcmp(found, id, flen) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hanu_buf out = {0};
    docs_error e;
    char id[DOCS_ID_MAX + 1];
    size_t id_len = 0;
    if (docs_prepare((const char *)data, size, 1u << 20, id, &id_len, fixed_id, NULL, &out, &e) == HANU_OK)
        check_stored(out.data, out.len, id, id_len);
    else
        assert(e.status == 400 || e.status == 413);
    hanu_buf_free(&out);

    uint8_t fp[DOCS_IDEM_FINGERPRINT];
    memcpy(fp, size >= 11 + DOCS_IDEM_FINGERPRINT ? data + 11 : (const uint8_t *)"0123456789abcdef0123456789abcdef",
           DOCS_IDEM_FINGERPRINT);
    docs_idem_answer a;
    if (docs_idem_decode(data, size, fp, 0, &a) == HANU_OK) {
        assert(a.rest >= data && a.rest + a.rest_len == data + size);
        assert(!a.location_len || (a.location >= data && a.location + a.location_len <= a.rest));
        if (a.location_len <= 0xFFFF) {
            hanu_buf rec = {0};
            docs_idem_answer back;
            assert(docs_idem_record(1, &a, fp, &rec) == HANU_OK);
            assert(docs_idem_decode(rec.data, rec.len, fp, 0, &back) == HANU_OK && back.status == a.status);
            assert(back.rest_len == a.rest_len && (!a.rest_len || !memcmp(back.rest, a.rest, a.rest_len)));
            assert(back.location_len == a.location_len &&
                   (!a.location_len || !memcmp(back.location, a.location, a.location_len)));
            hanu_buf_free(&rec);
        }
    }

    docs_batch b;
    if (docs_batch_decode((const char *)data, size, 1u << 20, fixed_id, NULL, &b, &e) == HANU_OK) {
        assert(b.n >= 1 && b.n <= DOCS_BATCH_MAX_OPS);
        for (size_t i = 0; i < b.n; i++) {
            const docs_batch_item *it = &b.items[i];
            assert(it->id_off + it->id_len <= b.arena.len && docs_id_valid((const char *)b.arena.data + it->id_off, it->id_len));
            if (!it->is_delete) {
                assert(it->doc_off + it->doc_len <= b.arena.len);
                check_stored(b.arena.data + it->doc_off, it->doc_len, (const char *)b.arena.data + it->id_off, it->id_len);
            }
        }
        docs_batch_free(&b);
    } else {
        assert(e.status == 400 || e.status == 413);
    }
    return 0;
}
