/*
 * numbering.c: claims of txn ranges in the bucket (numbering.h). One object per
 * base, numbering/<base, 20 digits>, so that put-if-absent makes a base one
 * claimant's; its body, {"base":..,"term":..}, names the term that claimed it.
 */
#include "replica/numbering.h"
#include "json/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUMBERING_ATTEMPTS 64

typedef struct highest {
    uint64_t base, term;
} highest;

static void claim_key(uint64_t base, char *key, size_t cap)
{
    snprintf(key, cap, NUMBERING_KEY_PREFIX "%020" PRIu64, base);
}

static int parse_key(const char *key, uint64_t *base)
{
    size_t plen = sizeof NUMBERING_KEY_PREFIX - 1;
    if (strncmp(key, NUMBERING_KEY_PREFIX, plen) != 0 || strlen(key) != plen + 20) return -1;
    for (size_t i = plen; i < plen + 20; i++)
        if (key[i] < '0' || key[i] > '9') return -1;
    *base = strtoull(key + plen, NULL, 10);
    return 0;
}

static int note_claim(void *ctx, const char *key, uint64_t size)
{
    (void)size;
    highest *h = ctx;
    uint64_t base;
    if (parse_key(key, &base) == 0 && base > h->base) h->base = base;   /* a stray object: audit's business */
    return 0;
}

int numbering_highest(bucket *b, uint64_t *base, uint64_t *term, char *err, size_t errcap)
{
    highest h = { 0, 0 };
    *base = *term = 0;
    int rc = bucket_list(b, NUMBERING_KEY_PREFIX, note_claim, &h, err, errcap);
    if (rc || !h.base) return rc;
    char key[sizeof NUMBERING_KEY_PREFIX + 24];
    claim_key(h.base, key, sizeof key);
    hanu_buf body = { 0 };
    rc = bucket_get(b, key, &body, NULL, err, errcap);
    if (rc == HANU_OK) {
        /* {"base":B,"term":T}, written by numbering_claim only. The key alone bounds the
           numbering; a body that does not parse only loses its term (audit reports it). */
        json_member m;
        if (json_member_find((const char *)body.data, body.len, "term", 4, &m, NULL, 0) == HANU_OK && m.found &&
            m.type == JSON_NUMBER) {
            char num[24] = "";
            size_t n = m.end - m.start;
            if (n < sizeof num) memcpy(num, body.data + m.start, n);
            h.term = strtoull(num, NULL, 10);
        }
    }
    hanu_buf_free(&body);
    *base = h.base;
    *term = h.term;
    return rc;
}

int numbering_claim(bucket *b, uint64_t last_txn, uint64_t term, uint64_t *base, char *err, size_t errcap)
{
    uint64_t top = 0, top_term = 0;
    int rc = numbering_highest(b, &top, &top_term, err, errcap);
    if (rc) return rc;
    uint64_t want = last_txn + NUMBERING_GAP;
    if (top && top + NUMBERING_GAP > want) want = top + NUMBERING_GAP;
    for (int i = 0; i < NUMBERING_ATTEMPTS; i++, want += NUMBERING_GAP) {
        if (want > (UINT64_MAX >> 2)) {
            snprintf(err, errcap, "txn numbering is exhausted (claimed up to %" PRIu64 ")", want);
            return HANU_ERR_INVALID;
        }
        char key[sizeof NUMBERING_KEY_PREFIX + 24], body[64];
        claim_key(want, key, sizeof key);
        int n = snprintf(body, sizeof body, "{\"base\":%" PRIu64 ",\"term\":%" PRIu64 "}", want, term);
        rc = bucket_put_if_absent(b, key, body, (size_t)n, NULL, err, errcap);
        if (rc == HANU_OK) {
            *base = want;
            return HANU_OK;
        }
        if (rc != HANU_ERR_EXISTS) return rc;
        /* Another claimant took this base first: the next one. */
    }
    snprintf(err, errcap, "no free txn range after %d attempts", NUMBERING_ATTEMPTS);
    return HANU_ERR_BUSY;
}
