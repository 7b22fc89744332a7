/*-------------------------------------------------------------------------
 *
 * bcms_query.c
 *	  SQL functions of the bcms access method: bcms_estimate, bcms_flush,
 *	  bcms_info, bcms_merge and the constructor bcms_create.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/relation.h"
#include "bcms.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "cms.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_parent.h"
#include "ss_pending.h"
#include "ss_queryutil.h"
#include "ss_remote.h"
#include "ss_sqlfunc.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(bcms_estimate);
PG_FUNCTION_INFO_V1(bcms_flush);
PG_FUNCTION_INFO_V1(bcms_info);
PG_FUNCTION_INFO_V1(bcms_merge);
PG_FUNCTION_INFO_V1(bcms_create);

/* What a reader adds from the change log (bcms_log_record). */
typedef struct EstimateLog
{
	Relation	rel;
	const BcmsParams *p;
	SSHash		h;
	/* buffered: the key's sketch page, its counters, its applied_pos */
	uint32		pg;
	int64	   *counters;
	uint64		applied;
	/* plain: each row's counter index, value and page's applied_pos */
	uint64		row_idx[CMS_MAX_DEPTH];
	int64		row_count[CMS_MAX_DEPTH];
	uint64		row_applied[CMS_MAX_DEPTH];
	uint32		log_row;		/* plain: the row the log is read for */
} EstimateLog;

/* A committed record still in the log, counted unless its page has it. */
static void
bcms_log_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
				void *arg)
{
	EstimateLog *el = arg;
	const BcmsParams *p = el->p;
	SSPendingKey key;

	if (hdr->type == SS_PENDING_MERGE)
	{
		bcms_check_merge_record(el->rel, p, hdr, payload);
		if (p->mode != BCMS_MODE_PLAIN && pos >= el->applied)
		{
			const CmsData *cms = (const CmsData *) payload;
			uint32		per_page = cms_page_counters(&p->geom);
			const int64 *src = cms->counters + (Size) el->pg * per_page;

			for (uint32 i = 0; i < per_page; i++)
			{
				if (src[i] < 0)
					ss_page_corrupted(el->rel, InvalidBlockNumber,
									  "A merged count-min sketch has a negative counter.");
				el->counters[i] = cms_saturating_add(el->counters[i], src[i]);
			}
		}
		return;
	}
	if (hdr->type != SS_PENDING_KEY || !ss_record_key(hdr, payload, &key))
		return;
	if (p->mode != BCMS_MODE_PLAIN)
	{
		if (pos >= el->applied && cms_page_of(&p->geom, key.hash) == el->pg)
			cms_page_add(el->counters, &p->geom, key.hash, key.weight,
						 p->conservative);
		return;
	}
	if (pos >= el->row_applied[el->log_row] &&
		bcms_plain_index(p, key.hash, el->log_row) == el->row_idx[el->log_row])
		el->row_count[el->log_row] = cms_saturating_add(el->row_count[el->log_row],
														key.weight);
}

/* plain mode: read a row's counter and its page's applied_pos */
static void
bcms_read_plain_row(Relation rel, const BcmsParams *p, EstimateLog *el,
					uint32 row)
{
	uint64		idx = bcms_plain_index(p, el->h, row);
	BlockNumber blk = (BlockNumber) (1 + idx / PLAIN_COUNTERS_PER_PAGE);
	Buffer		buf;

	el->row_idx[row] = idx;
	el->row_count[row] = 0;
	el->row_applied[row] = 0;
	buf = ss_read_checked_page(rel, blk, SS_PAGE_BCMS_SKETCH);
	if (BufferIsValid(buf))
	{
		Page		page = BufferGetPage(buf);

		el->row_count[row] = ((int64 *) SSPageGetData(page))[idx % PLAIN_COUNTERS_PER_PAGE];
		/* counters only grow from 0 */
		if (el->row_count[row] < 0)
			ss_page_corrupted(rel, blk, "A counter of the sketch page is negative.");
		el->row_applied[row] = SSPageGetOpaque(page)->applied_pos;
		UnlockReleaseBuffer(buf);
	}
}

/*
 * A lookup needs the log records that share a counter with its key, and
 * only those when updates add (plain mode, buffered without conservative
 * update): the log index (ss_log_scan_parts) is then keyed by counter, a
 * sketch-wide counter number folded to 32 bits.  Conservative updates
 * depend on every counter of the page, so that mode keys it by page.
 */
static inline uint32
bcms_counter_bucket(uint64 counter)
{
	return (uint32) (counter ^ (counter >> 32));
}

/* The counter buckets of a key: one per row (fewer if two rows share one). */
static int
bcms_key_counter_parts(const BcmsParams *p, SSHash h, uint32 *parts)
{
	uint32		page = p->mode == BCMS_MODE_PLAIN ? 0 : cms_page_of(&p->geom, h);
	int			n = 0;

	for (uint32 row = 0; row < p->depth; row++)
		ss_parts_add(parts, &n, bcms_counter_bucket(p->mode == BCMS_MODE_PLAIN ?
													bcms_plain_index(p, h, row) :
													(uint64) page * CMS_COUNTERS_PER_PAGE +
													cms_cell(&p->geom, h, row)));
	return n;
}

static int
bcms_log_counter_parts(const SSPendingHeader *hdr, const char *payload,
					   uint32 *parts, void *arg)
{
	SSPendingKey key;

	if (hdr->type == SS_PENDING_MERGE)
		return -1;				/* every counter */
	if (hdr->type != SS_PENDING_KEY || !ss_record_key(hdr, payload, &key))
		return 0;
	return bcms_key_counter_parts((const BcmsParams *) arg, key.hash, parts);
}

/*
 * plain mode: the estimate is the least row count, each row's counter plus
 * the committed log records of its page (ss_log_scan_parts) that the page
 * has not applied.  A row that counts zero ends it, so an absent key costs
 * about one page, not depth.  False if the log moved.
 */
static bool
bcms_plain_estimate(Relation rel, const SSLogSnapshot *snap, EstimateLog *el,
					int64 *est)
{
	const BcmsParams *p = el->p;

	*est = PG_INT64_MAX;
	for (uint32 row = 0; row < p->depth && *est > 0; row++)
	{
		uint32		part;

		bcms_read_plain_row(rel, p, el, row);
		part = bcms_counter_bucket(el->row_idx[row]);
		el->log_row = row;
		if (!ss_log_scan_parts(rel, snap, 0, bcms_log_counter_parts,
							   (void *) p, &part, 1, bcms_log_record, el))
			return false;
		*est = Min(*est, el->row_count[row]);
	}
	return true;
}

/*
 * buffered mode: the key's sketch page counters with its sub-buffer
 * applied, and the partition's applied_pos.  Both pages are pinned first,
 * then share-locked together (buffer page first) so that an entry is seen
 * exactly once even while it moves from sub-buffer to page, and no I/O
 * happens under a content lock.
 */
static void
bcms_read_buffered(Relation rel, const BcmsParams *p, EstimateLog *el)
{
	BlockNumber sblk = bcms_sketch_blkno(p, el->pg);
	BcmsBufEntry sub[(SS_PAGE_DATA_SIZE) / sizeof(BcmsBufEntry)];
	uint32		nsub = 0;
	Buffer		bbuf = InvalidBuffer;
	Buffer		sbuf = InvalidBuffer;
	Size		size = cms_page_counters(&p->geom) * sizeof(int64);

	memset(el->counters, 0, size);
	el->applied = 0;
	if (p->subbuf_cap > 0)
		bbuf = ss_read_buffer_if_exists(rel, bcms_buffer_blkno(p, el->pg));
	sbuf = ss_read_buffer_if_exists(rel, sblk);
	if (BufferIsValid(bbuf))
	{
		BlockNumber bblk = bcms_buffer_blkno(p, el->pg);
		Page		page = ss_lock_checked_page(rel, bbuf, bblk,
												SS_PAGE_BCMS_BUFFER);

		if (page != NULL)
		{
			uint32		slot = el->pg % p->subbufs_per_page;

			nsub = bcms_buf_counts(page)[slot];
			if (nsub > p->subbuf_cap)
				ss_page_corrupted(rel, bblk,
								  "The sub-buffer of sketch page %u claims %u entries; its capacity is %u.",
								  el->pg, nsub, p->subbuf_cap);
			memcpy(sub, bcms_buf_entries(page, p, el->pg), nsub * sizeof(BcmsBufEntry));
			el->applied = bcms_buf_applied(page, p)[slot];
		}
	}
	if (BufferIsValid(sbuf))
	{
		Page		page = ss_lock_checked_page(rel, sbuf, sblk,
												SS_PAGE_BCMS_SKETCH);

		if (page != NULL)
		{
			memcpy(el->counters, SSPageGetData(page), size);
			/* counters only grow from 0: the key's cells must not be negative */
			if (cms_page_estimate(el->counters, &p->geom, el->h) < 0)
				ss_page_corrupted(rel, sblk,
								  "A counter of the sketch page is negative.");
			if (p->subbuf_cap == 0)
				el->applied = SSPageGetOpaque(page)->applied_pos;
		}
		UnlockReleaseBuffer(sbuf);
	}
	if (BufferIsValid(bbuf))
		UnlockReleaseBuffer(bbuf);

	/* what the page will hold once the sub-buffer is applied */
	for (uint32 i = 0; i < nsub; i++)
	{
		if (sub[i].weight < 0)
			ss_page_corrupted(rel, bcms_buffer_blkno(p, el->pg),
							  "An entry of the sub-buffer of sketch page %u has a negative weight.",
							  el->pg);
		cms_page_add(el->counters, &p->geom, bcms_entry_hash(&sub[i]),
					 sub[i].weight, p->conservative);
	}
}

/*
 * buffered mode: the committed log records of the key's sketch page
 * (ss_log_scan_parts: on a standby, a long log is indexed by page once,
 * not read per lookup).
 */
static bool
bcms_scan_log(Relation rel, const SSLogSnapshot *snap, EstimateLog *el)
{
	const BcmsParams *p = el->p;
	BcmsConsolidation bc = {rel, p, NULL};
	uint32		parts[CMS_MAX_DEPTH];
	int			nparts;

	if (p->conservative)
		return ss_log_scan_parts(rel, snap, 0, bcms_parts_of, &bc, &el->pg, 1,
								 bcms_log_record, el);
	nparts = bcms_key_counter_parts(p, el->h, parts);
	return ss_log_scan_parts(rel, snap, 0, bcms_log_counter_parts, (void *) p,
							 parts, nparts, bcms_log_record, el);
}

/*
 * Estimate from the committed state: the key's pages (one buffer page and
 * one sketch page in buffered mode, up to depth pages in plain mode) and
 * the committed records still in the change log that those pages have not
 * applied yet (ss_changelog.h), taken in the order consolidation will
 * apply them.
 */
static int64
bcms_estimate_committed(Relation rel, const BcmsParams *p, SSHash h)
{
	EstimateLog el;
	int64		counters[CMS_COUNTERS_PER_PAGE];
	int64		est;

	el.rel = rel;
	el.p = p;
	el.h = h;
	el.counters = counters;
	el.pg = p->mode == BCMS_MODE_PLAIN ? 0 : cms_page_of(&p->geom, h);
	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;

		ss_log_read_begin(rel, &snap, attempt, true);
		if (p->mode == BCMS_MODE_PLAIN)
		{
			if (bcms_plain_estimate(rel, &snap, &el, &est))
				return est;
			continue;
		}
		bcms_read_buffered(rel, p, &el);
		if (bcms_scan_log(rel, &snap, &el))
			return cms_page_estimate(counters, &p->geom, h);
	}
}

/*
 * The estimate including this transaction's own pending updates: the
 * committed estimate plus the pending weight of the same key (and the
 * estimate of pending merged cms values).  That is a valid count-min
 * estimate of the committed stream plus the pending items: never below the
 * true count, and not above what the estimate will be after commit.
 * (SSKeyAnswerFn)
 */
static int64
estimate_key(Relation rel, Datum key)
{
	BcmsState  *st = bcms_get_state(rel);
	SSHash		h = ss_hash_datum(key, st->keylen, st->keybyval, st->p.seed);
	int64		est = bcms_estimate_committed(rel, &st->p, h);

	if (ss_pending_has(RelationGetRelid(rel)))
	{
		SSPendingIter it;
		SSPendingHeader hdr;
		char	   *payload;

		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		/* a TRUNCATE in this transaction hides the committed state */
		if (it.start > 0)
			est = 0;
		while (ss_pending_iter_next(&it, &hdr, &payload))
		{
			if (hdr.type == SS_PENDING_KEY)
			{
				SSPendingKey pending;

				memcpy(&pending, payload, sizeof(pending));
				if (pending.hash.h1 == h.h1 && pending.hash.h2 == h.h2)
					est = cms_saturating_add(est, pending.weight);
			}
			else if (hdr.type == SS_PENDING_MERGE)
			{
				const CmsData *cms = (const CmsData *) payload;
				CmsGeometry g;

				cms_get_geometry(cms, &g);
				est = cms_saturating_add(est,
										 cms_page_estimate(cms->counters +
														   (Size) cms_page_of(&g, h) * cms_page_counters(&g),
														   &g, h));
			}
		}
		ss_pending_iter_end(&it);
	}
	return est;
}

/*
 * On a partitioned table: the estimate of the partition that holds the
 * key, or the sum of every partition's (ss_parent.h), which is a
 * count-min estimate of the whole stream (docs/partitions.md).
 */
Datum
bcms_estimate(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(ss_sql_key_answer(fcinfo, &bcms_structure,
									  "bcms_estimate()", estimate_key,
									  false));
}

Datum
bcms_flush(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(ss_sql_flush(fcinfo, "bcms_flush()",
								 &bcms_structure, bcms_flush_all, true));
}

/*
 * What bcms_info counts in the change log: the rows and weight its records
 * add, and the records themselves, each an update (a record combined from
 * several rows too, ss_pending.c).
 */
typedef struct BcmsLogged
{
	BcmsStats	stats;
	int64		updates;
} BcmsLogged;

static void
bcms_count_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
				  void *arg)
{
	BcmsStats  *stats = &((BcmsLogged *) arg)->stats;
	SSPendingKey key;

	if (hdr->type == SS_PENDING_MERGE)
		stats->total_weight = cms_saturating_add(stats->total_weight,
												 ((const CmsData *) payload)->total);
	else if (hdr->type == SS_PENDING_KEY && ss_record_key(hdr, payload, &key))
	{
		stats->items = cms_saturating_add(stats->items, hdr->rows);
		stats->total_weight = cms_saturating_add(stats->total_weight,
												 key.weight);
		((BcmsLogged *) arg)->updates++;
	}
}

static void
bcms_info_fill(Relation rel, Datum *values, bool *nulls)
{
	BcmsParams *p = &bcms_get_state(rel)->p;
	BcmsMetaData meta;
	int64		buffered = 0;
	BcmsLogged	logged;
	BlockNumber nblocks;
	double		width;

	/* committed batches not consolidated yet count too */
	if (!ss_log_scan_all(rel, bcms_count_record, &logged, sizeof(logged), &meta))
		memset(&meta, 0, sizeof(meta));
	else
	{
		bcms_add_stats(&meta, &logged.stats);
		/* and their updates are not on the sketch pages yet */
		buffered = logged.updates;
	}
	nblocks = RelationGetNumberOfBlocks(rel);
	buffered += ss_subbufs_total(rel, 1 + p->geom.npages, p->nbufpages,
								 SS_PAGE_BCMS_BUFFER, p->subbufs_per_page,
								 p->subbuf_cap);

	width = p->mode == BCMS_MODE_PLAIN ? (double) p->width :
		(double) cms_geometry_width(&p->geom);
	values[0] = CStringGetTextDatum(p->mode == BCMS_MODE_PLAIN ? "plain" : "buffered");
	values[1] = Float8GetDatum(p->epsilon);
	values[2] = Float8GetDatum(p->delta);
	values[3] = Int64GetDatum((int64) width);
	values[4] = Int32GetDatum((int32) p->depth);
	values[5] = Int32GetDatum((int32) (p->mode == BCMS_MODE_PLAIN ? p->plain_pages : p->geom.npages));
	values[6] = Int32GetDatum((int32) p->nbufpages);
	values[7] = Int32GetDatum((int32) p->subbuf_cap);
	values[8] = BoolGetDatum(p->conservative);
	values[9] = Int64GetDatum((int64) p->seed);
	values[10] = Int64GetDatum(meta.items);
	values[11] = Int64GetDatum(meta.total_weight);
	values[12] = Int64GetDatum(buffered);
	values[13] = Int64GetDatum((int64) nblocks);
	/* e/width * n: the additive error bound that holds with prob. 1-delta */
	values[14] = Float8GetDatum(M_E / width * (double) meta.total_weight);
}

/*
 * On a partitioned table, the partitions' rows merged: the parameters
 * they share (NULL where they differ), the sizes and counters summed, and
 * error_bound the sum of theirs, the bound of a summed estimate.
 */
Datum
bcms_info(PG_FUNCTION_ARGS)
{
	return ss_sql_info(fcinfo, &bcms_structure, "bcms_info", "=====++===+++++",
					   bcms_info_fill);
}

/*
 * Add an in-memory cms into a bcms table, at commit like an INSERT.  The
 * two must have the same geometry and seed (a cms built with the table's
 * epsilon and delta has), and the same key type.
 */
Datum
bcms_merge(PG_FUNCTION_ARGS)
{
	Relation	rel;
	CmsData    *cms = PG_GETARG_CMS_P(1);
	BcmsState  *st;
	BcmsParams *p;

	/* a sketch's counters do not say which keys they count */
	ss_refuse_parent(PG_GETARG_OID(0), "bcms_merge()",
					 "A count-min sketch's counters cannot be split among the partitions that hold their keys.",
					 "Build one cms per partition and merge each into its partition.");
	rel = ss_sql_open_structure(PG_GETARG_OID(0), RowExclusiveLock, "bcms_merge()", ACL_INSERT,
								&bcms_structure);
	cms_check(cms);
	st = bcms_get_state(rel);
	p = &st->p;
	if (p->mode != BCMS_MODE_BUFFERED || cms->seed != p->seed ||
		cms->depth != p->geom.depth || cms->cols_per_page != p->geom.cols_per_page ||
		cms->npages != p->geom.npages)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot merge a cms into bcms table \"%s\" with different parameters",
						RelationGetRelationName(rel)),
				 errdetail("The table is %s with depth %u, %u pages of %u columns, seed %u; the cms has depth %u, %u pages of %u columns, seed %u.",
						   p->mode == BCMS_MODE_PLAIN ? "plain" : "buffered",
						   p->mode == BCMS_MODE_PLAIN ? p->depth : p->geom.depth,
						   p->geom.npages, p->geom.cols_per_page, p->seed,
						   cms->depth, cms->npages, cms->cols_per_page, cms->seed),
				 errhint("Build the cms with the table's epsilon and delta, and merge only into a buffered bcms.")));
	ss_check_merge_key_type(cms->elemtype, "cms", rel, "bcms table",
							st->keytype);
	ss_pending_add(rel, SS_PENDING_MERGE, cms, VARSIZE(cms));
	relation_close(rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * bcms_create(name, key_type, epsilon, delta, width, depth, weighted, mode,
 *			   conservative, buffer_size, unlogged) returns regclass
 *
 * Creates the table with explicit parameters; NULL arguments take the GUC
 * defaults.
 */
Datum
bcms_create(PG_FUNCTION_ARGS)
{
	text	   *name;
	Oid			keytype;
	bool		weighted = PG_ARGISNULL(6) ? false : PG_GETARG_BOOL(6);
	bool		unlogged = PG_ARGISNULL(10) ? false : PG_GETARG_BOOL(10);
	BcmsState	st;
	Oid			relid;

	ss_sql_create_check(fcinfo, "bcms_create");
	name = PG_GETARG_TEXT_PP(0);
	keytype = PG_GETARG_OID(1);

	memset(&st, 0, sizeof(st));
	ss_params_from_settings(&bcms_structure, NULL, &st);
	if (ss_param_from_arg(&bcms_structure, "mode", fcinfo, 7, &st) &&
		st.p.mode == BCMS_MODE_PLAIN)
		st.p.conservative = false;
	/* epsilon and delta give the width and depth, or the other way round */
	if (ss_param_from_arg(&bcms_structure, "epsilon", fcinfo, 2, &st) |
		ss_param_from_arg(&bcms_structure, "delta", fcinfo, 3, &st))
	{
		bcms_check_epsilon_delta(st.p.epsilon, st.p.delta);
		st.p.width = cms_width_for_epsilon(st.p.epsilon);
		st.p.depth = cms_depth_for_delta(st.p.delta);
	}
	if (ss_param_from_arg(&bcms_structure, "width", fcinfo, 4, &st))
		st.p.epsilon = M_E / (double) Max(st.p.width, 1);
	if (ss_param_from_arg(&bcms_structure, "depth", fcinfo, 5, &st))
		st.p.delta = exp(-(double) st.p.depth);
	ss_param_from_arg(&bcms_structure, "conservative", fcinfo, 8, &st);
	ss_param_from_arg(&bcms_structure, "buffer_size_kb", fcinfo, 9, &st);
	ss_params_check(&bcms_structure, NULL, &st, SS_PARAMS_CONSTRUCTOR);

	relid = ss_create_structure(&bcms_structure, &st, name, keytype,
								weighted ? "weight" : NULL, "bcms", unlogged);
	PG_RETURN_OID(relid);
}
