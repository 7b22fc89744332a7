/*-------------------------------------------------------------------------
 *
 * cbt_def.c
 *	  Resolving a compressed buffer tree's definition (see cbt_def.h).
 *
 * Nothing of the user's text is pasted into other SQL: the group keys and
 * the select list are parsed on their own, and the query that is analyzed
 * is assembled from their parse trees, so a definition cannot smuggle a
 * FROM clause or a second statement in.  Parse analysis then resolves
 * every function, operator and type exactly as in a query, and its result
 * is checked node by node before anything is taken from it.
 *
 * Names are resolved once: by cbt_create with the caller's search_path,
 * as CREATE VIEW does, and when a dump's label is restored, from its
 * qualified text with search_path pinned to pg_catalog, pg_temp (the
 * session's temporary schema last, so that it cannot shadow a type).
 * Afterwards the definition is its bound query (cbt_def_from_tree).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_proc.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_type.h"
#include "cbt_def.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parse_agg.h"
#include "parser/parse_coerce.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "streamsketch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#define CBT_INPUT_ALIAS		"cbt_input"

/* ---- the user's text ---- */

/* The group keys: a column list as CREATE TABLE takes it, nothing more. */
static List *
parse_group_by(const char *group_by)
{
	return ss_parse_column_list(group_by, "group_by list",
								"List the group keys as columns: 'url text, day date'.");
}

typedef struct InputScan
{
	List	   *names;			/* declared inputs, in order of declaration */
	List	   *types;			/* their TypeNames */
	List	   *refs;			/* every name referred to */
} InputScan;

/* Find the inputs declared (name::type) and referred to in a select list. */
static bool
scan_inputs(Node *node, InputScan *scan)
{
	if (node == NULL)
		return false;
	if (IsA(node, TypeCast) && ((TypeCast *) node)->arg &&
		IsA(((TypeCast *) node)->arg, ColumnRef))
	{
		TypeCast   *tc = (TypeCast *) node;
		ColumnRef  *cr = (ColumnRef *) tc->arg;

		if (list_length(cr->fields) == 1 && IsA(linitial(cr->fields), String))
		{
			scan->names = lappend(scan->names, strVal(linitial(cr->fields)));
			scan->types = lappend(scan->types, tc->typeName);
		}
	}
	if (IsA(node, ColumnRef))
	{
		ColumnRef  *cr = (ColumnRef *) node;

		if (list_length(cr->fields) != 1 || !IsA(linitial(cr->fields), String))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("an aggregate of a cbt can only refer to its inputs and group keys by their names")));
		scan->refs = lappend(scan->refs, strVal(linitial(cr->fields)));
		return false;
	}
	if (IsA(node, SubLink) || IsA(node, ParamRef))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("an aggregate of a cbt cannot contain a subquery or a parameter")));
	return raw_expression_tree_walker(node, scan_inputs, (void *) scan);
}

/* The select list: targets with names, and no clause of any other kind. */
static List *
parse_aggregates(const char *sql, const char *aggregates)
{
	List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	SelectStmt *s;
	ListCell   *lc;

	if (list_length(raw) != 1 ||
		!IsA(linitial_node(RawStmt, raw)->stmt, SelectStmt))
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid aggregates list \"%s\"", aggregates),
				 errhint("Write a select list of aggregate calls: 'count(*) AS hits, sum(bytes::bigint) AS bytes'.")));
	s = (SelectStmt *) linitial_node(RawStmt, raw)->stmt;
	if (s->distinctClause || s->intoClause || s->fromClause ||
		s->whereClause || s->groupClause || s->havingClause ||
		s->windowClause || s->valuesLists || s->sortClause ||
		s->limitOffset || s->limitCount || s->lockingClause ||
		s->withClause || s->op != SETOP_NONE || s->targetList == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid aggregates list \"%s\"", aggregates),
				 errhint("Write a select list of aggregate calls: 'count(*) AS hits, sum(bytes::bigint) AS bytes'.")));
	foreach(lc, s->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);

		if (rt->name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
					 errmsg("every aggregate of a cbt needs a column name"),
					 errhint("Write \"AS name\" after each aggregate call.")));
	}
	return s->targetList;
}

static bool
name_in(const char *name, List *names)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp(name, (char *) lfirst(lc)) == 0)
			return true;
	return false;
}

/* "NULL::type AS name" of cbt_input's select list. */
static void
append_input_column(StringInfo buf, const char *name, Oid type, int32 typmod,
					Oid collation)
{
	if (buf->len > 0)
		appendStringInfoString(buf, ", ");
	appendStringInfo(buf, "NULL::%s",
					 format_type_extended(type, typmod,
										  FORMAT_TYPE_TYPEMOD_GIVEN |
										  FORMAT_TYPE_FORCE_QUALIFY));
	if (OidIsValid(collation) && collation != get_typcollation(type))
		appendStringInfo(buf, " COLLATE %s", generate_collation_name(collation));
	appendStringInfo(buf, " AS %s", quote_identifier(name));
}

static ColumnRef *
make_column_ref(const char *name)
{
	ColumnRef  *cr = makeNode(ColumnRef);

	cr->fields = list_make1(makeString(pstrdup(name)));
	cr->location = -1;
	return cr;
}

/*
 * The query of a definition, assembled from the parsed group keys and
 * select list and analyzed.
 */
static Query *
analyze_user_definition(const char *group_by, const char *aggregates)
{
	List	   *keydefs = parse_group_by(group_by);
	char	   *sql = psprintf("SELECT %s", aggregates);
	List	   *targets = parse_aggregates(sql, aggregates);
	InputScan	scan = {NIL, NIL, NIL};
	StringInfoData cols;
	List	   *keynames = NIL;
	List	   *inputs = NIL;
	SelectStmt *outer;
	SelectStmt *sub;
	RangeSubselect *from;
	RawStmt    *rs;
	ListCell   *lc;
	ListCell   *lt;

	initStringInfo(&cols);
	foreach(lc, keydefs)
	{
		ColumnDef  *cd = (ColumnDef *) lfirst(lc);
		Oid			type;
		int32		typmod;
		Oid			collation;

		if (name_in(cd->colname, keynames))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("group key \"%s\" is listed twice", cd->colname)));
		typenameTypeIdAndMod(NULL, cd->typeName, &type, &typmod);
		collation = GetColumnDefCollation(NULL, cd, type);
		append_input_column(&cols, cd->colname, type, typmod, collation);
		keynames = lappend(keynames, cd->colname);
	}

	foreach(lc, targets)
		(void) scan_inputs(lfirst_node(ResTarget, lc)->val, &scan);
	forboth(lc, scan.names, lt, scan.types)
	{
		const char *name = (const char *) lfirst(lc);
		Oid			type;
		int32		typmod;

		if (name_in(name, keynames))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("input \"%s\" has the name of a group key", name),
					 errhint("Refer to the group key by its name alone.")));
		typenameTypeIdAndMod(NULL, (TypeName *) lfirst(lt), &type, &typmod);
		if (name_in(name, inputs))
		{
			/* declared again: with the same type, or it is two inputs */
			int			pos = list_length(scan.names);

			for (int i = 0; i < pos; i++)
				if (strcmp((char *) list_nth(scan.names, i), name) == 0)
				{
					Oid			t0;
					int32		m0;

					typenameTypeIdAndMod(NULL, list_nth(scan.types, i), &t0, &m0);
					if (t0 != type || m0 != typmod)
						ereport(ERROR,
								(errcode(ERRCODE_DATATYPE_MISMATCH),
								 errmsg("input \"%s\" is declared with two types, %s and %s",
										name, format_type_with_typemod(t0, m0),
										format_type_with_typemod(type, typmod))));
					break;
				}
			continue;
		}
		append_input_column(&cols, name, type, typmod, InvalidOid);
		inputs = lappend(inputs, (void *) name);
	}
	foreach(lc, scan.refs)
	{
		const char *name = (const char *) lfirst(lc);

		if (!name_in(name, keynames) && !name_in(name, inputs))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("input \"%s\" has no type", name),
					 errhint("Declare it where it is first used, as %s::type.",
							 quote_identifier(name))));
	}
	if (list_length(keynames) + list_length(targets) + list_length(inputs) >
		CBT_MAX_COLUMNS)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_COLUMNS),
				 errmsg("a cbt can have at most %d columns", CBT_MAX_COLUMNS)));

	/* SELECT <keys>, <targets> FROM (SELECT NULL::t AS c, ...) cbt_input GROUP BY <keys> */
	sub = (SelectStmt *) linitial_node(RawStmt,
									   raw_parser(psprintf("SELECT %s", cols.data),
												  RAW_PARSE_DEFAULT))->stmt;
	from = makeNode(RangeSubselect);
	from->subquery = (Node *) sub;
	from->alias = makeAlias(CBT_INPUT_ALIAS, NIL);
	outer = makeNode(SelectStmt);
	foreach(lc, keynames)
	{
		ResTarget  *rt = makeNode(ResTarget);

		rt->val = (Node *) make_column_ref((char *) lfirst(lc));
		rt->location = -1;
		outer->targetList = lappend(outer->targetList, rt);
		outer->groupClause = lappend(outer->groupClause,
									 make_column_ref((char *) lfirst(lc)));
	}
	outer->targetList = list_concat(outer->targetList, targets);
	outer->fromClause = list_make1(from);
	rs = makeNode(RawStmt);
	rs->stmt = (Node *) outer;
	return parse_analyze_fixedparams(rs, sql, NULL, 0, NULL);
}

/* ---- the analyzed query ---- */

static void
refuse(const char *msg_name, Oid aggfnoid, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("aggregate %s of column \"%s\" cannot be used in a cbt",
					format_procedure(aggfnoid), msg_name),
			 errdetail_internal("%s", detail)));
}

/* Fill agg from its Aggref's catalog entries; refuse what a cbt cannot run. */
static void
resolve_aggregate(CbtAgg *agg, Oid owner, bool check_privileges)
{
	Aggref	   *aggref = agg->aggref;
	Oid			inputTypes[FUNC_MAX_ARGS];
	int			numArguments;
	HeapTuple	tup;
	Form_pg_aggregate form;
	Datum		textInitVal;
	Oid			aggowner;

	if (aggref->aggkind != AGGKIND_NORMAL)
		refuse(agg->name, aggref->aggfnoid,
			   "It is an ordered-set or hypothetical-set aggregate, whose partial states cannot be combined.");
	if (aggref->aggdistinct != NIL || aggref->aggorder != NIL)
		refuse(agg->name, aggref->aggfnoid,
			   "DISTINCT and ORDER BY need every input of a group at once; a cbt combines partial states.");
	if (aggref->aggfilter != NULL)
		refuse(agg->name, aggref->aggfnoid, "FILTER is not supported in a cbt.");
	if (contain_volatile_functions((Node *) aggref->args))
		refuse(agg->name, aggref->aggfnoid,
			   "Its arguments call a volatile function; a cbt evaluates them when it consolidates, not when the row is inserted.");

	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggref->aggfnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for aggregate %u", aggref->aggfnoid);
	form = (Form_pg_aggregate) GETSTRUCT(tup);
	agg->transfn = form->aggtransfn;
	agg->combinefn = form->aggcombinefn;
	agg->serialfn = form->aggserialfn;
	agg->deserialfn = form->aggdeserialfn;
	agg->finalfn = form->aggfinalfn;
	agg->finalextra = form->aggfinalextra;
	numArguments = get_aggregate_argtypes(aggref, inputTypes);
	agg->transtype = resolve_aggregate_transtype(aggref->aggfnoid,
												 form->aggtranstype,
												 inputTypes, numArguments);

	/*
	 * The pages hold states of the type the aggregate had when the
	 * definition was bound (kept in the bound query's Aggref, a field the
	 * parser leaves unset).  CREATE OR REPLACE AGGREGATE can change it.
	 */
	if (!OidIsValid(aggref->aggtranstype))
		aggref->aggtranstype = agg->transtype;
	else if (aggref->aggtranstype != agg->transtype)
	{
		ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("aggregate %s of column \"%s\" has changed its state type from %s to %s",
						format_procedure(aggref->aggfnoid), agg->name,
						format_type_be(aggref->aggtranstype),
						format_type_be(agg->transtype)),
				 errdetail("The table holds states of the old type."),
				 errhint("Restore the aggregate's old definition.")));
	}
	textInitVal = SysCacheGetAttr(AGGFNOID, tup, Anum_pg_aggregate_agginitval,
								  &agg->initval_isnull);
	if (!agg->initval_isnull)
	{
		Oid			typinput;
		Oid			typioparam;

		getTypeInputInfo(agg->transtype, &typinput, &typioparam);
		agg->initval = OidInputFunctionCall(typinput,
											TextDatumGetCString(textInitVal),
											typioparam, -1);
	}
	ReleaseSysCache(tup);

	if (!OidIsValid(agg->combinefn))
		refuse(agg->name, aggref->aggfnoid,
			   "It has no combine function: a cbt merges the partial states of a group found in different buffers.");
	if (agg->transtype == INTERNALOID &&
		(!OidIsValid(agg->serialfn) || !OidIsValid(agg->deserialfn)))
		refuse(agg->name, aggref->aggfnoid,
			   "Its state is internal and it has no serialization functions: a cbt stores partial states on pages.");
	if (agg->transtype != INTERNALOID)
		agg->serialfn = agg->deserialfn = InvalidOid;

	/* as nodeAgg: the caller may call the aggregate, its owner its parts */
	if (!check_privileges)
		return;
	if (pg_proc_aclcheck(aggref->aggfnoid, owner, ACL_EXECUTE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_AGGREGATE,
					   get_func_name(aggref->aggfnoid));
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(aggref->aggfnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", aggref->aggfnoid);
	aggowner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	{
		Oid			parts[] = {agg->transfn, agg->combinefn, agg->serialfn,
		agg->deserialfn, agg->finalfn};

		for (int i = 0; i < lengthof(parts); i++)
			if (OidIsValid(parts[i]) &&
				pg_proc_aclcheck(parts[i], aggowner, ACL_EXECUTE) != ACLCHECK_OK)
				aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION,
							   get_func_name(parts[i]));
	}
}

static bool
uses_input(Node *node, int *attno)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return ((Var *) node)->varno == 1 && ((Var *) node)->varattno == *attno;
	return expression_tree_walker(node, uses_input, (void *) attno);
}

/*
 * NULL::type AS name, where the type may be a domain (a CoerceToDomain
 * over the constant) and the column may have a collation of its own (a
 * CollateExpr).
 */
static bool
is_typed_null(Node *node)
{
	for (;;)
	{
		if (node == NULL)
			return false;
		if (IsA(node, CollateExpr))
			node = (Node *) ((CollateExpr *) node)->arg;
		else if (IsA(node, CoerceToDomain))
			node = (Node *) ((CoerceToDomain *) node)->arg;
		else if (IsA(node, RelabelType))
			node = (Node *) ((RelabelType *) node)->arg;
		else
			return IsA(node, Const) && ((Const *) node)->constisnull;
	}
}

static void
invalid_definition(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
			 errmsg("invalid cbt definition"),
			 errdetail_internal("%s", detail)));
}

/*
 * The definition an analyzed query describes, checked node by node (a
 * stored query is read back through here too).
 */
static CbtDef *
definition_from_query(Query *q, Oid owner, bool check_privileges)
{
	CbtDef	   *def = palloc0(sizeof(CbtDef));
	RangeTblEntry *rte;
	Query	   *sub;
	ListCell   *lc;
	int			attno;
	int			ntargets = list_length(q->targetList);

	def->analyzed = q;

	if (q->commandType != CMD_SELECT || !q->hasAggs || q->hasWindowFuncs ||
		q->hasTargetSRFs || q->hasSubLinks || q->hasRecursive ||
		q->cteList != NIL || q->havingQual != NULL || q->groupingSets != NIL ||
		q->distinctClause != NIL || q->sortClause != NIL ||
		q->limitCount != NULL || q->limitOffset != NULL ||
		list_length(q->rtable) != 1 || q->jointree == NULL ||
		q->jointree->quals != NULL || list_length(q->jointree->fromlist) != 1)
		invalid_definition("Only aggregate calls over the inputs, grouped by the keys.");
	rte = linitial_node(RangeTblEntry, q->rtable);
	if (rte->rtekind != RTE_SUBQUERY || rte->subquery == NULL)
		invalid_definition("The inputs are not a subquery.");
	sub = rte->subquery;

	/* cbt_input: NULL constants, keys first */
	def->nkeys = list_length(q->groupClause);
	def->ninputs = list_length(sub->targetList) - def->nkeys;
	def->naggs = ntargets - def->nkeys;
	if (def->nkeys < 1 || def->ninputs < 0 || def->naggs < 1 ||
		def->nkeys + def->ninputs + def->naggs > CBT_MAX_COLUMNS)
		invalid_definition("A cbt needs at least one group key and one aggregate.");
	def->keys = palloc0(sizeof(CbtColumn) * def->nkeys);
	def->inputs = palloc0(sizeof(CbtColumn) * Max(def->ninputs, 1));
	def->aggs = palloc0(sizeof(CbtAgg) * def->naggs);
	attno = 0;
	foreach(lc, sub->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);
		CbtColumn  *col = attno < def->nkeys ? &def->keys[attno] :
			&def->inputs[attno - def->nkeys];

		if (!is_typed_null((Node *) te->expr) || te->resname == NULL)
			invalid_definition("The inputs are not typed NULL columns.");
		col->name = pstrdup(te->resname);
		col->type = exprType((Node *) te->expr);
		col->typmod = exprTypmod((Node *) te->expr);
		col->collation = exprCollation((Node *) te->expr);
		attno++;
	}

	/* the keys: the first targets, plain Vars, grouped by in order */
	attno = 0;
	foreach(lc, q->targetList)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		if (attno < def->nkeys)
		{
			Var		   *v = (Var *) te->expr;
			SortGroupClause *sgc = list_nth_node(SortGroupClause,
												 q->groupClause, attno);

			if (!IsA(v, Var) || v->varno != 1 || v->varattno != attno + 1 ||
				te->ressortgroupref != sgc->tleSortGroupRef)
				invalid_definition("The keys are not grouped by in order.");
			if (!OidIsValid(sgc->eqop) || !sgc->hashable)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_FUNCTION),
						 errmsg("group key \"%s\" of type %s cannot be hashed",
								def->keys[attno].name,
								format_type_be(def->keys[attno].type)),
						 errdetail("A cbt groups by hashing, as hash aggregation does: the type needs a hash operator class.")));
		}
		else
		{
			CbtAgg	   *agg = &def->aggs[attno - def->nkeys];

			if (!IsA(te->expr, Aggref) || te->resname == NULL ||
				((Aggref *) te->expr)->agglevelsup != 0)
				ereport(ERROR,
						(errcode(ERRCODE_WRONG_OBJECT_TYPE),
						 errmsg("column \"%s\" of a cbt must be one aggregate call",
								te->resname ? te->resname : "?"),
						 errhint("Compute expressions of aggregates when you read the table.")));
			agg->name = pstrdup(te->resname);
			agg->aggref = (Aggref *) te->expr;
			agg->carried_input = -1;
			resolve_aggregate(agg, owner, check_privileges);
		}
		attno++;
	}

	/* column names; an input carries the result column of its own name */
	for (int a = 0; a < def->naggs; a++)
	{
		CbtAgg	   *agg = &def->aggs[a];

		for (int k = 0; k < def->nkeys; k++)
			if (strcmp(agg->name, def->keys[k].name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" is both a group key and an aggregate", agg->name)));
		for (int b = 0; b < a; b++)
			if (strcmp(agg->name, def->aggs[b].name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("aggregate column \"%s\" is listed twice", agg->name)));
		for (int i = 0; i < def->ninputs; i++)
		{
			int			in_attno = def->nkeys + i + 1;
			Oid			result = exprType((Node *) agg->aggref);
			Oid			input = def->inputs[i].type;

			if (strcmp(agg->name, def->inputs[i].name) != 0)
				continue;
			if (!uses_input((Node *) agg->aggref->args, &in_attno))
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("input \"%s\" has the name of another aggregate's column",
								agg->name)));
			/* the inserted value is the input's, with no conversion */
			if (!IsBinaryCoercible(result, input))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of type %s cannot carry input \"%s\" of type %s",
								agg->name, format_type_be(result), agg->name,
								format_type_be(input)),
						 errhint("Give the input another name: it then has a column of its own.")));

			/*
			 * A value read back from the column (a dump's) must mean the
			 * same inserted as an input and merged as a result: adding it
			 * is combining it (sum, min, max, bool_and, but not count).
			 */
			if (agg->transfn != agg->combinefn || OidIsValid(agg->finalfn) ||
				agg->transtype != result)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
						 errmsg("column \"%s\" cannot carry input \"%s\": its aggregate does not combine results as it adds inputs",
								agg->name, agg->name),
						 errdetail("A column carries its input only when adding a value and combining a result are one function (as for sum, min, max), so that a value read back means the same either way."),
						 errhint("Give the input another name: it then has a column of its own.")));
			agg->carried_input = i;
		}
	}
	return def;
}

/*
 * Run fn(arg) with search_path pinned to pg_catalog, pg_temp, so that
 * names are resolved, and deparsed, the same way whoever's session it is:
 * pg_catalog first, and the session's temporary schema, which PostgreSQL
 * would otherwise search first for types, last (it is never searched for
 * functions and operators).
 */
static void *
with_pinned_path(void *(*fn) (void *), void *arg)
{
	int			nest = NewGUCNestLevel();
	void	   *result;

	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	result = fn(arg);
	AtEOXact_GUC(true, nest);
	return result;
}

CbtDef *
cbt_def_create(const char *group_by, const char *aggregates)
{
	SSUserText	pos = {aggregates, strlen("SELECT ")};
	ErrorContextCallback callback;
	Query	   *q;

	/* errors point into the select list, not into the query around it */
	callback.callback = ss_user_text_error_callback;
	callback.arg = &pos;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	q = analyze_user_definition(group_by, aggregates);
	error_context_stack = callback.previous;
	return definition_from_query(q, GetUserId(), true);
}

static void *
analyze_stored(void *query)
{
	List	   *raw = raw_parser((const char *) query, RAW_PARSE_DEFAULT);

	if (list_length(raw) != 1)
		invalid_definition("The stored definition is not one query.");
	return parse_analyze_fixedparams(linitial_node(RawStmt, raw),
									 (const char *) query, NULL, 0, NULL);
}

typedef struct LoadArgs
{
	const char *query;			/* text to resolve, or */
	Query	   *tree;			/* a bound query */
	Oid			owner;
	Oid			as_user;		/* whose privileges name lookups use */
	bool		check_privileges;	/* the owner's on the aggregates */
} LoadArgs;

static void *
load_definition(void *arg)
{
	LoadArgs   *args = (LoadArgs *) arg;
	Query	   *q = args->tree;

	if (q == NULL)
		q = analyze_stored((void *) args->query);
	return definition_from_query(q, args->owner, args->check_privileges);
}

/*
 * Resolve or check a definition as its table's owner (or the restoring
 * user), restricted (a type's input function, run for an aggregate's
 * initial value, is the owner's code, as in nodeAgg), with the pinned
 * search_path.
 */
static CbtDef *
load_as_owner(LoadArgs *args)
{
	Oid			save_userid;
	int			save_sec_context;
	CbtDef	   *def;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(args->as_user,
						   save_sec_context | SECURITY_RESTRICTED_OPERATION);
	PG_TRY();
	{
		def = with_pinned_path(load_definition, args);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	return def;
}

/*
 * A restore (restoring) gives a table its label before it grants
 * privileges: pg_dump emits GRANTs last.  Its names are then resolved as
 * the user giving the label (the owner, or a superuser), and the owner's
 * privileges on the aggregates are checked when the table is used.
 */
CbtDef *
cbt_def_load(const char *query, Oid owner, bool restoring)
{
	LoadArgs	args = {query, NULL, owner, restoring ? GetUserId() : owner,
	!restoring};

	return load_as_owner(&args);
}

CbtDef *
cbt_def_from_tree(Query *q, Oid owner, bool check_privileges)
{
	LoadArgs	args = {NULL, q, owner, owner, check_privileges};

	return load_as_owner(&args);
}

/* ---- the definition as text ---- */

static void *
deparse_query(void *q)
{
	return pg_get_querydef((Query *) q, false);
}

static void
rename_input(Query *q, int attno, const char *name)
{
	RangeTblEntry *rte = linitial_node(RangeTblEntry, q->rtable);
	TargetEntry *te = list_nth_node(TargetEntry, rte->subquery->targetList,
									attno - 1);

	te->resname = pstrdup(name);
	if (attno <= list_length(rte->eref->colnames))
		list_nth_cell(rte->eref->colnames, attno - 1)->ptr_value =
			makeString(pstrdup(name));
}

char *
cbt_def_deparse(const CbtDef *def, int ncols, const char *const *colnames)
{
	Query	   *q = copyObject(def->analyzed);
	CbtColumn	cols[CBT_MAX_COLUMNS];
	int			n = cbt_def_relation_columns(def, cols);
	int			col;

	if (n != ncols)
		elog(ERROR, "a cbt definition of %d columns deparsed with %d names",
			 n, ncols);

	/* keys, then results, then the inputs no result carries, in order */
	for (int k = 0; k < def->nkeys; k++)
	{
		list_nth_node(TargetEntry, q->targetList, k)->resname =
			pstrdup(colnames[k]);
		rename_input(q, k + 1, colnames[k]);
	}
	for (int a = 0; a < def->naggs; a++)
	{
		const char *name = colnames[def->nkeys + a];

		list_nth_node(TargetEntry, q->targetList, def->nkeys + a)->resname =
			pstrdup(name);
		if (def->aggs[a].carried_input >= 0)
			rename_input(q, def->nkeys + def->aggs[a].carried_input + 1, name);
	}
	col = def->nkeys + def->naggs;
	for (int i = 0; i < def->ninputs; i++)
	{
		bool		carried = false;

		for (int a = 0; a < def->naggs; a++)
			carried |= def->aggs[a].carried_input == i;
		if (!carried)
			rename_input(q, def->nkeys + i + 1, colnames[col++]);
	}
	return with_pinned_path(deparse_query, q);
}

/* ---- dependencies ---- */

/*
 * Refuse a temporary object in the definition of a table that outlives
 * the session: dropping the session's temporary objects would drop the
 * table with them (a view using one is made temporary for that reason).
 */
static void
refuse_temporary_objects(Oid relid)
{
	Relation	depRel;
	ScanKeyData key[3];
	SysScanDesc scan;
	HeapTuple	tup;

	if (isAnyTempNamespace(get_rel_namespace(relid)))
		return;
	depRel = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_depend_classid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(RelationRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_objid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	ScanKeyInit(&key[2], Anum_pg_depend_objsubid, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(0));
	scan = systable_beginscan(depRel, DependDependerIndexId, true, NULL, 3,
							  key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);
		ObjectAddress ref;
		Oid			nsp;

		ObjectAddressSubSet(ref, dep->refclassid, dep->refobjid,
							dep->refobjsubid);
		if (dep->deptype != DEPENDENCY_NORMAL)
			continue;
		nsp = get_object_namespace(&ref);
		if (OidIsValid(nsp) && isAnyTempNamespace(nsp))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the definition of cbt \"%s\" uses the temporary object %s",
							get_rel_name(relid), getObjectDescription(&ref, false)),
					 errdetail("The temporary object goes away with its session."),
					 errhint("Create the cbt as a temporary table (pg_temp.name), or use objects that are not temporary.")));
	}
	systable_endscan(scan);
	table_close(depRel, AccessShareLock);
}

void
cbt_def_record_dependencies(const CbtDef *def, Oid relid)
{
	ObjectAddress myself;

	ObjectAddressSet(myself, RelationRelationId, relid);
	recordDependencyOnExpr(&myself, (Node *) def->analyzed, NIL,
						   DEPENDENCY_NORMAL);
	CommandCounterIncrement();
	refuse_temporary_objects(relid);
}

/*
 * Whether a group's final values are its states (cbt_def.h); if not, the
 * first aggregate whose are not.
 */
bool
cbt_def_restorable(const CbtDef *def, int *bad)
{
	for (int a = 0; a < def->naggs; a++)
	{
		const CbtAgg *agg = &def->aggs[a];

		if (OidIsValid(agg->finalfn) || agg->transtype == INTERNALOID ||
			agg->transtype != exprType((Node *) agg->aggref))
		{
			*bad = a;
			return false;
		}
	}
	*bad = -1;
	return true;
}

int
cbt_def_relation_columns(const CbtDef *def, CbtColumn *cols)
{
	int			n = 0;

	for (int k = 0; k < def->nkeys; k++)
		cols[n++] = def->keys[k];
	for (int a = 0; a < def->naggs; a++)
	{
		Aggref	   *aggref = def->aggs[a].aggref;

		cols[n].name = def->aggs[a].name;
		cols[n].type = exprType((Node *) aggref);
		cols[n].typmod = exprTypmod((Node *) aggref);
		cols[n].collation = exprCollation((Node *) aggref);
		n++;
	}
	for (int i = 0; i < def->ninputs; i++)
	{
		bool		carried = false;

		for (int a = 0; a < def->naggs; a++)
			carried |= def->aggs[a].carried_input == i;
		if (!carried)
			cols[n++] = def->inputs[i];
	}
	return n;
}
