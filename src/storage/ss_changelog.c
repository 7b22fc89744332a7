/*-------------------------------------------------------------------------
 *
 * ss_changelog.c
 *	  The xid-stamped change log of every structure (see ss_changelog.h).
 *
 * The log is a byte stream over a chain of log pages.  Each page holds the
 * stream's bytes [first_pos, first_pos + used); the next page continues at
 * first_pos + used.  The metapage says where the unconsolidated part
 * starts (head) and where the last completely appended batch ends (end).
 * Pages before the head go to a free list and are reused for new bytes, at
 * new positions, which is how a reader that followed a stale pointer finds
 * out (a page's first_pos is never the one it expected).
 *
 * An append that crashes before it reserved its batch's range leaves bytes
 * past the end, on the tail page and on pages linked after it; they are
 * overwritten by the next append, which reuses those pages.  One that
 * fails after (ss_logappend.c) leaves a batch, partly written, whose
 * transaction never commits: read past by its header's length and dropped,
 * as any aborted batch.  Consolidation that crashes after moving the head but
 * before freeing the pages behind it loses those pages until VACUUM FULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/multixact.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/storage.h"
#include "commands/progress.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "ss_changelog.h"
#include "ss_changelog_int.h"
#include "ss_progress.h"
#include "ss_test.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "streamsketch.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#define MAX_SCAN_RESTARTS	1000
#define MAX_ROUND_ATTEMPTS	64

/*
 * Log length, in streamsketch.change_log_limit units, beyond which a
 * writing statement waits for the round in progress and runs the next
 * (ss_log_consolidate_if_long).
 */
#define SS_LOG_BACKLOG_LIMITS	4

/* streamsketch.test_fail_after_log_append (tests only) */
int			ss_test_fail_after_append = SS_FAIL_NONE;

/* streamsketch.test_fail_during_log_append (tests only) */
int			ss_test_fail_during_append = SS_APPEND_FAIL_NONE;

/* streamsketch.test_log_append_wait (tests only) */
int			ss_test_append_wait = 0;

/* streamsketch.test_crash_before_log_truncate (tests only) */
static bool test_crash_before_truncate = false;

/*
 * A round's phases in streamsketch_progress: finding where it ends (a
 * pass over the log's batch headers), then consolidating up to there;
 * both count the log bytes passed.  VACUUM also shows both as
 * pg_stat_progress_vacuum's "scanning heap", with the round's log pages as
 * heap blocks, scanned as the second phase consolidates them.
 */
static const char phase_log_scan[] = "scanning change log";
static const char phase_log_consolidate[] = "consolidating change log";
static const char phase_log_truncate[] = "giving back free log pages";
static const char unit_log_bytes[] = "log bytes";

/* ss_log_vacuum is running: rounds report to pg_stat_progress_vacuum too */
static bool vacuum_progress = false;

static const struct config_enum_entry fail_options[] = {
	{"none", SS_FAIL_NONE, false},
	{"error", SS_FAIL_ERROR, false},
	{"panic", SS_FAIL_PANIC, false},
	{NULL, 0, false}
};

static const struct config_enum_entry append_fail_options[] = {
	{"none", SS_APPEND_FAIL_NONE, false},
	{"error_linking", SS_APPEND_FAIL_ERROR_LINKING, false},
	{"panic_linking", SS_APPEND_FAIL_PANIC_LINKING, false},
	{"error_filling", SS_APPEND_FAIL_ERROR_FILLING, false},
	{"panic_filling", SS_APPEND_FAIL_PANIC_FILLING, false},
	{NULL, 0, false}
};

void
ss_log_init(void)
{
	DefineCustomEnumVariable("streamsketch.test_fail_after_log_append",
							 "Fails each commit right after it appended its change-log batch (for tests only).",
							 "\"error\" raises an error, \"panic\" stops the server, between the batch's WAL and the commit record.",
							 &ss_test_fail_after_append, SS_FAIL_NONE, fail_options,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomEnumVariable("streamsketch.test_fail_during_log_append",
							 "Fails each commit whose change-log batch needs new log pages in the middle of its append (for tests only).",
							 "\"error_linking\" and \"panic_linking\" raise an error or stop the server once the first of several WAL records that link the batch's pages is written, before the log's end moves; "
							 "\"error_filling\" and \"panic_filling\" once the batch is part of the log and bytes of it remain to be written (a batch larger than 32 log pages).",
							 &ss_test_fail_during_append, SS_APPEND_FAIL_NONE,
							 append_fail_options,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	ss_test_define_int("streamsketch.test_log_append_wait",
					   "Makes each commit whose change-log batch is larger than 32 log pages wait in the middle of its append (for tests only).",
					   "Once the batch is part of the log and its WAL so far flushed, while bytes of it remain to be written, the commit waits until the advisory lock with this key is free; 0 does not wait.",
					   &ss_test_append_wait, 0, 0, INT_MAX, NULL);
	DefineCustomBoolVariable("streamsketch.test_crash_before_log_truncate",
							 "Stops the server when VACUUM has logged giving back a free tail of log pages, before it truncates the file (for tests only).",
							 NULL,
							 &test_crash_before_truncate, false,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
}

void
ss_log_corrupted(Relation rel, BlockNumber blkno, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("change log of %s table \"%s\" is corrupted at block %u",
					ss_structure_name(rel), RelationGetRelationName(rel), blkno),
			 errdetail("%s", detail),
			 errhint("Restore the table from a backup, or TRUNCATE it.")));
}

static uint32
rel_kind(Relation rel)
{
	const SSStructure *ops = ss_structure_ops(rel);

	if (ops == NULL)
		elog(ERROR, "relation \"%s\" is not a streamsketch structure",
			 RelationGetRelationName(rel));
	return ops->kind;
}

static void
log_meta_check(Relation rel, const SSLogMeta *log)
{
	if (log->alloc_end == 0)
		return;
	if (log->head_pos > log->end_pos ||
		(log->head_blk == InvalidBlockNumber) != (log->end_blk == InvalidBlockNumber) ||
		(log->head_blk != InvalidBlockNumber &&
		 (log->head_blk >= log->alloc_end || log->end_blk >= log->alloc_end ||
		  log->head_blk == SS_METAPAGE_BLKNO || log->end_blk == SS_METAPAGE_BLKNO)) ||
		(log->free_blk != InvalidBlockNumber &&
		 (log->free_blk >= log->alloc_end || log->free_blk == SS_METAPAGE_BLKNO)))
		ss_log_corrupted(rel, SS_METAPAGE_BLKNO,
					  "The metapage's change log pointers are inconsistent.");
	/* a record takes at least its header and a 16-byte hash */
	if (log->nrecords > (log->end_pos - log->head_pos) /
		(sizeof(SSLogRecordHeader) + sizeof(SSHash)) ||
		log->consolidations < 0)
		ss_log_corrupted(rel, SS_METAPAGE_BLKNO,
					  "The metapage's change log counters are impossible.");
}

/* Read the metapage's log part (share lock, briefly). */
void
ss_log_meta_read(Relation rel, SSLogMeta *log)
{
	Buffer		buf = ss_read_buffer_if_exists(rel, SS_METAPAGE_BLKNO);
	SSMetaHeader *hdr;

	memset(log, 0, sizeof(*log));
	log->head_blk = log->end_blk = log->free_blk = InvalidBlockNumber;
	if (!BufferIsValid(buf))
		return;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	if (!PageIsNew(BufferGetPage(buf)))
	{
		hdr = ss_meta_check(rel, BufferGetPage(buf), rel_kind(rel));
		*log = hdr->log;
	}
	UnlockReleaseBuffer(buf);
	log_meta_check(rel, log);
}

/* The metapage's log part, for streamsketch_log_info. */
void
ss_log_meta(Relation rel, SSLogMeta *log)
{
	ss_log_meta_read(rel, log);
}

/* Lock the metapage exclusively and register it; returns its log part. */
SSLogMeta *
ss_log_meta_register(Relation rel, SSXLogState *state, Buffer *bufp)
{
	SSMetaHeader *hdr = ss_meta_register(rel, rel_kind(rel), state, bufp);

	return &hdr->log;
}

void
ss_log_snapshot(Relation rel, SSLogSnapshot *snap)
{
	SSLogMeta	log;

	ss_log_meta_read(rel, &log);
	snap->head_pos = log.head_pos;
	snap->end_pos = log.end_pos;
	snap->head_blk = log.head_blk;
}

/* The snapshot of a metapage header the caller has just read. */
void
ss_log_snapshot_of(Relation rel, const SSMetaHeader *hdr, SSLogSnapshot *snap)
{
	log_meta_check(rel, &hdr->log);
	snap->head_pos = hdr->log.head_pos;
	snap->end_pos = hdr->log.end_pos;
	snap->head_blk = hdr->log.head_blk;
}

/*
 * Should a reader consolidate the log of snap before reading, and did it?
 * A log that is not empty is consolidated first when this backend can (not
 * in recovery nor in a parallel worker) without waiting: like heap
 * pruning, it changes how committed changes are stored, not what any query
 * sees, and it saves every later lookup the scan of those records.  A
 * reader that finds its records through ss_log_scan_parts (indexed)
 * consolidates only a short log, or one longer than
 * streamsketch.change_log_limit (which the index may not hold): in between,
 * the log is left to the writers, the flush functions and VACUUM, which
 * consolidate it in large rounds, instead of making one lookup pay for a
 * whole round.  A reader that does not index the log (a LERT's reports, a
 * cbt's or bfile's rows: what consolidation makes) waits for a round in
 * progress, a background worker's most often, and then runs one if there
 * is still something committed: it must see every batch that committed
 * before it.
 */
static bool
log_reader_consolidate(Relation rel, bool wait)
{
	const SSStructure *ops = ss_structure_ops(rel);

	/* lanes: run the free ones at once, then wait for the busy ones */
	if (wait && ops != NULL && ops->consolidate_some != NULL)
		return ops->consolidate_some(rel, true);
	return ss_log_consolidate(rel, wait);
}

static void
log_reader_check_attempt(Relation rel, int attempt)
{
	if (attempt >= MAX_SCAN_RESTARTS)
		ss_log_corrupted(rel, SS_METAPAGE_BLKNO, "The change log kept moving under a scan.");
}

static bool
log_reader_consolidated(Relation rel, const SSLogSnapshot *snap, int attempt,
						bool indexed)
{
	log_reader_check_attempt(rel, attempt);
	return snap->end_pos != snap->head_pos && !RecoveryInProgress() &&
		!IsInParallelMode() &&
		(!indexed ||
		 snap->end_pos - snap->head_pos <= SS_LOG_READER_CONSOLIDATE_BYTES ||
		 snap->end_pos - snap->head_pos > (uint64) ss_change_log_limit_kb * 1024) &&
		log_reader_consolidate(rel, !indexed);
}

/*
 * A reader's snapshot before it reads the structure; attempt counts the
 * restarts after ss_log_scan found the log moved.
 */
void
ss_log_read_begin(Relation rel, SSLogSnapshot *snap, int attempt,
				  bool indexed)
{
	ss_log_snapshot(rel, snap);
	if (log_reader_consolidated(rel, snap, attempt, indexed))
		ss_log_snapshot(rel, snap);
}

/*
 * The snapshot of a reader that never consolidates (the info functions:
 * they report pending work instead of doing it, and read the log's
 * records without applying them).
 */
void
ss_log_read_snapshot(Relation rel, SSLogSnapshot *snap, int attempt)
{
	log_reader_check_attempt(rel, attempt);
	ss_log_snapshot(rel, snap);
}

/*
 * ss_log_read_begin for a reader that reads the structure's own metapage
 * fields anyway: the snapshot comes from the header it has just read with
 * them (the same share lock, so the two agree), which saves a second read
 * of the metapage on every lookup.  Returns true if the log was
 * consolidated: the caller then reads its metapage again and takes the
 * snapshot with ss_log_snapshot_of.
 */
bool
ss_log_read_begin_meta(Relation rel, const SSMetaHeader *hdr,
					   SSLogSnapshot *snap, int attempt, bool indexed)
{
	ss_log_snapshot_of(rel, hdr, snap);
	return log_reader_consolidated(rel, snap, attempt, indexed);
}

/* ---------------------------------------------------------------------
 * Reading the stream
 * ---------------------------------------------------------------------
 */
typedef struct LogReader
{
	Relation	rel;
	uint64		pos;			/* next byte to read */
	BlockNumber blk;			/* page loaded */
	SSLogPageHeader ph;
	char	   *data;			/* its bytes */
	char	   *payload;		/* record payload buffer */
	Size		payload_size;
	/* a round's reader reports its progress in phase (else NULL) */
	const char *phase;
	uint64		base;			/* where its progress starts */
	uint64		total;			/* the bytes it is to pass */
} LogReader;

/* A round's reader is at a new page (or starts): report the bytes passed. */
static void
reader_progress(const LogReader *r)
{
	uint64		done = r->ph.first_pos > r->base ? r->ph.first_pos - r->base : 0;

	ss_progress_report(r->phase, unit_log_bytes, (int64) done,
					   (int64) r->total);
	if (vacuum_progress)
	{
		const int	index[] = {PROGRESS_VACUUM_TOTAL_HEAP_BLKS,
		PROGRESS_VACUUM_HEAP_BLKS_SCANNED};
		int64		val[2];

		/* the pages the round spans; scanned: those it consolidated */
		val[0] = (int64) ((r->total + SS_LOG_PAGE_CAPACITY - 1) / SS_LOG_PAGE_CAPACITY);
		val[1] = r->phase != phase_log_consolidate ? 0 :
			(int64) (Min(done, r->total) / SS_LOG_PAGE_CAPACITY);
		pgstat_progress_update_multi_param(2, index, val);
	}
}

/* Make r, positioned by reader_begin, a round's reader in phase. */
static void
reader_report(LogReader *r, const char *phase, uint64 base, uint64 end)
{
	r->phase = phase;
	r->base = base;
	r->total = end > base ? end - base : 0;
	reader_progress(r);
}

/* Copy log page blk; false if it is free (recycled under the reader). */
static bool
reader_load(LogReader *r, BlockNumber blk)
{
	Buffer		buf;
	Page		page;

	if (blk == InvalidBlockNumber || blk == SS_METAPAGE_BLKNO)
		ss_log_corrupted(r->rel, blk, "A change log pointer is invalid.");
	buf = ss_read_buffer_if_exists(r->rel, blk);
	if (!BufferIsValid(buf))
		ss_log_corrupted(r->rel, blk, "A change log page is missing.");
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (PageIsNew(page))
		ss_log_corrupted(r->rel, blk, "A change log page is uninitialized.");
	ss_page_check(r->rel, blk, page, SS_PAGE_LOG);
	memcpy(&r->ph, SSPageGetData(page), sizeof(SSLogPageHeader));
	if (r->ph.first_pos != SS_LOG_FREE_POS)
	{
		if (r->ph.used > SS_LOG_PAGE_CAPACITY)
			ss_log_corrupted(r->rel, blk, "A change log page claims more bytes than it holds.");
		memcpy(r->data, SSPageGetData(page) + SS_LOG_DATA_OFFSET, r->ph.used);
	}
	UnlockReleaseBuffer(buf);
	r->blk = blk;
	if (r->phase != NULL && r->ph.first_pos != SS_LOG_FREE_POS)
		reader_progress(r);
	return r->ph.first_pos != SS_LOG_FREE_POS;
}

/* Position the reader at pos on page blk; false if the log moved. */
static bool
reader_begin(LogReader *r, Relation rel, BlockNumber blk, uint64 pos)
{
	r->rel = rel;
	r->pos = pos;
	r->data = palloc(BLCKSZ);
	r->payload = NULL;
	r->payload_size = 0;
	r->phase = NULL;
	if (!reader_load(r, blk))
		return false;
	return r->ph.first_pos <= pos && pos <= r->ph.first_pos + r->ph.used;
}

static void
reader_end(LogReader *r)
{
	pfree(r->data);
	if (r->payload)
		pfree(r->payload);
}

/* Copy n bytes (dst NULL: skip them); false if the log moved. */
static bool
reader_read(LogReader *r, void *dst, uint64 n)
{
	char	   *out = dst;

	while (n > 0)
	{
		uint64		off = r->pos - r->ph.first_pos;
		uint64		take;

		if (off >= r->ph.used)
		{
			uint64		expect = r->ph.first_pos + r->ph.used;

			if (r->ph.next == InvalidBlockNumber)
				return false;
			CHECK_FOR_INTERRUPTS();
			if (!reader_load(r, r->ph.next) || r->ph.first_pos != expect)
				return false;

			/*
			 * Pages are filled before the next one is started, so one in
			 * the middle of the stream holds bytes; a chain of empty pages
			 * (a cycle of them would never end) is damage.
			 */
			if (r->ph.used == 0)
				ss_log_corrupted(r->rel, r->blk, "An empty change log page lies within the log's records.");
			continue;
		}
		take = Min(n, r->ph.used - off);
		if (out)
		{
			memcpy(out, r->data + off, take);
			out += take;
		}
		r->pos += take;
		n -= take;
	}
	return true;
}

typedef enum
{
	BATCH_COMMITTED,
	BATCH_ABORTED,
	BATCH_IN_PROGRESS
} BatchStatus;

/*
 * The fate of a batch's transaction.  In progress is asked first: a
 * transaction is marked committed in the clog before it leaves the proc
 * array, so the other order could take a committing one for aborted.
 */
static BatchStatus
batch_status(TransactionId xid)
{
	if (TransactionIdIsCurrentTransactionId(xid) ||
		TransactionIdIsInProgress(xid))
		return BATCH_IN_PROGRESS;
	return TransactionIdDidCommit(xid) ? BATCH_COMMITTED : BATCH_ABORTED;
}

/*
 * The stored length of a key or delete record with these flags (one at
 * most), or PG_UINT32_MAX for flags no record has.
 */
static inline uint32
log_key_record_len(uint16 flags)
{
	switch (flags)
	{
		case 0:
		case SS_LOG_REC_ROWS_WEIGHT:
			return sizeof(SSPendingKey);
		case SS_LOG_REC_WEIGHT1:
			return sizeof(SSHash);
		case SS_LOG_REC_ROWS:
			return sizeof(SSPendingKey) + sizeof(uint64);
	}
	return PG_UINT32_MAX;
}

/* Read and check a batch header; false if the log moved. */
static bool
reader_batch(LogReader *r, uint64 end, SSLogBatchHeader *bh)
{
	if (end - r->pos < sizeof(*bh))
		ss_log_corrupted(r->rel, r->blk, "A change log batch header crosses the log's end.");
	if (!reader_read(r, bh, sizeof(*bh)))
		return false;
	/* every record takes at least its header */
	if (bh->length > end - r->pos || !TransactionIdIsNormal(bh->xid) ||
		(uint64) bh->nrecords * sizeof(SSLogRecordHeader) > bh->length)
		ss_log_corrupted(r->rel, r->blk, "A change log batch header is invalid.");
	return true;
}

/*
 * Call fn for each record of the batch whose header was just read.  Returns
 * false if the log moved.
 */
static bool
reader_records(LogReader *r, const SSLogBatchHeader *bh, SSLogRecordFn fn,
			   void *arg)
{
	uint64		stop = r->pos + bh->length;

	for (uint32 i = 0; i < bh->nrecords; i++)
	{
		SSLogRecordHeader rh;
		SSPendingHeader hdr;
		uint64		pos = r->pos;
		uint64		off = r->pos - r->ph.first_pos;
		bool		in_page;

		if (stop - r->pos < sizeof(rh))
			ss_log_corrupted(r->rel, r->blk, "A change log batch holds fewer records than its header says.");
		if ((i & 1023) == 1023)
			CHECK_FOR_INTERRUPTS();
		/* most records lie within the page: read them without reader_read */
		in_page = off + sizeof(rh) <= r->ph.used;
		if (in_page)
		{
			memcpy(&rh, r->data + off, sizeof(rh));
			off += sizeof(rh);
			r->pos += sizeof(rh);
		}
		else if (!reader_read(r, &rh, sizeof(rh)))
			return false;
		if (rh.len > MaxAllocSize || MAXALIGN(rh.len) > stop - r->pos ||
			(rh.type != SS_PENDING_KEY && rh.type != SS_PENDING_DELETE &&
			 rh.type != SS_PENDING_MERGE && rh.type != SS_PENDING_ITEM) ||
			(rh.type == SS_PENDING_MERGE || rh.type == SS_PENDING_ITEM ?
			 rh.flags != 0 :
			 rh.len != log_key_record_len(rh.flags) ||
			 (rh.type == SS_PENDING_DELETE &&
			  (rh.flags & ~SS_LOG_REC_WEIGHT1) != 0)))
			ss_log_corrupted(r->rel, r->blk, "A change log record is invalid.");
		if (r->payload_size < Max(rh.len, sizeof(SSPendingKey)))
		{
			if (r->payload)
				pfree(r->payload);
			r->payload_size = Max(rh.len, 1024);
			r->payload = MemoryContextAllocHuge(CurrentMemoryContext,
												r->payload_size);
		}
		if (in_page && off + MAXALIGN(rh.len) <= r->ph.used)
		{
			/* copied: payloads are read as aligned structs */
			memcpy(r->payload, r->data + off, rh.len);
			r->pos += MAXALIGN(rh.len);
		}
		else if (!reader_read(r, r->payload, rh.len) ||
				 !reader_read(r, NULL, MAXALIGN(rh.len) - rh.len))
			return false;
		memset(&hdr, 0, sizeof(hdr));
		hdr.relid = RelationGetRelid(r->rel);
		hdr.type = rh.type;
		hdr.len = rh.len;
		hdr.rows = 1;
		if (rh.flags & SS_LOG_REC_WEIGHT1)
		{
			int64		one = 1;

			memcpy(r->payload + sizeof(SSHash), &one, sizeof(one));
			hdr.len = sizeof(SSPendingKey);
		}
		else if (rh.type == SS_PENDING_KEY || rh.type == SS_PENDING_DELETE)
		{
			const SSPendingKey *key = (const SSPendingKey *) r->payload;
			uint64		rows = 1;

			if (rh.flags & SS_LOG_REC_ROWS_WEIGHT)
				rows = (uint64) key->weight;
			else if (rh.flags & SS_LOG_REC_ROWS)
			{
				memcpy(&rows, r->payload + sizeof(SSPendingKey), sizeof(rows));
				hdr.len = sizeof(SSPendingKey);
			}
			if (key->weight < 0)
				ss_log_corrupted(r->rel, r->blk, "A change log record has a negative weight.");
			if (rows < 1 || rows > PG_UINT32_MAX)
				ss_log_corrupted(r->rel, r->blk, "A combined change log record stands for no rows or too many.");
			hdr.rows = (uint32) rows;
		}
		fn(pos, &hdr, r->payload, arg);
	}
	if (r->pos != stop)
		ss_log_corrupted(r->rel, r->blk, "A change log batch holds bytes after its records.");
	return true;
}

static bool log_scan(Relation rel, const SSLogSnapshot *snap,
					 SSLogRecordFn fn, void *arg, bool *in_progress,
					 bool stop_at_in_progress);

/*
 * Call fn for each record of every committed batch between the snapshot's
 * head and end.  Returns false if the log moved under the scan (pages were
 * consolidated and reused): the caller forgets what fn saw and starts over
 * from a new snapshot, reading the structure again.
 */
bool
ss_log_scan(Relation rel, const SSLogSnapshot *snap, SSLogRecordFn fn,
			void *arg)
{
	bool		in_progress;

	return ss_log_scan_ext(rel, snap, fn, arg, &in_progress);
}

/* ss_log_scan, telling whether a batch was skipped as still in progress */
bool
ss_log_scan_ext(Relation rel, const SSLogSnapshot *snap, SSLogRecordFn fn,
				void *arg, bool *in_progress)
{
	return log_scan(rel, snap, fn, arg, in_progress, false);
}

/*
 * ss_log_scan up to the first batch still in progress, as consolidation
 * reads the log: for readers that must see what the next round will
 * install, where a record's place in the committed stream matters.
 */
bool
ss_log_scan_prefix(Relation rel, const SSLogSnapshot *snap, SSLogRecordFn fn,
				   void *arg)
{
	bool		in_progress;

	return log_scan(rel, snap, fn, arg, &in_progress, true);
}

static bool
log_scan(Relation rel, const SSLogSnapshot *snap, SSLogRecordFn fn,
		 void *arg, bool *in_progress, bool stop_at_in_progress)
{
	LogReader	r;
	bool		ok = true;

	*in_progress = false;
	if (snap->head_pos == snap->end_pos)
		return true;
	if (!reader_begin(&r, rel, snap->head_blk, snap->head_pos))
	{
		reader_end(&r);
		return false;
	}
	while (ok && r.pos < snap->end_pos)
	{
		SSLogBatchHeader bh;

		CHECK_FOR_INTERRUPTS();
		ok = reader_batch(&r, snap->end_pos, &bh);
		if (!ok)
			break;
		/*
		 * As for a heap tuple, a transaction counts once it has left the
		 * proc array, not when the clog says committed: one waiting for
		 * its synchronous standby is not visible yet.  (Readers never see
		 * their own batch: it is written at pre-commit.)
		 */
		switch (batch_status(bh.xid))
		{
			case BATCH_COMMITTED:
				ok = reader_records(&r, &bh, fn, arg);
				break;
			case BATCH_IN_PROGRESS:
				*in_progress = true;
				if (stop_at_in_progress)
				{
					reader_end(&r);
					return true;
				}
				/* FALLTHROUGH */
			case BATCH_ABORTED:
				ok = reader_read(&r, NULL, bh.length);
				break;
		}
	}
	reader_end(&r);
	return ok;
}

/*
 * Reserve a run of n new blocks after everything allocated so far (log
 * pages included) for the structure, e.g. a quotient filter's new level,
 * and return its first block.  One WAL record moves alloc_end; the blocks
 * are written (and the file extended) by the caller.  A run reserved by a
 * round that then fails stays unused until VACUUM FULL.  Takes the append
 * lock, which alone guards alloc_end.
 */
BlockNumber
ss_log_alloc_run(Relation rel, BlockNumber n)
{
	SSXLogState *state;
	Buffer		metabuf;
	SSLogMeta  *mlog;
	BlockNumber base;

	LockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
	state = ss_xlog_start(rel);
	mlog = ss_log_meta_register(rel, state, &metabuf);
	base = mlog->alloc_end;
	if (base == 0 || (uint64) base + n >= InvalidBlockNumber)
		ss_log_corrupted(rel, SS_METAPAGE_BLKNO, "The structure has no room for a new run of blocks.");
	ss_check_structure_pages((uint64) base + n, RelationGetRelationName(rel));
	mlog->alloc_end = base + n;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
	UnlockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
	return base;
}

/*
 * The info functions: read the metapage contents into meta (ops->meta_size
 * bytes, checked) and call fn for every committed record still in the log,
 * consistently (the metapage's counters include exactly the batches before
 * the log head that was scanned from).  fn accumulates into acc, acc_size
 * bytes zeroed before each attempt, so a scan restarted because the log
 * moved counts nothing twice.  Nothing is consolidated: the records are
 * read, not applied, so the cost is the log's length.  False if there is
 * no metapage.
 */
bool
ss_log_scan_all(Relation rel, SSLogRecordFn fn, void *acc, Size acc_size,
				void *meta)
{
	const SSStructure *ops = ss_structure_ops(rel);

	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;

		ss_log_read_snapshot(rel, &snap, attempt);
		if (!ss_read_structure_meta(rel, ops, meta))
			return false;
		/* consolidated between the two reads: the counters moved too */
		if (((const SSMetaHeader *) meta)->log.head_pos != snap.head_pos)
			continue;
		memset(acc, 0, acc_size);
		if (ss_log_scan(rel, &snap, fn, acc))
			return true;
	}
}

/* The next pointer of log page blk (share-locked briefly). */
BlockNumber
ss_log_page_next(Relation rel, BlockNumber blk)
{
	Buffer		buf = ReadBuffer(rel, blk);
	BlockNumber next;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	ss_page_check(rel, blk, BufferGetPage(buf), SS_PAGE_LOG);
	next = ss_log_page_header(BufferGetPage(buf))->next;
	UnlockReleaseBuffer(buf);
	return next;
}

/* ---------------------------------------------------------------------
 * Consolidation
 * ---------------------------------------------------------------------
 */

/* Call fn for every committed record of the round, in log order. */
void
ss_cons_foreach(SSConsolidation *c, SSLogRecordFn fn, void *arg)
{
	LogReader	r;

	if (!reader_begin(&r, c->rel, c->start_blk, c->start_pos))
		ss_log_corrupted(c->rel, c->start_blk, "The change log moved under its consolidation.");
	reader_report(&r, phase_log_consolidate, c->start_pos, c->end_pos);
	while (r.pos < c->end_pos)
	{
		SSLogBatchHeader bh;
		bool		ok;

		CHECK_FOR_INTERRUPTS();
		ok = reader_batch(&r, c->end_pos, &bh);
		if (ok)
			ok = TransactionIdDidCommit(bh.xid) ?
				reader_records(&r, &bh, fn, arg) :
				reader_read(&r, NULL, bh.length);
		if (!ok)
			ss_log_corrupted(c->rel, r.blk, "The change log moved under its consolidation.");
	}
	reader_end(&r);
}

/*
 * Move the log head to new_head (on page new_blk) after a round, adding its
 * stats to the metapage, and put the pages it left (from the old head page
 * up to new_blk) on the free list, all in one WAL record: a cancel or crash
 * can never strand consumed pages outside both the log and the free list.
 * The chain of consumed pages is walked first, read-only; only the
 * consolidator (whose lock the caller holds) changes it.  Freed pages keep
 * their contents until reused, which rewrites first_pos, so a reader still
 * inside them either reads valid records or notices the reuse.  Lock
 * order: the last consumed page, then the metapage; the append lock
 * guards the free list against appenders.
 */
static void
log_advance_head(Relation rel, const SSStructure *ops, uint64 new_head,
				 BlockNumber new_blk, uint64 nrecords, const void *stats)
{
	SSLogMeta	log;
	BlockNumber blk;
	BlockNumber last = InvalidBlockNumber;
	uint32		nconsumed = 0;
	SSXLogState *state;
	Buffer		lastbuf = InvalidBuffer;
	Page		lastpage = NULL;
	Buffer		metabuf;
	SSMetaHeader *hdr;

	ss_log_meta_read(rel, &log);
	for (blk = log.head_blk; blk != new_blk; blk = ss_log_page_next(rel, blk))
	{
		CHECK_FOR_INTERRUPTS();
		if (blk == InvalidBlockNumber || ++nconsumed > log.npages)
			ss_log_corrupted(rel, blk == InvalidBlockNumber ? log.head_blk : blk,
						  "The change log's pages do not lead to its new head.");
		last = blk;
	}

	LockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
	state = ss_xlog_start(rel);
	if (last != InvalidBlockNumber)
	{
		lastbuf = ReadBuffer(rel, last);
		LockBuffer(lastbuf, BUFFER_LOCK_EXCLUSIVE);
		ss_page_check(rel, last, BufferGetPage(lastbuf), SS_PAGE_LOG);
		lastpage = ss_xlog_register(state, lastbuf, 0);
	}
	hdr = ss_meta_register(rel, ops->kind, state, &metabuf);
	if (lastpage)
	{
		ss_log_page_header(lastpage)->next = hdr->log.free_blk;
		hdr->log.free_blk = hdr->log.head_blk;
		hdr->log.nfree += nconsumed;
		hdr->log.npages -= Min(hdr->log.npages, nconsumed);
	}
	hdr->log.head_pos = new_head;
	hdr->log.head_blk = new_blk;
	hdr->log.nrecords -= Min(hdr->log.nrecords, nrecords);
	hdr->log.consolidations++;
	if (stats && ops->add_stats)
		ops->add_stats(hdr, stats);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
	if (BufferIsValid(lastbuf))
		UnlockReleaseBuffer(lastbuf);
	UnlockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
}

/*
 * One consolidation round, under the consolidation lock: every batch from
 * the head up to the first one whose transaction is still committing (or
 * the end) is applied if it committed and dropped if it aborted.  Returns
 * true if the head moved; stopped_at (if not NULL) gets the xid of the
 * batch the round stopped at, or InvalidTransactionId.
 */
static bool
log_consolidate_locked(Relation rel, const SSStructure *ops,
					   TransactionId *stopped_at)
{
	SSLogSnapshot snap;
	LogReader	r;
	uint64		stop;
	BlockNumber stop_blk;
	bool		any_committed = false;
	void	   *stats = NULL;
	uint64		nrecords = 0;

	if (stopped_at)
		*stopped_at = InvalidTransactionId;
	ss_log_snapshot(rel, &snap);
	if (snap.head_pos == snap.end_pos)
		return false;
	ss_progress_start(rel, "consolidation");

	/* find the round's end: the first batch still committing */
	if (!reader_begin(&r, rel, snap.head_blk, snap.head_pos))
		ss_log_corrupted(rel, snap.head_blk, "The change log's head page does not hold its head.");
	reader_report(&r, phase_log_scan, snap.head_pos, snap.end_pos);
	stop = r.pos;
	stop_blk = r.blk;
	while (r.pos < snap.end_pos)
	{
		SSLogBatchHeader bh;
		BatchStatus status;

		CHECK_FOR_INTERRUPTS();
		stop_blk = r.blk;
		if (!reader_batch(&r, snap.end_pos, &bh))
			ss_log_corrupted(rel, r.blk, "The change log moved under its consolidation.");
		status = batch_status(bh.xid);
		if (status == BATCH_IN_PROGRESS)
		{
			if (stopped_at)
				*stopped_at = bh.xid;
			break;
		}
		any_committed |= status == BATCH_COMMITTED;
		nrecords += bh.nrecords;
		if (!reader_read(&r, NULL, bh.length))
			ss_log_corrupted(rel, r.blk, "The change log moved under its consolidation.");
		stop = r.pos;
		stop_blk = r.blk;
	}
	reader_end(&r);

	if (stop != snap.head_pos)
	{
		if (any_committed)
		{
			SSConsolidation c;

			stats = palloc0(Max(ops->stats_size, 1));
			c.rel = rel;
			c.start_pos = snap.head_pos;
			c.end_pos = stop;
			c.start_blk = snap.head_blk;
			c.nrecords = nrecords;
			c.stats = stats;

			/*
			 * A structure whose partitions changed in the middle of the
			 * round (a quotient filter that grew) runs it again: what it
			 * applied is skipped by its applied_pos marks.
			 */
			for (int attempt = 0; !ops->consolidate(&c); attempt++)
			{
				if (attempt >= MAX_ROUND_ATTEMPTS)
					elog(ERROR, "consolidation of \"%s\" did not complete after %d attempts",
						 RelationGetRelationName(rel), attempt + 1);
				CHECK_FOR_INTERRUPTS();
				memset(stats, 0, Max(ops->stats_size, 1));
			}
		}
		log_advance_head(rel, ops, stop, stop_blk, nrecords, stats);
	}
	ss_progress_end();
	return stop != snap.head_pos;
}

/*
 * A lane's pass, for a structure that consolidates in lanes
 * (SSStructure.consolidate_some): call fn for every record of every
 * committed batch from position start, on page start_blk, up to limit, the
 * log's end or the first batch still committing, whichever comes first.
 * Sets *reached and *reached_blk to the batch boundary where it stopped,
 * and *stopped_at to the xid of the batch still committing, if that is
 * why (else InvalidTransactionId).  start must be at or past the head and
 * must stay so: the structure never lets the head pass a lane's position
 * (ss_log_advance_to), so the pages from start on are not recycled.
 */
void
ss_log_lane_pass(Relation rel, uint64 start, BlockNumber start_blk,
				 uint64 limit, SSLogRecordFn fn, void *arg,
				 uint64 *reached, BlockNumber *reached_blk,
				 TransactionId *stopped_at)
{
	SSLogSnapshot snap;
	LogReader	r;
	uint64		end;

	ss_log_snapshot(rel, &snap);
	*reached = start;
	*reached_blk = start_blk;
	*stopped_at = InvalidTransactionId;
	if (start < snap.head_pos || start > snap.end_pos)
		ss_log_corrupted(rel, start_blk, "A lane's position is outside the change log.");
	end = Min(snap.end_pos, limit);
	if (start >= end)
		return;
	ss_progress_start(rel, "consolidation");
	if (!reader_begin(&r, rel, start_blk, start))
		ss_log_corrupted(rel, start_blk, "A lane's change log page does not hold its position.");
	reader_report(&r, phase_log_consolidate, start, end);
	while (r.pos < end)
	{
		SSLogBatchHeader bh;
		BatchStatus status;
		bool		ok;

		CHECK_FOR_INTERRUPTS();
		if (!reader_batch(&r, end, &bh))
			ss_log_corrupted(rel, r.blk, "The change log moved under a lane.");
		status = batch_status(bh.xid);
		if (status == BATCH_IN_PROGRESS)
		{
			*stopped_at = bh.xid;
			break;
		}
		ok = status == BATCH_COMMITTED ? reader_records(&r, &bh, fn, arg) :
			reader_read(&r, NULL, bh.length);
		if (!ok)
			ss_log_corrupted(rel, r.blk, "The change log moved under a lane.");
		*reached = r.pos;
		*reached_blk = r.blk;
	}
	reader_end(&r);
	ss_progress_end();
}

/*
 * Move the head to pos, a batch boundary every lane of the structure has
 * reached (blk: the page a lane's pass stopped on, for the message if it
 * is not one), adding stats (what the batches before it add to the
 * metapage, as a round's).  The caller holds the consolidation lock.
 */
void
ss_log_advance_to(Relation rel, uint64 pos, BlockNumber blk,
				  const void *stats)
{
	const SSStructure *ops = ss_structure_ops(rel);
	SSLogSnapshot snap;
	LogReader	r;
	uint64		nrecords = 0;

	ss_log_snapshot(rel, &snap);
	if (pos <= snap.head_pos)
		return;
	if (pos > snap.end_pos)
		ss_log_corrupted(rel, blk, "A lane's position is past the change log's end.");
	if (!reader_begin(&r, rel, snap.head_blk, snap.head_pos))
		ss_log_corrupted(rel, snap.head_blk, "The change log's head page does not hold its head.");
	while (r.pos < pos)
	{
		SSLogBatchHeader bh;

		CHECK_FOR_INTERRUPTS();
		if (!reader_batch(&r, pos, &bh) || !reader_read(&r, NULL, bh.length))
			ss_log_corrupted(rel, r.blk, "The change log moved under its consolidation.");
		nrecords += bh.nrecords;
	}
	if (r.pos != pos)
		ss_log_corrupted(rel, blk, "A lane's position is not a batch boundary.");
	blk = r.blk;
	reader_end(&r);
	log_advance_head(rel, ops, pos, blk, nrecords, stats);
}

/*
 * Take the consolidation lock, waiting for it if it is busy (shown as the
 * phase of the operation this backend is running, if any).
 */
void
ss_log_lock_consolidation(Relation rel)
{
	if (ConditionalLockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock))
		return;
	ss_progress_phase("waiting for the consolidation lock");
	LockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock);
}

/*
 * A consolidation round (log_consolidate_locked).  With wait, waits for a
 * concurrent round to end first; without, returns at once if one is
 * running, and a structure that consolidates in lanes runs what lanes it
 * can instead.  Returns true if the head moved.
 */
bool
ss_log_consolidate(Relation rel, bool wait)
{
	const SSStructure *ops = ss_structure_ops(rel);
	bool		moved;

	if (ops == NULL || ops->consolidate == NULL)
		return false;
	if (!wait && ops->consolidate_some != NULL)
		return ops->consolidate_some(rel, false);
	if (wait)
		ss_log_lock_consolidation(rel);
	else if (!ConditionalLockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock))
		return false;
	moved = log_consolidate_locked(rel, ops, NULL);
	UnlockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock);
	return moved;
}

/*
 * The consolidation of a flush function followed by the flush itself (ops:
 * the caller holds the consolidation lock), or of VACUUM (ops NULL: waits
 * for the lock, and reports to pg_stat_progress_vacuum too), with
 * maintenance_work_mem to work in (ss_consolidation_memory).  Returns what
 * flush returns.
 */
static int64
log_consolidate_maintenance(Relation rel, const SSStructure *ops,
							SSFlushFn flush, void *stats)
{
	volatile int64 result = 0;

	ss_maintenance_consolidation = true;
	vacuum_progress = ops == NULL;
	PG_TRY();
	{
		if (ops != NULL)
		{
			(void) log_consolidate_locked(rel, ops, NULL);
			ss_progress_phase(SS_PHASE_FLUSH);
			result = flush(rel, stats);
		}
		else
			(void) ss_log_consolidate(rel, true);
	}
	PG_FINALLY();
	{
		ss_maintenance_consolidation = false;
		vacuum_progress = false;
	}
	PG_END_TRY();
	return result;
}

/*
 * The flush functions (bcms_flush, bloom_flush): consolidate every
 * committed batch (waiting for a concurrent round), then, still under the
 * consolidation lock so that no round appends to the structure's buffers
 * meanwhile, empty them with flush, whose stats (ops->stats_size bytes,
 * zeroed) are added to the metapage in one WAL record.  Returns what flush
 * returns.  Shown in streamsketch_progress as operation (the SQL
 * function's name).
 */
int64
ss_log_flush(Relation rel, const char *operation, SSFlushFn flush)
{
	const SSStructure *ops = ss_structure_ops(rel);
	void	   *stats;
	int64		result;

	if (ops == NULL || ops->consolidate == NULL)
		elog(ERROR, "relation \"%s\" has no change log",
			 RelationGetRelationName(rel));
	stats = palloc0(Max(ops->stats_size, 1));
	ss_progress_start(rel, operation);
	ss_log_lock_consolidation(rel);
	result = log_consolidate_maintenance(rel, ops, flush, stats);
	if (ops->add_stats)
	{
		SSXLogState *state = ss_xlog_start(rel);
		Buffer		metabuf;
		SSMetaHeader *hdr = ss_meta_register(rel, ops->kind, state, &metabuf);

		ops->add_stats(hdr, stats);
		ss_xlog_finish(state);
		UnlockReleaseBuffer(metabuf);
	}
	UnlockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock);
	ss_progress_end();
	pfree(stats);
	return result;
}


/*
 * Consolidate if the log is longer than streamsketch.change_log_limit and
 * this backend may write: not during recovery (a standby reads the log as
 * it is) nor in a parallel worker.  Like heap page pruning, a reader may do
 * it: it changes how committed changes are stored, not what any query
 * sees.  Large rounds group many records per page, so each page a round
 * writes takes many of them (docs/bench-changelog.md).
 *
 * A writer does not wait for another backend's round while the log is
 * shorter than SS_LOG_BACKLOG_LIMITS limits.  Beyond that it waits and
 * runs the next round itself: appending is far cheaper than consolidating,
 * so writers that never waited outran the rounds without bound, each
 * round larger than the last, and every page of that log stayed in the
 * relation.  A round stops at a batch whose transaction is
 * still committing, and a writer that went on would append behind it (one
 * backend appended ten batches while another was between its append and
 * its commit): it waits for that transaction, as the heap waits for a
 * tuple's inserter, but not for a prepared one, which waits for COMMIT
 * PREPARED.  So the log stays about that many limits plus a transaction or
 * two per writer long.  None of this can deadlock: a round waits for no
 * transaction and takes no lock a writer holds at the start of a
 * statement, and a committing transaction waits for no writer.
 */
void
ss_log_consolidate_if_long(Relation rel, const SSLogSnapshot *snap)
{
	const SSStructure *ops;
	uint64		limit = (uint64) ss_change_log_limit_kb * 1024;
	SSLogSnapshot now;
	TransactionId stopped_at = InvalidTransactionId;

	if (snap->end_pos - snap->head_pos <= limit ||
		RecoveryInProgress() || IsInParallelMode())
		return;
	ops = ss_structure_ops(rel);
	if (ops == NULL || ops->consolidate == NULL)
		return;
	if (ops->consolidate_some != NULL)
	{
		/* lanes: the structure waits as below, lane by lane */
		(void) ops->consolidate_some(rel, snap->end_pos - snap->head_pos >
									 SS_LOG_BACKLOG_LIMITS * limit);
		return;
	}
	if (snap->end_pos - snap->head_pos <= SS_LOG_BACKLOG_LIMITS * limit)
	{
		(void) ss_log_consolidate(rel, false);
		return;
	}
	ss_progress_start(rel, "consolidation");
	ss_log_lock_consolidation(rel);
	/* the round we waited for may have left little to do */
	ss_log_snapshot(rel, &now);
	if (now.end_pos - now.head_pos > limit)
		(void) log_consolidate_locked(rel, ops, &stopped_at);
	UnlockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock);
	ss_progress_end();
	if (TransactionIdIsValid(stopped_at) &&
		!TransactionIdIsCurrentTransactionId(stopped_at) &&
		BackendXidGetPid(stopped_at) != 0)
		XactLockTableWait(stopped_at, rel, NULL, XLTW_None);
}

/*
 * The oldest xid of a batch still in the log, or InvalidTransactionId.
 */
TransactionId
ss_log_oldest_xid(Relation rel)
{
	for (int attempt = 0; attempt < MAX_SCAN_RESTARTS; attempt++)
	{
		SSLogSnapshot snap;
		LogReader	r;
		TransactionId oldest = InvalidTransactionId;
		bool		ok = true;

		ss_log_snapshot(rel, &snap);
		if (snap.head_pos == snap.end_pos)
			return InvalidTransactionId;
		ok = reader_begin(&r, rel, snap.head_blk, snap.head_pos);
		while (ok && r.pos < snap.end_pos)
		{
			SSLogBatchHeader bh;

			ok = reader_batch(&r, snap.end_pos, &bh) &&
				reader_read(&r, NULL, bh.length);
			if (ok && (!TransactionIdIsValid(oldest) ||
					   TransactionIdPrecedes(bh.xid, oldest)))
				oldest = bh.xid;
		}
		reader_end(&r);
		if (ok)
			return oldest;
	}
	ss_log_corrupted(rel, SS_METAPAGE_BLKNO, "The change log kept moving under a scan.");
	return InvalidTransactionId;	/* keep compiler quiet */
}

/*
 * VACUUM: consolidate every batch whose transaction ended, then set
 * relfrozenxid to the oldest xid the log can still hold, so that the clog
 * is kept as long as a batch needs it and anti-wraparound vacuum comes
 * back, as for a heap.  A batch appended later has an xid at or after the
 * oldest xmin.
 */
/*
 * Give the file's tail back when it holds only free log pages: after a
 * transaction too large for the pages it found free, its log pages stay
 * in the relation once consolidated.  Only when the log is empty, and its
 * pages (the free list and the page holding the empty log) are exactly the
 * blocks before alloc_end, and an AccessExclusiveLock can be had without
 * waiting (as VACUUM truncates a heap: no reader is then inside a log
 * page): the metapage forgets the log pages in one WAL record, then the
 * relation is truncated.  A crash in between leaves blocks past alloc_end
 * that are reused as they are allocated again.  With patient, the lock is
 * tried for up to SS_TRUNCATE_LOCK_TRIES times SS_TRUNCATE_LOCK_WAIT_MS,
 * as VACUUM tries to truncate a heap: a background worker has no later
 * chance, while readers come and go.
 */
#define SS_TRUNCATE_LOCK_TRIES		20
#define SS_TRUNCATE_LOCK_WAIT_MS	50

/*
 * Could the log's pages be the file's free tail, and from which block?
 * Reads the log part of the metapage into *log.
 */
static bool
log_free_tail_start(Relation rel, SSLogMeta *log, BlockNumber *first)
{
	ss_log_meta_read(rel, log);
	if (log->nfree == 0 || log->head_pos != log->end_pos ||
		log->head_blk == InvalidBlockNumber ||
		(uint64) log->nfree + 1 >= log->alloc_end)
		return false;
	*first = log->alloc_end - log->nfree - 1;
	return log->head_blk >= *first && log->head_blk < log->alloc_end &&
		RelationGetNumberOfBlocks(rel) >= log->alloc_end;
}

static void
log_truncate_free_tail(Relation rel, bool patient)
{
	SSLogMeta	log;
	BlockNumber first;
	BlockNumber blk;
	bool	   *seen;
	bool		whole = true;
	SSXLogState *state;
	Buffer		metabuf;
	SSLogMeta  *mlog;

	if (!log_free_tail_start(rel, &log, &first))
		return;
	ss_progress_phase(phase_log_truncate);
	for (int tries = 1; !ConditionalLockRelation(rel, AccessExclusiveLock); tries++)
	{
		if (!patient || tries >= SS_TRUNCATE_LOCK_TRIES)
			return;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(SS_TRUNCATE_LOCK_WAIT_MS * 1000L);
	}

	/*
	 * Nobody else holds a lock on rel now: the log cannot change, but it may
	 * have changed since it was read without the lock.
	 */
	if (!log_free_tail_start(rel, &log, &first))
	{
		UnlockRelation(rel, AccessExclusiveLock);
		return;
	}
	seen = palloc0(sizeof(bool) * (log.nfree + 1));
	seen[log.head_blk - first] = true;
	blk = log.free_blk;
	for (uint32 i = 0; i < log.nfree && whole; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (blk < first || blk >= log.alloc_end || seen[blk - first])
			whole = false;
		else
		{
			seen[blk - first] = true;
			blk = ss_log_page_next(rel, blk);
		}
	}
	if (whole && blk == InvalidBlockNumber && log.head_pos == log.end_pos)
	{
		state = ss_xlog_start(rel);
		mlog = ss_log_meta_register(rel, state, &metabuf);
		mlog->head_blk = mlog->end_blk = InvalidBlockNumber;
		mlog->free_blk = InvalidBlockNumber;
		mlog->nfree = 0;
		mlog->npages = 0;
		mlog->alloc_end = first;
		ss_xlog_finish(state);
		UnlockReleaseBuffer(metabuf);
		if (test_crash_before_truncate)
			ss_test_stop(rel, "streamsketch.test_crash_before_log_truncate",
						 "before truncating");
		RelationTruncate(rel, first);
	}
	pfree(seen);
	UnlockRelation(rel, AccessExclusiveLock);
}

/*
 * A background worker's round (ss_worker.c): like a reader's, it never
 * waits for the consolidation lock (a busy lock means someone else is at
 * it), but it works in maintenance_work_mem as VACUUM does, and gives back
 * a free tail of log pages afterwards, so that a structure settles at its
 * own pages plus a bounded log without a VACUUM.  Returns true if the head
 * moved.
 */
bool
ss_log_consolidate_background(Relation rel)
{
	volatile bool moved = false;

	ss_maintenance_consolidation = true;
	PG_TRY();
	{
		moved = ss_log_consolidate(rel, false);
	}
	PG_FINALLY();
	{
		ss_maintenance_consolidation = false;
	}
	PG_END_TRY();
	log_truncate_free_tail(rel, true);
	return moved;
}

/*
 * VACUUM of a structure.  With verbose, says what it did: the records that
 * left the log (committed ones consolidated, aborted ones dropped) and in
 * how many rounds, what remains (of transactions in progress, or
 * committed since), and the pages given back.
 */
void
ss_log_vacuum(Relation rel, bool verbose)
{
	TransactionId frozen;
	TransactionId oldest;
	bool		frozenxid_updated;
	bool		minmulti_updated;
	SSLogMeta	before;
	SSLogMeta	after;
	BlockNumber pages_before = RelationGetNumberOfBlocks(rel);
	BlockNumber pages_after;

	ss_log_meta_read(rel, &before);
	pgstat_progress_update_param(PROGRESS_VACUUM_PHASE,
								 PROGRESS_VACUUM_PHASE_SCAN_HEAP);
	(void) log_consolidate_maintenance(rel, NULL, NULL, NULL);
	pgstat_progress_update_param(PROGRESS_VACUUM_PHASE,
								 PROGRESS_VACUUM_PHASE_TRUNCATE);
	log_truncate_free_tail(rel, false);
	pgstat_progress_update_param(PROGRESS_VACUUM_PHASE,
								 PROGRESS_VACUUM_PHASE_FINAL_CLEANUP);
	ss_progress_phase("updating relfrozenxid");
	ss_log_meta_read(rel, &after);
	pages_after = RelationGetNumberOfBlocks(rel);
	if (verbose)
		ereport(INFO,
				(errmsg("vacuuming \"%s.%s\": %s",
						get_namespace_name(RelationGetNamespace(rel)),
						RelationGetRelationName(rel), ss_structure_name(rel)),
				 errdetail("change log: %lld records consolidated or dropped, %lld remain (%lld bytes); consolidation rounds: %lld; free log pages: %u; pages: %u, %u before",
						   (long long) (before.nrecords - Min(before.nrecords, after.nrecords)),
						   (long long) after.nrecords,
						   (long long) (after.end_pos - after.head_pos),
						   (long long) (after.consolidations - before.consolidations),
						   after.nfree, pages_after, pages_before)));
	frozen = GetOldestNonRemovableTransactionId(rel);
	oldest = ss_log_oldest_xid(rel);
	if (TransactionIdIsValid(oldest) && TransactionIdPrecedes(oldest, frozen))
		frozen = oldest;
	vac_update_relstats(rel, RelationGetNumberOfBlocks(rel), -1, 0, false,
						frozen, InvalidMultiXactId,
						&frozenxid_updated, &minmulti_updated, false);
}
