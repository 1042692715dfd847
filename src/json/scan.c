/*
 * scan.c: json_scan, the one-pass validate-and-walk used on every document
 * write, and json_validate. It drives the reader (reader.c) and keeps the
 * dotted path of the current value at the front of the caller's scratch
 * buffer: path[0..base[d]) is the path of the container open at depth d; a
 * key of that object is written after it ("a" + "." + key, no dot when no key
 * lies above the object), an array's elements reuse the array's path. An escaped string value is unescaped just
 * after the path's NUL for the duration of the callback. No allocation.
 */
#include "json/json_internal.h"

#include <stdlib.h>

const char *json_type_name(json_type t)
{
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "bool";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "unknown";
}

size_t json_scan_scratch_size(size_t len)
{
    /* path + one unescaped string <= len; one 8-byte key entry per >= 4 input bytes */
    return 3 * len + 64;
}

static int room_fail(jreader *r, size_t off)
{
    r->scratch_full = 1;
    return jr_fail(r, HANU_ERR_NOMEM, off, 1, "scratch buffer too small for the path");
}

static int scan_with(jreader *r, json_leaf_fn fn, void *ctx)
{
    size_t base[JSON_MAX_DEPTH_CAP + 1];
    uint8_t keyed[JSON_MAX_DEPTH_CAP + 1];   /* the container's path holds a key: add '.' */
    size_t plen = 0;
    uint8_t *s = r->scratch;
    jtok t;
    base[0] = 0;
    if (fn) {
        if (jr_room(r) < 1) return room_fail(r, 0);
        s[0] = 0;
        r->front = 1;
    }
    for (;;) {
        int rc = jr_next(r, &t);
        if (rc) return rc;
        json_leaf leaf;
        switch (t.kind) {
        case JT_EOF:
            return HANU_OK;
        case JT_OBJ_BEGIN:
        case JT_ARR_BEGIN:
            base[r->depth] = plen;
            keyed[r->depth] = r->depth > 1 && (r->is_obj[r->depth - 1] || keyed[r->depth - 1]);
            continue;
        case JT_OBJ_END:
        case JT_ARR_END:
            plen = base[r->depth + 1];
            continue;
        case JT_KEY: {
            if (!fn) continue;
            size_t b = base[r->depth], at = b + keyed[r->depth];
            if (jr_room(r) < at + t.ulen + 1) return room_fail(r, t.start);
            if (keyed[r->depth]) s[b] = '.';
            if (t.escaped) jr_unescape(r->p, t.start, t.end, s + at);
            else memcpy(s + at, r->p + t.start + 1, t.ulen);
            plen = at + t.ulen;
            s[plen] = 0;
            r->front = plen + 1;
            continue;
        }
        case JT_STRING:
            if (!fn) continue;
            leaf.type = JSON_STRING;
            if (t.escaped) {
                if (jr_room(r) < plen + 1 + t.ulen) return room_fail(r, t.start);
                jr_unescape(r->p, t.start, t.end, s + plen + 1);
                leaf.str = (const char *)s + plen + 1;
            } else {
                leaf.str = (const char *)r->p + t.start + 1;
            }
            leaf.str_len = t.ulen;
            break;
        case JT_NUMBER:
            if (!fn) continue;
            leaf.type = JSON_NUMBER;
            leaf.num = t.d;
            leaf.i64 = t.i64;
            leaf.is_int = t.is_int;
            break;
        case JT_TRUE:
        case JT_FALSE:
            if (!fn) continue;
            leaf.type = JSON_BOOL;
            leaf.boolean = t.kind == JT_TRUE;
            break;
        case JT_NULL:
            if (!fn) continue;
            leaf.type = JSON_NULL;
            break;
        default:
            continue;
        }
        if (leaf.type != JSON_STRING) { leaf.str = NULL; leaf.str_len = 0; }
        if (leaf.type != JSON_NUMBER) { leaf.num = 0; leaf.i64 = 0; leaf.is_int = 0; }
        if (leaf.type != JSON_BOOL) leaf.boolean = 0;
        leaf.path = (const char *)s;
        leaf.path_len = plen;
        s[plen] = 0;
        leaf.start = t.start;
        leaf.end = t.end;
        leaf.in_array = r->depth > 0 && !r->is_obj[r->depth];
        leaf.depth = r->depth;
        rc = fn(ctx, &leaf);
        if (rc) return rc;
    }
}

int json_scan(const char *in, size_t len, const json_opts *opts,
              void *scratch, size_t scratch_len,
              json_leaf_fn fn, void *ctx, json_error *err)
{
    jreader r;
    int rc = jr_init(&r, in, len, opts, scratch, scratch_len, err);
    if (rc) return rc;
    return scan_with(&r, fn, ctx);
}

int json_validate(const char *in, size_t len, const json_opts *opts, json_error *err)
{
    uint64_t stackbuf[512];
    jreader r;
    int rc = jr_init(&r, in, len, opts, stackbuf, sizeof stackbuf, err);
    if (rc) return rc;
    rc = scan_with(&r, NULL, NULL);
    if (rc != HANU_ERR_NOMEM || !r.scratch_full) return rc;
    /* An object with more keys than the stack table holds: retry with a table
     * big enough for any input of this length. */
    size_t need = json_scan_scratch_size(len);
    void *heap = malloc(need);
    if (!heap) return jr_fail(&r, HANU_ERR_NOMEM, 0, 0, "out of memory validating %zu bytes", len);
    rc = jr_init(&r, in, len, opts, heap, need, err);
    if (!rc) rc = scan_with(&r, NULL, NULL);
    free(heap);
    return rc;
}
