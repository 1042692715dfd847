/*
 * kv: the binary key-value protocol face of hanudb serve (docs/PROTOCOL.md):
 * frames read and run on the event loop against the store (kv_server.c), the
 * wire format's parsing (kv_proto.h). Its connections' output is the core's
 * gated_conn (server/gated_conn.h).
 */
#ifndef HANU_KV_H
#define HANU_KV_H

#include "server/server_internal.h"

/* What src/server's caller plugs in (server_run). */
extern const server_face kv_face;

/* Arms the once-a-second idle sweep; it runs only while connections exist. */
void kv_sweep_idle(server *srv);

#endif
