/*-------------------------------------------------------------------------
 *
 * bcms.h
 *	  The buffered count-min sketch table access method `bcms`
 *	  (Goswami et al., "Buffered Count-Min Sketch on SSD", ESA 2018).
 *
 * Relation layout (buffered mode):
 *	block 0						metapage (BcmsMetaData)
 *	blocks 1 .. k				sketch pages: depth x cols_per_page int64
 *								counters each (CmsGeometry, see cms_geom.h)
 *	blocks k+1 .. k+nbufpages	buffer pages: subbufs_per_page sub-buffers
 *								of subbuf_cap BcmsBufEntry each
 *
 * Sub-buffer s belongs to sketch page s.  An update of a key is appended to
 * the sub-buffer of its page (hash localization: h0 picks the page); when a
 * sub-buffer is full, it is applied to its sketch page in one page write, so
 * an update costs k*w*r/M page writes amortized (M = total sub-buffer bytes,
 * w*r = one entry).  An estimate reads one buffer page (hot) and one sketch
 * page.  The buffer pages are touched constantly, so they stay in
 * shared_buffers like GIN's pending list.
 *
 * Plain mode is the paper's baseline, the classic count-min sketch: row j
 * is a contiguous array of width counters, so a key's depth counters are on
 * depth different pages; no buffering.
 *
 * Committed updates arrive through the change log (ss_changelog.h);
 * consolidation appends them to the sub-buffers.  A partition of the log is
 * a sketch page with its sub-buffer, whose applied_pos lives in the buffer
 * page (in the sketch page's special space without sub-buffers, and in each
 * page's in plain mode).
 *
 * Locking order: a sub-buffer's buffer page before its sketch page; the
 * metapage alone, never while holding another buffer lock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BCMS_H
#define BCMS_H

#include "postgres.h"

#include "cms_geom.h"
#include "ss_page.h"
#include "utils/rel.h"

#define BCMS_MODE_BUFFERED	0
#define BCMS_MODE_PLAIN		1

/* Parameters: frozen into the metapage (and the table's label). */
typedef struct BcmsParams
{
	uint32		mode;			/* BCMS_MODE_* */
	uint32		depth;			/* rows r */
	uint64		width;			/* requested width (columns per row) */
	float8		epsilon;		/* as requested (or e/width) */
	float8		delta;			/* as requested (or exp(-depth)) */
	uint32		buffer_kb;		/* requested total sub-buffer size M */
	bool		conservative;	/* conservative update */
	uint32		seed;			/* hash seed */

	/* derived by bcms_derive_geometry() */
	CmsGeometry geom;			/* buffered: sketch pages */
	uint32		subbuf_cap;		/* entries per sub-buffer, 0 = unbuffered */
	uint32		subbufs_per_page;
	uint32		nbufpages;
	uint32		plain_pages;	/* plain: pages of counters */
} BcmsParams;

typedef struct BcmsMetaData
{
	SSMetaHeader hdr;
	BcmsParams	params;
	int64		items;			/* rows inserted (committed) */
	int64		total_weight;	/* n: sum of committed weights */
	int64		flushes;		/* sub-buffers applied to sketch pages */
} BcmsMetaData;

/* One buffered update: the hash half that picks the cells, and its weight. */
typedef struct BcmsBufEntry
{
	uint64		h2;
	int64		weight;
} BcmsBufEntry;

/* Per-relation state cached in rd_amcache. */
typedef struct BcmsState
{
	BcmsParams	p;
	Oid			keytype;
	int16		keylen;
	bool		keybyval;
	bool		weighted;
	Oid			weighttype;
} BcmsState;

#define PLAIN_COUNTERS_PER_PAGE		CMS_COUNTERS_PER_PAGE

static inline BlockNumber
bcms_sketch_blkno(const BcmsParams *p, uint32 page)
{
	return 1 + page;
}

static inline BlockNumber
bcms_buffer_blkno(const BcmsParams *p, uint32 page)
{
	return 1 + p->geom.npages + page / p->subbufs_per_page;
}

/*
 * A buffer page: the fill counts of its sub-buffers, then each
 * sub-buffer's applied_pos (the change log position up to which records
 * were applied to the sub-buffer and its sketch page, ss_changelog.h),
 * then the sub-buffers.
 */
#define BCMS_BUF_HEADER_SIZE(spp) \
	(MAXALIGN((Size) (spp) * sizeof(uint32)) + (Size) (spp) * sizeof(uint64))

static inline uint32 *
bcms_buf_counts(Page page)
{
	return (uint32 *) SSPageGetData(page);
}

static inline uint64 *
bcms_buf_applied(Page page, const BcmsParams *p)
{
	return (uint64 *) (SSPageGetData(page) +
					   MAXALIGN(p->subbufs_per_page * sizeof(uint32)));
}

static inline BcmsBufEntry *
bcms_buf_entries(Page page, const BcmsParams *p, uint32 sketch_page)
{
	uint32		slot = sketch_page % p->subbufs_per_page;

	return (BcmsBufEntry *) (SSPageGetData(page) +
							 BCMS_BUF_HEADER_SIZE(p->subbufs_per_page) +
							 (Size) slot * p->subbuf_cap * sizeof(BcmsBufEntry));
}

static inline SSHash
bcms_entry_hash(const BcmsBufEntry *e)
{
	SSHash		h = {0, e->h2};

	return h;
}

/* plain mode: where row `row` of a key lives */
static inline uint64
bcms_plain_index(const BcmsParams *p, SSHash h, uint32 row)
{
	uint64		col = (uint64) (((unsigned __int128) ss_hash_row(h.h2, row) * p->width) >> 64);

	return (uint64) row * p->width + col;
}

/* bcms_am.c */
extern BcmsState *bcms_get_state(Relation rel);
extern void bcms_derive_geometry(BcmsParams *p);
extern void bcms_check_epsilon_delta(double epsilon, double delta);
extern const struct SSStructure bcms_structure;

/* What a consolidation round adds to the metapage. */
typedef struct BcmsStats
{
	int64		items;
	int64		total_weight;
	int64		flushes;
} BcmsStats;

/* what bcms_parts_of needs; stats (or NULL) takes a round's counts */
typedef struct BcmsConsolidation
{
	Relation	rel;
	const BcmsParams *p;
	BcmsStats  *stats;
} BcmsConsolidation;

/* bcms_consolidate.c */
struct SSConsolidation;
struct SSPendingHeader;
extern bool bcms_consolidate(struct SSConsolidation *c);
extern int	bcms_parts_of(const struct SSPendingHeader *hdr,
						  const char *payload, uint32 *parts, void *arg);
extern void bcms_add_stats(void *meta, const void *stats);
extern void bcms_check_meta(Relation rel, const void *meta);
extern int64 bcms_flush_all(Relation rel, void *stats);
extern void bcms_check_merge_record(Relation rel, const BcmsParams *p,
									const struct SSPendingHeader *hdr,
									const char *payload);

/* bcms_query.c */

#endif							/* BCMS_H */
