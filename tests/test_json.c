/*
 * test_json.c: the JSON module (src/json/json.h). Runs every JSONTestSuite
 * parsing case in tests/data/json/test_parsing through the scanner, the
 * validator and the DOM (y_ accepted, n_ rejected with a message, i_ either
 * way but all three agree), then unit tests for leaf paths, numbers, escapes,
 * the depth limit, duplicate keys, DOM spans, the writer and the _id helpers.
 * Run from the repository root.
 */
#include "json/json.h"
#include "test.h"

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

/* ---- helpers ---- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Leaves rendered as "path|type|value" lines into one string. */
typedef struct leaves {
    char text[4096];
    size_t len;
    int count;
    int last_depth, last_in_array;
} leaves;

static int collect(void *ctx, const json_leaf *l)
{
    leaves *c = ctx;
    char val[512];
    switch (l->type) {
    case JSON_STRING: snprintf(val, sizeof val, "s:%.*s", (int)l->str_len, l->str); break;
    case JSON_NUMBER:
        if (l->is_int) snprintf(val, sizeof val, "i:%lld", (long long)l->i64);
        else snprintf(val, sizeof val, "d:%.17g", l->num);
        break;
    case JSON_BOOL: snprintf(val, sizeof val, "b:%d", l->boolean); break;
    case JSON_NULL: snprintf(val, sizeof val, "null"); break;
    default: snprintf(val, sizeof val, "?"); break;
    }
    int n = snprintf(c->text + c->len, sizeof c->text - c->len, "%s%s%s=%s",
                     c->count ? " " : "", l->path, l->in_array ? "[]" : "", val);
    if (n > 0) c->len += (size_t)n;
    c->count++;
    c->last_depth = l->depth;
    c->last_in_array = l->in_array;
    return 0;
}

static int scan_str(const char *s, leaves *out, json_error *err)
{
    static uint8_t scratch[1 << 16];
    memset(out, 0, sizeof *out);
    return json_scan(s, strlen(s), NULL, scratch, sizeof scratch, collect, out, err);
}

static int valid(const char *s)
{
    json_error err;
    return json_validate(s, strlen(s), NULL, &err) == HANU_OK;
}

/* ---- the conformance suite ---- */

static int count_scalars(const json_value *v)
{
    if (v->type != JSON_ARRAY && v->type != JSON_OBJECT) return 1;
    int n = 0;
    for (size_t i = 0; i < v->u.kids.n; i++) n += count_scalars(&v->u.kids.items[i]);
    return n;
}

static int count_leaf(void *ctx, const json_leaf *l)
{
    (void)l;
    (*(int *)ctx)++;
    return 0;
}

/* One file through scan, validate and DOM with the given options: they must
 * agree (status and error offset); returns the scan status, *msg its message. */
static int run_case(const char *name, const char *in, size_t len, const json_opts *o, char *msg)
{
    size_t cap = json_scan_scratch_size(len);
    void *scratch = malloc(cap);
    json_error e1, e2, e3;
    int leaves_n = 0;
    int r1 = json_scan(in, len, o, scratch, cap, count_leaf, &leaves_n, &e1);
    int r2 = json_validate(in, len, o, &e2);
    json_doc *doc = NULL;
    int r3 = json_doc_parse(in, len, o, &doc, &e3);
    if (r1 != r2 || r1 != r3 || (r1 && (e1.offset != e2.offset || e1.offset != e3.offset))) {
        fprintf(stderr, "  %s: scan %d, validate %d, dom %d disagree\n", name, r1, r2, r3);
        CHECK(0);
    }
    if (r1 == 0 && doc) CHECK_EQ(count_scalars(json_doc_root(doc)), leaves_n);
    if (r1 && (!e1.msg[0] || e1.offset > len)) {
        fprintf(stderr, "  %s: error without message or offset\n", name);
        CHECK(0);
    }
    strcpy(msg, r1 ? e1.msg : "");
    json_doc_free(doc);
    free(scratch);
    return r1;
}

/* JSONTestSuite judges the RFC 8259 grammar, where duplicate names are only
 * a SHOULD NOT: it is run with allow_duplicate_keys, and once more with the
 * defaults, where the only y_ files refused must be the duplicate-key ones. */
static void test_json_suite(void)
{
    const char *dir = "tests/data/json/test_parsing";
    DIR *d = opendir(dir);
    REQUIRE(d != NULL);
    int y = 0, n = 0, i = 0, y_ok = 0, n_ok = 0, i_acc = 0, i_rej = 0, y_dup = 0;
    const json_opts grammar = { .allow_duplicate_keys = 1 };
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        if (strlen(name) < 3 || name[1] != '_') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        size_t len;
        char *buf = read_file(path, &len);
        if (!buf) { fprintf(stderr, "  cannot read %s\n", path); CHECK(0); continue; }
        /* exact-size copy so ASan catches any read past the end */
        char *in = malloc(len ? len : 1);
        memcpy(in, buf, len);
        free(buf);
        char msg[JSON_ERROR_MSG_MAX], msg2[JSON_ERROR_MSG_MAX];
        int r1 = run_case(name, in, len, &grammar, msg);
        int r2 = run_case(name, in, len, NULL, msg2);
        if (r2 != r1 && !(r1 == 0 && strstr(msg2, "duplicate key"))) {
            fprintf(stderr, "  %s: default options give %d (%s), grammar %d\n", name, r2, msg2, r1);
            CHECK(0);
        }
        if (name[0] == 'y') {
            y++;
            if (r1 == 0) y_ok++;
            else fprintf(stderr, "  %s rejected: %s\n", name, msg);
            if (r2 != 0) y_dup++;
        } else if (name[0] == 'n') {
            n++;
            if (r1 != 0) n_ok++;
            else fprintf(stderr, "  %s accepted\n", name);
        } else {
            i++;
            if (r1 == 0) i_acc++; else i_rej++;
        }
        free(in);
    }
    closedir(d);
    fprintf(stderr, "  suite: y %d/%d accepted, n %d/%d rejected, i %d run (%d accepted, %d rejected);"
            " with duplicate keys refused, %d y_ files are refused\n",
            y_ok, y, n_ok, n, i, i_acc, i_rej, y_dup);
    CHECK(y > 90 && n > 180 && i > 30);
    CHECK_EQ(y_ok, y);
    CHECK_EQ(n_ok, n);
    CHECK_EQ(y_dup, 2);     /* y_object_duplicated_key{,_and_value}.json */
}

/* ---- scanner ---- */

static void test_json_leaf_paths(void)
{
    leaves c;
    json_error err;
    CHECK_EQ(scan_str("{\"a\":{\"b\":{\"c\":1}},\"d\":\"x\"}", &c, &err), 0);
    CHECK(strcmp(c.text, "a.b.c=i:1 d=s:x") == 0);
    CHECK_EQ(c.last_depth, 1);

    CHECK_EQ(scan_str("{\"tags\":[\"red\",\"blue\"],\"n\":[[1,2],[3]]}", &c, &err), 0);
    CHECK(strcmp(c.text, "tags[]=s:red tags[]=s:blue n[]=i:1 n[]=i:2 n[]=i:3") == 0);

    CHECK_EQ(scan_str("{\"items\":[{\"name\":\"a\",\"q\":true},{\"name\":\"b\",\"q\":null}]}", &c, &err), 0);
    CHECK(strcmp(c.text, "items.name=s:a items.q=b:1 items.name=s:b items.q=null") == 0);

    CHECK_EQ(scan_str("[{\"b\":1},2]", &c, &err), 0);
    CHECK(strcmp(c.text, "b=i:1 []=i:2") == 0);

    CHECK_EQ(scan_str("\"top\"", &c, &err), 0);
    CHECK(strcmp(c.text, "=s:top") == 0);
    CHECK_EQ(c.last_depth, 0);

    /* a key path is unescaped; an empty key keeps its dot */
    CHECK_EQ(scan_str("{\"k\\u00e9y\":{\"\":{\"x\":false}}}", &c, &err), 0);
    CHECK(strcmp(c.text, "k\xc3\xa9y..x=b:0") == 0);

    /* empty containers have no leaves; the path is restored after them */
    CHECK_EQ(scan_str("{\"a\":{},\"b\":[],\"c\":{\"d\":[]},\"e\":1}", &c, &err), 0);
    CHECK(strcmp(c.text, "e=i:1") == 0);
    CHECK_EQ(scan_str("{\"a\":{\"long_key_here\":{\"z\":1}},\"b\":2}", &c, &err), 0);
    CHECK(strcmp(c.text, "a.long_key_here.z=i:1 b=i:2") == 0);

    /* spans point at the raw token */
    const char *doc = "{\"s\": \"a\\nb\" }";
    static uint8_t scratch[256];
    memset(&c, 0, sizeof c);
    CHECK_EQ(json_scan(doc, strlen(doc), NULL, scratch, sizeof scratch, collect, &c, &err), 0);
    CHECK(strcmp(c.text, "s=s:a\nb") == 0);
}

static int stop_at_second(void *ctx, const json_leaf *l)
{
    (void)l;
    return ++*(int *)ctx == 2 ? -100 : 0;
}

static void test_json_callback_stops_scan(void)
{
    const char *s = "[1,2,3]";
    uint8_t scratch[64];
    int n = 0;
    CHECK_EQ(json_scan(s, strlen(s), NULL, scratch, sizeof scratch, stop_at_second, &n, NULL), -100);
    CHECK_EQ(n, 2);
}

static void test_json_scratch_too_small(void)
{
    const char *s = "{\"abcdefgh\":{\"ijklmnop\":1}}";
    uint8_t scratch[16];
    leaves c;
    json_error err;
    memset(&c, 0, sizeof c);
    CHECK_EQ(json_scan(s, strlen(s), NULL, scratch, sizeof scratch, collect, &c, &err), HANU_ERR_NOMEM);
    CHECK(strstr(err.msg, "scratch") != NULL);
    size_t cap = json_scan_scratch_size(strlen(s));
    void *big = malloc(cap);
    memset(&c, 0, sizeof c);
    CHECK_EQ(json_scan(s, strlen(s), NULL, big, cap, collect, &c, &err), 0);
    free(big);
    /* without scratch the key table has no room; json_validate brings its own */
    CHECK_EQ(json_scan(s, strlen(s), NULL, NULL, 0, NULL, NULL, &err), HANU_ERR_NOMEM);
    CHECK_EQ(json_scan("[1,\"a\"]", 7, NULL, NULL, 0, NULL, NULL, &err), 0);
    CHECK_EQ(json_validate(s, strlen(s), NULL, &err), 0);
}

/* ---- numbers ---- */

static int first_number(const char *s, int *is_int, int64_t *i, double *d)
{
    leaves c;
    json_error err;
    int rc = scan_str(s, &c, &err);
    if (rc) return rc;
    json_doc *doc;
    rc = json_doc_parse(s, strlen(s), NULL, &doc, &err);
    if (rc) return rc;
    const json_value *v = json_doc_root(doc);
    *is_int = v->is_int;
    *i = v->u.num.i;
    *d = v->u.num.d;
    json_doc_free(doc);
    return 0;
}

static void test_json_numbers(void)
{
    int is_int;
    int64_t i;
    double d;
    CHECK_EQ(first_number("9223372036854775807", &is_int, &i, &d), 0);
    CHECK(is_int && i == INT64_MAX);
    CHECK_EQ(first_number("-9223372036854775808", &is_int, &i, &d), 0);
    CHECK(is_int && i == INT64_MIN);
    CHECK(d == -9223372036854775808.0);
    CHECK_EQ(first_number("9223372036854775808", &is_int, &i, &d), 0);
    CHECK(!is_int && d == 9223372036854775808.0);
    CHECK_EQ(first_number("-9223372036854775809", &is_int, &i, &d), 0);
    CHECK(!is_int && d == -9223372036854775808.0);
    CHECK_EQ(first_number("123456789012345678901234567890", &is_int, &i, &d), 0);
    CHECK(!is_int && d == 123456789012345678901234567890.0);
    CHECK_EQ(first_number("0", &is_int, &i, &d), 0);
    CHECK(is_int && i == 0 && d == 0 && !signbit(d));
    CHECK_EQ(first_number("-0", &is_int, &i, &d), 0);
    CHECK(is_int && i == 0 && signbit(d));
    CHECK_EQ(first_number("1e2", &is_int, &i, &d), 0);
    CHECK(!is_int && d == 100.0);
    CHECK_EQ(first_number("1.5", &is_int, &i, &d), 0);
    CHECK(!is_int && d == 1.5);
    CHECK_EQ(first_number("-1.25E-2", &is_int, &i, &d), 0);
    CHECK(d == -0.0125);
    CHECK_EQ(first_number("0.1", &is_int, &i, &d), 0);
    CHECK(d == 0.1);
    CHECK_EQ(first_number("0.30000000000000004", &is_int, &i, &d), 0);
    CHECK(d == 0.30000000000000004);
    CHECK_EQ(first_number("2.2250738585072014e-308", &is_int, &i, &d), 0);
    CHECK(d == DBL_MIN);
    CHECK_EQ(first_number("1.7976931348623157e308", &is_int, &i, &d), 0);
    CHECK(d == DBL_MAX);
    CHECK_EQ(first_number("4.9e-324", &is_int, &i, &d), 0);
    CHECK(d == 4.9e-324);
    CHECK_EQ(first_number("1e-400", &is_int, &i, &d), 0);
    CHECK(d == 0);
    CHECK_EQ(first_number("0.1000000000000000055511151231257827021181583404541015625", &is_int, &i, &d), 0);
    CHECK(d == 0.1);
    CHECK_EQ(first_number("[1.00000000000000011102230246251565404236316680908203125]", &is_int, &i, &d), 0);
    CHECK_EQ(first_number("0e+1", &is_int, &i, &d), 0);
    CHECK(d == 0);
    CHECK_EQ(first_number("123.456e-789", &is_int, &i, &d), 0);
    CHECK(d == 0);
    /* the fast path and strtod agree on many decimals */
    for (int k = 0; k < 2000; k++) {
        char s[64];
        snprintf(s, sizeof s, "%d.%03de%d", k * 7919 % 100000, k % 1000, k % 45 - 22);
        CHECK_EQ(first_number(s, &is_int, &i, &d), 0);
        if (d != strtod(s, NULL)) { fprintf(stderr, "  %s\n", s); CHECK(0); break; }
    }
    json_error err;
    CHECK_EQ(json_validate("1e400", 5, NULL, &err), HANU_ERR_INVALID);
    CHECK(strstr(err.msg, "out of range") != NULL);
    CHECK_EQ(json_validate("-1e99999999999", 14, NULL, &err), HANU_ERR_INVALID);
    CHECK(!valid("01"));
    CHECK(!valid("1."));
    CHECK(!valid(".5"));
    CHECK(!valid("1e"));
    CHECK(!valid("1e+"));
    CHECK(!valid("+1"));
    CHECK(!valid("-"));
    CHECK(!valid("0x10"));
    CHECK(!valid("NaN"));
    CHECK(!valid("Infinity"));
    CHECK(!valid("[1,]"));
}

/* ---- strings ---- */

static int first_string(const char *json, char *out, size_t cap, size_t *len)
{
    leaves c;
    json_error err;
    int rc = scan_str(json, &c, &err);
    if (rc) return rc;
    json_doc *doc;
    rc = json_doc_parse(json, strlen(json), NULL, &doc, &err);
    if (rc) return rc;
    const char *s;
    rc = json_as_string(json_doc_root(doc), &s, len);
    if (!rc && *len <= cap) memcpy(out, s, *len);
    json_doc_free(doc);
    return rc;
}

static void test_json_escapes(void)
{
    char s[64];
    size_t n;
    CHECK_EQ(first_string("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", s, sizeof s, &n), 0);
    CHECK(n == 12 && memcmp(s, "a\"b\\c/d\b\f\n\r\t", 12) == 0);
    CHECK_EQ(first_string("\"\\u00e9\\u20AC\"", s, sizeof s, &n), 0);
    CHECK(n == 5 && memcmp(s, "\xc3\xa9\xe2\x82\xac", 5) == 0);
    CHECK_EQ(first_string("\"\\ud83d\\ude00\"", s, sizeof s, &n), 0);
    CHECK(n == 4 && memcmp(s, "\xf0\x9f\x98\x80", 4) == 0);
    CHECK_EQ(first_string("\"\\uDBFF\\uDFFF\"", s, sizeof s, &n), 0);
    CHECK(n == 4 && memcmp(s, "\xf4\x8f\xbf\xbf", 4) == 0);
    CHECK_EQ(first_string("\"\\u0000x\"", s, sizeof s, &n), 0);
    CHECK(n == 2 && s[0] == 0 && s[1] == 'x');
    CHECK_EQ(first_string("\"\xf0\x9f\x98\x80 raw\"", s, sizeof s, &n), 0);
    CHECK(n == 8);

    json_error err;
    CHECK_EQ(json_validate("\"\\ud800\"", 8, NULL, &err), HANU_ERR_INVALID);
    CHECK(strstr(err.msg, "surrogate") != NULL);
    CHECK(!valid("\"\\udc00\""));
    CHECK(!valid("\"\\ud800\\u0041\""));
    CHECK(!valid("\"\\ud800\\ud800\""));
    CHECK(!valid("\"\\ud800x\""));
    CHECK(!valid("\"\\u12\""));
    CHECK(!valid("\"\\x\""));
    CHECK(!valid("\"\\'\""));
    CHECK(!valid("\"a\tb\""));          /* raw control character */
    CHECK(!valid("\"\x7f\"") == 0);     /* DEL is allowed raw */
    CHECK(!valid("\"abc"));
    /* UTF-8: overlongs, surrogates, above U+10FFFF, truncated, stray continuation */
    const char *bad[] = { "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xf0\x80\x80\xaf\"",
                          "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"",
                          "\"\xc3\"", "\"\x80\"", "\"\xe2\x82\"", "\"\xff\"" };
    for (size_t k = 0; k < HANU_ARRAY_LEN(bad); k++) {
        CHECK_EQ(json_validate(bad[k], strlen(bad[k]), NULL, &err), HANU_ERR_INVALID);
        CHECK(strcmp(err.msg, "invalid UTF-8 at byte 1") == 0);
    }
    CHECK(valid("\"\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\xef\xbf\xbf\""));
    CHECK_EQ(json_validate("{\"k\": \"0123456789abcdefghij\xc3\x28\"}", 31, NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "invalid UTF-8 at byte 27") == 0);
    CHECK_EQ(err.offset, 27);
}

/* ---- structure and errors ---- */

static void test_json_depth_limit(void)
{
    char buf[300];
    json_error err;
    for (int depth = 63; depth <= 66; depth++) {
        size_t n = 0;
        for (int k = 0; k < depth; k++) buf[n++] = '[';
        for (int k = 0; k < depth; k++) buf[n++] = ']';
        int rc = json_validate(buf, n, NULL, &err);
        if (depth <= 64) CHECK_EQ(rc, 0);
        else {
            CHECK_EQ(rc, HANU_ERR_TOO_LARGE);
            CHECK(strcmp(err.msg, "nesting deeper than 64 at byte 64") == 0);
            CHECK_EQ(err.offset, 64);
        }
    }
    json_opts o = { .max_depth = 2 };
    CHECK_EQ(json_validate("{\"a\":[1]}", 9, &o, &err), 0);
    CHECK_EQ(json_validate("{\"a\":[{}]}", 10, &o, &err), HANU_ERR_TOO_LARGE);
    CHECK(strcmp(err.msg, "nesting deeper than 2 at byte 6") == 0);
    json_doc *doc;
    CHECK_EQ(json_doc_parse("{\"a\":[{}]}", 10, &o, &doc, &err), HANU_ERR_TOO_LARGE);
    /* very deep input fails fast at the limit, no stack growth */
    size_t big = 1 << 20;
    char *deep = malloc(big);
    memset(deep, '[', big);
    CHECK_EQ(json_validate(deep, big, NULL, &err), HANU_ERR_TOO_LARGE);
    free(deep);
}

static void test_json_error_messages(void)
{
    json_error err;
    CHECK_EQ(json_validate("", 0, NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "unexpected end of input") == 0);
    CHECK_EQ(json_validate("{\"a\":[1,2", 9, NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "unexpected end of input") == 0);
    CHECK_EQ(err.offset, 9);
    CHECK_EQ(json_validate("{\"a\" 1}", 7, NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "unexpected character '1', expected ':' after a key at byte 5") == 0);
    CHECK_EQ(json_validate("[1 2]", 5, NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "unexpected character '2', expected ',' or ']' at byte 3") == 0);
    CHECK_EQ(json_validate("{} x", 4, NULL, &err), HANU_ERR_INVALID);
    CHECK(strstr(err.msg, "expected the end of the document at byte 3") != NULL);
    CHECK_EQ(json_validate("tru", 3, NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "unexpected end of input") == 0);
    CHECK_EQ(json_validate("\xef\xbb\xbf{}", 5, NULL, &err), HANU_ERR_INVALID);   /* no BOM */
    CHECK(strcmp(err.msg, "unexpected byte 0xEF, expected a value at byte 0") == 0);
    CHECK_EQ(json_validate("{'a':1}", 7, NULL, &err), HANU_ERR_INVALID);
    CHECK_EQ(json_validate("[\"a\x01\"]", 5, NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "control character 0x01 in string (must be escaped) at byte 3") == 0);
    CHECK(valid(" \t\r\n{ \"a\" : [ 1 , true , null ] } \n"));
    CHECK(!valid("{\"a\":1}\x0c"));
}

static void test_json_duplicate_keys(void)
{
    json_error err;
    const char *s = "{\"a\":1,\"b\":{\"a\":2},\"a\":3}";
    CHECK_EQ(json_validate(s, strlen(s), NULL, &err), HANU_ERR_INVALID);
    CHECK(strcmp(err.msg, "duplicate key \"a\" at byte 19") == 0);
    CHECK_EQ(err.offset, 19);
    /* compared after unescaping */
    s = "{\"a\\u00e9\":1,\"a\xc3\xa9\":2}";
    CHECK_EQ(json_validate(s, strlen(s), NULL, &err), HANU_ERR_INVALID);
    CHECK(strstr(err.msg, "duplicate key") != NULL);
    /* the same key in different objects is fine */
    CHECK(valid("{\"a\":{\"a\":{\"a\":1}},\"b\":[{\"a\":1},{\"a\":2}]}"));
    CHECK(valid("{\"a\":1,\"A\":2,\"a \":3,\"\":4}"));
    /* allowed on request */
    json_opts o = { .allow_duplicate_keys = 1 };
    s = "{\"a\":1,\"a\":2}";
    CHECK_EQ(json_validate(s, strlen(s), &o, &err), 0);
    json_doc *doc;
    CHECK_EQ(json_doc_parse(s, strlen(s), NULL, &doc, &err), HANU_ERR_INVALID);
    CHECK_EQ(json_doc_parse(s, strlen(s), &o, &doc, &err), 0);
    CHECK_EQ(json_get(json_doc_root(doc), "a")->u.num.i, 1);  /* first match */
    json_doc_free(doc);

    /* large objects (checked by sorting at close): the earliest repeat is named */
    hanu_buf b = { 0 };
    hanu_buf_append(&b, "{", 1);
    for (int k = 0; k < 5000; k++) {
        char m[32];
        int n = snprintf(m, sizeof m, "%s\"k%d\":%d", k ? "," : "", k, k);
        hanu_buf_append(&b, m, (size_t)n);
    }
    size_t before = b.len;
    hanu_buf_append(&b, ",\"k4000\":0,\"k17\":0}", 19);
    CHECK_EQ(json_validate((char *)b.data, b.len, NULL, &err), HANU_ERR_INVALID);
    CHECK(strncmp(err.msg, "duplicate key \"k4000\" at byte", 29) == 0);
    CHECK_EQ(err.offset, before + 1);
    CHECK_EQ(json_doc_parse((char *)b.data, b.len, NULL, &doc, &err), HANU_ERR_INVALID);
    CHECK_EQ(err.offset, before + 1);
    b.len = before;
    hanu_buf_append(&b, "}", 1);
    CHECK_EQ(json_validate((char *)b.data, b.len, NULL, &err), 0);
    CHECK_EQ(json_doc_parse((char *)b.data, b.len, NULL, &doc, &err), 0);
    CHECK_EQ(json_len(json_doc_root(doc)), 5000);
    CHECK_EQ(json_get(json_doc_root(doc), "k4999")->u.num.i, 4999);
    json_doc_free(doc);
    hanu_buf_free(&b);
}

/* ---- DOM ---- */

static void test_json_dom_spans(void)
{
    const char *body =
        "{\"ops\": [ {\"op\":\"put\",\"id\":\"u1\",\"doc\": {\"a\" : [1, 2.5],\"b\":\"x\\ty\"} },\n"
        "  {\"op\":\"delete\",\"id\":\"u2\"} ], \"n\": -7, \"ok\": true, \"z\": null}";
    json_doc *doc;
    json_error err;
    REQUIRE(json_doc_parse(body, strlen(body), NULL, &doc, &err) == 0);
    const json_value *root = json_doc_root(doc);
    CHECK_EQ(root->type, JSON_OBJECT);
    CHECK_EQ(root->start, 0);
    CHECK_EQ(root->end, strlen(body));
    const json_value *ops = json_get(root, "ops");
    REQUIRE(ops && ops->type == JSON_ARRAY);
    CHECK_EQ(json_len(ops), 2);
    const json_value *op0 = json_at(ops, 0);
    const char *s;
    size_t n;
    CHECK_EQ(json_as_string(json_get(op0, "op"), &s, &n), 0);
    CHECK(n == 3 && strcmp(s, "put") == 0);
    const json_value *sub = json_get(op0, "doc");
    REQUIRE(sub && sub->type == JSON_OBJECT);
    CHECK(sub->end - sub->start == strlen("{\"a\" : [1, 2.5],\"b\":\"x\\ty\"}"));
    CHECK(memcmp(body + sub->start, "{\"a\" : [1, 2.5],\"b\":\"x\\ty\"}", sub->end - sub->start) == 0);
    CHECK(strcmp(sub->key, "doc") == 0);
    const json_value *a = json_get(sub, "a");
    CHECK(a && strcmp(a->key, "a") == 0 && json_len(a) == 2);
    CHECK(memcmp(body + a->start, "[1, 2.5]", 8) == 0 && a->end - a->start == 8);
    double d;
    CHECK_EQ(json_as_double(json_at(a, 1), &d), 0);
    CHECK(d == 2.5);
    CHECK(json_at(a, 1)->key == NULL);
    CHECK(json_at(a, 2) == NULL);
    CHECK_EQ(json_as_string(json_get(sub, "b"), &s, &n), 0);
    CHECK(n == 3 && strcmp(s, "x\ty") == 0);
    const json_value *bv = json_get(sub, "b");
    CHECK(memcmp(body + bv->start, "\"x\\ty\"", 6) == 0 && bv->end - bv->start == 6);
    int64_t i;
    CHECK_EQ(json_as_int64(json_get(root, "n"), &i), 0);
    CHECK_EQ(i, -7);
    int bo;
    CHECK_EQ(json_as_bool(json_get(root, "ok"), &bo), 0);
    CHECK_EQ(bo, 1);
    CHECK_EQ(json_get(root, "z")->type, JSON_NULL);
    CHECK(json_get(root, "missing") == NULL);
    CHECK(json_get(json_get(root, "n"), "x") == NULL);
    CHECK_EQ(json_as_int64(json_at(a, 1), &i), HANU_ERR_INVALID);
    CHECK_EQ(json_as_string(json_get(root, "n"), &s, &n), HANU_ERR_INVALID);
    CHECK_EQ(json_as_string(NULL, &s, &n), HANU_ERR_INVALID);
    const json_value *op1 = json_at(ops, 1);
    CHECK(memcmp(body + op1->start, "{\"op\":\"delete\",\"id\":\"u2\"}", op1->end - op1->start) == 0);
    CHECK(json_doc_bytes(doc) > 0);
    CHECK(strcmp(json_type_name(JSON_ARRAY), "array") == 0);
    json_doc_free(doc);
    json_doc_free(NULL);

    /* a scalar root, and a failure leaves *out NULL */
    CHECK_EQ(json_doc_parse(" 42 ", 4, NULL, &doc, &err), 0);
    CHECK_EQ(json_doc_root(doc)->start, 1);
    CHECK_EQ(json_doc_root(doc)->end, 3);
    json_doc_free(doc);
    CHECK_EQ(json_doc_parse("[1,", 3, NULL, &doc, &err), HANU_ERR_INVALID);
    CHECK(doc == NULL);
}

/* ---- writer ---- */

static void test_json_writer_round_trip(void)
{
    hanu_buf out = { 0 };
    json_writer w;
    json_writer_init(&w, &out);
    char all[200];
    size_t n = 0;
    for (int c = 1; c < 128; c++) all[n++] = (char)c;
    memcpy(all + n, "\xc3\xa9\xf0\x9f\x98\x80\0z", 8);
    n += 8;
    const double ds[] = { 0.1, 1.0 / 3, 1e300, 5e-324, DBL_MAX, -0.0, 100.0, 123456789.125, 1e21, 1e-7 };
    json_write_object_begin(&w);
    json_write_key(&w, "s", 1);
    json_write_string(&w, all, n);
    json_write_key(&w, "k\"\n", 3);
    json_write_array_begin(&w);
    json_write_int64(&w, INT64_MIN);
    json_write_int64(&w, INT64_MAX);
    for (size_t k = 0; k < HANU_ARRAY_LEN(ds); k++) json_write_double(&w, ds[k]);
    json_write_bool(&w, 1);
    json_write_bool(&w, 0);
    json_write_null(&w);
    json_write_array_begin(&w);
    json_write_array_end(&w);
    json_write_object_begin(&w);
    json_write_object_end(&w);
    json_write_raw(&w, "{\"r\": 1}", 8);
    json_write_array_end(&w);
    json_write_object_end(&w);
    REQUIRE(json_writer_status(&w) == 0);

    json_doc *doc;
    json_error err;
    REQUIRE(json_doc_parse((char *)out.data, out.len, NULL, &doc, &err) == 0);
    const json_value *root = json_doc_root(doc);
    const char *s;
    size_t sl;
    CHECK_EQ(json_as_string(json_get(root, "s"), &s, &sl), 0);
    CHECK(sl == n && memcmp(s, all, n) == 0);
    const json_value *arr = json_getn(root, "k\"\n", 3);
    REQUIRE(arr && json_len(arr) == 2 + HANU_ARRAY_LEN(ds) + 6);
    CHECK_EQ(json_at(arr, 0)->u.num.i, INT64_MIN);
    CHECK_EQ(json_at(arr, 1)->u.num.i, INT64_MAX);
    for (size_t k = 0; k < HANU_ARRAY_LEN(ds); k++) {
        const json_value *v = json_at(arr, 2 + k);
        CHECK(v->type == JSON_NUMBER && !v->is_int);
        CHECK(memcmp(&v->u.num.d, &ds[k], sizeof(double)) == 0);
    }
    CHECK_EQ(json_at(arr, 2 + HANU_ARRAY_LEN(ds) + 5)->type, JSON_OBJECT);
    json_doc_free(doc);
    /* short forms and \u00XX */
    out.len = 0;
    CHECK_EQ(json_escape_string(&out, "a\"\\\n\r\t\b\f\x01\x1f/", 11), 0);
    const char *want = "\"a\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f/\"";
    CHECK(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0);
    /* shortest doubles */
    out.len = 0;
    json_writer_init(&w, &out);
    json_write_array_begin(&w);
    json_write_double(&w, 0.1);
    json_write_double(&w, 100);
    json_write_double(&w, 1.5e300);
    json_write_array_end(&w);
    CHECK(out.len == 20 && memcmp(out.data, "[0.1,100.0,1.5e+300]", 20) == 0);
    /* errors stick */
    out.len = 0;
    json_writer_init(&w, &out);
    json_write_array_begin(&w);
    CHECK_EQ(json_write_string(&w, "\xc3", 1), HANU_ERR_INVALID);
    CHECK_EQ(json_write_null(&w), HANU_ERR_INVALID);
    CHECK_EQ(json_writer_status(&w), HANU_ERR_INVALID);
    json_writer_init(&w, &out);
    CHECK_EQ(json_write_double(&w, NAN), HANU_ERR_INVALID);
    json_writer_init(&w, &out);
    CHECK_EQ(json_write_array_end(&w), HANU_ERR_INVALID);
    hanu_buf_free(&out);
}

/* ---- member ---- */

static void test_json_member_find(void)
{
    json_member m;
    char str[16];
    /* nested members do not count; the first top-level one wins wherever it is */
    const char *d = "{\"x\":{\"k\":\"inner\"},\"y\":[{\"k\":1}],\"k\":\"top\\u00e9\"}";
    CHECK_EQ(json_member_find(d, strlen(d), "k", 1, &m, str, sizeof str), 0);
    CHECK(m.found && m.type == JSON_STRING && m.str_len == 5 && memcmp(str, "top\xc3\xa9", 5) == 0);
    CHECK(m.brace == 0 && !m.empty && memcmp(d + m.start, "\"top", 4) == 0 && d[m.end - 1] == '"');
    CHECK_EQ(json_member_find(" {} ", 4, "k", 1, &m, NULL, 0), 0);
    CHECK(!m.found && m.empty && m.brace == 1);
    CHECK_EQ(json_member_find("{\"\\u006b\":[1]}", 14, "k", 1, &m, NULL, 0), 0);
    CHECK(m.found && m.type == JSON_ARRAY);
    CHECK_EQ(json_member_find("{\"k\":7}", 7, "k", 1, &m, NULL, 0), 0);
    CHECK(m.found && m.type == JSON_NUMBER && m.start == 5 && m.end == 6);
    /* the whole input is validated, also after the member */
    CHECK_EQ(json_member_find("{\"k\":1,\"k\":2}", 13, "k", 1, &m, NULL, 0), HANU_ERR_INVALID);
    CHECK_EQ(json_member_find("{\"k\":1,", 7, "k", 1, &m, NULL, 0), HANU_ERR_INVALID);
    CHECK_EQ(json_member_find("[1]", 3, "k", 1, &m, NULL, 0), HANU_ERR_INVALID);
}

int main(void)
{
    RUN(test_json_suite);
    RUN(test_json_leaf_paths);
    RUN(test_json_callback_stops_scan);
    RUN(test_json_scratch_too_small);
    RUN(test_json_numbers);
    RUN(test_json_escapes);
    RUN(test_json_depth_limit);
    RUN(test_json_error_messages);
    RUN(test_json_duplicate_keys);
    RUN(test_json_dom_spans);
    RUN(test_json_writer_round_trip);
    RUN(test_json_member_find);
    TEST_DONE();
}
