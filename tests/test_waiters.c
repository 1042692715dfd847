/*
 * test_waiters.c: the one way answers wait (src/server/waiters.h): release
 * only at or above the txn, in txn order whatever the order of adds, DURABLE
 * implying WRITTEN, a failure releasing the rest as failed (and written
 * waiters with it), cancellation, deadlines, and callbacks that add or cancel.
 */
#include "test.h"
#include "server/waiters.h"

/* What the callbacks saw, in order. */
static struct { uint64_t txn; int outcome; } seen[64];
static size_t nseen;
static waiters *current;

static void record(waiter *w, int outcome)
{
    seen[nseen].txn = w->txn;
    seen[nseen++].outcome = outcome;
}

typedef struct { int mark; uint64_t txn, deadline_ns; } want;

/* A fresh set at start_txn with w[i] queued as wants[i] says. */
static void queue_all(waiters *ws, uint64_t start_txn, waiter *w, const want *wants, size_t n)
{
    waiters_init(ws, start_txn);
    nseen = 0;
    memset(w, 0, n * sizeof *w);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(waiters_add(ws, &w[i], wants[i].mark, wants[i].txn, wants[i].deadline_ns, record), WAITER_PENDING);
}

static void test_release_at_or_above_in_txn_order(void)
{
    waiters ws;
    waiters_init(&ws, 10);
    waiter w[4] = {0};
    nseen = 0;
    CHECK_EQ(waiters_add(&ws, &w[0], WAIT_DURABLE, 10, 0, record), WAITER_REACHED);   /* already durable */
    CHECK_EQ(waiters_add(&ws, &w[0], WAIT_DURABLE, 14, 0, record), WAITER_PENDING);
    CHECK_EQ(waiters_add(&ws, &w[1], WAIT_DURABLE, 12, 0, record), WAITER_PENDING);   /* older than the tail */
    CHECK_EQ(waiters_add(&ws, &w[2], WAIT_DURABLE, 16, 0, record), WAITER_PENDING);
    CHECK_EQ(waiters_add(&ws, &w[3], WAIT_DURABLE, 13, 0, record), WAITER_PENDING);
    CHECK_EQ(ws.count, 4);
    waiters_advance(&ws, WAIT_DURABLE, 11, 0);
    CHECK_EQ(nseen, 0);
    waiters_advance(&ws, WAIT_DURABLE, 14, 0);
    REQUIRE(nseen == 3);
    CHECK(seen[0].txn == 12 && seen[1].txn == 13 && seen[2].txn == 14);
    CHECK(seen[0].outcome == WAITER_REACHED && seen[2].outcome == WAITER_REACHED);
    waiters_advance(&ws, WAIT_DURABLE, 13, 0);   /* never backwards */
    CHECK_EQ(ws.reached[WAIT_DURABLE], 14);
    CHECK_EQ(waiters_state(&ws, WAIT_DURABLE, 15), WAITER_PENDING);
    waiters_advance(&ws, WAIT_DURABLE, 16, 0);
    CHECK(nseen == 4 && seen[3].txn == 16);
    CHECK_EQ(ws.count, 0);
}

static void test_durable_implies_written(void)
{
    waiters ws;
    waiters_init(&ws, 0);
    waiter wr = {0}, du = {0};
    nseen = 0;
    CHECK_EQ(waiters_add(&ws, &wr, WAIT_WRITTEN, 5, 0, record), WAITER_PENDING);
    CHECK_EQ(waiters_add(&ws, &du, WAIT_DURABLE, 5, 0, record), WAITER_PENDING);
    waiters_advance(&ws, WAIT_WRITTEN, 5, 0);    /* written is not durable */
    CHECK(nseen == 1 && seen[0].txn == 5 && du.queued);
    CHECK_EQ(waiters_add(&ws, &wr, WAIT_WRITTEN, 7, 0, record), WAITER_PENDING);
    waiters_advance(&ws, WAIT_DURABLE, 7, 0);    /* a synced frame is written */
    CHECK_EQ(nseen, 3);
    CHECK_EQ(ws.reached[WAIT_WRITTEN], 7);
    CHECK_EQ(ws.count, 0);
    /* BUCKET is its own watermark: durable does not reach it. */
    waiter bu = {0};
    CHECK_EQ(waiters_add(&ws, &bu, WAIT_BUCKET, 3, 0, record), WAITER_PENDING);
    waiters_advance(&ws, WAIT_DURABLE, 9, 0);
    CHECK(bu.queued);
    waiters_advance(&ws, WAIT_BUCKET, 3, 0);
    CHECK(!bu.queued && seen[nseen - 1].outcome == WAITER_REACHED);
}

static void test_failure_releases_the_rest_as_failed(void)
{
    waiters ws;
    waiter w[4];
    const want wants[4] = { { WAIT_DURABLE, 3, 0 }, { WAIT_DURABLE, 6, 0 }, { WAIT_WRITTEN, 4, 0 },
                            { WAIT_WRITTEN, 8, 0 } };
    queue_all(&ws, 0, w, wants, 4);
    waiters_advance(&ws, WAIT_WRITTEN, 4, 0);
    CHECK(nseen == 1 && seen[0].txn == 4 && seen[0].outcome == WAITER_REACHED);
    /* The sync of 1..5 failed; durable stays at 3 for good. */
    waiters_advance(&ws, WAIT_DURABLE, 3, 1);
    REQUIRE(nseen == 4);
    CHECK(seen[1].txn == 8 && seen[1].outcome == WAITER_FAILED);    /* never written */
    CHECK(seen[2].txn == 3 && seen[2].outcome == WAITER_REACHED);
    CHECK(seen[3].txn == 6 && seen[3].outcome == WAITER_FAILED);
    CHECK_EQ(ws.count, 0);
    /* Later waiters are not queued: the caller answers the failure itself. */
    waiter late = {0};
    CHECK_EQ(waiters_add(&ws, &late, WAIT_DURABLE, 9, 0, record), WAITER_FAILED);
    CHECK_EQ(waiters_add(&ws, &late, WAIT_WRITTEN, 9, 0, record), WAITER_FAILED);
    CHECK_EQ(waiters_add(&ws, &late, WAIT_DURABLE, 2, 0, record), WAITER_REACHED);
    CHECK(!late.queued);
}

static void test_cancel_and_deadline(void)
{
    waiters ws;
    waiter w[3];
    const want wants[3] = { { WAIT_DURABLE, 1, 100 }, { WAIT_DURABLE, 2, 0 }, { WAIT_DURABLE, 3, 300 } };
    queue_all(&ws, 0, w, wants, 3);
    waiters_cancel(&ws, &w[1]);
    waiters_cancel(&ws, &w[1]);   /* no-op when not queued */
    CHECK_EQ(ws.count, 2);
    waiters_expire(&ws, 100);     /* at the deadline is not past it */
    CHECK_EQ(nseen, 0);
    waiters_expire(&ws, 200);
    CHECK(nseen == 1 && seen[0].txn == 1 && seen[0].outcome == WAITER_TIMED_OUT);
    waiters_advance(&ws, WAIT_DURABLE, 3, 0);
    CHECK(nseen == 2 && seen[1].txn == 3 && seen[1].outcome == WAITER_REACHED);
    CHECK(ws.head[WAIT_DURABLE] == NULL && ws.tail[WAIT_DURABLE] == NULL);
}

/* A key-value connection re-queues itself for its next gate from its callback,
   and a callback may cancel another waiter. */
static waiter chain[3];
static void requeue(waiter *w, int outcome)
{
    record(w, outcome);
    if (w == &chain[0] && w->txn == 2) {
        CHECK_EQ(waiters_add(current, w, WAIT_DURABLE, 5, 0, requeue), WAITER_PENDING);
        waiters_cancel(current, &chain[2]);
    }
}

static void test_callbacks_that_add_and_cancel(void)
{
    waiters ws;
    waiters_init(&ws, 0);
    current = &ws;
    memset(chain, 0, sizeof chain);
    nseen = 0;
    waiters_add(&ws, &chain[0], WAIT_DURABLE, 2, 0, requeue);
    waiters_add(&ws, &chain[1], WAIT_DURABLE, 3, 0, requeue);
    waiters_add(&ws, &chain[2], WAIT_DURABLE, 4, 0, requeue);
    waiters_advance(&ws, WAIT_DURABLE, 4, 0);
    REQUIRE(nseen == 2);
    CHECK(seen[0].txn == 2 && seen[1].txn == 3);   /* 4 was cancelled by the first callback */
    CHECK(chain[0].queued && !chain[2].queued);
    waiters_advance(&ws, WAIT_DURABLE, 5, 0);
    CHECK(nseen == 3 && seen[2].txn == 5);
    CHECK_EQ(ws.count, 0);
}

int main(void)
{
    RUN(test_release_at_or_above_in_txn_order);
    RUN(test_durable_implies_written);
    RUN(test_failure_releases_the_rest_as_failed);
    RUN(test_cancel_and_deadline);
    RUN(test_callbacks_that_add_and_cancel);
    TEST_DONE();
}
