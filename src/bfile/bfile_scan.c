/*-------------------------------------------------------------------------
 *
 * bfile_scan.c
 *	  SELECT * FROM a bfile table: the current sample (docs/bfile.md,
 *	  "Queries").
 *
 * The scan takes the buckets (each one's newest page, its visible items
 * and its page count) from one read of the metapage, after a round if the
 * change log's lock is free, and walks each chain newest page first,
 * copying one page at a time.  It writes nothing; the pages it can reach
 * are not reused while its snapshot lives (bfile_store.c).
 *
 * What the scan keeps between rows (the view, the page copy, the change
 * log's rows) lives in the scan's memory context (ss_tableam.c): callers
 * such as ALTER TABLE's constraint validation fetch each row in a context
 * that they reset after it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "bfile.h"
#include "bfile_am.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

StaticAssertDecl(sizeof(BfileItemHeader) % MAXIMUM_ALIGNOF == 0,
				 "bfile items keep their tuples aligned");

/* ---- reading a bucket's chain ---- */

void
bfile_chain_begin(BfileChain *it, Relation rel, const BfileBucket *b)
{
	memset(it, 0, sizeof(*it));
	it->rel = rel;
	it->bucket = *b;
	it->next_blk = b->head;
	it->next_stamp = b->head_stamp;
	if (it->area == NULL)
		it->area = palloc(SS_PAGE_DATA_SIZE);
}

void
bfile_chain_end(BfileChain *it)
{
	if (it->area)
		pfree(it->area);
	it->area = NULL;
}

/* Load the chain's next page; false at its end (checked against its count). */
static bool
chain_next_page(BfileChain *it)
{
	BfilePageHeader ph;

	if (it->next_blk == InvalidBlockNumber)
	{
		if (it->pages_read != it->bucket.pages)
			ss_page_corrupted(it->rel, it->bucket.head,
							  "A bucket of the sample is shorter than it counts.");
		return false;
	}
	if (it->pages_read == it->bucket.pages)
		ss_page_corrupted(it->rel, it->next_blk,
						  "A bucket of the sample is longer than it counts.");
	CHECK_FOR_INTERRUPTS();
	bfile_read_page(it->rel, it->next_blk, it->next_stamp, it->area);
	memcpy(&ph, it->area, sizeof(ph));
	it->visible = it->pages_read == 0 ? it->bucket.head_items : ph.nitems;
	bfile_check_page(it->rel, it->next_blk, it->area, it->visible);
	if (ph.level != it->bucket.level)
		ss_page_corrupted(it->rel, it->next_blk,
						  "A page of the sample belongs to another bucket.");
	it->pages_read++;
	it->next_blk = ph.prev;
	it->next_stamp = ph.prev_stamp;
	it->item = 0;
	it->off = MAXALIGN(sizeof(BfilePageHeader));
	return true;
}

/*
 * Check a stored row before it is deformed: the header within the item,
 * every value within the tuple, no varlena compressed or out of line
 * (rows are stored inline and whole), so that a damaged page gives
 * XX001, never a read past the page.  len is the tuple's length.
 */
static bool
tuple_sane(TupleDesc desc, MinimalTuple mt, uint32 len)
{
	HeapTupleHeader tup = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
	int			natts = HeapTupleHeaderGetNatts(tup);
	bool		hasnulls = (mt->t_infomask & HEAP_HASNULL) != 0;
	char	   *base = (char *) tup;
	Size		end = len + MINIMAL_TUPLE_OFFSET;
	Size		off = tup->t_hoff;

	if (natts > desc->natts || tup->t_hoff < SizeofHeapTupleHeader ||
		tup->t_hoff > end ||
		(hasnulls && SizeofHeapTupleHeader + BITMAPLEN(natts) > tup->t_hoff) ||
		(mt->t_infomask & (HEAP_HASEXTERNAL | HEAP_HASOID_OLD)) != 0)
		return false;
	for (int i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (hasnulls && att_isnull(i, tup->t_bits))
			continue;
		if (att->attlen == -1)
		{
			off = att_align_pointer(off, att->attalign, -1, base + off);
			if (off + 1 > end)
				return false;
			if (VARATT_IS_EXTENDED(base + off) && !VARATT_IS_SHORT(base + off))
				return false;
			if (off + VARSIZE_ANY(base + off) > end ||
				VARSIZE_ANY(base + off) < (VARATT_IS_SHORT(base + off) ? 1 : VARHDRSZ))
				return false;
			off += VARSIZE_ANY(base + off);
		}
		else if (att->attlen == -2)
		{
			off = att_align_nominal(off, att->attalign);
			if (off >= end || memchr(base + off, '\0', end - off) == NULL)
				return false;
			off += strlen(base + off) + 1;
		}
		else
		{
			off = att_align_nominal(off, att->attalign);
			off += att->attlen;
			if (off > end)
				return false;
		}
	}
	return true;
}

/*
 * The row of the item at `item` (in a page copy) as a heap tuple pointing
 * into it, checked (tuple_sane).
 */
void
bfile_item_tuple(Relation rel, const char *item, HeapTuple htup)
{
	BfileItemHeader ih;
	MinimalTuple mt;

	memcpy(&ih, item, sizeof(ih));
	mt = (MinimalTuple) (item + sizeof(ih));
	if (ih.len < sizeof(ih) + SizeofMinimalTupleHeader ||
		MAXALIGN(sizeof(ih) + mt->t_len) != ih.len)
		ss_page_corrupted(rel, InvalidBlockNumber, "An item of the sample is damaged.");
	bfile_minimal_tuple(rel, mt, mt->t_len, htup);
}

/*
 * A stored row of len bytes (an item's, or a change log record's) as a
 * heap tuple pointing into it, checked (tuple_sane).
 */
void
bfile_minimal_tuple(Relation rel, MinimalTuple mt, uint32 len, HeapTuple htup)
{
	if (len < SizeofMinimalTupleHeader || mt->t_len != len ||
		!tuple_sane(RelationGetDescr(rel), mt, len))
		ss_page_corrupted(rel, InvalidBlockNumber, "A row of the sample is damaged.");
	htup->t_len = mt->t_len + MINIMAL_TUPLE_OFFSET;
	htup->t_data = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
	ItemPointerSetInvalid(&htup->t_self);
	htup->t_tableOid = RelationGetRelid(rel);
}

/*
 * The chain's next item as a heap tuple pointing into the chain's page
 * copy (valid until the next call); false at the end of the chain.
 */
bool
bfile_chain_next(BfileChain *it, HeapTuple htup)
{
	BfileItemHeader ih;

	while (it->item >= it->visible)
		if (!chain_next_page(it))
			return false;
	memcpy(&ih, it->area + it->off, sizeof(ih));
	bfile_item_tuple(it->rel, it->area + it->off, htup);
	it->item_level = ih.level;
	it->item_bytes = ih.len;
	it->off += ih.len;
	it->item++;
	return true;
}

/*
 * The metapage of a bfile for a reader, after a round if the change log's
 * lock is free; false if it has none yet.  (Readers of the sample use
 * bfile_view_read, which adds the change log's committed rows.)
 */
bool
bfile_read_meta(Relation rel, BfileMeta *meta)
{
	SSLogSnapshot snap;

	ss_log_read_begin(rel, &snap, 0, false);
	return ss_read_structure_meta(rel, &bfile_structure, meta);
}

/* ---- the scan ---- */

typedef struct BfileScanDesc
{
	SSScanDesc	ss;
	BfileView	view;
	int			bucket;			/* 0 .. nbuckets_live-1, the tail, then the log */
	BfileChain	chain;
	bool		chain_open;
	Tuplestorestate *log_rows;	/* the change log's rows in the sample */
	TupleTableSlot *log_slot;
} BfileScanDesc;

/* Bucket i of the scan (nbuckets_live: the tail); NULL past the tail. */
static const BfileBucket *
scan_bucket(BfileScanDesc *scan, int i)
{
	BfileMeta  *m = scan->view.meta;

	return i < (int) m->nbuckets_live ? &m->buckets[i] :
		i == (int) m->nbuckets_live ? &m->tail : NULL;
}

/*
 * Every bucket's chain in the view, newest page first, then the tail's
 * items at the view's level or above, then the change log's rows.  Runs
 * in the scan's memory context.
 */
static void
bfile_scan_start(SSScanDesc *sscan)
{
	BfileScanDesc *scan = (BfileScanDesc *) sscan;
	Relation	rel = sscan->base.rs_rd;

	scan->log_rows = tuplestore_begin_heap(false, false, work_mem);
	sscan->done = !bfile_view_read(rel, &scan->view, scan->log_rows,
								   RelationGetDescr(rel), PG_INT64_MIN,
								   PG_INT64_MAX);
	scan->bucket = -1;
}

static bool
bfile_scan_next(SSScanDesc *sscan, TupleTableSlot *slot)
{
	BfileScanDesc *scan = (BfileScanDesc *) sscan;
	Relation	rel = sscan->base.rs_rd;
	HeapTupleData htup;
	const BfileBucket *b;

	for (;;)
	{
		if (scan->chain_open)
		{
			if (bfile_chain_next(&scan->chain, &htup))
			{
				if (scan->chain.item_level < scan->view.level)
					continue;	/* a tail item the log's rows discarded */
				heap_deform_tuple(&htup, slot->tts_tupleDescriptor, slot->tts_values,
								  slot->tts_isnull);
				ExecStoreVirtualTuple(slot);
				return true;
			}
			bfile_chain_end(&scan->chain);
			scan->chain_open = false;
		}
		b = scan_bucket(scan, ++scan->bucket);
		if (b == NULL)
			break;
		if (bfile_view_bucket_visible(&scan->view, b))
		{
			bfile_chain_begin(&scan->chain, rel, b);
			scan->chain_open = true;
		}
	}
	/* the change log's rows */
	if (scan->log_slot == NULL)
		scan->log_slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
												  &TTSOpsMinimalTuple);
	if (!tuplestore_gettupleslot(scan->log_rows, true, false, scan->log_slot))
		return false;
	ExecCopySlot(slot, scan->log_slot);
	return true;
}

/* What the scan holds besides its memory: a temporary file, a slot. */
static void
bfile_scan_stop(SSScanDesc *sscan)
{
	BfileScanDesc *scan = (BfileScanDesc *) sscan;

	if (scan->log_rows)
		tuplestore_end(scan->log_rows); /* closes its temporary file */
	if (scan->log_slot)
		ExecDropSingleTupleTableSlot(scan->log_slot);
}

const SSScanOps bfile_scan_ops = {
	.scan_size = sizeof(BfileScanDesc),
	.start = bfile_scan_start,
	.next = bfile_scan_next,
	.stop = bfile_scan_stop,
};
