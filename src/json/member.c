/*
 * member.c: one top-level member of a JSON object document, found in the same
 * validating pass that checks the whole input with the reader (same rules as
 * json_scan, default options), so that an invalid document is never half
 * accepted. The documents layer builds its "_id" rule on it (src/docs).
 */
#include "json/json_internal.h"

#include <stdlib.h>

#define MEMBER_NAME_MAX 256

static json_type type_of(int kind)
{
    switch (kind) {
    case JT_OBJ_BEGIN: return JSON_OBJECT;
    case JT_ARR_BEGIN: return JSON_ARRAY;
    case JT_STRING: return JSON_STRING;
    case JT_NUMBER: return JSON_NUMBER;
    case JT_TRUE: case JT_FALSE: return JSON_BOOL;
    default: return JSON_NULL;
    }
}

static int walk(jreader *r, const char *name, size_t name_len, json_member *m, jtok *value)
{
    jtok t;
    int rc = jr_next(r, &t), want_value = 0, first = 1;
    if (rc) return rc;
    if (t.kind != JT_OBJ_BEGIN)
        return jr_fail(r, HANU_ERR_INVALID, t.start, 1, "document must be a JSON object");
    m->brace = t.start;
    for (;;) {
        if ((rc = jr_next(r, &t))) return rc;
        if (first) { m->empty = t.kind == JT_OBJ_END; first = 0; }
        if (t.kind == JT_EOF) return HANU_OK;
        if (want_value) { *value = t; want_value = 0; }
        if (t.kind == JT_KEY && r->depth == 1 && t.ulen == name_len && !m->found) {
            uint8_t k[MEMBER_NAME_MAX];
            jr_unescape(r->p, t.start, t.end, k);
            if (memcmp(k, name, name_len) == 0) { m->found = 1; want_value = 1; }
        }
    }
}

/* Walks in with a stack key table, retrying with a full-size one if needed. */
static int member_walk(const char *in, size_t len, const char *name, size_t name_len, json_member *m,
                       jtok *value, jreader *r)
{
    uint64_t keys[256];
    memset(m, 0, sizeof *m);
    int rc = jr_init(r, in, len, NULL, keys, sizeof keys, NULL);
    if (!rc) rc = walk(r, name, name_len, m, value);
    if (rc != HANU_ERR_NOMEM || !r->scratch_full) return rc;
    size_t need = json_scan_scratch_size(len);
    void *heap = malloc(need);
    if (!heap) return HANU_ERR_NOMEM;
    memset(m, 0, sizeof *m);
    rc = jr_init(r, in, len, NULL, heap, need, NULL);
    if (!rc) rc = walk(r, name, name_len, m, value);
    free(heap);
    return rc;
}

int json_member_find(const char *in, size_t len, const char *name, size_t name_len, json_member *m,
                     char *str, size_t str_cap)
{
    if (name_len > MEMBER_NAME_MAX) return HANU_ERR_INVALID;
    jtok value = {0};
    jreader r;
    int rc = member_walk(in, len, name, name_len, m, &value, &r);
    if (rc) return rc == HANU_ERR_NOMEM ? rc : HANU_ERR_INVALID;
    if (!m->found) return HANU_OK;
    m->type = type_of(value.kind);
    /* A container's first token is its opening bracket: its span ends later, and
       nobody needs it yet, so only scalars carry their bytes. */
    m->start = value.start;
    m->end = value.end;
    if (value.kind == JT_STRING) {
        m->str_len = value.ulen;
        if (str && value.ulen <= str_cap) jr_unescape(r.p, value.start, value.end, (uint8_t *)str);
    }
    return HANU_OK;
}
