/*
 * test_docs.c: the documents layer on a real store: kinds of databases through
 * restart, compaction and hint-file start-up; databases and system records of
 * logs written before kinds; key-value writes into a collection; idempotency
 * records, their lookup and their expiry sweep.
 */
#include "test.h"
#include <dirent.h>
#include <sys/stat.h>
#include "docs/docs.h"
#include "log/log.h"

static store *open_at(const char *dir, char *err)
{
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.prealloc = LOG_PREALLOC_APPEND;
    o.file_size = 1 << 20;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    err[0] = '\0';
    if (store_open(&o, &s, err, 512) != HANU_OK) fprintf(stderr, "  open: %s\n", err);
    return s;
}

static int kind_of(store *s, const char *name, uint8_t *kind)
{
    uint32_t id;
    int rc = store_db_lookup(s, name, strlen(name), &id);
    return rc ? rc : store_db_kind(s, id, kind);
}

static size_t hint_files(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/log", dir);
    DIR *d = opendir(path);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, ".hint") != NULL;
    if (d) closedir(d);
    return n;
}

static void check_kinds(store *s)
{
    uint8_t kind = 0xFF;
    CHECK_EQ(kind_of(s, "default", &kind), HANU_OK);
    CHECK_EQ(kind, STORE_DB_KV);
    CHECK_EQ(kind_of(s, "bytes", &kind), HANU_OK);
    CHECK_EQ(kind, STORE_DB_KV);
    CHECK_EQ(kind_of(s, "users", &kind), HANU_OK);
    CHECK_EQ(kind, STORE_DB_COLLECTION);
    uint32_t db;
    CHECK_EQ(docs_collection_lookup(s, "users", 5, &db), HANU_OK);
    CHECK_EQ(docs_collection_lookup(s, "bytes", 5, &db), HANU_ERR_MISMATCH);
    CHECK_EQ(docs_collection_lookup(s, "default", 7, &db), HANU_ERR_MISMATCH);
    CHECK_EQ(docs_collection_lookup(s, "nope", 4, &db), HANU_ERR_NOT_FOUND);
}

static void test_kinds_survive_restart_compaction_and_hints(void)
{
    char err[512];
    const char *dir = test_tmpdir("docs-kinds");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint64_t txn;
    uint32_t users, again;
    CHECK_EQ(store_db_create(s, "bytes", 5, STORE_DB_KV, &txn), HANU_OK);
    CHECK_EQ(docs_collection_open(s, "users", 5, &users, &txn), HANU_OK);
    CHECK(txn > 0);
    CHECK_EQ(docs_collection_open(s, "users", 5, &again, &txn), HANU_OK);   /* it exists: no write */
    CHECK(again == users && txn == 0);
    CHECK_EQ(docs_collection_open(s, "bytes", 5, &again, &txn), HANU_ERR_MISMATCH);
    CHECK_EQ(store_db_create(s, "odd", 3, STORE_DB_UNTYPED, &txn), HANU_ERR_INVALID);
    /* Overwrites make the first file worth compacting. */
    for (int i = 0; i < 50; i++) {
        store_op op = { STORE_SET, "k", 1, "{\"_id\":\"k\"}", 11 };
        CHECK_EQ(store_write(s, users, &op, 1, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    }
    check_kinds(s);
    store_close(s);

    s = open_at(dir, err);   /* restart: the create records are read again */
    REQUIRE(s);
    check_kinds(s);
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
    CHECK(hint_files(dir) >= 1);
    check_kinds(s);   /* compaction keeps the create records with their kinds */
    store_close(s);

    s = open_at(dir, err);   /* start-up from the hint file */
    REQUIRE(s);
    check_kinds(s);
    store_close(s);
}

/* A log as versions before kinds wrote it: a create record without a value, an
   idempotency record as op 5. */
static void write_old_log(const char *dir, uint64_t now_ms)
{
    char logdir[600];
    snprintf(logdir, sizeof logdir, "%s/log", dir);
    REQUIRE(mkdir(logdir, 0755) == 0);
    log_options o = { .dir = logdir, .file_size = 1 << 20, .prealloc = LOG_PREALLOC_APPEND };
    log_writer *w;
    REQUIRE(log_writer_open(&o, 1, LOG_FILE_HEADER_SIZE, 1, &w) == HANU_OK);
    hanu_buf b = {0};
    uint64_t txn;
    log_location loc;
    uint32_t rotated;
    uint8_t old[10], live[10];
    hanu_put_u64(old, now_ms - 1000);
    hanu_put_u64(live, now_ms + 3600 * 1000);
    hanu_put_u16(old + 8, 200);
    hanu_put_u16(live + 8, 201);
    CHECK_EQ(log_frame_begin(&b), HANU_OK);
    CHECK_EQ(log_frame_add(&b, LOG_OP_CREATE_DB, 1, "legacy", 6, NULL, 0), HANU_OK);
    CHECK_EQ(log_writer_append(w, &b, &txn, &loc, &rotated), HANU_OK);
    CHECK_EQ(log_frame_begin(&b), HANU_OK);
    CHECK_EQ(log_frame_add(&b, LOG_OP_PUT, 1, "a", 1, "not json", 8), HANU_OK);
    CHECK_EQ(log_frame_add(&b, LOG_OP_OLD_SYSTEM_PUT, STORE_SYSTEM_DB_ID, "idem\0legacy\0old", 15, old, 10), HANU_OK);
    CHECK_EQ(log_frame_add(&b, LOG_OP_OLD_SYSTEM_PUT, STORE_SYSTEM_DB_ID, "idem\0legacy\0live", 16, live, 10), HANU_OK);
    CHECK_EQ(log_writer_append(w, &b, &txn, &loc, &rotated), HANU_OK);
    CHECK_EQ(log_writer_flush(w), HANU_OK);
    CHECK_EQ(log_writer_sync(w), HANU_OK);
    log_writer_close(w);
    hanu_buf_free(&b);
}

static void test_old_logs_read_untyped_and_old_system_records(void)
{
    char err[512];
    const char *dir = test_tmpdir("docs-old-log");
    uint64_t now = hanu_wall_ms();
    write_old_log(dir, now);
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint8_t kind = 0xFF;
    CHECK_EQ(kind_of(s, "legacy", &kind), HANU_OK);
    CHECK_EQ(kind, STORE_DB_UNTYPED);
    uint32_t db;
    CHECK_EQ(docs_collection_lookup(s, "legacy", 6, &db), HANU_OK);   /* both faces, as before */
    docs_error e;
    uint64_t txn;
    store_op op = { STORE_SET, "b", 1, "bytes", 5 };
    CHECK_EQ(docs_kv_write(s, db, &op, 1, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_OK);
    /* The op-5 records are puts in the system database, read and swept here. */
    hanu_buf v = {0};
    docs_idem_answer a;
    uint8_t fp[DOCS_IDEM_FINGERPRINT] = {0};
    CHECK_EQ(docs_idem_lookup(s, "idem\0legacy\0live", 16, fp, now, &v, &a), HANU_OK);
    CHECK(a.status == 201 && a.rest_len == 0 && a.location_len == 0);
    CHECK_EQ(docs_idem_lookup(s, "idem\0legacy\0old", 15, fp, now, &v, &a), HANU_ERR_NOT_FOUND);
    size_t n = 0;
    CHECK_EQ(docs_idem_expire(s, now, 100, &n), HANU_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(store_rotate(s), HANU_OK);
    CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
    store_close(s);
    s = open_at(dir, err);
    REQUIRE(s);
    CHECK_EQ(kind_of(s, "legacy", &kind), HANU_OK);
    CHECK_EQ(kind, STORE_DB_UNTYPED);
    CHECK_EQ(docs_idem_lookup(s, "idem\0legacy\0live", 16, fp, now, &v, &a), HANU_OK);
    CHECK_EQ(docs_idem_expire(s, now, 100, &n), HANU_OK);
    CHECK_EQ(n, 0);
    hanu_buf_free(&v);
    store_close(s);
}

static int get_str(store *s, uint32_t db, const char *k, hanu_buf *v)
{
    uint64_t token;
    hanu_buf_reset(v);
    int rc = store_get(s, db, k, strlen(k), v, &token);
    if (rc == HANU_OK) hanu_buf_append(v, "", 1);
    return rc;
}

static void test_kv_writes_into_a_collection_are_documents(void)
{
    char err[512];
    const char *dir = test_tmpdir("docs-kv-write");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint32_t users, bytes;
    uint64_t txn;
    CHECK_EQ(docs_collection_open(s, "users", 5, &users, &txn), HANU_OK);
    CHECK_EQ(store_db_create(s, "bytes", 5, STORE_DB_KV, &txn), HANU_OK);
    CHECK_EQ(store_db_lookup(s, "bytes", 5, &bytes), HANU_OK);
    docs_error e;
    hanu_buf v = {0};
    store_op op = { STORE_SET, "k", 1, "not json", 8 };
    CHECK_EQ(docs_kv_write(s, bytes, &op, 1, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_OK);
    CHECK(e.code == NULL);
    CHECK_EQ(docs_kv_write(s, users, &op, 1, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_ERR_INVALID);
    CHECK(e.code && strcmp(e.code, "invalid_json") == 0 && e.status == 400);
    CHECK(strncmp(e.message, "a collection holds JSON documents: ", 35) == 0);
    op.value = "[1]";
    op.value_len = 3;
    CHECK_EQ(docs_kv_write(s, users, &op, 1, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_ERR_INVALID);
    CHECK(strcmp(e.code, "invalid_request") == 0);
    op.value = "{\"_id\":\"other\"}";
    op.value_len = strlen(op.value);
    CHECK_EQ(docs_kv_write(s, users, &op, 1, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_ERR_INVALID);
    CHECK(strcmp(e.code, "invalid_id") == 0);
    store_op slash = { STORE_SET, "a/b", 3, "{}", 2 };
    CHECK_EQ(docs_kv_write(s, users, &slash, 1, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_ERR_INVALID);
    CHECK(strcmp(e.code, "invalid_id") == 0);
    op.value = "{\"x\":1}";
    op.value_len = 7;
    CHECK_EQ(docs_kv_write(s, users, &op, 1, STORE_COND_NONE, 0, 10, &txn, NULL, &e), HANU_ERR_TOO_LARGE);
    CHECK(e.status == 413);
    CHECK_EQ(get_str(s, users, "k", &v), HANU_ERR_NOT_FOUND);   /* nothing refused was written */
    /* A document is stored as over HTTP: "_id" inserted first, every other byte kept. */
    CHECK_EQ(docs_kv_write(s, users, &op, 1, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_OK);
    CHECK_EQ(get_str(s, users, "k", &v), HANU_OK);
    CHECK(strcmp((char *)v.data, "{\"_id\":\"k\",\"x\":1}") == 0);
    /* A batch: deletes pass, every set is checked, one bad set refuses the whole. */
    store_op batch[3] = { { STORE_SET, "a", 1, "{\"_id\":\"a\"}", 11 }, { STORE_DELETE, "k", 1, NULL, 0 },
                          { STORE_SET, "b", 1, "{}", 2 } };
    CHECK_EQ(docs_kv_write(s, users, batch, 3, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_OK);
    CHECK_EQ(get_str(s, users, "a", &v), HANU_OK);
    CHECK(strcmp((char *)v.data, "{\"_id\":\"a\"}") == 0);
    CHECK_EQ(get_str(s, users, "b", &v), HANU_OK);
    CHECK(strcmp((char *)v.data, "{\"_id\":\"b\"}") == 0);
    CHECK_EQ(get_str(s, users, "k", &v), HANU_ERR_NOT_FOUND);
    batch[2].value = "{";
    batch[2].value_len = 1;
    CHECK_EQ(docs_kv_write(s, users, batch, 3, STORE_COND_NONE, 0, 1024, &txn, NULL, &e), HANU_ERR_INVALID);
    /* Conditions still apply (the store's errors leave e.code NULL). */
    store_op put_k = { STORE_SET, "k", 1, "{}", 2 };
    CHECK_EQ(docs_kv_write(s, users, &put_k, 1, STORE_COND_EXISTS, 0, 1024, &txn, NULL, &e), HANU_ERR_NOT_FOUND);
    CHECK(e.code == NULL);
    hanu_buf_free(&v);
    store_close(s);
}

static void test_idempotency_records_expire(void)
{
    char err[512];
    const char *dir = test_tmpdir("docs-idem");
    store *s = open_at(dir, err);
    REQUIRE(s);
    uint8_t fp[DOCS_IDEM_FINGERPRINT], other[DOCS_IDEM_FINGERPRINT];
    docs_idem_fingerprint("PUT", 3, "/c/users/docs/a", 15, "{}", 2, fp);
    docs_idem_fingerprint("PUT", 3, "/c/users/docs/a", 15, "{ }", 3, other);
    CHECK(memcmp(fp, other, sizeof fp) != 0);
    char key1[DOCS_IDEM_STORE_KEY_MAX], key2[DOCS_IDEM_STORE_KEY_MAX];
    size_t k1 = docs_idem_key("users", NULL, "first", 5, key1);
    size_t k2 = docs_idem_key("users", "0123456789abcdef", "second", 6, key2);
    CHECK(k1 == 5 + 6 + 5 && memcmp(key1, "idem\0users\0first", k1) == 0);
    CHECK(k2 == 5 + 6 + 17 + 6 && memcmp(key2, "idem\0users\0" "0123456789abcdef\0second", k2) == 0);
    hanu_buf r1 = {0}, r2 = {0}, v = {0};
    const char *rest = ",\"_id\":\"a\",\"created\":true}";
    docs_idem_answer a = { 201, (const uint8_t *)"/c/users/docs/a", 15, (const uint8_t *)rest, strlen(rest), 0 };
    uint64_t now = 1000000;
    CHECK_EQ(docs_idem_record(now - 1, &a, fp, &r1), HANU_OK);    /* expired */
    CHECK_EQ(docs_idem_record(now + 1000, &a, fp, &r2), HANU_OK);
    store_op ops[3] = { { STORE_SYSTEM_SET, key1, k1, r1.data, r1.len }, { STORE_SYSTEM_SET, key2, k2, r2.data, r2.len },
                        { STORE_SYSTEM_SET, "other-layer", 11, "x", 1 } };
    uint64_t txn;
    CHECK_EQ(store_write(s, STORE_DEFAULT_DB_ID, ops, 3, STORE_COND_NONE, 0, &txn, NULL), HANU_OK);
    docs_idem_answer got;
    CHECK_EQ(docs_idem_lookup(s, key2, k2, fp, now, &v, &got), HANU_OK);
    CHECK(got.status == 201 && got.txn == txn && got.location_len == 15 && got.rest_len == strlen(rest));
    CHECK(memcmp(got.rest, rest, got.rest_len) == 0 && memcmp(got.location, "/c/users/docs/a", 15) == 0);
    CHECK_EQ(docs_idem_lookup(s, key2, k2, other, now, &v, &got), HANU_ERR_MISMATCH);
    CHECK_EQ(docs_idem_lookup(s, key1, k1, fp, now, &v, &got), HANU_ERR_NOT_FOUND);
    /* The sweep deletes the expired record only; other system records are not its own. */
    size_t n = 0;
    CHECK_EQ(docs_idem_expire(s, now, 100, &n), HANU_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(store_get(s, STORE_SYSTEM_DB_ID, key1, k1, &v, &txn), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_get(s, STORE_SYSTEM_DB_ID, "other-layer", 11, &v, &txn), HANU_OK);
    CHECK_EQ(docs_idem_expire(s, now + 1001, 100, &n), HANU_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(docs_idem_lookup(s, key2, k2, fp, now, &v, &got), HANU_ERR_NOT_FOUND);
    store_close(s);
    s = open_at(dir, err);   /* the deletes are in the log */
    REQUIRE(s);
    CHECK_EQ(store_get(s, STORE_SYSTEM_DB_ID, key2, k2, &v, &txn), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_get(s, STORE_SYSTEM_DB_ID, "other-layer", 11, &v, &txn), HANU_OK);
    store_close(s);
    hanu_buf_free(&r1);
    hanu_buf_free(&r2);
    hanu_buf_free(&v);
}

int main(void)
{
    RUN(test_kinds_survive_restart_compaction_and_hints);
    RUN(test_old_logs_read_untyped_and_old_system_records);
    RUN(test_kv_writes_into_a_collection_are_documents);
    RUN(test_idempotency_records_expire);
    TEST_DONE();
}
