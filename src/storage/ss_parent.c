/*-------------------------------------------------------------------------
 *
 * ss_parent.c
 *	  Partitioned parents whose partitions are structures (ss_parent.h).
 *
 * A function called on a parent answers as if the parent were one
 * structure fed by every row inserted through it.  When every level of
 * partitioning on the way down is by the structure's key column, every
 * row of a key went to one leaf partition, and the key's answer is that
 * partition's: the leaf is found as INSERT's tuple routing finds it
 * (execPartition.c's get_partition_for_tuple, which is static, rebuilt
 * from the bound searches partbounds.h exports), one bound search per
 * level, never a loop over the partitions.  Otherwise the key may be in
 * any leaf below the last level routed, and the caller combines their
 * answers by the structure's own rule (a sum of estimates or counts, an
 * OR of memberships).
 *
 * Routing trusts that each partition's contents satisfy its bound, which
 * rows routed by INSERT do.  ATTACH PARTITION validates a table's rows
 * against the bound by scanning them, and a structure's scan returns
 * none, so a structure attached with keys outside its bound (or a default
 * partition holding keys that a partition attached later accepts) answers
 * for them only when combined: docs/partitions.md says so.
 *
 * Privileges and row-level security are the parent's, as for a query
 * through it: PostgreSQL does not check a partition's own ACL or policies
 * then, and neither do the functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/tupconvert.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "ss_hash.h"
#include "ss_changelog.h"
#include "ss_parent.h"
#include "ss_queryutil.h"
#include "ss_remote.h"
#include "ss_sqlfunc.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

/* The first live column of desc: the key of bcms, bloom and qf tables. */
static Form_pg_attribute
key_column(TupleDesc desc)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped)
			return att;
	}
	return NULL;
}

static bool
is_leaf_kind(char relkind)
{
	return relkind == RELKIND_RELATION || relkind == RELKIND_FOREIGN_TABLE;
}

/*
 * Open leaf partition relid (locked) of parent for a function of s: a
 * structure of that kind, usable here; or, with remote, a foreign table
 * of postgres_fdw (a structure on another server, which the caller
 * reaches with ss_remote_call).
 */
static void
refuse_foreign(Oid relid, Relation parent, const SSStructure *s)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("partition \"%s\" of \"%s\" is a foreign table",
					get_rel_name(relid), RelationGetRelationName(parent)),
			 errdetail("This function of %s does not reach partitions on other servers.",
					   s->name),
			 errhint("Call the function on the server's table, or query the parent in SQL, which postgres_fdw sends to the server.")));
}

static Relation
open_leaf(Oid relid, Relation parent, const SSStructure *s, bool remote)
{
	Relation	rel = relation_open(relid, NoLock);

	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
	{
		if (!remote)
			refuse_foreign(relid, parent, s);
		ss_remote_check(rel);
		return rel;
	}
	if (rel->rd_rel->relkind != RELKIND_RELATION || ss_structure_ops(rel) != s)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("partition \"%s\" of \"%s\" is not a %s table",
						RelationGetRelationName(rel),
						RelationGetRelationName(parent), s->name),
				 errhint("Every partition of a partitioned %s table must be created USING %s or %s.",
						 s->name, s->amname, s->constructor)));
	ss_sql_check_access(rel, NULL);
	return rel;
}

/* Every leaf partition below partitioned table relid, opened. */
static List *
open_leaves(Oid relid, Relation parent, const SSStructure *s, bool remote)
{
	List	   *rels = NIL;
	ListCell   *lc;

	/* locked as a SELECT on the parent locks what it scans */
	foreach(lc, find_all_inheritors(relid, AccessShareLock, NULL))
	{
		Oid			child = lfirst_oid(lc);

		if (is_leaf_kind(get_rel_relkind(child)))
			rels = lappend(rels, open_leaf(child, parent, s, remote));
	}
	return rels;
}

/*
 * The leaves of partitioned table parent (opened, locked) that may hold
 * key, a value of the key column (the first live one): routed down while
 * the levels are partitioned by that column, then every leaf below
 * (route_columns).  The key is the structure's by its binary form, so
 * any equality the partitioning compares with routes it: equal bytes go
 * to one partition.
 */
static List *route_columns(Relation parent, const SSStructure *s,
						   const SSRouteKey *kc, bool remote_leaf,
						   bool remote_all);

static List *
route_key(Relation parent, const SSStructure *s, Datum key, bool remote)
{
	Form_pg_attribute att = key_column(RelationGetDescr(parent));
	const char *name;
	bool		isnull = false;
	Oid			collation;
	SSRouteKey	kc;

	if (att == NULL)
		return open_leaves(RelationGetRelid(parent), parent, s, remote);
	name = NameStr(att->attname);
	collation = att->attcollation;
	kc.ncols = 1;
	kc.names = &name;
	kc.values = &key;
	kc.isnull = &isnull;
	kc.collations = &collation;
	kc.any_equality = true;
	return route_columns(parent, s, &kc, remote, remote);
}

static List *
open_targets(FunctionCallInfo fcinfo, int keyarg, const SSStructure *s,
			 const char *fname, Datum *key, bool remote)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	AclResult	aclresult;
	List	   *rels;
	Form_pg_attribute att;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
	{
		rel = keyarg >= 0 ? ss_sql_open_keyed(relid, fname, s) :
			ss_sql_open_structure(relid, AccessShareLock, NULL, ACL_SELECT, s);
		rels = list_make1(rel);
	}
	else
	{
		rel = relation_open(ss_sql_lock_relid(relid, AccessShareLock, NULL),
							AccessShareLock);
		aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, get_relkind_objtype(rel->rd_rel->relkind),
						   RelationGetRelationName(rel));
		if (keyarg >= 0)
			ss_sql_check_row_security(rel, fname);
		rels = NIL;
	}
	if (keyarg >= 0)
	{
		Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, keyarg);

		if (!OidIsValid(argtype))
			elog(ERROR, "could not determine the type of the key");
		att = key_column(RelationGetDescr(rel));
		*key = ss_coerce_key(PG_GETARG_DATUM(keyarg), argtype,
							 att ? att->atttypid : InvalidOid);
	}
	if (rels != NIL)
		return rels;
	rels = keyarg >= 0 ? route_key(rel, s, *key, remote) :
		open_leaves(relid, rel, s, remote);
	relation_close(rel, AccessShareLock);
	return rels;
}

List *
ss_open_targets(FunctionCallInfo fcinfo, int keyarg, const SSStructure *s,
				const char *fname, Datum *key)
{
	return open_targets(fcinfo, keyarg, s, fname, key, false);
}

List *
ss_open_targets_remote(FunctionCallInfo fcinfo, int keyarg,
					   const SSStructure *s, const char *fname, Datum *key)
{
	return open_targets(fcinfo, keyarg, s, fname, key, true);
}

void
ss_close_targets(List *rels)
{
	ListCell   *lc;

	foreach(lc, rels)
		relation_close((Relation) lfirst(lc), AccessShareLock);
	list_free(rels);
}

/* ---- DDL: one kind of structure per partitioned tree ---- */

/* The kind of structure relid is (opened to ask). */
static const SSStructure *
structure_kind(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	const SSStructure *s = ss_structure_ops(rel);

	relation_close(rel, AccessShareLock);
	return s;
}

/* "a bcms table", "a heap table" */
static char *
kind_text(Oid relid, const SSStructure *s)
{
	return psprintf("a %s table",
					s ? s->name : get_am_name(ss_get_rel_relam(relid)));
}

/*
 * Leaf partitions of top whose contents kind cannot combine with those of
 * first (a structure of kind, in top): refused by kind's check_partition.
 */
static void
check_contents(Oid top, const SSStructure *kind, Oid first)
{
	Relation	toprel;
	Relation	firstrel;
	ListCell   *lc;

	if (kind->check_partition == NULL)
		return;
	toprel = relation_open(top, AccessShareLock);
	firstrel = relation_open(first, AccessShareLock);
	foreach(lc, find_all_inheritors(top, NoLock, NULL))
	{
		Oid			relid = lfirst_oid(lc);
		Relation	rel;

		if (relid == first || get_rel_relkind(relid) != RELKIND_RELATION)
			continue;
		rel = relation_open(relid, AccessShareLock);
		kind->check_partition(toprel, firstrel, rel);
		relation_close(rel, AccessShareLock);
	}
	relation_close(firstrel, AccessShareLock);
	relation_close(toprel, AccessShareLock);
}

/*
 * The leaf partitions of partitioned table top: structures of one kind,
 * or none.  Foreign tables are left out: they may be structures on other
 * servers, which cannot be looked at from here.  Only structures are
 * opened, so that DDL on a tree of heaps costs catalog lookups alone.
 */
static void
check_tree(Oid top)
{
	Oid			first = InvalidOid;		/* the first structure */
	const SSStructure *kind = NULL;
	Oid			other = InvalidOid;		/* one of another kind */
	const SSStructure *other_kind = NULL;
	Oid			heap = InvalidOid;	/* the first table of no structure */
	ListCell   *lc;

	foreach(lc, find_all_inheritors(top, NoLock, NULL))
	{
		Oid			relid = lfirst_oid(lc);
		const SSStructure *s = NULL;

		if (get_rel_relkind(relid) != RELKIND_RELATION)
			continue;
		if (ss_relam_is_streamsketch(ss_get_rel_relam(relid)))
			s = structure_kind(relid);
		if (s == NULL)
		{
			if (!OidIsValid(heap))
				heap = relid;
		}
		else if (kind == NULL)
		{
			first = relid;
			kind = s;
		}
		else if (s != kind && !OidIsValid(other))
		{
			other = relid;
			other_kind = s;
		}
	}
	if (kind == NULL)
		return;
	if (!OidIsValid(other))
		other = heap;
	if (!OidIsValid(other))
	{
		check_contents(top, kind, first);
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
			 errmsg("the partitions of \"%s\" must all be %s tables",
					get_rel_name(top), kind->name),
			 errdetail("Partition \"%s\" is %s and partition \"%s\" is %s.  The functions of a structure answer for a partitioned table by routing a key to its partition or by combining the answers of its partitions, which must all be the same structure.",
					   get_rel_name(other), kind_text(other, other_kind),
					   get_rel_name(first), kind_text(first, kind)),
			 errhint("Make every partition of \"%s\" a %s table, or none.",
					 get_rel_name(top), kind->name)));
}

void
ss_check_partition_trees(List *rels)
{
	List	   *tops = NIL;
	ListCell   *lc;

	foreach(lc, rels)
	{
		Oid			relid = lfirst_oid(lc);
		Oid			top = relid;

		if (get_rel_relispartition(relid))
			top = llast_oid(get_partition_ancestors(relid));
		else if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
			continue;
		tops = list_append_unique_oid(tops, top);
	}
	foreach(lc, tops)
		check_tree(lfirst_oid(lc));
}

/* ---- info functions ---- */

/* A foreign partition's info row, as its server gives it. */
typedef struct RemoteInfo
{
	Datum	   *values;
	bool	   *nulls;
} RemoteInfo;

static void
keep_info_row(void *arg, TupleDesc desc, Datum *values, bool *nulls)
{
	RemoteInfo *ri = arg;

	memcpy(ri->values, values, sizeof(Datum) * desc->natts);
	memcpy(ri->nulls, nulls, sizeof(bool) * desc->natts);
}

static void
info_fill(FunctionCallInfo fcinfo, TupleDesc desc, Relation rel, int natts,
		  SSInfoFillFn fill, Datum *values, bool *nulls)
{
	SSLogMeta	log;

	memset(nulls, 0, sizeof(bool) * (natts + 2));
	if (ss_is_remote(rel))
	{
		RemoteInfo	ri = {values, nulls};

		ss_remote_call(rel, fcinfo, NULL, true, desc, keep_info_row, &ri);
		return;
	}
	fill(rel, values, nulls);
	ss_log_meta(rel, &log);
	values[natts] = Int64GetDatum((int64) log.nrecords);
	values[natts + 1] = Int64GetDatum((int64) (log.end_pos - log.head_pos));
}

/* a + b element by element, the shorter array taken as padded with zeros */
static Datum
sum_int8_arrays(Datum a, Datum b)
{
	ArrayType  *x = DatumGetArrayTypeP(a);
	ArrayType  *y = DatumGetArrayTypeP(b);
	Datum	   *xv,
			   *yv;
	int			nx,
				ny;

	deconstruct_array(x, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &xv, NULL, &nx);
	deconstruct_array(y, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &yv, NULL, &ny);
	if (nx < ny)
	{
		Datum	   *t = xv;
		int			n = nx;

		xv = yv;
		yv = t;
		nx = ny;
		ny = n;
	}
	for (int i = 0; i < ny; i++)
		xv[i] = Int64GetDatum(DatumGetInt64(xv[i]) + DatumGetInt64(yv[i]));
	return PointerGetDatum(construct_array(xv, nx, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/* Merge column att of another partition's row (v, isnull) into *acc. */
static void
info_merge(Form_pg_attribute att, char rule, Datum v, bool isnull,
		   Datum *acc, bool *accnull)
{
	Oid			typid = att->atttypid;

	if (*accnull || isnull)
	{
		*accnull = true;		/* unknown for one: unknown for all */
		return;
	}
	switch (rule)
	{
		case '=':
			if (!datumIsEqual(v, *acc, att->attbyval, att->attlen))
				*accnull = true;
			break;
		case '+':
			if (typid == INT8ARRAYOID)
				*acc = sum_int8_arrays(*acc, v);
			else if (typid == INT8OID)
				*acc = Int64GetDatum(DatumGetInt64(*acc) + DatumGetInt64(v));
			else if (typid == INT4OID)
				*acc = Int32GetDatum(DatumGetInt32(*acc) + DatumGetInt32(v));
			else
				*acc = Float8GetDatum(DatumGetFloat8(*acc) + DatumGetFloat8(v));
			break;
		case '>':
			if (typid == INT8OID)
				*acc = Int64GetDatum(Max(DatumGetInt64(*acc), DatumGetInt64(v)));
			else if (typid == INT4OID)
				*acc = Int32GetDatum(Max(DatumGetInt32(*acc), DatumGetInt32(v)));
			else
				*acc = Float8GetDatum(Max(DatumGetFloat8(*acc), DatumGetFloat8(v)));
			break;
		case '|':
			/* 1 - (1 - a)(1 - b): a false positive of either answers yes */
			*acc = Float8GetDatum(1.0 - (1.0 - DatumGetFloat8(*acc)) *
								  (1.0 - DatumGetFloat8(v)));
			break;
		default:
			elog(ERROR, "unknown info merge rule '%c'", rule);
	}
}

/* The merged row of a parent without partitions: sums 0, the rest NULL. */
static void
info_empty(TupleDesc desc, const char *rules, Datum *values, bool *nulls)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Oid			typid = TupleDescAttr(desc, i)->atttypid;

		nulls[i] = rules[i] != '+' && rules[i] != '|';
		values[i] = typid == INT8ARRAYOID ?
			PointerGetDatum(construct_empty_array(INT8OID)) :
			typid == INT8OID ? Int64GetDatum(0) :
			typid == INT4OID ? Int32GetDatum(0) : Float8GetDatum(0.0);
	}
}

Datum
ss_sql_info(FunctionCallInfo fcinfo, const SSStructure *s, const char *fname,
			const char *rules, SSInfoFillFn fill)
{
	SSInfoRow	row;
	List	   *rels = ss_open_targets_remote(fcinfo, -1, s, fname, NULL);
	int			natts = strlen(rules);
	char	   *all_rules = psprintf("%s++", rules);
	Datum	   *values = palloc(sizeof(Datum) * (natts + 2));
	bool	   *nulls = palloc(sizeof(bool) * (natts + 2));
	ListCell   *lc;

	ss_info_row_begin(fcinfo, &row, fname, natts + 2);
	info_empty(row.tupdesc, all_rules, row.values, row.nulls);
	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);

		if (foreach_current_index(lc) == 0)
		{
			info_fill(fcinfo, row.tupdesc, rel, natts, fill, row.values,
					  row.nulls);
			continue;
		}
		info_fill(fcinfo, row.tupdesc, rel, natts, fill, values, nulls);
		for (int i = 0; i < natts + 2; i++)
			info_merge(TupleDescAttr(row.tupdesc, i), all_rules[i], values[i],
					   nulls[i], &row.values[i], &row.nulls[i]);
	}
	ss_close_targets(rels);
	return ss_info_row_datum(&row);
}

/* ---- structures keyed by several columns (a cbt's group keys) ---- */

Relation
ss_open_parent(Oid relid, LOCKMODE lockmode, const char *writer,
			   AclMode mode, const char *keyed_fname)
{
	Relation	rel = relation_open(ss_sql_lock_relid(relid, lockmode, writer),
									lockmode);

	ss_sql_check_privilege(rel, mode);
	if (keyed_fname != NULL)
		ss_sql_check_row_security(rel, keyed_fname);
	return rel;
}

/* The first local leaf below level (parent or one of its sub-partitions). */
static Relation
first_leaf_below(Relation level, Relation parent, const SSStructure *s)
{
	PartitionDesc partdesc = RelationGetPartitionDesc(level, true);

	for (int i = 0; i < partdesc->nparts; i++)
	{
		Oid			child = partdesc->oids[i];
		bool		leaf = partdesc->is_leaf[i];
		Relation	found;
		Relation	sub;

		/* a foreign table is read only when a key leads to it */
		if (get_rel_relkind(child) == RELKIND_FOREIGN_TABLE)
			continue;
		LockRelationOid(child, AccessShareLock);
		if (leaf)
			return open_leaf(child, parent, s, false);
		sub = relation_open(child, NoLock);
		found = first_leaf_below(sub, parent, s);
		relation_close(sub, NoLock);
		if (found != NULL)
			return found;
	}
	return NULL;
}

Relation
ss_first_leaf(Relation parent, const SSStructure *s)
{
	return first_leaf_below(parent, parent, s);
}

/*
 * Can column i of partition key pkey route a key compared with collation
 * coll by the equality of its type's default operator class (as a cbt
 * groups it)?  Only when the partitioning's equality is that one: the
 * default operator family of the type for the strategy's access method,
 * with the same collation or two deterministic ones (both equal only
 * equal bytes).  Else keys the structure takes as equal may have gone to
 * different partitions.
 */
static bool
routes_as_grouped(PartitionKey pkey, int i, Oid typid, Oid coll)
{
	Oid			am = pkey->strategy == PARTITION_STRATEGY_HASH ?
		HASH_AM_OID : BTREE_AM_OID;
	Oid			opclass = GetDefaultOpClass(typid, am);
	Oid			pcoll = pkey->partcollation[i];

	if (!OidIsValid(opclass) ||
		get_opclass_family(opclass) != pkey->partopfamily[i])
		return false;
	if (pcoll == coll)
		return true;
	return OidIsValid(pcoll) && OidIsValid(coll) &&
		get_collation_isdeterministic(pcoll) &&
		get_collation_isdeterministic(coll);
}

/*
 * Is every column of level's partition key one of the key columns (by
 * name: a sub-partition's attribute numbers may differ from the top's),
 * routing as grouped?  map[i] is then the key column of partition column i.
 */
static bool
partitioned_by_columns(Relation level, PartitionKey pkey,
					   const SSRouteKey *kc, int *map)
{
	TupleDesc	desc = RelationGetDescr(level);

	for (int i = 0; i < pkey->partnatts; i++)
	{
		Form_pg_attribute att;
		int			j;

		if (pkey->partattrs[i] == 0)
			return false;		/* an expression */
		att = TupleDescAttr(desc, pkey->partattrs[i] - 1);
		for (j = 0; j < kc->ncols; j++)
			if (strcmp(NameStr(att->attname), kc->names[j]) == 0)
				break;
		if (j == kc->ncols ||
			(!kc->any_equality &&
			 !routes_as_grouped(pkey, i, att->atttypid, kc->collations[j])))
			return false;
		map[i] = j;
	}
	return true;
}

/*
 * The index in partdesc of the partition that accepts values/isnull (one
 * per partition column), or -1: get_partition_for_tuple's search for any
 * number of columns and NULLs.
 */
static int
partition_for_values(PartitionKey pkey, PartitionDesc partdesc,
					 Datum *values, bool *isnull)
{
	PartitionBoundInfo bounds = partdesc->boundinfo;
	int			part = -1;
	bool		equal = false;
	int			offset;

	if (bounds == NULL)
		return -1;				/* no partitions */
	switch (pkey->strategy)
	{
		case PARTITION_STRATEGY_HASH:
			{
				uint64		hash = compute_partition_hash_value(pkey->partnatts,
																pkey->partsupfunc,
																pkey->partcollation,
																values, isnull);

				part = bounds->indexes[hash % get_hash_partition_greatest_modulus(bounds)];
				break;
			}
		case PARTITION_STRATEGY_LIST:
			/* one column */
			if (isnull[0])
			{
				if (partition_bound_accepts_nulls(bounds))
					part = bounds->null_index;
				break;
			}
			offset = partition_list_bsearch(pkey->partsupfunc,
											pkey->partcollation, bounds,
											values[0], &equal);
			if (offset >= 0 && equal)
				part = bounds->indexes[offset];
			break;
		case PARTITION_STRATEGY_RANGE:
			/* a NULL in any column: only the default partition */
			for (int i = 0; i < pkey->partnatts; i++)
				if (isnull[i])
					return bounds->default_index;
			offset = partition_range_datum_bsearch(pkey->partsupfunc,
												   pkey->partcollation,
												   bounds, pkey->partnatts,
												   values, &equal);
			part = bounds->indexes[offset + 1];
			break;
		default:
			elog(ERROR, "unexpected partition strategy: %d",
				 (int) pkey->strategy);
	}
	if (part < 0)
		part = bounds->default_index;
	return part;
}

/*
 * ss_route_columns, the one leaf routed to opened with remote_leaf (a
 * foreign table allowed), the leaves of a level not routed with
 * remote_all.
 */
static List *
route_columns(Relation parent, const SSStructure *s, const SSRouteKey *kc,
			  bool remote_leaf, bool remote_all)
{
	Relation	level = parent;
	Datum		values[PARTITION_MAX_KEYS];
	bool		isnull[PARTITION_MAX_KEYS];
	int			map[PARTITION_MAX_KEYS];
	Oid			relid;

	for (;;)
	{
		PartitionKey pkey = RelationGetPartitionKey(level);
		PartitionDesc partdesc;
		int			part;
		Oid			child;
		bool		leaf;

		CHECK_FOR_INTERRUPTS();
		if (!partitioned_by_columns(level, pkey, kc, map))
			break;
		for (int i = 0; i < pkey->partnatts; i++)
		{
			values[i] = kc->values[map[i]];
			isnull[i] = kc->isnull[map[i]];
		}
		partdesc = RelationGetPartitionDesc(level, true);
		part = partition_for_values(pkey, partdesc, values, isnull);
		/* read before locking, which may rebuild level's relcache entry */
		child = part >= 0 ? partdesc->oids[part] : InvalidOid;
		leaf = part >= 0 && partdesc->is_leaf[part];
		if (level != parent)
			relation_close(level, NoLock);
		if (part < 0)
			return NIL;			/* no partition accepts the key */
		LockRelationOid(child, AccessShareLock);
		if (leaf)
			return list_make1(open_leaf(child, parent, s, remote_leaf));
		level = relation_open(child, NoLock);
	}
	relid = RelationGetRelid(level);
	if (level != parent)
		relation_close(level, NoLock);
	return open_leaves(relid, parent, s, remote_all);
}

List *
ss_route_columns(Relation parent, const SSStructure *s, const SSRouteKey *kc)
{
	return route_columns(parent, s, kc, true, false);
}

static List *
open_all_leaves(Relation parent, LOCKMODE lockmode, const char *writer,
				const SSStructure *s, bool remote)
{
	List	   *rels = NIL;
	ListCell   *lc;

	foreach(lc, find_all_inheritors(RelationGetRelid(parent), lockmode, NULL))
	{
		Oid			child = lfirst_oid(lc);
		Relation	rel;

		if (!is_leaf_kind(get_rel_relkind(child)))
			continue;
		rel = open_leaf(child, parent, s, remote);
		if (!ss_is_remote(rel))
			ss_sql_check_access(rel, writer);
		rels = lappend(rels, rel);
	}
	return rels;
}

List *
ss_open_all_leaves(Relation parent, LOCKMODE lockmode, const char *writer,
				   const SSStructure *s)
{
	return open_all_leaves(parent, lockmode, writer, s, false);
}

Relation
ss_first_foreign_leaf(Relation parent, const SSStructure *s)
{
	ListCell   *lc;

	foreach(lc, find_all_inheritors(RelationGetRelid(parent), NoLock, NULL))
	{
		Oid			relid = lfirst_oid(lc);

		if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
			continue;
		LockRelationOid(relid, AccessShareLock);
		return open_leaf(relid, parent, s, true);
	}
	return NULL;
}

/* ---- set and writer functions: every leaf, or the one a key routes to ---- */

static List *
open_all_targets(Oid relid, const SSStructure *s, LOCKMODE lockmode,
				 const char *writer, AclMode mode, const char *rls_fname,
				 bool remote)
{
	Relation	parent;
	List	   *rels;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
	{
		Relation	rel = ss_sql_open_structure(relid, lockmode, writer, mode, s);

		if (rls_fname != NULL)
			ss_sql_check_row_security(rel, rls_fname);
		return list_make1(rel);
	}
	parent = ss_open_parent(relid, lockmode, writer, mode, rls_fname);
	/* the partitions are locked as a statement on the parent locks them */
	rels = open_all_leaves(parent, lockmode, writer, s, remote);
	relation_close(parent, NoLock);
	return rels;
}

List *
ss_open_all_targets(Oid relid, const SSStructure *s, LOCKMODE lockmode,
					const char *writer, AclMode mode, const char *rls_fname)
{
	return open_all_targets(relid, s, lockmode, writer, mode, rls_fname,
							false);
}

List *
ss_open_all_targets_remote(Oid relid, const SSStructure *s,
						   LOCKMODE lockmode, const char *writer,
						   AclMode mode, const char *rls_fname)
{
	return open_all_targets(relid, s, lockmode, writer, mode, rls_fname,
							true);
}

void
ss_close_all_targets(List *rels, LOCKMODE lockmode)
{
	ListCell   *lc;

	foreach(lc, rels)
		relation_close((Relation) lfirst(lc), lockmode);
	list_free(rels);
}

Relation
ss_open_routed_target(FunctionCallInfo fcinfo, int keyarg,
					  const SSStructure *s, LOCKMODE lockmode,
					  const char *writer, AclMode mode, Datum *key)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	parent;
	Relation	rel;
	Form_pg_attribute att;
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, keyarg);
	List	   *rels;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return ss_sql_open_structure(relid, lockmode, writer, mode, s);
	parent = ss_open_parent(relid, lockmode, writer, mode, NULL);
	if (!OidIsValid(argtype))
		elog(ERROR, "could not determine the type of the key");
	att = key_column(RelationGetDescr(parent));
	*key = ss_coerce_key(PG_GETARG_DATUM(keyarg), argtype,
						 att ? att->atttypid : InvalidOid);
	/* the leaves that may hold the key, as the readers find them */
	rels = route_key(parent, s, *key, false);
	if (list_length(rels) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s cannot route its key to a partition of \"%s\"",
						writer, RelationGetRelationName(parent)),
				 errdetail("\"%s\" is not partitioned by its key column alone, so the key may be in any of %d partitions.",
						   RelationGetRelationName(parent), list_length(rels)),
				 errhint("Call %s on the partition that holds the key.",
						 writer)));
	relation_close(parent, NoLock);
	if (rels == NIL)
		return NULL;			/* no partition accepts the key */
	rel = linitial(rels);
	list_free(rels);
	/* read-locked by route_key: the writer's lock too, both kept */
	LockRelationOid(RelationGetRelid(rel), lockmode);
	ss_sql_check_access(rel, writer);
	return rel;
}

void
ss_refuse_parent(Oid relid, const char *fname, const char *why,
				 const char *hint)
{
	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s cannot take partitioned table \"%s\"",
					fname, get_rel_name(relid)),
			 errdetail("%s", why),
			 errhint("%s", hint)));
}

TupleDesc
ss_parent_rows_result(FunctionCallInfo fcinfo, Oid relid, const char *fname)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	parent = relation_open(relid, NoLock);	/* locked */

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != RelationGetDescr(parent)->natts)
		elog(ERROR, "%s: the result is not the table's row type", fname);
	relation_close(parent, NoLock);
	return rsinfo->setDesc;
}

void
ss_leaf_rows(Relation leaf, TupleDesc desc, Tuplestorestate *out,
			 SSLeafRowsFn fn, void *arg)
{
	TupleDesc	leafdesc = RelationGetDescr(leaf);
	TupleConversionMap *map = convert_tuples_by_name(leafdesc, desc);
	Tuplestorestate *rows;
	TupleTableSlot *in;
	TupleTableSlot *conv;

	if (map == NULL)
	{
		fn(leaf, desc, out, arg);	/* the parent's layout */
		return;
	}
	rows = tuplestore_begin_heap(false, false, work_mem);
	fn(leaf, leafdesc, rows, arg);
	in = MakeSingleTupleTableSlot(leafdesc, &TTSOpsMinimalTuple);
	conv = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	while (tuplestore_gettupleslot(rows, true, false, in))
		tuplestore_puttupleslot(out, execute_attr_map_slot(map->attrMap, in, conv));
	ExecDropSingleTupleTableSlot(in);
	ExecDropSingleTupleTableSlot(conv);
	free_conversion_map(map);
	tuplestore_end(rows);
}
