/*
 * manifest.c: encoding and validating decoding of snapshot manifests
 * (manifest.h; the layout is in docs/FORMATS.md, "Manifest"). The decoder
 * trusts nothing: the trailer first, then every length against what is left.
 */
#include "replica/manifest.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>

enum {
    OFF_MAGIC = 0,            /* 4 */
    OFF_VERSION = 4,          /* 1, then 3 zero bytes */
    OFF_TXN = 8,
    OFF_INDEX_TXN = 16,
    OFF_REPLAY_SEQUENCE = 24,
    OFF_PREV_HASH = 32,       /* 32 */
    OFF_CREATED = 64,
    OFF_FORMAT_VERSION = 72,  /* u32 */
    OFF_FILE_COUNT = 76,      /* u32 */
    OFF_TOTAL_BYTES = 80,
    OFF_RESERVED = 88,        /* 8, zero */
};
_Static_assert(OFF_RESERVED + 8 == MANIFEST_HEADER_SIZE, "manifest header layout");

/* Per entry: u16 path length | path | u64 size | 32 bytes SHA-256. */
#define ENTRY_FIXED (2 + 8 + MANIFEST_HASH_SIZE)

static int fail(int rc, char *err, size_t errcap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int rc, char *err, size_t errcap, const char *fmt, ...)
{
    if (err && errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int manifest_path_valid(const char *path, size_t len)
{
    if (len == 0 || len > MANIFEST_PATH_MAX) return 0;
    size_t comp = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || path[i] == '/') {
            if (comp == 0) return 0;   /* empty component, leading or trailing '/' */
            comp = 0;
            continue;
        }
        char ch = path[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        if (!ok || (comp == 0 && ch == '.')) return 0;   /* no ".", "..", hidden names */
        comp++;
    }
    return 1;
}

int manifest_encode(const manifest *m, hanu_buf *out, char *err, size_t errcap)
{
    if (m->file_count > MANIFEST_MAX_FILES)
        return fail(HANU_ERR_INVALID, err, errcap, "manifest: %u files, at most %u", m->file_count, MANIFEST_MAX_FILES);
    if (m->txn == 0 || m->replay_sequence == 0)
        return fail(HANU_ERR_INVALID, err, errcap, "manifest: txn and replay sequence must be above 0");
    size_t need = MANIFEST_HEADER_SIZE + MANIFEST_HASH_SIZE;
    uint64_t total = 0;
    for (uint32_t i = 0; i < m->file_count; i++) {
        const manifest_file *f = &m->files[i];
        size_t pl = strlen(f->path);
        if (!manifest_path_valid(f->path, pl))
            return fail(HANU_ERR_INVALID, err, errcap, "manifest: invalid path \"%.300s\"", f->path);
        if (i && strcmp(m->files[i - 1].path, f->path) >= 0)
            return fail(HANU_ERR_INVALID, err, errcap, "manifest: \"%s\" is not after \"%s\"", f->path,
                        m->files[i - 1].path);
        if (f->size > MANIFEST_FILE_MAX)
            return fail(HANU_ERR_INVALID, err, errcap, "manifest: %s is too large", f->path);
        total += f->size;
        need += ENTRY_FIXED + pl;
    }
    if (need > MANIFEST_MAX_BYTES) return fail(HANU_ERR_INVALID, err, errcap, "manifest: over %u bytes", MANIFEST_MAX_BYTES);
    if (hanu_buf_reserve(out, need)) return HANU_ERR_NOMEM;
    uint8_t *start = out->data + out->len, *p = start;
    memset(p, 0, MANIFEST_HEADER_SIZE);
    memcpy(p + OFF_MAGIC, MANIFEST_MAGIC, 4);
    p[OFF_VERSION] = MANIFEST_VERSION;
    hanu_put_u64(p + OFF_TXN, m->txn);
    hanu_put_u64(p + OFF_INDEX_TXN, m->index_txn);
    hanu_put_u64(p + OFF_REPLAY_SEQUENCE, m->replay_sequence);
    memcpy(p + OFF_PREV_HASH, m->prev_hash, MANIFEST_HASH_SIZE);
    hanu_put_u64(p + OFF_CREATED, m->created_ms);
    hanu_put_u32(p + OFF_FORMAT_VERSION, m->format_version);
    hanu_put_u32(p + OFF_FILE_COUNT, m->file_count);
    hanu_put_u64(p + OFF_TOTAL_BYTES, total);
    p += MANIFEST_HEADER_SIZE;
    for (uint32_t i = 0; i < m->file_count; i++) {
        const manifest_file *f = &m->files[i];
        size_t pl = strlen(f->path);
        hanu_put_u16(p, (uint16_t)pl);
        memcpy(p + 2, f->path, pl);
        p += 2 + pl;
        hanu_put_u64(p, f->size);
        memcpy(p + 8, f->sha256, MANIFEST_HASH_SIZE);
        p += 8 + MANIFEST_HASH_SIZE;
    }
    SHA256(start, (size_t)(p - start), p);
    out->len += need;
    return HANU_OK;
}

int manifest_decode(const uint8_t *data, size_t len, manifest *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (len < MANIFEST_HEADER_SIZE + MANIFEST_HASH_SIZE)
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: %zu bytes, shorter than a header and trailer", len);
    if (len > MANIFEST_MAX_BYTES)
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: %zu bytes, at most %u", len, MANIFEST_MAX_BYTES);
    if (memcmp(data + OFF_MAGIC, MANIFEST_MAGIC, 4) != 0)
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: bad magic (not a manifest)");
    if (data[OFF_VERSION] != MANIFEST_VERSION)
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: version %u, this build reads %u", data[OFF_VERSION],
                    MANIFEST_VERSION);
    size_t body = len - MANIFEST_HASH_SIZE;
    uint8_t hash[MANIFEST_HASH_SIZE];
    SHA256(data, body, hash);
    if (memcmp(hash, data + body, MANIFEST_HASH_SIZE) != 0)
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: trailer mismatch (SHA-256 of the %zu bytes before it)",
                    body);
    if (!hanu_is_zero(data + OFF_VERSION + 1, 3) || !hanu_is_zero(data + OFF_RESERVED, 8))
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: reserved header bytes are not zero");
    out->txn = hanu_get_u64(data + OFF_TXN);
    out->index_txn = hanu_get_u64(data + OFF_INDEX_TXN);
    out->replay_sequence = hanu_get_u64(data + OFF_REPLAY_SEQUENCE);
    memcpy(out->prev_hash, data + OFF_PREV_HASH, MANIFEST_HASH_SIZE);
    out->created_ms = hanu_get_u64(data + OFF_CREATED);
    out->format_version = hanu_get_u32(data + OFF_FORMAT_VERSION);
    out->file_count = hanu_get_u32(data + OFF_FILE_COUNT);
    out->total_bytes = hanu_get_u64(data + OFF_TOTAL_BYTES);
    memcpy(out->hash, data + body, MANIFEST_HASH_SIZE);
    if (out->txn == 0 || out->replay_sequence == 0)
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: txn %" PRIu64 " and replay sequence %" PRIu64
                    " must be above 0", out->txn, out->replay_sequence);
    uint32_t n = out->file_count;
    if (n > MANIFEST_MAX_FILES || (uint64_t)n * ENTRY_FIXED > body - MANIFEST_HEADER_SIZE)
        return fail(HANU_ERR_CORRUPT, err, errcap, "manifest: %u files do not fit in %zu bytes", n, len);
    out->files = calloc(n ? n : 1, sizeof *out->files);
    out->strings = malloc(body - MANIFEST_HEADER_SIZE + 1);   /* every path with its NUL fits */
    if (!out->files || !out->strings) { manifest_free(out); return HANU_ERR_NOMEM; }
    const uint8_t *p = data + MANIFEST_HEADER_SIZE, *end = data + body;
    char *s = out->strings;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        int rc = HANU_ERR_CORRUPT;
        if ((size_t)(end - p) < ENTRY_FIXED) {
            fail(rc, err, errcap, "manifest: entry %u is cut short", i);
            goto bad;
        }
        size_t pl = hanu_get_u16(p);
        if ((size_t)(end - p) < ENTRY_FIXED + pl) {
            fail(rc, err, errcap, "manifest: entry %u's path of %zu bytes passes the end", i, pl);
            goto bad;
        }
        if (!manifest_path_valid((const char *)p + 2, pl)) {
            fail(rc, err, errcap, "manifest: entry %u has an invalid path", i);
            goto bad;
        }
        memcpy(s, p + 2, pl);
        s[pl] = '\0';
        manifest_file *f = &out->files[i];
        f->path = s;
        s += pl + 1;
        if (i && strcmp(out->files[i - 1].path, f->path) >= 0) {
            fail(rc, err, errcap, "manifest: entry %u (%s) is not after %s", i, f->path, out->files[i - 1].path);
            goto bad;
        }
        p += 2 + pl;
        f->size = hanu_get_u64(p);
        memcpy(f->sha256, p + 8, MANIFEST_HASH_SIZE);
        p += 8 + MANIFEST_HASH_SIZE;
        if (f->size > MANIFEST_FILE_MAX) {
            fail(rc, err, errcap, "manifest: %s has %" PRIu64 " bytes, over the limit", f->path, f->size);
            goto bad;
        }
        total += f->size;
    }
    if (p != end) {
        fail(HANU_ERR_CORRUPT, err, errcap, "manifest: %zu bytes after the last entry", (size_t)(end - p));
        goto bad;
    }
    if (total != out->total_bytes) {
        fail(HANU_ERR_CORRUPT, err, errcap, "manifest: files add up to %" PRIu64 " bytes, the header says %" PRIu64,
             total, out->total_bytes);
        goto bad;
    }
    return HANU_OK;
bad:
    manifest_free(out);
    return HANU_ERR_CORRUPT;
}

void manifest_free(manifest *m)
{
    free(m->files);
    free(m->strings);
    m->files = NULL;
    m->strings = NULL;
}

void manifest_key(uint64_t txn, char out[MANIFEST_KEY_SIZE])
{
    snprintf(out, MANIFEST_KEY_SIZE, MANIFEST_KEY_PREFIX "%020" PRIu64, txn);
}

int manifest_key_parse(const char *key, uint64_t *txn)
{
    size_t plen = sizeof MANIFEST_KEY_PREFIX - 1;
    if (strlen(key) != plen + 20 || strncmp(key, MANIFEST_KEY_PREFIX, plen) != 0) return HANU_ERR_INVALID;
    uint64_t v = 0;
    for (const char *p = key + plen; *p; p++) {
        uint64_t digit = (uint64_t)(*p - '0');
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - digit) / 10) return HANU_ERR_INVALID;
        v = v * 10 + digit;
    }
    *txn = v;
    return HANU_OK;
}

void manifest_file_key(const uint8_t sha256[MANIFEST_HASH_SIZE], char out[MANIFEST_FILE_KEY_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    memcpy(out, MANIFEST_FILE_KEY_PREFIX, sizeof MANIFEST_FILE_KEY_PREFIX - 1);
    char *p = out + sizeof MANIFEST_FILE_KEY_PREFIX - 1;
    for (int i = 0; i < MANIFEST_HASH_SIZE; i++) {
        *p++ = hex[sha256[i] >> 4];
        *p++ = hex[sha256[i] & 15];
    }
    *p = '\0';
}
