/*
 * test_bucket_s3.c: the s3:// backend against a real S3-compatible server started
 * here (@20minutes/s3rver from tests/s3/, installed by scripts/install-deps.sh),
 * which verifies SigV4 signatures: round trips of every operation, list pages with
 * continuation tokens, a wrong secret refused with 403 and not retried, a multipart
 * upload of a 6 MB object, Range gets, retries of a server that is not there, and
 * the fencing probe refusing the emulator, which does not honour If-None-Match.
 */
#include "test.h"
#include "test_bucket.h"
#include <signal.h>
#include <sys/prctl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <openssl/evp.h>
#include "bucket/bucket.h"

static pid_t server_pid;
static char endpoint[64];

/* Starts s3rver (quiet) on a port it picks and reads the port from its log. Its
   continuation tokens are DES-encrypted: Node's OpenSSL 3 needs the legacy provider. */
static int start_server(void)
{
    const char *dir = test_tmpdir("s3rver");
    char log[600];
    snprintf(log, sizeof log, "%s.log", dir);
    server_pid = fork();
    if (server_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);   /* no orphan server if this test is killed */
        if (!freopen(log, "w", stdout)) _exit(126);
        execlp("node", "node", "--openssl-legacy-provider", "tests/s3/s3rver.js", "-d", dir, "-a", "127.0.0.1", "-p", "0", "--silent",
               "--configure-bucket", "hanu", (char *)NULL);
        perror("node");
        _exit(127);
    }
    int port = 0;
    for (int i = 0; i < 600 && port <= 0; i++) {   /* up to a minute on a loaded machine */
        usleep(100000);
        FILE *f = fopen(log, "r");
        char line[256];
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "S3rver listening on 127.0.0.1:%d", &port) == 1) break;
        if (f) fclose(f);
        if (waitpid(server_pid, NULL, WNOHANG) == server_pid) break;
    }
    if (port <= 0) {
        fprintf(stderr, "s3rver did not start: run scripts/install-deps.sh (node, tests/s3/node_modules)\n");
        return -1;
    }
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    return 0;
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
}

static void options(bucket_options *o)
{
    bucket_options_default(o);
    o->s3_endpoint = endpoint;
    o->s3_access_key = "S3RVER";
    o->s3_secret_key = "S3RVER";
    o->backoff_base_ms = 1;
    o->backoff_max_ms = 5;
}

static bucket *open_s3(const char *url, const bucket_options *o)
{
    bucket *b = NULL;
    char err[256] = "";
    if (bucket_open(url, o, &b, err, sizeof err) != HANU_OK) fprintf(stderr, "bucket_open: %s\n", err);
    return b;
}

static void md5_hex(const void *data, size_t len, char out[33])
{
    unsigned char h[16];
    unsigned int n = 0;
    EVP_Digest(data, len, h, &n, EVP_md5(), NULL);
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static void test_bucket_s3_round_trip(void)
{
    bucket_options o;
    options(&o);
    bucket *b = open_s3("s3://hanu/db1", &o);
    REQUIRE(b);
    char err[256], md5[33];
    bucket_object_info info;
    const char *text = "hello, bucket";
    CHECK_EQ(bucket_put(b, "seg/000001", text, strlen(text), &info, err, sizeof err), HANU_OK);
    md5_hex(text, strlen(text), md5);
    CHECK(strcmp(info.etag, md5) == 0);
    memset(&info, 0, sizeof info);
    CHECK_EQ(bucket_head(b, "seg/000001", &info, err, sizeof err), HANU_OK);
    CHECK_EQ(info.size, strlen(text));
    CHECK(strcmp(info.etag, md5) == 0);
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(b, "seg/000001", &got, &info, err, sizeof err), HANU_OK);
    CHECK(got.len == strlen(text) && memcmp(got.data, text, got.len) == 0);
    got.len = 0;
    CHECK_EQ(bucket_get_range(b, "seg/000001", 7, 6, &got, err, sizeof err), HANU_OK);
    CHECK(got.len == 6 && memcmp(got.data, "bucket", 6) == 0);
    got.len = 0;
    CHECK_EQ(bucket_get_range(b, "seg/000001", 10, 100, &got, err, sizeof err), HANU_OK);
    CHECK(got.len == 3 && memcmp(got.data, "ket", 3) == 0);
    got.len = 0;
    CHECK_EQ(bucket_get_range(b, "seg/000001", 13, 1, &got, err, sizeof err), HANU_ERR_INVALID);
    CHECK(strcmp(err, "bucket: range at 13 is past the end of seg/000001") == 0);
    CHECK_EQ(got.len, 0);

    /* compare-and-swap: the emulator ignores If-Match, so only the happy path is shown here
       (the refusals are tested on the file backend) */
    CHECK_EQ(bucket_compare_and_swap(b, "seg/000001", md5, "new", 3, &info, err, sizeof err), HANU_OK);
    md5_hex("new", 3, md5);
    CHECK(strcmp(info.etag, md5) == 0);

    CHECK_EQ(bucket_delete(b, "seg/000001", err, sizeof err), HANU_OK);
    CHECK_EQ(bucket_get(b, "seg/000001", &got, NULL, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK(strncmp(err, "bucket: s3 GET seg/000001: 404 NoSuchKey", 40) == 0);
    CHECK_EQ(bucket_head(b, "seg/000001", &info, err, sizeof err), HANU_ERR_NOT_FOUND);
    CHECK_EQ(bucket_delete(b, "seg/000001", err, sizeof err), HANU_OK);
    CHECK_EQ(got.len, 0);

    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.class_a, 4);   /* put, compare-and-swap, two deletes */
    CHECK_EQ(c.class_b, 7);   /* head, get, three ranges, get, head */
    CHECK_EQ(c.retries, 0);
    hanu_buf_free(&got);
    bucket_close(b);
}

static void test_bucket_s3_list_pages(void)
{
    bucket_options o;
    options(&o);
    o.list_page_keys = 3;
    bucket *b = open_s3("s3://hanu/list/", &o);
    bucket *other = open_s3("s3://hanu/listing", &o);   /* a prefix that starts like ours */
    REQUIRE(b && other);
    char key[32], err[256];
    for (int i = 9; i >= 0; i--) {
        snprintf(key, sizeof key, i % 2 ? "odd/%d" : "even/%d", i);
        CHECK_EQ(bucket_put(b, key, key, strlen(key), NULL, err, sizeof err), HANU_OK);
    }
    CHECK_EQ(bucket_put(other, "even/0", "x", 1, NULL, err, sizeof err), HANU_OK);
    listed c = {0};
    CHECK_EQ(bucket_list(b, "", collect_key, &c, err, sizeof err), HANU_OK);
    if (c.n != 10) fprintf(stderr, "%s\n", err);
    CHECK_EQ(c.n, 10);
    const char *want[] = { "even/0", "even/2", "even/4", "even/6", "even/8",
                           "odd/1", "odd/3", "odd/5", "odd/7", "odd/9" };
    for (int i = 0; i < 10 && i < c.n; i++) {
        CHECK(strcmp(c.keys[i], want[i]) == 0);
        CHECK_EQ(c.sizes[i], strlen(want[i]));
    }
    memset(&c, 0, sizeof c);
    CHECK_EQ(bucket_list(b, "odd/", collect_key, &c, err, sizeof err), HANU_OK);
    CHECK(c.n == 5 && strcmp(c.keys[0], "odd/1") == 0 && strcmp(c.keys[4], "odd/9") == 0);
    bucket_counters k;
    bucket_get_counters(b, &k);
    CHECK_EQ(k.class_a, 10 + 4 + 2);   /* puts, 4 pages of 3, 2 pages of 3 */
    bucket_close(b);
    bucket_close(other);
}

static void test_bucket_s3_wrong_secret(void)
{
    bucket_options o;
    options(&o);
    o.s3_secret_key = "not-the-secret";
    bucket *b = open_s3("s3://hanu/db1", &o);
    REQUIRE(b);
    char err[512];
    CHECK_EQ(bucket_put(b, "k", "v", 1, NULL, err, sizeof err), HANU_ERR_INVALID);
    const char *want = "bucket: s3 PUT k: 403 SignatureDoesNotMatch";
    CHECK(strncmp(err, want, strlen(want)) == 0);
    CHECK(strstr(err, "(check the access key, the secret and the region)") != NULL);
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(b, "k", &got, NULL, err, sizeof err), HANU_ERR_INVALID);
    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.retries, 0);   /* a 403 is not retried */
    hanu_buf_free(&got);
    bucket_close(b);
}

static void test_bucket_s3_multipart(void)
{
    bucket_options o;
    options(&o);
    o.part_size = 5u << 20;
    o.multipart_threshold = 5u << 20;
    bucket *b = open_s3("s3://hanu/big", &o);
    REQUIRE(b);
    size_t len = (10u << 20) + 123;   /* 3 parts, sent in parallel */
    uint8_t *data = malloc(len);
    REQUIRE(data);
    for (size_t i = 0; i < len; i++) data[i] = (uint8_t)(i * 2654435761u >> 13);
    char err[256];
    bucket_object_info info;
    CHECK_EQ(bucket_put(b, "snapshot/file-1", data, len, &info, err, sizeof err), HANU_OK);
    CHECK_EQ(info.size, len);
    size_t n = strlen(info.etag);
    CHECK(n > 0);
    char etag[BUCKET_ETAG_MAX + 1];
    snprintf(etag, sizeof etag, "%s", info.etag);
    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.class_a, 5);   /* initiate, 3 parts, complete */
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(b, "snapshot/file-1", &got, NULL, err, sizeof err), HANU_OK);
    CHECK(got.len == len && memcmp(got.data, data, len) == 0);
    got.len = 0;
    uint64_t at = (10u << 20) - 800;   /* across the border of parts 2 and 3 */
    CHECK_EQ(bucket_get_range(b, "snapshot/file-1", at, 900, &got, err, sizeof err), HANU_OK);
    CHECK(got.len == 900 && memcmp(got.data, data + at, 900) == 0);
    CHECK_EQ(bucket_head(b, "snapshot/file-1", &info, err, sizeof err), HANU_OK);
    CHECK_EQ(info.size, len);
    CHECK(strcmp(info.etag, etag) == 0);
    free(data);
    hanu_buf_free(&got);
    bucket_close(b);
}

static void test_bucket_s3_probe_refuses_emulator(void)
{
    bucket_options o;
    options(&o);
    bucket *b = open_s3("s3://hanu/db1", &o);
    REQUIRE(b);
    char err[512];
    CHECK_EQ(bucket_probe_fencing(b, err, sizeof err), HANU_ERR_UNSUPPORTED);
    const char *want = "bucket s3://hanu/db1 does not honour put-if-absent (If-None-Match: *)";
    CHECK(strncmp(err, want, strlen(want)) == 0);
    listed c = {0};
    CHECK_EQ(bucket_list(b, "probe/", collect_key, &c, err, sizeof err), HANU_OK);
    CHECK_EQ(c.n, 0);   /* the probe cleans up */
    bucket_close(b);
}

static void test_bucket_s3_credentials_from_environment(void)
{
    bucket_options o;
    bucket_options_default(&o);
    setenv("AWS_ENDPOINT_URL_S3", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    bucket *b = open_s3("s3://hanu/env", &o);
    REQUIRE(b);
    char err[256];
    CHECK_EQ(bucket_put(b, "k", "v", 1, NULL, err, sizeof err), HANU_OK);
    bucket_close(b);
    unsetenv("AWS_SECRET_ACCESS_KEY");
    b = NULL;
    CHECK_EQ(bucket_open("s3://hanu/env", &o, &b, err, sizeof err), HANU_ERR_INVALID);
    CHECK(strncmp(err, "bucket: s3 needs an access key and a secret", 43) == 0);
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_REGION");
}

/* A prefix is checked as a key is: no "." or ".." components, no empty ones (libcurl
   would have put objects where its dot removal leads and listed them under the literal
   prefix). Refused at open, before any request. */
static void test_bucket_s3_refuses_dot_prefix(void)
{
    bucket_options o;
    options(&o);
    const char *bad[] = { "s3://hanu/a/../b", "s3://hanu/..", "s3://hanu/a/./b", "s3://hanu/.hidden",
                          "s3://hanu//a", "s3://hanu/a//b", "s3://hanu/a/.." };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bucket *b = NULL;
        CHECK_EQ(bucket_open(bad[i], &o, &b, err, sizeof err), HANU_ERR_INVALID);
        CHECK(strstr(err, "not starting with '.' (no \".\" or \"..\")") != NULL);
        CHECK(b == NULL);
    }
    bucket *b = NULL;
    CHECK_EQ(bucket_open("s3://hanu/a.b/c-d_e/", &o, &b, err, sizeof err), HANU_OK);
    bucket_close(b);
}

static void test_bucket_s3_retries(void)
{
    /* Nothing listens: every attempt fails to connect and is retried up to the limit. */
    bucket_options o;
    options(&o);
    o.s3_endpoint = "http://127.0.0.1:1";
    o.max_attempts = 4;
    bucket *b = open_s3("s3://hanu/db1", &o);
    REQUIRE(b);
    char err[256];
    CHECK_EQ(bucket_put(b, "k", "v", 1, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK(strcmp(err, "bucket: s3 PUT k: Couldn't connect to server") == 0);
    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.class_a, 4);
    CHECK_EQ(c.retries, 3);
    bucket_close(b);

    /* Injected 503s and lost answers on the real server: retried, nothing lost. */
    options(&o);
    o.fail_rate = 0.3;
    o.timeout_rate = 0.2;
    o.fail_seed = 7;
    o.max_attempts = 30;
    b = open_s3("s3://hanu/retry", &o);
    REQUIRE(b);
    char key[32], value[32];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "obj-%02d", i);
        snprintf(value, sizeof value, "value %d", i);
        CHECK_EQ(bucket_put(b, key, value, strlen(value), NULL, err, sizeof err), HANU_OK);
    }
    listed got = {0};
    CHECK_EQ(bucket_list(b, "", collect_key, &got, err, sizeof err), HANU_OK);
    CHECK_EQ(got.n, 20);
    bucket_get_counters(b, &c);
    CHECK(c.retries > 0);
    bucket_close(b);
}

/* ---- a hung store, a skewed clock, and the log lines (issue 26, item 12) ---- */

/* A socket that accepts connections in the kernel and never answers: a hung store. */
static int hung_endpoint(char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    snprintf(out, cap, "http://127.0.0.1:%d", ntohs(a.sin_port));
    return fd;
}

static void test_bucket_s3_timeouts(void)
{
    bucket_options o;
    bucket_options_default(&o);
    CHECK_EQ(o.connect_timeout_ms, 2000);   /* seconds, not a minute */
    CHECK_EQ(o.request_timeout_ms, 10000);
    char hung[64];
    int fd = hung_endpoint(hung, sizeof hung);
    REQUIRE(fd >= 0);
    options(&o);
    o.s3_endpoint = hung;
    o.request_timeout_ms = 1000;
    o.max_attempts = 2;
    bucket *b = open_s3("s3://hanu/db1", &o);
    REQUIRE(b);
    char err[256];
    uint64_t t0 = hanu_now_ns();
    CHECK_EQ(bucket_put(b, "k", "v", 1, NULL, err, sizeof err), HANU_ERR_IO);
    uint64_t ms = (hanu_now_ns() - t0) / 1000000;
    CHECK(strstr(err, "Timeout was reached") != NULL);
    CHECK(ms >= 1500 && ms < 6000);   /* two attempts of about a second each */
    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.retries, 1);
    bucket_close(b);
    close(fd);
    o.request_timeout_ms = 50;
    CHECK_EQ(bucket_open("s3://hanu/db1", &o, &b, err, sizeof err), HANU_ERR_INVALID);
}

/* A store that answers every request with one canned 403; serves until killed. */
static pid_t canned_store(const char *answer_body, char *url, size_t cap)
{
    int fd = hung_endpoint(url, cap);
    if (fd < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char head[256], buf[65536];
        snprintf(head, sizeof head, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n", strlen(answer_body));
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c < 0) continue;
            if (read(c, buf, sizeof buf) > 0 && write(c, head, strlen(head)) > 0 &&
                write(c, answer_body, strlen(answer_body)) > 0)
                shutdown(c, SHUT_WR);
            while (read(c, buf, sizeof buf) > 0) {
            }
            close(c);
        }
    }
    close(fd);
    return pid;
}

static void test_bucket_s3_skewed_clock(void)
{
    char url[64];
    pid_t pid = canned_store("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>RequestTimeTooSkewed</Code>"
                             "<Message>The difference between the request time and the current time is too "
                             "large.</Message></Error>", url, sizeof url);
    REQUIRE(pid > 0);
    bucket_options o;
    options(&o);
    o.s3_endpoint = url;
    bucket *b = open_s3("s3://hanu/db1", &o);
    REQUIRE(b);
    char err[512];
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(b, "k", &got, NULL, err, sizeof err), HANU_ERR_INVALID);
    CHECK(strstr(err, "403 RequestTimeTooSkewed") != NULL && strstr(err, "check the clock") != NULL);
    bucket_counters c;
    bucket_get_counters(b, &c);
    CHECK_EQ(c.retries, 0);   /* a skewed clock stays skewed: no retry */
    hanu_buf_free(&got);
    bucket_close(b);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

typedef struct log_lines {
    char lines[8][600];
    int n;
} log_lines;

static void keep_line(void *ctx, const char *line)
{
    log_lines *l = ctx;
    if (l->n < 8) snprintf(l->lines[l->n], sizeof l->lines[0], "%s", line);
    l->n++;
}

/* Failed writes and retries are logged, one line of each kind per interval, the lines
   left out counted in the next one. */
static void test_bucket_s3_logs_failures(void)
{
    log_lines l = { .n = 0 };
    bucket_options o;
    options(&o);
    o.s3_endpoint = "http://127.0.0.1:1";
    o.max_attempts = 3;
    o.log = keep_line;
    o.log_ctx = &l;
    o.log_interval_ms = 300;
    bucket *b = open_s3("s3://hanu/db1", &o);
    REQUIRE(b);
    char err[256];
    CHECK_EQ(bucket_put(b, "seg/1", "v", 1, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK_EQ(bucket_put(b, "seg/2", "v", 1, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK_EQ(l.n, 2);   /* one retry line, one failure line; the rest within the interval left out */
    CHECK(strcmp(l.lines[0], "s3://hanu/db1: put seg/1: attempt 1 of 3 failed, retrying: "
                             "bucket: s3 PUT seg/1: Couldn't connect to server") == 0);
    CHECK(strcmp(l.lines[1], "s3://hanu/db1: put seg/1 failed after 3 attempts: "
                             "bucket: s3 PUT seg/1: Couldn't connect to server") == 0);
    usleep(350000);
    CHECK_EQ(bucket_put(b, "seg/3", "v", 1, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK_EQ(l.n, 4);
    CHECK(strstr(l.lines[2], "put seg/3: attempt 1 of 3 failed") != NULL &&
          strstr(l.lines[2], "(and 3 more retries since the last line)") != NULL);
    CHECK(strstr(l.lines[3], "put seg/3 failed after 3 attempts") != NULL &&
          strstr(l.lines[3], "(and 1 more failed writes since the last line)") != NULL);
    hanu_buf got = {0};
    CHECK_EQ(bucket_get(b, "seg/1", &got, NULL, err, sizeof err), HANU_ERR_IO);
    CHECK_EQ(l.n, 4);   /* a failed read is its caller's to report; its retries are within the interval */
    hanu_buf_free(&got);
    bucket_close(b);
}

int main(void)
{
    if (start_server() != 0) return 1;
    RUN(test_bucket_s3_round_trip);
    RUN(test_bucket_s3_list_pages);
    RUN(test_bucket_s3_wrong_secret);
    RUN(test_bucket_s3_multipart);
    RUN(test_bucket_s3_probe_refuses_emulator);
    RUN(test_bucket_s3_credentials_from_environment);
    RUN(test_bucket_s3_retries);
    RUN(test_bucket_s3_refuses_dot_prefix);
    RUN(test_bucket_s3_timeouts);
    RUN(test_bucket_s3_skewed_clock);
    RUN(test_bucket_s3_logs_failures);
    stop_server();
    TEST_DONE();
}
