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
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/keywords.h"
#include "common/pg_prng.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "parser/scanner.h"
#include "ss_aggutil.h"
#include "ss_changelog.h"
#include "ss_parent.h"
#include "ss_queryutil.h"
#include "ss_remote.h"
#include "ss_sqlfunc.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(bfile_create);
PG_FUNCTION_INFO_V1(bfile_info);
PG_FUNCTION_INFO_V1(bfile_flush);
PG_FUNCTION_INFO_V1(bfile_subsample);
PG_FUNCTION_INFO_V1(bfile_window);

/*
 * NOT NULL in bfile_create's column list.  ss_parse_column_list takes a
 * name, a type and a COLLATE clause per column; a bfile's columns may also
 * be declared NOT NULL, as its time column should be (the access method
 * refuses a NULL time anyway; the constraint puts that in the table's
 * definition, where the executor checks it before the row reaches us).
 *
 * Each unnamed NOT NULL clause is found with PostgreSQL's parser, its
 * column noted in *notnull, and its tokens blanked out of the list, which
 * keeps its length, so the list then parses as usual.  A list with
 * anything else beside NOT NULL that ss_parse_column_list refuses is
 * returned unchanged (and *notnull set to NULL): the error then quotes the
 * user's own text.
 */
static char *
take_not_null(const char *list, bool **notnull)
{
	static const char prefix[] = "CREATE TABLE ss_columns (";
	int			plen = sizeof(prefix) - 1;
	char	   *sql = psprintf("%s%s)", prefix, list);
	List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	RawStmt    *rs;
	CreateStmt *cs;
	List	   *starts = NIL;	/* where each NOT NULL clause begins */
	bool	   *marks;
	ListCell   *lc;
	int			i = 0;

	*notnull = NULL;
	if (list_length(raw) != 1)
		return (char *) list;
	rs = linitial_node(RawStmt, raw);
	if (!IsA(rs->stmt, CreateStmt) || rs->stmt_len != 0)
		return (char *) list;
	cs = (CreateStmt *) rs->stmt;
	if (cs->inhRelations || cs->partbound || cs->partspec || cs->ofTypename ||
		cs->constraints || cs->options || cs->oncommit != ONCOMMIT_NOOP ||
		cs->tablespacename || cs->accessMethod || cs->tableElts == NIL)
		return (char *) list;
	marks = palloc0(sizeof(bool) * list_length(cs->tableElts));
	foreach(lc, cs->tableElts)
	{
		ColumnDef  *cd = (ColumnDef *) lfirst(lc);
		ListCell   *lcc;

		if (!IsA(cd, ColumnDef))
			return (char *) list;
		foreach(lcc, cd->constraints)
		{
			Constraint *c = (Constraint *) lfirst(lcc);

			if (!IsA(c, Constraint) || c->contype != CONSTR_NOTNULL ||
				c->conname != NULL || c->location < plen)
				return (char *) list;
			starts = lappend_int(starts, c->location);
			marks[i] = true;
		}
		i++;
	}
	if (starts != NIL)
	{
		core_yy_extra_type yyextra;
		core_YYSTYPE yylval;
		YYLTYPE		loc;
		core_yyscan_t scanner = scanner_init(sql, &yyextra, &ScanKeywords,
											 ScanKeywordTokens);
		char	   *blanked = pstrdup(sql);
		int			prev = -1;
		int			done = 0;

		/* NOT, then the next token, NULL: blank both and what is between */
		while (core_yylex(&yylval, &loc, scanner) != 0)
		{
			if (prev >= 0 && list_member_int(starts, prev))
			{
				if (pg_strncasecmp(sql + prev, "not", 3) != 0 ||
					pg_strncasecmp(sql + loc, "null", 4) != 0)
					elog(ERROR, "unexpected NOT NULL clause in \"%s\"", list);
				memset(blanked + prev, ' ', loc + 4 - prev);
				done++;
			}
			prev = loc;
		}
		scanner_finish(scanner);
		if (done != list_length(starts))
			elog(ERROR, "unexpected NOT NULL clause in \"%s\"", list);
		sql = blanked;
	}
	*notnull = marks;
	sql[strlen(sql) - 1] = '\0';	/* the closing parenthesis added above */
	return sql + plen;
}

/* 1 + the position of column name in cols (the last, if twice), or 0 */
static int32
column_position(List *cols, const char *name)
{
	ListCell   *lc;
	int32		i = 0;
	int32		found = 0;

	foreach(lc, cols)
	{
		i++;
		if (name && strcmp(((ColumnDef *) lfirst(lc))->colname, name) == 0)
			found = i;
	}
	return found;
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
	bool	   *notnull;
	char	   *list;
	StringInfoData sql;
	ListCell   *lcol;
	int			ncols = 0;
	bool		unlogged = PG_ARGISNULL(8) ? false : PG_GETARG_BOOL(8);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bfile_create needs a table name and its columns")));
	list = take_not_null(text_to_cstring(PG_GETARG_TEXT_PP(1)), &notnull);
	cols = ss_parse_column_list(list, "columns list",
								"List the columns: 'sensor int, value float8'.");
	types = palloc(sizeof(Oid) * list_length(cols));
	initStringInfo(&sql);
	foreach(lcol, cols)
	{
		appendStringInfo(&sql, "%s%s%s", ncols > 0 ? ", " : "",
						 ss_column_list_sql(list_make1(lfirst(lcol)), &types[ncols]),
						 notnull && notnull[ncols] ? " NOT NULL" : "");
		ncols++;
	}

	ss_params_from_call(&bfile_structure, fcinfo, st);

	/* the weight and time columns: named among the columns of the list */
	if (BFILE_MODE_WEIGHTED(p->mode))
	{
		const char *wname = PG_ARGISNULL(6) ? ss_bfile_weight_column :
			text_to_cstring(PG_GETARG_TEXT_PP(6));

		p->weight_attnum = column_position(cols, wname);
		if (p->weight_attnum == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a weighted bfile needs a weight column among its columns"),
					 errhint("Name it with weight_column.")));
		bfile_check_weight_type(wname, types[p->weight_attnum - 1]);
	}
	else if (!PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a weight column needs mode weighted or weighted_decayed")));
	{
		const char *tname = PG_ARGISNULL(7) ? ss_bfile_time_column :
			text_to_cstring(PG_GETARG_TEXT_PP(7));

		if (tname && tname[0])
		{
			p->time_attnum = column_position(cols, tname);
			if (p->time_attnum == 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("time column \"%s\" is not among the bfile's columns", tname)));
			bfile_check_time_type(tname, types[p->time_attnum - 1]);
		}
	}
	PG_RETURN_OID(ss_create_structure_columns(&bfile_structure, st,
											  PG_GETARG_TEXT_PP(0), sql.data,
											  "bfile", unlogged));
}

/* ---- bfile_info ---- */

static void
bfile_info_fill(Relation rel, Datum *values, bool *nulls)
{
	BfileMeta  *m = palloc0(sizeof(BfileMeta));
	BfileView	v;
	Datum	   *items;
	int64		free_pages = 0;

	memset(&v, 0, sizeof(v));
	v.meta = m;
	v.no_round = true;
	if (!bfile_view_read(rel, &v, NULL, NULL, 0, 0))
	{
		bfile_structure.init_meta(bfile_get_state(rel), m);
		v.level = m->level;
		v.size = m->size;
		v.bytes = (int64) m->data_bytes;
		v.seen = m->seen;
	}

	items = palloc(sizeof(Datum) * Max(m->nbuckets_live, 1));
	for (uint32 i = 0; i < m->nbuckets_live; i++)
		items[i] = Int64GetDatum(m->buckets[i].items);
	for (uint32 i = 0; i < m->nfree; i++)
		free_pages += m->free_chains[i].pages;
	for (uint32 i = 0; i < m->nspare; i++)
		free_pages += m->spare[i].count;

	values[0] = CStringGetTextDatum(bfile_mode_name(m->params.mode));
	if (m->params.sample_bytes > 0)
	{
		nulls[1] = nulls[2] = true;
		values[20] = Int64GetDatum(m->params.sample_bytes);
		values[21] = Int64GetDatum((int64) floor(m->params.alpha * m->params.sample_bytes));
	}
	else
	{
		values[1] = Int64GetDatum(m->params.sample_size);
		values[2] = Int64GetDatum((int64) floor(m->params.alpha * m->params.sample_size));
		nulls[20] = nulls[21] = true;
	}
	values[3] = Int64GetDatum(v.size);
	values[4] = Int32GetDatum(v.level);
	values[5] = Int32GetDatum(m->tail_level);
	values[6] = Int32GetDatum((int32) m->params.nbuckets);
	values[7] = PointerGetDatum(construct_array(items, (int) m->nbuckets_live, INT8OID,
												8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[8] = Int64GetDatum(m->tail.items);
	values[9] = Int64GetDatum(v.seen);
	if (BFILE_MODE_DECAYED(m->params.mode))
		nulls[10] = true;		/* depends on each item's age */
	else
		values[10] = Float8GetDatum(pow(m->params.alpha, v.level - 1));
	values[11] = Int64GetDatum(v.bytes);
	values[12] = Int64GetDatum(m->discards + v.discards);
	values[13] = Int64GetDatum(m->unrolls);
	values[14] = Int32GetDatum((int32) m->params.unroll_every);
	values[15] = Int64GetDatum((int64) RelationGetNumberOfBlocks(rel));
	values[16] = Int64GetDatum(free_pages);
	values[17] = Int64GetDatum(m->leaked_pages);
	values[18] = Int64GetDatum(m->added);
	values[19] = Int64GetDatum(m->pages_written);
}

/*
 * On a partitioned table, the partitions' rows merged: the parameters
 * (mode, sizes asked for, buckets) and the state of each sample (level,
 * inclusion probability, bucket_items) where every partition has the same,
 * NULL where they differ; the sizes and counters summed.
 */
Datum
bfile_info(PG_FUNCTION_ARGS)
{
	return ss_sql_info(fcinfo, &bfile_structure, "bfile_info",
					   "===+====++=+++=+++++==", bfile_info_fill);
}

/* ---- bfile_flush ---- */

static int64
flush_done(Relation rel, void *stats)
{
	BfileMeta  *m = palloc(sizeof(BfileMeta));
	int64		size = 0;

	if (ss_read_structure_meta(rel, &bfile_structure, m))
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
	PG_RETURN_INT64(ss_sql_flush(fcinfo, "bfile_flush()",
								 &bfile_structure, flush_done, false));
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
 * Selection sampling (Knuth's algorithm S): whether the next of *left rows
 * is one of the *need still wanted.
 */
static bool
select_next(int64 *need, int64 *left)
{
	if (*need == 0 || *left <= 0)
		return false;
	if (pg_prng_double(&pg_global_prng_state) * (double) (*left)-- >= (double) *need)
		return false;
	(*need)--;
	return true;
}

/*
 * A random subsample of exactly min(n, size) rows of rel's sample, put in
 * out (desc: rel's row type); returns the sample's level L (0: rel has no
 * metapage).  In the uniform mode every bucket is a
 * uniform sample of the stream, so whole buckets plus a uniform choice of
 * the rest from one bucket (selection sampling, Knuth's algorithm S) is a
 * uniform subsample (§5.1), reading only those buckets.  In the other
 * modes, and when no choice of buckets works, the rows are chosen from the
 * whole sample the same way: a uniform subsample of a biased sample keeps
 * its bias.
 */
static int32
subsample_rows(Relation rel, TupleDesc desc, Tuplestorestate *out, int64 n)
{
	BfileView	v;
	BfileMeta  *m;
	Tuplestorestate *log_rows;
	int			nb;
	int64	   *items;
	bool	   *whole;
	int			partial = -1;
	int64		taken = 0;
	int64		need,
				left;
	Datum	   *values;
	bool	   *nulls;

	memset(&v, 0, sizeof(v));
	log_rows = tuplestore_begin_heap(false, false, work_mem);
	if (!bfile_view_read(rel, &v, log_rows, desc, PG_INT64_MIN, PG_INT64_MAX))
	{
		tuplestore_end(log_rows);
		return 0;
	}
	if (n == 0 || v.size == 0)
	{
		tuplestore_end(log_rows);
		return v.level;
	}
	m = v.meta;
	nb = (int) m->nbuckets_live + 1;
	items = palloc(sizeof(int64) * nb);
	whole = palloc0(sizeof(bool) * nb);
	for (int i = 0; i < nb - 1; i++)
		items[i] = m->buckets[i].items;
	items[nb - 1] = m->tail.items;
	if (n >= v.size)
	{
		for (int i = 0; i < nb; i++)
			whole[i] = bfile_view_bucket_visible(&v, i < nb - 1 ? &m->buckets[i] : &m->tail);
	}
	else if (m->params.mode == BFILE_UNIFORM && v.log_rows == 0)
		partial = choose_buckets(items, nb, n, whole, &taken);

	/*
	 * With rows still in the change log the buckets are not yet the
	 * round's; the rows are chosen from the whole view as in the other
	 * modes.
	 */
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	need = partial >= 0 ? n - taken : (n >= v.size ? 0 : n);
	left = partial >= 0 ? items[partial] : v.size;
	for (int i = 0; i < nb; i++)
	{
		const BfileBucket *b = i < nb - 1 ? &m->buckets[i] : &m->tail;
		BfileChain it;
		HeapTupleData htup;
		bool		sampled = (partial >= 0 ? i == partial : n < v.size);

		if ((!whole[i] && !sampled) || !bfile_view_bucket_visible(&v, b))
			continue;
		bfile_chain_begin(&it, rel, b);
		while (bfile_chain_next(&it, &htup))
		{
			if (it.item_level < v.level)
				continue;		/* a tail item the log's rows discarded */
			if (sampled && !select_next(&need, &left))
			{
				if (need == 0)
					break;
				continue;
			}
			heap_deform_tuple(&htup, desc, values, nulls);
			tuplestore_putvalues(out, desc, values, nulls);
		}
		bfile_chain_end(&it);
	}
	/* the change log's rows in the sample (sampled as the buckets' rows) */
	if (partial < 0)
	{
		TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);

		while (tuplestore_gettupleslot(log_rows, true, false, slot))
		{
			if (n < v.size && !select_next(&need, &left))
			{
				if (need == 0)
					break;
				continue;
			}
			slot_getallattrs(slot);
			tuplestore_putvalues(out, desc, slot->tts_values, slot->tts_isnull);
		}
		ExecDropSingleTupleTableSlot(slot);
	}
	tuplestore_end(log_rows);
	return v.level;
}

/* ss_leaf_rows' function: *(int64 *) arg rows of a partition's sample */
static void
subsample_leaf(Relation leaf, TupleDesc desc, Tuplestorestate *out, void *arg)
{
	(void) subsample_rows(leaf, desc, out, *(int64 *) arg);
}

/* A partition's mode, size and seen, from bfile_info on its server. */
typedef struct RemoteView
{
	char	   *mode;
	int64		size;
	int64		seen;
} RemoteView;

static void
keep_remote_view(void *arg, TupleDesc desc, Datum *values, bool *nulls)
{
	RemoteView *rv = arg;

	rv->mode = nulls[0] ? NULL : TextDatumGetCString(values[0]);
	rv->size = nulls[1] ? 0 : DatumGetInt64(values[1]);
	rv->seen = nulls[2] ? 0 : DatumGetInt64(values[2]);
}

static void
remote_view(FunctionCallInfo fcinfo, Relation rel, RemoteView *rv)
{
	TupleDesc	desc = CreateTemplateTupleDesc(3);

	TupleDescInitEntry(desc, 1, "mode", TEXTOID, -1, 0);
	TupleDescInitEntry(desc, 2, "size", INT8OID, -1, 0);
	TupleDescInitEntry(desc, 3, "seen", INT8OID, -1, 0);
	memset(rv, 0, sizeof(*rv));
	ss_remote_info(rel, fcinfo, "bfile_info", desc, keep_remote_view, rv);
}

/*
 * 0A000: the samples of partitioned table relid cannot be combined
 * (detail: why, naming the partition).
 */
static void
refuse_parent(Oid relid, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("bfile_subsample cannot combine the samples of partitioned table \"%s\"",
					get_rel_name(relid)),
			 errdetail("%s", detail),
			 errhint("Call bfile_subsample on each partition.")));
}

/* A partition of a mode no sample of the whole table is drawn in. */
static void
refuse_mode(Oid relid, Relation rel, const char *mode)
{
	refuse_parent(relid,
				  psprintf("Partition \"%s\" is a %s bfile: a row's inclusion depends on the level its partition had when the row arrived, which the other partitions' levels do not measure.",
						   RelationGetRelationName(rel), mode));
}

/* A weighted partition on another server. */
static void
refuse_remote_weighted(Oid relid, Relation rel)
{
	refuse_parent(relid,
				  psprintf("Partition \"%s\" is a weighted bfile on another server: a weighted sample of the whole table thins each partition's rows by their weights and the partition's level, read from partitions on this server only.",
						   RelationGetRelationName(rel)));
}

/*
 * Selection sampling of min(n, size) of the size rows of from into out: a
 * uniform choice.
 */
static void
select_rows(Tuplestorestate *from, int64 size, TupleDesc desc,
			Tuplestorestate *out, int64 n)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	int64		need = Min(n, size);
	int64		left = size;

	while (need > 0 && tuplestore_gettupleslot(from, true, false, slot))
		if (select_next(&need, &left))
			tuplestore_puttupleslot(out, slot);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * The rows of from, each kept in to with probability min(1, w·t_to) /
 * min(1, w·t_from), w its weight (column wcol of desc), t_to <= t_from
 * given by their logarithms: a sample that held each row of the stream
 * with probability min(1, w·t_from) then holds it with min(1, w·t_to).
 * Returns the rows kept.
 */
static int64
thin_rows(Tuplestorestate *from, TupleDesc desc, int wcol, double log_from,
		  double log_to, Tuplestorestate *to)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	Oid			wtype = TupleDescAttr(desc, wcol)->atttypid;
	int64		kept = 0;

	while (tuplestore_gettupleslot(from, true, false, slot))
	{
		CHECK_FOR_INTERRUPTS();
		if (log_to < log_from)
		{
			bool		isnull;
			Datum		d = slot_getattr(slot, wcol + 1, &isnull);

			/* the insert refused a NULL, zero or negative weight */
			double		lw = isnull ? 0 : log(bfile_weight_value(wtype, d));
			double		keep = exp(Min(lw + log_to, 0) - Min(lw + log_from, 0));

			if (pg_prng_double(&pg_global_prng_state) >= keep)
				continue;
		}
		tuplestore_puttupleslot(to, slot);
		kept++;
	}
	ExecDropSingleTupleTableSlot(slot);
	return kept;
}

/* ss_leaf_rows' function: a partition's whole sample, its level in *arg */
static void
whole_leaf(Relation leaf, TupleDesc desc, Tuplestorestate *out, void *arg)
{
	*(int32 *) arg = subsample_rows(leaf, desc, out, PG_INT64_MAX);
}

/* The position in desc of the column named name, or -1. */
static int
column_index(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), name) == 0)
			return i;
	return -1;
}

/*
 * bfile_subsample on partitioned table relid whose partitions (rels, on
 * this server) are weighted bfiles.  Partition i's sample holds a row of
 * weight w with probability min(1, w·tᵢ), tᵢ = αᵢ^(Lᵢ−1); thinned to the
 * smallest t* of them (thin_rows), the samples' union holds every row of
 * the stream with probability min(1, w·t*), as one weighted bfile of that
 * inclusion would, and a uniform choice of n of its rows is what
 * subsample_rows takes from one weighted sample.  The partitions are read
 * one after the other: the union so far is thinned again when a later
 * partition's t is smaller.  It is kept in a tuplestore, on disk past
 * work_mem.  Each partition's t is that of the view its rows came from.
 */
static void
weighted_subsample(Oid relid, List *rels, TupleDesc desc,
				   Tuplestorestate *out, int64 n)
{
	Tuplestorestate *all = tuplestore_begin_heap(false, false, work_mem);
	double		log_all = 0;	/* the union's log t*: 0 while empty */
	int64		size = 0;
	const char *wname = NULL;
	int			wcol = -1;
	ListCell   *lc;

	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);
		const BfileParams *p = &bfile_get_state(rel)->params;
		const char *name = NameStr(TupleDescAttr(RelationGetDescr(rel),
												 p->weight_attnum - 1)->attname);
		Tuplestorestate *rows;
		int32		level = 0;
		double		log_t;

		if (wname == NULL)
		{
			wname = name;
			wcol = column_index(desc, name);
			if (wcol < 0)
				elog(ERROR, "weight column \"%s\" not found in the parent", name);
		}
		else if (strcmp(name, wname) != 0)
			refuse_parent(relid,
						  psprintf("Partition \"%s\" weighs its rows by column \"%s\", another partition by \"%s\".",
								   RelationGetRelationName(rel), name, wname));
		rows = tuplestore_begin_heap(false, false, work_mem);
		ss_leaf_rows(rel, desc, rows, whole_leaf, &level);
		if (level > 0)
		{
			log_t = (double) (level - 1) * log(p->alpha);
			if (log_t < log_all)
			{
				Tuplestorestate *thinned = tuplestore_begin_heap(false, false,
																 work_mem);

				size = thin_rows(all, desc, wcol, log_all, log_t, thinned);
				tuplestore_end(all);
				all = thinned;
				log_all = log_t;
			}
			size += thin_rows(rows, desc, wcol, log_t, log_all, all);
		}
		tuplestore_end(rows);
	}
	select_rows(all, size, desc, out, n);
	tuplestore_end(all);
}

/*
 * bfile_subsample on partitioned table relid: a uniform subsample of the
 * whole stream inserted through it.  Such a sample of n rows takes n_i of
 * them from partition i, the counts drawn as a uniform choice of n of the
 * stream's rows would fall (a multivariate hypergeometric split of n by
 * the rows each partition has seen); partition i's sample is a uniform
 * sample of its own rows, so a uniform subsample of n_i of it completes
 * the sample.  That needs n_i rows in partition i's sample, which every
 * split gives when n is at most the sample size of each partition that
 * has left rows out: n is lowered to that (and to the stream's length).
 * Partitions in the weighted mode (all on this server): a weighted
 * subsample (weighted_subsample).  The decayed modes draw rows by an age
 * measured in each partition's own levels: refused.
 */
static void
parent_subsample(FunctionCallInfo fcinfo, Oid relid, int64 n)
{
	List	   *rels = ss_open_all_targets_remote(relid, &bfile_structure,
												  AccessShareLock, NULL,
												  ACL_SELECT,
												  "bfile_subsample()");
	TupleDesc	desc = ss_parent_rows_result(fcinfo, relid, "bfile_subsample");
	Tuplestorestate *out = ((ReturnSetInfo *) fcinfo->resultinfo)->setResult;
	int			k = list_length(rels);
	int64	   *left = palloc0(sizeof(int64) * Max(k, 1));	/* seen, not drawn */
	int64	   *take = palloc0(sizeof(int64) * Max(k, 1));
	int64		total = 0;
	Relation	weighted = NULL;
	ListCell   *lc;

	/* a local weighted partition: every partition must be one */
	foreach(lc, rels)
		if (!ss_is_remote((Relation) lfirst(lc)) &&
			bfile_get_state((Relation) lfirst(lc))->params.mode == BFILE_WEIGHTED)
			weighted = (Relation) lfirst(lc);
	if (weighted != NULL)
	{
		foreach(lc, rels)
		{
			Relation	rel = (Relation) lfirst(lc);
			BfileMode	mode;

			if (ss_is_remote(rel))
				refuse_remote_weighted(relid, rel);
			mode = bfile_get_state(rel)->params.mode;
			if (BFILE_MODE_DECAYED(mode))
				refuse_mode(relid, rel, bfile_mode_name(mode));
			if (mode != BFILE_WEIGHTED)
				refuse_parent(relid,
							  psprintf("Partition \"%s\" is a %s bfile, partition \"%s\" a %s one: a sample of the whole table needs every partition in one mode.",
									   RelationGetRelationName(rel),
									   bfile_mode_name(mode),
									   RelationGetRelationName(weighted),
									   bfile_mode_name(BFILE_WEIGHTED)));
		}
		weighted_subsample(relid, rels, desc, out, n);
		ss_close_all_targets(rels, AccessShareLock);
		return;
	}

	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);
		BfileView	v;

		memset(&v, 0, sizeof(v));
		if (ss_is_remote(rel))
		{
			/* a partition on another server: its bfile_info there */
			RemoteView	rv;

			remote_view(fcinfo, rel, &rv);
			if (rv.mode != NULL &&
				strcmp(rv.mode, bfile_mode_name(BFILE_WEIGHTED)) == 0)
				refuse_remote_weighted(relid, rel);
			if (rv.mode == NULL ||
				strcmp(rv.mode, bfile_mode_name(BFILE_UNIFORM)) != 0)
				refuse_mode(relid, rel, rv.mode ? rv.mode : "unknown");
			v.size = rv.size;
			v.seen = rv.seen;
		}
		else
		{
			BfileMode	mode = bfile_get_state(rel)->params.mode;

			if (mode != BFILE_UNIFORM)
				refuse_mode(relid, rel, bfile_mode_name(mode));
			if (!bfile_view_read(rel, &v, NULL, NULL, 0, 0))
				continue;
		}
		left[foreach_current_index(lc)] = v.seen;
		total += v.seen;
		if (v.size < v.seen)
			n = Min(n, v.size);
	}
	n = Min(n, total);
	for (int64 j = 0; j < n; j++)
	{
		/* the stream's rows not drawn yet, each as likely */
		int64		r = (int64) pg_prng_uint64_range(&pg_global_prng_state, 0,
													 (uint64) (total - 1));
		int			i = 0;

		CHECK_FOR_INTERRUPTS();
		while (r >= left[i])
			r -= left[i++];
		take[i]++;
		left[i]--;
		total--;
	}
	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);
		int64	   *take_here = &take[foreach_current_index(lc)];

		if (*take_here == 0)
			continue;
		if (ss_is_remote(rel))
		{
			/* bfile_subsample(NULL::table, n_i) on the server */
			NullableDatum args[2] = {{0, true}, {Int64GetDatum(*take_here), false}};

			ss_remote_rows(rel, fcinfo, args, desc, out);
		}
		else
			ss_leaf_rows(rel, desc, out, subsample_leaf, take_here);
	}
	ss_close_all_targets(rels, AccessShareLock);
}

/*
 * bfile_subsample(NULL::table, n bigint) returns SETOF table
 *
 * A random subsample of exactly min(n, size) rows of the sample
 * (subsample_rows); of a partitioned table, of the whole stream
 * (parent_subsample).  The first argument only names the table by its row
 * type.  Not STRICT: that argument is NULL.
 */
Datum
bfile_subsample(PG_FUNCTION_ARGS)
{
	Oid			relid = ss_sql_rowtype_relid(fcinfo, "bfile_subsample", "bfile");
	Relation	rel;
	TupleDesc	desc;
	int64		n;

	if (PG_ARGISNULL(1))
		ss_null_argument("the subsample size of bfile_subsample must not be NULL");
	n = PG_GETARG_INT64(1);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile_subsample size " INT64_FORMAT " is negative", n)));
	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
	{
		parent_subsample(fcinfo, relid, n);
		return (Datum) 0;
	}
	rel = ss_sql_open_keyed(relid, "bfile_subsample()", &bfile_structure);
	desc = ss_sql_rows_result(fcinfo, rel, "bfile_subsample");
	(void) subsample_rows(rel, desc, ((ReturnSetInfo *) fcinfo->resultinfo)->setResult, n);
	relation_close(rel, AccessShareLock);
	return (Datum) 0;
}

/* ---- bfile_window ---- */

typedef struct Window
{
	Relation	rel;
	int64		lo;
	int64		hi;
	int32		min_level;		/* the view's L: tail items below it left */
	TupleDesc	desc;
	Tuplestorestate *out;
	Datum	   *values;
	bool	   *nulls;
	char	   *area;
	int64		pages_read;
} Window;

/* Emit the visible items of the page in w->area with a key in [lo, hi]. */
static void
window_page(Window *w, BlockNumber blk, uint32 visible)
{
	Size		off = MAXALIGN(sizeof(BfilePageHeader));

	bfile_check_page(w->rel, blk, w->area, visible);
	for (uint32 i = 0; i < visible; i++)
	{
		BfileItemHeader ih;
		HeapTupleData htup;

		memcpy(&ih, w->area + off, sizeof(ih));
		if (ih.key >= w->lo && ih.key <= w->hi && ih.level >= w->min_level)
		{
			bfile_item_tuple(w->rel, w->area + off, &htup);
			heap_deform_tuple(&htup, w->desc, w->values, w->nulls);
			tuplestore_putvalues(w->out, w->desc, w->values, w->nulls);
		}
		off += ih.len;
	}
}

/* Read page blk of bucket b into w->area; its header. */
static BfilePageHeader
window_read(Window *w, const BfileBucket *b, BlockNumber blk, uint64 stamp)
{
	BfilePageHeader ph;

	CHECK_FOR_INTERRUPTS();
	bfile_read_page(w->rel, blk, stamp, w->area);
	memcpy(&ph, w->area, sizeof(ph));
	if (ph.level != b->level || ph.skip_level < 1 ||
		ph.skip_level > BFILE_SKIP_LEVELS)
		ss_page_corrupted(w->rel, blk, "A page of the sample belongs to another bucket.");
	if (++w->pages_read > (int64) b->pages + 1)
		ss_page_corrupted(w->rel, blk, "A bucket of the sample is longer than it counts.");
	return ph;
}

/*
 * One bucket's rows with a key in [lo, hi] (§5.2, Algorithm 4).  Keys
 * grow along the chain's order of appends, so from the newest page the
 * skip pointers jump over pages whose smallest key is above hi (each
 * pointer carries its target's), then the chain is read back until a page
 * starts below lo.  A bucket whose keys came out of order (a time column
 * not in arrival order) is read whole, page by page.
 */
static void
window_bucket(Window *w, const BfileBucket *b)
{
	BfilePageHeader ph;
	BlockNumber blk;
	uint64		stamp;

	if (b->head == InvalidBlockNumber)
		return;
	w->pages_read = 0;
	ph = window_read(w, b, b->head, b->head_stamp);
	window_page(w, b->head, b->head_items);
	if (!b->unordered)
	{
		for (;;)
		{
			int			i;

			for (i = BFILE_SKIP_LEVELS - 2; i >= 0; i--)
				if (ph.skip[i].blk != InvalidBlockNumber && ph.skip[i].min_key > w->hi)
					break;
			if (i < 0)
				break;
			blk = ph.skip[i].blk;
			ph = window_read(w, b, blk, ph.skip[i].stamp);
			if (ph.min_key <= w->hi)
				ss_page_corrupted(w->rel, blk, "A skip pointer's key does not match its page.");
		}
	}
	for (blk = ph.prev, stamp = ph.prev_stamp; blk != InvalidBlockNumber;
		 blk = ph.prev, stamp = ph.prev_stamp)
	{
		ph = window_read(w, b, blk, stamp);
		if (ph.max_key >= w->lo && ph.min_key <= w->hi)
			window_page(w, blk, ph.nitems);
		if (!b->unordered && ph.min_key < w->lo)
			break;				/* every older page is below lo */
	}
}

/* A time argument as a key of the table's time column (or stream index). */
static int64
window_key(FunctionCallInfo fcinfo, int argno, Relation rel, int32 time_attnum)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Oid			typid = INT8OID;
	int32		typmod = -1;
	const char *colname = "(arrival order)";

	if (PG_ARGISNULL(argno))
		ss_null_argument("the window bounds of bfile_window must not be NULL");
	if (time_attnum > 0)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), time_attnum - 1);

		typid = att->atttypid;
		typmod = att->atttypmod;
		colname = NameStr(att->attname);
	}
	return bfile_time_key(typid,
						  ss_coerce_argument(PG_GETARG_DATUM(argno), argtype, typid,
											 typmod, "bound", argno, colname,
											 "bfile_window"));
}

/*
 * The sample's rows with a time key in [lo, hi], put in out (desc: the
 * table's row type): the change log's rows in the window first (the
 * view), then each bucket's through its skip list.  bfile_window and the
 * planner's window path (bfile_path.c) read them so.
 */
void
bfile_window_rows(Relation rel, int64 lo, int64 hi, TupleDesc desc,
				  Tuplestorestate *out)
{
	BfileView	v;
	BfileMeta  *m;
	Window		w;

	memset(&w, 0, sizeof(w));
	w.rel = rel;
	w.desc = desc;
	w.out = out;
	w.lo = lo;
	w.hi = hi;
	memset(&v, 0, sizeof(v));
	if (w.lo > w.hi ||
		!bfile_view_read(rel, &v, w.out, w.desc, w.lo, w.hi))
		return;
	m = v.meta;
	w.min_level = v.level;
	w.values = palloc(sizeof(Datum) * w.desc->natts);
	w.nulls = palloc(sizeof(bool) * w.desc->natts);
	w.area = palloc(SS_PAGE_DATA_SIZE);
	for (uint32 i = 0; i < m->nbuckets_live; i++)
		if (bfile_view_bucket_visible(&v, &m->buckets[i]))
			window_bucket(&w, &m->buckets[i]);
	if (bfile_view_bucket_visible(&v, &m->tail))
		window_bucket(&w, &m->tail);
}

/* ss_leaf_rows' function: a partition's window (arg: bfile_window's call) */
static void
window_leaf(Relation leaf, TupleDesc desc, Tuplestorestate *out, void *arg)
{
	FunctionCallInfo fcinfo = (FunctionCallInfo) arg;
	int32		time_attnum = bfile_get_state(leaf)->params.time_attnum;
	int64		lo = window_key(fcinfo, 1, leaf, time_attnum);
	int64		hi = window_key(fcinfo, 2, leaf, time_attnum);

	bfile_window_rows(leaf, lo, hi, desc, out);
}

/*
 * bfile_window(NULL::table, t1 "any", t2 "any") returns SETOF table
 *
 * The sample's rows whose time (the time column, or the position in the
 * stream without one) is in [t1, t2]: what filtering the whole sample
 * gives, read through each bucket's skip list (§5.2).  On a partitioned
 * table, every leaf partition's window, one after the other: a partition
 * whose rows are all outside the window costs a read of its newest pages.
 * Not STRICT: the first argument is NULL (it names the table by its row
 * type).
 */
Datum
bfile_window(PG_FUNCTION_ARGS)
{
	Oid			relid = ss_sql_rowtype_relid(fcinfo, "bfile_window", "bfile");
	List	   *rels = ss_open_all_targets_remote(relid, &bfile_structure,
												  AccessShareLock, NULL,
												  ACL_SELECT, "bfile_window()");
	TupleDesc	desc;
	ListCell   *lc;

	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		desc = ss_parent_rows_result(fcinfo, relid, "bfile_window");
	else
		desc = ss_sql_rows_result(fcinfo, linitial(rels), "bfile_window");
	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);
		Tuplestorestate *out = ((ReturnSetInfo *) fcinfo->resultinfo)->setResult;

		if (ss_is_remote(rel))
			ss_remote_rows(rel, fcinfo, NULL, desc, out);	/* its window there */
		else
			ss_leaf_rows(rel, desc, out, window_leaf, fcinfo);
	}
	ss_close_all_targets(rels, AccessShareLock);
	return (Datum) 0;
}
