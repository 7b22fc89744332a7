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
} CbtGroups;

extern void cbt_groups_init(CbtGroups *g, Relation rel, CbtAggRun *run,
							int nkeys);
extern void cbt_groups_add_row(CbtGroups *g, const char *row, uint32 len);
extern void cbt_groups_add_pao(CbtGroups *g, const char *pao, uint32 size);
extern void cbt_groups_pao(CbtGroups *g, int i, StringInfo out);
extern void cbt_pao_of_results(CbtAggRun *run, int nkeys,
							   TupleTableSlot *key, Datum *values,
							   bool *isnull, StringInfo out);
extern void cbt_groups_reset(CbtGroups *g);
extern void cbt_groups_free(CbtGroups *g);

#endif							/* CBT_GROUPS_H */
