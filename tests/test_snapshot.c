/*
 * test_snapshot.c: the manifest format (src/replica/manifest.h) and snapshots
 * (src/replica/snapshot.h) on a real store in a temporary directory, a real
 * file:// bucket and a real sealer:
 *   - a manifest round-trips; every flipped byte, every truncation and an extra
 *     byte are refused; the encoder refuses unsorted, repeated and invalid paths;
 *   - a snapshot fetched into an empty folder opens with store_open and holds
 *     exactly the keys and values of the store at the snapshot's txn;
 *   - a second snapshot uploads exactly the files the first did not name;
 *   - retention keeps the newest three manifests, exactly the files they name and
 *     the segments from the oldest one's replay sequence on;
 *   - a damaged file object is refused by fetch and by the audit, naming it;
 *   - records written, sealed into a small file and merged by a forced compaction
 *     while a snapshot pins its files are not in that snapshot (merges are held).
 */
#include "test.h"
#include <stdatomic.h>
#include <sys/stat.h>
#include "index/index.h"
#include "bucket/bucket.h"
#include "bucket/segment.h"
#include "replica/manifest.h"
#include "replica/sealer.h"
#include "replica/snapshot.h"
#include "store/store.h"

#include <fcntl.h>

#define WAIT_MS 30000

/* ---- the manifest format ---- */

static void sample_manifest(manifest *m, manifest_file files[3])
{
    memset(m, 0, sizeof *m);
    const char *paths[3] = { "index/COMMIT", "log/000001.log", "log/000002.hint" };
    for (int i = 0; i < 3; i++) {
        files[i].path = paths[i];
        files[i].size = (uint64_t)(i + 1) * 1000;
        for (int j = 0; j < 32; j++) files[i].sha256[j] = (uint8_t)(i * 32 + j);
    }
    m->txn = 1234;
    m->index_txn = 1300;
    m->replay_sequence = 7;
    for (int j = 0; j < 32; j++) m->prev_hash[j] = (uint8_t)(200 + j);
    m->created_ms = 1700000000000ull;
    m->format_version = 1;
    m->file_count = 3;
    m->files = files;
}

static void test_manifest_round_trip(void)
{
    manifest m, d;
    manifest_file files[3];
    sample_manifest(&m, files);
    hanu_buf b = { 0 };
    char err[256] = "";
    REQUIRE(manifest_encode(&m, &b, err, sizeof err) == HANU_OK);
    CHECK_EQ(b.len, MANIFEST_HEADER_SIZE + 3 * (2 + 8 + 32) + strlen("index/COMMIT") + strlen("log/000001.log") +
                    strlen("log/000002.hint") + 32);
    REQUIRE(manifest_decode(b.data, b.len, &d, err, sizeof err) == HANU_OK);
    CHECK_EQ(d.txn, 1234);
    CHECK_EQ(d.index_txn, 1300);
    CHECK_EQ(d.replay_sequence, 7);
    CHECK(memcmp(d.prev_hash, m.prev_hash, 32) == 0);
    CHECK_EQ(d.created_ms, 1700000000000ull);
    CHECK_EQ(d.format_version, 1);
    CHECK_EQ(d.file_count, 3);
    CHECK_EQ(d.total_bytes, 6000);
    for (int i = 0; i < 3; i++) {
        CHECK(strcmp(d.files[i].path, files[i].path) == 0);
        CHECK_EQ(d.files[i].size, files[i].size);
        CHECK(memcmp(d.files[i].sha256, files[i].sha256, 32) == 0);
    }
    manifest_free(&d);

    /* Every byte flipped, every truncation, one byte more: refused. */
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x40;
        CHECK_EQ(manifest_decode(b.data, b.len, &d, err, sizeof err), HANU_ERR_CORRUPT);
        b.data[i] ^= 0x40;
    }
    for (size_t l = 0; l < b.len; l++) CHECK_EQ(manifest_decode(b.data, l, &d, err, sizeof err), HANU_ERR_CORRUPT);
    hanu_buf_append(&b, "", 1);
    CHECK_EQ(manifest_decode(b.data, b.len, &d, err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, "trailer") != NULL);
    hanu_buf_free(&b);

    /* The encoder's refusals. */
    manifest_file bad[3];
    memcpy(bad, files, sizeof bad);
    bad[1].path = "index/COMMIT";   /* repeated */
    m.files = bad;
    CHECK_EQ(manifest_encode(&m, &b, err, sizeof err), HANU_ERR_INVALID);
    bad[1].path = "a";              /* before index/COMMIT */
    CHECK_EQ(manifest_encode(&m, &b, err, sizeof err), HANU_ERR_INVALID);
    bad[1].path = "log/../etc";
    CHECK_EQ(manifest_encode(&m, &b, err, sizeof err), HANU_ERR_INVALID);
    CHECK_EQ(b.len, 0);
    hanu_buf_free(&b);
}

static void test_manifest_paths_and_keys(void)
{
    const char *good[] = { "log/000001.log", "index/seg-3.hix", "COMMIT", "a/b/c", "x-_.y" };
    const char *bad[] = { "", "/log", "log/", "log//a", "./a", "../a", "log/.hidden", "a b", "log/\n", "a\\b" };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) CHECK(manifest_path_valid(good[i], strlen(good[i])));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(!manifest_path_valid(bad[i], strlen(bad[i])));
    char longp[300];
    memset(longp, 'a', sizeof longp);
    CHECK(manifest_path_valid(longp, 255));
    CHECK(!manifest_path_valid(longp, 256));
    char key[MANIFEST_KEY_SIZE];
    uint64_t t = 0;
    manifest_key(42, key);
    CHECK(strcmp(key, "manifests/00000000000000000042") == 0);
    CHECK_EQ(manifest_key_parse(key, &t), HANU_OK);
    CHECK_EQ(t, 42);
    CHECK_EQ(manifest_key_parse("manifests/42", &t), HANU_ERR_INVALID);
    CHECK_EQ(manifest_key_parse("segments/00000000000000000042", &t), HANU_ERR_INVALID);
    uint8_t sha[32];
    for (int i = 0; i < 32; i++) sha[i] = (uint8_t)((i % 16) * 17);
    char fk[MANIFEST_FILE_KEY_SIZE];
    manifest_file_key(sha, fk);
    CHECK(strcmp(fk, "files/00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff") == 0);
}

/* ---- snapshots of a real store ---- */

typedef struct rig {
    char data[600], bucket_dir[700], url[800];
    store *st;
    bucket *b;
    sealer *z;
    snapshotter *sn;
} rig;

/* Retention of the rig: the tests below were written for "the newest three"; the
   window of time has its own test. */
static uint64_t rig_retain_ms = 0, rig_max_bytes = 0;
static uint32_t rig_keep = 3;

static int rig_open(rig *r, const char *name)
{
    memset(r, 0, sizeof *r);
    const char *base = test_tmpdir(name);
    snprintf(r->bucket_dir, sizeof r->bucket_dir, "%s/bucket", base);
    snprintf(r->url, sizeof r->url, "file://%s", r->bucket_dir);
    snprintf(r->data, sizeof r->data, "%s/data", base);
    store_options so;
    store_options_default(&so);
    so.data_dir = r->data;
    so.file_size = 64 << 10;   /* several sealed files */
    so.quiet = 1;
    so.background_compaction = 0;
    char err[512] = "";
    if (store_open(&so, &r->st, err, sizeof err) != HANU_OK) { fprintf(stderr, "  store_open: %s\n", err); return 0; }
    bucket_options bo;
    bucket_options_default(&bo);
    if (bucket_open(r->url, &bo, &r->b, err, sizeof err) != HANU_OK) { fprintf(stderr, "  bucket: %s\n", err); return 0; }
    sealer_options zo;
    sealer_options_default(&zo);
    zo.seal_interval_ms = 10;
    if (sealer_open(r->st, r->b, &zo, &r->z, err, sizeof err) != HANU_OK) { fprintf(stderr, "  sealer: %s\n", err); return 0; }
    snapshot_options o;
    snapshot_options_default(&o);
    o.data_dir = r->data;
    o.every_segments = 0;   /* only when asked */
    o.seal_timeout_ms = WAIT_MS;
    o.retain_ms = rig_retain_ms;
    o.max_bytes = rig_max_bytes;
    o.keep = rig_keep;
    if (snapshot_open(r->st, r->b, r->z, &o, &r->sn, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "  snapshot_open: %s\n", err);
        return 0;
    }
    return 1;
}

static void rig_close(rig *r)
{
    if (r->sn) snapshot_close(r->sn);
    sealer_close(r->z);
    bucket_close(r->b);
    if (r->st) store_close(r->st);
}

/* Writes n values to keys "<tag>-<i % keys>" in db, 200..700 bytes each. */
static void write_keys(store *s, uint32_t db, const char *tag, int n, int keys)
{
    char k[64], v[800];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%s-%d", tag, i % keys);
        int len = snprintf(v, sizeof v, "%s value %d ", tag, i);
        while (len < 200 + (i * 37) % 500) { v[len] = (char)('a' + (i + len) % 26); len++; }
        store_op op = { STORE_SET, k, strlen(k), v, (size_t)len };
        uint64_t txn;
        CHECK_EQ(store_write(s, db, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    }
    CHECK_EQ(store_flush(s), HANU_OK);
}

static void delete_key(store *s, uint32_t db, const char *k)
{
    store_op op = { STORE_DELETE, k, strlen(k), NULL, 0 };
    uint64_t txn;
    CHECK_EQ(store_write(s, db, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    CHECK_EQ(store_flush(s), HANU_OK);
}

/* Every key of every database of a, with its value and token, is in b, and b has no other. */
typedef struct cmp_ctx { store *other; uint32_t db; uint64_t seen, differ; } cmp_ctx;

static int compare_one(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
    cmp_ctx *c = ctx;
    hanu_buf got = { 0 };
    uint64_t token = 0;
    /* store_scan holds a's lock only; b is another store. */
    if (store_get(c->other, c->db, k, kl, &got, &token) != HANU_OK || got.len != vl || memcmp(got.data, v, vl) != 0)
        c->differ++;
    c->seen++;
    hanu_buf_free(&got);
    return 0;
}

static uint64_t same_contents(store *a, store *b)
{
    store_db_info ia[16], ib[16];
    size_t na = store_db_list(a, ia, 16), nb = store_db_list(b, ib, 16);
    CHECK_EQ(na, nb);
    uint64_t keys = 0;
    for (size_t i = 0; i < na && i < nb; i++) {
        CHECK(strcmp(ia[i].name, ib[i].name) == 0);
        CHECK_EQ(ia[i].keys, ib[i].keys);
        cmp_ctx c = { b, ia[i].id, 0, 0 };
        CHECK_EQ(store_scan(a, ia[i].id, compare_one, &c), HANU_OK);
        CHECK_EQ(c.differ, 0);
        CHECK_EQ(c.seen, ia[i].keys);
        keys += c.seen;
    }
    return keys;
}

static store *open_plain(const char *dir)
{
    store_options so;
    store_options_default(&so);
    so.data_dir = dir;
    so.file_size = 64 << 10;
    so.quiet = 1;
    so.background_compaction = 0;
    store *s = NULL;
    char err[512] = "";
    if (store_open(&so, &s, err, sizeof err) != HANU_OK) fprintf(stderr, "  store_open %s: %s\n", dir, err);
    return s;
}

static manifest get_manifest(bucket *b, const char *key)
{
    hanu_buf obj = { 0 };
    manifest m = { 0 };
    char err[256] = "";
    CHECK_EQ(bucket_get(b, key, &obj, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(manifest_decode(obj.data, obj.len, &m, err, sizeof err), HANU_OK);
    hanu_buf_free(&obj);
    return m;
}

static int manifest_names(const manifest *m, const uint8_t sha[32])
{
    for (uint32_t i = 0; i < m->file_count; i++)
        if (!memcmp(m->files[i].sha256, sha, 32)) return 1;
    return 0;
}

static int count(void *ctx, const char *key, uint64_t size)
{
    (void)key;
    (void)size;
    (*(int *)ctx)++;
    return 0;
}

static int count_prefix(bucket *b, const char *prefix)
{
    int n = 0;
    char err[256];
    CHECK_EQ(bucket_list(b, prefix, count, &n, err, sizeof err), HANU_OK);
    return n;
}

static void test_snapshot_fetch_and_second_upload(void)
{
    rig r;
    REQUIRE(rig_open(&r, "snap-fetch"));
    uint32_t users = 0;
    uint64_t txn;
    CHECK_EQ(store_db_create(r.st, "users", 5, STORE_DB_KV, &txn), HANU_OK);
    CHECK_EQ(store_db_lookup(r.st, "users", 5, &users), HANU_OK);
    write_keys(r.st, 0, "k", 600, 300);
    write_keys(r.st, users, "u", 400, 150);
    delete_key(r.st, users, "u-7");
    snapshot_result r1, r2;
    char err[512] = "";
    REQUIRE(snapshot_take(r.sn, &r1, err, sizeof err) == HANU_OK);
    CHECK_EQ(r1.txn, store_last_txn(r.st));
    CHECK(r1.files >= 4);                 /* 64 KB files: several sealed ones */
    CHECK_EQ(r1.files_uploaded, r1.files);
    CHECK_EQ(r1.bytes_uploaded, r1.bytes);
    CHECK_EQ(count_prefix(r.b, "manifests/"), 1);
    CHECK_EQ(count_prefix(r.b, "files/"), (int)r1.files);

    /* Fetch into an empty folder: the same keys, values and tokens. */
    char fetched[700];
    snprintf(fetched, sizeof fetched, "%s-fetched", r.data);
    snapshot_fetched f;
    REQUIRE(snapshot_fetch(r.b, fetched, UINT64_MAX, &f, NULL, NULL, err, sizeof err) == HANU_OK);
    CHECK_EQ(f.txn, r1.txn);
    CHECK_EQ(f.files, r1.files);
    CHECK_EQ(f.bytes, r1.bytes);
    CHECK_EQ(f.replay_sequence, r1.replay_sequence);
    CHECK(f.replay_sequence >= 2);
    CHECK_EQ(f.index_txn, 0);
    store *copy = open_plain(fetched);
    REQUIRE(copy);
    CHECK_EQ(store_last_txn(copy), r1.txn);
    CHECK_EQ(same_contents(r.st, copy), 300 + 149);
    store_close(copy);
    /* Into a folder that is not empty: refused, nothing touched. */
    CHECK_EQ(snapshot_fetch(r.b, fetched, UINT64_MAX, &f, NULL, NULL, err, sizeof err), HANU_ERR_EXISTS);

    /* More writes, a second snapshot: exactly the files the first did not name go up. */
    write_keys(r.st, users, "v", 300, 300);
    REQUIRE(snapshot_take(r.sn, &r2, err, sizeof err) == HANU_OK);
    CHECK(r2.txn > r1.txn);
    manifest m1 = get_manifest(r.b, r1.manifest), m2 = get_manifest(r.b, r2.manifest);
    uint32_t new_files = 0;
    uint64_t new_bytes = 0;
    for (uint32_t i = 0; i < m2.file_count; i++)
        if (!manifest_names(&m1, m2.files[i].sha256)) { new_files++; new_bytes += m2.files[i].size; }
    CHECK_EQ(r2.files, m2.file_count);
    CHECK_EQ(r2.files_uploaded, new_files);
    CHECK_EQ(r2.bytes_uploaded, new_bytes);
    CHECK(new_files >= 1 && new_files < r2.files);
    fprintf(stderr, "  first snapshot %u files %llu bytes; second uploads %u of %u files, %llu of %llu bytes\n",
            r1.files, (unsigned long long)r1.bytes, r2.files_uploaded, r2.files,
            (unsigned long long)r2.bytes_uploaded, (unsigned long long)r2.bytes);

    /* The older snapshot is still there for a restore at its txn. */
    char older[700];
    snprintf(older, sizeof older, "%s-older", r.data);
    REQUIRE(snapshot_fetch(r.b, older, r2.txn - 1, &f, NULL, NULL, err, sizeof err) == HANU_OK);
    CHECK_EQ(f.txn, r1.txn);
    CHECK(strcmp(f.manifest, r1.manifest) == 0);
    CHECK_EQ(snapshot_fetch(r.b, older, r1.txn - 1, &f, NULL, NULL, err, sizeof err), HANU_ERR_NOT_FOUND);
    manifest_free(&m1);
    manifest_free(&m2);
    rig_close(&r);
}

/* Retention: after four snapshots, three manifests, exactly their files, and the
   segments from the oldest kept one's replay sequence on. */
typedef struct seg_range { uint64_t lo, hi; int n; } seg_range;
static int seg_seen(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    seg_range *s = ctx;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK) return 0;
    if (!s->n || seq < s->lo) s->lo = seq;
    if (seq > s->hi) s->hi = seq;
    s->n++;
    return 0;
}

typedef struct files_check { manifest *kept; int n, unnamed; } files_check;
static int file_named(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    files_check *c = ctx;
    int named = 0;
    for (int k = 0; k < 3 && !named; k++)
        for (uint32_t i = 0; i < c->kept[k].file_count && !named; i++) {
            char fk[MANIFEST_FILE_KEY_SIZE];
            manifest_file_key(c->kept[k].files[i].sha256, fk);
            named = strcmp(fk, key) == 0;
        }
    c->unnamed += !named;
    c->n++;
    return 0;
}

static void test_retention(void)
{
    rig r;
    REQUIRE(rig_open(&r, "snap-retention"));
    snapshot_result res[4];
    char err[512] = "";
    for (int i = 0; i < 4; i++) {
        char tag[16];
        snprintf(tag, sizeof tag, "r%d", i);
        write_keys(r.st, 0, tag, 300, 100);
        REQUIRE(snapshot_take(r.sn, &res[i], err, sizeof err) == HANU_OK);
        CHECK_EQ(res[i].deleted_manifests, i == 3 ? 1 : 0);
    }
    CHECK_EQ(count_prefix(r.b, "manifests/"), 3);
    bucket_object_info info;
    CHECK_EQ(bucket_head(r.b, res[0].manifest, &info, err, sizeof err), HANU_ERR_NOT_FOUND);
    manifest kept[3];
    uint32_t named = 0;
    for (int i = 0; i < 3; i++) kept[i] = get_manifest(r.b, res[i + 1].manifest);
    /* distinct objects the three name */
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < kept[k].file_count; i++) {
            int earlier = 0;
            for (int j = 0; j < k && !earlier; j++) earlier = manifest_names(&kept[j], kept[k].files[i].sha256);
            for (uint32_t j = 0; j < i && !earlier; j++) earlier = !memcmp(kept[k].files[j].sha256, kept[k].files[i].sha256, 32);
            named += !earlier;
        }
    files_check fc = { kept, 0, 0 };
    CHECK_EQ(bucket_list(r.b, "files/", file_named, &fc, err, sizeof err), HANU_OK);
    CHECK_EQ(fc.unnamed, 0);
    CHECK_EQ(fc.n, (int)named);
    seg_range sr = { 0, 0, 0 };
    CHECK_EQ(bucket_list(r.b, "segments/", seg_seen, &sr, err, sizeof err), HANU_OK);
    CHECK_EQ(sr.lo, kept[0].replay_sequence);
    CHECK_EQ(sr.n, (int)(sr.hi - sr.lo + 1));
    CHECK_EQ(res[1].deleted_segments + res[2].deleted_segments + res[3].deleted_segments + res[0].deleted_segments,
             kept[0].replay_sequence - 1);

    /* The audit agrees. */
    snapshot_audit_result a;
    CHECK_EQ(snapshot_audit(r.b, &a, err, sizeof err), HANU_OK);
    CHECK_EQ(a.manifests, 3);
    CHECK_EQ(a.files, named);
    CHECK_EQ(a.oldest_replay_sequence, kept[0].replay_sequence);
    /* Stopped (the server's audit at shutdown): before the first file object. */
    _Atomic int stop = 1;
    CHECK_EQ(snapshot_audit_until(r.b, &stop, &a, err, sizeof err), HANU_ERR_STOPPED);
    CHECK_EQ(a.files, 0);
    for (int i = 0; i < 3; i++) manifest_free(&kept[i]);
    rig_close(&r);
}

/* Retention by time: a manifest goes only once a newer one was made before the
   window's start, so every point inside the window stays restorable; before the
   first manifest is that old, the chain from segment 1 stays too. The size guard
   then shortens the window. */
static uint64_t segments_from(bucket *b)
{
    seg_range sr = { 0, 0, 0 };
    char err[256];
    CHECK_EQ(bucket_list(b, "segments/", seg_seen, &sr, err, sizeof err), HANU_OK);
    return sr.n ? sr.lo : 0;
}

static void test_retention_window(void)
{
    rig r;
    rig_retain_ms = 1500;
    rig_keep = 1;
    int opened = rig_open(&r, "snap-window");
    rig_retain_ms = 0;
    rig_keep = 3;
    REQUIRE(opened);
    char err[512] = "";
    snapshot_result a, b, c, d;
    write_keys(r.st, 0, "wa", 200, 50);
    REQUIRE(snapshot_take(r.sn, &a, err, sizeof err) == HANU_OK);
    CHECK_EQ(a.deleted_manifests + a.deleted_segments, 0);
    CHECK_EQ(segments_from(r.b), 1);   /* inside the window: the chain from its start stays */
    CHECK_EQ(a.oldest_txn, a.txn);
    usleep(1600 * 1000);
    write_keys(r.st, 0, "wb", 200, 50);
    REQUIRE(snapshot_take(r.sn, &b, err, sizeof err) == HANU_OK);
    /* a is older than the window, but it is the newest made before the window's
       start: the points between the start and b need it. */
    CHECK_EQ(b.deleted_manifests, 0);
    CHECK_EQ(b.oldest_txn, a.txn);
    CHECK_EQ(segments_from(r.b), a.replay_sequence);   /* the ones before a are outside now */
    write_keys(r.st, 0, "wc", 200, 50);
    REQUIRE(snapshot_take(r.sn, &c, err, sizeof err) == HANU_OK);
    CHECK_EQ(c.deleted_manifests, 0);
    CHECK_EQ(count_prefix(r.b, "manifests/"), 3);
    usleep(1600 * 1000);
    write_keys(r.st, 0, "wd", 200, 50);
    REQUIRE(snapshot_take(r.sn, &d, err, sizeof err) == HANU_OK);
    /* c is now the newest made before the start: a and b go, c and d stay. */
    CHECK_EQ(d.deleted_manifests, 2);
    CHECK_EQ(count_prefix(r.b, "manifests/"), 2);
    bucket_object_info info;
    CHECK_EQ(bucket_head(r.b, c.manifest, &info, err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_head(r.b, b.manifest, &info, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK_EQ(d.oldest_txn, c.txn);
    CHECK_EQ(segments_from(r.b), c.replay_sequence);
    snapshot_audit_result au;
    CHECK_EQ(snapshot_audit(r.b, &au, err, sizeof err), HANU_OK);
    CHECK_EQ(au.oldest_txn, c.txn);
    rig_close(&r);

    /* The size guard: one byte allowed, so everything but the newest goes at once,
       although the window (an hour) would keep it all. */
    rig_retain_ms = 3600 * 1000;
    rig_max_bytes = 1;
    rig_keep = 1;
    opened = rig_open(&r, "snap-guard");
    rig_retain_ms = rig_max_bytes = 0;
    rig_keep = 3;
    REQUIRE(opened);
    write_keys(r.st, 0, "ga", 200, 50);
    REQUIRE(snapshot_take(r.sn, &a, err, sizeof err) == HANU_OK);
    CHECK_EQ(segments_from(r.b), a.replay_sequence - 1);   /* only the chain's last segment before it */
    write_keys(r.st, 0, "gb", 200, 50);
    REQUIRE(snapshot_take(r.sn, &b, err, sizeof err) == HANU_OK);
    CHECK_EQ(b.deleted_manifests, 1);
    CHECK_EQ(count_prefix(r.b, "manifests/"), 1);
    CHECK_EQ(b.oldest_txn, b.txn);
    rig_close(&r);
}

static void test_damaged_file_refused(void)
{
    rig r;
    REQUIRE(rig_open(&r, "snap-damage"));
    char err[512] = "";
    snapshot_fetched f;
    char fetched[700];
    snprintf(fetched, sizeof fetched, "%s-fetched", r.data);
    CHECK_EQ(snapshot_fetch(r.b, fetched, UINT64_MAX, &f, NULL, NULL, err, sizeof err), HANU_ERR_NOT_FOUND);
    write_keys(r.st, 0, "d", 400, 200);
    snapshot_result res;
    REQUIRE(snapshot_take(r.sn, &res, err, sizeof err) == HANU_OK);
    manifest m = get_manifest(r.b, res.manifest);
    REQUIRE(m.file_count >= 2);
    /* One byte of the second file's object flipped on disk. */
    char key[MANIFEST_FILE_KEY_SIZE], path[1200];
    manifest_file_key(m.files[1].sha256, key);
    snprintf(path, sizeof path, "%s/%s", r.bucket_dir, key);
    int fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t byte;
    CHECK_EQ(pread(fd, &byte, 1, 100), 1);
    byte ^= 1;
    CHECK_EQ(pwrite(fd, &byte, 1, 100), 1);
    close(fd);
    CHECK_EQ(snapshot_fetch(r.b, fetched, UINT64_MAX, &f, NULL, NULL, err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, key) != NULL);
    CHECK(strstr(err, m.files[1].path) != NULL);
    CHECK(strstr(err, "SHA-256") != NULL);
    /* Nothing of the failed fetch stays behind as data. */
    char lf[1300];
    snprintf(lf, sizeof lf, "%s/%s", fetched, m.files[0].path);
    CHECK(access(lf, F_OK) != 0);
    snapshot_audit_result a;
    CHECK_EQ(snapshot_audit(r.b, &a, err, sizeof err), HANU_ERR_CORRUPT);
    CHECK(strstr(err, res.manifest) != NULL);
    CHECK(strstr(err, key) != NULL);
    /* A missing object is named too. */
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(snapshot_audit(r.b, &a, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK(strstr(err, "missing") != NULL);
    manifest_free(&m);
    rig_close(&r);
}

/* A snapshot of everything sealed: retention keeps the chain's last segment, and a
   sealer opened again continues the chain from it, the next segment being the one
   the manifest replays from, linked by the hash the manifest recorded. */
static void test_chain_end_kept(void)
{
    rig r;
    REQUIRE(rig_open(&r, "snap-chain-end"));
    char err[512] = "";
    write_keys(r.st, 0, "e", 200, 50);
    snapshot_result res;
    REQUIRE(snapshot_take(r.sn, &res, err, sizeof err) == HANU_OK);
    /* Every segment but the chain's last is below the manifest: deleted. How many
       the sealer made depends on its timing, so they are counted, not assumed. */
    seg_range sr = { 0, 0, 0 };
    CHECK_EQ(bucket_list(r.b, "segments/", seg_seen, &sr, err, sizeof err), HANU_OK);
    CHECK_EQ(sr.n, 1);
    CHECK_EQ(sr.hi, res.replay_sequence - 1);
    CHECK_EQ(res.deleted_segments, sr.hi - 1);
    manifest m = get_manifest(r.b, res.manifest);
    snapshot_close(r.sn);
    r.sn = NULL;
    sealer_close(r.z);
    sealer_options zo;
    sealer_options_default(&zo);
    zo.seal_interval_ms = 10;
    REQUIRE(sealer_open(r.st, r.b, &zo, &r.z, err, sizeof err) == HANU_OK);
    write_keys(r.st, 0, "f", 10, 10);
    CHECK_EQ(store_sync(r.st), HANU_OK);
    CHECK_EQ(sealer_wait(r.z, store_last_txn(r.st), WAIT_MS), HANU_OK);
    char key[SEGMENT_KEY_SIZE];
    segment_key(res.replay_sequence, key);
    hanu_buf obj = { 0 };
    segment_header h;
    CHECK_EQ(bucket_get(r.b, key, &obj, NULL, err, sizeof err), HANU_OK);
    CHECK_EQ(segment_read_header(obj.data, obj.len, &h, err, sizeof err), HANU_OK);
    CHECK(memcmp(h.prev_hash, m.prev_hash, 32) == 0);
    CHECK_EQ(h.first_txn, res.txn + 1);
    hanu_buf_free(&obj);
    manifest_free(&m);
    rig_close(&r);
}

/* A merge between the snapshot's rotation and its links must not put records past
   the manifest's txn into the snapshot. The index-commit step (between the two) writes
   more records, seals them into a small file and forces a compaction, which would
   merge that file into the small one the snapshot's rotation sealed (the merged file
   takes the lower id, below the snapshot's active file). */
typedef struct merge_rig { store *st; int called; uint64_t wrote_up_to; } merge_rig;

static int write_seal_compact(void *ctx, uint64_t txn)
{
    merge_rig *m = ctx;
    (void)txn;
    m->called++;
    write_keys(m->st, 0, "late", 20, 5);   /* keys the snapshot must not hold */
    CHECK_EQ(store_rotate(m->st), HANU_OK);
    m->wrote_up_to = store_last_txn(m->st);
    CHECK_EQ(store_wait_durable(m->st, m->wrote_up_to), HANU_OK);
    char err[512] = "";
    CHECK_EQ(store_compact(m->st, 1, err, sizeof err), HANU_OK);
    return HANU_OK;
}

static void test_no_merge_past_the_snapshot_txn(void)
{
    rig r;
    REQUIRE(rig_open(&r, "snap-merge"));
    snapshot_close(r.sn);   /* reopened with the index-commit step */
    r.sn = NULL;
    merge_rig m = { r.st, 0, 0 };
    snapshot_options o;
    snapshot_options_default(&o);
    o.data_dir = r.data;
    o.index_dir = "index";  /* none there: only the callback matters */
    o.every_segments = 0;
    o.seal_timeout_ms = WAIT_MS;
    o.index_commit = write_seal_compact;
    o.ctx = &m;
    char err[512] = "";
    REQUIRE(snapshot_open(r.st, r.b, r.z, &o, &r.sn, err, sizeof err) == HANU_OK);
    write_keys(r.st, 0, "k", 300, 100);
    CHECK_EQ(store_rotate(r.st), HANU_OK);
    write_keys(r.st, 0, "k", 10, 100);      /* a small file for the snapshot's rotation to seal */
    uint64_t at = store_last_txn(r.st);
    snapshot_result res;
    int rc = snapshot_take(r.sn, &res, err, sizeof err);
    if (rc != HANU_OK) fprintf(stderr, "  snapshot_take: %s\n", err);
    REQUIRE(rc == HANU_OK);
    CHECK_EQ(m.called, 1);
    CHECK_EQ(res.txn, at);
    CHECK(m.wrote_up_to > at);
    /* Merges were held while the snapshot pinned; they go on afterwards. */
    CHECK_EQ(store_compact(r.st, 1, err, sizeof err), HANU_OK);
    char fetched[700];
    snprintf(fetched, sizeof fetched, "%s-fetched", r.data);
    snapshot_fetched f;
    REQUIRE(snapshot_fetch(r.b, fetched, UINT64_MAX, &f, NULL, NULL, err, sizeof err) == HANU_OK);
    CHECK_EQ(f.txn, at);
    store *copy = open_plain(fetched);
    REQUIRE(copy);
    CHECK_EQ(store_last_txn(copy), at);
    hanu_buf got = { 0 };
    uint64_t token = 0;
    CHECK_EQ(store_get(copy, 0, "late-0", 6, &got, &token), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_get(copy, 0, "k-99", 4, &got, &token), HANU_OK);
    CHECK(token <= at);
    hanu_buf_free(&got);
    store_close(copy);
    rig_close(&r);
}

static int index_commit_ok(void *ctx, uint64_t txn)
{
    (void)ctx;
    (void)txn;
    return HANU_OK;
}

static int manifest_has(const manifest *m, const char *path)
{
    for (uint32_t i = 0; i < m->file_count; i++)
        if (!strcmp(m->files[i].path, path)) return 1;
    return 0;
}

/* The index's part of a snapshot is COMMIT and the files it names, nothing else: a
   file no commit names yet may still be being written (a merge's output), and one
   hashed mid-write put an object under a SHA-256 that was not its contents'. */
static void test_index_files_only_as_committed(void)
{
    rig r;
    REQUIRE(rig_open(&r, "snap-index-named"));
    snapshot_close(r.sn);
    r.sn = NULL;
    char idx[700], path[800];
    snprintf(idx, sizeof idx, "%s/index", r.data);
    REQUIRE(mkdir(idx, 0755) == 0);
    index_commit_segment segs[1] = { { .segment = 1, .db = 1, .docs = 1, .deleted = 1, .del_generation = 2 } };
    index_commit c = { .index_txn = 1, .next_file = 3, .nsegments = 1, .segments = segs };
    REQUIRE(index_commit_write(idx, &c) == HANU_OK);
    static const char *const files[] = { "seg-1.hix", "del-1-2", "seg-2.hix", "del-1-1" };   /* the last two: not named */
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", idx, files[i]);
        FILE *f = fopen(path, "w");
        REQUIRE(f);
        fputs(files[i], f);
        fclose(f);
    }
    snapshot_options o;
    snapshot_options_default(&o);
    o.data_dir = r.data;
    o.index_dir = "index";
    o.every_segments = 0;
    o.seal_timeout_ms = WAIT_MS;
    o.index_commit = index_commit_ok;
    char err[512] = "";
    REQUIRE(snapshot_open(r.st, r.b, r.z, &o, &r.sn, err, sizeof err) == HANU_OK);
    write_keys(r.st, 0, "k", 20, 5);
    snapshot_result res;
    int rc = snapshot_take(r.sn, &res, err, sizeof err);
    if (rc != HANU_OK) fprintf(stderr, "  snapshot_take: %s\n", err);
    REQUIRE(rc == HANU_OK);
    manifest m = get_manifest(r.b, res.manifest);
    CHECK(manifest_has(&m, "index/COMMIT"));
    CHECK(manifest_has(&m, "index/seg-1.hix"));
    CHECK(manifest_has(&m, "index/del-1-2"));
    CHECK(!manifest_has(&m, "index/seg-2.hix"));
    CHECK(!manifest_has(&m, "index/del-1-1"));
    manifest_free(&m);
    rig_close(&r);
}

static int index_commit_fails(void *ctx, uint64_t txn)
{
    (void)txn;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return HANU_ERR_IO;
}

/* A snapshot the policy starts that keeps failing backs off: each attempt rotates
   the log into a new (preallocated) file, and a server retrying every second filled
   a disk with 1 115 empty 64 MB files in an hour. */
static void test_failing_policy_snapshot_backs_off(void)
{
    rig r;
    REQUIRE(rig_open(&r, "snap-backoff"));
    snapshot_close(r.sn);
    r.sn = NULL;
    atomic_int attempts = 0;
    snapshot_options o;
    snapshot_options_default(&o);
    o.data_dir = r.data;
    o.index_dir = "index";
    o.every_segments = 1;
    o.interval_ms = 20;            /* due at every check once a segment was sealed */
    o.check_interval_ms = 20;
    o.seal_timeout_ms = WAIT_MS;
    o.index_commit = index_commit_fails;
    o.ctx = &attempts;
    char err[512] = "";
    REQUIRE(snapshot_open(r.st, r.b, r.z, &o, &r.sn, err, sizeof err) == HANU_OK);
    write_keys(r.st, 0, "k", 50, 10);
    uint64_t last = store_last_txn(r.st);
    sealer_seal_upto(r.z, last);
    CHECK_EQ(sealer_wait(r.z, last, WAIT_MS), HANU_OK);
    store_stats before;
    store_get_stats(r.st, &before);
    usleep(1500000);               /* 75 checks */
    store_stats after;
    store_get_stats(r.st, &after);
    int n = atomic_load(&attempts);
    CHECK(n >= 1 && n <= 2);       /* the first, maybe one more after 1 s (the cap: the interval, at least 1 s) */
    CHECK(after.rotations - before.rotations <= (uint64_t)n);
    snapshot_stats st;
    snapshot_get_stats(r.sn, &st);
    CHECK_EQ(st.snapshots, 0);
    CHECK_EQ(st.failures, (uint64_t)n);
    rig_close(&r);
}

int main(void)
{
    RUN(test_manifest_round_trip);
    RUN(test_manifest_paths_and_keys);
    RUN(test_snapshot_fetch_and_second_upload);
    RUN(test_retention);
    RUN(test_retention_window);
    RUN(test_damaged_file_refused);
    RUN(test_chain_end_kept);
    RUN(test_no_merge_past_the_snapshot_txn);
    RUN(test_failing_policy_snapshot_backs_off);
    RUN(test_index_files_only_as_committed);
    TEST_DONE();
}
