/*-------------------------------------------------------------------------
 *
 * ss_sqlfunc.h
 *	  Checks shared by the SQL functions that take a structure's regclass
 *	  (bcms_estimate, qf_info, bloom_flush, ...), so that every error a
 *	  user can reach through them has a proper SQLSTATE.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_SQLFUNC_H
#define SS_SQLFUNC_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

/*
 * Call before opening a structure: locks relid with lockmode and reports a
 * relation that does not exist (OID 0, a dropped table, a number cast to
 * regclass) as 42P01 instead of relation_open's internal error.  writer is
 * the SQL name of a function that writes (e.g. "bcms_flush()"), or NULL for
 * a reader: writers are refused during recovery (25006) before they try to
 * lock or assign a transaction id.  Returns relid.
 */
extern Oid	ss_sql_lock_relid(Oid relid, LOCKMODE lockmode, const char *writer);

/*
 * Call after the structure's *_open checked the access method: an unlogged
 * structure has no contents on a standby (0A000), and a writer is refused
 * in a read-only transaction (25006) unless the structure is temporary.
 */
extern void ss_sql_check_access(Relation rel, const char *writer);

/*
 * The key type of an in-memory value (cms, qfilter) must exist: a value
 * read from text or binary input may name any OID, and a stored value may
 * name a type dropped since.  42704 otherwise.
 */
extern void ss_check_key_type(Oid typid, const char *typname);
extern Datum ss_coerce_argument(Datum value, Oid argtype, Oid typid,
								int32 typmod, const char *what, int argno,
								const char *colname, const char *fname);

/*
 * Call in every function that returns a structure's rows or facts about
 * its keys (estimates, membership, counts, reports, samples, groups),
 * after the ACL check: such a function reads the whole structure, so it
 * refuses (42501) when row-level security policies apply to the caller,
 * rather than show what they hide.  Where PostgreSQL lets a query bypass
 * the policies (a BYPASSRLS role, the owner without FORCE ROW LEVEL
 * SECURITY, a table without row security), it goes on; with row_security
 * off where they would apply, it raises the error SELECT raises.  fname is
 * the function's SQL name, e.g. "bcms_estimate()".
 */
extern void ss_sql_check_row_security(Relation rel, const char *fname);

/*
 * The table named by a function's first argument, a NULL of the table's row
 * type (cbt_lookup(NULL::t, ...)), which also makes the function's result
 * of that type.  42809 if the argument is of another type, with a hint
 * that names the table when the argument was its name as a string or a
 * regclass.  fname is the function's SQL name, amname the access method.
 */
extern Oid	ss_sql_rowtype_relid(FunctionCallInfo fcinfo, const char *fname,
								 const char *amname);

/*
 * Open relid for a SQL function of structure s, locked with lockmode: the
 * access method is checked (42809), then ss_sql_check_access, then the
 * caller's privilege mode on the table (42501), or with SS_ACL_OWNER its
 * ownership, as ALTER TABLE needs (privileges an owner revoked from itself
 * do not count then).  writer as for ss_sql_lock_relid.
 */
#define SS_ACL_OWNER ((AclMode) 0)
struct SSStructure;
extern Relation ss_sql_open_structure(Oid relid, LOCKMODE lockmode,
									  const char *writer, AclMode mode,
									  const struct SSStructure *s);

/*
 * ERROR (42501) unless the caller has privilege mode on rel, or with
 * SS_ACL_OWNER owns it.
 */
extern void ss_sql_check_privilege(Relation rel, AclMode mode);

#endif							/* SS_SQLFUNC_H */
