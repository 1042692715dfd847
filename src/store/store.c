/*
 * store.c: opening (recovery), reads, writes and databases of the store
 * (store.h). Recovery walks the data files in order: hint files for compacted
 * files, frames otherwise; it stops at the torn tail of the newest file and
 * refuses to start on damage anywhere else, naming the file and offset.
 */
#include "store/store_internal.h"
#include "hlog/hlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void store_options_default(store_options *o)
{
    memset(o, 0, sizeof *o);
    o->data_dir = "./data";
    o->file_size = 64ull << 20;
    o->prealloc = LOG_PREALLOC_ZEROFILL;
    o->max_key = 1024;
    o->max_value = 1u << 20;
    o->compact_ratio = 0.5;
    o->compact_min_dead = 1u << 20;
    o->background_compaction = 1;
    o->commit_window_us = 100;
    o->lazy_sync_ms = 10;
}

int store_db_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > STORE_DB_NAME_MAX || name[0] == '_') return 0;
    /* "." and ".." (and all dots) are path segments to every HTTP client. */
    size_t dots = 0;
    while (dots < len && name[dots] == '.') dots++;
    if (dots == len) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* ---- databases and files (mu held) ---- */

store_db *store_db_by_id(store *s, uint32_t id)
{
    for (size_t i = 0; i < s->ndbs; i++)
        if (s->dbs[i]->id == id) return s->dbs[i];
    return NULL;
}

static store_db *db_by_name(store *s, const char *name, size_t len)
{
    if (len && name[0] == '_') return NULL;   /* system databases are reached by id */
    for (size_t i = 0; i < s->ndbs; i++)
        if (strlen(s->dbs[i]->name) == len && memcmp(s->dbs[i]->name, name, len) == 0) return s->dbs[i];
    return NULL;
}

static int db_add(store *s, uint32_t id, const char *name, size_t len, uint8_t kind, uint64_t txn)
{
    if (s->ndbs >= STORE_MAX_DATABASES) return HANU_ERR_TOO_LARGE;
    store_db *d = calloc(1, sizeof *d);
    store_db **nd = realloc(s->dbs, (s->ndbs + 1) * sizeof *nd);
    if (!d || !nd) { free(d); if (nd) s->dbs = nd; return HANU_ERR_NOMEM; }
    s->dbs = nd;
    d->id = id;
    memcpy(d->name, name, len);
    d->name[len] = '\0';
    d->create_txn = txn;
    d->last_txn = txn;
    d->kind = kind;
    keydir_init(&d->kd);
    s->dbs[s->ndbs++] = d;
    atomic_fetch_add(&s->db_generation, 1);
    if (id >= s->next_db_id && id < STORE_SYSTEM_DB_ID) s->next_db_id = id + 1;
    return HANU_OK;
}

static void db_remove(store *s, store_db *d)
{
    atomic_fetch_add(&s->db_generation, 1);
    size_t pos = 0;
    kd_entry *e;
    while ((e = keydir_next(&d->kd, &pos)) != NULL)
        store_mark_dead(s, e->file_id, store_kd_record_bytes(e->key_len, e));
    keydir_free(&d->kd);
    for (size_t i = 0; i < s->ndbs; i++) {
        if (s->dbs[i] == d) {
            s->dbs[i] = s->dbs[--s->ndbs];
            break;
        }
    }
    free(d);
}

store_file *store_file_get(store *s, uint32_t id)
{
    return id < s->files_cap ? s->files[id] : NULL;
}

static store_file *file_add(store *s, uint32_t id)
{
    if (id >= s->files_cap) {
        uint32_t ncap = s->files_cap ? s->files_cap : 16;
        while (ncap <= id) ncap *= 2;
        store_file **nf = realloc(s->files, ncap * sizeof *nf);
        if (!nf) return NULL;
        memset(nf + s->files_cap, 0, (ncap - s->files_cap) * sizeof *nf);
        s->files = nf;
        s->files_cap = ncap;
    }
    if (!s->files[id]) {
        store_file *f = calloc(1, sizeof *f);
        if (!f) return NULL;
        f->id = id;
        f->fd = -1;
        s->files[id] = f;
    }
    return s->files[id];
}

int store_file_map(store_file *f, size_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    len = (len + (size_t)page - 1) & ~((size_t)page - 1);
    if (len == 0) len = (size_t)page;
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED) return HANU_ERR_IO;
    store_file_unmap(f);
    f->map = m;
    f->map_len = len;
    return HANU_OK;
}

void store_file_unmap(store_file *f)
{
    if (f->map) munmap(f->map, f->map_len);
    f->map = NULL;
    f->map_len = 0;
}

static void file_free(store_file *f)
{
    if (!f) return;
    store_file_unmap(f);
    if (f->fd >= 0) close(f->fd);
    free(f);
}

void store_mark_dead(store *s, uint32_t file_id, uint64_t bytes)
{
    store_file *f = store_file_get(s, file_id);
    if (f) f->dead_bytes += bytes;
}

/* ---- applying entries (recovery and live writes share this) ---- */

int store_apply_entry(store *s, const log_entry *e, uint64_t txn, uint32_t file_id, uint32_t value_off)
{
    store_file *f = store_file_get(s, file_id);
    uint64_t own = store_entry_bytes(e->key_len, e->value_len);
    if (f) f->record_bytes += own;
    store_db *d;
    switch (e->op) {
    case LOG_OP_PUT:
    case LOG_OP_PUT_EXPIRING:
    case LOG_OP_PUT_TYPED: {
        d = store_db_by_id(s, e->db);
        if (!d) { store_mark_dead(s, file_id, own); return HANU_OK; }
        if (txn > d->last_txn) d->last_txn = txn;
        /* The key directory points at the value bytes; an expiry and a type after them
           are kept in the entry itself, so reads check them without touching the file. */
        uint64_t expire = e->expire_ms;
        uint32_t vlen = e->value_len - log_op_trailer(e->op);
        if (e->op == LOG_OP_PUT_EXPIRING && !expire) expire = 1;   /* 0 would read as none */
        kd_entry old;
        int rc = keydir_put(&d->kd, e->key, e->key_len, keydir_hash(e->key, e->key_len), txn,
                            file_id, value_off, vlen, expire, e->op == LOG_OP_PUT_TYPED ? e->type : 0, &old);
        if (rc) return rc;
        d->bytes += e->key_len + vlen;
        d->expiring += expire != 0;
        if (old.key_len) {
            store_mark_dead(s, old.file_id, store_kd_record_bytes(e->key_len, &old));
            d->bytes -= e->key_len + old.value_len;
            d->expiring -= (old.flags & KD_EXPIRES) != 0;
        }
        return HANU_OK;
    }
    case LOG_OP_DELETE: {
        store_mark_dead(s, file_id, own);   /* a tombstone is never a live value */
        d = store_db_by_id(s, e->db);
        if (!d) return HANU_OK;
        if (txn > d->last_txn) d->last_txn = txn;
        kd_entry old;
        if (keydir_delete(&d->kd, e->key, e->key_len, keydir_hash(e->key, e->key_len), &old)) {
            store_mark_dead(s, old.file_id, store_kd_record_bytes(e->key_len, &old));
            d->bytes -= e->key_len + old.value_len;
            d->expiring -= (old.flags & KD_EXPIRES) != 0;
        }
        return HANU_OK;
    }
    case LOG_OP_CREATE_DB:
        if (e->db >= s->next_db_id && e->db < STORE_SYSTEM_DB_ID) s->next_db_id = e->db + 1;
        if (store_db_by_id(s, e->db) || db_by_name(s, (const char *)e->key, e->key_len) ||
            !store_db_name_valid((const char *)e->key, e->key_len)) {
            store_mark_dead(s, file_id, own);
            return HANU_OK;
        }
        /* Databases created before kinds have an empty value: untyped. */
        return db_add(s, e->db, (const char *)e->key, e->key_len,
                      e->value_len ? e->value[0] : STORE_DB_UNTYPED, txn);
    case LOG_OP_DROP_DB:
        store_mark_dead(s, file_id, own);
        d = store_db_by_id(s, e->db);
        if (d && d->id != STORE_DEFAULT_DB_ID && d->id != STORE_SYSTEM_DB_ID) db_remove(s, d);
        return HANU_OK;
    default:
        return HANU_ERR_CORRUPT;
    }
}

/* ---- writes above the compaction floor ---- */

#define UNSETTLED_MAX 65536   /* beyond: compaction keeps every deleted key's records */

static uint64_t unsettled_key(uint32_t db, uint64_t hash)
{
    return hash ^ ((uint64_t)db * 0x9E3779B97F4A7C15ull);
}

void store_settle(store *s, uint64_t durable)
{
    while (s->unsettled_len && s->unsettled[s->unsettled_head].txn <= durable) {
        s->unsettled_head = (s->unsettled_head + 1) % s->unsettled_cap;
        s->unsettled_len--;
    }
}

void store_note_unsettled(store *s, const log_entry *e, uint64_t txn)
{
    if (e->op == LOG_OP_CREATE_DB || e->op == LOG_OP_DROP_DB) { s->db_change_txn = txn; return; }
    if (e->op != LOG_OP_DELETE) return;   /* a put's txn is in the key directory */
    if (s->unsettled_len == s->unsettled_cap) {
        size_t ncap = s->unsettled_cap ? s->unsettled_cap * 2 : 256;
        store_unsettled_delete *n = ncap <= UNSETTLED_MAX ? malloc(ncap * sizeof *n) : NULL;
        if (!n) { s->unsettled_overflow_txn = txn; return; }
        for (size_t i = 0; i < s->unsettled_len; i++)
            n[i] = s->unsettled[(s->unsettled_head + i) % s->unsettled_cap];
        free(s->unsettled);
        s->unsettled = n;
        s->unsettled_cap = ncap;
        s->unsettled_head = 0;
    }
    s->unsettled[(s->unsettled_head + s->unsettled_len++) % s->unsettled_cap] =
        (store_unsettled_delete){ unsettled_key(e->db, keydir_hash(e->key, e->key_len)), txn };
}

int store_deleted_above(store *s, uint32_t db, uint64_t hash, uint64_t floor)
{
    if (s->unsettled_overflow_txn > floor) return 1;
    uint64_t k = unsettled_key(db, hash);
    for (size_t i = 0; i < s->unsettled_len; i++) {
        const store_unsettled_delete *u = &s->unsettled[(s->unsettled_head + i) % s->unsettled_cap];
        if (u->key == k && u->txn > floor) return 1;
    }
    return 0;
}

/* ---- recovery ---- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int list_log_files(const char *dir, uint32_t **ids, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d) return HANU_ERR_IO;
    size_t cap = 16;
    *ids = malloc(cap * sizeof **ids);
    *n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        unsigned id;
        char ext[16];
        int used = 0;
        if (sscanf(de->d_name, "%u.%15[a-z]%n", &id, ext, &used) != 2 || de->d_name[used]) continue;
        if (strcmp(ext, "tmp") == 0) continue;
        if (strcmp(ext, "log") != 0) continue;
        if (*n == cap) {
            cap *= 2;
            uint32_t *ni = realloc(*ids, cap * sizeof *ni);
            if (!ni) { closedir(d); return HANU_ERR_NOMEM; }
            *ids = ni;
        }
        (*ids)[(*n)++] = id;
    }
    closedir(d);
    qsort(*ids, *n, sizeof **ids, cmp_u32);
    return HANU_OK;
}

static void remove_tmp_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char path[1400];
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".tmp") == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

static int open_file(store *s, uint32_t id, store_file **out, log_file_header *h, uint64_t *size,
                     char *err, size_t errcap)
{
    char path[1200];
    log_file_path(path, sizeof path, s->log_dir, id, "log");
    store_file *f = file_add(s, id);
    if (!f) return HANU_ERR_NOMEM;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) != 0) {
        snprintf(err, errcap, "log/%06u.log: cannot open: %s", id, strerror(errno));
        return HANU_ERR_IO;
    }
    *size = (uint64_t)st.st_size;
    uint8_t hb[LOG_FILE_HEADER_SIZE];
    if (*size < LOG_FILE_HEADER_SIZE || hanu_pread_full(f->fd, hb, sizeof hb, 0) != HANU_OK ||
        log_file_header_decode(hb, h) != HANU_OK || h->file_id != id) {
        snprintf(err, errcap, "log/%06u.log: bad file header at offset 0", id);
        return HANU_ERR_CORRUPT;
    }
    f->compacted = (h->flags & LOG_FLAG_COMPACTED) != 0;
    f->generation = h->generation;
    size_t want = HANU_MAX((size_t)*size, (size_t)s->opt.file_size);
    if (*size > 0 && store_file_map(f, want) != HANU_OK) {
        snprintf(err, errcap, "log/%06u.log: mmap failed: %s", id, strerror(errno));
        return HANU_ERR_IO;
    }
    *out = f;
    return HANU_OK;
}

/* True when file id holds at least one decodable frame (or a seal) after a valid header. */
static int file_has_frames(store *s, uint32_t id)
{
    char path[1200];
    log_file_path(path, sizeof path, s->log_dir, id, "log");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t hb[LOG_FILE_HEADER_SIZE + LOG_FRAME_HEADER_SIZE];
    log_file_header h;
    int ok = 0;
    if (hanu_pread_full(fd, hb, sizeof hb, 0) == HANU_OK && log_file_header_decode(hb, &h) == HANU_OK) {
        uint32_t body = hanu_get_u32(hb + LOG_FILE_HEADER_SIZE);
        if (body <= LOG_MAX_FRAME_BODY) {
            size_t n = LOG_FRAME_HEADER_SIZE + body;
            uint8_t *buf = malloc(n);
            if (buf && hanu_pread_full(fd, buf, n, LOG_FILE_HEADER_SIZE) == HANU_OK) {
                int r = log_frame_decode(buf, n, &(log_frame){0}, NULL);
                ok = r == LOG_FRAME_OK || r == LOG_FRAME_SEAL;
            }
            free(buf);
        }
    }
    close(fd);
    return ok;
}

/* Scans the frames of f up to its seal. In the newest file the first frame that does
   not decode ends the data (a torn tail); in any other file it is damage, and so is a
   file that ends without a seal. *expected is the txn the log must continue with. */
static int scan_file(store *s, store_file *f, const log_file_header *h, uint64_t size,
                     int newest, uint64_t *expected, uint64_t *stop_off, int *sealed,
                     char *err, size_t errcap)
{
    uint64_t off = LOG_FILE_HEADER_SIZE;
    uint64_t prev_txn = 0;
    *sealed = 0;
    if (f->compacted && *expected && h->covers_first != *expected) {
        snprintf(err, errcap, "log/%06u.log: compacted file covers txn %llu.. but the log "
                 "continues at txn %llu", f->id, (unsigned long long)h->covers_first,
                 (unsigned long long)*expected);
        return HANU_ERR_CORRUPT;
    }
    log_walker wk;
    log_walker_init(&wk, f->map, size);
    for (;;) {
        log_frame fr;
        const char *why = "";
        int r = log_walker_next(&wk, &fr, &off, &why);
        if (r != LOG_FRAME_OK) off = wk.off;
        if (r == LOG_FRAME_SEAL) { *sealed = 1; break; }
        if (r == LOG_FRAME_END) why = "the file ends without a seal";
        if (r == LOG_FRAME_OK) {
            /* A plain file started after a crash may skip txns that were lost
               (its header says where the log continued: log.h). */
            int skip = !f->compacted && !prev_txn && h->covers_first && *expected &&
                       h->covers_first == *expected && fr.txn > *expected;
            int bad_txn = f->compacted
                ? (fr.txn <= prev_txn || fr.txn < h->covers_first || fr.txn > h->covers_last)
                : (*expected && fr.txn != *expected && !skip);
            if (!bad_txn) {
                uint32_t pos = 0;
                log_entry e;
                while (log_frame_next_entry(&fr, &pos, &e)) {
                    int rc = store_apply_entry(s, &e, fr.txn, f->id, (uint32_t)off + e.value_offset);
                    if (rc) {
                        snprintf(err, errcap, "log/%06u.log: applying txn %llu: %s", f->id,
                                 (unsigned long long)fr.txn, hanu_status_str(rc));
                        return rc;
                    }
                }
                if (!f->first_txn) f->first_txn = fr.txn;
                f->last_txn = fr.txn;
                prev_txn = fr.txn;
                if (!f->compacted) *expected = fr.txn + 1;
                off = wk.off;
                continue;
            }
            why = "txn out of sequence";   /* the walk ends at this frame */
        }
        if (newest && !f->compacted) break;   /* torn tail: keep everything before it */
        snprintf(err, errcap, "log/%06u.log: %s at offset %llu; the file is sealed, so this "
                 "is damage, not a torn write (restore the file, or move it away to accept the loss)",
                 f->id, why, (unsigned long long)off);
        return HANU_ERR_CORRUPT;
    }
    if (f->compacted) *expected = h->covers_last + 1;
    f->used = off;
    *stop_off = off;
    return HANU_OK;
}

/* ---- quarantine: bytes recovery will not read again are kept, not destroyed ---- */

static int quarantine_dir(store *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s/quarantine", s->data_dir);
    return hanu_mkdir_p(out);
}

/* Copies bytes [from, end of the last non-zero byte) of fd to quarantine/NAME;
   nothing when they are all zero (a preallocated file's unused end). */
/* The end of the last non-zero byte in [from, size) of fd, or from when there is
   none (a preallocated file's unused end is zeros). */
static uint64_t content_end(int fd, uint64_t from, uint64_t size)
{
    uint8_t buf[65536];
    uint64_t end = size;
    while (end > from) {
        uint64_t at = end - HANU_MIN((uint64_t)sizeof buf, end - from);
        if (hanu_pread_full(fd, buf, (size_t)(end - at), (off_t)at) != HANU_OK) return end;
        size_t i = (size_t)(end - at);
        while (i > 0 && buf[i - 1] == 0) i--;
        if (i > 0) return at + i;
        end = at;
    }
    return from;
}

static void quarantine_tail(store *s, int fd, uint32_t id, uint64_t from, uint64_t size)
{
    uint8_t buf[65536];
    uint64_t end = content_end(fd, from, size);
    if (end <= from) return;
    char dir[1200], path[1300];
    if (quarantine_dir(s, dir, sizeof dir) != HANU_OK) return;
    snprintf(path, sizeof path, "%s/%06u.log.from-%llu", dir, id, (unsigned long long)from);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) return;
    int rc = HANU_OK;
    for (uint64_t at = from; at < end && rc == HANU_OK; at += sizeof buf) {
        size_t n = (size_t)HANU_MIN((uint64_t)sizeof buf, end - at);
        rc = hanu_pread_full(fd, buf, n, (off_t)at);
        if (rc == HANU_OK) rc = hanu_write_full(out, buf, n);
    }
    if (rc == HANU_OK && fdatasync(out) != 0) rc = HANU_ERR_IO;
    close(out);
    if (rc == HANU_OK) hanu_fsync_dir(dir);
    hlog_error("store", "log/%06u.log: %llu bytes after offset %llu that recovery does not read "
            "again were %s quarantine/%06u.log.from-%llu", id, (unsigned long long)(end - from),
            (unsigned long long)from, rc == HANU_OK ? "copied to" : "NOT fully copied to", id,
            (unsigned long long)from);
}

/* Moves a whole file into quarantine/ (it held no frame recovery could read). */
static int quarantine_file(store *s, uint32_t id)
{
    char dir[1200], from[1200], to[1300];
    int rc = quarantine_dir(s, dir, sizeof dir);
    if (rc) return rc;
    log_file_path(from, sizeof from, s->log_dir, id, "log");
    snprintf(to, sizeof to, "%s/%06u.log", dir, id);
    if (rename(from, to) != 0) return HANU_ERR_IO;
    hanu_fsync_dir(dir);
    hanu_fsync_dir(s->log_dir);
    hlog_warn("store", "log/%06u.log holds no readable frame but is not empty: moved to "
            "quarantine/%06u.log", id, id);
    return HANU_OK;
}

/* Does the file hold any non-zero byte after its header? */
static int file_has_content(store *s, uint32_t id)
{
    char path[1200];
    log_file_path(path, sizeof path, s->log_dir, id, "log");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return 0;
    int found = fstat(fd, &st) == 0 &&
                content_end(fd, LOG_FILE_HEADER_SIZE, (uint64_t)st.st_size) > LOG_FILE_HEADER_SIZE;
    close(fd);
    return found;
}

/* Seals the newest file at its last complete frame: whatever follows (a torn write,
   stale bytes) is never read again; it is copied to quarantine/ when it is not all
   zeros, then the space after the seal is given back. */
static int seal_tail(store *s, uint32_t id, uint64_t at, uint64_t last_txn, char *err, size_t errcap)
{
    char path[1200];
    log_file_path(path, sizeof path, s->log_dir, id, "log");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errcap, "log/%06u.log: %s", id, strerror(errno)); return HANU_ERR_IO; }
    struct stat st;
    uint8_t seal[LOG_FRAME_HEADER_SIZE];
    log_seal_encode(seal, last_txn);
    int rc = fstat(fd, &st) == 0 ? HANU_OK : HANU_ERR_IO;
    if (rc == HANU_OK) quarantine_tail(s, fd, id, at, (uint64_t)st.st_size);
    if (rc == HANU_OK) rc = hanu_pwrite_full(fd, seal, sizeof seal, (off_t)at);
    /* Also makes frames recovered from the page cache (never synced) durable now. */
    if (rc == HANU_OK && fdatasync(fd) != 0) rc = HANU_ERR_IO;
    uint64_t end = at + sizeof seal;
    if (rc == HANU_OK && (uint64_t)st.st_size > end) {
        uint64_t page = 4096, from = (end + page - 1) & ~(page - 1);
        if ((uint64_t)st.st_size > from)   /* best effort: not every file system punches holes */
            (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from,
                            (off_t)((uint64_t)st.st_size - from));
    }
    close(fd);
    if (rc) snprintf(err, errcap, "log/%06u.log: cannot write its seal: %s", id, hanu_status_str(rc));
    return rc;
}

/* After a compacted file that covers the log up to expected - 1, a file whose txns
   start below expected can only be one that a merge already copied into it (the
   merge was interrupted before deleting it: store_compact.c). */
static int merged_leftover(const store_file *f, const log_file_header *h, uint64_t size,
                           uint64_t expected)
{
    if (!expected) return 0;
    if (f->compacted) return h->covers_last < expected;
    /* A plain file: every frame it holds must lie below expected (a file only partly
       covered is not a merge's leftover; it goes on to the checks that report damage). */
    log_walker wk;
    log_walker_init(&wk, f->map, size);
    log_frame fr;
    uint64_t at;
    int frames = 0;
    while (log_walker_next(&wk, &fr, &at, NULL) == LOG_FRAME_OK) {
        if (fr.txn >= expected) return 0;
        frames++;
    }
    return frames > 0;
}

static void drop_merged_leftover(store *s, uint32_t id)
{
    char path[1200];
    file_free(s->files[id]);
    s->files[id] = NULL;
    log_file_path(path, sizeof path, s->log_dir, id, "log");
    unlink(path);
    log_file_path(path, sizeof path, s->log_dir, id, "hint");
    unlink(path);
    hanu_fsync_dir(s->log_dir);
    if (!s->opt.quiet)
        hlog_info("store", "removed log/%06u.log: an interrupted merge had already copied it "
                "into the file before it", id);
}

static int recover(store *s, uint32_t *active_id, uint64_t *next_txn, char *err, size_t errcap)
{
    uint32_t *ids = NULL;
    size_t n = 0;
    int rc = list_log_files(s->log_dir, &ids, &n);
    if (rc) { snprintf(err, errcap, "cannot list %s", s->log_dir); free(ids); return rc; }
    /* File ids are never reused (a merge deletes files, and a reused id could be
       taken for one of them), so the next file comes after the highest id seen. */
    uint32_t max_id = n ? ids[n - 1] : 0;
    /* Files after the last one holding a frame were created ahead of time, or their
       first frame was torn: they hold nothing that was ever acknowledged. */
    while (n > 0 && !file_has_frames(s, ids[n - 1])) {
        char path[1200];
        log_file_path(path, sizeof path, s->log_dir, ids[n - 1], "log");
        if (!file_has_content(s, ids[n - 1]) || quarantine_file(s, ids[n - 1]) != HANU_OK) unlink(path);
        n--;
    }
    /* Size the default database's table once from the hint files' entry counts
       rather than growing it step by step (most keys usually live there). */
    uint64_t hinted = 0;
    for (size_t i = 0; i < n; i++) hinted += store_hint_peek_count(s, ids[i]);
    store_db *d0 = store_db_by_id(s, STORE_DEFAULT_DB_ID);
    if (d0 && hinted) keydir_reserve(&d0->kd, (size_t)hinted);
    uint64_t expected = 0, stop = LOG_FILE_HEADER_SIZE;
    size_t from_hints = 0;
    int sealed = 1, prev_compacted = 0;
    for (size_t i = 0; i < n && rc == HANU_OK; i++) {
        store_file *f;
        log_file_header h;
        uint64_t size;
        rc = open_file(s, ids[i], &f, &h, &size, err, errcap);
        if (rc) break;
        if (prev_compacted && merged_leftover(f, &h, size, expected)) {
            drop_merged_leftover(s, ids[i]);
            continue;
        }
        prev_compacted = f->compacted;
        if (i == 0) s->oldest_file = ids[i];
        int newest = i + 1 == n;
        if (f->compacted && store_hint_load(s, f, err, errcap) == HANU_OK) {
            if (expected && h.covers_first != expected) {
                snprintf(err, errcap, "log/%06u.log: compacted file covers txn %llu.. but the log "
                         "continues at txn %llu", f->id, (unsigned long long)h.covers_first,
                         (unsigned long long)expected);
                rc = HANU_ERR_CORRUPT;
                break;
            }
            expected = h.covers_last + 1;
            from_hints++;
            sealed = 1;
            continue;
        }
        rc = scan_file(s, f, &h, size, newest, &expected, &stop, &sealed, err, errcap);
    }
    /* Damage or a torn tail? Frames at or below the durable mark were synced: if
       the log ends before it, they are damaged or missing, not torn. */
    uint64_t reserved = 0, mark = 0;
    if (rc == HANU_OK) {
        char rp[1200];
        snprintf(rp, sizeof rp, "%s/meta/txn", s->data_dir);
        int mrc = log_txn_reserve_read(rp, &reserved, &mark);
        if (mrc == HANU_OK && (reserved > (UINT64_MAX >> 1) || mark > reserved)) mrc = HANU_ERR_CORRUPT;
        if (mrc == HANU_ERR_CORRUPT) {
            snprintf(err, errcap, "meta/txn is damaged: it says which txns were handed out; restore it "
                     "(or write a larger reservation) before starting");
            rc = mrc;
        }
    }
    uint64_t last = expected ? expected - 1 : 0;
    if (rc == HANU_OK && mark > last) {
        uint32_t at_id = n ? ids[n - 1] : 0;
        if (!s->opt.salvage) {
            snprintf(err, errcap, "log/%06u.log: the log ends at txn %llu (offset %llu) but txns up to %llu "
                     "were durable: frames are damaged or missing. Restore the data directory from a "
                     "copy, or start with --salvage to keep the log up to txn %llu (the bytes after it "
                     "go to quarantine/)", at_id, (unsigned long long)last, (unsigned long long)stop,
                     (unsigned long long)mark, (unsigned long long)last);
            rc = HANU_ERR_CORRUPT;
        } else {
            hlog_warn("store", "salvage: the log ends at txn %llu in log/%06u.log (offset %llu) but "
                    "txns up to %llu were durable; keeping what is readable, the rest goes to "
                    "quarantine/", (unsigned long long)last, at_id, (unsigned long long)stop,
                    (unsigned long long)mark);
        }
    }
    if (rc == HANU_OK) {
        *next_txn = expected ? expected : 1;
        *active_id = max_id + 1;
        if (n && !sealed) {
            store_file *last = store_file_get(s, ids[n - 1]);
            rc = seal_tail(s, ids[n - 1], stop, last->last_txn, err, errcap);
            if (rc == HANU_OK && !s->opt.quiet)
                hlog_info("store", "sealed log/%06u.log after its last complete frame (offset %llu)",
                        ids[n - 1], (unsigned long long)stop);
        }
        /* A clean stop or a sealed rotation synced it; a crash right after a seal's
           pwrite did not: what recovery found is made durable before anything
           built on it is acknowledged. */
        size_t last = n;
        while (last > 0 && !store_file_get(s, ids[last - 1])) last--;   /* merge leftovers went */
        if (rc == HANU_OK && last && sealed) {
            char path[1200];
            log_file_path(path, sizeof path, s->log_dir, ids[last - 1], "log");
            int fd = open(path, O_RDWR | O_CLOEXEC);
            if (fd < 0 || fdatasync(fd) != 0) {
                snprintf(err, errcap, "log/%06u.log: cannot sync it: %s", ids[last - 1], strerror(errno));
                rc = HANU_ERR_IO;
            }
            if (fd >= 0) close(fd);
        }
        if (!s->opt.quiet && n)
            hlog_info("store", "recovered %zu log files (%zu from hint files), next txn %llu",
                    n, from_hints, (unsigned long long)*next_txn);
    }
    free(ids);
    return rc;
}

static void on_durable_forward(void *ctx, uint64_t txn, int failed)
{
    store *s = ctx;
    if (s->opt.on_durable) s->opt.on_durable(s->opt.ctx, txn, failed);
}

/* The PID the holder of DATA/LOCK wrote into it; 0 when none can be read. */
static long lock_holder_pid(int fd)
{
    char buf[24];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *end;
    long pid = strtol(buf, &end, 10);
    return pid > 0 && *end == '\n' ? pid : 0;
}

static void in_use_error(const char *data_dir, int fd, char *err, size_t errcap)
{
    long pid = lock_holder_pid(fd);
    if (pid)
        snprintf(err, errcap, "data directory %s is in use by another hanudb process: PID %ld holds %s/LOCK",
                 data_dir, pid, data_dir);
    else
        snprintf(err, errcap, "data directory %s is in use by another hanudb process (%s/LOCK names no PID)",
                 data_dir, data_dir);
}

/* The lock is the flock; the PID in the file is only for the message of the next
   one refused (a stale PID of a crashed holder is never read: its flock is gone). */
static void write_lock_pid(int fd)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        /* informational only: the lock holds without it */
    }
}

int store_lock_check(const char *data_dir, char *err, size_t errcap)
{
    char lockp[1100];
    snprintf(lockp, sizeof lockp, "%s/LOCK", data_dir);
    int fd = open(lockp, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return HANU_OK;   /* no directory, or never opened: nobody holds it */
    int rc = HANU_OK;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        in_use_error(data_dir, fd, err, errcap);
        rc = HANU_ERR_BUSY;
    }
    close(fd);
    return rc;
}

int store_open(const store_options *o, store **out, char *err, size_t errcap)
{
    uint64_t t0 = hanu_now_ns();
    store *s = calloc(1, sizeof *s);
    if (!s) return HANU_ERR_NOMEM;
    s->opt = *o;
    if (!s->opt.file_size) s->opt.file_size = 64ull << 20;
    if (!s->opt.max_key || s->opt.max_key > 65535) s->opt.max_key = s->opt.max_key ? 65535 : 1024;
    if (!s->opt.max_value) s->opt.max_value = 1u << 20;
    if (!s->opt.compact_ratio) s->opt.compact_ratio = 0.5;
    if (s->opt.compact_min_dead > s->opt.file_size / 4) s->opt.compact_min_dead = s->opt.file_size / 4;
    snprintf(s->data_dir, sizeof s->data_dir, "%s", o->data_dir);
    snprintf(s->log_dir, sizeof s->log_dir, "%s/log", s->data_dir);
    s->lock_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->compact_mu, NULL);
    pthread_mutex_init(&s->watermark_save_mu, NULL);
    pthread_cond_init(&s->compact_cv, NULL);

    char meta[1100], lockp[1100];
    snprintf(meta, sizeof meta, "%s/meta", s->data_dir);
    snprintf(lockp, sizeof lockp, "%s/LOCK", s->data_dir);
    if (hanu_mkdir_p(s->log_dir) || hanu_mkdir_p(meta)) {
        snprintf(err, errcap, "cannot create %s: %s", s->log_dir, strerror(errno));
        store_close(s);
        return HANU_ERR_IO;
    }
    s->lock_fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        snprintf(err, errcap, "cannot open %s: %s", lockp, strerror(errno));
        store_close(s);
        return HANU_ERR_IO;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        in_use_error(s->data_dir, s->lock_fd, err, errcap);
        store_close(s);
        return HANU_ERR_BUSY;
    }
    write_lock_pid(s->lock_fd);
    remove_tmp_files(s->log_dir);
    int rc = db_add(s, STORE_DEFAULT_DB_ID, "default", 7, STORE_DB_KV, 0);
    if (rc == HANU_OK) rc = db_add(s, STORE_SYSTEM_DB_ID, "_system", 7, STORE_DB_UNTYPED, 0);
    uint32_t active_id = 1;
    uint64_t next_txn = 1;
    /* Before anything can compact: the watermarks hold the floor down. */
    if (rc == HANU_OK) rc = store_watermarks_load(s, err, errcap);
    if (rc == HANU_OK) rc = recover(s, &active_id, &next_txn, err, errcap);
    if (rc) { store_close(s); return rc; }

    char reserve_path[1200];
    snprintf(reserve_path, sizeof reserve_path, "%s/meta/txn", s->data_dir);
    log_options lo = {
        .dir = s->log_dir, .file_size = s->opt.file_size, .prealloc = s->opt.prealloc,
        .commit_window_us = s->opt.commit_window_us,
        .lazy_sync_ms = s->opt.lazy_sync_ms, .on_durable = on_durable_forward, .ctx = s,
        .reserve_path = reserve_path,
    };
    rc = log_writer_open(&lo, active_id, LOG_FILE_HEADER_SIZE, next_txn, &s->log);
    if (rc) {
        snprintf(err, errcap, "cannot open the active log file %06u: %s", active_id, hanu_status_str(rc));
        store_close(s);
        return rc;
    }
    s->last_txn = log_writer_next_txn(s->log) - 1;
    if (s->last_txn + 1 != next_txn && !s->opt.quiet && log_writer_resumed_clean(s->log))
        hlog_info("store", "numbering resumes at %llu, where the last (clean) stop left it: txns %llu..%llu "
                "were skipped on purpose (after a rebuild or a take-over) and never handed out",
                (unsigned long long)s->last_txn + 1, (unsigned long long)next_txn,
                (unsigned long long)s->last_txn);
    else if (s->last_txn + 1 != next_txn && !s->opt.quiet)
        hlog_warn("store", "txns %llu..%llu may have been seen before a crash and were lost: "
                "numbering resumes at %llu, so no txn or token is ever reused",
                (unsigned long long)next_txn, (unsigned long long)s->last_txn,
                (unsigned long long)s->last_txn + 1);
    store_file *af = store_file_get(s, active_id);
    if (!af) {
        uint64_t size;
        log_file_header h;
        rc = open_file(s, active_id, &af, &h, &size, err, errcap);
        if (rc) { store_close(s); return rc; }
        af->used = LOG_FILE_HEADER_SIZE;
    }
    if (s->oldest_file == 0) s->oldest_file = active_id;
    s->startup_ms = (hanu_now_ns() - t0) / 1000000;
    if (!s->opt.quiet) {
        for (size_t i = 0; i < s->ndbs; i++)
            hlog_info("store", "database %s: %zu keys, %llu bytes", s->dbs[i]->name,
                    s->dbs[i]->kd.count, (unsigned long long)s->dbs[i]->bytes);
        hlog_info("store", "store opened in %llu ms (data %s, log file %06u)",
                (unsigned long long)s->startup_ms, s->data_dir, active_id);
    }
    if (s->opt.background_compaction) {
        if (pthread_create(&s->compact_thread, NULL, store_compact_main, s) == 0) s->compact_started = 1;
    }
    *out = s;
    return HANU_OK;
}

void store_close(store *s)
{
    if (!s) return;
    if (s->compact_started) {
        atomic_store(&s->compact_abort, 1);   /* before waiting for the lock it holds */
        pthread_mutex_lock(&s->compact_mu);
        s->compact_stop = 1;
        pthread_cond_broadcast(&s->compact_cv);
        pthread_mutex_unlock(&s->compact_mu);
        pthread_join(s->compact_thread, NULL);
    }
    if (s->log) {
        log_writer_sync(s->log);
        log_writer_close(s->log);
    }
    for (size_t i = 0; i < s->ndbs; i++) {
        keydir_free(&s->dbs[i]->kd);
        free(s->dbs[i]);
    }
    free(s->dbs);
    for (uint32_t i = 0; i < s->files_cap; i++) file_free(s->files[i]);
    free(s->files);
    free(s->unsettled);
    free(s->watch);
    free(s->entries);
    hanu_buf_free(&s->frame);
    if (s->lock_fd >= 0) close(s->lock_fd);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->compact_mu);
    pthread_mutex_destroy(&s->watermark_save_mu);
    pthread_cond_destroy(&s->compact_cv);
    free(s);
}

/* ---- reads ---- */

uint64_t store_db_generation(store *s) { return atomic_load(&s->db_generation); }

int store_db_lookup(store *s, const char *name, size_t len, uint32_t *id)
{
    pthread_mutex_lock(&s->mu);
    store_db *d = db_by_name(s, name, len);
    if (d) *id = d->id;
    pthread_mutex_unlock(&s->mu);
    return d ? HANU_OK : HANU_ERR_NOT_FOUND;
}

/* The value of e: in the log's pending buffer (a write of this loop iteration, copied
   to scratch: a read never writes) or in its file's map. mu held. */
static int entry_value(store *s, const kd_entry *e, hanu_buf *scratch, const uint8_t **value)
{
    store_file *f = store_file_get(s, e->file_id);
    size_t before = scratch->len;
    int pending = log_writer_read_pending(s->log, e->file_id, e->value_off, e->value_len, scratch);
    if (pending < 0) return pending;
    if (pending) *value = scratch->data + before;
    else if (!f || !f->map || (uint64_t)e->value_off + e->value_len > f->map_len) return HANU_ERR_IO;
    else *value = f->map + e->value_off;
    return HANU_OK;
}

uint64_t store_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The entry if its key is live: an expired key reads as absent (lazy expiry). Keys
   without an expiry pay one flag test; only keys with one read the clock. */
static inline kd_entry *live_entry(kd_entry *e)
{
    return e && (e->flags & KD_EXPIRES) && kd_entry_expiry(e) <= store_now_ms() ? NULL : e;
}

static kd_entry *live_get(store_db *d, const void *key, size_t key_len, uint64_t h)
{
    return d ? live_entry(keydir_get(&d->kd, key, (uint16_t)key_len, h)) : NULL;
}

int store_get(store *s, uint32_t db, const void *key, size_t key_len, hanu_buf *value, uint64_t *token)
{
    uint64_t expire;
    return store_get_expiring(s, db, key, key_len, value, token, &expire);
}

int store_get_expiring(store *s, uint32_t db, const void *key, size_t key_len, hanu_buf *value,
                       uint64_t *token, uint64_t *expire_ms)
{
    uint8_t type;
    return store_get_typed(s, db, key, key_len, value, token, expire_ms, &type);
}

int store_get_typed(store *s, uint32_t db, const void *key, size_t key_len, hanu_buf *value,
                    uint64_t *token, uint64_t *expire_ms, uint8_t *type)
{
    if (key_len == 0 || key_len > s->opt.max_key) return HANU_ERR_NOT_FOUND;
    uint64_t h = keydir_hash(key, key_len);
    pthread_mutex_lock(&s->mu);
    kd_entry *e = live_get(store_db_by_id(s, db), key, key_len, h);
    int rc = HANU_ERR_NOT_FOUND;
    if (e) {
        size_t before = value->len;
        const uint8_t *v;
        rc = entry_value(s, e, value, &v);
        /* Pending bytes were appended to value already. */
        if (rc == HANU_OK && value->len == before) rc = hanu_buf_append(value, v, e->value_len);
        if (rc == HANU_OK) {
            *token = e->txn;
            *expire_ms = kd_entry_expiry(e);
            *type = kd_entry_type(e);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

#define GET_MANY_CHUNK 32        /* hashes kept on the stack per pass */
#define GET_MANY_PREFETCH 2048   /* bytes of each value hinted ahead of the copies */

int store_get_many(store *s, uint32_t db, store_get_item *items, size_t n, hanu_buf *out)
{
    int first_err = HANU_OK;
    for (size_t base = 0; base < n; base += GET_MANY_CHUNK) {
        size_t m = HANU_MIN(GET_MANY_CHUNK, n - base);
        store_get_item *it = items + base;
        uint64_t h[GET_MANY_CHUNK];
        kd_entry *e[GET_MANY_CHUNK];
        for (size_t i = 0; i < m; i++) {
            it[i].rc = HANU_ERR_NOT_FOUND;
            it[i].off = it[i].len = 0;
            h[i] = keydir_hash(it[i].key, it[i].key_len);
        }
        pthread_mutex_lock(&s->mu);
        store_db *d = store_db_by_id(s, db);
        for (size_t i = 0; d && i < m; i++) keydir_prefetch(&d->kd, h[i]);
        for (size_t i = 0; d && i < m; i++) keydir_prefetch_entry(&d->kd, h[i]);
        for (size_t i = 0; i < m; i++) {
            int ok = d && it[i].key_len && it[i].key_len <= s->opt.max_key;
            e[i] = ok ? live_get(d, it[i].key, it[i].key_len, h[i]) : NULL;
            store_file *f = e[i] ? store_file_get(s, e[i]->file_id) : NULL;
            if (f && f->map && (uint64_t)e[i]->value_off + e[i]->value_len <= f->map_len)
                for (uint32_t k = 0; k < e[i]->value_len && k < GET_MANY_PREFETCH; k += 64)
                    __builtin_prefetch(f->map + e[i]->value_off + k);
        }
        for (size_t i = 0; i < m; i++) {
            if (!e[i]) continue;
            const uint8_t *v;
            size_t before = out->len;
            int rc = entry_value(s, e[i], out, &v);
            if (rc == HANU_OK && out->len == before) rc = hanu_buf_append(out, v, e[i]->value_len);
            it[i].rc = rc;
            if (rc) {
                out->len = before;
                if (!first_err) first_err = rc;
                continue;
            }
            it[i].off = before;
            it[i].len = e[i]->value_len;
            it[i].token = e[i]->txn;
        }
        pthread_mutex_unlock(&s->mu);
    }
    return first_err;
}

int store_lookup(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *token)
{
    if (key_len == 0 || key_len > s->opt.max_key) return HANU_ERR_NOT_FOUND;
    uint64_t h = keydir_hash(key, key_len);
    pthread_mutex_lock(&s->mu);
    kd_entry *e = live_get(store_db_by_id(s, db), key, key_len, h);
    if (e) *token = e->txn;
    pthread_mutex_unlock(&s->mu);
    return e ? HANU_OK : HANU_ERR_NOT_FOUND;
}

int store_expiry(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *expire_ms,
                 uint64_t *token)
{
    uint8_t type;
    return store_key_meta(s, db, key, key_len, expire_ms, token, &type);
}

int store_key_meta(store *s, uint32_t db, const void *key, size_t key_len, uint64_t *expire_ms,
                   uint64_t *token, uint8_t *type)
{
    if (key_len == 0 || key_len > s->opt.max_key) return HANU_ERR_NOT_FOUND;
    uint64_t h = keydir_hash(key, key_len);
    pthread_mutex_lock(&s->mu);
    kd_entry *e = live_get(store_db_by_id(s, db), key, key_len, h);
    if (e) {
        *expire_ms = kd_entry_expiry(e);
        *token = e->txn;
        *type = kd_entry_type(e);
    }
    pthread_mutex_unlock(&s->mu);
    return e ? HANU_OK : HANU_ERR_NOT_FOUND;
}

/* ---- writes (writer thread only) ---- */

/* Tells the compaction thread a file was sealed. Never waits: the thread holds
   compact_mu for a whole compaction (seconds), and it looks again every second. */
static void wake_compactor(store *s)
{
    if (pthread_mutex_trylock(&s->compact_mu) != 0) return;
    pthread_cond_broadcast(&s->compact_cv);
    pthread_mutex_unlock(&s->compact_mu);
}

/* Adds an entry to the frame in s->frame and remembers it for the apply that
   follows the append (the frame is not decoded again). */
static int frame_add(store *s, uint8_t op, uint32_t db, const void *key, uint16_t key_len,
                     const void *value, uint32_t value_len, uint64_t expire_ms, uint8_t type)
{
    if (s->nentries == s->entries_cap) {
        size_t ncap = s->entries_cap ? s->entries_cap * 2 : 64;
        log_entry *n = realloc(s->entries, ncap * sizeof *n);
        if (!n) return HANU_ERR_NOMEM;
        s->entries = n;
        s->entries_cap = ncap;
    }
    uint32_t value_offset = (uint32_t)(s->frame.len + LOG_ENTRY_HEADER_SIZE + key_len);
    int rc = log_frame_add_typed(&s->frame, op, db, key, key_len, value, value_len, expire_ms, type);
    if (rc) return rc;
    /* value does not hold an op 6's or 7's trailer: apply reads expire_ms and type,
       never the value. */
    if (type) op = LOG_OP_PUT_TYPED;
    else if (expire_ms) op = LOG_OP_PUT_EXPIRING;
    uint32_t suffix = log_op_trailer(op);
    s->entries[s->nentries++] = (log_entry){ op, db, key, key_len, value, value_len + suffix, value_offset,
                                             expire_ms, type };
    return HANU_OK;
}

static int frame_begin(store *s)
{
    s->nentries = 0;
    return log_frame_begin(&s->frame);
}

/* Appends the frame in s->frame and applies its entries: with the next txn when at
   is 0, else with txn at (replay); *txn gets it. mu is NOT held on entry. */
static int append_and_apply(store *s, uint64_t at, uint64_t *txn)
{
    log_location loc;
    uint32_t rotated = 0;
    *txn = at;
    int rc = at ? log_writer_append_at(s->log, &s->frame, at, &loc, &rotated)
                : log_writer_append(s->log, &s->frame, txn, &loc, &rotated);
    if (rc) return rc;
    pthread_mutex_lock(&s->mu);
    store_file *f = store_file_get(s, loc.file_id);
    if (!f || f->fd < 0) {
        char path[1200];
        log_file_path(path, sizeof path, s->log_dir, loc.file_id, "log");
        f = file_add(s, loc.file_id);
        if (f) f->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (!f || f->fd < 0 || store_file_map(f, s->opt.file_size) != HANU_OK) {
            pthread_mutex_unlock(&s->mu);
            hlog_error("store", "cannot map new log file %06u: %s", loc.file_id, strerror(errno));
            return HANU_ERR_IO;
        }
    }
    if ((uint64_t)loc.offset + s->frame.len > f->map_len &&
        store_file_map(f, (size_t)loc.offset + s->frame.len) != HANU_OK) {
        pthread_mutex_unlock(&s->mu);
        return HANU_ERR_IO;
    }
    f->used = loc.offset + s->frame.len;
    if (!f->first_txn) f->first_txn = *txn;
    f->last_txn = *txn;
    store_settle(s, store_floor_locked(s));
    for (size_t i = 0; rc == HANU_OK && i < s->nentries; i++) {
        const log_entry *e = &s->entries[i];
        rc = store_apply_entry(s, e, *txn, loc.file_id, loc.offset + e->value_offset);
        store_note_unsettled(s, e, *txn);
        if (s->watch_count && !s->sweep_writing && (e->op != LOG_OP_CREATE_DB && e->op != LOG_OP_DROP_DB))
            store_watch_touch_locked(s, e->db, e->key, e->key_len);
    }
    s->last_txn = *txn;
    pthread_mutex_unlock(&s->mu);
    if (rotated) wake_compactor(s);
    /* After last_txn (seq_cst both): a projection arming now sees the record there, or
       this sees its arm. */
    if (atomic_load(&s->kick_armed) && atomic_exchange(&s->kick_armed, 0) && s->kick_fn) s->kick_fn(s->kick_ctx);
    return rc;
}

void store_set_append_kick(store *s, void (*fn)(void *ctx), void *ctx)
{
    atomic_store(&s->kick_armed, 0);
    s->kick_fn = fn;
    s->kick_ctx = ctx;
}

void store_arm_append_kick(store *s) { atomic_store(&s->kick_armed, 1); }

int store_write(store *s, uint32_t db, const store_op *ops, size_t n, int cond,
                uint64_t cond_token, uint64_t *txn, uint64_t *current)
{
    return store_write_expiring(s, db, ops, NULL, n, cond, cond_token, txn, current);
}

int store_write_expiring(store *s, uint32_t db, const store_op *ops, const uint64_t *expire_ms, size_t n,
                         int cond, uint64_t cond_token, uint64_t *txn, uint64_t *current)
{
    return store_write_typed(s, db, ops, expire_ms, NULL, n, cond, cond_token, txn, current);
}

int store_write_typed(store *s, uint32_t db, const store_op *ops, const uint64_t *expire_ms, const uint8_t *types,
                      size_t n, int cond, uint64_t cond_token, uint64_t *txn, uint64_t *current)
{
    if (n == 0) return HANU_ERR_INVALID;
    if (n > LOG_MAX_ENTRIES_PER_FRAME) return HANU_ERR_TOO_LARGE;
    if (log_writer_failed(s->log)) return HANU_ERR_STOPPED;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].key_len == 0) return HANU_ERR_INVALID;
        if (ops[i].key_len > s->opt.max_key) return HANU_ERR_TOO_LARGE;
        if (ops[i].kind != STORE_DELETE && ops[i].value_len > s->opt.max_value) return HANU_ERR_TOO_LARGE;
        if (ops[i].kind > STORE_SYSTEM_DELETE || (types && types[i] > LOG_TYPE_MAX)) return HANU_ERR_INVALID;
    }
    pthread_mutex_lock(&s->mu);
    store_db *d = store_db_by_id(s, db);
    if (!d) { pthread_mutex_unlock(&s->mu); return HANU_ERR_NOT_FOUND; }
    /* A delete of a missing key is no error in itself (a batch may hold one); a
       caller that wants NOT_FOUND for it asks with STORE_COND_EXISTS. */
    if (cond != STORE_COND_NONE) {
        kd_entry *e = live_get(d, ops[0].key, ops[0].key_len, keydir_hash(ops[0].key, ops[0].key_len));
        int rc = HANU_OK;
        if (cond == STORE_COND_NOT_EXISTS && e) rc = HANU_ERR_EXISTS;
        else if (cond != STORE_COND_NOT_EXISTS && !e) rc = HANU_ERR_NOT_FOUND;
        else if (cond == STORE_COND_TOKEN && e->txn != cond_token) {
            if (current) *current = e->txn;
            rc = HANU_ERR_MISMATCH;
        }
        if (rc) { pthread_mutex_unlock(&s->mu); return rc; }
    }
    pthread_mutex_unlock(&s->mu);

    int rc = frame_begin(s);
    for (size_t i = 0; rc == HANU_OK && i < n; i++) {
        int del = ops[i].kind == STORE_DELETE || ops[i].kind == STORE_SYSTEM_DELETE;
        int sys = ops[i].kind == STORE_SYSTEM_SET || ops[i].kind == STORE_SYSTEM_DELETE;
        rc = frame_add(s, del ? LOG_OP_DELETE : LOG_OP_PUT,
                           sys ? STORE_SYSTEM_DB_ID : db, ops[i].key, (uint16_t)ops[i].key_len,
                           del ? NULL : ops[i].value, del ? 0 : (uint32_t)ops[i].value_len,
                           del || !expire_ms ? 0 : expire_ms[i], del || !types ? 0 : types[i]);
    }
    if (rc) return rc;
    return append_and_apply(s, 0, txn);
}

int store_replay(store *s, uint64_t txn, const store_change *entries, size_t n)
{
    if (n == 0 || txn == 0) return HANU_ERR_INVALID;
    if (n > LOG_MAX_ENTRIES_PER_FRAME) return HANU_ERR_TOO_LARGE;
    if (log_writer_failed(s->log)) return HANU_ERR_STOPPED;
    for (size_t i = 0; i < n; i++) {
        const store_change *c = &entries[i];
        if (c->txn != txn || c->op < LOG_OP_PUT || c->op > LOG_OP_MAX) return HANU_ERR_INVALID;
        if (c->value_len < log_op_trailer(c->op)) return HANU_ERR_INVALID;
        if (c->op == LOG_OP_PUT_TYPED &&
            (c->value[c->value_len - 1] == LOG_TYPE_STRING || c->value[c->value_len - 1] > LOG_TYPE_MAX))
            return HANU_ERR_INVALID;
        if (c->key_len == 0 || c->key_len > UINT16_MAX) return HANU_ERR_INVALID;
        if (c->key_len > s->opt.max_key && c->op != LOG_OP_CREATE_DB && c->op != LOG_OP_DROP_DB)
            return HANU_ERR_TOO_LARGE;
        size_t vlen = c->value_len - log_op_trailer(c->op);
        if (vlen > s->opt.max_value || c->value_len > UINT32_MAX) return HANU_ERR_TOO_LARGE;
    }
    pthread_mutex_lock(&s->mu);
    uint64_t held = s->last_txn;
    pthread_mutex_unlock(&s->mu);
    if (txn <= held) return HANU_ERR_EXISTS;
    int rc = frame_begin(s);
    for (size_t i = 0; rc == HANU_OK && i < n; i++) {
        const store_change *c = &entries[i];
        uint8_t op = c->op == LOG_OP_OLD_SYSTEM_PUT ? LOG_OP_PUT : c->op;
        if (op == LOG_OP_PUT_EXPIRING) {   /* kept as the writer wrote it: value, then expiry */
            uint32_t vlen = (uint32_t)c->value_len - LOG_EXPIRY_SIZE;
            uint64_t expire = hanu_get_u64(c->value + vlen);
            rc = frame_add(s, LOG_OP_PUT, c->db, c->key, (uint16_t)c->key_len, c->value, vlen, expire ? expire : 1, 0);
        } else if (op == LOG_OP_PUT_TYPED) {   /* value, expiry, type */
            uint32_t vlen = (uint32_t)c->value_len - LOG_TYPED_SIZE;
            rc = frame_add(s, LOG_OP_PUT, c->db, c->key, (uint16_t)c->key_len, c->value, vlen,
                           hanu_get_u64(c->value + vlen), c->value[c->value_len - 1]);
        } else {
            rc = frame_add(s, op, c->db, c->key, (uint16_t)c->key_len, c->value, (uint32_t)c->value_len, 0, 0);
        }
    }
    if (rc) return rc;
    uint64_t at;
    return append_and_apply(s, txn, &at);
}

int store_skip_txns(store *s, uint64_t next_txn)
{
    if (log_writer_failed(s->log)) return HANU_ERR_STOPPED;
    return log_writer_skip_to(s->log, next_txn);
}

static int scan(store *s, uint32_t db, store_scan_fn fn, store_scan_typed_fn typed_fn, void *ctx);

int store_scan(store *s, uint32_t db, store_scan_fn fn, void *ctx) { return scan(s, db, fn, NULL, ctx); }

int store_scan_typed(store *s, uint32_t db, store_scan_typed_fn fn, void *ctx) { return scan(s, db, NULL, fn, ctx); }

typedef struct scan_step {
    store_scan_typed_fn fn;
    void *ctx;
    uint64_t now;
} scan_step;

static void scan_step_entry(void *ctx, kd_entry *e)
{
    scan_step *st = ctx;
    if (!kd_entry_expired(e, st->now)) (void)st->fn(st->ctx, e->key, e->key_len, NULL, 0, kd_entry_type(e));
}

int store_scan_step(store *s, uint32_t db, uint64_t *cursor, size_t count, store_scan_typed_fn fn, void *ctx)
{
    pthread_mutex_lock(&s->mu);
    store_db *d = store_db_by_id(s, db);
    if (d) {
        scan_step st = { fn, ctx, d->expiring ? store_now_ms() : 0 };
        keydir_scan(&d->kd, cursor, count ? count : 1, scan_step_entry, &st);
    }
    pthread_mutex_unlock(&s->mu);
    return d ? HANU_OK : HANU_ERR_NOT_FOUND;
}

static int scan(store *s, uint32_t db, store_scan_fn fn, store_scan_typed_fn typed_fn, void *ctx)
{
    hanu_buf pending = {0};
    pthread_mutex_lock(&s->mu);
    store_db *d = store_db_by_id(s, db);
    int rc = d ? HANU_OK : HANU_ERR_NOT_FOUND;
    size_t pos = 0;
    kd_entry *e;
    uint64_t now = d && d->expiring ? store_now_ms() : 0;
    while (rc == HANU_OK && (e = keydir_next(&d->kd, &pos)) != NULL) {
        if (kd_entry_expired(e, now)) continue;
        const uint8_t *v;
        hanu_buf_reset(&pending);
        rc = entry_value(s, e, &pending, &v);
        if (rc == HANU_OK && (fn ? fn(ctx, e->key, e->key_len, v, e->value_len)
                                 : typed_fn(ctx, e->key, e->key_len, v, e->value_len, kd_entry_type(e))))
            break;
    }
    pthread_mutex_unlock(&s->mu);
    hanu_buf_free(&pending);
    return rc;
}

int store_db_create(store *s, const char *name, size_t len, uint8_t kind, uint64_t *txn)
{
    if (!store_db_name_valid(name, len) || (kind != STORE_DB_KV && kind != STORE_DB_COLLECTION))
        return HANU_ERR_INVALID;
    if (log_writer_failed(s->log)) return HANU_ERR_STOPPED;
    pthread_mutex_lock(&s->mu);
    int exists = db_by_name(s, name, len) != NULL;
    int full = s->ndbs >= STORE_MAX_DATABASES;
    uint32_t id = s->next_db_id;
    pthread_mutex_unlock(&s->mu);
    if (exists) return HANU_ERR_EXISTS;
    if (full) return HANU_ERR_TOO_LARGE;
    int rc = frame_begin(s);
    if (rc == HANU_OK) rc = frame_add(s, LOG_OP_CREATE_DB, id, name, (uint16_t)len, &kind, 1, 0, 0);
    if (rc == HANU_OK) rc = append_and_apply(s, 0, txn);
    return rc;
}

int store_db_drop(store *s, const char *name, size_t len, uint64_t *txn)
{
    if (!store_db_name_valid(name, len)) return HANU_ERR_INVALID;
    if (len == 7 && memcmp(name, "default", 7) == 0) return HANU_ERR_INVALID;
    if (log_writer_failed(s->log)) return HANU_ERR_STOPPED;
    pthread_mutex_lock(&s->mu);
    store_db *d = db_by_name(s, name, len);
    uint32_t id = d ? d->id : 0;
    pthread_mutex_unlock(&s->mu);
    if (!d) return HANU_ERR_NOT_FOUND;
    int rc = frame_begin(s);
    if (rc == HANU_OK) rc = frame_add(s, LOG_OP_DROP_DB, id, name, (uint16_t)len, NULL, 0, 0, 0);
    if (rc == HANU_OK) rc = append_and_apply(s, 0, txn);
    return rc;
}

/* ---- info ---- */

static void fill_info(store_db *d, store_db_info *info)
{
    snprintf(info->name, sizeof info->name, "%s", d->name);
    info->id = d->id;
    info->kind = d->kind;
    info->keys = d->kd.count;
    info->expiring = d->expiring;
    info->bytes = d->bytes;
    info->memory = keydir_memory(&d->kd);
    info->last_txn = d->last_txn;
}

int store_db_info_get(store *s, uint32_t id, store_db_info *info)
{
    pthread_mutex_lock(&s->mu);
    store_db *d = store_db_by_id(s, id);
    if (d) fill_info(d, info);
    pthread_mutex_unlock(&s->mu);
    return d ? HANU_OK : HANU_ERR_NOT_FOUND;
}

int store_db_kind(store *s, uint32_t id, uint8_t *kind)
{
    pthread_mutex_lock(&s->mu);
    store_db *d = store_db_by_id(s, id);
    if (d) *kind = d->kind;
    pthread_mutex_unlock(&s->mu);
    return d ? HANU_OK : HANU_ERR_NOT_FOUND;
}

size_t store_db_list(store *s, store_db_info *infos, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    size_t n = 0;
    for (size_t i = 0; i < s->ndbs; i++) {
        if (s->dbs[i]->name[0] == '_') continue;
        if (n < cap) fill_info(s->dbs[i], &infos[n]);
        n++;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

uint64_t store_durable_txn(store *s) { return log_writer_durable_txn(s->log); }
uint64_t store_last_txn(store *s) { return s->last_txn; }
uint64_t store_written_txn(store *s) { return log_writer_written_txn(s->log); }

uint64_t store_last_record_txn(store *s)
{
    uint64_t t = 0;
    pthread_mutex_lock(&s->mu);
    for (uint32_t id = 1; id < s->files_cap; id++)
        if (s->files[id] && s->files[id]->last_txn > t) t = s->files[id]->last_txn;
    pthread_mutex_unlock(&s->mu);
    return t;
}
int store_failed(store *s) { return log_writer_failed(s->log); }
int store_sync(store *s) { return log_writer_sync(s->log); }
void store_want_durable(store *s, uint64_t txn) { log_writer_want_durable(s->log, txn); }
int store_flush(store *s) { return log_writer_flush(s->log); }

int store_rotate(store *s)
{
    uint32_t sealed = 0;
    int rc = log_writer_rotate(s->log, &sealed);
    if (rc == HANU_OK) {
        /* The new file gets its table entry on its first write. */
        wake_compactor(s);
    }
    return rc;
}

int store_wait_log_complete(store *s) { return log_writer_wait_complete(s->log); }

uint32_t store_active_file(store *s)
{
    return log_writer_active_id(s->log);
}

void store_get_stats(store *s, store_stats *st)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&s->mu);
    st->databases = s->ndbs - 1;   /* not counting the system database */
    for (size_t i = 0; i < s->ndbs; i++) {
        st->keys += s->dbs[i]->kd.count;
        st->memory_bytes += keydir_memory(&s->dbs[i]->kd);
    }
    for (uint32_t i = 0; i < s->files_cap; i++) {
        store_file *f = s->files[i];
        if (!f) continue;
        st->files++;
        st->disk_bytes += f->used;
        st->dead_bytes += f->dead_bytes;
    }
    st->last_txn = s->last_txn;
    pthread_mutex_unlock(&s->mu);
    log_writer_stats ls;
    log_writer_get_stats(s->log, &ls);
    st->log_bytes_written = ls.bytes_written;
    st->prealloc_bytes = ls.prealloc_bytes;
    st->syncs = ls.syncs;
    st->sync_ns = ls.sync_ns;
    st->frames = ls.frames;
    st->rotations = ls.rotations;
    st->compactions = atomic_load(&s->compactions);
    st->compaction_bytes_written = atomic_load(&s->compaction_bytes);
    st->compaction_lock_max_us = atomic_load(&s->compaction_lock_max_us);
    st->durable_txn = log_writer_durable_txn(s->log);
    st->startup_ms = s->startup_ms;
}

/* ---- the expiry sweep (writer thread) ---- */

/* The expired keys of one database, copied out under the lock. */
typedef struct sweep_batch {
    hanu_buf keys;        /* the key bytes, one after another */
    store_op *ops;
    size_t n, cap;
} sweep_batch;

static int sweep_collect(sweep_batch *b, const kd_entry *e)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        store_op *o = realloc(b->ops, cap * sizeof *o);
        if (!o) return HANU_ERR_NOMEM;
        b->ops = o;
        b->cap = cap;
    }
    size_t at = b->keys.len;
    int rc = hanu_buf_append(&b->keys, e->key, e->key_len);
    if (rc) return rc;
    /* The key pointer is set once the buffer stops moving (store_expire_sweep). */
    b->ops[b->n++] = (store_op){ .kind = STORE_DELETE, .key = (const void *)(uintptr_t)at, .key_len = e->key_len };
    return HANU_OK;
}

uint64_t store_expiring_keys(store *s)
{
    uint64_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->ndbs; i++) n += s->dbs[i]->expiring;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int store_expire_sweep(store *s, uint64_t now_ms, size_t max_scan, size_t max_delete, size_t *deleted)
{
    *deleted = 0;
    sweep_batch b = {0};
    int rc = HANU_OK;
    uint32_t db = 0;
    size_t scanned = 0;
    pthread_mutex_lock(&s->mu);
    /* Resume where the last call stopped, else start the next database (by position,
       round the list) that holds keys with an expiry: one without any costs nothing. */
    store_db *d = NULL;
    size_t at = 0;
    for (size_t i = 0; i < s->ndbs; i++)
        if (s->dbs[i]->id == s->sweep_db) at = i;
    if (at < s->ndbs && s->dbs[at]->id == s->sweep_db && s->dbs[at]->expiring && s->sweep_pos < s->dbs[at]->kd.cap)
        d = s->dbs[at];
    for (size_t k = 1; !d && k <= s->ndbs; k++) {
        store_db *c = s->dbs[(at + k) % s->ndbs];
        if (c->expiring) { d = c; s->sweep_pos = 0; }
    }
    if (d) {
        db = d->id;
        size_t pos = s->sweep_pos;
        kd_entry *e = NULL;
        while (scanned < max_scan && b.n < max_delete && (e = keydir_next(&d->kd, &pos)) != NULL) {
            scanned++;
            if (kd_entry_expired(e, now_ms) && (rc = sweep_collect(&b, e)) != HANU_OK) break;
        }
        s->sweep_db = d->id;
        s->sweep_pos = pos;   /* at the table's end: the next call moves on */
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == HANU_OK && b.n) {
        for (size_t i = 0; i < b.n; i++) b.ops[i].key = b.keys.data + (uintptr_t)b.ops[i].key;
        uint64_t txn;
        s->sweep_writing = 1;
        rc = store_write(s, db, b.ops, b.n, STORE_COND_NONE, 0, &txn, NULL);
        s->sweep_writing = 0;
        if (rc == HANU_OK) *deleted = b.n;
    }
    free(b.ops);
    hanu_buf_free(&b.keys);
    return rc;
}
