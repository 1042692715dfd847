/*
 * test_query_text.c: the tokenizer (src/text/text.h), the search-query
 * parser and BM25 (src/query/query.h). Tokens are compared as exact lists;
 * BM25 scores against values worked out by hand on a three-document corpus.
 */
#include "query/query.h"
#include "text/text.h"
#include "test.h"

#include <dirent.h>
#include <math.h>

typedef struct token_list {
    char text[1024];
    size_t len;
} token_list;

static int add_token(void *ctx, const text_token *t)
{
    token_list *l = ctx;
    int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s%s@%u", l->len ? " " : "", t->bytes,
                     (unsigned)t->position);
    if (n > 0) l->len += (size_t)n;
    return 0;
}

/* Tokens of s as "tok@pos tok@pos", or "error N". */
static void tokens_of(const char *s, size_t len, char *out, size_t cap, uint32_t *n_pos)
{
    token_list l = { .len = 0 };
    l.text[0] = '\0';
    int rc = text_tokenize(s, len, add_token, &l, n_pos);
    if (rc) snprintf(out, cap, "error %d", rc);
    else snprintf(out, cap, "%s", l.text);
}

static void expect_tokens(const char *s, const char *want)
{
    char got[1024];
    tokens_of(s, strlen(s), got, sizeof got, NULL);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "  tokens of \"%s\"\n    want %s\n    got  %s\n", s, want, got);
        test_current_failed = 1;
    }
}

static void test_tokenize_words(void)
{
    expect_tokens("Hello, World!  hello", "hello@0 world@1 hello@2");
    expect_tokens("Don't stop: 3.14 and 1,000 in the U.S.A. now", "don't@0 stop@1 3.14@2 and@3 1,000@4 in@5 the@6 u.s.a@7 now@8");
    expect_tokens("'quoted' end. 3. .5 a.1", "quoted@0 end@1 3@2 5@3 a@4 1@5");
    expect_tokens("e-mail x_y snake_case", "e@0 mail@1 x_y@2 snake_case@3");
    expect_tokens("", "");
    expect_tokens(" \t--!! ", "");
    expect_tokens("I \xe2\x9d\xa4 tea \xf0\x9f\x8d\xb5!", "i@0 tea@1");
}

static void test_tokenize_unicode(void)
{
    /* case folding, NFKC and composition: one token for every spelling */
    expect_tokens("\xc3\x89" "COLE \xc3\xa9" "cole e\xcc\x81" "cole", "\xc3\xa9" "cole@0 \xc3\xa9" "cole@1 \xc3\xa9" "cole@2");
    expect_tokens("caf\xc3\xa9 cafe", "caf\xc3\xa9@0 cafe@1");                 /* accents kept */
    expect_tokens("Stra\xc3\x9f" "e STRASSE", "strasse@0 strasse@1");          /* ß folds to ss */
    expect_tokens("\xef\xac\x81ne", "fine@0");                                   /* the ligature ﬁ */
    expect_tokens("\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3", "abc@0");             /* full-width ABC */
    expect_tokens("\xce\xa3\xce\x8a\xce\xa3\xce\xa5\xce\xa6\xce\x9f\xce\xa3",  /* ΣΊΣΥΦΟΣ */
                  "\xcf\x83\xce\xaf\xcf\x83\xcf\x85\xcf\x86\xce\xbf\xcf\x83@0");
    expect_tokens("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e ok", "\xe6\x97\xa5@0 \xe6\x9c\xac@1 \xe8\xaa\x9e@2 ok@3");
    expect_tokens("soft\xc2\xad" "hyphen", "softhyphen@0");                     /* default ignorable dropped */
    expect_tokens("\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd0\x9c\xd0\xb8\xd1\x80",
                  "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82@0 \xd0\xbc\xd0\xb8\xd1\x80@1");
}

static void test_tokenize_limits_and_errors(void)
{
    char s[200], got[1024];
    uint32_t n_pos = 0;
    /* 64 bytes is a token, 65 is dropped, but its position is used */
    memset(s, 0, sizeof s);
    strcpy(s, "x ");
    memset(s + 2, 'a', 65);
    strcat(s, " y ");
    memset(s + strlen(s), 'b', 64);
    tokens_of(s, strlen(s), got, sizeof got, &n_pos);
    char want[200];
    snprintf(want, sizeof want, "x@0 y@2 %.64s@3", s + strlen(s) - 64);
    CHECK(strcmp(got, want) == 0);
    CHECK_EQ(n_pos, 4);
    /* invalid UTF-8 is refused; a NUL is a separator */
    tokens_of("ab\xff", 3, got, sizeof got, NULL);
    CHECK(strcmp(got, "error -7") == 0);
    tokens_of("ab\0cd", 5, got, sizeof got, &n_pos);
    CHECK(strcmp(got, "ab@0 cd@1") == 0);
    CHECK_EQ(n_pos, 2);
}

/* ---- search queries ---- */

static void query_text(const char *q, char *out, size_t cap)
{
    search_query sq;
    query_error err = { "" };
    int rc = search_query_parse(q, strlen(q), &sq, &err);
    if (rc) { snprintf(out, cap, "error %d %s", rc, err.msg); return; }
    size_t len = 0;
    for (size_t i = 0; i < sq.n; i++) {
        const search_clause *c = &sq.clauses[i];
        const char *occ = c->occur == SEARCH_MUST ? "+" : c->occur == SEARCH_MUST_NOT ? "-" : "";
        len += (size_t)snprintf(out + len, cap - len, "%s%s%s", i ? " " : "", occ, c->n_tokens > 1 ? "\"" : "");
        for (uint32_t t = 0; t < c->n_tokens; t++) {
            CHECK_EQ(strlen(c->tokens[t]), c->lens[t]);
            len += (size_t)snprintf(out + len, cap - len, "%s%s", t ? " " : "", c->tokens[t]);
        }
        if (c->n_tokens > 1) len += (size_t)snprintf(out + len, cap - len, "\"");
    }
    search_query_free(&sq);
}

static void expect_query(const char *q, const char *want)
{
    char got[1024];
    query_text(q, got, sizeof got);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "  q %s\n    want %s\n    got  %s\n", q, want, got);
        test_current_failed = 1;
    }
}

static void test_search_query(void)
{
    expect_query("quick +Brown -fox \"lazy  DOG\" +\"Big Cat\" -\"x y\" e-mail -- !! \"\"",
                 "quick +brown -fox \"lazy dog\" +\"big cat\" -\"x y\" \"e mail\"");
    expect_query("  caf\xc3\xa9\t+\"one\"  ", "caf\xc3\xa9 +one");
    expect_query("a+b c-d", "\"a b\" \"c d\"");      /* signs count only in front */
    expect_query("\"unterminated", "error -7 q: unterminated phrase at byte 0");
    expect_query("ok +\"never closed", "error -7 q: unterminated phrase at byte 3");
    expect_query("-only -not", "error -7 q: no words to search for");
    expect_query("", "error -7 q: no words to search for");
    expect_query("-- ++ \"...\"", "error -7 q: no words to search for");
    expect_query("w \"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\"",
                 "error -8 q: phrase at byte 2 has more than 16 words");

    char big[8192];
    size_t len = 0;
    for (int i = 0; i <= SEARCH_MAX_CLAUSES; i++) len += (size_t)snprintf(big + len, sizeof big - len, "w%d ", i);
    expect_query(big, "error -8 q: more than 64 words and phrases");
    memset(big, 'a', SEARCH_MAX_QUERY_BYTES + 1);
    big[SEARCH_MAX_QUERY_BYTES + 1] = '\0';
    expect_query(big, "error -8 q: longer than 4096 bytes");
    search_query sq;
    CHECK_EQ(search_query_parse("ab\xc3", 3, &sq, NULL), HANU_ERR_INVALID);
}

/* ---- BM25 ---- */

/* Corpus (tokenized by text_tokenize): N = 3, total length 4 + 3 + 7 = 14, avgdl = 14/3.
 *   D1 "The quick brown fox"              dl 4  quick 1
 *   D2 "the lazy DOG"                     dl 3  dog 1
 *   D3 "The quick dog jumps over the dog" dl 7  quick 1, dog 2
 * Query "quick dog": df(quick) = df(dog) = 2, so both terms have
 *   idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.4700036292457356
 * norm(dl) = k1 * (1 - b + b * dl / avgdl) = 1.2 * (0.25 + 0.75 * dl * 3 / 14):
 *   D1: 1.2 * (0.25 + 0.6428571) = 1.0714286
 *   D2: 1.2 * (0.25 + 0.4821429) = 0.8785714
 *   D3: 1.2 * (0.25 + 1.125)     = 1.65
 * score = idf * tf * 2.2 / (tf + norm):
 *   D1 = 0.47000363 * 2.2 / 2.0714286                           = 0.4991762683
 *   D2 = 0.47000363 * 2.2 / 1.8785714                           = 0.5504225012
 *   D3 = 0.47000363 * 2.2 / 2.65 + 0.47000363 * 4.4 / 3.65      = 0.3901916922 + 0.5665797174
 *                                                                = 0.9567714097
 * And the idf of "the" (df 3): ln(1 + 0.5 / 3.5) = 0.1335313926. */
static const char *const corpus[] = { "The quick brown fox", "the lazy DOG", "The quick dog jumps over the dog" };

typedef struct term_count {
    const char *term;
    uint32_t tf;
} term_count;

static int count_term(void *ctx, const text_token *t)
{
    term_count *tc = ctx;
    tc->tf += strcmp(t->bytes, tc->term) == 0;
    return 0;
}

static void test_bm25_hand_computed(void)
{
    CHECK(fabs(bm25_score(1, 10, 10, 3, 2) - log(1.6)) < 1e-12);     /* tf 1 at dl = avgdl: the idf itself */
    CHECK(fabs(log(1.0 + 0.5 / 3.5) - 0.1335313926) < 1e-10);
    CHECK_EQ(bm25_score(0, 4, 4, 3, 2), 0);
    CHECK_EQ(bm25_score(1, 4, 4, 0, 0), 0);

    search_query sq;
    REQUIRE(search_query_parse("quick dog", 9, &sq, NULL) == 0);
    REQUIRE(sq.n == 2);
    uint32_t dl[3], total = 0;
    for (int d = 0; d < 3; d++) {
        REQUIRE(text_tokenize(corpus[d], strlen(corpus[d]), NULL, NULL, &dl[d]) == 0);
        total += dl[d];
    }
    CHECK_EQ(total, 14);
    double avgdl = total / 3.0;
    const double want[3] = { 0.4991762683, 0.5504225012, 0.9567714097 };
    for (int d = 0; d < 3; d++) {
        double score = 0;
        for (size_t c = 0; c < sq.n; c++) {
            uint64_t df = 0;
            for (int e = 0; e < 3; e++) {
                term_count tc = { sq.clauses[c].tokens[0], 0 };
                text_tokenize(corpus[e], strlen(corpus[e]), count_term, &tc, NULL);
                df += tc.tf > 0;
            }
            term_count tc = { sq.clauses[c].tokens[0], 0 };
            text_tokenize(corpus[d], strlen(corpus[d]), count_term, &tc, NULL);
            score += bm25_score(tc.tf, dl[d], avgdl, 3, df);
        }
        if (fabs(score - want[d]) > 1e-9) {
            fprintf(stderr, "  D%d: score %.10f, want %.10f\n", d + 1, score, want[d]);
            test_current_failed = 1;
        }
    }
    search_query_free(&sq);
}

/* search_eval over the same corpus as JSON documents, then phrases, exclusions and fields. */
static void expect_scores(const char *q, const char *const *docs_json, size_t n, const char *const *fields,
                          size_t n_fields, const double *want)
{
    json_doc *d[8];
    const json_value *roots[8];
    double got[8];
    for (size_t i = 0; i < n; i++) {
        if (json_doc_parse(docs_json[i], strlen(docs_json[i]), NULL, &d[i], NULL) != 0) abort();
        roots[i] = json_doc_root(d[i]);
    }
    search_query sq;
    REQUIRE(search_query_parse(q, strlen(q), &sq, NULL) == 0);
    CHECK_EQ(search_eval(&sq, fields, n_fields, roots, n, got), 0);
    for (size_t i = 0; i < n; i++) {
        if (fabs(got[i] - want[i]) > 1e-9) {
            fprintf(stderr, "  q %s doc %zu: score %.10f, want %.10f\n", q, i, got[i], want[i]);
            test_current_failed = 1;
        }
        json_doc_free(d[i]);
    }
    search_query_free(&sq);
}

static void test_search_eval(void)
{
    static const char *const docs3[] = {
        "{\"_id\":\"quick\",\"title\":\"The quick brown fox\"}",
        "{\"_id\":\"dog\",\"title\":\"the lazy DOG\"}",
        "{\"_id\":\"x\",\"title\":\"The quick dog\",\"more\":[\"jumps over\",{\"t\":\"the dog\"}]}",
    };
    /* D3's text is three values, 3 + 2 + 2 = 7 tokens, as in the hand-computed corpus; _id is not text */
    expect_scores("quick dog", docs3, 3, NULL, 0, (const double[]){ 0.4991762683, 0.5504225012, 0.9567714097 });
    expect_scores("+dog", docs3, 3, NULL, 0, (const double[]){ -1, 0.5504225012, 0.5665797174 });
    expect_scores("-quick dog", docs3, 3, NULL, 0, (const double[]){ -1, 0.5504225012, -1 });
    expect_scores("+quick -fox dog", docs3, 3, NULL, 0, (const double[]){ -1, -1, 0.9567714097 });
    /* a phrase: tf = its occurrences, idf = the sum of its words' (2 ln 1.6): 2 * 0.47000363 * 2.2 / 2.65 */
    expect_scores("\"quick dog\"", docs3, 3, NULL, 0, (const double[]){ -1, -1, 0.7803833844 });
    expect_scores("\"dog quick\"", docs3, 3, NULL, 0, (const double[]){ -1, -1, -1 });
    /* phrases do not join two values: "over the" spans "jumps over" and "the dog" */
    expect_scores("\"over the\"", docs3, 3, NULL, 0, (const double[]){ -1, -1, -1 });

    /* fields: only the text at or below "b"; N = 2, df = 1, dl 1 and 0, avgdl 0.5:
     * ln(1 + 1.5 / 1.5) * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 1 / 0.5)) = 0.4919109023 */
    static const char *const docs2[] = { "{\"t\":\"red\",\"b\":{\"c\":\"blue\"}}", "{\"t\":\"blue\",\"bb\":\"blue\"}" };
    static const char *const only_b[] = { "b" };
    expect_scores("blue", docs2, 2, only_b, 1, (const double[]){ 0.4919109023, -1 });
    /* only "t": "red" and "blue", dl = avgdl = 1, each word df 1: the idf alone, ln 2 */
    static const char *const only_t[] = { "t" };
    expect_scores("blue red", docs2, 2, only_t, 1, (const double[]){ 0.6931471806, 0.6931471806 });

    /* text below a path longer than any field can name still counts when no fields are given */
    char deep[400];
    snprintf(deep, sizeof deep, "{\"t\":\"x\",\"%0300d\":{\"s\":\"deep\"}}", 0);
    const char *docs_deep[] = { deep, "{\"t\":\"y\"}" };
    expect_scores("deep", docs_deep, 2, NULL, 0, (const double[]){ 0.6931471806 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 1.5)), -1 });
    expect_scores("deep", docs_deep, 2, only_t, 1, (const double[]){ -1, -1 });
}

/* ---- the ASCII fast path against the definition ---- */

/* Every token with its position, the count of calls, and a stop after `stop` tokens. */
typedef struct token_log {
    hanu_buf text;
    size_t calls, stop;
} token_log;

static int log_token(void *ctx, const text_token *t)
{
    token_log *l = ctx;
    char pos[16];
    int n = snprintf(pos, sizeof pos, "@%u|", (unsigned)t->position);
    if (strlen(t->bytes) != t->len || t->len == 0 || t->len > TEXT_MAX_TOKEN_BYTES) return 99;
    if (hanu_buf_append(&l->text, t->bytes, t->len) || hanu_buf_append(&l->text, pos, (size_t)n)) return 98;
    return ++l->calls == l->stop ? 7 : 0;
}

static void append_cp(hanu_buf *b, uint32_t c)
{
    uint8_t u[4];
    size_t n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (n == 1) u[0] = (uint8_t)c;
    else if (n == 2) { u[0] = (uint8_t)(0xC0 | c >> 6); u[1] = (uint8_t)(0x80 | (c & 0x3F)); }
    else if (n == 3) { u[0] = (uint8_t)(0xE0 | c >> 12); u[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F)); u[2] = (uint8_t)(0x80 | (c & 0x3F)); }
    else { u[0] = (uint8_t)(0xF0 | c >> 18); u[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F)); u[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F)); u[3] = (uint8_t)(0x80 | (c & 0x3F)); }
    REQUIRE(hanu_buf_append(b, u, n) == 0);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Random text: mostly ASCII (every byte 0-127 can occur), and code points
 * where folding is not the identity: combining marks after ASCII letters,
 * compatibility forms, case pairs beyond ASCII, ignorables, ideographs,
 * Hangul jamo that compose, the mid-word characters; now and then a byte
 * that is not UTF-8. */
static void random_text(uint64_t *rng, hanu_buf *b, size_t chars)
{
    static const uint32_t special[] = {
        0x0300, 0x0301, 0x0308, 0x0327, 0x0338, 0x0345, 0x05B0, 0x093C, 0x1DCE, 0x20D2, 0xFE20,   /* marks */
        0x00C9, 0x00E9, 0x00DF, 0x1E9E, 0x0130, 0x0131, 0x017F, 0x212A, 0x212B, 0x2126, 0x00B5,
        0xFB01, 0xFB00, 0xFF21, 0xFF41, 0xFF10, 0x2460, 0x00BD, 0x00B2, 0x2163, 0x3392, 0x1E9B,
        0x03A3, 0x03C2, 0x0390, 0x1F88, 0x0587, 0x0149, 0x01F0, 0x1E96,
        0x00AD, 0x200B, 0x200D, 0x2060, 0xFEFF, 0x034F, 0x180B, 0xE0001,                      /* ignorable */
        0x2019, 0x2018, 0x00A0, 0x2003, 0x3000, 0x2024, 0xFE52, 0xFF0E, 0xFF0C, 0xFF07,       /* mid/space */
        0x65E5, 0x672C, 0x3042, 0x30AB, 0x3099, 0x309A, 0xFF76, 0xF900, 0x2F00, 0x20000,        /* CJK, kana */
        0x1100, 0x1161, 0x11A8, 0xAC00, 0xD7A3, 0x3131,                                        /* Hangul */
        0x0410, 0x0430, 0x0660, 0x0966, 0x1F600, 0x2764, 0xFE0F, 0x1F3FB,                     /* more */
    };
    static const char ascii_common[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789   ..,,''_-";
    for (size_t i = 0; i < chars; i++) {
        uint64_t r = rng_next(rng);
        uint32_t pick = (uint32_t)(r % 100);
        if (pick < 60) append_cp(b, (uint8_t)ascii_common[(r >> 8) % (sizeof ascii_common - 1)]);
        else if (pick < 70) append_cp(b, (uint32_t)((r >> 8) % 128));
        else if (pick < 97) append_cp(b, special[(r >> 8) % (sizeof special / sizeof special[0])]);
        else if (pick < 99) append_cp(b, 0x80 + (uint32_t)((r >> 8) % 0x2F000));   /* any BMP/SMP code point */
        else {
            static const uint8_t bad[][2] = { { 0xFF, 0 }, { 0x80, 0 }, { 0xC3, 0 }, { 0xE6, 0x97 }, { 0xC0, 0xAF } };
            const uint8_t *x = bad[(r >> 8) % 5];
            REQUIRE(hanu_buf_append(b, x, x[1] ? 2 : 1) == 0);
        }
    }
}

static void expect_same_as_reference(const uint8_t *s, size_t len, size_t stop)
{
    token_log fast = { .stop = stop }, ref = { .stop = stop };
    uint32_t fast_pos = 12345, ref_pos = 54321;
    int fast_rc = text_tokenize((const char *)s, len, log_token, &fast, &fast_pos);
    int ref_rc = text_tokenize_reference((const char *)s, len, log_token, &ref, &ref_pos);
    int same = fast_rc == ref_rc && fast_pos == ref_pos && fast.calls == ref.calls &&
               fast.text.len == ref.text.len &&
               (fast.text.len == 0 || memcmp(fast.text.data, ref.text.data, fast.text.len) == 0);
    if (!same) {
        fprintf(stderr, "  text of %zu bytes:", len);
        for (size_t i = 0; i < len; i++) fprintf(stderr, " %02x", s[i]);
        fprintf(stderr, "\n    reference rc %d positions %u: %.*s\n    fast      rc %d positions %u: %.*s\n",
                ref_rc, ref_pos, (int)ref.text.len, (const char *)ref.text.data,
                fast_rc, fast_pos, (int)fast.text.len, (const char *)fast.text.data);
        test_current_failed = 1;
    }
    hanu_buf_free(&fast.text);
    hanu_buf_free(&ref.text);
}

static void test_tokenize_fast_path_differential(void)
{
    /* every ASCII byte alone, and each before and after a combining acute accent */
    for (uint32_t c = 0; c < 128; c++) {
        uint8_t one[4] = { (uint8_t)c, 0xCC, 0x81, (uint8_t)c };
        expect_same_as_reference(one, 1, 0);
        expect_same_as_reference(one, 3, 0);
        expect_same_as_reference(one, 4, 0);
        expect_same_as_reference(one + 1, 3, 0);
    }
    uint64_t rng = 0x7e57ab1e;
    hanu_buf b = { 0 };
    size_t invalid = 0, tokens = 0;
    for (int round = 0; round < 20000 && !test_current_failed; round++) {
        hanu_buf_reset(&b);
        uint64_t r = rng_next(&rng);
        size_t chars = round % 100 == 0 ? 600 + r % 2000 : r % 40;   /* some past the stack buffer */
        random_text(&rng, &b, chars);
        size_t stop = round % 7 == 0 ? 1 + (r >> 32) % 4 : 0;      /* a callback that stops */
        expect_same_as_reference(b.data, b.len, stop);
        if (text_tokenize((const char *)b.data, b.len, NULL, NULL, NULL) == HANU_ERR_INVALID) invalid++;
        uint32_t n = 0;
        text_tokenize((const char *)b.data, b.len, NULL, NULL, &n);
        tokens += n;
    }
    hanu_buf_free(&b);
    /* the corpus exercised both outcomes */
    CHECK(invalid > 500);
    CHECK(invalid < 15000);
    CHECK(tokens > 20000);
}

/* Text with no byte above 0x7F takes a path of its own (cut from the text as it
 * is, folded while cut): every ASCII byte, runs of word characters around the
 * token limit, the mid-word characters between letters and digits, upper case. */
static void test_tokenize_ascii_path_differential(void)
{
    uint64_t rng = 0xa5c11;
    hanu_buf b = { 0 };
    static const char parts[] = "aZ9_'.,- \t\n";
    for (int round = 0; round < 20000 && !test_current_failed; round++) {
        hanu_buf_reset(&b);
        uint64_t r = rng_next(&rng);
        size_t chars = round % 50 == 0 ? 200 + r % 3000 : r % 80;
        for (size_t i = 0; i < chars; i++) {
            uint64_t x = rng_next(&rng);
            uint8_t c;
            if (x % 4 == 0) c = (uint8_t)((x >> 8) % 128);
            else if (x % 4 == 1) c = (uint8_t)parts[(x >> 8) % (sizeof parts - 1)];
            else c = (uint8_t)("abcXYZ0123"[(x >> 8) % 10]);
            if (x % 97 == 0)   /* a run around the 64-byte limit */
                for (size_t k = 0, m = 60 + (x >> 16) % 8; k < m; k++) REQUIRE(hanu_buf_append(&b, "Q", 1) == 0);
            REQUIRE(hanu_buf_append(&b, &c, 1) == 0);
        }
        expect_same_as_reference(b.data, b.len, round % 9 == 0 ? 1 + r % 3 : 0);
    }
    hanu_buf_free(&b);
}

/* Every file of the JSON conformance suite, taken as text, both ways. */
static void test_tokenize_json_suite_differential(void)
{
    const char *dir = "tests/data/json/test_parsing";
    DIR *d = opendir(dir);
    REQUIRE(d != NULL);
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        REQUIRE(f != NULL);
        uint8_t buf[65536];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        expect_same_as_reference(buf, n, 0);
        expect_same_as_reference((const uint8_t *)e->d_name, strlen(e->d_name), 0);
        files++;
    }
    closedir(d);
    CHECK(files > 300);
}

int main(void)
{
    RUN(test_tokenize_words);
    RUN(test_tokenize_unicode);
    RUN(test_tokenize_limits_and_errors);
    RUN(test_tokenize_fast_path_differential);
    RUN(test_tokenize_ascii_path_differential);
    RUN(test_tokenize_json_suite_differential);
    RUN(test_search_query);
    RUN(test_bm25_hand_computed);
    RUN(test_search_eval);
    TEST_DONE();
}
