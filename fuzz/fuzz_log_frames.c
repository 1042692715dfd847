/*
 * fuzz_log_frames.c: libFuzzer target for the log's file header and frame
 * decoder, walked the way recovery walks a data file: every entry the decoder
 * hands out must lie inside the frame, and nothing may crash.
 */
#include <assert.h>
#include <stdint.h>
#include <stddef.h>
#include "log/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    if (size >= LOG_FILE_HEADER_SIZE) {
        log_file_header h;
        if (log_file_header_decode(data, &h) == HANU_OK) off = LOG_FILE_HEADER_SIZE;
    }
    while (off < size) {
        log_frame f;
        const char *why = NULL;
        int r = log_frame_decode(data + off, size - off, &f, &why);
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
            assert(e.key >= f.start && e.key + e.key_len <= f.start + f.size);
            assert(e.value >= f.start && e.value + e.value_len <= f.start + f.size);
            assert(e.value_offset + e.value_len <= f.size);
            n++;
        }
        assert(n == f.entry_count);
        off += f.size;
    }
    return 0;
}
