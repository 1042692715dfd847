/*
 * follower.c: the polling thread over a chain reader (follower.h).
 */
#include "replica/follower.h"
#include "hlog/hlog.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "replica/chain.h"

struct follower {
    store *s;
    chain_reader *reader;
    uint32_t poll_ms;
    void (*behind)(void *ctx);
    void *ctx;
    uint64_t opened_ns;             /* the boot poll's end: the first pause is measured from it */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stop;
    follower_stats st;              /* under mu */
};

/* After each applied segment (the polling thread): write the replayed frames to the
   log file, where the feed (the indexer) and the commit thread see them, and note
   where the follower is. */
static void on_segment(void *ctx, const chain_progress *p)
{
    follower *f = ctx;
    store_flush(f->s);
    uint64_t now = hanu_wall_ms();
    pthread_mutex_lock(&f->mu);
    f->st.segment = p->sequence;
    f->st.segment_ms = p->last_timestamp_ms;
    f->st.lag_ms = now > p->last_timestamp_ms ? now - p->last_timestamp_ms : 0;
    f->st.segments = p->segments;
    f->st.records = p->records;
    f->st.txn = store_last_txn(f->s);
    pthread_mutex_unlock(&f->mu);
}

/* One poll to the chain's end; the outcome goes to the stats. */
static int poll_once(follower *f, uint64_t *applied, char *err, size_t errcap)
{
    int rc = chain_reader_poll(f->reader, applied, err, errcap);
    store_flush(f->s);
    pthread_mutex_lock(&f->mu);
    f->st.polls++;
    f->st.txn = store_last_txn(f->s);
    f->st.status = rc;
    if (rc == HANU_OK) {
        f->st.last_poll_ms = hanu_wall_ms();
    } else {
        f->st.poll_errors++;
        snprintf(f->st.message, sizeof f->st.message, "%s", err[0] ? err : hanu_status_str(rc));
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* The poll reached the end: a listing tells it from a gap retention left. */
static int check_end(follower *f, char *err, size_t errcap)
{
    int rc = chain_reader_check_end(f->reader, err, errcap);
    if (rc == HANU_OK) return rc;
    pthread_mutex_lock(&f->mu);
    f->st.status = rc;
    f->st.poll_errors++;
    snprintf(f->st.message, sizeof f->st.message, "%s", err[0] ? err : hanu_status_str(rc));
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* NOT_FOUND from a poll or a check: the segments this store needs next are gone.
   Said once, in the stats, the log and to the server. */
static void mark_behind(follower *f, const char *err)
{
    chain_progress p;
    chain_reader_progress(f->reader, &p);
    pthread_mutex_lock(&f->mu);
    int first = !f->st.behind_retention;
    f->st.behind_retention = 1;
    f->st.chain_last_txn = p.chain_last_txn;
    pthread_mutex_unlock(&f->mu);
    if (!first) return;
    hlog_error("follower", "%s", err[0] ? err : "behind retention");
    if (f->behind) f->behind(f->ctx);
}

static void *follower_main(void *arg)
{
    follower *f = arg;
    int last_rc = HANU_OK, suspect = 0;
    uint64_t idle = 0, every = HANU_MAX(1u, FOLLOWER_CHECK_MS / f->poll_ms);
    uint64_t last_ns = f->opened_ns;   /* not the thread's start: a pause may come first */
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)f->poll_ms * 1000000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_mutex_lock(&f->mu);
        while (!f->stop && pthread_cond_timedwait(&f->wake, &f->mu, &ts) == 0) {}
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) return NULL;
        char err[512] = "";
        uint64_t applied;
        int rc = poll_once(f, &applied, err, sizeof err);
        /* Paused (SIGSTOP, a frozen VM: also in the middle of this poll) or cut off:
           retention may have run meanwhile. */
        uint64_t now = hanu_now_ns();
        if (now - last_ns > (2ull * f->poll_ms + 250) * 1000000ull || last_rc != HANU_OK) suspect = 1;
        last_ns = now;
        idle = rc == HANU_OK && !applied ? idle + 1 : 0;
        if (rc == HANU_OK && !applied && (suspect || idle % every == 0)) {
            suspect = 0;
            rc = check_end(f, err, sizeof err);
        }
        if (rc == HANU_ERR_NOT_FOUND) {   /* behind retention: nothing more to apply, ever */
            mark_behind(f, err);
            return NULL;
        }
        /* A failed poll is tried again at the next tick (the bucket may come back);
           it is logged once per change of outcome, not every tick. */
        if (rc != last_rc && rc != HANU_OK) hlog_error("follower", "%s", err[0] ? err : hanu_status_str(rc));
        if (rc != last_rc && rc == HANU_OK) hlog_info("follower", "polling works again");
        last_rc = rc;
    }
}

int follower_open(store *s, bucket *b, const follower_options *o, follower **out, char *err, size_t errcap)
{
    follower *f = calloc(1, sizeof *f);
    if (!f) return HANU_ERR_NOMEM;
    f->s = s;
    f->poll_ms = o && o->poll_ms ? o->poll_ms : 1000;
    f->behind = o ? o->behind : NULL;
    f->ctx = o ? o->ctx : NULL;
    if (f->poll_ms < FOLLOWER_POLL_MS_MIN) f->poll_ms = FOLLOWER_POLL_MS_MIN;
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->wake, &ca);
    pthread_condattr_destroy(&ca);
    chain_options co;
    chain_options_default(&co);
    co.progress = on_segment;
    co.ctx = f;
    int rc = chain_reader_open(b, s, &co, &f->reader);
    uint64_t applied = 0, t0 = hanu_now_ns();
    if (rc == HANU_OK) rc = poll_once(f, &applied, err, errcap);
    if (rc == HANU_OK) {
        follower_stats st;
        follower_get_stats(f, &st);
        hlog_info("follower", "applied %llu segments (%llu records) from the bucket in %.1f s; "
                "at txn %llu, segment %llu", (unsigned long long)applied, (unsigned long long)st.records,
                (double)(hanu_now_ns() - t0) / 1e9, (unsigned long long)st.txn, (unsigned long long)st.segment);
        f->opened_ns = hanu_now_ns();
        if (pthread_create(&f->thread, NULL, follower_main, f) != 0) {
            snprintf(err, errcap, "cannot start the follower thread");
            rc = HANU_ERR_IO;
        }
    }
    if (rc != HANU_OK) {
        f->started = 0;
        follower_close(f);
        return rc;
    }
    f->started = 1;
    *out = f;
    return HANU_OK;
}

static void stop_thread(follower *f)
{
    if (!f->started) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    f->started = 0;
}

int follower_finish(follower *f, char *err, size_t errcap)
{
    stop_thread(f);
    uint64_t applied;
    int rc;
    do rc = poll_once(f, &applied, err, errcap);
    while (rc == HANU_OK && applied > 0);
    /* The new writer continues the chain from here: it must be the chain's end. */
    if (rc == HANU_OK) rc = check_end(f, err, errcap);
    if (rc == HANU_ERR_NOT_FOUND) mark_behind(f, err);
    return rc;
}

void follower_close(follower *f)
{
    if (!f) return;
    stop_thread(f);
    chain_reader_close(f->reader);
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void follower_get_stats(follower *f, follower_stats *out)
{
    pthread_mutex_lock(&f->mu);
    *out = f->st;
    pthread_mutex_unlock(&f->mu);
}
