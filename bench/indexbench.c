/*
 * indexbench: the indexer's CPU per document without a server (issue 13): the
 * documents of docbench (docgen.h, with an "_id" first as the store keeps
 * them) go through what the indexer does at each commit, one segment a batch:
 * index_add_document per document, index_builder_write (encode, write,
 * fdatasync), index_segment_open (the checks); then the segments are merged
 * INDEX_MERGE_FACTOR at a time, as the tiered policy does, until one is left.
 * Times are the thread's CPU time (fdatasync waits are not counted), per
 * document of the phase.
 *   indexbench [--docs N] [--batch N] [--dir PATH] [--seed N] [--keep PATH]
 *              [--merge stream|rebuild]
 * --keep: the final segment is moved there (to compare builds byte for byte).
 * --merge: the streaming merge (index_merge_write, the default) or the
 * builder's (index_merge_write_rebuild). A thread samples the process's
 * anonymous memory (RssAnon) every millisecond during each merge; the largest
 * rise over the merge's start is printed with the merge's input and output
 * sizes, and the largest dirty + writeback page cache of a merge's output
 * file (cachestat, Linux 6.5 or later; 0 where it is missing).
 */
#include "index/index.h"
#include "docgen.h"

#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A field (in kB) of a /proc file of "Name:   value kB" lines; 0 when absent. */
static uint64_t proc_kb(const char *file, const char *name)
{
    FILE *f = fopen(file, "r");
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10);
            break;
        }
    if (f) fclose(f);
    return v;
}

/* The page cache of one file (the cachestat system call, Linux 6.5). */
struct file_cache { uint64_t cache, dirty, writeback, evicted, recently_evicted; };
static int file_cache_of(int fd, struct file_cache *out)
{
    struct { uint64_t off, len; } range = { 0, 0 };   /* len 0: to the end */
    return (int)syscall(451 /* cachestat */, fd, &range, out, 0);
}

/* The sampler: while `sampling`, the largest RssAnon seen, and the largest
 * dirty + writeback page cache of the merge's output file (merge_out). */
static atomic_int sampling, stop_sampler;
static _Atomic uint64_t peak_anon_kb, peak_file_dirty;
static char merge_out[512];

static void *sampler(void *arg)
{
    (void)arg;
    int fd = -1;
    while (!atomic_load(&stop_sampler)) {
        if (atomic_load(&sampling)) {
            uint64_t a = proc_kb("/proc/self/status", "RssAnon");
            if (a > atomic_load(&peak_anon_kb)) atomic_store(&peak_anon_kb, a);
            if (fd < 0) fd = open(merge_out, O_RDONLY | O_CLOEXEC);
            struct file_cache fc;
            if (fd >= 0 && file_cache_of(fd, &fc) == 0 &&
                (fc.dirty + fc.writeback) * 4096 > atomic_load(&peak_file_dirty))
                atomic_store(&peak_file_dirty, (fc.dirty + fc.writeback) * 4096);
        } else if (fd >= 0) {
            close(fd);
            fd = -1;
        }
        usleep(1000);
    }
    if (fd >= 0) close(fd);
    return NULL;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "indexbench: %s: %s\n", what, hanu_status_str(rc));
    exit(1);
}

int main(int argc, char **argv)
{
    uint64_t docs = 100000, batch = 8000, seed = 1;
    const char *dir = "/var/tmp/hanudb-indexbench", *keep = NULL;
    int rebuild = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--docs") == 0) docs = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--batch") == 0) batch = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
        else if (strcmp(argv[i], "--keep") == 0) keep = argv[i + 1];
        else if (strcmp(argv[i], "--merge") == 0 && strcmp(argv[i + 1], "stream") == 0) rebuild = 0;
        else if (strcmp(argv[i], "--merge") == 0 && strcmp(argv[i + 1], "rebuild") == 0) rebuild = 1;
        else {
            fprintf(stderr, "usage: indexbench [--docs N] [--batch N] [--dir PATH] [--seed N] [--keep PATH]"
                            " [--merge stream|rebuild]\n");
            return 2;
        }
    }
    pthread_t sampler_thread;
    if (pthread_create(&sampler_thread, NULL, sampler, NULL) != 0) return 1;
    uint64_t worst_rise_kb = 0, worst_in = 0, worst_out = 0, worst_docs = 0;
    if (!docs || !batch) return 2;
    mkdir(dir, 0755);
    static struct docgen g;
    docgen_init(&g, seed);
    uint32_t nseg = (uint32_t)((docs + batch - 1) / batch);
    index_segment **segs = calloc(nseg, sizeof *segs);
    char (*paths)[512] = calloc(nseg * 2, sizeof *paths);
    if (!segs || !paths) return 1;
    double t_extract = 0, t_write = 0, t_open = 0, t_merge = 0;
    uint64_t bytes_in = 0;
    char doc[DOCGEN_DOC_MAX + 64], gen[DOCGEN_DOC_MAX], id[32];
    char err[256];
    for (uint32_t s = 0; s < nseg; s++) {
        index_builder *b = index_builder_new();
        if (!b) die("builder", HANU_ERR_NOMEM);
        double t0 = cpu_s();
        for (uint64_t i = s * batch; i < docs && i < (s + 1) * batch; i++) {
            size_t n = docgen_doc(&g, i, gen);
            int idn = snprintf(id, sizeof id, "d%08" PRIu64, i);
            size_t len = (size_t)snprintf(doc, sizeof doc, "{\"_id\":\"%s\",%.*s", id, (int)n - 1, gen + 1);
            bytes_in += len;
            int rc = index_add_document(b, id, (size_t)idn, i + 1, doc, len);
            if (rc) die("index_add_document", rc);
        }
        double t1 = cpu_s();
        snprintf(paths[s], sizeof paths[s], "%s/seg-%u.hix", dir, s);
        unlink(paths[s]);
        int rc = index_builder_write(b, paths[s]);
        if (rc) die("index_builder_write", rc);
        double t2 = cpu_s();
        if ((rc = index_segment_open(paths[s], &segs[s], err, sizeof err))) die(err, rc);
        double t3 = cpu_s();
        index_builder_free(b);
        t_extract += t1 - t0;
        t_write += t2 - t1;
        t_open += t3 - t2;
    }
    /* merges: INDEX_MERGE_FACTOR neighbours at a time, rounds until one segment */
    uint32_t live = nseg, next_name = nseg, merges = 0;
    uint64_t merged_docs = 0;
    while (live > 1) {
        uint32_t out = 0;
        for (uint32_t i = 0; i < live; i += INDEX_MERGE_FACTOR) {
            uint32_t k = live - i < INDEX_MERGE_FACTOR ? live - i : INDEX_MERGE_FACTOR;
            if (k == 1) {
                segs[out++] = segs[i];
                continue;
            }
            index_merge_input in[INDEX_MERGE_FACTOR];
            uint32_t *map[INDEX_MERGE_FACTOR];
            for (uint32_t j = 0; j < k; j++) {
                in[j] = (index_merge_input){ segs[i + j], NULL, 0 };
                map[j] = malloc((index_segment_docs(segs[i + j]) + 1) * sizeof **map);
                merged_docs += index_segment_docs(segs[i + j]);
            }
            char path[512];
            snprintf(path, sizeof path, "%s/seg-%u.hix", dir, next_name++);
            unlink(path);
            uint32_t got = 0;
            uint64_t in_bytes = 0, in_docs = 0;
            for (uint32_t j = 0; j < k; j++) {
                in_bytes += index_segment_bytes(segs[i + j]);
                in_docs += index_segment_docs(segs[i + j]);
            }
            malloc_trim(0);   /* what the builders freed goes back, so the rise is the merge's own */
            uint64_t anon_before = proc_kb("/proc/self/status", "RssAnon");
            atomic_store(&peak_anon_kb, anon_before);
            snprintf(merge_out, sizeof merge_out, "%s", path);
            atomic_store(&sampling, 1);
            double t0 = cpu_s();
            int rc = (rebuild ? index_merge_write_rebuild : index_merge_write)(in, k, path, map, &got);
            atomic_store(&sampling, 0);
            if (rc) die("index_merge_write", rc);
            uint64_t rise = atomic_load(&peak_anon_kb) - anon_before;
            struct stat mst;
            if (rise >= worst_rise_kb) {
                worst_rise_kb = rise;
                worst_in = in_bytes;
                worst_docs = in_docs;
                worst_out = stat(path, &mst) == 0 ? (uint64_t)mst.st_size : 0;
            }
            index_segment *m = NULL;
            if ((rc = index_segment_open(path, &m, err, sizeof err))) die(err, rc);
            t_merge += cpu_s() - t0;
            merges++;
            for (uint32_t j = 0; j < k; j++) {
                free(map[j]);
                index_segment_close(segs[i + j]);
            }
            segs[out++] = m;
        }
        live = out;
    }
    struct stat st;
    char last[512];
    snprintf(last, sizeof last, "%s/seg-%u.hix", dir, next_name - 1);
    off_t final_bytes = stat(last, &st) == 0 ? st.st_size : 0;
    printf("docs %" PRIu64 " (%.0f bytes each), %u segments of %" PRIu64 ", %u merges of %" PRIu64 " docs in all\n",
           docs, (double)bytes_in / (double)docs, nseg, batch, merges, merged_docs);
    printf("per document, CPU us: extract %.2f  write %.2f  open %.2f  (commit path %.2f)  merge %.2f per merged doc\n",
           t_extract * 1e6 / (double)docs, t_write * 1e6 / (double)docs, t_open * 1e6 / (double)docs,
           (t_extract + t_write + t_open) * 1e6 / (double)docs, merged_docs ? t_merge * 1e6 / (double)merged_docs : 0);
    printf("final segment %lld bytes\n", (long long)final_bytes);
    atomic_store(&stop_sampler, 1);
    pthread_join(sampler_thread, NULL);
    printf("merge (%s) memory: largest RssAnon rise %.1f MiB, in a merge of %" PRIu64 " docs, %.1f MiB in, %.1f MiB out;"
           " a merged file's dirty + writeback page cache at most %.1f MiB\n",
           rebuild ? "rebuild" : "stream", (double)worst_rise_kb / 1024, worst_docs, (double)worst_in / 1048576,
           (double)worst_out / 1048576, (double)atomic_load(&peak_file_dirty) / 1048576);
    index_segment_close(segs[0]);
    if (keep && rename(last, keep) != 0) perror(keep);
    for (uint32_t i = 0; i < next_name; i++) {
        snprintf(last, sizeof last, "%s/seg-%u.hix", dir, i);
        unlink(last);
    }
    rmdir(dir);
    free(segs);
    free(paths);
    return 0;
}
