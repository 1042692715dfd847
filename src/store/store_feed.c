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
static int watermarks_save(store *s)
{
    hanu_buf b = {0};
    uint8_t head[12];
    memcpy(head, "HANUWMK", 8);
    hanu_put_u32(head + 8, (uint32_t)s->nwatermarks);
    int rc = hanu_buf_append(&b, head, sizeof head);
    for (size_t i = 0; rc == HANU_OK && i < s->nwatermarks; i++) {
        uint8_t e[1 + STORE_WATERMARK_NAME_MAX + 8];
        size_t n = strlen(s->watermarks[i].name);
        e[0] = (uint8_t)n;
        memcpy(e + 1, s->watermarks[i].name, n);
        hanu_put_u64(e + 1 + n, s->watermarks[i].txn);
        rc = hanu_buf_append(&b, e, 1 + n + 8);
    }
    if (rc == HANU_OK) {
        uint8_t sum[4];
        hanu_put_u32(sum, hanu_checksum32(b.data, b.len));
        rc = hanu_buf_append(&b, sum, 4);
    }
    char path[1200];
    watermark_path(s, path, sizeof path);
    if (rc == HANU_OK) rc = hanu_replace_file(path, b.data, b.len);
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
    return rc;
}

int store_watermark_advance(store *s, const char *name, uint64_t txn)
{
    pthread_mutex_lock(&s->mu);
    store_watermark *w = watermark_find(s, name);
    int rc = w ? HANU_OK : HANU_ERR_NOT_FOUND;
    if (w && txn > w->txn) {
        uint64_t old = w->txn;
        w->txn = txn;
        rc = watermarks_save(s);
        if (rc) w->txn = old;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int store_watermark_drop(store *s, const char *name)
{
    pthread_mutex_lock(&s->mu);
    store_watermark *w = watermark_find(s, name);
    int rc = w ? HANU_OK : HANU_ERR_NOT_FOUND;
    if (w) {
        store_watermark saved = *w;
        size_t at = (size_t)(w - s->watermarks);
        s->watermarks[at] = s->watermarks[--s->nwatermarks];
        rc = watermarks_save(s);
        if (rc) { s->watermarks[s->nwatermarks] = s->watermarks[at]; s->watermarks[at] = saved; s->nwatermarks++; }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

size_t store_watermark_list(store *s, store_watermark *out, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->nwatermarks;
    for (size_t i = 0; i < n && i < cap; i++) out[i] = s->watermarks[i];
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- the change feed ---- */

struct store_feed {
    store *s;
    uint64_t next_txn;        /* the next record to deliver has a txn >= this */
    uint32_t file_id;         /* where the walk stands, 0: find it again */
    uint32_t generation;      /* of that file; a compaction changes it */
    uint64_t offset;
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

void store_feed_close(store_feed *f) { free(f); }
uint64_t store_feed_position(const store_feed *f) { return f->next_txn; }

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

int store_feed_next(store_feed *f, size_t max_records, store_change_fn fn, void *ctx, size_t *delivered)
{
    store *s = f->s;
    size_t n = 0;
    int rc = HANU_OK, stop = 0;
    /* Only frames already in the file: a buffered one is not readable yet. */
    uint64_t written = log_writer_written_txn(s->log);
    pthread_mutex_lock(&s->mu);
    while (!stop && n < max_records && f->next_txn <= written) {
        store_file *sf = f->file_id ? store_file_get(s, f->file_id) : NULL;
        if (!sf || !sf->map || sf->generation != f->generation) sf = feed_locate(s, f);
        if (!sf) break;
        log_walker wk;
        log_walker_init(&wk, sf->map, HANU_MIN((uint64_t)sf->used, (uint64_t)sf->map_len));
        wk.off = f->offset;
        log_frame fr;
        uint64_t at;
        int r;
        while (n < max_records && (r = log_walker_next(&wk, &fr, &at, NULL)) == LOG_FRAME_OK) {
            if (fr.txn > written) { wk.off = at; stop = 1; break; }
            f->offset = wk.off;
            if (fr.txn < f->next_txn) continue;
            uint32_t pos = 0;
            log_entry e;
            while (log_frame_next_entry(&fr, &pos, &e)) {   /* a stop takes effect after the whole record */
                store_change c = { fr.txn, e.op, e.db, e.key, e.key_len, e.value, e.value_len };
                if (fn(ctx, &c)) stop = 1;
            }
            f->next_txn = fr.txn + 1;
            n++;
            if (stop) break;
        }
        if (stop || n >= max_records) break;
        if (r != LOG_FRAME_OK && wk.off < sf->used && r != LOG_FRAME_SEAL && r != LOG_FRAME_END) {
            /* Past the written txn the bytes may be a frame the loop's flush is copying
               into the file right now (torn or half there): not yet, not damage. */
            if (f->next_txn > written) break;
            rc = HANU_ERR_CORRUPT;
            break;
        }
        /* This file is done: go on with the next one that holds later records. */
        if (sf->last_txn >= f->next_txn) break;   /* the active file: nothing more yet */
        uint32_t next_id = 0;
        for (uint32_t id = sf->id + 1; id < s->files_cap && !next_id; id++)
            if (s->files[id] && s->files[id]->map) next_id = id;
        /* No later file yet: stay where the walk stands. Forgetting the position here
           made every call of a feed that had caught up walk (and checksum) the whole
           active file again from its header (issue 24: 11.9 us of indexer CPU per
           key-value write). */
        if (!next_id) break;
        f->file_id = next_id;
        f->generation = s->files[next_id]->generation;
        f->offset = LOG_FILE_HEADER_SIZE;
    }
    pthread_mutex_unlock(&s->mu);
    if (delivered) *delivered = n;
    return rc;
}

int store_wait_durable(store *s, uint64_t txn)
{
    return log_writer_wait_durable(s->log, txn);
}
