/*-------------------------------------------------------------------------
 *
 * cbt_store.c
 *	  A cbt's pages: extents and their free list, node pages, fragments.
 *
 * Every node and fragment page starts with the generation of the install
 * that wrote it; a pointer carries the generation it expects.  Pages are
 * only ever written new (a node or fragment is never changed in place),
 * each whole, in its own WAL record, before the install that makes it
 * reachable.
 *
 * A fragment is a byte stream over its extent's pages, after each page's
 * generation: a header, the directory (one entry per block: its hash
 * range, offset, length and PAO count), then the blocks (cbt_codec.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <lz4.h>

#include "access/xlog.h"
#include "cbt.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#define PAGE_GEN_SIZE		sizeof(uint64)
#define FRAG_PAGE_BYTES		(SS_PAGE_DATA_SIZE - PAGE_GEN_SIZE)
#define FRAG_MAGIC			0x46544243	/* "CBTF": one extent */
#define FRAG_MAGIC_PIECES	0x50544243	/* "CBTP": in pieces */

typedef struct FragHeader
{
	uint32		magic;
	uint32		nblocks;
	uint64		npaos;
	uint64		generation;
} FragHeader;

/* After the header of a fragment in pieces: its extents, in block order. */
typedef struct FragPieces
{
	uint32		npieces;
	uint32		unused;
	CbtExtent	piece[FLEXIBLE_ARRAY_MEMBER];
} FragPieces;

#define FRAG_PIECES_SIZE(n)	(offsetof(FragPieces, piece) + sizeof(CbtExtent) * (n))

/* The header and piece list are read from the stream's first page. */
StaticAssertDecl(sizeof(FragHeader) + FRAG_PIECES_SIZE(CBT_FRAG_MAX_PIECES) <=
				 SS_PAGE_DATA_SIZE - sizeof(uint64),
				 "a fragment's piece list fits in its first page");

typedef struct FragDirEntry
{
	uint64		first_hash;
	uint64		last_hash;
	uint32		offset;			/* from the stream's start */
	uint32		length;
	uint32		npaos;
	uint32		unused;
} FragDirEntry;

/* ---- extents ---- */

/*
 * A new extent reserved at the end of the file by a round, recorded at
 * once as free in the live metapage (reusable at once: nothing can reach
 * it), so that if the round fails, or crashes, before its install the
 * next round finds it instead of reserving more; the install replaces the
 * live free list with the round's, where the extent is in use.  (The
 * metapage's part of the list keeps room for these: cbt_free_list_save.)
 */
static void
record_reserved(Relation rel, CbtExtent ext)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		metabuf;
	CbtMeta    *live = (CbtMeta *) ss_meta_register(rel, SS_KIND_CBT, state,
													&metabuf);
	CbtFreeList fl = {live->free_ext, live->nfree, CBT_MAX_FREE_EXTENTS, 0};

	cbt_extent_free(&fl, ext, FullTransactionIdFromU64(FirstNormalTransactionId));
	live->nfree = fl.n;
	live->leaked_pages += fl.leaked_pages;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
}

/*
 * The smallest free extent of at least npages that no snapshot can reach
 * any more (npages 0: the largest such extent); -1 if there is none.
 */
static int
free_list_reusable(const CbtFreeList *fl, uint32 npages)
{
	int			best = -1;

	for (uint32 i = 0; i < fl->n; i++)
	{
		const CbtFreeExtent *f = &fl->ext[i];

		bool		better = npages > 0 ?
			(f->npages >= npages &&
			 (best < 0 || f->npages < fl->ext[best].npages)) :
			(best < 0 || f->npages > fl->ext[best].npages);

		if (better && GlobalVisCheckRemovableFullXid(NULL, f->stamp))
			best = (int) i;
	}
	return best;
}

/* Take up to npages blocks from the start of free extent i. */
static CbtExtent
free_list_take(CbtFreeList *fl, int i, uint32 npages)
{
	CbtFreeExtent *f = &fl->ext[i];
	CbtExtent	ext;

	ext.start = f->start;
	ext.npages = Min(npages, f->npages);
	f->start += ext.npages;
	f->npages -= ext.npages;
	if (f->npages == 0)
	{
		memmove(f, f + 1, sizeof(CbtFreeExtent) * (fl->n - i - 1));
		fl->n--;
	}
	return ext;
}

/* npages new blocks after everything reserved so far. */
static CbtExtent
extent_at_end(Relation rel, uint32 npages)
{
	CbtExtent	ext;

	ext.start = ss_log_alloc_run(rel, npages);
	ext.npages = npages;
	record_reserved(rel, ext);
	return ext;
}

/*
 * npages blocks: the smallest free extent that is large enough and that
 * no snapshot can reach any more, else new blocks after everything
 * reserved so far.
 */
CbtExtent
cbt_extent_alloc(Relation rel, CbtFreeList *fl, uint32 npages)
{
	CbtExtent	ext = {InvalidBlockNumber, 0};
	int			best;

	if (npages == 0)
		return ext;
	best = free_list_reusable(fl, npages);
	if (best >= 0)
		return free_list_take(fl, best, npages);
	return extent_at_end(rel, npages);
}

bool
cbt_extent_fits(const CbtFreeList *fl, uint32 npages)
{
	return free_list_reusable(fl, npages) >= 0;
}

static int
extent_start_cmp(const void *a, const void *b)
{
	const CbtExtent *x = (const CbtExtent *) a;
	const CbtExtent *y = (const CbtExtent *) b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * npages blocks in at most maxpieces extents, in block order: reusable
 * free extents, the largest first, until the rest fits in one (or one
 * piece is left for new blocks at the end of the file).  A fragment
 * stored this way does not need a free hole as large as itself: with
 * fragments of every size freed and written out of place, the holes are
 * mostly smaller than the next fragment, and a file that grew whenever
 * none was large enough kept a third of its pages free.
 */
uint32
cbt_extent_alloc_pieces(Relation rel, CbtFreeList *fl, uint32 npages,
						CbtExtent *pieces, uint32 maxpieces)
{
	uint32		n = 0;
	uint32		rest = npages;

	Assert(maxpieces >= 1);
	while (rest > 0 && n < maxpieces - 1)
	{
		int			i = free_list_reusable(fl, rest);

		if (i < 0)
			i = free_list_reusable(fl, 0);
		if (i < 0)
			break;
		pieces[n] = free_list_take(fl, i, rest);
		rest -= pieces[n].npages;
		n++;
	}
	if (rest > 0)
		pieces[n++] = extent_at_end(rel, rest);
	qsort(pieces, n, sizeof(CbtExtent), extent_start_cmp);
	return n;
}

/*
 * Can extents stamped a and b be one?  Only if they become reusable
 * together: the same stamp, or both reusable already.  (Merging a newly
 * freed extent into a reusable neighbour, with the later stamp, kept
 * large free regions from ever being reused: each round froze them again
 * by freeing a piece next to them.)
 */
static bool
stamps_mergeable(FullTransactionId a, FullTransactionId b)
{
	return FullTransactionIdEquals(a, b) ||
		(GlobalVisCheckRemovableFullXid(NULL, a) &&
		 GlobalVisCheckRemovableFullXid(NULL, b));
}

static FullTransactionId
later_stamp(FullTransactionId a, FullTransactionId b)
{
	return FullTransactionIdFollows(a, b) ? a : b;
}

/*
 * A full free list makes room by joining two neighbouring extents (one
 * ends where the other starts), the one with the later stamp deciding
 * when both are reusable.  The join that delays the fewest pages: two
 * extents reusable already cost nothing; otherwise the pages of the one
 * stamped earlier wait longer, and waiting pages that were reusable
 * already count far more (that is what froze large free regions: see
 * stamps_mergeable).  False if no two extents are neighbours.
 */
static bool
free_list_make_room(CbtFreeList *fl)
{
	int			best = -1;
	int64		best_cost = PG_INT64_MAX;

	for (uint32 j = 0; j + 1 < fl->n; j++)
	{
		CbtFreeExtent *a = &fl->ext[j];
		CbtFreeExtent *b = a + 1;
		bool		ra;
		bool		rb;
		int64		cost;

		if (a->start + a->npages != b->start)
			continue;
		ra = GlobalVisCheckRemovableFullXid(NULL, a->stamp);
		rb = GlobalVisCheckRemovableFullXid(NULL, b->stamp);
		if (ra && rb)
			cost = 0;
		else
		{
			bool		a_earlier = FullTransactionIdPrecedes(a->stamp, b->stamp);
			const CbtFreeExtent *waits = a_earlier ? a : b;
			bool		was_reusable = a_earlier ? ra : rb;

			cost = (int64) waits->npages + (was_reusable ? INT64CONST(1) << 40 : 0);
		}
		if (cost < best_cost)
		{
			best = (int) j;
			best_cost = cost;
			if (cost == 0)
				break;
		}
	}
	if (best < 0)
		return false;
	fl->ext[best].npages += fl->ext[best + 1].npages;
	fl->ext[best].stamp = later_stamp(fl->ext[best].stamp,
											 fl->ext[best + 1].stamp);
	memmove(&fl->ext[best + 1], &fl->ext[best + 2],
			sizeof(CbtFreeExtent) * (fl->n - best - 2));
	fl->n--;
	return true;
}

/* The index of the list's smallest extent (the list is not empty). */
static uint32
free_list_smallest(const CbtFreeList *fl)
{
	uint32		smallest = 0;

	for (uint32 j = 1; j < fl->n; j++)
		if (fl->ext[j].npages < fl->ext[smallest].npages)
			smallest = j;
	return smallest;
}

/* Drop extent i from the list: its pages leak (until VACUUM FULL). */
static void
free_list_forget(CbtFreeList *fl, uint32 i)
{
	fl->leaked_pages += fl->ext[i].npages;
	memmove(&fl->ext[i], &fl->ext[i + 1],
			sizeof(CbtFreeExtent) * (fl->n - i - 1));
	fl->n--;
}

/* SSKeyAtFn of an array of CbtFreeExtent */
static uint64
extent_start_at(const void *arr, uint32 i)
{
	return ((const CbtFreeExtent *) arr)[i].start;
}

/* The index of the first extent starting at or after start. */
static uint32
free_list_position(const CbtFreeList *fl, BlockNumber start)
{
	return ss_lower_bound(fl->ext, 0, fl->n, start, extent_start_at);
}

/*
 * Give an extent back, stamped; merged with a neighbour that becomes
 * reusable with it (stamps_mergeable).  A full list joins two neighbours
 * to make room (free_list_make_room); only a full list without
 * neighbours forgets its smallest extent, whose blocks then stay unused
 * until VACUUM FULL (counted in leaked_pages, which cbt_info shows).  A
 * consolidator's list holds CBT_MAX_OVERFLOW_EXTENTS more than the
 * metapage, so that takes a relation of tens of thousands of scattered
 * free extents.
 */
void
cbt_extent_free(CbtFreeList *fl, CbtExtent ext, FullTransactionId stamp)
{
	uint32		i;

	if (ext.npages == 0 || ext.start == InvalidBlockNumber)
		return;
	i = free_list_position(fl, ext.start);
	if (i > 0 && fl->ext[i - 1].start + fl->ext[i - 1].npages == ext.start &&
		stamps_mergeable(fl->ext[i - 1].stamp, stamp))
	{
		CbtFreeExtent *prev = &fl->ext[i - 1];

		prev->npages += ext.npages;
		prev->stamp = later_stamp(stamp, prev->stamp);
		if (i < fl->n && ext.start + ext.npages == fl->ext[i].start &&
			stamps_mergeable(fl->ext[i].stamp, prev->stamp))
		{
			CbtFreeExtent *next = &fl->ext[i];

			prev->npages += next->npages;
			prev->stamp = later_stamp(next->stamp, prev->stamp);
			memmove(next, next + 1, sizeof(CbtFreeExtent) * (fl->n - i - 1));
			fl->n--;
		}
		return;
	}
	if (i < fl->n && ext.start + ext.npages == fl->ext[i].start &&
		stamps_mergeable(fl->ext[i].stamp, stamp))
	{
		CbtFreeExtent *next = &fl->ext[i];

		next->start = ext.start;
		next->npages += ext.npages;
		next->stamp = later_stamp(stamp, next->stamp);
		return;
	}
	if (fl->n >= fl->limit && free_list_make_room(fl))
	{
		/* entries moved: find the new extent's place again */
		i = free_list_position(fl, ext.start);
	}
	if (fl->n >= fl->limit)
	{
		uint32		smallest = free_list_smallest(fl);

		if (fl->ext[smallest].npages >= ext.npages)
		{
			fl->leaked_pages += ext.npages;
			return;
		}
		free_list_forget(fl, smallest);
		if (smallest < i)
			i--;
	}
	memmove(&fl->ext[i + 1], &fl->ext[i],
			sizeof(CbtFreeExtent) * (fl->n - i));
	fl->ext[i].start = ext.start;
	fl->ext[i].npages = ext.npages;
	fl->ext[i].stamp = stamp;
	fl->n++;
}

/* ---- the free list's pages ---- */

static void write_page(Relation rel, BlockNumber blkno, uint16 page_type,
					   const char *area);

/*
 * An overflow page: the install's generation (as every cbt page), the
 * number of extents on it, then the extents.  Extents that install freed
 * carry CBT_STAMP_PENDING: their stamp is read after the pages are
 * written, under the metapage's lock, and kept in the metapage.
 */
#define FREE_PAGE_HEADER	16
#define FREE_PER_PAGE \
	((uint32) ((SS_PAGE_DATA_SIZE - FREE_PAGE_HEADER) / sizeof(CbtFreeExtent)))
/*
 * The metapage's part of a saved list leaves this many entries free for
 * the extents a round reserves at the end of the file (record_reserved),
 * which join into one while they follow each other.
 */
#define META_FREE_SPARE		8

uint32
cbt_overflow_pages(uint32 nextents)
{
	return (nextents + FREE_PER_PAGE - 1) / FREE_PER_PAGE;
}

static int
free_extent_cmp(const void *a, const void *b)
{
	BlockNumber x = ((const CbtFreeExtent *) a)->start;
	BlockNumber y = ((const CbtFreeExtent *) b)->start;

	return x < y ? -1 : x > y ? 1 : 0;
}

static void
free_list_corrupted(Relation rel, BlockNumber blkno, const char *what)
{
	ss_page_corrupted(rel, blkno, "%s", what);
}

/*
 * The whole free list of the installed tree: the metapage's extents and
 * the overflow pages'.  The caller holds the consolidation lock (no
 * install can recycle the pages under it).  The two parts are each by
 * start block, but an extent reserved since the last install sits in the
 * metapage's part after the overflow's, hence the sort.  Extents that
 * overlap each other or the overflow pages, or lie outside the relation,
 * are damage: a consolidator that reused them would overwrite the tree.
 */
void
cbt_free_list_load(Relation rel, const CbtMeta *meta, CbtFreeList *fl)
{
	PGAlignedBlock area;
	uint32		npages = cbt_overflow_pages(meta->overflow_extents);

	/*
	 * Extents reserved since the last install may have filled the
	 * metapage's spare entries: the list may start a little past its limit
	 * (trimmed below).
	 */
	fl->limit = CBT_MAX_FREE_EXTENTS + CBT_MAX_OVERFLOW_EXTENTS;
	fl->ext = palloc(sizeof(CbtFreeExtent) *
					 Max(fl->limit, meta->nfree + meta->overflow_extents));
	fl->leaked_pages = 0;
	memcpy(fl->ext, meta->free_ext, sizeof(CbtFreeExtent) * meta->nfree);
	fl->n = meta->nfree;
	for (uint32 p = 0; p < npages; p++)
	{
		BlockNumber blkno = meta->overflow_start + p;
		uint32		count;

		CHECK_FOR_INTERRUPTS();
		if (!ss_read_stamped_page(rel, blkno, SS_PAGE_CBT_FREE,
								  meta->generation, area.data))
			free_list_corrupted(rel, blkno, "A page of the free list is missing or belongs to another version of it.");
		memcpy(&count, area.data + sizeof(uint64), sizeof(uint32));
		if (count != Min(FREE_PER_PAGE, meta->overflow_extents - p * FREE_PER_PAGE))
			free_list_corrupted(rel, blkno, "A page of the free list holds the wrong number of extents.");
		memcpy(fl->ext + fl->n, area.data + FREE_PAGE_HEADER,
			   sizeof(CbtFreeExtent) * count);
		for (uint32 i = fl->n; i < fl->n + count; i++)
			if (FullTransactionIdEquals(fl->ext[i].stamp, CBT_STAMP_PENDING))
				fl->ext[i].stamp = meta->overflow_stamp;
		fl->n += count;
	}
	if (npages > 0)
		qsort(fl->ext, fl->n, sizeof(CbtFreeExtent), free_extent_cmp);
	for (uint32 i = 0; i < fl->n; i++)
	{
		const CbtFreeExtent *f = &fl->ext[i];

		if (f->start < 1 || f->npages == 0 ||
			f->start >= meta->hdr.log.alloc_end ||
			f->npages > meta->hdr.log.alloc_end - f->start ||
			(i > 0 && f->start < fl->ext[i - 1].start + fl->ext[i - 1].npages) ||
			(npages > 0 && f->start < meta->overflow_start + npages &&
			 meta->overflow_start < f->start + f->npages))
			free_list_corrupted(rel, npages > 0 ? meta->overflow_start : SS_METAPAGE_BLKNO,
								"The free list's extents overlap each other or its own pages, or lie outside the relation.");
	}
	while (fl->n > fl->limit)
		free_list_forget(fl, free_list_smallest(fl));
}

/*
 * Store the list in meta (the round's copy, installed next): its first
 * extents in the metapage, the rest in new overflow pages written now;
 * the old overflow pages are freed with the install's other extents.
 * Call before the install locks the metapage (this reads and writes
 * other pages), then cbt_free_list_stamp under its lock.
 */
void
cbt_free_list_save(Relation rel, CbtFreeList *fl, CbtMeta *meta)
{
	uint32		in_meta = CBT_MAX_FREE_EXTENTS - META_FREE_SPARE;
	PGAlignedBlock area;
	CbtExtent	ext = {InvalidBlockNumber, 0};
	uint32		rest;

	if (meta->overflow_extents > 0)
	{
		CbtExtent	old;

		old.start = meta->overflow_start;
		old.npages = cbt_overflow_pages(meta->overflow_extents);
		cbt_extent_free(fl, old, CBT_STAMP_PENDING);
	}
	meta->overflow_start = 0;
	meta->overflow_extents = 0;
	meta->overflow_free_pages = 0;

	/*
	 * The pages' own extent comes from the list, which that may shorten by
	 * one extent: then the metapage keeps fewer, so the pages stay full.
	 */
	if (fl->n > in_meta)
	{
		ext = cbt_extent_alloc(rel, fl, cbt_overflow_pages(fl->n - in_meta));
		rest = Max(fl->n - in_meta, (ext.npages - 1) * FREE_PER_PAGE + 1);
	}
	else
		rest = 0;
	in_meta = fl->n - rest;
	for (uint32 p = 0; p < ext.npages; p++)
	{
		uint32		first = in_meta + p * FREE_PER_PAGE;
		uint32		count = Min(FREE_PER_PAGE, fl->n - first);

		memset(area.data, 0, SS_PAGE_DATA_SIZE);
		memcpy(area.data, &meta->generation, sizeof(uint64));
		memcpy(area.data + sizeof(uint64), &count, sizeof(uint32));
		memcpy(area.data + FREE_PAGE_HEADER, fl->ext + first,
			   sizeof(CbtFreeExtent) * count);
		write_page(rel, ext.start + p, SS_PAGE_CBT_FREE, area.data);
	}
	if (rest > 0)
	{
		meta->overflow_start = ext.start;
		meta->overflow_extents = rest;
		for (uint32 i = in_meta; i < fl->n; i++)
			meta->overflow_free_pages += fl->ext[i].npages;
	}
	meta->nfree = in_meta;
	memcpy(meta->free_ext, fl->ext, sizeof(CbtFreeExtent) * meta->nfree);
	meta->leaked_pages += fl->leaked_pages;
	fl->leaked_pages = 0;
}

/* Stamp what the install frees (now: read under the metapage's lock). */
void
cbt_free_list_stamp(CbtFreeList *fl, CbtMeta *meta, FullTransactionId now)
{
	for (uint32 i = 0; i < meta->nfree; i++)
		if (FullTransactionIdEquals(meta->free_ext[i].stamp, CBT_STAMP_PENDING))
			meta->free_ext[i].stamp = now;
	for (uint32 i = 0; i < fl->n; i++)
		if (FullTransactionIdEquals(fl->ext[i].stamp, CBT_STAMP_PENDING))
			fl->ext[i].stamp = now;
	meta->overflow_stamp = now;
}

/* ---- pages ---- */

/* A page of the tree was recycled under a reader (ss_stale_page). */
void
cbt_stale_page(Relation rel, BlockNumber blkno)
{
	ss_stale_page(rel, blkno,
				  "A page of the tree is missing or belongs to another version of it.");
}

static void
write_page(Relation rel, BlockNumber blkno, uint16 page_type, const char *area)
{
	ss_write_full_page(rel, blkno, page_type, area);
}

/* Copy page blkno's area if install gen wrote it; else it was recycled. */
static void
read_page(Relation rel, BlockNumber blkno, uint16 page_type, uint64 gen,
		  char *area)
{
	if (!ss_read_stamped_page(rel, blkno, page_type, gen, area))
		cbt_stale_page(rel, blkno);
}

/* ---- nodes ---- */

void
cbt_write_node(Relation rel, BlockNumber blkno, const CbtNode *node)
{
	PGAlignedBlock area;

	memset(area.data, 0, SS_PAGE_DATA_SIZE);
	memcpy(area.data, node, sizeof(CbtNode));
	write_page(rel, blkno, SS_PAGE_CBT_NODE, area.data);
}

static void
node_corrupted(Relation rel, BlockNumber blkno, const char *what)
{
	ss_page_corrupted(rel, blkno, "Node page: %s.", what);
}

/*
 * Read and check a node page: everything a reader will index or loop
 * over is checked against its bounds before it is used.
 */
void
cbt_read_node(Relation rel, BlockNumber blkno, uint64 generation,
			  CbtNode *node)
{
	PGAlignedBlock area;

	read_page(rel, blkno, SS_PAGE_CBT_NODE, generation, area.data);
	memcpy(node, area.data, sizeof(CbtNode));
	if (node->level >= CBT_MAX_HEIGHT)
		node_corrupted(rel, blkno, "its level is impossible");
	if (node->nfragments > CBT_MAX_FRAGMENTS)
		node_corrupted(rel, blkno, "too many fragments");
	if (node->lo > node->hi)
		node_corrupted(rel, blkno, "its hash range is empty");
	if (node->level == 0 ? node->nchildren != 0 :
		(node->nchildren < 1 || node->nchildren > CBT_MAX_FANOUT ||
		 node->pivot[0] != node->lo))
		node_corrupted(rel, blkno, "its children do not match its level");
	for (uint32 i = 1; i < node->nchildren; i++)
		if (node->pivot[i] <= node->pivot[i - 1] || node->pivot[i] > node->hi)
			node_corrupted(rel, blkno, "its pivots are out of order");
	for (uint32 i = 0; i < node->nchildren; i++)
		if (node->child[i] == InvalidBlockNumber || node->child[i] == SS_METAPAGE_BLKNO)
			node_corrupted(rel, blkno, "a child block is impossible");
	for (uint32 i = 0; i < node->nfragments; i++)
	{
		const CbtFragment *f = &node->fragments[i];

		if (f->ext.start == InvalidBlockNumber || f->ext.start == SS_METAPAGE_BLKNO ||
			f->ext.npages == 0 || f->npaos == 0 || f->nblocks == 0 ||
			f->min_hash > f->max_hash || f->min_hash < node->lo ||
			f->max_hash > node->hi || f->npieces == 1 ||
			f->npieces > CBT_FRAG_MAX_PIECES ||
			(f->npieces == 0 &&
			 f->stored_bytes > (uint64) f->ext.npages * FRAG_PAGE_BYTES))
			node_corrupted(rel, blkno, "a fragment descriptor is impossible");
	}
}

/* ---- writing fragments ---- */

void
cbt_frag_writer_begin(CbtFragWriter *w, Relation rel, CbtFreeList *free,
					  uint64 generation, bool compress)
{
	memset(w, 0, sizeof(*w));
	w->rel = rel;
	w->free = free;
	w->generation = generation;
	w->compress = compress;
	initStringInfo(&w->pending);
	initStringInfo(&w->blocks);
	initStringInfo(&w->dir);
	initStringInfo(&w->block_raw);
	w->maxpending = 1024;
	w->paos = palloc(sizeof(CbtPaoRef) * w->maxpending);
}

/* Encode the pending PAOs as the fragment's next block. */
static void
flush_block(CbtFragWriter *w)
{
	FragDirEntry e;
	Size		cap;
	char	   *scratch = NULL;
	Size		len;
	Size		off = 0;
	uint32		raw = (uint32) w->pending.len;

	if (w->npending == 0)
		return;
	/* the PAOs point into pending, which may have moved while it grew */
	for (uint32 i = 0; i < w->npending; i++)
	{
		w->paos[i].data = w->pending.data + off;
		off += w->paos[i].size;
	}
	cap = cbt_block_bound(w->npending, w->pending.len);
	enlargeStringInfo(&w->blocks, (int) cap);
	if (w->compress)
		scratch = palloc(LZ4_compressBound(w->pending.len) + 1);
	len = cbt_block_encode(w->paos, w->npending, w->compress,
						   w->blocks.data + w->blocks.len, cap, scratch);
	if (scratch)
		pfree(scratch);
	if (len == 0)
		elog(ERROR, "could not encode a block of %u PAOs", w->npending);
	if ((uint64) w->blocks.len + len > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a fragment of cbt \"%s\" would exceed 4 GB",
						RelationGetRelationName(w->rel))));
	memset(&e, 0, sizeof(e));
	e.first_hash = w->paos[0].hash;
	e.last_hash = w->paos[w->npending - 1].hash;
	e.offset = (uint32) w->blocks.len;	/* made the stream's when written */
	e.length = (uint32) len;
	e.npaos = w->npending;
	w->blocks.len += (int) len;
	appendBinaryStringInfo(&w->dir, (const char *) &e, sizeof(e));
	appendBinaryStringInfo(&w->block_raw, (const char *) &raw, sizeof(raw));
	w->nblocks++;
	w->npending = 0;
	resetStringInfo(&w->pending);
}

void
cbt_frag_writer_add(CbtFragWriter *w, uint64 hash, const char *pao,
					uint32 size)
{
	if (size > CBT_PAO_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a group's partial aggregate of %u bytes is too large for cbt \"%s\"",
						size, RelationGetRelationName(w->rel)),
				 errdetail("A group's key and states may take at most %d bytes.",
						   CBT_PAO_MAX_BYTES)));
	if (w->npaos > 0 && hash < w->max_hash)
		elog(ERROR, "cbt fragment PAOs out of hash order");
	/* a large PAO is a block of its own */
	if (w->npending > 0 &&
		(w->pending.len + (Size) size > CBT_BLOCK_TARGET_RAW ||
		 w->npending == CBT_BLOCK_MAX_PAOS ||
		 size > CBT_BLOCK_MAX_RAW))
		flush_block(w);
	if (w->npending == w->maxpending)
	{
		w->maxpending *= 2;
		w->paos = repalloc(w->paos, sizeof(CbtPaoRef) * w->maxpending);
	}
	w->paos[w->npending].hash = hash;
	w->paos[w->npending].size = size;
	w->paos[w->npending].data = NULL;
	w->npending++;
	appendBinaryStringInfo(&w->pending, pao, size);
	if (w->npaos == 0)
		w->min_hash = hash;
	w->max_hash = hash;
	w->npaos++;
	w->raw_bytes += size;
	if (size > CBT_BLOCK_MAX_RAW)
		flush_block(w);
}

static void
frag_writer_free(CbtFragWriter *w)
{
	pfree(w->pending.data);
	pfree(w->blocks.data);
	pfree(w->dir.data);
	pfree(w->block_raw.data);
	pfree(w->paos);
}

/*
 * Write blocks [first, end) of w, which ended, as one fragment to new
 * pages: one free extent, or pieces of several when none is large enough.
 */
static void
frag_write(CbtFragWriter *w, uint32 first, uint32 end, CbtFragment *out)
{
	const FragDirEntry *dir = (const FragDirEntry *) w->dir.data;
	const uint32 *block_raw = (const uint32 *) w->block_raw.data;
	uint32		nblocks = end - first;
	Size		blocks_from = dir[first].offset;
	Size		blocks_len = dir[end - 1].offset + dir[end - 1].length - blocks_from;
	FragHeader	h;
	Size		dirlen;
	Size		headlen;
	Size		total;
	uint32		npages;
	CbtExtent	pieces[CBT_FRAG_MAX_PIECES];
	uint32		npieces;
	char	   *stream;
	PGAlignedBlock area;

	memset(out, 0, sizeof(*out));
	dirlen = sizeof(FragDirEntry) * (Size) nblocks;
	total = sizeof(FragHeader) + dirlen + blocks_len;
	if (total + FRAG_PIECES_SIZE(CBT_FRAG_MAX_PIECES) > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a fragment of cbt \"%s\" would exceed 4 GB",
						RelationGetRelationName(w->rel))));

	/*
	 * One free extent if one is large enough; else pieces, with room for
	 * the longest piece list (the unused rest of it stays zero).
	 */
	npages = (uint32) ((total + FRAG_PAGE_BYTES - 1) / FRAG_PAGE_BYTES);
	headlen = sizeof(FragHeader);
	if (cbt_extent_fits(w->free, npages))
	{
		pieces[0] = cbt_extent_alloc(w->rel, w->free, npages);
		npieces = 1;
	}
	else
	{
		npages = (uint32) ((total + FRAG_PIECES_SIZE(CBT_FRAG_MAX_PIECES) +
							FRAG_PAGE_BYTES - 1) / FRAG_PAGE_BYTES);
		npieces = cbt_extent_alloc_pieces(w->rel, w->free, npages, pieces,
										  CBT_FRAG_MAX_PIECES);
		if (npieces > 1)
			headlen += FRAG_PIECES_SIZE(npieces);
	}
	total += headlen - sizeof(FragHeader);

	memset(&h, 0, sizeof(h));
	h.magic = npieces > 1 ? FRAG_MAGIC_PIECES : FRAG_MAGIC;
	h.nblocks = nblocks;
	h.generation = w->generation;
	stream = palloc0((Size) npages * FRAG_PAGE_BYTES);
	if (npieces > 1)
	{
		FragPieces *fp = (FragPieces *) (stream + sizeof(h));

		fp->npieces = npieces;
		memcpy(fp->piece, pieces, sizeof(CbtExtent) * npieces);
	}
	/* the directory, its offsets from the stream's start */
	for (uint32 i = 0; i < nblocks; i++)
	{
		FragDirEntry e = dir[first + i];

		e.offset = (uint32) (e.offset - blocks_from + headlen + dirlen);
		memcpy(stream + headlen + i * sizeof(FragDirEntry), &e, sizeof(e));
		h.npaos += e.npaos;
		out->raw_bytes += block_raw[first + i];
	}
	memcpy(stream, &h, sizeof(h));
	memcpy(stream + headlen + dirlen, w->blocks.data + blocks_from, blocks_len);

	for (uint32 p = 0; p < npages; p++)
	{
		memset(area.data, 0, SS_PAGE_DATA_SIZE);
		memcpy(area.data, &w->generation, PAGE_GEN_SIZE);
		memcpy(area.data + PAGE_GEN_SIZE, stream + (Size) p * FRAG_PAGE_BYTES,
			   FRAG_PAGE_BYTES);
		write_page(w->rel, ss_extents_block(pieces, npieces, p),
				   SS_PAGE_CBT_FRAGMENT, area.data);
	}
	pfree(stream);

	out->ext = pieces[0];
	out->npieces = npieces > 1 ? npieces : 0;
	out->generation = w->generation;
	out->min_hash = dir[first].first_hash;
	out->max_hash = dir[end - 1].last_hash;
	out->npaos = h.npaos;
	out->stored_bytes = total;
	out->nblocks = nblocks;
}

/*
 * Write the fragment; false if it has no PAO (nothing is written).  Frees
 * the writer's memory.
 */
bool
cbt_frag_writer_end(CbtFragWriter *w, CbtFragment *out)
{
	flush_block(w);
	memset(out, 0, sizeof(*out));
	if (w->npaos > 0)
		frag_write(w, 0, w->nblocks, out);
	frag_writer_free(w);
	return w->npaos > 0;
}

/*
 * Write the fragment as out[0..n-1], n <= maxfrags fragments of at most
 * about piece_raw PAO bytes each and as equal as its blocks allow (a
 * leaf just over its limit splits in halves, not in a full piece and a
 * crumb that would wait for a whole buffer of fragments before it is
 * merged again); n, 0 if there is no PAO.  The fragments' hash ranges
 * are disjoint: a cut never falls between two PAOs of one hash.  Frees
 * the writer's memory.
 */
int
cbt_frag_writer_end_split(CbtFragWriter *w, uint64 piece_raw, int maxfrags,
						  CbtFragment *out)
{
	const FragDirEntry *dir;
	const uint32 *block_raw;
	uint64		nfrags;
	uint64		done = 0;
	uint32		first = 0;
	int			n = 0;

	flush_block(w);
	if (w->npaos == 0)
	{
		frag_writer_free(w);
		return 0;
	}
	dir = (const FragDirEntry *) w->dir.data;
	block_raw = (const uint32 *) w->block_raw.data;
	nfrags = (w->raw_bytes + Max(piece_raw, 1) - 1) / Max(piece_raw, 1);
	nfrags = Max(1, Min(nfrags, (uint64) maxfrags));
	for (uint32 i = 0; i < w->nblocks; i++)
	{
		done += block_raw[i];
		/* cut after block i once this fragment has its share */
		if (i + 1 < w->nblocks && n + 1 < (int) nfrags &&
			done * nfrags >= w->raw_bytes * (uint64) (n + 1) &&
			dir[i].last_hash != dir[i + 1].first_hash)
		{
			frag_write(w, first, i + 1, &out[n++]);
			first = i + 1;
		}
	}
	frag_write(w, first, w->nblocks, &out[n++]);
	frag_writer_free(w);
	return n;
}

/* ---- reading fragments ---- */

/*
 * The extents of frag's stream, in order, into pieces (room for
 * CBT_FRAG_MAX_PIECES); their number.  A fragment in pieces lists them in
 * its first page, which is checked as any page read from disk: the list
 * must start with the descriptor's extent, hold the stream's pages
 * exactly (up to the one page of room kept for the list) and name no
 * block twice.
 */
int
cbt_frag_pieces(Relation rel, const CbtFragment *frag, CbtExtent *pieces)
{
	PGAlignedBlock area;
	FragHeader	h;
	FragPieces	fp;
	uint64		pages = 0;
	uint64		need;

	pieces[0] = frag->ext;
	if (frag->npieces == 0)
		return 1;
	read_page(rel, frag->ext.start, SS_PAGE_CBT_FRAGMENT, frag->generation,
			  area.data);
	memcpy(&h, area.data + PAGE_GEN_SIZE, sizeof(h));
	memcpy(&fp, area.data + PAGE_GEN_SIZE + sizeof(h), offsetof(FragPieces, piece));
	if (h.magic != FRAG_MAGIC_PIECES || fp.npieces != frag->npieces ||
		fp.npieces > CBT_FRAG_MAX_PIECES || fp.unused != 0)
		ss_page_corrupted(rel, frag->ext.start,
						  "Fragment: its piece list does not match its descriptor.");
	memcpy(pieces, area.data + PAGE_GEN_SIZE + sizeof(h) +
		   offsetof(FragPieces, piece), sizeof(CbtExtent) * fp.npieces);
	for (uint32 i = 0; i < fp.npieces; i++)
	{
		const CbtExtent *e = &pieces[i];

		if (e->start == InvalidBlockNumber || e->start == SS_METAPAGE_BLKNO ||
			e->npages == 0 || e->npages > MaxBlockNumber - e->start ||
			(i == 0 ? e->start != frag->ext.start || e->npages != frag->ext.npages :
			 e->start < pieces[i - 1].start + pieces[i - 1].npages))
			ss_page_corrupted(rel, frag->ext.start,
							  "Fragment: its piece list is impossible.");
		pages += e->npages;
	}
	need = (frag->stored_bytes + FRAG_PAGE_BYTES - 1) / FRAG_PAGE_BYTES;
	if (pages < need || pages > need + 1)
		ss_page_corrupted(rel, frag->ext.start,
						  "Fragment: its pieces do not hold its bytes.");
	return (int) fp.npieces;
}

/* Copy len bytes of c's fragment stream from offset off into dst. */
static void
frag_read(CbtFragCursor *c, Size off, Size len, char *dst)
{
	PGAlignedBlock area;

	if (off + len > c->frag.stored_bytes)
		ss_page_corrupted(c->rel, c->frag.ext.start,
						  "A fragment's directory points past its end.");
	while (len > 0)
	{
		uint32		p = (uint32) (off / FRAG_PAGE_BYTES);
		Size		in_page = off % FRAG_PAGE_BYTES;
		Size		n = Min(len, FRAG_PAGE_BYTES - in_page);
		BlockNumber blkno = ss_extents_block(c->pieces, (uint32) c->npieces, p);

		CHECK_FOR_INTERRUPTS();
		if (blkno == InvalidBlockNumber)
			ss_page_corrupted(c->rel, c->frag.ext.start,
							  "A fragment's stream runs past its extents.");
		read_page(c->rel, blkno, SS_PAGE_CBT_FRAGMENT,
				  c->frag.generation, area.data);
		memcpy(dst, area.data + PAGE_GEN_SIZE + in_page, n);
		dst += n;
		off += n;
		len -= n;
	}
}

static void
frag_corrupted(CbtFragCursor *c, const char *what)
{
	ss_page_corrupted(c->rel, c->frag.ext.start, "Fragment: %s.", what);
}

static FragDirEntry *
dir_entry(CbtFragCursor *c, uint32 i)
{
	return (FragDirEntry *) (c->dir + (Size) i * sizeof(FragDirEntry));
}

/* SSKeyAtFn of a fragment's block directory (CbtFragCursor.dir) */
static uint64
block_last_hash_at(const void *arr, uint32 i)
{
	return ((const FragDirEntry *) ((const char *) arr +
									(Size) i * sizeof(FragDirEntry)))->last_hash;
}

/* Open a fragment whose descriptor cbt_read_node checked. */
void
cbt_frag_open(CbtFragCursor *c, Relation rel, const CbtFragment *frag)
{
	FragHeader	h;
	Size		headlen;
	Size		dirlen;
	uint64		prev_last = 0;
	uint64		npaos = 0;

	memset(c, 0, sizeof(*c));
	c->rel = rel;
	c->frag = *frag;
	c->npieces = cbt_frag_pieces(rel, frag, c->pieces);
	headlen = sizeof(h) + (frag->npieces > 0 ? FRAG_PIECES_SIZE(frag->npieces) : 0);
	frag_read(c, 0, sizeof(h), (char *) &h);
	if (h.magic != (frag->npieces > 0 ? FRAG_MAGIC_PIECES : FRAG_MAGIC) ||
		h.nblocks != frag->nblocks ||
		h.npaos != frag->npaos || h.generation != frag->generation)
		frag_corrupted(c, "its header does not match its descriptor");
	dirlen = sizeof(FragDirEntry) * (Size) h.nblocks;
	if (headlen + dirlen > frag->stored_bytes)
		frag_corrupted(c, "its directory is longer than the fragment");
	c->dir = palloc(dirlen);
	frag_read(c, headlen, dirlen, c->dir);
	for (uint32 i = 0; i < h.nblocks; i++)
	{
		FragDirEntry *e = dir_entry(c, i);

		if (e->offset < headlen + dirlen ||
			(uint64) e->offset + e->length > frag->stored_bytes ||
			e->first_hash > e->last_hash || e->npaos == 0 ||
			e->npaos > CBT_BLOCK_MAX_PAOS ||
			(i > 0 && e->first_hash < prev_last))
			frag_corrupted(c, "its directory is out of order");
		prev_last = e->last_hash;
		npaos += e->npaos;
	}
	if (npaos != frag->npaos)
		frag_corrupted(c, "its blocks do not hold its PAOs");
}

static void
unload(CbtFragCursor *c)
{
	if (c->loaded)
	{
		pfree(c->hashes);
		pfree(c->sizes);
		pfree(c->data);
		c->loaded = false;
	}
}

/*
 * Decode block c->block, read into raw (its directory entry e): its
 * hashes, unless the caller decoded and checked them into hashes (palloc'd,
 * taken over), then its sizes and data.
 */
static void
decode_block(CbtFragCursor *c, FragDirEntry *e, char *raw, uint64 *hashes)
{
	c->hashes = hashes ? hashes : palloc(sizeof(uint64) * c->hdr.npaos);
	c->sizes = palloc(sizeof(uint32) * c->hdr.npaos);
	c->data = palloc(Max(c->hdr.data_raw, 1));
	if ((hashes == NULL &&
		 (!cbt_block_decode_hashes(raw, &c->hdr, c->hashes) ||
		  c->hashes[0] != e->first_hash ||
		  c->hashes[c->hdr.npaos - 1] != e->last_hash)) ||
		!cbt_block_decode_data(raw, e->length, &c->hdr, c->sizes, c->data))
		frag_corrupted(c, "a block is damaged");
	c->loaded = true;
	c->pos = 0;
	c->offset = 0;
	c->block++;
}

/* Read block c->block and check its header (e: its directory entry). */
static char *
read_block(CbtFragCursor *c, FragDirEntry *e)
{
	char	   *raw = palloc(e->length);

	frag_read(c, e->offset, e->length, raw);
	if (!cbt_block_peek(raw, e->length, &c->hdr) || c->hdr.npaos != e->npaos)
		frag_corrupted(c, "a block's header is damaged");
	return raw;
}

/* Load block c->block; false past the last one. */
static bool
load_block(CbtFragCursor *c)
{
	FragDirEntry *e;
	char	   *raw;

	unload(c);
	if (c->block >= c->frag.nblocks)
		return false;
	e = dir_entry(c, c->block);
	raw = read_block(c, e);
	decode_block(c, e, raw, NULL);
	pfree(raw);
	return true;
}

/*
 * Position c before its first PAO of hash, or at its end when it has none
 * (a lookup's seek: it reads the PAOs of its hash).  The one block that
 * could hold the hash first has its hashes decoded, checked against the
 * directory as a whole decode checks them; its sizes and data (LZ4) are
 * decoded only when it holds the hash, which most blocks a lookup meets
 * (its path's upper nodes') do not.
 */
void
cbt_frag_seek(CbtFragCursor *c, uint64 hash)
{
	FragDirEntry *e;
	char	   *raw;
	uint64	   *hashes;
	uint32		blk;
	uint32		pos;

	/* the first block whose last hash is >= hash */
	blk = ss_lower_bound(c->dir, 0, c->frag.nblocks, hash, block_last_hash_at);
	unload(c);
	c->block = c->frag.nblocks;
	if (blk >= c->frag.nblocks || dir_entry(c, blk)->first_hash > hash)
		return;
	e = dir_entry(c, blk);
	raw = read_block(c, e);
	hashes = palloc(sizeof(uint64) * c->hdr.npaos);
	if (!cbt_block_decode_hashes(raw, &c->hdr, hashes) ||
		hashes[0] != e->first_hash || hashes[c->hdr.npaos - 1] != e->last_hash)
		frag_corrupted(c, "a block is damaged");
	/* the first PAO whose hash is >= hash (the last one's is) */
	pos = ss_lower_bound(hashes, 0, c->hdr.npaos - 1, hash, ss_uint64_at);
	if (hashes[pos] == hash)
	{
		c->block = blk;
		decode_block(c, e, raw, hashes);
		while (c->pos < pos)
			c->offset += c->sizes[c->pos++];
	}
	else
		pfree(hashes);
	pfree(raw);
}

/*
 * The next PAO (valid until the next call); false at the end.
 */
bool
cbt_frag_next(CbtFragCursor *c, uint64 *hash, const char **pao, uint32 *size)
{
	while (!c->loaded || c->pos >= c->hdr.npaos)
		if (!load_block(c))
			return false;
	*hash = c->hashes[c->pos];
	*size = c->sizes[c->pos];
	*pao = c->data + c->offset;
	c->offset += c->sizes[c->pos];
	c->pos++;
	return true;
}

/* The hash of the PAO cbt_frag_next would return; false at the end. */
bool
cbt_frag_peek_hash(CbtFragCursor *c, uint64 *hash)
{
	if (c->loaded && c->pos < c->hdr.npaos)
	{
		*hash = c->hashes[c->pos];
		return true;
	}
	if (c->block < c->frag.nblocks)
	{
		*hash = dir_entry(c, c->block)->first_hash;
		return true;
	}
	return false;
}

void
cbt_frag_close(CbtFragCursor *c)
{
	unload(c);
	if (c->dir)
		pfree(c->dir);
	c->dir = NULL;
}
