/*
 * quad_internal.h: the in-memory shapes shared by the facts kernel's files
 * (quad.c open/close/stats, quad_file.c format and recovery, quad_write.c
 * append/retire/group commit, quad_read.c gather/scan/cache, quad_io.c cold
 * reads). Not part of the public contract (include/quad.h is).
 *
 * Invariants:
 *   - chunks [0, nchunks) are published and immutable except their retirement
 *     state, which only changes under rlock (write) and wlock;
 *   - a chunk's `epoch` <= q->epoch once published; readers load epoch, then
 *     nchunks (both acquire), the writer stores them in the reverse order;
 *   - written_epoch >= durable: everything up to written_epoch is in the file.
 */
#ifndef HANU_QUAD_INTERNAL_H
#define HANU_QUAD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "codec/codec.h"
#include "quad.h"
#include "base/base.h"

/* ---- file format constants (docs/QUAD.md) ---- */
#define QF_VERSION 2
#define QF_HEADER_SIZE 4096          /* file header region; frames start here */
/* Each slot sits in a 512-byte sector of its own, apart from the file header:
 * a torn slot write can then damage only that slot (version 1 kept the header
 * and both checkpoint slots in sector 0). */
#define QF_SECTOR 512
#define QF_SLOT_OFF 512              /* checkpoint slots at 512 and 1024 */
#define QF_MARK_OFF 1536             /* durable mark slots at 1536 and 2048 */
#define QF_SLOT_SIZE 64
#define QF_FRAME_HDR 40
#define QF_FRAME_MAGIC 0x4D524651u   /* "QFRM" */
#define QF_SLOT_MAGIC 0x504B4351u    /* "QCKP" */
#define QF_MARK_MAGIC 0x52554451u    /* "QDUR" */
#define QF_CKPT_PART (4u << 20)      /* a checkpoint is split into frames of about this size */
#define QF_T_APPEND 1
#define QF_T_RETIRE 2
#define QF_T_CHECKPOINT 3
#define QF_T_RELOCATE 4              /* the cleaner's record of one chunk's kept rows */
#define QF_T_CKPT_FOLD 5             /* checkpoint part with folds (older files: QF_T_CHECKPOINT) */
#define QF_IS_CKPT(t) ((t) == QF_T_CHECKPOINT || (t) == QF_T_CKPT_FOLD)
#define QF_CKPT_RELOCATED (UINT64_C(1) << 63)   /* checkpoint chunk entry: epoch flag */
#define QF_CHUNK_HDR 16              /* u64 chunk_no, u32 rows, u32 payload_len */
#define QF_MAX_BODY (UINT32_C(1) << 31)
#define QF_RETIRE_BLOCK 256          /* ids per codec block in a retire frame */

#define QUAD_MAX_BATCH (1u << 24)
#define QUAD_PAGE_BITS 12            /* chunk table: pages of 4096 chunks */
#define QUAD_PAGE_SIZE (1u << QUAD_PAGE_BITS)
#define QUAD_MAX_PAGES (1u << 16)   /* up to 2^28 chunks */

typedef struct quad_mb {
    uint32_t off;      /* payload offset from the chunk's payload start */
    uint8_t code;
    uint64_t base;
} quad_mb;

/* Retired slots of one chunk: sparse (sorted slots with epochs) until the
 * count passes rows / QUAD_DENSE_DIV, then dense: a 16-bit index per row
 * (0 = live, k = depochs[k - 1]), since a chunk is retired by few commits;
 * past 65535 distinct epochs, `wide`, an epoch per row. Measured: the 8-byte
 * dense array's first touch (page faults) was a third of a 4096-id ordered
 * retire. */
#define QUAD_DENSE_DIV 16
typedef struct quad_retset {
    uint32_t count, cap;
    uint32_t *slots;
    uint64_t *epochs;
    uint16_t *dense;
    uint64_t *depochs;
    uint32_t ndepochs, depochs_cap;
    uint64_t *wide;
} quad_retset;

static inline int quad_retset_is_dense(const quad_retset *r)
{
    return r->dense || r->wide;
}

/* The retire epoch of slot in a dense set (0 = live). */
static inline uint64_t quad_dense_epoch(const quad_retset *r, uint32_t slot)
{
    if (r->wide) return r->wide[slot];
    uint16_t k = r->dense[slot];
    return k ? r->depochs[k - 1] : 0;
}

/* A relocated chunk (the cleaner): which slots its payload keeps. Slot s of
 * the chunk is row rank(s) of the payload; a dropped slot was retired at or
 * below horizon and is invisible at every snapshot the store still answers. */
typedef struct quad_live {
    uint64_t horizon;      /* the clean's horizon */
    uint64_t append_at;    /* where the stream finds the append frame (frame_before) */
    uint32_t live;         /* kept slots: rows of the payload */
    uint32_t words;        /* bitmap words: ceil(rows / 64) */
    uint64_t *bits;        /* bit set = slot kept */
    uint32_t *rank;        /* kept slots before each word */
} quad_live;

typedef struct quad_chunk {
    uint64_t off;          /* file offset of the payload area */
    uint64_t epoch;        /* commit that appended it */
    uint32_t rows;
    uint32_t nmb;          /* microblocks per lane */
    uint32_t lane_off[5];  /* lane payload starts within the payload area; [4] = total */
    uint32_t row_bytes;    /* bytes a row takes in the chunk's row form (quad_row_layout) */
    quad_mb *mb;           /* 4 * nmb descriptors, microblock-major in memory
                              (a point read finds its four in one cache line;
                              quad_mb_at), lane-major in the file */
    quad_retset *ret;      /* NULL when nothing retired */
    quad_live *live;       /* NULL unless the cleaner relocated the chunk; then nmb,
                              mb, lane_off, off and row_bytes describe live->live rows */
    /* cache state of the lanes, kept here because a gather touches the chunk
     * anyway: the cached entries (set and cleared under the chunk's shard
     * lock, read without it inside a reader section, see qc_cache) and CLOCK
     * use bits (set by readers only when clear, so hits write nothing shared) */
    struct qc_entry *_Atomic cached[5];   /* lanes 0-3, then QC_ROWS */
    _Atomic uint8_t cused;                /* bit per entry, and QC_SCATTERED */
} quad_chunk;

/* cached[QC_ROWS]: the chunk's row form, built for chunks read at random
 * (quad_read.c). QC_SCATTERED: a scattered read found all lanes cached once.
 * The row form's entry data starts with its layout, then the rows. */
typedef struct qrow_form {
    uint64_t base[4];
    uint64_t mask[4];          /* of lane l's bytes; 0 for a constant lane */
    uint32_t off[4];           /* lane l's byte offset in a row */
    uint32_t row_bytes;
    uint32_t pad;
} qrow_form;
#define QC_ROWS 4
#define QC_SCATTERED 0x80u

/* ---- payload cache: compressed lane payloads of (chunk, lane) ----
 * An entry is reachable from its chunk (quad_chunk.cached[lane]) and listed in
 * its shard's CLOCK array; both change only under the shard's lock (shard
 * chosen by chunk number). Readers take no lock and write nothing shared on a
 * hit: a gather runs inside a reader section (epoch-based reclamation), and an
 * evicted entry is unlinked, tagged with the cache generation and freed only
 * once every reader section open at that time has ended. Measured: reference
 * counts under the shard locks made two threads slower than one (random
 * gathers touch ~1 000 chunks, each a cache line bouncing between cores). */
typedef struct qc_entry {
    struct quad_chunk *chunk;
    uint32_t lane;                     /* 0-3, or QC_ROWS */
    uint32_t len;
    uint32_t idx;                      /* position in the shard's array */
    uint64_t dead_gen;                 /* evicted: generation when unlinked */
    struct qc_entry *next_dead;
    uint8_t data[];                    /* len + CODEC_SLACK bytes */
} qc_entry;

#define QC_SHARDS 16
typedef struct qc_shard {
    pthread_mutex_t mu;
    qc_entry **arr;
    uint32_t count, cap, hand;
    size_t bytes;
    qc_entry *dead;                    /* evicted, waiting for older readers */
    size_t dead_bytes;
} qc_shard;

/* Reader sections: a thread announces the generation it entered at in one
 * of these slots (0 = free); threads share slots only past QC_READERS at once. */
#define QC_READERS 64
typedef struct qc_reader {
    _Alignas(64) _Atomic uint64_t gen;
} qc_reader;

typedef struct qc_cache {
    qc_shard shard[QC_SHARDS];
    size_t shard_limit;
    _Atomic uint64_t gen;              /* starts at 1 */
    _Atomic uint64_t hits, misses;
    _Atomic size_t dead_bytes;         /* evicted, not yet freed, all shards */
    qc_reader readers[QC_READERS];
} qc_cache;

/* ---- cold reads ---- */
typedef struct quad_ioreq {
    void *buf;
    size_t len;
    uint64_t off;
    int rc;
} quad_ioreq;

typedef struct quad_io quad_io;
typedef struct quad_dio quad_dio;
#define QD_BLOCK 4096u   /* QUAD_IO_DIRECT: unit and alignment of every transfer */

struct quad {
    int fd;
    char *path;
    quad_options opt;
    uint32_t chunk_rows, mb_rows, mb_shift;

    /* directory */
    quad_chunk **pages;                /* QUAD_MAX_PAGES page pointers */
    _Atomic uint64_t nchunks;
    _Atomic uint64_t epoch;
    _Atomic uint64_t retired;
    uint64_t facts;
    uint64_t payload_bytes, lanes_const, lanes_for, lanes_raw;
    pthread_rwlock_t rlock;            /* retirement state */

    /* writer */
    pthread_mutex_t wlock;
    uint8_t *fbuf;                     /* frame buffer, reused */
    size_t fcap;
    uint64_t tail;                     /* end of the valid log */
    uint64_t ckpt_tail;                /* log end at the last checkpoint */
    uint64_t ckpt_next;                /* log end at which the next automatic checkpoint runs */
    uint64_t ckpt_bytes;               /* bytes the last checkpoint wrote or tried to */
    uint64_t ckpt_seq;
    uint64_t ckpt_epoch;
    uint64_t recovered_frames;
    _Atomic int stopped;
    struct quad_append_req *_Atomic append_pending;   /* appends waiting for wlock */
    _Atomic uint32_t append_seq;       /* futex word: bumped when appends complete */
    _Atomic uint32_t append_sleepers;
    quad_id *wids;                     /* retire: ids grouped by chunk (writer scratch) */
    size_t wids_cap;
    uint32_t *whist;
    size_t whist_cap;

    /* group commit (quad_write.c): no mutex; waiters sleep on sync_seq */
    _Atomic uint64_t written_epoch;
    _Atomic uint64_t written_off;      /* log end of written_epoch's frames (stored first) */
    _Atomic uint64_t durable;          /* frozen for good once a sync failed */
    _Atomic int leader;                /* a thread is running the sync */
    _Atomic int sync_failed;
    uint64_t failed_epoch;             /* written_epoch read by the sync that failed */
    pthread_mutex_t sync_mu;           /* every fdatasync of the file: qf_sync */
    uint64_t mark_seq;                 /* durable mark slots (sync_mu) */
    uint64_t durable_off;
    _Atomic uint32_t sync_seq;         /* futex word: bumped after every sync */
    uint64_t last_group;               /* commits covered by the last sync (leader only) */
    _Atomic uint64_t syncs;

    /* commit streams (quad_stream.c): readers of the log wait on stream_seq,
     * bumped by qf_written and quad_durable_raise only while someone sleeps */
    _Atomic uint32_t stream_seq;
    _Atomic uint32_t stream_sleepers;
    pthread_mutex_t stream_mu;         /* the list of held streams */
    struct quad_stream *held;
    _Atomic uint64_t log_floor;        /* oldest epoch still in the log (1: all) */

    /* the cleaner (quad_clean.c): holds listed under stream_mu */
    struct quad_hold *holds;
    _Atomic uint64_t gone_below;       /* horizon of the last clean: older snapshots are GONE */
    uint64_t relocated;                /* relocated chunks (wlock) */
    pthread_mutex_t clean_mu;          /* one quad_clean at a time */
    uint64_t clean_walked;             /* the log before it was walked for frames to punch */

    qc_cache cache;
    quad_io *io;
    quad_dio *dio;                     /* QUAD_IO_DIRECT state, NULL without the flag */
    uint64_t fork_gen;                 /* quad_fork_gen at open: a child after fork differs */
};

/* Bumped in the child at every fork (pthread_atfork, quad.c): a handle
 * opened before the fork refuses every call there. */
extern _Atomic uint64_t quad_fork_gen;
static inline int quad_forked(const quad *q)
{
    return q->fork_gen != atomic_load_explicit(&quad_fork_gen, memory_order_relaxed);
}

/* The descriptor of lane l, microblock m. */
static inline quad_mb *quad_mb_at(const quad_chunk *ch, unsigned l, uint32_t m)
{
    return &ch->mb[(size_t)m * 4 + l];
}

/* Payload row of slot in ch (a slot in range; a dropped slot of a relocated
 * chunk gets some kept row: it is never visible, its values are discarded). */
static inline uint32_t quad_prow(const quad_chunk *ch, uint32_t slot)
{
    const quad_live *L = ch->live;
    if (!L) return slot;
    uint32_t w = slot >> 6;
    uint32_t r = L->rank[w] + (uint32_t)__builtin_popcountll(L->bits[w] & ((UINT64_C(1) << (slot & 63)) - 1));
    return r < L->live ? r : L->live - 1;
}

/* Rows of microblock m of a payload of rows rows. */
static inline uint32_t quad_mb_rows(const quad *q, uint32_t rows, uint32_t m)
{
    uint32_t start = m << q->mb_shift;
    return rows - start < q->mb_rows ? rows - start : q->mb_rows;
}

/* Rows in ch's payload. */
static inline uint32_t quad_prows(const quad_chunk *ch)
{
    return ch->live ? ch->live->live : ch->rows;
}

/* quad.c */
static inline quad_chunk *quad_chunk_at(const quad *q, uint64_t c)
{
    return &q->pages[c >> QUAD_PAGE_BITS][c & (QUAD_PAGE_SIZE - 1)];
}
int quad_chunk_slot_reserve(quad *q, uint64_t c);   /* page for chunk c exists */
void quad_chunk_free(quad_chunk *ch);
void quad_chunk_count_lanes(quad *q, const quad_chunk *ch, int sign);

/* quad_file.c */
int qf_write_header(quad *q);
int qf_read_header(quad *q, int *fresh);
int qf_recover(quad *q);
int qf_checkpoint_locked(quad *q);
int qf_sync(quad *q, uint64_t *epoch_out);   /* the only fdatasync of the store file */
void qf_written(quad *q, uint64_t epoch);     /* frames up to q->tail are written: epoch */
void quad_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int qf_fbuf_reserve(quad *q, size_t need);   /* q->fbuf holds need + CODEC_SLACK bytes */
void qf_frame_finish(uint8_t *frame, unsigned type, uint64_t epoch, uint64_t aux, size_t body_len);
size_t qf_chunk_encode(quad *q, const quad_fact *facts, uint32_t rows, uint64_t chunk_no,
                       uint8_t *out, quad_chunk *ch);
size_t qf_chunk_bound(quad *q, uint32_t rows);
int qf_retire_apply(quad *q, quad_id id, uint64_t epoch);
int qf_retset_make_dense(quad_chunk *ch);
int qf_dense_index(quad_retset *r, uint32_t rows, uint64_t epoch);
int qf_dense_set(quad_retset *r, uint32_t rows, uint32_t slot, uint64_t epoch);
size_t qf_ids_encode(const uint64_t *ids, size_t n, uint8_t *out);
/* Decodes one block of k retired ids at *p (codec descriptor, payload; the
 * buffer holds CODEC_SLACK bytes after end) and moves *p past it. */
int qf_ids_block(const uint8_t **p, const uint8_t *end, uint32_t k, uint64_t *ids);

quad_live *qf_live_new(uint32_t rows);   /* all bits clear; rank filled by qf_live_rank */
void qf_live_rank(quad_live *L);
int qf_relocate_parse(quad *q, const uint8_t *body, const uint8_t *end, uint64_t body_file_off,
                      uint64_t epoch, uint64_t aux);
void qf_chunk_relocate(quad *q, quad_chunk *ch, quad_chunk *tmp, quad_live *L);
int qf_live_check(const quad_chunk *ch, const quad_live *L, uint64_t horizon);

/* quad_read.c */
void quad_row_layout(const quad_chunk *ch, qrow_form *f);   /* from the descriptors */
int qc_init(qc_cache *c, size_t limit);
void qc_free(qc_cache *c);
void qc_drop(qc_cache *c);
qc_reader *qc_read_begin(qc_cache *c);
void qc_read_end(qc_reader *r);
void qc_reclaim_all(qc_cache *c);   /* frees evicted entries no reader section holds */
uint64_t quad_retire_epoch(const quad_retset *r, uint32_t slot);
void qc_forget_chunk(qc_cache *c, uint64_t chunk_no, quad_chunk *ch);   /* evicts its entries */
void qc_grace(qc_cache *c);   /* waits until every reader section open now has ended */

/* quad_write.c */
int quad_wait_durable(quad *q, uint64_t e, uint32_t window_us);
void quad_durable_raise(quad *q, uint64_t epoch);   /* durable = max(durable, epoch) */
void quad_wlock_release(quad *q);   /* completes pending appends, then unlocks wlock */

/* quad_stream.c */
void quad_stream_notify(quad *q);   /* written or durable epoch moved: wake stream waiters */
uint64_t quad_stream_floor(quad *q, uint64_t *held);   /* lowest held position, 0 when none */
uint64_t quad_stream_floor_locked(quad *q, uint64_t *held);   /* the same, stream_mu held */
uint64_t quad_append_at(const quad_chunk *ch);          /* frame_before's offset for ch */

/* quad_clean.c */
uint64_t quad_hold_floor(quad *q, uint64_t *held);     /* oldest held snapshot, UINT64_MAX when none */
uint64_t quad_horizon(quad *q);                         /* the horizon a clean would use now */

/* quad_dio.c: every read and write of the store file (plain pread / pwrite
 * without QUAD_IO_DIRECT; whole aligned 4 KiB blocks with it) */
int quad_pread(quad *q, void *buf, size_t len, uint64_t off);
int quad_pwrite(quad *q, const void *buf, size_t len, uint64_t off);
int quad_dio_open(quad *q);     /* after the file is open and locked */
void quad_dio_close(quad *q);
/* Reads up to len bytes (aligned) at off, fewer only at the end of the file. */
int quad_dio_pread_upto(int fd, void *buf, size_t len, uint64_t off, size_t *got);

/* quad_io.c */
int quad_io_open(quad *q);
void quad_io_close(quad *q);
int quad_io_read(quad *q, quad_ioreq *reqs, size_t n);

#endif
