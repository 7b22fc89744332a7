/*-------------------------------------------------------------------------
 *
 * qf_repr_bench.c
 *	  Benchmark of the slot metadata representation of a quotient filter
 *	  area: ours (src/qf/qf.c: occupied, continuation and shifted bits per
 *	  slot, a counter digit marked continuation without shifted) against a rank/select quotient filter in the style of the
 *	  counting quotient filter (Pandey et al., SIGMOD 2017), in the same
 *	  page-sized areas.  It exists to justify the choice recorded in
 *	  docs/design.md ("Why three metadata bits and not rank/select").
 *
 * The rank/select variant ("RSQF" below) is written here for measurement
 * only.  Per area it has
 *	 occupieds	 bit q set iff some fingerprint has quotient q
 *	 runends	 bit i set iff slot i is the last slot of a run
 *	 offsets	 one uint16 per 64-slot block b: how many slots from 64b on
 *				 are taken by the runs of quotients < 64b
 *	 remainders	 packed rbits-wide, as ours
 * Runs are packed exactly as ours (a run starts at max(its quotient, end of
 * the previous run + 1), remainders sorted in a run), there is no
 * wrap-around, and an insert that would need a slot past the last slack
 * slot fails with QF_FULL and changes nothing: the page-local model of the
 * paged filters.  The paper's offsets are 8 bits; ours are 16 so that
 * none can overflow (an area has fewer than 65536 slots).  That costs 1/8
 * bit per slot and changes no page geometry for r = 1..32; the largest
 * offset seen is printed, and 8 bits would have held it.  It has no
 * counters: the CQF encodes counts inside the remainder slots, which adds
 * no metadata bit but a decoding step we leave out, so the RSQF numbers are
 * a lower bound on what a counting rank/select filter would cost.  Inserts
 * here never see a duplicate, so our qf_insert never writes counter slots
 * either.
 *
 * Workload: 64 areas of one page's data area (8160 bytes, ~0.5 MB in all,
 * the L2-resident setting of qf_test's bench), fingerprints from a
 * splitmix64 stream split as a paged filter splits a hash
 * (qf_fingerprint_split), each area filled round-robin with distinct
 * fingerprints up to a load (fraction of the home slots).  Per load we time
 *	 insert	   the inserts taking each area from load - 5% to load
 *			   (the cost at that load, not an average over the fill)
 *	 pos	   lookups of every stored fingerprint, in random order
 *	 neg	   lookups of as many random fingerprints that are absent
 * Both representations get the same fingerprints in the same order; which
 * one runs first alternates between repeats.  Times are this thread's CPU
 * time, so that time spent descheduled on a shared machine is not counted
 * (what other processes do to the caches still is).  After every repeat both
 * areas are decoded and compared with the sorted reference list (so no
 * false negative and no spurious member), the RSQF offsets are recomputed
 * from scratch and compared, and the hit counts of the timed lookups must
 * be n (positive) and 0 (negative) for both.  Any mismatch exits 1.
 *
 * Usage: qf_repr_bench [repeats]   (default 11; prints medians)
 * Built and run by `make -C test/unit repr-bench`, not part of `check`.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "qf.h"
#include "qf_words.h"
#include "unit_test.h"

/* port.h maps these to libpgport's versions, which we do not link */
#undef printf
#undef fprintf
#undef qsort

#define PAGE_AREA	8160		/* SS_PAGE_DATA_SIZE */
#define NAREAS		64
#define STEP		0.05		/* the timed insert window, in load */

static uint64 rng_state = UINT64CONST(0x5EED0F0F1234ABCD);

static uint64
rng(void)
{
	return splitmix64(&rng_state);
}

/*
 * This thread's CPU time: the machine is shared, and time spent
 * descheduled would otherwise land in whichever measurement it hits.
 */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------ word helpers */

#define ONES		UINT64CONST(0x0101010101010101)	/* 1 in every byte */

/* The number of one bits of each byte of x, in that byte. */
static inline uint64
byte_counts(uint64 x)
{
	x = x - ((x >> 1) & UINT64CONST(0x5555555555555555));
	x = (x & UINT64CONST(0x3333333333333333)) +
		((x >> 2) & UINT64CONST(0x3333333333333333));
	return (x + (x >> 4)) & UINT64CONST(0x0F0F0F0F0F0F0F0F);
}

/*
 * Position of the k-th (0-based) one bit of x, which has more than k ones.
 * Broadword, without pdep (not in the x86-64 baseline, and microcoded on
 * older AMD): byte counts, their prefix sums in one multiply, the byte
 * holding the bit by a bytewise compare against k, then at most 7 steps
 * inside that byte.
 */
static inline int
broadword_select64(uint64 x, int k)
{
	const uint64 highs = UINT64CONST(0x8080808080808080);
	uint64		prefix;
	uint64		le;
	int			byte;
	uint64		y;

	prefix = byte_counts(x) * ONES; /* byte i: ones in bytes 0..i */

	/*
	 * High bit of byte i of le set iff prefix_i <= k (all values < 128, so
	 * the bytewise subtraction never borrows across bytes).  The prefixes
	 * grow, so those bytes are the low ones, and the top byte (prefix =
	 * popcount > k) never qualifies.
	 */
	le = (((uint64) k * ONES) | highs) - prefix;
	byte = __builtin_ctzll(~le & highs) >> 3;
	k -= (int) (((prefix << 8) >> (byte * 8)) & 0xFF);
	y = (x >> (byte * 8)) & 0xFF;
	while (k-- > 0)
		y &= y - 1;
	return byte * 8 + __builtin_ctzll(y);
}

static inline bool
bit_get(const char *a, uint32 i)
{
	return (ld64(a + (Size) (i >> 6) * 8) >> (i & 63)) & 1;
}

static inline void
bit_put(char *a, uint32 i, bool v)
{
	char	   *p = a + (Size) (i >> 6) * 8;
	uint64		m = UINT64CONST(1) << (i & 63);

	st64(p, v ? (ld64(p) | m) : (ld64(p) & ~m));
}

/* n bits (1..64) at bit position pos */
static inline uint64
bits_get(const char *a, uint64 pos, int n)
{
	const char *p = a + (Size) (pos >> 6) * 8;
	int			off = (int) (pos & 63);
	uint64		v = ld64(p) >> off;

	if (off + n > 64)
		v |= ld64(p + 8) << (64 - off);
	return v & qf_mask(n);
}

static inline void
bits_put(char *a, uint64 pos, int n, uint64 v)
{
	char	   *p = a + (Size) (pos >> 6) * 8;
	int			off = (int) (pos & 63);
	uint64		m = qf_mask(n);

	v &= m;
	st64(p, (ld64(p) & ~(m << off)) | (v << off));
	if (off + n > 64)
		st64(p + 8, (ld64(p + 8) & ~(m >> (64 - off))) | (v >> (64 - off)));
}

/*
 * Move the bits [from, to) up by n (1..63) bits, a whole destination word
 * at a time from the top down, so every source word is read before it is
 * overwritten.  This is all an insert needs: it only ever shifts right.
 */
static void
bits_shift_up(char *a, uint64 from, uint64 to, int n)
{
	uint64		lo = from + n;
	uint64		hi = to + n;
	uint64		wlo;
	uint64		w;

	if (from >= to)
		return;
	wlo = lo >> 6;
	for (w = (hi - 1) >> 6;; w--)
	{
		uint64		cur = ld64(a + w * 8);
		uint64		v = cur << n;
		uint64		m = PG_UINT64_MAX;

		if (w > 0)
			v |= ld64(a + (w - 1) * 8) >> (64 - n);
		if (w == (hi - 1) >> 6)
			m &= qf_mask((int) ((hi - 1) & 63) + 1);
		if (w == wlo)
			m &= PG_UINT64_MAX << (lo & 63);
		st64(a + w * 8, (cur & ~m) | (v & m));
		if (w == wlo)
			break;
	}
}

/* First set bit in [from, limit), or limit. */
static inline uint32
next_set(const char *a, uint32 from, uint32 limit)
{
	uint32		w;
	uint64		x;

	if (from >= limit)
		return limit;
	w = from >> 6;
	x = ld64(a + (Size) w * 8) & (PG_UINT64_MAX << (from & 63));
	while (x == 0)
	{
		w++;
		if ((uint64) w * 64 >= limit)
			return limit;
		x = ld64(a + (Size) w * 8);
	}
	return Min(w * 64 + (uint32) __builtin_ctzll(x), limit);
}

/* The k-th (1-based) set bit at or after from, or limit. */
static inline uint32
select_from(const char *a, uint32 from, uint32 k, uint32 limit)
{
	uint32		w;
	uint64		x;

	if (from >= limit)
		return limit;
	w = from >> 6;
	x = ld64(a + (Size) w * 8) & (PG_UINT64_MAX << (from & 63));
	for (;;)
	{
		uint32		c = popcount64(x);

		if (k <= c)
			return Min(w * 64 + (uint32) broadword_select64(x, (int) k - 1), limit);
		k -= c;
		w++;
		if ((uint64) w * 64 >= limit)
			return limit;
		x = ld64(a + (Size) w * 8);
	}
}

/* --------------------------------------------- the rank/select filter */

typedef struct RsGeom
{
	int			slot_bits;
	int			rbits;
	uint32		nhome;
	uint32		nslack;
	uint32		nslots;
	uint32		nblocks;		/* 64-slot blocks = words per bit vector */
	uint32		rwords;
	uint32		occ_off;
	uint32		end_off;
	uint32		offs_off;
	uint32		rem_off;
	Size		area_bytes;
} RsGeom;

typedef struct RsArea
{
	char	   *occ;
	char	   *end;
	char	   *offs;
	char	   *rem;
	uint32		nhome;
	uint32		nslots;
	int			rbits;
} RsArea;

/* Same 32-byte header as ours, so that the space comparison is fair. */
static Size
rs_area_size(int rbits, uint32 nslots)
{
	uint64		nblocks = ((uint64) nslots + 63) / 64;
	uint64		rwords = ((uint64) nslots * rbits + 63) / 64;

	return QF_HEADER_SIZE + 2 * 8 * nblocks + TYPEALIGN(8, 2 * nblocks) +
		8 * rwords;
}

/* 2^slot_bits home slots, and every further slot that fits as slack */
static bool
rs_geom_init_slots(RsGeom *g, int slot_bits, int rbits, Size area_bytes)
{
	uint32		nhome = (uint32) 1 << slot_bits;
	uint32		n = nhome + qf_min_slack(nhome);

	if (rs_area_size(rbits, n) > area_bytes)
		return false;
	while (rs_area_size(rbits, n + 1) <= area_bytes)
		n++;
	memset(g, 0, sizeof(*g));
	g->slot_bits = slot_bits;
	g->rbits = rbits;
	g->nhome = nhome;
	g->nslots = n;
	g->nslack = n - nhome;
	g->nblocks = (n + 63) / 64;
	g->rwords = (uint32) (((uint64) n * rbits + 63) / 64);
	g->occ_off = QF_HEADER_SIZE;
	g->end_off = g->occ_off + 8 * g->nblocks;
	g->offs_off = g->end_off + 8 * g->nblocks;
	g->rem_off = g->offs_off + TYPEALIGN(8, 2 * g->nblocks);
	g->area_bytes = rs_area_size(rbits, n);
	return true;
}

/* The rule of qf_geom_init: most power-of-two home slots that fit */
static bool
rs_geom_init(RsGeom *g, int rbits, Size area_bytes)
{
	for (int s = QF_MAX_SLOT_BITS; s >= QF_MIN_SLOT_BITS; s--)
		if (rs_geom_init_slots(g, s, rbits, area_bytes))
			return true;
	return false;
}

static inline void
rs_area(RsArea *A, const RsGeom *g, char *area)
{
	A->occ = area + g->occ_off;
	A->end = area + g->end_off;
	A->offs = area + g->offs_off;
	A->rem = area + g->rem_off;
	A->nhome = g->nhome;
	A->nslots = g->nslots;
	A->rbits = g->rbits;
}

static inline uint32
off_get(const RsArea *A, uint32 b)
{
	uint16		v;

	memcpy(&v, A->offs + b * 2, sizeof(v));
	return v;
}

static inline void
off_put(RsArea *A, uint32 b, uint32 v)
{
	uint16		x = (uint16) v;

	memcpy(A->offs + b * 2, &x, sizeof(x));
}

static inline uint64
rem_get(const RsArea *A, uint32 i)
{
	return bits_get(A->rem, (uint64) i * A->rbits, A->rbits);
}

/*
 * First slot after the runs of all quotients <= j, or the start of j's
 * block if that is later: the block offset skips the runs of the quotients
 * before the block, then the runs of the k occupied quotients of the block
 * up to j end at the k-th run end from there (rank, then select).
 */
static inline uint32
rs_runs_end(const RsArea *A, uint32 j)
{
	uint32		b = j >> 6;
	uint32		base = b * 64 + off_get(A, b);
	int			k = popcount64(ld64(A->occ + (Size) b * 8) &
							   qf_mask((int) (j & 63) + 1));

	if (k == 0)
		return base;
	return select_from(A->end, base, (uint32) k, A->nslots) + 1;
}

/* Set bits in [from, to). */
static inline uint32
count_range(const char *a, uint32 from, uint32 to)
{
	uint32		n = 0;

	while (from < to)
	{
		uint32		wend = Min((from | 63) + 1, to);
		uint64		x = ld64(a + (Size) (from >> 6) * 8) >> (from & 63);

		n += popcount64(x & qf_mask((int) (wend - from)));
		from = wend;
	}
	return n;
}

/*
 * First empty slot at or after p, or nslots.
 *
 * Let pend(j) be the number of runs of quotients < j that have not ended
 * before slot j.  Slot j is empty iff pend(j) = 0 and j is not occupied,
 * and pend(j + 1) = pend(j) + occupied(j) - runend(j), a walk that only
 * goes down at run ends.  So a word (or byte) of slots with fewer run ends
 * than pend at its start cannot hold an empty slot and is skipped with
 * popcounts; only where the walk can reach 0 do we go slot by slot.
 *
 * The CQF reference code (find_first_empty_slot) instead loops "jump to
 * the end of the runs of the quotients up to j", a rank and a select per
 * step.  Written that way here it took 10-12 dependent steps per insert
 * at 95% load and made inserts 2.7 times slower than ours; this walk
 * brings that to about 1.6.  What remains is the slot-by-slot tail, which
 * ours does not have: there, one OR of three metadata words gives the empty
 * slots of 64 slots at once.
 */
static uint32
rs_find_empty(const RsArea *A, uint32 p)
{
	uint32		j = rs_runs_end(A, p);
	uint32		pend;

	if (j <= p)
		return p;

	/*
	 * Slots [p, j) are used, and the runs ending before j are exactly
	 * those of the quotients <= p: those of the quotients in (p, j) start
	 * at j or later, so all of them are pending.
	 */
	pend = count_range(A->occ, p + 1, j);
	while (j < A->nslots)
	{
		uint32		wend = Min((j | 63) + 1, A->nslots);
		uint64		m = qf_mask((int) (wend - j)) << (j & 63);
		uint64		occ = ld64(A->occ + (Size) (j >> 6) * 8) & m;
		uint64		end = ld64(A->end + (Size) (j >> 6) * 8) & m;
		uint64		oc = byte_counts(occ);
		uint64		ec = byte_counts(end);
		uint32		ne = (uint32) ((ec * ONES) >> 56);

		if (pend > ne)
		{
			pend += (uint32) ((oc * ONES) >> 56) - ne;
			j = wend;
			continue;
		}
		/* the walk may reach 0 in this word: the same test per byte */
		while (j < wend)
		{
			uint32		bend = Min((j | 7) + 1, wend);
			int			sh = (int) (j & 63) & ~7;

			ne = (uint32) ((ec >> sh) & 0xFF);
			if (pend > ne)
				pend += (uint32) ((oc >> sh) & 0xFF) - ne;
			else
			{
				for (; j < bend; j++)
				{
					uint64		bit = UINT64CONST(1) << (j & 63);

					if (pend == 0 && !(occ & bit))
						return j;
					pend += ((occ & bit) != 0) - ((end & bit) != 0);
				}
			}
			j = bend;
		}
	}
	return A->nslots;
}

static bool
rs_contains(const RsGeom *g, char *area, uint32 q, uint64 r)
{
	RsArea		A;
	uint32		b;
	int			k;
	uint32		e;

	if (q >= g->nhome || r > qf_mask(g->rbits))
		return false;
	rs_area(&A, g, area);
	if (!bit_get(A.occ, q))
		return false;
	b = q >> 6;
	k = popcount64(ld64(A.occ + (Size) b * 8) & qf_mask((int) (q & 63) + 1));
	e = select_from(A.end, b * 64 + off_get(&A, b), (uint32) k, A.nslots);
	if (e >= A.nslots)
		return false;			/* corrupt */

	/*
	 * Scan the run backwards from its end; it starts at q or right after
	 * the previous run's end, so no second select is needed.
	 */
	for (uint32 p = e;; p--)
	{
		uint64		v = rem_get(&A, p);

		if (v == r)
			return true;
		if (v < r || p == q || bit_get(A.end, p - 1))
			return false;
	}
}

/* Set semantics: inserting a present fingerprint changes nothing. */
static QfStatus
rs_insert(const RsGeom *g, char *area, uint32 q, uint64 r)
{
	RsArea		A;
	bool		occupied;
	uint32		b;
	uint32		base;
	int			kb;
	uint32		s;
	uint32		e = 0;
	uint32		p;
	uint32		f;

	if (q >= g->nhome || r > qf_mask(g->rbits))
		return QF_INVALID;
	rs_area(&A, g, area);
	occupied = bit_get(A.occ, q);

	/* the run of q starts after the runs of the quotients before it */
	b = q >> 6;
	base = b * 64 + off_get(&A, b);
	kb = popcount64(ld64(A.occ + (Size) b * 8) & qf_mask((int) (q & 63)));
	s = kb == 0 ? base : select_from(A.end, base, (uint32) kb, A.nslots) + 1;
	s = Max(s, q);
	if (s >= A.nslots)
		return QF_FULL;
	p = s;
	if (occupied)
	{
		e = next_set(A.end, s, A.nslots);
		while (p <= e && rem_get(&A, p) < r)
			p++;
		if (p <= e && rem_get(&A, p) == r)
			return QF_OK;
	}

	f = rs_find_empty(&A, p);
	if (f >= A.nslots)
		return QF_FULL;

	bits_shift_up(A.rem, (uint64) p * A.rbits, (uint64) f * A.rbits, A.rbits);
	bits_shift_up(A.end, p, f, 1);
	bits_put(A.rem, (uint64) p * A.rbits, A.rbits, r);
	if (!occupied)
		bit_put(A.end, p, true);	/* a new run of one slot */
	else if (p == e + 1)
	{
		bit_put(A.end, e, false);	/* appended: p ends the run */
		bit_put(A.end, p, true);
	}
	else
		bit_put(A.end, p, false);	/* the old end moved to e + 1 */
	bit_put(A.occ, q, true);

	/*
	 * Blocks starting in (q, f] may now have more of their head taken by
	 * the runs before them; each offset follows from the previous block's,
	 * so go up in order.  Blocks at or before q, or after f, are unchanged.
	 */
	for (uint32 bb = b + 1; bb <= f >> 6; bb++)
	{
		uint32		c = rs_runs_end(&A, bb * 64 - 1);

		off_put(&A, bb, c > bb * 64 ? c - bb * 64 : 0);
	}
	return QF_OK;
}

/*
 * Decode an area sequentially (without the offsets) into out[] as
 * q << rbits | r, checking the run structure and every stored offset
 * against one recomputed from the decoded runs.  Returns the number of
 * fingerprints; *maxoff gets the largest offset.
 */
static uint32
rs_decode(const RsGeom *g, char *area, uint64 *out, uint32 *maxoff)
{
	RsArea		A;
	uint32		n = 0;
	uint32		next = 0;		/* first slot after the runs so far */

	rs_area(&A, g, area);
	*maxoff = 0;
	for (uint32 q = 0; q < A.nhome; q++)
	{
		uint32		s;
		uint32		e;
		uint64		last = 0;

		if (q % 64 == 0)
		{
			uint32		want = next > q ? next - q : 0;

			if (off_get(&A, q / 64) != want)
				FAIL("rsqf offset of block %u is %u, not %u", q / 64,
					 off_get(&A, q / 64), want);
			*maxoff = Max(*maxoff, want);
		}
		if (!bit_get(A.occ, q))
			continue;
		s = Max(q, next);
		e = next_set(A.end, s, A.nslots);
		if (e >= A.nslots)
			FAIL("rsqf run of quotient %u has no end", q);
		for (uint32 p = s; p <= e; p++)
		{
			uint64		v = rem_get(&A, p);

			if (p > s && v <= last)
				FAIL("rsqf run of quotient %u is not sorted", q);
			last = v;
			out[n++] = (uint64) q << A.rbits | v;
		}
		next = e + 1;
	}
	/* the slack blocks: every run is of a quotient before them */
	for (uint32 b = A.nhome / 64; b < g->nblocks; b++)
	{
		uint32		want = next > b * 64 ? next - b * 64 : 0;

		if (off_get(&A, b) != want)
			FAIL("rsqf offset of slack block %u is %u, not %u", b,
				 off_get(&A, b), want);
		*maxoff = Max(*maxoff, want);
	}
	if (next_set(A.end, next, A.nslots) != A.nslots)
		FAIL("rsqf has a run end past its last run");
	if (next_set(A.occ, A.nhome, A.nslots) != A.nslots)
		FAIL("rsqf has an occupied slack slot");
	return n;
}

/* ------------------------------------------------------------ driver */

typedef struct Key
{
	uint32		area;
	uint32		q;
	uint64		r;
} Key;

/* dedup set over (area, fingerprint), open addressing */
#define SET_BITS	20
#define SET_CAP		(1u << SET_BITS)

static uint64 *set_keys;

static inline uint32
set_hash(uint64 k)
{
	return (uint32) ((k * UINT64CONST(0x9E3779B97F4A7C15)) >> (64 - SET_BITS));
}

static bool
set_add(uint64 k)
{
	uint32		i = set_hash(k);

	k++;						/* 0 marks an empty entry */
	for (;; i = (i + 1) & (SET_CAP - 1))
	{
		if (set_keys[i] == 0)
		{
			set_keys[i] = k;
			return true;
		}
		if (set_keys[i] == k)
			return false;
	}
}

static bool
set_has(uint64 k)
{
	uint32		i = set_hash(k);

	k++;
	for (;; i = (i + 1) & (SET_CAP - 1))
	{
		if (set_keys[i] == 0)
			return false;
		if (set_keys[i] == k)
			return true;
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

static double
median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* (max - min) / median, the spread of the repeats */
static double
spread(double *v, int n)
{
	double		m = median(v, n);	/* sorts v */

	return (v[n - 1] - v[0]) / m;
}

enum
{
	M_INS, M_POS, M_NEG, NMETRIC
};

#define MAXREP 64

typedef struct Times
{
	double		t[2][NMETRIC][MAXREP];	/* [ours, rsqf][metric][repeat], ns */
} Times;

static double worst_spread = 0;
static double sum_spread = 0;
static int	nspread = 0;

/*
 * One repeat at one load: fresh fingerprints, fill both filters, time,
 * verify.  do_ours = false times only the RSQF (a geometry ours lacks).
 */
static void
run_once(const QfGeom *qg, const RsGeom *rg, double load, bool do_ours,
		 int rep, Times *T, char *ours, char *rs, Key *keys, Key *probes,
		 Key *shuffled, uint64 *ref, uint64 *dec, uint32 *maxoff)
{
	int			slot_bits = rg->slot_bits;
	int			rbits = rg->rbits;
	uint32		per = (uint32) (load * rg->nhome + 0.5);
	uint32		pre = (uint32) ((load - STEP) * rg->nhome + 0.5);
	uint32		n = per * NAREAS;
	uint32		npre = pre * NAREAS;

	/* distinct fingerprints, key i in area i % NAREAS */
	memset(set_keys, 0, sizeof(uint64) * SET_CAP);
	for (uint32 i = 0; i < n; i++)
	{
		uint64		page;

		keys[i].area = i % NAREAS;
		do
			qf_fingerprint_split(rng(), 0, slot_bits, rbits, &page,
								 &keys[i].q, &keys[i].r);
		while (!set_add((uint64) keys[i].area << 40 |
						(uint64) keys[i].q << rbits | keys[i].r));
	}
	for (uint32 i = 0; i < n; i++)
	{
		uint64		page;

		probes[i].area = i % NAREAS;
		do
			qf_fingerprint_split(rng(), 0, slot_bits, rbits, &page,
								 &probes[i].q, &probes[i].r);
		while (set_has((uint64) probes[i].area << 40 |
					   (uint64) probes[i].q << rbits | probes[i].r));
	}
	memcpy(shuffled, keys, sizeof(Key) * n);
	for (uint32 i = n - 1; i > 0; i--)
	{
		uint32		j = (uint32) (((unsigned __int128) rng() * (i + 1)) >> 64);
		Key			tmp = shuffled[i];

		shuffled[i] = shuffled[j];
		shuffled[j] = tmp;
	}

	for (int pass = 0; pass < 2; pass++)
	{
		/* alternate which representation runs first */
		int			which = (pass + rep) % 2;	/* 0 ours, 1 rsqf */
		double		t;
		uint64		hits;

		if (which == 0 && !do_ours)
			continue;
		if (which == 0)
		{
			for (int a = 0; a < NAREAS; a++)
				qf_area_init(qg, ours + a * qg->area_bytes);
			for (uint32 i = 0; i < npre; i++)
				if (qf_insert(qg, ours + keys[i].area * qg->area_bytes,
							  keys[i].q, keys[i].r, 1) != QF_OK)
					FAIL("qf_insert failed");
			t = now();
			for (uint32 i = npre; i < n; i++)
				if (qf_insert(qg, ours + keys[i].area * qg->area_bytes,
							  keys[i].q, keys[i].r, 1) != QF_OK)
					FAIL("qf_insert failed");
			T->t[0][M_INS][rep] = (now() - t) * 1e9 / (n - npre);

			hits = 0;
			t = now();
			for (uint32 i = 0; i < n; i++)
				hits += qf_count(qg, ours + shuffled[i].area * qg->area_bytes,
								 shuffled[i].q, shuffled[i].r) != 0;
			T->t[0][M_POS][rep] = (now() - t) * 1e9 / n;
			if (hits != n)
				FAIL("ours: %llu of %u stored fingerprints found",
					 (unsigned long long) hits, n);

			hits = 0;
			t = now();
			for (uint32 i = 0; i < n; i++)
				hits += qf_count(qg, ours + probes[i].area * qg->area_bytes,
								 probes[i].q, probes[i].r) != 0;
			T->t[0][M_NEG][rep] = (now() - t) * 1e9 / n;
			if (hits != 0)
				FAIL("ours: %llu absent fingerprints found",
					 (unsigned long long) hits);
		}
		else
		{
			memset(rs, 0, rg->area_bytes * NAREAS);
			for (uint32 i = 0; i < npre; i++)
				if (rs_insert(rg, rs + keys[i].area * rg->area_bytes,
							  keys[i].q, keys[i].r) != QF_OK)
					FAIL("rs_insert failed");
			t = now();
			for (uint32 i = npre; i < n; i++)
				if (rs_insert(rg, rs + keys[i].area * rg->area_bytes,
							  keys[i].q, keys[i].r) != QF_OK)
					FAIL("rs_insert failed");
			T->t[1][M_INS][rep] = (now() - t) * 1e9 / (n - npre);

			hits = 0;
			t = now();
			for (uint32 i = 0; i < n; i++)
				hits += rs_contains(rg, rs + shuffled[i].area * rg->area_bytes,
									shuffled[i].q, shuffled[i].r);
			T->t[1][M_POS][rep] = (now() - t) * 1e9 / n;
			if (hits != n)
				FAIL("rsqf: %llu of %u stored fingerprints found",
					 (unsigned long long) hits, n);

			hits = 0;
			t = now();
			for (uint32 i = 0; i < n; i++)
				hits += rs_contains(rg, rs + probes[i].area * rg->area_bytes,
									probes[i].q, probes[i].r);
			T->t[1][M_NEG][rep] = (now() - t) * 1e9 / n;
			if (hits != 0)
				FAIL("rsqf: %llu absent fingerprints found",
					 (unsigned long long) hits);
		}
	}

	/* both areas hold exactly the reference set, in the same order */
	for (int a = 0; a < NAREAS; a++)
	{
		uint32		m = 0;
		uint32		nd;
		uint32		mo;

		for (uint32 i = a; i < n; i += NAREAS)
			ref[m++] = (uint64) keys[i].q << rbits | keys[i].r;
		qsort(ref, m, sizeof(uint64), cmp_u64);

		nd = rs_decode(rg, rs + a * rg->area_bytes, dec, &mo);
		*maxoff = Max(*maxoff, mo);
		if (nd != m || memcmp(dec, ref, m * sizeof(uint64)) != 0)
			FAIL("rsqf area %d does not hold the reference set", a);
		if (do_ours)
		{
			QfIter		it;
			uint32		q;
			uint64		r;
			uint64		c;
			const char *msg;

			if (!qf_area_check(qg, ours + a * qg->area_bytes, &msg))
				FAIL("ours: %s", msg);
			nd = 0;
			qf_iter_init(&it, qg, ours + a * qg->area_bytes);
			while (qf_iter_next(&it, &q, &r, &c))
			{
				if (nd >= m || c != 1 ||
					((uint64) q << rbits | r) != ref[nd])
					FAIL("ours: area %d does not hold the reference set", a);
				nd++;
			}
			if (nd != m)
				FAIL("ours: area %d holds %u, not %u", a, nd, m);
		}
	}
}

static void
bench(int rbits, int slot_bits, int reps, bool do_ours)
{
	static const double loads[] = {0.50, 0.75, 0.90, 0.95};
	QfGeom		qg;
	RsGeom		rg;
	uint32		nmax;
	char	   *ours;
	char	   *rs;
	Key		   *keys;
	Key		   *probes;
	Key		   *shuffled;
	uint64	   *ref;
	uint64	   *dec;

	if (!rs_geom_init_slots(&rg, slot_bits, rbits, PAGE_AREA))
		FAIL("no rsqf geometry");
	if (do_ours && !qf_geom_init_slots(&qg, (uint32) 1 << slot_bits, rbits, QF_SLACK_FILL,
									   PAGE_AREA))
		FAIL("no geometry");
	nmax = (uint32) (0.95 * rg.nhome + 1) * NAREAS;
	ours = malloc(do_ours ? qg.area_bytes * NAREAS : 1);
	rs = malloc(rg.area_bytes * NAREAS);
	keys = malloc(sizeof(Key) * nmax);
	probes = malloc(sizeof(Key) * nmax);
	shuffled = malloc(sizeof(Key) * nmax);
	ref = malloc(sizeof(uint64) * rg.nslots);
	dec = malloc(sizeof(uint64) * rg.nslots);

	for (int l = 0; l < (int) lengthof(loads); l++)
	{
		Times		T;
		uint32		maxoff = 0;
		double		med[2][NMETRIC];

		for (int rep = 0; rep < reps; rep++)
			run_once(&qg, &rg, loads[l], do_ours, rep, &T, ours, rs, keys,
					 probes, shuffled, ref, dec, &maxoff);
		for (int w = do_ours ? 0 : 1; w < 2; w++)
			for (int m = 0; m < NMETRIC; m++)
			{
				double		s = spread(T.t[w][m], reps);

				med[w][m] = median(T.t[w][m], reps);
				worst_spread = Max(worst_spread, s);
				sum_spread += s;
				nspread++;
			}
		if (do_ours)
			printf("| %2d | %2u | %3.0f%% | %5.1f | %5.1f | %5.1f | %5.1f"
				   " | %5.1f | %5.1f | %u |\n",
				   rbits, rg.nhome, loads[l] * 100,
				   med[0][M_INS], med[1][M_INS], med[0][M_POS], med[1][M_POS],
				   med[0][M_NEG], med[1][M_NEG], maxoff);
		else
			printf("| %2d | %2u | %3.0f%% |   -   | %5.1f |   -   | %5.1f"
				   " |   -   | %5.1f | %u |\n",
				   rbits, rg.nhome, loads[l] * 100,
				   med[1][M_INS], med[1][M_POS], med[1][M_NEG], maxoff);
	}
	free(ours);
	free(rs);
	free(keys);
	free(probes);
	free(shuffled);
	free(ref);
	free(dec);
}

/*
 * Home slots per page if our format dropped the counter bit (counts would
 * then have to live in the remainders, as in the CQF): qf_geom_init's rule
 * with three bit arrays instead of four.
 */
static uint32
three_bit_home(int rbits)
{
	for (int s = QF_MAX_SLOT_BITS; s >= QF_MIN_SLOT_BITS; s--)
	{
		uint64		n = ((uint64) 1 << s) + qf_min_slack((uint32) 1 << s);
		uint64		bytes = QF_HEADER_SIZE + 3 * 8 * ((n + 63) / 64) +
			8 * ((n * rbits + 63) / 64);

		if (bytes <= PAGE_AREA)
			return (uint32) 1 << s;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const int rbits[] = {6, 9, 12};
	int			reps = argc > 1 ? atoi(argv[1]) : 11;
	double		t0 = now();

	if (reps < 1 || reps > MAXREP)
		FAIL("repeats must be in 1..%d", MAXREP);
	setvbuf(stdout, NULL, _IOLBF, 0);
	set_keys = malloc(sizeof(uint64) * SET_CAP);

	printf("page geometry (%d-byte area): home + slack slots, bits per slot\n",
		   PAGE_AREA);
	printf("| r | ours (4 metadata bits) | rsqf (2 + 1/4) |"
		   " ours without the counter bit: home slots |\n|---|---|---|---|\n");
	for (int r = 4; r <= 16; r++)
	{
		QfGeom		qg;
		RsGeom		rg;

		if (!qf_geom_init(&qg, r, PAGE_AREA) ||
			!rs_geom_init(&rg, r, PAGE_AREA))
			FAIL("no geometry");
		printf("| %2d | %4u + %4u, %.2f | %4u + %4u, %.2f | %4u |\n", r,
			   qg.nhome, qg.nslack, qg.area_bytes * 8.0 / qg.nslots,
			   rg.nhome, rg.nslack, rg.area_bytes * 8.0 / rg.nslots,
			   three_bit_home(r));
	}

	printf("\nns per operation, median of %d repeats, %d areas of %d bytes"
		   " (popcount: %s)\n", reps, NAREAS, PAGE_AREA,
#ifdef __POPCNT__
		   "popcnt instruction"
#else
		   "inline SWAR"
#endif
		);
	printf("| r | home | load | insert ours | insert rsqf | pos ours"
		   " | pos rsqf | neg ours | neg rsqf | max offset |\n"
		   "|---|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < (int) lengthof(rbits); i++)
	{
		QfGeom		qg;

		/*
		 * the geometry our paged filters use (a power of two of home
		 * slots), for both representations
		 */
		if (!qf_geom_init(&qg, rbits[i], PAGE_AREA))
			FAIL("no geometry");
		bench(rbits[i], qf_home_bits(qg.nhome), reps, true);
	}

	printf("\nspread of the repeats, (max - min) / median: mean %.0f%%,"
		   " worst %.0f%%\n", 100 * sum_spread / nspread, 100 * worst_spread);
	printf("all fingerprints verified; done in %.1fs\n", now() - t0);
	return 0;
}
