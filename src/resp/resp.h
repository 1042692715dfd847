/*
 * resp: the Redis face of hanudb serve (docs/RESP.md). A RESP2/RESP3 listener
 * on the serve process's event loop, over the same store, databases, tokens
 * and waiters as the binary key-value protocol. Off unless --resp-addr.
 *
 * What src/server's caller plugs in (resp_face) and its ops; everything else is
 * the module's own (resp_internal.h).
 */
#ifndef HANU_RESP_H
#define HANU_RESP_H

#include <stddef.h>

#include "server/server.h"

struct server;

extern const server_face resp_face;

/* Binds --resp-addr (nothing without one); before anything is made on disk. */
int resp_bind(struct server *srv, char *err, size_t errcap);
/* Accepts on the bound port (once the store is open). */
int resp_listen(struct server *srv, char *err, size_t errcap);
/* Stops accepting and reading: answers of what was read still go. */
void resp_shutdown_begin(struct server *srv);
/* Connections with answers not yet handed to the socket or held for durability. */
size_t resp_busy(struct server *srv);
/* Closes every connection and frees the module's state. */
void resp_stop(struct server *srv);

#endif
