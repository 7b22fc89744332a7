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
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "cbt.h"
#include "cbt_am.h"
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "parser/parse_coerce.h"
#include "ss_planner.h"
#include "ss_sqlfunc.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_locale.h"
#include "utils/rel.h"
#include "utils/typcache.h"

/* elements assumed in an array that is not a constant */
#define LOOKUP_ARRAY_GUESS	10

static const CustomPathMethods cbt_path_methods;
static const CustomScanMethods cbt_scan_methods;
static const CustomExecMethods cbt_exec_methods;

/* The value's type (an array's element type), or InvalidOid. */
static Oid
value_type(const SSColumnClause *c)
{
	Oid			t = exprType((Node *) c->value);

	return c->is_array ? get_element_type(t) : t;
}

/* Is every value of type from one of type to, cast exactly? */
static bool
exact_widening(Oid from, Oid to)
{
	switch (to)
	{
		case INT8OID:
			return from == INT4OID || from == INT2OID;
		case INT4OID:
			return from == INT2OID;
		case FLOAT8OID:
			return from == FLOAT4OID;
		default:
			return false;
	}
}

/* Does c select exactly the groups of key k whose key equals its value? */
static bool
key_clause(const CbtDef *def, const CbtRuntime *rt, int k,
		   const SSColumnClause *c)
{
	const CbtColumn *key = &def->keys[k];
	TypeCacheEntry *tc;
	Oid			vt = value_type(c);
	Oid			funcid;

	if (c->attno != rt->input_src[k] + 1 || !OidIsValid(vt))
		return false;
	tc = lookup_type_cache(key->type, TYPECACHE_EQ_OPR | TYPECACHE_BTREE_OPFAMILY);
	if (c->opno != tc->eq_opr &&
		(!OidIsValid(tc->btree_opf) ||
		 get_op_opfamily_strategy(c->opno, tc->btree_opf) != BTEqualStrategyNumber ||
		 !IsBinaryCoercible(key->type, c->lefttype)))
		return false;
	/*
	 * The value becomes a key as cbt_lookup's arguments do, by an implicit
	 * cast: one that can neither fail nor change the value, so that the
	 * lookup finds what the operator would (a date's cast to timestamp can
	 * fail where date = timestamp is false).
	 */
	if (vt != key->type &&
		find_coercion_pathway(key->type, vt, COERCION_IMPLICIT,
							  &funcid) != COERCION_PATH_RELABELTYPE &&
		!exact_widening(vt, key->type))
		return false;
	if (c->inputcollid != key->collation &&
		(!OidIsValid(c->inputcollid) || !OidIsValid(key->collation) ||
		 !get_collation_isdeterministic(c->inputcollid) ||
		 !get_collation_isdeterministic(key->collation)))
		return false;
	return true;
}

/*
 * Pick, for every key, a clause of clauses (RestrictInfos) whose value
 * references only relations in outer: an equality rather than an array.
 * Returns false unless every key has one.
 */
static bool
match_keys(PlannerInfo *root, RelOptInfo *rel, const CbtRuntime *rt,
		   List *clauses, Relids outer, SSColumnClause *keys)
{
	const CbtDef *def = rt->def;
	ListCell   *lc;
	bool		all = true;

	for (int k = 0; k < def->nkeys; k++)
		keys[k].rinfo = NULL;
	foreach(lc, clauses)
	{
		SSColumnClause c;

		if (!ss_match_column_clause(root, lfirst_node(RestrictInfo, lc), rel, &c) ||
			!bms_is_subset(c.outer_relids, outer))
			continue;
		for (int k = 0; k < def->nkeys; k++)
			if ((keys[k].rinfo == NULL || (keys[k].is_array && !c.is_array)) &&
				key_clause(def, rt, k, &c))
				keys[k] = c;
	}
	for (int k = 0; k < def->nkeys; k++)
		all = all && keys[k].rinfo != NULL;
	return all;
}

/* Lookups the keys make: the product of their arrays' lengths. */
static double
lookups(const SSColumnClause *keys, int nkeys)
{
	double		n = 1;

	for (int k = 0; k < nkeys; k++)
	{
		Node	   *v = (Node *) keys[k].value;

		if (!keys[k].is_array)
			continue;
		if (IsA(v, Const) && !((Const *) v)->constisnull)
		{
			ArrayType  *a = DatumGetArrayTypeP(((Const *) v)->constvalue);

			n *= ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
		}
		else if (IsA(v, ArrayExpr))
			n *= list_length(((ArrayExpr *) v)->elements);
		else
			n *= LOOKUP_ARRAY_GUESS;
	}
	return n;
}

static void
add_lookup_path(PlannerInfo *root, RelOptInfo *rel, Relation relation,
				const SSColumnClause *keys, int nkeys, Relids outer)
{
	CustomPath *cp = makeNode(CustomPath);
	Relids		required = bms_union(outer, rel->lateral_relids);
	double		n = lookups(keys, nkeys);
	double		fanout = Max(cbt_get_state(relation)->params.fanout, 2);
	double		height;
	QualCost	qcost;

	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = rel->reltarget;
	cp->path.param_info = get_baserel_parampathinfo(root, rel, required);
	cp->path.parallel_aware = false;
	/* a worker lacks the leader's pending rows, which a lookup reads */
	cp->path.parallel_safe = false;
	cp->path.rows = clamp_row_est(Min(n, cp->path.param_info ?
									  cp->path.param_info->ppi_rows : rel->rows));

	/*
	 * Per lookup: a node page per level, the fragment block and the change
	 * log's page, read at random; then the remaining quals per group.
	 */
	height = 1 + ceil(log(Max(rel->pages, 1)) / log(fanout));
	cost_qual_eval(&qcost, rel->baserestrictinfo, root);
	cp->path.startup_cost = qcost.startup;
	cp->path.total_cost = qcost.startup +
		n * ((height + 2) * random_page_cost + cpu_tuple_cost) +
		cp->path.rows * (qcost.per_tuple + rel->reltarget->cost.per_tuple);
	/* ExecScan projects */
	cp->flags = CUSTOMPATH_SUPPORT_PROJECTION;
	cp->methods = &cbt_path_methods;
	add_path(rel, &cp->path);
}

/* SSPathOps.add_paths */
static void
cbt_add_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte,
			  Relation relation)
{
	CbtRuntime *rt = cbt_runtime(relation);
	int			nkeys = rt->def->nkeys;
	SSColumnClause *keys = palloc(sizeof(SSColumnClause) * nkeys);
	List	   *outers = NIL;
	List	   *joins = NIL;
	ListCell   *lc;

	if (match_keys(root, rel, rt, rel->baserestrictinfo, NULL, keys))
		add_lookup_path(root, rel, relation, keys, nkeys, NULL);

	/* one path per set of other relations whose columns give keys values */
	for (int k = 0; k < nkeys; k++)
		joins = list_concat(joins,
							ss_column_join_clauses(root, rel,
												   rt->input_src[k] + 1));
	foreach(lc, joins)
	{
		SSColumnClause c;

		ListCell   *lc2;
		bool		seen = false;

		if (!ss_match_column_clause(root, lfirst_node(RestrictInfo, lc), rel, &c) ||
			bms_is_empty(c.outer_relids))
			continue;
		/* (Relids are no Nodes: list_append_unique cannot compare them) */
		foreach(lc2, outers)
			seen = seen || bms_equal(lfirst(lc2), c.outer_relids);
		if (!seen)
			outers = lappend(outers, c.outer_relids);
	}
	foreach(lc, outers)
	{
		Relids		outer = (Relids) lfirst(lc);

		if (match_keys(root, rel, rt,
					   list_concat_copy(rel->baserestrictinfo, joins),
					   outer, keys))
			add_lookup_path(root, rel, relation, keys, nkeys, outer);
	}
}

/*
 * CustomPathMethods.PlanCustomPath: custom_exprs are the key clauses, in
 * key order (EXPLAIN shows them), custom_private the argument of each
 * that holds the value; the other clauses are the plan's quals.
 */
static Plan *
cbt_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
			  List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cscan = makeNode(CustomScan);
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	Relation	relation = table_open(rte->relid, NoLock);
	CbtRuntime *rt = cbt_runtime(relation);
	int			nkeys = rt->def->nkeys;
	SSColumnClause *keys = palloc(sizeof(SSColumnClause) * nkeys);
	Relids		outer = PATH_REQ_OUTER(&best_path->path);
	List	   *used = NIL;

	if (!match_keys(root, rel, rt, clauses, outer, keys))
		elog(ERROR, "cbt lookup path lost its key clauses");
	table_close(relation, NoLock);
	for (int k = 0; k < nkeys; k++)
	{
		used = lappend(used, keys[k].rinfo);
		cscan->custom_exprs = lappend(cscan->custom_exprs, keys[k].rinfo->clause);
		cscan->custom_private = lappend_int(cscan->custom_private,
											keys[k].value_on_left ? 0 : 1);
	}
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual =
		extract_actual_clauses(list_difference_ptr(clauses, used), false);
	cscan->scan.scanrelid = rel->relid;
	cscan->flags = best_path->flags;
	cscan->methods = &cbt_scan_methods;
	return &cscan->scan.plan;
}

typedef struct CbtLookupState
{
	CustomScanState css;
	int			nkeys;
	ExprState **value;			/* per key */
	bool	   *is_array;
	MemoryContext keycxt;		/* the keys, until a rescan */
	MemoryContext rowcxt;		/* one lookup's group */
	bool		ready;
	bool		done;
	int		   *nvals;			/* per key: its distinct values */
	Datum	  **vals;
	int		   *pos;			/* the next combination */
	Datum	   *keys;
	bool	   *keynulls;
} CbtLookupState;

static Node *
cbt_create_state(CustomScan *cscan)
{
	CbtLookupState *ls = (CbtLookupState *) newNode(sizeof(CbtLookupState),
													T_CustomScanState);

	ls->css.methods = &cbt_exec_methods;
	return (Node *) ls;
}

static void
cbt_begin(CustomScanState *node, EState *estate, int eflags)
{
	CbtLookupState *ls = (CbtLookupState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	ListCell   *lc,
			   *lc2;
	int			k = 0;

	ls->nkeys = list_length(cscan->custom_exprs);
	ls->value = palloc(sizeof(ExprState *) * ls->nkeys);
	ls->is_array = palloc(sizeof(bool) * ls->nkeys);
	ls->nvals = palloc0(sizeof(int) * ls->nkeys);
	ls->vals = palloc0(sizeof(Datum *) * ls->nkeys);
	ls->pos = palloc0(sizeof(int) * ls->nkeys);
	ls->keys = palloc0(sizeof(Datum) * ls->nkeys);
	ls->keynulls = palloc0(sizeof(bool) * ls->nkeys);
	forboth(lc, cscan->custom_exprs, lc2, cscan->custom_private)
	{
		Node	   *clause = lfirst(lc);
		List	   *args = IsA(clause, OpExpr) ? ((OpExpr *) clause)->args :
			castNode(ScalarArrayOpExpr, clause)->args;

		ls->is_array[k] = IsA(clause, ScalarArrayOpExpr);
		ls->value[k] = ExecInitExpr(list_nth(args, lfirst_int(lc2)),
									&node->ss.ps);
		k++;
	}
	ls->keycxt = AllocSetContextCreate(CurrentMemoryContext, "cbt lookup keys",
									   ALLOCSET_DEFAULT_SIZES);
	ls->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "cbt lookup group",
									   ALLOCSET_DEFAULT_SIZES);
}

/*
 * Key k's distinct values (NULLs dropped: they match nothing), as the key
 * column's type, in keycxt.
 */
static void
key_values(CbtLookupState *ls, const CbtRuntime *rt, Relation rel, int k)
{
	ExprContext *econtext = ls->css.ss.ps.ps_ExprContext;
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), rt->input_src[k]);
	const CbtColumn *key = &rt->def->keys[k];
	FmgrInfo   *eq = &lookup_type_cache(key->type, TYPECACHE_EQ_OPR_FINFO)->eq_opr_finfo;
	Oid			vtype = exprType((Node *) ls->value[k]->expr);
	Datum		value;
	bool		isnull;
	Datum	   *elems;
	bool	   *elemnulls;
	int			n;
	MemoryContext old;

	value = ExecEvalExprSwitchContext(ls->value[k], econtext, &isnull);
	old = MemoryContextSwitchTo(ls->keycxt);
	ls->nvals[k] = 0;
	if (isnull)
	{
		MemoryContextSwitchTo(old);
		return;
	}
	if (ls->is_array[k])
	{
		ArrayType  *arr = DatumGetArrayTypeP(value);
		int16		typlen;
		bool		typbyval;
		char		typalign;

		vtype = ARR_ELEMTYPE(arr);
		get_typlenbyvalalign(vtype, &typlen, &typbyval, &typalign);
		deconstruct_array(arr, vtype, typlen, typbyval, typalign, &elems,
						  &elemnulls, &n);
	}
	else
	{
		elems = &value;
		elemnulls = &isnull;
		n = 1;
	}
	ls->vals[k] = palloc(sizeof(Datum) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		Datum		v;
		bool		seen = false;

		if (elemnulls[i])
			continue;
		v = datumCopy(ss_coerce_argument(elems[i], vtype, att->atttypid,
										 att->atttypmod, "key", k + 1,
										 NameStr(att->attname), "a cbt lookup"),
					  att->attbyval, att->attlen);
		for (int j = 0; j < ls->nvals[k] && !seen; j++)
			seen = DatumGetBool(FunctionCall2Coll(eq, key->collation,
												  ls->vals[k][j], v));
		if (!seen)
			ls->vals[k][ls->nvals[k]++] = v;
	}
	MemoryContextSwitchTo(old);
}

/* ExecScanAccessMtd: the next combination's group, if it exists */
static TupleTableSlot *
cbt_lookup_next(ScanState *ss)
{
	CbtLookupState *ls = (CbtLookupState *) ss;
	Relation	rel = ss->ss_currentRelation;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	CbtRuntime *rt = cbt_runtime(rel);

	ExecClearTuple(slot);
	if (!ls->ready)
	{
		ls->ready = true;
		for (int k = 0; k < ls->nkeys; k++)
		{
			key_values(ls, rt, rel, k);
			ls->pos[k] = 0;
			ls->done = ls->done || ls->nvals[k] == 0;
		}
	}
	while (!ls->done)
	{
		HeapTuple	tuple;
		MemoryContext old;
		int			k;

		for (k = 0; k < ls->nkeys; k++)
			ls->keys[k] = ls->vals[k][ls->pos[k]];
		/* the next combination, the last key's values varying fastest */
		for (k = ls->nkeys - 1; k >= 0; k--)
		{
			if (++ls->pos[k] < ls->nvals[k])
				break;
			ls->pos[k] = 0;
		}
		ls->done = k < 0;
		MemoryContextReset(ls->rowcxt);
		old = MemoryContextSwitchTo(ls->rowcxt);
		tuple = cbt_lookup_tuple(rel, RelationGetDescr(rel), ls->keys,
								 ls->keynulls);
		MemoryContextSwitchTo(old);
		if (tuple != NULL)
		{
			ExecForceStoreHeapTuple(tuple, slot, false);
			slot->tts_tableOid = RelationGetRelid(rel);
			return slot;
		}
	}
	return slot;
}

static bool
cbt_lookup_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
cbt_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, cbt_lookup_next, cbt_lookup_recheck);
}

/* (the contexts go with the query's) */
static void
cbt_end(CustomScanState *node)
{
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
}

/* new parameter values (a nested loop's next outer row): new keys */
static void
cbt_rescan(CustomScanState *node)
{
	CbtLookupState *ls = (CbtLookupState *) node;

	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	MemoryContextReset(ls->rowcxt);
	MemoryContextReset(ls->keycxt);
	ls->ready = false;
	ls->done = false;
	ExecScanReScan(&node->ss);
}

static void
cbt_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ss_explain_exprs(node, ancestors, es, "Group Keys",
					 ((CustomScan *) node->ss.ps.plan)->custom_exprs);
}

static const CustomPathMethods cbt_path_methods = {
	.CustomName = "cbt lookup",
	.PlanCustomPath = cbt_plan_path,
};

static const CustomScanMethods cbt_scan_methods = {
	.CustomName = "cbt lookup",
	.CreateCustomScanState = cbt_create_state,
};

static const CustomExecMethods cbt_exec_methods = {
	.CustomName = "cbt lookup",
	.BeginCustomScan = cbt_begin,
	.ExecCustomScan = cbt_exec,
	.EndCustomScan = cbt_end,
	.ReScanCustomScan = cbt_rescan,
	.ExplainCustomScan = cbt_explain,
};

const SSPathOps cbt_path_ops = {
	.add_paths = cbt_add_paths,
	.methods = &cbt_scan_methods,
};
