/*
 * fuzz_log_frames.c: libFuzzer target for the log's file header and frame
 * decoder, walked the way recovery walks a data file: every entry the decoder
 * hands out must lie inside the frame, and nothing may crash.
 *
 * An input of odd length gets every frame's checksum made valid before it is
 * decoded, so that the entry walk (ops, lengths, op 6's expiry) is reached by
 * mutations and not only by the seeds. An expiring put (op 6) must hold its
 * expiry, and encoding it again (log_frame_add_put) gives the same bytes; a typed
 * put (op 7) holds its expiry and a known type, and encodes again the same.
 */
#include <assert.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "log/log.h"

/* Makes the checksum of each frame in buf (from off) match its body, as far as the
   lengths allow. */
static void fix_checksums(uint8_t *buf, size_t size, size_t off)
{
    while (size - off >= LOG_FRAME_HEADER_SIZE) {
        uint32_t body = hanu_get_u32(buf + off);
        if (body == 0 || body > size - off - LOG_FRAME_HEADER_SIZE) break;
        size_t n = LOG_FRAME_HEADER_SIZE + (size_t)body;
        hanu_put_u32(buf + off + 4, hanu_checksum32(buf + off + 8, n - 8));
        off += n;
    }
}

static void check_entry(const log_frame *f, const log_entry *e)
{
    assert(e->key >= f->start && e->key + e->key_len <= f->start + f->size);
    assert(e->value >= f->start && e->value + e->value_len <= f->start + f->size);
    assert(e->value_offset + e->value_len <= f->size);
    if (e->op == LOG_OP_PUT_TYPED) {   /* op 7: value, expiry, a known type; encodes again the same */
        assert(e->value_len >= LOG_TYPED_SIZE);
        assert(e->type != LOG_TYPE_STRING && e->type <= LOG_TYPE_MAX);
        uint32_t vlen = e->value_len - LOG_TYPED_SIZE;
        assert(e->expire_ms == hanu_get_u64(e->value + vlen) && e->type == e->value[e->value_len - 1]);
        hanu_buf b = {0};
        if (log_frame_begin(&b) == HANU_OK &&
            log_frame_add_typed(&b, LOG_OP_PUT, e->db, e->key, e->key_len, e->value, vlen, e->expire_ms, e->type) == HANU_OK) {
            size_t n = LOG_ENTRY_HEADER_SIZE + e->key_len + e->value_len;
            assert(b.len == LOG_FRAME_HEADER_SIZE + n);
            assert(memcmp(b.data + LOG_FRAME_HEADER_SIZE, e->key - LOG_ENTRY_HEADER_SIZE, n) == 0);
        }
        hanu_buf_free(&b);
        return;
    }
    assert(e->type == LOG_TYPE_STRING);
    if (e->op != LOG_OP_PUT_EXPIRING) {
        assert(e->expire_ms == 0);
        return;
    }
    assert(e->value_len >= LOG_EXPIRY_SIZE);
    uint32_t vlen = e->value_len - LOG_EXPIRY_SIZE;
    assert(e->expire_ms == hanu_get_u64(e->value + vlen));
    if (!e->expire_ms) return;   /* 0 would encode as a plain put */
    hanu_buf b = {0};
    if (log_frame_begin(&b) == HANU_OK &&
        log_frame_add_put(&b, LOG_OP_PUT, e->db, e->key, e->key_len, e->value, vlen, e->expire_ms) == HANU_OK) {
        const uint8_t *entry = e->key - LOG_ENTRY_HEADER_SIZE;
        size_t n = LOG_ENTRY_HEADER_SIZE + e->key_len + e->value_len;
        assert(b.len == LOG_FRAME_HEADER_SIZE + n);
        assert(memcmp(b.data + LOG_FRAME_HEADER_SIZE, entry, n) == 0);
    }
    hanu_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    size_t off = 0;
    if (size >= LOG_FILE_HEADER_SIZE) {
        log_file_header h;
        if (log_file_header_decode(buf, &h) == HANU_OK) off = LOG_FILE_HEADER_SIZE;
    }
    if (size & 1) fix_checksums(buf, size, off);
    while (off < size) {
        log_frame f;
        const char *why = NULL;
        int r = log_frame_decode(buf + off, size - off, &f, &why);
        if (r == LOG_FRAME_SEAL) {   /* a valid seal ends the file's data */
            assert(f.size == LOG_FRAME_HEADER_SIZE && f.entry_count == 0);
            break;
        }
        if (r != LOG_FRAME_OK) {
            assert(r == LOG_FRAME_END || why != NULL);
            break;
        }
        assert(f.size >= LOG_FRAME_HEADER_SIZE && f.size <= size - off);
        uint32_t pos = 0, n = 0;
        log_entry e;
        while (log_frame_next_entry(&f, &pos, &e)) {
            check_entry(&f, &e);
            n++;
        }
        assert(n == f.entry_count);
        off += f.size;
    }
    free(buf);
    return 0;
}
