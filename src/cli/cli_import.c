/*
 * hanudb import --url http://HOST:PORT --collection NAME [--token T]
 *               [--durability D] [--request-bytes N] FILE|-
 *
 * Loads an NDJSON file (one JSON document a line; "-" is standard input) into a
 * collection of a running server through POST /c/NAME/_import (docs/API.md
 * "Import"). The file is read as it comes and sent as requests of at most
 * --request-bytes, each cut after a line's LF and sent with ?first_line= so that
 * the server's errors carry the file's line numbers: memory stays at one
 * request whatever the file's size. A line longer than a request is refused
 * here (it could never be a document within the server's limits).
 *
 * Each line error is printed on stderr ("line 12: invalid_json: ..."), a
 * progress line on a terminal (hlog_progress; HANUDB_PROGRESS_MS), and at the
 * end one summary line on stdout:
 *   {"lines":L,"imported":I,"failed":F,"blank":B,"requests":R,"txn":T,"ms":M}
 * Exit status: 0 every line imported, 1 some line failed or the server refused a
 * request (what was imported before stays), 2 bad usage, an unreadable file or no
 * answer.
 */
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "base/base.h"
#include "hlog/hlog.h"
#include "json/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <curl/curl.h>

#define IMPORT_ANSWER_MAX (1u << 20)
#define IMPORT_REQUEST_MIN (64u << 10)
#define IMPORT_REQUEST_MAX (1ull << 30)

typedef struct import_totals {
    uint64_t lines, imported, failed, blank, requests, txn, bytes;
} import_totals;

static size_t keep_answer(char *p, size_t size, size_t n, void *ctx)
{
    hanu_buf *b = ctx;
    size_t len = size * n;
    if (b->len + len > IMPORT_ANSWER_MAX || hanu_buf_append(b, p, len) != HANU_OK) return 0;
    return len;
}

static uint64_t member_u64(const json_value *o, const char *name)
{
    int64_t v = 0;
    return json_as_int64(json_get(o, name), &v) == HANU_OK && v > 0 ? (uint64_t)v : 0;
}

/* Sends body[0..len) whose first line is first_line; adds its summary to t and
   prints its line errors. 0, 1 when the server refused it, 2 on no answer. */
static int send_part(CURL *c, const char *base, const char *body, size_t len, uint64_t first_line,
                     import_totals *t)
{
    char *url = malloc(strlen(base) + 40);
    if (!url) return 2;
    sprintf(url, "%s%sfirst_line=%llu", base, strchr(base, '?') ? "&" : "?", (unsigned long long)first_line);
    hanu_buf answer = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    int rc = 0;
    json_doc *d = NULL;
    if (cc != CURLE_OK) {
        fprintf(stderr, "hanudb import: %s: %s\n", url, curl_easy_strerror(cc));
        rc = 2;
    } else if (status != 200 || json_doc_parse((const char *)answer.data, answer.len, NULL, &d, NULL) != HANU_OK) {
        fprintf(stderr, "hanudb import: lines from %llu: %ld %.*s\n", (unsigned long long)first_line, status,
                (int)HANU_MIN(answer.len, 4000), (const char *)answer.data);
        rc = 1;
    } else {
        const json_value *root = json_doc_root(d), *errors = json_get(root, "errors");
        t->lines += member_u64(root, "lines");
        t->imported += member_u64(root, "imported");
        t->failed += member_u64(root, "failed");
        t->blank += member_u64(root, "blank");
        uint64_t txn = member_u64(root, "txn");
        if (txn > t->txn) t->txn = txn;
        t->requests++;
        for (size_t i = 0; i < json_len(errors); i++) {
            const json_value *e = json_at(errors, i);
            const char *code = "", *msg = "";
            size_t cl = 0, ml = 0;
            json_as_string(json_get(e, "code"), &code, &cl);
            json_as_string(json_get(e, "message"), &msg, &ml);
            fprintf(stderr, "hanudb import: line %llu: %.*s: %.*s\n", (unsigned long long)member_u64(e, "line"),
                    (int)cl, code, (int)ml, msg);
        }
        uint64_t omitted = member_u64(root, "errors_omitted");
        if (omitted)
            fprintf(stderr, "hanudb import: %llu more line errors between lines %llu and %llu\n",
                    (unsigned long long)omitted, (unsigned long long)first_line,
                    (unsigned long long)(first_line + member_u64(root, "lines") - 1));
    }
    json_doc_free(d);
    hanu_buf_free(&answer);
    free(url);
    return rc;
}

/* Takes the one argument that is not an option (FILE or -) out of argv. */
static const char *take_file(int *argc, char **argv)
{
    const char *file = NULL;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--", 2) && a[2]) {
            argv[out++] = argv[i];
            if (!strchr(a, '=') && strcmp(a, "--help") && i + 1 < *argc) argv[out++] = argv[++i];
        } else if (!file) {
            file = a;
        } else {
            return NULL;
        }
    }
    *argc = out;
    return file;
}

static uint64_t count_lf(const char *p, size_t n)
{
    uint64_t k = 0;
    for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++) k++;
    return k;
}

int cli_import_main(int argc, char **argv)
{
    const char *url = NULL, *collection = NULL, *token = NULL, *durability = NULL;
    uint64_t request_bytes = 8u << 20;
    int help = 0;
    for (int i = 1; i < argc; i++) help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
    const char *file = help ? NULL : take_file(&argc, argv);
    cli_opt opts[] = {
        { "url", CLI_STR, &url, "the server's documents API: http://HOST:PORT (or https://)" },
        { "collection", CLI_STR, &collection, "the collection to load into (created if missing)" },
        { "token", CLI_STR, &token, "bearer token (one that may write the collection)" },
        { "durability", CLI_STR, &durability, "none, local (default) or bucket: when each request is answered" },
        { "request-bytes", CLI_SIZE, &request_bytes, "bytes of the file per request, at most the server's "
          "--max-body (default 8 MiB)" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("import", "Loads an NDJSON file (FILE, or - for standard input; the last argument) into a "
                       "collection of a running server.", opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if (!url || !collection || !file) {
        fprintf(stderr, "hanudb import: --url, --collection and one FILE (or -) are required\n");
        return 2;
    }
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        fprintf(stderr, "hanudb import: --url must start with http:// or https://\n");
        return 2;
    }
    if (!cli_collection_name_ok(collection)) {
        fprintf(stderr, "hanudb import: \"%s\" is not a collection name (1-64 bytes of A-Z a-z 0-9 _ . -, not "
                "starting with _)\n", collection);
        return 2;
    }
    if (durability && strcmp(durability, "none") && strcmp(durability, "local") && strcmp(durability, "bucket")) {
        fprintf(stderr, "hanudb import: --durability must be none, local or bucket\n");
        return 2;
    }
    if (request_bytes < IMPORT_REQUEST_MIN || request_bytes > IMPORT_REQUEST_MAX) {
        fprintf(stderr, "hanudb import: --request-bytes must be from 64 KiB to 1 GiB\n");
        return 2;
    }
    int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0;
    if (fd < 0) {
        fprintf(stderr, "hanudb import: cannot open %s: %s\n", file, strerror(errno));
        return 2;
    }
    struct stat sb;
    uint64_t total = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
    size_t n = strlen(url);
    while (n && url[n - 1] == '/') n--;
    char *base = malloc(n + strlen(collection) + 64), *auth = NULL;
    char *buf = malloc(request_bytes);
    if (!base || !buf) {
        fprintf(stderr, "hanudb import: out of memory\n");
        free(base);
        free(buf);
        return 2;
    }
    sprintf(base, "%.*s/c/%s/_import%s%s", (int)n, url, collection, durability ? "?durability=" : "",
            durability ? durability : "");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/x-ndjson");
    headers = curl_slist_append(headers, "Expect:");   /* no 100-continue round trip per request */
    if (token && (auth = malloc(strlen(token) + 32)) != NULL) {
        sprintf(auth, "Authorization: Bearer %s", token);
        headers = curl_slist_append(headers, auth);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
    char what[128];
    snprintf(what, sizeof what, "importing into collection \"%s\"", collection);
    hlog_progress progress;
    hlog_progress_begin(&progress, "import", what, "documents", total, 0);
    import_totals t = {0};
    uint64_t t0 = hanu_now_ns(), next_line = 1, read_bytes = 0;
    size_t have = 0;
    int eof = 0, status = 0, skipping = 0;
    while (status != 2 && (!eof || have)) {
        while (!eof && have < request_bytes) {   /* fill the buffer */
            ssize_t r = read(fd, buf + have, request_bytes - have);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                fprintf(stderr, "hanudb import: reading %s: %s\n", file, strerror(errno));
                status = 2;
                break;
            }
            if (r == 0) eof = 1;
            have += (size_t)r;
            read_bytes += (size_t)r;
        }
        if (status == 2) break;
        if (skipping) {   /* the rest of a line longer than a request */
            char *lf = memchr(buf, '\n', have);
            size_t drop = lf ? (size_t)(lf - buf) + 1 : have;
            memmove(buf, buf + drop, have - drop);
            have -= drop;
            if (lf) { skipping = 0; next_line++; }
            continue;
        }
        size_t cut = have;
        if (!eof) {
            char *lf = memrchr(buf, '\n', have);
            if (!lf) {   /* one line fills the whole request */
                fprintf(stderr, "hanudb import: line %llu: too_large: longer than --request-bytes (%llu)\n",
                        (unsigned long long)next_line, (unsigned long long)request_bytes);
                t.failed++;
                t.lines++;
                status = 1;
                skipping = 1;
                have = 0;
                continue;
            }
            cut = (size_t)(lf - buf) + 1;
        }
        int r = send_part(c, base, buf, cut, next_line, &t);
        if (r) status = r;
        if (r == 2 || (r == 1 && t.requests == 0 && t.lines == 0)) break;   /* refused at once: say it once */
        if (r == 1) break;
        next_line += count_lf(buf, cut);
        t.bytes += cut;
        memmove(buf, buf + cut, have - cut);
        have -= cut;
        hlog_progress_update(&progress, t.bytes, t.imported);
    }
    hlog_progress_clear(&progress);
    if (t.failed && !status) status = 1;
    printf("{\"lines\":%llu,\"imported\":%llu,\"failed\":%llu,\"blank\":%llu,\"requests\":%llu,\"txn\":%llu,"
           "\"ms\":%llu}\n", (unsigned long long)t.lines, (unsigned long long)t.imported,
           (unsigned long long)t.failed, (unsigned long long)t.blank, (unsigned long long)t.requests,
           (unsigned long long)t.txn, (unsigned long long)((hanu_now_ns() - t0) / 1000000));
    (void)read_bytes;
    if (fd > 0) close(fd);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    free(auth);
    free(base);
    free(buf);
    return status;
}
