/*
 * query_pool.c: worker threads, a bounded FIFO in front of them and the
 * finished list the loop drains (query_pool.h). One mutex covers both lists
 * and the gauges; it is held for a few pointer moves, never while a query
 * runs, and taken once per job on each side: a worker hands back a finished
 * job and takes the next in one hold, the loop drains every finished job in
 * one hold, and a worker is signalled (after the unlock) only when one is
 * idle. On a server sharing one core with its workers every extra hold was a
 * futex wait and a context switch (measured: half the CPU of a cheap _find).
 */
#include "http/query_pool.h"
#include "base/base.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct query_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;
    query_job *head, *tail;             /* queued, FIFO */
    query_job *done_head, *done_tail;   /* finished, for the loop */
    size_t queued, queue_cap, running, in_flight;
    unsigned idle;                      /* workers waiting for a job */
    int stop;
    unsigned nthreads;
    pthread_t *threads;
    query_job_fn run, done;
    uint64_t jobs, rejected, cancelled, busy_ns, wait_ns;
    /* wakes the loop: an eventfd it watches, written once while a wake is pending */
    int wake_fd;
    h2o_socket_t *wake_sock;
    _Atomic int wake_pending;
    unsigned test_delay_ms;       /* HANUDB_TEST_QUERY_DELAY_MS */
};

static void push(query_job **head, query_job **tail, query_job *j)
{
    j->next = NULL;
    if (*tail) (*tail)->next = j;
    else *head = j;
    *tail = j;
}

/* Under mu: a finished job goes to the loop's list; the first one wakes the loop. */
static void finish_locked(query_pool *p, query_job *j)
{
    push(&p->done_head, &p->done_tail, j);
}

static void wake_loop(query_pool *p)
{
    uint64_t one = 1;
    if (!atomic_exchange(&p->wake_pending, 1) && write(p->wake_fd, &one, sizeof one) != sizeof one) {
        /* cannot happen below 2^64-1 wakes; the next drain still sees the job */
    }
}

static void *worker(void *arg)
{
    query_pool *p = arg;
    int wake = 0;   /* a job this worker finished waits for the loop */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (wake && (!p->head || p->stop)) {   /* nothing to take: wake the loop before waiting */
            pthread_mutex_unlock(&p->mu);
            wake_loop(p);
            wake = 0;
            pthread_mutex_lock(&p->mu);
        }
        while (!p->head && !p->stop) {
            p->idle++;
            pthread_cond_wait(&p->work, &p->mu);
            p->idle--;
        }
        if (p->stop) break;   /* what is still queued is handed back by close */
        query_job *j = p->head;
        p->head = j->next;
        if (!p->head) p->tail = NULL;
        p->queued--;
        p->running++;
        uint64_t start = hanu_now_ns();
        p->wait_ns += start - j->queued_ns;
        pthread_mutex_unlock(&p->mu);
        if (wake) wake_loop(p);   /* the job finished before this one */
        wake = 0;
        if (!atomic_load(&j->cancelled)) {
            j->ran = 1;
            if (p->test_delay_ms) usleep(p->test_delay_ms * 1000u);
            p->run(j);
        }
        uint64_t took = hanu_now_ns() - start;
        pthread_mutex_lock(&p->mu);   /* hands j back and, with work queued, takes the next in this hold */
        p->running--;
        p->jobs++;
        p->busy_ns += took;
        finish_locked(p, j);
        wake = 1;
    }
    pthread_mutex_unlock(&p->mu);
    if (wake) wake_loop(p);
    return NULL;
}

static void on_wake(h2o_socket_t *sock, const char *err)
{
    query_pool *p = sock->data;
    (void)err;
    h2o_buffer_consume(&sock->input, sock->input->size);
    atomic_store(&p->wake_pending, 0);   /* before draining: a job finished after this wakes us again */
    query_pool_drain(p);
}

int query_pool_create(h2o_evloop_t *loop, unsigned threads, size_t queue_cap, query_job_fn run,
                      query_job_fn done, query_pool **out)
{
    query_pool *p = calloc(1, sizeof *p);
    if (!p) return HANU_ERR_NOMEM;
    p->nthreads = threads ? threads : 1;
    p->queue_cap = queue_cap ? queue_cap : 1;
    p->run = run;
    p->done = done;
    /* Tests only: every query takes this much longer, so that a test can hold
       workers busy without depending on how slow a real query is. */
    const char *delay = getenv("HANUDB_TEST_QUERY_DELAY_MS");
    p->test_delay_ms = delay ? (unsigned)strtoul(delay, NULL, 10) % 60000u : 0;
    p->threads = calloc(p->nthreads, sizeof *p->threads);
    if (!p->threads) { free(p); return HANU_ERR_NOMEM; }
    p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->wake_fd < 0) { free(p->threads); free(p); return HANU_ERR_IO; }
    p->wake_sock = h2o_evloop_socket_create(loop, p->wake_fd, 0);
    p->wake_sock->data = p;
    h2o_socket_read_start(p->wake_sock, on_wake);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    for (unsigned i = 0; i < p->nthreads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
            p->nthreads = i;   /* close joins those that started */
            query_pool_close(p);
            return HANU_ERR_NOMEM;
        }
        char name[16];
        snprintf(name, sizeof name, "hanu-query-%u", i % 1000u);
        pthread_setname_np(p->threads[i], name);
    }
    *out = p;
    return HANU_OK;
}

int query_pool_submit(query_pool *p, query_job *job)
{
    job->ran = 0;
    atomic_store(&job->cancelled, 0);
    job->queued_ns = hanu_now_ns();
    pthread_mutex_lock(&p->mu);
    if (p->queued >= p->queue_cap || p->stop) {
        p->rejected++;
        pthread_mutex_unlock(&p->mu);
        return HANU_ERR_BUSY;
    }
    push(&p->head, &p->tail, job);
    p->queued++;
    p->in_flight++;
    int idle = p->idle > 0;   /* a busy worker takes it when it hands its job back */
    pthread_mutex_unlock(&p->mu);
    if (idle) pthread_cond_signal(&p->work);
    return HANU_OK;
}

void query_pool_cancel(query_pool *p, query_job *job)
{
    (void)p;
    atomic_store(&job->cancelled, 1);
}

void query_pool_drain(query_pool *p)
{
    pthread_mutex_lock(&p->mu);
    query_job *j = p->done_head;
    p->done_head = p->done_tail = NULL;
    for (query_job *k = j; k; k = k->next) {   /* the gauges for all of them in this hold */
        p->in_flight--;
        if (atomic_load(&k->cancelled)) p->cancelled++;
    }
    pthread_mutex_unlock(&p->mu);
    while (j) {
        query_job *next = j->next;
        p->done(j);   /* may free j */
        j = next;
    }
}

void query_pool_get_stats(query_pool *p, query_pool_stats *st)
{
    pthread_mutex_lock(&p->mu);
    *st = (query_pool_stats){ .threads = p->nthreads, .queue_cap = p->queue_cap, .queued = p->queued,
                              .running = p->running, .in_flight = p->in_flight, .jobs = p->jobs,
                              .rejected = p->rejected, .cancelled = p->cancelled, .busy_ns = p->busy_ns,
                              .wait_ns = p->wait_ns };
    pthread_mutex_unlock(&p->mu);
}

void query_pool_close(query_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    /* No worker left: the queued jobs go back unrun, after those that finished. */
    while (p->head) {
        query_job *j = p->head;
        p->head = j->next;
        p->queued--;
        finish_locked(p, j);
    }
    p->tail = NULL;
    query_pool_drain(p);
    h2o_socket_read_stop(p->wake_sock);
    h2o_socket_close(p->wake_sock);   /* closes wake_fd */
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}
