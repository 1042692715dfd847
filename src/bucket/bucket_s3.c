#include "bucket/bucket_internal.h"
int bucket_s3_open(bucket *b, const char *bucket_name, const char *prefix, char *err, size_t errcap)
{
    (void)b; (void)bucket_name; (void)prefix;
    bucket_call call = { 0, err, errcap };
    return bucket_fail(&call, HANU_ERR_UNSUPPORTED, "s3 not yet");
}
