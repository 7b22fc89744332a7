/*-------------------------------------------------------------------------
 *
 * lert_store.c
 *	  A LERT's pages: extents and their free list, level-0 and run pages,
 *	  runs written in order and read in order or by key, and the report
 *	  stream.
 *
 * Extents come from the metapage's free list (best fit) or from new blocks
 * after everything reserved so far (ss_log_alloc_run).  Only the
 * consolidator, holding the change log's consolidation lock, allocates and
 * frees, on its own copy of the metapage; the copy's free list reaches
 * the metapage with the install that makes the new pages live, so a round
 * that fails leaves the free list as it was (blocks taken from new space
 * by such a round stay unused until VACUUM FULL, as a quotient filter's).
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
#include "streamsketch.h"
#include "utils/memutils.h"

#define INDEX_HEADER	MAXALIGN(sizeof(LertIndexHeader))
#define INDEX_PER_PAGE	((uint32) ((SS_PAGE_DATA_SIZE - INDEX_HEADER) / sizeof(uint64)))

typedef struct LertIndexHeader
{
	uint64		gen;
	uint32		n;				/* first fingerprints on the page */
	uint32		unused;
} LertIndexHeader;

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
	return ss_read_structure_meta(rel, &lert_state_ops, meta);
}

/* ---- extents ---- */

LertExtent
lert_extent_alloc(Relation rel, LertMeta *meta, BlockNumber npages)
{
	LertExtent	ext = {InvalidBlockNumber, 0};
	int			best = -1;

	if (npages == 0)
		return ext;
	for (uint32 i = 0; i < meta->nfree; i++)
		if (meta->free_ext[i].npages >= npages &&
			(best < 0 || meta->free_ext[i].npages < meta->free_ext[best].npages))
			best = (int) i;
	if (best >= 0)
	{
		LertExtent *f = &meta->free_ext[best];

		ext.start = f->start;
		ext.npages = npages;
		f->start += npages;
		f->npages -= npages;
		if (f->npages == 0)
		{
			memmove(f, f + 1, sizeof(LertExtent) * (meta->nfree - best - 1));
			meta->nfree--;
		}
		return ext;
	}
	ext.start = ss_log_alloc_run(rel, npages);
	ext.npages = npages;
	return ext;
}

/*
 * Give an extent back, merging it with its neighbours.  A full list
 * forgets its smallest extent (its blocks stay unused until VACUUM FULL);
 * extents come from a bounded number of levels and cones, so this takes
 * a pathological history.
 */
void
lert_extent_free(LertMeta *meta, LertExtent ext)
{
	uint32		i;

	if (ext.npages == 0 || ext.start == InvalidBlockNumber)
		return;
	for (i = 0; i < meta->nfree && meta->free_ext[i].start < ext.start; i++)
		;
	if (i > 0 && meta->free_ext[i - 1].start + meta->free_ext[i - 1].npages == ext.start)
	{
		meta->free_ext[i - 1].npages += ext.npages;
		if (i < meta->nfree && ext.start + ext.npages == meta->free_ext[i].start)
		{
			meta->free_ext[i - 1].npages += meta->free_ext[i].npages;
			memmove(&meta->free_ext[i], &meta->free_ext[i + 1],
					sizeof(LertExtent) * (meta->nfree - i - 1));
			meta->nfree--;
		}
		return;
	}
	if (i < meta->nfree && ext.start + ext.npages == meta->free_ext[i].start)
	{
		meta->free_ext[i].start = ext.start;
		meta->free_ext[i].npages += ext.npages;
		return;
	}
	if (meta->nfree == LERT_MAX_FREE_EXTENTS)
	{
		uint32		smallest = 0;

		for (uint32 j = 1; j < meta->nfree; j++)
			if (meta->free_ext[j].npages < meta->free_ext[smallest].npages)
				smallest = j;
		if (meta->free_ext[smallest].npages >= ext.npages)
			return;
		memmove(&meta->free_ext[smallest], &meta->free_ext[smallest + 1],
				sizeof(LertExtent) * (meta->nfree - smallest - 1));
		meta->nfree--;
		if (smallest < i)
			i--;
	}
	memmove(&meta->free_ext[i + 1], &meta->free_ext[i],
			sizeof(LertExtent) * (meta->nfree - i));
	meta->free_ext[i] = ext;
	meta->nfree++;
}

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
	SSXLogState *state;
	Buffer		buf;
	Page		page;

	CHECK_FOR_INTERRUPTS();
	ss_extend_to(rel, blkno);
	buf = ReadBuffer(rel, blkno);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	state = ss_xlog_start(rel);
	page = ss_xlog_register(state, buf,
							full || PageIsNew(BufferGetPage(buf)) ? SS_XLOG_FULL_IMAGE : 0);
	ss_page_init(page, page_type, SS_PAGE_DATA_SIZE);
	SSPageGetOpaque(page)->applied_pos = applied_pos;
	memcpy(SSPageGetData(page), area, SS_PAGE_DATA_SIZE);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
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
	Buffer		buf;
	Page		page;
	LertPageStatus status = LERT_STALE;

	buf = ss_read_buffer_if_exists(rel, blkno);
	if (!BufferIsValid(buf))
		return LERT_STALE;
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (!PageIsNew(page))
	{
		SSPageOpaque opaque = SSPageGetOpaque(page);
		uint64		page_gen;

		if (PageGetSpecialSize(page) != MAXALIGN(sizeof(SSPageOpaqueData)) ||
			opaque->page_id != SS_PAGE_ID)
			ss_page_check(rel, blkno, page, page_type);	/* reports it */
		memcpy(&page_gen, SSPageGetData(page), sizeof(page_gen));
		if (opaque->page_type == page_type &&
			(page_gen == gen || gen == LERT_ANY_GEN))
		{
			ss_page_check(rel, blkno, page, page_type);
			memcpy(area, SSPageGetData(page), SS_PAGE_DATA_SIZE);
			if (applied_pos)
				*applied_pos = opaque->applied_pos;
			status = LERT_OK;
		}
	}
	UnlockReleaseBuffer(buf);
	return status;
}

/* As lert_read_page, for the consolidator: a stale page is damage. */
void
lert_read_page_owned(Relation rel, BlockNumber blkno, uint16 page_type,
					 uint64 gen, char *area, uint64 *applied_pos)
{
	if (lert_read_page(rel, blkno, page_type, gen, area, applied_pos) != LERT_OK)
		ss_page_corrupted(rel, blkno,
						  "A page of the structure's current levels is missing or belongs to another level (expected type %u, generation " UINT64_FORMAT ").",
						  page_type, gen);
}

/* ---- runs ---- */

/*
 * Reserve room for a run of at most max_bytes bytes of entries: every
 * page may lose up to one entry of the longest key so far at its end (an
 * entry never spans pages).  The unused tail is given back by
 * lert_run_writer_end.
 */
void
lert_run_writer_begin(LertRunWriter *w, Relation rel, LertMeta *meta,
					  int64 max_bytes)
{
	double		per_page = (double) (SS_PAGE_DATA_SIZE - MAXALIGN(sizeof(LertRunHeader)) -
									 lert_entry_size(meta->max_keylen));
	double		pages = ceil((double) max_bytes / per_page) + 1;

	memset(w, 0, sizeof(*w));
	w->rel = rel;
	if (pages > (double) MaxBlockNumber / 2)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a level of LERT \"%s\" would need %.0f pages",
						RelationGetRelationName(rel), pages)));
	ss_check_structure_pages((uint64) pages, RelationGetRelationName(rel));
	w->reserved = (BlockNumber) pages;
	w->run.data = lert_extent_alloc(rel, meta, w->reserved);
	w->run.data.npages = 0;
	w->run.gen = meta->next_gen++;
	w->page = palloc(SS_PAGE_DATA_SIZE);
	lert_run_page_init(w->page, w->run.gen);
	w->first_fps = MemoryContextAllocHuge(CurrentMemoryContext,
										  sizeof(uint64) * w->reserved);
}

static void
run_writer_flush_page(LertRunWriter *w)
{
	if (((LertRunHeader *) w->page)->nentries == 0)
		return;
	if (w->run.data.npages >= w->reserved)
		elog(ERROR, "LERT run overflows its %u reserved pages", w->reserved);
	lert_write_page(w->rel, w->run.data.start + w->run.data.npages,
					SS_PAGE_LERT_RUN, w->page, 0, true);
	w->run.data.npages++;
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
		w->first_fps[w->run.data.npages] = e->fp;
	w->run.nentries++;
}

/* Write the last data page and the index; give back what was not used. */
void
lert_run_writer_end(LertRunWriter *w, LertMeta *meta)
{
	char	   *area;
	uint32		nindex;
	LertExtent	tail;

	run_writer_flush_page(w);
	tail.start = w->run.data.start + w->run.data.npages;
	tail.npages = w->reserved - w->run.data.npages;
	lert_extent_free(meta, tail);
	if (w->run.data.npages == 0)
	{
		w->run.data.start = InvalidBlockNumber;
		w->run.index.start = InvalidBlockNumber;
		w->run.index.npages = 0;
		pfree(w->page);
		pfree(w->first_fps);
		return;
	}
	nindex = (w->run.data.npages + INDEX_PER_PAGE - 1) / INDEX_PER_PAGE;
	w->run.index = lert_extent_alloc(w->rel, meta, nindex);
	area = palloc0(SS_PAGE_DATA_SIZE);
	for (uint32 i = 0; i < nindex; i++)
	{
		LertIndexHeader *h = (LertIndexHeader *) area;
		uint32		first = i * INDEX_PER_PAGE;
		uint32		n = Min(INDEX_PER_PAGE, w->run.data.npages - first);

		memset(area, 0, SS_PAGE_DATA_SIZE);
		h->gen = w->run.gen;
		h->n = n;
		memcpy(area + INDEX_HEADER, w->first_fps + first, sizeof(uint64) * n);
		lert_write_page(w->rel, w->run.index.start + i, SS_PAGE_LERT_INDEX,
						area, 0, true);
	}
	pfree(area);
	pfree(w->page);
	pfree(w->first_fps);
}

/* Give a run's extents back. */
void
lert_run_free(LertMeta *meta, LertRun *run)
{
	lert_extent_free(meta, run->data);
	lert_extent_free(meta, run->index);
	memset(run, 0, sizeof(*run));
	run->data.start = run->index.start = InvalidBlockNumber;
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
}

/* The next entry of the run in key order, or NULL; valid until the next call. */
const LertEntry *
lert_run_reader_next(LertRunReader *r)
{
	for (;;)
	{
		const LertEntry *e;
		BlockNumber blkno;

		if (r->loaded && (e = lert_run_page_next(r->area, &r->off)) != NULL)
			return e;
		if (r->page >= r->run.data.npages)
			return NULL;
		blkno = r->run.data.start + r->page;
		lert_read_page_owned(r->rel, blkno, SS_PAGE_LERT_RUN, r->run.gen,
							 r->area, NULL);
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
}

/*
 * Add the key's entry in a run to *out: binary search of the index pages
 * for the last data page starting below fp, then the data pages from there
 * while they can hold fp (equal fingerprints of different keys may span
 * pages).  Sets out->stale and stops if a page changed under the reader.
 */
void
lert_run_lookup(Relation rel, const LertRun *run, uint64 fp, const char *key,
				uint32 keylen, LertDiskCount *out)
{
	char	   *area;
	uint32		nindex = run->index.npages;
	uint32		lo = 0,
				hi;
	uint32		page;
	uint32		lo_page = 0;

	if (run->data.npages == 0)
		return;
	area = palloc(SS_PAGE_DATA_SIZE);

	/* the last index page whose first fingerprint is below fp */
	hi = nindex;
	while (hi - lo > 1)
	{
		uint32		mid = (lo + hi) / 2;
		uint64		first;

		if (lert_read_page(rel, run->index.start + mid, SS_PAGE_LERT_INDEX,
						   run->gen, area, NULL) != LERT_OK)
			goto stale;
		memcpy(&first, area + INDEX_HEADER, sizeof(first));
		if (first < fp)
			lo = mid;
		else
			hi = mid;
	}
	if (lert_read_page(rel, run->index.start + lo, SS_PAGE_LERT_INDEX,
					   run->gen, area, NULL) != LERT_OK)
		goto stale;
	{
		const LertIndexHeader *h = (const LertIndexHeader *) area;
		const uint64 *fps = (const uint64 *) (area + INDEX_HEADER);
		uint32		n = Min(h->n, INDEX_PER_PAGE);
		uint32		a = 0;

		/* pages of this index page starting below fp */
		while (a < n && fps[a] < fp)
			a++;
		lo_page = lo * INDEX_PER_PAGE + (a > 0 ? a - 1 : 0);
	}

	for (page = lo_page; page < run->data.npages; page++)
	{
		uint32		off = 0;
		const LertEntry *e;
		bool		past = false;
		BlockNumber blkno = run->data.start + page;

		CHECK_FOR_INTERRUPTS();
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
				if (out->first_pos < 0 || e->first_pos < out->first_pos)
					out->first_pos = e->first_pos;
				out->reported |= (e->flags & LERT_REPORTED) != 0;
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
	return;

stale:
	out->stale = true;
	pfree(area);
}

/* ---- reports ---- */

/* Page index p of the report stream: its block. */
static BlockNumber
report_block_dir(uint32 next, const LertExtent *ext, uint32 p)
{
	for (uint32 i = 0; i < next; i++)
	{
		if (p < ext[i].npages)
			return ext[i].start + p;
		p -= ext[i].npages;
	}
	return InvalidBlockNumber;
}

static BlockNumber
report_block(const LertMeta *meta, uint32 p)
{
	return report_block_dir(meta->nreport_ext, meta->report_ext, p);
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
	meta->report_ext[meta->nreport_ext++] = lert_extent_alloc(rel, meta, np);
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
 * whatever a failed attempt left beyond the valid count.
 */
void
lert_reports_append(Relation rel, LertMeta *meta, const char *recs, Size len,
					int64 n)
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
		blkno = report_block_dir(it->nreport_ext, it->report_ext, it->page);
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
