/*
 * test_audit: replica/audit.h on a real file:// bucket holding a chain this test
 * seals itself (segment.h):
 *   - an empty bucket is whole: 0 segments;
 *   - a whole chain of 4: exact segments, records, txns and bytes, and the progress
 *     callback sees the manifests' end (total 0), the listing (total 4) and every segment;
 *   - the stop flag set before, or from the progress callback after the second
 *     segment: STOPPED with exactly that many checked;
 *   - a flipped byte in segment 3: PROBLEM naming it, 2 checked before it;
 *   - a missing segment 2: PROBLEM naming segment 3 (the sequence is not the next);
 *   - a stray object under segments/: PROBLEM naming it, before any segment is read.
 */
#include "test.h"
#include "bucket/bucket.h"
#include "bucket/segment.h"
#include "replica/audit.h"

#include <stdatomic.h>

#define CHAIN 4
#define PER_SEGMENT 5

static bucket *open_bucket(const char *name)
{
    char url[600];
    snprintf(url, sizeof url, "file://%s", test_tmpdir(name));
    bucket_options bo;
    bucket_options_default(&bo);
    bucket *b = NULL;
    char err[256];
    if (bucket_open(url, &bo, &b, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "bucket_open: %s\n", err);
        exit(2);
    }
    return b;
}

/* Seals CHAIN segments of PER_SEGMENT records each into b; their total bytes. */
static uint64_t put_chain(bucket *b)
{
    uint8_t prev[SEGMENT_HASH_SIZE] = { 0 };
    uint64_t txn = 1, total = 0;
    for (uint64_t seq = 1; seq <= CHAIN; seq++) {
        segment_builder sb;
        segment_builder_init(&sb);
        for (int i = 0; i < PER_SEGMENT; i++, txn++) {
            char key[32], value[64];
            int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)txn);
            int vl = snprintf(value, sizeof value, "value of txn %llu", (unsigned long long)txn);
            segment_record r = { .txn = txn, .db = 1, .op = 1, .key = (const uint8_t *)key, .key_len = (uint32_t)kl,
                                 .value = (const uint8_t *)value, .value_len = (uint32_t)vl };
            CHECK_EQ(segment_builder_add(&sb, &r), HANU_OK);
        }
        hanu_buf obj = { 0 };
        segment_header h;
        CHECK_EQ(segment_seal(&sb, seq, prev, 1000 * seq, 3, &obj, &h), HANU_OK);
        memcpy(prev, h.hash, SEGMENT_HASH_SIZE);
        char key[SEGMENT_KEY_SIZE];
        segment_key(seq, key);
        char err[256];
        CHECK_EQ(bucket_put(b, key, obj.data, obj.len, NULL, err, sizeof err), HANU_OK);
        total += obj.len;
        hanu_buf_free(&obj);
        segment_builder_free(&sb);
    }
    return total;
}

typedef struct seen {
    int calls;
    uint64_t last_checked, last_total, first_total;
    uint64_t stop_after;       /* non-zero: set stop once this many are checked */
    _Atomic int stop;
} seen;

static void on_progress(void *ctx, const audit_progress *p)
{
    seen *s = ctx;
    if (!s->calls++) s->first_total = p->segments_total;
    s->last_checked = p->segments_checked;
    s->last_total = p->segments_total;
    if (s->stop_after && p->segments_checked >= s->stop_after) atomic_store(&s->stop, 1);
}

static void test_empty_bucket_is_whole(void)
{
    bucket *b = open_bucket("audit-empty");
    audit_result r;
    CHECK_EQ(audit_bucket(b, NULL, &r), AUDIT_OK);
    CHECK_EQ(r.segments, 0);
    CHECK_EQ(r.snaps.manifests, 0);
    CHECK(r.listed && r.reason[0] == '\0' && r.object[0] == '\0');
    audit_result_free(&r);
    bucket_close(b);
}

static void test_whole_chain(void)
{
    bucket *b = open_bucket("audit-whole");
    uint64_t bytes = put_chain(b);
    seen s = { 0 };
    audit_options o = { .progress = on_progress, .ctx = &s, .stop = &s.stop };
    audit_result r;
    CHECK_EQ(audit_bucket(b, &o, &r), AUDIT_OK);
    CHECK_EQ(r.status, AUDIT_OK);
    CHECK_EQ(r.segments, CHAIN);
    CHECK_EQ(r.records, CHAIN * PER_SEGMENT);
    CHECK_EQ(r.first_txn, 1);
    CHECK_EQ(r.last_txn, CHAIN * PER_SEGMENT);
    CHECK_EQ(r.segment_bytes, bytes);
    CHECK_EQ(r.nkeys, CHAIN);
    CHECK(r.nkeys == CHAIN && strcmp(r.keys[0], "segments/00000000000000000001") == 0);
    CHECK_EQ(s.calls, CHAIN + 2);   /* the manifests done, the listing, each segment */
    CHECK_EQ(s.first_total, 0);
    CHECK_EQ(s.last_checked, CHAIN);
    CHECK_EQ(s.last_total, CHAIN);
    audit_result_free(&r);

    /* Stopped before it starts, then from the callback after the second segment. */
    seen early = { 0 };
    atomic_store(&early.stop, 1);
    audit_options eo = { .stop = &early.stop };
    CHECK_EQ(audit_bucket(b, &eo, &r), AUDIT_STOPPED);
    CHECK_EQ(r.segments, 0);
    audit_result_free(&r);
    seen mid = { .stop_after = 2 };
    audit_options mo = { .progress = on_progress, .ctx = &mid, .stop = &mid.stop };
    CHECK_EQ(audit_bucket(b, &mo, &r), AUDIT_STOPPED);
    CHECK_EQ(r.segments, 2);
    audit_result_free(&r);
    bucket_close(b);
}

static void test_damage_is_named(void)
{
    bucket *b = open_bucket("audit-damage");
    const char *dir = bucket_url(b) + strlen("file://");
    put_chain(b);
    char path[700], err[256];
    snprintf(path, sizeof path, "%s/segments/00000000000000000003", dir);
    FILE *f = fopen(path, "r+b");
    REQUIRE(f);
    fseek(f, 60, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 60, SEEK_SET);
    fputc(c ^ 1, f);
    fclose(f);
    audit_result r;
    CHECK_EQ(audit_bucket(b, NULL, &r), AUDIT_PROBLEM);
    CHECK(strcmp(r.object, "segments/00000000000000000003") == 0);
    CHECK(r.reason[0] != '\0');
    CHECK_EQ(r.segments, 2);
    audit_result_free(&r);

    /* Segment 2 gone: segment 3 does not follow segment 1. */
    CHECK_EQ(bucket_delete(b, "segments/00000000000000000002", err, sizeof err), HANU_OK);
    CHECK_EQ(audit_bucket(b, NULL, &r), AUDIT_PROBLEM);
    CHECK(strcmp(r.object, "segments/00000000000000000003") == 0);
    CHECK_EQ(r.segments, 1);
    audit_result_free(&r);

    /* A stray object under segments/ is named before any segment is read. */
    CHECK_EQ(bucket_put(b, "segments/notes.txt", "x", 1, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(audit_bucket(b, NULL, &r), AUDIT_PROBLEM);
    CHECK(strcmp(r.object, "segments/notes.txt") == 0);
    CHECK(strstr(r.reason, "not a segment object") != NULL);
    CHECK_EQ(r.segments, 0);
    audit_result_free(&r);
    bucket_close(b);
}

int main(void)
{
    RUN(test_empty_bucket_is_whole);
    RUN(test_whole_chain);
    RUN(test_damage_is_named);
    TEST_DONE();
}
