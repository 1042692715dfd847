/*
 * audit: reads a bucket's whole chain of segment objects and checks every one
 * (header, trailer, zstd frame, every record) and every link (sequence + 1, the
 * previous trailer's hash, txns increasing), and every snapshot manifest with
 * every file it names (snapshot.h: present, size, SHA-256). Retention deletes the
 * segments before the oldest manifest's replay sequence: the chain may then start
 * there, and that segment's previous hash must be the one the manifest recorded.
 * It writes nothing. `hanudb audit` and the server's POST /_admin/audit run it.
 *
 * Thread rules: one call audits one bucket handle on the calling thread; the
 * progress callback runs on that thread; the stop flag may be set from any thread.
 */
#ifndef HANU_AUDIT_H
#define HANU_AUDIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "bucket/bucket.h"
#include "replica/snapshot.h"

/* audit_bucket's outcome (also the CLI's exit status). */
enum {
    AUDIT_OK = 0,          /* the chain and every manifest are whole */
    AUDIT_PROBLEM = 1,     /* a damaged, missing or stray object: the first one is in object and reason */
    AUDIT_UNREADABLE = 2,  /* the bucket could not be listed or read (reason) */
    AUDIT_STOPPED = 3,     /* options.stop was set */
};

#define AUDIT_REASON_MAX 512

/* How far it got: the manifests first (their files read whole), then the segments. */
typedef struct audit_progress {
    uint64_t segments_total;     /* listed (0 until the manifests are done) */
    uint64_t segments_checked;
    uint64_t bytes_read;         /* of segments and snapshot files */
    uint32_t manifests_checked;  /* known once all are done */
} audit_progress;

typedef void (*audit_progress_fn)(void *ctx, const audit_progress *p);

typedef struct audit_options {
    audit_progress_fn progress;  /* after the manifests and after each segment; NULL: none */
    void *ctx;
    const _Atomic int *stop;     /* set: the audit ends soon with AUDIT_STOPPED; NULL: never */
} audit_options;

typedef struct audit_result {
    int status;                       /* AUDIT_* */
    uint64_t segments, records, first_txn, last_txn;
    uint64_t segment_bytes;           /* of the segment objects read */
    snapshot_audit_result snaps;      /* the manifests and their files */
    char object[BUCKET_KEY_MAX + 1];  /* the first problem's object ("": not one object) */
    char reason[AUDIT_REASON_MAX];    /* and why (empty when OK) */
    int listed;                       /* the segment keys were listed: keys holds them all */
    char **keys;                      /* the segment keys, in byte order (the CLI's twin check) */
    size_t nkeys;
} audit_result;

/* Audits the bucket; returns out->status. Free out with audit_result_free. */
int audit_bucket(bucket *b, const audit_options *o, audit_result *out);
void audit_result_free(audit_result *r);

#endif
