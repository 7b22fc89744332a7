/*-------------------------------------------------------------------------
 *
 * ss_evtrigger.c
 *	  Event trigger functions that refuse the DDL which would silently
 *	  empty a structure or change what inserting into it means.
 *
 * The extension script creates four event triggers on these functions
 * (sql/parts/10_guard.sql).  Unlike hooks installed by _PG_init, event
 * triggers fire in every session, also in one where the library has not
 * been loaded yet (PostgreSQL loads it to call the trigger function), and
 * they see what a statement did to every relation, including those it
 * reached through a partitioned or inheritance parent or a composite
 * type:
 *
 *	ddl_command_start	CREATE RULE (a "_RETURN" rule turns the table into a
 *						view, and at ddl_command_end the old access method
 *						is gone from the catalog), CREATE INDEX, CREATE and
 *						REFRESH MATERIALIZED VIEW, ALTER TABLE/TYPE: refused
 *						before they run, so nothing is built or rewritten
 *						in vain (an index built CONCURRENTLY would be left
 *						behind invalid).  ALTER TYPE ... ATTRIBUTE and
 *						ALTER TABLE column changes of a relation whose row
 *						type a structure's column uses (through domains,
 *						arrays, ranges, nested composites): the key's
 *						binary form, its hash, would change.  SECURITY
 *						LABEL: refuses nothing, but calling the function
 *						loads the library, which registers the label
 *						provider before PostgreSQL looks it up.
 *	table_rewrite		any rewrite of a structure, and SET ACCESS METHOD to
 *						one of ours: a rewrite feeds the scan output (a
 *						sketch has no rows) into a new, empty structure.
 *	ddl_command_end		the backstop, from the commands PostgreSQL
 *						collected: ALTER TABLE subcommands that change
 *						columns, persistence or access method, on every
 *						relation they reached; and the state every
 *						structure a command touched must keep: a plain
 *						table with no triggers, rules, indexes, CHECK /
 *						UNIQUE / PRIMARY KEY / FOREIGN KEY / EXCLUDE
 *						constraints, and no publication membership (FOR
 *						TABLE, TABLES IN SCHEMA, or through a partitioned
 *						parent; FOR ALL TABLES is allowed).  An error there
 *						rolls the whole statement back.
 *	sql_drop			DROP ... CASCADE that dropped a structure's column,
 *						or a column of a relation whose row type one uses
 *						(a domain, a generated column's function, a type),
 *						without dropping the structure.
 *
 * Binary upgrade (pg_upgrade) passes everything: it recreates what existed.
 * The functions are C and run no SQL, so no operator or function found
 * through search_path is ever called.  They deliberately do not pin
 * search_path: the names in the statement's parse tree (ddl_command_start,
 * table_rewrite) must resolve exactly as the statement resolves them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_publication_namespace.h"
#include "catalog/pg_publication_rel.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "ss_parent.h"
#include "streamsketch.h"
#include "tcop/cmdtag.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

/* Why a statement is refused: selects the detail and hint. */
typedef enum SSRefusal
{
	SSR_REWRITE,				/* the table would be rewritten */
	SSR_COLUMNS,				/* the columns would change */
	SSR_ROWS,					/* triggers, rules, constraints: need rows */
	SSR_INDEX,					/* an index */
	SSR_PUBLICATION,			/* logical replication */
	SSR_MATVIEW,				/* a materialized view using our AM */
	SSR_KEY_TYPE				/* a type the columns use would change */
} SSRefusal;

/* ---- identifying structures ---- */

static Oid
rel_relam(Oid relid, char *relkind)
{
	HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			relam;

	if (!HeapTupleIsValid(tp))
		return InvalidOid;
	relam = ((Form_pg_class) GETSTRUCT(tp))->relam;
	if (relkind)
		*relkind = ((Form_pg_class) GETSTRUCT(tp))->relkind;
	ReleaseSysCache(tp);
	return relam;
}

/* Is relid a relation using one of the extension's access methods? */
static bool
is_structure(Oid relid)
{
	return OidIsValid(relid) && ss_relam_is_streamsketch(rel_relam(relid, NULL));
}

static char
rel_kind(Oid relid)
{
	char		relkind = '\0';

	(void) rel_relam(relid, &relkind);
	return relkind;
}

/* Does the access method name one of ours? */
static bool
am_name_is_ours(const char *amname)
{
	return amname != NULL &&
		ss_relam_is_streamsketch(get_table_am_oid(amname, true));
}

/* ---- refusing ---- */

/*
 * Why a statement is refused, for the user: the detail and the hint, where
 * %s is the access method (which a hint may leave out).
 */
static const struct
{
	const char *detail;
	const char *hint;
}			refusal_texts[] = {
	[SSR_REWRITE] = {
		"Rewriting a %s table fills the new table from its scan, which returns no rows: everything counted would be lost.",
		"Create a new table USING %s and insert the stream into it again."
	},
	[SSR_COLUMNS] = {
		"The columns of a %s table say what an inserted row means (its key, and its weight or count); changing them would empty the structure or change what it counts.",
		"Create a new table USING %s with the columns you need."
	},
	[SSR_ROWS] = {
		"A %s table is a streaming summary, not a set of stored rows.",
		"Check or transform the rows before they are inserted, for example on the table they come from."
	},
	[SSR_INDEX] = {
		"A %s table is a streaming summary, not a set of stored rows.",
		"Point queries use the structure's own functions."
	},
	[SSR_PUBLICATION] = {
		"Changes to a %s table are written as generic WAL, which logical replication does not decode.",
		"Replicate structures physically (streaming replication)."
	},
	[SSR_MATVIEW] = {
		"A materialized view stores rows; a %s table keeps only a summary of the rows inserted, and refreshing would empty it.",
		"Create a table USING %s and fill it with INSERT INTO ... SELECT."
	},
	[SSR_KEY_TYPE] = {
		"A %s table hashes each key by its binary form, which for a composite value holds every attribute; changing the attributes of a type its columns use changes the hash of every key, so what was counted before would no longer be found.",
		"Leave the type as it is, or create a new type and a new table USING %s."
	},
};

static void
refuse(const char *what, Oid relid, const char *via, const char *object,
	   SSRefusal why)
{
	char	   *am = get_am_name(rel_relam(relid, NULL));
	char	   *rel = get_rel_name(relid);
	StringInfoData detail;
	const char *hint;

	if (am == NULL)
		am = "streamsketch";
	if (rel == NULL)
		rel = "?";

	initStringInfo(&detail);
	if (object)
		appendStringInfo(&detail, "The table would get %s. ", object);
	appendStringInfo(&detail, refusal_texts[why].detail, am);
	hint = psprintf(refusal_texts[why].hint, am);
	if (via)
		appendStringInfo(&detail, " The statement reaches it through %s.", via);

	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported on %s table \"%s\"", what, am, rel),
			 errdetail_internal("%s", detail.data),
			 errhint("%s", hint)));
}

/* "table \"p\"" or "composite type \"t\"", for the detail */
static char *
describe_rel(Oid relid)
{
	char		relkind = rel_kind(relid);
	const char *kind;

	switch (relkind)
	{
		case RELKIND_PARTITIONED_TABLE:
			kind = "partitioned table";
			break;
		case RELKIND_COMPOSITE_TYPE:
			kind = "composite type";
			break;
		case RELKIND_MATVIEW:
			kind = "materialized view";
			break;
		default:
			kind = "table";
			break;
	}
	return psprintf("%s \"%s\"", kind, get_rel_name(relid));
}

/* ---- the relations a statement on relid reaches ---- */

/* Tables declared OF the composite type typrelid's row type. */
static List *
typed_tables(Oid typrelid)
{
	Oid			typid = get_rel_type_id(typrelid);
	Relation	classrel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	List	   *result = NIL;

	if (!OidIsValid(typid))
		return NIL;
	ScanKeyInit(&key, Anum_pg_class_reloftype, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(typid));
	classrel = table_open(RelationRelationId, AccessShareLock);
	scan = systable_beginscan(classrel, InvalidOid, false, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
		result = lappend_oid(result, ((Form_pg_class) GETSTRUCT(tup))->oid);
	systable_endscan(scan);
	table_close(classrel, AccessShareLock);
	return result;
}

/*
 * relid, and when recurse, its inheritance children and partitions at every
 * level; for a composite type, the tables typed by it (ALTER TYPE reaches
 * them with CASCADE, and its RangeVar does not say inh).
 */
static List *
reached_relations(Oid relid, bool recurse)
{
	List	   *result;
	char		relkind = rel_kind(relid);

	if (relkind == '\0')
		return NIL;
	if (relkind == RELKIND_COMPOSITE_TYPE)
	{
		ListCell   *lc;

		result = list_make1_oid(relid);
		foreach(lc, typed_tables(relid))
			result = list_concat_unique_oid(result,
											find_all_inheritors(lfirst_oid(lc), NoLock, NULL));
		return result;
	}
	if (!recurse)
		return list_make1_oid(relid);
	return find_all_inheritors(relid, NoLock, NULL);
}

/* The structures among rels. */
static List *
structures_in(List *rels)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, rels)
	{
		if (is_structure(lfirst_oid(lc)))
			result = lappend_oid(result, lfirst_oid(lc));
	}
	return result;
}

static char *
via_text(Oid named, Oid structure)
{
	return OidIsValid(named) && named != structure ? describe_rel(named) : NULL;
}

/* ---- structures whose columns use a row type ---- */

/*
 * A structure with a column whose type is typid or is built on it: a domain
 * over it, an array or range of it, or a composite type (a table's or
 * view's row type too) with an attribute of such a type, at any depth.
 * pg_depend records each link: a column depends on its type (also an
 * attribute of a composite type, whose relation's row type is then
 * followed), a typed table on its type, a domain on its base type, an
 * array on its element type, a range on its subtype.  visited holds the
 * types already followed, so that no type is followed twice.
 *
 * Returns the structure and sets *attnum to its column (0 for a table
 * typed by such a type), or returns InvalidOid.
 */
static Oid
structure_using_type(Oid typid, List **visited, AttrNumber *attnum)
{
	Relation	deprel;
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *relations = NIL;
	List	   *types = NIL;
	Oid			result = InvalidOid;
	ListCell   *lc;

	if (!OidIsValid(typid) || list_member_oid(*visited, typid))
		return InvalidOid;
	*visited = lappend_oid(*visited, typid);

	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(TypeRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(typid));
	deprel = table_open(DependRelationId, AccessShareLock);
	scan = systable_beginscan(deprel, DependReferenceIndexId, true, NULL,
							  2, key);
	while (!OidIsValid(result) &&
		   HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

		if (dep->classid == RelationRelationId)
		{
			if (dep->objsubid >= 0 && is_structure(dep->objid))
			{
				result = dep->objid;
				*attnum = (AttrNumber) dep->objsubid;
			}
			else
				relations = list_append_unique_oid(relations, dep->objid);
		}
		else if (dep->classid == TypeRelationId)
			types = list_append_unique_oid(types, dep->objid);
	}
	systable_endscan(scan);
	table_close(deprel, AccessShareLock);

	/* the row types of the relations with a column of this type */
	foreach(lc, relations)
	{
		if (OidIsValid(result))
			break;
		result = structure_using_type(get_rel_type_id(lfirst_oid(lc)),
									  visited, attnum);
	}
	/* domains, arrays and ranges over it */
	foreach(lc, types)
	{
		if (OidIsValid(result))
			break;
		result = structure_using_type(lfirst_oid(lc), visited, attnum);
	}
	return result;
}

/*
 * If a structure uses the row type of relid (see structure_using_type),
 * return it and set *via to how, for the detail.
 */
static Oid
structure_using_row_type(Oid relid, char **via)
{
	List	   *visited = NIL;
	AttrNumber	attnum = 0;
	Oid			structure;

	structure = structure_using_type(get_rel_type_id(relid), &visited, &attnum);
	if (!OidIsValid(structure))
		return InvalidOid;
	if (attnum > 0)
		*via = psprintf("its column \"%s\", whose type is or contains the row type of %s",
						get_attname(structure, attnum, false),
						describe_rel(relid));
	else
		*via = psprintf("its own type, which is or contains the row type of %s",
						describe_rel(relid));
	return structure;
}

/* ---- ALTER TABLE subcommands ---- */

/*
 * Does this ALTER TABLE subcommand change a structure in a way that loses or
 * silently changes its contents?  If so, return the statement's name and
 * set *why.  Everything else keeps the pages as they are: owner, defaults,
 * NOT NULL, identity, statistics and storage settings, tablespace (copies
 * the pages), inheritance and typed-table links, partition attach/detach,
 * row security, replica identity.  Constraints and indexes are judged by
 * the state they leave (check_structure_state), because a CHECK ... NO
 * INHERIT on a parent does not reach its children.
 */
static const char *
alter_cmd_refusal(AlterTableCmd *cmd, bool on_type, SSRefusal *why)
{
	switch (cmd->subtype)
	{
		case AT_AddColumn:
		case AT_AddColumnRecurse:
		case AT_AddColumnToView:
			*why = SSR_COLUMNS;
			return on_type ? "ALTER TYPE ... ADD ATTRIBUTE" :
				"ALTER TABLE ... ADD COLUMN";
		case AT_DropColumn:
		case AT_DropColumnRecurse:
			*why = SSR_COLUMNS;
			return on_type ? "ALTER TYPE ... DROP ATTRIBUTE" :
				"ALTER TABLE ... DROP COLUMN";
		case AT_AlterColumnType:
			*why = SSR_COLUMNS;
			return on_type ? "ALTER TYPE ... ALTER ATTRIBUTE ... TYPE" :
				"ALTER TABLE ... ALTER COLUMN ... TYPE";
		case AT_DropExpression:
			*why = SSR_COLUMNS;
			return "ALTER TABLE ... ALTER COLUMN ... DROP EXPRESSION";
		case AT_SetLogged:
			*why = SSR_REWRITE;
			return "ALTER TABLE ... SET LOGGED";
		case AT_SetUnLogged:
			*why = SSR_REWRITE;
			return "ALTER TABLE ... SET UNLOGGED";
		case AT_SetAccessMethod:
			*why = SSR_REWRITE;
			return "ALTER TABLE ... SET ACCESS METHOD";
		default:
			return NULL;
	}
}

/* Refuse SET ACCESS METHOD <ours> on a table that is not a structure yet. */
static void
check_set_access_method(List *cmds, Oid relid)
{
	ListCell   *lc;

	foreach(lc, cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(lc);

		if (!IsA(cmd, AlterTableCmd) || cmd->subtype != AT_SetAccessMethod ||
			!am_name_is_ours(cmd->name) || is_structure(relid))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ALTER TABLE ... SET ACCESS METHOD %s is not supported on table \"%s\"",
						cmd->name, get_rel_name(relid)),
				 errdetail("Converting a table into a %s table would feed its rows into the structure and then drop them; a %s table keeps no rows.",
						   cmd->name, cmd->name),
				 errhint("Create a table USING %s and fill it with INSERT INTO ... SELECT.",
						 cmd->name)));
	}
}

/*
 * Refuse the subcommands cmds (AlterTableCmd nodes) of a statement naming
 * relation named when one of the structures among reached is affected.
 */
static void
check_alter_cmds(List *cmds, Oid named, List *reached)
{
	List	   *structs = structures_in(reached);
	ListCell   *lc;

	if (OidIsValid(named))
		check_set_access_method(cmds, named);
	if (structs == NIL)
		return;
	foreach(lc, cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(lc);
		SSRefusal	why;
		const char *what;
		Oid			target = linitial_oid(structs);

		if (!IsA(cmd, AlterTableCmd))
			continue;
		what = alter_cmd_refusal(cmd,
								 rel_kind(named) == RELKIND_COMPOSITE_TYPE,
								 &why);
		if (what == NULL)
			continue;
		/* name the statement's own table if it is a structure */
		if (list_member_oid(structs, named))
			target = named;
		refuse(what, target, via_text(named, target), NULL, why);
	}
}

/*
 * ALTER TABLE ... ADD PRIMARY KEY / UNIQUE / EXCLUDE (or USING INDEX) would
 * build an index, which the access method refuses with a less helpful
 * message; refuse it first.  Such constraints reach the partitions of a
 * partitioned table, not the children of an inheritance parent.
 */
static void
check_index_constraints(List *cmds, Oid named, bool recurse)
{
	ListCell   *lc;

	foreach(lc, cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(lc);
		List	   *structs;

		if (!IsA(cmd, AlterTableCmd))
			continue;
		if (cmd->subtype == AT_AddConstraint || cmd->subtype == AT_AddConstraintRecurse)
		{
			Constraint *con = (Constraint *) cmd->def;

			if (con == NULL || !IsA(con, Constraint) ||
				(con->contype != CONSTR_PRIMARY && con->contype != CONSTR_UNIQUE &&
				 con->contype != CONSTR_EXCLUSION))
				continue;
		}
		else if (cmd->subtype != AT_AddIndex && cmd->subtype != AT_AddIndexConstraint)
			continue;
		structs = structures_in(reached_relations(named,
												  recurse && rel_kind(named) == RELKIND_PARTITIONED_TABLE));
		if (structs != NIL)
			refuse("ALTER TABLE ... ADD CONSTRAINT", linitial_oid(structs),
				   via_text(named, linitial_oid(structs)), NULL, SSR_INDEX);
	}
}

/*
 * ALTER TABLE / ALTER TYPE subcommands that change the attributes of the
 * row type of every relation in reached: refuse them when a structure's
 * column uses one of those row types, because the key's binary form (its
 * hash) would change.  Run at ddl_command_start, before anything changed.
 */
static void
check_row_type_users(List *cmds, Oid named, List *reached)
{
	ListCell   *lc;

	foreach(lc, cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(lc);
		const char *what;
		SSRefusal	why;
		ListCell   *lr;

		if (!IsA(cmd, AlterTableCmd))
			continue;
		switch (cmd->subtype)
		{
			case AT_AddColumn:
			case AT_AddColumnRecurse:
			case AT_AddColumnToView:
			case AT_DropColumn:
			case AT_DropColumnRecurse:
			case AT_AlterColumnType:
				break;
			default:
				continue;
		}
		what = alter_cmd_refusal(cmd,
								 rel_kind(named) == RELKIND_COMPOSITE_TYPE,
								 &why);
		foreach(lr, reached)
		{
			char	   *via = NULL;
			Oid			structure = structure_using_row_type(lfirst_oid(lr), &via);

			if (OidIsValid(structure))
				refuse(what, structure, via, NULL, SSR_KEY_TYPE);
		}
	}
}

/* ---- the state a structure must keep ---- */

/* What names a catalog row in a refusal, or NULL to look further. */
typedef char *(*DescribeRowFn) (HeapTuple tup);

static char *
describe_trigger(HeapTuple tup)
{
	return psprintf("trigger \"%s\"",
					NameStr(((Form_pg_trigger) GETSTRUCT(tup))->tgname));
}

static char *
describe_rule(HeapTuple tup)
{
	return psprintf("rule \"%s\"",
					NameStr(((Form_pg_rewrite) GETSTRUCT(tup))->rulename));
}

/* A CHECK, UNIQUE, PRIMARY KEY, FOREIGN KEY or EXCLUDE constraint. */
static char *
describe_constraint(HeapTuple tup)
{
	Form_pg_constraint con = (Form_pg_constraint) GETSTRUCT(tup);
	const char *kind;

	switch (con->contype)
	{
		case CONSTRAINT_CHECK:
			kind = "CHECK";
			break;
		case CONSTRAINT_UNIQUE:
			kind = "UNIQUE";
			break;
		case CONSTRAINT_PRIMARY:
			kind = "PRIMARY KEY";
			break;
		case CONSTRAINT_FOREIGN:
			kind = "FOREIGN KEY";
			break;
		case CONSTRAINT_EXCLUSION:
			kind = "EXCLUDE";
			break;
		default:
			return NULL;		/* other kinds: look further */
	}
	return psprintf("%s constraint \"%s\"", kind, NameStr(con->conname));
}

static char *
describe_index(HeapTuple tup)
{
	return psprintf("index \"%s\"",
					get_rel_name(((Form_pg_index) GETSTRUCT(tup))->indexrelid));
}

/*
 * The catalog rows a structure must not have (they need stored rows, or
 * are an index), in the order they are looked for: the rows of catalog
 * whose oid column keyatt is the structure (by the catalog's index
 * indexid) that describe names.  A statement tagged creator, which adds
 * one, is refused as itself (or as creator_text); another, as adding one.
 */
typedef struct ForbiddenRows
{
	Oid			catalog;
	Oid			indexid;
	AttrNumber	keyatt;
	DescribeRowFn describe;
	CommandTag	creator;
	const char *creator_text;
	const char *adding;
	SSRefusal	why;
} ForbiddenRows;

static const ForbiddenRows forbidden_rows[] = {
	{RewriteRelationId, RewriteRelRulenameIndexId, Anum_pg_rewrite_ev_class,
	describe_rule, CMDTAG_CREATE_RULE, NULL, "a rule", SSR_ROWS},
	{ConstraintRelationId, ConstraintRelidTypidNameIndexId,
		Anum_pg_constraint_conrelid, describe_constraint, CMDTAG_ALTER_TABLE,
	"ALTER TABLE ... ADD CONSTRAINT", "a constraint", SSR_ROWS},
	{IndexRelationId, IndexIndrelidIndexId, Anum_pg_index_indrelid,
	describe_index, CMDTAG_CREATE_INDEX, NULL, "an index", SSR_INDEX},
	{TriggerRelationId, TriggerRelidNameIndexId, Anum_pg_trigger_tgrelid,
	describe_trigger, CMDTAG_CREATE_TRIGGER, NULL, "a trigger", SSR_ROWS},
};

/* The first of relid's rows of kind f that f's describe names, or NULL. */
static char *
first_row_named(Oid relid, const ForbiddenRows *f)
{
	Relation	rel = table_open(f->catalog, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *result = NULL;

	ScanKeyInit(&key, f->keyatt, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, f->indexid, true, NULL, 1, &key);
	while (result == NULL && HeapTupleIsValid(tup = systable_getnext(scan)))
		result = f->describe(tup);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * A publication that names relid (FOR TABLE), one of its partitioned
 * ancestors, or the schema of either (TABLES IN SCHEMA).  FOR ALL TABLES
 * publications are not looked at: they carry no change of a structure,
 * which the README documents.
 */
static char *
first_publication(Oid relid)
{
	List	   *rels = list_make1_oid(relid);
	ListCell   *lc;

	if (get_rel_relispartition(relid))
		rels = list_concat(rels, get_partition_ancestors(relid));
	foreach(lc, rels)
	{
		Oid			r = lfirst_oid(lc);
		List	   *pubs = GetRelationPublications(r);
		Oid			nsp = get_rel_namespace(r);

		if (pubs == NIL)
			pubs = GetSchemaPublications(nsp);
		if (pubs != NIL)
			return psprintf("membership in publication \"%s\"",
							get_publication_name(linitial_oid(pubs), false));
	}
	return NULL;
}

/*
 * After a command: refuse if structure relid has become something a
 * structure must not be or have.  named is the relation the statement
 * named (for the detail), tag the statement.
 */
static void
check_structure_state(Oid relid, Oid named, CommandTag tag)
{
	const char *tagname = GetCommandTagName(tag);
	char	   *via = via_text(named, relid);
	char	   *obj;

	if (rel_kind(relid) == RELKIND_MATVIEW)
		refuse(tagname, relid, NULL, NULL, SSR_MATVIEW);
	for (int i = 0; i < lengthof(forbidden_rows); i++)
	{
		const ForbiddenRows *f = &forbidden_rows[i];

		const char *creator = f->creator_text ? f->creator_text : tagname;

		if ((obj = first_row_named(relid, f)) != NULL)
			refuse(tag == f->creator ? creator :
				   psprintf("%s adding %s", tagname, f->adding),
				   relid, via, obj, f->why);
	}
	if ((obj = first_publication(relid)) != NULL)
		refuse(psprintf("%s adding it to a publication", tagname),
			   relid, via, obj, SSR_PUBLICATION);
}

static void
check_reached_state(List *reached, Oid named, CommandTag tag)
{
	ListCell   *lc;

	foreach(lc, structures_in(reached))
		check_structure_state(lfirst_oid(lc), named, tag);
}

/*
 * Every structure a publication covers: its FOR TABLE relations with their
 * partitions and inheritance children, and the tables of its schemas.
 */
static void
check_publication(Oid pubid, CommandTag tag)
{
	const char *tagname = GetCommandTagName(tag);
	ListCell   *lc;

	foreach(lc, GetPublicationRelations(pubid, PUBLICATION_PART_ALL))
	{
		Oid			relid = lfirst_oid(lc);

		if (is_structure(relid))
			refuse(tagname, relid, NULL, NULL, SSR_PUBLICATION);
	}
	foreach(lc, GetAllSchemaPublicationRelations(pubid, PUBLICATION_PART_ALL))
	{
		Oid			relid = lfirst_oid(lc);

		if (is_structure(relid))
			refuse(tagname, relid,
				   psprintf("schema \"%s\"",
							get_namespace_name(get_rel_namespace(relid))),
				   NULL, SSR_PUBLICATION);
	}
}

/* ---- ddl_command_start ---- */

static Oid
rangevar_relid(RangeVar *rv)
{
	return rv ? RangeVarGetRelid(rv, NoLock, true) : InvalidOid;
}

static void
guard_start(Node *parsetree, CommandTag tag)
{
	Oid			relid;
	List	   *reached;

	if (parsetree == NULL)
		return;
	switch (nodeTag(parsetree))
	{
		case T_RuleStmt:
			relid = rangevar_relid(((RuleStmt *) parsetree)->relation);
			if (is_structure(relid))
				refuse("CREATE RULE", relid, NULL, NULL, SSR_ROWS);
			break;
		case T_IndexStmt:
			{
				IndexStmt  *stmt = (IndexStmt *) parsetree;
				List	   *structs;

				relid = rangevar_relid(stmt->relation);
				if (!OidIsValid(relid))
					break;
				structs = structures_in(reached_relations(relid, stmt->relation->inh));
				if (structs != NIL)
					refuse("CREATE INDEX", linitial_oid(structs),
						   via_text(relid, linitial_oid(structs)), NULL,
						   SSR_INDEX);
				break;
			}
		case T_CreateTableAsStmt:
			{
				CreateTableAsStmt *stmt = (CreateTableAsStmt *) parsetree;
				const char *am;

				if (stmt->objtype != OBJECT_MATVIEW)
					break;
				am = stmt->into->accessMethod ? stmt->into->accessMethod :
					default_table_access_method;
				if (am_name_is_ours(am))
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("CREATE MATERIALIZED VIEW ... USING %s is not supported (materialized view \"%s\")",
									am, stmt->into->rel->relname),
							 errdetail("A materialized view stores rows; a %s table keeps only a summary of the rows inserted, and refreshing would empty it.",
									   am),
							 errhint("Create a table USING %s and fill it with INSERT INTO ... SELECT.",
									 am)));
				break;
			}
		case T_RefreshMatViewStmt:
			relid = rangevar_relid(((RefreshMatViewStmt *) parsetree)->relation);
			if (is_structure(relid))
				refuse("REFRESH MATERIALIZED VIEW", relid, NULL, NULL,
					   SSR_MATVIEW);
			break;
		case T_AlterTableStmt:
			{
				AlterTableStmt *stmt = (AlterTableStmt *) parsetree;

				relid = rangevar_relid(stmt->relation);
				if (!OidIsValid(relid))
					break;
				reached = reached_relations(relid, stmt->relation->inh);
				check_alter_cmds(stmt->cmds, relid, reached);
				check_row_type_users(stmt->cmds, relid, reached);
				check_index_constraints(stmt->cmds, relid, stmt->relation->inh);
				break;
			}
		case T_SecLabelStmt:

			/*
			 * The trigger fires on SECURITY LABEL only so that calling it
			 * loads the library, whose _PG_init registers the label
			 * provider before PostgreSQL looks it up; the provider's own
			 * hook checks the label.
			 */
			break;
		default:
			break;
	}
}

/* ---- table_rewrite ---- */

static void
guard_rewrite(Node *parsetree, CommandTag tag)
{
	Oid			relid = DatumGetObjectId(OidFunctionCall0(F_PG_EVENT_TRIGGER_TABLE_REWRITE_OID));
	int			reason = DatumGetInt32(OidFunctionCall0(F_PG_EVENT_TRIGGER_TABLE_REWRITE_REASON));
	AlterTableStmt *stmt = parsetree && IsA(parsetree, AlterTableStmt) ?
		(AlterTableStmt *) parsetree : NULL;
	Oid			named = stmt ? rangevar_relid(stmt->relation) : InvalidOid;
	const char *what;

	if (is_structure(relid))
	{
		if (reason & AT_REWRITE_ACCESS_METHOD)
			what = "ALTER TABLE ... SET ACCESS METHOD";
		else if (reason & AT_REWRITE_ALTER_PERSISTENCE)
			what = "ALTER TABLE ... SET LOGGED/UNLOGGED";
		else if (reason & AT_REWRITE_COLUMN_REWRITE)
			what = tag == CMDTAG_ALTER_TYPE ?
				"ALTER TYPE ... ALTER ATTRIBUTE ... TYPE" :
				"ALTER TABLE ... ALTER COLUMN ... TYPE";
		else if (reason & AT_REWRITE_DEFAULT_VAL)
			what = tag == CMDTAG_ALTER_TYPE ? "ALTER TYPE ... ADD ATTRIBUTE" :
				"ALTER TABLE ... ADD COLUMN with a volatile default";
		else
			what = psprintf("%s rewriting the table", GetCommandTagName(tag));
		refuse(what, relid, via_text(named, relid), NULL, SSR_REWRITE);
	}
	if (stmt == NULL)
		return;
	/* a heap (or a parent) being converted into a structure */
	check_set_access_method(stmt->cmds, relid);
	/* the same ALTER also reaches structures below the table rewritten first */
	if (OidIsValid(named))
		check_alter_cmds(stmt->cmds, named,
						 reached_relations(named, stmt->relation->inh));
}

/* ---- ddl_command_end ---- */

/*
 * Call the event trigger support function fnoid (a set-returning function
 * without arguments, such as pg_event_trigger_ddl_commands()) through
 * fmgr, not SQL, to read its rows one at a time into r->slot
 * (ss_event_rows_next), then free them (ss_event_rows_end).
 */
void
ss_event_rows_begin(SSEventRows *r, Oid fnoid)
{
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, 0);
	ReturnSetInfo rsinfo;
	ExprContext *econtext = CreateStandaloneExprContext();

	fmgr_info(fnoid, &flinfo);
	memset(&rsinfo, 0, sizeof(rsinfo));
	rsinfo.type = T_ReturnSetInfo;
	rsinfo.econtext = econtext;
	rsinfo.allowedModes = (int) SFRM_Materialize;
	rsinfo.returnMode = SFRM_ValuePerCall;
	InitFunctionCallInfoData(*fcinfo, &flinfo, 0, InvalidOid, NULL,
							 (Node *) &rsinfo);
	(void) FunctionCallInvoke(fcinfo);
	if (rsinfo.returnMode != SFRM_Materialize || rsinfo.setResult == NULL)
		elog(ERROR, "function %u did not materialize its result", fnoid);
	FreeExprContext(econtext, true);
	r->rows = rsinfo.setResult;
	r->slot = MakeSingleTupleTableSlot(rsinfo.setDesc, &TTSOpsMinimalTuple);
}

/* The next row into r->slot; false after the last. */
bool
ss_event_rows_next(SSEventRows *r)
{
	return tuplestore_gettupleslot(r->rows, true, false, r->slot);
}

/* The oid in column attno of r's row (InvalidOid if it is NULL). */
Oid
ss_event_rows_oid(SSEventRows *r, AttrNumber attno)
{
	bool		isnull;
	Datum		d = slot_getattr(r->slot, attno, &isnull);

	return isnull ? InvalidOid : DatumGetObjectId(d);
}

void
ss_event_rows_end(SSEventRows *r)
{
	ExecDropSingleTupleTableSlot(r->slot);
	tuplestore_end(r->rows);
}

/*
 * The commands the statement collected, as pg_event_trigger_ddl_commands()
 * returns them (its "command" column is the CollectedCommand).
 */
static List *
collected_commands(void)
{
	SSEventRows r;
	List	   *result = NIL;

	ss_event_rows_begin(&r, F_PG_EVENT_TRIGGER_DDL_COMMANDS);
	while (ss_event_rows_next(&r))
	{
		bool		isnull;
		Datum		d = slot_getattr(r.slot, r.slot->tts_tupleDescriptor->natts,
									 &isnull);

		if (!isnull)
			result = lappend(result, DatumGetPointer(d));
	}
	ss_event_rows_end(&r);
	return result;
}

/* An oid column of the catalog row whose oid is objid (by its oid index). */
static Oid
catalog_row_oid(Oid catalog, Oid oidindex, AttrNumber oidatt, Oid objid,
				AttrNumber wanted)
{
	Relation	rel = table_open(catalog, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			result = InvalidOid;

	ScanKeyInit(&key, oidatt, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(objid));
	scan = systable_beginscan(rel, oidindex, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, wanted, RelationGetDescr(rel), &isnull);

		if (!isnull)
			result = DatumGetObjectId(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * The relation an object the command created or altered belongs to, or
 * InvalidOid; *recurse says whether the object also reaches the relation's
 * partitions and children (a trigger on a partitioned table is cloned to
 * its partitions, a rule is not).
 */
static Oid
object_relation(const ObjectAddress *addr, bool *recurse)
{
	HeapTuple	tup;
	Oid			relid = InvalidOid;
	char		relkind;

	*recurse = true;
	switch (addr->classId)
	{
		case RelationRelationId:
			relkind = rel_kind(addr->objectId);
			if (relkind == RELKIND_INDEX || relkind == RELKIND_PARTITIONED_INDEX)
				return IndexGetRelation(addr->objectId, true);
			return addr->objectId;
		case TriggerRelationId:
			return catalog_row_oid(TriggerRelationId, TriggerOidIndexId,
								   Anum_pg_trigger_oid, addr->objectId,
								   Anum_pg_trigger_tgrelid);
		case RewriteRelationId:
			*recurse = false;
			return catalog_row_oid(RewriteRelationId, RewriteOidIndexId,
								   Anum_pg_rewrite_oid, addr->objectId,
								   Anum_pg_rewrite_ev_class);
		case ConstraintRelationId:
			tup = SearchSysCache1(CONSTROID, ObjectIdGetDatum(addr->objectId));
			if (HeapTupleIsValid(tup))
			{
				relid = ((Form_pg_constraint) GETSTRUCT(tup))->conrelid;
				ReleaseSysCache(tup);
			}
			return relid;
		default:
			return InvalidOid;
	}
}

static void
check_collected(CollectedCommand *cmd, CommandTag tag)
{
	ObjectAddress addr;
	Oid			relid;
	bool		recurse;
	List	   *reached;

	switch (cmd->type)
	{
		case SCT_Simple:
			addr = cmd->d.simple.address;
			break;
		case SCT_AlterTable:
			ObjectAddressSet(addr, cmd->d.alterTable.classId,
							 cmd->d.alterTable.objectId);
			break;
		default:
			return;
	}
	if (!OidIsValid(addr.objectId))
		return;

	if (addr.classId == PublicationRelationId)
	{
		check_publication(addr.objectId, tag);
		return;
	}

	relid = object_relation(&addr, &recurse);
	if (!OidIsValid(relid))
		return;
	if (cmd->type == SCT_AlterTable)
	{
		ListCell   *lc;
		List	   *subcmds = NIL;

		if (cmd->parsetree && IsA(cmd->parsetree, AlterTableStmt) &&
			((AlterTableStmt *) cmd->parsetree)->relation)
			recurse = ((AlterTableStmt *) cmd->parsetree)->relation->inh;
		reached = reached_relations(relid, recurse);
		/* the relations the subcommands reported touching, e.g. children */
		foreach(lc, cmd->d.alterTable.subcmds)
		{
			CollectedATSubcmd *sub = (CollectedATSubcmd *) lfirst(lc);

			subcmds = lappend(subcmds, sub->parsetree);
			if (sub->address.classId == RelationRelationId &&
				OidIsValid(sub->address.objectId))
				reached = list_append_unique_oid(reached, sub->address.objectId);
		}
		check_alter_cmds(subcmds, relid, reached);
	}
	else
		reached = reached_relations(relid, recurse);
	check_reached_state(reached, relid, tag);
	/* a partition created or attached: its tree must stay one kind */
	ss_check_partition_trees(reached);
}

static void
guard_end(Node *parsetree, CommandTag tag)
{
	ListCell   *lc;

	foreach(lc, collected_commands())
		check_collected((CollectedCommand *) lfirst(lc), tag);

	/*
	 * CREATE/ALTER PUBLICATION: look at the whole publication whatever
	 * PostgreSQL collected for it (ALTER PUBLICATION ... ADD TABLE reports
	 * the publication, not the table).
	 */
	if (parsetree && IsA(parsetree, CreatePublicationStmt))
		check_publication(get_publication_oid(((CreatePublicationStmt *) parsetree)->pubname, false), tag);
	else if (parsetree && IsA(parsetree, AlterPublicationStmt))
		check_publication(get_publication_oid(((AlterPublicationStmt *) parsetree)->pubname, false), tag);
}

/* ---- sql_drop ---- */

/* A column pg_event_trigger_dropped_objects() reported. */
typedef struct SSDroppedColumn
{
	Oid			relid;
	char	   *identity;		/* its object_identity, e.g. public.t.k */
} SSDroppedColumn;

/*
 * DROP ... CASCADE drops the columns that depend on what it drops: a column
 * of a dropped domain, composite type or collation, a generated column
 * whose function is dropped.  A structure that lost its key or weight
 * column silently counts something else, or nothing; a structure whose
 * column's type lost an attribute hashes its keys differently.  Refuse
 * both, unless the structure itself is dropped too.  Columns of a dropped
 * table are reported as well and are skipped with it.  The catalog rows of
 * the dropped objects are already gone, and the remaining relations still
 * there, so the lookups below see the state after the drop.
 */
static void
guard_drop(Node *parsetree, CommandTag tag)
{
	SSEventRows r;
	List	   *dropped_rels = NIL;
	List	   *columns = NIL;
	ListCell   *lc;

	/* columns: classid, objid, objsubid, ..., object_identity (10th) */
	ss_event_rows_begin(&r, F_PG_EVENT_TRIGGER_DROPPED_OBJECTS);
	while (ss_event_rows_next(&r))
	{
		bool		isnull;
		Oid			classid = ss_event_rows_oid(&r, 1);
		Oid			objid = ss_event_rows_oid(&r, 2);
		int32		objsubid = DatumGetInt32(slot_getattr(r.slot, 3, &isnull));
		Datum		identity;

		if (classid != RelationRelationId)
			continue;
		if (objsubid == 0)
		{
			dropped_rels = lappend_oid(dropped_rels, objid);
			continue;
		}
		identity = slot_getattr(r.slot, 10, &isnull);
		{
			SSDroppedColumn *col = palloc(sizeof(SSDroppedColumn));

			col->relid = objid;
			col->identity = isnull ? psprintf("%u.%d", objid, objsubid) :
				TextDatumGetCString(identity);
			columns = lappend(columns, col);
		}
	}
	ss_event_rows_end(&r);

	foreach(lc, columns)
	{
		SSDroppedColumn *col = (SSDroppedColumn *) lfirst(lc);
		const char *what = psprintf("%s dropping column %s",
									GetCommandTagName(tag), col->identity);
		char	   *via = NULL;
		Oid			structure;

		if (list_member_oid(dropped_rels, col->relid))
			continue;
		if (is_structure(col->relid))
			refuse(what, col->relid, NULL, NULL, SSR_COLUMNS);
		structure = structure_using_row_type(col->relid, &via);
		if (OidIsValid(structure))
			refuse(what, structure, via, NULL, SSR_KEY_TYPE);
	}
}

/* ---- the trigger functions ---- */

/*
 * The event trigger data of a trigger function's call (refused unless an
 * event trigger made it), or NULL in binary-upgrade mode, where the
 * trigger functions do nothing: pg_upgrade recreates what existed.
 */
EventTriggerData *
ss_event_trigger_data(FunctionCallInfo fcinfo)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" must be fired by an event trigger",
						get_func_name(fcinfo->flinfo->fn_oid))));
	return IsBinaryUpgrade ? NULL : (EventTriggerData *) fcinfo->context;
}

static Datum
guard_fire(FunctionCallInfo fcinfo,
		   void (*guard) (Node *parsetree, CommandTag tag))
{
	EventTriggerData *trigdata = ss_event_trigger_data(fcinfo);

	if (trigdata != NULL)
		guard(trigdata->parsetree, trigdata->tag);
	PG_RETURN_VOID();
}

/* The trigger functions, one per event (sql/parts/10_guard.sql). */
#define GUARD_FUNCTION(fname, guard) \
	PG_FUNCTION_INFO_V1(fname); \
	Datum fname(PG_FUNCTION_ARGS) { return guard_fire(fcinfo, guard); }

GUARD_FUNCTION(streamsketch_guard_start, guard_start)
GUARD_FUNCTION(streamsketch_guard_rewrite, guard_rewrite)
GUARD_FUNCTION(streamsketch_guard_end, guard_end)
GUARD_FUNCTION(streamsketch_guard_drop, guard_drop)
