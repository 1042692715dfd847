/*
 * snapshot_fetch.c: downloading a snapshot into a fresh data directory
 * (snapshot_fetch) and checking every manifest of a bucket (snapshot_audit).
 * Both read file objects the same way: a head for the size, then ranges of
 * CHUNK bytes hashed as they come, so no file is held in memory whole.
 */
#include "replica/snapshot.h"
#include "replica/snapshot_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#define CHUNK (8u << 20)

void snap_sha256(const void *data, size_t len, uint8_t out[32])
{
    SHA256(data ? data : (const void *)"", len, out);
}

/* Receives each verified chunk in order (fetch writes it; audit ignores it). */
typedef int (*chunk_fn)(void *ctx, const uint8_t *p, size_t n);

/* Reads object key in ranges and checks it against size and sha256. CORRUPT (or the
   bucket's NOT_FOUND, IO...) with a message naming the object and what for. */
static int read_object(bucket *b, const char *key, const char *what, uint64_t size, const uint8_t sha[32],
                       chunk_fn fn, void *ctx, uint64_t *read_bytes, char *err, size_t errcap)
{
    bucket_object_info info;
    char berr[256] = "";
    int rc = bucket_head(b, key, &info, berr, sizeof berr);
    if (rc == HANU_ERR_NOT_FOUND) return snap_fail(rc, err, errcap, "%s (%s): missing from the bucket", key, what);
    if (rc) return snap_fail(rc, err, errcap, "%s (%s): %s", key, what, berr);
    if (info.size != size)
        return snap_fail(HANU_ERR_CORRUPT, err, errcap, "%s (%s): %" PRIu64 " bytes, the manifest says %" PRIu64,
                         key, what, info.size, size);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) { EVP_MD_CTX_free(md); return HANU_ERR_NOMEM; }
    hanu_buf buf = { 0 };
    uint64_t off = 0;
    while (rc == HANU_OK && off < size) {
        size_t want = (size_t)HANU_MIN((uint64_t)CHUNK, size - off);
        hanu_buf_reset(&buf);
        rc = bucket_get_range(b, key, off, want, &buf, berr, sizeof berr);
        if (rc) { snap_fail(rc, err, errcap, "%s (%s): %s", key, what, berr); break; }
        if (buf.len != want) {
            rc = snap_fail(HANU_ERR_CORRUPT, err, errcap, "%s (%s): %zu bytes at offset %" PRIu64 ", wanted %zu",
                           key, what, buf.len, off, want);
            break;
        }
        EVP_DigestUpdate(md, buf.data, buf.len);
        if (fn && (rc = fn(ctx, buf.data, buf.len)) != HANU_OK)
            snap_fail(rc, err, errcap, "%s: cannot write: %s", what, strerror(errno));
        off += buf.len;
        if (read_bytes) *read_bytes += buf.len;
    }
    uint8_t got[32];
    unsigned int gl = 0;
    EVP_DigestFinal_ex(md, got, &gl);
    EVP_MD_CTX_free(md);
    hanu_buf_free(&buf);
    if (rc == HANU_OK && memcmp(got, sha, 32) != 0)
        rc = snap_fail(HANU_ERR_CORRUPT, err, errcap, "%s (%s): its SHA-256 does not match the manifest", key, what);
    return rc;
}

/* The newest manifest with txn <= max_txn: its key, or NOT_FOUND. */
static int pick_manifest(bucket *b, uint64_t max_txn, char key[MANIFEST_KEY_SIZE], char *err, size_t errcap)
{
    snap_names mans;
    int rc = snap_list_bucket(b, MANIFEST_KEY_PREFIX, &mans, err, errcap);
    if (rc) return rc;
    rc = HANU_ERR_NOT_FOUND;
    for (size_t i = mans.n; i-- > 0;) {
        uint64_t t;
        if (manifest_key_parse(mans.v[i], &t) || t > max_txn) continue;
        snprintf(key, MANIFEST_KEY_SIZE, "%s", mans.v[i]);
        rc = HANU_OK;
        break;
    }
    snap_names_free(&mans);
    if (rc) snap_fail(rc, err, errcap, "no manifest in the bucket%s", max_txn == UINT64_MAX ? "" : " at or below that txn");
    return rc;
}

static int get_manifest(bucket *b, const char *key, manifest *m, char *err, size_t errcap)
{
    hanu_buf obj = { 0 };
    char e[400] = "";
    int rc = bucket_get(b, key, &obj, NULL, e, sizeof e);
    if (rc == HANU_OK) rc = manifest_decode(obj.data, obj.len, m, e, sizeof e);
    uint64_t t = 0;
    if (rc == HANU_OK && (manifest_key_parse(key, &t) || t != m->txn)) {
        snprintf(e, sizeof e, "manifest: it says txn %" PRIu64 ", its name another", m->txn);
        manifest_free(m);
        rc = HANU_ERR_CORRUPT;
    }
    hanu_buf_free(&obj);
    if (rc) snap_fail(rc, err, errcap, "%s: %s", key, e[0] ? e : hanu_status_str(rc));
    return rc;
}

/* ---- fetch ---- */

typedef struct fetch {
    bucket *b;
    const char *dir;
    const manifest *m;
    const uint8_t *skip;            /* per file: left out (the index, when ahead of max_txn) */
    _Atomic uint32_t next;
    pthread_mutex_t mu;
    int rc;
    char err[600];
    uint64_t bytes, bytes_total, start_ns, reported_ns;
    uint32_t files, files_total;
    snapshot_progress_fn progress;
    void *progress_ctx;
} fetch;

typedef struct file_sink {
    fetch *f;
    int fd;
    uint64_t unsynced;
} file_sink;

static void report(fetch *f, uint64_t bytes, int file_done, int force)
{
    pthread_mutex_lock(&f->mu);
    f->bytes += bytes;
    f->files += (uint32_t)file_done;
    uint64_t now = hanu_now_ns();
    if (f->progress && (force || now - f->reported_ns > 250000000ull)) {
        f->reported_ns = now;
        double s = (double)(now - f->start_ns) / 1e9;
        f->progress(f->progress_ctx, f->bytes, f->bytes_total, f->files, f->files_total, s > 0 ? (double)f->bytes / s : 0);
    }
    pthread_mutex_unlock(&f->mu);
}

/* Writes a chunk; syncs every SNAPSHOT_SYNC_BYTES so dirty pages stay bounded. */
static int sink_chunk(void *ctx, const uint8_t *p, size_t n)
{
    file_sink *s = ctx;
    int rc = hanu_write_full(s->fd, p, n);
    if (rc) return rc;
    s->unsynced += n;
    if (s->unsynced >= SNAPSHOT_SYNC_BYTES) {
        if (fdatasync(s->fd) != 0) return HANU_ERR_IO;
        s->unsynced = 0;
    }
    report(s->f, n, 0, 0);
    return HANU_OK;
}

static int fetch_one(fetch *f, const manifest_file *mf, char *err, size_t errcap)
{
    char path[PATH_MAX], key[MANIFEST_FILE_KEY_SIZE];
    snprintf(path, sizeof path, "%s/%s", f->dir, mf->path);
    manifest_file_key(mf->sha256, key);
    file_sink s = { f, open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), 0 };
    if (s.fd < 0) return snap_fail(HANU_ERR_IO, err, errcap, "cannot create %s: %s", path, strerror(errno));
    int rc = read_object(f->b, key, mf->path, mf->size, mf->sha256, sink_chunk, &s, NULL, err, errcap);
    if (rc == HANU_OK && fsync(s.fd) != 0) rc = snap_fail(HANU_ERR_IO, err, errcap, "cannot sync %s: %s", path, strerror(errno));
    close(s.fd);
    if (rc == HANU_OK) report(f, 0, 1, 0);
    return rc;
}

static void *fetch_worker(void *arg)
{
    fetch *f = arg;
    for (;;) {
        uint32_t i = atomic_fetch_add(&f->next, 1);
        if (i >= f->m->file_count) break;
        pthread_mutex_lock(&f->mu);
        int failed = f->rc != HANU_OK;
        pthread_mutex_unlock(&f->mu);
        if (failed) break;
        if (f->skip[i]) continue;
        char err[600] = "";
        int rc = fetch_one(f, &f->m->files[i], err, sizeof err);
        if (rc) {
            pthread_mutex_lock(&f->mu);
            if (f->rc == HANU_OK) { f->rc = rc; snprintf(f->err, sizeof f->err, "%s", err); }
            pthread_mutex_unlock(&f->mu);
            break;
        }
    }
    return NULL;
}

/* Creates the parent folders of every path (log/, index/), each fsynced into its parent. */
static int make_folders(const char *dir, const manifest *m, char *err, size_t errcap)
{
    for (uint32_t i = 0; i < m->file_count; i++) {
        const char *slash = m->files[i].path;
        while ((slash = strchr(slash, '/')) != NULL) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%.*s", dir, (int)(slash - m->files[i].path), m->files[i].path);
            if (mkdir(p, 0755) == 0) {
                char *cut = strrchr(p, '/');
                *cut = '\0';
                if (hanu_fsync_dir(p)) return snap_fail(HANU_ERR_IO, err, errcap, "cannot sync %s", p);
            } else if (errno != EEXIST) {
                return snap_fail(HANU_ERR_IO, err, errcap, "cannot create %s: %s", p, strerror(errno));
            }
            slash++;
        }
    }
    return HANU_OK;
}

/* After a failure: the files this fetch created go (the folder was empty). */
static void remove_fetched(const char *dir, const manifest *m)
{
    for (uint32_t i = 0; i < m->file_count; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, m->files[i].path);
        unlink(p);
    }
}

/* Every folder holding fetched files, then DATA itself, fsynced. */
static int sync_folders(const char *dir, const manifest *m)
{
    const char *done[8];
    size_t nd = 0;
    int rc = HANU_OK;
    for (uint32_t i = 0; i < m->file_count && rc == HANU_OK; i++) {
        const char *slash = strrchr(m->files[i].path, '/');
        if (!slash) continue;
        int seen = 0;
        for (size_t j = 0; j < nd && !seen; j++)
            seen = strncmp(done[j], m->files[i].path, (size_t)(slash - m->files[i].path) + 1) == 0;
        if (seen) continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%.*s", dir, (int)(slash - m->files[i].path), m->files[i].path);
        rc = hanu_fsync_dir(p);
        if (nd < 8) done[nd++] = m->files[i].path;
    }
    return rc ? rc : hanu_fsync_dir(dir);
}

static int dir_is_empty_or_missing(const char *dir, char *err, size_t errcap)
{
    snap_names names;
    int rc = snap_list_dir(dir, &names);
    if (rc == HANU_ERR_NOT_FOUND) {
        if (hanu_mkdir_p(dir) != 0) return snap_fail(HANU_ERR_IO, err, errcap, "cannot create %s: %s", dir, strerror(errno));
        return HANU_OK;
    }
    if (rc) return snap_fail(rc, err, errcap, "cannot read %s: %s", dir, strerror(errno));
    size_t n = names.n;
    snap_names_free(&names);
    if (n) return snap_fail(HANU_ERR_EXISTS, err, errcap, "%s is not empty: a snapshot is fetched into a fresh folder", dir);
    return HANU_OK;
}

int snapshot_fetch(bucket *b, const char *data_dir, uint64_t max_txn, snapshot_fetched *out,
                   snapshot_progress_fn progress, void *progress_ctx, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    uint64_t start = hanu_now_ns();
    int rc = pick_manifest(b, max_txn, out->manifest, err, errcap);
    if (rc) return rc;
    manifest m;
    if ((rc = get_manifest(b, out->manifest, &m, err, errcap)) != HANU_OK) return rc;
    if ((rc = dir_is_empty_or_missing(data_dir, err, errcap)) != HANU_OK) { manifest_free(&m); return rc; }
    fetch f = { .b = b, .dir = data_dir, .m = &m, .start_ns = start, .progress = progress,
                .progress_ctx = progress_ctx };
    uint8_t *skip = calloc(m.file_count ? m.file_count : 1, 1);
    if (!skip) { manifest_free(&m); return HANU_ERR_NOMEM; }
    /* An index ahead of the restore point would hold documents the restored log does
       not: leave it out, it rebuilds from the log. */
    int index_out = m.index_txn > max_txn;
    for (uint32_t i = 0; i < m.file_count; i++) {
        skip[i] = index_out && strncmp(m.files[i].path, "index/", 6) == 0;
        if (skip[i]) continue;
        f.bytes_total += m.files[i].size;
        f.files_total++;
    }
    f.skip = skip;
    pthread_mutex_init(&f.mu, NULL);
    rc = make_folders(data_dir, &m, err, errcap);
    pthread_t th[SNAPSHOT_FETCH_THREADS];
    int started = 0;
    for (; rc == HANU_OK && started < SNAPSHOT_FETCH_THREADS; started++)
        if (pthread_create(&th[started], NULL, fetch_worker, &f) != 0) break;
    if (rc == HANU_OK && started == 0) rc = snap_fail(HANU_ERR_IO, err, errcap, "cannot start the fetch threads");
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (rc == HANU_OK && f.rc) rc = snap_fail(f.rc, err, errcap, "%s", f.err);
    if (rc == HANU_OK && (rc = sync_folders(data_dir, &m)) != HANU_OK)
        snap_fail(rc, err, errcap, "cannot sync the folders of %s", data_dir);
    if (rc == HANU_OK) {
        report(&f, 0, 0, 1);
        out->txn = m.txn;
        out->replay_sequence = m.replay_sequence;
        memcpy(out->prev_hash, m.prev_hash, MANIFEST_HASH_SIZE);
        out->index_txn = index_out ? 0 : m.index_txn;
        out->files = f.files;
        out->bytes = f.bytes;
    } else {
        remove_fetched(data_dir, &m);
    }
    pthread_mutex_destroy(&f.mu);
    free(skip);
    manifest_free(&m);
    out->ms = (hanu_now_ns() - start) / 1000000;
    return rc;
}

/* ---- audit ---- */

int snapshot_audit(bucket *b, snapshot_audit_result *out, char *err, size_t errcap)
{
    return snapshot_audit_until(b, NULL, out, err, errcap);
}

int snapshot_audit_until(bucket *b, const _Atomic int *stop, snapshot_audit_result *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    snap_names mans, checked = { 0 };
    int rc = snap_list_bucket(b, MANIFEST_KEY_PREFIX, &mans, err, errcap);
    if (rc) return rc;
    for (size_t i = 0; i < mans.n && rc == HANU_OK; i++) {
        uint64_t t;
        if (manifest_key_parse(mans.v[i], &t)) {
            rc = snap_fail(HANU_ERR_CORRUPT, err, errcap, "%s: not a manifest (a stray object under %s)", mans.v[i],
                           MANIFEST_KEY_PREFIX);
            break;
        }
        manifest m;
        if ((rc = get_manifest(b, mans.v[i], &m, err, errcap)) != HANU_OK) break;
        for (uint32_t j = 0; j < m.file_count && rc == HANU_OK; j++) {
            char key[MANIFEST_FILE_KEY_SIZE], e[600] = "";
            manifest_file_key(m.files[j].sha256, key);
            int seen = 0;
            for (size_t k = 0; k < checked.n && !seen; k++) seen = strcmp(checked.v[k], key) == 0;
            if (seen) continue;
            if (stop && atomic_load(stop)) {
                rc = snap_fail(HANU_ERR_STOPPED, err, errcap, "the audit was stopped");
                break;
            }
            rc = read_object(b, key, m.files[j].path, m.files[j].size, m.files[j].sha256, NULL, NULL, &out->bytes, e,
                             sizeof e);
            if (rc) snap_fail(rc, err, errcap, "%s: %s", mans.v[i], e);
            else rc = snap_names_add(&checked, key);
        }
        if (rc == HANU_OK) {
            if (out->manifests == 0) {
                out->oldest_txn = m.txn;
                out->oldest_replay_sequence = m.replay_sequence;
                memcpy(out->oldest_prev_hash, m.prev_hash, MANIFEST_HASH_SIZE);
            }
            out->newest_txn = m.txn;
            out->manifests++;
        }
        manifest_free(&m);
    }
    out->files = (uint32_t)checked.n;
    snap_names_free(&checked);
    snap_names_free(&mans);
    return rc;
}
