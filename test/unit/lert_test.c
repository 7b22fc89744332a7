/*-------------------------------------------------------------------------
 *
 * lert_test.c
 *	  Standalone test of the LERT rules (src/lert/lert_core.c) against an
 *	  offline exact count.
 *
 * A LERT is simulated with the levels in memory (level 0 a hash table of
 * at most its capacity of keys, each on-disk level a sorted array) and
 * the core's rules deciding everything else: when level 0 flushes, which
 * levels a flush merges, when a key is reported, where a merge puts its
 * count.  Every variant runs over the paper's five streams (a Firehose-like
 * active set with power-law lifetimes, and the four robustness streams of
 * its section 1.1), and the test checks, against the stream itself:
 *	- precision and recall are 1 (after a final full merge): a key is
 *	  reported iff its count reaches T, and exactly once;
 *	- a report's position is at or after the key's T-th occurrence, its
 *	  count is the key's exact count at that position, its first position
 *	  the key's first occurrence;
 *	- every report is within its variant's bound: count_stretch count <=
 *	  T + sum(tau), immediate at the T-th occurrence, time_stretch
 *	  (I_R - I_0) / (I_T - I_0) <= 1 + 1 / (2^a - 1).
 * It prints the stretch distribution of each run (informational) and
 * checks the invertible fingerprint of keys of at most 8 bytes.
 *
 * Deterministic (fixed seeds); exits 1 at the first failure.  Built and
 * run by `make -C test/unit`; `lert_test N` sets the observations per
 * stream (default 1,000,000).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>

#include "lert_core.h"
#include "lert_page.h"
#include "unit_test.h"

/*
 * port.h maps these (and qsort) to libpgport's pg_* versions; this program
 * does not link libpgport, so use the C library's.
 */
#undef printf
#undef fprintf
#undef snprintf
#undef qsort

static int	failures = 0;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fprintf(stderr, "\n"); \
			exit(1); \
		} \
	} while (0)

/* ---- deterministic random numbers (splitmix64) ---- */

static uint64 rng_state;

static uint64
rng_next(void)
{
	return splitmix64(&rng_state);
}

static uint64
rng_below(uint64 n)
{
	return rng_next() % n;
}

static double
rng_unit(void)
{
	return ((rng_next() >> 11) + 1) * (1.0 / 9007199254740993.0);
}

static void *
xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	CHECK(p != NULL, "out of memory (%zu bytes)", n);
	return p;
}

/* ---- streams: arrays of key ids ---- */

typedef struct Stream
{
	const char *name;
	uint32	   *ids;
	int64		n;
	uint32		nkeys;
} Stream;

static void
shuffle(uint32 *a, int64 n)
{
	for (int64 i = n - 1; i > 0; i--)
	{
		int64		j = (int64) rng_below((uint64) i + 1);
		uint32		t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

/* each key id `count` times, then shuffled */
static void
stream_add(Stream *s, uint32 id, int64 count, int64 cap)
{
	for (int64 c = 0; c < count && s->n < cap; c++)
		s->ids[s->n++] = id;
}

/*
 * Firehose's active-set generator: `active` slots each hold a key and its
 * remaining lifetime count (power law, exponent -1.5, capped at 65,536);
 * each observation picks a slot at random, so a key's arrivals spread over
 * its lifetime; a key that is done is replaced by a new one.
 */
static void
gen_firehose(Stream *s, int64 n, uint32 active)
{
	uint32	   *slot_id = xmalloc(sizeof(uint32) * active);
	int64	   *slot_left = xmalloc(sizeof(int64) * active);

	s->name = "firehose";
	s->n = 0;
	s->nkeys = 0;
	for (uint32 i = 0; i < active; i++)
	{
		double		u = rng_unit();

		slot_id[i] = s->nkeys++;
		slot_left[i] = (int64) Min(floor(1.0 / (u * u)), 65536.0);
	}
	while (s->n < n)
	{
		uint32		i = (uint32) rng_below(active);

		s->ids[s->n++] = slot_id[i];
		if (--slot_left[i] == 0)
		{
			double		u = rng_unit();

			slot_id[i] = s->nkeys++;
			slot_left[i] = (int64) Min(floor(1.0 / (u * u)), 65536.0);
		}
	}
	free(slot_id);
	free(slot_left);
}

/* M keys with counts 24-50 among keys seen once, shuffled */
static void
gen_heavy_in_noise(Stream *s, int64 n, uint32 m)
{
	s->name = "24-50 in noise";
	s->n = 0;
	s->nkeys = 0;
	for (uint32 i = 0; i < m; i++)
		stream_add(s, s->nkeys++, 24 + (int64) rng_below(27), n);
	while (s->n < n)
		stream_add(s, s->nkeys++, 1, n);
	shuffle(s->ids, s->n);
}

/* M keys 24 times, every other key 23 times, shuffled */
static void
gen_24_vs_23(Stream *s, int64 n, uint32 m)
{
	s->name = "24 vs 23";
	s->n = 0;
	s->nkeys = 0;
	for (uint32 i = 0; i < m; i++)
		stream_add(s, s->nkeys++, 24, n);
	while (s->n < n)
		stream_add(s, s->nkeys++, 23, n);
	shuffle(s->ids, s->n);
}

/* M keys round robin, each more than 24 times */
static void
gen_round_robin(Stream *s, int64 n, uint32 m)
{
	s->name = "round robin";
	s->n = 0;
	s->nkeys = m;
	while (s->n < n)
		s->ids[s->n] = (uint32) (s->n % m), s->n++;
}

/* every key a count uniform in 1-25, shuffled */
static void
gen_uniform_1_25(Stream *s, int64 n)
{
	s->name = "uniform 1-25";
	s->n = 0;
	s->nkeys = 0;
	while (s->n < n)
		stream_add(s, s->nkeys++, 1 + (int64) rng_below(25), n);
	shuffle(s->ids, s->n);
}

/* ---- the simulated LERT ---- */

typedef struct SimEntry
{
	uint64		key;
	LertCount	c;
	bool		fresh;			/* in Sim.rest: moved into level 0's table */
} SimEntry;

typedef struct SimLevel
{
	SimEntry   *e;
	int64		n;
} SimLevel;

typedef struct Sim
{
	LertGeom	g;

	/*
	 * Level 0 is the keys observed since the last flush, in an open
	 * addressing table (power-of-two size, key 0 never used), and what the
	 * last flush put back, sorted by key.  A put-back entry moves into the
	 * table when its key is observed.  A flush then sorts only the table
	 * (up to C0 keys) and merges it with the put-back entries and the
	 * levels, instead of sorting all of level 0, which holds every key
	 * below the threshold and grows with the stream.
	 */
	SimEntry   *l0;
	uint64		l0_size;
	int64		l0_fresh;		/* keys in the table */
	SimEntry   *rest;			/* put back by the last flush, by key */
	int64		nrest;
	int64		l0_n;			/* keys at level 0: table and unmoved rest */
	int64		l0_limit;		/* flush when l0_n reaches it */
	int64		max_l0;
	int64		max_fresh;
	SimLevel	level[LERT_MAX_LEVELS + 1];
	uint64		flushes;
	int64		last_flush;
	/* reports, by key id */
	LertReport *rep;
	bool	   *reported;
	int64		nreports;
	uint64		seed;
	uint32		nkeys;
} Sim;

static inline uint64
id_key(const Sim *sim, uint32 id)
{
	return lert_fixed_fingerprint((uint64) id + 1, sim->seed);
}

static inline uint32
key_id(const Sim *sim, uint64 key)
{
	return (uint32) (lert_fixed_key(key, sim->seed) - 1);
}

static SimEntry *
l0_find(Sim *sim, uint64 key, bool create)
{
	uint64		mask = sim->l0_size - 1;
	uint64		i = key & mask;

	while (sim->l0[i].key != 0)
	{
		if (sim->l0[i].key == key)
			return &sim->l0[i];
		i = (i + 1) & mask;
	}
	if (!create)
		return NULL;
	sim->l0[i].key = key;
	sim->l0[i].c.count = 0;
	sim->l0[i].c.first_pos = -1;
	sim->l0[i].c.disk_sum = 0;
	sim->l0[i].c.flags = 0;
	sim->l0[i].fresh = false;
	sim->l0_fresh++;
	sim->max_fresh = Max(sim->max_fresh, sim->l0_fresh);
	return &sim->l0[i];
}

/* The put-back entry of key not yet moved into the table, or NULL. */
static SimEntry *
rest_find(Sim *sim, uint64 key)
{
	int64		lo = 0,
				hi = sim->nrest;

	while (lo < hi)
	{
		int64		mid = (lo + hi) / 2;

		if (sim->rest[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < sim->nrest && sim->rest[lo].key == key && !sim->rest[lo].fresh)
		return &sim->rest[lo];
	return NULL;
}

/*
 * An empty table for up to capacity keys; the flush emptied the old one
 * slot by slot, so it is reused when large enough.
 */
static void
l0_reset(Sim *sim, int64 capacity)
{
	uint64		size = 16;

	while (size < (uint64) capacity * 2)
		size <<= 1;
	if (size > sim->l0_size)
	{
		free(sim->l0);
		sim->l0 = xmalloc(sizeof(SimEntry) * size);
		memset(sim->l0, 0, sizeof(SimEntry) * size);
		sim->l0_size = size;
	}
	sim->l0_fresh = 0;
}

/*
 * Count stretch and immediate keep a level-0 count that a flush puts back
 * in the runs (the access method's kept counts, lert_page.h), so its
 * level 0 holds only keys observed since the flush and fills when C0 of
 * them are there.  The simulation keeps those counts in its level 0 and
 * flushes when the server would.
 */
static inline bool
sim_runs_keep(const Sim *sim)
{
	return sim->g.variant == LERT_COUNT_STRETCH ||
		sim->g.variant == LERT_IMMEDIATE;
}

typedef struct QueryArg
{
	Sim		   *sim;
	uint64		key;
	uint32		from;			/* first level asked */
} QueryArg;

static void
query_levels(void *arg, int64 *count, int64 *first_pos, bool *reported)
{
	QueryArg   *q = arg;

	*count = 0;
	*first_pos = -1;
	*reported = false;
	for (uint32 j = q->from; j <= q->sim->g.nlevels; j++)
	{
		SimLevel   *lv = &q->sim->level[j];
		int64		lo = 0,
					hi = lv->n;

		while (lo < hi)
		{
			int64		mid = (lo + hi) / 2;

			if (lv->e[mid].key < q->key)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < lv->n && lv->e[lo].key == q->key)
		{
			*count += lv->e[lo].c.count;
			*first_pos = lert_fold_first_pos(*first_pos, *reported,
											 lv->e[lo].c.first_pos,
											 (lv->e[lo].c.flags & LERT_REPORTED) != 0);
			*reported |= (lv->e[lo].c.flags & LERT_REPORTED) != 0;
		}
	}
}

static void
record_report(Sim *sim, uint64 key, const LertReport *r)
{
	uint32		id = key_id(sim, key);

	CHECK(id < sim->nkeys, "report of a key that was never inserted");
	CHECK(!sim->reported[id], "key %u reported twice", id);
	sim->reported[id] = true;
	sim->rep[id] = *r;
	sim->nreports++;
}

/* An entry flagged reported holds the count at the report (LertCount). */
static void
check_report_count(Sim *sim, uint64 key, const LertCount *c)
{
	uint32		id = key_id(sim, key);

	if (!(c->flags & LERT_REPORTED))
		return;
	CHECK(id < sim->nkeys && sim->reported[id] &&
		  c->first_pos == sim->rep[id].count,
		  "an entry of key %u flagged reported holds %lld, not its count at the report",
		  id, (long long) c->first_pos);
}

static int
cmp_entry(const void *a, const void *b)
{
	const SimEntry *x = a,
			   *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

/* out = a and b merged by key (both sorted); returns its length */
static int64
merge_by_key(const SimEntry *a, int64 na, const SimEntry *b, int64 nb, SimEntry *out)
{
	int64		i = 0,
				j = 0,
				n = 0;

	while (i < na && j < nb)
		out[n++] = b[j].key < a[i].key ? b[j++] : a[i++];
	while (i < na)
		out[n++] = a[i++];
	while (j < nb)
		out[n++] = b[j++];
	return n;
}

/* A flush: shuffle-merge levels 0..depth at position pos. */
static void
sim_flush(Sim *sim, int64 pos, bool final)
{
	LertGeom   *g = &sim->g;
	uint32		depth;
	int64		total = sim->l0_n;
	SimEntry   *all;
	SimEntry   *merged;
	int64		n = 0,
				nfresh = 0;
	bool		deeper = false;
	SimLevel	out[LERT_MAX_LEVELS + 1];
	SimEntry   *rests;
	int64		nrests = 0;

	sim->flushes++;
	depth = final ? g->nlevels : lert_merge_depth(g, sim->flushes);
	for (uint32 j = 1; j <= depth; j++)
		total += sim->level[j].n;
	for (uint32 j = depth + 1; j <= g->nlevels; j++)
		deeper |= sim->level[j].n > 0;
	all = xmalloc(sizeof(SimEntry) * Max(total, 1));
	merged = xmalloc(sizeof(SimEntry) * Max(total, 1));
	/* the table's keys, sorted; the slots emptied for the next interval */
	for (uint64 i = 0; i < sim->l0_size; i++)
		if (sim->l0[i].key != 0)
		{
			merged[nfresh++] = sim->l0[i];
			sim->l0[i].key = 0;
		}
	qsort(merged, nfresh, sizeof(SimEntry), cmp_entry);
	/* with the put-back entries not moved into the table */
	for (int64 i = 0, f = 0; i < sim->nrest || f < nfresh;)
	{
		if (i < sim->nrest && sim->rest[i].fresh)
			i++;
		else if (f < nfresh && (i == sim->nrest || merged[f].key < sim->rest[i].key))
			all[n++] = merged[f++];
		else
			all[n++] = sim->rest[i++];
	}
	CHECK(n == sim->l0_n, "level 0 holds %lld keys, counted %lld", (long long) n, (long long) sim->l0_n);
	for (uint32 j = 1; j <= depth; j++)
	{
		SimEntry   *swap = all;

		n = merge_by_key(all, n, sim->level[j].e, sim->level[j].n, merged);
		all = merged;
		merged = swap;
	}
	free(merged);

	for (uint32 j = 1; j <= depth; j++)
	{
		out[j].e = xmalloc(sizeof(SimEntry) * Max(n, 1));
		out[j].n = 0;
	}
	rests = xmalloc(sizeof(SimEntry) * Max(n, 1));
	for (int64 i = 0; i < n;)
	{
		int64		k = i;
		LertCount	m = {0, -1, 0, 0};
		LertReport	r;
		QueryArg	q = {sim, all[i].key, depth + 1};
		int64		counts[LERT_MAX_LEVELS + 1];

		for (; k < n && all[k].key == all[i].key; k++)
		{
			m.count += all[k].c.count;
			m.first_pos = lert_fold_first_pos(m.first_pos,
											  (m.flags & LERT_REPORTED) != 0,
											  all[k].c.first_pos,
											  (all[k].c.flags & LERT_REPORTED) != 0);
			m.flags |= all[k].c.flags & LERT_REPORTED;
		}
		if (lert_merge_report(g, &m, pos, deeper, query_levels, &q, &r))
			record_report(sim, all[i].key, &r);
		check_report_count(sim, all[i].key, &m);
		lert_place(g, depth, pos, &m, counts);
		for (uint32 j = 0; j <= depth; j++)
		{
			SimEntry	e;

			if (counts[j] == 0)
				continue;
			e.key = all[i].key;
			e.fresh = false;
			e.c.count = counts[j];
			e.c.first_pos = m.first_pos;
			e.c.disk_sum = 0;
			e.c.flags = m.flags & LERT_REPORTED;
			CHECK(j > 0 || (counts[j] < g->threshold && !(e.c.flags & LERT_REPORTED)),
				  "a count of %lld placed at level 0", (long long) counts[j]);
			if (j == 0)
				rests[nrests++] = e;
			else
				out[j].e[out[j].n++] = e;
		}
		i = k;
	}
	free(all);
	for (uint32 j = 1; j <= depth; j++)
	{
		free(sim->level[j].e);
		sim->level[j] = out[j];
	}

	/* level 0 keeps what the merge put back (in key order) */
	free(sim->rest);
	sim->rest = rests;
	sim->nrest = nrests;
	sim->l0_n = nrests;
	sim->max_l0 = Max(sim->max_l0, nrests);
	sim->l0_limit = lert_level0_limit(g, nrests);
	l0_reset(sim, sim_runs_keep(sim) ? g->level0_capacity : sim->l0_limit);
	sim->last_flush = pos;
}

static void
sim_observe(Sim *sim, uint64 key, int64 pos)
{
	SimEntry   *e;
	LertReport	r;
	QueryArg	q = {sim, key, 1};

	if (sim->g.variant == LERT_TIME_STRETCH &&
		pos - sim->last_flush >= lert_level0_period(&sim->g))
		sim_flush(sim, pos, false);
	e = l0_find(sim, key, false);
	if (e == NULL &&
		(sim_runs_keep(sim) ? sim->l0_fresh >= sim->g.level0_capacity :
		 sim->l0_n >= sim->l0_limit && rest_find(sim, key) == NULL))
	{
		sim_flush(sim, pos, false);
		e = l0_find(sim, key, false);
	}
	if (e == NULL)
	{
		SimEntry   *r = rest_find(sim, key);

		e = l0_find(sim, key, true);
		if (r != NULL)
		{
			/* a put-back count moves into the table */
			e->c = r->c;
			r->fresh = true;
		}
		else
		{
			sim->l0_n++;
			sim->max_l0 = Max(sim->max_l0, sim->l0_n);
		}
	}
	if (lert_observe(&sim->g, &e->c, 1, pos, query_levels, &q, &r))
		record_report(sim, key, &r);
	check_report_count(sim, key, &e->c);
}

/* ---- offline truth and checks ---- */

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static void
run_one(const Stream *s, const LertGeom *geom, const char *label)
{
	Sim			sim;
	int64	   *count = xmalloc(sizeof(int64) * s->nkeys);
	int64	   *first = xmalloc(sizeof(int64) * s->nkeys);
	int64	   *tth = xmalloc(sizeof(int64) * s->nkeys);
	int64	   *start = xmalloc(sizeof(int64) * ((size_t) s->nkeys + 1));
	int64	   *occ = xmalloc(sizeof(int64) * s->n);
	int64	   *fill = xmalloc(sizeof(int64) * s->nkeys);
	int64		expected = 0;
	double	   *cs,
			   *ts;
	int64		nr = 0;
	double		cs_bound,
				ts_bound;
	int64		T = geom->threshold;

	memset(&sim, 0, sizeof(sim));
	sim.g = *geom;
	sim.seed = UINT64CONST(0x5eed5eed12345678);
	sim.nkeys = s->nkeys;
	sim.rep = xmalloc(sizeof(LertReport) * s->nkeys);
	sim.reported = xmalloc(sizeof(bool) * s->nkeys);
	memset(sim.reported, 0, sizeof(bool) * s->nkeys);
	sim.l0_limit = geom->level0_capacity;
	l0_reset(&sim, sim.l0_limit);

	for (int64 p = 0; p < s->n; p++)
		sim_observe(&sim, id_key(&sim, s->ids[p]), p);
	sim_flush(&sim, s->n, true);

	/* offline: every key's occurrences in order */
	memset(count, 0, sizeof(int64) * s->nkeys);
	for (int64 p = 0; p < s->n; p++)
		count[s->ids[p]]++;
	start[0] = 0;
	for (uint32 k = 0; k < s->nkeys; k++)
		start[k + 1] = start[k] + count[k];
	memcpy(fill, start, sizeof(int64) * s->nkeys);
	for (int64 p = 0; p < s->n; p++)
		occ[fill[s->ids[p]]++] = p;
	for (uint32 k = 0; k < s->nkeys; k++)
	{
		first[k] = count[k] > 0 ? occ[start[k]] : -1;
		tth[k] = count[k] >= T ? occ[start[k] + T - 1] : -1;
		expected += count[k] >= T;
	}

	cs = xmalloc(sizeof(double) * Max(sim.nreports, 1));
	ts = xmalloc(sizeof(double) * Max(sim.nreports, 1));
	cs_bound = (double) lert_count_stretch_bound(geom) / T;
	ts_bound = lert_time_stretch_bound(geom);
	for (uint32 k = 0; k < s->nkeys; k++)
	{
		const LertReport *r = &sim.rep[k];
		int64		lo = start[k],
					hi = start[k + 1];

		CHECK(sim.reported[k] == (count[k] >= T),
			  "%s %s: key %u with count %lld %s", s->name, label, k,
			  (long long) count[k], sim.reported[k] ? "reported" : "not reported");
		if (!sim.reported[k])
			continue;
		CHECK(r->position >= tth[k] && r->position < s->n,
			  "%s %s: key %u reported at %lld, its T-th occurrence is at %lld",
			  s->name, label, k, (long long) r->position, (long long) tth[k]);
		/* the exact count at the report's position */
		while (lo < hi && occ[lo] <= r->position)
			lo++;
		CHECK(r->count == lo - start[k],
			  "%s %s: key %u reported with count %lld, its count there is %lld",
			  s->name, label, k, (long long) r->count, (long long) (lo - start[k]));
		CHECK(r->first_pos == first[k],
			  "%s %s: key %u first position %lld, truly %lld", s->name, label,
			  k, (long long) r->first_pos, (long long) first[k]);
		cs[nr] = (double) r->count / T;
		ts[nr] = tth[k] > first[k] ?
			(double) (r->position - first[k]) / (double) (tth[k] - first[k]) : 1.0;
		CHECK((geom->variant != LERT_COUNT_STRETCH && geom->variant != LERT_IMMEDIATE) ||
			  cs[nr] <= cs_bound + 1e-12,
			  "%s %s: key %u count stretch %.4f above the bound %.4f", s->name,
			  label, k, cs[nr], cs_bound);
		CHECK(ts_bound == 0.0 || ts[nr] <= ts_bound + 1e-12,
			  "%s %s: key %u time stretch %.4f above the bound %.4f (first %lld, T-th %lld, reported %lld)",
			  s->name, label, k, ts[nr], ts_bound, (long long) first[k],
			  (long long) tth[k], (long long) r->position);
		nr++;
	}
	CHECK(nr == expected && sim.nreports == expected, "report count");
	qsort(cs, nr, sizeof(double), cmp_double);
	qsort(ts, nr, sizeof(double), cmp_double);
	{
		double		csum = 0,
					tsum = 0;

		for (int64 i = 0; i < nr; i++)
			csum += cs[i], tsum += ts[i];
		printf("  %-14s %-16s %8lld reports  count stretch max %.3f p99 %.3f mean %.3f"
			   "  time stretch max %.3f p99 %.3f mean %.3f  flushes %llu  level 0 max %lld"
			   " (%lld observed since a flush)\n",
			   s->name, label, (long long) nr,
			   nr ? cs[nr - 1] : 0, nr ? cs[(nr * 99) / 100] : 0, nr ? csum / nr : 0,
			   nr ? ts[nr - 1] : 0, nr ? ts[(nr * 99) / 100] : 0, nr ? tsum / nr : 0,
			   (unsigned long long) sim.flushes, (long long) sim.max_l0,
			   (long long) sim.max_fresh);
		CHECK(!sim_runs_keep(&sim) || sim.max_fresh <= geom->level0_capacity,
			  "%lld keys observed since a flush, level 0 holds %lld",
			  (long long) sim.max_fresh, (long long) geom->level0_capacity);
	}

	for (uint32 j = 1; j <= geom->nlevels; j++)
		free(sim.level[j].e);
	free(sim.l0);
	free(sim.rest);
	free(sim.rep);
	free(sim.reported);
	free(cs);
	free(ts);
	free(count);
	free(first);
	free(tth);
	free(start);
	free(occ);
	free(fill);
}

static void
test_fingerprints(void)
{
	uint64		seed = UINT64CONST(0x0123456789abcdef);

	rng_state = 7;
	for (int i = 0; i < 1000000; i++)
	{
		uint64		k = i < 1000 ? (uint64) i : rng_next();
		uint64		fp = lert_fixed_fingerprint(k, seed);

		CHECK(lert_fixed_key(fp, seed) == k, "fingerprint of %llu is not invertible",
			  (unsigned long long) k);
	}
	CHECK(lert_fixed_fingerprint(0, seed) != lert_fixed_fingerprint(1, seed),
		  "fingerprints collide");
}

static void
test_rules(void)
{
	LertGeom	g;
	int64		tau[LERT_MAX_LEVELS + 1];

	lert_default_taus(4, 3, tau);
	CHECK(tau[1] == 8 && tau[2] == 4 && tau[3] == 2, "default thresholds for g = 4");
	lert_default_taus(2, 3, tau);
	CHECK(tau[1] == 1 && tau[3] == 1, "default thresholds for g = 2");
	lert_default_taus(8, 2, tau);
	CHECK(tau[1] == 16 && tau[2] == 4, "default thresholds for g = 8");

	memset(&g, 0, sizeof(g));
	g.variant = LERT_COUNT_STRETCH;
	g.threshold = 24;
	g.growth = 4;
	g.nlevels = 3;
	g.level0_capacity = 1024;
	lert_default_taus(4, 3, g.tau);
	CHECK(lert_geom_check(&g) == NULL, "default geometry");
	CHECK(lert_count_stretch_bound(&g) == 38, "count-stretch bound");
	CHECK(lert_merge_depth(&g, 1) == 1 && lert_merge_depth(&g, 4) == 2 &&
		  lert_merge_depth(&g, 16) == 3 && lert_merge_depth(&g, 64) == 3 &&
		  lert_merge_depth(&g, 6) == 1, "merge schedule");
	g.nlevels = 4;
	lert_default_taus(4, 4, g.tau);
	CHECK(lert_geom_check(&g) != NULL, "thresholds adding up to more than T accepted");
	g.nlevels = 3;
	g.variant = LERT_TIME_STRETCH;
	g.age_bits = 2;
	CHECK(lert_level0_period(&g) == 256 && lert_merge_period(&g, 3) == 4096,
		  "time-stretch periods");
	CHECK(lert_time_stretch_bound(&g) > 1.333 && lert_time_stretch_bound(&g) < 1.334,
		  "time-stretch bound");
	CHECK(lert_variant_from_name("immediate") == LERT_IMMEDIATE &&
		  lert_variant_from_name("nope") == -1, "variant names");
}

/*
 * Level-0 and run pages: random keys (fingerprint-only and with bytes,
 * some with equal fingerprints; fingerprint-only on fixed-form pages)
 * inserted into a level-0 page until it is full must be found again, in
 * order, keep the counts and flags put on them, pass the check, and come
 * out of a run page written from them in the same order; damaged headers,
 * offsets, flags and orders must fail the checks.
 */
static void
test_pages(void)
{
	char		area[8152] __attribute__((aligned(8)));
	char		run[8152] __attribute__((aligned(8)));
	char		key[64];
	int			inserted = 0;

	rng_state = 99;
	for (int round = 0; round < 300; round++)
	{
		uint16		form = round % 3 == 2 ? LERT_L0_FIXED : LERT_L0_KEYED;
		int			n;
		LertEntry	e;
		const char *ekey;

		lert_l0_init(area, sizeof(area), 42, 7, form);
		CHECK(lert_l0_check(area, sizeof(area)), "empty level-0 page");
		inserted = 0;
		for (;;)
		{
			uint64		fp = rng_below(round % 2 ? 16 : UINT64CONST(1) << 62);
			/* fingerprint-only keys only from the large range: 16 would never fill a page */
			uint32		len = form == LERT_L0_FIXED || round % 6 == 0 ? 0 :
				1 + (uint32) rng_below(sizeof(key) - 1);
			uint32		flags = (rng_below(4) == 0 ? LERT_REPORTED : 0) |
				(rng_below(3) == 0 ? LERT_L0_KEPT_PENDING : 0);
			bool		found;
			int			at;

			if (form == LERT_L0_FIXED)
				fp = rng_below(UINT64CONST(1) << 62);
			for (uint32 i = 0; i < len; i++)
				key[i] = (char) rng_below(4);
			at = lert_l0_search(area, fp, key, len, &found);
			if (found)
			{
				ekey = lert_l0_get(area, at, &e);
				CHECK(e.fp == fp && e.keylen == len &&
					  memcmp(ekey, key, len) == 0, "search found another key");
				CHECK(lert_l0_put(area, at, e.count + 1, e.first_pos, e.disk_sum,
								  e.flags), "put refused");
				continue;
			}
			if (!lert_l0_insert(area, at, fp, key, len))
			{
				CHECK(!lert_l0_has_room(area, len) &&
					  ((LertL0Header *) area)->upper - ((LertL0Header *) area)->lower <
					  lert_l0_entry_space(form, len),
					  "insert refused with room left");
				break;
			}
			ekey = lert_l0_get(area, at, &e);
			CHECK(e.fp == fp && e.count == 0 && e.first_pos == -1 && e.flags == 0 &&
				  e.disk_sum == 0 && e.keylen == len, "new entry not empty");
			/* counts and flags round-trip, the neighbours untouched */
			CHECK(lert_l0_put(area, at, 1, (int64) fp >> 3, 0, flags), "put refused");
			(void) lert_l0_get(area, at, &e);
			CHECK(e.count == 1 && e.first_pos == (int64) fp >> 3 && e.flags == flags,
				  "entry does not keep what was put");
			inserted++;
			CHECK(lert_l0_search(area, fp, key, len, &found) == at && found,
				  "inserted key not found where it was put");
		}
		CHECK(lert_l0_count(area) == inserted, "entry count");
		CHECK(lert_l0_check(area, sizeof(area)), "full level-0 page fails its check");
		if (form == LERT_L0_FIXED)
		{
			CHECK(inserted >= (8152 - 32) / 26, "fixed page took only %d keys", inserted);
			CHECK(!lert_l0_put(area, 0, 1, 0, 5, LERT_DISK_KNOWN),
				  "fixed page took a disk count");
			CHECK(!lert_l0_has_room(area, 1) && !lert_l0_insert(area, 0, 1, "k", 1),
				  "fixed page took key bytes");
		}
		for (int i = 0; i < lert_l0_count(area); i++)
		{
			(void) lert_l0_get(area, i, &e);
			CHECK(e.first_pos == (int64) e.fp >> 3 && e.count >= 1,
				  "entry %d lost its counts", i);
		}

		/* the same entries into a run page, then read back */
		lert_run_page_init(run, 7);
		n = 0;
		for (int i = 0; i < lert_l0_count(area); i++)
		{
			ekey = lert_l0_get(area, i, &e);
			if (!lert_run_page_add(run, sizeof(run), &e, ekey))
				break;
			n++;
		}
		CHECK(n > 0 && lert_run_page_check(run, sizeof(run)), "run page check");
		{
			uint32		off = 0;
			const LertEntry *r;
			int			i = 0;

			while ((r = lert_run_page_next(run, &off)) != NULL)
			{
				ekey = lert_l0_get(area, i++, &e);
				CHECK(r->fp == e.fp && r->count == e.count && r->keylen == e.keylen &&
					  r->flags == e.flags && memcmp(lert_entry_key(r), ekey, e.keylen) == 0,
					  "run page entry %d differs", i - 1);
			}
			CHECK(i == n, "run page lists %d of %d entries", i, n);
		}

		/* damage: swapped order, bad offsets, impossible sizes and forms */
		if (lert_l0_count(area) >= 2)
		{
			uint16	   *off = (uint16 *) (area + MAXALIGN(sizeof(LertL0Header)));
			uint16		t = off[0];

			off[0] = off[1];
			off[1] = t;
			CHECK(!lert_l0_check(area, sizeof(area)), "swapped entries pass the check");
			off[1] = off[0];
			off[0] = t;
			off[0] = 3;
			CHECK(!lert_l0_check(area, sizeof(area)), "misaligned offset passes the check");
			off[0] = t;
			if (form == LERT_L0_FIXED)
			{
				off[0] = (uint16) ((t & ~LERT_L0_OFFSET_FLAGS) | LERT_DISK_KNOWN);
				CHECK(!lert_l0_check(area, sizeof(area)), "disk count flag passes the check");
				off[0] = (uint16) (sizeof(area) - 8);
				CHECK(!lert_l0_check(area, sizeof(area)), "entry past the page passes the check");
				off[0] = t;
			}
			else
			{
				((LertEntry *) (area + off[0]))->keylen = 100000;
				CHECK(!lert_l0_check(area, sizeof(area)), "huge key length passes the check");
			}
			((LertL0Header *) area)->form = 2;
			CHECK(!lert_l0_check(area, sizeof(area)), "unknown form passes the check");
		}
		((LertRunHeader *) run)->nentries++;
		CHECK(!lert_run_page_check(run, sizeof(run)), "wrong run entry count passes");
		((LertRunHeader *) run)->used = sizeof(run);
		CHECK(!lert_run_page_check(run, sizeof(run)), "run size past the page passes");
	}
}

/*
 * --bench N ACTIVE C0: the in-RAM reference of the lert benchmark
 * (test/bench/lert_bench.py): a count_stretch LERT with every level in
 * memory over N observations of the Firehose-like generator with ACTIVE
 * slots; prints one JSON line with its throughput (generation not timed).
 */
static int
bench_inram(int64 n, uint32 active, int64 c0)
{
	Stream		s;
	Sim			sim;
	LertGeom	g;
	struct timespec t0,
				t1;
	double		secs;

	memset(&g, 0, sizeof(g));
	g.variant = LERT_COUNT_STRETCH;
	g.threshold = 24;
	g.growth = 4;
	g.nlevels = 3;
	g.level0_capacity = c0;
	lert_default_taus(4, 3, g.tau);
	rng_state = 1;
	s.ids = xmalloc(sizeof(uint32) * n);
	gen_firehose(&s, n, active);

	memset(&sim, 0, sizeof(sim));
	sim.g = g;
	sim.seed = UINT64CONST(0x5eed5eed12345678);
	sim.nkeys = s.nkeys;
	sim.rep = xmalloc(sizeof(LertReport) * s.nkeys);
	sim.reported = xmalloc(sizeof(bool) * s.nkeys);
	memset(sim.reported, 0, sizeof(bool) * s.nkeys);
	sim.l0_limit = g.level0_capacity;
	l0_reset(&sim, sim.l0_limit);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int64 p = 0; p < s.n; p++)
		sim_observe(&sim, id_key(&sim, s.ids[p]), p);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("{\"n\": %lld, \"active\": %u, \"level0_capacity\": %lld, \"keys\": %u, "
		   "\"reports\": %lld, \"flushes\": %llu, \"seconds\": %.3f, \"obs_per_s\": %.0f}\n",
		   (long long) n, active, (long long) c0, s.nkeys, (long long) sim.nreports,
		   (unsigned long long) sim.flushes, secs, n / secs);
	return failures ? 1 : 0;
}

int
main(int argc, char **argv)
{
	int64		n;
	int64		c0 = argc > 2 ? atoll(argv[2]) : 4096;
	Stream		s;
	LertGeom	geoms[8];
	const char *labels[8];
	int			ngeoms = 0;

	if (argc == 5 && strcmp(argv[1], "--bench") == 0)
		return bench_inram(atoll(argv[2]), (uint32) atol(argv[3]), atoll(argv[4]));
	n = argc > 1 ? atoll(argv[1]) : 1000000;

	test_fingerprints();
	test_rules();
	test_pages();

	for (int v = 0; v < 7; v++)
	{
		LertGeom   *g = &geoms[ngeoms];
		static char names[7][32];

		memset(g, 0, sizeof(*g));
		g->threshold = 24;
		g->growth = 4;
		g->nlevels = 3;
		g->level0_capacity = c0;
		lert_default_taus(4, 3, g->tau);
		if (v == 0)
			g->variant = LERT_COUNT_STRETCH;
		else if (v == 1)
			g->variant = LERT_IMMEDIATE;
		else if (v == 2)
			g->variant = LERT_CASCADE;
		else
		{
			g->variant = LERT_TIME_STRETCH;
			g->age_bits = v - 2;
		}
		CHECK(lert_geom_check(g) == NULL, "geometry %d", v);
		if (g->variant == LERT_TIME_STRETCH)
			snprintf(names[v], sizeof(names[v]), "time_stretch a=%u", g->age_bits);
		else
			snprintf(names[v], sizeof(names[v]), "%s", lert_variant_name(g->variant));
		labels[ngeoms++] = names[v];
	}

	s.ids = xmalloc(sizeof(uint32) * n);
	printf("lert_test: %lld observations per stream, T = 24, level 0 of %lld keys, g = 4, 3 on-disk levels (tau 8, 4, 2)\n",
		   (long long) n, (long long) c0);
	for (int d = 0; d < 5; d++)
	{
		rng_state = 1000 + d;
		switch (d)
		{
			case 0:
				gen_firehose(&s, n, (uint32) Max(c0 * 4, 1));
				break;
			case 1:
				gen_heavy_in_noise(&s, n, (uint32) c0);
				break;
			case 2:
				gen_24_vs_23(&s, n, (uint32) c0);
				break;
			case 3:
				gen_round_robin(&s, n, (uint32) Max(Min(c0, n / 30), 1));
				break;
			case 4:
				gen_uniform_1_25(&s, n);
				break;
		}
		for (int v = 0; v < ngeoms; v++)
			run_one(&s, &geoms[v], labels[v]);
	}
	free(s.ids);
	printf("lert_test: all checks passed\n");
	return failures != 0;
}
