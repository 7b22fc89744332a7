/*-------------------------------------------------------------------------
 *
 * ss_planner.c
 *	  Plain SQL reads other than the scan.  A set_rel_pathlist_hook, chained
 *	  to any earlier one, asks a base relation's structure for its paths
 *	  (SSStructure.paths): CustomPaths that read only what some quals
 *	  select (a cbt's groups, a lert's reported keys, by their keys),
 *	  costed against the scan, which stays the fallback.  Their
 *	  CustomScanMethods are registered at load, so that plans survive
 *	  copying and reading back (plan cache, parallel workers); their
 *	  execution is shared (SSLookupState).  streamsketch.enable_lookup_scan
 *	  = off adds none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_coerce.h"
#include "ss_planner.h"
#include "ss_sqlfunc.h"
#include "streamsketch.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"

bool		ss_enable_lookup_scan = true;

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

/* ss_planner_add_function_paths's */
#define SS_MAX_FUNCTION_PATHS	4
static SSFunctionPathsFn function_paths[SS_MAX_FUNCTION_PATHS];
static int	nfunction_paths = 0;

/*
 * The paths of type pathtype core built for rel, dearer by extra: removed
 * and added again, so that the list stays in cost order.
 */
void
ss_charge_paths(RelOptInfo *rel, NodeTag pathtype, Cost extra)
{
	List	   *scans = NIL;
	ListCell   *lc;

	foreach(lc, rel->pathlist)
		if (((Path *) lfirst(lc))->pathtype == pathtype)
			scans = lappend(scans, lfirst(lc));
	foreach(lc, scans)
	{
		Path	   *p = (Path *) lfirst(lc);

		rel->pathlist = list_delete_ptr(rel->pathlist, p);
		p->total_cost += extra;
		add_path(rel, p);
	}
	list_free(scans);
}

/*
 * One participant of a parallel scan produces all of a structure's rows
 * (ss_scan_claim): a Parallel Seq Scan of it divides no work, while its
 * cost, divided among the workers, would draw parallel plans for nothing.
 */
static void
drop_partial_scans(RelOptInfo *rel)
{
	ListCell   *lc;

	foreach(lc, rel->partial_pathlist)
		if (((Path *) lfirst(lc))->pathtype == T_SeqScan)
			rel->partial_pathlist = foreach_delete_current(rel->partial_pathlist, lc);
}

static void
ss_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
					RangeTblEntry *rte)
{
	Relation	relation;
	const SSStructure *s;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);

	/* one function's rows, without WITH ORDINALITY */
	if (rte->rtekind == RTE_FUNCTION && list_length(rte->functions) == 1 &&
		!rte->funcordinality && IS_SIMPLE_REL(rel) && !IS_DUMMY_REL(rel) &&
		ss_enable_lookup_scan)
	{
		for (int i = 0; i < nfunction_paths; i++)
			function_paths[i] (root, rel, rte,
							   linitial_node(RangeTblFunction, rte->functions));
		return;
	}

	/* a plain table (not an inheritance parent), not sampled */
	if (rte->rtekind != RTE_RELATION ||
		rte->relkind != RELKIND_RELATION || rte->inh ||
		rte->tablesample != NULL || !IS_SIMPLE_REL(rel) || IS_DUMMY_REL(rel))
		return;

	/* the planner holds a lock on it already */
	relation = table_open(rte->relid, NoLock);
	s = ss_structure_ops(relation);
	if (s != NULL && s->scan != NULL)
		drop_partial_scans(rel);
	if (s != NULL && s->paths != NULL)
	{
		/* the sequential scan, dearer by its CPU per row */
		if (s->paths->scan_row_cost != NULL)
			ss_charge_paths(rel, T_SeqScan,
							s->paths->scan_row_cost(relation) * rel->tuples);
		if (ss_enable_lookup_scan)
			s->paths->add_paths(root, rel, rte, relation);
	}
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

void
ss_planner_add_function_paths(SSFunctionPathsFn fn,
							  const CustomScanMethods *methods)
{
	if (nfunction_paths >= SS_MAX_FUNCTION_PATHS)
		elog(ERROR, "too many function paths registered");
	function_paths[nfunction_paths++] = fn;
	RegisterCustomScanMethods(methods);
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

/* ---- lookups: key clauses to a path, a path to a plan ---- */

/* elements assumed in an array that is not a constant */
#define LOOKUP_ARRAY_GUESS	10

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

/*
 * Is c's operator the equality of keytype, or a cross-type equality of
 * its btree family, whose value becomes a key exactly?  (Collations are
 * the caller's to check.)
 */
bool
ss_key_equality(const SSColumnClause *c, Oid keytype)
{
	TypeCacheEntry *tc;
	Oid			vt = value_type(c);
	Oid			funcid;

	if (!OidIsValid(vt))
		return false;
	tc = lookup_type_cache(keytype, TYPECACHE_EQ_OPR | TYPECACHE_BTREE_OPFAMILY);
	if (c->opno != tc->eq_opr &&
		(!OidIsValid(tc->btree_opf) ||
		 get_op_opfamily_strategy(c->opno, tc->btree_opf) != BTEqualStrategyNumber ||
		 !IsBinaryCoercible(keytype, c->lefttype)))
		return false;

	/*
	 * The value becomes a key as a lookup function's arguments do, by an
	 * implicit cast: one that can neither fail nor change the value, so
	 * that the lookup finds what the operator would (a date's cast to
	 * timestamp can fail where date = timestamp is false).
	 */
	if (vt != keytype &&
		find_coercion_pathway(keytype, vt, COERCION_IMPLICIT,
							  &funcid) != COERCION_PATH_RELABELTYPE &&
		!exact_widening(vt, keytype))
		return false;
	return true;
}

/*
 * Pick, for every key, a clause of clauses (RestrictInfos) whose value
 * references only relations in outer and that key_clause accepts: an
 * equality rather than an array.  Returns false unless every key has one.
 */
bool
ss_match_keys(PlannerInfo *root, RelOptInfo *rel, List *clauses,
			  Relids outer, int nkeys, SSKeyClauseFn key_clause, void *arg,
			  SSColumnClause *keys)
{
	ListCell   *lc;
	bool		all = true;

	for (int k = 0; k < nkeys; k++)
		keys[k].rinfo = NULL;
	foreach(lc, clauses)
	{
		SSColumnClause c;

		if (!ss_match_column_clause(root, lfirst_node(RestrictInfo, lc), rel, &c) ||
			!bms_is_subset(c.outer_relids, outer))
			continue;
		for (int k = 0; k < nkeys; k++)
			if ((keys[k].rinfo == NULL || (keys[k].is_array && !c.is_array)) &&
				key_clause(arg, k, &c))
				keys[k] = c;
	}
	for (int k = 0; k < nkeys; k++)
		all = all && keys[k].rinfo != NULL;
	return all;
}

/*
 * The sets of other relations whose columns give the keys (columns
 * attnos) values, one path to try for each; *joins, the join clauses to
 * match with the base restrictions.
 */
List *
ss_lookup_outers(PlannerInfo *root, RelOptInfo *rel, const AttrNumber *attnos,
				 int nkeys, List **joins)
{
	List	   *outers = NIL;
	ListCell   *lc;

	*joins = NIL;
	for (int k = 0; k < nkeys; k++)
		*joins = list_concat(*joins, ss_column_join_clauses(root, rel, attnos[k]));
	foreach(lc, *joins)
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
	return outers;
}

/* Lookups the keys make: the product of their arrays' lengths. */
double
ss_lookup_count(const SSColumnClause *keys, int nkeys)
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

/*
 * How often a path parameterized by outer runs: the fewest rows any of
 * those relations has (as the planner's own index paths assume).
 */
static double
outer_loops(PlannerInfo *root, Relids outer)
{
	double		loops = 0;
	int			relid = -1;

	while ((relid = bms_next_member(outer, relid)) >= 0)
	{
		RelOptInfo *o = relid < root->simple_rel_array_size ?
		root->simple_rel_array[relid] : NULL;

		if (o != NULL && o->reloptkind == RELOPT_BASEREL &&
			(loops == 0 || o->rows < loops))
			loops = o->rows;
	}
	return Max(loops, 1);
}

CustomPath *
ss_custom_scan_path(PlannerInfo *root, RelOptInfo *rel, Relids outer,
					const CustomPathMethods *methods)
{
	CustomPath *cp = makeNode(CustomPath);

	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = rel->reltarget;
	cp->path.param_info =
		get_baserel_parampathinfo(root, rel,
								  bms_union(outer, rel->lateral_relids));
	cp->path.parallel_aware = false;
	/* a worker lacks the leader's pending rows, which the scan reads */
	cp->path.parallel_safe = false;
	cp->path.rows = cp->path.param_info ? cp->path.param_info->ppi_rows :
		rel->rows;
	/* ExecScan projects */
	cp->flags = CUSTOMPATH_SUPPORT_PROJECTION;
	cp->methods = methods;
	return cp;
}

/*
 * Add a lookup path of n lookups, parameterized by outer (or none), plus
 * extra_cost once per scan.  Each lookup descends levels pages that all
 * lookups share (charged as CPU, as btree charges its descent) and reads
 * pages of its own at random; over the repeated scans of a nested loop
 * those reads are counted as the planner counts an index's
 * (index_pages_fetched: the relation's pages, effective_cache_size), so
 * that many lookups into a small structure cost no more than reading it.
 */
void
ss_add_lookup_path(PlannerInfo *root, RelOptInfo *rel, Relids outer,
				   double n, double levels, double pages, Cost extra_cost,
				   const CustomPathMethods *methods)
{
	CustomPath *cp = ss_custom_scan_path(root, rel, outer, methods);
	double		loops = outer_loops(root, PATH_REQ_OUTER(&cp->path));
	double		fetched;
	QualCost	qcost;

	cp->path.rows = clamp_row_est(Min(n, cp->path.rows));
	fetched = index_pages_fetched(n * pages * loops, Max(rel->pages, 1),
								  Max(rel->pages, 1), root) / loops;
	cost_qual_eval(&qcost, rel->baserestrictinfo, root);
	cp->path.startup_cost = qcost.startup;
	cp->path.total_cost = qcost.startup +
		fetched * random_page_cost +
		n * ((levels + 1) * 50.0 * cpu_operator_cost + cpu_tuple_cost) +
		cp->path.rows * (qcost.per_tuple + rel->reltarget->cost.per_tuple) +
		extra_cost;
	add_path(rel, &cp->path);
}

/*
 * A structure's lookup paths by equality on keys (columns attnos, matched
 * by key_clause with arg, as ss_match_keys): one where the base
 * restrictions give every key its values, and one per set of other
 * relations whose columns give them (ss_lookup_outers), each lookup
 * costed as ss_add_lookup_path costs it.
 */
void
ss_add_key_lookup_paths(PlannerInfo *root, RelOptInfo *rel,
						const AttrNumber *attnos, int nkeys,
						SSKeyClauseFn key_clause, void *arg,
						double levels, double pages,
						const CustomPathMethods *methods)
{
	SSColumnClause *keys = palloc(sizeof(SSColumnClause) * nkeys);
	List	   *joins;
	List	   *outers;
	ListCell   *lc;

	if (ss_match_keys(root, rel, rel->baserestrictinfo, NULL, nkeys,
					  key_clause, arg, keys))
		ss_add_lookup_path(root, rel, NULL, ss_lookup_count(keys, nkeys),
						   levels, pages, 0, methods);
	outers = ss_lookup_outers(root, rel, attnos, nkeys, &joins);
	foreach(lc, outers)
	{
		Relids		outer = (Relids) lfirst(lc);

		if (ss_match_keys(root, rel,
						  list_concat_copy(rel->baserestrictinfo, joins),
						  outer, nkeys, key_clause, arg, keys))
			ss_add_lookup_path(root, rel, outer, ss_lookup_count(keys, nkeys),
							   levels, pages, 0, methods);
	}
}

/*
 * A lookup path's plan: custom_exprs are the key clauses, in key order
 * (EXPLAIN shows them), custom_private the argument of each that holds
 * the value (a structure may append its own items); the other clauses are
 * the plan's quals.
 */
CustomScan *
ss_lookup_plan(RelOptInfo *rel, CustomPath *best_path, List *tlist,
			   List *clauses, const SSColumnClause *keys, int nkeys,
			   const CustomScanMethods *methods)
{
	CustomScan *cscan = makeNode(CustomScan);
	List	   *used = NIL;

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
	cscan->methods = methods;
	return cscan;
}

/* ---- lookups: the scan ---- */

static const CustomExecMethods lookup_exec_methods;

/*
 * CustomScanMethods.CreateCustomScanState of a state of size bytes, whose
 * rows next returns and whose key clauses EXPLAIN shows under label.
 */
Node *
ss_lookup_create_state(Size size, ExecScanAccessMtd next, const char *label)
{
	SSLookupState *ls = (SSLookupState *) newNode(size, T_CustomScanState);

	Assert(size >= sizeof(SSLookupState));
	ls->css.methods = &lookup_exec_methods;
	ls->next = next;
	ls->label = label;
	return (Node *) ls;
}

static void
lookup_begin(CustomScanState *node, EState *estate, int eflags)
{
	SSLookupState *ls = (SSLookupState *) node;
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
	/* (custom_private may go on past the keys: forboth stops at them) */
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
	ls->keycxt = AllocSetContextCreate(CurrentMemoryContext, "lookup keys",
									   ALLOCSET_DEFAULT_SIZES);
	ls->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "lookup row",
									   ALLOCSET_DEFAULT_SIZES);
}

/*
 * Key k's distinct values (NULLs dropped: they match nothing), as the type
 * of column att, compared with collation, in keycxt.  A key without
 * values leaves nothing to look up.  fname names the lookup in errors.
 */
void
ss_lookup_key_values(SSLookupState *ls, int k, Form_pg_attribute att,
					 Oid collation, const char *fname)
{
	ExprContext *econtext = ls->css.ss.ps.ps_ExprContext;
	FmgrInfo   *eq = &lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR_FINFO)->eq_opr_finfo;
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
	ls->pos[k] = 0;
	if (isnull)
	{
		MemoryContextSwitchTo(old);
		ls->done = true;
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
										 NameStr(att->attname), fname),
					  att->attbyval, att->attlen);
		for (int j = 0; j < ls->nvals[k] && !seen; j++)
			seen = DatumGetBool(FunctionCall2Coll(eq, collation,
												  ls->vals[k][j], v));
		if (!seen)
			ls->vals[k][ls->nvals[k]++] = v;
	}
	MemoryContextSwitchTo(old);
	ls->done = ls->done || ls->nvals[k] == 0;
}

/*
 * The next combination of the keys' values into ls->keys (the last key's
 * values varying fastest), rowcxt reset for its lookup; false after the
 * last.
 */
bool
ss_lookup_next_keys(SSLookupState *ls)
{
	int			k;

	if (ls->done)
		return false;
	for (k = 0; k < ls->nkeys; k++)
		ls->keys[k] = ls->vals[k][ls->pos[k]];
	for (k = ls->nkeys - 1; k >= 0; k--)
	{
		if (++ls->pos[k] < ls->nvals[k])
			break;
		ls->pos[k] = 0;
	}
	ls->done = k < 0;
	MemoryContextReset(ls->rowcxt);
	return true;
}

bool
ss_scan_recheck_none(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

/* ExecScanAccessMtd: the structure's next row, of the relation */
static TupleTableSlot *
lookup_next(ScanState *ss)
{
	TupleTableSlot *slot = ((SSLookupState *) ss)->next(ss);

	/* (a function scan's rows come from no relation) */
	if (!TupIsNull(slot) && ss->ss_currentRelation != NULL)
		slot->tts_tableOid = RelationGetRelid(ss->ss_currentRelation);
	return slot;
}

static TupleTableSlot *
lookup_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, lookup_next, ss_scan_recheck_none);
}

/* (the contexts go with the query's) */
static void
lookup_end(CustomScanState *node)
{
	SSLookupState *ls = (SSLookupState *) node;

	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (ls->forget)
		ls->forget(ls);
}

/* new parameter values (a nested loop's next outer row): new keys */
static void
lookup_rescan(CustomScanState *node)
{
	SSLookupState *ls = (SSLookupState *) node;

	lookup_end(node);
	MemoryContextReset(ls->rowcxt);
	MemoryContextReset(ls->keycxt);
	ls->ready = false;
	ls->done = false;
	ExecScanReScan(&node->ss);
}

static void
lookup_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	ss_explain_exprs(node, ancestors, es, ((SSLookupState *) node)->label,
					 ((CustomScan *) node->ss.ps.plan)->custom_exprs);
}

/* (EXPLAIN names the node by the plan's CustomScanMethods) */
static const CustomExecMethods lookup_exec_methods = {
	.CustomName = "streamsketch lookup",
	.BeginCustomScan = lookup_begin,
	.ExecCustomScan = lookup_exec,
	.EndCustomScan = lookup_end,
	.ReScanCustomScan = lookup_rescan,
	.ExplainCustomScan = lookup_explain,
};
