/*
 * log_frame.c: encoding and decoding of log file headers, frames and entries
 * (formats in log.h and docs/FORMATS.md). Pure functions over byte buffers,
 * so the decoder can be fed truncated, zeroed and bit-flipped input in tests.
 */
#include "log/log.h"

#include <stdio.h>
#include <strings.h>

void log_file_header_encode(uint8_t out[LOG_FILE_HEADER_SIZE], const log_file_header *h)
{
    memset(out, 0, LOG_FILE_HEADER_SIZE);
    memcpy(out, LOG_FILE_MAGIC, 8);   /* 7 letters and the NUL */
    out[8] = LOG_FORMAT_VERSION;
    out[9] = h->flags;
    hanu_put_u32(out + 12, h->file_id);
    hanu_put_u64(out + 16, h->covers_first);
    hanu_put_u64(out + 24, h->covers_last);
    hanu_put_u32(out + 32, h->generation);
    hanu_put_u32(out + 36, hanu_checksum32(out, 36));
}

int log_file_header_decode(const uint8_t in[LOG_FILE_HEADER_SIZE], log_file_header *h)
{
    if (memcmp(in, LOG_FILE_MAGIC, 8) != 0) return HANU_ERR_CORRUPT;
    if (in[8] < LOG_FORMAT_VERSION_MIN || in[8] > LOG_FORMAT_VERSION) return HANU_ERR_CORRUPT;
    if (hanu_get_u32(in + 36) != hanu_checksum32(in, 36)) return HANU_ERR_CORRUPT;
    h->flags = in[9];
    h->file_id = hanu_get_u32(in + 12);
    h->covers_first = hanu_get_u64(in + 16);
    h->covers_last = hanu_get_u64(in + 24);
    h->generation = hanu_get_u32(in + 32);
    return HANU_OK;
}

int log_frame_begin(hanu_buf *b)
{
    hanu_buf_reset(b);
    int rc = hanu_buf_reserve(b, LOG_FRAME_HEADER_SIZE);
    if (rc) return rc;
    memset(b->data, 0, LOG_FRAME_HEADER_SIZE);
    b->len = LOG_FRAME_HEADER_SIZE;
    return HANU_OK;
}

int log_frame_add(hanu_buf *b, uint8_t op, uint32_t db, const void *key, uint16_t key_len,
                  const void *value, uint32_t value_len)
{
    return log_frame_add_put(b, op, db, key, key_len, value, value_len, 0);
}

int log_frame_add_put(hanu_buf *b, uint8_t op, uint32_t db, const void *key, uint16_t key_len,
                      const void *value, uint32_t value_len, uint64_t expire_ms)
{
    return log_frame_add_typed(b, op, db, key, key_len, value, value_len, expire_ms, LOG_TYPE_STRING);
}

int log_frame_add_typed(hanu_buf *b, uint8_t op, uint32_t db, const void *key, uint16_t key_len,
                        const void *value, uint32_t value_len, uint64_t expire_ms, uint8_t type)
{
    /* A copy of an op 6 or 7 (no expiry, no type given) keeps its value whole. */
    size_t suffix = 0;
    if (type != LOG_TYPE_STRING) op = LOG_OP_PUT_TYPED, suffix = LOG_TYPED_SIZE;
    else if (expire_ms) op = LOG_OP_PUT_EXPIRING, suffix = LOG_EXPIRY_SIZE;
    if (value_len > UINT32_MAX - suffix) return HANU_ERR_TOO_LARGE;
    size_t need = LOG_ENTRY_HEADER_SIZE + (size_t)key_len + value_len + suffix;
    if (b->len - LOG_FRAME_HEADER_SIZE + need > LOG_MAX_FRAME_BODY) return HANU_ERR_TOO_LARGE;
    int rc = hanu_buf_reserve(b, need);
    if (rc) return rc;
    uint8_t *p = b->data + b->len;
    p[0] = op;
    hanu_put_u32(p + 1, db);
    hanu_put_u16(p + 5, key_len);
    hanu_put_u32(p + 7, (uint32_t)(value_len + suffix));
    if (key_len) memcpy(p + 11, key, key_len);
    if (value_len) memcpy(p + 11 + key_len, value, value_len);
    if (suffix) hanu_put_u64(p + 11 + key_len + value_len, expire_ms);
    if (suffix == LOG_TYPED_SIZE) p[11 + key_len + value_len + LOG_EXPIRY_SIZE] = type;
    b->len += need;
    uint32_t count = hanu_get_u32(b->data + 16);
    hanu_put_u32(b->data + 16, count + 1);
    return HANU_OK;
}

void log_frame_finish(hanu_buf *b, uint64_t txn)
{
    hanu_put_u32(b->data, (uint32_t)(b->len - LOG_FRAME_HEADER_SIZE));
    hanu_put_u64(b->data + 8, txn);
    hanu_put_u32(b->data + 4, hanu_checksum32(b->data + 8, b->len - 8));
}

static inline int frame_decode(const uint8_t *p, size_t avail, log_frame *f, const char **why, int check)
{
    static const char *dummy;
    if (!why) why = &dummy;
    if (avail < LOG_FRAME_HEADER_SIZE) {
        if (hanu_is_zero(p, avail)) return LOG_FRAME_END;
        *why = "frame header cut short";
        return LOG_FRAME_TORN;
    }
    uint32_t body_len = hanu_get_u32(p);
    uint32_t count = hanu_get_u32(p + 16);
    if (body_len == 0 && count == 0 && hanu_is_zero(p, LOG_FRAME_HEADER_SIZE)) return LOG_FRAME_END;
    if (body_len == 0 && count == LOG_SEAL_COUNT) {
        if (hanu_get_u32(p + 4) != hanu_checksum32(p + 8, LOG_FRAME_HEADER_SIZE - 8)) {
            *why = "seal checksum mismatch";
            return LOG_FRAME_BAD;
        }
        f->txn = hanu_get_u64(p + 8);
        f->entry_count = 0;
        f->size = LOG_FRAME_HEADER_SIZE;
        f->start = p;
        return LOG_FRAME_SEAL;
    }
    if (body_len > LOG_MAX_FRAME_BODY) { *why = "frame length out of range"; return LOG_FRAME_BAD; }
    if ((size_t)body_len > avail - LOG_FRAME_HEADER_SIZE) {
        *why = "frame runs past the end of the file";
        return LOG_FRAME_TORN;
    }
    size_t size = LOG_FRAME_HEADER_SIZE + (size_t)body_len;
    if (check && hanu_get_u32(p + 4) != hanu_checksum32(p + 8, size - 8)) {
        *why = "frame checksum mismatch";
        return LOG_FRAME_BAD;
    }
    if (count == 0 || count > LOG_MAX_ENTRIES_PER_FRAME) { *why = "bad entry count"; return LOG_FRAME_BAD; }
    /* Walk the entries once so that callers can iterate without bounds checks. */
    size_t pos = LOG_FRAME_HEADER_SIZE;
    for (uint32_t i = 0; i < count; i++) {
        if (size - pos < LOG_ENTRY_HEADER_SIZE) { *why = "entry header past frame end"; return LOG_FRAME_BAD; }
        uint8_t op = p[pos];
        size_t klen = hanu_get_u16(p + pos + 5), vlen = hanu_get_u32(p + pos + 7);
        if (op < LOG_OP_PUT || op > LOG_OP_MAX) { *why = "unknown entry op"; return LOG_FRAME_BAD; }
        if (op == LOG_OP_PUT_EXPIRING && vlen < LOG_EXPIRY_SIZE) { *why = "expiring put without its expiry"; return LOG_FRAME_BAD; }
        if (op == LOG_OP_PUT_TYPED && vlen < LOG_TYPED_SIZE) { *why = "typed put without its type"; return LOG_FRAME_BAD; }
        if (size - pos - LOG_ENTRY_HEADER_SIZE < klen + vlen) { *why = "entry past frame end"; return LOG_FRAME_BAD; }
        if (op == LOG_OP_PUT_TYPED) {
            uint8_t type = p[pos + LOG_ENTRY_HEADER_SIZE + klen + vlen - 1];
            if (type == LOG_TYPE_STRING || type > LOG_TYPE_MAX) { *why = "unknown value type"; return LOG_FRAME_BAD; }
        }
        pos += LOG_ENTRY_HEADER_SIZE + klen + vlen;
    }
    if (pos != size) { *why = "bytes after the last entry"; return LOG_FRAME_BAD; }
    f->txn = hanu_get_u64(p + 8);
    f->entry_count = count;
    f->size = (uint32_t)size;
    f->start = p;
    return LOG_FRAME_OK;
}

int log_frame_decode(const uint8_t *p, size_t avail, log_frame *f, const char **why)
{
    return frame_decode(p, avail, f, why, 1);
}

int log_frame_decode_checked(const uint8_t *p, size_t avail, log_frame *f, const char **why)
{
    return frame_decode(p, avail, f, why, 0);
}

void log_seal_encode(uint8_t out[LOG_FRAME_HEADER_SIZE], uint64_t last_txn)
{
    hanu_put_u32(out, 0);
    hanu_put_u64(out + 8, last_txn);
    hanu_put_u32(out + 16, LOG_SEAL_COUNT);
    hanu_put_u32(out + 4, hanu_checksum32(out + 8, LOG_FRAME_HEADER_SIZE - 8));
}

int log_frame_next_entry(const log_frame *f, uint32_t *pos, log_entry *e)
{
    uint32_t at = *pos ? *pos : LOG_FRAME_HEADER_SIZE;
    if (at >= f->size) return 0;
    const uint8_t *p = f->start + at;
    e->op = p[0] == LOG_OP_OLD_SYSTEM_PUT ? LOG_OP_PUT : p[0];
    e->db = hanu_get_u32(p + 1);
    e->key_len = hanu_get_u16(p + 5);
    e->value_len = hanu_get_u32(p + 7);
    e->key = p + LOG_ENTRY_HEADER_SIZE;
    e->value = e->key + e->key_len;
    e->value_offset = at + LOG_ENTRY_HEADER_SIZE + e->key_len;
    /* The decoder checked that an expiring or typed put's value holds its trailer. */
    uint32_t trailer = log_op_trailer(e->op);
    e->expire_ms = trailer ? hanu_get_u64(e->value + e->value_len - trailer) : 0;
    e->type = e->op == LOG_OP_PUT_TYPED ? e->value[e->value_len - 1] : LOG_TYPE_STRING;
    *pos = e->value_offset + e->value_len;
    return 1;
}

void log_file_path(char *out, size_t cap, const char *dir, uint32_t file_id, const char *ext)
{
    snprintf(out, cap, "%s/%06u.%s", dir, file_id, ext);
}

int log_prealloc_parse(const char *s, enum log_prealloc *out)
{
    if (!strcasecmp(s, "append")) *out = LOG_PREALLOC_APPEND;
    else if (!strcasecmp(s, "fallocate")) *out = LOG_PREALLOC_FALLOCATE;
    else if (!strcasecmp(s, "zerofill")) *out = LOG_PREALLOC_ZEROFILL;
    else return HANU_ERR_INVALID;
    return HANU_OK;
}

const char *log_prealloc_name(enum log_prealloc mode)
{
    switch (mode) {
    case LOG_PREALLOC_APPEND: return "append";
    case LOG_PREALLOC_FALLOCATE: return "fallocate";
    case LOG_PREALLOC_ZEROFILL: return "zerofill";
    default: return "?";
    }
}
