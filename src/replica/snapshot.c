/*
 * snapshot.c: taking physical snapshots into the bucket, retention, and the
 * snapshotter thread with its policy (snapshot.h; docs/BUCKET.md, "Snapshots").
 * The fetch and the audit of manifests are in snapshot_fetch.c.
 */
#include "replica/snapshot.h"
#include "hlog/hlog.h"
#include "replica/snapshot_internal.h"
#include "bucket/segment.h"
#include "index/index.h"
#include "log/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* One pinned file: its path in the data directory, the bytes that count, the hash. */
typedef struct pinned {
    char path[MANIFEST_PATH_MAX + 1];
    uint64_t size;
    uint8_t sha256[MANIFEST_HASH_SIZE];
    dev_t dev;
    ino_t ino;
} pinned;

/* Hashes are cached by inode: a sealed log file or an index file never changes
   once written (compaction writes a new inode), so a second snapshot reads only
   the new files. */
typedef struct hash_entry {
    dev_t dev;
    ino_t ino;
    off_t st_size;
    int64_t mtime_ns;           /* with the size: a reused inode number is not the same file */
    uint64_t size;
    uint8_t sha256[MANIFEST_HASH_SIZE];
} hash_entry;

struct snapshotter {
    store *st;
    bucket *b;
    sealer *z;
    snapshot_options o;
    char *data_dir, *index_dir;
    pthread_t thread;
    pthread_mutex_t mu;         /* everything below but the take's own state */
    pthread_cond_t cv;
    int stop;
    uint64_t requested, finished;
    int last_rc;
    snapshot_result last;
    char last_err[512];
    snapshot_stats stats;
    uint64_t base_sequence, base_log_bytes;   /* the policy counts from the last snapshot */
    /* The policy's snapshots that failed in a row, and when it may try again: each
       attempt rotates the log file (a new preallocated file), so a snapshot that keeps
       failing must not try every second. Snapshot thread only. */
    uint32_t policy_failures;
    uint64_t policy_retry_ms;
    uint64_t base_ms;           /* wall time of the last snapshot (the newest manifest's at open; 0: none) */
    pthread_mutex_t take_mu;    /* one snapshot at a time; guards the cache */
    hash_entry *cache;
    size_t ncache;
};

void snapshot_options_default(snapshot_options *o)
{
    memset(o, 0, sizeof *o);
    o->every_segments = 64;
    o->check_interval_ms = 1000;
    o->seal_timeout_ms = 120000;
    o->keep = 1;
    o->retain_ms = SNAPSHOT_RETAIN_DEFAULT_MS;
    o->interval_ms = 600000;
    o->low_priority = 1;
}

int snap_fail(int rc, char *err, size_t errcap, const char *fmt, ...)
{
    if (err && errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int snapshot_rotate_here(store *s, uint64_t *txn, uint32_t *active_file)
{
    int rc = store_rotate(s);
    if (rc) return rc;
    *txn = store_last_txn(s);
    *active_file = store_active_file(s);
    return HANU_OK;
}

/* ---- the names of a folder ---- */

int snap_names_add(snap_names *n, const char *name)
{
    if (n->n == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 64;
        char **v = realloc(n->v, cap * sizeof *v);
        if (!v) return HANU_ERR_NOMEM;
        n->v = v;
        n->cap = cap;
    }
    if (!(n->v[n->n] = strdup(name))) return HANU_ERR_NOMEM;
    n->n++;
    return HANU_OK;
}

int snap_list_dir(const char *dir, snap_names *out)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? HANU_ERR_NOT_FOUND : HANU_ERR_IO;
    struct dirent *e;
    int rc = HANU_OK;
    while (rc == HANU_OK && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') rc = snap_names_add(out, e->d_name);
    closedir(d);
    if (rc) snap_names_free(out);
    return rc;
}

void snap_names_free(snap_names *n)
{
    for (size_t i = 0; i < n->n; i++) free(n->v[i]);
    free(n->v);
    memset(n, 0, sizeof *n);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Empties DATA/snapshot/ (two levels) and creates it with log/ and index/. */
static int reset_pin_dir(const char *pin)
{
    const char *subs[] = { "log", "index" };
    char p[PATH_MAX];
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", pin, subs[i]);
        snap_names names;
        if (snap_list_dir(p, &names) == HANU_OK) {
            for (size_t j = 0; j < names.n; j++) {
                char f[PATH_MAX + 512];
                snprintf(f, sizeof f, "%s/%s", p, names.v[j]);
                unlink(f);
            }
            snap_names_free(&names);
        }
        rmdir(p);
    }
    if (mkdir(pin, 0755) != 0 && errno != EEXIST) return HANU_ERR_IO;
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", pin, subs[i]);
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return HANU_ERR_IO;
    }
    return HANU_OK;
}

/* ---- pinning ---- */

typedef struct pin_set {
    pinned *v;
    size_t n, cap;
} pin_set;

static int pin_add(pin_set *ps, const char *path)
{
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 64;
        pinned *v = realloc(ps->v, cap * sizeof *v);
        if (!v) return HANU_ERR_NOMEM;
        ps->v = v;
        ps->cap = cap;
    }
    memset(&ps->v[ps->n], 0, sizeof ps->v[ps->n]);
    snprintf(ps->v[ps->n].path, sizeof ps->v[ps->n].path, "%s", path);
    ps->n++;
    return HANU_OK;
}

static int cmp_pinned(const void *a, const void *b)
{
    return strcmp(((const pinned *)a)->path, ((const pinned *)b)->path);
}

/* Links DATA/sub/name to PIN/sub/name: OK, NOT_FOUND when it vanished meanwhile. */
static int pin_link(snapshotter *sn, const char *sub, const char *name, pin_set *ps)
{
    char from[PATH_MAX], to[PATH_MAX], rel[MANIFEST_PATH_MAX + 1];
    const char *src_dir = strcmp(sub, "log") == 0 ? "log" : sn->index_dir;
    snprintf(from, sizeof from, "%s/%s/%s", sn->data_dir, src_dir, name);
    snprintf(to, sizeof to, "%s/" SNAPSHOT_PIN_DIR "/%s/%s", sn->data_dir, sub, name);
    if (link(from, to) != 0) return errno == ENOENT ? HANU_ERR_NOT_FOUND : HANU_ERR_IO;
    snprintf(rel, sizeof rel, "%s/%s", sub, name);
    return pin_add(ps, rel);
}

/* The sealed log files (ids below the active one) and their hints. */
static int pin_log(snapshotter *sn, uint32_t active, pin_set *ps, char *err, size_t errcap)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/log", sn->data_dir);
    snap_names names;
    int rc = snap_list_dir(dir, &names);
    if (rc) return snap_fail(rc, err, errcap, "snapshot: cannot list %s", dir);
    for (size_t i = 0; i < names.n && rc == HANU_OK; i++) {
        unsigned id;
        char ext[8];
        int used = 0;
        if (sscanf(names.v[i], "%6u.%5[a-z]%n", &id, ext, &used) != 2 || names.v[i][used] != '\0') continue;
        if ((strcmp(ext, "log") && strcmp(ext, "hint")) || id >= active) continue;
        rc = pin_link(sn, "log", names.v[i], ps);
        if (rc == HANU_ERR_NOT_FOUND && strcmp(ext, "hint") == 0) rc = HANU_OK;   /* a hint is optional */
    }
    snap_names_free(&names);
    return rc;
}

/* The index's files as of one commit: COMMIT read before and after the links must be
   the same (a commit in between may have deleted what the old one named: try again). */
static int pin_index(snapshotter *sn, pin_set *ps, uint64_t *index_txn, char *err, size_t errcap)
{
    char dir[PATH_MAX], commit[PATH_MAX + 8], pinned_commit[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/%s", sn->data_dir, sn->index_dir);
    snprintf(commit, sizeof commit, "%s/COMMIT", dir);
    snprintf(pinned_commit, sizeof pinned_commit, "%s/" SNAPSHOT_PIN_DIR "/index/COMMIT", sn->data_dir);
    hanu_buf before = { 0 }, after = { 0 }, linked = { 0 };
    int rc = hanu_read_file(commit, 64u << 20, &before);
    if (rc == HANU_ERR_NOT_FOUND) { *index_txn = 0; return HANU_OK; }   /* no index yet */
    /* Only COMMIT and the files it names: they are complete and never written again.
       Any other file may still be being written (a merge's output, a refresh's
       segment), and one linked mid-write was hashed before its last bytes came: the
       bucket then held an object whose SHA-256 is not its name (found by
       e2e_lease_faults' audit). A newer COMMIT meanwhile is seen below and retried. */
    index_commit named = { 0 };
    if (rc == HANU_OK) rc = pin_link(sn, "index", "COMMIT", ps);
    if (rc == HANU_OK) {
        char pin_index_dir[PATH_MAX + 16];
        snprintf(pin_index_dir, sizeof pin_index_dir, "%s/" SNAPSHOT_PIN_DIR "/index", sn->data_dir);
        rc = index_commit_read(pin_index_dir, &named, err, errcap);
    }
    for (uint32_t i = 0; i < named.nsegments && rc == HANU_OK; i++) {
        char name[64];
        index_commit_segment_file(&named.segments[i], name, sizeof name);
        rc = pin_link(sn, "index", name, ps);
        if (rc == HANU_OK && index_commit_deletes_file(&named.segments[i], name, sizeof name))
            rc = pin_link(sn, "index", name, ps);
        /* Gone meanwhile: a newer commit dropped it; the comparison below retries. */
        if (rc == HANU_ERR_NOT_FOUND) rc = HANU_ERR_BUSY;
    }
    index_commit_free(&named);
    if (rc == HANU_OK) rc = hanu_read_file(commit, 64u << 20, &after);
    if (rc == HANU_OK) rc = hanu_read_file(pinned_commit, 64u << 20, &linked);
    if (rc == HANU_OK && (before.len != after.len || memcmp(before.data, after.data, before.len) ||
                          linked.len != before.len || memcmp(linked.data, before.data, before.len)))
        rc = HANU_ERR_BUSY;   /* the index committed meanwhile */
    hanu_buf_free(&before);
    hanu_buf_free(&after);
    hanu_buf_free(&linked);
    if (rc) return rc;
    char pin_index_dir[PATH_MAX + 16];
    snprintf(pin_index_dir, sizeof pin_index_dir, "%s/" SNAPSHOT_PIN_DIR "/index", sn->data_dir);
    index_commit c;
    rc = index_commit_read(pin_index_dir, &c, err, errcap);
    if (rc) return rc;
    *index_txn = c.index_txn;
    index_commit_free(&c);
    return HANU_OK;
}

/* No pinned log file may hold a record past T (the manifest's txn): a compacted
   one says in its header which txns it covers. The merge hold makes this hold; this
   is the check that it did. */
static int is_log_file(const char *rel);

static int pinned_logs_within(snapshotter *sn, const pin_set *ps, uint64_t txn, char *err, size_t errcap)
{
    for (size_t i = 0; i < ps->n; i++) {
        if (!is_log_file(ps->v[i].path)) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/" SNAPSHOT_PIN_DIR "/%s", sn->data_dir, ps->v[i].path);
        uint8_t hd[LOG_FILE_HEADER_SIZE];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd < 0 ? -1 : pread(fd, hd, sizeof hd, 0);
        if (fd >= 0) close(fd);
        log_file_header h;
        if (got != (ssize_t)sizeof hd || log_file_header_decode(hd, &h) != HANU_OK)
            return snap_fail(HANU_ERR_IO, err, errcap, "snapshot: cannot read the header of %s", path);
        if ((h.flags & LOG_FLAG_COMPACTED) && h.covers_last > txn)
            return snap_fail(HANU_ERR_CORRUPT, err, errcap, "snapshot: %s covers txns up to %" PRIu64 ", past the "
                             "snapshot's txn %" PRIu64, ps->v[i].path, h.covers_last, txn);
    }
    return HANU_OK;
}

/* Rotates, waits for the index, links everything; the watermark holds the
   compaction floor at or below T meanwhile (no record superseded only by a newer
   one is dropped) and the merge hold keeps a file sealed after T from being merged
   into one below the new active file (which would put records past T in the snapshot). */
static int pin_files(snapshotter *sn, uint64_t *txn, uint64_t *index_txn, pin_set *ps, uint64_t *rotate_us,
                     char *err, size_t errcap)
{
    uint64_t held = 0;
    int rc = store_watermark_register(sn->st, SNAPSHOT_WATERMARK, &held);
    if (rc) return snap_fail(rc, err, errcap, "snapshot: cannot register its watermark: %s", hanu_status_str(rc));
    uint64_t durable = store_durable_txn(sn->st);
    if (durable > held) store_watermark_advance(sn->st, SNAPSHOT_WATERMARK, durable);
    store_merges_hold(sn->st);   /* before the rotation: a merge claimed earlier holds only txns <= T */
    uint32_t active = 0;
    uint64_t rotate_start = hanu_now_ns();
    rc = sn->o.rotate ? sn->o.rotate(sn->o.ctx, txn, &active) : snapshot_rotate_here(sn->st, txn, &active);
    *rotate_us = (hanu_now_ns() - rotate_start) / 1000;
    if (rc) snap_fail(rc, err, errcap, "snapshot: cannot seal the active log file: %s", hanu_status_str(rc));
    /* The rotation returned before the sealed file's sync (the writer does not wait
       for the device); everything this snapshot links must be whole on disk. */
    if (rc == HANU_OK && (rc = store_wait_log_complete(sn->st)) != HANU_OK)
        snap_fail(rc, err, errcap, "snapshot: the sealed log file could not be synced: %s", hanu_status_str(rc));
    if (rc == HANU_OK && sn->o.index_commit && sn->index_dir) {
        rc = sn->o.index_commit(sn->o.ctx, *txn);
        if (rc) snap_fail(rc, err, errcap, "snapshot: the index did not commit txn %" PRIu64 ": %s", *txn,
                          hanu_status_str(rc));
    }
    char pin[PATH_MAX];
    snprintf(pin, sizeof pin, "%s/" SNAPSHOT_PIN_DIR, sn->data_dir);
    for (int attempt = 0; rc == HANU_OK; attempt++) {
        ps->n = 0;
        *index_txn = 0;
        rc = reset_pin_dir(pin);
        if (rc) { snap_fail(rc, err, errcap, "snapshot: cannot create %s", pin); break; }
        rc = pin_log(sn, active, ps, err, errcap);
        if (rc == HANU_OK && sn->index_dir) rc = pin_index(sn, ps, index_txn, err, errcap);
        if ((rc == HANU_ERR_NOT_FOUND || rc == HANU_ERR_BUSY) && attempt < 50) { rc = HANU_OK; continue; }
        if (rc && !err[0]) snap_fail(rc, err, errcap, "snapshot: cannot link the files into %s: %s", pin,
                                     hanu_status_str(rc));
        break;
    }
    store_merges_release(sn->st);
    store_watermark_drop(sn->st, SNAPSHOT_WATERMARK);
    if (rc == HANU_OK) rc = pinned_logs_within(sn, ps, *txn, err, errcap);
    if (rc == HANU_OK && ps->n) qsort(ps->v, ps->n, sizeof *ps->v, cmp_pinned);
    return rc;
}

/* ---- hashing and uploading ---- */

/* The bytes of a log file that count: up to and with its seal (a sealed file is
   preallocated to the rotation size; the zeros after the seal are never read). */
static uint64_t log_data_size(const uint8_t *map, uint64_t size)
{
    if (size < LOG_FILE_HEADER_SIZE) return size;
    log_walker w;
    log_walker_init(&w, map, size);
    log_frame f;
    uint64_t at;
    const char *why;
    int r;
    while ((r = log_walker_next(&w, &f, &at, &why)) == LOG_FRAME_OK) {}
    return r == LOG_FRAME_SEAL ? w.off + LOG_FRAME_HEADER_SIZE : size;
}

/* Maps a pinned file; *map is NULL for an empty file. */
static int map_file(const char *path, const uint8_t **map, uint64_t *size, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return HANU_ERR_IO;
    int rc = fstat(fd, st) == 0 ? HANU_OK : HANU_ERR_IO;
    *size = rc ? 0 : (uint64_t)st->st_size;
    *map = NULL;
    if (rc == HANU_OK && *size) {
        void *m = mmap(NULL, *size, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) rc = HANU_ERR_IO;
        else *map = m;
    }
    close(fd);
    return rc;
}

static int is_log_file(const char *rel)
{
    size_t l = strlen(rel);
    return strncmp(rel, "log/", 4) == 0 && l > 4 && strcmp(rel + l - 4, ".log") == 0;
}

/* The modification time (a hard link changes the ctime, not the mtime). */
static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int hash_pinned(snapshotter *sn, pinned *p, hash_entry *fresh, char *err, size_t errcap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" SNAPSHOT_PIN_DIR "/%s", sn->data_dir, p->path);
    struct stat st;
    if (stat(path, &st) != 0) return snap_fail(HANU_ERR_IO, err, errcap, "snapshot: %s: %s", path, strerror(errno));
    p->dev = st.st_dev;
    p->ino = st.st_ino;
    for (size_t i = 0; i < sn->ncache; i++) {
        hash_entry *h = &sn->cache[i];
        if (h->dev == st.st_dev && h->ino == st.st_ino && h->st_size == st.st_size && h->mtime_ns == mtime_ns(&st)) {
            p->size = h->size;
            memcpy(p->sha256, h->sha256, MANIFEST_HASH_SIZE);
            *fresh = *h;
            return HANU_OK;
        }
    }
    const uint8_t *map;
    uint64_t size;
    if (map_file(path, &map, &size, &st) != HANU_OK)
        return snap_fail(HANU_ERR_IO, err, errcap, "snapshot: cannot read %s: %s", path, strerror(errno));
    p->size = map && is_log_file(p->path) ? log_data_size(map, size) : size;
    snap_sha256(map, p->size, p->sha256);
    if (map) munmap((void *)map, size);
    *fresh = (hash_entry){ st.st_dev, st.st_ino, st.st_size, mtime_ns(&st), p->size, { 0 } };
    memcpy(fresh->sha256, p->sha256, MANIFEST_HASH_SIZE);
    return HANU_OK;
}

static int upload_pinned(snapshotter *sn, const pinned *p, char *err, size_t errcap)
{
    char path[PATH_MAX], key[MANIFEST_FILE_KEY_SIZE];
    snprintf(path, sizeof path, "%s/" SNAPSHOT_PIN_DIR "/%s", sn->data_dir, p->path);
    manifest_file_key(p->sha256, key);
    const uint8_t *map;
    uint64_t size;
    struct stat st;
    if (map_file(path, &map, &size, &st) != HANU_OK || size < p->size)
        return snap_fail(HANU_ERR_IO, err, errcap, "snapshot: cannot read %s", path);
    int rc = bucket_put(sn->b, key, map ? map : (const uint8_t *)"", p->size, NULL, err, errcap);
    if (map) munmap((void *)map, size);
    return rc;
}

/* Keys under a prefix, sorted (the bucket lists in byte order). */
static int collect(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    return snap_names_add(ctx, key);
}

int snap_list_bucket(bucket *b, const char *prefix, snap_names *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    int rc = bucket_list(b, prefix, collect, out, err, errcap);
    if (rc) snap_names_free(out);
    else if (out->n) qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return rc;
}

int snap_names_has(const snap_names *n, const char *key)
{
    return n->n && bsearch(&key, n->v, n->n, sizeof *n->v, cmp_str) != NULL;
}

/* ---- the segment the replay continues from ---- */

/* The first segment holding a record above txn, and its prev_hash, found by
   walking back from the chain's last segment (usually one or two gets). */
static int find_replay(snapshotter *sn, uint64_t txn, uint64_t *sequence, uint8_t prev[MANIFEST_HASH_SIZE],
                       char *err, size_t errcap)
{
    sealer_stats ss;
    sealer_get_stats(sn->z, &ss);
    hanu_buf obj = { 0 };
    int rc = HANU_OK;
    uint64_t s = ss.sequence;
    *sequence = 1;
    memset(prev, 0, MANIFEST_HASH_SIZE);
    for (; s >= 1; s--) {
        char key[SEGMENT_KEY_SIZE];
        segment_key(s, key);
        hanu_buf_reset(&obj);
        segment_header h;
        rc = bucket_get(sn->b, key, &obj, NULL, err, errcap);
        if (rc == HANU_OK) rc = segment_read_header(obj.data, obj.len, &h, err, errcap);
        if (rc) break;
        if (h.last_txn <= txn) {
            *sequence = s + 1;
            memcpy(prev, h.hash, MANIFEST_HASH_SIZE);
            break;
        }
        if (h.first_txn <= txn + 1) {
            *sequence = s;
            memcpy(prev, h.prev_hash, MANIFEST_HASH_SIZE);
            break;
        }
    }
    hanu_buf_free(&obj);
    return rc;
}

/* ---- retention ---- */

/* One listed segment: its sequence and size. */
typedef struct seg_entry { uint64_t seq, size; } seg_entry;
typedef struct seg_list { seg_entry *v; size_t n, cap; } seg_list;

static int collect_segment(void *ctx, const char *key, uint64_t size)
{
    seg_list *l = ctx;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK) return 0;   /* a stray object: leave it */
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        seg_entry *v = realloc(l->v, cap * sizeof *v);
        if (!v) return 1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (seg_entry){ seq, size };
    return 0;
}

static int cmp_seg(const void *a, const void *b)
{
    uint64_t x = ((const seg_entry *)a)->seq, y = ((const seg_entry *)b)->seq;
    return x < y ? -1 : x > y;
}

/* A file object and the newest manifest (by index) that names it. */
typedef struct named_file { char key[MANIFEST_FILE_KEY_SIZE]; uint64_t size; size_t newest; } named_file;

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const named_file *)a)->key, ((const named_file *)b)->key);
}

/* The first manifest kept by the time window and the count, before the size guard:
   a manifest goes only when a newer one was made at or before the window's start.
   *anchored says the first kept one was itself made before the window: only then
   are the segments below it outside the window too (else a restore from segment 1
   may still need them). */
static size_t first_kept_by_window(const snapshotter *sn, const manifest *m, size_t n, uint64_t now_ms,
                                   int *anchored)
{
    *anchored = 0;
    if (sn->o.retain_ms == SNAPSHOT_RETAIN_FOREVER || n == 0) return 0;
    uint64_t start = now_ms > sn->o.retain_ms ? now_ms - sn->o.retain_ms : 0;
    size_t first = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].created_ms <= start) first = i;
    uint32_t keep = sn->o.keep ? sn->o.keep : 1;
    if (n - first < keep) first = n > keep ? n - keep : 0;
    *anchored = m[first].created_ms <= start;
    return first;
}

/* The size guard: bytes kept when manifests first.. stay (the files they name and
   the segments from first's replay sequence on); first moves up, never past the
   newest, while they exceed max_bytes. */
static size_t first_kept_by_size(const snapshotter *sn, const manifest *m, size_t n, size_t first,
                                 const seg_list *segs, int *anchored)
{
    if (!sn->o.max_bytes || n == 0) return first;
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) nf += m[i].file_count;
    named_file *nfv = calloc(nf ? nf : 1, sizeof *nfv);
    uint64_t *by_newest = calloc(n, sizeof *by_newest);
    if (!nfv || !by_newest) { free(nfv); free(by_newest); return first; }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t f = 0; f < m[i].file_count; f++, k++) {
            manifest_file_key(m[i].files[f].sha256, nfv[k].key);
            nfv[k].size = m[i].files[f].size;
            nfv[k].newest = i;
        }
    qsort(nfv, nf, sizeof *nfv, cmp_named);
    for (size_t i = 0; i < nf; i++) {   /* each object once, under the newest manifest naming it */
        size_t j = i, newest = nfv[i].newest;
        while (j + 1 < nf && !strcmp(nfv[j + 1].key, nfv[i].key)) {
            j++;   /* not inside HANU_MAX, which evaluates its arguments twice */
            newest = HANU_MAX(newest, nfv[j].newest);
        }
        by_newest[newest] += nfv[i].size;
        i = j;
    }
    uint64_t files_from_first = 0;
    for (size_t i = first; i < n; i++) files_from_first += by_newest[i];
    uint64_t bytes = 0;
    size_t moved_from = first;
    int was_anchored = *anchored;
    for (;;) {
        uint64_t seg_bytes = 0;
        for (size_t s = 0; s < segs->n; s++)
            if (!*anchored || segs->v[s].seq >= m[first].replay_sequence || s + 1 == segs->n)
                seg_bytes += segs->v[s].size;
        bytes = files_from_first + seg_bytes;
        if (bytes <= sn->o.max_bytes) break;
        if (!*anchored) { *anchored = 1; continue; }   /* first the segments before the oldest manifest */
        if (first + 1 >= n) break;                       /* the newest always stays */
        files_from_first -= by_newest[first++];
    }
    if (first != moved_from || *anchored != was_anchored) {
        char when[40];
        hanu_format_time_ms(m[first].created_ms, when, sizeof when);
        hlog_info("snapshot", "retention: the bucket would hold more than the size guard's %" PRIu64 " bytes: "
                "the window is shortened, restores now reach back to txn %" PRIu64 " at %s (%" PRIu64
                " bytes kept)", sn->o.max_bytes, m[first].txn, when, bytes);
    }
    free(nfv);
    free(by_newest);
    return first;
}

static int retain(snapshotter *sn, snapshot_result *r, char *err, size_t errcap)
{
    snap_names mans, files = { 0 }, named = { 0 };
    seg_list segs = { 0 };
    int rc = snap_list_bucket(sn->b, MANIFEST_KEY_PREFIX, &mans, err, errcap);
    if (rc) return rc;
    /* Every manifest is read: its time says whether the window still needs it. */
    manifest *m = calloc(mans.n ? mans.n : 1, sizeof *m);
    char **keys = calloc(mans.n ? mans.n : 1, sizeof *keys);
    size_t n = 0;
    if (!m || !keys) rc = HANU_ERR_NOMEM;
    hanu_buf obj = { 0 };
    for (size_t i = 0; i < mans.n && rc == HANU_OK; i++) {
        uint64_t t;
        if (manifest_key_parse(mans.v[i], &t)) continue;   /* a stray object: leave it */
        hanu_buf_reset(&obj);
        rc = bucket_get(sn->b, mans.v[i], &obj, NULL, err, errcap);
        if (rc == HANU_OK) rc = manifest_decode(obj.data, obj.len, &m[n], err, errcap);
        if (rc == HANU_OK) keys[n++] = mans.v[i];
    }
    hanu_buf_free(&obj);
    if (rc == HANU_OK) rc = bucket_list(sn->b, SEGMENT_KEY_PREFIX, collect_segment, &segs, err, errcap);
    if (rc == HANU_OK && segs.n) qsort(segs.v, segs.n, sizeof *segs.v, cmp_seg);
    size_t first = 0;
    int anchored = 0;
    if (rc == HANU_OK) {
        first = first_kept_by_window(sn, m, n, hanu_wall_ms(), &anchored);
        first = first_kept_by_size(sn, m, n, first, &segs, &anchored);
    }
    /* What the kept manifests name; the oldest kept says which segments replay needs. */
    uint64_t oldest_replay = UINT64_MAX;
    for (size_t i = first; i < n && rc == HANU_OK; i++) {
        oldest_replay = HANU_MIN(oldest_replay, m[i].replay_sequence);
        for (uint32_t f = 0; f < m[i].file_count && rc == HANU_OK; f++) {
            char key[MANIFEST_FILE_KEY_SIZE];
            manifest_file_key(m[i].files[f].sha256, key);
            rc = collect(&named, key, 0);
        }
    }
    if (rc == HANU_OK && first < n) {
        r->oldest_txn = m[first].txn;
        r->oldest_ms = m[first].created_ms;
    }
    if (rc == HANU_OK && named.n) qsort(named.v, named.n, sizeof *named.v, cmp_str);
    /* Older manifests first: a file or segment goes only when no manifest in the
       bucket needs it. */
    for (size_t i = 0; i < first && rc == HANU_OK; i++) {
        rc = bucket_delete(sn->b, keys[i], err, errcap);
        if (rc == HANU_OK) r->deleted_manifests++;
    }
    if (rc == HANU_OK) rc = snap_list_bucket(sn->b, MANIFEST_FILE_KEY_PREFIX, &files, err, errcap);
    for (size_t i = 0; i < files.n && rc == HANU_OK; i++) {
        if (snap_names_has(&named, files.v[i])) continue;
        rc = bucket_delete(sn->b, files.v[i], err, errcap);
        if (rc == HANU_OK) r->deleted_files++;
    }
    /* The chain's last segment always stays: a sealer opening on the bucket continues
       the chain from it (an empty bucket would start it again at sequence 1). */
    for (size_t i = 0; i + 1 < segs.n && rc == HANU_OK && anchored && oldest_replay != UINT64_MAX; i++) {
        if (segs.v[i].seq >= oldest_replay) continue;
        char key[SEGMENT_KEY_SIZE];
        segment_key(segs.v[i].seq, key);
        rc = bucket_delete(sn->b, key, err, errcap);
        if (rc == HANU_OK) r->deleted_segments++;
    }
    for (size_t i = 0; i < n; i++) manifest_free(&m[i]);
    free(m);
    free(keys);
    free(segs.v);
    snap_names_free(&mans);
    snap_names_free(&files);
    snap_names_free(&named);
    return rc;
}

/* ---- one snapshot ---- */

static int put_manifest(snapshotter *sn, const pin_set *ps, uint64_t txn, uint64_t index_txn,
                        snapshot_result *r, manifest *m, char *err, size_t errcap)
{
    memset(m, 0, sizeof *m);
    m->txn = txn;
    m->index_txn = index_txn;
    m->created_ms = hanu_wall_ms();
    m->format_version = LOG_FORMAT_VERSION;
    m->file_count = (uint32_t)ps->n;
    m->files = calloc(ps->n ? ps->n : 1, sizeof *m->files);
    if (!m->files) return HANU_ERR_NOMEM;
    for (size_t i = 0; i < ps->n; i++) {
        m->files[i].path = ps->v[i].path;
        m->files[i].size = ps->v[i].size;
        memcpy(m->files[i].sha256, ps->v[i].sha256, MANIFEST_HASH_SIZE);
    }
    int rc = sealer_wait(sn->z, txn, sn->o.seal_timeout_ms);
    if (rc) return snap_fail(rc, err, errcap, "snapshot: the sealer did not seal txn %" PRIu64 ": %s", txn,
                             hanu_status_str(rc));
    rc = find_replay(sn, txn, &m->replay_sequence, m->prev_hash, err, errcap);
    r->replay_sequence = m->replay_sequence;
    hanu_buf obj = { 0 };
    if (rc == HANU_OK) rc = manifest_encode(m, &obj, err, errcap);
    manifest_key(txn, r->manifest);
    if (rc == HANU_OK) {
        rc = bucket_put_if_absent(sn->b, r->manifest, obj.data, obj.len, NULL, err, errcap);
        if (rc == HANU_ERR_EXISTS) rc = HANU_OK;   /* this txn is covered already (a restart without writes) */
    }
    hanu_buf_free(&obj);
    return rc;
}

static int take(snapshotter *sn, snapshot_result *r, char *err, size_t errcap)
{
    memset(r, 0, sizeof *r);
    uint64_t start = hanu_now_ns();
    pin_set ps = { 0 };
    uint64_t txn = 0, index_txn = 0;
    int rc = pin_files(sn, &txn, &index_txn, &ps, &r->rotate_us, err, errcap);
    r->pin_ms = (hanu_now_ns() - start) / 1000000;
    r->txn = txn;
    r->index_txn = index_txn;
    hash_entry *fresh = rc ? NULL : calloc(ps.n ? ps.n : 1, sizeof *fresh);
    if (!rc && !fresh) rc = HANU_ERR_NOMEM;
    for (size_t i = 0; i < ps.n && rc == HANU_OK; i++) rc = hash_pinned(sn, &ps.v[i], &fresh[i], err, errcap);
    if (rc == HANU_OK) {   /* the cache now holds exactly the files pinned */
        free(sn->cache);
        sn->cache = fresh;
        sn->ncache = ps.n;
        fresh = NULL;
    }
    free(fresh);
    snap_names have = { 0 };
    if (rc == HANU_OK) rc = snap_list_bucket(sn->b, MANIFEST_FILE_KEY_PREFIX, &have, err, errcap);
    /* Gigabytes of files take minutes: a progress line every 10 s in the log. */
    uint64_t total = 0;
    for (size_t i = 0; i < ps.n; i++) total += ps.v[i].size;
    hlog_progress progress;
    hlog_progress_begin(&progress, "snapshot", "uploading the snapshot", "files", total, ps.n);
    for (size_t i = 0; i < ps.n && rc == HANU_OK; i++) {
        hlog_progress_update(&progress, r->bytes, r->files);
        char key[MANIFEST_FILE_KEY_SIZE];
        manifest_file_key(ps.v[i].sha256, key);
        r->files++;
        r->bytes += ps.v[i].size;
        int dup = 0;   /* two files with the same bytes: one object */
        for (size_t j = 0; j < i && !dup; j++) dup = !memcmp(ps.v[j].sha256, ps.v[i].sha256, MANIFEST_HASH_SIZE);
        if (dup || snap_names_has(&have, key)) continue;
        rc = upload_pinned(sn, &ps.v[i], err, errcap);
        r->files_uploaded++;
        r->bytes_uploaded += ps.v[i].size;
    }
    hlog_progress_clear(&progress);   /* the snapshot's own line says how it ended */
    snap_names_free(&have);
    manifest m = { 0 };
    if (rc == HANU_OK) rc = put_manifest(sn, &ps, txn, index_txn, r, &m, err, errcap);
    if (rc == HANU_OK) {
        int rrc = retain(sn, r, err, errcap);
        if (rrc) hlog_warn("snapshot", "snapshot %s is in the bucket, but retention failed: %s", r->manifest, err);
        err[0] = '\0';
    }
    free(m.files);
    char pin[PATH_MAX];
    snprintf(pin, sizeof pin, "%s/" SNAPSHOT_PIN_DIR, sn->data_dir);
    reset_pin_dir(pin);   /* the links go: compaction may free the space */
    free(ps.v);
    r->ms = (hanu_now_ns() - start) / 1000000;
    return rc;
}

int snapshot_take(snapshotter *sn, snapshot_result *out, char *err, size_t errcap)
{
    char local[512] = "";
    if (!err || !errcap) { err = local; errcap = sizeof local; }
    err[0] = '\0';
    sealer_stats ss;
    sealer_get_stats(sn->z, &ss);
    store_stats st;
    store_get_stats(sn->st, &st);
    pthread_mutex_lock(&sn->take_mu);
    int rc = take(sn, out, err, errcap);
    pthread_mutex_unlock(&sn->take_mu);
    pthread_mutex_lock(&sn->mu);
    if (rc == HANU_OK) {
        sn->stats.snapshots++;
        sn->stats.last_txn = out->txn;
        sn->stats.last_ms = hanu_wall_ms();
        sn->stats.bytes_uploaded += out->bytes_uploaded;
        sn->base_sequence = ss.sequence;
        sn->base_log_bytes = st.log_bytes_written;
        sn->base_ms = hanu_wall_ms();
        sn->stats.oldest_txn = out->oldest_txn;
        sn->stats.oldest_ms = out->oldest_ms;
    } else {
        sn->stats.failures++;
    }
    pthread_mutex_unlock(&sn->mu);
    return rc;
}

/* ---- the thread: requests and the policy ---- */

/* With an interval: once it has passed since the last snapshot and a segment was
   sealed since (under a steady load, one snapshot per interval, not one per 64
   segments). Without: every every_segments segments, and only when the log written
   since the last snapshot is at least half the state's size. */
static int policy_due(snapshotter *sn)
{
    if (!sn->o.every_segments) return 0;
    sealer_stats ss;
    sealer_get_stats(sn->z, &ss);
    store_stats st;
    store_get_stats(sn->st, &st);
    uint64_t now = hanu_wall_ms();
    pthread_mutex_lock(&sn->mu);
    int due;
    if (sn->o.interval_ms)
        due = ss.sequence > sn->base_sequence && now >= sn->base_ms + sn->o.interval_ms;
    else
        due = ss.sequence >= sn->base_sequence + sn->o.every_segments &&
              (st.log_bytes_written - sn->base_log_bytes) * 2 >= st.disk_bytes;
    pthread_mutex_unlock(&sn->mu);
    return due;
}

static void lower_priority(void)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    (void)hanu_thread_background(10);
    /* IOPRIO_WHO_PROCESS = 1; best-effort class (2) at its lowest level (7). */
    syscall(SYS_ioprio_set, 1, tid, (2 << 13) | 7);
}

static void *snapshot_thread(void *arg)
{
    snapshotter *sn = arg;
    if (sn->o.low_priority) lower_priority();
    pthread_mutex_lock(&sn->mu);
    while (!sn->stop) {
        if (sn->requested <= sn->finished) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)sn->o.check_interval_ms * 1000000u;
            ts.tv_sec += (time_t)(ns / 1000000000u);
            ts.tv_nsec = (long)(ns % 1000000000u);
            pthread_cond_timedwait(&sn->cv, &sn->mu, &ts);
            if (sn->stop) break;
        }
        uint64_t covered = sn->requested;
        int asked = covered > sn->finished;
        pthread_mutex_unlock(&sn->mu);
        int by_policy = !asked && hanu_wall_ms() >= sn->policy_retry_ms && policy_due(sn);
        int run = asked || by_policy;
        snapshot_result r;
        char err[512] = "";
        int rc = run ? snapshot_take(sn, &r, err, sizeof err) : HANU_OK;
        if (run && rc) {
            /* Back off: 2 s, 4 s, ... up to 5 minutes (or the interval, if shorter). */
            uint64_t wait_ms = 1000ull << HANU_MIN(sn->policy_failures + 1, 9u);
            uint64_t cap = sn->o.interval_ms && sn->o.interval_ms < 300000 ? sn->o.interval_ms : 300000;
            if (wait_ms > cap) wait_ms = HANU_MAX(cap, 1000u);
            if (by_policy) sn->policy_failures++;
            if (by_policy) sn->policy_retry_ms = hanu_wall_ms() + wait_ms;
            hlog_error("snapshot", "snapshot failed: %s%s", err[0] ? err : hanu_status_str(rc),
                       by_policy ? "; the next attempt backs off" : "");
        } else if (run) {
            sn->policy_failures = 0;
            sn->policy_retry_ms = 0;
        }
        if (run && !rc && !asked)
            hlog_info("snapshot", "snapshot %s: txn %" PRIu64 ", %u files (%u uploaded, %" PRIu64 " bytes) in %" PRIu64
                    " ms", r.manifest, r.txn, r.files, r.files_uploaded, r.bytes_uploaded, r.ms);
        pthread_mutex_lock(&sn->mu);
        if (asked) {
            sn->finished = covered;
            sn->last_rc = rc;
            sn->last = r;
            snprintf(sn->last_err, sizeof sn->last_err, "%s", err);
        }
    }
    pthread_mutex_unlock(&sn->mu);
    return NULL;
}

/* When the newest manifest was made (0: none, or unreadable): the interval counts
   from it, so a server restarted often still takes its snapshots; without one, from
   the start (a new bucket holds the chain from segment 1 anyway). */
static uint64_t newest_manifest_ms(bucket *b)
{
    snap_names mans;
    char err[256];
    if (snap_list_bucket(b, MANIFEST_KEY_PREFIX, &mans, err, sizeof err) != HANU_OK) return 0;
    uint64_t ms = 0, t;
    for (size_t i = mans.n; i-- > 0 && !ms;) {
        if (manifest_key_parse(mans.v[i], &t)) continue;
        hanu_buf obj = { 0 };
        manifest m;
        if (bucket_get(b, mans.v[i], &obj, NULL, err, sizeof err) == HANU_OK &&
            manifest_decode(obj.data, obj.len, &m, err, sizeof err) == HANU_OK) {
            ms = m.created_ms;
            manifest_free(&m);
        }
        hanu_buf_free(&obj);
        break;
    }
    snap_names_free(&mans);
    return ms;
}

int snapshot_open(store *s, bucket *b, sealer *z, const snapshot_options *o, snapshotter **out,
                  char *err, size_t errcap)
{
    if (!o->data_dir || !z) return snap_fail(HANU_ERR_INVALID, err, errcap, "snapshot: needs a data directory and a sealer");
    snapshotter *sn = calloc(1, sizeof *sn);
    if (!sn) return HANU_ERR_NOMEM;
    sn->st = s;
    sn->b = b;
    sn->z = z;
    sn->o = *o;
    if (!sn->o.check_interval_ms) sn->o.check_interval_ms = 1000;
    if (!sn->o.seal_timeout_ms) sn->o.seal_timeout_ms = 120000;
    sn->data_dir = strdup(o->data_dir);
    sn->index_dir = o->index_dir ? strdup(o->index_dir) : NULL;
    if (!sn->data_dir || (o->index_dir && !sn->index_dir)) { free(sn->data_dir); free(sn); return HANU_ERR_NOMEM; }
    /* A watermark left by a crash in the middle of a pin would hold compaction forever. */
    store_watermark_drop(s, SNAPSHOT_WATERMARK);
    char pin[PATH_MAX];
    snprintf(pin, sizeof pin, "%s/" SNAPSHOT_PIN_DIR, sn->data_dir);
    reset_pin_dir(pin);
    sealer_stats ss;
    sealer_get_stats(z, &ss);
    store_stats st;
    store_get_stats(s, &st);
    sn->base_sequence = ss.sequence;
    sn->base_log_bytes = st.log_bytes_written;
    sn->base_ms = newest_manifest_ms(b);
    if (!sn->base_ms) sn->base_ms = hanu_wall_ms();
    pthread_mutex_init(&sn->mu, NULL);
    pthread_mutex_init(&sn->take_mu, NULL);
    pthread_cond_init(&sn->cv, NULL);
    if (pthread_create(&sn->thread, NULL, snapshot_thread, sn) != 0) {
        free(sn->data_dir);
        free(sn->index_dir);
        free(sn);
        return snap_fail(HANU_ERR_IO, err, errcap, "snapshot: cannot start its thread");
    }    pthread_setname_np(sn->thread, "hanu-snapshot");

    *out = sn;
    return HANU_OK;
}

void snapshot_close(snapshotter *sn)
{
    if (!sn) return;
    pthread_mutex_lock(&sn->mu);
    sn->stop = 1;
    pthread_cond_broadcast(&sn->cv);
    pthread_mutex_unlock(&sn->mu);
    pthread_join(sn->thread, NULL);
    pthread_mutex_destroy(&sn->mu);
    pthread_mutex_destroy(&sn->take_mu);
    pthread_cond_destroy(&sn->cv);
    free(sn->cache);
    free(sn->data_dir);
    free(sn->index_dir);
    free(sn);
}

uint64_t snapshot_request(snapshotter *sn)
{
    pthread_mutex_lock(&sn->mu);
    uint64_t ticket = ++sn->requested;
    pthread_cond_broadcast(&sn->cv);
    pthread_mutex_unlock(&sn->mu);
    return ticket;
}

int snapshot_poll(snapshotter *sn, uint64_t ticket, int *rc, snapshot_result *out, char *err, size_t errcap)
{
    pthread_mutex_lock(&sn->mu);
    int done = sn->finished >= ticket;
    if (done) {
        *rc = sn->last_rc;
        *out = sn->last;
        if (err && errcap) snprintf(err, errcap, "%s", sn->last_err);
    }
    pthread_mutex_unlock(&sn->mu);
    return done;
}

void snapshot_get_stats(snapshotter *sn, snapshot_stats *out)
{
    pthread_mutex_lock(&sn->mu);
    *out = sn->stats;
    out->running = !sn->stop;
    pthread_mutex_unlock(&sn->mu);
}
