/*-------------------------------------------------------------------------
 *
 * bfile_consolidate.c
 *	  A consolidation round of a bfile: the committed items of a range of
 *	  the change log drawn into the sample, discards and unrolls, one
 *	  install (docs/bfile.md, "The sample", "Transactions and rounds").
 *
 * The round works on a copy of the metapage and keeps, per bucket, an
 * image of the bucket's newest page (the paper's page buffer): items are
 * appended to it, a full image is written and a new page linked in front
 * of it, and every image still dirty is written before the install.  A
 * bucket's newest page is first cut back to the items the last install
 * made visible, so a round redone after a crash appends the same items
 * once.  Readers only read what an install made visible, so nothing a
 * round writes is seen before its install.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/transam.h"
#include "bfile.h"
#include "bfile_am.h"
#include "miscadmin.h"
#include "ss_pending.h"
#include "ss_xlog.h"
#include "storage/bufmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* The image of a bucket's newest page. */
typedef struct PageImage
{
	bool		loaded;
	bool		dirty;
	BlockNumber blk;
	char	   *area;			/* SS_PAGE_DATA_SIZE bytes */
} PageImage;

typedef struct BfileRound
{
	Relation	rel;
	BfileMeta  *meta;			/* the working copy */
	PageImage	images[BFILE_MAX_BUCKETS];	/* parallel to meta->buckets */
	PageImage	tail_image;
	uint64		seed_level;
	uint64		seed_round;
	uint64		last_pos;
	bool		changed;
} BfileRound;

/* ---- levels ---- */

static inline uint64
splitmix64(uint64 x)
{
	x += UINT64CONST(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64CONST(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64CONST(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

/* A uniform number in (0, 1] from 53 bits of x. */
static inline double
unit_interval(uint64 x)
{
	return (double) ((x >> 11) + 1) * (1.0 / 9007199254740992.0);
}

/* The stream of level draws of a table with this seed. */
uint64
bfile_seed_level(uint32 seed)
{
	return splitmix64((uint64) seed);
}

/*
 * Item seq's level (Table 3, corrected: docs/bfile.md): offset + g, g
 * geometric with P(g >= k) = alpha^(k-1) drawn given g >= min_draw (the
 * insert kept the item with that probability: min_draw - 1 plus a fresh
 * draw, the geometric law being memoryless), plus L at its arrival
 * (decayed).  The insert drew offset = log_{1/alpha} w rounded so that
 * inclusion stays exactly proportional to w (weighted).  Readers that
 * include the change log's rows (bfile_view.c) draw the same.
 */
int32
bfile_item_level(const BfileParams *p, uint64 seed_level, int32 level_now,
				 uint64 seq, const BfileRecordHeader *rh)
{
	double		lvl = (double) rh->level_offset + (double) rh->min_draw +
		floor(log(unit_interval(splitmix64(seed_level + seq))) / log(p->alpha));

	if (BFILE_MODE_DECAYED(p->mode))
		lvl += level_now;
	if (lvl > BFILE_MAX_LEVEL)
		lvl = BFILE_MAX_LEVEL;
	if (lvl < 0)
		lvl = 0;
	return (int32) lvl;
}

/*
 * A change log record of the bfile: its header in *rh, its row's length
 * in *tuplen (0 for a record of dropped items only); damaged records give
 * XX001.  Its row, if it has one, is item *seen of the stream (*seq), and
 * the items the insert dropped after it follow: *seen moves past them
 * all.  False for a record without a row.
 */
bool
bfile_record_read(Relation rel, const BfileParams *p, int64 *seen,
				  const SSPendingHeader *hdr, const char *payload,
				  BfileRecordHeader *rh, uint32 *tuplen, uint64 *seq)
{
	if (hdr->type != SS_PENDING_ITEM || hdr->len < sizeof(*rh))
		ss_page_corrupted(rel, InvalidBlockNumber,
						  "A change log record of the bfile is damaged.");
	memcpy(rh, payload, sizeof(*rh));
	*tuplen = hdr->len - sizeof(*rh);
	if (rh->has_row ?
		(*tuplen < SizeofMinimalTupleHeader || *tuplen > BFILE_MAX_TUPLE ||
		 !(rh->weight > 0) || isinf(rh->weight) || rh->min_draw < 1 ||
		 rh->has_key != (p->time_attnum > 0)) :
		(*tuplen != 0 || rh->skipped == 0) ||
		rh->skipped > (uint64) PG_INT64_MAX - 1 - (uint64) *seen)
		ss_page_corrupted(rel, InvalidBlockNumber,
						  "A change log record of the bfile is damaged.");
	*seq = (uint64) *seen;
	*seen += (int64) rh->skipped + (rh->has_row ? 1 : 0);
	return rh->has_row;
}

/* ---- page images ---- */

static BfilePageHeader *
image_header(PageImage *im)
{
	return (BfilePageHeader *) im->area;
}

static void
image_flush(BfileRound *r, PageImage *im)
{
	if (im->loaded && im->dirty)
	{
		bfile_write_page(r->rel, im->blk, im->area);
		r->meta->pages_written++;
	}
	im->dirty = false;
}

static void
image_drop(PageImage *im)
{
	im->loaded = false;
	im->dirty = false;
}

/* Link a new page in front of bucket b's chain; im becomes its image. */
static void
image_new_page(BfileRound *r, BfileBucket *b, PageImage *im)
{
	BfilePageHeader *ph;
	BfilePageHeader was;
	BfilePageHeader old;
	bool		have_old = false;
	uint64		stamp;
	BlockNumber blk = bfile_page_alloc(r->rel, r->meta, &stamp, &was);
	uint64		x;

	/* the old newest page's header: its image, or the page */
	if (b->head != InvalidBlockNumber)
	{
		if (im->loaded && im->blk == b->head)
			memcpy(&old, im->area, sizeof(old));
		else
		{
			char	   *area = palloc(SS_PAGE_DATA_SIZE);

			bfile_read_page(r->rel, b->head, b->head_stamp, area);
			memcpy(&old, area, sizeof(old));
			pfree(area);
		}
		have_old = true;
	}
	if (im->area == NULL)
		im->area = MemoryContextAlloc(CurrentMemoryContext, SS_PAGE_DATA_SIZE);
	memset(im->area, 0, SS_PAGE_DATA_SIZE);
	ph = image_header(im);

	/* its skip level, from the seed and its stamp; its skip pointers */
	ph->skip_level = 1;
	for (x = splitmix64(r->seed_round ^ stamp);
		 ph->skip_level < BFILE_SKIP_LEVELS && (x & 3) == 0; x >>= 2)
		ph->skip_level++;
	for (int i = 0; i < BFILE_SKIP_LEVELS - 1; i++)
	{
		ph->skip[i].blk = InvalidBlockNumber;
		if (!have_old)
			continue;
		if (old.skip_level >= (uint32) i + 2)
		{
			ph->skip[i].blk = b->head;
			ph->skip[i].stamp = b->head_stamp;
			ph->skip[i].min_key = old.min_key;
		}
		else
			ph->skip[i] = old.skip[i];
	}
	ph->min_key = PG_INT64_MAX;
	ph->max_key = PG_INT64_MIN;
	ph->was_stamp = was.was_stamp;
	ph->was_next = was.was_next;
	ph->was_next_stamp = was.was_next_stamp;
	ph->stamp = stamp;
	ph->prev = b->head;
	ph->prev_stamp = b->head_stamp;
	ph->level = b->level;
	b->head = blk;
	b->head_stamp = stamp;
	b->head_items = 0;
	b->pages++;
	im->blk = blk;
	im->loaded = true;
	im->dirty = true;
}

/*
 * Load bucket b's newest page into im, cut back to the items the last
 * install made visible (a redone round writes them again).
 */
static void
image_load(BfileRound *r, BfileBucket *b, PageImage *im)
{
	BfilePageHeader *ph;
	Size		off = MAXALIGN(sizeof(BfilePageHeader));

	if (b->head == InvalidBlockNumber)
	{
		image_new_page(r, b, im);
		return;
	}
	if (im->area == NULL)
		im->area = MemoryContextAlloc(CurrentMemoryContext, SS_PAGE_DATA_SIZE);
	bfile_read_page(r->rel, b->head, b->head_stamp, im->area);
	bfile_check_page(r->rel, b->head, im->area, b->head_items);
	ph = image_header(im);
	if (ph->nitems != b->head_items)
	{
		/* cut back: the items and key range of the visible ones */
		ph->min_key = PG_INT64_MAX;
		ph->max_key = PG_INT64_MIN;
		for (uint32 i = 0; i < b->head_items; i++)
		{
			BfileItemHeader ih;

			memcpy(&ih, im->area + off, sizeof(ih));
			ph->min_key = Min(ph->min_key, ih.key);
			ph->max_key = Max(ph->max_key, ih.key);
			off += ih.len;
		}
		ph->nitems = b->head_items;
		ph->used = (uint32) (off - MAXALIGN(sizeof(BfilePageHeader)));
		im->dirty = true;
	}
	im->blk = b->head;
	im->loaded = true;
}

/* Append an item to bucket b (image im). */
static void
bucket_append(BfileRound *r, BfileBucket *b, PageImage *im, int32 level,
			  uint64 seq, int64 key, const char *tuple, uint32 tuplen)
{
	Size		need = BFILE_ITEM_BYTES(tuplen);
	BfilePageHeader *ph;
	BfileItemHeader ih;
	char	   *at;

	if (!im->loaded)
		image_load(r, b, im);
	ph = image_header(im);
	if (ph->used + need > BFILE_PAGE_ROOM)
	{
		image_flush(r, im);
		image_new_page(r, b, im);
		ph = image_header(im);
	}
	at = im->area + MAXALIGN(sizeof(BfilePageHeader)) + ph->used;
	memset(at, 0, need);
	ih.len = (uint32) need;
	ih.level = level;
	ih.seq = seq;
	ih.key = key;
	memcpy(at, &ih, sizeof(ih));
	memcpy(at + sizeof(ih), tuple, tuplen);
	ph->used += (uint32) need;
	ph->nitems++;
	ph->min_key = Min(ph->min_key, key);
	ph->max_key = Max(ph->max_key, key);
	if (b->items > 0 && key < b->max_key)
		b->unordered = 1;
	b->max_key = b->items > 0 ? Max(b->max_key, key) : key;
	b->head_items = ph->nitems;
	b->items++;
	b->bytes += need;
	im->dirty = true;
}

/* ---- discards and unrolls ---- */

/*
 * Free bucket b's chain.  A newest page this round allocated is written
 * first, so that the chain on disk is whole when it is reused.
 */
static void
bucket_free(BfileRound *r, BfileBucket *b, PageImage *im)
{
	image_flush(r, im);
	image_drop(im);
	bfile_chain_free(r->meta, b);
	r->meta->size -= b->items;
	b->head = InvalidBlockNumber;
	b->head_stamp = 0;
	b->head_items = 0;
	b->items = 0;
	b->bytes = 0;
	b->pages = 0;
	b->max_key = 0;
	b->unordered = 0;
}

/* Add an item to the bucket of its level (the tail for levels >= T). */
static void
route(BfileRound *r, int32 level, uint64 seq, int64 key, const char *tuple,
	  uint32 tuplen)
{
	BfileMeta  *m = r->meta;

	if (level < m->tail_level)
	{
		uint32		i = (uint32) (level - m->level);

		bucket_append(r, &m->buckets[i], &r->images[i], level, seq, key,
					  tuple, tuplen);
	}
	else
		bucket_append(r, &m->tail, &r->tail_image, level, seq, key, tuple,
					  tuplen);
}

/*
 * Unroll the tail (§4.2.2): its items are read oldest first and go to the
 * buckets of levels T .. L+N-1 (new, empty) or to a new tail; items below
 * L (possible only once L reached T) are dropped; the old chain is freed.
 */
static void
unroll(BfileRound *r)
{
	BfileMeta  *m = r->meta;
	BfileBucket old = m->tail;
	int32		new_tail = m->level + (int32) m->params.nbuckets;
	BlockNumber *blks;
	uint64	   *stamps;
	uint32		n = 0;
	char	   *area = palloc(SS_PAGE_DATA_SIZE);

	CHECK_FOR_INTERRUPTS();
	image_flush(r, &r->tail_image);
	image_drop(&r->tail_image);

	/* the old tail's pages, newest first */
	blks = palloc(sizeof(BlockNumber) * Max(old.pages, 1));
	stamps = palloc(sizeof(uint64) * Max(old.pages, 1));
	{
		BlockNumber blk = old.head;
		uint64		stamp = old.head_stamp;

		while (blk != InvalidBlockNumber)
		{
			BfilePageHeader ph;

			if (n == old.pages)
				ss_page_corrupted(r->rel, blk, "The tail of the sample is longer than it counts.");
			bfile_read_page(r->rel, blk, stamp, area);
			memcpy(&ph, area, sizeof(ph));
			blks[n] = blk;
			stamps[n] = stamp;
			n++;
			blk = ph.prev;
			stamp = ph.prev_stamp;
		}
	}
	if (n != old.pages)
		ss_page_corrupted(r->rel, old.head, "The tail of the sample is shorter than it counts.");

	/* the new buckets and the new tail */
	m->size -= old.items;
	for (int32 lvl = m->tail_level; lvl < new_tail; lvl++)
	{
		uint32		i = (uint32) (lvl - m->level);

		memset(&m->buckets[i], 0, sizeof(BfileBucket));
		m->buckets[i].head = InvalidBlockNumber;
		m->buckets[i].level = lvl;
		image_drop(&r->images[i]);
	}
	memset(&m->tail, 0, sizeof(BfileBucket));
	m->tail.head = InvalidBlockNumber;
	m->tail.level = new_tail;
	m->tail_level = new_tail;
	m->nbuckets_live = m->params.nbuckets;

	/* the old tail's items, oldest first */
	while (n-- > 0)
	{
		BfilePageHeader ph;
		Size		off = MAXALIGN(sizeof(BfilePageHeader));
		uint32		visible;

		CHECK_FOR_INTERRUPTS();
		bfile_read_page(r->rel, blks[n], stamps[n], area);
		memcpy(&ph, area, sizeof(ph));
		visible = n == 0 ? old.head_items : ph.nitems;
		bfile_check_page(r->rel, blks[n], area, visible);
		for (uint32 i = 0; i < visible; i++)
		{
			BfileItemHeader ih;

			memcpy(&ih, area + off, sizeof(ih));
			if (ih.level < old.level)
				ss_page_corrupted(r->rel, blks[n], "An item of the tail has a level below the tail's.");
			if (ih.level >= m->level)
			{
				route(r, ih.level, ih.seq, ih.key, area + off + sizeof(ih),
					  ih.len - sizeof(ih));
				m->size++;
			}
			off += ih.len;
		}
	}
	bfile_chain_free(m, &old);
	m->discards_since_unroll = 0;
	m->unrolls++;
	bfile_test_crash(r->rel, BFILE_CRASH_UNROLLED);
	pfree(blks);
	pfree(stamps);
	pfree(area);
}

/* Discard level L (bucket 0), or unroll when the tail holds it. */
static void
discard(BfileRound *r)
{
	BfileMeta  *m = r->meta;

	if (m->nbuckets_live > 0)
	{
		PageImage	spare;

		bucket_free(r, &m->buckets[0], &r->images[0]);
		spare = r->images[0];	/* dropped; its buffer is kept */
		memmove(&m->buckets[0], &m->buckets[1],
				sizeof(BfileBucket) * (m->nbuckets_live - 1));
		memmove(&r->images[0], &r->images[1],
				sizeof(PageImage) * (m->nbuckets_live - 1));
		r->images[m->nbuckets_live - 1] = spare;
		memset(&m->buckets[m->nbuckets_live - 1], 0, sizeof(BfileBucket));
		m->buckets[m->nbuckets_live - 1].head = InvalidBlockNumber;
		m->nbuckets_live--;
		m->level++;
		m->discards++;
		m->discards_since_unroll++;
		bfile_test_crash(r->rel, BFILE_CRASH_DISCARDED);
		if (m->discards_since_unroll >= m->params.unroll_every ||
			m->nbuckets_live == 0)
			unroll(r);
		return;
	}
	/* the lowest level is in the tail: drop it while unrolling */
	m->level++;
	m->discards++;
	unroll(r);
}

/* ---- the round ---- */

/* SSLogRecordFn: one committed stream item. */
static void
round_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
			 void *arg)
{
	BfileRound *r = (BfileRound *) arg;
	BfileMeta  *m = r->meta;
	BfileRecordHeader rh;
	uint32		tuplen;
	uint64		seq;
	int32		level;
	bool		has_row;

	if (pos < m->stream_pos)
		return;					/* the sample has it (a redone round) */
	has_row = bfile_record_read(r->rel, &m->params, &m->seen, hdr, payload,
								&rh, &tuplen, &seq);
	CHECK_FOR_INTERRUPTS();
	r->last_pos = pos;
	r->changed = true;
	if (!has_row)
		return;
	level = bfile_item_level(&m->params, r->seed_level, m->level, seq, &rh);
	if (level < m->level)
		return;
	route(r, level, seq, rh.has_key ? rh.key : (int64) seq, payload + sizeof(rh),
		  tuplen);
	m->size++;
	m->added++;
	while (bfile_over_bound(&m->params, m->size, bfile_sample_bytes(m)))
		discard(r);
}

/*
 * Make the working copy the table's, in one metapage record; the chains
 * freed by the round are stamped now, under the metapage's lock (as the
 * cbt's extents: docs/cbt.md, "Recycling").
 */
static void
install(BfileRound *r)
{
	SSXLogState *state = ss_xlog_start(r->rel);
	Buffer		metabuf;
	BfileMeta  *live = (BfileMeta *) ss_meta_register(r->rel, SS_KIND_BFILE,
													  state, &metabuf);
	FullTransactionId now = ss_recycle_stamp();

	for (uint32 i = 0; i < r->meta->nfree; i++)
		if (FullTransactionIdEquals(r->meta->free_chains[i].stamp, BFILE_STAMP_PENDING))
			r->meta->free_chains[i].stamp = now;
	memcpy((char *) live + sizeof(SSMetaHeader),
		   (char *) r->meta + sizeof(SSMetaHeader),
		   sizeof(BfileMeta) - sizeof(SSMetaHeader));
	ss_xlog_finish(state);
	UnlockReleaseBuffer(metabuf);
}

void
bfile_round(Relation rel, BfileMeta *meta, SSConsolidation *c)
{
	BfileRound r;

	memset(&r, 0, sizeof(r));
	r.rel = rel;
	r.meta = meta;
	r.seed_level = bfile_seed_level(meta->params.seed);
	r.seed_round = splitmix64(r.seed_level ^ UINT64CONST(0x5851f42d4c957f2d));
	meta->round_runs = 0;
	ss_cons_foreach(c, round_record, &r);
	if (!r.changed)
		return;
	for (uint32 i = 0; i < meta->nbuckets_live; i++)
		image_flush(&r, &r.images[i]);
	image_flush(&r, &r.tail_image);
	meta->stream_pos = r.last_pos + 1;
	meta->data_bytes = meta->tail.bytes;
	for (uint32 i = 0; i < meta->nbuckets_live; i++)
		meta->data_bytes += meta->buckets[i].bytes;
	install(&r);
	bfile_test_crash(rel, BFILE_CRASH_INSTALLED);
}
