/*
 * tokenize.c: text_tokenize (rules in text.h). One utf8proc_map call folds
 * the whole text (NFKC + case fold), then one pass over the code points cuts
 * words, looking one code point ahead for the apostrophe/period/comma rules.
 */
#include "text/text.h"

#include <stdlib.h>
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

int text_tokenize(const char *s, size_t len, text_token_fn fn, void *ctx, uint32_t *n_positions)
{
    if (n_positions) *n_positions = 0;
    if (len > (size_t)INT32_MAX) return HANU_ERR_TOO_LARGE;
    uint8_t *folded = NULL;
    utf8proc_ssize_t n = len == 0 ? 0 : utf8proc_map((const uint8_t *)s, (utf8proc_ssize_t)len, &folded,
        UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_COMPOSE | UTF8PROC_CASEFOLD | UTF8PROC_IGNORE);
    if (n < 0) return n == UTF8PROC_ERROR_NOMEM ? HANU_ERR_NOMEM : HANU_ERR_INVALID;

    token_builder t = { .len = 0, .position = 0, .last = C_OTHER };
    int rc = 0;
    utf8proc_ssize_t i = 0;
    while (i < n && rc == 0) {
        int32_t c;
        utf8proc_ssize_t w = utf8proc_iterate(folded + i, n - i, &c);
        if (w <= 0) { rc = HANU_ERR_INVALID; break; }   /* cannot happen after utf8proc_map */
        enum char_class cls = classify(c);
        if (cls == C_LETTER || cls == C_DIGIT) {
            token_add(&t, folded + i, (size_t)w, cls);
        } else if (cls == C_IDEOGRAPH) {
            rc = token_end(&t, fn, ctx);
            if (rc == 0) {
                token_add(&t, folded + i, (size_t)w, cls);
                rc = token_end(&t, fn, ctx);
            }
        } else if (cls != C_OTHER && t.len > 0 && i + w < n) {
            int32_t next;
            utf8proc_ssize_t w2 = utf8proc_iterate(folded + i + w, n - i - w, &next);
            enum char_class after = w2 > 0 ? classify(next) : C_OTHER;
            if (joins(cls, t.last, after)) {
                token_add(&t, folded + i, (size_t)w, t.last);
            } else {
                rc = token_end(&t, fn, ctx);
            }
        } else {
            rc = token_end(&t, fn, ctx);
        }
        i += w;
    }
    if (rc == 0) rc = token_end(&t, fn, ctx);
    free(folded);
    if (n_positions) *n_positions = t.position;
    return rc;
}
