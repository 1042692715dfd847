/*
 * index: the documents index, built from the log (docs/INDEX.md).
 *
 * This header is the module's contract. Its first part is the immutable
 * segment: a builder that collects the terms, postings and columns of a batch
 * of documents and writes them to one checksummed file, and a reader that maps
 * such a file, validates every offset once at open, and then answers term
 * lookups, postings iteration and column reads without further checks.
 *
 * Terms are byte strings built by index_key_*: a dotted path, a NUL, a type
 * byte, then the value. Keys sort by path, then type, then value; numbers are
 * encoded order-preserving so that a range of numbers at one path is a range
 * of keys.
 *
 * Threads: a builder belongs to one thread. A reader (index_segment) is
 * immutable after index_segment_open and may be shared by any number of
 * threads; a postings cursor belongs to one thread.
 */
#ifndef HANU_INDEX_H
#define HANU_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "codec/codec.h"
#include "json/json.h"

#define SORT_MAX_KEYS_INDEX 8         /* = SORT_MAX_KEYS (query.h) */
#define INDEX_CURSOR_ID_MAX 256      /* = DOCS_ID_MAX */
#define INDEX_CURSOR_BYTES_MAX 4096  /* string sort values of one cursor */
#define INDEX_CURSOR_TEXT_MAX 6144

/* ------------------------------------------------------------- term keys */

/* Type bytes of a term key (after "path\0"). */
enum index_key_type {
    INDEX_KEY_NULL = 1,
    INDEX_KEY_FALSE = 2,
    INDEX_KEY_TRUE = 3,
    INDEX_KEY_NUMBER = 4,   /* 8 bytes, order-preserving (index_number_bits) */
    INDEX_KEY_STRING = 5,   /* keyword: the string's bytes, at most INDEX_KEYWORD_MAX */
    INDEX_KEY_WORD = 6,     /* a token of the field's text */
    INDEX_KEY_ALL_WORD = 7, /* a token of the document's whole text (path "") */
};

#define INDEX_KEYWORD_MAX 64      /* longer strings are text only (ignore_above) */
#define INDEX_PATH_MAX 512        /* longer paths are not indexed */
#define INDEX_WORD_MAX 64         /* token bytes; the tokenizer cuts longer ones */
#define INDEX_KEY_MAX (INDEX_PATH_MAX + 2 + INDEX_KEYWORD_MAX + 8)

/* Order-preserving u64 of a double (-0.0 as 0.0): a < b iff bits(a) < bits(b). */
uint64_t index_number_bits(double v);
double index_number_from_bits(uint64_t bits);

/* Writes the key of (path, type, value) into out[INDEX_KEY_MAX]; returns its
 * length, or 0 when the path or value is too long or the path contains a NUL
 * (such a leaf is not indexed). value is ignored for NULL/FALSE/TRUE;
 * for NUMBER pass num. */
size_t index_key(uint8_t *out, const char *path, size_t path_len, enum index_key_type type,
                 const char *value, size_t value_len, double num);

/* ---------------------------------------------------------- the builder */

typedef struct index_builder index_builder;

index_builder *index_builder_new(void);
void index_builder_free(index_builder *b);

/* Starts the next document (ordinals are given in order from 0); its id and
 * the txn of the version indexed. HANU_ERR_TOO_LARGE past INDEX_SEGMENT_MAX_DOCS. */
#define INDEX_SEGMENT_MAX_DOCS (1u << 24)
int index_builder_doc(index_builder *b, const char *id, size_t id_len, uint64_t txn);

/* Adds one occurrence of a term to the current document (repeats add to its
 * term frequency). key from index_key. */
int index_builder_term(index_builder *b, const uint8_t *key, size_t key_len);

/* Text, the fast way: a text field named once per string by its key prefix
 * (index_key(path, INDEX_KEY_WORD, "")), then each token of the string: one
 * occurrence of the field's term and of the whole text's (field UINT32_MAX: the
 * whole text's only). The same terms as index_builder_term with the two keys. */
int index_builder_text_field(index_builder *b, const uint8_t *prefix, size_t prefix_len, uint32_t *field);
int index_builder_word(index_builder *b, uint32_t field, const char *tok, size_t len);

/* A buffer of at least len bytes that the builder keeps until the next call or
 * index_builder_free (index_add_document's JSON scratch): documents after the
 * largest one allocate nothing. NULL when out of memory. */
void *index_builder_scratch(index_builder *b, size_t len);

/* Column values of the current document at path: a scalar outside arrays
 * (arrays make the path multi-valued for this document: index_builder_multi).
 * Strings longer than INDEX_KEYWORD_MAX are not column values. */
int index_builder_number(index_builder *b, const char *path, size_t path_len, double v);
int index_builder_string(index_builder *b, const char *path, size_t path_len,
                         const char *s, size_t len);
int index_builder_bool(index_builder *b, const char *path, size_t path_len, int v);
int index_builder_null(index_builder *b, const char *path, size_t path_len);
int index_builder_multi(index_builder *b, const char *path, size_t path_len);
/* Adds tokens to the current document's text length at path ("" = whole
 * text), the length BM25 normalises by (several strings at one path add up). */
int index_builder_text_length(index_builder *b, const char *path, size_t path_len, uint32_t tokens);

/* Starts the next document and adds everything the index records of it
 * (extract.c): a keyword term for every scalar leaf, the tokens of every string
 * as terms of its field and of the whole text, columns and text lengths.
 * doc must be a valid JSON document (as stored in a collection); on an error
 * the builder holds part of the document and must be discarded. */
int index_add_document(index_builder *b, const char *id, size_t id_len, uint64_t txn,
                       const char *doc, size_t len);

/* Writes the segment to path (created exclusively, fsynced; the caller fsyncs
 * the folder). Empty builders write a valid empty segment. */
int index_builder_write(index_builder *b, const char *path);
/* The same without the fdatasync when sync is 0 (a refresh's segment, made
 * durable by the commit that first names it). */
int index_builder_write_ex(index_builder *b, const char *path, int sync);

/* ----------------------------------------------------------- the reader */

typedef struct index_segment index_segment;

/* Maps and validates the file: magic, version, the checksum of every byte,
 * every section inside the file, term keys sorted, postings inside their
 * section. HANU_ERR_CORRUPT names nothing; err (may be NULL) gets a message. */
int index_segment_open(const char *path, index_segment **out, char *err, size_t errcap);
void index_segment_close(index_segment *seg);

uint32_t index_segment_docs(const index_segment *seg);
uint64_t index_segment_bytes(const index_segment *seg);
/* Id and txn of the document at ord (< docs). */
const char *index_segment_doc_id(const index_segment *seg, uint32_t ord, size_t *len);
uint64_t index_segment_doc_txn(const index_segment *seg, uint32_t ord);
/* The order of two documents' ids (bytewise, then shorter first): -1, 0 or 1.
 * Reads no id where the segments tell (ids that follow the ordinals within
 * one segment, id ranges that do not overlap across two). */
int index_doc_id_cmp(const index_segment *a, uint32_t oa, const index_segment *b, uint32_t ob);
/* What index_doc_id_cmp knows without ids: whether the segment's ids follow
 * its ordinals, and -1 (every id of a below every id of b), 1 (above) or 0
 * (the ranges overlap, or a is b) for two segments. For callers that compare
 * many pairs of the same segments. */
int index_segment_ids_ascending(const index_segment *s);
int index_segment_id_ranges_cmp(const index_segment *a, const index_segment *b);

/* Terms: count, the i-th key in order, the first index whose key is >= key. */
uint32_t index_segment_terms(const index_segment *seg);
const uint8_t *index_segment_term(const index_segment *seg, uint32_t i, size_t *len, uint32_t *df);
uint32_t index_segment_term_lower_bound(const index_segment *seg, const uint8_t *key, size_t len);
/* Index of the exact key, or UINT32_MAX. */
uint32_t index_segment_term_find(const index_segment *seg, const uint8_t *key, size_t len);

/* Postings of term i in blocks of INDEX_BLOCK docs; each block knows its last
 * ordinal, its largest term frequency and its shortest field length (the two
 * numbers a block-max WAND bound needs). */
#define INDEX_BLOCK 128
#define INDEX_ORD_END UINT32_MAX
typedef struct index_postings {
    const index_segment *seg;
    const uint8_t *blocks;      /* block table of the term */
    uint32_t nblocks, block;    /* current block */
    uint32_t n, pos;            /* docs in the current block, position */
    uint32_t ords[INDEX_BLOCK];
    uint32_t tfs[INDEX_BLOCK];
    uint32_t doc;               /* current ordinal, INDEX_ORD_END when done */
    uint32_t tf;
} index_postings;

void index_postings_open(index_postings *p, const index_segment *seg, uint32_t term);
/* Moves to the first ordinal >= target (target > doc); returns the new doc. */
uint32_t index_postings_advance(index_postings *p, uint32_t target);
static inline uint32_t index_postings_next(index_postings *p)
{
    return index_postings_advance(p, p->doc == INDEX_ORD_END ? INDEX_ORD_END : p->doc + 1);
}
/* Decodes block b (< nblocks) and stands on its first ordinal: a caller that
 * walks the blocks itself (ords, tfs and n of the block). */
void index_postings_load(index_postings *p, uint32_t b);
/* Of the current block (valid while doc != INDEX_ORD_END). */
uint32_t index_postings_block_last(const index_postings *p);
uint32_t index_postings_block_max_tf(const index_postings *p);
uint32_t index_postings_block_min_length(const index_postings *p);

/* Block impacts (segment version 2; docs/INDEX.md, "Block impacts"). A block
 * of a whole-text word's postings records q = the largest over its documents
 * of index_block_impact(tf, length, a0), a0 = the segment's whole-text length
 * total / its documents (index_segment_impact_avgdl): a bound of every BM25
 * score in the block, tighter than (largest tf, shortest length) because the
 * two come from one document. With the collection's average length avgdl,
 * score(tf, len) <= idf * (k1 + 1) * q / INDEX_IMPACT_ONE / min(1, a0 / avgdl). */
#define INDEX_IMPACT_ONE 65535.0
uint32_t index_block_impact(uint32_t tf, uint32_t len, double a0);   /* 1..65535, above the true ratio */
/* a0 of seg, or 0 when its blocks carry no impacts (version 1, no text). */
double index_segment_impact_avgdl(const index_segment *seg);
/* The impact of block b of p (0: none). */
uint32_t index_postings_block_impact(const index_postings *p, uint32_t b);

/* Columns. A column is found by path; values are read per ordinal. */
enum index_col_tag {
    INDEX_COL_MISSING = 0,
    INDEX_COL_NULL = 1,
    INDEX_COL_FALSE = 2,
    INDEX_COL_TRUE = 3,
    INDEX_COL_NUMBER = 4,
    INDEX_COL_STRING = 5,   /* value: ordinal into the column's sorted dictionary */
    INDEX_COL_MULTI = 6,    /* the path holds an array (or several values) here */
};

typedef struct index_column index_column;   /* points into the mapping */

const index_column *index_segment_column(const index_segment *seg, const char *path, size_t len);
/* Every column in path order: count, the i-th, and its path bytes. */
uint32_t index_segment_column_count(const index_segment *seg);
const index_column *index_segment_column_at(const index_segment *seg, uint32_t i);
const char *index_column_path(const index_column *c, size_t *len);
enum index_col_tag index_column_tag(const index_column *c, uint32_t ord);
double index_column_number(const index_column *c, uint32_t ord);       /* tag NUMBER */
/* A cache hint: the tag, number and string ordinal of ord are read soon. */
void index_column_prefetch(const index_column *c, uint32_t ord);
uint32_t index_column_string_ord(const index_column *c, uint32_t ord); /* tag STRING */
/* Whether the column holds the string of dictionary ordinal sord, for each of
 * ords[0..n) into out: 1 (its one value is that string), 0 (it is not), -1
 * (several values: an array, the stored document decides). sord UINT32_MAX:
 * the column has no such string. A block of postings at a time. */
void index_column_string_is(const index_column *c, const uint32_t *ords, uint32_t n, uint32_t sord, int8_t *out);
uint32_t index_column_dict_size(const index_column *c);
const char *index_column_dict(const index_column *c, uint32_t i, size_t *len);
/* The dictionary ordinal of string s, UINT32_MAX when the column has no such value. */
uint32_t index_column_dict_find(const index_column *c, const char *s, size_t len);
/* Token count of the field's text (0 when none); path "" = the whole text. */
uint32_t index_column_text_length(const index_column *c, uint32_t ord);
uint64_t index_column_text_total(const index_column *c);   /* sum over docs */
/* What a sort on the column may skip (known at open): INDEX_COL_ALL_NUMBERS
 * when every document's value is a number below INDEX_EXACT_LIMIT in
 * magnitude (then *min and *max are set), with INDEX_COL_NONDECREASING and/or
 * INDEX_COL_NONINCREASING when the values never fall / never rise from one
 * ordinal to the next (a column that grows with insertion, like a timestamp). */
#define INDEX_EXACT_LIMIT 9007199254740992.0   /* 2^53: doubles hold every integer below it */
#define INDEX_COL_ALL_NUMBERS 1u
#define INDEX_COL_NONDECREASING 2u
#define INDEX_COL_NONINCREASING 4u
unsigned index_column_number_order(const index_column *c, double *min, double *max);
/* Of such a column: the least and largest value of each block of
 * INDEX_COL_BLOCK ordinals, and the block numbers by largest value descending
 * and by least value ascending (ties by block). NULL for other columns. */
#define INDEX_COL_BLOCK 128
typedef struct index_column_blocks {
    uint32_t n;
    const double *min, *max;
    const uint32_t *by_max_desc, *by_min_asc;
} index_column_blocks;
const index_column_blocks *index_column_number_blocks(const index_column *c);

/* For merges (merge.c): a posting of an earlier document, ord below the
 * document count and above the term's last ordinal. */
int index_builder_posting(index_builder *b, const uint8_t *key, size_t key_len, uint32_t ord, uint32_t tf);

/* ------------------------------------- merges (merge.c, segment_write.c) */

/* Writes one segment holding the live documents of the inputs, in input
 * order then ordinal order, to path (O_EXCL, fdatasync; the caller fsyncs the
 * folder). It is the segment a builder fed those documents would write: the
 * same terms, frequencies, columns and text lengths, the same ids and txns.
 * map[i][ord] gets the new ordinal of input i's ordinal ord, or
 * INDEX_ORD_END when it was deleted (each map[i] holds docs(i) entries). */
typedef struct index_merge_input {
    const index_segment *seg;
    const uint32_t *deleted;    /* sorted */
    uint32_t ndeleted;
} index_merge_input;
/* Streams: terms merged k-way from the inputs' term tables, postings decoded
 * and encoded block by block, columns a chunk at a time, the file written
 * through bounded buffers; memory is a constant plus what docs/INDEX.md
 * ("Merges", memory) lists per document, not the size of the segment. */
int index_merge_write(const index_merge_input *in, uint32_t n, const char *path, uint32_t **map,
                      uint32_t *docs_out);
/* The same file by feeding the live documents to a builder (all of it in
 * memory): the reference the streaming merge is tested and measured against. */
int index_merge_write_rebuild(const index_merge_input *in, uint32_t n, const char *path, uint32_t **map,
                              uint32_t *docs_out);
/* index_merge_write without the fdatasync when sync is 0 (refresh segments merged). */
int index_merge_write_ex(const index_merge_input *in, uint32_t n, const char *path, uint32_t **map,
                         uint32_t *docs_out, int sync);

/* The merge policy: which segments of one collection to merge next.
 * DEFAULT is tiered (log-structured): segments fall in tiers by live size
 * (each tier INDEX_MERGE_FACTOR times the one below, the lowest holding
 * everything under INDEX_MERGE_FLOOR_BYTES); a tier with INDEX_MERGE_FACTOR
 * segments or more merges its smallest ones, at most INDEX_MERGE_MAX_AT_ONCE,
 * while the sum stays under max_bytes; a segment with more than half its
 * documents deleted is rewritten alone. LAZY merges only when the collection
 * has more than INDEX_MERGE_LAZY_SEGMENTS segments, the smallest ones first.
 * NONE never merges. */
enum index_merge_policy { INDEX_MERGE_DEFAULT = 0, INDEX_MERGE_LAZY = 1, INDEX_MERGE_NONE = 2 };
#define INDEX_MERGE_FACTOR 4
#define INDEX_MERGE_MAX_AT_ONCE 10
#define INDEX_MERGE_FLOOR_BYTES (1u << 20)
#define INDEX_MERGE_LAZY_SEGMENTS 32
typedef struct index_merge_candidate {
    uint64_t bytes;             /* of the file */
    uint32_t docs, deleted;
} index_merge_candidate;
/* Fills pick (room for n) with indexes into segs in increasing order; returns
 * how many (0: no merge now; never 1 unless that segment is mostly deleted). */
uint32_t index_merge_pick(enum index_merge_policy policy, const index_merge_candidate *segs, uint32_t n,
                          uint64_t max_bytes, uint32_t *pick);
int index_merge_policy_parse(const char *name, enum index_merge_policy *out);

/* ------------------------------------------------ deletions and commits */

/* Deleted ordinals of one segment, one generation: a sorted list of ordinals
 * (gaps packed with src/codec) in its own checksummed file, written once
 * (O_EXCL, fdatasync) and replaced by the next generation, never changed. */
int index_deletes_write(const char *path, uint64_t segment, uint32_t generation,
                        const uint32_t *ords, uint32_t n);
/* Reads the list back (*ords malloc'd, sorted, each < max_ord); refuses a file
 * of another segment or generation, unsorted or out-of-range ordinals, or a
 * bad checksum, with HANU_ERR_CORRUPT and a message. */
int index_deletes_read(const char *path, uint64_t segment, uint32_t generation, uint32_t max_ord,
                       uint32_t **ords, uint32_t *n, char *err, size_t errcap);

/* The commit: which segments make up the index and the txn it covers. The
 * file DIR/COMMIT is replaced atomically (write COMMIT.tmp, fdatasync, rename,
 * fsync DIR), so after a crash it is the old commit or the new one. */
typedef struct index_commit_segment {
    uint64_t segment;           /* file id: seg-<id>.hix */
    uint32_t db;                /* the collection's database id */
    uint32_t docs;              /* documents in the segment */
    uint32_t deleted;           /* ordinals in its deletion list */
    uint32_t del_generation;    /* 0: no deletion file */
} index_commit_segment;

/* Segments are listed in increasing id order; the reader refuses anything else. */
typedef struct index_commit {
    uint64_t index_txn;         /* every record up to here is in the segments */
    uint64_t next_file;         /* file ids below this were handed out */
    uint32_t nsegments;
    index_commit_segment *segments;
} index_commit;

#define INDEX_COMMIT_MAX_SEGMENTS (1u << 20)
int index_commit_write(const char *dir, const index_commit *c);
/* HANU_ERR_NOT_FOUND when DIR has no commit (a fresh index). */
int index_commit_read(const char *dir, index_commit *out, char *err, size_t errcap);
void index_commit_free(index_commit *c);
/* The file names a commit's segment stands for in DIR: its segment file, and its
   deletion list (0 when it has none; 1 when written). */
void index_commit_segment_file(const index_commit_segment *s, char *out, size_t cap);
int index_commit_deletes_file(const index_commit_segment *s, char *out, size_t cap);

/* ------------------------------------------------------------ the indexer */

/*
 * The indexer (indexer.c): one thread follows the store's change feed from
 * the registered watermark "index" and keeps DIR (DATA/index) a projection of
 * every collection (untyped databases count as collections; key-value
 * databases are skipped). Every commit_interval_ms, or at once when someone
 * waits in indexer_wait_txn, it writes one segment per changed collection, new
 * deletion-list generations, then COMMIT; only then it advances the watermark
 * and publishes the new snapshots. A failed write stops the indexer (reported
 * by indexer_get_stats and in its log line); a restart resumes from COMMIT.
 *
 * Threads: indexer_open/indexer_close by one thread; everything else from any.
 */
typedef struct store store;
typedef struct indexer indexer;   /* not "index": strings.h has index() */

typedef struct indexer_options {
    const char *dir;                /* DATA/index, created when missing */
    uint32_t commit_interval_ms;    /* default 500 */
    int quiet;                      /* no log lines on stderr */
    int merge_policy;               /* enum index_merge_policy, default INDEX_MERGE_DEFAULT */
    uint64_t max_segment_bytes;     /* merges make no segment larger (default 256 MiB) */
    uint64_t doc_cache_bytes;       /* the hot-document cache (default 64 MiB; 0: none) */
    uint32_t merge_delay_ms;        /* tests: a merge waits this long before it is installed */
    int nice;                       /* the indexer thread's nice value, 0..19 (default 0) */
    /* Called on the indexer thread after each publish (a refresh or a commit) with
       the txn the snapshots now cover: a server wakes the readers held for it. */
    void (*on_publish)(void *ctx, uint64_t txn);
    void *publish_ctx;
    /* Pending document bytes past which the indexer writes them out as a segment at
       once (unsynced, published by the next refresh or commit) instead of holding
       them until then: what bounds its memory while it is behind (default 8 MiB). */
    uint64_t pending_cut_bytes;
} indexer_options;

void indexer_options_default(indexer_options *o);
/* Reads COMMIT, opens and validates every segment and deletion list it names,
 * deletes files it does not name, and starts the thread. An index that fails
 * validation is removed and rebuilt from txn 0 (logged; *rebuilt in stats). */
int indexer_open(store *st, const indexer_options *o, indexer **out, char *err, size_t errcap);
/* Stops the thread (what was not committed is indexed again after a restart)
 * and frees everything; snapshots still acquired must be released first. */
void indexer_close(indexer *ix);

/* A collection as of one commit: immutable, reference counted. Deleted
 * ordinals are sorted; a document is live when its ordinal is not in them. */
typedef struct index_snapshot_segment {
    const index_segment *seg;
    uint64_t id;                    /* seg-<id>.hix */
    const uint32_t *deleted;
    uint32_t ndeleted;
} index_snapshot_segment;

typedef struct index_snapshot {
    uint32_t db;
    uint64_t index_txn;             /* the commit it belongs to */
    uint64_t live_docs;
    uint32_t nsegments;
    index_snapshot_segment *segments;   /* increasing id */
} index_snapshot;

/* The newest published snapshot of collection db, or NULL when it has no
 * documents indexed (or is not a collection). Release what you acquire. */
index_snapshot *index_snapshot_acquire(indexer *ix, uint32_t db);
/* A cache hint: key is about to be looked up in every segment of snap. Brings
 * in the segments' lookup hints and what they name in three rounds over the
 * segments, so that their cache misses overlap instead of coming one after
 * another (about three a segment for a key looked up before). */
void index_snapshot_term_prefetch(const index_snapshot *snap, const uint8_t *key, size_t len);
void index_snapshot_release(index_snapshot *snap);
/* 1 when ordinal ord of the snapshot's segment i is live. */
int index_snapshot_live(const index_snapshot *snap, uint32_t i, uint32_t ord);

typedef struct indexer_stats {
    uint64_t index_txn;             /* committed: every record up to it is indexed */
    uint64_t lag_txns;              /* store last txn - index_txn */
    uint64_t segments, bytes, live_docs, commits;
    int rebuilt;                    /* the open found a damaged index and rebuilt it */
    int failed;                     /* a write failed: the indexer stopped */
    /* merges (docs/INDEX.md, "Merges") */
    uint64_t merges;                /* installed */
    uint64_t merges_abandoned;      /* failed, or its collection was dropped while it ran */
    uint64_t merge_bytes;           /* written by merges */
    uint64_t merge_docs;            /* documents written by merges */
    uint64_t merge_ms;              /* time spent merging */
    int merging;                    /* a merge is running now */
    int rebuilding;                 /* a rebuild has not yet reached the txn it started at */
    uint64_t rebuild_target_txn;    /* the store's last txn when the rebuild began */
    char failure[256];              /* when failed: why, as logged ("" otherwise) */
    uint64_t visible_txn;           /* published: queries see every record up to it */
    uint64_t refreshes;             /* publishes without a commit (indexer_refresh_upto) */
    uint64_t cuts;                  /* segments written because pending_cut_bytes was passed */
    uint64_t pending_bytes_peak;    /* the most pending document bytes held at once */
    int committing;                 /* a commit's durable half (its files, COMMIT, the files it
                                       retires) is queued or running */
} indexer_stats;
void indexer_get_stats(indexer *ix, indexer_stats *st);
/* Segments, live documents and bytes of collection db (0s when none). */
void indexer_collection_stats(indexer *ix, uint32_t db, uint32_t *segments, uint64_t *live_docs,
                            uint64_t *bytes);
uint64_t indexer_txn(indexer *ix);
/* 1 once a failed write has stopped the indexer (until a restart). */
int indexer_failed(indexer *ix);

/* Waits until index_txn >= txn, asking for a commit at once rather than at
 * the next interval: OK, HANU_ERR_BUSY after timeout_ms, HANU_ERR_STOPPED when
 * the indexer has failed. */
int indexer_wait_txn(indexer *ix, uint64_t txn, uint32_t timeout_ms);
/* Asks for a commit as soon as there is anything new (no waiting). */
void indexer_commit_now(indexer *ix);
/* Near-real-time reads: asks the thread to publish snapshots covering txn as
 * soon as its feed has read that far, without waiting for a commit (the files
 * of such a refresh are made durable by the next commit). No waiting here;
 * indexer_visible_txn says when it happened and on_publish is called. */
void indexer_refresh_upto(indexer *ix, uint64_t txn);
/* Every record up to it is in the published snapshots (>= indexer_txn): one
 * atomic load. */
uint64_t indexer_visible_txn(indexer *ix);

/* ------------------------------------------- the document cache (doc_cache.c) */

/* Copies of stored documents keyed by (db, _id), bounded in bytes (LRU). A
 * copy is served only while its txn is the key's current version in the store
 * (store_lookup), so a get answers exactly what store_get would at that
 * moment: never a version older than one the reader has seen. Any thread. */
typedef struct doc_cache doc_cache;
typedef struct doc_cache_stats {
    uint64_t hits, misses, evictions, invalidations;
    uint64_t bytes, entries, budget;
} doc_cache_stats;
doc_cache *doc_cache_new(uint64_t max_bytes);
void doc_cache_free(doc_cache *c);
/* Appends the current version of (db, id) to out and its txn to *txn: OK or
 * NOT_FOUND (as store_get). c may be NULL (no cache). */
int doc_cache_get(doc_cache *c, store *st, uint32_t db, const char *id, size_t len, hanu_buf *out,
                  uint64_t *txn);
/* Drops the copy of (db, id) (a put or delete changed it). */
void doc_cache_invalidate(doc_cache *c, uint32_t db, const char *id, size_t len);
void doc_cache_get_stats(doc_cache *c, doc_cache_stats *st);

/* The indexer's cache (invalidated from its feed): what query executors read
 * documents through instead of store_get, same contract as doc_cache_get. */
int index_doc_get(indexer *ix, uint32_t db, const char *id, size_t len, hanu_buf *out, uint64_t *txn);
void indexer_doc_cache_stats(indexer *ix, doc_cache_stats *st);

/* ------------------------------------------------------------ find (find.c) */

/* The documents of a snapshot that match filter f: the index gives
 * candidates (equality and $in on keyword terms, numeric ranges as key
 * ranges, AND/OR as merges) and filter_match on the stored bytes (store_get)
 * decides, so the answer always equals filter_match over the collection's
 * documents. Ordered by sort (NULL or no keys: by _id, byte order; ties by
 * _id), then offset hits skipped and at most limit kept (0: no limit);
 * out->total counts every match. HANU_ERR_INVALID with err filled when sort
 * meets an array path (sort_keys_of). Each hit keeps the stored bytes and
 * their txn (the store's token). */
typedef struct filter filter;
typedef struct sort_spec sort_spec;
typedef struct query_error query_error;
typedef struct index_hit {
    char *id;                       /* NUL-terminated copy: one allocation with doc, or in the hits' block */
    size_t id_len;
    uint64_t txn;
    char *doc;                      /* the stored bytes, byte-identical (right after id's NUL) */
    size_t doc_len;
} index_hit;
typedef struct index_hits {
    index_hit *hits;
    size_t n, cap;
    char *block;                    /* set by index_hits_take: every hit's id and doc live in it */
    size_t total;                   /* matches before offset and limit */
    size_t checked;                 /* candidates read from the store and checked */
    size_t sorted;                  /* matches whose sort values were read (find: the rest were skipped) */
} index_hits;
int index_find(store *st, const index_snapshot *snap, const filter *f, const sort_spec *sort,
               size_t offset, size_t limit, index_hits *out, query_error *err);
void index_hits_free(index_hits *h);
/* Sets a hit of an index_hits to copies of id and doc (one allocation). */
int index_hit_fill(index_hit *hit, const char *id, size_t id_len, uint64_t txn, const void *doc, size_t doc_len);
typedef struct store_get_item store_get_item;   /* store.h */
/* Makes the items that store_get_many found (in vals) out's hits, in order; items not found are
 * left out. The documents stay where they are: vals becomes out's block (vals is left empty) and
 * the ids are copied after them. out has no hits yet. */
int index_hits_take(index_hits *out, const store_get_item *items, size_t n, hanu_buf *vals);

/* ------------------------------------------------- search (search_topk.c) */

/* The best documents of a snapshot for a search query (docs/QUERY.md,
 * "Search execution"): BM25 over the collection's live documents (N, average
 * length and document frequencies summed over the snapshot's segments minus
 * their deleted documents), exactly as search_eval scores them, top-k by
 * block-max WAND over the text postings (fields: the per-field postings of
 * every path at or below them). Phrases, and filters the columns cannot
 * decide, are checked on the stored document (store_get), only for documents
 * whose score bound can still enter the top k. Hits are ordered by score
 * descending, ties by _id (byte order); with after, only hits strictly after
 * that (score, _id) position count; then offset of them are skipped and at
 * most limit kept. A hit's doc is the stored bytes now; a document deleted
 * after the snapshot is left out. Any thread, while snap stays acquired; q, f
 * and fields are only read.
 *
 * Counting (Elasticsearch's track_total_hits): matches are counted exactly
 * up to count_upto of them; past that hits.total is count_upto with
 * total_gte set (a lower bound). One word with no filter or one the columns
 * decide is counted from its postings and the columns, apart from the
 * ranking, which prunes from its start; any other query counts without
 * pruning until the match past count_upto, then prunes. count_upto 0 prunes from the start;
 * INDEX_SEARCH_COUNT_ALL never stops counting. The count ignores after,
 * offset and limit. INDEX_SEARCH_EXHAUSTIVE scores every match without
 * pruning (the tests' reference for the pruned top k). */
typedef struct search_query search_query;
typedef struct index_cursor index_cursor;
#define INDEX_SEARCH_COUNT 1u           /* index_search only: count_upto = INDEX_SEARCH_COUNT_ALL */
#define INDEX_SEARCH_EXHAUSTIVE 2u
#define INDEX_SEARCH_COUNT_ALL UINT64_MAX
typedef struct index_search_opts {
    size_t offset, limit;
    unsigned flags;                 /* INDEX_SEARCH_EXHAUSTIVE */
    uint64_t count_upto;            /* see above */
    const index_cursor *after;      /* NULL, or a search cursor (index_search_cursor_decode) */
    uint64_t index_txn;             /* written into next */
} index_search_opts;
typedef struct index_search_result {
    index_hits hits;            /* the page, best first; hits.total: the count */
    double *scores;             /* scores[i] of hits.hits[i] */
    int total_gte;              /* hits.total is a lower bound (counting stopped) */
    index_cursor *next;         /* the last position of the page when more hits follow it, else NULL */
    uint64_t scored;            /* documents whose score (or bound) was computed */
    uint64_t verified;          /* documents read from the store to check phrases or the filter */
    uint64_t skipped_blocks;    /* block-max skips */
} index_search_result;
int index_search_ex(store *st, const index_snapshot *snap, const search_query *q, const filter *f,
                    const char *const *fields, size_t nfields, const index_search_opts *o,
                    index_search_result *out);
/* The same with count_upto 0 (flags 0), INDEX_SEARCH_COUNT_ALL (INDEX_SEARCH_COUNT), no cursor. */
int index_search(store *st, const index_snapshot *snap, const search_query *q, const filter *f,
                 const char *const *fields, size_t nfields, size_t offset, size_t limit, unsigned flags,
                 index_search_result *out);
void index_search_result_free(index_search_result *r);
/* ------------------------------------- find over columns (find.c, find_cursor.c) */

/*
 * index_find_ex answers on the index wherever it is exact (docs/QUERY.md,
 * "How _find runs"): every filter node gives per segment a CRoaring bitmap of
 * the documents it surely matches and one of those it may match; only the
 * difference is read from the store and checked with filter_match. Sorting
 * reads the columns and keeps the best offset+limit in a heap; documents are
 * read only for the hits returned (and where a column cannot tell a sort
 * value: missing, multi or an integer beyond 2^53). count_only reads nothing
 * where the filter is exact.
 *
 * A cursor is the position of a hit: its sort values and _id, so that the
 * next page starts strictly after it whatever was written in between.
 */
typedef struct index_cursor_key {
    json_type type;                 /* JSON_NULL (also missing), NUMBER, STRING, BOOL */
    int is_int, boolean;
    int64_t i;
    double d;
    uint32_t str_off, str_len;      /* STRING: bytes[str_off ..] */
} index_cursor_key;

typedef struct index_cursor {
    uint64_t txn_bound;             /* index_txn of the page that made it */
    uint64_t sort_hash;             /* the sort spec it belongs to */
    uint32_t nkeys;
    index_cursor_key keys[SORT_MAX_KEYS_INDEX];
    char id[INDEX_CURSOR_ID_MAX + 1];
    size_t id_len;
    uint32_t used;                  /* bytes of string keys */
    char bytes[INDEX_CURSOR_BYTES_MAX];
} index_cursor;

typedef struct index_find_opts {
    const sort_spec *sort;          /* NULL or no keys: by _id */
    size_t offset, limit;           /* limit 0: no limit */
    int count_only;                 /* only total: no hits */
    const index_cursor *after;      /* NULL, or hits strictly after this position */
    uint64_t index_txn;             /* written into next */
} index_find_opts;

/* out->total counts every match of the filter (the cursor does not narrow
 * it); *next (may be NULL) is set to the last hit's position when more hits
 * follow it, and next_valid says so. */
/* About how many postings a query reads in snap, to choose where it runs: the
 * documents of a find's equality and $in terms, of a search's words (plus its
 * filter's unless that is equalities tested on the candidates' columns).
 * UINT64_MAX when the filter holds anything whose cost the term table does
 * not tell (a range, $ne, $exists, $or, $not, an equality with null or an
 * array). Term lookups only: a few microseconds. */
uint64_t index_find_estimate(const index_snapshot *snap, const filter *f);
uint64_t index_search_estimate(const index_snapshot *snap, const search_query *q, const filter *f);
int index_find_ex(store *st, const index_snapshot *snap, const filter *f, const index_find_opts *o,
                  index_hits *out, index_cursor *next, int *next_valid, query_error *err);

/* The sort spec's fingerprint a cursor must carry. */
uint64_t index_sort_hash(const sort_spec *sort);
/* Text form of a cursor: base64url (no padding) of a versioned, checksummed
 * record; at most INDEX_CURSOR_TEXT_MAX bytes, NUL-terminated. */
size_t index_cursor_encode(const index_cursor *c, char *out, size_t cap);
/* HANU_ERR_INVALID when text is not a cursor this server wrote (bad base64,
 * length, version, checksum, value types) or when it belongs to another sort. */
int index_cursor_decode(const char *text, size_t len, const sort_spec *sort, index_cursor *out);
/* A _search cursor is the same record with one key, the score (a double),
 * and the query's fingerprint (its clauses and fields) in place of the sort's:
 * the next page takes the hits strictly after (score, _id). */
uint64_t index_search_hash(const search_query *q, const char *const *fields, size_t nfields);
int index_search_cursor_decode(const char *text, size_t len, uint64_t query_hash, index_cursor *out);

/* Aggregations over the filter's documents, from columns (string columns by
 * dictionary ordinal); documents are decoded only where a column cannot tell
 * (missing or multi values, integers beyond 2^53). Appends the "aggs" object
 * as aggs_eval would; *count gets the number of documents matched. */
typedef struct aggs_spec aggs_spec;
int index_aggs(store *st, const index_snapshot *snap, const filter *f, const aggs_spec *a, hanu_buf *out,
               size_t *count, query_error *err);

/* ------------------------------------------------ bitset cache (bitset_cache.c) */

/* Equality-filter and column bitmaps per open segment, bounded in bytes (LRU),
 * shared by every query thread. get returns a copy (free it) or NULL. */
#define INDEX_BITSET_CACHE_DEFAULT_BYTES (64ull << 20)
struct roaring_bitmap_s;
void index_bitset_cache_configure(uint64_t max_bytes);
struct roaring_bitmap_s *index_bitset_cache_get(const index_segment *seg, const uint8_t *key, size_t len);
void index_bitset_cache_put(const index_segment *seg, const uint8_t *key, size_t len,
                            const struct roaring_bitmap_s *bm);
void index_bitset_cache_forget(const index_segment *seg);
/* Where the cache keeps the list of a segment's entries, so that forgetting a
 * segment (every close: refresh segments come and go by the hundred) walks its
 * own entries, not the whole cache. */
void **index_segment_cache_slot(const index_segment *seg);
typedef struct index_bitset_cache_stats {
    uint64_t hits, misses, bytes, entries, max_bytes;
} index_bitset_cache_stats;
void index_bitset_cache_get_stats(index_bitset_cache_stats *st);

#endif
