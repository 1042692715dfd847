/*
 * base.c: status names, checksums, file helpers, clocks and the byte buffer
 * declared in base.h. Relies on libxxhash for XXH3.
 */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

const char *hanu_status_str(int status)
{
    switch (status) {
    case HANU_OK: return "ok";
    case HANU_ERR_IO: return "I/O error";
    case HANU_ERR_NOSPACE: return "no space left on device";
    case HANU_ERR_CORRUPT: return "corrupt data";
    case HANU_ERR_NOT_FOUND: return "not found";
    case HANU_ERR_EXISTS: return "already exists";
    case HANU_ERR_MISMATCH: return "token mismatch";
    case HANU_ERR_INVALID: return "invalid request";
    case HANU_ERR_TOO_LARGE: return "too large";
    case HANU_ERR_NOMEM: return "out of memory";
    case HANU_ERR_STOPPED: return "store stopped after a failed fdatasync; restart required";
    case HANU_ERR_UNSUPPORTED: return "not supported";
    case HANU_ERR_BUSY: return "busy";
    case HANU_ERR_FENCED: return "fenced: another writer extended the bucket's chain";
    case HANU_ERR_GONE: return "gone: no longer kept";
    default: return "unknown error";
    }
}

uint32_t hanu_checksum32(const void *data, size_t len)
{
    return (uint32_t)XXH3_64bits(data, len);
}

uint64_t hanu_hash64(const void *data, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, len, seed);
}

static int io_error_status(void)
{
    return (errno == ENOSPC || errno == EDQUOT) ? HANU_ERR_NOSPACE : HANU_ERR_IO;
}

int hanu_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return io_error_status();
        }
        if (n == 0) { errno = EIO; return HANU_ERR_IO; }
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return HANU_OK;
}

int hanu_write_full(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return io_error_status();
        }
        p += n;
        len -= (size_t)n;
    }
    return HANU_OK;
}

int hanu_pread_full(int fd, void *buf, size_t len, off_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return HANU_ERR_IO;
        }
        if (n == 0) return HANU_ERR_CORRUPT;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return HANU_OK;
}

int hanu_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return HANU_ERR_IO;
    int rc = fsync(fd) == 0 ? HANU_OK : HANU_ERR_IO;
    close(fd);
    return rc;
}

int hanu_mkdir_p(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) return HANU_ERR_INVALID;
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == '\0') {
            char c = tmp[i];
            tmp[i] = '\0';
            if (mkdir(tmp, 0755) == 0) {
                /* The new directory's name is durable only once its parent is synced. */
                char *slash = strrchr(tmp, '/');
                int rc;
                if (!slash) rc = hanu_fsync_dir(".");
                else if (slash == tmp) rc = hanu_fsync_dir("/");
                else { *slash = '\0'; rc = hanu_fsync_dir(tmp); *slash = '/'; }
                if (rc) return rc;
            } else if (errno != EEXIST) {
                return HANU_ERR_IO;
            }
            tmp[i] = c;
        }
    }
    return HANU_OK;
}

int hanu_replace_file(const char *path, const void *data, size_t len)
{
    char tmp[4096], dir[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return HANU_ERR_INVALID;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return (errno == ENOSPC || errno == EDQUOT) ? HANU_ERR_NOSPACE : HANU_ERR_IO;
    int rc = hanu_write_full(fd, data, len);
    if (rc == HANU_OK && fdatasync(fd) != 0) rc = HANU_ERR_IO;
    if (close(fd) != 0 && rc == HANU_OK) rc = HANU_ERR_IO;
    if (rc == HANU_OK && rename(tmp, path) != 0) rc = HANU_ERR_IO;
    if (rc == HANU_OK) rc = hanu_fsync_dir(dir);
    if (rc) unlink(tmp);
    return rc;
}

int hanu_read_file(const char *path, size_t max, hanu_buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? HANU_ERR_NOT_FOUND : HANU_ERR_IO;
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? HANU_OK : HANU_ERR_IO;
    if (rc == HANU_OK && (uint64_t)st.st_size > max) rc = HANU_ERR_TOO_LARGE;
    hanu_buf_reset(out);
    if (rc == HANU_OK) rc = hanu_buf_reserve(out, (size_t)st.st_size);
    if (rc == HANU_OK) rc = hanu_pread_full(fd, out->data, (size_t)st.st_size, 0);
    if (rc == HANU_OK) out->len = (size_t)st.st_size;
    close(fd);
    return rc;
}

int hanu_is_zero(const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        if (v) return 0;
        b += 8;
        len -= 8;
    }
    while (len--) if (*b++) return 0;
    return 1;
}

int hanu_thread_background(int nice)
{
    struct sched_param sp = { .sched_priority = 0 };
    int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    if (rc != 0) errno = rc;
    if (nice > 0 && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice) != 0) rc = -1;
    return rc ? -1 : 0;
}

uint64_t hanu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hanu_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

void hanu_format_time_ms(uint64_t ms, char *out, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%03uZ", day, (unsigned)(ms % 1000));
}

int hanu_buf_reserve(hanu_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra) return HANU_OK;
    size_t need = b->len + extra;
    if (need < b->len) return HANU_ERR_NOMEM;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) return HANU_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return HANU_OK;
}

int hanu_buf_append(hanu_buf *b, const void *p, size_t n)
{
    int rc = hanu_buf_reserve(b, n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return HANU_OK;
}

void hanu_buf_free(hanu_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void hanu_buf_consume(hanu_buf *b, size_t n)
{
    if (n >= b->len) { b->len = 0; return; }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}
