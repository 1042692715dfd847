/*
 * base: the bottom layer every module uses: one status enum, little-endian
 * load/store, checksums and hashes, whole-buffer file I/O, clocks and a
 * growable byte buffer. Nothing here knows about records, keys or sockets.
 */
#ifndef HANU_BASE_H
#define HANU_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "hanudb_status.h"   /* enum hanu_status, hanu_status_str: public */

/* ---- little-endian load/store (the on-disk and wire byte order) ---- */
static inline void hanu_put_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void hanu_put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void hanu_put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint16_t hanu_get_u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t hanu_get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t hanu_get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "HanuDB's formats are little-endian; this port needs byte swaps in base.h"
#endif

/* ---- checksums and hashes (XXH3) ---- */
/* 32-bit frame checksum: the low half of XXH3-64 of the bytes. */
uint32_t hanu_checksum32(const void *data, size_t len);
/* 64-bit hash for in-memory tables; seed lets tables differ. */
uint64_t hanu_hash64(const void *data, size_t len, uint64_t seed);

/* ---- file I/O: whole buffers or an error, EINTR handled ---- */
/* Returns 0, HANU_ERR_NOSPACE for ENOSPC/EDQUOT, else HANU_ERR_IO (errno set). */
int hanu_pwrite_full(int fd, const void *buf, size_t len, off_t off);
int hanu_write_full(int fd, const void *buf, size_t len);
/* Reads exactly len bytes; HANU_ERR_CORRUPT on a short read (end of file). */
int hanu_pread_full(int fd, void *buf, size_t len, off_t off);
/* fsync a directory so that entries created or renamed in it are durable. */
int hanu_fsync_dir(const char *path);
/* mkdir -p for one or two levels; 0 when it exists already. */
int hanu_mkdir_p(const char *path);
/* Replaces path with data atomically: path.tmp written, fdatasync'd, renamed over
 * path, the folder fsynced. After a crash path holds the old or the new bytes. */
int hanu_replace_file(const char *path, const void *data, size_t len);
/* True when the len bytes at p are all zero. */
int hanu_is_zero(const void *p, size_t len);

/* ---- threads ---- */
/* Makes the calling thread background work (Linux): SCHED_BATCH, so that its wake-ups do
 * not preempt the event loop (it still gets its fair share of a busy CPU, so its lag
 * stays bounded), then nice (0..19; 0 keeps the loop's weight). Any user may do both.
 * Returns 0, or -1 when either failed (errno). */
int hanu_thread_background(int nice);

/* ---- clocks ---- */
uint64_t hanu_now_ns(void);      /* CLOCK_MONOTONIC */
uint64_t hanu_wall_ms(void);     /* CLOCK_REALTIME, ms since the epoch */
/* RFC 3339 in UTC with milliseconds (2026-12-03T09:00:00.123Z), as restore --at reads it. */
void hanu_format_time_ms(uint64_t ms, char *out, size_t cap);

/* ---- growable byte buffer; owner frees with hanu_buf_free ---- */
typedef struct hanu_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} hanu_buf;

int hanu_buf_reserve(hanu_buf *b, size_t extra);   /* room for extra more bytes */
int hanu_buf_append(hanu_buf *b, const void *p, size_t n);
static inline void hanu_buf_reset(hanu_buf *b) { b->len = 0; }
void hanu_buf_free(hanu_buf *b);
/* Removes the first n bytes (n <= len), moving the rest down. */
void hanu_buf_consume(hanu_buf *b, size_t n);

/* Reads a whole file of at most max bytes into out (replacing its contents):
 * HANU_ERR_NOT_FOUND when absent, HANU_ERR_TOO_LARGE when bigger than max. */
int hanu_read_file(const char *path, size_t max, hanu_buf *out);

#define HANU_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HANU_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HANU_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
