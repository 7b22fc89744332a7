/*-------------------------------------------------------------------------
 *
 * ss_partition.c
 *	  Consolidation by partition: the committed records of a round,
 *	  grouped by the partition (page, sub-buffer, level area) they change
 *	  and handed to the structure one partition at a time.
 *
 * The records are collected in log order into a memory budget
 * (ss_consolidation_memory()): one 32-byte entry per record and
 * partition, the record's payload copied once.  When the budget is used,
 * what was collected is sorted by partition (stably, so each partition's
 * records stay in log order) and applied with upto = the current position,
 * and collection goes on; a partition's applied_pos makes a group applied
 * twice (after a stopped round) harmless.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

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

static int
group_entry_cmp(const void *a, const void *b)
{
	const SSGroupEntry *x = a;
	const SSGroupEntry *y = b;

	if (x->part != y->part)
		return x->part < y->part ? -1 : 1;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return 0;
}

static uint32
group_entry_part(const void *e)
{
	return ((const SSGroupEntry *) e)->part;
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
		ss_sort_batch_by_page(g->entries, g->n, sizeof(SSGroupEntry),
							  group_entry_part, group_entry_cmp);
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
	Size		need = MAXALIGN(hdr->len);
	char	   *copy;

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
	while (g->n + nentries > g->cap)
	{
		if (g->cap >= g->max_cap)
			elog(ERROR, "consolidation entries exceed their memory budget");
		g->cap = Min(g->cap * 2, g->max_cap);
		g->entries = repalloc_huge(g->entries, sizeof(SSGroupEntry) * g->cap);
	}
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
	for (int i = 0; i < nentries; i++)
	{
		SSGroupEntry *e = &g->entries[g->n++];

		e->pos = pos;
		e->part = np < 0 ? PG_UINT32_MAX : parts[i];
		if (np >= 0 && e->part >= g->nparts)
			elog(ERROR, "record partition %u is out of range (%u partitions)",
				 e->part, g->nparts);
		e->type = hdr->type;
		e->len = hdr->len;
		e->payload = copy;
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
	g.cap = Min(g.max_cap, 65536);
	g.entries = MemoryContextAllocHuge(CurrentMemoryContext,
									   sizeof(SSGroupEntry) * g.cap);
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
	pfree(g.entries);
	return !g.stopped;
}
