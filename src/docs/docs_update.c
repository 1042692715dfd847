/*
 * docs_update.c: partial updates of a document (docs.h, docs/API.md
 * "Updates"): MongoDB's update operators and RFC 7396 merge patches.
 *
 * A stored document is parsed into a small mutable tree (unode), the update
 * is applied to the tree, and the tree is written back compactly. Numbers the
 * update does not touch keep the text they were stored with; computed numbers
 * are written by the JSON writer. Comparisons ($min, $max, $addToSet, $pull)
 * use the query module's order and equality (query_value_compare), on values
 * re-parsed from the tree: the same rules as filters, at the cost of a copy.
 *
 * An update is checked whole when parsed (unknown operators, operand types,
 * paths, two operators on one path); what depends on the document (a string
 * where $inc wants a number) fails at apply time, and then nothing of the
 * update is kept: the caller stores nothing.
 */
#include "docs/docs.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "json/json.h"
#include "query/query.h"

/* ---- errors ---- */

static int fail(docs_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(docs_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->status = 400;
    e->code = "invalid_update";
    return HANU_ERR_INVALID;
}

static int nomem(docs_error *e)
{
    snprintf(e->message, sizeof e->message, "out of memory");
    e->status = 500;
    e->code = "internal";
    return HANU_ERR_NOMEM;
}

/* ---- the mutable tree ---- */

typedef struct unode unode;
struct unode {
    json_type type;
    char *key;              /* member name (malloc'd) inside an object, else NULL */
    size_t key_len;
    int boolean;
    int is_int;             /* numbers: i exact when set, else d */
    int64_t i;
    double d;
    char *raw;              /* numbers: the text as stored (malloc'd), NULL when computed */
    size_t raw_len;
    char *s;                /* strings (malloc'd, unescaped) */
    size_t slen;
    unode **kids;           /* arrays and objects */
    size_t n, cap;
};

static void un_free(unode *u)
{
    if (!u) return;
    for (size_t i = 0; i < u->n; i++) un_free(u->kids[i]);
    free(u->kids);
    free(u->key);
    free(u->raw);
    free(u->s);
    free(u);
}

static char *dup_bytes(const char *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        if (n) memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

static int un_set_key(unode *u, const char *k, size_t kl)
{
    free(u->key);
    u->key = dup_bytes(k, kl);
    u->key_len = kl;
    return u->key ? HANU_OK : HANU_ERR_NOMEM;
}

static int un_append(unode *parent, unode *kid)
{
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? 2 * parent->cap : 4;
        unode **k = realloc(parent->kids, cap * sizeof *k);
        if (!k) return HANU_ERR_NOMEM;
        parent->kids = k;
        parent->cap = cap;
    }
    parent->kids[parent->n++] = kid;
    return HANU_OK;
}

static int un_insert(unode *parent, size_t at, unode *kid)
{
    if (un_append(parent, kid)) return HANU_ERR_NOMEM;
    memmove(parent->kids + at + 1, parent->kids + at, (parent->n - 1 - at) * sizeof *parent->kids);
    parent->kids[at] = kid;
    return HANU_OK;
}

static void un_remove(unode *parent, size_t at)
{
    un_free(parent->kids[at]);
    memmove(parent->kids + at, parent->kids + at + 1, (parent->n - at - 1) * sizeof *parent->kids);
    parent->n--;
}

/* A tree of v, a value of a DOM parsed from text. */
static unode *un_from(const char *text, const json_value *v)
{
    unode *u = calloc(1, sizeof *u);
    if (!u) return NULL;
    u->type = v->type;
    int ok = 1;
    switch (v->type) {
    case JSON_BOOL: u->boolean = v->u.boolean; break;
    case JSON_NUMBER:
        u->is_int = v->is_int;
        u->i = v->u.num.i;
        u->d = v->u.num.d;
        u->raw_len = v->end - v->start;
        ok = (u->raw = dup_bytes(text + v->start, u->raw_len)) != NULL;
        break;
    case JSON_STRING:
        u->slen = v->u.str.len;
        ok = (u->s = dup_bytes(v->u.str.ptr, u->slen)) != NULL;
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        for (size_t i = 0; ok && i < v->u.kids.n; i++) {
            const json_value *k = &v->u.kids.items[i];
            unode *kid = un_from(text, k);
            if (!kid) { ok = 0; break; }
            if ((v->type == JSON_OBJECT && un_set_key(kid, k->key, k->key_len)) || un_append(u, kid)) {
                un_free(kid);
                ok = 0;
            }
        }
        break;
    default: break;
    }
    if (!ok) { un_free(u); return NULL; }
    return u;
}

static unode *un_new(json_type t)
{
    unode *u = calloc(1, sizeof *u);
    if (u) u->type = t;
    return u;
}

static unode *un_number(int is_int, int64_t i, double d)
{
    unode *u = un_new(JSON_NUMBER);
    if (u) { u->is_int = is_int; u->i = i; u->d = is_int ? (double)i : d; }
    return u;
}

static unode *un_string(const char *s, size_t n)
{
    unode *u = un_new(JSON_STRING);
    if (u && !(u->s = dup_bytes(s, n))) { free(u); return NULL; }
    if (u) u->slen = n;
    return u;
}

static void un_write(json_writer *w, const unode *u)
{
    switch (u->type) {
    case JSON_NULL: json_write_null(w); break;
    case JSON_BOOL: json_write_bool(w, u->boolean); break;
    case JSON_NUMBER:
        if (u->raw) json_write_raw(w, u->raw, u->raw_len);
        else if (u->is_int) json_write_int64(w, u->i);
        else json_write_double(w, u->d);
        break;
    case JSON_STRING: json_write_string(w, u->s, u->slen); break;
    case JSON_ARRAY:
        json_write_array_begin(w);
        for (size_t i = 0; i < u->n; i++) un_write(w, u->kids[i]);
        json_write_array_end(w);
        break;
    case JSON_OBJECT:
        json_write_object_begin(w);
        for (size_t i = 0; i < u->n; i++) {
            json_write_key(w, u->kids[i]->key, u->kids[i]->key_len);
            un_write(w, u->kids[i]);
        }
        json_write_object_end(w);
        break;
    }
}

/* The member named k of an object, or -1. */
static ssize_t un_find(const unode *obj, const char *k, size_t kl)
{
    for (size_t i = 0; i < obj->n; i++)
        if (obj->kids[i]->key_len == kl && !memcmp(obj->kids[i]->key, k, kl)) return (ssize_t)i;
    return -1;
}

/* Replaces parent's kid at idx by nu (which takes its key). */
static int un_replace(unode *parent, size_t idx, unode *nu)
{
    unode *old = parent->kids[idx];
    if (old->key) {
        free(nu->key);
        nu->key = old->key;
        nu->key_len = old->key_len;
        old->key = NULL;
    }
    un_free(old);
    parent->kids[idx] = nu;
    return HANU_OK;
}

/* A parsed copy of u (for the query module's comparisons): *doc to free. */
static const json_value *un_value(const unode *u, json_doc **doc)
{
    hanu_buf b = {0};
    json_writer w;
    json_writer_init(&w, &b);
    un_write(&w, u);
    const json_value *v = NULL;
    *doc = NULL;
    json_opts o = { .max_depth = JSON_MAX_DEPTH_CAP };
    if (json_writer_status(&w) == HANU_OK && json_doc_parse((const char *)b.data, b.len, &o, doc, NULL) == HANU_OK)
        v = json_doc_root(*doc);
    hanu_buf_free(&b);
    return v;
}

/* ---- paths ---- */

#define PATH_MAX_PARTS 64

typedef struct upath {
    const char *p[PATH_MAX_PARTS];
    size_t l[PATH_MAX_PARTS];
    size_t n;
} upath;

static int split_path(const char *op, const char *s, size_t len, upath *out, docs_error *e)
{
    out->n = 0;
    if (len == 0) return fail(e, "%s: an empty field path", op);
    if (len > QUERY_MAX_PATH_BYTES) return fail(e, "%s: a field path longer than %d bytes", op, QUERY_MAX_PATH_BYTES);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') continue;
        if (i == start) return fail(e, "%s of \"%.*s\": an empty part in the path", op, (int)len, s);
        if (s[start] == '$')
            return fail(e, "%s of \"%.*s\": positional parts ($, $[]) are not supported", op, (int)len, s);
        if (out->n == PATH_MAX_PARTS) return fail(e, "%s of \"%.*s\": more than %d parts", op, (int)len, s, PATH_MAX_PARTS);
        out->p[out->n] = s + start;
        out->l[out->n++] = i - start;
        start = i + 1;
    }
    return HANU_OK;
}

/* An array index: digits only, below 2^31 (MongoDB's form of "a.0.b"). */
static int part_index(const char *p, size_t l, size_t *idx)
{
    if (l == 0 || l > 9) return 0;
    size_t n = 0;
    for (size_t i = 0; i < l; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        n = n * 10 + (size_t)(p[i] - '0');
    }
    *idx = n;
    return 1;
}

#define MAX_ARRAY_PAD 1500000   /* $set of "a.N" past the end pads with nulls, up to here */

/* Walks the path. Found: 1 with *parent and *idx naming the value. Missing:
   0, or with create, the objects on the way are made and *parent and *idx name
   where the value goes (*idx == parent->n: append; an array is padded with nulls
   up to idx first). A scalar, or an array with a part that is no index, on the
   way: 0 without create; an error naming both with it. */
static int walk(unode *root, const char *op, const char *path, size_t path_len, const upath *pp, int create,
                unode **parent, size_t *idx, docs_error *e)
{
    unode *cur = root;
    for (size_t k = 0; k < pp->n; k++) {
        int last = k + 1 == pp->n;
        size_t at;
        int found = 0;
        if (cur->type == JSON_OBJECT) {
            ssize_t f = un_find(cur, pp->p[k], pp->l[k]);
            found = f >= 0;
            at = found ? (size_t)f : cur->n;
        } else if (cur->type == JSON_ARRAY) {
            if (!part_index(pp->p[k], pp->l[k], &at)) {
                if (!create) return 0;
                return fail(e, "%s of \"%.*s\": \"%.*s\" is an array and \"%.*s\" is not an index", op,
                            (int)path_len, path, (int)(pp->p[k] - path - (k ? 1 : 0)), path, (int)pp->l[k], pp->p[k]);
            }
            found = at < cur->n;
        } else {
            if (!create) return 0;
            return fail(e, "%s of \"%.*s\": \"%.*s\" is %s %s, not an object", op, (int)path_len, path,
                        (int)(pp->p[k] - path - 1), path, cur->type == JSON_ARRAY || cur->type == JSON_OBJECT ? "an" : "a",
                        json_type_name(cur->type));
        }
        if (found && last) { *parent = cur; *idx = at; return 1; }
        if (!found && !create) return 0;
        if (!found) {
            if (cur->type == JSON_ARRAY) {
                if (at > MAX_ARRAY_PAD)
                    return fail(e, "%s of \"%.*s\": index %zu is too far past the array's end", op, (int)path_len,
                                path, at);
                while (cur->n < at) {
                    unode *nul = un_new(JSON_NULL);
                    if (!nul || un_append(cur, nul)) { un_free(nul); return nomem(e); }
                }
            }
            if (last) { *parent = cur; *idx = at; return 0; }
            unode *obj = un_new(JSON_OBJECT);
            if (!obj) return nomem(e);
            if ((cur->type == JSON_OBJECT && un_set_key(obj, pp->p[k], pp->l[k])) || un_append(cur, obj)) {
                un_free(obj);
                return nomem(e);
            }
        }
        cur = cur->kids[at];
    }
    return 0;   /* not reached: a path has a part */
}

/* Puts nu at the slot walk gave: replaces, appends a member, or appends to an array. */
static int put_at(unode *parent, size_t idx, int found, const upath *pp, unode *nu, docs_error *e)
{
    if (found) return un_replace(parent, idx, nu);
    if (parent->type == JSON_OBJECT && un_set_key(nu, pp->p[pp->n - 1], pp->l[pp->n - 1])) {
        un_free(nu);
        return nomem(e);
    }
    if (un_append(parent, nu)) { un_free(nu); return nomem(e); }
    return HANU_OK;
}

/* ---- the parsed update ---- */

enum uop {
    U_SET = 1, U_UNSET, U_INC, U_MUL, U_MIN, U_MAX, U_RENAME, U_PUSH, U_PULL, U_ADD_TO_SET, U_POP, U_CURRENT_DATE,
};

static const struct { const char *name; int op; } op_names[] = {
    { "$set", U_SET }, { "$unset", U_UNSET }, { "$inc", U_INC }, { "$mul", U_MUL }, { "$min", U_MIN },
    { "$max", U_MAX }, { "$rename", U_RENAME }, { "$push", U_PUSH }, { "$pull", U_PULL },
    { "$addToSet", U_ADD_TO_SET }, { "$pop", U_POP }, { "$currentDate", U_CURRENT_DATE },
};

typedef struct uitem {
    int op;
    const char *name;           /* "$inc" */
    const char *path;           /* the member's key (NUL-terminated, in the DOM) */
    size_t path_len;
    upath pp;
    const json_value *arg;      /* the operand */
    /* $rename: the new path */
    const char *to;
    size_t to_len;
    upath to_pp;
    /* $push, $addToSet: the values ($each or the one operand), $slice, $position */
    const json_value *each;     /* an array, or NULL: arg is the one value */
    int has_slice, has_position;
    int64_t slice, position;
    /* $pull: a condition (NULL: equality with arg); wrap: it matches {"v":element} */
    filter *cond;
    int wrap;
    int timestamp;              /* $currentDate: epoch ms instead of a date string */
} uitem;

struct docs_update {
    int kind;
    char *text;                 /* a copy of the update: dom's spans point into it */
    size_t len;
    json_doc *dom;
    uitem *items;
    size_t n;
};

void docs_update_free(docs_update *u)
{
    if (!u) return;
    for (size_t i = 0; i < u->n; i++) filter_free(u->items[i].cond);
    free(u->items);
    json_doc_free(u->dom);
    free(u->text);
    free(u);
}

static int is_number(const json_value *v) { return v && v->type == JSON_NUMBER; }

/* Two paths conflict when one is the other or lies inside it. */
static int paths_conflict(const char *a, size_t al, const char *b, size_t bl)
{
    size_t m = HANU_MIN(al, bl);
    if (memcmp(a, b, m)) return 0;
    if (al == bl) return 1;
    return (al > bl ? a : b)[m] == '.';
}

static int parse_push_like(uitem *it, const char *text, docs_error *e)
{
    const json_value *a = it->arg;
    if (a->type != JSON_OBJECT || !json_len(a) || json_at(a, 0)->key[0] != '$') return HANU_OK;
    for (size_t i = 0; i < json_len(a); i++) {
        const json_value *m = json_at(a, i);
        if (!strcmp(m->key, "$each")) {
            if (m->type != JSON_ARRAY) return fail(e, "%s of \"%s\": $each must be an array", it->name, it->path);
            it->each = m;
        } else if (it->op == U_PUSH && !strcmp(m->key, "$slice")) {
            if (json_as_int64(m, &it->slice)) return fail(e, "%s of \"%s\": $slice must be an integer", it->name, it->path);
            it->has_slice = 1;
        } else if (it->op == U_PUSH && !strcmp(m->key, "$position")) {
            if (json_as_int64(m, &it->position))
                return fail(e, "%s of \"%s\": $position must be an integer", it->name, it->path);
            it->has_position = 1;
        } else {
            return fail(e, "%s of \"%s\": unsupported modifier %.32s (%s)", it->name, it->path, m->key,
                        it->op == U_PUSH ? "$each, $slice and $position are" : "$each is");
        }
    }
    if (!it->each) return fail(e, "%s of \"%s\": modifiers need $each", it->name, it->path);
    (void)text;
    return HANU_OK;
}

static int parse_pull(uitem *it, const char *text, docs_error *e)
{
    const json_value *a = it->arg;
    if (a->type != JSON_OBJECT || !json_len(a)) return HANU_OK;   /* equality */
    int all_ops = 1;
    for (size_t i = 0; i < json_len(a); i++) {
        const char *k = json_at(a, i)->key;
        if (k[0] != '$' || !strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor")) all_ops = 0;
    }
    query_error qe;
    char where[64 + QUERY_MAX_PATH_BYTES];
    snprintf(where, sizeof where, "$pull.%s", it->path);
    int rc;
    if (all_ops) {
        /* A condition on the element itself: {"v": cond} matched against {"v": element}. */
        hanu_buf b = {0};
        hanu_buf_append(&b, "{\"v\":", 5);
        hanu_buf_append(&b, text + a->start, a->end - a->start);
        hanu_buf_append(&b, "}", 1);
        rc = b.data ? filter_parse((const char *)b.data, b.len, where, &it->cond, &qe) : HANU_ERR_NOMEM;
        hanu_buf_free(&b);
        it->wrap = 1;
    } else {
        rc = filter_parse_value(text, a, where, &it->cond, &qe);   /* a query on object elements */
    }
    if (rc == HANU_ERR_NOMEM) return nomem(e);
    if (rc) return fail(e, "%s", qe.msg);
    return HANU_OK;
}

static int parse_item(uitem *it, const char *text, docs_error *e)
{
    const json_value *a = it->arg;
    if (split_path(it->name, it->path, it->path_len, &it->pp, e)) return HANU_ERR_INVALID;
    switch (it->op) {
    case U_INC: case U_MUL:
        if (!is_number(a))
            return fail(e, "%s of \"%s\": the operand must be a number, not %s", it->name, it->path, json_type_name(a->type));
        break;
    case U_RENAME:
        if (json_as_string(a, &it->to, &it->to_len))
            return fail(e, "$rename of \"%s\": the new name must be a string", it->path);
        if (split_path("$rename", it->to, it->to_len, &it->to_pp, e)) return HANU_ERR_INVALID;
        if (paths_conflict(it->path, it->path_len, it->to, it->to_len))
            return fail(e, "$rename of \"%s\" to \"%.*s\": a field cannot be renamed to itself, inside itself or to "
                        "a field that holds it", it->path, (int)it->to_len, it->to);
        break;
    case U_PUSH: case U_ADD_TO_SET: return parse_push_like(it, text, e);
    case U_PULL: return parse_pull(it, text, e);
    case U_POP: {
        int64_t v;
        if (json_as_int64(a, &v) || (v != 1 && v != -1))
            return fail(e, "$pop of \"%s\": the operand must be 1 (the last element) or -1 (the first)", it->path);
        break;
    }
    case U_CURRENT_DATE: {
        int b;
        const char *t;
        size_t tl;
        if (json_as_bool(a, &b) == HANU_OK && b) break;
        const json_value *ty = json_get(a, "$type");
        if (a->type == JSON_OBJECT && json_len(a) == 1 && json_as_string(ty, &t, &tl) == HANU_OK) {
            if (tl == 4 && !memcmp(t, "date", 4)) break;
            if (tl == 9 && !memcmp(t, "timestamp", 9)) { it->timestamp = 1; break; }
        }
        return fail(e, "$currentDate of \"%s\": the operand must be true, {\"$type\":\"date\"} or "
                    "{\"$type\":\"timestamp\"}", it->path);
    }
    default: break;
    }
    return HANU_OK;
}

static int parse_operators(docs_update *u, docs_error *e)
{
    const json_value *root = json_doc_root(u->dom);
    if (root->type != JSON_OBJECT) return fail(e, "an update must be a JSON object of operators like {\"$set\":{..}}");
    if (!json_len(root)) return fail(e, "an update needs at least one operator ($set, $inc, ...)");
    size_t total = 0;
    for (size_t i = 0; i < json_len(root); i++) total += json_len(json_at(root, i));
    if (total > DOCS_UPDATE_MAX_FIELDS) return fail(e, "an update changes at most %d fields", DOCS_UPDATE_MAX_FIELDS);
    if (!(u->items = calloc(total ? total : 1, sizeof *u->items))) return nomem(e);
    for (size_t i = 0; i < json_len(root); i++) {
        const json_value *o = json_at(root, i);
        int op = 0;
        for (size_t k = 0; k < sizeof op_names / sizeof *op_names; k++)
            if (!strcmp(o->key, op_names[k].name)) op = op_names[k].op;
        if (!op && o->key[0] != '$')
            return fail(e, "\"%.64s\" is not an update operator: an update is made of operators ($set, $inc, ...); a "
                        "replacement is a PUT, a merge patch a PATCH with Content-Type application/merge-patch+json",
                        o->key);
        if (!op) return fail(e, "unknown update operator %.64s", o->key);
        if (o->type != JSON_OBJECT)
            return fail(e, "%s: must be an object of field paths, not %s", o->key, json_type_name(o->type));
        for (size_t j = 0; j < json_len(o); j++) {
            const json_value *m = json_at(o, j);
            uitem *it = &u->items[u->n++];
            *it = (uitem){ .op = op, .name = o->key, .path = m->key, .path_len = m->key_len, .arg = m };
            if (parse_item(it, u->text, e)) return HANU_ERR_INVALID;
        }
    }
    /* Two operators on one field, or on a field and one inside it, are refused (as MongoDB does). */
    for (size_t i = 0; i < u->n; i++)
        for (size_t j = 0; j < u->n; j++) {
            const uitem *a = &u->items[i], *b = &u->items[j];
            const char *bp[2] = { b->path, b->to };
            size_t bl[2] = { b->path_len, b->to_len };
            for (int k = 0; k < 1 + (b->op == U_RENAME); k++) {
                if (i == j && k == 0) continue;
                if (paths_conflict(a->path, a->path_len, bp[k], bl[k]))
                    return fail(e, "%s of \"%s\" and %s of \"%.*s\" conflict: one field, or one inside the other", a->name,
                                a->path, b->name, (int)bl[k], bp[k]);
            }
        }
    return HANU_OK;
}

int docs_update_parse(const char *in, size_t len, int kind, docs_update **out, docs_error *e)
{
    *out = NULL;
    docs_update *u = calloc(1, sizeof *u);
    if (!u || !(u->text = dup_bytes(in, len))) { free(u); return nomem(e); }
    u->kind = kind;
    u->len = len;
    json_error je;
    int rc = json_doc_parse(u->text, len, NULL, &u->dom, &je);
    if (rc == HANU_ERR_NOMEM) rc = nomem(e);
    else if (rc) {
        snprintf(e->message, sizeof e->message, "%s", je.msg);
        e->status = 400;
        e->code = "invalid_json";
    } else if (kind == DOCS_UPDATE_MERGE_PATCH) {
        if (json_doc_root(u->dom)->type != JSON_OBJECT)
            rc = fail(e, "a merge patch of a document must be a JSON object (RFC 7396: anything else replaces it)");
    } else if (kind == DOCS_UPDATE_OPERATORS) {
        rc = parse_operators(u, e);
    }
    if (rc) { docs_update_free(u); return rc; }
    *out = u;
    return HANU_OK;
}

/* ---- applying ---- */

typedef struct apply_ctx {
    const docs_update *u;
    uint64_t now_ms;
    docs_error *e;
} apply_ctx;

static int type_error(apply_ctx *c, const uitem *it, const unode *v, const char *want)
{
    const char *t = json_type_name(v->type);
    return fail(c->e, "%s of \"%s\": the value is %s %s, not %s", it->name, it->path,
                (t[0] == 'a' || t[0] == 'o') ? "an" : "a", t, want);
}

static int num_op(apply_ctx *c, const uitem *it, unode *cur, unode **res)
{
    const json_value *a = it->arg;
    int ai = a->is_int;
    int64_t x = ai ? a->u.num.i : 0;
    double ad = a->u.num.d;
    int is_inc = it->op == U_INC;
    if (!cur) {   /* missing: $inc sets the operand, $mul a zero of its kind */
        *res = is_inc ? (ai ? un_number(1, x, 0) : un_number(0, 0, ad)) : (ai ? un_number(1, 0, 0) : un_number(0, 0, 0.0));
        return *res ? HANU_OK : nomem(c->e);
    }
    if (cur->type != JSON_NUMBER) return type_error(c, it, cur, "a number");
    int64_t r;
    if (ai && cur->is_int && !(is_inc ? __builtin_add_overflow(cur->i, x, &r) : __builtin_mul_overflow(cur->i, x, &r))) {
        *res = un_number(1, r, 0);
    } else {
        double d = is_inc ? cur->d + ad : cur->d * ad;
        if (!isfinite(d)) return fail(c->e, "%s of \"%s\": the result is out of range", it->name, it->path);
        *res = un_number(0, 0, d);
    }
    return *res ? HANU_OK : nomem(c->e);
}

/* query_value_compare of a tree value and an operand; *err on failure. */
static int compare_with(const unode *cur, const json_value *a, int *cmp)
{
    json_doc *d;
    const json_value *v = un_value(cur, &d);
    if (!v) { json_doc_free(d); return HANU_ERR_NOMEM; }
    *cmp = query_value_compare(v, a);
    json_doc_free(d);
    return HANU_OK;
}

/* Tree values from operand values: each element of arr (or the one value). */
static unode *operand_tree(apply_ctx *c, const json_value *v)
{
    return un_from(c->u->text, v);
}

static int date_node(apply_ctx *c, const uitem *it, unode **res)
{
    if (it->timestamp) { *res = un_number(1, (int64_t)c->now_ms, 0); return *res ? HANU_OK : nomem(c->e); }
    time_t s = (time_t)(c->now_ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char buf[40];
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(buf + n, sizeof buf - n, ".%03uZ", (unsigned)(c->now_ms % 1000));
    *res = un_string(buf, n);
    return *res ? HANU_OK : nomem(c->e);
}

/* Whether element x matches $pull's condition or equals its value. */
static int pull_matches(apply_ctx *c, const uitem *it, const unode *x, int *match)
{
    json_doc *d = NULL;
    const json_value *v;
    *match = 0;
    if (!it->cond) {
        v = un_value(x, &d);
        if (!v) { json_doc_free(d); return nomem(c->e); }
        *match = query_value_equal(v, it->arg);
    } else if (it->wrap) {
        unode wrapper = { .type = JSON_OBJECT };
        unode tmp = *x;
        tmp.key = "v";
        tmp.key_len = 1;
        unode *kids[1] = { &tmp };
        wrapper.kids = kids;
        wrapper.n = 1;
        v = un_value(&wrapper, &d);
        if (!v) { json_doc_free(d); return nomem(c->e); }
        *match = filter_match_value(it->cond, v) == 1;
    } else if (x->type == JSON_OBJECT) {
        v = un_value(x, &d);
        if (!v) { json_doc_free(d); return nomem(c->e); }
        *match = filter_match_value(it->cond, v) == 1;
    }
    json_doc_free(d);
    return HANU_OK;
}

static int array_op(apply_ctx *c, const uitem *it, unode *parent, size_t idx, int found)
{
    unode *arr = found ? parent->kids[idx] : NULL;
    if (arr && arr->type != JSON_ARRAY) return type_error(c, it, arr, "an array");
    if (it->op == U_POP || it->op == U_PULL) {
        if (!arr) return HANU_OK;   /* nothing to remove */
        if (it->op == U_POP) {
            if (arr->n) un_remove(arr, it->arg->u.num.i == 1 ? arr->n - 1 : 0);
            return HANU_OK;
        }
        for (size_t i = 0; i < arr->n;) {
            int m;
            if (pull_matches(c, it, arr->kids[i], &m)) return HANU_ERR_NOMEM;
            if (m) un_remove(arr, i);
            else i++;
        }
        return HANU_OK;
    }
    int created = 0;
    if (!arr) {
        if (!(arr = un_new(JSON_ARRAY))) return nomem(c->e);
        created = 1;
    }
    const json_value *each = it->each;
    size_t nvals = each ? json_len(each) : 1;
    int rc = HANU_OK;
    if (it->op == U_PUSH) {
        size_t at = arr->n;
        if (it->has_position) {
            int64_t p = it->position;
            if (p < 0) p = (int64_t)arr->n + p < 0 ? 0 : (int64_t)arr->n + p;
            at = (size_t)p > arr->n ? arr->n : (size_t)p;
        }
        for (size_t i = 0; !rc && i < nvals; i++) {
            unode *x = operand_tree(c, each ? json_at(each, i) : it->arg);
            if (!x || un_insert(arr, at + i, x)) { un_free(x); rc = nomem(c->e); }
        }
        if (!rc && it->has_slice) {
            /* $slice: n keeps the first n, -n the last n, 0 none. */
            int64_t s = it->slice;
            uint64_t keep = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;   /* no overflow at INT64_MIN */
            if (keep < arr->n) {
                if (s >= 0) while (arr->n > keep) un_remove(arr, arr->n - 1);
                else while (arr->n > keep) un_remove(arr, 0);
            }
        }
    } else {   /* $addToSet: each value not already there (nor added before it) */
        json_doc *d = NULL;
        const json_value *have = un_value(arr, &d);
        if (!have) rc = nomem(c->e);
        for (size_t i = 0; !rc && i < nvals; i++) {
            const json_value *v = each ? json_at(each, i) : it->arg;
            int dup = 0;
            for (size_t k = 0; !dup && k < json_len(have); k++) dup = query_value_equal(json_at(have, k), v);
            for (size_t k = 0; !dup && k < i; k++) dup = query_value_equal(json_at(each, k), v);
            if (dup) continue;
            unode *x = operand_tree(c, v);
            if (!x || un_append(arr, x)) { un_free(x); rc = nomem(c->e); }
        }
        json_doc_free(d);
    }
    if (rc) { if (created) un_free(arr); return rc; }
    return created ? put_at(parent, idx, 0, &it->pp, arr, c->e) : HANU_OK;
}

static int apply_item(apply_ctx *c, unode *root, const uitem *it)
{
    unode *parent;
    size_t idx;
    docs_error *e = c->e;
    if (it->op == U_UNSET || it->op == U_RENAME || it->op == U_POP || it->op == U_PULL) {
        /* Nothing to create: a missing field (or a scalar on the way) is no change. */
        int found = walk(root, it->name, it->path, it->path_len, &it->pp, 0, &parent, &idx, e);
        if (!found) return HANU_OK;
        if (it->op == U_POP || it->op == U_PULL) return array_op(c, it, parent, idx, 1);
        if (it->op == U_UNSET) {
            if (parent->type == JSON_ARRAY) {   /* an element becomes null, as in MongoDB */
                unode *nul = un_new(JSON_NULL);
                return nul ? un_replace(parent, idx, nul) : nomem(e);
            }
            un_remove(parent, idx);
            return HANU_OK;
        }
        /* $rename: take the value out, then $set it at the new path. */
        unode *way = root;
        for (size_t k = 0; k + 1 < it->pp.n && way->type == JSON_OBJECT; k++)
            way = way->kids[un_find(way, it->pp.p[k], it->pp.l[k])];   /* found above: every part is there */
        if (way->type == JSON_ARRAY)
            return fail(e, "$rename of \"%s\": the field is inside an array (not supported)", it->path);
        unode *v = parent->kids[idx];
        unode *tp;
        size_t tidx;
        /* The target's way must hold objects only: no array on the way. */
        unode *cur = root;
        for (size_t k = 0; k + 1 < it->to_pp.n && cur; k++) {
            if (cur->type == JSON_ARRAY)
                return fail(e, "$rename of \"%s\" to \"%.*s\": the new path goes through an array (not supported)",
                            it->path, (int)it->to_len, it->to);
            if (cur->type != JSON_OBJECT) break;
            ssize_t f = un_find(cur, it->to_pp.p[k], it->to_pp.l[k]);
            cur = f >= 0 ? cur->kids[f] : NULL;
        }
        if (cur && cur->type == JSON_ARRAY)
            return fail(e, "$rename of \"%s\" to \"%.*s\": the new path goes through an array (not supported)",
                        it->path, (int)it->to_len, it->to);
        parent->kids[idx] = NULL;
        memmove(parent->kids + idx, parent->kids + idx + 1, (parent->n - idx - 1) * sizeof *parent->kids);
        parent->n--;
        int f2 = walk(root, "$rename", it->to, it->to_len, &it->to_pp, 1, &tp, &tidx, e);
        if (f2 < 0) { un_free(v); return f2; }
        return put_at(tp, tidx, f2, &it->to_pp, v, e);
    }
    int found = walk(root, it->name, it->path, it->path_len, &it->pp, 1, &parent, &idx, e);
    if (found < 0) return found;
    unode *cur = found ? parent->kids[idx] : NULL, *res = NULL;
    int rc = HANU_OK;
    switch (it->op) {
    case U_SET: res = operand_tree(c, it->arg); if (!res) rc = nomem(e); break;
    case U_INC: case U_MUL: rc = num_op(c, it, cur, &res); break;
    case U_MIN: case U_MAX: {
        int cmp = 0;
        if (cur && compare_with(cur, it->arg, &cmp)) return nomem(e);
        if (cur && (it->op == U_MIN ? cmp <= 0 : cmp >= 0)) return HANU_OK;
        res = operand_tree(c, it->arg);
        if (!res) rc = nomem(e);
        break;
    }
    case U_CURRENT_DATE: rc = date_node(c, it, &res); break;
    case U_PUSH: case U_ADD_TO_SET: return array_op(c, it, parent, idx, found);
    default: break;
    }
    if (rc) return rc;
    return put_at(parent, idx, found, &it->pp, res, e);
}

/* RFC 7396 section 2: MergePatch(target, patch) on trees; takes patch's values. */
static int merge(apply_ctx *c, unode **target, const json_value *patch)
{
    if (patch->type != JSON_OBJECT) {
        unode *nu = operand_tree(c, patch);
        if (!nu) return HANU_ERR_NOMEM;
        if (*target) {
            if ((*target)->key && un_set_key(nu, (*target)->key, (*target)->key_len)) { un_free(nu); return HANU_ERR_NOMEM; }
            un_free(*target);
        }
        *target = nu;
        return HANU_OK;
    }
    if (!*target || (*target)->type != JSON_OBJECT) {
        unode *obj = un_new(JSON_OBJECT);
        if (!obj) return HANU_ERR_NOMEM;
        if (*target) {
            if ((*target)->key && un_set_key(obj, (*target)->key, (*target)->key_len)) { un_free(obj); return HANU_ERR_NOMEM; }
            un_free(*target);
        }
        *target = obj;
    }
    unode *t = *target;
    for (size_t i = 0; i < json_len(patch); i++) {
        const json_value *m = json_at(patch, i);
        ssize_t f = un_find(t, m->key, m->key_len);
        if (m->type == JSON_NULL) {
            if (f >= 0) un_remove(t, (size_t)f);
            continue;
        }
        if (f >= 0) {
            if (merge(c, &t->kids[f], m)) return HANU_ERR_NOMEM;
        } else {
            unode *kid = NULL;
            if (merge(c, &kid, m)) return HANU_ERR_NOMEM;
            if (un_set_key(kid, m->key, m->key_len) || un_append(t, kid)) { un_free(kid); return HANU_ERR_NOMEM; }
        }
    }
    return HANU_OK;
}

static int write_tree(const unode *u, hanu_buf *out)
{
    json_writer w;
    json_writer_init(&w, out);
    un_write(&w, u);
    return json_writer_status(&w);
}

int docs_merge_patch(const char *target, size_t tlen, const char *patch, size_t plen, hanu_buf *out)
{
    json_doc *td = NULL;
    docs_update *u = NULL;
    docs_error e;
    unode *t = NULL;
    hanu_buf_reset(out);
    int rc = tlen ? json_doc_parse(target, tlen, NULL, &td, NULL) : HANU_OK;
    if (!rc) {
        rc = docs_update_parse(patch, plen, 0, &u, &e);   /* kind 0: parsed only */
        if (rc == HANU_OK) {
            if (td && !(t = un_from(target, json_doc_root(td)))) rc = HANU_ERR_NOMEM;
            apply_ctx c = { .u = u, .e = &e };
            if (!rc) rc = merge(&c, &t, json_doc_root(u->dom));
            if (!rc) rc = write_tree(t, out);
        }
    }
    un_free(t);
    docs_update_free(u);
    json_doc_free(td);
    return rc;
}

/* The document's "_id" member, or NULL. */
static const unode *id_of(const unode *doc)
{
    ssize_t f = doc->type == JSON_OBJECT ? un_find(doc, "_id", 3) : -1;
    return f >= 0 ? doc->kids[f] : NULL;
}

int docs_update_apply(const docs_update *u, const char *doc, size_t len, uint64_t now_ms, hanu_buf *out, int *changed,
                      docs_error *e)
{
    json_doc *d = NULL;
    unode *root = NULL;
    hanu_buf before = {0};
    hanu_buf_reset(out);
    *changed = 0;
    int rc = json_doc_parse(doc, len, NULL, &d, NULL);
    if (rc) {
        fail(e, "the stored document is not valid JSON");
        if (rc == HANU_ERR_NOMEM) nomem(e);
        return rc;
    }
    if (!(root = un_from(doc, json_doc_root(d)))) { json_doc_free(d); return nomem(e); }
    json_doc_free(d);
    if (root->type != JSON_OBJECT) { un_free(root); return fail(e, "the stored document is not an object"); }
    rc = write_tree(root, &before);
    char id[DOCS_ID_MAX + 1];
    size_t id_len = 0;
    const unode *idn = id_of(root);
    int had_id = idn && idn->type == JSON_STRING && idn->slen <= DOCS_ID_MAX;
    if (had_id) { memcpy(id, idn->s, idn->slen); id_len = idn->slen; }
    apply_ctx c = { .u = u, .now_ms = now_ms, .e = e };
    if (rc == HANU_OK && u->kind == DOCS_UPDATE_MERGE_PATCH) {
        rc = merge(&c, &root, json_doc_root(u->dom));
        if (rc == HANU_ERR_NOMEM) nomem(e);
    }
    for (size_t i = 0; rc == HANU_OK && u->kind == DOCS_UPDATE_OPERATORS && i < u->n; i++)
        rc = apply_item(&c, root, &u->items[i]);
    if (rc == HANU_OK) {
        idn = id_of(root);
        if (had_id && (!idn || idn->type != JSON_STRING || idn->slen != id_len || memcmp(idn->s, id, id_len)))
            rc = fail(e, "\"_id\" cannot be changed or removed (it is \"%.*s\")", (int)HANU_MIN(id_len, 100), id);
    }
    if (rc == HANU_OK && (rc = write_tree(root, out)) != HANU_OK) nomem(e);
    if (rc == HANU_OK) {
        json_error je;
        if (json_validate((const char *)out->data, out->len, NULL, &je) != HANU_OK)
            rc = fail(e, "the updated document would nest deeper than %d levels", JSON_DEFAULT_MAX_DEPTH);
    }
    if (rc == HANU_OK) *changed = before.len != out->len || memcmp(before.data, out->data, out->len);
    hanu_buf_free(&before);
    un_free(root);
    if (rc) hanu_buf_reset(out);
    return rc;
}
