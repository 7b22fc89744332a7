/*-------------------------------------------------------------------------
 *
 * cms_geom.h
 *	  Geometry of a hash-localized count-min sketch, shared by the paged
 *	  `bcms` access method and the in-memory `cms` type.
 *
 * The sketch is cut into npages logical pages of depth x cols_per_page
 * 64-bit counters (row-major inside a page).  h1 of the key's hash picks the
 * page (the paper's h0); the depth row hashes pick one column per row inside
 * that page, derived from h2 by double hashing (g1 + i*g2).  A logical page
 * holds exactly the counters of one 8 kB sketch page of a `bcms` relation,
 * so a `cms` value is the concatenation of the data areas of those pages and
 * the two can be merged counter by counter.
 *
 * Counters are signed 64-bit and saturate at PG_INT64_MAX instead of
 * wrapping: a saturated cell still never underestimates.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CMS_GEOM_H
#define CMS_GEOM_H

#include "postgres.h"

#include <math.h>

#include "common/int.h"
#include "ss_hash.h"
#include "ss_page.h"

/* Counters that fit in the data area of one sketch page. */
#define CMS_COUNTERS_PER_PAGE	(SS_PAGE_DATA_SIZE / sizeof(int64))

/* Limits on the parameters (validated with ereport by the callers). */
#define CMS_MAX_DEPTH			32
#define CMS_MAX_PAGES			(1U << 27)	/* 1 TB of sketch pages */

typedef struct CmsGeometry
{
	uint32		depth;			/* rows r = ceil(ln(1/delta)) */
	uint32		cols_per_page;	/* columns of one row inside one page */
	uint32		npages;			/* logical pages k */
} CmsGeometry;

/* depth = ceil(ln 1/delta), width = ceil(e/epsilon). */
static inline uint32
cms_depth_for_delta(double delta)
{
	return (uint32) Max(1, (int) ceil(log(1.0 / delta)));
}

static inline uint64
cms_width_for_epsilon(double epsilon)
{
	return (uint64) ceil(M_E / epsilon);
}

/*
 * Geometry for an explicit width and depth: the width is rounded up to a
 * whole number of pages.  The caller has validated depth <= CMS_MAX_DEPTH.
 */
static inline void
cms_geometry_init(CmsGeometry *g, uint64 width, uint32 depth)
{
	uint64		npages;

	g->depth = depth;
	g->cols_per_page = CMS_COUNTERS_PER_PAGE / depth;
	npages = (width + g->cols_per_page - 1) / g->cols_per_page;
	g->npages = (uint32) Max(1, Min(npages, (uint64) CMS_MAX_PAGES + 1));
}

static inline uint64
cms_geometry_width(const CmsGeometry *g)
{
	return (uint64) g->npages * g->cols_per_page;
}

static inline uint32
cms_page_counters(const CmsGeometry *g)
{
	return g->depth * g->cols_per_page;
}

static inline uint32
cms_page_of(const CmsGeometry *g, SSHash h)
{
	return ss_hash_range(h.h1, g->npages);
}

static inline uint32
cms_cell(const CmsGeometry *g, SSHash h, uint32 row)
{
	return row * g->cols_per_page +
		ss_hash_range(ss_hash_row(h.h2, row), g->cols_per_page);
}

static inline int64
cms_saturating_add(int64 a, int64 b)
{
	int64		r;

	if (pg_add_s64_overflow(a, b, &r))
		return PG_INT64_MAX;
	return r;
}

/* The estimate of a key from the counters of its page. */
static inline int64
cms_page_estimate(const int64 *counters, const CmsGeometry *g, SSHash h)
{
	int64		est = PG_INT64_MAX;

	for (uint32 row = 0; row < g->depth; row++)
		est = Min(est, counters[cms_cell(g, h, row)]);
	return est;
}

/*
 * Add weight (>= 0) for a key to the counters of its page.  With
 * conservative update only the cells that would otherwise fall below
 * estimate + weight are raised, which never breaks the no-underestimate
 * guarantee and reduces overestimates of light keys.
 */
static inline void
cms_page_add(int64 *counters, const CmsGeometry *g, SSHash h, int64 weight,
			 bool conservative)
{
	if (conservative)
	{
		int64		target = cms_saturating_add(cms_page_estimate(counters, g, h),
												weight);

		for (uint32 row = 0; row < g->depth; row++)
		{
			int64	   *c = &counters[cms_cell(g, h, row)];

			if (*c < target)
				*c = target;
		}
	}
	else
	{
		for (uint32 row = 0; row < g->depth; row++)
		{
			int64	   *c = &counters[cms_cell(g, h, row)];

			*c = cms_saturating_add(*c, weight);
		}
	}
}

#endif							/* CMS_GEOM_H */
