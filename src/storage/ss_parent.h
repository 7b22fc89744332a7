/*-------------------------------------------------------------------------
 *
 * ss_parent.h
 *	  Partitioned parents whose partitions are structures: the structures
 *	  a SQL function's call reads (one, or the partitions it must
 *	  combine), the check that keeps a parent's partitions one kind, and
 *	  the merge of the partitions' info rows (ss_parent.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_PARENT_H
#define SS_PARENT_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
#include "utils/acl.h"
#include "utils/tuplestore.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

struct SSStructure;

/*
 * The structures a function's call on relid (its first argument) reads,
 * opened with AccessShareLock, for SELECT: relid itself when it is a
 * structure of kind s (checked as ss_sql_open_keyed does); for a
 * partitioned table of s, with keyarg >= 0, the one leaf partition that
 * can hold the key argument when every partitioning level on the way is
 * by the structure's key column (none when no partition accepts the
 * key), else every leaf below the last level routed.  With keyarg < 0
 * (an info function): relid, or every leaf partition.  The caller's
 * privilege and, for a key, row-level security are checked on relid:
 * a query through a parent is not checked against its partitions' own.
 * *key (with keyarg >= 0) is the key argument as a value of the key
 * column's type, which every partition shares.  fname is the function's
 * SQL name.  Close with ss_close_targets.
 */
extern List *ss_open_targets(FunctionCallInfo fcinfo, int keyarg,
							 const struct SSStructure *s, const char *fname,
							 Datum *key);
extern void ss_close_targets(List *rels);

/*
 * ss_open_targets for a function that also reaches partitions on other
 * servers: the leaves may be foreign tables of postgres_fdw as well
 * (ss_is_remote; checked with ss_remote_check), which the caller asks
 * with ss_remote_call or ss_remote_scalar instead of reading them.
 */
extern List *ss_open_targets_remote(FunctionCallInfo fcinfo, int keyarg,
									const struct SSStructure *s,
									const char *fname, Datum *key);

/*
 * DDL: every partitioned tree one of the relations in rels belongs to (a
 * partition created or attached, a parent whose partitions were) must
 * have leaf partitions of one kind of structure, or none: 42P17
 * otherwise.  Foreign tables pass (a structure on another server).
 */
extern void ss_check_partition_trees(List *rels);

/*
 * An info function's row: fill (values, nulls of its own columns) for
 * each structure ss_open_targets gives, the change log's two columns
 * appended (as ss_sql_info_result does).  On a parent the partitions'
 * rows are merged column by column as rules says, one character per own
 * column: '=' the partitions' common value (NULL where they differ), '+'
 * their sum (of bigint[]s, element by element), '>' their largest value,
 * '|' for a false-positive rate, that of an OR of the partitions' answers,
 * 1 - prod(1 - x).  The log's columns are summed.
 */
typedef void (*SSInfoFillFn) (Relation rel, Datum *values, bool *nulls);
extern Datum ss_sql_info(FunctionCallInfo fcinfo, const struct SSStructure *s,
						 const char *fname, const char *rules,
						 SSInfoFillFn fill);

/*
 * Structures whose key is several columns (a cbt's group keys), whose
 * functions know the key columns only from a partition's definition.
 *
 * ss_open_parent: partitioned table relid, locked with lockmode (writer
 * as for ss_sql_lock_relid), the caller's privilege mode (or with
 * SS_ACL_OWNER its ownership) checked on it and, with keyed_fname, its
 * row-level security as ss_open_targets does for a key.  Close it with relation_close(rel, lockmode).
 *
 * ss_first_leaf: the first leaf partition below parent in bound order
 * that is not a foreign table, opened (AccessShareLock) as
 * ss_open_targets opens partitions, or NULL when the tree has none.
 */
extern Relation ss_open_parent(Oid relid, LOCKMODE lockmode,
							   const char *writer, AclMode mode,
							   const char *keyed_fname);
extern Relation ss_first_leaf(Relation parent, const struct SSStructure *s);

/*
 * A key of several columns, named as in the parent (partitions share the
 * names, not always the attribute numbers): each value of its column's
 * type, or NULL, compared by the type's default equality with
 * collations[i].
 */
typedef struct SSRouteKey
{
	int			ncols;
	const char *const *names;
	const Datum *values;
	const bool *isnull;
	const Oid  *collations;
	/*
	 * Route by any equality the partitioning compares with (a key the
	 * structure takes by its binary form), not only by the type's default
	 * one with a compatible collation (a key grouped as GROUP BY does).
	 */
	bool		any_equality;
} SSRouteKey;

/*
 * The leaves of partitioned table parent (opened, AccessShareLock) that
 * may hold the key: routed as ss_open_targets routes a key while every
 * column of a level's partition key is one of the key's columns, with
 * the key's equality (its type's default operator family, a compatible
 * collation), then every leaf below the last level routed.  The one
 * leaf a key is routed to may be a foreign table of postgres_fdw
 * (ss_is_remote), which the caller asks on its server; the leaves of a
 * level not routed must be local.
 */
extern List *ss_route_columns(Relation parent, const struct SSStructure *s,
							  const SSRouteKey *kc);

/*
 * Every leaf partition below parent, locked with lockmode and opened as
 * ss_open_targets opens them, each checked usable by writer
 * (ss_sql_check_access).  Close with relation_close(rel, lockmode).
 */
extern List *ss_open_all_leaves(Relation parent, LOCKMODE lockmode,
								const char *writer,
								const struct SSStructure *s);

/*
 * The first foreign-table leaf below parent (locked), opened
 * (AccessShareLock) and checked as ss_open_targets_remote checks one, or
 * NULL when the tree has none.
 */
extern Relation ss_first_foreign_leaf(Relation parent,
									  const struct SSStructure *s);

/*
 * Every structure a set function (rls_fname: its name, for row-level
 * security, as ss_sql_open_keyed) or a writer (writer: its name, for the
 * checks of ss_sql_open_structure) of s reads or changes: relid itself,
 * opened by ss_sql_open_structure, or every leaf partition of partitioned
 * table relid.  The privilege (mode, or SS_ACL_OWNER) and row-level
 * security are checked on relid, as a statement through a parent checks
 * them; the parent and its partitions are locked with lockmode, as a
 * statement on the parent locks them.  Close with ss_close_all_targets,
 * with the lock mode to release (NoLock keeps them).
 */
extern List *ss_open_all_targets(Oid relid, const struct SSStructure *s,
								 LOCKMODE lockmode, const char *writer,
								 AclMode mode, const char *rls_fname);
/* ss_open_all_targets, and foreign leaves too (ss_open_targets_remote) */
extern List *ss_open_all_targets_remote(Oid relid,
										const struct SSStructure *s,
										LOCKMODE lockmode, const char *writer,
										AclMode mode, const char *rls_fname);
extern void ss_close_all_targets(List *rels, LOCKMODE lockmode);

/*
 * The one structure a writer of one key (argument keyarg, *key: as the key
 * column's value) changes: relid itself, or the leaf partition of
 * partitioned table relid that holds the key, routed as ss_open_targets
 * routes it; NULL when no partition accepts the key.  Where routing stops
 * above more than one leaf (a level not partitioned by the key) it
 * refuses (0A000): the key may be in any of them, and a change of one is
 * not the caller's to pick.  Checks as ss_open_all_targets; the leaf is
 * also read-locked.
 */
extern Relation ss_open_routed_target(FunctionCallInfo fcinfo, int keyarg,
									  const struct SSStructure *s,
									  LOCKMODE lockmode, const char *writer,
									  AclMode mode, Datum *key);

/*
 * 0A000 when relid is a partitioned table: fname does not take one (why:
 * the detail, hint: what to do instead).
 */
extern void ss_refuse_parent(Oid relid, const char *fname, const char *why,
							 const char *hint);

/*
 * A set function's result on partitioned table relid (locked): the
 * materialized result's descriptor, the parent's row type.
 */
extern TupleDesc ss_parent_rows_result(FunctionCallInfo fcinfo, Oid relid,
									   const char *fname);

/*
 * fn's rows of leaf partition leaf, put in out in the parent's row type
 * desc: fn writes them in desc when the leaf's columns are the parent's,
 * else in the leaf's own descriptor, and they are converted by column name
 * (a partition attached with another column order or dropped columns).
 */
typedef void (*SSLeafRowsFn) (Relation leaf, TupleDesc desc,
							  Tuplestorestate *out, void *arg);
extern void ss_leaf_rows(Relation leaf, TupleDesc desc, Tuplestorestate *out,
						 SSLeafRowsFn fn, void *arg);

#endif							/* SS_PARENT_H */
