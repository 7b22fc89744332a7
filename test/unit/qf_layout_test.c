/*-------------------------------------------------------------------------
 *
 * qf_layout_test.c
 *	  Unit tests of the quotient filter area layout (src/qf/qf.h): slots
 *	  and runs at every word boundary of the bit arrays, at the end of the
 *	  home slots and of the slack, for home slot counts that are not powers
 *	  of two and remainders of 1 to 60 bits; counter digits in the folded
 *	  encoding (continuation without shifted), growing and shrinking counts,
 *	  deletes and merges, each step checked against a plain reference.
 *	  qf_test.c covers random workloads; this file covers the positions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "qf.h"
#include "unit_test.h"

/* port.h maps these to libpgport's versions, which this program lacks */
#undef printf
#undef fprintf
#undef snprintf
#undef qsort

static uint64 rng_state = UINT64CONST(0x5EED5EED12345678);

static uint64
rng(void)
{
	return splitmix64(&rng_state);
}

static uint64
sat_add(uint64 a, uint64 b)
{
	return a > PG_UINT64_MAX - b ? PG_UINT64_MAX : a + b;
}

/* Counter digits of count c: base-2^rbits digits of c - 1. */
static uint32
ndigits(uint64 c, int rbits)
{
	uint32		d = 0;

	for (c = c - 1; c > 0; c = rbits >= 64 ? 0 : c >> rbits)
		d++;
	return d;
}

/* ------------------------------------------------------------ reference */

typedef struct RefItem
{
	uint32		q;
	uint64		r;
	uint64		c;
} RefItem;

#define MAX_ITEMS	256

typedef struct Ref
{
	RefItem		it[MAX_ITEMS];
	int			n;
	uint64		total;			/* saturating and sticky, like the header */
} Ref;

static int
ref_find(const Ref *ref, uint32 q, uint64 r)
{
	for (int i = 0; i < ref->n; i++)
		if (ref->it[i].q == q && ref->it[i].r == r)
			return i;
	return -1;
}

static void
ref_add(Ref *ref, uint32 q, uint64 r, uint64 c)
{
	int			i = ref_find(ref, q, r);

	if (i < 0)
	{
		if (ref->n >= MAX_ITEMS)
			FAIL("reference full");
		i = ref->n++;
		ref->it[i].q = q;
		ref->it[i].r = r;
		ref->it[i].c = 0;
	}
	ref->it[i].c = sat_add(ref->it[i].c, c);
	ref->total = sat_add(ref->total, c);
}

static void
ref_sub(Ref *ref, uint32 q, uint64 r, uint64 c)
{
	int			i = ref_find(ref, q, r);

	if (i < 0)
		return;
	c = Min(c, ref->it[i].c);
	ref->it[i].c -= c;
	if (ref->total != PG_UINT64_MAX)
		ref->total -= c;
	if (ref->it[i].c == 0)
		ref->it[i] = ref->it[--ref->n];
}

static int
cmp_refitem(const void *a, const void *b)
{
	const RefItem *x = a;
	const RefItem *y = b;

	if (x->q != y->q)
		return x->q < y->q ? -1 : 1;
	return x->r < y->r ? -1 : (x->r > y->r ? 1 : 0);
}

static bool
bit_at(const char *area, uint32 off, uint32 i)
{
	uint64		w;

	memcpy(&w, area + off + (Size) (i / 64) * 8, 8);
	return (w >> (i % 64)) & 1;
}

static char *scratch;

/*
 * Everything the area must hold against the reference: the full check,
 * iteration in order, every count, the header counters, exactly as many
 * slots in the counter state as the counts have digits (and none outside
 * runs), and the canonical layout the builder writes.
 */
static void
check(const QfGeom *g, const char *area, Ref *ref, const char *what)
{
	const char *msg;
	QfIter		iter;
	QfStats		st;
	QfBuilder	b;
	uint32		q;
	uint64		r,
				c;
	int			k = 0;
	uint64		used = 0;
	uint64		digits = 0;
	uint64		cnt_slots = 0;

	if (!qf_area_check(g, area, &msg))
		FAIL("%s: qf_area_check: %s", what, msg);
	qsort(ref->it, ref->n, sizeof(RefItem), cmp_refitem);
	qf_iter_init(&iter, g, area);
	while (qf_iter_next(&iter, &q, &r, &c))
	{
		if (k >= ref->n || q != ref->it[k].q || r != ref->it[k].r ||
			c != ref->it[k].c)
			FAIL("%s: iteration item %d is (%u, %llu) x %llu", what, k, q,
				 (unsigned long long) r, (unsigned long long) c);
		k++;
	}
	if (k != ref->n)
		FAIL("%s: %d items iterated, %d expected", what, k, ref->n);
	for (int i = 0; i < ref->n; i++)
	{
		const RefItem *it = &ref->it[i];

		if (qf_count(g, area, it->q, it->r) != it->c)
			FAIL("%s: count of (%u, %llu) is %llu, expected %llu", what,
				 it->q, (unsigned long long) it->r,
				 (unsigned long long) qf_count(g, area, it->q, it->r),
				 (unsigned long long) it->c);
		digits += ndigits(it->c, g->rbits);
		used += 1 + ndigits(it->c, g->rbits);
	}
	for (uint32 i = 0; i < g->nslots; i++)
		if (g->legacy ? bit_at(area, g->cnt_off, i) :
			bit_at(area, g->cont_off, i) && !bit_at(area, g->shf_off, i))
			cnt_slots++;
	if (cnt_slots != digits)
		FAIL("%s: %llu slots in the counter state, %llu digits", what,
			 (unsigned long long) cnt_slots, (unsigned long long) digits);
	qf_area_stats(g, area, &st);
	if (st.nitems != (uint32) ref->n || st.nused != used ||
		st.total_count != ref->total)
		FAIL("%s: header counters are off", what);
	qf_builder_init(&b, g, scratch);
	for (int i = 0; i < ref->n; i++)
		if (qf_builder_add(&b, ref->it[i].q, ref->it[i].r, ref->it[i].c) != QF_OK)
			FAIL("%s: the builder cannot hold what the area holds", what);
	if (memcmp(area + QF_HEADER_SIZE, scratch + QF_HEADER_SIZE,
			   g->area_bytes - QF_HEADER_SIZE) != 0)
		FAIL("%s: layout differs from the builder's", what);
}

/*
 * Insert through qf_insert, mirroring in ref; QF_FULL must leave the area
 * byte for byte unchanged.
 */
static void
insert(const QfGeom *g, char *area, Ref *ref, uint32 q, uint64 r, uint64 c,
	   const char *what)
{
	char	   *before = malloc(g->area_bytes);
	QfStatus	st;

	memcpy(before, area, g->area_bytes);
	st = qf_insert(g, area, q, r, c);
	if (st == QF_OK)
		ref_add(ref, q, r, c);
	else if (st != QF_FULL)
		FAIL("%s: insert of (%u, %llu) x %llu: status %d", what, q,
			 (unsigned long long) r, (unsigned long long) c, (int) st);
	else if (memcmp(before, area, g->area_bytes) != 0)
		FAIL("%s: QF_FULL changed the area", what);
	free(before);
	check(g, area, ref, what);
}

/* Home slot counts: below, at and past word boundaries, and odd ones. */
static const uint32 homes[] = {2, 63, 64, 65, 100, 127, 128, 129, 191, 1000};
static const int rbitss[] = {1, 2, 3, 5, 7, 8, 12, 13, 20, 31, 33, 47, 60};

/*
 * For every home count and remainder size, a run at each quotient around
 * the word boundaries and the end of the home slots, with counts whose
 * digits cross the boundaries, neighbours on both sides so that runs are
 * shifted, then counts grown and shrunk by a digit, and everything
 * removed in a random order down to an empty area.
 */
static void
test_positions(void)
{
	uint64		counts[] = {1, 2, 0, 0, 5, PG_UINT64_MAX, 1000000007};
	int			cases = 0;
	int			full = 0;

	for (int hi = 0; hi < (int) lengthof(homes); hi++)
		for (int ri = 0; ri < (int) lengthof(rbitss); ri++)
		{
			uint32		nhome = homes[hi];
			int			rb = rbitss[ri];
			uint32		nslack = 24 + (uint32) (rng() % 48);
			QfGeom		g;
			uint32		qs[] = {0, 1, 61, 62, 63, 64, 65, 126, 127, 128,
			nhome - 2, nhome - 1};
			char	   *area;
			char	   *empty;

			if (!qf_geom_init_slots(&g, nhome, rb, nslack, 1 << 20))
				FAIL("no geometry for %u home slots, %d bits", nhome, rb);
			area = malloc(g.area_bytes);
			empty = malloc(g.area_bytes);
			qf_area_init(&g, empty);
			counts[2] = rb < 64 ? (UINT64CONST(1) << rb) : 3;
			counts[3] = rb < 63 ? (UINT64CONST(1) << rb) + 1 : 4;
			for (int qi = 0; qi < (int) lengthof(qs); qi++)
			{
				uint32		q0 = qs[qi];
				Ref			ref = {0};
				RefItem		before[MAX_ITEMS];
				int			n0;
				char		what[96];
				int			nr = rb >= 3 ? 5 : (1 << rb);

				if (q0 >= nhome)
					continue;
				snprintf(what, sizeof(what), "home %u slack %u r %d q %u",
						 nhome, g.nslack, rb, q0);
				qf_area_init(&g, area);
				/* the run itself, then a run after it and one before it */
				for (int j = 0; j < nr; j++)
					insert(&g, area, &ref, q0, (uint64) (nr - 1 - j) & qf_mask(rb),
						   counts[(qi + j) % lengthof(counts)], what);
				if (q0 + 1 < nhome)
					for (int j = 0; j < Min(nr, 3); j++)
						insert(&g, area, &ref, q0 + 1, (uint64) j & qf_mask(rb),
							   j + 1, what);
				if (q0 > 0)
					for (int j = 0; j < Min(nr, 2); j++)
						insert(&g, area, &ref, q0 - 1, (uint64) j & qf_mask(rb),
							   counts[(qi + 3 * j) % lengthof(counts)], what);

				/* grow every count by 2^rbits (a digit more, if room) and back */
				n0 = ref.n;
				memcpy(before, ref.it, sizeof(RefItem) * n0);
				for (int i = 0; i < n0; i++)
				{
					RefItem		it = before[i];
					uint64		now;

					insert(&g, area, &ref, it.q, it.r, UINT64CONST(1) << rb, what);
					now = ref.it[ref_find(&ref, it.q, it.r)].c;
					if (now == it.c)
					{
						full += it.c != PG_UINT64_MAX;
						continue;
					}
					if (qf_remove(&g, area, it.q, it.r, now - it.c) != now - it.c)
						FAIL("%s: remove of the added copies", what);
					ref_sub(&ref, it.q, it.r, now - it.c);
					check(&g, area, &ref, what);
				}
				/* shrink counts to 1 (fewer digits), then delete */
				for (int i = 0; i < ref.n; i++)
				{
					RefItem		it = ref.it[i];

					if (it.c > 1)
					{
						if (qf_remove(&g, area, it.q, it.r, it.c - 1) != it.c - 1)
							FAIL("%s: partial remove", what);
						ref_sub(&ref, it.q, it.r, it.c - 1);
						check(&g, area, &ref, what);
					}
				}
				while (ref.n > 0)
				{
					RefItem		it = ref.it[rng() % ref.n];
					uint64		c = it.c;

					if (qf_remove(&g, area, it.q, it.r, PG_UINT64_MAX) != c)
						FAIL("%s: remove all", what);
					ref_sub(&ref, it.q, it.r, c);
					check(&g, area, &ref, what);
				}
				/* all but total_count, which stays saturated (qf.h) */
				if (memcmp(area, empty, offsetof(QfAreaHeader, total_count)) != 0 ||
					memcmp(area + QF_HEADER_SIZE, empty + QF_HEADER_SIZE,
						   g.area_bytes - QF_HEADER_SIZE) != 0)
					FAIL("%s: emptied area differs from a fresh one", what);
				cases++;
			}
			free(area);
			free(empty);
		}
	printf("  positions: %d cases over %d home counts x %d remainder sizes ok"
		   " (%d counts without room for another digit)\n",
		   cases, (int) lengthof(homes), (int) lengthof(rbitss), full);
}

/*
 * Merges of areas with runs and counts around the word boundaries: the
 * result holds the summed multiset in the canonical layout.
 */
static void
test_merges(void)
{
	int			merged = 0;

	for (int hi = 0; hi < (int) lengthof(homes); hi++)
		for (int ri = 0; ri < (int) lengthof(rbitss); ri += 2)
		{
			QfGeom		g;
			int			rb = rbitss[ri];
			char	   *a;
			char	   *b;
			char	   *out;
			Ref			ra = {0};
			Ref			rsum = {0};
			char		what[64];
			QfStatus	st;

			if (!qf_geom_init_slots(&g, homes[hi], rb, QF_SLACK_FILL,
									qf_area_size(rb, homes[hi] * 2 + 64)))
				FAIL("no geometry");
			a = malloc(g.area_bytes);
			b = malloc(g.area_bytes);
			out = malloc(g.area_bytes);
			snprintf(what, sizeof(what), "merge home %u r %d", homes[hi], rb);
			qf_area_init(&g, a);
			qf_area_init(&g, b);
			for (int i = 0; i < (int) Min(40, homes[hi]); i++)
			{
				uint32		q = (uint32) (rng() % Min(homes[hi], 130));
				uint64		r = rng() & qf_mask(rb);
				uint64		c = rng() % 4 == 0 ? rng() >> (rng() % 64) : 1;

				if (c == 0)
					c = 1;
				if (qf_insert(&g, i % 2 ? a : b, q, r, c) == QF_OK)
				{
					if (i % 2)
						ref_add(&ra, q, r, c);
					ref_add(&rsum, q, r, c);
				}
			}
			check(&g, a, &ra, what);
			st = qf_merge_areas(&g, a, b, out);
			if (st == QF_OK)
			{
				check(&g, out, &rsum, what);
				merged++;
			}
			else if (st != QF_FULL)
				FAIL("%s: status %d", what, (int) st);
			free(a);
			free(b);
			free(out);
		}
	printf("  merges: %d merged areas ok\n", merged);
}

/*
 * The folded counter state where no counter may be: after an empty slot,
 * or as a run's first slot, is caught by qf_area_check; so is a
 * continuation remainder turned into a digit (the header counts disagree).
 */
static void
test_counter_state_damage(void)
{
	QfGeom		g;
	char	   *area;
	const char *msg;
	uint64		w;

	if (!qf_geom_init_slots(&g, 100, 8, 40, 1 << 20))
		FAIL("no geometry");
	area = malloc(g.area_bytes);

	/* a counter state in an empty slot (slot 70: continuation only) */
	qf_area_init(&g, area);
	if (qf_insert(&g, area, 10, 5, 1) != QF_OK)
		FAIL("insert");
	memcpy(&w, area + g.cont_off + 8, 8);
	w |= UINT64CONST(1) << 6;
	memcpy(area + g.cont_off + 8, &w, 8);
	if (qf_area_check(&g, area, &msg))
		FAIL("a counter after an empty slot is accepted");

	/* a remainder of a run turned into a digit (shifted cleared) */
	qf_area_init(&g, area);
	if (qf_insert(&g, area, 63, 5, 1) != QF_OK ||
		qf_insert(&g, area, 63, 9, 1) != QF_OK ||
		!bit_at(area, g.cont_off, 64) || !bit_at(area, g.shf_off, 64))
		FAIL("the second remainder is not a shifted continuation in slot 64");
	memcpy(&w, area + g.shf_off + 8, 8);
	w &= ~UINT64CONST(1);
	memcpy(area + g.shf_off + 8, &w, 8);
	if (qf_area_check(&g, area, &msg))
		FAIL("a remainder turned into a digit is accepted");
	free(area);
	printf("  counter state damage detected\n");
}

/*
 * Geometry: qf_geom_init takes the most home slots that leave the slack
 * of qf_min_slack; any count of home slots is accepted in range.
 */
static void
test_geometry(void)
{
	QfGeom		g;

	for (int r = QF_MIN_RBITS; r <= QF_MAX_RBITS; r++)
	{
		if (!qf_geom_init(&g, r, QF_PAGE_AREA_BYTES))
			FAIL("no page geometry for %d bits", r);
		if (g.nslack < qf_min_slack(g.nhome) ||
			g.area_bytes > QF_PAGE_AREA_BYTES ||
			qf_area_size(r, g.nhome + 1 + qf_min_slack(g.nhome + 1)) <=
			QF_PAGE_AREA_BYTES)
			FAIL("page geometry for %d bits is not the largest", r);
		if (g.nhome >= 3072 && g.nslack < QF_PAGE_SLACK)
			FAIL("a page of %u home slots has only %u slack slots", g.nhome,
				 g.nslack);
	}
	if (qf_geom_init_slots(&g, 1, 8, 10, 1 << 20) ||
		qf_geom_init_slots(&g, QF_MAX_HOME + 1, 8, 10, UINT64CONST(1) << 40) ||
		!qf_geom_init_slots(&g, 12345, 7, 3, 1 << 20) || g.nhome != 12345 ||
		g.nslots != 12348)
		FAIL("home slot range");
	printf("  geometry: a page holds");
	for (int r = 6; r <= 12; r += 3)
	{
		if (!qf_geom_init(&g, r, QF_PAGE_AREA_BYTES))
			FAIL("no geometry");
		printf(" %u+%u (r = %d)", g.nhome, g.nslack, r);
	}
	printf(" home+slack slots\n");
}

/*
 * The earlier layout (qf_legacy.c): the geometries earlier builds chose
 * (as their unit test printed them for 8160-byte areas), random contents
 * with counts and deletes checked as above, and the copy of every such
 * area into the current layout with the same home slots.
 */
static void
test_legacy(void)
{
	/* rbits:home+slack of earlier builds, 8160-byte areas */
	static const uint32 old[][3] = {
		{1, 8192, 4800}, {3, 8192, 1088}, {4, 4096, 4032}, {6, 4096, 2389},
		{9, 4096, 896}, {11, 4096, 232}, {12, 2048, 2005}, {20, 2048, 652},
		{25, 2048, 192}, {26, 1024, 1142}, {32, 1024, 776},
	};
	int			rbits[] = {3, 8, 12, 20};
	const char *msg;

	for (int i = 0; i < (int) lengthof(old); i++)
	{
		QfGeom		g;

		if (!qf_geom_init_legacy(&g, (int) old[i][0], 8160) ||
			g.nhome != old[i][1] || g.nslack != old[i][2] || !g.legacy ||
			g.cnt_off != g.shf_off + g.nwords * 8 ||
			g.rem_off != g.cnt_off + g.nwords * 8)
			FAIL("legacy geometry for %u bits is %u+%u, was %u+%u", old[i][0],
				 g.nhome, g.nslack, old[i][1], old[i][2]);
	}
	for (int i = 0; i < (int) lengthof(rbits); i++)
	{
		QfGeom		gl;
		QfGeom		gn;
		char	   *area;
		char	   *conv;
		Ref			ref = {0};
		QfBuilder	b;
		QfIter		it;
		uint32		q;
		uint64		r,
					c;
		char		what[64];

		snprintf(what, sizeof(what), "legacy r %d", rbits[i]);
		if (!qf_geom_init_legacy(&gl, rbits[i], QF_PAGE_AREA_BYTES) ||
			!qf_geom_init_slots(&gn, gl.nhome, rbits[i], QF_SLACK_FILL,
								QF_PAGE_AREA_BYTES) ||
			qf_geom_init_slots_legacy(&gn, 3000, rbits[i], 10, 1 << 20))
			FAIL("%s: geometries", what);
		area = malloc(gl.area_bytes);
		conv = malloc(gn.area_bytes);
		qf_area_init(&gl, area);
		if (!qf_area_check(&gl, area, &msg) || qf_area_check(&gn, area, &msg))
			FAIL("%s: an empty legacy area is not told apart", what);
		/* up to MAX_ITEMS fingerprints clustered on a few hundred quotients */
		for (int k = 0; k < MAX_ITEMS - 16; k++)
		{
			uint32		qq = (uint32) (rng() % 300);
			uint64		rr = rng() & qf_mask(rbits[i]);
			uint64		cc = rng() % 3 == 0 ? 1 + (rng() >> (rng() % 64)) : 1;

			insert(&gl, area, &ref, qq, rr, cc, what);
			if (k % 5 == 4 && ref.n > 0)
			{
				RefItem		x = ref.it[rng() % ref.n];
				uint64		n = 1 + rng() % x.c;

				if (qf_remove(&gl, area, x.q, x.r, n) != n)
					FAIL("%s: remove", what);
				ref_sub(&ref, x.q, x.r, n);
				check(&gl, area, &ref, what);
			}
		}
		/* copied into the current layout, then checked there */
		qf_builder_init(&b, &gn, conv);
		qf_iter_init(&it, &gl, area);
		while (qf_iter_next(&it, &q, &r, &c))
			if (qf_builder_add(&b, q, r, c) != QF_OK)
				FAIL("%s: copy into the current layout", what);
		check(&gn, conv, &ref, what);
		free(area);
		free(conv);
	}
	printf("  legacy layout: geometries, contents and copies ok\n");
}

/*
 * The fingerprint space M = mult * 2^exp (qf.h): y is monotone in the
 * hash and below M; the hash standing for y maps back to y and is the
 * smallest such hash; a level of twice the home slots and one remainder bit
 * less has the same y; the split by pages of any number of home slots and
 * the join are inverse, across page boundaries; mult = 1 is the bit split.
 */
static void
test_space(void)
{
	static const uint64 mults[] = {1, 3, 5, 151, 823, 1023, 52723, 90601};
	static const uint32 homes[] = {2, 3, 11, 63, 64, 65, 1053, 4320, 7008};

	for (int mi = 0; mi < (int) lengthof(mults); mi++)
	{
		uint64		mult = mults[mi];

		if (mult > 1 && (mult & 1) == 0)
			continue;
		for (int exp = 1; exp <= 64; exp++)
		{
			uint64		prev_h = 0;
			uint64		prev_y = 0;

			if (!qf_space_valid(mult, exp))
				continue;
			for (int i = 0; i < 2000; i++)
			{
				uint64		h = i < 4 ? (uint64[]) {0, 1, PG_UINT64_MAX, PG_UINT64_MAX - 1}[i] : rng();
				uint64		y = qf_space_y(h, mult, exp);
				uint64		back = qf_space_hash(y, mult, exp);

				if (mult > 1 && y >= mult << exp)
					FAIL("y " UINT64_FORMAT " out of the space " UINT64_FORMAT " * 2^%d", y, mult, exp);
				if (back > h || qf_space_y(back, mult, exp) != y ||
					(back > 0 && qf_space_y(back - 1, mult, exp) == y))
					FAIL("hash of y " UINT64_FORMAT " (mult " UINT64_FORMAT ", exp %d) is not its smallest", y, mult, exp);
				if (qf_space_fp(h, mult, exp) != back)
					FAIL("qf_space_fp differs from the hash of y");
				if (i > 4 && ((h > prev_h && y < prev_y) || (h < prev_h && y > prev_y)))
					FAIL("y is not monotone in the hash");
				prev_h = h;
				prev_y = y;
				if (mult == 1 && exp < 64 && y != h >> (64 - exp))
					FAIL("mult 1 is not the top %d bits", exp);
				for (int hi = 0; hi < (int) lengthof(homes); hi++)
				{
					for (int rbits = 1; rbits <= Min(exp, 20); rbits += 3)
					{
						uint64		page;
						uint64		page2;
						uint32		q;
						uint32		q2;
						uint64		r;
						uint64		r2;

						qf_space_split(y, rbits, homes[hi], &page, &q, &r);
						if (q >= homes[hi] ||
							qf_space_join(page, q, r, rbits, homes[hi]) != y)
							FAIL("split/join of y at %u home slots per page", homes[hi]);
						/* doubled pages of the same home slots, one bit less */
						if (rbits > 1)
						{
							qf_space_split(y, rbits - 1, homes[hi], &page2, &q2, &r2);
							if (page2 / 2 != page)
								FAIL("a grown level's page is not within its page");
						}
					}
				}
			}
			/* page boundaries: the last and first fingerprint of a page */
			for (int hi = 0; hi < (int) lengthof(homes); hi++)
			{
				uint64		y = ((uint64) homes[hi] << 1);	/* page 1 quotient 0, rbits 1 */
				uint64		page;
				uint32		q;
				uint64		r;

				if (mult > 1 && y >= mult << exp)
					continue;
				if (mult == 1 && exp < 64 && y >> exp != 0)
					continue;
				qf_space_split(y, 1, homes[hi], &page, &q, &r);
				if (page != 1 || q != 0 || r != 0)
					FAIL("first fingerprint of page 1");
				qf_space_split(y - 1, 1, homes[hi], &page, &q, &r);
				if (page != 0 || q != homes[hi] - 1 || r != 1)
					FAIL("last fingerprint of page 0");
			}
		}
	}
	printf("fingerprint space: ok\n");
}

/*
 * Sizing to a capacity: the base covers the capacity at its load (that of
 * the rate 2^-rbits: 0.97 for short remainders, else 0.95) with
 * full areas and P of at most 10 significant bits; the canonical shape of
 * its space at the base's remainder bits is the base itself; every shape
 * of the space, grown remainder bit by remainder bit, holds M / 2^rbits
 * home slots in areas that fit; a power-of-two space gives power-of-two
 * areas (the earlier qfilter geometry).
 */
static void
test_sizing(void)
{
	static const int64 caps[] = {1, 2, 100, 1000, 4000, 4321, 10000, 100000,
	1000000, 12345678, 1000000000};

	for (int ci = 0; ci < (int) lengthof(caps); ci++)
	{
		for (int rbits = 1; rbits <= 20; rbits++)
		{
			uint64		pages;
			uint32		nhome;
			uint64		mult;
			int			exp;
			QfGeom		g;
			double		load = rbits <= QF_SHORT_RBITS ? QF_MAX_LOAD_SHORT : QF_MAX_LOAD;

			if (!qf_sized_base(caps[ci], load, rbits, QF_PAGE_AREA_BYTES, 27,
							   &pages, &nhome))
				FAIL("no base for capacity " INT64_FORMAT " at %d bits", caps[ci], rbits);
			if (!qf_geom_init(&g, rbits, QF_PAGE_AREA_BYTES) || nhome > g.nhome ||
				(pages > 1 && nhome != g.nhome) ||
				load * (double) pages * nhome < (double) caps[ci] ||
				pg_leftmost_one_pos64(pages) - pg_rightmost_one_pos64(pages) >= QF_SIZED_SIG_BITS)
				FAIL("base of capacity " INT64_FORMAT " at %d bits: " UINT64_FORMAT " x %u",
					 caps[ci], rbits, pages, nhome);
			qf_space_of(pages * nhome, rbits, &mult, &exp);
			for (int r = rbits; r >= 1; r--)
			{
				uint32		h;
				uint64		np;

				if (!qf_space_shape(mult, exp, r, QF_PAGE_AREA_BYTES,
									(uint64) 1 << 27, &h, &np))
				{
					if (r == rbits)
						FAIL("no shape of the base's space");
					break;
				}
				if (r == rbits && (np != pages || h != nhome))
					FAIL("shape " UINT64_FORMAT " x %u is not the base " UINT64_FORMAT " x %u",
						 np, h, pages, nhome);
				if (!qf_geom_init(&g, r, QF_PAGE_AREA_BYTES) || h > g.nhome ||
					qf_space_join(np - 1, h - 1, qf_mask(r), r, h) !=
					(mult << exp) - 1)
					FAIL("shape at %d bits does not cover the space", r);
			}
		}
	}
	for (int exp = 2; exp <= 40; exp++)
		for (int r = 1; r < exp && r <= 20; r++)
		{
			uint32		h;
			uint64		np;

			if (qf_space_shape(1, exp, r, QF_PAGE_AREA_BYTES, (uint64) 1 << 16,
							   &h, &np) &&
				((h & (h - 1)) != 0 || (np & (np - 1)) != 0))
				FAIL("power-of-two space at %d bits gives %u x " UINT64_FORMAT, r, h, np);
		}
	printf("sizing: ok\n");
}

/*
 * Areas trimmed to their home slots (the qfilter type's): whole 24-byte
 * blocks, at most a page area up to a page's home slots, holding at least
 * the minimum slack, and an area of these bytes takes every slot they
 * hold (a slot more would not fit).  A page's home slots trimmed keep its
 * slack where it is the minimum (192 from 3072 home slots on).
 */
static void
test_trimmed(void)
{
	for (int r = QF_MIN_RBITS; r <= QF_MAX_RBITS; r++)
	{
		QfGeom		page;

		if (!qf_geom_init(&page, r, QF_PAGE_AREA_BYTES))
			FAIL("no page area at %d bits", r);
		for (uint32 h = QF_MIN_HOME; h <= page.nhome; h++)
		{
			Size		bytes = qf_trimmed_area_bytes(h, r);
			QfGeom		g;

			if (bytes % 24 != 0 || bytes > QF_PAGE_AREA_BYTES ||
				!qf_geom_init_slots(&g, h, r, QF_SLACK_FILL, bytes) ||
				g.nslack < qf_min_slack(h) || g.area_bytes > bytes ||
				qf_area_size(r, g.nslots + 1) <= bytes)
				FAIL("trimmed area of %u home slots at %d bits: %zu bytes", h, r, bytes);
			if (h == page.nhome && page.nhome >= 3072 &&
				(bytes != QF_PAGE_AREA_BYTES - (QF_PAGE_AREA_BYTES - page.area_bytes) / 24 * 24 ||
				 g.nslots != page.nslots))
				FAIL("trimmed page area at %d bits: %zu bytes, %u slots (page: %u)",
					 r, bytes, g.nslots, page.nslots);
		}
	}
	printf("  trimmed areas: every home count up to a page's at every remainder size ok\n");
}

/*
 * Levels below a sized base (qf_nested_shape, the buffered and cascade
 * filters' smaller levels): each fits its area, its pages cover the space
 * and each page of a larger level lies within one page of every smaller
 * one (the page of y at level j is the base page of y >> b); with the base
 * aligned to some power of two up to 2^8, the levels reach one page.
 */
static void
test_nested(void)
{
	static const int64 caps[] = {1, 100, 1000, 4321, 100000, 1000000,
	12345678, 1000000000};
	uint64		rng = 12345;

	for (int ci = 0; ci < (int) lengthof(caps); ci++)
	{
		for (int rbits = 1; rbits <= 24; rbits++)
		{
			bool		reached = false;

			for (int a = 1; a <= 8 && !reached; a++)
			{
				uint64		pages;
				uint32		nhome;
				uint64		mult;
				int			exp;
				uint64		m;
				uint64		prev_pages;
				uint32		prev_nhome;
				QfGeom		g;

				if (!qf_sized_base_aligned(caps[ci], QF_MAX_LOAD, rbits,
										   QF_PAGE_AREA_BYTES, 27,
										   (uint32) 1 << a, &pages, &nhome))
					FAIL("no aligned base for capacity " INT64_FORMAT " at %d bits",
						 caps[ci], rbits);
				if (nhome % ((uint32) 1 << a) != 0 ||
					!qf_geom_init(&g, rbits, QF_PAGE_AREA_BYTES) || nhome > g.nhome ||
					QF_MAX_LOAD * (double) pages * nhome < (double) caps[ci])
					FAIL("aligned base " UINT64_FORMAT " x %u at %d bits", pages, nhome, rbits);
				qf_space_of(pages * nhome, rbits, &mult, &exp);
				if (exp + pg_leftmost_one_pos64(mult) >= 63)
					continue;
				m = mult << exp;
				prev_pages = pages;
				prev_nhome = nhome;
				for (int j = 1; j <= 40; j++)
				{
					uint64		np;
					uint32		h;
					uint32		ratio;
					int			b;
					int			r = rbits + j;

					if (!qf_nested_shape(rbits, pages, nhome, j, QF_PAGE_AREA_BYTES,
										 &np, &h))
						break;
					/* h = nhome * 2^(b - j), the level's pages 2^b base pages wide */
					if (h < QF_MIN_HOME || !qf_geom_init(&g, r, QF_PAGE_AREA_BYTES) ||
						h > g.nhome || nhome % h != 0)
						FAIL("level %d below %u at %d bits: %u home slots", j, nhome, rbits, h);
					ratio = nhome / h;
					if ((ratio & (ratio - 1)) != 0 || pg_leftmost_one_pos32(ratio) > j)
						FAIL("level %d: ratio %u is not 2^(j - b)", j, ratio);
					b = j - pg_leftmost_one_pos32(ratio);
					if (np != (b >= 64 ? 1 : (pages + (UINT64CONST(1) << b) - 1) >> b) ||
						np > prev_pages || (2 * (uint64) h) % prev_nhome != 0)
						FAIL("level %d: " UINT64_FORMAT " pages of %u do not nest in " UINT64_FORMAT " of %u",
							 j, np, h, prev_pages, prev_nhome);
					if (r < 64 && ((np - 1) * h << r) >= m)
						FAIL("level %d has a page past the space", j);
					for (int i = 0; i < 200; i++)
					{
						uint64		y;
						uint64		p0,
									pj,
									rem;
						uint32		q0,
									qj;

						rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
						y = i < 2 ? (i == 0 ? 0 : m - 1) : (rng >> 1) % m;
						qf_space_split(y, rbits, nhome, &p0, &q0, &rem);
						qf_space_split(y, r, h, &pj, &qj, &rem);
						if (pj != (b >= 64 ? 0 : p0 >> b) || pj >= np ||
							qf_space_join(pj, qj, rem, r, h) != y)
							FAIL("y " UINT64_FORMAT " at level %d: page " UINT64_FORMAT ", base page " UINT64_FORMAT,
								 y, j, pj, p0);
					}
					prev_pages = np;
					prev_nhome = h;
					if (np == 1)
					{
						reached = true;
						break;
					}
				}
			}
			if (!reached && rbits + 27 <= QF_MAX_RBITS && caps[ci] < 100000000)
				FAIL("capacity " INT64_FORMAT " at %d bits: no alignment nests down to one page",
					 caps[ci], rbits);
		}
	}
	printf("nested levels: ok\n");
}

int
main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	scratch = malloc(1 << 20);
	printf("quotient filter layout\n");
	test_geometry();
	test_trimmed();
	test_counter_state_damage();
	test_positions();
	test_merges();
	test_legacy();
	test_space();
	test_sizing();
	test_nested();
	printf("all quotient filter layout tests passed\n");
	return 0;
}
