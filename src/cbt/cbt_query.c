/*-------------------------------------------------------------------------
 *
 * cbt_query.c
 *	  The SQL functions of the `cbt` access method: cbt_create, cbt_info,
 *	  cbt_finalize.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_class.h"
#include "cbt.h"
#include "cbt_am.h"
#include "cbt_consolidate.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_parent.h"
#include "ss_queryutil.h"
#include "ss_sqlfunc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "storage/bufmgr.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"

PG_FUNCTION_INFO_V1(cbt_create);
PG_FUNCTION_INFO_V1(cbt_info);
PG_FUNCTION_INFO_V1(cbt_finalize);

/*
 * cbt_create(name, group_by, aggregates, root_buffer, node_buffer,
 *			  fanout, compression, unlogged) returns regclass
 *
 * Not STRICT: a NULL optional argument means the setting's value; a NULL
 * name, group_by or aggregates is an error.  The sizes are texts with
 * units, as SET takes them.
 */
Datum
cbt_create(PG_FUNCTION_ARGS)
{
	CbtState   *st = palloc0(sizeof(CbtState));
	CbtDef	   *def;
	CbtColumn	cols[CBT_MAX_COLUMNS];
	int			ncols;
	StringInfoData sql;
	bool		unlogged = PG_ARGISNULL(7) ? false : PG_GETARG_BOOL(7);
	Oid			relid;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("cbt_create needs a table name, group keys and aggregates")));
	ss_params_from_call(&cbt_structure, fcinfo, st);

	def = cbt_def_create(text_to_cstring(PG_GETARG_TEXT_PP(1)),
						 text_to_cstring(PG_GETARG_TEXT_PP(2)));
	cbt_def_store(def, st->definition);

	ncols = cbt_def_relation_columns(def, cols);
	st->owner = GetUserId();
	st->ncols = ncols;
	initStringInfo(&sql);
	for (int i = 0; i < ncols; i++)
	{
		namestrcpy(&st->colnames[i], cols[i].name);
		if (i > 0)
			appendStringInfoString(&sql, ", ");
		appendStringInfo(&sql, "%s %s", quote_identifier(cols[i].name),
						 format_type_extended(cols[i].type, cols[i].typmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN |
											  FORMAT_TYPE_FORCE_QUALIFY));
		if (OidIsValid(cols[i].collation) &&
			cols[i].collation != get_typcollation(cols[i].type))
			appendStringInfo(&sql, " COLLATE %s",
							 generate_collation_name(cols[i].collation));
	}
	relid = ss_create_structure_columns(&cbt_structure, st,
										PG_GETARG_TEXT_PP(0), sql.data,
										"cbt", unlogged);
	cbt_def_record_dependencies(def, relid);
	PG_RETURN_OID(relid);
}

/* ---- cbt_info ---- */

/* SSInfoFillFn: one cbt's row, the tree as consolidated */
static void
cbt_info_fill(Relation rel, Datum *values, bool *nulls)
{
	CbtMeta    *meta = palloc0(sizeof(CbtMeta));
	CbtState   *st = cbt_get_state(rel);
	int64		free_pages = 0;
	char	   *definition;

	/* what waits in the log is pending_records */
	if (!ss_read_structure_meta(rel, &cbt_structure, meta))
	{
		meta->params = st->params;
		meta->root = InvalidBlockNumber;
	}

	definition = cbt_definition_text(rel);
	values[0] = definition ? CStringGetTextDatum(definition) : (Datum) 0;
	nulls[0] = definition == NULL;
	values[1] = Int64GetDatum((int64) meta->params.root_buffer_kb * 1024);
	values[2] = Int64GetDatum((int64) meta->params.node_buffer_kb * 1024);
	values[3] = Int32GetDatum((int32) meta->params.fanout);
	values[4] = BoolGetDatum(meta->params.compression);
	values[5] = Int32GetDatum((int32) meta->height);
	values[6] = Int64GetDatum((int64) meta->nodes);
	values[7] = Int64GetDatum((int64) meta->fragments);
	values[8] = Int64GetDatum(meta->rows);
	values[9] = Int64GetDatum((int64) meta->raw_bytes);
	values[10] = Int64GetDatum((int64) meta->stored_bytes);
	values[11] = Int64GetDatum(meta->rounds);
	values[12] = Int64GetDatum(meta->spills);
	values[13] = Int64GetDatum(meta->splits);
	values[14] = Int64GetDatum((int64) RelationGetNumberOfBlocks(rel));
	values[15] = Int64GetDatum(meta->leaked_pages);
	free_pages = (int64) meta->overflow_free_pages;
	for (uint32 i = 0; i < meta->nfree; i++)
		free_pages += meta->free_ext[i].npages;
	values[16] = Int64GetDatum(free_pages);
	values[17] = Int32GetDatum((int32) (meta->nfree + meta->overflow_extents));
	values[18] = Int64GetDatum((int64) meta->fragments_in_pieces);
}

/*
 * cbt_info(regclass): one cbt's row, or a partitioned parent's merged
 * from its partitions' (ss_sql_info): the definition and parameters
 * where all partitions share them (else NULL), the height of the highest
 * tree, sizes and counters summed.
 */
Datum
cbt_info(PG_FUNCTION_ARGS)
{
	return ss_sql_info(fcinfo, &cbt_structure, "cbt_info",
					   "=====>+++++++++++++", cbt_info_fill);
}

/* ---- cbt_finalize ---- */

/* ss_log_flush's flush: with the log consolidated, finalize the tree. */
static int64
finalize_tree(Relation rel, void *stats)
{
	CbtRuntime *rt = cbt_runtime(rel);
	CbtMeta    *meta = palloc(sizeof(CbtMeta));
	CbtRound	r;
	CbtOwnerSave save;
	int64		groups;
	BufferAccessStrategy prev;

	if (!ss_read_structure_meta(rel, &cbt_structure, meta))
		return 0;
	cbt_as_owner(rel, &save);
	/* every fragment is read once: through the bulk-read ring */
	prev = ss_bulk_read_begin();
	cbt_round_begin(&r, rel, meta, rt->run, rt->def);
	groups = cbt_round_finalize(&r);
	cbt_round_end(&r);
	ss_bulk_read_end(prev);
	cbt_as_caller(&save);
	pfree(meta);
	return groups;
}

/*
 * cbt_finalize(regclass) returns bigint: consolidate every committed row,
 * push every buffer down to the leaves, merge each leaf's fragments into
 * one; returns the groups.  Out of place, one install at the end:
 * interrupting it loses nothing.  On a partitioned parent (INSERT on it,
 * as for a partition alone): every partition finalized, one after the
 * other, and their groups summed (a group split over partitions counts
 * once in each).
 */
Datum
cbt_finalize(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	int64		groups = 0;

	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
	{
		List	   *rels;
		ListCell   *lc;

		rel = ss_open_parent(relid, RowExclusiveLock, "cbt_finalize()",
							 ACL_INSERT, NULL);
		rels = ss_open_all_leaves(rel, RowExclusiveLock, "cbt_finalize()",
								  &cbt_structure);
		foreach(lc, rels)
			(void) cbt_runtime((Relation) lfirst(lc));
		foreach(lc, rels)
		{
			Relation	leaf = (Relation) lfirst(lc);

			groups += ss_log_flush(leaf, "cbt_finalize", finalize_tree);
			relation_close(leaf, RowExclusiveLock);
		}
		relation_close(rel, RowExclusiveLock);
		PG_RETURN_INT64(groups);
	}
	rel = ss_sql_open_structure(relid, RowExclusiveLock, "cbt_finalize()",
								ACL_INSERT, &cbt_structure);
	(void) cbt_runtime(rel);	/* no definition: refused before any work */
	groups = ss_log_flush(rel, "cbt_finalize", finalize_tree);
	relation_close(rel, RowExclusiveLock);
	PG_RETURN_INT64(groups);
}
