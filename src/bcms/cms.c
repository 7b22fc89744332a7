/*-------------------------------------------------------------------------
 *
 * cms.c
 *	  The in-memory `cms` type: construction, validation, merging, text and
 *	  binary I/O, cms_union() and cms_info().  The aggregates and
 *	  cms_estimate() are in cms_agg.c.
 *
 * A cms value is a CmsData varlena (cms.h): a fixed header followed by
 * npages logical pages of depth x cols_per_page counters, exactly the data
 * areas of the sketch pages of a `bcms` relation with the same geometry.
 *
 * Text form (one line, fields in this order, separated by single spaces):
 *
 *	 version=1 seed=<uint32> epsilon=<float8> delta=<float8> depth=<n>
 *	 cols_per_page=<n> pages=<n> total=<int64> [type="<type name>"]
 *	 counters=<data>
 *
 * type is the key type as printed by format_type (schema-qualified where
 * needed, or the OID if the type was dropped), with " doubled inside the
 * quotes; it is absent when the sketch has no key type.  The floats are
 * printed in shortest exact form, so they read back bit for bit.
 *
 * <data> lists the counters in storage order.  Each counter is written in
 * base 32, most significant digit first, with the last digit taken from
 * "0123456789abcdefghijklmnopqrstuv" and every earlier digit from
 * "ABCDEFGHIJKLMNOPQRSTUVWXYZwxyz-_", so numbers need no separator and
 * counters below 32 take one character.  Large sketches are mostly zeros:
 * a run of three or more zero counters is written as '.' followed by the
 * run length in the same base-32 form.  A counter never takes more than 13
 * characters, which is what bounds the size of a cms value (see cms.h).
 *
 * Binary form (cms_send/cms_recv), in network byte order: int32 version,
 * int32 length of the key type name (-1 if none) and the name in the
 * client encoding, uint32 seed, depth, cols_per_page, npages, float8
 * epsilon, delta, int64 total, then the int64 counters in storage order.
 * The key type travels by name rather than by OID so that values can be
 * moved between databases where a user-defined key type has another OID.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "funcapi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "cms.h"
#include "ss_queryutil.h"
#include "ss_textio.h"

PG_FUNCTION_INFO_V1(cms_in);
PG_FUNCTION_INFO_V1(cms_out);
PG_FUNCTION_INFO_V1(cms_recv);
PG_FUNCTION_INFO_V1(cms_send);
PG_FUNCTION_INFO_V1(cms_union);
PG_FUNCTION_INFO_V1(cms_info);

/* The counters must start 8-byte aligned for bcms_merge() and for us. */
StaticAssertDecl(offsetof(CmsData, counters) % sizeof(int64) == 0,
				 "cms counters are not aligned");

/* The worst-case text form must fit the reserve (see cms.h). */
StaticAssertDecl((PG_UINT64_MAX >> (5 * (CMS_TEXT_MAX_COUNTER_CHARS - 1))) < 32,
				 "CMS_TEXT_MAX_COUNTER_CHARS too small for a 64-bit counter");

static const char cms_low_digits[] = "0123456789abcdefghijklmnopqrstuv";
static const char cms_high_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZwxyz-_";

#define CMS_ZERO_RUN		'.'
#define CMS_MIN_ZERO_RUN	3	/* shorter runs are cheaper as plain '0's */

/* ----------------------------------------------------------------
 *		Geometry, construction and validation
 * ----------------------------------------------------------------
 */

uint32
cms_max_npages(uint32 depth)
{
	uint64		per_page;
	uint64		npages;

	Assert(depth >= 1 && depth <= CMS_MAX_DEPTH);
	per_page = (uint64) depth * (CMS_COUNTERS_PER_PAGE / depth);
	npages = CMS_MAX_COUNTERS / per_page;
	return (uint32) Min(npages, (uint64) CMS_MAX_PAGES);
}

uint64
cms_value_size(const CmsGeometry *g)
{
	/* at most 2^32 * 32 * 1019 counters: no uint64 overflow */
	return CMS_HEADER_SIZE +
		(uint64) g->npages * g->depth * g->cols_per_page * sizeof(int64);
}

/*
 * Why a geometry is unusable for a cms value, or NULL if it is fine.  The
 * checks are ordered so that later ones may rely on earlier ones.
 */
static char *
cms_geometry_problem(uint32 depth, uint32 cols_per_page, uint32 npages)
{
	if (depth < 1 || depth > CMS_MAX_DEPTH)
		return psprintf("Depth %u is outside the supported range 1 to %d.",
						depth, CMS_MAX_DEPTH);
	if (cols_per_page != CMS_COUNTERS_PER_PAGE / depth)
		return psprintf("cols_per_page %u does not match depth %u, which requires %u.",
						cols_per_page, depth,
						(uint32) (CMS_COUNTERS_PER_PAGE / depth));
	if (npages < 1 || npages > cms_max_npages(depth))
		return psprintf("The page count %u is outside the supported range 1 to %u for depth %u.",
						npages, cms_max_npages(depth), depth);
	return NULL;
}

static inline bool
cms_fraction_valid(double x)
{
	/* written so that NaN fails */
	return x > 0.0 && x < 1.0;
}

void
cms_geometry_for_bounds(double epsilon, double delta, CmsGeometry *g)
{
	double		depth;
	double		width;
	uint64		max_width;
	uint32		idepth;

	if (!cms_fraction_valid(epsilon))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid epsilon %g for a count-min sketch", epsilon),
				 errdetail("epsilon is the error bound as a fraction of the total count; it must be greater than 0 and less than 1.")));
	if (!cms_fraction_valid(delta))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid delta %g for a count-min sketch", delta),
				 errdetail("delta is the probability that an estimate exceeds the error bound; it must be greater than 0 and less than 1.")));

	/* compute in double first: tiny values would overflow the integers */
	depth = ceil(log(1.0 / delta));
	if (depth > CMS_MAX_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("delta %g is too small for a count-min sketch", delta),
				 errdetail("It needs %.0f rows of counters; at most %d are supported.",
						   depth, CMS_MAX_DEPTH),
				 errhint("Use a delta of at least %.3g.",
						 exp(-(double) CMS_MAX_DEPTH) * 1.01)));
	idepth = cms_depth_for_delta(delta);

	width = ceil(M_E / epsilon);
	max_width = (uint64) cms_max_npages(idepth) *
		(CMS_COUNTERS_PER_PAGE / idepth);
	if (width > (double) max_width)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epsilon %g is too small for a cms value", epsilon),
				 errdetail("The sketch would need %.4g counters per row at depth %u; a cms value holds at most " UINT64_FORMAT " per row at that depth.",
						   width, idepth, max_width),
				 errhint("Use an epsilon of at least %.3g, or a bcms table, which has no such limit.",
						 M_E / (double) max_width * 1.01)));

	cms_geometry_init(g, cms_width_for_epsilon(epsilon), idepth);
	Assert(cms_geometry_problem(g->depth, g->cols_per_page, g->npages) == NULL);
}

/*
 * A zeroed value of geometry g with these header fields (every way a value
 * is made: empty, or read from its text or binary form).
 */
static CmsData *
cms_alloc(const CmsGeometry *g, uint32 seed, Oid elemtype, double epsilon,
		  double delta, int64 total)
{
	uint64		size = cms_value_size(g);
	CmsData    *cms;

	Assert(size <= MaxAllocSize);
	cms = (CmsData *) palloc0((Size) size);
	SET_VARSIZE(cms, size);
	cms->version = CMS_VERSION;
	cms->elemtype = elemtype;
	cms->seed = seed;
	cms->depth = g->depth;
	cms->cols_per_page = g->cols_per_page;
	cms->npages = g->npages;
	cms->epsilon = epsilon;
	cms->delta = delta;
	cms->total = total;
	return cms;
}

/* ERROR if a value read or received has no valid geometry. */
static void
cms_check_geometry(uint32 depth, uint32 cols_per_page, uint32 npages)
{
	char	   *problem = cms_geometry_problem(depth, cols_per_page, npages);

	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail_internal("%s", problem)));
}

CmsData *
cms_create_empty(const CmsGeometry *g, uint32 seed, Oid elemtype,
				 double epsilon, double delta)
{
	char	   *problem;

	if (g->depth >= 1 && g->depth <= CMS_MAX_DEPTH &&
		g->cols_per_page == CMS_COUNTERS_PER_PAGE / g->depth &&
		g->npages > cms_max_npages(g->depth))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("count-min sketch of %u pages is too large for a cms value",
						g->npages),
				 errdetail("A cms value of depth %u holds at most %u pages.",
						   g->depth, cms_max_npages(g->depth))));
	problem = cms_geometry_problem(g->depth, g->cols_per_page, g->npages);
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid count-min sketch geometry"),
				 errdetail_internal("%s", problem)));
	if (!cms_fraction_valid(epsilon) || !cms_fraction_valid(delta))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid count-min sketch error bounds epsilon %g and delta %g",
						epsilon, delta),
				 errdetail("Both must be greater than 0 and less than 1.")));

	return cms_alloc(g, seed, elemtype, epsilon, delta, 0);
}

void
cms_check_header(const CmsData *cms)
{
	Size		size = VARSIZE(cms);
	CmsGeometry g;

	if (size < CMS_HEADER_SIZE)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail("The value has %zu bytes, fewer than its %zu-byte header.",
						   size, (Size) CMS_HEADER_SIZE)));
	if (cms->version != CMS_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail("Format version %u is not the supported version %d.",
						   cms->version, CMS_VERSION)));
	if (cms->unused != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail("A reserved header field is not zero.")));
	cms_check_geometry(cms->depth, cms->cols_per_page, cms->npages);
	cms_get_geometry(cms, &g);
	if (size != cms_value_size(&g))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail("The value has %zu bytes, but its geometry needs " UINT64_FORMAT ".",
						   size, cms_value_size(&g))));
	if (!cms_fraction_valid(cms->epsilon) || !cms_fraction_valid(cms->delta))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail("epsilon %g and delta %g must be greater than 0 and less than 1.",
						   cms->epsilon, cms->delta)));

	/*
	 * Subnormal bounds cannot be requested (the sketch would be far too
	 * large), and text input cannot read one back (strtod reports it as out
	 * of range), so a value holding one could be stored but not dumped and
	 * restored.  Rejecting them here, where both inputs and every function
	 * check, keeps text and binary input equivalent.
	 */
	if (cms->epsilon < DBL_MIN || cms->delta < DBL_MIN)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail("epsilon %g or delta %g is subnormal; both must be at least %g.",
						   cms->epsilon, cms->delta, DBL_MIN)));
	if (cms->total < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid count-min sketch"),
				 errdetail("The total count " INT64_FORMAT " is negative.",
						   cms->total)));
}

void
cms_check(const CmsData *cms)
{
	uint32		depth;
	uint32		cols;
	uint64		rowsum[CMS_MAX_DEPTH] = {0};
	bool		check_rows;
	const int64 *c;

	cms_check_header(cms);
	depth = cms->depth;
	cols = cms->cols_per_page;

	/*
	 * Once total has saturated, the true row sums may exceed it; until then
	 * every row sums to at most total (exactly total for plain updates).
	 * Counters are <= total < 2^63, so the uint64 sums cannot overflow
	 * before they are caught exceeding total.
	 */
	check_rows = cms->total < PG_INT64_MAX;
	c = cms->counters;
	for (uint32 page = 0; page < cms->npages; page++)
	{
		CHECK_FOR_INTERRUPTS();
		for (uint32 row = 0; row < depth; row++)
		{
			for (uint32 col = 0; col < cols; col++, c++)
			{
				if (*c < 0 || *c > cms->total)
					ereport(ERROR,
							(errcode(ERRCODE_DATA_CORRUPTED),
							 errmsg("invalid count-min sketch"),
							 errdetail("Counter %u of row %u of page %u is " INT64_FORMAT ", outside the range 0 to the total count " INT64_FORMAT ".",
									   col, row, page, *c, cms->total)));
				if (check_rows)
				{
					rowsum[row] += (uint64) *c;
					if (rowsum[row] > (uint64) cms->total)
						ereport(ERROR,
								(errcode(ERRCODE_DATA_CORRUPTED),
								 errmsg("invalid count-min sketch"),
								 errdetail("The counters of row %u add up to more than the total count " INT64_FORMAT ".",
										   row, cms->total)));
				}
			}
		}
	}
}

void
cms_add_hash(CmsData *cms, SSHash h, int64 weight)
{
	CmsGeometry g;

	Assert(weight >= 0);
	cms_get_geometry(cms, &g);
	cms_page_add(cms_page_counters_ptr(cms, cms_page_of(&g, h)), &g, h,
				 weight, false);
	cms->total = cms_saturating_add(cms->total, weight);
}

int64
cms_estimate_hash(const CmsData *cms, SSHash h)
{
	CmsGeometry g;
	uint32		page;

	cms_get_geometry(cms, &g);
	page = cms_page_of(&g, h);
	return cms_page_estimate(cms->counters + (Size) page * cms_page_counters(&g),
							 &g, h);
}

/* A key type for messages. */
static char *
cms_type_name(Oid typid)
{
	/* ss_elemtype_out: the OID of a type dropped since the value was built */
	return OidIsValid(typid) ? ss_elemtype_out(typid) : pstrdup("none");
}

void
cms_merge_into(CmsData *dst, const CmsData *src)
{
	Size		n;

	if (dst->seed != src->seed ||
		dst->depth != src->depth ||
		dst->cols_per_page != src->cols_per_page ||
		dst->npages != src->npages ||
		(OidIsValid(dst->elemtype) && OidIsValid(src->elemtype) &&
		 dst->elemtype != src->elemtype))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot combine count-min sketches with different parameters"),
				 errdetail("The first sketch has seed %u, depth %u, cols_per_page %u, page count %u and key type %s; the second has seed %u, depth %u, cols_per_page %u, page count %u and key type %s.",
						   dst->seed, dst->depth, dst->cols_per_page,
						   dst->npages, cms_type_name(dst->elemtype),
						   src->seed, src->depth, src->cols_per_page,
						   src->npages, cms_type_name(src->elemtype)),
				 errhint("Build the sketches with the same epsilon, delta and key type.")));

	n = (Size) dst->npages * dst->depth * dst->cols_per_page;
	for (Size i = 0; i < n; i++)
		dst->counters[i] = cms_saturating_add(dst->counters[i],
											  src->counters[i]);
	dst->total = cms_saturating_add(dst->total, src->total);

	/*
	 * The geometry is identical, so the requested bounds are only labels;
	 * keeping the weaker ones makes the result independent of the order of
	 * the merges, which parallel aggregation does not fix.
	 */
	dst->epsilon = Max(dst->epsilon, src->epsilon);
	dst->delta = Max(dst->delta, src->delta);
	if (!OidIsValid(dst->elemtype))
		dst->elemtype = src->elemtype;
}

/* ----------------------------------------------------------------
 *		Text I/O
 * ----------------------------------------------------------------
 */

/* Write v in base 32 to dst (if not NULL); return the number of chars. */
static Size
cms_encode_number(uint64 v, char *dst)
{
	uint8		digits[CMS_TEXT_MAX_COUNTER_CHARS];
	int			n = 0;

	do
	{
		digits[n++] = v & 31;
		v >>= 5;
	} while (v != 0);

	if (dst)
	{
		for (int i = n - 1; i > 0; i--)
			*dst++ = cms_high_digits[digits[i]];
		*dst = cms_low_digits[digits[0]];
	}
	return n;
}

static Size
cms_encode_zero_run(uint64 run, char *dst)
{
	Size		len;

	if (run < CMS_MIN_ZERO_RUN)
	{
		if (dst)
			memset(dst, '0', run);
		return run;
	}
	if (dst)
		*dst++ = CMS_ZERO_RUN;
	len = cms_encode_number(run, dst);
	return 1 + len;
}

/*
 * Encode the counters into dst, or just count the characters if dst is
 * NULL, so the caller can allocate the exact size first.
 */
static Size
cms_encode_counters(const CmsData *cms, char *dst)
{
	Size		n = (Size) cms->npages * cms->depth * cms->cols_per_page;
	Size		len = 0;
	uint64		run = 0;

	for (Size i = 0; i < n; i++)
	{
		int64		v = cms->counters[i];

		if (v == 0)
		{
			run++;
			continue;
		}
		if (run > 0)
		{
			len += cms_encode_zero_run(run, dst ? dst + len : NULL);
			run = 0;
		}
		len += cms_encode_number((uint64) v, dst ? dst + len : NULL);
	}
	if (run > 0)
		len += cms_encode_zero_run(run, dst ? dst + len : NULL);
	return len;
}

Datum
cms_out(PG_FUNCTION_ARGS)
{
	CmsData    *cms = PG_GETARG_CMS_P(0);
	StringInfoData hdr;
	char		epsilon[DOUBLE_SHORTEST_DECIMAL_LEN];
	char		delta[DOUBLE_SHORTEST_DECIMAL_LEN];
	Size		datalen;
	char	   *result;
	char	   *data;

	cms_check_header(cms);
	double_to_shortest_decimal_buf(cms->epsilon, epsilon);
	double_to_shortest_decimal_buf(cms->delta, delta);

	initStringInfo(&hdr);
	appendStringInfo(&hdr,
					 "version=%u seed=%u epsilon=%s delta=%s depth=%u cols_per_page=%u pages=%u total=" INT64_FORMAT,
					 cms->version, cms->seed, epsilon, delta, cms->depth,
					 cms->cols_per_page, cms->npages, cms->total);
	ss_text_append_elemtype(&hdr, cms->elemtype);
	appendStringInfoString(&hdr, " counters=");
	datalen = cms_encode_counters(cms, NULL);
	result = ss_text_join(&hdr, datalen, &data);
	cms_encode_counters(cms, data);
	PG_RETURN_CSTRING(result);
}

/*
 * Decode table for the counter digits: 0..31 for final digits, 32..63 for
 * leading ones (value + 32), -1 for anything else.  Built once.
 */
static int8 cms_digit_table[256];
static bool cms_digit_table_ready = false;

static void
cms_init_digit_table(void)
{
	if (cms_digit_table_ready)
		return;
	memset(cms_digit_table, -1, sizeof(cms_digit_table));
	for (int i = 0; i < 32; i++)
	{
		cms_digit_table[(unsigned char) cms_low_digits[i]] = i;
		cms_digit_table[(unsigned char) cms_high_digits[i]] = 32 + i;
	}
	cms_digit_table_ready = true;
}

/*
 * Decode the counters of a sketch of n counters into counters, which is
 * all zeros.  With counters NULL only the syntax and the number of
 * counters (runs of zeros included) are checked: cms_in runs that pass
 * first, so that a short text claiming a large geometry fails before the
 * value is allocated.
 */
static void
cms_decode_counters(SSTextParser *ps, int64 *counters, Size n)
{
	Size		i = 0;
	uint64		acc = 0;
	bool		in_number = false;
	bool		in_run = false;

	cms_init_digit_table();
	for (; *ps->p != '\0'; ps->p++)
	{
		unsigned char c = (unsigned char) *ps->p;
		int			d = cms_digit_table[c];

		if (d < 0)
		{
			if (c != CMS_ZERO_RUN || in_number || in_run)
				ss_text_syntax_error(ps, "a counter digit");
			in_run = true;
			continue;
		}
		if (acc > (uint64) (PG_INT64_MAX - (d & 31)) / 32)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid input syntax for type %s", "cms"),
					 errdetail("The number ending at character %d is out of range.",
							   ss_text_pos(ps))));
		acc = acc * 32 + (d & 31);
		if (d >= 32)
		{
			in_number = true;
			continue;
		}

		/* a final digit completes a counter or a run length */
		if (in_run)
		{
			if (acc < 1 || acc > n - i)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						 errmsg("invalid input syntax for type %s", "cms"),
						 errdetail("The zero run of length " UINT64_FORMAT " ending at character %d does not fit the %zu counters of the sketch.",
								   acc, ss_text_pos(ps), n)));
			/* the counters are already zero */
			i += acc;
		}
		else
		{
			if (i >= n)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						 errmsg("invalid input syntax for type %s", "cms"),
						 errdetail("There are more than the %zu counters of the sketch.",
								   n)));
			if (counters)
				counters[i] = (int64) acc;
			i++;
		}
		acc = 0;
		in_number = false;
		in_run = false;
	}
	if (in_number || in_run)
		ss_text_syntax_error(ps, "a final counter digit");
	if (i != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s", "cms"),
				 errdetail_plural("The input has %zu counter, but the sketch has %zu.",
								  "The input has %zu counters, but the sketch has %zu.",
								  i, i, n)));
}

Datum
cms_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	SSTextParser	ps;
	uint32		seed;
	double		epsilon;
	double		delta;
	uint32		depth;
	uint32		cols_per_page;
	uint32		npages;
	int64		total;
	Oid			elemtype;
	CmsGeometry g;
	CmsData    *cms;

	ss_text_parser_init(&ps, "cms", str);
	ss_text_parse_version(&ps, CMS_VERSION, CMS_VERSION, "count-min sketch");
	ss_text_expect(&ps, " seed=");
	seed = (uint32) ss_text_parse_unsigned(&ps, "seed", PG_UINT32_MAX);
	ss_text_expect(&ps, " epsilon=");
	epsilon = ss_text_parse_float(&ps, "epsilon");
	ss_text_expect(&ps, " delta=");
	delta = ss_text_parse_float(&ps, "delta");
	ss_text_expect(&ps, " depth=");
	depth = (uint32) ss_text_parse_unsigned(&ps, "depth", PG_UINT32_MAX);
	ss_text_expect(&ps, " cols_per_page=");
	cols_per_page = (uint32) ss_text_parse_unsigned(&ps, "cols_per_page",
												PG_UINT32_MAX);
	ss_text_expect(&ps, " pages=");
	npages = (uint32) ss_text_parse_unsigned(&ps, "pages", PG_UINT32_MAX);
	ss_text_expect(&ps, " total=");
	total = (int64) ss_text_parse_unsigned(&ps, "total", PG_INT64_MAX);
	elemtype = ss_text_parse_elemtype(&ps);
	ss_text_expect(&ps, " counters=");

	/* validate the geometry before allocating anything sized by it */
	cms_check_geometry(depth, cols_per_page, npages);
	g.depth = depth;
	g.cols_per_page = cols_per_page;
	g.npages = npages;

	/*
	 * The header alone can ask for a 660 MB value in a hundred characters.
	 * Check that the text holds exactly that many counters before
	 * allocating, then decode them for real.
	 */
	{
		SSTextParser scan = ps;

		cms_decode_counters(&scan, NULL, (Size) npages * depth * cols_per_page);
	}

	cms = cms_alloc(&g, seed, elemtype, epsilon, delta, total);
	cms_decode_counters(&ps, cms->counters,
						(Size) npages * depth * cols_per_page);
	cms_check(cms);

	PG_RETURN_POINTER(cms);
}

/* ----------------------------------------------------------------
 *		Binary I/O
 * ----------------------------------------------------------------
 */

Datum
cms_send(PG_FUNCTION_ARGS)
{
	CmsData    *cms = PG_GETARG_CMS_P(0);
	StringInfoData buf;
	Size		n;

	cms_check_header(cms);
	n = (Size) cms->npages * cms->depth * cms->cols_per_page;

	/* after the head: fixed fields, then the counters */
	ss_binary_begin(&buf, cms->version, cms->elemtype,
					4 * sizeof(uint32) + 2 * sizeof(float8) + sizeof(int64) +
					n * sizeof(int64));
	pq_sendint32(&buf, cms->seed);
	pq_sendint32(&buf, cms->depth);
	pq_sendint32(&buf, cms->cols_per_page);
	pq_sendint32(&buf, cms->npages);
	pq_sendfloat8(&buf, cms->epsilon);
	pq_sendfloat8(&buf, cms->delta);
	pq_sendint64(&buf, cms->total);
	for (Size i = 0; i < n; i++)
		pq_sendint64(&buf, cms->counters[i]);
	Assert(buf.len + 1 == buf.maxlen);

	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

Datum
cms_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	Oid			elemtype;
	uint32		seed;
	CmsGeometry g;
	double		epsilon;
	double		delta;
	int64		total;
	CmsData    *cms;
	Size		n;

	elemtype = ss_binary_read_head(buf, CMS_VERSION, CMS_VERSION,
								   "count-min sketch", NULL);
	seed = pq_getmsgint(buf, 4);
	g.depth = pq_getmsgint(buf, 4);
	g.cols_per_page = pq_getmsgint(buf, 4);
	g.npages = pq_getmsgint(buf, 4);
	epsilon = pq_getmsgfloat8(buf);
	delta = pq_getmsgfloat8(buf);
	total = pq_getmsgint64(buf);

	/* validate the geometry and the length before allocating */
	cms_check_geometry(g.depth, g.cols_per_page, g.npages);
	n = (Size) g.npages * g.depth * g.cols_per_page;
	if ((Size) (buf->len - buf->cursor) != n * sizeof(int64))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid binary count-min sketch"),
				 errdetail("%d bytes of counters follow the header, but the sketch has %zu counters.",
						   buf->len - buf->cursor, n)));

	cms = cms_alloc(&g, seed, elemtype, epsilon, delta, total);
	for (Size i = 0; i < n; i++)
		cms->counters[i] = pq_getmsgint64(buf);
	cms_check(cms);

	PG_RETURN_POINTER(cms);
}

/* ----------------------------------------------------------------
 *		SQL functions on cms values
 * ----------------------------------------------------------------
 */

Datum
cms_union(PG_FUNCTION_ARGS)
{
	CmsData    *a = PG_GETARG_CMS_P(0);
	CmsData    *b = PG_GETARG_CMS_P(1);
	CmsData    *result;

	cms_check_header(a);
	cms_check_header(b);
	result = (CmsData *) palloc(VARSIZE(a));
	memcpy(result, a, VARSIZE(a));
	cms_merge_into(result, b);

	PG_RETURN_POINTER(result);
}

Datum
cms_info(PG_FUNCTION_ARGS)
{
	CmsData    *cms = PG_GETARG_CMS_P(0);
	SSInfoRow	row;
	Datum	   *values;

	cms_check_header(cms);
	ss_info_row_begin(fcinfo, &row, "cms_info", 9);
	values = row.values;

	values[0] = Float8GetDatum(cms->epsilon);
	values[1] = Float8GetDatum(cms->delta);
	values[2] = Int32GetDatum((int32) cms->depth);
	values[3] = Int64GetDatum((int64) cms->npages * cms->cols_per_page);
	values[4] = Int32GetDatum((int32) cms->npages);
	values[5] = Int64GetDatum(cms->total);
	values[6] = Int64GetDatum((int64) VARSIZE(cms));
	values[7] = ObjectIdGetDatum(cms->elemtype);
	row.nulls[7] = !OidIsValid(cms->elemtype);
	values[8] = Int64GetDatum((int64) cms->seed);

	return ss_info_row_datum(&row);
}
