/*
 * docs_idem.c: idempotency records (docs.h; the format is in docs/FORMATS.md).
 * A record is written in the same log record as the write it remembers, as a
 * put in the store's system database; the store sees opaque bytes, so the
 * expiry that starts every record is read and swept here.
 */
#include "docs/docs.h"

#include <openssl/evp.h>
#include <stdlib.h>

#define IDEM_PREFIX "idem"            /* with its NUL: 5 bytes */
#define IDEM_RECORD_V1 1
#define IDEM_HEAD (8 + 2)             /* expiry, status */

size_t docs_idem_key(const char *collection, const char *scope, const char *key, size_t key_len,
                     char out[DOCS_IDEM_STORE_KEY_MAX])
{
    /* Header values hold no NUL: the forms with and without a scope never meet. */
    size_t cl = strlen(collection), n = sizeof IDEM_PREFIX;
    memcpy(out, IDEM_PREFIX, n);
    memcpy(out + n, collection, cl + 1);
    n += cl + 1;
    if (scope) {
        memcpy(out + n, scope, DOCS_IDEM_SCOPE_LEN);
        out[n + DOCS_IDEM_SCOPE_LEN] = '\0';
        n += DOCS_IDEM_SCOPE_LEN + 1;
    }
    memcpy(out + n, key, key_len);
    return n + key_len;
}

void docs_idem_fingerprint(const char *method, size_t method_len, const char *path, size_t path_len,
                           const char *body, size_t body_len, uint8_t out[DOCS_IDEM_FINGERPRINT])
{
    EVP_MD_CTX *x = EVP_MD_CTX_new();
    if (!x || !EVP_DigestInit_ex(x, EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(x, method, method_len) || !EVP_DigestUpdate(x, " ", 1) ||
        !EVP_DigestUpdate(x, path, path_len) || !EVP_DigestUpdate(x, "\n", 1) ||
        (body_len && !EVP_DigestUpdate(x, body, body_len)) || !EVP_DigestFinal_ex(x, out, NULL))
        memset(out, 0, DOCS_IDEM_FINGERPRINT);   /* out of memory: no fingerprint matches it */
    EVP_MD_CTX_free(x);
}

int docs_idem_record(uint64_t expires_ms, const docs_idem_answer *a, const uint8_t fp[DOCS_IDEM_FINGERPRINT],
                     hanu_buf *out)
{
    uint8_t h[IDEM_HEAD + 1 + DOCS_IDEM_FINGERPRINT + 2];
    hanu_put_u64(h, expires_ms);
    hanu_put_u16(h + 8, (uint16_t)a->status);
    h[IDEM_HEAD] = IDEM_RECORD_V1;
    memcpy(h + IDEM_HEAD + 1, fp, DOCS_IDEM_FINGERPRINT);
    hanu_put_u16(h + IDEM_HEAD + 1 + DOCS_IDEM_FINGERPRINT, (uint16_t)a->location_len);
    hanu_buf_reset(out);
    int rc = hanu_buf_append(out, h, sizeof h);
    if (rc == HANU_OK) rc = hanu_buf_append(out, a->location, a->location_len);
    if (rc == HANU_OK) rc = hanu_buf_append(out, a->rest, a->rest_len);
    return rc;
}

int docs_idem_decode(const uint8_t *rec, size_t len, const uint8_t fp[DOCS_IDEM_FINGERPRINT], uint64_t now_ms,
                     docs_idem_answer *a)
{
    if (len < IDEM_HEAD || hanu_get_u64(rec) < now_ms) return HANU_ERR_NOT_FOUND;
    a->status = hanu_get_u16(rec + 8);
    a->location = NULL;
    a->location_len = 0;
    a->rest = rec + IDEM_HEAD;
    a->rest_len = len - IDEM_HEAD;
    /* Records written before fingerprints (their answer starts with ',') replay as before. */
    if (a->rest_len && a->rest[0] == IDEM_RECORD_V1) {
        size_t head = 1 + DOCS_IDEM_FINGERPRINT + 2;
        size_t ll = a->rest_len >= head ? hanu_get_u16(a->rest + 1 + DOCS_IDEM_FINGERPRINT) : 0;
        if (a->rest_len < head + ll) return HANU_ERR_NOT_FOUND;
        if (memcmp(a->rest + 1, fp, DOCS_IDEM_FINGERPRINT)) return HANU_ERR_MISMATCH;
        a->location = a->rest + head;
        a->location_len = ll;
        a->rest += head + ll;
        a->rest_len -= head + ll;
    }
    return HANU_OK;
}

int docs_idem_lookup(store *st, const char *key, size_t key_len, const uint8_t fp[DOCS_IDEM_FINGERPRINT],
                     uint64_t now_ms, hanu_buf *scratch, docs_idem_answer *a)
{
    hanu_buf_reset(scratch);
    uint64_t txn;
    if (store_get(st, STORE_SYSTEM_DB_ID, key, key_len, scratch, &txn) != HANU_OK) return HANU_ERR_NOT_FOUND;
    int rc = docs_idem_decode(scratch->data, scratch->len, fp, now_ms, a);
    a->txn = txn;
    return rc;
}

/* ---- the expiry sweep ---- */

typedef struct expired_keys {
    uint64_t now_ms;
    size_t max, n;
    hanu_buf keys;       /* the keys, back to back */
    size_t *ends;        /* end of key i in keys */
    int rc;
} expired_keys;

static int collect_expired(void *ctx, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    expired_keys *x = ctx;
    /* The system database may hold other layers' records: only ours are read. */
    if (key_len < sizeof IDEM_PREFIX || memcmp(key, IDEM_PREFIX, sizeof IDEM_PREFIX) != 0) return 0;
    if (value_len < 8 || hanu_get_u64(value) >= x->now_ms) return 0;
    if ((x->rc = hanu_buf_append(&x->keys, key, key_len))) return 1;
    x->ends[x->n++] = x->keys.len;
    return x->n == x->max;
}

int docs_idem_expire(store *st, uint64_t now_ms, size_t max, size_t *expired)
{
    *expired = 0;
    if (!max || store_failed(st)) return HANU_OK;
    expired_keys x = { .now_ms = now_ms, .max = max, .ends = calloc(max, sizeof(size_t)) };
    store_op *ops = calloc(max, sizeof *ops);
    int rc = x.ends && ops ? store_scan(st, STORE_SYSTEM_DB_ID, collect_expired, &x) : HANU_ERR_NOMEM;
    if (rc == HANU_OK) rc = x.rc;
    if (rc == HANU_OK && x.n) {
        for (size_t i = 0, start = 0; i < x.n; start = x.ends[i++])
            ops[i] = (store_op){ STORE_SYSTEM_DELETE, x.keys.data + start, x.ends[i] - start, NULL, 0 };
        uint64_t txn;
        rc = store_write(st, STORE_SYSTEM_DB_ID, ops, x.n, STORE_COND_NONE, 0, &txn, NULL);
        if (rc == HANU_OK) *expired = x.n;
    }
    free(ops);
    free(x.ends);
    hanu_buf_free(&x.keys);
    return rc;
}
