/*
 * quad_clean.c: snapshot holds, the reclaim horizon and the cleaner of the
 * facts kernel. The cleaner rewrites chunks whose live fraction fell below a
 * threshold into relocation frames (kept rows only; a slot's row is its rank
 * among the kept slots, so FactIds never change), syncs, swaps each chunk's
 * payload description under the retirement lock, writes two checkpoints and
 * punches the old payload ranges. docs/QUAD.md ("The cleaner") has the steps
 * and why each is crash-safe.
 */
#include "quad/quad_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct quad_hold {
    quad *q;
    uint64_t epoch;
    struct quad_hold *next;
};

int quad_snapshot_hold(quad *q, uint64_t *epoch_out, quad_hold **out)
{
    if (!q || !epoch_out || !out || quad_forked(q)) return HANU_ERR_INVALID;
    *out = NULL;
    quad_hold *h = malloc(sizeof *h);
    if (!h) return HANU_ERR_NOMEM;
    h->q = q;
    /* under stream_mu: a clean computes its horizon under it too, so the
     * epoch held here is either seen by it or at least its horizon */
    pthread_mutex_lock(&q->stream_mu);
    h->epoch = atomic_load(&q->epoch);
    h->next = q->holds;
    q->holds = h;
    pthread_mutex_unlock(&q->stream_mu);
    *epoch_out = h->epoch;
    *out = h;
    return 0;
}

void quad_snapshot_release(quad_hold *h)
{
    if (!h) return;
    quad *q = h->q;
    if (!quad_forked(q)) {
        pthread_mutex_lock(&q->stream_mu);
        for (quad_hold **pp = &q->holds; *pp; pp = &(*pp)->next)
            if (*pp == h) { *pp = h->next; break; }
        pthread_mutex_unlock(&q->stream_mu);
    }
    free(h);
}

/* Oldest held snapshot (UINT64_MAX when none); stream_mu held. */
static uint64_t holds_min(quad *q, uint64_t *n_out)
{
    uint64_t m = UINT64_MAX, n = 0;
    for (quad_hold *h = q->holds; h; h = h->next, n++)
        if (h->epoch < m) m = h->epoch;
    if (n_out) *n_out = n;
    return m;
}

uint64_t quad_hold_floor(quad *q, uint64_t *held)
{
    pthread_mutex_lock(&q->stream_mu);
    uint64_t m = holds_min(q, held);
    pthread_mutex_unlock(&q->stream_mu);
    return m;
}

/* min(durable epoch, oldest held snapshot, lowest held stream position - 1);
 * stream_mu held. */
static uint64_t horizon_locked(quad *q)
{
    uint64_t h = atomic_load(&q->durable);
    uint64_t m = holds_min(q, NULL);
    if (m < h) h = m;
    uint64_t p = quad_stream_floor_locked(q, NULL);   /* positions are >= 1; 0: none */
    if (p && p - 1 < h) h = p - 1;
    return h;
}

uint64_t quad_horizon(quad *q)
{
    pthread_mutex_lock(&q->stream_mu);
    uint64_t h = horizon_locked(q);
    pthread_mutex_unlock(&q->stream_mu);
    return h;
}

/* ---- choosing ---- */

static int is_dropped(const quad_chunk *ch, uint32_t s, uint64_t h)
{
    if (ch->live && !((ch->live->bits[s >> 6] >> (s & 63)) & 1)) return 0;   /* dropped before */
    uint64_t e = ch->ret ? quad_retire_epoch(ch->ret, s) : 0;
    return e != 0 && e <= h;
}

/* Slots of ch a clean at h keeps (kept before and not retired at or below h),
 * and how many of them it would drop now. wlock held. */
static void chunk_counts(const quad_chunk *ch, uint64_t h, uint32_t *keep, uint32_t *drop)
{
    uint32_t kept = quad_prows(ch), d = 0;
    for (uint32_t s = 0; s < ch->rows; s++) d += (uint32_t)is_dropped(ch, s, h);
    *keep = kept - d;
    *drop = d;
}

/* ---- one chunk's relocation frame ---- */

#define CLEAN_GROUP_CHUNKS 256u
#define CLEAN_GROUP_BYTES (32u << 20)

typedef struct clean_buf {
    uint8_t *pay;          /* one chunk's payload as read */
    size_t pay_cap;
    quad_fact *rows;       /* its rows decoded */
    quad_fact *kept;
    uint8_t *frames;       /* the group's frames */
    size_t frames_cap, frames_len;
} clean_buf;

static int grow_bytes(void **p, size_t *cap, size_t need)
{
    if (*cap >= need) return 0;
    size_t nc = *cap ? *cap : 1u << 16;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc);
    if (!np) return HANU_ERR_NOMEM;
    *p = np;
    *cap = nc;
    return 0;
}

/* The new state of one chunk of the group, kept until the swap. */
typedef struct clean_item {
    uint64_t c;
    size_t frame_at;       /* frame offset within the group's buffer */
    quad_chunk tmp;        /* payload description (off relative to the frame) */
    quad_live *live;
    uint64_t old_off, old_len;
    uint64_t old_append;   /* epoch of the append frame holding the old payload; 0: a relocation frame */
} clean_item;

/* Reads and decodes ch's payload rows into b->rows (wlock held). */
static int chunk_read_rows(quad *q, const quad_chunk *ch, clean_buf *b)
{
    uint32_t prows = quad_prows(ch);
    size_t len = ch->lane_off[4];
    if (grow_bytes((void **)&b->pay, &b->pay_cap, len + CODEC_SLACK)) return HANU_ERR_NOMEM;
    if (len && quad_pread(q, b->pay, len, ch->off) != 0) return HANU_ERR_IO;
    memset(b->pay + len, 0, CODEC_SLACK);
    for (unsigned l = 0; l < 4; l++)
        for (uint32_t m = 0; m < ch->nmb; m++) {
            const quad_mb *mb = quad_mb_at(ch, l, m);
            codec_desc d = { mb->code, mb->base };
            codec_unpack(d, b->pay + mb->off, 0, quad_mb_rows(q, prows, m),
                         &b->rows[(size_t)m << q->mb_shift].lane[l], 4);
        }
    return 0;
}

/* Appends chunk c's relocation frame at horizon h to the group buffer:
 * u64 chunk, u64 horizon, u32 rows, u32 live, bitmap, chunk record. */
static int chunk_frame(quad *q, uint64_t c, uint64_t h, uint64_t epoch, clean_buf *b, clean_item *it)
{
    const quad_chunk *ch = quad_chunk_at(q, c);
    memset(it, 0, sizeof *it);
    it->c = c;
    it->old_off = ch->off;
    it->old_len = ch->lane_off[4];
    it->old_append = ch->live ? 0 : ch->epoch;
    int rc = chunk_read_rows(q, ch, b);
    if (rc) return rc;
    quad_live *L = qf_live_new(ch->rows);
    if (!L) return HANU_ERR_NOMEM;
    uint32_t live = 0;
    for (uint32_t s = 0; s < ch->rows; s++) {
        if ((ch->live && !((ch->live->bits[s >> 6] >> (s & 63)) & 1)) || is_dropped(ch, s, h)) continue;
        L->bits[s >> 6] |= UINT64_C(1) << (s & 63);
        b->kept[live++] = b->rows[quad_prow(ch, s)];
    }
    qf_live_rank(L);
    L->horizon = h;
    L->append_at = quad_append_at(ch);
    size_t head = 24 + (size_t)L->words * 8;
    size_t bound = QF_FRAME_HDR + head + (live ? qf_chunk_bound(q, live) : 0) + CODEC_SLACK;
    if (grow_bytes((void **)&b->frames, &b->frames_cap, b->frames_len + bound)) { free(L); return HANU_ERR_NOMEM; }
    uint8_t *f = b->frames + b->frames_len, *p = f + QF_FRAME_HDR;
    hanu_put_u64(p, c);
    hanu_put_u64(p + 8, h);
    hanu_put_u32(p + 16, ch->rows);
    hanu_put_u32(p + 20, live);
    for (uint32_t w = 0; w < L->words; w++) hanu_put_u64(p + 24 + 8 * (size_t)w, L->bits[w]);
    size_t body = head;
    if (live) {
        size_t rec = qf_chunk_encode(q, b->kept, live, c, p + head, &it->tmp);
        if (!rec) { free(L); return HANU_ERR_NOMEM; }
        it->tmp.off += QF_FRAME_HDR + head;   /* relative to the frame */
        body += rec;
    } else {
        it->tmp.off = QF_FRAME_HDR + head;    /* no payload: the body's end */
    }
    qf_frame_finish(f, QF_T_RELOCATE, epoch, c, body);
    it->frame_at = b->frames_len;
    it->live = L;
    b->frames_len += QF_FRAME_HDR + body;
    return 0;
}

/* ---- the steps ---- */

/* Punches the 4 KiB-aligned interior of [off, off + len). */
static int punch(quad *q, uint64_t off, uint64_t len, quad_clean_stats *st)
{
    uint64_t a = (off + 4095) & ~UINT64_C(4095), z = (off + len) & ~UINT64_C(4095);
    if (z <= a || st->punch_unsupported) return 0;
    if (fallocate(q->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a, (off_t)(z - a)) != 0) {
        if (errno == EOPNOTSUPP || errno == ENOSYS) { st->punch_unsupported = 1; return 0; }
        return HANU_ERR_IO;
    }
    st->bytes_punched += z - a;
    return 0;
}

/* Walks the frames in [q->clean_walked, limit) (every one before both
 * checkpoint slots: recovery never reads them again) and punches the bodies
 * no reader needs: checkpoint parts, retire frames at or below h (streams
 * start above h) and relocation frames whose chunk moved on. Headers stay,
 * so a stream can still step over them. Caller holds clean_mu. */
static int punch_log(quad *q, uint64_t limit, uint64_t h, quad_clean_stats *st)
{
    uint64_t off = q->clean_walked;
    uint8_t f[QF_FRAME_HDR];
    int rc = 0;
    while (rc == 0 && off < limit && limit - off >= QF_FRAME_HDR) {
        if (quad_pread(q, f, sizeof f, off) != 0) return HANU_ERR_IO;
        if (hanu_get_u32(f) != hanu_checksum32(f + 4, QF_FRAME_HDR - 4) || hanu_get_u32(f + 4) != QF_FRAME_MAGIC)
            break;   /* never before the log end; stop rather than guess */
        uint64_t len = QF_FRAME_HDR + (uint64_t)hanu_get_u32(f + 8), e = hanu_get_u64(f + 16);
        uint64_t aux = hanu_get_u64(f + 24);
        if (len > limit - off) break;
        int dead = QF_IS_CKPT(f[12]) || (f[12] == QF_T_RETIRE && e <= h);
        if (f[12] == QF_T_RELOCATE && aux < atomic_load(&q->nchunks)) {
            uint64_t at = quad_chunk_at(q, aux)->off;   /* changed only by a clean */
            dead = at < off || at >= off + len;
        }
        if (dead) rc = punch(q, off + QF_FRAME_HDR, len - QF_FRAME_HDR, st);
        off += len;
    }
    q->clean_walked = off;
    return rc;
}

/* Relocates chunks [*next, end) of the candidates, one group (wlock held):
 * step 1 (frames at the log end), step 2 (sync, then the swap). */
static int clean_group(quad *q, const uint64_t *cand, size_t ncand, size_t *next, uint64_t h,
                       clean_buf *b, clean_item *items, uint64_t *punch_list, quad_clean_stats *st)
{
    if (atomic_load(&q->stopped)) return HANU_ERR_STOPPED;
    uint64_t epoch = atomic_load(&q->epoch);
    size_t n = 0;
    b->frames_len = 0;
    int rc = 0;
    while (*next < ncand && n < CLEAN_GROUP_CHUNKS && b->frames_len < CLEAN_GROUP_BYTES) {
        rc = chunk_frame(q, cand[*next], h, epoch, b, &items[n]);
        if (rc) break;
        n++;
        (*next)++;
    }
    if (rc == 0 && n) {
        uint64_t at = q->tail;
        rc = quad_pwrite(q, b->frames, b->frames_len, at);
        if (rc) {
            /* no partial frame stays in place (as for a failed commit) */
            memset(b->frames, 0, b->frames_len);
            (void)quad_pwrite(q, b->frames, b->frames_len, at);
        } else {
            q->tail += b->frames_len;
            qf_written(q, epoch);
            /* step 2: the frames are on the disk before any chunk points at them */
            rc = qf_sync(q, NULL);
        }
        if (rc == 0) {
            pthread_rwlock_wrlock(&q->rlock);
            /* gathers that began before the first retirement read without
             * the lock, inside reader sections: wait them out */
            qc_grace(&q->cache);
            for (size_t i = 0; i < n; i++) {
                clean_item *it = &items[i];
                quad_chunk *ch = quad_chunk_at(q, it->c);
                qc_forget_chunk(&q->cache, it->c, ch);
                it->tmp.off += at + it->frame_at;
                st->bytes_before += it->old_len;
                st->bytes_after += it->tmp.lane_off[4];
                st->rows_kept += it->live->live;
                st->rows_dropped += quad_prows(ch) - it->live->live;
                qf_chunk_relocate(q, ch, &it->tmp, it->live);
                it->live = NULL;
                it->tmp.mb = NULL;
                uint64_t *pl = punch_list + 4 * st->chunks_relocated;
                pl[0] = it->old_off;
                pl[1] = it->old_len;
                pl[2] = it->c;
                pl[3] = it->old_append;
                st->chunks_relocated++;
            }
            pthread_rwlock_unlock(&q->rlock);
            n = 0;
        }
    }
    for (size_t i = 0; i < n; i++) {   /* not swapped: the old payloads stay */
        free(items[i].tmp.mb);
        free(items[i].live);
    }
    return rc;
}

int quad_clean(quad *q, double threshold, quad_clean_stats *st_out)
{
    if (!q || quad_forked(q) || !(threshold > 0.0 && threshold <= 1.0)) return HANU_ERR_INVALID;
    if (q->opt.flags & QUAD_RDONLY) return HANU_ERR_INVALID;
    quad_clean_stats st;
    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&q->clean_mu);
    int rc = quad_sync(q);   /* the horizon is at most the durable epoch */
    if (rc) { pthread_mutex_unlock(&q->clean_mu); return rc; }

    /* choose: chunks whose kept rows would fall below threshold */
    pthread_mutex_lock(&q->wlock);
    pthread_mutex_lock(&q->stream_mu);
    uint64_t h = horizon_locked(q);
    pthread_mutex_unlock(&q->stream_mu);
    st.horizon = h;
    uint64_t nch = atomic_load(&q->nchunks);
    uint64_t *cand = NULL;
    size_t ncand = 0;
    if (h > 0 && atomic_load(&q->retired) > 0) {
        cand = malloc((nch ? nch : 1) * sizeof *cand);
        if (!cand) { quad_wlock_release(q); pthread_mutex_unlock(&q->clean_mu); return HANU_ERR_NOMEM; }
        for (uint64_t c = 0; c < nch; c++) {
            const quad_chunk *ch = quad_chunk_at(q, c);
            if (!ch->ret) continue;
            uint32_t keep, drop;
            chunk_counts(ch, h, &keep, &drop);
            if (!drop) continue;
            st.chunks_examined++;
            if ((double)keep < threshold * (double)ch->rows || threshold >= 1.0) cand[ncand++] = c;
        }
    }
    if (ncand) {
        /* from now on snapshots below h may miss rows: say so first (a hold
         * or a held stream taken from here on is at or above h) */
        pthread_mutex_lock(&q->stream_mu);
        if (h > atomic_load(&q->gone_below)) atomic_store(&q->gone_below, h);
        if (h + 1 > atomic_load(&q->log_floor)) atomic_store(&q->log_floor, h + 1);
        pthread_mutex_unlock(&q->stream_mu);
    }
    quad_wlock_release(q);

    clean_buf b;
    memset(&b, 0, sizeof b);
    clean_item *items = NULL;
    uint64_t *punch_list = NULL;
    if (ncand) {
        b.rows = malloc((size_t)q->chunk_rows * sizeof *b.rows);
        b.kept = malloc((size_t)q->chunk_rows * sizeof *b.kept);
        items = calloc(CLEAN_GROUP_CHUNKS, sizeof *items);
        punch_list = malloc(ncand * 4 * sizeof *punch_list);
        if (!b.rows || !b.kept || !items || !punch_list) rc = HANU_ERR_NOMEM;
    }
    /* steps 1 and 2, a group at a time: commits run between groups */
    for (size_t next = 0; rc == 0 && next < ncand;) {
        pthread_mutex_lock(&q->wlock);
        rc = clean_group(q, cand, ncand, &next, h, &b, items, punch_list, &st);
        quad_wlock_release(q);
    }
    /* step 3: two checkpoints, so that neither slot needs the old bytes (a
     * replay from a slot before them would read the punched append frames) */
    uint64_t limit = 0;
    if (rc == 0 && st.chunks_relocated) {
        pthread_mutex_lock(&q->wlock);
        limit = q->tail;
        rc = qf_checkpoint_locked(q);
        if (rc == 0) rc = qf_checkpoint_locked(q);
        quad_wlock_release(q);
    }
    /* step 4: give the old payloads back, then the frames before both slots
     * that nothing reads any more */
    for (uint64_t i = 0; rc == 0 && i < st.chunks_relocated;) {
        /* consecutive chunks of one append frame: one range, the record
         * headers and descriptors between their payloads included (dead too;
         * no frame header lies between them) */
        const uint64_t *a = punch_list + 4 * i;
        uint64_t end = a[0] + a[1], j = i + 1;
        for (; j < st.chunks_relocated; j++) {
            const uint64_t *b = punch_list + 4 * j, *p = b - 4;
            if (!b[3] || b[3] != p[3] || b[2] != p[2] + 1 || b[0] < end) break;
            end = b[0] + b[1];
        }
        rc = punch(q, a[0], end - a[0], &st);
        i = j;
    }
    if (rc == 0 && limit) rc = punch_log(q, limit, h, &st);
    pthread_mutex_unlock(&q->clean_mu);
    free(cand);
    free(items);
    free(punch_list);
    free(b.pay);
    free(b.rows);
    free(b.kept);
    free(b.frames);
    if (st_out) *st_out = st;
    return rc;
}
