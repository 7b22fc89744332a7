/*-------------------------------------------------------------------------
 *
 * ss_partition.c
 *	  Consolidation by partition: the committed records of a round,
 *	  grouped by the partition (page, sub-buffer, level area) they change
 *	  and handed to the structure one partition at a time.
 *
 * The records are collected in log order into a memory budget
 * (ss_consolidation_memory()): one entry per record and partition, which
 * holds a key record's payload; a longer payload is copied once, for all
 * its entries.  When the budget is used,
 * what was collected is sorted by partition (stably, so each partition's
 * records stay in log order) and applied with upto = the current position,
 * and collection goes on; a partition's applied_pos makes a group applied
 * twice (after a stopped round) harmless.
 *
 * The entry arrays (and the sort's second array) outlive the round, up to
 * KEEP_BYTES each: a writer consolidates at the start of most statements,
 * and arrays allocated afresh each round were faulted in from the kernel
 * every time (glibc hands large freed blocks back to the kernel).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/memutils.h"

typedef struct GroupCollector
{
	SSConsolidation *c;
	uint32		nparts;
	SSPartsOfFn parts_of;
	SSApplyGroupFn apply_group;
	void	   *arg;
	SSGroupEntry *entries;		/* by position; part PG_UINT32_MAX: all */
	SSGroupEntry *scratch;		/* as large: the sort's output */
	bool		kept;			/* the arrays are the kept ones */
	int			n;
	int			cap;			/* entries allocated */
	int			max_cap;		/* entries the budget holds */
	List	   *blocks;			/* payload copies, one per record */
	char	   *block;			/* the block being filled */
	Size		block_used;
	Size		block_size;
	Size		payload_bytes;	/* bytes of the blocks */
	Size		budget;
	bool		any_all;
	SSChunkRoomFn chunk_room;	/* or NULL */
	int			room;			/* entries the current chunk may still take */
	bool		stopped;		/* apply_group or chunk_room asked to stop */
} GroupCollector;

/*
 * The arrays kept between rounds, in TopMemoryContext.  A round that finds
 * them lent (a round started within a round) allocates its own.  The
 * statics always point at the live arrays, so a round that fails only
 * leaves them lent; (sub)transaction abort takes them back
 * (ss_cons_at_abort).
 */
#define KEEP_BYTES	(8 * 1024 * 1024)

/* a 100,000-row round of key records fits in 4 MB of work_mem: one chunk */
StaticAssertDecl(sizeof(SSGroupEntry) == 40, "group entries are 40 bytes");

static int	group_entry_cmp(const void *a, const void *b);

static SSGroupEntry *kept_entries = NULL;
static SSGroupEntry *kept_scratch = NULL;
static int	kept_cap = 0;
static int	kept_lent_level = 0;	/* nesting level of the borrower, or 0 */

void
ss_cons_at_abort(int nest_level)
{
	if (kept_lent_level >= nest_level)
		kept_lent_level = 0;
}

/*
 * Arrays for at least cap entries: the kept ones (g->kept) unless a round
 * holds them.
 */
static void
groups_arrays_alloc(GroupCollector *g, int cap)
{
	Size		bytes = sizeof(SSGroupEntry) * (Size) cap;

	g->kept = kept_lent_level == 0;
	if (!g->kept)
	{
		g->entries = MemoryContextAllocHuge(CurrentMemoryContext, bytes);
		g->scratch = MemoryContextAllocHuge(CurrentMemoryContext, bytes);
		g->cap = cap;
		return;
	}
	kept_lent_level = Max(GetCurrentTransactionNestLevel(), 1);
	if (kept_cap < cap)
	{
		if (kept_entries)
		{
			pfree(kept_entries);
			pfree(kept_scratch);
			kept_entries = kept_scratch = NULL;
			kept_cap = 0;
		}
		kept_entries = MemoryContextAllocHuge(TopMemoryContext, bytes);
		kept_scratch = MemoryContextAllocHuge(TopMemoryContext, bytes);
		kept_cap = cap;
	}
	g->entries = kept_entries;
	g->scratch = kept_scratch;
	g->cap = kept_cap;
}

/* Grow the arrays to cap entries, keeping the n collected entries. */
static void
groups_arrays_grow(GroupCollector *g, int cap)
{
	Size		bytes = sizeof(SSGroupEntry) * (Size) cap;

	g->entries = repalloc_huge(g->entries, bytes);
	g->scratch = repalloc_huge(g->scratch, bytes);
	g->cap = cap;
	if (g->kept)
	{
		kept_entries = g->entries;
		kept_scratch = g->scratch;
		kept_cap = cap;
	}
}

/* The arrays are returned (kept if small enough) or freed. */
static void
groups_arrays_release(GroupCollector *g)
{
	if (!g->kept)
	{
		pfree(g->entries);
		pfree(g->scratch);
		return;
	}
	if (sizeof(SSGroupEntry) * (Size) kept_cap > KEEP_BYTES)
	{
		pfree(kept_entries);
		pfree(kept_scratch);
		kept_entries = kept_scratch = NULL;
		kept_cap = 0;
	}
	kept_lent_level = 0;
}

static uint32
group_entry_part(const void *e)
{
	return ((const SSGroupEntry *) e)->part;
}

/*
 * Sort the entries by partition, keeping log order within a partition
 * (ss_sort_batch_by_page: by (partition, position), which no two entries
 * share, when it does not sort into the second array).
 */
static void
groups_sort(GroupCollector *g)
{
	SSGroupEntry *sorted = ss_sort_batch_by_page(g->entries, g->n,
												 sizeof(SSGroupEntry),
												 group_entry_part,
												 group_entry_cmp, g->scratch);

	if (sorted == g->entries)
		return;
	g->scratch = g->entries;
	g->entries = sorted;
	if (g->kept)
	{
		kept_entries = g->entries;
		kept_scratch = g->scratch;
	}
}

static int
group_entry_cmp(const void *a, const void *b)
{
	const SSGroupEntry *x = a;
	const SSGroupEntry *y = b;

	return ss_page_arrival_cmp(x->part, x->pos, y->part, y->pos);
}

#define GROUP_BLOCK_SIZE	(256 * 1024)

static void
groups_reset(GroupCollector *g)
{
	list_free_deep(g->blocks);
	g->blocks = NIL;
	g->block = NULL;
	g->block_used = g->block_size = 0;
	g->n = 0;
	g->payload_bytes = 0;
	g->any_all = false;
}

/*
 * Apply what was collected: every record of the range before upto for the
 * partitions that have any.
 */
/* The room of the next chunk (chunk_room), or stop the round. */
static void
groups_next_chunk(GroupCollector *g)
{
	if (g->chunk_room == NULL || g->stopped)
		return;
	g->room = g->chunk_room(g->c->rel, g->arg);
	if (g->room < 0)
		g->stopped = true;
	else
		g->room = Max(g->room, 1);
}

static void
groups_apply(GroupCollector *g, uint64 upto)
{
	int			start = 0;

	if (g->n == 0 || g->stopped)
		return;
	if (!g->any_all)
	{
		groups_sort(g);
		while (start < g->n)
		{
			int			end = start + 1;

			CHECK_FOR_INTERRUPTS();
			while (end < g->n && g->entries[end].part == g->entries[start].part)
				end++;
			if (!g->apply_group(g->c->rel, g->entries[start].part,
								g->entries + start, end - start, upto, g->arg))
			{
				g->stopped = true;
				break;
			}
			start = end;
		}
	}
	else
	{
		/* records for every partition: each partition's group, in order */
		SSGroupEntry *grp = MemoryContextAllocHuge(CurrentMemoryContext,
												   sizeof(SSGroupEntry) * g->n);

		for (uint32 part = 0; part < g->nparts; part++)
		{
			int			k = 0;

			CHECK_FOR_INTERRUPTS();
			for (int i = 0; i < g->n; i++)
			{
				if (g->entries[i].part == part ||
					g->entries[i].part == PG_UINT32_MAX)
				{
					grp[k] = g->entries[i];
					grp[k].part = part;
					k++;
				}
			}
			if (k > 0 && !g->apply_group(g->c->rel, part, grp, k, upto, g->arg))
			{
				g->stopped = true;
				break;
			}
		}
		pfree(grp);
	}
	groups_reset(g);
	groups_next_chunk(g);
}

static void
group_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
			 void *arg)
{
	GroupCollector *g = arg;
	uint32		parts[SS_MAX_RECORD_PARTS];
	int			np = g->parts_of(hdr, payload, parts, g->arg);
	int			nentries = np < 0 ? 1 : np;
	bool		inline_payload = hdr->len <= SS_GROUP_INLINE;
	Size		need = inline_payload ? 0 : MAXALIGN(hdr->len);
	char	   *copy = NULL;

	if (nentries == 0 || g->stopped)
		return;
	/* collected records are applied before the budget would be exceeded */
	if (g->n > 0 &&
		((Size) (g->n + nentries) * sizeof(SSGroupEntry) +
		 g->payload_bytes + need > g->budget ||
		 (g->chunk_room != NULL && g->n + nentries > g->room)))
		groups_apply(g, pos);
	if (g->stopped)
		return;
	if (g->n + nentries > g->cap)
	{
		int			cap = g->cap;

		while (g->n + nentries > cap)
		{
			if (cap >= g->max_cap)
				elog(ERROR, "consolidation entries exceed their memory budget");
			cap = Min(cap * 2, g->max_cap);
		}
		groups_arrays_grow(g, cap);
	}
	if (!inline_payload)
	{
		if (g->block == NULL || g->block_used + need > g->block_size)
		{
			g->block_size = Max(need, GROUP_BLOCK_SIZE);
			g->block = MemoryContextAllocHuge(CurrentMemoryContext, g->block_size);
			g->block_used = 0;
			g->blocks = lappend(g->blocks, g->block);
			g->payload_bytes += g->block_size;
		}
		copy = g->block + g->block_used;
		memcpy(copy, payload, hdr->len);
		g->block_used += need;
	}
	for (int i = 0; i < nentries; i++)
	{
		SSGroupEntry *e = &g->entries[g->n++];

		e->pos = pos;
		e->part = np < 0 ? PG_UINT32_MAX : parts[i];
		if (np >= 0 && e->part >= g->nparts)
			elog(ERROR, "record partition %u is out of range (%u partitions)",
				 e->part, g->nparts);
		e->type = hdr->type;
		if (inline_payload)
		{
			e->inline_len = (uint16) hdr->len;
			memcpy(e->payload.data, payload, hdr->len);
		}
		else
		{
			e->inline_len = SS_GROUP_SHARED;
			e->payload.ptr = copy;
		}
		g->any_all |= np < 0;
	}
}

bool
ss_cons_by_partition(SSConsolidation *c, uint32 nparts, SSPartsOfFn parts_of,
					 SSApplyGroupFn apply_group, SSChunkRoomFn chunk_room,
					 void *arg)
{
	GroupCollector g;

	g.c = c;
	g.chunk_room = chunk_room;
	g.room = 0;
	g.stopped = false;
	g.nparts = nparts;
	g.parts_of = parts_of;
	g.apply_group = apply_group;
	g.arg = arg;
	g.budget = Min(ss_consolidation_memory(), (Size) INT_MAX);
	/* applied before the budget is exceeded, so n never passes max_cap */
	g.max_cap = (int) Max(g.budget / sizeof(SSGroupEntry), SS_MAX_RECORD_PARTS);
	groups_arrays_alloc(&g, (int) Min((uint64) g.max_cap,
									  Max(c->nrecords, 1024)));
	g.n = 0;
	g.blocks = NIL;
	g.block = NULL;
	g.block_used = g.block_size = 0;
	g.payload_bytes = 0;
	g.any_all = false;
	groups_next_chunk(&g);
	if (!g.stopped)
		ss_cons_foreach(c, group_record, &g);
	groups_apply(&g, c->end_pos);
	list_free_deep(g.blocks);
	groups_arrays_release(&g);
	return !g.stopped;
}

/*
 * Sort a batch of n elements of elemsize bytes (built from the log in
 * order) by page, keeping their order within a page, which is what keeps
 * one key's changes in commit order.  A stable counting sort when the
 * pages are not many more than the elements (the common case: a commit's
 * batch over a structure's hot pages, where qsort was a visible part of
 * an insert), else qsort with cmp, which must order by page and then
 * arrival.  Returns where the sorted elements are: batch, or scratch (room
 * for n elements, or NULL) if the counting sort wrote them there.
 */
void *
ss_sort_batch_by_page(void *batch, int n, Size elemsize,
					  uint32 (*page_of) (const void *elem),
					  int (*cmp) (const void *a, const void *b),
					  void *scratch)
{
	char	   *b = batch;
	uint32		maxpage = 0;
	uint32	   *start;
	char	   *sorted;

	for (int i = 0; i < n; i++)
		maxpage = Max(maxpage, page_of(b + (Size) i * elemsize));
	if (n < 64 || (uint64) maxpage + 1 > Max((uint64) 4 * n, 4096))
	{
		qsort(batch, n, elemsize, cmp);
		return batch;
	}
	start = palloc0(((Size) maxpage + 2) * sizeof(uint32));
	sorted = scratch ? scratch : palloc((Size) n * elemsize);
	for (int i = 0; i < n; i++)
		start[page_of(b + (Size) i * elemsize) + 1]++;
	for (uint32 pg = 1; pg <= maxpage + 1; pg++)
		start[pg] += start[pg - 1];
	for (int i = 0; i < n; i++)
	{
		const char *e = b + (Size) i * elemsize;

		memcpy(sorted + (Size) start[page_of(e)]++ * elemsize, e, elemsize);
	}
	pfree(start);
	if (scratch != NULL)
		return sorted;
	memcpy(batch, sorted, (Size) n * elemsize);
	pfree(sorted);
	return batch;
}
