/*
 * chain: reads the bucket's segment chain in order, verifies every link, and replays
 * its records into a store with their own txns (store_replay). The one way records
 * come back from the bucket: rebuild of an empty data directory, point-in-time
 * restore, and followers polling for the next segment all use it.
 *
 *   - where to start: after the store's last txn. An empty store starts at segment 1;
 *     a store that holds txns (a fetched snapshot, a follower restarting) starts at the
 *     segment that holds its next txn, found by a binary search over the listing;
 *   - each segment is fully validated (segment_decode) and must continue the chain
 *     (segment_chain_next): a missing, repeated, reordered, altered or foreign
 *     segment stops the reader with CORRUPT and a message naming it;
 *   - records the store already holds are skipped, so a restart resumes anywhere;
 *   - segments are fetched ahead in parallel (prefetch) while the previous one is
 *     replayed.
 *
 * One thread uses a reader at a time (the store's single writer thread).
 */
#ifndef HANU_CHAIN_H
#define HANU_CHAIN_H

#include <stdint.h>
#include "base/base.h"
#include "bucket/bucket.h"
#include "bucket/segment.h"
#include "store/store.h"

typedef struct chain_progress {
    uint64_t segments;          /* applied by this reader */
    uint64_t records;           /* records (txns) replayed */
    uint64_t skipped;           /* records the store already held */
    uint64_t bytes;             /* segment object bytes fetched */
    uint64_t sequence;          /* last segment applied (0: none yet) */
    uint64_t last_txn;          /* the store's last txn after it */
    uint64_t last_timestamp_ms; /* sealing time of the last segment applied */
    uint64_t fetch_ns;          /* time waiting for segments */
    uint64_t replay_ns;         /* time decoding and replaying them */
    uint64_t chain_last_sequence;   /* check_end found this node behind retention: the chain's */
    uint64_t chain_last_txn;        /* last segment then, and its last txn (0: not known) */
} chain_progress;

typedef struct chain_options {
    uint64_t stop_txn;          /* replay records up to this txn only (0: all) */
    uint64_t stop_time_ms;      /* stop before a segment sealed after this wall time (0: never) */
    uint32_t prefetch;          /* segments fetched ahead (default 4, at most 64) */
    /* After each applied segment, from the caller's thread. */
    void (*progress)(void *ctx, const chain_progress *p);
    void *ctx;
} chain_options;

void chain_options_default(chain_options *o);

typedef struct chain_reader chain_reader;

/* No bucket request yet: positioning happens at the first poll. */
int chain_reader_open(bucket *b, store *s, const chain_options *o, chain_reader **out);
void chain_reader_close(chain_reader *r);

/* Applies every segment the bucket holds now, in order; *applied gets how many (0:
   nothing new). OK, also when stop_txn or stop_time_ms was reached (then
   chain_reader_stopped says so and later polls apply nothing); CORRUPT with a message for
   a broken chain (also a gap: segment n missing while n+1 exists); NOT_FOUND when the
   store's next txn is older than the bucket's oldest segment (retention removed it: a
   snapshot is needed first); MISMATCH when the store holds txns the bucket does not
   (it was not built from this bucket); IO and the store's errors otherwise. Every
   tenth poll that finds nothing new heads segment next + 1; when it exists the poll
   returns what chain_reader_check_end says. */
int chain_reader_poll(chain_reader *r, uint64_t *applied, char *err, size_t errcap);
/* After polling to the end, whether the end is the chain's: OK when the bucket lists
   no segment past the next one (or lists the next one: it came meanwhile); NOT_FOUND
   when the segments from the next one on were removed by retention (the store holds
   txns, none is listed below the next one, and the newest manifest replays from past
   it: this store can only continue from a snapshot; chain_progress then has the
   chain's last segment and txn); CORRUPT for any other gap (a hole); IO from the
   listing. One list request (and a list and two gets when behind): rebuild calls it
   at its end, followers after a pause and now and then. */
int chain_reader_check_end(chain_reader *r, char *err, size_t errcap);
/* The header of the chain's last segment (the highest sequence listed), fully
   verified: one list and one get, no reader needed. NOT_FOUND when the bucket holds
   no segment; CORRUPT when that object is damaged. */
int chain_last_segment(bucket *b, segment_header *h, char *err, size_t errcap);
/* The stop point was reached: nothing more will be applied. */
int chain_reader_stopped(const chain_reader *r);
void chain_reader_progress(const chain_reader *r, chain_progress *out);
/* The sequence the next poll asks for (0 before the first poll). */
uint64_t chain_reader_next_sequence(const chain_reader *r);

#endif
