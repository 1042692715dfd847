/*
 * console: the web console (docs/API.md, "Web console"), static files under
 * console/ embedded into the binary at build time (scripts/embed-files.py)
 * and served at /_console/ by the documents API's port. The pages use the
 * HTTP API itself with the user's bearer token, so they can do nothing the
 * token cannot; the files are public (they hold no data). Off with
 * --no-console.
 */
#ifndef HANU_CONSOLE_H
#define HANU_CONSOLE_H

#include <stddef.h>

typedef struct console_file {
    const char *path;           /* relative to console/, "index.html" */
    const char *content_type;
    const char *etag;           /* "\"<20 hex digits of SHA-256>\"": strong */
    const unsigned char *data;
    size_t len;
} console_file;

/* The generated table (build/gen/console_files.c), sorted by path. */
extern const console_file console_files[];
extern const size_t console_file_count;

#define CONSOLE_PREFIX "/_console"
#define CONSOLE_PATH_MAX 128    /* longer paths name no file */

/* Whether a request path (without its query) is the console's: "/_console"
   or anything under "/_console/". */
int console_owns(const char *path, size_t len);
/* The file a path of the console names: "/_console/" is index.html,
   "/_console/app.js" app.js; NULL for any other path (".." included: names
   are looked up, never joined to a directory). */
const console_file *console_lookup(const char *path, size_t len);
/* Whether an If-None-Match value (a list of entity-tags, or "*") names etag;
   weak comparison (RFC 9110 13.1.2). */
int console_etag_matches(const char *value, size_t len, const char *etag);

#ifndef CONSOLE_NO_H2O
#include <h2o.h>
/* Answers a request whose path console_owns: GET and HEAD of a file (200, or
   304 on a matching If-None-Match), "/_console" redirected to "/_console/",
   404 and 405 with the API's JSON error body. The status sent (and *bytes, the
   body's length, for the metrics and the access log), or 0 when the path is not
   the console's (nothing answered). */
int console_answer(h2o_req_t *req, size_t *bytes);
#endif

#endif
