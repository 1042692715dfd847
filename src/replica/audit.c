/*
 * audit.c: the chain and manifest checks of audit.h, moved out of `hanudb audit`
 * so the server can run them too (POST /_admin/audit).
 */
#include "replica/audit.h"
#include "bucket/segment.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct key_list {
    audit_result *r;
    size_t cap;
} key_list;

static int collect_key(void *ctx, const char *key, uint64_t size)
{
    key_list *l = ctx;
    audit_result *r = l->r;
    (void)size;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK) {
        if (!r->object[0]) snprintf(r->object, sizeof r->object, "%s", key);   /* the first stray one */
        return 0;
    }
    if (r->nkeys == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **k = realloc(r->keys, cap * sizeof *k);
        if (!k) return HANU_ERR_NOMEM;
        r->keys = k;
        l->cap = cap;
    }
    if (!(r->keys[r->nkeys] = strdup(key))) return HANU_ERR_NOMEM;
    r->nkeys++;
    return 0;
}

static int finish(audit_result *r, int status, const char *object, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int finish(audit_result *r, int status, const char *object, const char *fmt, ...)
{
    r->status = status;
    if (object != r->object) snprintf(r->object, sizeof r->object, "%s", object ? object : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    return status;
}

/* snapshot_audit's messages start with the object they are about ("manifests/..: ..."). */
static int manifest_problem(audit_result *r, const char *err)
{
    const char *colon = strstr(err, ": ");
    if (!colon || (size_t)(colon - err) > BUCKET_KEY_MAX || memchr(err, ' ', (size_t)(colon - err)))
        return finish(r, AUDIT_PROBLEM, NULL, "%s", err);
    char object[BUCKET_KEY_MAX + 1];
    snprintf(object, sizeof object, "%.*s", (int)(colon - err), err);
    return finish(r, AUDIT_PROBLEM, object, "%s", colon + 2);
}

static void report(const audit_options *o, const audit_result *r, uint64_t total)
{
    if (!o->progress) return;
    audit_progress p = {
        .segments_total = total, .segments_checked = r->segments,
        .bytes_read = r->segment_bytes + r->snaps.bytes, .manifests_checked = r->snaps.manifests,
    };
    o->progress(o->ctx, &p);
}

/* Reads and checks every listed segment in order. */
static int audit_chain(bucket *b, const audit_options *o, audit_result *r)
{
    const snapshot_audit_result *snaps = &r->snaps;
    segment_chain chain;
    segment_chain_init(&chain);
    hanu_buf obj = { 0 };
    char err[AUDIT_REASON_MAX];
    int status = AUDIT_OK;
    for (size_t i = 0; i < r->nkeys && status == AUDIT_OK; i++) {
        if (o->stop && atomic_load(o->stop)) {
            status = finish(r, AUDIT_STOPPED, NULL, "the audit was stopped");
            break;
        }
        err[0] = '\0';
        hanu_buf_reset(&obj);
        int rc = bucket_get(b, r->keys[i], &obj, NULL, err, sizeof err);
        segment seg;
        if (rc == HANU_OK) rc = segment_decode(obj.data, obj.len, &seg, err, sizeof err);
        if (rc == HANU_OK && i == 0 && seg.header.sequence > 1) {
            /* Older segments were deleted by retention: only a manifest may stand for them. */
            if (!snaps->manifests || seg.header.sequence > snaps->oldest_replay_sequence) {
                snprintf(err, sizeof err, "the chain starts at sequence %llu, but %s", (unsigned long long)seg.header.sequence,
                         snaps->manifests ? "the oldest manifest replays from an earlier one (segments are missing)"
                                          : "no manifest stands for the segments before it (they are missing)");
                rc = HANU_ERR_CORRUPT;
            }
            chain.next_sequence = seg.header.sequence;
            memcpy(chain.prev_hash, seg.header.prev_hash, SEGMENT_HASH_SIZE);
        }
        if (rc == HANU_OK && snaps->manifests && seg.header.sequence == snaps->oldest_replay_sequence &&
            memcmp(seg.header.prev_hash, snaps->oldest_prev_hash, SEGMENT_HASH_SIZE) != 0) {
            snprintf(err, sizeof err, "its previous hash is not the one the oldest manifest recorded "
                     "(a segment of another chain)");
            rc = HANU_ERR_CORRUPT;
        }
        if (rc == HANU_OK) {
            rc = segment_chain_next(&chain, &seg.header, err, sizeof err);
            if (!r->first_txn) r->first_txn = seg.header.first_txn;
            r->records += seg.header.record_count;
            r->segment_bytes += obj.len;
            segment_free(&seg);
        }
        if (rc != HANU_OK) {
            status = finish(r, AUDIT_PROBLEM, r->keys[i], "%s", err[0] ? err : hanu_status_str(rc));
        } else {
            r->segments++;
            r->last_txn = chain.last_txn;
            report(o, r, r->nkeys);
        }
    }
    hanu_buf_free(&obj);
    return status;
}

int audit_bucket(bucket *b, const audit_options *o, audit_result *out)
{
    static const audit_options none = { .progress = NULL };
    if (!o) o = &none;
    memset(out, 0, sizeof *out);
    char err[AUDIT_REASON_MAX] = "";
    int rc = snapshot_audit_until(b, o->stop, &out->snaps, err, sizeof err);
    if (rc == HANU_ERR_STOPPED) return finish(out, AUDIT_STOPPED, NULL, "the audit was stopped");
    if (rc == HANU_ERR_CORRUPT || rc == HANU_ERR_NOT_FOUND) return manifest_problem(out, err);
    if (rc != HANU_OK) return finish(out, AUDIT_UNREADABLE, NULL, "%s", err[0] ? err : hanu_status_str(rc));
    report(o, out, 0);
    key_list l = { .r = out };
    rc = bucket_list(b, SEGMENT_KEY_PREFIX, collect_key, &l, err, sizeof err);
    out->listed = rc == HANU_OK;
    if (rc != HANU_OK) return finish(out, AUDIT_UNREADABLE, "", "%s", err[0] ? err : hanu_status_str(rc));
    if (out->object[0])
        return finish(out, AUDIT_PROBLEM, out->object, "not a segment object (a stray or extra object in the chain)");
    report(o, out, out->nkeys);
    int status = audit_chain(b, o, out);
    if (status == AUDIT_OK) out->status = AUDIT_OK;
    return status;
}

void audit_result_free(audit_result *r)
{
    for (size_t i = 0; i < r->nkeys; i++) free(r->keys[i]);
    free(r->keys);
    r->keys = NULL;
    r->nkeys = 0;
}
