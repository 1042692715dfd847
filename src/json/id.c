/*
 * id.c: the document _id helpers. Documents are stored as the exact bytes
 * the client sent; when a client gives no top-level "_id", the server inserts
 * "_id":"<id>" as the first member, right after the opening '{', and keeps
 * every other byte. Both helpers validate the whole input with the reader
 * (same rules as json_scan, default options) so that an invalid document is
 * never half-accepted.
 */
#include "json/json_internal.h"

#include <stdlib.h>

typedef struct id_info {
    int found;
    jtok value;         /* the "_id" member's value when found */
    size_t brace;       /* offset of the opening '{' */
    int empty;          /* the object has no members */
} id_info;

static int walk(jreader *r, id_info *info)
{
    jtok t;
    int rc = jr_next(r, &t), want_value = 0, first = 1;
    if (rc) return rc;
    if (t.kind != JT_OBJ_BEGIN)
        return jr_fail(r, HANU_ERR_INVALID, t.start, 1, "document must be a JSON object");
    info->brace = t.start;
    for (;;) {
        if ((rc = jr_next(r, &t))) return rc;
        if (first) { info->empty = t.kind == JT_OBJ_END; first = 0; }
        if (t.kind == JT_EOF) return HANU_OK;
        if (want_value) { info->value = t; want_value = 0; }
        if (t.kind == JT_KEY && r->depth == 1 && t.ulen == 3 && !info->found) {
            uint8_t k[3];
            jr_unescape(r->p, t.start, t.end, k);
            if (memcmp(k, "_id", 3) == 0) { info->found = 1; want_value = 1; }
        }
    }
}

/* Walks in with a stack key table, retrying with a full-size one if needed. */
static int id_walk(const char *in, size_t len, id_info *info, jreader *r)
{
    uint64_t keys[256];
    memset(info, 0, sizeof *info);
    int rc = jr_init(r, in, len, NULL, keys, sizeof keys, NULL);
    if (!rc) rc = walk(r, info);
    if (rc != HANU_ERR_NOMEM || !r->scratch_full) return rc;
    size_t need = json_scan_scratch_size(len);
    void *heap = malloc(need);
    if (!heap) return HANU_ERR_NOMEM;
    memset(info, 0, sizeof *info);
    rc = jr_init(r, in, len, NULL, heap, need, NULL);
    if (!rc) rc = walk(r, info);
    free(heap);
    return rc;
}

int json_id_find(const char *in, size_t len, char *out, size_t cap, size_t *out_len)
{
    id_info info;
    jreader r;
    int rc = id_walk(in, len, &info, &r);
    if (rc) return rc == HANU_ERR_NOMEM ? rc : HANU_ERR_INVALID;
    if (!info.found) return HANU_ERR_NOT_FOUND;
    if (info.value.kind != JT_STRING) return HANU_ERR_INVALID;
    *out_len = info.value.ulen;
    if (info.value.ulen > cap) return HANU_ERR_TOO_LARGE;
    jr_unescape(r.p, info.value.start, info.value.end, (uint8_t *)out);
    if (info.value.ulen < cap) out[info.value.ulen] = 0;
    return HANU_OK;
}

int json_id_insert(const char *in, size_t len, const char *id, size_t id_len, hanu_buf *out)
{
    id_info info;
    jreader r;
    int rc = id_walk(in, len, &info, &r);
    if (rc) return rc == HANU_ERR_NOMEM ? rc : HANU_ERR_INVALID;
    if (info.found) return HANU_ERR_EXISTS;
    size_t start = out->len;
    if ((rc = hanu_buf_append(out, in, info.brace + 1)) ||
        (rc = hanu_buf_append(out, "\"_id\":", 6)) ||
        (rc = json_escape_string(out, id, id_len)) ||
        (!info.empty && (rc = hanu_buf_append(out, ",", 1))) ||
        (rc = hanu_buf_append(out, in + info.brace + 1, len - info.brace - 1))) {
        out->len = start;
        return rc;
    }
    return HANU_OK;
}
