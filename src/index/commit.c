/*
 * The index's small files: deletion lists (one per segment and generation,
 * written once) and the commit (DIR/COMMIT, replaced atomically), which names
 * the live segments, their deletion generations and the txn they cover.
 *
 *   deletion list  "HANUDEL\0" | u32 version | u32 count | u64 segment |
 *                  u32 generation | u8 code | 3 padding | u64 base |
 *                  codec payload of the ordinal gaps | u64 hash64 of all before
 *   commit         "HANUIDXC" | u32 version | u32 segments | u64 index_txn |
 *                  u64 next_file | 24 bytes per segment (u64 id, u32 db,
 *                  u32 docs, u32 deleted, u32 deletion generation) | u64 hash64
 */
#include "index/index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DEL_MAGIC "HANUDEL\0"
#define COMMIT_MAGIC "HANUIDXC"
#define FILES_VERSION 1
#define DEL_HEADER 40
#define COMMIT_HEADER 32
#define COMMIT_ENTRY 24

static int corrupt(char *err, size_t cap, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return HANU_ERR_CORRUPT;
}

static int seal_and_write(hanu_buf *b, const char *path, int replace)
{
    uint8_t sum[8];
    hanu_put_u64(sum, hanu_hash64(b->data, b->len, 0));
    int rc = hanu_buf_append(b, sum, 8);
    if (rc) return rc;
    if (replace) return hanu_replace_file(path, b->data, b->len);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return errno == EEXIST ? HANU_ERR_EXISTS : errno == ENOSPC ? HANU_ERR_NOSPACE : HANU_ERR_IO;
    rc = hanu_write_full(fd, b->data, b->len);
    if (rc == HANU_OK && fdatasync(fd) != 0) rc = HANU_ERR_IO;
    if (close(fd) != 0 && rc == HANU_OK) rc = HANU_ERR_IO;
    if (rc) unlink(path);
    return rc;
}

/* Reads path and checks its trailing hash; len excludes the hash. */
static int read_sealed(const char *path, size_t max, hanu_buf *b, char *err, size_t cap)
{
    int rc = hanu_read_file(path, max, b);
    if (rc == HANU_ERR_TOO_LARGE) return corrupt(err, cap, "%s: larger than %zu bytes", path, max);
    if (rc) return rc;
    if (b->len < 8 || hanu_get_u64(b->data + b->len - 8) != hanu_hash64(b->data, b->len - 8, 0))
        return corrupt(err, cap, "%s: checksum mismatch", path);
    b->len -= 8;
    return HANU_OK;
}

int index_deletes_write(const char *path, uint64_t segment, uint32_t generation,
                        const uint32_t *ords, uint32_t n)
{
    uint64_t *gaps = malloc((size_t)(n ? n : 1) * sizeof *gaps);
    if (!gaps) return HANU_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        if (i && ords[i] <= ords[i - 1]) {
            free(gaps);
            return HANU_ERR_INVALID;
        }
        gaps[i] = i ? ords[i] - ords[i - 1] - 1 : ords[0];
    }
    codec_desc d = n ? codec_plan(gaps, n, 1) : (codec_desc){ CODEC_CONST, 0 };
    size_t payload = codec_payload_size(d.code, n);
    hanu_buf b = { 0 };
    int rc = hanu_buf_reserve(&b, DEL_HEADER + payload + CODEC_SLACK + 8);
    if (rc == HANU_OK) {
        memset(b.data, 0, DEL_HEADER);
        memcpy(b.data, DEL_MAGIC, 8);
        hanu_put_u32(b.data + 8, FILES_VERSION);
        hanu_put_u32(b.data + 12, n);
        hanu_put_u64(b.data + 16, segment);
        hanu_put_u32(b.data + 24, generation);
        b.data[28] = d.code;
        hanu_put_u64(b.data + 32, d.base);
        if (n) codec_pack(d, gaps, n, 1, b.data + DEL_HEADER);
        b.len = DEL_HEADER + payload;
        rc = seal_and_write(&b, path, 0);
    }
    free(gaps);
    hanu_buf_free(&b);
    return rc;
}

int index_deletes_read(const char *path, uint64_t segment, uint32_t generation, uint32_t max_ord,
                       uint32_t **ords, uint32_t *n, char *err, size_t errcap)
{
    *ords = NULL;
    *n = 0;
    hanu_buf b = { 0 };
    size_t max = DEL_HEADER + (size_t)INDEX_SEGMENT_MAX_DOCS * 8 + 8;
    int rc = read_sealed(path, max, &b, err, errcap);
    if (rc == HANU_OK && (b.len < DEL_HEADER || memcmp(b.data, DEL_MAGIC, 8) != 0 ||
                          hanu_get_u32(b.data + 8) != FILES_VERSION))
        rc = corrupt(err, errcap, "%s: not a deletion list", path);
    uint32_t count = 0;
    codec_desc d = { 0, 0 };
    if (rc == HANU_OK) {
        count = hanu_get_u32(b.data + 12);
        d = (codec_desc){ b.data[28], hanu_get_u64(b.data + 32) };
        if (hanu_get_u64(b.data + 16) != segment || hanu_get_u32(b.data + 24) != generation)
            rc = corrupt(err, errcap, "%s: belongs to another segment or generation", path);
        else if (count > max_ord || !codec_code_valid(d.code) ||
                 codec_payload_size(d.code, count) != b.len - DEL_HEADER)
            rc = corrupt(err, errcap, "%s: bad count or encoding", path);
    }
    uint64_t *gaps = NULL;
    uint32_t *out = NULL;
    if (rc == HANU_OK && count) {
        gaps = malloc((size_t)count * sizeof *gaps);
        out = malloc((size_t)count * sizeof *out);
        rc = gaps && out ? hanu_buf_reserve(&b, CODEC_SLACK) : HANU_ERR_NOMEM;
    }
    if (rc == HANU_OK && count) {
        codec_unpack(d, b.data + DEL_HEADER, 0, count, gaps, 1);
        uint64_t at = 0;
        for (uint32_t i = 0; i < count && rc == HANU_OK; i++) {
            at += gaps[i] + (i ? 1 : 0);
            if (gaps[i] >= max_ord || at >= max_ord) rc = corrupt(err, errcap, "%s: ordinal out of range", path);
            else out[i] = (uint32_t)at;
        }
    }
    free(gaps);
    hanu_buf_free(&b);
    if (rc) {
        free(out);
        return rc;
    }
    *ords = out;
    *n = count;
    return HANU_OK;
}

static void commit_path(char *out, size_t cap, const char *dir)
{
    snprintf(out, cap, "%s/COMMIT", dir);
}

int index_commit_write(const char *dir, const index_commit *c)
{
    if (c->nsegments > INDEX_COMMIT_MAX_SEGMENTS) return HANU_ERR_TOO_LARGE;
    hanu_buf b = { 0 };
    int rc = hanu_buf_reserve(&b, COMMIT_HEADER + (size_t)c->nsegments * COMMIT_ENTRY + 8);
    if (rc == HANU_OK) {
        memcpy(b.data, COMMIT_MAGIC, 8);
        hanu_put_u32(b.data + 8, FILES_VERSION);
        hanu_put_u32(b.data + 12, c->nsegments);
        hanu_put_u64(b.data + 16, c->index_txn);
        hanu_put_u64(b.data + 24, c->next_file);
        for (uint32_t i = 0; i < c->nsegments; i++) {
            uint8_t *e = b.data + COMMIT_HEADER + (size_t)i * COMMIT_ENTRY;
            const index_commit_segment *s = &c->segments[i];
            hanu_put_u64(e, s->segment);
            hanu_put_u32(e + 8, s->db);
            hanu_put_u32(e + 12, s->docs);
            hanu_put_u32(e + 16, s->deleted);
            hanu_put_u32(e + 20, s->del_generation);
        }
        b.len = COMMIT_HEADER + (size_t)c->nsegments * COMMIT_ENTRY;
        char path[4096];
        commit_path(path, sizeof path, dir);
        rc = seal_and_write(&b, path, 1);
    }
    hanu_buf_free(&b);
    return rc;
}

int index_commit_read(const char *dir, index_commit *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    char path[4096];
    commit_path(path, sizeof path, dir);
    hanu_buf b = { 0 };
    int rc = read_sealed(path, COMMIT_HEADER + (size_t)INDEX_COMMIT_MAX_SEGMENTS * COMMIT_ENTRY + 8, &b,
                         err, errcap);
    if (rc == HANU_OK && (b.len < COMMIT_HEADER || memcmp(b.data, COMMIT_MAGIC, 8) != 0 ||
                          hanu_get_u32(b.data + 8) != FILES_VERSION))
        rc = corrupt(err, errcap, "%s: not an index commit", path);
    uint32_t n = rc == HANU_OK ? hanu_get_u32(b.data + 12) : 0;
    if (rc == HANU_OK && (size_t)n * COMMIT_ENTRY != b.len - COMMIT_HEADER)
        rc = corrupt(err, errcap, "%s: segment count does not match its size", path);
    if (rc == HANU_OK) {
        out->index_txn = hanu_get_u64(b.data + 16);
        out->next_file = hanu_get_u64(b.data + 24);
        out->nsegments = n;
        out->segments = calloc(n ? n : 1, sizeof *out->segments);
        if (!out->segments) rc = HANU_ERR_NOMEM;
    }
    for (uint32_t i = 0; rc == HANU_OK && i < n; i++) {
        const uint8_t *e = b.data + COMMIT_HEADER + (size_t)i * COMMIT_ENTRY;
        index_commit_segment *s = &out->segments[i];
        s->segment = hanu_get_u64(e);
        s->db = hanu_get_u32(e + 8);
        s->docs = hanu_get_u32(e + 12);
        s->deleted = hanu_get_u32(e + 16);
        s->del_generation = hanu_get_u32(e + 20);
        if (s->segment >= out->next_file || s->docs > INDEX_SEGMENT_MAX_DOCS || s->deleted > s->docs ||
            (s->deleted && !s->del_generation) || (i && s->segment <= out->segments[i - 1].segment))
            rc = corrupt(err, errcap, "%s: segment entry %u is inconsistent", path, i);
    }
    hanu_buf_free(&b);
    if (rc) index_commit_free(out);
    return rc;
}

void index_commit_free(index_commit *c)
{
    free(c->segments);
    memset(c, 0, sizeof *c);
}

void index_commit_segment_file(const index_commit_segment *s, char *out, size_t cap)
{
    snprintf(out, cap, "seg-%" PRIu64 ".hix", s->segment);
}

int index_commit_deletes_file(const index_commit_segment *s, char *out, size_t cap)
{
    if (!s->del_generation) return 0;
    snprintf(out, cap, "del-%" PRIu64 "-%" PRIu32, s->segment, s->del_generation);
    return 1;
}
