/*
 * gated_conn.h: the output side of a connection whose answers wait for
 * durability, shared by the faces that speak over a plain socket (the binary
 * key-value protocol, src/kv; the Redis protocol, src/resp).
 *
 * A face appends its answers, in request order, to `out`. An answer to a write
 * is a gate (gated_gate_write): it and everything after it on the connection
 * wait until the write's txn reaches its watermark (waiters.h: written, durable,
 * in the bucket), so answers stay in order and nothing is acknowledged early.
 * A connection holds one waiter, queued on its first closed gate. A failed
 * watermark (a failed sync) is never acknowledged: what was answerable goes,
 * then the connection closes, so the client sees an unknown outcome.
 *
 * A face embeds a gated_conn as its connection's FIRST member (sock->data points
 * at both) and plugs in through gated_ops. The face reads; the core writes.
 */
#ifndef HANU_GATED_CONN_H
#define HANU_GATED_CONN_H

#include "server/server_internal.h"

/* Stop reading a client that does not read its answers; read again below half. */
#define GATED_OUT_HIGH_WATER (8u << 20)

typedef struct gated_gate {
    size_t start;          /* offset of the gated answer in out */
    uint64_t txn;
    int mark;              /* enum waiter_mark: server_wait_mark of the durability asked */
    int soft;              /* a failure does not close: ops->soft_done answers it (RESP's WAIT) */
    uint64_t deadline_ns;  /* the waiter's deadline (0: none; soft gates only) */
} gated_gate;

typedef struct gated_conn gated_conn;

/* How a face plugs a connection into the core. */
typedef struct gated_ops {
    h2o_socket_cb on_read;                        /* read ready: the face reads and answers */
    /* Write ready: the output drained below half the high water and reading
       resumed with input already buffered (no new read would run it). */
    void (*resume)(gated_conn *c);
    /* A soft gate ended (reached or not); the gate is passed after it. NULL: no soft gates. */
    void (*soft_done)(gated_conn *c, gated_gate *g, int reached);
    /* Close: frees the face's connection, after the core let go of the socket and buffers. */
    void (*close)(gated_conn *c);
} gated_ops;

struct gated_conn {
    server *srv;
    h2o_socket_t *sock;
    const gated_ops *ops;
    h2o_linklist_t link;        /* in the face's list of connections */
    waiter wait;                /* queued on the first closed gate while there is one */
    hanu_buf out;               /* answers not yet handed to the socket */
    hanu_buf sending;           /* bytes the socket is writing now */
    gated_gate *gates;
    size_t ghead, ngates, gcap;
    int close_after_flush;
    int read_paused;
};

/* Sets up c (zeroed by the face) on sock and starts reading. */
void gated_open(gated_conn *c, server *srv, h2o_socket_t *sock, const gated_ops *ops, h2o_linklist_t *list);
/* Closes the socket, frees the core's part, then ops->close. */
void gated_close(gated_conn *c);

static inline int gated_has_gates(const gated_conn *c) { return c->ghead < c->ngates; }

/* Hands every releasable answer to the socket (one write in flight at a time),
   and resumes reading once the output drained. */
void gated_flush(gated_conn *c);
/* Gates the answer at out[g.start..]; gated_flush queues the waiter. */
int gated_add_gate(gated_conn *c, gated_gate g);
/* The answer to a write at out[start..], of txn at durability (HKV_DUR_*): gated
   unless already there. Out of memory drops the answer and closes after the rest. */
void gated_gate_write(gated_conn *c, size_t start, uint64_t txn, uint8_t durability);
/* After a face's read: stops reading past the high water or when closing, then flushes. */
void gated_after_input(gated_conn *c);

/* Whether c holds the shutdown: answers not yet sent or held for a watermark
   (a soft gate does not hold it). */
int gated_busy(const gated_conn *c);
/* The face's list: stop reading every connection (shutdown), count the busy ones,
   close them all. */
void gated_pause_all(h2o_linklist_t *list);
size_t gated_busy_count(h2o_linklist_t *list);
void gated_close_all(h2o_linklist_t *list);

#endif
