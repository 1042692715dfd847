/*
 * store_internal.h: what store.c and store_compact.c share, nobody else.
 */
#ifndef HANU_STORE_INTERNAL_H
#define HANU_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include "store/store.h"
#include "store/keydir.h"
#include "log/log.h"

typedef struct store_file {
    uint32_t id;
    int fd;                    /* read-only descriptor */
    uint8_t *map;              /* PROT_READ, MAP_SHARED */
    size_t map_len;
    uint64_t used;             /* bytes holding frames (header included) */
    uint64_t record_bytes;     /* entry bytes in this file */
    uint64_t dead_bytes;       /* entry bytes no longer live */
    uint64_t first_txn, last_txn;
    int compacted;
    uint32_t generation;
    /* The change feed's shared checksum pass (store_feed.c): frames below this offset
       were verified by some feed walk of this generation (mu held). */
    uint64_t feed_verified;
    uint32_t feed_verified_gen;
} store_file;

typedef struct store_unsettled_delete {
    uint64_t key;              /* hash of the key mixed with its database id */
    uint64_t txn;
} store_unsettled_delete;

typedef struct store_watched {
    uint64_t key;              /* hash of the key mixed with its database id; 0: free */
    uint64_t touches;          /* writes that touched the key while watched */
    uint32_t refs;             /* WATCHes holding it */
} store_watched;

typedef struct store_db {
    uint32_t id;
    char name[STORE_DB_NAME_MAX + 1];
    uint64_t create_txn;
    uint8_t kind;              /* enum store_db_kind, from the create record */
    uint64_t bytes;
    uint64_t expiring;         /* keys whose entry carries an expiry */
    uint64_t last_txn;         /* newest record applied to it (store_db_info) */
    keydir kd;
} store_db;

struct store {
    store_options opt;
    char data_dir[1024];
    char log_dir[1100];
    int lock_fd;

    pthread_mutex_t mu;        /* key directories, databases, file table */
    store_db **dbs;            /* indexed by position, not id */
    _Atomic uint64_t db_generation;   /* moves on every create and drop (store_db_generation) */
    size_t ndbs;
    uint32_t next_db_id;
    store_file **files;        /* indexed by file id */
    uint32_t files_cap;
    uint32_t oldest_file;

    log_writer *log;
    hanu_buf frame;            /* writer thread's reusable frame buffer */
    log_entry *entries;        /* the entries of that frame, applied after the append */
    size_t nentries, entries_cap;
    _Atomic uint64_t last_txn;   /* atomic: a follower's loop reads what its replay thread applied */

    /* What compaction must know of writes above the durable txn (the floor): the
       key directory holds them already, but a record they supersede may go only
       once they are durable. A put keeps its txn in the key directory; deletes
       and database changes leave nothing there, so they are listed here until
       durable (mu held). */
    store_unsettled_delete *unsettled;   /* ring in txn order */
    size_t unsettled_head, unsettled_len, unsettled_cap;
    uint64_t unsettled_overflow_txn;     /* deletes not listed (ring full) up to this txn */
    uint64_t db_change_txn;              /* newest create or drop of a database */

    /* Watched keys (store_watch.c), and whether the write in flight is the expiry
       sweep's, whose deletes touch no watched key (a key expired when it was
       watched stays unchanged for Redis). */
    store_watched *watch;
    size_t watch_cap, watch_count;
    int sweep_writing;

    /* One projection's wake-up after the next append (store_arm_append_kick). */
    void (*kick_fn)(void *ctx);
    void *kick_ctx;
    _Atomic int kick_armed;

    /* Where the expiry sweep stopped (writer thread): a database id and a slot. */
    uint32_t sweep_db;
    size_t sweep_pos;

    store_watermark watermarks[STORE_MAX_WATERMARKS];   /* mu held */
    size_t nwatermarks;
    pthread_mutex_t watermark_save_mu;   /* orders the file's saves, which run without mu */

    pthread_t compact_thread;
    int compact_started;
    pthread_mutex_t compact_mu;   /* one compaction at a time */
    pthread_cond_t compact_cv;
    int compact_stop;
    _Atomic int compact_abort;    /* store_close: a running compaction gives up early */
    uint32_t merge_holds;         /* mu held: while > 0 no run of files is merged (snapshots) */
    _Atomic uint64_t compactions, compaction_bytes;
    _Atomic uint64_t compaction_lock_max_us;   /* longest install under the store lock */
    uint64_t startup_ms;
};

store_db *store_db_by_id(store *s, uint32_t id);    /* mu held */
store_file *store_file_get(store *s, uint32_t id);  /* mu held */
int store_file_map(store_file *f, size_t len);
void store_file_unmap(store_file *f);
/* Marks entry bytes of an old location dead (mu held). */
void store_mark_dead(store *s, uint32_t file_id, uint64_t bytes);
static inline uint64_t store_entry_bytes(size_t klen, size_t vlen)
{
    return LOG_ENTRY_HEADER_SIZE + klen + vlen;
}
/* The bytes of the record a key directory entry points to (an expiry follows the value). */
static inline uint64_t store_kd_record_bytes(size_t klen, const kd_entry *e)
{
    if (e->flags & KD_LIST) return store_entry_bytes(klen, e->value_len) + LOG_TYPED_SIZE;
    return store_entry_bytes(klen, e->value_len) + ((e->flags & KD_EXPIRES) ? LOG_EXPIRY_SIZE : 0);
}

/* Records the entries of a live write above the floor (mu held). */
void store_note_unsettled(store *s, const log_entry *e, uint64_t txn);
/* Forgets what the durable txn now covers (mu held). */
void store_settle(store *s, uint64_t durable);
/* Was the key deleted by a txn above floor? (mu held; may say yes when unsure) */
int store_deleted_above(store *s, uint32_t db, uint64_t hash, uint64_t floor);

/* store_watch.c: counts a write of a watched key (mu held). */
void store_watch_touch_locked(store *s, uint32_t db, const void *key, size_t key_len);

/* store_feed.c */
int store_watermarks_load(store *s, char *err, size_t errcap);
uint64_t store_floor_locked(store *s);   /* mu held */

/* store_compact.c */
int store_compact_file(store *s, uint32_t file_id, char *err, size_t errcap);
int store_hint_load(store *s, store_file *f, char *err, size_t errcap);
/* The entry count a hint file claims, capped by its size (0 without one): start-up
   sizes the key directory from it before loading anything. */
uint64_t store_hint_peek_count(store *s, uint32_t file_id);
void *store_compact_main(void *arg);
/* Applies one recovered entry to the in-memory state (mu held or single-threaded). */
int store_apply_entry(store *s, const log_entry *e, uint64_t txn, uint32_t file_id,
                      uint32_t value_off);

#endif
