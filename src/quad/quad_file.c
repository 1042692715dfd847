/*
 * quad_file.c: the facts kernel's file format (docs/QUAD.md, version 2): the
 * file header, commit frames (append, retire, checkpoint parts), the
 * checkpoint pointer slots, the durable mark, the one sync path (qf_sync), and
 * recovery at open. The writer side (encoding) and the reader side (parsing)
 * of each record sit next to each other. Relies on base (checksums,
 * positional I/O) and codec (lane encodings).
 *
 * Recovery rule: frames are walked from the newest valid checkpoint (or the
 * first frame). The durable mark says how far the log was known synced. A
 * frame that is not valid (header or body checksum, zeros, past the end of
 * the file) at or past the mark ends the log: a power loss may leave anything
 * there. Before the mark it is damage to synced frames: HANU_ERR_CORRUPT with
 * the offset in quad_last_error() (QUAD_SALVAGE turns it into the end of the
 * log). A valid frame that breaks a format rule is HANU_ERR_CORRUPT anywhere.
 * A frame's length is trusted only after its header checksum.
 */
#include "quad/quad_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- file header ---- */

int qf_write_header(quad *q)
{
    uint8_t h[QF_HEADER_SIZE];
    memset(h, 0, sizeof h);
    memcpy(h + 4, "HANUQUAD", 8);
    h[12] = QF_VERSION;
    hanu_put_u32(h + 16, q->chunk_rows);
    hanu_put_u32(h + 20, q->mb_rows);
    hanu_put_u64(h + 24, hanu_wall_ms());
    hanu_put_u32(h, hanu_checksum32(h + 4, 60));
    int rc = quad_pwrite(q, h, sizeof h, 0);
    if (rc) return rc;
    atomic_store(&q->written_off, QF_HEADER_SIZE);
    return qf_sync(q, NULL);
}

static int pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

/* Reads and checks the header; *fresh = 1 when the file is empty or its header
 * region is all zeros (a creation that did not finish). */
int qf_read_header(quad *q, int *fresh)
{
    struct stat st;
    if (fstat(q->fd, &st) != 0) return HANU_ERR_IO;
    *fresh = 0;
    if (st.st_size == 0) { *fresh = 1; return 0; }
    uint8_t h[64];
    if ((uint64_t)st.st_size < QF_HEADER_SIZE) {
        size_t n = (size_t)st.st_size < sizeof h ? (size_t)st.st_size : sizeof h;
        if (quad_pread(q, h, n, 0) != 0) return HANU_ERR_IO;
        if (hanu_is_zero(h, n)) { *fresh = 1; return 0; }
        return HANU_ERR_CORRUPT;
    }
    if (quad_pread(q, h, sizeof h, 0) != 0) return HANU_ERR_IO;
    if (hanu_is_zero(h, sizeof h) && st.st_size == QF_HEADER_SIZE) { *fresh = 1; return 0; }
    if (memcmp(h + 4, "HANUQUAD", 8) != 0 || hanu_get_u32(h) != hanu_checksum32(h + 4, 60))
        return HANU_ERR_CORRUPT;
    if (h[12] != QF_VERSION) {
        quad_set_error("%s: file format version %u, this library reads version %u only",
                       q->path, h[12], QF_VERSION);
        return HANU_ERR_UNSUPPORTED;
    }
    uint32_t cr = hanu_get_u32(h + 16), mr = hanu_get_u32(h + 20);
    if (!pow2_in(cr, 64, 1u << 20) || !pow2_in(mr, 64, cr)) return HANU_ERR_CORRUPT;
    q->chunk_rows = cr;
    q->mb_rows = mr;
    q->mb_shift = (uint32_t)__builtin_ctz(mr);
    return 0;
}

/* ---- frames ---- */

/* Frame header (40 bytes): u32 checksum of header bytes [4, 40), u32 magic,
 * u32 body_len, u8 type, u8 version, u16 zero, u64 epoch, u64 aux, u32
 * checksum of the body, u32 zero. The header has its own checksum so that a
 * length is never trusted before it is verified. */
void qf_frame_finish(uint8_t *f, unsigned type, uint64_t epoch, uint64_t aux, size_t body_len)
{
    hanu_put_u32(f + 4, QF_FRAME_MAGIC);
    hanu_put_u32(f + 8, (uint32_t)body_len);
    f[12] = (uint8_t)type;
    f[13] = QF_VERSION;
    f[14] = f[15] = 0;
    hanu_put_u64(f + 16, epoch);
    hanu_put_u64(f + 24, aux);
    hanu_put_u32(f + 32, hanu_checksum32(f + QF_FRAME_HDR, body_len));
    hanu_put_u32(f + 36, 0);
    hanu_put_u32(f, hanu_checksum32(f + 4, QF_FRAME_HDR - 4));
}

/* ---- chunk records ----
 * u64 chunk_no, u32 rows, u32 payload_len, then 4 * nmb descriptors
 * (lane-major; u8 code, u64 base unless code is CODEC_RAW), then the payload:
 * lane 0 microblocks in order, then lane 1, ... */

size_t qf_chunk_bound(quad *q, uint32_t rows)
{
    size_t nmb = (rows + q->mb_rows - 1) >> q->mb_shift;
    return QF_CHUNK_HDR + 4 * nmb * 9 + (size_t)rows * 32;
}


/* Writes ch's microblock descriptors in file order (lane-major: code, then
 * base unless raw); returns the bytes written. */
static size_t descriptors_put(const quad_chunk *ch, uint8_t *out)
{
    uint8_t *p = out;
    for (unsigned l = 0; l < 4; l++) {
        for (uint32_t m = 0; m < ch->nmb; m++) {
            const quad_mb *mb = quad_mb_at(ch, l, m);
            *p++ = mb->code;
            if (mb->code != CODEC_RAW) {
                hanu_put_u64(p, mb->base);
                p += 8;
            }
        }
    }
    return (size_t)(p - out);
}

static void chunk_lane_offsets(quad *q, quad_chunk *ch)
{
    uint32_t off = 0;
    for (unsigned l = 0; l < 4; l++) {
        ch->lane_off[l] = off;
        for (uint32_t m = 0; m < ch->nmb; m++) {
            quad_mb *mb = quad_mb_at(ch, l, m);
            mb->off = off;
            off += (uint32_t)codec_payload_size(mb->code, quad_mb_rows(q, ch->rows, m));
        }
    }
    ch->lane_off[4] = off;
    qrow_form f;
    quad_row_layout(ch, &f);
    ch->row_bytes = f.row_bytes;
}

/* Encodes rows facts as one chunk record into out (qf_chunk_bound bytes plus
 * CODEC_SLACK available) and fills ch (mb allocated here; off is relative to
 * the record start and fixed up by the caller). Returns the record length, 0
 * when out of memory. */
size_t qf_chunk_encode(quad *q, const quad_fact *facts, uint32_t rows, uint64_t chunk_no,
                       uint8_t *out, quad_chunk *ch)
{
    uint32_t nmb = (rows + q->mb_rows - 1) >> q->mb_shift;
    ch->mb = malloc(sizeof(quad_mb) * 4 * nmb);
    if (!ch->mb) return 0;
    ch->rows = rows;
    ch->nmb = nmb;
    ch->ret = NULL;
    for (unsigned l = 0; l <= QC_ROWS; l++) atomic_init(&ch->cached[l], NULL);
    atomic_init(&ch->cused, 0);
    for (uint32_t m = 0; m < nmb; m++) {
        const quad_fact *f = facts + ((size_t)m << q->mb_shift);
        uint32_t r = quad_mb_rows(q, rows, m);
        codec_desc d[4];
        codec_plan4(f[0].lane, r, d);
        for (unsigned l = 0; l < 4; l++) {
            quad_mb_at(ch, l, m)->code = d[l].code;
            quad_mb_at(ch, l, m)->base = d[l].base;
        }
    }
    chunk_lane_offsets(q, ch);
    uint8_t *p = out;
    hanu_put_u64(p, chunk_no);
    hanu_put_u32(p + 8, rows);
    hanu_put_u32(p + 12, ch->lane_off[4]);
    p += QF_CHUNK_HDR;
    p += descriptors_put(ch, p);
    ch->off = (uint64_t)(p - out);
    for (unsigned l = 0; l < 4; l++) {
        for (uint32_t m = 0; m < nmb; m++) {
            const quad_mb *mb = quad_mb_at(ch, l, m);
            codec_desc d = { mb->code, mb->base };
            const quad_fact *f = facts + ((size_t)m << q->mb_shift);
            p += codec_pack(d, &f[0].lane[l], quad_mb_rows(q, rows, m), 4, p);
        }
    }
    return (size_t)(p - out);
}

/* Parses a chunk record header and descriptors (no payload) from [p, end):
 * fills ch, sets *payload to the payload start. Returns 0 or HANU_ERR_CORRUPT. */
static int chunk_parse(quad *q, const uint8_t *p, const uint8_t *end, uint64_t want_chunk,
                       int with_payload, quad_chunk *ch, const uint8_t **next)
{
    memset(ch, 0, sizeof *ch);
    if (end - p < QF_CHUNK_HDR) return HANU_ERR_CORRUPT;
    uint64_t cno = hanu_get_u64(p);
    uint32_t rows = hanu_get_u32(p + 8), plen = hanu_get_u32(p + 12);
    if (cno != want_chunk || rows == 0 || rows > q->chunk_rows) return HANU_ERR_CORRUPT;
    p += QF_CHUNK_HDR;
    uint32_t nmb = (rows + q->mb_rows - 1) >> q->mb_shift;
    ch->mb = malloc(sizeof(quad_mb) * 4 * nmb);
    if (!ch->mb) return HANU_ERR_NOMEM;
    ch->rows = rows;
    ch->nmb = nmb;
    for (unsigned l = 0; l < 4; l++) {
        for (uint32_t m = 0; m < nmb; m++) {
            quad_mb *mb = quad_mb_at(ch, l, m);
            if (p >= end || !codec_code_valid(*p)) goto bad;
            mb->code = *p++;
            mb->base = 0;
            if (mb->code != CODEC_RAW) {
                if (end - p < 8) goto bad;
                mb->base = hanu_get_u64(p);
                p += 8;
            }
        }
    }
    chunk_lane_offsets(q, ch);
    if (ch->lane_off[4] != plen) goto bad;
    if (with_payload) {
        if ((uint64_t)(end - p) < plen) goto bad;
        *next = p + plen;
    } else {
        *next = p;
    }
    ch->off = 0;
    return 0;
bad:
    free(ch->mb);
    ch->mb = NULL;
    return HANU_ERR_CORRUPT;
}

/* ---- retire records: u32 n at the frame body start, then blocks of up to
 * QF_RETIRE_BLOCK ids: u8 code, u64 base unless raw, payload. ---- */

size_t qf_ids_encode(const uint64_t *ids, size_t n, uint8_t *out)
{
    uint8_t *p = out;
    hanu_put_u32(p, (uint32_t)n);
    p += 4;
    for (size_t i = 0; i < n; i += QF_RETIRE_BLOCK) {
        size_t k = n - i < QF_RETIRE_BLOCK ? n - i : QF_RETIRE_BLOCK;
        codec_desc d = codec_plan(ids + i, k, 1);
        *p++ = d.code;
        if (d.code != CODEC_RAW) {
            hanu_put_u64(p, d.base);
            p += 8;
        }
        p += codec_pack(d, ids + i, k, 1, p);
    }
    return (size_t)(p - out);
}

/* Switches a dense set to an epoch per row. */
static int retset_widen(quad_retset *r, uint32_t rows)
{
    uint64_t *w = malloc((size_t)rows * sizeof *w);
    if (!w) return HANU_ERR_NOMEM;
    for (uint32_t s = 0; s < rows; s++) w[s] = quad_dense_epoch(r, s);
    free(r->dense);
    free(r->depochs);
    r->dense = NULL;
    r->depochs = NULL;
    r->ndepochs = r->depochs_cap = 0;
    r->wide = w;
    return 0;
}

/* The index rows retired at epoch take in r->dense (the newest index when it
 * is that epoch's, else a new one): >= 1; 0 when the set had to go wide (use
 * r->wide); HANU_ERR_NOMEM. */
int qf_dense_index(quad_retset *r, uint32_t rows, uint64_t epoch)
{
    if (r->wide) return 0;
    if (r->ndepochs && r->depochs[r->ndepochs - 1] == epoch) return (int)r->ndepochs;
    if (r->ndepochs == UINT16_MAX) {
        int rc = retset_widen(r, rows);
        return rc ? rc : 0;
    }
    if (r->ndepochs == r->depochs_cap) {
        uint32_t nc = r->depochs_cap ? r->depochs_cap * 2 : 4;
        if (nc > UINT16_MAX) nc = UINT16_MAX;
        uint64_t *ne = realloc(r->depochs, nc * sizeof *ne);
        if (!ne) return HANU_ERR_NOMEM;
        r->depochs = ne;
        r->depochs_cap = nc;
    }
    r->depochs[r->ndepochs++] = epoch;
    return (int)r->ndepochs;
}

/* Puts slot at epoch into a dense set (the slot is live). */
static int dense_put(quad_retset *r, uint32_t rows, uint32_t slot, uint64_t epoch)
{
    int k = qf_dense_index(r, rows, epoch);
    if (k < 0) return k;
    if (k == 0) r->wide[slot] = epoch; else r->dense[slot] = (uint16_t)k;
    return 0;
}

/* Retires slot at epoch in a dense set: 1 when newly retired, 0 when it was
 * already (it keeps its epoch), HANU_ERR_NOMEM. */
int qf_dense_set(quad_retset *r, uint32_t rows, uint32_t slot, uint64_t epoch)
{
    if (quad_dense_epoch(r, slot)) return 0;
    int rc = dense_put(r, rows, slot, epoch);
    if (rc) return rc;
    r->count++;
    return 1;
}

/* Makes ch's retirement set dense, allocating it if absent. Caller holds
 * rlock for writing, or is alone at open. */
int qf_retset_make_dense(quad_chunk *ch)
{
    quad_retset *r = ch->ret;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return HANU_ERR_NOMEM;
        ch->ret = r;
    }
    if (quad_retset_is_dense(r)) return 0;
    uint16_t *d = calloc(ch->rows, sizeof *d);
    if (!d) return HANU_ERR_NOMEM;
    r->dense = d;
    for (uint32_t i = 0; i < r->count; i++) {
        int rc = dense_put(r, ch->rows, r->slots[i], r->epochs[i]);
        if (rc) {   /* back to sparse, unchanged */
            free(r->dense);
            free(r->depochs);
            free(r->wide);
            r->dense = NULL;
            r->depochs = NULL;
            r->wide = NULL;
            r->ndepochs = r->depochs_cap = 0;
            return rc;
        }
    }
    free(r->slots);
    free(r->epochs);
    r->slots = NULL;
    r->epochs = NULL;
    r->cap = 0;
    return 0;
}

/* Applies one retirement to the in-memory state (caller holds rlock for
 * writing, or is alone at open). Returns 1 when newly retired, 0 when it was
 * retired already (it keeps its earlier epoch), HANU_ERR_NOT_FOUND for an id
 * that does not exist. The caller adds the newly retired to q->retired. */
int qf_retire_apply(quad *q, quad_id id, uint64_t epoch)
{
    uint64_t c = QUAD_ID_CHUNK(id);
    uint32_t slot = QUAD_ID_SLOT(id);
    if (c >= atomic_load_explicit(&q->nchunks, memory_order_relaxed)) return HANU_ERR_NOT_FOUND;
    quad_chunk *ch = quad_chunk_at(q, c);
    if (slot >= ch->rows) return HANU_ERR_NOT_FOUND;
    quad_retset *r = ch->ret;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return HANU_ERR_NOMEM;
        ch->ret = r;
    }
    if (quad_retset_is_dense(r)) return qf_dense_set(r, ch->rows, slot, epoch);
    /* sparse: binary search, insert keeping order; appending is the common case */
    uint32_t lo = 0, hi = r->count;
    if (hi > 0 && r->slots[hi - 1] < slot) {
        lo = hi;
    } else {
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (r->slots[mid] < slot) lo = mid + 1; else hi = mid;
        }
        if (lo < r->count && r->slots[lo] == slot) return 0;
    }
    if (r->count + 1 > ch->rows / QUAD_DENSE_DIV) {
        int rc = qf_retset_make_dense(ch);
        return rc ? rc : qf_dense_set(r, ch->rows, slot, epoch);
    }
    if (r->count == r->cap) {
        uint32_t nc = r->cap ? r->cap * 2 : 4;
        uint32_t *ns = realloc(r->slots, nc * sizeof *ns);
        if (!ns) return HANU_ERR_NOMEM;
        r->slots = ns;
        uint64_t *ne = realloc(r->epochs, nc * sizeof *ne);
        if (!ne) return HANU_ERR_NOMEM;
        r->epochs = ne;
        r->cap = nc;
    }
    memmove(r->slots + lo + 1, r->slots + lo, (r->count - lo) * sizeof *r->slots);
    memmove(r->epochs + lo + 1, r->epochs + lo, (r->count - lo) * sizeof *r->epochs);
    r->slots[lo] = slot;
    r->epochs[lo] = epoch;
    r->count++;
    return 1;
}

int qf_ids_block(const uint8_t **pp, const uint8_t *end, uint32_t k, uint64_t *ids)
{
    const uint8_t *p = *pp;
    if (p >= end || !codec_code_valid(*p)) return HANU_ERR_CORRUPT;
    codec_desc d = { *p++, 0 };
    if (d.code != CODEC_RAW) {
        if (end - p < 8) return HANU_ERR_CORRUPT;
        d.base = hanu_get_u64(p);
        p += 8;
    }
    size_t sz = codec_payload_size(d.code, k);
    if ((size_t)(end - p) < sz) return HANU_ERR_CORRUPT;
    codec_unpack(d, p, 0, k, ids, 1);
    *pp = p + sz;
    return 0;
}

static int retire_parse(quad *q, const uint8_t *p, const uint8_t *end, uint64_t epoch)
{
    if (end - p < 4) return HANU_ERR_CORRUPT;
    uint32_t n = hanu_get_u32(p);
    p += 4;
    uint64_t ids[QF_RETIRE_BLOCK];
    for (uint32_t i = 0; i < n; i += QF_RETIRE_BLOCK) {
        uint32_t k = n - i < QF_RETIRE_BLOCK ? n - i : QF_RETIRE_BLOCK;
        /* the frame buffer has CODEC_SLACK bytes after the body */
        if (qf_ids_block(&p, end, k, ids) != 0) return HANU_ERR_CORRUPT;
        for (uint32_t j = 0; j < k; j++) {
            int rc = qf_retire_apply(q, ids[j], epoch);
            if (rc == HANU_ERR_NOT_FOUND) return HANU_ERR_CORRUPT;
            if (rc < 0) return rc;
            atomic_fetch_add_explicit(&q->retired, (uint64_t)rc, memory_order_relaxed);
        }
    }
    return p == end ? 0 : HANU_ERR_CORRUPT;
}

/* Publishes a parsed chunk at index c (recovery and checkpoint load only). */
static int chunk_publish(quad *q, uint64_t c, quad_chunk *ch)
{
    int rc = quad_chunk_slot_reserve(q, c);
    if (rc) return rc;
    *quad_chunk_at(q, c) = *ch;
    quad_chunk_count_lanes(q, ch, 1);
    q->facts += ch->rows;
    atomic_store_explicit(&q->nchunks, c + 1, memory_order_release);
    return 0;
}

static int append_parse(quad *q, const uint8_t *body, const uint8_t *end,
                        uint64_t body_file_off, uint64_t epoch)
{
    if (end - body < 4) return HANU_ERR_CORRUPT;
    uint32_t n = hanu_get_u32(body);
    const uint8_t *p = body + 4;
    if (n == 0) return HANU_ERR_CORRUPT;
    for (uint32_t i = 0; i < n; i++) {
        quad_chunk ch;
        const uint8_t *next;
        uint64_t c = atomic_load_explicit(&q->nchunks, memory_order_relaxed);
        int rc = chunk_parse(q, p, end, c, 1, &ch, &next);
        if (rc) return rc;
        ch.off = body_file_off + (uint64_t)(next - ch.lane_off[4] - body);
        ch.epoch = epoch;
        rc = chunk_publish(q, c, &ch);
        if (rc) { free(ch.mb); return rc; }
        p = next;
    }
    return p == end ? 0 : HANU_ERR_CORRUPT;
}

/* ---- relocated chunks (the cleaner, quad_clean.c) ---- */

quad_live *qf_live_new(uint32_t rows)
{
    uint32_t words = (rows + 63) / 64;
    quad_live *L = calloc(1, sizeof *L + (size_t)words * (sizeof *L->bits + sizeof *L->rank));
    if (!L) return NULL;
    L->words = words;
    L->bits = (uint64_t *)(L + 1);
    L->rank = (uint32_t *)(L->bits + words);
    return L;
}

void qf_live_rank(quad_live *L)
{
    uint32_t r = 0;
    for (uint32_t w = 0; w < L->words; w++) {
        L->rank[w] = r;
        r += (uint32_t)__builtin_popcountll(L->bits[w]);
    }
    L->live = r;
}

/* Reads the bitmap of a chunk of rows slots at p (words u64, little-endian):
 * NULL with *bad set when bits past rows are set. */
static quad_live *live_read(const uint8_t *p, uint32_t rows, int *bad)
{
    *bad = 0;
    quad_live *L = qf_live_new(rows);
    if (!L) return NULL;
    for (uint32_t w = 0; w < L->words; w++) L->bits[w] = hanu_get_u64(p + 8 * (size_t)w);
    if (rows % 64 && (L->bits[L->words - 1] >> (rows % 64))) {
        free(L);
        *bad = 1;
        return NULL;
    }
    qf_live_rank(L);
    return L;
}

static int live_has(const quad_live *L, uint32_t slot)
{
    return (int)((L->bits[slot >> 6] >> (slot & 63)) & 1);
}

/* Points chunk c at a new payload description (tmp: nmb, mb, lane_off,
 * row_bytes, off; rows is the payload's) with the kept slots L; frees the old
 * one. Caller holds wlock and rlock for writing (or is alone at open). */
void qf_chunk_relocate(quad *q, quad_chunk *ch, quad_chunk *tmp, quad_live *L)
{
    quad_chunk_count_lanes(q, ch, -1);
    if (!ch->live) q->relocated++;
    free(ch->mb);
    free(ch->live);
    ch->mb = tmp->mb;
    ch->nmb = tmp->nmb;
    memcpy(ch->lane_off, tmp->lane_off, sizeof ch->lane_off);
    ch->row_bytes = tmp->row_bytes;
    ch->off = tmp->off;
    ch->live = L;
    quad_chunk_count_lanes(q, ch, 1);
    uint64_t h = atomic_load(&q->gone_below);
    if (L->horizon > h) atomic_store(&q->gone_below, L->horizon);
    if (L->horizon + 1 > atomic_load(&q->log_floor)) atomic_store(&q->log_floor, L->horizon + 1);
}

/* Checks the kept slots of a relocation of ch at horizon h: every dropped
 * slot is retired at or below h, and a slot dropped before stays dropped. */
int qf_live_check(const quad_chunk *ch, const quad_live *L, uint64_t h)
{
    for (uint32_t s = 0; s < ch->rows; s++) {
        if (live_has(L, s)) {
            if (ch->live && !live_has(ch->live, s)) return HANU_ERR_CORRUPT;
            continue;
        }
        uint64_t e = ch->ret ? quad_retire_epoch(ch->ret, s) : 0;
        if (e == 0 || e > h) return HANU_ERR_CORRUPT;
    }
    return 0;
}

/* A relocation frame (recovery): u64 chunk, u64 horizon, u32 rows, u32 live,
 * the kept-slot bitmap (ceil(rows / 64) u64 words), then, when live > 0, a
 * chunk record of the kept rows with its payload. */
int qf_relocate_parse(quad *q, const uint8_t *body, const uint8_t *end, uint64_t body_file_off,
                      uint64_t epoch, uint64_t aux)
{
    if (end - body < 24) return HANU_ERR_CORRUPT;
    uint64_t c = hanu_get_u64(body), h = hanu_get_u64(body + 8);
    uint32_t rows = hanu_get_u32(body + 16), live = hanu_get_u32(body + 20);
    if (c != aux || c >= atomic_load(&q->nchunks) || h == 0 || h > epoch) return HANU_ERR_CORRUPT;
    quad_chunk *ch = quad_chunk_at(q, c);
    uint32_t words = (rows + 63) / 64;
    if (rows != ch->rows || live > rows || (uint64_t)(end - body - 24) < (uint64_t)words * 8)
        return HANU_ERR_CORRUPT;
    int bad;
    quad_live *L = live_read(body + 24, rows, &bad);
    if (!L) return bad ? HANU_ERR_CORRUPT : HANU_ERR_NOMEM;
    L->horizon = h;
    L->append_at = quad_append_at(ch);
    const uint8_t *p = body + 24 + (size_t)words * 8;
    quad_chunk tmp;
    memset(&tmp, 0, sizeof tmp);
    int rc = L->live != live ? HANU_ERR_CORRUPT : qf_live_check(ch, L, h);
    if (rc == 0 && live > 0) {
        const uint8_t *next;
        rc = chunk_parse(q, p, end, c, 1, &tmp, &next);
        if (rc == 0 && (tmp.rows != live || next != end)) {
            free(tmp.mb);
            rc = HANU_ERR_CORRUPT;
        }
        if (rc == 0) tmp.off = body_file_off + (uint64_t)(next - tmp.lane_off[4] - body);
    } else if (rc == 0) {
        rc = p == end ? 0 : HANU_ERR_CORRUPT;
        tmp.off = body_file_off + (uint64_t)(end - body);   /* no payload: any offset in the file */
    }
    if (rc) { free(L); return rc; }
    qf_chunk_relocate(q, ch, &tmp, L);
    return 0;
}

/* ---- the one sync path and the durable mark ----
 * Every fdatasync of the store file goes through qf_sync, under sync_mu. The
 * first failure freezes the durable watermark for good: Linux reports a
 * writeback error once per open file, so a later fdatasync that returns 0
 * says nothing about the pages whose write failed. After a successful sync
 * the mark slot (seq alternating between two sectors) records the log end it
 * covered; the mark itself reaches the disk with the next sync (or the
 * checkpoint slot's), so on disk it lags by at most one sync. */

static void mark_write(quad *q, uint64_t off, uint64_t epoch)
{
    uint8_t s[QF_SLOT_SIZE];
    memset(s, 0, sizeof s);
    uint64_t seq = ++q->mark_seq;
    hanu_put_u32(s + 4, QF_MARK_MAGIC);
    hanu_put_u64(s + 8, seq);
    hanu_put_u64(s + 16, off);
    hanu_put_u64(s + 24, epoch);
    hanu_put_u32(s, hanu_checksum32(s + 4, QF_SLOT_SIZE - 4));
    /* best effort: a lost mark only weakens the damage check, never durability */
    (void)quad_pwrite(q, s, sizeof s, QF_MARK_OFF + (seq & 1) * QF_SECTOR);
}

int qf_sync(quad *q, uint64_t *epoch_out)
{
    pthread_mutex_lock(&q->sync_mu);
    uint64_t e = atomic_load_explicit(&q->written_epoch, memory_order_acquire);
    uint64_t off = atomic_load_explicit(&q->written_off, memory_order_acquire);
    int rc = HANU_ERR_STOPPED;
    if (!atomic_load(&q->sync_failed)) {
        rc = fdatasync(q->fd) == 0 ? 0 : HANU_ERR_IO;
        atomic_fetch_add(&q->syncs, 1);
        if (rc) {
            q->failed_epoch = e;
            atomic_store(&q->stopped, 1);
            atomic_store(&q->sync_failed, 1);
        } else {
            quad_durable_raise(q, e);
            if (off > q->durable_off) {
                q->durable_off = off;
                mark_write(q, off, e);
            }
        }
    }
    pthread_mutex_unlock(&q->sync_mu);
    if (epoch_out) *epoch_out = e;
    return rc;
}

void qf_written(quad *q, uint64_t epoch)
{
    atomic_store_explicit(&q->written_off, q->tail, memory_order_release);
    atomic_store_explicit(&q->written_epoch, epoch, memory_order_release);
    quad_stream_notify(q);
}

/* ---- checkpoints ----
 * A checkpoint is a run of checkpoint frames ("parts", about QF_CKPT_PART
 * each, so that no store outgrows the frame size limit and the frame buffer
 * stays small), all with the checkpoint's epoch and aux = its chunk count.
 * Part body: u64 first chunk, u64 chunks in this part, per chunk u64 payload
 * file offset, u64 epoch and the chunk record header + descriptors (no
 * payload); then u64 count and count (u64 id, u64 retire epoch) pairs. Chunks
 * come before every pair. The slot points at the first part and holds the
 * run's length. */

int qf_fbuf_reserve(quad *q, size_t need)
{
    need += CODEC_SLACK;
    if (q->fcap >= need) return 0;
    size_t nc = q->fcap ? q->fcap : 1u << 20;
    while (nc < need) nc *= 2;
    uint8_t *nb = realloc(q->fbuf, nc);
    if (!nb) return HANU_ERR_NOMEM;
    q->fbuf = nb;
    q->fcap = nc;
    return 0;
}

/* A chunk's checkpoint entry. A relocated chunk has QF_CKPT_RELOCATED in its
 * epoch, its payload's row count in the record header (0: no payload, no
 * descriptors), and after the descriptors u64 horizon, u64 append frame
 * offset (quad_append_at), u32 rows, u32 zero and the kept-slot bitmap. */
static size_t put_ckpt_chunk(uint8_t *p, uint64_t c, const quad_chunk *ch)
{
    uint8_t *s = p;
    const quad_live *L = ch->live;
    hanu_put_u64(p, ch->off);
    hanu_put_u64(p + 8, ch->epoch | (L ? QF_CKPT_RELOCATED : 0));
    hanu_put_u64(p + 16, c);
    hanu_put_u32(p + 24, quad_prows(ch));
    hanu_put_u32(p + 28, ch->lane_off[4]);
    p += 32;
    p += descriptors_put(ch, p);
    if (L) {
        hanu_put_u64(p, L->horizon);
        hanu_put_u64(p + 8, L->append_at);
        hanu_put_u32(p + 16, ch->rows);
        hanu_put_u32(p + 20, 0);
        p += 24;
        for (uint32_t w = 0; w < L->words; w++, p += 8) hanu_put_u64(p, L->bits[w]);
    }
    return (size_t)(p - s);
}

/* ---- folds: a chunk's retirements at or below a horizon as a bitmap ----
 * H is gone_below: snapshots below it answer HANU_ERR_GONE, and at every
 * snapshot >= H a slot retired at e <= H reads the same as one retired at H.
 * Folding above gone_below would make a still-allowed snapshot S (e <= S < H)
 * see a retired fact as live. Dropped slots of a relocated chunk are left
 * out (its kept-slot bitmap stands for them). */

/* Retired slot s of ch that a fold at h covers. */
static int fold_has(const quad_chunk *ch, uint32_t s, uint64_t h)
{
    if (ch->live && !live_has(ch->live, s)) return 0;
    uint64_t e = quad_retire_epoch(ch->ret, s);
    return e != 0 && e <= h;
}

/* Whether ch's checkpoint entry folds at h: when the fold (16 bytes and a
 * bit a slot) is smaller than the pairs it replaces (16 bytes each). */
static int fold_worth(const quad_chunk *ch, uint64_t h)
{
    if (!h || !ch->ret) return 0;
    uint64_t need = 1 + (16 + ((uint64_t)ch->rows + 7) / 8) / 16, k = 0;
    if (ch->ret->count < need) return 0;
    for (uint32_t s = 0; s < ch->rows && k < need; s++) k += (uint64_t)fold_has(ch, s, h);
    return k >= need;
}

static size_t fold_size(const quad_chunk *ch)
{
    return 16 + ((size_t)ch->rows + 7) / 8;
}

static size_t put_fold(uint8_t *p, uint64_t c, const quad_chunk *ch, uint64_t h)
{
    hanu_put_u64(p, c);
    hanu_put_u64(p + 8, h);
    uint8_t *b = p + 16;
    memset(b, 0, ((size_t)ch->rows + 7) / 8);
    for (uint32_t s = 0; s < ch->rows; s++)
        if (fold_has(ch, s, h)) b[s >> 3] |= (uint8_t)(1u << (s & 7));
    return fold_size(ch);
}

/* Position in the retirement pairs: chunk c, index i (sparse: into slots;
 * dense: the row); fold: whether chunk c is folded (known once entered). */
typedef struct ckpt_cursor {
    uint64_t c;
    uint32_t i;
    int entered, fold;
} ckpt_cursor;

/* Next (id, epoch) pair at or after cur (rlock held); 0 at the end. A folded
 * chunk has pairs only for retirements above h. */
static int ckpt_next_pair(quad *q, uint64_t n, uint64_t h, ckpt_cursor *cur, uint64_t *id, uint64_t *e)
{
    for (; cur->c < n; cur->c++, cur->i = 0, cur->entered = 0) {
        const quad_chunk *ch = quad_chunk_at(q, cur->c);
        const quad_retset *r = ch->ret;
        if (!r) continue;
        if (!cur->entered) {
            cur->fold = fold_worth(ch, h);
            cur->entered = 1;
        }
        uint64_t above = cur->fold ? h : 0;
        /* a dropped slot of a relocated chunk is implied by its bitmap */
        const quad_live *L = ch->live;
        if (quad_retset_is_dense(r)) {
            for (; cur->i < ch->rows; cur->i++) {
                uint64_t x = quad_dense_epoch(r, cur->i);
                if (!x || x <= above || (L && !live_has(L, cur->i))) continue;
                *id = QUAD_ID(cur->c, cur->i);
                *e = x;
                cur->i++;
                return 1;
            }
        } else {
            while (cur->i < r->count && ((L && !live_has(L, r->slots[cur->i])) || r->epochs[cur->i] <= above))
                cur->i++;
            if (cur->i >= r->count) continue;
            *id = QUAD_ID(cur->c, r->slots[cur->i]);
            *e = r->epochs[cur->i];
            cur->i++;
            return 1;
        }
    }
    return 0;
}

/* The next chunk at or after *fc that folds at h (rlock held); n when none. */
static uint64_t ckpt_next_fold(quad *q, uint64_t n, uint64_t h, uint64_t fc)
{
    while (fc < n && !fold_worth(quad_chunk_at(q, fc), h)) fc++;
    return fc;
}

/* Caller holds wlock. Writes the checkpoint parts, syncs, then points a slot
 * at them and syncs again. Part body: u64 first chunk, u64 chunks, their
 * entries, u64 folds, the folds, u64 pairs, the pairs. */
int qf_checkpoint_locked(quad *q)
{
    if (atomic_load(&q->stopped)) return HANU_ERR_STOPPED;
    uint64_t n = atomic_load(&q->nchunks);
    uint64_t epoch = atomic_load(&q->epoch);
    uint64_t h = atomic_load(&q->gone_below);   /* set under wlock */
    size_t entry_max = 32 + 9 * 4 * (size_t)(q->chunk_rows / q->mb_rows) + 24 + q->chunk_rows / 8;
    /* the frame buffer is kept: size it for this checkpoint's largest part
     * (a fold is smaller than the pairs it replaces) */
    uint64_t need = 40 + 16 * (uint64_t)atomic_load(&q->retired);
    for (uint64_t c = 0; c < n && need < QF_CKPT_PART; c++)
        need += 32 + 9 * 4 * (uint64_t)quad_chunk_at(q, c)->nmb + (quad_chunk_at(q, c)->live ? 24 + q->chunk_rows / 8 : 0);
    if (need > QF_CKPT_PART) need = QF_CKPT_PART;
    int rc = qf_fbuf_reserve(q, QF_FRAME_HDR + (size_t)need + entry_max + 40);
    if (rc) return rc;
    uint64_t start = q->tail, c = 0;
    q->ckpt_bytes = 0;
    ckpt_cursor cur = { .c = 0 };
    uint64_t pid = 0, pe = 0;
    pthread_rwlock_rdlock(&q->rlock);
    uint64_t fc = ckpt_next_fold(q, n, h, 0);
    int more_pairs = ckpt_next_pair(q, n, h, &cur, &pid, &pe);
    do {
        uint8_t *f = q->fbuf, *p = f + QF_FRAME_HDR, *lim = p + QF_CKPT_PART;
        hanu_put_u64(p, c);
        uint8_t *cntc = p + 8;
        p += 16;
        uint64_t c0 = c;
        while (c < n && (c == c0 || p + entry_max <= lim)) {
            p += put_ckpt_chunk(p, c, quad_chunk_at(q, c));
            c++;
        }
        hanu_put_u64(cntc, c - c0);
        uint8_t *cntf = p;
        p += 8;
        uint64_t nf = 0;
        if (c == n) {
            while (fc < n && p + fold_size(quad_chunk_at(q, fc)) + 8 <= lim) {
                p += put_fold(p, fc, quad_chunk_at(q, fc), h);
                nf++;
                fc = ckpt_next_fold(q, n, h, fc + 1);
            }
        }
        hanu_put_u64(cntf, nf);
        uint8_t *cntp = p;
        p += 8;
        uint64_t cnt = 0;
        if (c == n && fc == n) {
            while (more_pairs && p + 16 <= lim) {
                hanu_put_u64(p, pid);
                hanu_put_u64(p + 8, pe);
                p += 16;
                cnt++;
                more_pairs = ckpt_next_pair(q, n, h, &cur, &pid, &pe);
            }
        }
        hanu_put_u64(cntp, cnt);
        size_t body = (size_t)(p - f) - QF_FRAME_HDR;
        qf_frame_finish(f, QF_T_CKPT_FOLD, epoch, n, body);
        uint64_t len = QF_FRAME_HDR + body;
        q->ckpt_bytes += len;
        rc = quad_pwrite(q, f, len, q->tail);
        if (rc) {
            memset(f, 0, len);
            (void)quad_pwrite(q, f, len, q->tail);
            break;
        }
        q->tail += len;
    } while (c < n || fc < n || more_pairs);
    pthread_rwlock_unlock(&q->rlock);
    /* parts written before a failure stay in the log; replay skips them */
    qf_written(q, epoch);
    if (rc) return rc;
    rc = qf_sync(q, NULL);
    if (rc) return rc;
    uint8_t s[QF_SLOT_SIZE];
    memset(s, 0, sizeof s);
    uint64_t seq = q->ckpt_seq + 1;
    hanu_put_u32(s + 4, QF_SLOT_MAGIC);
    hanu_put_u64(s + 8, seq);
    hanu_put_u64(s + 16, start);
    hanu_put_u64(s + 24, q->tail - start);
    hanu_put_u64(s + 32, epoch);
    hanu_put_u32(s, hanu_checksum32(s + 4, QF_SLOT_SIZE - 4));
    rc = quad_pwrite(q, s, sizeof s, QF_SLOT_OFF + (seq & 1) * QF_SECTOR);
    if (rc) return rc;
    rc = qf_sync(q, NULL);
    if (rc) return rc;
    q->ckpt_seq = seq;
    q->ckpt_tail = q->tail;
    q->ckpt_epoch = epoch;
    return 0;
}

/* The relocation trailer of a checkpoint entry at *pp (ch holds the parsed
 * record header of its payload: rows = the payload's rows): u64 horizon,
 * u64 append frame offset, u32 rows, u32 zero, bitmap. Sets ch->rows to the
 * chunk's slots and ch->live. */
static int ckpt_live_parse(quad *q, quad_chunk *ch, const uint8_t **pp, const uint8_t *end, uint64_t epoch)
{
    const uint8_t *p = *pp;
    if (end - p < 24) return HANU_ERR_CORRUPT;
    uint64_t h = hanu_get_u64(p), at = hanu_get_u64(p + 8);
    uint32_t rows = hanu_get_u32(p + 16), words = (rows + 63) / 64;
    if (h == 0 || h > epoch || at < QF_HEADER_SIZE || at > q->tail || rows == 0 || rows > q->chunk_rows ||
        hanu_get_u32(p + 20) != 0 || (uint64_t)(end - p - 24) < (uint64_t)words * 8)
        return HANU_ERR_CORRUPT;
    int bad;
    quad_live *L = live_read(p + 24, rows, &bad);
    if (!L) return bad ? HANU_ERR_CORRUPT : HANU_ERR_NOMEM;
    if (L->live != ch->rows) { free(L); return HANU_ERR_CORRUPT; }
    L->horizon = h;
    L->append_at = at;
    ch->rows = rows;
    ch->live = L;
    *pp = p + 24 + (size_t)words * 8;
    return 0;
}

static void gone_raise(quad *q, uint64_t h);

/* Retires the dropped slots of relocated chunk c at its horizon (checkpoint
 * load) and moves the floors to it. */
static int retire_dropped(quad *q, uint64_t c)
{
    quad_chunk *ch = quad_chunk_at(q, c);
    const quad_live *L = ch->live;
    for (uint32_t s = 0; s < ch->rows; s++) {
        if (live_has(L, s)) continue;
        int rc = qf_retire_apply(q, QUAD_ID(c, s), L->horizon);
        if (rc < 0) return rc;
        atomic_fetch_add_explicit(&q->retired, (uint64_t)rc, memory_order_relaxed);
    }
    gone_raise(q, L->horizon);
    return 0;
}

/* Raises the floors to a horizon that was cleaned (or folded) at. */
static void gone_raise(quad *q, uint64_t h)
{
    if (h > atomic_load(&q->gone_below)) atomic_store(&q->gone_below, h);
    if (h + 1 > atomic_load(&q->log_floor)) atomic_store(&q->log_floor, h + 1);
}

/* One fold at *pp (checkpoint load): u64 chunk, u64 horizon, ceil(rows / 8)
 * bytes, bit set = retired at or below the horizon; loaded as retired at it. */
static int fold_parse(quad *q, const uint8_t **pp, const uint8_t *end, uint64_t epoch)
{
    const uint8_t *p = *pp;
    if (end - p < 16) return HANU_ERR_CORRUPT;
    uint64_t c = hanu_get_u64(p), h = hanu_get_u64(p + 8);
    if (c >= atomic_load(&q->nchunks) || h == 0 || h > epoch) return HANU_ERR_CORRUPT;
    const quad_chunk *ch = quad_chunk_at(q, c);
    size_t nb = ((size_t)ch->rows + 7) / 8;
    const uint8_t *b = p + 16;
    if ((size_t)(end - b) < nb) return HANU_ERR_CORRUPT;
    if (ch->rows % 8 && (b[nb - 1] >> (ch->rows % 8))) return HANU_ERR_CORRUPT;   /* bits past the rows */
    /* straight into the dense set (one epoch index for the whole fold) */
    uint64_t bits = 0;
    for (size_t i = 0; i < nb; i++) bits += (uint64_t)__builtin_popcount(b[i]);
    quad_chunk *w = quad_chunk_at(q, c);
    int k = bits ? qf_retset_make_dense(w) : 0;
    if (k == 0 && bits) k = qf_dense_index(w->ret, w->rows, h);
    if (k < 0) return k;
    quad_retset *r = w->ret;
    uint64_t added = 0;
    for (uint32_t s = 0; bits && s < ch->rows; s++) {
        if (!((b[s >> 3] >> (s & 7)) & 1) || quad_dense_epoch(r, s)) continue;   /* a dropped slot keeps its epoch */
        if (k == 0) r->wide[s] = h; else r->dense[s] = (uint16_t)k;
        added++;
    }
    if (r) r->count += (uint32_t)added;
    atomic_fetch_add_explicit(&q->retired, added, memory_order_relaxed);
    gone_raise(q, h);   /* folded at gone_below: below it nothing is answered */
    *pp = b + nb;
    return 0;
}

/* Loads one checkpoint part (chunks must continue from q->nchunks); folds:
 * the part has a fold section (QF_T_CKPT_FOLD). */
static int ckpt_parse(quad *q, const uint8_t *p, const uint8_t *end, uint64_t epoch, uint64_t total, int folds)
{
    if (end - p < 16) return HANU_ERR_CORRUPT;
    uint64_t first = hanu_get_u64(p), n = hanu_get_u64(p + 8);
    p += 16;
    if (first != atomic_load(&q->nchunks) || n > total - first) return HANU_ERR_CORRUPT;
    for (uint64_t c = first; c < first + n; c++) {
        if (end - p < 32) return HANU_ERR_CORRUPT;
        uint64_t off = hanu_get_u64(p), cep = hanu_get_u64(p + 8);
        int relocated = (cep & QF_CKPT_RELOCATED) != 0;
        cep &= ~QF_CKPT_RELOCATED;
        quad_chunk ch;
        const uint8_t *next;
        int rc;
        /* the stored record header starts at p + 16 (chunk_no, rows, payload_len) */
        if (relocated && hanu_get_u32(p + 24) == 0) {   /* relocated, nothing kept */
            memset(&ch, 0, sizeof ch);
            rc = hanu_get_u64(p + 16) == c && hanu_get_u32(p + 28) == 0 ? 0 : HANU_ERR_CORRUPT;
            next = p + 32;
        } else {
            rc = chunk_parse(q, p + 16, end, c, 0, &ch, &next);
        }
        if (rc) return rc;
        if (relocated) {
            rc = ckpt_live_parse(q, &ch, &next, end, epoch);
            if (rc) { free(ch.mb); return rc; }
        }
        /* written so that a crafted offset near 2^64 cannot wrap */
        if (cep == 0 || cep > epoch || off < QF_HEADER_SIZE || off > q->tail ||
            ch.lane_off[4] > q->tail - off) {
            free(ch.mb);
            free(ch.live);
            return HANU_ERR_CORRUPT;
        }
        ch.off = off;
        ch.epoch = cep;
        rc = chunk_publish(q, c, &ch);
        if (rc) { free(ch.mb); free(ch.live); return rc; }
        p = next;
        if (ch.live) {
            /* the dropped slots: retired at the horizon (every snapshot the
             * store still answers, >= it, sees them retired either way) */
            q->relocated++;
            rc = retire_dropped(q, c);
            if (rc) return rc;
        }
    }
    if (folds) {
        if (end - p < 8) return HANU_ERR_CORRUPT;
        uint64_t nf = hanu_get_u64(p);
        p += 8;
        if (nf > (uint64_t)(end - p) / 16) return HANU_ERR_CORRUPT;
        if (nf && atomic_load(&q->nchunks) != total) return HANU_ERR_CORRUPT;
        for (uint64_t i = 0; i < nf; i++) {
            int rc = fold_parse(q, &p, end, epoch);
            if (rc) return rc;
        }
    }
    if (end - p < 8) return HANU_ERR_CORRUPT;
    uint64_t cnt = hanu_get_u64(p);
    p += 8;
    if (cnt > (uint64_t)(end - p) / 16) return HANU_ERR_CORRUPT;
    if (cnt && atomic_load(&q->nchunks) != total) return HANU_ERR_CORRUPT;
    for (uint64_t i = 0; i < cnt; i++, p += 16) {
        uint64_t e = hanu_get_u64(p + 8);
        if (e == 0 || e > epoch) return HANU_ERR_CORRUPT;
        int rc = qf_retire_apply(q, hanu_get_u64(p), e);
        if (rc == HANU_ERR_NOT_FOUND) return HANU_ERR_CORRUPT;
        if (rc < 0) return rc;
        atomic_fetch_add_explicit(&q->retired, (uint64_t)rc, memory_order_relaxed);
    }
    return p == end ? 0 : HANU_ERR_CORRUPT;
}

/* ---- recovery ---- */

static void state_reset(quad *q)
{
    uint64_t n = atomic_load(&q->nchunks);
    for (uint64_t c = 0; c < n; c++) quad_chunk_free(quad_chunk_at(q, c));
    atomic_store(&q->nchunks, 0);
    atomic_store(&q->epoch, 0);
    atomic_store(&q->retired, 0);
    atomic_store(&q->gone_below, 0);
    atomic_store(&q->log_floor, 1);
    q->relocated = 0;
    q->facts = q->payload_bytes = q->lanes_const = q->lanes_for = q->lanes_raw = 0;
}

/* Reads the frame at off into q->fbuf; returns 0 (frame valid, *len set),
 * 1 (no valid frame there; *why says what is wrong), or HANU_ERR_IO /
 * HANU_ERR_NOMEM. The length is used only once the header checksum holds. */
static int frame_read(quad *q, uint64_t off, uint64_t size, size_t *len, const char **why)
{
    if (off > size || size - off < QF_FRAME_HDR) { *why = "the file ends"; return 1; }
    int rc = qf_fbuf_reserve(q, QF_FRAME_HDR);
    if (rc) return rc;
    uint8_t *h = q->fbuf;
    if (quad_pread(q, h, QF_FRAME_HDR, off) != 0) return HANU_ERR_IO;
    if (hanu_is_zero(h, QF_FRAME_HDR)) { *why = "zeros"; return 1; }
    if (hanu_get_u32(h) != hanu_checksum32(h + 4, QF_FRAME_HDR - 4)) {
        *why = "frame header checksum mismatch";
        return 1;
    }
    if (hanu_get_u32(h + 4) != QF_FRAME_MAGIC || h[13] != QF_VERSION) {
        *why = "bad frame magic or version";
        return 1;
    }
    uint64_t body = hanu_get_u32(h + 8);
    if (body > QF_MAX_BODY) { *why = "frame length over the limit"; return 1; }
    if (body > size - off - QF_FRAME_HDR) { *why = "frame runs past the end of the file"; return 1; }
    rc = qf_fbuf_reserve(q, QF_FRAME_HDR + body);
    if (rc) return rc;
    h = q->fbuf;
    if (quad_pread(q, h + QF_FRAME_HDR, body, off + QF_FRAME_HDR) != 0)
        return HANU_ERR_IO;
    memset(h + QF_FRAME_HDR + body, 0, CODEC_SLACK);
    if (hanu_get_u32(h + 32) != hanu_checksum32(h + QF_FRAME_HDR, body)) {
        *why = "frame body checksum mismatch";
        return 1;
    }
    *len = QF_FRAME_HDR + body;
    return 0;
}

/* The newest valid slot of the pair at base (seq at +8); -1 when none. */
static int slot_pick(quad *q, off_t base, uint32_t magic, uint8_t s[2][QF_SLOT_SIZE])
{
    int best = -1;
    for (int i = 0; i < 2; i++) {
        if (quad_pread(q, s[i], QF_SLOT_SIZE, (uint64_t)base + (uint64_t)i * QF_SECTOR) != 0) continue;
        if (hanu_get_u32(s[i] + 4) != magic) continue;
        if (hanu_get_u32(s[i]) != hanu_checksum32(s[i] + 4, QF_SLOT_SIZE - 4)) continue;
        if (best < 0 || hanu_get_u64(s[i] + 8) > hanu_get_u64(s[best] + 8)) best = i;
    }
    return best;
}

/* Loads the newest checkpoint; on success *pos is the end of its parts. A
 * damaged one is ignored (the full replay then meets it in the log). */
static int try_checkpoint(quad *q, uint64_t size, uint64_t *pos)
{
    uint8_t s[2][QF_SLOT_SIZE];
    int best = slot_pick(q, QF_SLOT_OFF, QF_SLOT_MAGIC, s);
    if (best < 0) return 0;
    uint64_t off = hanu_get_u64(s[best] + 16), len = hanu_get_u64(s[best] + 24);
    uint64_t epoch = hanu_get_u64(s[best] + 32);
    /* even when it fails to load: the next checkpoint must outrank this slot */
    q->ckpt_seq = hanu_get_u64(s[best] + 8);
    if (off < QF_HEADER_SIZE || off > size || len > size - off) return 0;
    q->tail = off;   /* chunk payloads must lie before the checkpoint */
    uint64_t p = off, total = 0;
    unsigned type = 0;
    int ok = 1;
    while (ok && p < off + len) {
        size_t flen;
        const char *why;
        if (frame_read(q, p, size, &flen, &why) != 0 || flen > off + len - p) { ok = 0; break; }
        const uint8_t *f = q->fbuf;
        if (p == off) type = f[12];   /* every part of one checkpoint has the same type */
        if (!QF_IS_CKPT(f[12]) || f[12] != type || hanu_get_u64(f + 16) != epoch) { ok = 0; break; }
        if (p == off) total = hanu_get_u64(f + 24);
        if (hanu_get_u64(f + 24) != total ||
            ckpt_parse(q, f + QF_FRAME_HDR, f + flen, epoch, total, type == QF_T_CKPT_FOLD) != 0) { ok = 0; break; }
        p += flen;
    }
    if (!ok || p != off + len || atomic_load(&q->nchunks) != total) {
        state_reset(q);
        return 0;
    }
    atomic_store(&q->epoch, epoch);
    q->ckpt_epoch = epoch;
    q->ckpt_bytes = len;
    *pos = p;
    return 0;
}

/* The durable mark on disk: the log end the last recorded sync covered. */
static uint64_t mark_read(quad *q)
{
    uint8_t s[2][QF_SLOT_SIZE];
    int best = slot_pick(q, QF_MARK_OFF, QF_MARK_MAGIC, s);
    if (best < 0) return 0;
    q->mark_seq = hanu_get_u64(s[best] + 8);
    return hanu_get_u64(s[best] + 16);
}

static const char *type_name(unsigned t)
{
    return t == QF_T_APPEND ? "append" : t == QF_T_RETIRE ? "retire" : QF_IS_CKPT(t) ? "checkpoint"
         : t == QF_T_RELOCATE ? "relocate" : "unknown";
}

int qf_recover(quad *q)
{
    struct stat st;
    if (fstat(q->fd, &st) != 0) return HANU_ERR_IO;
    uint64_t size = (uint64_t)st.st_size, pos = QF_HEADER_SIZE;
    int salvage = (q->opt.flags & QUAD_SALVAGE) != 0;
    state_reset(q);
    q->ckpt_seq = 0;
    uint64_t mark = mark_read(q);
    int rc = try_checkpoint(q, size, &pos);
    if (rc) return rc;
    if (pos > mark) mark = pos;   /* a checkpoint slot is written only after its parts are synced */
    if (mark > size && !salvage) {
        quad_set_error("%s: the durable mark says %llu bytes were synced, the file has %llu",
                       q->path, (unsigned long long)mark, (unsigned long long)size);
        return HANU_ERR_CORRUPT;
    }
    q->ckpt_tail = pos;
    q->recovered_frames = 0;
    uint64_t durable_epoch = atomic_load(&q->epoch);   /* of the frames before the mark */
    for (;;) {
        size_t len = 0;
        const char *why = "";
        rc = frame_read(q, pos, size, &len, &why);
        if (rc < 0) return rc;
        if (rc == 1) {
            if (pos >= mark || salvage) break;   /* the torn tail: unsynced, anything goes */
            quad_set_error("%s: %s at offset %llu, before the durable mark at %llu (synced frames are damaged)",
                           q->path, why, (unsigned long long)pos, (unsigned long long)mark);
            return HANU_ERR_CORRUPT;
        }
        const uint8_t *f = q->fbuf;
        unsigned type = f[12];
        uint64_t epoch = hanu_get_u64(f + 16), cur = atomic_load(&q->epoch);
        const uint8_t *body = f + QF_FRAME_HDR, *end = f + len;
        if (QF_IS_CKPT(type)) {
            rc = epoch == cur ? 0 : HANU_ERR_CORRUPT;
        } else if (type == QF_T_RELOCATE) {   /* takes no epoch: written at the current one */
            rc = epoch == cur ? qf_relocate_parse(q, body, end, pos + QF_FRAME_HDR, epoch,
                                                  hanu_get_u64(f + 24)) : HANU_ERR_CORRUPT;
        } else if (epoch != cur + 1) {
            rc = HANU_ERR_CORRUPT;
        } else if (type == QF_T_APPEND) {
            rc = append_parse(q, body, end, pos + QF_FRAME_HDR, epoch);
        } else if (type == QF_T_RETIRE) {
            rc = retire_parse(q, body, end, epoch);
        } else {
            rc = HANU_ERR_CORRUPT;
        }
        if (rc == HANU_ERR_CORRUPT && salvage) break;
        if (rc == HANU_ERR_CORRUPT)
            quad_set_error("%s: %s frame at offset %llu (epoch %llu, expected %llu) breaks a format rule",
                           q->path, type_name(type), (unsigned long long)pos,
                           (unsigned long long)epoch, (unsigned long long)cur + (!QF_IS_CKPT(type) && type != QF_T_RELOCATE));
        if (rc) return rc;
        if (!QF_IS_CKPT(type) && type != QF_T_RELOCATE) atomic_store(&q->epoch, epoch);
        q->recovered_frames++;
        pos += len;
        if (pos <= mark) durable_epoch = atomic_load(&q->epoch);
    }
    q->tail = pos;
    uint64_t e = atomic_load(&q->epoch);
    qf_written(q, e);
    q->durable_off = pos < mark ? pos : mark;
    if (q->opt.flags & QUAD_RDONLY) {
        atomic_store(&q->durable, durable_epoch);   /* no sync: only what the mark covers */
        return 0;
    }
    if (pos < size) {
        /* zero what follows the log (past the mark: never acknowledged as
         * synced, or cut off by QUAD_SALVAGE) so that no stale frame can
         * follow a later one */
        static const uint8_t zeros[65536];
        for (uint64_t o = pos; o < size; o += sizeof zeros) {
            size_t k = size - o < sizeof zeros ? (size_t)(size - o) : sizeof zeros;
            rc = quad_pwrite(q, zeros, k, o);
            if (rc) return rc;
        }
    }
    /* what was read back may still sit only in the page cache (a crash of the
     * process, not of the machine): sync before calling it durable */
    atomic_store(&q->durable, 0);
    q->durable_off = 0;
    rc = qf_sync(q, NULL);
    /* salvage cut the log before the old mark: put the lowered mark on the
     * disk too, or the next open would refuse the zeroed range again */
    if (rc == 0 && pos < mark) rc = qf_sync(q, NULL);
    return rc;
}
