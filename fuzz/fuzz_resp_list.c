/*
 * fuzz_resp_list.c: libFuzzer target for the decoders of a Redis list's records
 * (kvlist.h, docs/FORMATS.md): the head in the user key (both formats) and a chunk,
 * as a list command reads them back from the store. A chunk it accepts holds
 * exactly its count of elements, each inside the input, and encoding them again
 * gives the same bytes; a head it accepts encodes again to the same bytes (the new
 * format) or is a valid chunk (the old one), its counts within the limits, and
 * every index of the list is found in a chunk that holds it. Nothing may crash or
 * read outside the input.
 */
#include <assert.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "kvlist/kvlist.h"

static void check_chunk(const uint8_t *data, size_t size)
{
    uint32_t count = 0;
    if (!kvlist_chunk_valid(data, size, &count)) return;
    assert(size >= 4 && hanu_get_u32(data) == count);
    kvlist_elem *a = malloc((count ? count : 1) * sizeof *a);
    if (!a) return;
    kvlist_chunk_split(data, count, a);
    for (uint32_t i = 0; i < count; i++) assert(a[i].p >= data && a[i].p + a[i].len <= data + size);
    hanu_buf again = {0};
    if (kvlist_chunk_encode(a, count, &again) == HANU_OK) assert(again.len == size && !memcmp(again.data, data, size));
    hanu_buf_free(&again);
    free(a);
}

static void check_head(const uint8_t *data, size_t size)
{
    kvlist_head h;
    if (kvlist_head_decode(data, size, &h) != HANU_OK) return;
    assert(h.count <= KVLIST_MAX_ELEMS && h.nchunks <= KVLIST_MAX_CHUNKS);
    if (h.id) {
        hanu_buf again = {0};
        if (kvlist_head_encode(&h, &again) == HANU_OK) assert(again.len == size && !memcmp(again.data, data, size));
        hanu_buf_free(&again);
    } else {
        uint32_t count;
        assert(kvlist_chunk_valid(data, size, &count) && count == h.count);
    }
    uint64_t probes[4] = { 0, h.count / 2, h.count ? h.count - 1 : 0, h.count / 3 };
    for (int i = 0; i < 4 && h.count; i++) {
        uint32_t ci, off;
        kvlist_locate(&h, probes[i], &ci, &off);
        assert(ci < h.nchunks && off < h.chunks[ci].count);
        uint64_t before = 0;
        for (uint32_t k = 0; k < ci; k++) before += h.chunks[k].count;
        assert(before + off == probes[i]);
    }
    kvlist_head_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_chunk(data, size);
    check_head(data, size);
    return 0;
}
