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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "bfile.h"
#include "bfile_am.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

StaticAssertDecl(sizeof(BfileItemHeader) % MAXIMUM_ALIGNOF == 0,
				 "bfile items keep their tuples aligned");

typedef struct BfileScanDesc
{
	TableScanDescData base;
	bool		started;
	bool		claimed;
	BfileMeta  *meta;
	int			bucket;			/* 0 .. nbuckets_live-1, then the tail */
	BlockNumber next_blk;		/* next page of the current chain */
	uint64		next_stamp;
	uint32		pages_read;		/* of the current chain */
	char	   *area;			/* the page being returned */
	uint32		visible;		/* its items to return */
	uint32		item;			/* next item */
	Size		off;
} BfileScanDesc;

static const BfileBucket *
scan_bucket(BfileScanDesc *scan)
{
	if (scan->bucket < (int) scan->meta->nbuckets_live)
		return &scan->meta->buckets[scan->bucket];
	return &scan->meta->tail;
}

/* Load the next page of the sample; false when every chain is done. */
static bool
next_page(BfileScanDesc *scan)
{
	Relation	rel = scan->base.rs_rd;

	for (;;)
	{
		const BfileBucket *b;
		BfilePageHeader ph;

		if (scan->bucket > (int) scan->meta->nbuckets_live)
			return false;
		b = scan_bucket(scan);
		if (scan->next_blk == InvalidBlockNumber)
		{
			if (scan->pages_read != b->pages)
				ss_page_corrupted(rel, b->head, "A bucket of the sample is shorter than it counts.");
			scan->bucket++;
			scan->pages_read = 0;
			if (scan->bucket <= (int) scan->meta->nbuckets_live)
			{
				b = scan_bucket(scan);
				scan->next_blk = b->head;
				scan->next_stamp = b->head_stamp;
			}
			continue;
		}
		if (scan->pages_read == b->pages)
			ss_page_corrupted(rel, scan->next_blk, "A bucket of the sample is longer than it counts.");
		CHECK_FOR_INTERRUPTS();
		bfile_read_page(rel, scan->next_blk, scan->next_stamp, scan->area);
		memcpy(&ph, scan->area, sizeof(ph));
		scan->visible = scan->pages_read == 0 ? b->head_items : ph.nitems;
		bfile_check_page(rel, scan->next_blk, scan->area, scan->visible);
		if (ph.level != b->level)
			ss_page_corrupted(rel, scan->next_blk, "A page of the sample belongs to another bucket.");
		scan->pages_read++;
		scan->next_blk = ph.prev;
		scan->next_stamp = ph.prev_stamp;
		scan->item = 0;
		scan->off = MAXALIGN(sizeof(BfilePageHeader));
		return true;
	}
}

static TableScanDesc
bfile_scan_begin(Relation rel, Snapshot snapshot, int nkeys,
				 struct ScanKeyData *key, ParallelTableScanDesc pscan,
				 uint32 flags)
{
	BfileScanDesc *scan = palloc0(sizeof(BfileScanDesc));

	ss_scan_desc_init(&scan->base, rel, snapshot, nkeys, key, pscan, flags);
	return &scan->base;
}

static void
scan_stop(BfileScanDesc *scan)
{
	if (scan->meta)
		pfree(scan->meta);
	if (scan->area)
		pfree(scan->area);
	scan->meta = NULL;
	scan->area = NULL;
	scan->started = false;
}

static void
bfile_scan_end(TableScanDesc sscan)
{
	BfileScanDesc *scan = (BfileScanDesc *) sscan;

	scan_stop(scan);
	if (sscan->rs_flags & SO_TEMP_SNAPSHOT)
		UnregisterSnapshot(sscan->rs_snapshot);
	pfree(scan);
}

static void
bfile_scan_rescan(TableScanDesc sscan, struct ScanKeyData *key, bool set_params,
				  bool allow_strat, bool allow_sync, bool allow_pagemode)
{
	scan_stop((BfileScanDesc *) sscan);
}

static bool
bfile_scan_getnextslot(TableScanDesc sscan, ScanDirection direction,
					   TupleTableSlot *slot)
{
	BfileScanDesc *scan = (BfileScanDesc *) sscan;
	Relation	rel = sscan->rs_rd;
	BfileItemHeader ih;
	HeapTupleData htup;
	MinimalTuple mt;

	ExecClearTuple(slot);
	if (!scan->started)
	{
		SSLogSnapshot snap;

		scan->started = true;
		scan->claimed = ss_scan_claim(sscan);
		if (!scan->claimed)
			return false;
		scan->meta = palloc(sizeof(BfileMeta));
		scan->area = palloc(SS_PAGE_DATA_SIZE);
		/* like every reader: a round first if that needs no waiting */
		ss_log_read_begin(rel, &snap, 0, false);
		if (!ss_read_structure_meta(rel, &bfile_state_ops, scan->meta))
		{
			scan->bucket = BFILE_MAX_BUCKETS + 1;
			scan->meta->nbuckets_live = 0;
			return false;
		}
		scan->bucket = 0;
		scan->pages_read = 0;
		scan->next_blk = scan->meta->nbuckets_live > 0 ?
			scan->meta->buckets[0].head : scan->meta->tail.head;
		scan->next_stamp = scan->meta->nbuckets_live > 0 ?
			scan->meta->buckets[0].head_stamp : scan->meta->tail.head_stamp;
		scan->visible = scan->item = 0;
	}
	if (!scan->claimed || scan->meta == NULL)
		return false;
	while (scan->item >= scan->visible)
		if (!next_page(scan))
			return false;
	memcpy(&ih, scan->area + scan->off, sizeof(ih));
	mt = (MinimalTuple) (scan->area + scan->off + sizeof(ih));
	if (mt->t_len != ih.len - sizeof(ih) &&
		MAXALIGN(sizeof(ih) + mt->t_len) != ih.len)
		ss_page_corrupted(rel, InvalidBlockNumber, "An item of the sample is damaged.");
	if (mt->t_len < SizeofMinimalTupleHeader ||
		HeapTupleHeaderGetNatts((HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET)) >
		RelationGetDescr(rel)->natts ||
		mt->t_hoff > mt->t_len + MINIMAL_TUPLE_OFFSET)
		ss_page_corrupted(rel, InvalidBlockNumber, "An item of the sample is damaged.");
	htup.t_len = mt->t_len + MINIMAL_TUPLE_OFFSET;
	htup.t_data = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
	ItemPointerSetInvalid(&htup.t_self);
	htup.t_tableOid = RelationGetRelid(rel);
	heap_deform_tuple(&htup, slot->tts_tupleDescriptor, slot->tts_values,
					  slot->tts_isnull);
	scan->off += ih.len;
	scan->item++;
	ExecStoreVirtualTuple(slot);
	return true;
}

void
bfile_scan_init(TableAmRoutine *routine)
{
	routine->scan_begin = bfile_scan_begin;
	routine->scan_end = bfile_scan_end;
	routine->scan_rescan = bfile_scan_rescan;
	routine->scan_getnextslot = bfile_scan_getnextslot;
}
