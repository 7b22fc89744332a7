/*-------------------------------------------------------------------------
 *
 * ss_planner.c
 *	  Plain SQL reads other than the scan.  A set_rel_pathlist_hook, chained
 *	  to any earlier one, asks a base relation's structure for its paths
 *	  (SSStructure.paths): CustomPaths that read only what some quals
 *	  select (a cbt's groups by their keys), costed against the scan, which
 *	  stays the fallback.  Their CustomScanMethods are registered at load,
 *	  so that plans survive copying and reading back (plan cache, parallel
 *	  workers).  streamsketch.enable_lookup_scan = off adds none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "ss_planner.h"
#include "streamsketch.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

bool		ss_enable_lookup_scan = true;

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

static void
ss_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
					RangeTblEntry *rte)
{
	Relation	relation;
	const SSStructure *s;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);

	/* a plain table (not an inheritance parent), not sampled */
	if (!ss_enable_lookup_scan || rte->rtekind != RTE_RELATION ||
		rte->relkind != RELKIND_RELATION || rte->inh ||
		rte->tablesample != NULL || !IS_SIMPLE_REL(rel) || IS_DUMMY_REL(rel))
		return;

	/* the planner holds a lock on it already */
	relation = table_open(rte->relid, NoLock);
	s = ss_structure_ops(relation);
	if (s != NULL && s->paths != NULL)
		s->paths->add_paths(root, rel, rte, relation);
	table_close(relation, NoLock);
}

void
ss_planner_init(const SSStructure *const *list, int n)
{
	DefineCustomBoolVariable("streamsketch.enable_lookup_scan",
							 "Lets the planner read a structure's rows by their keys.",
							 "Off, plain SQL reads of structures scan every row.",
							 &ss_enable_lookup_scan, true, PGC_USERSET, 0,
							 NULL, NULL, NULL);
	for (int i = 0; i < n; i++)
		if (list[i]->paths != NULL)
			RegisterCustomScanMethods(list[i]->paths->methods);
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = ss_set_rel_pathlist;
}

/* Is expr a column of rel (under binary-compatible relabeling)? */
static AttrNumber
column_of(Node *expr, RelOptInfo *rel)
{
	while (expr && IsA(expr, RelabelType))
		expr = (Node *) ((RelabelType *) expr)->arg;
	if (expr && IsA(expr, Var) && ((Var *) expr)->varno == rel->relid &&
		((Var *) expr)->varlevelsup == 0 && ((Var *) expr)->varattno > 0)
		return ((Var *) expr)->varattno;
	return InvalidAttrNumber;
}

/*
 * Can value be computed before the relation is read: no column of it,
 * nothing volatile, no aggregate or subplan of this level?
 */
static bool
usable_value(PlannerInfo *root, Node *value, RelOptInfo *rel, Relids *outer)
{
	Relids		varnos;

	if (contain_volatile_functions(value) || contain_subplans(value))
		return false;
	varnos = pull_varnos(root, value);
	if (bms_overlap(varnos, rel->relids))
		return false;
	*outer = varnos;
	return true;
}

bool
ss_match_column_clause(PlannerInfo *root, RestrictInfo *rinfo,
					   RelOptInfo *rel, SSColumnClause *out)
{
	Expr	   *clause = rinfo->clause;

	memset(out, 0, sizeof(*out));
	out->rinfo = rinfo;

	/*
	 * The read applies the qual before any other: as an index scan, only
	 * one that may go before the quals of row-level security.
	 */
	if (rinfo->pseudoconstant || !restriction_is_securely_promotable(rinfo, rel))
		return false;
	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) clause;
		Node	   *left = linitial(op->args);
		Node	   *right = lsecond(op->args);

		out->opno = op->opno;
		out->inputcollid = op->inputcollid;
		if ((out->attno = column_of(left, rel)) != InvalidAttrNumber)
			out->value = (Expr *) right;
		else if ((out->attno = column_of(right, rel)) != InvalidAttrNumber)
		{
			out->value = (Expr *) left;
			out->value_on_left = true;
			out->opno = get_commutator(op->opno);
			if (!OidIsValid(out->opno))
				return false;
		}
		else
			return false;
	}
	else if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *saop = (ScalarArrayOpExpr *) clause;

		if (!saop->useOr || list_length(saop->args) != 2 ||
			(out->attno = column_of(linitial(saop->args), rel)) == InvalidAttrNumber)
			return false;
		out->opno = saop->opno;
		out->inputcollid = saop->inputcollid;
		out->value = (Expr *) lsecond(saop->args);
		out->is_array = true;
	}
	else
		return false;
	op_input_types(out->opno, &out->lefttype, &out->righttype);
	return usable_value(root, (Node *) out->value, rel, &out->outer_relids);
}

/* ec_matches_callback_type: the member is the column (of arg) */
static bool
ec_member_is_column(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec,
					EquivalenceMember *em, void *arg)
{
	return column_of((Node *) em->em_expr, rel) == *(AttrNumber *) arg;
}

/*
 * The join clauses that could bring a column of rel a value from other
 * relations, for a path parameterized by them: those the equivalence
 * classes imply, and the others that can be moved to rel.  The caller
 * matches them with ss_match_column_clause.
 */
List *
ss_column_join_clauses(PlannerInfo *root, RelOptInfo *rel, AttrNumber attno)
{
	List	   *result;
	ListCell   *lc;

	result = generate_implied_equalities_for_column(root, rel,
													ec_member_is_column,
													&attno,
													rel->lateral_referencers);
	foreach(lc, rel->joininfo)
	{
		RestrictInfo *rinfo = lfirst_node(RestrictInfo, lc);

		if (join_clause_is_movable_to(rinfo, rel))
			result = lappend(result, rinfo);
	}
	return result;
}

/* EXPLAIN's line label: exprs (a plan's, ANDed) as SQL, as quals show. */
void
ss_explain_exprs(CustomScanState *node, List *ancestors, ExplainState *es,
				 const char *label, List *exprs)
{
	List	   *context;

	if (exprs == NIL)
		return;
	context = set_deparse_context_plan(es->deparse_cxt, node->ss.ps.plan,
									   ancestors);
	ExplainPropertyText(label,
						deparse_expression((Node *) make_ands_explicit(exprs),
										   context, es->verbose, false),
						es);
}
