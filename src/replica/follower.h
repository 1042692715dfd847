/*
 * follower: keeps a store up to date with the bucket's chain (docs/REPLICATION.md).
 * One thread polls the chain every poll_ms (chain.h: fetch, verify, replay with the
 * writer's own txns) and flushes what it replayed to the log, where the indexer and
 * every reader see it. The follower's thread is the store's only writer while it
 * runs: the server accepts no writes then.
 *
 * follower_open applies everything the bucket holds before it returns (the boot: an
 * empty data directory rebuilds from segment 1, a restarted follower continues after
 * its last txn). follower_finish hands the store over to a new writer: the thread
 * stops, and the caller's thread applies what is left.
 */
#ifndef HANU_FOLLOWER_H
#define HANU_FOLLOWER_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "bucket/bucket.h"
#include "store/store.h"

#define FOLLOWER_POLL_MS_MIN 100

typedef struct follower_options {
    uint32_t poll_ms;               /* default 1000, at least FOLLOWER_POLL_MS_MIN */
    /* Once, when the follower finds itself behind the bucket's retention (the segments
       it needs next were removed after a snapshot): from the polling thread, or from
       follower_finish's caller. It polls no more; only a re-boot from the newest
       snapshot can bring it up to date. May be NULL. */
    void (*behind)(void *ctx);
    void *ctx;
} follower_options;

typedef struct follower follower;

/* The polling thread lists the segments (chain_reader_check_end) to tell the chain's
   end from a gap left by retention: after a pause (a poll later than two intervals and
   250 ms, as after SIGSTOP or a frozen VM), after failed polls, and at least once
   every FOLLOWER_CHECK_MS of idle polls (the chain reader's head of segment next + 1
   every tenth idle poll catches a gap of one segment sooner). */
#define FOLLOWER_CHECK_MS 60000

/* Applies the whole chain now, then starts the thread. Refuses with a message:
   MISMATCH (the store holds txns the bucket lacks: not built from this bucket, or a
   writer's unsealed writes), NOT_FOUND (the bucket no longer holds the segment after
   the store's last txn), CORRUPT (a broken chain), and the bucket's and store's errors. */
int follower_open(store *s, bucket *b, const follower_options *o, follower **out, char *err, size_t errcap);
/* Stops the thread and frees the follower. */
void follower_close(follower *f);
/* Stops the thread and applies, from the caller's thread, every segment the bucket
   holds now, then checks with a listing that this is the chain's end: the caller may
   write to the store afterwards. NOT_FOUND when behind retention (stats say so, and
   the behind callback runs): the store is stale and must not take writes. The
   follower stays readable (stats) until closed; it polls no more. */
int follower_finish(follower *f, char *err, size_t errcap);

typedef struct follower_stats {
    uint64_t txn;                   /* the store's last txn (applied) */
    uint64_t segment;               /* sequence of the last segment applied (0: none) */
    uint64_t segment_ms;            /* its sealing time, the writer's wall clock */
    uint64_t lag_ms;                /* applied minus sealed time of the last segment applied */
    uint64_t last_poll_ms;          /* wall time of the last poll that reached the chain's end */
    uint64_t polls, segments, records, poll_errors;
    int status;                     /* of the last poll: OK, or why it failed */
    int behind_retention;           /* the segments it needs were removed: it polls no more */
    uint64_t chain_last_txn;        /* when behind: the chain's last txn as then seen (0: unknown) */
    char message[256];              /* the last poll error's message */
} follower_stats;

void follower_get_stats(follower *f, follower_stats *out);

#endif
