/*-------------------------------------------------------------------------
 *
 * lert_consolidate.c
 *	  Consolidation of a LERT: committed observations, in log order, go
 *	  through level 0 and the shuffle-merges exactly as the sequential
 *	  algorithm of lert_core.h runs over the committed stream.
 *
 * A round of one cone (lert_lane_run, under the cone's lock: lert_lanes.c)
 * reads the committed records from the cone's log position in log order.
 * Level-0 pages are copied into backend memory when first touched and
 * changed there; a flush of a cone (lert_merge.c) reads its level 0 from
 * that copy.  Every install of the metapage (a merge, the creation of a
 * cone's level 0, a checkpoint) first writes the reports made so far
 * beyond the valid ones, then in one record makes them valid and
 * "settles" the log position: the metapage then holds every cone's
 * level-0 entry count as of that position.  A checkpoint (the end of the
 * round, or when the copies exceed the consolidation memory) settles,
 * then writes the changed level-0 pages back, each marked with the log
 * position it has applied up to.
 *
 * A round redone after a crash or an error therefore finds each level-0
 * page as of some position at or after the round's start: it skips the
 * records a page has applied, and for records before the settled position
 * it neither counts a new entry nor makes a report (both are already in
 * the metapage).  A page that was not written back sees the same records
 * in the same order as the first time, so every decision the redo makes
 * (a page too full, a report) is the one made the first time; flushes the
 * first attempt installed have moved their cone past those records.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/async.h"
#include "lert.h"
#include "lert_consolidate.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* ---- level-0 pages in backend memory ---- */

/*
 * Forget every copy.  The copies live in a context of their own, reset
 * here: a round spanning many checkpoints would otherwise keep each
 * checkpoint's copies until its end, without bound.
 */
static void
round_pages_reset(LertRound *r)
{
	HASHCTL		ctl;

	if (r->pages_cxt == NULL)
		r->pages_cxt = AllocSetContextCreate(r->cxt, "lert level-0 copies",
											 ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(r->pages_cxt);	/* the hash table too */
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(BlockNumber);
	ctl.entrysize = sizeof(LertL0Page);
	ctl.hcxt = r->pages_cxt;
	r->pages = hash_create("lert level-0 pages", 256, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	r->npages_cached = 0;
}

/* The copy of level-0 page `page` of a cone, read in when first needed. */
LertL0Page *
lert_round_page(LertRound *r, uint32 cone, uint32 page)
{
	const LertCone *cn = &r->meta.cones[cone];
	BlockNumber blkno = cn->level0.start + page;
	LertL0Page *pg;
	bool		found;

	Assert(page < cn->level0.npages);
	pg = hash_search(r->pages, &blkno, HASH_ENTER, &found);
	if (!found)
	{
		pg->cone = cone;
		pg->dirty = false;
		pg->area = MemoryContextAlloc(r->pages_cxt, SS_PAGE_DATA_SIZE);
		r->npages_cached++;
		lert_read_page_owned(r->rel, blkno, SS_PAGE_LERT_LEVEL0,
							 cn->level0_gen, pg->area, NULL);
		if (!lert_l0_check(pg->area, SS_PAGE_DATA_SIZE))
			ss_page_corrupted(r->rel, blkno, "The LERT level-0 page's entries are out of order or out of bounds.");
	}
	return pg;
}

/* Forget the copies of a cone's level 0 (its extent was just replaced). */
void
lert_round_forget_cone(LertRound *r, uint32 cone)
{
	HASH_SEQ_STATUS seq;
	LertL0Page *pg;

	hash_seq_init(&seq, r->pages);
	while ((pg = hash_seq_search(&seq)) != NULL)
	{
		if (pg->cone != cone)
			continue;
		pfree(pg->area);
		(void) hash_search(r->pages, &pg->blkno, HASH_REMOVE, NULL);
		r->npages_cached--;
	}
}

/* ---- reports ---- */

void
lert_round_add_report(LertRound *r, const LertReport *rep, uint64 fp,
					  const char *key, uint32 keylen)
{
	LertReportRec rec;
	static const char zeros[8] = {0};

	memset(&rec, 0, sizeof(rec));
	rec.reported_pos = rep->position;
	rec.count = rep->count;
	rec.first_pos = rep->first_pos;
	rec.at = GetCurrentTimestamp();
	rec.fp = fp;
	rec.keylen = keylen;
	appendBinaryStringInfo(&r->reports, (const char *) &rec, sizeof(rec));
	if (keylen > 0)
		appendBinaryStringInfo(&r->reports, key, keylen);
	appendBinaryStringInfo(&r->reports, zeros, TYPEALIGN(8, keylen) - keylen);
	r->npending++;
}

/* ---- installs ---- */

/*
 * NOTIFY the table's channel of every report just made valid, with the
 * key as text; delivered when the consolidating transaction commits.
 */
static void
round_notify(LertRound *r)
{
	Oid			outfunc;
	bool		isvarlena;
	int			off = 0;

	getTypeOutputInfo(r->st->keytype, &outfunc, &isvarlena);
	while (off < r->reports.len)
	{
		const LertReportRec *rec = (const LertReportRec *) (r->reports.data + off);
		Datum		k = lert_key_datum(r->st, rec->fp, (const char *) (rec + 1),
									   rec->keylen);

		Async_Notify(r->meta.params.channel, OidOutputFunctionCall(outfunc, k));
		off += (int) (sizeof(LertReportRec) + TYPEALIGN(8, rec->keylen));
	}
}

/*
 * Install the round's cone (its descriptor and free extents) and its
 * share of what cones share, settled at log position `settle` (every
 * record before it has its reports and its entry count in this record),
 * in one metapage record.  Under the space lock: the round's free extents
 * go to the pool (lert_pool_give_back), the pending reports are written after
 * the valid ones of the metapage as it is now (a new report extent comes
 * from the file's end: lert_reports_append), the counters take the
 * round's increments.  Afterwards
 * the round's copy lists no free extent (with one cone, the metapage's
 * list again).  The log part and stream_pos are the storage
 * layer's (stream_pos moves with the log head, lert_add_stats); the other
 * cones are their rounds'.
 */
void
lert_round_install(LertRound *r, uint64 settle)
{
	SSXLogState *state;
	Buffer		buf;
	LertMeta   *m;
	LertMeta   *cur = r->shared;
	LertCone   *cn = &r->meta.cones[r->cone];

	cn->settled_pos = Max(cn->settled_pos, settle);
	cn->level0_entries = r->entries[r->cone];

	LockPage(r->rel, LERT_SPACE_LOCK, ExclusiveLock);
	if (!lert_read_meta(r->rel, cur))
		elog(ERROR, "LERT \"%s\" has no metapage", RelationGetRelationName(r->rel));
	cur->cones[r->cone] = *cn;
	lert_pool_give_back(r, cur);
	lert_reports_append(r->rel, cur, r->reports.data, r->reports.len,
						r->npending);
	if (r->npending > 0)
		lert_test_crash(r->rel, LERT_CRASH_REPORTS_WRITTEN);
	cur->nreports += r->npending;
	r->reports_made += r->npending;
	cur->merges += r->meta.merges - r->merges_installed;
	cur->point_queries += r->meta.point_queries - r->queries_installed;
	cur->max_keylen = Max(cur->max_keylen, r->meta.max_keylen);

	state = ss_xlog_start(r->rel);
	m = ss_meta_register(r->rel, SS_KIND_LERT, state, &buf);
	m->nreports = cur->nreports;
	m->nreport_ext = cur->nreport_ext;
	memcpy(m->report_ext, cur->report_ext, sizeof(m->report_ext));
	m->report_tail = cur->report_tail;
	m->merges = cur->merges;
	m->point_queries = cur->point_queries;
	m->max_keylen = cur->max_keylen;
	m->cones[r->cone] = cur->cones[r->cone];
	lert_meta_set_free(m, cur);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
	UnlockPage(r->rel, LERT_SPACE_LOCK, ExclusiveLock);

	r->meta.nfree = 0;
	lert_copy_overflow_reset(&r->meta);
	if (r->meta.params.ncones == 1)
	{
		r->meta.nfree = cur->nfree;
		memcpy(r->meta.free_ext, cur->free_ext, sizeof(r->meta.free_ext));
	}
	r->meta.nreports = cur->nreports;
	r->meta.merges = r->merges_installed = cur->merges;
	r->meta.point_queries = r->queries_installed = cur->point_queries;
	if (r->meta.params.channel[0] != '\0')
		round_notify(r);
	resetStringInfo(&r->reports);
	r->npending = 0;
	r->changed = false;
}

/*
 * Settle at `pos`, then write every changed level-0 page back as having
 * applied the records before pos, and forget the copies.
 */
static void
round_checkpoint(LertRound *r, uint64 pos)
{
	HASH_SEQ_STATUS seq;
	LertL0Page *pg;
	bool		wrote = false;

	if (r->changed || r->npending > 0)
		lert_round_install(r, pos);
	hash_seq_init(&seq, r->pages);
	while ((pg = hash_seq_search(&seq)) != NULL)
	{
		if (!pg->dirty)
			continue;
		if (!wrote)
			lert_test_crash(r->rel, LERT_CRASH_INSTALLED);
		else
			lert_test_crash(r->rel, LERT_CRASH_WRITEBACK);
		((LertL0Header *) pg->area)->applied_pos = pos;
		lert_write_page(r->rel, pg->blkno, SS_PAGE_LERT_LEVEL0, pg->area, pos,
						false);
		wrote = true;
	}
	round_pages_reset(r);
}

/*
 * Give a cone its first level 0: empty pages that have applied every
 * record before pos (the cone has had none).
 */
static void
round_create_level0(LertRound *r, uint32 cone, uint64 pos)
{
	LertCone   *cn = &r->meta.cones[cone];
	const LertState *st = r->st;
	uint16		form = lert_level0_form(st);
	uint32		npages = lert_level0_pages(cn->level0_limit, form,
										   st->fixed_key ? 0 : 16);
	char	   *area = palloc(SS_PAGE_DATA_SIZE);

	cn->level0 = lert_extent_alloc(r->rel, &r->meta, cone, npages);
	cn->level0_gen = lert_new_gen(&r->meta, cone);
	for (uint32 i = 0; i < npages; i++)
	{
		lert_l0_init(area, SS_PAGE_DATA_SIZE, pos, cn->level0_gen, form);
		lert_write_page(r->rel, cn->level0.start + i, SS_PAGE_LERT_LEVEL0,
						area, pos, true);
	}
	pfree(area);
	r->entries[cone] = 0;
	lert_round_install(r, pos);
}

/* ---- the on-disk levels, asked by lert_observe ---- */

static void
query_runs(void *arg, int64 *count, int64 *first_pos, bool *reported)
{
	LertQuery  *q = (LertQuery *) arg;
	LertDiskCount d = LERT_DISK_COUNT_INIT;
	const LertCone *cn = &q->r->meta.cones[q->cone];

	for (uint32 j = q->from; j <= q->r->meta.params.geom.nlevels; j++)
	{
		lert_run_lookup(q->r->rel, &cn->runs[j], q->fp, q->key, q->keylen, &d);
		if (d.stale)
			ss_page_corrupted(q->r->rel, cn->runs[j].index.start,
							  "A page of level %u of cone %u does not belong to it.",
							  j, q->cone);
	}
	q->r->meta.point_queries++;
	*count = d.count;
	*first_pos = d.first_pos;
	*reported = d.reported;
}

/*
 * A key's level-0 entry takes over its kept count from the shallowest run
 * that holds one (LERT_RUN_KEPT), so that the entry holds the key's whole
 * level-0 count as the rules see it; the next flush of the cone writes
 * that count out again.  The runs' filters spare the point query for keys
 * no run keeps.  Immediate does this when the key is new to level 0 (its
 * rule needs the count at every observation); count stretch only when the
 * level-0 rule could report the key (lazy_kept_needed), and otherwise
 * leaves it to the next flush, which looks kept counts up in key order.
 */
static void
take_kept_count(LertRound *r, uint32 cone, uint64 fp, const char *key,
				uint32 keylen, LertEntry *e)
{
	const LertCone *cn = &r->meta.cones[cone];

	for (uint32 j = 1; j <= r->meta.params.geom.nlevels; j++)
	{
		LertDiskCount d = LERT_DISK_COUNT_INIT;

		if (!lert_run_may_keep(r->rel, &cn->runs[j], fp))
			continue;
		lert_run_lookup(r->rel, &cn->runs[j], fp, key, keylen, &d);
		if (d.stale)
			ss_page_corrupted(r->rel, cn->runs[j].index.start,
							  "A page of level %u of cone %u does not belong to it.",
							  j, cone);
		r->meta.point_queries++;
		if (d.kept_found)
		{
			e->count += d.kept;
			if (d.kept > 0)
				e->first_pos = lert_fold_first_pos(e->first_pos,
												   (e->flags & LERT_REPORTED) != 0,
												   d.first_pos, false);
			break;
		}
	}
	e->flags &= ~LERT_L0_KEPT_PENDING;
}

/*
 * Count stretch: may weight more observations let a level-0 entry whose
 * kept count is pending reach T?  A kept count is what a merge of levels
 * 0..d leaves above the thresholds tau_1..tau_d of an unreported key's
 * count below T, so it is below T - tau_1; the entry's own count must
 * pass tau_1 before its level-0 count can reach T.
 */
static inline bool
lazy_kept_needed(const LertGeom *g, const LertEntry *e, int64 weight)
{
	return (e->flags & LERT_L0_KEPT_PENDING) &&
		e->count + weight > g->tau[1];
}

/* Does a run of the cone keep any level-0 count? */
static bool
cone_keeps(const LertRound *r, uint32 cone)
{
	for (uint32 j = 1; j <= r->meta.params.geom.nlevels; j++)
		if (r->meta.cones[cone].runs[j].nkept > 0)
			return true;
	return false;
}

void
lert_round_query_init(LertQuery *q, LertRound *r, uint32 cone, uint32 from,
					  uint64 fp, const char *key, uint32 keylen)
{
	q->r = r;
	q->cone = cone;
	q->from = from;
	q->fp = fp;
	q->key = key;
	q->keylen = keylen;
}

LertQueryFn lert_round_query_fn = query_runs;

/* ---- one record ---- */

static LertL0Page *
page_for(LertRound *r, uint32 cone, uint64 fp, uint64 logpos)
{
	LertCone   *cn = &r->meta.cones[cone];

	if (cn->level0.npages == 0)
		round_create_level0(r, cone, logpos);
	return lert_round_page(r, cone,
						   lert_level0_page(&r->meta.params, fp, cn->level0.npages));
}

static void
round_apply(uint64 logpos, const SSPendingHeader *hdr, const char *payload,
			void *arg)
{
	LertRound  *r = (LertRound *) arg;
	const LertGeom *g = &r->meta.params.geom;
	LertItem	item;
	const char *key;
	uint32		cone;
	LertL0Page *pg;
	bool		found;
	int			at;
	LertEntry	e;
	LertCount	slot;
	LertReport	rep;
	LertQuery	q;
	bool		counted = logpos >= r->meta.cones[r->cone].settled_pos;

	if (hdr->type != SS_PENDING_ITEM || hdr->len < sizeof(LertItem))
		ss_page_corrupted(r->rel, InvalidBlockNumber, "A LERT change log record has type %u and %u bytes.",
						  hdr->type, hdr->len);
	memcpy(&item, payload, sizeof(item));
	if (item.count <= 0 || item.keylen != hdr->len - sizeof(item) ||
		item.keylen > LERT_MAX_KEY_BYTES || (r->st->fixed_key && item.keylen != 0))
		ss_page_corrupted(r->rel, InvalidBlockNumber, "A LERT change log record has count " INT64_FORMAT " and %u key bytes.",
						  item.count, item.keylen);
	key = payload + sizeof(item);
	cone = lert_cone_of(&r->meta.params, item.fp);
	r->meta.max_keylen = Max(r->meta.max_keylen, item.keylen);

	/*
	 * time stretch: level 0 is flushed every period, whatever its fill.
	 * The cones' first periods are staggered (cone c's is (c + 1) / K of
	 * one), so that their flushes, and their merges, come one at a time.
	 * Each cone's round sees every record's position, so its flushes come
	 * where a single pass over the stream would make them.
	 */
	if (g->variant == LERT_TIME_STRETCH)
	{
		LertGeom	sched;
		int64		period;
		uint32		ncones = r->meta.params.ncones;
		LertCone   *cn = &r->meta.cones[r->cone];
		int64		due;

		lert_schedule_geom(&r->meta.params, &sched);
		period = lert_level0_period(&sched);
		due = cn->flushes > 0 ? period :
			Max(period / ncones * (r->cone + 1), 1);
		if (cn->level0.npages > 0 && r->pos - cn->last_flush >= due)
			lert_flush_cone(r, r->cone, logpos, false, false);
	}

	/* another cone's: it only moves the stream position */
	if (cone != r->cone)
	{
		r->pos += item.count;
		return;
	}

	pg = page_for(r, cone, item.fp, logpos);
	if (logpos < ((LertL0Header *) pg->area)->applied_pos)
	{
		/* applied by an earlier attempt of this round */
		r->pos += item.count;
		return;
	}
	at = lert_l0_search(pg->area, item.fp, key, item.keylen, &found);
	if (!found)
	{
		if ((counted && r->entries[cone] >= r->meta.cones[cone].level0_limit) ||
			!lert_l0_has_room(pg->area, item.keylen))
		{
			lert_flush_cone(r, cone, logpos, false, false);
			pg = page_for(r, cone, item.fp, logpos);
			if (!lert_l0_has_room(pg->area, item.keylen))
			{
				/*
				 * its page is full of keys the flush put back (time
				 * stretch's young keys): empty level 0
				 */
				lert_flush_cone(r, cone, logpos, false, true);
				pg = page_for(r, cone, item.fp, logpos);
			}
			at = lert_l0_search(pg->area, item.fp, key, item.keylen, &found);
			Assert(!found);
		}
		if (!lert_l0_insert(pg->area, at, item.fp, key, item.keylen))
			elog(ERROR, "LERT level-0 page has no room after a flush");
		if (counted)
		{
			r->entries[cone]++;
			r->changed = true;
		}
	}
	(void) lert_l0_get(pg->area, at, &e);
	if (!found && g->variant == LERT_IMMEDIATE)
		take_kept_count(r, cone, item.fp, key, item.keylen, &e);
	else if (!found && g->variant == LERT_COUNT_STRETCH && cone_keeps(r, cone))
		e.flags |= LERT_L0_KEPT_PENDING;
	if (lazy_kept_needed(g, &e, item.count))
		take_kept_count(r, cone, item.fp, key, item.keylen, &e);
	slot.count = e.count;
	slot.first_pos = e.first_pos;
	slot.disk_sum = e.disk_sum;
	slot.flags = e.flags;
	lert_round_query_init(&q, r, cone, 1, item.fp, key, item.keylen);
	if (lert_observe(g, &slot, item.count, r->pos, query_runs, &q, &rep) &&
		counted)
		lert_round_add_report(r, &rep, item.fp, key, item.keylen);
	if (!lert_l0_put(pg->area, at, slot.count, slot.first_pos, slot.disk_sum,
					 slot.flags))
		elog(ERROR, "LERT level-0 page of form %u cannot hold flags %u",
			 ((LertL0Header *) pg->area)->form, slot.flags);
	pg->dirty = true;
	r->pos += item.count;
	if (r->entries[cone] > r->meta.cones[cone].max_level0)
		r->meta.cones[cone].max_level0 = r->entries[cone];

	/*
	 * Keep the copies within the consolidation memory (work_mem in a
	 * writing statement), not level 0's size, which buffer_size sets
	 * apart: four times level 0's size let a 32MB level 0 take 128MB of
	 * private memory.  A larger work_mem saves checkpoints, each of which
	 * writes every changed page back.
	 */
	if ((Size) r->npages_cached * SS_PAGE_DATA_SIZE > ss_consolidation_memory())
		round_checkpoint(r, logpos + 1);
}

/* ---- immediate: prefetching point queries ---- */

/*
 * Immediate reports at the T-th observation, so an observation of a key
 * new to level 0 takes its kept count from the runs at once
 * (take_kept_count): random reads, one after another, each waiting for
 * the disk.  So a round holds back up to LERT_PREFETCH_RECORDS records
 * and asks the kernel to read ahead what take_kept_count will read, in
 * two steps: first the level-0 pages the round has no copy of and, for a
 * key not in its copied page, the filter page of each run that keeps
 * counts; then, the filters being in (or on their way), the data page of
 * the runs whose filter may hold the key.  Then it applies the records in
 * order: the reads overlap.  Only what the point query reads is read
 * ahead: a first version read every run's data page ahead of its filter
 * and read 24 times the pages.  Applying a record later in the same round
 * changes nothing it computes; the round applies every record held back
 * before it settles or moves its position (lert_lane_run).
 */
#define LERT_PREFETCH_RECORDS	128
#define LERT_PREFETCH_BYTES		(256 * 1024)

typedef struct LertQueued
{
	uint64		logpos;
	SSPendingHeader hdr;
} LertQueued;

#define QUEUED_SIZE(len)	MAXALIGN(sizeof(LertQueued) + (len))

/*
 * Step 1 (filters) or 2 (data pages) of the read-ahead for one record of
 * key fp (see above).
 */
static void
round_prefetch(LertRound *r, bool data, uint64 fp, const char *key,
			   uint32 keylen)
{
	const LertCone *cn = &r->meta.cones[r->cone];
	BlockNumber blkno;
	LertL0Page *pg;
	bool		found;

	if (cn->level0.npages == 0)
		return;
	blkno = cn->level0.start +
		lert_level0_page(&r->meta.params, fp, cn->level0.npages);
	pg = hash_search(r->pages, &blkno, HASH_FIND, NULL);
	if (pg == NULL)
	{
		if (!data)
			ss_prefetch(r->rel, blkno);
		return;
	}
	(void) lert_l0_search(pg->area, fp, key, keylen, &found);
	if (found)
		return;
	for (uint32 j = 1; j <= r->meta.params.geom.nlevels; j++)
	{
		if (!data)
			lert_run_prefetch_filter(r->rel, &cn->runs[j], fp);
		else if (lert_run_may_keep(r->rel, &cn->runs[j], fp))
		{
			lert_run_prefetch_data(r->rel, &cn->runs[j], fp, r->prefetch_area);
			break;				/* as take_kept_count, if no false positive */
		}
	}
}

/* Read ahead for the records held back, then apply them in order. */
static void
round_drain(LertRound *r)
{
	int			off;

	for (int step = 0; step < 2; step++)
	{
		off = 0;
		for (int i = 0; i < r->nqueued; i++)
		{
			const LertQueued *q = (const LertQueued *) (r->queue.data + off);
			LertItem	item;

			if (q->hdr.type == SS_PENDING_ITEM &&
				q->hdr.len >= sizeof(LertItem))
			{
				memcpy(&item, q + 1, sizeof(item));
				if (item.keylen == q->hdr.len - sizeof(item) &&
					lert_cone_of(&r->meta.params, item.fp) == r->cone)
					round_prefetch(r, step == 1, item.fp,
								   (const char *) (q + 1) + sizeof(item),
								   item.keylen);
			}
			off += QUEUED_SIZE(q->hdr.len);
		}
	}
	off = 0;
	for (int i = 0; i < r->nqueued; i++)
	{
		const LertQueued *q = (const LertQueued *) (r->queue.data + off);

		round_apply(q->logpos, &q->hdr, (const char *) (q + 1), r);
		off += QUEUED_SIZE(q->hdr.len);
	}
	resetStringInfo(&r->queue);
	r->nqueued = 0;
}

/* The lane pass's callback: apply a record, or hold it back (immediate). */
static void
round_record(uint64 logpos, const SSPendingHeader *hdr, const char *payload,
			 void *arg)
{
	LertRound  *r = (LertRound *) arg;
	LertQueued	q;
	static const char zeros[MAXIMUM_ALIGNOF] = {0};
	Size		pad;

	if (r->meta.params.geom.variant != LERT_IMMEDIATE)
	{
		round_apply(logpos, hdr, payload, arg);
		return;
	}
	q.logpos = logpos;
	q.hdr = *hdr;
	pad = QUEUED_SIZE(hdr->len) - sizeof(q) - hdr->len;
	appendBinaryStringInfo(&r->queue, (const char *) &q, sizeof(q));
	appendBinaryStringInfo(&r->queue, payload, hdr->len);
	appendBinaryStringInfo(&r->queue, zeros, pad);
	r->nqueued++;
	if (r->nqueued >= LERT_PREFETCH_RECORDS ||
		r->queue.len >= LERT_PREFETCH_BYTES)
		round_drain(r);
}

/* ---- rounds ---- */

/*
 * Begin a round of `cone` at the cone's log position (the head's when the
 * cone is not past it).  The caller holds the cone's lock.
 */
static void
round_begin(LertRound *r, Relation rel, uint32 cone)
{
	LertCone   *cn;

	memset(r, 0, sizeof(*r));
	r->rel = rel;
	r->st = lert_get_state(rel);
	r->cone = cone;
	r->cxt = AllocSetContextCreate(CurrentMemoryContext, "lert round",
								   ALLOCSET_DEFAULT_SIZES);
	r->shared = MemoryContextAlloc(r->cxt, sizeof(LertMeta));
	if (!lert_read_meta(rel, &r->meta))
		elog(ERROR, "LERT \"%s\" has no metapage", RelationGetRelationName(rel));
	if (cone >= r->meta.params.ncones)
		elog(ERROR, "LERT \"%s\" has no cone %u", RelationGetRelationName(rel),
			 cone);
	cn = &r->meta.cones[cone];
	if (cn->log_pos <= r->meta.hdr.log.head_pos)
	{
		cn->log_pos = r->meta.hdr.log.head_pos;
		cn->log_blk = r->meta.hdr.log.head_blk;
		cn->stream_pos = r->meta.stream_pos;
	}
	r->pos = cn->stream_pos;
	r->entries[cone] = cn->level0_entries;
	/*
	 * The copy's free list: what the cone reserved (a failed round's); with
	 * one cone, the whole list (lert_store.c).
	 */
	lert_copy_overflow_reset(&r->meta);
	if (r->meta.params.ncones > 1)
	{
		lert_pool_take_reserved(rel, cone, &r->meta);
		/* the round's install gives what it does not use back to the pool */
		r->changed = r->meta.nfree > 0;
	}
	r->merges_installed = r->meta.merges;
	r->queries_installed = r->meta.point_queries;
	initStringInfo(&r->reports);
	{
		MemoryContext old = MemoryContextSwitchTo(r->cxt);

		initStringInfo(&r->queue);
		r->prefetch_area = palloc(SS_PAGE_DATA_SIZE);
		MemoryContextSwitchTo(old);
	}
	round_pages_reset(r);
}

static void
round_end(LertRound *r)
{
	MemoryContextDelete(r->cxt);
	pfree(r->reports.data);
}

/*
 * Move the cone's log position to pos (on page blk), where the stream
 * stands at the round's position.  After the round's write-back: until
 * this record, a crash redoes the round.
 */
static void
round_advance(LertRound *r, uint64 pos, BlockNumber blk)
{
	SSXLogState *state;
	Buffer		buf;
	LertMeta   *m;
	LertCone   *cn = &r->meta.cones[r->cone];

	cn->log_pos = pos;
	cn->log_blk = blk;
	cn->stream_pos = r->pos;
	state = ss_xlog_start(r->rel);
	m = ss_meta_register(r->rel, SS_KIND_LERT, state, &buf);
	m->cones[r->cone].log_pos = cn->log_pos;
	m->cones[r->cone].log_blk = cn->log_blk;
	m->cones[r->cone].stream_pos = cn->stream_pos;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

/*
 * A round of `cone`: count its committed observations from its log
 * position up to limit (or the first batch still committing), reporting
 * and flushing as they come.  The caller holds the cone's lock.  Returns
 * true if the cone's position moved; stopped_at as ss_log_lane_pass's.
 */
bool
lert_lane_run(Relation rel, uint32 cone, uint64 limit,
			  TransactionId *stopped_at)
{
	LertRound	r;
	uint64		start;
	uint64		reached;
	BlockNumber reached_blk;

	/* tests: hold the cone's lock until pg_advisory_lock(key) is free */
	if (ss_test_lert_round_wait > 0)
		ss_test_wait_advisory(ss_test_lert_round_wait);
	round_begin(&r, rel, cone);
	start = r.meta.cones[cone].log_pos;
	ss_log_lane_pass(rel, start, r.meta.cones[cone].log_blk, limit,
					 round_record, &r, &reached, &reached_blk, stopped_at);
	round_drain(&r);			/* every record before reached applied */
	if (reached != start)
	{
		round_checkpoint(&r, reached);
		round_advance(&r, reached, reached_blk);
	}
	round_end(&r);
	return reached != start;
}

/*
 * lert_flush's flush callback: with every committed batch consolidated,
 * shuffle-merge every level of every cone, so that every key whose count
 * has reached T is reported.  Each cone at its own position, under its
 * lock (writers' rounds may have taken it past the head).  Returns the
 * reports made.
 */
int64
lert_flush_all(Relation rel, void *stats)
{
	LertMeta	meta;
	int64		made = 0;

	if (!lert_read_meta(rel, &meta))
		elog(ERROR, "LERT \"%s\" has no metapage", RelationGetRelationName(rel));
	for (uint32 c = 0; c < meta.params.ncones; c++)
	{
		LertRound	r;

		CHECK_FOR_INTERRUPTS();
		LockPage(rel, LERT_CONE_LOCK(c), ExclusiveLock);
		round_begin(&r, rel, c);
		if (r.meta.cones[c].level0.npages > 0)
		{
			lert_flush_cone(&r, c, r.meta.cones[c].log_pos, true, false);
			round_checkpoint(&r, r.meta.cones[c].log_pos);
		}
		made += r.reports_made;
		round_end(&r);
		UnlockPage(rel, LERT_CONE_LOCK(c), ExclusiveLock);
	}
	return made;
}
