/*
 * log: the write-ahead log that is also the store. Framed, checksummed records
 * in numbered data files (DATA/log/NNNNNN.log), a writer that appends frames
 * to the active file and a group-commit thread that makes them durable with
 * one fdatasync for every writer waiting at that moment.
 *
 * Formats (docs/FORMATS.md has the full description):
 *
 *   file header (40 bytes): "HANULOG\0" | u8 version=1 | u8 flags (bit 0:
 *     compacted) | u16 0 | u32 file_id | u64 covers_first | u64 covers_last |
 *     u32 generation | u32 checksum of bytes 0..36. A plain file with
 *     covers_first != 0 continues the log at that txn, but its first frame may
 *     carry a higher one: the txns between were lost in a crash and are skipped.
 *
 *   frame: u32 body_len | u32 checksum (XXH3 low 32 bits of bytes 8..end) |
 *          u64 txn | u32 entry_count | entries
 *   entry: u8 op | u32 db | u16 key_len | u32 value_len | key | value
 *   seal:  a frame with body_len 0 and entry_count 0xFFFFFFFF (txn = last txn
 *          of the file): the file's data ends here, whatever bytes follow.
 *
 * Every file but the active one ends with a seal, written and synced before
 * the next file gets its first frame on disk (a preallocated log holds the new
 * file's frames in memory until the commit thread has synced the old file, so
 * rotating never waits for the device); at start-up the newest file is sealed at
 * its last complete frame and writing goes on in a new file. So stale or torn
 * bytes after a seal are never read again, and anything else that fails to
 * decode before a seal is damage.
 *
 * A frame is one record and one txn; txns grow by one per record with no
 * gaps, except in compacted files, which keep the original txns of the live
 * records (increasing, with gaps) and say which range they cover.
 *
 * Threads: log_writer_append and log_writer_rotate are called by one thread
 * (the store's single writer); log_writer_flush and log_writer_read_pending by
 * any thread. The group-commit thread is internal; it calls options.on_durable
 * from its own thread after every sync.
 */
#ifndef HANU_LOG_H
#define HANU_LOG_H

#include <stdint.h>
#include <stddef.h>
#include "base/base.h"

#define LOG_FILE_HEADER_SIZE 40
#define LOG_FRAME_HEADER_SIZE 20
#define LOG_ENTRY_HEADER_SIZE 11
#define LOG_FILE_MAGIC "HANULOG"
/* Version 2 added op 6 (LOG_OP_PUT_EXPIRING), version 3 op 7 (LOG_OP_PUT_TYPED);
   version 1 and 2 files are read as before. */
#define LOG_FORMAT_VERSION 3
#define LOG_FORMAT_VERSION_MIN 1
#define LOG_FLAG_COMPACTED 1u
#define LOG_MAX_ENTRIES_PER_FRAME 100000u
#define LOG_MAX_FRAME_BODY (256u << 20)

enum log_op {
    LOG_OP_PUT = 1,
    LOG_OP_DELETE = 2,
    LOG_OP_CREATE_DB = 3,   /* db = new id, key = name, value = the kind byte (or empty) */
    LOG_OP_DROP_DB = 4,     /* db = id, key = name */
    /* Written by older versions for their system records; never written now. It is
       a put: log_frame_next_entry delivers it as LOG_OP_PUT. */
    LOG_OP_OLD_SYSTEM_PUT = 5,
    /* A put with an expiry (format version 2): the value is the value bytes followed
       by a u64 expiry, ms since the epoch (LOG_EXPIRY_SIZE bytes; the decoder refuses
       a shorter value). Delivered as itself: readers that copy records keep it whole. */
    LOG_OP_PUT_EXPIRING = 6,
    /* A put of a value with a Redis type other than string (format version 3): the
       value is the value bytes, then a u64 expiry (0: none), then a u8 type
       (LOG_TYPE_*, never 0): LOG_TYPED_SIZE bytes the decoder requires. */
    LOG_OP_PUT_TYPED = 7,
};
#define LOG_EXPIRY_SIZE 8
#define LOG_TYPED_SIZE 9
#define LOG_OP_MAX LOG_OP_PUT_TYPED

/* A value's Redis type: strings are plain puts (ops 1 and 6); the rest are op 7. */
enum log_value_type {
    LOG_TYPE_STRING = 0,
    LOG_TYPE_LIST = 1,
};
#define LOG_TYPE_MAX LOG_TYPE_LIST

/* Bytes after an entry's value bytes that are not the value (expiry, type). */
static inline uint32_t log_op_trailer(uint8_t op)
{
    return op == LOG_OP_PUT_EXPIRING ? LOG_EXPIRY_SIZE : op == LOG_OP_PUT_TYPED ? LOG_TYPED_SIZE : 0;
}
static inline int log_op_is_put(uint8_t op)
{
    return op == LOG_OP_PUT || op == LOG_OP_PUT_EXPIRING || op == LOG_OP_PUT_TYPED;
}

typedef struct log_file_header {
    uint8_t flags;
    uint32_t file_id;
    uint64_t covers_first;  /* compacted files: txn range of the file they replaced */
    uint64_t covers_last;
    uint32_t generation;    /* bumped by each compaction; hint files name it */
} log_file_header;

void log_file_header_encode(uint8_t out[LOG_FILE_HEADER_SIZE], const log_file_header *h);
/* HANU_ERR_CORRUPT for a bad magic, version or checksum. */
int log_file_header_decode(const uint8_t in[LOG_FILE_HEADER_SIZE], log_file_header *h);

/* ---- frames ---- */

/* Building a frame into a buffer: begin, add entries, then finish with its txn. */
int log_frame_begin(hanu_buf *b);   /* b is reset; reserves the header */
int log_frame_add(hanu_buf *b, uint8_t op, uint32_t db, const void *key, uint16_t key_len,
                  const void *value, uint32_t value_len);
/* The same, with an expiry when expire_ms is not 0: then the entry is an op 6
   (LOG_OP_PUT_EXPIRING) whose value is value followed by the expiry. */
int log_frame_add_put(hanu_buf *b, uint8_t op, uint32_t db, const void *key, uint16_t key_len,
                      const void *value, uint32_t value_len, uint64_t expire_ms);
/* The same with a type: LOG_TYPE_STRING is log_frame_add_put; any other makes the
   entry an op 7 (LOG_OP_PUT_TYPED) whose value is value, the expiry, the type. */
int log_frame_add_typed(hanu_buf *b, uint8_t op, uint32_t db, const void *key, uint16_t key_len,
                        const void *value, uint32_t value_len, uint64_t expire_ms, uint8_t type);
/* Writes length, count, txn and checksum into the header. */
void log_frame_finish(hanu_buf *b, uint64_t txn);
/* Offset of the value of entry i within a frame (for locations), given entry sizes. */

typedef struct log_entry {
    uint8_t op;
    uint32_t db;
    const uint8_t *key;
    uint16_t key_len;
    const uint8_t *value;
    uint32_t value_len;
    uint32_t value_offset;   /* offset of value from the frame start */
    /* Ops 6 and 7: the expiry (value and value_len still include it and op 7's type,
       so a copy of the entry is the same record); 0 for every other op. */
    uint64_t expire_ms;
    uint8_t type;            /* op 7: its LOG_TYPE_*; LOG_TYPE_STRING for every other op */
} log_entry;

typedef struct log_frame {
    uint64_t txn;
    uint32_t entry_count;
    uint32_t size;           /* header + body */
    const uint8_t *start;
} log_frame;

enum log_decode_result {
    LOG_FRAME_OK = 0,
    LOG_FRAME_END = 1,       /* a zeroed header: no more frames here */
    LOG_FRAME_TORN = 2,      /* header promises more bytes than there are */
    LOG_FRAME_BAD = 3,       /* checksum or structure wrong */
    LOG_FRAME_SEAL = 4,      /* a valid seal: the file's data ended before it */
};

#define LOG_SEAL_COUNT 0xFFFFFFFFu
/* Writes a seal frame (LOG_FRAME_HEADER_SIZE bytes) carrying last_txn. */
void log_seal_encode(uint8_t out[LOG_FRAME_HEADER_SIZE], uint64_t last_txn);

/* Decodes the frame at p (avail bytes). On LOG_FRAME_BAD/TORN *why says why. */
int log_frame_decode(const uint8_t *p, size_t avail, log_frame *f, const char **why);
/* The same for bytes whose checksum a walk already verified (the change feed's shared
   pass, store_feed.c): every check but the checksum. */
int log_frame_decode_checked(const uint8_t *p, size_t avail, log_frame *f, const char **why);
/* Iterates entries: *pos starts at 0; returns 1 with *e filled, 0 at the end. Frame must be OK. */
int log_frame_next_entry(const log_frame *f, uint32_t *pos, log_entry *e);

/* The one frame walker: recovery, compaction and the change feed read a file's
   frames through it. */
typedef struct log_walker {
    const uint8_t *map;
    uint64_t end;          /* bytes of the file that may hold frames */
    uint64_t off;          /* offset of the frame the next call decodes */
} log_walker;

static inline void log_walker_init(log_walker *w, const uint8_t *map, uint64_t end)
{
    w->map = map;
    w->end = end;
    w->off = LOG_FILE_HEADER_SIZE;
}

/* Decodes the frame at w->off. LOG_FRAME_OK: *f is filled and *at is its offset,
   and w->off moves past it; otherwise (END, SEAL, TORN, BAD, with *why) w->off
   stays at the frame that ended the walk. */
static inline int log_walker_next(log_walker *w, log_frame *f, uint64_t *at, const char **why)
{
    if (w->off >= w->end) return LOG_FRAME_END;
    int r = log_frame_decode(w->map + w->off, w->end - w->off, f, why);
    if (r == LOG_FRAME_OK) {
        *at = w->off;
        w->off += f->size;
    }
    return r;
}

/* ---- files ---- */
/* DATA/log/NNNNNN.log and .hint paths. */
void log_file_path(char *out, size_t cap, const char *dir, uint32_t file_id, const char *ext);

enum log_prealloc {
    LOG_PREALLOC_APPEND = 0,     /* plain appends: the file grows with every write */
    LOG_PREALLOC_FALLOCATE = 1,  /* fallocate the whole file when it is created */
    LOG_PREALLOC_ZEROFILL = 2,   /* write zeros over the whole file ahead of time */
};
int log_prealloc_parse(const char *s, enum log_prealloc *out);
const char *log_prealloc_name(enum log_prealloc mode);

/* ---- writer and group commit ---- */
typedef struct log_writer log_writer;

typedef struct log_options {
    const char *dir;              /* DATA/log, must exist */
    uint64_t file_size;           /* rotate before a frame would pass this (default 64 MiB) */
    enum log_prealloc prealloc;
    uint32_t commit_window_us;    /* leader waits this long before syncing (default 0) */
    /* While nobody waits for durability (every pending write was acknowledged with
       durability none), sync at most this often; 0: sync at once, like for waiters. */
    uint32_t lazy_sync_ms;
    /* Called from the commit thread after each sync: durable_txn is the highest txn
       now durable, failed != 0 when fdatasync failed (then nothing more ever is). */
    void (*on_durable)(void *ctx, uint64_t durable_txn, int failed);
    void *ctx;
    /* Txns never repeat, also across crashes: no txn is handed out above the value
       durably recorded in this file (reserved ahead in blocks of LOG_TXN_RESERVE_BLOCK
       by the preparing thread), and after a crash numbering resumes above it.
       NULL: no reservation (tests of the log alone). */
    const char *reserve_path;
} log_options;

#define LOG_TXN_RESERVE_BLOCK (1ull << 20)
/* "HANUTXN\0" | u64 reserved | u64 durable mark | u32 checksum of the 24 bytes before.
   The durable mark is a txn known durable when the file was written (it is
   rewritten at most once a second while it moves, and at a clean stop): recovery
   tells damage (frames missing at or below it) from a torn tail (above it). */
#define LOG_TXN_RESERVE_SIZE 28
/* A clean stop appends "HANUCLN\0" | u32 checksum of the 36 bytes before: the
   reserved txn is then exactly where numbering stopped (a jump, e.g. after a
   rebuild, included), not a block handed out ahead, so the next start resumes
   there without reporting a crash. Any write during a run drops it (the file is
   replaced whole), so a crash always finds the plain 28 bytes. */
#define LOG_TXN_RESERVE_CLEAN_SIZE (LOG_TXN_RESERVE_SIZE + 12)
/* Reads the reservation: OK (*reserved, *durable set), NOT_FOUND, or CORRUPT. */
int log_txn_reserve_read(const char *path, uint64_t *reserved, uint64_t *durable);
/* 1 when the reservation was written by a clean stop (its mark is whole), else 0. */
int log_txn_reserve_clean(const char *path);
/* Replaces it atomically and durably (temp file, fdatasync, rename, fsync dir);
   clean: with the clean stop's mark. */
int log_txn_reserve_write(const char *path, uint64_t reserved, uint64_t durable);
int log_txn_reserve_write_clean(const char *path, uint64_t reserved, uint64_t durable);

/* Starts writing at write_offset of file active_id (created when missing) with next_txn,
   or above the reserved txn when that is higher (a crash lost txns that may have been
   seen): then the new file's header says the log continues from next_txn
   (covers_first), and log_writer_next_txn tells where numbering resumed. */
int log_writer_open(const log_options *opt, uint32_t active_id, uint64_t write_offset,
                    uint64_t next_txn, log_writer **out);
/* Stops the commit thread after a final sync, closes files. When every frame
   written is durable, the reservation records a clean stop at next_txn - 1 (a
   jump without frames after it included): the next open resumes exactly there. */
void log_writer_close(log_writer *w);
/* Whether open resumed numbering above the log's last frame because the last stop
   was clean (a jump it recorded), not because a crash may have lost txns. */
int log_writer_resumed_clean(log_writer *w);

typedef struct log_location {
    uint32_t file_id;
    uint32_t offset;      /* of the frame within the file */
} log_location;

/* Finishes the frame in b with the next txn and writes it to the active file (page cache).
   Rotates first when the frame does not fit. On error nothing was written (a partial
   write is undone) and the txn is not used. Returns HANU_ERR_STOPPED after a failed sync.
   *rotated_from is set to the sealed file id when this call rotated, else 0. */
int log_writer_append(log_writer *w, hanu_buf *b, uint64_t *txn, log_location *loc,
                      uint32_t *rotated_from);
/* The same with the txn the frame must carry (replaying another writer's log): txn is
   at least log_writer_next_txn, else INVALID. Above it, the txns between are skipped
   (a new file whose header says so: see the file header above). */
int log_writer_append_at(log_writer *w, hanu_buf *b, uint64_t txn, log_location *loc,
                         uint32_t *rotated_from);
/* The next frame gets txn at least, and so does every frame after a crash from now
   on (the reservation is raised durably before it returns). */
int log_writer_skip_to(log_writer *w, uint64_t txn);
uint64_t log_writer_next_txn(const log_writer *w);
uint64_t log_writer_durable_txn(const log_writer *w);
/* Highest txn whose frame is in the file (page cache): appended and flushed. */
uint64_t log_writer_written_txn(log_writer *w);
uint32_t log_writer_active_id(const log_writer *w);
int log_writer_failed(const log_writer *w);
/* Seals the active file now and starts the next one (used by snapshots, tests). In a
   preallocated log it returns before the sealed file is synced (the commit thread
   syncs it; log_writer_wait_complete waits for that); in append mode after. */
int log_writer_rotate(log_writer *w, uint32_t *sealed_id);
/* Files with lower ids are sealed and whole on disk: the active file's id, or the
   sealed file whose sync is still owed. */
uint32_t log_writer_complete_below(log_writer *w);
/* Blocks until every sealed file is synced: OK, or STOPPED when a sync failed. */
int log_writer_wait_complete(log_writer *w);
/* Blocks until txn is durable: OK, or STOPPED when the log failed first. */
int log_writer_wait_durable(log_writer *w, uint64_t txn);
/* Blocks until every appended txn is durable (or the log failed). */
int log_writer_sync(log_writer *w);
/* Someone waits for txn to be durable: the commit thread syncs it without delay. */
void log_writer_want_durable(log_writer *w, uint64_t txn);
/* Writes pending frames to the file (one pwrite); call once per batch of appends. While a
   sealed file's sync is owed (a rotation just happened) the frames stay pending: the
   commit thread writes them once it has synced that file. */
int log_writer_flush(log_writer *w);
/* Readers of a frame that may still sit in the pending buffer (not in the file yet):
   appends bytes [off, off + len) of file_id to out and returns 1 when they are
   pending, 0 when they are in the file (read them there), NOMEM. Never writes. */
int log_writer_read_pending(log_writer *w, uint32_t file_id, uint64_t off, size_t len, hanu_buf *out);

typedef struct log_writer_stats {
    uint64_t bytes_written;       /* frame bytes passed to pwrite */
    uint64_t prealloc_bytes;      /* zero bytes written ahead of time */
    uint64_t syncs;
    uint64_t frames;
    uint64_t rotations;
    uint64_t sync_ns;             /* time spent in the commit thread's fdatasync calls */
} log_writer_stats;
void log_writer_get_stats(log_writer *w, log_writer_stats *s);

/* Creates file_id with its header (and preallocation), fsyncs it and the directory. */
int log_file_create(const char *dir, uint32_t file_id, enum log_prealloc prealloc, uint64_t file_size,
                    const log_file_header *h, int *fd_out);

#endif
