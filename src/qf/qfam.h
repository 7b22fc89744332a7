/*-------------------------------------------------------------------------
 *
 * qfam.h
 *	  The quotient filter family of table access methods (Bender et al.,
 *	  "Don't Thrash: How to Cache Your Hash on Flash", VLDB 2012).
 *
 * A filter is a list of levels; each level is a quotient filter cut into
 * pages, one independent QF area (qf.h) per page, so every operation
 * touches one page and no shift ever crosses a page boundary.  The key's
 * fingerprint is y, its hash's h1 reduced to the filter's fingerprint space
 * (qf.h, qf_space_y), split as page | quotient | remainder; every level
 * uses the same space, so levels merge and resize without rehashing.
 *
 *	quotient_filter		one level, updated in place; it grows (doubling its
 *						pages, one remainder bit becomes a page bit) when a
 *						page overflows or the load passes qfam_max_load.
 *	buffered_quotient_filter
 *						level 0 is a smaller QF of buffer_size bytes whose
 *						pages stay hot in shared_buffers; when it fills it
 *						is merged with level 1 (the big on-disk QF) by one
 *						sequential pass that rewrites level 1 in place and
 *						one metapage update that installs it.
 *	cascade_filter		the COLA of QFs: level 0 as above, level i holds
 *						fanout^i times level 0 (sized down from the
 *						capacity's level); when level 0 fills, levels
 *						0..i are merged into the smallest level i that can
 *						hold them, in place unless level i is new or
 *						grows.  Lookups probe every
 *						non-empty level; counts add up over levels and
 *						deletes remove from the newest level holding the
 *						fingerprint.
 *
 * Relation layout: block 0 metapage; each level occupies a contiguous run of
 * blocks starting at its base.  A resize (and a merge into a new level)
 * writes the new level in a run reserved after everything allocated so far
 * (ss_log_alloc_run: change-log pages and level runs share that space) and
 * switches to it with one metapage update, so a crash never leaves a
 * half-resized filter (the old run becomes dead space, which VACUUM FULL
 * drops).  A merge in place is recorded in the metapage while it runs
 * (QfamMeta.merge_target, qfam_merge.c).
 *
 * Committed inserts and deletes reach the levels from the change log
 * (ss_changelog.h) by consolidation (qfam_consolidate.c); readers add the
 * committed records still in the log (qfam_query.c).
 *
 * Locking: every write of the levels runs under the change log's
 * consolidation lock (rounds, qf_resize); a merge also takes the page
 * lock on block 0 (heavyweight) exclusively, which qf_merge() holds in
 * share mode while it reads a source filter.  Buffer locks: one level page
 * at a time, then the metapage.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QFAM_H
#define QFAM_H

#include "postgres.h"

#include "common/int.h"

#include "qf.h"
#include "ss_page.h"
#include "utils/rel.h"

#define QFAM_MAX_LEVELS		32
#define QFAM_MAX_LOAD		QF_MAX_LOAD
#define QFAM_MAX_PAGE_BITS	27	/* 1 TB of pages */
#define QFAM_BUFFER_KB_MAX	(64 * 1024 * 1024)	/* level 0: at most 64 GB */

#define QFAM_KIND_QF		1	/* quotient_filter */
#define QFAM_KIND_BQF		2	/* buffered_quotient_filter */
#define QFAM_KIND_CF		3	/* cascade_filter */

typedef struct QfamParams
{
	uint32		kind;			/* QFAM_KIND_* */
	uint32		seed;
	int64		capacity;		/* as requested */
	float8		fp_rate;		/* as requested */
	uint32		fanout;			/* cascade filter: size ratio of levels */
	uint32		buffer_pages;	/* BQF/CF: pages of level 0 (the RAM level) */
	uint32		fp_bits;		/* fingerprint bits of every level */
	uint32		t_max;			/* log2 home slots holding capacity */
	uint32		t0;				/* log2 home slots of level 0 */
	uint32		layout;			/* page layout t0 was derived with */
} QfamParams;

/*
 * Page layouts, in QfamParams.layout and QfamLevel.layout.  0 is what
 * earlier builds left in those fields: pages of four metadata bit arrays
 * ("QFA1" areas, qf_geom_init_legacy), still read and written in place.
 * 2: three arrays, the counter bit folded into continuation and shifted
 * (qf.h, "QFA2").  Every level a merge or growth writes has the current
 * layout, so a relation of an earlier build converts level by level; its
 * parameters keep layout 0, with which its level 0 size t0 was derived.
 */
#define QFAM_LAYOUT_LEGACY	0
#define QFAM_LAYOUT			2

/*
 * 3: a filter sized to its capacity (QfamParams.layout and every level's).
 * Its areas are those of layout 2, but a page holds nhome home slots, any
 * number.  The level holding the capacity, t_max, has P pages of every
 * home slot its area allows with slack (qf_geom_init at the rate's
 * remainder bits, fp_bits - t_max), or for a filter of one page the
 * capacity's (qfam_sized_plan); the space is M = P * nhome *
 * 2^(fp_bits - t_max), level t has P * nhome * 2^(t - t_max) home slots
 * and fp_bits - t remainder bits.  A quotient_filter has t_max = 0: it
 * starts at its capacity; so does a buffered or cascade filter whose
 * buffer holds that level.  Other buffered and cascade filters have their
 * levels sized top-down from it: level 0 (t = t0 = 0) is t_max halvings
 * below, and a level below t_max has nhome / 2^k home slots per page,
 * pages of 2^b base pages' fingerprints (qf_nested_shape; nhome rounded
 * to a multiple of a power of two, at most 2^QFAM_SIZED_ALIGN_BITS, for
 * the levels to nest).  Growth past t_max doubles the home
 * slots per page while they fit, else the pages (qfam_sized_level).  So
 * every page of a larger level lies within one page of a smaller one (the
 * applied_pos protocol, qfam_merge.c).  Tables of layouts 0 and 2 keep
 * theirs.
 */
#define QFAM_LAYOUT_SIZED	3
#define QFAM_SIZED_ALIGN_BITS	8

/*
 * A level holds 2^t home slots: 2^page_bits pages of 2^slot_bits home slots
 * with rbits = fp_bits - t remainder bits.  Layout 3 (see above) keeps its
 * home slots per page in the two bytes instead (qfam_level_nhome).  Pages whose epoch (in the page's
 * special space) differs from the level's are logically empty, so emptying
 * a level after a merge is one metapage update.
 */
typedef struct QfamLevel
{
	BlockNumber base;			/* first block */
	BlockNumber alt_base;		/* a spare run of the same size, or Invalid */
	uint8		t;
	uint8		page_bits;
	uint8		slot_bits;
	uint8		rbits;
	uint16		epoch;
	uint16		layout;			/* QFAM_LAYOUT or QFAM_LAYOUT_LEGACY */
	int64		items;			/* distinct fingerprints */
	int64		total;			/* sum of counts */
} QfamLevel;

/*
 * Where a level's fingerprints go: the space M = mult * 2^exp (qf.h), the
 * remainder bits, home slots per page and pages (qfam_level_map).
 */
typedef struct QfamMap
{
	uint64		mult;
	int			exp;
	int			rbits;
	uint32		nhome;
	uint64		npages;
} QfamMap;

typedef struct QfamMeta
{
	SSMetaHeader hdr;
	QfamParams	params;
	uint32		nlevels;
	int64		merges;			/* level merges and resizes so far */
	QfamLevel	levels[QFAM_MAX_LEVELS];

	/*
	 * A merge written in place into an existing level (qfam_merge.c), or
	 * merge_target = 0: the target is level merge_target - 1, the sources
	 * are the other levels below merge_nsrc, and the target's pages already
	 * rewritten (a prefix of its run) have epoch merge_epoch, the one the
	 * level takes when the merge is installed.
	 */
	uint16		merge_target;
	uint16		merge_nsrc;
	uint16		merge_epoch;
} QfamMeta;

/*
 * A merge in place as the levels' readers see it: fingerprints of the
 * target's pages below `done` are in those pages only (their copies in the
 * sources are not counted again).
 */
typedef struct QfamMergeView
{
	bool		active;
	uint32		target;
	uint32		nsrc;
	uint16		epoch;			/* merge_epoch */
	uint64		done;			/* target pages [0, done) are rewritten */
	QfamMap		tmap;			/* the target level's map */
} QfamMergeView;

/*
 * Level pages use the whole data area: the QF area, then (at the end) what
 * the page's last delete removed, for the delete protocol of
 * qfam_consolidate.c.  applied_pos is in the special space (ss_page.h).
 */
#define QFAM_LEVEL_DATA_SIZE		SS_PAGE_DATA_SIZE
#define QFAM_LAST_REMOVED_OFFSET	(SS_PAGE_DATA_SIZE - sizeof(uint64))

StaticAssertDecl(QF_PAGE_AREA_BYTES <= QFAM_LAST_REMOVED_OFFSET,
				 "a level page has room after its area");

/* What a reader takes from the key's page of one level. */
typedef struct QfamPageRead
{
	uint64		count;
	uint64		applied;		/* the page's applied_pos */
	uint64		last_removed;	/* copies its last delete removed */
	/*
	 * The page is not of its level's generation although the level was
	 * written by a merge and holds items: damage, unless a merge moved
	 * the level meanwhile (the reader checks the merge counter first).
	 */
	BlockNumber stale_blk;		/* or InvalidBlockNumber */
	bool		merged_in;		/* a page a merge in place has rewritten */
} QfamPageRead;

typedef struct QfamState
{
	QfamParams	p;
	Oid			keytype;
	int16		keylen;
	bool		keybyval;
	bool		counted;		/* second column gives the count */
	Oid			counttype;
} QfamState;

/* A level's fingerprints in increasing order (qfam_merge.c). */
typedef struct QfamCursor
{
	Relation	rel;
	QfamLevel	lv;
	uint32		level;
	bool		merged;			/* a level other than 0 */
	const QfamMergeView *view;	/* a merge in place, or NULL */
	BufferAccessStrategy strategy;	/* ring its pages are read through */
	BlockNumber nblocks;
	uint64		page;			/* page being iterated */
	uint64		npages;
	bool		valid;			/* fp/count hold the current fingerprint */
	uint64		fp;				/* fingerprint (qfam_map_join) */
	uint64		count;
	QfIter		iter;
	QfGeom		g;
	QfamMap		map;
	char	   *area;			/* copy of the current page's area */
} QfamCursor;

/* Where a test stops a merge in place (streamsketch.test_qf_merge_stop). */
typedef enum QfamMergeStop
{
	QFAM_STOP_NONE,
	QFAM_STOP_CRASH,
	QFAM_STOP_ERROR,
	QFAM_STOP_OVERFLOW,
} QfamMergeStop;

/* qfam_am.c */
extern struct SSTestCrash qfam_merge_stop;
extern QfamState *qfam_get_state(Relation rel);
extern void qfam_derive(QfamParams *p);
extern const struct SSStructure qfam_structure;
extern void qfam_level_geom(const QfamLevel *lv, QfGeom *g);
extern void qfam_level_shape(const QfamParams *p, QfamLevel *lv, uint32 t);
extern void qfam_sized_level(const QfamParams *p, uint32 t, uint64 *pages,
							 uint32 *nhome);
extern void qfam_level_map(const QfamParams *p, const QfamLevel *lv,
						   QfamMap *m);
extern void qfam_space(const QfamParams *p, uint64 *mult, int *exp);

/* qfam_consolidate.c */
struct SSConsolidation;
extern bool qfam_consolidate(struct SSConsolidation *c);
extern bool qfam_admit(Relation rel, uint64 log_records, bool final);
extern bool qfam_read_meta(Relation rel, QfamMeta *meta);
extern void qfam_check_meta(Relation rel, const void *meta);
extern void qfam_first_level(const QfamParams *p, QfamMeta *meta);
extern void qfam_make_room(Relation rel, const QfamState *st, bool grow);
extern void qfam_level_read(Relation rel, const QfamMeta *meta, uint32 level,
							uint64 h1, QfamPageRead *out);
extern void qfam_reads_resolve(const QfamMeta *meta, QfamPageRead *reads,
							   uint32 nread);
extern uint64 qfam_page_applied(Relation rel, const QfamLevel *lv, uint64 page);
extern bool qfam_page_valid(Relation rel, BlockNumber blkno, Page page,
							const QfamLevel *lv, bool merged, bool locked);

/* qfam_compact.c */
extern void qfam_compact(Relation OldTable, Relation NewTable);

/* qfam_merge.c */
extern BufferAccessStrategy qfam_level_read_ring(uint32 kind, uint32 level);
extern void qfam_merge_view(Relation rel, const QfamMeta *meta,
							QfamMergeView *view);
extern void qfam_cursor_init(QfamCursor *c, Relation rel, const QfamMeta *meta,
							 uint32 level, const QfamMergeView *view,
							 BufferAccessStrategy strategy);
extern bool qfam_cursor_next(QfamCursor *c);
extern void qfam_cursor_end(QfamCursor *c);
extern bool qfam_merge_levels(Relation rel, QfamMeta *meta, uint32 nsrc,
							  uint32 target, uint32 target_t);
extern bool qfam_finish_merge(Relation rel, QfamMeta *meta);

/* Page, quotient and remainder of hash h1 in a level. */
static inline void
qfam_map_split(const QfamMap *m, uint64 h1, uint64 *page, uint32 *quotient,
			   uint64 *remainder)
{
	qf_space_split(qf_space_y(h1, m->mult, m->exp), m->rbits, m->nhome,
				   page, quotient, remainder);
}

/* The hash standing for the fingerprint at (page, quotient, remainder). */
static inline uint64
qfam_map_join(const QfamMap *m, uint64 page, uint32 quotient,
			  uint64 remainder)
{
	return qf_space_hash(qf_space_join(page, quotient, remainder, m->rbits,
									   m->nhome), m->mult, m->exp);
}

/*
 * Have the levels moved between two reads of the metapage?  Every merge
 * installed moves the counter, and a merge in place, which rewrites a live
 * level, is recorded when it starts.
 */
static inline bool
qfam_levels_moved(const QfamMeta *before, const QfamMeta *after)
{
	return before->merges != after->merges ||
		before->merge_target != after->merge_target;
}

/* Home slots per page of a level of layout 3 (page_bits and slot_bits). */
static inline uint32
qfam_level_nhome(const QfamLevel *lv)
{
	return (uint32) lv->page_bits | (uint32) lv->slot_bits << 8;
}

/*
 * The load past which level 0 grows: a filter sized to its capacity grows
 * past the load it was sized for, the earlier layouts past QFAM_MAX_LOAD.
 */
static inline double
qfam_max_load(const QfamParams *p)
{
	return p->layout == QFAM_LAYOUT_SIZED ? qf_sized_load(p->fp_rate) :
		QFAM_MAX_LOAD;
}

/*
 * Home slots of level t: 2^t in the earlier layouts; layout 3 counts them
 * from the capacity's level (P * nhome at t_max).
 */
static inline double
qfam_level_slots(const QfamParams *p, uint32 t, uint64 mult, int exp)
{
	if (p->layout == QFAM_LAYOUT_SIZED)
		return ldexp((double) mult, exp - ((int) p->fp_bits - (int) t));
	return ldexp(1.0, (int) t);
}

/*
 * log2 home slots of level `level` of a cascade filter (step = log2
 * fanout): level 0 at t0, level i fanout^i times larger.  Layout 3 counts
 * the levels above 0 down from the capacity's, t_max: level 1 is the
 * smallest of them above level 0, 2 to fanout times its size.
 */
static inline uint32
qfam_level_t(const QfamParams *p, uint32 level, uint32 step)
{
	if (p->layout == QFAM_LAYOUT_SIZED && level > 0)
	{
		uint32		below = (p->t_max + step - 1) / step;	/* levels 1.. up to t_max */

		return p->t_max + level * step - below * step;
	}
	return p->t0 + level * step;
}

/* Bits of the fingerprints y < M of the space mult * 2^exp. */
static inline int
qfam_space_bits(uint64 mult, int exp)
{
	return exp + (mult > 1 ? pg_leftmost_one_pos64(mult) + 1 : 0);
}

/* Home slots of a level. */
static inline double
qfam_map_slots(const QfamMap *m)
{
	return ldexp((double) m->mult, m->exp - m->rbits);
}

/*
 * Per-level counters saturate at PG_INT64_MAX, as the sketch counters do
 * (counts of 2^63 - 1 would wrap a plain sum); deltas may be negative
 * (deletes), and a counter never goes below 0.
 */
static inline int64
qfam_counter_add(int64 a, int64 delta)
{
	int64		r;

	if (pg_add_s64_overflow(a, delta, &r))
		return delta > 0 ? PG_INT64_MAX : 0;
	return Max(r, 0);
}

/* Sum of signed deltas, saturating both ways. */
static inline int64
qfam_delta_add(int64 a, int64 delta)
{
	int64		r;

	if (pg_add_s64_overflow(a, delta, &r))
		return delta > 0 ? PG_INT64_MAX : PG_INT64_MIN;
	return r;
}

/* The change of an area's saturating uint64 total, as a clamped delta. */
static inline int64
qfam_total_delta(uint64 before, uint64 after)
{
	if (after >= before)
		return (int64) Min(after - before, (uint64) PG_INT64_MAX);
	return -(int64) Min(before - after, (uint64) PG_INT64_MAX);
}

#endif							/* QFAM_H */
