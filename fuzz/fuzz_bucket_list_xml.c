/*
 * fuzz_bucket_list_xml.c: libFuzzer target for the S3 answers the bucket parses
 * (src/bucket/s3_xml.h): a ListObjectsV2 page, and the single elements read from
 * error, multipart-initiate and multipart-complete answers. Every key handed out
 * must be a NUL-terminated string within its limit; nothing may crash or read past
 * the input.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>
#include "bucket/s3_xml.h"

static int on_entry(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    size_t *count = ctx;
    assert(strlen(key) <= S3_LIST_KEY_MAX);
    return ++*count > 100000;   /* a bound of our own, to test stopping */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s3_xml_span xml = { (const char *)data, size };
    size_t count = 0;
    int truncated;
    char token[S3_LIST_TOKEN_MAX];
    int rc = s3_xml_parse_list(xml, on_entry, &count, &truncated, token);
    assert(rc == 0 || rc == -1 || rc == 1);
    assert(strlen(token) < S3_LIST_TOKEN_MAX);
    if (rc == 0 && truncated) assert(token[0] != 0);
    char text[64];
    static const char *tags[] = { "Code", "Message", "UploadId", "ETag", "Key" };
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if (s3_xml_first_text(xml, tags[i], text, sizeof text) == 0) assert(strlen(text) < sizeof text);
    return 0;
}
