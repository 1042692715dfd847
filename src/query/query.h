/*
 * query: the query language's pure parts, the whole contract in one header.
 * Nothing here touches files, the store or the index; the index answers the
 * same questions faster, and these functions are its oracle in tests and its
 * fallback scan. The language, the type rules and every limit are written
 * down in docs/QUERY.md.
 *
 *   - filters (MongoDB's language): filter_parse into a compact AST,
 *     filter_match against one stored document;
 *   - sort specs: sort_parse, per-document sort keys, a total order;
 *   - search queries (`q`): search_query_parse (words, +must, -not,
 *     "phrases") on the text tokenizer (text/text.h), and bm25_score;
 *   - aggregations: aggs_parse (terms, stats, histogram, each with an
 *     optional filter) and aggs_eval over a set of documents.
 *
 * Errors: every parser returns 0, HANU_ERR_INVALID (a bad query: the edge
 * answers 400 code invalid_query with err->msg), HANU_ERR_TOO_LARGE (a limit
 * below was passed: also invalid_query) or HANU_ERR_NOMEM. The message names
 * the problem and its JSON path in the request body, e.g.
 * "filter.$and[1].age: unknown operator $foo".
 *
 * Ownership: every parsed object owns its memory (it copies what it keeps
 * from the input) and is freed with its *_free (NULL is fine). Parsed objects
 * are read-only and may be shared by threads.
 */
#ifndef HANU_QUERY_H
#define HANU_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "json/json.h"

#define QUERY_ERROR_MSG_MAX 256

typedef struct query_error {
    char msg[QUERY_ERROR_MSG_MAX];      /* NUL-terminated, valid UTF-8 */
} query_error;

/* ------------------------------------------------------------------ limits */

#define FILTER_MAX_DEPTH 16         /* nested $and/$or/$nor/$not levels */
#define FILTER_MAX_NODES 512        /* clauses (AST nodes) in one filter */
#define FILTER_MAX_IN_VALUES 1024   /* values in one $in or $nin */
#define QUERY_MAX_PATH_BYTES 256    /* a dotted field path */
#define SORT_MAX_KEYS 8
#define SEARCH_MAX_QUERY_BYTES 4096
#define SEARCH_MAX_CLAUSES 64       /* words and phrases in one q */
#define SEARCH_MAX_PHRASE_TOKENS 16
#define AGGS_MAX 16                 /* aggregations in one request */
#define AGGS_MAX_TERMS_SIZE 1000    /* terms "size" */
#define AGGS_DEFAULT_TERMS_SIZE 10
#define AGGS_MAX_HISTOGRAM_BUCKETS 10000
#define TERMS_MAX_STRING_CHARS 64   /* longer strings are not terms (ignore_above) */

/* ---------------------------------------------------------------- values */

/* The total order across JSON values used by sort and by the range
 * operators within one type: missing (NULL) = null < numbers < strings <
 * objects < arrays < booleans (MongoDB's order). Numbers compare by value
 * (exactly, also int64 against double); strings by bytes (code point order);
 * false < true; arrays and objects element by element, then by length
 * (objects compare keys, then values). Returns <0, 0 or >0. */
int query_value_compare(const json_value *a, const json_value *b);

/* Equality as $eq means it: same type and query_value_compare == 0 (1 and 1.0
 * are equal; "1" and 1 are not; objects equal with the same members in the
 * same order). */
int query_value_equal(const json_value *a, const json_value *b);

/* ---------------------------------------------------------------- filters */

typedef enum filter_op {
    FILTER_AND = 1,     /* kids: all match (no kids: everything matches) */
    FILTER_OR,          /* kids: any matches */
    FILTER_NOR,         /* kids: none matches */
    FILTER_NOT,         /* one kid: does not match */
    FILTER_EQ,          /* path, operand */
    FILTER_NE,
    FILTER_GT,
    FILTER_GTE,
    FILTER_LT,
    FILTER_LTE,
    FILTER_IN,          /* path, operand is the array of values */
    FILTER_NIN,
    FILTER_EXISTS,      /* path, exists = 0 or 1 */
} filter_op;

typedef struct filter_node {
    filter_op op;
    int exists;                     /* FILTER_EXISTS: the wanted answer */
    uint32_t first, count;          /* logical ops: kids are nodes[first..first+count) */
    const char *path;               /* field ops: dotted path, NUL-terminated */
    size_t path_len;
    const json_value *operand;      /* comparisons, $in/$nin (an array) */
} filter_node;

typedef struct filter filter;

/* Parses a filter object from JSON bytes. json_path names the filter in
 * messages ("filter", "aggs.by_kind.filter"). */
int filter_parse(const char *json, size_t len, const char *json_path, filter **out, query_error *err);
/* Parses the filter object v, a value of a DOM parsed from input (v's span
 * in input is copied: the filter does not point into the caller's DOM). */
int filter_parse_value(const char *input, const json_value *v, const char *json_path,
                       filter **out, query_error *err);
void filter_free(filter *f);

/* The AST: nodes[0] is the root; read-only. */
const filter_node *filter_nodes(const filter *f, size_t *n_nodes);

/* 1 when the document matches, 0 when not. filter_match parses the stored
 * bytes once (HANU_ERR_INVALID when they are not JSON); filter_match_value
 * takes a parsed root. */
int filter_match(const filter *f, const char *doc, size_t len);
int filter_match_value(const filter *f, const json_value *root);

/* ------------------------------------------------------------------- sort */

typedef struct sort_key {
    char path[QUERY_MAX_PATH_BYTES + 1];
    int descending;
} sort_key;

typedef struct sort_spec {
    sort_key keys[SORT_MAX_KEYS];
    size_t n;
} sort_spec;

/* {"ts":-1} or [{"ts":-1},{"user":1}]; 1 ascending, -1 descending. */
int sort_parse(const json_value *v, const char *json_path, sort_spec *out, query_error *err);

/* The sort values of one document: keys[i] is the value at spec->keys[i]
 * (NULL when missing, which sorts as null). A path that reaches an array or
 * an object (at its end or on the way) is refused: HANU_ERR_INVALID with
 * "sort.tags: cannot sort on an array path (document "d7")". */
int sort_keys_of(const sort_spec *spec, const json_value *root, const json_value **keys,
                 query_error *err);

/* Orders two documents by their keys (from sort_keys_of), then by _id
 * ascending (byte order) so that the order is total. */
int sort_compare(const sort_spec *spec, const json_value *const *keys_a, const char *id_a, size_t id_a_len,
                 const json_value *const *keys_b, const char *id_b, size_t id_b_len);

/* ------------------------------------------------------------------ search */

typedef enum search_occur {
    SEARCH_SHOULD = 1,      /* plain words: implicit OR, ranked */
    SEARCH_MUST,            /* +word, +"phrase" */
    SEARCH_MUST_NOT,        /* -word, -"phrase" */
} search_occur;

typedef struct search_clause {
    search_occur occur;
    uint32_t n_tokens;          /* 1 for a word; a phrase (or a word the tokenizer
                                 * cuts in several, "e-mail") has more */
    const char *tokens[SEARCH_MAX_PHRASE_TOKENS];   /* folded, NUL-terminated */
    size_t lens[SEARCH_MAX_PHRASE_TOKENS];
} search_clause;

typedef struct search_query {
    search_clause *clauses;
    size_t n;
    char *text;                 /* owns the token bytes */
} search_query;

/* Parses q[0..len). At least one clause that is not -excluded must remain
 * after tokenizing, else HANU_ERR_INVALID ("q: no words to search for"). */
int search_query_parse(const char *q, size_t len, search_query *out, query_error *err);
void search_query_free(search_query *q);

/* BM25 (Robertson/Sparck Jones, Lucene's idf) with k1 = 1.2, b = 0.75:
 *   idf   = ln(1 + (N - df + 0.5) / (df + 0.5))
 *   score = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
 * N documents, df of them with the term, tf occurrences in this document of
 * length dl (tokens), avgdl the mean length. 0 when tf or N is 0. */
#define BM25_K1 1.2
#define BM25_B 0.75
double bm25_score(double tf, double dl, double avgdl, uint64_t n_docs, uint64_t df);
/* The idf factor of bm25_score alone. */
double bm25_idf(uint64_t n_docs, uint64_t df);

/* Brute-force search over docs[0..n) (the whole collection: N = n): the
 * oracle for the index's top-k. A document's text is its string values (not
 * keys, not the top-level "_id"), each value tokenized on its own; a phrase
 * matches only within one value. fields[0..n_fields) (may be 0) restricts the
 * text to values at those dotted paths or below them (array elements have
 * the path of their array); BM25's lengths then count only that text.
 * Matching: every +must clause, no -not clause, and, when there is no must
 * clause, at least one plain clause. Score: the sum of bm25_score over the
 * matching plain and must clauses; a phrase counts its occurrences as tf and
 * the sum of its words' idf as idf (as Lucene's PhraseQuery does).
 * scores[i] gets the score, or -1 when document i does not match. */
int search_eval(const search_query *q, const char *const *fields, size_t n_fields,
                const json_value *const *docs, size_t n, double *scores);

/* One document's side of search_eval, for executors that take the
 * statistics from elsewhere (the index): tfs[c] gets the occurrences of
 * clause c in doc (a phrase: within one string value), *length its text
 * length in tokens, both over the text fields selects (as search_eval). */
int search_doc_tfs(const search_query *q, const char *const *fields, size_t n_fields,
                   const json_value *doc, uint32_t *tfs, uint32_t *length);

/* ------------------------------------------------------------ aggregations */

typedef enum agg_kind { AGG_TERMS = 1, AGG_STATS, AGG_HISTOGRAM } agg_kind;

typedef struct agg_spec {
    char name[QUERY_MAX_PATH_BYTES + 1];
    agg_kind kind;
    char field[QUERY_MAX_PATH_BYTES + 1];
    uint32_t size;              /* terms */
    double interval;            /* histogram, > 0 */
    filter *filter;             /* optional, owned */
} agg_spec;

typedef struct aggs_spec {
    agg_spec aggs[AGGS_MAX];
    size_t n;
} aggs_spec;

/* Parses the value of "aggs" from a DOM over input:
 *   {"name":{"terms":{"field":"kind","size":10}},
 *    "s":{"stats":{"field":"n"},"filter":{...}},
 *    "h":{"histogram":{"field":"n","interval":10}}}
 * *out is filled (zeroed first); free with aggs_free. */
int aggs_parse(const char *input, const json_value *v, const char *json_path, aggs_spec *out,
               query_error *err);
void aggs_free(aggs_spec *a);

/* Evaluates every aggregation over docs[0..n) (roots of the documents that
 * matched the query) and appends the answer object to out:
 *   {"name":{"buckets":[{"key":"a","count":3},..],"other":N},
 *    "s":{"count":N,"min":..,"max":..,"sum":..,"avg":..},
 *    "h":{"buckets":[{"key":0,"count":2},..]}}
 * HANU_ERR_TOO_LARGE when a histogram needs more than
 * AGGS_MAX_HISTOGRAM_BUCKETS buckets (err says which). */
int aggs_eval(const aggs_spec *a, const json_value *const *docs, size_t n, hanu_buf *out,
              query_error *err);

/* The same aggregation fed piece by piece, for an executor that reads
 * columns: agg_state_add_doc gathers one document's values as aggs_eval does;
 * agg_state_add_value counts one scalar seen in n distinct documents (each
 * counted once, as a single-valued column gives it); values are copied.
 * agg_state_write appends "name":{...} as aggs_eval writes it. Errors as
 * aggs_eval (HANU_ERR_TOO_LARGE with err for a histogram). */
typedef struct agg_state agg_state;
int agg_state_new(const agg_spec *a, agg_state **out);
int agg_state_add_doc(agg_state *s, const json_value *root, query_error *err);
int agg_state_add_value(agg_state *s, const json_value *v, uint64_t n, query_error *err);
int agg_state_write(agg_state *s, json_writer *w);
void agg_state_free(agg_state *s);

#endif
