/*-------------------------------------------------------------------------
 *
 * cms.h
 *	  The in-memory `cms` type: a hash-localized count-min sketch in one
 *	  varlena, laid out exactly like the sketch pages of a `bcms` relation
 *	  (see cms_geom.h) so that bcms_merge() can add it page by page.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CMS_H
#define CMS_H

#include "postgres.h"

#include "cms_geom.h"
#include "utils/memutils.h"

#define CMS_VERSION		1

typedef struct CmsData
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	uint32		version;		/* CMS_VERSION */
	Oid			elemtype;		/* type of the hashed keys, or InvalidOid */
	uint32		seed;			/* hash seed (SS_DEFAULT_SEED) */
	uint32		depth;			/* CmsGeometry */
	uint32		cols_per_page;
	uint32		npages;
	uint32		unused;
	float8		epsilon;		/* as requested */
	float8		delta;
	int64		total;			/* n: sum of all weights added */
	/* npages blocks of depth * cols_per_page counters, row-major per page */
	int64		counters[FLEXIBLE_ARRAY_MEMBER];
} CmsData;

#define CMS_HEADER_SIZE		offsetof(CmsData, counters)

#define DatumGetCmsP(X)		((CmsData *) PG_DETOAST_DATUM(X))
#define PG_GETARG_CMS_P(n)	DatumGetCmsP(PG_GETARG_DATUM(n))

static inline void
cms_get_geometry(const CmsData *cms, CmsGeometry *g)
{
	g->depth = cms->depth;
	g->cols_per_page = cms->cols_per_page;
	g->npages = cms->npages;
}

/*
 * Size limit of a cms value.  Every counter takes at most 13 characters in
 * the text form (base-32 digits of a 63-bit value, see cms.c), so bounding
 * the number of counters by what 13 characters each fit in MaxAllocSize,
 * less a reserve for the header and for the protocol message or COPY line
 * that carries the text, guarantees that every valid value can also be
 * printed (and therefore dumped by pg_dump).  That caps the binary value at
 * about 660 MB.
 */
#define CMS_TEXT_MAX_COUNTER_CHARS	13
#define CMS_TEXT_HEADER_RESERVE		65536
#define CMS_MAX_COUNTERS \
	((MaxAllocSize - CMS_TEXT_HEADER_RESERVE) / CMS_TEXT_MAX_COUNTER_CHARS)

/* Largest npages allowed for a sketch of the given depth (1..CMS_MAX_DEPTH). */
extern uint32 cms_max_npages(uint32 depth);

/* Bytes of a cms value with the given geometry (no overflow for any input). */
extern uint64 cms_value_size(const CmsGeometry *g);

/*
 * Geometry for the error bounds epsilon and delta (depth ceil(ln 1/delta),
 * width ceil(e/epsilon) rounded up to whole pages), validated for a cms
 * value: ERROR with ERRCODE_INVALID_PARAMETER_VALUE unless both are in
 * (0,1), the depth is at most CMS_MAX_DEPTH and the value fits
 * cms_max_npages().
 */
extern void cms_geometry_for_bounds(double epsilon, double delta,
									CmsGeometry *g);

/*
 * A new all-zero cms value in CurrentMemoryContext.  The geometry must come
 * from cms_geometry_init() and fit cms_max_npages(); otherwise ERROR with
 * ERRCODE_INVALID_PARAMETER_VALUE (or PROGRAM_LIMIT_EXCEEDED for size).
 * epsilon and delta are informational (the requested guarantee), both in
 * (0,1); elemtype may be InvalidOid (estimates then accept any key type).
 */
extern CmsData *cms_create_empty(const CmsGeometry *g, uint32 seed,
								 Oid elemtype, double epsilon, double delta);

/*
 * Validate a cms value (from disk, the client or a merge): ERROR if bad.
 * cms_check_header() checks the fixed fields and that the varlena size
 * matches the geometry, in O(1); cms_check() additionally checks every
 * counter: 0 <= counter <= total, and (unless total saturated) every row's
 * counters sum to at most total, which holds for plain and conservative
 * updates and is preserved by merges.  Both report ERRCODE_DATA_CORRUPTED.
 */
extern void cms_check_header(const CmsData *cms);
extern void cms_check(const CmsData *cms);

/* The counters of logical page p. */
static inline int64 *
cms_page_counters_ptr(CmsData *cms, uint32 page)
{
	return cms->counters + (Size) page * cms->depth * cms->cols_per_page;
}

/* Add weight (>= 0) for a key hash; total saturates like the counters. */
extern void cms_add_hash(CmsData *cms, SSHash h, int64 weight);

/* Estimate of a key hash. */
extern int64 cms_estimate_hash(const CmsData *cms, SSHash h);

/*
 * Add src into dst counter by counter.  ERROR (ERRCODE_INVALID_PARAMETER_
 * VALUE) unless seed, geometry and (when both are set) elemtype agree.
 * dst takes src's elemtype if it had none, and the larger epsilon and
 * delta, i.e. the weaker of the two requested guarantees.
 */
extern void cms_merge_into(CmsData *dst, const CmsData *src);

#endif							/* CMS_H */
