/*
 * fuzz_kv_request.c: libFuzzer target for the key-value request decoder. The
 * input is a stream of request frames as a client would send them; every
 * decoded field must lie inside the input, and nothing may crash.
 */
#include <assert.h>
#include <stdint.h>
#include <stddef.h>
#include "kv/kv_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kv_limits lim = { 1024, 1u << 20, 1u << 20 };
    size_t pos = 0;
    while (pos < size) {
        uint8_t op, flags;
        uint32_t len;
        if (kv_read_header(data + pos, size - pos, &op, &flags, &len)) break;
        pos += HKV_REQ_HEADER;
        if (len > lim.max_frame || len > size - pos) break;
        const uint8_t *payload = data + pos;
        kv_request r;
        const char *why = NULL;
        if (kv_parse_request(op, flags, payload, len, &lim, &r, &why) == HANU_OK) {
            if (r.db) assert(r.db >= payload && r.db + r.db_len <= payload + len);
            if (r.key) assert(r.key >= payload && r.key + r.key_len <= payload + len);
            if (r.value) assert(r.value >= payload && r.value + r.value_len <= payload + len);
            if (r.secret) assert(r.secret >= payload && r.secret + r.secret_len <= payload + len && r.secret_len > 0);
            /* SetTtl's ttl is 1 ms to 100 years; no other op has one */
            if (op == HKV_OP_SET_TTL) assert(r.ttl_ms >= 1 && r.ttl_ms <= HKV_TTL_MAX_MS && r.key && r.value);
            else assert(r.ttl_ms == 0);
            size_t bp = 0, items = 0;
            uint8_t kind;
            const uint8_t *k, *v;
            uint32_t kl, vl;
            while (kv_batch_next(&r, &bp, &kind, &k, &kl, &v, &vl)) {
                assert(k >= payload && k + kl <= payload + len && kl > 0 && kl <= lim.max_key);
                if (kind == 0) assert(v >= payload && v + vl <= payload + len);
                items++;
            }
            assert(items == r.batch_count);
        } else {
            assert(why != NULL);
        }
        pos += len;
    }
    return 0;
}
