/*
 * waiters.c: one queue a watermark, kept in txn order. Txns are handed out
 * in order, so a new waiter almost always goes at the tail; a key-value
 * connection re-queued for its next gate may be older than the tail, so the
 * insert walks back from the tail (a few steps at most in practice).
 */
#include "server/waiters.h"

#include <assert.h>
#include <string.h>

void waiters_init(waiters *ws, uint64_t start_txn)
{
    memset(ws, 0, sizeof *ws);
    for (int m = 0; m < WAIT_MARKS; m++) ws->reached[m] = start_txn;
}

static void unlink_waiter(waiters *ws, waiter *w)
{
    int m = w->mark;
    if (w->prev) w->prev->next = w->next;
    else ws->head[m] = w->next;
    if (w->next) w->next->prev = w->prev;
    else ws->tail[m] = w->prev;
    w->prev = w->next = NULL;
    w->queued = 0;
    ws->count--;
}

int waiters_add(waiters *ws, waiter *w, int mark, uint64_t txn, uint64_t deadline_ns, waiter_fn on_release)
{
    assert(mark >= 0 && mark < WAIT_MARKS && !w->queued);
    int state = waiters_state(ws, mark, txn);
    if (state != WAITER_PENDING) return state;
    w->txn = txn;
    w->deadline_ns = deadline_ns;
    w->on_release = on_release;
    w->mark = (uint8_t)mark;
    w->queued = 1;
    waiter *after = ws->tail[mark];
    while (after && after->txn > txn) after = after->prev;
    w->prev = after;
    w->next = after ? after->next : ws->head[mark];
    if (w->next) w->next->prev = w;
    else ws->tail[mark] = w;
    if (after) after->next = w;
    else ws->head[mark] = w;
    ws->count++;
    return WAITER_PENDING;
}

void waiters_cancel(waiters *ws, waiter *w)
{
    if (w->queued) unlink_waiter(ws, w);
}

/* Releases the head of one queue while it is covered (or, once failed, all of it).
   The head is read again after every callback: a callback may add or cancel. */
static void release_queue(waiters *ws, int mark)
{
    waiter *w;
    while ((w = ws->head[mark]) && (w->txn <= ws->reached[mark] || ws->failed[mark])) {
        unlink_waiter(ws, w);
        w->on_release(w, w->txn <= ws->reached[mark] ? WAITER_REACHED : WAITER_FAILED);
    }
}

void waiters_advance(waiters *ws, int mark, uint64_t txn, int failed)
{
    if (txn > ws->reached[mark]) ws->reached[mark] = txn;
    if (failed) ws->failed[mark] = 1;
    if (mark == WAIT_DURABLE) {
        /* A synced frame is written; a failed sync ends the log's writing too. */
        if (txn > ws->reached[WAIT_WRITTEN]) ws->reached[WAIT_WRITTEN] = txn;
        if (failed) ws->failed[WAIT_WRITTEN] = 1;
        release_queue(ws, WAIT_WRITTEN);
    }
    release_queue(ws, mark);
}

void waiters_expire(waiters *ws, uint64_t now_ns)
{
    for (int m = 0; m < WAIT_MARKS; m++) {
        waiter *w = ws->head[m];
        while (w) {
            waiter *next = w->next;
            if (w->deadline_ns && w->deadline_ns < now_ns) {
                unlink_waiter(ws, w);
                w->on_release(w, WAITER_TIMED_OUT);
                /* The callback may have cancelled what came next: start over. */
                next = ws->head[m];
            }
            w = next;
        }
    }
}
