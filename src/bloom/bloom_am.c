/*-------------------------------------------------------------------------
 *
 * bloom_am.c
 *	  The `bloom_filter` table access method: handler, parameters and their
 *	  catalog, creation, TRUNCATE and INSERT.
 *
 * INSERT only hashes the row's key and appends it to the transaction's
 * pending log (ss_pending.c); at pre-commit the log is appended to the
 * relation's change log, and bloom_consolidate() later moves committed
 * inserts into the filter.
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
#include "bloom.h"
#include "catalog/pg_type.h"
#include "catalog/storage.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(bloom_filter_handler);


const char *
bloom_mode_name(uint32 mode)
{
	switch (mode)
	{
		case BLOOM_MODE_PLAIN:
			return "plain";
		case BLOOM_MODE_ELEVATOR:
			return "elevator";
		default:
			return "localized";
	}
}

/*
 * Validate the requested parameters and derive the geometry.  The result
 * depends on nothing else, so the metapage and the catalog row agree.
 */
void
bloom_derive(BloomParams *p)
{
	double		m;
	double		k;
	uint64		bytes;

	if (p->capacity < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bloom_filter capacity " INT64_FORMAT " is out of range",
						p->capacity),
				 errdetail("The capacity must be at least 1.")));
	if (!(p->fp_rate > 0 && p->fp_rate < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bloom_filter false-positive rate %g is out of range",
						p->fp_rate),
				 errdetail("The rate must be greater than 0 and less than 1.")));
	if (p->mode > BLOOM_MODE_LOCALIZED)
		elog(ERROR, "invalid bloom_filter mode %u", p->mode);

	m = Max(1.0, ceil(-(double) p->capacity * log(p->fp_rate) / (M_LN2 * M_LN2)));
	if (m > (double) BLOOM_MAX_PAGES * BLOOM_PAGE_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("bloom_filter of capacity " INT64_FORMAT " and false-positive rate %g is too large",
						p->capacity, p->fp_rate),
				 errdetail("It needs %.0f bits; at most %u pages of %u bits are supported.",
						   m, BLOOM_MAX_PAGES, BLOOM_PAGE_BITS),
				 errhint("Use a smaller capacity or a larger false-positive rate.")));
	k = Max(1.0, rint(m / (double) p->capacity * M_LN2));
	if (k > BLOOM_MAX_HASHES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bloom_filter false-positive rate %g is too small", p->fp_rate),
				 errdetail("It needs %.0f hash functions; at most %d are supported.",
						   k, BLOOM_MAX_HASHES)));
	p->nhashes = (uint32) k;
	p->nbits = (uint64) m;
	p->npages = (uint32) ((p->nbits + BLOOM_PAGE_BITS - 1) / BLOOM_PAGE_BITS);
	if (p->mode == BLOOM_MODE_LOCALIZED)
	{
		/* spread m evenly: every page gets the same number of bits */
		p->bits_per_page = (uint32) ((p->nbits + p->npages - 1) / p->npages);
		p->nbits = (uint64) p->npages * p->bits_per_page;
	}
	else
		p->bits_per_page = BLOOM_PAGE_BITS;
	ss_check_structure_pages(1 + (uint64) p->npages, NULL);

	p->nsubbufs = p->subbuf_cap = p->subbufs_per_page = p->nbufpages = 0;
	if (p->mode == BLOOM_MODE_PLAIN || p->buffer_kb == 0)
		return;					/* unbuffered */
	bytes = (uint64) p->buffer_kb * 1024;
	if (p->mode == BLOOM_MODE_ELEVATOR)
	{
		/* one sub-buffer per buffer page, picked by h1 */
		p->nbufpages = (uint32) Min(Max(bytes / BLCKSZ, 1), BLOOM_MAX_BUFPAGES);
		p->subbufs_per_page = 1;
		p->subbuf_cap = BLOOM_SUBBUF_MAX;
		p->nsubbufs = p->nbufpages;
	}
	else
	{
		/* localized: M bytes split evenly over the bit pages, as in bcms */
		uint64		cap = Min(bytes / sizeof(uint64) / p->npages, BLOOM_SUBBUF_MAX);
		uint32		spp;

		if (cap == 0)
			return;
		for (spp = 1;; spp++)
		{
			if (MAXALIGN((spp + 1) * sizeof(uint32)) +
				(spp + 1) * cap * sizeof(uint64) > SS_PAGE_DATA_SIZE)
				break;
		}
		p->subbuf_cap = (uint32) cap;
		p->subbufs_per_page = spp;
		p->nsubbufs = p->npages;
		p->nbufpages = (p->npages + spp - 1) / spp;
	}
	ss_check_structure_pages(1 + (uint64) p->npages + p->nbufpages, NULL);
}

/* A bloom_filter table has exactly one column: the key, of any type. */
static void
bloom_check_columns(Relation rel, void *stp)
{
	BloomState *st = (BloomState *) stp;
	TupleDesc	desc = RelationGetDescr(rel);
	Form_pg_attribute key = NULL;
	int			ncols = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (ncols++ == 0)
			key = att;
	}
	if (ncols != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("a bloom_filter table must have exactly one column, \"%s\" has %d",
						RelationGetRelationName(rel), ncols),
				 errdetail("A Bloom filter stores set membership only, no counts or weights."),
				 errhint("Use (key anytype); for counts use quotient_filter or bcms.")));
	if (st)
	{
		st->keytype = key->atttypid;
		st->keylen = key->attlen;
		st->keybyval = key->attbyval;
	}
}

/*
 * The invariants of a bloom_filter metapage the code relies on
 * (ss_meta_validate): parameters in range, the geometry derived from them,
 * counters within it.
 */
void
bloom_check_meta(Relation rel, const void *metap)
{
	const BloomMetaData *meta = (const BloomMetaData *) metap;
	const BloomParams *p = &meta->params;
	BloomParams d;

	if (p->seed != meta->hdr.seed)
		elog(ERROR, "the parameters' seed %u differs from the header's %u",
			 p->seed, meta->hdr.seed);
	if (p->buffer_kb > 64 * 1024 * 1024)
		elog(ERROR, "buffer size %u kB is out of range", p->buffer_kb);

	/* bloom_derive checks mode, capacity and rate */
	d = *p;
	bloom_derive(&d);
	if (d.nhashes != p->nhashes || d.nbits != p->nbits ||
		d.npages != p->npages || d.bits_per_page != p->bits_per_page ||
		d.nsubbufs != p->nsubbufs || d.subbuf_cap != p->subbuf_cap ||
		d.subbufs_per_page != p->subbufs_per_page ||
		d.nbufpages != p->nbufpages)
		elog(ERROR, "the page geometry differs from the one its parameters give");
	if (meta->items < 0 || meta->flushes < 0 ||
		meta->bits_set < 0 || (uint64) meta->bits_set > p->nbits)
		elog(ERROR, "a counter is out of range (items " INT64_FORMAT ", bits set " INT64_FORMAT " of " UINT64_FORMAT ", flushes " INT64_FORMAT ")",
			 meta->items, meta->bits_set, p->nbits, meta->flushes);
}

/* A new bloom_filter's layout: the bit pages, then the buffer pages. */
static BlockNumber
bloom_layout_end(const void *st)
{
	const BloomParams *p = &((const BloomState *) st)->p;

	return 1 + p->npages + p->nbufpages;
}

/* The geometry the parameters give, checked (the rate's open interval too). */
static void
bloom_check_params(Relation rel, void *st, SSParamSource source)
{
	bloom_derive(&((BloomState *) st)->p);
}

static const struct config_enum_entry bloom_mode_options[] = {
	{"plain", BLOOM_MODE_PLAIN, false},
	{"elevator", BLOOM_MODE_ELEVATOR, false},
	{"localized", BLOOM_MODE_LOCALIZED, false},
	{NULL, 0, false}
};

/*
 * The parameters, in label order.  fp_rate has no range here: it must lie
 * strictly between 0 and 1, which bloom_derive checks.
 */
static const SSParam bloom_params[] = {
	{.name = "mode", .argument = "mode", .type = SS_PARAM_ENUM, SS_FIELD(BloomState, p.mode),
		.options = bloom_mode_options,
		.setting = "bloom_mode",
		.short_desc = "Default layout of new bloom_filter tables.",
		.long_desc = "plain: the Bloom filter on disk, k random pages per insert; elevator: the same bits with a persistent insert buffer flushed in page order when full (EBF); localized: all k bits of a key in one page with per-page sub-buffers (BBF).",
	.boot = BLOOM_MODE_LOCALIZED},
	{.name = "capacity", .argument = "capacity", .type = SS_PARAM_INT, SS_FIELD(BloomState, p.capacity),
		.is_signed = true, .min = 1, .max = (double) PG_INT64_MAX,
		.setting = "bloom_capacity",
		.short_desc = "Default expected number of keys of new bloom_filter tables.",
		.long_desc = "Bits m = -capacity ln(fp_rate) / (ln 2)^2; a Bloom filter does not grow, its false-positive rate rises past the capacity.",
	.setting_min = 1, .setting_max = INT_MAX, .boot = 1000000},
	{.name = "fp_rate", .argument = "fp_rate", .type = SS_PARAM_REAL, SS_FIELD(BloomState, p.fp_rate),
		.setting = "bloom_fp_rate",
		.short_desc = "Default false-positive rate of new bloom_filter tables.",
		.long_desc = "Hash functions k = round(m/capacity ln 2).",
	.setting_min = 1e-15, .setting_max = 0.5, .boot = 0.001},
	{.name = "buffer_size_kb", .argument = "buffer_size", .type = SS_PARAM_INT,
		SS_FIELD(BloomState, p.buffer_kb), .min = 0, .max = 64 * 1024 * 1024,
		.setting = "bloom_buffer_size",
		.short_desc = "Default insert buffer size M of new elevator and localized bloom_filter tables.",
		.long_desc = "The buffer lives in the table's own pages and stays hot in shared_buffers; 0 disables buffering.",
	.setting_flags = GUC_UNIT_KB, .boot = 8192},
	{.name = "seed", .type = SS_PARAM_INT, SS_FIELD(BloomState, p.seed),
	.min = 0, .max = PG_UINT32_MAX, .boot = SS_DEFAULT_SEED, .internal = true},
};

static void bloom_tuple_insert(Relation rel, TupleTableSlot *slot,
				CommandId cid, int options,
				struct BulkInsertStateData *bistate);

static const uint16 bloom_page_types[] = {SS_PAGE_BLOOM_BITS, SS_PAGE_BLOOM_BUFFER};

const SSStructure bloom_structure = {
	.name = "bloom_filter",
	.amname = "bloom_filter",
	.constructor = "bloom_create()",
	SS_PAGE_TYPES(bloom_page_types),
	.kind = SS_KIND_BLOOM,
	SS_LAYOUT(BloomState, p, BloomMetaData, params),
	.consolidate = bloom_consolidate,
	.combine_keys = true,
	.stats_size = sizeof(BloomStats),
	.add_stats = bloom_add_stats,
	.check_columns = bloom_check_columns,
	.check_meta = bloom_check_meta,
	.layout_end = bloom_layout_end,
	SS_PARAMS(bloom_params),
	.check_params = bloom_check_params,
	.tuple_insert = bloom_tuple_insert,
};

/* Parameters and column info (ss_get_state). */
BloomState *
bloom_get_state(Relation rel)
{
	return (BloomState *) ss_get_state(rel, &bloom_structure);
}

/* One row inserts its key; rows with a NULL key are skipped. */
static void
bloom_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				   int options, struct BulkInsertStateData *bistate)
{
	BloomState *st = bloom_get_state(rel);
	SSPendingKey key;

	if (ss_slot_key(rel, slot, st->keylen, st->keybyval, InvalidOid,
					st->p.seed, &key))
		ss_pending_add(rel, SS_PENDING_KEY, &key,
					   sizeof(key));
}

Datum
bloom_filter_handler(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(ss_tableam_routine(&bloom_structure));
}
