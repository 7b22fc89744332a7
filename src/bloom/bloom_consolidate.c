/*-------------------------------------------------------------------------
 *
 * bloom_consolidate.c
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
 * Bits of the plain and elevator layouts are applied sorted: the k bit
 * positions of every entry are collected and sorted (in memory, or by a
 * distribution over temporary files, one per range of pages, when they do
 * not fit in the consolidation memory), then each touched page is written
 * once, in page order: the elevator.
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
#include "ss_queryutil.h"
#include "storage/buffile.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* Bytes of backend memory a consolidation's bit positions may use. */
static inline Size
bloom_work_mem(void)
{
	return Min(ss_consolidation_memory(), MaxAllocSize / 2);
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

/* ---- plain and elevator layout: sorted bit positions ---- */

typedef void (*BloomHashFn) (uint64 h2, void *arg);

/*
 * Where the hashes to set come from: a consolidation round's
 * committed records, or the elevator's sub-buffers followed by entries
 * that did not fit in them.  run() calls fn for every hash.
 */
typedef struct HashFeed
{
	void		(*run) (struct HashFeed *feed, BloomHashFn fn, void *arg);
	Relation	rel;
	const BloomParams *p;
	SSConsolidation *cons;		/* consolidation round */
	const uint64 *extra;		/* elevator flush */
	int			nextra;
	uint64		max_hashes;		/* at least as many as run() gives */
	int64		count;			/* entries of the last run, or rows of its
								 * records (a round's) */
} HashFeed;

/* A feed of run's hashes, of which there are at most max_hashes. */
static void
hash_feed_init(HashFeed *feed,
			   void (*run) (HashFeed *feed, BloomHashFn fn, void *arg),
			   Relation rel, const BloomParams *p, uint64 max_hashes)
{
	memset(feed, 0, sizeof(*feed));
	feed->run = run;
	feed->rel = rel;
	feed->p = p;
	feed->max_hashes = max_hashes;
}

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

	la->feed->count += hdr->rows;
	la->fn(bloom_record_h2(la->feed->rel, hdr, payload, NULL), la->arg);
}

static void buffer_feed_run(HashFeed *feed, BloomHashFn fn, void *arg);

static void
log_feed_run(HashFeed *feed, BloomHashFn fn, void *arg)
{
	LogFeedArg	la = {feed, fn, arg};

	feed->count = 0;
	ss_cons_foreach(feed->cons, log_feed_record, &la);
}

/*
 * The elevator's sub-buffers, then a consolidation round's records (a
 * round too large for the buffer, bloom_consolidate); count: the records'
 * rows.
 */
static void
buffer_and_log_feed_run(HashFeed *feed, BloomHashFn fn, void *arg)
{
	buffer_feed_run(feed, fn, arg);
	log_feed_run(feed, fn, arg);
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

/*
 * Setting bits of a bitmap of megabytes at random positions, each one a
 * cache miss: a position is set BLOOM_SET_DELAY positions after its word
 * was prefetched, so the misses overlap.
 */
#define BLOOM_SET_DELAY		16

#if defined(__GNUC__) || defined(__clang__)
#define bloom_prefetch_for_write(addr) __builtin_prefetch((addr), 1)
#else
#define bloom_prefetch_for_write(addr) ((void) 0)
#endif

typedef struct DelayedBits
{
	uint64	   *words;
	uint64		count;			/* positions given since the last drain */
	uint32		delayed[BLOOM_SET_DELAY];	/* prefetched, not yet set */
} DelayedBits;

static inline void
delayed_bits_init(DelayedBits *db, uint64 *words)
{
	db->words = words;
	db->count = 0;
}

static inline void
delayed_bits_set(DelayedBits *db, uint32 bit)
{
	uint32	   *slot = &db->delayed[db->count++ % BLOOM_SET_DELAY];

	bloom_prefetch_for_write(&db->words[bit >> 6]);
	if (db->count > BLOOM_SET_DELAY)
		bloom_set_bit(db->words, *slot);
	*slot = bit;
}

/* Set the positions still delayed; the bitmap is then complete. */
static void
delayed_bits_drain(DelayedBits *db)
{
	for (uint64 i = 0; i < Min(db->count, BLOOM_SET_DELAY); i++)
		bloom_set_bit(db->words, db->delayed[i]);
	db->count = 0;
}

/*
 * The bit positions of a feed, collected for sorting.  They are kept in
 * memory (8 bytes each) as long as they fit in bloom_work_mem(); past that
 * they are spread over temporary files, one per range of range_pages bit
 * pages, as 32-bit offsets from the range's first bit (a range has fewer
 * than 2^16 pages of fewer than 2^16 bits).
 */
typedef struct BitCollector
{
	Relation	rel;
	const BloomParams *p;
	uint64		max_hashes;		/* the feed's upper bound */
	uint64	   *bits;
	Size		nbits;
	Size		allocated;
	Size		maxbits;		/* what bloom_work_mem() holds */
	BufFile   **files;			/* NULL until the positions spill */
	uint32		nfiles;
	uint32		range_pages;
	uint64		seen;
	uint64		rows;			/* of the round's records collected */
} BitCollector;

#define BLOOM_MAX_RANGE_PAGES	65536

static void
collector_spill_bit(BitCollector *bc, uint64 b)
{
	uint32		range = (uint32) (b / BLOOM_PAGE_BITS) / bc->range_pages;
	uint32		offset = (uint32) (b - (uint64) range * bc->range_pages * BLOOM_PAGE_BITS);

	if (bc->files[range] == NULL)
		bc->files[range] = BufFileCreateTemp(false);
	BufFileWrite(bc->files[range], &offset, sizeof(offset));
}

/*
 * The positions no longer fit in memory: choose ranges of pages whose
 * positions are expected to fill about three quarters of the memory (the
 * bits are uniform over the filter), within one 8 kB file buffer per 16 kB
 * of memory, and move the collected positions to their files.
 */
static void
collector_start_spill(BitCollector *bc)
{
	uint64		expected = bc->max_hashes * bc->p->nhashes;
	uint64		nfiles;

	nfiles = expected / Max(bc->maxbits * 3 / 4, 1) + 1;
	nfiles = Min(nfiles, Max(bc->maxbits * sizeof(uint64) / (2 * BLCKSZ), 2));
	nfiles = Max(nfiles, (bc->p->npages + BLOOM_MAX_RANGE_PAGES - 1) /
				 BLOOM_MAX_RANGE_PAGES);
	bc->range_pages = (uint32) ((bc->p->npages + nfiles - 1) / nfiles);
	bc->nfiles = (bc->p->npages + bc->range_pages - 1) / bc->range_pages;
	bc->files = palloc0(sizeof(BufFile *) * bc->nfiles);
	for (Size i = 0; i < bc->nbits; i++)
		collector_spill_bit(bc, bc->bits[i]);
	bc->nbits = 0;
}

/* Collect one bit position (in memory, or spilled once memory is full). */
static inline void
collector_add(BitCollector *bc, uint64 b)
{
	if (bc->files != NULL)
	{
		collector_spill_bit(bc, b);
		return;
	}
	if (bc->nbits == bc->allocated)
	{
		if (bc->allocated == bc->maxbits)
		{
			collector_start_spill(bc);
			collector_spill_bit(bc, b);
			return;
		}
		bc->allocated = Min(bc->allocated * 2, bc->maxbits);
		bc->bits = repalloc(bc->bits, sizeof(uint64) * bc->allocated);
	}
	bc->bits[bc->nbits++] = b;
}

/* The k positions of a hash (plain/elevator layout). */
static void
collect_hash_bits(uint64 h2, void *arg)
{
	BitCollector *bc = arg;
	const BloomParams *p = bc->p;

	if ((++bc->seen & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
	for (uint32 i = 0; i < p->nhashes; i++)
		collector_add(bc, bloom_global_bit(p, h2, i));
}

#define ST_SORT sort_bit_positions
#define ST_ELEMENT_TYPE uint64
#define ST_COMPARE(a, b) (*(a) < *(b) ? -1 : *(a) > *(b) ? 1 : 0)
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Write bit page `page` once: set the positions bits[0..n) (all in this
 * page), or, if add is given, OR its BLOOM_PAGE_WORDS words in.  Returns
 * the new bits; logs nothing if there are none.
 */
static int64
bloom_write_bit_page(Relation rel, uint32 page, const uint64 *bits, Size n,
					 const uint64 *add)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		buf;
	uint64	   *words;
	int64		nnew = 0;

	words = (uint64 *) SSPageGetData(ss_lock_page_for_write(rel, state, 1 + page,
															SS_PAGE_BLOOM_BITS,
															SS_PAGE_DATA_SIZE,
															&buf, NULL));
	if (add != NULL)
	{
		for (uint32 w = 0; w < BLOOM_PAGE_WORDS; w++)
		{
			uint64		fresh = add[w] & ~words[w];

			if (fresh != 0)
			{
				nnew += pg_popcount64(fresh);
				words[w] |= fresh;
			}
		}
	}
	else
	{
		for (Size i = 0; i < n; i++)
		{
			uint32		bit = (uint32) (bits[i] % BLOOM_PAGE_BITS);

			if (!bloom_test_bit(words, bit))
			{
				bloom_set_bit(words, bit);
				nnew++;
			}
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
 * OR a bitmap of npages bit pages into pages first.. of the filter, each
 * page with a bit written once.  Returns the new bits.
 */
static int64
bloom_write_bitmap(Relation rel, uint32 first, uint32 npages,
				   const uint64 *words)
{
	int64		nnew = 0;

	for (uint32 pg = 0; pg < npages; pg++)
	{
		const uint64 *add = words + (Size) pg * BLOOM_PAGE_WORDS;
		bool		any = false;

		CHECK_FOR_INTERRUPTS();
		for (uint32 w = 0; w < BLOOM_PAGE_WORDS && !any; w++)
			any = add[w] != 0;
		if (any)
			nnew += bloom_write_bit_page(rel, first + pg, NULL, 0, add);
	}
	return nnew;
}

/*
 * Order bit positions by page (not within a page, where order does not
 * matter).  When the pages are few for the positions, as in a round,
 * an in-place bucket permutation by page (American flag sort: two passes,
 * no comparisons, counters for half as many pages as positions at most);
 * else a comparison sort.
 */
static void
group_bits_by_page(uint64 *bits, Size n)
{
	uint64		maxpage = 0;
	uint32	   *next;
	uint32	   *end;

	for (Size i = 0; i < n; i++)
		maxpage = Max(maxpage, bits[i] / BLOOM_PAGE_BITS);
	if (n < 64 || maxpage >= (uint64) n / 2 || n > PG_UINT32_MAX)
	{
		sort_bit_positions(bits, n);
		return;
	}
	next = palloc0(sizeof(uint32) * (maxpage + 2));
	end = palloc(sizeof(uint32) * (maxpage + 1));
	for (Size i = 0; i < n; i++)
		next[bits[i] / BLOOM_PAGE_BITS + 1]++;
	for (uint64 pg = 1; pg <= maxpage + 1; pg++)
		next[pg] += next[pg - 1];
	for (uint64 pg = 0; pg <= maxpage; pg++)
		end[pg] = next[pg + 1];
	/* move every position to its page's bucket, one swap at a time */
	for (uint64 pg = 0; pg <= maxpage; pg++)
	{
		while (next[pg] < end[pg])
		{
			uint64		b = bits[next[pg]];
			uint64		q = b / BLOOM_PAGE_BITS;

			if (q == pg)
				next[pg]++;
			else
			{
				bits[next[pg]] = bits[next[q]];
				bits[next[q]++] = b;
			}
		}
	}
	pfree(next);
	pfree(end);
}

/* Group bit positions by page and set them, each touched page written once. */
static int64
bloom_set_sorted_bits(Relation rel, uint64 *bits, Size n)
{
	int64		nnew = 0;
	Size		i = 0;

	group_bits_by_page(bits, n);
	while (i < n)
	{
		uint32		page = (uint32) (bits[i] / BLOOM_PAGE_BITS);
		Size		j = i + 1;

		while (j < n && bits[j] / BLOOM_PAGE_BITS == page)
			j++;
		CHECK_FOR_INTERRUPTS();
		nnew += bloom_write_bit_page(rel, page, bits + i, j - i, NULL);
		i = j;
	}
	return nnew;
}

/*
 * Set the positions spilled to the file of range `range`, then drop it.
 * If a bitmap of the range's pages fits in the collector's memory, the
 * positions are ORed into it and each page is written once, however many
 * positions the range holds (a round many times larger than memory);
 * otherwise they are sorted and set in parts of memory's size, each part
 * writing the pages it touches.
 */
static int64
bloom_set_spilled_range(BitCollector *bc, uint32 range)
{
	BufFile    *file = bc->files[range];
	uint32		first_page = range * bc->range_pages;
	uint32		npages = Min(bc->range_pages, bc->p->npages - first_page);
	uint64		first = (uint64) first_page * BLOOM_PAGE_BITS;
	bool		bitmap = (Size) npages * BLOOM_PAGE_WORDS <= bc->maxbits;
	uint32		chunk[1024];
	DelayedBits bitmap_bits;
	int64		nnew = 0;
	size_t		nread;

	if (BufFileSeek(file, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not rewind temporary file of bloom filter bit positions")));
	if (bitmap)
	{
		if (bc->allocated < (Size) npages * BLOOM_PAGE_WORDS)
		{
			bc->allocated = (Size) npages * BLOOM_PAGE_WORDS;
			bc->bits = repalloc(bc->bits, sizeof(uint64) * bc->allocated);
		}
		memset(bc->bits, 0, sizeof(uint64) * npages * BLOOM_PAGE_WORDS);
		delayed_bits_init(&bitmap_bits, bc->bits);
	}
	bc->nbits = 0;
	do
	{
		nread = BufFileRead(file, chunk, sizeof(chunk)) / sizeof(uint32);
		for (size_t i = 0; i < nread; i++)
		{
			if (bitmap)
			{
				if (chunk[i] >= npages * BLOOM_PAGE_BITS)
					elog(ERROR, "bloom filter bit offset %u beyond its range of %u pages",
						 chunk[i], npages);
				delayed_bits_set(&bitmap_bits, chunk[i]);
				continue;
			}
			if (bc->nbits == bc->maxbits)
			{
				nnew += bloom_set_sorted_bits(bc->rel, bc->bits, bc->nbits);
				bc->nbits = 0;
			}
			bc->bits[bc->nbits++] = first + chunk[i];
		}
		CHECK_FOR_INTERRUPTS();
	} while (nread > 0);
	if (bitmap)
	{
		delayed_bits_drain(&bitmap_bits);
		nnew += bloom_write_bitmap(bc->rel, first_page, npages, bc->bits);
	}
	else
		nnew += bloom_set_sorted_bits(bc->rel, bc->bits, bc->nbits);
	bc->nbits = 0;
	BufFileClose(file);
	bc->files[range] = NULL;
	return nnew;
}

/* A collector of up to bloom_work_mem() of positions in memory. */
static void
collector_init(BitCollector *bc, Relation rel, const BloomParams *p,
			   uint64 max_hashes)
{
	memset(bc, 0, sizeof(*bc));
	bc->rel = rel;
	bc->p = p;
	bc->max_hashes = max_hashes;
	bc->maxbits = Max(bloom_work_mem() / sizeof(uint64), BLOOM_MAX_HASHES);
	bc->allocated = Min(bc->maxbits, 1024);
	bc->bits = palloc(sizeof(uint64) * bc->allocated);
}

/* Set every collected position, each touched page written once. */
static int64
collector_apply(BitCollector *bc)
{
	int64		nnew = 0;

	if (bc->files == NULL)
		nnew = bloom_set_sorted_bits(bc->rel, bc->bits, bc->nbits);
	else
	{
		for (uint32 r = 0; r < bc->nfiles; r++)
		{
			if (bc->files[r] != NULL)
				nnew += bloom_set_spilled_range(bc, r);
		}
		pfree(bc->files);
	}
	pfree(bc->bits);
	return nnew;
}

/* The positions of a bitmap pass: those in [first, end) of the filter. */
typedef struct BitmapPass
{
	const BloomParams *p;
	uint64		first;
	uint64		end;
	DelayedBits bits;
	uint64		seen;
} BitmapPass;

#define BLOOM_MAX_BITMAP_PASSES	4

static void
collect_bitmap_bits(uint64 h2, void *arg)
{
	BitmapPass *bp = arg;

	if ((++bp->seen & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
	for (uint32 i = 0; i < bp->p->nhashes; i++)
	{
		uint64		b = bloom_global_bit(bp->p, h2, i);

		if (b >= bp->first && b < bp->end)
			delayed_bits_set(&bp->bits, (uint32) (b - bp->first));
	}
}

/*
 * Set the feed's bits range by range: for each range of pages_per_pass
 * bit pages, run the feed ORing its positions in the range into a bitmap,
 * then write each page that got a bit, once.
 */
static int64
bloom_apply_bitmaps(Relation rel, const BloomParams *p, HashFeed *feed,
					uint32 pages_per_pass)
{
	uint32		cap = Min(pages_per_pass, p->npages);
	BitmapPass	bp;
	uint64	   *words;
	int64		nnew = 0;

	bp.p = p;
	words = palloc((Size) cap * BLOOM_PAGE_WORDS * sizeof(uint64));
	for (uint32 first = 0; first < p->npages; first += cap)
	{
		uint32		n = Min(cap, p->npages - first);

		memset(words, 0, (Size) n * BLOOM_PAGE_WORDS * sizeof(uint64));
		delayed_bits_init(&bp.bits, words);
		bp.first = (uint64) first * BLOOM_PAGE_BITS;
		bp.end = (uint64) (first + n) * BLOOM_PAGE_BITS;
		bp.seen = 0;
		feed->run(feed, collect_bitmap_bits, &bp);
		delayed_bits_drain(&bp.bits);
		nnew += bloom_write_bitmap(rel, first, n, words);
	}
	pfree(words);
	return nnew;
}

/*
 * Set the k bits of every hash of the feed (plain/elevator layout), each
 * touched page written once (the elevator).  Either the feed is read once
 * and its bit positions are sorted in memory, or, when they do not fit in
 * bloom_work_mem(), distributed over one temporary file per range of
 * pages and each range sorted in memory in turn, so the work is
 * O(k * hashes) reads and writes of positions whatever the filter's size;
 * or, for a filter of at most BLOOM_MAX_BITMAP_PASSES times memory, the
 * feed is read once per memory-sized range of pages into a bitmap
 * (bloom_apply_bitmaps).  Returns the number of bits that were newly set.
 */
static int64
bloom_apply_global(Relation rel, const BloomParams *p, HashFeed *feed)
{
	BitCollector bc;
	Size		mem = bloom_work_mem();
	Size		page_bytes = BLOOM_PAGE_WORDS * sizeof(uint64);
	Size		filter_bytes = (Size) p->npages * page_bytes;
	double		positions = (double) feed->max_hashes * p->nhashes;
	Size		passes = (filter_bytes + mem - 1) / mem;

	/*
	 * Bitmaps instead of sorted positions: when the filter's bitmap fits
	 * in memory and the positions are many (sorting 8-byte positions cost
	 * more than scanning the bitmap's words), or when the positions would
	 * spill and a few runs of the feed cover the filter (reading the feed
	 * again is cheaper than writing and reading every position, which a
	 * round of many keys into a small filter would otherwise spill).
	 */
	if (mem >= page_bytes &&
		((passes == 1 && positions * 64 >= (double) filter_bytes) ||
		 (positions * sizeof(uint64) > (double) mem &&
		  passes <= BLOOM_MAX_BITMAP_PASSES)))
		return bloom_apply_bitmaps(rel, p, feed, (uint32) (mem / page_bytes));

	collector_init(&bc, rel, p, feed->max_hashes);
	feed->run(feed, collect_hash_bits, &bc);
	return collector_apply(&bc);
}

/* The k positions of a round's record in its page (localized layout). */
static void
collect_local_record(uint64 pos, const SSPendingHeader *hdr,
					 const char *payload, void *arg)
{
	BitCollector *bc = arg;
	const BloomParams *p = bc->p;
	SSHash		h;
	uint64		h2 = bloom_record_h2(bc->rel, hdr, payload, &h);
	uint64		first = (uint64) bloom_subbuf_of(p, h) * BLOOM_PAGE_BITS;

	bc->rows += hdr->rows;
	if ((++bc->seen & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
	for (uint32 i = 0; i < p->nhashes; i++)
		collector_add(bc, first + bloom_local_bit(p, h2, i));
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

	hash_feed_init(&feed, buffer_feed_run, rel, p,
				   (uint64) p->nsubbufs * p->subbuf_cap + nextra);
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
	bc->stats->items += hdr->rows;
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
 * unbuffered elevator) sets the bits of the whole round sorted by page,
 * each touched page written once.
 */
bool
bloom_consolidate(SSConsolidation *c)
{
	const BloomParams *p = &bloom_get_state(c->rel)->p;
	BloomStats *stats = (BloomStats *) c->stats;

	if (p->nsubbufs == 0 && p->mode != BLOOM_MODE_LOCALIZED)
	{
		HashFeed	feed;

		hash_feed_init(&feed, log_feed_run, c->rel, p, c->nrecords);
		feed.cons = c;
		stats->bits_set += bloom_apply_global(c->rel, p, &feed);
		stats->items += feed.count;
	}
	else if (p->mode == BLOOM_MODE_ELEVATOR &&
			 c->nrecords >= (uint64) p->nsubbufs * p->subbuf_cap / 2)
	{
		/*
		 * A round of at least half the buffer's capacity (a large
		 * transaction) would fill sub-buffers many times over, each fill an
		 * elevator pass over every bit page: set it with the buffered
		 * entries in one pass instead, as an elevator flush does.
		 */
		HashFeed	feed;

		hash_feed_init(&feed, buffer_and_log_feed_run, c->rel, p,
					   (uint64) p->nsubbufs * p->subbuf_cap + c->nrecords);
		feed.cons = c;
		stats->bits_set += bloom_apply_global(c->rel, p, &feed);
		elevator_clear(c->rel, p);
		stats->items += feed.count;
		stats->flushes++;
	}
	else if (p->mode == BLOOM_MODE_LOCALIZED &&
			 c->nrecords >= (uint64) p->npages * p->subbuf_cap / 2)
	{
		/*
		 * Likewise a round of at least half the sub-buffers' capacity: in
		 * chunks of consolidation memory it would visit every bit page
		 * once per chunk.  Its bits are set in one pass over the pages;
		 * the sub-buffers keep their entries (a lookup reads both).
		 */
		BitCollector col;

		collector_init(&col, c->rel, p, c->nrecords);
		ss_cons_foreach(c, collect_local_record, &col);
		stats->items += (int64) col.rows;
		stats->bits_set += collector_apply(&col);
		if (p->nsubbufs > 0)
			stats->flushes++;	/* it did a flush's work */
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

/* ss_subbufs_flush's apply: bit page pg's sub-buffer, forced. */
static uint32
bloom_flush_subbuf(Relation rel, uint32 pg, void *arg)
{
	BloomConsolidation *bc = (BloomConsolidation *) arg;

	return bloom_apply_local_group(rel, bc->p, pg, NULL, 0, true, bc->stats);
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
	BloomConsolidation bc = {rel, p, stats};
	int64		applied;

	if (p->nsubbufs == 0)
		return 0;

	if (p->mode == BLOOM_MODE_ELEVATOR)
	{
		applied = elevator_flush(rel, p, NULL, 0, stats);
		stats->flushes += applied > 0;
		return applied;
	}
	return ss_subbufs_flush(rel, bloom_buffer_blkno(p, 0), p->npages,
							SS_PAGE_BLOOM_BUFFER, p->subbufs_per_page,
							bloom_flush_subbuf, &bc, &stats->flushes);
}
