/*
 * store_feed.c: the change feed (records in txn order, read back from the log
 * files through the frame walker) and the named watermarks of the projections
 * that follow it. The compaction floor is the minimum of the durable txn and
 * every watermark: a record goes only when what supersedes it is at or below
 * the floor (store_compact.c), so a projection that lags keeps, through
 * compaction and restarts, every record it has not consumed yet.
 *
 * meta/watermarks, replaced atomically on every change:
 *   "HANUWMK\0" | u32 count | count x (u8 name_len | name | u64 txn) | u32 checksum
 */
#include "store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- watermarks ---- */

static void watermark_path(store *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s/meta/watermarks", s->data_dir);
}

static int watermark_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > STORE_WATERMARK_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return 0;
    }
    return 1;
}

/* Writes every watermark (mu held: the file follows the table exactly). */
/* The file's bytes for the watermarks as they are now (mu held). */
static int watermarks_encode(store *s, hanu_buf *b)
{
    uint8_t head[12];
    memcpy(head, "HANUWMK", 8);
    hanu_put_u32(head + 8, (uint32_t)s->nwatermarks);
    int rc = hanu_buf_append(b, head, sizeof head);
    for (size_t i = 0; rc == HANU_OK && i < s->nwatermarks; i++) {
        uint8_t e[1 + STORE_WATERMARK_NAME_MAX + 8];
        size_t n = strlen(s->watermarks[i].name);
        e[0] = (uint8_t)n;
        memcpy(e + 1, s->watermarks[i].name, n);
        hanu_put_u64(e + 1 + n, s->watermarks[i].txn);
        rc = hanu_buf_append(b, e, 1 + n + 8);
    }
    if (rc == HANU_OK) {
        uint8_t sum[4];
        hanu_put_u32(sum, hanu_checksum32(b->data, b->len));
        rc = hanu_buf_append(b, sum, 4);
    }
    return rc;
}

static int watermarks_write(store *s, const hanu_buf *b)
{
    char path[1200];
    watermark_path(s, path, sizeof path);
    return hanu_replace_file(path, b->data, b->len);
}

/* mu and save_mu held: the file written under the lock (a registration, before
   anything relies on it). */
static int watermarks_save(store *s)
{
    hanu_buf b = {0};
    int rc = watermarks_encode(s, &b);
    if (rc == HANU_OK) rc = watermarks_write(s, &b);
    hanu_buf_free(&b);
    return rc;
}

/* mu NOT held: the file written from the watermarks as they are when this save starts.
   Its fdatasync and renames (a millisecond or more) must not hold mu, which every
   write takes to apply its record: under mu they stalled the write path whenever the
   indexer committed or the sealer sealed. Saves are ordered by save_mu and each
   encodes the newest state, so the file never goes back behind an earlier save. The
   file lags the memory only downwards (an advance not yet saved), which after a crash
   holds the floor lower: safe; a drop not yet saved keeps a watermark: safe too. */
static int watermarks_persist(store *s)
{
    pthread_mutex_lock(&s->watermark_save_mu);
    hanu_buf b = {0};
    pthread_mutex_lock(&s->mu);
    int rc = watermarks_encode(s, &b);
    pthread_mutex_unlock(&s->mu);
    if (rc == HANU_OK) rc = watermarks_write(s, &b);
    pthread_mutex_unlock(&s->watermark_save_mu);
    hanu_buf_free(&b);
    return rc;
}

int store_watermarks_load(store *s, char *err, size_t errcap)
{
    char path[1200];
    watermark_path(s, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? HANU_OK : HANU_ERR_IO;
    uint8_t buf[12 + STORE_MAX_WATERMARKS * (1 + STORE_WATERMARK_NAME_MAX + 8) + 4];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    int ok = n >= 16 && memcmp(buf, "HANUWMK", 8) == 0 &&
             hanu_get_u32(buf + n - 4) == hanu_checksum32(buf, (size_t)n - 4);
    uint32_t count = ok ? hanu_get_u32(buf + 8) : 0;
    size_t pos = 12;
    if (count > STORE_MAX_WATERMARKS) ok = 0;
    for (uint32_t i = 0; ok && i < count; i++) {
        size_t len = pos < (size_t)n - 4 ? buf[pos] : 0;
        if (len == 0 || len > STORE_WATERMARK_NAME_MAX || pos + 1 + len + 8 > (size_t)n - 4) { ok = 0; break; }
        store_watermark *w = &s->watermarks[i];
        memcpy(w->name, buf + pos + 1, len);
        w->name[len] = '\0';
        w->txn = hanu_get_u64(buf + pos + 1 + len);
        pos += 1 + len + 8;
    }
    if (!ok || pos != (size_t)n - 4) {
        /* A guess could let compaction drop what a projection still needs. */
        snprintf(err, errcap, "meta/watermarks is damaged; restore it, or remove it to let every "
                 "projection start over");
        s->nwatermarks = 0;
        return HANU_ERR_CORRUPT;
    }
    s->nwatermarks = count;
    return HANU_OK;
}

uint64_t store_floor_locked(store *s)
{
    uint64_t floor = log_writer_durable_txn(s->log);
    for (size_t i = 0; i < s->nwatermarks; i++)
        if (s->watermarks[i].txn < floor) floor = s->watermarks[i].txn;
    return floor;
}

uint64_t store_floor(store *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t f = store_floor_locked(s);
    pthread_mutex_unlock(&s->mu);
    return f;
}

static store_watermark *watermark_find(store *s, const char *name)
{
    for (size_t i = 0; i < s->nwatermarks; i++)
        if (strcmp(s->watermarks[i].name, name) == 0) return &s->watermarks[i];
    return NULL;
}

int store_watermark_register(store *s, const char *name, uint64_t *txn)
{
    if (!watermark_name_valid(name)) return HANU_ERR_INVALID;
    /* save_mu first (the order watermarks_persist takes them): one writer of the
       file's temporary at a time. */
    pthread_mutex_lock(&s->watermark_save_mu);
    pthread_mutex_lock(&s->mu);
    store_watermark *w = watermark_find(s, name);
    int rc = HANU_OK;
    if (!w) {
        if (s->nwatermarks == STORE_MAX_WATERMARKS) rc = HANU_ERR_TOO_LARGE;
        else {
            /* A new projection starts from nothing: the feed from txn 1 is what it
               needs, and holding the floor at 0 keeps every record until it catches up. */
            w = &s->watermarks[s->nwatermarks++];
            snprintf(w->name, sizeof w->name, "%s", name);
            w->txn = 0;
            rc = watermarks_save(s);
            if (rc) s->nwatermarks--;
        }
    }
    if (rc == HANU_OK) *txn = w->txn;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->watermark_save_mu);
    return rc;
}

/* The projection's state is durable up to txn before it calls this (its own files),
   so the memory moves at once and the file follows (watermarks_persist); a failed
   save is an error for the caller, and the file keeps the older, lower value. */
int store_watermark_advance(store *s, const char *name, uint64_t txn)
{
    pthread_mutex_lock(&s->mu);
    store_watermark *w = watermark_find(s, name);
    int rc = w ? HANU_OK : HANU_ERR_NOT_FOUND, moved = w && txn > w->txn;
    if (moved) w->txn = txn;
    pthread_mutex_unlock(&s->mu);
    return moved ? watermarks_persist(s) : rc;
}

int store_watermark_drop(store *s, const char *name)
{
    pthread_mutex_lock(&s->mu);
    store_watermark *w = watermark_find(s, name);
    int rc = w ? HANU_OK : HANU_ERR_NOT_FOUND;
    if (w) s->watermarks[w - s->watermarks] = s->watermarks[--s->nwatermarks];
    pthread_mutex_unlock(&s->mu);
    return rc == HANU_OK ? watermarks_persist(s) : rc;
}

size_t store_watermark_list(store *s, store_watermark *out, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->nwatermarks;
    for (size_t i = 0; i < n && i < cap; i++) out[i] = s->watermarks[i];
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- the change feed ----
 *
 * Issue 24: the walk holds no lock that the write path takes. Under the store lock a
 * call only looks up its file (id, generation, the bytes that may hold frames, the
 * next file) and publishes what its last walk verified; then it walks its own
 * read-only mapping of that file. The mapping is the feed's, not the store's: a
 * compaction that replaces the file (new generation, the old mapping unmapped when it
 * retires) or a remap of the active file cannot pull pages from under the walk, and
 * the inode it maps holds the same records (a compaction only drops superseded ones
 * below the floor, which this feed's watermark is part of). A frame is read only when
 * its txn is at or below the written txn, read before the lookup: the loop's pwrite
 * put it into the page cache whole before that txn was published.
 *
 * The checksum pass is done once per file generation, not per projection: frames below
 * store_file.feed_verified were checksummed by some feed's walk, and a later walk
 * (the sealer behind the indexer) decodes them without the checksum.
 *
 * A filter (store_feed_filter) drops the puts and deletes of databases the projection
 * does not want before its callback: no call, no copy. A record with nothing left is
 * skipped; the position still moves past it, so the projection's watermark does too. */

struct store_feed {
    store *s;
    uint64_t next_txn;        /* the next record to deliver has a txn >= this */
    uint32_t file_id;         /* where the walk stands, 0: find it again */
    uint32_t generation;      /* of that file; a compaction changes it */
    uint64_t offset;
    store_feed_want_fn want;  /* NULL: every database */
    void *want_ctx;
    /* the feed's own mapping of file_id at generation */
    uint8_t *map;
    size_t map_len;
    uint32_t map_file, map_gen;
    /* what the last walk checksummed, published at the next lookup */
    uint32_t ver_file, ver_gen;
    uint64_t ver_end;
    uint64_t frames_walked, records_skipped;
};

int store_feed_open(store *s, uint64_t from_txn, store_feed **out)
{
    store_feed *f = calloc(1, sizeof *f);
    if (!f) return HANU_ERR_NOMEM;
    f->s = s;
    f->next_txn = from_txn ? from_txn : 1;
    *out = f;
    return HANU_OK;
}

void store_feed_filter(store_feed *f, store_feed_want_fn want, void *ctx)
{
    f->want = want;
    f->want_ctx = ctx;
}

static void feed_unmap(store_feed *f)
{
    if (f->map) munmap(f->map, f->map_len);
    f->map = NULL;
    f->map_len = 0;
    f->map_file = 0;
}

void store_feed_close(store_feed *f)
{
    if (!f) return;
    feed_unmap(f);
    free(f);
}
uint64_t store_feed_position(const store_feed *f) { return f->next_txn; }

void store_feed_get_stats(const store_feed *f, uint64_t *frames_walked, uint64_t *records_skipped)
{
    if (frames_walked) *frames_walked = f->frames_walked;
    if (records_skipped) *records_skipped = f->records_skipped;
}

/* Finds the file holding next_txn (or the first after it) and walks from its header. */
static store_file *feed_locate(store *s, store_feed *f)
{
    for (uint32_t id = 1; id < s->files_cap; id++) {
        store_file *sf = s->files[id];
        if (!sf || !sf->map || !sf->last_txn || sf->last_txn < f->next_txn) continue;
        f->file_id = id;
        f->generation = sf->generation;
        f->offset = LOG_FILE_HEADER_SIZE;
        return sf;
    }
    return NULL;
}

/* What one walk needs to know of its file, taken under the store lock. */
typedef struct feed_file {
    uint64_t end;             /* bytes that may hold frames */
    uint64_t trusted;         /* frames below were checksummed already */
    uint64_t last_txn;
    uint32_t next_id, next_gen;
} feed_file;

/* mu held: publishes the last walk's checksum pass, finds the file, maps it. */
static int feed_lookup(store *s, store_feed *f, feed_file *ff)
{
    if (f->ver_end) {
        store_file *vf = store_file_get(s, f->ver_file);
        if (vf && vf->generation == f->ver_gen &&
            (vf->feed_verified_gen != f->ver_gen || vf->feed_verified < f->ver_end)) {
            vf->feed_verified = f->ver_end;
            vf->feed_verified_gen = f->ver_gen;
        }
        f->ver_end = 0;
    }
    store_file *sf = f->file_id ? store_file_get(s, f->file_id) : NULL;
    if (!sf || !sf->map || sf->generation != f->generation) sf = feed_locate(s, f);
    if (!sf) return HANU_ERR_NOT_FOUND;
    ff->end = HANU_MIN((uint64_t)sf->used, (uint64_t)sf->map_len);
    ff->trusted = sf->feed_verified_gen == sf->generation ? sf->feed_verified : 0;
    ff->last_txn = sf->last_txn;
    ff->next_id = ff->next_gen = 0;
    for (uint32_t id = sf->id + 1; id < s->files_cap && !ff->next_id; id++)
        if (s->files[id] && s->files[id]->map) {
            ff->next_id = id;
            ff->next_gen = s->files[id]->generation;
        }
    if (!ff->next_id) {
        /* The newest file may still grow (--prealloc append, or past the part of the first
           file zero-filled at start-up), and used counts frames still in the writer's buffer:
           a page of the mapping past the file's end would fault (SIGBUS), not read zeros. */
        struct stat sb;
        if (fstat(sf->fd, &sb) != 0) return HANU_ERR_IO;
        if ((uint64_t)sb.st_size < ff->end) ff->end = (uint64_t)sb.st_size;
    }
    if (f->map && f->map_file == sf->id && f->map_gen == sf->generation && f->map_len >= ff->end) return HANU_OK;
    /* The file's descriptor is the store's while mu is held; the mapping outlives it. */
    void *m = mmap(NULL, sf->map_len, PROT_READ, MAP_SHARED, sf->fd, 0);
    if (m == MAP_FAILED) return HANU_ERR_IO;
    feed_unmap(f);
    f->map = m;
    f->map_len = sf->map_len;
    f->map_file = sf->id;
    f->map_gen = sf->generation;
    return HANU_OK;
}

/* Delivers the wanted entries of one record; 1 when any was delivered. */
static int feed_deliver(store_feed *f, const log_frame *fr, store_change_fn fn, void *ctx, int *stop)
{
    uint32_t pos = 0;
    log_entry e;
    int any = 0;
    while (log_frame_next_entry(fr, &pos, &e)) {   /* a stop takes effect after the whole record */
        /* Creates and drops always go through: a projection must learn about databases. */
        if (f->want && (log_op_is_put(e.op) || e.op == LOG_OP_DELETE) && !f->want(f->want_ctx, e.db)) continue;
        store_change c = { fr->txn, e.op, e.db, e.key, e.key_len, e.value, e.value_len };
        any = 1;
        if (fn(ctx, &c)) *stop = 1;
    }
    return any;
}

int store_feed_next(store_feed *f, size_t max_records, store_change_fn fn, void *ctx, size_t *delivered)
{
    store *s = f->s;
    size_t n = 0, skipped = 0;
    int rc = HANU_OK, stop = 0;
    /* Only frames already in the file: a buffered one is not readable yet. */
    uint64_t written = log_writer_written_txn(s->log);
    while (!stop && n < max_records && skipped < STORE_FEED_SKIP_MAX && f->next_txn <= written) {
        feed_file ff;
        pthread_mutex_lock(&s->mu);
        int lr = feed_lookup(s, f, &ff);
        pthread_mutex_unlock(&s->mu);
        if (lr == HANU_ERR_NOT_FOUND) break;
        if (lr) { rc = lr; break; }
        log_walker wk;
        log_walker_init(&wk, f->map, ff.end);
        wk.off = f->offset;
        log_frame fr;
        int r = LOG_FRAME_END;
        while (n < max_records && skipped < STORE_FEED_SKIP_MAX && wk.off < wk.end) {
            uint64_t at = wk.off;
            r = at < ff.trusted ? log_frame_decode_checked(f->map + at, wk.end - at, &fr, NULL)
                                : log_frame_decode(f->map + at, wk.end - at, &fr, NULL);
            if (r != LOG_FRAME_OK) break;
            f->frames_walked++;
            if (fr.txn > written) { stop = 1; break; }
            wk.off = at + fr.size;
            f->offset = wk.off;
            f->ver_file = f->file_id;
            f->ver_gen = f->generation;
            f->ver_end = wk.off;
            if (fr.txn < f->next_txn) continue;
            if (feed_deliver(f, &fr, fn, ctx, &stop)) n++;
            else { skipped++; f->records_skipped++; }
            f->next_txn = fr.txn + 1;
            if (stop) break;
        }
        if (stop || n >= max_records || skipped >= STORE_FEED_SKIP_MAX) break;
        if (r != LOG_FRAME_OK && wk.off < ff.end && r != LOG_FRAME_SEAL && r != LOG_FRAME_END) {
            /* Past the written txn the bytes may be a frame the loop's flush is copying
               into the file right now (torn or half there): not yet, not damage. */
            if (f->next_txn > written) break;
            rc = HANU_ERR_CORRUPT;
            break;
        }
        /* This file is done: go on with the next one that holds later records. */
        if (ff.last_txn >= f->next_txn) break;   /* the active file: nothing more yet */
        /* No later file yet: stay where the walk stands (forgetting the position made
           every call of a feed that had caught up walk the whole active file again). */
        if (!ff.next_id) break;
        f->file_id = ff.next_id;
        f->generation = ff.next_gen;
        f->offset = LOG_FILE_HEADER_SIZE;
    }
    if (delivered) *delivered = n;
    return rc;
}

int store_wait_durable(store *s, uint64_t txn)
{
    return log_writer_wait_durable(s->log, txn);
}
