/*
 * http_internal.h: the documents API over HTTP/1.1 (h2o), shared by its files:
 * http_listen.c (listener, TLS, start and stop), http_route.c (paths, checks,
 * dispatch), http_auth.c (tokens, Host, CORS), http_reply.c (answers, held in
 * the waiters until their watermark), http_status.c (_status, /metrics),
 * http_timeout.c, http_params.c (query parameters, Hanu-* headers), and
 * http_docs.c (collections, documents, batches, idempotency).
 */
#ifndef HANU_HTTP_INTERNAL_H
#define HANU_HTTP_INTERNAL_H

#include "server/server_internal.h"
#include "json/json.h"

enum http_route {
    ROUTE_HEALTH, ROUTE_STATUS, ROUTE_METRICS, ROUTE_COLLECTIONS, ROUTE_COLLECTION,
    ROUTE_DOC_GET, ROUTE_DOC_PUT, ROUTE_DOC_POST, ROUTE_DOC_DELETE, ROUTE_BATCH,
    ROUTE_PREFLIGHT, ROUTE_OTHER, ROUTE_FIND, ROUTE_SEARCH, ROUTE_AGGS, ROUTE_DOC_LIST, ROUTE_SNAPSHOT, ROUTE_EXPORT, ROUTE_COUNT
};

/* An answer kept instead of sent: a query worker builds it off the loop
   (http_query.c), the loop sends it. */
typedef struct http_answer {
    int status;
    hanu_buf body;
} http_answer;

/* The query parameters of any route; each route accepts a set of them (http_route.c). */
enum http_param { HTTP_PARAM_DURABILITY, HTTP_PARAM_LIMIT, HTTP_PARAM_AFTER, HTTP_PARAM_COUNT };
#define HTTP_PARAM_BIT(p) (1u << (p))

/* One request being answered: what the handlers fill in. */
typedef struct http_call {
    server *srv;
    h2o_req_t *req;
    int route;
    uint64_t start_ns;
    const auth_token *token;   /* NULL when auth is off */
    char col[STORE_DB_NAME_MAX + 1];
    char id[257];
    size_t id_len;
    uint8_t durability;        /* kv_durability values */
    h2o_iovec_t params[HTTP_PARAM_COUNT];   /* percent-decoded, in the request's pool; base NULL: absent */
    http_answer *answer;       /* set: http_reply and http_error keep the answer here (no req, any thread) */
} http_call;

/* Answers (http_reply.c). Each sends now, or is held until txn is durable when asked. */
void http_reply(http_call *c, int status, const char *body, size_t len, uint64_t wait_txn);
/* An answer that waits for nothing, b's bytes not copied: b is taken (left empty). */
void http_reply_buf(http_call *c, int status, hanu_buf *b);
/* The answer to a write of txn at the request's durability: `local` waits for its
   fdatasync, `none` for its frame to be in the page cache (the loop's pwrite). */
void http_reply_write(http_call *c, int status, const char *body, size_t len, uint64_t txn);
void http_reply_doc(http_call *c, const uint8_t *doc, size_t len, uint64_t txn);
/* "/c/{col}" (id NULL) or "/c/{col}/docs/{id, percent-encoded}", in the request's pool:
   the Location of what a 201 created. */
h2o_iovec_t http_location(http_call *c, const char *id, size_t id_len);
void http_error(http_call *c, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sends now, counted in the metrics: a JSON body, or none (http_send_empty). */
void http_send(http_call *c, int status, const char *body, size_t len);
void http_send_empty(http_call *c, int status);
void http_reply_start(server *srv);     /* the deadline sweep of held answers */
void http_reply_stop(server *srv);

/* Who may ask what (http_auth.c). */
int http_auth_start(server *srv, char *err, size_t errcap);   /* CORS, --allowed-hosts (tokens: server.c) */
void http_auth_stop(server *srv);
int http_token_allows(const http_call *c, const char *col, int write);
const auth_token *http_find_token(server *srv, h2o_req_t *req);   /* NULL: none or unknown */
int http_host_allowed(server *srv, h2o_req_t *req);                /* the check without tokens */
void http_add_cors(server *srv, h2o_req_t *req);
void http_reply_options(http_call *c, const char *allow);         /* OPTIONS and CORS preflight */
/* A request header's value, or NULL. */
const h2o_iovec_t *http_header(h2o_req_t *req, const char *name, size_t len);

/* Routing (http_route.c): every request enters here. */
int http_on_req(server *srv, h2o_req_t *req);

/* What a path names, by its shape alone. */
enum http_path {
    PATH_UNKNOWN, PATH_HEALTH, PATH_STATUS, PATH_METRICS, PATH_COLLECTIONS, PATH_COLLECTION,
    PATH_DOCS, PATH_DOC, PATH_BATCH, PATH_FIND, PATH_SEARCH, PATH_AGGS, PATH_SNAPSHOT, PATH_EXPORT, PATH_COUNT
};

/* Splits a path (without the query) into at most 4 non-empty segments and names it;
   PATH_UNKNOWN for any other shape. The segments point into path. */
int http_match_path(const char *path, size_t len, const char *seg[4], size_t segl[4]);
/* Percent-decodes one path segment into out[0..cap); -1 when malformed or too long. */
ssize_t http_decode_segment(const char *s, size_t len, char *out, size_t cap);
/* Splits HOST[:PORT] (HOST may be [v6]): the host's length, and the port or -1;
   0 when it does not parse. */
int http_split_authority(const char *s, size_t len, size_t *host_len, long *port);

/* Query parameters and Hanu-* headers (http_params.c). Parses the query string
   into c->params, percent-decoded; 1 when every parameter is in accepted (a mask of
   HTTP_PARAM_BIT), none comes twice, and every Hanu-* header is one the server
   reads, at most once. Otherwise 0, and the 400 invalid_parameter naming it (and
   the route: the request's method and pattern, "/c/{collection}") was sent. */
int http_params_parse(http_call *c, unsigned accepted, const char *pattern);
/* A parameter's decoded value (NUL-terminated), or NULL when absent. */
const h2o_iovec_t *http_param(const http_call *c, enum http_param p);

/* Status and metrics (http_status.c). */
void http_count_request(server *srv, int route, int status, uint64_t start_ns);
/* An answer went out: counted in the metrics and, with --access-log, one line. */
void http_answered(http_call *c, int status, size_t bytes);
void http_status_reply(http_call *c);
void http_metrics_reply(http_call *c);

/* Handlers (http_docs.c). */
void http_collections_list(http_call *c);
void http_collection(http_call *c);
void http_doc_get(http_call *c);
void http_doc_write(http_call *c);      /* PUT, POST, DELETE of one document */
void http_batch(http_call *c);
/* The collection named by the request (created when create is set); otherwise
   the error answer (404, 409 wrong_kind, ...) was sent and the status is returned. */
int http_find_collection(http_call *c, int create, uint32_t *db);

/* Queries over the index (http_query.c): _find, _search, _aggs and the listing
   of documents by id; a query with min_txn is held (without blocking the loop)
   until the index covers it. */
void http_query(http_call *c);
int http_query_start(server *srv);   /* the query workers (--query-threads) */
void http_query_stop(server *srv);   /* held queries get 503 shutting_down */
void http_query_close(server *srv);  /* joins the query workers; what they did not start gets 503 */
size_t http_query_busy(server *srv); /* queries held or in the workers' hands */
/* "index":{...} and "query":{...} of /_status, the hanudb_index_* and hanudb_query_*
   families of /metrics. */
void http_index_status(server *srv, json_writer *w);
void http_index_metrics(server *srv, hanu_buf *b);
/* http_index_stats.c: merges, segments per collection, the document cache. */
void http_index_more_status(server *srv, json_writer *w);
void http_index_more_metrics(server *srv, hanu_buf *b);

/* POST /_admin/snapshot (http_snapshot.c): held without blocking the loop until the
   snapshotter's thread has put the manifest. */
void http_snapshot(http_call *c);
void http_snapshot_start(server *srv);
void http_snapshot_stop(server *srv);   /* held requests get 503 shutting_down */
/* "snapshot":{...} inside the bucket object of /_status. */
void http_snapshot_status(server *srv, json_writer *w);

/* POST /c/{col}/_export (http_export.c): the collection as zstd JSON lines in the
   bucket, written on a thread of its own; the answer when the object is there. */
void http_export(http_call *c);
void http_export_start(server *srv);
void http_export_stop(server *srv);   /* running exports stop (503) or finish their put */

/* Header, body and idle deadlines of HTTP connections (http_timeout.c). */
int http_timeout_start(server *srv);
void http_timeout_stop(server *srv);

#endif
