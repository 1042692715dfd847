/*
 * test_bucket_xml.c: the S3 answers the bucket reads (src/bucket/s3_xml.h): a
 * ListObjectsV2 page with escaped keys, and every malformed page refused rather
 * than read as a shorter list.
 */
#include "test.h"
#include "test_bucket.h"
#include "base/base.h"
#include "bucket/s3_xml.h"

static int parse(const char *xml, listed *s, int *truncated, char *token)
{
    memset(s, 0, sizeof *s);
    s3_xml_span span = { xml, strlen(xml) };
    return s3_xml_parse_list(span, collect_key, s, truncated, token);
}

#define PAGE(body) "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"x\">" body "</ListBucketResult>"

static void test_bucket_xml_list_page(void)
{
    listed s;
    int truncated;
    char token[S3_LIST_TOKEN_MAX];
    CHECK_EQ(parse(PAGE("<Contents><Key>db/a&amp;b&#x41;&#66;&lt;&gt;&quot;&apos;</Key><Size>12</Size></Contents>"
                        "<Contents><Size>0</Size><Key>db/\xc3\xa9</Key></Contents>"
                        "<IsTruncated>true</IsTruncated><NextContinuationToken>t/+=</NextContinuationToken>"),
                   &s, &truncated, token), 0);
    CHECK_EQ(s.n, 2);
    CHECK(strcmp(s.keys[0], "db/a&bAB<>\"'") == 0);
    CHECK_EQ(s.sizes[0], 12);
    CHECK(strcmp(s.keys[1], "db/\xc3\xa9") == 0);
    CHECK_EQ(truncated, 1);
    CHECK(strcmp(token, "t/+=") == 0);
    CHECK_EQ(parse(PAGE("<IsTruncated>false</IsTruncated>"), &s, &truncated, token), 0);
    CHECK(s.n == 0 && truncated == 0 && token[0] == 0);
}

static void test_bucket_xml_refuses_malformed(void)
{
    listed s;
    int truncated;
    char token[S3_LIST_TOKEN_MAX];
    char long_key[S3_LIST_KEY_MAX + 200];
    snprintf(long_key, sizeof long_key, PAGE("<IsTruncated>false</IsTruncated><Contents><Size>1</Size><Key>%0*d</Key></Contents>"),
             S3_LIST_KEY_MAX + 1, 0);
    const char *bad[] = {
        "<Error><Code>InternalError</Code></Error>",                                   /* not a page */
        PAGE("<Contents><Key>a</Key><Size>1</Size></Contents>"),                        /* no IsTruncated */
        PAGE("<IsTruncated>true</IsTruncated>"),                                        /* truncated, no token */
        PAGE("<IsTruncated>true</IsTruncated><NextContinuationToken></NextContinuationToken>"),
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a</Key></Contents>"),      /* no size */
        PAGE("<IsTruncated>false</IsTruncated><Contents><Size>1</Size></Contents>"),    /* no key */
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a</Key><Size>-1</Size></Contents>"),
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a</Key><Size>99999999999999999999</Size></Contents>"),
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a&bogus;</Key><Size>1</Size></Contents>"),
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a&#0;</Key><Size>1</Size></Contents>"),
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a&#xD800;</Key><Size>1</Size></Contents>"),
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a&amp</Key><Size>1</Size></Contents>"),
        PAGE("<IsTruncated>false</IsTruncated><Contents><Key>a<b/></Key><Size>1</Size></Contents>"),
        long_key,
    };
    for (size_t i = 0; i < HANU_ARRAY_LEN(bad); i++) {
        int rc = parse(bad[i], &s, &truncated, token);
        if (rc != -1) fprintf(stderr, "  accepted: %s\n", bad[i]);
        CHECK_EQ(rc, -1);
    }
    s3_xml_span cut = { "<Error><Code>SlowDown</Co", 25 };
    char code[32];
    CHECK_EQ(s3_xml_first_text(cut, "Code", code, sizeof code), -1);
    s3_xml_span ok = { "<Error><Code>SlowDown</Code></Error>", 36 };
    CHECK_EQ(s3_xml_first_text(ok, "Code", code, sizeof code), 0);
    CHECK(strcmp(code, "SlowDown") == 0);
    CHECK_EQ(s3_xml_first_text(ok, "Code", code, 8), -1);   /* does not fit */
}

int main(void)
{
    RUN(test_bucket_xml_list_page);
    RUN(test_bucket_xml_refuses_malformed);
    TEST_DONE();
}
