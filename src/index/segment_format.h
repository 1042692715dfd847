/*
 * The segment file layout shared by the writer (segment_build.c) and the
 * reader (segment_read.c); docs/FORMATS.md describes it for people.
 *
 *   header   SEG_HEADER bytes (offsets of every section, counts)
 *   ids      u32 offsets[docs + 1], then the id bytes
 *   txns     u64[docs]
 *   terms    SEG_TERM bytes per term, sorted by key
 *   keys     the term key bytes
 *   postings per term: SEG_BLOCK bytes per block, then the blocks' payloads
 *   columns  SEG_COLUMN bytes per column, sorted by path, then their parts
 *   footer   u64 hash64 (seed 0) of every byte before it, then the end magic
 * Every section starts 8-aligned. Little-endian throughout.
 */
#ifndef HANU_INDEX_SEGMENT_FORMAT_H
#define HANU_INDEX_SEGMENT_FORMAT_H

#define SEG_MAGIC "HANUSEG\0"
#define SEG_END_MAGIC "HANUSEGE"
#define SEG_VERSION 2          /* 2: SEG_B_IMPACT; version 1 is read (no impacts) */
#define SEG_VERSION_MIN 1

/* header */
#define SEG_H_VERSION 8        /* u32 */
#define SEG_H_DOCS 12          /* u32 */
#define SEG_H_TERMS 16         /* u32 */
#define SEG_H_COLUMNS 20       /* u32 */
#define SEG_H_IDS 24           /* u64 offset */
#define SEG_H_TXNS 32
#define SEG_H_TERM_TABLE 40
#define SEG_H_KEYS 48
#define SEG_H_KEYS_LEN 56
#define SEG_H_COLUMN_TABLE 64
#define SEG_H_POSTINGS 72      /* start of the postings section */
#define SEG_H_POSTINGS_LEN 80
#define SEG_HEADER 88

/* term table entry */
#define SEG_T_KEY_OFF 0        /* u32, into keys */
#define SEG_T_KEY_LEN 4        /* u32 */
#define SEG_T_DF 8             /* u32 */
#define SEG_T_BLOCKS 12        /* u32 */
#define SEG_T_POSTINGS 16      /* u64 file offset of the term's block table */
#define SEG_TERM 24

/* block table entry */
#define SEG_B_PAYLOAD 0        /* u64 file offset: doc deltas, then tfs */
#define SEG_B_LAST 8           /* u32 last ordinal of the block */
#define SEG_B_COUNT 12         /* u32 1..INDEX_BLOCK */
#define SEG_B_MAX_TF 16        /* u32 */
#define SEG_B_MIN_LEN 20       /* u32 */
#define SEG_B_DOC_CODE 24      /* u8 */
#define SEG_B_TF_CODE 25       /* u8 */
#define SEG_B_IMPACT 26        /* u16, version 2, whole-text words only (0: none): index_block_impact */
#define SEG_B_TF_BASE 28       /* u32 */
#define SEG_B_DOC_BASE 32      /* u64 */
#define SEG_BLOCK 40

/* column table entry; each part is a codec payload of docs values */
#define SEG_C_PATH 0           /* u64 file offset of the path bytes */
#define SEG_C_PATH_LEN 8       /* u32 */
#define SEG_C_DICT_N 12        /* u32 strings in the dictionary */
#define SEG_C_DICT 16          /* u64 file offset: u32 offsets[n + 1], then bytes */
#define SEG_C_TEXT_TOTAL 24    /* u64 */
#define SEG_C_PARTS 32         /* four parts: tags, numbers, string ords, text lengths */
#define SEG_C_PART 24          /*   u64 offset, u64 base, u8 code, 7 padding */
#define SEG_COLUMN (SEG_C_PARTS + 4 * SEG_C_PART)

enum { SEG_PART_TAGS, SEG_PART_NUMBERS, SEG_PART_ORDS, SEG_PART_LENGTHS, SEG_PARTS };

#define SEG_FOOTER 16

/* A block's impact while its postings are written: the largest
 * index_block_impact(tf, length, a0) of them. For one tf the impact falls as the
 * length grows, so for the small tfs of most postings only the shortest length
 * of each tf is kept and computed once, at the block's end (the same value). */
#define IMPACT_SMALL_TF 8
typedef struct block_impact {
    uint32_t small_len[IMPACT_SMALL_TF];   /* [tf]: the shortest length with that tf */
    uint32_t impact;                       /* of the larger tfs */
} block_impact;

static inline void block_impact_reset(block_impact *a)
{
    for (uint32_t k = 0; k < IMPACT_SMALL_TF; k++) a->small_len[k] = UINT32_MAX;
    a->impact = 0;
}

static inline void block_impact_add(block_impact *a, uint32_t tf, uint32_t len, double a0)
{
    if (tf < IMPACT_SMALL_TF) {
        if (len < a->small_len[tf]) a->small_len[tf] = len;
    } else {
        uint32_t q = index_block_impact(tf, len, a0);
        if (q > a->impact) a->impact = q;
    }
}

static inline uint32_t block_impact_of(const block_impact *a, double a0)
{
    uint32_t impact = a->impact;
    for (uint32_t tf = 0; tf < IMPACT_SMALL_TF; tf++)
        if (a->small_len[tf] != UINT32_MAX) {
            uint32_t q = index_block_impact(tf, a->small_len[tf], a0);
            if (q > impact) impact = q;
        }
    return impact;
}

#endif
