/*-------------------------------------------------------------------------
 *
 * lert_pool.c
 *	  A LERT's pool of free extents: reservations for a cone's round,
 *	  what an install gives back, and a spill page for the extents the
 *	  metapage's list has no room for.
 *
 * The metapage lists LERT_MAX_FREE_EXTENTS extents (the pool's and the
 * cones' reservations, lert_store.c).  With several sessions, the rounds
 * of different cones free and reserve extents in between each other's,
 * and the list overflowed: four sessions on 32 M observations forgot
 * 11,965 pages in 739 extents, which then also kept their neighbours from
 * merging, and the file grew by them.  So the metapage keeps the
 * reservations and the largest pool extents, and the rest wait, in block
 * order and with their tags, on a spill page, where an install merges
 * them with their neighbours again and a reservation finds them too (a
 * run's chunk takes the lowest extent that is not a crumb; the best fit
 * may be spilled).  Reservations spill too: four rounds writing deep runs
 * out of a fragmented pool held the metapage's 128 entries in
 * reservations, and every chunk after that came from the file's end.
 *
 * The spill page is copy on write, so the metapage record of the install
 * or reservation is what switches to the new list: two pages, allocated
 * at the end of the file at their first use (a round that fails before
 * its metapage record leaves that block unused), alternate (spill_blk[spill_cur] is
 * current), and each version is stamped with spill_version in its first
 * 8 bytes, which readers check as the generation of other LERT pages.  A
 * round that fails before its metapage record leaves the current version
 * as it was.  Only writers holding the space lock write it; a new version
 * is written only when the spilled extents change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lert.h"
#include "lert_consolidate.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"

#define SPILL_HEADER		LERT_SPILL_HEADER

/*
 * A run's chunk takes the pool's lowest extent of at least this many pages
 * (or of the chunk's size, if smaller): crumbs would make a reservation
 * each.
 */
#define LERT_POOL_CHUNK_MIN	64

/*
 * The metapage's list, the round's copy, its overflow and the spill page
 * (of an earlier build, untagged, the longest) together.
 */
#define POOL_CAPACITY \
	(2 * LERT_MAX_FREE_EXTENTS + LERT_MAX_SPILL_EXTENTS + LERT_MAX_SPILL_UNTAGGED)

typedef struct PoolEntry
{
	LertExtent	ext;
	uint8		tag;			/* LERT_FREE_POOL or the reserving cone */
	bool		in_meta;
} PoolEntry;

/* Reservations the metapage and the spill page can list (one spare). */
#define POOL_MAX_RESERVED \
	((uint32) ss_test_lert_free_extents + LERT_MAX_SPILL_EXTENTS - 1)

static int
entry_start_cmp(const void *a, const void *b)
{
	BlockNumber x = ((const PoolEntry *) a)->ext.start;
	BlockNumber y = ((const PoolEntry *) b)->ext.start;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * Reservations first, then larger first; equal sizes lower block first
 * (the same choice each time).
 */
static int
entry_keep_cmp(const void *a, const void *b)
{
	const PoolEntry *x = *(const PoolEntry *const *) a;
	const PoolEntry *y = *(const PoolEntry *const *) b;

	if ((x->tag == LERT_FREE_POOL) != (y->tag == LERT_FREE_POOL))
		return x->tag == LERT_FREE_POOL ? 1 : -1;
	if (x->ext.npages != y->ext.npages)
		return x->ext.npages > y->ext.npages ? -1 : 1;
	return entry_start_cmp(x, y);
}

/*
 * Read the current spill page of meta into area, set *n to how many
 * extents it lists and *tags to their tags (NULL on a page of a build
 * before the tags: all the pool's), checking its version and every extent
 * (inside the blocks allocated so far, in order) and tag.  With owned (the
 * space lock held) a page of another version is damage; without
 * (lert_info), a writer may have replaced it since meta was read: then
 * false.
 */
static bool
spill_read(Relation rel, const LertMeta *meta, char *area, uint32 *n,
		   const uint8 **tags, bool owned)
{
	BlockNumber blkno = meta->spill_blk[meta->spill_cur];
	const LertExtent *ext = (const LertExtent *) (area + SPILL_HEADER);
	uint32		flags;

	*n = 0;
	*tags = NULL;
	if (meta->nspill == 0)
		return true;
	if (owned)
		lert_read_page_owned(rel, blkno, SS_PAGE_LERT_FREE, meta->spill_version,
							 area, NULL);
	else if (lert_read_page(rel, blkno, SS_PAGE_LERT_FREE, meta->spill_version,
							area, NULL) != LERT_OK)
		return false;
	memcpy(n, area + sizeof(uint64), sizeof(uint32));
	memcpy(&flags, area + sizeof(uint64) + sizeof(uint32), sizeof(uint32));
	if (*n != meta->nspill || (flags & ~LERT_SPILL_TAGGED) != 0 ||
		*n > ((flags & LERT_SPILL_TAGGED) ? LERT_MAX_SPILL_EXTENTS :
			  LERT_MAX_SPILL_UNTAGGED))
		ss_page_corrupted(rel, blkno,
						  "The LERT spill page lists %u free extents (flags %u), the metapage %u.",
						  *n, flags, meta->nspill);
	if (flags & LERT_SPILL_TAGGED)
	{
		*tags = (const uint8 *) (ext + *n);
		for (uint32 i = 0; i < *n; i++)
			if ((*tags)[i] != LERT_FREE_POOL &&
				(*tags)[i] >= meta->params.ncones)
				ss_page_corrupted(rel, blkno,
								  "Free extent %u of the LERT spill page is reserved by cone %u of %u.",
								  i, (*tags)[i], meta->params.ncones);
	}
	for (uint32 i = 0; i < *n; i++)
		if (ext[i].npages == 0 || ext[i].start == 0 ||
			ext[i].start >= meta->hdr.log.alloc_end ||
			ext[i].npages > meta->hdr.log.alloc_end - ext[i].start ||
			(i > 0 && ext[i].start < ext[i - 1].start + ext[i - 1].npages))
			ss_page_corrupted(rel, blkno,
							  "Free extent %u of the LERT spill page is empty, out of order or beyond the structure's blocks.",
							  i);
	return true;
}

/*
 * Write a new version of the spill page listing ext[0 .. n - 1] (block
 * order) with their tags and point cur at it; the caller's metapage
 * record makes it current.  Nothing is written for an empty list.
 */
static void
spill_write(Relation rel, LertMeta *cur, const LertExtent *ext,
			const uint8 *tags, uint32 n)
{
	uint32		flags = LERT_SPILL_TAGGED;

	uint32		next = 1 - cur->spill_cur;
	bool		fresh = false;
	char	   *area;

	if (n == 0)
	{
		cur->nspill = 0;
		return;
	}
	if (cur->spill_blk[next] == 0)
	{
		cur->spill_blk[next] = ss_log_alloc_run(rel, 1);
		fresh = true;
	}
	cur->spill_version++;
	area = palloc0(SS_PAGE_DATA_SIZE);
	memcpy(area, &cur->spill_version, sizeof(uint64));
	memcpy(area + sizeof(uint64), &n, sizeof(uint32));
	memcpy(area + sizeof(uint64) + sizeof(uint32), &flags, sizeof(uint32));
	memcpy(area + SPILL_HEADER, ext, sizeof(LertExtent) * n);
	memcpy(area + SPILL_HEADER + sizeof(LertExtent) * n, tags, n);
	lert_write_page(rel, cur->spill_blk[next], SS_PAGE_LERT_FREE, area, 0,
					fresh);
	pfree(area);
	lert_test_crash(rel, LERT_CRASH_SPILLED);
	cur->spill_cur = next;
	cur->nspill = n;
}

/*
 * The pool as one list: cur's extents (the metapage read under the space
 * lock) and its spill page's, in block order, with their tags.
 */
typedef struct Pool
{
	PoolEntry  *e;
	uint32		n;
	char	   *area;			/* the spill page's data as read */
	const LertExtent *spilled;
	const uint8 *spilled_tags;	/* NULL: all the pool's */
	uint32		nspilled;
	uint64		version;		/* the spill page's, as read */
} Pool;

/* The tag of p's spilled extent i. */
static inline uint8
spilled_tag(const Pool *p, uint32 i)
{
	return p->spilled_tags ? p->spilled_tags[i] : LERT_FREE_POOL;
}

static void
pool_add(Pool *p, LertExtent ext, uint8 tag, bool in_meta)
{
	Assert(p->n < POOL_CAPACITY);
	p->e[p->n].ext = ext;
	p->e[p->n].tag = tag;
	p->e[p->n++].in_meta = in_meta;
}

/*
 * Read cur's pool: every extent of its list and of its spill page but
 * those tagged skip_cone (and with skip_all, the whole list).
 */
static void
pool_load(Relation rel, const LertMeta *cur, Pool *p, int skip_cone,
		  bool skip_all)
{
	p->e = palloc(sizeof(PoolEntry) * POOL_CAPACITY);
	p->n = 0;
	p->area = palloc(SS_PAGE_DATA_SIZE);
	p->spilled = (const LertExtent *) (p->area + SPILL_HEADER);
	(void) spill_read(rel, cur, p->area, &p->nspilled, &p->spilled_tags, true);
	p->version = cur->spill_version;
	if (!skip_all)
		for (uint32 i = 0; i < cur->nfree; i++)
			if ((int) cur->free_cone[i] != skip_cone)
				pool_add(p, cur->free_ext[i], cur->free_cone[i], true);
	for (uint32 i = 0; i < p->nspilled; i++)
		if ((int) spilled_tag(p, i) != skip_cone)
			pool_add(p, p->spilled[i], spilled_tag(p, i), false);
}

static void
pool_release(Pool *p)
{
	pfree(p->e);
	pfree(p->area);
}

/*
 * Sort the pool by block and merge neighbouring extents of one tag (the
 * pool's, or one cone's reservations: a round reserving chunk after chunk
 * of one extent holds one entry).
 */
static void
pool_merge(Pool *p)
{
	uint32		m = 0;

	qsort(p->e, p->n, sizeof(PoolEntry), entry_start_cmp);
	for (uint32 i = 0; i < p->n; i++)
	{
		if (m > 0 && p->e[i].tag == p->e[m - 1].tag &&
			p->e[m - 1].ext.start + p->e[m - 1].ext.npages == p->e[i].ext.start)
			p->e[m - 1].ext.npages += p->e[i].ext.npages;
		else
			p->e[m++] = p->e[i];
	}
	p->n = m;
}

/*
 * Store the (merged) pool into cur: the reservations and then the largest
 * pool extents in its list, the rest with their tags on a new version of
 * the spill page if they differ from the current one's.  Only when the
 * spill page is full too does the pool forget its smallest extents (their
 * blocks stay unused until VACUUM FULL); reservations are never forgotten
 * (lert_pool_reserve keeps them fewer than both lists hold).  The caller's
 * metapage record makes it so.
 */
static void
pool_store(Relation rel, LertMeta *cur, Pool *p)
{
	PoolEntry **order = palloc(sizeof(PoolEntry *) * Max(p->n, 1));
	LertExtent *rest = palloc(sizeof(LertExtent) * LERT_MAX_SPILL_EXTENTS);
	uint8	   *rest_tags = palloc(LERT_MAX_SPILL_EXTENTS);
	uint32		room = (uint32) ss_test_lert_free_extents;
	uint32		nrest = 0;
	bool		same;

	for (uint32 i = 0; i < p->n; i++)
	{
		order[i] = &p->e[i];
		p->e[i].in_meta = false;
	}
	qsort(order, p->n, sizeof(PoolEntry *), entry_keep_cmp);
	for (uint32 i = 0; i < p->n && i < room; i++)
		order[i]->in_meta = true;
	for (uint32 i = room + LERT_MAX_SPILL_EXTENTS; i < p->n; i++)
	{
		Assert(order[i]->tag == LERT_FREE_POOL);
		order[i]->ext.npages = 0;
	}

	cur->nfree = 0;
	for (uint32 i = 0; i < p->n; i++)
	{
		if (p->e[i].in_meta)
		{
			cur->free_ext[cur->nfree] = p->e[i].ext;
			cur->free_cone[cur->nfree++] = p->e[i].tag;
		}
		else if (p->e[i].ext.npages > 0)
		{
			rest[nrest] = p->e[i].ext;
			rest_tags[nrest++] = p->e[i].tag;
		}
	}
	same = nrest == p->nspilled &&
		memcmp(rest, p->spilled, sizeof(LertExtent) * nrest) == 0;
	for (uint32 i = 0; same && i < nrest; i++)
		same = rest_tags[i] == spilled_tag(p, i);
	if (!same)
	{
		/* once per metapage record: a second would overwrite the current */
		Assert(cur->spill_version == p->version);
		spill_write(rel, cur, rest, rest_tags, nrest);
	}
	pfree(rest_tags);
	pfree(rest);
	pfree(order);
}

/*
 * Give the round's free extents (its copy's list) to the pool of cur (the
 * metapage read under the space lock, after the cone's lock), in place of
 * what its cone had reserved there (with one cone, in place of the whole
 * list, which its copy held), and store the pool (pool_store).
 */
void
lert_pool_give_back(LertRound *r, LertMeta *cur)
{
	Pool		p;
	const LertExtent *over;
	uint32		nover;

	pool_load(r->rel, cur, &p, (int) r->cone, r->meta.params.ncones == 1);
	for (uint32 i = 0; i < r->meta.nfree; i++)
		pool_add(&p, r->meta.free_ext[i], LERT_FREE_POOL, false);
	over = lert_copy_overflow(&r->meta, &nover);
	for (uint32 i = 0; i < nover; i++)
		pool_add(&p, over[i], LERT_FREE_POOL, false);
	pool_merge(&p);
	pool_store(r->rel, cur, &p);
	pool_release(&p);
}

/*
 * Reserve pages of the pool for cone's round: npages of the pool's best
 * fit, or with lowest up to npages of its lowest extent, spilled extents
 * included.  Not with one cone, whose round's copy holds the metapage's
 * list (a reservation may move extents between that list and the spill
 * page).  Under the space lock (after the cone's), in one metapage
 * record (and a spill page version when the spilled extents change); the
 * rest of the extent stays in the pool.  Returns the reserved extent
 * (npages 0 if the pool has none), which the caller allocates from and
 * puts the rest of into its copy.
 */
LertExtent
lert_pool_reserve(Relation rel, uint32 cone, BlockNumber npages, bool lowest)
{
	LertMeta   *cur = palloc(sizeof(LertMeta));
	LertExtent	got = {InvalidBlockNumber, 0};
	Pool		p;
	int			at = -1;
	uint32		ntagged = 0;
	bool		first_fits = false;

	LockPage(rel, LERT_SPACE_LOCK, ExclusiveLock);
	if (!lert_read_meta(rel, cur))
		elog(ERROR, "LERT \"%s\" has no metapage", RelationGetRelationName(rel));
	/* one cone's copy holds the metapage's list: it never reserves */
	Assert(cur->params.ncones > 1);
	pool_load(rel, cur, &p, -1, false);
	qsort(p.e, p.n, sizeof(PoolEntry), entry_start_cmp);
	for (uint32 i = 0; i < p.n; i++)
	{
		const LertExtent *x = &p.e[i].ext;

		if (p.e[i].tag != LERT_FREE_POOL)
		{
			/* the lists keep every reservation: keep room for one more */
			if (++ntagged >= POOL_MAX_RESERVED)
			{
				at = -1;
				break;
			}
			continue;
		}
		if (lowest)
		{
			/* the lowest that is not a crumb, else the metapage's lowest */
			if (x->npages >= Min(npages, LERT_POOL_CHUNK_MIN) &&
				(at < 0 || !first_fits))
			{
				at = (int) i;
				first_fits = true;
			}
			else if (at < 0 && p.e[i].in_meta)
				at = (int) i;
			continue;
		}
		if (x->npages >= npages &&
			(at < 0 || x->npages < p.e[at].ext.npages))
			at = (int) i;
	}
	if (at >= 0)
	{
		SSXLogState *state;
		Buffer		buf;
		LertMeta   *m;

		got = p.e[at].ext;
		if (npages < got.npages)
		{
			/* the head is reserved, the rest stays in the pool */
			got.npages = npages;
			p.e[at].ext.start += npages;
			p.e[at].ext.npages -= npages;
			pool_add(&p, got, (uint8) cone, true);
		}
		else
			p.e[at].tag = (uint8) cone;
		pool_merge(&p);
		pool_store(rel, cur, &p);

		state = ss_xlog_start(rel);
		m = ss_meta_register(rel, SS_KIND_LERT, state, &buf);
		lert_meta_set_free(m, cur);
		ss_xlog_finish(state);
		UnlockReleaseBuffer(buf);
		for (uint32 i = 0; i < p.n; i++)
			if (p.e[i].tag != LERT_FREE_POOL && !p.e[i].in_meta)
				lert_test_crash(rel, LERT_CRASH_RESERVED);
	}
	UnlockPage(rel, LERT_SPACE_LOCK, ExclusiveLock);
	pool_release(&p);
	pfree(cur);
	return got;
}

/*
 * Set the free list of the copy of cone's round (the metapage as read
 * under the cone's lock) to what the cone reserved, which a round that
 * failed left there, in block order (the copy's overflow takes what its
 * list has no room for).  The copy names a spill page version that a
 * writer may have replaced since: when it spilled anything, the live
 * metapage and its spill page are read under the space lock instead.
 * Either is a whole list: only the cone's rounds, which its lock
 * serializes, take or give back its reservations.
 */
void
lert_pool_take_reserved(Relation rel, uint32 cone, LertMeta *copy)
{
	LertMeta   *src = copy;
	LertExtent *mine;
	uint32		n = 0;

	mine = palloc(sizeof(LertExtent) *
				  (LERT_MAX_FREE_EXTENTS + LERT_MAX_SPILL_UNTAGGED));
	if (copy->nspill > 0)
	{
		char	   *area = palloc(SS_PAGE_DATA_SIZE);
		const LertExtent *spilled = (const LertExtent *) (area + SPILL_HEADER);
		const uint8 *tags;
		uint32		nspilled;

		src = palloc(sizeof(LertMeta));
		LockPage(rel, LERT_SPACE_LOCK, ExclusiveLock);
		if (!lert_read_meta(rel, src))
			elog(ERROR, "LERT \"%s\" has no metapage",
				 RelationGetRelationName(rel));
		(void) spill_read(rel, src, area, &nspilled, &tags, true);
		UnlockPage(rel, LERT_SPACE_LOCK, ExclusiveLock);
		for (uint32 i = 0; tags != NULL && i < nspilled; i++)
			if (tags[i] == cone)
				mine[n++] = spilled[i];
		pfree(area);
	}
	for (uint32 i = 0; i < src->nfree; i++)
		if (src->free_cone[i] == cone)
			mine[n++] = src->free_ext[i];
	copy->nfree = 0;
	for (uint32 i = 0; i < n; i++)
		lert_extent_free(copy, mine[i]);
	if (src != copy)
		pfree(src);
	pfree(mine);
}

/*
 * The pages the spill page of meta lists, for lert_info (without the space
 * lock: a version replaced meanwhile counts as none).
 */
int64
lert_pool_spill_pages(Relation rel, const LertMeta *meta)
{
	char	   *area = palloc(SS_PAGE_DATA_SIZE);
	int64		pages = 0;
	uint32		n;
	const uint8 *tags;

	if (spill_read(rel, meta, area, &n, &tags, false))
		for (uint32 i = 0; i < n; i++)
			pages += ((const LertExtent *) (area + SPILL_HEADER))[i].npages;
	pfree(area);
	return pages;
}
