/*
 * docbench: the documents benchmark of docs/BENCHMARKS.md ("documents"),
 * against the HTTP API of docs/API.md.
 *
 *   docbench --url http://HOST:PORT --phase write|read|all --duration S
 *            --clients N [--collection NAME] [--seed N] [--durability local|none]
 *            [--mix get=50,find=25,search=25] [--search-words uniform|zipf]
 *            [--ids FILE] [--verify] [--json]
 *
 * A lean client on purpose, so that the server is what gets measured: one
 * thread, one epoll loop, non-blocking sockets, HTTP/1.1 keep-alive, exactly
 * one request in flight per connection (no pipelining). Requests are written
 * and responses parsed by hand (status line, Content-Length, chunked bodies,
 * Connection: close, responses split over any number of reads); no libcurl.
 * Nothing is allocated on the hot path once each connection's buffers have
 * grown, except the list of written ids (amortised doubling).
 *
 * Write phase: PUT /c/{col} (201 or 200), then every client POSTs one
 * document (bench/docgen.h: document i of the seed, i taken in send order)
 * per request to /c/{col}/docs?durability=D for the duration; the "_id" of
 * each answer is kept for the read phase. Read phase: every client picks an
 * op by the --mix weights: get (GET /c/{col}/docs/{id}, an id written by the
 * write phase, uniform), find (POST /c/{col}/_find, filter user = X sorted by
 * ts descending, limit 20) or search (POST /c/{col}/_search, one vocabulary
 * word, uniform or with the documents' Zipf skew, filter kind = Y, limit 10).
 * --ids FILE keeps the written ids ("INDEX<tab>ID" a line, INDEX = which
 * document of the seed) so that a later --phase read can get them; --verify
 * checks every get's body byte for byte against the regenerated document.
 *
 * Each phase stops issuing at its duration and waits for the requests in
 * flight. Latency = send of the request to the last byte of its answer; each
 * phase's latencies go into one array allocated and touched before the run
 * (op type in the top byte, nanoseconds below), sorted at the phase's end.
 * ops/s = successful answers / (last answer - phase start). An answer with an
 * unexpected status (anything but 200/201; 404 and 5xx included), a malformed
 * answer, a connection error or a timeout is an error; after an error of the
 * connection the client reconnects and goes on, after an unexpected status it
 * keeps its connection. Exit status: 0 ok, 1 some request failed, 2 bad
 * usage or the server is unreachable.
 *
 * Memory: a second thread asks GET /_status once a second during the phases
 * and reports the peaks of the server's process.anon_bytes, of this machine's
 * dirty page cache (Dirty + Writeback of /proc/meminfo, machine-wide), of their
 * sum and of the server's peak_rss_bytes (server_peak_anon_bytes,
 * peak_dirty_bytes, peak_anon_plus_dirty_bytes, server_peak_rss_bytes).
 */
#include "bench_util.h"
#include "base/base.h"
#include "docgen.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define STALL_NS (30ull * 1000000000ull)   /* no answer at all for this long: time out */
#define DRAIN_NS (30ull * 1000000000ull)   /* after the duration, wait this long at most */
#define MAX_RESPONSE (64u << 20)           /* a larger answer is an error */
#define MAX_HEADER (64u << 10)
#define LAT_PER_S 300000ull                /* latency slots per second of duration */
#define LAT_NS_MASK ((1ull << 56) - 1)
#define FIND_LIMIT 20
#define SEARCH_LIMIT 10
#define NO_DOC UINT32_MAX

enum op { OP_INSERT, OP_GET, OP_FIND, OP_SEARCH, N_OPS };
static const char *const op_names[N_OPS] = { "insert", "get", "find", "search" };

enum phase { PHASE_WRITE = 1, PHASE_READ = 2, PHASE_ALL = 3 };

struct config {
    const char *url, *collection, *durability, *ids_path, *mix_text;
    char host[256], port[16];
    char host_header[300];
    int phases;                   /* PHASE_WRITE | PHASE_READ */
    long duration, clients;
    uint64_t seed;
    unsigned mix[N_OPS];          /* read weights; mix[OP_INSERT] unused */
    int search_zipf;
    int stale;                    /* --fresh off: finds and searches send "fresh":false */
    int verify;                   /* compare every get's body with the document */
    int json;
};

struct client {
    int fd;                       /* -1 while not connected */
    int dead;                     /* could not reconnect: out of the run */
    int busy;                     /* a request is in flight */
    uint8_t op;                   /* op of the request in flight */
    uint64_t doc;                 /* insert: index of the document sent */
    size_t id_k;                  /* get: index of the id asked for */
    uint64_t t_send;
    uint64_t rng;
    hanu_buf wbuf;                /* the request in flight */
    size_t woff;                  /* bytes of wbuf sent */
    hanu_buf rbuf;                /* bytes received, not yet consumed */
};

/* Results of one op type in one phase. */
struct op_stats {
    long ok, errors, hits;
    double ops_s, p50, p90, p99, p999, max;     /* microseconds */
};

struct phase_result {
    int ran;
    double secs, cpu_s;
    struct op_stats op[N_OPS];
    struct op_stats all;          /* every op of the phase together */
};

struct run {
    const struct config *cfg;
    struct docgen *gen;
    struct client *cl;
    int epfd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    /* request prefixes, built once */
    hanu_buf pre_insert, pre_get, pre_find, pre_search;
    uint32_t mix_total;
    /* the phase running */
    int phase;
    uint64_t t_start, t_end, t_last_answer, t_progress, t_event;
    int stopping;
    long busy, live, completed, progress_done;
    long ok[N_OPS], errors[N_OPS], hits[N_OPS];
    uint64_t *lat;                /* lat_cap slots: op << 56 | ns */
    size_t lat_cap, nlat;
    long dropped;                 /* samples beyond lat_cap */
    /* whole run */
    uint64_t next_doc, doc_bytes;
    long reconnects, err_printed, total_errors;
    char *ids;                    /* written ids, back to back */
    size_t ids_len, ids_cap;
    uint32_t *id_off;             /* id k = ids[id_off[k] .. id_off[k + 1]) */
    uint32_t *id_doc;             /* id k names document id_doc[k], or NO_DOC */
    size_t nids, id_off_cap;
    long verified;                /* gets whose body matched the document */
    char doc[DOCGEN_DOC_MAX];
    struct phase_result res[3];   /* indexed by phase */
    /* memory, sampled once a second during the phases (mem_sampler) */
    volatile int sampler_stop;
    uint64_t peak_anon, peak_dirty, peak_sum, peak_rss;   /* bytes */
    long mem_samples;
};

static uint64_t now_ns(void) { return hanu_now_ns(); }

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- small buffer writers (hot path: no formatting library calls) ---- */

static int buf_puts(hanu_buf *b, const char *s) { return hanu_buf_append(b, s, strlen(s)); }

static int buf_putu(hanu_buf *b, uint64_t v)
{
    char tmp[24];
    size_t d = sizeof tmp;
    do {
        tmp[--d] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return hanu_buf_append(b, tmp + d, sizeof tmp - d);
}

/* Appends s percent-encoded: everything but RFC 3986 unreserved characters. */
static int buf_put_pct(hanu_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    if (hanu_buf_reserve(b, n * 3) != HANU_OK)
        return HANU_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            b->data[b->len++] = c;
        } else {
            b->data[b->len++] = '%';
            b->data[b->len++] = (uint8_t)hex[c >> 4];
            b->data[b->len++] = (uint8_t)hex[c & 15];
        }
    }
    return HANU_OK;
}

/* ---- HTTP/1.1 response parser ---- */

enum { HTTP_DONE = 0, HTTP_INCOMPLETE = 1, HTTP_INTERIM = 2, HTTP_BAD = -1 };

struct http_resp {
    int status;
    int close;                    /* the server closes the connection after it */
    size_t total;                 /* bytes of the response in the buffer */
    const uint8_t *body;          /* de-chunked in place */
    size_t body_len;
    const char *why;              /* HTTP_BAD: what was wrong */
};

static int ci_prefix(const uint8_t *p, size_t n, const char *name)
{
    size_t k = strlen(name);
    if (n < k)
        return 0;
    for (size_t i = 0; i < k; i++)
        if (tolower(p[i]) != name[i])
            return 0;
    return 1;
}

/* True when the comma-separated header value [p, p+n) holds token tok. */
static int ci_has_token(const uint8_t *p, size_t n, const char *tok)
{
    size_t k = strlen(tok);
    for (size_t i = 0; i + k <= n; i++)
        if (ci_prefix(p + i, n - i, tok) && (i == 0 || p[i - 1] == ' ' || p[i - 1] == ',' ||
                                             p[i - 1] == '\t') &&
            (i + k == n || p[i + k] == ' ' || p[i + k] == ',' || p[i + k] == '\t' ||
             p[i + k] == ';'))
            return 1;
    return 0;
}

/*
 * Walks a chunked body starting at p[pos]. When dst is not NULL the chunks'
 * data are moved down to dst (in place: dst <= every byte still to be read).
 * Returns HTTP_DONE with *end just past the last CRLF, HTTP_INCOMPLETE or
 * HTTP_BAD.
 */
static int http_chunks(uint8_t *p, size_t n, size_t pos, uint8_t *dst, size_t *dst_len,
                       size_t *end)
{
    size_t out = 0;
    for (;;) {
        size_t i = pos, size = 0;
        int digits = 0;
        for (; i < n && isxdigit(p[i]); i++, digits++) {
            if (size > (MAX_RESPONSE >> 4))
                return HTTP_BAD;
            int c = tolower(p[i]);
            size = size * 16 + (size_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        if (i == n)
            return HTTP_INCOMPLETE;
        if (!digits)
            return HTTP_BAD;
        const uint8_t *lf = memchr(p + i, '\n', n - i);   /* skip ";ext" */
        if (!lf)
            return n - i > 4096 ? HTTP_BAD : HTTP_INCOMPLETE;
        if (lf == p + i || lf[-1] != '\r')
            return HTTP_BAD;
        pos = (size_t)(lf - p) + 1;
        if (size == 0) {                                   /* trailers, then CRLF */
            for (;;) {
                const uint8_t *e = memchr(p + pos, '\n', n - pos);
                if (!e)
                    return n - pos > 4096 ? HTTP_BAD : HTTP_INCOMPLETE;
                size_t line = (size_t)(e - p) - pos;
                pos = (size_t)(e - p) + 1;
                if (line == 1 && p[pos - 2] == '\r') {
                    *end = pos;
                    if (dst_len)
                        *dst_len = out;
                    return HTTP_DONE;
                }
            }
        }
        if (n - pos < size + 2)
            return HTTP_INCOMPLETE;
        if (p[pos + size] != '\r' || p[pos + size + 1] != '\n')
            return HTTP_BAD;
        if (dst)
            memmove(dst + out, p + pos, size);
        out += size;
        pos += size + 2;
    }
}

/*
 * Parses one response at the start of p[0, n). eof: the peer has closed (a
 * body without length ends there). HTTP_DONE fills r (a chunked body is
 * rewritten in place, so p must be writable); HTTP_INTERIM is a 1xx answer
 * of r->total bytes to skip; HTTP_INCOMPLETE wants more bytes.
 */
static int http_parse(uint8_t *p, size_t n, int eof, struct http_resp *r)
{
    memset(r, 0, sizeof *r);
    const uint8_t *he = memmem(p, n, "\r\n\r\n", 4);
    if (!he) {
        r->why = "header too large";
        return n > MAX_HEADER ? HTTP_BAD : HTTP_INCOMPLETE;
    }
    size_t hlen = (size_t)(he - p) + 4;
    r->why = "malformed status line";
    if (hlen < 16 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') ||
        p[8] != ' ' || !isdigit(p[9]) || !isdigit(p[10]) || !isdigit(p[11]) ||
        (p[12] != ' ' && p[12] != '\r'))
        return HTTP_BAD;
    r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    int http10 = p[7] == '0', keep_alive = 0, chunked = 0;
    long long clen = -1;
    const uint8_t *line = memchr(p, '\n', hlen) + 1;
    while (line < p + hlen - 2) {
        const uint8_t *eol = memchr(line, '\n', (size_t)(p + hlen - line));
        size_t ll = (size_t)(eol - line);
        if (ll && line[ll - 1] == '\r')
            ll--;
        const uint8_t *colon = memchr(line, ':', ll);
        r->why = "malformed header line";
        if (!colon || colon == line)
            return HTTP_BAD;
        const uint8_t *v = colon + 1, *ve = line + ll;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t nl = (size_t)(colon - line), vl = (size_t)(ve - v);
        if (nl == 14 && ci_prefix(line, nl, "content-length")) {
            long long x = 0;
            r->why = "bad Content-Length";
            if (vl == 0 || vl > 12)
                return HTTP_BAD;
            for (size_t i = 0; i < vl; i++) {
                if (!isdigit(v[i]))
                    return HTTP_BAD;
                x = x * 10 + (v[i] - '0');
            }
            if (clen >= 0 && clen != x)
                return HTTP_BAD;
            clen = x;
        } else if (nl == 17 && ci_prefix(line, nl, "transfer-encoding")) {
            chunked = ci_has_token(v, vl, "chunked");
        } else if (nl == 10 && ci_prefix(line, nl, "connection")) {
            if (ci_has_token(v, vl, "close"))
                r->close = 1;
            if (ci_has_token(v, vl, "keep-alive"))
                keep_alive = 1;
        }
        line = eol + 1;
    }
    if (http10 && !keep_alive)
        r->close = 1;
    if (r->status >= 100 && r->status < 200) {
        r->total = hlen;
        return HTTP_INTERIM;
    }
    r->body = p + hlen;
    if (r->status == 204 || r->status == 304) {
        r->total = hlen;
    } else if (chunked) {
        size_t end, blen;
        int rc = http_chunks(p, n, hlen, NULL, NULL, &end);
        if (rc == HTTP_INCOMPLETE && n - hlen > MAX_RESPONSE)
            rc = HTTP_BAD;
        if (rc != HTTP_DONE) {
            r->why = "malformed or oversized chunked body";
            return rc;
        }
        http_chunks(p, n, hlen, p + hlen, &blen, &end);
        r->total = end;
        r->body_len = blen;
    } else if (clen >= 0) {
        r->why = "response too large";
        if ((unsigned long long)clen > MAX_RESPONSE)
            return HTTP_BAD;
        if (n - hlen < (size_t)clen)
            return HTTP_INCOMPLETE;
        r->total = hlen + (size_t)clen;
        r->body_len = (size_t)clen;
    } else {                                      /* body until the connection closes */
        r->close = 1;
        r->why = "response too large";
        if (n - hlen > MAX_RESPONSE)
            return HTTP_BAD;
        if (!eof)
            return HTTP_INCOMPLETE;
        r->total = n;
        r->body_len = n - hlen;
    }
    return HTTP_DONE;
}

/* The string value of the first "_id" member in a JSON body, borrowed. */
static int find_id(const uint8_t *b, size_t n, const char **id, size_t *len)
{
    const uint8_t *k = memmem(b, n, "\"_id\"", 5);
    if (!k)
        return -1;
    const uint8_t *e = b + n, *q = k + 5;
    while (q < e && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
        q++;
    if (q == e || *q++ != ':')
        return -1;
    while (q < e && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
        q++;
    if (q == e || *q++ != '"')
        return -1;
    const uint8_t *s = q;
    while (q < e && *q != '"' && *q != '\\')
        q++;
    /* Server ids are plain ASCII; an escaped id would need unescaping first. */
    if (q == e || *q != '"' || q == s || q - s > 256)
        return -1;
    *id = (const char *)s;
    *len = (size_t)(q - s);
    return 0;
}

/* How many "_id" members a find/search answer holds: its hits, roughly. */
static long count_hits(const uint8_t *b, size_t n)
{
    long hits = 0;
    const uint8_t *e = b + n;
    for (const uint8_t *q = b; (q = memmem(q, (size_t)(e - q), "\"_id\"", 5)) != NULL; q += 5)
        hits++;
    return hits;
}

/* ---- command line ---- */

static void usage(FILE *out)
{
    fputs("usage: docbench [--url http://HOST:PORT] [--phase write|read|all] [--duration S]\n"
          "                [--clients N] [--collection NAME] [--seed N]\n"
          "                [--durability local|none|bucket] [--mix get=W,find=W,search=W]\n"
          "                [--search-words uniform|zipf] [--fresh on|off] [--ids FILE] [--verify] [--json]\n"
          "defaults: --url http://127.0.0.1:8080, --phase all, --duration 20 (per phase),\n"
          "  --clients 32, --collection bench, --seed 1, --durability local, --mix get=100,\n"
          "  --search-words uniform, --fresh on (off: finds and searches send \"fresh\":false and\n"
          "  answer from the index as it is, without waiting for the writes before them). --ids FILE: the write phase saves the ids it got there\n"
          "  (INDEX<tab>ID a line); --phase read with get in the mix loads them from there (use\n"
          "  the same --seed). --verify: every get's body must be the document written, with\n"
          "  its \"_id\" first. Progress goes to stderr every second; the table to stdout (stderr with\n"
          "  --json, which prints one JSON object on stdout).\n"
          "  Exit status: 0 ok, 1 a request failed, 2 bad usage or server unreachable.\n", out);
}

/* "http://HOST[:PORT][/]"; HOST may be [v6]. */
static int parse_url(struct config *c)
{
    const char *u = c->url;
    if (strncmp(u, "http://", 7) != 0)
        return -1;
    u += 7;
    size_t n = strcspn(u, "/");
    if (u[n] && strcmp(u + n, "/") != 0)
        return -1;                            /* no path prefixes */
    if (n == 0 || n >= sizeof c->host_header)
        return -1;
    memcpy(c->host_header, u, n);
    c->host_header[n] = 0;
    const char *hp = c->host_header, *colon;
    size_t hl;
    if (hp[0] == '[') {
        const char *rb = strchr(hp, ']');
        if (!rb)
            return -1;
        hp++;
        hl = (size_t)(rb - hp);
        colon = rb[1] == ':' ? rb + 1 : NULL;
        if (!colon && rb[1])
            return -1;
    } else {
        colon = strrchr(hp, ':');
        hl = colon ? (size_t)(colon - hp) : strlen(hp);
    }
    if (hl == 0 || hl >= sizeof c->host)
        return -1;
    memcpy(c->host, hp, hl);
    c->host[hl] = 0;
    const char *port = colon ? colon + 1 : "80";
    long pv;
    if (bench_parse_long(port, 1, 65535, &pv) != 0)
        return -1;
    snprintf(c->port, sizeof c->port, "%ld", pv);
    return 0;
}

static int parse_mix(const char *s, unsigned mix[N_OPS])
{
    unsigned m[N_OPS] = { 0 };
    while (*s) {
        size_t n = strcspn(s, ",");
        const char *eq = memchr(s, '=', n);
        if (!eq)
            return -1;
        size_t kl = (size_t)(eq - s);
        int op = -1;
        for (int k = OP_GET; k < N_OPS; k++)
            if (strlen(op_names[k]) == kl && memcmp(op_names[k], s, kl) == 0)
                op = k;
        char num[16];
        size_t vl = n - kl - 1;
        long w;
        if (op < 0 || vl == 0 || vl >= sizeof num)
            return -1;
        memcpy(num, eq + 1, vl);
        num[vl] = 0;
        if (bench_parse_long(num, 0, 1000000, &w) != 0)
            return -1;
        m[op] = (unsigned)w;
        s += n;
        if (*s == ',')
            s++;
    }
    if (m[OP_GET] + m[OP_FIND] + m[OP_SEARCH] == 0)
        return -1;
    memcpy(mix, m, sizeof m);
    return 0;
}

static int valid_collection(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '_')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
            return 0;
    return 1;
}

/* 0 ok, 1 printed help, 2 bad usage (message printed). */
static int parse_args(int argc, char **argv, struct config *c)
{
    *c = (struct config){ .url = "http://127.0.0.1:8080", .collection = "bench",
                          .durability = "local", .mix_text = "get=100", .phases = PHASE_ALL,
                          .duration = 20, .clients = 32, .seed = 1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--json") == 0) {
            c->json = 1;
            continue;
        }
        if (strcmp(a, "--verify") == 0) {
            c->verify = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "docbench: %s: unknown option or missing value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        long x;
        if (strcmp(a, "--url") == 0) {
            c->url = v;
        } else if (strcmp(a, "--collection") == 0) {
            c->collection = v;
            bad = !valid_collection(v);
        } else if (strcmp(a, "--phase") == 0) {
            if (strcmp(v, "write") == 0) c->phases = PHASE_WRITE;
            else if (strcmp(v, "read") == 0) c->phases = PHASE_READ;
            else if (strcmp(v, "all") == 0) c->phases = PHASE_ALL;
            else bad = 1;
        } else if (strcmp(a, "--duration") == 0) {
            bad = bench_parse_long(v, 1, 86400, &c->duration);
        } else if (strcmp(a, "--clients") == 0) {
            bad = bench_parse_long(v, 1, 10000, &c->clients);
        } else if (strcmp(a, "--seed") == 0) {
            bad = bench_parse_long(v, 0, LONG_MAX, &x);
            c->seed = (uint64_t)x;
        } else if (strcmp(a, "--durability") == 0) {
            c->durability = v;
            bad = strcmp(v, "local") != 0 && strcmp(v, "none") != 0 && strcmp(v, "bucket") != 0;
        } else if (strcmp(a, "--mix") == 0) {
            c->mix_text = v;
        } else if (strcmp(a, "--search-words") == 0) {
            if (strcmp(v, "uniform") == 0) c->search_zipf = 0;
            else if (strcmp(v, "zipf") == 0) c->search_zipf = 1;
            else bad = 1;
        } else if (strcmp(a, "--fresh") == 0) {
            if (strcmp(v, "on") == 0) c->stale = 0;
            else if (strcmp(v, "off") == 0) c->stale = 1;
            else bad = 1;
        } else if (strcmp(a, "--ids") == 0) {
            c->ids_path = v;
        } else {
            fprintf(stderr, "docbench: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "docbench: bad value for %s: %s (see --help)\n", a, v);
            return 2;
        }
    }
    if (parse_url(c) != 0) {
        fprintf(stderr, "docbench: bad --url %s: want http://HOST:PORT\n", c->url);
        return 2;
    }
    if (parse_mix(c->mix_text, c->mix) != 0) {
        fprintf(stderr, "docbench: bad --mix %s: want e.g. get=50,find=25,search=25\n",
                c->mix_text);
        return 2;
    }
    if (c->phases == PHASE_READ && c->mix[OP_GET] && !c->ids_path) {
        fprintf(stderr, "docbench: --phase read with get in the mix needs --ids FILE "
                        "(saved by an earlier --phase write --ids FILE)\n");
        return 2;
    }
    return 0;
}

/* ---- connections ---- */

static int resolve(struct run *r)
{
    const struct config *cfg = r->cfg;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
    int gai = getaddrinfo(cfg->host, cfg->port, &hints, &res);
    if (gai != 0) {
        fprintf(stderr, "docbench: resolve %s: %s\n", cfg->host, gai_strerror(gai));
        return -1;
    }
    memcpy(&r->addr, res->ai_addr, res->ai_addrlen);
    r->addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* A connected socket (blocking connect: the server is local), non-blocking after. */
static int open_conn(const struct run *r, int nonblocking, int *fd_out, int *err)
{
    int fd = socket(r->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)&r->addr, r->addr_len) != 0) {
        *err = errno;
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (nonblocking) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
            *err = errno;
            close(fd);
            return -1;
        }
    }
    *fd_out = fd;
    return 0;
}

static void note_error(struct run *r, struct client *c, const char *fmt, ...)
{
    r->total_errors++;
    if (r->err_printed >= 10)
        return;
    if (++r->err_printed == 10)
        fputs("docbench: (further errors are counted, not printed)\n", stderr);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "docbench: client %ld: %s: ", (long)(c - r->cl),
            c->busy ? op_names[c->op] : "idle");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void client_close(struct run *r, struct client *c)
{
    if (c->fd >= 0) {
        epoll_ctl(r->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    c->rbuf.len = 0;
}

/* (Re)connects c; on failure c is out of the run. */
static int client_connect(struct run *r, struct client *c)
{
    int err = 0;
    if (open_conn(r, 1, &c->fd, &err) != 0) {
        c->fd = -1;
        if (!c->dead) {
            c->dead = 1;
            r->live--;
            note_error(r, c, "connect: %s", strerror(err));
        }
        return -1;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        close(c->fd);
        c->fd = -1;
        c->dead = 1;
        r->live--;
        return -1;
    }
    return 0;
}

/* The request in flight failed (or the connection did): count it and close.
 * The event loop starts c again (not here: no recursion through send errors). */
static void client_fail(struct run *r, struct client *c, const char *fmt, const char *detail)
{
    if (c->busy) {
        r->errors[c->op]++;
        r->completed++;
        note_error(r, c, fmt, detail);
        c->busy = 0;
        r->busy--;
    }
    client_close(r, c);
}

/* Writes what is left of c's request; arms EPOLLOUT when the socket is full. */
static void client_flush(struct run *r, struct client *c)
{
    if (bench_send_pending(r->epfd, c->fd, c, c->wbuf.data, c->wbuf.len, &c->woff) != 0)
        client_fail(r, c, "send: %s", strerror(errno));
}

/* Request builders: wbuf = the prefix built once + the parts that vary. */

static int build_insert(struct run *r, struct client *c)
{
    c->doc = r->next_doc++;
    size_t n = docgen_doc(r->gen, c->doc, r->doc);
    r->doc_bytes += n;
    hanu_buf *b = &c->wbuf;
    return hanu_buf_append(b, r->pre_insert.data, r->pre_insert.len) | buf_putu(b, n) |
           hanu_buf_append(b, "\r\n\r\n", 4) | hanu_buf_append(b, r->doc, n);
}

static int build_get(struct run *r, struct client *c)
{
    size_t k = (size_t)(docgen_next(&c->rng) % r->nids);
    c->id_k = k;
    hanu_buf *b = &c->wbuf;
    return hanu_buf_append(b, r->pre_get.data, r->pre_get.len) |
           buf_put_pct(b, r->ids + r->id_off[k], r->id_off[k + 1] - r->id_off[k]) |
           buf_puts(b, " HTTP/1.1\r\nHost: ") | buf_puts(b, r->cfg->host_header) |
           hanu_buf_append(b, "\r\n\r\n", 4);
}

/* prefix + Content-Length + body for the POSTs of find and search. */
static int build_post(hanu_buf *b, const hanu_buf *pre, const char *body, size_t n)
{
    return hanu_buf_append(b, pre->data, pre->len) | buf_putu(b, n) |
           hanu_buf_append(b, "\r\n\r\n", 4) | hanu_buf_append(b, body, n);
}

static int build_find(struct run *r, struct client *c)
{
    char user[8], body[128];
    docgen_user(docgen_below(&c->rng, DOCGEN_USERS), user);
    int n = snprintf(body, sizeof body,
                     "{\"filter\":{\"user\":\"%s\"},\"sort\":{\"ts\":-1},\"limit\":%d%s}", user,
                     FIND_LIMIT, r->cfg->stale ? ",\"fresh\":false" : "");
    return build_post(&c->wbuf, &r->pre_find, body, (size_t)n);
}

static int build_search(struct run *r, struct client *c)
{
    char body[128];
    size_t wl;
    uint32_t rank = r->cfg->search_zipf ? docgen_zipf(r->gen, &c->rng)
                                        : docgen_below(&c->rng, DOCGEN_VOCAB);
    const char *w = docgen_word(r->gen, rank, &wl);
    const char *kind = docgen_kind(docgen_below(&c->rng, DOCGEN_KINDS));
    int n = snprintf(body, sizeof body,
                     "{\"q\":\"%.*s\",\"filter\":{\"kind\":\"%s\"},\"limit\":%d%s}", (int)wl, w,
                     kind, SEARCH_LIMIT, r->cfg->stale ? ",\"fresh\":false" : "");
    return build_post(&c->wbuf, &r->pre_search, body, (size_t)n);
}

static enum op pick_read_op(struct run *r, struct client *c)
{
    uint32_t x = docgen_below(&c->rng, r->mix_total);
    for (int k = OP_GET; k < N_OPS; k++) {
        if (x < r->cfg->mix[k])
            return (enum op)k;
        x -= r->cfg->mix[k];
    }
    return OP_GET;
}

/* Starts c's next op, or leaves it idle once the phase's time is up. */
static void client_next(struct run *r, struct client *c, uint64_t t)
{
    if (c->dead)
        return;
    if (t >= r->t_end) {
        r->stopping = 1;
        return;
    }
    if (c->fd < 0) {
        r->reconnects++;
        if (client_connect(r, c) != 0)
            return;
    }
    enum op op = r->phase == PHASE_WRITE ? OP_INSERT : pick_read_op(r, c);
    c->wbuf.len = 0;
    c->woff = 0;
    int rc;
    switch (op) {
    case OP_INSERT: rc = build_insert(r, c); break;
    case OP_GET: rc = build_get(r, c); break;
    case OP_FIND: rc = build_find(r, c); break;
    default: rc = build_search(r, c); break;
    }
    if (rc != 0) {
        fputs("docbench: out of memory\n", stderr);
        exit(2);
    }
    c->op = (uint8_t)op;
    c->busy = 1;
    r->busy++;
    c->t_send = t;
    client_flush(r, c);
}

static int save_id(struct run *r, const char *id, size_t len, uint64_t doc)
{
    if (r->nids + 2 > r->id_off_cap) {
        size_t cap = r->id_off_cap ? r->id_off_cap * 2 : 65536;
        uint32_t *p = realloc(r->id_off, cap * sizeof *p);
        if (p)
            r->id_off = p;
        uint32_t *d = p ? realloc(r->id_doc, cap * sizeof *d) : NULL;
        if (!d)
            return -1;
        r->id_doc = d;
        r->id_off_cap = cap;
        if (r->nids == 0)
            r->id_off[0] = 0;
    }
    if (r->ids_len + len > r->ids_cap) {
        size_t cap = r->ids_cap ? r->ids_cap * 2 : 1 << 20;
        while (cap < r->ids_len + len)
            cap *= 2;
        char *p = realloc(r->ids, cap);
        if (!p)
            return -1;
        r->ids = p;
        r->ids_cap = cap;
    }
    if (r->ids_len + len > UINT32_MAX)
        return -1;
    memcpy(r->ids + r->ids_len, id, len);
    r->ids_len += len;
    r->id_doc[r->nids] = doc < NO_DOC ? (uint32_t)doc : NO_DOC;
    r->id_off[++r->nids] = (uint32_t)r->ids_len;
    return 0;
}

/* True when body is document id_doc[k] as written, with "_id":"ID" inserted
 * as its first member (docs/API.md: stored as the exact bytes sent). */
static int same_document(struct run *r, size_t k, const uint8_t *body, size_t len)
{
    const char *id = r->ids + r->id_off[k];
    size_t il = r->id_off[k + 1] - r->id_off[k];
    size_t n = docgen_doc(r->gen, r->id_doc[k], r->doc);
    return len == 8 + il + 2 + n - 1 && memcmp(body, "{\"_id\":\"", 8) == 0 &&
           memcmp(body + 8, id, il) == 0 && memcmp(body + 8 + il, "\",", 2) == 0 &&
           memcmp(body + 10 + il, r->doc + 1, n - 1) == 0;
}

/* Counts c's request in flight as failed and prints why; the connection stays. */
static void request_failed(struct run *r, struct client *c, const char *fmt, ...)
{
    r->total_errors++;
    r->errors[c->op]++;
    r->completed++;
    if (r->err_printed < 10) {
        if (++r->err_printed == 10)
            fputs("docbench: (further errors are counted, not printed)\n", stderr);
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "docbench: client %ld: %s: ", (long)(c - r->cl), op_names[c->op]);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    c->busy = 0;
    r->busy--;
}

/* One complete, well-formed answer to c's request in flight. An unexpected
 * status is an error of the request, not of the connection, which goes on. */
static void client_answer(struct run *r, struct client *c, const struct http_resp *h,
                          uint64_t t)
{
    enum op op = (enum op)c->op;
    int ok = op == OP_INSERT ? (h->status == 201 || h->status == 200) : h->status == 200;
    if (!ok) {
        request_failed(r, c, "HTTP %d %.*s", h->status, (int)HANU_MIN(h->body_len, 120),
                       (const char *)h->body);
        return;
    }
    if (op == OP_INSERT) {
        const char *id;
        size_t len;
        if (find_id(h->body, h->body_len, &id, &len) != 0) {
            request_failed(r, c, "no \"_id\" string in the answer: %.*s",
                           (int)HANU_MIN(h->body_len, 120), (const char *)h->body);
            return;
        }
        if (save_id(r, id, len, c->doc) != 0) {
            fputs("docbench: out of memory\n", stderr);
            exit(2);
        }
    } else if (op == OP_GET && r->cfg->verify && r->id_doc[c->id_k] != NO_DOC) {
        if (!same_document(r, c->id_k, h->body, h->body_len)) {
            request_failed(r, c, "the document differs from the one written: %.*s",
                           (int)HANU_MIN(h->body_len, 120), (const char *)h->body);
            return;
        }
        r->verified++;
    } else if (op == OP_FIND || op == OP_SEARCH) {
        r->hits[op] += count_hits(h->body, h->body_len);
    }
    r->ok[op]++;
    r->completed++;
    r->t_last_answer = t;
    if (r->nlat < r->lat_cap)
        r->lat[r->nlat++] = (uint64_t)op << 56 | HANU_MIN(t - c->t_send, LAT_NS_MASK);
    else
        r->dropped++;
    c->busy = 0;
    r->busy--;
}

static void client_readable(struct run *r, struct client *c)
{
    for (;;) {
        if (hanu_buf_reserve(&c->rbuf, 16384) != HANU_OK) {
            fputs("docbench: out of memory\n", stderr);
            exit(2);
        }
        ssize_t n = recv(c->fd, c->rbuf.data + c->rbuf.len, c->rbuf.cap - c->rbuf.len, 0);
        int eof = n == 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            client_fail(r, c, "recv: %s", strerror(errno));
            return;
        }
        c->rbuf.len += (size_t)n;
        uint64_t t = now_ns();
        r->t_event = t;
        if (!c->busy) {
            if (eof && c->rbuf.len == 0) {       /* idle keep-alive closed: reconnect later */
                client_close(r, c);
                return;
            }
            note_error(r, c, "%zu unsolicited bytes from the server", c->rbuf.len);
            client_close(r, c);
            return;
        }
        struct http_resp h;
        int rc;
        while ((rc = http_parse(c->rbuf.data, c->rbuf.len, eof, &h)) == HTTP_INTERIM)
            hanu_buf_consume(&c->rbuf, h.total);
        if (rc == HTTP_INCOMPLETE) {
            if (eof) {
                client_fail(r, c, "%s", "server closed the connection mid-answer");
                return;
            }
            continue;
        }
        if (rc == HTTP_BAD) {
            client_fail(r, c, "bad response: %s", h.why);
            return;
        }
        int close_after = h.close || eof;
        if (h.total != c->rbuf.len) {
            /* One request in flight: more bytes than its answer is a protocol error. */
            client_fail(r, c, "%s", "more bytes than one answer");
            return;
        }
        client_answer(r, c, &h, t);   /* h borrows rbuf: answer before resetting it */
        c->rbuf.len = 0;
        if (close_after)
            client_close(r, c);
        client_next(r, c, t);
        return;
    }
}

/* ---- one blocking request, for set-up ---- */

/* Sends one request on a fresh connection; *status = its HTTP status. -1: no
 * connection (message printed), -2: bad or no answer. */
static int oneshot_body(struct run *r, const char *method, const char *path, int *status,
                        hanu_buf *body);

static int oneshot(struct run *r, const char *method, const char *path, int *status)
{
    return oneshot_body(r, method, path, status, NULL);
}

/* A number after "key": in text, 0 when absent. */
static uint64_t json_u64(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* The server's anonymous memory (GET /_status, process.anon_bytes) and this
 * machine's dirty page cache (Dirty + Writeback of /proc/meminfo: the server
 * must run on the same machine for it to be the server's), once a second. */
static void *mem_sampler(void *arg)
{
    struct run *r = arg;
    hanu_buf b = { 0 };
    while (!r->sampler_stop) {
        int status = 0;
        b.len = 0;
        if (oneshot_body(r, "GET", "/_status", &status, &b) == 0 && status == 200 &&
            hanu_buf_append(&b, "", 1) == HANU_OK) {
            uint64_t anon = json_u64((const char *)b.data, "\"anon_bytes\":");
            uint64_t rss = json_u64((const char *)b.data, "\"peak_rss_bytes\":"), dirty = 0;
            char line[256];
            FILE *f = fopen("/proc/meminfo", "r");
            while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "Dirty:", 6) == 0 || strncmp(line, "Writeback:", 10) == 0)
                    dirty += strtoull(strchr(line, ':') + 1, NULL, 10) * 1024;
            if (f)
                fclose(f);
            r->peak_anon = HANU_MAX(r->peak_anon, anon);
            r->peak_dirty = HANU_MAX(r->peak_dirty, dirty);
            r->peak_sum = HANU_MAX(r->peak_sum, anon + dirty);
            r->peak_rss = HANU_MAX(r->peak_rss, rss);
            r->mem_samples++;
        }
        for (int i = 0; i < 10 && !r->sampler_stop; i++)
            usleep(100000);
    }
    hanu_buf_free(&b);
    return NULL;
}

static int oneshot_body(struct run *r, const char *method, const char *path, int *status,
                        hanu_buf *body)
{
    int fd, err;
    if (open_conn(r, 0, &fd, &err) != 0) {
        fprintf(stderr, "docbench: cannot connect to %s: %s\n", r->cfg->url, strerror(err));
        return -1;
    }
    struct timeval tv = { .tv_sec = 30 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    hanu_buf b = { 0 };
    int rc = buf_puts(&b, method) | buf_puts(&b, " ") | buf_puts(&b, path) |
             buf_puts(&b, " HTTP/1.1\r\nHost: ") | buf_puts(&b, r->cfg->host_header) |
             buf_puts(&b, "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    if (rc == 0)
        rc = hanu_write_full(fd, b.data, b.len);
    b.len = 0;
    struct http_resp h = { .why = "no answer" };
    int prc = HTTP_INCOMPLETE;
    while (rc == 0) {
        if (hanu_buf_reserve(&b, 4096) != HANU_OK)
            break;
        ssize_t n = recv(fd, b.data + b.len, b.cap - b.len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        b.len += (size_t)n;
        while ((prc = http_parse(b.data, b.len, n == 0, &h)) == HTTP_INTERIM)
            hanu_buf_consume(&b, h.total);
        if (prc != HTTP_INCOMPLETE || n == 0)
            break;
    }
    close(fd);
    if (prc == HTTP_DONE) {
        *status = h.status;
        if (body && hanu_buf_append(body, h.body, h.body_len) != HANU_OK)
            prc = HTTP_BAD;
        if (h.status >= 300)
            fprintf(stderr, "docbench: %s %s: HTTP %d %.*s\n", method, path, h.status,
                    (int)HANU_MIN(h.body_len, 200), (const char *)h.body);
    } else {
        fprintf(stderr, "docbench: %s %s: %s\n", method, path,
                prc == HTTP_BAD ? h.why : "no complete answer");
    }
    hanu_buf_free(&b);
    return prc == HTTP_DONE ? 0 : -2;
}

/* ---- phases ---- */

static void progress(struct run *r, uint64_t t)
{
    double dt = (double)(t - r->t_progress) / 1e9, el = (double)(t - r->t_start) / 1e9;
    long ok = 0, err = 0;
    for (int k = 0; k < N_OPS; k++) {
        ok += r->ok[k];
        err += r->errors[k];
    }
    fprintf(stderr, "docbench: %-5s %5.1f s  %8ld ops  %7.0f ops/s (last 1 s %7.0f)  "
                    "errors %ld  in flight %ld\n",
            r->phase == PHASE_WRITE ? "write" : "read", el, ok,
            el > 0 ? (double)ok / el : 0,
            dt > 0 ? (double)(r->completed - r->progress_done) / dt : 0, err, r->busy);
    r->t_progress = t;
    r->progress_done = r->completed;
}

/* Nearest-rank percentile of sorted v[0..n) (ns values under LAT_NS_MASK), in us. */
static double pct_us(const uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    return (double)(v[bench_rank_index(n, p)] & LAT_NS_MASK) / 1000.0;
}

static void fill_stats(struct op_stats *s, const uint64_t *v, size_t n, double secs)
{
    s->ops_s = secs > 0 ? (double)s->ok / secs : 0;
    s->p50 = pct_us(v, n, 50);
    s->p90 = pct_us(v, n, 90);
    s->p99 = pct_us(v, n, 99);
    s->p999 = pct_us(v, n, 99.9);
    s->max = pct_us(v, n, 100);
}

/* Sorts the phase's samples (by op, then latency) and fills r->res[phase]. */
static void phase_stats(struct run *r, int phase, double cpu_s)
{
    struct phase_result *pr = &r->res[phase];
    uint64_t end = r->t_last_answer > r->t_start ? r->t_last_answer : now_ns();
    pr->ran = 1;
    pr->secs = (double)(end - r->t_start) / 1e9;
    pr->cpu_s = cpu_s;
    qsort(r->lat, r->nlat, sizeof r->lat[0], bench_cmp_u64);
    size_t i = 0;
    memset(&pr->all, 0, sizeof pr->all);
    for (int k = 0; k < N_OPS; k++) {
        size_t j = i;
        while (j < r->nlat && r->lat[j] >> 56 == (uint64_t)k)
            j++;
        struct op_stats *s = &pr->op[k];
        s->ok = r->ok[k];
        s->errors = r->errors[k];
        s->hits = r->hits[k];
        fill_stats(s, r->lat + i, j - i, pr->secs);
        pr->all.ok += s->ok;
        pr->all.errors += s->errors;
        pr->all.hits += s->hits;
        i = j;
    }
    for (size_t j = 0; j < r->nlat; j++)
        r->lat[j] &= LAT_NS_MASK;
    qsort(r->lat, r->nlat, sizeof r->lat[0], bench_cmp_u64);
    fill_stats(&pr->all, r->lat, r->nlat, pr->secs);
}

static int run_phase(struct run *r, int phase)
{
    const struct config *cfg = r->cfg;
    r->phase = phase;
    memset(r->ok, 0, sizeof r->ok);
    memset(r->errors, 0, sizeof r->errors);
    memset(r->hits, 0, sizeof r->hits);
    r->nlat = 0;
    r->completed = r->progress_done = 0;
    r->stopping = 0;
    double cpu0 = cpu_seconds();
    uint64_t t = now_ns();
    r->t_start = r->t_progress = r->t_event = r->t_last_answer = t;
    r->t_end = t + (uint64_t)cfg->duration * 1000000000ull;
    for (long i = 0; i < cfg->clients; i++)
        client_next(r, &r->cl[i], now_ns());
    struct epoll_event evs[256];
    while (r->busy > 0 || (!r->stopping && r->live > 0)) {
        for (long i = 0; i < cfg->clients && !r->stopping; i++)
            if (!r->cl[i].busy && !r->cl[i].dead)
                client_next(r, &r->cl[i], now_ns());   /* idle after an error: again */
        int n = epoll_wait(r->epfd, evs, 256, 100);
        if (n < 0 && errno != EINTR) {
            perror("docbench: epoll_wait");
            return -1;
        }
        for (int i = 0; i < n; i++) {
            struct client *c = evs[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (evs[i].events & EPOLLOUT) {
                client_flush(r, c);
                if (c->fd >= 0 && c->woff == c->wbuf.len) {
                    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                    epoll_ctl(r->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (c->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                client_readable(r, c);
        }
        t = now_ns();
        if (t >= r->t_end)
            r->stopping = 1;
        if (t - r->t_progress >= 1000000000ull)
            progress(r, t);
        int stalled = r->busy > 0 && t - r->t_event > STALL_NS;
        int drained_too_long = r->stopping && t > r->t_end + DRAIN_NS;
        if (stalled || drained_too_long) {
            fprintf(stderr, "docbench: %s: answers still missing, giving up on them\n",
                    stalled ? "no answer for 30 s" : "30 s past the duration");
            r->t_end = 0;                 /* no new requests */
            for (long i = 0; i < cfg->clients; i++)
                if (r->cl[i].busy)
                    client_fail(r, &r->cl[i], "%s", "timed out");
        }
    }
    if (r->completed > r->progress_done)
        progress(r, now_ns());
    phase_stats(r, phase, cpu_seconds() - cpu0);
    return 0;
}

/* ---- ids file ---- */

static int save_ids(const struct run *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "docbench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (size_t k = 0; k < r->nids; k++) {
        if (r->id_doc[k] != NO_DOC)
            fprintf(f, "%" PRIu32 "\t", r->id_doc[k]);
        fwrite(r->ids + r->id_off[k], 1, r->id_off[k + 1] - r->id_off[k], f);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "docbench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int load_ids(struct run *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "docbench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        char *id = line, *end;
        uint64_t doc = NO_DOC;
        if (isdigit((unsigned char)line[0])) {         /* "INDEX<tab>ID" */
            unsigned long long d = strtoull(line, &end, 10);
            if (*end == '\t') {
                doc = d;
                id = end + 1;
                n -= (size_t)(id - line);
            }
        }
        if (n > 0 && save_id(r, id, n, doc) != 0) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    if (r->nids == 0) {
        fprintf(stderr, "docbench: %s holds no ids\n", path);
        return -1;
    }
    return 0;
}

/* ---- report ---- */

static void print_row(FILE *out, const char *phase, const char *op, const struct op_stats *s)
{
    fprintf(out, "%-6s %-7s %9ld %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %7ld", phase, op, s->ok,
            s->ops_s, s->p50, s->p90, s->p99, s->p999, s->max, s->errors);
    if (strcmp(op, "find") == 0 || strcmp(op, "search") == 0)
        fprintf(out, "  %.1f hits/op", s->ok ? (double)s->hits / (double)s->ok : 0.0);
    fputc('\n', out);
}

static void json_op(const char *name, const struct op_stats *s)
{
    printf(",\"%s_per_s\":%.1f,\"%s_p50_us\":%.1f,\"%s_p99_us\":%.1f,\"%s_p999_us\":%.1f,"
           "\"%s_max_us\":%.1f,\"%s_count\":%ld,\"%s_errors\":%ld",
           name, s->ops_s, name, s->p50, name, s->p99, name, s->p999, name, s->max, name,
           s->ok, name, s->errors);
}

static void report(const struct run *r, double cpu_total)
{
    const struct config *cfg = r->cfg;
    const struct phase_result *w = &r->res[PHASE_WRITE], *rd = &r->res[PHASE_READ];
    long docs = w->op[OP_INSERT].ok;
    double avg_doc = r->next_doc ? (double)r->doc_bytes / (double)r->next_doc : 0;
    double score = w->ran && rd->ran ? sqrt(w->all.ops_s * rd->all.ops_s) : 0;
    FILE *out = cfg->json ? stderr : stdout;
    fprintf(out, "\ndocbench %s: collection %s, %ld clients, %ld s per phase, seed %" PRIu64
                 ", durability %s, mix %s, search words %s\n",
            cfg->url, cfg->collection, cfg->clients, cfg->duration, cfg->seed,
            cfg->durability, cfg->mix_text, cfg->search_zipf ? "zipf" : "uniform");
    fprintf(out, "%-6s %-7s %9s %9s %9s %9s %9s %9s %9s %7s\n", "phase", "op", "count",
            "ops/s", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us", "errors");
    if (w->ran)
        print_row(out, "write", "insert", &w->op[OP_INSERT]);
    if (rd->ran) {
        for (int k = OP_GET; k < N_OPS; k++)
            if (cfg->mix[k])
                print_row(out, "read", op_names[k], &rd->op[k]);
        print_row(out, "read", "all", &rd->all);
    }
    if (w->ran)
        fprintf(out, "write: %ld documents, %.0f B on average, %.2f s, client CPU %.2f s "
                     "(%.0f%% of one core)\n", docs, avg_doc, w->secs, w->cpu_s,
                w->secs > 0 ? 100 * w->cpu_s / w->secs : 0);
    if (rd->ran)
        fprintf(out, "read: %zu ids to get from, %.2f s, client CPU %.2f s (%.0f%% of one "
                     "core)\n", r->nids, rd->secs, rd->cpu_s,
                rd->secs > 0 ? 100 * rd->cpu_s / rd->secs : 0);
    if (score > 0)
        fprintf(out, "score (geometric mean of writes/s and reads/s): %.0f\n", score);
    if (cfg->verify && rd->ran)
        fprintf(out, "verified: %ld gets returned the exact document written\n", r->verified);
    fprintf(out, "memory (%ld samples, 1 s apart): server anonymous at most %.0f MB, dirty page "
                 "cache at most %.0f MB, their sum at most %.0f MB; server peak RSS %.0f MB\n",
            r->mem_samples, r->peak_anon / 1e6, r->peak_dirty / 1e6, r->peak_sum / 1e6,
            r->peak_rss / 1e6);
    fprintf(out, "errors %ld, reconnects %ld", r->total_errors, r->reconnects);
    if (r->dropped)
        fprintf(out, ", %ld latency samples dropped (array full)", r->dropped);
    fputc('\n', out);
    if (!cfg->json)
        return;
    printf("{\"url\":\"%s\",\"collection\":\"%s\",\"clients\":%ld,\"duration_s\":%ld,"
           "\"seed\":%" PRIu64 ",\"durability\":\"%s\",\"mix\":\"%s\",\"search_words\":\"%s\"",
           cfg->url, cfg->collection, cfg->clients, cfg->duration, cfg->seed, cfg->durability,
           cfg->mix_text, cfg->search_zipf ? "zipf" : "uniform");
    printf(",\"writes_per_s\":%.1f,\"write_p50_us\":%.1f,\"write_p90_us\":%.1f,"
           "\"write_p99_us\":%.1f,\"write_p999_us\":%.1f,\"write_max_us\":%.1f,"
           "\"write_errors\":%ld,\"write_s\":%.3f,\"write_cpu_s\":%.3f",
           w->all.ops_s, w->all.p50, w->all.p90, w->all.p99, w->all.p999, w->all.max,
           w->all.errors, w->secs, w->cpu_s);
    printf(",\"reads_per_s\":%.1f,\"read_p50_us\":%.1f,\"read_p90_us\":%.1f,"
           "\"read_p99_us\":%.1f,\"read_p999_us\":%.1f,\"read_max_us\":%.1f,"
           "\"read_errors\":%ld,\"read_s\":%.3f,\"read_cpu_s\":%.3f",
           rd->all.ops_s, rd->all.p50, rd->all.p90, rd->all.p99, rd->all.p999, rd->all.max,
           rd->all.errors, rd->secs, rd->cpu_s);
    for (int k = OP_GET; k < N_OPS; k++)
        json_op(op_names[k], &rd->op[k]);
    printf(",\"find_hits_per_op\":%.2f,\"search_hits_per_op\":%.2f",
           rd->op[OP_FIND].ok ? (double)rd->op[OP_FIND].hits / (double)rd->op[OP_FIND].ok : 0,
           rd->op[OP_SEARCH].ok ? (double)rd->op[OP_SEARCH].hits /
                                  (double)rd->op[OP_SEARCH].ok : 0);
    printf(",\"score\":%.1f,\"errors\":%ld,\"docs_written\":%ld,\"avg_doc_bytes\":%.1f,"
           "\"client_cpu_s\":%.3f,\"reconnects\":%ld,\"samples_dropped\":%ld,\"verified\":%ld",
           score, r->total_errors, docs, avg_doc, cpu_total, r->reconnects, r->dropped,
           r->verified);
    printf(",\"server_peak_anon_bytes\":%" PRIu64 ",\"peak_dirty_bytes\":%" PRIu64
           ",\"peak_anon_plus_dirty_bytes\":%" PRIu64 ",\"server_peak_rss_bytes\":%" PRIu64
           ",\"memory_samples\":%ld}\n", r->peak_anon, r->peak_dirty, r->peak_sum, r->peak_rss,
           r->mem_samples);
}

/* ---- main ---- */

static int build_prefixes(struct run *r)
{
    const struct config *cfg = r->cfg;
    const char *h = cfg->host_header, *col = cfg->collection;
    const char *json_hdr = "\r\nContent-Type: application/json\r\nContent-Length: ";
    return buf_puts(&r->pre_insert, "POST /c/") | buf_puts(&r->pre_insert, col) |
           buf_puts(&r->pre_insert, "/docs?durability=") |
           buf_puts(&r->pre_insert, cfg->durability) |
           buf_puts(&r->pre_insert, " HTTP/1.1\r\nHost: ") | buf_puts(&r->pre_insert, h) |
           buf_puts(&r->pre_insert, json_hdr) |
           buf_puts(&r->pre_get, "GET /c/") | buf_puts(&r->pre_get, col) |
           buf_puts(&r->pre_get, "/docs/") |
           buf_puts(&r->pre_find, "POST /c/") | buf_puts(&r->pre_find, col) |
           buf_puts(&r->pre_find, "/_find HTTP/1.1\r\nHost: ") | buf_puts(&r->pre_find, h) |
           buf_puts(&r->pre_find, json_hdr) |
           buf_puts(&r->pre_search, "POST /c/") | buf_puts(&r->pre_search, col) |
           buf_puts(&r->pre_search, "/_search HTTP/1.1\r\nHost: ") |
           buf_puts(&r->pre_search, h) | buf_puts(&r->pre_search, json_hdr);
}

int main(int argc, char **argv)
{
    struct config cfg;
    int st = parse_args(argc, argv, &cfg);
    if (st != 0)
        return st == 1 ? 0 : 2;
    struct run r = { .cfg = &cfg, .epfd = -1 };
    r.mix_total = cfg.mix[OP_GET] + cfg.mix[OP_FIND] + cfg.mix[OP_SEARCH];
    r.gen = malloc(sizeof *r.gen);
    r.cl = calloc((size_t)cfg.clients, sizeof *r.cl);
    r.lat_cap = (size_t)cfg.duration * LAT_PER_S;
    r.lat = malloc(r.lat_cap * sizeof *r.lat);
    if (!r.gen || !r.cl || !r.lat || build_prefixes(&r) != 0) {
        fputs("docbench: out of memory\n", stderr);
        return 2;
    }
    /* Touch the latency array now: first touch of new memory is slow here. */
    memset(r.lat, 0, r.lat_cap * sizeof *r.lat);
    docgen_init(r.gen, cfg.seed);
    if (resolve(&r) != 0)
        return 2;
    if (cfg.phases == PHASE_READ && cfg.mix[OP_GET] && load_ids(&r, cfg.ids_path) != 0)
        return 2;

    /* Set-up: reachable at all? Then the collection (the write phase needs it). */
    int status = 0;
    if (cfg.phases & PHASE_WRITE) {
        char path[128];
        snprintf(path, sizeof path, "/c/%s", cfg.collection);
        int rc = oneshot(&r, "PUT", path, &status);
        if (rc == -1)
            return 2;
        if (rc != 0 || (status != 200 && status != 201))
            r.total_errors++;                    /* printed by oneshot; carry on */
    } else {
        int rc = oneshot(&r, "GET", "/_health", &status);
        if (rc == -1)
            return 2;
    }

    r.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r.epfd < 0) {
        perror("docbench: epoll_create1");
        return 2;
    }
    for (long i = 0; i < cfg.clients; i++) {
        struct client *c = &r.cl[i];
        c->rng = docgen_next(&(uint64_t){ cfg.seed * 0x9E3779B97F4A7C15ull + (uint64_t)i });
        c->fd = -1;
        r.live++;
        if (client_connect(&r, c) != 0)
            return 2;
    }
    double cpu0 = cpu_seconds();
    pthread_t sampler;
    int sampling = pthread_create(&sampler, NULL, mem_sampler, &r) == 0;
    if (cfg.phases & PHASE_WRITE) {
        if (run_phase(&r, PHASE_WRITE) != 0)
            return 2;
        if (cfg.ids_path && save_ids(&r, cfg.ids_path) != 0)
            r.total_errors++;
    }
    if (cfg.phases & PHASE_READ) {
        if (cfg.mix[OP_GET] && r.nids == 0) {
            fputs("docbench: no ids to read: the write phase wrote nothing\n", stderr);
            r.total_errors++;
        } else if (r.live > 0 && run_phase(&r, PHASE_READ) != 0) {
            return 2;
        }
    }
    r.sampler_stop = 1;
    if (sampling)
        pthread_join(sampler, NULL);
    report(&r, cpu_seconds() - cpu0);

    for (long i = 0; i < cfg.clients; i++) {
        if (r.cl[i].fd >= 0)
            close(r.cl[i].fd);
        hanu_buf_free(&r.cl[i].wbuf);
        hanu_buf_free(&r.cl[i].rbuf);
    }
    hanu_buf_free(&r.pre_insert);
    hanu_buf_free(&r.pre_get);
    hanu_buf_free(&r.pre_find);
    hanu_buf_free(&r.pre_search);
    close(r.epfd);
    free(r.ids);
    free(r.id_off);
    free(r.id_doc);
    free(r.lat);
    free(r.cl);
    free(r.gen);
    return r.total_errors > 0 ? 1 : 0;
}
