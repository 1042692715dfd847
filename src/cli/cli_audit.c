/*
 * hanudb audit --bucket URL [--bucket URL2]: the checks of replica/audit.h (every
 * segment object, every link of the chain, every snapshot manifest and the files
 * it names) on the bucket at URL; it writes nothing. With two buckets (twins) it checks each chain and that both hold the
 * same segments. On success one summary line on stdout per bucket (chain and
 * manifests; prefixed by the URL with twins, then one line that they agree).
 * Exit status: 0 the chain is whole, 1 a problem (the first one is printed,
 * naming the object), 2 bad usage or the bucket cannot be read.
 */
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "bucket/bucket.h"
#include "replica/audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_progress(void *ctx, const audit_progress *p)
{
    (void)ctx;
    if (p->segments_checked && p->segments_checked % 100 == 0)
        fprintf(stderr, "hanudb audit: %llu of %llu segments checked\n", (unsigned long long)p->segments_checked,
                (unsigned long long)p->segments_total);
}

/* Lists and checks one bucket's chain into a (the keys stay for the twin check):
   0, 1 a problem, 2 the bucket cannot be read. */
static int audit_one(const char *url, audit_result *a, const char *prefix)
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
    audit_options o = { .progress = on_progress };
    int status = audit_bucket(b, &o, a);
    bucket_close(b);
    if (status == AUDIT_UNREADABLE) {
        fprintf(stderr, "hanudb audit: reading %s: %s\n", url, a->reason);
    } else if (status != AUDIT_OK) {
        fprintf(stderr, "hanudb audit: %s%s%s\n", a->object, a->object[0] ? ": " : "", a->reason);
        return 1;
    } else {   /* the one summary line: the chain and the manifests */
        const snapshot_audit_result *snaps = &a->snaps;
        printf("%s%schain ok: %zu segments, %llu records, txns %llu..%llu, %llu bytes; ", prefix, prefix[0] ? ": " : "",
               a->nkeys, (unsigned long long)a->records, (unsigned long long)a->first_txn,
               (unsigned long long)a->last_txn, (unsigned long long)a->segment_bytes);
        if (snaps->manifests)
            printf("manifests ok: %u manifests (txns %llu..%llu), %u files, %llu bytes\n", snaps->manifests,
                   (unsigned long long)snaps->oldest_txn, (unsigned long long)snaps->newest_txn, snaps->files,
                   (unsigned long long)snaps->bytes);
        else
            printf("no manifests\n");
    }
    return status;
}

/* Twin buckets: every segment on both sides. 0, or 1 after naming the first one-sided one. */
static int audit_twins(const char *const urls[2], const audit_result a[2])
{
    size_t only[2] = { 0, 0 };
    const char *first[2] = { NULL, NULL };
    for (size_t i = 0, j = 0; i < a[0].nkeys || j < a[1].nkeys;) {   /* both lists are in byte order */
        int d = i == a[0].nkeys ? 1 : j == a[1].nkeys ? -1 : strcmp(a[0].keys[i], a[1].keys[j]);
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
    printf("twin buckets agree: the same %zu segments in both\n", a[0].nkeys);
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
    audit_result a[2];
    memset(a, 0, sizeof a);
    int status = 0;
    for (int i = 0; i < urls.n; i++) {
        int one = audit_one(urls.v[i], &a[i], urls.n == 2 ? urls.v[i] : "");
        if (one > status) status = one;
    }
    if (urls.n == 2 && a[0].listed && a[1].listed) {
        int twins = audit_twins(urls.v, a);
        if (twins > status) status = twins;
    }
    for (int k = 0; k < 2; k++) audit_result_free(&a[k]);
    return status;
}
