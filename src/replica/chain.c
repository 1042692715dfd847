/*
 * chain: the bucket's segments back into a store (chain.h). Segments are fetched in
 * batches of parallel gets (one thread a segment), the batch growing from 1 to
 * prefetch while segments keep coming, so an idle follower's poll costs one get.
 */
#include "replica/chain.h"
#include "replica/manifest.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN_PREFETCH_MAX 64

struct chain_reader {
    bucket *b;
    store *s;
    chain_options o;
    int positioned, stopped;
    segment_chain chain;
    uint32_t batch;                 /* segments asked for at once now */
    uint64_t idle_polls;            /* polls in a row that found nothing */
    chain_progress p;
    store_change *changes;          /* one record's entries, reused */
    size_t changes_cap;
};

void chain_options_default(chain_options *o)
{
    memset(o, 0, sizeof *o);
    o->prefetch = 4;
}

static int say(char *err, size_t errcap, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int say(char *err, size_t errcap, int rc, const char *fmt, ...)
{
    if (err && errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* The segment format's messages mostly name the segment already ("segment 3: ..."). */
static int name_segment(char *err, size_t errcap, int rc, uint64_t seq, const char *why)
{
    char prefix[48];
    snprintf(prefix, sizeof prefix, "segment %" PRIu64 ":", seq);
    if (strncmp(why, prefix, strlen(prefix)) == 0) return say(err, errcap, rc, "%s", why);
    return say(err, errcap, rc, "%s %s", prefix, why);
}

int chain_reader_open(bucket *b, store *s, const chain_options *o, chain_reader **out)
{
    chain_reader *r = calloc(1, sizeof *r);
    if (!r) return HANU_ERR_NOMEM;
    r->b = b;
    r->s = s;
    if (o) r->o = *o;
    else chain_options_default(&r->o);
    if (r->o.prefetch == 0) r->o.prefetch = 1;
    if (r->o.prefetch > CHAIN_PREFETCH_MAX) r->o.prefetch = CHAIN_PREFETCH_MAX;
    r->batch = 1;
    *out = r;
    return HANU_OK;
}

void chain_reader_close(chain_reader *r)
{
    if (!r) return;
    free(r->changes);
    free(r);
}

int chain_reader_stopped(const chain_reader *r) { return r->stopped; }
void chain_reader_progress(const chain_reader *r, chain_progress *out) { *out = r->p; }
uint64_t chain_reader_next_sequence(const chain_reader *r) { return r->positioned ? r->chain.next_sequence : 0; }

/* ---- fetching ---- */

typedef struct fetch {
    bucket *b;
    uint64_t sequence;
    int rc;
    hanu_buf obj;
    char err[256];
} fetch;

static void *fetch_one(void *arg)
{
    fetch *f = arg;
    char key[SEGMENT_KEY_SIZE];
    segment_key(f->sequence, key);
    f->rc = bucket_get(f->b, key, &f->obj, NULL, f->err, sizeof f->err);
    return NULL;
}

/* Gets segments first..first+n-1 in parallel into fs (the first on this thread). */
static void fetch_batch(bucket *b, uint64_t first, fetch *fs, uint32_t n)
{
    pthread_t threads[CHAIN_PREFETCH_MAX];
    int started[CHAIN_PREFETCH_MAX] = { 0 };
    for (uint32_t i = 0; i < n; i++) {
        memset(&fs[i], 0, sizeof fs[i]);
        fs[i].b = b;
        fs[i].sequence = first + i;
    }
    for (uint32_t i = 1; i < n; i++) started[i] = pthread_create(&threads[i], NULL, fetch_one, &fs[i]) == 0;
    fetch_one(&fs[0]);
    for (uint32_t i = 1; i < n; i++) {
        if (started[i]) pthread_join(threads[i], NULL);
        else fetch_one(&fs[i]);
    }
}

/* ---- where to start ---- */

typedef struct listing {
    uint64_t *seqs;
    size_t n, cap;
    int nomem;
} listing;

static int note_sequence(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    listing *l = ctx;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK || seq == 0) return 0;   /* strays are audit's */
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        uint64_t *n = realloc(l->seqs, cap * sizeof *n);
        if (!n) { l->nomem = 1; return 1; }
        l->seqs = n;
        l->cap = cap;
    }
    l->seqs[l->n++] = seq;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The header of segment seq, fully verified; *bytes counts what was fetched. */
static int read_segment_header(bucket *b, uint64_t seq, segment_header *h, uint64_t *bytes, char *err,
                               size_t errcap)
{
    fetch f;
    fetch_batch(b, seq, &f, 1);
    int rc = f.rc;
    if (rc == HANU_OK) {
        char why[200];
        rc = segment_read_header(f.obj.data, f.obj.len, h, why, sizeof why);
        if (rc) name_segment(err, errcap, rc, seq, why);
        else if (h->sequence != seq)
            rc = say(err, errcap, HANU_ERR_CORRUPT, "segment %" PRIu64 ": the object says it is segment %"
                     PRIu64 " (reordered or copied)", seq, h->sequence);
    } else {
        say(err, errcap, rc, "segment %" PRIu64 ": %s", seq, f.err);
    }
    *bytes += f.obj.len;
    hanu_buf_free(&f.obj);
    return rc;
}

static int read_header(chain_reader *r, uint64_t seq, segment_header *h, char *err, size_t errcap)
{
    return read_segment_header(r->b, seq, h, &r->p.bytes, err, errcap);
}

int chain_last_segment(bucket *b, segment_header *h, char *err, size_t errcap)
{
    listing l = { 0 };
    int rc = bucket_list(b, SEGMENT_KEY_PREFIX, note_sequence, &l, err, errcap);
    if (rc == HANU_OK && l.nomem) rc = HANU_ERR_NOMEM;
    uint64_t last = 0, bytes = 0;
    for (size_t i = 0; rc == HANU_OK && i < l.n; i++) last = HANU_MAX(last, l.seqs[i]);
    free(l.seqs);
    if (rc) return rc;
    if (!last) return say(err, errcap, HANU_ERR_NOT_FOUND, "the bucket holds no segment");
    return read_segment_header(b, last, h, &bytes, err, errcap);
}

/* An empty store starts at segment 1. A store holding txns up to L starts at the
   last segment whose first txn is at most L + 1, found by binary search; its own
   prev_hash anchors the chain (what came before is the store's). */
static int position(chain_reader *r, char *err, size_t errcap)
{
    uint64_t held = store_last_txn(r->s);
    segment_chain_init(&r->chain);
    if (held == 0) {
        r->positioned = 1;
        return HANU_OK;
    }
    listing l = { 0 };
    int rc = bucket_list(r->b, SEGMENT_KEY_PREFIX, note_sequence, &l, err, errcap);
    if (rc == HANU_OK && l.nomem) rc = HANU_ERR_NOMEM;
    if (rc) { free(l.seqs); return rc; }
    if (l.n == 0) {
        free(l.seqs);
        return say(err, errcap, HANU_ERR_MISMATCH, "the store holds txns up to %" PRIu64
                   " but the bucket holds no segment: it was not built from this bucket", held);
    }
    qsort(l.seqs, l.n, sizeof *l.seqs, cmp_u64);
    size_t lo = 0, hi = l.n;            /* the answer is in [lo, hi) */
    segment_header h, found = { 0 };
    int have = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        rc = read_header(r, l.seqs[mid], &h, err, errcap);
        if (rc) break;
        if (h.first_txn <= held + 1) { found = h; have = 1; lo = mid + 1; }
        else hi = mid;
    }
    free(l.seqs);
    if (rc) return rc;
    if (!have)
        return say(err, errcap, HANU_ERR_NOT_FOUND, "the store holds txns up to %" PRIu64 " but the "
                   "bucket's oldest segment starts above txn %" PRIu64 ": the segments between were "
                   "removed (retention); start from a snapshot", held, held + 1);
    if (found.last_txn < held)
        return say(err, errcap, HANU_ERR_MISMATCH, "the store holds txns up to %" PRIu64 " but segment %"
                   PRIu64 " ends at txn %" PRIu64 " and no segment starts at or below txn %" PRIu64
                   ": this data directory holds txns the bucket does not", held, found.sequence,
                   found.last_txn, held + 1);
    if (found.last_txn == held) {   /* the store ends where a segment does: start after it */
        r->chain.next_sequence = found.sequence + 1;
        memcpy(r->chain.prev_hash, found.hash, SEGMENT_HASH_SIZE);
        r->chain.last_txn = found.last_txn;
    } else {
        r->chain.next_sequence = found.sequence;
        memcpy(r->chain.prev_hash, found.prev_hash, SEGMENT_HASH_SIZE);
        r->chain.last_txn = found.first_txn - 1;
    }
    r->positioned = 1;
    return HANU_OK;
}

/* ---- applying ---- */

static int replay_record(chain_reader *r, const segment_record *recs, size_t n)
{
    if (n > r->changes_cap) {
        store_change *c = realloc(r->changes, n * sizeof *c);
        if (!c) return HANU_ERR_NOMEM;
        r->changes = c;
        r->changes_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        r->changes[i] = (store_change){ recs[i].txn, recs[i].op, recs[i].db, recs[i].key, recs[i].key_len,
                                        recs[i].value, recs[i].value_len };
    int rc = store_replay(r->s, recs[0].txn, r->changes, n);
    if (rc == HANU_ERR_EXISTS) { r->p.skipped++; return HANU_OK; }
    if (rc == HANU_OK) r->p.records++;
    return rc;
}

/* Decodes, links and replays one fetched segment. */
static int apply(chain_reader *r, const hanu_buf *obj, uint64_t seq, char *err, size_t errcap)
{
    segment sg;
    char why[256];
    int rc = segment_decode(obj->data, obj->len, &sg, why, sizeof why);
    if (rc) return name_segment(err, errcap, rc, seq, why);
    if (sg.header.sequence != seq) {
        rc = say(err, errcap, HANU_ERR_CORRUPT, "segment %" PRIu64 ": the object says it is segment %" PRIu64
                 " (reordered or copied)", seq, sg.header.sequence);
    } else if (r->o.stop_time_ms && sg.header.timestamp_ms > r->o.stop_time_ms) {
        r->stopped = 1;
    } else if ((rc = segment_chain_next(&r->chain, &sg.header, why, sizeof why)) != HANU_OK) {
        say(err, errcap, rc, "segment %" PRIu64 ": %s", seq, why);
    } else {
        uint32_t i = 0, n = sg.header.record_count;
        while (rc == HANU_OK && i < n && !r->stopped) {
            uint32_t j = i + 1;
            while (j < n && sg.records[j].txn == sg.records[i].txn) j++;
            if (r->o.stop_txn && sg.records[i].txn > r->o.stop_txn) r->stopped = 1;
            else rc = replay_record(r, &sg.records[i], j - i);
            i = j;
        }
        if (rc) say(err, errcap, rc, "segment %" PRIu64 ": replaying: %s", seq, hanu_status_str(rc));
        if (rc == HANU_OK) {
            r->p.segments++;
            r->p.sequence = seq;
            r->p.last_timestamp_ms = sg.header.timestamp_ms;
            r->p.last_txn = store_last_txn(r->s);
            if (r->o.stop_txn && sg.header.last_txn >= r->o.stop_txn) r->stopped = 1;
        }
    }
    segment_free(&sg);
    return rc;
}

int chain_reader_poll(chain_reader *r, uint64_t *applied, char *err, size_t errcap)
{
    *applied = 0;
    if (err && errcap) err[0] = 0;
    if (r->stopped) return HANU_OK;
    int rc = HANU_OK;
    if (!r->positioned && (rc = position(r, err, errcap)) != HANU_OK) return rc;
    fetch *fs = calloc(r->o.prefetch, sizeof *fs);
    if (!fs) return HANU_ERR_NOMEM;
    for (;;) {
        uint32_t n = r->batch;
        uint64_t first = r->chain.next_sequence, t0 = hanu_now_ns();
        fetch_batch(r->b, first, fs, n);
        r->p.fetch_ns += hanu_now_ns() - t0;
        uint32_t got = 0;
        while (got < n && fs[got].rc == HANU_OK) got++;
        for (uint32_t i = got; rc == HANU_OK && i < n; i++) {
            if (fs[i].rc == HANU_OK)   /* a segment after a missing one: a hole in the chain */
                rc = say(err, errcap, HANU_ERR_CORRUPT, "segment %" PRIu64 " is missing but segment %" PRIu64
                         " exists", first + got, fs[i].sequence);
            else if (fs[i].rc != HANU_ERR_NOT_FOUND)
                rc = say(err, errcap, fs[i].rc, "segment %" PRIu64 ": %s", fs[i].sequence, fs[i].err);
        }
        t0 = hanu_now_ns();
        for (uint32_t i = 0; rc == HANU_OK && i < got && !r->stopped; i++) {
            r->p.bytes += fs[i].obj.len;
            rc = apply(r, &fs[i].obj, fs[i].sequence, err, errcap);
            if (rc == HANU_OK && !r->stopped) {
                (*applied)++;
                if (r->o.progress) r->o.progress(r->o.ctx, &r->p);
            }
        }
        r->p.replay_ns += hanu_now_ns() - t0;
        for (uint32_t i = 0; i < n; i++) hanu_buf_free(&fs[i].obj);
        if (rc || r->stopped || got < n) {
            r->batch = got == n ? r->batch : 1;
            break;
        }
        r->batch = HANU_MIN(r->batch * 2, r->o.prefetch);
    }
    free(fs);
    /* Nothing new: now and then make sure it is the end and not a hole (segment n
       missing while n + 1 is there), without a list request on every idle poll. */
    if (rc == HANU_OK && *applied == 0 && !r->stopped && r->idle_polls++ % 10 == 0) {
        char key[SEGMENT_KEY_SIZE];
        segment_key(r->chain.next_sequence + 1, key);
        bucket_object_info info;
        int hr = bucket_head(r->b, key, &info, NULL, 0);
        if (hr == HANU_OK) rc = chain_reader_check_end(r, err, errcap);   /* a hole, or retention */
    }
    if (*applied) r->idle_polls = 0;
    return rc;
}

static int note_newest_manifest(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    uint64_t t;
    if (manifest_key_parse(key, &t) == HANU_OK && t > *(uint64_t *)ctx) *(uint64_t *)ctx = t;
    return 0;
}

/* The newest manifest's txn and replay sequence (0 and 0: none, or it does not decode). */
static int newest_manifest(bucket *b, uint64_t *txn, uint64_t *seq, char *err, size_t errcap)
{
    uint64_t newest = 0;
    *txn = *seq = 0;
    int rc = bucket_list(b, MANIFEST_KEY_PREFIX, note_newest_manifest, &newest, err, errcap);
    if (rc || !newest) return rc;
    char key[MANIFEST_KEY_SIZE];
    manifest_key(newest, key);
    hanu_buf obj = { 0 };
    manifest m;
    rc = bucket_get(b, key, &obj, NULL, err, errcap);
    if (rc == HANU_OK && manifest_decode(obj.data, obj.len, &m, NULL, 0) == HANU_OK) {
        *txn = m.txn;
        *seq = m.replay_sequence;
        manifest_free(&m);
    }
    hanu_buf_free(&obj);
    return rc == HANU_ERR_NOT_FOUND ? HANU_OK : rc;   /* deleted meanwhile: none */
}

/* The segments listed around the reader's next sequence. */
typedef struct around {
    uint64_t next, below, at, first_above, last;
} around;

static int note_around(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    around *a = ctx;
    uint64_t seq;
    if (segment_key_parse(key, &seq) != HANU_OK || seq == 0) return 0;
    if (seq < a->next) a->below++;
    else if (seq == a->next) a->at = 1;
    else {
        if (!a->first_above || seq < a->first_above) a->first_above = seq;
        if (seq > a->last) a->last = seq;
    }
    return 0;
}

int chain_reader_check_end(chain_reader *r, char *err, size_t errcap)
{
    if (!r->positioned || r->stopped) return HANU_OK;
    uint64_t next = r->chain.next_sequence;
    around a = { .next = next };
    int rc = bucket_list(r->b, SEGMENT_KEY_PREFIX, note_around, &a, err, errcap);
    if (rc) return rc;
    if (a.at || !a.first_above) return HANU_OK;   /* the end, or the next one came meanwhile */
    /* Retention deletes the chain's start in order, and only below a manifest's replay
       sequence: nothing is left below the gap, and a snapshot replays from past it. An
       empty store (a restore below every manifest) is no node left behind: a hole, as
       ever. */
    uint64_t snap_txn = 0, replay = 0, held = store_last_txn(r->s);
    if (!a.below && held && (rc = newest_manifest(r->b, &snap_txn, &replay, err, errcap)) != HANU_OK) return rc;
    if (a.below || !held || replay <= next)
        return say(err, errcap, HANU_ERR_CORRUPT, "the chain ends at segment %" PRIu64 " (segment %" PRIu64
                   " is missing) but segment %" PRIu64 " exists", next - 1, next, a.first_above);
    segment_header h;
    uint64_t bytes = 0;
    if (read_segment_header(r->b, a.last, &h, &bytes, NULL, 0) == HANU_OK) {
        r->p.chain_last_sequence = h.sequence;
        r->p.chain_last_txn = h.last_txn;
    }
    return say(err, errcap, HANU_ERR_NOT_FOUND, "behind retention: applied up to segment %" PRIu64 " (txn %" PRIu64
               ") but the bucket's chain now starts at segment %" PRIu64 " and ends at segment %" PRIu64
               "; the segments between were removed after the snapshot of txn %" PRIu64 " (it replays from "
               "segment %" PRIu64 "): this node must re-boot from the newest snapshot", next - 1, held,
               a.first_above, a.last, snap_txn, replay);
}
