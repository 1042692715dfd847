/*
 * test_docs_expire.c: expiring documents' parts of the documents layer
 * (docs_expire.c): RFC 3339 date-times to milliseconds (offsets, fractions,
 * leap days, what is refused), a document's expiry from its field (epoch
 * seconds or a date string; anything else never expires), and the options
 * record's key and bytes.
 */
#include "test.h"
#include "docs/docs.h"

static int64_t t(const char *s)
{
    int64_t ms = -1;
    return docs_time_parse(s, strlen(s), &ms) == HANU_OK ? ms : -1;
}

static void test_time_parse(void)
{
    CHECK(t("1970-01-01T00:00:00Z") == 0);
    CHECK(t("2026-12-03T10:00:00Z") == 1796292000000LL);
    CHECK(t("2026-12-03T12:00:00+02:00") == 1796292000000LL);
    CHECK(t("2026-12-03T05:30:00-04:30") == 1796292000000LL);
    CHECK(t("2026-12-03t10:00:00z") == 1796292000000LL);
    CHECK(t("2026-12-03 10:00:00Z") == 1796292000000LL);
    CHECK(t("2026-12-03T10:00:00.5Z") == 1796292000500LL);
    CHECK(t("2026-12-03T10:00:00.123456789Z") == 1796292000123LL);
    CHECK(t("2024-02-29T00:00:00Z") == 1709164800000LL);     /* a leap day */
    CHECK(t("1969-12-31T23:59:59Z") == -1000);
    CHECK(t("2016-12-31T23:59:60Z") == t("2016-12-31T23:59:59Z"));   /* a leap second: its second's start */
    static const char *bad[] = { "", "2026-12-03", "2026-12-03T10:00:00", "2026-12-03T10:00Z", "2026-13-03T10:00:00Z",
                                 "2026-02-30T10:00:00Z", "2023-02-29T00:00:00Z", "2026-12-03T24:00:00Z",
                                 "2026-12-03T10:00:00.Z", "2026-12-03T10:00:00+0200", "2026-12-03T10:00:00Zx",
                                 "2026-12-03X10:00:00Z", "+2026-12-03T10:00:00Z", "soon" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(t(bad[i]) == -1);
        if (t(bad[i]) != -1) printf("  accepted: %s\n", bad[i]);
    }
}

static int expired(const char *doc, uint64_t now)
{
    return docs_expired(doc, strlen(doc), "exp", now);
}

static void test_expired(void)
{
    const uint64_t now = 1796292000000ULL;   /* 2026-12-03T10:00:00Z */
    CHECK(expired("{\"exp\":1796292000}", now) == 1);          /* at now: expired */
    CHECK(expired("{\"exp\":1796292000.5}", now) == 0);
    CHECK(expired("{\"exp\":1796291999.999}", now) == 1);
    CHECK(expired("{\"exp\":1.7e9}", now) == 1);
    CHECK(expired("{\"exp\":\"2026-12-03T10:00:00Z\"}", now) == 1);
    CHECK(expired("{\"exp\":\"2026-12-03T11:00:00+02:00\"}", now) == 1);
    CHECK(expired("{\"exp\":\"2026-12-03T10:00:01Z\"}", now) == 0);
    CHECK(expired("{\"a\":{\"exp\":0},\"exp\":\"2030-01-01T00:00:00Z\"}", now) == 0);   /* top level only */
    /* never: missing, null, not a date, another type, a nested one */
    CHECK(expired("{\"x\":0}", now) == 0);
    CHECK(expired("{\"exp\":null}", now) == 0);
    CHECK(expired("{\"exp\":\"yesterday\"}", now) == 0);
    CHECK(expired("{\"exp\":true}", now) == 0);
    CHECK(expired("{\"exp\":[0]}", now) == 0);
    CHECK(expired("{\"exp\":{\"$date\":\"2001-01-01T00:00:00Z\"}}", now) == 0);
    CHECK(expired("not json", now) == 0);
    CHECK(docs_expired("{\"exp\":0}", 9, NULL, now) == 0 && docs_expired("{\"exp\":0}", 9, "", now) == 0);
}

static void test_options_record(void)
{
    char key[DOCS_OPTIONS_KEY_MAX];
    size_t n = docs_options_key("users", key);
    CHECK(n == 10 && !memcmp(key, "copt\0users", 10));
    hanu_buf b = {0};
    REQUIRE(docs_options_record("expires_at", 10, &b) == HANU_OK);
    CHECK(b.len == 35 && !memcmp(b.data, "{\"expire_after_field\":\"expires_at\"}", 35));
    CHECK(docs_expire_field_valid("a", 1) && docs_expire_field_valid("a.b c", 5));
    CHECK(!docs_expire_field_valid("", 0) && !docs_expire_field_valid("a\nb", 3));
    char big[300];
    memset(big, 'x', sizeof big);
    CHECK(docs_expire_field_valid(big, 256) && !docs_expire_field_valid(big, 257));
    hanu_buf_free(&b);
}

int main(void)
{
    RUN(test_time_parse);
    RUN(test_expired);
    RUN(test_options_record);
    TEST_DONE();
}
