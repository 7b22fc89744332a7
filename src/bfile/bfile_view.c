/*-------------------------------------------------------------------------
 *
 * bfile_view.c
 *	  What a bfile's readers see: the installed sample with the committed
 *	  rows still in the change log, drawn as the next round will draw them
 *	  (docs/bfile.md, "Readers").
 *
 * A round installs the set of items whose level is at least L, L rising
 * one level per discard while the sample holds s_max items; which items
 * are in it depends on their levels alone.  So a reader that cannot run
 * the round (a standby; a round running in another session) computes
 * that set without writing: the installed sample's items per level, then
 * the change log's committed records in the order the round reads them
 * (up to the first batch still in progress, where a round stops), each
 * item's level drawn as the round draws it, levels discarded as the round
 * would.  A second pass over the same records keeps the log's rows whose
 * level reaches the final L; the readers skip installed rows below it
 * (bfile_view_bucket_visible, and each tail item's level).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "bfile.h"
#include "bfile_am.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

typedef struct LevelCount
{
	int32		level;			/* hash key */
	int64		items;
	int64		bytes;
} LevelCount;

typedef struct ViewPass
{
	Relation	rel;
	BfileView  *v;
	uint64		seed_level;
	HTAB	   *counts;			/* items per level, from L up */
	bool		tail_counted;	/* the tail's items are in counts */
	int32		level;
	int64		size;
	int64		bytes;
	int64		seen;
	int64		discards;
	int64		rows;			/* log rows that entered */
	/* the second pass: rows with a level >= v->level and a key in range */
	Tuplestorestate *out;
	TupleDesc	desc;
	int64		lo;
	int64		hi;
	Datum	   *values;
	bool	   *nulls;
} ViewPass;

static void
count_add(ViewPass *vp, int32 level, int64 n, int64 bytes)
{
	bool		found;
	LevelCount *lc = hash_search(vp->counts, &level, HASH_ENTER, &found);

	if (!found)
	{
		lc->items = 0;
		lc->bytes = 0;
	}
	lc->items += n;
	lc->bytes += bytes;
}

/* The installed tail's items per level (read once, when L reaches it). */
static void
count_tail(ViewPass *vp)
{
	BfileChain it;
	HeapTupleData htup;

	vp->tail_counted = true;
	bfile_chain_begin(&it, vp->rel, &vp->v->meta->tail);
	while (bfile_chain_next(&it, &htup))
		count_add(vp, it.item_level, 1, it.item_bytes);
	bfile_chain_end(&it);
}

/* A discard, as the round's: every item of level L leaves, L rises. */
static void
discard_level(ViewPass *vp)
{
	bool		found;
	LevelCount *lc;

	if (!vp->tail_counted && vp->level >= vp->v->meta->tail_level)
		count_tail(vp);
	lc = hash_search(vp->counts, &vp->level, HASH_FIND, &found);
	if (found)
	{
		vp->size -= lc->items;
		vp->bytes -= lc->bytes;
		hash_search(vp->counts, &vp->level, HASH_REMOVE, NULL);
	}
	vp->level++;
	vp->discards++;
}

/* SSLogRecordFn: one committed record, as round_record meets it. */
static void
view_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
			void *arg)
{
	ViewPass   *vp = (ViewPass *) arg;
	BfileMeta  *m = vp->v->meta;
	BfileRecordHeader rh;
	uint32		tuplen;
	uint64		seq;
	int32		level;

	if (pos < m->stream_pos)
		return;
	if (!bfile_record_read(vp->rel, &m->params, &vp->seen, hdr, payload, &rh,
						   &tuplen, &seq))
		return;
	CHECK_FOR_INTERRUPTS();
	level = bfile_item_level(&m->params, vp->seed_level, vp->level, seq, &rh);
	if (level < vp->level)
		return;
	if (vp->out != NULL && level >= vp->v->level)
	{
		int64		key = rh.has_key ? rh.key : (int64) seq;

		if (key >= vp->lo && key <= vp->hi)
		{
			HeapTupleData htup;

			bfile_minimal_tuple(vp->rel, (MinimalTuple) (payload + sizeof(rh)),
								tuplen, &htup);
			heap_deform_tuple(&htup, vp->desc, vp->values, vp->nulls);
			tuplestore_putvalues(vp->out, vp->desc, vp->values, vp->nulls);
		}
	}
	count_add(vp, level, 1, BFILE_ITEM_BYTES(tuplen));
	vp->size++;
	vp->bytes += BFILE_ITEM_BYTES(tuplen);
	vp->rows++;
	while (bfile_over_bound(&m->params, vp->size, vp->bytes))
		discard_level(vp);
}

/* Start a pass from the installed sample. */
static void
pass_begin(ViewPass *vp, Relation rel, BfileView *v)
{
	BfileMeta  *m = v->meta;
	HASHCTL		ctl;

	vp->rel = rel;
	vp->v = v;
	vp->seed_level = bfile_seed_level(m->params.seed);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(LevelCount);
	ctl.hcxt = CurrentMemoryContext;
	vp->counts = hash_create("bfile view levels", 64, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (uint32 i = 0; i < m->nbuckets_live; i++)
		count_add(vp, m->buckets[i].level, m->buckets[i].items,
				  (int64) m->buckets[i].bytes);
	vp->tail_counted = m->tail.items == 0;
	vp->level = m->level;
	vp->size = m->size;
	vp->bytes = bfile_sample_bytes(m);
	vp->seen = m->seen;
	vp->discards = 0;
	vp->rows = 0;
}

/*
 * Read the bfile as a reader sees it into *v (v->meta is allocated here
 * if NULL); false if it has no metapage.  With rows, the change log's rows
 * in the sample whose time key is in [lo, hi] are put there (desc: the
 * table's row type).  Like every reader, a round runs first if the change
 * log's lock is free, unless v->no_round (an info call reports the work
 * instead of doing it); a log that moved while it was read is read again
 * (rows emptied).
 */
bool
bfile_view_read(Relation rel, BfileView *v, Tuplestorestate *rows,
				TupleDesc desc, int64 lo, int64 hi)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "bfile view",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	bool		found = true;

	if (v->meta == NULL)
		v->meta = MemoryContextAlloc(old, sizeof(BfileMeta));
	for (int attempt = 0;; attempt++)
	{
		SSLogSnapshot snap;
		ViewPass	vp;

		MemoryContextReset(cxt);
		if (v->no_round)
			ss_log_read_snapshot(rel, &snap, attempt);
		else
			ss_log_read_begin(rel, &snap, attempt, false);
		if (!ss_read_structure_meta(rel, &bfile_structure, v->meta))
		{
			found = false;
			break;
		}
		ss_log_snapshot_of(rel, &v->meta->hdr, &snap);
		memset(&vp, 0, sizeof(vp));
		pass_begin(&vp, rel, v);
		if (!ss_log_scan_prefix(rel, &snap, view_record, &vp))
			continue;
		v->level = vp.level;
		v->size = vp.size;
		v->bytes = vp.bytes;
		v->seen = vp.seen;
		v->discards = vp.discards;
		v->log_rows = vp.rows;
		if (rows == NULL || vp.rows == 0)
			break;

		/* again, keeping the rows that reach the final L */
		pass_begin(&vp, rel, v);
		vp.out = rows;
		vp.desc = desc;
		vp.lo = lo;
		vp.hi = hi;
		vp.values = palloc(sizeof(Datum) * desc->natts);
		vp.nulls = palloc(sizeof(bool) * desc->natts);
		if (ss_log_scan_prefix(rel, &snap, view_record, &vp))
			break;
		tuplestore_clear(rows);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return found;
}

/* Whether installed bucket b holds rows of the view (the tail may, in part). */
bool
bfile_view_bucket_visible(const BfileView *v, const BfileBucket *b)
{
	return b->items > 0 && (b == &v->meta->tail || b->level >= v->level);
}
