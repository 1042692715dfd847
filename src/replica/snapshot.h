/*
 * snapshot: physical snapshots of the data directory in the bucket, their
 * retention, and the fetch that a rebuild or a restore starts from
 * (docs/BUCKET.md, "Snapshots"; the manifest format is manifest.h).
 *
 * Taking one (snapshot_take, or the snapshotter's own thread):
 *   1. a watermark "snapshot" holds the compaction floor at or below the txn
 *      about to be sealed, so no file is rewritten past it while it is pinned, and
 *      merges are held (store_merges_hold) until step 3 is done, so no file sealed
 *      after the rotation is merged into one the snapshot links;
 *   2. on the store's writer thread (options.rotate): store_rotate seals the
 *      active log file; every record up to T (its last txn) is then in sealed,
 *      durable files; then the index commits up to T or beyond (options.index_commit);
 *   3. the sealed log files and hints, and the index's files with its COMMIT, are
 *      hard-linked into DATA/snapshot/ (compaction and the indexer may replace or
 *      delete the originals meanwhile; the links keep the inodes), and the watermark
 *      is dropped;
 *   4. at low priority: each pinned file is hashed (SHA-256, cached by inode), one
 *      list of files/ says which objects the bucket has, and only the missing ones are
 *      put, as files/<sha256>;
 *   5. once the sealer has sealed T, the manifest is put as manifests/<T, 20 digits>
 *      (put-if-absent), naming the segment the replay continues from;
 *   6. retention, always after the new manifest is in the bucket: a manifest goes only
 *      when a newer one was made at or before the window's start (now - retain_ms), so
 *      every time inside the window stays restorable; the newest `keep` always stay;
 *      past max_bytes the window shrinks (logged). Then files/ objects no kept manifest
 *      names, and segments wholly at or below the oldest kept manifest's txn, go (but
 *      never the chain's last segment, which the sealer continues from).
 *
 * Thread rules: snapshot_take serialises itself; every function may be called from
 * any thread except that options.rotate must get the writer thread to rotate (the
 * default, NULL, rotates on the calling thread: for a store nobody else writes to).
 */
#ifndef HANU_SNAPSHOT_H
#define HANU_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "bucket/bucket.h"
#include "replica/manifest.h"
#include "replica/sealer.h"
#include "store/store.h"

#define SNAPSHOT_WATERMARK "snapshot"
#define SNAPSHOT_PIN_DIR "snapshot"         /* DATA/snapshot/: hard links of the files being uploaded */
#define SNAPSHOT_SYNC_BYTES (32u << 20)     /* large file writes sync this often */
#define SNAPSHOT_RETAIN_FOREVER UINT64_MAX  /* retain_ms: retention deletes nothing */
#define SNAPSHOT_RETAIN_DEFAULT_MS (24ull * 3600 * 1000)

/* Seals the active log file on the store's writer thread: *txn gets the sealed
   file's last txn and *active_file the id of the file written from now on. */
typedef int (*snapshot_rotate_fn)(void *ctx, uint64_t *txn, uint32_t *active_file);
/* Makes the index commit everything up to txn (blocking): OK, or why not. */
typedef int (*snapshot_index_fn)(void *ctx, uint64_t txn);

typedef struct snapshot_options {
    const char *data_dir;               /* the store's DATA */
    const char *index_dir;              /* the index's folder inside DATA ("index"); NULL: none */
    uint32_t every_segments;            /* the policy: after this many segments (default 64; 0: never) */
    uint64_t interval_ms;               /* with it: at most one policy snapshot per interval, and one once it
                                           passed with a new segment; every_segments then only says 0: never
                                           (default 600000; 0: every_segments alone) */
    uint32_t check_interval_ms;         /* how often the thread looks at the policy (default 1000) */
    uint32_t seal_timeout_ms;           /* longest wait for the sealer to reach T (default 120000) */
    uint32_t keep;                      /* the newest manifests always retained (default 1, at least 1) */
    uint64_t retain_ms;                 /* the window restores reach back (default 24 h; SNAPSHOT_RETAIN_FOREVER) */
    uint64_t max_bytes;                 /* the size guard: manifests go, oldest first, while the retained
                                           files and segments pass it, window or not (0: none) */
    snapshot_rotate_fn rotate;          /* NULL: snapshot_rotate_here on the calling thread */
    snapshot_index_fn index_commit;     /* NULL: the index is not waited for */
    void *ctx;
    int low_priority;                   /* nice 10 and idle I/O class for the thread (default 1) */
} snapshot_options;

void snapshot_options_default(snapshot_options *o);

/* What one snapshot did. */
typedef struct snapshot_result {
    char manifest[MANIFEST_KEY_SIZE];   /* its key */
    uint64_t txn, index_txn, replay_sequence;
    uint32_t files, files_uploaded;
    uint64_t bytes, bytes_uploaded;
    uint64_t rotate_us;                 /* on the writer thread: sealing the active log file */
    uint64_t pin_ms;                    /* rotate + waiting for the index to commit + links */
    uint64_t ms;                        /* the whole snapshot */
    uint32_t deleted_manifests, deleted_files, deleted_segments;
    uint64_t oldest_txn, oldest_ms;     /* the oldest manifest kept: restores reach back to it */
} snapshot_result;

typedef struct snapshotter snapshotter;

/* Starts the snapshotter (its thread runs the policy and the requests). The store,
   the bucket and the sealer must outlive it. A "snapshot" watermark left by a crash
   is dropped. */
int snapshot_open(store *s, bucket *b, sealer *z, const snapshot_options *o, snapshotter **out,
                  char *err, size_t errcap);
/* Stops the thread (a snapshot in progress finishes first; options.rotate must
   return, e.g. STOPPED, once the writer thread no longer serves it). */
void snapshot_close(snapshotter *sn);

/* Takes a snapshot now and waits for it (any thread but the writer's, unless
   options.rotate is NULL). When no txn was written since the last manifest, the
   manifest for that txn stays as it is (put-if-absent), and retention deletes the
   one new file this attempt uploaded (the empty log file it sealed). */
int snapshot_take(snapshotter *sn, snapshot_result *out, char *err, size_t errcap);

/* For an event loop that must not block: asks the thread for a snapshot and
   returns a ticket; snapshot_poll says 1 once a snapshot that started after the
   request has finished (*rc, *out and err filled), 0 while it runs. */
uint64_t snapshot_request(snapshotter *sn);
int snapshot_poll(snapshotter *sn, uint64_t ticket, int *rc, snapshot_result *out, char *err, size_t errcap);

typedef struct snapshot_stats {
    uint64_t snapshots;                 /* taken by this process */
    uint64_t failures;
    uint64_t last_txn;                  /* of the newest manifest this process put or found */
    uint64_t last_ms;                   /* wall clock of its completion (0: none) */
    uint64_t bytes_uploaded;            /* by this process */
    uint64_t oldest_txn, oldest_ms;     /* the oldest manifest the last retention kept (0: not known yet) */
    int running;
} snapshot_stats;
void snapshot_get_stats(snapshotter *sn, snapshot_stats *out);

/* The default rotate: store_rotate on this thread, then the txn and the active file. */
int snapshot_rotate_here(store *s, uint64_t *txn, uint32_t *active_file);

/* ---- fetch: the first step of a rebuild or a restore ---- */

typedef struct snapshot_fetched {
    char manifest[MANIFEST_KEY_SIZE];
    uint64_t txn;                       /* the data directory holds every record up to it */
    uint64_t replay_sequence;           /* replay the chain from this segment ... */
    uint8_t prev_hash[MANIFEST_HASH_SIZE];   /* ... whose prev_hash must be this */
    uint64_t index_txn;                 /* the index fetched covers up to it; 0: no index fetched */
    uint32_t files;
    uint64_t bytes;
    uint64_t ms;
} snapshot_fetched;

/* Progress of a fetch, from any of its threads (serialised): bytes and files done
   of the totals, and the rate so far in bytes per second. */
typedef void (*snapshot_progress_fn)(void *ctx, uint64_t bytes, uint64_t bytes_total, uint32_t files,
                                     uint32_t files_total, double bytes_per_s);

#define SNAPSHOT_FETCH_THREADS 4

/* Picks the newest manifest with txn <= max_txn (UINT64_MAX: the newest) and
   downloads its files into data_dir, which must be missing or empty, with
   SNAPSHOT_FETCH_THREADS threads; each file is checked against its size and
   SHA-256, synced every SNAPSHOT_SYNC_BYTES and at its end, and every folder is
   fsynced. The index files are left out when the index covers more than max_txn
   (the index then rebuilds from the log). NOT_FOUND when no manifest qualifies;
   CORRUPT naming the object when a file or the manifest is damaged; EXISTS when
   data_dir is not empty. progress may be NULL. */
int snapshot_fetch(bucket *b, const char *data_dir, uint64_t max_txn, snapshot_fetched *out,
                   snapshot_progress_fn progress, void *progress_ctx, char *err, size_t errcap);

/* ---- audit ---- */
typedef struct snapshot_audit_result {
    uint32_t manifests, files;          /* checked: manifests, distinct file objects */
    uint64_t bytes;                     /* of the file objects read */
    uint64_t oldest_txn, newest_txn;    /* of the manifests (0: none) */
    uint64_t oldest_replay_sequence;    /* the oldest manifest's: no older segment is needed */
    uint8_t oldest_prev_hash[MANIFEST_HASH_SIZE];
} snapshot_audit_result;

/* Reads every manifest and checks it and every file it names (present, size,
   SHA-256; each object once). OK when all are whole; on the first problem CORRUPT
   (or the bucket's error) with a message naming the manifest and the object. */
int snapshot_audit(bucket *b, snapshot_audit_result *out, char *err, size_t errcap);
/* The same, ending with STOPPED between two objects once *stop is set (NULL: never). */
int snapshot_audit_until(bucket *b, const _Atomic int *stop, snapshot_audit_result *out, char *err, size_t errcap);

#endif
