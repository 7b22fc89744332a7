/*-------------------------------------------------------------------------
 *
 * ss_xlog.c
 *	  Generic WAL records with a fast page delta (see ss_xlog.h).
 *
 * The records are exactly what access/transam/generic_xlog.c writes: rmgr
 * RM_GENERIC_ID, info 0, up to four block references registered with
 * REGBUF_STANDARD, each carrying either a forced full-page image or a
 * delta made of fragments
 *
 *		OffsetNumber offset; OffsetNumber length; char data[length];
 *
 * that generic_redo copies into the page before zeroing the hole between
 * pd_lower and pd_upper.  What differs is how the delta is found.
 * GenericXLog walks the page a byte at a time (computeRegionDelta); a
 * sketch or filter page is ~8 kB of live data of which a commit changes a
 * few dozen bytes, so that loop dominated every write.  Here unchanged blocks of
 * SKIP_BLOCK (256) bytes are skipped with memcmp() and the rest is compared a 64-bit word at a
 * time, so a fragment covers whole words and ends at the first equal word
 * (8 bytes, more than a fragment header, as GenericXLog's threshold).  The
 * delta may therefore hold a few more unchanged bytes than GenericXLog's,
 * which is harmless: redo writes the bytes the page already has.
 *
 * Like GenericXLogFinish, bytes of the new page that lay in the old page's
 * hole are always logged, and the hole of the new page is zeroed when the
 * image is applied, so primary and standby pages stay byte-identical.  The
 * TAP tests run standbys with wal_consistency_checking = 'generic', which
 * compares every replayed page with the primary's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/rmgr.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#define FRAGMENT_HEADER_SIZE	(2 * sizeof(OffsetNumber))
/*
 * A fragment covers at least one byte and is followed by at least 8 equal
 * bytes, except the last of each region, so the fragments and their gaps
 * fit in the page plus a few headers.
 */
#define MAX_DELTA_SIZE			(BLCKSZ + 8 * FRAGMENT_HEADER_SIZE)
#define SKIP_BLOCK				256

typedef struct SSXLogPage
{
	Buffer		buffer;
	int			flags;
	int			delta_len;
	char	   *image;			/* the copy the caller modifies */
	char		delta[MAX_DELTA_SIZE];
} SSXLogPage;

struct SSXLogState
{
	bool		logged;
	bool		cached;			/* the backend's reusable state */
	SSXLogPage	pages[SS_XLOG_MAX_PAGES];
	PGAlignedBlock images[SS_XLOG_MAX_PAGES];
};

static void
write_fragment(SSXLogPage *pd, int offset, int length, const char *data)
{
	char	   *ptr = pd->delta + pd->delta_len;
	OffsetNumber off = (OffsetNumber) offset;
	OffsetNumber len = (OffsetNumber) length;

	Assert(pd->delta_len + FRAGMENT_HEADER_SIZE + length <= MAX_DELTA_SIZE);
	memcpy(ptr, &off, sizeof(off));
	ptr += sizeof(off);
	memcpy(ptr, &len, sizeof(len));
	ptr += sizeof(len);
	memcpy(ptr, data, length);
	pd->delta_len += FRAGMENT_HEADER_SIZE + length;
}

/*
 * Fragments for bytes [start, end) of the new page that differ from the
 * old page, or that are outside the old page's valid range [vstart, vend).
 */
static void
delta_region(SSXLogPage *pd, const char *oldp, const char *newp,
			 int start, int end, int vstart, int vend)
{
	int			frag = -1;		/* start of the open fragment */
	int			i = start;

	while (i < end)
	{
		int			step;
		bool		differ;

		if (frag < 0 && i % SKIP_BLOCK == 0 && i + SKIP_BLOCK <= end &&
			i >= vstart && i + SKIP_BLOCK <= vend &&
			memcmp(oldp + i, newp + i, SKIP_BLOCK) == 0)
		{
			i += SKIP_BLOCK;
			continue;
		}
		if (i % sizeof(uint64) == 0 && i + (int) sizeof(uint64) <= end)
		{
			step = sizeof(uint64);
			if (i >= vstart && i + step <= vend)
			{
				uint64		a;
				uint64		b;

				memcpy(&a, oldp + i, sizeof(a));
				memcpy(&b, newp + i, sizeof(b));
				differ = (a != b);
			}
			else
				differ = true;	/* (partly) in the old hole */
		}
		else
		{
			step = 1;
			differ = (i < vstart || i >= vend || oldp[i] != newp[i]);
		}
		if (differ)
		{
			if (frag < 0)
				frag = i;
		}
		else if (frag >= 0 && step >= (int) FRAGMENT_HEADER_SIZE)
		{
			write_fragment(pd, frag, i - frag, newp + frag);
			frag = -1;
		}
		i += step;
	}
	if (frag >= 0)
		write_fragment(pd, frag, end - frag, newp + frag);
}

/* The delta turning oldp into newp, outside newp's hole. */
static void
compute_delta(SSXLogPage *pd, const char *oldp, const char *newp)
{
	const PageHeaderData *oh = (const PageHeaderData *) oldp;
	const PageHeaderData *nh = (const PageHeaderData *) newp;

	pd->delta_len = 0;
	delta_region(pd, oldp, newp, 0, nh->pd_lower, 0, oh->pd_lower);
	delta_region(pd, oldp, newp, nh->pd_upper, BLCKSZ, oh->pd_upper, BLCKSZ);
}

/*
 * One state (66 kB) is kept for reuse: allocating and freeing it for every
 * record made malloc return the memory to the kernel and fault it in again.
 * A nested record, or one started while the cached state is lost to an
 * error (until ss_xlog_at_abort), gets a palloc'ed state.
 */
static SSXLogState *cached_state = NULL;
static bool cached_in_use = false;

SSXLogState *
ss_xlog_start(Relation rel)
{
	SSXLogState *state;

	if (!cached_in_use)
	{
		if (cached_state == NULL)
			cached_state = MemoryContextAlloc(TopMemoryContext, sizeof(SSXLogState));
		state = cached_state;
		cached_in_use = true;
		state->cached = true;
	}
	else
	{
		state = palloc(sizeof(SSXLogState));
		state->cached = false;
	}

	state->logged = RelationNeedsWAL(rel);
	for (int i = 0; i < SS_XLOG_MAX_PAGES; i++)
	{
		state->pages[i].image = state->images[i].data;
		state->pages[i].buffer = InvalidBuffer;
	}
	return state;
}

static void
release_state(SSXLogState *state)
{
	if (state->cached)
		cached_in_use = false;
	else
		pfree(state);
}

/*
 * Register a buffer (exclusively locked by the caller) and return the copy
 * of its page to modify; registering it again returns the same copy.
 */
Page
ss_xlog_register(SSXLogState *state, Buffer buffer, int flags)
{
	for (int i = 0; i < SS_XLOG_MAX_PAGES; i++)
	{
		SSXLogPage *pd = &state->pages[i];

		if (BufferIsInvalid(pd->buffer))
		{
			pd->buffer = buffer;
			pd->flags = flags;
			memcpy(pd->image, BufferGetPage(buffer), BLCKSZ);
			return (Page) pd->image;
		}
		if (pd->buffer == buffer)
			return (Page) pd->image;
	}
	elog(ERROR, "more than %d buffers registered in one WAL record",
		 SS_XLOG_MAX_PAGES);
	return NULL;				/* keep compiler quiet */
}

/*
 * Forget the copy of a registered buffer (left unchanged; the caller
 * unlocks it): a page that turned out to need no change leaves a record
 * that goes on with other pages.
 */
void
ss_xlog_unregister(SSXLogState *state, Buffer buffer)
{
	for (int i = 0; i < SS_XLOG_MAX_PAGES; i++)
	{
		if (state->pages[i].buffer == buffer)
		{
			state->pages[i].buffer = InvalidBuffer;
			return;
		}
	}
	elog(ERROR, "buffer %d is not registered in the WAL record", buffer);
}

/* Apply the modified copies to the buffers and log them as one record. */
XLogRecPtr
ss_xlog_finish(SSXLogState *state)
{
	XLogRecPtr	lsn = InvalidXLogRecPtr;

	if (state->logged)
		XLogBeginInsert();
	START_CRIT_SECTION();
	for (int i = 0; i < SS_XLOG_MAX_PAGES; i++)
	{
		SSXLogPage *pd = &state->pages[i];
		Page		page;
		PageHeader	ph;

		if (BufferIsInvalid(pd->buffer))
			continue;
		page = BufferGetPage(pd->buffer);
		ph = (PageHeader) pd->image;
		if (!state->logged)
		{
			memcpy(page, pd->image, BLCKSZ);
			MarkBufferDirty(pd->buffer);
			continue;
		}
		if (!(pd->flags & SS_XLOG_FULL_IMAGE))
			compute_delta(pd, page, pd->image);
		memcpy(page, pd->image, ph->pd_lower);
		memset(page + ph->pd_lower, 0, ph->pd_upper - ph->pd_lower);
		memcpy(page + ph->pd_upper, pd->image + ph->pd_upper,
			   BLCKSZ - ph->pd_upper);
		MarkBufferDirty(pd->buffer);
		if (pd->flags & SS_XLOG_FULL_IMAGE)
			XLogRegisterBuffer(i, pd->buffer, REGBUF_FORCE_IMAGE | REGBUF_STANDARD);
		else
		{
			XLogRegisterBuffer(i, pd->buffer, REGBUF_STANDARD);
			XLogRegisterBufData(i, pd->delta, pd->delta_len);
		}
	}
	if (state->logged)
	{
		lsn = XLogInsert(RM_GENERIC_ID, 0);
		for (int i = 0; i < SS_XLOG_MAX_PAGES; i++)
			if (BufferIsValid(state->pages[i].buffer))
				PageSetLSN(BufferGetPage(state->pages[i].buffer), lsn);
	}
	END_CRIT_SECTION();
	release_state(state);
	return lsn;
}

/* Forget the copies; the buffers are unchanged (the caller unlocks them). */
void
ss_xlog_abort(SSXLogState *state)
{
	release_state(state);
}

/*
 * At (sub)transaction abort no record is being built any more (states live
 * within one function call), so the cached state is free again.
 */
void
ss_xlog_at_abort(void)
{
	cached_in_use = false;
}

/*
 * Make every WAL record this backend has inserted durable (tests that stop
 * the server right after: the worst case for recovery).  Flushes to the
 * end of the last record, not to the insert position: on a WAL page
 * boundary that lies past the next page's header, which no record has
 * made anyone write, and the flush fails ("xlog flush request ... is not
 * satisfied") instead of the test stopping where it meant to.
 */
void
ss_xlog_flush_own(Relation rel)
{
	if (RelationNeedsWAL(rel) && !XLogRecPtrIsInvalid(XactLastRecEnd))
		XLogFlush(XactLastRecEnd);
}
