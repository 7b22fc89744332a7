/*-------------------------------------------------------------------------
 *
 * qfilter.h
 *	  The in-memory `qfilter` type: a counting quotient filter in one
 *	  varlena, cut into QF areas laid out exactly like the page data areas
 *	  of the paged quotient filters (qf.h), so the two can be merged.
 *
 * A qfilter value is a QFilterData header followed by 2^page_bits areas of
 * area_bytes (= QF_PAGE_AREA_BYTES, 8136) bytes each.  Every area is a QF
 * area (qf.h) of the geometry qf_geom_init_slots(slot_bits, rbits,
 * QF_SLACK_FILL, area_bytes); the bytes between the geometry's own
 * area_bytes and the stride are zero.
 *
 * A key is hashed with ss_hash_datum(key, typlen, typbyval, seed); the top
 * page_bits + slot_bits + rbits bits of h1 are its fingerprint, split by
 * qf_fingerprint_split() into (area, quotient, remainder).  The fingerprint
 * size T = page_bits + slot_bits + rbits never changes over the life of a
 * filter: growing from 2^t to 2^(t+1) home slots (t = page_bits +
 * slot_bits) moves one bit from the remainder to the quotient or the area
 * index, so nothing is rehashed and the false-positive rate of the stored
 * keys stays items / 2^T.
 *
 * Sizing and geometry follow the paged quotient filters (qfam_derive and
 * qfam_level_shape): for capacity n and rate f, rbits = max(1,
 * ceil(log2(0.95 / f))) and t = the smallest t >= 1 with 0.95 * 2^t >= n;
 * a filter with 2^t home slots has slot_bits = min(t, the slot_bits
 * qf_geom_init chooses for rbits) and page_bits = t - slot_bits
 * (qfilter_shape).  So a qfilter and a quotient_filter table made with the
 * same capacity and fp_rate have the same fingerprints, and at the same t
 * the same areas.
 *
 * A filter "fits" 2^t home slots when no area overflows and it holds at
 * most 0.95 * 2^t distinct fingerprints (the paged filters' growth rule).
 * Layout is canonical: the areas are a pure function of the geometry and
 * the multiset of fingerprints (qf.h), and the t an aggregate ends with is
 * the smallest one from the requested capacity on that fits the final
 * multiset.  So the same stream gives byte-identical values whatever the
 * order of the rows, the grouping into partial aggregates, or the order
 * of unions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QFILTER_H
#define QFILTER_H

#include "postgres.h"

#include "qf.h"
#include "ss_hash.h"
#include "ss_page.h"
#include "utils/memutils.h"

/*
 * 2: areas with three metadata bit arrays (qf.h, "QFA2").  Values of
 * version 1, with areas of the earlier layout (four arrays, "QFA1"), are
 * read, looked up and written as they are; what grows or unites them is
 * laid out anew in version 2.
 */
#define QFILTER_VERSION			2
#define QFILTER_VERSION_LEGACY	1

/* Stride of the areas: the page data area of the paged filters. */
#define QFILTER_AREA_BYTES		QF_PAGE_AREA_BYTES

/*
 * Maximum load factor used for sizing: a new filter gets enough areas for
 * capacity fingerprints at no more than this fraction of its home slots.
 */
#define QFILTER_MAX_LOAD		QF_MAX_LOAD

/*
 * At most 2^16 areas (535 MB).  The limit is what keeps the text form
 * (at most 4/3 of the bytes plus one separator per area, see qfilter_io.c)
 * below MaxAllocSize, so that every value can be printed and dumped.
 */
#define QFILTER_MAX_PAGE_BITS	16

/* Longest key type name and other header text in the text form. */
#define QFILTER_TEXT_HEADER_RESERVE	65536

/* Characters of the text form of one area at most: 4 per 3 bytes, plus ','. */
#define QFILTER_TEXT_AREA_CHARS	(QFILTER_AREA_BYTES / 3 * 4 + 1)

typedef struct QFilterData
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	uint32		version;		/* QFILTER_VERSION */
	Oid			elemtype;		/* type of the hashed keys, or InvalidOid */
	uint32		seed;			/* hash seed (SS_DEFAULT_SEED) */
	uint8		rbits;			/* remainder bits */
	uint8		slot_bits;		/* home slots per area = 2^slot_bits */
	uint8		page_bits;		/* areas = 2^page_bits */
	uint8		flags;			/* 0, reserved */
	uint32		area_bytes;		/* stride of the areas: QFILTER_AREA_BYTES */
	int64		capacity;		/* as requested (a sizing hint) */
	float8		fp_rate;		/* as requested */
	uint64		total;			/* sum of all counts, saturating at 2^64-1 */
	/* 2^page_bits areas of area_bytes bytes */
	char		areas[FLEXIBLE_ARRAY_MEMBER];
} QFilterData;

#define QFILTER_HEADER_SIZE		offsetof(QFilterData, areas)

#define DatumGetQFilterP(X)		((QFilterData *) PG_DETOAST_DATUM(X))
#define PG_GETARG_QFILTER_P(n)	DatumGetQFilterP(PG_GETARG_DATUM(n))

static inline uint32
qfilter_npages(const QFilterData *qf)
{
	return (uint32) 1 << qf->page_bits;
}

static inline int
qfilter_fp_bits(const QFilterData *qf)
{
	return qf->page_bits + qf->slot_bits + qf->rbits;
}

static inline char *
qfilter_area(const QFilterData *qf, uint64 page)
{
	return unconstify(char *, &qf->areas[0]) + (Size) page * qf->area_bytes;
}

/* Bytes of a value with 2^page_bits areas. */
static inline Size
qfilter_value_size(int page_bits)
{
	return QFILTER_HEADER_SIZE + ((Size) QFILTER_AREA_BYTES << page_bits);
}

/*
 * Why a geometry is unusable for a qfilter value (a palloc'd sentence for
 * an errdetail), or NULL if it is fine.
 */
extern char *qfilter_geometry_problem(uint32 version, int rbits,
									  int slot_bits, int page_bits,
									  uint32 area_bytes);

/* The area geometry of a value whose header passed qfilter_check_header. */
extern void qfilter_geom(const QFilterData *qf, QfGeom *g);

/* Smallest t >= 1 with QFILTER_MAX_LOAD * 2^t >= n (at most 64). */
extern int	qfilter_slots_log2_for(double n);

/*
 * The geometry of 2^t home slots for fp_bits-bit fingerprints: rbits =
 * fp_bits - t, slot_bits = min(t, what qf_geom_init(rbits, area) chooses),
 * page_bits = t - slot_bits.  False if rbits is out of range.  (page_bits
 * may exceed QFILTER_MAX_PAGE_BITS; the caller checks.)
 */
extern bool qfilter_shape(int fp_bits, int t, int *rbits, int *slot_bits,
						  int *page_bits);

/*
 * Geometry for the requested capacity and false-positive rate:
 *	 rbits = max(1, ceil(log2(QFILTER_MAX_LOAD / fp_rate)))
 *	 t	   = qfilter_slots_log2_for(capacity)
 * and qfilter_shape(rbits + t, t).  ERROR (ERRCODE_INVALID_PARAMETER_VALUE)
 * unless capacity >= 1 and 0 < fp_rate < 1; ERROR
 * (ERRCODE_PROGRAM_LIMIT_EXCEEDED) if the value would exceed
 * QFILTER_MAX_PAGE_BITS or the fingerprint 64 bits.
 */
extern void qfilter_params(int64 capacity, double fp_rate, int *rbits,
						   int *slot_bits, int *page_bits);

/* A new empty filter in CurrentMemoryContext (parameters already valid). */
extern QFilterData *qfilter_alloc(uint32 version, Oid elemtype, uint32 seed,
								  int rbits, int slot_bits, int page_bits,
								  uint32 area_bytes, int64 capacity,
								  double fp_rate, uint64 total);
extern QFilterData *qfilter_create_empty(int rbits, int slot_bits,
										 int page_bits, uint32 seed,
										 Oid elemtype, int64 capacity,
										 double fp_rate);

/*
 * Validation, ERRCODE_DATA_CORRUPTED on failure.  qfilter_check_header is
 * O(1): fixed fields, geometry, size.  qfilter_check also runs
 * qf_area_check on every area and checks the zero padding and the total.
 */
extern void qfilter_check_header(const QFilterData *qf);
extern void qfilter_check(const QFilterData *qf);

/* Sum of the areas' total counts (saturating). */
extern uint64 qfilter_sum_totals(const QFilterData *qf);

/* Distinct fingerprints (sum of the areas' item counts). */
extern uint64 qfilter_items(const QFilterData *qf);

/*
 * Add count copies of the key whose hash is h1; *added (if not NULL) tells
 * whether its fingerprint is new.  QF_FULL (the area it falls in has no
 * room) leaves the filter unchanged: grow it and retry.  The maximum load
 * is the caller's to check.
 */
extern QfStatus qfilter_insert_hash(QFilterData *qf, const QfGeom *g,
									uint64 h1, uint64 count, bool *added);

/* Multiplicity of the fingerprint of h1 (0 if absent). */
extern uint64 qfilter_count_hash(const QFilterData *qf, const QfGeom *g,
								 uint64 h1);

/* Remove up to count copies; returns how many were removed. */
extern uint64 qfilter_remove_hash(QFilterData *qf, const QfGeom *g,
								  uint64 h1, uint64 count);

/*
 * The same fingerprints in 2^(t + k) home slots (t = page_bits +
 * slot_bits) for the smallest k >= kmin that fits them (at most 95% load,
 * no area overflowing); a new value in CurrentMemoryContext.  A step that
 * keeps slot_bits splits every area in two with qf_split_area; otherwise
 * the areas are laid out anew from the fingerprints.  ERROR
 * (ERRCODE_PROGRAM_LIMIT_EXCEEDED) when rbits would drop below 1 or the
 * value exceed QFILTER_MAX_PAGE_BITS.
 */
extern QFilterData *qfilter_grow(const QFilterData *qf, int kmin);

/*
 * Union (counts add up, saturating) of two filters with the same seed,
 * fingerprint size and (when both have one) key type; otherwise ERROR
 * (ERRCODE_INVALID_PARAMETER_VALUE).  The result has the home slots of the
 * larger input, or more until the union fits, in the geometry of
 * qfilter_shape, and the larger of the requested capacities and
 * false-positive rates, which makes the union commutative and
 * associative.  A new value in CurrentMemoryContext.
 */
extern QFilterData *qfilter_union_values(const QFilterData *a,
										 const QFilterData *b);

/*
 * Byte order of the external forms (text and binary): areas travel as the
 * bytes a little-endian machine holds, i.e. every header field and every
 * 64-bit word little-endian.  Converts npages areas in place in either
 * direction (the conversion is its own inverse); a no-op on little-endian
 * machines.
 */
extern void qfilter_areas_swap_external(char *areas, uint32 npages);

#endif							/* QFILTER_H */
