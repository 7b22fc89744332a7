/*-------------------------------------------------------------------------
 *
 * qf_test.c
 *	  Standalone randomized test of the quotient filter core (src/qf/qf.c).
 *
 * Every operation is mirrored in a reference multiset (a hash map from
 * fingerprint to count), and after every batch the area must pass
 * qf_area_check, hold exactly the reference's fingerprints and counts
 * (fingerprints are exact, so there is no false-positive slack), iterate
 * them in order, and be byte-identical to the same multiset written by the
 * sequential builder (the layout is canonical).  Then merge, split and the
 * hash helpers are checked, the probability of QF_FULL by load is measured,
 * and throughput is printed (informational).
 *
 * Deterministic (fixed seed); exits 1 at the first failure.  Built and run
 * by `make -C test/unit`.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "qf.h"
#include "unit_test.h"

/*
 * port.h maps these (and qsort) to libpgport's pg_* versions; this program does not
 * link libpgport, so use the C library's.
 */
#undef printf
#undef fprintf
#undef snprintf
#undef qsort

/* Page data area size of the paged filters (SS_PAGE_DATA_SIZE). */
#define PAGE_AREA	8160

/* ---------------------------------------------------------------- rng */

static uint64 rng_state = UINT64CONST(0x0123456789ABCDEF);

static uint64
rng(void)
{
	return splitmix64(&rng_state);
}

static uint64
rng_below(uint64 n)
{
	return (uint64) (((unsigned __int128) rng() * n) >> 64);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64
sat_add(uint64 a, uint64 b)
{
	return a > PG_UINT64_MAX - b ? PG_UINT64_MAX : a + b;
}

/* ------------------------------------------- reference of qf_area_check */

/*
 * The area checks of qf_area_check, slot by slot and bit by bit in the
 * plainest form: qf.c checks words of slots at a time, and must give the
 * same verdict and the same first message as this on every area
 * (test_check_reference).
 */
static bool
ref_bit(const char *area, Size off, uint32 i)
{
	uint64		w;

	memcpy(&w, area + off + (Size) (i / 64) * 8, 8);
	return (w >> (i % 64)) & 1;
}

static uint64
ref_rem(const QfGeom *g, const char *area, uint32 i)
{
	uint64		v = 0;

	for (int k = 0; k < g->rbits; k++)
	{
		uint64		bit = (uint64) i * g->rbits + k;
		uint64		w;

		memcpy(&w, area + g->rem_off + (Size) (bit / 64) * 8, 8);
		v |= ((w >> (bit % 64)) & 1) << k;
	}
	return v;
}

/* A counter digit is a continuation without the shifted bit (qf.h). */
static bool
ref_cnt(const QfGeom *g, const char *area, uint32 i)
{
	return ref_bit(area, g->cont_off, i) && !ref_bit(area, g->shf_off, i);
}

static uint32
ref_next_occ(const QfGeom *g, const char *area, uint32 from, uint32 limit)
{
	while (from < limit && !ref_bit(area, g->occ_off, from))
		from++;
	return Min(from, limit);
}

#define REF_CHECK(cond, message) \
	do { \
		if (!(cond)) \
		{ \
			*msg = (message); \
			return false; \
		} \
	} while (0)

static bool
ref_area_check(const QfGeom *g, const char *area, const char **msg)
{
	QfAreaHeader h;
	uint32		nitems = 0;
	uint32		nused = 0;
	uint64		total = 0;
	int64		bucket = -1;
	bool		have_rem = false;
	uint64		lastrem = 0;
	uint32		ndig = 0;
	uint64		cval = 0;

	if (!qf_area_check_header(g, area, msg))
		return false;
	memcpy(&h, area, sizeof(h));
	for (uint32 i = g->nslots; i < g->nwords * 64; i++)
		REF_CHECK(!ref_bit(area, g->occ_off, i) && !ref_bit(area, g->cont_off, i) &&
				  !ref_bit(area, g->shf_off, i),
				  "quotient filter area has bits set past its last slot");
	for (uint64 b = (uint64) g->nslots * g->rbits; b < (uint64) g->rwords * 64; b++)
	{
		uint64		w;

		memcpy(&w, area + g->rem_off + (Size) (b / 64) * 8, 8);
		REF_CHECK(((w >> (b % 64)) & 1) == 0,
				  "quotient filter area has payload bits set past its last slot");
	}
	REF_CHECK(ref_next_occ(g, area, g->nhome, g->nslots) == g->nslots,
			  "quotient filter area has an occupied slack slot");
	for (uint32 i = 0; i < g->nslots; i++)
	{
		bool		occ = ref_bit(area, g->occ_off, i);
		bool		cont = ref_bit(area, g->cont_off, i);
		bool		cnt = ref_cnt(g, area, i);
		bool		shf = ref_bit(area, g->shf_off, i) || cnt;
		uint64		v = ref_rem(g, area, i);
		bool		prev_used = i > 0 && (ref_bit(area, g->occ_off, i - 1) ||
										  ref_bit(area, g->cont_off, i - 1) ||
										  ref_bit(area, g->shf_off, i - 1));

		if (have_rem && !cnt)
		{
			total = sat_add(total, cval == PG_UINT64_MAX ? cval : cval + 1);
			ndig = 0;
			cval = 0;
		}
		if (!occ && !cont && !shf)
		{
			REF_CHECK(!cnt && v == 0,
					  "quotient filter area has an empty slot with contents");
			have_rem = false;
			continue;
		}
		nused++;
		if (!cont)
		{
			uint32		b = ref_next_occ(g, area, (uint32) (bucket + 1), g->nhome);

			REF_CHECK(!cnt, "quotient filter run starts with a counter slot");
			REF_CHECK(b < g->nhome && b <= i,
					  "quotient filter run has no occupied home slot");
			REF_CHECK(shf == (b != i),
					  "quotient filter run start has a wrong shifted bit");
			REF_CHECK(b == i || prev_used,
					  "quotient filter run is shifted past an empty slot");
			bucket = b;
			have_rem = true;
			lastrem = v;
			nitems++;
		}
		else if (!cnt)
		{
			REF_CHECK(shf, "quotient filter continuation slot is not shifted");
			REF_CHECK(have_rem,
					  "quotient filter continuation slot follows an empty slot");
			REF_CHECK(v > lastrem,
					  "quotient filter remainders out of order in a run");
			lastrem = v;
			nitems++;
		}
		else
		{
			uint32		shift = ndig * g->rbits;

			REF_CHECK(shf, "quotient filter counter slot is not shifted");
			REF_CHECK(have_rem,
					  "quotient filter counter slot follows an empty slot");
			REF_CHECK(shift < 64 &&
					  (shift + g->rbits <= 64 || (v >> (64 - shift)) == 0),
					  "quotient filter count overflows 64 bits");
			cval |= v << shift;
			ndig++;
			if (i + 1 >= g->nslots || !ref_cnt(g, area, i + 1))
			{
				REF_CHECK(v != 0,
						  "quotient filter count has a leading zero digit");
				REF_CHECK(cval != PG_UINT64_MAX,
						  "quotient filter count overflows 64 bits");
			}
		}
	}
	if (have_rem)
		total = sat_add(total, cval == PG_UINT64_MAX ? cval : cval + 1);
	REF_CHECK(ref_next_occ(g, area, (uint32) (bucket + 1), g->nhome) == g->nhome,
			  "quotient filter occupied home slot has no run");
	REF_CHECK(h.nitems == nitems,
			  "quotient filter area header has a wrong item count");
	REF_CHECK(h.nused == nused,
			  "quotient filter area header has a wrong used slot count");
	REF_CHECK(h.total_count == total || h.total_count == PG_UINT64_MAX,
			  "quotient filter area header has a wrong total count");
	return true;
}

/*
 * qf_area_check against the reference on valid and damaged areas of every
 * kind of word it takes whole: empty, without counters, with counters;
 * sparse and full; flips in the metadata and in the payloads.
 */
static void
test_check_reference(void)
{
	char	   *area = malloc(PAGE_AREA);
	char	   *damaged = malloc(PAGE_AREA);
	int			cases = 0;
	int			valid = 0;
	int			rbits[] = {3, 6, 12, 19, 31};

	for (int round = 0; round < 400; round++)
	{
		QfGeom		g;
		int			rb = rbits[round % 5];
		double		load = (round % 4 == 0) ? 0.1 : (round % 4 == 1) ? 0.5 : 0.93;
		uint32		n;

		if (!qf_geom_init(&g, rb, PAGE_AREA))
			FAIL("no geometry for %d bits", rb);
		qf_area_init(&g, area);
		n = (uint32) (g.nhome * load);
		for (uint32 i = 0; i < n; i++)
			(void) qf_insert(&g, area, (uint32) rng_below(g.nhome),
							 rng() & qf_mask(rb),
							 round % 3 == 0 ? 1 + rng_below(70000) : 1);
		for (int k = 0; k < 40; k++)
		{
			const char *m1 = NULL;
			const char *m2 = NULL;
			bool		r1;
			bool		r2;
			int			flips = k == 0 ? 0 : 1 + (int) rng_below(3);

			memcpy(damaged, area, g.area_bytes);
			for (int f = 0; f < flips; f++)
			{
				/* half of the flips in the metadata, which is smaller */
				uint32		lo = k % 2 ? QF_HEADER_SIZE : g.occ_off;
				uint32		hi = k % 2 ? g.area_bytes : g.rem_off;
				uint32		off = lo + (uint32) rng_below(hi - lo);

				damaged[off] ^= (char) (1 << rng_below(8));
			}
			r1 = ref_area_check(&g, damaged, &m1);
			r2 = qf_area_check(&g, damaged, &m2);
			if (r1 != r2 || (!r1 && strcmp(m1, m2) != 0))
				FAIL("qf_area_check and the reference differ (rbits %d, load %.2f, %d flips): reference %s \"%s\", qf_area_check %s \"%s\"",
					 rb, load, flips, r1 ? "valid" : "invalid", m1 ? m1 : "",
					 r2 ? "valid" : "invalid", m2 ? m2 : "");
			if (k == 0 && !r1)
				FAIL("undamaged area is invalid: %s", m1);
			cases++;
			valid += r1;
		}
	}
	printf("  qf_area_check = reference on %d areas (%d valid)\n", cases, valid);
	free(area);
	free(damaged);
}

/* ---------------------------------------------------- reference multiset */

#define REF_CAP		(1 << 16)

typedef struct RefEntry
{
	uint64		fp;
	uint64		count;
} RefEntry;

typedef struct Ref
{
	RefEntry	e[REF_CAP];
	bool		used[REF_CAP];
	uint32		n;
	uint64		total;			/* sticky saturation, like the header */
} Ref;

static uint32
ref_slot(uint64 fp)
{
	uint64		x = fp * UINT64CONST(0x9E3779B97F4A7C15);

	return (uint32) (x >> 48) & (REF_CAP - 1);
}

static void
ref_clear(Ref *r)
{
	memset(r->used, 0, sizeof(r->used));
	r->n = 0;
	r->total = 0;
}

static uint64
ref_get(const Ref *r, uint64 fp)
{
	for (uint32 i = ref_slot(fp);; i = (i + 1) & (REF_CAP - 1))
	{
		if (!r->used[i])
			return 0;
		if (r->e[i].fp == fp)
			return r->e[i].count;
	}
}

static void
ref_add(Ref *r, uint64 fp, uint64 c)
{
	uint32		i;

	for (i = ref_slot(fp); r->used[i]; i = (i + 1) & (REF_CAP - 1))
	{
		if (r->e[i].fp == fp)
		{
			uint64		nc = sat_add(r->e[i].count, c);

			/* the header adds what the count really grew by */
			r->total = sat_add(r->total, nc - r->e[i].count);
			r->e[i].count = nc;
			return;
		}
	}
	if (r->n >= REF_CAP / 2)
		FAIL("reference map full");
	r->total = sat_add(r->total, c);
	r->used[i] = true;
	r->e[i].fp = fp;
	r->e[i].count = c;
	r->n++;
}

/* Remove up to c copies; returns how many were removed. */
static uint64
ref_sub(Ref *r, uint64 fp, uint64 c)
{
	uint32		i;
	uint64		removed;

	for (i = ref_slot(fp);; i = (i + 1) & (REF_CAP - 1))
	{
		if (!r->used[i])
			return 0;
		if (r->e[i].fp == fp)
			break;
	}
	removed = Min(c, r->e[i].count);
	if (r->total != PG_UINT64_MAX)
		r->total -= removed;
	r->e[i].count -= removed;
	if (r->e[i].count > 0)
		return removed;

	/* backward-shift deletion keeps linear probing intact */
	r->used[i] = false;
	r->n--;
	for (uint32 j = (i + 1) & (REF_CAP - 1); r->used[j];
		 j = (j + 1) & (REF_CAP - 1))
	{
		uint32		home = ref_slot(r->e[j].fp);

		/* can entry j move to the hole at i? (home not in (i, j]) */
		if (((j - home) & (REF_CAP - 1)) >= ((j - i) & (REF_CAP - 1)))
		{
			r->e[i] = r->e[j];
			r->used[i] = true;
			r->used[j] = false;
			i = j;
		}
	}
	return removed;
}

/* The n-th entry (0 <= n < ref->n) in slot order: for picking at random. */
static bool
ref_random(const Ref *r, RefEntry *out)
{
	if (r->n == 0)
		return false;
	for (;;)
	{
		uint32		i = (uint32) rng_below(REF_CAP);

		if (r->used[i])
		{
			*out = r->e[i];
			return true;
		}
	}
}

static int
cmp_entry(const void *a, const void *b)
{
	uint64		x = ((const RefEntry *) a)->fp;
	uint64		y = ((const RefEntry *) b)->fp;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/* Entries sorted by fingerprint into out (REF_CAP / 2 entries of room). */
static uint32
ref_sorted(const Ref *r, RefEntry *out)
{
	uint32		n = 0;

	for (uint32 i = 0; i < REF_CAP; i++)
		if (r->used[i])
			out[n++] = r->e[i];
	qsort(out, n, sizeof(RefEntry), cmp_entry);
	return n;
}

/* ------------------------------------------------------------ helpers */

static inline uint64
fp_of(const QfGeom *g, uint32 q, uint64 r)
{
	return ((uint64) q << g->rbits) | r;
}

static inline uint32
fp_q(const QfGeom *g, uint64 fp)
{
	return (uint32) (fp >> g->rbits);
}

static inline uint64
fp_r(const QfGeom *g, uint64 fp)
{
	return fp & qf_mask(g->rbits);
}

static uint64
random_fp(const QfGeom *g)
{
	return fp_of(g, (uint32) rng_below(g->nhome), rng() & qf_mask(g->rbits));
}

static uint32
digits(uint64 c, int rbits)
{
	uint32		d = 0;

	for (c = c - 1; c > 0; c = rbits >= 64 ? 0 : c >> rbits)
		d++;
	return d;
}

static RefEntry sorted_buf[REF_CAP / 2];
static char *scratch;			/* an area for rebuilt copies */

/* Compare two areas of geometry g, except total_count (sticky). */
static bool
same_bytes(const QfGeom *g, const char *a, const char *b)
{
	return memcmp(a, b, offsetof(QfAreaHeader, total_count)) == 0 &&
		memcmp(a + QF_HEADER_SIZE, b + QF_HEADER_SIZE,
			   g->area_bytes - QF_HEADER_SIZE) == 0;
}

/* Everything the area must satisfy with respect to the reference. */
static void
full_check(const QfGeom *g, const char *area, const Ref *ref, const char *what)
{
	const char *msg;
	QfStats		st;
	QfIter		it;
	uint32		q;
	uint64		r,
				c;
	uint32		n;
	uint32		k = 0;
	uint64		used = 0;
	QfBuilder	b;

	if (!qf_area_check(g, area, &msg))
		FAIL("%s: qf_area_check: %s", what, msg);
	n = ref_sorted(ref, sorted_buf);
	for (uint32 i = 0; i < n; i++)
		used += 1 + digits(sorted_buf[i].count, g->rbits);
	qf_area_stats(g, area, &st);
	if (st.nitems != n || st.nused != used || st.total_count != ref->total)
		FAIL("%s: stats items %u/%u used %u/%llu total %llu/%llu", what,
			 st.nitems, n, st.nused, (unsigned long long) used,
			 (unsigned long long) st.total_count,
			 (unsigned long long) ref->total);

	qf_iter_init(&it, g, area);
	while (qf_iter_next(&it, &q, &r, &c))
	{
		if (k >= n)
			FAIL("%s: iteration returns too many items", what);
		if (fp_of(g, q, r) != sorted_buf[k].fp || c != sorted_buf[k].count)
			FAIL("%s: iteration item %u is (%u,%llu)x%llu, expected %llx x%llu",
				 what, k, q, (unsigned long long) r, (unsigned long long) c,
				 (unsigned long long) sorted_buf[k].fp,
				 (unsigned long long) sorted_buf[k].count);
		k++;
	}
	if (k != n)
		FAIL("%s: iteration returned %u items, expected %u", what, k, n);

	for (uint32 i = 0; i < n; i++)
	{
		uint64		fp = sorted_buf[i].fp;

		c = qf_count(g, area, fp_q(g, fp), fp_r(g, fp));
		if (c != sorted_buf[i].count)
			FAIL("%s: count of %llx is %llu, expected %llu", what,
				 (unsigned long long) fp, (unsigned long long) c,
				 (unsigned long long) sorted_buf[i].count);
	}
	for (int i = 0; i < 200; i++)
	{
		uint64		fp = random_fp(g);

		if (qf_count(g, area, fp_q(g, fp), fp_r(g, fp)) != ref_get(ref, fp))
			FAIL("%s: count of random %llx is wrong", what,
				 (unsigned long long) fp);
	}

	/* canonical layout: the builder writes the same bytes */
	qf_builder_init(&b, g, scratch);
	for (uint32 i = 0; i < n; i++)
		if (qf_builder_add(&b, fp_q(g, sorted_buf[i].fp),
						   fp_r(g, sorted_buf[i].fp),
						   sorted_buf[i].count) != QF_OK)
			FAIL("%s: builder failed on a multiset that fits", what);
	if (!same_bytes(g, area, scratch))
		FAIL("%s: area differs from the canonical (builder) layout", what);
}

/* -------------------------------------------------- randomized workload */

typedef struct Workload
{
	bool		huge_counts;	/* allow counts up to 2^64-1 */
	int			churn_ops;		/* operations per load level */
	int			batch;			/* operations between full checks */
} Workload;

typedef struct WorkStats
{
	uint64		ops;
	uint64		full;
	uint64		checks;
} WorkStats;

static uint64
random_count(const Workload *w, int rbits)
{
	uint32		x = (uint32) rng_below(100);

	if (x < 75)
		return 1;
	if (x < 80)
	{
		/* around a change in the number of digits: 2^(k*rbits) + 1 +- 1 */
		int			k = 1 + (int) rng_below(Max(1, (w->huge_counts ? 63 : 30) / rbits));
		uint64		b = k * rbits >= 64 ? PG_UINT64_MAX : (UINT64CONST(1) << (k * rbits)) + 1;

		return b - rng_below(3);
	}
	if (x < 93)
		return 2 + rng_below(300);
	if (!w->huge_counts || x < 97)
		return 2 + rng_below(UINT64CONST(1) << (rng_below(30) + 1));
	if (x < 99)
		return (rng() >> rng_below(64)) | 1;
	return PG_UINT64_MAX - rng_below(3);
}

/* One random operation: insert (bias = percent of inserts), remove, look up. */
static void
random_op(const QfGeom *g, char *area, char *snap, Ref *ref, int bias,
		  const Workload *w, WorkStats *ws, const char *what)
{
	uint32		x = (uint32) rng_below(100);
	RefEntry	e;

	ws->ops++;
	if (x < (uint32) bias)
	{
		uint64		fp;
		uint64		c = random_count(w, g->rbits);
		QfStatus	st;

		if (rng_below(5) == 0 && ref_random(ref, &e))
			fp = e.fp;
		else
			fp = random_fp(g);
		memcpy(snap, area, g->area_bytes);
		st = qf_insert(g, area, fp_q(g, fp), fp_r(g, fp), c);
		if (st == QF_OK)
			ref_add(ref, fp, c);
		else if (st == QF_FULL)
		{
			ws->full++;
			if (memcmp(snap, area, g->area_bytes) != 0)
				FAIL("%s: QF_FULL changed the area", what);
		}
		else
			FAIL("%s: insert returned %d", what, (int) st);
	}
	else if (x < (uint32) bias + (100 - bias) * 9 / 10)
	{
		uint64		fp;
		uint64		c;
		uint64		got,
					want;

		if (rng_below(5) != 0 && ref_random(ref, &e))
		{
			uint32		y = (uint32) rng_below(10);

			fp = e.fp;
			if (y < 4)
				c = e.count;
			else if (y < 7)
				c = 1 + rng_below(e.count);
			else if (y < 9)
				c = sat_add(e.count, 1 + rng_below(5));
			else
				c = PG_UINT64_MAX;
		}
		else
		{
			fp = random_fp(g);
			c = 1 + rng_below(3);
		}
		got = qf_remove(g, area, fp_q(g, fp), fp_r(g, fp), c);
		want = ref_sub(ref, fp, c);
		if (got != want)
			FAIL("%s: remove of %llx x%llu removed %llu, expected %llu", what,
				 (unsigned long long) fp, (unsigned long long) c,
				 (unsigned long long) got, (unsigned long long) want);
	}
	else
	{
		uint64		fp;

		if (rng_below(2) && ref_random(ref, &e))
			fp = e.fp;
		else
			fp = random_fp(g);
		if (qf_count(g, area, fp_q(g, fp), fp_r(g, fp)) != ref_get(ref, fp))
			FAIL("%s: lookup of %llx is wrong", what, (unsigned long long) fp);
	}
}

static double
load_of(const QfGeom *g, const char *area)
{
	QfStats		st;

	qf_area_stats(g, area, &st);
	return st.load;
}

static Ref	ref_main;

static void
run_workload(const QfGeom *g, const Workload *w, const char *name)
{
	char	   *area = malloc(g->area_bytes);
	char	   *snap = malloc(g->area_bytes);
	char	   *fresh = malloc(g->area_bytes);
	Ref		   *ref = &ref_main;
	WorkStats	ws = {0};
	double		levels[] = {0.5, 0.75, 0.9, 0.95, 2.0};
	double		t0 = now();
	int			since = 0;
	double		maxload = 0;

	qf_area_init(g, area);
	qf_area_init(g, fresh);
	ref_clear(ref);
	full_check(g, area, ref, name);

	for (int l = 0; l < (int) lengthof(levels); l++)
	{
		double		target = levels[l];
		uint64		full_before = ws.full;

		/* fill to the level (2.0: until 100 inserts have failed) */
		while (load_of(g, area) < target && ws.full < full_before + 100)
		{
			random_op(g, area, snap, ref, 85, w, &ws, name);
			if (++since >= w->batch)
			{
				full_check(g, area, ref, name);
				ws.checks++;
				since = 0;
			}
		}
		maxload = Max(maxload, load_of(g, area));
		/* churn at the level: as many inserts as removes */
		for (int i = 0; i < w->churn_ops; i++)
		{
			random_op(g, area, snap, ref, load_of(g, area) < target ? 55 : 45,
					  w, &ws, name);
			if (++since >= w->batch)
			{
				full_check(g, area, ref, name);
				ws.checks++;
				since = 0;
			}
		}
		full_check(g, area, ref, name);
		ws.checks++;
	}

	/* drain: remove everything, in random order and pieces */
	while (ref->n > 0)
	{
		RefEntry	e;
		uint64		c;

		ref_random(ref, &e);
		c = rng_below(3) ? e.count : 1 + rng_below(e.count);
		if (qf_remove(g, area, fp_q(g, e.fp), fp_r(g, e.fp), c) !=
			ref_sub(ref, e.fp, c))
			FAIL("%s: drain remove is wrong", name);
		if (++since >= w->batch)
		{
			full_check(g, area, ref, name);
			ws.checks++;
			since = 0;
		}
	}
	full_check(g, area, ref, name);
	if (memcmp(area, fresh, offsetof(QfAreaHeader, total_count)) != 0 ||
		memcmp(area + QF_HEADER_SIZE, fresh + QF_HEADER_SIZE,
			   g->area_bytes - QF_HEADER_SIZE) != 0)
		FAIL("%s: drained area is not byte-identical to a fresh one", name);

	printf("  %-28s home %5u slack %4u bytes %4zu: %7llu ops, %4llu checks, "
		   "%5llu QF_FULL, max load %.3f, %.2fs\n",
		   name, g->nhome, g->nslack, g->area_bytes,
		   (unsigned long long) ws.ops, (unsigned long long) ws.checks,
		   (unsigned long long) ws.full, maxload, now() - t0);
	free(area);
	free(snap);
	free(fresh);
}

/* ------------------------------------------------------- special cases */

static void
test_edges(void)
{
	QfGeom		g;
	char	   *area;
	char	   *snap;
	uint64		c;
	const char *msg;

	printf("edge cases\n");
	if (qf_geom_init(&g, 0, PAGE_AREA) || qf_geom_init(&g, QF_MAX_RBITS + 1, PAGE_AREA))
		FAIL("geometry accepts rbits out of range");
	if (qf_geom_init(&g, 8, 100))
		FAIL("geometry accepts a tiny area");
	for (int r = QF_MIN_RBITS; r <= QF_MAX_RBITS; r++)
	{
		if (!qf_geom_init(&g, r, PAGE_AREA))
			FAIL("no page geometry for rbits %d", r);
		if (g.area_bytes > PAGE_AREA || g.nslack < qf_min_slack(g.nhome) ||
			qf_area_size(r, g.nslots + 1) <= PAGE_AREA ||
			qf_area_size(r, g.nhome + 1 + qf_min_slack(g.nhome + 1)) <= PAGE_AREA)
			FAIL("page geometry for rbits %d is not the largest", r);
	}

	if (!qf_geom_init(&g, 8, PAGE_AREA))
		FAIL("no geometry");
	area = malloc(g.area_bytes);
	snap = malloc(g.area_bytes);
	qf_area_init(&g, area);

	/* arguments out of range */
	if (qf_insert(&g, area, g.nhome, 0, 1) != QF_INVALID ||
		qf_insert(&g, area, 0, 256, 1) != QF_INVALID ||
		qf_count(&g, area, g.nhome, 0) != 0 ||
		qf_remove(&g, area, 0, 256, 1) != 0)
		FAIL("out-of-range arguments accepted");
	if (qf_insert(&g, area, 5, 5, 0) != QF_OK || qf_count(&g, area, 5, 5) != 0)
		FAIL("count 0 insert is not a no-op");

	/* saturation of one count, and of the total */
	if (qf_insert(&g, area, 7, 3, PG_UINT64_MAX - 1) != QF_OK ||
		qf_insert(&g, area, 7, 3, 5) != QF_OK ||
		qf_count(&g, area, 7, 3) != PG_UINT64_MAX)
		FAIL("count does not saturate");
	if (!qf_area_check(&g, area, &msg))
		FAIL("saturated area: %s", msg);
	c = qf_remove(&g, area, 7, 3, 10);
	if (c != 10 || qf_count(&g, area, 7, 3) != PG_UINT64_MAX - 10)
		FAIL("remove from a saturated count");
	if (!qf_area_check(&g, area, &msg))
		FAIL("after remove: %s", msg);
	if (qf_remove(&g, area, 7, 3, PG_UINT64_MAX) != PG_UINT64_MAX - 10 ||
		qf_count(&g, area, 7, 3) != 0)
		FAIL("remove all of a huge count");

	/* the last home slot and the end of the slack */
	{
		QfGeom		gs;

		if (!qf_geom_init_slots(&gs, 4096, 8, 100, PAGE_AREA))
			FAIL("no geometry");
		qf_area_init(&gs, area);
		for (uint32 i = 0; i < gs.nslack + 1; i++)
			if (qf_insert(&gs, area, gs.nhome - 1, i, 1) != QF_OK)
				FAIL("cannot fill the slack from the last home slot (%u)", i);
		memcpy(snap, area, gs.area_bytes);
		if (qf_insert(&gs, area, gs.nhome - 1, 255, 1) != QF_FULL ||
			qf_insert(&gs, area, gs.nhome - 1, 0, 1) != QF_FULL ||
			qf_insert(&gs, area, gs.nhome - 2, 7, 1) != QF_OK ||
			qf_insert(&gs, area, gs.nhome - 2, 8, 1) != QF_FULL ||
			qf_insert(&gs, area, gs.nhome - 2, 6, 1) != QF_FULL ||
			qf_insert(&gs, area, gs.nhome - 3, 1, 1) != QF_OK ||
			qf_insert(&gs, area, gs.nhome - 3, 2, 1) != QF_FULL ||
			qf_remove(&gs, area, gs.nhome - 2, 7, 1) != 1 ||
			qf_remove(&gs, area, gs.nhome - 3, 1, 1) != 1 ||
			memcmp(snap, area, gs.area_bytes) != 0)
			FAIL("QF_FULL at the end of the slack");
		if (qf_insert(&gs, area, 0, 0, 1000) != QF_OK ||
			!qf_area_check(&gs, area, &msg))
			FAIL("insert at the start of a full tail");
		/* a count that grows by a digit needs one more slot: none left */
		if (qf_insert(&gs, area, gs.nhome - 1, 4, 1) != QF_FULL ||
			qf_count(&gs, area, gs.nhome - 1, 4) != 1)
			FAIL("growing count past the end");
		if (qf_remove(&gs, area, gs.nhome - 1, 0, 1) != 1 ||
			!qf_area_check(&gs, area, &msg) ||
			qf_insert(&gs, area, gs.nhome - 1, 4, 1) != QF_OK ||
			qf_count(&gs, area, gs.nhome - 1, 4) != 2 ||
			!qf_area_check(&gs, area, &msg))
			FAIL("remove from the last run, then grow a count");
	}

	/* the builder refuses disorder and stops cleanly when full */
	{
		QfBuilder	b;
		QfGeom		gs;

		if (!qf_geom_init_slots(&gs, 64, 8, 2, PAGE_AREA))
			FAIL("no geometry");
		qf_builder_init(&b, &gs, area);
		if (qf_builder_add(&b, 3, 10, 1) != QF_OK ||
			qf_builder_add(&b, 3, 10, 1) != QF_INVALID ||
			qf_builder_add(&b, 3, 9, 1) != QF_INVALID ||
			qf_builder_add(&b, 2, 200, 1) != QF_INVALID ||
			qf_builder_add(&b, 64, 0, 1) != QF_INVALID ||
			qf_builder_add(&b, 3, 256, 1) != QF_INVALID ||
			qf_builder_add(&b, 3, 11, 0) != QF_OK ||
			qf_builder_add(&b, 3, 12, 300) != QF_OK ||
			qf_count(&gs, area, 3, 12) != 300 ||
			!qf_area_check(&gs, area, &msg))
			FAIL("builder order checks");
		if (qf_builder_add(&b, 63, 1, 1) != QF_OK ||
			qf_builder_add(&b, 63, 2, 1) != QF_OK ||
			qf_builder_add(&b, 63, 3, 1) != QF_OK ||
			qf_builder_add(&b, 63, 4, 1) != QF_FULL ||
			qf_builder_add(&b, 63, 5, 1000) != QF_FULL ||
			!qf_area_check(&gs, area, &msg) ||
			qf_count(&gs, area, 63, 3) != 1)
			FAIL("builder at the end of the slack");
	}

	/* corruption is detected */
	qf_area_init(&g, area);
	for (int i = 0; i < 500; i++)
		qf_insert(&g, area, (uint32) rng_below(g.nhome), rng() & 255,
				  1 + rng_below(1000));
	if (!qf_area_check(&g, area, &msg))
		FAIL("random area: %s", msg);
	{
		int			detected = 0;
		int			trials = 2000;

		memcpy(snap, area, g.area_bytes);
		for (int t = 0; t < trials; t++)
		{
			uint32		off = (uint32) rng_below(g.rem_off);
			QfIter		it;
			uint32		q;
			uint64		r;
			int			steps = 0;

			memcpy(area, snap, g.area_bytes);
			area[off] ^= (char) (1 << rng_below(8));
			if (!qf_area_check(&g, area, &msg))
				detected++;
			/* must stay in bounds and terminate on garbage */
			for (int i = 0; i < 20; i++)
			{
				uint32		qq = (uint32) rng_below(g.nhome);

				(void) qf_count(&g, area, qq, rng() & 255);
				(void) qf_insert(&g, area, qq, rng() & 255, 1 + rng_below(3));
				(void) qf_remove(&g, area, qq, rng() & 255, 1);
			}
			qf_iter_init(&it, &g, area);
			while (qf_iter_next(&it, &q, &r, &c) && steps < 100000)
				steps++;
			if (steps >= 100000)
				FAIL("iteration of a corrupt area does not end");
		}
		printf("  single bit flips in the header and metadata: %d/%d detected\n",
			   detected, trials);
		/* flips of the header counters and metadata are always visible */
		if (detected < trials * 9 / 10)
			FAIL("qf_area_check misses corruption");
	}
	{
		/* random garbage behind a valid header: detected, and harmless */
		int			detected = 0;
		int			trials = 300;
		QfAreaHeader h;

		qf_area_init(&g, area);
		memcpy(&h, area, sizeof(h));
		for (int t = 0; t < trials; t++)
		{
			QfIter		it;
			uint32		q;
			uint64		r;
			int			steps = 0;
			/* sparse garbage looks more like a real area than dense */
			int			density = 1 + (int) rng_below(4);

			for (uint32 i = QF_HEADER_SIZE; i < g.area_bytes; i++)
			{
				uint64		x = rng();

				for (int k = 1; k < density; k++)
					x &= rng();
				area[i] = (char) x;
			}
			memcpy(area, &h, sizeof(h));
			if (!qf_area_check(&g, area, &msg))
				detected++;
			for (int i = 0; i < 200; i++)
			{
				uint32		qq = (uint32) rng_below(g.nhome);

				(void) qf_count(&g, area, qq, rng() & 255);
				(void) qf_insert(&g, area, qq, rng() & 255,
								 rng_below(4) ? 1 : rng());
				(void) qf_remove(&g, area, qq, rng() & 255, rng());
			}
			qf_iter_init(&it, &g, area);
			while (qf_iter_next(&it, &q, &r, &c) && steps < 100000)
				steps++;
			if (steps >= 100000)
				FAIL("iteration of a garbage area does not end");
			if (qf_merge_areas(&g, area, area, snap) == QF_OK &&
				!qf_area_check(&g, snap, &msg))
				FAIL("merge of garbage produced an invalid area: %s", msg);
		}
		printf("  random garbage areas: %d/%d detected\n", detected, trials);
		if (detected != trials)
			FAIL("qf_area_check accepts garbage");
	}
	{
		QfGeom		g2;

		qf_area_init(&g, area);
		if (!qf_geom_init(&g2, 9, PAGE_AREA) || qf_area_check(&g2, area, &msg))
			FAIL("geometry mismatch not detected");
		memset(area, 0, 64);
		if (qf_area_check(&g, area, &msg))
			FAIL("zeroed area accepted");
	}
	free(area);
	free(snap);
}

/* Random area contents for merge tests: fill to a load, mirror in ref. */
static void
fill_random(const QfGeom *g, char *area, Ref *ref, double load, int share_pct,
			const Ref *other)
{
	Workload	w = {true, 0, 0};

	qf_area_init(g, area);
	ref_clear(ref);
	while (load_of(g, area) < load)
	{
		uint64		fp = random_fp(g);
		uint64		c = random_count(&w, g->rbits);
		RefEntry	e;

		if (other && (int) rng_below(100) < share_pct && ref_random(other, &e))
			fp = e.fp;
		if (qf_insert(g, area, fp_q(g, fp), fp_r(g, fp), c) == QF_OK)
			ref_add(ref, fp, c);
		else
			break;
	}
}

static Ref	ref_a,
			ref_b,
			ref_u;

static void
test_merge(int rbits)
{
	QfGeom		g;
	char	   *a,
			   *b,
			   *out,
			   *viains;
	double		loads[][2] = {{0, 0}, {0.3, 0}, {0.4, 0.4}, {0.6, 0.3}, {0.7, 0.7}};
	char		what[64];

	if (!qf_geom_init(&g, rbits, PAGE_AREA))
		FAIL("no geometry");
	a = malloc(g.area_bytes);
	b = malloc(g.area_bytes);
	out = malloc(g.area_bytes);
	viains = malloc(g.area_bytes);
	for (int t = 0; t < (int) lengthof(loads); t++)
	{
		QfStatus	st;
		QfIter		it;
		uint32		q;
		uint64		r,
					c;

		snprintf(what, sizeof(what), "merge r=%d %.1f+%.1f", rbits,
				 loads[t][0], loads[t][1]);
		fill_random(&g, a, &ref_a, loads[t][0], 0, NULL);
		fill_random(&g, b, &ref_b, loads[t][1], 30, &ref_a);
		st = qf_merge_areas(&g, a, b, out);

		/* the reference union */
		ref_clear(&ref_u);
		for (uint32 i = 0; i < REF_CAP; i++)
		{
			if (ref_a.used[i])
				ref_add(&ref_u, ref_a.e[i].fp, ref_a.e[i].count);
			if (ref_b.used[i])
				ref_add(&ref_u, ref_b.e[i].fp, ref_b.e[i].count);
		}
		/* the same by iteration + insert into a fresh area */
		qf_area_init(&g, viains);
		qf_iter_init(&it, &g, a);
		while (qf_iter_next(&it, &q, &r, &c))
			if (qf_insert(&g, viains, q, r, c) != QF_OK)
				FAIL("%s: insert of a into a fresh area failed", what);
		qf_iter_init(&it, &g, b);
		while (qf_iter_next(&it, &q, &r, &c))
			if (qf_insert(&g, viains, q, r, c) != QF_OK)
				break;

		if (st == QF_OK)
		{
			full_check(&g, out, &ref_u, what);
			if (!same_bytes(&g, out, viains))
				FAIL("%s: merge differs from iteration + insert", what);
			printf("  %-24s items %5u + %5u -> %5u, load %.3f\n", what,
				   ref_a.n, ref_b.n, ref_u.n, load_of(&g, out));
		}
		else if (st == QF_FULL)
		{
			const char *msg;
			uint64		used = 0;
			uint32		n = ref_sorted(&ref_u, sorted_buf);

			for (uint32 i = 0; i < n; i++)
				used += 1 + digits(sorted_buf[i].count, g.rbits);
			if (used <= g.nslots - g.nhome / 2)
				FAIL("%s: QF_FULL for %llu slots", what,
					 (unsigned long long) used);
			if (!qf_area_check(&g, out, &msg))
				FAIL("%s: partial merge output is invalid: %s", what, msg);
			printf("  %-24s items %5u + %5u: QF_FULL (needs %llu slots of %u), "
				   "partial output valid\n", what, ref_a.n, ref_b.n,
				   (unsigned long long) used, g.nslots);
		}
		else
			FAIL("%s: merge returned %d", what, (int) st);
	}
	free(a);
	free(b);
	free(out);
	free(viains);
}

/*
 * Resize by one bit with real hashes: keys hashed into 2^pb areas of
 * (slot_bits, rbits) are split into 2^(pb+1) areas of (slot_bits, rbits-1);
 * every key must be found where its hash points with the new geometry,
 * and each new area must be byte-identical to one built by inserting the
 * keys afresh with the new geometry.
 */
#define SPLIT_PB	2
#define SPLIT_KEYS	20000

static uint64 split_keys[SPLIT_KEYS];
static uint64 split_counts[SPLIT_KEYS];

static void
test_split(int rbits)
{
	QfGeom		go,
				gn;
	int			np = 1 << SPLIT_PB;
	char	   *old,
			   *new,
			   *fresh;
	int			nkeys = 0;
	char		what[64];
	const char *msg;
	int			s;

	snprintf(what, sizeof(what), "split r=%d", rbits);
	/* splits by bits: the largest power of two of home slots that fits */
	if (!qf_geom_init(&go, rbits, PAGE_AREA))
		FAIL("%s: no geometry", what);
	s = qf_home_bits(go.nhome);
	if (!qf_geom_init_slots(&go, (uint32) 1 << s, rbits, QF_SLACK_FILL,
							PAGE_AREA) ||
		!qf_geom_init_slots(&gn, (uint32) 1 << s, rbits - 1, QF_SLACK_FILL,
							PAGE_AREA))
		FAIL("%s: no geometry", what);
	old = malloc(go.area_bytes * np);
	new = malloc(gn.area_bytes * np * 2);
	fresh = malloc(gn.area_bytes * np * 2);
	for (int p = 0; p < np; p++)
		qf_area_init(&go, old + p * go.area_bytes);
	for (int p = 0; p < 2 * np; p++)
		qf_area_init(&gn, fresh + p * gn.area_bytes);

	/* fill until some area reaches 75% load */
	for (;;)
	{
		uint64		h = rng();
		uint64		pg;
		uint32		q;
		uint64		r;
		uint64		c = rng_below(8) ? 1 : 1 + rng_below(100000);
		char	   *area;

		qf_fingerprint_split(h, SPLIT_PB, s, rbits, &pg, &q, &r);
		area = old + pg * go.area_bytes;
		if (load_of(&go, area) >= 0.75 || nkeys >= SPLIT_KEYS)
			break;
		if (qf_insert(&go, area, q, r, c) != QF_OK)
			FAIL("%s: insert failed", what);
		split_keys[nkeys] = h;
		split_counts[nkeys] = c;
		nkeys++;

		/* the same key, inserted afresh with the new geometry */
		qf_fingerprint_split(h, SPLIT_PB + 1, s, rbits - 1, &pg, &q, &r);
		if (qf_insert(&gn, fresh + pg * gn.area_bytes, q, r, c) != QF_OK)
			FAIL("%s: fresh insert failed", what);
	}

	for (int p = 0; p < np; p++)
	{
		QfStats		so,
					slo,
					shi;
		char	   *lo = new + (2 * p) * gn.area_bytes;
		char	   *hi = new + (2 * p + 1) * gn.area_bytes;

		if (qf_split_area(&go, old + p * go.area_bytes, &gn, lo, hi) != QF_OK)
			FAIL("%s: split failed", what);
		if (!qf_area_check(&gn, lo, &msg) || !qf_area_check(&gn, hi, &msg))
			FAIL("%s: split output invalid: %s", what, msg);
		qf_area_stats(&go, old + p * go.area_bytes, &so);
		qf_area_stats(&gn, lo, &slo);
		qf_area_stats(&gn, hi, &shi);
		if (slo.nitems + shi.nitems != so.nitems ||
			sat_add(slo.total_count, shi.total_count) != so.total_count)
			FAIL("%s: split lost items", what);
	}
	for (int p = 0; p < 2 * np; p++)
		if (!same_bytes(&gn, new + p * gn.area_bytes, fresh + p * gn.area_bytes))
			FAIL("%s: split area %d differs from fresh inserts", what, p);
	for (int i = 0; i < nkeys; i++)
	{
		uint64		pg;
		uint32		q;
		uint64		r;
		uint64		co,
					cn;

		qf_fingerprint_split(split_keys[i], SPLIT_PB, s, rbits, &pg, &q, &r);
		co = qf_count(&go, old + pg * go.area_bytes, q, r);
		qf_fingerprint_split(split_keys[i], SPLIT_PB + 1, s, rbits - 1,
							 &pg, &q, &r);
		cn = qf_count(&gn, new + pg * gn.area_bytes, q, r);
		if (co < split_counts[i] || cn != co)
			FAIL("%s: key %d has count %llu before and %llu after", what, i,
				 (unsigned long long) co, (unsigned long long) cn);
	}
	if (qf_split_area(&go, old, &go, new, new + gn.area_bytes) != QF_INVALID)
		FAIL("%s: split accepts a wrong geometry", what);
	printf("  %-24s %d keys in %d areas (home %u, r %d) -> %d areas (r %d): ok\n",
		   what, nkeys, np, go.nhome, rbits, 2 * np, rbits - 1);
	free(old);
	free(new);
	free(fresh);
}

static void
test_hash_helpers(void)
{
	for (int i = 0; i < 100000; i++)
	{
		int			pb = (int) rng_below(20);
		int			sb = 1 + (int) rng_below(QF_MAX_SLOT_BITS);
		int			rb = 1 + (int) rng_below(Min(QF_MAX_RBITS, 64 - pb - sb));
		uint64		h = rng();
		uint64		pg,
					pg2,
					r,
					r2;
		uint32		q,
					q2;
		uint64		prefix;
		int			total = pb + sb + rb;

		if (total > 64)
			continue;
		qf_fingerprint_split(h, pb, sb, rb, &pg, &q, &r);
		prefix = qf_fingerprint_join(pg, q, r, pb, sb, rb);
		if (prefix != (h & ~qf_mask(64 - total)))
			FAIL("join(split(h)) is not the fingerprint prefix");
		qf_fingerprint_split(prefix, pb, sb, rb, &pg2, &q2, &r2);
		if (pg2 != pg || q2 != q || r2 != r || q >= (UINT64CONST(1) << sb) ||
			r > qf_mask(rb) || pg > qf_mask(pb))
			FAIL("split(join) differs");
		/* one bit moved from the remainder to the page index */
		if (rb >= 2)
		{
			uint64		npg,
						nr;
			uint32		nq;

			qf_fingerprint_split(h, pb + 1, sb, rb - 1, &npg, &nq, &nr);
			if (npg != ((pg << 1) | (q >> (sb - 1))) ||
				nq != (uint32) ((((uint64) q << 1) | (r >> (rb - 1))) & qf_mask(sb)) ||
				nr != (r & qf_mask(rb - 1)))
				FAIL("split rule disagrees with the hash helper");
		}
	}
	printf("hash helpers: split/join/resize rule ok\n");
}

/* ------------------------------------------------ QF_FULL probability */

typedef struct FullConfig
{
	const char *name;
	int			slot_bits;		/* 0: page geometry for rbits */
	int			rbits;
	uint32		nslack;
	int			trials;
} FullConfig;

static void
measure_full(void)
{
	FullConfig	cfg[] = {
		{"page r=4", 0, 4, 0, 200},
		{"page r=8", 0, 8, 0, 200},
		{"page r=11", 0, 11, 0, 200},
		{"page r=12", 0, 12, 0, 200},
		{"page r=20", 0, 20, 0, 200},
		{"page r=26", 0, 26, 0, 200},
		{"home 1024 slack 64 (min)", 10, 8, 64, 2000},
		{"home 4096 slack 128 (min)", 12, 8, 128, 1000},
		{"home 8192 slack 128 (min)", 13, 4, 128, 500},
		{"home 4096 slack 64", 12, 8, 64, 1000},
		{"home 4096 slack 32", 12, 8, 32, 1000},
		{"home 1024 slack 16", 10, 8, 16, 2000},
	};
	double		marks[] = {0.75, 0.90, 0.95, 1.0};

	printf("QF_FULL probability: areas filled with random distinct "
		   "fingerprints (count 1);\n"
		   "  P@x = fraction of fills with a QF_FULL before load x "
		   "(load = used slots / home slots)\n");
	printf("  %-26s %5s %5s %6s %7s %7s %7s %7s\n", "geometry", "home",
		   "slack", "fills", "P@75%", "P@90%", "P@95%", "P@100%");
	for (int k = 0; k < (int) lengthof(cfg); k++)
	{
		QfGeom		g;
		char	   *area;
		int			fails[lengthof(marks)] = {0};
		bool		ok;

		if (cfg[k].slot_bits == 0)
			ok = qf_geom_init(&g, cfg[k].rbits, PAGE_AREA);
		else
			ok = qf_geom_init_slots(&g, (uint32) 1 << cfg[k].slot_bits, cfg[k].rbits,
									cfg[k].nslack, 1 << 20);
		if (!ok)
			FAIL("no geometry for %s", cfg[k].name);
		area = malloc(g.area_bytes);
		for (int t = 0; t < cfg[k].trials; t++)
		{
			QfStats		st;

			qf_area_init(&g, area);
			for (;;)
			{
				uint32		q = (uint32) rng_below(g.nhome);
				uint64		r = rng() & qf_mask(g.rbits);

				qf_area_stats(&g, area, &st);
				if (st.nused >= g.nhome)
					break;
				if (qf_count(&g, area, q, r) != 0)
					continue;
				if (qf_insert(&g, area, q, r, 1) == QF_FULL)
				{
					for (int m = 0; m < (int) lengthof(marks); m++)
						if (st.load < marks[m])
							fails[m]++;
					break;
				}
			}
		}
		printf("  %-26s %5u %5u %6d", cfg[k].name, g.nhome, g.nslack,
			   cfg[k].trials);
		for (int m = 0; m < (int) lengthof(marks); m++)
			printf(" %7.4f", (double) fails[m] / cfg[k].trials);
		printf("\n");
		free(area);
	}
}

/* --------------------------------------------------------- throughput */

#define BENCH_AREAS 64

typedef struct BenchKey
{
	char	   *area;
	uint32		q;
	uint64		r;
} BenchKey;

static void
bench(int rbits)
{
	QfGeom		g;
	char	   *areas;
	BenchKey   *keys;
	BenchKey   *shuffled;
	BenchKey   *probes;
	uint32		n = 0;
	uint32		per;
	double		t;
	volatile uint64 sink = 0;
	int			rounds = 3;
	double		tins = 0,
				thit = 0,
				trnd = 0,
				tdel = 0,
				tchk = 0,
				titer = 0;
	uint64		nops = 0,
				nchk = 0;

	if (!qf_geom_init(&g, rbits, PAGE_AREA))
		FAIL("no geometry");
	per = (uint32) (g.nhome * 0.75);
	areas = malloc(g.area_bytes * BENCH_AREAS);
	keys = malloc(sizeof(BenchKey) * per * BENCH_AREAS);
	shuffled = malloc(sizeof(BenchKey) * per * BENCH_AREAS);
	probes = malloc(sizeof(BenchKey) * per * BENCH_AREAS);

	for (int round = 0; round < rounds; round++)
	{
		/*
		 * Random keys spread over all areas (the areas, 0.5 MB, stay in
		 * L2 as the pages of a hot buffer would), in sequential arrays so
		 * that the timings measure the filter, not misses on the key list.
		 */
		for (int a = 0; a < BENCH_AREAS; a++)
			qf_area_init(&g, areas + a * g.area_bytes);
		n = per * BENCH_AREAS;
		for (uint32 i = 0; i < n; i++)
		{
			keys[i].area = areas + (i % BENCH_AREAS) * g.area_bytes;
			keys[i].q = (uint32) rng_below(g.nhome);
			keys[i].r = rng() & qf_mask(rbits);
			probes[i].area = areas + rng_below(BENCH_AREAS) * g.area_bytes;
			probes[i].q = (uint32) rng_below(g.nhome);
			probes[i].r = rng() & qf_mask(rbits);
		}
		memcpy(shuffled, keys, sizeof(BenchKey) * n);
		for (uint32 i = n - 1; i > 0; i--)
		{
			uint32		j = (uint32) rng_below(i + 1);
			BenchKey	tmp = shuffled[i];

			shuffled[i] = shuffled[j];
			shuffled[j] = tmp;
		}

		t = now();
		for (uint32 i = 0; i < n; i++)
			if (qf_insert(&g, keys[i].area, keys[i].q, keys[i].r, 1) != QF_OK)
				FAIL("bench insert failed");
		tins += now() - t;

		t = now();
		for (uint32 i = 0; i < n; i++)
			sink += qf_count(&g, shuffled[i].area, shuffled[i].q, shuffled[i].r);
		thit += now() - t;

		t = now();
		for (uint32 i = 0; i < n; i++)
			sink += qf_count(&g, probes[i].area, probes[i].q, probes[i].r);
		trnd += now() - t;

		t = now();
		for (int a = 0; a < BENCH_AREAS; a++)
		{
			QfIter		it;
			uint32		q;
			uint64		r,
						c;

			qf_iter_init(&it, &g, areas + a * g.area_bytes);
			while (qf_iter_next(&it, &q, &r, &c))
				sink += c;
		}
		titer += now() - t;

		t = now();
		for (int a = 0; a < BENCH_AREAS; a++)
		{
			const char *msg;

			if (!qf_area_check(&g, areas + a * g.area_bytes, &msg))
				FAIL("bench area invalid: %s", msg);
		}
		tchk += now() - t;
		nchk += BENCH_AREAS;

		t = now();
		for (uint32 i = 0; i < n; i++)
			sink += qf_remove(&g, shuffled[i].area, shuffled[i].q,
							  shuffled[i].r, 1);
		tdel += now() - t;
		nops += n;
	}
	if (sink == 0)
		printf("?");
	printf("  page r=%-2d (home %u, slack %u), filling to 75%%: insert %.1f M/s;"
		   " at 75%%: successful lookup %.1f M/s, random lookup %.1f M/s,"
		   " iterate %.0f M/s, qf_area_check %.1f us/area;"
		   " removing all: %.1f M/s\n",
		   rbits, g.nhome, g.nslack, nops / tins / 1e6, nops / thit / 1e6,
		   nops / trnd / 1e6, nops / titer / 1e6, tchk / nchk * 1e6,
		   nops / tdel / 1e6);
	free(areas);
	free(keys);
	free(shuffled);
	free(probes);
}

int
main(int argc, char **argv)
{
	int			rbits[] = {4, 8, 12, 20};
	Workload	w = {true, 10000, 250};
	Workload	exact = {false, 10000, 250};
	double		t0 = now();
	QfGeom		g;
	int			rounds = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	scratch = malloc(1 << 20);
	if (argc > 1 && strcmp(argv[1], "bench") == 0)
	{
		/* only the (informational) throughput numbers */
		for (int r = 4; r <= 32; r += 4)
			bench(r);
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "soak") == 0)
	{
		/* `qf_test soak N`: N rounds of the randomized workloads */
		rounds = atoi(argv[2]);
		rng_state = (uint64) time(NULL);
		printf("soak: %d rounds, seed %llu\n", rounds,
			   (unsigned long long) rng_state);
	}
	test_hash_helpers();
	test_edges();
	test_check_reference();

	printf("page geometries (%d-byte areas): rbits:home+slack\n ", PAGE_AREA);
	for (int r = 1; r <= 32; r++)
	{
		if (!qf_geom_init(&g, r, PAGE_AREA))
			FAIL("no geometry");
		printf(" %2d:%u+%u", r, g.nhome, g.nslack);
		if (r % 8 == 0)
			printf("\n%s", r < 32 ? " " : "");
	}

	for (int round = 0; round < rounds; round++)
	{
		printf("randomized workloads (fill to 50/75/90/95%% and until full, churn, "
			   "drain)\n");
		for (int i = 0; i < (int) lengthof(rbits); i++)
		{
			char		name[64];

			if (!qf_geom_init(&g, rbits[i], PAGE_AREA))
				FAIL("no geometry");
			snprintf(name, sizeof(name), "page r=%d", rbits[i]);
			run_workload(&g, &w, name);
		}
		{
			/* small areas, odd sizes, tiny slack: many boundary cases */
			struct
			{
				int			s,
							r;
				uint32		slack;
			}			small[] = {
				{6, 8, 0}, {6, 1, 3}, {7, 3, 64}, {8, 12, 5}, {9, 20, 64},
				{5, 32, 2}, {8, 57, 40}, {10, 4, 1}, {4, 60, 64}, {1, 7, 70},
			};

			for (int i = 0; i < (int) lengthof(small); i++)
			{
				char		name[64];

				if (!qf_geom_init_slots(&g, (uint32) 1 << small[i].s, small[i].r,
										small[i].slack,
										1 << 20))
					FAIL("no geometry");
				snprintf(name, sizeof(name), "s=%d r=%d slack=%u", small[i].s,
						 small[i].r, small[i].slack);
				run_workload(&g, &w, name);
			}
		}
		if (!qf_geom_init(&g, 12, PAGE_AREA))
			FAIL("no geometry");
		run_workload(&g, &exact, "page r=12, exact totals");
	}
	if (rounds != 1)
	{
		printf("soak done in %.1fs\n", now() - t0);
		return 0;
	}

	printf("merge\n");
	test_merge(8);
	test_merge(12);
	test_merge(20);
	printf("split (resize by one bit)\n");
	test_split(8);
	test_split(12);
	test_split(20);
	test_split(2);

	measure_full();

	printf("throughput (informational, %d areas of %d bytes, random order)\n",
		   BENCH_AREAS, PAGE_AREA);
	bench(8);
	bench(12);
	bench(20);

	printf("all quotient filter tests passed in %.1fs\n", now() - t0);
	return 0;
}
