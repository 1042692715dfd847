/*
 * lease: which node of several on one bucket is the writer (docs/REPLICATION.md).
 *
 * The lease is one small object, "lease", in the bucket: the holder's id, its
 * advertised URL, an expiry on the holder's wall clock, a term number and the
 * holder's txn at the last renewal. Only the bucket's conditional operations touch it:
 *
 *   - take: put-if-absent when there is none; compare-and-swap from the ETag just
 *     read when the holder's stated expiry, plus a margin, is past on our own
 *     clock, or when the object has been unreadable and unchanged for a TTL and
 *     the margin. Of racing takers exactly one wins. The new term is above every
 *     term this node has seen and every term that wrote the chain (from its txn
 *     numbering): terms only grow, also after the object was deleted. A lease
 *     naming our own holder id is ours (a take whose answer was lost);
 *   - renew: compare-and-swap from the ETag of our last write, every third of the
 *     TTL. When that ETag no longer matches, the lease is read back: our own
 *     holder and term (a renewal whose answer was lost) or unreadable bytes are
 *     rewritten; anything else in its place (a newer term) means the lease is lost.
 *
 * The lease only decides who should write. What keeps a demoted writer from
 * extending the chain is put-if-absent on the segments (sealer.h): its next put
 * collides. The keeper below makes the writer stop before a taker may start: it
 * publishes until when (monotonic clock) its lease is valid, the TTL less a margin
 * from the moment the renewal was sent, and the server refuses writes and exits
 * once that passes.
 */
#ifndef HANU_LEASE_H
#define HANU_LEASE_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "bucket/bucket.h"

#define LEASE_KEY "lease"
#define LEASE_HOLDER_MAX 64
#define LEASE_URL_MAX 512
#define LEASE_OBJECT_MAX 4096           /* larger objects are refused unread */

typedef struct lease {
    char holder[LEASE_HOLDER_MAX + 1];  /* [A-Za-z0-9_.:-], unique per process */
    char url[LEASE_URL_MAX + 1];        /* advertised URL, "" when none */
    uint64_t expires_ms;                /* holder's wall clock, ms since the epoch */
    uint64_t term;                      /* 1 for the first holder, +1 at each take-over */
    uint64_t txn;                       /* the holder's last txn when it wrote the lease */
} lease;

/* The object's bytes: one JSON object {"holder":..,"url":..,"expires_ms":..,"term":..,"txn":..}. */
int lease_encode(const lease *l, hanu_buf *out);
/* Parses untrusted bytes (fuzz/fuzz_lease.c): CORRUPT with a message for anything
   that is not exactly such an object within the limits above. */
int lease_decode(const char *in, size_t len, lease *out, char *err, size_t errcap);
/* Whether the lease's stated expiry plus margin_ms is past at now_ms (our clock). */
int lease_expired(const lease *l, uint64_t now_ms, uint32_t margin_ms);

/* Reads the lease: OK, NOT_FOUND (none yet), CORRUPT (etag is then the unreadable
   object's), the bucket's errors. */
int lease_read(bucket *b, lease *out, char etag[BUCKET_ETAG_MAX + 1], char *err, size_t errcap);

/* ---- the keeper: a thread that takes the lease when it can and renews it ---- */

typedef struct lease_keeper_options {
    const char *holder;                 /* NULL: a random id */
    const char *url;                    /* advertised URL, may be NULL */
    uint32_t ttl_ms;                    /* default 10 000 */
    uint32_t check_ms;                  /* a standby reads the lease this often (default ttl/4, 100..1000) */
    /* The current txn, written into the lease at each renewal (followers' lag). */
    uint64_t (*current_txn)(void *ctx);
    /* The highest term that claimed a txn range (numbering.h), read before a take;
       a new term goes above it. May be NULL. */
    uint64_t (*claimed_term)(void *ctx);
    /* Keeper thread, once the lease is taken: make this node the writer. Non-zero: it
       could not; the keeper stops (the server exits). */
    int (*promote)(void *ctx, uint64_t term);
    void *ctx;
} lease_keeper_options;

typedef struct lease_keeper lease_keeper;

/* Starts the thread (a standby: it reads the lease at once, and takes it if it can). */
int lease_keeper_start(bucket *b, const lease_keeper_options *o, lease_keeper **out, char *err, size_t errcap);
/* Stops the thread; a held lease is left to expire (the next holder waits out its TTL). */
void lease_keeper_stop(lease_keeper *k);
/* Stops the thread and, when release is set and the lease is ours (held, or taken
   by a promotion that failed), rewrites it as expired (compare-and-swap): a standby
   takes it at its next check. Only once this node can put nothing more into the chain. */
void lease_keeper_stop_and_release(lease_keeper *k, int release);

enum lease_state {
    LEASE_STANDBY = 0,      /* someone else holds it, or nobody yet */
    LEASE_PROMOTING,        /* taken; promote() runs */
    LEASE_HOLDING,          /* taken and promoted: this node writes */
    LEASE_LOST,             /* was held, then renewal failed or someone else took it */
    LEASE_FAILED,           /* promote() failed */
};

typedef struct lease_keeper_status {
    int state;                          /* enum lease_state */
    uint64_t valid_until_ns;            /* HOLDING: monotonic time until which this node may write */
    lease seen;                         /* the lease as last read or written (holder "" if none) */
    uint64_t renewals, renew_failures, takes;
    char message[256];                  /* why LOST or FAILED, or the last bucket error */
} lease_keeper_status;

void lease_keeper_get(lease_keeper *k, lease_keeper_status *out);
/* HOLDING (or PROMOTING: promote() hands writing over before it returns) and the
   validity not yet past now_ns: this node may accept writes. */
int lease_keeper_may_write(lease_keeper *k, uint64_t now_ns);
/* The monotonic time (hanu_now_ns) at which may_write turns false unless a renewal
   lands first (0 while not holding): a holder's loop sleeps until then, no longer. */
uint64_t lease_keeper_valid_until(lease_keeper *k);

#endif
