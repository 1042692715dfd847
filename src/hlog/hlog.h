/*
 * hlog: the server's log lines (docs/OPERATIONS.md, "The log"). One format for
 * every subsystem, one line per event, each written with one write(2) so lines
 * of different threads never interleave:
 *
 *   text (default)  2026-12-03T09:48:32.123Z INFO sealer: put segment 12 ...
 *   json            {"time":"2026-12-03T09:48:32.123Z","level":"info","subsystem":"sealer","msg":"..."}
 *
 * The time is RFC 3339 UTC with milliseconds; the level is error, warn or info;
 * the subsystem one short word (server, store, index, bucket, sealer, lease,
 * follower, snapshot, rebuild, http, kv). Lines go to stderr unless
 * hlog_configure names a file, which hlog_reopen opens again (SIGHUP, for log
 * rotation). The optional access log (hlog_access_*) has one line per HTTP
 * answer in the same two formats.
 *
 * Threads: every function may be called from any thread at any time; the
 * configuration functions are meant for start-up and SIGHUP.
 */
#ifndef HANU_HLOG_H
#define HANU_HLOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum hlog_level { HLOG_ERROR = 0, HLOG_WARN, HLOG_INFO };
enum hlog_format { HLOG_TEXT = 0, HLOG_JSON };

/* Parses "text" or "json": 0, or -1 for anything else. */
int hlog_format_parse(const char *s, int *out);
/* The format of every line from now on, and where they go: path NULL or "" for
   stderr. INVALID/IO with a message when the file cannot be opened (the log is
   then unchanged). */
int hlog_configure(int format, const char *path, char *err, size_t errcap);
/* Opens the log files again under their names (after a rotation). Failures are
   logged to the old file, which is kept. */
void hlog_reopen(void);

void hlog(int level, const char *subsystem, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void hlog_v(int level, const char *subsystem, const char *fmt, va_list ap);

#define hlog_error(sub, ...) hlog(HLOG_ERROR, sub, __VA_ARGS__)
#define hlog_warn(sub, ...) hlog(HLOG_WARN, sub, __VA_ARGS__)
#define hlog_info(sub, ...) hlog(HLOG_INFO, sub, __VA_ARGS__)

/* A line that may come often (a failing disk, a retry storm): at most one per
   interval_ms per limiter; the next line that goes says how many were left out.
   Zero-initialise a limiter (static storage is fine). */
typedef struct hlog_limiter {
    _Atomic uint64_t next_ns;
    _Atomic uint64_t suppressed;
} hlog_limiter;

void hlog_limited(hlog_limiter *l, uint32_t interval_ms, int level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- progress of a long operation (a rebuild, a restore, an export) ---- */

/* On a terminal (the log is a tty and in text), one line updated in place at most
   ten times a second; in a log file or pipe, one line every 10 s (HANUDB_PROGRESS_MS
   sets both intervals instead). The end is always one log line with the totals.
   Totals 0: unknown (no ETA). One thread at a time. */
typedef struct hlog_progress {
    const char *subsystem, *what, *unit;
    uint64_t total_bytes, total_items;
    uint64_t start_ns, shown_ns, interval_ns;
    int tty, drawn;
} hlog_progress;

/* unit names the items ("records", "files", "documents"). */
void hlog_progress_begin(hlog_progress *p, const char *subsystem, const char *what, const char *unit,
                         uint64_t total_bytes, uint64_t total_items);
void hlog_progress_update(hlog_progress *p, uint64_t bytes, uint64_t items);
void hlog_progress_end(hlog_progress *p, uint64_t bytes, uint64_t items, const char *result);
/* Takes a line drawn in place off the terminal, without a log line (the caller says
   how it ended in its own words). */
void hlog_progress_clear(hlog_progress *p);
/* The text of one progress line: "what: 12.3 of 45.6 MB, 1234 of 5000 files, 4.1 MB/s, ETA 8 s". */
void hlog_progress_format(const hlog_progress *p, uint64_t bytes, uint64_t items, uint64_t now_ns, char *out,
                          size_t cap);

/* ---- the access log ---- */

/* path "-" is stdout; NULL or "" turns it off. INVALID/IO with a message. */
int hlog_access_open(const char *path, char *err, size_t errcap);
int hlog_access_enabled(void);
/* One answer: method, path (without the query string is the caller's choice),
   status, body bytes, microseconds from the request's start, the name of the
   token used ("" or NULL when none; never the token itself). */
void hlog_access(const char *method, size_t method_len, const char *path, size_t path_len, int status,
                 uint64_t bytes, uint64_t micros, const char *token_name);

/* Formats the current time as RFC 3339 UTC with milliseconds into out (at least 25 bytes). */
void hlog_time(char *out, size_t cap);

#endif
