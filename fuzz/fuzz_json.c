/*
 * fuzz_json.c: libFuzzer target for src/json. For every input it checks that
 * the scanner, the validator and the DOM agree (same status, same error
 * offset, same leaves in the same order with the same values), that the DOM
 * re-written with the writer parses back to an equal tree (doubles bit for
 * bit), and that the _id helpers agree with the DOM. Any disagreement traps.
 */
#include "json/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(what) do { fprintf(stderr, "fuzz_json: %s (line %d)\n", what, __LINE__); \
    __builtin_trap(); } while (0)

typedef struct leafrec {
    json_type type;
    size_t start, end, path_len;
    int is_int, boolean;
    int64_t i64;
    double num;
    const char *str;    /* into the leaf text buffer */
    size_t str_len;
} leafrec;

typedef struct leafvec {
    leafrec *v;
    size_t n, cap;
    hanu_buf text;
} leafvec;

static int record(void *ctx, const json_leaf *l)
{
    leafvec *lv = ctx;
    if (lv->n == lv->cap) {
        lv->cap = lv->cap ? lv->cap * 2 : 64;
        lv->v = realloc(lv->v, lv->cap * sizeof *lv->v);
        if (!lv->v) FAIL("oom");
    }
    leafrec *r = &lv->v[lv->n++];
    r->type = l->type;
    r->start = l->start;
    r->end = l->end;
    r->path_len = l->path_len;
    r->is_int = l->is_int;
    r->boolean = l->boolean;
    r->i64 = l->i64;
    r->num = l->num;
    r->str_len = l->str_len;
    r->str = (const char *)(uintptr_t)lv->text.len;    /* offset, fixed up later */
    if (hanu_buf_append(&lv->text, l->str, l->str_len)) FAIL("oom");
    if (strlen(l->path) != l->path_len && !memchr(l->path, 0, l->path_len)) FAIL("path not terminated");
    return 0;
}

/* Walks the DOM in document order against the scanner's leaves. */
static void check_leaves(const json_value *v, const leafvec *lv, size_t *k)
{
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->u.kids.n; i++) check_leaves(&v->u.kids.items[i], lv, k);
        return;
    }
    if (*k >= lv->n) FAIL("DOM has more leaves than the scanner");
    const leafrec *r = &lv->v[(*k)++];
    if (r->type != v->type || r->start != v->start || r->end != v->end) FAIL("leaf type/span differs");
    switch (v->type) {
    case JSON_STRING:
        if (r->str_len != v->u.str.len ||
            (r->str_len && memcmp(lv->text.data + (uintptr_t)r->str, v->u.str.ptr, r->str_len) != 0))
            FAIL("string differs");
        if (v->u.str.ptr[v->u.str.len] != 0) FAIL("DOM string not terminated");
        break;
    case JSON_NUMBER:
        if (r->is_int != v->is_int || (r->is_int && r->i64 != v->u.num.i) ||
            memcmp(&r->num, &v->u.num.d, sizeof(double)) != 0)
            FAIL("number differs");
        break;
    case JSON_BOOL:
        if (r->boolean != v->u.boolean) FAIL("bool differs");
        break;
    default:
        break;
    }
}

static void write_value(json_writer *w, const json_value *v)
{
    switch (v->type) {
    case JSON_OBJECT:
        json_write_object_begin(w);
        for (size_t i = 0; i < v->u.kids.n; i++) {
            const json_value *m = &v->u.kids.items[i];
            json_write_key(w, m->key, m->key_len);
            write_value(w, m);
        }
        json_write_object_end(w);
        break;
    case JSON_ARRAY:
        json_write_array_begin(w);
        for (size_t i = 0; i < v->u.kids.n; i++) write_value(w, &v->u.kids.items[i]);
        json_write_array_end(w);
        break;
    case JSON_STRING: json_write_string(w, v->u.str.ptr, v->u.str.len); break;
    case JSON_NUMBER:
        if (v->is_int) json_write_int64(w, v->u.num.i);
        else json_write_double(w, v->u.num.d);
        break;
    case JSON_BOOL: json_write_bool(w, v->u.boolean); break;
    case JSON_NULL: json_write_null(w); break;
    }
}

static void check_equal(const json_value *a, const json_value *b)
{
    if (a->type != b->type) FAIL("re-parsed type differs");
    if ((a->key == NULL) != (b->key == NULL)) FAIL("re-parsed key presence differs");
    if (a->key && (a->key_len != b->key_len || memcmp(a->key, b->key, a->key_len) != 0))
        FAIL("re-parsed key differs");
    switch (a->type) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        if (a->u.kids.n != b->u.kids.n) FAIL("re-parsed length differs");
        for (size_t i = 0; i < a->u.kids.n; i++) check_equal(&a->u.kids.items[i], &b->u.kids.items[i]);
        break;
    case JSON_STRING:
        if (a->u.str.len != b->u.str.len || memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) != 0)
            FAIL("re-parsed string differs");
        break;
    case JSON_NUMBER:
        if (a->is_int != b->is_int) FAIL("re-parsed int-ness differs");
        if (a->is_int ? a->u.num.i != b->u.num.i
                      : memcmp(&a->u.num.d, &b->u.num.d, sizeof(double)) != 0)
            FAIL("re-parsed number differs");
        break;
    case JSON_BOOL:
        if (a->u.boolean != b->u.boolean) FAIL("re-parsed bool differs");
        break;
    case JSON_NULL:
        break;
    }
}

/* json_member_find against the DOM, for the member the documents layer looks up. */
static void check_member(const char *in, size_t len, const json_value *root)
{
    char str[64];
    json_member m;
    int rc = json_member_find(in, len, "_id", 3, &m, str, sizeof str);
    if (root->type != JSON_OBJECT) { if (rc != HANU_ERR_INVALID) FAIL("member of a non-object"); return; }
    if (rc) FAIL("member lookup failed on a valid object");
    const json_value *want = json_get(root, "_id");
    if (!want != !m.found) FAIL("member found or absent wrongly");
    if (in[m.brace] != '{' || m.empty != (json_len(root) == 0)) FAIL("member brace or empty");
    if (!want) return;
    if (m.type != want->type) FAIL("member type differs");
    if (want->type == JSON_STRING && (m.str_len != want->u.str.len ||
                                      (m.str_len <= sizeof str && memcmp(str, want->u.str.ptr, m.str_len))))
        FAIL("member string differs");
    if (want->type != JSON_ARRAY && want->type != JSON_OBJECT && (m.start != want->start || m.end != want->end))
        FAIL("member span differs");
}

static void run(const char *in, size_t len, const json_opts *o)
{
    size_t cap = json_scan_scratch_size(len);
    void *scratch = malloc(cap);
    leafvec lv = { 0 };
    json_error e1, e2, e3;
    int r1 = json_scan(in, len, o, scratch, cap, record, &lv, &e1);
    int r2 = json_validate(in, len, o, &e2);
    json_doc *doc = NULL;
    int r3 = json_doc_parse(in, len, o, &doc, &e3);
    if (r1 != r2 || r1 != r3) FAIL("scan, validate and DOM disagree");
    if (r1 && (e1.offset != e2.offset || e1.offset != e3.offset || e1.offset > len ||
               !e1.msg[0] || strcmp(e1.msg, e3.msg) != 0))
        FAIL("error offsets or messages disagree");
    if (r1 == 0) {
        const json_value *root = json_doc_root(doc);
        size_t k = 0;
        check_leaves(root, &lv, &k);
        if (k != lv.n) FAIL("scanner has more leaves than the DOM");
        if (root->start > root->end || root->end > len) FAIL("root span");
        hanu_buf out = { 0 };
        json_writer w;
        json_writer_init(&w, &out);
        write_value(&w, root);
        if (json_writer_status(&w)) FAIL("writer failed on a parsed document");
        json_doc *again = NULL;
        json_error e4;
        if (json_doc_parse((char *)out.data, out.len, o, &again, &e4)) {
            fprintf(stderr, "re-parse: %s\n", e4.msg);
            FAIL("writer output does not parse");
        }
        check_equal(root, json_doc_root(again));
        json_doc_free(again);
        hanu_buf_free(&out);
        if (!o) check_member(in, len, root);
    }
    json_doc_free(doc);
    hanu_buf_free(&lv.text);
    free(lv.v);
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run((const char *)data, size, NULL);
    json_opts o = { .max_depth = 3, .allow_duplicate_keys = 1 };
    run((const char *)data, size, &o);
    return 0;
}
