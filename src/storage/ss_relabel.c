/*-------------------------------------------------------------------------
 *
 * ss_relabel.c
 *	  Labels that follow renames.
 *
 * A structure's label is its metapage's parameters as text, the copy a
 * dump restores (ss_params.c).  Where that text names objects (a cbt's
 * definition names its columns, aggregates, functions, types, collations
 * and their schemas), the metapage holds them by object id, so a rename
 * changes nothing the structure runs, only the text a dump needs.  The
 * ddl_command_end trigger streamsketch_follow_renames writes again the
 * labels whose text changed, in the renaming transaction, so that a dump
 * taken afterwards names what exists.
 *
 * Which structures: those the statement altered, those that depend (in
 * pg_depend) on an object it altered or on that object's row type, and
 * every structure when it altered a schema, an extension or a built-in
 * object (their members' or their own names reach definitions without a
 * dependency of the structure on that object).  A structure without a
 * label (made before labels existed) is left alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "commands/event_trigger.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "streamsketch.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(streamsketch_follow_renames);

static bool
is_structure_relation(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		result = false;

	if (HeapTupleIsValid(tup))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);

		result = form->relkind == RELKIND_RELATION &&
			ss_relam_is_streamsketch(form->relam);
		ReleaseSysCache(tup);
	}
	return result;
}

/* Add the structures that depend on (classid, objid) to *rels. */
static void
add_dependent_structures(Oid classid, Oid objid, List **rels)
{
	Relation	depRel = table_open(DependRelationId, AccessShareLock);
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;

	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(classid));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(objid));
	scan = systable_beginscan(depRel, DependReferenceIndexId, true, NULL, 2,
							  key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

		if (dep->classid == RelationRelationId &&
			is_structure_relation(dep->objid))
			*rels = list_append_unique_oid(*rels, dep->objid);
	}
	systable_endscan(scan);
	table_close(depRel, AccessShareLock);
}

/* Every structure of the database. */
static List *
all_structures(void)
{
	Relation	classRel = table_open(RelationRelationId, AccessShareLock);
	SysScanDesc scan = systable_beginscan(classRel, InvalidOid, false, NULL,
										  0, NULL);
	HeapTuple	tup;
	List	   *rels = NIL;

	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);

		if (form->relkind == RELKIND_RELATION &&
			ss_relam_is_streamsketch(form->relam))
			rels = lappend_oid(rels, form->oid);
	}
	systable_endscan(scan);
	table_close(classRel, AccessShareLock);
	return rels;
}

/* The structures whose labels the statement's commands may have changed. */
static List *
touched_structures(void)
{
	SSEventRows r;
	List	   *rels = NIL;
	bool		all = false;

	/* pg_event_trigger_ddl_commands(): classid, objid, objsubid, ... */
	ss_event_rows_begin(&r, F_PG_EVENT_TRIGGER_DDL_COMMANDS);
	while (!all && ss_event_rows_next(&r))
	{
		Oid			classid = ss_event_rows_oid(&r, 1);
		Oid			objid = ss_event_rows_oid(&r, 2);

		if (!OidIsValid(classid) || !OidIsValid(objid))
			continue;
		if (classid == NamespaceRelationId || classid == ExtensionRelationId ||
			objid < FirstNormalObjectId)
			all = true;
		else if (classid == RelationRelationId)
		{
			Oid			rowtype = get_rel_type_id(objid);

			if (is_structure_relation(objid))
				rels = list_append_unique_oid(rels, objid);
			if (OidIsValid(rowtype))
				add_dependent_structures(TypeRelationId, rowtype, &rels);
		}
		add_dependent_structures(classid, objid, &rels);
	}
	ss_event_rows_end(&r);
	return all ? all_structures() : rels;
}

/* Write relid's label again if its text changed. */
static void
relabel(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	const SSStructure *ops = ss_structure_ops(rel);
	char	   *label;
	char	   *now;

	if (ops == NULL || (label = ss_get_label(relid)) == NULL)
	{
		relation_close(rel, AccessShareLock);
		return;
	}
	if (ops->rebind != NULL)
		ops->rebind(rel);
	now = ss_params_to_label(ops, ss_get_state(rel, ops));
	if (strcmp(now, label) != 0)
		ss_set_label(relid, now);
	relation_close(rel, AccessShareLock);
}

/*
 * The ddl_command_end trigger after ALTER ... RENAME, SET SCHEMA and the
 * like (sql/parts/10_guard.sql).
 */
Datum
streamsketch_follow_renames(PG_FUNCTION_ARGS)
{
	ListCell   *lc;

	if (ss_event_trigger_data(fcinfo) == NULL)
		PG_RETURN_VOID();
	foreach(lc, touched_structures())
		relabel(lfirst_oid(lc));
	PG_RETURN_VOID();
}
