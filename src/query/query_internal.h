/*
 * query_internal.h: what the query module's files share and nobody else
 * needs: error formatting, field path checks and the MongoDB path walk.
 */
#ifndef HANU_QUERY_INTERNAL_H
#define HANU_QUERY_INTERNAL_H

#include "query/query.h"

/* Fills err->msg with "<json_path>: <message>" (cut to fit, still UTF-8) and
 * returns status, so callers can write `return query_fail(...)`. */
int query_fail(query_error *err, int status, const char *json_path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The length of the longest prefix of s[0..len) of at most max bytes that
 * does not cut a UTF-8 sequence (for "%.*s" in messages). */
size_t query_utf8_prefix(const char *s, size_t len, size_t max);

/* A JSON path in messages grows as the parser descends: "filter.$and[1].age". */
typedef struct json_path_buf {
    char s[160];
    size_t len;
} json_path_buf;

void json_path_init(json_path_buf *p, const char *root);
/* Append ".key" or "[i]"; returns the old length for json_path_restore. */
size_t json_path_push_key(json_path_buf *p, const char *key, size_t key_len);
size_t json_path_push_index(json_path_buf *p, size_t i);
static inline void json_path_restore(json_path_buf *p, size_t len) { p->len = len; p->s[len] = '\0'; }

/* Checks a dotted field path: 1..QUERY_MAX_PATH_BYTES bytes, no empty
 * segment, no segment starting with '$', no NUL. */
int query_path_check(const char *path, size_t len, const char *json_path, query_error *err);

/* Walks a dotted path through a document the way MongoDB does and calls fn
 * for every value it reaches, or with NULL where the path is missing:
 *   - through objects by member name;
 *   - through an array by a numeric segment ("tags.0"), and also into every
 *     element that is an object (implicit traversal, "items.sku");
 *   - an array in which no element yields a value yields missing once.
 * whole is 1 for a value that the path's last segment picked out of an array
 * by its position: a clause compares it as it is and does not look into it
 * when it is an array itself ({"a.0":42} does not match {"a":[[42]]}, as in
 * MongoDB; {"a.0":[42]} does).
 * fn returns non-zero to stop the walk; that value is returned (else 0). */
typedef int (*query_visit_fn)(void *ctx, const json_value *v, int whole);
int query_path_walk(const json_value *root, const char *path, size_t len, query_visit_fn fn, void *ctx);

#endif
