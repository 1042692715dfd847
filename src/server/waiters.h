/*
 * waiters: the one way an answer waits for the log. A waiter holds a
 * continuation until a watermark reaches a txn: WRITTEN (the loop's own
 * pwrite of the frame: `none`), DURABLE (the fdatasync covering it: `local`),
 * BUCKET (the sealer's txn: `bucket`, when the sealer exists). The key-value
 * connections and the HTTP answers both wait here.
 *
 * Rules kept here:
 * - A waiter is released only when its watermark is at or above its txn, or
 *   with WAITER_FAILED when that watermark failed for good (an answer on an
 *   error path never claims success), or WAITER_TIMED_OUT past its deadline.
 * - Waiters of one watermark are released in txn order.
 * - DURABLE implies WRITTEN: a synced frame is written; a failed sync fails
 *   the written waiters that are not written yet (the log takes no more).
 *
 * Everything runs on the event loop thread. Waiters are intrusive (the caller
 * owns the memory, no allocation here) and a cancel is O(1). A callback may
 * add or cancel waiters, its own included.
 */
#ifndef HANU_WAITERS_H
#define HANU_WAITERS_H

#include <stddef.h>
#include <stdint.h>

enum waiter_mark { WAIT_WRITTEN, WAIT_DURABLE, WAIT_BUCKET, WAIT_MARKS };

enum waiter_outcome {
    WAITER_PENDING,      /* waiters_add: queued, the callback comes later */
    WAITER_REACHED,      /* the watermark is at or above the txn */
    WAITER_FAILED,       /* the watermark will never reach it: outcome unknown */
    WAITER_TIMED_OUT,    /* its deadline passed first */
};

typedef struct waiter waiter;
/* Called once, with the waiter already removed from its queue. */
typedef void (*waiter_fn)(waiter *w, int outcome);

struct waiter {
    waiter *prev, *next;
    uint64_t txn;
    uint64_t deadline_ns;   /* 0: waits as long as it takes */
    waiter_fn on_release;
    uint8_t mark;
    uint8_t queued;
};

typedef struct waiters {
    waiter *head[WAIT_MARKS], *tail[WAIT_MARKS];
    uint64_t reached[WAIT_MARKS];
    uint8_t failed[WAIT_MARKS];
    size_t count;           /* queued, every watermark */
} waiters;

/* Every watermark starts at start_txn (what is durable when the store opens). */
void waiters_init(waiters *ws, uint64_t start_txn);

/* The outcome a waiter for txn would have now: REACHED, FAILED or PENDING. */
static inline int waiters_state(const waiters *ws, int mark, uint64_t txn)
{
    if (txn <= ws->reached[mark]) return WAITER_REACHED;
    return ws->failed[mark] ? WAITER_FAILED : WAITER_PENDING;
}

/* Queues w until mark reaches txn, when waiters_state says PENDING; otherwise
   queues nothing and returns the state (the caller answers now). */
int waiters_add(waiters *ws, waiter *w, int mark, uint64_t txn, uint64_t deadline_ns, waiter_fn on_release);
/* Removes a queued waiter without calling it (its connection is gone); no-op if not queued. */
void waiters_cancel(waiters *ws, waiter *w);
/* The watermark moved to txn (never backwards) or, with failed, stopped for good
   there: releases what it covers, in txn order, and with failed the rest too. */
void waiters_advance(waiters *ws, int mark, uint64_t txn, int failed);
/* Releases with WAITER_TIMED_OUT every waiter whose deadline is before now_ns. */
void waiters_expire(waiters *ws, uint64_t now_ns);

#endif
