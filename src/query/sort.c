/*
 * sort.c: sort specs ({"ts":-1} or [{"ts":-1},{"user":1}]) and the order of
 * documents under one. Sort keys are scalars: a path that meets an array or
 * ends on an object is refused per document, because "which element sorts"
 * has no single answer and the index keeps one column value per document.
 */
#include "query/query_internal.h"

#include <stdio.h>

static int add_key(const json_value *m, json_path_buf *jp, sort_spec *out, query_error *err)
{
    size_t mark = json_path_push_key(jp, m->key, m->key_len);
    int rc = query_path_check(m->key, m->key_len, jp->s, err);
    int64_t dir = 0;
    if (rc == 0 && (json_as_int64(m, &dir) != 0 || (dir != 1 && dir != -1)))
        rc = query_fail(err, HANU_ERR_INVALID, jp->s, "must be 1 (ascending) or -1 (descending)");
    for (size_t i = 0; rc == 0 && i < out->n; i++)
        if (strcmp(out->keys[i].path, m->key) == 0)
            rc = query_fail(err, HANU_ERR_INVALID, jp->s, "the same field twice in one sort");
    if (rc == 0 && out->n == SORT_MAX_KEYS)
        rc = query_fail(err, HANU_ERR_TOO_LARGE, jp->s, "more than %d sort keys", SORT_MAX_KEYS);
    if (rc == 0) {
        memcpy(out->keys[out->n].path, m->key, m->key_len + 1);
        out->keys[out->n].descending = dir < 0;
        out->n++;
    }
    json_path_restore(jp, mark);
    return rc;
}

int sort_parse(const json_value *v, const char *json_path, sort_spec *out, query_error *err)
{
    memset(out, 0, sizeof *out);
    json_path_buf jp;
    json_path_init(&jp, json_path);
    int rc = 0;
    if (v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->u.kids.n && rc == 0; i++) rc = add_key(&v->u.kids.items[i], &jp, out, err);
    } else if (v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->u.kids.n && rc == 0; i++) {
            const json_value *e = &v->u.kids.items[i];
            size_t mark = json_path_push_index(&jp, i);
            if (e->type != JSON_OBJECT || e->u.kids.n != 1)
                rc = query_fail(err, HANU_ERR_INVALID, jp.s, "must be an object with one field, as {\"ts\":-1}");
            else rc = add_key(&e->u.kids.items[0], &jp, out, err);
            json_path_restore(&jp, mark);
        }
    } else {
        return query_fail(err, HANU_ERR_INVALID, json_path, "must be an object or an array of objects");
    }
    if (rc == 0 && out->n == 0) rc = query_fail(err, HANU_ERR_INVALID, json_path, "needs at least one field");
    return rc;
}

/* The value at path through objects only (member names may hold dots, as
 * in query_path_walk); *blocked is set when an array is in the way. */
static const json_value *scalar_at(const json_value *v, const char *path, size_t len, int *blocked)
{
    if (v->type == JSON_ARRAY) { *blocked = 1; return NULL; }
    if (v->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->u.kids.n; i++) {
        const json_value *m = &v->u.kids.items[i];
        size_t k = m->key_len;
        if (k > len || memcmp(m->key, path, k) != 0) continue;
        if (k == len) return m;
        if (path[k] != '.') continue;
        const json_value *found = scalar_at(m, path + k + 1, len - k - 1, blocked);
        if (found || *blocked) return found;
    }
    return NULL;
}

int sort_keys_of(const sort_spec *spec, const json_value *root, const json_value **keys, query_error *err)
{
    for (size_t i = 0; i < spec->n; i++) {
        int blocked = 0;
        const char *path = spec->keys[i].path;
        const json_value *v = scalar_at(root, path, strlen(path), &blocked);
        if (blocked || (v && (v->type == JSON_ARRAY || v->type == JSON_OBJECT))) {
            const json_value *id = json_get(root, "_id");
            char where[96] = "";
            if (id && id->type == JSON_STRING) {
                size_t n = query_utf8_prefix(id->u.str.ptr, id->u.str.len, 64);
                snprintf(where, sizeof where, " (document \"%.*s\")", (int)n, id->u.str.ptr);
            }
            char jp[QUERY_MAX_PATH_BYTES + 8];
            snprintf(jp, sizeof jp, "sort.%s", path);
            return query_fail(err, HANU_ERR_INVALID, jp, "cannot sort on %s path%s",
                              v && v->type == JSON_OBJECT ? "an object" : "an array", where);
        }
        keys[i] = v && v->type == JSON_NULL ? NULL : v;
    }
    return 0;
}

int sort_compare(const sort_spec *spec, const json_value *const *keys_a, const char *id_a, size_t id_a_len,
                 const json_value *const *keys_b, const char *id_b, size_t id_b_len)
{
    for (size_t i = 0; i < spec->n; i++) {
        int c = query_value_compare(keys_a[i], keys_b[i]);
        if (c) return spec->keys[i].descending ? -c : c;
    }
    int c = memcmp(id_a, id_b, HANU_MIN(id_a_len, id_b_len));
    if (c) return c < 0 ? -1 : 1;
    return (id_a_len > id_b_len) - (id_a_len < id_b_len);
}
