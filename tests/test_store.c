/*
 * test_store.c: the store end to end on real files: writes, reads, tokens,
 * batches, conditions, databases, reopen, torn tails, damage in sealed files,
 * compaction with hint files, for every preallocation mode.
 */
#include "test.h"
#include <fcntl.h>
#include <dirent.h>
#include <sys/stat.h>
#include "store/store.h"
#include "log/log.h"

static int salvage_next_open;   /* the next open_store passes --salvage */

static store *open_store(const char *dir, int prealloc, uint64_t file_size, char *err)
{
    store_options o;
    store_options_default(&o);
    o.salvage = salvage_next_open;
    salvage_next_open = 0;
    o.data_dir = dir;
    o.prealloc = prealloc;
    o.file_size = file_size;
    o.quiet = 1;
    o.background_compaction = 0;
    store *s = NULL;
    err[0] = '\0';
    if (store_open(&o, &s, err, 512) != HANU_OK) return NULL;
    return s;
}

static int put(store *s, uint32_t db, const char *k, const char *v, uint64_t *txn)
{
    store_op op = { STORE_SET, k, strlen(k), v, strlen(v) };
    uint64_t t = 0;
    int rc = store_write(s, db, &op, 1, STORE_COND_NONE, 0, &t, NULL);
    if (txn) *txn = t;
    return rc;
}

static int get_str(store *s, uint32_t db, const char *k, char *out, size_t cap, uint64_t *tok)
{
    hanu_buf b = {0};
    uint64_t t = 0;
    int rc = store_get(s, db, k, strlen(k), &b, &t);
    if (rc == HANU_OK) {
        size_t n = b.len < cap - 1 ? b.len : cap - 1;
        memcpy(out, b.data, n);
        out[n] = '\0';
        if (tok) *tok = t;
    }
    hanu_buf_free(&b);
    return rc;
}

static void each_mode_round_trip(int mode)
{
    char err[512], v[64];
    const char *dir = test_tmpdir(log_prealloc_name(mode));
    store *s = open_store(dir, mode, 1 << 20, err);
    REQUIRE(s);
    uint64_t t1, t2, t3, tok;
    CHECK_EQ(put(s, 0, "a", "1", &t1), HANU_OK);
    CHECK_EQ(put(s, 0, "b", "2", &t2), HANU_OK);
    CHECK_EQ(put(s, 0, "a", "3", &t3), HANU_OK);
    CHECK_EQ(t2, t1 + 1);
    CHECK_EQ(t3, t2 + 1);
    CHECK_EQ(get_str(s, 0, "a", v, sizeof v, &tok), HANU_OK);
    CHECK(strcmp(v, "3") == 0);
    CHECK_EQ(tok, t3);
    CHECK_EQ(get_str(s, 0, "zz", v, sizeof v, &tok), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_sync(s), HANU_OK);
    CHECK(store_durable_txn(s) >= t3);
    store_close(s);

    s = open_store(dir, mode, 1 << 20, err);
    REQUIRE(s);
    CHECK_EQ(get_str(s, 0, "a", v, sizeof v, &tok), HANU_OK);
    CHECK(strcmp(v, "3") == 0);
    CHECK_EQ(tok, t3);
    CHECK_EQ(get_str(s, 0, "b", v, sizeof v, &tok), HANU_OK);
    CHECK_EQ(tok, t2);
    uint64_t t4;
    CHECK_EQ(put(s, 0, "c", "4", &t4), HANU_OK);
    CHECK_EQ(t4, t3 + 1);
    store_close(s);
}

static void test_round_trip_zerofill(void) { each_mode_round_trip(LOG_PREALLOC_ZEROFILL); }
static void test_round_trip_append(void) { each_mode_round_trip(LOG_PREALLOC_APPEND); }
static void test_round_trip_fallocate(void) { each_mode_round_trip(LOG_PREALLOC_FALLOCATE); }

static void test_conditions_and_tokens(void)
{
    char err[512], v[64];
    store *s = open_store(test_tmpdir("cond"), LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    store_op op = { STORE_SET, "k", 1, "v1", 2 };
    uint64_t t = 0, cur = 0, t1;
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_EXISTS, 0, &t, NULL), HANU_ERR_NOT_FOUND);
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_NOT_EXISTS, 0, &t1, NULL), HANU_OK);
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_NOT_EXISTS, 0, &t, NULL), HANU_ERR_EXISTS);
    op.value = "v2";
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_TOKEN, t1 + 100, &t, &cur), HANU_ERR_MISMATCH);
    CHECK_EQ(cur, t1);
    uint64_t t2;
    CHECK_EQ(store_write(s, 0, &op, 1, STORE_COND_TOKEN, t1, &t2, &cur), HANU_OK);
    CHECK_EQ(t2, t1 + 1);   /* refused writes use no txn */
    CHECK_EQ(get_str(s, 0, "k", v, sizeof v, NULL), HANU_OK);
    CHECK(strcmp(v, "v2") == 0);
    store_op del = { STORE_DELETE, "k", 1, NULL, 0 };
    CHECK_EQ(store_write(s, 0, &del, 1, STORE_COND_TOKEN, t1, &t, &cur), HANU_ERR_MISMATCH);
    CHECK_EQ(store_write(s, 0, &del, 1, STORE_COND_TOKEN, t2, &t, &cur), HANU_OK);
    CHECK_EQ(store_write(s, 0, &del, 1, STORE_COND_EXISTS, 0, &t, &cur), HANU_ERR_NOT_FOUND);
    /* Without a condition a delete of a missing key is applied, alone as in a batch. */
    CHECK_EQ(store_write(s, 0, &del, 1, STORE_COND_NONE, 0, &t, &cur), HANU_OK);
    CHECK_EQ(get_str(s, 0, "k", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    store_op empty = { STORE_SET, "", 0, "x", 1 };
    CHECK_EQ(store_write(s, 0, &empty, 1, STORE_COND_NONE, 0, &t, NULL), HANU_ERR_INVALID);
    char big[2000];
    memset(big, 'k', sizeof big);
    store_op longkey = { STORE_SET, big, sizeof big, "x", 1 };
    CHECK_EQ(store_write(s, 0, &longkey, 1, STORE_COND_NONE, 0, &t, NULL), HANU_ERR_TOO_LARGE);
    store_close(s);
}

/* After a crash the numbering resumes above txns that may have been handed out;
   store_last_record_txn still names the newest record (what the index reaches). */
static void test_last_record_txn_after_crash(void)
{
    const char *dir = test_tmpdir("lastrec");
    char err[512];
    store *s = open_store(dir, LOG_PREALLOC_ZEROFILL, 0, err);
    REQUIRE(s);
    CHECK_EQ(store_last_record_txn(s), store_last_txn(s));
    uint64_t txn = 0;
    REQUIRE(store_write(s, 0, &(store_op){ STORE_SET, "k", 1, "v", 1 }, 1, STORE_COND_NONE, 0, &txn, NULL) == HANU_OK);
    CHECK_EQ(store_last_record_txn(s), txn);
    store_close(s);
    pid_t pid = fork();
    if (pid == 0) {   /* writes one more, synced, and dies without closing */
        store *c = open_store(dir, LOG_PREALLOC_ZEROFILL, 0, err);
        uint64_t t = 0;
        if (!c || store_write(c, 0, &(store_op){ STORE_SET, "k", 1, "w", 1 }, 1, STORE_COND_NONE, 0, &t, NULL) ||
            store_sync(c) || t != txn + 1)
            _exit(1);
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 0, err);
    REQUIRE(s);
    CHECK(store_last_txn(s) > txn + 1);   /* numbering resumed higher */
    CHECK_EQ(store_last_record_txn(s), txn + 1);
    REQUIRE(store_write(s, 0, &(store_op){ STORE_SET, "k", 1, "x", 1 }, 1, STORE_COND_NONE, 0, &txn, NULL) == HANU_OK);
    CHECK_EQ(store_last_record_txn(s), txn);
    store_close(s);
}

static void test_batch_one_txn_all_applied(void)
{
    char err[512], v[64];
    const char *dir = test_tmpdir("batch");
    store *s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    CHECK_EQ(put(s, 0, "gone", "x", NULL), HANU_OK);
    store_op ops[3] = {
        { STORE_SET, "x", 1, "1", 1 }, { STORE_SET, "y", 1, "2", 1 }, { STORE_DELETE, "gone", 4, NULL, 0 },
    };
    uint64_t t;
    CHECK_EQ(store_write(s, 0, ops, 3, STORE_COND_NONE, 0, &t, NULL), HANU_OK);
    store_close(s);
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    uint64_t tx, ty;
    CHECK_EQ(get_str(s, 0, "x", v, sizeof v, &tx), HANU_OK);
    CHECK_EQ(get_str(s, 0, "y", v, sizeof v, &ty), HANU_OK);
    CHECK_EQ(tx, t);
    CHECK_EQ(ty, t);
    CHECK_EQ(get_str(s, 0, "gone", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    store_close(s);
}

static void test_databases(void)
{
    char err[512], v[64];
    const char *dir = test_tmpdir("dbs");
    store *s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    uint64_t t;
    uint32_t id, id2;
    CHECK_EQ(store_db_create(s, "users", 5, STORE_DB_KV, &t), HANU_OK);
    CHECK_EQ(store_db_create(s, "users", 5, STORE_DB_KV, &t), HANU_ERR_EXISTS);
    CHECK_EQ(store_db_create(s, "bad name", 8, STORE_DB_KV, &t), HANU_ERR_INVALID);
    CHECK_EQ(store_db_lookup(s, "users", 5, &id), HANU_OK);
    CHECK(id != STORE_DEFAULT_DB_ID);
    CHECK_EQ(put(s, id, "k", "in-users", NULL), HANU_OK);
    CHECK_EQ(put(s, 0, "k", "in-default", NULL), HANU_OK);
    CHECK_EQ(store_db_drop(s, "default", 7, &t), HANU_ERR_INVALID);
    CHECK_EQ(store_db_drop(s, "nope", 4, &t), HANU_ERR_NOT_FOUND);
    store_close(s);

    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    CHECK_EQ(store_db_lookup(s, "users", 5, &id2), HANU_OK);
    CHECK_EQ(id2, id);
    CHECK_EQ(get_str(s, id, "k", v, sizeof v, NULL), HANU_OK);
    CHECK(strcmp(v, "in-users") == 0);
    store_db_info info;
    CHECK_EQ(store_db_info_get(s, id, &info), HANU_OK);
    CHECK_EQ(info.keys, 1);
    CHECK_EQ(info.bytes, 1 + 8);
    CHECK_EQ(store_db_drop(s, "users", 5, &t), HANU_OK);
    CHECK_EQ(store_db_lookup(s, "users", 5, &id2), HANU_ERR_NOT_FOUND);
    CHECK_EQ(get_str(s, id, "k", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    /* A new database of the same name starts empty. */
    CHECK_EQ(store_db_create(s, "users", 5, STORE_DB_KV, &t), HANU_OK);
    CHECK_EQ(store_db_lookup(s, "users", 5, &id2), HANU_OK);
    CHECK(id2 != id);
    CHECK_EQ(get_str(s, id2, "k", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    store_close(s);
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    CHECK_EQ(store_db_lookup(s, "users", 5, &id2), HANU_OK);
    CHECK_EQ(get_str(s, id2, "k", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    CHECK_EQ(get_str(s, 0, "k", v, sizeof v, NULL), HANU_OK);
    CHECK(strcmp(v, "in-default") == 0);
    store_close(s);
}

static off_t file_size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Writes n records, returns the offset where the last one starts in file 1. */
static void write_n(store *s, int n)
{
    char k[32], v[64];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "key%05d", i);
        snprintf(v, sizeof v, "value-%05d", i);
        put(s, 0, k, v, NULL);
    }
    store_sync(s);
}

static void test_torn_tail_keeps_prefix(void)
{
    char err[512], v[64], path[600];
    const char *dir = test_tmpdir("torn");
    store *s = open_store(dir, LOG_PREALLOC_APPEND, 1 << 20, err);
    REQUIRE(s);
    write_n(s, 100);
    store_close(s);
    snprintf(path, sizeof path, "%s/log/000001.log", dir);
    off_t size = file_size_of(path);
    REQUIRE(size > 100);
    /* Cut the last frame in half. It was synced (a clean stop): that is damage
       below the durable mark, refused unless salvaging. */
    REQUIRE(truncate(path, size - 10) == 0);
    s = open_store(dir, LOG_PREALLOC_APPEND, 1 << 20, err);
    CHECK(s == NULL);
    CHECK(strstr(err, "the log ends at txn 99") != NULL && strstr(err, "up to 100 were durable") != NULL);
    salvage_next_open = 1;
    s = open_store(dir, LOG_PREALLOC_APPEND, 1 << 20, err);
    REQUIRE(s);
    CHECK_EQ(get_str(s, 0, "key00098", v, sizeof v, NULL), HANU_OK);
    CHECK_EQ(get_str(s, 0, "key00099", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    uint64_t t;
    CHECK_EQ(put(s, 0, "after", "x", &t), HANU_OK);
    CHECK_EQ(t, 101);   /* the torn record's txn was handed out once: never reused */
    store_close(s);
    s = open_store(dir, LOG_PREALLOC_APPEND, 1 << 20, err);
    REQUIRE(s);
    CHECK_EQ(get_str(s, 0, "after", v, sizeof v, NULL), HANU_OK);
    store_close(s);
}

static void test_bit_flip_in_tail_and_garbage(void)
{
    char err[512], v[64], path[600];
    const char *dir = test_tmpdir("flip");
    store *s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    write_n(s, 50);
    store_close(s);
    snprintf(path, sizeof path, "%s/log/000001.log", dir);
    /* Find the 40th frame by walking, flip a byte inside it. */
    int fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t buf[8192];
    memset(buf, 0, sizeof buf);
    REQUIRE(pread(fd, buf, sizeof buf, 0) > 2000);
    size_t off = LOG_FILE_HEADER_SIZE;
    for (int i = 0; i < 40; i++) off += LOG_FRAME_HEADER_SIZE + hanu_get_u32(buf + off);
    buf[off + 25] ^= 0x10;
    REQUIRE(pwrite(fd, buf + off + 25, 1, (off_t)off + 25) == 1);
    /* And garbage far after the end, as a torn write might leave. */
    REQUIRE(pwrite(fd, "garbage", 7, 100000) == 7);
    close(fd);
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    CHECK(s == NULL);   /* damage below the durable mark */
    CHECK(strstr(err, "the log ends at txn 40") != NULL);
    salvage_next_open = 1;
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
    REQUIRE(s);
    /* The bytes after the last good frame were kept, garbage included. */
    char qpath[700];
    snprintf(qpath, sizeof qpath, "%s/quarantine/000001.log.from-%zu", dir, off);
    off_t qsize = file_size_of(qpath);
    CHECK_EQ(qsize, 100000 + 7 - (off_t)off);
    CHECK_EQ(get_str(s, 0, "key00039", v, sizeof v, NULL), HANU_OK);
    CHECK_EQ(get_str(s, 0, "key00040", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    CHECK_EQ(get_str(s, 0, "key00041", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
    uint64_t t;
    CHECK_EQ(put(s, 0, "later", "x", &t), HANU_OK);
    CHECK_EQ(t, 51);   /* txns 41..50 were handed out once: never reused */
    store_close(s);
    /* The damaged file was sealed at its last good frame; the stale frames and the
       garbage after the seal are never read again, restart after restart. */
    for (int i = 0; i < 3; i++) {
        s = open_store(dir, LOG_PREALLOC_ZEROFILL, 1 << 20, err);
        REQUIRE(s);
        CHECK_EQ(get_str(s, 0, "key00039", v, sizeof v, NULL), HANU_OK);
        CHECK_EQ(get_str(s, 0, "key00041", v, sizeof v, NULL), HANU_ERR_NOT_FOUND);
        CHECK_EQ(get_str(s, 0, "later", v, sizeof v, NULL), HANU_OK);
        store_close(s);
    }
}

static void test_damage_in_sealed_file_refuses_start(void)
{
    char err[512], path[600];
    const char *dir = test_tmpdir("sealed");
    store *s = open_store(dir, LOG_PREALLOC_APPEND, 64 << 10, err);
    REQUIRE(s);
    write_n(s, 4000);   /* ~45 bytes a record: several 64 KiB files */
    store_close(s);
    snprintf(path, sizeof path, "%s/log/000001.log", dir);
    int fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t c;
    REQUIRE(pread(fd, &c, 1, 5000) == 1);
    c ^= 0x01;
    REQUIRE(pwrite(fd, &c, 1, 5000) == 1);
    close(fd);
    s = open_store(dir, LOG_PREALLOC_APPEND, 64 << 10, err);
    CHECK(s == NULL);
    CHECK(strstr(err, "log/000001.log") != NULL);
    CHECK(strstr(err, "offset") != NULL);
    if (s) store_close(s);
    /* Zeroing a whole frame in the middle of a sealed file is caught by the txn chain. */
    REQUIRE((fd = open(path, O_RDWR)) >= 0);
    c ^= 0x01;
    REQUIRE(pwrite(fd, &c, 1, 5000) == 1);
    static uint8_t zeros[60000];
    REQUIRE(pwrite(fd, zeros, sizeof zeros, 4000) == (ssize_t)sizeof zeros);
    close(fd);
    s = open_store(dir, LOG_PREALLOC_APPEND, 64 << 10, err);
    CHECK(s == NULL);
    CHECK(strstr(err, "log/00000") != NULL);
    if (s) store_close(s);
}

/* After the compaction test's rounds: every 7th key deleted, the others hold round 9's
   value with the token its write answered. */
static void check_last_round(store *s, const uint64_t *tokens)
{
    char k[32], v[64], want[64];
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "key%03d", i);
        uint64_t tok = 0;
        int rc = get_str(s, 0, k, v, sizeof v, &tok);
        if (i % 7 == 0) { CHECK_EQ(rc, HANU_ERR_NOT_FOUND); continue; }
        snprintf(want, sizeof want, "r9-%03d", i);
        CHECK_EQ(rc, HANU_OK);
        CHECK(strcmp(v, want) == 0);
        CHECK_EQ(tok, tokens[i]);
    }
}

/* The compaction tests' load: 10 rounds over 500 keys, each round written `times`
   times; the last round deletes every 7th key. tokens[i] ends as key i's last write. */
static void write_rounds(store *s, uint64_t *tokens, int times)
{
    char k[32], v[64];
    for (int pass = 0; pass < 10 * times; pass++) {
        int round = pass / times;
        for (int i = 0; i < 500; i++) {
            snprintf(k, sizeof k, "key%03d", i);
            snprintf(v, sizeof v, "r%d-%03d", round, i);
            if (round == 9 && i % 7 == 0) {
                if (pass != 9 * times) continue;
                store_op del = { STORE_DELETE, k, strlen(k), NULL, 0 };
                CHECK_EQ(store_write(s, 0, &del, 1, STORE_COND_NONE, 0, &tokens[i], NULL), HANU_OK);
                continue;
            }
            CHECK_EQ(put(s, 0, k, v, &tokens[i]), HANU_OK);
        }
    }
}

static void test_compaction_keeps_values_tokens_and_hints(void)
{
    char err[512], v[64], k[32];
    const char *dir = test_tmpdir("compact");
    store *s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    REQUIRE(s);
    uint64_t tokens[500];
    write_rounds(s, tokens, 1);
    uint64_t last = store_last_txn(s);
    store_sync(s);
    store_stats before, after;
    store_get_stats(s, &before);
    CHECK(before.files >= 3);
    CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
    store_get_stats(s, &after);
    CHECK(after.compactions >= before.files - 1);
    CHECK(after.disk_bytes < before.disk_bytes);
    check_last_round(s, tokens);
    store_close(s);
    char hint[600];
    snprintf(hint, sizeof hint, "%s/log/000001.hint", dir);
    CHECK(file_size_of(hint) > 0);
    /* Reopen from hints: same values, same tokens, the txn sequence goes on. */
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    REQUIRE(s);
    check_last_round(s, tokens);
    uint64_t t;
    CHECK_EQ(put(s, 0, "new", "x", &t), HANU_OK);
    CHECK_EQ(t, last + 1);
    store_close(s);
    /* A damaged hint falls back to scanning the log file. */
    int fd = open(hint, O_RDWR);
    REQUIRE(fd >= 0);
    REQUIRE(pwrite(fd, "X", 1, 50) == 1);
    close(fd);
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    REQUIRE(s);
    snprintf(k, sizeof k, "key%03d", 1);
    CHECK_EQ(get_str(s, 0, k, v, sizeof v, NULL), HANU_OK);
    CHECK(strcmp(v, "r9-001") == 0);
    store_close(s);
}

static int count_log_files(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/log", dir);
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".log") == 0) n++;
    }
    closedir(d);
    return n;
}

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[1 << 16];
    ssize_t r;
    int ok = in >= 0 && out >= 0;
    while (ok && (r = read(in, buf, sizeof buf)) > 0) ok = write(out, buf, (size_t)r) == r;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return ok ? 0 : -1;
}

/* Compaction folds adjacent small files into one; a merge interrupted after the
   merged file is in place (the files it copied still there) recovers cleanly. */
static void test_merge_small_files(void)
{
    char err[512], a[700], b[700];
    const char *dir = test_tmpdir("merge");
    store *s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    REQUIRE(s);
    uint64_t tokens[500];
    write_rounds(s, tokens, 3);
    uint64_t last = store_last_txn(s);
    store_close(s);
    int before = count_log_files(dir);
    CHECK(before >= 6);
    /* Keep every file as it is now, to put back the ones a merge deletes. */
    snprintf(a, sizeof a, "%s/backup", dir);
    REQUIRE(mkdir(a, 0755) == 0);
    for (int id = 1; id <= before + 2; id++) {
        snprintf(a, sizeof a, "%s/log/%06d.log", dir, id);
        snprintf(b, sizeof b, "%s/backup/%06d.log", dir, id);
        if (access(a, F_OK) == 0) REQUIRE(copy_file(a, b) == 0);
    }
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    REQUIRE(s);
    CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
    int after = count_log_files(dir);
    CHECK(after <= 3);   /* the merged file(s) and the active file */
    check_last_round(s, tokens);
    store_close(s);
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    REQUIRE(s);
    check_last_round(s, tokens);
    store_close(s);
    /* Put back the files the merge deleted, as if it had stopped before deleting them. */
    int restored = 0;
    for (int id = 1; id <= before + 2; id++) {
        snprintf(a, sizeof a, "%s/log/%06d.log", dir, id);
        snprintf(b, sizeof b, "%s/backup/%06d.log", dir, id);
        if (access(a, F_OK) != 0 && access(b, F_OK) == 0) {
            REQUIRE(copy_file(b, a) == 0);
            restored++;
        }
    }
    CHECK(restored >= 4);
    s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    if (!s) fprintf(stderr, "open after restore: %s\n", err);
    REQUIRE(s);
    CHECK(count_log_files(dir) <= after + 1);
    check_last_round(s, tokens);
    uint64_t t;
    CHECK_EQ(put(s, 0, "new", "x", &t), HANU_OK);
    CHECK(t > last);
    store_close(s);
}

/* Writes nobody waits for are synced within lazy_sync_ms; a waiter gets its sync
   without that delay (store_sync is one). */
static void test_lazy_sync(void)
{
    char err[512];
    const char *dir = test_tmpdir("lazy");
    store_options o;
    store_options_default(&o);
    o.data_dir = dir;
    o.quiet = 1;
    o.background_compaction = 0;
    o.lazy_sync_ms = 50;
    store *s = NULL;
    REQUIRE(store_open(&o, &s, err, sizeof err) == HANU_OK);
    uint64_t t = 0;
    CHECK_EQ(put(s, 0, "a", "1", &t), HANU_OK);
    store_flush(s);
    for (int i = 0; i < 500 && store_durable_txn(s) < t; i++) usleep(10000);
    CHECK_EQ(store_durable_txn(s), t);
    CHECK_EQ(put(s, 0, "b", "2", &t), HANU_OK);
    CHECK_EQ(store_sync(s), HANU_OK);
    CHECK_EQ(store_durable_txn(s), t);
    store_close(s);
}

static void test_drop_space_reclaimed(void)
{
    char err[512], k[32];
    const char *dir = test_tmpdir("dropspace");
    store *s = open_store(dir, LOG_PREALLOC_APPEND, 64 << 10, err);
    REQUIRE(s);
    uint64_t t;
    uint32_t id;
    CHECK_EQ(store_db_create(s, "tmp", 3, STORE_DB_KV, &t), HANU_OK);
    CHECK_EQ(store_db_lookup(s, "tmp", 3, &id), HANU_OK);
    char val[200];
    memset(val, 'v', sizeof val - 1);
    val[sizeof val - 1] = 0;
    for (int i = 0; i < 2000; i++) {
        snprintf(k, sizeof k, "k%d", i);
        put(s, id, k, val, NULL);
    }
    CHECK_EQ(store_db_drop(s, "tmp", 3, &t), HANU_OK);
    store_rotate(s);
    store_sync(s);
    store_stats a, b;
    store_get_stats(s, &a);
    CHECK_EQ(store_compact(s, 1, err, sizeof err), HANU_OK);
    store_get_stats(s, &b);
    CHECK(b.disk_bytes * 4 < a.disk_bytes);
    store_close(s);
    s = open_store(dir, LOG_PREALLOC_APPEND, 64 << 10, err);
    REQUIRE(s);
    CHECK_EQ(store_db_lookup(s, "tmp", 3, &id), HANU_ERR_NOT_FOUND);
    store_close(s);
}

static void test_second_process_locked_out(void)
{
    char err[512];
    const char *dir = test_tmpdir("lock");
    store *s = open_store(dir, LOG_PREALLOC_APPEND, 1 << 20, err);
    REQUIRE(s);
    char holder[32];
    snprintf(holder, sizeof holder, "PID %ld ", (long)getpid());
    pid_t pid = fork();
    if (pid == 0) {   /* both refusals name the holder */
        store *s2 = open_store(dir, LOG_PREALLOC_APPEND, 1 << 20, err);
        char err2[512] = "";
        int busy = store_lock_check(dir, err2, sizeof err2) == HANU_ERR_BUSY;
        _exit(s2 == NULL && strstr(err, "in use") && strstr(err, holder) && busy && strstr(err2, holder) ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    store_close(s);
    CHECK_EQ(store_lock_check(dir, err, sizeof err), HANU_OK);   /* the PID left in LOCK holds nobody out */
}

/* store_get_many answers each key as store_get does: values across several
 * files and the active one, absent, empty and too long keys, another
 * database, more keys than one pass holds, and the same key twice. */
static void test_get_many_equals_get(void)
{
    char err[512];
    const char *dir = test_tmpdir("get-many");
    store *s = open_store(dir, LOG_PREALLOC_ZEROFILL, 64 << 10, err);
    REQUIRE(s);
    char keys[300][40], big[2000];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 200; i++) {
        char v[700];
        snprintf(keys[i], sizeof keys[i], "key-%03d", i);
        int n = snprintf(v, sizeof v, "value %d ", i);
        memset(v + n, 'a' + i % 26, (size_t)(i * 3 % 600));   /* some span several cache lines */
        v[n + i * 3 % 600] = '\0';
        REQUIRE(put(s, 0, keys[i], v, NULL) == HANU_OK);
        if (i % 50 == 49) REQUIRE(store_sync(s) == HANU_OK);   /* some in sealed files, some in the active one */
    }
    for (int i = 200; i < 300; i++) snprintf(keys[i], sizeof keys[i], "missing-%03d", i);
    store_get_item items[305];
    size_t n = 0;
    for (int i = 0; i < 300; i += 1 + (i % 3 == 0)) items[n++] = (store_get_item){ .key = keys[i], .key_len = strlen(keys[i]) };
    items[n++] = (store_get_item){ .key = keys[7], .key_len = strlen(keys[7]) };   /* twice */
    items[n++] = (store_get_item){ .key = "", .key_len = 0 };
    items[n++] = (store_get_item){ .key = big, .key_len = strlen(big) };
    hanu_buf out = {0};
    CHECK_EQ(store_get_many(s, 0, items, n, &out), HANU_OK);
    size_t found = 0, wrong = 0;
    for (size_t i = 0; i < n; i++) {
        hanu_buf one = {0};
        uint64_t tok = 0;
        int rc = store_get(s, 0, items[i].key, items[i].key_len, &one, &tok);
        wrong += rc != items[i].rc;
        if (rc == HANU_OK) {
            found++;
            wrong += one.len != items[i].len || tok != items[i].token ||
                     memcmp(one.data, out.data + items[i].off, one.len) != 0;
        }
        hanu_buf_free(&one);
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(found, 134);   /* 133 of keys 0..199 (two of every three), plus key-007 again */
    /* another database, where none of them is */
    uint32_t db2;
    uint64_t txn;
    REQUIRE(store_db_create(s, "other", 5, STORE_DB_KV, &txn) == HANU_OK);
    REQUIRE(store_db_lookup(s, "other", 5, &db2) == HANU_OK);
    hanu_buf_reset(&out);
    CHECK_EQ(store_get_many(s, db2, items, 3, &out), HANU_OK);
    CHECK(items[0].rc == HANU_ERR_NOT_FOUND && items[2].rc == HANU_ERR_NOT_FOUND && out.len == 0);
    hanu_buf_free(&out);
    store_close(s);
}

int main(void)
{
    RUN(test_round_trip_zerofill);
    RUN(test_round_trip_append);
    RUN(test_round_trip_fallocate);
    RUN(test_conditions_and_tokens);
    RUN(test_last_record_txn_after_crash);
    RUN(test_batch_one_txn_all_applied);
    RUN(test_databases);
    RUN(test_torn_tail_keeps_prefix);
    RUN(test_bit_flip_in_tail_and_garbage);
    RUN(test_damage_in_sealed_file_refuses_start);
    RUN(test_compaction_keeps_values_tokens_and_hints);
    RUN(test_merge_small_files);
    RUN(test_lazy_sync);
    RUN(test_drop_space_reclaimed);
    RUN(test_second_process_locked_out);
    RUN(test_get_many_equals_get);
    TEST_DONE();
}
