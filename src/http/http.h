/*
 * http: the documents API over HTTP (docs/API.md), on h2o on the serve process's
 * event loop: listening and its life (http_listen.c), routes (http_route.c) and
 * the handlers in the other http_*.c files, the query workers (query_pool.h).
 * Everything the handlers share is in http_internal.h.
 */
#ifndef HANU_HTTP_H
#define HANU_HTTP_H

#include "server/server_internal.h"

/* What src/server's caller plugs in (server_run). */
extern const server_face http_face;

/* http_bind checks what can be wrong with the options (tokens, TLS) and binds the
   port; http_start starts the rest and accepts. */
int http_bind(server *srv, char *err, size_t errcap);
int http_start(server *srv, char *err, size_t errcap);
void http_shutdown_begin(server *srv);
/* The index published more: answers the queries held for it (loop thread, http_query.c). */
void http_query_wake(server *srv);
size_t http_busy(server *srv);
void http_stop(server *srv);

#endif
