/*
 * crash_record.c: an LD_PRELOAD library that records, in one ordered trace,
 * every file operation a process makes under one directory and every byte it
 * sends on a TCP socket. tests/crash/crash_check.c replays the trace to build
 * the disk states a crash could leave (docs/TESTING.md).
 *
 *   HANUDB_CRASH_DIR    absolute path of the data directory to record
 *   HANUDB_CRASH_TRACE  file the trace is appended to
 *
 * Trace record: u32 type | u32 payload length | payload (crash_trace.h).
 * Ordering: a file operation is recorded after it returns (its effect exists
 * from then on), a socket send before it starts (the answer may have left from
 * then on). So whatever a state shows as sent before an operation really left
 * before it, and a thread that acts on a returned fdatasync acts after its
 * record: the trace never claims an order that did not happen.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "crash_trace.h"

#define MAX_FDS 65536

typedef struct tracked {
    uint8_t on;        /* fd refers to a file or directory under the data dir */
    uint8_t is_dir;
    uint64_t ino;
    char *rel;         /* path relative to the data dir ("" for the dir itself) */
} tracked;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static tracked fds[MAX_FDS];
static int trace_fd = -1;
static char root[PATH_MAX];
static size_t root_len;
static int ready;

#define REAL(ret, name, ...) \
    static ret (*real_##name)(__VA_ARGS__); \
    if (!real_##name) real_##name = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

static ssize_t raw_write(int fd, const void *p, size_t n)
{
    static ssize_t (*w)(int, const void *, size_t);
    if (!w) w = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    return w(fd, p, n);
}

static void setup(void)
{
    if (ready) return;
    const char *d = getenv("HANUDB_CRASH_DIR"), *t = getenv("HANUDB_CRASH_TRACE");
    ready = 1;
    if (!d || !t || strlen(d) >= sizeof root) return;
    static int (*o)(const char *, int, ...);
    if (!o) o = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    trace_fd = o(t, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    strcpy(root, d);
    root_len = strlen(root);
    while (root_len > 1 && root[root_len - 1] == '/') root[--root_len] = 0;
}

/* Appends one record: the caller holds mu. Parts are (pointer, length) pairs. */
static void emit(uint32_t type, int nparts, ...)
{
    uint8_t buf[1 << 16];
    struct iovec iov[8];
    uint32_t hdr[2] = { type, 0 };
    va_list ap;
    va_start(ap, nparts);
    iov[0].iov_base = hdr;
    iov[0].iov_len = sizeof hdr;
    for (int i = 0; i < nparts && i < 7; i++) {
        iov[i + 1].iov_base = va_arg(ap, void *);
        iov[i + 1].iov_len = va_arg(ap, size_t);
        hdr[1] += (uint32_t)iov[i + 1].iov_len;
    }
    va_end(ap);
    /* One write per record keeps records whole even if the process dies. */
    size_t total = sizeof hdr + hdr[1];
    uint8_t *p = total <= sizeof buf ? buf : malloc(total);
    if (!p) return;
    size_t at = 0;
    for (int i = 0; i <= nparts && i < 8; i++) {
        memcpy(p + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    for (size_t done = 0; done < total;) {
        ssize_t n = raw_write(trace_fd, p + done, total - done);
        if (n <= 0) break;
        done += (size_t)n;
    }
    if (p != buf) free(p);
}

/* Path relative to the data dir, or NULL when outside it. dirfd-relative
   paths are resolved through /proc/self/fd. */
static const char *rel_path(int dirfd, const char *path, char *tmp, size_t cap)
{
    char abs[2 * PATH_MAX + 2];
    if (path[0] == '/') snprintf(abs, sizeof abs, "%s", path);
    else {
        char dir[PATH_MAX], link[64];
        ssize_t n;
        if (dirfd == AT_FDCWD) { if (!getcwd(dir, sizeof dir)) return NULL; n = (ssize_t)strlen(dir); }
        else {
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            n = readlink(link, dir, sizeof dir - 1);
            if (n < 0) return NULL;
            dir[n] = 0;
        }
        snprintf(abs, sizeof abs, "%s/%s", dir, path);
    }
    if (strncmp(abs, root, root_len) != 0) return NULL;
    if (abs[root_len] == 0) { tmp[0] = 0; return tmp; }
    if (abs[root_len] != '/') return NULL;
    snprintf(tmp, cap, "%s", abs + root_len + 1);
    return tmp;
}

static void note_open(int dirfd, const char *path, int flags, int fd, int existed)
{
    char tmp[PATH_MAX];
    if (fd < 0 || fd >= MAX_FDS || trace_fd < 0) return;
    const char *rel = rel_path(dirfd, path, tmp, sizeof tmp);
    if (!rel) return;
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    tracked *t = &fds[fd];
    free(t->rel);
    t->on = 1;
    t->is_dir = S_ISDIR(st.st_mode);
    t->ino = (uint64_t)st.st_ino;
    t->rel = strdup(rel);
    if (t->is_dir) return;
    crash_rec_open r = { .ino = t->ino, .created = !existed, .truncated = !!(flags & O_TRUNC) };
    emit(CRASH_OPEN, 2, &r, sizeof r, rel, strlen(rel));
}

static int do_open(int dirfd, const char *path, int flags, mode_t mode)
{
    REAL(int, openat, int, const char *, int, ...);
    setup();
    int existed = 1;
    if ((flags & O_CREAT) && trace_fd >= 0) {
        struct stat st;
        existed = fstatat(dirfd, path, &st, 0) == 0;
    }
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= 0 && trace_fd >= 0) {
        pthread_mutex_lock(&mu);
        note_open(dirfd, path, flags, fd, existed);
        pthread_mutex_unlock(&mu);
    }
    return fd;
}

#define MODE_ARG(flags) \
    mode_t mode = 0; \
    if ((flags) & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }

int open(const char *path, int flags, ...) { MODE_ARG(flags); return do_open(AT_FDCWD, path, flags, mode); }
int open64(const char *path, int flags, ...) { MODE_ARG(flags); return do_open(AT_FDCWD, path, flags, mode); }
int openat(int d, const char *path, int flags, ...) { MODE_ARG(flags); return do_open(d, path, flags, mode); }
int openat64(int d, const char *path, int flags, ...) { MODE_ARG(flags); return do_open(d, path, flags, mode); }
int creat(const char *path, mode_t mode) { return do_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode); }

int close(int fd)
{
    REAL(int, close, int);
    if (fd >= 0 && fd < MAX_FDS && fds[fd].on) {
        pthread_mutex_lock(&mu);
        fds[fd].on = 0;
        free(fds[fd].rel);
        fds[fd].rel = NULL;
        pthread_mutex_unlock(&mu);
    }
    return real_close(fd);
}

static int is_tracked(int fd) { return fd >= 0 && fd < MAX_FDS && fds[fd].on; }

/* Sends: recorded before the call, with the peer's port to name the connection.
   Reads (type CRASH_RECV, n bytes): after the call, when the request is in. */
static void note_sock(uint32_t type, int fd, const struct iovec *iov, int n);
static void note_send(int fd, const struct iovec *iov, int n) { note_sock(CRASH_SEND, fd, iov, n); }

static void note_recv(int fd, const struct iovec *iov, int cnt, ssize_t n)
{
    struct iovec v[64];
    int k = 0;
    for (; k < cnt && k < 64 && n > 0; k++) {
        v[k].iov_base = iov[k].iov_base;
        v[k].iov_len = iov[k].iov_len < (size_t)n ? iov[k].iov_len : (size_t)n;
        n -= (ssize_t)v[k].iov_len;
    }
    if (k) note_sock(CRASH_RECV, fd, v, k);
}

static void note_sock(uint32_t type, int fd, const struct iovec *iov, int n)
{
    if (trace_fd < 0 || fd < 0) return;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) return;
    uint16_t port;
    if (ss.ss_family == AF_INET) port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    else if (ss.ss_family == AF_INET6) port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else return;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    uint8_t *b = malloc(total ? total : 1);
    if (!b) return;
    size_t at = 0;
    for (int i = 0; i < n; i++) { memcpy(b + at, iov[i].iov_base, iov[i].iov_len); at += iov[i].iov_len; }
    crash_rec_send r = { .port = port };
    pthread_mutex_lock(&mu);
    emit(type, 2, &r, sizeof r, b, total);
    pthread_mutex_unlock(&mu);
    free(b);
}

static void note_write(int fd, const void *buf, ssize_t n, uint64_t off)
{
    if (n <= 0) return;
    pthread_mutex_lock(&mu);
    if (is_tracked(fd)) {
        crash_rec_write r = { .ino = fds[fd].ino, .off = off };
        emit(CRASH_WRITE, 2, &r, sizeof r, buf, (size_t)n);
    }
    pthread_mutex_unlock(&mu);
}

static void note_writev(int fd, const struct iovec *iov, int cnt, ssize_t n, uint64_t off)
{
    for (int i = 0; i < cnt && n > 0; i++) {
        size_t l = iov[i].iov_len < (size_t)n ? iov[i].iov_len : (size_t)n;
        note_write(fd, iov[i].iov_base, (ssize_t)l, off);
        off += l;
        n -= (ssize_t)l;
    }
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
    ssize_t n = real_pwrite(fd, buf, len, off);
    if (is_tracked(fd)) note_write(fd, buf, n, (uint64_t)off);
    return n;
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) { return pwrite(fd, buf, len, off); }

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t);
    ssize_t n = real_pwritev(fd, iov, cnt, off);
    if (is_tracked(fd)) note_writev(fd, iov, cnt, n, (uint64_t)off);
    return n;
}
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off) { return pwritev(fd, iov, cnt, off); }

static int is_socket(int fd)
{
    struct stat st;
    return fd > 2 && !is_tracked(fd) && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    REAL(ssize_t, write, int, const void *, size_t);
    setup();
    if (fd == trace_fd) return real_write(fd, buf, len);
    if (is_tracked(fd)) {
        off_t off = lseek(fd, 0, SEEK_CUR);
        ssize_t n = real_write(fd, buf, len);
        note_write(fd, buf, n, (uint64_t)off);
        return n;
    }
    if (trace_fd >= 0 && is_socket(fd)) {
        struct iovec v = { (void *)buf, len };
        note_send(fd, &v, 1);
    }
    return real_write(fd, buf, len);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    REAL(ssize_t, writev, int, const struct iovec *, int);
    setup();
    if (is_tracked(fd)) {
        off_t off = lseek(fd, 0, SEEK_CUR);
        ssize_t n = real_writev(fd, iov, cnt);
        note_writev(fd, iov, cnt, n, (uint64_t)off);
        return n;
    }
    if (trace_fd >= 0 && is_socket(fd)) note_send(fd, iov, cnt);
    return real_writev(fd, iov, cnt);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    REAL(ssize_t, send, int, const void *, size_t, int);
    setup();
    struct iovec v = { (void *)buf, len };
    if (trace_fd >= 0) note_send(fd, &v, 1);
    return real_send(fd, buf, len, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *a, socklen_t al)
{
    REAL(ssize_t, sendto, int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    setup();
    struct iovec v = { (void *)buf, len };
    if (trace_fd >= 0) note_send(fd, &v, 1);
    return real_sendto(fd, buf, len, flags, a, al);
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    REAL(ssize_t, sendmsg, int, const struct msghdr *, int);
    setup();
    if (trace_fd >= 0) note_send(fd, m->msg_iov, (int)m->msg_iovlen);
    return real_sendmsg(fd, m, flags);
}

static int note_sync(int fd, int rc, uint32_t datasync)
{
    if (rc != 0 || !is_tracked(fd)) return rc;
    pthread_mutex_lock(&mu);
    if (is_tracked(fd)) {
        tracked *t = &fds[fd];
        crash_rec_sync r = { .ino = t->ino, .is_dir = t->is_dir, .datasync = datasync };
        emit(CRASH_SYNC, 2, &r, sizeof r, t->rel, strlen(t->rel));
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int fsync(int fd) { REAL(int, fsync, int); return note_sync(fd, real_fsync(fd), 0); }
int fdatasync(int fd) { REAL(int, fdatasync, int); return note_sync(fd, real_fdatasync(fd), 1); }

int sync_file_range(int fd, off_t off, off_t n, unsigned int flags)
{
    REAL(int, sync_file_range, int, off_t, off_t, unsigned int);
    /* Not a durability point (no metadata, no cache flush): recorded as nothing. */
    return real_sync_file_range(fd, off, n, flags);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    REAL(int, fallocate, int, int, off_t, off_t);
    int rc = real_fallocate(fd, mode, off, len);
    if (rc == 0 && is_tracked(fd)) {
        pthread_mutex_lock(&mu);
        crash_rec_falloc r = { .ino = fds[fd].ino, .mode = (uint32_t)mode, .off = (uint64_t)off, .len = (uint64_t)len };
        emit(CRASH_FALLOC, 1, &r, sizeof r);
        pthread_mutex_unlock(&mu);
    }
    return rc;
}
int fallocate64(int fd, int mode, off_t off, off_t len) { return fallocate(fd, mode, off, len); }
int posix_fallocate(int fd, off_t off, off_t len) { return fallocate(fd, 0, off, len) == 0 ? 0 : errno; }

int ftruncate(int fd, off_t len)
{
    REAL(int, ftruncate, int, off_t);
    int rc = real_ftruncate(fd, len);
    if (rc == 0 && is_tracked(fd)) {
        pthread_mutex_lock(&mu);
        crash_rec_trunc r = { .ino = fds[fd].ino, .len = (uint64_t)len };
        emit(CRASH_TRUNC, 1, &r, sizeof r);
        pthread_mutex_unlock(&mu);
    }
    return rc;
}
int ftruncate64(int fd, off_t len) { return ftruncate(fd, len); }

static void note_path_op(uint32_t type, int d1, const char *p1, int d2, const char *p2)
{
    char t1[PATH_MAX], t2[PATH_MAX];
    setup();
    if (trace_fd < 0) return;
    const char *r1 = rel_path(d1, p1, t1, sizeof t1);
    const char *r2 = p2 ? rel_path(d2, p2, t2, sizeof t2) : NULL;
    if (!r1 && !r2) return;
    uint8_t zero = 0;
    pthread_mutex_lock(&mu);
    if (p2) emit(type, 4, r1 ? r1 : "", strlen(r1 ? r1 : ""), &zero, (size_t)1, r2 ? r2 : "", strlen(r2 ? r2 : ""),
                 &zero, (size_t)0);
    else emit(type, 1, r1, strlen(r1));
    pthread_mutex_unlock(&mu);
}

int rename(const char *a, const char *b)
{
    REAL(int, rename, const char *, const char *);
    int rc = real_rename(a, b);
    if (rc == 0) note_path_op(CRASH_RENAME, AT_FDCWD, a, AT_FDCWD, b);
    return rc;
}

int renameat(int da, const char *a, int db, const char *b)
{
    REAL(int, renameat, int, const char *, int, const char *);
    int rc = real_renameat(da, a, db, b);
    if (rc == 0) note_path_op(CRASH_RENAME, da, a, db, b);
    return rc;
}

int renameat2(int da, const char *a, int db, const char *b, unsigned int flags)
{
    REAL(int, renameat2, int, const char *, int, const char *, unsigned int);
    int rc = real_renameat2(da, a, db, b, flags);
    if (rc == 0) note_path_op(CRASH_RENAME, da, a, db, b);
    return rc;
}

int unlink(const char *p)
{
    REAL(int, unlink, const char *);
    int rc = real_unlink(p);
    if (rc == 0) note_path_op(CRASH_UNLINK, AT_FDCWD, p, 0, NULL);
    return rc;
}

int unlinkat(int d, const char *p, int flags)
{
    REAL(int, unlinkat, int, const char *, int);
    int rc = real_unlinkat(d, p, flags);
    if (rc == 0) note_path_op((flags & AT_REMOVEDIR) ? CRASH_RMDIR : CRASH_UNLINK, d, p, 0, NULL);
    return rc;
}

int rmdir(const char *p)
{
    REAL(int, rmdir, const char *);
    int rc = real_rmdir(p);
    if (rc == 0) note_path_op(CRASH_RMDIR, AT_FDCWD, p, 0, NULL);
    return rc;
}

int mkdir(const char *p, mode_t m)
{
    REAL(int, mkdir, const char *, mode_t);
    int rc = real_mkdir(p, m);
    if (rc == 0) note_path_op(CRASH_MKDIR, AT_FDCWD, p, 0, NULL);
    return rc;
}

int mkdirat(int d, const char *p, mode_t m)
{
    REAL(int, mkdirat, int, const char *, mode_t);
    int rc = real_mkdirat(d, p, m);
    if (rc == 0) note_path_op(CRASH_MKDIR, d, p, 0, NULL);
    return rc;
}

/* ---- reads from sockets: when each request had reached the server ---- */

ssize_t read(int fd, void *buf, size_t len)
{
    REAL(ssize_t, read, int, void *, size_t);
    setup();
    ssize_t n = real_read(fd, buf, len);
    if (n > 0 && trace_fd >= 0 && is_socket(fd)) {
        struct iovec v = { buf, len };
        note_recv(fd, &v, 1, n);
    }
    return n;
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    REAL(ssize_t, readv, int, const struct iovec *, int);
    setup();
    ssize_t n = real_readv(fd, iov, cnt);
    if (n > 0 && trace_fd >= 0 && is_socket(fd)) note_recv(fd, iov, cnt, n);
    return n;
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    REAL(ssize_t, recv, int, void *, size_t, int);
    setup();
    ssize_t n = real_recv(fd, buf, len, flags);
    if (n > 0 && trace_fd >= 0 && !(flags & MSG_PEEK)) {
        struct iovec v = { buf, len };
        note_recv(fd, &v, 1, n);
    }
    return n;
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *a, socklen_t *al)
{
    REAL(ssize_t, recvfrom, int, void *, size_t, int, struct sockaddr *, socklen_t *);
    setup();
    ssize_t n = real_recvfrom(fd, buf, len, flags, a, al);
    if (n > 0 && trace_fd >= 0 && !(flags & MSG_PEEK)) {
        struct iovec v = { buf, len };
        note_recv(fd, &v, 1, n);
    }
    return n;
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    REAL(ssize_t, recvmsg, int, struct msghdr *, int);
    setup();
    ssize_t n = real_recvmsg(fd, m, flags);
    if (n > 0 && trace_fd >= 0 && !(flags & MSG_PEEK)) note_recv(fd, m->msg_iov, (int)m->msg_iovlen, n);
    return n;
}
