/*-------------------------------------------------------------------------
 *
 * ss_remote.c
 *	  Partitions on other servers (ss_remote.h).
 *
 * A partition of a parent may be a foreign table of postgres_fdw whose
 * remote table is a structure on a server that has the extension.  A
 * function called on the parent reaches it by running the same call
 * there and combining the answer as it combines a local partition's.
 * The call goes over postgres_fdw's own connection for the caller's user
 * mapping, inside the remote transaction postgres_fdw opened or opens for
 * this local transaction: it sees what the remote scans of the same query
 * see, and commits or aborts with it.  There is no protocol of our own.
 *
 * postgres_fdw does not install its header, so the few functions used
 * are declared here and looked up by name in the library the foreign
 * data wrapper's handler lives in, once per backend; the library's magic
 * block (checked when it is loaded) makes it one of this major version,
 * whose signatures these are.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/parallel.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "ss_remote.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

/* postgres_fdw's connection.c and postgres_fdw.c, as of PostgreSQL 15 */
typedef struct PgFdwConnState PgFdwConnState;
typedef PGconn *(*GetConnection_fn) (UserMapping *user, bool will_prep_stmt,
									 PgFdwConnState **state);
typedef void (*ReleaseConnection_fn) (PGconn *conn);
typedef PGresult *(*pgfdw_exec_query_fn) (PGconn *conn, const char *query,
										  PgFdwConnState *state);
typedef void (*pgfdw_report_error_fn) (int elevel, PGresult *res,
									   PGconn *conn, bool clear,
									   const char *sql);
typedef int (*set_transmission_modes_fn) (void);
typedef void (*reset_transmission_modes_fn) (int nestlevel);

static struct
{
	bool		loaded;
	GetConnection_fn get_connection;
	ReleaseConnection_fn release_connection;
	pgfdw_exec_query_fn exec_query;
	pgfdw_report_error_fn report_error;
	set_transmission_modes_fn set_transmission_modes;
	reset_transmission_modes_fn reset_transmission_modes;
}			fdw;

#define FDW_HANDLER "postgres_fdw_handler"

static void *
fdw_symbol(const char *library, const char *name)
{
	void	   *fn = load_external_function(library, name, false, NULL);

	if (fn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("library \"%s\" does not export %s()", library, name),
				 errdetail("Partitions on other servers are reached through the connection functions of postgres_fdw of PostgreSQL %s.",
						   PG_MAJORVERSION)));
	return fn;
}

/* Look up postgres_fdw's functions in library, once per backend. */
static void
load_postgres_fdw(const char *library)
{
	if (fdw.loaded)
		return;
	fdw.get_connection = fdw_symbol(library, "GetConnection");
	fdw.release_connection = fdw_symbol(library, "ReleaseConnection");
	fdw.exec_query = fdw_symbol(library, "pgfdw_exec_query");
	fdw.report_error = fdw_symbol(library, "pgfdw_report_error");
	fdw.set_transmission_modes = fdw_symbol(library, "set_transmission_modes");
	fdw.reset_transmission_modes = fdw_symbol(library, "reset_transmission_modes");
	fdw.loaded = true;
}

/*
 * The library of foreign table rel's wrapper when its handler is
 * postgres_fdw's, else an error.
 */
static char *
postgres_fdw_library(Relation rel)
{
	ForeignTable *ft = GetForeignTable(RelationGetRelid(rel));
	ForeignServer *server = GetForeignServer(ft->serverid);
	ForeignDataWrapper *wrapper = GetForeignDataWrapper(server->fdwid);
	char	   *library = NULL;
	bool		served = false;

	if (OidIsValid(wrapper->fdwhandler))
	{
		HeapTuple	tup = SearchSysCache1(PROCOID,
										  ObjectIdGetDatum(wrapper->fdwhandler));
		Datum		d;
		bool		isnull;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for function %u",
				 wrapper->fdwhandler);
		d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
		served = !isnull && strcmp(TextDatumGetCString(d), FDW_HANDLER) == 0;
		d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_probin, &isnull);
		if (served && !isnull)
			library = TextDatumGetCString(d);
		ReleaseSysCache(tup);
	}
	if (library == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partition \"%s\" is a foreign table of foreign-data wrapper \"%s\", not of postgres_fdw",
						RelationGetRelationName(rel), wrapper->fdwname),
				 errdetail("Partitions on other servers are reached through postgres_fdw.")));
	return library;
}

void
ss_remote_check(Relation rel)
{
	ForeignTable *ft = GetForeignTable(RelationGetRelid(rel));

	load_postgres_fdw(postgres_fdw_library(rel));
	/* errors "user mapping not found" as a scan of the table would */
	(void) GetUserMapping(GetUserId(), ft->serverid);
}

/*
 * The remote table of foreign table rel, schema-qualified and quoted:
 * its schema_name and table_name options, else its own names (as
 * postgres_fdw's deparseRelation).
 */
static char *
remote_table_name(Relation rel)
{
	ForeignTable *ft = GetForeignTable(RelationGetRelid(rel));
	const char *nspname = NULL;
	const char *relname = NULL;
	ListCell   *lc;

	foreach(lc, ft->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "schema_name") == 0)
			nspname = defGetString(def);
		else if (strcmp(def->defname, "table_name") == 0)
			relname = defGetString(def);
	}
	if (nspname == NULL)
		nspname = get_namespace_name(RelationGetNamespace(rel));
	if (relname == NULL)
		relname = RelationGetRelationName(rel);
	return quote_qualified_identifier(nspname, relname);
}

/* value of type typid as a literal of that type, for the remote query */
static void
append_literal(StringInfo sql, Datum value, bool isnull, Oid typid)
{
	if (isnull)
		appendStringInfoString(sql, "NULL");
	else
	{
		Oid			typoutput;
		bool		varlena;

		getTypeOutputInfo(typid, &typoutput, &varlena);
		appendStringInfoString(sql,
							   quote_literal_cstr(OidOutputFunctionCall(typoutput,
																		value)));
	}
	/* an unknown-type literal stays one: the remote resolves it as here */
	if (typid != UNKNOWNOID)
		appendStringInfo(sql, "::%s", format_type_be_qualified(typid));
}

/*
 * The name on rel's server of column name of a row of rel: its
 * column_name option, else its own name (as postgres_fdw's deparse).
 * Other columns (an info function's) have their own name.
 */
static const char *
remote_column_name(Relation rel, const char *name)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);
	ListCell   *lc;

	if (attnum == InvalidAttrNumber)
		return name;
	foreach(lc, GetForeignColumnOptions(RelationGetRelid(rel), attnum))
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "column_name") == 0)
			return defGetString(def);
	}
	return name;
}

/*
 * "SELECT " and, with desc, its columns by name and " FROM ", then the
 * function fn of the extension's schema called with rel's remote table
 * as its first argument: a regclass, or with table_row a NULL of the
 * table's row type.  The caller appends the other arguments and ')'.
 */
static void
begin_call_sql(StringInfo sql, Relation rel, Oid nspid, const char *fn,
			   TupleDesc desc, bool table_row)
{
	char	   *table = remote_table_name(rel);

	appendStringInfoString(sql, "SELECT ");
	if (desc != NULL)
	{
		for (int i = 0; i < desc->natts; i++)
		{
			const char *name = NameStr(TupleDescAttr(desc, i)->attname);

			if (i > 0)
				appendStringInfoString(sql, ", ");
			/* a dropped column of the parent's row type: NULL, not asked */
			if (TupleDescAttr(desc, i)->attisdropped)
				appendStringInfoString(sql, "NULL");
			else
				appendStringInfo(sql, "r.%s",
								 quote_identifier(table_row ?
												  remote_column_name(rel, name) :
												  name));
		}
		appendStringInfoString(sql, " FROM ");
	}
	appendStringInfo(sql, "%s(",
					 quote_qualified_identifier(get_namespace_name(nspid), fn));
	if (table_row)
		appendStringInfo(sql, "NULL::%s", table);
	else
		appendStringInfo(sql, "%s::pg_catalog.regclass",
						 quote_literal_cstr(table));
}

/*
 * The call of fcinfo, whose first argument names the structure, as a
 * query: SELECT value, or with desc SELECT desc's columns FROM the call.
 */
static char *
remote_call_sql(Relation rel, FunctionCallInfo fcinfo,
				const NullableDatum *args, TupleDesc desc)
{
	FmgrInfo   *flinfo = fcinfo->flinfo;
	Oid			fn = flinfo->fn_oid;
	bool		variadic = get_fn_expr_variadic(flinfo);
	StringInfoData sql;
	int			transmission;

	initStringInfo(&sql);
	begin_call_sql(&sql, rel, get_func_namespace(fn), get_func_name(fn), desc,
				   get_fn_expr_argtype(flinfo, 0) != REGCLASSOID);

	/* values printed as the remote session reads them (postgres_fdw's) */
	transmission = fdw.set_transmission_modes();
	for (int i = 1; i < PG_NARGS(); i++)
	{
		const NullableDatum *a = args ? &args[i] : &fcinfo->args[i];
		Oid			typid = get_fn_expr_argtype(flinfo, i);

		if (!OidIsValid(typid))
			elog(ERROR, "could not determine the type of argument %d", i + 1);
		appendStringInfoString(&sql, ", ");
		if (variadic && i == PG_NARGS() - 1)
			appendStringInfoString(&sql, "VARIADIC ");
		append_literal(&sql, a->value, a->isnull, typid);
	}
	fdw.reset_transmission_modes(transmission);
	appendStringInfoString(&sql, desc != NULL ? ") r" : ")");
	return sql.data;
}

/* Each row of res parsed into desc's types, passed to fn. */
static void
parse_rows(PGresult *res, const char *sql, Relation rel, TupleDesc desc,
		   SSRemoteRowFn fn, void *arg)
{
	int			natts = desc->natts;
	FmgrInfo   *in = palloc(sizeof(FmgrInfo) * natts);
	Oid		   *ioparams = palloc(sizeof(Oid) * natts);
	Datum	   *values = palloc(sizeof(Datum) * natts);
	bool	   *nulls = palloc(sizeof(bool) * natts);

	if (PQnfields(res) != natts)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the server of partition \"%s\" answered %d columns where %d were expected",
						RelationGetRelationName(rel), PQnfields(res), natts),
				 errdetail("Remote query: %s", sql),
				 errhint("Install the same version of the extension on every server.")));
	for (int i = 0; i < natts; i++)
	{
		Oid			typinput;

		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		getTypeInputInfo(TupleDescAttr(desc, i)->atttypid, &typinput,
						 &ioparams[i]);
		fmgr_info(typinput, &in[i]);
	}
	for (int row = 0; row < PQntuples(res); row++)
	{
		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < natts; i++)
		{
			nulls[i] = PQgetisnull(res, row, i);
			if (TupleDescAttr(desc, i)->attisdropped)
			{
				values[i] = (Datum) 0;
				continue;
			}
			values[i] = InputFunctionCall(&in[i],
										  nulls[i] ? NULL : PQgetvalue(res, row, i),
										  ioparams[i],
										  TupleDescAttr(desc, i)->atttypmod);
		}
		fn(arg, desc, values, nulls);
	}
}

/* Run sql on rel's server in postgres_fdw's remote transaction. */
static void
remote_query(Relation rel, const char *sql, TupleDesc desc, SSRemoteRowFn fn,
			 void *arg)
{
	ForeignTable *ft = GetForeignTable(RelationGetRelid(rel));
	UserMapping *user = GetUserMapping(GetUserId(), ft->serverid);
	PgFdwConnState *state;
	PGconn	   *conn = fdw.get_connection(user, false, &state);
	PGresult   *volatile res = NULL;

	/* the result is malloc'd by libpq: freed on every way out */
	PG_TRY();
	{
		res = fdw.exec_query(conn, sql, state);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			fdw.report_error(ERROR, res, conn, false, sql);
		parse_rows(res, sql, rel, desc, fn, arg);
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
	fdw.release_connection(conn);
}

/* Checks before a remote call of rel. */
static void
remote_begin(Relation rel)
{
	/* a worker's remote transaction would not be the leader's */
	if (IsParallelWorker())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot reach partition \"%s\" on another server from a parallel worker",
						RelationGetRelationName(rel)),
				 errhint("Set max_parallel_workers_per_gather to 0 for this query.")));
	ss_remote_check(rel);
}

void
ss_remote_call(Relation rel, FunctionCallInfo fcinfo,
			   const NullableDatum *args, bool from, TupleDesc desc,
			   SSRemoteRowFn fn, void *arg)
{
	remote_begin(rel);
	remote_query(rel, remote_call_sql(rel, fcinfo, args, from ? desc : NULL),
				 desc, fn, arg);
}

void
ss_remote_info(Relation rel, FunctionCallInfo fcinfo, const char *fname,
			   TupleDesc desc, SSRemoteRowFn fn, void *arg)
{
	StringInfoData sql;

	remote_begin(rel);
	initStringInfo(&sql);
	begin_call_sql(&sql, rel, get_func_namespace(fcinfo->flinfo->fn_oid),
				   fname, desc, false);
	appendStringInfoString(&sql, ") r");
	remote_query(rel, sql.data, desc, fn, arg);
}

static void
put_row(void *arg, TupleDesc desc, Datum *values, bool *nulls)
{
	tuplestore_putvalues((Tuplestorestate *) arg, desc, values, nulls);
}

void
ss_remote_rows(Relation rel, FunctionCallInfo fcinfo,
			   const NullableDatum *args, TupleDesc desc,
			   Tuplestorestate *out)
{
	ss_remote_call(rel, fcinfo, args, true, desc, put_row, out);
}

typedef struct ScalarResult
{
	Datum		value;
	bool		isnull;
	int			rows;
} ScalarResult;

static void
keep_scalar(void *arg, TupleDesc desc, Datum *values, bool *nulls)
{
	ScalarResult *r = arg;

	r->value = values[0];
	r->isnull = nulls[0];
	r->rows++;
}

Datum
ss_remote_scalar(Relation rel, FunctionCallInfo fcinfo, bool *isnull)
{
	TupleDesc	desc = CreateTemplateTupleDesc(1);
	ScalarResult r = {0, true, 0};

	TupleDescInitEntry(desc, 1, "value", get_fn_expr_rettype(fcinfo->flinfo),
					   -1, 0);
	ss_remote_call(rel, fcinfo, NULL, false, desc, keep_scalar, &r);
	if (r.rows != 1)
		elog(ERROR, "remote call returned %d rows", r.rows);
	*isnull = r.isnull;
	return r.value;
}
