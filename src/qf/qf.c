/*-------------------------------------------------------------------------
 *
 * qf.c
 *	  Counting quotient filter areas (the format is described in qf.h).
 *
 * The operations follow the paper's MAY-CONTAIN / insert / delete, but find
 * positions with whole-word bit operations instead of walking slot by slot:
 *
 *	- the decoding start for quotient q is the last unshifted slot b <= q
 *	  (a backward search for a zero in the shifted bits);
 *	- every occupied bucket in [b, q) has one run, packed from b on, so the
 *	  run of q starts max(q, end of the k-th of those runs) with k the
 *	  popcount of the occupied bits in [b, q); a run ends where the next
 *	  slot without the continuation bit is, so that end is a select over
 *	  the inverted continuation bits;
 *	- inserting n slots finds the first n empty slots with a search over
 *	  (occupied | continuation | shifted) and moves the segments between
 *	  them right with bit-range moves of the three arrays;
 *	- deleting moves the following runs of the cluster left by as much as
 *	  their home slots allow, again as bit-range moves of whole groups of
 *	  runs that move by the same distance.
 *
 * No function here calls the backend: no palloc, no elog.  Nothing here
 * needs more stack than a few dozen words.
 *
 * The validation (qf_area_check and the checked lookup) is in qf_check.c,
 * what both files share in qf_internal.h.  qf_legacy.c compiles both files
 * a second time with QF_LEGACY defined and every public function renamed
 * qf_legacy_*: that build reads and writes
 * the earlier layout ("QFA1": a fourth bit array for the counters, a power
 * of two of home slots); the public functions here hand a geometry made by
 * qf_geom_init_legacy* over to it (QF_TO_LEGACY).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bitutils.h"

#include "qf_internal.h"

StaticAssertDecl(sizeof(QfAreaHeader) == QF_HEADER_SIZE,
				 "QfAreaHeader must be QF_HEADER_SIZE bytes");

/* Bit array writes (the reads, and the layout, are in qf_internal.h). */
static inline void
bit_put(char *a, uint32 i, bool v)
{
	char	   *p = a + (Size) (i >> 6) * 8;
	uint64		w = ld64(p);
	uint64		m = UINT64CONST(1) << (i & 63);

	st64(p, v ? (w | m) : (w & ~m));
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
	{
		int			done = 64 - off;

		st64(p + 8, (ld64(p + 8) & ~(m >> done)) | (v >> done));
	}
}

static void
bits_fill(char *a, uint64 pos, uint64 len, bool one)
{
	while (len > 0)
	{
		int			n = (int) Min(len, 64);

		bits_put(a, pos, n, one ? PG_UINT64_MAX : 0);
		pos += n;
		len -= n;
	}
}

#ifndef QF_LEGACY
/*
 * a |= ~b over bits [pos, pos+len) of two arrays: marks moved slots
 * shifted except the continuations, whose shifted bit already says whether
 * they are remainders (1) or counter digits (0).
 */
static void
bits_or_not(char *a, const char *b, uint64 pos, uint64 len)
{
	while (len > 0)
	{
		int			n = (int) Min(len, 64);

		bits_put(a, pos, n, bits_get(a, pos, n) | ~bits_get(b, pos, n));
		pos += n;
		len -= n;
	}
}
#endif

/* Copy n bits (1..64) from bit position from to bit position to. */
static inline void
bits_copy(char *a, uint64 to, uint64 from, int n)
{
	bits_put(a, to, n, bits_get(a, from, n));
}

/*
 * Write whole word w of a bits_move from src to dst: a funnel shift of the
 * two source words its bits come from (off is their bit offset).  Both
 * directions of the move use it, in opposite word orders.
 */
static inline void
bits_move_word(char *a, uint64 w, uint64 dst, uint64 src, int off)
{
	uint64		s = src + (w * 64 - dst);
	const char *p = a + (s >> 6) * 8;
	uint64		v = ld64(p);

	if (off)
		v = (v >> off) | (ld64(p + 8) << (64 - off));
	st64(a + w * 8, v);
}

/*
 * memmove for bit ranges, safe for overlapping ranges.  The destination is
 * written a whole word at a time (each word a funnel shift of two source
 * words), with read-modify-write only for its partial first and last
 * words.  Words are processed back to front when moving right and front to
 * back when moving left, so no source bit is overwritten before it is read.
 */
static void
bits_move(char *a, uint64 dst, uint64 src, uint64 len)
{
	uint64		end = dst + len;
	uint64		head;			/* bits before the first whole dst word */
	uint64		tail;			/* bits after the last whole dst word */
	uint64		wfirst;			/* whole dst words [wfirst, wend) */
	uint64		wend;
	int			off;			/* bit offset of a dst word's source */

	if (dst == src || len == 0)
		return;
	if (len <= 64)
	{
		bits_copy(a, dst, src, (int) len);
		return;
	}
	head = (64 - (dst & 63)) & 63;
	tail = end & 63;
	wfirst = (dst + head) >> 6;
	wend = (end - tail) >> 6;
	off = (int) ((src + head) & 63);

	if (dst > src)
	{
		if (tail > 0)
			bits_copy(a, end - tail, src + len - tail, (int) tail);
		for (uint64 w = wend; w-- > wfirst;)
			bits_move_word(a, w, dst, src, off);
		if (head > 0)
			bits_copy(a, dst, src, (int) head);
	}
	else
	{
		if (head > 0)
			bits_copy(a, dst, src, (int) head);
		for (uint64 w = wfirst; w < wend; w++)
			bits_move_word(a, w, dst, src, off);
		if (tail > 0)
			bits_copy(a, end - tail, src + len - tail, (int) tail);
	}
}

static inline void
rem_put(QfArrays *A, uint32 i, uint64 v)
{
	bits_put(A->rem, (uint64) i * A->rbits, A->rbits, v);
}

/*
 * Set the metadata bits of slots [pos, pos+len) (not occupied): a counter
 * digit is stored as continuation without shifted (qf.h).
 */
static void
slots_mark(QfArrays *A, uint32 pos, uint32 len, bool cont, bool shf, bool cnt)
{
	bits_fill(A->cont, pos, len, cont);
#ifdef QF_LEGACY
	bits_fill(A->shf, pos, len, shf);
	bits_fill(A->cnt, pos, len, cnt);
#else
	bits_fill(A->shf, pos, len, shf && !cnt);
#endif
}

/* Move the contents of slots [src, src+len) to dst (occupied bits stay). */
static void
slots_move(QfArrays *A, uint32 dst, uint32 src, uint32 len)
{
	bits_move(A->cont, dst, src, len);
	bits_move(A->shf, dst, src, len);
#ifdef QF_LEGACY
	bits_move(A->cnt, dst, src, len);
#endif
	bits_move(A->rem, (uint64) dst * A->rbits, (uint64) src * A->rbits,
			  (uint64) len * A->rbits);
}

/* Counter digits needed for count c (>= 1). */
static inline int
count_digits(uint64 c, int rbits)
{
	int			bits;

	if (c <= 1)
		return 0;
	bits = pg_leftmost_one_pos64(c - 1) + 1;
	return (bits + rbits - 1) / rbits;
}

/* Write the digits of count c into slots p+1 .. p+count_digits(c). */
static void
count_encode(QfArrays *A, uint32 p, uint64 c)
{
	int			d = count_digits(c, A->rbits);
	uint64		v = c - 1;

	for (int i = 0; i < d; i++)
	{
		rem_put(A, p + 1 + i, v);
		/* v >>= 64 would be undefined, and only happens for the last digit */
		v = A->rbits >= 64 ? 0 : v >> A->rbits;
	}
}

/*
 * Where the run of quotient q starts if q is occupied, or where it has to
 * be inserted if not (see the file header).  Returns nslots when that
 * position is past the last slot.
 */
static uint32
run_start(const QfArrays *A, uint32 q)
{
	int64		b = prev_unshifted(A, q);
	uint32		k;

	/* slot 0 is never shifted in a valid area */
	if (b < 0)
		b = 0;
	if (b == q)
		return q;
	k = count_of(A, W_OCC, (uint32) b, q);
	if (k == 0)
		return q;				/* corrupt area; stay in bounds */
	return select_of(A, W_NOT_CONT, (uint32) b + 1, k, A->nslots);
}

/*
 * Look for remainder r in the run [s, e).  Returns the slot of r (*found)
 * or of the first larger remainder (or e), and the number of counter digits
 * following it in *digits.
 */
static uint32
run_find(const QfArrays *A, uint32 s, uint32 e, uint64 r, bool *found,
		 uint32 *digits)
{
	uint32		p = s;

	*found = false;
	*digits = 0;
	while (p < e)
	{
		uint64		v = rem_get(A, p);
		uint32		d = digits_at(A, p, e);

		if (v >= r)
		{
			*found = (v == r);
			*digits = d;
			return p;
		}
		p += 1 + d;
	}
	return e;
}

/*
 * Open n empty slots at p by shifting everything from p right, up to the
 * first n empty slots at or after p: the segment before the first empty
 * slot moves by n, the one before the second by n - 1, and so on, which
 * keeps clusters packed.  Every moved slot ends up right of its home, so
 * it is marked shifted.  The opened slots keep stale contents, which the
 * caller overwrites.  Returns false, changing nothing, if there are fewer
 * than n empty slots left.
 */
static bool
slots_open(QfArrays *A, uint32 p, uint32 n)
{
	uint32		empty[QF_MAX_DIGITS + 1];
	uint32		pos = p;

	Assert(n >= 1 && n <= QF_MAX_DIGITS + 1);
	for (uint32 j = 0; j < n; j++)
	{
		empty[j] = next_of(A, W_EMPTY, pos, A->nslots);
		if (empty[j] >= A->nslots)
			return false;
		pos = empty[j] + 1;
	}
	for (int j = (int) n - 1; j >= 0; j--)
	{
		uint32		from = j == 0 ? p : empty[j - 1] + 1;
		uint32		len = empty[j] - from;
		uint32		by = n - (uint32) j;

		if (len == 0)
			continue;
		slots_move(A, from + by, from, len);
#ifdef QF_LEGACY
		bits_fill(A->shf, from + by, len, true);
#else
		bits_or_not(A->shf, A->cont, from + by, len);
#endif
	}
	return true;
}

/*
 * Delete the n slots [p, p+n) of the run [s, e) of quotient q and close the
 * gap: the rest of the run moves left by n, then each following run of the
 * cluster moves left to max(its home, end of the previous run); a run that
 * cannot move ends the cluster.  Runs moving by the same distance move
 * together.  Vacated slots are cleared, so empty slots stay all-zero.
 */
static void
slots_delete(QfArrays *A, uint32 q, uint32 s, uint32 e, uint32 p, uint32 n)
{
	uint32		gs = p + n;		/* start of the group being moved */
	uint32		d = n;			/* the group's distance */
	uint32		cur = e;		/* start of the next run to look at */
	uint32		bucket = q;

	if (p == s && p + n == e)
		bit_put(A->occ, q, false);	/* the run is gone */
	else if (p == s)
	{
		/* the next remainder becomes the first of the run */
		bit_put(A->cont, p + n, false);
		bit_put(A->shf, p + n, bit_get(A->shf, s));
	}

	while (cur < A->nslots && bit_get(A->shf, cur))
	{
		/* cur starts a shifted run, which belongs to the next bucket */
		uint32		limit = Min(cur, A->nhome);
		uint32		h = next_of(A, W_OCC, bucket + 1, limit);
		uint32		ns;

		if (h >= limit)
			break;				/* corrupt area: the run has no bucket */
		ns = Max(h, cur - d);
		if (cur - ns != d)
		{
			/* flush the group: the distance only shrinks from here */
			slots_move(A, gs - d, gs, cur - gs);
			slots_mark(A, cur - d, d, false, false, false);
			bits_fill(A->rem, (uint64) (cur - d) * A->rbits,
					  (uint64) d * A->rbits, false);
			gs = cur;
			d = cur - ns;
		}
		if (ns == h)
			bit_put(A->shf, cur, false);	/* back home; the bit moves along */
		bucket = h;
		cur = run_end(A, cur);
	}
	slots_move(A, gs - d, gs, cur - gs);
	slots_mark(A, cur - d, d, false, false, false);
	bits_fill(A->rem, (uint64) (cur - d) * A->rbits, (uint64) d * A->rbits,
			  false);
}

static inline void
hdr_write(char *area, const QfAreaHeader *h)
{
	memcpy(area, h, sizeof(*h));
}

/* qf_min_slack; the earlier layout's rule was max(64, min(128, home/16)) */
static inline uint32
area_min_slack(uint32 nhome)
{
#ifdef QF_LEGACY
	return Max(64, Min(128, nhome / 16));
#else
	return qf_min_slack(nhome);
#endif
}

Size
qf_area_size(int rbits, uint32 nslots)
{
	uint64		nwords = ((uint64) nslots + 63) / 64;
	uint64		rwords = ((uint64) nslots * rbits + 63) / 64;

	return QF_HEADER_SIZE + QF_NARRAYS * 8 * nwords + 8 * rwords;
}

/*
 * Most slots whose area fits in area_bytes.  Remembered per remainder
 * width for the last area size asked: the access methods derive a level's
 * geometry at every lookup, and the search was a fifth of an in-memory
 * lookup's time.
 */
static uint32
max_slots(int rbits, Size area_bytes)
{
	static Size known_area[QF_MAX_RBITS + 1];
	static uint32 known_fit[QF_MAX_RBITS + 1];
	uint64		lo = 0;
	uint64		hi = QF_MAX_SLOTS;
	bool		cacheable = rbits >= 0 && rbits <= QF_MAX_RBITS;

	if (cacheable && known_area[rbits] == area_bytes && area_bytes != 0)
		return known_fit[rbits];
	if (qf_area_size(rbits, 0) > area_bytes)
		return 0;
	/* invariant: lo fits, hi + 1 does not (or hi is the cap) */
	while (lo < hi)
	{
		uint64		mid = (lo + hi + 1) / 2;

		if (qf_area_size(rbits, (uint32) mid) <= area_bytes)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (cacheable)
	{
		known_area[rbits] = area_bytes;
		known_fit[rbits] = (uint32) lo;
	}
	return (uint32) lo;
}

bool
qf_geom_init_slots(QfGeom *g, uint32 nhome, int rbits, uint32 nslack,
				   Size area_bytes)
{
	uint64		nslots;

	if (rbits < QF_MIN_RBITS || rbits > QF_MAX_RBITS ||
		nhome < QF_MIN_HOME || nhome > QF_MAX_HOME)
		return false;
#ifdef QF_LEGACY
	if ((nhome & (nhome - 1)) != 0)
		return false;
#endif
	if (nslack == QF_SLACK_FILL)
	{
		uint32		fit = max_slots(rbits, area_bytes);

		if (fit < (uint64) nhome + area_min_slack(nhome))
			return false;
		nslots = fit;
	}
	else
	{
		nslots = (uint64) nhome + nslack;
		if (nslots > QF_MAX_SLOTS ||
			qf_area_size(rbits, (uint32) nslots) > area_bytes)
			return false;
	}

	memset(g, 0, sizeof(*g));
	g->rbits = rbits;
	g->nhome = nhome;
	g->nslots = (uint32) nslots;
	g->nslack = g->nslots - nhome;
	g->nwords = (uint32) ((nslots + 63) / 64);
	g->rwords = (uint32) ((nslots * rbits + 63) / 64);
	g->occ_off = QF_HEADER_SIZE;
	g->cont_off = g->occ_off + g->nwords * 8;
	g->shf_off = g->cont_off + g->nwords * 8;
	g->rem_off = g->shf_off + g->nwords * 8;
#ifdef QF_LEGACY
	g->legacy = true;
	g->cnt_off = g->rem_off;
	g->rem_off += g->nwords * 8;
#endif
	g->area_bytes = qf_area_size(rbits, g->nslots);
	Assert(g->area_bytes == (Size) g->rem_off + (Size) g->rwords * 8);
	return true;
}

bool
qf_geom_init(QfGeom *g, int rbits, Size area_bytes)
{
	uint32		fit;
	uint32		nhome;

	if (rbits < QF_MIN_RBITS || rbits > QF_MAX_RBITS)
		return false;
	fit = max_slots(rbits, area_bytes);
	if (fit < QF_MIN_HOME + area_min_slack(QF_MIN_HOME))
		return false;
#ifdef QF_LEGACY
	/* the largest power of two */
	for (nhome = QF_MAX_HOME; nhome >= QF_MIN_HOME; nhome /= 2)
		if ((uint64) nhome + area_min_slack(nhome) <= fit)
			return qf_geom_init_slots(g, nhome, rbits, QF_SLACK_FILL,
									  area_bytes);
	return false;
#endif
	/* the slack is nondecreasing in nhome: take the largest nhome that fits */
	nhome = Min(fit - qf_min_slack(fit), QF_MAX_HOME);
	while (nhome + qf_min_slack(nhome) < fit && nhome < QF_MAX_HOME)
		nhome++;
	while (nhome + qf_min_slack(nhome) > fit)
		nhome--;
	return qf_geom_init_slots(g, nhome, rbits, QF_SLACK_FILL, area_bytes);
}

#ifndef QF_LEGACY
/* sizing is the current layout's only */

/* The home slots of a full area at rbits, or 0 if there is no such area. */
static uint32
full_area_home(int rbits, Size area_bytes)
{
	QfGeom		g;

	return qf_geom_init(&g, rbits, area_bytes) ? g.nhome : 0;
}

bool
qf_sized_base(int64 capacity, double load, int rbits, Size area_bytes,
			  int max_page_bits, uint64 *pages, uint32 *nhome)
{
	return qf_sized_base_aligned(capacity, load, rbits, area_bytes,
								 max_page_bits, 1, pages, nhome);
}

bool
qf_sized_base_aligned(int64 capacity, double load, int rbits,
					  Size area_bytes, int max_page_bits, uint32 align,
					  uint64 *pages, uint32 *nhome)
{
	uint32		full = full_area_home(rbits, area_bytes);
	double		need;
	uint64		n;
	int			shift;

	full -= full % Max(align, 1);
	if (capacity < 1 || full < QF_MIN_HOME)
		return false;
	need = ceil((double) capacity / load);
	if (!(need <= ldexp(full, max_page_bits)))
		return false;
	n = need <= full ? (uint64) Max(need, QF_MIN_HOME) :
		(uint64) ceil(need / full);
	shift = Max(pg_leftmost_one_pos64(n) + 1 - QF_SIZED_SIG_BITS, 0);
	n = ((n + ((UINT64CONST(1) << shift) - 1)) >> shift) << shift;
	if (need <= full)
	{
		n += (Max(align, 1) - n % Max(align, 1)) % Max(align, 1);
		*pages = 1;
		*nhome = (uint32) Min(n, full);
	}
	else
	{
		*pages = n;
		*nhome = full;
	}
	return *pages <= ((uint64) 1 << max_page_bits);
}

bool
qf_nested_shape(int rbits, uint64 pages, uint32 nhome, int j,
				Size area_bytes, uint64 *npages, uint32 *nhome_j)
{
	int			b = 0;
	/* pages wider than the space (one page of 2^b >= pages) gain nothing */
	int			bmax = pages > 1 ? pg_leftmost_one_pos64(pages - 1) + 1 : 0;

	if (j < 0 || rbits + j > QF_MAX_RBITS)
		return false;
	for (int i = 1; i <= j; i++)
	{
		uint32		full = full_area_home(rbits + i, area_bytes);

		/* the widest pages (largest b) whose home slots still fit */
		while (b < i && b < bmax && ldexp(nhome, b + 1 - i) <= full)
			b++;
		if (full == 0 || ldexp(nhome, b - i) > full)
			return false;
	}
	/* nhome / 2^(j - b) home slots, exactly */
	if (j - b >= 32 || nhome % ((uint32) 1 << (j - b)) != 0 ||
		(nhome >> (j - b)) < QF_MIN_HOME)
		return false;
	*nhome_j = nhome >> (j - b);
	*npages = b >= 64 ? 1 : (pages + ((UINT64CONST(1) << b) - 1)) >> b;
	if (*npages == 0)
		*npages = 1;
	return true;
}

bool
qf_space_shape(uint64 mult, int exp, int rbits, Size area_bytes,
			   uint64 max_pages, uint32 *nhome, uint64 *npages)
{
	uint32		full = full_area_home(rbits, area_bytes);
	uint64		home;
	uint64		d;

	if (!qf_space_valid(mult, exp) || rbits > exp ||
		exp - rbits >= 64 - pg_leftmost_one_pos64(mult) || full == 0)
		return false;
	home = mult << (exp - rbits);
	/* the smallest divisor d of home with home / d <= full */
	for (d = (home + full - 1) / full; d <= max_pages; d++)
	{
		if (home % d == 0)
		{
			*npages = d;
			*nhome = (uint32) (home / d);
			return *nhome >= QF_MIN_HOME;
		}
	}
	return false;
}
#endif							/* !QF_LEGACY */

void
qf_area_init(const QfGeom *g, char *area)
{
	QfAreaHeader h;

#ifndef QF_LEGACY
	if (unlikely(g->legacy))
	{
		qf_legacy_area_init(g, area);
		return;
	}
#endif
	memset(area, 0, g->area_bytes);
	memset(&h, 0, sizeof(h));
	h.magic = QF_AREA_MAGIC;
	h.rbits = (uint8) g->rbits;
#ifdef QF_LEGACY
	h.reserved = (uint8) qf_home_bits(g->nhome);
#else
	h.nhome = g->nhome;
#endif
	h.nslack = g->nslack;
	hdr_write(area, &h);
}

QfStatus
qf_insert(const QfGeom *g, char *area, uint32 quotient, uint64 remainder,
		  uint64 count)
{
	QfArrays	A;
	QfAreaHeader h;
	bool		occupied;
	uint32		s;
	uint32		p;
	uint32		n;

	QF_TO_LEGACY(g, qf_legacy_insert(g, area, quotient, remainder, count));
	if (!args_ok(g, quotient, remainder))
		return QF_INVALID;
	if (count == 0)
		return QF_OK;
	qf_arrays(&A, g, area);
	hdr_read(area, &h);

	occupied = bit_get(A.occ, quotient);
	s = run_start(&A, quotient);
	if (s >= A.nslots)
		return QF_FULL;
	p = s;
	if (occupied)
	{
		uint32		e = run_end(&A, s);
		bool		found;
		uint32		dold;

		p = run_find(&A, s, e, remainder, &found, &dold);
		if (found)
		{
			uint64		old = count_decode(&A, p, dold);
			uint64		c = sat_add(old, count);
			uint32		dnew = count_digits(c, A.rbits);

			if (dnew > dold)
			{
				/* more digits: open slots after the existing ones */
				if (!slots_open(&A, p + 1 + dold, dnew - dold))
					return QF_FULL;
				slots_mark(&A, p + 1 + dold, dnew - dold, true, true, true);
				h.nused += dnew - dold;
			}
			count_encode(&A, p, c);
			h.total_count = sat_add(h.total_count, c - old);
			hdr_write(area, &h);
			return QF_OK;
		}
	}

	/* a new remainder at p, followed by its count digits */
	n = 1 + count_digits(count, A.rbits);
	if (!slots_open(&A, p, n))
		return QF_FULL;
	if (occupied && p == s && p + n < A.nslots)
		bit_put(A.cont, p + n, true);	/* the old first is now second */
	slots_mark(&A, p, 1, occupied && p != s, p != quotient, false);
	rem_put(&A, p, remainder);
	if (n > 1)
	{
		slots_mark(&A, p + 1, n - 1, true, true, true);
		count_encode(&A, p, count);
	}
	bit_put(A.occ, quotient, true);
	h.nitems++;
	h.nused += n;
	h.total_count = sat_add(h.total_count, count);
	hdr_write(area, &h);
	return QF_OK;
}

/* Where a remainder is stored: quotient's run [s, e), its slot p, d digits. */
typedef struct QfStored
{
	uint32		s;
	uint32		e;
	uint32		p;
	uint32		d;
} QfStored;

/* Find remainder in quotient's run of A; false if it is not there. */
static bool
find_stored(const QfArrays *A, uint32 quotient, uint64 remainder,
			QfStored *st)
{
	bool		found;

	if (!bit_get(A->occ, quotient))
		return false;
	st->s = run_start(A, quotient);
	if (st->s >= A->nslots)
		return false;
	st->e = run_end(A, st->s);
	st->p = run_find(A, st->s, st->e, remainder, &found, &st->d);
	return found;
}

uint64
qf_count(const QfGeom *g, const char *area, uint32 quotient, uint64 remainder)
{
	QfArrays	A;
	QfStored	st;

	QF_TO_LEGACY(g, qf_legacy_count(g, area, quotient, remainder));
	if (!args_ok(g, quotient, remainder))
		return 0;
	qf_arrays(&A, g, area);
	if (!find_stored(&A, quotient, remainder, &st))
		return 0;
	return count_decode(&A, st.p, st.d);
}

uint64
qf_remove(const QfGeom *g, char *area, uint32 quotient, uint64 remainder,
		  uint64 count)
{
	QfArrays	A;
	QfAreaHeader h;
	QfStored	st;
	uint64		old;
	uint64		removed;

	QF_TO_LEGACY(g, qf_legacy_remove(g, area, quotient, remainder, count));
	if (!args_ok(g, quotient, remainder) || count == 0)
		return 0;
	qf_arrays(&A, g, area);
	if (!find_stored(&A, quotient, remainder, &st))
		return 0;

	hdr_read(area, &h);
	old = count_decode(&A, st.p, st.d);
	removed = Min(count, old);
	if (removed < old)
	{
		uint64		c = old - removed;
		uint32		dnew = count_digits(c, A.rbits);

		count_encode(&A, st.p, c);
		if (dnew < st.d)
		{
			slots_delete(&A, quotient, st.s, st.e, st.p + 1 + dnew,
						 st.d - dnew);
			h.nused -= st.d - dnew;
		}
	}
	else
	{
		slots_delete(&A, quotient, st.s, st.e, st.p, 1 + st.d);
		h.nitems--;
		h.nused -= 1 + st.d;
	}
	if (h.total_count != PG_UINT64_MAX)
		h.total_count -= Min(removed, h.total_count);
	hdr_write(area, &h);
	return removed;
}

void
qf_iter_init(QfIter *it, const QfGeom *g, const char *area)
{
	it->g = g;
	it->area = area;
	it->pos = 0;
	it->bucket = -1;
}

bool
qf_iter_next(QfIter *it, uint32 *quotient, uint64 *remainder, uint64 *count)
{
	QfArrays	A;
	uint32		pos = it->pos;
	uint32		d;

	QF_TO_LEGACY(it->g, qf_legacy_iter_next(it, quotient, remainder, count));
	qf_arrays(&A, it->g, it->area);
	if (pos >= A.nslots)
		return false;
	if (!bit_get(A.cont, pos))
	{
		uint32		b;

		/* a run start, or empty slots before the next cluster */
		pos = next_of(&A, W_NONEMPTY, pos, A.nslots);
		if (pos >= A.nslots)
		{
			it->pos = A.nslots;
			return false;
		}
		b = next_of(&A, W_OCC, (uint32) (it->bucket + 1), A.nhome);
		if (b >= A.nhome)
		{
			it->pos = A.nslots;	/* corrupt area: a run without bucket */
			return false;
		}
		it->bucket = b;
	}
	d = digits_at(&A, pos, A.nslots);
	*quotient = (uint32) it->bucket;
	*remainder = rem_get(&A, pos);
	*count = count_decode(&A, pos, d);
	it->pos = pos + 1 + d;
	return true;
}

void
qf_area_stats(const QfGeom *g, const char *area, QfStats *stats)
{
	QfAreaHeader h;

	hdr_read(area, &h);
	stats->nitems = h.nitems;
	stats->nused = h.nused;
	stats->total_count = h.total_count;
	stats->load = (double) h.nused / g->nhome;
}

void
qf_builder_init(QfBuilder *b, const QfGeom *g, char *area)
{
	qf_area_init(g, area);
	b->g = g;
	b->area = area;
	b->next = 0;
	b->lastq = -1;
	b->lastr = 0;
}

QfStatus
qf_builder_add(QfBuilder *b, uint32 quotient, uint64 remainder, uint64 count)
{
	QfArrays	A;
	QfAreaHeader h;
	bool		same_run;
	uint32		start;
	uint32		n;

	QF_TO_LEGACY(b->g, qf_legacy_builder_add(b, quotient, remainder, count));
	if (!args_ok(b->g, quotient, remainder) ||
		(int64) quotient < b->lastq ||
		((int64) quotient == b->lastq && remainder <= b->lastr))
		return QF_INVALID;
	if (count == 0)
		return QF_OK;
	qf_arrays(&A, b->g, b->area);
	same_run = (int64) quotient == b->lastq;
	start = same_run ? b->next : Max(quotient, b->next);
	n = 1 + count_digits(count, A.rbits);
	if ((uint64) start + n > A.nslots)
		return QF_FULL;

	bit_put(A.occ, quotient, true);
	slots_mark(&A, start, 1, same_run, start != quotient, false);
	rem_put(&A, start, remainder);
	if (n > 1)
	{
		slots_mark(&A, start + 1, n - 1, true, true, true);
		count_encode(&A, start, count);
	}
	b->next = start + n;
	b->lastq = quotient;
	b->lastr = remainder;

	hdr_read(b->area, &h);
	h.nitems++;
	h.nused += n;
	h.total_count = sat_add(h.total_count, count);
	hdr_write(b->area, &h);
	return QF_OK;
}

QfStatus
qf_merge_areas(const QfGeom *g, const char *a, const char *b, char *out)
{
	QfBuilder	bld;
	QfIter		ia;
	QfIter		ib;
	uint32		qa = 0,
				qb = 0;
	uint64		ra = 0,
				rb = 0,
				ca = 0,
				cb = 0;
	bool		has_a;
	bool		has_b;

	qf_builder_init(&bld, g, out);
	qf_iter_init(&ia, g, a);
	qf_iter_init(&ib, g, b);
	has_a = qf_iter_next(&ia, &qa, &ra, &ca);
	has_b = qf_iter_next(&ib, &qb, &rb, &cb);
	while (has_a || has_b)
	{
		QfStatus	st;
		int			cmp;

		if (!has_b)
			cmp = -1;
		else if (!has_a)
			cmp = 1;
		else if (qa != qb)
			cmp = qa < qb ? -1 : 1;
		else
			cmp = ra < rb ? -1 : (ra > rb ? 1 : 0);

		if (cmp < 0)
			st = qf_builder_add(&bld, qa, ra, ca);
		else if (cmp > 0)
			st = qf_builder_add(&bld, qb, rb, cb);
		else
			st = qf_builder_add(&bld, qa, ra, sat_add(ca, cb));
		if (st != QF_OK)
			return st;
		if (cmp <= 0)
			has_a = qf_iter_next(&ia, &qa, &ra, &ca);
		if (cmp >= 0)
			has_b = qf_iter_next(&ib, &qb, &rb, &cb);
	}
	return QF_OK;
}

QfStatus
qf_split_area(const QfGeom *g_old, const char *area, const QfGeom *g_new,
			  char *out_lo, char *out_hi)
{
	QfBuilder	lo;
	QfBuilder	hi;
	QfIter		it;
	uint32		q;
	uint64		r;
	uint64		c;
	int			s = pg_leftmost_one_pos32(g_old->nhome);
	int			rb = g_old->rbits;

	if (g_old->nhome != ((uint32) 1 << s) || g_new->nhome != g_old->nhome ||
		g_new->rbits != rb - 1)
		return QF_INVALID;
	qf_builder_init(&lo, g_new, out_lo);
	qf_builder_init(&hi, g_new, out_hi);
	qf_iter_init(&it, g_old, area);
	while (qf_iter_next(&it, &q, &r, &c))
	{
		uint32		nq = (uint32) ((((uint64) q << 1) | (r >> (rb - 1))) &
								   qf_mask(s));
		uint64		nr = r & qf_mask(rb - 1);
		QfStatus	st;

		st = qf_builder_add((q >> (s - 1)) ? &hi : &lo, nq, nr, c);
		if (st != QF_OK)
			return st;
	}
	return QF_OK;
}
