/*
 * filter_parse.c: a MongoDB filter object into the flat AST of query.h.
 * The filter keeps its own copy of the input and a DOM over it; nodes point
 * at keys and operand values in that DOM, so nothing is copied twice. The
 * kids of a logical node are contiguous: the parser reserves their slots
 * first, then fills each one (nodes are addressed by index because the node
 * array grows).
 */
#include "query/query_internal.h"

#include <stdlib.h>

struct filter {
    char *text;
    json_doc *dom;
    filter_node *nodes;
    size_t n, cap;
};

typedef struct parser {
    filter *f;
    json_path_buf jp;
    query_error *err;
    int depth;
} parser;

static const struct { const char *name; filter_op op; } field_ops[] = {
    { "$eq", FILTER_EQ }, { "$ne", FILTER_NE }, { "$gt", FILTER_GT }, { "$gte", FILTER_GTE },
    { "$lt", FILTER_LT }, { "$lte", FILTER_LTE }, { "$in", FILTER_IN }, { "$nin", FILTER_NIN },
    { "$exists", FILTER_EXISTS }, { "$not", FILTER_NOT },
};

static const char *a_type(const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    default: return "an object";
    }
}

static int fail(parser *p, int status, const char *fmt, const char *arg)
{
    return query_fail(p->err, status, p->jp.s, fmt, arg);
}

/* Reserves count contiguous nodes; *first gets the index of the first. */
static int reserve_nodes(parser *p, size_t count, uint32_t *first)
{
    filter *f = p->f;
    if (f->n + count > FILTER_MAX_NODES)
        return query_fail(p->err, HANU_ERR_TOO_LARGE, p->jp.s, "more than %d clauses in the filter",
                          FILTER_MAX_NODES);
    if (f->n + count > f->cap) {
        size_t cap = HANU_MAX(f->cap * 2, f->n + count);
        cap = HANU_MAX(cap, (size_t)16);
        filter_node *nn = realloc(f->nodes, cap * sizeof *nn);
        if (!nn) return HANU_ERR_NOMEM;
        f->nodes = nn;
        f->cap = cap;
    }
    memset(f->nodes + f->n, 0, count * sizeof *f->nodes);
    *first = (uint32_t)f->n;
    f->n += count;
    return 0;
}

static int descend(parser *p)
{
    if (++p->depth > FILTER_MAX_DEPTH)
        return query_fail(p->err, HANU_ERR_TOO_LARGE, p->jp.s, "filter nested deeper than %d levels",
                          FILTER_MAX_DEPTH);
    return 0;
}

/* Makes nodes[slot] a logical node over count new kids; *first gets the first kid. */
static int open_logical(parser *p, uint32_t slot, filter_op op, size_t count, uint32_t *first)
{
    int rc = reserve_nodes(p, count, first);
    if (rc) return rc;
    p->f->nodes[slot].op = op;
    p->f->nodes[slot].first = *first;
    p->f->nodes[slot].count = (uint32_t)count;
    return 0;
}

static int is_operator_object(const json_value *v)
{
    if (v->type != JSON_OBJECT) return 0;
    for (size_t i = 0; i < v->u.kids.n; i++)
        if (v->u.kids.items[i].key[0] == '$') return 1;
    return 0;
}

static int parse_object(parser *p, const json_value *obj, uint32_t slot);
static int parse_operators(parser *p, const char *path, size_t path_len, const json_value *ops, uint32_t slot);

/* Parses one member of an object (a clause, or an operator on path) into slot. */
typedef int (*member_fn)(parser *p, const char *path, size_t path_len, const json_value *m, uint32_t slot);

/* An object whose members are clauses or operators: one member is its own
 * node, several are an $and of them. */
static int parse_members(parser *p, const json_value *obj, const char *path, size_t path_len, member_fn fn,
                         uint32_t slot)
{
    if (obj->u.kids.n == 1) return fn(p, path, path_len, &obj->u.kids.items[0], slot);
    uint32_t first;
    int rc = open_logical(p, slot, FILTER_AND, obj->u.kids.n, &first);
    for (size_t i = 0; i < obj->u.kids.n && rc == 0; i++)
        rc = fn(p, path, path_len, &obj->u.kids.items[i], first + (uint32_t)i);
    return rc;
}

/* A logical node at slot whose kids are the members (filter object) or the
 * elements (array of filter objects) of v, each parsed by one_kid. */
static int parse_logical(parser *p, filter_op op, const json_value *v, uint32_t slot)
{
    uint32_t first;
    int rc = open_logical(p, slot, op, v->u.kids.n, &first);
    for (size_t i = 0; i < v->u.kids.n && rc == 0; i++) {
        const json_value *kid = &v->u.kids.items[i];
        size_t mark = json_path_push_index(&p->jp, i);
        if (kid->type != JSON_OBJECT) rc = fail(p, HANU_ERR_INVALID, "must be a filter object, not %s", a_type(kid));
        else rc = parse_object(p, kid, first + (uint32_t)i);
        json_path_restore(&p->jp, mark);
    }
    return rc;
}

static int parse_top_operator(parser *p, const json_value *m, uint32_t slot)
{
    filter_op op = strcmp(m->key, "$and") == 0 ? FILTER_AND : strcmp(m->key, "$or") == 0 ? FILTER_OR
                 : strcmp(m->key, "$nor") == 0 ? FILTER_NOR : strcmp(m->key, "$not") == 0 ? FILTER_NOT : 0;
    if (!op) return fail(p, HANU_ERR_INVALID, "unknown operator %s", m->key);
    size_t mark = json_path_push_key(&p->jp, m->key, m->key_len);
    int rc = descend(p);
    if (rc == 0 && op == FILTER_NOT) {
        /* An extension of MongoDB (which has $not only on fields): {"$not":{filter}}. */
        if (m->type != JSON_OBJECT) rc = fail(p, HANU_ERR_INVALID, "needs a filter object, not %s", a_type(m));
        else {
            uint32_t kid;
            rc = open_logical(p, slot, FILTER_NOT, 1, &kid);
            if (rc == 0) rc = parse_object(p, m, kid);
        }
    } else if (rc == 0) {
        if (m->type != JSON_ARRAY || m->u.kids.n == 0)
            rc = fail(p, HANU_ERR_INVALID, "needs a non-empty array of filter objects%s", "");
        else rc = parse_logical(p, op, m, slot);
    }
    p->depth--;
    json_path_restore(&p->jp, mark);
    return rc;
}

static int parse_member(parser *p, const char *unused_path, size_t unused_len, const json_value *m, uint32_t slot)
{
    (void)unused_path;
    (void)unused_len;
    if (m->key[0] == '$') return parse_top_operator(p, m, slot);
    size_t mark = json_path_push_key(&p->jp, m->key, m->key_len);
    int rc = query_path_check(m->key, m->key_len, p->jp.s, p->err);
    if (rc == 0) {
        if (is_operator_object(m)) {
            rc = parse_operators(p, m->key, m->key_len, m, slot);
        } else {
            filter_node *n = &p->f->nodes[slot];
            n->op = FILTER_EQ;
            n->path = m->key;
            n->path_len = m->key_len;
            n->operand = m;
        }
    }
    json_path_restore(&p->jp, mark);
    return rc;
}

static int parse_object(parser *p, const json_value *obj, uint32_t slot)
{
    return parse_members(p, obj, NULL, 0, parse_member, slot);
}

static int parse_operator(parser *p, const char *path, size_t path_len, const json_value *m, uint32_t slot)
{
    filter_op op = 0;
    for (size_t i = 0; i < HANU_ARRAY_LEN(field_ops); i++)
        if (strcmp(m->key, field_ops[i].name) == 0) op = field_ops[i].op;
    if (!op) {
        if (m->key[0] != '$')
            return fail(p, HANU_ERR_INVALID, "%s is not an operator (an object with operators holds only operators)", m->key);
        return fail(p, HANU_ERR_INVALID, "unknown operator %s", m->key);
    }
    size_t mark = json_path_push_key(&p->jp, m->key, m->key_len);
    filter_node *n = &p->f->nodes[slot];
    n->op = op;
    n->path = path;
    n->path_len = path_len;
    n->operand = m;
    int rc = 0;
    switch (op) {
    case FILTER_GT: case FILTER_GTE: case FILTER_LT: case FILTER_LTE:
        if (m->type == JSON_ARRAY || m->type == JSON_OBJECT)
            rc = fail(p, HANU_ERR_INVALID, "operand must be a number, string, boolean or null, not %s", a_type(m));
        break;
    case FILTER_IN: case FILTER_NIN:
        if (m->type != JSON_ARRAY) rc = fail(p, HANU_ERR_INVALID, "needs an array, not %s", a_type(m));
        else if (m->u.kids.n > FILTER_MAX_IN_VALUES)
            rc = query_fail(p->err, HANU_ERR_TOO_LARGE, p->jp.s, "more than %d values", FILTER_MAX_IN_VALUES);
        break;
    case FILTER_EXISTS:
        if (m->type != JSON_BOOL) rc = fail(p, HANU_ERR_INVALID, "needs true or false, not %s", a_type(m));
        else n->exists = m->u.boolean;
        n->operand = NULL;
        break;
    case FILTER_NOT:
        n->operand = NULL;
        n->path = NULL;
        n->path_len = 0;
        if (!is_operator_object(m)) {
            rc = fail(p, HANU_ERR_INVALID, "needs an object of operators, not %s",
                      m->type == JSON_OBJECT ? "a filter object" : a_type(m));
        } else if ((rc = descend(p)) == 0) {
            uint32_t kid;
            rc = open_logical(p, slot, FILTER_NOT, 1, &kid);
            if (rc == 0) rc = parse_operators(p, path, path_len, m, kid);
            p->depth--;
        }
        break;
    default:
        break;
    }
    json_path_restore(&p->jp, mark);
    return rc;
}

/* An operator object {"$gt":1,"$lt":5} on path. */
static int parse_operators(parser *p, const char *path, size_t path_len, const json_value *ops, uint32_t slot)
{
    return parse_members(p, ops, path, path_len, parse_operator, slot);
}

int filter_parse(const char *json, size_t len, const char *json_path, filter **out, query_error *err)
{
    *out = NULL;
    filter *f = calloc(1, sizeof *f);
    if (!f) return HANU_ERR_NOMEM;
    f->text = malloc(len ? len : 1);
    if (!f->text) { free(f); return HANU_ERR_NOMEM; }
    memcpy(f->text, json, len);
    json_error jerr;
    int rc = json_doc_parse(f->text, len, NULL, &f->dom, &jerr);
    if (rc) {
        if (rc != HANU_ERR_NOMEM) query_fail(err, HANU_ERR_INVALID, json_path, "%s", jerr.msg);
        filter_free(f);
        return rc == HANU_ERR_NOMEM ? rc : HANU_ERR_INVALID;
    }
    parser p = { .f = f, .err = err, .depth = 0 };
    json_path_init(&p.jp, json_path);
    const json_value *root = json_doc_root(f->dom);
    uint32_t slot;
    if (root->type != JSON_OBJECT) rc = fail(&p, HANU_ERR_INVALID, "must be a filter object, not %s", a_type(root));
    else if ((rc = reserve_nodes(&p, 1, &slot)) == 0) {
        f->nodes[0].op = FILTER_AND;      /* {} matches everything */
        rc = parse_object(&p, root, 0);
    }
    if (rc) { filter_free(f); return rc; }
    *out = f;
    return 0;
}

int filter_parse_value(const char *input, const json_value *v, const char *json_path,
                       filter **out, query_error *err)
{
    return filter_parse(input + v->start, v->end - v->start, json_path, out, err);
}

void filter_free(filter *f)
{
    if (!f) return;
    json_doc_free(f->dom);
    free(f->text);
    free(f->nodes);
    free(f);
}

const filter_node *filter_nodes(const filter *f, size_t *n_nodes)
{
    if (n_nodes) *n_nodes = f->n;
    return f->nodes;
}
