/*
 * rebuild: brings a data directory back from the bucket (docs/BUCKET.md,
 * "Rebuild" and "Restore"). Two users, one path:
 *
 *   - serve on an empty (or missing) data directory whose bucket holds segments:
 *     the newest snapshot first (rebuild_fetch_snapshot), then every segment of the
 *     chain replayed to its end (chain.h), then the sealer's watermark set to the
 *     chain's end (the sealer continues the chain, it never reseals) and numbering
 *     moved REBUILD_TXN_GAP above it (store_skip_txns), so that no txn the lost
 *     machine may have handed out above the bucket is ever handed out again;
 *   - hanudb restore: the same into a fresh directory, stopping at a txn or a
 *     sealing time, with no watermark, no skip and nothing written to the bucket.
 *
 * An interrupted rebuild resumes: the data directory holds REBUILD_MARKER from
 * before the first record until the numbering has moved, and a start that finds
 * it replays from where the store ended (chain.h skips what the store holds).
 *
 * Order of calls for serve: rebuild_wanted and rebuild_prepare before store_open
 * (the snapshot's files must be in place when the store opens them), rebuild_replay
 * and rebuild_finish after it (the index may already follow the store: it indexes
 * the replayed records as they land).
 */
#ifndef HANU_REBUILD_H
#define HANU_REBUILD_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "bucket/bucket.h"
#include "store/store.h"

/* After a rebuild the next write gets at least the chain's last txn + this. */
#define REBUILD_TXN_GAP (1ull << 32)
/* A file in the data directory while a rebuild is unfinished. */
#define REBUILD_MARKER "REBUILDING"

typedef struct rebuild_stats {
    uint64_t ms;                /* the whole rebuild, wall time */
    uint64_t fetch_ms;          /* waiting for the bucket: snapshot files and segments */
    uint64_t replay_ms;         /* decoding segments and replaying their records */
    uint64_t cpu_ms;            /* CPU time of the replaying thread (a shared machine's wall time lies) */
    uint64_t records, segments, bytes;   /* replayed from the chain; segment object bytes */
    uint64_t snapshot_txn;      /* the txn the fetched snapshot holds (0: none) */
    uint64_t last_txn;          /* the store's last txn after the replay */
    uint64_t next_txn;          /* rebuild_finish: what the next write gets at least */
    int resumed;                /* an interrupted rebuild was continued */
    int stopped;                /* the replay ended at its stop (txn or time), not at the chain's end */
} rebuild_stats;

/* Whether serve must rebuild data_dir from b: the directory is missing or empty and
   the bucket lists at least one segment, or REBUILD_MARKER is there (a rebuild that
   did not finish). *wanted 0 or 1. IO from the listing, with a message. */
int rebuild_wanted(const char *data_dir, bucket *b, int *wanted, char *err, size_t errcap);

/* The one call site of the snapshot reader (src/replica/snapshot.h, being written):
   downloads the newest snapshot holding txns up to max_txn (0: any) and taken at or
   before max_time_ms (0: any) into the empty data_dir and sets *txn to the txn it
   holds. NOT_FOUND when the bucket has none that fits (then the whole chain is
   replayed). */
int rebuild_fetch_snapshot(bucket *b, const char *data_dir, uint64_t max_txn, uint64_t max_time_ms,
                           uint64_t *txn, char *err, size_t errcap);

/* A follower's data directory behind the bucket's retention, before a re-boot from
   the newest snapshot: renamed to DATA.discarded (atomic: data_dir is whole or gone)
   and that removed, after any earlier one left by a crash. data_dir is missing after. */
int rebuild_discard(const char *data_dir, char *err, size_t errcap);

/* Before store_open: creates data_dir when missing, refuses a non-empty one that
   holds no REBUILD_MARKER (INVALID), writes the marker (synced) with REBUILD_MARK,
   and fetches the snapshot into the empty directory (adding to st->fetch_ms),
   printing its progress unless REBUILD_QUIET. */
#define REBUILD_MARK 1
#define REBUILD_QUIET 2
int rebuild_prepare(const char *data_dir, bucket *b, uint64_t max_txn, uint64_t max_time_ms, int flags,
                    rebuild_stats *st, char *err, size_t errcap);

/* The oldest point a restore can reach: every txn and time when segment 1 is still
   in the bucket (*txn and *time_ms 0), else the oldest manifest's txn and creation
   time (retention removed what came before it). NOT_FOUND when neither (an empty
   bucket, or a chain cut without a manifest: the replay says which). */
int rebuild_oldest_point(bucket *b, uint64_t *txn, uint64_t *time_ms, char *err, size_t errcap);

/* 1 when dir holds no entry (or does not exist), 0 when it holds some, -1 on error. */
int rebuild_dir_is_empty(const char *dir);

/* Removes what a failed restore or rebuild wrote into data_dir (and the staging
   folder of its fetch): everything in it, and the folder itself unless keep_dir. */
int rebuild_remove_attempt(const char *data_dir, int keep_dir);

typedef struct rebuild_replay_options {
    uint64_t stop_txn;          /* replay records up to this txn only (0: the whole chain) */
    uint64_t stop_time_ms;      /* only segments sealed at or before this time (0: all) */
    const char *who;            /* the subsystem of the progress log lines ("rebuild", "restore") */
    int quiet;                  /* no progress lines */
    int no_done_line;           /* the caller prints its own summary at the end */
} rebuild_replay_options;

/* Replays the chain into s from the store's last txn to the chain's end (or the stop),
   printing progress on stderr once a second, and checks that nothing is listed past
   where the chain ended. CORRUPT with the chain reader's message for a broken chain;
   NOT_FOUND when the chain starts above the store's next txn (no snapshot covers the
   gap); MISMATCH when the store holds txns the bucket does not; IO, and the store's
   errors. Fills the record, segment, byte and time fields of st (adds to fetch_ms). */
int rebuild_replay(store *s, bucket *b, const rebuild_replay_options *o, rebuild_stats *st, char *err,
                   size_t errcap);

/* restore and dump --bucket: prepare (no marker), open a store on data_dir made for
   a one-off replay (files grown by appends, no background compaction, quiet),
   replay up to stop_txn / stop_time_ms and sync. On OK *out is the open store (the
   caller closes it); on failure it is closed and the status is prepare's (INVALID:
   data_dir not empty), the replay's or the sync's, with a message. */
int rebuild_restore(bucket *b, const char *data_dir, const rebuild_replay_options *o, store **out,
                    rebuild_stats *st, char *err, size_t errcap);

/* serve only, after rebuild_replay: sets the sealer's watermark to the chain's end,
   moves the numbering to a range claimed in the bucket, at least last txn +
   REBUILD_TXN_GAP (numbering.h; durably) and removes the marker.
   Sets st->next_txn. */
int rebuild_finish(store *s, bucket *b, const char *data_dir, rebuild_stats *st, char *err, size_t errcap);

#endif
