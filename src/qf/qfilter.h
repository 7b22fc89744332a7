/*-------------------------------------------------------------------------
 *
 * qfilter.h
 *	  The in-memory `qfilter` type: a counting quotient filter in one
 *	  varlena, cut into QF areas laid out exactly like the page data areas
 *	  of the paged quotient filters (qf.h), in the same fingerprint space as
 *	  a quotient_filter table of the same capacity and rate, so the two can
 *	  be merged exactly.
 *
 * A qfilter value (version 3) is a QFilterData header followed by npages
 * areas of area_bytes bytes each.  Every area is a QF area (qf.h) of the
 * geometry qf_geom_init_slots(nhome, rbits, QF_SLACK_FILL, area_bytes):
 * every slot that fits the stride is a home or slack slot, and the bytes
 * between the geometry's own area_bytes and the stride are zero.  The
 * stride is the area trimmed to its home slots (qfilter_area_stride:
 * nhome plus qf_min_slack(nhome) slots, rounded up to 24 bytes), so a
 * small filter is not a whole page; values written before areas were
 * trimmed have the page-sized stride QFILTER_AREA_BYTES (8136), which
 * stays valid, its geometry following from the same rule.
 *
 * A key is hashed with ss_hash_datum(key, typlen, typbyval, seed); its
 * fingerprint is y = qf_space_y(h1, space_mult, space_exp) in the space
 * M = space_mult * 2^space_exp, split by qf_space_split() into (area,
 * quotient, remainder): npages * nhome * 2^rbits = M.  M never changes
 * over the life of a filter: growing moves one bit from the remainder to
 * the quotient (twice the home slots), so nothing is rehashed and the
 * false-positive rate of the stored keys stays items / M.
 *
 * Sizing is the tables' (qf_sized_base): for capacity n and rate f, rbits
 * = qf_rbits_for_fp_rate(f) and the base P areas of nhome home slots, so a
 * qfilter and a quotient_filter table made with the same capacity and
 * fp_rate have the same space M (qf_merge_value adds exactly the table's
 * fingerprints of the qfilter's keys).  At rbits remainder bits the areas
 * are the canonical shape of M (qf_space_shape), a function of M and rbits
 * alone.
 *
 * A filter "fits" rbits when no area overflows and it holds at most
 * load * M / 2^rbits distinct fingerprints, load = qf_sized_load(fp_rate)
 * (0.95, or 0.97 for short remainders: the paged filters' growth rule).  Layout is canonical: the areas are a pure function of the
 * geometry and the multiset of fingerprints (qf.h), and the rbits an
 * aggregate ends with is the largest one from the requested capacity's on
 * that fits the final multiset.  So the same stream gives byte-identical
 * values whatever the order of the rows, the grouping into partial
 * aggregates, or the order of unions.
 *
 * Versions 1 and 2 had a shorter header (QFilterDataV2: slot_bits and
 * page_bits instead of the space and the area counts) and fingerprints
 * that were the top bits of the hash, i.e. the space 2^(page_bits +
 * slot_bits + rbits) with power-of-two areas.  They are read by
 * converting them (qfilter_detoast): a version-2 value keeps its areas
 * (space multiplier 1), a version-1 value's areas of the earlier layout
 * are laid out anew.  Every value written is version 3.
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
 * 3: the space of the tables (above).  2: areas with three metadata bit
 * arrays (qf.h, "QFA2") and top-bit fingerprints; 1: areas of the earlier
 * layout (four arrays, "QFA1").  Values of versions 1 and 2 are converted
 * when read.
 */
#define QFILTER_VERSION			3
#define QFILTER_VERSION_V2		2
#define QFILTER_VERSION_LEGACY	1

/*
 * The largest stride of the areas: the page data area of the paged
 * filters, which sizing fills (qf_sized_base), and the stride of every
 * value written before areas were trimmed to their home slots.
 */
#define QFILTER_AREA_BYTES		QF_PAGE_AREA_BYTES

/*
 * Maximum load factor used for sizing: a new filter gets enough areas for
 * capacity fingerprints at no more than this fraction of its home slots.
 */

/*
 * At most 2^16 areas (535 MB).  The limit is what keeps the text form
 * (at most 4/3 of the bytes plus one separator per area, see qfilter_io.c)
 * below MaxAllocSize, so that every value can be printed and dumped.
 */
#define QFILTER_MAX_PAGE_BITS	16
#define QFILTER_MAX_PAGES		((uint32) 1 << QFILTER_MAX_PAGE_BITS)

/* Longest key type name and other header text in the text form. */
#define QFILTER_TEXT_HEADER_RESERVE	65536

/*
 * Characters of the text form of one area at most: 4 per 3 bytes, plus ','
 * (for the largest stride).
 */
#define QFILTER_TEXT_AREA_CHARS	(QFILTER_AREA_BYTES / 3 * 4 + 1)

typedef struct QFilterData
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	uint32		version;		/* QFILTER_VERSION */
	Oid			elemtype;		/* type of the hashed keys, or InvalidOid */
	uint32		seed;			/* hash seed (SS_DEFAULT_SEED) */
	uint8		rbits;			/* remainder bits */
	uint8		space_exp;		/* M = space_mult * 2^space_exp */
	uint8		reserved;		/* 0 */
	uint8		flags;			/* 0, reserved */
	uint32		area_bytes;		/* stride of the areas: qfilter_area_stride,
								 * or QFILTER_AREA_BYTES */
	int64		capacity;		/* as requested (a sizing hint) */
	float8		fp_rate;		/* as requested */
	uint64		total;			/* sum of all counts, saturating at 2^64-1 */
	uint64		space_mult;		/* odd */
	uint32		nhome;			/* home slots per area */
	uint32		npages;			/* areas */
	/* npages areas of area_bytes bytes */
	char		areas[FLEXIBLE_ARRAY_MEMBER];
} QFilterData;

#define QFILTER_HEADER_SIZE		offsetof(QFilterData, areas)

/* The header of versions 1 and 2 (2^page_bits areas follow it). */
typedef struct QFilterDataV2
{
	int32		vl_len_;
	uint32		version;
	Oid			elemtype;
	uint32		seed;
	uint8		rbits;
	uint8		slot_bits;		/* home slots per area = 2^slot_bits */
	uint8		page_bits;		/* areas = 2^page_bits */
	uint8		flags;
	uint32		area_bytes;
	int64		capacity;
	float8		fp_rate;
	uint64		total;
	char		areas[FLEXIBLE_ARRAY_MEMBER];
} QFilterDataV2;

#define QFILTER_HEADER_SIZE_V2	offsetof(QFilterDataV2, areas)

/*
 * A value argument detoasted, and converted to version 3 if it is of an
 * earlier version (qfilter_current).
 */
extern QFilterData *qfilter_detoast(Datum d);
extern QFilterData *qfilter_current(struct varlena *v);

#define DatumGetQFilterP(X)		qfilter_detoast(X)
#define PG_GETARG_QFILTER_P(n)	DatumGetQFilterP(PG_GETARG_DATUM(n))

static inline uint32
qfilter_npages(const QFilterData *qf)
{
	return qf->npages;
}

/* Bits of the space M (ceil(log2 M)): what a fingerprint takes. */
static inline int
qfilter_fp_bits(const QFilterData *qf)
{
	return qf->space_exp +
		(qf->space_mult > 1 ? pg_leftmost_one_pos64(qf->space_mult) + 1 : 0);
}

/* Home slots of the filter (M / 2^rbits). */
static inline double
qfilter_home_slots(const QFilterData *qf)
{
	return (double) qf->nhome * qf->npages;
}

/*
 * The distinct fingerprints the filter holds before it grows: the load it
 * is sized for (the tables' qf_sized_load) of its home slots.
 */
static inline double
qfilter_max_items(const QFilterData *qf)
{
	return qf_sized_load(qf->fp_rate) * qfilter_home_slots(qf);
}

static inline char *
qfilter_area(const QFilterData *qf, uint64 page)
{
	return unconstify(char *, &qf->areas[0]) + (Size) page * qf->area_bytes;
}

/* Bytes of a value with npages areas of area_bytes. */
static inline Size
qfilter_value_size(uint32 npages, uint32 area_bytes)
{
	return QFILTER_HEADER_SIZE + (Size) area_bytes * npages;
}

/*
 * The stride of the areas of nhome home slots at rbits that a value is
 * written with: qf_trimmed_area_bytes (whole 64-bit words, and whole 3-byte
 * groups of the text form), for nhome and rbits in range.  At most
 * QFILTER_AREA_BYTES when nhome is at most a full area's home slots.
 */
static inline uint32
qfilter_area_stride(uint32 nhome, int rbits)
{
	return (uint32) qf_trimmed_area_bytes(nhome, rbits);
}

/*
 * Why a geometry is unusable for a qfilter value (a palloc'd sentence for
 * an errdetail), or NULL if it is fine.
 */
extern char *qfilter_geometry_problem(int rbits, uint64 space_mult,
									  int space_exp, uint32 nhome,
									  uint32 npages, uint32 area_bytes);

/* The area geometry of a value whose header passed qfilter_check_header. */
extern void qfilter_geom(const QFilterData *qf, QfGeom *g);

/*
 * Geometry for the requested capacity and false-positive rate (above):
 * rbits, the space and the base's areas.  ERROR
 * (ERRCODE_INVALID_PARAMETER_VALUE) unless capacity >= 1 and 0 < fp_rate
 * < 1; ERROR (ERRCODE_PROGRAM_LIMIT_EXCEEDED) if the value would exceed
 * QFILTER_MAX_PAGES areas or the space 2^64.
 */
extern void qfilter_params(int64 capacity, double fp_rate, int *rbits,
						   uint64 *space_mult, int *space_exp,
						   uint32 *nhome, uint32 *npages);

/* A new empty filter in CurrentMemoryContext (parameters already valid). */
extern QFilterData *qfilter_alloc(Oid elemtype, uint32 seed, int rbits,
								  uint64 space_mult, int space_exp,
								  uint32 nhome, uint32 npages,
								  uint32 area_bytes, int64 capacity,
								  double fp_rate, uint64 total);
extern QFilterData *qfilter_create_empty(int64 capacity, double fp_rate,
										 uint32 seed, Oid elemtype);

/*
 * A value of version 1 or 2 (its header and areas as stored) as a version
 * 3 value in CurrentMemoryContext; ERRCODE_DATA_CORRUPTED if its header is
 * invalid.
 */
extern QFilterData *qfilter_upgrade(const QFilterDataV2 *old);

/*
 * qf if its areas are trimmed (qfilter_area_stride), else its fingerprints
 * laid out anew in trimmed areas of the same shape, or of the next smaller
 * rbits that they fit (qfilter_grow) when they need more slack than
 * trimmed areas have, as a filter built from them would have grown: a new
 * value in CurrentMemoryContext.  For values of earlier versions (converted
 * or not: qfilter_upgrade) and page-sized ones, which inputs trim so that
 * the same fingerprints read back as the value built from them.  qf's
 * areas must have been checked.
 */
extern QFilterData *qfilter_trim(QFilterData *qf);

/* Why a version 1 or 2 header's geometry is unusable, or NULL. */
extern char *qfilter_geometry_problem_v2(uint32 version, int rbits,
										 int slot_bits, int page_bits,
										 uint32 area_bytes);

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
 * The same fingerprints at rbits - k remainder bits (2^k times the home
 * slots) for the smallest k >= kmin that fits them (at most 95% load, no
 * area overflowing); a new value in CurrentMemoryContext.  A step that
 * keeps a power-of-two nhome splits every area in two with qf_split_area;
 * otherwise the areas are laid out anew from the fingerprints.  ERROR
 * (ERRCODE_PROGRAM_LIMIT_EXCEEDED) when rbits would drop below 1 or the
 * value exceed QFILTER_MAX_PAGES.
 */
extern QFilterData *qfilter_grow(const QFilterData *qf, int kmin);

/*
 * Union (counts add up, saturating) of two filters with the same seed,
 * space and (when both have one) key type; otherwise ERROR
 * (ERRCODE_INVALID_PARAMETER_VALUE).  The result has the home slots of the
 * larger input, or more until the union fits, in the canonical shape
 * (qf_space_shape), and the larger of the requested capacities and
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
extern void qfilter_areas_swap_external(char *areas, uint32 npages,
										uint32 area_bytes);

#endif							/* QFILTER_H */
