/*
 * lease.c: the lease object and its keeper thread (lease.h).
 */
#include "replica/lease.h"
#include "hlog/hlog.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "json/json.h"

/* ---- the object ---- */

int lease_encode(const lease *l, hanu_buf *out)
{
    json_writer w;
    json_writer_init(&w, out);
    json_write_object_begin(&w);
    json_write_key(&w, "holder", 6);
    json_write_string(&w, l->holder, strlen(l->holder));
    json_write_key(&w, "url", 3);
    json_write_string(&w, l->url, strlen(l->url));
    const struct { const char *k; uint64_t v; } f[] = {
        { "expires_ms", l->expires_ms }, { "term", l->term }, { "txn", l->txn },
    };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        json_write_key(&w, f[i].k, strlen(f[i].k));
        json_write_int64(&w, (int64_t)f[i].v);
    }
    json_write_object_end(&w);
    return json_writer_status(&w);
}

static int holder_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == ':' || ch == '-';
}

static int get_string(const json_value *root, const char *name, char *out, size_t cap, int holder)
{
    const json_value *v = json_get(root, name);
    const char *s;
    size_t len;
    if (!v || json_as_string(v, &s, &len) != HANU_OK || len >= cap || memchr(s, 0, len)) return 0;
    for (size_t i = 0; holder && i < len; i++)
        if (!holder_char_ok(s[i])) return 0;
    if (holder && len == 0) return 0;
    memcpy(out, s, len);
    out[len] = '\0';
    return 1;
}

static int get_u64(const json_value *root, const char *name, uint64_t *out)
{
    const json_value *v = json_get(root, name);
    int64_t i;
    if (!v || !v->is_int || json_as_int64(v, &i) != HANU_OK || i < 0) return 0;
    *out = (uint64_t)i;
    return 1;
}

int lease_decode(const char *in, size_t len, lease *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (len > LEASE_OBJECT_MAX) {
        snprintf(err, errcap, "lease object of %zu bytes (at most %d)", len, LEASE_OBJECT_MAX);
        return HANU_ERR_CORRUPT;
    }
    json_doc *doc = NULL;
    json_error je;
    json_opts jo = { .max_depth = 2 };
    if (json_doc_parse(in, len, &jo, &doc, &je) != HANU_OK) {
        snprintf(err, errcap, "lease object is not JSON: %s", je.msg);
        return HANU_ERR_CORRUPT;
    }
    const json_value *root = json_doc_root(doc);
    int ok = root && root->type == JSON_OBJECT && json_len(root) == 5 &&
             get_string(root, "holder", out->holder, sizeof out->holder, 1) &&
             get_string(root, "url", out->url, sizeof out->url, 0) &&
             get_u64(root, "expires_ms", &out->expires_ms) && get_u64(root, "term", &out->term) &&
             get_u64(root, "txn", &out->txn) && out->term >= 1;
    json_doc_free(doc);
    if (!ok) {
        memset(out, 0, sizeof *out);
        snprintf(err, errcap, "lease object lacks holder, url, expires_ms, term >= 1 or txn, or has more");
        return HANU_ERR_CORRUPT;
    }
    return HANU_OK;
}

int lease_expired(const lease *l, uint64_t now_ms, uint32_t margin_ms)
{
    return now_ms > l->expires_ms + margin_ms;
}

int lease_read(bucket *b, lease *out, char etag[BUCKET_ETAG_MAX + 1], char *err, size_t errcap)
{
    bucket_object_info info;
    hanu_buf buf = {0};
    int rc = bucket_get(b, LEASE_KEY, &buf, &info, err, errcap);
    if (rc == HANU_OK) {
        rc = lease_decode((const char *)buf.data, buf.len, out, err, errcap);
        memcpy(etag, info.etag, sizeof info.etag);
    }
    hanu_buf_free(&buf);
    return rc;
}

/* ---- the keeper ---- */

struct lease_keeper {
    bucket *b;
    lease_keeper_options o;
    char holder[LEASE_HOLDER_MAX + 1];
    char url[LEASE_URL_MAX + 1];
    uint32_t margin_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stop;
    int poke;                           /* under mu: the promotion ended; the keeper's nap ends early */
    lease_keeper_status st;             /* under mu */
    _Atomic int state;
    _Atomic uint64_t valid_until_ns;
    /* The promotion runs on a thread of its own while the keeper renews the lease:
       a promotion longer than the TTL must not let the lease lapse under it. */
    pthread_t promoter;
    int promoting;                      /* keeper thread only: promoter is running or not joined */
    uint64_t promote_term;
    _Atomic int promote_result;         /* 0 running, 1 promoted, -1 failed */
    char etag[BUCKET_ETAG_MAX + 1];     /* of our last write (keeper thread only) */
    /* Keeper thread only: the highest term seen in any lease (a new take goes
       above it, also when the object was deleted), and an unreadable lease object
       (its ETag, and since when it has been unchanged). */
    uint64_t max_term_seen;
    char unreadable_etag[BUCKET_ETAG_MAX + 1];
    uint64_t unreadable_since_ns;
};

static void set_state(lease_keeper *k, int state, const char *msg)
{
    pthread_mutex_lock(&k->mu);
    k->st.state = state;
    if (msg) snprintf(k->st.message, sizeof k->st.message, "%s", msg);
    pthread_mutex_unlock(&k->mu);
    atomic_store(&k->state, state);
}

static void note(lease_keeper *k, const lease *seen, const char *msg)
{
    pthread_mutex_lock(&k->mu);
    if (seen) k->st.seen = *seen;
    if (msg) snprintf(k->st.message, sizeof k->st.message, "%s", msg);
    pthread_mutex_unlock(&k->mu);
}

/* Sleeps ms unless stopped; 1 when stopping. */
static int nap(lease_keeper *k, uint32_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)ms * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&k->mu);
    while (!k->stop && !k->poke && pthread_cond_timedwait(&k->wake, &k->mu, &ts) == 0) {}
    k->poke = 0;
    int stop = k->stop;
    pthread_mutex_unlock(&k->mu);
    return stop;
}

static void fill_mine(lease_keeper *k, lease *l, uint64_t term)
{
    memset(l, 0, sizeof *l);
    memcpy(l->holder, k->holder, sizeof l->holder);
    memcpy(l->url, k->url, sizeof l->url);
    l->expires_ms = hanu_wall_ms() + k->o.ttl_ms;
    l->term = term;
    l->txn = k->o.current_txn ? k->o.current_txn(k->o.ctx) : 0;
}

/* Writes our lease: put-if-absent when etag is NULL, else compare-and-swap from it.
   On OK the validity moves to sent + TTL - margin. */
static int write_lease(lease_keeper *k, const char *etag, uint64_t term, char *err, size_t errcap)
{
    lease l;
    uint64_t sent_ns = hanu_now_ns();
    fill_mine(k, &l, term);
    hanu_buf buf = {0};
    int rc = lease_encode(&l, &buf);
    bucket_object_info info;
    if (rc == HANU_OK)
        rc = etag ? bucket_compare_and_swap(k->b, LEASE_KEY, etag, buf.data, buf.len, &info, err, errcap)
                  : bucket_put_if_absent(k->b, LEASE_KEY, buf.data, buf.len, &info, err, errcap);
    hanu_buf_free(&buf);
    if (rc != HANU_OK) return rc;
    memcpy(k->etag, info.etag, sizeof k->etag);
    atomic_store(&k->valid_until_ns, sent_ns + ((uint64_t)k->o.ttl_ms - k->margin_ms) * 1000000u);
    note(k, &l, NULL);
    return HANU_OK;
}

/* The term of a new take: above every term this node has seen, and above every
   term that may have written the chain it follows: each promotion moves txn
   numbering up by 2^32, so a term t leader numbers from (t - 1) * 2^32 on, and the
   chain's last txn bounds every term that wrote it by (last >> 32) + 1. Terms only
   grow, also when the lease object was deleted. */
static uint64_t next_term(lease_keeper *k, uint64_t current)
{
    uint64_t t = HANU_MAX(k->max_term_seen, current) + 1;
    uint64_t last_txn = k->o.current_txn ? k->o.current_txn(k->o.ctx) : 0;
    if (last_txn > 0) t = HANU_MAX(t, (last_txn >> 32) + 2);
    if (k->o.claimed_term) t = HANU_MAX(t, k->o.claimed_term(k->o.ctx) + 1);   /* a claim outlives the lease object */
    return t;
}

/* An unreadable lease object: nobody can renew it (a holder's compare-and-swap
   finds another ETag and reads it back), so once it has stayed the same for a
   TTL and the margin, the holder it replaced has stopped writing: 1 when it may
   be replaced (compare-and-swap from its ETag). */
static int unreadable_takeable(lease_keeper *k, const char *etag, const char *why)
{
    uint64_t now = hanu_now_ns();
    if (strcmp(k->unreadable_etag, etag) != 0) {
        snprintf(k->unreadable_etag, sizeof k->unreadable_etag, "%s", etag);
        k->unreadable_since_ns = now;
        hlog_warn("lease", "the lease object is unreadable (%s); taking it over if it stays so for "
                "%u ms", why, k->o.ttl_ms + k->margin_ms);
        return 0;
    }
    return now - k->unreadable_since_ns > (uint64_t)(k->o.ttl_ms + k->margin_ms) * 1000000u;
}

/* Standby: reads the lease and takes it when absent, expired, unreadable for a
   TTL, or ours (a take whose answer was lost). 1 when taken. */
static int try_take(lease_keeper *k)
{
    lease cur;
    char etag[BUCKET_ETAG_MAX + 1], err[256] = "";
    int rc = lease_read(k->b, &cur, etag, err, sizeof err);
    uint64_t term;
    const char *from = NULL;
    if (rc == HANU_OK) {
        note(k, &cur, NULL);
        k->max_term_seen = HANU_MAX(k->max_term_seen, cur.term);
        k->unreadable_etag[0] = '\0';
        from = etag;
        if (strcmp(cur.holder, k->holder) == 0) {
            /* Our own take landed but its answer was lost: renew it from its ETag. */
            term = cur.term;
        } else if (!lease_expired(&cur, hanu_wall_ms(), k->margin_ms)) {
            return 0;
        } else {
            term = next_term(k, cur.term);
        }
    } else if (rc == HANU_ERR_NOT_FOUND) {
        k->unreadable_etag[0] = '\0';
        term = next_term(k, 0);
    } else if (rc == HANU_ERR_CORRUPT) {   /* lease_read gave the ETag of the bytes it read */
        note(k, NULL, err);
        if (!unreadable_takeable(k, etag, err)) return 0;
        from = etag;
        term = next_term(k, 0);
    } else {
        note(k, NULL, err);
        return 0;
    }
    rc = write_lease(k, from, term, err, sizeof err);
    if (rc == HANU_OK) {
        k->max_term_seen = HANU_MAX(k->max_term_seen, term);
        return 1;
    }
    /* EXISTS or MISMATCH: another standby was faster. */
    if (rc != HANU_ERR_EXISTS && rc != HANU_ERR_MISMATCH) note(k, NULL, err);
    return 0;
}

/* Holder: a renewal's compare-and-swap failed on the ETag. Reads the lease back
   before concluding it was lost: our own renewal whose answer was lost (the same
   holder and term) is adopted; an unreadable object is replaced from its ETag
   (no other node could have taken it: a standby waits a TTL for that). OK: the
   ETag is ours again, renew at once; MISMATCH: another node holds it. */
static int reclaim_after_mismatch(lease_keeper *k, uint64_t term, char *err, size_t errcap)
{
    lease cur;
    char etag[BUCKET_ETAG_MAX + 1];
    int rc = lease_read(k->b, &cur, etag, err, errcap);
    if (rc == HANU_OK) {
        if (strcmp(cur.holder, k->holder) != 0 || cur.term != term) {
            note(k, &cur, NULL);
            snprintf(err, errcap, "the lease is now held by %s (term %" PRIu64 ")", cur.holder, cur.term);
            return HANU_ERR_MISMATCH;
        }
        memcpy(k->etag, etag, sizeof k->etag);
        hlog_warn("lease", "a lease renewal landed though its answer was lost; renewing from it");
        return HANU_OK;
    }
    if (rc == HANU_ERR_CORRUPT) {
        memcpy(k->etag, etag, sizeof k->etag);
        hlog_warn("lease", "the lease object was unreadable; the holder rewrites it");
        return HANU_OK;
    }
    return rc;   /* NOT_FOUND: deleted under us, lost; IO: try again later */
}

static void *promote_main(void *arg)
{
    lease_keeper *k = arg;
    int ok = k->o.promote(k->o.ctx, k->promote_term) == 0;
    atomic_store(&k->promote_result, ok ? 1 : -1);
    pthread_mutex_lock(&k->mu);
    k->poke = 1;
    pthread_cond_broadcast(&k->wake);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* A promotion that ended: HOLDING, or FAILED (no more writes; the lease is not
   renewed). wait: join it even if it still runs (the keeper is leaving).
   0 while it runs or when it promoted, -1 when it failed. */
static int settle_promotion(lease_keeper *k, int wait)
{
    if (!k->promoting || (!wait && atomic_load(&k->promote_result) == 0)) return 0;
    pthread_join(k->promoter, NULL);
    k->promoting = 0;
    if (atomic_load(&k->promote_result) < 0) {
        atomic_store(&k->valid_until_ns, 0);
        if (atomic_load(&k->state) == LEASE_PROMOTING) set_state(k, LEASE_FAILED, "promotion failed");
        return -1;
    }
    if (atomic_load(&k->state) == LEASE_PROMOTING) set_state(k, LEASE_HOLDING, NULL);
    return 0;
}

/* The keeper leaves (stopped, or the lease lost): a running promotion is waited for. */
static void *keeper_leaves(lease_keeper *k)
{
    settle_promotion(k, 1);
    return NULL;
}

static void *keeper_main(void *arg)
{
    lease_keeper *k = arg;
    uint32_t renew_ms = k->o.ttl_ms / 3, retry_ms = HANU_MAX(k->o.ttl_ms / 10, 50u);
    while (!try_take(k))
        if (nap(k, k->o.check_ms)) return NULL;
    pthread_mutex_lock(&k->mu);
    k->st.takes++;
    uint64_t term = k->st.seen.term;
    pthread_mutex_unlock(&k->mu);
    set_state(k, LEASE_PROMOTING, NULL);
    hlog_info("lease", "took the lease (term %" PRIu64 "); promoting to leader", term);
    k->promote_term = term;
    if (!k->o.promote) {
        set_state(k, LEASE_HOLDING, NULL);
    } else if (pthread_create(&k->promoter, NULL, promote_main, k) == 0) {
        k->promoting = 1;
    } else if (k->o.promote(k->o.ctx, term) != 0) {   /* no thread to spare: promote here */
        atomic_store(&k->valid_until_ns, 0);
        set_state(k, LEASE_FAILED, "promotion failed");
        return NULL;
    } else {
        set_state(k, LEASE_HOLDING, NULL);
    }
    uint64_t next_ns = hanu_now_ns() + (uint64_t)renew_ms * 1000000u;   /* the take was a write */
    for (;;) {
        uint64_t now = hanu_now_ns();
        if (now < next_ns && nap(k, (uint32_t)((next_ns - now) / 1000000u) + 1)) return keeper_leaves(k);
        if (settle_promotion(k, 0) < 0) return NULL;
        if (hanu_now_ns() < next_ns) continue;   /* woken by the promotion's end */
        if (hanu_now_ns() >= atomic_load(&k->valid_until_ns)) {
            atomic_store(&k->valid_until_ns, 0);
            set_state(k, LEASE_LOST, "the lease could not be renewed before it expired");
            return keeper_leaves(k);
        }
        char err[256] = "";
        int rc = write_lease(k, k->etag, term, err, sizeof err);
        /* A mismatch may be our own renewal whose answer was lost (read back), even
           more than once in a row on a bad network: then it is a failed attempt,
           tried again after retry_ms, not a lost lease. */
        for (int i = 0; rc == HANU_ERR_MISMATCH && i < 3; i++) {
            rc = reclaim_after_mismatch(k, term, err, sizeof err);
            if (rc != HANU_OK) break;
            rc = write_lease(k, k->etag, term, err, sizeof err);
            if (rc == HANU_ERR_MISMATCH && i == 2) rc = HANU_ERR_IO;
        }
        pthread_mutex_lock(&k->mu);
        if (rc == HANU_OK) k->st.renewals++;
        else k->st.renew_failures++;
        pthread_mutex_unlock(&k->mu);
        if (rc == HANU_ERR_MISMATCH || rc == HANU_ERR_NOT_FOUND) {
            atomic_store(&k->valid_until_ns, 0);
            char msg[200];
            snprintf(msg, sizeof msg, "another node replaced the lease: %.160s", err);
            set_state(k, LEASE_LOST, msg);
            return keeper_leaves(k);
        }
        if (rc != HANU_OK) note(k, NULL, err);
        next_ns = hanu_now_ns() + (uint64_t)(rc == HANU_OK ? renew_ms : retry_ms) * 1000000u;
    }
}

static void random_holder(char *out, size_t cap)
{
    uint8_t r[8] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        uint64_t t = hanu_now_ns() ^ ((uint64_t)getpid() << 32);
        memcpy(r, &t, sizeof r);
    }
    size_t n = 0;
    for (size_t i = 0; i < sizeof r && n + 2 < cap; i++) n += (size_t)snprintf(out + n, cap - n, "%02x", r[i]);
}

int lease_keeper_start(bucket *b, const lease_keeper_options *o, lease_keeper **out, char *err, size_t errcap)
{
    lease_keeper *k = calloc(1, sizeof *k);
    if (!k) return HANU_ERR_NOMEM;
    k->b = b;
    k->o = *o;
    if (!k->o.ttl_ms) k->o.ttl_ms = 10000;
    if (k->o.ttl_ms < 300) {
        free(k);
        snprintf(err, errcap, "the lease TTL must be at least 300 ms");
        return HANU_ERR_INVALID;
    }
    if (!k->o.check_ms) k->o.check_ms = HANU_MIN(HANU_MAX(k->o.ttl_ms / 4, 100u), 1000u);
    k->margin_ms = HANU_MIN(HANU_MAX(k->o.ttl_ms / 10, 100u), 2000u);
    if (o->holder) snprintf(k->holder, sizeof k->holder, "%s", o->holder);
    else random_holder(k->holder, sizeof k->holder);
    if (o->url && strlen(o->url) > LEASE_URL_MAX) {
        free(k);
        snprintf(err, errcap, "the advertised URL is longer than %d bytes", LEASE_URL_MAX);
        return HANU_ERR_INVALID;
    }
    snprintf(k->url, sizeof k->url, "%s", o->url ? o->url : "");
    pthread_mutex_init(&k->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
        pthread_cond_destroy(&k->wake);
        pthread_mutex_destroy(&k->mu);
        free(k);
        snprintf(err, errcap, "cannot start the lease thread");
        return HANU_ERR_IO;
    }
    *out = k;
    return HANU_OK;
}

void lease_keeper_stop(lease_keeper *k) { lease_keeper_stop_and_release(k, 0); }

void lease_keeper_stop_and_release(lease_keeper *k, int release)
{
    if (!k) return;
    pthread_mutex_lock(&k->mu);
    k->stop = 1;
    pthread_cond_broadcast(&k->wake);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thread, NULL);
    int state = atomic_load(&k->state);
    if (release && (state == LEASE_HOLDING || state == LEASE_FAILED)) {
        lease mine;
        hanu_buf buf = {0};
        char err[256] = "";
        pthread_mutex_lock(&k->mu);
        mine = k->st.seen;
        pthread_mutex_unlock(&k->mu);
        mine.expires_ms = 0;
        int rc = lease_encode(&mine, &buf);
        if (rc == HANU_OK)
            rc = bucket_compare_and_swap(k->b, LEASE_KEY, k->etag, buf.data, buf.len, NULL, err, sizeof err);
        hanu_buf_free(&buf);
        if (rc == HANU_OK) hlog_info("lease", "released the lease (term %" PRIu64 ")", mine.term);
        else hlog_error("lease", "could not release the lease (it expires on its own): %s", err);
    }
    pthread_cond_destroy(&k->wake);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

void lease_keeper_get(lease_keeper *k, lease_keeper_status *out)
{
    pthread_mutex_lock(&k->mu);
    *out = k->st;
    pthread_mutex_unlock(&k->mu);
    out->valid_until_ns = atomic_load(&k->valid_until_ns);
}

uint64_t lease_keeper_valid_until(lease_keeper *k)
{
    int state = atomic_load(&k->state);
    return state == LEASE_HOLDING || state == LEASE_PROMOTING ? atomic_load(&k->valid_until_ns) : 0;
}

int lease_keeper_may_write(lease_keeper *k, uint64_t now_ns)
{
    int state = atomic_load(&k->state);
    return (state == LEASE_HOLDING || state == LEASE_PROMOTING) && now_ns < atomic_load(&k->valid_until_ns);
}
