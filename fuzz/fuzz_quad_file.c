/*
 * fuzz_quad_file: libFuzzer target that opens arbitrary bytes as a facts
 * kernel store file (read-only and read-write, with and without QUAD_SALVAGE)
 * and, when it opens, scans, gathers (and checks existence of) everything it
 * claims to hold and reads its commits back through the commit stream. It must
 * never crash, leak or read out of bounds; errors are fine.
 * The input is written to a private file under $TMPDIR (or /tmp). An input
 * ending in 'R' loses that byte and gets valid checksums (header, both
 * checkpoint slots, both durable mark slots, every frame whose length fits:
 * its body, then its header), so that mutations reach
 * the parsers behind the checksums: chunk records, retire frames, dense
 * retirement sets, checkpoints, relocation frames (the cleaner) and the
 * relocated chunks' checkpoint entries. The seed corpus
 * (fuzz/corpus/fuzz_quad_file) holds small valid stores, each followed by
 * 'R', made by quad_seed_store below when FUZZ_QUAD_SEEDS names a directory;
 * seeds 4 and 5 were cleaned (seed 5 without checkpoint slots, so its
 * relocation frames are replayed); seeds 0-5 have checkpoints of the layout
 * before folds (type 3 parts), seeds 6 and 7 folds (chunks 1-2 folded at the
 * clean's horizon, pairs above it; seed 7 also a fold of a 22-row chunk). A
 * writable open also runs the cleaner.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quad.h"
#include "base/base.h"

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
        (void)quad_gather(q, 0, ids, n, 0, NULL, present);   /* existence only */
        from = next;
    }
    /* the commit stream reads the frames back itself: from the first epoch
     * (the log start) and from the middle (found through the directory) */
    for (int k = 0; k < 2; k++) {
        quad_stream *s = NULL;
        if (quad_stream_open(q, k ? quad_epoch(q) / 2 + 1 : 1, QUAD_LANES_ALL | QUAD_STREAM_COMMITTED, &s) != 0)
            continue;
        quad_commit c;
        for (int i = 0; i < 1024 && quad_stream_next(s, 0, &c) == 1; i++) {}
        quad_stream_close(s);
    }
    if (!(flags & QUAD_RDONLY)) {
        quad_fact f = { { 1, 2, 3, 4 } };
        quad_id id;
        if (quad_append(q, &f, 1, QUAD_BUFFERED, &id, NULL) == 0)
            (void)quad_retire(q, &id, 1, QUAD_BUFFERED, NULL);
        quad_clean_stats cs;
        (void)quad_clean(q, 0.75, &cs);
        (void)quad_gather(q, 0, ids, 1, QUAD_LANES_ALL, out, present);
    }
    quad_close(q);
}

/* Layout (docs/QUAD.md, version 2): 4096-byte header region with the file
 * header's checksum over [4, 64), checkpoint slots at 512 and 1024, durable
 * mark slots at 1536 and 2048 (checksum over [4, 64) of each), frames from
 * 4096: u32 header checksum over [4, 40), u32 magic, u32 body_len, ..., at 32
 * u32 body checksum; 40-byte header. */
static void repair(uint8_t *b, size_t n)
{
    if (n >= 64) hanu_put_u32(b, hanu_checksum32(b + 4, 60));
    for (size_t slot = 512; slot <= 2048; slot += 512)
        if (n >= slot + 64) hanu_put_u32(b + slot, hanu_checksum32(b + slot + 4, 60));
    for (size_t off = 4096; off + 40 <= n;) {
        uint32_t len = hanu_get_u32(b + off + 8);
        if (len > n - off - 40) break;
        hanu_put_u32(b + off + 32, hanu_checksum32(b + off + 40, (size_t)len));
        hanu_put_u32(b + off, hanu_checksum32(b + off + 4, 36));
        off += 40 + (size_t)len;
    }
}

/* Writes small valid stores to dir (seed corpus; run once by hand with
 * FUZZ_QUAD_SEEDS=dir), each followed by 'R'. */
static void quad_seed_store(const char *dir)
{
    for (int k = 0; k < 8; k++) {
        char path[600];
        snprintf(path, sizeof path, "%s/seed%d.quad", dir, k);
        unlink(path);
        quad_options o;
        quad_options_default(&o);
        o.chunk_rows = 64;
        o.microblock_rows = 64;
        o.checkpoint_bytes = 0;
        quad *q = NULL;
        if (quad_open(path, &o, &q) != 0) return;
        quad_fact f[150];
        for (int i = 0; i < 150; i++)
            for (int l = 0; l < 4; l++)
                f[i].lane[l] = k == 1 ? (uint64_t)rand() * 7919 : l == 1 ? 5 : (uint64_t)(i * (l + 1) + k);
        quad_id first;
        (void)quad_append(q, f, 150, QUAD_BUFFERED, &first, NULL);
        quad_id ids[64];
        for (int i = 0; i < 64; i++) ids[i] = quad_batch_id(first, 64, (size_t)i);
        (void)quad_retire(q, ids, k >= 2 ? 40 : 2, QUAD_BUFFERED, NULL);   /* dense past 4 of 64 */
        if (k == 3) (void)quad_checkpoint(q);
        if (k >= 6) {   /* folds: chunk 0 relocated, chunks 1-2 (and 2's 22 rows) folded */
            int n = 0;
            for (int i = 64; i < (k == 7 ? 150 : 128); i += 2) ids[n++ % 64] = quad_batch_id(first, 64, (size_t)i);
            (void)quad_retire(q, ids, n < 64 ? (size_t)n : 64, QUAD_BUFFERED, NULL);
            for (int i = 0; i < 64; i++) ids[i] = quad_batch_id(first, 64, (size_t)i);
            (void)quad_retire(q, ids + 40, 24, QUAD_BUFFERED, NULL);
            (void)quad_clean(q, 0.25, NULL);
            ids[0] = quad_batch_id(first, 64, 65);   /* above the horizon: a pair */
            (void)quad_retire(q, ids, 1, QUAD_BUFFERED, NULL);
            (void)quad_checkpoint(q);
        } else if (k >= 4) {   /* the cleaner: chunk 0 keeps 24 rows, chunk 1 none */
            for (int i = 0; i < 64; i++) ids[i] = quad_batch_id(first, 64, (size_t)(64 + i));
            (void)quad_retire(q, ids, 64, QUAD_BUFFERED, NULL);
            (void)quad_clean(q, 0.5, NULL);
        }
        (void)quad_append(q, f, 10, QUAD_BUFFERED, NULL, NULL);
        quad_close(q);
        int fd = open(path, O_WRONLY | O_APPEND);
        if (fd >= 0) {
            (void)hanu_write_full(fd, "R", 1);
            close(fd);
        }
        fd = k == 5 ? open(path, O_WRONLY) : -1;   /* (pwrite ignores offsets with O_APPEND) */
        if (fd >= 0) {   /* no checkpoint slot: a full replay meets the relocation frames */
            static const uint8_t zero[64];
            (void)hanu_pwrite_full(fd, zero, sizeof zero, 512);
            (void)hanu_pwrite_full(fd, zero, sizeof zero, 1024);
            close(fd);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int seeded;
    if (!seeded) {
        seeded = 1;
        const char *d = getenv("FUZZ_QUAD_SEEDS");
        if (d) quad_seed_store(d);
    }
    static uint8_t *copy;
    static size_t copy_cap;
    if (size && data[size - 1] == 'R') {   /* repaired variant */
        if (copy_cap < size) {
            free(copy);
            copy = malloc(size);
            copy_cap = copy ? size : 0;
            if (!copy) return 0;
        }
        memcpy(copy, data, size - 1);
        repair(copy, size - 1);
        data = copy;
        size--;
    }
    static char path[512];
    if (!path[0]) {
        /* tmpfs by default: a writable open and close sync up to three times */
        const char *t = getenv("TMPDIR");
        if (!t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_quad_%d.quad", t, (int)getpid());
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
