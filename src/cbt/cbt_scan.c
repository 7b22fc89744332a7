/*-------------------------------------------------------------------------
 *
 * cbt_scan.c
 *	  SELECT * FROM a cbt table: one row per group, finalized on the way
 *	  (docs/cbt.md, "Reads").
 *
 * The scan takes the tree (root, tree position) and the change log's
 * snapshot from one read of the metapage, sorts the committed records
 * after the tree's position (and the caller's own pending ones: input
 * rows, and PAOs of groups inserted with their values), then
 * walks the tree depth first, children in hash order.  At a leaf it
 * merges, by hash, the leaf's fragments, the fragments of every node
 * above it (their cursors only move forward, as the leaves' ranges follow
 * each other) and the sorted records; each hash's PAOs and rows are
 * folded into one group per key and finalized.  It writes nothing: the
 * tree's pages stay as they are for as long as its snapshot can see them
 * (cbt_store.c).
 *
 * Rows are made in batches, as the table's owner (the aggregates are
 * user code), and handed out one at a time as the caller.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "cbt.h"
#include "cbt_am.h"
#include "cbt_groups.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"

#define SCAN_BATCH_ROWS		256

typedef struct ScanLevel
{
	CbtNode		node;
	uint32		next_child;
	int			nfrag;
	CbtFragCursor cur[CBT_MAX_FRAGMENTS];
	bool		has[CBT_MAX_FRAGMENTS];
	uint64		hash[CBT_MAX_FRAGMENTS];
	const char *pao[CBT_MAX_FRAGMENTS];
	uint32		size[CBT_MAX_FRAGMENTS];
} ScanLevel;

typedef struct CbtScanDesc
{
	SSScanDesc	ss;
	bool		exhausted;		/* every group is in a batch */
	CbtRuntime *rt;
	CbtMeta    *meta;
	int			depth;
	ScanLevel  *levels[CBT_MAX_HEIGHT];
	uint64		bound;			/* hashes of the current leaf go up to it */
	bool		at_leaf;
	bool		tree_done;
	/* the sorted records */
	Tuplesortstate *sort;
	TupleDesc	sortdesc;
	TupleTableSlot *sortslot;
	bool		log_has;
	uint64		log_hash;
	CbtGroups	groups;
	/* the batch of finished rows */
	MemoryContext batch_cxt;
	HeapTuple  *batch;			/* in batch_cxt */
	int			batchcap;
	int			nbatch;
	int			next;
} CbtScanDesc;

/* ---- the records ---- */

/* A sortable form of an unsigned hash: signed order is unsigned order. */
static inline int64
sortable(uint64 hash)
{
	return (int64) (hash ^ UINT64CONST(0x8000000000000000));
}

static void
sort_record(CbtScanDesc *scan, uint64 pos, const SSPendingHeader *hdr,
			const char *payload)
{
	Datum		values[4];
	bool		isnull[4] = {false, false, false, false};
	bytea	   *row;
	uint64		hash;

	if ((hdr->type != SS_PENDING_ITEM && hdr->type != SS_PENDING_MERGE) ||
		hdr->len < sizeof(uint64))
		ss_page_corrupted(scan->ss.base.rs_rd, InvalidBlockNumber,
						  "A change log record of the cbt is damaged.");
	memcpy(&hash, payload, sizeof(hash));
	row = palloc(VARHDRSZ + hdr->len - sizeof(uint64));
	SET_VARSIZE(row, VARHDRSZ + hdr->len - sizeof(uint64));
	memcpy(VARDATA(row), payload + sizeof(uint64), hdr->len - sizeof(uint64));
	values[0] = Int64GetDatum(sortable(hash));
	values[1] = Int64GetDatum((int64) pos);
	values[2] = PointerGetDatum(row);
	values[3] = BoolGetDatum(hdr->type == SS_PENDING_MERGE);
	ExecClearTuple(scan->sortslot);
	memcpy(scan->sortslot->tts_values, values, sizeof(values));
	memcpy(scan->sortslot->tts_isnull, isnull, sizeof(isnull));
	ExecStoreVirtualTuple(scan->sortslot);
	tuplesort_puttupleslot(scan->sort, scan->sortslot);
	pfree(row);
}

/* SSLogRecordFn: a committed record the tree does not hold yet. */
static void
log_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
		   void *arg)
{
	CbtScanDesc *scan = (CbtScanDesc *) arg;

	if (pos >= scan->meta->tree_pos)
		sort_record(scan, pos, hdr, payload);
}

static void
sort_begin(CbtScanDesc *scan)
{
	AttrNumber	attnums[2] = {1, 2};
	Oid			ops[2] = {Int8LessOperator, Int8LessOperator};
	Oid			colls[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};

	if (scan->sortdesc == NULL)
	{
		scan->sortdesc = CreateTemplateTupleDesc(4);
		TupleDescInitEntry(scan->sortdesc, 1, "hash", INT8OID, -1, 0);
		TupleDescInitEntry(scan->sortdesc, 2, "pos", INT8OID, -1, 0);
		TupleDescInitEntry(scan->sortdesc, 3, "row", BYTEAOID, -1, 0);
		TupleDescInitEntry(scan->sortdesc, 4, "pao", BOOLOID, -1, 0);
		scan->sortslot = MakeSingleTupleTableSlot(scan->sortdesc,
												  &TTSOpsMinimalTuple);
	}
	if (scan->sort)
		tuplesort_end(scan->sort);
	scan->sort = tuplesort_begin_heap(scan->sortdesc, 2, attnums, ops, colls,
									  nulls_first, work_mem, NULL,
									  TUPLESORT_NONE);
}

static void
log_next(CbtScanDesc *scan)
{
	bool		isnull;

	scan->log_has = tuplesort_gettupleslot(scan->sort, true, false,
										   scan->sortslot, NULL);
	if (scan->log_has)
		scan->log_hash = (uint64) DatumGetInt64(slot_getattr(scan->sortslot, 1, &isnull)) ^
			UINT64CONST(0x8000000000000000);
}

/*
 * The metapage (the tree) and the change log's committed records after
 * the tree's position, consistently: the records come from the log as
 * that same read of the metapage describes it, and a log that moved while
 * it was read is read again.
 */
static void
scan_start(CbtScanDesc *scan)
{
	Relation	rel = scan->ss.base.rs_rd;

	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;

		/* like every reader: consolidate first if that needs no waiting */
		ss_log_read_begin(rel, &snap, attempt, false);
		if (!ss_read_structure_meta(rel, &cbt_structure, scan->meta))
		{
			scan->exhausted = true;
			return;
		}
		ss_log_snapshot_of(rel, &scan->meta->hdr, &snap);
		sort_begin(scan);
		if (ss_log_scan(rel, &snap, log_record, scan))
			break;
	}
	/* the caller's own inserts, not committed yet */
	{
		SSPendingIter it;
		SSPendingHeader hdr;
		char	   *payload;

		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		while (ss_pending_iter_next(&it, &hdr, &payload))
			sort_record(scan, PG_UINT64_MAX, &hdr, payload);
		ss_pending_iter_end(&it);
	}
	tuplesort_performsort(scan->sort);
	log_next(scan);
	scan->depth = 0;
	scan->at_leaf = false;
	scan->tree_done = false;
	if (scan->meta->root != InvalidBlockNumber)
	{
		ScanLevel  *lv = palloc0(sizeof(ScanLevel));

		cbt_read_node(rel, scan->meta->root, scan->meta->root_generation,
					  &lv->node);
		scan->levels[scan->depth++] = lv;
	}
}

/* ---- the tree ---- */

static void
level_open(CbtScanDesc *scan, ScanLevel *lv)
{
	lv->nfrag = (int) lv->node.nfragments;
	for (int i = 0; i < lv->nfrag; i++)
	{
		cbt_frag_open(&lv->cur[i], scan->ss.base.rs_rd, &lv->node.fragments[i]);
		lv->has[i] = cbt_frag_next(&lv->cur[i], &lv->hash[i], &lv->pao[i],
								   &lv->size[i]);
	}
}

/* A node is done: every PAO of its fragments must have been read. */
static void
level_done(CbtScanDesc *scan, ScanLevel *lv)
{
	for (int i = 0; i < lv->nfrag; i++)
		if (lv->has[i])
			ss_page_corrupted(scan->ss.base.rs_rd, lv->node.fragments[i].ext.start,
							  "A fragment holds hashes beyond its node's range.");
}

static void
level_close(ScanLevel *lv)
{
	for (int i = 0; i < lv->nfrag; i++)
		cbt_frag_close(&lv->cur[i]);
	pfree(lv);
}

/*
 * Go down to the next leaf (opening the fragments of each node on the
 * way); false when the tree is done, the bound then being every hash.
 */
static bool
next_leaf(CbtScanDesc *scan)
{
	Relation	rel = scan->ss.base.rs_rd;

	for (;;)
	{
		ScanLevel  *top;

		if (scan->depth == 0)
		{
			scan->bound = PG_UINT64_MAX;
			return false;
		}
		top = scan->levels[scan->depth - 1];
		if (top->nfrag == 0 && top->node.nfragments > 0 && top->next_child == 0)
			level_open(scan, top);
		if (top->node.level == 0)
		{
			if (!scan->at_leaf)
			{
				scan->at_leaf = true;
				scan->bound = top->node.hi;
				return true;
			}
			/* the leaf is done */
			scan->at_leaf = false;
			level_done(scan, top);
			level_close(top);
			scan->depth--;
			continue;
		}
		if (top->next_child < top->node.nchildren)
		{
			ScanLevel  *lv = palloc0(sizeof(ScanLevel));
			uint32		c = top->next_child++;

			if (scan->depth >= CBT_MAX_HEIGHT)
				ss_page_corrupted(rel, top->node.child[c],
								  "The tree is deeper than a cbt can be.");
			cbt_read_node(rel, top->node.child[c],
						  top->node.child_generation[c], &lv->node);
			if (lv->node.level + 1 != top->node.level ||
				lv->node.lo != top->node.pivot[c] ||
				lv->node.hi != (c + 1 < top->node.nchildren ?
								top->node.pivot[c + 1] - 1 : top->node.hi))
				ss_page_corrupted(rel, top->node.child[c],
								  "A child's level or hash range does not follow its parent's.");
			scan->levels[scan->depth++] = lv;
			continue;
		}
		level_done(scan, top);
		level_close(top);
		scan->depth--;
	}
}

/*
 * The next hash up to the bound: every PAO and record of it folded into
 * its groups; false if there is none.
 */
static bool
next_hash(CbtScanDesc *scan, uint64 *hash)
{
	uint64		h = 0;
	bool		any = false;

	for (int d = 0; d < scan->depth; d++)
	{
		ScanLevel  *lv = scan->levels[d];

		for (int i = 0; i < lv->nfrag; i++)
			if (lv->has[i] && lv->hash[i] <= scan->bound && (!any || lv->hash[i] < h))
			{
				h = lv->hash[i];
				any = true;
			}
	}
	if (scan->log_has && scan->log_hash <= scan->bound &&
		(!any || scan->log_hash < h))
	{
		h = scan->log_hash;
		any = true;
	}
	if (!any)
		return false;

	CHECK_FOR_INTERRUPTS();
	for (int d = 0; d < scan->depth; d++)
	{
		ScanLevel  *lv = scan->levels[d];

		for (int i = 0; i < lv->nfrag; i++)
			while (lv->has[i] && lv->hash[i] == h)
			{
				cbt_groups_add_pao(&scan->groups, lv->pao[i], lv->size[i]);
				lv->has[i] = cbt_frag_next(&lv->cur[i], &lv->hash[i],
										   &lv->pao[i], &lv->size[i]);
			}
	}
	while (scan->log_has && scan->log_hash == h)
	{
		bool		isnull;
		bytea	   *row = DatumGetByteaPP(slot_getattr(scan->sortslot, 3, &isnull));

		(void) cbt_groups_add_record(&scan->groups, h,
									 DatumGetBool(slot_getattr(scan->sortslot, 4, &isnull)),
									 VARDATA_ANY(row), VARSIZE_ANY_EXHDR(row));
		log_next(scan);
	}
	*hash = h;
	return true;
}

/* The groups of one hash as rows of the table, into the batch. */
static void
emit_groups(CbtScanDesc *scan)
{
	CbtRuntime *rt = scan->rt;
	const CbtDef *def = rt->def;
	TupleDesc	desc = RelationGetDescr(scan->ss.base.rs_rd);
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *isnull = palloc(sizeof(bool) * desc->natts);
	Datum	   *results = palloc(sizeof(Datum) * def->naggs);
	bool	   *rnull = palloc(sizeof(bool) * def->naggs);
	MemoryContext old = MemoryContextSwitchTo(scan->batch_cxt);

	for (int gi = 0; gi < scan->groups.n; gi++)
	{
		TupleTableSlot *key = scan->groups.keys[gi];

		for (int i = 0; i < desc->natts; i++)
		{
			values[i] = (Datum) 0;
			isnull[i] = true;
		}
		slot_getsomeattrs(key, def->nkeys);
		for (int k = 0; k < def->nkeys; k++)
		{
			values[rt->input_src[k]] = key->tts_values[k];
			isnull[rt->input_src[k]] = key->tts_isnull[k];
		}
		cbt_agg_finalize(rt->run, &scan->groups.states[gi], results, rnull);
		for (int a = 0; a < def->naggs; a++)
		{
			values[rt->result_attno[a]] = results[a];
			isnull[rt->result_attno[a]] = rnull[a];
		}
		if (scan->nbatch == scan->batchcap)
		{
			scan->batchcap *= 2;
			scan->batch = repalloc(scan->batch, sizeof(HeapTuple) * scan->batchcap);
		}
		scan->batch[scan->nbatch++] = heap_form_tuple(desc, values, isnull);
	}
	MemoryContextSwitchTo(old);
	cbt_groups_reset(&scan->groups);
	pfree(values);
	pfree(isnull);
	pfree(results);
	pfree(rnull);
}

/* Make the next batch of rows, as the table's owner. */
static void
fill_batch(CbtScanDesc *scan)
{
	CbtOwnerSave save;

	MemoryContextReset(scan->batch_cxt);
	scan->batchcap = SCAN_BATCH_ROWS;
	scan->batch = MemoryContextAlloc(scan->batch_cxt,
									 sizeof(HeapTuple) * scan->batchcap);
	scan->nbatch = 0;
	scan->next = 0;
	cbt_as_owner(scan->ss.base.rs_rd, &save);
	while (scan->nbatch < SCAN_BATCH_ROWS && !scan->exhausted)
	{
		uint64		h;

		if (!scan->at_leaf && !scan->tree_done && !next_leaf(scan))
			scan->tree_done = true; /* the records after the last leaf */
		if (next_hash(scan, &h))
		{
			emit_groups(scan);
			continue;
		}
		if (scan->at_leaf)
		{
			if (!next_leaf(scan))
				scan->tree_done = true;
			continue;
		}
		scan->exhausted = true;
	}
	cbt_as_caller(&save);
}

/* ---- the scan callbacks (SSScanOps) ---- */

static void
cbt_scan_start(SSScanDesc *sscan)
{
	CbtScanDesc *scan = (CbtScanDesc *) sscan;
	Relation	rel = sscan->base.rs_rd;

	scan->rt = cbt_runtime(rel);
	cbt_groups_init(&scan->groups, rel, scan->rt->run, scan->rt->def->nkeys);
	scan->meta = palloc(sizeof(CbtMeta));
	scan->batch_cxt = AllocSetContextCreate(CurrentMemoryContext,
											"cbt scan rows",
											ALLOCSET_DEFAULT_SIZES);
	scan_start(scan);
}

static bool
cbt_scan_next(SSScanDesc *sscan, TupleTableSlot *slot)
{
	CbtScanDesc *scan = (CbtScanDesc *) sscan;

	if (scan->next >= scan->nbatch)
	{
		if (scan->exhausted)
			return false;
		fill_batch(scan);
		if (scan->nbatch == 0)
			return false;
	}
	heap_deform_tuple(scan->batch[scan->next], slot->tts_tupleDescriptor,
					  slot->tts_values, slot->tts_isnull);
	scan->next++;
	ExecStoreVirtualTuple(slot);
	return true;
}

/* What the scan holds besides its memory: pins, a sort, a slot. */
static void
cbt_scan_stop(SSScanDesc *sscan)
{
	CbtScanDesc *scan = (CbtScanDesc *) sscan;

	while (scan->depth > 0)
		level_close(scan->levels[--scan->depth]);
	if (scan->sort)
		tuplesort_end(scan->sort);
	if (scan->sortslot)
		ExecDropSingleTupleTableSlot(scan->sortslot);
	if (scan->rt)
		cbt_groups_free(&scan->groups);
}

const SSScanOps cbt_scan_ops = {
	.scan_size = sizeof(CbtScanDesc),
	.start = cbt_scan_start,
	.next = cbt_scan_next,
	.stop = cbt_scan_stop,
};
