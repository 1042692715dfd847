/*
 * numbering: the txn ranges of the chain's writers (docs/REPLICATION.md, "Txn
 * numbering across writers"). A node that starts writing a chain another writer
 * wrote before it (a lease promotion, a rebuild of an empty data directory) cannot
 * know which txns the old writer handed out at durability `none` or `local` and
 * never sealed. It numbers from a base nobody used: above the chain's last txn AND
 * above every earlier claim, each by NUMBERING_GAP, and made its own with
 * put-if-absent of the bucket object numbering/<base>. So two writers never
 * number from the same range, also when one of them never reached the chain (killed
 * or fenced before its first seal): the same base taken from the chain alone was
 * handed out twice.
 *
 * The claims also carry the lease term that made them: a new term is taken above
 * every claimed one, also after the lease object was deleted.
 */
#ifndef HANU_NUMBERING_H
#define HANU_NUMBERING_H

#include <stdint.h>
#include <stddef.h>
#include "bucket/bucket.h"

#define NUMBERING_KEY_PREFIX "numbering/"
#define NUMBERING_GAP (1ull << 32)      /* more than a writer hands out between two seals */

/* Claims the next base at or above last_txn + NUMBERING_GAP and every earlier claim +
   NUMBERING_GAP (put-if-absent: a racing claimant takes the one after). term: the
   lease term (0 without a lease). OK with *base, or the bucket's errors. */
int numbering_claim(bucket *b, uint64_t last_txn, uint64_t term, uint64_t *base, char *err, size_t errcap);
/* The highest claimed base and the term that claimed it (0, 0: none). */
int numbering_highest(bucket *b, uint64_t *base, uint64_t *term, char *err, size_t errcap);

#endif
