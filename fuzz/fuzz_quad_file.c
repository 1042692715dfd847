/*
 * fuzz_quad_file: libFuzzer target that opens arbitrary bytes as a facts
 * kernel store file (read-only and read-write, with and without QUAD_SALVAGE)
 * and, when it opens, scans and gathers everything it claims to hold. It must
 * never crash, leak or read out of bounds; errors are fine.
 * The input is written to a private file under $TMPDIR (or /tmp).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "quad.h"

static void exercise(const char *path, unsigned flags)
{
    quad_options o;
    quad_options_default(&o);
    o.flags = flags;
    o.io_backend = QUAD_IO_INLINE;
    o.cache_bytes = 1 << 16;
    quad *q = NULL;
    if (quad_open(path, &o, &q) != 0) return;
    static quad_fact out[512];
    static quad_id ids[512];
    static uint8_t present[512];
    quad_id from = 0, next;
    size_t n;
    for (int rounds = 0; rounds < 64; rounds++) {
        if (quad_scan(q, 0, from, QUAD_LANES_ALL, out, ids, 512, &n, &next) != 0 || n == 0) break;
        /* gather the same ids backwards, plus a few that do not exist */
        for (size_t i = 0; i < n / 2; i++) { quad_id t = ids[i]; ids[i] = ids[n - 1 - i]; ids[n - 1 - i] = t; }
        if (n < 512) ids[n++] = next + 12345;
        (void)quad_gather(q, 0, ids, n, QUAD_LANE(2), out, present);
        (void)quad_gather(q, 1, ids, n, QUAD_LANES_ALL, out, present);
        from = next;
    }
    if (!(flags & QUAD_RDONLY)) {
        quad_fact f = { { 1, 2, 3, 4 } };
        quad_id id;
        if (quad_append(q, &f, 1, QUAD_BUFFERED, &id, NULL) == 0)
            (void)quad_retire(q, &id, 1, QUAD_BUFFERED, NULL);
    }
    quad_close(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[512];
    if (!path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/fuzz_quad_%d.quad", t ? t : "/tmp", (int)getpid());
    }
    const unsigned modes[] = { QUAD_RDONLY, QUAD_RDONLY | QUAD_SALVAGE, 0 };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) return 0;
        if (size && hanu_write_full(fd, data, size) != 0) { close(fd); return 0; }
        close(fd);
        exercise(path, modes[m]);
    }
    unlink(path);
    return 0;
}
