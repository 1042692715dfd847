/*
 * sealer.c: the sealer thread (sealer.h). One loop: read the feed into a segment
 * builder; when the interval has passed or seal_bytes wait, wait until the last
 * record is durable, seal, and put the object with put-if-absent; then advance
 * the watermark and tell the callback. A failed put keeps the sealed object and
 * puts the very same bytes again later, so a retry can never fork the chain.
 *
 * Invariants: chain.last_txn is the highest txn in the bucket and the feed's
 * position is above it; the watermark never passes chain.last_txn.
 */
#include "replica/sealer.h"
#include "bucket/segment.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEALER_FEED_BATCH 32            /* records per feed call: how far a segment may pass seal_bytes */
#define SEALER_SEAL_BYTES_MAX (64ull << 20)

struct sealer {
    store *s;
    bucket *b;
    sealer_options o;
    store_feed *feed;
    segment_builder pending;            /* records read, not sealed yet */
    int builder_rc;                     /* a failed segment_builder_add in the feed callback */
    segment_chain chain;                /* the bucket's chain end */

    hanu_buf upload;                    /* a sealed segment not yet in the bucket */
    segment_header upload_header;
    int upload_ready;
    uint32_t retry_ms;
    uint64_t retry_at_ns;
    uint64_t last_seal_ns;

    pthread_t thread;
    pthread_mutex_t mu;                 /* guards what follows */
    pthread_cond_t wake;                /* the thread sleeps here */
    pthread_cond_t sealed;              /* sealer_wait sleeps here */
    int stop, poked;
    /* The highest txn a sealer_seal_upto asked for: sealing is forced until the
       bucket holds it (or the feed, read once the txn was durable, had no record
       of it). The ask comes before the loop has written the record, so an ask is
       answered only by a seal that covers its txn, never by an empty feed. */
    uint64_t seal_target_txn;
    int status;
    char status_msg[256];
    sealer_stats stats;
};

void sealer_options_default(sealer_options *o)
{
    memset(o, 0, sizeof *o);
    o->seal_interval_ms = 1000;
    o->seal_bytes = 4u << 20;
    o->zstd_level = 3;
    o->retry_min_ms = 200;
    o->retry_max_ms = 10000;
}

static void say(char *err, size_t errcap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errcap, const char *fmt, ...)
{
    if (!err || !errcap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
}

/* ---- where the chain ends ---- */

static int note_last_segment(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    uint64_t seq, *last = ctx;
    /* A stray object under segments/ is audit's business, not a link. */
    if (segment_key_parse(key, &seq) == HANU_OK && seq > *last) *last = seq;
    return 0;
}

static int find_chain_end(bucket *b, segment_chain *chain, char *err, size_t errcap)
{
    segment_chain_init(chain);
    uint64_t last = 0;
    int rc = bucket_list(b, SEGMENT_KEY_PREFIX, note_last_segment, &last, err, errcap);
    if (rc || last == 0) return rc;
    char key[SEGMENT_KEY_SIZE];
    segment_key(last, key);
    hanu_buf obj = {0};
    segment_header h;
    rc = bucket_get(b, key, &obj, NULL, err, errcap);
    if (rc == HANU_OK) {
        char why[200];
        rc = segment_read_header(obj.data, obj.len, &h, why, sizeof why);
        if (rc) say(err, errcap, "sealer: the chain's last segment %s: %s", key, why);
        else if (h.sequence != last) {
            rc = HANU_ERR_CORRUPT;
            say(err, errcap, "sealer: %s says it is segment %" PRIu64, key, h.sequence);
        }
    }
    hanu_buf_free(&obj);
    if (rc) return rc;
    chain->next_sequence = h.sequence + 1;
    memcpy(chain->prev_hash, h.hash, SEGMENT_HASH_SIZE);
    chain->last_txn = h.last_txn;
    return HANU_OK;
}

/* The watermark's value, 0 when it is not registered (yet). */
static uint64_t existing_watermark(store *s)
{
    store_watermark w[STORE_MAX_WATERMARKS];
    size_t n = HANU_MIN(store_watermark_list(s, w, STORE_MAX_WATERMARKS), (size_t)STORE_MAX_WATERMARKS);
    for (size_t i = 0; i < n; i++)
        if (strcmp(w[i].name, SEALER_WATERMARK) == 0) return w[i].txn;
    return 0;
}

/* The bucket, the store's log and the watermark must tell one story. */
static int check_against_store(sealer *z, uint64_t watermark, char *err, size_t errcap)
{
    uint64_t bucket_txn = z->chain.last_txn, store_txn = store_last_txn(z->s);
    if (bucket_txn > store_txn) {
        say(err, errcap, "sealer: the bucket %s holds txns up to %" PRIu64 " but this data directory "
            "ends at txn %" PRIu64 ": another writer uses the bucket, or the data directory is older "
            "than it", bucket_url(z->b), bucket_txn, store_txn);
        return HANU_ERR_FENCED;
    }
    if (watermark > bucket_txn) {
        say(err, errcap, "sealer: the watermark %s is at txn %" PRIu64 " but the bucket %s holds txns "
            "up to %" PRIu64 " only: this data directory was sealed into another bucket",
            SEALER_WATERMARK, watermark, bucket_url(z->b), bucket_txn);
        return HANU_ERR_MISMATCH;
    }
    return HANU_OK;
}

/* ---- the thread ---- */

static void stop_for_good(sealer *z, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void stop_for_good(sealer *z, int rc, const char *fmt, ...)
{
    pthread_mutex_lock(&z->mu);
    z->status = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(z->status_msg, sizeof z->status_msg, fmt, ap);
    va_end(ap);
    z->stats.status = rc;
    pthread_cond_broadcast(&z->sealed);
    pthread_mutex_unlock(&z->mu);
}

static int add_to_pending(void *ctx, const store_change *c)
{
    sealer *z = ctx;
    segment_record r = { c->txn, c->db, c->op, c->key, (uint32_t)c->key_len, c->value, (uint32_t)c->value_len };
    int rc = z->builder_rc ? z->builder_rc : segment_builder_add(&z->pending, &r);
    /* Not stopping the feed here: a stop inside a record would skip its other entries. */
    if (rc) z->builder_rc = rc;
    return 0;
}

/* Reads what the feed holds, up to seal_bytes; *drained: to its end. */
static int read_feed(sealer *z, int *drained)
{
    size_t n;
    do {
        int rc = store_feed_next(z->feed, SEALER_FEED_BATCH, add_to_pending, z, &n);
        if (rc) return rc;
        if (z->builder_rc) return z->builder_rc;
    } while (n > 0 && segment_builder_raw_len(&z->pending) < z->o.seal_bytes);
    *drained = n == 0;
    return HANU_OK;
}

/* Waits until the pending records are durable, then seals them into z->upload. */
static int seal_pending(sealer *z)
{
    int rc = store_wait_durable(z->s, z->pending.last_txn);
    if (rc) return rc;
    hanu_buf_reset(&z->upload);
    rc = segment_seal(&z->pending, z->chain.next_sequence, z->chain.prev_hash, hanu_wall_ms(),
                      z->o.zstd_level, &z->upload, &z->upload_header);
    if (rc == HANU_OK) z->upload_ready = 1;
    return rc;
}

/* Puts the sealed segment: OK, FENCED, or a failure worth another attempt. A
   collision with our own bytes is an earlier attempt whose answer was lost. */
static int put_segment(sealer *z, char *err, size_t errcap)
{
    char key[SEGMENT_KEY_SIZE];
    segment_key(z->upload_header.sequence, key);
    /* may_put is asked again by the bucket right before the object appears: a node
       frozen after the check in try_upload, during the put's own work (the file
       backend writes and syncs a temporary file first), puts nothing on resuming. */
    int rc = z->o.may_put ? bucket_put_if_absent_guarded(z->b, key, z->upload.data, z->upload.len, z->o.may_put,
                                                         z->o.ctx, NULL, err, errcap)
                          : bucket_put_if_absent(z->b, key, z->upload.data, z->upload.len, NULL, err, errcap);
    if (rc != HANU_ERR_EXISTS) return rc;
    hanu_buf there = {0};
    rc = bucket_get(z->b, key, &there, NULL, err, errcap);
    if (rc == HANU_OK) {
        int ours = there.len == z->upload.len && memcmp(there.data, z->upload.data, there.len) == 0;
        rc = ours ? HANU_OK : HANU_ERR_FENCED;
        if (!ours)
            say(err, errcap, "sealer: %s already exists in %s and is not ours: another writer "
                "extended the chain; this one stops writing", key, bucket_url(z->b));
    }
    hanu_buf_free(&there);
    return rc;
}

static void segment_landed(sealer *z)
{
    const segment_header *h = &z->upload_header;
    char why[1];
    int rc = segment_chain_next(&z->chain, h, why, sizeof why);
    (void)rc;   /* the header was sealed from this very chain */
    /* A failed advance only keeps the floor lower: the next one carries it. */
    (void)store_watermark_advance(z->s, SEALER_WATERMARK, h->last_txn);
    pthread_mutex_lock(&z->mu);
    z->stats.segments++;
    z->stats.bytes += z->upload.len;
    z->stats.records += h->record_count;
    z->stats.sequence = h->sequence;
    z->stats.sealed_txn = h->last_txn;
    z->stats.last_upload_ms = hanu_wall_ms();
    pthread_cond_broadcast(&z->sealed);
    pthread_mutex_unlock(&z->mu);
    z->upload_ready = 0;
    z->retry_ms = z->o.retry_min_ms;
    z->last_seal_ns = hanu_now_ns();
    if (z->o.on_sealed) z->o.on_sealed(z->o.ctx, h->last_txn);
}

/* One attempt at the pending upload: OK (landed), FENCED or STOPPED (stopped for
   good), or a failure that is tried again after the backoff. */
static int try_upload(sealer *z)
{
    char err[512] = "";
    if (z->o.may_put && !z->o.may_put(z->o.ctx)) {
        stop_for_good(z, HANU_ERR_STOPPED, "sealer: this node may no longer extend the chain (its lease is "
                      "not valid); segment %" PRIu64 " was not put", z->upload_header.sequence);
        return HANU_ERR_STOPPED;
    }
    int rc = put_segment(z, err, sizeof err);
    if (rc == HANU_OK) {
        segment_landed(z);
    } else if (rc == HANU_ERR_FENCED) {
        stop_for_good(z, rc, "%s", err);
    } else if (rc == HANU_ERR_STOPPED) {   /* the guard: the lease passed during the put */
        stop_for_good(z, rc, "sealer: this node may no longer extend the chain (its lease is not valid); "
                      "segment %" PRIu64 " was not put", z->upload_header.sequence);
    } else {
        pthread_mutex_lock(&z->mu);
        z->stats.failed_puts++;
        pthread_mutex_unlock(&z->mu);
        z->retry_at_ns = hanu_now_ns() + (uint64_t)z->retry_ms * 1000000u;
        z->retry_ms = HANU_MIN(z->retry_ms * 2, z->o.retry_max_ms);
    }
    return rc;
}

static int time_to_seal(sealer *z, int force)
{
    if (z->pending.count == 0) return 0;
    return force || segment_builder_raw_len(&z->pending) >= z->o.seal_bytes ||
           hanu_now_ns() - z->last_seal_ns >= (uint64_t)z->o.seal_interval_ms * 1000000u;
}

/* Sleeps until poked, stopped, or deadline_ns (CLOCK_MONOTONIC). */
static int sleep_until(sealer *z, uint64_t deadline_ns)
{
    struct timespec ts = { (time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u) };
    pthread_mutex_lock(&z->mu);
    while (!z->stop && !z->poked && hanu_now_ns() < deadline_ns)
        if (pthread_cond_timedwait(&z->wake, &z->mu, &ts) != 0) break;
    z->poked = 0;
    int stop = z->stop;
    pthread_mutex_unlock(&z->mu);
    return stop;
}

/* The highest txn of which every record is read: pending's last, or the chain's. */
static uint64_t read_txn(const sealer *z)
{
    return z->pending.count ? z->pending.last_txn : z->chain.last_txn;
}

/* Reads the feed; under an ask for a txn it has not delivered yet (the loop writes
   a record after the request asked), waits until that txn is durable, so written
   and in the feed, and reads again. Then every record up to target is read: the
   ask is covered (*covered), even a txn without a record of its own. */
static int read_feed_for(sealer *z, uint64_t target, uint64_t *covered)
{
    int drained = 0;
    int rc = read_feed(z, &drained);
    if (rc || !drained || target <= *covered) return rc;
    if (read_txn(z) < target) {
        rc = store_wait_durable(z->s, target);
        if (rc == HANU_OK) rc = read_feed(z, &drained);
        if (rc || !drained) return rc;
    }
    *covered = target;
    return HANU_OK;
}

static void *sealer_thread(void *arg)
{
    sealer *z = arg;
    (void)hanu_thread_background(0);   /* wake-ups do not preempt the event loop; fair share kept */
    uint64_t interval_ns = (uint64_t)z->o.seal_interval_ms * 1000000u;
    uint64_t covered = z->chain.last_txn;   /* every record up to it read from the feed */
    for (;;) {
        pthread_mutex_lock(&z->mu);
        uint64_t target = z->seal_target_txn;
        pthread_mutex_unlock(&z->mu);
        if (!z->upload_ready) {
            int rc = HANU_OK;
            if (target > z->chain.last_txn) rc = read_feed_for(z, target, &covered);
            else {
                int drained;
                rc = read_feed(z, &drained);
            }
            /* Forced while an ask is not in the bucket and pending holds some of it. */
            int force = target > z->chain.last_txn && z->pending.count && covered >= target;
            if (rc == HANU_OK && time_to_seal(z, force)) rc = seal_pending(z);
            if (rc) {
                stop_for_good(z, rc, "sealer: %s after txn %" PRIu64 ": %s",
                              z->pending.count ? "sealing" : "reading the change feed", z->chain.last_txn,
                              hanu_status_str(rc));
                return NULL;
            }
        }
        if (z->upload_ready && hanu_now_ns() >= z->retry_at_ns) {
            int rc = try_upload(z);
            if (rc == HANU_ERR_FENCED || rc == HANU_ERR_STOPPED) return NULL;
            /* The feed may hold more than one segment's worth: look again at once. */
            if (rc == HANU_OK) continue;
        }
        uint64_t deadline;
        if (z->upload_ready) deadline = z->retry_at_ns;
        else if (z->pending.count) deadline = z->last_seal_ns + interval_ns;
        else deadline = hanu_now_ns() + interval_ns;
        if (sleep_until(z, deadline)) return NULL;
    }
}

/* ---- the interface ---- */

int sealer_open(store *s, bucket *b, const sealer_options *o, sealer **out, char *err, size_t errcap)
{
    if (err && errcap) err[0] = '\0';
    sealer *z = calloc(1, sizeof *z);
    if (!z) return HANU_ERR_NOMEM;
    z->s = s;
    z->b = b;
    if (o) z->o = *o;
    else sealer_options_default(&z->o);
    if (z->o.seal_interval_ms == 0) z->o.seal_interval_ms = 1;
    if (z->o.seal_bytes == 0 || z->o.seal_bytes > SEALER_SEAL_BYTES_MAX) z->o.seal_bytes = SEALER_SEAL_BYTES_MAX;
    if (z->o.retry_min_ms == 0) z->o.retry_min_ms = 1;
    if (z->o.retry_max_ms < z->o.retry_min_ms) z->o.retry_max_ms = z->o.retry_min_ms;
    z->retry_ms = z->o.retry_min_ms;
    segment_builder_init(&z->pending);

    /* Checked before registering: a refused sealer must not leave a watermark that
       holds compaction back for good. */
    uint64_t watermark = existing_watermark(s);
    int rc = find_chain_end(b, &z->chain, err, errcap);
    if (rc == HANU_OK) rc = check_against_store(z, watermark, err, errcap);
    if (rc == HANU_OK) {
        rc = store_watermark_register(s, SEALER_WATERMARK, &watermark);
        if (rc) say(err, errcap, "sealer: registering the watermark %s: %s", SEALER_WATERMARK,
                    hanu_status_str(rc));
    }
    /* A put that landed just before a crash: the bucket is ahead of the watermark. */
    if (rc == HANU_OK && watermark < z->chain.last_txn)
        rc = store_watermark_advance(s, SEALER_WATERMARK, z->chain.last_txn);
    if (rc == HANU_OK) rc = store_feed_open(s, z->chain.last_txn + 1, &z->feed);
    if (rc) {
        if (err && errcap && !err[0]) say(err, errcap, "sealer: %s", hanu_status_str(rc));
        segment_builder_free(&z->pending);
        free(z);
        return rc;
    }
    z->stats.sequence = z->chain.next_sequence - 1;
    z->stats.sealed_txn = z->chain.last_txn;
    z->last_seal_ns = hanu_now_ns();

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&z->wake, &ca);
    pthread_cond_init(&z->sealed, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&z->mu, NULL);
    if (pthread_create(&z->thread, NULL, sealer_thread, z) != 0) {
        say(err, errcap, "sealer: cannot start its thread");
        z->thread = 0;
        sealer_close(z);
        return HANU_ERR_NOMEM;
    }
    pthread_setname_np(z->thread, "hanu-sealer");   /* its CPU in top, perf and bench/kv-cpu.sh */
    *out = z;
    return HANU_OK;
}

void sealer_close(sealer *z)
{
    if (!z) return;
    pthread_mutex_lock(&z->mu);
    z->stop = 1;
    pthread_cond_signal(&z->wake);
    pthread_mutex_unlock(&z->mu);
    if (z->thread) pthread_join(z->thread, NULL);
    store_feed_close(z->feed);
    segment_builder_free(&z->pending);
    hanu_buf_free(&z->upload);
    pthread_cond_destroy(&z->wake);
    pthread_cond_destroy(&z->sealed);
    pthread_mutex_destroy(&z->mu);
    free(z);
}

static void poke(sealer *z, uint64_t target)
{
    pthread_mutex_lock(&z->mu);
    z->poked = 1;
    if (target > z->seal_target_txn) z->seal_target_txn = target;
    pthread_cond_signal(&z->wake);
    pthread_mutex_unlock(&z->mu);
}

void sealer_notify(sealer *z) { poke(z, 0); }
void sealer_seal_upto(sealer *z, uint64_t txn) { poke(z, txn); }

int sealer_wait(sealer *z, uint64_t txn, uint32_t timeout_ms)
{
    uint64_t deadline = hanu_now_ns() + (uint64_t)timeout_ms * 1000000u;
    struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    pthread_mutex_lock(&z->mu);
    while (z->stats.sealed_txn < txn && z->status == HANU_OK && hanu_now_ns() < deadline)
        pthread_cond_timedwait(&z->sealed, &z->mu, &ts);
    int rc = z->stats.sealed_txn >= txn ? HANU_OK : z->status ? z->status : HANU_ERR_BUSY;
    pthread_mutex_unlock(&z->mu);
    return rc;
}

uint64_t sealer_sealed_txn(sealer *z)
{
    pthread_mutex_lock(&z->mu);
    uint64_t t = z->stats.sealed_txn;
    pthread_mutex_unlock(&z->mu);
    return t;
}

int sealer_status(sealer *z, char *msg, size_t cap)
{
    pthread_mutex_lock(&z->mu);
    int rc = z->status;
    say(msg, cap, "%s", z->status_msg);
    pthread_mutex_unlock(&z->mu);
    return rc;
}

void sealer_get_stats(sealer *z, sealer_stats *out)
{
    pthread_mutex_lock(&z->mu);
    *out = z->stats;
    pthread_mutex_unlock(&z->mu);
    bucket_counters c;
    bucket_get_counters(z->b, &c);
    out->class_a = c.class_a;
    out->class_b = c.class_b;
}
