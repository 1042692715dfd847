/*
 * query_pool: a bounded pool of worker threads for the queries of the
 * documents face, and a bounded queue in front of them (docs/QUERY.md,
 * "Execution").
 *
 * The event loop submits a job; a worker runs it (job's run function) and
 * puts it on the finished list; the loop is woken through an eventfd it
 * watches (written once while a wake is pending) and calls the pool's done function for every finished job, on the loop
 * thread. A job carries everything it needs: the worker never touches the
 * loop's structures, the loop never touches a running job.
 *
 * A job whose client left is cancelled (query_pool_cancel, loop thread): it
 * still finishes (a worker cannot be interrupted safely in the middle of an
 * index read), or is skipped if it has not started, and done is called with
 * it as usual so that its owner frees it and drops the answer.
 *
 * Threads: create, submit, cancel, drain, stats and close from the loop
 * thread; the run function on the workers.
 */
#ifndef HANU_QUERY_POOL_H
#define HANU_QUERY_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "base/base.h"

typedef struct query_job {
    struct query_job *next;     /* the pool's lists */
    uint64_t queued_ns;
    _Atomic int cancelled;      /* the client left: skip it if not started, drop its answer */
    int ran;                    /* 1 when run was called (0: cancelled before, or the pool closed) */
} query_job;

typedef struct query_pool query_pool;
typedef void (*query_job_fn)(query_job *job);

typedef struct query_pool_stats {
    unsigned threads;
    size_t queue_cap;
    size_t queued;              /* waiting for a worker now */
    size_t running;             /* on a worker now */
    size_t in_flight;           /* submitted and not yet given to done */
    uint64_t jobs;              /* finished by a worker since the start */
    uint64_t rejected;          /* refused: the queue was full */
    uint64_t cancelled;         /* their client left before the answer */
    uint64_t busy_ns;           /* workers' time in run */
    uint64_t wait_ns;           /* jobs' time in the queue */
} query_pool_stats;

/* Starts threads workers (at least 1) behind a queue of queue_cap jobs (at least 1);
   finished jobs come back on loop, woken by an eventfd. */
int query_pool_create(h2o_evloop_t *loop, unsigned threads, size_t queue_cap, query_job_fn run,
                      query_job_fn done, query_pool **out);
/* Queues job: HANU_OK, or HANU_ERR_BUSY when the queue is full (counted as rejected;
   the job stays the caller's). */
int query_pool_submit(query_pool *p, query_job *job);
/* Marks job cancelled; done is still called for it. */
void query_pool_cancel(query_pool *p, query_job *job);
/* Calls done for every finished job (the loop does it when woken). */
void query_pool_drain(query_pool *p);
void query_pool_get_stats(query_pool *p, query_pool_stats *st);
/* Lets the workers finish what they run, joins them, hands every job (queued
   ones with ran = 0) to done, and frees the pool. NULL is a no-op. */
void query_pool_close(query_pool *p);

#endif
