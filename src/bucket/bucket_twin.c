/*
 * bucket_twin.c: twin buckets (bucket.h, docs/BUCKET.md "Twin buckets"): a backend
 * whose two "stores" are whole buckets. bucket.c counts and checks each request
 * once and never retries it here (the twin has max_attempts 1 and marks nothing
 * retryable); each side's own bucket counts, simulates and retries its requests.
 *
 * Writes go to both sides at once: side 1 on a thread of its own, side 0 on the
 * caller's, so a put costs the slower side's time, not the sum. Reads try side 0,
 * then side 1.
 */
#include "bucket/bucket_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <openssl/evp.h>

typedef struct twin {
    bucket *side[2];
} twin;

static twin *tw(bucket *b) { return b->backend; }

/* ---- one request on both sides at once ---- */

enum side_op { SIDE_PUT, SIDE_PUT_IF_ABSENT, SIDE_DELETE, SIDE_LIST };

typedef struct side_call {
    bucket *b;
    enum side_op op;
    const char *key;                    /* or the prefix of a list */
    const void *data;
    size_t len;
    bucket_object_info info;
    bucket_list_fn fn;                  /* list */
    void *ctx;
    int (*guard)(void *ctx);            /* put_if_absent: the twin's guard, asked by each side */
    void *guard_ctx;
    int rc;
    char err[384];
} side_call;

static void *run_side(void *arg)
{
    side_call *s = arg;
    switch (s->op) {
    case SIDE_PUT: s->rc = bucket_put(s->b, s->key, s->data, s->len, &s->info, s->err, sizeof s->err); break;
    case SIDE_PUT_IF_ABSENT:
        s->rc = s->guard ? bucket_put_if_absent_guarded(s->b, s->key, s->data, s->len, s->guard, s->guard_ctx, &s->info,
                                                        s->err, sizeof s->err)
                         : bucket_put_if_absent(s->b, s->key, s->data, s->len, &s->info, s->err, sizeof s->err);
        break;
    case SIDE_DELETE: s->rc = bucket_delete(s->b, s->key, s->err, sizeof s->err); break;
    case SIDE_LIST: s->rc = bucket_list(s->b, s->key, s->fn, s->ctx, s->err, sizeof s->err); break;
    }
    return NULL;
}

/* Runs calls[0] here and calls[1] on a thread at the same time (one after the
   other when no thread can be started). */
static void run_both(side_call calls[2])
{
    pthread_t t;
    int threaded = pthread_create(&t, NULL, run_side, &calls[1]) == 0;
    run_side(&calls[0]);
    if (threaded) pthread_join(t, NULL);
    else run_side(&calls[1]);
}

static const char *side_name(int i) { return i == 0 ? "first" : "second"; }

/* The first failing side's status, its message naming the side. */
static int side_failure(bucket *b, const side_call calls[2], bucket_call *call)
{
    for (int i = 0; i < 2; i++)
        if (calls[i].rc != HANU_OK)
            return bucket_fail(call, calls[i].rc, "bucket twin, %s bucket (%s): %s", side_name(i),
                               bucket_url(tw(b)->side[i]), calls[i].err[0] ? calls[i].err
                                                                              : hanu_status_str(calls[i].rc));
    return HANU_OK;
}

/* After EXISTS on one side: does that side hold exactly these bytes? 1 yes, 0 no
   (other bytes), or a negative status when it could not be read. */
static int side_holds(bucket *side, const char *key, const void *data, size_t len, bucket_object_info *info,
                      char *err, size_t errcap)
{
    hanu_buf got = {0};
    int rc = bucket_get(side, key, &got, info, err, errcap);
    if (rc == HANU_OK) rc = got.len == len && (len == 0 || memcmp(got.data, data, len) == 0);
    hanu_buf_free(&got);
    return rc;
}

static int twin_put_if_absent(bucket *b, side_call calls[2], bucket_call *call)
{
    int ours = 0, foreign = 0;
    for (int i = 0; i < 2; i++) {
        side_call *s = &calls[i];
        if (s->rc != HANU_ERR_EXISTS) {
            ours += s->rc == HANU_OK;
            continue;
        }
        int held = side_holds(s->b, s->key, s->data, s->len, &s->info, s->err, sizeof s->err);
        if (held == 1) s->rc = HANU_OK, ours++;
        else if (held == 0) foreign++;
        else s->rc = held;
    }
    if (foreign && ours)
        return bucket_fail(call, HANU_ERR_FENCED, "bucket twin: %s exists with other bytes in one bucket and with "
                           "ours in the other: another writer wrote to one of them", calls[0].key);
    if (foreign) return bucket_fail(call, HANU_ERR_EXISTS, "bucket twin: %s exists", calls[0].key);
    return side_failure(b, calls, call);
}

static int twin_put(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
                    const char *etag, bucket_object_info *info, bucket_call *call)
{
    twin *t = tw(b);
    if (mode == BUCKET_PUT_IF_MATCH) {
        /* The first bucket decides (the twin's ETags are its); the second follows. */
        int rc = bucket_compare_and_swap(t->side[0], key, etag, data, len, info, call->err, call->errcap);
        if (rc != HANU_OK) return rc;
        side_call second = { .b = t->side[1], .op = SIDE_PUT, .key = key, .data = data, .len = len };
        run_side(&second);
        if (second.rc != HANU_OK)
            return bucket_fail(call, second.rc, "bucket twin, second bucket (%s): %s", bucket_url(t->side[1]),
                               second.err);
        return HANU_OK;
    }
    /* Each side asks the guard as late as its own backend can (right before the object
       appears there); asking here too spares both sides' work when it already says no. */
    if (!bucket_guard_passes(call, key)) return HANU_ERR_STOPPED;
    side_call calls[2];
    for (int i = 0; i < 2; i++)
        calls[i] = (side_call){ .b = t->side[i], .op = mode == BUCKET_PUT_IF_ABSENT ? SIDE_PUT_IF_ABSENT : SIDE_PUT,
                                .key = key, .data = data, .len = len, .guard = call->guard,
                                .guard_ctx = call->guard_ctx };
    run_both(calls);
    int rc = mode == BUCKET_PUT_IF_ABSENT ? twin_put_if_absent(b, calls, call) : side_failure(b, calls, call);
    if (rc == HANU_OK && info) *info = calls[0].info;
    return rc;
}

/* Reads side 0, then side 1: NOT_FOUND only when both say so, else the first error. */
static int read_either(bucket *b, const char *key, int ranged, uint64_t offset, size_t len, hanu_buf *out,
                       bucket_object_info *info, int head, bucket_call *call)
{
    int rcs[2];
    char errs[2][384];
    for (int i = 0; i < 2; i++) {
        bucket *side = tw(b)->side[i];
        errs[i][0] = 0;
        if (head) rcs[i] = bucket_head(side, key, info, errs[i], sizeof errs[i]);
        else if (ranged) rcs[i] = bucket_get_range(side, key, offset, len, out, errs[i], sizeof errs[i]);
        else rcs[i] = bucket_get(side, key, out, info, errs[i], sizeof errs[i]);
        if (rcs[i] == HANU_OK) return HANU_OK;
    }
    int i = rcs[0] == HANU_ERR_NOT_FOUND && rcs[1] != HANU_ERR_NOT_FOUND ? 1 : 0;
    return bucket_fail(call, rcs[i], "bucket twin: %s", errs[i][0] ? errs[i] : hanu_status_str(rcs[i]));
}

static int twin_get(bucket *b, const char *key, int ranged, uint64_t offset, size_t len, hanu_buf *out,
                    bucket_object_info *info, bucket_call *call)
{
    return read_either(b, key, ranged, offset, len, out, info, 0, call);
}

static int twin_head(bucket *b, const char *key, bucket_object_info *info, bucket_call *call)
{
    return read_either(b, key, 0, 0, 0, NULL, info, 1, call);
}

static int twin_delete(bucket *b, const char *key, bucket_call *call)
{
    side_call calls[2];
    for (int i = 0; i < 2; i++) calls[i] = (side_call){ .b = tw(b)->side[i], .op = SIDE_DELETE, .key = key };
    run_both(calls);
    return side_failure(b, calls, call);
}

/* ---- lists: each side's keys in order, then merged ---- */

typedef struct key_list {
    char **keys;                        /* each key, its NUL, then its size (8 bytes) */
    size_t n, cap;
    int failed;
} key_list;

static int keep_key(void *ctx, const char *key, uint64_t size)
{
    key_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **keys = realloc(l->keys, cap * sizeof *keys);
        if (!keys) return l->failed = 1;
        l->keys = keys;
        l->cap = cap;
    }
    size_t n = strlen(key);
    char *k = malloc(n + 9);
    if (!k) return l->failed = 1;
    memcpy(k, key, n + 1);
    memcpy(k + n + 1, &size, 8);
    l->keys[l->n++] = k;
    return 0;
}

static uint64_t key_size(const char *k)
{
    uint64_t size;
    memcpy(&size, k + strlen(k) + 1, 8);
    return size;
}

static void key_list_free(key_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->keys[i]);
    free(l->keys);
}

/* Lists both sides at once into lists[0] and lists[1] (each in byte order). */
static int list_both(bucket *b, const char *prefix, key_list lists[2], bucket_call *call)
{
    side_call calls[2];
    for (int i = 0; i < 2; i++) {
        lists[i] = (key_list){0};
        calls[i] = (side_call){ .b = tw(b)->side[i], .op = SIDE_LIST, .key = prefix, .fn = keep_key, .ctx = &lists[i] };
    }
    run_both(calls);
    if (lists[0].failed || lists[1].failed) return HANU_ERR_NOMEM;
    return side_failure(b, calls, call);
}

static int twin_list_page(bucket *b, const char *prefix, const char *token, hanu_buf *next, hanu_buf *page,
                          bucket_call *call)
{
    (void)token;
    (void)next;   /* one page holds the union */
    key_list l[2];
    int rc = list_both(b, prefix, l, call);
    for (size_t i = 0, j = 0; rc == HANU_OK && (i < l[0].n || j < l[1].n);) {
        int d = i == l[0].n ? 1 : j == l[1].n ? -1 : strcmp(l[0].keys[i], l[1].keys[j]);
        const char *k = d <= 0 ? l[0].keys[i] : l[1].keys[j];
        rc = bucket_page_add(page, k, key_size(k));
        if (d <= 0) i++;
        if (d >= 0) j++;
    }
    key_list_free(&l[0]);
    key_list_free(&l[1]);
    return rc;
}

static void twin_counters(bucket *b, bucket_counters *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 2; i++) {
        bucket_counters c;
        bucket_get_counters(tw(b)->side[i], &c);
        out->class_a += c.class_a;
        out->class_b += c.class_b;
        out->retries += c.retries;
        out->bytes_up += c.bytes_up;
        out->bytes_down += c.bytes_down;
    }
}

static void twin_close(bucket *b)
{
    twin *t = tw(b);
    bucket_close(t->side[0]);
    bucket_close(t->side[1]);
    free(t);
}

static const bucket_ops twin_ops = { twin_put, twin_get, twin_head, twin_delete, twin_list_page, twin_close,
                                     twin_counters };

int bucket_twin_join(bucket *first, bucket *second, bucket **out, char *err, size_t errcap)
{
    *out = NULL;
    bucket *b = calloc(1, sizeof *b);
    twin *t = calloc(1, sizeof *t);
    char url[BUCKET_URL_MAX + 1];
    snprintf(url, sizeof url, "%s + %s", bucket_url(first), bucket_url(second));
    if (!b || !t || bucket_init_wrapper(b, url) != HANU_OK) {
        free(b);
        free(t);
        bucket_close(first);
        bucket_close(second);
        if (err && errcap) snprintf(err, errcap, "bucket twin: out of memory");
        return HANU_ERR_NOMEM;
    }
    t->side[0] = first;
    t->side[1] = second;
    b->backend = t;
    b->ops = &twin_ops;
    *out = b;
    return HANU_OK;
}

int bucket_twin_open(const char *url_a, const char *url_b, const bucket_options *o, bucket **out, char *err,
                     size_t errcap)
{
    *out = NULL;
    if (strcmp(url_a, url_b) == 0) {
        if (err && errcap) snprintf(err, errcap, "bucket twin: the two buckets are the same URL %s", url_a);
        return HANU_ERR_INVALID;
    }
    bucket *a = NULL, *b = NULL;
    int rc = bucket_open(url_a, o, &a, err, errcap);
    if (rc == HANU_OK) rc = bucket_open(url_b, o, &b, err, errcap);
    if (rc != HANU_OK) {
        bucket_close(a);
        return rc;
    }
    return bucket_twin_join(a, b, out, err, errcap);
}

bucket *bucket_twin_side(bucket *b, int side)
{
    if (!b || b->ops != &twin_ops || side < 0 || side > 1) return NULL;
    return tw(b)->side[side];
}

/* ---- re-mirroring ---- */

/* Does etag name these bytes? 1 yes, 0 no, -1 when it is no hash we know (a
   multipart ETag, or a store's own). */
static int etag_matches(const char *etag, const void *data, size_t len)
{
    size_t n = strlen(etag);
    char hex[65];
    if (n == 64) {
        bucket_sha256_hex(data, len, hex);
        return strcmp(hex, etag) == 0;
    }
    if (n == 32 && !strchr(etag, '-')) {
        uint8_t h[EVP_MAX_MD_SIZE];
        unsigned int hl = 0;
        if (!EVP_Digest(data, len, h, &hl, EVP_md5(), NULL) || hl != 16) return -1;
        for (unsigned i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
        return strcasecmp(hex, etag) == 0;
    }
    return -1;
}

/* Copies key from side `from` to the other and verifies it there. */
static int copy_one(twin *t, int from, const char *key, bucket_twin_stats *st, char *err, size_t errcap)
{
    bucket *src = t->side[from], *dst = t->side[1 - from];
    hanu_buf obj = {0};
    bucket_object_info there;
    int rc = bucket_get(src, key, &obj, NULL, err, errcap);
    if (rc == HANU_OK) rc = bucket_put_if_absent(dst, key, obj.data, obj.len, NULL, err, errcap);
    if (rc == HANU_ERR_EXISTS) rc = HANU_OK;   /* written meanwhile (by the sealer): the head checks it */
    if (rc == HANU_OK) rc = bucket_head(dst, key, &there, err, errcap);
    if (rc == HANU_OK && (there.size != obj.len || etag_matches(there.etag, obj.data, obj.len) == 0)) {
        rc = HANU_ERR_CORRUPT;
        snprintf(err, errcap, "bucket twin: %s copied to %s reads back as %llu bytes, ETag %s; the source has "
                 "%zu bytes", key, bucket_url(dst), (unsigned long long)there.size, there.etag, obj.len);
    }
    if (rc == HANU_OK) {
        st->copied_to[1 - from]++;
        st->bytes_copied += obj.len;
    }
    hanu_buf_free(&obj);
    return rc;
}

int bucket_twin_remirror(bucket *b, const char *prefix, bucket_twin_stats *st, char *err, size_t errcap)
{
    memset(st, 0, sizeof *st);
    char local[384];
    if (!err || !errcap) err = local, errcap = sizeof local;
    err[0] = 0;
    bucket_call call = { .err = err, .errcap = errcap };
    if (!bucket_twin_side(b, 0))
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket %s is no twin: nothing to re-mirror", bucket_url(b));
    twin *t = tw(b);
    key_list l[2];
    int rc = list_both(b, prefix, l, &call), first_rc = rc;
    st->listed[0] = l[0].n;
    st->listed[1] = l[1].n;
    char copy_err[384];
    for (size_t i = 0, j = 0; rc == HANU_OK && (i < l[0].n || j < l[1].n);) {
        int d = i == l[0].n ? 1 : j == l[1].n ? -1 : strcmp(l[0].keys[i], l[1].keys[j]);
        const char *k = d <= 0 ? l[0].keys[i] : l[1].keys[j];
        int one = HANU_OK;
        if (d == 0 && key_size(l[0].keys[i]) != key_size(l[1].keys[j])) {
            st->differ++;
            if (!st->first_problem[0]) snprintf(st->first_problem, sizeof st->first_problem, "%s", k);
        } else if (d != 0) {
            one = copy_one(t, d < 0 ? 0 : 1, k, st, copy_err, sizeof copy_err);
        }
        if (one != HANU_OK) {
            st->failed++;
            if (!st->first_problem[0]) snprintf(st->first_problem, sizeof st->first_problem, "%s", k);
            if (first_rc == HANU_OK) {
                first_rc = one;
                snprintf(err, errcap, "%s", copy_err);
            }
        }
        if (d <= 0) i++;
        if (d >= 0) j++;
    }
    key_list_free(&l[0]);
    key_list_free(&l[1]);
    return first_rc;
}
