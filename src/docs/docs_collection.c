/*
 * docs_collection.c: collections, and the rule between the kinds of databases
 * and the faces (docs.h): the documents API works on collections, the
 * key-value protocol writes only documents into them.
 */
#include "docs/docs.h"

#include <stdio.h>
#include <stdlib.h>

int docs_collection_lookup(store *st, const char *name, size_t len, uint32_t *db)
{
    uint8_t kind;
    int rc = store_db_lookup(st, name, len, db);
    if (rc == HANU_OK) rc = store_db_kind(st, *db, &kind);
    /* Untyped databases predate kinds; a kind this version does not know is no collection. */
    if (rc == HANU_OK && kind != STORE_DB_COLLECTION && kind != STORE_DB_UNTYPED) rc = HANU_ERR_MISMATCH;
    return rc;
}

int docs_collection_open(store *st, const char *name, size_t len, uint32_t *db, uint64_t *txn)
{
    *txn = 0;
    int rc = docs_collection_lookup(st, name, len, db);
    if (rc != HANU_ERR_NOT_FOUND) return rc;
    rc = store_db_create(st, name, len, STORE_DB_COLLECTION, txn);
    if (rc == HANU_OK) rc = store_db_lookup(st, name, len, db);
    return rc;
}

/* The id a key-value write gives a document: its key, which must be a valid id. */
static void no_new_id(void *ctx, char out[DOCS_NEW_ID_LEN + 1])
{
    (void)ctx;
    out[0] = '\0';
}

int docs_kv_write(store *st, uint32_t db, const store_op *ops, size_t n, int cond, uint64_t cond_token,
                  uint32_t max_doc, uint64_t *txn, uint64_t *current, docs_error *e)
{
    e->code = NULL;
    uint8_t kind;
    if (store_db_kind(st, db, &kind) != HANU_OK || kind != STORE_DB_COLLECTION)
        return store_write(st, db, ops, n, cond, cond_token, txn, current);
    /* A collection: every set becomes its prepared document, in one arena. */
    store_op *docs = malloc(n * sizeof *docs);
    size_t *offs = malloc(n * sizeof *offs);
    hanu_buf arena = {0}, one = {0};
    int rc = docs && offs ? HANU_OK : HANU_ERR_NOMEM;
    for (size_t i = 0; rc == HANU_OK && i < n; i++) {
        docs[i] = ops[i];
        if (ops[i].kind != STORE_SET) continue;
        char id[DOCS_ID_MAX + 1];
        size_t id_len = ops[i].key_len;
        if (!docs_id_valid(ops[i].key, id_len)) {
            e->status = 400;
            e->code = "invalid_id";
            snprintf(e->message, sizeof e->message, "a key in a collection is a document id: 1-256 bytes "
                     "without '/' or control characters, not . or ..");
            rc = HANU_ERR_INVALID;
            break;
        }
        memcpy(id, ops[i].key, id_len);
        id[id_len] = '\0';
        rc = docs_prepare(ops[i].value, ops[i].value_len, max_doc, id, &id_len, no_new_id, NULL, &one, e);
        if (rc == HANU_OK) {
            offs[i] = arena.len;
            docs[i].value_len = one.len;
            rc = hanu_buf_append(&arena, one.data, one.len);
        }
    }
    if (rc == HANU_OK) {
        for (size_t i = 0; i < n; i++)
            if (ops[i].kind == STORE_SET) docs[i].value = arena.data + offs[i];
        rc = store_write(st, db, docs, n, cond, cond_token, txn, current);
    } else if (e->code) {
        /* The message says it is about a collection. */
        char m[sizeof e->message];
        snprintf(m, sizeof m, "%s", e->message);
        snprintf(e->message, sizeof e->message, "a collection holds JSON documents: %.200s", m);
    }
    free(docs);
    free(offs);
    hanu_buf_free(&arena);
    hanu_buf_free(&one);
    return rc;
}
