/*
 * test_docs_update.c: the update engine (docs_update.c) against expected
 * documents written out by hand: every operator, nested and missing paths,
 * arrays, type errors with their exact messages, $rename's edge cases, $push
 * with $each/$slice/$position, $addToSet duplicates, $pop, $currentDate, the
 * "_id" rule, and RFC 7396's merge patch on every example of its Appendix A.
 */
#include "test.h"
#include "docs/docs.h"

#define NOW_MS 1764756000123ull   /* 2025-12-03T10:00:00.123Z */

/* Applies update (operators) to doc: 1 when it gives want, or fails with the
   message want_err (then want is NULL). */
static int upd_kind(int kind, const char *doc, const char *update, const char *want, const char *want_err)
{
    docs_update *u;
    docs_error e = { 0 };
    hanu_buf out = {0};
    int ok = 0, changed = -1;
    int rc = docs_update_parse(update, strlen(update), kind, &u, &e);
    if (rc == HANU_OK) {
        rc = docs_update_apply(u, doc, strlen(doc), NOW_MS, &out, &changed, &e);
        docs_update_free(u);
    }
    if (want) {
        ok = rc == HANU_OK && out.len == strlen(want) && !memcmp(out.data, want, out.len);
        if (!ok) fprintf(stderr, "    %s on %s: got rc %d \"%.*s\" (%s), want %s\n", update, doc, rc, (int)out.len,
                         out.data ? (const char *)out.data : "", rc ? e.message : "", want);
    } else {
        ok = rc == HANU_ERR_INVALID && e.status == 400 && !strcmp(e.code, "invalid_update") && out.len == 0 &&
             (!want_err[0] || !strcmp(e.message, want_err));
        if (!ok) fprintf(stderr, "    %s on %s: got rc %d \"%s\" (%s), want error \"%s\"\n", update, doc, rc,
                         rc ? e.message : "", rc ? (e.code ? e.code : "") : "", want_err);
    }
    hanu_buf_free(&out);
    return ok;
}

static int upd(const char *doc, const char *update, const char *want)
{
    return upd_kind(DOCS_UPDATE_OPERATORS, doc, update, want, NULL);
}

static int upd_err(const char *doc, const char *update, const char *err)
{
    return upd_kind(DOCS_UPDATE_OPERATORS, doc, update, NULL, err);
}

static void test_set_unset(void)
{
    CHECK(upd("{\"_id\":\"a\",\"x\":1}", "{\"$set\":{\"x\":2,\"y\":\"s\"}}", "{\"_id\":\"a\",\"x\":2,\"y\":\"s\"}"));
    /* nested, missing objects on the way are made */
    CHECK(upd("{\"_id\":\"a\"}", "{\"$set\":{\"a.b.c\":true}}", "{\"_id\":\"a\",\"a\":{\"b\":{\"c\":true}}}"));
    CHECK(upd("{\"_id\":\"a\",\"a\":{\"k\":1}}", "{\"$set\":{\"a.b\":[1,{\"z\":null}]}}",
              "{\"_id\":\"a\",\"a\":{\"k\":1,\"b\":[1,{\"z\":null}]}}"));
    /* array indexes */
    CHECK(upd("{\"_id\":\"a\",\"a\":[{\"b\":1},{\"b\":2}]}", "{\"$set\":{\"a.1.b\":5}}",
              "{\"_id\":\"a\",\"a\":[{\"b\":1},{\"b\":5}]}"));
    CHECK(upd("{\"_id\":\"a\",\"a\":[1]}", "{\"$set\":{\"a.3\":4}}", "{\"_id\":\"a\",\"a\":[1,null,null,4]}"));
    CHECK(upd("{\"_id\":\"a\",\"a\":[1]}", "{\"$set\":{\"a.1.b\":4}}", "{\"_id\":\"a\",\"a\":[1,{\"b\":4}]}"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":[1]}", "{\"$set\":{\"a.x\":4}}",
                  "$set of \"a.x\": \"a\" is an array and \"x\" is not an index"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":{\"b\":\"s\"}}", "{\"$set\":{\"a.b.c\":1}}",
                  "$set of \"a.b.c\": \"a.b\" is a string, not an object"));
    /* numbers keep their text when untouched */
    CHECK(upd("{\"_id\":\"a\",\"n\":1.50,\"m\":1e2}", "{\"$set\":{\"k\":2.50}}", "{\"_id\":\"a\",\"n\":1.50,\"m\":1e2,\"k\":2.50}"));
    CHECK(upd("{ \"_id\" : \"a\" , \"x\" : 1 }", "{\"$unset\":{\"x\":\"\",\"missing\":1,\"q.r\":1}}", "{\"_id\":\"a\"}"));
    CHECK(upd("{\"_id\":\"a\",\"a\":{\"b\":1,\"c\":2}}", "{\"$unset\":{\"a.b\":true}}", "{\"_id\":\"a\",\"a\":{\"c\":2}}"));
    CHECK(upd("{\"_id\":\"a\",\"a\":[1,2,3]}", "{\"$unset\":{\"a.1\":1}}", "{\"_id\":\"a\",\"a\":[1,null,3]}"));
    CHECK(upd("{\"_id\":\"a\",\"a\":5}", "{\"$unset\":{\"a.b\":1}}", "{\"_id\":\"a\",\"a\":5}"));
}

static void test_inc_mul(void)
{
    CHECK(upd("{\"_id\":\"a\",\"n\":1}", "{\"$inc\":{\"n\":2,\"m\":-3}}", "{\"_id\":\"a\",\"n\":3,\"m\":-3}"));
    CHECK(upd("{\"_id\":\"a\",\"n\":1}", "{\"$inc\":{\"n\":0.5}}", "{\"_id\":\"a\",\"n\":1.5}"));
    CHECK(upd("{\"_id\":\"a\",\"a\":{\"b\":10}}", "{\"$inc\":{\"a.b\":-10}}", "{\"_id\":\"a\",\"a\":{\"b\":0}}"));
    CHECK(upd("{\"_id\":\"a\",\"n\":9223372036854775807}", "{\"$inc\":{\"n\":1}}",
              "{\"_id\":\"a\",\"n\":9.223372036854776e+18}"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":{\"b\":\"x\"}}", "{\"$inc\":{\"a.b\":1}}",
                  "$inc of \"a.b\": the value is a string, not a number"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":{\"b\":[1]}}", "{\"$inc\":{\"a.b\":1}}",
                  "$inc of \"a.b\": the value is an array, not a number"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$inc\":{\"n\":\"1\"}}", "$inc of \"n\": the operand must be a number, not string"));
    CHECK(upd("{\"_id\":\"a\",\"n\":3}", "{\"$mul\":{\"n\":4,\"z\":5,\"f\":2.5}}", "{\"_id\":\"a\",\"n\":12,\"z\":0,\"f\":0.0}"));
    CHECK(upd("{\"_id\":\"a\",\"n\":3}", "{\"$mul\":{\"n\":0.5}}", "{\"_id\":\"a\",\"n\":1.5}"));
    CHECK(upd_err("{\"_id\":\"a\",\"n\":null}", "{\"$mul\":{\"n\":2}}", "$mul of \"n\": the value is a null, not a number"));
    CHECK(upd_err("{\"_id\":\"a\",\"n\":1e300}", "{\"$mul\":{\"n\":1e300}}", "$mul of \"n\": the result is out of range"));
}

static void test_min_max(void)
{
    CHECK(upd("{\"_id\":\"a\",\"n\":5}", "{\"$min\":{\"n\":3,\"m\":7}}", "{\"_id\":\"a\",\"n\":3,\"m\":7}"));
    CHECK(upd("{\"_id\":\"a\",\"n\":5}", "{\"$min\":{\"n\":8}}", "{\"_id\":\"a\",\"n\":5}"));
    CHECK(upd("{\"_id\":\"a\",\"n\":5}", "{\"$max\":{\"n\":8}}", "{\"_id\":\"a\",\"n\":8}"));
    CHECK(upd("{\"_id\":\"a\",\"n\":5}", "{\"$max\":{\"n\":5.0}}", "{\"_id\":\"a\",\"n\":5}"));
    /* across types, MongoDB's order: numbers < strings */
    CHECK(upd("{\"_id\":\"a\",\"n\":5}", "{\"$max\":{\"n\":\"x\"}}", "{\"_id\":\"a\",\"n\":\"x\"}"));
    CHECK(upd("{\"_id\":\"a\",\"s\":\"b\"}", "{\"$min\":{\"s\":\"a\"}}", "{\"_id\":\"a\",\"s\":\"a\"}"));
}

static void test_rename(void)
{
    CHECK(upd("{\"_id\":\"a\",\"x\":1,\"y\":2}", "{\"$rename\":{\"x\":\"z\"}}", "{\"_id\":\"a\",\"y\":2,\"z\":1}"));
    /* onto an existing field: it is replaced, in its place */
    CHECK(upd("{\"_id\":\"a\",\"x\":1,\"y\":2}", "{\"$rename\":{\"x\":\"y\"}}", "{\"_id\":\"a\",\"y\":1}"));
    /* missing source: nothing */
    CHECK(upd("{\"_id\":\"a\",\"y\":2}", "{\"$rename\":{\"x\":\"z\"}}", "{\"_id\":\"a\",\"y\":2}"));
    /* into and out of nested objects */
    CHECK(upd("{\"_id\":\"a\",\"a\":{\"b\":1}}", "{\"$rename\":{\"a.b\":\"c.d\"}}", "{\"_id\":\"a\",\"a\":{},\"c\":{\"d\":1}}"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$rename\":{\"a\":\"a\"}}", ""));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$rename\":{\"a\":\"a.b\"}}",
                  "$rename of \"a\" to \"a.b\": a field cannot be renamed to itself, inside itself or to a field that holds it"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$rename\":{\"a.b\":\"a\"}}", ""));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$rename\":{\"a\":5}}", "$rename of \"a\": the new name must be a string"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":[{\"b\":1}]}", "{\"$rename\":{\"a.0.b\":\"c\"}}",
                  "$rename of \"a.0.b\": the field is inside an array (not supported)"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":1,\"c\":[]}", "{\"$rename\":{\"a\":\"c.0\"}}",
                  "$rename of \"a\" to \"c.0\": the new path goes through an array (not supported)"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":1}", "{\"$rename\":{\"a\":\"_id\"}}",
                  "\"_id\" cannot be changed or removed (it is \"a\")"));
    CHECK(upd_err("{\"_id\":\"a\",\"a\":1}", "{\"$rename\":{\"_id\":\"b\"}}", ""));
}

static void test_push(void)
{
    CHECK(upd("{\"_id\":\"a\"}", "{\"$push\":{\"t\":1}}", "{\"_id\":\"a\",\"t\":[1]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1]}", "{\"$push\":{\"t\":[2]}}", "{\"_id\":\"a\",\"t\":[1,[2]]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1]}", "{\"$push\":{\"t\":{\"$each\":[2,3,4]}}}", "{\"_id\":\"a\",\"t\":[1,2,3,4]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[3,4],\"$slice\":-3}}}",
              "{\"_id\":\"a\",\"t\":[2,3,4]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[3,4],\"$slice\":3}}}",
              "{\"_id\":\"a\",\"t\":[1,2,3]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[3],\"$slice\":0}}}", "{\"_id\":\"a\",\"t\":[]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[],\"$slice\":1}}}", "{\"_id\":\"a\",\"t\":[1]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[3],\"$slice\":-9223372036854775808}}}",
              "{\"_id\":\"a\",\"t\":[1,2,3]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[3],\"$position\":-9223372036854775808}}}",
              "{\"_id\":\"a\",\"t\":[3,1,2]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[9],\"$position\":0}}}",
              "{\"_id\":\"a\",\"t\":[9,1,2]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2]}", "{\"$push\":{\"t\":{\"$each\":[9],\"$position\":-1}}}",
              "{\"_id\":\"a\",\"t\":[1,9,2]}"));
    CHECK(upd("{\"_id\":\"a\",\"o\":{}}", "{\"$push\":{\"o.t\":{\"k\":1}}}", "{\"_id\":\"a\",\"o\":{\"t\":[{\"k\":1}]}}"));
    CHECK(upd_err("{\"_id\":\"a\",\"t\":3}", "{\"$push\":{\"t\":1}}", "$push of \"t\": the value is a number, not an array"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$push\":{\"t\":{\"$each\":1}}}", "$push of \"t\": $each must be an array"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$push\":{\"t\":{\"$each\":[1],\"$sort\":1}}}",
                  "$push of \"t\": unsupported modifier $sort ($each, $slice and $position are)"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$push\":{\"t\":{\"$slice\":1}}}", "$push of \"t\": modifiers need $each"));
}

static void test_add_to_set(void)
{
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,\"x\"]}", "{\"$addToSet\":{\"t\":\"x\"}}", "{\"_id\":\"a\",\"t\":[1,\"x\"]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,\"x\"]}", "{\"$addToSet\":{\"t\":\"y\"}}", "{\"_id\":\"a\",\"t\":[1,\"x\",\"y\"]}"));
    /* 1 and 1.0 are one value; duplicates within $each go in once */
    CHECK(upd("{\"_id\":\"a\",\"t\":[1]}", "{\"$addToSet\":{\"t\":{\"$each\":[1.0,2,2,{\"a\":1},{\"a\":1}]}}}",
              "{\"_id\":\"a\",\"t\":[1,2,{\"a\":1}]}"));
    CHECK(upd("{\"_id\":\"a\"}", "{\"$addToSet\":{\"t\":[1,2]}}", "{\"_id\":\"a\",\"t\":[[1,2]]}"));
    CHECK(upd_err("{\"_id\":\"a\",\"t\":{}}", "{\"$addToSet\":{\"t\":1}}",
                  "$addToSet of \"t\": the value is an object, not an array"));
}

static void test_pull_pop(void)
{
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2,1,3]}", "{\"$pull\":{\"t\":1}}", "{\"_id\":\"a\",\"t\":[2,3]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2,1,3]}", "{\"$pull\":{\"t\":{\"$gte\":2}}}", "{\"_id\":\"a\",\"t\":[1,1]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[\"a\",\"b\",\"c\"]}", "{\"$pull\":{\"t\":{\"$in\":[\"a\",\"c\"]}}}",
              "{\"_id\":\"a\",\"t\":[\"b\"]}"));
    /* an object: a query on object elements */
    CHECK(upd("{\"_id\":\"a\",\"t\":[{\"s\":8,\"i\":\"B\"},{\"s\":8,\"i\":\"C\"},5]}", "{\"$pull\":{\"t\":{\"s\":8,\"i\":\"B\"}}}",
              "{\"_id\":\"a\",\"t\":[{\"s\":8,\"i\":\"C\"},5]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[[1,2],[3]]}", "{\"$pull\":{\"t\":[1,2]}}", "{\"_id\":\"a\",\"t\":[[3]]}"));
    CHECK(upd("{\"_id\":\"a\"}", "{\"$pull\":{\"t\":1}}", "{\"_id\":\"a\"}"));
    CHECK(upd_err("{\"_id\":\"a\",\"t\":\"s\"}", "{\"$pull\":{\"t\":1}}", "$pull of \"t\": the value is a string, not an array"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$pull\":{\"t\":{\"$bogus\":1}}}", ""));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2,3]}", "{\"$pop\":{\"t\":1}}", "{\"_id\":\"a\",\"t\":[1,2]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[1,2,3]}", "{\"$pop\":{\"t\":-1}}", "{\"_id\":\"a\",\"t\":[2,3]}"));
    CHECK(upd("{\"_id\":\"a\",\"t\":[]}", "{\"$pop\":{\"t\":-1}}", "{\"_id\":\"a\",\"t\":[]}"));
    CHECK(upd("{\"_id\":\"a\"}", "{\"$pop\":{\"t\":1}}", "{\"_id\":\"a\"}"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$pop\":{\"t\":2}}",
                  "$pop of \"t\": the operand must be 1 (the last element) or -1 (the first)"));
    CHECK(upd_err("{\"_id\":\"a\",\"t\":1}", "{\"$pop\":{\"t\":1}}", "$pop of \"t\": the value is a number, not an array"));
}

static void test_current_date(void)
{
    CHECK(upd("{\"_id\":\"a\"}", "{\"$currentDate\":{\"d\":true,\"e\":{\"$type\":\"date\"},\"t\":{\"$type\":\"timestamp\"}}}",
              "{\"_id\":\"a\",\"d\":\"2025-12-03T10:00:00.123Z\",\"e\":\"2025-12-03T10:00:00.123Z\",\"t\":1764756000123}"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$currentDate\":{\"d\":false}}", ""));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$currentDate\":{\"d\":{\"$type\":\"clock\"}}}", ""));
}

static void test_refusals(void)
{
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$foo\":{\"x\":1}}", "unknown update operator $foo"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{}", "an update needs at least one operator ($set, $inc, ...)"));
    CHECK(upd_err("{\"_id\":\"a\"}", "[]", ""));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"x\":1}", ""));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":5}", "$set: must be an object of field paths, not number"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":{\"a\":1},\"$inc\":{\"a\":1}}",
                  "$set of \"a\" and $inc of \"a\" conflict: one field, or one inside the other"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":{\"a.b\":1},\"$unset\":{\"a\":1}}", ""));
    CHECK(upd("{\"_id\":\"a\"}", "{\"$set\":{\"ab\":1},\"$unset\":{\"a\":1}}", "{\"_id\":\"a\",\"ab\":1}"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":{\"a..b\":1}}", "$set of \"a..b\": an empty part in the path"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":{\"\":1}}", "$set: an empty field path"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":{\"a.$.b\":1}}", "$set of \"a.$.b\": positional parts ($, $[]) are not supported"));
    /* _id: the same value is fine, another or none is not */
    CHECK(upd("{\"_id\":\"a\"}", "{\"$set\":{\"_id\":\"a\"}}", "{\"_id\":\"a\"}"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":{\"_id\":\"b\"}}", "\"_id\" cannot be changed or removed (it is \"a\")"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$unset\":{\"_id\":1}}", "\"_id\" cannot be changed or removed (it is \"a\")"));
    CHECK(upd_err("{\"_id\":\"a\"}", "{\"$set\":{\"_id.x\":1}}", ""));
    /* a failure keeps nothing: the first operator's change is not in any output */
    CHECK(upd_err("{\"_id\":\"a\",\"s\":\"x\"}", "{\"$set\":{\"k\":1},\"$inc\":{\"s\":1}}",
                  "$inc of \"s\": the value is a string, not a number"));
}

static void test_changed_flag(void)
{
    docs_update *u;
    docs_error e;
    hanu_buf out = {0};
    int changed;
    REQUIRE(docs_update_parse("{\"$set\":{\"x\":1}}", 16, DOCS_UPDATE_OPERATORS, &u, &e) == HANU_OK);
    CHECK(docs_update_apply(u, "{\"_id\":\"a\",\"x\":1}", 17, 0, &out, &changed, &e) == HANU_OK && !changed);
    CHECK(docs_update_apply(u, "{\"_id\":\"a\", \"x\":1}", 18, 0, &out, &changed, &e) == HANU_OK && !changed);
    CHECK(docs_update_apply(u, "{\"_id\":\"a\",\"x\":2}", 17, 0, &out, &changed, &e) == HANU_OK && changed);
    /* one update, many documents */
    CHECK(docs_update_apply(u, "{\"_id\":\"b\"}", 11, 0, &out, &changed, &e) == HANU_OK && changed &&
          out.len == 17 && !memcmp(out.data, "{\"_id\":\"b\",\"x\":1}", 17));
    docs_update_free(u);
    hanu_buf_free(&out);
}

/* RFC 7396 Appendix A, every example: target, patch, result. */
static void test_merge_patch_rfc(void)
{
    static const char *const ex[][3] = {
        { "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"a\":null}", "{}" },
        { "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}" },
        { "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}" },
        { "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}" },
        { "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}" },
        { "[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]" },
        { "{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]" },
        { "{\"a\":\"foo\"}", "null", "null" },
        { "{\"a\":\"foo\"}", "\"bar\"", "\"bar\"" },
        { "{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}" },
        { "[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}" },
        { "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}" },
    };
    hanu_buf out = {0};
    for (size_t i = 0; i < sizeof ex / sizeof *ex; i++) {
        int rc = docs_merge_patch(ex[i][0], strlen(ex[i][0]), ex[i][1], strlen(ex[i][1]), &out);
        int ok = rc == HANU_OK && out.len == strlen(ex[i][2]) && !memcmp(out.data, ex[i][2], out.len);
        if (!ok) fprintf(stderr, "    example %zu: got %d %.*s\n", i, rc, (int)out.len, out.data ? (char *)out.data : "");
        CHECK(ok);
    }
    /* the RFC's section 3 example */
    const char *t = "{\"title\":\"Goodbye!\",\"author\":{\"givenName\":\"John\",\"familyName\":\"Doe\"},"
                    "\"tags\":[\"example\",\"sample\"],\"content\":\"This will be unchanged\"}";
    const char *p = "{\"title\":\"Hello!\",\"phoneNumber\":\"+01-123-456-7890\",\"author\":{\"familyName\":null},"
                    "\"tags\":[\"example\"]}";
    const char *want = "{\"title\":\"Hello!\",\"author\":{\"givenName\":\"John\"},\"tags\":[\"example\"],"
                       "\"content\":\"This will be unchanged\",\"phoneNumber\":\"+01-123-456-7890\"}";
    CHECK(docs_merge_patch(t, strlen(t), p, strlen(p), &out) == HANU_OK && out.len == strlen(want) &&
          !memcmp(out.data, want, out.len));
    /* no target */
    CHECK(docs_merge_patch("", 0, "{\"a\":null,\"b\":1}", 16, &out) == HANU_OK && out.len == 7 &&
          !memcmp(out.data, "{\"b\":1}", 7));
    CHECK(docs_merge_patch("{", 1, "{}", 2, &out) == HANU_ERR_INVALID);
    hanu_buf_free(&out);
}

static void test_merge_patch_docs(void)
{
    const int M = DOCS_UPDATE_MERGE_PATCH;
    CHECK(upd_kind(M, "{\"_id\":\"a\",\"x\":1,\"o\":{\"p\":1,\"q\":2}}", "{\"x\":null,\"o\":{\"q\":3},\"n\":[1]}",
                   "{\"_id\":\"a\",\"o\":{\"p\":1,\"q\":3},\"n\":[1]}", NULL));
    CHECK(upd_kind(M, "{\"_id\":\"a\"}", "{\"_id\":\"a\",\"k\":1}", "{\"_id\":\"a\",\"k\":1}", NULL));
    CHECK(upd_kind(M, "{\"_id\":\"a\"}", "{\"_id\":\"b\"}", NULL, "\"_id\" cannot be changed or removed (it is \"a\")"));
    CHECK(upd_kind(M, "{\"_id\":\"a\"}", "{\"_id\":null}", NULL, "\"_id\" cannot be changed or removed (it is \"a\")"));
    CHECK(upd_kind(M, "{\"_id\":\"a\"}", "[1]", NULL,
                   "a merge patch of a document must be a JSON object (RFC 7396: anything else replaces it)"));
    /* operators mean nothing in a merge patch: "$set" is a field name there */
    CHECK(upd_kind(M, "{\"_id\":\"a\"}", "{\"$set\":1}", "{\"_id\":\"a\",\"$set\":1}", NULL));
    docs_update *u;
    docs_error e;
    CHECK(docs_update_parse("{", 1, M, &u, &e) == HANU_ERR_INVALID && !strcmp(e.code, "invalid_json"));
}

static void test_depth(void)
{
    /* a deep value at the end of a long path: deeper than stored documents may be */
    char path[256] = "";
    for (int i = 0; i < 63; i++) strcat(path, i ? ".a" : "a");
    char up[400];
    snprintf(up, sizeof up, "{\"$set\":{\"%s\":{\"b\":{\"c\":1}}}}", path);
    CHECK(upd_err("{\"_id\":\"a\"}", up, "the updated document would nest deeper than 64 levels"));
}

int main(void)
{
    RUN(test_set_unset);
    RUN(test_inc_mul);
    RUN(test_min_max);
    RUN(test_rename);
    RUN(test_push);
    RUN(test_add_to_set);
    RUN(test_pull_pop);
    RUN(test_current_date);
    RUN(test_refusals);
    RUN(test_changed_flag);
    RUN(test_merge_patch_rfc);
    RUN(test_merge_patch_docs);
    RUN(test_depth);
    TEST_DONE();
}
