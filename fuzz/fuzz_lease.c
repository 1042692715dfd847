/*
 * fuzz_lease.c: libFuzzer target for the lease object's decoder (src/replica/lease.h),
 * the reader of the bytes every node fetches from the bucket's "lease" key. A lease
 * must decode or be refused with a message; a decoded one holds a valid holder id,
 * strings within their limits and a term of at least 1, and encodes back to bytes that
 * decode to the same lease.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>
#include "replica/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lease l, again;
    char err[256] = "";
    if (lease_decode((const char *)data, size, &l, err, sizeof err) != HANU_OK) {
        assert(err[0] != 0);
        return 0;
    }
    assert(l.term >= 1 && l.holder[0] && strlen(l.holder) <= LEASE_HOLDER_MAX && strlen(l.url) <= LEASE_URL_MAX);
    hanu_buf b = {0};
    assert(lease_encode(&l, &b) == HANU_OK);
    assert(lease_decode((const char *)b.data, b.len, &again, err, sizeof err) == HANU_OK);
    assert(memcmp(&l, &again, sizeof l) == 0);
    hanu_buf_free(&b);
    return 0;
}
