/*-------------------------------------------------------------------------
 *
 * qfilter_io.c
 *	  Text and binary I/O of the `qfilter` type, and qfilter_info().
 *
 * Text form (one line, fields in this order, separated by single spaces):
 *
 *	 version=3 seed=<uint32> capacity=<int64> fp_rate=<float8> rbits=<n>
 *	 space=<mult>*2^<exp> home_slots=<n> pages=<n> area_bytes=<n>
 *	 total=<uint64> [type="<type name>"] areas=<area>,<area>,...
 *
 * (versions 1 and 2, read and converted: slot_bits=<n> page_bits=<n>
 * instead of space, home_slots and pages, and 2^page_bits areas).
 *
 * type is the key type as printed by format_type (schema-qualified where
 * needed, or the OID if the type was dropped), with " doubled inside the
 * quotes; it is absent when the filter has no key type.  fp_rate is printed
 * in shortest exact form, so it reads back bit for bit.
 *
 * Each of the areas is written as its area_bytes bytes in the
 * little-endian layout of qf.h, in standard base64 (A-Z a-z 0-9 + /, four
 * characters per three bytes; area_bytes is a multiple of 24, so there is
 * no padding), except that a run of two or more all-zero 3-byte groups is
 * written as '.', the run length in decimal, and '.'.  Sparse areas are
 * therefore short, and no area takes more than 4/3 of its bytes plus the
 * separating comma, which is what bounds the size of a qfilter value (see
 * qfilter.h).  Input accepts zero runs of any length that fits its area.
 *
 * Binary form (qfilter_send/qfilter_recv), in network byte order: int32
 * version, int32 length of the key type name (-1 if none) and the name in
 * the client encoding, uint32 seed, int32 rbits, uint64 space_mult, int32
 * space_exp, home_slots, pages, area_bytes, int64 capacity, float8
 * fp_rate, uint64 total, then the areas' bytes in the little-endian layout
 * (versions 1 and 2: int32 slot_bits and page_bits instead of the space,
 * home_slots and pages).  The key type travels by name rather
 * than by OID so that values can move between databases where a
 * user-defined key type has another OID.
 *
 * Both inputs validate every area with qf_area_check (qfilter_check).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "common/shortest_dec.h"
#include "funcapi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "qfilter.h"
#include "ss_queryutil.h"
#include "ss_textio.h"

PG_FUNCTION_INFO_V1(qfilter_in);
PG_FUNCTION_INFO_V1(qfilter_out);
PG_FUNCTION_INFO_V1(qfilter_recv);
PG_FUNCTION_INFO_V1(qfilter_send);
PG_FUNCTION_INFO_V1(qfilter_info);

#define QFILTER_ZERO_RUN	'.'
#define QFILTER_AREA_SEP	','

static const char qfilter_b64[] =
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ----------------------------------------------------------------
 *		Key type names
 * ----------------------------------------------------------------
 */

/*
 * The areas in the external (little-endian) layout: the value's own bytes
 * on little-endian machines, a swapped copy otherwise.
 */
static const char *
qfilter_external_areas(const QFilterData *qf)
{
#ifdef WORDS_BIGENDIAN
	Size		n = VARSIZE(qf) - QFILTER_HEADER_SIZE;
	char	   *copy = palloc(n);

	memcpy(copy, qf->areas, n);
	qfilter_areas_swap_external(copy, qfilter_npages(qf), qf->area_bytes);
	return copy;
#else
	return qf->areas;
#endif
}

/* ----------------------------------------------------------------
 *		Text output
 * ----------------------------------------------------------------
 */

static Size
qfilter_encode_run(uint32 run, char *dst)
{
	char		num[16];
	int			len;

	if (run == 1)
	{
		if (dst)
			memcpy(dst, "AAAA", 4);
		return 4;
	}
	len = snprintf(num, sizeof(num), "%u", run);
	if (dst)
	{
		dst[0] = QFILTER_ZERO_RUN;
		memcpy(dst + 1, num, len);
		dst[1 + len] = QFILTER_ZERO_RUN;
	}
	return 2 + len;
}

/*
 * Encode one area of area_bytes (external layout) into dst, or only count
 * the characters if dst is NULL, so the caller can allocate the exact size
 * first.
 */
static Size
qfilter_encode_area(const unsigned char *area, uint32 area_bytes, char *dst)
{
	Size		len = 0;
	uint32		run = 0;

	for (uint32 i = 0; i < area_bytes / 3; i++)
	{
		const unsigned char *b = area + 3 * i;
		uint32		v = ((uint32) b[0] << 16) | ((uint32) b[1] << 8) | b[2];

		if (v == 0)
		{
			run++;
			continue;
		}
		if (run > 0)
		{
			len += qfilter_encode_run(run, dst ? dst + len : NULL);
			run = 0;
		}
		if (dst)
		{
			dst[len] = qfilter_b64[(v >> 18) & 63];
			dst[len + 1] = qfilter_b64[(v >> 12) & 63];
			dst[len + 2] = qfilter_b64[(v >> 6) & 63];
			dst[len + 3] = qfilter_b64[v & 63];
		}
		len += 4;
	}
	if (run > 0)
		len += qfilter_encode_run(run, dst ? dst + len : NULL);
	return len;
}

static Size
qfilter_encode_areas(const QFilterData *qf, const char *ext, char *dst)
{
	uint32		npages = qfilter_npages(qf);
	Size		len = 0;

	for (uint32 i = 0; i < npages; i++)
	{
		if (i > 0)
		{
			if (dst)
				dst[len] = QFILTER_AREA_SEP;
			len++;
		}
		len += qfilter_encode_area((const unsigned char *) ext +
								   (Size) i * qf->area_bytes, qf->area_bytes,
								   dst ? dst + len : NULL);
	}
	return len;
}

Datum
qfilter_out(PG_FUNCTION_ARGS)
{
	QFilterData *qf = PG_GETARG_QFILTER_P(0);
	StringInfoData hdr;
	char		fp_rate[DOUBLE_SHORTEST_DECIMAL_LEN];
	const char *ext;
	Size		datalen;
	char	   *result;
	char	   *data;

	qfilter_check_header(qf);
	double_to_shortest_decimal_buf(qf->fp_rate, fp_rate);

	initStringInfo(&hdr);
	appendStringInfo(&hdr,
					 "version=%u seed=%u capacity=" INT64_FORMAT " fp_rate=%s rbits=%d space=" UINT64_FORMAT "*2^%d home_slots=%u pages=%u area_bytes=%u total=" UINT64_FORMAT,
					 qf->version, qf->seed, qf->capacity, fp_rate, qf->rbits,
					 qf->space_mult, qf->space_exp, qf->nhome, qf->npages,
					 qf->area_bytes, qf->total);
	ss_text_append_elemtype(&hdr, qf->elemtype);
	appendStringInfoString(&hdr, " areas=");
	ext = qfilter_external_areas(qf);
	datalen = qfilter_encode_areas(qf, ext, NULL);
	result = ss_text_join(&hdr, datalen, &data);
	qfilter_encode_areas(qf, ext, data);
	PG_RETURN_CSTRING(result);
}

/* ----------------------------------------------------------------
 *		Text input
 * ----------------------------------------------------------------
 */

/* base64 digit values, -1 for other characters.  Built once. */
static int8 qfilter_b64_table[256];
static bool qfilter_b64_ready = false;

static void
qfilter_init_b64_table(void)
{
	if (qfilter_b64_ready)
		return;
	memset(qfilter_b64_table, -1, sizeof(qfilter_b64_table));
	for (int i = 0; i < 64; i++)
		qfilter_b64_table[(unsigned char) qfilter_b64[i]] = i;
	qfilter_b64_ready = true;
}

static void pg_attribute_noreturn()
qfilter_area_syntax_error(SSTextParser *ps, uint32 page, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type %s", "qfilter"),
			 errdetail("Area %u at character %d: %s.", page, ss_text_pos(ps), what)));
}

/*
 * Decode one area of area_bytes (external layout) into area, which is all
 * zeros.
 */
static void
qfilter_decode_area(SSTextParser *ps, uint32 page, unsigned char *area,
					uint32 area_bytes)
{
	int			ngroups = (int) (area_bytes / 3);
	int			g = 0;			/* groups decoded */

	while (*ps->p != '\0' && *ps->p != QFILTER_AREA_SEP)
	{
		if (*ps->p == QFILTER_ZERO_RUN)
		{
			uint64		run = 0;

			ps->p++;
			if (!isdigit((unsigned char) *ps->p))
				qfilter_area_syntax_error(ps, page, "expected the length of a zero run");
			while (isdigit((unsigned char) *ps->p))
			{
				run = run * 10 + (*ps->p - '0');
				if (run > ngroups)
					break;
				ps->p++;
			}
			if (run < 1 || run > (uint64) (ngroups - g))
				qfilter_area_syntax_error(ps, page, "the zero run does not fit the area");
			if (*ps->p != QFILTER_ZERO_RUN)
				qfilter_area_syntax_error(ps, page, "expected the end of a zero run");
			ps->p++;
			g += (int) run;		/* the bytes are already zero */
		}
		else
		{
			uint32		v = 0;

			if (g >= ngroups)
				qfilter_area_syntax_error(ps, page, "the area has too many bytes");
			for (int i = 0; i < 4; i++)
			{
				int			d = qfilter_b64_table[(unsigned char) ps->p[i]];

				if (d < 0)
				{
					ps->p += i;
					qfilter_area_syntax_error(ps, page, "expected a base64 digit");
				}
				v = (v << 6) | (uint32) d;
			}
			ps->p += 4;
			area[3 * g] = (unsigned char) (v >> 16);
			area[3 * g + 1] = (unsigned char) (v >> 8);
			area[3 * g + 2] = (unsigned char) v;
			g++;
		}
	}
	if (g != ngroups)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s", "qfilter"),
				 errdetail("Area %u ending at character %d has %d bytes instead of %d.",
						   page, ss_text_pos(ps), 3 * g, (int) area_bytes)));
}

/*
 * Decode npages areas of area_bytes, each into areas + i * area_bytes
 * (which is all zeros).  With scratch, every area goes to areas, cleared
 * before each one: a pass that only checks the syntax and the number of
 * areas.
 */
static void
qfilter_decode_areas(SSTextParser *ps, uint32 npages, uint32 area_bytes,
					 unsigned char *areas, bool scratch)
{
	for (uint32 i = 0; i < npages; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (i > 0)
		{
			if (*ps->p != QFILTER_AREA_SEP)
				ss_text_syntax_error(ps, psprintf("\",\" before area %u", i));
			ps->p++;
		}
		if (scratch)
			memset(areas, 0, area_bytes);
		qfilter_decode_area(ps, i, scratch ? areas :
							areas + (Size) i * area_bytes, area_bytes);
	}
	if (*ps->p != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s", "qfilter"),
				 errdetail("The input has more than the filter's %u areas (character %d).",
						   npages, ss_text_pos(ps))));
}

/*
 * The shape of a value read or received: version 3's fields, or those of
 * versions 1 and 2.
 */
typedef struct QFilterShapeIn
{
	uint32		version;
	int			rbits;
	uint64		space_mult;
	int			space_exp;
	uint32		nhome;
	uint32		npages;
	int			slot_bits;		/* versions 1 and 2 */
	int			page_bits;
	uint32		area_bytes;
} QFilterShapeIn;

/*
 * ERROR if a value read or received has no valid geometry; else the bytes
 * of the value, which for versions 1 and 2 is their own header's.
 */
static Size
qfilter_check_geometry(QFilterShapeIn *sh)
{
	char	   *problem;

	if (sh->version == QFILTER_VERSION)
		problem = qfilter_geometry_problem(sh->rbits, sh->space_mult,
										   sh->space_exp, sh->nhome,
										   sh->npages, sh->area_bytes);
	else
	{
		problem = qfilter_geometry_problem_v2(sh->version, sh->rbits,
											  sh->slot_bits, sh->page_bits,
											  sh->area_bytes);
		if (!problem)
			sh->npages = 1U << sh->page_bits;
	}
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid quotient filter"),
				 errdetail_internal("%s", problem)));
	if (sh->version == QFILTER_VERSION)
		return qfilter_value_size(sh->npages, sh->area_bytes);
	return QFILTER_HEADER_SIZE_V2 + (Size) QFILTER_AREA_BYTES * sh->npages;
}

/*
 * A value of the shape sh with these header fields and zero areas (its
 * areas at *areas), in the layout of its version.
 */
static struct varlena *
qfilter_alloc_in(const QFilterShapeIn *sh, Size size, Oid elemtype,
				 uint32 seed, int64 capacity, double fp_rate, uint64 total,
				 char **areas)
{
	QFilterDataV2 *old;

	if (sh->version == QFILTER_VERSION)
	{
		QFilterData *qf = qfilter_alloc(elemtype, seed, sh->rbits,
										sh->space_mult, sh->space_exp,
										sh->nhome, sh->npages,
										sh->area_bytes, capacity, fp_rate,
										total);

		*areas = qf->areas;
		return (struct varlena *) qf;
	}
	old = palloc0(size);
	SET_VARSIZE(old, size);
	old->version = sh->version;
	old->elemtype = elemtype;
	old->seed = seed;
	old->rbits = (uint8) sh->rbits;
	old->slot_bits = (uint8) sh->slot_bits;
	old->page_bits = (uint8) sh->page_bits;
	old->area_bytes = sh->area_bytes;
	old->capacity = capacity;
	old->fp_rate = fp_rate;
	old->total = total;
	*areas = old->areas;
	return (struct varlena *) old;
}

/*
 * The value of an input function, its npages areas read in the external
 * byte order: the areas in the host's, an earlier version converted, every
 * area checked, and page-sized areas of earlier builds trimmed.
 */
static QFilterData *
qfilter_finish_in(struct varlena *v, char *areas, uint32 npages,
				  uint32 area_bytes)
{
	QFilterData *qf;

	qfilter_areas_swap_external(areas, npages, area_bytes);
	qf = qfilter_current(v);
	qfilter_check(qf);
	return qfilter_trim(qf);
}

Datum
qfilter_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	SSTextParser	ps;
	uint32		seed;
	int64		capacity;
	double		fp_rate;
	QFilterShapeIn sh = {0};
	uint64		total;
	Oid			elemtype;
	struct varlena *v;
	char	   *areas;
	Size		size;

	ss_text_parser_init(&ps, "qfilter", str);
	sh.version = ss_text_parse_version(&ps, QFILTER_VERSION_LEGACY,
									   QFILTER_VERSION, "quotient filter");
	ss_text_expect(&ps, " seed=");
	seed = (uint32) ss_text_parse_unsigned(&ps, "seed", PG_UINT32_MAX);
	ss_text_expect(&ps, " capacity=");
	capacity = (int64) ss_text_parse_unsigned(&ps, "capacity", PG_INT64_MAX);
	ss_text_expect(&ps, " fp_rate=");
	fp_rate = ss_text_parse_float(&ps, "fp_rate");
	ss_text_expect(&ps, " rbits=");
	sh.rbits = (int) ss_text_parse_unsigned(&ps, "rbits", 255);
	if (sh.version == QFILTER_VERSION)
	{
		ss_text_expect(&ps, " space=");
		sh.space_mult = ss_text_parse_unsigned(&ps, "space", PG_UINT64_MAX);
		ss_text_expect(&ps, "*2^");
		sh.space_exp = (int) ss_text_parse_unsigned(&ps, "space", 255);
		ss_text_expect(&ps, " home_slots=");
		sh.nhome = (uint32) ss_text_parse_unsigned(&ps, "home_slots",
												   PG_UINT32_MAX);
		ss_text_expect(&ps, " pages=");
		sh.npages = (uint32) ss_text_parse_unsigned(&ps, "pages",
													PG_UINT32_MAX);
	}
	else
	{
		ss_text_expect(&ps, " slot_bits=");
		sh.slot_bits = (int) ss_text_parse_unsigned(&ps, "slot_bits", 255);
		ss_text_expect(&ps, " page_bits=");
		sh.page_bits = (int) ss_text_parse_unsigned(&ps, "page_bits", 255);
	}
	ss_text_expect(&ps, " area_bytes=");
	sh.area_bytes = (uint32) ss_text_parse_unsigned(&ps, "area_bytes",
													PG_UINT32_MAX);
	ss_text_expect(&ps, " total=");
	total = ss_text_parse_unsigned(&ps, "total", PG_UINT64_MAX);
	elemtype = ss_text_parse_elemtype(&ps);
	ss_text_expect(&ps, " areas=");

	/* validate the geometry before allocating anything sized by it */
	size = qfilter_check_geometry(&sh);

	/*
	 * The header alone can ask for 2^16 areas (535 MB) in a few dozen
	 * characters.  Decode the areas once into a scratch area first, so that
	 * input that does not hold that many well-formed areas fails before the
	 * value is allocated; only then allocate and decode for real.
	 */
	qfilter_init_b64_table();
	{
		SSTextParser scan = ps;
		unsigned char *scratch = palloc(sh.area_bytes);

		qfilter_decode_areas(&scan, sh.npages, sh.area_bytes, scratch, true);
		pfree(scratch);
	}

	v = qfilter_alloc_in(&sh, size, elemtype, seed, capacity, fp_rate, total,
						 &areas);
	qfilter_decode_areas(&ps, sh.npages, sh.area_bytes,
						 (unsigned char *) areas, false);
	PG_RETURN_POINTER(qfilter_finish_in(v, areas, sh.npages, sh.area_bytes));
}

/* ----------------------------------------------------------------
 *		Binary I/O
 * ----------------------------------------------------------------
 */

Datum
qfilter_send(PG_FUNCTION_ARGS)
{
	QFilterData *qf = PG_GETARG_QFILTER_P(0);
	StringInfoData buf;
	Size		nbytes;

	qfilter_check_header(qf);
	nbytes = VARSIZE(qf) - QFILTER_HEADER_SIZE;

	/* after the head: fixed fields, then the areas */
	ss_binary_begin(&buf, qf->version, qf->elemtype,
					6 * sizeof(uint32) + 2 * sizeof(int64) + sizeof(float8) +
					sizeof(uint64) + nbytes);
	pq_sendint32(&buf, qf->seed);
	pq_sendint32(&buf, qf->rbits);
	pq_sendint64(&buf, (int64) qf->space_mult);
	pq_sendint32(&buf, qf->space_exp);
	pq_sendint32(&buf, qf->nhome);
	pq_sendint32(&buf, qf->npages);
	pq_sendint32(&buf, qf->area_bytes);
	pq_sendint64(&buf, qf->capacity);
	pq_sendfloat8(&buf, qf->fp_rate);
	pq_sendint64(&buf, (int64) qf->total);
	pq_sendbytes(&buf, qfilter_external_areas(qf), nbytes);
	Assert(buf.len + 1 == buf.maxlen);

	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

Datum
qfilter_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	Oid			elemtype;
	uint32		seed;
	QFilterShapeIn sh = {0};
	int64		capacity;
	double		fp_rate;
	uint64		total;
	struct varlena *v;
	char	   *areas;
	Size		size;
	Size		nbytes;

	elemtype = ss_binary_read_head(buf, QFILTER_VERSION_LEGACY, QFILTER_VERSION,
								   "quotient filter", &sh.version);
	seed = pq_getmsgint(buf, 4);
	/* as int32, so that the message shows what the input said */
	sh.rbits = (int32) pq_getmsgint(buf, 4);
	if (sh.version == QFILTER_VERSION)
	{
		sh.space_mult = (uint64) pq_getmsgint64(buf);
		sh.space_exp = (int32) pq_getmsgint(buf, 4);
		sh.nhome = pq_getmsgint(buf, 4);
		sh.npages = pq_getmsgint(buf, 4);
	}
	else
	{
		sh.slot_bits = (int32) pq_getmsgint(buf, 4);
		sh.page_bits = (int32) pq_getmsgint(buf, 4);
	}
	sh.area_bytes = pq_getmsgint(buf, 4);
	capacity = pq_getmsgint64(buf);
	fp_rate = pq_getmsgfloat8(buf);
	total = (uint64) pq_getmsgint64(buf);

	/* validate the geometry and the length before allocating */
	size = qfilter_check_geometry(&sh);
	nbytes = (Size) sh.area_bytes * sh.npages;
	if ((Size) (buf->len - buf->cursor) != nbytes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid binary quotient filter"),
				 errdetail("%d bytes of areas follow the header, but the filter has %zu.",
						   buf->len - buf->cursor, nbytes)));

	v = qfilter_alloc_in(&sh, size, elemtype, seed, capacity, fp_rate, total,
						 &areas);
	pq_copymsgbytes(buf, areas, nbytes);
	PG_RETURN_POINTER(qfilter_finish_in(v, areas, sh.npages, sh.area_bytes));
}

/* ----------------------------------------------------------------
 *		qfilter_info
 * ----------------------------------------------------------------
 */

Datum
qfilter_info(PG_FUNCTION_ARGS)
{
	QFilterData *qf = PG_GETARG_QFILTER_P(0);
	SSInfoRow	row;
	Datum	   *values;
	QfGeom		g;
	uint32		npages;
	uint64		items = 0;
	uint64		used = 0;
	double		home;
	int			i = 0;

	qfilter_check_header(qf);
	ss_info_row_begin(fcinfo, &row, "qfilter_info", 15);
	values = row.values;

	qfilter_geom(qf, &g);
	npages = qfilter_npages(qf);
	for (uint32 p = 0; p < npages; p++)
	{
		QfStats		st;

		qf_area_stats(&g, qfilter_area(qf, p), &st);
		items += st.nitems;
		used += st.nused;
	}
	home = qfilter_home_slots(qf);

	values[i++] = Int64GetDatum(qf->capacity);
	values[i++] = Float8GetDatum(qf->fp_rate);
	values[i++] = Int32GetDatum(qfilter_fp_bits(qf));
	values[i++] = Int32GetDatum(qf->rbits);
	/* the log2 of the home slots per area (exact for power-of-two areas) */
	values[i++] = Int32GetDatum(pg_leftmost_one_pos32(qf->nhome));
	values[i++] = Int32GetDatum((int32) npages);
	values[i++] = Int64GetDatum((int64) items);
	values[i++] = Int64GetDatum((int64) Min(qf->total, (uint64) PG_INT64_MAX));
	values[i++] = Int64GetDatum((int64) used);
	values[i++] = Float8GetDatum((double) items / home);
	/* an absent key's fingerprint is one of the items with this probability */
	values[i++] = Float8GetDatum(ldexp((double) items / qf->space_mult,
									   -qf->space_exp));
	values[i++] = Int64GetDatum((int64) floor(qfilter_max_items(qf)));
	values[i++] = Int64GetDatum((int64) VARSIZE(qf));
	values[i] = ObjectIdGetDatum(qf->elemtype);
	row.nulls[i++] = !OidIsValid(qf->elemtype);
	values[i++] = Int64GetDatum((int64) qf->seed);
	Assert(i == row.tupdesc->natts);

	return ss_info_row_datum(&row);
}
