/*-------------------------------------------------------------------------
 *
 * ss_logcache.c
 *	  A backend-local index of the committed change-log records by
 *	  partition, for lookups that cannot consolidate the log.
 *
 * A lookup reads the structure and then every committed record still in
 * the log (ss_log_scan).  On a primary the log is short: lookups
 * consolidate it first.  A standby never consolidates, so while the
 * primary has no readers each standby lookup would read up to
 * streamsketch.change_log_limit of log, many times the structure's one
 * page.  Here the committed records of a log range are
 * copied once, grouped by the partition they change (the structure's
 * SSPartsOfFn, as consolidation groups them), and a lookup visits only
 * the records of its own partitions.
 *
 * An entry is valid for one log range [head_pos, end_pos) of one
 * relfilenode and one partition layout (the caller's stamp).  Inside that
 * range the log is immutable: pages are only recycled after the head
 * moves, and a committed or aborted batch stays so.  A batch still in
 * progress when the entry was built is the exception: such an entry is
 * used once and rebuilt.  When only end_pos grew, the new records are
 * added (the range's records before the old end are skipped).  A primary
 * consolidates a short log before its lookups read it (ss_log_read_begin),
 * so it indexes only what it leaves to the writers.
 *
 * Memory: a few entries, each bounded by cache_budget(); a range with more
 * records is not cached and is scanned as before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "ss_changelog.h"
#include "streamsketch.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#define LOG_CACHE_ENTRIES	4

typedef struct CachedRecord
{
	uint64		pos;
	uint16		type;
	uint32		len;
	uint32		payload_off;	/* in the entry's arena (under 1 GB) */
	uint32		rows;
} CachedRecord;

typedef struct PartRef
{
	uint32		part;			/* PG_UINT32_MAX: every partition */
	uint32		rec;			/* index in records[] */
} PartRef;

typedef struct LogCacheEntry
{
	bool		used;
	bool		built;			/* records and index are valid */
	bool		too_big;		/* the range exceeds the memory bound */
	bool		saw_in_progress;	/* rebuild on the next use */
	Oid			relid;
	RelFileNode node;
	uint64		stamp;
	uint64		head_pos;
	uint64		end_pos;
	uint64		last_use;
	MemoryContext cxt;
	CachedRecord *records;
	int			nrecords;
	int			cap_records;
	char	   *arena;
	Size		arena_used;
	Size		arena_cap;
	PartRef    *refs;			/* sorted by (part, rec) */
	int			nrefs;
	int			cap_refs;
	int			all_lo;			/* first every-partition ref (or nrefs) */
	/* dir[s]: first ref with part >> dir_shift >= s (NULL: none built) */
	int		   *dir;
	uint32		ndir;
	int			dir_shift;
	Size		bytes;
} LogCacheEntry;

static LogCacheEntry cache[LOG_CACHE_ENTRIES];
static uint64 use_clock = 0;

typedef struct BuildState
{
	LogCacheEntry *e;
	uint64		skip_before;	/* records already in the entry */
	SSPartsOfFn parts_of;
	void	   *parts_arg;
	Size		budget;
} BuildState;

/*
 * Room for a log of streamsketch.change_log_limit (about 2.5 bytes of
 * index per byte of log), which is what a primary's readers leave
 * unconsolidated, within reason.
 */
static Size
cache_budget(void)
{
	Size		for_limit = Min((Size) ss_change_log_limit_kb, (Size) 64 * 1024) * 4 * 1024;

	return Max((Size) ss_pending_memory_kb * 1024, for_limit);
}

static void
entry_reset(LogCacheEntry *e)
{
	if (e->cxt != NULL)
		MemoryContextReset(e->cxt);
	e->built = false;
	e->too_big = false;
	e->saw_in_progress = false;
	e->records = NULL;
	e->nrecords = e->cap_records = 0;
	e->arena = NULL;
	e->arena_used = e->arena_cap = 0;
	e->refs = NULL;
	e->nrefs = e->cap_refs = 0;
	e->all_lo = 0;
	e->dir = NULL;
	e->ndir = 0;
	e->dir_shift = 0;
	e->bytes = 0;
}

/* Grow an array in the entry's context; false if the budget is spent. */
static bool
entry_grow(LogCacheEntry *e, void **array, int *cap, Size elem, Size budget)
{
	int			newcap = *cap == 0 ? 1024 : *cap * 2;
	Size		add = (Size) (newcap - *cap) * elem;

	if (e->bytes + add > budget)
		return false;
	*array = *array == NULL ?
		MemoryContextAlloc(e->cxt, (Size) newcap * elem) :
		repalloc(*array, (Size) newcap * elem);
	*cap = newcap;
	e->bytes += add;
	return true;
}

static void
build_record(uint64 pos, const SSPendingHeader *hdr, const char *payload,
			 void *arg)
{
	BuildState *bs = arg;
	LogCacheEntry *e = bs->e;
	uint32		parts[SS_MAX_RECORD_PARTS];
	int			np;
	CachedRecord *rec;

	if (e->too_big || pos < bs->skip_before)
		return;
	np = bs->parts_of(hdr, payload, parts, bs->parts_arg);
	if (np == 0)
		return;
	if (e->nrecords == e->cap_records &&
		!entry_grow(e, (void **) &e->records, &e->cap_records,
					sizeof(CachedRecord), bs->budget))
		goto too_big;
	while (e->nrefs + Max(np, 1) > e->cap_refs)
	{
		if (!entry_grow(e, (void **) &e->refs, &e->cap_refs,
						sizeof(PartRef), bs->budget))
			goto too_big;
	}
	while (e->arena_used + MAXALIGN(hdr->len) > e->arena_cap)
	{
		Size		newcap = Max(e->arena_cap * 2, 64 * 1024);

		if (e->bytes + (newcap - e->arena_cap) > bs->budget)
			goto too_big;
		e->arena = e->arena == NULL ?
			MemoryContextAlloc(e->cxt, newcap) : repalloc(e->arena, newcap);
		e->bytes += newcap - e->arena_cap;
		e->arena_cap = newcap;
	}
	rec = &e->records[e->nrecords];
	rec->pos = pos;
	rec->type = hdr->type;
	rec->len = hdr->len;
	rec->rows = hdr->rows;
	rec->payload_off = (uint32) e->arena_used;
	memcpy(e->arena + e->arena_used, payload, hdr->len);
	e->arena_used += MAXALIGN(hdr->len);
	for (int i = 0; i < Max(np, 1); i++)
	{
		e->refs[e->nrefs].part = np < 0 ? PG_UINT32_MAX : parts[i];
		e->refs[e->nrefs].rec = (uint32) e->nrecords;
		e->nrefs++;
	}
	e->nrecords++;
	return;

too_big:
	e->too_big = true;
}

static int
partref_cmp(const void *a, const void *b)
{
	const PartRef *x = a;
	const PartRef *y = b;

	return ss_page_arrival_cmp(x->part, x->rec, y->part, y->rec);
}

static uint32
partref_part(const void *r)
{
	return ((const PartRef *) r)->part;
}

/*
 * Index the sorted refs by the high bits of their partition: a lookup
 * then searches a slot of a few refs, not all of them (a binary search
 * over 100,000 refs cost each bcms estimate about ten cache misses per
 * row).  About two refs per slot; no directory when the budget has no
 * room for it.
 */
static void
entry_build_dir(LogCacheEntry *e, Size budget)
{
	uint32		max_part = 0;
	uint32		ndir = 256;
	int			shift = 0;
	int			i = 0;

	if (e->dir != NULL)
	{
		pfree(e->dir);
		e->bytes -= (Size) (e->ndir + 1) * sizeof(int);
		e->dir = NULL;
	}
	e->all_lo = e->nrefs;
	while (e->all_lo > 0 && e->refs[e->all_lo - 1].part == PG_UINT32_MAX)
		e->all_lo--;
	if (e->all_lo > 0)
		max_part = e->refs[e->all_lo - 1].part;
	while (ndir < (uint32) e->all_lo / 2 && ndir < (1U << 24))
		ndir <<= 1;
	while ((max_part >> shift) >= ndir)
		shift++;
	if (e->bytes + (Size) (ndir + 1) * sizeof(int) > budget)
		return;
	e->dir = MemoryContextAlloc(e->cxt, (Size) (ndir + 1) * sizeof(int));
	e->bytes += (Size) (ndir + 1) * sizeof(int);
	for (uint32 slot = 0; slot <= ndir; slot++)
	{
		while (i < e->all_lo && (e->refs[i].part >> shift) < slot)
			i++;
		e->dir[slot] = i;
	}
	e->ndir = ndir;
	e->dir_shift = shift;
}

/* SSKeyAtFn of an array of PartRef */
static uint64
ref_part_at(const void *arr, uint32 i)
{
	return ((const PartRef *) arr)[i].part;
}

/* The refs [*lo, *hi) of one partition (PG_UINT32_MAX: every partition). */
static void
refs_of_part(const LogCacheEntry *e, uint32 part, int *lo, int *hi)
{
	int			l = 0;
	int			h = e->all_lo;

	if (part == PG_UINT32_MAX)
	{
		*lo = e->all_lo;
		*hi = e->nrefs;
		return;
	}
	if (e->dir != NULL)
	{
		uint32		slot = part >> e->dir_shift;

		if (slot >= e->ndir)
		{
			*lo = *hi = e->all_lo;
			return;
		}
		l = e->dir[slot];
		h = e->dir[slot + 1];
	}
	*lo = *hi = (int) ss_lower_bound(e->refs, l, h, part, ref_part_at);
	while (*hi < e->all_lo && e->refs[*hi].part == part)
		(*hi)++;
}

/*
 * Add the committed records of snap's range that the entry lacks (all of
 * them for an empty entry).  False if the log moved under the scan.
 */
static bool
entry_fill(LogCacheEntry *e, Relation rel, const SSLogSnapshot *snap,
		   SSPartsOfFn parts_of, void *parts_arg)
{
	BuildState bs;
	bool		in_progress;
	bool		extending = e->built;

	/* not valid until filled: an error midway leaves it to be rebuilt */
	e->built = false;
	if (!extending)
		entry_reset(e);
	bs.e = e;
	bs.skip_before = extending ? e->end_pos : 0;
	bs.parts_of = parts_of;
	bs.parts_arg = parts_arg;
	bs.budget = cache_budget();
	if (!ss_log_scan_ext(rel, snap, build_record, &bs, &in_progress))
	{
		entry_reset(e);
		return false;
	}
	if (!e->too_big)
	{
		(void) ss_sort_batch_by_page(e->refs, e->nrefs, sizeof(PartRef),
									 partref_part, partref_cmp, NULL);
		entry_build_dir(e, bs.budget);
	}
	e->built = true;
	e->saw_in_progress = in_progress;
	e->end_pos = snap->end_pos;
	return true;
}

static LogCacheEntry *
entry_for(Relation rel, uint64 stamp)
{
	LogCacheEntry *victim = &cache[0];

	for (int i = 0; i < LOG_CACHE_ENTRIES; i++)
	{
		LogCacheEntry *e = &cache[i];

		if (e->used && e->relid == RelationGetRelid(rel) &&
			RelFileNodeEquals(e->node, rel->rd_node) && e->stamp == stamp)
			return e;
		if (!e->used || (victim->used && e->last_use < victim->last_use))
			victim = e;
	}
	if (victim->cxt == NULL)
		victim->cxt = AllocSetContextCreate(TopMemoryContext,
											"streamsketch change log cache",
											ALLOCSET_DEFAULT_SIZES);
	entry_reset(victim);
	victim->used = true;
	victim->relid = RelationGetRelid(rel);
	victim->node = rel->rd_node;
	victim->stamp = stamp;
	return victim;
}

/*
 * Call fn, in log order and once each, for the committed records of snap's
 * range that change any of the nparts partitions parts[] (or every
 * partition).  fn may see other records too, as with ss_log_scan, which is
 * what this falls back to.  parts_of must map records to partitions as
 * for consolidation; stamp changes whenever that mapping does (a quotient
 * filter's level 0 grows).  Returns false if the log moved under the
 * scan, like ss_log_scan.
 */
bool
ss_log_scan_parts(Relation rel, const SSLogSnapshot *snap, uint64 stamp,
				  SSPartsOfFn parts_of, void *parts_arg,
				  const uint32 *parts, int nparts,
				  SSLogRecordFn fn, void *arg)
{
	LogCacheEntry *e;
	int			cursor[SS_MAX_RECORD_PARTS + 1];
	int			stop[SS_MAX_RECORD_PARTS + 1];
	int			nlists = 0;
	uint64		last_rec = PG_UINT64_MAX;

	if (snap->head_pos == snap->end_pos)
		return true;
	if (nparts > SS_MAX_RECORD_PARTS)
		return ss_log_scan(rel, snap, fn, arg);

	e = entry_for(rel, stamp);
	e->last_use = ++use_clock;
	if (e->built && e->head_pos == snap->head_pos && e->too_big)
		return ss_log_scan(rel, snap, fn, arg);
	if (!e->built || e->head_pos != snap->head_pos ||
		e->saw_in_progress || snap->end_pos < e->end_pos)
	{
		/* a new range, or a batch may have committed since: build it */
		entry_reset(e);
		e->head_pos = snap->head_pos;
	}
	if (!e->built || e->end_pos != snap->end_pos)
	{
		if (!entry_fill(e, rel, snap, parts_of, parts_arg))
			return false;
		if (e->too_big)
			return ss_log_scan(rel, snap, fn, arg);
	}

	/* merge the partitions' record lists (and the every-partition one) */
	for (int i = 0; i <= nparts; i++)
	{
		int			lo;
		int			hi;

		refs_of_part(e, i < nparts ? parts[i] : PG_UINT32_MAX, &lo, &hi);
		if (hi > lo)
		{
			cursor[nlists] = lo;
			stop[nlists] = hi;
			nlists++;
		}
	}
	for (;;)
	{
		int			best = -1;
		const CachedRecord *rec;
		SSPendingHeader hdr;

		for (int i = 0; i < nlists; i++)
		{
			if (cursor[i] < stop[i] &&
				(best < 0 ||
				 e->refs[cursor[i]].rec < e->refs[cursor[best]].rec))
				best = i;
		}
		if (best < 0)
			break;
		rec = &e->records[e->refs[cursor[best]].rec];
		cursor[best]++;
		if (last_rec == e->refs[cursor[best] - 1].rec)
			continue;			/* in two of the lists: once only */
		last_rec = e->refs[cursor[best] - 1].rec;
		memset(&hdr, 0, sizeof(hdr));
		hdr.relid = RelationGetRelid(rel);
		hdr.type = rec->type;
		hdr.len = rec->len;
		hdr.rows = rec->rows;
		fn(rec->pos, &hdr, e->arena + rec->payload_off, arg);
	}
	return true;
}

/* A relation's entry goes with any invalidation of it (drop, truncate). */
static void
log_cache_relcache_callback(Datum arg, Oid relid)
{
	for (int i = 0; i < LOG_CACHE_ENTRIES; i++)
	{
		if (cache[i].used && (relid == InvalidOid || cache[i].relid == relid))
		{
			entry_reset(&cache[i]);
			cache[i].used = false;
		}
	}
}

void
ss_log_cache_init(void)
{
	CacheRegisterRelcacheCallback(log_cache_relcache_callback, (Datum) 0);
}
