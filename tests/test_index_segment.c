/*
 * test_index_segment.c: an index segment written by the builder reads back
 * exactly (ids, txns, terms in key order, postings with term frequencies and
 * block maxima, columns and their dictionaries, text lengths); number keys
 * sort as numbers; every damaged or truncated file is refused at open.
 */
#include "test.h"
#include "index/index.h"

#include <fcntl.h>
#include <math.h>

#define BM25_K1_TEST 1.2   /* query.h's BM25_K1 */

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t word_key(uint8_t *k, const char *path, const char *word)
{
    return index_key(k, path, strlen(path), *path ? INDEX_KEY_WORD : INDEX_KEY_ALL_WORD,
                     word, strlen(word), 0);
}

/* 1000 docs: "common" in every doc (tf = 1 + ord % 3), "rare" in every 97th,
 * a number column n = ord * 1.5 (missing on odd ords), a string column
 * kind = k<ord % 5>, tags multi-valued, text length 10 + ord % 7. */
#define DOCS 1000
static const char *write_sample(const char *dir)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/seg-1", dir);
    index_builder *b = index_builder_new();
    if (!b) return NULL;
    uint8_t k[INDEX_KEY_MAX];
    for (uint32_t d = 0; d < DOCS; d++) {
        char id[32], kind[8];
        snprintf(id, sizeof id, "doc%04u", d);
        snprintf(kind, sizeof kind, "k%u", d % 5);
        if (index_builder_doc(b, id, strlen(id), 100 + d) != HANU_OK) goto fail;
        for (uint32_t t = 0; t < 1 + d % 3; t++)
            if (index_builder_term(b, k, word_key(k, "", "common")) != HANU_OK) goto fail;
        if (d % 97 == 0 && index_builder_term(b, k, word_key(k, "body", "rare")) != HANU_OK) goto fail;
        if (index_builder_term(b, k, index_key(k, "kind", 4, INDEX_KEY_STRING, kind, strlen(kind), 0)) != HANU_OK)
            goto fail;
        if (d % 2 == 0 && index_builder_number(b, "n", 1, d * 1.5) != HANU_OK) goto fail;
        if (index_builder_string(b, "kind", 4, kind, strlen(kind)) != HANU_OK) goto fail;
        if (index_builder_string(b, "tags", 4, "a", 1) || index_builder_string(b, "tags", 4, "b", 1)) goto fail;
        if (index_builder_text_length(b, "", 0, 10 + d % 7) != HANU_OK) goto fail;
        if (index_builder_text_length(b, "body", 4, 1) != HANU_OK) goto fail;   /* two strings add up */
        if (index_builder_text_length(b, "body", 4, 2 + d % 5) != HANU_OK) goto fail;
    }
    if (index_builder_write(b, path) != HANU_OK) goto fail;
    index_builder_free(b);
    return path;
fail:
    index_builder_free(b);
    return NULL;
}

static void test_round_trip(void)
{
    const char *dir = test_tmpdir("seg-rt");
    const char *path = write_sample(dir);
    REQUIRE(path);
    index_segment *s;
    char err[200];
    int orc = index_segment_open(path, &s, err, sizeof err);
    if (orc) fprintf(stderr, "  open: %s\n", err);
    REQUIRE(orc == HANU_OK);
    CHECK_EQ(index_segment_docs(s), DOCS);
    size_t len;
    const char *id = index_segment_doc_id(s, 417, &len);
    CHECK(len == 7 && memcmp(id, "doc0417", 7) == 0);
    CHECK_EQ(index_segment_doc_txn(s, 999), 1099);

    /* terms: common (all text), rare (body words), k0..k4 (kind keywords) */
    CHECK_EQ(index_segment_terms(s), 7);
    uint8_t k[INDEX_KEY_MAX];
    uint32_t t = index_segment_term_find(s, k, word_key(k, "", "common"));
    REQUIRE(t != UINT32_MAX);
    CHECK_EQ(t, 0);   /* path "" sorts first */
    uint32_t df;
    index_segment_term(s, t, &len, &df);
    CHECK_EQ(df, DOCS);
    index_postings p;
    index_postings_open(&p, s, t);
    uint32_t count = 0, sum_tf = 0;
    for (uint32_t d = p.doc; d != INDEX_ORD_END; d = index_postings_next(&p)) {
        CHECK_EQ(d, count);
        CHECK_EQ(p.tf, 1 + d % 3);
        if (p.pos == 0) {   /* block maxima cover the block */
            CHECK_EQ(index_postings_block_max_tf(&p), 3);
            CHECK_EQ(index_postings_block_min_length(&p), 10);
            CHECK_EQ(index_postings_block_last(&p), HANU_MIN(d + INDEX_BLOCK - 1, DOCS - 1));
        }
        count++;
        sum_tf += p.tf;
    }
    CHECK_EQ(count, DOCS);
    CHECK_EQ(sum_tf, 1999);   /* 334 * 1 + 333 * 2 + 333 * 3 */

    t = index_segment_term_find(s, k, word_key(k, "body", "rare"));
    REQUIRE(t != UINT32_MAX);
    index_postings_open(&p, s, t);
    CHECK_EQ(p.doc, 0);
    CHECK_EQ(index_postings_advance(&p, 1), 97);
    CHECK_EQ(index_postings_advance(&p, 500), 582);
    CHECK_EQ(index_postings_block_min_length(&p), 3);   /* body lengths 3..7; 0 % 5 = 0 -> 3 */
    CHECK_EQ(index_postings_advance(&p, 971), INDEX_ORD_END);

    /* advance across blocks equals a scan, for random targets */
    t = index_segment_term_find(s, k, index_key(k, "kind", 4, INDEX_KEY_STRING, "k3", 2, 0));
    REQUIRE(t != UINT32_MAX);
    for (int round = 0; round < 200; round++) {
        index_postings_open(&p, s, t);
        uint32_t target = (uint32_t)(next_rand() % (DOCS + 10));
        uint32_t want = target;
        while (want < DOCS && want % 5 != 3) want++;
        if (want >= DOCS) want = INDEX_ORD_END;
        uint32_t got = p.doc >= target ? p.doc : index_postings_advance(&p, target);
        CHECK_EQ(got, want);
    }
    CHECK(index_segment_term_find(s, k, word_key(k, "", "absent")) == UINT32_MAX);

    /* columns */
    const index_column *n = index_segment_column(s, "n", 1);
    REQUIRE(n);
    CHECK_EQ(index_column_tag(n, 10), INDEX_COL_NUMBER);
    CHECK(index_column_number(n, 10) == 15.0);
    CHECK_EQ(index_column_tag(n, 11), INDEX_COL_MISSING);
    const index_column *kind = index_segment_column(s, "kind", 4);
    REQUIRE(kind);
    CHECK_EQ(index_column_dict_size(kind), 5);
    CHECK_EQ(index_column_tag(kind, 13), INDEX_COL_STRING);
    const char *v = index_column_dict(kind, index_column_string_ord(kind, 13), &len);
    CHECK(len == 2 && memcmp(v, "k3", 2) == 0);
    const index_column *tags = index_segment_column(s, "tags", 4);
    REQUIRE(tags);
    CHECK_EQ(index_column_tag(tags, 5), INDEX_COL_MULTI);
    const index_column *all = index_segment_column(s, "", 0);
    REQUIRE(all);
    CHECK_EQ(index_column_text_length(all, 6), 16);
    uint64_t total = 0;
    for (uint32_t d = 0; d < DOCS; d++) total += 10 + d % 7;
    CHECK_EQ(index_column_text_total(all), total);
    CHECK(index_segment_column(s, "nope", 4) == NULL);
    index_segment_close(s);
    /* a segment file is never replaced */
    index_builder *b = index_builder_new();
    CHECK_EQ(index_builder_write(b, path), HANU_ERR_EXISTS);
    index_builder_free(b);
}

static void test_number_keys_sort_as_numbers(void)
{
    double vals[] = { -INFINITY, -1e300, -2.5, -1, -0.0, 0, 1e-300, 0.5, 1, 2, 1700000000000.0, 1e300 };
    uint8_t a[INDEX_KEY_MAX], b[INDEX_KEY_MAX];
    for (size_t i = 0; i + 1 < HANU_ARRAY_LEN(vals); i++) {
        size_t al = index_key(a, "x", 1, INDEX_KEY_NUMBER, NULL, 0, vals[i]);
        size_t bl = index_key(b, "x", 1, INDEX_KEY_NUMBER, NULL, 0, vals[i + 1]);
        CHECK(al == bl && al == 11);
        int c = memcmp(a, b, al);
        if (vals[i] == vals[i + 1]) CHECK(c == 0);   /* -0.0 and 0 */
        else CHECK(c < 0);
        CHECK(index_number_from_bits(index_number_bits(vals[i])) == vals[i]);
    }
    for (int i = 0; i < 10000; i++) {
        double x = ((double)(int64_t)next_rand()) / (double)(1 + next_rand() % 1000000);
        double y = ((double)(int64_t)next_rand()) / (double)(1 + next_rand() % 1000000);
        uint64_t bx = index_number_bits(x), by = index_number_bits(y);
        CHECK((x < y) == (bx < by));
    }
    CHECK_EQ(index_key(a, "a\0b", 3, INDEX_KEY_NULL, NULL, 0, 0), 0);   /* NUL in a path */
    char longs[INDEX_KEYWORD_MAX + 1];
    memset(longs, 'x', sizeof longs);
    CHECK_EQ(index_key(a, "s", 1, INDEX_KEY_STRING, longs, sizeof longs, 0), 0);
}

static void test_empty_segment(void)
{
    const char *dir = test_tmpdir("seg-empty");
    char path[600];
    snprintf(path, sizeof path, "%s/seg-0", dir);
    index_builder *b = index_builder_new();
    REQUIRE(b);
    uint8_t k[INDEX_KEY_MAX];
    CHECK_EQ(index_builder_term(b, k, word_key(k, "", "x")), HANU_ERR_INVALID);   /* no document yet */
    CHECK_EQ(index_builder_write(b, path), HANU_OK);
    index_builder_free(b);
    index_segment *s;
    REQUIRE(index_segment_open(path, &s, NULL, 0) == HANU_OK);
    CHECK_EQ(index_segment_docs(s), 0);
    CHECK_EQ(index_segment_terms(s), 0);
    CHECK_EQ(index_segment_term_lower_bound(s, k, 3), 0);
    index_segment_close(s);
}

static int write_bytes(const char *path, const uint8_t *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int rc = hanu_write_full(fd, p, n);
    close(fd);
    return rc;
}

/* The whole file (NULL on failure). */
static uint8_t *read_all(const char *path, off_t *size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    *size = lseek(fd, 0, SEEK_END);
    uint8_t *p = *size > 0 ? malloc((size_t)*size) : NULL;
    if (p && hanu_pread_full(fd, p, (size_t)*size, 0) != HANU_OK) {
        free(p);
        p = NULL;
    }
    close(fd);
    return p;
}

static void test_damage_is_refused(void)
{
    const char *dir = test_tmpdir("seg-damage");
    const char *path = write_sample(dir);
    REQUIRE(path);
    off_t size;
    uint8_t *orig = read_all(path, &size);
    REQUIRE(orig);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/bad", dir);
    /* one flipped bit anywhere: 300 positions spread over the file */
    uint8_t *copy = malloc((size_t)size);
    REQUIRE(copy);
    int refused = 0;
    for (int i = 0; i < 300; i++) {
        memcpy(copy, orig, (size_t)size);
        copy[next_rand() % (uint64_t)size] ^= (uint8_t)(1u << (next_rand() % 8));
        REQUIRE(write_bytes(bad, copy, (size_t)size) == HANU_OK);
        index_segment *s = NULL;
        char err[200] = "";
        int rc = index_segment_open(bad, &s, err, sizeof err);
        if (rc == HANU_ERR_CORRUPT && s == NULL && err[0]) refused++;
        index_segment_close(s);
    }
    free(copy);
    CHECK_EQ(refused, 300);
    /* truncated at any length */
    for (off_t cut = 0; cut < size; cut += 97) {
        REQUIRE(write_bytes(bad, orig, (size_t)cut) == HANU_OK);
        index_segment *s = NULL;
        CHECK_EQ(index_segment_open(bad, &s, NULL, 0), HANU_ERR_CORRUPT);
    }
    index_segment *s = NULL;
    CHECK_EQ(index_segment_open("/nonexistent/seg", &s, NULL, 0), HANU_ERR_IO);
    free(orig);
}

/* A segment of n docs whose ids are "id" + the numbers first, first + step...
 * (mod modulo when modulo > 0, so they can wrap); ids of different lengths. */
static void id_segment(const char *dir, const char *name, uint32_t n, uint32_t first, uint32_t step,
                       uint32_t modulo, index_segment **out)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    index_builder *b = index_builder_new();
    REQUIRE(b);
    for (uint32_t d = 0; d < n; d++) {
        char id[32];
        uint32_t v = first + d * step;
        if (modulo) v %= modulo;
        snprintf(id, sizeof id, "id%u", v);
        REQUIRE(index_builder_doc(b, id, strlen(id), d + 1) == HANU_OK);
    }
    REQUIRE(index_builder_write(b, path) == HANU_OK);
    index_builder_free(b);
    REQUIRE(index_segment_open(path, out, NULL, 0) == HANU_OK);
}

static int plain_id_cmp(const index_segment *a, uint32_t oa, const index_segment *b, uint32_t ob)
{
    size_t al, bl;
    const char *x = index_segment_doc_id(a, oa, &al), *y = index_segment_doc_id(b, ob, &bl);
    int c = memcmp(x, y, al < bl ? al : bl);
    if (!c) c = (al > bl) - (al < bl);
    return (c > 0) - (c < 0);
}

/* index_doc_id_cmp equals comparing the id bytes, whether the segment's ids
 * follow its ordinals or not and whether two segments' id ranges overlap. */
static void test_id_order(void)
{
    const char *dir = test_tmpdir("seg-ids");
    index_segment *segs[6];
    id_segment(dir, "asc", 300, 1000, 3, 0, &segs[0]);        /* ascending: id1000 .. id1897 */
    id_segment(dir, "later", 200, 5000, 1, 0, &segs[1]);      /* ascending, above asc */
    id_segment(dir, "shuffled", 257, 7, 31, 257, &segs[2]);   /* every residue once, out of order */
    id_segment(dir, "lengths", 150, 1, 7, 0, &segs[3]);       /* id1, id8 ... id1044: bytewise not ascending */
    id_segment(dir, "one", 1, 1500, 1, 0, &segs[4]);          /* inside asc's range */
    id_segment(dir, "from", 100, 1500, 1, 0, &segs[5]);       /* its smallest id is one's id */
    size_t checked = 0, wrong = 0;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            uint32_t na = index_segment_docs(segs[i]), nb = index_segment_docs(segs[j]);
            for (int k = 0; k < 2000; k++) {
                uint32_t oa = (uint32_t)(next_rand() % na), ob = (uint32_t)(next_rand() % nb);
                wrong += index_doc_id_cmp(segs[i], oa, segs[j], ob) != plain_id_cmp(segs[i], oa, segs[j], ob);
                checked++;
            }
        }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(checked, 72000);
    for (int i = 0; i < 6; i++) index_segment_close(segs[i]);
}

/* Documents go in through index_add_document: every leaf and token lands where
 * docs/INDEX.md says. */
static void test_documents_extracted(void)
{
    const char *dir = test_tmpdir("seg-extract");
    char path[600];
    snprintf(path, sizeof path, "%s/seg-x", dir);
    const char *docs[] = {
        "{\"_id\":\"a\",\"kind\":\"note\",\"n\":1,\"ok\":true,\"tags\":[\"x\",\"y\"],"
        "\"title\":\"Hello World\",\"body\":\"hello hello again\",\"nested\":{\"v\":null}}",
        "{\"_id\":\"b\",\"kind\":\"task\",\"n\":\"1\",\"title\":\"Über caf\u00e9\"}",
    };
    index_builder *b = index_builder_new();
    REQUIRE(b);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(index_add_document(b, i ? "b" : "a", 1, 10 + i, docs[i], strlen(docs[i])), HANU_OK);
    REQUIRE(index_builder_write(b, path) == HANU_OK);
    index_builder_free(b);
    index_segment *s;
    REQUIRE(index_segment_open(path, &s, NULL, 0) == HANU_OK);
    uint8_t k[INDEX_KEY_MAX];
    uint32_t df;
    size_t len;
#define TERM_DF(key_len) ({ uint32_t _t = index_segment_term_find(s, k, (key_len)); \
    _t == UINT32_MAX ? 0u : (index_segment_term(s, _t, &len, &df), df); })
    CHECK_EQ(TERM_DF(index_key(k, "kind", 4, INDEX_KEY_STRING, "note", 4, 0)), 1);
    CHECK_EQ(TERM_DF(index_key(k, "n", 1, INDEX_KEY_NUMBER, NULL, 0, 1)), 1);      /* typed: 1 ... */
    CHECK_EQ(TERM_DF(index_key(k, "n", 1, INDEX_KEY_STRING, "1", 1, 0)), 1);       /* ... and "1" differ */
    CHECK_EQ(TERM_DF(index_key(k, "ok", 2, INDEX_KEY_TRUE, NULL, 0, 0)), 1);
    CHECK_EQ(TERM_DF(index_key(k, "nested.v", 8, INDEX_KEY_NULL, NULL, 0, 0)), 1);
    CHECK_EQ(TERM_DF(index_key(k, "tags", 4, INDEX_KEY_STRING, "y", 1, 0)), 1);
    CHECK_EQ(TERM_DF(index_key(k, "title", 5, INDEX_KEY_WORD, "hello", 5, 0)), 1);
    CHECK_EQ(TERM_DF(index_key(k, "title", 5, INDEX_KEY_WORD, "über", strlen("über"), 0)), 1);   /* folded */
    CHECK_EQ(TERM_DF(index_key(k, "", 0, INDEX_KEY_ALL_WORD, "café", strlen("café"), 0)), 1);
    uint32_t t = index_segment_term_find(s, k, index_key(k, "", 0, INDEX_KEY_ALL_WORD, "hello", 5, 0));
    REQUIRE(t != UINT32_MAX);
    index_postings p;
    index_postings_open(&p, s, t);
    CHECK_EQ(p.doc, 0);
    CHECK_EQ(p.tf, 3);   /* once in the title, twice in the body */
    CHECK_EQ(index_postings_next(&p), INDEX_ORD_END);
    const index_column *c = index_segment_column(s, "tags", 4);
    REQUIRE(c);
    CHECK_EQ(index_column_tag(c, 0), INDEX_COL_MULTI);
    CHECK_EQ(index_column_tag(c, 1), INDEX_COL_MISSING);
    c = index_segment_column(s, "n", 1);
    REQUIRE(c);
    CHECK_EQ(index_column_tag(c, 0), INDEX_COL_NUMBER);
    CHECK_EQ(index_column_tag(c, 1), INDEX_COL_STRING);
    c = index_segment_column(s, "", 0);
    REQUIRE(c);
    CHECK_EQ(index_column_text_length(c, 0), 8);    /* note, x, y, hello world, hello hello again: _id is no text */
    CHECK_EQ(index_column_text_length(c, 1), 4);    /* task, 1, über café */
    CHECK_EQ(TERM_DF(index_key(k, "_id", 3, INDEX_KEY_STRING, "a", 1, 0)), 1);
    CHECK_EQ(TERM_DF(index_key(k, "", 0, INDEX_KEY_ALL_WORD, "a", 1, 0)), 0);
    c = index_segment_column(s, "body", 4);
    REQUIRE(c);
    CHECK_EQ(index_column_text_length(c, 0), 3);
#undef TERM_DF
    index_segment_close(s);
}

/* The bytes of a whole file, for comparing two segments. */
static int same_file(const char *a, const char *b)
{
    hanu_buf x = { 0 }, y = { 0 };
    int same = hanu_read_file(a, 1u << 30, &x) == HANU_OK && hanu_read_file(b, 1u << 30, &y) == HANU_OK && x.len == y.len &&
               x.len > 0 && memcmp(x.data, y.data, x.len) == 0;
    hanu_buf_free(&x);
    hanu_buf_free(&y);
    return same;
}

/* Text given the fast way (index_builder_text_field + index_builder_word, tokens
   counted in batches), the key way (index_builder_term with both keys of each
   token), or a mix within one document, makes byte-identical segments. */
static void test_words_both_ways_make_one_segment(void)
{
    const char *dir = test_tmpdir("seg-words");
    /* "" stands for a string whose path is no field: its tokens are the whole
       text's words only (index_builder_word with UINT32_MAX). */
    static const char *const fields[] = { "title", "body", "a.b", "" };
    char paths[3][600];
    for (int way = 0; way < 3; way++) {
        snprintf(paths[way], sizeof paths[way], "%s/seg-%d", dir, way);
        index_builder *b = index_builder_new();
        REQUIRE(b);
        rng = 7;
        uint8_t k[INDEX_KEY_MAX], prefix[INDEX_KEY_MAX];
        for (uint32_t d = 0; d < 3000; d++) {
            char id[32];
            snprintf(id, sizeof id, "d%05u", d);
            REQUIRE(index_builder_doc(b, id, strlen(id), d + 1) == HANU_OK);
            for (int f = 0; f < 4; f++) {
                size_t plen = index_key(prefix, fields[f], strlen(fields[f]), INDEX_KEY_WORD, "", 0, 0);
                uint32_t field = UINT32_MAX;
                if (way != 1 && f < 3) REQUIRE(index_builder_text_field(b, prefix, plen, &field) == HANU_OK);
                if (f == 2 && d % 50 == 1) {   /* a posting of an earlier document flushes in mid-document */
                    size_t kl = index_key(k, "p", 1, INDEX_KEY_STRING, "x", 1, 0);
                    REQUIRE(index_builder_posting(b, k, kl, d - 1, 1) == HANU_OK);
                }
                /* Every 100th document is longer: the builder's per-document table of
                   distinct tokens grows in the middle of a document. */
                int ntok = d % 100 == 99 ? 700 : 40;
                for (int t = 0; t < ntok; t++) {
                    char w[16];
                    uint64_t r = next_rand();
                    snprintf(w, sizeof w, "w%u", (unsigned)(r % 5000 < 2500 ? r % 50 : r % 5000));
                    int fast = way == 0 || (way == 2 && (r >> 20) % 2);
                    if (fast) {
                        REQUIRE(index_builder_word(b, field, w, strlen(w)) == HANU_OK);
                    } else {
                        if (f < 3) REQUIRE(index_builder_term(b, k, word_key(k, fields[f], w)) == HANU_OK);
                        REQUIRE(index_builder_term(b, k, word_key(k, "", w)) == HANU_OK);
                    }
                }
            }
        }
        CHECK_EQ(index_builder_write(b, paths[way]), HANU_OK);
        index_builder_free(b);
    }
    CHECK(same_file(paths[0], paths[1]));
    CHECK(same_file(paths[0], paths[2]));
    /* Refusals: no document yet, a token too long, an unknown field, a prefix that is not a field's. */
    index_builder *b = index_builder_new();
    REQUIRE(b);
    uint8_t prefix[INDEX_KEY_MAX];
    size_t plen = index_key(prefix, "body", 4, INDEX_KEY_WORD, "", 0, 0);
    uint32_t field = UINT32_MAX;
    CHECK_EQ(index_builder_word(b, UINT32_MAX, "x", 1), HANU_ERR_INVALID);
    CHECK_EQ(index_builder_doc(b, "d", 1, 1), HANU_OK);
    CHECK_EQ(index_builder_text_field(b, prefix, plen, &field), HANU_OK);
    CHECK_EQ(field, 0);
    char longw[INDEX_KEYWORD_MAX + 1];
    memset(longw, 'a', sizeof longw);
    CHECK_EQ(index_builder_word(b, field, longw, sizeof longw), HANU_ERR_INVALID);
    CHECK_EQ(index_builder_word(b, 1, "x", 1), HANU_ERR_INVALID);
    CHECK_EQ(index_builder_text_field(b, prefix, plen - 1, &field), HANU_ERR_INVALID);
    index_builder_free(b);
}

/* Version 2's block impacts: a whole-text word's blocks carry the largest
 * index_block_impact of their documents (a0 = the text total / documents);
 * other words none. The same file marked version 1 (no impacts then: the
 * bytes were padding) still opens and reads without them; version 3 is
 * refused. */
static void test_impacts_and_version_1(void)
{
    const char *dir = test_tmpdir("seg-impacts");
    const char *path = write_sample(dir);
    REQUIRE(path);
    index_segment *s;
    REQUIRE(index_segment_open(path, &s, NULL, 0) == HANU_OK);
    uint64_t total = 0;
    for (uint32_t d = 0; d < DOCS; d++) total += 10 + d % 7;
    double a0 = (double)total / DOCS;
    CHECK(index_segment_impact_avgdl(s) == a0);
    uint8_t k[INDEX_KEY_MAX];
    index_postings p;
    index_postings_open(&p, s, index_segment_term_find(s, k, word_key(k, "", "common")));
    for (uint32_t b = 0; b < p.nblocks; b++) {
        uint32_t want = 0;
        for (uint32_t d = b * INDEX_BLOCK; d < DOCS && d < (b + 1) * INDEX_BLOCK; d++)
            want = HANU_MAX(want, index_block_impact(1 + d % 3, 10 + d % 7, a0));
        CHECK_EQ(index_postings_block_impact(&p, b), want);
        CHECK(want > 0 && want < 65535);
    }
    /* the bound is above every ratio it stands for */
    for (uint32_t tf = 1; tf < 50; tf++)
        for (uint32_t len = 0; len < 200; len += 7) {
            double ratio = tf / (tf + BM25_K1_TEST * (0.25 + 0.75 * (len / a0)));
            CHECK(index_block_impact(tf, len, a0) / 65535.0 > ratio);
        }
    index_postings_open(&p, s, index_segment_term_find(s, k, word_key(k, "body", "rare")));
    CHECK_EQ(index_postings_block_impact(&p, 0), 0);   /* a field's word: none */
    index_segment_close(s);

    off_t size;
    uint8_t *bytes = read_all(path, &size);
    REQUIRE(bytes);
    char old[700];
    snprintf(old, sizeof old, "%s/v1", dir);
    for (uint32_t version = 1; version <= 3; version += 2) {
        hanu_put_u32(bytes + 8, version);
        hanu_put_u64(bytes + size - 16, hanu_hash64(bytes, (size_t)size - 16, 0));
        REQUIRE(write_bytes(old, bytes, (size_t)size) == HANU_OK);
        char err[200] = "";
        int rc = index_segment_open(old, &s, err, sizeof err);
        if (version == 3) {
            CHECK(rc == HANU_ERR_CORRUPT && strstr(err, "version 3"));
            continue;
        }
        REQUIRE(rc == HANU_OK);
        CHECK(index_segment_impact_avgdl(s) == 0);
        index_postings_open(&p, s, index_segment_term_find(s, k, word_key(k, "", "common")));
        CHECK_EQ(index_postings_block_impact(&p, 0), 0);
        CHECK_EQ(index_postings_block_max_tf(&p), 3);
        index_segment_close(s);
    }
    free(bytes);
}

/* Block impacts over tfs of 1 to 40 and lengths that do not follow them (the
 * builder and the streaming merge keep only the shortest length of each small
 * tf): every block's impact is the largest over its postings, computed one by one. */
static void check_impacts_brute_force(const char *path, uint32_t docs, uint32_t (*tf_of)(uint32_t),
                                      uint32_t (*len_of)(uint32_t))
{
    index_segment *s;
    REQUIRE(index_segment_open(path, &s, NULL, 0) == HANU_OK);
    uint64_t total = 0;
    for (uint32_t d = 0; d < docs; d++) total += len_of(d);
    double a0 = (double)total / docs;
    uint8_t k[INDEX_KEY_MAX];
    index_postings p;
    index_postings_open(&p, s, index_segment_term_find(s, k, word_key(k, "", "w")));
    CHECK_EQ(p.nblocks, (docs + INDEX_BLOCK - 1) / INDEX_BLOCK);
    for (uint32_t b = 0; b < p.nblocks; b++) {
        uint32_t want = 0;
        for (uint32_t d = b * INDEX_BLOCK; d < docs && d < (b + 1) * INDEX_BLOCK; d++)
            want = HANU_MAX(want, index_block_impact(tf_of(d), len_of(d), a0));
        CHECK_EQ(index_postings_block_impact(&p, b), want);
    }
    index_segment_close(s);
}

static uint32_t mixed_tf(uint32_t d) { return 1 + (d * 7 + d / 5) % 40; }
static uint32_t mixed_len(uint32_t d) { return mixed_tf(d) + (d * 13) % 50; }

static void test_impacts_of_mixed_tfs(void)
{
    const char *dir = test_tmpdir("seg-impacts-tf");
    enum { HALF = 700 };
    char paths[2][600], merged[600];
    index_segment *in[2];
    for (int half = 0; half < 2; half++) {
        snprintf(paths[half], sizeof paths[half], "%s/half-%d", dir, half);
        index_builder *b = index_builder_new();
        REQUIRE(b);
        for (uint32_t i = 0; i < HALF; i++) {
            uint32_t d = (uint32_t)half * HALF + i;
            char id[16];
            snprintf(id, sizeof id, "d%05u", d);
            REQUIRE(index_builder_doc(b, id, strlen(id), d + 1) == HANU_OK);
            for (uint32_t t = 0; t < mixed_tf(d); t++) REQUIRE(index_builder_word(b, UINT32_MAX, "w", 1) == HANU_OK);
            REQUIRE(index_builder_text_length(b, "", 0, mixed_len(d)) == HANU_OK);
        }
        REQUIRE(index_builder_write(b, paths[half]) == HANU_OK);
        index_builder_free(b);
        REQUIRE(index_segment_open(paths[half], &in[half], NULL, 0) == HANU_OK);
    }
    /* the builder: the first half alone (its ordinals are the documents') */
    check_impacts_brute_force(paths[0], HALF, mixed_tf, mixed_len);
    /* the streaming merge of both halves: ordinals 0..2 * HALF - 1 in order */
    index_merge_input mi[2] = { { in[0], NULL, 0 }, { in[1], NULL, 0 } };
    uint32_t map0[HALF + 1], map1[HALF + 1], *map[2] = { map0, map1 }, got = 0;
    snprintf(merged, sizeof merged, "%s/merged", dir);
    REQUIRE(index_merge_write(mi, 2, merged, map, &got) == HANU_OK);
    CHECK_EQ(got, 2 * HALF);
    check_impacts_brute_force(merged, 2 * HALF, mixed_tf, mixed_len);
    index_segment_close(in[0]);
    index_segment_close(in[1]);
}

/* Term lookups through the per-segment hints (index_segment_term_lower_bound
 * keeps the last positions by key hash, verified before use): on a table of
 * 20 000 terms, 40 000 keys present and absent (between every two terms,
 * before the first, after the last) looked up in three rounds of random
 * order, so that slots are stale and collide, each answer equal to a binary
 * search of the test's own; each lookup after index_snapshot_term_prefetch
 * of its key (which reads the term its slot names). */
#define HINT_TERMS 20000
static uint32_t reference_lower_bound(const index_segment *s, const uint8_t *key, size_t len)
{
    uint32_t lo = 0, hi = index_segment_terms(s);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        size_t ml;
        const uint8_t *mk = index_segment_term(s, mid, &ml, NULL);
        int c = memcmp(mk, key, ml < len ? ml : len);
        if (c < 0 || (c == 0 && ml < len)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void test_term_hints(void)
{
    const char *dir = test_tmpdir("seg-hints");
    char path[600];
    snprintf(path, sizeof path, "%s/seg-1", dir);
    index_builder *b = index_builder_new();
    REQUIRE(b);
    uint8_t k[INDEX_KEY_MAX];
    for (uint32_t d = 0; d < HINT_TERMS; d++) {
        char id[32], w[32];
        snprintf(id, sizeof id, "doc%05u", d);
        snprintf(w, sizeof w, "w%06u", 2 * d + 2);   /* odd numbers and w000000 are absent */
        REQUIRE(index_builder_doc(b, id, strlen(id), 1 + d) == HANU_OK);
        REQUIRE(index_builder_term(b, k, word_key(k, "", w)) == HANU_OK);
        REQUIRE(index_builder_text_length(b, "", 0, 1) == HANU_OK);
    }
    REQUIRE(index_builder_write(b, path) == HANU_OK);
    index_builder_free(b);
    index_segment *s;
    REQUIRE(index_segment_open(path, &s, NULL, 0) == HANU_OK);
    CHECK_EQ(index_segment_terms(s), HINT_TERMS);
    index_snapshot_segment one = { .seg = s };
    index_snapshot snap = { .nsegments = 1, .segments = &one };
    uint32_t keys = 2 * HINT_TERMS + 2, wrong = 0;
    uint32_t *order = malloc(keys * sizeof *order);
    REQUIRE(order);
    for (uint32_t i = 0; i < keys; i++) order[i] = i;
    for (int round = 0; round < 3; round++) {
        for (uint32_t i = keys - 1; i > 0; i--) {   /* shuffle */
            uint32_t j = (uint32_t)(next_rand() % (i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (uint32_t i = 0; i < keys; i++) {
            char w[32];
            snprintf(w, sizeof w, "w%06u", order[i]);   /* w000000 .. w040001 */
            size_t len = word_key(k, "", w);
            index_snapshot_term_prefetch(&snap, k, len);   /* a hint only: reads what the slot names */
            uint32_t want = reference_lower_bound(s, k, len);
            uint32_t got = index_segment_term_lower_bound(s, k, len);
            uint32_t found = index_segment_term_find(s, k, len);
            int present = order[i] >= 2 && order[i] <= 2 * HINT_TERMS && order[i] % 2 == 0;
            wrong += got != want;
            wrong += found != (present ? want : UINT32_MAX);
            if (present) wrong += want != order[i] / 2 - 1;
        }
    }
    CHECK_EQ(wrong, 0);
    free(order);
    index_segment_close(s);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_number_keys_sort_as_numbers);
    RUN(test_empty_segment);
    RUN(test_damage_is_refused);
    RUN(test_documents_extracted);
    RUN(test_id_order);
    RUN(test_words_both_ways_make_one_segment);
    RUN(test_impacts_and_version_1);
    RUN(test_impacts_of_mixed_tfs);
    RUN(test_term_hints);
    TEST_DONE();
}
