/*
 * fuzz_resp_list.c: libFuzzer target for the decoder of a Redis list's value
 * (resp_list_valid, docs/RESP.md): the value a list command reads back from the
 * store. A value it accepts holds exactly its count of elements, each inside the
 * input, and encoding those elements again gives the same bytes; nothing may
 * crash or read outside the input.
 */
#include <assert.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "resp/resp_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t count = 0;
    if (!resp_list_valid(data, size, &count)) return 0;
    assert(size >= 4 && hanu_get_u32(data) == count);
    hanu_buf again = {0};
    uint8_t h[4];
    hanu_put_u32(h, count);
    if (hanu_buf_append(&again, h, 4) != HANU_OK) return 0;
    size_t pos = 4;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t len = hanu_get_u32(data + pos);
        assert(pos + 4 + (size_t)len <= size);
        hanu_put_u32(h, len);
        if (hanu_buf_append(&again, h, 4) != HANU_OK || hanu_buf_append(&again, data + pos + 4, len) != HANU_OK) {
            hanu_buf_free(&again);
            return 0;
        }
        pos += 4 + len;
    }
    assert(pos == size && again.len == size && memcmp(again.data, data, size) == 0);
    hanu_buf_free(&again);
    return 0;
}
