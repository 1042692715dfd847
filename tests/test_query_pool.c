/*
 * test_query_pool.c: the query workers' contract (src/http/query_pool.h)
 * with real threads and a real h2o event loop: FIFO order, the bounded queue
 * (BUSY past its capacity, counted), a job cancelled before it starts is not
 * run, done is called once per job and on the loop's thread, and close hands
 * every job back. A gate the test opens holds the first job on its worker, so
 * what is queued behind it is known by ordering, not by timing.
 */
#include "test.h"
#include "http/query_pool.h"

#include <pthread.h>
#include <unistd.h>

typedef struct test_job {
    query_job job;
    int id;
    int gated;
} test_job;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int gate_open;
static int ran[16], nran;        /* ids in the order the workers ran them */
static int done_ids[16], ndone;  /* ids in the order done saw them */
static int done_ran[16];
static int done_off_loop;        /* done called on another thread than the loop's */
static pthread_t loop_thread;

static void reset(void)
{
    gate_open = 0;
    nran = ndone = done_off_loop = 0;
    loop_thread = pthread_self();
}

static void run(query_job *j)
{
    test_job *t = (test_job *)j;
    pthread_mutex_lock(&mu);
    while (t->gated && !gate_open) pthread_cond_wait(&cv, &mu);
    ran[nran++] = t->id;
    pthread_mutex_unlock(&mu);
}

static void done(query_job *j)
{
    test_job *t = (test_job *)j;
    if (!pthread_equal(pthread_self(), loop_thread)) done_off_loop = 1;
    done_ran[ndone] = j->ran;
    done_ids[ndone++] = t->id;
}

static void open_gate(void)
{
    pthread_mutex_lock(&mu);
    gate_open = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Runs the loop until done has seen n jobs (bounded: a hang fails, not blocks). */
static void loop_until_done(h2o_evloop_t *loop, int n)
{
    for (int i = 0; i < 3000 && ndone < n; i++) h2o_evloop_run(loop, 10);
}

/* Waits until the pool's gauges say running jobs are on a worker. */
static void wait_running(query_pool *p, size_t running)
{
    query_pool_stats st;
    for (int i = 0; i < 30000; i++) {
        query_pool_get_stats(p, &st);
        if (st.running == running) return;
        usleep(100);
    }
    CHECK(!"the worker never took the job");
}

static void test_fifo_and_bounded_queue(void)
{
    h2o_evloop_t *loop = h2o_evloop_create();
    query_pool *p;
    reset();
    REQUIRE(query_pool_create(loop, 1, 2, run, done, &p) == HANU_OK);
    test_job j[5] = { { .id = 0, .gated = 1 }, { .id = 1 }, { .id = 2 }, { .id = 3 }, { .id = 4 } };
    CHECK_EQ(query_pool_submit(p, &j[0].job), HANU_OK);
    wait_running(p, 1);                       /* job 0 holds the one worker at the gate */
    CHECK_EQ(query_pool_submit(p, &j[1].job), HANU_OK);
    CHECK_EQ(query_pool_submit(p, &j[2].job), HANU_OK);
    CHECK_EQ(query_pool_submit(p, &j[3].job), HANU_ERR_BUSY);   /* the queue of 2 is full */
    query_pool_stats st;
    query_pool_get_stats(p, &st);
    CHECK(st.threads == 1 && st.queue_cap == 2 && st.queued == 2 && st.running == 1 && st.in_flight == 3);
    CHECK_EQ(st.rejected, 1);
    open_gate();
    loop_until_done(loop, 3);
    REQUIRE(ndone == 3 && nran == 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(ran[i], i);                  /* FIFO */
        CHECK_EQ(done_ids[i], i);
        CHECK_EQ(done_ran[i], 1);
    }
    CHECK(!done_off_loop);
    CHECK_EQ(query_pool_submit(p, &j[4].job), HANU_OK);   /* room again */
    loop_until_done(loop, 4);
    CHECK(ndone == 4 && done_ids[3] == 4);
    query_pool_get_stats(p, &st);
    CHECK(st.queued == 0 && st.running == 0 && st.in_flight == 0 && st.jobs == 4 && st.cancelled == 0);
    query_pool_close(p);
    CHECK_EQ(ndone, 4);                       /* nothing handed back twice */
    h2o_evloop_run(loop, 0);   /* frees the closed wake socket */
    h2o_evloop_destroy(loop);
}

static void test_cancelled_before_start_is_not_run(void)
{
    h2o_evloop_t *loop = h2o_evloop_create();
    query_pool *p;
    reset();
    REQUIRE(query_pool_create(loop, 1, 8, run, done, &p) == HANU_OK);
    test_job j[3] = { { .id = 0, .gated = 1 }, { .id = 1 }, { .id = 2 } };
    for (int i = 0; i < 3; i++) CHECK_EQ(query_pool_submit(p, &j[i].job), HANU_OK);
    wait_running(p, 1);
    query_pool_cancel(p, &j[1].job);          /* queued behind the gate: never starts */
    open_gate();
    loop_until_done(loop, 3);
    REQUIRE(ndone == 3);
    CHECK(nran == 2 && ran[0] == 0 && ran[1] == 2);
    CHECK(done_ids[1] == 1 && done_ran[1] == 0 && done_ran[0] == 1 && done_ran[2] == 1);
    query_pool_stats st;
    query_pool_get_stats(p, &st);
    CHECK(st.cancelled == 1 && st.in_flight == 0);
    query_pool_close(p);
    h2o_evloop_run(loop, 0);   /* frees the closed wake socket */
    h2o_evloop_destroy(loop);
}

static void test_close_hands_every_job_back_once(void)
{
    h2o_evloop_t *loop = h2o_evloop_create();
    query_pool *p;
    reset();
    gate_open = 1;
    REQUIRE(query_pool_create(loop, 2, 16, run, done, &p) == HANU_OK);
    test_job j[12];
    for (int i = 0; i < 12; i++) {
        j[i] = (test_job){ .id = i };
        CHECK_EQ(query_pool_submit(p, &j[i].job), HANU_OK);
    }
    query_pool_close(p);                      /* without running the loop: close drains */
    REQUIRE(ndone == 12);
    int seen[12] = {0}, ran_count = 0;
    for (int i = 0; i < 12; i++) {
        seen[done_ids[i]]++;
        ran_count += done_ran[i];
    }
    for (int i = 0; i < 12; i++) CHECK_EQ(seen[i], 1);
    CHECK_EQ(ran_count, nran);                /* ran says whether run was called */
    CHECK(!done_off_loop);
    h2o_evloop_run(loop, 0);   /* frees the closed wake socket */
    h2o_evloop_destroy(loop);
}

int main(void)
{
    RUN(test_fifo_and_bounded_queue);
    RUN(test_cancelled_before_start_is_not_run);
    RUN(test_close_hands_every_job_back_once);
    TEST_DONE();
}
