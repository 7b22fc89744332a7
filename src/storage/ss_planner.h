/*-------------------------------------------------------------------------
 *
 * ss_planner.h
 *	  Plain SQL reads other than the scan: the planner hook that asks a
 *	  structure for its paths (SSStructure.paths), and what structures
 *	  share to build them: matching a qual to a column, the join clauses
 *	  that could parameterize a path, EXPLAIN's lines; and the lookup scan
 *	  they share: key values from constants, parameters or arrays, their
 *	  combinations, a lookup path's cost.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_PLANNER_H
#define SS_PLANNER_H

#include "postgres.h"

#include "commands/explain.h"
#include "catalog/pg_attribute.h"
#include "executor/executor.h"
#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/pathnodes.h"
#include "ss_structure.h"

extern bool ss_enable_lookup_scan;

extern void ss_planner_init(const SSStructure *const *list, int n);

/*
 * A structure's custom path and the scan it plans into, under one name
 * (EXPLAIN's node name, and the key of the scan's registration).
 */
typedef struct SSCustomMethods
{
	CustomPathMethods path;
	CustomScanMethods scan;
} SSCustomMethods;

#define SS_CUSTOM_METHODS(name, plan_fn, create_fn) \
	{ \
		.path = {.CustomName = (name), .PlanCustomPath = (plan_fn)}, \
		.scan = {.CustomName = (name), .CreateCustomScanState = (create_fn)}, \
	}

/*
 * Paths for a function scan (a FROM item that is one function call, as a
 * view over the function leaves it once pulled up): a structure's SQL
 * function whose rows can be read by key (lert_counts) registers, from
 * its init, fn, called for every such base relation when
 * streamsketch.enable_lookup_scan is on, and the CustomScanMethods of the
 * paths fn adds (registered at once, as SSPathOps.methods are).
 */
typedef void (*SSFunctionPathsFn) (PlannerInfo *root, RelOptInfo *rel,
								   RangeTblEntry *rte,
								   RangeTblFunction *rtfunc);

extern void ss_planner_add_function_paths(SSFunctionPathsFn fn,
										  const CustomScanMethods *methods);

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

extern void ss_charge_paths(RelOptInfo *rel, NodeTag pathtype, Cost extra);
extern bool ss_match_column_clause(PlannerInfo *root, RestrictInfo *rinfo,
								   RelOptInfo *rel, SSColumnClause *out);
extern List *ss_column_join_clauses(PlannerInfo *root, RelOptInfo *rel,
									AttrNumber attno);
extern void ss_explain_exprs(CustomScanState *node, List *ancestors,
							 ExplainState *es, const char *label,
							 List *exprs);

/* ---- lookups: key clauses to a path, a path to a plan ---- */

/* Does c select exactly the rows whose key k equals its value? */
typedef bool (*SSKeyClauseFn) (void *arg, int k, const SSColumnClause *c);

extern bool ss_key_equality(const SSColumnClause *c, Oid keytype);
extern bool ss_match_keys(PlannerInfo *root, RelOptInfo *rel, List *clauses,
						  Relids outer, int nkeys, SSKeyClauseFn key_clause,
						  void *arg, SSColumnClause *keys);
extern List *ss_lookup_outers(PlannerInfo *root, RelOptInfo *rel,
							  const AttrNumber *attnos, int nkeys,
							  List **joins);
extern double ss_lookup_count(const SSColumnClause *keys, int nkeys);
/*
 * A custom scan path of rel, parameterized by outer (or none), not
 * parallel-safe, projecting, of as many rows as the parameterization
 * leaves; the caller costs it and adds it.
 */
extern CustomPath *ss_custom_scan_path(PlannerInfo *root, RelOptInfo *rel,
									   Relids outer,
									   const CustomPathMethods *methods);
extern void ss_add_lookup_path(PlannerInfo *root, RelOptInfo *rel,
							   Relids outer, double n, double levels,
							   double pages, Cost extra_cost,
							   const CustomPathMethods *methods);
extern void ss_add_key_lookup_paths(PlannerInfo *root, RelOptInfo *rel,
									const AttrNumber *attnos, int nkeys,
									SSKeyClauseFn key_clause, void *arg,
									double levels, double pages,
									const CustomPathMethods *methods);
extern CustomScan *ss_lookup_plan(RelOptInfo *rel, CustomPath *best_path,
								  List *tlist, List *clauses,
								  const SSColumnClause *keys, int nkeys,
								  const CustomScanMethods *methods);

/* ---- lookups: the scan ---- */

/*
 * A lookup scan's state (a structure's may extend it): per key, the
 * distinct values its clause gives, and the combination to look up next.
 */
typedef struct SSLookupState
{
	CustomScanState css;
	int			nkeys;
	ExprState **value;			/* per key */
	bool	   *is_array;
	MemoryContext keycxt;		/* the keys, until a rescan */
	MemoryContext rowcxt;		/* one lookup's row */
	bool		ready;			/* the keys' values are computed */
	bool		done;
	int		   *nvals;			/* per key: its distinct values */
	Datum	  **vals;
	int		   *pos;			/* the next combination */
	Datum	   *keys;
	bool	   *keynulls;
	ExecScanAccessMtd next;		/* the structure's: the next row */
	const char *label;			/* EXPLAIN's, of the key clauses */
	/* optional: drop what next kept, at a rescan and the end */
	void		(*forget) (struct SSLookupState *ls);
} SSLookupState;

extern Node *ss_lookup_create_state(Size size, ExecScanAccessMtd next,
									const char *label);

/*
 * ExecScanRecheckMtd of a custom scan whose rows need no recheck: they are
 * exactly the rows its clauses select.
 */
extern bool ss_scan_recheck_none(ScanState *ss, TupleTableSlot *slot);
extern void ss_lookup_key_values(SSLookupState *ls, int k,
								 Form_pg_attribute att, Oid collation,
								 const char *fname);
extern bool ss_lookup_next_keys(SSLookupState *ls);


#endif							/* SS_PLANNER_H */
