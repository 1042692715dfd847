/*
 * bucket: one interface to an object store, the durable home of the database
 * (docs/BUCKET.md). Two backends behind it, chosen by the URL:
 *
 *   file:///path            a local directory (the embedded default, and tests)
 *   s3://bucket/prefix      any S3-compatible store, through libcurl's SigV4 signing
 *
 * Keys are relative to the URL's path or prefix: 1..BUCKET_KEY_MAX bytes of
 * [A-Za-z0-9._-/], components separated by single '/', none empty or starting
 * with '.' or longer than 255 bytes, no leading or trailing '/'. Every request is counted by class (A: put,
 * list, delete; B: get, head). Failures that may pass (5xx, 429, timeouts, lost
 * connections) are retried with exponential backoff and full jitter, up to
 * max_attempts per request.
 *
 * Every function returns 0 or a negative status (hanudb_status.h) and writes a
 * message for the user into err (may be NULL). Thread rules: one bucket may be used
 * by several threads at once.
 */
#ifndef HANU_BUCKET_H
#define HANU_BUCKET_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"

#define BUCKET_KEY_MAX 512
#define BUCKET_KEY_COMPONENT_MAX 255    /* a file name */
#define BUCKET_URL_MAX 1024
#define BUCKET_ETAG_MAX 80              /* a SHA-256 in hex, or an S3 ETag without quotes */
#define BUCKET_OBJECT_MAX (5ull << 30)  /* largest object put or got in one call */
#define BUCKET_PARALLEL_PARTS_MAX 16

typedef struct bucket_options {
    /* s3 only; NULL means from the environment (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
       AWS_REGION, AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
       AWS_SESSION_TOKEN), else https://s3.REGION.amazonaws.com and us-east-1. */
    const char *s3_endpoint;            /* "http://127.0.0.1:9000": path-style URLs below it */
    const char *s3_region;
    const char *s3_access_key;
    const char *s3_secret_key;
    const char *s3_session_token;
    uint64_t multipart_threshold;       /* puts larger go in parts; at least 5 MB (default 16 MB) */
    uint64_t part_size;                 /* at least 5 MB (default 8 MB) */
    uint32_t parallel_parts;            /* parts in flight at once, 1..16 (default 4) */
    uint32_t request_timeout_ms;        /* a request whose bytes stop flowing this long fails (a low-speed
                                           limit, so large bodies may take longer); its whole time is bounded
                                           by this plus 4 ms a KB of body (default 10000, at least 100) */
    uint32_t connect_timeout_ms;        /* default 2000, at least 100 */
    uint32_t list_page_keys;            /* keys asked per list request, 1..1000 (default 1000) */

    /* file only: create the root folder (and its parents) at bucket_open when it is
       missing (default 1; audit and restore pass 0). Never later: a request never
       creates the root, and fails while the path names another folder or none. */
    int create_root;

    /* every backend: log lines for failed write requests and for retries (NULL: none),
       at most one line of each kind per log_interval_ms (default 10000), saying how many
       were left out in between */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
    uint32_t log_interval_ms;

    /* every backend: retries */
    uint32_t max_attempts;              /* per request, at least 1 (default 6) */
    uint32_t backoff_base_ms;           /* first retry waits up to this (default 100) */
    uint32_t backoff_max_ms;            /* no wait longer than this (default 5000) */

    /* every backend: simulation of an object store for tests and benchmarks */
    uint32_t latency_put_ms;            /* added to every class-A request */
    uint32_t latency_get_ms;            /* added to every class-B request */
    double fail_rate;                   /* share of requests failing as a 503 before acting */
    double timeout_rate;                /* share of requests timing out after acting */
    uint64_t fail_seed;                 /* seeds the injected failures and the jitter */
    int ignore_conditions;              /* a store that ignores preconditions (what the fencing probe
                                           refuses): BUCKET_IGNORE_IF_NONE_MATCH, _IF_MATCH or both */
} bucket_options;

#define BUCKET_IGNORE_IF_NONE_MATCH 1   /* put-if-absent replaces */
#define BUCKET_IGNORE_IF_MATCH 2        /* compare-and-swap replaces whatever the ETag */

void bucket_options_default(bucket_options *o);

typedef struct bucket bucket;

/* Opens the bucket at url (nothing is sent yet; a file bucket's folder is opened,
   created first when missing and o->create_root). INVALID with a message for a
   malformed URL or option, NOT_FOUND for a missing file bucket's folder not to be
   created. Free with bucket_close. */
int bucket_open(const char *url, const bucket_options *o, bucket **out, char *err, size_t errcap);
void bucket_close(bucket *b);

typedef struct bucket_object_info {
    uint64_t size;
    char etag[BUCKET_ETAG_MAX + 1];     /* opaque; what compare-and-swap takes */
} bucket_object_info;

/* Creates or replaces key. info (may be NULL) receives the new ETag. */
int bucket_put(bucket *b, const char *key, const void *data, size_t len, bucket_object_info *info,
               char *err, size_t errcap);
/* Creates key only if it does not exist: EXISTS otherwise, nothing changed. A retry
   after an ambiguous failure (a timeout) that finds the object compares its bytes:
   identical means the earlier attempt succeeded (OK). */
int bucket_put_if_absent(bucket *b, const char *key, const void *data, size_t len,
                         bucket_object_info *info, char *err, size_t errcap);
/* Replaces key only if its current ETag is expected_etag: MISMATCH otherwise,
   NOT_FOUND when it does not exist. */
/* put_if_absent with a guard the backend asks as late as it can, just before the
   object appears (file: before the link; S3: before the request, and before a
   multipart upload is completed); 0 calls the put off: STOPPED, not tried again.
   The sealer's guard is "this node's lease is still valid". */
int bucket_put_if_absent_guarded(bucket *b, const char *key, const void *data, size_t len, int (*guard)(void *ctx),
                                 void *guard_ctx, bucket_object_info *info, char *err, size_t errcap);
int bucket_compare_and_swap(bucket *b, const char *key, const char *expected_etag, const void *data,
                            size_t len, bucket_object_info *info, char *err, size_t errcap);
/* The whole object appended to out (caller owns it). NOT_FOUND when absent. */
int bucket_get(bucket *b, const char *key, hanu_buf *out, bucket_object_info *info, char *err, size_t errcap);
/* Bytes [offset, offset + len) appended to out, fewer at the end of the object;
   INVALID when offset is at or past the end. */
int bucket_get_range(bucket *b, const char *key, uint64_t offset, size_t len, hanu_buf *out, char *err,
                     size_t errcap);
int bucket_head(bucket *b, const char *key, bucket_object_info *info, char *err, size_t errcap);
/* Deletes key; OK when it did not exist either. */
int bucket_delete(bucket *b, const char *key, char *err, size_t errcap);

/* Called for each key starting with prefix, in lexical (byte) order; non-zero stops. */
typedef int (*bucket_list_fn)(void *ctx, const char *key, uint64_t size);
/* prefix may be "" (every key). */
int bucket_list(bucket *b, const char *prefix, bucket_list_fn fn, void *ctx, char *err, size_t errcap);

/* Checks that the store can fence writers: puts a fresh probe object under probe/
   with put-if-absent, expects a second put-if-absent of it to be refused (segments),
   a compare-and-swap from a wrong ETag to be refused (the lease object), and a list
   under probe/ to show it (objects are listed where they were put); deletes it.
   UNSUPPORTED with a message naming what the store did wrong. Writes to the bucket:
   for writers and lease nodes, not followers. */
int bucket_probe_fencing(bucket *b, char *err, size_t errcap);

typedef struct bucket_counters {
    uint64_t class_a;                   /* put, list, delete requests (each multipart request too) */
    uint64_t class_b;                   /* get, head requests */
    uint64_t retries;                   /* requests sent again after a failure */
    uint64_t bytes_up, bytes_down;      /* object bytes sent and received */
} bucket_counters;

void bucket_get_counters(bucket *b, bucket_counters *out);
/* The URL the bucket was opened with. */
const char *bucket_url(const bucket *b);

/* ---- twin buckets (bucket_twin.c, docs/BUCKET.md "Twin buckets") ----
 * One bucket over two: every put, put-if-absent and delete goes to both at once
 * (two threads) and succeeds only when both do; a put-if-absent that finds other
 * bytes on either side is refused (EXISTS when neither side holds ours, FENCED when
 * one does: the two disagree); an object already there with the very same bytes
 * counts as put (an earlier put that landed on one side only). Compare-and-swap
 * goes to the first bucket (the ETags a twin hands out are the first's), then puts
 * the same bytes to the second. Gets, ranges and heads read the first bucket and
 * fall back to the second on NOT_FOUND or any error; a list is the union of both.
 * The twin's counters are the sum of both sides'. */

/* Opens url_a and url_b with the same options and joins them. */
int bucket_twin_open(const char *url_a, const char *url_b, const bucket_options *o, bucket **out, char *err,
                     size_t errcap);
/* Joins two open buckets; the twin owns them from now on, also when it fails. */
int bucket_twin_join(bucket *first, bucket *second, bucket **out, char *err, size_t errcap);
/* The first (side 0) or second (side 1) bucket of a twin; NULL when b is no twin. */
bucket *bucket_twin_side(bucket *b, int side);

typedef struct bucket_twin_stats {
    uint64_t listed[2];                 /* objects under the prefix on each side */
    uint64_t copied_to[2];              /* objects copied to side 0 and side 1 */
    uint64_t bytes_copied;
    uint64_t differ;                    /* on both sides with different sizes: left alone */
    uint64_t failed;                    /* copies that failed or did not verify */
    char first_problem[BUCKET_KEY_MAX + 1];   /* the key of the first differ or failure */
} bucket_twin_stats;

/* Copies every object under prefix that only one side has to the other (both
   ways), with put-if-absent, and verifies each copy by a head of the target: the
   size, and the ETag when it is a hash of the bytes (SHA-256 on the file backend,
   MD5 on S3 single puts). Objects on both sides are compared by size only. OK when
   every one-sided object was copied and verified; else the first failure's status
   (the others are still tried). Memory: one object at a time. */
int bucket_twin_remirror(bucket *twin, const char *prefix, bucket_twin_stats *st, char *err, size_t errcap);

#endif
