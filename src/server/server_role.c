/*
 * server_role.c: leader, follower or standby (docs/REPLICATION.md). A follower's
 * thread applies the bucket's chain and is the store's only writer; the loop refuses
 * writes. With --lease the lease thread takes the lease when it is free or expired
 * and promotes this node in place: the follower finishes the chain and stops, txn
 * numbering jumps past anything the old writer may have handed out unsealed, a
 * sealer opens, and the loop adopts it and starts accepting writes.
 */
#include "server/server_internal.h"
#include "replica/numbering.h"
#include "hlog/hlog.h"

#include <stdio.h>
#include <stdlib.h>


int server_accepts_writes(server *srv)
{
    if (srv->role != ROLE_LEADER || srv->lease_lost) return 0;
    return !srv->lease || lease_keeper_may_write(srv->lease, hanu_now_ns());
}

const char *server_not_leader_why(const server *srv)
{
    return srv->role == ROLE_LEADER ? "a leader without a valid lease"
         : srv->role == ROLE_FOLLOWER ? "a follower" : "a standby";
}

const char *server_role_name(const server *srv)
{
    return srv->role == ROLE_LEADER ? "leader" : srv->role == ROLE_FOLLOWER ? "follower" : "standby";
}

static void wake_loop(server *srv)
{
    if (!atomic_exchange(&srv->durable_msg_pending, 1))
        h2o_multithread_send_message(&srv->durable_receiver, &srv->durable_msg);
}

/* Follower's thread (or the lease thread in a promotion): behind retention. */
static void on_behind(void *ctx)
{
    server *srv = ctx;
    atomic_store(&srv->behind_retention, 1);
    wake_loop(srv);
}

static uint64_t current_txn(void *ctx)
{
    return store_last_txn(((server *)ctx)->store);
}

/* Lease thread, before a take: the highest term that claimed a txn range (0 when
   none, or when the bucket cannot say: the other bounds still hold). */
static uint64_t claimed_term(void *ctx)
{
    uint64_t base, term;
    char err[256];
    return numbering_highest(((server *)ctx)->bucket, &base, &term, err, sizeof err) == HANU_OK ? term : 0;
}

/* Sealer thread, before every put: a node whose lease is no longer valid puts
   nothing more into the chain (not even what it sealed before it lost it). */
static int lease_still_valid(void *ctx)
{
    server *srv = ctx;
    return srv->lease && lease_keeper_may_write(srv->lease, hanu_now_ns());
}

static int open_leader_sealer(server *srv, sealer **z, char *err, size_t errcap)
{
    sealer_options so;
    sealer_options_default(&so);
    so.seal_interval_ms = srv->opt.seal_interval_ms ? srv->opt.seal_interval_ms : 1000;
    if (srv->opt.seal_mb) so.seal_bytes = (uint64_t)srv->opt.seal_mb << 20;
    so.on_sealed = server_on_sealed;
    so.may_put = lease_still_valid;
    so.ctx = srv;
    return sealer_open(srv->store, srv->bucket, &so, z, err, errcap);
}

/* Times a promotion applies what the chain grew by meanwhile before it gives up. */
#define PROMOTION_ATTEMPTS 5

static int promotion_failed(server *srv, int rc, const char *what, const char *err)
{
    hlog_error("lease", "promotion: %s%s", what, err[0] ? err : hanu_status_str(rc));
    atomic_store(&srv->promotion_failed, rc == HANU_ERR_FENCED ? 2 : 1);
    wake_loop(srv);
    return rc;
}

/* Lease thread, once the lease is ours. The loop accepts no writes until it adopts
   the sealer, so this thread may write to the store (the skip) after the follower
   stopped. Check first, then jump: the sealer opens (it refuses a chain that ends
   beyond this store) before the txn numbering jumps, so a promotion that fails
   leaves the directory as a standby left it. A chain that grew meanwhile (the old
   leader's last segment, put as it lost its lease) is applied and the sealer
   opened again: losing that race is no reason to leave the group leaderless. */
static int promote(void *ctx, uint64_t term)
{
    server *srv = ctx;
    char err[512] = "";
    uint64_t t0 = hanu_now_ns();
    sealer *z = NULL;
    uint64_t last = 0;
    int rc = HANU_OK;
    for (int attempt = 1;; attempt++) {
        err[0] = '\0';
        rc = follower_finish(srv->follower, err, sizeof err);
        if (rc) return promotion_failed(srv, rc, "cannot finish applying the chain: ", err);
        last = store_last_txn(srv->store);
        rc = open_leader_sealer(srv, &z, err, sizeof err);
        if (rc != HANU_ERR_FENCED || attempt == PROMOTION_ATTEMPTS || !lease_still_valid(srv)) break;
        hlog_warn("lease", "promotion: the chain grew past txn %llu while promoting (the old leader's "
                "last put); applying it and trying again", (unsigned long long)last);
    }
    if (rc) return promotion_failed(srv, rc, "", err);
    /* The old writers may have answered writes (durability none or local) that never
       reached the bucket: their txns must never be handed out again. The range is
       claimed in the bucket (numbering.h): also above a writer that never sealed. */
    uint64_t base = 0;
    err[0] = '\0';
    if (last > 0 || term > 1) rc = numbering_claim(srv->bucket, last, term, &base, err, sizeof err);
    if (rc == HANU_OK && base) rc = store_skip_txns(srv->store, base);
    if (rc) {
        sealer_close(z);
        return promotion_failed(srv, rc, "cannot move the txn numbering on: ", err);
    }
    hlog_info("lease", "promoted to leader (term %llu) at txn %llu in %.0f ms; new txns from %llu",
            (unsigned long long)term, (unsigned long long)last, (double)(hanu_now_ns() - t0) / 1e6,
            (unsigned long long)(base ? base : last + 1));
    atomic_store(&srv->promoted, z);
    wake_loop(srv);
    return 0;
}

int server_role_open(server *srv, char *err, size_t errcap)
{
    const server_options *o = &srv->opt;
    if (!o->bucket_url) {
        snprintf(err, errcap, "--follow and --lease need --bucket URL");
        return HANU_ERR_INVALID;
    }
    int rc = srv->bucket ? HANU_OK : server_bucket_open(srv, err, errcap);
    if (rc) return rc;
    srv->role = o->lease ? ROLE_STANDBY : ROLE_FOLLOWER;
    follower_options fo = { .poll_ms = o->poll_ms, .behind = on_behind, .ctx = srv };
    rc = follower_open(srv->store, srv->bucket, &fo, &srv->follower, err, errcap);
    if (rc == HANU_OK && o->lease) {
        lease_keeper_options ko = { .url = o->advertise, .ttl_ms = o->lease_ttl_ms, .current_txn = current_txn,
                                    .claimed_term = claimed_term,
                                    .promote = promote, .ctx = srv };
        rc = lease_keeper_start(srv->bucket, &ko, &srv->lease, err, errcap);
    }
    if (rc) {
        follower_close(srv->follower);
        srv->follower = NULL;
        bucket_close(srv->bucket);
        srv->bucket = NULL;
    }
    return rc;
}

void server_role_tick(server *srv)
{
    if (!srv->lease) return;
    int failed = atomic_load(&srv->promotion_failed);
    if (failed && !srv->stopping) {
        hlog_error("lease", "the promotion to leader failed; shutting down");
        srv->fenced = failed == 2;
        srv->stopping = 1;
        return;
    }
    if (srv->role != ROLE_LEADER) {
        sealer *z = atomic_exchange(&srv->promoted, NULL);   /* the loop owns it now */
        if (!z) return;
        srv->sealer = z;
        uint64_t sealed = sealer_sealed_txn(z);
        atomic_store(&srv->sealed_txn, sealed);
        srv->waits.reached[WAIT_BUCKET] = sealed;
        srv->role = ROLE_LEADER;
        hlog_info("lease", "accepting writes as the leader");
        /* A leader snapshots like one started as such (POST /_admin/snapshot, the policy). */
        char err[512] = "";
        int rc = server_snapshots_open(srv, err, sizeof err);
        if (rc != HANU_OK)
            hlog_error("lease", "snapshots: %s; this leader takes none until it is restarted",
                    err[0] ? err : hanu_status_str(rc));
        return;
    }
    if (srv->lease_lost || lease_keeper_may_write(srv->lease, hanu_now_ns())) return;
    lease_keeper_status ls;
    lease_keeper_get(srv->lease, &ls);
    hlog_error("lease", "lost the lease: %s; refusing writes and shutting down (exit status %d)",
            ls.message[0] ? ls.message : "it expired before a renewal succeeded", SERVER_EXIT_LEASE_LOST);
    srv->lease_lost = 1;
    srv->stopping = 1;
    /* What waited for the bucket may never get there: no success for it. */
    waiters_advance(&srv->waits, WAIT_BUCKET, srv->waits.reached[WAIT_BUCKET], 1);
}

void server_role_close(server *srv)
{
    /* A leader stopping cleanly (its sealer closed: nothing more goes into the chain)
       hands the lease on at once instead of letting the standbys wait out the TTL; so
       does a standby whose promotion failed (it put nothing: its sealer never ran). */
    int release = (srv->role == ROLE_LEADER && !srv->lease_lost && !srv->fenced && !srv->sealer) ||
                  (srv->role != ROLE_LEADER && atomic_load(&srv->promotion_failed));
    if (srv->lease) lease_keeper_stop_and_release(srv->lease, release);   /* waits for a promotion */
    srv->lease = NULL;
    sealer *z = atomic_exchange(&srv->promoted, NULL);   /* promoted but never adopted */
    if (z) sealer_close(z);
    follower_close(srv->follower);
    srv->follower = NULL;
}

int server_leader_url(server *srv, char *buf, size_t cap)
{
    if (!srv->lease) return 0;
    lease_keeper_status ls;
    lease_keeper_get(srv->lease, &ls);
    if (!ls.seen.url[0] || ls.state != LEASE_STANDBY) return 0;
    snprintf(buf, cap, "%s", ls.seen.url);
    return 1;
}

uint64_t server_follower_lag_txns(server *srv, const follower_stats *fs)
{
    if (fs->behind_retention) return fs->chain_last_txn > fs->txn ? fs->chain_last_txn - fs->txn : 0;
    if (!srv->lease) return 0;
    lease_keeper_status ls;
    lease_keeper_get(srv->lease, &ls);
    return ls.state == LEASE_STANDBY && ls.seen.txn > fs->txn ? ls.seen.txn - fs->txn : 0;
}

void server_role_status(server *srv, json_writer *w)
{
    const char *role = server_role_name(srv);
    json_write_key(w, "role", 4);
    json_write_string(w, role, strlen(role));
    if (srv->follower) {
        follower_stats fs;
        follower_get_stats(srv->follower, &fs);
        json_write_key(w, "follower", 8);
        json_write_object_begin(w);
        const server_json_field f[] = {
            { "txn", fs.txn }, { "segment", fs.segment }, { "segment_ms", fs.segment_ms },
            { "lag_txns", server_follower_lag_txns(srv, &fs) }, { "last_poll_ms", fs.last_poll_ms },
            { "polls", fs.polls }, { "segments", fs.segments }, { "records", fs.records },
            { "poll_errors", fs.poll_errors },
        };
        server_json_fields(w, f, sizeof f / sizeof *f);
        json_write_key(w, "lag_s", 5);
        json_write_double(w, (double)fs.lag_ms / 1000.0);
        json_write_key(w, "poll_ok", 7);
        json_write_bool(w, fs.status == HANU_OK);
        json_write_key(w, "behind_retention", 16);
        json_write_bool(w, fs.behind_retention);
        if (fs.status != HANU_OK) {
            json_write_key(w, "poll_error", 10);
            json_write_string(w, fs.message, strlen(fs.message));
        }
        json_write_object_end(w);
    }
    if (srv->lease) {
        lease_keeper_status ls;
        lease_keeper_get(srv->lease, &ls);
        static const char *states[] = { "standby", "promoting", "holding", "lost", "failed" };
        json_write_key(w, "lease", 5);
        json_write_object_begin(w);
        json_write_key(w, "state", 5);
        json_write_string(w, states[ls.state], strlen(states[ls.state]));
        json_write_key(w, "holder", 6);
        json_write_string(w, ls.seen.holder, strlen(ls.seen.holder));
        json_write_key(w, "leader", 6);
        if (ls.seen.url[0]) json_write_string(w, ls.seen.url, strlen(ls.seen.url));
        else json_write_null(w);
        const server_json_field f[] = {
            { "term", ls.seen.term }, { "expires_ms", ls.seen.expires_ms }, { "renewals", ls.renewals },
            { "renew_failures", ls.renew_failures },
        };
        server_json_fields(w, f, sizeof f / sizeof *f);
        json_write_object_end(w);
    }
}
