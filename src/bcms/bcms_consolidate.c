/*-------------------------------------------------------------------------
 *
 * bcms_consolidate.c
 *	  Writing a bcms: consolidating committed updates and merged cms values
 *	  from the change log, flushing sub-buffers.
 *
 * Every change is WAL-logged with GenericXLog (a no-op for unlogged
 * relations), one record per sketch page touched, together with its
 * buffer page, so a crash never separates a sub-buffer from its page.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ss_xlog.h"
#include "bcms.h"
#include "cms.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_queryutil.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "streamsketch.h"
#include "utils/memutils.h"

/* Add a consolidation round's counts to the metapage contents. */
void
bcms_add_stats(void *metap, const void *statsp)
{
	BcmsMetaData *meta = (BcmsMetaData *) metap;
	const BcmsStats *stats = (const BcmsStats *) statsp;

	meta->items = cms_saturating_add(meta->items, stats->items);
	meta->total_weight = cms_saturating_add(meta->total_weight,
											stats->total_weight);
	meta->flushes = cms_saturating_add(meta->flushes, stats->flushes);
}

static inline Page
bcms_lock_for_write(Relation rel, SSXLogState *state, BlockNumber blkno,
					uint16 page_type, Size data_size, Buffer *bufp)
{
	return ss_lock_page_for_write(rel, state, blkno, page_type, data_size,
								  bufp, NULL);
}

static Size
bcms_sketch_data_size(const BcmsParams *p)
{
	return p->mode == BCMS_MODE_PLAIN ?
		PLAIN_COUNTERS_PER_PAGE * sizeof(int64) :
		cms_page_counters(&p->geom) * sizeof(int64);
}

/*
 * Counters only grow from zero (weights are not negative, additions
 * saturate), so a negative one is damage.  Checked on every page a write
 * is about to change (a thousand compares next to a WAL record), so that
 * damage is not spread further; lookups check the key's own cells.
 */
static void
bcms_check_counters(Relation rel, BlockNumber blkno, const int64 *counters,
					uint32 n)
{
	int64		min = 0;

	for (uint32 i = 0; i < n; i++)
		min = Min(min, counters[i]);
	if (min < 0)
		ss_page_corrupted(rel, blkno, "A counter of the sketch page is negative.");
}

/*
 * A merged cms value in the change log (bcms_merge appended it after
 * checking it against the structure): its size and geometry must still
 * be the structure's, and its total not negative, before its counters are
 * read at the structure's page offsets.
 */
void
bcms_check_merge_record(Relation rel, const BcmsParams *p,
						const SSPendingHeader *hdr, const char *payload)
{
	const CmsData *cms = (const CmsData *) payload;

	if (p->mode == BCMS_MODE_PLAIN ||
		hdr->len < CMS_HEADER_SIZE ||
		hdr->len != cms_value_size(&p->geom) ||
		cms->depth != p->geom.depth ||
		cms->cols_per_page != p->geom.cols_per_page ||
		cms->npages != p->geom.npages ||
		cms->total < 0)
		ss_page_corrupted(rel, InvalidBlockNumber,
						  "A merged count-min sketch record (%u bytes) does not fit the structure.",
						  hdr->len);
}

/* Add a merged cms value's counters of sketch page pg. */
static void
bcms_add_cms_page(Relation rel, int64 *counters, const BcmsParams *p,
				  const CmsData *cms, uint32 pg)
{
	uint32		per_page = cms_page_counters(&p->geom);
	const int64 *src = cms->counters + (Size) pg * per_page;

	for (uint32 i = 0; i < per_page; i++)
	{
		if (src[i] < 0)
			ss_page_corrupted(rel, InvalidBlockNumber,
							  "A merged count-min sketch has a negative counter.");
		counters[i] = cms_saturating_add(counters[i], src[i]);
	}
}

/*
 * Apply the records of one sketch page (and its sub-buffer) in one WAL
 * record: those before the partition's applied_pos were applied already
 * (a round redone after a crash).  Key updates are appended to the
 * sub-buffer if they fit; otherwise, or with a merged cms value among them,
 * or with force, the sub-buffer and the records go to the sketch page and
 * the sub-buffer is emptied.  applied_pos becomes upto.  Returns the
 * number of sub-buffer entries applied to the sketch page.
 */
static uint32
bcms_apply_page(Relation rel, const BcmsParams *p, uint32 sketch_page,
				const SSGroupEntry *entries, int n, uint64 upto, bool force)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		bbuf = InvalidBuffer;
	Buffer		sbuf = InvalidBuffer;
	Page		bpage = NULL;
	Page		spage = NULL;
	uint32	   *count = NULL;
	uint64	   *applied;
	BcmsBufEntry *sub = NULL;
	int64	   *counters;
	uint32		flushed = 0;
	int			first = 0;
	int			nkeys = 0;
	bool		merge = false;

	if (p->subbuf_cap > 0)
	{
		bpage = bcms_lock_for_write(rel, state, bcms_buffer_blkno(p, sketch_page),
									SS_PAGE_BCMS_BUFFER, SS_PAGE_DATA_SIZE, &bbuf);
		count = &bcms_buf_counts(bpage)[sketch_page % p->subbufs_per_page];
		applied = &bcms_buf_applied(bpage, p)[sketch_page % p->subbufs_per_page];
		sub = bcms_buf_entries(bpage, p, sketch_page);
		if (*count > p->subbuf_cap)
			ss_page_corrupted(rel, bcms_buffer_blkno(p, sketch_page),
							  "The sub-buffer of sketch page %u claims %u entries; its capacity is %u.",
							  sketch_page, *count, p->subbuf_cap);
	}
	else
	{
		spage = bcms_lock_for_write(rel, state, bcms_sketch_blkno(p, sketch_page),
									SS_PAGE_BCMS_SKETCH, bcms_sketch_data_size(p),
									&sbuf);
		applied = &SSPageGetOpaque(spage)->applied_pos;
	}

	while (first < n && entries[first].pos < *applied)
		first++;
	for (int i = first; i < n; i++)
	{
		if (entries[i].type == SS_PENDING_MERGE)
			merge = true;
		else if (entries[i].type == SS_PENDING_KEY)
			nkeys++;
	}

	if (p->subbuf_cap > 0 && !merge && !force &&
		*count + nkeys <= p->subbuf_cap)
	{
		for (int i = first; i < n; i++)
		{
			SSPendingKey key;

			if (entries[i].type != SS_PENDING_KEY)
				continue;
			memcpy(&key, ss_group_payload(&entries[i]), sizeof(key));
			sub[*count].h2 = key.hash.h2;
			sub[*count].weight = key.weight;
			(*count)++;
		}
		*applied = Max(*applied, upto);
		ss_xlog_finish(state);
		UnlockReleaseBuffer(bbuf);
		return 0;
	}

	/* lock order: buffer page (held), then sketch page */
	if (spage == NULL)
		spage = bcms_lock_for_write(rel, state, bcms_sketch_blkno(p, sketch_page),
									SS_PAGE_BCMS_SKETCH, bcms_sketch_data_size(p),
									&sbuf);
	counters = (int64 *) SSPageGetData(spage);
	bcms_check_counters(rel, bcms_sketch_blkno(p, sketch_page), counters,
						cms_page_counters(&p->geom));
	if (count != NULL)
	{
		for (uint32 i = 0; i < *count; i++)
		{
			if (sub[i].weight < 0)
				ss_page_corrupted(rel, bcms_buffer_blkno(p, sketch_page),
								  "An entry of the sub-buffer of sketch page %u has a negative weight.",
								  sketch_page);
			cms_page_add(counters, &p->geom, bcms_entry_hash(&sub[i]),
						 sub[i].weight, p->conservative);
		}
		flushed = *count;
		*count = 0;
	}
	for (int i = first; i < n; i++)
	{
		const char *payload = ss_group_payload(&entries[i]);

		if (entries[i].type == SS_PENDING_KEY)
		{
			SSPendingKey key;

			memcpy(&key, payload, sizeof(key));
			cms_page_add(counters, &p->geom, key.hash, key.weight,
						 p->conservative);
		}
		else if (entries[i].type == SS_PENDING_MERGE)
			bcms_add_cms_page(rel, counters, p, (const CmsData *) payload,
							  sketch_page);
	}
	*applied = Max(*applied, upto);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(sbuf);
	if (BufferIsValid(bbuf))
		UnlockReleaseBuffer(bbuf);
	return flushed;
}

/* plain mode: add a page's share of the records to its counters */
static void
bcms_apply_plain_page(Relation rel, const BcmsParams *p, uint32 part,
					  const SSGroupEntry *entries, int n, uint64 upto)
{
	SSXLogState *state = ss_xlog_start(rel);
	Buffer		buf;
	Page		page;
	int64	   *counters;
	uint64	   *applied;

	page = bcms_lock_for_write(rel, state, bcms_sketch_blkno(p, part),
							   SS_PAGE_BCMS_SKETCH, bcms_sketch_data_size(p),
							   &buf);
	counters = (int64 *) SSPageGetData(page);
	bcms_check_counters(rel, bcms_sketch_blkno(p, part), counters,
						PLAIN_COUNTERS_PER_PAGE);
	applied = &SSPageGetOpaque(page)->applied_pos;
	for (int i = 0; i < n; i++)
	{
		SSPendingKey key;

		if (entries[i].pos < *applied || entries[i].type != SS_PENDING_KEY)
			continue;
		memcpy(&key, ss_group_payload(&entries[i]), sizeof(key));
		for (uint32 row = 0; row < p->depth; row++)
		{
			uint64		idx = bcms_plain_index(p, key.hash, row);

			if (idx / PLAIN_COUNTERS_PER_PAGE == part)
				counters[idx % PLAIN_COUNTERS_PER_PAGE] =
					cms_saturating_add(counters[idx % PLAIN_COUNTERS_PER_PAGE],
									   key.weight);
		}
	}
	*applied = Max(*applied, upto);
	ss_xlog_finish(state);
	UnlockReleaseBuffer(buf);
}


/*
 * The partitions a record changes: its sketch page (buffered), the pages
 * of its depth counters (plain), every page for a merged cms value.  Each
 * committed record passes here exactly once per round, so the round's
 * counts are taken here too (when bc->stats is set; lookups index the log
 * by partition with it too).
 */
int
bcms_parts_of(const SSPendingHeader *hdr, const char *payload, uint32 *parts,
			  void *arg)
{
	BcmsConsolidation *bc = arg;
	const BcmsParams *p = bc->p;
	SSPendingKey key;
	int			n = 0;

	if (hdr->type == SS_PENDING_MERGE)
	{
		bcms_check_merge_record(bc->rel, p, hdr, payload);
		if (bc->stats != NULL)
			bc->stats->total_weight = cms_saturating_add(bc->stats->total_weight,
														 ((const CmsData *) payload)->total);
		return -1;
	}
	if (hdr->type != SS_PENDING_KEY || hdr->len != sizeof(key))
		ss_page_corrupted(bc->rel, InvalidBlockNumber,
						  "A bcms change record has type %u and length %u.",
						  hdr->type, hdr->len);
	memcpy(&key, payload, sizeof(key));
	if (bc->stats != NULL)
	{
		bc->stats->items = cms_saturating_add(bc->stats->items, hdr->rows);
		bc->stats->total_weight = cms_saturating_add(bc->stats->total_weight,
													 key.weight);
	}
	if (p->mode != BCMS_MODE_PLAIN)
	{
		parts[0] = cms_page_of(&p->geom, key.hash);
		return 1;
	}
	for (uint32 row = 0; row < p->depth; row++)
		ss_parts_add(parts, &n,
					 (uint32) (bcms_plain_index(p, key.hash, row) / PLAIN_COUNTERS_PER_PAGE));
	return n;
}

static bool
bcms_apply_group(Relation rel, uint32 part, const SSGroupEntry *entries,
				 int n, uint64 upto, void *arg)
{
	BcmsConsolidation *bc = arg;

	if (bc->p->mode == BCMS_MODE_PLAIN)
		bcms_apply_plain_page(rel, bc->p, part, entries, n, upto);
	else if (bcms_apply_page(rel, bc->p, part, entries, n, upto, false) > 0)
		bc->stats->flushes++;
	return true;
}

/*
 * Consolidate committed updates (ss_changelog.c), sorted by sketch page in
 * batches of at most streamsketch.pending_memory bytes, so that each page
 * and sub-buffer is written once per batch.
 */
bool
bcms_consolidate(SSConsolidation *c)
{
	BcmsConsolidation bc;

	StaticAssertStmt(CMS_MAX_DEPTH <= SS_MAX_RECORD_PARTS,
					 "a plain bcms record may change depth pages");
	bc.rel = c->rel;
	bc.p = &bcms_get_state(c->rel)->p;
	bc.stats = (BcmsStats *) c->stats;
	return ss_cons_by_partition(c, bc.p->mode == BCMS_MODE_PLAIN ?
								bc.p->plain_pages : bc.p->geom.npages,
								bcms_parts_of, bcms_apply_group, NULL, &bc);
}

/* ss_subbufs_flush's apply: sketch page pg's sub-buffer, forced. */
static uint32
bcms_flush_subbuf(Relation rel, uint32 pg, void *arg)
{
	return bcms_apply_page(rel, (const BcmsParams *) arg, pg, NULL, 0, 0,
						   true);
}

/*
 * Apply every non-empty sub-buffer to its sketch page (bcms_flush, run by
 * ss_log_flush under the consolidation lock).  Returns the number of
 * entries applied.  One WAL record per sub-buffer (its buffer page and
 * sketch page together).
 */
int64
bcms_flush_all(Relation rel, void *statsp)
{
	const BcmsParams *p = &bcms_get_state(rel)->p;

	if (p->mode != BCMS_MODE_BUFFERED || p->subbuf_cap == 0)
		return 0;
	return ss_subbufs_flush(rel, bcms_buffer_blkno(p, 0), p->geom.npages,
							SS_PAGE_BCMS_BUFFER, p->subbufs_per_page,
							bcms_flush_subbuf, (void *) p,
							&((BcmsStats *) statsp)->flushes);
}
