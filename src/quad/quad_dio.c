/*
 * quad_dio.c: direct I/O of the facts kernel (QUAD_IO_DIRECT). Every read and
 * write of a store file goes through quad_pread / quad_pwrite; without the
 * flag they are plain pread / pwrite. With it the descriptor is O_DIRECT and
 * each transfer covers whole 4 KiB blocks with 4 KiB-aligned buffers (the
 * file format is unchanged; docs/QUAD.md, "Direct I/O"):
 *   - reads go through aligned bounce buffers covering the bytes asked for;
 *     reads of up to 64 KiB (headers, slots, recovery's frame by frame walk)
 *     through a 1 MiB read-ahead window, which every write that overlaps it
 *     empties (the window is filled and emptied under ra_mu, so a window read
 *     before a write completed never survives it);
 *   - writes rewrite the partial blocks at both ends: the bytes of the block
 *     before the write come from the handle's copy of the header block or of
 *     the last block a log write ended in (an append's first block is always
 *     that one), else from the disk; the end of the last block is padded with
 *     the bytes already there, zeros past the end of the file.
 * Writes inside the header block (slots, under hdr_mu) and at or past it (the
 * log, under log_mu) never share a block, so a sync's durable mark does not
 * wait for a frame being written.
 */
#include "quad/quad_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define QD_READ_WINDOW (1u << 20)   /* read-ahead window for small reads */
#define QD_SMALL_READ (64u << 10)   /* reads up to this size go through the window */
#define QD_WRITE_PIECE (4u << 20)   /* the largest transfer of one write through the bounce */

struct quad_dio {
    int fd;
    pthread_mutex_t hdr_mu;         /* writes inside block 0 */
    pthread_mutex_t log_mu;         /* writes at or past QD_BLOCK */
    uint8_t *hdr;                   /* block 0 as on disk, when hdr_ok (hdr_mu) */
    int hdr_ok;
    uint8_t *last;                  /* the block the last log write ended in (log_mu) */
    uint64_t last_off;
    int last_ok;
    uint8_t *wbuf;                  /* log write bounce (log_mu) */
    size_t wcap;
    _Atomic uint64_t size;          /* file size as far as this handle knows */
    pthread_mutex_t ra_mu;
    uint8_t *ra;                    /* read-ahead window: [ra_off, ra_off + ra_len) */
    uint64_t ra_off;
    size_t ra_len;
};

static uint64_t align_down(uint64_t v) { return v & ~(uint64_t)(QD_BLOCK - 1); }
static uint64_t align_up(uint64_t v) { return (v + QD_BLOCK - 1) & ~(uint64_t)(QD_BLOCK - 1); }

static void *aligned_buf(size_t len)
{
    void *p = NULL;
    return posix_memalign(&p, QD_BLOCK, len ? len : QD_BLOCK) == 0 ? p : NULL;
}

int quad_dio_pread_upto(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            *got = done;
            return HANU_ERR_IO;
        }
        if (n == 0) break;   /* the end of the file */
        done += (size_t)n;
        /* past the end of the file a direct read returns what there is; an
         * unaligned count means the file ended inside this block */
        if ((done & (QD_BLOCK - 1)) != 0) break;
    }
    *got = done;
    return 0;
}

/* Reads [off, off + len) through an aligned window; the file must hold it. */
static int read_window(quad_dio *d, uint8_t *abuf, uint64_t a, size_t alen, void *buf, size_t len,
                       uint64_t off)
{
    size_t got = 0;
    int rc = quad_dio_pread_upto(d->fd, abuf, alen, a, &got);
    if (rc) return rc;
    if (got < off - a + len) return HANU_ERR_CORRUPT;   /* as hanu_pread_full at the end of the file */
    memcpy(buf, abuf + (off - a), len);
    return 0;
}

static int dio_pread(quad_dio *d, void *buf, size_t len, uint64_t off)
{
    if (len == 0) return 0;
    uint64_t a = align_down(off), e = align_up(off + len);
    pthread_mutex_lock(&d->ra_mu);
    int hit = off >= d->ra_off && off + len <= d->ra_off + d->ra_len;
    if (!hit) pthread_mutex_unlock(&d->ra_mu);
    /* small reads, and larger ones inside the window (a frame body after its
     * header), go through the window */
    if (hit || len <= QD_SMALL_READ) {   /* then e - a < QD_READ_WINDOW */
        if (!hit) pthread_mutex_lock(&d->ra_mu);
        int rc = 0;
        if (!(off >= d->ra_off && off + len <= d->ra_off + d->ra_len)) {
            /* filled under ra_mu: a write that overlaps empties the window
             * only after its pwrite returned, so either this read saw it or
             * the window is emptied after it is installed */
            size_t got = 0;
            d->ra_len = 0;
            d->ra_off = a;
            rc = quad_dio_pread_upto(d->fd, d->ra, QD_READ_WINDOW, a, &got);
            if (rc == 0) d->ra_len = got;
            if (rc == 0 && got < off - a + len) rc = HANU_ERR_CORRUPT;
        }
        if (rc == 0) memcpy(buf, d->ra + (off - d->ra_off), len);
        pthread_mutex_unlock(&d->ra_mu);
        return rc;
    }
    uint8_t *abuf = aligned_buf(e - a);
    if (!abuf) return HANU_ERR_NOMEM;
    int rc = read_window(d, abuf, a, (size_t)(e - a), buf, len, off);
    free(abuf);
    return rc;
}

/* Loads block b as on disk into dst (aligned): from the copy of the last
 * block written, zeros past the end of the file, else a read. */
static int block_load(quad_dio *d, uint64_t b, uint8_t *dst)
{
    if (d->last_ok && d->last_off == b) { memcpy(dst, d->last, QD_BLOCK); return 0; }
    if (b >= atomic_load(&d->size)) { memset(dst, 0, QD_BLOCK); return 0; }
    size_t got = 0;
    int rc = quad_dio_pread_upto(d->fd, dst, QD_BLOCK, b, &got);
    if (rc == 0) memset(dst + got, 0, QD_BLOCK - got);
    return rc;
}

static void size_raise(quad_dio *d, uint64_t end)
{
    uint64_t s = atomic_load(&d->size);
    while (end > s && !atomic_compare_exchange_weak(&d->size, &s, end)) {}
}

/* After a failed write the bytes on disk are unknown: forget the copies and
 * learn the size again. */
static void write_failed(quad_dio *d, int header)
{
    struct stat st;
    if (header) d->hdr_ok = 0;
    else d->last_ok = 0;
    atomic_store(&d->size, fstat(d->fd, &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX);
}

/* A write inside block 0 (slots, the header): hdr_mu held. */
static int write_header(quad_dio *d, const void *buf, size_t len, uint64_t off)
{
    if (!d->hdr_ok && (off != 0 || len != QD_BLOCK)) {
        int rc = block_load(d, 0, d->hdr);
        if (rc) return rc;
    }
    memcpy(d->hdr + off, buf, len);
    int rc = hanu_pwrite_full(d->fd, d->hdr, QD_BLOCK, 0);
    if (rc) { write_failed(d, 1); return rc; }
    d->hdr_ok = 1;
    size_raise(d, QD_BLOCK);
    return 0;
}

/* A write at or past block 1 (frames, zeros): log_mu held. The file's bytes
 * [a, b) after the write are built piece by piece in wbuf and written. */
static int write_log(quad_dio *d, const uint8_t *buf, size_t len, uint64_t off)
{
    uint64_t end = off + len, a = align_down(off), b = align_up(end);
    size_t need = b - a < QD_WRITE_PIECE ? (size_t)(b - a) : QD_WRITE_PIECE;
    if (need > d->wcap) {
        uint8_t *w = aligned_buf(need);
        if (!w) return HANU_ERR_NOMEM;
        free(d->wbuf);
        d->wbuf = w;
        d->wcap = need;
    }
    for (uint64_t pos = a; pos < b;) {
        size_t n = b - pos < QD_WRITE_PIECE ? (size_t)(b - pos) : QD_WRITE_PIECE;
        int rc = 0;
        if (pos < off) rc = block_load(d, pos, d->wbuf);
        if (rc == 0 && pos + n > end && !(n == QD_BLOCK && pos < off))
            rc = block_load(d, pos + n - QD_BLOCK, d->wbuf + n - QD_BLOCK);
        if (rc) return rc;
        uint64_t from = pos > off ? pos : off, to = pos + n < end ? pos + n : end;
        memcpy(d->wbuf + (from - pos), buf + (from - off), (size_t)(to - from));
        rc = hanu_pwrite_full(d->fd, d->wbuf, n, (off_t)pos);
        if (rc) { write_failed(d, 0); return rc; }
        memcpy(d->last, d->wbuf + n - QD_BLOCK, QD_BLOCK);
        d->last_off = pos + n - QD_BLOCK;
        d->last_ok = 1;
        size_raise(d, pos + n);
        pos += n;
    }
    return 0;
}

static int dio_pwrite(quad_dio *d, const void *buf, size_t len, uint64_t off)
{
    if (len == 0) return 0;
    uint64_t a = align_down(off), b = align_up(off + len);
    int rc = 0;
    if (off < QD_BLOCK) {
        size_t k = off + len <= QD_BLOCK ? len : (size_t)(QD_BLOCK - off);
        pthread_mutex_lock(&d->hdr_mu);
        rc = write_header(d, buf, k, off);
        pthread_mutex_unlock(&d->hdr_mu);
        buf = (const uint8_t *)buf + k;
        len -= k;
        off += k;
    }
    if (rc == 0 && len > 0) {
        pthread_mutex_lock(&d->log_mu);
        rc = write_log(d, buf, len, off);
        pthread_mutex_unlock(&d->log_mu);
    }
    /* the read-ahead window must not keep what this write replaced (also
     * after a failure: part of it may have been written) */
    pthread_mutex_lock(&d->ra_mu);
    if (a < d->ra_off + d->ra_len && b > d->ra_off) d->ra_len = 0;
    pthread_mutex_unlock(&d->ra_mu);
    return rc;
}

int quad_pread(quad *q, void *buf, size_t len, uint64_t off)
{
    if (!q->dio) return hanu_pread_full(q->fd, buf, len, (off_t)off);
    return dio_pread(q->dio, buf, len, off);
}

int quad_pwrite(quad *q, const void *buf, size_t len, uint64_t off)
{
    if (!q->dio) return hanu_pwrite_full(q->fd, buf, len, (off_t)off);
    return dio_pwrite(q->dio, buf, len, off);
}

void quad_dio_close(quad *q)
{
    quad_dio *d = q->dio;
    if (!d) return;
    pthread_mutex_destroy(&d->hdr_mu);
    pthread_mutex_destroy(&d->log_mu);
    pthread_mutex_destroy(&d->ra_mu);
    free(d->hdr);
    free(d->last);
    free(d->wbuf);
    free(d->ra);
    free(d);
    q->dio = NULL;
}

int quad_dio_open(quad *q)
{
    int fl = fcntl(q->fd, F_GETFL);
    if (fl < 0) return HANU_ERR_IO;
    if (fcntl(q->fd, F_SETFL, fl | O_DIRECT) != 0) {
        int e = errno;
        quad_set_error("%s: QUAD_IO_DIRECT: the file system refuses O_DIRECT (%s); open without "
                       "the flag to use the page cache", q->path, strerror(e));
        return e == EINVAL || e == EOPNOTSUPP ? HANU_ERR_UNSUPPORTED : HANU_ERR_IO;
    }
#ifdef STATX_DIOALIGN
    /* blocks of 4 KiB must do: a device that needs more is refused here, not
     * at the first write */
    struct statx sx;
    if (statx(q->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
        (sx.stx_dio_offset_align > QD_BLOCK || sx.stx_dio_mem_align > QD_BLOCK ||
         (QD_BLOCK % (sx.stx_dio_offset_align ? sx.stx_dio_offset_align : 1)) != 0)) {
        quad_set_error("%s: QUAD_IO_DIRECT: the file system needs direct I/O aligned to %u bytes "
                       "(offsets) and %u (memory); this library aligns to %u",
                       q->path, sx.stx_dio_offset_align, sx.stx_dio_mem_align, QD_BLOCK);
        return HANU_ERR_UNSUPPORTED;
    }
#endif
    quad_dio *d = calloc(1, sizeof *d);
    if (!d) return HANU_ERR_NOMEM;
    q->dio = d;
    d->fd = q->fd;
    pthread_mutex_init(&d->hdr_mu, NULL);
    pthread_mutex_init(&d->log_mu, NULL);
    pthread_mutex_init(&d->ra_mu, NULL);
    d->hdr = aligned_buf(QD_BLOCK);
    d->last = aligned_buf(QD_BLOCK);
    d->ra = aligned_buf(QD_READ_WINDOW);
    if (!d->hdr || !d->last || !d->ra) return HANU_ERR_NOMEM;
    struct stat st;
    if (fstat(q->fd, &st) != 0) return HANU_ERR_IO;
    atomic_store(&d->size, (uint64_t)st.st_size);
    return 0;
}
