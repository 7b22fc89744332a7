/*-------------------------------------------------------------------------
 *
 * qfam_undo.c
 *	  Deletes that take effect only when their transaction commits.
 *
 * Pending changes are applied at pre-commit, before the commit record.  An
 * insert applied by a transaction that then does not commit (a crash or an
 * error in that window) can only over-count, which a filter tolerates; a
 * delete would remove a fingerprint that is still committed: a false
 * negative.  So every copy a delete removes is also written, in the same
 * WAL record as the removal, to an undo segment stamped with the deleter's
 * xid, and the removal counts only once that xid has committed:
 *
 *	- readers add the segment's copies of their fingerprint back unless the
 *	  xid committed (in progress or aborted: the delete did not happen);
 *	- the segment is resolved by the next deleting commit, by a later writer
 *	  that gets the delete lock without waiting, and by VACUUM: a committed
 *	  segment is forgotten, an aborted one is inserted back.
 *
 * There is one segment at a time: deleting commits of a relation are
 * serialized by the delete lock (a heavyweight page lock on
 * QFAM_DELETE_LOCK_BLKNO, held until the deleter's transaction ends, so
 * after its commit record), and each deleter resolves its predecessor's
 * segment before it removes anything.
 *
 * Undo pages form a list starting at meta->undo_head that every segment
 * reuses; the segment is the prefix of the list stamped with
 * meta->undo_xid (a page's first entry of a new segment re-stamps it).
 *
 * Locking order: delete lock, then the page lock on block 0 (share while
 * applying, see qfam_apply.c), then buffer locks: a filter page before the
 * undo page, or the metapage alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ss_xlog.h"
#include "access/transam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "qfam.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "streamsketch.h"
#include "utils/memutils.h"

#define UNDO_DATA_SIZE(n) (sizeof(QfamUndoHeader) + (Size) (n) * sizeof(QfamUndoEntry))

/* Set the metapage's undo fields (head unchanged if InvalidBlockNumber). */
static void
undo_set_meta(Relation rel, TransactionId xid, BlockNumber head)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		buf;
	QfamMeta   *m = ss_meta_register(rel, SS_KIND_QF, state, &buf);

	m->undo_xid = xid;
	if (BlockNumberIsValid(head))
		m->undo_head = head;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

/* Has the segment's deleter committed?  See qfam_undo_add_back. */
static bool
undo_committed(TransactionId xid)
{
	/*
	 * A segment nobody resolved for ~2^31 transactions (no write and no
	 * VACUUM since a crash in the commit window) may have lost its commit
	 * status: count its copies, which errs towards a false positive.
	 */
	if (TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid))
		return false;
	return TransactionIdDidCommit(xid);
}

typedef void (*UndoPageFn) (const QfamUndoEntry *entries, uint32 n, void *arg);

/*
 * If undo page blkno belongs to the segment of xid, call fn for its
 * entries (under a share lock), set *next to the following page and return
 * true; otherwise (a page of an older segment, or beyond the end of the
 * relation) return false.
 */
static bool
undo_page(Relation rel, BlockNumber blkno, TransactionId xid, UndoPageFn fn,
		  void *arg, BlockNumber *next)
{
	Buffer		buf = ss_read_buffer_if_exists(rel, blkno);
	QfamUndoHeader *hdr;
	bool		ours;

	if (!BufferIsValid(buf))
		return false;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	ss_page_check(rel, blkno, BufferGetPage(buf), SS_PAGE_QF_UNDO);
	hdr = (QfamUndoHeader *) SSPageGetData(BufferGetPage(buf));
	ours = TransactionIdEquals(hdr->xid, xid);
	if (ours && hdr->nentries > 0)
		fn((QfamUndoEntry *) (hdr + 1), Min(hdr->nentries, QFAM_UNDO_CAPACITY),
		   arg);
	*next = hdr->next;
	UnlockReleaseBuffer(buf);
	return ours;
}

/* Call fn for the entries of each page of xid's segment starting at head. */
static void
undo_foreach_page(Relation rel, BlockNumber head, TransactionId xid,
				  UndoPageFn fn, void *arg)
{
	BlockNumber blkno = head;

	while (BlockNumberIsValid(blkno) &&
		   undo_page(rel, blkno, xid, fn, arg, &blkno))
		CHECK_FOR_INTERRUPTS();
}

typedef struct AddBack
{
	uint64		fp;
	uint64		count;
} AddBack;

static void
add_back_page(const QfamUndoEntry *e, uint32 n, void *arg)
{
	AddBack    *ab = arg;

	for (uint32 i = 0; i < n; i++)
		if (e[i].fp == ab->fp)
			ab->count = (ab->count + e[i].count < ab->count) ? PG_UINT64_MAX :
				ab->count + e[i].count;
}

/*
 * Copies of fingerprint fp (top fp_bits bits set, the rest zero) that the
 * uncommitted deleter of meta's undo segment removed, to add back.
 */
uint64
qfam_undo_add_back(Relation rel, const QfamMeta *meta, uint64 fp)
{
	AddBack		ab;

	if (!TransactionIdIsValid(meta->undo_xid) || undo_committed(meta->undo_xid))
		return 0;
	ab.fp = fp & (~UINT64CONST(0) << (64 - meta->params.fp_bits));
	ab.count = 0;
	undo_foreach_page(rel, meta->undo_head, meta->undo_xid, add_back_page, &ab);
	return ab.count;
}

typedef struct Restore
{
	QfamUndoEntry copies[QFAM_UNDO_CAPACITY];
	uint32		n;
} Restore;

static void
restore_page(const QfamUndoEntry *e, uint32 n, void *arg)
{
	Restore    *r = arg;

	memcpy(r->copies, e, n * sizeof(QfamUndoEntry));
	r->n = n;
}

/*
 * Resolve the undo segment left by an earlier deleter.  With have_lock the
 * caller holds the delete lock (it is the next deleter); otherwise it is
 * taken without waiting, and released again, or nothing is done: a
 * deleter still holding it will resolve.  An aborted segment's copies are
 * inserted back into the filter, a page of entries at a time, before the
 * segment is forgotten (a crash in between inserts them twice: a rare
 * over-count, never a loss).
 */
void
qfam_undo_resolve(Relation rel, const QfamState *st, bool have_lock)
{
	QfamMeta	meta;
	TransactionId xid;

	if (!qfam_read_meta(rel, &meta) || !TransactionIdIsValid(meta.undo_xid))
		return;
	if (!have_lock &&
		!ConditionalLockPage(rel, QFAM_DELETE_LOCK_BLKNO, ExclusiveLock))
		return;
	if (!qfam_read_meta(rel, &meta))
		elog(ERROR, "quotient filter metapage of \"%s\" disappeared",
			 RelationGetRelationName(rel));
	xid = meta.undo_xid;

	/*
	 * With the delete lock held the deleter has ended, unless the segment
	 * is ours (resolved by our own next deleting commit: cannot happen, a
	 * transaction commits once) or a prepared transaction's (refused).
	 */
	if (TransactionIdIsValid(xid) && !TransactionIdIsCurrentTransactionId(xid) &&
		!TransactionIdIsInProgress(xid))
	{
		if (!undo_committed(xid))
		{
			Restore    *r = palloc(sizeof(Restore));
			BlockNumber blkno = meta.undo_head;

			/* a page at a time: inserting may merge levels */
			while (BlockNumberIsValid(blkno))
			{
				r->n = 0;
				if (!undo_page(rel, blkno, xid, restore_page, r, &blkno))
					break;
				if (r->n > 0)
					qfam_insert_copies(rel, st, r->copies, (int) r->n);
				CHECK_FOR_INTERRUPTS();
			}
			pfree(r);
		}
		undo_set_meta(rel, InvalidTransactionId, InvalidBlockNumber);
	}
	if (!have_lock)
		UnlockPage(rel, QFAM_DELETE_LOCK_BLKNO, ExclusiveLock);
}

/*
 * Start this transaction's undo segment: wait for the previous deleter to
 * end, resolve its segment and stamp the metapage with our xid.  The delete
 * lock stays until our transaction ends.
 */
void
qfam_undo_begin(Relation rel, const QfamState *st, QfamUndo *u)
{
	QfamMeta	meta;

	LockPage(rel, QFAM_DELETE_LOCK_BLKNO, ExclusiveLock);
	qfam_undo_resolve(rel, st, true);
	if (!qfam_read_meta(rel, &meta))
		elog(ERROR, "quotient filter metapage of \"%s\" disappeared",
			 RelationGetRelationName(rel));
	u->xid = GetTopTransactionId();
	u->blkno = meta.undo_head;
	u->nentries = 0;
	u->fpmask = ~UINT64CONST(0) << (64 - meta.params.fp_bits);
	undo_set_meta(rel, u->xid, InvalidBlockNumber);
}

/*
 * Make sure the current undo page has room for an entry, moving to the
 * next page of the list or appending a new page at the end of the
 * relation.  Returns the free entries.  The caller holds the page lock on
 * block 0 (so no merge moves reserved_end) and no buffer lock.
 */
uint32
qfam_undo_room(Relation rel, QfamUndo *u)
{
	Buffer		metabuf;
	Buffer		prevbuf = InvalidBuffer;
	Buffer		buf;
	SSXLogState *state;
	QfamMeta   *m;
	BlockNumber prev = u->blkno;
	BlockNumber blkno;
	Page		page;
	QfamUndoHeader *hdr;

	if (BlockNumberIsValid(u->blkno) && u->nentries < QFAM_UNDO_CAPACITY)
		return QFAM_UNDO_CAPACITY - u->nentries;

	/* the current page is full: follow the list if it goes on */
	if (BlockNumberIsValid(u->blkno))
	{
		buf = ReadBuffer(rel, u->blkno);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		hdr = (QfamUndoHeader *) SSPageGetData(BufferGetPage(buf));
		blkno = hdr->next;
		UnlockReleaseBuffer(buf);
		if (BlockNumberIsValid(blkno))
		{
			u->blkno = blkno;
			u->nentries = 0;
			return QFAM_UNDO_CAPACITY;
		}
	}

	/* append a page: new page, link from the previous one, reserved_end */
	metabuf = ReadBuffer(rel, SS_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	ss_meta_check(rel, BufferGetPage(metabuf), SS_KIND_QF);
	blkno = ((QfamMeta *) SSPageGetData(BufferGetPage(metabuf)))->reserved_end;
	UnlockReleaseBuffer(metabuf);
	ss_extend_to(rel, blkno);

	state = ss_xlog_start(rel);
	m = ss_meta_register(rel, SS_KIND_QF, state, &metabuf);
	if (m->reserved_end != blkno)
		elog(ERROR, "quotient filter \"%s\" grew while an undo page was added",
			 RelationGetRelationName(rel));
	m->reserved_end = blkno + 1;
	if (!BlockNumberIsValid(prev))
		m->undo_head = blkno;
	buf = ReadBuffer(rel, blkno);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = ss_xlog_register(state, buf, SS_XLOG_FULL_IMAGE);
	ss_page_init(page, SS_PAGE_QF_UNDO, UNDO_DATA_SIZE(QFAM_UNDO_CAPACITY));
	hdr = (QfamUndoHeader *) SSPageGetData(page);
	hdr->xid = u->xid;
	hdr->nentries = 0;
	hdr->next = InvalidBlockNumber;
	if (BlockNumberIsValid(prev))
	{
		prevbuf = ReadBuffer(rel, prev);
		LockBuffer(prevbuf, BUFFER_LOCK_EXCLUSIVE);
		page = ss_xlog_register(state, prevbuf, 0);
		((QfamUndoHeader *) SSPageGetData(page))->next = blkno;
	}
	ss_xlog_finish(state);
	if (BufferIsValid(prevbuf))
		UnlockReleaseBuffer(prevbuf);
	UnlockReleaseBuffer(buf);
	UnlockReleaseBuffer(metabuf);
	u->blkno = blkno;
	u->nentries = 0;
	return QFAM_UNDO_CAPACITY;
}

/*
 * Register the current undo page in state (the caller has locked its filter
 * page already) and return its header; a page of an earlier segment is
 * re-stamped as the first entry of ours goes in.  Append entries with
 * qfam_undo_append, at most what qfam_undo_room returned.
 */
QfamUndoHeader *
qfam_undo_register(Relation rel, SSXLogState *state, QfamUndo *u,
				   Buffer *bufp)
{
	Buffer		buf = ReadBuffer(rel, u->blkno);
	Page		page;
	QfamUndoHeader *hdr;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	ss_page_check(rel, u->blkno, BufferGetPage(buf), SS_PAGE_QF_UNDO);
	page = ss_xlog_register(state, buf, 0);
	hdr = (QfamUndoHeader *) SSPageGetData(page);
	if (!TransactionIdEquals(hdr->xid, u->xid))
	{
		hdr->xid = u->xid;
		hdr->nentries = 0;
	}
	Assert(hdr->nentries == u->nentries);
	*bufp = buf;
	return hdr;
}

void
qfam_undo_append(QfamUndo *u, QfamUndoHeader *hdr, uint64 h1, uint64 count)
{
	QfamUndoEntry *e = (QfamUndoEntry *) (hdr + 1);

	Assert(hdr->nentries < QFAM_UNDO_CAPACITY);
	e[hdr->nentries].fp = h1 & u->fpmask;
	e[hdr->nentries].count = count;
	hdr->nentries++;
	u->nentries = hdr->nentries;
}
