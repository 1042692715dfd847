/*
 * gated_conn.c: answers held for durability, in order, on a plain socket
 * (gated_conn.h). Nothing here blocks the loop.
 */
#include "server/gated_conn.h"

#include <stdlib.h>

void gated_open(gated_conn *c, server *srv, h2o_socket_t *sock, const gated_ops *ops, h2o_linklist_t *list)
{
    c->srv = srv;
    c->sock = sock;
    c->ops = ops;
    sock->data = c;
    h2o_linklist_insert(list, &c->link);
    h2o_socket_read_start(sock, ops->on_read);
}

void gated_close(gated_conn *c)
{
    waiters_cancel(&c->srv->waits, &c->wait);
    h2o_linklist_unlink(&c->link);
    c->sock->data = NULL;
    h2o_socket_close(c->sock);
    hanu_buf_free(&c->out);
    hanu_buf_free(&c->sending);
    free(c->gates);
    c->ops->close(c);
}

/* Skips the gates whose condition holds: txn synced (local), written (none), sealed (bucket). */
static void pass_open_gates(gated_conn *c)
{
    while (c->ghead < c->ngates && server_reached(c->srv, c->gates[c->ghead].mark, c->gates[c->ghead].txn))
        c->ghead++;
}

/* fsyncgate: what waited for a failed sync is never acknowledged. Keeps what was
   answerable and closes after it, so the client sees an unknown outcome, not a success. */
static void fail_closed_gates(gated_conn *c)
{
    pass_open_gates(c);
    if (gated_has_gates(c)) c->out.len = c->gates[c->ghead].start;
    c->ghead = c->ngates = 0;
    c->close_after_flush = 1;
}

static void on_gate_released(waiter *w, int outcome)
{
    gated_conn *c = H2O_STRUCT_FROM_MEMBER(gated_conn, wait, w);
    gated_gate *g = gated_has_gates(c) ? &c->gates[c->ghead] : NULL;
    if (g && g->soft) {
        c->ops->soft_done(c, g, outcome == WAITER_REACHED);
        c->ghead++;
    } else if (outcome != WAITER_REACHED) {
        fail_closed_gates(c);
    }
    gated_flush(c);
}

/* Passes the open gates and queues the connection's waiter on the first closed one. */
static void arm_gates(gated_conn *c)
{
    for (;;) {
        pass_open_gates(c);
        if (!gated_has_gates(c)) { waiters_cancel(&c->srv->waits, &c->wait); return; }
        gated_gate *g = &c->gates[c->ghead];
        if (c->wait.queued) {
            if (c->wait.txn == g->txn && c->wait.mark == g->mark) return;
            waiters_cancel(&c->srv->waits, &c->wait);
        }
        /* pass_open_gates passed every reached gate: only PENDING or FAILED here */
        int st = waiters_add(&c->srv->waits, &c->wait, g->mark, g->txn, g->deadline_ns, on_gate_released);
        if (st == WAITER_PENDING) return;
        if (!g->soft) { fail_closed_gates(c); return; }
        c->ops->soft_done(c, g, 0);   /* only a failed watermark answers at once */
        c->ghead++;
    }
}

static void on_write_done(h2o_socket_t *sock, const char *err)
{
    gated_conn *c = sock->data;
    if (!c) return;
    if (err) { gated_close(c); return; }
    c->sending.len = 0;
    gated_flush(c);
}

void gated_flush(gated_conn *c)
{
    arm_gates(c);
    if (h2o_socket_is_writing(c->sock)) return;
    size_t releasable = gated_has_gates(c) ? c->gates[c->ghead].start : c->out.len;
    if (releasable == 0) {
        if (!gated_has_gates(c)) {
            c->ghead = c->ngates = 0;
            if (c->close_after_flush) { gated_close(c); return; }
        }
        goto resume;
    }
    if (releasable == c->out.len) {
        hanu_buf t = c->sending;
        c->sending = c->out;
        c->out = t;
        c->out.len = 0;
    } else {
        c->sending.len = 0;
        if (hanu_buf_append(&c->sending, c->out.data, releasable) != HANU_OK) { gated_close(c); return; }
        hanu_buf_consume(&c->out, releasable);
    }
    for (size_t i = c->ghead; i < c->ngates; i++) c->gates[i].start -= releasable;
    if (!gated_has_gates(c)) c->ghead = c->ngates = 0;
    h2o_iovec_t iov = h2o_iovec_init(c->sending.data, c->sending.len);
    h2o_socket_write(c->sock, &iov, 1, on_write_done);
resume:
    if (c->read_paused && !c->close_after_flush && c->out.len < GATED_OUT_HIGH_WATER / 2 && !c->srv->stopping) {
        c->read_paused = 0;
        h2o_socket_read_start(c->sock, c->ops->on_read);
        /* input read before the pause waits in the buffer: no new read would run it */
        if (c->sock->input->size) c->ops->resume(c);
    }
}

int gated_add_gate(gated_conn *c, gated_gate g)
{
    if (c->ngates == c->gcap) {
        if (c->ghead > 0) {
            memmove(c->gates, c->gates + c->ghead, (c->ngates - c->ghead) * sizeof *c->gates);
            c->ngates -= c->ghead;
            c->ghead = 0;
        } else {
            size_t ncap = c->gcap ? c->gcap * 2 : 8;
            gated_gate *ng = realloc(c->gates, ncap * sizeof *ng);
            if (!ng) return HANU_ERR_NOMEM;
            c->gates = ng;
            c->gcap = ncap;
        }
    }
    c->gates[c->ngates++] = g;
    return HANU_OK;
}

void gated_gate_write(gated_conn *c, size_t start, uint64_t txn, uint8_t durability)
{
    /* `none` is released after the loop's pwrite (no lock taken here). */
    int mark = server_wait_mark(durability);
    if (server_reached(c->srv, mark, txn)) return;
    if (gated_add_gate(c, (gated_gate){ .start = start, .txn = txn, .mark = mark }) != HANU_OK) {
        c->out.len = start;
        c->close_after_flush = 1;
        return;
    }
    server_want_mark(c->srv, mark, txn);
}

void gated_after_input(gated_conn *c)
{
    if ((c->out.len > GATED_OUT_HIGH_WATER || c->close_after_flush) && !c->read_paused) {
        c->read_paused = 1;
        h2o_socket_read_stop(c->sock);
    }
    gated_flush(c);
}

int gated_busy(const gated_conn *c)
{
    int waiting = gated_has_gates(c) && !c->gates[c->ghead].soft;
    return waiting || (c->out.len && !gated_has_gates(c)) || h2o_socket_is_writing(c->sock);
}

void gated_pause_all(h2o_linklist_t *list)
{
    for (h2o_linklist_t *n = list->next; n != list; n = n->next) {
        gated_conn *c = H2O_STRUCT_FROM_MEMBER(gated_conn, link, n);
        if (!c->read_paused) {
            h2o_socket_read_stop(c->sock);
            c->read_paused = 1;
        }
    }
}

size_t gated_busy_count(h2o_linklist_t *list)
{
    size_t busy = 0;
    for (h2o_linklist_t *n = list->next; n != list; n = n->next)
        busy += (size_t)gated_busy(H2O_STRUCT_FROM_MEMBER(gated_conn, link, n));
    return busy;
}

void gated_close_all(h2o_linklist_t *list)
{
    while (!h2o_linklist_is_empty(list)) gated_close(H2O_STRUCT_FROM_MEMBER(gated_conn, link, list->next));
}
