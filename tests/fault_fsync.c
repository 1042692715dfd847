/*
 * fault_fsync.c: an LD_PRELOAD library for the fsync-failure test. While the
 * file named by HANUDB_FAULT_FSYNC_TRIGGER exists, fdatasync and fsync fail
 * with EIO, as they do on a real disk error; otherwise they pass through.
 * While the file named by HANUDB_FAULT_FSYNC_HOLD exists, they wait (a disk
 * that is slow to answer: writes stay parked until the file is removed).
 * While the file named by HANUDB_FAULT_FSYNC_HOLD_MATCH_FILE exists, a sync of a
 * file whose path holds HANUDB_FAULT_FSYNC_HOLD_MATCH waits, and the first such
 * wait creates that file's name with ".waiting" appended (a test knows then that
 * a thread sits in that sync).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

static int fd_path(int fd, char *path, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, cap - 1);
    if (n < 0) return 0;
    path[n] = '\0';
    return 1;
}

static void hold_matching(int fd)
{
    const char *m = getenv("HANUDB_FAULT_FSYNC_HOLD_MATCH"), *f = getenv("HANUDB_FAULT_FSYNC_HOLD_MATCH_FILE");
    char path[512];
    if (!m || !f || access(f, F_OK) != 0 || !fd_path(fd, path, sizeof path) || !strstr(path, m)) return;
    char waiting[600];
    snprintf(waiting, sizeof waiting, "%s.waiting", f);
    FILE *w = fopen(waiting, "w");
    if (w) fclose(w);
    while (access(f, F_OK) == 0) usleep(1000);
}

static int triggered(void)
{
    const char *h = getenv("HANUDB_FAULT_FSYNC_HOLD");
    while (h && access(h, F_OK) == 0) usleep(1000);
    const char *t = getenv("HANUDB_FAULT_FSYNC_TRIGGER");
    return t && access(t, F_OK) == 0;
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    hold_matching(fd);
    if (triggered()) { errno = EIO; return -1; }
    return real(fd);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    hold_matching(fd);
    if (triggered()) { errno = EIO; return -1; }
    return real(fd);
}

/* pwrite to a log file (a name ending in ".log"): while the file named by
   HANUDB_FAULT_PWRITE_DELAY_TRIGGER exists it sleeps 300 ms first (the process
   can be killed in between); while HANUDB_FAULT_PWRITE_FAIL_TRIGGER exists it
   fails with EIO. */
static int log_fd(int fd)
{
    char path[512];
    if (!fd_path(fd, path, sizeof path)) return 0;
    size_t n = strlen(path);
    return n >= 4 && strcmp(path + n - 4, ".log") == 0;
}

static int trigger_on(const char *env)
{
    const char *t = getenv(env);
    return t && access(t, F_OK) == 0;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (trigger_on("HANUDB_FAULT_PWRITE_FAIL_TRIGGER") && log_fd(fd)) { errno = EIO; return -1; }
    if (trigger_on("HANUDB_FAULT_PWRITE_DELAY_TRIGGER") && log_fd(fd)) usleep(300000);
    return real(fd, buf, len, off);
}
