/*
 * bucket_internal.h: what the generic layer (bucket.c) and the backends
 * (bucket_file.c, bucket_s3.c) share. A backend implements one attempt of each
 * request; bucket.c counts it, simulates latency and failures, and retries.
 */
#ifndef HANU_BUCKET_INTERNAL_H
#define HANU_BUCKET_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include "bucket/bucket.h"

/* How a put is conditioned. */
enum bucket_put_mode { BUCKET_PUT_ANY, BUCKET_PUT_IF_ABSENT, BUCKET_PUT_IF_MATCH };
enum bucket_class { BUCKET_CLASS_A, BUCKET_CLASS_B };

/* One attempt's outcome beyond its status: may it be tried again, and its message. */
typedef struct bucket_call {
    int retryable;
    char *err;
    size_t errcap;
    /* A guarded put (bucket_put_if_absent_guarded): asked by the backend as late as
       it can, just before the object appears; 0 refuses the put (STOPPED). */
    int (*guard)(void *ctx);
    void *guard_ctx;
} bucket_call;

/* The guard of a put, if any, still lets it through (else call says why: STOPPED). */
int bucket_guard_passes(bucket_call *call, const char *key);

/* Writes a message into call->err and returns status. */
int bucket_fail(bucket_call *call, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef struct bucket_ops {
    int (*put)(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
               const char *etag, bucket_object_info *info, bucket_call *call);
    /* ranged == 0: the whole object, else [offset, offset + len). */
    int (*get)(bucket *b, const char *key, int ranged, uint64_t offset, size_t len, hanu_buf *out,
               bucket_object_info *info, bucket_call *call);
    int (*head)(bucket *b, const char *key, bucket_object_info *info, bucket_call *call);
    int (*del)(bucket *b, const char *key, bucket_call *call);
    /* One page of keys starting with prefix, after the continuation token (empty at
       first), appended to page with bucket_page_add in lexical order; the next page's
       token goes to next (left empty on the last page). bucket.c hands the entries to
       the caller only once the attempt succeeded, so a retry never repeats one. */
    int (*list_page)(bucket *b, const char *prefix, const char *token, hanu_buf *next, hanu_buf *page,
                     bucket_call *call);
    void (*close)(bucket *b);
    /* Optional (NULL: the bucket's own counters): a backend over other buckets
       (bucket_twin.c) reports the requests its buckets sent. */
    void (*counters)(bucket *b, bucket_counters *out);
} bucket_ops;

struct bucket {
    const bucket_ops *ops;
    void *backend;
    bucket_options opt;
    char url[BUCKET_URL_MAX + 1];
    atomic_uint_fast64_t class_a, class_b, retries, bytes_up, bytes_down;
    pthread_mutex_t random_lock;
    uint64_t random_state;
    pthread_mutex_t log_lock;
    struct bucket_log_kind { uint64_t last_ms, left_out; } log_kinds[2];   /* failed writes, retries */
};

/* Appends one listed key and its size to a page. */
int bucket_page_add(hanu_buf *page, const char *key, uint64_t size);

/* A request a backend sends beyond the one bucket.c counted (multipart parts). */
void bucket_count(bucket *b, enum bucket_class cls);
/* Waits before attempt number `attempt` (2, 3...): exponential backoff with full
   jitter. Returns 0 when the attempt may go, non-zero when max_attempts is reached. */
int bucket_backoff(bucket *b, uint32_t attempt);
/* A uniform random number in [0, 1) from the bucket's seeded generator. */
double bucket_random(bucket *b);

/* SHA-256 of data as 64 hex digits and a NUL. */
void bucket_sha256_hex(const void *data, size_t len, char out[65]);

int bucket_file_open(bucket *b, const char *path, int create_root, char *err, size_t errcap);
/* Fills a bucket struct for a backend over other buckets (bucket_twin.c): defaults,
   no retries of its own, the URL. */
int bucket_init_wrapper(bucket *b, const char *url);

int bucket_s3_open(bucket *b, const char *bucket_name, const char *prefix, char *err, size_t errcap);

#endif
