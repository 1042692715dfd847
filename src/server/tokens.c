/*
 * tokens.c: the bearer token table (tokens.h): parsing --tokens, the constant-time
 * lookup and the scope rule both protocols apply.
 */
#include "server/tokens.h"
#include "base/base.h"

#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load_lines(auth_tokens *ts, const char *text, char *err, size_t errcap)
{
    char *copy = strdup(text), *save = NULL;
    if (!copy) return HANU_ERR_NOMEM;
    int lineno = 0;
    for (char *line = strtok_r(copy, "\n;", &save); line; line = strtok_r(NULL, "\n;", &save)) {
        lineno++;
        while (*line == ' ' || *line == '\t' || *line == '\r') line++;
        if (!*line || *line == '#') continue;
        char tok[256], mode[8], cols[4096];
        int n = sscanf(line, "%255s %7s %4095s", tok, mode, cols);
        if (n != 3 || (strcmp(mode, "ro") && strcmp(mode, "rw")) || strlen(tok) < 8) {
            snprintf(err, errcap, "tokens line %d: want \"TOKEN ro|rw *|col1,col2\" with a token of "
                     "at least 8 characters", lineno);
            free(copy);
            return HANU_ERR_INVALID;
        }
        auth_token *nt = realloc(ts->v, (ts->n + 1) * sizeof *nt);
        if (!nt) { free(copy); return HANU_ERR_NOMEM; }
        ts->v = nt;
        auth_token *t = &ts->v[ts->n++];
        memset(t, 0, sizeof *t);
        t->token = strdup(tok);
        unsigned char md[32];
        SHA256((const unsigned char *)tok, strlen(tok), md);
        for (int i = 0; i < 8; i++) snprintf(t->scope + 2 * i, 3, "%02x", md[i]);
        t->read_write = !strcmp(mode, "rw");
        if (strcmp(cols, "*")) {
            char *s2 = NULL;
            for (char *col = strtok_r(cols, ",", &s2); col; col = strtok_r(NULL, ",", &s2)) {
                t->collections = realloc(t->collections, (t->ncollections + 1) * sizeof(char *));
                t->collections[t->ncollections++] = strdup(col);
            }
        }
    }
    free(copy);
    return HANU_OK;
}

static int read_file(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return HANU_ERR_IO;
    hanu_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) hanu_buf_append(&b, chunk, n);
    fclose(f);
    hanu_buf_append(&b, "", 1);
    *out = (char *)b.data;
    return HANU_OK;
}

int auth_tokens_load(auth_tokens *ts, const char *file_or_lines, const char *lines, char *err, size_t errcap)
{
    if (file_or_lines && *file_or_lines && strchr(file_or_lines, ' ')) {
        /* HANUDB_TOKENS="tok1 rw *;tok2 ro users": the lines themselves. */
        int rc = load_lines(ts, file_or_lines, err, errcap);
        if (rc) return rc;
    } else if (file_or_lines && *file_or_lines) {
        char *text = NULL;
        if (read_file(file_or_lines, &text) != HANU_OK) {
            snprintf(err, errcap, "cannot read the tokens file %s: %s", file_or_lines, strerror(errno));
            return HANU_ERR_IO;
        }
        int rc = load_lines(ts, text, err, errcap);
        free(text);
        if (rc) return rc;
    }
    if (lines && *lines) return load_lines(ts, lines, err, errcap);
    return HANU_OK;
}

void auth_tokens_free(auth_tokens *ts)
{
    for (size_t i = 0; i < ts->n; i++) {
        free(ts->v[i].token);
        for (size_t j = 0; j < ts->v[i].ncollections; j++) free(ts->v[i].collections[j]);
        free(ts->v[i].collections);
    }
    free(ts->v);
    ts->v = NULL;
    ts->n = 0;
}

const auth_token *auth_tokens_find(const auth_tokens *ts, const void *text, size_t tl)
{
    const char *t = text;
    for (size_t i = 0; i < ts->n; i++) {
        const char *k = ts->v[i].token;
        size_t kl = strlen(k);
        /* Compare every byte so that timing does not tell a prefix apart. */
        unsigned diff = (unsigned)(kl ^ tl);
        for (size_t j = 0; j < kl; j++) diff |= (unsigned)(k[j] ^ (j < tl ? t[j] : 0));
        if (!diff) return &ts->v[i];
    }
    return NULL;
}

int auth_token_allows(const auth_token *t, const char *name, size_t len, int write)
{
    if (write && !t->read_write) return 0;
    if (!t->collections) return 1;            /* "*" */
    for (size_t i = 0; name && i < t->ncollections; i++)
        if (strlen(t->collections[i]) == len && !memcmp(t->collections[i], name, len)) return 1;
    return 0;
}
