/*-------------------------------------------------------------------------
 *
 * cbt_lookup.c
 *	  cbt_lookup(NULL::table, key, ...): one group, read from its root-to-
 *	  leaf path (docs/cbt.md, "Lookups").
 *
 * A group's PAOs can be in any node's buffer on the path from the root to
 * the leaf whose hash range holds its key's hash, and its rows in the
 * change log after the tree's position (or in the caller's own pending
 * changes).  The lookup takes the tree and the log's snapshot from one
 * read of the metapage, as a scan does, reads one node page per level and,
 * in each fragment whose hash range holds the hash, the block(s) holding
 * it (the fragment's directory finds them), folds what it finds into the
 * groups of that hash and finalizes the one whose key equals the key
 * looked up.  The log records are filtered by hash as they are read: the
 * log is at most a few times streamsketch.change_log_limit long (writers
 * wait for its rounds beyond), and a lookup consolidates it first only
 * when that is cheap or the log is over its limit.
 *
 * On a partitioned parent of cbts (docs/cbt.md, "Partitioned cbts") the
 * group is read from the one partition routing finds, or from every
 * partition that may hold it: each one's group as a PAO, the PAOs
 * combined and finalized once, as a round combines a group's PAOs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/tupconvert.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "cbt.h"
#include "cbt_am.h"
#include "cbt_groups.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "parser/parser.h"
#include "ss_aggutil.h"
#include "ss_changelog.h"
#include "ss_parent.h"
#include "ss_pending.h"
#include "ss_queryutil.h"
#include "ss_remote.h"
#include "ss_sqlfunc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(cbt_lookup);

typedef struct Lookup
{
	Relation	rel;
	CbtMeta    *meta;
	uint64		hash;
	CbtGroups  *groups;
	/* the log's records of the hash (rows), copied while the log is read */
	List	   *rows;
} Lookup;

/* SSLogRecordFn: keep a committed record of the hash the tree lacks. */
static void
lookup_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
			  void *arg)
{
	Lookup	   *lk = (Lookup *) arg;
	uint64		hash;
	bytea	   *row;

	if (pos < lk->meta->tree_pos)
		return;
	if ((hdr->type != SS_PENDING_ITEM && hdr->type != SS_PENDING_MERGE) ||
		hdr->len < sizeof(uint64))
		ss_page_corrupted(lk->rel, InvalidBlockNumber,
						  "A change log record of the cbt is damaged.");
	memcpy(&hash, payload, sizeof(hash));
	if (hash != lk->hash)
		return;
	/* the bytes after a flag: an input row's (0) or a PAO's (1) */
	row = palloc(VARHDRSZ + 1 + hdr->len - sizeof(uint64));
	SET_VARSIZE(row, VARHDRSZ + 1 + hdr->len - sizeof(uint64));
	VARDATA(row)[0] = hdr->type == SS_PENDING_MERGE;
	memcpy(VARDATA(row) + 1, payload + sizeof(uint64), hdr->len - sizeof(uint64));
	lk->rows = lappend(lk->rows, row);
}

/*
 * The tree and the log's records of the hash, consistently (a log that
 * moved while it was read is read again).  False if the table is empty
 * since TRUNCATE (no metapage contents yet).
 */
static bool
lookup_snapshot(Lookup *lk)
{
	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;

		/*
		 * as a reader that indexes the log: a lookup pays for a round only
		 * when the log is short or over its limit, else it reads the log
		 */
		ss_log_read_begin(lk->rel, &snap, attempt, true);
		if (!ss_read_structure_meta(lk->rel, &cbt_structure, lk->meta))
			return false;
		ss_log_snapshot_of(lk->rel, &lk->meta->hdr, &snap);
		list_free_deep(lk->rows);
		lk->rows = NIL;
		if (ss_log_scan(lk->rel, &snap, lookup_record, lk))
			return true;
	}
}

/* Fold the PAOs of the hash in one node's fragments into the groups. */
static void
lookup_node_fragments(Lookup *lk, const CbtNode *node)
{
	for (uint32 i = 0; i < node->nfragments; i++)
	{
		const CbtFragment *f = &node->fragments[i];
		CbtFragCursor cur;
		uint64		h;
		const char *pao;
		uint32		size;

		if (lk->hash < f->min_hash || lk->hash > f->max_hash)
			continue;
		cbt_frag_open(&cur, lk->rel, f);
		cbt_frag_seek(&cur, lk->hash);
		while (cbt_frag_next(&cur, &h, &pao, &size) && h == lk->hash)
			cbt_groups_add_pao(lk->groups, pao, size);
		cbt_frag_close(&cur);
	}
}

/*
 * Walk from the root to the leaf whose range holds the hash, checking
 * that every child follows its parent.
 */
static void
lookup_path(Lookup *lk)
{
	CbtNode    *node = palloc(sizeof(CbtNode));
	BlockNumber blk = lk->meta->root;
	uint64		generation = lk->meta->root_generation;
	int			depth = 0;

	if (blk == InvalidBlockNumber)
		return;
	cbt_read_node(lk->rel, blk, generation, node);
	for (;;)
	{
		uint32		c;
		uint64		lo,
					hi;
		uint32		level = node->level;

		CHECK_FOR_INTERRUPTS();
		if (lk->hash < node->lo || lk->hash > node->hi)
			ss_page_corrupted(lk->rel, blk,
							  "A node's hash range does not hold a hash its parent sent to it.");
		lookup_node_fragments(lk, node);
		if (level == 0)
			break;
		if (node->nchildren == 0 || node->nchildren > CBT_MAX_FANOUT ||
			++depth >= CBT_MAX_HEIGHT)
			ss_page_corrupted(lk->rel, blk,
							  "A cbt node's children are damaged.");
		/* the last child whose pivot is <= the hash */
		c = node->nchildren - 1;
		while (c > 0 && node->pivot[c] > lk->hash)
			c--;
		lo = node->pivot[c];
		hi = c + 1 < node->nchildren ? node->pivot[c + 1] - 1 : node->hi;
		blk = node->child[c];
		generation = node->child_generation[c];
		cbt_read_node(lk->rel, blk, generation, node);
		if (node->level + 1 != level || node->lo != lo || node->hi != hi)
			ss_page_corrupted(lk->rel, blk,
							  "A child's level or hash range does not follow its parent's.");
	}
	pfree(node);
}

/*
 * The key arguments: separate ones, or the elements of an array passed
 * with VARIADIC.
 */
static int
key_arguments(FunctionCallInfo fcinfo, Datum **values, bool **isnull,
			  Oid *elemtype)
{
	ArrayType  *arr;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			n;

	if (!get_fn_expr_variadic(fcinfo->flinfo))
	{
		n = PG_NARGS() - 1;
		*values = palloc(sizeof(Datum) * Max(n, 1));
		*isnull = palloc(sizeof(bool) * Max(n, 1));
		for (int i = 0; i < n; i++)
		{
			(*isnull)[i] = PG_ARGISNULL(i + 1);
			(*values)[i] = (*isnull)[i] ? (Datum) 0 : PG_GETARG_DATUM(i + 1);
		}
		*elemtype = InvalidOid;
		return n;
	}
	if (PG_ARGISNULL(1))
		ss_null_argument("the VARIADIC array of group keys of cbt_lookup is NULL");
	arr = PG_GETARG_ARRAYTYPE_P(1);
	*elemtype = ARR_ELEMTYPE(arr);
	get_typlenbyvalalign(*elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, *elemtype, typlen, typbyval, typalign, values,
					  isnull, &n);
	return n;
}

/*
 * Fold what rel holds of the hash of the key keys/keynulls (of the key
 * columns' types) into groups, initialized here with rel's run; the index
 * of the group whose keys equal the key, or -1.  Returns as rel's owner
 * (cbt_as_owner, save), which the aggregates' functions run as: the caller
 * serializes or finalizes the group, frees groups, then returns to itself
 * with cbt_as_caller(save).
 */
static int
lookup_group(Relation rel, const Datum *keys, const bool *keynulls,
			 CbtGroups *groups, CbtOwnerSave *save)
{
	CbtRuntime *rt = cbt_runtime(rel);
	const CbtDef *def = rt->def;
	CbtState   *st = cbt_get_state(rel);
	TupleTableSlot *key;
	Lookup		lk;
	ListCell   *lc;
	int			found = -1;

	/* the key, in the input slot's key columns, and its hash */
	key = rt->input_slot;
	ExecClearTuple(key);
	for (int i = 0; i < def->nkeys + def->ninputs; i++)
	{
		key->tts_values[i] = (Datum) 0;
		key->tts_isnull[i] = true;
	}
	for (int k = 0; k < def->nkeys; k++)
	{
		key->tts_isnull[k] = keynulls[k];
		key->tts_values[k] = keynulls[k] ? (Datum) 0 : keys[k];
	}
	ExecStoreVirtualTuple(key);

	memset(&lk, 0, sizeof(lk));
	lk.rel = rel;
	lk.meta = palloc(sizeof(CbtMeta));
	lk.groups = groups;

	/* hashed as INSERT hashes it: as the caller */
	lk.hash = cbt_agg_key_hash(rt->run, key, st->params.seed);
	if (st->params.hash_bits < 64)
		lk.hash &= (UINT64CONST(1) << st->params.hash_bits) - 1;
	cbt_groups_init(groups, rel, rt->run, def->nkeys);
	if (lookup_snapshot(&lk))
	{
		SSPendingIter it;
		SSPendingHeader hdr;
		char	   *payload;

		/* the aggregates' functions (and the keys' equality) as the owner */
		cbt_as_owner(rel, save);
		lookup_path(&lk);
		foreach(lc, lk.rows)
		{
			bytea	   *row = (bytea *) lfirst(lc);

			(void) cbt_groups_add_record(groups, lk.hash, VARDATA(row)[0],
										 VARDATA(row) + 1,
										 VARSIZE(row) - VARHDRSZ - 1);
		}
		/* the caller's own inserts, not committed yet */
		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		while (ss_pending_iter_next(&it, &hdr, &payload))
		{
			uint64		h;

			memcpy(&h, payload, sizeof(h));
			if (h == lk.hash)
				(void) cbt_groups_add_record(groups, h,
											 hdr.type == SS_PENDING_MERGE,
											 payload + sizeof(uint64),
											 hdr.len - sizeof(uint64));
		}
		ss_pending_iter_end(&it);
	}
	else
		cbt_as_owner(rel, save);

	for (int gi = 0; gi < groups->n && found < 0; gi++)
		if (cbt_agg_keys_equal(rt->run, groups->keys[gi], key))
			found = gi;
	ExecClearTuple(key);
	return found;
}

/* Group gi of groups finalized into a tuple of desc (rel's row type). */
static HeapTuple
group_tuple(CbtRuntime *rt, CbtGroups *groups, int gi, TupleDesc desc)
{
	const CbtDef *def = rt->def;
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *isnull = palloc(sizeof(bool) * desc->natts);
	Datum	   *results = palloc(sizeof(Datum) * def->naggs);
	bool	   *rnull = palloc(sizeof(bool) * def->naggs);

	for (int i = 0; i < desc->natts; i++)
	{
		values[i] = (Datum) 0;
		isnull[i] = true;
	}
	slot_getsomeattrs(groups->keys[gi], def->nkeys);
	for (int k = 0; k < def->nkeys; k++)
	{
		values[rt->input_src[k]] = groups->keys[gi]->tts_values[k];
		isnull[rt->input_src[k]] = groups->keys[gi]->tts_isnull[k];
	}
	cbt_agg_finalize(rt->run, &groups->states[gi], results, rnull);
	for (int a = 0; a < def->naggs; a++)
	{
		values[rt->result_attno[a]] = results[a];
		isnull[rt->result_attno[a]] = rnull[a];
	}
	return heap_form_tuple(desc, values, isnull);
}

/*
 * The group whose keys (of the key columns' types) are keys/keynulls,
 * finalized into a tuple of desc (the table's row type), or NULL when
 * there is none.  Shared by cbt_lookup and the planner's lookup scan
 * (cbt_path.c); allocates in the current memory context.
 */
HeapTuple
cbt_lookup_tuple(Relation rel, TupleDesc desc, const Datum *keys,
				 const bool *keynulls)
{
	CbtGroups	groups;
	CbtOwnerSave save;
	int			gi = lookup_group(rel, keys, keynulls, &groups, &save);
	HeapTuple	tuple = NULL;

	if (gi >= 0)
		tuple = group_tuple(cbt_runtime(rel), &groups, gi, desc);
	cbt_groups_free(&groups);
	cbt_as_caller(&save);
	return tuple;
}

/*
 * The group of the key combined from every partition in rels (cbts of
 * ref's definition): each partition's partial aggregate, as a PAO, folded
 * by the combine functions into one group of ref's run and finalized
 * once, as one cbt fed every partition's rows would give it.  A tuple of
 * ref's row type, or NULL when no partition has the group.
 */
static HeapTuple
lookup_combined(Relation ref, List *rels, const Datum *keys,
				const bool *keynulls)
{
	CbtRuntime *rt;
	CbtGroups	groups;
	CbtOwnerSave save;
	StringInfoData pao;
	List	   *paos = NIL;
	ListCell   *lc;
	HeapTuple	tuple = NULL;

	initStringInfo(&pao);
	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);
		int			gi = lookup_group(rel, keys, keynulls, &groups, &save);

		if (gi >= 0)
		{
			/* serialized as the partition's owner, its states in its run */
			bytea	   *copy;

			cbt_groups_pao(&groups, gi, &pao);
			copy = palloc(VARHDRSZ + pao.len);
			SET_VARSIZE(copy, VARHDRSZ + pao.len);
			memcpy(VARDATA(copy), pao.data, pao.len);
			paos = lappend(paos, copy);
		}
		cbt_groups_free(&groups);
		cbt_as_caller(&save);
	}
	if (paos == NIL)
		return NULL;

	rt = cbt_runtime(ref);
	cbt_as_owner(ref, &save);
	cbt_groups_init(&groups, ref, rt->run, rt->def->nkeys);
	foreach(lc, paos)
		cbt_groups_add_pao(&groups, VARDATA((bytea *) lfirst(lc)),
						   VARSIZE((bytea *) lfirst(lc)) - VARHDRSZ);
	if (groups.n != 1)
		elog(ERROR, "partial aggregates of one group have different keys");
	tuple = group_tuple(rt, &groups, 0, RelationGetDescr(ref));
	cbt_groups_free(&groups);
	cbt_as_caller(&save);
	return tuple;
}

/*
 * cbt_lookup's key arguments as values of the key columns' types of cbt
 * rel, one per group key (keynulls: NULL keys); named is the table the
 * call names (rel, or its partitioned parent) for the messages.
 */
static Datum *
lookup_keys(FunctionCallInfo fcinfo, Relation named, Relation rel,
			bool **keynulls)
{
	CbtRuntime *rt = cbt_runtime(rel);
	const CbtDef *def = rt->def;
	Datum	   *keys;
	Datum	   *args;
	Oid			elemtype;
	int			nargs;

	nargs = key_arguments(fcinfo, &args, keynulls, &elemtype);
	if (nargs != def->nkeys)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg_plural("cbt \"%s\" has %d group key, cbt_lookup got %d",
							   "cbt \"%s\" has %d group keys, cbt_lookup got %d",
							   def->nkeys,
							   RelationGetRelationName(named), def->nkeys, nargs)));

	keys = palloc0(sizeof(Datum) * Max(nargs, 1));
	for (int k = 0; k < def->nkeys; k++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel),
											  rt->input_src[k]);

		if (!(*keynulls)[k])
			keys[k] =
				ss_coerce_argument(args[k],
								   OidIsValid(elemtype) ? elemtype :
								   get_fn_expr_argtype(fcinfo->flinfo, k + 1),
								   att->atttypid, att->atttypmod,
								   "key", k + 1, NameStr(att->attname),
								   "cbt_lookup");
	}
	return keys;
}

/*
 * Refuse (42P17) partition rel of parent unless its definition is ref's:
 * its groups are then ref's, their partial aggregates combine with ref's
 * functions, and its columns are ref's and the parent's.  The stored
 * definitions are compared first (equal unless the definitions were
 * written differently), then the definitions as SQL, as cbt_info shows
 * them: the same text names the same keys, inputs and aggregates, by the
 * column names every partition shares with the parent.
 */
static void
check_partition(Relation parent, Relation ref, Relation rel)
{
	CbtRuntime *a = cbt_runtime(ref);
	CbtRuntime *b = cbt_runtime(rel);
	TupleDesc	adesc = RelationGetDescr(ref);
	TupleDesc	bdesc = RelationGetDescr(rel);
	char	   *atext;
	char	   *btext;
	bool		same;

	if (rel == ref)
		return;
	same = memcmp(a->definition, b->definition, CBT_DEF_MAX) == 0 &&
		a->def->nkeys == b->def->nkeys && a->def->naggs == b->def->naggs;
	for (int k = 0; same && k < a->def->nkeys; k++)
		same = strcmp(NameStr(TupleDescAttr(adesc, a->input_src[k])->attname),
					  NameStr(TupleDescAttr(bdesc, b->input_src[k])->attname)) == 0;
	for (int i = 0; same && i < a->def->naggs; i++)
		same = strcmp(NameStr(TupleDescAttr(adesc, a->result_attno[i])->attname),
					  NameStr(TupleDescAttr(bdesc, b->result_attno[i])->attname)) == 0;
	if (same)
		return;
	atext = cbt_definition_text(ref);
	btext = cbt_definition_text(rel);
	if (atext != NULL && btext != NULL && strcmp(atext, btext) == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
			 errmsg("partitions \"%s\" and \"%s\" of \"%s\" have different cbt definitions",
					RelationGetRelationName(ref), RelationGetRelationName(rel),
					RelationGetRelationName(parent)),
			 errdetail("The functions of a partitioned cbt take the group keys and aggregates of its first partition and combine the partitions' partial aggregates: every partition needs the same definition.  cbt_info on a partition shows its definition."),
			 errhint("Create every partition of \"%s\" with the same cbt_create definition.",
					 RelationGetRelationName(parent))));
}

/*
 * The partitions of one tree must have one definition, checked when a
 * partition is created or attached (ss_structure.h): a partition without
 * a definition yet (created USING cbt, to be given one by its label) is
 * checked by cbt_lookup once it has one.
 */
void
cbt_check_partition(Relation top, Relation first, Relation other)
{
	if (cbt_definition_text(first) == NULL ||
		cbt_definition_text(other) == NULL)
		return;
	check_partition(top, first, other);
}

static void
keep_definition(void *arg, TupleDesc desc, Datum *values, bool *nulls)
{
	*(char **) arg = nulls[0] ? NULL : TextDatumGetCString(values[0]);
}

/*
 * The result names of the group keys of the cbt on the server of foreign
 * partition leaf, in the order of cbt_lookup's arguments: from its
 * definition there (cbt_info's, a query whose GROUP BY lists the keys in
 * order, each a column of the query's target list, maybe renamed),
 * parsed but not analyzed: its names are the server's.
 */
static List *
remote_key_names(FunctionCallInfo fcinfo, Relation leaf)
{
	TupleDesc	desc = CreateTemplateTupleDesc(1);
	char	   *definition = NULL;
	List	   *stmts;
	SelectStmt *sel = NULL;
	List	   *names = NIL;
	ListCell   *lc;

	TupleDescInitEntry(desc, 1, "definition", TEXTOID, -1, 0);
	ss_remote_info(leaf, fcinfo, "cbt_info", desc, keep_definition,
				   &definition);
	if (definition != NULL)
	{
		stmts = raw_parser(definition, RAW_PARSE_DEFAULT);
		if (list_length(stmts) == 1 &&
			IsA(((RawStmt *) linitial(stmts))->stmt, SelectStmt))
			sel = (SelectStmt *) ((RawStmt *) linitial(stmts))->stmt;
	}
	if (sel == NULL || sel->groupClause == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the server of partition \"%s\" gives no cbt definition of its table",
						RelationGetRelationName(leaf)),
				 errhint("Give the table on that server a definition with cbt_create.")));
	foreach(lc, sel->groupClause)
	{
		ColumnRef  *key = (ColumnRef *) lfirst(lc);
		char	   *name;
		ListCell   *tl;

		if (!IsA(key, ColumnRef))
			elog(ERROR, "unexpected group key in a cbt definition: %s",
				 definition);
		name = strVal(llast(key->fields));
		foreach(tl, sel->targetList)
		{
			ResTarget  *target = (ResTarget *) lfirst(tl);

			if (target->name != NULL && IsA(target->val, ColumnRef) &&
				strcmp(strVal(llast(((ColumnRef *) target->val)->fields)),
					   name) == 0)
			{
				name = target->name;
				break;
			}
		}
		names = lappend(names, name);
	}
	return names;
}

/*
 * cbt_lookup on partitioned table parent whose partitions are all on
 * other servers (remote, the first of them): the key routed by the group
 * keys of remote's definition there, as the parent's columns of those
 * names, and asked of the one partition it reaches.  A group of several
 * partitions would need their partial aggregates, which do not leave a
 * server: refused.
 */
static void
lookup_remote_parent(FunctionCallInfo fcinfo, Relation parent,
					 Relation remote, TupleDesc desc)
{
	List	   *key_names = remote_key_names(fcinfo, remote);
	int			nkeys = list_length(key_names);
	const char **names = palloc(sizeof(char *) * nkeys);
	Oid		   *collations = palloc(sizeof(Oid) * nkeys);
	Datum	   *keys = palloc(sizeof(Datum) * nkeys);
	Datum	   *args;
	bool	   *keynulls;
	Oid			elemtype;
	SSRouteKey	kc;
	List	   *rels;
	int			nargs = key_arguments(fcinfo, &args, &keynulls, &elemtype);

	if (nargs != nkeys)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg_plural("cbt \"%s\" has %d group key, cbt_lookup got %d",
							   "cbt \"%s\" has %d group keys, cbt_lookup got %d",
							   nkeys, RelationGetRelationName(parent), nkeys,
							   nargs)));
	for (int k = 0; k < nkeys; k++)
	{
		const char *name = list_nth(key_names, k);
		AttrNumber	attnum = get_attnum(RelationGetRelid(parent), name);
		Form_pg_attribute att;

		if (attnum == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("group key \"%s\" of the cbt on the server of partition \"%s\" is not a column of \"%s\"",
							name, RelationGetRelationName(remote),
							RelationGetRelationName(parent))));
		att = TupleDescAttr(RelationGetDescr(parent), attnum - 1);
		names[k] = name;
		collations[k] = att->attcollation;
		if (!keynulls[k])
			keys[k] = ss_coerce_argument(args[k],
										 OidIsValid(elemtype) ? elemtype :
										 get_fn_expr_argtype(fcinfo->flinfo, k + 1),
										 att->atttypid, att->atttypmod,
										 "key", k + 1, name, "cbt_lookup");
	}
	kc.ncols = nkeys;
	kc.names = names;
	kc.values = keys;
	kc.isnull = keynulls;
	kc.collations = collations;
	kc.any_equality = false;
	rels = ss_route_columns(parent, &cbt_structure, &kc);
	if (list_length(rels) == 1)
		ss_remote_rows(linitial(rels), fcinfo, NULL, desc,
					   ((ReturnSetInfo *) fcinfo->resultinfo)->setResult);
	ss_close_targets(rels);
}

/*
 * cbt_lookup on partitioned table relid: the key's group as one cbt fed
 * every row inserted through the parent would give it, in the parent's
 * row type.  The group keys are those of the first partition (every
 * partition read must have its definition: check_partition); the key is
 * routed to the one partition that can hold the group while the levels
 * are partitioned by group keys (ss_route_columns), else the partial
 * aggregates of every partition below are combined (lookup_combined).
 * SELECT and row-level security are the parent's, as for a query
 * through it.
 */
static void
lookup_parent(FunctionCallInfo fcinfo, Oid relid)
{
	Relation	parent = ss_open_parent(relid, AccessShareLock, NULL,
										ACL_SELECT, "cbt_lookup()");
	Relation	ref = ss_first_leaf(parent, &cbt_structure);
	TupleDesc	desc;
	CbtRuntime *rt;
	SSRouteKey kc;
	const char **names;
	Oid		   *collations;
	Datum	   *keys;
	bool	   *keynulls;
	List	   *rels;
	ListCell   *lc;
	HeapTuple	tuple = NULL;
	Relation	from = ref;

	if (ref == NULL)
	{
		Relation	remote = ss_first_foreign_leaf(parent, &cbt_structure);

		desc = ss_sql_rows_result(fcinfo, parent, "cbt_lookup");
		/* no partition: no group; the keys are not known to check */
		if (remote != NULL)
		{
			lookup_remote_parent(fcinfo, parent, remote, desc);
			relation_close(remote, AccessShareLock);
		}
		relation_close(parent, AccessShareLock);
		return;
	}
	rt = cbt_runtime(ref);
	keys = lookup_keys(fcinfo, parent, ref, &keynulls);
	desc = ss_sql_rows_result(fcinfo, parent, "cbt_lookup");

	names = palloc(sizeof(char *) * rt->def->nkeys);
	collations = palloc(sizeof(Oid) * rt->def->nkeys);
	for (int k = 0; k < rt->def->nkeys; k++)
	{
		names[k] = NameStr(TupleDescAttr(RelationGetDescr(ref),
										 rt->input_src[k])->attname);
		collations[k] = rt->def->keys[k].collation;
	}
	kc.ncols = rt->def->nkeys;
	kc.names = names;
	kc.values = keys;
	kc.isnull = keynulls;
	kc.collations = collations;
	kc.any_equality = false;
	rels = ss_route_columns(parent, &cbt_structure, &kc);
	if (list_length(rels) == 1 && ss_is_remote(linitial(rels)))
	{
		/* the group's partition is on another server: asked there */
		ss_remote_rows(linitial(rels), fcinfo, NULL, desc,
					   ((ReturnSetInfo *) fcinfo->resultinfo)->setResult);
		rels = NIL;
	}
	foreach(lc, rels)
		check_partition(parent, ref, (Relation) lfirst(lc));

	if (list_length(rels) == 1)
	{
		from = (Relation) linitial(rels);
		tuple = cbt_lookup_tuple(from, RelationGetDescr(from), keys, keynulls);
	}
	else if (rels != NIL)
		tuple = lookup_combined(ref, rels, keys, keynulls);
	if (tuple != NULL)
	{
		/* the partition's columns are the parent's, maybe in another order */
		TupleConversionMap *map = convert_tuples_by_name(RelationGetDescr(from),
														 desc);

		if (map != NULL)
			tuple = execute_attr_map_tuple(tuple, map);
		tuplestore_puttuple(((ReturnSetInfo *) fcinfo->resultinfo)->setResult,
							tuple);
	}
	ss_close_targets(rels);
	relation_close(ref, AccessShareLock);
	relation_close(parent, AccessShareLock);
}

/*
 * cbt_lookup(NULL::table, VARIADIC keys "any") returns SETOF table
 *
 * The group whose keys equal the arguments (NULL matches the NULL group,
 * as GROUP BY), as one row of the table, or no row.  The keys are
 * separate arguments, or an array's elements after VARIADIC.  The first argument
 * only names the table by its row type, so that the result is of that
 * type.  Not STRICT: that argument is NULL, and so may a key be.
 */
Datum
cbt_lookup(PG_FUNCTION_ARGS)
{
	Oid			relid = ss_sql_rowtype_relid(fcinfo, "cbt_lookup", "cbt");
	Relation	rel;
	TupleDesc	desc;
	Datum	   *keys;
	bool	   *keynulls;
	HeapTuple	tuple;

	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
	{
		lookup_parent(fcinfo, relid);
		return (Datum) 0;
	}
	rel = ss_sql_open_keyed(relid, "cbt_lookup()", &cbt_structure);
	keys = lookup_keys(fcinfo, rel, rel, &keynulls);
	desc = ss_sql_rows_result(fcinfo, rel, "cbt_lookup");
	tuple = cbt_lookup_tuple(rel, desc, keys, keynulls);
	if (tuple != NULL)
		tuplestore_puttuple(((ReturnSetInfo *) fcinfo->resultinfo)->setResult,
							tuple);
	relation_close(rel, AccessShareLock);
	return (Datum) 0;
}
