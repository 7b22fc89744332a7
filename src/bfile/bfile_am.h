/*-------------------------------------------------------------------------
 *
 * bfile_am.h
 *	  The `bfile` access method's state and what its files share
 *	  (bfile_am.c, bfile_consolidate.c, bfile_scan.c, bfile_query.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BFILE_AM_H
#define BFILE_AM_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tableam.h"
#include "bfile.h"
#include "utils/tuplestore.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_test.h"
#include "streamsketch.h"

#define BFILE_MAX_SAMPLE	(INT64CONST(1) << 40)

/* rd_amcache: the metapage's parameters */
typedef struct BfileState
{
	BfileParams params;
	/* L as last read by an insert, and when (level_floor() in bfile_am.c) */
	int32		level_floor;
	LocalTransactionId floor_lxid;
	CommandId	floor_cid;
	uint32		floor_rows;
	/* alpha^(need - 1) for the last need (draw_level() in bfile_am.c) */
	int32		keep_need;
	double		keep_probability;
} BfileState;

extern const SSStructure bfile_structure;

/* settings of the columns (streamsketch.bfile_*_column) */
extern char *ss_bfile_weight_column;
extern char *ss_bfile_time_column;
extern int64 bfile_sample_bytes(const BfileMeta *m);

/* Is a sample of size rows and bytes of items over its bound s_max? */
static inline bool
bfile_over_bound(const BfileParams *p, int64 size, int64 bytes)
{
	return size >= p->sample_size ||
		(p->sample_bytes > 0 && bytes >= p->sample_bytes);
}

extern BfileState *bfile_get_state(Relation rel);
extern const char *bfile_mode_name(uint32 mode);
extern uint32 bfile_unroll_every(double alpha, uint32 nbuckets);
extern void bfile_check_weight_type(const char *name, Oid typid);
extern double bfile_weight_value(Oid typid, Datum d);
extern void bfile_check_time_type(const char *name, Oid typid);
extern int64 bfile_time_key(Oid typid, Datum d);
extern void bfile_init(void);

/* bfile_consolidate.c */
extern void bfile_round(Relation rel, BfileMeta *meta, SSConsolidation *c);
extern uint64 bfile_seed_level(uint32 seed);
extern int32 bfile_item_level(const BfileParams *p, uint64 seed_level,
							  int32 level_now, uint64 seq,
							  const BfileRecordHeader *rh);
extern bool bfile_record_read(Relation rel, const BfileParams *p, int64 *seen,
							  const SSPendingHeader *hdr, const char *payload,
							  BfileRecordHeader *rh, uint32 *tuplen, uint64 *seq);

/* streamsketch.test_bfile_crash: where a round stops the server (tests) */
typedef enum BfileCrashPoint
{
	BFILE_CRASH_NONE,
	BFILE_CRASH_DISCARDED,		/* a bucket freed, pages written, not installed */
	BFILE_CRASH_UNROLLED,		/* the tail unrolled, not installed */
	BFILE_CRASH_INSTALLED		/* the round installed, the log not moved */
} BfileCrashPoint;

extern SSTestCrash bfile_crash;

#define bfile_test_crash(rel, point) ss_test_crash(&bfile_crash, rel, point)

/* bfile_scan.c: reading a bucket's chain, newest page first */
typedef struct BfileChain
{
	Relation	rel;
	BfileBucket bucket;
	BlockNumber next_blk;		/* next page */
	uint64		next_stamp;
	uint32		pages_read;
	char	   *area;			/* the page being read */
	uint32		visible;		/* its items in the sample */
	uint32		item;			/* next item */
	Size		off;
	int32		item_level;		/* the level of the item last returned */
	uint32		item_bytes;		/* and its bytes, header included */
} BfileChain;

extern void bfile_chain_begin(BfileChain *it, Relation rel, const BfileBucket *b);
extern bool bfile_chain_next(BfileChain *it, HeapTuple htup);
extern void bfile_chain_end(BfileChain *it);
extern bool bfile_read_meta(Relation rel, BfileMeta *meta);

/*
 * bfile_view.c: what a reader sees, the installed sample with the
 * committed rows still in the change log drawn as the next round will
 * draw them (docs/bfile.md, "Readers").
 */
typedef struct BfileView
{
	BfileMeta  *meta;			/* the installed sample */
	int32		level;			/* L with the log's rows */
	int64		size;			/* the sample's rows with the log's */
	int64		bytes;			/* and their bytes as stored */
	int64		seen;			/* the stream's items with the log's */
	int64		discards;		/* with those the log's rows would make */
	int64		log_rows;		/* the log's rows in the sample */
	bool		no_round;		/* in: never run a round first (bfile_info) */
} BfileView;

extern bool bfile_view_read(Relation rel, BfileView *v,
							Tuplestorestate *rows, TupleDesc desc,
							int64 lo, int64 hi);
extern bool bfile_view_bucket_visible(const BfileView *v, const BfileBucket *b);
extern void bfile_item_tuple(Relation rel, const char *item, HeapTuple htup);
extern void bfile_minimal_tuple(Relation rel, MinimalTuple mt, uint32 len,
								HeapTuple htup);
extern const SSScanOps bfile_scan_ops;

/* bfile_query.c */
extern void bfile_window_rows(Relation rel, int64 lo, int64 hi,
							  TupleDesc desc, Tuplestorestate *out);

/* bfile_path.c: the planner's window path (SSStructure.paths) */
extern const SSPathOps bfile_path_ops;

#endif							/* BFILE_AM_H */
