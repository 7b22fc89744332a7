/*-------------------------------------------------------------------------
 *
 * qfam_consolidate.c
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
#include "ss_changelog.h"
#include "ss_pending.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

bool
qfam_read_meta(Relation rel, QfamMeta *meta)
{
	return ss_read_structure_meta(rel, &qfam_structure, meta);
}

/* The metapage of a new filter: an empty level 0 after the metapage. */
void
qfam_first_level(const QfamParams *p, QfamMeta *meta)
{
	QfamMap		map;

	memset(meta, 0, sizeof(*meta));
	meta->params = *p;
	meta->nlevels = 1;
	qfam_level_shape(p, &meta->levels[0], p->t0);
	qfam_level_map(p, &meta->levels[0], &map);
	meta->levels[0].base = 1;
	meta->levels[0].alt_base = InvalidBlockNumber;
	meta->levels[0].epoch = 1;
	/* log pages and new level runs are allocated after level 0 */
	ss_meta_header_init(&meta->hdr, SS_KIND_QF, p->seed,
						1 + (BlockNumber) map.npages);
}

/*
 * Is page epoch e ahead of its level's epoch cur?  Epochs count 1..65535
 * and wrap (0 is never used), and a page is stamped with its level's epoch
 * whenever it is written, so it is never ahead: taken on the circle, ahead
 * means within half of it.  A level-0 page left untouched for 32,767
 * emptyings of level 0 (each one after level 0 filled) would be taken for
 * one ahead; with fingerprints spread evenly over the pages, no page stays
 * untouched for even a few fills.
 */
static inline bool
qfam_epoch_ahead(uint16 e, uint16 cur)
{
	uint32		d = ((uint32) e + 65535 - cur) % 65535;

	return e != 0 && d >= 1 && d <= 32767;
}

/*
 * Is this page of level lv live?  A zero page, or a page left from an
 * earlier generation of the level's blocks, holds nothing.
 *
 * locked: the caller holds what keeps merges out (the share or exclusive
 * lock on block 0); merged: besides, lv is a level other than 0.  Such a level is
 * written by merges only, which write every page of its run with its new
 * epoch, so while it holds items a page of another epoch (or a zero page)
 * is damage to the page or to the metapage's epoch; taking it for an
 * emptied page would give false negatives, and the next write would
 * re-initialize it, losing its fingerprints.  With merges kept out, a page
 * of any level whose epoch is ahead of the level's is damage too (a
 * damaged epoch in the metapage, typically).
 */
bool
qfam_page_valid(Relation rel, BlockNumber blkno, Page page, const QfamLevel *lv,
				bool merged, bool locked)
{
	const char *msg;
	QfGeom		g;

	if (PageIsNew(page))
	{
		if (merged && lv->items > 0)
			ss_page_corrupted(rel, blkno,
							  "A page of a merged level holding items is all zeros.");
		return false;
	}
	ss_page_check(rel, blkno, page, SS_PAGE_QF_AREA);
	if (SSPageGetOpaque(page)->epoch != lv->epoch)
	{
		if (merged && lv->items > 0)
			ss_page_corrupted(rel, blkno,
							  "The page has epoch %u; its level, written by a merge and holding items, has epoch %u.",
							  SSPageGetOpaque(page)->epoch, lv->epoch);
		if (locked && qfam_epoch_ahead(SSPageGetOpaque(page)->epoch, lv->epoch))
			ss_page_corrupted(rel, blkno,
							  "The page has epoch %u, ahead of its level's epoch %u.",
							  SSPageGetOpaque(page)->epoch, lv->epoch);
		return false;
	}
	qfam_level_geom(lv, &g);
	if (!qf_area_check_header(&g, SSPageGetData(page), &msg))
		ss_page_corrupted(rel, blkno, "%s", msg);
	return true;
}

/* The applied_pos of a level page and what its last delete removed. */
static inline uint64 *
qfam_page_last_removed(Page page)
{
	return (uint64 *) (SSPageGetData(page) + QFAM_LAST_REMOVED_OFFSET);
}

/*
 * Lock page blkno of level lv for writing in state; a page that is not
 * live is reset to an empty area of the level's generation, keeping its
 * applied_pos (a level-0 page emptied by a merge still has applied what
 * the merge moved on).
 */
static Page
qfam_lock_level_page(Relation rel, SSXLogState *state,
					 const QfamLevel *lv, bool merged, const QfGeom *g,
					 BlockNumber blkno, Buffer *buf)
{
	Page		page;
	bool		isnew;

	page = ss_lock_page_for_write(rel, state, blkno, SS_PAGE_QF_AREA,
								  QFAM_LEVEL_DATA_SIZE, buf, &isnew);
	if (isnew && merged && lv->items > 0)
		ss_page_corrupted(rel, blkno,
						  "A page of a merged level holding items is missing.");

	/*
	 * qfam_page_valid checks the area's header.  The whole area
	 * (qf_area_check, O(slots)) is checked when a merge reads it and, on the
	 * runs they walk, by lookups; checking it before every write would
	 * dominate consolidation, whose writes touch few slots of large areas,
	 * so damage that no merge or lookup has seen can reach a write.
	 */
	if (isnew || !qfam_page_valid(rel, blkno, page, lv, merged, true))
	{
		uint64		applied = isnew ? 0 : SSPageGetOpaque(page)->applied_pos;

		ss_page_init(page, SS_PAGE_QF_AREA, QFAM_LEVEL_DATA_SIZE);
		SSPageGetOpaque(page)->epoch = lv->epoch;
		SSPageGetOpaque(page)->applied_pos = applied;
		qf_area_init(g, SSPageGetData(page));
	}
	return page;
}

/* Add a page change's item and count deltas to level l of the metapage. */
static void
qfam_meta_add_level(QfamMeta *m, uint32 l, const QfStats *before,
					const QfStats *after)
{
	m->levels[l].items = qfam_counter_add(m->levels[l].items,
										  (int64) after->nitems - (int64) before->nitems);
	m->levels[l].total = qfam_counter_add(m->levels[l].total,
										  qfam_total_delta(before->total_count,
														   after->total_count));
}

/*
 * What a reader needs of the key's page in level lv: the fingerprint's
 * count (0 if the page is not live), the page's applied_pos (kept by a
 * level-0 page across merges, so read even if the page is not live) and
 * what its last delete removed (ss_changelog.h, qfam.h).
 */
void
qfam_level_read(Relation rel, const QfamMeta *meta, uint32 level, uint64 h1,
				QfamPageRead *out)
{
	QfamLevel	lvbuf = meta->levels[level];
	const QfamLevel *lv = &lvbuf;
	/* the epoch of the pages an unfinished merge in place has rewritten */
	uint16		merge_epoch = meta->merge_target == level + 1 ? meta->merge_epoch : 0;
	QfGeom		g;
	QfamMap		map;
	uint64		page;
	uint32		quotient;
	uint64		remainder;
	BlockNumber blkno;
	Buffer		buf;
	Page		p;

	out->count = 0;
	out->applied = 0;
	out->last_removed = 0;
	out->stale_blk = InvalidBlockNumber;
	out->merged_in = false;
	qfam_level_map(&qfam_get_state(rel)->p, lv, &map);
	qfam_map_split(&map, h1, &page, &quotient, &remainder);
	blkno = lv->base + (BlockNumber) page;
	buf = ss_read_buffer_if_exists(rel, blkno);
	if (!BufferIsValid(buf))
	{
		if (level > 0 && lv->items > 0)
			out->stale_blk = blkno;
		return;
	}
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	p = BufferGetPage(buf);
	if (merge_epoch != 0 && !PageIsNew(p) &&
		SSPageGetOpaque(p)->epoch == merge_epoch)
	{
		lvbuf.epoch = merge_epoch;
		out->merged_in = true;
	}
	/* no lock keeps merges out: the caller judges a stale page */
	if ((level > 0 && lv->items > 0 &&
		 (PageIsNew(p) || SSPageGetOpaque(p)->epoch != lv->epoch)) ||
		(!PageIsNew(p) && qfam_epoch_ahead(SSPageGetOpaque(p)->epoch, lv->epoch)))
		out->stale_blk = blkno;
	if (!PageIsNew(p))
	{
		ss_page_check(rel, blkno, p, SS_PAGE_QF_AREA);
		out->applied = SSPageGetOpaque(p)->applied_pos;
		if (qfam_page_valid(rel, blkno, p, lv, false, false))
		{
			const char *msg;

			qfam_level_geom(lv, &g);
			if (!qf_count_checked(&g, SSPageGetData(p), quotient, remainder,
								  &out->count, &msg))
				ss_page_corrupted(rel, blkno, "%s", msg);
			out->last_removed = *qfam_page_last_removed(p);
		}
	}
	UnlockReleaseBuffer(buf);
}

/*
 * Reads of one fingerprint's pages in levels 0..nread-1, taken under one
 * metapage: if an unfinished merge in place has rewritten the target's
 * page, that page holds the sources' copies too, so they count nothing
 * there, as they will once the merge is installed (their applied_pos
 * stays what their pages say).
 */
void
qfam_reads_resolve(const QfamMeta *meta, QfamPageRead *reads, uint32 nread)
{
	uint32		target;

	if (meta->merge_target == 0 || meta->merge_target > nread)
		return;
	target = meta->merge_target - 1;
	if (!reads[target].merged_in)
		return;
	for (uint32 l = 0; l < Min((uint32) meta->merge_nsrc, nread); l++)
		if (l != target)
		{
			reads[l].count = 0;
			reads[l].last_removed = 0;
		}
}

/* The applied_pos of page `page` of level lv (0 if never written). */
uint64
qfam_page_applied(Relation rel, const QfamLevel *lv, uint64 page)
{
	Buffer		buf = ss_read_buffer_if_exists(rel, lv->base + (BlockNumber) page);
	uint64		applied = 0;

	if (!BufferIsValid(buf))
		return 0;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	if (!PageIsNew(BufferGetPage(buf)))
	{
		ss_page_check(rel, lv->base + (BlockNumber) page, BufferGetPage(buf),
					  SS_PAGE_QF_AREA);
		applied = SSPageGetOpaque(BufferGetPage(buf))->applied_pos;
	}
	UnlockReleaseBuffer(buf);
	return applied;
}

/* ---- consolidation ---- */

/*
 * A round writes up to QFAM_RECORD_PAGES level-0 pages per WAL record, with
 * the metapage's counters registered once when the record is finished:
 * registering the metapage with every page (one 8 kB copy in, one out, a
 * delta and a lock of the block every lookup reads) took a third of the
 * page copying of an in-memory round.  Pages of the open record stay
 * locked; the next page joins it only if it is in shared buffers already
 * (pinned without I/O, ss_pin_if_cached), else the record is finished
 * first, so no lock is held across another page's read.  Lock order:
 * level-0 pages in ascending block order (groups come sorted by
 * partition), then the metapage; the change log's consolidation lock
 * keeps every other writer of level 0 out, and readers hold one page at a
 * time.
 */
#define QFAM_RECORD_PAGES	(SS_XLOG_MAX_PAGES - 1)

typedef struct QfCons
{
	Relation	rel;
	const QfamState *st;
	QfamMeta	meta;			/* as installed, kept in step with our writes */
	/* the open WAL record: changed level-0 pages, locked */
	SSXLogState *state;
	int			npages;
	Buffer		bufs[QFAM_RECORD_PAGES];
	QfStats		before[QFAM_RECORD_PAGES];
	QfStats		after[QFAM_RECORD_PAGES];
} QfCons;

/*
 * Log the open record: its pages and the metapage's level-0 counters,
 * changed page by page as before.  Then unlock its pages.
 */
static void
qfam_cons_finish(QfCons *qc)
{
	Buffer		metabuf;
	QfamMeta   *m;

	if (qc->state == NULL)
		return;
	if (qc->npages == 0)
	{
		ss_xlog_abort(qc->state);
		qc->state = NULL;
		return;
	}
	m = ss_meta_register(qc->rel, SS_KIND_QF, qc->state, &metabuf);
	for (int i = 0; i < qc->npages; i++)
		qfam_meta_add_level(m, 0, &qc->before[i], &qc->after[i]);
	qc->meta.levels[0].items = m->levels[0].items;
	qc->meta.levels[0].total = m->levels[0].total;
	ss_xlog_finish(qc->state);
	UnlockReleaseBuffer(metabuf);
	for (int i = 0; i < qc->npages; i++)
		UnlockReleaseBuffer(qc->bufs[i]);
	qc->state = NULL;
	qc->npages = 0;
}

/*
 * Lock level-0 page blkno into the open record (finishing it first if it
 * is full or the page is not in shared buffers).
 */
static Page
qfam_cons_lock_page(QfCons *qc, const QfamLevel *lv, const QfGeom *g,
					BlockNumber blkno, Buffer *buf)
{
	Buffer		pin = InvalidBuffer;
	Page		page;

	/* not inside BufferIsValid: assert builds evaluate its argument again */
	if (qc->npages > 0 && qc->npages < QFAM_RECORD_PAGES)
		pin = ss_pin_if_cached(qc->rel, blkno);
	if (qc->npages > 0 && !BufferIsValid(pin))
		qfam_cons_finish(qc);
	if (qc->state == NULL)
		qc->state = ss_xlog_start(qc->rel);
	page = qfam_lock_level_page(qc->rel, qc->state, lv, false, g, blkno, buf);
	if (BufferIsValid(pin))
		ReleaseBuffer(pin);
	return page;
}

static void
qfam_record_key(Relation rel, const SSPendingHeader *hdr, const char *payload,
				SSPendingKey *key)
{
	if ((hdr->type != SS_PENDING_KEY && hdr->type != SS_PENDING_DELETE) ||
		hdr->len != sizeof(*key))
		ss_page_corrupted(rel, InvalidBlockNumber,
						  "A quotient filter change record has type %u and length %u.",
						  hdr->type, hdr->len);
	memcpy(key, payload, sizeof(*key));
}

/* A record's partition: the level-0 page of its fingerprint. */
static int
qfam_parts_of(const SSPendingHeader *hdr, const char *payload, uint32 *parts,
			  void *arg)
{
	QfCons	   *qc = arg;
	const QfamLevel *lv = &qc->meta.levels[0];
	SSPendingKey key;
	QfamMap		map;
	uint64		page;
	uint32		q;
	uint64		r;

	qfam_record_key(qc->rel, hdr, payload, &key);
	qfam_level_map(&qc->st->p, lv, &map);
	qfam_map_split(&map, key.hash.h1, &page, &q, &r);
	parts[0] = (uint32) page;
	return 1;
}

/*
 * The part of delete P (at log position pos) that level 0 could not
 * satisfy: owed copies removed from the older levels, newest first, one
 * WAL record per page that has copies, each stamping the page with
 * applied_pos = pos + 1 and the number it removed.  Level 0 is written
 * with applied_pos = pos before and applies P after, so a reader (or a
 * rerun after a crash) that finds an older page past pos knows exactly
 * what P removed there.  Pages are locked one at a time, then the
 * metapage.
 */
static void
qfam_delete_older(QfCons *qc, uint64 h1, uint64 pos, uint64 owed)
{
	for (uint32 l = 1; l < qc->meta.nlevels && owed > 0; l++)
	{
		const QfamLevel *lv = &qc->meta.levels[l];
		QfamPageRead pr;
		QfGeom		g;
		QfamMap		map;
		uint64		page;
		uint32		q;
		uint64		r;
		SSXLogState *state;
		Buffer		buf;
		Buffer		metabuf;
		Page		p;
		QfStats		before;
		QfStats		after;
		uint64		removed;
		QfamMeta   *m;

		if (lv->items == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		/* probe under a share lock first: most levels lack the key */
		qfam_level_read(qc->rel, &qc->meta, l, h1, &pr);
		if (pr.applied > pos)
		{
			/* done before a crash: the page says what it removed */
			owed -= Min(owed, pr.last_removed);
			continue;
		}
		if (pr.count == 0)
			continue;
		qfam_level_map(&qc->st->p, lv, &map);
		qfam_map_split(&map, h1, &page, &q, &r);
		qfam_level_geom(lv, &g);
		state = ss_xlog_start(qc->rel);
		p = qfam_lock_level_page(qc->rel, state, lv, true, &g,
								 lv->base + (BlockNumber) page, &buf);
		m = ss_meta_register(qc->rel, SS_KIND_QF, state, &metabuf);
		qf_area_stats(&g, SSPageGetData(p), &before);
		removed = qf_remove(&g, SSPageGetData(p), q, r, owed);
		qf_area_stats(&g, SSPageGetData(p), &after);
		SSPageGetOpaque(p)->applied_pos = pos + 1;
		*qfam_page_last_removed(p) = removed;
		qfam_meta_add_level(m, l, &before, &after);
		qc->meta.levels[l].items = m->levels[l].items;
		qc->meta.levels[l].total = m->levels[l].total;
		ss_xlog_finish(state);
		UnlockReleaseBuffer(metabuf);
		UnlockReleaseBuffer(buf);
		owed -= Min(owed, removed);
	}
}

/*
 * Make room in level 0 (qfam_make_room) and take the new layout.  Returns
 * false if level 0 changed shape (a quotient_filter grew): the round's
 * partitions are then stale and it must be run again.
 */
static bool
qfam_cons_make_room(QfCons *qc, bool grow)
{
	uint8		t0 = qc->meta.levels[0].t;

	qfam_make_room(qc->rel, qc->st, grow);
	if (!qfam_read_meta(qc->rel, &qc->meta))
		elog(ERROR, "quotient filter metapage of \"%s\" disappeared",
			 RelationGetRelationName(qc->rel));
	return qc->meta.levels[0].t == t0;
}

/* Room left in level 0 for the next chunk of records (ss_changelog.h). */
static int
qfam_chunk_room(Relation rel, void *arg)
{
	QfCons	   *qc = arg;

	/* a chunk's pages are logged before the next chunk (or the round's end) */
	qfam_cons_finish(qc);

	for (int tries = 0; tries < 2; tries++)
	{
		const QfamLevel *lv = &qc->meta.levels[0];
		QfamMap		map;
		double		room;

		qfam_level_map(&qc->st->p, lv, &map);
		room = qfam_max_load(&qc->st->p) * qfam_map_slots(&map) -
			(double) lv->items;

		if (room >= 1.0)
			return (int) Min(room, (double) (PG_INT32_MAX / 2));
		if (!qfam_cons_make_room(qc, false))
			return -1;
	}
	elog(ERROR, "quotient filter \"%s\" has no room in level 0 after making room",
		 RelationGetRelationName(rel));
	return -1;					/* keep compiler quiet */
}

/*
 * Apply the records of one level-0 page in log order (those before its
 * applied_pos were applied already).  Inserts and the part of a delete
 * that level 0 holds are applied in one pass, the page joining the open
 * WAL record (qfam_cons_lock_page); a delete that owes copies to older
 * levels ends the pass before it (qfam_delete_older), and a full page
 * ends it to make room, each after logging the open record.  Returns
 * false if the round must be run again.
 */
static bool
qfam_apply_group(Relation rel, uint32 part, const SSGroupEntry *entries,
				 int n, uint64 upto, void *arg)
{
	QfCons	   *qc = arg;
	bool	   *deep_done = palloc0(sizeof(bool) * Max(n, 1));
	int			i = 0;
	int			fulls = 0;

	while (i <= n)
	{
		const QfamLevel *lv = &qc->meta.levels[0];
		QfGeom		g;
		QfamMap		map;
		Buffer		buf;
		Page		page;
		char	   *area;
		uint64		applied;
		QfStats		before;
		QfStats		after;
		bool		full = false;
		bool		changed = false;
		uint64		deep_owed = 0;
		uint64		new_applied;

		CHECK_FOR_INTERRUPTS();
		qfam_level_geom(lv, &g);
		qfam_level_map(&qc->st->p, lv, &map);
		page = qfam_cons_lock_page(qc, lv, &g, lv->base + part, &buf);
		area = SSPageGetData(page);
		applied = SSPageGetOpaque(page)->applied_pos;
		qf_area_stats(&g, area, &before);
		for (; i < n; i++)
		{
			SSPendingKey key;
			uint64		pg;
			uint32		q;
			uint64		r;

			if (entries[i].pos < applied)
				continue;
			memcpy(&key, ss_group_payload(&entries[i]), sizeof(key));
			qfam_map_split(&map, key.hash.h1, &pg, &q, &r);
			if (entries[i].type == SS_PENDING_KEY)
			{
				/* QF_FULL leaves the area as it was before this insert */
				if (qf_insert(&g, area, q, r, (uint64) key.weight) != QF_OK)
				{
					full = true;
					break;
				}
				changed = true;
			}
			else
			{
				uint64		has = qf_count(&g, area, q, r);

				if (has < (uint64) key.weight && !deep_done[i] &&
					qc->meta.nlevels > 1)
				{
					deep_owed = (uint64) key.weight - has;
					break;
				}
				changed |= qf_remove(&g, area, q, r, (uint64) key.weight) > 0;
			}
		}
		qf_area_stats(&g, area, &after);
		new_applied = Max(applied, i < n ? entries[i].pos : upto);
		if (changed || new_applied != applied)
		{
			SSPageGetOpaque(page)->applied_pos = new_applied;
			qc->before[qc->npages] = before;
			qc->after[qc->npages] = after;
			qc->bufs[qc->npages++] = buf;
			/* the chunk's room is judged on counters kept in step */
			qc->meta.levels[0].items =
				qfam_counter_add(qc->meta.levels[0].items,
								 (int64) after.nitems - (int64) before.nitems);
			qc->meta.levels[0].total =
				qfam_counter_add(qc->meta.levels[0].total,
								 qfam_total_delta(before.total_count,
												  after.total_count));
		}
		else
		{
			ss_xlog_unregister(qc->state, buf);
			UnlockReleaseBuffer(buf);
		}
		if (i >= n)
			break;
		/* what follows locks other pages and the metapage */
		qfam_cons_finish(qc);
		if (deep_owed > 0)
		{
			SSPendingKey key;

			memcpy(&key, ss_group_payload(&entries[i]), sizeof(key));
			qfam_delete_older(qc, key.hash.h1, entries[i].pos, deep_owed);
			deep_done[i] = true;
			continue;
		}
		if (full)
		{
			/* an emptied level 0 that cannot take one insert is a bug */
			if (++fulls > QFAM_MAX_LEVELS + 64)
				elog(ERROR, "quotient filter \"%s\" keeps overflowing page %u of level 0",
					 RelationGetRelationName(rel), part);
			if (!qfam_cons_make_room(qc, true))
			{
				pfree(deep_done);
				return false;
			}
		}
	}
	pfree(deep_done);
	return true;
}

/*
 * Consolidate a round of committed inserts and deletes (ss_changelog.c):
 * grouped by level-0 page in chunks no larger than the room left in level
 * 0, so that a large round fills level 0 and makes room once per fill,
 * not once per page.  Counters change with the pages (the metapage is in
 * every WAL record of level-0 pages), so there are no round stats.
 */
bool
qfam_consolidate(SSConsolidation *c)
{
	QfCons		qc;
	QfamMap		map;
	bool		done;

	qc.rel = c->rel;
	qc.st = qfam_get_state(c->rel);
	qc.state = NULL;
	qc.npages = 0;
	if (!qfam_read_meta(c->rel, &qc.meta))
		elog(ERROR, "quotient filter metapage of \"%s\" disappeared",
			 RelationGetRelationName(c->rel));
	if (qc.meta.merge_target != 0)
	{
		/* a merge in place a crash or an error stopped: its sources are read-only */
		LockPage(c->rel, SS_METAPAGE_BLKNO, ExclusiveLock);
		if (qfam_read_meta(c->rel, &qc.meta))
			(void) qfam_finish_merge(c->rel, &qc.meta);
		UnlockPage(c->rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	}
	qfam_level_map(&qc.st->p, &qc.meta.levels[0], &map);
	done = ss_cons_by_partition(c, (uint32) map.npages,
								qfam_parts_of, qfam_apply_group,
								qfam_chunk_room, &qc);
	qfam_cons_finish(&qc);
	return done;
}

/*
 * Level 0 is full (or a page of it overflowed, grow = true): make room.
 *	quotient_filter: level 0 doubles (one remainder bit becomes a page bit).
 *	buffered QF: levels 0 and 1 merge into level 1, doubled if needed.
 *	cascade filter: levels 0..i merge into the smallest level i that holds
 *	them (level i has fanout^i times the slots of level 0).
 * Run by consolidation (under the change log's consolidation lock); takes
 * the page lock on block 0 exclusively, which qf_merge() holds in share
 * mode while it reads a source filter's levels.
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
	if (!qfam_read_meta(rel, &meta) || meta.merges != seen ||
		qfam_finish_merge(rel, &meta))
	{
		/* another merge made room, or the unfinished one did (level 0 is a source) */
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
		double		load = qfam_max_load(p);
		uint32		target;
		uint32		t;
		uint64		mult;
		int			exp;

		qfam_space(p, &mult, &exp);

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
				t = qfam_level_t(p, target, step);
				if (target >= meta.nlevels ||
					items <= load * qfam_level_slots(p, t, mult, exp))
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
		while (items > load * qfam_level_slots(p, t, mult, exp))
			t++;
		while (!qfam_merge_levels(rel, &meta, target + 1, target, t))
			t++;
	}
	UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
}

/* ---- admission of a committing batch ---- */

/*
 * The most fingerprints the filter may hold: 90% of the largest level its
 * fingerprint bits and QFAM_MAX_PAGE_BITS allow.  Below that no page is
 * expected to overflow (pages overflow past 95% of their own slots, qf.h),
 * so consolidation never needs a level that cannot exist.
 */
static double
qfam_max_items(const QfamParams *p)
{
	if (p->layout == QFAM_LAYOUT_SIZED)
	{
		/* the most doublings that keep a remainder bit and the page limit */
		uint64		mult;
		int			exp;

		qfam_space(p, &mult, &exp);
		for (int t = (int) p->fp_bits - 1; t >= 0; t--)
		{
			uint64		pages;
			uint32		nhome;

			qfam_sized_level(p, (uint32) t, &pages, &nhome);
			if (pages <= ((uint64) 1 << QFAM_MAX_PAGE_BITS))
				return floor(0.9 * ldexp((double) mult, exp - ((int) p->fp_bits - t)));
		}
		return 0;
	}
	for (int t = (int) p->fp_bits - 1; t >= 1; t--)
	{
		QfGeom		g;
		int			rbits = (int) p->fp_bits - t;

		if (rbits > QF_MAX_RBITS || !qf_geom_init(&g, rbits, QF_PAGE_AREA_BYTES))
			continue;
		if (t - Min(qf_home_bits(g.nhome), t) > QFAM_MAX_PAGE_BITS)
			continue;
		return floor(0.9 * ldexp(1.0, t));
	}
	return 0;
}

/* Is fingerprint h1 in some level of the filter? */
static bool
qfam_levels_have(Relation rel, const QfamMeta *meta, uint64 h1)
{
	for (uint32 l = 0; l < meta->nlevels; l++)
	{
		QfamPageRead pr;

		qfam_level_read(rel, meta, l, h1, &pr);
		if (pr.count > 0)
			return true;
	}
	return false;
}

/*
 * Can the filter take this transaction's inserts (SSStructure.admit)?
 * Fast bound: its fingerprints, the records waiting in the log and the
 * batch's records (then its inserts) within qfam_max_items.  Otherwise, with final, count the
 * batch's distinct fingerprints not yet in the levels, in memory bounded
 * by the room left (and streamsketch.pending_memory), and refuse with
 * 54000 if they do not fit: the transaction then aborts, leaving no trace.
 */
bool
qfam_admit(Relation rel, uint64 log_records, bool final)
{
	QfamState  *st = qfam_get_state(rel);
	QfamMeta	meta;
	double		max_items = qfam_max_items(&st->p);
	double		items = 0;
	double		room;
	int64		inserts = 0;
	int64		fresh = 0;
	SSPendingIter it;
	SSPendingHeader hdr;
	char	   *payload;
	uint64		mult;
	int			exp;
	HTAB	   *seen = NULL;
	long		max_seen;
	uint64		log_bytes;

	if (!qfam_read_meta(rel, &meta))
		return true;
	qfam_space(&st->p, &mult, &exp);
	for (uint32 l = 0; l < meta.nlevels; l++)
		items += (double) meta.levels[l].items;
	room = max_items - items - (double) log_records;
	/* the batch's records bound its inserts, without reading them */
	if ((double) ss_pending_count(RelationGetRelid(rel), &log_bytes) <= room)
		return true;
	ss_pending_iter_begin(&it, RelationGetRelid(rel));
	while (ss_pending_iter_next(&it, &hdr, &payload))
		inserts += hdr.type == SS_PENDING_KEY;
	ss_pending_iter_end(&it);
	if ((double) inserts <= room)
		return true;
	if (!final)
		return false;

	max_seen = (long) Min(Max(room, 0.0) + 1,
						  (double) ss_pending_memory_kb * 1024 / 64);
	if (room >= 1)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(uint64);
		ctl.hcxt = CurrentMemoryContext;
		seen = hash_create("quotient filter admission", Min(max_seen, 1024),
						   &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		while (ss_pending_iter_next(&it, &hdr, &payload) &&
			   (double) fresh <= room && fresh < max_seen)
		{
			SSPendingKey key;
			uint64		fp;
			bool		found;

			CHECK_FOR_INTERRUPTS();
			if (hdr.type != SS_PENDING_KEY)
				continue;
			memcpy(&key, payload, sizeof(key));
			fp = qf_space_y(key.hash.h1, mult, exp);
			(void) hash_search(seen, &fp, HASH_FIND, &found);
			if (found || qfam_levels_have(rel, &meta, key.hash.h1))
				continue;
			(void) hash_search(seen, &fp, HASH_ENTER, NULL);
			fresh++;
		}
		ss_pending_iter_end(&it);
		hash_destroy(seen);
		if ((double) fresh <= room && fresh < max_seen)
			return true;
	}
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("quotient filter \"%s\" is full", RelationGetRelationName(rel)),
			 errdetail("It holds %.0f fingerprints and " UINT64_FORMAT " changes wait in its change log; its %u-bit fingerprints allow at most %.0f, and this transaction adds " INT64_FORMAT " inserts.",
					   items, log_records, (uint32) qfam_space_bits(mult, exp),
					   max_items, inserts),
			 errhint("Create a filter with a larger capacity or a smaller false-positive rate.")));
	return false;				/* keep compiler quiet */
}
