/*-------------------------------------------------------------------------
 *
 * qfam_am.c
 *	  The quotient filter family's table access methods: handler,
 *	  parameters and their catalog, creation, TRUNCATE and INSERT.
 *
 * INSERT hashes the key and appends (hash, count) to the transaction's
 * pending log; at pre-commit it is appended to the relation's change log,
 * and qfam_consolidate() later moves committed changes into the levels.
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
#include "miscadmin.h"
#include "qfam.h"
#include "ss_pending.h"
#include "ss_test.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(quotient_filter_handler);
PG_FUNCTION_INFO_V1(buffered_quotient_filter_handler);
PG_FUNCTION_INFO_V1(cascade_filter_handler);

/* One routine per kind, so a relation's kind is its routine. */
static TableAmRoutine qfam_routines[4];
static bool qfam_routines_ready = false;

static uint32
qfam_relation_kind(Relation rel)
{
	for (uint32 k = QFAM_KIND_QF; k <= QFAM_KIND_CF; k++)
		if (rel->rd_tableam == &qfam_routines[k])
			return k;
	return 0;
}

/*
 * Home slots per page of a layout-3 filter whose first level has rbits
 * remainder bits: all its area holds with slack.  0 if none.
 */
static uint32
qfam_sized_nhome(int rbits)
{
	QfGeom		g;

	if (rbits < QF_MIN_RBITS || rbits > QF_MAX_RBITS ||
		!qf_geom_init(&g, rbits, QF_PAGE_AREA_BYTES))
		return 0;
	return g.nhome;
}

void
qfam_level_geom(const QfamLevel *lv, QfGeom *g)
{
	bool		ok;

	if (lv->layout == QFAM_LAYOUT_SIZED)
	{
		/* the first level's home slots, more slack at fewer bits */
		ok = qf_geom_init_slots(g, qfam_level_nhome(lv), (int) lv->rbits,
								QF_SLACK_FILL, QF_PAGE_AREA_BYTES);
	}
	else
	{
		ok = lv->slot_bits >= QF_MIN_SLOT_BITS &&
			lv->slot_bits <= QF_MAX_SLOT_BITS;
		if (ok && lv->layout == QFAM_LAYOUT_LEGACY)
			ok = qf_geom_init_slots_legacy(g, (uint32) 1 << lv->slot_bits,
										   (int) lv->rbits, QF_SLACK_FILL,
										   QF_PAGE_AREA_BYTES);
		else if (ok)
			ok = qf_geom_init_slots(g, (uint32) 1 << lv->slot_bits, (int) lv->rbits,
									QF_SLACK_FILL, QF_PAGE_AREA_BYTES);
	}
	if (!ok)
		elog(ERROR, "invalid quotient filter geometry: layout %u, 2^%u slots, %u slot bits, %u remainder bits",
			 lv->layout, lv->t, lv->slot_bits, lv->rbits);
}

/*
 * The level of a layout-3 filter that holds its capacity, t_max: P pages
 * of nhome home slots at the rate's remainder bits (fp_bits - t_max).  A
 * quotient_filter starts there (t_max = 0): qf_sized_base, the sizing a
 * qfilter of the same capacity and rate shares.  So does a buffered or
 * cascade filter whose buffer_pages hold that level: level 0 is it, as in
 * layout 2.  Otherwise the levels are sized top-down from it: level 0 is
 * the largest level below it whose pages fit buffer_pages, t_max is the
 * number of halvings from it to level 0 (a cascade filter's other levels
 * are fanout steps down from t_max, qfam_level_t), and every level below
 * t_max nests in the larger ones (qf_nested_shape), which needs nhome to
 * be a multiple of a power of two: the smallest that lets every level
 * down to level 0 nest.  False for other layouts or invalid parameters.
 */
static bool
qfam_sized_plan(const QfamParams *p, uint64 *pages, uint32 *nhome,
				uint32 *t_max)
{
	int			rbits = qf_rbits_for_fp_rate(p->fp_rate);
	double		load = qf_sized_load(p->fp_rate);

	*t_max = 0;
	if (p->layout != QFAM_LAYOUT_SIZED || rbits > QF_MAX_RBITS)
		return false;
	if (!qf_sized_base(p->capacity, load, rbits, QF_PAGE_AREA_BYTES,
					   QFAM_MAX_PAGE_BITS, pages, nhome))
		return false;
	/* level 0 is the capacity's level where it fits buffer_pages */
	if (p->kind == QFAM_KIND_QF || *pages <= Max(p->buffer_pages, 1))
		return true;
	for (int align_bits = 1; align_bits <= QFAM_SIZED_ALIGN_BITS; align_bits++)
	{
		if (!qf_sized_base_aligned(p->capacity, load, rbits, QF_PAGE_AREA_BYTES,
								   QFAM_MAX_PAGE_BITS, (uint32) 1 << align_bits,
								   pages, nhome))
			return false;
		for (uint32 j = 1; rbits + (int) j <= QF_MAX_RBITS && j < 64 - (uint32) rbits; j++)
		{
			uint64		pages_j;
			uint32		nhome_j;

			if (!qf_nested_shape(rbits, *pages, *nhome, (int) j,
								 QF_PAGE_AREA_BYTES, &pages_j, &nhome_j))
				break;			/* try a coarser alignment */
			if (pages_j <= Max(p->buffer_pages, 1))
			{
				*t_max = j;
				return true;
			}
		}
	}
	return false;
}

/*
 * The fingerprint space of a filter, M = mult * 2^exp (mult odd or 1), and
 * for layout 3 its pages' home slots and base page count.  Every lookup
 * maps its key, so the last parameters' values are kept.
 */
typedef struct QfamSpaceInfo
{
	QfamParams	p;
	uint64		mult;
	int			exp;
	uint32		nhome;
	uint64		base_pages;
	uint32		t_max;
	/* levels t < t_max (qf_nested_shape), derived once per parameters */
	uint64		below_pages[64];
	uint32		below_nhome[64];
} QfamSpaceInfo;

static const QfamSpaceInfo *
qfam_space_info(const QfamParams *p)
{
	static QfamSpaceInfo last;
	static bool have_last = false;

	if (have_last && memcmp(p, &last.p, sizeof(*p)) == 0)
		return &last;
	last.p = *p;
	last.mult = 1;
	last.exp = (int) p->fp_bits;
	last.nhome = 0;
	last.base_pages = 0;
	last.t_max = 0;
	if (p->layout == QFAM_LAYOUT_SIZED)
	{
		if (!qfam_sized_plan(p, &last.base_pages, &last.nhome, &last.t_max) ||
			last.t_max != p->t_max || p->t_max >= p->fp_bits)
			elog(ERROR, "invalid quotient filter parameters: capacity " INT64_FORMAT ", %u fingerprint bits",
				 p->capacity, p->fp_bits);
		qf_space_of(last.base_pages * last.nhome, (int) (p->fp_bits - p->t_max),
					&last.mult, &last.exp);
		for (uint32 t = 0; t < last.t_max; t++)
			if (!qf_nested_shape((int) (p->fp_bits - p->t_max), last.base_pages,
								 last.nhome, (int) (last.t_max - t),
								 QF_PAGE_AREA_BYTES, &last.below_pages[t],
								 &last.below_nhome[t]))
				elog(ERROR, "quotient filter level of 2^%u slots does not nest", t);
	}
	have_last = true;
	return &last;
}

void
qfam_space(const QfamParams *p, uint64 *mult, int *exp)
{
	const QfamSpaceInfo *si = qfam_space_info(p);

	*mult = si->mult;
	*exp = si->exp;
}

void
qfam_level_map(const QfamParams *p, const QfamLevel *lv, QfamMap *m)
{
	const QfamSpaceInfo *si = qfam_space_info(p);

	m->mult = si->mult;
	m->exp = si->exp;
	m->rbits = (int) lv->rbits;
	if (lv->layout == QFAM_LAYOUT_SIZED && lv->t >= si->t_max)
	{
		m->nhome = qfam_level_nhome(lv);
		m->npages = ((si->base_pages * si->nhome) << (lv->t - si->t_max)) /
			Max(m->nhome, 1);
	}
	else if (lv->layout == QFAM_LAYOUT_SIZED)
	{
		/* 2^b base pages per page (qf_nested_shape), the last partly used */
		int			b;

		m->nhome = qfam_level_nhome(lv);
		b = (int) (si->t_max - lv->t) -
			pg_leftmost_one_pos32(Max(si->nhome / Max(m->nhome, 1), 1));
		b = Max(b, 0);
		m->npages = b >= 64 ? 1 :
			(si->base_pages + ((UINT64CONST(1) << b) - 1)) >> b;
	}
	else
	{
		m->nhome = (uint32) 1 << lv->slot_bits;
		m->npages = (uint64) 1 << lv->page_bits;
	}
}

/*
 * Pages and home slots per page of level t of a layout-3 filter.  Below
 * t_max (the levels of a buffered or cascade filter under the capacity's)
 * qf_nested_shape.  Above, each doubling doubles the home slots per page
 * while they fit (a filter smaller than a page), else the pages; either
 * way every page of the grown level lies within one page of the smaller
 * one.
 */
void
qfam_sized_level(const QfamParams *p, uint32 t, uint64 *pages, uint32 *nhome)
{
	const QfamSpaceInfo *si = qfam_space_info(p);
	int			rbits = (int) (p->fp_bits - si->t_max);

	if (t < si->t_max)
	{
		*pages = si->below_pages[t];
		*nhome = si->below_nhome[t];
		return;
	}
	*pages = si->base_pages;
	*nhome = si->nhome;
	for (uint32 i = 1; i <= t - si->t_max && (int) i < rbits; i++)
	{
		if ((uint64) *nhome * 2 <= qfam_sized_nhome(rbits - (int) i))
			*nhome *= 2;
		else if (*pages <= ((uint64) 1 << QFAM_MAX_PAGE_BITS))
			*pages *= 2;		/* past the limit: only "too many" matters */
	}
}

/*
 * Shape a level of 2^t home slots in a page layout: rbits = fp_bits - t,
 * pages with the largest power of two of home slots the remainder size
 * allows (qf_geom_init, qf_home_bits), the rest page bits.  Layout 3:
 * `pages` pages of nhome home slots (qfam_sized_level), nhome kept in
 * page_bits and slot_bits (qfam_level_nhome).
 */
static void
qfam_level_shape_in(QfamLevel *lv, uint32 fp_bits, uint32 t, uint32 layout,
					uint64 pages, uint32 nhome)
{
	QfGeom		g;
	int			rbits = (int) fp_bits - (int) t;
	bool		ok = rbits >= 1 && rbits <= QF_MAX_RBITS;

	/* layout 3 checks its page geometry below */
	if (ok && layout == QFAM_LAYOUT_LEGACY)
		ok = qf_geom_init_legacy(&g, rbits, QF_PAGE_AREA_BYTES);
	else if (ok && layout != QFAM_LAYOUT_SIZED)
		ok = qf_geom_init(&g, rbits, QF_PAGE_AREA_BYTES);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter is full"),
				 errdetail("A level of 2^%u home slots leaves no remainder bits of the %u-bit fingerprints.",
						   t, fp_bits),
				 errhint("Create a filter with a larger capacity or a smaller false-positive rate.")));
	lv->t = (uint8) t;
	lv->layout = (uint16) layout;
	lv->rbits = (uint8) rbits;
	if (layout == QFAM_LAYOUT_SIZED)
	{
		QfGeom		pg;

		/* home slots per page in the two bytes (qfam_level_nhome) */
		lv->page_bits = (uint8) (nhome & 0xff);
		lv->slot_bits = (uint8) (nhome >> 8);
		if (nhome > 0xffff ||
			!qf_geom_init_slots(&pg, nhome, rbits, QF_SLACK_FILL,
								QF_PAGE_AREA_BYTES))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("quotient filter is full"),
					 errdetail("A page of %u home slots leaves no room for %d-bit remainders.",
							   nhome, rbits)));
		if (pages > ((uint64) 1 << QFAM_MAX_PAGE_BITS))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("quotient filter level of " UINT64_FORMAT " pages is too large",
							pages),
					 errdetail("At most 2^%d pages per level are supported.",
							   QFAM_MAX_PAGE_BITS)));
		return;
	}
	lv->slot_bits = (uint8) Min((uint32) qf_home_bits(g.nhome), t);
	lv->page_bits = (uint8) (t - lv->slot_bits);
	if (lv->page_bits > QFAM_MAX_PAGE_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter level of 2^%u slots is too large", t),
				 errdetail("At most 2^%d pages per level are supported.",
						   QFAM_MAX_PAGE_BITS)));
}

/*
 * A new level of filter p: the current page layout (layout 3 for a filter
 * of layout 3).
 */
void
qfam_level_shape(const QfamParams *p, QfamLevel *lv, uint32 t)
{
	if (p->layout == QFAM_LAYOUT_SIZED)
	{
		uint64		pages;
		uint32		nhome;

		qfam_sized_level(p, t, &pages, &nhome);
		qfam_level_shape_in(lv, p->fp_bits, t, QFAM_LAYOUT_SIZED, pages,
							nhome);
	}
	else
		qfam_level_shape_in(lv, p->fp_bits, t, QFAM_LAYOUT, 0, 0);
}

/*
 * Derive the geometry from capacity and false-positive rate.  A QF at load
 * alpha has false-positive rate about alpha * 2^-r, so r is the smallest
 * remainder with QFAM_MAX_LOAD * 2^-r <= fp_rate, and the largest level
 * needs 2^t_max home slots to hold capacity at QFAM_MAX_LOAD; fingerprints
 * have t_max + r bits.  Level 0 of a buffered or cascade filter gets as
 * many slots as fit in buffer_pages pages.  That is layouts 0 and 2; a
 * new table has layout 3, sized by qfam_sized_plan.
 */
void
qfam_derive(QfamParams *p)
{
	int			rbits;
	uint32		t;
	QfamLevel	lv;

	if (p->capacity < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("quotient filter capacity " INT64_FORMAT " is out of range",
						p->capacity),
				 errdetail("The capacity must be at least 1.")));
	if (!(p->fp_rate > 0 && p->fp_rate < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("quotient filter false-positive rate %g is out of range",
						p->fp_rate),
				 errdetail("The rate must be greater than 0 and less than 1.")));
	if (p->kind == QFAM_KIND_CF &&
		(p->fanout < 2 || p->fanout > 1024 || (p->fanout & (p->fanout - 1)) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cascade filter fanout %u is out of range", p->fanout),
				 errdetail("The fanout must be a power of two between 2 and 1024.")));
	rbits = qf_rbits_for_fp_rate(p->fp_rate);
	if (rbits > QF_MAX_RBITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("quotient filter false-positive rate %g is too small",
						p->fp_rate),
				 errdetail("It needs %d remainder bits; at most %d fit.",
						   rbits, QF_MAX_RBITS)));
	if (p->layout == QFAM_LAYOUT_SIZED)
	{
		uint64		pages;
		uint32		nhome;
		uint32		t_max;
		uint64		mult;
		int			exp;

		/*
		 * The capacity's level of P pages at t_max (0 for a
		 * quotient_filter, which grows by doubling from there); level 0 at
		 * t0 = 0, t_max halvings below it.
		 */
		if (!qfam_sized_plan(p, &pages, &nhome, &t_max))
		{
			if (p->kind != QFAM_KIND_QF &&
				qf_sized_base(p->capacity, qf_sized_load(p->fp_rate), rbits,
							  QF_PAGE_AREA_BYTES, QFAM_MAX_PAGE_BITS, &pages,
							  &nhome))
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("quotient filter capacity " INT64_FORMAT " is too large for a level 0 of %u pages",
								p->capacity, p->buffer_pages),
						 errdetail("Its smaller levels would need more than %d remainder bits.",
								   QF_MAX_RBITS)));
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("quotient filter capacity " INT64_FORMAT " is too large",
							p->capacity),
					 errdetail("At most 2^%d pages per level are supported.",
							   QFAM_MAX_PAGE_BITS)));
		}
		/* y = floor(h * M / 2^64) needs M <= 2^64 */
		qf_space_of(pages * nhome, rbits, &mult, &exp);
		if (!qf_space_valid(mult, exp))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("quotient filter capacity " INT64_FORMAT " is too large",
							p->capacity),
					 errdetail("Fingerprints would need %d bits.",
							   qfam_space_bits(mult, exp))));
		p->fp_bits = (uint32) rbits + t_max;
		p->t_max = t_max;
		p->t0 = 0;
		qfam_level_shape_in(&lv, p->fp_bits, t_max, p->layout, pages, nhome);
		ss_check_structure_pages(1 + pages, NULL);
		return;
	}
	t = (uint32) qf_slots_log2_for((double) p->capacity);
	if (t + rbits > 64 || t > QFAM_MAX_PAGE_BITS + QF_MAX_SLOT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter capacity " INT64_FORMAT " is too large",
						p->capacity),
				 errdetail("Fingerprints would need %u bits.", t + (uint32) rbits)));
	p->t_max = t;
	p->fp_bits = t + (uint32) rbits;
	qfam_level_shape_in(&lv, p->fp_bits, t, p->layout, 0, 0);	/* validates */

	/* level 0: the whole filter, or what fits in buffer_pages pages */
	p->t0 = t;
	if (p->kind != QFAM_KIND_QF)
	{
		while (p->t0 > 1)
		{
			qfam_level_shape_in(&lv, p->fp_bits, p->t0, p->layout, 0, 0);
			if (((uint64) 1 << lv.page_bits) <= Max(p->buffer_pages, 1))
				break;
			p->t0--;
		}
	}

	/* the filter at its capacity: its largest level after the metapage */
	qfam_level_shape(p, &lv, p->t_max);
	ss_check_structure_pages(1 + ((uint64) 1 << lv.page_bits), NULL);
}

/* Check the table's columns: (key [, count integer]). */
static void
qfam_check_columns(Relation rel, void *stp)
{
	QfamState  *st = (QfamState *) stp;
	SSKeyColumns cols;

	ss_check_key_columns(RelationGetDescr(rel), RelationGetRelationName(rel),
						 ss_structure_name(rel), "count", &cols);
	if (st)
	{
		st->keytype = cols.keytype;
		st->keylen = cols.keylen;
		st->keybyval = cols.keybyval;
		st->counted = OidIsValid(cols.inttype);
		st->counttype = cols.inttype;
	}
}

/*
 * The invariants of a quotient filter metapage the code relies on
 * (ss_meta_validate): parameters in range and what they derive, every
 * level's geometry, runs within the blocks ever reserved, counters that
 * cannot go negative.  Called on every metapage read; the parameters,
 * which never change, are re-derived only when they differ from the last
 * ones checked.
 */
void
qfam_check_meta(Relation rel, const void *metap)
{
	static QfamParams last_checked;
	static bool have_last = false;
	const QfamMeta *meta = (const QfamMeta *) metap;
	const QfamParams *p = &meta->params;

	if (p->kind != qfam_relation_kind(rel))
		elog(ERROR, "filter kind %u does not match the access method", p->kind);
	if (p->layout != QFAM_LAYOUT && p->layout != QFAM_LAYOUT_LEGACY &&
		p->layout != QFAM_LAYOUT_SIZED)
		elog(ERROR, "page layout %u is unknown", p->layout);
	if (!have_last || memcmp(p, &last_checked, sizeof(*p)) != 0)
	{
		QfamParams	d;

		if (p->seed != meta->hdr.seed)
			elog(ERROR, "the parameters' seed %u differs from the header's %u",
				 p->seed, meta->hdr.seed);
		if (p->buffer_pages < 1 ||
			p->buffer_pages > QFAM_BUFFER_KB_MAX / (BLCKSZ / 1024))
			elog(ERROR, "level 0 size of %u pages is out of range", p->buffer_pages);
		if (p->kind != QFAM_KIND_CF && p->fanout > 1024)
			elog(ERROR, "fanout %u is out of range", p->fanout);
		/* qfam_derive checks capacity, rate and a cascade filter's fanout */
		d = *p;
		qfam_derive(&d);
		if (d.fp_bits != p->fp_bits || d.t_max != p->t_max || d.t0 != p->t0)
			elog(ERROR, "the fingerprint geometry differs from the one its parameters give");
		last_checked = *p;
		have_last = true;
	}

	if (meta->nlevels < 1 || meta->nlevels > QFAM_MAX_LEVELS)
		elog(ERROR, "%u levels is out of range", meta->nlevels);
	if (meta->merges < 0)
		elog(ERROR, "merge count " INT64_FORMAT " is negative", meta->merges);
	if (meta->hdr.log.alloc_end < 2)
		elog(ERROR, "allocated end %u is out of range", meta->hdr.log.alloc_end);
	if (meta->merge_target != 0)
	{
		/* a merge in place: into a level above 0, among its sources */
		uint32		target = (uint32) meta->merge_target - 1;
		uint16		next;

		if (target < 1 || target >= meta->nlevels ||
			meta->merge_nsrc <= target || meta->merge_nsrc > meta->nlevels)
			elog(ERROR, "merge in place of %u levels into level %u is out of range",
				 (uint32) meta->merge_nsrc, target);
		next = (uint16) (meta->levels[target].epoch + 1);
		if (meta->merge_epoch != (next == 0 ? 1 : next))
			elog(ERROR, "merge in place into level %u has epoch %u, the level has %u",
				 target, (uint32) meta->merge_epoch,
				 (uint32) meta->levels[target].epoch);
	}
	for (uint32 l = 0; l < meta->nlevels; l++)
	{
		const QfamLevel *lv = &meta->levels[l];
		QfamLevel	shape;
		QfamMap		map;
		uint64		npages;

		if (lv->t < (p->layout == QFAM_LAYOUT_SIZED ? 0 : 1) ||
			lv->t >= p->fp_bits)
			elog(ERROR, "level %u has 2^%u home slots, fingerprints have %u bits",
				 l, lv->t, p->fp_bits);
		/*
		 * Levels of the earlier layout only in a relation created with it;
		 * a relation of layout 3 has only levels of layout 3.
		 */
		if (p->layout == QFAM_LAYOUT_SIZED ? lv->layout != QFAM_LAYOUT_SIZED :
			(lv->layout != QFAM_LAYOUT &&
			 (lv->layout != QFAM_LAYOUT_LEGACY || p->layout != QFAM_LAYOUT_LEGACY)))
			elog(ERROR, "level %u has page layout %u in a relation of layout %u",
				 l, lv->layout, p->layout);
		if (lv->layout == QFAM_LAYOUT_SIZED)
			qfam_level_shape(p, &shape, lv->t);
		else
			qfam_level_shape_in(&shape, p->fp_bits, lv->t, lv->layout, 0, 0);
		if (shape.rbits != lv->rbits || shape.slot_bits != lv->slot_bits ||
			shape.page_bits != lv->page_bits)
			elog(ERROR, "level %u's page geometry differs from the one its size gives", l);
		qfam_level_map(p, lv, &map);
		npages = map.npages;
		if (lv->base < 1 || (uint64) lv->base + npages > meta->hdr.log.alloc_end)
			elog(ERROR, "level %u's run at block %u is outside the %u blocks allocated",
				 l, lv->base, meta->hdr.log.alloc_end);
		if (lv->alt_base != InvalidBlockNumber &&
			(lv->alt_base < 1 || (uint64) lv->alt_base + npages > meta->hdr.log.alloc_end))
			elog(ERROR, "level %u's spare run at block %u is outside the %u blocks allocated",
				 l, lv->alt_base, meta->hdr.log.alloc_end);
		if (lv->items < 0 || lv->total < lv->items)
			elog(ERROR, "level %u's counters are out of range (items " INT64_FORMAT ", total " INT64_FORMAT ")",
				 l, lv->items, lv->total);

		/*
		 * A level starts at epoch 1 and each merge raises it by one at
		 * most (as its target or as one of its sources), so until the
		 * epochs can have wrapped, none exceeds merges + 1.  A damaged
		 * epoch would make the level's pages read as emptied.
		 */
		if (lv->epoch == 0 ||
			(meta->merges >= 0 && meta->merges < 65534 &&
			 lv->epoch > meta->merges + 1))
			elog(ERROR, "level %u has epoch %u after " INT64_FORMAT " merges",
				 l, lv->epoch, meta->merges);
	}
}

/* What ss_meta_init writes, and an empty level 0 (qfam_first_level) */
static void
qfam_init_meta(const void *st, void *meta)
{
	qfam_first_level(&((const QfamState *) st)->p, (QfamMeta *) meta);
}

/*
 * The access method decides the kind (a constructor, which has no
 * relation yet, sets it before); the settings give level 0's size in kB
 * (see buffer_pages below); then the geometry, checked.
 */
static void
qfam_check_params(Relation rel, void *st, SSParamSource source)
{
	QfamParams *p = &((QfamState *) st)->p;

	if (rel != NULL)
		p->kind = qfam_relation_kind(rel);
	if (source == SS_PARAMS_SETTINGS)
		p->buffer_pages = Max(1, p->buffer_pages / (BLCKSZ / 1024));
	/* parameters of a new table */
	p->layout = QFAM_LAYOUT_SIZED;
	qfam_derive(p);
}

/*
 * The parameters, in label order.  fp_rate has no range here: it must lie
 * strictly between 0 and 1, which qfam_derive checks, as it checks a
 * cascade filter's fanout (a power of two from 2 on); the range of fanout
 * is the one of every kind.  fanout is marked signed so that a negative
 * argument is reported as given rather than as a huge unsigned number.
 *
 * buffer_pages is kept in pages (labels, metapage) but given in kB by its
 * setting and by qf_create's buffer_size: the table has no unit
 * conversion, so the setting's kB value lands in the field and
 * qfam_check_params turns it into pages; marked derived, its range is
 * checked in pages after that.  qf_create converts its argument itself
 * (qfam_query.c).
 */
static const SSParam qfam_params[] = {
	{.name = "capacity", .type = SS_PARAM_INT, SS_FIELD(QfamState, p.capacity),
		.is_signed = true, .min = 1, .max = (double) PG_INT64_MAX,
		.setting = "qf_capacity",
		.short_desc = "Default expected number of keys of new quotient filter tables.",
		.long_desc = "The filter grows past it by resizing.",
	.setting_min = 1, .setting_max = INT_MAX, .boot = 1000000},
	{.name = "fp_rate", .type = SS_PARAM_REAL, SS_FIELD(QfamState, p.fp_rate),
		.setting = "qf_fp_rate",
		.short_desc = "Default false-positive rate of new quotient filter tables.",
	.setting_min = 1e-15, .setting_max = 0.5, .boot = 0.001},
	{.name = "fanout", .type = SS_PARAM_INT, SS_FIELD(QfamState, p.fanout),
		.is_signed = true, .min = 0, .max = 1024,
		.setting = "qf_fanout",
		.short_desc = "Default fanout (size ratio of consecutive levels) of new cascade filter tables.",
		.long_desc = "A power of two; larger fanouts mean fewer levels (faster lookups) and more rewriting (slower inserts).",
	.setting_min = 2, .setting_max = 1024, .boot = 4},
	{.name = "buffer_pages", .type = SS_PARAM_INT,
		SS_FIELD(QfamState, p.buffer_pages),
		.min = 1, .max = QFAM_BUFFER_KB_MAX / (BLCKSZ / 1024), .derived = true,
		.setting = "qf_buffer_size",
		.short_desc = "Default size of level 0 (the in-RAM level) of new buffered quotient filter and cascade filter tables.",
		.long_desc = "Level 0's pages are updated in place and stay hot in shared_buffers.",
		.setting_flags = GUC_UNIT_KB, .setting_min = 8,
	.setting_max = QFAM_BUFFER_KB_MAX, .boot = 8192},
	{.name = "seed", .type = SS_PARAM_INT, SS_FIELD(QfamState, p.seed),
	.min = 0, .max = PG_UINT32_MAX, .boot = SS_DEFAULT_SEED, .internal = true},
};

static void qfam_tuple_insert(Relation rel, TupleTableSlot *slot,
				CommandId cid, int options,
				struct BulkInsertStateData *bistate);

static const uint16 qfam_page_types[] = {SS_PAGE_QF_AREA, SS_PAGE_QF_UNDO};

/* the QfamMergeStop points, by number */
static const char *const qfam_merge_stop_points[] = {
	"none", "crash", "error", "overflow", NULL
};

SSTestCrash qfam_merge_stop = {
	.setting = "streamsketch.test_qf_merge_stop",
	.short_desc = "Stops a merge in place halfway: crash, error or overflow (for tests only).",
	.during = "a merge in place",
	.points = qfam_merge_stop_points,
};

static void
qfam_init(void)
{
	ss_test_crash_define(&qfam_merge_stop);
}

const SSStructure qfam_structure = {
	.name = "quotient filter",
	.amname = "quotient_filter",
	.constructor = "qf_create()",
	SS_PAGE_TYPES(qfam_page_types),
	.kind = SS_KIND_QF,
	SS_LAYOUT(QfamState, p, QfamMeta, params),
	.consolidate = qfam_consolidate,
	.combine_keys = true,
	.admit = qfam_admit,
	.check_columns = qfam_check_columns,
	.check_meta = qfam_check_meta,
	.init_meta = qfam_init_meta,
	SS_PARAMS(qfam_params),
	.check_params = qfam_check_params,
	.compact = qfam_compact,
	.tuple_insert = qfam_tuple_insert,
	.init = qfam_init,
};

/* Parameters and columns (ss_get_state). */
QfamState *
qfam_get_state(Relation rel)
{
	return (QfamState *) ss_get_state(rel, &qfam_structure);
}

/*
 * One row inserts its key once (or `count` times for a table with a count
 * column).  Rows with a NULL key or count are skipped; a negative count is
 * an error.
 */
static void
qfam_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				  int options, struct BulkInsertStateData *bistate)
{
	QfamState  *st = qfam_get_state(rel);
	SSPendingKey key;

	if (!ss_slot_key(rel, slot, st->keylen, st->keybyval, st->counttype,
					 st->p.seed, &key))
		return;
	if (key.weight < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("quotient filter count " INT64_FORMAT " is negative",
						key.weight),
				 errhint("Use qf_delete() to remove copies of a key.")));
	if (key.weight > 0)
		ss_pending_add(rel, SS_PENDING_KEY, &key,
					   sizeof(key));
}

static Datum
qfam_handler(uint32 kind)
{
	if (!qfam_routines_ready)
	{
		for (uint32 k = QFAM_KIND_QF; k <= QFAM_KIND_CF; k++)
		{
			TableAmRoutine *r = &qfam_routines[k];

			MemSet(r, 0, sizeof(*r));
			ss_tableam_init_common(r, &qfam_structure);
		}
		qfam_routines_ready = true;
	}
	PG_RETURN_POINTER(&qfam_routines[kind]);
}

Datum
quotient_filter_handler(PG_FUNCTION_ARGS)
{
	return qfam_handler(QFAM_KIND_QF);
}

Datum
buffered_quotient_filter_handler(PG_FUNCTION_ARGS)
{
	return qfam_handler(QFAM_KIND_BQF);
}

Datum
cascade_filter_handler(PG_FUNCTION_ARGS)
{
	return qfam_handler(QFAM_KIND_CF);
}
