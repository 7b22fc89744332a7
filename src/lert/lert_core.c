/*-------------------------------------------------------------------------
 *
 * lert_core.c
 *	  The rules of the LERT variants (lert_core.h): when a key is reported,
 *	  which levels a flush merges, where a shuffle-merge puts a key's count.
 *
 * The paged access method (lert_*.c) and the standalone unit test
 * (test/unit/lert_test.c, which runs them over in-memory levels against an
 * offline exact count) share these functions, so the bounds the test
 * checks are those of the code that runs in the server.
 *
 * No function here calls the backend.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lert_core.h"

static const char *const variant_names[] = {
	[LERT_COUNT_STRETCH] = "count_stretch",
	[LERT_TIME_STRETCH] = "time_stretch",
	[LERT_IMMEDIATE] = "immediate",
	[LERT_CASCADE] = "cascade",
};

const char *
lert_variant_name(uint32 variant)
{
	if (variant < LERT_COUNT_STRETCH || variant > LERT_CASCADE)
		return "?";
	return variant_names[variant];
}

/* The variant named name, or -1. */
int
lert_variant_from_name(const char *name)
{
	for (int v = LERT_COUNT_STRETCH; v <= LERT_CASCADE; v++)
	{
		if (strcmp(name, variant_names[v]) == 0)
			return v;
	}
	return -1;
}

/*
 * The on-disk thresholds of the reference code: the last level keeps
 * r = floor(g^(2/3)) of a key's count and each level above it r times what
 * the level below keeps (g = 4, three levels: 8, 4, 2).
 */
void
lert_default_taus(uint32 growth, uint32 nlevels, int64 *tau)
{
	int64		r = 1;

	while ((r + 1) * (r + 1) * (r + 1) <= (int64) growth * growth)
		r++;
	tau[0] = 0;
	for (uint32 i = nlevels; i >= 1; i--)
		tau[i] = i == nlevels ? r : tau[i + 1] * r;
}

int64
lert_tau_sum(const LertGeom *g)
{
	int64		sum = 0;

	for (uint32 i = 1; i <= g->nlevels; i++)
		sum += g->tau[i];
	return sum;
}

/* NULL if the geometry is usable, else what is wrong with it. */
const char *
lert_geom_check(const LertGeom *g)
{
	if (g->variant < LERT_COUNT_STRETCH || g->variant > LERT_CASCADE)
		return "unknown variant";
	if (g->threshold < 2 || g->threshold > PG_INT32_MAX)
		return "threshold out of range";
	if (g->growth < 2 || g->growth > LERT_MAX_GROWTH)
		return "growth factor out of range";
	if (g->nlevels < 1 || g->nlevels > LERT_MAX_LEVELS)
		return "number of levels out of range";
	if (g->level0_capacity < 1 || g->level0_capacity > (INT64CONST(1) << 40))
		return "level 0 capacity out of range";
	if (g->variant == LERT_TIME_STRETCH &&
		(g->age_bits < 1 || g->age_bits > LERT_MAX_AGE_BITS ||
		 g->level0_capacity < (INT64CONST(1) << g->age_bits)))
		return "age bits out of range";
	if (g->variant == LERT_COUNT_STRETCH || g->variant == LERT_IMMEDIATE)
	{
		for (uint32 i = 1; i <= g->nlevels; i++)
		{
			if (g->tau[i] < 1 || g->tau[i] >= g->threshold)
				return "level threshold out of range";
		}
		if (lert_tau_sum(g) >= g->threshold)
			return "level thresholds add up to the threshold or more";
	}
	return NULL;
}

/*
 * Observations of level 0 between flushes in the time-stretch variant,
 * C0 / 2^a (a flush also comes earlier when level 0 is full); the other
 * variants flush only when level 0 is full.
 */
int64
lert_level0_period(const LertGeom *g)
{
	if (g->variant != LERT_TIME_STRETCH)
		return g->level0_capacity;
	return Max(g->level0_capacity >> g->age_bits, 1);
}

/*
 * How many keys level 0 may hold before it is flushed again, when a
 * shuffle-merge put back `kept` keys in it (count stretch and immediate:
 * counts between sum(tau) and T, which may stay there; time stretch: keys
 * too young for level 1).  Normally its capacity; if what it keeps passes
 * half of that, level 0 grows so that every flush still admits half a
 * capacity of new keys (a stream of many keys that stop just short of T
 * makes level 0 larger than its capacity rather than break the bound).
 * The access method stores count stretch's and immediate's kept counts in
 * the runs (lert_page.h, LERT_RUN_KEPT) and puts none back, so only time
 * stretch's level 0 grows this way there.
 */
int64
lert_level0_limit(const LertGeom *g, int64 kept)
{
	return Max(g->level0_capacity, 2 * kept);
}

/*
 * At most how many observations pass between two shuffle-merges that take
 * level j (in the time-stretch variant, where flushes are periodic).
 */
int64
lert_merge_period(const LertGeom *g, uint32 level)
{
	int64		p = lert_level0_period(g);

	for (uint32 j = 2; j <= level; j++)
	{
		if (p > PG_INT64_MAX / g->growth)
			return PG_INT64_MAX;
		p *= g->growth;
	}
	return p;
}

/*
 * The deepest level the flush numbered flush_no (1, 2, ...) merges: level
 * j >= 1 takes part in every g^(j-1)-th flush, level 1 in every flush.
 */
uint32
lert_merge_depth(const LertGeom *g, uint64 flush_no)
{
	uint32		k = 1;
	uint64		period = g->growth;

	while (k < g->nlevels && flush_no % period == 0)
	{
		k++;
		if (period > PG_UINT64_MAX / g->growth)
			break;
		period *= g->growth;
	}
	return k;
}

/* The largest count a key can have when it is reported (count stretch). */
int64
lert_count_stretch_bound(const LertGeom *g)
{
	if (g->variant == LERT_IMMEDIATE)
		return g->threshold;
	if (g->variant == LERT_COUNT_STRETCH)
		return g->threshold + lert_tau_sum(g);
	return PG_INT64_MAX;
}

/* The largest time stretch of a report, or 0 if the variant bounds none. */
double
lert_time_stretch_bound(const LertGeom *g)
{
	if (g->variant == LERT_IMMEDIATE)
		return 1.0;
	if (g->variant == LERT_TIME_STRETCH)
		return 1.0 + 1.0 / (double) ((1 << g->age_bits) - 1);
	return 0.0;
}

static inline int64
min_first_pos(int64 a, int64 b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return Min(a, b);
}

/*
 * weight observations of the key at positions pos .. pos + weight - 1
 * reach its level-0 entry slot.  Returns true if they report the key,
 * filling *report (the position where its count reaches T); the slot is
 * then flagged reported, and holds the count at the report in first_pos
 * (LertCount), as it does when a deeper level turns out to flag the key.
 * query is called at most once, when the on-disk levels must be asked (a
 * candidate for a report).
 */
bool
lert_observe(const LertGeom *g, LertCount *slot, int64 weight, int64 pos,
			 LertQueryFn query, void *query_arg, LertReport *report)
{
	int64		before = slot->count;
	int64		disk_count = 0;
	int64		disk_first = -1;
	bool		reported = false;

	slot->count += weight;
	if (slot->flags & LERT_REPORTED)
		return false;
	slot->first_pos = min_first_pos(slot->first_pos, pos);

	if (g->variant == LERT_IMMEDIATE)
	{
		int64		total_before;

		if (!(slot->flags & LERT_DISK_KNOWN) &&
			slot->count >= g->threshold - lert_tau_sum(g))
		{
			query(query_arg, &disk_count, &disk_first, &reported);
			if (reported)
			{
				slot->flags |= LERT_REPORTED;
				slot->first_pos = disk_first;
				return false;
			}
			slot->flags |= LERT_DISK_KNOWN;
			slot->disk_sum = disk_count;
			slot->first_pos = min_first_pos(slot->first_pos, disk_first);
		}
		if (!(slot->flags & LERT_DISK_KNOWN) ||
			slot->count + slot->disk_sum < g->threshold)
			return false;
		total_before = before + slot->disk_sum;
		slot->flags |= LERT_REPORTED;
		report->position = pos + Max(g->threshold - total_before, 1) - 1;
		report->count = Max(total_before + 1, g->threshold);
		report->first_pos = slot->first_pos;
		slot->first_pos = report->count;
		return true;
	}

	/* the level-0 rule: a level-0 count of T is a count of T or more */
	if (slot->count < g->threshold)
		return false;
	query(query_arg, &disk_count, &disk_first, &reported);
	slot->flags |= LERT_REPORTED;
	if (reported)
	{
		slot->first_pos = disk_first;
		return false;
	}
	report->position = pos + Max(g->threshold - before, 1) - 1;
	report->count = Max(before + 1, g->threshold) + disk_count;
	report->first_pos = min_first_pos(slot->first_pos, disk_first);
	slot->first_pos = report->count;
	return true;
}

/*
 * A shuffle-merge at position pos (after the observations before pos)
 * gathered a key's counts over the levels taking part into merged
 * (first_pos by lert_fold_first_pos).  If they reach T and no deeper level
 * flags the key reported, report it.  deeper_levels: some level that holds
 * keys does not take part (query asks those).  merged is flagged reported
 * either way, with the count at the report in first_pos.
 */
bool
lert_merge_report(const LertGeom *g, LertCount *merged, int64 pos,
				  bool deeper_levels, LertQueryFn query, void *query_arg,
				  LertReport *report)
{
	int64		deep_count = 0;
	int64		deep_first = -1;
	bool		reported = false;

	if ((merged->flags & LERT_REPORTED) || merged->count < g->threshold)
		return false;
	if (deeper_levels)
		query(query_arg, &deep_count, &deep_first, &reported);
	merged->flags |= LERT_REPORTED;
	if (reported)
	{
		merged->first_pos = deep_first;
		return false;
	}
	report->position = pos - 1;
	report->count = merged->count + deep_count;
	report->first_pos = min_first_pos(merged->first_pos, deep_first);
	merged->first_pos = report->count;
	return true;
}

/*
 * Where a shuffle-merge of levels 0..depth at position pos puts the
 * merged count of a key: counts[j] for j = 0..depth (a count of 0 means
 * no entry there).  A reported key goes whole to the deepest level (its
 * delay no longer matters).  A count placed at level 0 is below T (the
 * caller reported the key otherwise).
 */
void
lert_place(const LertGeom *g, uint32 depth, int64 pos,
		   const LertCount *merged, int64 *counts)
{
	int64		rest = merged->count;

	for (uint32 j = 0; j <= depth; j++)
		counts[j] = 0;
	if ((merged->flags & LERT_REPORTED) || g->variant == LERT_CASCADE)
	{
		counts[depth] = rest;
		return;
	}
	if (g->variant == LERT_TIME_STRETCH)
	{
		int64		age = pos - merged->first_pos;
		int64		slack = (INT64CONST(1) << g->age_bits) - 1;
		uint32		level = 0;

		for (uint32 j = 1; j <= depth; j++)
		{
			int64		period = lert_merge_period(g, j);

			if (period <= age / slack)
				level = j;
		}
		counts[level] = rest;
		return;
	}
	/* count stretch, immediate: smear from the deepest level up */
	for (uint32 j = depth; j >= 1; j--)
	{
		int64		keep = Min(rest, g->tau[j]);

		counts[j] = keep;
		rest -= keep;
	}
	counts[0] = rest;
}
