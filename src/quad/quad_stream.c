/*
 * quad_stream.c: the commit stream of the facts kernel. A stream reads the
 * log back, frame by frame, through a window of about 1 MiB, and delivers
 * each append (its facts decoded from the frame) and each retire (the ids it
 * really retired, with the retired facts' lanes read by a gather at the epoch
 * before) once the commit is durable, or written with QUAD_STREAM_COMMITTED.
 *
 * Safe without locks against the writer: only frames of epochs at or below
 * the watermark are used, and the window never holds bytes at or past the
 * written log end it read before its pread (qf_written stores the end before
 * the epoch), so no frame is read while it is being written. Checkpoint parts
 * between commits are skipped by their header.
 *
 * Finding an epoch: the chunk directory gives the payload offset of every
 * append's first chunk, hence its frame; from the last append at or before
 * the epoch the stream walks forward over the retire frames between.
 */
#include "quad/quad_internal.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define STREAM_WINDOW (1u << 20)
#define STREAM_FLAGS (QUAD_LANES_ALL | QUAD_STREAM_COMMITTED | QUAD_STREAM_HOLD)

typedef struct stream_mb {   /* one lane of one microblock of the chunk being decoded */
    codec_desc d;
    const uint8_t *p;
    uint32_t rows;
} stream_mb;

struct quad_stream {
    quad *q;
    uint64_t next;             /* next epoch to deliver */
    uint64_t off;              /* its frame (or a frame before it), when located */
    int located;
    unsigned lanes;
    int committed;
    int held;
    _Atomic uint64_t held_pos; /* next, for quad_stream_floor */
    struct quad_stream *held_next;
    uint8_t *win;              /* the window: file bytes [win_off, win_off + win_len) */
    size_t win_cap;
    uint64_t win_off;
    size_t win_len;
    quad_fact *facts;
    size_t facts_cap;
    quad_id *ids;
    size_t ids_cap;
    stream_mb *mbs;
    size_t mbs_cap;
};

/* ---- wake-ups ---- */

void quad_stream_notify(quad *q)
{
    /* pairs with the fence in wait_limit: either the waiter sees the new
     * watermark or this sees the waiter */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&q->stream_sleepers, memory_order_relaxed)) return;
    atomic_fetch_add(&q->stream_seq, 1);
    (void)syscall(SYS_futex, &q->stream_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static uint64_t stream_limit(const quad_stream *s)
{
    return s->committed ? atomic_load_explicit(&s->q->written_epoch, memory_order_acquire)
                        : atomic_load_explicit(&s->q->durable, memory_order_acquire);
}

/* Waits until the watermark reaches s->next; 1 when it did, 0 on timeout. */
static int wait_limit(quad_stream *s, int timeout_ms)
{
    quad *q = s->q;
    if (stream_limit(s) >= s->next) return 1;
    if (timeout_ms == 0) return 0;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : hanu_now_ns() + (uint64_t)timeout_ms * 1000000u;
    int ok = 0;
    atomic_fetch_add(&q->stream_sleepers, 1);
    for (;;) {
        atomic_thread_fence(memory_order_seq_cst);
        uint32_t seen = atomic_load(&q->stream_seq);
        if (stream_limit(s) >= s->next) { ok = 1; break; }
        uint64_t now = hanu_now_ns();
        if (now >= deadline) break;
        struct timespec ts, *tp = NULL;
        if (deadline != UINT64_MAX) {
            uint64_t left = deadline - now;
            ts.tv_sec = (time_t)(left / 1000000000u);
            ts.tv_nsec = (long)(left % 1000000000u);
            tp = &ts;
        }
        (void)syscall(SYS_futex, &q->stream_seq, FUTEX_WAIT_PRIVATE, seen, tp, NULL, 0);
    }
    atomic_fetch_sub(&q->stream_sleepers, 1);
    return ok;
}

/* ---- held floors ---- */

uint64_t quad_stream_floor_locked(quad *q, uint64_t *held)
{
    uint64_t floor = 0, n = 0;
    for (quad_stream *s = q->held; s; s = s->held_next, n++) {
        uint64_t p = atomic_load_explicit(&s->held_pos, memory_order_relaxed);
        if (floor == 0 || p < floor) floor = p;
    }
    if (held) *held = n;
    return floor;
}

uint64_t quad_stream_floor(quad *q, uint64_t *held)
{
    pthread_mutex_lock(&q->stream_mu);
    uint64_t floor = quad_stream_floor_locked(q, held);
    pthread_mutex_unlock(&q->stream_mu);
    return floor;
}

/* ---- the window ---- */

/* Makes [off, off + len) available at s->win + (off - s->win_off), with
 * CODEC_SLACK zero bytes after the valid part. Reads only below the written
 * log end (loaded before the read). 1 when the range lies past it. */
static int window_get(quad_stream *s, uint64_t off, size_t len, const uint8_t **p)
{
    if (off >= s->win_off && off - s->win_off <= s->win_len && s->win_len - (off - s->win_off) >= len) {
        *p = s->win + (off - s->win_off);
        return 0;
    }
    uint64_t end = atomic_load_explicit(&s->q->written_off, memory_order_acquire);
    if (off > end || end - off < len) return 1;
    size_t want = len > STREAM_WINDOW ? len : STREAM_WINDOW;
    if (end - off < want) want = (size_t)(end - off);
    if (want + CODEC_SLACK > s->win_cap) {
        uint8_t *w = malloc(want + CODEC_SLACK);
        if (!w) return HANU_ERR_NOMEM;
        free(s->win);
        s->win = w;
        s->win_cap = want + CODEC_SLACK;
    }
    s->win_off = off;
    s->win_len = 0;
    if (quad_pread(s->q, s->win, want, off) != 0) return HANU_ERR_IO;
    memset(s->win + want, 0, CODEC_SLACK);
    s->win_len = want;
    *p = s->win;
    return 0;
}

/* The frame header at off: checked (checksum, magic, version), or
 * HANU_ERR_CORRUPT. */
static int header_at(quad_stream *s, uint64_t off, unsigned *type, uint64_t *epoch, uint64_t *aux,
                     size_t *body)
{
    const uint8_t *h;
    int rc = window_get(s, off, QF_FRAME_HDR, &h);
    if (rc) return rc > 0 ? HANU_ERR_CORRUPT : rc;
    if (hanu_get_u32(h) != hanu_checksum32(h + 4, QF_FRAME_HDR - 4) ||
        hanu_get_u32(h + 4) != QF_FRAME_MAGIC || h[13] != QF_VERSION)
        return HANU_ERR_CORRUPT;
    *type = h[12];
    *epoch = hanu_get_u64(h + 16);
    *aux = hanu_get_u64(h + 24);
    *body = hanu_get_u32(h + 8);
    return *body > QF_MAX_BODY ? HANU_ERR_CORRUPT : 0;
}

/* ---- finding an epoch's frame ---- */

/* Bytes of a chunk's descriptors in the file (lane-major; base unless raw). */
static size_t descriptor_bytes(const quad_chunk *ch)
{
    size_t n = 0;
    for (uint32_t i = 0; i < 4 * ch->nmb; i++) n += ch->mb[i].code == CODEC_RAW ? 1 : 9;
    return n;
}

/* A frame at or before the frame of epoch e: that of the last append at or
 * before e (its first chunk's payload offset minus the chunk record header,
 * the descriptors, the chunk count and the frame header), else the log start. */
static uint64_t frame_before(quad *q, uint64_t e)
{
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_acquire);
    uint64_t lo = 0, hi = nch;   /* first chunk with epoch > e */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (quad_chunk_at(q, mid)->epoch <= e) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return QF_HEADER_SIZE;
    uint64_t ae = quad_chunk_at(q, lo - 1)->epoch, c = lo - 1;
    while (c > 0 && quad_chunk_at(q, c - 1)->epoch == ae) c--;   /* the append's first chunk */
    /* the cleaner swaps a chunk's payload description under the write lock */
    pthread_rwlock_rdlock(&q->rlock);
    uint64_t at = quad_append_at(quad_chunk_at(q, c));
    pthread_rwlock_unlock(&q->rlock);
    return at;
}

/* Where the frame of ch's append starts when ch is its first chunk: the
 * payload offset minus the record header, the descriptors, the chunk count
 * and the frame header. A relocated chunk keeps the figure of its append
 * record (its payload now lies in a relocation frame). */
uint64_t quad_append_at(const quad_chunk *ch)
{
    if (ch->live) return ch->live->append_at;
    uint64_t back = QF_FRAME_HDR + 4 + QF_CHUNK_HDR + descriptor_bytes(ch);
    return ch->off >= QF_HEADER_SIZE + back ? ch->off - back : QF_HEADER_SIZE;
}

/* ---- decoding ---- */

static int reserve(void **p, size_t *cap, size_t need, size_t elem, int zeroed)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need) n *= 2;
    void *np = zeroed ? calloc(n, elem) : malloc(n * elem);
    if (!np) return HANU_ERR_NOMEM;
    free(*p);   /* nothing to keep: lanes outside the mask stay zero from calloc */
    *p = np;
    *cap = n;
    return 0;
}

/* Decodes an append body's chunk records into s->facts / s->ids. */
static int decode_append(quad_stream *s, const uint8_t *p, const uint8_t *end, uint64_t c0, size_t *n_out)
{
    quad *q = s->q;
    if (end - p < 4) return HANU_ERR_CORRUPT;
    uint32_t nch = hanu_get_u32(p);
    p += 4;
    if (nch == 0 || (uint64_t)nch * QF_CHUNK_HDR > (uint64_t)(end - p)) return HANU_ERR_CORRUPT;
    size_t bound = (size_t)nch * q->chunk_rows;
    if (bound > QUAD_MAX_BATCH + (size_t)q->chunk_rows) return HANU_ERR_CORRUPT;
    if (reserve((void **)&s->ids, &s->ids_cap, bound, sizeof *s->ids, 0) ||
        (s->lanes && reserve((void **)&s->facts, &s->facts_cap, bound, sizeof *s->facts, 1)))
        return HANU_ERR_NOMEM;
    size_t n = 0;
    for (uint32_t k = 0; k < nch; k++) {
        if (end - p < QF_CHUNK_HDR) return HANU_ERR_CORRUPT;
        uint64_t cno = hanu_get_u64(p);
        uint32_t rows = hanu_get_u32(p + 8), plen = hanu_get_u32(p + 12);
        if (cno != c0 + k || rows == 0 || rows > q->chunk_rows) return HANU_ERR_CORRUPT;
        p += QF_CHUNK_HDR;
        uint32_t nmb = (rows + q->mb_rows - 1) >> q->mb_shift;
        /* descriptors first (lane-major), the payload follows them */
        const uint8_t *d = p;
        for (uint32_t i = 0; i < 4 * nmb; i++) {
            if (d >= end || !codec_code_valid(*d)) return HANU_ERR_CORRUPT;
            d += *d == CODEC_RAW ? 1 : 9;
        }
        if (d > end || (uint64_t)(end - d) < plen) return HANU_ERR_CORRUPT;
        if (reserve((void **)&s->mbs, &s->mbs_cap, 4 * (size_t)nmb, sizeof *s->mbs, 0)) return HANU_ERR_NOMEM;
        const uint8_t *pay = d, *pend = d + plen;
        d = p;
        for (unsigned l = 0; l < 4; l++) {   /* where each microblock of each lane is */
            for (uint32_t m = 0; m < nmb; m++) {
                stream_mb *x = &s->mbs[(size_t)m * 4 + l];
                x->d = (codec_desc){ *d, 0 };
                if (x->d.code != CODEC_RAW) x->d.base = hanu_get_u64(d + 1);
                d += x->d.code == CODEC_RAW ? 1 : 9;
                uint32_t start = m << q->mb_shift;
                x->rows = rows - start < q->mb_rows ? rows - start : q->mb_rows;
                size_t sz = codec_payload_size(x->d.code, x->rows);
                if ((size_t)(pend - pay) < sz) return HANU_ERR_CORRUPT;
                x->p = pay;
                pay += sz;
            }
        }
        if (pay != pend) return HANU_ERR_CORRUPT;
        /* microblock by microblock, all lanes: the rows being written stay in
         * the CPU's cache (lane by lane, each lane swept the whole output:
         * 78 against 185-241 M facts/s for commits of 65 536 structured facts) */
        for (uint32_t m = 0; m < nmb; m++)
            for (unsigned l = 0; l < 4; l++) {
                if (!(s->lanes & (1u << l))) continue;
                const stream_mb *x = &s->mbs[(size_t)m * 4 + l];
                /* the window has CODEC_SLACK bytes after its valid part */
                codec_unpack(x->d, x->p, 0, x->rows, &s->facts[n + (m << q->mb_shift)].lane[l], 4);
            }
        for (uint32_t i = 0; i < rows; i++) s->ids[n + i] = QUAD_ID(cno, i);
        n += rows;
        p = pend;
    }
    if (p != end) return HANU_ERR_CORRUPT;
    *n_out = n;
    return 0;
}

static int cmp_id(const void *a, const void *b)
{
    quad_id x = *(const quad_id *)a, y = *(const quad_id *)b;
    return x < y ? -1 : x > y;
}

/* Decodes a retire body's ids, keeps those this commit retired (their retire
 * epoch is e: an id retired before keeps its epoch), ascending and once each,
 * and reads their lanes as they were at e - 1. */
static int decode_retire(quad_stream *s, const uint8_t *p, const uint8_t *end, uint64_t e, size_t *n_out)
{
    quad *q = s->q;
    if (end - p < 4) return HANU_ERR_CORRUPT;
    uint32_t n = hanu_get_u32(p);
    p += 4;
    if (n == 0 || n > QUAD_MAX_BATCH) return HANU_ERR_CORRUPT;
    if (reserve((void **)&s->ids, &s->ids_cap, n, sizeof *s->ids, 0)) return HANU_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i += QF_RETIRE_BLOCK) {
        uint32_t k = n - i < QF_RETIRE_BLOCK ? n - i : QF_RETIRE_BLOCK;
        if (qf_ids_block(&p, end, k, s->ids + i) != 0) return HANU_ERR_CORRUPT;
    }
    if (p != end) return HANU_ERR_CORRUPT;
    int sorted = 1;
    for (uint32_t i = 1; i < n && sorted; i++) sorted = s->ids[i - 1] < s->ids[i];
    if (!sorted) qsort(s->ids, n, sizeof *s->ids, cmp_id);
    uint64_t nch = atomic_load_explicit(&q->nchunks, memory_order_acquire);
    size_t kept = 0;
    pthread_rwlock_rdlock(&q->rlock);
    for (uint32_t i = 0; i < n; i++) {
        quad_id id = s->ids[i];
        if (kept && s->ids[kept - 1] == id) continue;
        uint64_t c = QUAD_ID_CHUNK(id);
        if (c >= nch) continue;
        const quad_chunk *ch = quad_chunk_at(q, c);
        if (QUAD_ID_SLOT(id) >= ch->rows || !ch->ret || quad_retire_epoch(ch->ret, QUAD_ID_SLOT(id)) != e)
            continue;
        s->ids[kept++] = id;
    }
    pthread_rwlock_unlock(&q->rlock);
    *n_out = kept;
    if (!s->lanes || kept == 0) return 0;
    if (reserve((void **)&s->facts, &s->facts_cap, kept, sizeof *s->facts, 1)) return HANU_ERR_NOMEM;
    /* e >= 2: a retire names ids an earlier append made */
    int rc = quad_gather(q, e - 1, s->ids, kept, s->lanes, s->facts, NULL);
    return rc == HANU_ERR_NOT_FOUND ? HANU_ERR_CORRUPT : rc;
}

/* ---- the calls ---- */

int quad_stream_open(quad *q, uint64_t from_epoch, unsigned flags, quad_stream **out)
{
    if (!q || !out || (flags & ~STREAM_FLAGS) || quad_forked(q)) return HANU_ERR_INVALID;
    *out = NULL;
    if (from_epoch == 0) from_epoch = 1;
    if (from_epoch < atomic_load(&q->log_floor)) return HANU_ERR_GONE;
    if (from_epoch > atomic_load(&q->epoch) + 1) return HANU_ERR_NOT_FOUND;
    quad_stream *s = calloc(1, sizeof *s);
    if (!s) return HANU_ERR_NOMEM;
    s->q = q;
    s->next = from_epoch;
    s->lanes = flags & QUAD_LANES_ALL;
    s->committed = (flags & QUAD_STREAM_COMMITTED) != 0;
    atomic_init(&s->held_pos, from_epoch);
    if (flags & QUAD_STREAM_HOLD) {
        s->held = 1;
        pthread_mutex_lock(&q->stream_mu);
        if (from_epoch < atomic_load(&q->log_floor)) {   /* a clean began meanwhile */
            pthread_mutex_unlock(&q->stream_mu);
            free(s);
            return HANU_ERR_GONE;
        }
        s->held_next = q->held;
        q->held = s;
        pthread_mutex_unlock(&q->stream_mu);
    }
    *out = s;
    return 0;
}

static int stream_step(quad_stream *s, quad_commit *c);

int quad_stream_next(quad_stream *s, int timeout_ms, quad_commit *c)
{
    if (!s || !c || quad_forked(s->q)) return HANU_ERR_INVALID;
    /* a clean moved the floor past the position: its frames may be punched */
    if (s->next < atomic_load(&s->q->log_floor)) return HANU_ERR_GONE;
    if (!wait_limit(s, timeout_ms)) return 0;
    int rc = stream_step(s, c);
    if (rc < 0 && s->next < atomic_load(&s->q->log_floor)) return HANU_ERR_GONE;
    return rc;
}

static int stream_step(quad_stream *s, quad_commit *c)
{
    if (!s->located) {
        s->off = frame_before(s->q, s->next);
        s->located = 1;
    }
    for (;;) {
        unsigned type;
        uint64_t epoch, aux;
        size_t body;
        int rc = header_at(s, s->off, &type, &epoch, &aux, &body);
        if (rc) return rc;
        uint64_t len = QF_FRAME_HDR + (uint64_t)body;
        if (QF_IS_CKPT(type) || type == QF_T_RELOCATE || (epoch < s->next && (type == QF_T_APPEND || type == QF_T_RETIRE))) {
            s->off += len;   /* a checkpoint part, or a commit before the position */
            continue;
        }
        if (epoch != s->next || (type != QF_T_APPEND && type != QF_T_RETIRE)) return HANU_ERR_CORRUPT;
        const uint8_t *f;
        rc = window_get(s, s->off, (size_t)len, &f);
        if (rc) return rc > 0 ? HANU_ERR_CORRUPT : rc;
        const uint8_t *b = f + QF_FRAME_HDR, *end = b + body;
        if (hanu_get_u32(f + 32) != hanu_checksum32(b, body)) return HANU_ERR_CORRUPT;
        size_t n = 0;
        rc = type == QF_T_APPEND ? decode_append(s, b, end, aux, &n) : decode_retire(s, b, end, epoch, &n);
        if (rc) return rc;
        c->epoch = epoch;
        c->kind = type == QF_T_APPEND ? QUAD_COMMIT_APPEND : QUAD_COMMIT_RETIRE;
        c->n = n;
        c->ids = s->ids;
        c->facts = s->lanes ? s->facts : NULL;
        s->off += len;
        s->next++;
        atomic_store_explicit(&s->held_pos, s->next, memory_order_relaxed);
        return 1;
    }
}

uint64_t quad_stream_position(const quad_stream *s)
{
    return s ? s->next : 0;
}

void quad_stream_close(quad_stream *s)
{
    if (!s) return;
    if (s->held && !quad_forked(s->q)) {
        quad *q = s->q;
        pthread_mutex_lock(&q->stream_mu);
        for (quad_stream **pp = &q->held; *pp; pp = &(*pp)->held_next)
            if (*pp == s) { *pp = s->held_next; break; }
        pthread_mutex_unlock(&q->stream_mu);
    }
    free(s->win);
    free(s->facts);
    free(s->ids);
    free(s->mbs);
    free(s);
}
