/*-------------------------------------------------------------------------
 *
 * bcms_apply.c
 *	  Writing a bcms: the metapage, applying a committing transaction's
 *	  pending updates, flushing sub-buffers, merging a cms value.
 *
 * Every change is WAL-logged with GenericXLog (a no-op for unlogged
 * relations), one record per sketch page touched, together with its
 * buffer page, so a crash never separates a sub-buffer from its page.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ss_xlog.h"
#include "bcms.h"
#include "cms.h"
#include "miscadmin.h"
#include "ss_pending.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* An update waiting in a commit-time batch, sorted by page. */
typedef struct BatchEntry
{
	uint32		page;			/* sketch page (buffered) or block (plain) */
	uint32		seq;			/* arrival order, kept within a page */
	uint64		h2;				/* buffered: cell hash; plain: counter offset */
	int64		weight;
} BatchEntry;

static int
batch_entry_cmp(const void *a, const void *b)
{
	const BatchEntry *x = a;
	const BatchEntry *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return 0;
}

static uint32
batch_entry_page(const void *e)
{
	return ((const BatchEntry *) e)->page;
}

bool
bcms_read_meta(Relation rel, BcmsMetaData *meta)
{
	return ss_read_structure_meta(rel, &bcms_state_ops, meta);
}

/* Add committed counts to the metapage (locked alone, briefly). */
static void
bcms_meta_add(Relation rel, int64 items, int64 weight, int64 flushes)
{
	Buffer		buf;
	SSXLogState *state;
	BcmsMetaData *meta;

	if (items == 0 && weight == 0 && flushes == 0)
		return;
	state = ss_xlog_start(rel);
	meta = ss_meta_register(rel, SS_KIND_BCMS, state, &buf);
	meta->items = cms_saturating_add(meta->items, items);
	meta->total_weight = cms_saturating_add(meta->total_weight, weight);
	meta->flushes += flushes;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

static inline Page
bcms_lock_for_write(Relation rel, SSXLogState *state, BlockNumber blkno,
					uint16 page_type, Size data_size, Buffer *bufp)
{
	return ss_lock_page_for_write(rel, state, blkno, page_type, data_size,
								  bufp, NULL);
}

static Size
bcms_sketch_data_size(const BcmsParams *p)
{
	return p->mode == BCMS_MODE_PLAIN ?
		PLAIN_COUNTERS_PER_PAGE * sizeof(int64) :
		cms_page_counters(&p->geom) * sizeof(int64);
}

/*
 * Apply the updates of one sketch page: the new entries are appended to the
 * page's sub-buffer, or if they do not fit (or force is set), the
 * sub-buffer and the new entries are applied to the sketch page in one
 * write and the sub-buffer is emptied.  Returns the number of sub-buffer
 * entries applied to the sketch page.
 */
static uint32
bcms_apply_page_group(Relation rel, const BcmsParams *p, uint32 sketch_page,
					  const BatchEntry *entries, int n, bool force)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		bbuf = InvalidBuffer;
	Buffer		sbuf;
	Page		bpage = NULL;
	uint32	   *count = NULL;
	BcmsBufEntry *sub = NULL;
	int64	   *counters;
	uint32		flushed = 0;

	if (p->subbuf_cap > 0)
	{
		bpage = bcms_lock_for_write(rel, state, bcms_buffer_blkno(p, sketch_page),
									SS_PAGE_BCMS_BUFFER, SS_PAGE_DATA_SIZE, &bbuf);
		count = &bcms_buf_counts(bpage)[sketch_page % p->subbufs_per_page];
		sub = bcms_buf_entries(bpage, p, sketch_page);
		if (*count > p->subbuf_cap)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("sub-buffer of page %u of relation \"%s\" claims %u entries, capacity is %u",
							sketch_page, RelationGetRelationName(rel),
							*count, p->subbuf_cap)));
		if (*count + n <= p->subbuf_cap && !force)
		{
			for (int i = 0; i < n; i++)
			{
				sub[*count + i].h2 = entries[i].h2;
				sub[*count + i].weight = entries[i].weight;
			}
			*count += n;
			ss_xlog_finish(state);
			UnlockReleaseBuffer(bbuf);
			return 0;
		}
	}

	/* lock order: buffer page (held), then sketch page */
	counters = (int64 *) SSPageGetData(bcms_lock_for_write(rel, state,
														   bcms_sketch_blkno(p, sketch_page),
														   SS_PAGE_BCMS_SKETCH,
														   bcms_sketch_data_size(p),
														   &sbuf));
	if (count != NULL)
	{
		for (uint32 i = 0; i < *count; i++)
			cms_page_add(counters, &p->geom, bcms_entry_hash(&sub[i]),
						 sub[i].weight, p->conservative);
		flushed = *count;
		*count = 0;
	}
	for (int i = 0; i < n; i++)
	{
		SSHash		h = {0, entries[i].h2};

		cms_page_add(counters, &p->geom, h, entries[i].weight, p->conservative);
	}
	ss_xlog_finish(state);
	UnlockReleaseBuffer(sbuf);
	if (BufferIsValid(bbuf))
		UnlockReleaseBuffer(bbuf);
	return flushed;
}

/* plain mode: add to the counters of one page (entries hold offsets) */
static void
bcms_apply_plain_group(Relation rel, const BcmsParams *p, BlockNumber blkno,
					   const BatchEntry *entries, int n)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		buf;
	int64	   *counters;

	counters = (int64 *) SSPageGetData(bcms_lock_for_write(rel, state, blkno,
														   SS_PAGE_BCMS_SKETCH,
														   bcms_sketch_data_size(p),
														   &buf));
	for (int i = 0; i < n; i++)
		counters[entries[i].h2] = cms_saturating_add(counters[entries[i].h2],
													 entries[i].weight);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

/* Sort a batch by page and apply it page by page. */
static int64
bcms_apply_batch(Relation rel, const BcmsParams *p, BatchEntry *batch, int n)
{
	int64		flushes = 0;
	int			start = 0;

	ss_sort_batch_by_page(batch, n, sizeof(BatchEntry), batch_entry_page,
						  batch_entry_cmp);
	while (start < n)
	{
		int			end = start + 1;

		CHECK_FOR_INTERRUPTS();
		while (end < n && batch[end].page == batch[start].page)
			end++;
		if (p->mode == BCMS_MODE_PLAIN)
			bcms_apply_plain_group(rel, p, batch[start].page, batch + start,
								   end - start);
		else
			flushes += bcms_apply_page_group(rel, p, batch[start].page,
											 batch + start, end - start,
											 false) > 0;
		start = end;
	}
	return flushes;
}

/* Add a cms value's counters to the sketch pages, page by page. */
static void
bcms_apply_merge(Relation rel, const BcmsParams *p, const CmsData *cms)
{
	uint32		per_page = cms_page_counters(&p->geom);

	for (uint32 pg = 0; pg < p->geom.npages; pg++)
	{
		const int64 *src = cms->counters + (Size) pg * per_page;
		SSXLogState *state;
		Buffer		buf;
		int64	   *dst;
		bool		any = false;

		CHECK_FOR_INTERRUPTS();
		for (uint32 i = 0; i < per_page && !any; i++)
			any = src[i] != 0;
		if (!any)
			continue;
		state = ss_xlog_start(rel);
		dst = (int64 *) SSPageGetData(bcms_lock_for_write(rel, state,
														  bcms_sketch_blkno(p, pg),
														  SS_PAGE_BCMS_SKETCH,
														  bcms_sketch_data_size(p),
														  &buf));
		for (uint32 i = 0; i < per_page; i++)
			dst[i] = cms_saturating_add(dst[i], src[i]);
		ss_xlog_finish(state);
		UnlockReleaseBuffer(buf);
	}
}

/*
 * Apply a committing transaction's pending records for rel (called at
 * pre-commit by ss_pending.c).  Updates are collected into batches of at
 * most streamsketch.pending_memory bytes, each sorted by page, so that a
 * large transaction writes each page once per batch.
 */
void
bcms_apply_pending(Relation rel)
{
	BcmsState  *st = bcms_get_state(rel);
	const BcmsParams *p = &st->p;
	SSPendingIter it;
	SSPendingHeader hdr;
	char	   *payload;
	BatchEntry *batch;
	int			nbatch = 0;
	int			maxbatch;
	int64		items = 0;
	int64		weight = 0;
	int64		flushes = 0;
	uint32		seq = 0;
	bool		any = false;

	ss_pending_iter_begin(&it, RelationGetRelid(rel));
	maxbatch = (int) Min((Size) ss_pending_memory_kb * 1024 / sizeof(BatchEntry),
						 MaxAllocSize / sizeof(BatchEntry));
	maxbatch = Max(maxbatch, (int) p->depth);
	batch = palloc(sizeof(BatchEntry) * maxbatch);

	while (ss_pending_iter_next(&it, &hdr, &payload))
	{
		any = true;
		if (hdr.type == SS_PENDING_KEY)
		{
			SSPendingKey key;

			memcpy(&key, payload, sizeof(key));
			items++;
			weight = cms_saturating_add(weight, key.weight);
			if (nbatch + (int) p->depth > maxbatch)
			{
				flushes += bcms_apply_batch(rel, p, batch, nbatch);
				nbatch = 0;
			}
			if (p->mode == BCMS_MODE_PLAIN)
			{
				for (uint32 row = 0; row < p->depth; row++)
				{
					uint64		idx = bcms_plain_index(p, key.hash, row);
					BatchEntry *e = &batch[nbatch++];

					e->page = (uint32) (1 + idx / PLAIN_COUNTERS_PER_PAGE);
					e->seq = seq++;
					e->h2 = idx % PLAIN_COUNTERS_PER_PAGE;
					e->weight = key.weight;
				}
			}
			else
			{
				BatchEntry *e = &batch[nbatch++];

				e->page = cms_page_of(&p->geom, key.hash);
				e->seq = seq++;
				e->h2 = key.hash.h2;
				e->weight = key.weight;
			}
		}
		else if (hdr.type == SS_PENDING_MERGE)
		{
			const CmsData *cms = (const CmsData *) payload;

			bcms_apply_merge(rel, p, cms);
			weight = cms_saturating_add(weight, cms->total);
		}
	}
	if (nbatch > 0)
		flushes += bcms_apply_batch(rel, p, batch, nbatch);
	pfree(batch);
	ss_pending_iter_end(&it);
	if (any)
		bcms_meta_add(rel, items, weight, flushes);
}

/*
 * Apply every non-empty sub-buffer to its sketch page.  Returns the number
 * of entries applied.  One WAL record per sub-buffer (its buffer page and
 * sketch page together).
 */
int64
bcms_flush_all(Relation rel, const BcmsState *st)
{
	const BcmsParams *p = &st->p;
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	int64		applied = 0;
	int64		flushes = 0;

	if (p->mode != BCMS_MODE_BUFFERED || p->subbuf_cap == 0 || nblocks == 0)
		return 0;

	for (uint32 pg = 0; pg < p->geom.npages; pg++)
	{
		BlockNumber bblk = bcms_buffer_blkno(p, pg);
		Buffer		bbuf;
		uint32		n;

		CHECK_FOR_INTERRUPTS();
		if (bblk >= nblocks)
			break;
		/* peek under a share lock, so empty sub-buffers cost no WAL */
		bbuf = ReadBuffer(rel, bblk);
		LockBuffer(bbuf, BUFFER_LOCK_SHARE);
		ss_page_check(rel, bblk, BufferGetPage(bbuf), SS_PAGE_BCMS_BUFFER);
		n = PageIsNew(BufferGetPage(bbuf)) ? 0 :
			bcms_buf_counts(BufferGetPage(bbuf))[pg % p->subbufs_per_page];
		UnlockReleaseBuffer(bbuf);
		if (n == 0)
			continue;
		n = bcms_apply_page_group(rel, p, pg, NULL, 0, true);
		applied += n;
		flushes += n > 0;
	}
	if (flushes > 0)
		bcms_meta_add(rel, 0, 0, flushes);
	return applied;
}
