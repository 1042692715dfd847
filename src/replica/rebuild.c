/*
 * rebuild.c: a data directory back from the bucket: snapshot, chain replay, and
 * for serve the watermark and the jump in numbering (rebuild.h).
 */
#include "replica/rebuild.h"
#include "replica/numbering.h"
#include "hlog/hlog.h"
#include "replica/snapshot.h"
#include "replica/manifest.h"
#include "replica/chain.h"
#include "replica/sealer.h"
#include "bucket/segment.h"

#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int marker_path(const char *data_dir, char *out, size_t cap)
{
    return (size_t)snprintf(out, cap, "%s/%s", data_dir, REBUILD_MARKER) < cap ? HANU_OK : HANU_ERR_INVALID;
}

int rebuild_dir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 1 : -1;
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

static int has_marker(const char *data_dir)
{
    char p[4096];
    return marker_path(data_dir, p, sizeof p) == HANU_OK && access(p, F_OK) == 0;
}

static int stop_at_first(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK) return 0;   /* a stray object is no chain */
    *(int *)ctx = 1;
    return 1;
}

int rebuild_wanted(const char *data_dir, bucket *b, int *wanted, char *err, size_t errcap)
{
    *wanted = 0;
    if (has_marker(data_dir)) { *wanted = 1; return HANU_OK; }
    int empty = rebuild_dir_is_empty(data_dir);
    if (empty < 0) {
        snprintf(err, errcap, "cannot read the data directory %s: %s", data_dir, strerror(errno));
        return HANU_ERR_IO;
    }
    if (!empty) return HANU_OK;   /* it recovers from its own log */
    int found = 0;
    int rc = bucket_list(b, SEGMENT_KEY_PREFIX, stop_at_first, &found, err, errcap);
    if (rc == HANU_OK) *wanted = found;
    return rc;
}

/* The snapshot's files arrive (under the fetch's lock, every 250 ms at most): the
   progress line moves (in place on a terminal, every 10 s in a log). */
static void say_fetch(void *ctx, uint64_t bytes, uint64_t bytes_total, uint32_t files, uint32_t files_total,
                      double bytes_per_s)
{
    hlog_progress *p = ctx;
    (void)bytes_per_s;
    p->total_bytes = bytes_total;
    p->total_items = files_total;
    hlog_progress_update(p, bytes, files);
}

typedef struct manifest_keys {
    uint64_t *txns;
    size_t n, cap;
} manifest_keys;

static int note_manifest(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    manifest_keys *k = ctx;
    uint64_t t;
    if (manifest_key_parse(key, &t) != HANU_OK) return 0;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        uint64_t *v = realloc(k->txns, cap * sizeof *v);
        if (!v) return 1;
        k->txns = v;
        k->cap = cap;
    }
    k->txns[k->n++] = t;
    return 0;
}

/* The txn of the newest manifest created at or before at_ms: everything it holds
   was sealed before it was made, so it is part of the state at that time. */
static int manifest_txn_at(bucket *b, uint64_t at_ms, uint64_t *txn, char *err, size_t errcap)
{
    manifest_keys k = { 0 };
    int rc = bucket_list(b, MANIFEST_KEY_PREFIX, note_manifest, &k, err, errcap);
    uint64_t best = 0;
    for (size_t i = 0; rc == HANU_OK && i < k.n; i++) {
        if (k.txns[i] <= best) continue;
        char key[MANIFEST_KEY_SIZE];
        manifest_key(k.txns[i], key);
        hanu_buf obj = { 0 };
        manifest m;
        rc = bucket_get(b, key, &obj, NULL, err, errcap);
        if (rc == HANU_OK && manifest_decode(obj.data, obj.len, &m, err, errcap) == HANU_OK) {
            if (m.created_ms <= at_ms) best = k.txns[i];
            manifest_free(&m);
        } else if (rc == HANU_OK) {
            rc = HANU_ERR_CORRUPT;
        }
        hanu_buf_free(&obj);
    }
    free(k.txns);
    if (rc) return rc;
    *txn = best;
    return best ? HANU_OK : HANU_ERR_NOT_FOUND;
}

static int fetch_snapshot(bucket *b, const char *data_dir, uint64_t max_txn, uint64_t max_time_ms, int quiet,
                          uint64_t *txn, char *err, size_t errcap)
{
    *txn = 0;
    if (max_time_ms) {   /* --at: the newest manifest made at or before that time */
        uint64_t at_txn = 0;
        int rc = manifest_txn_at(b, max_time_ms, &at_txn, err, errcap);
        if (rc) return rc;
        if (!max_txn || at_txn < max_txn) max_txn = at_txn;
    }
    snapshot_fetched f;
    hlog_progress progress;
    hlog_progress_begin(&progress, "rebuild", "fetching the snapshot", "files", 0, 0);
    int rc = snapshot_fetch(b, data_dir, max_txn ? max_txn : UINT64_MAX, &f, quiet ? NULL : say_fetch, &progress,
                            err, errcap);
    if (rc == HANU_OK) *txn = f.txn;
    if (!quiet) hlog_progress_clear(&progress);
    if (rc == HANU_OK && !quiet) {
        hlog_info("rebuild", "snapshot %s: %u files, %.1f MB in %llu ms, txns up to %llu", f.manifest,
                f.files, (double)f.bytes / 1e6, (unsigned long long)f.ms, (unsigned long long)f.txn);
    }
    return rc;
}

static int note_first_segment(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK) return 0;
    *(uint64_t *)ctx = seq;
    return 1;   /* listing order is sequence order: the first one is enough */
}

int rebuild_oldest_point(bucket *b, uint64_t *txn, uint64_t *time_ms, char *err, size_t errcap)
{
    *txn = *time_ms = 0;
    uint64_t first = 0;
    int rc = bucket_list(b, SEGMENT_KEY_PREFIX, note_first_segment, &first, err, errcap);
    if (rc) return rc;
    if (first == 1) return HANU_OK;   /* the whole chain: every point */
    manifest_keys k = { 0 };
    rc = bucket_list(b, MANIFEST_KEY_PREFIX, note_manifest, &k, err, errcap);
    uint64_t oldest = UINT64_MAX;
    for (size_t i = 0; i < k.n; i++) oldest = HANU_MIN(oldest, k.txns[i]);
    free(k.txns);
    if (rc) return rc;
    if (oldest == UINT64_MAX) return HANU_ERR_NOT_FOUND;
    char key[MANIFEST_KEY_SIZE];
    manifest_key(oldest, key);
    hanu_buf obj = { 0 };
    manifest m;
    rc = bucket_get(b, key, &obj, NULL, err, errcap);
    if (rc == HANU_OK && (rc = manifest_decode(obj.data, obj.len, &m, err, errcap)) == HANU_OK) {
        *txn = m.txn;
        *time_ms = m.created_ms;
        manifest_free(&m);
    }
    hanu_buf_free(&obj);
    return rc;
}

int rebuild_fetch_snapshot(bucket *b, const char *data_dir, uint64_t max_txn, uint64_t max_time_ms,
                           uint64_t *txn, char *err, size_t errcap)
{
    return fetch_snapshot(b, data_dir, max_txn, max_time_ms, 0, txn, err, errcap);
}

static int fsync_parent(const char *path)
{
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash == parent) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(parent, sizeof parent, ".");
    return hanu_fsync_dir(parent);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static int remove_below_top(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return ftw->level == 0 ? 0 : remove_entry(path, st, flag, ftw);
}

int rebuild_remove_attempt(const char *data_dir, int keep_dir)
{
    char staging[4200];
    snprintf(staging, sizeof staging, "%s.fetching", data_dir);
    (void)nftw(staging, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    int rc = nftw(data_dir, keep_dir ? remove_below_top : remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (rc != 0 && errno != ENOENT) return HANU_ERR_IO;
    return keep_dir ? hanu_fsync_dir(data_dir) : fsync_parent(data_dir);
}

/* The snapshot is fetched beside the data directory and renamed into place once
   whole, with the marker in it: a crash during the fetch leaves the data directory
   empty (the next start fetches again), never half a snapshot without a marker. */
static int fetch_into_place(bucket *b, const char *data_dir, uint64_t max_txn, uint64_t max_time_ms, int flags,
                            uint64_t *txn, char *err, size_t errcap);
static int write_marker(const char *data_dir, char *err, size_t errcap)
{
    char p[4096];
    if (marker_path(data_dir, p, sizeof p) != HANU_OK) return HANU_ERR_INVALID;
    static const char text[] = "a rebuild from the bucket is in progress; serve resumes it\n";
    if (hanu_replace_file(p, text, sizeof text - 1) != HANU_OK) {
        snprintf(err, errcap, "cannot write %s: %s", p, strerror(errno));
        return HANU_ERR_IO;
    }
    return HANU_OK;
}

int rebuild_prepare(const char *data_dir, bucket *b, uint64_t max_txn, uint64_t max_time_ms, int flags,
                    rebuild_stats *st, char *err, size_t errcap)
{
    if (has_marker(data_dir)) {   /* resuming: the store holds what was replayed */
        st->resumed = 1;
        return HANU_OK;
    }
    int empty = rebuild_dir_is_empty(data_dir);
    if (empty != 1) {
        snprintf(err, errcap, "%s is not empty: rebuild and restore write only into an empty directory",
                 data_dir);
        return empty < 0 ? HANU_ERR_IO : HANU_ERR_INVALID;
    }
    if (hanu_mkdir_p(data_dir) != HANU_OK) {
        snprintf(err, errcap, "cannot create %s: %s", data_dir, strerror(errno));
        return HANU_ERR_IO;
    }
    uint64_t t0 = hanu_now_ns();
    int rc = fetch_into_place(b, data_dir, max_txn, max_time_ms, flags, &st->snapshot_txn, err, errcap);
    st->fetch_ms += (hanu_now_ns() - t0) / 1000000;
    if (rc == HANU_ERR_NOT_FOUND) {   /* no snapshot: the whole chain is replayed */
        if (err && errcap) err[0] = '\0';
        rc = (flags & REBUILD_MARK) ? write_marker(data_dir, err, errcap) : HANU_OK;
    }
    return rc;
}

static int remove_tree(const char *path, char *err, size_t errcap)
{
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT) return HANU_OK;
    snprintf(err, errcap, "cannot remove %s: %s", path, strerror(errno));
    return HANU_ERR_IO;
}

int rebuild_discard(const char *data_dir, char *err, size_t errcap)
{
    char dir[4096], aside[4200];
    size_t n = strlen(data_dir);
    while (n > 1 && data_dir[n - 1] == '/') n--;   /* "data/" is "data", not "data/.discarded" */
    if (n >= sizeof dir) return HANU_ERR_INVALID;
    memcpy(dir, data_dir, n);
    dir[n] = '\0';
    snprintf(aside, sizeof aside, "%s.discarded", dir);
    int rc = remove_tree(aside, err, errcap);
    if (rc == HANU_OK && (rename(dir, aside) != 0 || fsync_parent(dir))) {
        snprintf(err, errcap, "cannot move %s to %s: %s", dir, aside, strerror(errno));
        rc = HANU_ERR_IO;
    }
    return rc == HANU_OK ? remove_tree(aside, err, errcap) : rc;
}

static int fetch_into_place(bucket *b, const char *data_dir, uint64_t max_txn, uint64_t max_time_ms, int flags,
                            uint64_t *txn, char *err, size_t errcap)
{
    char staging[4200];
    if ((size_t)snprintf(staging, sizeof staging, "%s.fetching", data_dir) >= sizeof staging) return HANU_ERR_INVALID;
    int rc = remove_tree(staging, err, errcap);   /* an unfinished fetch */
    if (rc) return rc;
    rc = fetch_snapshot(b, staging, max_txn, max_time_ms, flags & REBUILD_QUIET, txn, err, errcap);
    if (rc == HANU_OK && (flags & REBUILD_MARK)) rc = write_marker(staging, err, errcap);
    if (rc == HANU_OK && (rmdir(data_dir) != 0 || rename(staging, data_dir) != 0 || fsync_parent(data_dir))) {
        snprintf(err, errcap, "cannot move the fetched snapshot %s to %s: %s", staging, data_dir, strerror(errno));
        rc = HANU_ERR_IO;
    }
    if (rc) (void)nftw(staging, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct progress_ctx {
    const rebuild_replay_options *o;
    hlog_progress line;
} progress_ctx;

/* After each applied segment: the progress line moves (in place on a terminal, a
   line every 10 s in a log). */
static void on_progress(void *ctx, const chain_progress *p)
{
    progress_ctx *pc = ctx;
    if (!pc->o->quiet) hlog_progress_update(&pc->line, p->bytes, p->records);
}

int rebuild_replay(store *s, bucket *b, const rebuild_replay_options *o, rebuild_stats *st, char *err,
                   size_t errcap)
{
    /* A snapshot taken before merges were held during snapshots may hold records past
       its manifest's txn (docs/BUCKET.md, "Exactness"): a restore to a txn below them
       would show them. Refused rather than answered wrong. */
    if (o->stop_txn && st->snapshot_txn && store_last_txn(s) > o->stop_txn) {
        snprintf(err, errcap, "the snapshot of txn %llu holds records up to txn %llu, past the txn asked for (%llu): "
                 "restore to a txn of at least %llu, or below that snapshot's txn",
                 (unsigned long long)st->snapshot_txn, (unsigned long long)store_last_txn(s),
                 (unsigned long long)o->stop_txn, (unsigned long long)store_last_txn(s));
        return HANU_ERR_CORRUPT;
    }
    progress_ctx pc = { .o = o };
    hlog_progress_begin(&pc.line, o->who ? o->who : "rebuild", "replaying the chain", "records", 0, 0);
    uint64_t cpu0 = thread_cpu_ns();
    chain_options co;
    chain_options_default(&co);
    co.stop_txn = o->stop_txn;
    co.stop_time_ms = o->stop_time_ms;
    co.progress = on_progress;
    co.ctx = &pc;
    chain_reader *r = NULL;
    int rc = chain_reader_open(b, s, &co, &r);
    if (rc) {
        snprintf(err, errcap, "cannot start the chain reader: %s", hanu_status_str(rc));
        return rc;
    }
    uint64_t applied = 1;
    /* Nobody else writes the bucket's chain meanwhile; polling until nothing new also
       covers a writer that was still sealing. */
    /* A failed request (the bucket's own retries exhausted) leaves the reader where it
       was: it is asked again with a growing pause, since giving up would leave the
       directory half rebuilt. Damage and mismatches are final. */
    uint32_t failures = 0;
    while ((rc == HANU_OK && applied && !chain_reader_stopped(r)) || (rc == HANU_ERR_IO && failures < 12)) {
        if (rc == HANU_ERR_IO) {
            failures++;
            if (!o->quiet) hlog_warn("rebuild", "%s; trying again (%u)", err, failures);
            usleep(HANU_MIN(100000u << HANU_MIN(failures, 6u), 5000000u));
            applied = 1;
        }
        rc = chain_reader_poll(r, &applied, err, errcap);
    }
    /* A segment listed past the end is a hole in the chain, unless we stopped early
       on purpose. */
    st->stopped = chain_reader_stopped(r);
    if (rc == HANU_OK && !st->stopped) rc = chain_reader_check_end(r, err, errcap);
    chain_progress p;
    chain_reader_progress(r, &p);
    chain_reader_close(r);
    st->records += p.records;
    st->segments += p.segments;
    st->bytes += p.bytes;
    st->fetch_ms += p.fetch_ns / 1000000;
    st->replay_ms += p.replay_ns / 1000000;
    st->last_txn = store_last_txn(s);
    st->cpu_ms += (thread_cpu_ns() - cpu0) / 1000000;
    /* A replay of nothing (a snapshot alone) still ends at the store's txn. */
    if (p.last_txn < st->last_txn) p.last_txn = st->last_txn;
    if (!o->quiet && (rc != HANU_OK || o->no_done_line)) hlog_progress_clear(&pc.line);
    else if (!o->quiet) {
        char result[96];
        snprintf(result, sizeof result, "%llu segments, at txn %llu", (unsigned long long)p.segments,
                 (unsigned long long)p.last_txn);
        hlog_progress_end(&pc.line, p.bytes, p.records, result);
    }
    return rc;
}

int rebuild_restore(bucket *b, const char *data_dir, const rebuild_replay_options *o, store **out,
                    rebuild_stats *st, char *err, size_t errcap)
{
    *out = NULL;
    int rc = rebuild_prepare(data_dir, b, o->stop_txn, o->stop_time_ms, o->quiet ? REBUILD_QUIET : 0, st, err, errcap);
    if (rc) return rc;
    store_options so;
    store_options_default(&so);
    so.data_dir = data_dir;
    so.prealloc = LOG_PREALLOC_APPEND;   /* no zero-filled 64 MB file for a restore of a few records */
    so.background_compaction = 0;
    so.quiet = 1;
    store *s = NULL;
    if ((rc = store_open(&so, &s, err, errcap)) != HANU_OK) return rc;
    rc = rebuild_replay(s, b, o, st, err, errcap);
    if (rc == HANU_OK && (rc = store_sync(s)) != HANU_OK) snprintf(err, errcap, "cannot sync %s", data_dir);
    if (rc) {
        store_close(s);
        return rc;
    }
    *out = s;
    return HANU_OK;
}

int rebuild_finish(store *s, bucket *b, const char *data_dir, rebuild_stats *st, char *err, size_t errcap)
{
    uint64_t last = store_last_txn(s), at = 0;
    /* The sealer continues the chain after what was replayed instead of sealing it
       again (sealer_open would move a lagging watermark up too; this says it first). */
    int rc = store_watermark_register(s, SEALER_WATERMARK, &at);
    if (rc == HANU_OK && last > at) rc = store_watermark_advance(s, SEALER_WATERMARK, last);
    /* The lost machine may have answered writes above the bucket (durability local or
       none) that never reached it: their txns must never name other writes. The range
       is claimed in the bucket (numbering.h), so a writer rebuilt after another
       rebuilt one that never sealed does not number from the same base. */
    char why[256] = "";
    if (rc == HANU_OK) rc = numbering_claim(b, last, 0, &st->next_txn, why, sizeof why);
    if (rc == HANU_OK) rc = store_skip_txns(s, st->next_txn);
    if (rc == HANU_OK) rc = store_sync(s);
    if (rc) {
        snprintf(err, errcap, "cannot finish the rebuild (watermark and numbering): %s%s%s", hanu_status_str(rc),
                 why[0] ? ": " : "", why);
        return rc;
    }
    char p[4096];
    if (marker_path(data_dir, p, sizeof p) != HANU_OK || (unlink(p) != 0 && errno != ENOENT) ||
        hanu_fsync_dir(data_dir) != HANU_OK) {
        snprintf(err, errcap, "cannot remove %s: %s", p, strerror(errno));
        return HANU_ERR_IO;
    }
    return HANU_OK;
}
