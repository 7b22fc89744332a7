/*-------------------------------------------------------------------------
 *
 * bfile_path.c
 *	  The bfile's plain SQL time ranges (SSStructure.paths): a query whose
 *	  quals bound the time column (`BETWEEN`, `<`, `<=`, `=`, `>=`, `>`,
 *	  several intersected) reads the rows of that window through each
 *	  bucket's skip list, as bfile_window does, instead of scanning the
 *	  whole sample (docs/bfile.md, "Plain SQL").  The bounds are constants,
 *	  parameters or, for a path parameterized by other relations, their
 *	  columns (a nested loop reads a window per outer row).  The other
 *	  quals filter the rows found.
 *
 * A qual is used only where the window selects exactly the rows it
 * passes: its operator is of the btree family of the time column's type,
 * the column's type on its left, and its other side of the same type or,
 * for an integer column, of any integer type (every integer converts to
 * the int64 key exactly).  The time key (bfile_time_key) orders values as
 * the column's btree operators do, infinities included.  A NULL bound
 * selects nothing, as the qual does.
 *
 * A bfile without a time column orders its rows by their position in the
 * stream, which SQL cannot name: it has no path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/stratnum.h"
#include "access/table.h"
#include "bfile.h"
#include "bfile_am.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "ss_planner.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

static const SSCustomMethods bfile_methods;

/* A qual that bounds the time column: its clause and its btree strategy. */
typedef struct TimeBound
{
	SSColumnClause c;
	int			strategy;		/* BTLessStrategyNumber .. BTGreater... */
} TimeBound;

static bool
integer_type(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

/* The strategy of c as a bound of the time column att, or 0. */
static int
time_strategy(Form_pg_attribute att, const SSColumnClause *c)
{
	Oid			coltype = att->atttypid;
	Oid			vt = exprType((Node *) c->value);
	TypeCacheEntry *tc;

	if (c->attno != att->attnum || c->is_array || c->lefttype != coltype)
		return 0;
	if (!(vt == c->righttype &&
		  (vt == coltype || (integer_type(coltype) && integer_type(vt)))))
		return 0;
	tc = lookup_type_cache(coltype, TYPECACHE_BTREE_OPFAMILY);
	if (!OidIsValid(tc->btree_opf))
		return 0;
	return get_op_opfamily_strategy(c->opno, tc->btree_opf);
}

/*
 * The bounds among clauses (RestrictInfos) whose values reference only
 * relations in outer; *outer_used: one of them references some.
 */
static List *
time_bounds(PlannerInfo *root, RelOptInfo *rel, Form_pg_attribute att,
			List *clauses, Relids outer, bool *outer_used)
{
	List	   *bounds = NIL;
	ListCell   *lc;

	*outer_used = false;
	foreach(lc, clauses)
	{
		TimeBound  *b = palloc(sizeof(TimeBound));

		if (!ss_match_column_clause(root, lfirst_node(RestrictInfo, lc), rel, &b->c) ||
			!bms_is_subset(b->c.outer_relids, outer) ||
			(b->strategy = time_strategy(att, &b->c)) == 0)
		{
			pfree(b);
			continue;
		}
		*outer_used = *outer_used || !bms_is_empty(b->c.outer_relids);
		bounds = lappend(bounds, b);
	}
	return bounds;
}

/*
 * Pages the window reads of a bucket of `pages` pages, keys in chain
 * order, for a fraction sel of its rows: the newest page, the skip
 * pointers followed (about log4 of the pages: a page has skip level k
 * with probability 4^-(k-1)), the pages of the window and the one below
 * it.  A bucket whose keys came out of order is read whole.
 */
static double
bucket_pages(const BfileBucket *b, double sel)
{
	double		p = b->pages;

	if (b->head == InvalidBlockNumber || p == 0)
		return 0;
	if (b->unordered)
		return p;
	return Min(p, 2 + ceil(log(p) / log(4)) + sel * p);
}

static void
add_window_path(PlannerInfo *root, RelOptInfo *rel, Relation relation,
				List *bounds, Relids outer)
{
	CustomPath *cp;
	BfileMeta  *m = palloc(sizeof(BfileMeta));
	List	   *rinfos = NIL;
	ListCell   *lc;
	double		sel;
	double		pages = 0;
	double		items = 0;
	QualCost	qcost;

	foreach(lc, bounds)
		rinfos = lappend(rinfos, ((TimeBound *) lfirst(lc))->c.rinfo);
	/* (other relations' columns count as constants) */
	sel = clauselist_selectivity(root, rinfos, rel->relid, JOIN_INNER, NULL);

	/*
	 * Each bucket's pages read, from the metapage; without one, a share of
	 * the relation's.  The scan reads every bucket's chain in the same
	 * order, costed as rel->pages sequential reads: so are these.
	 */
	if (ss_read_structure_meta(relation, &bfile_structure, m))
	{
		for (uint32 i = 0; i < m->nbuckets_live; i++)
		{
			pages += bucket_pages(&m->buckets[i], sel);
			items += m->buckets[i].items * (bucket_pages(&m->buckets[i], sel) /
											Max(m->buckets[i].pages, 1));
		}
		pages += bucket_pages(&m->tail, sel);
		items += m->tail.items * (bucket_pages(&m->tail, sel) /
								  Max(m->tail.pages, 1));
	}
	else
	{
		pages = sel * rel->pages;
		items = sel * rel->tuples;
	}
	pfree(m);

	cp = ss_custom_scan_path(root, rel, outer, &bfile_methods.path);

	/*
	 * The window is read whole before its first row (into a tuplestore):
	 * its pages, a key test per item on them, a row stored and fetched
	 * per row in the window; then the remaining quals per row.
	 */
	cost_qual_eval(&qcost, rel->baserestrictinfo, root);
	cp->path.startup_cost = qcost.startup + pages * seq_page_cost +
		items * cpu_operator_cost +
		clamp_row_est(sel * rel->tuples) * cpu_tuple_cost;
	cp->path.total_cost = cp->path.startup_cost +
		clamp_row_est(sel * rel->tuples) * (cpu_tuple_cost + qcost.per_tuple) +
		cp->path.rows * rel->reltarget->cost.per_tuple;
	add_path(rel, &cp->path);
}

/* SSPathOps.add_paths */
static void
bfile_add_paths(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte,
				Relation relation)
{
	int32		t = bfile_get_state(relation)->params.time_attnum;
	AttrNumber	time_attno = t;
	Form_pg_attribute att;
	List	   *bounds;
	List	   *joins;
	List	   *outers;
	ListCell   *lc;
	bool		outer_used;

	if (t <= 0)
		return;
	att = TupleDescAttr(RelationGetDescr(relation), t - 1);
	bounds = time_bounds(root, rel, att, rel->baserestrictinfo, NULL, &outer_used);
	if (bounds != NIL)
		add_window_path(root, rel, relation, bounds, NULL);

	/* one path per set of other relations whose columns give bounds */
	outers = ss_lookup_outers(root, rel, &time_attno, 1, &joins);
	foreach(lc, outers)
	{
		Relids		outer = (Relids) lfirst(lc);

		bounds = time_bounds(root, rel, att,
							 list_concat_copy(rel->baserestrictinfo, joins),
							 outer, &outer_used);
		if (outer_used)
			add_window_path(root, rel, relation, bounds, outer);
	}
}

/*
 * CustomPathMethods.PlanCustomPath: custom_exprs are the bounding clauses
 * (EXPLAIN shows them), custom_private per clause the argument that holds
 * the bound (ss_lookup_plan), then per clause its strategy; the other
 * clauses are the plan's quals, in their order (row-level security's
 * first).
 */
static Plan *
bfile_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				List *tlist, List *clauses, List *custom_plans)
{
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	Relation	relation = table_open(rte->relid, NoLock);
	int32		t = bfile_get_state(relation)->params.time_attnum;
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(relation), t - 1);
	List	   *bounds;
	SSColumnClause *used;
	CustomScan *cscan;
	ListCell   *lc;
	bool		outer_used;
	int			k = 0;

	bounds = time_bounds(root, rel, att, clauses,
						 PATH_REQ_OUTER(&best_path->path), &outer_used);
	table_close(relation, NoLock);
	if (bounds == NIL)
		elog(ERROR, "bfile window path lost its time bounds");
	used = palloc(sizeof(SSColumnClause) * list_length(bounds));
	foreach(lc, bounds)
		used[k++] = ((TimeBound *) lfirst(lc))->c;
	cscan = ss_lookup_plan(rel, best_path, tlist, clauses, used, k,
						   &bfile_methods.scan);
	foreach(lc, bounds)
		cscan->custom_private = lappend_int(cscan->custom_private,
											((TimeBound *) lfirst(lc))->strategy);
	return &cscan->scan.plan;
}

/*
 * The lookup state (ss_planner.h) evaluates the bounds' values (its keys);
 * the window of rows they give is read once per scan or rescan.
 */
typedef struct BfileWindowState
{
	SSLookupState ls;
	Tuplestorestate *rows;		/* in ls.keycxt; NULL: not read yet */
	TupleTableSlot *row_slot;
} BfileWindowState;

/*
 * The window [*lo, *hi] the bounds give, as time keys; false if empty
 * (a NULL bound, or bounds that exclude each other).  The bounds'
 * strategies follow their argument numbers in custom_private
 * (bfile_plan_path).
 */
static bool
window_bounds(BfileWindowState *ws, int64 *lo, int64 *hi)
{
	ExprContext *econtext = ws->ls.css.ss.ps.ps_ExprContext;
	List	   *private = ((CustomScan *) ws->ls.css.ss.ps.plan)->custom_private;
	int			nbounds = ws->ls.nkeys;

	*lo = PG_INT64_MIN;
	*hi = PG_INT64_MAX;
	for (int k = 0; k < nbounds; k++)
	{
		bool		isnull;
		Datum		d = ExecEvalExprSwitchContext(ws->ls.value[k], econtext,
												  &isnull);
		int			strategy = list_nth_int(private, nbounds + k);
		int64		key;

		if (isnull)
			return false;
		key = bfile_time_key(exprType((Node *) ws->ls.value[k]->expr), d);
		switch (strategy)
		{
			case BTLessStrategyNumber:
				if (key == PG_INT64_MIN)
					return false;
				*hi = Min(*hi, key - 1);
				break;
			case BTLessEqualStrategyNumber:
				*hi = Min(*hi, key);
				break;
			case BTEqualStrategyNumber:
				*lo = Max(*lo, key);
				*hi = Min(*hi, key);
				break;
			case BTGreaterEqualStrategyNumber:
				*lo = Max(*lo, key);
				break;
			case BTGreaterStrategyNumber:
				if (key == PG_INT64_MAX)
					return false;
				*lo = Max(*lo, key + 1);
				break;
			default:
				elog(ERROR, "unexpected strategy %d of a bfile window bound",
					 strategy);
		}
	}
	return *lo <= *hi;
}

/* ExecScanAccessMtd: the window's next row */
static TupleTableSlot *
bfile_window_next(ScanState *ss)
{
	BfileWindowState *ws = (BfileWindowState *) ss;
	Relation	rel = ss->ss_currentRelation;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;

	ExecClearTuple(slot);
	if (ws->row_slot == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(ss->ps.state->es_query_cxt);

		ws->row_slot = ExecAllocTableSlot(&ss->ps.state->es_tupleTable,
										  RelationGetDescr(rel),
										  &TTSOpsMinimalTuple);
		MemoryContextSwitchTo(old);
	}
	if (ws->rows == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(ws->ls.keycxt);
		int64		lo,
					hi;

		ws->rows = tuplestore_begin_heap(false, false, work_mem);
		if (window_bounds(ws, &lo, &hi))
			bfile_window_rows(rel, lo, hi, RelationGetDescr(rel), ws->rows);
		MemoryContextSwitchTo(old);
	}
	if (tuplestore_gettupleslot(ws->rows, true, false, ws->row_slot))
		ExecCopySlot(slot, ws->row_slot);
	return slot;
}

/* SSLookupState.forget: the window's rows (a temporary file too) */
static void
window_forget(SSLookupState *ls)
{
	BfileWindowState *ws = (BfileWindowState *) ls;

	if (ws->rows)
		tuplestore_end(ws->rows);
	ws->rows = NULL;
	if (ws->row_slot)
		ExecClearTuple(ws->row_slot);
}

static Node *
bfile_create_state(CustomScan *cscan)
{
	BfileWindowState *ws = (BfileWindowState *)
		ss_lookup_create_state(sizeof(BfileWindowState), bfile_window_next,
							   "Time Range");

	ws->ls.forget = window_forget;
	return (Node *) ws;
}

static const SSCustomMethods bfile_methods =
	SS_CUSTOM_METHODS("bfile window", bfile_plan_path, bfile_create_state);

const SSPathOps bfile_path_ops = {
	.add_paths = bfile_add_paths,
	.methods = &bfile_methods.scan,
};
