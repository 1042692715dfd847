/*
 * fuzz_index_cursor.c: libFuzzer target for the _find cursor decoder
 * (index_cursor_decode in src/index/find_cursor.c), which reads the "after"
 * member of untrusted requests. The first byte picks the sort (0 to 3 keys);
 * the rest is decoded as cursor text: a refusal is HANU_ERR_INVALID, an
 * acceptance must give keys of valid types with their string bytes inside
 * the cursor, an id of 1..INDEX_CURSOR_ID_MAX bytes, and encode back to a
 * text that decodes to the same cursor. The same bytes also build a cursor
 * (id and one string key from the input) that must survive the round trip.
 * The same text goes through the _search cursor decoder
 * (index_search_cursor_decode, the "after" of _search) for a fixed query:
 * an acceptance is one key, a finite score >= 0 (never an integer key), and
 * an id of 1..INDEX_CURSOR_ID_MAX bytes, and it survives its round trip; a
 * search cursor is never a _find cursor of any sort and vice versa.
 */
#include "index/index.h"
#include "query/query.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

static void pick_sort(uint8_t b, sort_spec *s)
{
    static const char *const paths[] = { "ts", "user", "a.b" };
    memset(s, 0, sizeof *s);
    s->n = b % 4;
    for (size_t i = 0; i < s->n; i++) {
        snprintf(s->keys[i].path, sizeof s->keys[i].path, "%s", paths[i]);
        s->keys[i].descending = (b >> (2 + i)) & 1;
    }
}

static void same_cursor(const index_cursor *a, const index_cursor *b)
{
    assert(a->txn_bound == b->txn_bound && a->sort_hash == b->sort_hash && a->nkeys == b->nkeys);
    assert(a->id_len == b->id_len && memcmp(a->id, b->id, a->id_len) == 0);
    for (uint32_t i = 0; i < a->nkeys; i++) {
        const index_cursor_key *x = &a->keys[i], *y = &b->keys[i];
        assert(x->type == y->type);
        if (x->type == JSON_STRING)
            assert(x->str_len == y->str_len && memcmp(a->bytes + x->str_off, b->bytes + y->str_off, x->str_len) == 0);
        if (x->type == JSON_NUMBER) assert(x->is_int == y->is_int && (x->is_int ? x->i == y->i : x->d == y->d));
        if (x->type == JSON_BOOL) assert(x->boolean == y->boolean);
    }
}

static void round_trip(const index_cursor *c, const sort_spec *sort)
{
    static char text[INDEX_CURSOR_TEXT_MAX + 1];
    static index_cursor back;
    size_t n = index_cursor_encode(c, text, sizeof text);
    assert(n > 0 && n <= INDEX_CURSOR_TEXT_MAX && strlen(text) == n);
    assert(index_cursor_decode(text, n, sort, &back) == HANU_OK);
    same_cursor(c, &back);
}

/* The fingerprint of the query "quick +fox" (parsed once). */
static uint64_t fixed_query_hash(void)
{
    static uint64_t h;
    static int done;
    if (!done) {
        search_query q;
        query_error err;
        if (search_query_parse("quick +fox", 10, &q, &err) != HANU_OK) abort();
        h = index_search_hash(&q, NULL, 0);
        search_query_free(&q);
        done = 1;
    }
    return h;
}

static void check_search_cursor(const uint8_t *data, size_t size)
{
    static index_cursor c, back;
    static char text[INDEX_CURSOR_TEXT_MAX + 1];
    uint64_t h = fixed_query_hash();
    int rc = index_search_cursor_decode((const char *)data, size, h, &c);
    if (rc != HANU_OK) { assert(rc == HANU_ERR_INVALID); return; }
    assert(c.nkeys == 1 && c.keys[0].type == JSON_NUMBER && !c.keys[0].is_int);
    assert(c.keys[0].d >= 0 && c.keys[0].d - c.keys[0].d == 0);
    assert(c.sort_hash == h && c.id_len >= 1 && c.id_len <= INDEX_CURSOR_ID_MAX);
    size_t n = index_cursor_encode(&c, text, sizeof text);
    assert(index_search_cursor_decode(text, n, h, &back) == HANU_OK);
    same_cursor(&c, &back);
    for (uint8_t b = 0; b < 16; b++) {   /* no sort of fuzz_index_cursor's takes it */
        sort_spec sort;
        pick_sort(b, &sort);
        assert(index_cursor_decode(text, n, &sort, &back) == HANU_ERR_INVALID);
    }
}

/* A search cursor built from the input (score bits, id bytes), as
 * index_search writes one, decodes back to itself. */
static void built_search_cursor(const uint8_t *data, size_t size)
{
    static index_cursor c, back;
    static char text[INDEX_CURSOR_TEXT_MAX + 1];
    double d;
    if (size < 9) return;
    memcpy(&d, data, 8);
    if (!(d >= 0) || d - d != 0) d = (double)size;   /* scores are finite and >= 0 */
    memset(&c, 0, sizeof c);
    c.txn_bound = size;
    c.sort_hash = fixed_query_hash();
    c.nkeys = 1;
    c.keys[0] = (index_cursor_key){ .type = JSON_NUMBER, .d = d };
    c.id_len = HANU_MIN(size - 8, (size_t)INDEX_CURSOR_ID_MAX);
    memcpy(c.id, data + 8, c.id_len);
    size_t n = index_cursor_encode(&c, text, sizeof text);
    assert(n > 0 && n <= INDEX_CURSOR_TEXT_MAX);
    assert(index_search_cursor_decode(text, n, c.sort_hash, &back) == HANU_OK);
    same_cursor(&c, &back);
    assert(index_search_cursor_decode(text, n, c.sort_hash ^ 1, &back) == HANU_ERR_INVALID);
    static char copy[INDEX_CURSOR_TEXT_MAX + 1];
    memcpy(copy, text, n);
    check_search_cursor((const uint8_t *)copy, n);   /* the accepting side of the checks */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static index_cursor c;
    if (size < 1) return 0;
    sort_spec sort;
    pick_sort(data[0], &sort);
    int rc = index_cursor_decode((const char *)data + 1, size - 1, &sort, &c);
    if (rc == HANU_OK) {
        assert(c.nkeys == sort.n && c.id_len >= 1 && c.id_len <= INDEX_CURSOR_ID_MAX && c.used <= sizeof c.bytes);
        for (uint32_t i = 0; i < c.nkeys; i++) {
            const index_cursor_key *k = &c.keys[i];
            assert(k->type == JSON_NULL || k->type == JSON_NUMBER || k->type == JSON_STRING || k->type == JSON_BOOL);
            if (k->type == JSON_STRING) assert(k->str_off <= c.used && k->str_len <= c.used - k->str_off);
        }
        round_trip(&c, &sort);
        assert(index_search_cursor_decode((const char *)data + 1, size - 1, fixed_query_hash(), &c) == HANU_ERR_INVALID);
    } else {
        assert(rc == HANU_ERR_INVALID);
    }
    check_search_cursor(data, size);
    built_search_cursor(data, size);
    /* a cursor built from the input bytes survives its text form */
    if (sort.n && size > 2) {
        memset(&c, 0, sizeof c);
        c.txn_bound = size;
        c.sort_hash = index_sort_hash(&sort);
        c.nkeys = (uint32_t)sort.n;
        size_t id_len = HANU_MIN(size - 1, (size_t)INDEX_CURSOR_ID_MAX), s_len = HANU_MIN(size - 1, sizeof c.bytes);
        memcpy(c.id, data + 1, id_len);
        c.id_len = id_len;
        memcpy(c.bytes, data + 1, s_len);
        c.used = (uint32_t)s_len;
        c.keys[0] = (index_cursor_key){ .type = JSON_STRING, .str_len = (uint32_t)s_len };
        for (uint32_t i = 1; i < c.nkeys; i++)
            c.keys[i] = (index_cursor_key){ .type = JSON_NUMBER, .is_int = (int)(data[0] & 1), .i = (int64_t)size * 7,
                                            .d = (double)size / 3 };
        round_trip(&c, &sort);
    }
    return 0;
}
