/*
 * bucket_file.c: the file:///path backend. An object is a file at path/KEY (a key's
 * '/' makes folders); its ETag is the SHA-256 of its bytes. Names starting with '.'
 * are ours (temporary files, the lock) and never keys.
 *
 * Every new object is written to a temporary file beside it and synced first, then:
 * - put-if-absent: link(2), which never replaces: of racing writers exactly one
 *   links, every other gets EEXIST; no lock needed, on any POSIX file system.
 * - put, compare-and-swap, delete: under an exclusive flock(2) of path/.lock (opened
 *   per request, so threads of one process exclude each other too), read and compare
 *   the current ETag when conditional, then rename(2) over the old file.
 * The folder is synced after each link, rename and unlink, so what was answered OK
 * survives a power loss.
 */
#include "bucket/bucket_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct file_bucket {
    char root[PATH_MAX - BUCKET_KEY_MAX - 64];
    atomic_uint_fast64_t temp_counter;
} file_bucket;

static file_bucket *fb(bucket *b) { return b->backend; }

static int io_fail(bucket_call *call, const char *what, const char *path)
{
    int e = errno;
    return bucket_fail(call, e == ENOSPC || e == EDQUOT ? HANU_ERR_NOSPACE : HANU_ERR_IO, "bucket: %s %s: %s", what,
                       path, strerror(e));
}

static int object_path(bucket *b, const char *key, char *path, size_t cap, bucket_call *call)
{
    if ((size_t)snprintf(path, cap, "%s/%s", fb(b)->root, key) >= cap)
        return bucket_fail(call, HANU_ERR_INVALID, "bucket: path of key %s too long", key);
    return HANU_OK;
}

/* Creates every folder of path up to its last '/', syncing each parent of a new one. */
static int make_parents(char *path, bucket_call *call)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = HANU_OK;
        if (mkdir(path, 0755) == 0) {
            char *parent_end = strrchr(path, '/');
            if (parent_end && parent_end != path) {
                *parent_end = 0;
                rc = hanu_fsync_dir(path);
                *parent_end = '/';
            }
            if (rc != HANU_OK) rc = io_fail(call, "sync folder of", path);
        } else if (errno != EEXIST) {
            rc = io_fail(call, "create folder", path);
        }
        *p = '/';
        if (rc != HANU_OK) return rc;
    }
    return HANU_OK;
}

static int sync_parent(const char *path, bucket_call *call)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    return hanu_fsync_dir(dir) == HANU_OK ? HANU_OK : io_fail(call, "sync folder", dir);
}

/* Writes data to a fresh, synced temporary file beside path; its name in temp. */
static int write_temp(bucket *b, const char *path, const void *data, size_t len, char *temp, size_t cap,
                      bucket_call *call)
{
    size_t dir_len = (size_t)(strrchr(path, '/') - path);
    if (snprintf(temp, cap, "%.*s/.tmp-%d-%llu", (int)dir_len, path, (int)getpid(),
                 (unsigned long long)atomic_fetch_add(&fb(b)->temp_counter, 1)) >= (int)cap)
        return bucket_fail(call, HANU_ERR_INVALID, "bucket: path %s too long", path);
    int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return io_fail(call, "create", temp);
    int rc = hanu_write_full(fd, data, len);
    if (rc == HANU_OK && fsync(fd) != 0) rc = HANU_ERR_IO;
    if (rc != HANU_OK) rc = io_fail(call, "write", temp);
    close(fd);
    if (rc != HANU_OK) unlink(temp);
    return rc;
}

/* Reads the whole file (size up to BUCKET_OBJECT_MAX) into out. */
static int read_whole(const char *path, hanu_buf *out, bucket_call *call)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? bucket_fail(call, HANU_ERR_NOT_FOUND, "bucket: %s: no such object", path)
                                       : io_fail(call, "open", path);
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? HANU_OK : io_fail(call, "stat", path);
    if (rc == HANU_OK && (uint64_t)st.st_size > BUCKET_OBJECT_MAX)
        rc = bucket_fail(call, HANU_ERR_TOO_LARGE, "bucket: %s is larger than an object may be", path);
    if (rc == HANU_OK && hanu_buf_reserve(out, (size_t)st.st_size) != HANU_OK) rc = HANU_ERR_NOMEM;
    if (rc == HANU_OK && st.st_size > 0) {
        rc = hanu_pread_full(fd, out->data + out->len, (size_t)st.st_size, 0);
        if (rc != HANU_OK) rc = io_fail(call, "read", path);
        else out->len += (size_t)st.st_size;
    }
    close(fd);
    return rc;
}

static void fill_info(bucket_object_info *info, const void *data, size_t len)
{
    if (!info) return;
    info->size = len;
    bucket_sha256_hex(data, len, info->etag);
}

static int lock_bucket(bucket *b, bucket_call *call)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.lock", fb(b)->root);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return io_fail(call, "open", path);
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int rc = io_fail(call, "lock", path);
            close(fd);
            return rc;
        }
    }
    return fd;
}

static void unlock_bucket(int fd) { close(fd); }   /* closing the description releases the flock */

/* Under the lock: the current object must have ETag etag. */
static int check_etag(const char *path, const char *etag, bucket_call *call)
{
    hanu_buf cur = {0};
    int rc = read_whole(path, &cur, call);
    if (rc == HANU_OK) {
        char have[65];
        bucket_sha256_hex(cur.data, cur.len, have);
        if (strcmp(have, etag) != 0)
            rc = bucket_fail(call, HANU_ERR_MISMATCH, "bucket: %s has ETag %s, not %s", path, have, etag);
    }
    hanu_buf_free(&cur);
    return rc;
}

static int file_put(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
                    const char *etag, bucket_object_info *info, bucket_call *call)
{
    char path[PATH_MAX], temp[PATH_MAX];
    int rc = object_path(b, key, path, sizeof path, call);
    if (rc == HANU_OK) rc = make_parents(path, call);
    if (rc == HANU_OK) rc = write_temp(b, path, data, len, temp, sizeof temp, call);
    if (rc != HANU_OK) return rc;
    if (mode == BUCKET_PUT_IF_ABSENT) {
        if (link(temp, path) != 0)
            rc = errno == EEXIST ? bucket_fail(call, HANU_ERR_EXISTS, "bucket: %s exists", key)
                                 : io_fail(call, "link", path);
        unlink(temp);
    } else {
        int lock = lock_bucket(b, call);
        if (lock < 0) rc = lock;
        if (rc == HANU_OK && mode == BUCKET_PUT_IF_MATCH) rc = check_etag(path, etag, call);
        if (rc == HANU_OK && rename(temp, path) != 0) rc = io_fail(call, "rename onto", path);
        if (rc == HANU_OK) rc = sync_parent(path, call);   /* before others see the lock free */
        if (lock >= 0) unlock_bucket(lock);
        if (rc != HANU_OK) unlink(temp);
        if (rc == HANU_OK) fill_info(info, data, len);
        return rc;
    }
    if (rc == HANU_OK) rc = sync_parent(path, call);
    if (rc == HANU_OK) fill_info(info, data, len);
    return rc;
}

static int file_get(bucket *b, const char *key, int ranged, uint64_t offset, size_t len, hanu_buf *out,
                    bucket_object_info *info, bucket_call *call)
{
    char path[PATH_MAX];
    int rc = object_path(b, key, path, sizeof path, call);
    if (rc != HANU_OK) return rc;
    if (!ranged) {
        size_t start = out->len;
        rc = read_whole(path, out, call);
        if (rc == HANU_OK) fill_info(info, out->data + start, out->len - start);
        return rc;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? bucket_fail(call, HANU_ERR_NOT_FOUND, "bucket: %s: no such object", key)
                                       : io_fail(call, "open", path);
    struct stat st;
    rc = fstat(fd, &st) == 0 ? HANU_OK : io_fail(call, "stat", path);
    if (rc == HANU_OK && offset >= (uint64_t)st.st_size)
        rc = bucket_fail(call, HANU_ERR_INVALID, "bucket: range at %llu is past the end of %s (%lld bytes)",
                         (unsigned long long)offset, key, (long long)st.st_size);
    if (rc == HANU_OK) {
        size_t n = (size_t)HANU_MIN((uint64_t)len, (uint64_t)st.st_size - offset);
        if (hanu_buf_reserve(out, n) != HANU_OK) rc = HANU_ERR_NOMEM;
        else if (hanu_pread_full(fd, out->data + out->len, n, (off_t)offset) != HANU_OK) rc = io_fail(call, "read", path);
        else out->len += n;
    }
    close(fd);
    return rc;
}

static int file_head(bucket *b, const char *key, bucket_object_info *info, bucket_call *call)
{
    hanu_buf got = {0};
    int rc = file_get(b, key, 0, 0, 0, &got, info, call);
    hanu_buf_free(&got);
    return rc;
}

static int file_delete(bucket *b, const char *key, bucket_call *call)
{
    char path[PATH_MAX];
    int rc = object_path(b, key, path, sizeof path, call);
    if (rc != HANU_OK) return rc;
    int lock = lock_bucket(b, call);
    if (lock < 0) return lock;
    if (unlink(path) == 0) rc = sync_parent(path, call);
    else if (errno != ENOENT && errno != ENOTDIR) rc = io_fail(call, "delete", path);
    unlock_bucket(lock);
    return rc;
}

/* ---- list: walk the folders, keep the keys under the prefix, sort them ---- */
typedef struct listing {
    char **keys;                        /* each key, its NUL, then its size (8 bytes) */
    size_t count, cap;
} listing;

static int listing_add(listing *l, const char *key, uint64_t size)
{
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **keys = realloc(l->keys, cap * sizeof *keys);
        if (!keys) return HANU_ERR_NOMEM;
        l->keys = keys;
        l->cap = cap;
    }
    size_t n = strlen(key);
    l->keys[l->count] = malloc(n + 9);
    if (!l->keys[l->count]) return HANU_ERR_NOMEM;
    memcpy(l->keys[l->count], key, n + 1);
    memcpy(l->keys[l->count] + n + 1, &size, 8);
    l->count++;
    return HANU_OK;
}

/* Adds every object below root/rel (rel "" or ending in '/') whose key may start with prefix. */
static int walk(const char *root, char *rel, size_t rel_len, const char *prefix, listing *l, bucket_call *call)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", root, rel);
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT || errno == ENOTDIR ? HANU_OK : io_fail(call, "list folder", dir);
    int rc = HANU_OK;
    size_t plen = strlen(prefix);
    struct dirent *e;
    while (rc == HANU_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        size_t n = strlen(e->d_name);
        if (rel_len + n + 2 > BUCKET_KEY_MAX + 2) continue;
        memcpy(rel + rel_len, e->d_name, n + 1);
        size_t len = rel_len + n;
        /* Skip what cannot lead to the prefix: the shorter of the two must match. */
        if (strncmp(rel, prefix, HANU_MIN(len, plen)) != 0) continue;
        struct stat st;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", root, rel);
        if (stat(path, &st) != 0) continue;   /* deleted meanwhile */
        if (S_ISDIR(st.st_mode)) {
            rel[len] = '/';
            rel[len + 1] = 0;
            rc = walk(root, rel, len + 1, prefix, l, call);
        } else if (S_ISREG(st.st_mode) && len >= plen) {
            rc = listing_add(l, rel, (uint64_t)st.st_size);
        }
    }
    rel[rel_len] = 0;
    closedir(d);
    return rc;
}

static int compare_keys(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int file_list_page(bucket *b, const char *prefix, const char *token, hanu_buf *next, hanu_buf *page,
                          bucket_call *call)
{
    (void)token;
    (void)next;   /* one page holds every key */
    listing l = {0};
    char rel[BUCKET_KEY_MAX + 2] = "";
    int rc = walk(fb(b)->root, rel, 0, prefix, &l, call);
    if (rc == HANU_OK && l.count) qsort(l.keys, l.count, sizeof *l.keys, compare_keys);
    for (size_t i = 0; i < l.count; i++) {
        uint64_t size;
        memcpy(&size, l.keys[i] + strlen(l.keys[i]) + 1, 8);
        if (rc == HANU_OK) rc = bucket_page_add(page, l.keys[i], size);
        free(l.keys[i]);
    }
    free(l.keys);
    return rc;
}

static void file_close(bucket *b) { free(b->backend); }

static const bucket_ops file_ops = { file_put, file_get, file_head, file_delete, file_list_page, file_close, NULL };

int bucket_file_open(bucket *b, const char *path, char *err, size_t errcap)
{
    bucket_call call = { 0, err, errcap };
    if (path[0] != '/') return bucket_fail(&call, HANU_ERR_INVALID, "bucket: a file URL is file:///ABSOLUTE/PATH");
    file_bucket *f = calloc(1, sizeof *f);
    if (!f) return HANU_ERR_NOMEM;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    if (n >= sizeof f->root) {
        free(f);
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket: path too long");
    }
    memcpy(f->root, path, n);
    f->root[n] = 0;
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/.lock", f->root);
    int rc = make_parents(probe, &call);
    struct stat st;
    if (rc == HANU_OK && (stat(f->root, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = bucket_fail(&call, HANU_ERR_INVALID, "bucket: %s is not a folder", f->root);
    if (rc != HANU_OK) {
        free(f);
        return rc;
    }
    b->backend = f;
    b->ops = &file_ops;
    return HANU_OK;
}
