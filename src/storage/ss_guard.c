/*-------------------------------------------------------------------------
 *
 * ss_guard.c
 *	  Refuse, with a clear error, the operations that would otherwise be
 *	  silent no-ops or silently lose a structure's contents.
 *
 * UPDATE, DELETE and MERGE would scan the (row-less) structure and do
 * nothing, so they are refused in ExecutorStart.  Triggers and indexes
 * make no sense without stored rows.  ALTER TABLE forms that rewrite the
 * table would feed the scan output (nothing) into a new structure, so only
 * forms that keep the pages are allowed.  Publications are refused because
 * generic WAL is not decoded by logical replication.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "streamsketch.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;

static Oid
get_rel_relam(Oid relid)
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
	return OidIsValid(relid) && ss_relam_is_streamsketch(get_rel_relam(relid));
}

static Oid
rangevar_streamsketch(RangeVar *rv)
{
	Oid			relid;

	if (rv == NULL)
		return InvalidOid;
	relid = RangeVarGetRelid(rv, NoLock, true);
	return relid_is_streamsketch(relid) ? relid : InvalidOid;
}

static void
refuse_relid(Oid relid, const char *what, const char *hint)
{
	char	   *amname = get_am_name(get_rel_relam(relid));

	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported on %s table \"%s\"",
					what, amname, get_rel_name(relid)),
			 errdetail("A %s table is a streaming summary, not a set of stored rows.",
					   amname),
			 hint ? errhint("%s", hint) : 0));
}

/* ALTER TABLE subcommands that keep the structure's pages as they are. */
static bool
alter_table_cmd_is_safe(AlterTableCmd *cmd)
{
	switch (cmd->subtype)
	{
		case AT_ChangeOwner:
		case AT_ColumnDefault:
		case AT_SetStatistics:
		case AT_SetTableSpace:	/* copies the pages */
		case AT_DropNotNull:
		case AT_SetNotNull:
		case AT_EnableRowSecurity:
		case AT_DisableRowSecurity:
		case AT_ForceRowSecurity:
		case AT_NoForceRowSecurity:
			return true;
		default:
			return false;
	}
}

static void
check_alter_table(AlterTableStmt *stmt)
{
	Oid			relid = rangevar_streamsketch(stmt->relation);
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) lfirst(lc);

		if (!IsA(cmd, AlterTableCmd))
			continue;
		/* converting any table into a structure would lose its rows' meaning */
		if (cmd->subtype == AT_SetAccessMethod && cmd->name &&
			ss_relam_is_streamsketch(get_table_am_oid(cmd->name, true)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("ALTER TABLE SET ACCESS METHOD %s is not supported", cmd->name),
					 errhint("Create the structure and fill it with INSERT INTO ... SELECT.")));
		if (OidIsValid(relid) && !alter_table_cmd_is_safe(cmd))
			refuse_relid(relid, "this form of ALTER TABLE",
						 "Only OWNER, SET TABLESPACE, column defaults, NOT NULL, statistics and row security can be changed; create a new structure instead.");
	}
}

static void
check_publication_objects(List *pubobjects)
{
	ListCell   *lc;

	foreach(lc, pubobjects)
	{
		PublicationObjSpec *obj = (PublicationObjSpec *) lfirst(lc);
		Oid			relid;

		if (obj->pubobjtype != PUBLICATIONOBJ_TABLE || obj->pubtable == NULL)
			continue;
		relid = rangevar_streamsketch(obj->pubtable->relation);
		if (OidIsValid(relid))
			refuse_relid(relid, "logical replication",
						 "Generic WAL is not decoded; use physical replication.");
	}
}

static void
ss_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
				  bool readOnlyTree, ProcessUtilityContext context,
				  ParamListInfo params, QueryEnvironment *queryEnv,
				  DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	Oid			relid;

	switch (nodeTag(parsetree))
	{
		case T_CreateTrigStmt:
			relid = rangevar_streamsketch(((CreateTrigStmt *) parsetree)->relation);
			if (OidIsValid(relid))
				refuse_relid(relid, "CREATE TRIGGER", NULL);
			break;
		case T_IndexStmt:
			relid = rangevar_streamsketch(((IndexStmt *) parsetree)->relation);
			if (OidIsValid(relid))
				refuse_relid(relid, "CREATE INDEX",
							 "Point queries use the structure's own functions.");
			break;
		case T_AlterTableStmt:
			check_alter_table((AlterTableStmt *) parsetree);
			break;
		case T_CreatePublicationStmt:
			check_publication_objects(((CreatePublicationStmt *) parsetree)->pubobjects);
			break;
		case T_AlterPublicationStmt:
			check_publication_objects(((AlterPublicationStmt *) parsetree)->pubobjects);
			break;
		default:
			break;
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
							queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

static void
ss_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *stmt = queryDesc->plannedstmt;
	CmdType		cmd = stmt->commandType;

	if ((cmd == CMD_UPDATE || cmd == CMD_DELETE || cmd == CMD_MERGE) &&
		!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		ListCell   *lc;

		foreach(lc, stmt->resultRelations)
		{
			RangeTblEntry *rte = rt_fetch(lfirst_int(lc), stmt->rtable);

			if (relid_is_streamsketch(rte->relid))
				refuse_relid(rte->relid,
							 cmd == CMD_UPDATE ? "UPDATE" :
							 cmd == CMD_DELETE ? "DELETE" : "MERGE",
							 "Use TRUNCATE to reset the structure.");
		}
	}

	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

void
ss_guard_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = ss_ProcessUtility;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = ss_ExecutorStart;
}
