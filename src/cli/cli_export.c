/*
 * hanudb export --url http://HOST:PORT --collection NAME [--token T]: asks a
 * running server to export a collection into its bucket (POST /c/NAME/_export,
 * docs/API.md) and prints the server's answer, {"key":..,"docs":N,...}, on
 * stdout. With --to - (or --to FILE) it instead streams the collection as NDJSON
 * (GET /c/NAME/docs?format=ndjson: one snapshot, one document a line) to stdout
 * or the file, with a progress line and a summary line on stderr. Exit status:
 * 0 exported, 1 the server refused or failed (its error on stderr), 2 bad usage,
 * no answer or a transfer cut short.
 */
#include "cli/cli.h"
#include "cli/cli_options.h"
#include "base/base.h"
#include "hlog/hlog.h"
#include "json/json.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <unistd.h>
#include <curl/curl.h>

#define EXPORT_ANSWER_MAX (64u << 10)

static size_t keep_answer(char *p, size_t size, size_t n, void *ctx)
{
    hanu_buf *b = ctx;
    size_t len = size * n;
    if (b->len + len > EXPORT_ANSWER_MAX || hanu_buf_append(b, p, len) != HANU_OK) return 0;
    return len;
}

/* The export runs on a thread while this one watches the server's _status
   (bucket.exports: documents and bytes written by every export) once a second:
   a progress line in place on a terminal, a line every 10 s in a log. */
typedef struct export_run {
    CURL *c;
    CURLcode cc;
    atomic_int done;
} export_run;

static void *run_export(void *arg)
{
    export_run *r = arg;
    r->cc = curl_easy_perform(r->c);
    atomic_store(&r->done, 1);
    return NULL;
}

/* bucket.exports.documents and .bytes of GET base/_status: 0 when unknown. */
static int exports_counts(const char *status_url, struct curl_slist *headers, uint64_t *docs, uint64_t *bytes)
{
    CURL *c = curl_easy_init();
    if (!c) return -1;
    hanu_buf answer = {0};
    curl_easy_setopt(c, CURLOPT_URL, status_url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 2L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    int rc = -1;
    long code = 0;
    json_doc *d = NULL;
    if (curl_easy_perform(c) == CURLE_OK && curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK &&
        code == 200 && json_doc_parse((const char *)answer.data, answer.len, NULL, &d, NULL) == HANU_OK) {
        const json_value *e = json_get(json_get(json_doc_root(d), "bucket"), "exports");
        int64_t n, b;
        if (e && json_as_int64(json_get(e, "documents"), &n) == HANU_OK &&
            json_as_int64(json_get(e, "bytes"), &b) == HANU_OK) {
            *docs = (uint64_t)n;
            *bytes = (uint64_t)b;
            rc = 0;
        }
    }
    json_doc_free(d);
    hanu_buf_free(&answer);
    curl_easy_cleanup(c);
    return rc;
}

int cli_collection_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '_') return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '.' || *s == '-'))
            return 0;
    return 1;
}

/* --to: the NDJSON stream written as it comes, its lines counted. */
typedef struct ndjson_out {
    FILE *f;
    uint64_t bytes, docs;
    long status;
    hanu_buf error;                     /* the body of an answer other than 200 */
    hlog_progress progress;
} ndjson_out;

static size_t write_ndjson(char *p, size_t size, size_t n, void *ctx)
{
    ndjson_out *o = ctx;
    size_t len = size * n;
    if (o->status != 200) return keep_answer(p, size, n, &o->error);
    if (fwrite(p, 1, len, o->f) != len) return 0;
    for (const char *q = p, *e = p + len; (q = memchr(q, '\n', (size_t)(e - q))) != NULL; q++) o->docs++;
    o->bytes += len;
    hlog_progress_update(&o->progress, o->bytes, o->docs);
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    ndjson_out *o = ctx;
    size_t len = size * n;
    if (len > 9 && !memcmp(p, "HTTP/1.", 7)) o->status = strtol(p + 9, NULL, 10);
    else if (len > 9 && !strncasecmp(p, "hanu-txn:", 9))
        fprintf(stderr, "hanudb export: snapshot at txn %.*s\n", (int)strcspn(p + 9, "\r\n") - 1, p + 10);
    return len;
}

/* hanudb export --to DEST: 0, 1 refused, 2 no answer or cut short. */
static int export_ndjson(const char *base, size_t base_len, const char *collection, struct curl_slist *headers,
                         const char *to, uint64_t timeout_s)
{
    char *full = malloc(base_len + strlen(collection) + 40);
    if (!full) return 2;
    sprintf(full, "%.*s/c/%s/docs?format=ndjson", (int)base_len, base, collection);
    ndjson_out o = { .f = strcmp(to, "-") ? fopen(to, "wb") : stdout };
    if (o.f) setvbuf(o.f, NULL, _IOFBF, 1u << 20);
    if (!o.f) {
        fprintf(stderr, "hanudb export: cannot open %s: %s\n", to, strerror(errno));
        free(full);
        return 2;
    }
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_ndjson);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &o);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &o);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10);   /* fewer, larger writes (16 KiB by default) */
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    char what[128];
    snprintf(what, sizeof what, "exporting collection \"%s\"", collection);
    hlog_progress_begin(&o.progress, "export", what, "documents", 0, 0);
    uint64_t t0 = hanu_now_ns();
    CURLcode cc = curl_easy_perform(c);
    hlog_progress_clear(&o.progress);
    int rc = 0;
    if (fflush(o.f) != 0 || (o.f != stdout && fclose(o.f) != 0)) {
        fprintf(stderr, "hanudb export: writing %s: %s\n", to, strerror(errno));
        rc = 2;
    } else if (o.status != 200 && o.status) {
        fprintf(stderr, "hanudb export: %ld %.*s\n", o.status, (int)o.error.len, (const char *)o.error.data);
        rc = 1;
    } else if (cc != CURLE_OK) {
        fprintf(stderr, "hanudb export: %s: %s (after %llu documents: the output is incomplete)\n", full,
                curl_easy_strerror(cc), (unsigned long long)o.docs);
        rc = 2;
    } else {
        uint64_t ms = (hanu_now_ns() - t0) / 1000000;
        fprintf(stderr, "hanudb export: %llu documents, %llu bytes in %llu ms\n", (unsigned long long)o.docs,
                (unsigned long long)o.bytes, (unsigned long long)ms);
    }
    hanu_buf_free(&o.error);
    curl_easy_cleanup(c);
    free(full);
    return rc;
}

int cli_export_main(int argc, char **argv)
{
    const char *url = NULL, *collection = NULL, *token = NULL, *to = NULL;
    uint64_t timeout_s = 3600;
    cli_opt opts[] = {
        { "url", CLI_STR, &url, "the server's documents API: http://HOST:PORT (or https://)" },
        { "collection", CLI_STR, &collection, "the collection to export" },
        { "token", CLI_STR, &token, "bearer token (one that may write the collection)" },
        { "timeout-s", CLI_U64, &timeout_s, "longest wait for the answer (default 3600)" },
        { "to", CLI_STR, &to, "- (standard output) or a file: the collection as NDJSON, from the server "
          "(GET /c/NAME/docs?format=ndjson), instead of an object in its bucket" },
        { NULL, 0, NULL, NULL },
    };
    int rc = cli_parse("export", "Exports a collection of a running server into its bucket as zstd JSON lines, "
                       "or with --to as NDJSON to standard output or a file.",
                       opts, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if (!url || !collection) {
        fprintf(stderr, "hanudb export: --url and --collection are required\n");
        return 2;
    }
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        fprintf(stderr, "hanudb export: --url must start with http:// or https://\n");
        return 2;
    }
    if (!cli_collection_name_ok(collection)) {
        fprintf(stderr, "hanudb export: \"%s\" is not a collection name (1-64 bytes of A-Z a-z 0-9 _ . -, not "
                "starting with _)\n", collection);
        return 2;
    }
    size_t n = strlen(url);
    while (n && url[n - 1] == '/') n--;
    char *full = malloc(n + strlen(collection) + 16), *auth = NULL;
    if (!full) return 2;
    sprintf(full, "%.*s/c/%s/_export", (int)n, url, collection);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (token) {
        auth = malloc(strlen(token) + 32);
        if (auth) {
            sprintf(auth, "Authorization: Bearer %s", token);
            headers = curl_slist_append(headers, auth);
        }
    }
    if (to) {
        int st = export_ndjson(url, n, collection, headers, to, timeout_s);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        curl_global_cleanup();
        free(auth);
        free(full);
        return st;
    }
    hanu_buf answer = {0};
    long status = 0;
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    char *status_url = malloc(n + 16);
    if (status_url) sprintf(status_url, "%.*s/_status", (int)n, url);
    uint64_t docs0 = 0, bytes0 = 0, docs = 0, bytes = 0;
    int counted = status_url && exports_counts(status_url, headers, &docs0, &bytes0) == 0;
    char what[128];
    snprintf(what, sizeof what, "exporting collection \"%s\"", collection);
    hlog_progress progress;
    hlog_progress_begin(&progress, "export", what, "documents", 0, 0);
    export_run run = { .c = c };
    pthread_t thread;
    CURLcode cc;
    if (pthread_create(&thread, NULL, run_export, &run) != 0) {
        cc = curl_easy_perform(c);
    } else {
        for (int tick = 1; !atomic_load(&run.done); tick++) {
            usleep(100000);
            /* The server counts every export: what moved since this one started. */
            if (counted && tick % 10 == 0 && exports_counts(status_url, headers, &docs, &bytes) == 0)
                hlog_progress_update(&progress, bytes - bytes0, docs - docs0);
        }
        pthread_join(thread, NULL);
        cc = run.cc;
    }
    hlog_progress_clear(&progress);
    free(status_url);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    int exit_status;
    if (cc != CURLE_OK) {
        fprintf(stderr, "hanudb export: %s: %s\n", full, curl_easy_strerror(cc));
        exit_status = 2;
    } else if (status == 200) {
        printf("%.*s\n", (int)answer.len, (const char *)answer.data);
        exit_status = 0;
    } else {
        fprintf(stderr, "hanudb export: %ld %.*s\n", status, (int)answer.len, (const char *)answer.data);
        exit_status = 1;
    }
    hanu_buf_free(&answer);
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    free(auth);
    free(full);
    return exit_status;
}
