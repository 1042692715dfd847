/*
 * json: the database's own JSON (RFC 8259) module, the whole contract in one
 * header. Four parts share one validating tokenizer, so they accept exactly
 * the same inputs:
 *
 *   - a scanner (json_scan) that validates a document in one pass and calls
 *     back for every scalar leaf with its dotted path; no allocation, the
 *     caller passes a scratch buffer;
 *   - a small DOM (json_doc_parse) for request bodies: one arena, one free,
 *     every value keeps its byte span [start, end) in the input;
 *   - a writer (json_write_*) that appends JSON to a hanu_buf;
 *   - json_member_find: one top-level member of an object, in one pass.
 *
 * Rules (docs/JSON.md): strict RFC 8259; UTF-8 validated (no overlongs, no
 * surrogates, nothing above U+10FFFF), no BOM; \u escapes must pair
 * surrogates; control characters below 0x20 must be escaped in strings;
 * nesting depth at most 64 by default; a duplicate key within one object is
 * an error (compared after unescaping); a number whose value overflows a
 * double is an error. Inputs are limited to 4 GiB - 1.
 *
 * Errors: every function returns 0 (HANU_OK) or a negative HANU_ERR_* from
 * base.h. Where a json_error is passed (it may be NULL), a failure fills in
 * the byte offset and a message for the client, e.g.
 * "invalid UTF-8 at byte 17", "duplicate key \"a\" at byte 30",
 * "nesting deeper than 64 at byte 200", "unexpected end of input".
 *   HANU_ERR_INVALID    the input is not valid JSON (or breaks a rule above)
 *   HANU_ERR_TOO_LARGE  nesting deeper than the limit, or input >= 4 GiB
 *   HANU_ERR_NOMEM      scratch buffer too small (scanner) or malloc failed
 *
 * Threads: no global state; every function is safe to call concurrently on
 * different objects. Numbers are converted with strtod() in the "C" locale
 * (the server never calls setlocale).
 */
#ifndef HANU_JSON_H
#define HANU_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum json_type {
    JSON_NULL = 1,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
} json_type;

/* "null", "bool", "number", "string", "array", "object" (for messages). */
const char *json_type_name(json_type t);

#define JSON_DEFAULT_MAX_DEPTH 64
#define JSON_MAX_DEPTH_CAP 256      /* max_depth is clamped to this */
#define JSON_ERROR_MSG_MAX 128

typedef struct json_error {
    size_t offset;                  /* byte offset of the problem in the input */
    char msg[JSON_ERROR_MSG_MAX];   /* NUL-terminated, valid UTF-8, includes the offset */
} json_error;

/* Options; pass NULL for the defaults (zeroed struct = defaults too). */
typedef struct json_opts {
    int max_depth;              /* 0: JSON_DEFAULT_MAX_DEPTH; arrays and objects both count */
    int allow_duplicate_keys;   /* 0 (default): a repeated key in one object is an error */
} json_opts;

/* ---------------------------------------------------------------- scanner */

/* One scalar leaf, valid only during the callback. */
typedef struct json_leaf {
    const char *path;       /* dotted path ("a.b.c"), NUL-terminated, in scratch; */
    size_t path_len;        /*   "" for a top-level scalar; array elements have the
                             *   path of their array ("tags" for each of "tags":[..]);
                             *   keys are joined as they are, so {"a.b":1} and
                             *   {"a":{"b":1}} share the path "a.b" */
    json_type type;         /* JSON_STRING, JSON_NUMBER, JSON_BOOL or JSON_NULL */
    size_t start, end;      /* raw token bytes in the input (a string with its quotes) */
    int in_array;           /* 1 when the leaf is an element of an array (multikey) */
    int depth;              /* containers around the leaf: 1 for a top-level member */
    /* JSON_STRING: the unescaped value (points into the input when the string
     * has no escapes, else into scratch; not NUL-terminated, may contain NUL). */
    const char *str;
    size_t str_len;
    /* JSON_NUMBER: num is the nearest double; is_int is 1 when the token is
     * written as an integer (no fraction, no exponent) in int64 range, with
     * the exact value in i64. JSON_BOOL: boolean is 0 or 1. */
    double num;
    int64_t i64;
    int is_int;
    int boolean;
} json_leaf;

/* Return 0 to continue; any other value stops the scan, which returns it
 * (use a negative HANU_ERR_* so callers can tell it from success). */
typedef int (*json_leaf_fn)(void *ctx, const json_leaf *leaf);

/* Scratch bytes json_scan() needs at most for an input of len bytes
 * (3 * len + 64). Typical documents use far less (the longest path plus the
 * longest escaped string plus 8 bytes per key of the open objects), so a
 * fixed per-thread buffer with a retry on HANU_ERR_NOMEM also works. */
size_t json_scan_scratch_size(size_t len);

/* Validates in[0..len) and calls fn (may be NULL: validation only) for every
 * scalar leaf in document order. scratch/scratch_len hold the path, escaped
 * strings and the duplicate-key table; nothing is allocated. The callback may
 * already have run for leaves before an error is found later in the input:
 * on any non-zero return, discard what the callbacks collected. */
int json_scan(const char *in, size_t len, const json_opts *opts,
              void *scratch, size_t scratch_len,
              json_leaf_fn fn, void *ctx, json_error *err);

/* Validation only; uses a stack buffer and falls back to malloc for inputs
 * whose duplicate-key table does not fit (HANU_ERR_NOMEM if that fails). */
int json_validate(const char *in, size_t len, const json_opts *opts, json_error *err);

/* -------------------------------------------------------------------- DOM */

/* A parsed value. Read-only for callers; everything lives in the doc's arena. */
typedef struct json_value json_value;
struct json_value {
    json_type type;
    int is_int;                 /* numbers: as in json_leaf */
    size_t start, end;          /* byte span in the input: in[start..end) is the
                                 * exact text of this value (a sub-document) */
    const char *key;            /* member name when inside an object (unescaped,
                                 * NUL-terminated), else NULL */
    size_t key_len;
    union {
        int boolean;
        struct { double d; int64_t i; } num;
        struct { const char *ptr; size_t len; } str;   /* unescaped, NUL-terminated */
        struct { json_value *items; size_t n; } kids;  /* arrays and objects, in order */
    } u;
};

typedef struct json_doc json_doc;

/* Parses in[0..len) into *out (caller frees with json_doc_free). Strings and
 * keys are copied into the arena, so the doc does not point into the input;
 * spans are offsets into the caller's input. */
int json_doc_parse(const char *in, size_t len, const json_opts *opts,
                   json_doc **out, json_error *err);
const json_value *json_doc_root(const json_doc *doc);
/* Bytes held by the doc's arena (for limits and metrics). */
size_t json_doc_bytes(const json_doc *doc);
void json_doc_free(json_doc *doc);      /* NULL is fine */

/* Object member by name (linear, first match), or NULL (also when v is not
 * an object). json_get uses strlen(name). */
const json_value *json_get(const json_value *obj, const char *name);
const json_value *json_getn(const json_value *obj, const char *name, size_t name_len);
/* Number of elements/members (0 for scalars) and the i-th one (NULL if out of range). */
size_t json_len(const json_value *v);
const json_value *json_at(const json_value *v, size_t i);
/* Typed reads: 0, or HANU_ERR_INVALID when v is NULL or of another type
 * (json_as_int64 also when the number is not an int64 integer). */
int json_as_string(const json_value *v, const char **s, size_t *len);
int json_as_int64(const json_value *v, int64_t *out);
int json_as_double(const json_value *v, double *out);
int json_as_bool(const json_value *v, int *out);

/* ----------------------------------------------------------------- writer */

/* Appends compact JSON to a hanu_buf; commas and colons are placed for the
 * caller. The first error sticks: later calls do nothing and return it, so a
 * sequence can be checked once at the end with json_writer_status(). The
 * writer does not check that calls are balanced beyond its depth limit. */
#define JSON_WRITER_MAX_DEPTH 256
typedef struct json_writer {
    hanu_buf *out;
    int status;
    int depth;
    int after_key;
    uint8_t has_items[JSON_WRITER_MAX_DEPTH + 1];
} json_writer;

void json_writer_init(json_writer *w, hanu_buf *out);    /* appends to out; does not reset it */
int json_writer_status(const json_writer *w);
int json_write_object_begin(json_writer *w);
int json_write_object_end(json_writer *w);
int json_write_array_begin(json_writer *w);
int json_write_array_end(json_writer *w);
/* Keys and strings must be valid UTF-8 (HANU_ERR_INVALID otherwise); '"',
 * '\\' and control characters are escaped, everything else is copied. */
int json_write_key(json_writer *w, const char *k, size_t len);
int json_write_string(json_writer *w, const char *s, size_t len);
int json_write_int64(json_writer *w, int64_t v);
/* Shortest of %.15g..%.17g that reads back to the same double; NaN and
 * infinities are HANU_ERR_INVALID (JSON has no spelling for them). */
int json_write_double(json_writer *w, double v);
int json_write_bool(json_writer *w, int v);
int json_write_null(json_writer *w);
/* One complete JSON value given as bytes (e.g. a stored document); copied as
 * is, not validated. */
int json_write_raw(json_writer *w, const char *p, size_t len);

/* Appends s as a quoted, escaped JSON string (the writer's string encoding). */
int json_escape_string(hanu_buf *out, const char *s, size_t len);

/* ----------------------------------------------------------------- member */

/* One top-level member of an object, found by json_member_find. */
typedef struct json_member {
    int found;
    json_type type;             /* of its value, when found */
    size_t start, end;          /* scalars: the value's bytes (a string with its quotes) */
    size_t str_len;             /* strings: the unescaped length */
    size_t brace;               /* offset of the object's opening '{' */
    int empty;                  /* the object has no members */
} json_member;

/* Validates in[0..len) as a JSON object (default options) and finds its first
 * top-level member whose unescaped name is name (at most 256 bytes). A string
 * value is unescaped into str when its str_len fits in str_cap (str may be NULL).
 * 0 (m->found says whether it is there), HANU_ERR_INVALID when in is not a
 * valid JSON object, HANU_ERR_NOMEM. */
int json_member_find(const char *in, size_t len, const char *name, size_t name_len, json_member *m,
                     char *str, size_t str_cap);

#endif
