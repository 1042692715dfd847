/*
 * store: named databases of binary keys and values kept in the log (log.h)
 * with an in-memory key directory per database (Bitcask lineage): a value is
 * written to disk once, in its log record, and read back through mmap.
 *
 * Threads: one writer thread calls the write functions (store_write,
 * store_db_create/drop); any thread may call store_get and the info functions.
 * A mutex guards the key directories and the file table; the background
 * compaction thread takes it in short slices.
 *
 * Durability: a write returns its txn once it is in the page cache and the key
 * directory; it is durable when the log's commit thread reports a durable txn
 * >= it through options.on_durable. Readers may see a write before it is
 * durable.
 */
#ifndef HANU_STORE_H
#define HANU_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "log/log.h"

#define STORE_DB_NAME_MAX 64
#define STORE_DEFAULT_DB_ID 0
#define STORE_MAX_DATABASES 4096
/* A hidden database for the records of the layers above (the documents layer's
   idempotency records), opaque bytes to the store; names that start with '_' are
   reserved and invisible to lookups by name and listings. */
#define STORE_SYSTEM_DB_ID 0xFFFFFFFEu

/* What a database holds, fixed when it is created and kept in its create record.
   The store only keeps the byte; the faces enforce it (docs.h has the rule). */
enum store_db_kind {
    STORE_DB_UNTYPED = 0,     /* created before kinds existed: both faces, no check */
    STORE_DB_KV = 1,          /* bytes (the key-value protocol's databases, "default") */
    STORE_DB_COLLECTION = 2,  /* JSON documents (the documents API's collections) */
};

typedef struct store store;

typedef struct store_options {
    const char *data_dir;           /* DATA; log/ and meta/ are created inside */
    uint64_t file_size;             /* log file rotation size, default 64 MiB */
    enum log_prealloc prealloc;     /* default zerofill */
    uint32_t commit_window_us;      /* adaptive group-commit window, default 100 us; 0 = off */
    uint32_t lazy_sync_ms;          /* writes nobody waits for are synced within this (10 ms) */
    uint32_t max_key;               /* default 1024, at most 65535 */
    uint32_t max_value;             /* default 1 MiB */
    double compact_ratio;           /* compact a sealed file past this dead fraction (0.5) */
    uint64_t compact_min_dead;      /* ... and at least this many dead bytes (1 MiB) */
    int background_compaction;      /* 1: a low-priority thread compacts on its own */
    int quiet;                      /* no start-up log lines */
    /* Start even when frames below the durable mark are damaged: keep what is
       readable, copy the rest to DATA/quarantine/ (default 0: refuse). */
    int salvage;
    void (*on_durable)(void *ctx, uint64_t durable_txn, int failed);
    void *ctx;
    /* Progress of compaction, called after each file (any thread). */
    void (*on_compacted)(void *ctx, uint32_t file_id, uint64_t bytes_before, uint64_t bytes_after);
} store_options;

void store_options_default(store_options *o);

/* Recovers DATA and starts the commit thread. On error, err holds a message for
   the user (e.g. "log/000003.log: frame checksum mismatch at offset 4096"). */
int store_open(const store_options *o, store **out, char *err, size_t errcap);
/* Final sync, stops threads, frees everything. */
void store_close(store *s);
/* Whether another process holds DATA (store_open writes its PID into DATA/LOCK):
   HANU_ERR_BUSY with err naming the PID, else OK. Creates nothing, so that a
   start-up can refuse before it makes any folder; store_open decides for good. */
int store_lock_check(const char *data_dir, char *err, size_t errcap);

/* ---- databases ---- */
int store_db_lookup(store *s, const char *name, size_t len, uint32_t *id);  /* NOT_FOUND */
/* Moves whenever a database is created or dropped (any thread): a caller that keeps a
   name's id and kind looks again when it moved (read it before the lookup). */
uint64_t store_db_generation(store *s);
/* kind: enum store_db_kind (STORE_DB_KV or STORE_DB_COLLECTION). EXISTS, INVALID. */
int store_db_create(store *s, const char *name, size_t len, uint8_t kind, uint64_t *txn);
int store_db_drop(store *s, const char *name, size_t len, uint64_t *txn);   /* NOT_FOUND, INVALID */
int store_db_name_valid(const char *name, size_t len);

typedef struct store_db_info {
    char name[STORE_DB_NAME_MAX + 1];
    uint32_t id;
    uint8_t kind;          /* enum store_db_kind */
    uint64_t keys;         /* with expired keys the sweep has not deleted yet */
    uint64_t expiring;     /* keys with an expiry (expired or not) */
    uint64_t bytes;        /* key + value bytes of live records */
    uint64_t memory;       /* key directory bytes */
    uint64_t last_txn;     /* the newest record applied to it since the start (its create, a put,
                              a delete), or a record recovery found: every write to it answered
                              so far is at or below it */
} store_db_info;
int store_db_info_get(store *s, uint32_t id, store_db_info *info);
/* The kind of database id (enum store_db_kind): OK or NOT_FOUND. Any thread. */
int store_db_kind(store *s, uint32_t id, uint8_t *kind);
/* Fills up to cap infos; returns how many databases there are. */
size_t store_db_list(store *s, store_db_info *infos, size_t cap);

/* ---- keys ---- */
/* Appends the value to *value. NOT_FOUND when absent (value unchanged). */
int store_get(store *s, uint32_t db, const void *key, size_t key_len, hanu_buf *value, uint64_t *token);
/* store_get that also says when the key expires (*expire_ms, 0: never). */
int store_get_expiring(store *s, uint32_t db, const void *key, size_t key_len, hanu_buf *value,
                       uint64_t *token, uint64_t *expire_ms);
/* store_get_expiring that also says the value's Redis type (*type, LOG_TYPE_*). */
int store_get_typed(store *s, uint32_t db, const void *key, size_t key_len, hanu_buf *value,
                    uint64_t *token, uint64_t *expire_ms, uint8_t *type);

/* store_get of several keys at one moment (one hold of the store's lock):
 * each item's value is appended to out at [off, off + len) with its token,
 * or its rc says NOT_FOUND (or an error). The lookups overlap their cache
 * misses (slots, entries, values prefetched a pass ahead), which is what a
 * page of query hits spends most of its time on. Returns HANU_OK or the
 * first error that is not NOT_FOUND. */
typedef struct store_get_item {
    const void *key;
    size_t key_len;
    int rc;
    uint64_t token;
    size_t off, len;
} store_get_item;
int store_get_many(store *s, uint32_t db, store_get_item *items, size_t n, hanu_buf *out);

enum store_op_kind {
    STORE_SET = 0,
    STORE_DELETE = 1,
    STORE_SYSTEM_SET = 2,    /* a set in the system database (STORE_SYSTEM_DB_ID) */
    STORE_SYSTEM_DELETE = 3, /* a delete in the system database */
};
typedef struct store_op {
    uint8_t kind;
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
} store_op;

/* Calls fn for every key of database db (any order) with its value, under the store
   lock: fn must not call the store; the pointers are valid during the call only.
   Non-zero from fn stops the scan. NOT_FOUND (no such db), NOMEM, IO. Any thread. */
typedef int (*store_scan_fn)(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value,
                             size_t value_len);
int store_scan(store *s, uint32_t db, store_scan_fn fn, void *ctx);
/* store_scan whose fn also gets each value's Redis type (LOG_TYPE_*). */
typedef int (*store_scan_typed_fn)(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value,
                                   size_t value_len, uint8_t type);
int store_scan_typed(store *s, uint32_t db, store_scan_typed_fn fn, void *ctx);
/* One step of a resumable scan (Redis's SCAN): *cursor starts at 0 and is 0 again at the
   end; about `count` keys per call (keydir_scan: a key present for the whole scan is given
   at least once, also when the table grows between calls). fn gets no value (NULL, 0)
   and its return is ignored; expired keys are skipped. NOT_FOUND (no such db). */
int store_scan_step(store *s, uint32_t db, uint64_t *cursor, size_t count, store_scan_typed_fn fn, void *ctx);

/* Token of a key without copying its value: OK, or NOT_FOUND. */
int store_lookup(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *token);

/* WATCH for Redis transactions: while watched, every write that puts or deletes the
   key counts a touch (not the expiry sweep's deletes). A token alone misses a key
   created and deleted again between WATCH and EXEC. store_watch registers the key
   (once per call: pair each with store_unwatch) and says its touches so far;
   store_watch_touches reads them again; store_watch_touch counts a touch without a
   write (a command Redis counts as a change that changed no byte, e.g. LTRIM).
   TOO_LARGE when 16 Mi keys are watched already. Any thread. */
int store_watch(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *touches);
void store_unwatch(store *s, uint32_t db, const void *key, size_t key_len);
uint64_t store_watch_touches(store *s, uint32_t db, const void *key, size_t key_len);
void store_watch_touch(store *s, uint32_t db, const void *key, size_t key_len);

/* ---- expiry (per-key TTL) ----
 * A key whose expiry (store_write_expiring) is at or before the wall clock is expired:
 * every read (store_get, store_get_many, store_lookup, store_expiry, store_scan) and
 * every write condition treat it as absent at once (lazy expiry), on a follower too.
 * Its records stay until the writer's sweep (store_expire_sweep) deletes it with an
 * ordinary delete record; until then it is still counted in store_db_info.keys. */
uint64_t store_now_ms(void);
/* The key's expiry (0: none) and token: OK, or NOT_FOUND (absent or expired). */
int store_expiry(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *expire_ms,
                 uint64_t *token);
/* store_expiry that also says the value's Redis type (LOG_TYPE_*). */
int store_key_meta(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *expire_ms,
                   uint64_t *token, uint8_t *type);
/* The active sweep (writer thread, the leader only: a follower never deletes on its
   own). Looks at up to max_scan keys of the databases that hold keys with an expiry,
   resuming where the last call stopped, and deletes those expired at now_ms with one
   delete record per database (at most max_delete keys in all). *deleted gets how many.
   Errors of store_write. */
int store_expire_sweep(store *s, uint64_t now_ms, size_t max_scan, size_t max_delete, size_t *deleted);
/* Keys with an expiry in all databases (expired or not): 0 means a sweep has nothing
   to look at. Any thread. */
uint64_t store_expiring_keys(store *s);

enum store_cond {
    STORE_COND_NONE = 0,
    STORE_COND_EXISTS,       /* the single op's key must exist (NOT_FOUND) */
    STORE_COND_NOT_EXISTS,   /* must not exist (EXISTS) */
    STORE_COND_TOKEN,        /* must exist with this token (NOT_FOUND, MISMATCH) */
};

/* Applies ops atomically as one log record; the condition applies to ops[0].
   A delete of an absent key is no error (pass STORE_COND_EXISTS to get NOT_FOUND). *current gets the key's token on
   MISMATCH. Errors: INVALID, TOO_LARGE, NOSPACE, IO, STOPPED, NOMEM. */
int store_write(store *s, uint32_t db, const store_op *ops, size_t n, int cond,
                uint64_t cond_token, uint64_t *txn, uint64_t *current);
/* store_write with expiries: expire_ms[i] is when the key of ops[i] (a STORE_SET)
   expires, wall-clock ms since the epoch, 0 for never (NULL: none has one). The
   expiry is part of the record (log op 6), so followers, rebuilds and restarts agree;
   a set without one clears the key's expiry. */
int store_write_expiring(store *s, uint32_t db, const store_op *ops, const uint64_t *expire_ms, size_t n,
                         int cond, uint64_t cond_token, uint64_t *txn, uint64_t *current);
/* store_write_expiring with Redis types: types[i] (LOG_TYPE_*, log.h) is the type of
   the value of ops[i] (NULL: all strings). Any type but a string makes the record a
   typed put (log op 7), which keeps the type through restarts, compaction, hints,
   followers and rebuilds; reads answer it (store_get_typed, store_key_meta). */
int store_write_typed(store *s, uint32_t db, const store_op *ops, const uint64_t *expire_ms, const uint8_t *types,
                      size_t n, int cond, uint64_t cond_token, uint64_t *txn, uint64_t *current);

/* ---- durability and maintenance ---- */
uint64_t store_durable_txn(store *s);
uint64_t store_last_txn(store *s);
uint64_t store_written_txn(store *s);      /* highest txn whose frame is in the page cache */
/* The txn of the newest record in the log (0: none). Below store_last_txn after a crash,
   whose numbering resumes above txns that may have been handed out and lost: a
   projection of the log (the index) reaches this one, never that one, until a write. */
uint64_t store_last_record_txn(store *s);
int store_failed(store *s);
int store_sync(store *s);                 /* wait until all writes are durable */
void store_want_durable(store *s, uint64_t txn);   /* a caller waits for txn: sync it now */
/* Writes what this thread appended since the last flush to the log file with one
   pwrite. The server calls it once per event-loop iteration; reads and syncs flush
   what they need by themselves, so it is only a matter of batching. Right after a
   rotation the frames wait for the sealed file's sync (log_writer_flush). */
int store_flush(store *s);
/* Compacts every sealed file worth it (ratio), or all sealed files when force. */
int store_compact(store *s, int force, char *err, size_t errcap);
/* While held (counted; any thread), compaction merges no run of files: a merge gives
   the run's first id to a file holding the others' txns, so a snapshot that rotated
   at T and links the files below the new active one would link records past T if a
   file sealed after its rotation were merged into one below it. Compacting a file on
   its own goes on (its id keeps exactly its own txns). */
void store_merges_hold(store *s);
void store_merges_release(store *s);
int store_rotate(store *s);               /* seal the active file now (its sync may follow) */
/* Blocks until every sealed log file is whole on disk (store_rotate does not wait for
   the sealed file's sync): OK, or STOPPED after a failed sync. Any thread. */
int store_wait_log_complete(store *s);
/* The id of the log file being written (writer thread: right after store_rotate,
   every file with a lower id is sealed). */
uint32_t store_active_file(store *s);

/* ---- the change feed and watermarks (store_feed.c) ---- */

/* One entry of a record, as the feed delivers it (pointers valid during the call). */
typedef struct store_change {
    uint64_t txn;
    uint8_t op;                 /* enum log_op: 1 put, 2 delete, 3 create db, 4 drop db */
    uint32_t db;
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
} store_change;
/* Called on the feed's thread without the store lock (the entry points into the feed's
   own mapping of the log file). Non-zero stops the feed after this record. */
typedef int (*store_change_fn)(void *ctx, const store_change *c);

typedef struct store_feed store_feed;
/* A cursor over the records with txn >= from_txn, in txn order. A record at or above
   the floor (below) is always there; below it, compaction may have dropped records
   that newer ones superseded. Any thread; one thread per cursor. */
int store_feed_open(store *s, uint64_t from_txn, store_feed **out);
/* Delivers up to max_records records that are in the log file (the page cache), each
   entry by entry; *delivered says how many. OK with 0 delivered: nothing new yet. */
int store_feed_next(store_feed *f, size_t max_records, store_change_fn fn, void *ctx, size_t *delivered);
uint64_t store_feed_position(const store_feed *f);   /* the txn the next record has at least */
void store_feed_close(store_feed *f);
/* Which databases a projection wants (issue 24): the puts and deletes of a database
   want says 0 for are skipped before the callback (no call, no copy); creates and
   drops of databases are always delivered. A record left with no entry is skipped
   and not counted in *delivered, but the position moves past it, so a watermark that
   follows the position moves past it too. want runs on the feed's thread without the
   store lock, once per entry. NULL: every database (the default). */
typedef int (*store_feed_want_fn)(void *ctx, uint32_t db);
void store_feed_filter(store_feed *f, store_feed_want_fn want, void *ctx);
/* One store_feed_next walks at most this many skipped records (it returns, and the
   position says how far it got). */
#define STORE_FEED_SKIP_MAX 65536
/* Frames this feed decoded, and records it skipped, since it was opened (tests, bench). */
void store_feed_get_stats(const store_feed *f, uint64_t *frames_walked, uint64_t *records_skipped);
/* A projection that sleeps while nothing is written (an idle server costs nothing):
   fn(ctx) runs once on the writer thread right after the next record is applied, once
   armed; arm again after each call. Arm, then look at store_last_txn: a record
   appended before the arm shows there, one after it calls fn. fn must be quick (take a
   lock, signal a condition). One projection per store; set before arming, fn NULL to
   remove (no append may run then). */
void store_set_append_kick(store *s, void (*fn)(void *ctx), void *ctx);
void store_arm_append_kick(store *s);
/* Blocks until txn is durable: OK, or STOPPED when the log failed. */
int store_wait_durable(store *s, uint64_t txn);

/* ---- replaying another writer's log (rebuild, restore, followers) ---- */

/* Appends one record exactly as the feed delivered it on the writer (store_change
   entries of one txn, in order; create and drop keep their database ids) and applies
   it. Single writer thread, like store_write. EXISTS when the store already holds
   txn (nothing done: replay skips what it has); txns between the last one held and
   txn are skipped in the log's numbering. INVALID for entries that are not one
   record of txn, TOO_LARGE past the store's limits, STOPPED, IO, NOMEM. */
int store_replay(store *s, uint64_t txn, const store_change *entries, size_t n);
/* The next write gets txn next_txn at least, also after a crash (a node taking over
   writes of a chain another writer may have numbered further than the bucket shows). */
int store_skip_txns(store *s, uint64_t next_txn);

/* A projection of the log (index, bucket sealer, replica) registers a named watermark
   and advances it as it consumes the feed; the compaction floor is the minimum of the
   durable txn and every watermark. Persisted in meta/watermarks (each change synced). */
#define STORE_MAX_WATERMARKS 16
#define STORE_WATERMARK_NAME_MAX 32      /* [a-z0-9_-] */
typedef struct store_watermark {
    char name[STORE_WATERMARK_NAME_MAX + 1];
    uint64_t txn;                        /* every record up to it is consumed */
} store_watermark;
/* Creates it at 0 when new; *txn gets its value. INVALID name, TOO_LARGE (16 already). */
int store_watermark_register(store *s, const char *name, uint64_t *txn);
int store_watermark_advance(store *s, const char *name, uint64_t txn);   /* never moves back */
int store_watermark_drop(store *s, const char *name);
size_t store_watermark_list(store *s, store_watermark *out, size_t cap);
uint64_t store_floor(store *s);

typedef struct store_stats {
    uint64_t keys, databases, files, disk_bytes, dead_bytes, memory_bytes;
    uint64_t log_bytes_written, prealloc_bytes, syncs, sync_ns, frames, rotations;
    uint64_t compactions, compaction_bytes_written, durable_txn, last_txn;
    uint64_t compaction_lock_max_us;   /* longest time a compaction held the store lock */
    uint64_t startup_ms;
} store_stats;
void store_get_stats(store *s, store_stats *st);

#endif
