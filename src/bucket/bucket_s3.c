/*
 * bucket_s3.c: the s3://bucket/prefix backend, over libcurl with its SigV4 signing
 * (CURLOPT_AWS_SIGV4) and path-style URLs (ENDPOINT/BUCKET/PREFIX/KEY).
 *
 * libcurl 7.88's signing has traps, each measured against a verifying server:
 * - it does not add x-amz-content-sha256: we send it (the payload's SHA-256) and
 *   curl then signs it;
 * - it signs the query string as written: ours is always built sorted by name and
 *   percent-encoded, with a '=' after a valueless name (?uploads=);
 * - it would sign an "Expect:" removal header that is never sent: we add none.
 * Conditional puts use If-None-Match: * and If-Match; large objects go as multipart
 * uploads whose requests are each retried here; every other request is one attempt
 * that bucket.c counts and retries.
 */
#include "bucket/bucket_internal.h"
#include "bucket/s3_xml.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <curl/curl.h>

#define S3_POOL 8                     /* idle handles kept, so connections are reused */
#define S3_ERROR_BODY_MAX (64u << 10)
#define S3_LIST_BODY_MAX (16u << 20)

typedef struct s3_bucket {
    char *endpoint;                   /* no trailing '/' */
    char *name;
    char *prefix;                     /* "" or ending in '/' */
    char *userpwd;                    /* "ACCESS:SECRET" */
    char *sigv4;                      /* "aws:amz:REGION:s3" */
    char *token_header;               /* "x-amz-security-token: ..." or NULL */
    pthread_mutex_t pool_lock;
    CURL *pool[S3_POOL];
    int pooled;
} s3_bucket;

static s3_bucket *sb(bucket *b) { return b->backend; }

/* ---- one HTTP exchange ---- */
typedef struct s3_response {
    long status;
    hanu_buf *body;                   /* where the body goes (the caller's buffer or scratch) */
    size_t body_start, body_max;
    int body_overflow;
    char etag[BUCKET_ETAG_MAX + 1];
    uint64_t content_length;
    int has_length;
} s3_response;

typedef struct s3_upload {
    const uint8_t *data;
    size_t len, pos;
} s3_upload;

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    s3_response *r = ctx;
    size_t len = size * n;
    if (r->body->len - r->body_start + len > r->body_max) {
        r->body_overflow = 1;
        return 0;                     /* curl stops with CURLE_WRITE_ERROR */
    }
    return hanu_buf_append(r->body, p, len) == HANU_OK ? len : 0;
}

static size_t on_upload(char *p, size_t size, size_t n, void *ctx)
{
    s3_upload *u = ctx;
    size_t len = HANU_MIN(size * n, u->len - u->pos);
    if (len) memcpy(p, u->data + u->pos, len);
    u->pos += len;
    return len;
}

/* Copies the value of "Name: value" when the header line has that name. */
static int header_value(const char *line, size_t len, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':') return 0;
    const char *v = line + n + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    if (end - v >= 2 && v[0] == '"' && end[-1] == '"') v++, end--;
    if ((size_t)(end - v) >= cap) return 0;
    memcpy(out, v, (size_t)(end - v));
    out[end - v] = 0;
    return 1;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    s3_response *r = ctx;
    size_t len = size * n;
    char value[32];
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {   /* a new response (after 100 Continue) */
        r->etag[0] = 0;
        r->has_length = 0;
    }
    header_value(p, len, "ETag", r->etag, sizeof r->etag);
    if (header_value(p, len, "Content-Length", value, sizeof value)) {
        char *end;
        r->content_length = strtoull(value, &end, 10);
        r->has_length = *end == 0 && value[0] != 0;
    }
    return len;
}

static CURL *take_handle(s3_bucket *s)
{
    CURL *c = NULL;
    pthread_mutex_lock(&s->pool_lock);
    if (s->pooled) c = s->pool[--s->pooled];
    pthread_mutex_unlock(&s->pool_lock);
    if (c) curl_easy_reset(c);
    else c = curl_easy_init();
    return c;
}

static void give_handle(s3_bucket *s, CURL *c)
{
    pthread_mutex_lock(&s->pool_lock);
    if (s->pooled < S3_POOL) s->pool[s->pooled++] = c, c = NULL;
    pthread_mutex_unlock(&s->pool_lock);
    if (c) curl_easy_cleanup(c);
}

/* Percent-encodes v as SigV4 wants it in a query value (RFC 3986 unreserved kept). */
static int query_encode(hanu_buf *q, const char *v)
{
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        char enc[4];
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            if (hanu_buf_append(q, v, 1) != HANU_OK) return HANU_ERR_NOMEM;
        } else {
            snprintf(enc, sizeof enc, "%%%02X", c);
            if (hanu_buf_append(q, enc, 3) != HANU_OK) return HANU_ERR_NOMEM;
        }
    }
    return HANU_OK;
}

/* Builds "name=value&..." from pairs already sorted by name; NULL value gives "name=". */
static int build_query(hanu_buf *q, const char *const *pairs, size_t n)
{
    for (size_t i = 0; i < n; i += 2) {
        if (!pairs[i + 1] || !pairs[i]) continue;
        if (q->len && hanu_buf_append(q, "&", 1) != HANU_OK) return HANU_ERR_NOMEM;
        if (hanu_buf_append(q, pairs[i], strlen(pairs[i])) != HANU_OK || hanu_buf_append(q, "=", 1) != HANU_OK)
            return HANU_ERR_NOMEM;
        if (query_encode(q, pairs[i + 1]) != HANU_OK) return HANU_ERR_NOMEM;
    }
    return hanu_buf_append(q, "", 1);   /* NUL, not counted */
}

typedef struct s3_request {
    const char *method;               /* GET HEAD PUT POST DELETE */
    const char *key;                  /* NULL: the bucket itself (list) */
    const char *query;                /* "" or sorted and encoded, without '?' */
    const void *body;
    size_t body_len;
    const char *headers[4];           /* extra headers, NULL-terminated */
} s3_request;

/* Sends one request. HANU_OK when an answer came (any status, in resp->status);
   otherwise IO, retryable for timeouts and network failures. */
static int s3_send(bucket *b, const s3_request *rq, s3_response *resp, bucket_call *call)
{
    s3_bucket *s = sb(b);
    char url[BUCKET_URL_MAX + BUCKET_KEY_MAX + S3_LIST_TOKEN_MAX * 3 + 256];
    int n = snprintf(url, sizeof url, "%s/%s%s%s%s%s%s", s->endpoint, s->name, rq->key ? "/" : "",
                     rq->key ? s->prefix : "", rq->key ? rq->key : "", rq->query[0] ? "?" : "", rq->query);
    if (n < 0 || (size_t)n >= sizeof url) return bucket_fail(call, HANU_ERR_INVALID, "bucket: URL too long");
    CURL *c = take_handle(s);
    if (!c) return HANU_ERR_NOMEM;
    char sha_header[96], sha[65];
    bucket_sha256_hex(rq->body ? rq->body : "", rq->body_len, sha);
    snprintf(sha_header, sizeof sha_header, "x-amz-content-sha256: %s", sha);
    struct curl_slist *headers = curl_slist_append(NULL, sha_header);
    if (s->token_header) headers = curl_slist_append(headers, s->token_header);
    for (int i = 0; rq->headers[i]; i++) headers = curl_slist_append(headers, rq->headers[i]);
    s3_upload up = { rq->body, rq->body_len, 0 };
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(c, CURLOPT_USERPWD, s->userpwd);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);   /* the path signed and sent is the one we built */
    /* A connection that hangs fails once no byte moved for request_timeout_ms (at
       least a second: curl counts in seconds); a slow but moving body is not cut,
       and the whole request is still bounded, with 4 ms a KB of body added. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)HANU_MAX(1u, (b->opt.request_timeout_ms + 999) / 1000));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)HANU_MIN((uint64_t)b->opt.request_timeout_ms +
                                                           rq->body_len / 256, (uint64_t)LONG_MAX));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)b->opt.connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
    if (strcmp(rq->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(c, CURLOPT_READDATA, &up);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->body_len);
        if (rq->method[1] == 'O') curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (strcmp(rq->method, "DELETE") == 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    curl_slist_free_all(headers);
    give_handle(s, c);
    if (rc == CURLE_OK) return HANU_OK;
    if (resp->body_overflow)
        return bucket_fail(call, HANU_ERR_TOO_LARGE, "bucket: s3 %s %s: answer larger than %zu bytes", rq->method,
                           rq->key ? rq->key : "(list)", resp->body_max);
    call->retryable = rc != CURLE_OUT_OF_MEMORY && rc != CURLE_URL_MALFORMAT && rc != CURLE_UNSUPPORTED_PROTOCOL;
    return bucket_fail(call, HANU_ERR_IO, "bucket: s3 %s %s: %s", rq->method, rq->key ? rq->key : "(list)",
                       curl_easy_strerror(rc));
}

/* Maps an answer that is not 2xx to a status and a message naming S3's error code. */
static int s3_status(bucket_call *call, const s3_request *rq, const s3_response *resp)
{
    char code[64] = "", message[200] = "";
    s3_xml_span body = { resp->body ? (const char *)resp->body->data + resp->body_start : "",
                         resp->body ? resp->body->len - resp->body_start : 0 };
    s3_xml_first_text(body, "Code", code, sizeof code);
    s3_xml_first_text(body, "Message", message, sizeof message);
    long st = resp->status;
    int status = HANU_ERR_INVALID;
    if (st == 404) status = HANU_ERR_NOT_FOUND;
    else if (st == 412) status = HANU_ERR_MISMATCH;   /* the caller tells EXISTS from MISMATCH */
    else if (st == 429 || st >= 500 || st == 409 || strcmp(code, "RequestTimeout") == 0 ||
             strcmp(code, "SlowDown") == 0)
        status = HANU_ERR_IO, call->retryable = 1;
    /* Not retried (403): a skewed clock stays skewed until someone fixes it. */
    const char *hint = strcmp(code, "RequestTimeTooSkewed") == 0
                           ? " (this machine's clock differs from the store's by more than it allows, "
                             "15 minutes on AWS: check the clock, e.g. NTP)"
                       : st == 403 ? " (check the access key, the secret and the region)" : "";
    return bucket_fail(call, status, "bucket: s3 %s %s: %ld %s%s%s%s", rq->method, rq->key ? rq->key : "(list)", st,
                       code[0] ? code : "(no error code)", message[0] ? ": " : "", message, hint);
}

/* Sends and maps: OK for 2xx. The answer's body goes to body (may be NULL). */
static int s3_call(bucket *b, const s3_request *rq, hanu_buf *body, size_t body_max, s3_response *resp,
                   bucket_call *call)
{
    hanu_buf scratch = {0};
    memset(resp, 0, sizeof *resp);
    resp->body = body ? body : &scratch;
    resp->body_start = resp->body->len;
    resp->body_max = body ? body_max : S3_ERROR_BODY_MAX;
    int rc = s3_send(b, rq, resp, call);
    if (rc == HANU_OK && (resp->status < 200 || resp->status > 299)) rc = s3_status(call, rq, resp);
    if (rc != HANU_OK && body) body->len = resp->body_start;
    hanu_buf_free(&scratch);
    resp->body = NULL;
    return rc;
}

/* ---- the backend operations ---- */
static void condition_headers(enum bucket_put_mode mode, const char *etag, char *if_match, size_t cap,
                              const char **headers)
{
    if (mode == BUCKET_PUT_IF_ABSENT) {
        headers[0] = "If-None-Match: *";
    } else if (mode == BUCKET_PUT_IF_MATCH) {
        snprintf(if_match, cap, "If-Match: \"%s\"", etag);
        headers[0] = if_match;
    }
}

static int refused_condition(enum bucket_put_mode mode, int rc, const char *key, bucket_call *call)
{
    if (rc == HANU_ERR_MISMATCH && mode == BUCKET_PUT_IF_ABSENT)
        return bucket_fail(call, HANU_ERR_EXISTS, "bucket: %s exists", key);
    if (rc == HANU_ERR_NOT_FOUND && mode == BUCKET_PUT_IF_MATCH)
        return bucket_fail(call, HANU_ERR_NOT_FOUND, "bucket: %s: no such object", key);
    return rc;
}

/* One multipart request retried here (bucket.c counted only the first of the upload). */
static int s3_call_retried(bucket *b, const s3_request *rq, hanu_buf *body, s3_response *resp, bucket_call *call)
{
    int rc;
    for (uint32_t attempt = 1;; attempt++) {
        bucket_count(b, BUCKET_CLASS_A);
        call->retryable = 0;
        if (body) body->len = 0;
        rc = s3_call(b, rq, body, S3_ERROR_BODY_MAX, resp, call);
        if (rc == HANU_OK || !call->retryable || bucket_backoff(b, attempt + 1)) break;
    }
    call->retryable = 0;   /* retried enough; bucket.c must not start the upload again */
    return rc;
}

/* The parts of one multipart upload, sent by up to parallel_parts threads. */
typedef struct part_job {
    bucket *b;
    const char *key, *upload_id;
    const uint8_t *data;
    size_t len, part_size, count;
    atomic_size_t next;
    atomic_int failed;
    pthread_mutex_t lock;
    int rc;                           /* the first failure, and its message */
    char err[256];
    char (*etags)[BUCKET_ETAG_MAX + 1];
} part_job;

static void *send_parts(void *arg)
{
    part_job *j = arg;
    hanu_buf query = {0};
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->count || atomic_load(&j->failed)) break;
        char num[24], err[256] = "";
        snprintf(num, sizeof num, "%zu", i + 1);
        const char *const pairs[] = { "partNumber", num, "uploadId", j->upload_id };
        query.len = 0;
        bucket_call call = { .err = err, .errcap = sizeof err };
        int rc = build_query(&query, pairs, 4);
        size_t off = i * j->part_size;
        s3_request put = { "PUT", j->key, (const char *)query.data, j->data + off, HANU_MIN(j->part_size, j->len - off),
                           { NULL } };
        s3_response resp;
        if (rc == HANU_OK) rc = s3_call_retried(j->b, &put, NULL, &resp, &call);
        if (rc == HANU_OK && !resp.etag[0])
            rc = bucket_fail(&call, HANU_ERR_IO, "bucket: s3 part %zu of %s: no ETag in the answer", i + 1, j->key);
        if (rc == HANU_OK) {
            snprintf(j->etags[i], sizeof j->etags[i], "%s", resp.etag);
            continue;
        }
        pthread_mutex_lock(&j->lock);
        if (j->rc == HANU_OK) {
            j->rc = rc;
            snprintf(j->err, sizeof j->err, "%s", err);
        }
        pthread_mutex_unlock(&j->lock);
        atomic_store(&j->failed, 1);
    }
    hanu_buf_free(&query);
    return NULL;
}

/* Sends every part and writes the CompleteMultipartUpload body listing them. */
static int upload_parts(bucket *b, const char *key, const char *upload_id, const uint8_t *data, size_t len,
                        hanu_buf *complete, bucket_call *call)
{
    part_job j = { .b = b, .key = key, .upload_id = upload_id, .data = data, .len = len,
                   .part_size = b->opt.part_size, .count = (len + b->opt.part_size - 1) / b->opt.part_size };
    j.etags = calloc(j.count, sizeof *j.etags);
    if (!j.etags) return HANU_ERR_NOMEM;
    pthread_mutex_init(&j.lock, NULL);
    pthread_t threads[BUCKET_PARALLEL_PARTS_MAX];
    size_t started = 0, want = HANU_MIN((size_t)b->opt.parallel_parts, j.count);
    for (; started + 1 < want; started++)
        if (pthread_create(&threads[started], NULL, send_parts, &j) != 0) break;
    send_parts(&j);   /* this thread works too */
    for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
    int rc = j.rc;
    if (rc != HANU_OK) {
        bucket_fail(call, rc, "%s", j.err);
    } else {
        char line[BUCKET_ETAG_MAX + 80];
        hanu_buf_append(complete, "<CompleteMultipartUpload>", 25);
        for (size_t i = 0; i < j.count; i++) {
            int n = snprintf(line, sizeof line, "<Part><PartNumber>%zu</PartNumber><ETag>\"%s\"</ETag></Part>", i + 1,
                             j.etags[i]);
            if (hanu_buf_append(complete, line, (size_t)n) != HANU_OK) rc = HANU_ERR_NOMEM;
        }
        if (hanu_buf_append(complete, "</CompleteMultipartUpload>", 26) != HANU_OK) rc = HANU_ERR_NOMEM;
    }
    pthread_mutex_destroy(&j.lock);
    free(j.etags);
    return rc;
}

static int s3_put_multipart(bucket *b, const char *key, const uint8_t *data, size_t len, enum bucket_put_mode mode,
                            const char *etag, bucket_object_info *info, bucket_call *call)
{
    hanu_buf body = {0}, query = {0}, complete = {0};
    s3_response resp;
    char upload_id[S3_LIST_TOKEN_MAX], if_match[BUCKET_ETAG_MAX + 16];
    const char *const initiate[] = { "uploads", "" };
    build_query(&query, initiate, 2);
    s3_request rq = { "POST", key, (const char *)query.data, NULL, 0, { NULL } };
    int rc = s3_call(b, &rq, &body, S3_ERROR_BODY_MAX, &resp, call);   /* counted by bucket.c */
    s3_xml_span xml = { (const char *)body.data, body.len };
    if (rc == HANU_OK && s3_xml_first_text(xml, "UploadId", upload_id, sizeof upload_id) != 0)
        rc = bucket_fail(call, HANU_ERR_IO, "bucket: s3 multipart upload of %s: no UploadId in the answer", key);
    if (rc != HANU_OK) goto out;
    rc = upload_parts(b, key, upload_id, data, len, &complete, call);
    if (rc == HANU_OK && !bucket_guard_passes(call, key)) rc = HANU_ERR_STOPPED;   /* the parts stay invisible */
    if (rc == HANU_OK) {
        const char *const pairs[] = { "uploadId", upload_id };
        query.len = 0;
        build_query(&query, pairs, 2);
        s3_request done = { "POST", key, (const char *)query.data, complete.data, complete.len, { NULL } };
        condition_headers(mode, etag, if_match, sizeof if_match, done.headers);
        rc = s3_call_retried(b, &done, &body, &resp, call);
        xml.p = (const char *)body.data;
        xml.len = body.len;
        char code[64];
        /* S3 may answer 200 and put the error in the body. */
        if (rc == HANU_OK && s3_xml_first_text(xml, "Code", code, sizeof code) == 0)
            rc = bucket_fail(call, HANU_ERR_IO, "bucket: s3 completing %s: %s", key, code);
        if (rc == HANU_OK && info) {
            info->size = len;
            if (s3_xml_first_text(xml, "ETag", info->etag, sizeof info->etag) != 0) info->etag[0] = 0;
            size_t n = strlen(info->etag);
            if (n >= 2 && info->etag[0] == '"') memmove(info->etag, info->etag + 1, n - 2), info->etag[n - 2] = 0;
        }
        rc = refused_condition(mode, rc, key, call);
    }
    if (rc != HANU_OK) {   /* abort, so that the parts are not kept (and billed) */
        const char *const pairs[] = { "uploadId", upload_id };
        query.len = 0;
        build_query(&query, pairs, 2);
        s3_request abort_rq = { "DELETE", key, (const char *)query.data, NULL, 0, { NULL } };
        bucket_call quiet = { .err = NULL, .errcap = 0 };
        bucket_count(b, BUCKET_CLASS_A);
        s3_call(b, &abort_rq, NULL, 0, &resp, &quiet);
    }
out:
    hanu_buf_free(&body);
    hanu_buf_free(&query);
    hanu_buf_free(&complete);
    return rc;
}

static int s3_put(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
                  const char *etag, bucket_object_info *info, bucket_call *call)
{
    if (len > b->opt.multipart_threshold) return s3_put_multipart(b, key, data, len, mode, etag, info, call);
    char if_match[BUCKET_ETAG_MAX + 16];
    if (!bucket_guard_passes(call, key)) return HANU_ERR_STOPPED;
    s3_request rq = { "PUT", key, "", data, len, { NULL } };
    condition_headers(mode, etag, if_match, sizeof if_match, rq.headers);
    s3_response resp;
    int rc = refused_condition(mode, s3_call(b, &rq, NULL, 0, &resp, call), key, call);
    if (rc == HANU_OK && info) {
        info->size = len;
        snprintf(info->etag, sizeof info->etag, "%s", resp.etag);
    }
    return rc;
}

static int s3_get(bucket *b, const char *key, int ranged, uint64_t offset, size_t len, hanu_buf *out,
                  bucket_object_info *info, bucket_call *call)
{
    char range[80];
    s3_request rq = { "GET", key, "", NULL, 0, { NULL } };
    if (ranged) {
        snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)offset,
                 (unsigned long long)(offset + len - 1));
        rq.headers[0] = range;
    }
    s3_response resp;
    size_t start = out->len;
    int rc = s3_call(b, &rq, out, BUCKET_OBJECT_MAX, &resp, call);   /* a server may ignore Range */
    if (rc == HANU_ERR_INVALID && resp.status == 416)
        return bucket_fail(call, HANU_ERR_INVALID, "bucket: range at %llu is past the end of %s",
                           (unsigned long long)offset, key);
    if (rc == HANU_OK && ranged && resp.status == 200) {   /* a server that ignored Range sent it all */
        size_t got = out->len - start;
        if (offset >= got) {
            out->len = start;
            return bucket_fail(call, HANU_ERR_INVALID, "bucket: range at %llu is past the end of %s",
                               (unsigned long long)offset, key);
        }
        size_t n = HANU_MIN(len, got - (size_t)offset);
        memmove(out->data + start, out->data + start + offset, n);
        out->len = start + n;
    }
    if (rc == HANU_OK && info) {
        info->size = out->len - start;
        snprintf(info->etag, sizeof info->etag, "%s", resp.etag);
    }
    return rc;
}

static int s3_head(bucket *b, const char *key, bucket_object_info *info, bucket_call *call)
{
    s3_request rq = { "HEAD", key, "", NULL, 0, { NULL } };
    s3_response resp;
    int rc = s3_call(b, &rq, NULL, 0, &resp, call);
    if (rc == HANU_OK) {
        info->size = resp.has_length ? resp.content_length : 0;
        snprintf(info->etag, sizeof info->etag, "%s", resp.etag);
    }
    return rc;
}

static int s3_delete(bucket *b, const char *key, bucket_call *call)
{
    s3_request rq = { "DELETE", key, "", NULL, 0, { NULL } };
    s3_response resp;
    int rc = s3_call(b, &rq, NULL, 0, &resp, call);
    return rc == HANU_ERR_NOT_FOUND ? HANU_OK : rc;
}

typedef struct list_page_ctx {
    const char *strip;                /* the bucket's prefix, removed from each key */
    size_t strip_len;
    hanu_buf *page;
} list_page_ctx;

static int on_list_entry(void *ctx, const char *key, uint64_t size)
{
    list_page_ctx *l = ctx;
    if (strncmp(key, l->strip, l->strip_len) != 0) return 0;   /* not ours: ignored */
    return bucket_page_add(l->page, key + l->strip_len, size) == HANU_OK ? 0 : 1;
}

static int s3_list_page(bucket *b, const char *prefix, const char *token, hanu_buf *next, hanu_buf *page,
                        bucket_call *call)
{
    s3_bucket *s = sb(b);
    char full[BUCKET_KEY_MAX * 2 + 2], max_keys[16];
    snprintf(full, sizeof full, "%s%s", s->prefix, prefix);
    snprintf(max_keys, sizeof max_keys, "%u", b->opt.list_page_keys);
    const char *const pairs[] = { "continuation-token", token[0] ? token : NULL, "list-type", "2",
                                  "max-keys", max_keys, "prefix", full };
    hanu_buf query = {0}, body = {0};
    if (build_query(&query, pairs, 8) != HANU_OK) return HANU_ERR_NOMEM;
    s3_request rq = { "GET", NULL, (const char *)query.data, NULL, 0, { NULL } };
    s3_response resp;
    int rc = s3_call(b, &rq, &body, S3_LIST_BODY_MAX, &resp, call);
    if (rc == HANU_OK) {
        list_page_ctx l = { s->prefix, strlen(s->prefix), page };
        int truncated;
        char next_token[S3_LIST_TOKEN_MAX];
        s3_xml_span xml = { (const char *)body.data, body.len };
        int parsed = s3_xml_parse_list(xml, on_list_entry, &l, &truncated, next_token);
        if (parsed > 0) {
            rc = HANU_ERR_NOMEM;
        } else if (parsed < 0) {
            call->retryable = 1;
            rc = bucket_fail(call, HANU_ERR_IO, "bucket: s3 list %s: malformed answer", full);
        } else if (truncated) {
            hanu_buf_append(next, next_token, strlen(next_token));
        }
    }
    hanu_buf_free(&query);
    hanu_buf_free(&body);
    return rc;
}

static void s3_close(bucket *b)
{
    s3_bucket *s = sb(b);
    for (int i = 0; i < s->pooled; i++) curl_easy_cleanup(s->pool[i]);
    pthread_mutex_destroy(&s->pool_lock);
    free(s->endpoint);
    free(s->name);
    free(s->prefix);
    free(s->userpwd);
    free(s->sigv4);
    free(s->token_header);
    free(s);
}

static const bucket_ops s3_ops = { s3_put, s3_get, s3_head, s3_delete, s3_list_page, s3_close, NULL };

static const char *option_or_env(const char *option, const char *env1, const char *env2, const char *fallback)
{
    if (option && option[0]) return option;
    const char *v = getenv(env1);
    if ((!v || !v[0]) && env2) v = getenv(env2);
    return v && v[0] ? v : fallback;
}

static char *format(const char *fmt, const char *a, const char *b2)
{
    size_t n = strlen(fmt) + strlen(a) + (b2 ? strlen(b2) : 0) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, fmt, a, b2 ? b2 : "");
    return s;
}

static void init_curl(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int bucket_s3_open(bucket *b, const char *bucket_name, const char *prefix, char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
    pthread_once(&curl_once, init_curl);
    const char *region = option_or_env(b->opt.s3_region, "AWS_REGION", "AWS_DEFAULT_REGION", "us-east-1");
    const char *access = option_or_env(b->opt.s3_access_key, "AWS_ACCESS_KEY_ID", NULL, NULL);
    const char *secret = option_or_env(b->opt.s3_secret_key, "AWS_SECRET_ACCESS_KEY", NULL, NULL);
    const char *token = option_or_env(b->opt.s3_session_token, "AWS_SESSION_TOKEN", NULL, NULL);
    const char *endpoint = option_or_env(b->opt.s3_endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", NULL);
    if (!access || !secret)
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket: s3 needs an access key and a secret "
                           "(options or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
    if (strchr(access, ':') || strlen(region) > 64)
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket: s3 access key or region malformed");
    if (endpoint && strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0)
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket: s3 endpoint must start with http:// or https://");
    for (const char *p = bucket_name; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '.'))
            return bucket_fail(&call, HANU_ERR_INVALID, "bucket: s3 bucket name %s is not of [a-z0-9.-]", bucket_name);
    size_t plen = strlen(prefix);
    while (plen && prefix[plen - 1] == '/') plen--;
    /* Checked as a key is (bucket.h): a "." or ".." component would be removed by URL
       normalisation on the way (objects put elsewhere than they are listed), and an
       empty one is no folder of anything. */
    for (size_t i = 0; i < plen; i++) {
        char c = prefix[i];
        int start = i == 0 || prefix[i - 1] == '/';
        if (!(isalnum((unsigned char)c) || c == '-' || c == '_' || (c == '.' && !start) || (c == '/' && !start)))
            return bucket_fail(&call, HANU_ERR_INVALID, "bucket: s3 prefix \"%s\" is not of [A-Za-z0-9._-/] in "
                               "non-empty components not starting with '.' (no \".\" or \"..\")", prefix);
    }
    if (plen > BUCKET_KEY_MAX) return bucket_fail(&call, HANU_ERR_INVALID, "bucket: s3 prefix too long");
    s3_bucket *s = calloc(1, sizeof *s);
    if (!s) return HANU_ERR_NOMEM;
    pthread_mutex_init(&s->pool_lock, NULL);
    b->backend = s;
    b->ops = &s3_ops;
    char region_host[128];
    snprintf(region_host, sizeof region_host, "https://s3.%s.amazonaws.com", region);
    s->endpoint = strdup(endpoint ? endpoint : region_host);
    if (s->endpoint) {
        size_t n = strlen(s->endpoint);
        while (n && s->endpoint[n - 1] == '/') s->endpoint[--n] = 0;
    }
    s->name = strdup(bucket_name);
    s->prefix = malloc(plen + 2);
    if (s->prefix) {
        memcpy(s->prefix, prefix, plen);
        if (plen) s->prefix[plen++] = '/';
        s->prefix[plen] = 0;
    }
    s->userpwd = format("%s:%s", access, secret);
    s->sigv4 = format("aws:amz:%s:s3", region, NULL);
    s->token_header = token ? format("x-amz-security-token: %s", token, NULL) : NULL;
    if (!s->endpoint || !s->name || !s->prefix || !s->userpwd || !s->sigv4 || (token && !s->token_header)) {
        s3_close(b);
        b->ops = NULL;
        return HANU_ERR_NOMEM;
    }
    return HANU_OK;
}
