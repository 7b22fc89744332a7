/*-------------------------------------------------------------------------
 *
 * qfam_apply.c
 *	  Writing a quotient filter: the metapage, applying a committing
 *	  transaction's inserts and deletes page by page, and resizing.
 *
 * Every page change is one GenericXLog record; a resize writes the new
 * level's pages as full images and then switches to it with one metapage
 * record.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "miscadmin.h"
#include "qfam.h"
#include "ss_pending.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* One pending insert or delete, placed on its page. */
typedef struct QfOp
{
	uint64		h1;
	int64		count;
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

bool
qfam_read_meta(Relation rel, QfamMeta *meta)
{
	return ss_read_metapage(rel, SS_KIND_QF, meta, sizeof(QfamMeta));
}

/* The metapage of a new filter: one empty level after the metapage. */
void
qfam_first_level(const QfamParams *p, QfamMeta *meta)
{
	memset(meta, 0, sizeof(*meta));
	meta->hdr.magic = SS_META_MAGIC;
	meta->hdr.version = SS_META_VERSION;
	meta->hdr.kind = SS_KIND_QF;
	meta->hdr.seed = p->seed;
	meta->params = *p;
	meta->nlevels = 1;
	meta->levels[0].base = 1;
	meta->levels[0].page_bits = p->page_bits;
	meta->levels[0].rbits = p->rbits;
	meta->reserved_end = 1 + ((BlockNumber) 1 << p->page_bits);
}

/* Add item and count deltas of level 0 to the metapage (locked alone). */
static void
qfam_meta_add(Relation rel, int64 d_items, int64 d_total)
{
	Buffer		buf;
	GenericXLogState *state;
	QfamMeta   *meta;

	if (d_items == 0 && d_total == 0)
		return;
	buf = ReadBuffer(rel, SS_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	ss_meta_check(rel, BufferGetPage(buf), SS_KIND_QF);
	state = GenericXLogStart(rel);
	meta = (QfamMeta *) SSPageGetData(GenericXLogRegisterBuffer(state, buf, 0));
	meta->levels[0].items += d_items;
	meta->levels[0].total += d_total;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
}

static void
qfam_check_area(Relation rel, BlockNumber blkno, const QfGeom *g,
				const char *area)
{
	const char *msg;

	if (!qf_area_check_header(g, area, &msg))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("quotient filter page %u of relation \"%s\" is corrupted",
						blkno, RelationGetRelationName(rel)),
				 errdetail("%s", msg),
				 errhint("Restore the relation from a backup.")));
}

/*
 * Apply ops[0..n) (sorted by page) to level lv.  Returns the index of the
 * first op not applied because its page is full (n if all were applied);
 * the ops of that page were not applied at all.
 */
static int
qfam_apply_ops(Relation rel, const QfamState *st, const QfamLevel *lv,
			   QfOp *ops, int n, int64 *d_items, int64 *d_total)
{
	QfGeom		g;
	int			start = 0;

	qfam_geom(&st->p, lv->rbits, &g);
	while (start < n)
	{
		int			end = start + 1;
		GenericXLogState *state;
		Buffer		buf;
		char	   *area;
		bool		isnew;
		bool		full = false;
		QfStats		before;
		QfStats		after;
		BlockNumber blkno = lv->base + (BlockNumber) ops[start].page;

		CHECK_FOR_INTERRUPTS();
		while (end < n && ops[end].page == ops[start].page)
			end++;
		state = GenericXLogStart(rel);
		area = SSPageGetData(ss_lock_page_for_write(rel, state, blkno,
													SS_PAGE_QF_AREA,
													g.area_bytes, &buf, &isnew));
		if (isnew)
			qf_area_init(&g, area);
		else
			qfam_check_area(rel, blkno, &g, area);
		qf_area_stats(&g, area, &before);
		for (int i = start; i < end && !full; i++)
		{
			if (ops[i].is_delete)
				(void) qf_remove(&g, area, ops[i].quotient, ops[i].remainder,
								 (uint64) ops[i].count);
			else if (qf_insert(&g, area, ops[i].quotient, ops[i].remainder,
							   (uint64) ops[i].count) != QF_OK)
				full = true;
		}
		if (full)
		{
			/* leave the page as it was; the caller resizes and retries */
			GenericXLogAbort(state);
			UnlockReleaseBuffer(buf);
			return start;
		}
		qf_area_stats(&g, area, &after);
		*d_items += (int64) after.nitems - (int64) before.nitems;
		*d_total += (int64) (after.total_count - before.total_count);
		GenericXLogFinish(state);
		UnlockReleaseBuffer(buf);
		start = end;
	}
	return n;
}

/*
 * Apply a batch of ops, resizing level 0 whenever a page overflows.  Holds
 * the share page lock on block 0 except while resizing.
 */
static void
qfam_apply_batch(Relation rel, const QfamState *st, QfOp *ops, int n)
{
	int			done = 0;

	while (done < n)
	{
		QfamMeta	meta;
		QfamLevel  *lv;
		int64		d_items = 0;
		int64		d_total = 0;
		int			applied;

		LockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
		if (!qfam_read_meta(rel, &meta))
			elog(ERROR, "quotient filter metapage of \"%s\" disappeared",
				 RelationGetRelationName(rel));
		lv = &meta.levels[0];
		for (int i = done; i < n; i++)
		{
			uint64		page;

			qf_fingerprint_split(ops[i].h1, (int) lv->page_bits,
								 (int) st->p.slot_bits, (int) lv->rbits,
								 &page, &ops[i].quotient, &ops[i].remainder);
			ops[i].page = page;
		}
		qsort(ops + done, n - done, sizeof(QfOp), qf_op_cmp);
		applied = qfam_apply_ops(rel, st, lv, ops + done, n - done,
								 &d_items, &d_total);
		qfam_meta_add(rel, d_items, d_total);
		UnlockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
		done += applied;
		if (done < n || (double) (lv->items + d_items) >
			QFAM_MAX_LOAD * ((double) ((uint64) 1 << lv->page_bits) *
							 ((uint64) 1 << st->p.slot_bits)))
			qfam_resize(rel, st);
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
			QfamMeta	meta;

			qfam_first_level(&st->p, &meta);
			ss_ensure_metapage(rel, SS_KIND_QF, &meta, sizeof(meta));
			any = true;
		}
		memcpy(&key, payload, sizeof(key));
		if (n == maxops)
		{
			qfam_apply_batch(rel, st, ops, n);
			n = 0;
		}
		ops[n].h1 = key.hash.h1;
		ops[n].count = key.weight;
		ops[n].seq = seq++;
		ops[n].is_delete = (hdr.type == SS_PENDING_DELETE);
		n++;
	}
	if (n > 0)
		qfam_apply_batch(rel, st, ops, n);
	ss_pending_iter_end(&it);
	pfree(ops);
}

/*
 * Double level 0: every page splits into two pages of the next level (one
 * remainder bit becomes a page bit, qf_split_area), written after
 * everything reserved so far, then one metapage update switches to them.
 * Takes the page lock on block 0 exclusively, so no writer is applying
 * meanwhile; the caller must not hold it.  If another backend resized
 * while we waited, there is nothing to do.
 */
void
qfam_resize(Relation rel, const QfamState *st)
{
	QfamMeta	meta;
	QfamLevel  *lv;
	QfGeom		g_old;
	QfGeom		g_new;
	BlockNumber new_base;
	uint64		npages;
	BlockNumber nblocks;
	char	   *lo = palloc(BLCKSZ);
	char	   *hi = palloc(BLCKSZ);
	char	   *empty = palloc(BLCKSZ);
	GenericXLogState *state;
	Buffer		buf;
	int64		seen_resizes;

	if (!qfam_read_meta(rel, &meta))
		return;
	seen_resizes = meta.resizes;
	LockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	if (!qfam_read_meta(rel, &meta) || meta.resizes != seen_resizes)
	{
		UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
		return;
	}
	lv = &meta.levels[0];
	if (lv->rbits <= 1 || lv->page_bits >= QFAM_MAX_PAGE_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("quotient filter \"%s\" is full and cannot grow",
						RelationGetRelationName(rel)),
				 errdetail("It has %u remainder bits and 2^%u pages.",
						   lv->rbits, lv->page_bits),
				 errhint("Create a filter with a larger capacity or a smaller false-positive rate.")));

	qfam_geom(&st->p, lv->rbits, &g_old);
	qfam_geom(&st->p, lv->rbits - 1, &g_new);
	npages = (uint64) 1 << lv->page_bits;
	new_base = meta.reserved_end;
	nblocks = RelationGetNumberOfBlocks(rel);
	qf_area_init(&g_old, empty);

	for (uint64 pg = 0; pg < npages; pg++)
	{
		BlockNumber oldblk = lv->base + (BlockNumber) pg;
		const char *src = empty;
		Buffer		oldbuf = InvalidBuffer;
		char	   *dst;
		QfStatus	rc;

		CHECK_FOR_INTERRUPTS();
		if (oldblk < nblocks)
		{
			oldbuf = ReadBuffer(rel, oldblk);
			LockBuffer(oldbuf, BUFFER_LOCK_SHARE);
			if (!PageIsNew(BufferGetPage(oldbuf)))
			{
				ss_page_check(rel, oldblk, BufferGetPage(oldbuf), SS_PAGE_QF_AREA);
				src = SSPageGetData(BufferGetPage(oldbuf));
				qfam_check_area(rel, oldblk, &g_old, src);
			}
		}
		rc = qf_split_area(&g_old, src, &g_new, lo, hi);
		if (BufferIsValid(oldbuf))
			UnlockReleaseBuffer(oldbuf);
		if (rc != QF_OK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("quotient filter \"%s\" cannot grow: page " UINT64_FORMAT " overflows when split",
							RelationGetRelationName(rel), pg),
					 errhint("The keys are too skewed for this false-positive rate; create a filter with a larger capacity.")));
		for (int half = 0; half < 2; half++)
		{
			state = GenericXLogStart(rel);
			dst = SSPageGetData(ss_lock_page_for_write(rel, state,
													   new_base + (BlockNumber) (2 * pg + half),
													   SS_PAGE_QF_AREA,
													   g_new.area_bytes, &buf, NULL));
			memcpy(dst, half ? hi : lo, g_new.area_bytes);
			GenericXLogFinish(state);
			UnlockReleaseBuffer(buf);
		}
	}

	/* switch to the new level */
	buf = ReadBuffer(rel, SS_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(rel);
	{
		QfamMeta   *m = (QfamMeta *) SSPageGetData(GenericXLogRegisterBuffer(state, buf, 0));

		m->levels[0].base = new_base;
		m->levels[0].page_bits = lv->page_bits + 1;
		m->levels[0].rbits = lv->rbits - 1;
		m->reserved_end = new_base + (BlockNumber) (2 * npages);
		m->resizes++;
	}
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
	UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	pfree(lo);
	pfree(hi);
	pfree(empty);
}

/* Count of the fingerprint of h1 in level lv (0 if absent). */
uint64
qfam_level_count(Relation rel, const QfamParams *p, const QfamLevel *lv,
				 uint64 h1)
{
	QfGeom		g;
	uint64		page;
	uint32		quotient;
	uint64		remainder;
	BlockNumber blkno;
	Buffer		buf;
	uint64		count = 0;

	qf_fingerprint_split(h1, (int) lv->page_bits, (int) p->slot_bits,
						 (int) lv->rbits, &page, &quotient, &remainder);
	blkno = lv->base + (BlockNumber) page;
	if (blkno >= RelationGetNumberOfBlocks(rel))
		return 0;
	qfam_geom(p, lv->rbits, &g);
	buf = ReadBuffer(rel, blkno);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	if (!PageIsNew(BufferGetPage(buf)))
	{
		const char *area = SSPageGetData(BufferGetPage(buf));

		ss_page_check(rel, blkno, BufferGetPage(buf), SS_PAGE_QF_AREA);
		qfam_check_area(rel, blkno, &g, area);
		count = qf_count(&g, area, quotient, remainder);
	}
	UnlockReleaseBuffer(buf);
	return count;
}
