/*-------------------------------------------------------------------------
 *
 * cbt_consolidate.h
 *	  A consolidation round of a cbt (cbt_consolidate.c), for the access
 *	  method's consolidate callback, cbt_finalize and VACUUM.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CBT_CONSOLIDATE_H
#define CBT_CONSOLIDATE_H

#include "postgres.h"

#include "cbt.h"
#include "cbt_agg.h"
#include "cbt_groups.h"
#include "ss_changelog.h"
#include "ss_test.h"

typedef struct CbtRound
{
	Relation	rel;
	CbtMeta		meta;			/* working copy, installed per pass */
	CbtFreeList free;			/* the whole free list (meta's and overflow) */
	const CbtDef *def;
	CbtAggRun  *run;
	uint64		generation;		/* of the pass being made */
	FullTransactionId stamp;	/* of the extents it frees */
	Size		memory;			/* for collected records */
	Size		used;
	void	   *records;		/* RoundRecord[] */
	uint64		nrecords;
	uint64		maxrecords;
	uint64		last_pos;
	MemoryContext pass_cxt;		/* the collected records */
	CbtGroups	groups;			/* of the hash being aggregated */
	StringInfoData paobuf;
	/*
	 * The extents the round wrote since its last install: no reader can
	 * reach them, so the round can reuse one it frees at once.
	 */
	CbtExtent  *fresh;
	uint32		nfresh;
	uint32		maxfresh;
	bool		dirty;			/* passes made since the last install */
	int64		finalized;		/* nodes cbt_finalize went through */
} CbtRound;

/* streamsketch.test_cbt_crash: where a round stops the server (tests) */
typedef enum CbtCrashPoint
{
	CBT_CRASH_NONE,
	CBT_CRASH_PASS_WRITTEN,		/* a pass's pages written, not installed */
	CBT_CRASH_INSTALLED,		/* a round installed, the log not moved */
	CBT_CRASH_FINALIZE_WRITTEN	/* cbt_finalize's pages written */
} CbtCrashPoint;

extern SSTestCrash cbt_crash;

#define cbt_test_crash(rel, point) ss_test_crash(&cbt_crash, rel, point)

extern void cbt_round_begin(CbtRound *r, Relation rel, const CbtMeta *meta,
							CbtAggRun *run, const CbtDef *def);
extern void cbt_round_records(CbtRound *r, SSConsolidation *c);
extern int64 cbt_round_finalize(CbtRound *r);
extern void cbt_round_end(CbtRound *r);

#endif							/* CBT_CONSOLIDATE_H */
