/*-------------------------------------------------------------------------
 *
 * qfam_merge.c
 *	  Merging levels of a quotient filter: the resize of a quotient_filter,
 *	  the flush of a buffered quotient filter and the cascade filter's
 *	  merges are all "merge levels 0..n-1 into a level of 2^t slots".
 *
 * Every level keeps its fingerprints in increasing order (the page is the
 * top bits of the fingerprint), so a k-way merge of level cursors yields
 * the merged multiset in order, and a QF builder writes each target page
 * sequentially: one pass over the sources, one sequential write of the
 * target, as in the paper.  A target level that exists with the same size
 * is rewritten in place, front to back (qfam_merge_levels says how readers
 * and a crash see it halfway); any other is written into blocks no live
 * level uses (the level's spare run, or new blocks after everything
 * reserved so far).  Then one metapage update installs it and empties the
 * merged source levels by bumping their epochs.
 *
 * Buffers: a merge reads its source levels once, front to back, and
 * writes its target once, so it reads through the backend's bulk-read
 * ring and writes through its bulk-write ring (ss_page.c), as COPY and a
 * sequential scan do, instead of sweeping shared_buffers: a cascade
 * filter's merge of levels larger than shared_buffers leaves the rest of
 * the cache (other tables, and the filter's own level 0 and metapage)
 * where it was.  A target rewritten in place is read through the write
 * ring too.  Level 0 of a buffered or cascade filter, the RAM level that
 * is emptied in place and refilled by every insert, is read without a
 * ring, and a target level 0 (a quotient_filter's only level, which
 * inserts update in place) is written without one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ss_xlog.h"
#include "miscadmin.h"
#include "qfam.h"
#include "ss_changelog.h"
#include "ss_progress.h"
#include "ss_test.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"

/* Load the next live page of the cursor's level; false at the end. */
static bool
qfam_cursor_load(QfamCursor *c)
{
	while (c->page < c->npages)
	{
		BlockNumber blkno = c->lv.base + (BlockNumber) c->page;
		bool		live = false;

		CHECK_FOR_INTERRUPTS();
		if (blkno < c->nblocks)
		{
			Buffer		buf = ReadBufferExtended(c->rel, MAIN_FORKNUM, blkno,
												 RBM_NORMAL, c->strategy);
			QfamLevel	lv = c->lv;

			/* a target page a merge in place has rewritten has its new epoch */
			if (c->view && c->level == c->view->target && c->page < c->view->done)
				lv.epoch = c->view->epoch;
			LockBuffer(buf, BUFFER_LOCK_SHARE);
			if (qfam_page_valid(c->rel, blkno, BufferGetPage(buf), &lv,
								c->merged, true))
			{
				memcpy(c->area, SSPageGetData(BufferGetPage(buf)), c->g.area_bytes);
				live = true;
			}
			UnlockReleaseBuffer(buf);
		}
		if (live)
		{
			const char *msg;

			/* a merge reads the whole area anyway; O(nslots) like the copy */
			if (!qf_area_check(&c->g, c->area, &msg))
				ss_page_corrupted(c->rel, blkno, "%s", msg);
			qf_iter_init(&c->iter, &c->g, c->area);
			return true;
		}
		c->page++;
	}
	return false;
}

/*
 * The ring through which level `level` of a filter of kind `kind` is read
 * from front to back: none for the RAM level (level 0 of a buffered or
 * cascade filter), the bulk-read ring otherwise.
 */
BufferAccessStrategy
qfam_level_read_ring(uint32 kind, uint32 level)
{
	if (level == 0 && kind != QFAM_KIND_QF)
		return NULL;
	return ss_bulk_read_ring();
}

/*
 * Is block blkno a level page of epoch `epoch`?  A missing or never
 * written block is not.
 */
static bool
qfam_page_has_epoch(Relation rel, BlockNumber blkno, uint16 epoch)
{
	Buffer		buf = ss_read_buffer_if_exists(rel, blkno);
	bool		has = false;

	if (!BufferIsValid(buf))
		return false;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	if (!PageIsNew(BufferGetPage(buf)))
	{
		ss_page_check(rel, blkno, BufferGetPage(buf), SS_PAGE_QF_AREA);
		has = SSPageGetOpaque(BufferGetPage(buf))->epoch == epoch;
	}
	UnlockReleaseBuffer(buf);
	return has;
}

/* The merge in place that meta records, if any, as it starts: none rewritten. */
static void
qfam_merge_view_started(const QfamMeta *meta, QfamMergeView *view)
{
	memset(view, 0, sizeof(*view));
	if (meta->merge_target == 0)
		return;
	view->active = true;
	view->target = meta->merge_target - 1;
	view->nsrc = meta->merge_nsrc;
	view->epoch = meta->merge_epoch;
	qfam_level_map(&meta->params, &meta->levels[view->target], &view->tmap);
}

/*
 * The merge in place that meta records, if any, and how far it got.  The
 * target's pages are rewritten front to back, each page's WAL record
 * before the next page is written, so the pages of the new epoch are a
 * prefix of the run, also after a crash (redo replays a prefix of the
 * records, and no page reaches disk before its record): a bisection finds
 * its end.  The caller keeps merges out (the page lock on block 0).
 */
void
qfam_merge_view(Relation rel, const QfamMeta *meta, QfamMergeView *view)
{
	const QfamLevel *lv;
	uint64		lo = 0;
	uint64		hi;

	qfam_merge_view_started(meta, view);
	if (!view->active)
		return;
	lv = &meta->levels[view->target];
	hi = view->tmap.npages;
	while (lo < hi)
	{
		uint64		mid = lo + (hi - lo) / 2;

		CHECK_FOR_INTERRUPTS();
		if (qfam_page_has_epoch(rel, lv->base + (BlockNumber) mid, view->epoch))
			lo = mid + 1;
		else
			hi = mid;
	}
	view->done = lo;
}

/*
 * A cursor over level `level` of meta's levels.  With an active view (a
 * merge in place unfinished), the target's rewritten pages are read at
 * their new epoch, and a source's fingerprints that those pages hold are
 * skipped: every fingerprint is yielded once.
 */
void
qfam_cursor_init(QfamCursor *c, Relation rel, const QfamMeta *meta,
				 uint32 level, const QfamMergeView *view,
				 BufferAccessStrategy strategy)
{
	const QfamLevel *lv = &meta->levels[level];
	bool		rewritten = false;

	c->rel = rel;
	c->strategy = strategy;
	c->lv = *lv;
	c->level = level;
	c->merged = level > 0;
	c->view = NULL;
	if (view && view->active && level < view->nsrc)
	{
		c->view = view;
		rewritten = level == view->target && view->done > 0;
	}
	c->nblocks = RelationGetNumberOfBlocks(rel);
	c->page = 0;
	qfam_level_map(&meta->params, lv, &c->map);
	c->npages = c->map.npages;
	c->valid = false;
	qfam_level_geom(lv, &c->g);
	c->area = palloc(BLCKSZ);
	if (lv->items == 0 && lv->total == 0 && !rewritten)
		c->page = c->npages;	/* empty level */
	else if (qfam_cursor_load(c))
		c->valid = true;
	if (c->valid)
		c->valid = qfam_cursor_next(c);
}

/* Advance to the next fingerprint; false at the end. */
bool
qfam_cursor_next(QfamCursor *c)
{
	uint32		q;
	uint64		r;

	for (;;)
	{
		uint64		tpage;
		uint32		tq;
		uint64		tr;

		if (c->page >= c->npages)
			return c->valid = false;
		while (!qf_iter_next(&c->iter, &q, &r, &c->count))
		{
			c->page++;
			if (!qfam_cursor_load(c))
				return c->valid = false;
		}
		c->fp = qfam_map_join(&c->map, c->page, q, r);
		if (!c->view || c->level == c->view->target)
			break;
		/* a source's copy that a rewritten target page holds already */
		qfam_map_split(&c->view->tmap, c->fp, &tpage, &tq, &tr);
		if (tpage >= c->view->done)
			break;
	}
	return c->valid = true;
}

void
qfam_cursor_end(QfamCursor *c)
{
	pfree(c->area);
}

/*
 * Write a built area as page blkno of the target level (full image), with
 * the applied_pos of the level-0 page whose fingerprints it covers.
 */
static void
qfam_write_page(Relation rel, BlockNumber blkno, const char *area, Size size,
				uint16 epoch, uint64 applied, BufferAccessStrategy strategy)
{
	/*
	 * A full image replaces the page: its old contents are not read.  It
	 * checks for interrupts once per target page: the tail of a merge (and
	 * all of the resize of a sparse level) writes pages without loading a
	 * source page, and nothing is visible before the metapage install.
	 */
	StaticAssertStmt(QFAM_LEVEL_DATA_SIZE == SS_PAGE_DATA_SIZE,
					 "a level's page is a whole page");
	ss_write_page_with(rel, blkno, SS_PAGE_QF_AREA, area, size, epoch, applied,
					   SS_WRITE_FULL, strategy);
}

/*
 * What output page `page` of the target has applied: what the level-0
 * page covering its fingerprints has (every deeper source page lies in the
 * range of one level-0 page and has applied no more; qfam_consolidate.c).
 */
static uint64
merged_page_applied(Relation rel, const QfamLevel *lv0, uint64 per_page0,
					uint64 page, uint64 *cache_page, uint64 *cache_applied)
{
	uint64		p0 = page / per_page0;

	if (p0 != *cache_page)
	{
		*cache_applied = qfam_page_applied(rel, lv0, p0);
		*cache_page = p0;
	}
	return *cache_applied;
}

/*
 * Does each page of level `outer` cover whole pages of level `inner`, the
 * same number `per` of them?  A page covers nhome << rbits fingerprints
 * (the last page of a level may be partly used), so inner page i lies in
 * outer page i / per.
 */
static bool
qfam_pages_nest(const QfamMap *outer, const QfamMap *inner, uint64 *per)
{
	int			shift = outer->rbits - inner->rbits;
	uint64		width;

	/* a ratio past 2^32 is more pages than a level has */
	if (shift < 0 || shift >= 48 || inner->nhome == 0)
		return false;
	width = (uint64) outer->nhome << shift;
	if (width % inner->nhome != 0)
		return false;
	*per = width / inner->nhome;
	return true;
}

/*
 * Check every live page of the source levels before a merge reserves a new
 * run for its target: a damaged source found halfway would leave the run
 * reserved (until VACUUM FULL), and every later attempt would reserve
 * another, growing the file without bound.  Reads the sources twice; a
 * merge is rare next to the inserts that lead to it.
 */
static void
qfam_check_sources(Relation rel, const QfamMeta *meta, uint32 nsrc,
				   const QfamMergeView *view)
{
	QfamCursor	c;

	for (uint32 i = 0; i < Min(nsrc, meta->nlevels); i++)
	{
		qfam_cursor_init(&c, rel, meta, i, view,
						 qfam_level_read_ring(meta->params.kind, i));
		/* qfam_cursor_load checks each live page it loads */
		while (c.valid && c.page < c.npages)
		{
			c.page++;
			if (!qfam_cursor_load(&c))
				break;
		}
		qfam_cursor_end(&c);
	}
}

/*
 * Does a test stop this merge in place after `written` of its npages
 * target pages (streamsketch.test_qf_merge_stop)?  Halfway, it crashes the
 * server, raises an error, or returns true: the next page overflows.
 */
static bool
qfam_test_stop_merge(Relation rel, uint64 written, uint64 npages)
{
	if (qfam_merge_stop.value == QFAM_STOP_NONE || written != npages / 2)
		return false;
	ss_test_crash(&qfam_merge_stop, rel, QFAM_STOP_CRASH);
	if (qfam_merge_stop.value == QFAM_STOP_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("%s: stopping a merge in place of \"%s\"",
						qfam_merge_stop.setting, RelationGetRelationName(rel))));
	return true;
}

/*
 * Can the merge write its target level tl over level `target`'s own pages?
 * Only a level of the same size and page format (an existing level of the
 * earlier page layouts is rewritten out of place, in the current one), and
 * never level 0: its pages are those a quotient_filter's inserts update.
 */
static bool
qfam_merge_in_place(const QfamMeta *meta, uint32 target, const QfamLevel *tl)
{
	const QfamLevel *lv;

	if (target == 0 || target >= meta->nlevels)
		return false;
	lv = &meta->levels[target];
	return lv->t == tl->t && lv->layout == tl->layout &&
		lv->page_bits == tl->page_bits && lv->slot_bits == tl->slot_bits &&
		lv->rbits == tl->rbits;
}

/*
 * Record in the metapage that a merge of the levels below nsrc into level
 * `target` is written in place from now on, with the target's next epoch:
 * a reader that took the levels before sees them moved
 * (qfam_levels_moved) and looks again rather than taking a rewritten page
 * for damage.
 */
static void
qfam_start_in_place(Relation rel, QfamMeta *meta, uint32 nsrc, uint32 target,
					uint16 epoch)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		buf;
	QfamMeta   *m = ss_meta_register(rel, SS_KIND_QF, state, &buf);

	m->merge_target = (uint16) (target + 1);
	m->merge_nsrc = (uint16) nsrc;
	m->merge_epoch = epoch;
	*meta = *m;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

/*
 * Merge levels 0..nsrc-1 into level `target` (< nsrc, or == nlevels for a
 * new level) with 2^target_t slots.  Returns false if a target page
 * overflows (the caller retries with a larger target_t).  The caller
 * holds the exclusive page lock on block 0 and the change log's
 * consolidation lock; meta is updated to the installed state.
 *
 * An existing level of the same size is rewritten in place, page by page
 * (qfam_merge_in_place): the metapage first records the merge, each
 * rewritten page gets the level's next epoch, and readers count a
 * rewritten page's fingerprints there only, not in the sources
 * (qfam_reads_resolve, the cursors' view).  A crash, an error or an
 * overflow leaves that merge recorded and the level partly rewritten,
 * which reads the same; only the recorded merge may run next
 * (qfam_finish_merge), resuming where it stopped, or out of place into a
 * larger level after an overflow.  Any other target is written into
 * blocks no live level uses (its spare run, or new blocks after everything
 * reserved so far), and a crash before the install leaves the filter as it
 * was, with the run as dead space.  Either way one metapage update
 * installs the target and empties the other sources by bumping their
 * epochs.
 */
bool
qfam_merge_levels(Relation rel, QfamMeta *meta, uint32 nsrc, uint32 target,
				  uint32 target_t)
{
	QfamCursor *cursors;
	QfamLevel	tl;
	QfGeom		g;
	QfamMap		tmap;
	QfamMap		map0;
	uint64		per_page0;
	QfBuilder	builder;
	char	   *area;
	uint64		npages;
	uint64		cur_page = 0;
	BlockNumber base;
	bool		use_spare;
	bool		inplace;
	bool		ok = true;
	int64		items = 0;
	int64		total = 0;
	Buffer		buf;
	SSXLogState *state;
	QfamLevel	lv0 = meta->levels[0];
	uint64		cache_page = PG_UINT64_MAX;
	uint64		cache_applied = 0;
	BufferAccessStrategy wring = target > 0 ? ss_bulk_write_ring() : NULL;
	QfamMergeView view;

	Assert(target < QFAM_MAX_LEVELS && target <= meta->nlevels);
	/* only existing levels are sources (a new target level has none) */
	nsrc = Min(nsrc, meta->nlevels);
	qfam_level_shape(&meta->params, &tl, target_t);
	qfam_level_geom(&tl, &g);
	qfam_level_map(&meta->params, &tl, &tmap);
	qfam_level_map(&meta->params, &lv0, &map0);
	npages = tmap.npages;

	/*
	 * Every target page must lie within one level-0 page (its applied_pos
	 * is that page's): a level-0 page covers a whole number per_page0 of
	 * target pages' shares of the fingerprint space (nhome << rbits each).
	 */
	if (!qfam_pages_nest(&map0, &tmap, &per_page0) || tl.t < lv0.t)
		elog(ERROR, "merged level of " UINT64_FORMAT " pages does not nest level 0's " UINT64_FORMAT,
			 npages, map0.npages);

	tl.epoch = (uint16) (target < meta->nlevels ? meta->levels[target].epoch + 1 : 1);
	if (tl.epoch == 0)
		tl.epoch = 1;
	inplace = qfam_merge_in_place(meta, target, &tl);
	if (meta->merge_target != 0)
	{
		/* the unfinished merge in place, resumed or moved out of place */
		if (meta->merge_target != target + 1 || meta->merge_nsrc != nsrc)
			elog(ERROR, "merge into level %u requested while the merge of %u levels into level %u is unfinished",
				 target, (uint32) meta->merge_nsrc, (uint32) meta->merge_target - 1);
		if (inplace && meta->merge_epoch != tl.epoch)
			elog(ERROR, "merge in place into level %u has epoch %u, the level's next is %u",
				 target, (uint32) meta->merge_epoch, (uint32) tl.epoch);
		qfam_merge_view(rel, meta, &view);
	}
	else
	{
		if (inplace)
			qfam_start_in_place(rel, meta, nsrc, target, tl.epoch);
		qfam_merge_view_started(meta, &view);
	}

	/* where to write: in place, the spare run if it has the right size, or new blocks */
	use_spare = !inplace && target < meta->nlevels &&
		meta->levels[target].alt_base != InvalidBlockNumber &&
		meta->levels[target].t == target_t;
	if (!inplace && !use_spare)
		qfam_check_sources(rel, meta, nsrc, &view);
	if (inplace)
		base = meta->levels[target].base;
	else if (use_spare)
		base = meta->levels[target].alt_base;
	else
		base = ss_log_alloc_run(rel, (BlockNumber) npages);

	cursors = palloc(sizeof(QfamCursor) * Max(nsrc, 1));
	area = palloc(BLCKSZ);
	/*
	 * A target rewritten in place is read through the ring it is written
	 * through: each page, read then rewritten, stays in one ring buffer,
	 * which the write ring writes out when it comes round (a bulk-read
	 * ring would give a dirtied buffer up to shared_buffers at large).
	 */
	for (uint32 i = 0; i < nsrc; i++)
		qfam_cursor_init(&cursors[i], rel, meta, i, &view,
						 inplace && i == target ? wring :
						 qfam_level_read_ring(meta->params.kind, i));

	qf_builder_init(&builder, &g, area);
	for (;;)
	{
		uint64		fp = PG_UINT64_MAX;
		uint64		count = 0;
		bool		any = false;
		uint64		page;
		uint32		q;
		uint64		r;

		/* the smallest fingerprint among the cursors, counts summed */
		for (uint32 i = 0; i < nsrc; i++)
			if (cursors[i].valid && (!any || cursors[i].fp < fp))
			{
				fp = cursors[i].fp;
				any = true;
			}
		if (any)
		{
			for (uint32 i = 0; i < nsrc; i++)
				while (cursors[i].valid && cursors[i].fp == fp)
				{
					count = (count + cursors[i].count < count) ? PG_UINT64_MAX :
						count + cursors[i].count;
					qfam_cursor_next(&cursors[i]);
				}
			qfam_map_split(&tmap, fp, &page, &q, &r);
		}
		else
			page = npages;		/* the rest of the target, down to empty pages */
		/* the pages before fp's: the one built, then empty ones */
		while (cur_page < page)
		{
			/* a page rewritten before a crash or an overflow is read, not written */
			if (!inplace || cur_page >= view.done)
				qfam_write_page(rel, base + (BlockNumber) cur_page, area,
								g.area_bytes, tl.epoch,
								merged_page_applied(rel, &lv0, per_page0, cur_page,
													&cache_page, &cache_applied),
								wring);
			else
				CHECK_FOR_INTERRUPTS();
			cur_page++;
			ss_progress_report("merging levels", "pages", (int64) cur_page,
							   (int64) npages);
			qf_builder_init(&builder, &g, area);
			if (inplace && cur_page > view.done &&
				qfam_test_stop_merge(rel, cur_page, npages))
			{
				ok = false;
				break;
			}
		}
		if (!any || !ok)
			break;
		if (qf_builder_add(&builder, q, r, count) != QF_OK)
		{
			ok = false;
			break;
		}
		items++;
		total = (total + (int64) Min(count, (uint64) PG_INT64_MAX) < total) ?
			PG_INT64_MAX : total + (int64) Min(count, (uint64) PG_INT64_MAX);
	}
	for (uint32 i = 0; i < nsrc; i++)
		qfam_cursor_end(&cursors[i]);
	pfree(cursors);
	pfree(area);
	if (!ok)
		return false;

	/* install: one metapage record */
	tl.base = base;
	tl.alt_base = InvalidBlockNumber;
	if (inplace)
		tl.alt_base = meta->levels[target].alt_base;
	else if (target < meta->nlevels && meta->levels[target].t == target_t)
		tl.alt_base = meta->levels[target].base;	/* old run becomes spare */
	tl.items = items;
	tl.total = total;
	state = ss_xlog_start(rel);
	{
		QfamMeta   *m = ss_meta_register(rel, SS_KIND_QF, state, &buf);

		for (uint32 i = 0; i < nsrc; i++)
		{
			if (i == target)
				continue;
			/* emptied in place: its pages become stale by the epoch */
			m->levels[i].items = 0;
			m->levels[i].total = 0;
			m->levels[i].epoch = (uint16) (m->levels[i].epoch + 1 == 0 ? 1 :
										   m->levels[i].epoch + 1);
		}
		m->levels[target] = tl;
		if (target >= m->nlevels)
			m->nlevels = target + 1;
		m->merge_target = 0;
		m->merge_nsrc = 0;
		m->merge_epoch = 0;
		m->merges++;
		*meta = *m;
	}
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
	return true;
}

/*
 * Finish the merge in place that meta records, if any (after a crash, an
 * error or an overflow stopped it): before anything else writes the
 * levels.  The caller holds what qfam_merge_levels needs.  Returns whether
 * there was one; meta is updated.
 */
bool
qfam_finish_merge(Relation rel, QfamMeta *meta)
{
	uint32		target;
	uint32		t;

	if (meta->merge_target == 0)
		return false;
	target = meta->merge_target - 1;
	t = meta->levels[target].t;
	while (!qfam_merge_levels(rel, meta, meta->merge_nsrc, target, t))
		t++;
	return true;
}
