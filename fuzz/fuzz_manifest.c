/*
 * fuzz_manifest.c: libFuzzer target for the manifest decoder
 * (src/replica/manifest.h), the reader of every manifest a rebuild, restore or
 * audit fetches from a bucket. A random input rarely carries a valid SHA-256
 * trailer, so an odd length first gets its trailer (and the magic and version)
 * fixed, to reach the entry walk behind it. A decoded manifest must re-encode to
 * the same bytes (the format has one encoding), every path must be valid and the
 * paths strictly sorted; nothing may crash or read out of bounds.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include "replica/manifest.h"

static void check(const uint8_t *data, size_t size)
{
    manifest m;
    char err[256];
    if (manifest_decode(data, size, &m, err, sizeof err) != HANU_OK) {
        assert(err[0] != 0);
        return;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < m.file_count; i++) {
        assert(manifest_path_valid(m.files[i].path, strlen(m.files[i].path)));
        assert(i == 0 || strcmp(m.files[i - 1].path, m.files[i].path) < 0);
        total += m.files[i].size;
    }
    assert(total == m.total_bytes);
    hanu_buf again = { 0 };
    assert(manifest_encode(&m, &again, err, sizeof err) == HANU_OK);
    assert(again.len == size && memcmp(again.data, data, size) == 0);
    hanu_buf_free(&again);
    manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size % 2 == 0 || size < MANIFEST_HEADER_SIZE + MANIFEST_HASH_SIZE) {
        check(data, size);
        return 0;
    }
    uint8_t *obj = malloc(size);
    if (!obj) abort();
    memcpy(obj, data, size);
    memcpy(obj, MANIFEST_MAGIC, 4);
    obj[4] = MANIFEST_VERSION;
    SHA256(obj, size - MANIFEST_HASH_SIZE, obj + size - MANIFEST_HASH_SIZE);
    check(obj, size);
    free(obj);
    return 0;
}
