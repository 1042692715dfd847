/*
 * test_bucket.h: what the bucket tests share: a list callback that keeps the keys
 * and sizes it is given (and may stop after some).
 */
#ifndef HANU_TEST_BUCKET_H
#define HANU_TEST_BUCKET_H

#include <stdint.h>
#include <stdio.h>

typedef struct listed {
    char keys[32][64];
    uint64_t sizes[32];
    int n;
    int stop_after;                     /* non-zero: stop after this many */
} listed;

static inline int collect_key(void *ctx, const char *key, uint64_t size)
{
    listed *l = ctx;
    if (l->n < 32) {
        snprintf(l->keys[l->n], sizeof l->keys[0], "%s", key);
        l->sizes[l->n] = size;
    }
    l->n++;
    return l->stop_after && l->n >= l->stop_after;
}

#endif
