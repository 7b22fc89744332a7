/*-------------------------------------------------------------------------
 *
 * lert_query.c
 *	  Reading a LERT: SELECT * (the reports, in report order),
 *	  lert_reports, lert_count, lert_reported, lert_info, and the writers
 *	  lert_flush and lert_create.
 *
 * Every reader of reports first consolidates the change log (waiting for
 * the cones another session, often the background worker, is running),
 * so committed observations are counted and their reports made before it
 * reads: what a query sees is what was committed when it read the
 * metapage ("read committed" per call, not the query's snapshot; a
 * standby shows what the primary's rounds made).  lert_count adds the
 * committed records still in the log and the caller's own uncommitted
 * inserts.
 *
 * The functions open their table with ss_sql_open_structure, or the
 * partitions of a partitioned parent (ss_parent.h); those that return keys
 * or facts about them are refused where row-level security applies
 * (ss_sql_check_row_security), lert_info, whose counters say nothing about
 * any key, is not.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "lert.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_hash.h"
#include "ss_parent.h"
#include "ss_pending.h"
#include "ss_queryutil.h"
#include "ss_remote.h"
#include "ss_sqlfunc.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(lert_count);
PG_FUNCTION_INFO_V1(lert_reported);
PG_FUNCTION_INFO_V1(lert_reports);
PG_FUNCTION_INFO_V1(lert_flush);
PG_FUNCTION_INFO_V1(lert_info);
PG_FUNCTION_INFO_V1(lert_create);

/*
 * Consolidate what is committed, when this backend can (not on a standby,
 * not in a parallel worker), then read the metapage.  False if the
 * structure has none yet (nothing was ever inserted).
 */
bool
lert_read_current(Relation rel, LertMeta *meta)
{
	SSLogSnapshot snap;

	ss_log_read_begin(rel, &snap, 0, false);
	return lert_read_meta(rel, meta);
}

/* ---- SELECT * FROM a lert table: its reports ---- */

typedef struct LertScanDesc
{
	SSScanDesc	ss;
	LertState  *st;
	bool		has_meta;
	LertMeta   *meta;
	LertReportIter it;
} LertScanDesc;

/* A count in the table's count column type, or an error if it overflows. */
Datum
lert_count_datum(Oid inttype, int64 count)
{
	if ((inttype == INT2OID && count > PG_INT16_MAX) ||
		(inttype == INT4OID && count > PG_INT32_MAX))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("count " INT64_FORMAT " is out of range for type %s",
						count, format_type_be(inttype)),
				 errhint("Use lert_reports(), whose count is bigint.")));
	if (inttype == INT2OID)
		return Int16GetDatum((int16) count);
	if (inttype == INT4OID)
		return Int32GetDatum((int32) count);
	return Int64GetDatum(count);
}

static void
lert_scan_start(SSScanDesc *sscan)
{
	LertScanDesc *scan = (LertScanDesc *) sscan;
	Relation	rel = sscan->base.rs_rd;

	scan->st = lert_get_state(rel);
	scan->meta = palloc(sizeof(LertMeta));
	scan->has_meta = lert_read_current(rel, scan->meta);
	if (scan->has_meta)
		lert_report_iter_begin(&scan->it, rel, scan->meta, 0);
	else
		sscan->done = true;
}

static bool
lert_scan_next(SSScanDesc *sscan, TupleTableSlot *slot)
{
	LertScanDesc *scan = (LertScanDesc *) sscan;
	const LertReportRec *r;
	const char *key;
	int64		id;

	r = lert_report_iter_next(&scan->it, &id, &key);
	if (r == NULL)
		return false;
	slot->tts_values[0] = lert_key_datum(scan->st, r->fp, key, r->keylen);
	slot->tts_isnull[0] = false;
	if (OidIsValid(scan->st->inttype))
	{
		slot->tts_values[1] = lert_count_datum(scan->st->inttype, r->count);
		slot->tts_isnull[1] = false;
	}
	ExecStoreVirtualTuple(slot);
	return true;
}

const SSScanOps lert_scan_ops = {
	.scan_size = sizeof(LertScanDesc),
	.start = lert_scan_start,
	.next = lert_scan_next,
	/* the report iterator holds nothing but memory of the scan's context */
};

/* ---- lert_reports(regclass, after bigint) ---- */

/*
 * One structure's reports, read in report order: a local one's from its
 * report pages, a foreign partition's from lert_reports on its server
 * (rows, read into a tuplestore first).
 */
typedef struct ReportSource
{
	Relation	rel;
	LertState  *st;
	Oid			outfunc;
	LertMeta   *meta;
	LertReportIter it;
	const LertReportRec *r;		/* the next report, or NULL: done */
	const char *key;
	int64		id;
	Tuplestorestate *rows;		/* a foreign partition's, or NULL */
	TupleTableSlot *slot;		/* its next row */
	bool		more;			/* the slot holds one */
} ReportSource;

/* lert_reports' reported_at column */
#define REPORT_AT_COLUMN 6

static void
report_source_next(ReportSource *src)
{
	if (src->rows != NULL)
		src->more = tuplestore_gettupleslot(src->rows, true, false, src->slot);
	else
		src->r = lert_report_iter_next(&src->it, &src->id, &src->key);
}

static bool
report_source_done(ReportSource *src)
{
	return src->rows != NULL ? !src->more : src->r == NULL;
}

static TimestampTz
report_source_at(ReportSource *src)
{
	bool		isnull;

	if (src->rows != NULL)
		return DatumGetTimestampTz(slot_getattr(src->slot, REPORT_AT_COLUMN,
												&isnull));
	return src->r->at;
}

static void
put_report(ReturnSetInfo *rsinfo, ReportSource *src)
{
	const LertReportRec *r = src->r;
	Datum		values[7];
	bool		nulls[7] = {0};
	Datum		k;

	if (src->rows != NULL)
	{
		tuplestore_puttupleslot(rsinfo->setResult, src->slot);
		return;
	}
	k = lert_key_datum(src->st, r->fp, src->key, r->keylen);

	values[0] = Int64GetDatum(src->id);
	values[1] = CStringGetTextDatum(OidOutputFunctionCall(src->outfunc, k));
	values[2] = Int64GetDatum(r->count);
	values[3] = Int64GetDatum(r->first_pos);
	values[4] = Int64GetDatum(r->reported_pos);
	values[5] = TimestampTzGetDatum(r->at);
	values[6] = Int32GetDatum((int32) lert_cone_of(&src->meta->params, r->fp));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * lert_reports(table, after) returns the reports with an id above after,
 * in report order.  On a partitioned table, every leaf partition's: ids are
 * each partition's own (after applies to each), and the partitions'
 * reports are merged by reported_at (ties in partition order), each
 * partition's staying in its own order: one page of reports per partition
 * is held at a time.
 */
Datum
lert_reports(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		after = PG_GETARG_INT64(1);
	List	   *rels = ss_open_all_targets_remote(PG_GETARG_OID(0),
												  &lert_structure,
												  AccessShareLock, NULL,
												  ACL_SELECT, "lert_reports()");
	int			n = list_length(rels);
	ReportSource *srcs = palloc0(sizeof(ReportSource) * Max(n, 1));
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, rels)
	{
		ReportSource *src = &srcs[foreach_current_index(lc)];
		bool		isvarlena;

		src->rel = (Relation) lfirst(lc);
		if (ss_is_remote(src->rel))
		{
			src->rows = tuplestore_begin_heap(false, false, work_mem);
			ss_remote_rows(src->rel, fcinfo, NULL, rsinfo->setDesc, src->rows);
			src->slot = MakeSingleTupleTableSlot(rsinfo->setDesc,
												 &TTSOpsMinimalTuple);
			report_source_next(src);
			continue;
		}
		src->st = lert_get_state(src->rel);
		src->meta = palloc(sizeof(LertMeta));
		getTypeOutputInfo(src->st->keytype, &src->outfunc, &isvarlena);
		if (!lert_read_current(src->rel, src->meta))
			continue;
		lert_report_iter_begin(&src->it, src->rel, src->meta, after);
		report_source_next(src);
		if (src->r == NULL)
			lert_report_iter_end(&src->it);
	}
	for (;;)
	{
		ReportSource *next = NULL;

		for (int i = 0; i < n; i++)
			if (!report_source_done(&srcs[i]) &&
				(next == NULL ||
				 report_source_at(&srcs[i]) < report_source_at(next)))
				next = &srcs[i];
		if (next == NULL)
			break;
		put_report(rsinfo, next);
		report_source_next(next);
		if (next->rows == NULL && next->r == NULL)
			lert_report_iter_end(&next->it);
	}
	ss_close_all_targets(rels, AccessShareLock);
	return (Datum) 0;
}

/* ---- point queries ---- */

/*
 * Copy the item out of an observation record (its key's bytes follow it);
 * false for any other record.
 */
bool
lert_record_item(const SSPendingHeader *hdr, const char *payload,
				 LertItem *item)
{
	if (hdr->type != SS_PENDING_ITEM || hdr->len < sizeof(*item))
		return false;
	memcpy(item, payload, sizeof(*item));
	return true;
}

typedef struct KeyLookup
{
	uint64		fp;
	const char *key;
	uint32		keylen;
	uint64		applied;		/* log records before it are in level 0 */
	int64		count;
} KeyLookup;

static void
count_log_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
				 void *arg)
{
	KeyLookup  *k = (KeyLookup *) arg;
	LertItem	item;

	if (pos < k->applied || !lert_record_item(hdr, payload, &item))
		return;
	if (item.fp == k->fp && item.keylen == k->keylen &&
		hdr->len - sizeof(item) == item.keylen &&
		(item.keylen == 0 || memcmp(payload + sizeof(item), k->key, item.keylen) == 0))
		k->count += item.count;
}

/*
 * The key's count (committed, and the caller's own pending inserts) and
 * whether it was reported.  Levels are read without locks: a page that a
 * concurrent flush freed and reused, or a flush between the first and the
 * last read, sends the reader back to the metapage.
 */
void
lert_lookup(Relation rel, const LertState *st, Datum keyd, int64 *count,
			bool *reported)
{
	char	   *bytes;
	uint32		len;
	bool		free_bytes;
	KeyLookup	k;
	LertMeta   *meta = palloc(sizeof(LertMeta));
	LertMeta   *again = palloc(sizeof(LertMeta));
	char	   *area = palloc(SS_PAGE_DATA_SIZE);

	memset(&k, 0, sizeof(k));
	k.fp = lert_key_fingerprint(st, keyd, &bytes, &len, &free_bytes);
	k.key = bytes;
	k.keylen = len;
	*count = 0;
	*reported = false;

	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;
		uint32		cone;
		const LertCone *cn;
		LertDiskCount d = LERT_DISK_COUNT_INIT;
		bool		l0_has_kept;

		CHECK_FOR_INTERRUPTS();
		ss_log_read_begin(rel, &snap, attempt, false);
		if (!lert_read_meta(rel, meta))
			break;
		cone = lert_cone_of(&meta->params, k.fp);
		cn = &meta->cones[cone];
		k.count = 0;
		if (!lert_cone_lookup(rel, meta, k.fp, k.key, k.keylen, area, &d,
							  &l0_has_kept, &k.applied))
			continue;
		if (!ss_log_scan(rel, &snap, count_log_record, &k))
			continue;
		/* a flush of the cone since the metapage was read: read again */
		if (!lert_read_meta(rel, again) ||
			again->cones[cone].flushes != cn->flushes ||
			again->cones[cone].level0_gen != cn->level0_gen)
			continue;
		/* level 0's entry may have taken the kept count over */
		*count = d.count + k.count + (l0_has_kept ? 0 : d.kept);
		*reported = d.reported;
		break;
	}

	/* the caller's own inserts, not committed yet */
	{
		SSPendingIter it;
		SSPendingHeader hdr;
		char	   *payload;

		k.applied = 0;
		k.count = 0;
		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		while (ss_pending_iter_next(&it, &hdr, &payload))
			count_log_record(0, &hdr, payload, &k);
		ss_pending_iter_end(&it);
		*count += k.count;
	}
	if (free_bytes)
		pfree(bytes);
	pfree(area);
	pfree(meta);
	pfree(again);
}

/*
 * Before reading reported flags: wait for a round in progress and
 * consolidate what is committed (see lert_lookup_arg), where this backend
 * can.
 */
void
lert_wait_round(Relation rel)
{
	if (!RecoveryInProgress() && !IsInParallelMode())
		(void) ss_log_consolidate(rel, true);
}

/*
 * lert_count(table, key) and lert_reported(table, key) (fname): the key
 * argument, coerced to the table's key type, looked up.
 *
 * The reported flag lives with the key's entries, and a round writes the
 * level-0 pages back after it made its reports valid: lert_reported waits
 * for a round in progress (and consolidates what is committed), so that a
 * key whose report lert_reports already shows is seen reported.  A standby
 * cannot wait for the primary's rounds: there a report can show in
 * lert_reports while the round that made it is still being replayed.
 */
static void
lert_lookup_arg(FunctionCallInfo fcinfo, const char *fname, bool wait_round,
				int64 *count, bool *reported)
{
	Datum		key;
	List	   *rels = ss_open_targets_remote(fcinfo, 1, &lert_structure, fname,
											  &key);
	ListCell   *lc;

	/* on a partitioned table: the partitions' counts add up, reports OR */
	*count = 0;
	*reported = false;
	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);
		int64		c;
		bool		r;

		if (ss_is_remote(rel))
		{
			/* the same function there: lert_reported or lert_count */
			Datum		d = ss_remote_scalar(rel, fcinfo, &r);

			if (wait_round)
				*reported = *reported || DatumGetBool(d);
			else
				*count += DatumGetInt64(d);
			continue;
		}
		if (wait_round)
			lert_wait_round(rel);
		lert_lookup(rel, lert_get_state(rel), key, &c, &r);
		*count += c;
		*reported = *reported || r;
	}
	ss_close_targets(rels);
}

Datum
lert_count(PG_FUNCTION_ARGS)
{
	int64		count;
	bool		reported;

	lert_lookup_arg(fcinfo, "lert_count()", false, &count, &reported);
	PG_RETURN_INT64(count);
}

Datum
lert_reported(PG_FUNCTION_ARGS)
{
	int64		count;
	bool		reported;

	lert_lookup_arg(fcinfo, "lert_reported()", true, &count, &reported);
	PG_RETURN_BOOL(reported);
}

/* ---- lert_flush ---- */

Datum
lert_flush(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(ss_sql_flush(fcinfo, "lert_flush()",
								 &lert_structure, lert_flush_all, false));
}

/* ---- lert_info ---- */

static void
count_log_observations(uint64 pos, const SSPendingHeader *hdr,
					   const char *payload, void *arg)
{
	LertItem	item;

	if (lert_record_item(hdr, payload, &item))
		*(int64 *) arg += item.count;
}

static Datum
int8_array(const int64 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

static void
lert_info_fill(Relation rel, Datum *values, bool *nulls)
{
	LertParams *p = &lert_get_state(rel)->p;
	LertMeta   *meta = palloc0(sizeof(LertMeta));
	int64		logged = 0;
	int64		level0 = 0;
	int64		level0_pages = 0;
	int64		level_pages[LERT_MAX_LEVELS];
	int64		max_level0 = 0;
	int64		flushes = 0;
	int64		levels[LERT_MAX_LEVELS];
	int64		kept[LERT_MAX_LEVELS];
	double		tsb;
	int64		csb;

	/* a table never written has no metapage yet: all counters are zero */
	if (!ss_log_scan_all(rel, count_log_observations, &logged, sizeof(logged), meta))
		memset(meta, 0, sizeof(LertMeta));
	memset(levels, 0, sizeof(levels));
	memset(kept, 0, sizeof(kept));
	memset(level_pages, 0, sizeof(level_pages));
	for (uint32 c = 0; c < p->ncones; c++)
	{
		const LertCone *cn = &meta->cones[c];

		level0 += cn->level0_entries;
		level0_pages += cn->level0.npages;
		max_level0 = Max(max_level0, cn->max_level0);
		flushes += (int64) cn->flushes;
		for (uint32 j = 1; j <= p->geom.nlevels; j++)
		{
			levels[j - 1] += cn->runs[j].nentries;
			kept[j - 1] += cn->runs[j].nkept;
			level_pages[j - 1] += (int64) cn->runs[j].ndata + cn->runs[j].index.npages;
		}
	}
	csb = lert_count_stretch_bound(&p->geom);
	tsb = lert_time_stretch_bound(&p->geom);

	values[0] = CStringGetTextDatum(lert_variant_name(p->geom.variant));
	values[1] = Int64GetDatum(p->geom.threshold);
	values[2] = Int32GetDatum((int32) p->geom.age_bits);
	values[3] = Int32GetDatum((int32) p->geom.growth);
	values[4] = Int32GetDatum((int32) p->geom.nlevels);
	values[5] = int8_array(&p->geom.tau[1], (int) p->geom.nlevels);
	values[6] = Int32GetDatum((int32) p->ncones);
	values[7] = Int64GetDatum(p->geom.level0_capacity);
	values[8] = Int64GetDatum(csb);
	nulls[8] = csb == PG_INT64_MAX;
	values[9] = Float8GetDatum(tsb);
	nulls[9] = tsb == 0.0;
	values[10] = Int64GetDatum(meta->stream_pos + logged);
	values[11] = Int64GetDatum(logged);
	values[12] = Int64GetDatum(meta->nreports);
	values[13] = Int64GetDatum(flushes);
	values[14] = Int64GetDatum(level0);
	values[15] = Int64GetDatum(max_level0);
	values[16] = int8_array(levels, (int) p->geom.nlevels);
	values[17] = int8_array(kept, (int) p->geom.nlevels);
	values[18] = Int64GetDatum((int64) RelationGetNumberOfBlocks(rel));
	{
		int64		free_pages = 0;

		for (uint32 i = 0; i < meta->nfree; i++)
			free_pages += meta->free_ext[i].npages;
		free_pages += lert_pool_spill_pages(rel, meta);
		values[19] = Int64GetDatum(free_pages);
	}
	values[20] = CStringGetTextDatum(p->channel);
	nulls[20] = p->channel[0] == '\0';
	values[21] = Int64GetDatum((int64) p->seed);
	values[22] = Int64GetDatum(level0_pages);
	values[23] = int8_array(level_pages, (int) p->geom.nlevels);
	pfree(meta);
}

/*
 * On a partitioned table, the partitions' rows merged: the parameters they
 * share (NULL where they differ), the counters and sizes summed (the
 * per-level arrays element by element), the stretch bounds and
 * max_level0_entries the largest partition's.
 */
Datum
lert_info(PG_FUNCTION_ARGS)
{
	return ss_sql_info(fcinfo, &lert_structure, "lert_info",
					   "========>>+++++>++++==++", lert_info_fill);
}

/* ---- lert_create ---- */

/*
 * lert_create(name, key_type, threshold, variant, age_bits, growth,
 *			   buffer_size, cones, notify, unlogged) returns regclass
 *
 * NULL arguments take the settings' defaults.
 */
Datum
lert_create(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(ss_sql_create_keyed(fcinfo, &lert_structure, 9));
}
