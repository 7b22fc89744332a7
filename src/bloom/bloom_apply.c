/*-------------------------------------------------------------------------
 *
 * bloom_apply.c
 *	  Writing a bloom_filter: consolidating committed inserts from the
 *	  change log into each mode's pages, and flushing buffers.
 *
 * Every page change is one GenericXLog record (a no-op for unlogged
 * relations); a localized sub-buffer is applied to its bit page in the
 * same record that empties it.
 *
 * Setting a bit is idempotent, so a bloom filter needs no applied_pos
 * marks (ss_changelog.h): a consolidation round redone after a crash sets
 * bits that are set already, and at worst appends a sub-buffer entry a
 * second time, which changes no answer.  For the same reason an elevator
 * flush sets the bits of every buffered entry first and empties the buffer
 * pages afterwards, and a lookup reads the buffer before the bits and the
 * bits before the log, so it never misses a committed key whatever it
 * races with.  (bits_set counts the bits a round newly set; bits set by a
 * round cut short by a crash are not counted again when it is redone.)
 *
 * Bits of the plain and elevator layouts are applied through page masks:
 * one pass over the entries ORs their bits into an in-memory image of each
 * touched page (at most streamsketch.pending_memory bytes of images), then
 * each touched page is written once, in page order.  A filter with more
 * pages than fit takes several passes over the entries, each covering the
 * next range of touched pages, so every page is still written once per
 * flush: the elevator.
 *
 * Locking: consolidation and bloom_flush() both run under the change
 * log's consolidation lock (ss_changelog.h), so sub-buffers have a single
 * writer; an elevator flush reads and empties every sub-buffer without
 * racing an append.  Buffer locks: a localized sub-buffer's buffer page
 * before its bit page (like bcms); otherwise one page at a time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ss_xlog.h"
#include "bloom.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* Bytes of backend memory a consolidation's set of page masks may use. */
static inline Size
bloom_work_mem(void)
{
	return Min(ss_consolidation_memory(), MaxAllocSize / 2);
}

bool
bloom_read_meta(Relation rel, BloomMetaData *meta)
{
	return ss_read_structure_meta(rel, &bloom_state_ops, meta);
}

/* Add a consolidation round's or a flush's counts to the metapage contents. */
void
bloom_add_stats(void *metap, const void *statsp)
{
	BloomMetaData *meta = (BloomMetaData *) metap;
	const BloomStats *stats = (const BloomStats *) statsp;

	meta->items += stats->items;
	meta->bits_set += stats->bits_set;
	meta->flushes += stats->flushes;
}

/* The key of a change record (bloom_filter logs only key inserts). */
static inline uint64
bloom_record_h2(Relation rel, const SSPendingHeader *hdr, const char *payload,
				SSHash *hash)
{
	SSPendingKey key;

	if (hdr->type != SS_PENDING_KEY || hdr->len != sizeof(key))
		ss_page_corrupted(rel, InvalidBlockNumber,
						  "A bloom_filter change record has type %u and length %u.",
						  hdr->type, hdr->len);
	memcpy(&key, payload, sizeof(key));
	if (hash)
		*hash = key.hash;
	return key.hash.h2;
}

/* ---- plain and elevator layout: page masks ---- */

typedef void (*BloomHashFn) (uint64 h2, void *arg);

/*
 * Where the hashes of a mask pass come from: a consolidation round's
 * committed records, or the elevator's sub-buffers followed by entries
 * that did not fit in them.  run() calls fn for every hash, each time it
 * is called.
 */
typedef struct HashFeed
{
	void		(*run) (struct HashFeed *feed, BloomHashFn fn, void *arg);
	Relation	rel;
	const BloomParams *p;
	SSConsolidation *cons;		/* consolidation round */
	const uint64 *extra;		/* elevator flush */
	int			nextra;
	int64		count;			/* hashes of the last run */
} HashFeed;

typedef struct LogFeedArg
{
	HashFeed   *feed;
	BloomHashFn fn;
	void	   *arg;
} LogFeedArg;

static void
log_feed_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
				void *arg)
{
	LogFeedArg *la = arg;

	la->feed->count++;
	la->fn(bloom_record_h2(la->feed->rel, hdr, payload, NULL), la->arg);
}

static void
log_feed_run(HashFeed *feed, BloomHashFn fn, void *arg)
{
	LogFeedArg	la = {feed, fn, arg};

	feed->count = 0;
	ss_cons_foreach(feed->cons, log_feed_record, &la);
}

/* Every entry of the elevator's sub-buffers, then the extra entries. */
static void
buffer_feed_run(HashFeed *feed, BloomHashFn fn, void *arg)
{
	const BloomParams *p = feed->p;
	BlockNumber nblocks = RelationGetNumberOfBlocks(feed->rel);
	uint64	   *entries = palloc(sizeof(uint64) * Max(p->subbuf_cap, 1));

	feed->count = 0;
	for (uint32 sb = 0; sb < p->nsubbufs; sb++)
	{
		BlockNumber blk = bloom_buffer_blkno(p, sb);
		Buffer		buf;
		Page		page;
		uint32		n = 0;

		CHECK_FOR_INTERRUPTS();
		if (blk >= nblocks)
			break;
		/* copy the sub-buffer, so no buffer lock is held during fn */
		buf = ReadBuffer(feed->rel, blk);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (!PageIsNew(page))
		{
			ss_page_check(feed->rel, blk, page, SS_PAGE_BLOOM_BUFFER);
			n = bloom_buf_counts(page)[sb % p->subbufs_per_page];
			if (n > p->subbuf_cap)
				ss_page_corrupted(feed->rel, blk,
								  "Sub-buffer %u claims %u entries; its capacity is %u.",
								  sb, n, p->subbuf_cap);
			memcpy(entries, bloom_buf_entries(page, p, sb), n * sizeof(uint64));
		}
		UnlockReleaseBuffer(buf);
		for (uint32 i = 0; i < n; i++)
			fn(entries[i], arg);
		feed->count += n;
	}
	pfree(entries);
	for (int i = 0; i < feed->nextra; i++)
		fn(feed->extra[i], arg);
}

/* One pass of page masks over the pages [lo, hi). */
typedef struct MaskPass
{
	const BloomParams *p;
	uint32		lo;
	uint32		hi;
	uint32		next;			/* first touched page >= hi */
	uint64	  **masks;
	uint64	  **freelist;
	uint32		nfree;
	uint64		seen;
} MaskPass;

static void
mask_add_hash(uint64 h2, void *arg)
{
	MaskPass   *mp = arg;
	const BloomParams *p = mp->p;

	if ((++mp->seen & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
	for (uint32 i = 0; i < p->nhashes; i++)
	{
		uint64		b = bloom_global_bit(p, h2, i);
		uint32		pg = (uint32) (b / BLOOM_PAGE_BITS);
		uint64	   *m;

		if (pg < mp->lo)
			continue;
		if (pg >= mp->hi)
		{
			mp->next = Min(mp->next, pg);
			continue;
		}
		m = mp->masks[pg - mp->lo];
		if (m == NULL)
			m = mp->masks[pg - mp->lo] = mp->nfree > 0 ?
				mp->freelist[--mp->nfree] : palloc0(SS_PAGE_DATA_SIZE);
		bloom_set_bit(m, (uint32) (b % BLOOM_PAGE_BITS));
	}
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
 * Set the k bits of every hash of the feed (plain/elevator layout),
 * writing each touched page once per range of pages that fits in memory.
 * Returns the number of bits that were newly set.
 */
static int64
bloom_apply_global(Relation rel, const BloomParams *p, HashFeed *feed)
{
	uint32		maxmasks = (uint32) Max(bloom_work_mem() / SS_PAGE_DATA_SIZE, 1);
	uint32		span = Min(maxmasks, p->npages);
	MaskPass	mp;
	int64		nnew = 0;

	memset(&mp, 0, sizeof(mp));
	mp.p = p;
	mp.masks = palloc0(sizeof(uint64 *) * span);
	mp.freelist = palloc(sizeof(uint64 *) * span);
	while (mp.lo < p->npages)
	{
		mp.hi = (uint32) Min((uint64) mp.lo + span, (uint64) p->npages);
		mp.next = PG_UINT32_MAX;
		feed->run(feed, mask_add_hash, &mp);
		for (uint32 j = 0; j < mp.hi - mp.lo; j++)
		{
			if (mp.masks[j] == NULL)
				continue;
			CHECK_FOR_INTERRUPTS();
			nnew += bloom_or_page(rel, mp.lo + j, mp.masks[j]);
			memset(mp.masks[j], 0, SS_PAGE_DATA_SIZE);
			mp.freelist[mp.nfree++] = mp.masks[j];
			mp.masks[j] = NULL;
		}
		mp.lo = mp.next;
	}
	for (uint32 j = 0; j < mp.nfree; j++)
		pfree(mp.freelist[j]);
	pfree(mp.freelist);
	pfree(mp.masks);
	return nnew;
}

/* ---- elevator buffer ---- */

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
 * empty the buffer.  Returns the number of buffered entries applied and
 * adds the new bits to stats.
 */
static int64
elevator_flush(Relation rel, const BloomParams *p, const uint64 *extra,
			   int nextra, BloomStats *stats)
{
	HashFeed	feed;

	memset(&feed, 0, sizeof(feed));
	feed.run = buffer_feed_run;
	feed.rel = rel;
	feed.p = p;
	feed.extra = extra;
	feed.nextra = nextra;
	stats->bits_set += bloom_apply_global(rel, p, &feed);
	elevator_clear(rel, p);
	return feed.count;
}

/*
 * Append the entries of one elevator sub-buffer; if they do not all fit,
 * flush the whole buffer with the rest of them (the elevator).
 */
static void
elevator_apply_subbuf(Relation rel, const BloomParams *p, uint32 sb,
					  const uint64 *h2s, int n, BloomStats *stats)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		buf;
	Page		page;
	uint32	   *count;
	int			fit;

	page = ss_lock_page_for_write(rel, state, bloom_buffer_blkno(p, sb),
								  SS_PAGE_BLOOM_BUFFER, SS_PAGE_DATA_SIZE,
								  &buf, NULL);
	count = &bloom_buf_counts(page)[sb % p->subbufs_per_page];
	if (*count > p->subbuf_cap)
		ss_page_corrupted(rel, bloom_buffer_blkno(p, sb),
						  "Sub-buffer %u claims %u entries; its capacity is %u.",
						  sb, *count, p->subbuf_cap);
	fit = (int) Min((uint32) n, p->subbuf_cap - *count);
	memcpy(bloom_buf_entries(page, p, sb) + *count, h2s, fit * sizeof(uint64));
	*count += fit;
	if (fit > 0)
		ss_xlog_finish(state);
	else
		ss_xlog_abort(state);
	UnlockReleaseBuffer(buf);
	if (fit < n)
	{
		elevator_flush(rel, p, h2s + fit, n - fit, stats);
		stats->flushes++;
	}
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
 * Apply the inserts of one bit page (h2s[0..n), or none): appended to the
 * page's sub-buffer if they fit and force is not set, else the sub-buffer
 * and the new entries are applied to the bit page in one WAL record and
 * the sub-buffer is emptied.  Returns the number of sub-buffer entries
 * applied; the new bits are added to stats.
 */
static uint32
bloom_apply_local_group(Relation rel, const BloomParams *p, uint32 bitpage,
						const uint64 *h2s, int n, bool force,
						BloomStats *stats)
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
			ss_page_corrupted(rel, bloom_buffer_blkno(p, bitpage),
							  "The sub-buffer of bit page %u claims %u entries; its capacity is %u.",
							  bitpage, *count, p->subbuf_cap);
		if (*count + n <= p->subbuf_cap && !force)
		{
			memcpy(sub + *count, h2s, n * sizeof(uint64));
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
		added += bloom_set_local(words, p, h2s[i]);
	if (added > 0 || flushed > 0)
		ss_xlog_finish(state);
	else
		ss_xlog_abort(state);
	UnlockReleaseBuffer(sbuf);
	if (BufferIsValid(bbuf))
		UnlockReleaseBuffer(bbuf);
	stats->bits_set += added;
	return flushed;
}

/* ---- consolidation ---- */

typedef struct BloomConsolidation
{
	Relation	rel;
	const BloomParams *p;
	BloomStats *stats;
} BloomConsolidation;

/* A record's partition: its bit page (localized) or sub-buffer (elevator). */
static int
bloom_parts_of(const SSPendingHeader *hdr, const char *payload, uint32 *parts,
			   void *arg)
{
	BloomConsolidation *bc = arg;
	SSHash		h;

	bloom_record_h2(bc->rel, hdr, payload, &h);
	bc->stats->items++;
	parts[0] = bloom_subbuf_of(bc->p, h);
	return 1;
}

static bool
bloom_apply_group(Relation rel, uint32 part, const SSGroupEntry *entries,
				  int n, uint64 upto, void *arg)
{
	BloomConsolidation *bc = arg;
	uint64	   *h2s = palloc(sizeof(uint64) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		SSPendingKey key;

		memcpy(&key, ss_group_payload(&entries[i]), sizeof(key));
		h2s[i] = key.hash.h2;
	}
	if (bc->p->mode == BLOOM_MODE_LOCALIZED)
	{
		if (bloom_apply_local_group(rel, bc->p, part, h2s, n, false,
									bc->stats) > 0)
			bc->stats->flushes++;
	}
	else
		elevator_apply_subbuf(rel, bc->p, part, h2s, n, bc->stats);
	pfree(h2s);
	return true;
}

/*
 * Consolidate a round of committed inserts (ss_changelog.c).  Buffered
 * modes go through ss_cons_by_partition, which groups the records by bit
 * page or sub-buffer within streamsketch.pending_memory; plain (and an
 * unbuffered elevator) sets the bits of the whole round through page
 * masks, each touched page written once.
 */
bool
bloom_consolidate(SSConsolidation *c)
{
	const BloomParams *p = &bloom_get_state(c->rel)->p;
	BloomStats *stats = (BloomStats *) c->stats;

	if (p->nsubbufs == 0 && p->mode != BLOOM_MODE_LOCALIZED)
	{
		HashFeed	feed;

		memset(&feed, 0, sizeof(feed));
		feed.run = log_feed_run;
		feed.rel = c->rel;
		feed.p = p;
		feed.cons = c;
		stats->bits_set += bloom_apply_global(c->rel, p, &feed);
		stats->items += feed.count;
	}
	else
	{
		BloomConsolidation bc = {c->rel, p, stats};

		return ss_cons_by_partition(c, p->mode == BLOOM_MODE_LOCALIZED ?
									p->npages : p->nsubbufs,
									bloom_parts_of, bloom_apply_group, NULL,
									&bc);
	}
	return true;
}

/*
 * Apply every buffered insert to the bit pages now (bloom_flush, run by
 * ss_log_flush under the consolidation lock).  Returns the number of
 * entries applied; lookups answer the same before and after.
 */
int64
bloom_flush_all(Relation rel, void *statsp)
{
	const BloomParams *p = &bloom_get_state(rel)->p;
	BloomStats *stats = (BloomStats *) statsp;
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	int64		applied = 0;

	if (p->nsubbufs == 0)
		return 0;

	if (p->mode == BLOOM_MODE_ELEVATOR)
	{
		applied = elevator_flush(rel, p, NULL, 0, stats);
		stats->flushes += applied > 0;
		return applied;
	}
	for (uint32 pg = 0; pg < p->npages; pg++)
	{
		BlockNumber bblk = bloom_buffer_blkno(p, pg);
		uint32		n;

		CHECK_FOR_INTERRUPTS();
		if (bblk >= nblocks)
			break;
		if (ss_subbuf_count(rel, bblk, SS_PAGE_BLOOM_BUFFER,
							pg % p->subbufs_per_page) == 0)
			continue;
		n = bloom_apply_local_group(rel, p, pg, NULL, 0, true, stats);
		applied += n;
		stats->flushes += n > 0;
	}
	return applied;
}
