/*-------------------------------------------------------------------------
 *
 * bcms_am.c
 *	  The `bcms` table access method: handler, parameters, creation,
 *	  TRUNCATE and INSERT.
 *
 * INSERT only hashes the row's key and appends (hash, weight) to the
 * transaction's pending log (ss_pending.c); at pre-commit the log is
 * appended to the relation's change log, and bcms_consolidate() later moves
 * committed updates into the sketch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/multixact.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "catalog/storage.h"
#include "executor/tuptable.h"
#include "bcms.h"
#include "miscadmin.h"
#include "ss_pending.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/guc.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(bcms_handler);


/*
 * Compute the page geometry from the parameters, validating them.  The
 * result depends on nothing else, so the metapage, the catalog row and an
 * in-memory cms built with the same epsilon/delta agree.
 */
void
bcms_derive_geometry(BcmsParams *p)
{
	uint64		total_pages;

	if (p->depth < 1 || p->depth > CMS_MAX_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bcms depth %u is out of range", p->depth),
				 errdetail("The depth must be between 1 and %d (delta >= e^-%d).",
						   CMS_MAX_DEPTH, CMS_MAX_DEPTH)));
	if (p->width < 1 || p->width > (uint64) CMS_MAX_PAGES * CMS_COUNTERS_PER_PAGE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bcms width " UINT64_FORMAT " is out of range", p->width),
				 errdetail("The sketch may have at most %u pages of %zu counters.",
						   CMS_MAX_PAGES, (size_t) CMS_COUNTERS_PER_PAGE),
				 errhint("Use a larger epsilon.")));
	if (p->mode == BCMS_MODE_PLAIN && p->conservative)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("conservative update requires a buffered bcms"),
				 errdetail("In plain mode a key's counters are on different pages, so conservative update would lock and rewrite depth pages per update.")));

	memset(&p->geom, 0, sizeof(p->geom));
	p->subbuf_cap = p->subbufs_per_page = p->nbufpages = p->plain_pages = 0;

	if (p->mode == BCMS_MODE_PLAIN)
	{
		total_pages = (p->width * p->depth + PLAIN_COUNTERS_PER_PAGE - 1) /
			PLAIN_COUNTERS_PER_PAGE;
		if (total_pages > CMS_MAX_PAGES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("bcms of width " UINT64_FORMAT " and depth %u is too large",
							p->width, p->depth),
					 errhint("Use a larger epsilon or delta.")));
		p->plain_pages = (uint32) total_pages;
		ss_check_structure_pages(1 + (uint64) p->plain_pages, NULL);
		return;
	}

	cms_geometry_init(&p->geom, p->width, p->depth);
	if ((uint64) p->geom.npages > CMS_MAX_PAGES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bcms of width " UINT64_FORMAT " and depth %u is too large",
						p->width, p->depth),
				 errhint("Use a larger epsilon or delta.")));
	ss_check_structure_pages(1 + (uint64) p->geom.npages, NULL);

	/* sub-buffers: M bytes split evenly over the k sketch pages */
	{
		uint64		max_cap = (SS_PAGE_DATA_SIZE - BCMS_BUF_HEADER_SIZE(1)) /
			sizeof(BcmsBufEntry);
		uint64		cap = ((uint64) p->buffer_kb * 1024 / sizeof(BcmsBufEntry)) /
			p->geom.npages;
		uint32		spp;

		cap = Min(cap, max_cap);
		if (cap == 0)
			return;				/* unbuffered: updates go to the page */
		for (spp = 1;; spp++)
		{
			if (BCMS_BUF_HEADER_SIZE(spp + 1) +
				(spp + 1) * cap * sizeof(BcmsBufEntry) > SS_PAGE_DATA_SIZE)
				break;
		}
		p->subbuf_cap = (uint32) cap;
		p->subbufs_per_page = spp;
		p->nbufpages = (p->geom.npages + spp - 1) / spp;
	}
	ss_check_structure_pages(1 + (uint64) p->geom.npages + p->nbufpages, NULL);
}

void
bcms_check_epsilon_delta(double epsilon, double delta)
{
	if (!(epsilon > 0 && epsilon < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bcms epsilon %g is out of range", epsilon),
				 errdetail("Epsilon must be greater than 0 and less than 1.")));
	/* below this the width (e/epsilon) exceeds what any sketch may have */
	if (epsilon < M_E / ((double) CMS_MAX_PAGES * CMS_COUNTERS_PER_PAGE))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bcms epsilon %g is too small", epsilon),
				 errdetail("The width e/epsilon would exceed the largest sketch, %u pages of %zu counters.",
						   CMS_MAX_PAGES, (size_t) CMS_COUNTERS_PER_PAGE),
				 errhint("Use a larger epsilon.")));
	if (!(delta > 0 && delta < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bcms delta %g is out of range", delta),
				 errdetail("Delta must be greater than 0 and less than 1.")));
}

/* Check the table's columns: (key [, weight integer]). */
static void
bcms_check_columns(Relation rel, void *stp)
{
	BcmsState  *st = (BcmsState *) stp;
	SSKeyColumns cols;

	ss_check_key_columns(RelationGetDescr(rel), RelationGetRelationName(rel),
						 "bcms", "weight", &cols);
	if (st)
	{
		st->keytype = cols.keytype;
		st->keylen = cols.keylen;
		st->keybyval = cols.keybyval;
		st->weighted = OidIsValid(cols.inttype);
		st->weighttype = cols.inttype;
	}
}

/*
 * The invariants of a bcms metapage the code relies on (ss_meta_validate):
 * parameters in range, the geometry derived from them, counters that
 * cannot go negative.
 */
void
bcms_check_meta(Relation rel, const void *metap)
{
	const BcmsMetaData *meta = (const BcmsMetaData *) metap;
	const BcmsParams *p = &meta->params;
	BcmsParams	d;

	if (p->mode != BCMS_MODE_BUFFERED && p->mode != BCMS_MODE_PLAIN)
		elog(ERROR, "mode %u is unknown", p->mode);
	if (*(const uint8 *) &p->conservative > 1)
		elog(ERROR, "conservative flag %u is not a boolean",
			 *(const uint8 *) &p->conservative);
	if (p->seed != meta->hdr.seed)
		elog(ERROR, "the parameters' seed %u differs from the header's %u",
			 p->seed, meta->hdr.seed);
	if (p->buffer_kb > 64 * 1024 * 1024)
		elog(ERROR, "buffer size %u kB is out of range", p->buffer_kb);
	bcms_check_epsilon_delta(p->epsilon, p->delta);

	/* everything derived must be what the parameters give */
	d = *p;
	bcms_derive_geometry(&d);
	if (memcmp(&d.geom, &p->geom, sizeof(d.geom)) != 0 ||
		d.subbuf_cap != p->subbuf_cap ||
		d.subbufs_per_page != p->subbufs_per_page ||
		d.nbufpages != p->nbufpages || d.plain_pages != p->plain_pages)
		elog(ERROR, "the page geometry differs from the one its parameters give");
	if (meta->items < 0 || meta->total_weight < 0 || meta->flushes < 0)
		elog(ERROR, "a counter is negative (items " INT64_FORMAT ", total weight " INT64_FORMAT ", flushes " INT64_FORMAT ")",
			 meta->items, meta->total_weight, meta->flushes);
}

/* A new bcms's layout: the sketch pages, then the sub-buffer pages. */
static BlockNumber
bcms_layout_end(const void *st)
{
	const BcmsParams *p = &((const BcmsState *) st)->p;

	return p->mode == BCMS_MODE_PLAIN ? 1 + p->plain_pages :
		1 + p->geom.npages + p->nbufpages;
}

/* Cross-checks, and the geometry the parameters give. */
static void
bcms_check_params(Relation rel, void *stp, SSParamSource source)
{
	BcmsParams *p = &((BcmsState *) stp)->p;

	bcms_check_epsilon_delta(p->epsilon, p->delta);
	if (source == SS_PARAMS_SETTINGS)
	{
		p->width = cms_width_for_epsilon(p->epsilon);
		p->depth = cms_depth_for_delta(p->delta);
		/* the setting is for buffered tables: a plain one does without */
		p->conservative = p->conservative && p->mode == BCMS_MODE_BUFFERED;
	}
	bcms_derive_geometry(p);
}

static const struct config_enum_entry bcms_mode_options[] = {
	{"buffered", BCMS_MODE_BUFFERED, false},
	{"plain", BCMS_MODE_PLAIN, false},
	{NULL, 0, false}
};

/* The parameters, in label order. */
static const SSParam bcms_params[] = {
	{.name = "mode", .type = SS_PARAM_ENUM, SS_FIELD(BcmsState, p.mode),
		.options = bcms_mode_options,
		.setting = "bcms_mode",
		.short_desc = "Default layout of new bcms tables.",
		.long_desc = "buffered: hash-localized pages with in-page sub-buffers (the buffered count-min sketch); plain: the classic count-min sketch, one page per row hash.",
	.boot = BCMS_MODE_BUFFERED},
	{.name = "epsilon", .type = SS_PARAM_REAL, SS_FIELD(BcmsState, p.epsilon),
		.setting = "bcms_epsilon",
		.short_desc = "Default error factor epsilon of new bcms tables.",
		.long_desc = "Estimates exceed the true count by at most epsilon times the stream's total weight, with probability 1 - delta.  Width = ceil(e/epsilon).",
	.setting_min = 1e-12, .setting_max = 0.5, .boot = 0.0001},
	{.name = "delta", .type = SS_PARAM_REAL, SS_FIELD(BcmsState, p.delta),
		.setting = "bcms_delta",
		.short_desc = "Default failure probability delta of new bcms tables.",
		.long_desc = "Depth = ceil(ln(1/delta)).",
	.setting_min = 1e-12, .setting_max = 0.5, .boot = 0.01},
	{.name = "width", .type = SS_PARAM_INT, SS_FIELD(BcmsState, p.width),
	.min = 1, .max = (double) PG_INT64_MAX, .derived = true},
	{.name = "depth", .type = SS_PARAM_INT, SS_FIELD(BcmsState, p.depth),
	.min = 1, .max = CMS_MAX_DEPTH, .derived = true},
	{.name = "buffer_size_kb", .type = SS_PARAM_INT,
		SS_FIELD(BcmsState, p.buffer_kb), .min = 0, .max = 64 * 1024 * 1024,
		.setting = "bcms_buffer_size",
		.short_desc = "Default total size M of the sub-buffers of new buffered bcms tables.",
		.long_desc = "The sub-buffers live in the table's own pages and stay hot in shared_buffers; 0 disables buffering.",
	.setting_flags = GUC_UNIT_KB, .boot = 8192},
	{.name = "conservative", .type = SS_PARAM_BOOL,
		SS_FIELD(BcmsState, p.conservative),
		.setting = "bcms_conservative",
		.short_desc = "Default for conservative update in new buffered bcms tables.",
	.boot = false},
	{.name = "seed", .type = SS_PARAM_INT, SS_FIELD(BcmsState, p.seed),
	.min = 0, .max = PG_UINT32_MAX, .boot = SS_DEFAULT_SEED, .internal = true},
};

static void bcms_tuple_insert(Relation rel, TupleTableSlot *slot,
				CommandId cid, int options,
				struct BulkInsertStateData *bistate);

static const uint16 bcms_page_types[] = {SS_PAGE_BCMS_SKETCH, SS_PAGE_BCMS_BUFFER};

const SSStructure bcms_structure = {
	.name = "bcms",
	.amname = "bcms",
	.constructor = "bcms_create()",
	SS_PAGE_TYPES(bcms_page_types),
	.kind = SS_KIND_BCMS,
	SS_LAYOUT(BcmsState, p, BcmsMetaData, params),
	.consolidate = bcms_consolidate,
	.combine_keys = true,
	.stats_size = sizeof(BcmsStats),
	.add_stats = bcms_add_stats,
	.check_columns = bcms_check_columns,
	.check_meta = bcms_check_meta,
	.layout_end = bcms_layout_end,
	SS_PARAMS(bcms_params),
	.check_params = bcms_check_params,
	.tuple_insert = bcms_tuple_insert,
};

/* The relation's parameters and column info (ss_get_state). */
BcmsState *
bcms_get_state(Relation rel)
{
	return (BcmsState *) ss_get_state(rel, &bcms_structure);
}

/*
 * One row = one occurrence of its key (or `weight` occurrences).  Rows
 * with a NULL key or a NULL weight are skipped, as aggregates skip NULLs.
 */
static void
bcms_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				  int options, struct BulkInsertStateData *bistate)
{
	BcmsState  *st = bcms_get_state(rel);
	SSPendingKey key;

	if (!ss_slot_key(rel, slot, st->keylen, st->keybyval, st->weighttype,
					 st->p.seed, &key))
		return;
	if (key.weight < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bcms weight " INT64_FORMAT " is negative", key.weight),
				 errdetail("A count-min sketch only supports non-negative increments."),
				 errhint("Filter out negative weights, or keep a second table for decrements.")));
	if (key.weight > 0)
		ss_pending_add(rel, SS_PENDING_KEY, &key,
					   sizeof(key));
}

Datum
bcms_handler(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(ss_tableam_routine(&bcms_structure));
}

