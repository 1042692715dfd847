/*
 * sealer: packs the store's change feed into hash-chained segment objects in the
 * bucket (docs/BUCKET.md, "The sealer"; the object format is docs/FORMATS.md,
 * "Segment object"). One thread of its own:
 *
 *   - it registers the store watermark "sealed_txn" and advances it only after a
 *     segment holding every record up to it is in the bucket, so compaction never
 *     drops a record the bucket does not have;
 *   - it reads the feed from the bucket's last txn + 1 and puts a segment every
 *     seal_interval_ms, or sooner when seal_bytes of records are waiting; a segment
 *     is put only once every record in it is durable in the log (a crash cannot
 *     take back what the bucket holds);
 *   - no records, no request: an idle sealer sleeps on a condition variable;
 *   - segments are created with put-if-absent: a collision means another writer
 *     extended the chain, and the sealer stops for good with HANU_ERR_FENCED;
 *   - any other failed put keeps the sealed bytes and tries the same object again
 *     later (backoff from retry_min_ms to retry_max_ms): nothing is skipped or
 *     reordered.
 *
 * Thread rules: every function may be called from any thread; the store and the
 * bucket must outlive the sealer (close it first).
 */
#ifndef HANU_SEALER_H
#define HANU_SEALER_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "bucket/bucket.h"
#include "store/store.h"

#define SEALER_WATERMARK "sealed_txn"

/* Called from the sealer thread after each segment put, with the highest txn the
   bucket now holds. It must only hand the number over (an eventfd, a pipe, an
   atomic the event loop reads): never call the store or the sealer, never block. */
typedef void (*sealer_sealed_fn)(void *ctx, uint64_t sealed_txn);

typedef struct sealer_options {
    uint32_t seal_interval_ms;      /* at most one segment per interval (default 1000) */
    uint64_t seal_bytes;            /* ... unless this many record bytes wait (default 4 MB, at most 64 MB) */
    int zstd_level;                 /* default 3 */
    uint32_t retry_min_ms;          /* first wait after a failed put, doubling (default 200) */
    uint32_t retry_max_ms;          /* longest wait between attempts (default 10000) */
    sealer_sealed_fn on_sealed;     /* may be NULL */
    /* Asked right before every put (also a retry): non-zero while this node may
       still extend the chain, a lease holder while its lease is valid. 0 stops the
       sealer for good (STOPPED): a node that lost its lease puts nothing more, not
       even what it had sealed. NULL: always. Must not block. */
    int (*may_put)(void *ctx);
    void *ctx;
} sealer_options;

void sealer_options_default(sealer_options *o);

typedef struct sealer sealer;

/* Finds where the chain ends in the bucket (lists segments/, reads the last
   header), registers the watermark and starts the thread. Refuses, with a
   message in err:
     FENCED    the bucket holds txns beyond this store's last txn (another writer,
               or a data directory older than the bucket);
     MISMATCH  the watermark says more is sealed than the bucket holds (a data
               directory sealed into another bucket: the records in between may be
               compacted away);
     CORRUPT   the last segment's header or trailer is damaged;
     IO, INVALID, NOMEM as the bucket and the store report them.
   Free with sealer_close. */
int sealer_open(store *s, bucket *b, const sealer_options *o, sealer **out, char *err, size_t errcap);
/* Stops the thread (a put in flight finishes first) and frees the sealer. Records
   not yet sealed stay in the store, under the watermark, for the next start. */
void sealer_close(sealer *z);

/* New records may be in the feed: look now rather than at the next tick (a
   condition-variable signal; cheap enough to call after every flush). Without it,
   seal_bytes is noticed only at the next tick of seal_interval_ms. */
void sealer_notify(sealer *z);
/* Seal up to txn now, without waiting for the interval: the ask holds until a
   segment covering txn is in the bucket. txn may not be written yet (a request
   asks before the event loop flushes its record): the sealer then waits until it
   is durable and seals it. txn must be one the log will write (else the sealer
   waits for it until the log stops). */
void sealer_seal_upto(sealer *z, uint64_t txn);
/* Blocks until the bucket holds txn: OK; the sealer's stopping status (FENCED,
   STOPPED, CORRUPT...) when it stopped; BUSY when timeout_ms passed first. */
int sealer_wait(sealer *z, uint64_t txn, uint32_t timeout_ms);

/* The highest txn the bucket holds (0: none). */
uint64_t sealer_sealed_txn(sealer *z);
/* OK while running; else why the thread stopped for good, with a message in msg. */
int sealer_status(sealer *z, char *msg, size_t cap);

typedef struct sealer_stats {
    uint64_t segments;              /* put by this sealer since it opened */
    uint64_t bytes;                 /* their object bytes */
    uint64_t records;               /* their feed entries */
    uint64_t sequence;              /* of the chain's last segment in the bucket (0: none) */
    uint64_t sealed_txn;
    uint64_t last_upload_ms;        /* wall clock of the last put, ms since the epoch (0: none) */
    uint64_t failed_puts;           /* attempts that failed and were tried again */
    uint64_t class_a, class_b;      /* the bucket's request counters (bucket_get_counters) */
    int status;                     /* as sealer_status */
} sealer_stats;

void sealer_get_stats(sealer *z, sealer_stats *out);

#endif
