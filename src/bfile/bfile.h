/*-------------------------------------------------------------------------
 *
 * bfile.h
 *	  The `bfile` table access method: a B-FILE (Nath and Gibbons, VLDB
 *	  2008) keeping a random sample of every committed row in the
 *	  relation's pages, on the storage layer's change log (docs/bfile.md).
 *
 * Relation layout: block 0 is the metapage (BfileMeta); every other block
 * is a bucket page, a free page or a change-log page.  A bucket is a chain
 * of pages linked newest to oldest; the metapage holds each bucket's
 * newest page and the number of its items the last install made visible.
 * Only a bucket's newest page is ever written, and only past its visible
 * items, until the page is freed; a freed chain is reused once no
 * snapshot can still reach it (its stamp, as the cbt's extents).
 *
 * Positions: BfileMeta.stream_pos is the change log position up to which
 * the sample holds the committed items; a round skips records before it,
 * so a round redone after a crash between its install and the storage
 * layer's move of the log head counts nothing twice.  Item i of the
 * stream draws its level from the seed and i alone, so a redone round
 * makes the same sample.
 *
 * Locking: rounds (and bfile_flush, VACUUM) serialize on the change log's
 * consolidation lock and are the only writers of bucket pages; they
 * install by one metapage record.  Readers lock one page at a time,
 * briefly, to copy it; they never wait for a round.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BFILE_H
#define BFILE_H

#include "postgres.h"

#include "access/transam.h"
#include "ss_page.h"
#include "utils/rel.h"

#define BFILE_MAX_BUCKETS		32	/* N */
#define BFILE_MAX_FREE			96	/* free chains the metapage holds */
#define BFILE_MAX_LEVEL			(1 << 24)
#define BFILE_ALLOC_RUN			8	/* new pages reserved at once */

typedef enum BfileMode
{
	BFILE_UNIFORM,
	BFILE_WEIGHTED,
	BFILE_DECAYED,
	BFILE_WEIGHTED_DECAYED
} BfileMode;

#define BFILE_MODE_WEIGHTED(m)	((m) == BFILE_WEIGHTED || (m) == BFILE_WEIGHTED_DECAYED)
#define BFILE_MODE_DECAYED(m)	((m) == BFILE_DECAYED || (m) == BFILE_WEIGHTED_DECAYED)

/* parameters, captured at creation (streamsketch.bfile_*) */
typedef struct BfileParams
{
	int64		sample_size;	/* s_max, rows (BFILE_MAX_SAMPLE: bounded by bytes) */
	int64		sample_bytes;	/* s_max, bytes of items; 0: bounded by rows */
	double		alpha;			/* s_min / s_max, in (0, 1) */
	uint32		nbuckets;		/* N individual buckets */
	uint32		unroll_every;	/* u: discards between unrolls */
	uint32		mode;			/* BfileMode */
	int32		weight_attnum;	/* weighted modes: the weight column */
	uint32		seed;
	int32		time_attnum;	/* the time column; 0: arrival order */
} BfileParams;

/* A bucket: a chain of pages, newest first. */
typedef struct BfileBucket
{
	BlockNumber head;			/* newest page; InvalidBlockNumber: empty */
	uint32		head_items;		/* items of the newest page in the sample */
	uint64		head_stamp;		/* the newest page's allocation stamp */
	int64		items;
	uint64		bytes;			/* of its items */
	uint32		pages;
	int32		level;			/* its level; the tail: the lowest it holds */
	int64		max_key;		/* the largest time key appended */
	uint32		unordered;		/* a key came below max_key: no skipping */
	uint32		unused;
} BfileBucket;

/* A freed chain: reusable once no snapshot can reach it. */
typedef struct BfileFreeChain
{
	BlockNumber head;
	uint32		pages;
	uint64		head_stamp;
	FullTransactionId stamp;
} BfileFreeChain;

/*
 * The stamp of a chain freed by a round not installed yet: later than any
 * xid, so never reused before the install stamps it.
 */
#define BFILE_STAMP_PENDING	FullTransactionIdFromU64(PG_UINT64_MAX)

/* A run of reserved new pages (bfile_page_alloc). */
typedef struct BfileSpareRun
{
	BlockNumber start;
	uint32		count;
} BfileSpareRun;

#define BFILE_MAX_SPARE		16
#define BFILE_MAX_RUN		65536	/* pages; runs double up to it */

/* metapage contents */
typedef struct BfileMeta
{
	SSMetaHeader hdr;
	BfileParams params;
	int32		level;			/* L: the lowest level in the sample */
	int32		tail_level;		/* T: the lowest level the tail holds */
	uint32		discards_since_unroll;
	uint32		nbuckets_live;	/* individual buckets: levels L .. T-1 */
	int64		size;			/* items in the sample */
	int64		seen;			/* committed stream items consolidated */
	uint64		stream_pos;		/* change log position consolidated to */
	uint64		alloc_stamp;	/* the last page allocation's stamp */
	uint32		nspare;			/* reserved runs of new pages */
	uint32		round_runs;		/* runs the round reserved so far */
	int64		discards;
	int64		unrolls;
	int64		leaked_pages;	/* dropped from a full free list */
	uint64		data_bytes;		/* bytes of the items in the sample */
	uint32		nfree;
	uint32		unused;
	int64		added;			/* items ever put in the sample */
	int64		pages_written;	/* bucket page writes (full images) */
	BfileBucket buckets[BFILE_MAX_BUCKETS];	/* [i]: level L + i */
	BfileBucket tail;
	BfileFreeChain free_chains[BFILE_MAX_FREE];
	/*
	 * New pages reserved at the end of the file and not used by the
	 * installed sample: each run is recorded here in the live metapage
	 * when it is reserved, so a round that fails (or crashes) leaves its
	 * runs to the next round instead of losing them.
	 */
	BfileSpareRun spare[BFILE_MAX_SPARE];
} BfileMeta;

StaticAssertDecl(sizeof(BfileMeta) <= SS_PAGE_DATA_SIZE,
				 "the bfile metapage must fit in a page");

/*
 * Skip lists over a bucket's pages (§5.2, Algorithm 2): a page of skip
 * level k (P(k) = 4^-(k-1), at most BFILE_SKIP_LEVELS) is pointed to at
 * levels 2..k by the newer pages up to the next one of such a level.
 * skip[i] is the newest older page of level >= i + 2, with its smallest
 * time key, so a search decides whether to jump without reading it.
 */
#define BFILE_SKIP_LEVELS	8

typedef struct BfileSkip
{
	BlockNumber blk;			/* InvalidBlockNumber: none */
	uint32		unused;
	uint64		stamp;
	int64		min_key;
} BfileSkip;

/* A bucket page's header, at the start of its data area. */
typedef struct BfilePageHeader
{
	uint64		stamp;			/* its allocation stamp */
	uint64		prev_stamp;		/* the older page's */
	BlockNumber prev;			/* the older page of its chain */
	int32		level;			/* its bucket's level (the tail's lowest) */
	uint32		nitems;
	uint32		used;			/* bytes of items after this header */
	/*
	 * A page taken from a freed chain remembers its place there (its stamp
	 * and the chain's next page), so that a round redone after a crash,
	 * whose free list still has the page, can take it again.
	 */
	BlockNumber was_next;
	uint64		was_stamp;		/* 0: a new page */
	uint64		was_next_stamp;
	int64		min_key;		/* of its items' time keys */
	int64		max_key;
	uint32		skip_level;		/* 1 .. BFILE_SKIP_LEVELS */
	uint32		unused;
	BfileSkip	skip[BFILE_SKIP_LEVELS - 1];
} BfilePageHeader;

/* An item: this header, then the row as a minimal tuple; 8-aligned. */
typedef struct BfileItemHeader
{
	uint32		len;			/* bytes of the item, header included */
	int32		level;
	uint64		seq;			/* its index in the committed stream */
	int64		key;			/* its time key (seq without a time column) */
} BfileItemHeader;

/*
 * The record an INSERT appends to the change log, before the row.  An item
 * whose level cannot reach the sample's L (read at the insert; L never
 * falls) is dropped at the insert and only counted: in skipped of the
 * record before it, or of a record without a row that stands for skipped
 * items alone.  An item kept is one whose draw g >= min_draw (probability
 * alpha^(min_draw - 1)); the round draws g given that, from the seed and
 * the stream index (docs/bfile.md, "Levels at the insert").
 */
typedef struct BfileRecordHeader
{
	double		weight;			/* 1 unless weighted */
	int64		key;			/* time key; 0 without a time column */
	uint64		skipped;		/* items dropped after this one */
	int32		level_offset;	/* the weight's part of the level */
	int32		min_draw;		/* g >= this; 1: every item kept */
	bool		has_key;
	bool		has_row;		/* false: stands for skipped items only */
	char		pad[6];
} BfileRecordHeader;

#define BFILE_PAGE_ROOM		(SS_PAGE_DATA_SIZE - MAXALIGN(sizeof(BfilePageHeader)))
#define BFILE_ITEM_BYTES(tuplen) MAXALIGN(sizeof(BfileItemHeader) + (tuplen))
#define BFILE_MAX_TUPLE		(BFILE_PAGE_ROOM - sizeof(BfileItemHeader))

/* bfile_store.c: pages */
extern void bfile_stale_page(Relation rel, BlockNumber blkno)
			pg_attribute_noreturn();
extern void bfile_read_page(Relation rel, BlockNumber blkno, uint64 stamp,
							char *area);
extern void bfile_write_page(Relation rel, BlockNumber blkno, const char *area);
extern BlockNumber bfile_page_alloc(Relation rel, BfileMeta *meta,
									uint64 *stamp, BfilePageHeader *was);
extern void bfile_chain_free(BfileMeta *meta, const BfileBucket *b);
extern void bfile_check_page(Relation rel, BlockNumber blkno, const char *area,
							 uint32 visible);

#endif							/* BFILE_H */
