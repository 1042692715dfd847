/*
 * snapshot_internal.h: helpers shared by snapshot.c (taking, retention) and
 * snapshot_fetch.c (fetch, audit).
 */
#ifndef HANU_SNAPSHOT_INTERNAL_H
#define HANU_SNAPSHOT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "bucket/bucket.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* A list of names (a folder's entries or a bucket's keys). */
typedef struct snap_names {
    char **v;
    size_t n, cap;
} snap_names;

int snap_list_dir(const char *dir, snap_names *out);   /* unsorted; no names starting with '.' */
/* Every key under prefix, sorted. */
int snap_list_bucket(bucket *b, const char *prefix, snap_names *out, char *err, size_t errcap);
int snap_names_has(const snap_names *n, const char *key);   /* n sorted */
void snap_names_free(snap_names *n);
/* Appends a copy of name: OK or NOMEM. */
int snap_names_add(snap_names *n, const char *name);

int snap_fail(int rc, char *err, size_t errcap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void snap_sha256(const void *data, size_t len, uint8_t out[32]);

#endif
