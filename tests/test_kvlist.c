/*
 * test_kvlist.c: the chunked Redis list's records (kvlist.h) on exact bytes: chunks
 * and heads both ways, hostile heads refused, the old one-value format read as one
 * inline chunk, chunk packing at its limits, locating an index across chunk borders,
 * chunk numbers that wrap, and the reclaim pass on a real store (it deletes the
 * chunks and owners of gone lists, and nothing of a live one, also after a restart
 * and a compaction with hints; an expired list's chunks go).
 *
 * `test_kvlist write-old DIR` writes a list in the old format (one op-7 value of
 * 300 elements "old0".."old299", expiring in 2100) as key "old" of the default
 * database of DIR: tests/e2e_resp_lists.py starts a server on it.
 */
#include "test.h"
#include "test_store_util.h"
#include "kvlist/kvlist.h"

#define FAR_MS 4102444800000ull   /* 2100-01-01 */

static void elems_of(kvlist_elem *a, char (*bufs)[16], uint32_t n, const char *prefix)
{
    for (uint32_t i = 0; i < n; i++) {
        snprintf(bufs[i], sizeof bufs[i], "%s%u", prefix, i);
        a[i] = (kvlist_elem){ (const uint8_t *)bufs[i], (uint32_t)strlen(bufs[i]) };
    }
}

static void test_chunk_roundtrip(void)
{
    kvlist_elem a[3] = { { (const uint8_t *)"a", 1 }, { (const uint8_t *)"", 0 }, { (const uint8_t *)"xyz", 3 } };
    hanu_buf b = { 0 };
    REQUIRE(kvlist_chunk_encode(a, 3, &b) == HANU_OK);
    CHECK_EQ(b.len, 4 + 3 * 4 + 4);
    uint32_t n = 0;
    CHECK(kvlist_chunk_valid(b.data, b.len, &n));
    CHECK_EQ(n, 3);
    kvlist_elem back[3];
    kvlist_chunk_split(b.data, 3, back);
    CHECK(back[0].len == 1 && back[0].p[0] == 'a' && back[1].len == 0 && back[2].len == 3 && !memcmp(back[2].p, "xyz", 3));
    for (size_t cut = 0; cut < b.len; cut++) CHECK(!kvlist_chunk_valid(b.data, cut, &n));   /* every cut refused */
    hanu_buf_append(&b, "x", 1);
    CHECK(!kvlist_chunk_valid(b.data, b.len, &n));   /* a byte after the last element */
    hanu_buf_free(&b);
}

static void test_pack_limits(void)
{
    static char bufs[600][16];
    kvlist_elem a[600];
    elems_of(a, bufs, 600, "e");
    CHECK_EQ(kvlist_pack(a, 600, 0), KVLIST_CHUNK_MAX_ELEMS);
    CHECK_EQ(kvlist_pack(a, 600, 1), KVLIST_CHUNK_MAX_ELEMS);
    CHECK_EQ(kvlist_pack(a, 5, 0), 5);
    CHECK_EQ(kvlist_pack(a, 0, 0), 0);
    /* by bytes: 1000-byte elements, 8 fit in 8192 (4 + 8 * 1004 = 8036), not 9 */
    static uint8_t big[1000];
    kvlist_elem b[20];
    for (int i = 0; i < 20; i++) b[i] = (kvlist_elem){ big, sizeof big };
    CHECK_EQ(kvlist_pack(b, 20, 0), 8);
    /* an element past the target still gets a chunk of its own */
    static uint8_t huge[100000];
    kvlist_elem h[2] = { { huge, sizeof huge }, { big, 10 } };
    CHECK_EQ(kvlist_pack(h, 2, 0), 1);
    CHECK_EQ(kvlist_pack(h, 2, 1), 1);   /* from the back: the small one alone (the huge one does not fit with it) */
}

static kvlist_head make_head(uint64_t id, const uint32_t *counts, uint32_t n)
{
    kvlist_head h = { .id = id, .next_seq = n };
    kvlist_head_reserve(&h, n);
    for (uint32_t i = 0; i < n; i++) {
        h.chunks[i] = (kvlist_chunk_ref){ .seq = i, .count = counts[i], .bytes = counts[i] * 3 };
        h.count += counts[i];
        h.bytes += counts[i] * 3;
    }
    h.nchunks = n;
    return h;
}

static void test_head_roundtrip_and_hostile(void)
{
    uint32_t counts[3] = { 256, 10, 256 };
    kvlist_head h = make_head(77, counts, 3);
    hanu_buf b = { 0 };
    REQUIRE(kvlist_head_encode(&h, &b) == HANU_OK);
    CHECK_EQ(b.len, kvlist_head_size(3));
    CHECK_EQ(hanu_get_u32(b.data), KVLIST_MAGIC);
    kvlist_head d;
    REQUIRE(kvlist_head_decode(b.data, b.len, &d) == HANU_OK);
    CHECK(d.id == 77 && d.nchunks == 3 && d.count == 522 && d.bytes == 522 * 3 && d.next_seq == 3);
    CHECK(d.chunks[1].seq == 1 && d.chunks[1].count == 10);
    kvlist_head_free(&d);
    /* hostile: every cut, another version, a chunk of 0 or 257 elements, id 0 */
    for (size_t cut = 0; cut < b.len; cut++) CHECK(kvlist_head_decode(b.data, cut, &d) != HANU_OK);
    b.data[4] = 2;
    CHECK_EQ(kvlist_head_decode(b.data, b.len, &d), HANU_ERR_CORRUPT);
    b.data[4] = KVLIST_VERSION;
    hanu_put_u32(b.data + KVLIST_HEAD_FIXED + 4, 0);
    CHECK_EQ(kvlist_head_decode(b.data, b.len, &d), HANU_ERR_CORRUPT);
    hanu_put_u32(b.data + KVLIST_HEAD_FIXED + 4, KVLIST_CHUNK_MAX_ELEMS + 1);
    CHECK_EQ(kvlist_head_decode(b.data, b.len, &d), HANU_ERR_CORRUPT);
    hanu_put_u32(b.data + KVLIST_HEAD_FIXED + 4, 256);
    hanu_put_u64(b.data + 5, 0);
    CHECK_EQ(kvlist_head_decode(b.data, b.len, &d), HANU_ERR_CORRUPT);
    /* a chunk count past the limit is refused before any allocation */
    hanu_put_u64(b.data + 5, 77);
    hanu_put_u32(b.data + 17, KVLIST_MAX_CHUNKS + 1);
    CHECK_EQ(kvlist_head_decode(b.data, b.len, &d), HANU_ERR_CORRUPT);
    kvlist_head_free(&h);
    hanu_buf_free(&b);
}

static void test_old_format(void)
{
    static char bufs[300][16];
    kvlist_elem a[300];
    elems_of(a, bufs, 300, "old");
    hanu_buf v = { 0 };
    REQUIRE(kvlist_chunk_encode(a, 300, &v) == HANU_OK);
    kvlist_head h;
    REQUIRE(kvlist_head_decode(v.data, v.len, &h) == HANU_OK);
    CHECK(h.id == 0 && h.nchunks == 1 && h.count == 300 && h.inline_value == v.data && h.inline_len == v.len);
    uint64_t bytes = 0;
    for (int i = 0; i < 300; i++) bytes += a[i].len;
    CHECK_EQ(h.bytes, bytes);
    hanu_buf out = { 0 };
    CHECK_EQ(kvlist_chunk_read(NULL, &h, 0, &out), HANU_OK);   /* inline: no store read */
    CHECK(out.len == v.len && !memcmp(out.data, v.data, v.len));
    kvlist_head_free(&h);
    /* damaged old values are refused */
    CHECK_EQ(kvlist_head_decode(v.data, v.len - 1, &h), HANU_ERR_CORRUPT);
    CHECK_EQ(kvlist_head_decode(v.data, 3, &h), HANU_ERR_CORRUPT);
    hanu_buf_free(&v);
    hanu_buf_free(&out);
}

static void test_locate_borders(void)
{
    uint32_t counts[4] = { 3, 256, 1, 100 };
    kvlist_head h = make_head(5, counts, 4);
    struct { uint64_t index; uint32_t chunk, offset; } cases[] = {
        { 0, 0, 0 }, { 2, 0, 2 }, { 3, 1, 0 }, { 258, 1, 255 }, { 259, 2, 0 }, { 260, 3, 0 }, { 359, 3, 99 },
        { 180, 1, 177 },   /* past the middle: found from the back */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t c = 99, o = 99;
        kvlist_locate(&h, cases[i].index, &c, &o);
        CHECK_EQ(c, cases[i].chunk);
        CHECK_EQ(o, cases[i].offset);
    }
    kvlist_head_free(&h);
}

static void test_seq_wraps_past_used(void)
{
    uint32_t counts[2] = { 1, 1 };
    kvlist_head h = make_head(5, counts, 2);   /* seqs 0 and 1 in use */
    h.next_seq = UINT32_MAX;
    CHECK_EQ(kvlist_new_seq(&h), UINT32_MAX);
    CHECK_EQ(kvlist_new_seq(&h), 2);   /* 0 and 1 are skipped */
    kvlist_head_free(&h);
}

/* Writes list id's head (when key) with chunks seqs[0..n) of one element each, and
   its owner (naming db "default" and owner_key) unless owner_key is NULL. */
static void write_list(store *s, const char *key, uint64_t id, const uint32_t *seqs, uint32_t n, const char *owner_key)
{
    store_op ops[16];
    uint8_t types[16] = { 0 };
    uint8_t ckeys[16][KVLIST_CHUNK_KEY_LEN], okey[KVLIST_OWNER_KEY_LEN];
    hanu_buf chunk = { 0 }, head = { 0 }, owner = { 0 };
    kvlist_elem e = { (const uint8_t *)"v", 1 };
    kvlist_chunk_encode(&e, 1, &chunk);
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        kvlist_chunk_key(ckeys[i], id, seqs[i]);
        ops[k++] = (store_op){ STORE_SYSTEM_SET, ckeys[i], sizeof ckeys[i], chunk.data, chunk.len };
    }
    if (owner_key) {
        kvlist_owner_key(okey, id);
        kvlist_owner_encode("default", (const uint8_t *)owner_key, strlen(owner_key), &owner);
        ops[k++] = (store_op){ STORE_SYSTEM_SET, okey, sizeof okey, owner.data, owner.len };
    }
    if (key) {
        kvlist_head h = { .id = id, .next_seq = 100 };
        kvlist_head_reserve(&h, n);
        for (uint32_t i = 0; i < n; i++) h.chunks[i] = (kvlist_chunk_ref){ seqs[i], 1, 1 };
        h.nchunks = n;
        kvlist_head_encode(&h, &head);
        kvlist_head_free(&h);
        types[k] = LOG_TYPE_LIST;
        ops[k++] = (store_op){ STORE_SET, key, strlen(key), head.data, head.len };
    }
    uint64_t txn;
    CHECK_EQ(store_write_typed(s, STORE_DEFAULT_DB_ID, ops, NULL, types, k, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    hanu_buf_free(&chunk);
    hanu_buf_free(&head);
    hanu_buf_free(&owner);
}

static size_t gc_pass(store *s)
{
    uint64_t cursor = 0;
    size_t total = 0, n = 0;
    do {
        CHECK_EQ(kvlist_gc_step(s, &cursor, 3, &n), HANU_OK);   /* small steps: a pass of several */
        total += n;
    } while (cursor != 0);
    return total;
}

static void test_gc_reclaims_only_gone_lists(void)
{
    const char *dir = test_tmpdir("kvlist-gc");
    store *s = test_store_open(dir);
    REQUIRE(s);
    uint32_t seqs[3] = { 0, 1, 2 };
    write_list(s, "live", 1 << 20, seqs, 3, "live");           /* kept whole */
    write_list(s, NULL, 2 << 20, seqs, 2, "gone");            /* its head never written: owner names nothing */
    write_list(s, NULL, 3 << 20, seqs, 2, NULL);              /* chunks without an owner */
    write_list(s, "other", 4 << 20, seqs, 1, "other");        /* then the key is set to a string */
    write_list(s, NULL, 1 << 20, (const uint32_t[]){ 9 }, 1, NULL);   /* a chunk the live head does not list */
    write_list(s, "moved", 5 << 20, seqs, 2, "elsewhere");    /* an owner naming another key */
    store_op set = { STORE_SET, "other", 5, "str", 3 };
    uint64_t txn;
    CHECK_EQ(store_write(s, STORE_DEFAULT_DB_ID, &set, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    uint64_t chunks, owners;
    CHECK_EQ(kvlist_count(s, &chunks, &owners), HANU_OK);
    CHECK(chunks == 3 + 2 + 2 + 1 + 1 + 2 && owners == 4);
    /* 2 + 1 (gone), 2 (no owner), 1 + 1 (other), 1 (seq 9), 2 + 1 (moved) */
    CHECK_EQ(gc_pass(s), 11);
    CHECK_EQ(kvlist_count(s, &chunks, &owners), HANU_OK);
    CHECK(chunks == 3 && owners == 1);
    for (uint32_t i = 0; i < 3; i++) {
        uint8_t key[KVLIST_CHUNK_KEY_LEN];
        kvlist_chunk_key(key, 1 << 20, i);
        uint64_t token;
        CHECK_EQ(store_lookup(s, STORE_SYSTEM_DB_ID, key, sizeof key, &token), HANU_OK);
    }
    CHECK_EQ(gc_pass(s), 0);   /* nothing more */
    store_close(s);
    /* after a restart: the same, and the live list still whole */
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(kvlist_count(s, &chunks, &owners), HANU_OK);
    CHECK(chunks == 3 && owners == 1);
    CHECK_EQ(gc_pass(s), 0);
    /* a compaction of every file (with hints), then a start from the hints: still whole */
    char err[256];
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(store_wait_log_complete(s), HANU_OK);
    CHECK_EQ(store_sync(s), HANU_OK);
    CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
    store_close(s);
    s = test_store_open(dir);
    REQUIRE(s);
    CHECK_EQ(kvlist_count(s, &chunks, &owners), HANU_OK);
    CHECK(chunks == 3 && owners == 1);
    hanu_buf head = { 0 }, chunk = { 0 };
    uint64_t token, expire;
    uint8_t type;
    CHECK_EQ(store_get_typed(s, STORE_DEFAULT_DB_ID, "live", 4, &head, &token, &expire, &type), HANU_OK);
    CHECK_EQ(type, LOG_TYPE_LIST);
    kvlist_head h;
    REQUIRE(kvlist_head_decode(head.data, head.len, &h) == HANU_OK);
    CHECK_EQ(h.nchunks, 3);
    for (uint32_t i = 0; i < h.nchunks; i++) CHECK_EQ(kvlist_chunk_read(s, &h, i, &chunk), HANU_OK);
    kvlist_head_free(&h);
    hanu_buf_free(&chunk);
    /* the live head's key expires: its chunks go */
    uint64_t soon = store_now_ms() + 1;
    store_op again = { STORE_SET, "live", 4, head.data, head.len };
    CHECK_EQ(store_write_typed(s, STORE_DEFAULT_DB_ID, &again, &soon, &type, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    usleep(5000);
    CHECK_EQ(gc_pass(s), 4);
    hanu_buf_free(&head);
    store_close(s);
}

/* The old format's list for tests/e2e_resp_lists.py. */
static int write_old(const char *dir)
{
    store *s = test_store_open(dir);
    if (!s) return 2;
    static char bufs[300][16];
    kvlist_elem a[300];
    elems_of(a, bufs, 300, "old");
    hanu_buf v = { 0 };
    kvlist_chunk_encode(a, 300, &v);
    store_op op = { STORE_SET, "old", 3, v.data, v.len };
    uint64_t expire = FAR_MS, txn;
    uint8_t type = LOG_TYPE_LIST;
    int rc = store_write_typed(s, STORE_DEFAULT_DB_ID, &op, &expire, &type, 1, STORE_COND_NONE, 0, &txn, NULL);
    if (rc == HANU_OK) rc = store_sync(s);
    hanu_buf_free(&v);
    store_close(s);
    return rc == HANU_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "write-old")) return write_old(argv[2]);
    RUN(test_chunk_roundtrip);
    RUN(test_pack_limits);
    RUN(test_head_roundtrip_and_hostile);
    RUN(test_old_format);
    RUN(test_locate_borders);
    RUN(test_seq_wraps_past_used);
    RUN(test_gc_reclaims_only_gone_lists);
    TEST_DONE();
}
