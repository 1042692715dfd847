/*
 * hanudb dump --data DIR [--db NAME]: every live document and key of a stopped
 * server's data directory as JSON lines on stdout, database by database:
 *
 *   {"collection":"users","_id":"alice","doc":{...the stored bytes...}}
 *   {"db":"sessions","key":"s1","value":"...","expire_ms":1767225600000}
 *   {"db":"sessions","key":"q","type":"list","elements":["a","b"]}
 *
 * Keys and values that are not UTF-8 text go as "key_base64" / "value_base64", a
 * list with an element that is not as "elements_base64" (every element base64).
 * "expire_ms" (wall-clock ms since the epoch) only for a key with an expiry. A
 * Redis list is read from its chunks (kvlist.h), whose records are not printed.
 * A running server holds its directory (and compacts and merges files under any
 * reader): dump --bucket URL reads a consistent snapshot from its bucket instead,
 * restored into a scratch directory that is removed afterwards. One summary line
 * on stderr. Exit status: 0, 1 no such database (or a broken chain), 2 when the
 * directory or bucket cannot be read (e.g. a server holds the directory).
 */
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "json/json.h"
#include "store/store.h"
#include "bucket/bucket.h"
#include "replica/rebuild.h"
#include "kvlist/kvlist.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dump_ctx {
    const store_db_info *db;
    hanu_buf line;
    uint64_t written;
    int io_error;
    store *s;
    hanu_buf keys, value, chunk;   /* a key-value database: a batch of keys, a value, a list's chunk */
} dump_ctx;

static void write_base64(json_writer *w, const uint8_t *p, size_t n)
{
    size_t cap = 4 * ((n + 2) / 3) + 1;
    unsigned char *enc = malloc(cap);
    if (!enc) {
        w->status = HANU_ERR_NOMEM;
        return;
    }
    int len = EVP_EncodeBlock(enc, p, (int)n);
    json_write_string(w, (const char *)enc, (size_t)len);
    free(enc);
}

/* "name":"text", or "name_base64":"..." when the bytes are not UTF-8. */
static void write_bytes_field(json_writer *w, hanu_buf *b, const char *name, const uint8_t *p, size_t n)
{
    size_t mark = b->len;
    json_writer saved = *w;
    json_write_key(w, name, strlen(name));
    if (json_write_string(w, (const char *)p, n) == HANU_OK) return;
    *w = saved;   /* not UTF-8: undo and write base64 */
    b->len = mark;
    char key[64];
    snprintf(key, sizeof key, "%s_base64", name);
    json_write_key(w, key, strlen(key));
    write_base64(w, p, n);
}

/* Ends the line's object and prints it. */
static int emit_line(dump_ctx *x, json_writer *w)
{
    json_write_object_end(w);
    if (json_writer_status(w) != HANU_OK) return json_writer_status(w);
    hanu_buf *b = &x->line;
    hanu_buf_append(b, "\n", 1);
    if (fwrite(b->data, 1, b->len, stdout) != b->len) {
        x->io_error = 1;
        return HANU_ERR_IO;
    }
    x->written++;
    return HANU_OK;
}

/* "elements":[...] of the list whose head is v, read chunk by chunk; every element
   in base64 under "elements_base64" when one is not UTF-8. */
static int write_list(dump_ctx *x, json_writer *w, const uint8_t *v, size_t n)
{
    kvlist_head h;
    int rc = kvlist_head_decode(v, n, &h);
    if (rc) return rc;
    json_write_key(w, "type", 4);
    json_write_string(w, "list", 4);
    /* the old format: one chunk of any size */
    kvlist_elem *a = malloc(HANU_MAX((uint64_t)KVLIST_CHUNK_MAX_ELEMS, h.id ? 0 : h.count) * sizeof *a);
    if (!a) { kvlist_head_free(&h); return HANU_ERR_NOMEM; }
    for (int base64 = 0; base64 < 2; base64++) {
        size_t mark = x->line.len;
        json_writer saved = *w;
        json_write_key(w, base64 ? "elements_base64" : "elements", base64 ? 15 : 8);
        json_write_array_begin(w);
        for (uint32_t i = 0; rc == HANU_OK && i < h.nchunks && json_writer_status(w) == HANU_OK; i++) {
            rc = kvlist_chunk_read(x->s, &h, i, &x->chunk);
            if (rc) break;
            kvlist_chunk_split(x->chunk.data, h.chunks[i].count, a);
            for (uint32_t k = 0; k < h.chunks[i].count; k++) {
                if (base64) write_base64(w, a[k].p, a[k].len);
                else json_write_string(w, (const char *)a[k].p, a[k].len);
            }
        }
        json_write_array_end(w);
        if (rc || base64 || json_writer_status(w) == HANU_OK) break;
        *w = saved;   /* an element is not UTF-8: all in base64 */
        x->line.len = mark;
    }
    free(a);
    kvlist_head_free(&h);
    return rc;
}

/* One key of a key-value database with its type and expiry (outside the store's lock:
   a list reads its chunks). */
static int dump_key(dump_ctx *x, const uint8_t *key, size_t key_len)
{
    uint64_t token, expire = 0;
    uint8_t type;
    hanu_buf_reset(&x->value);
    int rc = store_get_typed(x->s, x->db->id, key, key_len, &x->value, &token, &expire, &type);
    if (rc == HANU_ERR_NOT_FOUND) return HANU_OK;   /* expired */
    if (rc) return rc;
    hanu_buf *b = &x->line;
    hanu_buf_reset(b);
    json_writer w;
    json_writer_init(&w, b);
    json_write_object_begin(&w);
    json_write_key(&w, "db", 2);
    json_write_string(&w, x->db->name, strlen(x->db->name));
    write_bytes_field(&w, b, "key", key, key_len);
    if (type == LOG_TYPE_LIST) rc = write_list(x, &w, x->value.data, x->value.len);
    else write_bytes_field(&w, b, "value", x->value.data, x->value.len);
    if (rc) return rc;
    if (expire) {
        json_write_key(&w, "expire_ms", 9);
        json_write_int64(&w, (int64_t)expire);
    }
    return emit_line(x, &w);
}

static int collect_key(void *p, const uint8_t *key, size_t key_len, const uint8_t *v, size_t vlen, uint8_t type)
{
    (void)v, (void)vlen, (void)type;
    hanu_buf *keys = p;
    uint16_t l = (uint16_t)key_len;
    if (hanu_buf_append(keys, &l, sizeof l) == HANU_OK) hanu_buf_append(keys, key, key_len);
    return 0;
}

/* A key-value database, a batch of keys at a time (the directory is not written
   while dump holds it: a resumable scan gives each key once). */
static int dump_kv_db(dump_ctx *x)
{
    uint64_t cursor = 0;
    int rc = HANU_OK;
    do {
        hanu_buf_reset(&x->keys);
        rc = store_scan_step(x->s, x->db->id, &cursor, 1024, collect_key, &x->keys);
        for (size_t pos = 0; rc == HANU_OK && pos < x->keys.len;) {
            uint16_t l;
            memcpy(&l, x->keys.data + pos, sizeof l);
            rc = dump_key(x, x->keys.data + pos + sizeof l, l);
            pos += sizeof l + l;
        }
    } while (rc == HANU_OK && cursor != 0);
    return rc;
}

/* One document of a collection (under the store's lock). */
static int dump_one(void *p, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    dump_ctx *x = p;
    hanu_buf *b = &x->line;
    hanu_buf_reset(b);
    json_writer w;
    json_writer_init(&w, b);
    json_write_object_begin(&w);
    json_write_key(&w, "collection", 10);
    json_write_string(&w, x->db->name, strlen(x->db->name));
    write_bytes_field(&w, b, "_id", key, key_len);
    json_write_key(&w, "doc", 3);
    json_write_raw(&w, (const char *)value, value_len);   /* stored documents are valid JSON */
    return emit_line(x, &w);
}

/* Every database (or only one) of an open store as JSON lines: 0, 1 no such
   database, 2 a read or write failed. *records and *dbs count what was printed. */
static int dump_store(store *s, const char *only, uint64_t *records, size_t *dbs_done)
{
    enum { MAX_DBS = 65536 };
    store_db_info *dbs = malloc(MAX_DBS * sizeof *dbs);
    size_t n = dbs ? store_db_list(s, dbs, MAX_DBS) : 0;
    dump_ctx x = { .s = s };
    int found = only == NULL, status = dbs ? 0 : 2;
    for (size_t i = 0; i < n && i < MAX_DBS && status == 0; i++) {
        if (only && strcmp(only, dbs[i].name) != 0) continue;
        found = 1;
        x.db = &dbs[i];
        int rc = dbs[i].kind == STORE_DB_COLLECTION ? store_scan(s, dbs[i].id, dump_one, &x) : dump_kv_db(&x);
        if (rc != HANU_OK) {
            fprintf(stderr, "hanudb dump: %s: %s\n", dbs[i].name, x.io_error ? "write to stdout failed" : hanu_status_str(rc));
            status = 2;
        }
        (*dbs_done)++;
    }
    if (!found) {
        fprintf(stderr, "hanudb dump: no database or collection \"%s\"\n", only);
        status = 1;
    }
    if (fflush(stdout) != 0) status = 2;
    *records = x.written;
    hanu_buf_free(&x.line);
    hanu_buf_free(&x.keys);
    hanu_buf_free(&x.value);
    hanu_buf_free(&x.chunk);
    free(dbs);
    return status;
}

/* --bucket: the chain's end restored into a scratch directory (a consistent read
   snapshot, whatever the server does meanwhile), dumped, removed. */
static int dump_from_bucket(const char *url, const char *scratch, store **s, char *dir,
                            size_t dircap, uint64_t *txn)
{
    bucket_options bo;
    bucket_options_default(&bo);
    bucket *b = NULL;
    char err[1024] = "";
    if (bucket_open(url, &bo, &b, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "hanudb dump: %s\n", err);
        return 2;
    }
    snprintf(dir, dircap, "%s/hanudb-dump-XXXXXX", scratch);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "hanudb dump: cannot make a scratch directory in %s: %s\n", scratch, strerror(errno));
        bucket_close(b);
        dir[0] = '\0';
        return 2;
    }
    rebuild_stats st = { 0 };
    rebuild_replay_options ro = { .who = "hanudb dump", .quiet = 1, .no_done_line = 1 };
    int rc = rebuild_restore(b, dir, &ro, s, &st, err, sizeof err);
    bucket_close(b);
    if (rc) {
        fprintf(stderr, "hanudb dump: reading %s: %s\n", url, err[0] ? err : hanu_status_str(rc));
        return rc == HANU_ERR_CORRUPT || rc == HANU_ERR_NOT_FOUND ? 1 : 2;
    }
    *txn = st.last_txn;
    return 0;
}

int cli_dump_main(int argc, char **argv)
{
    store_options so;
    store_options_default(&so);
    const char *data = so.data_dir, *only = NULL, *url = NULL, *scratch = getenv("TMPDIR");
    if (!scratch || !*scratch) scratch = "/tmp";
    cli_opt opts[] = {
        { "data", CLI_STR, &data, "data directory of a stopped server (default ./data)" },
        { "bucket", CLI_STR, &url, "instead of --data: a consistent read snapshot of a running (or lost) server, "
                                   "as of its bucket's last sealed segment (DATA.bucket by default)" },
        { "scratch", CLI_STR, &scratch, "with --bucket: where the snapshot is restored while it is dumped "
                                        "(default $TMPDIR or /tmp)" },
        { "db", CLI_STR, &only, "only this database or collection" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("dump", "Prints every live document and key as JSON lines.", opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    store *s = NULL;
    char scratch_dir[4200] = "", err[1024] = "";
    uint64_t txn = 0;
    if (url) {
        rc = dump_from_bucket(url, scratch, &s, scratch_dir, sizeof scratch_dir, &txn);
    } else {
        so.data_dir = data;
        so.background_compaction = 0;
        so.quiet = 1;
        rc = store_open(&so, &s, err, sizeof err);
        if (rc == HANU_ERR_BUSY) {
            /* Reading a live directory without the lock is not safe: compaction
               replaces and merges log files, and the active one grows, under the
               reader. The bucket holds an immutable, consistent copy instead. */
            char abs[PATH_MAX];
            if (!realpath(data, abs)) snprintf(abs, sizeof abs, "%s", data);
            fprintf(stderr, "hanudb dump: %s\nhanudb dump: a running server compacts and merges its log files under "
                    "a reader, so dump reads only a stopped one's directory; for a running server: "
                    "hanudb dump --bucket file://%s.bucket (its default bucket, or the --bucket it runs with: a "
                    "consistent snapshot as of the last sealed segment), or POST /c/{collection}/_export\n",
                    err, abs);
        } else if (rc) {
            fprintf(stderr, "hanudb dump: %s\n", err);
        }
        rc = rc ? 2 : 0;
        if (!rc) txn = store_last_txn(s);
    }
    int status = rc;
    uint64_t records = 0;
    size_t dbs = 0;
    if (!status) status = dump_store(s, only, &records, &dbs);
    store_close(s);
    if (scratch_dir[0] && rebuild_remove_attempt(scratch_dir, 0) != HANU_OK)
        fprintf(stderr, "hanudb dump: cannot remove the scratch directory %s\n", scratch_dir);
    if (!rc)
        fprintf(stderr, "hanudb dump: %llu records from %zu databases, %s %s at txn %llu\n",
                (unsigned long long)records, dbs, url ? "bucket" : "data directory", url ? url : data,
                (unsigned long long)txn);
    return status;
}
