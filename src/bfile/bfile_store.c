/*-------------------------------------------------------------------------
 *
 * bfile_store.c
 *	  Pages of the `bfile` access method: reading and writing bucket pages,
 *	  handing out pages and taking freed chains back (docs/bfile.md,
 *	  "Pages").
 *
 * Every bucket page carries its allocation stamp, and every pointer to a
 * page (a bucket's head in the metapage, a page's link to the older page)
 * the stamp it expects: a page freed and reused under a reader no longer
 * matches.  Freed chains are reused only once no snapshot can reach them,
 * so on a primary a mismatch is damage; on a standby, whose readers the
 * primary does not wait for, it is a recovery conflict (40001).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "bfile.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/snapmgr.h"

void
bfile_stale_page(Relation rel, BlockNumber blkno)
{
	ss_stale_page(rel, blkno, "A page of the sample is missing or was reused.");
}

/*
 * Check what a reader relies on in a bucket page's area: the header's
 * counts, and the first `visible` items' lengths (all items if visible is
 * the page's count).
 */
void
bfile_check_page(Relation rel, BlockNumber blkno, const char *area,
				 uint32 visible)
{
	BfilePageHeader ph;
	Size		off = MAXALIGN(sizeof(BfilePageHeader));

	memcpy(&ph, area, sizeof(ph));
	if (ph.used > BFILE_PAGE_ROOM || ph.nitems > BFILE_PAGE_ROOM / MAXALIGN(sizeof(BfileItemHeader)) ||
		visible > ph.nitems || ph.level < 0 || ph.level > BFILE_MAX_LEVEL)
		ss_page_corrupted(rel, blkno, "A sample page's header is out of range.");
	for (uint32 i = 0; i < ph.nitems; i++)
	{
		BfileItemHeader ih;

		if (off + sizeof(ih) > MAXALIGN(sizeof(BfilePageHeader)) + ph.used)
			ss_page_corrupted(rel, blkno, "A sample page holds fewer items than it counts.");
		memcpy(&ih, area + off, sizeof(ih));
		if (ih.len < sizeof(ih) + 8 || ih.len != MAXALIGN(ih.len) ||
			off + ih.len > MAXALIGN(sizeof(BfilePageHeader)) + ph.used ||
			ih.level < 0 || ih.level > BFILE_MAX_LEVEL)
			ss_page_corrupted(rel, blkno, "An item of a sample page is damaged.");
		off += ih.len;
	}
}

/* Copy bucket page blkno's area if it carries stamp; else it was reused. */
void
bfile_read_page(Relation rel, BlockNumber blkno, uint64 stamp, char *area)
{
	if (!ss_read_stamped_page(rel, blkno, SS_PAGE_BFILE, stamp, area))
		bfile_stale_page(rel, blkno);
}

/*
 * Write a bucket page from area.  A bucket's newest page is written again
 * by every round that appends to it: WAL gets what changed (the appended
 * items, the header), not a full image each time.
 */
void
bfile_write_page(Relation rel, BlockNumber blkno, const char *area)
{
	ss_write_page(rel, blkno, SS_PAGE_BFILE, area, false);
}

/*
 * Reserve a run of new pages for the round's copy of the metapage, and
 * record it in the live metapage's spare runs too (one more WAL record),
 * so that a round that fails leaves it to the next one.  The runs a
 * round reserves double in size, so that a long round needs few of them
 * and the live list holds them all; were it full, the run would be the
 * round's alone (a failed round would then lose it).
 */
static void
reserve_run(Relation rel, BfileMeta *meta)
{
	uint32		count = (uint32) Min((uint64) BFILE_ALLOC_RUN << Min(meta->round_runs, 20),
									 (uint64) BFILE_MAX_RUN);
	BlockNumber start = ss_log_alloc_run(rel, count);
	SSXLogState *state;
	Buffer		metabuf;
	BfileMeta  *live;

	meta->round_runs++;
	meta->spare[meta->nspare].start = start;
	meta->spare[meta->nspare].count = count;
	meta->nspare++;

	state = ss_xlog_start(rel);
	live = (BfileMeta *) ss_meta_register(rel, SS_KIND_BFILE, state, &metabuf);
	if (live->nspare < BFILE_MAX_SPARE)
	{
		live->spare[live->nspare].start = start;
		live->spare[live->nspare].count = count;
		live->nspare++;
		ss_xlog_finish(state);
	}
	else
		ss_xlog_abort(state);
	UnlockReleaseBuffer(metabuf);
}

/*
 * A page for a bucket, with its new allocation stamp: the newest page of
 * a freed chain no snapshot can reach, else a reserved new page.  *was
 * gets what the page must remember of the chain (BfilePageHeader).  The
 * round works on its copy of the metapage, installed at its end; pages
 * it reserves from the end of the file and never installs are lost until
 * VACUUM FULL (as every structure's).
 */
BlockNumber
bfile_page_alloc(Relation rel, BfileMeta *meta, uint64 *stamp,
				 BfilePageHeader *was)
{
	BlockNumber blk;

	*stamp = ++meta->alloc_stamp;
	memset(was, 0, sizeof(*was));
	was->was_next = InvalidBlockNumber;
	for (uint32 i = 0; i < meta->nfree; i++)
	{
		BfileFreeChain *f = &meta->free_chains[i];
		char	   *area;
		BfilePageHeader ph;
		BlockNumber next;
		uint64		next_stamp;

		if (!GlobalVisCheckRemovableFullXid(NULL, f->stamp))
			continue;
		blk = f->head;
		area = palloc(SS_PAGE_DATA_SIZE);
		if (!ss_read_page_area(rel, blk, SS_PAGE_BFILE, area))
			bfile_stale_page(rel, blk);
		memcpy(&ph, area, sizeof(ph));
		pfree(area);
		if (ph.stamp == f->head_stamp)
		{
			next = ph.prev;
			next_stamp = ph.prev_stamp;
		}
		else if (ph.was_stamp == f->head_stamp)
		{
			/* taken by a round that did not install (a crash) */
			next = ph.was_next;
			next_stamp = ph.was_next_stamp;
		}
		else
			bfile_stale_page(rel, blk);
		was->was_stamp = f->head_stamp;
		was->was_next = next;
		was->was_next_stamp = next_stamp;
		if (--f->pages == 0)
		{
			memmove(f, f + 1, sizeof(BfileFreeChain) * (meta->nfree - i - 1));
			meta->nfree--;
		}
		else
		{
			if (next == InvalidBlockNumber)
				ss_page_corrupted(rel, blk, "A freed chain of sample pages ends early.");
			f->head = next;
			f->head_stamp = next_stamp;
		}
		return blk;
	}
	if (meta->nspare == 0)
		reserve_run(rel, meta);
	blk = meta->spare[0].start++;
	if (--meta->spare[0].count == 0)
		memmove(&meta->spare[0], &meta->spare[1],
				sizeof(BfileSpareRun) * --meta->nspare);
	return blk;
}

/*
 * Give a bucket's chain back, stamped pending (the install stamps it).
 * A full list forgets its shortest chain, whose pages stay unused until
 * VACUUM FULL (counted in leaked_pages).
 */
void
bfile_chain_free(BfileMeta *meta, const BfileBucket *b)
{
	BfileFreeChain *f;

	if (b->head == InvalidBlockNumber || b->pages == 0)
		return;
	if (meta->nfree == BFILE_MAX_FREE)
	{
		uint32		shortest = 0;

		for (uint32 j = 1; j < meta->nfree; j++)
			if (meta->free_chains[j].pages < meta->free_chains[shortest].pages)
				shortest = j;
		if (meta->free_chains[shortest].pages >= b->pages)
		{
			meta->leaked_pages += b->pages;
			return;
		}
		meta->leaked_pages += meta->free_chains[shortest].pages;
		memmove(&meta->free_chains[shortest], &meta->free_chains[shortest + 1],
				sizeof(BfileFreeChain) * (meta->nfree - shortest - 1));
		meta->nfree--;
	}
	f = &meta->free_chains[meta->nfree++];
	f->head = b->head;
	f->head_stamp = b->head_stamp;
	f->pages = b->pages;
	f->stamp = BFILE_STAMP_PENDING;
}
