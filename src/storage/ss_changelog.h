/*-------------------------------------------------------------------------
 *
 * ss_changelog.h
 *	  The change log: committed changes reach a structure through an
 *	  append-only, xid-stamped log in the relation's own pages.
 *
 * At pre-commit a transaction appends its pending records (ss_pending.h)
 * for each structure it changed as one batch, {length, xid, nrecords}
 * followed by the records, WAL-logged before the commit record.  Nothing
 * else happens inside COMMIT.  A batch counts once its xid committed; a
 * batch whose transaction aborted or crashed before its commit record is
 * never counted and is dropped.
 *
 * Consolidation moves committed batches into the structure (the
 * structure's consolidate callback: sub-buffer appends, flushes, merges) in
 * log order, interruptibly, outside COMMIT: by a reader that finds the log
 * not empty and the consolidation lock free (like heap page pruning; see
 * ss_log_read_begin for the readers that index the log instead), by a
 * writing statement that finds it longer than streamsketch.change_log_limit, in
 * the flush functions and in VACUUM.  It stops at the first batch whose
 * transaction is still committing, so it never waits for one.
 *
 * Exactly once.  A structure is cut into partitions (a page, or a
 * sub-buffer with its page); each partition records the log position up to
 * which records were applied to it ("applied_pos"), written in the same WAL
 * record as the change.  A record applies to a partition iff its position
 * is at or past the partition's applied_pos, so a consolidation cut short
 * by a crash or an error is simply redone, and a reader counts a committed
 * record still in the log iff its position is at or past the applied_pos
 * of the partition it read.  Readers take the log's head from the metapage
 * before they read the structure, so a batch consolidated in between is
 * still in the log they scan; if its pages were recycled meanwhile, the
 * scan notices (positions are never reused) and the reader starts over.
 *
 * Lanes.  A structure may consolidate in lanes of its own
 * (SSStructure.consolidate_some, a LERT's cones): each lane keeps its own
 * log position in the metapage and passes over the log under a lock of
 * its own (ss_log_lane_pass), so that sessions consolidate different lanes
 * at once; the head moves to the slowest lane's position
 * (ss_log_advance_to), and a round (consolidate) brings every lane to its
 * end.
 *
 * Locking.  The append lock (SS_LOG_APPEND_LOCK, a heavyweight page lock)
 * guards the metapage's log end and tail, the free list and alloc_end: an
 * appender holds it only to reserve its batch's range of the log (its
 * pages are built before and filled after, ss_logappend.c), consolidation
 * to move the head and free pages, ss_log_alloc_run to reserve blocks.
 * Consolidators serialize on SS_LOG_CONSOLIDATE_LOCK; a reader takes it
 * only conditionally, to consolidate, and holds no lock while it reads.
 * Heavyweight lock order: the consolidation lock, then a lane's lock or a
 * structure's own (a quotient filter's metapage page lock), then the
 * append lock, under which only the relation extension lock is taken.
 * Buffer locks: in one WAL record, log pages in chain order (the previous
 * page, then the new ones), then the metapage; every page of the record is
 * pinned (read from disk if need be) before the first is locked, so no
 * content lock is held across another page's I/O; a share lock on one log
 * page is taken alone.  A structure's partition pages are locked by its
 * callbacks, never together with a log page.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_CHANGELOG_H
#define SS_CHANGELOG_H

#include "postgres.h"

#include "ss_page.h"
#include "ss_pending.h"
#include "utils/rel.h"

/* lock tags only (LockPage), never real blocks */
#define SS_LOG_APPEND_LOCK			((BlockNumber) 0xFFFFFFFD)
#define SS_LOG_CONSOLIDATE_LOCK		((BlockNumber) 0xFFFFFFFC)

/* a reader that indexes the log consolidates it only up to this length */
#define SS_LOG_READER_CONSOLIDATE_BYTES	(8 * BLCKSZ)


typedef struct SSLogPageHeader
{
	uint64		first_pos;		/* log position of the first data byte */
	BlockNumber next;			/* next page of the chain or free list */
	uint32		used;			/* data bytes on the page */
} SSLogPageHeader;

#define SS_LOG_FREE_POS			PG_UINT64_MAX	/* first_pos of a free page */
#define SS_LOG_PAGE_CAPACITY \
	((uint32) (SS_PAGE_DATA_SIZE - MAXALIGN(sizeof(SSLogPageHeader))))

typedef struct SSLogBatchHeader
{
	uint64		length;			/* bytes of records after this header */
	TransactionId xid;			/* the appending top-level transaction */
	uint32		nrecords;
} SSLogBatchHeader;

/*
 * A record in the log: the pending record's type and payload without the
 * relation (the log is the relation's own).  A key update or delete of
 * weight 1, by far the most common record, omits its weight (16 bytes of
 * hash instead of 24); readers restore it, so callbacks always get an
 * SSPendingHeader and the full payload.  A key record combined from several
 * rows (ss_pending.c) says so in its flags: its rows are its weight (a
 * structure without weights, or rows of weight 1), or follow the
 * SSPendingKey as a uint64; readers put them in SSPendingHeader.rows,
 * which is 1 for every other record.
 */
typedef struct SSLogRecordHeader
{
	uint16		type;			/* SSPendingType */
	uint16		flags;			/* SS_LOG_REC_* */
	uint32		len;			/* payload bytes stored (MAXALIGNed after) */
} SSLogRecordHeader;

#define SS_LOG_REC_WEIGHT1		0x0001	/* SSPendingKey of weight 1, hash only */
#define SS_LOG_REC_ROWS_WEIGHT	0x0002	/* combined: rows = weight */
#define SS_LOG_REC_ROWS			0x0004	/* combined: SSPendingKey, uint64 rows */

extern Size ss_log_record_size(const SSPendingHeader *hdr, const char *payload);

/* What a reader took from the metapage before reading the structure. */
typedef struct SSLogSnapshot
{
	uint64		head_pos;
	uint64		end_pos;
	BlockNumber head_blk;
} SSLogSnapshot;

/*
 * Called for each record of a committed batch, in log order; pos is the
 * record's position.  payload is valid during the call only.
 */
typedef void (*SSLogRecordFn) (uint64 pos, const SSPendingHeader *hdr,
							   const char *payload, void *arg);

struct SSStructure;

extern void ss_log_init(void);
/*
 * Where an append takes a transaction's records from: nrecords records of
 * log_bytes bytes in the log (ss_log_record_size), returned in order by
 * next(arg, ...) until it returns false.  The pending changes of
 * ss_pending.c are the only source; it calls the appender, which does not
 * call it back.
 */
typedef struct SSLogSource
{
	uint64		nrecords;
	uint64		log_bytes;
	void	   *arg;
	bool		(*next) (void *arg, SSPendingHeader *hdr, char **payload);
} SSLogSource;

extern uint64 ss_log_append(Relation rel, const SSLogSource *src);
extern void ss_log_meta(Relation rel, SSLogMeta *log);
extern void ss_log_snapshot(Relation rel, SSLogSnapshot *snap);
extern void ss_log_snapshot_of(Relation rel, const SSMetaHeader *hdr,
							   SSLogSnapshot *snap);
extern void ss_log_read_begin(Relation rel, SSLogSnapshot *snap, int attempt,
							  bool indexed);
extern void ss_log_read_snapshot(Relation rel, SSLogSnapshot *snap,
								 int attempt);
extern bool ss_log_read_begin_meta(Relation rel, const SSMetaHeader *hdr,
								   SSLogSnapshot *snap, int attempt,
								   bool indexed);
extern bool ss_log_scan(Relation rel, const SSLogSnapshot *snap,
						SSLogRecordFn fn, void *arg);
extern bool ss_log_scan_ext(Relation rel, const SSLogSnapshot *snap,
							SSLogRecordFn fn, void *arg, bool *in_progress);
extern bool ss_log_scan_prefix(Relation rel, const SSLogSnapshot *snap,
							   SSLogRecordFn fn, void *arg);
extern bool ss_log_scan_all(Relation rel, SSLogRecordFn fn, void *acc,
							Size acc_size, void *meta);
extern bool ss_log_consolidate(Relation rel, bool wait);
extern void ss_log_lock_consolidation(Relation rel);
extern void ss_log_lane_pass(Relation rel, uint64 start, BlockNumber start_blk,
							 uint64 limit, SSLogRecordFn fn, void *arg,
							 uint64 *reached, BlockNumber *reached_blk,
							 TransactionId *stopped_at);
extern void ss_log_advance_to(Relation rel, uint64 pos, BlockNumber blk,
							  const void *stats);

/* empties a structure's buffers, adding to stats; see ss_log_flush */
typedef int64 (*SSFlushFn) (Relation rel, void *stats);
extern int64 ss_log_flush(Relation rel, const char *operation,
						  SSFlushFn flush);
extern void ss_log_consolidate_if_long(Relation rel, const SSLogSnapshot *snap);
extern void ss_log_vacuum(Relation rel, bool verbose);
extern bool ss_log_consolidate_background(Relation rel);
extern TransactionId ss_log_oldest_xid(Relation rel);
extern BlockNumber ss_log_alloc_run(Relation rel, BlockNumber n);

/*
 * A consolidation round over the log range [start_pos, end_pos) (every
 * batch in it committed or aborted), given to the structure's consolidate
 * callback.  stats is the structure's ops->stats_size bytes, zeroed; the
 * callback adds to it what its metapage counts, and ops->add_stats adds it
 * to the metapage in the WAL record that moves the log head past the
 * range, so a round redone after a crash is counted once.
 */
typedef struct SSConsolidation
{
	Relation	rel;
	uint64		start_pos;
	uint64		end_pos;
	BlockNumber start_blk;
	uint64		nrecords;		/* records in the range, aborted ones too */
	void	   *stats;
} SSConsolidation;

extern void ss_cons_foreach(SSConsolidation *c, SSLogRecordFn fn, void *arg);

/*
 * Consolidation by partition.  parts_of gives the partitions a record
 * changes (at most SS_MAX_RECORD_PARTS, or -1 for every partition);
 * apply_group gets every committed record of one partition in the range,
 * in log order (partitions in increasing order), and must apply those at
 * or past the partition's applied_pos and set it to upto, in one WAL
 * record per page written.  Memory stays within ss_consolidation_memory()
 * (work_mem, maintenance_work_mem in a flush or VACUUM): records are collected until it is used, the
 * collected ones applied, and collection goes on, so a partition's records
 * may come in several groups (upto is then the position after the group's
 * last record).
 */
#define SS_MAX_RECORD_PARTS		64

/*
 * One (record, partition) pair, 40 bytes.  A payload of up to
 * SS_GROUP_INLINE bytes (a key record) is copied into the entry: the
 * entries are sorted by partition, and a pointer into payloads kept in log
 * order made every record of a group a cache miss (a fifth of applying an
 * in-memory quotient filter round).  A longer payload is shared by the
 * record's pairs.
 */
#define SS_GROUP_INLINE		24
#define SS_GROUP_SHARED		PG_UINT16_MAX	/* inline_len: payload.ptr */

typedef struct SSGroupEntry
{
	uint64		pos;
	uint32		part;			/* PG_UINT32_MAX: every partition */
	uint16		type;			/* SSPendingType */
	uint16		inline_len;		/* bytes in payload.data, or SS_GROUP_SHARED */
	union
	{
		const char *ptr;
		uint64		data[SS_GROUP_INLINE / sizeof(uint64)];
	}			payload;
} SSGroupEntry;

static inline const char *
ss_group_payload(const SSGroupEntry *e)
{
	return e->inline_len != SS_GROUP_SHARED ? (const char *) e->payload.data :
		e->payload.ptr;
}

typedef int (*SSPartsOfFn) (const SSPendingHeader *hdr, const char *payload,
							uint32 *parts, void *arg);

/* Add part to the n partitions in parts unless it is there already. */
static inline void
ss_parts_add(uint32 *parts, int *n, uint32 part)
{
	for (int i = 0; i < *n; i++)
	{
		if (parts[i] == part)
			return;
	}
	parts[(*n)++] = part;
}

/* the committed records of some partitions, indexed once (ss_logcache.c) */
extern bool ss_log_scan_parts(Relation rel, const SSLogSnapshot *snap,
							  uint64 stamp, SSPartsOfFn parts_of,
							  void *parts_arg, const uint32 *parts,
							  int nparts, SSLogRecordFn fn, void *arg);
extern void ss_log_cache_init(void);

/* returns false to stop the round (it is then run again, see below) */
typedef bool (*SSApplyGroupFn) (Relation rel, uint32 part,
								const SSGroupEntry *entries, int n,
								uint64 upto, void *arg);

/*
 * Optional: before each chunk of collected records, how many entries the
 * chunk may hold (a quotient filter: the room left in level 0, after
 * making room if there is none), or -1 to stop the round.
 */
typedef int (*SSChunkRoomFn) (Relation rel, void *arg);

/*
 * Returns false if apply_group or chunk_room stopped the round; the
 * consolidate callback then returns false too, and the round is run again
 * from its start (records a partition applied are skipped by its
 * applied_pos), with its stats zeroed.
 */
extern bool ss_cons_by_partition(SSConsolidation *c, uint32 nparts,
								 SSPartsOfFn parts_of,
								 SSApplyGroupFn apply_group,
								 SSChunkRoomFn chunk_room, void *arg);
/* (sub)transaction abort: rounds begun at nest_level or deeper are over */
extern void ss_cons_at_abort(int nest_level);

#endif							/* SS_CHANGELOG_H */
