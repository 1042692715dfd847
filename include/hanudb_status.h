/*
 * hanudb_status.h: the status codes every HanuDB library function returns (0 is
 * success, every failure negative) and their names. Public, self-contained:
 * include/quad.h uses it, and so does every module inside.
 */
#ifndef HANUDB_STATUS_H
#define HANUDB_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: 0 is success, every failure is negative. Shared by all modules. */
enum hanu_status {
    HANU_OK = 0,
    HANU_ERR_IO = -1,          /* read/write/open failed (errno kept by caller) */
    HANU_ERR_NOSPACE = -2,     /* ENOSPC / EDQUOT: this write failed, nothing written */
    HANU_ERR_CORRUPT = -3,     /* on-disk bytes fail a checksum or a format rule */
    HANU_ERR_NOT_FOUND = -4,
    HANU_ERR_EXISTS = -5,
    HANU_ERR_MISMATCH = -6,    /* compare-and-set token did not match */
    HANU_ERR_INVALID = -7,     /* caller's input is malformed */
    HANU_ERR_TOO_LARGE = -8,   /* caller's input exceeds a configured limit */
    HANU_ERR_NOMEM = -9,
    HANU_ERR_STOPPED = -10,    /* the store refuses writes after a failed fdatasync */
    HANU_ERR_UNSUPPORTED = -11,
    HANU_ERR_BUSY = -12,       /* resource held by someone else (lock, running job) */
    HANU_ERR_FENCED = -13,     /* another writer extended the bucket's segment chain: stop writing */
    HANU_ERR_GONE = -14,       /* asked for a position the store no longer keeps (reclaimed) */
};

/* A short, static, human-readable name for a status ("no space left", ...). */
const char *hanu_status_str(int status);

#ifdef __cplusplus
}
#endif

#endif
