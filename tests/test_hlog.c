/*
 * test_hlog.c: the log line formats (src/hlog/hlog.h) on real files: a text line
 * is "TIME LEVEL subsystem: message" with an RFC 3339 UTC time; a JSON line is
 * one object with exactly time, level, subsystem and msg, also for a message
 * with quotes, newlines and bytes that are not UTF-8; a limiter lets one line
 * through per interval and the next says how many were left out; a reopen after
 * a rename writes to a new file of the same name; the access log's two formats
 * never carry more than the token's name.
 */
#include "test.h"
#include "hlog/hlog.h"
#include "json/json.h"

#include <fcntl.h>
#include <pty.h>
#include <regex.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int matches(const char *re, const char *s)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB | REG_NEWLINE) != 0) return 0;
    int ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

#define TIME_RE "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"

static void test_text_lines(void)
{
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/text.log", test_tmpdir("hlog-text"));
    REQUIRE(hlog_configure(HLOG_TEXT, path, err, sizeof err) == HANU_OK);
    hlog_info("sealer", "put segment %d", 12);
    hlog_warn("bucket", "retrying\nafter a 503");
    hlog_error("store", "no space left on device");
    REQUIRE(hlog_configure(HLOG_TEXT, NULL, err, sizeof err) == HANU_OK);
    const char *s = slurp(path);
    REQUIRE(s);
    CHECK_EQ(count_lines(s), 3);
    CHECK(matches("^" TIME_RE " INFO sealer: put segment 12$", s));
    CHECK(matches("^" TIME_RE " WARN bucket: retrying\\?after a 503$", s));
    CHECK(matches("^" TIME_RE " ERROR store: no space left on device$", s));
}

static void check_json_line(const char *line, size_t len, const char *level, const char *sub, const char *msg)
{
    json_doc *d = NULL;
    json_error je;
    REQUIRE(json_doc_parse(line, len, NULL, &d, &je) == HANU_OK);
    const json_value *root = json_doc_root(d);
    CHECK(root && root->type == JSON_OBJECT && json_len(root) == 4);
    const char *s;
    size_t n;
    CHECK(json_as_string(json_get(root, "level"), &s, &n) == HANU_OK && n == strlen(level) && !memcmp(s, level, n));
    CHECK(json_as_string(json_get(root, "subsystem"), &s, &n) == HANU_OK && n == strlen(sub) && !memcmp(s, sub, n));
    CHECK(json_as_string(json_get(root, "msg"), &s, &n) == HANU_OK && n == strlen(msg) && !memcmp(s, msg, n));
    CHECK(json_as_string(json_get(root, "time"), &s, &n) == HANU_OK && n == 24);
    json_doc_free(d);
}

static void test_json_lines(void)
{
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/json.log", test_tmpdir("hlog-json"));
    REQUIRE(hlog_configure(HLOG_JSON, path, err, sizeof err) == HANU_OK);
    hlog_info("index", "merged collection \"users\": %d segments", 3);
    hlog_error("kv", "key \xff\xfe refused");
    hlog_warn("http", "two\nlines");
    REQUIRE(hlog_configure(HLOG_TEXT, NULL, err, sizeof err) == HANU_OK);
    const char *s = slurp(path);
    REQUIRE(s);
    CHECK_EQ(count_lines(s), 3);
    const char *l1 = s, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    check_json_line(l1, (size_t)(l2 - l1 - 1), "info", "index", "merged collection \"users\": 3 segments");
    check_json_line(l2, (size_t)(l3 - l2 - 1), "error", "kv", "key ?? refused");
    check_json_line(l3, strlen(l3) - 1, "warn", "http", "two?lines");
}

static void test_limiter(void)
{
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/limited.log", test_tmpdir("hlog-limit"));
    REQUIRE(hlog_configure(HLOG_TEXT, path, err, sizeof err) == HANU_OK);
    static hlog_limiter lim;
    for (int i = 0; i < 50; i++) hlog_limited(&lim, 200, HLOG_ERROR, "store", "write failed: %d", i);
    usleep(250000);
    hlog_limited(&lim, 200, HLOG_ERROR, "store", "write failed: %d", 50);
    REQUIRE(hlog_configure(HLOG_TEXT, NULL, err, sizeof err) == HANU_OK);
    const char *s = slurp(path);
    REQUIRE(s);
    CHECK_EQ(count_lines(s), 2);
    CHECK(matches("ERROR store: write failed: 0$", s));
    CHECK(matches("ERROR store: write failed: 50 \\(and 49 more like it in the last 1 s\\)$", s));
}

static void test_reopen_after_rename(void)
{
    const char *dir = test_tmpdir("hlog-reopen");
    char path[600], moved[600], err[256];
    snprintf(path, sizeof path, "%s/server.log", dir);
    snprintf(moved, sizeof moved, "%s/server.log.1", dir);
    REQUIRE(hlog_configure(HLOG_TEXT, path, err, sizeof err) == HANU_OK);
    hlog_info("server", "before");
    REQUIRE(rename(path, moved) == 0);
    hlog_info("server", "still the old file");
    hlog_reopen();
    hlog_info("server", "after");
    REQUIRE(hlog_configure(HLOG_TEXT, NULL, err, sizeof err) == HANU_OK);
    const char *s = slurp(moved);
    REQUIRE(s);
    CHECK_EQ(count_lines(s), 2);
    CHECK(matches("server: before$", s) && matches("server: still the old file$", s));
    s = slurp(path);
    REQUIRE(s);
    CHECK_EQ(count_lines(s), 2);
    CHECK(matches("INFO server: SIGHUP: log files opened again$", s) && matches("INFO server: after$", s));
    CHECK(hlog_configure(HLOG_TEXT, "/nonexistent-dir/x.log", err, sizeof err) == HANU_ERR_IO);
    CHECK(strstr(err, "/nonexistent-dir/x.log") != NULL);
}

static void test_access_lines(void)
{
    const char *dir = test_tmpdir("hlog-access");
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/access.log", dir);
    CHECK(!hlog_access_enabled());
    REQUIRE(hlog_access_open(path, err, sizeof err) == HANU_OK);
    CHECK(hlog_access_enabled());
    hlog_access("PUT", 3, "/c/users/docs/a b", 17, 201, 64, 532, "t:0123abcd");
    hlog_access("GET", 3, "/_status", 8, 200, 900, 80, NULL);
    REQUIRE(hlog_configure(HLOG_JSON, NULL, err, sizeof err) == HANU_OK);
    hlog_access("DELETE", 6, "/c/x\"y", 6, 404, 70, 12, "");
    REQUIRE(hlog_configure(HLOG_TEXT, NULL, err, sizeof err) == HANU_OK);
    REQUIRE(hlog_access_open(NULL, err, sizeof err) == HANU_OK);
    CHECK(!hlog_access_enabled());
    const char *s = slurp(path);
    REQUIRE(s);
    CHECK_EQ(count_lines(s), 3);
    CHECK(matches("^" TIME_RE " PUT /c/users/docs/a%20b 201 64 532 t:0123abcd$", s));
    CHECK(matches("^" TIME_RE " GET /_status 200 900 80 -$", s));
    CHECK(matches("^\\{\"time\":\"" TIME_RE "\",\"method\":\"DELETE\",\"path\":\"/c/x\\\\\"y\",\"status\":404,"
                  "\"bytes\":70,\"us\":12,\"token\":\"\"\\}$", s));
}

/* Not a terminal: no line until 10 s have passed, then the end's one line. */
static void test_progress_in_a_log(void)
{
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/progress.log", test_tmpdir("hlog-progress"));
    REQUIRE(hlog_configure(HLOG_TEXT, path, err, sizeof err) == HANU_OK);
    hlog_progress p;
    hlog_progress_begin(&p, "restore", "segments", NULL, 4000000, 100);
    CHECK(!p.tty);
    for (int i = 1; i <= 50; i++) hlog_progress_update(&p, (uint64_t)i * 40000, (uint64_t)i);
    hlog_progress_end(&p, 4000000, 100, "at txn 77");
    REQUIRE(hlog_configure(HLOG_TEXT, NULL, err, sizeof err) == HANU_OK);
    const char *s = slurp(path);
    REQUIRE(s);
    CHECK_EQ(count_lines(s), 1);
    CHECK(strchr(s, '\r') == NULL);
    CHECK(matches("^" TIME_RE " INFO restore: segments: 4.0 of 4.0 MB, 100 of 100 items, [0-9.]+ MB/s, at txn 77 "
                  "in [0-9.]+ s$", s));
    char line[512];
    p.start_ns = 0;   /* 10 s in, a quarter done: 30 s to go */
    hlog_progress_format(&p, 1000000, 25, 10000000000ull, line, sizeof line);
    CHECK(strcmp(line, "segments: 1.0 of 4.0 MB, 25 of 100 items, 0.1 MB/s, ETA 30 s") == 0);
}

/* On a terminal (a pty here): the line is drawn in place ("\r", clear to the end
   of the line) and cleared before the end's log line. */
static void test_progress_on_a_terminal(void)
{
    int master, slave;
    REQUIRE(openpty(&master, &slave, NULL, NULL, NULL) == 0);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(slave, 2) == 2);
    char err[256];
    REQUIRE(hlog_configure(HLOG_TEXT, NULL, err, sizeof err) == HANU_OK);
    hlog_progress p;
    hlog_progress_begin(&p, "export", "collection \"users\"", "documents", 0, 0);
    int tty = p.tty;
    for (int i = 1; i <= 3; i++) {
        usleep(120000);
        hlog_progress_update(&p, (uint64_t)i * 1000000, (uint64_t)i * 10);
    }
    hlog_progress_end(&p, 3000000, 30, "done");
    dup2(saved, 2);
    close(saved);
    close(slave);
    char out[4096];
    size_t n = 0;
    fcntl(master, F_SETFL, O_NONBLOCK);
    for (ssize_t r; n < sizeof out - 1 && (r = read(master, out + n, sizeof out - 1 - n)) > 0;) n += (size_t)r;
    out[n] = '\0';
    close(master);
    CHECK(tty);
    int drawn = 0;
    for (const char *q = out; (q = strstr(q, "\r\033[Kcollection \"users\": ")) != NULL; q++) drawn++;
    CHECK_EQ(drawn, 3);
    CHECK(strstr(out, "\r\033[Kcollection \"users\": 3.0 MB, 30 documents") != NULL);
    CHECK(strstr(out, " INFO export: collection \"users\": 3.0 MB, 30 documents, ") != NULL);
}

int main(void)
{
    RUN(test_text_lines);
    RUN(test_json_lines);
    RUN(test_limiter);
    RUN(test_reopen_after_rename);
    RUN(test_access_lines);
    RUN(test_progress_in_a_log);
    RUN(test_progress_on_a_terminal);
    TEST_DONE();
}
