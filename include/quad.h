/*
 * quad.h: the facts kernel ("quad-arena"), an embeddable store of facts made
 * of four opaque 64-bit lanes. This header is the whole contract of the
 * library; docs/QUAD.md describes the file format and the design choices.
 *
 * Model
 *   - A fact is quad_fact { uint64_t lane[4] }. The kernel does not interpret
 *     lanes. Facts are appended in batches and get stable ids.
 *   - A quad_id is (logical chunk number << 24) | slot. It never holds a file
 *     offset and never changes. A batch of n facts always starts a new chunk
 *     and fills chunks of `chunk_rows` rows: fact i of a batch whose first id
 *     is F has id quad_batch_id(F, chunk_rows, i).
 *   - Every successful append or retire is one commit and advances the epoch
 *     by one (epoch 0 is the empty store). A snapshot is an epoch: reading at
 *     snapshot s sees facts appended at epochs <= s and not retired at epochs
 *     <= s. Retired facts are reclaimed only by quad_clean, and only those
 *     retired at or below its horizon (no held snapshot or held stream needs
 *     them); a snapshot below the horizon of a clean answers HANU_ERR_GONE.
 *     quad_snapshot_hold keeps a snapshot readable across cleans.
 *   - The durable watermark is the highest epoch known to be on stable storage.
 *
 * Durability (per call)
 *   QUAD_BUFFERED  the commit is written to the file (page cache) before return;
 *                  it survives a crash of the process, not a power loss.
 *   QUAD_DURABLE   returns after an fdatasync that covers the commit.
 *   QUAD_GROUP     like QUAD_DURABLE, but the sync is shared: the first waiter
 *                  becomes the leader, waits for the group to form (as many
 *                  commits pending as the previous sync covered, else until
 *                  commits stop arriving; at most 4 x `group_window_us`), syncs
 *                  once and wakes every writer whose commit it covered.
 *   A return of 0 with QUAD_DURABLE or QUAD_GROUP always means durable, and so
 *   does every epoch quad_durable_epoch reports. Readers may see a commit
 *   (gather, scan) before its writer has been acknowledged.
 *   A failed fdatasync is final (Linux reports a writeback error only once):
 *   the durable epoch never moves again, the durable call whose commit it was
 *   to cover returns HANU_ERR_IO, and every later append, retire, quad_sync,
 *   quad_checkpoint and quad_close returns HANU_ERR_STOPPED; reads go on.
 *   Reopen to find out what reached the disk.
 *
 * Threads
 *   A quad handle may be used from any number of threads at once: appends and
 *   retires are serialised internally (appends arriving together are written
 *   by one of their threads with one write, each still its own commit and
 *   epoch; a failed write fails exactly the commits in it; the durable wait
 *   happens outside the lock), gathers and scans run concurrently with each
 *   other and with writers without taking locks on cached data.
 *   quad_open and quad_close must not race with any other call on the handle.
 *   One file is opened by at most one handle at a time: quad_open locks it
 *   (an open-file-description lock; read-only handles may share) and refuses
 *   a second opener, in this process or another, with HANU_ERR_BUSY.
 *
 * Fork
 *   A handle must not be used in a child after fork (it has none of the
 *   handle's threads, and two writers corrupt the file): every call there
 *   returns HANU_ERR_INVALID; quad_close there closes the descriptor only.
 *
 * Errors: every function returns 0 or a negative HANU_ERR_* code (hanudb_status.h):
 *   HANU_ERR_INVALID   bad argument (NULL, n == 0 where not allowed, bad lane
 *                      mask, bad option);
 *   HANU_ERR_NOT_FOUND an id that does not exist (retire), or gather without a
 *                      `present` array hit an id that is not visible;
 *   HANU_ERR_CORRUPT   the file fails a checksum or a format rule before the
 *                      point the last recorded sync covered (quad_last_error
 *                      names the offset);
 *   HANU_ERR_BUSY      the file is open in another handle;
 *   HANU_ERR_IO / HANU_ERR_NOSPACE  the operating system refused a read or write
 *                      (nothing of that commit is visible afterwards);
 *   HANU_ERR_STOPPED   refused after a failed fdatasync (see Durability);
 *   HANU_ERR_GONE      a snapshot below the horizon of a clean (gather, scan),
 *                      or a stream asked for epochs the log no longer keeps;
 *   HANU_ERR_NOMEM, HANU_ERR_TOO_LARGE, HANU_ERR_UNSUPPORTED (io_uring asked
 *                      for but not available, QUAD_IO_DIRECT on a file system
 *                      that refuses O_DIRECT).
 */
#ifndef HANU_QUAD_H
#define HANU_QUAD_H

#include <stddef.h>
#include <stdint.h>

#include "hanudb_status.h"   /* HANU_ERR_*, hanu_status_str */
#include "hanudb_version.h"  /* HANUDB_VERSION* */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct quad quad;
typedef uint64_t quad_id;

typedef struct quad_fact {
    uint64_t lane[4];
} quad_fact;

#define QUAD_SLOT_BITS 24
#define QUAD_ID(chunk, slot) (((uint64_t)(chunk) << QUAD_SLOT_BITS) | (uint64_t)(slot))
#define QUAD_ID_CHUNK(id) ((uint64_t)(id) >> QUAD_SLOT_BITS)
#define QUAD_ID_SLOT(id) ((uint32_t)((id) & ((UINT64_C(1) << QUAD_SLOT_BITS) - 1)))

/* Id of fact i of a batch whose first id is first (see the model above). */
static inline quad_id quad_batch_id(quad_id first, uint32_t chunk_rows, size_t i)
{
    return QUAD_ID(QUAD_ID_CHUNK(first) + i / chunk_rows, i % chunk_rows);
}

/* Lane masks for gather and scan: bit l selects lane l. */
#define QUAD_LANE(l) (1u << (l))
#define QUAD_LANES_ALL 0xFu

enum quad_durability {
    QUAD_BUFFERED = 0,
    QUAD_DURABLE = 1,
    QUAD_GROUP = 2,
};

enum quad_io_backend {
    QUAD_IO_INLINE = 0,   /* cold reads with pread in the calling thread */
    QUAD_IO_THREADS = 1,  /* cold reads spread over a pool of blocking I/O threads */
    QUAD_IO_URING = 2,    /* cold reads submitted together through io_uring */
};

/* Open flags. */
#define QUAD_RDONLY 1u    /* no writes at all: no repair of a torn tail, no checkpoint at close */
#define QUAD_SALVAGE 2u   /* treat the first bad frame as the end of the log even before the
                             durable mark (damage to synced frames), instead of failing with
                             HANU_ERR_CORRUPT; the frames after it are lost (zeroed) */
/* Direct I/O: the file is opened O_DIRECT and every read and write of it
 * (frames, slots, recovery, streams, cold gathers through any io_backend)
 * bypasses the page cache; the handle's own payload cache (cache_bytes) is
 * then the only cache. The format is unchanged (a store may be opened with
 * and without the flag in turn). Each transfer covers whole 4 KiB blocks:
 * reads go through aligned bounce buffers covering the bytes asked for
 * (copied out; a small read costs at least one 4 KiB device read), writes
 * rewrite the partial 4 KiB blocks at both ends (the handle keeps a copy of
 * the header block and of the block holding the log end) and pad the file
 * with zeros to the next 4 KiB. Durability is unchanged: a direct write is
 * not durable before the fdatasync that every durable call still makes
 * (file size, block allocation, the device's write cache).
 * Cost: every commit is a device write (many small commits are far slower
 * than through the page cache), cold reads never hit the page cache, and the
 * handle keeps up to about 37 MiB of aligned buffers (a 1 MiB read-ahead
 * window, a write bounce of up to 4 MiB, a cold-read arena of up to 32 MiB).
 * It pays for cold point reads of stores larger than memory (docs/QUAD.md).
 * A file system that refuses O_DIRECT (ramfs, some FUSE file systems; tmpfs
 * before Linux 6.6) fails the open with HANU_ERR_UNSUPPORTED and a
 * quad_last_error() message; a file the refused open created is removed.
 * There is no silent fallback: open again without the flag to use the page
 * cache. */
#define QUAD_IO_DIRECT 4u

typedef struct quad_options {
    uint32_t chunk_rows;        /* rows per chunk, power of two in [64, 1<<20]; default 4096.
                                   Fixed when the file is created; ignored on reopen. */
    uint32_t microblock_rows;   /* rows per microblock, power of two in [64, chunk_rows];
                                   default 256. Fixed at creation. */
    uint32_t group_window_us;   /* QUAD_GROUP grouping window unit; default 100
                                   (0: sync at once; QUAD_DURABLE never waits) */
    uint32_t io_threads;        /* threads for QUAD_IO_THREADS; default 4 */
    int io_backend;             /* enum quad_io_backend; default QUAD_IO_THREADS */
    size_t cache_bytes;         /* bound on cached compressed lane payloads; default 256 MiB */
    uint64_t checkpoint_bytes;  /* write a checkpoint after this many log bytes; default 64 MiB */
    unsigned flags;             /* QUAD_RDONLY, QUAD_SALVAGE, QUAD_IO_DIRECT */
} quad_options;

typedef struct quad_stats {
    uint64_t facts;             /* facts ever appended */
    uint64_t retired;           /* facts retired (at any epoch) */
    uint64_t chunks;
    uint64_t epoch;             /* last committed epoch */
    uint64_t durable_epoch;     /* last epoch known durable */
    uint64_t file_bytes;        /* end of the log (valid frames) */
    uint64_t payload_bytes;     /* compressed lane payload bytes of all chunks */
    uint64_t lanes_const, lanes_for, lanes_raw;   /* microblock lanes per encoding */
    uint64_t cache_bytes, cache_hits, cache_misses;
    uint64_t syncs;             /* fdatasync calls made by commits */
    uint64_t recovered_frames;  /* frames replayed at open after the checkpoint */
    uint32_t chunk_rows, microblock_rows;
    /* added after 0.1.0's fields, so that they keep their offsets */
    uint64_t log_floor;         /* oldest epoch a stream can start at (1: all kept) */
    uint64_t stream_floor;      /* lowest position of a held stream; 0 when none */
    uint64_t held_streams;      /* streams opened with QUAD_STREAM_HOLD */
    /* the cleaner (added after the stream's fields) */
    uint64_t reclaim_horizon;   /* the horizon quad_clean would use now: min(durable epoch,
                                   oldest held snapshot, lowest held stream position - 1) */
    uint64_t gone_below;        /* snapshots below this epoch answer HANU_ERR_GONE (the
                                   horizon of the last clean; 0: nothing was cleaned) */
    uint64_t held_snapshots;    /* snapshots held with quad_snapshot_hold */
    uint64_t relocated_chunks;  /* chunks whose payload the cleaner rewrote */
    uint64_t checkpoint_bytes;  /* bytes the last checkpoint written (or loaded at open) took */
} quad_stats;

/* The version the library was built as ("0.1.0"; HANUDB_VERSION is the
 * headers'). Static string. */
const char *quad_version(void);

/* A message naming the file and, for damage, the offset, of the last
 * quad_open in the calling thread that failed with HANU_ERR_CORRUPT,
 * HANU_ERR_BUSY or HANU_ERR_UNSUPPORTED; "" when there is none. Owned by the
 * library (thread-local), valid until the thread's next quad_open. */
const char *quad_last_error(void);

/* Fills o with the defaults above. */
void quad_options_default(quad_options *o);

/* Opens (creating if absent, unless QUAD_RDONLY) the store file at path and
 * locks it (HANU_ERR_BUSY when another handle has it). opt may be NULL for
 * defaults. Recovery replays the log after the newest valid checkpoint; what
 * follows the last valid frame past the durable mark (the log end the last
 * recorded sync covered) is the unsynced tail, lost to a crash: unless
 * QUAD_RDONLY it is overwritten with zeros. A bad frame before the mark is
 * HANU_ERR_CORRUPT and nothing is changed. Unless QUAD_RDONLY the file is
 * then synced, so the recovered epoch is durable. A file of format version 1
 * is refused with HANU_ERR_UNSUPPORTED. Creating a file also syncs its
 * directory (a failure fails the open). On success *out is a handle the
 * caller releases with quad_close. */
int quad_open(const char *path, const quad_options *opt, quad **out);

/* Writes a checkpoint when there were commits since the last one (unless
 * read-only), syncs, unlocks and frees the handle. Returns the first error
 * met, HANU_ERR_STOPPED after a failed fdatasync (nothing written then); the
 * handle is freed in every case (in a child after fork: see Fork). NULL is
 * accepted. */
int quad_close(quad *q);

/* Appends n facts (n >= 1) read from the caller's array, which stays the
 * caller's (borrowed; it is not retained after return). On success, when not
 * NULL, *first_id gets the id of facts[0] and *epoch_out the commit's epoch.
 * Either all n facts are committed or none. */
int quad_append(quad *q, const quad_fact *facts, size_t n, int durability,
                quad_id *first_id, uint64_t *epoch_out);

/* Like quad_append, but takes ownership of facts (n facts, any allocator).
 * Ownership: from the call on the buffer belongs to the store; the caller must
 * neither read, write nor free it until it is handed back. The store encodes
 * straight from the buffer (no copy is taken) and hands the same pointer back
 * through release(ctx, facts) as soon as the commit is encoded and written,
 * before a durable wait; release NULL means the store calls free(facts).
 * release is called exactly once and before this function returns, on success
 * and on every error (bad arguments included); a NULL facts is never released.
 * release runs outside the store's locks and may call into the store. */
int quad_append_owned(quad *q, quad_fact *facts, size_t n, int durability,
                      void (*release)(void *ctx, quad_fact *facts), void *ctx,
                      quad_id *first_id, uint64_t *epoch_out);

/* Retires n ids (n >= 1) as one commit. Every id must exist (else
 * HANU_ERR_NOT_FOUND and nothing is retired); an id already retired keeps its
 * earlier epoch; duplicates are allowed. */
int quad_retire(quad *q, const quad_id *ids, size_t n, int durability, uint64_t *epoch_out);

/* Reads the lanes in lane_mask of n ids into out[i] (caller order; lanes not in
 * the mask are left untouched). snapshot 0 means the latest epoch. When present
 * is not NULL, present[i] is 1 for a visible id and 0 otherwise (its lanes in
 * the mask are zeroed) and the call succeeds; when present is NULL an id that
 * is not visible makes the call return HANU_ERR_NOT_FOUND (out is still filled
 * for the visible ids). Any n (0 included) and any id order are accepted.
 *
 * lane_mask 0 is an existence check: present[i] gets the visibility of ids[i]
 * at the snapshot (or, present NULL, the call returns HANU_ERR_NOT_FOUND when
 * any id is not visible); out is not touched and may be NULL. It reads the
 * chunk directory and the retirement state only, never lane data: no file
 * read, no cache entry, no I/O error. Cost: a compare and a store per id in
 * a run of one chunk (blocks of 64 such ids vectorised), one directory entry
 * per chunk change, a lookup in the chunk's retirement set per id where the
 * chunk has retirements (docs/QUAD.md has the figures: about 1 100 M ids/s
 * ordered, 150-470 M random, one thread).
 *
 * A snapshot below the horizon of a clean (quad_stats.gone_below) answers
 * HANU_ERR_GONE, with any lane mask. Ids in chunks the cleaner relocated
 * read the same at every other snapshot; ordered runs in them are decoded id
 * by id (a rank over the chunk's kept-slot bitmap per id) instead of by
 * microblock ranges. */
int quad_gather(quad *q, uint64_t snapshot, const quad_id *ids, size_t n,
                unsigned lane_mask, quad_fact *out, uint8_t *present);

/* Scans visible facts in id order, starting at the first id >= from: fills up
 * to cap facts (lanes in lane_mask) into out and their ids into ids_out (may be
 * NULL), sets *n_out, and *next to the id to pass as `from` to continue
 * (*n_out == 0 means the end). Any cap is accepted (the page is never larger
 * than the store). */
/* (A snapshot below quad_stats.gone_below: HANU_ERR_GONE, as for gathers.) */
int quad_scan(quad *q, uint64_t snapshot, quad_id from, unsigned lane_mask,
              quad_fact *out, quad_id *ids_out, size_t cap, size_t *n_out, quad_id *next);

/* The current epoch, as a snapshot to pass to quad_gather / quad_scan.
 * (A snapshot of the empty store is 0, which reads as "latest".) */
int quad_snapshot(quad *q, uint64_t *epoch_out);

uint64_t quad_epoch(quad *q);           /* last committed epoch */
uint64_t quad_durable_epoch(quad *q);   /* durable watermark */
uint32_t quad_chunk_rows(quad *q);

/* Makes every commit so far durable (one fdatasync unless already durable);
 * HANU_ERR_STOPPED after a failed fdatasync. */
int quad_sync(quad *q);

/* Writes a checkpoint of the chunk directory and retirements now, so that the
 * next open replays only the log after it. Retirements cost 16 bytes each,
 * except those at or below quad_stats.gone_below (after a clean that
 * relocated something): a chunk's are then folded into a bit per row
 * (docs/QUAD.md, "Folds"). quad_stats.checkpoint_bytes says what it took. */
int quad_checkpoint(quad *q);

int quad_stats_get(quad *q, quad_stats *st);

/* ---- snapshot holds and the cleaner ----
 * A hold pins the current epoch as a snapshot: quad_clean never drops a row
 * that snapshot can see, so gathers and scans at it keep their answers. Plain
 * epochs stay valid snapshots until a clean's horizon passes them; then they
 * answer HANU_ERR_GONE (never other data). */
typedef struct quad_hold quad_hold;

/* Holds the current epoch (written to *epoch_out) as a snapshot until
 * quad_snapshot_release. Errors: HANU_ERR_INVALID (NULL, child after fork),
 * HANU_ERR_NOMEM. Cost: a malloc and a list insertion under a mutex; the
 * list lives in memory (a restart drops every hold). Any thread may release
 * it; it must be released before the store is closed. */
int quad_snapshot_hold(quad *q, uint64_t *epoch_out, quad_hold **out);

/* Releases a hold and frees it. NULL is accepted. */
void quad_snapshot_release(quad_hold *h);

typedef struct quad_clean_stats {
    uint64_t horizon;           /* the reclaim horizon used: rows retired at or below it were dropped */
    uint64_t chunks_examined;   /* chunks with rows retired at or below the horizon */
    uint64_t chunks_relocated;
    uint64_t rows_kept;         /* rows rewritten into the new records */
    uint64_t rows_dropped;
    uint64_t bytes_before;      /* payload bytes of the relocated chunks before */
    uint64_t bytes_after;       /* and after */
    uint64_t bytes_punched;     /* file bytes given back with fallocate(PUNCH_HOLE) */
    int punch_unsupported;      /* 1 when the file system refused hole punching */
} quad_clean_stats;

/* The cleaner. Rewrites every chunk whose live fraction (rows not retired at
 * or below the horizon H, over its rows) would fall below threshold (0 < t
 * <= 1; 1 rewrites every chunk with a droppable row) into a relocation record
 * holding its kept rows only, and returns the old payload bytes to the file
 * system. H = min(durable epoch after a first sync, oldest held snapshot,
 * lowest held stream position - 1). FactIds never change: a kept slot reads
 * the same lanes at every snapshot >= H in every lane mask; a dropped one is
 * invisible there as before. Afterwards snapshots below H answer
 * HANU_ERR_GONE, and streams starting at or below H too (quad_stats.log_floor
 * is H + 1). Steps (each crash-safe, docs/QUAD.md): write the relocation
 * frames at the log end, fdatasync, swap each chunk's physical description
 * under the retirement lock, write two checkpoints, punch the old payload
 * ranges (their 4 KiB-aligned interiors). st may be NULL.
 * Errors: HANU_ERR_INVALID (threshold out of range, QUAD_RDONLY, NULL, child
 * after fork), HANU_ERR_STOPPED (after a failed fdatasync), HANU_ERR_IO /
 * HANU_ERR_NOSPACE (a write or the sync failed: the chunks not yet swapped
 * keep their old payloads and nothing visible changes), HANU_ERR_NOMEM.
 * Cost: reads and re-encodes the kept rows of each chunk relocated (one
 * pread of its payload), two fdatasyncs per group of up to 256 chunks, two
 * checkpoints (four fdatasyncs); commits wait while a group is written and
 * synced (the writer lock), gathers only during each group's swap. */
int quad_clean(quad *q, double threshold, quad_clean_stats *st);

/* ---- the commit stream ----
 * A stream delivers the store's commits in epoch order, read back from the
 * log: each append with its facts, each retire with the ids it retired. Its
 * position (the next epoch to deliver) is the subscriber's own: the kernel
 * keeps nothing per stream unless QUAD_STREAM_HOLD registers it as a floor.
 * A subscriber that stores the epoch of the last commit it applied resumes
 * after a restart with quad_stream_open(q, that + 1, ...).
 *
 * flags: the lanes to deliver (QUAD_LANE(l) bits, QUAD_LANES_ALL; 0 delivers
 * ids only), plus
 *   QUAD_STREAM_COMMITTED  deliver every commit written to the file, not only
 *                          durable ones: faster to follow, but a power loss
 *                          can take back what was delivered (only for views
 *                          rebuilt at every open);
 *   QUAD_STREAM_HOLD       register the stream's position as a floor: what a
 *                          held stream has not read yet is kept (quad_clean's
 *                          horizon stays below it; quad_stats reports it). */
typedef struct quad_stream quad_stream;

#define QUAD_STREAM_COMMITTED 0x100u
#define QUAD_STREAM_HOLD 0x200u

enum quad_commit_kind {
    QUAD_COMMIT_APPEND = 1,
    QUAD_COMMIT_RETIRE = 2,
};

typedef struct quad_commit {
    uint64_t epoch;
    int kind;                /* enum quad_commit_kind */
    size_t n;                /* facts appended, or ids this commit retired */
    const quad_id *ids;      /* n ids: of the facts appended (in batch order),
                                or retired by this commit (ascending, each once:
                                ids the call named that were retired before, and
                                repeats, are left out) */
    const quad_fact *facts;  /* n facts, the stream's lanes (other lanes 0): the
                                facts appended, or the retired facts as they
                                were; NULL when the stream has no lanes */
} quad_commit;

/* Opens a stream whose first commit is from_epoch (0 and 1 both mean the
 * first commit). Errors: HANU_ERR_INVALID (unknown flag bits, NULL),
 * HANU_ERR_GONE (from_epoch is below the oldest epoch the log keeps,
 * quad_stats.log_floor: 1 until a clean, then its horizon + 1), HANU_ERR_NOT_FOUND (from_epoch is past the
 * store's epoch + 1: a position this store never reached, e.g. a subscriber
 * that followed committed commits a power loss took away, or that belongs to
 * another file), HANU_ERR_NOMEM. Cost: no I/O; the first quad_stream_next
 * finds from_epoch's frame from the chunk directory (the append at or before
 * it) and reads forward over the retire frames between. The stream must be
 * closed before the store is. Any thread may use a stream, one at a time. */
int quad_stream_open(quad *q, uint64_t from_epoch, unsigned flags, quad_stream **out);

/* Delivers the next commit into *c, waiting up to timeout_ms for it to be
 * durable (or written, with QUAD_STREAM_COMMITTED); timeout_ms 0 polls, -1
 * waits for ever. Returns 1 when a commit was delivered (its arrays belong to
 * the stream and stay valid until the next call or quad_stream_close), 0 when
 * none came before the timeout (the only exception to "0 or negative"), or
 * HANU_ERR_GONE (a clean moved the log floor past the stream's position), HANU_ERR_IO (a read failed), HANU_ERR_CORRUPT (a frame fails its checksum
 * or breaks a format rule; quad_stream_position stays on it),
 * HANU_ERR_NOMEM. Cost: one read of about 1 MiB of the log per MiB of frames
 * (page cache), the frame's checksums, and the decoding of the stream's lanes
 * (an ordered gather's work); a retire also reads the retired facts' lanes
 * (a gather at epoch - 1). Memory: the largest commit's frame and its decoded
 * facts (up to 2^24 x 40 bytes). */
int quad_stream_next(quad_stream *s, int timeout_ms, quad_commit *c);

/* The next epoch the stream delivers (its position). */
uint64_t quad_stream_position(const quad_stream *s);

/* Closes the stream (and its floor) and frees it. NULL is accepted. */
void quad_stream_close(quad_stream *s);

/* Empties the payload cache (benchmarks use it to measure cold reads). */
void quad_cache_drop(quad *q);

#ifdef __cplusplus
}
#endif

#endif
