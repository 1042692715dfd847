/*
 * hlog.c: log lines and the access log (hlog.h). A line is formatted into a
 * stack buffer and written with one write(2) on a descriptor opened O_APPEND,
 * so concurrent lines never interleave and a rotated file is only ever
 * appended to. The descriptors are swapped under a mutex on reopen; a writer
 * holds the mutex only to read the descriptor (dup-free: the old descriptor is
 * closed after the swap, under the same mutex).
 */
#include "hlog/hlog.h"
#include "base/base.h"
#include "json/json.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HLOG_LINE_MAX 4096
#define HLOG_PATH_MAX 4096
#define PROGRESS_TTY_NS 100000000ull     /* a terminal's line: ten times a second */
#define PROGRESS_LOG_NS 10000000000ull   /* a log: one line every 10 s */

typedef struct sink {
    int fd;                     /* -1: off (the access log), or stderr's 2 */
    char path[HLOG_PATH_MAX];   /* "" for stderr or stdout */
} sink;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int log_format = HLOG_TEXT;
static sink main_log = { 2, "" };
static sink access_log = { -1, "" };
static _Atomic int access_on;   /* read on every answer: no mutex there */

static const char *const level_names[] = { "ERROR", "WARN", "INFO" };
static const char *const level_json[] = { "error", "warn", "info" };

int hlog_format_parse(const char *s, int *out)
{
    if (!s || strcmp(s, "text") == 0) { *out = HLOG_TEXT; return 0; }
    if (strcmp(s, "json") == 0) { *out = HLOG_JSON; return 0; }
    return -1;
}

void hlog_time(char *out, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

static int open_append(const char *path, char *err, size_t errcap)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0 && err) snprintf(err, errcap, "cannot open the log file %s: %s", path, strerror(errno));
    return fd;
}

/* Points s at path (NULL or "": std_fd), opening it now. */
static int sink_set(sink *s, const char *path, int std_fd, char *err, size_t errcap)
{
    int fd = std_fd;
    if (path && *path) {
        if (strlen(path) >= sizeof s->path) {
            snprintf(err, errcap, "log file path too long");
            return HANU_ERR_INVALID;
        }
        if ((fd = open_append(path, err, errcap)) < 0) return HANU_ERR_IO;
    }
    pthread_mutex_lock(&mu);
    int old = s->fd;
    s->fd = fd;
    snprintf(s->path, sizeof s->path, "%s", path && *path ? path : "");
    if (s == &access_log) atomic_store(&access_on, fd >= 0);
    pthread_mutex_unlock(&mu);
    if (old > 2) close(old);
    return HANU_OK;
}

int hlog_configure(int format, const char *path, char *err, size_t errcap)
{
    int rc = sink_set(&main_log, path, 2, err, errcap);
    if (rc == HANU_OK) atomic_store(&log_format, format);
    return rc;
}

int hlog_access_open(const char *path, char *err, size_t errcap)
{
    if (!path || !*path) return sink_set(&access_log, NULL, -1, err, errcap);
    if (strcmp(path, "-") == 0) return sink_set(&access_log, NULL, 1, err, errcap);
    return sink_set(&access_log, path, -1, err, errcap);
}

int hlog_access_enabled(void)
{
    return atomic_load_explicit(&access_on, memory_order_relaxed);
}

static void write_line(sink *s, const char *line, size_t len)
{
    pthread_mutex_lock(&mu);
    int fd = s->fd;
    if (fd >= 0) {
        /* One write: a line is never split between two threads' lines. */
        ssize_t n = write(fd, line, len);
        (void)n;   /* nowhere left to report a failing log */
    }
    pthread_mutex_unlock(&mu);
}

static void reopen_one(sink *s, const char *what)
{
    char path[HLOG_PATH_MAX], err[HLOG_PATH_MAX + 128];
    pthread_mutex_lock(&mu);
    snprintf(path, sizeof path, "%s", s->path);
    pthread_mutex_unlock(&mu);
    if (!path[0]) return;
    int fd = open_append(path, err, sizeof err);
    if (fd < 0) {
        hlog_error("server", "SIGHUP: %s (the %s goes on in the old file)", err, what);
        return;
    }
    pthread_mutex_lock(&mu);
    int old = s->fd;
    s->fd = fd;
    pthread_mutex_unlock(&mu);
    if (old > 2) close(old);
}

void hlog_reopen(void)
{
    reopen_one(&main_log, "log");
    reopen_one(&access_log, "access log");
    hlog_info("server", "SIGHUP: log files opened again");
}

/* Appends s as a JSON string; bytes that are not UTF-8 become '?' (a message may
   quote a key or a path as the user sent it). */
static void append_json_string(hanu_buf *b, const char *s, size_t len)
{
    size_t mark = b->len;
    if (json_escape_string(b, s, len) == HANU_OK) return;
    b->len = mark;
    char *ascii = malloc(len ? len : 1);
    if (!ascii) { hanu_buf_append(b, "\"\"", 2); return; }
    for (size_t i = 0; i < len; i++) ascii[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    if (json_escape_string(b, ascii, len) != HANU_OK) hanu_buf_append(b, "\"\"", 2);
    free(ascii);
}

/* The message, with anything that would break a text line (newlines, other
   control bytes) shown as '?'. */
static size_t clean_text(char *msg, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)msg[i] < 0x20) msg[i] = '?';
    return len;
}

static void emit(sink *s, int level, const char *subsystem, const char *msg, size_t msg_len)
{
    char t[40];
    hlog_time(t, sizeof t);
    if (level < HLOG_ERROR || level > HLOG_INFO) level = HLOG_INFO;
    if (atomic_load(&log_format) == HLOG_JSON) {
        hanu_buf b = {0};
        hanu_buf_append(&b, "{\"time\":\"", 9);
        hanu_buf_append(&b, t, strlen(t));
        hanu_buf_append(&b, "\",\"level\":\"", 11);
        hanu_buf_append(&b, level_json[level], strlen(level_json[level]));
        hanu_buf_append(&b, "\",\"subsystem\":", 14);
        append_json_string(&b, subsystem, strlen(subsystem));
        hanu_buf_append(&b, ",\"msg\":", 7);
        append_json_string(&b, msg, msg_len);
        hanu_buf_append(&b, "}\n", 2);
        if (b.data) write_line(s, (const char *)b.data, b.len);
        hanu_buf_free(&b);
        return;
    }
    char line[HLOG_LINE_MAX + 128];
    int n = snprintf(line, sizeof line, "%s %s %s: %.*s\n", t, level_names[level], subsystem, (int)msg_len, msg);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    line[len - 1] = '\n';
    write_line(s, line, len);
}

void hlog_v(int level, const char *subsystem, const char *fmt, va_list ap)
{
    char msg[HLOG_LINE_MAX];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' ')) len--;
    emit(&main_log, level, subsystem, msg, clean_text(msg, len));
}

void hlog(int level, const char *subsystem, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hlog_v(level, subsystem, fmt, ap);
    va_end(ap);
}

void hlog_limited(hlog_limiter *l, uint32_t interval_ms, int level, const char *subsystem, const char *fmt, ...)
{
    uint64_t now = hanu_now_ns(), next = atomic_load(&l->next_ns);
    if (now < next || !atomic_compare_exchange_strong(&l->next_ns, &next, now + (uint64_t)interval_ms * 1000000u)) {
        atomic_fetch_add(&l->suppressed, 1);
        return;
    }
    char msg[HLOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    uint64_t left_out = atomic_exchange(&l->suppressed, 0);
    if (left_out)
        hlog(level, subsystem, "%s (and %llu more like it in the last %u s)", msg, (unsigned long long)left_out,
             (interval_ms + 999) / 1000);
    else
        hlog(level, subsystem, "%s", msg);
}

void hlog_access(const char *method, size_t method_len, const char *path, size_t path_len, int status,
                 uint64_t bytes, uint64_t micros, const char *token_name)
{
    if (!token_name) token_name = "";
    char t[40];
    hlog_time(t, sizeof t);
    hanu_buf b = {0};
    if (atomic_load(&log_format) == HLOG_JSON) {
        char nums[128];
        hanu_buf_append(&b, "{\"time\":\"", 9);
        hanu_buf_append(&b, t, strlen(t));
        hanu_buf_append(&b, "\",\"method\":", 11);
        append_json_string(&b, method, method_len);
        hanu_buf_append(&b, ",\"path\":", 8);
        append_json_string(&b, path, path_len);
        int n = snprintf(nums, sizeof nums, ",\"status\":%d,\"bytes\":%llu,\"us\":%llu,\"token\":", status,
                         (unsigned long long)bytes, (unsigned long long)micros);
        hanu_buf_append(&b, nums, (size_t)n);
        append_json_string(&b, token_name, strlen(token_name));
        hanu_buf_append(&b, "}\n", 2);
    } else {
        char head[256];
        int n = snprintf(head, sizeof head, "%s %.*s ", t, (int)(method_len > 16 ? 16 : method_len), method);
        hanu_buf_append(&b, head, (size_t)n);
        /* The path as sent, with spaces and control bytes shown as %XX: one field. */
        for (size_t i = 0; i < path_len && i < 2048; i++) {
            unsigned char ch = (unsigned char)path[i];
            if (ch <= 0x20 || ch >= 0x7f) {
                char esc[4];
                snprintf(esc, sizeof esc, "%%%02X", ch);
                hanu_buf_append(&b, esc, 3);
            } else {
                hanu_buf_append(&b, (const char *)&ch, 1);
            }
        }
        n = snprintf(head, sizeof head, " %d %llu %llu %s\n", status, (unsigned long long)bytes,
                     (unsigned long long)micros, token_name[0] ? token_name : "-");
        hanu_buf_append(&b, head, (size_t)n);
    }
    if (b.data) write_line(&access_log, (const char *)b.data, b.len);
    hanu_buf_free(&b);
}

/* ---- progress ---- */

void hlog_progress_begin(hlog_progress *p, const char *subsystem, const char *what, const char *unit,
                         uint64_t total_bytes, uint64_t total_items)
{
    memset(p, 0, sizeof *p);
    p->subsystem = subsystem;
    p->what = what;
    p->unit = unit ? unit : "items";
    p->total_bytes = total_bytes;
    p->total_items = total_items;
    p->start_ns = p->shown_ns = hanu_now_ns();
    pthread_mutex_lock(&mu);
    int fd = main_log.fd;
    pthread_mutex_unlock(&mu);
    p->tty = fd >= 0 && isatty(fd) && atomic_load(&log_format) == HLOG_TEXT;
    p->interval_ns = p->tty ? PROGRESS_TTY_NS : PROGRESS_LOG_NS;
    const char *env = getenv("HANUDB_PROGRESS_MS");
    if (env && *env) p->interval_ns = strtoull(env, NULL, 10) * 1000000ull;
}

static int append_f(char *out, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append_f(char *out, size_t cap, size_t *n, const char *fmt, ...)
{
    if (*n >= cap) return 0;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (w > 0) *n = *n + (size_t)w < cap ? *n + (size_t)w : cap - 1;
    return w;
}

void hlog_progress_format(const hlog_progress *p, uint64_t bytes, uint64_t items, uint64_t now_ns, char *out,
                          size_t cap)
{
    size_t n = 0;
    double s = (double)(now_ns - p->start_ns) / 1e9;
    append_f(out, cap, &n, "%s: %.1f", p->what, (double)bytes / 1e6);
    if (p->total_bytes) append_f(out, cap, &n, " of %.1f", (double)p->total_bytes / 1e6);
    append_f(out, cap, &n, " MB, %llu", (unsigned long long)items);
    if (p->total_items) append_f(out, cap, &n, " of %llu", (unsigned long long)p->total_items);
    append_f(out, cap, &n, " %s, %.1f MB/s", p->unit, s > 0 ? (double)bytes / 1e6 / s : 0.0);
    /* ETA from bytes when their total is known, else from items. */
    double done = p->total_bytes ? (double)bytes / (double)p->total_bytes
                : p->total_items ? (double)items / (double)p->total_items : 0;
    if (done > 0 && done < 1 && s > 0) append_f(out, cap, &n, ", ETA %.0f s", s / done - s);
}

void hlog_progress_update(hlog_progress *p, uint64_t bytes, uint64_t items)
{
    uint64_t now = hanu_now_ns();
    if (now - p->shown_ns < p->interval_ns) return;
    p->shown_ns = now;
    char line[512];
    hlog_progress_format(p, bytes, items, now, line, sizeof line);
    if (!p->tty) {
        hlog_info(p->subsystem, "%s", line);
        return;
    }
    char buf[560];
    int len = snprintf(buf, sizeof buf, "\r\033[K%s", line);   /* back to the start, clear, draw */
    if (len > 0) write_line(&main_log, buf, (size_t)len < sizeof buf ? (size_t)len : sizeof buf - 1);
    p->drawn = 1;
}

void hlog_progress_clear(hlog_progress *p)
{
    if (p->drawn) write_line(&main_log, "\r\033[K", 4);
    p->drawn = 0;
}

void hlog_progress_end(hlog_progress *p, uint64_t bytes, uint64_t items, const char *result)
{
    hlog_progress_clear(p);
    char line[512];
    hlog_progress_format(p, bytes, items, hanu_now_ns(), line, sizeof line);
    hlog_info(p->subsystem, "%s, %s in %.1f s", line, result ? result : "done",
              (double)(hanu_now_ns() - p->start_ns) / 1e9);
}
