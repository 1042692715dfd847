/*
 * store_compact.c: compaction of sealed data files and their hint files.
 *
 * Compacting file N writes N's live records, with their original txns and frame
 * boundaries, into N.log.tmp, and the key directory of the result into
 * N.hint.tmp; both are synced, renamed over N.log / N.hint and the key
 * directory is pointed at the new offsets, all under the store mutex. The
 * active file is never compacted, and neither is a file holding a txn that is
 * not durable yet. A record is dropped only when the record that supersedes it
 * (a newer put, a delete, a drop of its database) is itself durable: until
 * then a crash could lose the newer record, and the older one must be there to
 * come back. Nothing is compacted once the log has failed.
 *
 * Merging: a run of adjacent small sealed files (each under half the rotation
 * size, together under the rotation size) is rewritten the same way into one
 * file that takes the first file's id and covers the whole run's txn range; the
 * others are then deleted. Without it compaction only ever shrinks files and
 * their number keeps growing. A crash after the merged file is renamed into
 * place but before the others are deleted leaves files whose txns the merged
 * file already covers: recovery deletes them (store.c).
 *
 * Hint file (docs/FORMATS.md): 40-byte header "HANUHNT\0" | u8 version=2 (1 read) |
 * u8 0 | u16 0 | u32 file_id | u32 generation | u32 count | u64 used |
 * u64 0, then count entries u8 op | u32 db | u16 key_len | u32 value_len |
 * u64 txn | u32 value_off | key, then u32 checksum of all that precedes.
 * A hint whose generation differs from its log file's is ignored (the log
 * file is scanned instead).
 */
#include "store/store_internal.h"
#include "hlog/hlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HINT_MAGIC "HANUHNT"
#define HINT_HEADER_SIZE 40
#define HINT_ENTRY_SIZE 23
/* Version 2 may hold op 6 (a put with an expiry: its value, and so its value length
   and offset, include the expiry after the value bytes), version 3 op 7 (a typed put:
   value, expiry, type byte); version 1 and 2 hints are read. */
#define HINT_VERSION 3

typedef struct relocation {
    uint64_t hash;          /* of the key, computed before the store lock is taken */
    uint32_t db;
    uint32_t src_fid;
    uint32_t old_off, new_off;
    uint32_t value_len;
    uint16_t key_len;
} relocation;

static int write_all_sync(const char *path, const hanu_buf *b)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return (errno == ENOSPC) ? HANU_ERR_NOSPACE : HANU_ERR_IO;
    int rc = hanu_write_full(fd, b->data, b->len);
    if (rc == HANU_OK && fdatasync(fd) != 0) rc = HANU_ERR_IO;
    close(fd);
    return rc;
}

static int hint_add(hanu_buf *h, const log_entry *e, uint64_t txn, uint32_t value_off)
{
    int rc = hanu_buf_reserve(h, HINT_ENTRY_SIZE + e->key_len);
    if (rc) return rc;
    uint8_t *p = h->data + h->len;
    p[0] = e->op;
    hanu_put_u32(p + 1, e->db);
    hanu_put_u16(p + 5, e->key_len);
    hanu_put_u32(p + 7, e->value_len);
    hanu_put_u64(p + 11, txn);
    hanu_put_u32(p + 19, value_off);
    memcpy(p + HINT_ENTRY_SIZE, e->key, e->key_len);
    h->len += HINT_ENTRY_SIZE + e->key_len;
    return HANU_OK;
}

uint64_t store_hint_peek_count(store *s, uint32_t file_id)
{
    char path[1200];
    uint8_t hh[24];
    log_file_path(path, sizeof path, s->log_dir, file_id, "hint");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    uint64_t count = 0;
    /* The count is not checked yet (the hint is, when loaded): believe no more
       entries than the file can hold, or a damaged count sizes a huge table. */
    if (hanu_pread_full(fd, hh, sizeof hh, 0) == HANU_OK && !memcmp(hh, HINT_MAGIC, 8) && fstat(fd, &st) == 0)
        count = HANU_MIN((uint64_t)hanu_get_u32(hh + 20), (uint64_t)st.st_size / HINT_ENTRY_SIZE);
    close(fd);
    return count;
}

int store_hint_load(store *s, store_file *f, char *err, size_t errcap)
{
    (void)err; (void)errcap;
    char path[1200];
    log_file_path(path, sizeof path, s->log_dir, f->id, "hint");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return HANU_ERR_NOT_FOUND;
    struct stat st;
    int rc = HANU_ERR_CORRUPT;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size >= HINT_HEADER_SIZE + 4 && st.st_size < (1ll << 32)) {
        buf = malloc((size_t)st.st_size);
        if (buf && hanu_pread_full(fd, buf, (size_t)st.st_size, 0) == HANU_OK) rc = HANU_OK;
    }
    close(fd);
    size_t n = (size_t)st.st_size;
    if (rc == HANU_OK && (memcmp(buf, HINT_MAGIC, 8) != 0 || buf[8] < 1 || buf[8] > HINT_VERSION ||
                          hanu_get_u32(buf + n - 4) != hanu_checksum32(buf, n - 4) ||
                          hanu_get_u32(buf + 12) != f->id || hanu_get_u32(buf + 16) != f->generation))
        rc = HANU_ERR_CORRUPT;
    if (rc) {
        free(buf);
        if (!s->opt.quiet)
            hlog_warn("store", "log/%06u.hint is stale or damaged; scanning the log file", f->id);
        return rc;
    }
    /* Validate the whole entry list before applying anything, so a bad hint falls
       back to a scan with no half-applied state. */
    uint32_t count = hanu_get_u32(buf + 20);
    size_t pos = HINT_HEADER_SIZE;
    for (uint32_t i = 0; i < count; i++) {
        if (n - 4 - pos < HINT_ENTRY_SIZE) { rc = HANU_ERR_CORRUPT; break; }
        uint16_t kl = hanu_get_u16(buf + pos + 5);
        uint32_t vl = hanu_get_u32(buf + pos + 7), off = hanu_get_u32(buf + pos + 19);
        if (n - 4 - pos - HINT_ENTRY_SIZE < kl || (uint64_t)off + vl > f->map_len) { rc = HANU_ERR_CORRUPT; break; }
        if (vl < log_op_trailer(buf[pos])) { rc = HANU_ERR_CORRUPT; break; }
        if (buf[pos] == LOG_OP_PUT_TYPED) {   /* the type byte, in the mapped data file */
            uint8_t type = f->map[off + vl - 1];
            if (type == LOG_TYPE_STRING || type > LOG_TYPE_MAX) { rc = HANU_ERR_CORRUPT; break; }
        }
        pos += HINT_ENTRY_SIZE + kl;
    }
    if (rc == HANU_OK && pos != n - 4) rc = HANU_ERR_CORRUPT;
    if (rc) { free(buf); return rc; }
    f->used = hanu_get_u64(buf + 24);
    /* Prefetch the slot of the entry PREFETCH_AHEAD places ahead: a hint load is a
       stream of random inserts, each a cache miss otherwise. */
    enum { PREFETCH_AHEAD = 8 };
    size_t ahead = HINT_HEADER_SIZE;
    uint32_t ahead_i = 0;
    store_db *d0 = store_db_by_id(s, STORE_DEFAULT_DB_ID);
    pos = HINT_HEADER_SIZE;
    for (uint32_t i = 0; i < count && rc == HANU_OK; i++) {
        while (d0 && ahead_i < count && ahead_i < i + PREFETCH_AHEAD) {
            uint16_t kl = hanu_get_u16(buf + ahead + 5);
            if (hanu_get_u32(buf + ahead + 1) == STORE_DEFAULT_DB_ID)
                keydir_prefetch(&d0->kd, keydir_hash(buf + ahead + HINT_ENTRY_SIZE, kl));
            ahead += HINT_ENTRY_SIZE + kl;
            ahead_i++;
        }
        log_entry e = {
            .op = buf[pos], .db = hanu_get_u32(buf + pos + 1), .key_len = hanu_get_u16(buf + pos + 5),
            .value_len = hanu_get_u32(buf + pos + 7), .key = buf + pos + HINT_ENTRY_SIZE,
            /* Checked above to lie in the map; a create record's value is its kind. */
            .value = f->map + hanu_get_u32(buf + pos + 19),
        };
        if (e.op == LOG_OP_OLD_SYSTEM_PUT) e.op = LOG_OP_PUT;
        uint32_t trailer = log_op_trailer(e.op);
        if (trailer)   /* the expiry (and op 7's type) is in the data file, after the value */
            e.expire_ms = hanu_get_u64(e.value + e.value_len - trailer);
        if (e.op == LOG_OP_PUT_TYPED) e.type = e.value[e.value_len - 1];
        uint64_t txn = hanu_get_u64(buf + pos + 11);
        if (!f->first_txn) f->first_txn = txn;
        f->last_txn = txn;
        rc = store_apply_entry(s, &e, txn, f->id, hanu_get_u32(buf + pos + 19));
        pos += HINT_ENTRY_SIZE + e.key_len;
    }
    free(buf);
    return rc;
}

/* Is this entry of file fid (at absolute value offset voff, in a frame of txn) live,
   when it is rewritten into file out_fid? A record is dropped only when what
   supersedes it is at or below floor (durable): the key directory already holds
   writes that a crash could still lose. mu held. */
static int entry_live(store *s, uint32_t fid, uint32_t out_fid, const log_entry *e, uint64_t txn,
                      uint32_t voff, uint64_t floor)
{
    store_db *d = store_db_by_id(s, e->db);
    /* Its database was dropped, but the drop is not durable yet. */
    if (!d && s->db_change_txn > floor) return 1;
    switch (e->op) {
    case LOG_OP_PUT:
    case LOG_OP_PUT_EXPIRING:
    case LOG_OP_PUT_TYPED: {
        /* An expired put is kept like any other: only the sweep's delete, once at or
           below the floor, lets it go (dropping it on its expiry alone could let an
           older put of the key resurface on a follower or after a crash). */
        if (!d) return 0;
        uint64_t h = keydir_hash(e->key, e->key_len);
        kd_entry *k = keydir_get(&d->kd, e->key, e->key_len, h);
        if (k) return (k->file_id == fid && k->value_off == voff) || k->txn > floor;
        return store_deleted_above(s, e->db, h, floor);
    }
    case LOG_OP_DELETE: {
        /* Needed while an older file may still hold a put of the key, and while a
           change of the key above the floor keeps older puts (in this very output
           too, even in the oldest file) that it must go on hiding. */
        if (!d) return 0;
        uint64_t h = keydir_hash(e->key, e->key_len);
        kd_entry *k = keydir_get(&d->kd, e->key, e->key_len, h);
        if (k) return k->txn > floor;
        return out_fid != s->oldest_file || store_deleted_above(s, e->db, h, floor);
    }
    case LOG_OP_CREATE_DB:
        return d && d->create_txn == txn;
    case LOG_OP_DROP_DB:
        return out_fid != s->oldest_file || s->db_change_txn > floor;
    default:
        return 0;
    }
}

/* The txn range a sealed file covers: a compacted file's header says, a plain file's
   frames do (mu held). */
static void file_covers(const store_file *f, uint64_t *first, uint64_t *last)
{
    log_file_header h;
    int ok = log_file_header_decode(f->map, &h) == HANU_OK;
    if (!ok) h.covers_first = 0;
    if (ok && (h.flags & LOG_FLAG_COMPACTED)) {
        *first = h.covers_first;
        *last = h.covers_last;
    } else {
        /* A file started after a crash covers the txns it skipped too (log.h). */
        *first = h.covers_first && h.covers_first < f->first_txn ? h.covers_first : f->first_txn;
        *last = f->last_txn;
    }
}

/* The last database looked up: relocations come in long runs of one database, and
   store_db_by_id walks the database list (mu held). */
typedef struct db_memo {
    uint32_t id;
    store_db *db;
    int valid;
} db_memo;

static store_db *db_lookup(store *s, db_memo *m, uint32_t id)
{
    if (!m->valid || m->id != id) *m = (db_memo){ id, store_db_by_id(s, id), 1 };
    return m->db;
}

enum { MAX_RUN = 64 };   /* files one compaction run may merge */

/* One compaction run: the files it rewrites and what it has built so far. */
typedef struct compaction {
    const uint32_t *ids;
    size_t n;
    uint32_t fid;                   /* the result takes the first file's id */
    log_file_header h;
    const uint8_t *maps[MAX_RUN];
    uint64_t useds[MAX_RUN];
    hanu_buf out, hint, frame;      /* the new data file, its hint file, one frame */
    relocation *rel;                /* puts kept: where their values move */
    size_t nrel, relcap;
    uint32_t hint_count;
    uint64_t tomb_bytes, record_bytes, first_txn, last_txn, before, data_end;
    store_file nf;                  /* the new file, mapped */
    store_file *gone[MAX_RUN];      /* mappings replaced, released after the install */
    size_t ngone;
    char tmp_log[1300], tmp_hint[1300], log_path[1200], hint_path[1200];
} compaction;

/* Checks that ids[] are sealed, durable and adjacent, and takes their mappings. */
static int run_claim(store *s, compaction *r)
{
    /* After a failed sync the durable mark is frozen and pages may be lost: the
       log is left exactly as it is for the operator (docs/OPERATIONS.md). */
    if (log_writer_failed(s->log)) return HANU_ERR_STOPPED;
    int rc = HANU_OK;
    pthread_mutex_lock(&s->mu);
    uint32_t active = log_writer_complete_below(s->log);   /* sealed and whole on disk below it */
    uint64_t durable = log_writer_durable_txn(s->log);
    for (size_t i = 0; i < r->n && rc == HANU_OK; i++) {
        store_file *f = store_file_get(s, r->ids[i]);
        uint64_t first = 0, last = 0;
        if (f && f->map) file_covers(f, &first, &last);
        /* Each file must continue the previous one's range: adjacent, nothing between. */
        if (!f || !f->map || r->ids[i] >= active || !last || f->last_txn > durable ||
            (i && first != r->h.covers_last + 1) || (r->n > 1 && s->merge_holds)) {
            rc = HANU_ERR_BUSY;
            break;
        }
        if (i == 0) {
            r->h.covers_first = first;
            r->h.generation = f->generation + 1;
        }
        r->h.covers_last = last;
        r->maps[i] = f->map;
        r->useds[i] = f->used;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int remember_relocation(compaction *r, const log_entry *e, uint32_t src_fid, uint32_t old_off,
                               uint32_t new_off)
{
    if (r->nrel == r->relcap) {
        size_t cap = r->relcap ? r->relcap * 2 : 1024;
        relocation *nr = realloc(r->rel, cap * sizeof *nr);
        if (!nr) return HANU_ERR_NOMEM;
        r->rel = nr;
        r->relcap = cap;
    }
    r->rel[r->nrel++] = (relocation){ keydir_hash(e->key, e->key_len), e->db, src_fid, old_off, new_off,
                                      e->value_len, e->key_len };
    return HANU_OK;
}

/* Copies the live entries of one frame (judged under the lock, against the floor). */
static int copy_frame(store *s, compaction *r, uint32_t src_fid, const log_frame *fr, uint64_t off)
{
    int rc = log_frame_begin(&r->frame);
    uint32_t pos = 0, kept = 0;
    log_entry e;
    pthread_mutex_lock(&s->mu);
    uint64_t floor = store_floor_locked(s);
    store_settle(s, floor);
    if (log_writer_failed(s->log)) rc = HANU_ERR_STOPPED;
    while (rc == HANU_OK && log_frame_next_entry(fr, &pos, &e)) {
        if (!entry_live(s, src_fid, r->fid, &e, fr->txn, (uint32_t)off + e.value_offset, floor)) continue;
        uint32_t new_voff = (uint32_t)(r->out.len + r->frame.len + LOG_ENTRY_HEADER_SIZE + e.key_len);
        rc = log_frame_add(&r->frame, e.op, e.db, e.key, e.key_len, e.value, e.value_len);
        if (rc == HANU_OK) rc = hint_add(&r->hint, &e, fr->txn, new_voff);
        r->hint_count++;
        kept++;
        r->record_bytes += store_entry_bytes(e.key_len, e.value_len);
        if (e.op == LOG_OP_DELETE || e.op == LOG_OP_DROP_DB)
            r->tomb_bytes += store_entry_bytes(e.key_len, e.value_len);
        if (rc == HANU_OK && log_op_is_put(e.op))
            rc = remember_relocation(r, &e, src_fid, (uint32_t)off + e.value_offset, new_voff);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == HANU_OK && kept) {
        log_frame_finish(&r->frame, fr->txn);
        rc = hanu_buf_append(&r->out, r->frame.data, r->frame.len);
        if (!r->first_txn) r->first_txn = fr->txn;
        r->last_txn = fr->txn;
    }
    return rc;
}

/* Walks every frame of the run's files and copies what is live into out and hint. */
static int run_copy_live(store *s, compaction *r, char *err, size_t errcap)
{
    int rc = hanu_buf_reserve(&r->out, LOG_FILE_HEADER_SIZE);
    if (rc == HANU_OK) {
        log_file_header_encode(r->out.data, &r->h);
        r->out.len = LOG_FILE_HEADER_SIZE;
        rc = hanu_buf_reserve(&r->hint, HINT_HEADER_SIZE);
        r->hint.len = HINT_HEADER_SIZE;
    }
    for (size_t i = 0; i < r->n && rc == HANU_OK; i++) {
        uint64_t off = LOG_FILE_HEADER_SIZE;
        r->before += r->useds[i];
        log_walker wk;
        log_walker_init(&wk, r->maps[i], r->useds[i]);
        while (rc == HANU_OK) {
            log_frame fr;
            const char *why = "";
            int w = log_walker_next(&wk, &fr, &off, &why);
            if (w == LOG_FRAME_SEAL || w == LOG_FRAME_END) break;
            if (w != LOG_FRAME_OK) {
                snprintf(err, errcap, "log/%06u.log: %s at offset %llu during compaction", r->ids[i],
                         why, (unsigned long long)wk.off);
                return HANU_ERR_CORRUPT;
            }
            rc = copy_frame(s, r, r->ids[i], &fr, off);
            /* Offsets are u32: a merge never grows a file past the rotation size. */
            if (rc == HANU_OK && r->out.len > UINT32_MAX - (1u << 20)) rc = HANU_ERR_TOO_LARGE;
            /* Shutting down: the files stay as they are, the work is redone next time. */
            if (rc == HANU_OK && atomic_load(&s->compact_abort)) rc = HANU_ERR_BUSY;
        }
    }
    return rc;
}

/* Seals the new data file, finishes its hint file, writes both as .tmp (synced)
   and maps the new data file. */
static int run_write(store *s, compaction *r)
{
    log_file_path(r->log_path, sizeof r->log_path, s->log_dir, r->fid, "log");
    log_file_path(r->hint_path, sizeof r->hint_path, s->log_dir, r->fid, "hint");
    snprintf(r->tmp_log, sizeof r->tmp_log, "%s.tmp", r->log_path);
    snprintf(r->tmp_hint, sizeof r->tmp_hint, "%s.tmp", r->hint_path);
    r->data_end = r->out.len;
    uint8_t seal[LOG_FRAME_HEADER_SIZE];   /* a compacted file ends with a seal like every sealed file */
    log_seal_encode(seal, r->h.covers_last);
    int rc = hanu_buf_append(&r->out, seal, sizeof seal);
    if (rc == HANU_OK) {
        uint8_t *hd = r->hint.data;
        memcpy(hd, HINT_MAGIC, 8);
        memset(hd + 8, 0, HINT_HEADER_SIZE - 8);
        hd[8] = HINT_VERSION;
        hanu_put_u32(hd + 12, r->fid);
        hanu_put_u32(hd + 16, r->h.generation);
        hanu_put_u32(hd + 20, r->hint_count);
        hanu_put_u64(hd + 24, r->data_end);
        uint8_t sum[4];
        hanu_put_u32(sum, hanu_checksum32(r->hint.data, r->hint.len));
        rc = hanu_buf_append(&r->hint, sum, 4);
    }
    if (rc == HANU_OK) rc = write_all_sync(r->tmp_log, &r->out);
    if (rc == HANU_OK) rc = write_all_sync(r->tmp_hint, &r->hint);
    if (rc == HANU_OK) {
        r->nf.fd = open(r->tmp_log, O_RDONLY | O_CLOEXEC);
        if (r->nf.fd < 0 || store_file_map(&r->nf, r->out.len) != HANU_OK) rc = HANU_ERR_IO;
    }
    return rc;
}

/* Points the key directory's entries at the new offsets, under the store lock. */
static uint64_t repoint_keys(store *s, compaction *r)
{
    uint64_t dead = r->tomb_bytes;
    /* Readers and writers wait for this loop: hashes are ready, the slot 16
       relocations ahead and the entry 8 ahead are prefetched (two cache misses each
       otherwise). */
    enum { AHEAD = 16 };
    db_memo memo = { 0, NULL, 0 };
    const relocation *rel = r->rel;
    for (size_t i = 0; i < r->nrel; i++) {
        if (i + AHEAD < r->nrel) {
            store_db *da = db_lookup(s, &memo, rel[i + AHEAD].db);
            if (da) keydir_prefetch(&da->kd, rel[i + AHEAD].hash);
        }
        if (i + AHEAD / 2 < r->nrel) {
            store_db *da = db_lookup(s, &memo, rel[i + AHEAD / 2].db);
            if (da) keydir_prefetch_entry(&da->kd, rel[i + AHEAD / 2].hash);
        }
        store_db *d = db_lookup(s, &memo, rel[i].db);
        kd_entry *k = d ? keydir_get_at(&d->kd, rel[i].hash, rel[i].src_fid, rel[i].old_off) : NULL;
        if (k) {
            k->file_id = r->fid;
            k->value_off = rel[i].new_off;
        } else {
            dead += store_entry_bytes(rel[i].key_len, rel[i].value_len);
        }
    }
    return dead;
}

/* Renames the new files into place, repoints the key directory and swaps the
   file; the replaced mappings go to r->gone. */
static int run_install(store *s, compaction *r, char *err, size_t errcap)
{
    /* The rename is outside the lock: the old file stays mapped, and either name
       holds the same live records. */
    int rc = HANU_OK;
    if (rename(r->tmp_log, r->log_path) != 0 || rename(r->tmp_hint, r->hint_path) != 0) {
        snprintf(err, errcap, "log/%06u.log: rename failed: %s", r->fid, strerror(errno));
        return HANU_ERR_IO;
    }
    pthread_mutex_lock(&s->mu);
    uint64_t lock_t0 = hanu_now_ns();
    uint64_t dead = repoint_keys(s, r);
    store_file *cur = store_file_get(s, r->fid);
    r->gone[r->ngone++] = malloc(sizeof(store_file));
    if (r->gone[0]) *r->gone[0] = *cur;   /* the old mapping, released after the install */
    else { store_file_unmap(cur); close(cur->fd); }
    cur->fd = r->nf.fd;
    cur->map = r->nf.map;
    cur->map_len = r->nf.map_len;
    cur->used = r->data_end;
    cur->record_bytes = r->record_bytes;
    cur->dead_bytes = dead;
    cur->compacted = 1;
    cur->generation = r->h.generation;
    cur->first_txn = r->first_txn;
    cur->last_txn = r->last_txn;
    r->nf.fd = -1;
    r->nf.map = NULL;
    for (size_t i = 1; i < r->n; i++) {
        r->gone[r->ngone++] = s->files[r->ids[i]];
        s->files[r->ids[i]] = NULL;
    }
    uint64_t held_us = (hanu_now_ns() - lock_t0) / 1000;
    if (held_us > atomic_load(&s->compaction_lock_max_us)) atomic_store(&s->compaction_lock_max_us, held_us);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Releases the replaced mappings and deletes the merged-away files, once the new
   file is durable under its name. */
static int run_retire(store *s, compaction *r, char *err, size_t errcap)
{
    /* If the directory cannot be synced, the files the merge replaces stay
       (recovery removes them once the merged file is found to cover them). */
    int rc = HANU_OK;
    int dir_synced = hanu_fsync_dir(s->log_dir) == HANU_OK;
    if (!dir_synced) {
        snprintf(err, errcap, "log/%06u.log: fsync of the log directory failed after the rename: %s; "
                 "the files it replaces are kept", r->fid, strerror(errno));
        rc = HANU_ERR_IO;
    }
    for (size_t i = 0; i < r->ngone; i++) {
        if (!r->gone[i]) continue;
        store_file_unmap(r->gone[i]);
        if (r->gone[i]->fd >= 0) close(r->gone[i]->fd);
        if (i && dir_synced) {
            char p[1200];
            log_file_path(p, sizeof p, s->log_dir, r->ids[i], "log");
            unlink(p);
            log_file_path(p, sizeof p, s->log_dir, r->ids[i], "hint");
            unlink(p);
        }
        free(r->gone[i]);
    }
    if (r->n > 1 && dir_synced && hanu_fsync_dir(s->log_dir) != HANU_OK) rc = HANU_ERR_IO;
    if (s->opt.on_compacted) s->opt.on_compacted(s->opt.ctx, r->fid, r->before, r->out.len);
    atomic_fetch_add(&s->compactions, 1);
    atomic_fetch_add(&s->compaction_bytes, r->out.len + r->hint.len);
    return rc;
}

/* Rewrites the live records of the sealed files ids[0..n), adjacent in the log, into
   one file with id ids[0]; the others are deleted once it is in place. */
static int compact_run(store *s, const uint32_t *ids, size_t n, char *err, size_t errcap)
{
    if (n == 0 || n > MAX_RUN) return HANU_ERR_INVALID;
    compaction *r = calloc(1, sizeof *r);
    if (!r) return HANU_ERR_NOMEM;
    r->ids = ids;
    r->n = n;
    r->fid = ids[0];
    r->h = (log_file_header){ .flags = LOG_FLAG_COMPACTED, .file_id = ids[0] };
    r->nf = (store_file){ .id = ids[0], .fd = -1 };
    int rc = run_claim(s, r);
    if (rc) {
        free(r);
        return rc;
    }
    rc = run_copy_live(s, r, err, errcap);
    if (rc == HANU_OK) rc = run_write(s, r);
    if (rc == HANU_OK) rc = run_install(s, r, err, errcap);
    if (rc == HANU_OK) rc = run_retire(s, r, err, errcap);
    if (rc != HANU_OK) {
        if (r->tmp_log[0]) unlink(r->tmp_log);
        if (r->tmp_hint[0]) unlink(r->tmp_hint);
        if (!err[0]) snprintf(err, errcap, "compacting log/%06u.log: %s", r->fid, hanu_status_str(rc));
    }
    store_file_unmap(&r->nf);
    if (r->nf.fd >= 0) close(r->nf.fd);
    free(r->rel);
    hanu_buf_free(&r->out);
    hanu_buf_free(&r->hint);
    hanu_buf_free(&r->frame);
    free(r);
    return rc;
}

void store_merges_hold(store *s)
{
    pthread_mutex_lock(&s->mu);
    s->merge_holds++;
    pthread_mutex_unlock(&s->mu);
}

void store_merges_release(store *s)
{
    pthread_mutex_lock(&s->mu);
    if (s->merge_holds) s->merge_holds--;
    pthread_mutex_unlock(&s->mu);
}

int store_compact_file(store *s, uint32_t fid, char *err, size_t errcap)
{
    /* A file a rotation just sealed may still wait for its sync: that takes a few ms. */
    if (fid >= log_writer_complete_below(s->log) && fid < log_writer_active_id(s->log))
        (void)log_writer_wait_complete(s->log);
    return compact_run(s, &fid, 1, err, errcap);
}

/* Finds the first run of at least two adjacent small sealed files worth merging:
   each under half the rotation size, together at most the rotation size. */
static size_t pick_merge(store *s, uint32_t *ids, size_t cap)
{
    size_t n = 0;
    uint64_t total = 0, limit = s->opt.file_size ? s->opt.file_size : (64ull << 20);
    pthread_mutex_lock(&s->mu);
    uint32_t active = s->merge_holds ? 0 : log_writer_complete_below(s->log);   /* held: no merge */
    uint64_t durable = log_writer_durable_txn(s->log);
    for (uint32_t i = 1; i < s->files_cap && i < active; i++) {
        store_file *f = s->files[i];
        if (!f) continue;
        uint64_t first = 0, last = 0;
        if (f->map) file_covers(f, &first, &last);
        int small = f->map && last && f->last_txn <= durable && f->used < limit / 2;
        if (small && n < cap && total + f->used <= limit) {
            ids[n++] = i;
            total += f->used;
            continue;
        }
        if (n >= 2) break;
        n = 0;
        total = 0;
        if (small) { ids[n++] = i; total = f->used; }
    }
    pthread_mutex_unlock(&s->mu);
    return n >= 2 ? n : 0;
}

/* Picks a sealed file worth compacting; 0 when none. force: any sealed file that is
   not compacted yet or holds dead bytes. */
static uint32_t pick_file(store *s, int force, uint32_t after)
{
    uint32_t best = 0;
    double best_ratio = 0;
    pthread_mutex_lock(&s->mu);
    uint32_t active = log_writer_complete_below(s->log);   /* sealed and whole on disk below it */
    uint64_t durable = log_writer_durable_txn(s->log);
    for (uint32_t i = after + 1; i < s->files_cap && i < active; i++) {
        store_file *f = s->files[i];
        if (!f || !f->first_txn || f->last_txn > durable) continue;
        double ratio = f->record_bytes ? (double)f->dead_bytes / (double)f->record_bytes : 0;
        if (force) {
            if (!f->compacted || f->dead_bytes) { best = i; break; }
            continue;
        }
        if (ratio >= s->opt.compact_ratio && f->dead_bytes >= s->opt.compact_min_dead && ratio > best_ratio) {
            best = i;
            best_ratio = ratio;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return best;
}

int store_compact(store *s, int force, char *err, size_t errcap)
{
    int rc = HANU_OK;
    uint32_t after = 0, fid;
    err[0] = '\0';
    if (log_writer_failed(s->log)) {
        snprintf(err, errcap, "the store stopped after a failed fdatasync: no compaction until it is restarted");
        return HANU_ERR_STOPPED;
    }
    pthread_mutex_lock(&s->compact_mu);
    while ((fid = pick_file(s, force, force ? after : 0)) != 0) {
        rc = store_compact_file(s, fid, err, errcap);
        if (rc) break;
        after = fid;
    }
    uint32_t run[64];
    size_t n;
    while (rc == HANU_OK && force && (n = pick_merge(s, run, 64)) != 0)
        rc = compact_run(s, run, n, err, errcap);
    pthread_mutex_unlock(&s->compact_mu);
    return rc;
}

void *store_compact_main(void *arg)
{
    store *s = arg;
    (void)hanu_thread_background(10);
    pthread_mutex_lock(&s->compact_mu);
    int worked = 0;
    while (!s->compact_stop) {
        if (!worked) {   /* back to back while there is work, else look once a second */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&s->compact_cv, &s->compact_mu, &ts);
            if (s->compact_stop) break;
        }
        uint32_t run[64];
        size_t n = 0;
        if (log_writer_failed(s->log)) { worked = 0; continue; }
        run[0] = pick_file(s, 0, 0);
        if (run[0]) n = 1;
        else n = pick_merge(s, run, 64);
        worked = 0;
        if (!n) continue;
        char err[512] = "";
        int rc = compact_run(s, run, n, err, sizeof err);
        if (rc && rc != HANU_ERR_BUSY && !atomic_load(&s->compact_abort))
            hlog_error("store", "background compaction: %s", err);
        worked = rc == HANU_OK;
    }
    pthread_mutex_unlock(&s->compact_mu);
    return NULL;
}
