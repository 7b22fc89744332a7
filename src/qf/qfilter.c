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
 * filter's fingerprints y, read area by area in increasing (quotient,
 * remainder) order, are sorted (the area index is y / 2^rbits / nhome),
 * so any two filters with the same space M can be
 * merged into any geometry of that M by a two-way merge of their
 * fingerprint streams.  Faster special cases: a growth step that keeps a
 * power-of-two nhome splits every area in two (qf_split_area), and the
 * union of two filters of the target geometry merges area by area
 * (qf_merge_areas).
 *
 * Canonical results
 * -----------------
 * Whether a multiset of fingerprints fits rbits (the canonical shape of M
 * at rbits: no area overflows its last slack slot, and at most
 * load * M / 2^rbits distinct fingerprints, qfilter.h) depends on the multiset only,
 * and a subset fits wherever the whole fits.  Growth always looks for the
 * largest rbits below a bound that fits, laying out from the original
 * rather than step by step, so:
 *	 - an aggregate over a stream ends at the largest rbits (from the one
 *	   of the requested capacity on) that fits the final multiset: every
 *	   step it took was forced by a subset that did not fit;
 *	 - a union starts from the smaller of its inputs' rbits and takes the
 *	   largest rbits from there that fits the union; as each input's rbits
 *	   is at least the final one, that is again the largest that fits it.
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

StaticAssertDecl(QFILTER_HEADER_SIZE % sizeof(uint64) == 0 &&
				 QFILTER_HEADER_SIZE_V2 % sizeof(uint64) == 0,
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

static QFilterData *qfilter_build(const QFilterData *a, const QFilterData *b,
								  int rbits, uint32 nhome, uint32 npages);

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
	if (!(qf->version == QFILTER_VERSION_LEGACY ?
		  qf_geom_init_slots_legacy(g, qf->nhome, qf->rbits, QF_SLACK_FILL,
									qf->area_bytes) :
		  qf_geom_init_slots(g, qf->nhome, qf->rbits, QF_SLACK_FILL,
							 qf->area_bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("%u home slots with %d-bit remainders do not fit an area of %u bytes.",
						   qf->nhome, qf->rbits, qf->area_bytes)));
}

/* The remainder bits every version's header must have. */
static char *
qfilter_rbits_problem(int rbits)
{
	if (rbits < QF_MIN_RBITS || rbits > QF_MAX_RBITS)
		return psprintf("The remainder size %d is outside the supported range %d to %d bits.",
						rbits, QF_MIN_RBITS, QF_MAX_RBITS);
	return NULL;
}

/* The page-sized area of versions 1 and 2. */
static char *
qfilter_page_area_problem(uint32 area_bytes)
{
	if (area_bytes != QFILTER_AREA_BYTES)
		return psprintf("The area size %u is not the supported %d bytes.",
						area_bytes, (int) QFILTER_AREA_BYTES);
	return NULL;
}

/*
 * Why a geometry is unusable for a qfilter value, or NULL.  Checked before
 * anything is allocated from it.
 */
char *
qfilter_geometry_problem(int rbits, uint64 space_mult, int space_exp,
						 uint32 nhome, uint32 npages, uint32 area_bytes)
{
	QfGeom		g;
	char	   *problem = qfilter_rbits_problem(rbits);

	if (problem)
		return problem;
	if ((space_mult & 1) == 0 || !qf_space_valid(space_mult, space_exp))
		return psprintf("The fingerprint space " UINT64_FORMAT " * 2^%d is not an odd multiple of a power of two of at most 2^64.",
						space_mult, space_exp);
	if (nhome < QF_MIN_HOME ||
		!qf_geom_init_slots(&g, nhome, rbits, QF_SLACK_FILL,
							QFILTER_AREA_BYTES))
		return psprintf("%u home slots with %d-bit remainders do not fit an area of %d bytes.",
						nhome, rbits, (int) QFILTER_AREA_BYTES);
	if (npages < 1 || npages > QFILTER_MAX_PAGES)
		return psprintf("The number of areas %u is outside the supported range 1 to %u.",
						npages, QFILTER_MAX_PAGES);
	if (((uint128) nhome * npages) << rbits !=
		(uint128) space_mult << space_exp)
		return psprintf("%u areas of %u home slots with %d-bit remainders do not make the fingerprint space " UINT64_FORMAT " * 2^%d.",
						npages, nhome, rbits, space_mult, space_exp);
	/* trimmed to the home slots, or page-sized as written before */
	if (area_bytes != qfilter_area_stride(nhome, rbits) &&
		area_bytes != QFILTER_AREA_BYTES)
		return psprintf("The area size %u is neither the %u bytes of %u home slots with %d-bit remainders nor %d.",
						area_bytes, qfilter_area_stride(nhome, rbits), nhome,
						rbits, (int) QFILTER_AREA_BYTES);
	return NULL;
}

char *
qfilter_geometry_problem_v2(uint32 version, int rbits, int slot_bits,
							int page_bits, uint32 area_bytes)
{
	QfGeom		g;
	bool		(*geom_init) (QfGeom *, uint32, int, uint32, Size) =
		version == QFILTER_VERSION_LEGACY ? qf_geom_init_slots_legacy :
		qf_geom_init_slots;
	char	   *problem = qfilter_page_area_problem(area_bytes);

	if (!problem)
		problem = qfilter_rbits_problem(rbits);
	if (problem)
		return problem;
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

/*
 * Sizing: the paged quotient filters' (qf_sized_base), so that a qfilter
 * and a quotient_filter table made with the same capacity and fp_rate
 * have the same space.
 */
void
qfilter_params(int64 capacity, double fp_rate, int *rbits,
			   uint64 *space_mult, int *space_exp, uint32 *nhome,
			   uint32 *npages)
{
	int			r;
	double		load;
	uint64		pages;

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
	load = qf_sized_load(fp_rate);
	/* the areas at this rate, ignoring the 64-bit limit for now */
	for (int rr = Min(r, QF_MAX_RBITS); rr >= QF_MIN_RBITS; rr--)
	{
		QfGeom		g;

		if (!qf_sized_base(capacity, load, rr, QFILTER_AREA_BYTES,
						   QFILTER_MAX_PAGE_BITS, &pages, nhome))
		{
			if (rr < r || !qf_geom_init(&g, rr, QFILTER_AREA_BYTES))
				continue;		/* see below */
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("capacity " INT64_FORMAT " is too large for a qfilter value",
							capacity),
					 errdetail("At the false-positive rate %g the filter needs %d-bit remainders and %.0f home slots, %u per area, so more than the at most %u areas of %d bytes a qfilter value holds.",
							   fp_rate, r, ceil(capacity / load),
							   g.nhome, QFILTER_MAX_PAGES,
							   (int) QFILTER_AREA_BYTES),
					 errhint("Use a capacity of at most %.0f at this false-positive rate.",
							 floor(load * g.nhome * QFILTER_MAX_PAGES))));
		}
		qf_space_of(pages * *nhome, rr, space_mult, space_exp);
		if (!qf_space_valid(*space_mult, *space_exp))
			continue;
		if (rr < r)
		{
			/* the space would not fit the hash at the requested rate */
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("false-positive rate %g is too small for a quotient filter of capacity " INT64_FORMAT,
							fp_rate, capacity),
					 errdetail("The filter would need %d-bit remainders in more than 2^%d home slots: a fingerprint space larger than the 64-bit key hash.",
							   r, 64 - r),
					 errhint("Use a false-positive rate of at least %.3g.",
							 QF_MAX_LOAD * ldexp(1.0, -rr) * 1.005)));
		}
		*rbits = r;
		*npages = (uint32) pages;
		return;
	}
	/* even 1-bit remainders leave too many areas */
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("capacity " INT64_FORMAT " is too large for a qfilter value",
					capacity),
			 errdetail("It needs %.0f home slots, more than the at most %u areas of %d bytes a qfilter value hold at any false-positive rate.",
					   ceil(capacity / load), QFILTER_MAX_PAGES,
					   (int) QFILTER_AREA_BYTES)));
}

/*
 * A value with these header fields and zeroed areas (the caller validated
 * the geometry with qfilter_geometry_problem).
 */
QFilterData *
qfilter_alloc(Oid elemtype, uint32 seed, int rbits, uint64 space_mult,
			  int space_exp, uint32 nhome, uint32 npages, uint32 area_bytes,
			  int64 capacity, double fp_rate, uint64 total)
{
	Size		size = qfilter_value_size(npages, area_bytes);
	QFilterData *qf = (QFilterData *) palloc0(size);

	SET_VARSIZE(qf, size);
	qf->version = QFILTER_VERSION;
	qf->elemtype = elemtype;
	qf->seed = seed;
	qf->rbits = (uint8) rbits;
	qf->space_exp = (uint8) space_exp;
	qf->area_bytes = area_bytes;
	qf->capacity = capacity;
	qf->fp_rate = fp_rate;
	qf->total = total;
	qf->space_mult = space_mult;
	qf->nhome = nhome;
	qf->npages = npages;
	return qf;
}

static void
qfilter_init_areas(QFilterData *qf)
{
	QfGeom		g;

	qfilter_geom(qf, &g);
	for (uint32 i = 0; i < qf->npages; i++)
		qf_area_init(&g, qfilter_area(qf, i));
}

QFilterData *
qfilter_create_empty(int64 capacity, double fp_rate, uint32 seed,
					 Oid elemtype)
{
	int			rbits;
	uint64		mult;
	int			exp;
	uint32		nhome;
	uint32		npages;
	char	   *problem;
	QFilterData *qf;

	qfilter_params(capacity, fp_rate, &rbits, &mult, &exp, &nhome, &npages);
	problem = qfilter_geometry_problem(rbits, mult, exp, nhome, npages,
									   qfilter_area_stride(nhome, rbits));
	if (problem)
		elog(ERROR, "invalid quotient filter geometry: %s", problem);
	qf = qfilter_alloc(elemtype, seed, rbits, mult, exp, nhome, npages,
					   qfilter_area_stride(nhome, rbits), capacity, fp_rate,
					   0);
	qfilter_init_areas(qf);
	return qf;
}

/*
 * A copy of qf's header for a value of another shape, its areas trimmed
 * (and zero).
 */
static QFilterData *
qfilter_alloc_like(const QFilterData *like, int rbits, uint32 nhome,
				   uint32 npages)
{
	QFilterData *qf = qfilter_alloc(like->elemtype, like->seed, rbits,
									like->space_mult, like->space_exp,
									nhome, npages,
									qfilter_area_stride(nhome, rbits),
									like->capacity, like->fp_rate, 0);

	return qf;
}

/* ----------------------------------------------------------------
 *		Validation
 * ----------------------------------------------------------------
 */

/* ERROR unless the requested parameters a header keeps are valid. */
static void
qfilter_check_labels(int64 capacity, double fp_rate)
{
	if (capacity < 1 || !(fp_rate > 0.0 && fp_rate < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The capacity " INT64_FORMAT " must be at least 1 and the false-positive rate %g between 0 and 1.",
						   capacity, fp_rate)));

	/*
	 * A subnormal rate cannot be requested (qfilter_params needs more than
	 * a 64-bit space for it), and text input cannot read one back (strtod
	 * reports it as out of range), so a value holding one could be stored
	 * but not dumped and restored.  Rejecting it here, where both inputs
	 * and every function check, keeps text and binary input equivalent.
	 */
	if (fp_rate < DBL_MIN)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The false-positive rate %g is subnormal; it must be at least %g.",
						   fp_rate, DBL_MIN)));
}

static void
pg_attribute_noreturn()
version_error(uint32 version)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("invalid quotient filter"),
			 errdetail("Format version %u is not the supported version %d.",
					   version, QFILTER_VERSION)));
}

static void
check_header_size(Size size, Size header_size)
{
	if (size < header_size)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The value has %zu bytes, fewer than its %zu-byte header.",
						   size, header_size)));
}

/*
 * The checks of a header of any version after its version: reserved
 * fields zero, no geometry problem, the size its nareas areas need, valid
 * labels.
 */
static void
check_header_fields(bool reserved_zero, const char *problem, Size size,
					Size need, uint32 nareas, int64 capacity, double fp_rate)
{
	if (!reserved_zero)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("A reserved header field is not zero.")));
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail_internal("%s", problem)));
	if (size != need)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("The value has %zu bytes, but its %u areas need %zu.",
						   size, nareas, need)));
	qfilter_check_labels(capacity, fp_rate);
}

void
qfilter_check_header(const QFilterData *qf)
{
	Size		size = VARSIZE(qf);
	char	   *problem;

	check_header_size(size, QFILTER_HEADER_SIZE);
	if (qf->version != QFILTER_VERSION)
		version_error(qf->version);
	problem = qfilter_geometry_problem(qf->rbits, qf->space_mult,
									   qf->space_exp, qf->nhome, qf->npages,
									   qf->area_bytes);
	check_header_fields(qf->flags == 0 && qf->reserved == 0, problem, size,
						problem ? 0 :
						qfilter_value_size(qf->npages, qf->area_bytes),
						qf->npages, qf->capacity, qf->fp_rate);
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

/* The areas, the padding and the total of a value whose header is valid. */
static void
qfilter_check_areas(const QFilterData *qf)
{
	QfGeom		g;
	uint32		npages;

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

void
qfilter_check(const QFilterData *qf)
{
	qfilter_check_header(qf);
	qfilter_check_areas(qf);
}

QFilterData *
qfilter_trim(QFilterData *qf)
{
	QFilterData *out;

	if (qf->version == QFILTER_VERSION &&
		qf->area_bytes == qfilter_area_stride(qf->nhome, qf->rbits))
		return qf;
	out = qfilter_build(qf, NULL, qf->rbits, qf->nhome, qf->npages);
	if (out == NULL)
		out = qfilter_grow(qf, 1);
	return out;
}

/*
 * Versions 1 and 2: their areas (of the earlier layout in version 1) laid
 * out anew in trimmed areas, in the space 2^fp_bits of their top-bit
 * fingerprints, whose canonical shape at their rbits is their power-of-two
 * areas.
 */
QFilterData *
qfilter_upgrade(const QFilterDataV2 *old)
{
	Size		size = VARSIZE(old);
	char	   *problem;
	QFilterData *qf;
	QFilterData *out;
	int			fp_bits;

	check_header_size(size, QFILTER_HEADER_SIZE_V2);
	if (old->version != QFILTER_VERSION_V2 &&
		old->version != QFILTER_VERSION_LEGACY)
		version_error(old->version);
	problem = qfilter_geometry_problem_v2(old->version, old->rbits,
										  old->slot_bits, old->page_bits,
										  old->area_bytes);
	/* (page_bits is checked by the geometry before it shifts) */
	check_header_fields(old->flags == 0, problem, size,
						problem ? 0 : QFILTER_HEADER_SIZE_V2 +
						((Size) QFILTER_AREA_BYTES << old->page_bits),
						problem ? 0 : 1U << old->page_bits,
						old->capacity, old->fp_rate);

	fp_bits = old->page_bits + old->slot_bits + old->rbits;
	/* the areas as they are (page-sized), checked, then trimmed */
	qf = qfilter_alloc(old->elemtype, old->seed, old->rbits, 1, fp_bits,
					   1U << old->slot_bits, 1U << old->page_bits,
					   QFILTER_AREA_BYTES, old->capacity, old->fp_rate,
					   old->total);
	memcpy(qf->areas, old->areas, size - QFILTER_HEADER_SIZE_V2);
	/* version 1's areas are read by the earlier layout's geometry */
	if (old->version == QFILTER_VERSION_LEGACY)
		qf->version = QFILTER_VERSION_LEGACY;
	qfilter_check_areas(qf);
	out = qfilter_trim(qf);
	if (out != qf)
		pfree(qf);
	return out;
}

QFilterData *
qfilter_current(struct varlena *v)
{
	const QFilterDataV2 *old = (const QFilterDataV2 *) v;

	if (VARSIZE(v) >= offsetof(QFilterDataV2, elemtype) &&
		(old->version == QFILTER_VERSION_V2 ||
		 old->version == QFILTER_VERSION_LEGACY))
		return qfilter_upgrade(old);
	return (QFilterData *) v;
}

QFilterData *
qfilter_detoast(Datum d)
{
	return qfilter_current(PG_DETOAST_DATUM(d));
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
 * Split a key hash for qf.  The shape comes from the value's header; it
 * was validated by qfilter_check_header, but the split is where a bad
 * shape would make an area index past the value's end, so it is checked
 * again here, for the cost of a comparison.
 */
static void
qfilter_split(const QFilterData *qf, uint64 h1, uint64 *page, uint32 *q,
			  uint64 *r)
{
	qf_space_split(qf_space_y(h1, qf->space_mult, qf->space_exp), qf->rbits,
				   qf->nhome, page, q, r);
	if (*page >= qfilter_npages(qf))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail("%u areas of %u home slots with %d-bit remainders do not cover the fingerprint space.",
						   qf->npages, qf->nhome, qf->rbits)));
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

/* The fingerprints y of a filter in increasing order. */
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
			s->fp = qf_space_join(s->page, q, r, s->qf->rbits, s->qf->nhome);
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
 * The union of the fingerprints of a and b (b may be NULL) in the shape
 * (rbits, nhome, npages) of their space; the header is copied from a.
 * NULL if an area overflows.
 */
static QFilterData *
qfilter_build(const QFilterData *a, const QFilterData *b, int rbits,
			  uint32 nhome, uint32 npages)
{
	QFilterData *out = qfilter_alloc_like(a, rbits, nhome, npages);
	QfGeom		g;
	QfStream	sa;
	QfStream	sb;
	QfBuilder	bld;
	int64		curpage = -1;
	uint64		n = 0;

	Assert(b == NULL || (b->space_mult == a->space_mult &&
						 b->space_exp == a->space_exp));
	qfilter_geom(out, &g);
	qfilter_init_areas(out);

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
		qf_space_split(fp, rbits, nhome, &page, &q, &r);
		if ((int64) page != curpage)
		{
			if ((int64) page < curpage || page >= npages)
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
	QFilterData *out = qfilter_alloc_like(qf, qf->rbits - 1, qf->nhome,
										  2 * qf->npages);
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
 * The shape at rbits of the space of like, or ERROR if there is none: no
 * remainder bit left, or more areas than a value holds.
 */
static void
qfilter_target_shape(const QFilterData *like, int rbits, const char *op,
					 uint32 *nhome, uint32 *npages)
{
	uint64		np;

	if (rbits < QF_MIN_RBITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter is full"),
				 errdetail("%s needs more than %.0f home slots, and its %d-bit fingerprints have no remainder bit left to trade for more.",
						   op, ldexp((double) like->space_mult,
									 like->space_exp - QF_MIN_RBITS),
						   qfilter_fp_bits(like)),
				 errhint("Build the filter with a larger capacity or a smaller false-positive rate, which give it longer fingerprints.")));
	if (!qf_space_shape(like->space_mult, like->space_exp, rbits,
						QFILTER_AREA_BYTES, QFILTER_MAX_PAGES, nhome, &np))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter is too large for a qfilter value"),
				 errdetail("%s needs %.0f home slots in more areas of %d bytes than the at most %u a qfilter value holds.",
						   op, ldexp((double) like->space_mult,
									 like->space_exp - rbits),
						   (int) QFILTER_AREA_BYTES, QFILTER_MAX_PAGES),
				 errhint("Split the stream into several filters, for example by a hash of the key.")));
	*npages = (uint32) np;
}

/* The largest rbits <= r at which n fingerprints fit the load of qf's space. */
static int
qfilter_rbits_for(const QFilterData *qf, double n, int r)
{
	double		load = qf_sized_load(qf->fp_rate);

	while (r >= QF_MIN_RBITS &&
		   ldexp(load * (double) qf->space_mult, qf->space_exp - r) < n)
		r--;
	return r;
}

QFilterData *
qfilter_grow(const QFilterData *qf, int kmin)
{
	int			r0 = qf->rbits;
	int			r;

	Assert(kmin >= 1);
	r = qfilter_rbits_for(qf, (double) qfilter_items(qf), r0 - kmin);
	for (;; r--)
	{
		uint32		nhome;
		uint32		npages;
		QFilterData *out;
		bool		split;

		qfilter_target_shape(qf, r, "The filter", &nhome, &npages);
		split = r == r0 - 1 && nhome == qf->nhome &&
			npages == 2 * qf->npages && (nhome & (nhome - 1)) == 0 &&
			qf->version == QFILTER_VERSION;
		out = split ? qfilter_split_once(qf) :
			qfilter_build(qf, NULL, r, nhome, npages);
		if (out)
		{
			elog(DEBUG2, "quotient filter grown from %.0f to %.0f home slots (%u areas)%s",
				 qfilter_home_slots(qf), qfilter_home_slots(out),
				 qfilter_npages(out), split ? " by splitting" : "");
			return out;
		}
	}
}

/*
 * Whether a value is in the shape a value written at (rbits, nhome,
 * npages) has: the same areas, trimmed.
 */
static bool
qfilter_has_shape(const QFilterData *qf, int rbits, uint32 nhome,
				  uint32 npages)
{
	return qf->version == QFILTER_VERSION && qf->rbits == rbits &&
		qf->nhome == nhome && qf->npages == npages &&
		qf->area_bytes == qfilter_area_stride(nhome, rbits);
}

/* Area-by-area merge of two filters of the same geometry; NULL if full. */
static QFilterData *
qfilter_merge_same(const QFilterData *a, const QFilterData *b)
{
	QFilterData *out = qfilter_alloc_like(a, a->rbits, a->nhome, a->npages);
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
	int			r;

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
	if (a->space_mult != b->space_mult || a->space_exp != b->space_exp)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot combine quotient filters with different fingerprint sizes"),
				 errdetail("The first filter has fingerprints below " UINT64_FORMAT " * 2^%d (%d remainder bits), the second below " UINT64_FORMAT " * 2^%d (%d remainder bits).",
						   a->space_mult, a->space_exp, a->rbits,
						   b->space_mult, b->space_exp, b->rbits),
				 errhint("Build the filters with the same capacity and false-positive rate.")));

	/*
	 * The result has the remainder bits of the input grown further, or
	 * fewer if the union exceeds the maximum load or an area overflows; its
	 * shape is the canonical one (qf_space_shape).  Inputs already in that
	 * shape merge area by area, others are laid out anew from their
	 * fingerprints.
	 */
	r = qfilter_rbits_for(a, (double) Max(qfilter_items(a), qfilter_items(b)),
						  Min(a->rbits, b->rbits));
	for (;;)
	{
		uint32		nhome;
		uint32		npages;
		int			need;

		qfilter_target_shape(a, r, "The union", &nhome, &npages);
		if (qfilter_has_shape(a, r, nhome, npages) &&
			qfilter_has_shape(b, r, nhome, npages))
			out = qfilter_merge_same(a, b);
		else
			out = qfilter_build(a, b, r, nhome, npages);
		if (out == NULL)
		{
			r--;
			continue;
		}
		need = qfilter_rbits_for(a, (double) qfilter_items(out), r);
		if (need == r)
			break;
		pfree(out);
		r = need;
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
qfilter_areas_swap_external(char *areas, uint32 npages, uint32 area_bytes)
{
#ifdef WORDS_BIGENDIAN
	/* strides are multiples of 24 (qfilter_area_stride) */
	for (uint32 i = 0; i < npages; i++)
	{
		char	   *area = areas + (Size) i * area_bytes;
		QfAreaHeader h;

		memcpy(&h, area, sizeof(h));
		h.magic = pg_bswap32(h.magic);
		h.flags = pg_bswap16(h.flags);
		h.nslack = pg_bswap32(h.nslack);
		h.nitems = pg_bswap32(h.nitems);
		h.nused = pg_bswap32(h.nused);
		h.nhome = pg_bswap32(h.nhome);
		h.total_count = pg_bswap64(h.total_count);
		memcpy(area, &h, sizeof(h));
		for (Size off = QF_HEADER_SIZE; off + 8 <= area_bytes; off += 8)
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
	(void) area_bytes;
#endif
}
