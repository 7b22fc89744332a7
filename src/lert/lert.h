/*-------------------------------------------------------------------------
 *
 * lert.h
 *	  The `lert` table access method: leveled external-memory reporting
 *	  tables (Pandey et al., SIGMOD 2020) on the storage layer's change log.
 *	  The rules are in lert_core.h, the page formats in lert_page.h, the
 *	  design in docs/lert.md.
 *
 * Relation layout: block 0 is the metapage (LertMeta: parameters, every
 * cone's descriptor, the report directory, the free extents); every other
 * block belongs to an extent (level 0 of a cone, a run, a report extent)
 * or to the change log, but the pool's two spill pages.  Extents are
 * reserved with ss_log_alloc_run and recycled through the pool of free
 * extents (the metapage's list and a spill page, lert_pool.c).
 *
 * Two kinds of positions: log positions (bytes of the change log, the
 * storage layer's) say which records a page has applied; stream positions
 * (observations, LertMeta.stream_pos) are what reports and bounds speak of.
 *
 * Each cone is a consolidation lane (lert_lanes.c): a cone's round passes
 * over the change log from the cone's own log position and applies the
 * records of its keys, so sessions consolidate different cones at once.
 *
 * Crash safety of a cone's round (lert_consolidate.c): level-0 pages are
 * changed in backend memory and written back at the end of the round, each
 * with the log position it has applied up to; before that, one metapage
 * record "settles" the round (the cone's settled_pos): the reports it made
 * become valid and the cone's level-0 entry count is stored.  The cone's
 * log position moves past the round only after the write-back.  A round
 * redone after a crash skips, per page, the records the page has applied,
 * makes no report for a record before settled_pos (it is already valid)
 * and counts no new entry for one either.  A merge writes its runs and the
 * cone's new level 0 out of place and installs them, with its reports and
 * a settle, in one metapage record.
 *
 * Locking: a cone's pages (level 0, runs) and its part of the metapage are
 * written only under the cone's lock (LERT_CONE_LOCK), by its rounds and
 * by lert_flush and VACUUM, which take the change log's consolidation lock
 * first.  What cones share is changed under the space lock
 * (LERT_SPACE_LOCK, taken after a cone's): the report stream and the
 * counters (lert_round_install), and the free extents: the pool, and
 * what each cone's round reserved from it (lert_store.c); the storage
 * layer's part of the metapage is its own.
 * Buffer locks are taken one page at a time everywhere: a page is copied
 * in or written out under its own lock, never while another is held, and
 * the metapage is locked alone (installs, readers).
 *
 *-------------------------------------------------------------------------
 */
#ifndef LERT_H
#define LERT_H

#include "postgres.h"

#include "lert_core.h"
#include "lert_page.h"
#include "ss_page.h"
#include "ss_pending.h"
#include "ss_test.h"
#include "access/tableam.h"
#include "port/pg_bitutils.h"
#include "utils/rel.h"

#define LERT_MAX_CONES			16

/* lock tags (LockPage), never real blocks; below the storage layer's */
#define LERT_SPACE_LOCK			((BlockNumber) 0xFFFFFFF0)
#define LERT_CONE_LOCK(c)		((BlockNumber) (0xFFFFFFE0 + (c)))
#define LERT_MAX_FREE_EXTENTS	128
#define LERT_FREE_POOL			0xFF	/* free_cone of an unreserved extent */
/*
 * The spill page: version, count, flags, then extents, then (with
 * LERT_SPILL_TAGGED) each extent's tag (lert_pool.c).  Pages of builds
 * before the tags have flags 0 and list up to LERT_MAX_SPILL_UNTAGGED
 * pool extents.
 */
#define LERT_SPILL_HEADER		16
#define LERT_SPILL_TAGGED		0x1
#define LERT_MAX_SPILL_EXTENTS \
	((uint32) ((SS_PAGE_DATA_SIZE - LERT_SPILL_HEADER) / (sizeof(SSExtent) + 1)))
#define LERT_MAX_SPILL_UNTAGGED \
	((uint32) ((SS_PAGE_DATA_SIZE - LERT_SPILL_HEADER) / sizeof(SSExtent)))
#define LERT_MAX_REPORT_EXTENTS 40
#define LERT_REPORT_EXTENT_MAX	(1U << 17)	/* pages: 1 GB */
#define LERT_CHANNEL_LEN		64	/* NAMEDATALEN */
/*
 * Level 0 is meant to stay in memory: a round keeps its changed pages in
 * backend memory, and a flush collects what it keeps in one buffer.
 */
#define LERT_MAX_BUFFER_KB		(1024 * 1024)

/*
 * Keys of up to LERT_INLINE_KEY_BYTES are stored as they are.  A longer
 * varlena key (a toasted text, say) is stored compressed (pglz) as a
 * LertLongKey header and the compressed bytes, zero-padded to more than
 * LERT_INLINE_KEY_BYTES: the stored length tells the two forms apart, and
 * two keys are equal iff their stored forms are, as compression is
 * deterministic.  This is btree's rule for index rows: the key must fit a
 * page after compression.  A stored key takes at most LERT_MAX_KEY_BYTES:
 * entries never span pages, and an empty level-0 page must take any entry
 * (a page full of keys put back at level 0 is emptied by a flush); a run page
 * wastes at most one entry's size at its end.
 */
#define LERT_INLINE_KEY_BYTES	2000
#define LERT_MAX_KEY_BYTES		2400
#define LERT_MAX_LONG_KEY_BYTES (1024 * 1024)	/* before compression */

typedef struct LertLongKey
{
	uint32		rawlen;			/* the key's length */
	uint32		complen;		/* compressed bytes after the header */
} LertLongKey;

/* Parameters: frozen into the metapage (and the table's label). */
typedef struct LertParams
{
	uint32		seed;
	uint32		buffer_kb;		/* level 0's size, all cones */
	uint32		ncones;			/* a power of two, 1..LERT_MAX_CONES */
	uint32		hash_bits;		/* fingerprint bits (test only: < 64) */
	LertGeom	geom;			/* level0_capacity: per cone */
	char		channel[LERT_CHANNEL_LEN];	/* NOTIFY channel, "" = none */
} LertParams;

/* A run of consecutive blocks. */
typedef SSExtent LertExtent;

/* An index entry: a data page of a run. */
typedef struct LertIndexEntry
{
	uint64		first_fp;
	BlockNumber blkno;
	uint32		unused;
} LertIndexEntry;

#define LERT_INDEX_HEADER	16	/* gen, count */
#define LERT_INDEX_PER_PAGE \
	((uint32) ((SS_PAGE_DATA_SIZE - LERT_INDEX_HEADER) / sizeof(LertIndexEntry)))

/*
 * An on-disk level of a cone: ndata data pages (entries in key order),
 * allocated in chunks wherever there is room, and its index pages, one
 * extent listing each data page's block and first fingerprint.  A run
 * with entries flagged LERT_RUN_KEPT (lert_page.h) has a Bloom filter of
 * their fingerprints on the pages after its index pages, in the same
 * extent (lert_run_filter_pages).
 */
typedef struct LertRun
{
	LertExtent	index;			/* index pages, then filter pages */
	uint32		ndata;
	uint32		nkept;			/* entries flagged LERT_RUN_KEPT */
	int64		nentries;
	uint64		gen;			/* stamped on its pages */
} LertRun;

static inline uint32
lert_run_index_pages(const LertRun *run)
{
	return (uint32) (((uint64) run->ndata + LERT_INDEX_PER_PAGE - 1) /
					 LERT_INDEX_PER_PAGE);
}

static inline uint32
lert_run_filter_pages(const LertRun *run)
{
	return run->nkept > 0 ? run->index.npages - lert_run_index_pages(run) : 0;
}

/*
 * A cone is also a consolidation lane (lert_lanes.c): it passes over the
 * change log on its own, under its own lock, from log_pos (on page
 * log_blk; a position not past the log head means the head), where the
 * committed stream stands at stream_pos.
 */
typedef struct LertCone
{
	uint64		log_pos;		/* records before it are the cone's */
	int64		stream_pos;		/* observations before log_pos */
	uint64		settled_pos;	/* see "Crash safety" above */
	uint64		next_gen;		/* of its pages (lert_new_gen) */
	BlockNumber log_blk;
	uint32		flush_offset;	/* added to its flushes' numbers (lert_am.c) */
	uint64		flushes;		/* merges so far */
	int64		last_flush;		/* stream position of the last one */
	int64		level0_limit;	/* entries that make level 0 full */
	int64		level0_entries; /* as of the metapage's settled_pos */
	LertExtent	level0;			/* its pages, by fingerprint range */
	uint64		level0_gen;
	int64		max_level0;		/* largest level 0 so far (entries) */
	LertRun		runs[LERT_MAX_LEVELS + 1];	/* [1..nlevels] */
} LertCone;

typedef struct LertMeta
{
	SSMetaHeader hdr;
	LertParams	params;
	int64		stream_pos;		/* observations consolidated (at the log
								 * head); added with the head's move */
	int64		nreports;		/* valid reports */
	uint32		nreport_ext;
	LertExtent	report_ext[LERT_MAX_REPORT_EXTENTS];
	uint32		report_tail;	/* page index (over the extents) of the last
								 * report, or 0 */
	uint32		nfree;
	LertExtent	free_ext[LERT_MAX_FREE_EXTENTS];	/* in block order */
	uint8		free_cone[LERT_MAX_FREE_EXTENTS];	/* LERT_FREE_POOL or the
														 * cone that reserved
														 * it (lert_store.c) */
	int64		merges;
	int64		point_queries;
	uint32		max_keylen;		/* longest key consolidated so far */
	uint32		format;			/* LERT_FORMAT_* it was created with */
	LertCone	cones[LERT_MAX_CONES];
	/* pool extents beyond free_ext: on spill_blk[spill_cur] (lert_pool.c) */
	BlockNumber spill_blk[2];	/* 0: not allocated yet */
	uint32		spill_cur;
	uint32		nspill;
	uint64		spill_version;
} LertMeta;

/*
 * The lert's own format, beside the storage layer's (SSMetaHeader).  A
 * lert created before LERT_FORMAT_REPORT_COUNTS (format 0) may hold
 * entries flagged reported whose first_pos is a position, not the count
 * at the report (LertCount): its lookups of the count read the report
 * stream instead (lert_path.c).  Every other rule reads the same pages
 * alike, so such a lert is read and written as before; TRUNCATE, or a
 * dump and restore, makes it current.
 */
#define LERT_FORMAT_REPORT_COUNTS	1
#define LERT_FORMAT_CURRENT			LERT_FORMAT_REPORT_COUNTS

StaticAssertDecl(sizeof(LertMeta) <= SS_PAGE_DATA_SIZE,
				 "a LERT's metapage fits a page");

/* What a round adds to the metapage with the log head's move. */
typedef struct LertStats
{
	int64		observations;
} LertStats;

/* The change log record of one insert (SS_PENDING_ITEM). */
typedef struct LertItem
{
	uint64		fp;
	int64		count;
	uint32		keylen;			/* key bytes after the struct */
	uint32		unused;
} LertItem;

/* Per-relation state cached in rd_amcache. */
typedef struct LertState
{
	LertParams	p;
	Oid			keytype;
	int16		keylen;
	bool		keybyval;
	bool		fixed_key;		/* the fingerprint is the key */
	Oid			inttype;		/* count column, or InvalidOid */
	/* while the parameters are read (lert_am.c: taus, notify) */
	bool		derive_taus;	/* taus '': lert_derive gives them */
	char	   *notify_text;	/* notify's text, until lert_check_params */
} LertState;

/*
 * The form of a new level-0 page (lert_page.h): fixed when the fingerprint
 * is the key and the variant keeps no disk count at level 0 (immediate
 * does, LERT_DISK_KNOWN).
 */
static inline uint16
lert_level0_form(const LertState *st)
{
	return st->fixed_key && st->p.geom.variant != LERT_IMMEDIATE ?
		LERT_L0_FIXED : LERT_L0_KEYED;
}

/* ---- lert_am.c ---- */
extern const struct SSStructure lert_structure;
extern LertState *lert_get_state(Relation rel);
extern const struct SSScanOps lert_scan_ops;
extern void lert_check_meta(Relation rel, const void *meta);
extern uint64 lert_key_fingerprint(const LertState *st, Datum key,
								   char **bytes, uint32 *len, bool *free_bytes);
extern Datum lert_key_datum(const LertState *st, uint64 fp, const char *bytes,
							uint32 len);

/* ---- geometry of a cone's level 0 ---- */
static inline uint32
lert_cone_of(const LertParams *p, uint64 fp)
{
	return p->ncones == 1 ? 0 :
		(uint32) (fp >> (64 - pg_leftmost_one_pos32(p->ncones)));
}

/*
 * The geometry of the time-stretch schedule: level 0 is all the cones'
 * together.  Each cone flushes every K C0 / 2^a observations of the
 * stream (its own capacity C0 receives about C0 / 2^a of them meanwhile),
 * as one level 0 of the cones' whole capacity would, and places counts by
 * the merge periods that follow from it (lert_place): only the period of
 * each level's merges enters the bound.
 */
static inline void
lert_schedule_geom(const LertParams *p, LertGeom *out)
{
	*out = p->geom;
	out->level0_capacity *= p->ncones;
}

/* the level-0 page (0 .. npages-1) of a fingerprint, in fingerprint order */
static inline uint32
lert_level0_page(const LertParams *p, uint64 fp, uint32 npages)
{
	uint64		below = p->ncones == 1 ? fp :
		fp << pg_leftmost_one_pos32(p->ncones);

	return (uint32) (((unsigned __int128) below * npages) >> 64);
}

/* pages of a new level 0 for limit entries of about keylen key bytes */
extern uint32 lert_level0_pages(int64 limit, uint16 form, double avg_keylen);

/*
 * A new generation for a page of cone `cone` (meta: the cone's round's
 * copy).  Cones count apart, so that rounds of different cones never
 * hand out the same one; a page stamped with another's is not the cone's.
 */
static inline uint64
lert_new_gen(LertMeta *meta, uint32 cone)
{
	return meta->cones[cone].next_gen++ * LERT_MAX_CONES + cone;
}

/* ---- lert_store.c: extents, pages, runs, reports ---- */
extern LertExtent lert_extent_alloc(Relation rel, LertMeta *meta,
									uint32 cone, BlockNumber npages);
extern LertExtent lert_extent_alloc_some(Relation rel, LertMeta *meta,
										 uint32 cone, BlockNumber npages);
extern void lert_extent_free(LertMeta *meta, LertExtent ext);
extern void lert_meta_set_free(LertMeta *m, const LertMeta *src);
extern void lert_copy_overflow_reset(const LertMeta *copy);
extern const LertExtent *lert_copy_overflow(const LertMeta *copy, uint32 *n);

/* ---- lert_pool.c: the pool at installs, its spill page ---- */
struct LertRound;
extern void lert_pool_give_back(struct LertRound *r, LertMeta *cur);
extern LertExtent lert_pool_reserve(Relation rel, uint32 cone,
									BlockNumber npages, bool lowest);
extern int64 lert_pool_spill_pages(Relation rel, const LertMeta *meta);
extern void lert_pool_take_reserved(Relation rel, uint32 cone,
									LertMeta *copy);
extern void lert_write_page(Relation rel, BlockNumber blkno, uint16 page_type,
							const char *area, uint64 applied_pos, bool full);

typedef enum LertPageStatus
{
	LERT_OK,
	LERT_STALE					/* freed and reused, or not written yet */
} LertPageStatus;

#define LERT_ANY_GEN	PG_UINT64_MAX	/* report pages: never reused */

extern LertPageStatus lert_read_page(Relation rel, BlockNumber blkno,
									 uint16 page_type, uint64 gen, char *area,
									 uint64 *applied_pos);
extern void lert_read_page_owned(Relation rel, BlockNumber blkno,
								 uint16 page_type, uint64 gen, char *area,
								 uint64 *applied_pos);
extern bool lert_read_meta(Relation rel, LertMeta *meta);
extern void lert_run_free(Relation rel, LertMeta *meta, LertRun *run);

/* A key's counts in the on-disk levels of its cone from level `from` on. */
typedef struct LertDiskCount
{
	int64		count;
	int64		first_pos;
	bool		reported;
	bool		stale;			/* a run page changed under the reader */
	bool		kept_found;		/* an entry flagged LERT_RUN_KEPT was met */
	int64		kept;			/* the first such entry's level-0 count */
} LertDiskCount;

#define LERT_DISK_COUNT_INIT {0, -1, false, false, false, 0}

extern void lert_run_lookup(Relation rel, const LertRun *run, uint64 fp,
							const char *key, uint32 keylen,
							LertDiskCount *out);
extern bool lert_cone_lookup(Relation rel, const LertMeta *meta, uint64 fp,
							 const char *key, uint32 keylen, char *area,
							 LertDiskCount *d, bool *l0_kept,
							 uint64 *applied);
extern bool lert_run_may_keep(Relation rel, const LertRun *run, uint64 fp);
extern void lert_run_prefetch_filter(Relation rel, const LertRun *run,
									 uint64 fp);
extern void lert_run_prefetch_data(Relation rel, const LertRun *run,
								   uint64 fp, char *iarea);

/* Writing a run: data pages filled in order, then the index. */
typedef struct LertRunWriter
{
	Relation	rel;
	LertMeta   *meta;			/* the round's copy: frees, generations */
	uint32		cone;
	LertRun		run;
	LertExtent	chunk;			/* pages taken for data, not yet used */
	BlockNumber next_chunk;		/* size of the next chunk to take */
	char	   *page;			/* the data page being filled */
	LertIndexEntry *index;		/* of every data page written */
	uint32		index_cap;
	char	   *filter;			/* filter pages being built, or NULL */
	uint32		nfilter;
} LertRunWriter;

extern void lert_run_writer_begin(LertRunWriter *w, Relation rel,
								  LertMeta *meta, uint32 cone);
extern void lert_run_writer_keep(LertRunWriter *w, int64 max_kept);
extern void lert_run_writer_add(LertRunWriter *w, const LertEntry *e,
								const char *key);
extern void lert_run_writer_end(LertRunWriter *w);

/*
 * Looking up many keys of a run in key order (a flush's batch of kept
 * counts): the whole index in memory, the data pages of the next keys
 * prefetched, each data page read once for all the keys on it.
 */
typedef struct LertRunSeeker
{
	Relation	rel;
	LertRun		run;
	LertIndexEntry *index;		/* every data page */
	int64		loaded;			/* data page in area, or -1 */
	char	   *area;
} LertRunSeeker;

extern void lert_run_seeker_begin(LertRunSeeker *s, Relation rel,
								  const LertRun *run);
extern void lert_run_seeker_prefetch(LertRunSeeker *s, uint64 fp);
extern bool lert_run_seeker_find(LertRunSeeker *s, uint64 fp, const char *key,
								 uint32 keylen, LertEntry *e);
extern void lert_run_seeker_end(LertRunSeeker *s);

/* Reading a run in order. */
typedef struct LertRunReader
{
	Relation	rel;
	LertRun		run;
	uint32		page;			/* next data page to load */
	uint32		off;
	char	   *area;
	char	   *index_area;		/* the index page of the next data page */
	int64		index_loaded;	/* which one, or -1 */
	bool		loaded;
	/*
	 * A reader without the cone's lock (lert_counts) sets unowned after
	 * begin: a page freed and reused under it then ends the run early with
	 * stale set, instead of being reported as damage.
	 */
	bool		unowned;
	bool		stale;
} LertRunReader;

extern void lert_run_reader_begin(LertRunReader *r, Relation rel,
								  const LertRun *run);
extern const LertEntry *lert_run_reader_next(LertRunReader *r);
extern void lert_run_reader_end(LertRunReader *r);

/* Reports. */
typedef struct LertReportRec
{
	int64		reported_pos;
	int64		count;
	int64		first_pos;
	TimestampTz at;
	uint64		fp;
	uint32		keylen;
	uint32		unused;
} LertReportRec;

extern void lert_reports_append(Relation rel, LertMeta *meta,
								const char *recs, Size len, int64 n);

typedef struct LertReportIter
{
	Relation	rel;
	int64		nreports;		/* valid when the metapage was read */
	uint32		nreport_ext;
	LertExtent	report_ext[LERT_MAX_REPORT_EXTENTS];
	uint32		tail;
	int64		after;
	uint32		page;			/* next page to load */
	char	   *area;
	bool		loaded;
	int64		valid;			/* valid reports on the loaded page */
	int64		idx;
	uint32		off;
} LertReportIter;

extern void lert_report_iter_begin(LertReportIter *it, Relation rel,
								   const LertMeta *meta, int64 after);
extern const LertReportRec *lert_report_iter_next(LertReportIter *it,
												  int64 *id, const char **key);
extern void lert_report_iter_end(LertReportIter *it);

/* ---- lert_query.c, lert_path.c: reading ---- */
extern bool lert_read_current(Relation rel, LertMeta *meta);
extern Datum lert_count_datum(Oid inttype, int64 count);
extern void lert_wait_round(Relation rel);
extern bool lert_record_item(const SSPendingHeader *hdr, const char *payload,
							 LertItem *item);
extern void lert_lookup(Relation rel, const LertState *st, Datum keyd,
						int64 *count, bool *reported);
extern const struct SSPathOps lert_path_ops;
extern void lert_columns(Relation rel, AttrNumber *key, AttrNumber *count);
struct SSColumnClause;
extern bool lert_key_qual(Form_pg_attribute att,
						  const struct SSColumnClause *c);

/* ---- lert_counts.c: every key's exact count, lert_counts() ---- */
extern void lert_counts_init(void);

/* streamsketch.test_lert_crash: where a consolidation stops the server */
typedef enum LertCrashPoint
{
	LERT_CRASH_NONE,
	LERT_CRASH_MERGED,			/* a merge wrote its runs and level 0 */
	LERT_CRASH_REPORTS_WRITTEN, /* an install wrote its report pages */
	LERT_CRASH_INSTALLED,		/* a checkpoint installed, no page written */
	LERT_CRASH_WRITEBACK,		/* a checkpoint wrote one level-0 page */
	LERT_CRASH_SPILLED,			/* a round wrote a new spill page version */
	LERT_CRASH_RESERVED			/* a reservation's record, with a
								 * reservation on the spill page */
} LertCrashPoint;

extern SSTestCrash lert_crash;
extern int	ss_test_lert_round_wait;
extern int	ss_test_lert_free_extents;

#define lert_test_crash(rel, point) ss_test_crash(&lert_crash, rel, point)

/* ---- lert_lanes.c, lert_consolidate.c ---- */
struct SSConsolidation;
extern bool lert_consolidate(struct SSConsolidation *c);
extern bool lert_consolidate_some(Relation rel, bool wait);
extern void lert_add_stats(void *meta, const void *stats);
extern int64 lert_flush_all(Relation rel, void *stats);

#endif							/* LERT_H */
