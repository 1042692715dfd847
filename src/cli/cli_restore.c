/*
 * hanudb restore --bucket URL --to DIR [--at TIME | --txn N]: point-in-time
 * restore. Replays the bucket's chain (after the newest fitting snapshot, once
 * snapshots exist) into a fresh directory, up to txn N exactly (every record <= N)
 * or up to the last segment sealed at or before TIME. Reads the bucket, writes
 * nothing to it: no sealer, no watermark, no jump in numbering. The result opens
 * with `serve --data DIR --no-bucket` or `dump --data DIR`.
 *
 * Exit status: 0 restored; 1 the point asked for is older than the oldest one
 * retention kept (both named), the chain is broken (the first problem is printed)
 * or the bucket ends below --txn; 2 bad usage, a non-empty DIR, the bucket or the
 * directory cannot be read or written. On every failure DIR is left as it was
 * found: missing, or empty.
 */
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "bucket/bucket.h"
#include "replica/rebuild.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

/* Reads n digits at *p into *out. */
static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (!isdigit((unsigned char)**p)) return -1;
        v = v * 10 + (**p - '0');
    }
    *out = v;
    return 0;
}

/* TIME as milliseconds since the epoch: all digits (epoch ms), or RFC 3339
   (2026-12-01T18:30:00Z, 2026-12-01T18:30:00.250+01:00; 't', ' ' and 'z' accepted).
   0 on success, -1 when it is neither. */
static int cli_parse_time_ms(const char *s, uint64_t *out)
{
    size_t n = strlen(s);
    if (n > 0 && n <= 16 && strspn(s, "0123456789") == n) {
        *out = strtoull(s, NULL, 10);
        return 0;
    }
    const char *p = s;
    int Y, M, D, h, m, sec, ms = 0;
    if (digits(&p, 4, &Y) || *p++ != '-' || digits(&p, 2, &M) || *p++ != '-' || digits(&p, 2, &D)) return -1;
    if (*p != 'T' && *p != 't' && *p != ' ') return -1;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &m) || *p++ != ':' || digits(&p, 2, &sec)) return -1;
    if (*p == '.') {   /* fraction: milliseconds kept, the rest dropped */
        p++;
        int k = 0;
        for (; isdigit((unsigned char)*p); p++, k++)
            if (k < 3) ms = ms * 10 + (*p - '0');
        if (k == 0) return -1;
        for (; k < 3; k++) ms *= 10;
    }
    long offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59) return -1;
        offset_s = sign * (oh * 3600L + om * 60L);
    } else {
        return -1;   /* RFC 3339 always names the offset */
    }
    if (*p || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60 || Y < 1970) return -1;
    struct tm tm = { .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m,
                     .tm_sec = sec };
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || (long long)t - offset_s < 0) return -1;
    *out = (uint64_t)((long long)t - offset_s) * 1000u + (uint64_t)ms;
    return 0;
}

int cli_restore_main(int argc, char **argv)
{
    const char *url = NULL, *to = NULL, *at = NULL;
    uint64_t txn = 0;
    int quiet = 0;
    cli_opt opts[] = {
        { "bucket", CLI_STR, &url, "the bucket to restore from: file:///path or s3://bucket/prefix" },
        { "to", CLI_STR, &to, "a new or empty directory to restore into" },
        { "txn", CLI_U64, &txn, "restore every record up to this txn, exactly" },
        { "at", CLI_STR, &at, "restore the segments sealed at or before this time: RFC 3339 "
                              "(2026-12-01T18:30:00Z) or epoch milliseconds" },
        { "quiet", CLI_FLAG, &quiet, "no progress lines" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("restore", "Restores a bucket's chain into a fresh data directory, up to a txn or a time; "
                       "writes nothing to the bucket.", opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    uint64_t at_ms = 0;
    if (!url || !to) {
        fprintf(stderr, "hanudb restore: --bucket URL and --to DIR are required\n");
        return 2;
    }
    if (at && txn) {
        fprintf(stderr, "hanudb restore: --at and --txn exclude each other\n");
        return 2;
    }
    if (at && (cli_parse_time_ms(at, &at_ms) != 0 || at_ms == 0)) {
        fprintf(stderr, "hanudb restore: --at %s: not an RFC 3339 time (2026-12-01T18:30:00Z) nor epoch ms\n", at);
        return 2;
    }
    bucket_options bo;
    bucket_options_default(&bo);
    bo.create_root = 0;   /* reading a bucket that is not there is an error, not an empty bucket */
    bucket *b = NULL;
    char err[1024] = "";
    if (bucket_open(url, &bo, &b, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "hanudb restore: %s\n", err);
        return 2;
    }
    /* Before anything is written: a point older than retention kept is refused by
       name, not by the chain reader's "segment 1 is missing". */
    uint64_t oldest_txn = 0, oldest_ms = 0;
    rc = rebuild_oldest_point(b, &oldest_txn, &oldest_ms, err, sizeof err);
    if (rc == HANU_OK && oldest_ms && ((txn && txn < oldest_txn) || (at_ms && at_ms < oldest_ms))) {
        char when[40], asked[64];
        hanu_format_time_ms(oldest_ms, when, sizeof when);
        if (txn) snprintf(asked, sizeof asked, "txn %llu", (unsigned long long)txn);
        else hanu_format_time_ms(at_ms, asked, sizeof asked);
        fprintf(stderr, "hanudb restore: %s is older than the oldest restorable point: txn %llu at %s "
                "(retention removed what came before it; serve --retain sets the window)\n",
                asked, (unsigned long long)oldest_txn, when);
        bucket_close(b);
        return 1;
    }
    if (rc != HANU_OK && rc != HANU_ERR_NOT_FOUND) {
        fprintf(stderr, "hanudb restore: %s\n", err[0] ? err : hanu_status_str(rc));
        bucket_close(b);
        return 2;
    }
    /* Every failure from here on leaves --to as it was found: missing, or empty, and
       without the parents the restore created for it. */
    struct stat tst;
    int existed = stat(to, &tst) == 0, not_ours = rebuild_dir_is_empty(to) != 1;
    char created[8][4096];   /* --to's missing parents, deepest first (at most 8 are undone) */
    int ncreated = 0;
    for (char p[4096]; !existed && ncreated < 8;) {
        snprintf(p, sizeof p, "%s", ncreated ? created[ncreated - 1] : to);
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) break;
        *slash = '\0';
        if (stat(p, &tst) == 0) break;
        snprintf(created[ncreated++], sizeof created[0], "%s", p);
    }
    rebuild_stats st = { 0 };
    uint64_t t0 = hanu_now_ns();
    int status = 0;
    store *s = NULL;
    rebuild_replay_options ro = { .stop_txn = txn, .stop_time_ms = at_ms, .who = "restore",
                                  .quiet = quiet, .no_done_line = 1 };
    rc = rebuild_restore(b, to, &ro, &s, &st, err, sizeof err);
    if (rc) {
        status = rc == HANU_ERR_CORRUPT || rc == HANU_ERR_NOT_FOUND ? 1 : 2;
    }
    store_close(s);
    bucket_close(b);
    st.ms = (hanu_now_ns() - t0) / 1000000;
    if (!status && txn && !st.stopped && st.last_txn < txn) {
        snprintf(err, sizeof err, "the bucket's chain ends at txn %llu, below --txn %llu: the records after it "
                 "never reached the bucket (restore without --txn takes the whole chain)",
                 (unsigned long long)st.last_txn, (unsigned long long)txn);
        status = 1;
    }
    if (status) {
        fprintf(stderr, "hanudb restore: %s\n", err[0] ? err : hanu_status_str(rc));
        if (!not_ours && rebuild_remove_attempt(to, existed) != HANU_OK)
            fprintf(stderr, "hanudb restore: cannot remove what the failed restore wrote into %s\n", to);
        for (int i = 0; i < ncreated; i++) (void)rmdir(created[i]);   /* only while empty */
        return status;
    }
    char snap[96] = "";
    if (st.snapshot_txn)
        snprintf(snap, sizeof snap, "the snapshot of txn %llu and ", (unsigned long long)st.snapshot_txn);
    printf("restored %s: %s%llu segments (%llu records), up to txn %llu, in %llu ms (fetch %llu ms, replay %llu ms, "
           "CPU %llu ms)\n",
           to, snap, (unsigned long long)st.segments, (unsigned long long)st.records,
           (unsigned long long)st.last_txn, (unsigned long long)st.ms, (unsigned long long)st.fetch_ms,
           (unsigned long long)st.replay_ms, (unsigned long long)st.cpu_ms);
    return 0;
}
