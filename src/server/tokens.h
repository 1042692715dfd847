/*
 * tokens.h: the bearer tokens of --tokens / HANUDB_TOKENS, shared by both faces of
 * the server: HTTP (Authorization: Bearer, http_auth.c) and the key-value protocol
 * (the Auth op, kv_server.c). One table, one lookup and one scope rule, so that a
 * token grants the same over either protocol.
 */
#ifndef HANU_TOKENS_H
#define HANU_TOKENS_H

#include <stddef.h>

typedef struct auth_token {
    char *token;
    char scope[17];            /* hex of SHA-256(token)'s first 8 bytes: scopes idempotency keys */
    int read_write;
    char **collections;        /* NULL: every database and collection ("*") */
    size_t ncollections;
} auth_token;

typedef struct auth_tokens {
    auth_token *v;
    size_t n;                  /* 0: auth is off */
} auth_tokens;

/* Loads "TOKEN ro|rw *|col1,col2" lines (one a line, or ';'-separated; '#' comments)
   from file_or_lines (a path, or the lines themselves when it holds a space) and from
   lines; either may be NULL or empty. HANU_OK, or an error with a message in err
   that never holds a token. */
int auth_tokens_load(auth_tokens *ts, const char *file_or_lines, const char *lines, char *err, size_t errcap);
void auth_tokens_free(auth_tokens *ts);

/* The token whose text is t[0..len), or NULL. Every candidate is compared in full,
   so the time taken does not tell a matching prefix apart. */
const auth_token *auth_tokens_find(const auth_tokens *ts, const void *t, size_t len);

/* Whether token t may read (write 0) or write (write 1) the database or collection
   name[0..len) (name NULL: one that no scoped token covers). t must not be NULL. */
int auth_token_allows(const auth_token *t, const char *name, size_t len, int write);

#endif
