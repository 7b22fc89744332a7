/*-------------------------------------------------------------------------
 *
 * qf_check.c
 *	  Validation of quotient filter areas (the format is described in
 *	  qf.h): the O(1) header check, the checked lookup, and the full
 *	  structural check.  No backend calls, like qf.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "qf_internal.h"

/*
 * qf_count for an area read from disk: it also checks the invariants of the
 * slots the lookup relies on (the cluster start it decodes from, the run
 * start it selects, every slot of the run shifted, remainders increasing,
 * a canonical count), at the cost of a few more word operations on words
 * already in cache; qf_area_check is O(nslots), too much for every
 * lookup.  Returns false with *msg set if the area is found corrupted.
 */

/* in the checks below: fail with message unless cond holds */
#define CHECK(cond, message) \
	do { \
		if (!(cond)) \
		{ \
			*msg = (message); \
			return false; \
		} \
	} while (0)

bool
qf_count_checked(const QfGeom *g, const char *area, uint32 quotient,
				 uint64 remainder, uint64 *count, const char **msg)
{
	QfArrays	A;
	int64		b;
	uint32		k;
	uint32		s;
	uint32		e;
	uint32		p;
	bool		have_last = false;
	uint64		last = 0;

	QF_TO_LEGACY(g,
				 qf_legacy_count_checked(g, area, quotient, remainder, count, msg));
	*count = 0;
	*msg = NULL;
	if (!args_ok(g, quotient, remainder))
		return true;
	qf_arrays(&A, g, area);
	if (!bit_get(A.occ, quotient))
		return true;

	/* decoding starts at the cluster's start: a run start at its home */
	b = prev_unshifted(&A, quotient);
	CHECK(b >= 0, "quotient filter area has a shifted first slot");
	CHECK(bit_get(A.occ, (uint32) b) && !bit_get(A.cont, (uint32) b) &&
		   !slot_is_cnt(&A, (uint32) b),
		   "quotient filter run is shifted past a slot that starts no cluster");
	k = count_of(&A, W_OCC, (uint32) b, quotient);
	s = b == quotient ? quotient :
		select_of(&A, W_NOT_CONT, (uint32) b + 1, k, A.nslots);
	CHECK(s < A.nslots && s >= quotient,
		   "quotient filter run starts outside the area or before its home slot");
	CHECK((bit_get(A.occ, s) || bit_get(A.shf, s)) && !slot_is_cnt(&A, s) &&
		   bit_get(A.shf, s) == (s != quotient),
		   "quotient filter run start has wrong metadata bits");
	e = run_end(&A, s);
	CHECK(count_of(&A, W_NOT_SHF, s + 1, e) == 0,
		   "quotient filter run has a slot that is not shifted");

	p = s;
	while (p < e)
	{
		uint64		v = rem_get(&A, p);
		uint32		d = digits_at(&A, p, e);

		CHECK(!have_last || v > last,
			   "quotient filter remainders out of order in a run");
		CHECK(d == 0 || rem_get(&A, p + d) != 0,
			   "quotient filter count has a leading zero digit");
		if (v >= remainder)
		{
			if (v == remainder)
				*count = count_decode(&A, p, d);
			return true;
		}
		have_last = true;
		last = v;
		p += 1 + d;
	}
	return true;
}

bool
qf_area_check_header(const QfGeom *g, const char *area, const char **msg)
{
	QfAreaHeader h;

	QF_TO_LEGACY(g, qf_legacy_area_check_header(g, area, msg));
	*msg = NULL;
	hdr_read(area, &h);
	CHECK(h.magic == QF_AREA_MAGIC, "quotient filter area has a wrong magic number");
#ifdef QF_LEGACY
	/* there, reserved was log2 of the home slots and nhome reserved */
	CHECK((uint32) 1 << (h.reserved & 31) == g->nhome && h.rbits == g->rbits &&
		  h.nslack == g->nslack,
		  "quotient filter area has a different geometry");
	CHECK(h.flags == 0 && h.nhome == 0,
		  "quotient filter area header has reserved bits set");
#else
	CHECK(h.nhome == g->nhome && h.rbits == g->rbits &&
		  h.nslack == g->nslack,
		  "quotient filter area has a different geometry");
	CHECK(h.flags == 0 && h.reserved == 0,
		  "quotient filter area header has reserved bits set");
#endif
	CHECK(h.nused <= g->nslots && h.nitems <= h.nused,
		  "quotient filter area header has impossible counters");
	return true;
}

/* What the slot-by-slot check carries from one word to the next. */
typedef struct QfCheckState
{
	int64		bucket;			/* quotient of the current run */
	uint64		lastrem;		/* the run's last remainder */
	bool		last_used;		/* the previous slot is used */
	bool		have_rem;		/* a remainder's count may go on */
} QfCheckState;

/*
 * The checks of qf_area_check for a word of slots [base, base + lim)
 * without counter digits (most words: counts are mostly 1), the metadata
 * compared a word at a time and only run starts, continuations and empty
 * slots visited.  Returns false if any check fails, leaving *cs as it
 * was: the caller then checks the word slot by slot, reporting the first
 * failure in slot order.  On success *cs is the state after the word.
 */
static bool
check_word_plain(const QfArrays *A, uint32 base, uint32 lim, uint64 occw,
				 uint64 contw, uint64 shfw, QfCheckState *cs)
{
	uint64		lmask = lim == 64 ? PG_UINT64_MAX : qf_mask((int) lim);
	uint64		used = (occw | contw | shfw) & lmask;
	uint64		prev_used = (used << 1) | (cs->last_used ? 1 : 0);
	uint64		starts = used & ~contw;
	uint64		conts = contw & lmask;
	uint64		empty = ~used & lmask;
	int64		bucket = cs->bucket;
	uint64		x;

	/* continuations are shifted and follow a used slot in a run */
	if ((conts & ~shfw) != 0 ||
		(conts & ~((used << 1) | (cs->have_rem ? 1 : 0))) != 0)
		return false;
	for (x = empty; x != 0; x &= x - 1)
	{
		if (rem_get(A, base + pg_rightmost_one_pos64(x)) != 0)
			return false;
	}
	for (x = starts; x != 0; x &= x - 1)
	{
		int			j = pg_rightmost_one_pos64(x);
		uint32		i = base + (uint32) j;
		uint32		b = next_of(A, W_OCC, (uint32) (bucket + 1), A->nhome);

		if (b >= A->nhome || b > i ||
			(((shfw >> j) & 1) != 0) != (b != i) ||
			(b != i && ((prev_used >> j) & 1) == 0))
			return false;
		bucket = b;
	}
	for (x = conts; x != 0; x &= x - 1)
	{
		int			j = pg_rightmost_one_pos64(x);
		uint64		prev = j == 0 ? cs->lastrem : rem_get(A, base + j - 1);

		if (rem_get(A, base + j) <= prev)
			return false;
	}
	cs->bucket = bucket;
	cs->last_used = (used >> (lim - 1)) & 1;
	cs->have_rem = cs->last_used;
	if (cs->last_used)
		cs->lastrem = rem_get(A, base + lim - 1);
	return true;
}

/* Are the remainders of slots [from, from + n) all zero? */
static inline bool
rems_zero(const QfArrays *A, uint32 from, uint32 n)
{
	uint64		pos = (uint64) from * A->rbits;
	uint64		end = pos + (uint64) n * A->rbits;

	for (; pos < end; pos += 64)
	{
		if (bits_get(A->rem, pos, (int) Min(64, end - pos)) != 0)
			return false;
	}
	return true;
}

bool
qf_area_check(const QfGeom *g, const char *area, const char **msg)
{
	QfArrays	A;
	QfAreaHeader h;
	uint32		nitems = 0;
	uint32		nused = 0;
	uint64		total = 0;
	int64		bucket = -1;	/* quotient of the current run */
	bool		have_rem = false;	/* current run has a remainder yet */
	uint64		lastrem = 0;
	uint32		ndig = 0;		/* digits after the current remainder */
	uint64		cval = 0;		/* their value so far */
	bool		last_used = false;	/* the previous slot is used */
	uint32		tailbits;

	QF_TO_LEGACY(g, qf_legacy_area_check(g, area, msg));
	if (!qf_area_check_header(g, area, msg))
		return false;
	qf_arrays(&A, g, area);
	hdr_read(area, &h);

	/* bits past the last slot, and occupied bits of slack slots, are 0 */
	tailbits = g->nwords * 64 - g->nslots;
	if (tailbits > 0)
	{
		uint64		m = ~qf_mask(64 - (int) tailbits);
		Size		o = (Size) (g->nwords - 1) * 8;

		uint64		bits = ld64(A.occ + o) | ld64(A.cont + o) | ld64(A.shf + o);

#ifdef QF_LEGACY
		bits |= ld64(A.cnt + o);
#endif
		CHECK((bits & m) == 0,
			  "quotient filter area has bits set past its last slot");
	}
	if ((uint64) g->rwords * 64 > (uint64) g->nslots * g->rbits)
		CHECK(bits_get(A.rem, (uint64) g->nslots * g->rbits,
					   (int) ((uint64) g->rwords * 64 -
							  (uint64) g->nslots * g->rbits)) == 0,
			  "quotient filter area has payload bits set past its last slot");
	CHECK(next_of(&A, W_OCC, g->nhome, g->nslots) == g->nslots,
		  "quotient filter area has an occupied slack slot");

	/*
	 * Slot by slot in the order of the checks, but with each word of the
	 * three bit arrays loaded once: merges check every page they read, and
	 * bit-by-bit loads made this check three times the cost of decoding
	 * the page.  A word of empty slots whose remainders are all zero is
	 * taken whole.
	 */
	for (uint32 base = 0; base < g->nslots; base += 64)
	{
		Size		o = (Size) (base >> 6) * 8;
		uint64		occw = ld64(A.occ + o);
		uint64		contw = ld64(A.cont + o);
		uint64		shfw = ld64(A.shf + o);
#ifdef QF_LEGACY
		uint64		cntw = ld64(A.cnt + o);
		uint64		cnt_next = base + 64 < g->nslots ? ld64(A.cnt + o + 8) : 0;
#else
		uint64		cntw = contw & ~shfw;
		uint64		cnt_next = base + 64 < g->nslots ?
			ld64(A.cont + o + 8) & ~ld64(A.shf + o + 8) : 0;
#endif
		uint32		lim = Min(64, g->nslots - base);

		if ((occw | contw | shfw) == 0 &&
			rems_zero(&A, base, lim))
		{
			if (have_rem)
				total = sat_add(total, cval == PG_UINT64_MAX ? cval : cval + 1);
			have_rem = false;
			ndig = 0;
			cval = 0;
			last_used = false;
			continue;
		}
		if (cntw == 0)
		{
			QfCheckState cs = {bucket, lastrem, last_used, have_rem};

			if (check_word_plain(&A, base, lim, occw, contw, shfw, &cs))
			{
				uint64		lmask = lim == 64 ? PG_UINT64_MAX : qf_mask((int) lim);
				uint32		n = (uint32) popcount64((occw | contw | shfw) & lmask);

				/* the counts: the last remainder's may go on in the next word */
				if (have_rem)
					total = sat_add(total, cval == PG_UINT64_MAX ? cval : cval + 1);
				total = sat_add(total, n - (cs.have_rem ? 1 : 0));
				nused += n;
				nitems += n;
				ndig = 0;
				cval = 0;
				bucket = cs.bucket;
				lastrem = cs.lastrem;
				last_used = cs.last_used;
				have_rem = cs.have_rem;
				continue;
			}
			/* not plain: the slot-by-slot checks below find the first error */
		}
		for (uint32 j = 0; j < lim; j++)
		{
			uint32		i = base + j;
			bool		occ = (occw >> j) & 1;
			bool		cont = (contw >> j) & 1;
			bool		cnt = (cntw >> j) & 1;
#ifdef QF_LEGACY
			bool		shf = (shfw >> j) & 1;
#else
			bool		shf = ((shfw >> j) & 1) || cnt;
#endif
			uint64		v = rem_get(&A, i);
			bool		prev_used = last_used;

			last_used = occ || cont || shf;

			/* the previous remainder's count ends where no digit follows */
			if (have_rem && !cnt)
			{
				total = sat_add(total, cval == PG_UINT64_MAX ? cval : cval + 1);
				ndig = 0;
				cval = 0;
			}

			if (!last_used)
			{
				CHECK(!cnt && v == 0,
					  "quotient filter area has an empty slot with contents");
				have_rem = false;
				continue;
			}
			nused++;
			if (!cont)
			{
				/* a run start: it belongs to the next occupied bucket */
				uint32		b = next_of(&A, W_OCC, (uint32) (bucket + 1), g->nhome);

				CHECK(!cnt, "quotient filter run starts with a counter slot");
				CHECK(b < g->nhome && b <= i,
					  "quotient filter run has no occupied home slot");
				CHECK(shf == (b != i),
					  "quotient filter run start has a wrong shifted bit");
				CHECK(b == i || prev_used,
					  "quotient filter run is shifted past an empty slot");
				bucket = b;
				have_rem = true;
				lastrem = v;
				nitems++;
			}
			else if (!cnt)
			{
				CHECK(shf, "quotient filter continuation slot is not shifted");
				CHECK(have_rem,
					  "quotient filter continuation slot follows an empty slot");
				CHECK(v > lastrem,
					  "quotient filter remainders out of order in a run");
				lastrem = v;
				nitems++;
			}
			else
			{
				uint32		shift = ndig * g->rbits;
				bool		next_cnt = j + 1 < 64 ? (cntw >> (j + 1)) & 1 :
					cnt_next & 1;

				CHECK(shf, "quotient filter counter slot is not shifted");
				CHECK(have_rem,
					  "quotient filter counter slot follows an empty slot");
				/* digits beyond bit 63 would be lost */
				CHECK(shift < 64 &&
					  (shift + g->rbits <= 64 || (v >> (64 - shift)) == 0),
					  "quotient filter count overflows 64 bits");
				cval |= v << shift;
				ndig++;
				/* the last digit is nonzero (canonical), and c - 1 < 2^64 - 1 */
				if (i + 1 >= g->nslots || !next_cnt)
				{
					CHECK(v != 0,
						  "quotient filter count has a leading zero digit");
					CHECK(cval != PG_UINT64_MAX,
						  "quotient filter count overflows 64 bits");
				}
			}
		}
	}
	if (have_rem)
		total = sat_add(total, cval == PG_UINT64_MAX ? cval : cval + 1);
	CHECK(next_of(&A, W_OCC, (uint32) (bucket + 1), g->nhome) == g->nhome,
		  "quotient filter occupied home slot has no run");
	CHECK(h.nitems == nitems,
		  "quotient filter area header has a wrong item count");
	CHECK(h.nused == nused,
		  "quotient filter area header has a wrong used slot count");
	CHECK(h.total_count == total || h.total_count == PG_UINT64_MAX,
		  "quotient filter area header has a wrong total count");
	return true;
}
