/*
 * crash_trace.h: the trace written by crash_record.c and read by crash_check.c.
 * A trace is a sequence of records: u32 type | u32 payload length | payload,
 * in the order the operations happened in the recorded process. Paths are
 * relative to the recorded data directory; files are named by inode number
 * so that writes follow a file across renames.
 */
#ifndef HANU_CRASH_TRACE_H
#define HANU_CRASH_TRACE_H

#include <stdint.h>

enum crash_rec_type {
    CRASH_OPEN = 1,    /* crash_rec_open, then the path */
    CRASH_WRITE = 2,   /* crash_rec_write, then the bytes written */
    CRASH_SYNC = 3,    /* crash_rec_sync, then the path (a directory's for a directory fsync) */
    CRASH_FALLOC = 4,  /* crash_rec_falloc */
    CRASH_TRUNC = 5,   /* crash_rec_trunc */
    CRASH_RENAME = 6,  /* old path, a 0 byte, new path */
    CRASH_UNLINK = 7,  /* path */
    CRASH_MKDIR = 8,   /* path */
    CRASH_RMDIR = 9,   /* path */
    CRASH_SEND = 10,   /* crash_rec_send, then the bytes sent on the socket */
    CRASH_RECV = 11,   /* crash_rec_send, then the bytes read from the socket */
};

typedef struct crash_rec_open { uint64_t ino; uint8_t created, truncated, pad[6]; } crash_rec_open;
typedef struct crash_rec_write { uint64_t ino, off; } crash_rec_write;
typedef struct crash_rec_sync { uint64_t ino; uint32_t is_dir, datasync; } crash_rec_sync;
typedef struct crash_rec_falloc { uint64_t ino; uint32_t mode, pad; uint64_t off, len; } crash_rec_falloc;
typedef struct crash_rec_trunc { uint64_t ino, len; } crash_rec_trunc;
typedef struct crash_rec_send { uint16_t port, pad[3]; } crash_rec_send;

#endif
