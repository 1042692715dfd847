/*
 * tokenize.c: text_tokenize (rules in text.h). The text is folded (NFKC +
 * case fold) into one buffer, then one pass over the code points cuts words,
 * looking one code point ahead for the apostrophe/period/comma rules.
 *
 * Folding is the cost of indexing text, and most text is ASCII, whose fold is
 * only A-Z -> a-z. So ASCII is folded here and utf8proc_map gets only the
 * pieces with non-ASCII bytes, each with the ASCII character before it: a
 * piece starts at an ASCII character followed by ASCII or at the text's start,
 * and ends before an ASCII character. That cut is exact: an ASCII character is
 * a starter (canonical class 0) that never composes with what comes before it
 * and maps to itself or its lowercase alone, so normalisation cannot cross it;
 * the character before a piece goes with it because combining marks after it
 * may compose with it ("e" + U+0301 -> "é"). Invalid UTF-8 is still refused
 * before any token is given, since the fold completes before cutting starts.
 * text_tokenize_reference folds the whole text with one utf8proc_map call
 * and cuts it one character at a time (no runs), the definition the unit test
 * checks this against.
 */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

enum char_class { C_OTHER, C_LETTER, C_DIGIT, C_IDEOGRAPH, C_MID_LETTER, C_MID_NUM, C_MID_BOTH };

static int is_ideograph(int32_t c)
{
    return (c >= 0x3040 && c <= 0x30FF) ||      /* Hiragana, Katakana */
           (c >= 0x31F0 && c <= 0x31FF) ||      /* Katakana extensions */
           (c >= 0x3400 && c <= 0x4DBF) ||      /* Han extension A */
           (c >= 0x4E00 && c <= 0x9FFF) ||      /* Han */
           (c >= 0xF900 && c <= 0xFAFF) ||      /* Han compatibility */
           (c >= 0x20000 && c <= 0x3FFFF);      /* Han extensions B.. */
}

static enum char_class classify(int32_t c)
{
    if (c == '\'' || c == 0x2019) return C_MID_LETTER;
    if (c == '.') return C_MID_BOTH;
    if (c == ',') return C_MID_NUM;
    if (c < 0x80) {     /* fast path for ASCII */
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return C_LETTER;
        if (c >= '0' && c <= '9') return C_DIGIT;
        return c == '_' ? C_LETTER : C_OTHER;
    }
    if (is_ideograph(c)) return C_IDEOGRAPH;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_PC:
        return C_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return C_DIGIT;
    default:
        return C_OTHER;
    }
}

/* classify() of every ASCII character, for the cut's fast path over runs of
   ASCII word characters. */
static const uint8_t ascii_class[128] = {
    ['0' ... '9'] = C_DIGIT, ['a' ... 'z'] = C_LETTER, ['A' ... 'Z'] = C_LETTER, ['_'] = C_LETTER,
    ['\''] = C_MID_LETTER, ['.'] = C_MID_BOTH, [','] = C_MID_NUM,
};

/* 1 for the ASCII word characters (letters, digits, '_'), 0 for every other byte. */
static const uint8_t ascii_word[256] = {
    ['0' ... '9'] = 1, ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['_'] = 1,
};

static inline int ascii_word_char(uint8_t c)
{
    return ascii_word[c];
}

/* 1 when s[0..len) has no byte above 0x7F (eight bytes at a time). */
static int all_ascii(const uint8_t *s, size_t len)
{
    uint64_t high = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        high |= w;
    }
    for (; i < len; i++) high |= s[i];
    return (high & 0x8080808080808080ull) == 0;
}

/* The token being built: bytes beyond the limit are counted, not kept. */
typedef struct token_builder {
    char bytes[TEXT_MAX_TOKEN_BYTES + 1];
    size_t len;             /* may exceed TEXT_MAX_TOKEN_BYTES: then it is dropped */
    uint32_t position;
    enum char_class last;   /* C_LETTER or C_DIGIT of the last word character */
} token_builder;

static void token_add(token_builder *t, const uint8_t *p, size_t n, enum char_class cls)
{
    if (t->len + n <= TEXT_MAX_TOKEN_BYTES) memcpy(t->bytes + t->len, p, n);
    t->len += n;
    t->last = cls;
}

static int token_end(token_builder *t, text_token_fn fn, void *ctx)
{
    if (t->len == 0) return 0;
    int rc = 0;
    if (t->len <= TEXT_MAX_TOKEN_BYTES && fn) {
        t->bytes[t->len] = '\0';
        text_token tok = { .bytes = t->bytes, .len = t->len, .position = t->position };
        rc = fn(ctx, &tok);
    }
    t->position++;
    t->len = 0;
    return rc;
}

/* A mid-word character stays in the word when it joins two letters (or two
 * digits, for the numeric separators). */
static int joins(enum char_class mid, enum char_class before, enum char_class after)
{
    if (before != after) return 0;
    if (before == C_LETTER) return mid == C_MID_LETTER || mid == C_MID_BOTH;
    if (before == C_DIGIT) return mid == C_MID_NUM || mid == C_MID_BOTH;
    return 0;
}

#define FOLD_FLAGS (UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_COMPOSE | UTF8PROC_CASEFOLD | UTF8PROC_IGNORE)
#define FOLD_STACK 2048    /* folded texts up to this size need no allocation */

static int fold_error(utf8proc_ssize_t n)
{
    return n == UTF8PROC_ERROR_NOMEM ? HANU_ERR_NOMEM : HANU_ERR_INVALID;
}

/* The folded text being written: in the caller's stack buffer, then on the heap. */
typedef struct fold_out {
    uint8_t *p;
    size_t len, cap;
    int heap;
} fold_out;

static int fold_reserve(fold_out *o, size_t extra)
{
    if (o->cap - o->len >= extra) return HANU_OK;
    size_t cap = o->cap * 2;
    while (cap - o->len < extra) cap *= 2;
    uint8_t *p = o->heap ? realloc(o->p, cap) : malloc(cap);
    if (!p) return HANU_ERR_NOMEM;
    if (!o->heap) memcpy(p, o->p, o->len);
    o->p = p;
    o->cap = cap;
    o->heap = 1;
    return HANU_OK;
}

static int fold(const uint8_t *s, size_t len, fold_out *o)
{
    size_t i = 0;
    while (i < len) {
        size_t start = i;                 /* ASCII run [start, i) */
        while (i < len && s[i] < 0x80) i++;
        size_t ascii_end = i < len && i > start ? i - 1 : i;   /* the last one goes with the piece */
        int rc = fold_reserve(o, ascii_end - start);
        if (rc) return rc;
        for (size_t k = start; k < ascii_end; k++)
            o->p[o->len++] = (uint8_t)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] | 0x20 : s[k]);
        if (i == len) break;
        while (i < len && s[i] >= 0x80) i++;
        uint8_t *piece = NULL;
        utf8proc_ssize_t n = utf8proc_map(s + ascii_end, (utf8proc_ssize_t)(i - ascii_end), &piece, FOLD_FLAGS);
        if (n < 0) return fold_error(n);
        rc = fold_reserve(o, (size_t)n);
        if (!rc) {
            memcpy(o->p + o->len, piece, (size_t)n);
            o->len += (size_t)n;
        }
        free(piece);
        if (rc) return rc;
    }
    return HANU_OK;
}

/* Cuts the folded text t[0..n) into tokens. runs: a run of ASCII word characters
   is added at once (the reference goes character by character). */
static int cut(const uint8_t *t, size_t n, text_token_fn fn, void *ctx, uint32_t *n_positions, int runs)
{
    token_builder tb = { .len = 0, .position = 0, .last = C_OTHER };
    int rc = 0;
    size_t i = 0;
    while (i < n && rc == 0) {
        int32_t c;
        size_t w;
        if (runs && ascii_word_char(t[i])) {
            size_t j = i + 1;
            while (j < n && ascii_word_char(t[j])) j++;
            token_add(&tb, t + i, j - i, (enum char_class)ascii_class[t[j - 1]]);
            i = j;
            continue;
        }
        if (t[i] < 0x80) {
            c = t[i];
            w = 1;
        } else {
            utf8proc_ssize_t r = utf8proc_iterate(t + i, (utf8proc_ssize_t)(n - i), &c);
            if (r <= 0) { rc = HANU_ERR_INVALID; break; }   /* cannot happen after utf8proc_map */
            w = (size_t)r;
        }
        enum char_class cls = classify(c);
        if (cls == C_LETTER || cls == C_DIGIT) {
            token_add(&tb, t + i, w, cls);
        } else if (cls == C_IDEOGRAPH) {
            rc = token_end(&tb, fn, ctx);
            if (rc == 0) {
                token_add(&tb, t + i, w, cls);
                rc = token_end(&tb, fn, ctx);
            }
        } else if (cls != C_OTHER && tb.len > 0 && i + w < n) {
            int32_t next;
            utf8proc_ssize_t w2 = utf8proc_iterate(t + i + w, (utf8proc_ssize_t)(n - i - w), &next);
            enum char_class after = w2 > 0 ? classify(next) : C_OTHER;
            if (joins(cls, tb.last, after)) {
                token_add(&tb, t + i, w, tb.last);
            } else {
                rc = token_end(&tb, fn, ctx);
            }
        } else {
            rc = token_end(&tb, fn, ctx);
        }
        i += w;
    }
    if (rc == 0) rc = token_end(&tb, fn, ctx);
    if (n_positions) *n_positions = tb.position;
    return rc;
}

/* cut() of text with no byte above 0x7F, read once: its fold is A-Z -> a-z alone,
   done as a token's bytes are copied. A token is runs of word characters joined
   by a mid-word character between two of one class (the rules of cut). */
static int cut_ascii(const uint8_t *t, size_t n, text_token_fn fn, void *ctx, uint32_t *n_positions)
{
    char tok[TEXT_MAX_TOKEN_BYTES + 1];
    uint32_t position = 0;
    int rc = 0;
    size_t i = 0;
    while (i < n && rc == 0) {
        if (!ascii_word[t[i]]) {
            i++;
            continue;
        }
        size_t len = 0;   /* may pass the limit: the token is then dropped, its position kept */
        for (;;) {
            size_t j = i;
            do {
                if (len < TEXT_MAX_TOKEN_BYTES) tok[len] = (char)(t[j] >= 'A' && t[j] <= 'Z' ? t[j] | 0x20 : t[j]);
                len++;
                j++;
            } while (j < n && ascii_word[t[j]]);
            enum char_class last = (enum char_class)ascii_class[t[j - 1]];
            i = j;   /* t[j], if any, is not a word character */
            if (j + 1 >= n || !ascii_word[t[j + 1]] ||
                !joins((enum char_class)ascii_class[t[j]], last, (enum char_class)ascii_class[t[j + 1]]))
                break;
            if (len < TEXT_MAX_TOKEN_BYTES) tok[len] = (char)t[j];
            len++;
            i = j + 1;
        }
        if (len <= TEXT_MAX_TOKEN_BYTES && fn) {
            tok[len] = '\0';
            text_token tk = { .bytes = tok, .len = len, .position = position };
            rc = fn(ctx, &tk);
        }
        position++;
    }
    if (n_positions) *n_positions = position;
    return rc;
}

int text_tokenize(const char *s, size_t len, text_token_fn fn, void *ctx, uint32_t *n_positions)
{
    if (n_positions) *n_positions = 0;
    if (len > (size_t)INT32_MAX) return HANU_ERR_TOO_LARGE;
    if (all_ascii((const uint8_t *)s, len)) return cut_ascii((const uint8_t *)s, len, fn, ctx, n_positions);
    uint8_t stack[FOLD_STACK];
    fold_out o = { stack, 0, sizeof stack, 0 };
    int rc = fold((const uint8_t *)s, len, &o);
    if (rc == HANU_OK) rc = cut(o.p, o.len, fn, ctx, n_positions, 1);
    if (o.heap) free(o.p);
    return rc;
}

int text_tokenize_reference(const char *s, size_t len, text_token_fn fn, void *ctx, uint32_t *n_positions)
{
    if (n_positions) *n_positions = 0;
    if (len > (size_t)INT32_MAX) return HANU_ERR_TOO_LARGE;
    uint8_t *folded = NULL;
    utf8proc_ssize_t n = len == 0 ? 0 : utf8proc_map((const uint8_t *)s, (utf8proc_ssize_t)len, &folded, FOLD_FLAGS);
    if (n < 0) return fold_error(n);
    int rc = cut(folded, (size_t)n, fn, ctx, n_positions, 0);
    free(folded);
    return rc;
}
