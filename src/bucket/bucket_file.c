/*
 * bucket_file.c: the file:///path backend. An object is a file at path/KEY (a key's
 * '/' makes folders); its ETag is the SHA-256 of its bytes. Names starting with '.'
 * are ours (temporary files, the lock) and never keys.
 *
 * The root folder is opened once, at bucket_open (created there only when the
 * options allow it), and every request works relative to that descriptor
 * (openat, mkdirat, linkat, renameat, unlinkat): only folders below the root are
 * ever created. Before each put and delete, the path is checked to still name the
 * very folder that was opened (device and inode): a root that went missing, or was
 * moved away and replaced, fails the request (IO, retryable) instead of writing into
 * a folder nobody else will read (docs/BUCKET.md, "The root").
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
    int root_fd;                        /* every request is relative to it */
    dev_t root_dev;                     /* what root named when it was opened */
    ino_t root_ino;
    atomic_uint_fast64_t temp_counter;
} file_bucket;

static file_bucket *fb(bucket *b) { return b->backend; }

/* Requests name files by their path relative to the root; messages by the whole path. */
static int io_fail(bucket *b, bucket_call *call, const char *what, const char *rel)
{
    int e = errno;
    return bucket_fail(call, e == ENOSPC || e == EDQUOT ? HANU_ERR_NOSPACE : HANU_ERR_IO, "bucket: %s %s/%s: %s",
                       what, fb(b)->root, rel, strerror(e));
}

/* The fence against a phantom root: the path must still name the folder we opened. */
static int check_root(bucket *b, bucket_call *call)
{
    file_bucket *f = fb(b);
    struct stat st;
    int missing = stat(f->root, &st) != 0;
    if (!missing && st.st_dev == f->root_dev && st.st_ino == f->root_ino) return HANU_OK;
    int e = errno;
    call->retryable = 1;   /* a root renamed back works again */
    return bucket_fail(call, HANU_ERR_IO, "bucket: bucket root %s was moved or replaced (%s); nothing is written "
                       "until the folder opened at start is back at that path", f->root,
                       missing ? strerror(e) : "another folder is there now");
}

static int object_path(const char *key, char *rel, size_t cap, bucket_call *call)
{
    if ((size_t)snprintf(rel, cap, "%s", key) >= cap)
        return bucket_fail(call, HANU_ERR_INVALID, "bucket: path of key %s too long", key);
    return HANU_OK;
}

/* fsyncs the folder rel (relative to the root; "" is the root itself). */
static int fsync_dir_at(int root_fd, const char *rel)
{
    int fd = openat(root_fd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return HANU_ERR_IO;
    int rc = fsync(fd) == 0 ? HANU_OK : HANU_ERR_IO;
    close(fd);
    return rc;
}

/* Creates every folder of rel up to its last '/' below the root (never the root
   itself), syncing each parent of a new one. */
static int make_parents(bucket *b, char *rel, bucket_call *call)
{
    for (char *p = rel + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = HANU_OK;
        if (mkdirat(fb(b)->root_fd, rel, 0755) == 0) {
            char *parent_end = strrchr(rel, '/');
            if (parent_end) *parent_end = 0;
            rc = fsync_dir_at(fb(b)->root_fd, parent_end ? rel : "");
            if (parent_end) *parent_end = '/';
            if (rc != HANU_OK) rc = io_fail(b, call, "sync folder of", rel);
        } else if (errno != EEXIST) {
            rc = io_fail(b, call, "create folder", rel);
        }
        *p = '/';
        if (rc != HANU_OK) return rc;
    }
    return HANU_OK;
}

static int sync_parent(bucket *b, const char *rel, bucket_call *call)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else dir[0] = 0;
    return fsync_dir_at(fb(b)->root_fd, dir) == HANU_OK ? HANU_OK : io_fail(b, call, "sync folder", dir);
}

/* Writes data to a fresh, synced temporary file beside rel; its name in temp. */
static int write_temp(bucket *b, const char *rel, const void *data, size_t len, char *temp, size_t cap,
                      bucket_call *call)
{
    const char *slash = strrchr(rel, '/');
    int dir_len = slash ? (int)(slash - rel) + 1 : 0;
    if (snprintf(temp, cap, "%.*s.tmp-%d-%llu", dir_len, rel, (int)getpid(),
                 (unsigned long long)atomic_fetch_add(&fb(b)->temp_counter, 1)) >= (int)cap)
        return bucket_fail(call, HANU_ERR_INVALID, "bucket: path %s too long", rel);
    int fd = openat(fb(b)->root_fd, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return io_fail(b, call, "create", temp);
    int rc = hanu_write_full(fd, data, len);
    if (rc == HANU_OK && fsync(fd) != 0) rc = HANU_ERR_IO;
    if (rc != HANU_OK) rc = io_fail(b, call, "write", temp);
    close(fd);
    if (rc != HANU_OK) unlinkat(fb(b)->root_fd, temp, 0);
    return rc;
}

static int open_object(bucket *b, const char *rel, bucket_call *call)
{
    int fd = openat(fb(b)->root_fd, rel, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR
                   ? bucket_fail(call, HANU_ERR_NOT_FOUND, "bucket: %s/%s: no such object", fb(b)->root, rel)
                   : io_fail(b, call, "open", rel);
    return fd;
}

/* Reads the whole file (size up to BUCKET_OBJECT_MAX) into out. */
static int read_whole(bucket *b, const char *rel, hanu_buf *out, bucket_call *call)
{
    int fd = open_object(b, rel, call);
    if (fd < 0) return fd;
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? HANU_OK : io_fail(b, call, "stat", rel);
    if (rc == HANU_OK && (uint64_t)st.st_size > BUCKET_OBJECT_MAX)
        rc = bucket_fail(call, HANU_ERR_TOO_LARGE, "bucket: %s/%s is larger than an object may be", fb(b)->root, rel);
    if (rc == HANU_OK && hanu_buf_reserve(out, (size_t)st.st_size) != HANU_OK) rc = HANU_ERR_NOMEM;
    if (rc == HANU_OK && st.st_size > 0) {
        rc = hanu_pread_full(fd, out->data + out->len, (size_t)st.st_size, 0);
        if (rc != HANU_OK) rc = io_fail(b, call, "read", rel);
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
    int fd = openat(fb(b)->root_fd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return io_fail(b, call, "open", ".lock");
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int rc = io_fail(b, call, "lock", ".lock");
            close(fd);
            return rc;
        }
    }
    return fd;
}

static void unlock_bucket(int fd) { close(fd); }   /* closing the description releases the flock */

/* Under the lock: the current object must have ETag etag. */
static int check_etag(bucket *b, const char *rel, const char *etag, bucket_call *call)
{
    hanu_buf cur = {0};
    int rc = read_whole(b, rel, &cur, call);
    if (rc == HANU_OK) {
        char have[65];
        bucket_sha256_hex(cur.data, cur.len, have);
        if (strcmp(have, etag) != 0)
            rc = bucket_fail(call, HANU_ERR_MISMATCH, "bucket: %s/%s has ETag %s, not %s", fb(b)->root, rel, have, etag);
    }
    hanu_buf_free(&cur);
    return rc;
}

static int file_put(bucket *b, const char *key, const void *data, size_t len, enum bucket_put_mode mode,
                    const char *etag, bucket_object_info *info, bucket_call *call)
{
    char path[PATH_MAX], temp[PATH_MAX];
    int rfd = fb(b)->root_fd;
    int rc = object_path(key, path, sizeof path, call);
    if (rc == HANU_OK) rc = make_parents(b, path, call);
    if (rc == HANU_OK) rc = write_temp(b, path, data, len, temp, sizeof temp, call);
    if (rc != HANU_OK) return check_root(b, call) != HANU_OK ? HANU_ERR_IO : rc;   /* a deleted root says so */
    /* Checked last, just before the object appears: the temporary file went to the
       folder we hold, which is harmless wherever that folder now is. */
    if ((rc = check_root(b, call)) != HANU_OK) {
        unlinkat(rfd, temp, 0);
        return rc;
    }
    if (!bucket_guard_passes(call, key)) {   /* after the temporary file's write and sync */
        unlinkat(rfd, temp, 0);
        return HANU_ERR_STOPPED;
    }
    if (mode == BUCKET_PUT_IF_ABSENT) {
        if (linkat(rfd, temp, rfd, path, 0) != 0)
            rc = errno == EEXIST ? bucket_fail(call, HANU_ERR_EXISTS, "bucket: %s exists", key)
                                 : io_fail(b, call, "link", path);
        unlinkat(rfd, temp, 0);
    } else {
        int lock = lock_bucket(b, call);
        if (lock < 0) rc = lock;
        if (rc == HANU_OK && mode == BUCKET_PUT_IF_MATCH) rc = check_etag(b, path, etag, call);
        if (rc == HANU_OK && renameat(rfd, temp, rfd, path) != 0) rc = io_fail(b, call, "rename onto", path);
        if (rc == HANU_OK) rc = sync_parent(b, path, call);   /* before others see the lock free */
        if (lock >= 0) unlock_bucket(lock);
        if (rc != HANU_OK) unlinkat(rfd, temp, 0);
        if (rc == HANU_OK) fill_info(info, data, len);
        return rc;
    }
    if (rc == HANU_OK) rc = sync_parent(b, path, call);
    if (rc == HANU_OK) fill_info(info, data, len);
    return rc;
}

static int file_get(bucket *b, const char *key, int ranged, uint64_t offset, size_t len, hanu_buf *out,
                    bucket_object_info *info, bucket_call *call)
{
    char path[PATH_MAX];
    int rc = object_path(key, path, sizeof path, call);
    if (rc != HANU_OK) return rc;
    if (!ranged) {
        size_t start = out->len;
        rc = read_whole(b, path, out, call);
        if (rc == HANU_OK) fill_info(info, out->data + start, out->len - start);
        return rc;
    }
    int fd = open_object(b, path, call);
    if (fd < 0) return fd;
    struct stat st;
    rc = fstat(fd, &st) == 0 ? HANU_OK : io_fail(b, call, "stat", path);
    if (rc == HANU_OK && offset >= (uint64_t)st.st_size)
        rc = bucket_fail(call, HANU_ERR_INVALID, "bucket: range at %llu is past the end of %s (%lld bytes)",
                         (unsigned long long)offset, key, (long long)st.st_size);
    if (rc == HANU_OK) {
        size_t n = (size_t)HANU_MIN((uint64_t)len, (uint64_t)st.st_size - offset);
        if (hanu_buf_reserve(out, n) != HANU_OK) rc = HANU_ERR_NOMEM;
        else if (hanu_pread_full(fd, out->data + out->len, n, (off_t)offset) != HANU_OK) rc = io_fail(b, call, "read", path);
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
    int rc = check_root(b, call);
    if (rc == HANU_OK) rc = object_path(key, path, sizeof path, call);
    if (rc != HANU_OK) return rc;
    int lock = lock_bucket(b, call);
    if (lock < 0) return lock;
    if (unlinkat(fb(b)->root_fd, path, 0) == 0) rc = sync_parent(b, path, call);
    else if (errno != ENOENT && errno != ENOTDIR) rc = io_fail(b, call, "delete", path);
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
static int walk(bucket *b, char *rel, size_t rel_len, const char *prefix, listing *l, bucket_call *call)
{
    int rfd = fb(b)->root_fd;
    int dfd = openat(rfd, rel_len ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        int rc = errno == ENOENT || errno == ENOTDIR ? HANU_OK : io_fail(b, call, "list folder", rel);
        if (dfd >= 0) close(dfd);
        return rc;
    }
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
        if (fstatat(rfd, rel, &st, 0) != 0) continue;   /* deleted meanwhile */
        if (S_ISDIR(st.st_mode)) {
            rel[len] = '/';
            rel[len + 1] = 0;
            rc = walk(b, rel, len + 1, prefix, l, call);
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
    int rc = walk(b, rel, 0, prefix, &l, call);
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

static void file_close(bucket *b)
{
    close(fb(b)->root_fd);
    free(b->backend);
}

static const bucket_ops file_ops = { file_put, file_get, file_head, file_delete, file_list_page, file_close, NULL };

/* An absolute path without "." or ".." components (which would make the root depend
   on symlinks met on the way, or on how a caller spelled it). */
static int check_root_path(const char *path, size_t n, bucket_call *call)
{
    if (path[0] != '/') return bucket_fail(call, HANU_ERR_INVALID, "bucket: a file URL is file:///ABSOLUTE/PATH");
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && path[j] != '/') j++;
        size_t len = j - i;
        if ((len == 1 && path[i] == '.') || (len == 2 && path[i] == '.' && path[i + 1] == '.'))
            return bucket_fail(call, HANU_ERR_INVALID, "bucket: file path %.*s has a \"%.*s\" component: spell the "
                               "bucket's folder without \".\" and \"..\"", (int)n, path, (int)len, path + i);
        i = j + 1;
    }
    return HANU_OK;
}

int bucket_file_open(bucket *b, const char *path, int create_root, char *err, size_t errcap)
{
    bucket_call call = { .err = err, .errcap = errcap };
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    int rc = check_root_path(path, n, &call);
    if (rc != HANU_OK) return rc;
    file_bucket *f = calloc(1, sizeof *f);
    if (!f) return HANU_ERR_NOMEM;
    if (n >= sizeof f->root) {
        free(f);
        return bucket_fail(&call, HANU_ERR_INVALID, "bucket: path too long");
    }
    memcpy(f->root, path, n);
    f->root[n] = 0;
    /* The root is created here or never: later requests create folders below it only. */
    struct stat st;
    if (create_root && stat(f->root, &st) != 0 && errno == ENOENT && hanu_mkdir_p(f->root) != HANU_OK)
        rc = bucket_fail(&call, HANU_ERR_IO, "bucket: create folder %s: %s", f->root, strerror(errno));
    f->root_fd = rc == HANU_OK ? open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (rc == HANU_OK && f->root_fd < 0)
        rc = bucket_fail(&call, errno == ENOENT ? HANU_ERR_NOT_FOUND : HANU_ERR_INVALID,
                         "bucket: bucket folder %s: %s", f->root,
                         errno == ENOENT ? "does not exist" : errno == ENOTDIR ? "not a folder" : strerror(errno));
    if (rc == HANU_OK && fstat(f->root_fd, &st) != 0)
        rc = bucket_fail(&call, HANU_ERR_IO, "bucket: stat %s: %s", f->root, strerror(errno));
    if (rc != HANU_OK) {
        if (f->root_fd >= 0) close(f->root_fd);
        free(f);
        return rc;
    }
    f->root_dev = st.st_dev;
    f->root_ino = st.st_ino;
    b->backend = f;
    b->ops = &file_ops;
    return HANU_OK;
}
