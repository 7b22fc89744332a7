/*-------------------------------------------------------------------------
 *
 * ss_sqlfunc.c
 *	  Checks shared by the SQL functions of every structure (see
 *	  ss_sqlfunc.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "ss_sqlfunc.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/rel.h"
#include "utils/syscache.h"

Oid
ss_sql_lock_relid(Oid relid, LOCKMODE lockmode, const char *writer)
{
	/*
	 * Before the lock: during recovery only RowExclusiveLock or less can be
	 * taken, and a writer would fail later on assigning an xid, both with
	 * messages that do not say what is wrong.
	 */
	if (writer != NULL)
		PreventCommandDuringRecovery(writer);

	/*
	 * As try_relation_open does: lock first, so the relation cannot be
	 * dropped between the check and the caller's relation_open, which then
	 * finds it (the lock is held until the end of the transaction).
	 */
	LockRelationOid(relid, lockmode);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
	{
		UnlockRelationOid(relid, lockmode);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	}
	return relid;
}

void
ss_sql_check_access(Relation rel, const char *writer)
{
	/*
	 * A standby has only the init fork of an unlogged relation: its pages
	 * are not replicated.  PostgreSQL refuses such scans the same way.
	 */
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED &&
		RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot access unlogged structure \"%s\" during recovery",
						RelationGetRelationName(rel)),
				 errdetail("The pages of unlogged tables are not replicated to standbys."),
				 errhint("Query it on the primary, or create it as a logged table.")));

	/* like nextval(): a temporary structure may change in a read-only one */
	if (writer != NULL && !RelationUsesLocalBuffers(rel))
		PreventCommandIfReadOnly(writer);
}

void
ss_check_key_type(Oid typid, const char *typname)
{
	if (OidIsValid(typid) &&
		!SearchSysCacheExists1(TYPEOID, ObjectIdGetDatum(typid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the key type of this %s value does not exist", typname),
				 errdetail("The value's key type has OID %u: the type was dropped after the value was built, or the value comes from another database.",
						   typid)));
}
