/*
 * From a stored document to what the segment builder records: keyword terms,
 * text terms of each string's field and of the whole text, columns and text
 * lengths (docs/INDEX.md, "What is indexed").
 */
#include "index/index.h"
#include "json/json.h"
#include "text/text.h"


/* A token is a term of its string's field (path NUL INDEX_KEY_WORD token) and of
 * the whole text (NUL INDEX_KEY_ALL_WORD token): the field is named to the builder
 * once per string, and each token once for both terms. */
typedef struct extract_ctx {
    index_builder *b;
    uint32_t field;             /* the string's text field, UINT32_MAX: the path is not indexed */
    uint64_t text_positions;    /* the document's whole-text length, recorded once at its end */
} extract_ctx;

static int add_token(void *p, const text_token *tok)
{
    extract_ctx *x = p;
    if (tok->len > INDEX_KEYWORD_MAX) return HANU_OK;   /* as index_key: no key (tokens are shorter) */
    return index_builder_word(x->b, x->field, tok->bytes, tok->len);
}

static int add_leaf(void *p, const json_leaf *leaf)
{
    extract_ctx *x = p;
    index_builder *b = x->b;
    uint8_t key[INDEX_KEY_MAX];
    size_t n = 0;
    int rc = HANU_OK;
    switch (leaf->type) {
    case JSON_NULL:
        n = index_key(key, leaf->path, leaf->path_len, INDEX_KEY_NULL, NULL, 0, 0);
        if (n && !leaf->in_array) rc = index_builder_null(b, leaf->path, leaf->path_len);
        break;
    case JSON_BOOL:
        n = index_key(key, leaf->path, leaf->path_len, leaf->boolean ? INDEX_KEY_TRUE : INDEX_KEY_FALSE, NULL, 0, 0);
        if (n && !leaf->in_array) rc = index_builder_bool(b, leaf->path, leaf->path_len, leaf->boolean);
        break;
    case JSON_NUMBER:
        n = index_key(key, leaf->path, leaf->path_len, INDEX_KEY_NUMBER, NULL, 0, leaf->num);
        if (n && !leaf->in_array) rc = index_builder_number(b, leaf->path, leaf->path_len, leaf->num);
        break;
    case JSON_STRING: {
        n = index_key(key, leaf->path, leaf->path_len, INDEX_KEY_STRING, leaf->str, leaf->str_len, 0);
        if (n && !leaf->in_array) rc = index_builder_string(b, leaf->path, leaf->path_len, leaf->str, leaf->str_len);
        if (leaf->depth == 1 && leaf->path_len == 3 && memcmp(leaf->path, "_id", 3) == 0) break;   /* not text */
        uint32_t positions = 0;
        uint8_t prefix[INDEX_KEY_MAX];
        size_t prefix_len = index_key(prefix, leaf->path, leaf->path_len, INDEX_KEY_WORD, "", 0, 0);
        x->field = UINT32_MAX;
        if (rc == HANU_OK && prefix_len) rc = index_builder_text_field(b, prefix, prefix_len, &x->field);
        if (rc == HANU_OK) rc = text_tokenize(leaf->str, leaf->str_len, add_token, x, &positions);
        if (rc == HANU_OK && positions && leaf->path_len <= INDEX_PATH_MAX && !memchr(leaf->path, 0, leaf->path_len))
            rc = index_builder_text_length(b, leaf->path, leaf->path_len, positions);
        x->text_positions += positions;
        break;
    }
    default:
        break;
    }
    if (rc == HANU_OK && n) rc = index_builder_term(b, key, n);
    if (rc == HANU_OK && leaf->in_array && leaf->path_len <= INDEX_PATH_MAX && !memchr(leaf->path, 0, leaf->path_len))
        rc = index_builder_multi(b, leaf->path, leaf->path_len);
    return rc;
}

int index_add_document(index_builder *b, const char *id, size_t id_len, uint64_t txn,
                       const char *doc, size_t len)
{
    int rc = index_builder_doc(b, id, id_len, txn);
    if (rc) return rc;
    size_t scratch_len = json_scan_scratch_size(len);
    void *scratch = index_builder_scratch(b, scratch_len);   /* kept by the builder: no allocation a document */
    if (!scratch) return HANU_ERR_NOMEM;
    extract_ctx x = { .b = b, .field = UINT32_MAX };
    rc = json_scan(doc, len, NULL, scratch, scratch_len, add_leaf, &x, NULL);
    if (rc == HANU_OK && x.text_positions > UINT32_MAX) rc = HANU_ERR_TOO_LARGE;
    if (rc == HANU_OK && x.text_positions) rc = index_builder_text_length(b, "", 0, (uint32_t)x.text_positions);
    return rc;
}
