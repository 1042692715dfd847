/*
 * hanudb dump --data DIR [--db NAME]: every live document and key of a stopped
 * server's data directory as JSON lines on stdout, database by database:
 *
 *   {"collection":"users","_id":"alice","doc":{...the stored bytes...}}
 *   {"db":"sessions","key":"s1","value":"..."}
 *
 * Keys and values that are not UTF-8 text go as "key_base64" / "value_base64".
 * Exit status: 0, 2 when the directory cannot be opened (e.g. a server holds it).
 */
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "json/json.h"
#include "store/store.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dump_ctx {
    const store_db_info *db;
    hanu_buf line;
    uint64_t written;
    int io_error;
} dump_ctx;

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

static int dump_one(void *p, const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    dump_ctx *x = p;
    hanu_buf *b = &x->line;
    hanu_buf_reset(b);
    json_writer w;
    json_writer_init(&w, b);
    json_write_object_begin(&w);
    int collection = x->db->kind == STORE_DB_COLLECTION;
    json_write_key(&w, collection ? "collection" : "db", collection ? 10 : 2);
    json_write_string(&w, x->db->name, strlen(x->db->name));
    if (collection) {
        write_bytes_field(&w, b, "_id", key, key_len);
        json_write_key(&w, "doc", 3);
        json_write_raw(&w, (const char *)value, value_len);   /* stored documents are valid JSON */
    } else {
        write_bytes_field(&w, b, "key", key, key_len);
        write_bytes_field(&w, b, "value", value, value_len);
    }
    json_write_object_end(&w);
    if (json_writer_status(&w) != HANU_OK) return json_writer_status(&w);
    hanu_buf_append(b, "\n", 1);
    if (fwrite(b->data, 1, b->len, stdout) != b->len) {
        x->io_error = 1;
        return HANU_ERR_IO;
    }
    x->written++;
    return 0;
}

int cli_dump_main(int argc, char **argv)
{
    store_options so;
    store_options_default(&so);
    const char *data = so.data_dir, *only = NULL;
    cli_opt opts[] = {
        { "data", CLI_STR, &data, "data directory of a stopped server (default ./data)" },
        { "db", CLI_STR, &only, "only this database or collection" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("dump", "Prints every live document and key as JSON lines.", opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    so.data_dir = data;
    so.background_compaction = 0;
    so.quiet = 1;
    store *s = NULL;
    char err[1024] = "";
    if (store_open(&so, &s, err, sizeof err) != HANU_OK) {
        fprintf(stderr, "hanudb dump: %s\n", err);
        return 2;
    }
    enum { MAX_DBS = 65536 };
    store_db_info *dbs = malloc(MAX_DBS * sizeof *dbs);
    size_t n = dbs ? store_db_list(s, dbs, MAX_DBS) : 0;
    dump_ctx x = { 0 };
    int found = only == NULL, status = dbs ? 0 : 2;
    for (size_t i = 0; i < n && i < MAX_DBS && status == 0; i++) {
        if (only && strcmp(only, dbs[i].name) != 0) continue;
        found = 1;
        x.db = &dbs[i];
        rc = store_scan(s, dbs[i].id, dump_one, &x);
        if (rc != HANU_OK) {
            fprintf(stderr, "hanudb dump: %s: %s\n", dbs[i].name, x.io_error ? "write to stdout failed" : hanu_status_str(rc));
            status = 2;
        }
    }
    if (!found) {
        fprintf(stderr, "hanudb dump: no database or collection \"%s\"\n", only);
        status = 1;
    }
    if (fflush(stdout) != 0) status = 2;
    fprintf(stderr, "hanudb dump: %llu records\n", (unsigned long long)x.written);
    hanu_buf_free(&x.line);
    free(dbs);
    store_close(s);
    return status;
}
