/*
 * json_internal.h: the validating pull tokenizer that the scanner, the DOM and
 * the member finder share (reader.c), so that all of them accept exactly the
 * same inputs. Not part of the module's contract; only src/json/ includes it.
 *
 * The reader hands out one token per jr_next() call and keeps the grammar
 * state itself (what may come next, the open containers, the keys of every
 * open object for the duplicate check). It allocates nothing: the caller's
 * scratch buffer holds the key table, growing down from its end, while the
 * caller may use the front of the same buffer (r->front bytes) for its own
 * work (the scanner keeps the dotted path there).
 */
#ifndef HANU_JSON_INTERNAL_H
#define HANU_JSON_INTERNAL_H

#include "json/json.h"

enum jtok_kind {
    JT_OBJ_BEGIN = 1,
    JT_OBJ_END,
    JT_ARR_BEGIN,
    JT_ARR_END,
    JT_KEY,
    JT_STRING,
    JT_NUMBER,
    JT_TRUE,
    JT_FALSE,
    JT_NULL,
    JT_EOF,
};

typedef struct jtok {
    int kind;
    size_t start, end;  /* bytes of the token; strings and keys include their quotes */
    int escaped;        /* strings/keys: contains a backslash escape */
    size_t ulen;        /* strings/keys: unescaped length in bytes */
    int is_int;         /* numbers: see json_leaf */
    int64_t i64;
    double d;
} jtok;

typedef struct jreader {
    const uint8_t *p;
    size_t len;
    size_t pos;
    int state;
    int depth;                  /* open containers */
    int max_depth;
    int dup_check;
    uint8_t is_obj[JSON_MAX_DEPTH_CAP + 1];     /* per depth, 1..depth */
    size_t kbase[JSON_MAX_DEPTH_CAP + 1];       /* first key-table entry of that object */
    uint8_t *scratch;           /* caller's buffer */
    size_t front;               /* bytes at scratch[0..front) the caller is using */
    uint64_t *kend;             /* key table: entry i is kend[-1 - i] */
    size_t ktop;                /* entries in use */
    int scratch_full;           /* the last failure was the scratch buffer being too small */
    json_error *err;
} jreader;

/* Length of the well-formed UTF-8 sequence of 2..4 bytes at s (n bytes left), or 0. */
static inline int json_utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0xC2) return 0;                     /* continuation byte, or overlong C0/C1 */
    if (c < 0xE0) return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        uint8_t lo = c == 0xE0 ? 0xA0 : 0x80;   /* E0: no overlongs */
        uint8_t hi = c == 0xED ? 0x9F : 0xBF;   /* ED: no surrogates */
        return n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c < 0xF5) {
        uint8_t lo = c == 0xF0 ? 0x90 : 0x80;   /* F0: no overlongs */
        uint8_t hi = c == 0xF4 ? 0x8F : 0xBF;   /* F4: nothing above U+10FFFF */
        return n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80 &&
               (s[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

/* Prepares r; fails (HANU_ERR_TOO_LARGE) only for len >= 4 GiB. */
int jr_init(jreader *r, const char *in, size_t len, const json_opts *opts,
            void *scratch, size_t scratch_len, json_error *err);
/* Next token into *t: 0, or a negative status with r->err filled in. After
 * JT_EOF the input was one complete, valid JSON value. */
int jr_next(jreader *r, jtok *t);
/* Bytes at the front of scratch that are free of the key table. */
static inline size_t jr_room(const jreader *r)
{
    return (size_t)((const uint8_t *)(r->kend - r->ktop) - r->scratch);
}
/* Records a failure: code, offset and message (printf format, then " at byte N"
 * is appended unless at_byte is 0). Returns code. */
int jr_fail(jreader *r, int code, size_t off, int at_byte, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Unescapes the validated string token p[start..end) (quotes included) into
 * out, which has room for its ulen bytes; returns the bytes written. */
size_t jr_unescape(const uint8_t *p, size_t start, size_t end, uint8_t *out);

#endif
