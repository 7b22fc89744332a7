/*-------------------------------------------------------------------------
 *
 * cbt_path.c
 *	  The cbt's plain SQL lookups (SSStructure.paths): a query whose quals
 *	  give every group key a value (`key = value`, `key = ANY (array)`,
 *	  `key IN (...)`) reads those groups from their root-to-leaf paths, as
 *	  cbt_lookup does, instead of finalizing every group (docs/cbt.md,
 *	  "Plain SQL lookups").  The values are constants, parameters or, for a
 *	  path parameterized by other relations, their columns (a nested loop
 *	  probes per outer row).  The other quals filter the groups found.
 *
 * A qual is used only where it selects exactly the groups the scan would
 * return: its operator is the key type's equality (cbt_agg.c compares
 * keys with it) or a cross-type equality of the same btree family whose
 * other type casts implicitly and exactly to the key's (as cbt_lookup
 * casts keys),
 * and its collation is the key's or, both deterministic, equality alike.
 * A NULL value matches nothing, as `=` does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/table.h"
#include "cbt.h"
#include "cbt_am.h"
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "parser/parsetree.h"
#include "ss_planner.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

static const SSCustomMethods cbt_methods;

/* SSKeyClauseFn: does c select exactly the groups of key k equal to it? */
static bool
key_clause(void *arg, int k, const SSColumnClause *c)
{
	const CbtRuntime *rt = (const CbtRuntime *) arg;
	const CbtColumn *key = &rt->def->keys[k];

	if (c->attno != rt->input_src[k] + 1 || !ss_key_equality(c, key->type))
		return false;
	if (c->inputcollid != key->collation &&
		(!OidIsValid(c->inputcollid) || !OidIsValid(key->collation) ||
		 !get_collation_isdeterministic(c->inputcollid) ||
		 !get_collation_isdeterministic(key->collation)))
		return false;
	return true;
}

/*
 * SSPathOps.add_paths.  Per lookup: a node page per level, the upper ones
 * shared by all lookups; the leaf, its fragment block and the change
 * log's page of its own.
 */
static void
cbt_add_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte,
			  Relation relation)
{
	CbtRuntime *rt = cbt_runtime(relation);
	int			nkeys = rt->def->nkeys;
	AttrNumber *attnos = palloc(sizeof(AttrNumber) * nkeys);
	double		fanout = Max(cbt_get_state(relation)->params.fanout, 2);
	double		height = 1 + ceil(log(Max(rel->pages, 1)) / log(fanout));

	for (int k = 0; k < nkeys; k++)
		attnos[k] = rt->input_src[k] + 1;
	ss_add_key_lookup_paths(root, rel, attnos, nkeys, key_clause, (void *) rt,
							height - 1, 3, &cbt_methods.path);
}

/* CustomPathMethods.PlanCustomPath: ss_lookup_plan's, the keys in order */
static Plan *
cbt_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
			  List *tlist, List *clauses, List *custom_plans)
{
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	Relation	relation = table_open(rte->relid, NoLock);
	CbtRuntime *rt = cbt_runtime(relation);
	int			nkeys = rt->def->nkeys;
	SSColumnClause *keys = palloc(sizeof(SSColumnClause) * nkeys);

	if (!ss_match_keys(root, rel, clauses, PATH_REQ_OUTER(&best_path->path),
					   nkeys, key_clause, (void *) rt, keys))
		elog(ERROR, "cbt lookup path lost its key clauses");
	table_close(relation, NoLock);
	return &ss_lookup_plan(rel, best_path, tlist, clauses, keys, nkeys,
						   &cbt_methods.scan)->scan.plan;
}

static TupleTableSlot *cbt_lookup_next(ScanState *ss);

static Node *
cbt_create_state(CustomScan *cscan)
{
	return ss_lookup_create_state(sizeof(SSLookupState), cbt_lookup_next,
								  "Group Keys");
}

/* ExecScanAccessMtd: the next combination's group, if it exists */
static TupleTableSlot *
cbt_lookup_next(ScanState *ss)
{
	SSLookupState *ls = (SSLookupState *) ss;
	Relation	rel = ss->ss_currentRelation;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	CbtRuntime *rt = cbt_runtime(rel);

	ExecClearTuple(slot);
	if (!ls->ready)
	{
		ls->ready = true;
		for (int k = 0; k < ls->nkeys; k++)
			ss_lookup_key_values(ls, k,
								 TupleDescAttr(RelationGetDescr(rel), rt->input_src[k]),
								 rt->def->keys[k].collation, "a cbt lookup");
	}
	while (ss_lookup_next_keys(ls))
	{
		HeapTuple	tuple;
		MemoryContext old;

		old = MemoryContextSwitchTo(ls->rowcxt);
		tuple = cbt_lookup_tuple(rel, RelationGetDescr(rel), ls->keys,
								 ls->keynulls);
		MemoryContextSwitchTo(old);
		if (tuple != NULL)
		{
			ExecForceStoreHeapTuple(tuple, slot, false);
			return slot;
		}
	}
	return slot;
}

static const SSCustomMethods cbt_methods =
	SS_CUSTOM_METHODS("cbt lookup", cbt_plan_path, cbt_create_state);

/*
 * SSPathOps.scan_row_cost: a scan decodes each group's keys and partial
 * aggregates and finalizes them (measured about ten operators' cost per
 * column, beyond what a heap row costs).
 */
static double
cbt_scan_row_cost(Relation relation)
{
	const CbtDef *def = cbt_runtime(relation)->def;

	return 10 * cpu_operator_cost * (1 + def->nkeys + def->naggs);
}

const SSPathOps cbt_path_ops = {
	.add_paths = cbt_add_paths,
	.scan_row_cost = cbt_scan_row_cost,
	.methods = &cbt_methods.scan,
};
