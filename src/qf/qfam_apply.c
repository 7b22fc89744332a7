/*-------------------------------------------------------------------------
 *
 * qfam_apply.c
 *	  Writing a quotient filter: the metapage, applying a committing
 *	  transaction's inserts and deletes page by page, and making room when
 *	  level 0 fills (resize, flush or cascade merge, see qfam_merge.c).
 *
 * Every page change is one GenericXLog record.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "ss_xlog.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "qfam.h"
#include "ss_pending.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* One pending insert or delete, placed on its level-0 page. */
typedef struct QfOp
{
	uint64		h1;
	int64		count;			/* for deletes: copies still to remove */
	uint64		page;
	uint64		remainder;
	uint32		quotient;
	uint32		seq;
	bool		is_delete;
} QfOp;

static int
qf_op_cmp(const void *a, const void *b)
{
	const QfOp *x = a;
	const QfOp *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq ? 1 : 0;
}

static uint32
qf_op_page(const void *op)
{
	return (uint32) ((const QfOp *) op)->page;
}

bool
qfam_read_meta(Relation rel, QfamMeta *meta)
{
	return ss_read_structure_meta(rel, &qfam_state_ops, meta);
}

/* The metapage of a new filter: an empty level 0 after the metapage. */
void
qfam_first_level(const QfamParams *p, QfamMeta *meta)
{
	memset(meta, 0, sizeof(*meta));
	ss_meta_header_init(&meta->hdr, SS_KIND_QF, p->seed, 0);
	meta->params = *p;
	meta->nlevels = 1;
	qfam_level_shape(&meta->levels[0], p->fp_bits, p->t0);
	meta->levels[0].base = 1;
	meta->levels[0].alt_base = InvalidBlockNumber;
	meta->levels[0].epoch = 1;
	meta->undo_xid = InvalidTransactionId;
	meta->undo_head = InvalidBlockNumber;
	meta->reserved_end = 1 + ((BlockNumber) 1 << meta->levels[0].page_bits);
}

/* Add item and count deltas per level to the metapage (locked alone). */
static void
qfam_meta_add(Relation rel, const int64 *d_items, const int64 *d_total,
			  uint32 nlevels)
{
	Buffer		buf;
	SSXLogState *state;
	QfamMeta   *meta;
	bool		any = false;

	for (uint32 l = 0; l < nlevels; l++)
		any |= d_items[l] != 0 || d_total[l] != 0;
	if (!any)
		return;
	state = ss_xlog_start(rel);
	meta = ss_meta_register(rel, SS_KIND_QF, state, &buf);
	for (uint32 l = 0; l < nlevels; l++)
	{
		meta->levels[l].items = qfam_counter_add(meta->levels[l].items, d_items[l]);
		meta->levels[l].total = qfam_counter_add(meta->levels[l].total, d_total[l]);
	}
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

/*
 * Is this page of level lv live?  A zero page, or a page left from an
 * earlier generation of the level's blocks, holds nothing.
 */
bool
qfam_page_valid(Relation rel, BlockNumber blkno, Page page, const QfamLevel *lv)
{
	const char *msg;
	QfGeom		g;

	if (PageIsNew(page))
		return false;
	ss_page_check(rel, blkno, page, SS_PAGE_QF_AREA);
	if (SSPageGetOpaque(page)->epoch != lv->epoch)
		return false;
	qfam_level_geom(lv, &g);
	if (!qf_area_check_header(&g, SSPageGetData(page), &msg))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("quotient filter page %u of relation \"%s\" is corrupted",
						blkno, RelationGetRelationName(rel)),
				 errdetail("%s", msg),
				 errhint("Restore the relation from a backup.")));
	return true;
}

/*
 * Lock page blkno of level lv for writing in state; a page that is not
 * live is reset to an empty area of the level's generation.
 */
static char *
qfam_lock_level_page(Relation rel, SSXLogState *state,
					 const QfamLevel *lv, const QfGeom *g, BlockNumber blkno,
					 Buffer *buf)
{
	Page		page;
	bool		isnew;

	page = ss_lock_page_for_write(rel, state, blkno, SS_PAGE_QF_AREA,
								  g->area_bytes, buf, &isnew);
	if (isnew || !qfam_page_valid(rel, blkno, page, lv))
	{
		ss_page_init(page, SS_PAGE_QF_AREA, g->area_bytes);
		SSPageGetOpaque(page)->epoch = lv->epoch;
		qf_area_init(g, SSPageGetData(page));
	}
	return SSPageGetData(page);
}

/*
 * Apply ops[0..n) (sorted by page) to level 0.  Deletes remove what level
 * 0 has and keep the rest in op->count for the older levels; what they
 * remove goes to the undo segment in the same record (qfam_undo.c).
 * Returns the index of the first op not applied because its page is full
 * (n if all were); the ops before it are applied, so a group larger than a
 * page still makes progress after the caller makes room.
 */
static int
qfam_apply_level0(Relation rel, const QfamLevel *lv, QfOp *ops, int n,
				  int64 *d_items, int64 *d_total, QfamUndo *undo)
{
	QfGeom		g;
	int			start = 0;

	qfam_level_geom(lv, &g);
	while (start < n)
	{
		int			end = start + 1;
		SSXLogState *state;
		Buffer		buf;
		char	   *area;
		bool		full = false;
		bool		deletes = false;
		uint32		room = 0;
		Buffer		undobuf = InvalidBuffer;
		QfamUndoHeader *uh = NULL;
		QfStats		before;
		QfStats		after;

		CHECK_FOR_INTERRUPTS();
		while (end < n && ops[end].page == ops[start].page)
			end++;
		for (int i = start; undo && i < end && !deletes; i++)
			deletes = ops[i].is_delete;
		if (deletes)
			room = qfam_undo_room(rel, undo);
		state = ss_xlog_start(rel);
		area = qfam_lock_level_page(rel, state, lv, &g,
									lv->base + (BlockNumber) ops[start].page, &buf);
		if (deletes)
			uh = qfam_undo_register(rel, state, undo, &undobuf);
		qf_area_stats(&g, area, &before);
		for (int i = start; i < end; i++)
		{
			if (ops[i].is_delete)
			{
				uint64		removed;

				/* undo page full: the rest goes in the next record */
				if (uh && room == 0)
				{
					end = i;
					break;
				}
				removed = qf_remove(&g, area, ops[i].quotient, ops[i].remainder,
									(uint64) ops[i].count);
				ops[i].count -= (int64) removed;
				if (uh && removed > 0)
				{
					qfam_undo_append(undo, uh, ops[i].h1, removed);
					room--;
				}
			}
			else if (qf_insert(&g, area, ops[i].quotient, ops[i].remainder,
							   (uint64) ops[i].count) != QF_OK)
			{
				/* QF_FULL left the area as it was before op i */
				full = true;
				end = i;
				break;
			}
		}
		qf_area_stats(&g, area, &after);
		*d_items += (int64) after.nitems - (int64) before.nitems;
		*d_total = qfam_delta_add(*d_total,
									qfam_total_delta(before.total_count,
													 after.total_count));
		if (end > start)
			ss_xlog_finish(state);
		else
			ss_xlog_abort(state);
		UnlockReleaseBuffer(buf);
		if (BufferIsValid(undobuf))
			UnlockReleaseBuffer(undobuf);
		if (full)
			return end;
		start = end;
	}
	return n;
}

/* Remove what deletes still owe from the older levels, newest first. */
static void
qfam_delete_older(Relation rel, const QfamMeta *meta, QfOp *ops, int n,
				  int64 *d_items, int64 *d_total, QfamUndo *undo)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);

	for (int i = 0; i < n; i++)
	{
		for (uint32 l = 1; l < meta->nlevels && ops[i].is_delete && ops[i].count > 0; l++)
		{
			const QfamLevel *lv = &meta->levels[l];
			QfGeom		g;
			uint64		page;
			uint32		q;
			uint64		r;
			BlockNumber blkno;
			SSXLogState *state;
			Buffer		buf;
			Buffer		undobuf = InvalidBuffer;
			QfamUndoHeader *uh = NULL;
			uint64		removed;
			QfStats		before;
			QfStats		after;

			if (lv->items == 0)
				continue;
			qf_fingerprint_split(ops[i].h1, lv->page_bits, lv->slot_bits,
								 lv->rbits, &page, &q, &r);
			blkno = lv->base + (BlockNumber) page;
			if (blkno >= nblocks)
				continue;
			/* probe under a share lock first: most levels lack the key */
			if (qfam_level_count(rel, lv, ops[i].h1) == 0)
				continue;
			qfam_level_geom(lv, &g);
			if (undo)
				qfam_undo_room(rel, undo);
			state = ss_xlog_start(rel);
			{
				char	   *area = qfam_lock_level_page(rel, state, lv, &g, blkno, &buf);

				if (undo)
					uh = qfam_undo_register(rel, state, undo, &undobuf);
				qf_area_stats(&g, area, &before);
				removed = qf_remove(&g, area, q, r, (uint64) ops[i].count);
				qf_area_stats(&g, area, &after);
				if (uh && removed > 0)
					qfam_undo_append(undo, uh, ops[i].h1, removed);
			}
			d_items[l] += (int64) after.nitems - (int64) before.nitems;
			d_total[l] = qfam_delta_add(d_total[l],
										qfam_total_delta(before.total_count,
														 after.total_count));
			ss_xlog_finish(state);
			UnlockReleaseBuffer(buf);
			if (BufferIsValid(undobuf))
				UnlockReleaseBuffer(undobuf);
			ops[i].count -= (int64) removed;
		}
	}
}

/*
 * Apply a batch of ops, making room whenever a level-0 page overflows.
 * Holds the share page lock on block 0 except while making room.  Deletes
 * log what they remove in undo (NULL if the batch has no deletes).
 */
static void
qfam_apply_batch(Relation rel, const QfamState *st, QfOp *ops, int n,
				 QfamUndo *undo)
{
	int			done = 0;

	while (done < n)
	{
		QfamMeta	meta;
		QfamLevel  *lv;
		int64		d_items[QFAM_MAX_LEVELS] = {0};
		int64		d_total[QFAM_MAX_LEVELS] = {0};
		int			applied;
		int			chunk;
		double		room;
		bool		over;

		LockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
		if (!qfam_read_meta(rel, &meta))
			elog(ERROR, "quotient filter metapage of \"%s\" disappeared",
				 RelationGetRelationName(rel));
		lv = &meta.levels[0];

		/*
		 * Take no more ops than level 0 has room for.  A batch larger than
		 * level 0, sorted by page as a whole, would overflow its first page
		 * while the level is still almost empty and make room once per page
		 * (hundreds of merges for one big INSERT ... SELECT); in chunks it
		 * makes room once per level-0 fill, as a stream of small
		 * transactions does.  The ops are in commit order outside the
		 * chunk, and the sort keeps the order of one key's ops.
		 */
		room = ldexp(QFAM_MAX_LOAD, lv->t) - (double) lv->items;
		if (room < 1.0)
		{
			UnlockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
			qfam_make_room(rel, st, false);
			continue;
		}
		chunk = (int) Min((double) (n - done), room);
		for (int i = done; i < done + chunk; i++)
			qf_fingerprint_split(ops[i].h1, lv->page_bits, lv->slot_bits,
								 lv->rbits, &ops[i].page, &ops[i].quotient,
								 &ops[i].remainder);
		ss_sort_batch_by_page(ops + done, chunk, sizeof(QfOp), qf_op_page,
							  qf_op_cmp);
		applied = qfam_apply_level0(rel, lv, ops + done, chunk,
									&d_items[0], &d_total[0], undo);
		if (meta.nlevels > 1)
			qfam_delete_older(rel, &meta, ops + done, applied, d_items, d_total,
							  undo);
		qfam_meta_add(rel, d_items, d_total, meta.nlevels);
		UnlockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
		done += applied;
		over = (double) (lv->items + d_items[0]) > ldexp(QFAM_MAX_LOAD, lv->t);
		if (applied < chunk || over)
			qfam_make_room(rel, st, applied < chunk);
	}
}

/*
 * Apply a committing transaction's pending records for rel (pre-commit,
 * called by ss_pending.c), in batches of at most pending_memory bytes.
 */
void
qfam_apply_pending(Relation rel)
{
	QfamState  *st = qfam_get_state(rel);
	SSPendingIter it;
	SSPendingHeader hdr;
	char	   *payload;
	QfOp	   *ops;
	int			n = 0;
	int			maxops;
	uint32		seq = 0;
	bool		any = false;
	QfamUndo	undo;
	bool		deleting = false;

	maxops = (int) Max(1024, Min((Size) ss_pending_memory_kb * 1024 / sizeof(QfOp),
								 MaxAllocSize / sizeof(QfOp)));
	ops = palloc(sizeof(QfOp) * maxops);
	ss_pending_iter_begin(&it, RelationGetRelid(rel));
	while (ss_pending_iter_next(&it, &hdr, &payload))
	{
		SSPendingKey key;

		if (hdr.type != SS_PENDING_KEY && hdr.type != SS_PENDING_DELETE)
			continue;
		if (!any)
		{
			/* keep the undo segment short-lived: see qfam_undo.c */
			qfam_undo_resolve(rel, st, false);
			any = true;
		}
		memcpy(&key, payload, sizeof(key));
		if (n == maxops)
		{
			qfam_apply_batch(rel, st, ops, n, deleting ? &undo : NULL);
			n = 0;
		}
		if (hdr.type == SS_PENDING_DELETE && !deleting)
		{
			qfam_undo_begin(rel, st, &undo);
			deleting = true;
		}
		ops[n].h1 = key.hash.h1;
		ops[n].count = key.weight;
		ops[n].seq = seq++;
		ops[n].is_delete = (hdr.type == SS_PENDING_DELETE);
		n++;
	}
	if (n > 0)
		qfam_apply_batch(rel, st, ops, n, deleting ? &undo : NULL);
	ss_pending_iter_end(&it);
	pfree(ops);
}

/*
 * Insert copies[0..n) back (an aborted deleter's undo segment), as a
 * commit inserts: in batches, making room as needed.
 */
void
qfam_insert_copies(Relation rel, const QfamState *st,
				   const QfamUndoEntry *copies, int n)
{
	int			maxops = (int) Max(1024, Min((Size) ss_pending_memory_kb * 1024 / sizeof(QfOp),
											 MaxAllocSize / sizeof(QfOp)));
	QfOp	   *ops = palloc(sizeof(QfOp) * Min(n, maxops));

	for (int done = 0; done < n;)
	{
		int			k = Min(n - done, maxops);

		for (int i = 0; i < k; i++)
		{
			ops[i].h1 = copies[done + i].fp;
			ops[i].count = (int64) Min(copies[done + i].count, (uint64) PG_INT64_MAX);
			ops[i].seq = (uint32) i;
			ops[i].is_delete = false;
		}
		qfam_apply_batch(rel, st, ops, k, NULL);
		done += k;
	}
	pfree(ops);
}

/*
 * Level 0 is full (or a page of it overflowed, grow = true): make room.
 *	quotient_filter: level 0 doubles (one remainder bit becomes a page bit).
 *	buffered QF: levels 0 and 1 merge into level 1, doubled if needed.
 *	cascade filter: levels 0..i merge into the smallest level i that holds
 *	them (level i has fanout^i times the slots of level 0).
 * Takes the page lock on block 0 exclusively; the caller must not hold it.
 * If another backend made room while we waited, there is nothing to do.
 */
void
qfam_make_room(Relation rel, const QfamState *st, bool grow)
{
	QfamMeta	meta;
	int64		seen;
	const QfamParams *p = &st->p;

	if (!qfam_read_meta(rel, &meta))
		return;
	seen = meta.merges;
	LockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	if (!qfam_read_meta(rel, &meta) || meta.merges != seen)
	{
		UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
		return;
	}

	if (p->kind == QFAM_KIND_QF)
	{
		uint32		t = meta.levels[0].t + 1;

		while (!qfam_merge_levels(rel, &meta, 1, 0, t))
			t++;
	}
	else
	{
		uint32		step = p->kind == QFAM_KIND_CF ? (uint32) pg_ceil_log2_32(p->fanout) : 0;
		double		items = (double) meta.levels[0].items;
		uint32		target;
		uint32		t;

		if (p->kind == QFAM_KIND_BQF)
		{
			target = 1;
			items += meta.nlevels > 1 ? (double) meta.levels[1].items : 0;
			t = meta.nlevels > 1 ? meta.levels[1].t : Max(p->t_max, p->t0 + 1);
		}
		else
		{
			for (target = 1;; target++)
			{
				if (target < meta.nlevels)
					items += (double) meta.levels[target].items;
				t = p->t0 + target * step;
				if (target >= meta.nlevels || items <= ldexp(QFAM_MAX_LOAD, (int) t))
					break;
			}
			if (target >= QFAM_MAX_LEVELS)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("cascade filter \"%s\" has too many levels",
								RelationGetRelationName(rel))));
			if (target < meta.nlevels)
				t = Max(t, (uint32) meta.levels[target].t);
		}
		/* the merged level must hold everything below the load limit */
		while (items > ldexp(QFAM_MAX_LOAD, (int) t))
			t++;
		while (!qfam_merge_levels(rel, &meta, target + 1, target, t))
			t++;
	}
	UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
}

/* Count of the fingerprint of h1 in level lv (0 if absent). */
uint64
qfam_level_count(Relation rel, const QfamLevel *lv, uint64 h1)
{
	QfGeom		g;
	uint64		page;
	uint32		quotient;
	uint64		remainder;
	BlockNumber blkno;
	Buffer		buf;
	uint64		count = 0;

	if (lv->items == 0 && lv->total == 0)
		return 0;
	qf_fingerprint_split(h1, lv->page_bits, lv->slot_bits, lv->rbits,
						 &page, &quotient, &remainder);
	blkno = lv->base + (BlockNumber) page;
	buf = ss_read_buffer_if_exists(rel, blkno);
	if (!BufferIsValid(buf))
		return 0;
	qfam_level_geom(lv, &g);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	if (qfam_page_valid(rel, blkno, BufferGetPage(buf), lv))
		count = qf_count(&g, SSPageGetData(BufferGetPage(buf)), quotient, remainder);
	UnlockReleaseBuffer(buf);
	return count;
}
