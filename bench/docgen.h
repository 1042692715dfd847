/*
 * docgen: the documents of the "documents" benchmark (docs/BENCHMARKS.md),
 * header-only so that any bench program (docbench, a rebuild checker) can
 * produce the very same bytes.
 *
 * Document i for seed S is a pure function of (S, i), e.g.
 *
 *   {"user":"u042","kind":"note","tags":["t07","t31"],"ts":1700000000007,
 *    "title":"five words","body":"about fifty words ..."}
 *
 *   user   1 000 values u000-u999, uniform
 *   kind   5 values (note, task, event, email, alert), uniform
 *   tags   2 distinct values of 50 (t00-t49), uniform
 *   ts     DOCGEN_TS_BASE + i: increasing with i
 *   title  5 words; body DOCGEN_BODY_MIN-DOCGEN_BODY_MAX words (51 on average),
 *          each word drawn from the vocabulary with a Zipf skew of exponent 1:
 *          the word of rank r (0-based) has probability 1 / ((r + 1) * H),
 *          H = sum of 1/k for k = 1..3 000 (about 8.6), so the commonest word
 *          is 11.6% of all words and is in nearly every document.
 *
 * The vocabulary (DOCGEN_VOCAB words, rank order) is also a pure function of
 * S: pronounceable pseudo-words of two or three consonant-vowel syllables and
 * one time in three a final consonant ("bakodu", "zerin"), all distinct, lowercase
 * ASCII, so documents never need JSON escapes. Documents average about 450
 * bytes (docbench reports the exact mean as avg_doc_bytes).
 *
 * Everything is static inline: no state outside struct docgen, which the
 * caller owns (about 70 KB; docgen_init fills it, nothing to free).
 */
#ifndef HANU_BENCH_DOCGEN_H
#define HANU_BENCH_DOCGEN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DOCGEN_VOCAB 3000
#define DOCGEN_WORD_MAX 8          /* 3 syllables of 2 letters + 1 final consonant */
#define DOCGEN_USERS 1000
#define DOCGEN_KINDS 5
#define DOCGEN_TAGS 50
#define DOCGEN_TITLE_WORDS 5
#define DOCGEN_BODY_MIN 46
#define DOCGEN_BODY_MAX 56
#define DOCGEN_TS_BASE 1700000000000ull
#define DOCGEN_DOC_MAX 1024        /* no document is longer (see docgen_doc) */
#define DOCGEN_GUIDE 8192          /* guide table buckets for Zipf sampling */

struct docgen {
    uint64_t seed;
    char words[DOCGEN_VOCAB][DOCGEN_WORD_MAX + 1];   /* NUL-terminated, rank order */
    uint8_t word_len[DOCGEN_VOCAB];
    double cdf[DOCGEN_VOCAB];                        /* Zipf CDF over ranks, cdf[last] = 1 */
    uint16_t guide[DOCGEN_GUIDE];    /* guide[j] = first rank with cdf > j / DOCGEN_GUIDE */
};

/* splitmix64: a stream generator good enough for workloads, and a mixer for seeds. */
static inline uint64_t docgen_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n < 2^32 (multiply-shift: no modulo bias worth noting). */
static inline uint32_t docgen_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(((docgen_next(s) >> 32) * (uint64_t)n) >> 32);
}

static inline const char *docgen_kind(uint32_t k)
{
    static const char *const kinds[DOCGEN_KINDS] = { "note", "task", "event", "email", "alert" };
    return kinds[k % DOCGEN_KINDS];
}

/* "u042": the user value u (0-999) as it appears in documents; buf >= 5 bytes. */
static inline size_t docgen_user(uint32_t u, char *buf)
{
    u %= DOCGEN_USERS;
    buf[0] = 'u';
    buf[1] = (char)('0' + u / 100);
    buf[2] = (char)('0' + u / 10 % 10);
    buf[3] = (char)('0' + u % 10);
    buf[4] = 0;
    return 4;
}

/* The word of rank r (0 = commonest). */
static inline const char *docgen_word(const struct docgen *g, uint32_t r, size_t *len)
{
    *len = g->word_len[r];
    return g->words[r];
}

/*
 * A rank drawn with the documents' Zipf skew: the first rank whose CDF exceeds
 * a uniform u. The guide table jumps to the bucket of u, then a short scan
 * (measured: a plain binary search here was 20% of the client's CPU).
 */
static inline uint32_t docgen_zipf(const struct docgen *g, uint64_t *rng)
{
    double u = (double)(docgen_next(rng) >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1) */
    uint32_t r = g->guide[(uint32_t)(u * DOCGEN_GUIDE)];
    while (g->cdf[r] <= u)
        r++;                       /* ends: cdf[DOCGEN_VOCAB - 1] = 1 > u */
    return r;
}

static inline void docgen_init(struct docgen *g, uint64_t seed)
{
    static const char cons[] = "bcdfghjklmnprstvz", vow[] = "aeiou", fin[] = "nrstlmk";
    uint16_t table[8192];                 /* open addressing over word hashes: index + 1 */
    memset(table, 0, sizeof table);
    memset(g, 0, sizeof *g);
    g->seed = seed;
    uint64_t rng = seed ^ 0x5EEDC0DEB0A7ull;
    for (uint32_t n = 0; n < DOCGEN_VOCAB;) {
        char w[DOCGEN_WORD_MAX + 1];
        size_t len = 0;
        uint32_t syl = 2 + docgen_below(&rng, 2);
        for (uint32_t s = 0; s < syl; s++) {
            w[len++] = cons[docgen_below(&rng, sizeof cons - 1)];
            w[len++] = vow[docgen_below(&rng, sizeof vow - 1)];
        }
        if (docgen_below(&rng, 3) == 0)
            w[len++] = fin[docgen_below(&rng, sizeof fin - 1)];
        w[len] = 0;
        uint64_t h = 1469598103934665603ull;          /* FNV-1a */
        for (size_t i = 0; i < len; i++)
            h = (h ^ (uint8_t)w[i]) * 1099511628211ull;
        size_t slot = (size_t)h & 8191;
        int dup = 0;
        while (table[slot]) {
            if (strcmp(g->words[table[slot] - 1], w) == 0) {
                dup = 1;
                break;
            }
            slot = (slot + 1) & 8191;
        }
        if (dup)
            continue;
        table[slot] = (uint16_t)(n + 1);
        memcpy(g->words[n], w, len + 1);
        g->word_len[n] = (uint8_t)len;
        n++;
    }
    double h = 0;
    for (uint32_t r = 0; r < DOCGEN_VOCAB; r++)
        h += 1.0 / (double)(r + 1);
    double acc = 0;
    for (uint32_t r = 0; r < DOCGEN_VOCAB; r++) {
        acc += 1.0 / (double)(r + 1) / h;
        g->cdf[r] = acc;
    }
    g->cdf[DOCGEN_VOCAB - 1] = 1.0;
    uint32_t r = 0;
    for (uint32_t j = 0; j < DOCGEN_GUIDE; j++) {
        while (g->cdf[r] <= (double)j / DOCGEN_GUIDE)
            r++;
        g->guide[j] = (uint16_t)r;
    }
}

static inline size_t docgen_put(char *out, size_t len, const char *s, size_t n)
{
    memcpy(out + len, s, n);
    return len + n;
}

static inline size_t docgen_put_words(const struct docgen *g, uint64_t *rng, uint32_t count,
                                      char *out, size_t len)
{
    for (uint32_t k = 0; k < count; k++) {
        size_t wl;
        const char *w = docgen_word(g, docgen_zipf(g, rng), &wl);
        if (k)
            out[len++] = ' ';
        len = docgen_put(out, len, w, wl);
    }
    return len;
}

/*
 * Writes document i (no NUL) into out, which must hold DOCGEN_DOC_MAX bytes;
 * returns its length. The longest possible document (every word of 8 letters)
 * is about 660 bytes, so DOCGEN_DOC_MAX always suffices.
 */
static inline size_t docgen_doc(const struct docgen *g, uint64_t i, char *out)
{
    uint64_t rng = g->seed * 0xD1B54A32D192ED03ull ^ (i + 1) * 0x9E3779B97F4A7C15ull;
    docgen_next(&rng);
    char tmp[32];
    size_t len = docgen_put(out, 0, "{\"user\":\"", 9);
    len = docgen_put(out, len, tmp, docgen_user(docgen_below(&rng, DOCGEN_USERS), tmp));
    len = docgen_put(out, len, "\",\"kind\":\"", 10);
    const char *kind = docgen_kind(docgen_below(&rng, DOCGEN_KINDS));
    len = docgen_put(out, len, kind, strlen(kind));
    uint32_t t1 = docgen_below(&rng, DOCGEN_TAGS);
    uint32_t t2 = docgen_below(&rng, DOCGEN_TAGS - 1);
    if (t2 >= t1)
        t2++;                                     /* two distinct tags */
    char tags[] = "\",\"tags\":[\"t00\",\"t00\"],\"ts\":";
    tags[12] = (char)('0' + t1 / 10);
    tags[13] = (char)('0' + t1 % 10);
    tags[18] = (char)('0' + t2 / 10);
    tags[19] = (char)('0' + t2 % 10);
    len = docgen_put(out, len, tags, sizeof tags - 1);
    uint64_t ts = DOCGEN_TS_BASE + i;
    size_t d = sizeof tmp;
    do {
        tmp[--d] = (char)('0' + ts % 10);
        ts /= 10;
    } while (ts);
    len = docgen_put(out, len, tmp + d, sizeof tmp - d);
    len = docgen_put(out, len, ",\"title\":\"", 10);
    len = docgen_put_words(g, &rng, DOCGEN_TITLE_WORDS, out, len);
    len = docgen_put(out, len, "\",\"body\":\"", 10);
    uint32_t nbody = DOCGEN_BODY_MIN + docgen_below(&rng, DOCGEN_BODY_MAX - DOCGEN_BODY_MIN + 1);
    len = docgen_put_words(g, &rng, nbody, out, len);
    len = docgen_put(out, len, "\"}", 2);
    return len;
}

#endif
