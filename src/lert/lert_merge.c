/*-------------------------------------------------------------------------
 *
 * lert_merge.c
 *	  The flush of a cone: shuffle-merge level 0 (from the round's copies)
 *	  and on-disk levels 1..k into new runs and a new level 0, out of place.
 *	  Count stretch's and immediate's level-0 counts go with the keys'
 *	  entries at level k (kept counts, lert_page.h), with a filter.
 *
 * Every level lists its keys in one order (fingerprint, length, bytes), so
 * a k-way merge of cursors gathers each key's counts in one pass over the
 * sources, and each new run is written front to back.  The new runs and
 * level 0 go to extents no live level uses; one metapage install then
 * switches the cone to them, frees the old extents and makes the merge's
 * reports valid, so a crash before the install leaves the cone as it was
 * and the redone round makes the same merge.
 *
 * Buffers: the runs are read through the backend's bulk-read ring and
 * the new runs' data pages written through its bulk-write ring
 * (lert_store.c, ss_page.c), so that a merge of runs larger than
 * shared_buffers does not evict the rest of the cache; level 0 (old and
 * new), the runs' index and filter pages and the metapage, which rounds
 * and lookups read per key, go through no ring.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lert.h"
#include "lert_consolidate.h"
#include "miscadmin.h"
#include "storage/buffile.h"
#include "streamsketch.h"
#include "utils/hsearch.h"

typedef struct MergeSrc
{
	bool		is_level0;
	/* level 0 */
	uint32		page;
	uint32		npages;
	int			idx;
	const char *area;			/* the page being read */
	char	   *buf;			/* a page not in the round's copies */
	LertEntry	copy;			/* its current entry (lert_l0_get) */
	/* runs */
	LertRunReader reader;
	const LertEntry *e;			/* current entry, NULL at the end */
	const char *key;			/* its key bytes */
} MergeSrc;

/*
 * The entries a flush puts back in level 0, in key order: time stretch's
 * keys too young for level 1 (count stretch and immediate put back
 * nothing: their level-0 counts go to the runs).  At most a level 0's
 * worth, which the DBA sizes apart from work_mem: past a quarter of the
 * consolidation memory they go to a temporary file, read back in order.
 * Each entry is a LertEntry followed by its key bytes.
 */
typedef struct KeptSpool
{
	StringInfoData mem;
	BufFile    *file;			/* NULL while everything fits in mem */
	Size		budget;
	int			off;			/* reading mem */
} KeptSpool;

static void
kept_init(KeptSpool *k)
{
	initStringInfo(&k->mem);
	k->file = NULL;
	k->budget = Max(ss_consolidation_memory() / 4, (Size) BLCKSZ);
	k->off = 0;
}

static void
kept_add(KeptSpool *k, const LertEntry *e, const char *key)
{
	if (k->file == NULL &&
		(Size) k->mem.len + sizeof(LertEntry) + e->keylen > k->budget)
	{
		elog(DEBUG1, "LERT flush puts back more level-0 entries than %zu bytes: spooling them to a temporary file",
			 k->budget);
		k->file = BufFileCreateTemp(false);
		BufFileWrite(k->file, k->mem.data, k->mem.len);
		resetStringInfo(&k->mem);
	}
	if (k->file != NULL)
	{
		BufFileWrite(k->file, (void *) e, sizeof(LertEntry));
		if (e->keylen > 0)
			BufFileWrite(k->file, (void *) key, e->keylen);
		return;
	}
	appendBinaryStringInfo(&k->mem, (const char *) e, sizeof(LertEntry));
	appendBinaryStringInfo(&k->mem, key, e->keylen);
}

static void
kept_rewind(KeptSpool *k)
{
	k->off = 0;
	if (k->file != NULL && BufFileSeek(k->file, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not rewind temporary file of kept LERT entries: %m")));
}

static void
kept_read(KeptSpool *k, void *dst, Size n)
{
	if (n > 0 && BufFileRead(k->file, dst, n) != n)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read temporary file of kept LERT entries: %m")));
}

/* The next kept entry, its key copied to key; false at the end. */
static bool
kept_next(KeptSpool *k, LertEntry *e, char *key)
{
	if (k->file == NULL)
	{
		if (k->off >= k->mem.len)
			return false;
		memcpy(e, k->mem.data + k->off, sizeof(LertEntry));
		memcpy(key, k->mem.data + k->off + sizeof(LertEntry), e->keylen);
		k->off += sizeof(LertEntry) + e->keylen;
		return true;
	}
	{
		size_t		got = BufFileRead(k->file, e, sizeof(LertEntry));

		if (got == 0)
			return false;
		if (got != sizeof(LertEntry))
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read temporary file of kept LERT entries: read only %zu of %zu bytes",
							got, sizeof(LertEntry))));
	}
	if (e->keylen > LERT_MAX_KEY_BYTES)
		elog(ERROR, "kept LERT entry has %u key bytes", e->keylen);
	kept_read(k, key, e->keylen);
	return true;
}

static void
kept_free(KeptSpool *k)
{
	if (k->file != NULL)
		BufFileClose(k->file);
	pfree(k->mem.data);
}

/* Level-0 page `page` of the cone: the round's copy or a read-only one. */
static const char *
level0_page_area(LertRound *r, uint32 cone, uint32 page, char *buf)
{
	const LertCone *cn = &r->meta.cones[cone];
	BlockNumber blkno = cn->level0.start + page;
	LertL0Page *pg = hash_search(r->pages, &blkno, HASH_FIND, NULL);

	if (pg != NULL)
		return pg->area;
	lert_read_page_owned(r->rel, blkno, SS_PAGE_LERT_LEVEL0, cn->level0_gen,
						 buf, NULL);
	if (!lert_l0_check(buf, SS_PAGE_DATA_SIZE))
		ss_page_corrupted(r->rel, blkno, "The LERT level-0 page's entries are out of order or out of bounds.");
	return buf;
}

static void
src_next(LertRound *r, uint32 cone, MergeSrc *s)
{
	if (!s->is_level0)
	{
		s->e = lert_run_reader_next(&s->reader);
		s->key = s->e != NULL ? lert_entry_key(s->e) : NULL;
		return;
	}
	for (;;)
	{
		if (s->area != NULL && s->idx < lert_l0_count(s->area))
		{
			s->key = lert_l0_get(s->area, s->idx++, &s->copy);
			s->e = &s->copy;
			return;
		}
		if (s->page >= s->npages)
		{
			s->e = NULL;
			return;
		}
		CHECK_FOR_INTERRUPTS();
		s->area = level0_page_area(r, cone, s->page++, s->buf);
		s->idx = 0;
	}
}

/* Order of a source's current entry and a key. */
static inline int
src_cmp(const MergeSrc *s, uint64 fp, const char *key, uint32 keylen)
{
	return lert_key_cmp(s->e->fp, s->key, s->e->keylen, fp, key, keylen);
}

/*
 * Can the kept entries be laid out on npages level-0 pages by their
 * fingerprints?
 */
static bool
level0_fits(const LertRound *r, KeptSpool *kept, uint16 form, uint32 npages,
			char *key)
{
	Size		avail = SS_PAGE_DATA_SIZE - MAXALIGN(sizeof(LertL0Header));
	Size		used = 0;
	int64		cur = -1;
	LertEntry	e;

	kept_rewind(kept);
	while (kept_next(kept, &e, key))
	{
		uint32		p = lert_level0_page(&r->meta.params, e.fp, npages);

		if ((int64) p != cur)
		{
			cur = p;
			used = 0;
		}
		used += lert_l0_entry_space(form, e.keylen);
		if (used > avail)
			return false;
	}
	return true;
}

/*
 * The kept counts a flush needs from below the levels it rewrites: count
 * stretch's level-0 keys that have not taken theirs over
 * (LERT_L0_KEPT_PENDING) and that a deeper run's filter admits.  They are
 * looked up before the merge, level by level in key order, with the data
 * pages of the next keys prefetched, so that a flush reads them as a
 * sorted batch instead of one random page per key.
 */
#define DEEP_PREFETCH_DISTANCE	32

typedef struct DeepKept
{
	uint64		fp;
	Size		keyoff;			/* its bytes in DeepKeptSet.keys */
	uint32		keylen;
	uint16		levels;			/* bit j: level j's filter admits it */
	bool		found;
	int64		kept;
	int64		first_pos;
} DeepKept;

typedef struct DeepKeptSet
{
	DeepKept   *items;			/* in key order */
	int64		n;
	int64		cap;
	int64		next;			/* the merge's cursor */
	StringInfoData keys;
} DeepKeptSet;

static void
deep_collect(LertRound *r, uint32 cone, uint32 depth, DeepKeptSet *set)
{
	const LertCone *cn = &r->meta.cones[cone];
	uint32		nlevels = r->meta.params.geom.nlevels;
	char	   *buf = palloc(SS_PAGE_DATA_SIZE);

	for (uint32 p = 0; p < cn->level0.npages; p++)
	{
		const char *area = level0_page_area(r, cone, p, buf);

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < lert_l0_count(area); i++)
		{
			LertEntry	e;
			const char *key = lert_l0_get(area, i, &e);
			uint16		levels = 0;
			DeepKept   *d;

			if (!(e.flags & LERT_L0_KEPT_PENDING))
				continue;
			for (uint32 j = depth + 1; j <= nlevels; j++)
				if (lert_run_may_keep(r->rel, &cn->runs[j], e.fp))
					levels |= (uint16) (1 << j);
			if (levels == 0)
				continue;
			if (set->n == set->cap)
			{
				set->cap *= 2;
				set->items = repalloc_huge(set->items, sizeof(DeepKept) * set->cap);
			}
			d = &set->items[set->n++];
			memset(d, 0, sizeof(*d));
			d->fp = e.fp;
			d->keyoff = set->keys.len;
			d->keylen = e.keylen;
			d->levels = levels;
			appendBinaryStringInfo(&set->keys, key, e.keylen);
		}
	}
	pfree(buf);
}

/* Look the collected keys up, shallowest level first. */
static void
deep_resolve(LertRound *r, uint32 cone, uint32 depth, DeepKeptSet *set)
{
	const LertCone *cn = &r->meta.cones[cone];

	for (uint32 j = depth + 1; j <= r->meta.params.geom.nlevels; j++)
	{
		LertRunSeeker s;
		int64		ahead = 0;

		if (cn->runs[j].nkept == 0)
			continue;
		lert_run_seeker_begin(&s, r->rel, &cn->runs[j]);
		for (int64 i = 0; i < set->n; i++)
		{
			DeepKept   *d = &set->items[i];
			LertEntry	e;

			if (d->found || !(d->levels & (1 << j)))
				continue;
			for (ahead = Max(ahead, i + 1);
				 ahead < set->n && ahead <= i + DEEP_PREFETCH_DISTANCE; ahead++)
			{
				const DeepKept *a = &set->items[ahead];

				if (!a->found && (a->levels & (1 << j)))
					lert_run_seeker_prefetch(&s, a->fp);
			}
			if ((i & 255) == 0)
				CHECK_FOR_INTERRUPTS();
			if (lert_run_seeker_find(&s, d->fp, set->keys.data + d->keyoff,
									 d->keylen, &e) &&
				(e.flags & LERT_RUN_KEPT))
			{
				d->found = true;
				d->kept = e.disk_sum;
				/*
				 * a reported entry's is its count at the report (LertCount):
				 * whether the key was reported, the merge asks the deeper
				 * levels
				 */
				d->first_pos = (e.flags & LERT_REPORTED) ? -1 : e.first_pos;
				r->meta.point_queries++;
			}
		}
		lert_run_seeker_end(&s);
	}
}

/* The collected kept count of the merge's current key, if any. */
static const DeepKept *
deep_next(DeepKeptSet *set, uint64 fp, const char *key, uint32 keylen)
{
	while (set->next < set->n)
	{
		const DeepKept *d = &set->items[set->next];
		int			c = lert_key_cmp(d->fp, set->keys.data + d->keyoff,
									 d->keylen, fp, key, keylen);

		if (c > 0)
			return NULL;
		set->next++;
		if (c == 0)
			return d;
	}
	return NULL;
}

/* May a level below depth hold a kept count of the fingerprint? */
static bool
deeper_may_keep(LertRound *r, uint32 cone, uint32 depth, uint64 fp)
{
	const LertCone *cn = &r->meta.cones[cone];

	for (uint32 j = depth + 1; j <= r->meta.params.geom.nlevels; j++)
		if (lert_run_may_keep(r->rel, &cn->runs[j], fp))
			return true;
	return false;
}

/*
 * Flush the cone: merge level 0 and levels 1..k (k by the COLA schedule,
 * every level if final) at the current stream position, before the record
 * at log position logpos.  Count stretch and immediate write each key's
 * level-0 count with its entry at level k (LERT_RUN_KEPT) and leave level
 * 0 empty; time stretch puts its young keys back.  spill: put nothing back
 * in level 0 (its counts go to level 1), for a level-0 page too full of
 * put-back keys to take a new one, which costs that flush the time-stretch
 * bound, never exactness.
 */
void
lert_flush_cone(LertRound *r, uint32 cone, uint64 logpos, bool final,
				bool spill)
{
	LertCone   *cn = &r->meta.cones[cone];
	const LertGeom *g = &r->meta.params.geom;
	uint32		depth = final ? g->nlevels :
		lert_merge_depth(g, cn->flushes + cn->flush_offset + 1);
	uint16		form = lert_level0_form(r->st);
	bool		deeper = false;
	MergeSrc	src[LERT_MAX_LEVELS + 1];
	int			nsrc = 0;
	LertRunWriter w[LERT_MAX_LEVELS + 1];
	KeptSpool	kept;
	char	   *kept_key = palloc(LERT_MAX_KEY_BYTES + 1);
	int64		nkept = 0;
	int64		kept_key_bytes = 0;
	char	   *keybuf = palloc(LERT_MAX_KEY_BYTES + 1);
	int			reports_len = r->reports.len;
	int64		reports_n = r->npending;
	int64		limit;
	uint32		npages;
	LertExtent	level0;
	uint64		gen;
	char	   *area;
	int64		nkeys = 0;
	bool		keep_in_runs = g->variant == LERT_COUNT_STRETCH ||
		g->variant == LERT_IMMEDIATE;
	int64		l0_keys = 0;
	int64		l0_key_bytes = 0;
	DeepKeptSet deep;
	LertGeom	sched;

	lert_schedule_geom(&r->meta.params, &sched);
	for (uint32 j = depth + 1; j <= g->nlevels; j++)
		deeper |= cn->runs[j].nentries > 0;

	/* sources: level 0, then the runs taking part */
	memset(src, 0, sizeof(src));
	src[0].is_level0 = true;
	src[0].npages = cn->level0.npages;
	src[0].buf = palloc(SS_PAGE_DATA_SIZE);
	src_next(r, cone, &src[0]);
	nsrc = 1;
	for (uint32 j = 1; j <= depth; j++)
	{
		if (cn->runs[j].ndata == 0)
			continue;
		lert_run_reader_begin(&src[nsrc].reader, r->rel, &cn->runs[j]);
		src_next(r, cone, &src[nsrc]);
		nsrc++;
	}
	for (uint32 j = 1; j <= depth; j++)
		lert_run_writer_begin(&w[j], r->rel, &r->meta, cone);
	if (keep_in_runs)
	{
		/* level-0 counts go to the deepest level rewritten, flagged */
		int64		max_kept = r->entries[cone];

		for (uint32 j = 1; j <= depth; j++)
			max_kept += cn->runs[j].nkept;
		lert_run_writer_keep(&w[depth], max_kept);
	}
	memset(&deep, 0, sizeof(deep));
	deep.cap = 64;
	deep.items = palloc(sizeof(DeepKept) * deep.cap);
	initStringInfo(&deep.keys);
	if (g->variant == LERT_COUNT_STRETCH)
	{
		bool		deeper_kept = false;

		for (uint32 j = depth + 1; j <= g->nlevels; j++)
			deeper_kept |= cn->runs[j].nkept > 0;
		if (deeper_kept)
		{
			deep_collect(r, cone, depth, &deep);
			deep_resolve(r, cone, depth, &deep);
		}
	}
	kept_init(&kept);

	for (;;)
	{
		const MergeSrc *min = NULL;
		uint64		fp;
		uint32		keylen;
		LertCount	m = {0, -1, 0, 0};
		LertReport	rep;
		LertQuery	q;
		int64		counts[LERT_MAX_LEVELS + 1];
		bool		in_level0 = false;
		bool		l0_pending = false;
		bool		kept_met = false;
		int64		kept_count = 0;
		bool		write_kept = false;

		for (int i = 0; i < nsrc; i++)
			if (src[i].e != NULL &&
				(min == NULL || src_cmp(&src[i], min->e->fp, min->key,
										min->e->keylen) < 0))
				min = &src[i];
		if (min == NULL)
			break;
		if ((++nkeys & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		fp = min->e->fp;
		keylen = min->e->keylen;
		memcpy(keybuf, min->key, keylen);
		for (int i = 0; i < nsrc; i++)
			while (src[i].e != NULL && src_cmp(&src[i], fp, keybuf, keylen) == 0)
			{
				const LertEntry *e = src[i].e;

				m.count += e->count;
				m.first_pos = lert_fold_first_pos(m.first_pos,
												  (m.flags & LERT_REPORTED) != 0,
												  e->first_pos,
												  (e->flags & LERT_REPORTED) != 0);
				m.flags |= e->flags & LERT_REPORTED;
				if (src[i].is_level0)
				{
					/* sources: level 0 first */
					in_level0 = true;
					l0_pending = (e->flags & LERT_L0_KEPT_PENDING) != 0;
					l0_keys++;
					l0_key_bytes += keylen;
				}
				else if (e->flags & LERT_RUN_KEPT)
				{
					/*
					 * The shallowest kept count is the current one, unless
					 * level 0's entry took it over.
					 */
					if ((!in_level0 || l0_pending) && !kept_met)
						m.count += e->disk_sum;
					kept_met = true;
				}
				src_next(r, cone, &src[i]);
			}
		if (l0_pending && !kept_met)
		{
			/* its kept count is deeper, if anywhere: looked up above */
			const DeepKept *d = deep_next(&deep, fp, keybuf, keylen);

			if (d != NULL && d->found)
			{
				m.count += d->kept;
				m.first_pos = lert_fold_first_pos(m.first_pos,
												  (m.flags & LERT_REPORTED) != 0,
												  d->first_pos, false);
				kept_met = true;
			}
		}

		lert_round_query_init(&q, r, cone, depth + 1, fp, keybuf, keylen);
		if (lert_merge_report(g, &m, r->pos, deeper, lert_round_query_fn, &q, &rep))
			lert_round_add_report(r, &rep, fp, keybuf, keylen);
		lert_place(&sched, depth, r->pos, &m, counts);
		if (keep_in_runs)
		{
			/*
			 * The level-0 count goes with the key's entry at the deepest
			 * level rewritten.  A merge that did not gather the key's
			 * level-0 count (it lives deeper) has nothing above the
			 * thresholds unless a spilled flush put it there: that goes
			 * to the deepest level, as spilling does.  A key whose
			 * level-0 count this merge gathered and leaves at zero gets a
			 * zero kept count if a deeper level may hold an older one.
			 */
			if (!in_level0 && !kept_met)
			{
				counts[depth] += counts[0];
				counts[0] = 0;
			}
			kept_count = counts[0];
			counts[0] = 0;
			write_kept = kept_count > 0 ||
				((in_level0 || kept_met) && deeper_may_keep(r, cone, depth, fp));
		}
		else if (spill && counts[0] > 0)
		{
			counts[1] += counts[0];
			counts[0] = 0;
		}
		for (uint32 j = 0; j <= depth; j++)
		{
			LertEntry	e;
			bool		kept_here = write_kept && j == depth;

			if (counts[j] == 0 && !kept_here)
				continue;
			memset(&e, 0, sizeof(e));
			e.fp = fp;
			e.count = counts[j];
			e.first_pos = m.first_pos;
			e.keylen = keylen;
			e.flags = (uint16) (m.flags & LERT_REPORTED);
			if (kept_here)
			{
				e.flags |= LERT_RUN_KEPT;
				e.disk_sum = kept_count;
			}
			if (j > 0)
			{
				lert_run_writer_add(&w[j], &e, keybuf);
				continue;
			}
			kept_add(&kept, &e, keybuf);
			nkept++;
			kept_key_bytes += keylen;
		}
	}
	for (int i = 1; i < nsrc; i++)
		lert_run_reader_end(&src[i].reader);
	pfree(src[0].buf);
	pfree(deep.items);
	pfree(deep.keys.data);
	for (uint32 j = 1; j <= depth; j++)
		lert_run_writer_end(&w[j]);

	/* the new level 0: room for what was put back and for new keys */
	limit = spill ? g->level0_capacity : lert_level0_limit(g, nkept);
	npages = lert_level0_pages(limit, form,
							   nkept > 0 ? (double) kept_key_bytes / nkept :
							   l0_keys > 0 ? (double) l0_key_bytes / l0_keys :
							   (r->st->fixed_key ? 0 : 16));
	for (int tries = 0; !level0_fits(r, &kept, form, npages, kept_key); tries++)
	{
		if (tries == 3 || npages > MaxBlockNumber / 8)
		{
			/* keys too alike to spread: do the flush again, spilling */
			for (uint32 j = 1; j <= depth; j++)
				lert_run_free(r->rel, &r->meta, &w[j].run);
			r->reports.len = reports_len;
			r->reports.data[reports_len] = '\0';
			r->npending = reports_n;
			kept_free(&kept);
			pfree(kept_key);
			pfree(keybuf);
			elog(DEBUG1, "LERT \"%s\": kept keys do not fit level 0, flushing cone %u again with spilling",
				 RelationGetRelationName(r->rel), cone);
			lert_flush_cone(r, cone, logpos, final, true);
			return;
		}
		npages *= 2;
	}
	level0 = lert_extent_alloc(r->rel, &r->meta, cone, npages);
	gen = lert_new_gen(&r->meta, cone);
	area = palloc(SS_PAGE_DATA_SIZE);
	{
		LertEntry	e;
		bool		have;

		kept_rewind(&kept);
		have = kept_next(&kept, &e, kept_key);
		for (uint32 p = 0; p < npages; p++)
		{
			lert_l0_init(area, SS_PAGE_DATA_SIZE, logpos, gen, form);
			while (have && lert_level0_page(&r->meta.params, e.fp, npages) == p)
			{
				int			at = lert_l0_count(area);

				if (!lert_l0_insert(area, at, e.fp, kept_key, e.keylen) ||
					!lert_l0_put(area, at, e.count, e.first_pos, 0, e.flags))
					elog(ERROR, "LERT level-0 page overflows after its layout was checked");
				have = kept_next(&kept, &e, kept_key);
			}
			lert_write_page(r->rel, level0.start + p, SS_PAGE_LERT_LEVEL0, area,
							logpos, true);
		}
		if (have)
			elog(ERROR, "LERT kept entries are out of page order");
	}
	pfree(area);
	kept_free(&kept);
	pfree(kept_key);
	pfree(keybuf);

	lert_test_crash(r->rel, LERT_CRASH_MERGED);

	/* switch: the old extents are free once the install is durable */
	lert_round_forget_cone(r, cone);
	lert_extent_free(&r->meta, cn->level0);
	cn->level0 = level0;
	cn->level0_gen = gen;
	cn->level0_limit = limit;
	for (uint32 j = 1; j <= depth; j++)
	{
		lert_run_free(r->rel, &r->meta, &cn->runs[j]);
		cn->runs[j] = w[j].run;
	}
	cn->flushes++;
	cn->last_flush = r->pos;
	r->entries[cone] = nkept;
	r->meta.merges++;
	lert_round_install(r, logpos);
}
