/*-------------------------------------------------------------------------
 *
 * bfile_query.c
 *	  The SQL functions of the `bfile` access method: bfile_create,
 *	  bfile_info, bfile_flush (docs/bfile.md, "Queries").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/relation.h"
#include "bfile.h"
#include "bfile_am.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "ss_changelog.h"
#include "ss_sqlfunc.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(bfile_create);
PG_FUNCTION_INFO_V1(bfile_info);
PG_FUNCTION_INFO_V1(bfile_flush);
PG_FUNCTION_INFO_V1(bfile_subsample);

/* Open a bfile for a SQL function: locked, checked, allowed (mode). */
static Relation
bfile_open_for(Oid relid, LOCKMODE lockmode, const char *writer, AclMode mode)
{
	return ss_sql_open_structure(relid, lockmode, writer, mode, &bfile_state_ops, "bfile");
}

/*
 * bfile_create(name, columns, sample_size, min_fraction, buckets, mode,
 *				weight_column, time_column, unlogged) returns regclass
 *
 * Not STRICT: a NULL optional argument means the setting's value; a NULL
 * name or columns is an error.
 */
Datum
bfile_create(PG_FUNCTION_ARGS)
{
	BfileState *st = palloc0(sizeof(BfileState));
	BfileParams *p = &st->params;
	List	   *cols;
	Oid		   *types;
	char	   *sql;
	bool		unlogged = PG_ARGISNULL(8) ? false : PG_GETARG_BOOL(8);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bfile_create needs a table name and its columns")));
	if (!PG_ARGISNULL(7))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("bfile time columns are not implemented yet"),
				 errhint("Leave time_column NULL: the sample then keeps arrival order.")));
	cols = ss_parse_column_list(text_to_cstring(PG_GETARG_TEXT_PP(1)),
								"columns list",
								"List the columns: 'sensor int, value float8'.");
	types = palloc(sizeof(Oid) * list_length(cols));
	sql = ss_column_list_sql(cols, types);

	bfile_check_settings();
	p->sample_size = PG_ARGISNULL(2) ? ss_bfile_sample_size : PG_GETARG_INT64(2);
	p->alpha = PG_ARGISNULL(3) ? ss_bfile_min_fraction : PG_GETARG_FLOAT8(3);
	p->nbuckets = PG_ARGISNULL(4) ? (uint32) ss_bfile_buckets :
		(uint32) Max(PG_GETARG_INT32(4), 0);
	p->mode = PG_ARGISNULL(5) ? (uint32) ss_bfile_mode :
		(uint32) bfile_mode_from_name(text_to_cstring(PG_GETARG_TEXT_PP(5)));
	p->seed = bfile_new_seed();
	if (!(p->alpha > 0.0 && p->alpha < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile min_fraction %g is out of range", p->alpha),
				 errhint("Use a fraction strictly between 0 and 1: the smallest sample size over the largest.")));
	if (p->nbuckets < 1 || p->nbuckets > BFILE_MAX_BUCKETS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile buckets %u is out of range", p->nbuckets),
				 errhint("Use 1 to %d.", BFILE_MAX_BUCKETS)));
	p->unroll_every = bfile_unroll_every(p->alpha, p->nbuckets);
	if (BFILE_MODE_WEIGHTED(p->mode))
	{
		const char *wname = PG_ARGISNULL(6) ? ss_bfile_weight_column :
			text_to_cstring(PG_GETARG_TEXT_PP(6));
		ListCell   *lc;
		int			i = 0;

		foreach(lc, cols)
		{
			if (wname && strcmp(((ColumnDef *) lfirst(lc))->colname, wname) == 0)
				p->weight_attnum = i + 1;
			i++;
		}
		if (p->weight_attnum == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a weighted bfile needs a weight column among its columns"),
					 errhint("Name it with weight_column.")));
		if (types[p->weight_attnum - 1] != FLOAT8OID && types[p->weight_attnum - 1] != FLOAT4OID &&
			types[p->weight_attnum - 1] != INT2OID && types[p->weight_attnum - 1] != INT4OID &&
			types[p->weight_attnum - 1] != INT8OID && types[p->weight_attnum - 1] != NUMERICOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("weight column \"%s\" of a bfile must be of a numeric type, not %s",
							wname, format_type_be(types[p->weight_attnum - 1]))));
	}
	else if (!PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a weight column needs mode weighted or weighted_decayed")));
	if (p->sample_size < 2 || p->sample_size > BFILE_MAX_SAMPLE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile sample size " INT64_FORMAT " is out of range", p->sample_size),
				 errhint("Use 2 to " INT64_FORMAT " rows.", (int64) BFILE_MAX_SAMPLE)));
	PG_RETURN_OID(ss_create_structure_columns(&bfile_state_ops, st,
											  PG_GETARG_TEXT_PP(0), sql,
											  "bfile", unlogged));
}

/* ---- bfile_info ---- */

Datum
bfile_info(PG_FUNCTION_ARGS)
{
	Relation	rel = bfile_open_for(PG_GETARG_OID(0), AccessShareLock, NULL,
									 ACL_SELECT);
	BfileMeta  *m = palloc0(sizeof(BfileMeta));
	TupleDesc	tupdesc;
	Datum		values[18];
	bool		nulls[18] = {0};
	SSLogSnapshot snap;
	Datum	   *items;
	int64		free_pages = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	ss_log_read_begin(rel, &snap, 0, false);
	if (!ss_read_structure_meta(rel, &bfile_state_ops, m))
		bfile_state_ops.init_meta(bfile_get_state(rel), m);

	items = palloc(sizeof(Datum) * Max(m->nbuckets_live, 1));
	for (uint32 i = 0; i < m->nbuckets_live; i++)
		items[i] = Int64GetDatum(m->buckets[i].items);
	for (uint32 i = 0; i < m->nfree; i++)
		free_pages += m->free_chains[i].pages;
	free_pages += m->spare_count;

	values[0] = CStringGetTextDatum(bfile_mode_name(m->params.mode));
	values[1] = Int64GetDatum(m->params.sample_size);
	values[2] = Int64GetDatum((int64) floor(m->params.alpha * m->params.sample_size));
	values[3] = Int64GetDatum(m->size);
	values[4] = Int32GetDatum(m->level);
	values[5] = Int32GetDatum(m->tail_level);
	values[6] = Int32GetDatum((int32) m->params.nbuckets);
	values[7] = PointerGetDatum(construct_array(items, (int) m->nbuckets_live, INT8OID,
												8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[8] = Int64GetDatum(m->tail.items);
	values[9] = Int64GetDatum(m->seen);
	if (BFILE_MODE_DECAYED(m->params.mode))
		nulls[10] = true;		/* depends on each item's age */
	else
		values[10] = Float8GetDatum(pow(m->params.alpha, m->level - 1));
	values[11] = Int64GetDatum((int64) m->data_bytes);
	values[12] = Int64GetDatum(m->discards);
	values[13] = Int64GetDatum(m->unrolls);
	values[14] = Int32GetDatum((int32) m->params.unroll_every);
	values[15] = Int64GetDatum((int64) RelationGetNumberOfBlocks(rel));
	values[16] = Int64GetDatum(free_pages);
	values[17] = Int64GetDatum(m->leaked_pages);
	relation_close(rel, AccessShareLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---- bfile_flush ---- */

static int64
flush_done(Relation rel, void *stats)
{
	BfileMeta  *m = palloc(sizeof(BfileMeta));
	int64		size = 0;

	if (ss_read_structure_meta(rel, &bfile_state_ops, m))
		size = m->size;
	pfree(m);
	return size;
}

/*
 * bfile_flush(regclass) returns bigint: draw every committed row into the
 * sample now; returns the sample's size.
 */
Datum
bfile_flush(PG_FUNCTION_ARGS)
{
	Relation	rel = bfile_open_for(PG_GETARG_OID(0), RowExclusiveLock,
									 "bfile_flush()", ACL_INSERT);
	int64		size = ss_log_flush(rel, flush_done);

	relation_close(rel, RowExclusiveLock);
	PG_RETURN_INT64(size);
}

/* ---- bfile_subsample ---- */

/*
 * The buckets a subsample of n takes whole, and the one it samples from
 * (§5.1): the smallest bucket `partial` such that other whole buckets,
 * taken largest first without reaching n, sum to at least n - |partial|.
 * Returns the partial bucket's index (nb: the tail) or -1 if none works,
 * and marks the whole ones.
 */
static int
choose_buckets(const int64 *items, int nb, int64 n, bool *whole, int64 *taken)
{
	int		   *order = palloc(sizeof(int) * nb);

	for (int i = 0; i < nb; i++)
		order[i] = i;
	/* by size, ascending (insertion sort: at most 33 buckets) */
	for (int i = 1; i < nb; i++)
		for (int j = i; j > 0 && items[order[j]] < items[order[j - 1]]; j--)
		{
			int			t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int c = 0; c < nb; c++)
	{
		int			b = order[c];
		int64		sum = 0;

		if (items[b] == 0)
			continue;
		memset(whole, 0, sizeof(bool) * nb);
		for (int k = nb - 1; k >= 0; k--)
		{
			int			o = order[k];

			if (o != b && items[o] > 0 && sum + items[o] < n)
			{
				whole[o] = true;
				sum += items[o];
			}
		}
		if (sum + items[b] >= n)
		{
			*taken = sum;
			pfree(order);
			return b;
		}
	}
	pfree(order);
	return -1;
}

/*
 * bfile_subsample(NULL::table, n bigint) returns SETOF table
 *
 * A random subsample of exactly min(n, size) rows of the sample.  In the
 * uniform mode every bucket is a uniform sample of the stream, so whole
 * buckets plus a uniform choice of the rest from one bucket (selection
 * sampling, Knuth's algorithm S) is a uniform subsample (§5.1), reading
 * only those buckets.  In the other modes, and when no choice of buckets
 * works, the rows are chosen from the whole sample the same way: a uniform
 * subsample of a biased sample keeps its bias.  The first argument only
 * names the table by its row type.  Not STRICT: that argument is NULL.
 */
Datum
bfile_subsample(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	Oid			relid = OidIsValid(rowtype) ? get_typ_typrelid(rowtype) : InvalidOid;
	Relation	rel;
	BfileMeta  *m;
	int64		n;
	int			nb;
	int64	   *items;
	bool	   *whole;
	int			partial = -1;
	int64		taken = 0;
	int64		need,
				left;
	Datum	   *values;
	bool	   *nulls;
	TupleDesc	desc;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("the first argument of bfile_subsample must be a bfile table's row type"),
				 errhint("Pass NULL::table_name.")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the subsample size of bfile_subsample must not be NULL")));
	n = PG_GETARG_INT64(1);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile_subsample size " INT64_FORMAT " is negative", n)));
	rel = bfile_open_for(relid, AccessShareLock, NULL, ACL_SELECT);
	InitMaterializedSRF(fcinfo, 0);
	desc = rsinfo->setDesc;
	if (desc->natts != RelationGetDescr(rel)->natts)
		elog(ERROR, "bfile_subsample: the result is not the table's row type");
	m = palloc(sizeof(BfileMeta));
	if (!bfile_read_meta(rel, m) || n == 0 || m->size == 0)
	{
		relation_close(rel, AccessShareLock);
		return (Datum) 0;
	}
	nb = (int) m->nbuckets_live + 1;
	items = palloc(sizeof(int64) * nb);
	whole = palloc0(sizeof(bool) * nb);
	for (int i = 0; i < nb - 1; i++)
		items[i] = m->buckets[i].items;
	items[nb - 1] = m->tail.items;
	if (n >= m->size)
	{
		for (int i = 0; i < nb; i++)
			whole[i] = true;
	}
	else if (m->params.mode == BFILE_UNIFORM)
		partial = choose_buckets(items, nb, n, whole, &taken);

	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	need = partial >= 0 ? n - taken : (n >= m->size ? 0 : n);
	left = partial >= 0 ? items[partial] : m->size;
	for (int i = 0; i < nb; i++)
	{
		BfileChain it;
		HeapTupleData htup;
		bool		sampled = (partial >= 0 ? i == partial :
							   n < m->size);

		if (!whole[i] && !sampled)
			continue;
		bfile_chain_begin(&it, rel, i < nb - 1 ? &m->buckets[i] : &m->tail);
		while (bfile_chain_next(&it, &htup))
		{
			if (sampled)
			{
				/* selection sampling: need of the left remaining */
				if (need == 0 || left <= 0)
					break;
				if (pg_prng_double(&pg_global_prng_state) * (double) left-- >= (double) need)
					continue;
				need--;
			}
			heap_deform_tuple(&htup, desc, values, nulls);
			tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
		}
		bfile_chain_end(&it);
	}
	relation_close(rel, AccessShareLock);
	return (Datum) 0;
}
