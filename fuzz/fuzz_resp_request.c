/*
 * fuzz_resp_request.c: libFuzzer target for the Redis protocol's request parser.
 * The input is a stream of requests as a client would send them (multibulk and
 * inline); every argument must lie inside the input or the request's arena, a
 * command consumes at least one byte, MORE asks for more than there is, and
 * nothing may crash or leak.
 */
#include <assert.h>
#include <stdint.h>
#include <stddef.h>
#include "resp/resp_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    resp_limits lim = { .max_args = 4096, .max_bulk = 1u << 20, .max_inline = 4096, .max_request = 1u << 20,
                        .unauthenticated = size > 0 && (data[0] & 1) };
    resp_request r = { 0 };
    size_t pos = 0;
    while (pos < size) {
        size_t used = 0, need = 0;
        const char *err = NULL;
        int rc = resp_parse(&r, data + pos, size - pos, &lim, &used, &need, &err);
        if (rc == RESP_PARSE_MORE) { assert(need > size - pos); break; }
        if (rc == RESP_PARSE_ERROR) { assert(err && err[0]); break; }
        assert(used > 0 && used <= size - pos);
        for (size_t i = 0; i < r.argc; i++) {
            const uint8_t *p = r.argv[i].p;
            size_t n = r.argv[i].len;
            int in_input = p >= data + pos && p + n <= data + pos + used;
            int in_arena = n == 0 || (!in_input && r.arena.data && p >= r.arena.data &&
                                      p + n <= r.arena.data + r.arena.len);
            assert(in_input || in_arena);
        }
        pos += used;
    }
    resp_request_free(&r);
    return 0;
}
