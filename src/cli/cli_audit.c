/*
 * hanudb audit --bucket URL [--bucket URL2]: reads the whole chain of segment objects in a
 * bucket and checks every one (header, trailer, zstd frame, every record) and
 * every link (sequence + 1, the previous trailer's hash, txns increasing), and
 * every snapshot manifest with every file it names (replica/snapshot.h:
 * present, size, SHA-256). Retention deletes the segments before the oldest
 * manifest's replay sequence: the chain may then start there, and that
 * segment's previous hash must be the one the manifest recorded. It writes
 * nothing. With two buckets (twins) it checks each chain and that both hold the
 * same segments. On success one summary line on stdout per bucket (chain and
 * manifests; prefixed by the URL with twins, then one line that they agree).
 * Exit status: 0 the chain is whole, 1 a problem (the first one is printed,
 * naming the object), 2 bad usage or the bucket cannot be read.
 */
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "bucket/bucket.h"
#include "bucket/segment.h"
#include "replica/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct audit_keys {
    char **keys;
    size_t n, cap;
    char stray[BUCKET_KEY_MAX + 1];   /* the first object under segments/ that is no segment */
    int listed;                       /* keys holds every segment key of the bucket */
} audit_keys;

static int collect_key(void *ctx, const char *key, uint64_t size)
{
    audit_keys *a = ctx;
    (void)size;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK) {
        if (!a->stray[0]) snprintf(a->stray, sizeof a->stray, "%s", key);
        return 0;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        char **k = realloc(a->keys, cap * sizeof *k);
        if (!k) return HANU_ERR_NOMEM;
        a->keys = k;
        a->cap = cap;
    }
    if (!(a->keys[a->n] = strdup(key))) return HANU_ERR_NOMEM;
    a->n++;
    return 0;
}

/* Reads and checks every segment in order; 0, or 1 after printing the first problem. */
static int audit_chain(bucket *b, const audit_keys *a, const snapshot_audit_result *snaps, const char *prefix)
{
    segment_chain chain;
    segment_chain_init(&chain);
    hanu_buf obj = { 0 };
    uint64_t records = 0, bytes = 0, first_txn = 0;
    char err[512];
    int status = 0;
    for (size_t i = 0; i < a->n && status == 0; i++) {
        err[0] = '\0';
        hanu_buf_reset(&obj);
        int rc = bucket_get(b, a->keys[i], &obj, NULL, err, sizeof err);
        segment seg;
        if (rc == HANU_OK) rc = segment_decode(obj.data, obj.len, &seg, err, sizeof err);
        if (rc == HANU_OK && i == 0 && seg.header.sequence > 1) {
            /* Older segments were deleted by retention: only a manifest may stand for them. */
            if (!snaps->manifests || seg.header.sequence > snaps->oldest_replay_sequence) {
                snprintf(err, sizeof err, "the chain starts at sequence %llu, but %s", (unsigned long long)seg.header.sequence,
                         snaps->manifests ? "the oldest manifest replays from an earlier one (segments are missing)"
                                          : "no manifest stands for the segments before it (they are missing)");
                rc = HANU_ERR_CORRUPT;
            }
            chain.next_sequence = seg.header.sequence;
            memcpy(chain.prev_hash, seg.header.prev_hash, SEGMENT_HASH_SIZE);
        }
        if (rc == HANU_OK && snaps->manifests && seg.header.sequence == snaps->oldest_replay_sequence &&
            memcmp(seg.header.prev_hash, snaps->oldest_prev_hash, SEGMENT_HASH_SIZE) != 0) {
            snprintf(err, sizeof err, "its previous hash is not the one the oldest manifest recorded "
                     "(a segment of another chain)");
            rc = HANU_ERR_CORRUPT;
        }
        if (rc == HANU_OK) {
            rc = segment_chain_next(&chain, &seg.header, err, sizeof err);
            if (!first_txn) first_txn = seg.header.first_txn;
            records += seg.header.record_count;
            bytes += obj.len;
            segment_free(&seg);
        }
        if (rc != HANU_OK) {
            fprintf(stderr, "hanudb audit: %s: %s\n", a->keys[i], err[0] ? err : hanu_status_str(rc));
            status = 1;
        } else if ((i + 1) % 100 == 0) {
            fprintf(stderr, "hanudb audit: %zu of %zu segments checked\n", i + 1, a->n);
        }
    }
    hanu_buf_free(&obj);
    if (status == 0) {   /* the one summary line: the chain and the manifests */
        printf("%s%schain ok: %zu segments, %llu records, txns %llu..%llu, %llu bytes; ", prefix, prefix[0] ? ": " : "",
               a->n, (unsigned long long)records, (unsigned long long)first_txn, (unsigned long long)chain.last_txn,
               (unsigned long long)bytes);
        if (snaps->manifests)
            printf("manifests ok: %u manifests (txns %llu..%llu), %u files, %llu bytes\n", snaps->manifests,
                   (unsigned long long)snaps->oldest_txn, (unsigned long long)snaps->newest_txn, snaps->files,
                   (unsigned long long)snaps->bytes);
        else
            printf("no manifests\n");
    }
    return status;
}

/* Lists and checks one bucket's chain into a (the keys stay for the twin check):
   0, 1 a problem, 2 the bucket cannot be read. */
static int audit_bucket(const char *url, audit_keys *a, const char *prefix)
{
    bucket_options bo;
    bucket_options_default(&bo);
    bo.create_root = 0;   /* reading a bucket that is not there is an error, not an empty bucket */
    bucket *b = NULL;
    char err[512] = "";
    int open_rc = bucket_open(url, &bo, &b, err, sizeof err);
    if (open_rc != HANU_OK) {
        fprintf(stderr, "hanudb audit: %s\n", err);
        /* A missing folder is a bucket with no chain at all: a problem, not an empty bucket. */
        a->listed = open_rc == HANU_ERR_NOT_FOUND;
        return open_rc == HANU_ERR_NOT_FOUND ? 1 : 2;
    }
    snapshot_audit_result snaps;
    int rc;
    int status;
    rc = snapshot_audit(b, &snaps, err, sizeof err);
    if (rc == HANU_OK) {
        rc = bucket_list(b, SEGMENT_KEY_PREFIX, collect_key, a, err, sizeof err);
        a->listed = rc == HANU_OK;
    } else if (rc == HANU_ERR_CORRUPT || rc == HANU_ERR_NOT_FOUND) {
        rc = 1;   /* a damaged or missing object */
    }
    if (rc == 1) {
        fprintf(stderr, "hanudb audit: %s\n", err);
        status = 1;
    } else if (rc != HANU_OK) {
        fprintf(stderr, "hanudb audit: reading %s: %s\n", url, err[0] ? err : hanu_status_str(rc));
        status = 2;
    } else if (a->stray[0]) {
        fprintf(stderr, "hanudb audit: %s: not a segment object (a stray or extra object in the chain)\n", a->stray);
        status = 1;
    } else {
        status = audit_chain(b, a, &snaps, prefix);
    }
    bucket_close(b);
    return status;
}

/* Twin buckets: every segment on both sides. 0, or 1 after naming the first one-sided one. */
static int audit_twins(const char *const urls[2], const audit_keys a[2])
{
    size_t only[2] = { 0, 0 };
    const char *first[2] = { NULL, NULL };
    for (size_t i = 0, j = 0; i < a[0].n || j < a[1].n;) {   /* both lists are in byte order */
        int d = i == a[0].n ? 1 : j == a[1].n ? -1 : strcmp(a[0].keys[i], a[1].keys[j]);
        if (d != 0) {
            int side = d < 0 ? 0 : 1;
            if (!only[side]++) first[side] = side == 0 ? a[0].keys[i] : a[1].keys[j];
        }
        if (d <= 0) i++;
        if (d >= 0) j++;
    }
    for (int side = 0; side < 2; side++)
        if (only[side])
            fprintf(stderr, "hanudb audit: %zu segments only in %s (the first: %s); serve with both buckets "
                    "copies them over at start\n", only[side], urls[side], first[side]);
    if (only[0] || only[1]) return 1;
    printf("twin buckets agree: the same %zu segments in both\n", a[0].n);
    return 0;
}

int cli_audit_main(int argc, char **argv)
{
    cli_str_twice urls = { { NULL, NULL }, 0, 0 };
    cli_opt opts[] = {
        { "bucket", CLI_STR_TWICE, &urls, "the bucket to check: file:///path or s3://bucket/prefix; twice for "
                                          "twin buckets (each chain checked, and that they hold the same segments)" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("audit", "Checks every segment of a bucket's chain; writes nothing.", opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if (!urls.n) {
        fprintf(stderr, "hanudb audit: --bucket URL is required\n");
        return 2;
    }
    audit_keys a[2] = { { 0 }, { 0 } };
    int status = 0;
    for (int i = 0; i < urls.n; i++) {
        int one = audit_bucket(urls.v[i], &a[i], urls.n == 2 ? urls.v[i] : "");
        if (one > status) status = one;
    }
    if (urls.n == 2 && a[0].listed && a[1].listed) {
        int twins = audit_twins(urls.v, a);
        if (twins > status) status = twins;
    }
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < a[k].n; i++) free(a[k].keys[i]);
        free(a[k].keys);
    }
    return status;
}
