/*-------------------------------------------------------------------------
 *
 * ss_planner.h
 *	  Plain SQL reads other than the scan: the planner hook that asks a
 *	  structure for its paths (SSStructure.paths), and what structures
 *	  share to build them: matching a qual to a column, the join clauses
 *	  that could parameterize a path, EXPLAIN's lines.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_PLANNER_H
#define SS_PLANNER_H

#include "postgres.h"

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "ss_structure.h"

extern bool ss_enable_lookup_scan;

extern void ss_planner_init(const SSStructure *const *list, int n);

/*
 * A qual `column op value` (or `value op column`, op then commuted) of a
 * base relation, or `column op ANY (array)`: value references no column
 * of the relation and nothing volatile.
 */
typedef struct SSColumnClause
{
	RestrictInfo *rinfo;
	AttrNumber	attno;			/* of the relation's column */
	Oid			opno;			/* with the column on its left */
	Oid			lefttype;		/* op's input types */
	Oid			righttype;
	Oid			inputcollid;
	Expr	   *value;			/* the other side (an array with is_array) */
	bool		is_array;		/* = ANY (value), IN (...) */
	bool		value_on_left;	/* as written: value op column */
	Relids		outer_relids;	/* the other relations value references */
} SSColumnClause;

extern bool ss_match_column_clause(PlannerInfo *root, RestrictInfo *rinfo,
								   RelOptInfo *rel, SSColumnClause *out);
extern List *ss_column_join_clauses(PlannerInfo *root, RelOptInfo *rel,
									AttrNumber attno);
extern void ss_explain_exprs(CustomScanState *node, List *ancestors,
							 ExplainState *es, const char *label,
							 List *exprs);

#endif							/* SS_PLANNER_H */
