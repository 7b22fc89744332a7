/*-------------------------------------------------------------------------
 *
 * lert_store.c
 *	  A LERT's pages: extents and their free list, level-0 and run pages,
 *	  runs written in order and read in order or by key, and the report
 *	  stream.
 *
 * Extents come from the metapage's free list (best fit) or from new blocks
 * after everything reserved so far (ss_log_alloc_run).  Only a cone's
 * round, holding the cone's lock, allocates and frees, on its own copy of
 * the metapage, which reserves pages from the pool in the live metapage
 * as it needs them (lert_pool_reserve); the copy's list reaches the metapage
 * with the install that makes the new pages live, so a round that fails
 * leaves every free page free (its reservations tagged for its cone's
 * next round; blocks taken from new space by such a round stay unused
 * until VACUUM FULL, as a quotient filter's).
 *
 * Readers never lock a level: they check each page's type and generation
 * against the descriptor they read, and a page that was freed and reused
 * meanwhile (LERT_STALE) sends them back to the metapage.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lert.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

typedef struct LertReportPageHeader
{
	int64		first_id;		/* id of the page's first report */
	uint32		nreports;		/* written; valid up to LertMeta.nreports */
	uint32		used;			/* bytes of reports */
} LertReportPageHeader;

#define REPORT_HEADER	MAXALIGN(sizeof(LertReportPageHeader))

/* ---- the metapage ---- */

/* Read and check the metapage contents; false if there is none yet. */
bool
lert_read_meta(Relation rel, LertMeta *meta)
{
	return ss_read_structure_meta(rel, &lert_structure, meta);
}

/* ---- extents ---- */

/*
 * Free extents.  The pool's lists (the metapage's and its spill page's,
 * lert_pool.c) tag each one: LERT_FREE_POOL for the pool, else the cone
 * whose round reserved it.  A round allocates from and frees into its
 * copy's list (meta->free_ext[0 .. nfree - 1], tags unused), which starts
 * with what its cone reserved and a failed round left there.  When the
 * copy has no fit, the round reserves pages from the pool: it tags them
 * with its cone in one metapage record under the space lock
 * (lert_pool_reserve), so no other cone's round takes them, and a round
 * that fails leaves them free, for its cone's next round.  Its install
 * gives everything its copy still lists back to the pool
 * (lert_round_install), where they merge with their neighbours whatever
 * cone freed them: with each cone reusing only its own extents, a
 * four-cone LERT's extents interleaved block by block, never merged and
 * overflowed the list (twice one cone's file).  A one-cone LERT's copy
 * holds the metapage's whole list, as no other round can reserve from it
 * (spilled extents come back to the list when they are among the
 * largest, lert_pool.c).  Pages taken from the copy leave the metapage's
 * list only with the install that uses them.  Beyond the free extents,
 * pages come from the file's end (ss_log_alloc_run).
 */

static uint32 free_smallest(const LertMeta *meta);

/* Take n pages at index i of meta's list (n <= its extent's pages). */
static LertExtent
free_take(LertMeta *meta, uint32 i, BlockNumber n)
{
	LertExtent *f = &meta->free_ext[i];
	LertExtent	ext;

	ext.start = f->start;
	ext.npages = n;
	f->start += n;
	f->npages -= n;
	if (f->npages == 0)
	{
		memmove(f, f + 1, sizeof(LertExtent) * (meta->nfree - i - 1));
		memmove(&meta->free_cone[i], &meta->free_cone[i + 1],
				meta->nfree - i - 1);
		meta->nfree--;
	}
	return ext;
}

/* The index of meta's smallest extent of at least npages, or -1. */
static int
free_best_fit(const LertMeta *meta, BlockNumber npages)
{
	int			best = -1;

	for (uint32 i = 0; i < meta->nfree; i++)
		if (meta->free_ext[i].npages >= npages &&
			(best < 0 || meta->free_ext[i].npages < meta->free_ext[best].npages))
			best = (int) i;
	return best;
}

/* The first n pages of ext; the rest goes to meta's list. */
static LertExtent
extent_use_head(LertMeta *meta, LertExtent ext, BlockNumber n)
{
	LertExtent	rest;

	rest.start = ext.start + n;
	rest.npages = ext.npages - n;
	lert_extent_free(meta, rest);
	ext.npages = n;
	return ext;
}

/*
 * npages for cone's round (meta: its copy): the copy's smallest extent
 * that holds them, else the pool's, else after everything allocated so
 * far (ss_log_alloc_run).
 */
LertExtent
lert_extent_alloc(Relation rel, LertMeta *meta, uint32 cone,
				  BlockNumber npages)
{
	LertExtent	ext = {InvalidBlockNumber, 0};
	int			best;

	if (npages == 0)
		return ext;
	best = free_best_fit(meta, npages);
	if (best >= 0)
		return free_take(meta, (uint32) best, npages);
	if (meta->params.ncones > 1)
	{
		ext = lert_pool_reserve(rel, cone, npages, false);
		if (ext.npages > 0)
			return extent_use_head(meta, ext, npages);
	}
	ext.start = ss_log_alloc_run(rel, npages);
	ext.npages = npages;
	return ext;
}

/*
 * Up to npages of the copy's lowest extent, else of the pool's, else as
 * lert_extent_alloc.
 */
LertExtent
lert_extent_alloc_some(Relation rel, LertMeta *meta, uint32 cone,
					   BlockNumber npages)
{
	LertExtent	ext;

	if (npages > 0 && meta->nfree > 0)
		return free_take(meta, 0, Min(meta->free_ext[0].npages, npages));
	if (npages > 0 && meta->params.ncones > 1)
	{
		ext = lert_pool_reserve(rel, cone, npages, true);
		if (ext.npages > 0)
			return extent_use_head(meta, ext, Min(ext.npages, npages));
	}
	ext.start = ss_log_alloc_run(rel, npages);
	ext.npages = npages;
	return ext;
}

/*
 * Extents a round's full copy had no room for (lert_extent_free), kept in
 * backend memory until the round's install gives them to the pool with
 * the copy's list (lert_pool_give_back).  Only the copy begun last
 * (lert_copy_overflow_reset) keeps them: a round that fails loses them
 * with its copy, as it must (its merges' frees are still the installed
 * version's pages).
 */
static const LertMeta *overflow_owner = NULL;
static LertExtent overflow_ext[LERT_MAX_SPILL_EXTENTS];
static uint32 overflow_n = 0;

/* A round's copy begins (or was installed): it has no overflow yet. */
void
lert_copy_overflow_reset(const LertMeta *copy)
{
	overflow_owner = copy;
	overflow_n = 0;
}

/* The overflow of copy (*n extents), which the caller gives away. */
const LertExtent *
lert_copy_overflow(const LertMeta *copy, uint32 *n)
{
	*n = overflow_owner == copy ? overflow_n : 0;
	return overflow_ext;
}

/*
 * Give an extent back to a round's copy, merging it with its neighbours.
 * A full list moves its smallest extent to the copy's overflow; only when
 * that is full too is an extent forgotten (its blocks stay unused until
 * VACUUM FULL).
 */
void
lert_extent_free(LertMeta *meta, LertExtent ext)
{
	LertExtent *f = meta->free_ext;
	uint32		i;

	if (ext.npages == 0 || ext.start == InvalidBlockNumber)
		return;
	for (i = 0; i < meta->nfree && f[i].start < ext.start; i++)
		;
	if (i > 0 && f[i - 1].start + f[i - 1].npages == ext.start)
	{
		f[i - 1].npages += ext.npages;
		if (i < meta->nfree && ext.start + ext.npages == f[i].start)
		{
			f[i - 1].npages += f[i].npages;
			memmove(&f[i], &f[i + 1], sizeof(LertExtent) * (meta->nfree - i - 1));
			meta->nfree--;
		}
		return;
	}
	if (i < meta->nfree && ext.start + ext.npages == f[i].start)
	{
		f[i].start = ext.start;
		f[i].npages += ext.npages;
		return;
	}
	if (meta->nfree == LERT_MAX_FREE_EXTENTS)
	{
		uint32		smallest = free_smallest(meta);
		LertExtent	out = ext;

		if (f[smallest].npages < ext.npages)
		{
			out = f[smallest];
			memmove(&f[smallest], &f[smallest + 1],
					sizeof(LertExtent) * (meta->nfree - smallest - 1));
			meta->nfree--;
			if (smallest < i)
				i--;
		}
		if (overflow_owner == meta && overflow_n < LERT_MAX_SPILL_EXTENTS)
			overflow_ext[overflow_n++] = out;
		if (out.start == ext.start)
			return;
	}
	memmove(&f[i + 1], &f[i], sizeof(LertExtent) * (meta->nfree - i));
	f[i] = ext;
	meta->nfree++;
}

/* The index of the smallest of meta's (nonempty) free extents. */
static uint32
free_smallest(const LertMeta *meta)
{
	uint32		smallest = 0;

	for (uint32 j = 1; j < meta->nfree; j++)
		if (meta->free_ext[j].npages < meta->free_ext[smallest].npages)
			smallest = j;
	return smallest;
}

/* Set m's free list (extents, tags and spill page) to src's. */
void
lert_meta_set_free(LertMeta *m, const LertMeta *src)
{
	m->nfree = src->nfree;
	memcpy(m->free_ext, src->free_ext, sizeof(m->free_ext));
	memcpy(m->free_cone, src->free_cone, sizeof(m->free_cone));
	memcpy(m->spill_blk, src->spill_blk, sizeof(m->spill_blk));
	m->spill_cur = src->spill_cur;
	m->nspill = src->nspill;
	m->spill_version = src->spill_version;
}

static void lert_write_page_with(Relation rel, BlockNumber blkno,
								 uint16 page_type, const char *area,
								 uint64 applied_pos, bool full,
								 BufferAccessStrategy strategy);
static LertPageStatus lert_read_page_with(Relation rel, BlockNumber blkno,
										  uint16 page_type, uint64 gen,
										  char *area, uint64 *applied_pos,
										  BufferAccessStrategy strategy);
static void read_page_owned_with(Relation rel, BlockNumber blkno,
								 uint16 page_type, uint64 gen, char *area,
								 uint64 *applied_pos,
								 BufferAccessStrategy strategy);

/* ---- pages ---- */

/*
 * Write a whole page of type page_type from area (SS_PAGE_DATA_SIZE
 * bytes), one WAL record: a full image for a page new to its extent, a
 * delta for a level-0 page written back.
 */
void
lert_write_page(Relation rel, BlockNumber blkno, uint16 page_type,
				const char *area, uint64 applied_pos, bool full)
{
	lert_write_page_with(rel, blkno, page_type, area, applied_pos, full, NULL);
}

/*
 * As lert_write_page, through a ring of buffers (NULL: none): a run's
 * data pages are written through the bulk-write ring (ss_page.c), since
 * a merge writes them once front to back and reads them back only at the
 * next merge of their level, as a sequential pass through the bulk-read
 * ring.  Level 0, report pages and a run's index and filter pages (read
 * per key) go through no ring.
 */
static void
lert_write_page_with(Relation rel, BlockNumber blkno, uint16 page_type,
					 const char *area, uint64 applied_pos, bool full,
					 BufferAccessStrategy strategy)
{
	ss_write_page_with(rel, blkno, page_type, area, SS_PAGE_DATA_SIZE, 0,
					   applied_pos,
					   full ? SS_WRITE_FULL : SS_WRITE_DELTA_OR_NEW, strategy);
}

/*
 * Copy page blkno's data area into area if it is a page of page_type
 * whose generation (the first 8 bytes of every level-0, run and index
 * page's area) is gen; LERT_STALE if it is another streamsketch page or
 * was never written (its extent was freed and reused, or not yet written,
 * under a reader that does not hold the consolidation lock).  A page that
 * is not ours at all is reported as damaged.
 */
LertPageStatus
lert_read_page(Relation rel, BlockNumber blkno, uint16 page_type, uint64 gen,
			   char *area, uint64 *applied_pos)
{
	return lert_read_page_with(rel, blkno, page_type, gen, area, applied_pos,
							   NULL);
}

/*
 * As lert_read_page, through a ring of buffers (NULL: none): a merge reads
 * its source runs' data pages through the bulk-read ring (ss_page.c).
 */
static LertPageStatus
lert_read_page_with(Relation rel, BlockNumber blkno, uint16 page_type,
					uint64 gen, char *area, uint64 *applied_pos,
					BufferAccessStrategy strategy)
{
	Buffer		buf = ss_read_page_of_type(rel, blkno, page_type, strategy);
	Page		page;
	uint64		page_gen;
	LertPageStatus status = LERT_STALE;

	if (!BufferIsValid(buf))
		return LERT_STALE;
	page = BufferGetPage(buf);
	memcpy(&page_gen, SSPageGetData(page), sizeof(page_gen));
	if (page_gen == gen || gen == LERT_ANY_GEN)
	{
		ss_page_check(rel, blkno, page, page_type);
		memcpy(area, SSPageGetData(page), SS_PAGE_DATA_SIZE);
		if (applied_pos)
			*applied_pos = SSPageGetOpaque(page)->applied_pos;
		status = LERT_OK;
	}
	UnlockReleaseBuffer(buf);
	return status;
}

/* As lert_read_page, for the consolidator: a stale page is damage. */
void
lert_read_page_owned(Relation rel, BlockNumber blkno, uint16 page_type,
					 uint64 gen, char *area, uint64 *applied_pos)
{
	read_page_owned_with(rel, blkno, page_type, gen, area, applied_pos, NULL);
}

static void
read_page_owned_with(Relation rel, BlockNumber blkno, uint16 page_type,
					 uint64 gen, char *area, uint64 *applied_pos,
					 BufferAccessStrategy strategy)
{
	if (lert_read_page_with(rel, blkno, page_type, gen, area, applied_pos,
							strategy) != LERT_OK)
		ss_page_corrupted(rel, blkno,
						  "A page of the structure's current levels is missing or belongs to another level (expected type %u, generation " UINT64_FORMAT ").",
						  page_type, gen);
}

/* ---- runs ---- */

/*
 * Runs are written page by page into chunks of free blocks (first fit
 * from the free list, else new blocks), chunks doubling from 8 to 1,024
 * pages so that a run is read and written in long sequential stretches
 * without reserving room for its worst case; the index records every data
 * page's block.
 */
#define RUN_CHUNK_MIN	8
#define RUN_CHUNK_MAX	1024

/*
 * The filter of a run's kept entries (LERT_RUN_KEPT): a blocked Bloom
 * filter, one page chosen by the fingerprint and LERT_FILTER_PROBES bits
 * in it, so that a probe reads one page.  At 10 bits a key about 1% of
 * the keys a run does not keep pass it.  A filter page is the run's
 * generation, 8 bytes of zeros, and the bits.
 */
#define LERT_FILTER_HEADER		16
#define LERT_FILTER_BITS		((uint32) ((SS_PAGE_DATA_SIZE - LERT_FILTER_HEADER) * 8))
#define LERT_FILTER_BITS_PER_KEY 10
#define LERT_FILTER_PROBES		7

/* The filter page (of npages) of fp; *h1, *h2: where its bits are. */
static uint32
filter_position(uint64 fp, uint32 npages, uint32 *h1, uint32 *h2)
{
	/* fingerprints share their top bits within a cone: mix them again */
	uint64		h = lert_fmix64(fp ^ UINT64CONST(0x9e3779b97f4a7c15));
	uint64		bits = lert_fmix64(h);

	*h1 = (uint32) bits;
	*h2 = (uint32) (bits >> 32) | 1;
	return (uint32) (((h >> 32) * npages) >> 32);
}

static inline bool
filter_test_or_set(unsigned char *bits, uint32 h1, uint32 h2, bool set)
{
	for (uint32 i = 0; i < LERT_FILTER_PROBES; i++)
	{
		uint32		b = (h1 + i * h2) % LERT_FILTER_BITS;

		if (set)
			bits[b >> 3] |= (unsigned char) (1 << (b & 7));
		else if (!(bits[b >> 3] & (1 << (b & 7))))
			return false;
	}
	return true;
}

/*
 * The run being written will take up to max_kept entries flagged
 * LERT_RUN_KEPT: build their filter.  Its pages come from the
 * consolidation memory (a quarter of it at most; past that, fewer bits a
 * key, more false positives).
 */
void
lert_run_writer_keep(LertRunWriter *w, int64 max_kept)
{
	uint64		want = ((uint64) Max(max_kept, 1) * LERT_FILTER_BITS_PER_KEY +
						LERT_FILTER_BITS - 1) / LERT_FILTER_BITS;
	uint64		cap = Max(ss_consolidation_memory() / 4, (Size) BLCKSZ) /
		SS_PAGE_DATA_SIZE;

	Assert(w->filter == NULL);
	w->nfilter = (uint32) Max(Min(want, Min(cap, (uint64) MaxBlockNumber / 4)), 1);
	w->filter = palloc_extended((Size) w->nfilter * SS_PAGE_DATA_SIZE,
								MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (uint32 i = 0; i < w->nfilter; i++)
		memcpy(w->filter + (Size) i * SS_PAGE_DATA_SIZE, &w->run.gen,
			   sizeof(uint64));
}

void
lert_run_writer_begin(LertRunWriter *w, Relation rel, LertMeta *meta,
					  uint32 cone)
{
	memset(w, 0, sizeof(*w));
	w->rel = rel;
	w->meta = meta;
	w->cone = cone;
	w->run.index.start = InvalidBlockNumber;
	w->run.gen = lert_new_gen(meta, cone);
	w->chunk.start = InvalidBlockNumber;
	w->next_chunk = RUN_CHUNK_MIN;
	w->page = palloc(SS_PAGE_DATA_SIZE);
	lert_run_page_init(w->page, w->run.gen);
	w->index_cap = 64;
	w->index = palloc(sizeof(LertIndexEntry) * w->index_cap);
}

/* The next free block for a data page. */
static BlockNumber
run_writer_block(LertRunWriter *w)
{
	if (w->chunk.npages == 0)
	{
		/* the lowest free extent first, whatever its size (up to want) */
		w->chunk = lert_extent_alloc_some(w->rel, w->meta, w->cone,
										   w->next_chunk);
		w->next_chunk = Min(w->next_chunk * 2, RUN_CHUNK_MAX);
	}
	w->chunk.npages--;
	return w->chunk.start++;
}

static void
run_writer_flush_page(LertRunWriter *w)
{
	BlockNumber blkno;

	if (((LertRunHeader *) w->page)->nentries == 0)
		return;
	blkno = run_writer_block(w);
	if (w->run.ndata == w->index_cap)
	{
		if (w->index_cap >= MaxBlockNumber / 2)
			elog(ERROR, "LERT run has too many pages");
		w->index_cap *= 2;
		w->index = repalloc_huge(w->index, sizeof(LertIndexEntry) * w->index_cap);
	}
	w->index[w->run.ndata].blkno = blkno;
	lert_write_page_with(w->rel, blkno, SS_PAGE_LERT_RUN, w->page, 0, true,
						 ss_bulk_write_ring());
	w->run.ndata++;
	lert_run_page_init(w->page, w->run.gen);
}

void
lert_run_writer_add(LertRunWriter *w, const LertEntry *e, const char *key)
{
	if (!lert_run_page_add(w->page, SS_PAGE_DATA_SIZE, e, key))
	{
		run_writer_flush_page(w);
		if (!lert_run_page_add(w->page, SS_PAGE_DATA_SIZE, e, key))
			elog(ERROR, "LERT entry of %u key bytes does not fit an empty page",
				 e->keylen);
	}
	if (((LertRunHeader *) w->page)->nentries == 1)
	{
		if (w->run.ndata == w->index_cap)
		{
			w->index_cap *= 2;
			w->index = repalloc_huge(w->index, sizeof(LertIndexEntry) * w->index_cap);
		}
		w->index[w->run.ndata].first_fp = e->fp;
	}
	w->run.nentries++;
	if (e->flags & LERT_RUN_KEPT)
	{
		uint32		h1,
					h2;
		uint32		page;

		if (w->filter == NULL)
			elog(ERROR, "LERT run writer has no filter for a kept entry");
		page = filter_position(e->fp, w->nfilter, &h1, &h2);
		filter_test_or_set((unsigned char *) w->filter +
						   (Size) page * SS_PAGE_DATA_SIZE + LERT_FILTER_HEADER,
						   h1, h2, true);
		w->run.nkept++;
	}
}

/* Write the last data page and the index; give back the unused chunk. */
void
lert_run_writer_end(LertRunWriter *w)
{
	char	   *area;
	uint32		nindex;

	run_writer_flush_page(w);
	lert_extent_free(w->meta, w->chunk);
	if (w->run.ndata > 0)
	{
		uint32		nfilter = w->run.nkept > 0 ? w->nfilter : 0;

		nindex = lert_run_index_pages(&w->run);
		w->run.index = lert_extent_alloc(w->rel, w->meta, w->cone,
										 nindex + nfilter);
		for (uint32 i = 0; i < nfilter; i++)
		{
			CHECK_FOR_INTERRUPTS();
			lert_write_page(w->rel, w->run.index.start + nindex + i,
							SS_PAGE_LERT_FILTER,
							w->filter + (Size) i * SS_PAGE_DATA_SIZE, 0, true);
		}
		area = palloc0(SS_PAGE_DATA_SIZE);
		for (uint32 i = 0; i < nindex; i++)
		{
			uint32		first = i * LERT_INDEX_PER_PAGE;
			uint32		n = Min(LERT_INDEX_PER_PAGE, w->run.ndata - first);

			memset(area, 0, SS_PAGE_DATA_SIZE);
			memcpy(area, &w->run.gen, sizeof(uint64));
			memcpy(area + sizeof(uint64), &n, sizeof(uint32));
			memcpy(area + LERT_INDEX_HEADER, w->index + first,
				   sizeof(LertIndexEntry) * n);
			lert_write_page(w->rel, w->run.index.start + i, SS_PAGE_LERT_INDEX,
							area, 0, true);
		}
		pfree(area);
	}
	pfree(w->page);
	pfree(w->index);
	if (w->filter != NULL)
		pfree(w->filter);
}

/*
 * May the run hold an entry of fp flagged LERT_RUN_KEPT?  For the
 * consolidator, which owns the run: a filter page that is not the run's is
 * damage.  Tests the bits on the shared buffer (a probe per key new to
 * level 0 would otherwise copy a page).
 */
bool
lert_run_may_keep(Relation rel, const LertRun *run, uint64 fp)
{
	uint32		h1,
				h2;
	uint32		page;
	BlockNumber blkno;
	Buffer		buf;
	Page		pg;
	uint64		gen;
	bool		hit;

	if (run->nkept == 0)
		return false;
	page = filter_position(fp, lert_run_filter_pages(run), &h1, &h2);
	blkno = run->index.start + lert_run_index_pages(run) + page;
	buf = ss_read_buffer_if_exists(rel, blkno);
	if (!BufferIsValid(buf))
		ss_page_corrupted(rel, blkno, "A LERT filter page is missing.");
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	pg = BufferGetPage(buf);
	if (PageIsNew(pg))
	{
		UnlockReleaseBuffer(buf);
		ss_page_corrupted(rel, blkno, "A LERT filter page is uninitialized.");
	}
	ss_page_check(rel, blkno, pg, SS_PAGE_LERT_FILTER);
	memcpy(&gen, SSPageGetData(pg), sizeof(gen));
	if (gen != run->gen)
	{
		UnlockReleaseBuffer(buf);
		ss_page_corrupted(rel, blkno, "The LERT filter page belongs to generation " UINT64_FORMAT ", expected " UINT64_FORMAT ".",
						  gen, run->gen);
	}
	hit = filter_test_or_set((unsigned char *) SSPageGetData(pg) +
							 LERT_FILTER_HEADER, h1, h2, false);
	UnlockReleaseBuffer(buf);
	return hit;
}

/*
 * Read index page i of a run into area and return its entries (*n of
 * them), checked; NULL if it is stale (readers only: owned reports it).
 */
static const LertIndexEntry *
run_index_page(Relation rel, const LertRun *run, uint32 i, char *area,
			   uint32 *n, bool owned)
{
	BlockNumber blkno = run->index.start + i;
	uint32		count;
	uint32		expect = Min(LERT_INDEX_PER_PAGE, run->ndata - i * LERT_INDEX_PER_PAGE);

	if (owned)
		lert_read_page_owned(rel, blkno, SS_PAGE_LERT_INDEX, run->gen, area, NULL);
	else if (lert_read_page(rel, blkno, SS_PAGE_LERT_INDEX, run->gen, area,
							NULL) != LERT_OK)
		return NULL;
	memcpy(&count, area + sizeof(uint64), sizeof(uint32));
	if (count != expect)
		ss_page_corrupted(rel, blkno, "The LERT index page lists %u data pages, expected %u.",
						  count, expect);
	*n = count;
	return (const LertIndexEntry *) (area + LERT_INDEX_HEADER);
}

/* Give a run's pages back (its data pages as listed by its index). */
void
lert_run_free(Relation rel, LertMeta *meta, LertRun *run)
{
	if (run->ndata > 0)
	{
		char	   *area = palloc(SS_PAGE_DATA_SIZE);
		LertExtent	pending = {InvalidBlockNumber, 0};

		for (uint32 i = 0; i < lert_run_index_pages(run); i++)
		{
			uint32		n;
			const LertIndexEntry *ix = run_index_page(rel, run, i, area, &n, true);

			CHECK_FOR_INTERRUPTS();
			for (uint32 k = 0; k < n; k++)
			{
				if (pending.npages > 0 &&
					ix[k].blkno == pending.start + pending.npages)
				{
					pending.npages++;
					continue;
				}
				lert_extent_free(meta, pending);
				pending.start = ix[k].blkno;
				pending.npages = 1;
			}
		}
		lert_extent_free(meta, pending);
		pfree(area);
	}
	lert_extent_free(meta, run->index);
	memset(run, 0, sizeof(*run));
	run->index.start = InvalidBlockNumber;
}

void
lert_run_reader_begin(LertRunReader *r, Relation rel, const LertRun *run)
{
	r->rel = rel;
	r->run = *run;
	r->page = 0;
	r->off = 0;
	r->loaded = false;
	r->area = palloc(SS_PAGE_DATA_SIZE);
	r->index_area = palloc(SS_PAGE_DATA_SIZE);
	r->index_loaded = -1;
	r->unowned = false;
	r->stale = false;
}

/* ---- looking up keys of a run in order ---- */

void
lert_run_seeker_begin(LertRunSeeker *s, Relation rel, const LertRun *run)
{
	char	   *iarea = palloc(SS_PAGE_DATA_SIZE);
	uint32		nindex = lert_run_index_pages(run);

	s->rel = rel;
	s->run = *run;
	s->index = palloc_extended(sizeof(LertIndexEntry) * Max(run->ndata, 1),
							   MCXT_ALLOC_HUGE);
	s->loaded = -1;
	s->area = palloc(SS_PAGE_DATA_SIZE);
	for (uint32 i = 0; i < nindex; i++)
	{
		uint32		n;
		const LertIndexEntry *ix = run_index_page(rel, run, i, iarea, &n, true);

		CHECK_FOR_INTERRUPTS();
		memcpy(s->index + (Size) i * LERT_INDEX_PER_PAGE, ix,
			   sizeof(LertIndexEntry) * n);
	}
	pfree(iarea);
}

/* SSKeyAtFn of a run's index */
static uint64
index_first_fp_at(const void *arr, uint32 i)
{
	return ((const LertIndexEntry *) arr)[i].first_fp;
}

/* The data page where an entry of fp may start. */
static uint32
seeker_page(const LertRunSeeker *s, uint64 fp)
{
	/* the number of pages whose first fingerprint is below fp */
	uint32		below = ss_lower_bound(s->index, 0, s->run.ndata, fp,
									   index_first_fp_at);

	return below > 0 ? below - 1 : 0;
}

void
lert_run_seeker_prefetch(LertRunSeeker *s, uint64 fp)
{
	if (s->run.ndata > 0)
		ss_prefetch(s->rel, s->index[seeker_page(s, fp)].blkno);
}

/*
 * The run's entry of the key, copied to *e (its key bytes are not); false
 * if it has none.  Keys are best looked up in increasing order: a data
 * page stays loaded until a key needs another.
 */
bool
lert_run_seeker_find(LertRunSeeker *s, uint64 fp, const char *key,
					 uint32 keylen, LertEntry *e)
{
	if (s->run.ndata == 0)
		return false;
	for (uint32 page = seeker_page(s, fp); page < s->run.ndata; page++)
	{
		uint32		off = 0;
		const LertEntry *x;

		if (s->loaded != (int64) page)
		{
			BlockNumber blkno = s->index[page].blkno;

			read_page_owned_with(s->rel, blkno, SS_PAGE_LERT_RUN, s->run.gen,
								 s->area, NULL, ss_bulk_read_ring());
			if (!lert_run_page_check(s->area, SS_PAGE_DATA_SIZE))
				ss_page_corrupted(s->rel, blkno, "The LERT run page's entries are out of order or out of bounds.");
			s->loaded = page;
		}
		while ((x = lert_run_page_next(s->area, &off)) != NULL)
		{
			int			c = lert_key_cmp(x->fp, lert_entry_key(x), x->keylen,
										 fp, key, keylen);

			if (c == 0)
			{
				*e = *x;
				return true;
			}
			if (c > 0)
				return false;
		}
	}
	return false;
}

void
lert_run_seeker_end(LertRunSeeker *s)
{
	pfree(s->index);
	pfree(s->area);
}

/*
 * Data pages a run reader asks the kernel for ahead of the one it reads.
 * A merge reads several runs at once, and the kernel's readahead does not
 * follow their interleaved reads, so without this each page would cost a
 * synchronous read in a merge larger than the page cache.
 */
#define LERT_READ_AHEAD		16

/* Prefetch the run's data pages [from, to) listed in index page i (ix). */
static void
run_reader_prefetch(LertRunReader *r, const LertIndexEntry *ix, uint32 i,
					uint32 from, uint32 to)
{
	uint32		end = Min(Min(to, r->run.ndata), (i + 1) * LERT_INDEX_PER_PAGE);

	for (uint32 p = from; p < end; p++)
		ss_prefetch(r->rel, ix[p % LERT_INDEX_PER_PAGE].blkno);
}

/* The next entry of the run in key order, or NULL; valid until the next call. */
const LertEntry *
lert_run_reader_next(LertRunReader *r)
{
	for (;;)
	{
		const LertEntry *e;
		const LertIndexEntry *ix;
		uint32		n;
		uint32		i;
		BlockNumber blkno;

		if (r->loaded && (e = lert_run_page_next(r->area, &r->off)) != NULL)
			return e;
		if (r->page >= r->run.ndata)
			return NULL;
		i = r->page / LERT_INDEX_PER_PAGE;
		ix = (const LertIndexEntry *) (r->index_area + LERT_INDEX_HEADER);
		if ((int64) i != r->index_loaded)
		{
			if (run_index_page(r->rel, &r->run, i, r->index_area, &n,
							   !r->unowned) == NULL)
			{
				r->stale = true;
				return NULL;
			}
			r->index_loaded = i;
			run_reader_prefetch(r, ix, i, r->page + 1,
								r->page + 1 + LERT_READ_AHEAD);
		}
		else
			run_reader_prefetch(r, ix, i, r->page + LERT_READ_AHEAD,
								r->page + LERT_READ_AHEAD + 1);
		blkno = ix[r->page % LERT_INDEX_PER_PAGE].blkno;
		if (!r->unowned)
			read_page_owned_with(r->rel, blkno, SS_PAGE_LERT_RUN, r->run.gen,
								 r->area, NULL, ss_bulk_read_ring());
		else if (lert_read_page_with(r->rel, blkno, SS_PAGE_LERT_RUN,
									 r->run.gen, r->area, NULL,
									 ss_bulk_read_ring()) != LERT_OK)
		{
			r->stale = true;
			return NULL;
		}
		if (!lert_run_page_check(r->area, SS_PAGE_DATA_SIZE))
			ss_page_corrupted(r->rel, blkno, "The LERT run page's entries are out of order or out of bounds.");
		r->page++;
		r->off = 0;
		r->loaded = true;
	}
}

void
lert_run_reader_end(LertRunReader *r)
{
	pfree(r->area);
	pfree(r->index_area);
}

/*
 * The data page of a (nonempty) run where key fp's entries start: its
 * index page is read into iarea, whose entries are returned (*n of them),
 * and *page is set to the data page's number in the run; NULL if an index
 * page is stale.
 */
static const LertIndexEntry *
run_locate(Relation rel, const LertRun *run, uint64 fp, char *iarea,
		   uint32 *n, uint32 *page)
{
	uint32		lo = 0,
				hi = lert_run_index_pages(run);
	const LertIndexEntry *ix;
	uint32		a = 0;

	/* the last index page whose first fingerprint is below fp */
	while (hi - lo > 1)
	{
		uint32		mid = (lo + hi) / 2;

		ix = run_index_page(rel, run, mid, iarea, n, false);
		if (ix == NULL)
			return NULL;
		if (ix[0].first_fp < fp)
			lo = mid;
		else
			hi = mid;
	}
	ix = run_index_page(rel, run, lo, iarea, n, false);
	if (ix == NULL)
		return NULL;
	while (a < *n && ix[a].first_fp < fp)
		a++;
	*page = lo * LERT_INDEX_PER_PAGE + (a > 0 ? a - 1 : 0);
	return ix;
}

/*
 * Ask the kernel to read ahead the filter page lert_run_may_keep will
 * test for fp, if the run keeps counts.
 */
void
lert_run_prefetch_filter(Relation rel, const LertRun *run, uint64 fp)
{
	uint32		h1,
				h2;

	if (run->nkept == 0)
		return;
	ss_prefetch(rel, run->index.start + lert_run_index_pages(run) +
				filter_position(fp, lert_run_filter_pages(run), &h1, &h2));
}

/*
 * Ask the kernel to read ahead the data page where key fp's entries in
 * run start, which lert_run_lookup will read first.  The run's index
 * pages, few and hot, are read now (into iarea).  A stale index (the run
 * was replaced) prefetches nothing.
 */
void
lert_run_prefetch_data(Relation rel, const LertRun *run, uint64 fp,
					   char *iarea)
{
	const LertIndexEntry *ix;
	uint32		n;
	uint32		page;

	if (run->ndata == 0)
		return;
	ix = run_locate(rel, run, fp, iarea, &n, &page);
	if (ix != NULL)
		ss_prefetch(rel, ix[page % LERT_INDEX_PER_PAGE].blkno);
}

/*
 * Add the key's entry in a run to *out: binary search of the index for
 * the last data page starting below fp, then the data pages from there
 * while they can hold fp (equal fingerprints of different keys may span
 * pages).  Sets out->stale and stops if a page changed under the reader.
 */
void
lert_run_lookup(Relation rel, const LertRun *run, uint64 fp, const char *key,
				uint32 keylen, LertDiskCount *out)
{
	char	   *area;
	char	   *iarea;
	uint32		lo;
	uint32		page;
	uint32		n;
	const LertIndexEntry *ix;

	if (run->ndata == 0)
		return;
	area = palloc(SS_PAGE_DATA_SIZE);
	iarea = palloc(SS_PAGE_DATA_SIZE);

	ix = run_locate(rel, run, fp, iarea, &n, &page);
	if (ix == NULL)
		goto stale;
	lo = page / LERT_INDEX_PER_PAGE;

	for (; page < run->ndata; page++)
	{
		uint32		off = 0;
		const LertEntry *e;
		bool		past = false;
		BlockNumber blkno;

		CHECK_FOR_INTERRUPTS();
		if (page / LERT_INDEX_PER_PAGE != lo)
		{
			lo = page / LERT_INDEX_PER_PAGE;
			ix = run_index_page(rel, run, lo, iarea, &n, false);
			if (ix == NULL)
				goto stale;
		}
		blkno = ix[page % LERT_INDEX_PER_PAGE].blkno;
		if (lert_read_page(rel, blkno, SS_PAGE_LERT_RUN, run->gen, area,
						   NULL) != LERT_OK)
			goto stale;
		if (!lert_run_page_check(area, SS_PAGE_DATA_SIZE))
			ss_page_corrupted(rel, blkno, "The LERT run page's entries are out of order or out of bounds.");
		while ((e = lert_run_page_next(area, &off)) != NULL)
		{
			int			c = lert_key_cmp(e->fp, lert_entry_key(e), e->keylen,
										 fp, key, keylen);

			if (c == 0)
			{
				out->count += e->count;
				out->first_pos = lert_fold_first_pos(out->first_pos,
													 out->reported,
													 e->first_pos,
													 (e->flags & LERT_REPORTED) != 0);
				out->reported |= (e->flags & LERT_REPORTED) != 0;
				if ((e->flags & LERT_RUN_KEPT) && !out->kept_found)
				{
					out->kept_found = true;
					out->kept = e->disk_sum;
				}
			}
			if (e->fp > fp)
			{
				past = true;
				break;
			}
		}
		if (past)
			break;
	}
	pfree(area);
	pfree(iarea);
	return;

stale:
	out->stale = true;
	pfree(area);
	pfree(iarea);
}

/*
 * Add the key's entries in its cone as meta has it to *d: level 0's
 * entry, then each on-disk level's (lert_run_lookup), first_pos folded by
 * lert_fold_first_pos.  *l0_kept: level 0 has an entry that holds the
 * key's kept count (LERT_L0_KEPT_PENDING clear); *applied: the log
 * position level 0's page has applied (0: no level 0).  Pages are read
 * without locks: false if one was freed and reused meanwhile (the caller
 * reads the metapage again, and again after, to tell a flush in between).
 */
bool
lert_cone_lookup(Relation rel, const LertMeta *meta, uint64 fp,
				 const char *key, uint32 keylen, char *area,
				 LertDiskCount *d, bool *l0_kept, uint64 *applied)
{
	const LertCone *cn = &meta->cones[lert_cone_of(&meta->params, fp)];

	*l0_kept = false;
	*applied = 0;
	if (cn->level0.npages > 0)
	{
		BlockNumber blkno = cn->level0.start +
			lert_level0_page(&meta->params, fp, cn->level0.npages);
		bool		found;
		int			at;

		if (lert_read_page(rel, blkno, SS_PAGE_LERT_LEVEL0, cn->level0_gen,
						   area, NULL) != LERT_OK)
			return false;
		if (!lert_l0_check(area, SS_PAGE_DATA_SIZE))
			ss_page_corrupted(rel, blkno, "The LERT level-0 page's entries are out of order or out of bounds.");
		at = lert_l0_search(area, fp, key, keylen, &found);
		if (found)
		{
			LertEntry	e;

			(void) lert_l0_get(area, at, &e);
			d->count += e.count;
			d->first_pos = lert_fold_first_pos(d->first_pos, d->reported,
											   e.first_pos,
											   (e.flags & LERT_REPORTED) != 0);
			d->reported |= (e.flags & LERT_REPORTED) != 0;
			*l0_kept = !(e.flags & LERT_L0_KEPT_PENDING);
		}
		*applied = ((LertL0Header *) area)->applied_pos;
	}
	for (uint32 j = 1; j <= meta->params.geom.nlevels; j++)
	{
		lert_run_lookup(rel, &cn->runs[j], fp, key, keylen, d);
		if (d->stale)
			return false;
	}
	return true;
}

/* ---- reports ---- */

static BlockNumber
report_block(const LertMeta *meta, uint32 p)
{
	return ss_extents_block(meta->report_ext, meta->nreport_ext, p);
}

/* Give the report stream a page p, with a new extent if needed. */
static void
report_ensure_page(Relation rel, LertMeta *meta, uint32 p)
{
	BlockNumber np;

	if (report_block(meta, p) != InvalidBlockNumber)
		return;
	if (meta->nreport_ext == LERT_MAX_REPORT_EXTENTS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("LERT \"%s\" has too many reports",
						RelationGetRelationName(rel))));
	np = Min((BlockNumber) 8 << Min(meta->nreport_ext, 20), LERT_REPORT_EXTENT_MAX);
	meta->report_ext[meta->nreport_ext].start = ss_log_alloc_run(rel, np);
	meta->report_ext[meta->nreport_ext++].npages = np;
}

static inline Size
report_size(uint32 keylen)
{
	return sizeof(LertReportRec) + TYPEALIGN(8, (Size) keylen);
}

/*
 * Check a report page's first `valid` reports (all of them if valid < 0)
 * and return the bytes they take.
 */
static uint32
report_page_valid_bytes(Relation rel, BlockNumber blkno, const char *area,
						int64 valid)
{
	const LertReportPageHeader *h = (const LertReportPageHeader *) area;
	uint32		off = 0;

	if (valid < 0 || valid > h->nreports)
		valid = h->nreports;
	if (h->used > SS_PAGE_DATA_SIZE - REPORT_HEADER)
		ss_page_corrupted(rel, blkno, "The report page claims %u bytes.", h->used);
	for (int64 i = 0; i < valid; i++)
	{
		const LertReportRec *r = (const LertReportRec *) (area + REPORT_HEADER + off);

		if (h->used - off < sizeof(LertReportRec) ||
			r->keylen > LERT_MAX_KEY_BYTES ||
			report_size(r->keylen) > h->used - off)
			ss_page_corrupted(rel, blkno, "Report %lld of the page is out of bounds.",
							  (long long) (h->first_id + i));
		off += (uint32) report_size(r->keylen);
	}
	return off;
}

/*
 * Append n reports (recs: packed LertReportRec + key, len bytes) after the
 * meta->nreports valid ones.  They are written to the report pages, one
 * WAL record per page, beyond the valid count; the caller makes them valid
 * by adding n to nreports in its install or settle record.  Writes over
 * whatever a failed attempt left beyond the valid count.  meta is the
 * metapage as read under the space lock.  A new report extent comes from
 * the file's end, never from free extents: those the installing round
 * freed are still the installed version's until its install record, and
 * a report page written there before a cancel or crash would overwrite
 * them (report extents are never freed, so where they come from only
 * moves which blocks stay free).
 */
void
lert_reports_append(Relation rel, LertMeta *meta,
					const char *recs, Size len, int64 n)
{
	char	   *area = palloc(SS_PAGE_DATA_SIZE);
	LertReportPageHeader *h = (LertReportPageHeader *) area;
	uint32		p = meta->report_tail;
	int64		next_id = meta->nreports + 1;
	Size		done = 0;

	if (n == 0)
	{
		pfree(area);
		return;
	}
	if (meta->nreports > 0)
	{
		BlockNumber blkno = report_block(meta, p);

		if (blkno == InvalidBlockNumber)
			ss_page_corrupted(rel, SS_METAPAGE_BLKNO, "The report tail page %u is outside the report extents.", p);
		lert_read_page_owned(rel, blkno, SS_PAGE_LERT_REPORT, LERT_ANY_GEN,
							 area, NULL);
	}
	else
	{
		memset(area, 0, SS_PAGE_DATA_SIZE);
		h->first_id = 1;
		report_ensure_page(rel, meta, p);
	}
	/* forget what a failed attempt wrote beyond the valid reports */
	if (meta->nreports > 0)
	{
		if (h->first_id < 1 || h->first_id > meta->nreports + 1 ||
			h->nreports < meta->nreports - h->first_id + 1)
			ss_page_corrupted(rel, report_block(meta, p), "The report tail page does not hold the last valid report.");
		h->used = report_page_valid_bytes(rel, report_block(meta, p), area,
										  meta->nreports - h->first_id + 1);
		h->nreports = (uint32) (meta->nreports - h->first_id + 1);
		memset(area + REPORT_HEADER + h->used, 0,
			   SS_PAGE_DATA_SIZE - REPORT_HEADER - h->used);
	}

	while (done < len)
	{
		const LertReportRec *r = (const LertReportRec *) (recs + done);
		Size		size = report_size(r->keylen);

		if (REPORT_HEADER + h->used + size > SS_PAGE_DATA_SIZE)
		{
			/* the page is full: write it and start the next one */
			if (report_block(meta, p) == InvalidBlockNumber)
				elog(ERROR, "LERT report page %u has no block", p);
			lert_write_page(rel, report_block(meta, p), SS_PAGE_LERT_REPORT,
							area, 0, false);
			p++;
			report_ensure_page(rel, meta, p);
			memset(area, 0, SS_PAGE_DATA_SIZE);
			h->first_id = next_id;
		}
		memcpy(area + REPORT_HEADER + h->used, r, size);
		h->used += (uint32) size;
		h->nreports++;
		next_id++;
		done += size;
	}
	if (report_block(meta, p) == InvalidBlockNumber)
		elog(ERROR, "LERT report page %u has no block", p);
	lert_write_page(rel, report_block(meta, p), SS_PAGE_LERT_REPORT, area, 0,
					false);
	meta->report_tail = p;
	pfree(area);
}

/*
 * Read the valid reports with ids above `after`, in id order.  Report
 * pages are append-only, so a reader needs only the metapage it read:
 * what lies beyond its count is ignored.
 */
void
lert_report_iter_begin(LertReportIter *it, Relation rel, const LertMeta *meta,
					   int64 after)
{
	const LertReportPageHeader *h;
	uint32		lo = 0,
				hi;

	memset(it, 0, sizeof(*it));
	it->rel = rel;
	it->nreports = meta->nreports;
	it->nreport_ext = meta->nreport_ext;
	memcpy(it->report_ext, meta->report_ext, sizeof(it->report_ext));
	it->tail = meta->report_tail;
	it->after = Max(after, 0);
	it->area = palloc(SS_PAGE_DATA_SIZE);
	it->loaded = false;
	if (it->nreports <= it->after)
		return;

	/* the last page whose first report is at or before after + 1 */
	h = (const LertReportPageHeader *) it->area;
	hi = it->tail + 1;
	while (hi - lo > 1)
	{
		uint32		mid = (lo + hi) / 2;

		lert_read_page_owned(rel, report_block(meta, mid),
							 SS_PAGE_LERT_REPORT, LERT_ANY_GEN, it->area, NULL);
		if (h->first_id <= it->after + 1)
			lo = mid;
		else
			hi = mid;
	}
	it->page = lo;
}

/* The next report, or NULL; valid until the next call.  *key: its bytes. */
const LertReportRec *
lert_report_iter_next(LertReportIter *it, int64 *id, const char **key)
{
	const LertReportPageHeader *h = (const LertReportPageHeader *) it->area;

	for (;;)
	{
		BlockNumber blkno;

		if (it->loaded && it->idx < it->valid)
		{
			const LertReportRec *r = (const LertReportRec *) (it->area + REPORT_HEADER + it->off);

			it->off += (uint32) report_size(r->keylen);
			*id = h->first_id + it->idx++;
			if (*id <= it->after)
				continue;
			*key = (const char *) (r + 1);
			return r;
		}
		if (it->nreports <= it->after || it->page > it->tail ||
			(it->loaded && h->first_id + it->valid > it->nreports))
			return NULL;
		CHECK_FOR_INTERRUPTS();
		blkno = ss_extents_block(it->report_ext, it->nreport_ext, it->page);
		if (blkno == InvalidBlockNumber)
			ss_page_corrupted(it->rel, SS_METAPAGE_BLKNO, "Report page %u is outside the report extents.", it->page);
		lert_read_page_owned(it->rel, blkno, SS_PAGE_LERT_REPORT, LERT_ANY_GEN,
							 it->area, NULL);
		it->valid = Min((int64) h->nreports, it->nreports - h->first_id + 1);
		if (h->first_id < 1 || it->valid < 0)
			ss_page_corrupted(it->rel, blkno, "The report page's first id " INT64_FORMAT " does not follow its predecessors.", h->first_id);
		(void) report_page_valid_bytes(it->rel, blkno, it->area, it->valid);
		it->page++;
		it->idx = 0;
		it->off = 0;
		it->loaded = true;
	}
}

void
lert_report_iter_end(LertReportIter *it)
{
	pfree(it->area);
}
