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

#include "http/http.h"
#include "json/json.h"
#include "docs/docs.h"

enum http_route {
    ROUTE_HEALTH, ROUTE_STATUS, ROUTE_METRICS, ROUTE_COLLECTIONS, ROUTE_COLLECTION,
    ROUTE_DOC_GET, ROUTE_DOC_PUT, ROUTE_DOC_POST, ROUTE_DOC_DELETE, ROUTE_BATCH,
    ROUTE_PREFLIGHT, ROUTE_OTHER, ROUTE_FIND, ROUTE_SEARCH, ROUTE_AGGS, ROUTE_DOC_LIST, ROUTE_SNAPSHOT, ROUTE_EXPORT,
    ROUTE_DOC_PATCH, ROUTE_DOC_UPDATE, ROUTE_UPDATE, ROUTE_DELETE_QUERY, ROUTE_IMPORT, ROUTE_DOC_NDJSON, ROUTE_AUDIT, ROUTE_COUNT
};

/* An answer kept instead of sent: a query worker builds it off the loop
   (http_query.c), the loop sends it. */
typedef struct http_answer {
    int status;
    hanu_buf body;
} http_answer;

/* The query parameters of any route; each route accepts a set of them (http_route.c). */
enum http_param { HTTP_PARAM_DURABILITY, HTTP_PARAM_LIMIT, HTTP_PARAM_AFTER, HTTP_PARAM_RETURN,
                  HTTP_PARAM_FORMAT, HTTP_PARAM_FIRST_LINE, HTTP_PARAM_MIN_TXN, HTTP_PARAM_COUNT };
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
    PATH_DOCS, PATH_DOC, PATH_BATCH, PATH_FIND, PATH_SEARCH, PATH_AGGS, PATH_SNAPSHOT, PATH_EXPORT,
    PATH_DOC_UPDATE, PATH_UPDATE, PATH_DELETE_QUERY, PATH_IMPORT, PATH_AUDIT, PATH_COUNT
};

/* Splits a path (without the query) into at most 5 non-empty segments and names it;
   PATH_UNKNOWN for any other shape. The segments point into path. */
#define HTTP_MAX_SEGMENTS 5
int http_match_path(const char *path, size_t len, const char *seg[HTTP_MAX_SEGMENTS], size_t segl[HTTP_MAX_SEGMENTS]);
/* Whether the request's Content-Type is type (case-insensitive, parameters allowed). */
int http_content_type_is(h2o_req_t *req, const char *type);
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
/* The query string's part of it, without a request (fuzz/fuzz_http_params.c): splits
   q[0..len) into params, each value decoded into scratch (room for len + HTTP_PARAM_COUNT
   bytes: every value and its NUL). 1, or 0 and the fault. */
enum http_query_fault_kind { HTTP_QUERY_UNKNOWN = 1, HTTP_QUERY_REPEATED, HTTP_QUERY_MALFORMED };
typedef struct http_query_fault {
    enum http_query_fault_kind kind;
    const char *name;                 /* the name as sent (UNKNOWN), else the parameter's */
    size_t name_len;
} http_query_fault;
int http_query_split(const char *q, size_t len, unsigned accepted, char *scratch, h2o_iovec_t params[HTTP_PARAM_COUNT],
                     http_query_fault *fault);
const char *http_param_name(enum http_param p);   /* as the query string spells it */
/* A parameter's decoded value (NUL-terminated), or NULL when absent. */
const h2o_iovec_t *http_param(const http_call *c, enum http_param p);
/* ?min_txn= into *out (0 when absent): 1, or 0 and the 400 invalid_parameter sent. */
int http_param_min_txn(http_call *c, uint64_t *out);

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
/* Shared by the writes of http_docs.c and http_update.c. */
int http_write_allowed(http_call *c);          /* token, durability=bucket, stopping; 0: answered */
void http_store_failure(http_call *c, int rc);   /* a store_write's error as the answer */
void http_body_error(http_call *c, const docs_error *e);
void http_new_id(void *ctx, char out[DOCS_NEW_ID_LEN + 1]);   /* docs_id_fn on the server's id state */
/* An answer's members after its leading {"txn":N, written into rest with w (what an
   idempotency record keeps): begin, members, end. */
void http_answer_begin(json_writer *w, hanu_buf *rest);
void http_answer_end(json_writer *w);
/* Sends {"txn":N + rest, with "etag":"\"N\"" and the ETag header when etag is set,
   parked until durable at the request's durability. */
void http_reply_written(http_call *c, int status, uint64_t txn, const uint8_t *rest, size_t rest_len, int etag);
/* Idempotency-Key: *ik (NULL without one) and fp; 1 when answered (a bad key, the
   replay of a first answer, 422 for a key used by another request). */
int http_idem_begin(http_call *c, const h2o_iovec_t **ik, uint8_t fp[DOCS_IDEM_FINGERPRINT], int etag);
const h2o_iovec_t *http_idem_header(http_call *c, int *bad);
size_t http_idem_store_key(const http_call *c, const h2o_iovec_t *k, char out[DOCS_IDEM_STORE_KEY_MAX]);
void http_idem_fingerprint(const http_call *c, uint8_t out[DOCS_IDEM_FINGERPRINT]);
int http_idem_replay(http_call *c, const h2o_iovec_t *k, const uint8_t fp[DOCS_IDEM_FINGERPRINT], int etag);
/* The record of an answer (status, Location, rest), for the write's store ops. */
void http_idem_record(http_call *c, int status, const uint8_t fp[DOCS_IDEM_FINGERPRINT], h2o_iovec_t location,
                      const hanu_buf *rest, hanu_buf *out);
/* If-Match and If-None-Match against a document that exists (at txn) or not: 1 to go
   on (*conditional: there was a condition), else the answer (304, 400, 412) was sent. */
int http_preconditions(http_call *c, int exists, uint64_t txn, int is_read, int *conditional);

/* Updates (http_update.c, docs/API.md "Updates"): PATCH and POST .../docs/{id}/_update
   by id; POST /c/{col}/_update and _delete by filter, which go through http_query to
   wait for the index, then come back to http_update_query_run on the loop. */
void http_doc_update(http_call *c);
void http_update_query(http_call *c);
void http_update_query_run(http_call *c, uint32_t db);

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
/* Holds c (a read by id or the listing) until the store has applied min_txn, then
   calls resume(c); past --min-txn-wait-ms 503 store_behind. Always answers or holds. */
int http_hold_for_store(http_call *c, uint64_t min_txn, void (*resume)(http_call *c));
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

/* POST /_admin/audit (http_audit.c): starts replica/audit.h on a background thread
   (one at a time) and answers 202 with its state at once. */
void http_audit(http_call *c);
int http_audit_start(server *srv);
void http_audit_stop(server *srv);   /* stops a running audit and joins it */
void http_audit_free(server *srv);
/* "audit":{...} inside the bucket object of /_status (nothing without a bucket). */
void http_audit_status(server *srv, json_writer *w);
/* The last finished audit: 1 passed, 0 failed, -1 none yet; *running: one runs now. */
int http_audit_last(server *srv, int *running);

/* POST /c/{col}/_export (http_export.c): the collection as zstd JSON lines in the
   bucket, written on a thread of its own; the answer when the object is there. */
void http_export(http_call *c);
void http_export_start(server *srv);
void http_export_stop(server *srv);   /* running exports stop (503) or finish their put */
/* The txn of the first record at or after from in the log, or 0 when there is none
   (what the index must reach to cover every write up to a txn). */
uint64_t http_next_record_txn(store *st, uint64_t from);

/* NDJSON in and out (docs/API.md "Import", "Export as NDJSON"): POST /c/{col}/_import
   (http_import.c) and GET /c/{col}/docs?format=ndjson (http_ndjson.c), streamed
   from one index snapshot. */
void http_import(http_call *c);
void http_import_start(server *srv);
void http_import_stop(server *srv);   /* imports in progress get 503 shutting_down */
void http_ndjson_export(http_call *c);

/* Expiring documents (http_expire.c, docs/API.md "Expiring documents"): PUT /c/{col}
   with a body sets the option; reads hide expired documents; the leader's sweep
   deletes them. */
void http_collection_options(http_call *c);
void http_expire_describe(http_call *c, json_writer *w);   /* "expire_after_field" of GET /c/{col} */
void http_expire_forget(http_call *c);                      /* after a drop */
/* 1 with the request's collection's expiry field, else 0 (no expiry). Any thread. */
int http_expire_field(const http_call *c, char field[DOCS_EXPIRE_FIELD_MAX + 1]);
/* Removes the expired hits of a page (and their scores, when given), lowering total;
   returns how many. Any thread. */
typedef struct index_hits index_hits;
size_t http_expire_drop_hits(const http_call *c, index_hits *h, double *scores);
void http_expire_start(server *srv);
void http_expire_stop(server *srv);

/* Header, body and idle deadlines of HTTP connections (http_timeout.c). */
int http_timeout_start(server *srv);
void http_timeout_stop(server *srv);

#endif
