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

static TableAmRoutine bcms_routine;
static bool bcms_routine_ready = false;

bool
bcms_relation_is_bcms(Relation rel)
{
	return rel->rd_tableam == &bcms_routine;
}

/* Open relid and check that it is a bcms table. */
Relation
bcms_open(Oid relid, LOCKMODE lockmode)
{
	Relation	rel = relation_open(relid, lockmode);

	if (rel->rd_rel->relkind != RELKIND_RELATION || !bcms_relation_is_bcms(rel))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" is not a bcms table",
						RelationGetRelationName(rel)),
				 errhint("Create one with CREATE TABLE ... USING bcms or bcms_create().")));
	return rel;
}

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

static const char *const bcms_settings[] = {
	"streamsketch.bcms_epsilon", "streamsketch.bcms_delta",
	"streamsketch.bcms_mode", "streamsketch.bcms_conservative",
	"streamsketch.bcms_buffer_size", NULL
};

void
bcms_params_from_gucs(BcmsParams *p)
{
	ss_check_settings(bcms_settings);
	memset(p, 0, sizeof(*p));
	bcms_check_epsilon_delta(ss_bcms_epsilon, ss_bcms_delta);
	p->mode = (uint32) ss_bcms_mode;
	p->epsilon = ss_bcms_epsilon;
	p->delta = ss_bcms_delta;
	p->depth = cms_depth_for_delta(p->delta);
	p->width = cms_width_for_epsilon(p->epsilon);
	p->buffer_kb = (uint32) ss_bcms_buffer_size_kb;
	p->conservative = ss_bcms_conservative && p->mode == BCMS_MODE_BUFFERED;
	p->seed = SS_DEFAULT_SEED;
	bcms_derive_geometry(p);
}

static const char *
bcms_mode_name(uint32 mode)
{
	return mode == BCMS_MODE_PLAIN ? "plain" : "buffered";
}

/* The parameters in a label, in this order (ss_params.c). */
static const char *const bcms_label_keys[] = {
	"mode", "epsilon", "delta", "width", "depth", "buffer_size_kb",
	"conservative", "seed"
};
#define BCMS_LABEL_NKEYS lengthof(bcms_label_keys)

static char *
bcms_params_to_label(const void *st)
{
	const BcmsParams *p = &((const BcmsState *) st)->p;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "mode=%s", bcms_mode_name(p->mode));
	ss_label_append_float(&buf, "epsilon", p->epsilon);
	ss_label_append_float(&buf, "delta", p->delta);
	appendStringInfo(&buf, " width=" UINT64_FORMAT " depth=%u buffer_size_kb=%u conservative=%s seed=%u",
					 p->width, p->depth, p->buffer_kb,
					 p->conservative ? "on" : "off", p->seed);
	return buf.data;
}

/* Parse and validate a label, with bcms_create's checks. */
static void
bcms_params_from_label(Relation rel, const char *label, void *st)
{
	BcmsParams *p = &((BcmsState *) st)->p;
	char	   *v[BCMS_LABEL_NKEYS];

	ss_label_split(label, BCMS_LABEL_NKEYS, bcms_label_keys, v);
	memset(p, 0, sizeof(*p));
	if (strcmp(v[0], "buffered") == 0)
		p->mode = BCMS_MODE_BUFFERED;
	else if (strcmp(v[0], "plain") == 0)
		p->mode = BCMS_MODE_PLAIN;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid bcms mode \"%s\"", v[0]),
				 errhint("Use 'buffered' or 'plain'.")));
	p->epsilon = ss_label_float("epsilon", v[1]);
	p->delta = ss_label_float("delta", v[2]);
	bcms_check_epsilon_delta(p->epsilon, p->delta);
	p->width = (uint64) ss_label_int("width", v[3], 1, PG_INT64_MAX);
	p->depth = (uint32) ss_label_int("depth", v[4], 1, CMS_MAX_DEPTH);
	p->buffer_kb = (uint32) ss_label_int("buffer_size_kb", v[5], 0,
										 64 * 1024 * 1024);
	p->conservative = ss_label_bool("conservative", v[6]);
	p->seed = (uint32) ss_label_int("seed", v[7], 0, PG_UINT32_MAX);
	bcms_derive_geometry(p);
}

/* Check the table's columns: (key [, weight integer]). */
static void
bcms_check_columns(TupleDesc desc, const char *relname, BcmsState *st)
{
	SSKeyColumns cols;

	ss_check_key_columns(desc, relname, "bcms", "weight", &cols);
	if (st)
	{
		st->keytype = cols.keytype;
		st->keylen = cols.keylen;
		st->keybyval = cols.keybyval;
		st->weighted = OidIsValid(cols.inttype);
		st->weighttype = cols.inttype;
	}
}

static void
bcms_state_columns(Relation rel, void *st)
{
	bcms_check_columns(RelationGetDescr(rel), RelationGetRelationName(rel), st);
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

static void
bcms_params_from_meta(const void *meta, void *st)
{
	((BcmsState *) st)->p = ((const BcmsMetaData *) meta)->params;
}

static void
bcms_init_meta(const void *st, void *meta)
{
	BcmsMetaData *m = (BcmsMetaData *) meta;
	const BcmsParams *p = &((const BcmsState *) st)->p;

	memset(m, 0, sizeof(*m));
	ss_meta_header_init(&m->hdr, SS_KIND_BCMS, p->seed,
						p->mode == BCMS_MODE_PLAIN ? 1 + p->plain_pages :
						1 + p->geom.npages + p->nbufpages);
	m->params = *p;
}

static void
bcms_state_defaults(Relation rel, void *st)
{
	bcms_params_from_gucs(&((BcmsState *) st)->p);
}

const SSStateOps bcms_state_ops = {
	.kind = SS_KIND_BCMS,
	.state_size = sizeof(BcmsState),
	.meta_size = sizeof(BcmsMetaData),
	.consolidate = bcms_consolidate,
	.stats_size = sizeof(BcmsStats),
	.add_stats = bcms_add_stats,
	.check_columns = bcms_state_columns,
	.check_meta = bcms_check_meta,
	.params_from_meta = bcms_params_from_meta,
	.init_meta = bcms_init_meta,
	.default_params = bcms_state_defaults,
	.params_to_label = bcms_params_to_label,
	.params_from_label = bcms_params_from_label,
};

/* The relation's parameters and column info (ss_get_state). */
BcmsState *
bcms_get_state(Relation rel)
{
	return (BcmsState *) ss_get_state(rel, &bcms_state_ops);
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
	if (!bcms_routine_ready)
	{
		MemSet(&bcms_routine, 0, sizeof(bcms_routine));
		ss_tableam_init_common(&bcms_routine, &bcms_state_ops);
		bcms_routine.tuple_insert = bcms_tuple_insert;
		bcms_routine_ready = true;
	}
	PG_RETURN_POINTER(&bcms_routine);
}

/* ---- settings (streamsketch.*): the defaults of new bcms tables ---- */

double		ss_bcms_epsilon = 0.0001;
double		ss_bcms_delta = 0.01;
int			ss_bcms_mode = BCMS_MODE_BUFFERED;
bool		ss_bcms_conservative = false;
int			ss_bcms_buffer_size_kb = 8192;

static const struct config_enum_entry bcms_mode_options[] = {
	{"buffered", BCMS_MODE_BUFFERED, false},
	{"plain", BCMS_MODE_PLAIN, false},
	{NULL, 0, false}
};

SS_ASSIGN_HOOK(bcms_epsilon, double)
SS_ASSIGN_HOOK(bcms_delta, double)
SS_ASSIGN_HOOK(bcms_mode, int)
SS_ASSIGN_HOOK(bcms_conservative, bool)
SS_ASSIGN_HOOK(bcms_buffer_size, int)

/* Called by _PG_init. */
void
bcms_init(void)
{
	DefineCustomRealVariable("streamsketch.bcms_epsilon",
							 "Default error factor epsilon of new bcms tables.",
							 "Estimates exceed the true count by at most epsilon times the stream's total weight, with probability 1 - delta.  Width = ceil(e/epsilon).",
							 &ss_bcms_epsilon, 0.0001, 1e-12, 0.5,
							 PGC_USERSET, 0, NULL, assign_bcms_epsilon, NULL);
	DefineCustomRealVariable("streamsketch.bcms_delta",
							 "Default failure probability delta of new bcms tables.",
							 "Depth = ceil(ln(1/delta)).",
							 &ss_bcms_delta, 0.01, 1e-12, 0.5,
							 PGC_USERSET, 0, NULL, assign_bcms_delta, NULL);
	DefineCustomEnumVariable("streamsketch.bcms_mode",
							 "Default layout of new bcms tables.",
							 "buffered: hash-localized pages with in-page sub-buffers (the buffered count-min sketch); plain: the classic count-min sketch, one page per row hash.",
							 &ss_bcms_mode, BCMS_MODE_BUFFERED, bcms_mode_options,
							 PGC_USERSET, 0, NULL, assign_bcms_mode, NULL);
	DefineCustomBoolVariable("streamsketch.bcms_conservative",
							 "Default for conservative update in new buffered bcms tables.",
							 NULL,
							 &ss_bcms_conservative, false,
							 PGC_USERSET, 0, NULL, assign_bcms_conservative, NULL);
	DefineCustomIntVariable("streamsketch.bcms_buffer_size",
							"Default total size M of the sub-buffers of new buffered bcms tables.",
							"The sub-buffers live in the table's own pages and stay hot in shared_buffers; 0 disables buffering.",
							&ss_bcms_buffer_size_kb, 8192, 0, 64 * 1024 * 1024,
							PGC_USERSET, GUC_UNIT_KB, NULL, assign_bcms_buffer_size, NULL);
}
