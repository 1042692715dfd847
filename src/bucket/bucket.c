/*
 * bucket.c: the generic layer of the bucket (bucket.h): URL parsing, key and size
 * checks, and the one loop every request goes through: count it by class, add the
 * simulated latency, inject the simulated failures, send it through the backend,
 * and retry what may pass with exponential backoff and full jitter.
 */
#include "bucket/bucket_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/sha.h>

void bucket_options_default(bucket_options *o)
{
    memset(o, 0, sizeof *o);
    o->multipart_threshold = 16ull << 20;
    o->part_size = 8ull << 20;
    o->parallel_parts = 4;
    o->request_timeout_ms = 10000;
    o->connect_timeout_ms = 2000;
    o->log_interval_ms = 10000;
    o->list_page_keys = 1000;
    o->create_root = 1;
    o->max_attempts = 6;
    o->backoff_base_ms = 100;
    o->backoff_max_ms = 5000;
    o->fail_seed = 1;
}

int bucket_fail(bucket_call *call, int status, const char *fmt, ...)
{
    if (call->err && call->errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(call->err, call->errcap, fmt, ap);
        va_end(ap);
    }
    return status;
}

static int open_fail(char *err, size_t errcap, const char *msg)
{
    if (err && errcap) snprintf(err, errcap, "%s", msg);
    return HANU_ERR_INVALID;
}

static int check_options(const bucket_options *o, char *err, size_t errcap)
{
    if (o->max_attempts < 1) return open_fail(err, errcap, "bucket: max_attempts must be at least 1");
    if (o->part_size < (5ull << 20) || o->part_size > BUCKET_OBJECT_MAX)
        return open_fail(err, errcap, "bucket: part size must be between 5 MB and 5 GB");
    if (o->multipart_threshold < (5ull << 20))
        return open_fail(err, errcap, "bucket: multipart threshold below 5 MB");
    if (!(o->fail_rate >= 0 && o->timeout_rate >= 0 && o->fail_rate + o->timeout_rate < 1))
        return open_fail(err, errcap, "bucket: failure rates must be at least 0 and below 1 together");
    if (o->parallel_parts < 1 || o->parallel_parts > BUCKET_PARALLEL_PARTS_MAX)
        return open_fail(err, errcap, "bucket: parallel_parts must be between 1 and 16");
    if (o->list_page_keys < 1 || o->list_page_keys > 1000)
        return open_fail(err, errcap, "bucket: list_page_keys must be between 1 and 1000");
    if (o->request_timeout_ms < 100 || o->connect_timeout_ms < 100)
        return open_fail(err, errcap, "bucket: request and connect timeouts must be at least 100 ms");
    if (o->backoff_max_ms < o->backoff_base_ms)
        return open_fail(err, errcap, "bucket: backoff_max_ms below backoff_base_ms");
    return HANU_OK;
}

int bucket_open(const char *url, const bucket_options *o, bucket **out, char *err, size_t errcap)
{
    *out = NULL;
    bucket_options defaults;
    if (!o) {
        bucket_options_default(&defaults);
        o = &defaults;
    }
    if (strlen(url) > BUCKET_URL_MAX) return open_fail(err, errcap, "bucket: URL too long");
    int rc = check_options(o, err, errcap);
    if (rc != HANU_OK) return rc;
    bucket *b = calloc(1, sizeof *b);
    if (!b) return HANU_ERR_NOMEM;
    b->opt = *o;
    snprintf(b->url, sizeof b->url, "%s", url);
    pthread_mutex_init(&b->random_lock, NULL);
    pthread_mutex_init(&b->log_lock, NULL);
    b->random_state = o->fail_seed;
    if (strncmp(url, "file://", 7) == 0) {
        rc = bucket_file_open(b, url + 7, o->create_root, err, errcap);
    } else if (strncmp(url, "s3://", 5) == 0) {
        const char *name = url + 5, *slash = strchr(name, '/');
        size_t name_len = slash ? (size_t)(slash - name) : strlen(name);
        char bucket_name[64];
        if (name_len < 3 || name_len >= sizeof bucket_name) {
            rc = open_fail(err, errcap, "bucket: an s3 URL is s3://BUCKET/PREFIX with a bucket name of 3 to 63 bytes");
        } else {
            memcpy(bucket_name, name, name_len);
            bucket_name[name_len] = 0;
            rc = bucket_s3_open(b, bucket_name, slash ? slash + 1 : "", err, errcap);
        }
    } else {
        rc = open_fail(err, errcap, "bucket: URL must start with file:/// or s3://");
    }
    if (rc != HANU_OK) {
        pthread_mutex_destroy(&b->random_lock);
        pthread_mutex_destroy(&b->log_lock);
        free(b);
        return rc;
    }
    *out = b;
    return HANU_OK;
}

int bucket_init_wrapper(bucket *b, const char *url)
{
    bucket_options_default(&b->opt);
    b->opt.max_attempts = 1;   /* the wrapped buckets retry; a wrapper never sends again */
    snprintf(b->url, sizeof b->url, "%s", url);
    b->random_state = b->opt.fail_seed;
    return pthread_mutex_init(&b->random_lock, NULL) == 0 && pthread_mutex_init(&b->log_lock, NULL) == 0
               ? HANU_OK : HANU_ERR_NOMEM;
}

void bucket_close(bucket *b)
{
    if (!b) return;
    if (b->ops) b->ops->close(b);
    pthread_mutex_destroy(&b->random_lock);
    pthread_mutex_destroy(&b->log_lock);
    free(b);
}

const char *bucket_url(const bucket *b) { return b->url; }

void bucket_get_counters(bucket *b, bucket_counters *out)
{
    if (b->ops && b->ops->counters) {
        b->ops->counters(b, out);
        return;
    }
    out->class_a = atomic_load(&b->class_a);
    out->class_b = atomic_load(&b->class_b);
    out->retries = atomic_load(&b->retries);
    out->bytes_up = atomic_load(&b->bytes_up);
    out->bytes_down = atomic_load(&b->bytes_down);
}

void bucket_count(bucket *b, enum bucket_class cls)
{
    atomic_fetch_add(cls == BUCKET_CLASS_A ? &b->class_a : &b->class_b, 1);
}

double bucket_random(bucket *b)
{
    pthread_mutex_lock(&b->random_lock);
    uint64_t z = (b->random_state += 0x9e3779b97f4a7c15ull);   /* splitmix64 */
    pthread_mutex_unlock(&b->random_lock);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / (double)(1ull << 53);
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int bucket_backoff(bucket *b, uint32_t attempt)
{
    if (attempt > b->opt.max_attempts) return 1;
    uint64_t cap = b->opt.backoff_base_ms;
    for (uint32_t i = 2; i < attempt && cap < b->opt.backoff_max_ms; i++) cap *= 2;
    if (cap > b->opt.backoff_max_ms) cap = b->opt.backoff_max_ms;
    sleep_ms((uint64_t)(bucket_random(b) * (double)(cap + 1)));
    atomic_fetch_add(&b->retries, 1);
    return 0;
}

void bucket_sha256_hex(const void *data, size_t len, char out[65])
{
    uint8_t h[SHA256_DIGEST_LENGTH];
    SHA256(data, len, h);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* Keys: see bucket.h. Prefixes follow the same rule but may be empty or end in '/'
   or in a partial component. */
static int check_key(const char *key, int is_prefix, bucket_call *call)
{
    size_t n = strlen(key);
    if ((!is_prefix && n == 0) || n > BUCKET_KEY_MAX)
        return bucket_fail(call, HANU_ERR_INVALID, "bucket: key length %zu outside 1..%d", n, BUCKET_KEY_MAX);
    for (size_t i = 0, component = 0; i < n; i++) {
        char c = key[i];
        component = c == '/' ? 0 : component + 1;
        if (component > BUCKET_KEY_COMPONENT_MAX)
            return bucket_fail(call, HANU_ERR_INVALID, "bucket: key component longer than %d bytes",
                               BUCKET_KEY_COMPONENT_MAX);
        int start = i == 0 || key[i - 1] == '/';
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                 c == '_' || (c == '.' && !start) || (c == '/' && !start && (is_prefix || i + 1 < n));
        if (!ok) return bucket_fail(call, HANU_ERR_INVALID, "bucket: key \"%.64s\" is not of [A-Za-z0-9._-/] "
                                    "in non-empty components not starting with '.'", key);
    }
    return HANU_OK;
}

/* One request, whatever its kind, so that the retry loop is written once. */
enum request_kind { REQ_PUT, REQ_GET, REQ_HEAD, REQ_DELETE, REQ_LIST };
typedef struct request {
    enum request_kind kind;
    const char *key;                    /* or the prefix of a list */
    const void *data;
    size_t len;
    enum bucket_put_mode mode;
    const char *etag;
    int ranged;
    uint64_t offset;
    hanu_buf *out;
    bucket_object_info *info;
    const char *token;                  /* list */
    hanu_buf *next;
    int ambiguous;                      /* an attempt failed in a way that may have applied it */
    int (*guard)(void *ctx);            /* a guarded put: see bucket_put_if_absent_guarded */
    void *guard_ctx;
} request;

static int send_once(bucket *b, request *r, bucket_call *call)
{
    switch (r->kind) {
    case REQ_PUT: {
        int ignored = (r->mode == BUCKET_PUT_IF_ABSENT && (b->opt.ignore_conditions & BUCKET_IGNORE_IF_NONE_MATCH)) ||
                      (r->mode == BUCKET_PUT_IF_MATCH && (b->opt.ignore_conditions & BUCKET_IGNORE_IF_MATCH));
        return b->ops->put(b, r->key, r->data, r->len, ignored ? BUCKET_PUT_ANY : r->mode, r->etag, r->info, call);
    }
    case REQ_GET: return b->ops->get(b, r->key, r->ranged, r->offset, r->len, r->out, r->info, call);
    case REQ_HEAD: return b->ops->head(b, r->key, r->info, call);
    case REQ_DELETE: return b->ops->del(b, r->key, call);
    case REQ_LIST:
        r->next->len = 0;
        return b->ops->list_page(b, r->key, r->token, r->next, r->out, call);
    }
    return HANU_ERR_INVALID;
}

static const char *const request_names[] = { "put", "get", "head", "delete", "list" };
enum { LOG_FAILED, LOG_RETRY };

/* One line of a kind per log_interval_ms, so that a store down for an hour logs a line
   every few seconds, not one per request: what was left out is counted in the next. */
static void log_request(bucket *b, int kind, const request *r, uint32_t attempt, const char *msg)
{
    if (!b->opt.log) return;
    uint64_t now = hanu_now_ns() / 1000000, left_out;
    pthread_mutex_lock(&b->log_lock);
    struct bucket_log_kind *k = &b->log_kinds[kind];
    int due = k->last_ms == 0 || now - k->last_ms >= b->opt.log_interval_ms;
    left_out = k->left_out;
    if (due) k->last_ms = now, k->left_out = 0;
    else k->left_out++;
    pthread_mutex_unlock(&b->log_lock);
    if (!due) return;
    char line[2048], more[96] = "";
    if (left_out)
        snprintf(more, sizeof more, " (and %llu more %s since the last line)", (unsigned long long)left_out,
                 kind == LOG_FAILED ? "failed writes" : "retries");
    if (kind == LOG_FAILED)
        snprintf(line, sizeof line, "%s: %s %s failed after %u attempt%s: %s%s", b->url,
                 request_names[r->kind], r->key, attempt, attempt == 1 ? "" : "s", msg, more);
    else
        snprintf(line, sizeof line, "%s: %s %s: attempt %u of %u failed, retrying: %s%s", b->url,
                 request_names[r->kind], r->key, attempt, b->opt.max_attempts, msg, more);
    b->opt.log(b->opt.log_ctx, line);
}

static int run(bucket *b, request *r, char *err, size_t errcap)
{
    char local[256];
    if (!err || !errcap) {
        err = local;
        errcap = sizeof local;
    }
    err[0] = 0;
    enum bucket_class cls = r->kind == REQ_GET || r->kind == REQ_HEAD ? BUCKET_CLASS_B : BUCKET_CLASS_A;
    size_t out_len = r->out ? r->out->len : 0;
    int rc;
    for (uint32_t attempt = 1;; attempt++) {
        bucket_call call = { 0, err, errcap, r->guard, r->guard_ctx };
        bucket_count(b, cls);
        uint32_t latency = cls == BUCKET_CLASS_A ? b->opt.latency_put_ms : b->opt.latency_get_ms;
        if (latency) sleep_ms(latency);
        double dice = b->opt.fail_rate + b->opt.timeout_rate > 0 ? bucket_random(b) : 1;
        if (dice < b->opt.fail_rate) {
            call.retryable = 1;
            rc = bucket_fail(&call, HANU_ERR_IO, "bucket: 503 Slow Down (injected)");
        } else {
            if (r->out) r->out->len = out_len;
            rc = send_once(b, r, &call);
            if (rc == HANU_OK && dice < b->opt.fail_rate + b->opt.timeout_rate) {
                /* The worst kind: the request was applied but its answer is lost. */
                call.retryable = 1;
                rc = bucket_fail(&call, HANU_ERR_IO, "bucket: request timed out (injected, after it was applied)");
            }
        }
        if (rc == HANU_OK) {
            if (r->kind == REQ_PUT) atomic_fetch_add(&b->bytes_up, r->len);
            if (r->kind == REQ_GET) atomic_fetch_add(&b->bytes_down, r->out->len - out_len);
            return HANU_OK;
        }
        if (!call.retryable || attempt + 1 > b->opt.max_attempts) {
            /* Writes only (a failed read is its caller's to report), and not a refused
               precondition: EXISTS, MISMATCH and NOT_FOUND are answers, not failures. */
            int refusal = rc == HANU_ERR_EXISTS || rc == HANU_ERR_MISMATCH || rc == HANU_ERR_NOT_FOUND;
            if ((r->kind == REQ_PUT || r->kind == REQ_DELETE) && !refusal) log_request(b, LOG_FAILED, r, attempt, err);
            break;
        }
        log_request(b, LOG_RETRY, r, attempt, err);
        bucket_backoff(b, attempt + 1);
        r->ambiguous = 1;
    }
    if (r->out) r->out->len = out_len;
    return rc;
}


/* After an ambiguous conditional put was refused: is the object there ours? */
static int is_ours(bucket *b, const char *key, const void *data, size_t len, bucket_object_info *info)
{
    hanu_buf got = {0};
    int ours = bucket_get(b, key, &got, info, NULL, 0) == HANU_OK && got.len == len &&
               (len == 0 || memcmp(got.data, data, len) == 0);
    hanu_buf_free(&got);
    return ours;
}

int bucket_guard_passes(bucket_call *call, const char *key)
{
    if (!call->guard || call->guard(call->guard_ctx)) return 1;
    bucket_fail(call, HANU_ERR_STOPPED, "bucket: the put of %s was called off by its guard just before the "
                "object would appear", key);
    call->retryable = 0;
    return 0;
}

static int put_guarded(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
                       const char *etag, int (*guard)(void *), void *guard_ctx, bucket_object_info *info,
                       char *err, size_t errcap);

static int put_request(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
                       const char *etag, bucket_object_info *info, char *err, size_t errcap)
{
    return put_guarded(b, key, data, len, mode, etag, NULL, NULL, info, err, errcap);
}

int bucket_put_if_absent_guarded(bucket *b, const char *key, const void *data, size_t len, int (*guard)(void *ctx),
                                 void *guard_ctx, bucket_object_info *info, char *err, size_t errcap)
{
    return put_guarded(b, key, data, len, BUCKET_PUT_IF_ABSENT, NULL, guard, guard_ctx, info, err, errcap);
}

static int put_guarded(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
                       const char *etag, int (*guard)(void *), void *guard_ctx, bucket_object_info *info,
                       char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    int rc = check_key(key, 0, &call);
    if (rc != HANU_OK) return rc;
    if (len > BUCKET_OBJECT_MAX) return bucket_fail(&call, HANU_ERR_TOO_LARGE, "bucket: object of %zu bytes", len);
    if (mode == BUCKET_PUT_IF_MATCH && (!etag || !etag[0] || strlen(etag) > BUCKET_ETAG_MAX))
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket: compare-and-swap needs an ETag");
    request r = { .kind = REQ_PUT, .key = key, .data = data, .len = len, .mode = mode, .etag = etag, .info = info,
                  .guard = guard, .guard_ctx = guard_ctx };
    rc = run(b, &r, err, errcap);
    int refused = (mode == BUCKET_PUT_IF_ABSENT && rc == HANU_ERR_EXISTS) ||
                  (mode == BUCKET_PUT_IF_MATCH && rc == HANU_ERR_MISMATCH);
    if (refused && r.ambiguous && is_ours(b, key, data, len, info)) return HANU_OK;
    return rc;
}

int bucket_put(bucket *b, const char *key, const void *data, size_t len, bucket_object_info *info,
               char *err, size_t errcap)
{
    return put_request(b, key, data, len, BUCKET_PUT_ANY, NULL, info, err, errcap);
}

int bucket_put_if_absent(bucket *b, const char *key, const void *data, size_t len, bucket_object_info *info,
                         char *err, size_t errcap)
{
    return put_request(b, key, data, len, BUCKET_PUT_IF_ABSENT, NULL, info, err, errcap);
}

int bucket_compare_and_swap(bucket *b, const char *key, const char *expected_etag, const void *data, size_t len,
                            bucket_object_info *info, char *err, size_t errcap)
{
    return put_request(b, key, data, len, BUCKET_PUT_IF_MATCH, expected_etag, info, err, errcap);
}

int bucket_get(bucket *b, const char *key, hanu_buf *out, bucket_object_info *info, char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    int rc = check_key(key, 0, &call);
    if (rc != HANU_OK) return rc;
    request r = { .kind = REQ_GET, .key = key, .out = out, .info = info };
    return run(b, &r, err, errcap);
}

int bucket_get_range(bucket *b, const char *key, uint64_t offset, size_t len, hanu_buf *out, char *err,
                     size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    int rc = check_key(key, 0, &call);
    if (rc != HANU_OK) return rc;
    if (len == 0 || len > BUCKET_OBJECT_MAX || offset > BUCKET_OBJECT_MAX)
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket: range of %zu bytes at %llu", len,
                           (unsigned long long)offset);
    request r = { .kind = REQ_GET, .key = key, .ranged = 1, .offset = offset, .len = len, .out = out };
    return run(b, &r, err, errcap);
}

int bucket_head(bucket *b, const char *key, bucket_object_info *info, char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    int rc = check_key(key, 0, &call);
    if (rc != HANU_OK) return rc;
    bucket_object_info ignored;
    request r = { .kind = REQ_HEAD, .key = key, .info = info ? info : &ignored };
    return run(b, &r, err, errcap);
}

int bucket_delete(bucket *b, const char *key, char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    int rc = check_key(key, 0, &call);
    if (rc != HANU_OK) return rc;
    request r = { .kind = REQ_DELETE, .key = key };
    return run(b, &r, err, errcap);
}

int bucket_list(bucket *b, const char *prefix, bucket_list_fn fn, void *ctx, char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    int rc = check_key(prefix, 1, &call);
    if (rc != HANU_OK) return rc;
    char *token = strdup("");
    if (!token) return HANU_ERR_NOMEM;
    int stopped = 0;
    while (rc == HANU_OK && token) {
        hanu_buf next = {0}, page = {0};
        request r = { .kind = REQ_LIST, .key = prefix, .token = token, .next = &next, .out = &page };
        rc = run(b, &r, err, errcap);
        free(token);
        token = NULL;
        for (size_t at = 0; rc == HANU_OK && !stopped && at < page.len;) {
            uint32_t n = hanu_get_u32(page.data + at);
            uint64_t size = hanu_get_u64(page.data + at + 4 + n + 1);
            stopped = fn(ctx, (const char *)page.data + at + 4, size) != 0;
            at += 4 + n + 1 + 8;
        }
        if (rc == HANU_OK && !stopped && next.len) {
            token = strndup((const char *)next.data, next.len);
            if (!token) rc = HANU_ERR_NOMEM;
        }
        hanu_buf_free(&next);
        hanu_buf_free(&page);
    }
    free(token);
    return rc;
}

/* A page entry: u32 key length, the key and a NUL, u64 size. */
int bucket_page_add(hanu_buf *page, const char *key, uint64_t size)
{
    uint32_t n = (uint32_t)strlen(key);
    if (hanu_buf_reserve(page, 4 + n + 1 + 8) != HANU_OK) return HANU_ERR_NOMEM;
    uint8_t *p = page->data + page->len;
    hanu_put_u32(p, n);
    memcpy(p + 4, key, n + 1);
    hanu_put_u64(p + 4 + n + 1, size);
    page->len += 4 + n + 1 + 8;
    return HANU_OK;
}

static int probe_listed(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    if (strcmp(key, ctx) == 0) *(char *)ctx = 0;   /* found: the key is cleared */
    return 0;
}

/* The steps of the probe; the caller deletes the object whatever they answer. */
static int probe_steps(bucket *b, const char *key, char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    const char *body = "put-if-absent probe";
    bucket_object_info info;
    int rc = bucket_put_if_absent(b, key, body, strlen(body), &info, err, errcap);
    if (rc != HANU_OK) return rc;
    rc = bucket_put_if_absent(b, key, "again", 5, NULL, err, errcap);
    if (rc == HANU_OK)
        return bucket_fail(&call, HANU_ERR_UNSUPPORTED, "bucket %s does not honour put-if-absent (If-None-Match: *): "
                           "a second put of %s was accepted, so two writers could not be fenced", b->url, key);
    if (rc != HANU_ERR_EXISTS) return rc;
    char wrong[BUCKET_ETAG_MAX + 1];
    snprintf(wrong, sizeof wrong, "%s", strcmp(info.etag, "0") == 0 ? "1" : "0");
    rc = bucket_compare_and_swap(b, key, wrong, "swapped", 7, NULL, err, errcap);
    if (rc == HANU_OK)
        return bucket_fail(&call, HANU_ERR_UNSUPPORTED, "bucket %s does not honour compare-and-swap (If-Match): "
                           "a put of %s from a wrong ETag was accepted, so two lease holders could not be fenced",
                           b->url, key);
    if (rc != HANU_ERR_MISMATCH) return rc;
    char find[96];
    snprintf(find, sizeof find, "%s", key);
    rc = bucket_list(b, "probe/", probe_listed, find, err, errcap);
    if (rc == HANU_OK && find[0])
        return bucket_fail(&call, HANU_ERR_UNSUPPORTED, "bucket %s: %s was put but is not listed under probe/ "
                           "(is the prefix rewritten on the way?)", b->url, key);
    return rc;
}

int bucket_probe_fencing(bucket *b, char *err, size_t errcap)
{
    char key[96];
    snprintf(key, sizeof key, "probe/fencing-%llu-%d-%llu", (unsigned long long)hanu_wall_ms(), (int)getpid(),
             (unsigned long long)(bucket_random(b) * 1e15));
    int rc = probe_steps(b, key, err, errcap);
    int cleanup = bucket_delete(b, key, NULL, 0);
    (void)cleanup;   /* a stray probe object harms nothing: no reader looks under probe/ */
    return rc;
}
