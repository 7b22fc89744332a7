/*-------------------------------------------------------------------------
 *
 * ss_logappend.c
 *	  Appending a transaction's pending records to the change log at
 *	  pre-commit (see ss_changelog.h): one batch per structure, WAL-logged
 *	  before the commit record.
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
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* ---------------------------------------------------------------------
 * Appending a batch at pre-commit
 * ---------------------------------------------------------------------
 */
typedef struct LogAppender
{
	Relation	rel;
	uint64		pos;			/* next byte's position */
	BlockNumber blk;			/* tail page, locked in state */
	Buffer		buf;
	SSXLogState *state;
	Page		page;			/* the record's copy of the tail page */
} LogAppender;

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

static void
appender_set_used(Page page, uint32 used)
{
	ss_log_page_header(page)->used = used;
	((PageHeader) page)->pd_lower = MAXALIGN(SizeOfPageHeaderData) +
		SS_LOG_DATA_OFFSET + used;
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
		if (key.weight == 1)
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

/* Lock and register the tail page holding a->pos. */
static void
appender_lock_tail(LogAppender *a)
{
	SSLogPageHeader *ph;

	a->state = ss_xlog_start(a->rel);
	a->buf = ReadBuffer(a->rel, a->blk);
	LockBuffer(a->buf, BUFFER_LOCK_EXCLUSIVE);
	ss_page_check(a->rel, a->blk, BufferGetPage(a->buf), SS_PAGE_LOG);
	a->page = ss_xlog_register(a->state, a->buf, 0);
	ph = ss_log_page_header(a->page);
	if (ph->first_pos == SS_LOG_FREE_POS || ph->first_pos > a->pos ||
		a->pos - ph->first_pos > SS_LOG_PAGE_CAPACITY)
		ss_log_corrupted(a->rel, a->blk, "The change log's tail page does not hold the log's end.");
	/* bytes past the end are left over from an append that crashed */
	appender_set_used(a->page, (uint32) (a->pos - ph->first_pos));
}

static void
appender_finish_page(LogAppender *a)
{
	ss_xlog_finish(a->state);
	UnlockReleaseBuffer(a->buf);
	a->buf = InvalidBuffer;
}

/*
 * Continue the log on a new page: the next one left linked by a crashed
 * append (whose own successors stay linked after it), else a free page,
 * else a new block at alloc_end.  One WAL record
 * links the old tail (if any) to it, initializes it and updates the
 * metapage.  Lock order: the old tail page, the new page, the metapage.
 * The caller holds the append lock, under which alone the free list and
 * alloc_end change.
 */
static void
appender_new_page(LogAppender *a)
{
	SSLogMeta	log;
	BlockNumber newblk;
	bool		from_free = false;
	bool		leftover = false;
	BlockNumber leftover_next = InvalidBlockNumber;
	SSXLogState *state;
	Buffer		newbuf;
	Buffer		metabuf;
	Page		newpage;
	SSLogMeta  *mlog;
	Buffer		tailbuf = InvalidBuffer;
	Page		tailpage = NULL;

	ss_log_meta_read(a->rel, &log);
	if (a->blk != InvalidBlockNumber)
	{
		/* the old tail is finished; find what follows it */
		Buffer		b = ReadBuffer(a->rel, a->blk);

		LockBuffer(b, BUFFER_LOCK_SHARE);
		newblk = ss_log_page_header(BufferGetPage(b))->next;
		UnlockReleaseBuffer(b);
	}
	else
		newblk = InvalidBlockNumber;
	leftover = newblk != InvalidBlockNumber;

	if (newblk == InvalidBlockNumber)
	{
		if (log.free_blk != InvalidBlockNumber)
		{
			newblk = log.free_blk;
			from_free = true;
		}
		else
		{
			newblk = log.alloc_end;
			if (newblk == 0 || newblk == InvalidBlockNumber)
				ss_log_corrupted(a->rel, SS_METAPAGE_BLKNO, "The structure has no room for a change log.");
			/* extend before any buffer lock is taken */
			ss_extend_to(a->rel, newblk);
		}
	}
	if (newblk > log.alloc_end || newblk == SS_METAPAGE_BLKNO ||
		(newblk == log.alloc_end && from_free))
		ss_log_corrupted(a->rel, newblk, "A change log page lies outside the log's blocks.");

	state = ss_xlog_start(a->rel);
	if (a->blk != InvalidBlockNumber)
	{
		tailbuf = ReadBuffer(a->rel, a->blk);
		LockBuffer(tailbuf, BUFFER_LOCK_EXCLUSIVE);
		tailpage = ss_xlog_register(state, tailbuf, 0);
	}
	newbuf = ReadBuffer(a->rel, newblk);
	LockBuffer(newbuf, BUFFER_LOCK_EXCLUSIVE);
	if (!PageIsNew(BufferGetPage(newbuf)))
		ss_page_check(a->rel, newblk, BufferGetPage(newbuf), SS_PAGE_LOG);
	newpage = ss_xlog_register(state, newbuf, SS_XLOG_FULL_IMAGE);
	mlog = ss_log_meta_register(a->rel, state, &metabuf);

	if (from_free)
	{
		BlockNumber after = PageIsNew(BufferGetPage(newbuf)) ?
			InvalidBlockNumber : ss_log_page_header(BufferGetPage(newbuf))->next;

		if (mlog->free_blk != newblk || mlog->nfree == 0)
			ss_log_corrupted(a->rel, newblk, "The change log's free list changed under its appender.");
		mlog->free_blk = after;
		mlog->nfree--;
	}
	else if (newblk == mlog->alloc_end)
		mlog->alloc_end++;
	/* the rest of a crashed append's chain stays linked, to be reused next */
	if (leftover && !PageIsNew(BufferGetPage(newbuf)))
		leftover_next = ss_log_page_header(BufferGetPage(newbuf))->next;
	log_page_init(newpage, a->pos);
	ss_log_page_header(newpage)->next = leftover_next;
	if (tailpage)
		ss_log_page_header(tailpage)->next = newblk;
	if (mlog->end_blk == InvalidBlockNumber)
	{
		/* the log's first page: head and end start on it */
		mlog->head_blk = mlog->end_blk = newblk;
		mlog->head_pos = mlog->end_pos = a->pos;
	}
	/* a leftover page was counted when the crashed append took it */
	if (!leftover)
		mlog->npages++;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
	UnlockReleaseBuffer(newbuf);
	if (BufferIsValid(tailbuf))
		UnlockReleaseBuffer(tailbuf);
	a->blk = newblk;
	appender_lock_tail(a);
}

static void
appender_write(LogAppender *a, const void *data, Size n)
{
	const char *in = data;

	while (n > 0)
	{
		SSLogPageHeader *ph = ss_log_page_header(a->page);
		uint32		room = SS_LOG_PAGE_CAPACITY - ph->used;
		uint32		take = (uint32) Min((Size) room, n);

		if (room == 0)
		{
			appender_finish_page(a);
			CHECK_FOR_INTERRUPTS();
			appender_new_page(a);
			continue;
		}
		memcpy(SSPageGetData(a->page) + SS_LOG_DATA_OFFSET + ph->used, in, take);
		appender_set_used(a->page, ph->used + take);
		a->pos += take;
		in += take;
		n -= take;
	}
}

/*
 * Append this transaction's pending records for rel as one batch (at
 * pre-commit).  Its cost is the batch's bytes: copied into log pages, one
 * WAL record per page, and one metapage update that makes the batch part
 * of the log.  Interrupts are not held: an error or a cancel aborts the
 * transaction, and whatever was written then lies past the log's end, or
 * is a batch whose transaction never commits.
 */
void
ss_log_append(Relation rel)
{
	SSPendingIter it;
	SSPendingHeader hdr;
	char	   *payload;
	SSLogBatchHeader bh;
	LogAppender a;
	SSLogMeta	log;
	SSXLogState *state;
	Buffer		metabuf;
	SSLogMeta  *mlog;
	XLogRecPtr	lsn;
	const SSStructure *ops = ss_structure_ops(rel);
	uint64		nrecords;
	uint64		log_bytes;
	uint64		written = 0;
	uint64		nwritten = 0;
	PGAlignedBlock record;

	memset(&bh, 0, sizeof(bh));
	nrecords = ss_pending_count(RelationGetRelid(rel), &log_bytes);
	if (nrecords == 0)
		return;
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
	a.rel = rel;
	a.pos = log.end_pos;
	a.blk = log.end_blk;
	a.buf = InvalidBuffer;
	if (a.blk == InvalidBlockNumber)
		appender_new_page(&a);
	else
		appender_lock_tail(&a);

	appender_write(&a, &bh, sizeof(bh));
	ss_pending_iter_begin(&it, RelationGetRelid(rel));
	while (ss_pending_iter_next(&it, &hdr, &payload))
	{
		SSLogRecordHeader rh;
		Size		size;

		log_record_header(&hdr, payload, &rh);
		size = sizeof(rh) + MAXALIGN(rh.len);
		written += size;
		nwritten++;
		if (size <= SS_LOG_PAGE_CAPACITY - ss_log_page_header(a.page)->used)
		{
			/* it fits in the tail page: written in place */
			uint32		used = ss_log_page_header(a.page)->used;
			char	   *dst = SSPageGetData(a.page) + SS_LOG_DATA_OFFSET + used;

			memcpy(dst, &rh, sizeof(rh));
			memcpy(dst + sizeof(rh), payload, rh.len);
			memset(dst + sizeof(rh) + rh.len, 0, MAXALIGN(rh.len) - rh.len);
			appender_set_used(a.page, used + (uint32) size);
			a.pos += size;
		}
		else if (size <= sizeof(record.data))
		{
			/* a small record is one copy (the padding is zeroed) */
			memset(record.data + size - MAXIMUM_ALIGNOF, 0, MAXIMUM_ALIGNOF);
			memcpy(record.data, &rh, sizeof(rh));
			memcpy(record.data + sizeof(rh), payload, rh.len);
			appender_write(&a, record.data, size);
		}
		else
		{
			static const char pad[MAXIMUM_ALIGNOF] = {0};

			appender_write(&a, &rh, sizeof(rh));
			appender_write(&a, payload, rh.len);
			appender_write(&a, pad, MAXALIGN(rh.len) - rh.len);
		}
	}
	ss_pending_iter_end(&it);
	if (written != bh.length || nwritten != bh.nrecords)
		elog(ERROR, "pending changes of \"%s\" changed while they were appended",
			 RelationGetRelationName(rel));
	appender_finish_page(&a);

	/* the batch is complete: make it part of the log */
	state = ss_xlog_start(rel);
	mlog = ss_log_meta_register(rel, state, &metabuf);
	mlog->end_pos = a.pos;
	mlog->end_blk = a.blk;
	mlog->nrecords += bh.nrecords;
	lsn = ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
	UnlockPage(rel, SS_LOG_APPEND_LOCK, ExclusiveLock);

	if (ss_test_fail_after_append == SS_FAIL_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("streamsketch.test_fail_after_log_append: failing after the change log append of \"%s\"",
						RelationGetRelationName(rel))));
	if (ss_test_fail_after_append == SS_FAIL_PANIC)
	{
		if (!XLogRecPtrIsInvalid(lsn))
			XLogFlush(lsn);
		elog(PANIC, "streamsketch.test_fail_after_log_append: stopping after the change log append of \"%s\"",
			 RelationGetRelationName(rel));
	}
}
