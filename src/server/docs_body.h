/*
 * docs_body: decoding of the documents API's request bodies, apart from HTTP
 * and the store, so that it is unit-tested and fuzzed on its own: a document
 * (a JSON object, stored as sent with "_id" added first when missing) and a
 * batch ({"ops":[{"op":"put"|"delete","id":..,"doc":{..}}, ...]}).
 */
#ifndef HANU_DOCS_BODY_H
#define HANU_DOCS_BODY_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"

#define DOCS_ID_MAX 256
#define DOCS_BATCH_MAX_OPS 10000

/* What was wrong, for the HTTP answer: status 400 or 413, a code, a message. */
typedef struct docs_error {
    int status;
    const char *code;          /* "invalid_json", "invalid_request", "invalid_id", "too_large" */
    char message[256];
} docs_error;

/* Makes a new id (20 bytes + NUL) when a document has none. */
typedef void (*docs_id_fn)(void *ctx, char out[21]);

/* 1-256 bytes, no '/' and no control characters, not "." or "..". */
int docs_id_valid(const char *id, size_t len);

/* Validates a document and appends the bytes to store to out (reset first).
   id and id_len: the id the URL gives (PUT), or *id_len == 0 to take the body's "_id"
   or make one with new_id; on return it holds the document's id (NUL-terminated).
   0, or HANU_ERR_INVALID / HANU_ERR_TOO_LARGE with *e filled. */
int docs_prepare(const char *in, size_t len, uint32_t max_doc, char id[DOCS_ID_MAX + 1], size_t *id_len,
                 docs_id_fn new_id, void *ctx, hanu_buf *out, docs_error *e);

typedef struct docs_batch_item {
    int is_delete;
    size_t id_off, id_len;     /* in the batch's arena */
    size_t doc_off, doc_len;   /* puts: the bytes to store, in the arena */
} docs_batch_item;

typedef struct docs_batch {
    docs_batch_item *items;    /* malloc'd; docs_batch_free */
    size_t n;
    hanu_buf arena;
} docs_batch;

/* Decodes a batch body. 0, or an error with *e filled (nothing to free then). */
int docs_batch_decode(const char *in, size_t len, uint32_t max_doc, docs_id_fn new_id, void *ctx,
                      docs_batch *out, docs_error *e);
void docs_batch_free(docs_batch *b);

#endif
