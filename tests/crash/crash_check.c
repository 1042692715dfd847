/*
 * crash_check.c: builds the disk states a crash could leave from a recorded
 * server run (crash_record.c, crash_workload.py), recovers each with
 * store_open and checks every promise the server had made by then
 * (docs/TESTING.md, "Crash states").
 *
 *   crash_check WORKDIR [--states N] [--seed N] [--keep DIR] [--dump] [--verbose]
 *
 * States:
 *  - process crash at each file operation: every operation before it applied
 *    (the page cache survives); every answer sent before it is owed.
 *  - power loss before each sync (and at the end of each run): the operations a
 *    sync has made durable, plus a prefix of the others in trace order, the last
 *    one possibly torn at a 512-byte or 4 KiB boundary, or all of them but one
 *    (pages written back out of order). File data is durable after fsync or
 *    fdatasync of its inode; a name (create, rename, unlink, mkdir) after an
 *    fsync of its directory. Owed: answers of `local` writes and everything
 *    they cover (txns up to the highest `local` txn answered).
 *
 * Checks on each state: start-up succeeds; every owed write is there with its
 * value and token, or a later write to its key is; nothing deleted comes back;
 * no batch is half applied; a new write gets a token above every token any
 * answer had carried (tokens never repeat).
 *
 * Exit status 0 when every state passed, 1 on a violation, 2 on bad input.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crash_trace.h"
#include "store/store.h"

#define FALLOC_PUNCH 0x02   /* FALLOC_FL_PUNCH_HOLE */
#define FALLOC_KEEP 0x01    /* FALLOC_FL_KEEP_SIZE */

/* ---- the trace ---- */

typedef struct op {
    uint32_t type, run;
    uint32_t len;          /* payload bytes after the fixed part */
    const uint8_t *fixed;  /* the crash_rec_* struct */
    const uint8_t *data;   /* path or bytes */
    char *path, *path2;    /* decoded paths (open, sync, rename, unlink, mkdir) */
    uint64_t fid;          /* the file: inode numbers are reused, so each creation gets a new id */
} op;

static op *ops;
static size_t n_ops, cap_ops;

static size_t fixed_size(uint32_t type)
{
    switch (type) {
    case CRASH_OPEN: return sizeof(crash_rec_open);
    case CRASH_WRITE: return sizeof(crash_rec_write);
    case CRASH_SYNC: return sizeof(crash_rec_sync);
    case CRASH_FALLOC: return sizeof(crash_rec_falloc);
    case CRASH_TRUNC: return sizeof(crash_rec_trunc);
    case CRASH_SEND: case CRASH_RECV: return sizeof(crash_rec_send);
    default: return 0;
    }
}

static char *strndup_s(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static int load_trace(const char *path, uint32_t run)
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 0 : -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size + 1);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) { fclose(f); return -1; }
    fclose(f);
    size_t at = 0;
    while (at + 8 <= (size_t)size) {
        uint32_t type, len;
        memcpy(&type, buf + at, 4);
        memcpy(&len, buf + at + 4, 4);
        if (at + 8 + len > (size_t)size) break;   /* a record cut by the process's death */
        size_t fs = fixed_size(type);
        if (fs > len) { fprintf(stderr, "%s: bad record at %zu\n", path, at); return -1; }
        if (n_ops == cap_ops) ops = realloc(ops, (cap_ops = cap_ops ? cap_ops * 2 : 4096) * sizeof *ops);
        op *o = &ops[n_ops++];
        memset(o, 0, sizeof *o);
        o->type = type;
        o->run = run;
        o->fixed = buf + at + 8;
        o->data = buf + at + 8 + fs;
        o->len = len - (uint32_t)fs;
        if (type == CRASH_OPEN || type == CRASH_SYNC || type == CRASH_UNLINK || type == CRASH_MKDIR ||
            type == CRASH_RMDIR)
            o->path = strndup_s(o->data, o->len);
        if (type == CRASH_RENAME) {
            const uint8_t *z = memchr(o->data, 0, o->len);
            if (!z) return -1;
            o->path = strndup_s(o->data, (size_t)(z - o->data));
            o->path2 = strndup_s(z + 1, o->len - (size_t)(z - o->data) - 1);
        }
        at += 8 + len;
    }
    return 0;
}

static uint64_t op_ino(const op *o)
{
    uint64_t ino;
    memcpy(&ino, o->fixed, 8);   /* every file record starts with the inode */
    return ino;
}

/* Names the file of every data op and file sync by a fresh id per creation. */
static void assign_fids(void)
{
    typedef struct m { uint64_t ino, fid; } m;
    m *map = NULL;
    size_t n = 0;
    uint64_t next = 1;
    for (size_t i = 0; i < n_ops; i++) {
        op *o = &ops[i];
        if (o->type != CRASH_OPEN && o->type != CRASH_WRITE && o->type != CRASH_FALLOC && o->type != CRASH_TRUNC &&
            o->type != CRASH_SYNC)
            continue;
        if (o->type == CRASH_SYNC) {
            crash_rec_sync r;
            memcpy(&r, o->fixed, sizeof r);
            if (r.is_dir) continue;
        }
        uint64_t ino = op_ino(o);
        int created = 0;
        if (o->type == CRASH_OPEN) {
            crash_rec_open r;
            memcpy(&r, o->fixed, sizeof r);
            created = r.created;
        }
        size_t j = 0;
        while (j < n && map[j].ino != ino) j++;
        if (j == n) {
            map = realloc(map, (n + 1) * sizeof *map);
            map[n++] = (m){ ino, next++ };
        } else if (created) {
            map[j].fid = next++;
        }
        o->fid = map[j].fid;
    }
    free(map);
}

static void describe_op(const op *o, char *out, size_t cap)
{
    switch (o->type) {
    case CRASH_OPEN: {
        crash_rec_open r;
        memcpy(&r, o->fixed, sizeof r);
        snprintf(out, cap, "open %s%s%s", o->path, r.created ? " (created)" : "", r.truncated ? " O_TRUNC" : "");
        break;
    }
    case CRASH_WRITE: {
        crash_rec_write r;
        memcpy(&r, o->fixed, sizeof r);
        snprintf(out, cap, "pwrite ino %llu off %llu len %u", (unsigned long long)r.ino, (unsigned long long)r.off,
                 o->len);
        break;
    }
    case CRASH_SYNC: {
        crash_rec_sync r;
        memcpy(&r, o->fixed, sizeof r);
        snprintf(out, cap, "%s %s", r.is_dir ? "fsync(dir)" : r.datasync ? "fdatasync" : "fsync",
                 o->path[0] ? o->path : ".");
        break;
    }
    case CRASH_FALLOC: {
        crash_rec_falloc r;
        memcpy(&r, o->fixed, sizeof r);
        snprintf(out, cap, "fallocate ino %llu mode %u off %llu len %llu", (unsigned long long)r.ino, r.mode,
                 (unsigned long long)r.off, (unsigned long long)r.len);
        break;
    }
    case CRASH_TRUNC: {
        crash_rec_trunc r;
        memcpy(&r, o->fixed, sizeof r);
        snprintf(out, cap, "ftruncate ino %llu to %llu", (unsigned long long)r.ino, (unsigned long long)r.len);
        break;
    }
    case CRASH_RENAME: snprintf(out, cap, "rename %s -> %s", o->path, o->path2); break;
    case CRASH_UNLINK: snprintf(out, cap, "unlink %s", o->path); break;
    case CRASH_MKDIR: snprintf(out, cap, "mkdir %s", o->path); break;
    case CRASH_RMDIR: snprintf(out, cap, "rmdir %s", o->path); break;
    case CRASH_SEND: case CRASH_RECV: {
        crash_rec_send r;
        memcpy(&r, o->fixed, sizeof r);
        snprintf(out, cap, "%s %u bytes %s port %u", o->type == CRASH_SEND ? "send" : "read", o->len,
                 o->type == CRASH_SEND ? "to" : "from", r.port);
        break;
    }
    default: snprintf(out, cap, "record type %u", o->type);
    }
}

/* ---- the requests and their answers ---- */

typedef struct item { char kind; char *key; char *value; size_t vlen; int k; /* index in keys */ } item;
typedef struct request {
    uint32_t run, port;
    char kind;             /* 'w' write, 'r' other */
    int dur;               /* 0 local, 1 none */
    int status;
    uint64_t token;
    item *items;
    size_t n_items;
    size_t sent_at;        /* index of the op before which its answer had wholly left; SIZE_MAX: never */
    size_t recv_at;        /* index of the op at which the server had read all of it */
} request;

static request *reqs;
static size_t n_reqs;
static char run_kind[1024][16];
static uint32_t n_runs;

static int load_requests(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0, rcap = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *save = NULL, *w = strtok_r(line, " ", &save);
        if (!w) continue;
        if (!strcmp(w, "run")) {
            uint32_t r = (uint32_t)atoi(strtok_r(NULL, " ", &save));
            if (r >= 1024) return -1;
            snprintf(run_kind[r], sizeof run_kind[r], "%s", strtok_r(NULL, " ", &save));
            if (r + 1 > n_runs) n_runs = r + 1;
            continue;
        }
        if (strcmp(w, "req")) continue;
        if (n_reqs == rcap) reqs = realloc(reqs, (rcap = rcap ? rcap * 2 : 1024) * sizeof *reqs);
        request *q = &reqs[n_reqs++];
        memset(q, 0, sizeof *q);
        q->run = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 10);
        q->port = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 10);
        q->kind = strtok_r(NULL, " ", &save)[0];
        q->dur = atoi(strtok_r(NULL, " ", &save));
        q->status = atoi(strtok_r(NULL, " ", &save));
        q->token = strtoull(strtok_r(NULL, " ", &save), NULL, 10);
        q->n_items = strtoul(strtok_r(NULL, " ", &save), NULL, 10);
        q->items = calloc(q->n_items ? q->n_items : 1, sizeof *q->items);
        q->sent_at = q->recv_at = SIZE_MAX;
        for (size_t i = 0; i < q->n_items; i++) {
            char *it = strtok_r(NULL, " ", &save), *s2 = NULL;
            if (!it) return -1;
            q->items[i].kind = it[0];
            strtok_r(it, "/", &s2);
            q->items[i].key = strdup(strtok_r(NULL, "/", &s2));
            char *v = strtok_r(NULL, "/", &s2);
            q->items[i].value = strdup(v ? v : "");
        }
    }
    free(line);
    fclose(f);
    return 0;
}

/* Pairs the n-th answer frame sent on a connection with its n-th request, and
   notes the op before which it had wholly left and the tokens it carried. */
static uint64_t *max_token_before;   /* [n_ops + 1]: highest token any answer carried before op i */

static int pair_answers(void)
{
    typedef struct conn { uint32_t run, port; hanu_buf in, req; size_t next, rnext; } conn;
    conn *cs = NULL;
    size_t n_cs = 0;
    uint64_t maxtok = 0;
    max_token_before = calloc(n_ops + 1, sizeof *max_token_before);
    for (size_t i = 0; i < n_ops; i++) {
        max_token_before[i] = maxtok;
        op *o = &ops[i];
        if (o->type != CRASH_SEND && o->type != CRASH_RECV) continue;
        crash_rec_send r;
        memcpy(&r, o->fixed, sizeof r);
        conn *c = NULL;
        for (size_t j = 0; j < n_cs; j++)
            if (cs[j].run == o->run && cs[j].port == r.port) c = &cs[j];
        if (!c) {
            cs = realloc(cs, (n_cs + 1) * sizeof *cs);
            c = &cs[n_cs++];
            memset(c, 0, sizeof *c);
            c->run = o->run;
            c->port = r.port;
        }
        if (o->type == CRASH_RECV) {
            /* request frames: u8 op | u8 flags | u32 length | payload */
            hanu_buf_append(&c->req, o->data, o->len);
            while (c->req.len >= 6) {
                uint32_t plen;
                memcpy(&plen, c->req.data + 2, 4);
                if (c->req.len < 6 + (size_t)plen) break;
                while (c->rnext < n_reqs && !(reqs[c->rnext].run == c->run && reqs[c->rnext].port == c->port))
                    c->rnext++;
                if (c->rnext < n_reqs) reqs[c->rnext++].recv_at = i;
                hanu_buf_consume(&c->req, 6 + plen);
            }
            continue;
        }
        hanu_buf_append(&c->in, o->data, o->len);
        while (c->in.len >= 5) {
            uint32_t plen;
            memcpy(&plen, c->in.data + 1, 4);
            if (c->in.len < 5 + (size_t)plen) break;
            uint8_t st = c->in.data[0];
            uint64_t tok = 0;
            if ((st == 0 || st == 4 || st == 7) && plen >= 8) memcpy(&tok, c->in.data + 5, 8);
            if (st == 0 && plen != 8) tok = 0;   /* Stats JSON, not a token */
            /* the request this answers: the next unanswered one of this connection */
            while (c->next < n_reqs && !(reqs[c->next].run == c->run && reqs[c->next].port == c->port)) c->next++;
            if (c->next >= n_reqs && st == 1) {   /* a Pong: the readiness Ping of Server.start, not logged */
                hanu_buf_consume(&c->in, 5 + plen);
                continue;
            }
            if (c->next >= n_reqs) {
                fprintf(stderr, "answer on run %u port %u with no request\n", c->run, c->port);
                return -1;
            }
            request *q = &reqs[c->next++];
            if (q->status != st || (tok && q->token != tok)) {
                fprintf(stderr, "run %u port %u: answer status %u token %llu, client logged %d %llu\n", c->run,
                        c->port, st, (unsigned long long)tok, q->status, (unsigned long long)q->token);
                return -1;
            }
            q->sent_at = i;   /* it may have left as the send began: owed from op i + 1 on */
            if (tok > maxtok) maxtok = tok;
            hanu_buf_consume(&c->in, 5 + plen);
        }
    }
    max_token_before[n_ops] = maxtok;
    /* The client logged a request once it had its answer: one not found in the
       trace means the recorder missed sends, and the states would prove nothing. */
    for (size_t r = 0; r < n_reqs; r++)
        if (reqs[r].sent_at == SIZE_MAX || reqs[r].recv_at > reqs[r].sent_at) {
            fprintf(stderr, "run %u port %u: request %zu has no answer, or no read before it, in the trace (was the recorder loaded?)\n",
                    reqs[r].run, reqs[r].port, r);
            return -1;
        }
    for (size_t j = 0; j < n_cs; j++) {
        hanu_buf_free(&cs[j].in);
        hanu_buf_free(&cs[j].req);
    }
    free(cs);
    return 0;
}

/* ---- an in-memory file system: inodes and names ---- */

typedef struct inode { uint64_t ino; uint8_t *data; size_t size, cap; } inode;
typedef struct name { char *path; uint64_t ino; int is_dir; } name;
typedef struct fsmodel {
    inode *in;
    size_t n_in, cap_in;
    name *nm;
    size_t n_nm, cap_nm;
} fsmodel;

static inode *fs_inode(fsmodel *m, uint64_t ino, int create)
{
    for (size_t i = 0; i < m->n_in; i++)
        if (m->in[i].ino == ino) return &m->in[i];
    if (!create) return NULL;
    if (m->n_in == m->cap_in) m->in = realloc(m->in, (m->cap_in = m->cap_in ? m->cap_in * 2 : 16) * sizeof *m->in);
    inode *n = &m->in[m->n_in++];
    memset(n, 0, sizeof *n);
    n->ino = ino;
    return n;
}

static name *fs_name(fsmodel *m, const char *path)
{
    for (size_t i = 0; i < m->n_nm; i++)
        if (!strcmp(m->nm[i].path, path)) return &m->nm[i];
    return NULL;
}

static void fs_unname(fsmodel *m, const char *path)
{
    name *n = fs_name(m, path);
    if (!n) return;
    free(n->path);
    *n = m->nm[--m->n_nm];
}

static void fs_link(fsmodel *m, const char *path, uint64_t ino, int is_dir)
{
    fs_unname(m, path);
    if (m->n_nm == m->cap_nm) m->nm = realloc(m->nm, (m->cap_nm = m->cap_nm ? m->cap_nm * 2 : 16) * sizeof *m->nm);
    m->nm[m->n_nm++] = (name){ strdup(path), ino, is_dir };
}

static void inode_resize(inode *n, size_t size)
{
    if (size > n->cap) {
        size_t c = n->cap ? n->cap : 4096;
        while (c < size) c *= 2;
        n->data = realloc(n->data, c);
        n->cap = c;
    }
    if (size > n->size) memset(n->data + n->size, 0, size - n->size);
    n->size = size;
}

static void fs_free(fsmodel *m)
{
    for (size_t i = 0; i < m->n_in; i++) free(m->in[i].data);
    for (size_t i = 0; i < m->n_nm; i++) free(m->nm[i].path);
    free(m->in);
    free(m->nm);
    memset(m, 0, sizeof *m);
}

/* Copies src; of its inodes only those with a name or in keep (files that
   pending ops may still name): unlinked files pile up in a long trace. */
static void fs_copy(fsmodel *dst, const fsmodel *src, const uint64_t *keep, size_t n_keep)
{
    fs_free(dst);
    dst->in = malloc((src->n_in ? src->n_in : 1) * sizeof *dst->in);
    dst->cap_in = src->n_in;
    for (size_t i = 0; i < src->n_in; i++) {
        int wanted = 0;
        for (size_t j = 0; j < src->n_nm && !wanted; j++) wanted = src->nm[j].ino == src->in[i].ino;
        for (size_t j = 0; j < n_keep && !wanted; j++) wanted = keep[j] == src->in[i].ino;
        if (!wanted) continue;
        inode *n = &dst->in[dst->n_in++];
        *n = src->in[i];
        n->cap = n->size;
        n->data = malloc(n->size ? n->size : 1);
        if (n->size) memcpy(n->data, src->in[i].data, n->size);
    }
    dst->nm = malloc((src->n_nm ? src->n_nm : 1) * sizeof *dst->nm);
    dst->n_nm = dst->cap_nm = src->n_nm;
    for (size_t i = 0; i < src->n_nm; i++) {
        dst->nm[i] = src->nm[i];
        dst->nm[i].path = strdup(src->nm[i].path);
    }
}

/* Applies op o; a write keeps only its first `keep` bytes (a torn write). */
static void fs_apply(fsmodel *m, const op *o, size_t keep)
{
    switch (o->type) {
    case CRASH_OPEN: {
        crash_rec_open r;
        memcpy(&r, o->fixed, sizeof r);
        inode *n = fs_inode(m, o->fid, 1);
        if (r.created || r.truncated) n->size = 0;
        if (r.created || !fs_name(m, o->path)) fs_link(m, o->path, o->fid, 0);
        break;
    }
    case CRASH_WRITE: {
        crash_rec_write r;
        memcpy(&r, o->fixed, sizeof r);
        inode *n = fs_inode(m, o->fid, 1);
        size_t len = keep < o->len ? keep : o->len;
        if (r.off + len > n->size) inode_resize(n, r.off + len);
        memcpy(n->data + r.off, o->data, len);
        break;
    }
    case CRASH_FALLOC: {
        crash_rec_falloc r;
        memcpy(&r, o->fixed, sizeof r);
        inode *n = fs_inode(m, o->fid, 1);
        if (r.mode & FALLOC_PUNCH) {
            size_t end = r.off + r.len < n->size ? r.off + r.len : n->size;
            if (r.off < end) memset(n->data + r.off, 0, end - r.off);
        } else if (!(r.mode & FALLOC_KEEP) && r.off + r.len > n->size) {
            inode_resize(n, r.off + r.len);
        }
        break;
    }
    case CRASH_TRUNC: {
        crash_rec_trunc r;
        memcpy(&r, o->fixed, sizeof r);
        inode *n = fs_inode(m, o->fid, 1);
        if (r.len > n->size) inode_resize(n, r.len);
        else n->size = r.len;
        break;
    }
    case CRASH_RENAME: {
        name *n = fs_name(m, o->path);
        if (!n) break;
        uint64_t ino = n->ino;
        int d = n->is_dir;
        fs_unname(m, o->path);
        fs_link(m, o->path2, ino, d);
        break;
    }
    case CRASH_UNLINK: case CRASH_RMDIR: fs_unname(m, o->path); break;
    case CRASH_MKDIR: fs_link(m, o->path, 0, 1); break;
    default: break;
    }
}

/* Writes the model into dir (which must be empty): only non-zero 4 KiB blocks
   are written, the rest are holes, so the preallocated zeros cost nothing. */
static int fs_write_out(const fsmodel *m, const char *dir)
{
    char p[4096];
    /* directories first, parents before children */
    for (int pass = 0; pass < 8; pass++)
        for (size_t i = 0; i < m->n_nm; i++) {
            if (!m->nm[i].is_dir) continue;
            int depth = 0;
            for (const char *c = m->nm[i].path; *c; c++) depth += *c == '/';
            if (depth != pass) continue;
            snprintf(p, sizeof p, "%s/%s", dir, m->nm[i].path);
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
        }
    for (size_t i = 0; i < m->n_nm; i++) {
        if (m->nm[i].is_dir) continue;
        inode *n = fs_inode((fsmodel *)m, m->nm[i].ino, 0);
        snprintf(p, sizeof p, "%s/%s", dir, m->nm[i].path);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) continue;   /* a name whose directory is not there: lost with it */
        size_t size = n ? n->size : 0;
        /* one pwrite for each run of non-zero blocks */
        size_t run = 0, run_len = 0;
        for (size_t off = 0;; off += 4096) {
            size_t l = off < size ? (size - off < 4096 ? size - off : 4096) : 0;   /* 0: past the end */
            size_t z = 0;
            while (z < l && !n->data[off + z]) z++;
            if (z < l) {
                if (!run_len) run = off;
                run_len += l;
                continue;
            }
            if (run_len && pwrite(fd, n->data + run, run_len, (off_t)run) != (ssize_t)run_len) { close(fd); return -1; }
            run_len = 0;
            if (off >= size) break;
        }
        if (ftruncate(fd, (off_t)size) != 0) { close(fd); return -1; }
        close(fd);
    }
    return 0;
}

static void rm_tree(const char *dir, int keep_top)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_tree(p, 0);
        else unlink(p);
    }
    closedir(d);
    if (!keep_top) rmdir(dir);
}

/* ---- checking one state ---- */

typedef struct state_desc {
    const char *kind;      /* "process crash" or "power loss" */
    size_t at;             /* crash before ops[at] */
    int durable_only;      /* power loss: only `local` answers and what they cover are owed */
    char detail[256];      /* which unsynced ops were kept */
} state_desc;

static const char *state_dir;
static const char *keep_dir;
static int verbose;
static uint64_t states_checked, violations, refused, kept;
static uint64_t by_kind[6];
static const char *kind_names[6] = { "start-up refused", "acknowledged write lost", "deleted value back",
                                     "half-applied batch", "token reused", "unknown value" };

static const fsmodel *cur_model;   /* the state being checked, to keep it as it was before start-up */

static void report(const state_desc *sd, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(const state_desc *sd, int kind, const char *fmt, ...)
{
    violations++;
    by_kind[kind]++;
    if (by_kind[kind] > 3 && !verbose) return;   /* the first few of each kind say enough */
    char what[256], msg[2048];
    const op *o = &ops[sd->at < n_ops ? sd->at : n_ops - 1];
    describe_op(o, what, sizeof what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("VIOLATION (%s): %s before op %zu of %zu (run %u, %s)%s%s\n  %s\n", kind_names[kind], sd->kind, sd->at,
           n_ops, o->run, sd->at < n_ops ? what : "end of trace", sd->detail[0] ? "; " : "", sd->detail, msg);
    /* the answers that had left just before the crash point */
    int shown = 0;
    for (size_t i = sd->at; i-- > 0 && shown < 3;) {
        if (ops[i].type != CRASH_SEND) continue;
        describe_op(&ops[i], what, sizeof what);
        printf("  op %zu: %s\n", i, what);
        shown++;
    }
    if (keep_dir && kept < 20) {
        char dst[4096];
        snprintf(dst, sizeof dst, "%s/state-%llu-%s-%zu", keep_dir, (unsigned long long)kept++,
                 sd->durable_only ? "power" : "process", sd->at);
        mkdir(keep_dir, 0755);
        rm_tree(dst, 0);
        mkdir(dst, 0755);
        fs_write_out(cur_model, dst);
        printf("  state kept in %s\n", dst);
    }
}

typedef struct keywrite { const struct request *q; const item *it; } keywrite;
typedef struct keyres {
    const char *key;
    keywrite *w;           /* the successful writes to the key, in the order they were logged */
    size_t nw;
    int found;
    uint64_t token;
    hanu_buf value;
} keyres;
static keyres *keys;
static size_t n_keys;

static keyres *key_of(const char *k)
{
    for (size_t i = 0; i < n_keys; i++)
        if (!strcmp(keys[i].key, k)) return &keys[i];
    return NULL;
}

/* A successful delete of key with a txn in (after, last]. */
static int deleted_after(const char *key, uint64_t after, uint64_t last, size_t at)
{
    for (size_t r = 0; r < n_reqs; r++) {
        const request *q = &reqs[r];
        if (q->kind != 'w' || q->status != 0 || q->token <= after || q->token > last || q->recv_at >= at) continue;
        for (size_t j = 0; j < q->n_items; j++)
            if (q->items[j].kind == 'd' && !strcmp(q->items[j].key, key)) return 1;
    }
    return 0;
}

static int check_state(const state_desc *sd)
{
    states_checked++;
    store_options so;
    store_options_default(&so);
    so.data_dir = state_dir;
    so.file_size = 64u << 10;
    so.background_compaction = 0;
    so.quiet = 1;
    so.commit_window_us = 0;   /* nothing to gather: a state has one writer */
    so.lazy_sync_ms = 0;
    store *s = NULL;
    char err[1024] = "";
    int rc = store_open(&so, &s, err, sizeof err);
    if (rc != HANU_OK) {
        refused++;
        report(sd, 0, "store_open: %s", err);
        return -1;
    }
    uint64_t last = store_last_txn(s);
    for (size_t i = 0; i < n_keys; i++) {
        hanu_buf_reset(&keys[i].value);
        keys[i].found = store_get(s, STORE_DEFAULT_DB_ID, keys[i].key, strlen(keys[i].key), &keys[i].value,
                                  &keys[i].token) == HANU_OK;
    }
    /* What is owed: the answered writes (power loss: those up to the highest answered `local` txn). */
    uint64_t local_upto = 0;
    for (size_t r = 0; r < n_reqs; r++) {
        request *q = &reqs[r];
        if (q->sent_at < sd->at && q->kind == 'w' && q->status == 0 && q->dur == 0 && q->token > local_upto)
            local_upto = q->token;
    }
    for (size_t i = 0; i < n_keys; i++) {
        keyres *k = &keys[i];
        uint64_t owed = 0;
        const request *owed_by = NULL;
        for (size_t w = 0; w < k->nw; w++) {
            const request *q = k->w[w].q;
            if (q->sent_at >= sd->at || (sd->durable_only && q->token > local_upto)) continue;
            if (q->token > owed) { owed = q->token; owed_by = q; }
        }
        /* the write the state shows, among all writes to the key up to the recovered last txn */
        const request *match = NULL;
        int later_delete = 0;
        for (size_t w = 0; w < k->nw; w++) {
            const request *q = k->w[w].q;
            const item *it = k->w[w].it;
            if (q->token > last || q->recv_at >= sd->at) continue;   /* not in the state's past */
            if (k->found && it->kind == 's' && q->token == k->token && it->vlen == k->value.len &&
                !memcmp(it->value, k->value.data, k->value.len))
                match = q;
            if (it->kind == 'd' && q->token >= owed) later_delete = 1;
        }
        if (k->found && !match) {
            report(sd, 5, "key %s: value of %zu bytes with token %llu was never written (recovered last txn %llu)",
                   k->key, k->value.len, (unsigned long long)k->token, (unsigned long long)last);
        } else if (k->found && k->token < owed) {
            int del = 0;
            for (size_t j = 0; j < owed_by->n_items; j++)
                if (!strcmp(owed_by->items[j].key, k->key)) del = owed_by->items[j].kind == 'd';
            report(sd, del ? 2 : 1,
                   "key %s: shows token %llu, but the %s answered with token %llu (%s, run %u port %u) %s it",
                   k->key, (unsigned long long)k->token, owed_by->n_items > 1 ? "batch" : "write",
                   (unsigned long long)owed, owed_by->dur ? "durability none" : "durability local", owed_by->run,
                   owed_by->port, del ? "deleted" : "replaced");
        } else if (!k->found && owed && !later_delete) {
            report(sd, 1, "key %s: not found, but the %s answered with token %llu (%s, run %u port %u) set it; "
                   "recovered last txn %llu", k->key, owed_by->n_items > 1 ? "batch" : "write",
                   (unsigned long long)owed, owed_by->dur ? "durability none" : "durability local", owed_by->run,
                   owed_by->port, (unsigned long long)last);
        }
    }
    /* Batches: all of one or none of it. */
    for (size_t r = 0; r < n_reqs; r++) {
        request *q = &reqs[r];
        if (q->kind != 'w' || q->status != 0 || q->n_items < 2 || q->token > last || q->recv_at >= sd->at) continue;
        int visible = 0;
        for (size_t j = 0; j < q->n_items; j++) {
            keyres *k = &keys[q->items[j].k];
            if (k->found && k->token == q->token) visible = 1;
        }
        if (!visible) continue;
        for (size_t j = 0; j < q->n_items; j++) {
            keyres *k = &keys[q->items[j].k];
            int ok = q->items[j].kind == 's' ? (k->found ? k->token >= q->token : deleted_after(k->key, q->token, last, sd->at))
                                             : !k->found || k->token > q->token;
            if (!ok) {
                char shows[64];
                if (k->found) snprintf(shows, sizeof shows, "token %llu", (unsigned long long)k->token);
                else snprintf(shows, sizeof shows, "nothing (no later delete)");
                report(sd, 3, "batch with token %llu (%s): key %s shows %s while another key shows the batch",
                       (unsigned long long)q->token, q->dur ? "durability none" : "durability local", k->key,
                       shows);
                break;
            }
        }
    }
    /* Tokens never repeat: a new write takes a txn above every token an answer carried. */
    store_op sop = { .kind = STORE_SET, .key = "zz-probe", .key_len = 8, .value = "p", .value_len = 1 };
    uint64_t txn = 0;
    rc = store_write(s, STORE_DEFAULT_DB_ID, &sop, 1, STORE_COND_NONE, 0, &txn, NULL);
    uint64_t seen = max_token_before[sd->at];
    if (rc == HANU_OK && txn <= seen) {
        /* name the answer that carried the token the new write took */
        const request *who = NULL;
        for (size_t r = 0; r < n_reqs; r++)
            if (reqs[r].sent_at < sd->at && reqs[r].token == txn) who = &reqs[r];
        report(sd, 4, "a write after recovery got token %llu, but answers before the crash carried tokens up to "
               "%llu%s%s%s (recovered last txn %llu)", (unsigned long long)txn, (unsigned long long)seen,
               who ? "; token " : "", who ? (who->kind == 'w' ? "answered a write" : "answered a read") : "",
               who ? (who->dur ? " at durability none" : "") : "", (unsigned long long)last);
    }
    store_close(s);
    return 0;
}

/* ---- building the states ---- */

enum { PART_DATA = 1, PART_NAME = 2 };
typedef struct pend { size_t idx; int part; } pend;

static int is_file_op(const op *o) { return o->type != CRASH_SEND && o->type != CRASH_RECV; }

static void parent_of(const char *path, char *out, size_t cap)
{
    const char *sl = strrchr(path, '/');
    size_t n = sl ? (size_t)(sl - path) : 0;
    if (n >= cap) n = cap - 1;
    memcpy(out, path, n);
    out[n] = 0;
}

/* Applies one part of an op (an open's inode reset and its new name become
   durable separately: the first by a sync of the file, the second by a sync of
   its directory). */
static void apply_part(fsmodel *m, const op *o, int part, size_t keep)
{
    if (o->type == CRASH_OPEN) {
        crash_rec_open r;
        memcpy(&r, o->fixed, sizeof r);
        inode *n = fs_inode(m, o->fid, 1);
        if (part == PART_DATA) n->size = 0;
        else fs_link(m, o->path, o->fid, 0);
        return;
    }
    fs_apply(m, o, keep);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t at_only = SIZE_MAX;   /* --at N: only the states before op N */
static int dirs_durable;   /* --dirs-durable: a mkdir is durable at once (as on ext4 in practice) */
static uint64_t candidates, total_candidates, want_states, picked;

/* Selection sampling (Knuth's algorithm S): exactly want_states of the
   candidates, spread evenly over the trace; all of them when want_states is 0. */
static int pick(void)
{
    candidates++;
    if (!want_states || !total_candidates || want_states >= total_candidates) return 1;
    uint64_t left = total_candidates - (candidates - 1), need = want_states - picked;
    if (rnd() % left < need) { picked++; return 1; }
    return 0;
}

static void check_model(const fsmodel *m, const state_desc *sd)
{
    rm_tree(state_dir, 1);
    if (fs_write_out(m, state_dir) != 0) {
        printf("could not write a state into %s: %s\n", state_dir, strerror(errno));
        exit(2);
    }
    cur_model = m;
    check_state(sd);
}

/* The power-loss states before ops[at]: the durable model plus some of the pending ops. */
static void power_states(const fsmodel *dur, const pend *p, size_t np, size_t at, int dry)
{
    fsmodel m = { 0 };
    state_desc sd = { .kind = "power loss", .at = at, .durable_only = 1 };
    size_t nwrites = 0;
    uint64_t *fids = malloc((np ? np : 1) * sizeof *fids);
    for (size_t j = 0; j < np; j++) {
        nwrites += ops[p[j].idx].type == CRASH_WRITE;
        fids[j] = ops[p[j].idx].fid;
    }
    /* prefixes of the pending ops, each with its last write whole or torn */
    for (size_t pre = 0; pre < np || (pre == 0 && np == 0); pre++) {
        size_t cuts[5] = { SIZE_MAX };
        int ncuts = 1;
        const op *last = pre ? &ops[p[pre - 1].idx] : NULL;
        if (last && last->type == CRASH_WRITE && p[pre - 1].part == PART_DATA) {
            crash_rec_write r;
            memcpy(&r, last->fixed, sizeof r);
            uint64_t end = r.off + last->len;
            for (uint64_t sector = 512; sector <= 4096; sector *= 8) {
                /* the first and the last sector boundary inside the write */
                uint64_t first = (r.off / sector + 1) * sector, lastb = ((end - 1) / sector) * sector;
                if (first < end) cuts[ncuts++] = (size_t)(first - r.off);
                if (lastb > first && lastb > r.off) cuts[ncuts++] = (size_t)(lastb - r.off);
            }
        }
        for (int c = 0; c < ncuts; c++) {
            if (!pick() || dry) continue;
            fs_copy(&m, dur, fids, np);
            for (size_t j = 0; j < pre; j++)
                apply_part(&m, &ops[p[j].idx], p[j].part, j + 1 == pre ? cuts[c] : SIZE_MAX);
            if (c == 0) snprintf(sd.detail, sizeof sd.detail, "%zu of %zu unsynced ops kept", pre, np);
            else snprintf(sd.detail, sizeof sd.detail, "%zu of %zu unsynced ops kept, the last torn after %zu bytes",
                          pre, np, cuts[c]);
            check_model(&m, &sd);
        }
        if (np == 0) break;
    }
    /* pages written back out of order: a random subset of the pending writes
       (names and size changes kept in order) */
    if (nwrites >= 2 && pick() && !dry) {
        fs_copy(&m, dur, fids, np);
        size_t kept_n = 0;
        for (size_t j = 0; j < np; j++) {
            int keep = ops[p[j].idx].type != CRASH_WRITE || (rnd() & 1);
            if (keep) apply_part(&m, &ops[p[j].idx], p[j].part, SIZE_MAX);
            kept_n += keep;
        }
        snprintf(sd.detail, sizeof sd.detail, "a random %zu of %zu unsynced ops kept, writes out of order", kept_n, np);
        check_model(&m, &sd);
    }
    /* ... and every pending op but one write */
    if (nwrites >= 2 && np >= 2) {
        size_t skip = rnd() % np;
        while (ops[p[skip].idx].type != CRASH_WRITE) skip = (skip + 1) % np;
        if (pick() && !dry) {
            fs_copy(&m, dur, fids, np);
            for (size_t j = 0; j < np; j++)
                if (j != skip) apply_part(&m, &ops[p[j].idx], p[j].part, SIZE_MAX);
            snprintf(sd.detail, sizeof sd.detail, "all %zu unsynced ops kept but op %zu", np, p[skip].idx);
            check_model(&m, &sd);
        }
    }
    fs_free(&m);
    free(fids);
}

/* One pass over the trace; dry: only count the candidate states. */
static void walk(int dry, int process, int power)
{
    fsmodel all = { 0 }, dur = { 0 };
    pend *p = NULL;
    size_t np = 0, cap = 0;
    state_desc sd = { .kind = "process crash", .durable_only = 0 };
    for (size_t i = 0; i <= n_ops; i++) {
        const op *o = i < n_ops ? &ops[i] : NULL;
        int run_end = !o || (i > 0 && ops[i - 1].run != o->run);
        int here = at_only == SIZE_MAX || at_only == i;
        if (process && here && (run_end || is_file_op(o)) && pick() && !dry) {
            sd.at = i;
            check_model(&all, &sd);
        }
        if (power && here && (run_end || (o->type == CRASH_SYNC))) power_states(&dur, p, np, i, dry);
        if (!o) break;
        if (!is_file_op(o)) continue;
        fs_apply(&all, o, SIZE_MAX);
        /* pending parts of this op */
        if (np + 2 > cap) p = realloc(p, (cap = cap ? cap * 2 : 256) * sizeof *p);
        if (o->type == CRASH_OPEN) {
            crash_rec_open r;
            memcpy(&r, o->fixed, sizeof r);
            if (r.created || r.truncated) p[np++] = (pend){ i, PART_DATA };
            if (r.created) p[np++] = (pend){ i, PART_NAME };
        } else if (o->type == CRASH_WRITE || o->type == CRASH_FALLOC || o->type == CRASH_TRUNC) {
            p[np++] = (pend){ i, PART_DATA };
        } else if (o->type == CRASH_MKDIR && (!o->path[0] || dirs_durable)) {
            /* the data directory itself is the operator's: it exists before the store does */
            if (!dry) fs_apply(&dur, o, SIZE_MAX);
        } else if (o->type == CRASH_RENAME || o->type == CRASH_UNLINK || o->type == CRASH_MKDIR ||
                   o->type == CRASH_RMDIR) {
            p[np++] = (pend){ i, PART_NAME };
        } else if (o->type == CRASH_SYNC) {
            crash_rec_sync r;
            memcpy(&r, o->fixed, sizeof r);
            size_t keep = 0;
            for (size_t j = 0; j < np; j++) {
                const op *q = &ops[p[j].idx];
                int durable;
                if (r.is_dir) {
                    char par[4096] = "";
                    if (p[j].part == PART_NAME)
                    parent_of(q->type == CRASH_RENAME ? q->path2 : q->path, par, sizeof par);
                    durable = p[j].part == PART_NAME && !strcmp(par, o->path);
                } else {
                    durable = p[j].part == PART_DATA && q->fid == o->fid;
                }
                if (durable && !dry) apply_part(&dur, q, p[j].part, SIZE_MAX);
                if (!durable) p[keep++] = p[j];
            }
            np = keep;
        }
    }
    free(p);
    fs_free(&all);
    fs_free(&dur);
}

static void dump(void)
{
    char what[256];
    for (size_t i = 0; i < n_ops; i++) {
        describe_op(&ops[i], what, sizeof what);
        printf("%6zu run %u %s\n", i, ops[i].run, what);
        for (size_t r = 0; r < n_reqs; r++)
            if (reqs[r].sent_at == i)
                printf("       answer: %s dur %s status %d token %llu %s\n", reqs[r].kind == 'w' ? "write" : "read",
                       reqs[r].dur ? "none" : "local", reqs[r].status, (unsigned long long)reqs[r].token,
                       reqs[r].n_items ? reqs[r].items[0].key : "");
    }
}

int main(int argc, char **argv)
{
    const char *work = NULL;
    uint64_t want = 0;
    int dry_dump = 0, process = 1, power = 1;
    /* Every state mallocs and frees the same large buffers (the model's copy, the store's own):
       kept in the heap instead of mmap'd and unmapped each time, they are not faulted in again
       page by page, which took a third of the time (more in a VM). */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--states") && i + 1 < argc) want = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng_state ^= strtoull(argv[++i], NULL, 10) * 0x9E3779B97F4A7C15ull;
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc) keep_dir = argv[++i];
        else if (!strcmp(argv[i], "--dump")) dry_dump = 1;
        else if (!strcmp(argv[i], "--verbose")) verbose = 1;
        else if (!strcmp(argv[i], "--dirs-durable")) dirs_durable = 1;
        else if (!strcmp(argv[i], "--at") && i + 1 < argc) at_only = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--process-only")) power = 0;
        else if (!strcmp(argv[i], "--power-only")) process = 0;
        else if (!work && argv[i][0] != '-') work = argv[i];
        else {
            fprintf(stderr, "usage: crash_check WORKDIR [--states N] [--seed N] [--keep DIR] [--dump] [--verbose] "
                            "[--process-only | --power-only] [--dirs-durable] [--at OP]\n");
            return 2;
        }
    }
    if (!work) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/requests.log", work);
    if (load_requests(path) != 0) { fprintf(stderr, "cannot read %s\n", path); return 2; }
    for (uint32_t r = 0; r < n_runs; r++) {
        snprintf(path, sizeof path, "%s/trace.%u", work, r);
        if (load_trace(path, r) != 0) { fprintf(stderr, "cannot read %s\n", path); return 2; }
    }
    if (pair_answers() != 0) return 2;
    assign_fids();
    if (dry_dump) { dump(); return 0; }
    for (size_t r = 0; r < n_reqs; r++)
        for (size_t j = 0; j < reqs[r].n_items; j++)
        {
            item *it = &reqs[r].items[j];
            keyres *k = key_of(it->key);
            if (!k) {
                keys = realloc(keys, (n_keys + 1) * sizeof *keys);
                keys[n_keys] = (keyres){ .key = it->key };
                k = &keys[n_keys++];
            }
            it->k = (int)(k - keys);
            it->vlen = strlen(it->value);
            if (reqs[r].kind == 'w' && reqs[r].status == 0) {
                k->w = realloc(k->w, (k->nw + 1) * sizeof *k->w);
                k->w[k->nw++] = (keywrite){ &reqs[r], it };
            }
        }
    /* States go to tmpfs when there is one: each is written, recovered and removed. */
    char tmpl[4096];
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpl, sizeof tmpl, "%s/hanudb-crash-XXXXXX", base);
    if (!mkdtemp(tmpl)) { perror("mkdtemp"); return 2; }
    state_dir = tmpl;
    /* Recovery's notes (torn tails quarantined, files sealed) are expected by the
       thousand here; --verbose keeps them. */
    if (!verbose) {
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) dup2(dn, 2);
    }
    uint64_t seed0 = rng_state;
    walk(1, process, power);
    uint64_t total = candidates;
    total_candidates = total;
    want_states = want;
    rng_state = seed0;
    candidates = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    walk(0, process, power);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rm_tree(state_dir, 0);
    size_t answered = 0;
    for (size_t r = 0; r < n_reqs; r++) answered += reqs[r].sent_at != SIZE_MAX;
    printf("crash_check: %zu trace ops in %u runs, %zu answers, %zu keys; %llu of %llu candidate states checked "
           "in %.1f s; %llu violations\n", n_ops, n_runs, answered, n_keys, (unsigned long long)states_checked,
           (unsigned long long)total, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
           (unsigned long long)violations);
    for (int k = 0; k < 6; k++)
        if (by_kind[k]) printf("  %s: %llu\n", kind_names[k], (unsigned long long)by_kind[k]);
    return violations ? 1 : 0;
}
