/*
 * filter_match.c: the brute-force evaluator, one document at a time. It is
 * the definition of what a filter means (docs/QUERY.md, "Type rules"): the
 * index must answer exactly as this does, and the tests hold it to that.
 * Every field clause walks its path (query_path_walk) and asks each value it
 * reaches, or "missing", whether it satisfies the clause.
 */
#include "query/query_internal.h"

/* A reached value satisfies $eq v when it equals v, or is an array with an
 * element equal to v (not one picked by position: whole); a missing field
 * satisfies $eq null. */
static int eq_satisfied(const json_value *x, const json_value *want, int whole)
{
    if (!x) return want->type == JSON_NULL;
    if (query_value_equal(x, want)) return 1;
    if (x->type == JSON_ARRAY && !whole)
        for (size_t i = 0; i < x->u.kids.n; i++)
            if (query_value_equal(&x->u.kids.items[i], want)) return 1;
    return 0;
}

static int range_holds(filter_op op, int c)
{
    switch (op) {
    case FILTER_GT: return c > 0;
    case FILTER_GTE: return c >= 0;
    case FILTER_LT: return c < 0;
    default: return c <= 0;
    }
}

/* Ranges compare only within one type: 5 is not $gt "a" and "b" is not $lt 1. */
static int scalar_in_range(const json_value *x, filter_op op, const json_value *bound)
{
    if (x->type != bound->type) return 0;
    return range_holds(op, query_value_compare(x, bound));
}

static int range_satisfied(const json_value *x, filter_op op, const json_value *bound, int whole)
{
    if (bound->type == JSON_NULL)   /* null has one value: $gte/$lte null mean $eq null */
        return (op == FILTER_GTE || op == FILTER_LTE) && eq_satisfied(x, bound, whole);
    if (!x) return 0;
    if (x->type != JSON_ARRAY || whole) return scalar_in_range(x, op, bound);
    for (size_t i = 0; i < x->u.kids.n; i++)
        if (scalar_in_range(&x->u.kids.items[i], op, bound)) return 1;
    return 0;
}

typedef struct clause {
    const filter_node *node;
} clause;

static int visit_eq(void *ctx, const json_value *x, int whole)
{
    return eq_satisfied(x, ((const clause *)ctx)->node->operand, whole);
}

static int visit_range(void *ctx, const json_value *x, int whole)
{
    const filter_node *n = ((const clause *)ctx)->node;
    return range_satisfied(x, n->op, n->operand, whole);
}

static int visit_in(void *ctx, const json_value *x, int whole)
{
    const json_value *list = ((const clause *)ctx)->node->operand;
    for (size_t i = 0; i < list->u.kids.n; i++)
        if (eq_satisfied(x, &list->u.kids.items[i], whole)) return 1;
    return 0;
}

static int visit_exists(void *ctx, const json_value *x, int whole)
{
    (void)ctx;
    (void)whole;
    return x != NULL;
}

static int walk_clause(const filter_node *n, const json_value *root, query_visit_fn fn)
{
    clause c = { .node = n };
    return query_path_walk(root, n->path, n->path_len, fn, &c) != 0;
}

static int node_matches(const filter_node *nodes, const filter_node *n, const json_value *root)
{
    switch (n->op) {
    case FILTER_AND:
        for (uint32_t i = 0; i < n->count; i++)
            if (!node_matches(nodes, &nodes[n->first + i], root)) return 0;
        return 1;
    case FILTER_OR:
    case FILTER_NOR:
        for (uint32_t i = 0; i < n->count; i++)
            if (node_matches(nodes, &nodes[n->first + i], root)) return n->op == FILTER_OR;
        return n->op == FILTER_NOR;
    case FILTER_NOT: return !node_matches(nodes, &nodes[n->first], root);
    case FILTER_EQ: return walk_clause(n, root, visit_eq);
    case FILTER_NE: return !walk_clause(n, root, visit_eq);
    case FILTER_GT: case FILTER_GTE: case FILTER_LT: case FILTER_LTE:
        return walk_clause(n, root, visit_range);
    case FILTER_IN: return walk_clause(n, root, visit_in);
    case FILTER_NIN: return !walk_clause(n, root, visit_in);
    case FILTER_EXISTS: return walk_clause(n, root, visit_exists) == n->exists;
    }
    return 0;
}

int filter_match_value(const filter *f, const json_value *root)
{
    size_t n;
    const filter_node *nodes = filter_nodes(f, &n);
    return node_matches(nodes, &nodes[0], root);
}

int filter_match(const filter *f, const char *doc, size_t len)
{
    json_doc *d;
    if (json_doc_parse(doc, len, NULL, &d, NULL) != 0) return HANU_ERR_INVALID;
    int m = filter_match_value(f, json_doc_root(d));
    json_doc_free(d);
    return m;
}
