/*
 * quad.c: the facts kernel's handle: options, open (lock, create or
 * recover), close (checkpoint, sync, free), the chunk table, snapshots,
 * stats, the fork check and the open error message. Relies on quad_file.c
 * for the format, quad_read.c for the cache and quad_io.c for the cold-read
 * backends.
 */
#include "quad/quad_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

_Atomic uint64_t quad_fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_child(void) { atomic_fetch_add(&quad_fork_gen, 1); }
static void fork_register(void) { (void)pthread_atfork(NULL, NULL, fork_child); }

static _Thread_local char last_error[512];

void quad_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

const char *quad_version(void)
{
    return HANUDB_VERSION;
}

const char *quad_last_error(void)
{
    return last_error;
}

void quad_options_default(quad_options *o)
{
    memset(o, 0, sizeof *o);
    o->chunk_rows = 4096;
    o->microblock_rows = 256;
    o->group_window_us = 100;
    o->io_threads = 4;
    o->io_backend = QUAD_IO_THREADS;
    o->cache_bytes = (size_t)256 << 20;
    o->checkpoint_bytes = (uint64_t)64 << 20;
    o->flags = 0;
}

int quad_chunk_slot_reserve(quad *q, uint64_t c)
{
    uint64_t p = c >> QUAD_PAGE_BITS;
    if (p >= QUAD_MAX_PAGES) return HANU_ERR_TOO_LARGE;
    if (!q->pages[p]) {
        q->pages[p] = calloc(QUAD_PAGE_SIZE, sizeof(quad_chunk));
        if (!q->pages[p]) return HANU_ERR_NOMEM;
    }
    return 0;
}

void quad_chunk_free(quad_chunk *ch)
{
    free(ch->mb);
    free(ch->live);
    if (ch->ret) {
        free(ch->ret->slots);
        free(ch->ret->epochs);
        free(ch->ret->dense);
        free(ch->ret->depochs);
        free(ch->ret->wide);
        free(ch->ret);
    }
    memset(ch, 0, sizeof *ch);
}

/* Adds (sign 1) or removes (sign -1, a relocated chunk's old payload) ch's
 * payload to the store's byte and encoding counters. */
void quad_chunk_count_lanes(quad *q, const quad_chunk *ch, int sign)
{
    uint64_t d = sign > 0 ? 1 : UINT64_MAX;   /* +1 or -1 modulo 2^64 */
    q->payload_bytes += d * ch->lane_off[4];
    for (uint32_t i = 0; i < 4 * ch->nmb; i++) {
        uint8_t c = ch->mb[i].code;
        if (c == CODEC_CONST) q->lanes_const += d;
        else if (c == CODEC_RAW) q->lanes_raw += d;
        else q->lanes_for += d;
    }
}

static void quad_free(quad *q)
{
    if (!q) return;
    if (q->pages) {
        uint64_t n = atomic_load(&q->nchunks);
        for (uint64_t c = 0; c < n; c++) quad_chunk_free(quad_chunk_at(q, c));
        for (uint32_t p = 0; p < QUAD_MAX_PAGES && q->pages[p]; p++) free(q->pages[p]);
        free(q->pages);
    }
    quad_io_close(q);
    quad_dio_close(q);
    qc_free(&q->cache);
    if (q->fd >= 0) close(q->fd);
    free(q->fbuf);
    free(q->wids);
    free(q->whist);
    free(q->path);
    pthread_rwlock_destroy(&q->rlock);
    pthread_mutex_destroy(&q->wlock);
    pthread_mutex_destroy(&q->sync_mu);
    pthread_mutex_destroy(&q->stream_mu);
    pthread_mutex_destroy(&q->clean_mu);
    free(q);
}

static int pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

int quad_open(const char *path, const quad_options *opt, quad **out)
{
    if (!path || !out) return HANU_ERR_INVALID;
    *out = NULL;
    last_error[0] = 0;
    (void)pthread_once(&fork_once, fork_register);
    quad_options o;
    if (opt) o = *opt; else quad_options_default(&o);
    if (!pow2_in(o.chunk_rows, 64, 1u << 20) || !pow2_in(o.microblock_rows, 64, o.chunk_rows))
        return HANU_ERR_INVALID;
    if (o.io_backend < QUAD_IO_INLINE || o.io_backend > QUAD_IO_URING) return HANU_ERR_INVALID;
    if (o.io_threads == 0) o.io_threads = 1;
    if (o.io_threads > 64) o.io_threads = 64;

    /* aligned: the cache's reader slots are one cache line each */
    quad *q = aligned_alloc(_Alignof(quad), (sizeof *q + _Alignof(quad) - 1) / _Alignof(quad) * _Alignof(quad));
    if (!q) return HANU_ERR_NOMEM;
    memset(q, 0, sizeof *q);
    q->fd = -1;
    q->opt = o;
    q->chunk_rows = o.chunk_rows;
    q->mb_rows = o.microblock_rows;
    q->mb_shift = (uint32_t)__builtin_ctz(o.microblock_rows);
    pthread_rwlock_init(&q->rlock, NULL);
    pthread_mutex_init(&q->wlock, NULL);
    pthread_mutex_init(&q->sync_mu, NULL);
    pthread_mutex_init(&q->stream_mu, NULL);
    pthread_mutex_init(&q->clean_mu, NULL);
    q->clean_walked = QF_HEADER_SIZE;
    atomic_init(&q->log_floor, 1);
    q->fork_gen = atomic_load(&quad_fork_gen);
    q->path = strdup(path);
    q->pages = calloc(QUAD_MAX_PAGES, sizeof *q->pages);
    int rc = (!q->path || !q->pages) ? HANU_ERR_NOMEM : qc_init(&q->cache, o.cache_bytes);
    if (rc) goto fail;

    int rdonly = (o.flags & QUAD_RDONLY) != 0, direct = (o.flags & QUAD_IO_DIRECT) != 0;
    int created = 0;   /* QUAD_IO_DIRECT: a file this open created is removed if it refuses O_DIRECT */
    if (direct && !rdonly) {
        q->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        created = q->fd >= 0;
    }
    if (q->fd < 0) q->fd = open(path, (rdonly ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC, 0644);
    if (q->fd < 0) { rc = errno == ENOENT ? HANU_ERR_NOT_FOUND : HANU_ERR_IO; goto fail; }
    /* One owner per file: an open-file-description lock (held by this
     * descriptor, not the process, so a second handle in the same process is
     * refused too; readers may share with readers). */
    struct flock fl = { .l_type = rdonly ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET };
    if (fcntl(q->fd, F_OFD_SETLK, &fl) != 0) {
        rc = (errno == EAGAIN || errno == EACCES) ? HANU_ERR_BUSY : HANU_ERR_IO;
        if (rc == HANU_ERR_BUSY)
            quad_set_error("%s is open in another handle (this or another process)", path);
        goto fail;
    }
    if (direct) {
        rc = quad_dio_open(q);
        if (rc) {
            if (created) unlink(path);
            goto fail;
        }
    }
    int fresh = 0;
    rc = qf_read_header(q, &fresh);
    if (rc) goto fail;
    if (fresh) {
        if (rdonly) { rc = HANU_ERR_CORRUPT; goto fail; }
        rc = qf_write_header(q);
        if (rc) goto fail;
        /* the new file's name must be durable before anything in it is */
        char *dup = strdup(path);
        if (!dup) { rc = HANU_ERR_NOMEM; goto fail; }
        rc = hanu_fsync_dir(dirname(dup));
        free(dup);
        if (rc) { quad_set_error("%s: fsync of its directory failed", path); goto fail; }
        q->tail = q->ckpt_tail = QF_HEADER_SIZE;
    } else {
        rc = qf_recover(q);
        if (rc) goto fail;
    }
    q->ckpt_next = q->tail + o.checkpoint_bytes;
    rc = quad_io_open(q);
    if (rc) goto fail;
    *out = q;
    return 0;
fail:
    quad_free(q);
    return rc;
}

int quad_close(quad *q)
{
    if (!q) return 0;
    if (quad_forked(q)) {
        /* the child has none of the handle's threads and must not write:
         * close the descriptor only (the parent keeps its lock), leak the rest */
        close(q->fd);
        return HANU_ERR_INVALID;
    }
    int rc = 0;
    if (!(q->opt.flags & QUAD_RDONLY)) {
        pthread_mutex_lock(&q->wlock);
        if (atomic_load(&q->stopped)) rc = HANU_ERR_STOPPED;
        else if (q->tail != q->ckpt_tail) rc = qf_checkpoint_locked(q);
        else if (atomic_load(&q->durable) < atomic_load(&q->written_epoch)) rc = qf_sync(q, NULL);
        quad_wlock_release(q);
        if (rc == 0 && atomic_load(&q->stopped)) rc = HANU_ERR_STOPPED;
    }
    quad_free(q);
    return rc;
}

int quad_snapshot(quad *q, uint64_t *epoch_out)
{
    if (!q || !epoch_out) return HANU_ERR_INVALID;
    *epoch_out = atomic_load_explicit(&q->epoch, memory_order_acquire);
    return 0;
}

uint64_t quad_epoch(quad *q) { return atomic_load(&q->epoch); }
uint64_t quad_durable_epoch(quad *q) { return atomic_load(&q->durable); }
uint32_t quad_chunk_rows(quad *q) { return q->chunk_rows; }

int quad_checkpoint(quad *q)
{
    if (!q || quad_forked(q)) return HANU_ERR_INVALID;
    if (q->opt.flags & QUAD_RDONLY) return HANU_ERR_INVALID;
    if (atomic_load(&q->stopped)) return HANU_ERR_STOPPED;
    pthread_mutex_lock(&q->wlock);
    int rc = qf_checkpoint_locked(q);
    quad_wlock_release(q);
    return rc;
}

int quad_stats_get(quad *q, quad_stats *st)
{
    if (!q || !st || quad_forked(q)) return HANU_ERR_INVALID;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&q->wlock);
    st->facts = q->facts;
    st->chunks = atomic_load(&q->nchunks);
    st->file_bytes = q->tail;
    st->payload_bytes = q->payload_bytes;
    st->lanes_const = q->lanes_const;
    st->lanes_for = q->lanes_for;
    st->lanes_raw = q->lanes_raw;
    st->recovered_frames = q->recovered_frames;
    quad_wlock_release(q);
    st->retired = atomic_load(&q->retired);
    st->epoch = atomic_load(&q->epoch);
    st->durable_epoch = atomic_load(&q->durable);
    st->syncs = atomic_load(&q->syncs);
    for (int i = 0; i < QC_SHARDS; i++) {
        qc_shard *s = &q->cache.shard[i];
        pthread_mutex_lock(&s->mu);
        st->cache_bytes += s->bytes;
        pthread_mutex_unlock(&s->mu);
    }
    st->cache_hits = atomic_load_explicit(&q->cache.hits, memory_order_relaxed);
    st->cache_misses = atomic_load_explicit(&q->cache.misses, memory_order_relaxed);
    st->chunk_rows = q->chunk_rows;
    st->microblock_rows = q->mb_rows;
    st->log_floor = atomic_load(&q->log_floor);
    st->stream_floor = quad_stream_floor(q, &st->held_streams);
    (void)quad_hold_floor(q, &st->held_snapshots);
    st->reclaim_horizon = quad_horizon(q);
    st->gone_below = atomic_load(&q->gone_below);
    pthread_mutex_lock(&q->wlock);
    st->relocated_chunks = q->relocated;
    st->checkpoint_bytes = q->ckpt_bytes;
    quad_wlock_release(q);
    return 0;
}

void quad_cache_drop(quad *q)
{
    if (q) qc_drop(&q->cache);
}
