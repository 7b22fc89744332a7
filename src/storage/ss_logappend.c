/*-------------------------------------------------------------------------
 *
 * ss_logappend.c
 *	  Appending a transaction's pending records to the change log at
 *	  pre-commit (see ss_changelog.h): one batch per structure, WAL-logged
 *	  before the commit record.
 *
 * Nothing slow happens under an append's locks.  As GIN's fast-update
 * insertion builds its sublist of pages before it locks the metapage
 * (ginHeapTupleFastInsert, makeSublist), an append has three steps:
 *
 * 1. Build, with no lock.  A batch is a byte stream: its header {length,
 *	  xid, nrecords}, then each pending record's log form.  The pending log
 *	  keeps each relation's record count and log bytes, so the stream's
 *	  length is known before its first byte is produced.  Its first
 *	  SS_APPEND_CHUNK_PAGES pages' worth is produced into backend memory,
 *	  reading the transaction's spill file as needed.
 *
 * 2. Reserve, under the append lock.  The batch takes the log range
 *	  [end, end + length) at once.  A batch that fits the tail page's room
 *	  is copied there, and one WAL record (tail page and metapage) ends the
 *	  append.  A larger one puts its first bytes into the tail's room and
 *	  gets new pages for the rest (pages a crashed append left linked after
 *	  the tail, then the free list, then new blocks, extended before any
 *	  buffer lock is taken), each initialized with its final first_pos,
 *	  used and next and linked after the previous one, two pages per WAL
 *	  record (the previous page, two new pages, the metapage: generic WAL
 *	  takes four); a page whose bytes were built is written whole in that
 *	  record, as a full image.  The record that links the last page moves
 *	  the log's end past the batch.  Every page of a record is pinned (and
 *	  read from disk if it must be) before the first of them is locked.
 *
 * 3. Fill, with no lock but each page's own.  The rest of the stream is
 *	  produced a chunk at a time and copied into the reserved pages, one WAL
 *	  record per page, all before the commit record.
 *
 * Why a batch may be part of the log before all its bytes are: a reader
 * counts a batch only once its transaction has committed (ss_changelog.c,
 * batch_status), and the commit record comes after every record of the
 * fill.  Until then every reader, consolidation, a lane pass and the log
 * index skip the batch by its header's length, which needs only what the
 * reservation wrote: the header and every page's first_pos, used and next.
 * Consolidation stops at the first batch still in progress, so it never
 * moves the head into the batch nor frees its pages while they are filled.
 *
 * Why concurrent appenders stay consistent: the metapage's end and tail
 * move only under the append lock, in the WAL record that links the
 * batch's last page, to exactly the end of the reserved range; the next
 * appender starts there, in the batch's last page, beside bytes that may
 * still be filled.  The fill writes its own bytes of that page as a delta
 * and never lowers its used or pd_lower, so the two appenders' bytes of
 * the page are both kept.  A batch is still one contiguous range of the
 * log, so the log order of batches is a serial order of the transactions.
 *
 * Failures: an error, cancel or crash during the fill leaves a batch whose
 * transaction never commits, skipped by readers and dropped by the next
 * consolidation like any aborted batch; one while linking, before the end
 * moved, leaves pages linked past the end (counted in npages) and bytes
 * past the end on the tail, which the next append reuses and overwrites.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_changelog_int.h"
#include "ss_pending.h"
#include "ss_test.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/*
 * Pages' worth of a batch built in backend memory at a time (256 kB): the
 * most an append holds in memory, and the most of it written while the
 * append lock is held.
 */
#define SS_APPEND_CHUNK_PAGES	32

static const char zero_pad[MAXIMUM_ALIGNOF] = {0};

static void
log_page_init(Page page, uint64 first_pos)
{
	SSLogPageHeader *ph;

	ss_page_init(page, SS_PAGE_LOG, SS_LOG_DATA_OFFSET);
	ph = ss_log_page_header(page);
	ph->first_pos = first_pos;
	ph->next = InvalidBlockNumber;
	ph->used = 0;
}

static inline char *
log_page_data(Page page)
{
	return SSPageGetData(page) + SS_LOG_DATA_OFFSET;
}

/* pd_lower covering the first n data bytes of a log page */
static inline LocationIndex
log_page_lower(uint32 n)
{
	return (LocationIndex) (MAXALIGN(SizeOfPageHeaderData) +
							SS_LOG_DATA_OFFSET + n);
}

static void
appender_set_used(Page page, uint32 used)
{
	ss_log_page_header(page)->used = used;
	((PageHeader) page)->pd_lower = log_page_lower(used);
}

/* The log form of a pending record (SSLogRecordHeader). */
static inline void
log_record_header(const SSPendingHeader *hdr, const char *payload,
				  SSLogRecordHeader *rh)
{
	rh->type = hdr->type;
	rh->flags = 0;
	rh->len = hdr->len;
	if ((hdr->type == SS_PENDING_KEY || hdr->type == SS_PENDING_DELETE) &&
		hdr->len == sizeof(SSPendingKey))
	{
		SSPendingKey key;

		memcpy(&key, payload, sizeof(key));
		if (hdr->rows > 1 && key.weight == hdr->rows)
			rh->flags = SS_LOG_REC_ROWS_WEIGHT;
		else if (hdr->rows > 1)
		{
			rh->flags = SS_LOG_REC_ROWS;
			rh->len = sizeof(SSPendingKey) + sizeof(uint64);
		}
		else if (key.weight == 1)
		{
			/* the hash comes first: the payload's prefix is written */
			StaticAssertStmt(offsetof(SSPendingKey, hash) == 0,
							 "an SSPendingKey starts with its hash");
			rh->flags = SS_LOG_REC_WEIGHT1;
			rh->len = sizeof(SSHash);
		}
	}
}

/* The bytes a pending record takes in the change log. */
Size
ss_log_record_size(const SSPendingHeader *hdr, const char *payload)
{
	SSLogRecordHeader rh;

	log_record_header(hdr, payload, &rh);
	return sizeof(rh) + MAXALIGN(rh.len);
}

/* ---------------------------------------------------------------------
 * The batch as a byte stream, produced from the pending log
 * ---------------------------------------------------------------------
 */
typedef enum
{
	NEXT_RECORD,				/* after the current piece: the next record */
	NEXT_PAYLOAD,				/* the current record's payload */
	NEXT_PADDING				/* its padding to MAXALIGN */
} StreamNext;

typedef struct BatchStream
{
	Relation	rel;
	const SSLogSource *src;
	SSLogBatchHeader bh;
	uint64		total;			/* header and records */
	uint64		produced;
	uint32		nread;			/* records taken from the pending log */
	bool		exhausted;		/* the pending log had no more */
	const char *piece;			/* bytes not yet produced ... */
	Size		piece_left;
	StreamNext	next;			/* ... and what follows them */
	SSLogRecordHeader rh;		/* the current record */
	const char *payload;
	/* an SS_LOG_REC_ROWS record's payload: the key, then its rows */
	char		key_rows[sizeof(SSPendingKey) + sizeof(uint64)];
} BatchStream;

static void
stream_changed(Relation rel)
{
	elog(ERROR, "pending changes of \"%s\" changed while they were appended",
		 RelationGetRelationName(rel));
}

static void
stream_begin(BatchStream *s, Relation rel, const SSLogSource *src,
			 const SSLogBatchHeader *bh)
{
	memset(s, 0, sizeof(*s));
	s->rel = rel;
	s->bh = *bh;
	s->total = sizeof(*bh) + bh->length;
	s->piece = (const char *) &s->bh;
	s->piece_left = sizeof(s->bh);
	s->next = NEXT_RECORD;
	s->src = src;
}

/* Take the next pending record; false at the end. */
static bool
stream_next_record(BatchStream *s)
{
	SSPendingHeader hdr;
	char	   *payload;

	if (s->exhausted)
		return false;
	if (!s->src->next(s->src->arg, &hdr, &payload))
	{
		s->exhausted = true;
		return false;
	}
	if (++s->nread > s->bh.nrecords)
		stream_changed(s->rel);
	if ((s->nread & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
	log_record_header(&hdr, payload, &s->rh);
	s->payload = payload;
	if (s->rh.flags & SS_LOG_REC_ROWS)
	{
		uint64		rows = hdr.rows;

		memcpy(s->key_rows, payload, sizeof(SSPendingKey));
		memcpy(s->key_rows + sizeof(SSPendingKey), &rows, sizeof(rows));
		s->payload = s->key_rows;
	}
	return true;
}

/*
 * Produce exactly n more bytes of the stream into dst (n never goes past
 * its length, which the pending log gave): a record that fits is copied
 * whole, a larger one piece by piece across calls.
 */
static void
stream_read(BatchStream *s, char *dst, Size n)
{
	Size		done = 0;

	if (n > s->total - s->produced)
		stream_changed(s->rel);
	while (done < n)
	{
		if (s->piece_left > 0)
		{
			Size		take = Min(s->piece_left, n - done);

			memcpy(dst + done, s->piece, take);
			s->piece += take;
			s->piece_left -= take;
			done += take;
			continue;
		}
		switch (s->next)
		{
			case NEXT_PAYLOAD:
				s->piece = s->payload;
				s->piece_left = s->rh.len;
				s->next = NEXT_PADDING;
				break;
			case NEXT_PADDING:
				s->piece = zero_pad;
				s->piece_left = MAXALIGN(s->rh.len) - s->rh.len;
				s->next = NEXT_RECORD;
				break;
			case NEXT_RECORD:
				{
					Size		size;

					if (!stream_next_record(s))
						stream_changed(s->rel);
					size = sizeof(s->rh) + MAXALIGN(s->rh.len);
					if (size <= n - done)
					{
						/* most records: one copy, padding zeroed */
						char	   *out = dst + done;

						memcpy(out, &s->rh, sizeof(s->rh));
						memcpy(out + sizeof(s->rh), s->payload, s->rh.len);
						memset(out + sizeof(s->rh) + s->rh.len, 0,
							   MAXALIGN(s->rh.len) - s->rh.len);
						done += size;
					}
					else
					{
						s->piece = (const char *) &s->rh;
						s->piece_left = sizeof(s->rh);
						s->next = NEXT_PAYLOAD;
					}
				}
				break;
		}
	}
	s->produced += done;
}

/* The whole stream was produced: check that it was all of the records. */
static void
stream_end(BatchStream *s)
{
	/*
	 * A record produced piece by piece may end with empty pieces not yet
	 * taken: an aligned payload's padding, or an empty payload.
	 */
	while (s->piece_left == 0 && s->next != NEXT_RECORD)
	{
		if (s->next == NEXT_PAYLOAD)
		{
			s->piece_left = s->rh.len;
			s->next = NEXT_PADDING;
		}
		else
		{
			s->piece_left = MAXALIGN(s->rh.len) - s->rh.len;
			s->next = NEXT_RECORD;
		}
	}
	if (s->produced != s->total || s->piece_left != 0 ||
		stream_next_record(s) || s->nread != s->bh.nrecords)
		stream_changed(s->rel);
}

/* ---------------------------------------------------------------------
 * Reserving and filling the batch's range of the log
 * ---------------------------------------------------------------------
 */
typedef struct LogAppend
{
	Relation	rel;
	uint64		start;			/* the batch's log position */
	uint64		total;			/* its bytes */
	uint32		nrecords;
	char	   *buf;			/* built bytes [buf_off, buf_off + buf_len) */
	Size		buf_size;		/* of the batch, at most a chunk */
	uint64		buf_off;
	Size		buf_len;
	BlockNumber fill_blk;		/* page holding batch byte buf_off, if the
								 * reservation did not write it */
	XLogRecPtr	lsn;			/* of the append's last WAL record */
} LogAppend;

/*
 * Pin log page blk, which the append is about to take (a page left after
 * the tail by a crashed append, or the free list's first page), and return
 * its next pointer: the rest of that chain or free list.  Only appenders
 * change those pages and pointers, under the append lock the caller holds,
 * so the pointer stays valid after the share lock is released.
 */
static BlockNumber
append_take_page(Relation rel, BlockNumber blk, Buffer *bufp)
{
	Buffer		buf = ReadBuffer(rel, blk);
	Page		page;
	BlockNumber next = InvalidBlockNumber;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (!PageIsNew(page))
	{
		ss_page_check(rel, blk, page, SS_PAGE_LOG);
		next = ss_log_page_header(page)->next;
	}
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	*bufp = buf;
	return next;
}

/*
 * The append's test points (streamsketch.test_fail_during_log_append):
 * "linking" after the first WAL record that links pages past the log's
 * end when more are to come, "filling" after the batch became part of the
 * log while bytes remain to be written.  At "filling", a commit also waits
 * for streamsketch.test_log_append_wait's advisory lock, so that a test
 * can cancel it or stop the server there (no buffer lock is held).
 */
static void
append_test_point(LogAppend *ap, int error_mode, int panic_mode,
				  const char *what)
{
	if (error_mode == SS_APPEND_FAIL_ERROR_FILLING && ss_test_append_wait > 0)
	{
		if (!XLogRecPtrIsInvalid(ap->lsn))
			XLogFlush(ap->lsn);
		ss_test_wait_advisory(ss_test_append_wait);
	}
	if (ss_test_fail_during_append == error_mode)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("streamsketch.test_fail_during_log_append: failing %s the change log batch of \"%s\"",
						what, RelationGetRelationName(ap->rel))));
	if (ss_test_fail_during_append == panic_mode)
	{
		if (!XLogRecPtrIsInvalid(ap->lsn))
			XLogFlush(ap->lsn);
		elog(PANIC, "streamsketch.test_fail_during_log_append: stopping %s the change log batch of \"%s\"",
			 what, RelationGetRelationName(ap->rel));
	}
}

/*
 * The whole batch fits the tail page's room: one WAL record copies it
 * there and moves the log's end.  Lock order: the tail page, the metapage
 * (both pinned by the caller).
 */
static void
append_in_tail(LogAppend *ap, Buffer tailbuf, BlockNumber tail,
			   uint64 tail_first)
{
	SSXLogState *state = ss_xlog_start(ap->rel);
	Page		page;
	Buffer		metabuf;
	SSLogMeta  *mlog;
	uint32		off = (uint32) (ap->start - tail_first);

	LockBuffer(tailbuf, BUFFER_LOCK_EXCLUSIVE);
	page = ss_xlog_register(state, tailbuf, 0);
	if (ss_log_page_header(page)->first_pos != tail_first)
		ss_log_corrupted(ap->rel, tail, "The change log's tail page changed under its appender.");
	memcpy(log_page_data(page) + off, ap->buf, ap->total);
	/* bytes past the end are left over from an append that crashed */
	appender_set_used(page, off + (uint32) ap->total);
	mlog = ss_log_meta_register(ap->rel, state, &metabuf);
	if (mlog->end_pos != ap->start || mlog->end_blk != tail)
		ss_log_corrupted(ap->rel, SS_METAPAGE_BLKNO, "The change log's end moved under its appender.");
	mlog->end_pos = ap->start + ap->total;
	mlog->nrecords += ap->nrecords;
	ap->lsn = ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
	UnlockReleaseBuffer(tailbuf);
}

/*
 * Reserve the batch's range [log->end_pos, + ap->total) under the append
 * lock (see the file's header): the tail's room and new pages linked after
 * it, the bytes built so far written, the log's end moved past the batch.
 * Leaves in ap->fill_blk the first page whose bytes remain to be written,
 * with those of them already built moved to the start of ap->buf.
 *
 * Lock order, in each WAL record: the previous page of the chain (the old
 * tail first), the new pages in chain order, the metapage.  No buffer lock
 * is held while a page is read or the relation extended: every page of a
 * record is pinned first.
 */
static void
append_reserve(LogAppend *ap, const SSLogMeta *log)
{
	Relation	rel = ap->rel;
	Buffer		metapin;
	Buffer		prevbuf = InvalidBuffer;
	BlockNumber prevblk = log->end_blk;
	uint64		tail_first = 0;
	uint32		room = 0;
	BlockNumber leftover = InvalidBlockNumber;
	BlockNumber free_blk = log->free_blk;
	uint32		nfree = log->nfree;
	BlockNumber alloc_end = log->alloc_end;
	BlockNumber end_blk = log->end_blk;
	uint64		need;
	uint64		done;
	Size		built = ap->buf_len;

	ap->start = log->end_pos;
	ap->fill_blk = InvalidBlockNumber;
	/* pinned for the whole reservation: registering it does no I/O */
	metapin = ReadBuffer(rel, SS_METAPAGE_BLKNO);
	if (prevblk != InvalidBlockNumber)
	{
		SSLogPageHeader *ph;

		prevbuf = ReadBuffer(rel, prevblk);
		LockBuffer(prevbuf, BUFFER_LOCK_SHARE);
		ss_page_check(rel, prevblk, BufferGetPage(prevbuf), SS_PAGE_LOG);
		ph = ss_log_page_header(BufferGetPage(prevbuf));
		if (PageIsNew(BufferGetPage(prevbuf)) ||
			ph->first_pos == SS_LOG_FREE_POS || ph->first_pos > ap->start ||
			ap->start - ph->first_pos > SS_LOG_PAGE_CAPACITY)
			ss_log_corrupted(rel, prevblk, "The change log's tail page does not hold the log's end.");
		tail_first = ph->first_pos;
		leftover = ph->next;
		LockBuffer(prevbuf, BUFFER_LOCK_UNLOCK);
		room = SS_LOG_PAGE_CAPACITY - (uint32) (ap->start - tail_first);
	}
	if (ap->total <= room)
	{
		append_in_tail(ap, prevbuf, prevblk, tail_first);
		ReleaseBuffer(metapin);
		ap->buf_len = 0;
		return;
	}

	need = (ap->total - room + SS_LOG_PAGE_CAPACITY - 1) / SS_LOG_PAGE_CAPACITY;
	if (need >= PG_UINT32_MAX - (uint64) log->npages)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("changes to \"%s\" in one transaction are too large for its change log",
						RelationGetRelationName(rel))));
	for (done = 0; done < need;)
	{
		int			n = (int) Min((uint64) 2, need - done);
		BlockNumber blks[2];
		Buffer		bufs[2];
		int			fresh = 0;
		SSXLogState *state;
		Buffer		metabuf;
		SSLogMeta  *mlog;
		BlockNumber expect_free = free_blk;
		uint32		expect_nfree = nfree;
		BlockNumber expect_alloc = alloc_end;
		BlockNumber expect_end_blk = end_blk;
		bool		last = done + n == need;

		CHECK_FOR_INTERRUPTS();
		/* choose and pin the record's new pages before any lock */
		for (int j = 0; j < n; j++)
		{
			BlockNumber blk;
			bool		reused = false;

			if (leftover != InvalidBlockNumber)
			{
				/* a crashed append's page; its successors stay linked */
				blk = leftover;
				reused = true;
				if (blk == SS_METAPAGE_BLKNO || blk >= alloc_end)
					ss_log_corrupted(rel, blk, "A change log page lies outside the log's blocks.");
				leftover = append_take_page(rel, blk, &bufs[j]);
			}
			else if (free_blk != InvalidBlockNumber)
			{
				blk = free_blk;
				if (nfree == 0 || blk == SS_METAPAGE_BLKNO || blk >= alloc_end)
					ss_log_corrupted(rel, blk, "The change log's free list is damaged.");
				free_blk = append_take_page(rel, blk, &bufs[j]);
				nfree--;
			}
			else
			{
				blk = alloc_end;
				if (blk == 0 || blk == InvalidBlockNumber)
					ss_log_corrupted(rel, SS_METAPAGE_BLKNO, "The structure has no room for a change log.");
				ss_extend_to(rel, blk);
				bufs[j] = ReadBuffer(rel, blk);
				alloc_end++;
			}
			if (blk == prevblk || (j == 1 && blk == blks[0]))
				ss_log_corrupted(rel, blk, "A change log page is linked to itself.");
			blks[j] = blk;
			/* a page left by a crashed append was counted when it took it */
			if (!reused)
				fresh++;
		}

		state = ss_xlog_start(rel);
		if (BufferIsValid(prevbuf))
		{
			Page		prev;

			LockBuffer(prevbuf, BUFFER_LOCK_EXCLUSIVE);
			prev = ss_xlog_register(state, prevbuf, 0);
			if (done == 0)
			{
				/* the old tail: the batch's first bytes go into its room */
				uint32		off = (uint32) (ap->start - tail_first);

				if (ss_log_page_header(prev)->first_pos != tail_first)
					ss_log_corrupted(rel, prevblk, "The change log's tail page changed under its appender.");
				memcpy(log_page_data(prev) + off, ap->buf, room);
				appender_set_used(prev, off + room);
			}
			ss_log_page_header(prev)->next = blks[0];
		}
		for (int j = 0; j < n; j++)
		{
			uint64		first = room + (done + j) * SS_LOG_PAGE_CAPACITY;
			uint32		len = (uint32) Min((uint64) SS_LOG_PAGE_CAPACITY,
										   ap->total - first);
			Page		page;
			SSLogPageHeader *ph;

			LockBuffer(bufs[j], BUFFER_LOCK_EXCLUSIVE);
			page = ss_xlog_register(state, bufs[j], SS_XLOG_FULL_IMAGE);
			log_page_init(page, ap->start + first);
			ph = ss_log_page_header(page);
			ph->next = j + 1 < n ? blks[j + 1] : leftover;
			if (first + len <= built)
			{
				memcpy(log_page_data(page), ap->buf + first, len);
				appender_set_used(page, len);
			}
			else
			{
				/*
				 * Filled later.  Its bytes are zeros until then, below
				 * pd_lower's reach, so the image leaves them out; the fill
				 * moves pd_lower up with them.
				 */
				ph->used = len;
				if (ap->fill_blk == InvalidBlockNumber)
				{
					ap->fill_blk = blks[j];
					ap->buf_off = first;
				}
			}
		}
		mlog = ss_log_meta_register(rel, state, &metabuf);
		if (mlog->free_blk != expect_free || mlog->nfree != expect_nfree ||
			mlog->alloc_end != expect_alloc || mlog->end_blk != expect_end_blk ||
			mlog->end_pos != ap->start)
			ss_log_corrupted(rel, SS_METAPAGE_BLKNO, "The change log changed under its appender.");
		mlog->free_blk = free_blk;
		mlog->nfree = nfree;
		mlog->alloc_end = alloc_end;
		mlog->npages += (uint32) fresh;
		if (mlog->end_blk == InvalidBlockNumber)
		{
			/* the log's first page: head and end start on it */
			mlog->head_blk = mlog->end_blk = blks[0];
			mlog->head_pos = mlog->end_pos = ap->start;
		}
		end_blk = mlog->end_blk;
		if (last)
		{
			/* the batch is part of the log (uncounted until it commits) */
			mlog->end_pos = ap->start + ap->total;
			mlog->end_blk = blks[n - 1];
			mlog->nrecords += ap->nrecords;
		}
		ap->lsn = ss_xlog_finish(state);
		UnlockReleaseBuffer(metabuf);
		if (BufferIsValid(prevbuf))
			UnlockReleaseBuffer(prevbuf);
		for (int j = 0; j < n - 1; j++)
			UnlockReleaseBuffer(bufs[j]);
		LockBuffer(bufs[n - 1], BUFFER_LOCK_UNLOCK);
		prevbuf = bufs[n - 1];
		prevblk = blks[n - 1];
		done += n;
		if (!last)
			append_test_point(ap, SS_APPEND_FAIL_ERROR_LINKING,
							  SS_APPEND_FAIL_PANIC_LINKING,
							  "while linking");
	}
	ReleaseBuffer(prevbuf);
	ReleaseBuffer(metapin);

	/* what was built but not written starts the fill's first chunk */
	if (ap->fill_blk != InvalidBlockNumber)
	{
		ap->buf_len = built - (Size) ap->buf_off;
		memmove(ap->buf, ap->buf + ap->buf_off, ap->buf_len);
	}
	else
		ap->buf_len = 0;
}

/*
 * Write the rest of the batch into the pages the reservation left to fill,
 * a chunk at a time, with no lock but each page's own while it is written
 * (one WAL record per page).  Every page but the batch's last is the
 * batch's alone and written as a full image; the last may already hold the
 * next batch's first bytes, so only the batch's own bytes are written
 * there, as a delta, and its used and pd_lower never move down.
 */
static void
append_fill(LogAppend *ap, BatchStream *s)
{
	BlockNumber blk = ap->fill_blk;
	uint64		off = ap->buf_off;

	while (off < ap->total)
	{
		Size		want = (Size) Min((uint64) ap->buf_size, ap->total - off);

		if (ap->buf_len < want)
			stream_read(s, ap->buf + ap->buf_len, want - ap->buf_len);
		for (Size p = 0; p < want;)
		{
			uint32		n = (uint32) Min((Size) SS_LOG_PAGE_CAPACITY, want - p);
			bool		last = off + p + n == ap->total;
			Buffer		buf;
			Page		page;
			SSLogPageHeader *ph;
			SSXLogState *state;
			BlockNumber next;

			CHECK_FOR_INTERRUPTS();
			if (blk == InvalidBlockNumber || blk == SS_METAPAGE_BLKNO)
				ss_log_corrupted(ap->rel, blk, "A change log page reserved by its appender is missing.");
			buf = ReadBuffer(ap->rel, blk);
			LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
			ss_page_check(ap->rel, blk, BufferGetPage(buf), SS_PAGE_LOG);
			ph = ss_log_page_header(BufferGetPage(buf));
			if (PageIsNew(BufferGetPage(buf)) ||
				ph->first_pos != ap->start + off + p ||
				ph->used < n || (!last && ph->used != n))
				ss_log_corrupted(ap->rel, blk, "A change log page reserved by its appender changed.");
			state = ss_xlog_start(ap->rel);
			page = ss_xlog_register(state, buf, last ? 0 : SS_XLOG_FULL_IMAGE);
			memcpy(log_page_data(page), ap->buf + p, n);
			if (((PageHeader) page)->pd_lower < log_page_lower(n))
				((PageHeader) page)->pd_lower = log_page_lower(n);
			next = ss_log_page_header(page)->next;
			ap->lsn = ss_xlog_finish(state);
			UnlockReleaseBuffer(buf);
			p += n;
			blk = next;
		}
		off += want;
		ap->buf_len = 0;
	}
}

/*
 * Append this transaction's pending records for rel as one batch (at
 * pre-commit).  Its cost is the batch's bytes: built in backend memory a
 * chunk at a time, copied into log pages with one WAL record per page (two
 * new pages per record while they are linked), and the append lock is
 * held only to reserve the batch's range of the log (see the file's
 * header).  Interrupts are not held: an error or a cancel aborts the
 * transaction, and whatever was written then lies past the log's end, or
 * is a batch whose transaction never commits.
 *
 * Lock order: the append lock (taken after the consolidation lock by the
 * admission path, never before it), then buffer locks as
 * append_reserve and append_fill say; no buffer lock is held while the
 * spill file is read.
 *
 * Returns the log's length once the batch is in it (0 if there was none).
 */
uint64
ss_log_append(Relation rel, const SSLogSource *src)
{
	SSLogBatchHeader bh;
	BatchStream s;
	LogAppend	ap;
	SSLogMeta	log;
	const SSStructure *ops = ss_structure_ops(rel);
	uint64		nrecords;
	uint64		log_bytes;
	uint64		log_length;

	memset(&bh, 0, sizeof(bh));
	nrecords = src->nrecords;
	log_bytes = src->log_bytes;
	if (nrecords == 0)
		return 0;
	if (nrecords > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many changes to \"%s\" in one transaction",
						RelationGetRelationName(rel)),
				 errdetail("A transaction may make at most %u changes to one structure.",
						   PG_UINT32_MAX)));
	bh.nrecords = (uint32) nrecords;
	bh.length = log_bytes;
	bh.xid = GetTopTransactionId();

	/* build the first chunk before any lock */
	memset(&ap, 0, sizeof(ap));
	ap.rel = rel;
	ap.total = sizeof(bh) + log_bytes;
	ap.nrecords = bh.nrecords;
	ap.buf_size = (Size) Min(ap.total,
							 (uint64) SS_APPEND_CHUNK_PAGES * SS_LOG_PAGE_CAPACITY);
	ap.buf = palloc(ap.buf_size);
	stream_begin(&s, rel, src, &bh);
	stream_read(&s, ap.buf, ap.buf_size);
	ap.buf_len = ap.buf_size;

	LockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
	ss_log_meta_read(rel, &log);
	if (log.alloc_end == 0)
		elog(ERROR, "structure \"%s\" has no change log",
			 RelationGetRelationName(rel));

	/*
	 * A structure that can be full (a quotient filter whose fingerprints
	 * allow no larger level) refuses here, where the log is stable, a batch
	 * that it might not be able to take: a committed batch that can never
	 * be applied would block the log.  When only the records waiting in
	 * the log make the bound fail, it is consolidated first (near-full
	 * structures only).
	 */
	if (ops->admit != NULL && !ops->admit(rel, log.nrecords, false))
	{
		UnlockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
		(void) ss_log_consolidate(rel, true);
		LockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
		ss_log_meta_read(rel, &log);
		(void) ops->admit(rel, log.nrecords, true);
	}
	append_reserve(&ap, &log);
	UnlockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);
	log_length = log.end_pos + ap.total - log.head_pos;

	if (ap.fill_blk != InvalidBlockNumber)
	{
		append_test_point(&ap, SS_APPEND_FAIL_ERROR_FILLING,
						  SS_APPEND_FAIL_PANIC_FILLING, "while filling");
		append_fill(&ap, &s);
	}
	stream_end(&s);
	pfree(ap.buf);

	if (ss_test_fail_after_append == SS_FAIL_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("streamsketch.test_fail_after_log_append: failing after the change log append of \"%s\"",
						RelationGetRelationName(rel))));
	if (ss_test_fail_after_append == SS_FAIL_PANIC)
	{
		if (!XLogRecPtrIsInvalid(ap.lsn))
			XLogFlush(ap.lsn);
		elog(PANIC, "streamsketch.test_fail_after_log_append: stopping after the change log append of \"%s\"",
			 RelationGetRelationName(rel));
	}
	return log_length;
}
