/*
 * manifest: the format of one snapshot manifest, the object that names the
 * files of a physical snapshot in the bucket (docs/FORMATS.md, "Manifest";
 * docs/BUCKET.md, "Snapshots"). Pure: bytes in, bytes out, no I/O.
 *
 *   header (96 bytes) | file entries | trailer: SHA-256 of all before it
 *
 * A manifest says: these files, put in a fresh data directory at these paths,
 * hold every record up to txn; the log continues in the segment chain from
 * replay_sequence (whose previous segment's trailer is prev_hash, so the link
 * can be checked without the older segments). Each file's object is
 * content-addressed: files/<SHA-256 in hex>.
 */
#ifndef HANU_MANIFEST_H
#define HANU_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include "base/base.h"

#define MANIFEST_MAGIC "HMAN"
#define MANIFEST_VERSION 1
#define MANIFEST_HEADER_SIZE 96
#define MANIFEST_HASH_SIZE 32                   /* SHA-256 */
#define MANIFEST_MAX_FILES 100000u
#define MANIFEST_PATH_MAX 255                   /* bytes of a path relative to the data directory */
#define MANIFEST_FILE_MAX (1ull << 40)          /* largest file a manifest may name */
#define MANIFEST_MAX_BYTES (64u << 20)          /* largest manifest object */

typedef struct manifest_file {
    const char *path;                           /* "log/000001.log": NUL-terminated */
    uint64_t size;
    uint8_t sha256[MANIFEST_HASH_SIZE];
} manifest_file;

typedef struct manifest {
    uint64_t txn;                               /* the files hold every record up to it */
    uint64_t index_txn;                         /* the index files cover up to it (0: none included) */
    uint64_t replay_sequence;                   /* the first segment with a record above txn */
    uint8_t prev_hash[MANIFEST_HASH_SIZE];      /* trailer of segment replay_sequence - 1 (zeros for 1) */
    uint64_t created_ms;                        /* wall clock, ms since the epoch */
    uint32_t format_version;                    /* the data directory's (LOG_FORMAT_VERSION) */
    uint32_t file_count;
    uint64_t total_bytes;                       /* sum of the files' sizes */
    manifest_file *files;                       /* sorted by path, paths unique */
    uint8_t hash[MANIFEST_HASH_SIZE];           /* the trailer (decode fills it) */
    char *strings;                              /* decode: the paths point in here */
} manifest;

/* A path a manifest may name: 1..MANIFEST_PATH_MAX bytes of [A-Za-z0-9._-/],
   components separated by one '/', none empty, "." or "..", none starting with '.'. */
int manifest_path_valid(const char *path, size_t len);

/* Appends the encoded manifest to out. files must be sorted by path (strcmp), each
   path valid and unique, counts and sizes within the limits: INVALID otherwise
   (with a message); total_bytes is computed, not taken. */
int manifest_encode(const manifest *m, hanu_buf *out, char *err, size_t errcap);

/* Full validation: magic, version, reserved bytes, length, trailer, every entry
   (path rules, order, sizes, the total). CORRUPT with a precise message. On
   success the caller frees *out with manifest_free. */
int manifest_decode(const uint8_t *data, size_t len, manifest *out, char *err, size_t errcap);
void manifest_free(manifest *m);

/* ---- names in the bucket ---- */
/* "manifests/" and the txn in 20 digits: listing order is txn order. */
#define MANIFEST_KEY_PREFIX "manifests/"
#define MANIFEST_KEY_SIZE (sizeof MANIFEST_KEY_PREFIX + 20)
void manifest_key(uint64_t txn, char out[MANIFEST_KEY_SIZE]);
int manifest_key_parse(const char *key, uint64_t *txn);   /* INVALID for any other key */

/* "files/" and the SHA-256 in 64 lower-case hex digits. */
#define MANIFEST_FILE_KEY_PREFIX "files/"
#define MANIFEST_FILE_KEY_SIZE (sizeof MANIFEST_FILE_KEY_PREFIX + 64)
void manifest_file_key(const uint8_t sha256[MANIFEST_HASH_SIZE], char out[MANIFEST_FILE_KEY_SIZE]);

#endif
