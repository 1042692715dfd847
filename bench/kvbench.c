/*
 * kvbench: the key-value benchmark of docs/BENCHMARKS.md ("key-value").
 *
 *   kvbench --addr HOST:PORT --workload read-overwrite|write|read|cas|batch|fill|ping
 *           --clients N --ops N [--warmup N] [--keyspace N] [--value-size N]
 *           [--durability local|none|bucket] [--db NAME] [--json]
 *
 * A lean client on purpose, so that the server is what gets measured: one
 * thread, one epoll loop, non-blocking sockets, exactly one request in flight
 * per connection (no pipelining). Requests are framed by hkv_encode and
 * responses parsed by hkv_decode (include/hanudb_client.h); nothing is
 * allocated on the hot path once each connection's buffers have grown.
 *
 * Keys are 16 bytes ("key:" + 12 digits) drawn uniformly from the keyspace;
 * values are value-size bytes. read-overwrite (80% Get / 20% Set), read and
 * cas first prefill every key with WriteBatches of 1 024 sets. cas is a Get
 * followed by a CompareSet with the token it returned; one op = the pair, its
 * latency runs from the Get's send to the CompareSet's answer, and a
 * KeyTokenMismatch (another client won the race) is counted as a conflict,
 * not an error. batch: one op = one WriteBatch of 64 sets. fill only writes
 * every key of the keyspace (the prefill) and reports keys/s: a loader for the
 * start-up measurement (restart a server holding N million keys). ping sends
 * Pings: no store work at all, so it measures the ceiling that this client, the
 * server's event loop and the kernel's loopback TCP put on every other workload.
 *
 * The first --warmup ops issued are not sampled; the next --ops are. Their
 * latencies (send to full response, ns) go into an array allocated and
 * touched before the run, and are sorted at the end. Throughput = sampled ops
 * / time from the first sampled send to the last sampled answer. Any error
 * response, unexpected status or connection failure is an error; the exit
 * status is 1 when there were errors, 2 for bad usage or setup failures.
 */
#include "bench_util.h"
#include "base/base.h"
#include "hanudb_client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEY_LEN 16
#define BATCH_ITEMS 64
#define PREFILL_ITEMS 1024
#define STALL_NS (30ull * 1000000000ull)   /* no answer for this long: give up */

enum workload { W_READ_OVERWRITE, W_WRITE, W_READ, W_CAS, W_BATCH, W_FILL, W_PING };
static const char *const workload_names[] = { "read-overwrite", "write", "read", "cas", "batch",
                                              "fill", "ping" };

struct config {
    const char *addr, *db;
    enum workload workload;
    long clients, ops, warmup, keyspace, value_size;
    int durability, json;
};

struct client {
    int fd;
    int dead;
    int busy;                 /* a request is in flight */
    int phase;                /* cas: 0 Get sent, 1 CompareSet sent */
    uint8_t op;               /* op of the request in flight */
    uint32_t key;             /* key index of the request in flight (cas) */
    long sample;              /* sample index, or -1 for warm-up */
    uint64_t t_send;          /* ns when the op (cas: its Get) was sent */
    uint64_t rng;
    hkv_buf wbuf;
    size_t woff;
    hkv_buf rbuf;
    hkv_batch_item items[BATCH_ITEMS];
};

struct run {
    const struct config *cfg;
    struct client *cl;
    int epfd;
    char *keys;               /* keyspace * KEY_LEN bytes */
    uint8_t *value;
    uint64_t *lat;            /* cfg->ops latencies, ns */
    long nlat;
    uint64_t *lat_set;        /* read-overwrite: the Sets' latencies alone */
    long nlat_set;
    long issued, total;       /* total = warmup + ops */
    long completed;           /* all answered ops, warm-up included */
    long errors, conflicts, live;
    uint64_t t_first, t_last, t_progress, t_answer;
    long progress_done;
    int err_printed;
};

static uint64_t now_ns(void) { return hanu_now_ns(); }

static uint64_t next_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static void usage(FILE *out)
{
    fputs("usage: kvbench --addr HOST:PORT --workload read-overwrite|write|read|cas|batch|fill|ping\n"
          "               [--clients N] [--ops N] [--warmup N] [--keyspace N]\n"
          "               [--value-size N] [--durability local|none|bucket] [--db NAME] [--json]\n"
          "defaults: --addr $HANUDB_KV_ADDR or 127.0.0.1:8787, --workload read-overwrite,\n"
          "  --clients 32, --ops 256000, --warmup 4096, --keyspace 16384, --value-size 128,\n"
          "  --durability local, --db default. Progress goes to stderr every second; the\n"
          "  table to stdout (stderr with --json, which prints one JSON object on stdout).\n"
          "  Exit status: 0 ok, 1 errors occurred, 2 bad usage or setup failure.\n", out);
}

/* 0 ok, 1 printed help, 2 bad usage (message printed). */
static const char *durability_name(int d)
{
    return d == HKV_DUR_NONE ? "none" : d == HKV_DUR_BUCKET ? "bucket" : "local";
}

static int parse_args(int argc, char **argv, struct config *c)
{
    const char *env = getenv("HANUDB_KV_ADDR");
    *c = (struct config){ .addr = env && env[0] ? env : "127.0.0.1:8787", .db = "default",
                          .workload = W_READ_OVERWRITE, .clients = 32, .ops = 256000,
                          .warmup = 4096, .keyspace = 16384, .value_size = 128,
                          .durability = HKV_DUR_LOCAL };
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
        if (i + 1 >= argc) {
            fprintf(stderr, "kvbench: %s: unknown option or missing value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (strcmp(a, "--addr") == 0) {
            c->addr = v;
        } else if (strcmp(a, "--db") == 0) {
            c->db = v;
        } else if (strcmp(a, "--workload") == 0) {
            size_t w;
            for (w = 0; w < sizeof workload_names / sizeof workload_names[0]; w++)
                if (strcmp(v, workload_names[w]) == 0)
                    break;
            bad = w == sizeof workload_names / sizeof workload_names[0];
            c->workload = (enum workload)w;
        } else if (strcmp(a, "--clients") == 0) {
            bad = bench_parse_long(v, 1, 10000, &c->clients);
        } else if (strcmp(a, "--ops") == 0) {
            bad = bench_parse_long(v, 1, 1000000000L, &c->ops);
        } else if (strcmp(a, "--warmup") == 0) {
            bad = bench_parse_long(v, 0, 1000000000L, &c->warmup);
        } else if (strcmp(a, "--keyspace") == 0) {
            bad = bench_parse_long(v, 1, 100000000L, &c->keyspace);
        } else if (strcmp(a, "--value-size") == 0) {
            bad = bench_parse_long(v, 0, 1 << 20, &c->value_size);
        } else if (strcmp(a, "--durability") == 0) {
            if (strcmp(v, "local") == 0) c->durability = HKV_DUR_LOCAL;
            else if (strcmp(v, "none") == 0) c->durability = HKV_DUR_NONE;
            else if (strcmp(v, "bucket") == 0) c->durability = HKV_DUR_BUCKET;
            else bad = 1;
        } else {
            fprintf(stderr, "kvbench: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "kvbench: bad value for %s: %s (see --help)\n", a, v);
            return 2;
        }
    }
    return 0;
}

/* ---- connections ---- */

static int connect_nonblocking(const char *addr, int *fd_out)
{
    char host[256], port[16];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host ||
        strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof port) {
        fprintf(stderr, "kvbench: bad address %s: want HOST:PORT\n", addr);
        return -1;
    }
    const char *h = addr;
    size_t hl = (size_t)(colon - addr);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, sizeof port, "%s", colon + 1);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        fprintf(stderr, "kvbench: resolve %s: %s\n", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        err = errno;
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "kvbench: connect %s: %s\n", addr, strerror(err));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        fprintf(stderr, "kvbench: fcntl: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    *fd_out = fd;
    return 0;
}

static void client_error(struct run *r, struct client *c, const char *what, const char *detail,
                         int detail_len)
{
    r->errors++;
    if (r->err_printed < 10) {
        r->err_printed++;
        fprintf(stderr, "kvbench: client %ld: %s%s%.*s\n", (long)(c - r->cl), what,
                detail_len > 0 ? ": " : "", detail_len > 0 ? detail_len : 0,
                detail ? detail : "");
    }
}

static void client_kill(struct run *r, struct client *c, const char *why)
{
    if (c->dead)
        return;
    client_error(r, c, why, NULL, 0);
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->dead = 1;
    c->busy = 0;
    r->live--;
}

/* Writes what is left of c's request; arms EPOLLOUT when the socket is full. */
static void client_flush(struct run *r, struct client *c)
{
    if (bench_send_pending(r->epfd, c->fd, c, c->wbuf.data, c->wbuf.len, &c->woff) != 0)
        client_kill(r, c, "send failed");
}

static const char *key_at(const struct run *r, uint32_t idx) { return r->keys + (size_t)idx * KEY_LEN; }

static uint32_t pick_key(const struct run *r, struct client *c)
{
    return (uint32_t)(next_rand(&c->rng) % (uint64_t)r->cfg->keyspace);
}

/* Encodes and sends c's next request (or the CompareSet of a cas pair). */
static void client_send(struct run *r, struct client *c, uint8_t op, uint64_t token)
{
    const struct config *cfg = r->cfg;
    hkv_request q = { .op = op, .durability = (uint8_t)cfg->durability, .db = cfg->db,
                      .key = key_at(r, c->key), .key_len = KEY_LEN, .value = r->value,
                      .value_len = (size_t)cfg->value_size, .token = token };
    if (op == HKV_OP_WRITE_BATCH) {
        for (int i = 0; i < BATCH_ITEMS; i++) {
            c->items[i] = (hkv_batch_item){ .kind = HKV_BATCH_SET,
                                            .key = key_at(r, pick_key(r, c)),
                                            .key_len = KEY_LEN, .value = r->value,
                                            .value_len = (size_t)cfg->value_size };
        }
        q.items = c->items;
        q.item_count = BATCH_ITEMS;
    }
    c->wbuf.len = 0;
    c->woff = 0;
    if (hkv_encode(&c->wbuf, &q) != HKV_OK) {
        client_kill(r, c, "cannot encode the request");
        return;
    }
    c->op = op;
    c->busy = 1;
    client_flush(r, c);
}

/* Starts c's next op, or leaves it idle when every op has been issued. */
static void client_next(struct run *r, struct client *c)
{
    if (c->dead || r->issued >= r->total)
        return;
    long idx = r->issued++;
    c->sample = idx >= r->cfg->warmup ? idx - r->cfg->warmup : -1;
    c->phase = 0;
    c->key = pick_key(r, c);
    uint8_t op;
    switch (r->cfg->workload) {
    case W_READ_OVERWRITE:
        op = next_rand(&c->rng) % 100 < 80 ? HKV_OP_GET : HKV_OP_SET;
        break;
    case W_WRITE: op = HKV_OP_SET; break;
    case W_BATCH: op = HKV_OP_WRITE_BATCH; break;
    case W_PING: op = HKV_OP_PING; break;   /* no store work: the transport's ceiling */
    default: op = HKV_OP_GET; break;    /* read, and the first half of cas */
    }
    c->t_send = now_ns();
    if (c->sample == 0)
        r->t_first = c->t_send;
    client_send(r, c, op, 0);
}

/* Handles one complete response to c's request in flight. */
static void client_answer(struct run *r, struct client *c, const hkv_response *resp)
{
    uint64_t t = now_ns();
    r->t_answer = t;
    c->busy = 0;
    int ok = resp->status == HKV_OK;
    if (r->cfg->workload == W_CAS) {
        if (c->phase == 0 && ok) {
            c->phase = 1;
            client_send(r, c, HKV_OP_COMPARE_SET, resp->token);
            return;
        }
        if (c->phase == 1 && resp->status == HKV_KEY_TOKEN_MISMATCH) {
            r->conflicts++;
            ok = 1;
        }
    }
    if (!ok) {
        const char *msg = (const char *)resp->data;
        client_error(r, c, hkv_status_str(resp->status), msg, (int)resp->data_len);
    }
    r->completed++;
    if (c->sample >= 0 && r->nlat < r->cfg->ops) {
        r->lat[r->nlat++] = t - c->t_send;
        if (r->lat_set && c->op == HKV_OP_SET) r->lat_set[r->nlat_set++] = t - c->t_send;
        r->t_last = t;
    }
    client_next(r, c);
}

static void client_readable(struct run *r, struct client *c)
{
    for (;;) {
        if (hkv_buf_reserve(&c->rbuf, 4096) != HKV_OK) {
            client_kill(r, c, "out of memory");
            return;
        }
        ssize_t n = recv(c->fd, c->rbuf.data + c->rbuf.len, c->rbuf.cap - c->rbuf.len, 0);
        if (n == 0) {
            client_kill(r, c, "server closed the connection");
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                client_kill(r, c, "recv failed");
            return;
        }
        c->rbuf.len += (size_t)n;
        if (!c->busy) {
            client_kill(r, c, "unsolicited bytes from the server");
            return;
        }
        hkv_response resp;
        size_t need;
        int rc = hkv_decode(c->op, c->rbuf.data, c->rbuf.len, 0, &resp, &need);
        if (rc == HKV_ERR_INCOMPLETE)
            continue;
        if (rc != HKV_OK || resp.frame_len != c->rbuf.len) {
            client_kill(r, c, rc != HKV_OK ? "malformed or unexpected response"
                                           : "more than one response to one request");
            return;
        }
        /* resp borrows rbuf: answer before resetting it (the next request
         * only writes wbuf). */
        client_answer(r, c, &resp);
        c->rbuf.len = 0;
        return;
    }
}

/* ---- prefill, report ---- */

static int prefill(struct run *r)
{
    const struct config *cfg = r->cfg;
    hkv_conn *conn;
    char err[300];
    if (hkv_connect(cfg->addr, NULL, &conn, err, sizeof err) != HKV_OK) {
        fprintf(stderr, "kvbench: prefill: %s\n", err);
        return -1;
    }
    hkv_batch_item *items = calloc(PREFILL_ITEMS, sizeof *items);
    if (!items) {
        hkv_close(conn);
        return -1;
    }
    uint64_t t0 = now_ns();
    int rc = HKV_OK;
    for (long k = 0; k < cfg->keyspace && rc == HKV_OK; k += PREFILL_ITEMS) {
        size_t n = 0;
        for (long i = k; i < cfg->keyspace && n < PREFILL_ITEMS; i++, n++)
            items[n] = (hkv_batch_item){ .kind = HKV_BATCH_SET, .key = key_at(r, (uint32_t)i),
                                         .key_len = KEY_LEN, .value = r->value,
                                         .value_len = (size_t)cfg->value_size };
        rc = hkv_write_batch(conn, cfg->db, items, n, cfg->durability, NULL);
    }
    uint64_t t1 = now_ns();
    if (rc != HKV_OK)
        fprintf(stderr, "kvbench: prefill: %s: %s\n", hkv_status_str(rc), hkv_errmsg(conn));
    else
        fprintf(stderr, "kvbench: prefilled %ld keys in %.2f s\n", cfg->keyspace,
                (double)(t1 - t0) / 1e9);
    r->t_first = t0;
    r->t_last = t1;
    free(items);
    hkv_close(conn);
    return rc == HKV_OK ? 0 : -1;
}

/* Nearest-rank percentile of sorted v[0..n), in microseconds. */
static double pct_us(const uint64_t *v, long n, double p)
{
    if (n <= 0)
        return 0;
    return (double)v[bench_rank_index((size_t)n, p)] / 1000.0;
}

static void report(const struct run *r)
{
    const struct config *cfg = r->cfg;
    long n = r->nlat;
    qsort(r->lat, (size_t)n, sizeof r->lat[0], bench_cmp_u64);
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += (double)r->lat[i];
    double secs = n && r->t_last > r->t_first ? (double)(r->t_last - r->t_first) / 1e9 : 0;
    double tput = secs > 0 ? (double)n / secs : 0;
    double mean = n ? sum / (double)n / 1000.0 : 0;
    double mn = n ? (double)r->lat[0] / 1000.0 : 0, mx = n ? (double)r->lat[n - 1] / 1000.0 : 0;
    double p50 = pct_us(r->lat, n, 50), p90 = pct_us(r->lat, n, 90), p95 = pct_us(r->lat, n, 95),
           p99 = pct_us(r->lat, n, 99), p999 = pct_us(r->lat, n, 99.9);
    const char *dur = durability_name(cfg->durability);

    FILE *out = cfg->json ? stderr : stdout;
    fprintf(out, "\nkvbench %s: %ld clients, %ld sampled ops after %ld warm-up, keyspace %ld, "
                 "value %ld B, durability %s%s\n",
            workload_names[cfg->workload], cfg->clients, n, cfg->warmup, cfg->keyspace,
            cfg->value_size, dur,
            cfg->workload == W_CAS ? " (op = Get + CompareSet)"
            : cfg->workload == W_BATCH ? " (op = WriteBatch of 64 sets)" : "");
    fprintf(out, "  throughput  %.0f ops/s over %.2f s", tput, secs);
    if (cfg->workload == W_BATCH)
        fprintf(out, " (%.0f keys/s)", tput * BATCH_ITEMS);
    fprintf(out, "\n  latency us  %9s %9s %9s %9s %9s %9s %9s %9s\n", "min", "mean", "p50",
            "p90", "p95", "p99", "p99.9", "max");
    fprintf(out, "              %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", mn, mean,
            p50, p90, p95, p99, p999, mx);
    if (r->lat_set && r->nlat_set) {
        /* the Sets wait for their sync: with one request in flight per client they
         * bound the mix's throughput (clients / mean latency) */
        long ns = r->nlat_set;
        qsort(r->lat_set, (size_t)ns, sizeof r->lat_set[0], bench_cmp_u64);
        double ssum = 0;
        for (long i = 0; i < ns; i++) ssum += (double)r->lat_set[i];
        fprintf(out, "  sets alone  %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f  (%ld sets)\n",
                (double)r->lat_set[0] / 1000.0, ssum / (double)ns / 1000.0, pct_us(r->lat_set, ns, 50),
                pct_us(r->lat_set, ns, 90), pct_us(r->lat_set, ns, 95), pct_us(r->lat_set, ns, 99),
                pct_us(r->lat_set, ns, 99.9), (double)r->lat_set[ns - 1] / 1000.0, ns);
    }
    fprintf(out, "  errors      %ld\n", r->errors);
    if (cfg->workload == W_CAS)
        fprintf(out, "  conflicts   %ld (KeyTokenMismatch: lost a race, not an error)\n",
                r->conflicts);
    if (cfg->json)
        printf("{\"workload\":\"%s\",\"clients\":%ld,\"ops\":%ld,\"throughput\":%.1f,"
               "\"min_us\":%.1f,\"mean_us\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,"
               "\"p95_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,"
               "\"errors\":%ld,\"durability\":\"%s\",\"conflicts\":%ld,\"seconds\":%.3f}\n",
               workload_names[cfg->workload], cfg->clients, n, tput, mn, mean, p50, p90, p95,
               p99, p999, mx, r->errors, dur, r->conflicts, secs);
}

static void progress(struct run *r, uint64_t t, uint64_t t0)
{
    double dt = (double)(t - r->t_progress) / 1e9;
    fprintf(stderr, "kvbench: %5.1f s  %ld/%ld ops  %.0f ops/s  errors %ld  clients %ld\n",
            (double)(t - t0) / 1e9, r->completed, r->total,
            dt > 0 ? (double)(r->completed - r->progress_done) / dt : 0, r->errors, r->live);
    r->t_progress = t;
    r->progress_done = r->completed;
}

static int run_loop(struct run *r)
{
    const struct config *cfg = r->cfg;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->epfd < 0) {
        perror("kvbench: epoll_create1");
        return -1;
    }
    for (long i = 0; i < cfg->clients; i++) {
        struct client *c = &r->cl[i];
        c->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ 0xD1B54A32D192ED03ull;
        if (connect_nonblocking(cfg->addr, &c->fd) != 0)
            return -1;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
            perror("kvbench: epoll_ctl");
            return -1;
        }
        r->live++;
    }
    uint64_t t0 = now_ns();
    r->t_progress = r->t_answer = t0;
    for (long i = 0; i < cfg->clients; i++)
        client_next(r, &r->cl[i]);
    struct epoll_event evs[256];
    for (;;) {
        int busy = 0;
        for (long i = 0; i < cfg->clients && !busy; i++)
            busy = r->cl[i].busy;
        if (!busy || r->live == 0)
            break;
        int n = epoll_wait(r->epfd, evs, 256, 100);
        if (n < 0 && errno != EINTR) {
            perror("kvbench: epoll_wait");
            return -1;
        }
        for (int i = 0; i < n; i++) {
            struct client *c = evs[i].data.ptr;
            if (c->dead)
                continue;
            if (evs[i].events & EPOLLOUT) {
                client_flush(r, c);
                if (!c->dead && c->woff == c->wbuf.len) {
                    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                    epoll_ctl(r->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (!c->dead && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                client_readable(r, c);
        }
        uint64_t t = now_ns();
        if (t - r->t_progress >= 1000000000ull)
            progress(r, t, t0);
        if (t - r->t_answer > STALL_NS) {
            fprintf(stderr, "kvbench: no answer for %llu s, giving up\n",
                    (unsigned long long)(STALL_NS / 1000000000ull));
            for (long i = 0; i < cfg->clients; i++)
                if (r->cl[i].busy)
                    client_kill(r, &r->cl[i], "request timed out");
            break;
        }
    }
    progress(r, now_ns(), t0);
    return 0;
}

int main(int argc, char **argv)
{
    struct config cfg;
    int st = parse_args(argc, argv, &cfg);
    if (st != 0)
        return st == 1 ? 0 : 2;
    if (cfg.workload == W_CAS && cfg.value_size == 0)
        cfg.value_size = 1;
    struct run r = { .cfg = &cfg, .total = cfg.warmup + cfg.ops };
    r.cl = calloc((size_t)cfg.clients, sizeof *r.cl);
    r.keys = malloc((size_t)cfg.keyspace * KEY_LEN + 1);
    r.value = malloc((size_t)cfg.value_size + 1);
    r.lat = malloc((size_t)cfg.ops * sizeof *r.lat);
    if (cfg.workload == W_READ_OVERWRITE && !(r.lat_set = malloc((size_t)cfg.ops * sizeof *r.lat_set))) {
        fprintf(stderr, "kvbench: out of memory\n");
        return 2;
    }
    if (!r.cl || !r.keys || !r.value || !r.lat) {
        fprintf(stderr, "kvbench: out of memory\n");
        return 2;
    }
    /* Touch the latency array now: first touch of new memory is slow here. */
    memset(r.lat, 0, (size_t)cfg.ops * sizeof *r.lat);
    for (long i = 0; i < cfg.keyspace; i++) {
        char k[32];   /* keyspace <= 1e8, so 12 digits always fit */
        snprintf(k, sizeof k, "key:%012ld", i);
        memcpy(r.keys + (size_t)i * KEY_LEN, k, KEY_LEN);
    }
    for (long i = 0; i < cfg.value_size; i++)
        r.value[i] = (uint8_t)('a' + i % 26);

    if ((cfg.workload == W_READ_OVERWRITE || cfg.workload == W_READ || cfg.workload == W_CAS ||
         cfg.workload == W_FILL) && prefill(&r) != 0)
        return cfg.workload == W_FILL ? 1 : 2;
    if (cfg.workload == W_FILL) {
        double secs = (double)(r.t_last - r.t_first) / 1e9;
        double kps = secs > 0 ? (double)cfg.keyspace / secs : 0;
        fprintf(cfg.json ? stderr : stdout, "kvbench fill: %ld keys of %ld B in %.2f s, "
                "%.0f keys/s (WriteBatch of %d, durability %s)\n", cfg.keyspace,
                cfg.value_size, secs, kps, PREFILL_ITEMS,
                durability_name(cfg.durability));
        if (cfg.json)
            printf("{\"workload\":\"fill\",\"keys\":%ld,\"throughput\":%.1f,"
                   "\"seconds\":%.3f,\"errors\":0}\n", cfg.keyspace, kps, secs);
        free(r.cl);
        free(r.keys);
        free(r.value);
        free(r.lat);
        return 0;
    }
    if (run_loop(&r) != 0)
        return 2;
    report(&r);
    for (long i = 0; i < cfg.clients; i++) {
        if (!r.cl[i].dead)
            close(r.cl[i].fd);
        hkv_buf_free(&r.cl[i].wbuf);
        hkv_buf_free(&r.cl[i].rbuf);
    }
    close(r.epfd);
    free(r.cl);
    free(r.keys);
    free(r.value);
    free(r.lat);
    free(r.lat_set);
    return r.errors > 0 || r.nlat < cfg.ops ? 1 : 0;
}
