/*-------------------------------------------------------------------------
 *
 * ss_guard.c
 *	  Refuse UPDATE, DELETE and MERGE on a structure, also in a WITH query,
 *	  which would otherwise scan the (row-less) structure and silently do
 *	  nothing.
 *
 * Event triggers do not see DML, so this is an ExecutorStart hook.  It is
 * in place in every session by the time it matters: parsing a statement
 * that names a structure builds its relcache entry, which calls the access
 * method's handler and so loads the library (and runs _PG_init) before the
 * statement reaches the executor; so does planning a statement on a parent
 * whose partitions or children are structures.  The guard test checks it in
 * a fresh session.
 *
 * All DDL refusals are event triggers (ss_evtrigger.c): they fire whether
 * or not the library is loaded and see everything a statement reached.  A
 * ProcessUtility hook would not be installed yet in a fresh session, so it
 * is no longer used; nothing the event triggers miss would be caught by
 * it (single-user mode fires no event triggers, by PostgreSQL's design for
 * repairs, and a hook there would depend on whether the library happened
 * to be loaded).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "streamsketch.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

static ExecutorStart_hook_type prev_ExecutorStart = NULL;

/* The access method of relation relid (pg_class), or InvalidOid. */
Oid
ss_get_rel_relam(Oid relid)
{
	HeapTuple	tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			relam;

	if (!HeapTupleIsValid(tp))
		return InvalidOid;
	relam = ((Form_pg_class) GETSTRUCT(tp))->relam;
	ReleaseSysCache(tp);
	return relam;
}

static bool
relid_is_streamsketch(Oid relid)
{
	return OidIsValid(relid) && ss_relam_is_streamsketch(ss_get_rel_relam(relid));
}

static void
refuse_relid(Oid relid, const char *what, const char *hint)
{
	char	   *amname = get_am_name(ss_get_rel_relam(relid));

	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported on %s table \"%s\"",
					what, amname, get_rel_name(relid)),
			 errdetail("A %s table is a streaming summary, not a set of stored rows.",
					   amname),
			 hint ? errhint("%s", hint) : 0));
}

/*
 * Refuse a ModifyTable node that updates, deletes or merges into a
 * structure.  INSERT is what a structure is for and passes.
 */
static void
check_modify_table(Plan *plan, PlannedStmt *stmt)
{
	ModifyTable *mt;
	ListCell   *lc;

	if (plan == NULL || !IsA(plan, ModifyTable))
		return;
	mt = (ModifyTable *) plan;
	if (mt->operation != CMD_UPDATE && mt->operation != CMD_DELETE &&
		mt->operation != CMD_MERGE)
		return;
	foreach(lc, mt->resultRelations)
	{
		RangeTblEntry *rte = rt_fetch(lfirst_int(lc), stmt->rtable);

		if (relid_is_streamsketch(rte->relid))
			refuse_relid(rte->relid,
						 mt->operation == CMD_UPDATE ? "UPDATE" :
						 mt->operation == CMD_DELETE ? "DELETE" : "MERGE",
						 "Use TRUNCATE to reset the structure.");
	}
}

/*
 * Every ModifyTable node of the statement, not only its command type: a
 * data-modifying WITH query (WITH d AS (DELETE FROM s RETURNING *) SELECT
 * ...) is a ModifyTable at the top of one of the statement's subplans,
 * under a SELECT or INSERT.  ModifyTable is always the top node of its
 * query level's plan, so the top nodes are enough.
 */
static void
ss_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *stmt = queryDesc->plannedstmt;

	if (!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		ListCell   *lc;

		check_modify_table(stmt->planTree, stmt);
		foreach(lc, stmt->subplans)
			check_modify_table((Plan *) lfirst(lc), stmt);
	}

	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

void
ss_guard_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = ss_ExecutorStart;
}
