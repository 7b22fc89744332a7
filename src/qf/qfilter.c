/*-------------------------------------------------------------------------
 *
 * qfilter.c
 *	  The in-memory `qfilter` type: parameters, construction, validation,
 *	  point operations, growth (resize) and union.  Text and binary I/O and
 *	  qfilter_info() are in qfilter_io.c, the aggregates and the other SQL
 *	  functions in qfilter_agg.c.
 *
 * Growth and union rebuild areas sequentially with the builder of qf.c,
 * which writes the canonical layout of a sorted fingerprint sequence.  A
 * filter's fingerprints, read area by area in increasing (quotient,
 * remainder) order, are sorted as T-bit numbers (the area index is their
 * top bits), so any two filters with the same fingerprint size T can be
 * merged into any geometry with that T by a two-way merge of their
 * fingerprint streams.  Faster special cases: a growth step that keeps
 * slot_bits splits every area in two (qf_split_area), and the union of two
 * filters of the target geometry merges area by area (qf_merge_areas).
 *
 * Canonical results
 * -----------------
 * Whether a multiset of fingerprints fits 2^t home slots (no area
 * overflows its last slack slot, and at most 0.95 * 2^t distinct
 * fingerprints) depends on the multiset only, and a subset fits wherever
 * the whole fits.  Growth always looks for the smallest t beyond a lower
 * bound that fits, laying out from the original rather than step by step,
 * so:
 *	 - an aggregate over a stream ends at the smallest t (from the one of
 *	   the requested capacity on) that fits the final multiset: every step
 *	   it took was forced by a subset that did not fit;
 *	 - a union starts from the larger of its inputs' t and takes the
 *	   smallest t from there that fits the union; as each input's t is at
 *	   most the final one, that is again the smallest t that fits it.
 * Hence parallel and serial aggregation, and a union of partial filters,
 * give byte-identical values.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "qfilter.h"
#include "ss_textio.h"

StaticAssertDecl(QFILTER_HEADER_SIZE % sizeof(uint64) == 0,
				 "qfilter areas must start 8-byte aligned");
StaticAssertDecl(QFILTER_AREA_BYTES % sizeof(uint64) == 0 &&
				 QFILTER_AREA_BYTES % 3 == 0,
				 "qfilter area stride must be a multiple of 8 and 3");

/* A value of the largest size, and its text form, fit in MaxAllocSize. */
StaticAssertDecl((uint64) QFILTER_HEADER_SIZE +
				 ((uint64) QFILTER_AREA_BYTES << QFILTER_MAX_PAGE_BITS) <= MaxAllocSize,
				 "QFILTER_MAX_PAGE_BITS too large for a varlena");
StaticAssertDecl((uint64) QFILTER_TEXT_HEADER_RESERVE +
				 ((uint64) QFILTER_TEXT_AREA_CHARS << QFILTER_MAX_PAGE_BITS) <= MaxAllocSize,
				 "QFILTER_MAX_PAGE_BITS too large for the text form");

static inline uint64
qfilter_sat_add(uint64 a, uint64 b)
{
	return a > PG_UINT64_MAX - b ? PG_UINT64_MAX : a + b;
}

/* ----------------------------------------------------------------
 *		Parameters and geometry
 * ----------------------------------------------------------------
 */

void
qfilter_geom(const QFilterData *qf, QfGeom *g)
{
	/* callers validated the header; this only guards against misuse */
	if (qf->slot_bits < QF_MIN_SLOT_BITS || qf->slot_bits > QF_MAX_SLOT_BITS ||
		!(qf->version == QFILTER_VERSION_LEGACY ?
		  qf_geom_init_slots_legacy(g, (uint32) 1 << qf->slot_bits, qf->rbits,
									QF_SLACK_FILL, qf->area_bytes) :
		  qf_geom_init_slots(g, (uint32) 1 << qf->slot_bits, qf->rbits,
							 QF_SLACK_FILL, qf->area_bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("%d-bit quotients with %d-bit remainders do not fit an area of %u bytes.",
						   qf->slot_bits, qf->rbits, qf->area_bytes)));
}

/*
 * Sizing.  These are the formulas of the paged quotient filters
 * (qfam_derive and qfam_level_shape in qfam_am.c), so that a qfilter and a
 * quotient_filter table made with the same capacity and fp_rate have the
 * same fingerprint size, and at the same number of home slots the same
 * area geometry.
 */

int
qfilter_slots_log2_for(double n)
{
	return qf_slots_log2_for(n);
}

bool
qfilter_shape(int fp_bits, int t, int *rbits, int *slot_bits, int *page_bits)
{
	QfGeom		g;
	int			r = fp_bits - t;

	if (t < 1 || r < QF_MIN_RBITS || r > QF_MAX_RBITS ||
		!qf_geom_init(&g, r, QFILTER_AREA_BYTES))
		return false;
	*rbits = r;
	*slot_bits = Min(qf_home_bits(g.nhome), t);
	*page_bits = t - *slot_bits;
	return true;
}

/*
 * Why a geometry is unusable for a qfilter value, or NULL.  Checked before
 * anything is allocated from it.
 */
char *
qfilter_geometry_problem(uint32 version, int rbits, int slot_bits,
						 int page_bits, uint32 area_bytes)
{
	QfGeom		g;
	bool		(*geom_init) (QfGeom *, uint32, int, uint32, Size) =
		version == QFILTER_VERSION_LEGACY ? qf_geom_init_slots_legacy :
		qf_geom_init_slots;

	if (area_bytes != QFILTER_AREA_BYTES)
		return psprintf("The area size %u is not the supported %d bytes.",
						area_bytes, (int) QFILTER_AREA_BYTES);
	if (rbits < QF_MIN_RBITS || rbits > QF_MAX_RBITS)
		return psprintf("The remainder size %d is outside the supported range %d to %d bits.",
						rbits, QF_MIN_RBITS, QF_MAX_RBITS);
	if (slot_bits < QF_MIN_SLOT_BITS || slot_bits > QF_MAX_SLOT_BITS ||
		!geom_init(&g, (uint32) 1 << slot_bits, rbits, QF_SLACK_FILL,
				   area_bytes))
		return psprintf("%d-bit quotients with %d-bit remainders do not fit an area of %u bytes.",
						slot_bits, rbits, area_bytes);
	if (page_bits < 0 || page_bits > QFILTER_MAX_PAGE_BITS)
		return psprintf("The area index size %d is outside the supported range 0 to %d bits.",
						page_bits, QFILTER_MAX_PAGE_BITS);
	if (!qf_fingerprint_bits_valid(page_bits, slot_bits, rbits))
		return psprintf("The fingerprint of %d bits is longer than the 64-bit key hash.",
						rbits + slot_bits + page_bits);
	return NULL;
}

void
qfilter_params(int64 capacity, double fp_rate, int *rbits, int *slot_bits,
			   int *page_bits)
{
	int			r;
	int			t;
	int			rr;
	int			s;
	int			p;

	if (capacity < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid capacity " INT64_FORMAT " for a quotient filter",
						capacity),
				 errdetail("The capacity is the number of distinct keys the filter is sized for; it must be at least 1.")));
	/* written so that NaN fails */
	if (!(fp_rate > 0.0 && fp_rate < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid false-positive rate %g for a quotient filter",
						fp_rate),
				 errdetail("The false-positive rate is the probability that a key never added is reported present; it must be greater than 0 and less than 1.")));

	r = qf_rbits_for_fp_rate(fp_rate);
	t = qfilter_slots_log2_for((double) capacity);

	/* the geometry at this rate, ignoring the 64-bit limit for now */
	for (rr = Min(r, QF_MAX_RBITS); rr >= QF_MIN_RBITS; rr--)
	{
		if (!qfilter_shape(rr + t, t, rbits, &s, &p))
			continue;
		if (p > QFILTER_MAX_PAGE_BITS)
		{
			if (rr < r)
				continue;		/* see below */
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("capacity " INT64_FORMAT " is too large for a qfilter value",
							capacity),
					 errdetail("At the false-positive rate %g the filter needs %d-bit remainders and 2^%d home slots, %d per area, so more than the at most %d areas of %d bytes a qfilter value holds.",
							   fp_rate, r, t, 1 << s, 1 << QFILTER_MAX_PAGE_BITS,
							   (int) QFILTER_AREA_BYTES),
					 errhint("Use a capacity of at most %.0f at this false-positive rate.",
							 floor(ldexp(QFILTER_MAX_LOAD, QFILTER_MAX_PAGE_BITS + s)))));
		}
		if (rr + t > 64)
			continue;
		if (rr < r)
		{
			/* the fingerprint would not fit the hash at the requested rate */
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("false-positive rate %g is too small for a quotient filter of capacity " INT64_FORMAT,
							fp_rate, capacity),
					 errdetail("The filter would need %d-bit remainders and 2^%d home slots: a %d-bit fingerprint, longer than the 64-bit key hash.",
							   r, t, r + t),
					 errhint("Use a false-positive rate of at least %.3g.",
							 QFILTER_MAX_LOAD * ldexp(1.0, -rr) * 1.005)));
		}
		*slot_bits = s;
		*page_bits = p;
		return;
	}
	/* even 1-bit remainders leave too many areas */
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("capacity " INT64_FORMAT " is too large for a qfilter value",
					capacity),
			 errdetail("It needs 2^%d home slots, more than the at most %d areas of %d bytes a qfilter value hold at any false-positive rate.",
					   t, 1 << QFILTER_MAX_PAGE_BITS, (int) QFILTER_AREA_BYTES)));
}

/*
 * A value with these header fields and zeroed areas, as many as page_bits
 * gives (the caller validated the geometry with qfilter_geometry_problem).
 */
QFilterData *
qfilter_alloc(uint32 version, Oid elemtype, uint32 seed, int rbits,
			  int slot_bits, int page_bits, uint32 area_bytes,
			  int64 capacity, double fp_rate, uint64 total)
{
	Size		size = qfilter_value_size(page_bits);
	QFilterData *qf = (QFilterData *) palloc0(size);

	SET_VARSIZE(qf, size);
	qf->version = version;
	qf->elemtype = elemtype;
	qf->seed = seed;
	qf->rbits = (uint8) rbits;
	qf->slot_bits = (uint8) slot_bits;
	qf->page_bits = (uint8) page_bits;
	qf->area_bytes = area_bytes;
	qf->capacity = capacity;
	qf->fp_rate = fp_rate;
	qf->total = total;
	return qf;
}

QFilterData *
qfilter_create_empty(int rbits, int slot_bits, int page_bits, uint32 seed,
					 Oid elemtype, int64 capacity, double fp_rate)
{
	char	   *problem;
	QFilterData *qf;
	QfGeom		g;
	uint32		npages;

	problem = qfilter_geometry_problem(QFILTER_VERSION, rbits, slot_bits,
									   page_bits,
									   QFILTER_AREA_BYTES);
	if (problem)
		elog(ERROR, "invalid quotient filter geometry: %s", problem);

	qf = qfilter_alloc(QFILTER_VERSION, elemtype, seed, rbits, slot_bits,
					   page_bits, QFILTER_AREA_BYTES, capacity, fp_rate, 0);

	qfilter_geom(qf, &g);
	npages = qfilter_npages(qf);
	for (uint32 i = 0; i < npages; i++)
		qf_area_init(&g, qfilter_area(qf, i));
	return qf;
}

/* A copy of qf's header for a value of another geometry (areas zero). */
static QFilterData *
qfilter_alloc_like(const QFilterData *like, int rbits, int slot_bits,
				   int page_bits)
{
	Size		size = qfilter_value_size(page_bits);
	QFilterData *qf = (QFilterData *) palloc0(size);

	memcpy(qf, like, QFILTER_HEADER_SIZE);
	SET_VARSIZE(qf, size);
	qf->version = QFILTER_VERSION;	/* a value of the earlier layout too */
	qf->rbits = (uint8) rbits;
	qf->slot_bits = (uint8) slot_bits;
	qf->page_bits = (uint8) page_bits;
	qf->total = 0;
	return qf;
}

/* ----------------------------------------------------------------
 *		Validation
 * ----------------------------------------------------------------
 */

void
qfilter_check_header(const QFilterData *qf)
{
	Size		size = VARSIZE(qf);
	char	   *problem;

	if (size < QFILTER_HEADER_SIZE)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The value has %zu bytes, fewer than its %zu-byte header.",
						   size, (Size) QFILTER_HEADER_SIZE)));
	if (qf->version != QFILTER_VERSION && qf->version != QFILTER_VERSION_LEGACY)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("Format version %u is not the supported version %d.",
						   qf->version, QFILTER_VERSION)));
	if (qf->flags != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("A reserved header field is not zero.")));
	problem = qfilter_geometry_problem(qf->version, qf->rbits, qf->slot_bits,
									   qf->page_bits, qf->area_bytes);
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail_internal("%s", problem)));
	if (size != qfilter_value_size(qf->page_bits))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The value has %zu bytes, but its %u areas need %zu.",
						   size, qfilter_npages(qf),
						   qfilter_value_size(qf->page_bits))));
	if (qf->capacity < 1 || !(qf->fp_rate > 0.0 && qf->fp_rate < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The capacity " INT64_FORMAT " must be at least 1 and the false-positive rate %g between 0 and 1.",
						   qf->capacity, qf->fp_rate)));

	/*
	 * A subnormal rate cannot be requested (qfilter_params needs 65-bit
	 * fingerprints for it), and text input cannot read one back (strtod
	 * reports it as out of range), so a value holding one could be stored
	 * but not dumped and restored.  Rejecting it here, where both inputs
	 * and every function check, keeps text and binary input equivalent.
	 */
	if (qf->fp_rate < DBL_MIN)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The false-positive rate %g is subnormal; it must be at least %g.",
						   qf->fp_rate, DBL_MIN)));
}

/* A copy of the header of area i (as qf.c reads it, with memcpy). */
static inline QfAreaHeader
qfilter_area_header(const QFilterData *qf, uint32 i)
{
	QfAreaHeader h;

	memcpy(&h, qfilter_area(qf, i), sizeof(h));
	return h;
}

/*
 * The sum over the areas' headers of their total counts (saturating), or
 * of their item counts.
 */
static uint64
qfilter_area_sum(const QFilterData *qf, bool totals)
{
	uint32		npages = qfilter_npages(qf);
	uint64		sum = 0;

	for (uint32 i = 0; i < npages; i++)
	{
		QfAreaHeader h = qfilter_area_header(qf, i);

		sum = totals ? qfilter_sat_add(sum, h.total_count) : sum + h.nitems;
	}
	return sum;
}

uint64
qfilter_sum_totals(const QFilterData *qf)
{
	return qfilter_area_sum(qf, true);
}

void
qfilter_check(const QFilterData *qf)
{
	QfGeom		g;
	uint32		npages;

	qfilter_check_header(qf);
	qfilter_geom(qf, &g);
	npages = qfilter_npages(qf);
	for (uint32 i = 0; i < npages; i++)
	{
		const char *area = qfilter_area(qf, i);
		const char *msg;

		CHECK_FOR_INTERRUPTS();
		if (!qf_area_check(&g, area, &msg))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("invalid quotient filter"),
					 errdetail("Area %u: %s.", i, msg)));
		for (Size j = g.area_bytes; j < qf->area_bytes; j++)
			if (area[j] != 0)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("invalid quotient filter"),
						 errdetail("Area %u has nonzero bytes after its last slot.",
								   i)));
	}
	if (qf->total != qfilter_sum_totals(qf))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The total count " UINT64_FORMAT " is not the sum " UINT64_FORMAT " of the counts in the areas.",
						   qf->total, qfilter_sum_totals(qf))));
}

static void pg_attribute_noreturn()
qfilter_corrupted(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("invalid quotient filter"),
			 errdetail("%s", what)));
}

/* ----------------------------------------------------------------
 *		Point operations
 * ----------------------------------------------------------------
 */

/*
 * Split a key hash for qf.  The widths come from the value's header; they
 * were validated by qfilter_check_header, but the split is where a bad
 * width would make an area index past the value's end, so it is checked
 * again here, for the cost of a few comparisons.
 */
static void
qfilter_split(const QFilterData *qf, uint64 h1, uint64 *page, uint32 *q,
			  uint64 *r)
{
	if (!qf_fingerprint_split(h1, qf->page_bits, qf->slot_bits, qf->rbits,
							  page, q, r) ||
		*page >= qfilter_npages(qf))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The fingerprint layout of %d area index, %d quotient and %d remainder bits is invalid.",
						   qf->page_bits, qf->slot_bits, qf->rbits)));
}

QfStatus
qfilter_insert_hash(QFilterData *qf, const QfGeom *g, uint64 h1, uint64 count,
					bool *added)
{
	uint64		page;
	uint32		q;
	uint64		r;
	char	   *area;
	QfAreaHeader before;
	QfAreaHeader after;
	QfStatus	st;

	qfilter_split(qf, h1, &page, &q, &r);
	area = qfilter_area(qf, page);
	memcpy(&before, area, sizeof(before));
	st = qf_insert(g, area, q, r, count);
	if (st == QF_INVALID)
		elog(ERROR, "quotient filter fingerprint out of range");
	memcpy(&after, area, sizeof(after));
	if (added)
		*added = after.nitems > before.nitems;
	if (st == QF_OK)
		qf->total = qfilter_sat_add(qf->total, count);
	return st;
}

uint64
qfilter_count_hash(const QFilterData *qf, const QfGeom *g, uint64 h1)
{
	uint64		page;
	uint32		q;
	uint64		r;

	qfilter_split(qf, h1, &page, &q, &r);
	return qf_count(g, qfilter_area(qf, page), q, r);
}

uint64
qfilter_remove_hash(QFilterData *qf, const QfGeom *g, uint64 h1, uint64 count)
{
	uint64		page;
	uint32		q;
	uint64		r;
	uint64		removed;

	qfilter_split(qf, h1, &page, &q, &r);
	removed = qf_remove(g, qfilter_area(qf, page), q, r, count);
	/* a saturated area total stays saturated: recompute rather than subtract */
	if (removed > 0)
		qf->total = qfilter_sum_totals(qf);
	return removed;
}

/* ----------------------------------------------------------------
 *		Rebuilding: fingerprint streams and the builder
 * ----------------------------------------------------------------
 */

/* The fingerprints of a filter in increasing order, left-aligned in 64 bits. */
typedef struct QfStream
{
	const QFilterData *qf;
	QfGeom		g;
	uint32		npages;
	uint32		page;
	QfIter		it;				/* points to g: the stream must not move */
	bool		valid;
	uint64		fp;
	uint64		count;
} QfStream;

static void
qfs_next(QfStream *s)
{
	uint32		q;
	uint64		r;
	uint64		c;

	while (s->page < s->npages)
	{
		if (qf_iter_next(&s->it, &q, &r, &c))
		{
			s->fp = qf_fingerprint_join(s->page, q, r, s->qf->page_bits,
										s->qf->slot_bits, s->qf->rbits);
			s->count = c;
			s->valid = true;
			return;
		}
		if (++s->page < s->npages)
			qf_iter_init(&s->it, &s->g, qfilter_area(s->qf, s->page));
	}
	s->valid = false;
}

static void
qfs_init(QfStream *s, const QFilterData *qf)
{
	s->qf = qf;
	qfilter_geom(qf, &s->g);
	s->npages = qfilter_npages(qf);
	s->page = 0;
	qf_iter_init(&s->it, &s->g, qfilter_area(qf, 0));
	qfs_next(s);
}

/*
 * Whether one area step of building out (adding, splitting or merging
 * areas) succeeded.  When an area overflowed, out is freed and the caller
 * returns NULL, to try a larger geometry; any other failure means the
 * input's fingerprints are out of order, which a valid filter rules out.
 */
static bool
qfilter_step_ok(QfStatus st, QFilterData *out)
{
	if (st == QF_FULL)
	{
		pfree(out);
		return false;
	}
	if (st != QF_OK)
		qfilter_corrupted("Its fingerprints are out of order.");
	return true;
}

/*
 * The union of the fingerprints of a and b (b may be NULL) in geometry
 * (rbits, slot_bits, page_bits), which must have their fingerprint size;
 * the header is copied from a.  NULL if an area overflows.
 */
static QFilterData *
qfilter_build(const QFilterData *a, const QFilterData *b, int rbits,
			  int slot_bits, int page_bits)
{
	QFilterData *out = qfilter_alloc_like(a, rbits, slot_bits, page_bits);
	QfGeom		g;
	QfStream	sa;
	QfStream	sb;
	QfBuilder	bld;
	int64		curpage = -1;
	uint32		npages = qfilter_npages(out);
	uint64		n = 0;

	Assert(qfilter_fp_bits(a) == rbits + slot_bits + page_bits);
	Assert(b == NULL || qfilter_fp_bits(b) == qfilter_fp_bits(a));
	qfilter_geom(out, &g);
	for (uint32 i = 0; i < npages; i++)
		qf_area_init(&g, qfilter_area(out, i));

	qfs_init(&sa, a);
	if (b)
		qfs_init(&sb, b);
	else
		sb.valid = false;

	while (sa.valid || sb.valid)
	{
		uint64		fp;
		uint64		count;
		uint64		page;
		uint32		q;
		uint64		r;
		QfStatus	st;

		if (sa.valid && (!sb.valid || sa.fp < sb.fp))
		{
			fp = sa.fp;
			count = sa.count;
			qfs_next(&sa);
		}
		else if (!sa.valid || sb.fp < sa.fp)
		{
			fp = sb.fp;
			count = sb.count;
			qfs_next(&sb);
		}
		else
		{
			fp = sa.fp;
			count = qfilter_sat_add(sa.count, sb.count);
			qfs_next(&sa);
			qfs_next(&sb);
		}

		if ((++n & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
		qf_fingerprint_split(fp, page_bits, slot_bits, rbits, &page, &q, &r);
		if ((int64) page != curpage)
		{
			if ((int64) page < curpage)
				qfilter_corrupted("Its fingerprints are out of order.");
			curpage = (int64) page;
			qf_builder_init(&bld, &g, qfilter_area(out, page));
		}
		st = qf_builder_add(&bld, q, r, count);
		if (!qfilter_step_ok(st, out))
			return NULL;
	}
	out->total = qfilter_sum_totals(out);
	return out;
}

/* One growth step with qf_split_area: NULL if an area overflows. */
static QFilterData *
qfilter_split_once(const QFilterData *qf)
{
	QFilterData *out = qfilter_alloc_like(qf, qf->rbits - 1, qf->slot_bits,
										  qf->page_bits + 1);
	QfGeom		g_old;
	QfGeom		g_new;
	uint32		npages = qfilter_npages(qf);

	qfilter_geom(qf, &g_old);
	qfilter_geom(out, &g_new);
	for (uint32 i = 0; i < npages; i++)
	{
		QfStatus	st;

		CHECK_FOR_INTERRUPTS();
		st = qf_split_area(&g_old, qfilter_area(qf, i), &g_new,
						   qfilter_area(out, 2 * (uint64) i),
						   qfilter_area(out, 2 * (uint64) i + 1));
		if (!qfilter_step_ok(st, out))
			return NULL;
	}
	out->total = qfilter_sum_totals(out);
	return out;
}

uint64
qfilter_items(const QFilterData *qf)
{
	return qfilter_area_sum(qf, false);
}

/*
 * The geometry of 2^t home slots for the fingerprints of like, or ERROR if
 * there is none: no remainder bit left, or more areas than a value holds.
 */
static void
qfilter_target_shape(const QFilterData *like, int t, const char *op,
					 int *rbits, int *slot_bits, int *page_bits)
{
	int			fp_bits = qfilter_fp_bits(like);

	if (!qfilter_shape(fp_bits, t, rbits, slot_bits, page_bits))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter is full"),
				 errdetail("%s needs more than 2^%d home slots, and its %d-bit fingerprints have no remainder bit left to trade for more.",
						   op, t - 1, fp_bits),
				 errhint("Build the filter with a larger capacity or a smaller false-positive rate, which give it longer fingerprints.")));
	if (*page_bits > QFILTER_MAX_PAGE_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter is too large for a qfilter value"),
				 errdetail("%s needs 2^%d home slots in %.0f areas of %d bytes; a qfilter value holds at most %d.",
						   op, t, ldexp(1.0, *page_bits),
						   (int) QFILTER_AREA_BYTES,
						   1 << QFILTER_MAX_PAGE_BITS),
				 errhint("Split the stream into several filters, for example by a hash of the key.")));
}

QFilterData *
qfilter_grow(const QFilterData *qf, int kmin)
{
	int			t0 = qf->page_bits + qf->slot_bits;
	int			t;

	Assert(kmin >= 1);
	t = Max(t0 + kmin, qfilter_slots_log2_for((double) qfilter_items(qf)));
	for (;; t++)
	{
		int			r;
		int			s;
		int			p;
		QFilterData *out;

		qfilter_target_shape(qf, t, "The filter", &r, &s, &p);
		if (t == t0 + 1 && s == qf->slot_bits && p == qf->page_bits + 1 &&
			qf->version == QFILTER_VERSION)
			out = qfilter_split_once(qf);
		else
			out = qfilter_build(qf, NULL, r, s, p);
		if (out)
		{
			elog(DEBUG2, "quotient filter grown from 2^%d to 2^%d home slots (%u areas)%s",
				 t0, t, qfilter_npages(out),
				 t == t0 + 1 && s == qf->slot_bits ? " by splitting" : "");
			return out;
		}
	}
}

/* Area-by-area merge of two filters of the same geometry; NULL if full. */
static QFilterData *
qfilter_merge_same(const QFilterData *a, const QFilterData *b)
{
	QFilterData *out = qfilter_alloc_like(a, a->rbits, a->slot_bits,
										  a->page_bits);
	QfGeom		g;
	uint32		npages = qfilter_npages(a);

	qfilter_geom(a, &g);
	for (uint32 i = 0; i < npages; i++)
	{
		QfStatus	st;

		CHECK_FOR_INTERRUPTS();
		st = qf_merge_areas(&g, qfilter_area(a, i), qfilter_area(b, i),
							qfilter_area(out, i));
		if (!qfilter_step_ok(st, out))
			return NULL;
	}
	out->total = qfilter_sum_totals(out);
	return out;
}

/* A key type for messages. */
static char *
qfilter_type_name(Oid typid)
{
	/* ss_elemtype_out: the OID of a type dropped since the value was built */
	return OidIsValid(typid) ? ss_elemtype_out(typid) : pstrdup("none");
}

QFilterData *
qfilter_union_values(const QFilterData *a, const QFilterData *b)
{
	QFilterData *out;
	int			t;

	if (a->seed != b->seed ||
		(OidIsValid(a->elemtype) && OidIsValid(b->elemtype) &&
		 a->elemtype != b->elemtype))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot combine quotient filters with different key types or seeds"),
				 errdetail("The first filter has key type %s and seed %u; the second has key type %s and seed %u.",
						   qfilter_type_name(a->elemtype), a->seed,
						   qfilter_type_name(b->elemtype), b->seed),
				 errhint("Build the filters from keys of the same type.")));
	if (qfilter_fp_bits(a) != qfilter_fp_bits(b))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot combine quotient filters with different fingerprint sizes"),
				 errdetail("The first filter has %d-bit fingerprints (%d area, %d quotient and %d remainder bits), the second %d-bit fingerprints (%d area, %d quotient and %d remainder bits).",
						   qfilter_fp_bits(a), a->page_bits, a->slot_bits,
						   a->rbits, qfilter_fp_bits(b), b->page_bits,
						   b->slot_bits, b->rbits),
				 errhint("Build the filters with the same capacity and false-positive rate.")));

	/*
	 * The result has the home slots of the larger input (the one grown
	 * further), or more if the union exceeds the maximum load or an area
	 * overflows; its geometry is the standard one for that many home
	 * slots (qfilter_shape).  Inputs already in that geometry merge area
	 * by area, others are laid out anew from their fingerprints.
	 */
	t = Max(a->page_bits + a->slot_bits, b->page_bits + b->slot_bits);
	t = Max(t, qfilter_slots_log2_for((double) Max(qfilter_items(a),
												   qfilter_items(b))));
	for (;;)
	{
		int			r;
		int			s;
		int			p;
		int			need;

		qfilter_target_shape(a, t, "The union", &r, &s, &p);
		if (a->rbits == r && a->slot_bits == s && a->page_bits == p &&
			b->rbits == r && b->slot_bits == s && b->page_bits == p &&
			a->version == QFILTER_VERSION && b->version == QFILTER_VERSION)
			out = qfilter_merge_same(a, b);
		else
			out = qfilter_build(a, b, r, s, p);
		if (out == NULL)
		{
			t++;
			continue;
		}
		need = qfilter_slots_log2_for((double) qfilter_items(out));
		if (need <= t)
			break;
		pfree(out);
		t = need;
	}

	/*
	 * The requested parameters are labels once the geometry is fixed; the
	 * larger ones make the result independent of the order of unions.
	 */
	out->capacity = Max(a->capacity, b->capacity);
	out->fp_rate = Max(a->fp_rate, b->fp_rate);
	out->elemtype = OidIsValid(a->elemtype) ? a->elemtype : b->elemtype;
	return out;
}

/* ----------------------------------------------------------------
 *		Byte order of the external forms
 * ----------------------------------------------------------------
 */

void
qfilter_areas_swap_external(char *areas, uint32 npages)
{
#ifdef WORDS_BIGENDIAN
	StaticAssertStmt((QFILTER_AREA_BYTES - QF_HEADER_SIZE) % 8 == 0,
					 "qfilter area words");
	for (uint32 i = 0; i < npages; i++)
	{
		char	   *area = areas + (Size) i * QFILTER_AREA_BYTES;
		QfAreaHeader h;

		memcpy(&h, area, sizeof(h));
		h.magic = pg_bswap32(h.magic);
		h.flags = pg_bswap16(h.flags);
		h.nslack = pg_bswap32(h.nslack);
		h.nitems = pg_bswap32(h.nitems);
		h.nused = pg_bswap32(h.nused);
		h.reserved = pg_bswap32(h.reserved);
		h.total_count = pg_bswap64(h.total_count);
		memcpy(area, &h, sizeof(h));
		for (Size off = QF_HEADER_SIZE; off < QFILTER_AREA_BYTES; off += 8)
		{
			uint64		w;

			memcpy(&w, area + off, 8);
			w = pg_bswap64(w);
			memcpy(area + off, &w, 8);
		}
	}
#else
	(void) areas;
	(void) npages;
#endif
}
