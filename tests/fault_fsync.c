/*
 * fault_fsync.c: an LD_PRELOAD library for the fsync-failure test. While the
 * file named by HANUDB_FAULT_FSYNC_TRIGGER exists, fdatasync and fsync fail
 * with EIO, as they do on a real disk error; otherwise they pass through.
 * While the file named by HANUDB_FAULT_FSYNC_HOLD exists, they wait (a disk
 * that is slow to answer: writes stay parked until the file is removed).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

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
    if (triggered()) { errno = EIO; return -1; }
    return real(fd);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (triggered()) { errno = EIO; return -1; }
    return real(fd);
}
