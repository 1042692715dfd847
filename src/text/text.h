/*
 * text: the tokenizer shared by the full-text index and the search-query
 * parser, so that a document and a query cut words the same way. The rules
 * (docs/QUERY.md, "Tokens"):
 *
 *   1. The text is normalized with utf8proc to NFKC with case folding
 *      (NFKC_Casefold-like: COMPAT | COMPOSE | CASEFOLD | IGNORE | STABLE),
 *      so "ÉCOLE", "école" and "e\u0301cole" give one token and the ligature
 *      "ﬁ" gives "fi". Accents are kept ("cafe" and "café" differ).
 *   2. A token is a maximal run of word characters: letters (L*), combining
 *      marks (M*), numbers (N*) and the connector '_' (Pc). A simplified
 *      Unicode word boundary (UAX #29): an apostrophe (U+0027, U+2019) or a
 *      period between two letters stays inside the word ("don't", "u.s.a"),
 *      and a period or comma between two digits too ("3.14", "1,000").
 *      Everything else (spaces, punctuation, symbols, emoji) separates.
 *   3. Ideographs and kana (Han, Hiragana, Katakana, Hangul syllables are
 *      letters too, but CJK text has no spaces): each Han/kana character is a
 *      token of its own, as UAX #29 does.
 *   4. Tokens longer than TEXT_MAX_TOKEN_BYTES bytes after folding are
 *      dropped (not cut): they are not words (hashes, base64); positions still
 *      advance over them so that phrases do not join across them.
 *
 * Threads: no global state. Errors: HANU_ERR_INVALID for input that is not
 * UTF-8, HANU_ERR_NOMEM; a non-zero return of the callback stops and is
 * returned.
 */
#ifndef HANU_TEXT_H
#define HANU_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define TEXT_MAX_TOKEN_BYTES 64

typedef struct text_token {
    const char *bytes;      /* folded token, NUL-terminated, valid during the callback */
    size_t len;             /* 1..TEXT_MAX_TOKEN_BYTES */
    uint32_t position;      /* word position in the text, from 0 (for phrases) */
} text_token;

typedef int (*text_token_fn)(void *ctx, const text_token *tok);

/* Calls fn for every token of s[0..len) in order. Returns 0, the callback's
 * non-zero value, or a negative HANU_ERR_*. *n_positions (may be NULL) gets
 * the number of positions used (tokens, dropped long ones included): the
 * document length for BM25. */
int text_tokenize(const char *s, size_t len, text_token_fn fn, void *ctx, uint32_t *n_positions);

/* The same tokens by the definition itself: the whole text folded with one
 * utf8proc_map call. text_tokenize folds ASCII without utf8proc (faster, same
 * result); this one is kept for tests to compare against. */
int text_tokenize_reference(const char *s, size_t len, text_token_fn fn, void *ctx, uint32_t *n_positions);

#endif
