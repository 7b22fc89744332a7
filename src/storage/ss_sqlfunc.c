/*-------------------------------------------------------------------------
 *
 * ss_sqlfunc.c
 *	  Checks shared by the SQL functions of every structure (see
 *	  ss_sqlfunc.h), and streamsketch_log_info, which every structure
 *	  with a change log answers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_sqlfunc.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "parser/parse_coerce.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(streamsketch_log_info);
PG_FUNCTION_INFO_V1(streamsketch_log_state);

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

/*
 * Open relid for a SQL function of structure s: locked
 * (ss_sql_lock_relid), a table of that structure, usable here
 * (ss_sql_check_access), and allowed to the caller (mode, or ownership).
 */
Relation
ss_sql_open_structure(Oid relid, LOCKMODE lockmode, const char *writer,
					  AclMode mode, const SSStructure *s)
{
	Relation	rel = relation_open(ss_sql_lock_relid(relid, lockmode, writer),
									lockmode);

	if (rel->rd_rel->relkind != RELKIND_RELATION || ss_structure_ops(rel) != s)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" is not a %s table",
						RelationGetRelationName(rel), s->name),
				 errhint("Create one with CREATE TABLE ... USING %s or %s.",
						 s->amname, s->constructor)));
	ss_sql_check_access(rel, writer);
	ss_sql_check_privilege(rel, mode);
	return rel;
}

void
ss_sql_check_privilege(Relation rel, AclMode mode)
{
	AclResult	aclresult;

	if (mode == SS_ACL_OWNER)
		aclresult = pg_class_ownercheck(RelationGetRelid(rel), GetUserId()) ?
			ACLCHECK_OK : ACLCHECK_NOT_OWNER;
	else
		aclresult = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), mode);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));
}

void
ss_sql_check_row_security(Relation rel, const char *fname)
{
	Oid			relid = RelationGetRelid(rel);

	/*
	 * The decision SELECT's rewriter takes (get_row_security_policies):
	 * with noError false, row_security = off where policies would apply is
	 * its error, raised here.  Nothing of the structure has been read yet.
	 */
	if (check_enable_rls(relid, InvalidOid, false) != RLS_ENABLED)
		return;

	/*
	 * The functions answer from the whole structure (a sketch's counters, a
	 * filter's fingerprints, a tree's groups): a policy's quals cannot be
	 * applied to what they read, so they refuse.
	 */
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("%s cannot read table \"%s\" under row-level security",
					fname, RelationGetRelationName(rel)),
			 errdetail("Row-level security policies of the table apply to role \"%s\", and %s answers from the whole structure: it could show rows or keys that the policies hide.",
					   GetUserNameFromId(GetUserId(), false), fname),
			 pg_class_ownercheck(relid, GetUserId()) ?
			 errhint("Read the table with SELECT, which applies the policies, or let its owner bypass them with ALTER TABLE ... NO FORCE ROW LEVEL SECURITY.") :
			 errhint("Read the table with SELECT, which applies the policies, or call %s as the table's owner or as a role with BYPASSRLS.",
					 fname)));
}

/*
 * The relation a string or regclass argument names, as a qualified name
 * for a hint, or NULL when it names none (nothing is locked or raised).
 */
static char *
relation_named_by(Oid argtype, Datum value)
{
	Oid			relid = InvalidOid;

	if (argtype == REGCLASSOID)
		relid = DatumGetObjectId(value);
	else
	{
		char	   *str = argtype == NAMEOID ?
			pstrdup(NameStr(*DatumGetName(value))) : TextDatumGetCString(value);
		List	   *names;

		/*
		 * SplitIdentifierString reports bad syntax instead of raising it;
		 * the lookups raise nothing either (not even a schema's USAGE).
		 */
		if (SplitIdentifierString(str, '.', &names))
		{
			if (list_length(names) == 1)
				relid = RelnameGetRelid(linitial(names));
			else if (list_length(names) == 2)
				relid = get_relname_relid(lsecond(names),
										  get_namespace_oid(linitial(names), true));
		}
	}
	if (!OidIsValid(relid) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return NULL;
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

Oid
ss_sql_rowtype_relid(FunctionCallInfo fcinfo, const char *fname,
					 const char *amname)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	Oid			relid = OidIsValid(argtype) ? get_typ_typrelid(argtype) : InvalidOid;
	char	   *named = NULL;

	if (OidIsValid(relid))
		return relid;

	/*
	 * The table's name in quotes, bfile_window('t', ...), is the natural
	 * mistake: the first parameter is anycompatible, which resolves the
	 * unknown literal to text (anyelement would fail in the parser with no
	 * hint), so that it can be answered here.
	 */
	if (argtype != TEXTOID && argtype != VARCHAROID && argtype != BPCHAROID &&
		argtype != NAMEOID && argtype != REGCLASSOID)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("the first argument of %s must be a %s table's row type",
						fname, amname),
				 errhint("Pass NULL::table_name.")));
	if (!PG_ARGISNULL(0))
		named = relation_named_by(argtype, PG_GETARG_DATUM(0));
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("the first argument of %s must be a %s table's row type, not its name",
					fname, amname),
			 errdetail("The argument is of type %s.  The function finds the table, and the type of the rows it returns, from the type of its first argument.",
					   format_type_be(argtype)),
			 named != NULL ?
			 errhint("Write %s(NULL::%s, ...).", fname, named) :
			 errhint("Write the table as NULL::table_name, e.g. %s(NULL::public.t, ...).",
					 fname)));
	return InvalidOid;			/* keep compiler quiet */
}

/*
 * A function's argument as a value of a column's type: its own type, or
 * one coerced to it as an implicit cast would (an unknown literal goes
 * through the type's input function); else 42804 naming argument `argno`
 * (what: "key", "time") of function fname and the column.
 */
Datum
ss_coerce_argument(Datum value, Oid argtype, Oid typid, int32 typmod,
				   const char *what, int argno, const char *colname,
				   const char *fname)
{
	Oid			funcid;

	if (argtype == typid)
		return value;
	if (argtype == UNKNOWNOID)
	{
		Oid			typinput,
					typioparam;

		getTypeInputInfo(typid, &typinput, &typioparam);
		return OidInputFunctionCall(typinput, DatumGetCString(value),
									typioparam, typmod);
	}
	switch (find_coercion_pathway(typid, argtype, COERCION_IMPLICIT, &funcid))
	{
		case COERCION_PATH_RELABELTYPE:
			return value;
		case COERCION_PATH_FUNC:
			return OidFunctionCall1(funcid, value);
		case COERCION_PATH_COERCEVIAIO:
			{
				Oid			typoutput,
							typinput,
							typioparam;
				bool		varlena;

				getTypeOutputInfo(argtype, &typoutput, &varlena);
				getTypeInputInfo(typid, &typinput, &typioparam);
				return OidInputFunctionCall(typinput,
											OidOutputFunctionCall(typoutput, value),
											typioparam, typmod);
			}
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("%s %d of %s is of type %s, but column \"%s\" is of type %s",
							what, argno, fname, format_type_be(argtype), colname,
							format_type_be(typid)),
					 errhint("Cast the %s to %s.", what, format_type_be(typid))));
	}
	return (Datum) 0;			/* keep compiler quiet */
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

/* Is rel a structure with a change log? */
static bool
has_change_log(Relation rel)
{
	const SSStructure *s = ss_structure_ops(rel);

	return rel->rd_rel->relkind == RELKIND_RELATION && s != NULL &&
		s->consolidate != NULL;
}

/*
 * The row of streamsketch_log_info and streamsketch_log_state, from rel's
 * metapage; closes rel.
 */
static Datum
log_state_row(FunctionCallInfo fcinfo, Relation rel)
{
	TupleDesc	tupdesc;
	SSLogMeta	log;
	Datum		values[6];
	bool		nulls[6] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	ss_log_meta(rel, &log);
	values[0] = Int64GetDatum((int64) (log.end_pos - log.head_pos));
	values[1] = Int64GetDatum((int64) log.nrecords);
	values[2] = Int64GetDatum((int64) log.npages);
	values[3] = Int64GetDatum((int64) log.nfree);
	values[4] = Int64GetDatum(log.consolidations);
	values[5] = Int64GetDatum((int64) RelationGetNumberOfBlocks(rel));
	relation_close(rel, AccessShareLock);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * streamsketch_log_info(structure regclass) returns the state of a
 * structure's change log as its metapage has it, without consolidating:
 * what a DBA watches to see whether rounds keep up with the writers.
 */
Datum
streamsketch_log_info(PG_FUNCTION_ARGS)
{
	Relation	rel;
	AclResult	aclresult;

	rel = relation_open(ss_sql_lock_relid(PG_GETARG_OID(0), AccessShareLock, NULL),
						AccessShareLock);
	if (!has_change_log(rel))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a streamsketch structure with a change log",
						RelationGetRelationName(rel))));
	aclresult = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_SELECT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(rel->rd_rel->relkind),
					   RelationGetRelationName(rel));
	ss_sql_check_access(rel, NULL);
	PG_RETURN_DATUM(log_state_row(fcinfo, rel));
}

/*
 * streamsketch_log_state(relid oid) returns the same figures for the
 * streamsketch_pending view, which lists every structure of the database
 * for an operator, as pg_stat_all_tables does: no privilege is needed
 * (sizes and counts of a log are not its contents), no lock is waited
 * for, and a relation that is not a structure, is another session's
 * temporary table or is locked against readers gives NULL.
 */
Datum
streamsketch_log_state(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;

	if (!ConditionalLockRelationOid(relid, AccessShareLock))
		PG_RETURN_NULL();
	rel = try_relation_open(relid, NoLock);
	if (rel == NULL)
	{
		UnlockRelationOid(relid, AccessShareLock);
		PG_RETURN_NULL();
	}
	if (RELATION_IS_OTHER_TEMP(rel) || !has_change_log(rel))
	{
		relation_close(rel, AccessShareLock);
		PG_RETURN_NULL();
	}
	PG_RETURN_DATUM(log_state_row(fcinfo, rel));
}
