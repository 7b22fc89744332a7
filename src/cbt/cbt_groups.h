/*-------------------------------------------------------------------------
 *
 * cbt_groups.h
 *	  The groups of one key hash while a cbt aggregates (cbt_groups.c):
 *	  usually one; more when keys collide.  Rounds and reads both fold
 *	  PAOs (combine functions) and input rows (transition functions) into
 *	  them, then serialize or finalize them.
 *
 * A PAO is the group key's row bytes, length first, then the states
 * (cbt_agg.h).  The key a group keeps is its first row's or PAO's, as
 * GROUP BY returns one of the equal keys.
 *
 * A change log record is the key hash, then an input row (SS_PENDING_ITEM)
 * or a PAO (SS_PENDING_MERGE).  A MERGE record that a transaction's rows
 * were combined into at commit (cbt_combine.c) has a CbtCountedPao before
 * its PAO, so that rounds still count the input rows; a group inserted
 * with its values (a dump's) stands for none.
 *
 * Indexed (cbt_groups_index), the groups may have any hashes: the commit's
 * combining holds a transaction's groups so, in their first rows' order.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CBT_GROUPS_H
#define CBT_GROUPS_H

#include "postgres.h"

#include "cbt_agg.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "utils/rel.h"

typedef struct CbtGroups
{
	Relation	rel;			/* for error messages */
	CbtAggRun  *run;
	int			nkeys;
	int			n;
	int			cap;
	TupleTableSlot **keys;
	CbtStates  *states;
	TupleTableSlot *scratch;
	MemoryContext cxt;			/* keys; reset with the groups */
	MemoryContext row_cxt;		/* the scratch row's values, reset per row */
	uint64	   *rows;			/* input rows folded into each group */
	/* indexed only: each group's hash, and the groups of a hash */
	struct HTAB *index;			/* hash -> its last group */
	uint64	   *hashes;
	int		   *chain;			/* the hash's group before it, or -1 */
} CbtGroups;

#define CBT_COUNTED_PAO_MARKER	PG_UINT32_MAX	/* no PAO's key is this long */

typedef struct CbtCountedPao
{
	uint32		marker;			/* CBT_COUNTED_PAO_MARKER, where a PAO's key
								 * length is */
	uint32		unused;
	uint64		rows;			/* input rows combined into the PAO after it */
} CbtCountedPao;

extern void cbt_groups_init(CbtGroups *g, Relation rel, CbtAggRun *run,
							int nkeys);
extern void cbt_groups_index(CbtGroups *g);
extern uint64 cbt_groups_add_record(CbtGroups *g, uint64 hash, bool merge,
									const char *bytes, uint32 len);
extern void cbt_groups_add_pao(CbtGroups *g, const char *pao, uint32 size);
extern void cbt_groups_pao(CbtGroups *g, int i, StringInfo out);
extern void cbt_pao_of_results(CbtAggRun *run, int nkeys,
							   TupleTableSlot *key, Datum *values,
							   bool *isnull, StringInfo out);
extern void cbt_groups_reset(CbtGroups *g);
extern void cbt_groups_free(CbtGroups *g);

#endif							/* CBT_GROUPS_H */
