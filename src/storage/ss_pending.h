/*-------------------------------------------------------------------------
 *
 * ss_pending.h
 *	  A transaction's pending changes to streamsketch structures.
 *
 * Inserts do not touch the structure: they append a record to a
 * backend-local log, which at pre-commit becomes a batch of the structure's
 * change log (ss_changelog.h) and is discarded on abort.
 * The log keeps at most streamsketch.pending_memory bytes in memory and
 * spills the rest to a temporary file; it is never applied early.
 * Subtransaction abort truncates the log back to where the subtransaction
 * started.  Point queries read the log to see their own transaction's
 * changes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_PENDING_H
#define SS_PENDING_H

#include "postgres.h"

#include "ss_hash.h"
#include "ss_page.h"
#include "utils/rel.h"

typedef enum SSPendingType
{
	SS_PENDING_KEY = 1,			/* payload: SSPendingKey */
	SS_PENDING_MERGE,			/* payload: a structure-specific value */
	SS_PENDING_TRUNCATE,		/* no payload: forget earlier records */
	SS_PENDING_DELETE,			/* payload: SSPendingKey (count to remove) */
	SS_PENDING_ITEM				/* payload: the structure's own, opaque here
								 * (a LERT observation with its key bytes) */
} SSPendingType;

typedef struct SSPendingHeader
{
	Oid			relid;
	uint16		type;			/* SSPendingType */
	uint16		unused;
	uint32		len;			/* payload bytes (record is MAXALIGNed) */
	uint32		rows;			/* the rows the record stands for: 1, or
								 * more for key records combined at
								 * pre-commit (ss_pending.c) */
} SSPendingHeader;

typedef struct SSPendingKey
{
	SSHash		hash;
	int64		weight;
} SSPendingKey;

struct TupleTableSlot;
extern bool ss_slot_key(Relation rel, struct TupleTableSlot *slot,
						int16 keylen, bool keybyval, Oid inttype, uint32 seed,
						SSPendingKey *key);

extern void ss_pending_define_settings(void);
extern void ss_pending_init(void);
extern void ss_pending_add(Relation rel, SSPendingType type,
						   const void *payload, uint32 len);
extern void *ss_pending_last_payload(Relation rel, SSPendingType type,
									 uint32 *len);
extern bool ss_pending_has(Oid relid);
extern uint64 ss_pending_count(Oid relid, uint64 *log_bytes);

/*
 * Iterate over the live records of one relation (those after its last
 * TRUNCATE record), in insertion order.  *payload is valid until the next
 * call.
 */
struct PendingSeq;
typedef struct SSPendingIter
{
	const struct PendingSeq *seq;	/* the byte sequence read */
	Oid			relid;
	int64		pos;			/* logical offset of the next record */
	int64		start;			/* first live record of relid */
	char	   *buf;			/* payload copy of an oversized record */
	Size		bufsize;
	char	   *chunk;			/* spilled bytes read ahead, in one read */
	int64		chunk_pos;		/* their logical offset */
	Size		chunk_len;
} SSPendingIter;

extern void ss_pending_iter_begin(SSPendingIter *it, Oid relid);
extern bool ss_pending_iter_next(SSPendingIter *it, SSPendingHeader *hdr,
								 char **payload);
extern void ss_pending_iter_end(SSPendingIter *it);

extern void *ss_sort_batch_by_page(void *batch, int n, Size elemsize,
								   uint32 (*page_of) (const void *elem),
								   int (*cmp) (const void *a, const void *b),
								   void *scratch);

/*
 * The order ss_sort_batch_by_page's cmp gives two elements: by page (or
 * partition), then by arrival (a log position, a record's number).
 */
static inline int
ss_page_arrival_cmp(uint32 page_a, uint64 arrival_a,
					uint32 page_b, uint64 arrival_b)
{
	if (page_a != page_b)
		return page_a < page_b ? -1 : 1;
	if (arrival_a != arrival_b)
		return arrival_a < arrival_b ? -1 : 1;
	return 0;
}

#endif							/* SS_PENDING_H */
