/*
 * fuzz_client_decode.c: libFuzzer target for the key-value client's response
 * decoder (hkv_decode in src/client/client_wire.c). The first input byte
 * picks the op the responses answer; the rest is decoded as a stream of
 * response frames, the way hkv_pipe_recv walks its receive buffer. Checks
 * that every result is one of the documented three and that no frame or
 * value is claimed outside the input.
 */
#include "hanudb_client.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t op = data[0];
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    while (len > 0) {
        hkv_response r;
        size_t need = 0;
        int rc = hkv_decode(op, p, len, 1u << 16, &r, &need);
        if (rc == HKV_ERR_INCOMPLETE) {
            if (need <= len || need > (1u << 16) + HKV_RESP_HEADER)
                abort();
            break;
        }
        if (rc != HKV_OK) {
            if (rc != HKV_ERR_PROTOCOL)
                abort();
            break;
        }
        if (r.frame_len < HKV_RESP_HEADER || r.frame_len > len || r.data < p ||
            r.data + r.data_len > p + r.frame_len)
            abort();
        volatile uint8_t sink = 0;
        for (uint32_t i = 0; i < r.data_len; i++)
            sink ^= r.data[i];
        (void)sink;
        p += r.frame_len;
        len -= r.frame_len;
    }
    return 0;
}
