/*
 * test_quad_crash: group commit under concurrency and a real SIGKILL.
 * A forked child runs several writer threads doing QUAD_GROUP appends (and
 * one doing QUAD_GROUP retires); after each successful return it reports the
 * commit on a pipe. The parent kills the child with SIGKILL mid-stream,
 * reopens the store and checks that every acknowledged fact is there with its
 * exact lanes and every acknowledged retirement holds. In-process, it checks
 * that concurrent group commits share fdatasyncs and end durable.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>

#include "quad.h"
#include "base/base.h"
#include "test.h"
#include "quad_shapes.h"

#define WRITERS 4
#define BATCH 64

static uint64_t lane_value(uint32_t t, uint32_t s, uint32_t i, uint32_t l)
{
    uint64_t x = ((uint64_t)t << 48) ^ ((uint64_t)s << 20) ^ ((uint64_t)i << 4) ^ l;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return l == 1 ? 7 : (l == 2 ? (uint64_t)s * 1000 + i : x);
}

static void make_batch(quad_fact *f, uint32_t t, uint32_t s)
{
    for (uint32_t i = 0; i < BATCH; i++)
        for (uint32_t l = 0; l < 4; l++) f[i].lane[l] = lane_value(t, s, i, l);
}

typedef struct ack {        /* one pipe record, smaller than PIPE_BUF */
    uint32_t kind;          /* 1 append, 2 retire */
    uint32_t thread, seq;
    uint32_t pad;
    uint64_t id;            /* first id of the batch, or the retired id */
} ack;

static quad *child_q;
static int ack_fd;
static pthread_mutex_t ack_mu = PTHREAD_MUTEX_INITIALIZER;
static quad_id retire_pool[1 << 16];
static size_t retire_pool_n;

static void *child_writer(void *arg)
{
    uint32_t t = (uint32_t)(uintptr_t)arg;
    quad_fact f[BATCH];
    for (uint32_t s = 0;; s++) {
        make_batch(f, t, s);
        quad_id first;
        if (quad_append(child_q, f, BATCH, QUAD_GROUP, &first, NULL) != 0) _exit(3);
        ack a = { 1, t, s, 0, first };
        pthread_mutex_lock(&ack_mu);
        if (write(ack_fd, &a, sizeof a) != sizeof a) _exit(4);
        if (retire_pool_n < HANU_ARRAY_LEN(retire_pool)) retire_pool[retire_pool_n++] = first + s % BATCH;
        pthread_mutex_unlock(&ack_mu);
    }
    return NULL;
}

static void *child_retirer(void *arg)
{
    (void)arg;
    for (uint32_t s = 0;; s++) {
        quad_id id = 0;
        pthread_mutex_lock(&ack_mu);
        int have = retire_pool_n > 0;
        if (have) id = retire_pool[--retire_pool_n];
        pthread_mutex_unlock(&ack_mu);
        if (!have) { usleep(100); continue; }
        if (quad_retire(child_q, &id, 1, QUAD_GROUP, NULL) != 0) _exit(5);
        ack a = { 2, 0, s, 0, id };
        pthread_mutex_lock(&ack_mu);
        if (write(ack_fd, &a, sizeof a) != sizeof a) _exit(4);
        pthread_mutex_unlock(&ack_mu);
    }
    return NULL;
}

static void run_child(const char *path, int fd)
{
    ack_fd = fd;
    quad_options o;
    quad_options_default(&o);
    o.group_window_us = 50;
    if (quad_open(path, &o, &child_q) != 0) _exit(2);
    pthread_t th[WRITERS + 1];
    for (uintptr_t t = 0; t < WRITERS; t++) pthread_create(&th[t], NULL, child_writer, (void *)t);
    pthread_create(&th[WRITERS], NULL, child_retirer, NULL);
    for (;;) pause();
}

static void kill_round(int round, int delay_ms)
{
    char path[600];
    snprintf(path, sizeof path, "%s/crash.quad", test_tmpdir(round ? "crash1" : "crash0"));
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        run_child(path, pfd[1]);
    }
    close(pfd[1]);
    usleep((useconds_t)delay_ms * 1000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    static ack acks[1 << 20];
    size_t nack = 0;
    ssize_t r;
    while (nack < HANU_ARRAY_LEN(acks) && (r = read(pfd[0], &acks[nack], sizeof(ack))) == sizeof(ack)) nack++;
    close(pfd[0]);
    quad *q = NULL;
    REQUIRE(quad_open(path, NULL, &q) == 0);
    size_t appends = 0, retires = 0, bad = 0, missing = 0;
    quad_fact want[BATCH], got[BATCH];
    quad_id ids[BATCH];
    uint8_t present[BATCH];
    for (size_t i = 0; i < nack; i++) {
        if (acks[i].kind == 1) {
            appends++;
            make_batch(want, acks[i].thread, acks[i].seq);
            for (uint32_t k = 0; k < BATCH; k++) ids[k] = acks[i].id + k;
            /* an acknowledged fact may be absent only because it was retired */
            if (quad_gather(q, 0, ids, BATCH, QUAD_LANES_ALL, got, present) != 0) { bad++; continue; }
            for (uint32_t k = 0; k < BATCH; k++) {
                if (present[k] && !tq_fact_eq(&got[k], &want[k], 0xF)) bad++;
                missing += !present[k];
            }
        } else {
            retires++;
            quad_fact f;
            uint8_t pr = 1;
            if (quad_gather(q, 0, &acks[i].id, 1, QUAD_LANES_ALL, &f, &pr) != 0 || pr) bad++;
        }
    }
    quad_stats st;
    quad_stats_get(q, &st);
    CHECK(st.facts >= appends * BATCH);
    CHECK(st.retired >= retires);
    CHECK(missing <= st.retired);
    fprintf(stderr, "  round %d: %zu appends and %zu retires acknowledged, store has %llu facts, %llu retired\n",
            round, appends, retires, (unsigned long long)st.facts, (unsigned long long)st.retired);
    CHECK(appends > 0);
    CHECK_EQ(bad, 0);
    quad_close(q);
}

static void test_sigkill_keeps_acknowledged_commits(void)
{
    kill_round(0, 300);
    kill_round(1, 700);
}

static quad *gq;
static void *group_writer(void *arg)
{
    uint32_t t = (uint32_t)(uintptr_t)arg;
    quad_fact f[BATCH];
    for (uint32_t s = 0; s < 50; s++) {
        make_batch(f, t, s);
        uint64_t ep;
        if (quad_append(gq, f, BATCH, QUAD_GROUP, NULL, &ep) != 0) return (void *)1;
        if (quad_durable_epoch(gq) < ep) return (void *)2;   /* acknowledged means durable */
    }
    return NULL;
}

static void test_group_commit_shares_syncs(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/group.quad", test_tmpdir("group"));
    quad_options o;
    quad_options_default(&o);
    o.group_window_us = 200;
    REQUIRE(quad_open(path, &o, &gq) == 0);
    pthread_t th[8];
    for (uintptr_t t = 0; t < 8; t++) pthread_create(&th[t], NULL, group_writer, (void *)t);
    int errs = 0;
    for (int t = 0; t < 8; t++) {
        void *r;
        pthread_join(th[t], &r);
        errs += r != NULL;
    }
    CHECK_EQ(errs, 0);
    quad_stats st;
    quad_stats_get(gq, &st);
    CHECK_EQ(st.epoch, 400);
    CHECK_EQ(st.durable_epoch, 400);
    fprintf(stderr, "  400 group commits used %llu fdatasyncs\n", (unsigned long long)st.syncs);
    CHECK(st.syncs < 400);
    quad_close(gq);
}

int main(void)
{
    RUN(test_group_commit_shares_syncs);
    RUN(test_sigkill_keeps_acknowledged_commits);
    TEST_DONE();
}
