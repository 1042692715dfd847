/*
 * docs_body.c: document and batch bodies (docs.h), on the JSON module: decoded
 * apart from HTTP and the store, so that they are unit-tested and fuzzed alone.
 */
#include "docs/docs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "json/json.h"

int docs_fail(docs_error *e, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->status = status;
    e->code = code;
    return status == 413 ? HANU_ERR_TOO_LARGE : HANU_ERR_INVALID;
}

int docs_prepare(const char *in, size_t len, uint32_t max_doc, char id[DOCS_ID_MAX + 1], size_t *id_len,
                 docs_id_fn new_id, void *ctx, hanu_buf *out, docs_error *e)
{
    json_error err;
    hanu_buf_reset(out);
    if (len > (size_t)max_doc + 300)
        return docs_fail(e, 413, "too_large", "document of %zu bytes; the limit is %u", len, max_doc);
    if (json_validate(in, len, NULL, &err) != HANU_OK) return docs_fail(e, 400, "invalid_json", "%s", err.msg);
    size_t i = 0;
    while (i < len && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r')) i++;
    if (i == len || in[i] != '{') return docs_fail(e, 400, "invalid_request", "a document must be a JSON object");
    char found[DOCS_ID_MAX + 1];
    size_t flen = 0;
    int rc = docs_id_find(in, len, found, sizeof found, &flen);
    if (rc == HANU_OK) {
        if (!docs_id_valid(found, flen))
            return docs_fail(e, 400, "invalid_id", "\"_id\" must be 1-256 bytes without '/' or control characters, and not . or ..");
        if (*id_len && (flen != *id_len || memcmp(found, id, flen)))
            return docs_fail(e, 400, "invalid_id", "the document's \"_id\" differs from the id in the URL");
        memcpy(id, found, flen);
        id[flen] = '\0';
        *id_len = flen;
        if (hanu_buf_append(out, in, len)) return docs_fail(e, 413, "too_large", "out of memory");
    } else if (rc == HANU_ERR_TOO_LARGE) {
        return docs_fail(e, 400, "invalid_id", "\"_id\" is longer than 256 bytes");
    } else if (rc != HANU_ERR_NOT_FOUND) {
        return docs_fail(e, 400, "invalid_id", "\"_id\" must be a string");
    } else {
        if (!*id_len) {
            new_id(ctx, id);
            *id_len = strlen(id);
        }
        if (docs_id_insert(in, len, id, *id_len, out) != HANU_OK)
            return docs_fail(e, 400, "invalid_id", "the id is not valid UTF-8");
    }
    if (out->len > max_doc)
        return docs_fail(e, 413, "too_large", "document of %zu bytes; the limit is %u", out->len, max_doc);
    return HANU_OK;
}

void docs_batch_free(docs_batch *b)
{
    free(b->items);
    hanu_buf_free(&b->arena);
    memset(b, 0, sizeof *b);
}

int docs_batch_decode(const char *in, size_t len, uint32_t max_doc, docs_id_fn new_id, void *ctx,
                      docs_batch *out, docs_error *e)
{
    memset(out, 0, sizeof *out);
    json_doc *jd = NULL;
    json_error err;
    if (json_doc_parse(in, len, NULL, &jd, &err) != HANU_OK) return docs_fail(e, 400, "invalid_json", "%s", err.msg);
    const json_value *ops = json_get(json_doc_root(jd), "ops");
    size_t n = json_len(ops);
    int rc = HANU_OK;
    if (!ops || ops->type != JSON_ARRAY || n == 0)
        rc = docs_fail(e, 400, "invalid_request", "the body must be {\"ops\":[...]} with at least one op");
    else if (n > DOCS_BATCH_MAX_OPS)
        rc = docs_fail(e, 413, "too_large", "a batch holds at most %d ops, this one %zu", DOCS_BATCH_MAX_OPS, n);
    if (rc == HANU_OK && !(out->items = calloc(n, sizeof *out->items))) rc = docs_fail(e, 413, "too_large", "out of memory");
    hanu_buf one = {0};
    for (size_t i = 0; rc == HANU_OK && i < n; i++) {
        const json_value *op = json_at(ops, i);
        const char *kind, *id = NULL;
        size_t kind_len, id_len = 0;
        char idbuf[DOCS_ID_MAX + 1];
        if (json_as_string(json_get(op, "op"), &kind, &kind_len) != HANU_OK) {
            rc = docs_fail(e, 400, "invalid_request", "ops[%zu]: \"op\" must be \"put\" or \"delete\"", i);
            break;
        }
        const json_value *idv = json_get(op, "id");
        if (idv && (json_as_string(idv, &id, &id_len) != HANU_OK || !docs_id_valid(id, id_len))) {
            rc = docs_fail(e, 400, "invalid_id", "ops[%zu]: \"id\" must be a string of 1-256 bytes without '/'", i);
            break;
        }
        if (id) memcpy(idbuf, id, id_len);
        docs_batch_item *it = &out->items[i];
        if (kind_len == 6 && !memcmp(kind, "delete", 6)) {
            if (!id) { rc = docs_fail(e, 400, "invalid_request", "ops[%zu]: a delete needs an \"id\"", i); break; }
            it->is_delete = 1;
        } else if (kind_len == 3 && !memcmp(kind, "put", 3)) {
            const json_value *d = json_get(op, "doc");
            if (!d || d->type != JSON_OBJECT) {
                rc = docs_fail(e, 400, "invalid_request", "ops[%zu]: a put needs a \"doc\" object", i);
                break;
            }
            rc = docs_prepare(in + d->start, d->end - d->start, max_doc, idbuf, &id_len, new_id, ctx, &one, e);
            if (rc) {
                char m[sizeof e->message + 32];
                snprintf(m, sizeof m, "ops[%zu]: %s", i, e->message);
                snprintf(e->message, sizeof e->message, "%.255s", m);
                break;
            }
            it->doc_off = out->arena.len;
            it->doc_len = one.len;
            hanu_buf_append(&out->arena, one.data, one.len);
        } else {
            rc = docs_fail(e, 400, "invalid_request", "ops[%zu]: \"op\" must be \"put\" or \"delete\"", i);
            break;
        }
        it->id_off = out->arena.len;
        it->id_len = id_len;
        hanu_buf_append(&out->arena, idbuf, id_len);
    }
    out->n = n;
    hanu_buf_free(&one);
    json_doc_free(jd);
    if (rc) docs_batch_free(out);
    return rc;
}
