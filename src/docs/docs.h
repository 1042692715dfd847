/*
 * docs: the documents layer, between the store and the faces (docs/API.md).
 *
 *   - collections: store databases of kind STORE_DB_COLLECTION, created by the
 *     documents API; the rule between the kinds and the faces (below);
 *   - document ids and the "_id" rule: a document is a JSON object stored as the
 *     exact bytes sent, with "_id":"<id>" inserted first when it has none;
 *   - body preparation: a document or a batch body, checked against the limits;
 *   - idempotency records: system records of this layer (the store sees opaque
 *     bytes in its system database), their format and their expiry sweep.
 *
 * Kinds and faces. A database's kind is fixed when it is created: HTTP creates
 * collections, the key-value protocol creates key-value databases ("default"
 * is one). The key-value protocol reads and deletes in a collection as in any
 * database, and writes there only documents: each value must pass
 * docs_prepare with the key as its id (same limits, same "_id" rule), and the
 * prepared document is what is stored. The documents API refuses a key-value
 * database (HANU_ERR_MISMATCH here, 409 wrong_kind over HTTP): its values are
 * bytes, not documents. Databases created before kinds existed are untyped and
 * open to both faces without a check, as they were.
 *
 * Threads: like the store. The write functions are called by the store's one
 * writer thread; the rest by any thread. Nothing here keeps state.
 */
#ifndef HANU_DOCS_H
#define HANU_DOCS_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "store/store.h"

#define DOCS_ID_MAX 256
#define DOCS_BATCH_MAX_OPS 10000
#define DOCS_NEW_ID_LEN 20

/* What was wrong, for the client: an HTTP status (400, 409 or 413), a code, a message. */
typedef struct docs_error {
    int status;
    const char *code;   /* "invalid_json", "invalid_request", "invalid_id", "too_large", "wrong_kind" */
    char message[256];
} docs_error;

/* Fills e (status, code, message) and returns TOO_LARGE for 413, else INVALID. */
int docs_fail(docs_error *e, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- collections (docs_collection.c) ---- */

/* OK with *db, NOT_FOUND, or MISMATCH when name is a key-value database. */
int docs_collection_lookup(store *st, const char *name, size_t len, uint32_t *db);
/* Creates collection name: OK with *txn (*db set), or what docs_collection_lookup
   says of a database already there (OK means it existed: *txn is 0), or a store
   error (INVALID, TOO_LARGE, STOPPED...). */
int docs_collection_open(store *st, const char *name, size_t len, uint32_t *db, uint64_t *txn);

/* The key-value protocol's writes: store_write with the kind rule above. In a
   collection every set must be a document whose id is its key; the prepared
   documents are stored. A refused write returns INVALID or TOO_LARGE with e->code
   set; store errors leave e->code NULL. Writer thread. */
int docs_kv_write(store *st, uint32_t db, const store_op *ops, size_t n, int cond, uint64_t cond_token,
                  uint32_t max_doc, uint64_t *txn, uint64_t *current, docs_error *e);

/* ---- ids (docs_id.c) ---- */

/* 1-256 bytes, no '/' and no control characters, not "." or "..". */
int docs_id_valid(const char *id, size_t len);
/* Makes a new id: 20 characters of Crockford base32 and a NUL, 48 bits of now_ms
   then a 52-bit sequence, so ids sort by creation time. *last_ms and *seq are the
   caller's state (zero at first), one per thread. */
void docs_id_new(uint64_t *last_ms, uint64_t *seq, uint64_t now_ms, char out[DOCS_NEW_ID_LEN + 1]);

/* Finds the top-level "_id" of a JSON object document.
   OK: a string, its unescaped value copied to out[0..*out_len) (NUL-terminated when
   it fits with room for the NUL); NOT_FOUND: no top-level "_id"; INVALID: in is not
   a valid JSON object or "_id" is not a string; TOO_LARGE: the id is longer than cap
   (*out_len is its length). */
int docs_id_find(const char *in, size_t len, char *out, size_t cap, size_t *out_len);
/* Appends in[0..len) with "_id":"<id>" inserted as its first member; every other
   byte as sent. EXISTS when it has a top-level "_id"; INVALID when in is not a
   valid JSON object or id is not UTF-8. */
int docs_id_insert(const char *in, size_t len, const char *id, size_t id_len, hanu_buf *out);

/* ---- bodies (docs_body.c) ---- */

/* Makes a new id (DOCS_NEW_ID_LEN bytes + NUL) when a document has none. */
typedef void (*docs_id_fn)(void *ctx, char out[DOCS_NEW_ID_LEN + 1]);

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

/* Decodes a batch body {"ops":[{"op":"put"|"delete","id":..,"doc":{..}}, ...]}.
   0, or an error with *e filled (nothing to free then). */
int docs_batch_decode(const char *in, size_t len, uint32_t max_doc, docs_id_fn new_id, void *ctx,
                      docs_batch *out, docs_error *e);
void docs_batch_free(docs_batch *b);

/* ---- NDJSON import bodies (docs_ndjson.c, docs/API.md "Import") ---- */

/* Lines of an NDJSON body: split at LF (a CR before it dropped), the last line
   with or without LF; blank lines (spaces, tabs, CRs) are counted and skipped. */
typedef struct docs_ndjson_reader {
    const char *in;
    size_t len, pos;
    uint64_t line;    /* the number of the line last returned (first_line is the first) */
    uint64_t blank;   /* blank lines skipped so far */
} docs_ndjson_reader;
void docs_ndjson_init(docs_ndjson_reader *r, const char *in, size_t len, uint64_t first_line);
/* The next line that is not blank: 1 with *line and *len (r->line its number), 0 at the end. */
int docs_ndjson_next(docs_ndjson_reader *r, const char **line, size_t *len);
/* One line as a document to store: docs_prepare with the document's "_id" or a new
   one, except that an integer "_id" or MongoDB's {"$oid":"<24 hex digits>"} is taken
   as the string of its digits and written so in the document. A line over max_doc
   + 300 bytes is refused before it is parsed. scratch: the caller's buffer for the
   rewritten line. 0, or HANU_ERR_INVALID / HANU_ERR_TOO_LARGE with *e filled. */
int docs_ndjson_prepare(const char *line, size_t len, uint32_t max_doc, char id[DOCS_ID_MAX + 1], size_t *id_len,
                        docs_id_fn new_id, void *ctx, hanu_buf *out, hanu_buf *scratch, docs_error *e);

/* ---- expiring documents (docs_expire.c, docs/API.md "Expiring documents") ---- */

#define DOCS_EXPIRE_FIELD_MAX 256
#define DOCS_OPTIONS_KEY_MAX (5 + STORE_DB_NAME_MAX)

/* The system-database key of a collection's options record; returns its length. */
size_t docs_options_key(const char *collection, char out[DOCS_OPTIONS_KEY_MAX]);
/* A field name the option may hold: 1-256 bytes, no control characters (a top-level member). */
int docs_expire_field_valid(const char *f, size_t len);
/* The options record naming field (reset first): {"expire_after_field":"<field>"}. */
int docs_options_record(const char *field, size_t len, hanu_buf *out);
/* 1 with the collection's expiry field in field (NUL-terminated) when it has one,
   else 0. One key-directory lookup when it has none. Any thread. */
int docs_expire_field(store *st, const char *collection, char field[DOCS_EXPIRE_FIELD_MAX + 1]);
/* An RFC 3339 date-time (2026-12-03T10:00:00Z, fractions, +01:00 offsets; 't' and a
   space for 'T' allowed, as RFC 3339 5.6 notes) as milliseconds since 1970. */
int docs_time_parse(const char *s, size_t len, int64_t *ms);
/* 1 with *ms when doc's top-level member field is an epoch-seconds number or an
   RFC 3339 string; 0 when it is missing or anything else (never expires). */
int docs_expiry_ms(const char *doc, size_t len, const char *field, int64_t *ms);
/* 1 when doc has expired at now_ms under field (NULL or "": no expiry). */
int docs_expired(const char *doc, size_t len, const char *field, uint64_t now_ms);

/* ---- updates (docs_update.c, docs/API.md "Updates") ---- */

enum docs_update_kind {
    DOCS_UPDATE_OPERATORS = 1,   /* MongoDB's operators: {"$set":{..},"$inc":{..},..} */
    DOCS_UPDATE_MERGE_PATCH = 2, /* an RFC 7396 merge patch (a JSON object) */
};
#define DOCS_UPDATE_MAX_FIELDS 1000   /* fields one update names, every operator together */

/* A parsed update: read-only once parsed, so one update applies to many documents. */
typedef struct docs_update docs_update;

/* Parses and checks an update: operators known, operands of the right types, paths
   well formed, no two operators on one field (or one inside the other). 0, or
   HANU_ERR_INVALID with *e (400 invalid_update or invalid_json), HANU_ERR_NOMEM. */
int docs_update_parse(const char *in, size_t len, int kind, docs_update **out, docs_error *e);
void docs_update_free(docs_update *u);   /* NULL is fine */

/* Applies u to the stored document doc[0..len) and appends the new document to out
   (reset first), compact, members in their order, new ones last, numbers the update
   did not compute as stored. now_ms is $currentDate's time. *changed: whether the
   result differs from the document (written the same way). What depends on the
   document fails here: 400 invalid_update naming the operator and the path
   ($inc of "a.b": the value is a string, not a number), also when "_id" would change
   or go; then out is empty: nothing of the update applies. */
int docs_update_apply(const docs_update *u, const char *doc, size_t len, uint64_t now_ms, hanu_buf *out,
                      int *changed, docs_error *e);

/* RFC 7396 on any JSON values: MergePatch(target, patch) appended to out (reset
   first); tlen 0: no target. 0, HANU_ERR_INVALID (not JSON), HANU_ERR_NOMEM. */
int docs_merge_patch(const char *target, size_t tlen, const char *patch, size_t plen, hanu_buf *out);

/* ---- idempotency records (docs_idem.c, format in docs/FORMATS.md) ---- */

#define DOCS_IDEM_KEY_MAX 128          /* bytes of an Idempotency-Key */
#define DOCS_IDEM_SCOPE_LEN 16         /* a token's scope: 16 hex digits */
#define DOCS_IDEM_FINGERPRINT 32       /* SHA-256 */
#define DOCS_IDEM_STORE_KEY_MAX (5 + STORE_DB_NAME_MAX + 1 + DOCS_IDEM_SCOPE_LEN + 1 + DOCS_IDEM_KEY_MAX)

/* The system-database key of an idempotency key used on a collection, within a
   token's scope (scope NULL without tokens). Returns its length. */
size_t docs_idem_key(const char *collection, const char *scope, const char *key, size_t key_len,
                     char out[DOCS_IDEM_STORE_KEY_MAX]);
/* What a key was first used for (the IETF Idempotency-Key draft): SHA-256 of the
   method, the path without its query and the body. */
void docs_idem_fingerprint(const char *method, size_t method_len, const char *path, size_t path_len,
                           const char *body, size_t body_len, uint8_t out[DOCS_IDEM_FINGERPRINT]);

/* The answer a record keeps: the txn goes before rest ({"txn":N + rest). */
typedef struct docs_idem_answer {
    int status;
    const uint8_t *location;   /* the Location header, or length 0 */
    size_t location_len;
    const uint8_t *rest;
    size_t rest_len;
    uint64_t txn;              /* the txn of the write that stored it */
} docs_idem_answer;

/* The store op that writes a record (out of docs_idem_record) under key (out of
   docs_idem_key), in the same store_write as the write it remembers. */
static inline store_op docs_idem_op(const char *key, size_t key_len, const hanu_buf *record)
{
    return (store_op){ STORE_SYSTEM_SET, key, key_len, record->data, record->len };
}
/* Appends the record to out (reset first): it expires at expires_ms. */
int docs_idem_record(uint64_t expires_ms, const docs_idem_answer *a, const uint8_t fp[DOCS_IDEM_FINGERPRINT],
                     hanu_buf *out);
/* Reads a record (rec[0..len), a stored value): OK with *a pointing into rec (its txn
   left as it was), NOT_FOUND (too short, damaged, or expired at now_ms), or MISMATCH
   when it was first used for a request with another fingerprint. */
int docs_idem_decode(const uint8_t *rec, size_t len, const uint8_t fp[DOCS_IDEM_FINGERPRINT], uint64_t now_ms,
                     docs_idem_answer *a);
/* The answer stored under key (in scratch, which *a points into): OK, NOT_FOUND
   (none, or expired at now_ms), or MISMATCH when the key was first used for a
   request with another fingerprint. */
int docs_idem_lookup(store *st, const char *key, size_t key_len, const uint8_t fp[DOCS_IDEM_FINGERPRINT],
                     uint64_t now_ms, hanu_buf *scratch, docs_idem_answer *a);
/* Deletes, in one write, up to max idempotency records that expired before now_ms.
   Writer thread. */
int docs_idem_expire(store *st, uint64_t now_ms, size_t max, size_t *expired);

#endif
