/*
 * fuzz_index_segment.c: libFuzzer target for index segment files. Each input
 * becomes a segment file (its checksum and end magic patched in, so that the
 * structural checks behind them are reached) and is opened. It must be refused
 * with HANU_ERR_CORRUPT, or open and then read completely (every id, every
 * term's postings, every column value) without touching memory outside the
 * mapping. The seed corpus holds a small valid segment.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "index/index.h"
#include "index/segment_format.h"

static char path[128];

static void read_everything(const index_segment *s)
{
    volatile uint64_t sink = 0;
    uint32_t docs = index_segment_docs(s);
    for (uint32_t d = 0; d < docs; d++) {
        size_t len;
        const char *id = index_segment_doc_id(s, d, &len);
        sink += len ? (uint8_t)id[len - 1] : 0;
        sink += index_segment_doc_txn(s, d);
    }
    for (uint32_t t = 0; t < index_segment_terms(s); t++) {
        size_t len;
        uint32_t df;
        const uint8_t *k = index_segment_term(s, t, &len, &df);
        if (index_segment_term_find(s, k, len) != t) abort();
        index_postings p;
        index_postings_open(&p, s, t);
        uint32_t n = 0, prev = 0;
        for (uint32_t d = p.doc; d != INDEX_ORD_END; d = index_postings_next(&p)) {
            if (d >= docs || (n && d <= prev)) abort();
            prev = d;
            n++;
            sink += p.tf + index_postings_block_max_tf(&p) + index_postings_block_min_length(&p);
        }
        if (n != df) abort();
        for (uint32_t b = 0; b < p.nblocks; b++) sink += index_postings_block_impact(&p, b);   /* version 2 */
    }
    sink += index_segment_impact_avgdl(s) > 0;
    (void)sink;
}

static void read_columns(const index_segment *s, const uint8_t *data, size_t size)
{
    /* Column paths are not listed by the API: look up a few taken from the input. */
    for (size_t at = 0; at + 4 <= size && at < 256; at += 4) {
        const index_column *c = index_segment_column(s, (const char *)data + at, data[at] % 5);
        if (!c) continue;
        for (uint32_t d = 0; d < index_segment_docs(s); d++) {
            enum index_col_tag tag = index_column_tag(c, d);
            if (tag == INDEX_COL_STRING) {
                size_t len;
                index_column_dict(c, index_column_string_ord(c, d), &len);
            } else if (tag == INDEX_COL_NUMBER) {
                (void)index_column_number(c, d);
            }
            (void)index_column_text_length(c, d);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) snprintf(path, sizeof path, "/dev/shm/hanudb-fuzz-seg-%d", (int)getpid());
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    if (size >= SEG_HEADER + SEG_FOOTER) {
        memcpy(copy + size - 8, SEG_END_MAGIC, 8);
        hanu_put_u64(copy + size - SEG_FOOTER, hanu_hash64(copy, size - SEG_FOOTER, 0));
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || hanu_write_full(fd, copy, size) != HANU_OK) abort();
    close(fd);
    index_segment *s = NULL;
    char err[200];
    int rc = index_segment_open(path, &s, err, sizeof err);
    if (rc == HANU_OK) {
        read_everything(s);
        read_columns(s, copy, size);
        index_segment_close(s);
    } else if (rc != HANU_ERR_CORRUPT) {
        abort();
    }
    free(copy);
    unlink(path);
    return 0;
}
