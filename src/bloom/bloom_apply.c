/*-------------------------------------------------------------------------
 *
 * bloom_apply.c
 *	  Writing a bloom_filter: the metapage, applying a committing
 *	  transaction's inserts in each mode, and flushing buffers.
 *
 * Every page change is one GenericXLog record (a no-op for unlogged
 * relations); a localized sub-buffer is applied to its bit page in the
 * same record that empties it.  An elevator flush sets the bits of every
 * buffered entry first and empties the buffer pages afterwards: setting a
 * bit twice changes nothing, so a crash in between only means the entries
 * are applied again by the next flush.
 *
 * Bits of the plain and elevator layouts are applied through page masks:
 * one pass over the entries ORs their bits into an in-memory image of each
 * touched page (at most streamsketch.pending_memory bytes of images), then
 * each touched page is written once, in page order.  A filter with more
 * pages than fit takes several passes over the entries, each covering the
 * next range of touched pages, so every page is still written once per
 * flush: the elevator.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ss_xlog.h"
#include "bloom.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "ss_pending.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* An insert waiting in a commit-time batch, sorted by page or sub-buffer. */
typedef struct BatchEntry
{
	uint32		page;			/* localized: bit page; elevator: sub-buffer */
	uint32		seq;			/* arrival order, kept within a page */
	uint64		h2;
} BatchEntry;

static int
batch_entry_cmp(const void *a, const void *b)
{
	const BatchEntry *x = a;
	const BatchEntry *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return 0;
}

static uint32
batch_entry_page(const void *e)
{
	return ((const BatchEntry *) e)->page;
}

/* Bytes of backend memory a batch or a set of page masks may use. */
static inline Size
bloom_work_mem(void)
{
	return Min((Size) ss_pending_memory_kb * 1024, MaxAllocSize / 2);
}

bool
bloom_read_meta(Relation rel, BloomMetaData *meta)
{
	return ss_read_structure_meta(rel, &bloom_state_ops, meta);
}

/* Add committed counts to the metapage (locked alone, briefly). */
static void
bloom_meta_add(Relation rel, int64 items, int64 bits, int64 flushes)
{
	Buffer		buf;
	SSXLogState *state;
	BloomMetaData *meta;

	if (items == 0 && bits == 0 && flushes == 0)
		return;
	state = ss_xlog_start(rel);
	meta = ss_meta_register(rel, SS_KIND_BLOOM, state, &buf);
	meta->items += items;
	meta->bits_set += bits;
	meta->flushes += flushes;
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}

/* ---- plain and elevator layout: page masks ---- */

/*
 * Where the hashes of a mask pass come from: the transaction's pending
 * log (plain), or the elevator buffer pages followed by an array of
 * entries that did not fit (elevator flush).  A source can be rewound.
 */
typedef struct HashSource
{
	Relation	rel;
	const BloomParams *p;
	bool		from_pending;
	int64		count;			/* hashes returned since the last rewind */
	/* pending log */
	SSPendingIter it;
	bool		it_open;
	/* elevator buffer: a copy of the current sub-buffer */
	BlockNumber nblocks;
	uint32		subbuf;
	uint32		pos;
	uint32		n;
	uint64	   *entries;
	const BatchEntry *extra;
	int			nextra;
	int			extra_pos;
} HashSource;

static void
source_rewind(HashSource *s)
{
	s->count = 0;
	if (s->from_pending)
	{
		if (s->it_open)
			ss_pending_iter_end(&s->it);
		ss_pending_iter_begin(&s->it, RelationGetRelid(s->rel));
		s->it_open = true;
	}
	else
	{
		s->nblocks = RelationGetNumberOfBlocks(s->rel);
		s->subbuf = 0;
		s->pos = s->n = 0;
		s->extra_pos = 0;
	}
}

/* Copy sub-buffer s->subbuf into s->entries (empty if never written). */
static void
source_load_subbuf(HashSource *s)
{
	const BloomParams *p = s->p;
	BlockNumber blk = bloom_buffer_blkno(p, s->subbuf);
	Buffer		buf;
	Page		page;

	s->pos = s->n = 0;
	if (blk >= s->nblocks)
		return;
	buf = ReadBuffer(s->rel, blk);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (!PageIsNew(page))
	{
		ss_page_check(s->rel, blk, page, SS_PAGE_BLOOM_BUFFER);
		s->n = bloom_buf_counts(page)[s->subbuf % p->subbufs_per_page];
		if (s->n > p->subbuf_cap)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("sub-buffer %u of relation \"%s\" claims %u entries, capacity is %u",
							s->subbuf, RelationGetRelationName(s->rel), s->n,
							p->subbuf_cap)));
		memcpy(s->entries, bloom_buf_entries(page, p, s->subbuf),
			   s->n * sizeof(uint64));
	}
	UnlockReleaseBuffer(buf);
}

static bool
source_next(HashSource *s, uint64 *h2)
{
	if (s->from_pending)
	{
		SSPendingHeader hdr;
		char	   *payload;

		while (ss_pending_iter_next(&s->it, &hdr, &payload))
		{
			SSPendingKey key;

			if (hdr.type != SS_PENDING_KEY)
				continue;
			memcpy(&key, payload, sizeof(key));
			*h2 = key.hash.h2;
			s->count++;
			return true;
		}
		return false;
	}
	while (s->pos >= s->n && s->subbuf < s->p->nsubbufs)
	{
		CHECK_FOR_INTERRUPTS();
		source_load_subbuf(s);
		s->subbuf++;
	}
	if (s->pos < s->n)
		*h2 = s->entries[s->pos++];
	else if (s->extra_pos < s->nextra)
		*h2 = s->extra[s->extra_pos++].h2;
	else
		return false;
	s->count++;
	return true;
}

static void
source_end(HashSource *s)
{
	if (s->it_open)
		ss_pending_iter_end(&s->it);
	s->it_open = false;
	if (s->entries)
		pfree(s->entries);
	s->entries = NULL;
}

/* OR a page mask into bit page `page`; returns the number of new bits. */
static int64
bloom_or_page(Relation rel, uint32 page, const uint64 *mask)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		buf;
	uint64	   *words;
	int64		nnew = 0;

	words = (uint64 *) SSPageGetData(ss_lock_page_for_write(rel, state, 1 + page,
															SS_PAGE_BLOOM_BITS,
															SS_PAGE_DATA_SIZE,
															&buf, NULL));
	for (uint32 w = 0; w < BLOOM_PAGE_WORDS; w++)
	{
		uint64		add = mask[w] & ~words[w];

		if (add)
		{
			nnew += pg_popcount64(add);
			words[w] |= add;
		}
	}
	if (nnew > 0)
		ss_xlog_finish(state);
	else
		ss_xlog_abort(state);	/* every bit was set already: no WAL */
	UnlockReleaseBuffer(buf);
	return nnew;
}

/*
 * Set the k bits of every hash of src (plain/elevator layout), writing
 * each touched page once per range of pages that fits in memory.  Returns
 * the number of bits that were newly set.
 */
static int64
bloom_apply_global(Relation rel, const BloomParams *p, HashSource *src)
{
	uint32		maxmasks = (uint32) Max(bloom_work_mem() / SS_PAGE_DATA_SIZE, 1);
	uint32		span = Min(maxmasks, p->npages);
	uint64	  **masks = palloc0(sizeof(uint64 *) * span);
	uint64	  **freelist = palloc(sizeof(uint64 *) * span);
	uint32		nfree = 0;
	uint32		lo = 0;
	int64		nnew = 0;

	while (lo < p->npages)
	{
		uint32		hi = (uint32) Min((uint64) lo + span, (uint64) p->npages);
		uint32		next = PG_UINT32_MAX;	/* first touched page >= hi */
		uint64		h2;

		source_rewind(src);
		while (source_next(src, &h2))
		{
			if ((src->count & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
			for (uint32 i = 0; i < p->nhashes; i++)
			{
				uint64		b = bloom_global_bit(p, h2, i);
				uint32		pg = (uint32) (b / BLOOM_PAGE_BITS);
				uint64	   *m;

				if (pg < lo)
					continue;
				if (pg >= hi)
				{
					next = Min(next, pg);
					continue;
				}
				m = masks[pg - lo];
				if (m == NULL)
					m = masks[pg - lo] = nfree > 0 ? freelist[--nfree] :
						palloc0(SS_PAGE_DATA_SIZE);
				bloom_set_bit(m, (uint32) (b % BLOOM_PAGE_BITS));
			}
		}
		for (uint32 j = 0; j < hi - lo; j++)
		{
			if (masks[j] == NULL)
				continue;
			CHECK_FOR_INTERRUPTS();
			nnew += bloom_or_page(rel, lo + j, masks[j]);
			memset(masks[j], 0, SS_PAGE_DATA_SIZE);
			freelist[nfree++] = masks[j];
			masks[j] = NULL;
		}
		lo = next;
	}
	for (uint32 j = 0; j < nfree; j++)
		pfree(freelist[j]);
	pfree(freelist);
	pfree(masks);
	return nnew;
}

/* ---- elevator buffer ---- */

/*
 * Append a batch (sorted by sub-buffer) to the elevator's sub-buffers, as
 * much of each group as fits.  The entries that did not fit are moved to
 * the front of the batch, in order; returns their number.  The caller
 * holds the heavyweight lock in share or exclusive mode.
 */
static int
elevator_append(Relation rel, const BloomParams *p, BatchEntry *batch, int n)
{
	int			nleft = 0;
	int			start = 0;

	while (start < n)
	{
		int			end = start + 1;
		uint32		sb = batch[start].page;
		SSXLogState *state;
		Buffer		buf;
		Page		page;
		uint32	   *count;
		uint64	   *sub;
		int			fit;

		CHECK_FOR_INTERRUPTS();
		while (end < n && batch[end].page == sb)
			end++;
		state = ss_xlog_start(rel);
		page = ss_lock_page_for_write(rel, state, bloom_buffer_blkno(p, sb),
									  SS_PAGE_BLOOM_BUFFER, SS_PAGE_DATA_SIZE,
									  &buf, NULL);
		count = &bloom_buf_counts(page)[sb % p->subbufs_per_page];
		sub = bloom_buf_entries(page, p, sb);
		if (*count > p->subbuf_cap)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("sub-buffer %u of relation \"%s\" claims %u entries, capacity is %u",
							sb, RelationGetRelationName(rel), *count, p->subbuf_cap)));
		fit = (int) Min((uint32) (end - start), p->subbuf_cap - *count);
		for (int i = 0; i < fit; i++)
			sub[*count + i] = batch[start + i].h2;
		*count += fit;
		if (fit > 0)
			ss_xlog_finish(state);
		else
			ss_xlog_abort(state);
		UnlockReleaseBuffer(buf);
		for (int i = start + fit; i < end; i++)
			batch[nleft++] = batch[i];
		start = end;
	}
	return nleft;
}

/* Empty every elevator sub-buffer (after its bits were set). */
static void
elevator_clear(Relation rel, const BloomParams *p)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);

	for (uint32 b = 0; b < p->nbufpages; b++)
	{
		BlockNumber blk = 1 + p->npages + b;
		Buffer		buf;
		Page		page;
		bool		any = false;

		CHECK_FOR_INTERRUPTS();
		if (blk >= nblocks)
			break;
		buf = ReadBuffer(rel, blk);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		page = BufferGetPage(buf);
		if (!PageIsNew(page))
		{
			ss_page_check(rel, blk, page, SS_PAGE_BLOOM_BUFFER);
			for (uint32 s = 0; s < p->subbufs_per_page; s++)
				any |= bloom_buf_counts(page)[s] != 0;
		}
		if (any)
		{
			SSXLogState *state = ss_xlog_start(rel);

			page = ss_xlog_register(state, buf, 0);
			memset(bloom_buf_counts(page), 0, p->subbufs_per_page * sizeof(uint32));
			ss_xlog_finish(state);
		}
		UnlockReleaseBuffer(buf);
	}
}

/*
 * The elevator flush: set the bits of every buffered entry and of extra
 * (entries that found their sub-buffer full), page by page in order, then
 * empty the buffer.  The caller holds the heavyweight lock exclusively.
 * Returns the number of entries applied; *nnew gets the new bits.
 */
static int64
elevator_flush(Relation rel, const BloomParams *p, const BatchEntry *extra,
			   int nextra, int64 *nnew)
{
	HashSource	src;

	memset(&src, 0, sizeof(src));
	src.rel = rel;
	src.p = p;
	src.from_pending = false;
	src.entries = palloc(sizeof(uint64) * p->subbuf_cap);
	src.extra = extra;
	src.nextra = nextra;
	*nnew += bloom_apply_global(rel, p, &src);
	source_end(&src);
	elevator_clear(rel, p);
	return src.count;
}

/* Apply a batch to the elevator buffer, flushing it when a sub-buffer is full. */
static void
elevator_apply_batch(Relation rel, const BloomParams *p, BatchEntry *batch,
					 int n, int64 *nnew, int64 *flushes)
{
	int			nleft;

	ss_sort_batch_by_page(batch, n, sizeof(BatchEntry), batch_entry_page,
						  batch_entry_cmp);
	nleft = elevator_append(rel, p, batch, n);
	if (nleft == 0)
		return;
	/* a sub-buffer is full: flush everything, alone */
	UnlockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
	LockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	/* someone else may have flushed while we waited */
	nleft = elevator_append(rel, p, batch, nleft);
	if (nleft > 0)
	{
		elevator_flush(rel, p, batch, nleft, nnew);
		(*flushes)++;
	}
	UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	LockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
}

/* ---- localized layout (the BBF) ---- */

/* Set a key's k bits in its page; returns the number of new bits. */
static inline int64
bloom_set_local(uint64 *words, const BloomParams *p, uint64 h2)
{
	int64		nnew = 0;

	for (uint32 i = 0; i < p->nhashes; i++)
	{
		uint32		bit = bloom_local_bit(p, h2, i);

		if (!bloom_test_bit(words, bit))
		{
			bloom_set_bit(words, bit);
			nnew++;
		}
	}
	return nnew;
}

/*
 * Apply the inserts of one bit page (entries[0..n), or none): appended to
 * the page's sub-buffer if they fit and force is not set, else the
 * sub-buffer and the new entries are applied to the bit page in one WAL
 * record and the sub-buffer is emptied.  Returns the number of sub-buffer
 * entries applied; *nnew gets the new bits.
 */
static uint32
bloom_apply_local_group(Relation rel, const BloomParams *p, uint32 bitpage,
						const BatchEntry *entries, int n, bool force,
						int64 *nnew)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		bbuf = InvalidBuffer;
	Buffer		sbuf;
	uint32	   *count = NULL;
	uint64	   *sub = NULL;
	uint64	   *words;
	uint32		flushed = 0;
	int64		added = 0;

	if (p->nsubbufs > 0)
	{
		Page		bpage = ss_lock_page_for_write(rel, state,
												   bloom_buffer_blkno(p, bitpage),
												   SS_PAGE_BLOOM_BUFFER,
												   SS_PAGE_DATA_SIZE, &bbuf, NULL);

		count = &bloom_buf_counts(bpage)[bitpage % p->subbufs_per_page];
		sub = bloom_buf_entries(bpage, p, bitpage);
		if (*count > p->subbuf_cap)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("sub-buffer of page %u of relation \"%s\" claims %u entries, capacity is %u",
							bitpage, RelationGetRelationName(rel), *count,
							p->subbuf_cap)));
		if (*count + n <= p->subbuf_cap && !force)
		{
			for (int i = 0; i < n; i++)
				sub[*count + i] = entries[i].h2;
			*count += n;
			ss_xlog_finish(state);
			UnlockReleaseBuffer(bbuf);
			return 0;
		}
	}

	/* lock order: buffer page (held), then bit page */
	words = (uint64 *) SSPageGetData(ss_lock_page_for_write(rel, state,
															bloom_bits_blkno(p, bitpage),
															SS_PAGE_BLOOM_BITS,
															SS_PAGE_DATA_SIZE,
															&sbuf, NULL));
	if (count != NULL)
	{
		for (uint32 i = 0; i < *count; i++)
			added += bloom_set_local(words, p, sub[i]);
		flushed = *count;
		*count = 0;
	}
	for (int i = 0; i < n; i++)
		added += bloom_set_local(words, p, entries[i].h2);
	if (added > 0 || flushed > 0)
		ss_xlog_finish(state);
	else
		ss_xlog_abort(state);
	UnlockReleaseBuffer(sbuf);
	if (BufferIsValid(bbuf))
		UnlockReleaseBuffer(bbuf);
	*nnew += added;
	return flushed;
}

/* Sort a localized batch by bit page and apply it page by page. */
static void
bloom_apply_local_batch(Relation rel, const BloomParams *p, BatchEntry *batch,
						int n, int64 *nnew, int64 *flushes)
{
	int			start = 0;

	ss_sort_batch_by_page(batch, n, sizeof(BatchEntry), batch_entry_page,
						  batch_entry_cmp);
	while (start < n)
	{
		int			end = start + 1;

		CHECK_FOR_INTERRUPTS();
		while (end < n && batch[end].page == batch[start].page)
			end++;
		if (bloom_apply_local_group(rel, p, batch[start].page, batch + start,
									end - start, false, nnew) > 0)
			(*flushes)++;
		start = end;
	}
}

/* ---- commit ---- */

/*
 * Apply a committing transaction's pending inserts into rel (called at
 * pre-commit by ss_pending.c).  Localized and elevator inserts are
 * collected into batches of at most streamsketch.pending_memory bytes,
 * sorted by page or sub-buffer; plain inserts go through page masks.
 */
void
bloom_apply_pending(Relation rel)
{
	BloomState *st = bloom_get_state(rel);
	const BloomParams *p = &st->p;
	SSPendingIter it;
	SSPendingHeader hdr;
	char	   *payload;
	int64		items = 0;
	int64		nnew = 0;
	int64		flushes = 0;
	bool		any;

	ss_pending_iter_begin(&it, RelationGetRelid(rel));
	any = ss_pending_iter_next(&it, &hdr, &payload);
	ss_pending_iter_end(&it);
	if (!any)
		return;					/* e.g. only a TRUNCATE */

	if (p->nsubbufs == 0 && p->mode != BLOOM_MODE_LOCALIZED)
	{
		/* plain (or an unbuffered elevator): up to k pages per insert */
		HashSource	src;

		memset(&src, 0, sizeof(src));
		src.rel = rel;
		src.p = p;
		src.from_pending = true;
		nnew = bloom_apply_global(rel, p, &src);
		items = src.count;
		source_end(&src);
	}
	else
	{
		int			maxbatch = (int) Max(bloom_work_mem() / sizeof(BatchEntry), 1);
		BatchEntry *batch = palloc(sizeof(BatchEntry) * maxbatch);
		int			nbatch = 0;
		uint32		seq = 0;
		bool		elevator = p->mode == BLOOM_MODE_ELEVATOR;

		if (elevator)
			LockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
		ss_pending_iter_begin(&it, RelationGetRelid(rel));
		while (ss_pending_iter_next(&it, &hdr, &payload))
		{
			SSPendingKey key;

			if (hdr.type != SS_PENDING_KEY)
				continue;
			memcpy(&key, payload, sizeof(key));
			items++;
			if (nbatch == maxbatch)
			{
				if (elevator)
					elevator_apply_batch(rel, p, batch, nbatch, &nnew, &flushes);
				else
					bloom_apply_local_batch(rel, p, batch, nbatch, &nnew, &flushes);
				nbatch = 0;
			}
			batch[nbatch].page = bloom_subbuf_of(p, key.hash);
			batch[nbatch].seq = seq++;
			batch[nbatch].h2 = key.hash.h2;
			nbatch++;
		}
		ss_pending_iter_end(&it);
		if (nbatch > 0)
		{
			if (elevator)
				elevator_apply_batch(rel, p, batch, nbatch, &nnew, &flushes);
			else
				bloom_apply_local_batch(rel, p, batch, nbatch, &nnew, &flushes);
		}
		if (elevator)
			UnlockPage(rel, SS_METAPAGE_BLKNO, ShareLock);
		pfree(batch);
	}
	bloom_meta_add(rel, items, nnew, flushes);
}

/*
 * Apply every buffered insert to the bit pages now (bloom_flush).  Returns
 * the number of entries applied; lookups answer the same before and after.
 */
int64
bloom_flush_all(Relation rel, const BloomState *st)
{
	const BloomParams *p = &st->p;
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	int64		applied = 0;
	int64		flushes = 0;
	int64		nnew = 0;

	if (p->nsubbufs == 0 || nblocks == 0)
		return 0;

	if (p->mode == BLOOM_MODE_ELEVATOR)
	{
		LockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
		applied = elevator_flush(rel, p, NULL, 0, &nnew);
		UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
		flushes = applied > 0;
	}
	else
	{
		for (uint32 pg = 0; pg < p->npages; pg++)
		{
			BlockNumber bblk = bloom_buffer_blkno(p, pg);
			Buffer		bbuf;
			uint32		n;

			CHECK_FOR_INTERRUPTS();
			if (bblk >= nblocks)
				break;
			/* peek under a share lock, so empty sub-buffers cost no WAL */
			bbuf = ReadBuffer(rel, bblk);
			LockBuffer(bbuf, BUFFER_LOCK_SHARE);
			ss_page_check(rel, bblk, BufferGetPage(bbuf), SS_PAGE_BLOOM_BUFFER);
			n = PageIsNew(BufferGetPage(bbuf)) ? 0 :
				bloom_buf_counts(BufferGetPage(bbuf))[pg % p->subbufs_per_page];
			UnlockReleaseBuffer(bbuf);
			if (n == 0)
				continue;
			n = bloom_apply_local_group(rel, p, pg, NULL, 0, true, &nnew);
			applied += n;
			flushes += n > 0;
		}
	}
	bloom_meta_add(rel, 0, nnew, flushes);
	return applied;
}
