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

/* Validate a cms value (from disk, the client or a merge): ERROR if bad. */
extern void cms_check(const CmsData *cms);

#endif							/* CMS_H */
