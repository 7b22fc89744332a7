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
#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
#include "utils/acl.h"
#include "utils/tuplestore.h"
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
