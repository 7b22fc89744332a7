/*-------------------------------------------------------------------------
 *
 * ss_remote.h
 *	  Partitions on other servers: a function called on a partitioned
 *	  parent runs the same call on a foreign partition's server, through
 *	  postgres_fdw's connection and remote transaction (ss_remote.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_REMOTE_H
#define SS_REMOTE_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

/* Is rel a foreign table: a structure on another server? */
static inline bool
ss_is_remote(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE;
}

/*
 * Check that foreign table rel is one postgres_fdw serves and that the
 * caller has a user mapping for its server, before any call: a clear
 * error then rather than halfway through a combination.
 */
extern void ss_remote_check(Relation rel);

/* One row of a remote call's result, parsed into desc's types. */
typedef void (*SSRemoteRowFn) (void *arg, TupleDesc desc, Datum *values,
							   bool *nulls);

/*
 * Run the SQL function fcinfo is a call of on foreign table rel's server,
 * as postgres_fdw's remote transaction for the caller's user mapping:
 * the same function (by schema and name: the extension is installed in
 * the same schema there), the remote table in place of the first
 * argument (a regclass, or a NULL of the table's row type), then the
 * call's other arguments, or args[i] where args is not NULL.  With from,
 * the rows of the call's columns named as desc's (a table's columns by
 * their names on the server), else its one value; each row is parsed
 * into desc's column types and passed to fn.
 */
extern void ss_remote_call(Relation rel, FunctionCallInfo fcinfo,
						   const NullableDatum *args, bool from,
						   TupleDesc desc, SSRemoteRowFn fn, void *arg);

/* ss_remote_call's rows (from) put in out. */
extern void ss_remote_rows(Relation rel, FunctionCallInfo fcinfo,
						   const NullableDatum *args, TupleDesc desc,
						   Tuplestorestate *out);

/*
 * The rows of desc's columns of info function fname (of fcinfo's
 * function's schema) called on rel's remote table, passed to fn.
 */
extern void ss_remote_info(Relation rel, FunctionCallInfo fcinfo,
						   const char *fname, TupleDesc desc,
						   SSRemoteRowFn fn, void *arg);

/* The value of fcinfo's call on rel's server (of fcinfo's return type). */
extern Datum ss_remote_scalar(Relation rel, FunctionCallInfo fcinfo,
							  bool *isnull);

#endif							/* SS_REMOTE_H */
