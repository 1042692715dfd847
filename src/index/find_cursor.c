/*
 * find_cursor.c: the text form of a _find cursor (the "after"/"next" of
 * docs/API.md). It is opaque to clients but not secret: base64url (no
 * padding) of
 *
 *   u8 version (1), u64 txn bound, u64 sort fingerprint, u8 keys,
 *   per key: u8 type (0 null, 1 false, 2 true, 3 int64, 4 double bits,
 *            5 string: u16 length, bytes), u16 id length, id bytes,
 *   u64 XXH3-64 of everything before it
 *
 * (little-endian). Decoding checks every length against the limits in
 * index.h, the checksum, and that the cursor was made for the same sort, so
 * an edited, cut or foreign cursor is refused, never half-used.
 *
 * A _search cursor is the same record: one key, the score as double bits, and
 * in place of the sort's fingerprint the query's (another seed, so that no
 * _find cursor passes for a search's).
 */
#include "index/index.h"
#include "query/query.h"

#define CURSOR_VERSION 1
#define CURSOR_SEED 0x48616e7543757273ull   /* "HanuCurs" */
#define SEARCH_HASH_SEED 0x5345415243480001ull
#define CURSOR_RAW_MAX (INDEX_CURSOR_TEXT_MAX / 4 * 3)

enum { CK_NULL, CK_FALSE, CK_TRUE, CK_INT, CK_DOUBLE, CK_STRING };

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

uint64_t index_sort_hash(const sort_spec *sort)
{
    uint64_t h = 0x5eed;
    for (size_t i = 0; sort && i < sort->n; i++) {
        h = hanu_hash64(sort->keys[i].path, strlen(sort->keys[i].path), h);
        h = hanu_hash64(&sort->keys[i].descending, sizeof sort->keys[i].descending, h);
    }
    return h;
}

uint64_t index_search_hash(const search_query *q, const char *const *fields, size_t nfields)
{
    uint64_t h = SEARCH_HASH_SEED;
    for (size_t c = 0; c < q->n; c++) {
        const search_clause *cl = &q->clauses[c];
        uint8_t head[2] = { (uint8_t)cl->occur, (uint8_t)cl->n_tokens };
        h = hanu_hash64(head, sizeof head, h);
        for (uint32_t t = 0; t < cl->n_tokens; t++) h = hanu_hash64(cl->tokens[t], cl->lens[t] + 1, h);   /* with its NUL */
    }
    uint8_t sep = 0xff;   /* not a token byte: the fields cannot pass for a clause */
    h = hanu_hash64(&sep, 1, h);
    for (size_t i = 0; i < nfields; i++) h = hanu_hash64(fields[i], strlen(fields[i]) + 1, h);
    return h;
}

size_t index_cursor_encode(const index_cursor *c, char *out, size_t cap)
{
    uint8_t raw[CURSOR_RAW_MAX];
    size_t n = 0;
    raw[n++] = CURSOR_VERSION;
    hanu_put_u64(raw + n, c->txn_bound); n += 8;
    hanu_put_u64(raw + n, c->sort_hash); n += 8;
    raw[n++] = (uint8_t)c->nkeys;
    for (uint32_t i = 0; i < c->nkeys; i++) {
        const index_cursor_key *k = &c->keys[i];
        switch (k->type) {
        case JSON_BOOL: raw[n++] = k->boolean ? CK_TRUE : CK_FALSE; break;
        case JSON_NUMBER:
            if (k->is_int) { raw[n++] = CK_INT; hanu_put_u64(raw + n, (uint64_t)k->i); }
            else { raw[n++] = CK_DOUBLE; memcpy(raw + n, &k->d, 8); }
            n += 8;
            break;
        case JSON_STRING:
            raw[n++] = CK_STRING;
            hanu_put_u16(raw + n, (uint16_t)k->str_len); n += 2;
            memcpy(raw + n, c->bytes + k->str_off, k->str_len); n += k->str_len;
            break;
        default: raw[n++] = CK_NULL;
        }
    }
    hanu_put_u16(raw + n, (uint16_t)c->id_len); n += 2;
    memcpy(raw + n, c->id, c->id_len); n += c->id_len;
    hanu_put_u64(raw + n, hanu_hash64(raw, n, CURSOR_SEED)); n += 8;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i += 3) {
        uint32_t v = (uint32_t)raw[i] << 16 | (i + 1 < n ? (uint32_t)raw[i + 1] << 8 : 0) | (i + 2 < n ? raw[i + 2] : 0);
        size_t chars = i + 2 < n ? 4 : i + 1 < n ? 3 : 2;
        for (size_t k = 0; k < chars; k++) out[o++] = b64[(v >> (18 - 6 * k)) & 63];
    }
    out[o] = '\0';
    return o;
}

static int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    return ch == '-' ? 62 : ch == '_' ? 63 : -1;
}

/* Decodes a cursor that must have nkeys keys and the fingerprint hash. */
static int cursor_decode(const char *text, size_t len, size_t want, uint64_t hash, index_cursor *c)
{
    uint8_t raw[CURSOR_RAW_MAX];
    size_t n = 0;
    if (len > INDEX_CURSOR_TEXT_MAX || len % 4 == 1) return HANU_ERR_INVALID;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        size_t chars = len - i < 4 ? len - i : 4;
        for (size_t k = 0; k < 4; k++) {
            int d = k < chars ? b64_value(text[i + k]) : 0;
            if (d < 0) return HANU_ERR_INVALID;
            v = v << 6 | (uint32_t)d;
        }
        for (size_t k = 0; k + 1 < chars; k++) raw[n++] = (uint8_t)(v >> (16 - 8 * k));
    }
    if (n < 1 + 8 + 8 + 1 + 2 + 8 || raw[0] != CURSOR_VERSION) return HANU_ERR_INVALID;
    if (hanu_get_u64(raw + n - 8) != hanu_hash64(raw, n - 8, CURSOR_SEED)) return HANU_ERR_INVALID;
    size_t end = n - 8, p = 1;
    memset(c, 0, offsetof(index_cursor, bytes));
    c->txn_bound = hanu_get_u64(raw + p); p += 8;
    c->sort_hash = hanu_get_u64(raw + p); p += 8;
    c->nkeys = raw[p++];
    if (c->nkeys != want || c->sort_hash != hash) return HANU_ERR_INVALID;
    for (uint32_t i = 0; i < c->nkeys; i++) {
        index_cursor_key *k = &c->keys[i];
        if (p >= end) return HANU_ERR_INVALID;
        uint8_t t = raw[p++];
        switch (t) {
        case CK_NULL: k->type = JSON_NULL; break;
        case CK_FALSE: case CK_TRUE: k->type = JSON_BOOL; k->boolean = t == CK_TRUE; break;
        case CK_INT: case CK_DOUBLE:
            if (end - p < 8) return HANU_ERR_INVALID;
            k->type = JSON_NUMBER;
            if (t == CK_INT) { k->is_int = 1; k->i = (int64_t)hanu_get_u64(raw + p); k->d = (double)k->i; }
            else {
                memcpy(&k->d, raw + p, 8);
                if (k->d != k->d || k->d - k->d != 0) return HANU_ERR_INVALID;   /* NaN, infinities */
                k->i = 0;
            }
            p += 8;
            break;
        case CK_STRING: {
            if (end - p < 2) return HANU_ERR_INVALID;
            uint32_t sl = hanu_get_u16(raw + p);
            p += 2;
            if (end - p < sl || sl > sizeof c->bytes - c->used) return HANU_ERR_INVALID;
            memcpy(c->bytes + c->used, raw + p, sl);
            k->type = JSON_STRING;
            k->str_off = c->used;
            k->str_len = sl;
            c->used += sl;
            p += sl;
            break;
        }
        default: return HANU_ERR_INVALID;
        }
    }
    if (end - p < 2) return HANU_ERR_INVALID;
    c->id_len = hanu_get_u16(raw + p);
    p += 2;
    if (c->id_len == 0 || c->id_len > INDEX_CURSOR_ID_MAX || end - p != c->id_len) return HANU_ERR_INVALID;
    memcpy(c->id, raw + p, c->id_len);
    c->id[c->id_len] = '\0';
    return HANU_OK;
}

int index_cursor_decode(const char *text, size_t len, const sort_spec *sort, index_cursor *c)
{
    return cursor_decode(text, len, sort ? sort->n : 0, index_sort_hash(sort), c);
}

int index_search_cursor_decode(const char *text, size_t len, uint64_t query_hash, index_cursor *c)
{
    int rc = cursor_decode(text, len, 1, query_hash, c);
    if (rc) return rc;
    /* a score: a finite double >= 0, as index_search writes it */
    if (c->keys[0].type != JSON_NUMBER || c->keys[0].is_int || !(c->keys[0].d >= 0)) return HANU_ERR_INVALID;
    return HANU_OK;
}
