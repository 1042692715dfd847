/*
 * dom.c: json_doc_parse, a small tree for request bodies (filters, batches),
 * built from the reader's tokens. Everything a doc holds lives in one arena
 * (a chain of blocks, freed by json_doc_free in one call). While parsing,
 * the finished children of every open container wait on one growable stack
 * (malloc'd, freed before returning); when a container closes, its children
 * are copied into one arena array, so members and elements are contiguous
 * and json_at is O(1). Strings and keys are copied into the arena
 * (NUL-terminated), so a doc does not point into the input.
 */
#include "json/json_internal.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct arena_block {
    struct arena_block *next;
    size_t cap, used;
    alignas(max_align_t) uint8_t data[];
} arena_block;

struct json_doc {
    arena_block *blocks;
    size_t bytes;
    json_value root;
};

static void *arena_alloc(json_doc *d, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_block *b = d->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : 4096;
        if (cap > (1u << 20)) cap = 1u << 20;
        if (cap < n) cap = n;
        arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->next = b;
        nb->cap = cap;
        nb->used = 0;
        d->blocks = nb;
        d->bytes += sizeof *nb + cap;
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

void json_doc_free(json_doc *doc)
{
    if (!doc) return;
    arena_block *b = doc->blocks;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

const json_value *json_doc_root(const json_doc *doc) { return &doc->root; }
size_t json_doc_bytes(const json_doc *doc) { return doc->bytes + sizeof *doc; }

/* ---- building ---- */

typedef struct builder {
    json_doc *doc;
    jreader *r;
    json_value *stack;      /* finished children of the open containers */
    size_t n, cap;
    size_t first[JSON_MAX_DEPTH_CAP + 1];       /* per depth: its first child on the stack */
    json_value open[JSON_MAX_DEPTH_CAP + 1];    /* per depth: the container being built */
    const char *key;        /* the key just read, for the next value */
    size_t key_len;
} builder;

static int nomem(builder *b, size_t off)
{
    return jr_fail(b->r, HANU_ERR_NOMEM, off, 1, "out of memory parsing JSON");
}

static int copy_string(builder *b, const jtok *t, const char **out)
{
    uint8_t *s = arena_alloc(b->doc, t->ulen + 1);
    if (!s) return nomem(b, t->start);
    if (t->escaped) jr_unescape(b->r->p, t->start, t->end, s);
    else memcpy(s, b->r->p + t->start + 1, t->ulen);
    s[t->ulen] = 0;
    *out = (const char *)s;
    return HANU_OK;
}

/* A finished value: the root, or a child of the container open at r->depth. */
static int emit(builder *b, json_value *v)
{
    if (b->r->depth == 0) { b->doc->root = *v; return HANU_OK; }
    /* a container got its key when it opened (b->key has moved on since) */
    if (b->r->is_obj[b->r->depth] && !v->key) { v->key = b->key; v->key_len = b->key_len; }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        json_value *ns = realloc(b->stack, cap * sizeof *ns);
        if (!ns) return nomem(b, v->start);
        b->stack = ns;
        b->cap = cap;
    }
    b->stack[b->n++] = *v;
    return HANU_OK;
}

static int build(builder *b)
{
    jreader *r = b->r;
    jtok t;
    for (;;) {
        int rc = jr_next(r, &t);
        if (rc) return rc;
        json_value v;
        memset(&v, 0, sizeof v);
        v.start = t.start;
        v.end = t.end;
        switch (t.kind) {
        case JT_EOF:
            return HANU_OK;
        case JT_KEY:
            rc = copy_string(b, &t, &b->key);
            if (rc) return rc;
            b->key_len = t.ulen;
            continue;
        case JT_OBJ_BEGIN:
        case JT_ARR_BEGIN: {
            json_value *o = &b->open[r->depth];
            memset(o, 0, sizeof *o);
            o->type = t.kind == JT_OBJ_BEGIN ? JSON_OBJECT : JSON_ARRAY;
            o->start = t.start;
            /* the key (if any) belongs to the parent, one level up */
            if (r->depth > 1 && r->is_obj[r->depth - 1]) { o->key = b->key; o->key_len = b->key_len; }
            b->first[r->depth] = b->n;
            continue;
        }
        case JT_OBJ_END:
        case JT_ARR_END: {
            int d = r->depth + 1;
            json_value o = b->open[d];
            size_t k = b->first[d], n = b->n - k;
            o.end = t.end;
            o.u.kids.n = n;
            o.u.kids.items = NULL;
            if (n) {
                o.u.kids.items = arena_alloc(b->doc, n * sizeof(json_value));
                if (!o.u.kids.items) return nomem(b, t.start);
                memcpy(o.u.kids.items, b->stack + k, n * sizeof(json_value));
            }
            b->n = k;
            rc = emit(b, &o);
            if (rc) return rc;
            continue;
        }
        case JT_STRING:
            v.type = JSON_STRING;
            rc = copy_string(b, &t, &v.u.str.ptr);
            if (rc) return rc;
            v.u.str.len = t.ulen;
            break;
        case JT_NUMBER:
            v.type = JSON_NUMBER;
            v.is_int = t.is_int;
            v.u.num.d = t.d;
            v.u.num.i = t.i64;
            break;
        case JT_TRUE:
        case JT_FALSE:
            v.type = JSON_BOOL;
            v.u.boolean = t.kind == JT_TRUE;
            break;
        case JT_NULL:
            v.type = JSON_NULL;
            break;
        default:
            continue;
        }
        rc = emit(b, &v);
        if (rc) return rc;
    }
}

static int parse_once(const char *in, size_t len, const json_opts *opts, void *scratch,
                      size_t scratch_len, json_doc **out, json_error *err, int *scratch_full)
{
    jreader r;
    int rc = jr_init(&r, in, len, opts, scratch, scratch_len, err);
    if (rc) return rc;
    json_doc *doc = calloc(1, sizeof *doc);
    builder *b = malloc(sizeof *b);
    if (!doc || !b) {
        free(doc);
        free(b);
        return jr_fail(&r, HANU_ERR_NOMEM, 0, 0, "out of memory parsing JSON");
    }
    b->doc = doc;
    b->r = &r;
    b->stack = NULL;
    b->n = b->cap = 0;
    b->key = NULL;
    b->key_len = 0;
    rc = build(b);
    free(b->stack);
    free(b);
    *scratch_full = r.scratch_full;
    if (rc) { json_doc_free(doc); return rc; }
    *out = doc;
    return HANU_OK;
}

int json_doc_parse(const char *in, size_t len, const json_opts *opts,
                   json_doc **out, json_error *err)
{
    uint64_t keys[256];
    int full = 0;
    *out = NULL;
    int rc = parse_once(in, len, opts, keys, sizeof keys, out, err, &full);
    if (rc != HANU_ERR_NOMEM || !full) return rc;
    size_t need = json_scan_scratch_size(len);
    void *heap = malloc(need);
    if (!heap) {
        if (err) { err->offset = 0; snprintf(err->msg, sizeof err->msg, "out of memory parsing JSON"); }
        return HANU_ERR_NOMEM;
    }
    rc = parse_once(in, len, opts, heap, need, out, err, &full);
    free(heap);
    return rc;
}

/* ---- reading ---- */

const json_value *json_getn(const json_value *obj, const char *name, size_t name_len)
{
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < obj->u.kids.n; i++) {
        const json_value *m = &obj->u.kids.items[i];
        if (m->key_len == name_len && memcmp(m->key, name, name_len) == 0) return m;
    }
    return NULL;
}

const json_value *json_get(const json_value *obj, const char *name)
{
    return json_getn(obj, name, strlen(name));
}

size_t json_len(const json_value *v)
{
    return v && (v->type == JSON_ARRAY || v->type == JSON_OBJECT) ? v->u.kids.n : 0;
}

const json_value *json_at(const json_value *v, size_t i)
{
    return i < json_len(v) ? &v->u.kids.items[i] : NULL;
}

int json_as_string(const json_value *v, const char **s, size_t *len)
{
    if (!v || v->type != JSON_STRING) return HANU_ERR_INVALID;
    *s = v->u.str.ptr;
    *len = v->u.str.len;
    return HANU_OK;
}

int json_as_int64(const json_value *v, int64_t *out)
{
    if (!v || v->type != JSON_NUMBER || !v->is_int) return HANU_ERR_INVALID;
    *out = v->u.num.i;
    return HANU_OK;
}

int json_as_double(const json_value *v, double *out)
{
    if (!v || v->type != JSON_NUMBER) return HANU_ERR_INVALID;
    *out = v->u.num.d;
    return HANU_OK;
}

int json_as_bool(const json_value *v, int *out)
{
    if (!v || v->type != JSON_BOOL) return HANU_ERR_INVALID;
    *out = v->u.boolean;
    return HANU_OK;
}
