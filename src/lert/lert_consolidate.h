/*-------------------------------------------------------------------------
 *
 * lert_consolidate.h
 *	  A LERT consolidation round's state, shared by lert_consolidate.c
 *	  (records, level 0, installs) and lert_merge.c (flushes).
 *
 *-------------------------------------------------------------------------
 */
#ifndef LERT_CONSOLIDATE_H
#define LERT_CONSOLIDATE_H

#include "postgres.h"

#include "lert.h"
#include "lib/stringinfo.h"
#include "utils/hsearch.h"

/* A level-0 page copied into backend memory. */
typedef struct LertL0Page
{
	BlockNumber blkno;			/* hash key */
	uint32		cone;
	bool		dirty;
	char	   *area;			/* SS_PAGE_DATA_SIZE bytes */
} LertL0Page;

/*
 * A round of one cone.  meta is the round's copy of the metapage: the
 * cone's descriptor is the round's own, its free list holds what the round
 * reserved from the pool and what its merges freed (with one cone, the
 * metapage's list: lert_store.c), both installed by lert_round_install, and
 * what cones share is read again at each install.
 */
typedef struct LertRound
{
	Relation	rel;
	LertState  *st;
	uint32		cone;
	LertMeta	meta;
	LertMeta   *shared;			/* the metapage read at an install */
	int64		merges_installed;	/* meta.merges at the last install */
	int64		queries_installed;	/* meta.point_queries then */
	int64		pos;			/* stream position of the next observation */
	int64		entries[LERT_MAX_CONES];	/* level-0 entries now */
	HTAB	   *pages;			/* LertL0Page by block */
	MemoryContext pages_cxt;	/* the copies and their hash */
	int			npages_cached;
	StringInfoData reports;		/* made, not yet valid: LertReportRec + key */
	int64		npending;
	int64		reports_made;	/* installed by this round */
	bool		changed;		/* entry counts moved since the last install */
	/* immediate: records held back while their point queries prefetch */
	StringInfoData queue;		/* LertQueued + payload, each 8-aligned */
	int			nqueued;
	char	   *prefetch_area;	/* a run's index page, for lert_run_prefetch */
	MemoryContext cxt;
} LertRound;

/* What lert_observe and lert_merge_report ask the on-disk levels. */
typedef struct LertQuery
{
	LertRound  *r;
	uint32		cone;
	uint32		from;			/* first level asked */
	uint64		fp;
	const char *key;
	uint32		keylen;
} LertQuery;

extern LertQueryFn lert_round_query_fn;
extern void lert_round_query_init(LertQuery *q, LertRound *r, uint32 cone,
								  uint32 from, uint64 fp, const char *key,
								  uint32 keylen);
extern LertL0Page *lert_round_page(LertRound *r, uint32 cone, uint32 page);
extern void lert_round_forget_cone(LertRound *r, uint32 cone);
extern void lert_round_add_report(LertRound *r, const LertReport *rep,
								  uint64 fp, const char *key, uint32 keylen);
extern void lert_round_install(LertRound *r, uint64 settle);
extern bool lert_lane_run(Relation rel, uint32 cone, uint64 limit,
						  TransactionId *stopped_at);

/* lert_merge.c */
extern void lert_flush_cone(LertRound *r, uint32 cone, uint64 logpos,
							bool final, bool spill);

#endif							/* LERT_CONSOLIDATE_H */
