/*-------------------------------------------------------------------------
 *
 * qf_internal.h
 *	  What qf.c (the operations) and qf_check.c (the validation) share of
 *	  the quotient filter area code: bit array reads, the per-slot
 *	  predicates a word at a time, runs and counts as read.  Included only
 *	  by those two files (and, through them, by qf_legacy.c, which compiles
 *	  both with QF_LEGACY for the earlier layout).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QF_INTERNAL_H
#define QF_INTERNAL_H

#include "postgres.h"

#include "port/pg_bitutils.h"

#include "qf.h"
#include "qf_words.h"

/* Largest area we describe: offsets are uint32, bit positions uint64. */
#define QF_MAX_SLOTS		(UINT64CONST(1) << 30)

#ifdef QF_LEGACY
#define QF_AREA_MAGIC		0x31414651	/* "QFA1" */
#define QF_NARRAYS			4	/* occupied, continuation, shifted, counter */
#define QF_TO_LEGACY(g, call)	((void) 0)
#else
#define QF_AREA_MAGIC		QF_MAGIC
#define QF_NARRAYS			3
/* a legacy geometry's operations are the QF_LEGACY build's */
#define QF_TO_LEGACY(g, call) \
	do { \
		if (unlikely((g)->legacy)) \
			return call; \
	} while (0)

/* the QF_LEGACY build's functions have the signatures of qf.h's */
extern __typeof__(qf_area_init) qf_legacy_area_init;
extern __typeof__(qf_insert) qf_legacy_insert;
extern __typeof__(qf_count_checked) qf_legacy_count_checked;
extern __typeof__(qf_count) qf_legacy_count;
extern __typeof__(qf_remove) qf_legacy_remove;
extern __typeof__(qf_iter_next) qf_legacy_iter_next;
extern __typeof__(qf_area_check) qf_legacy_area_check;
extern __typeof__(qf_area_check_header) qf_legacy_area_check_header;
extern __typeof__(qf_builder_add) qf_legacy_builder_add;
#endif

/*
 * Bit arrays.  A bit array is a sequence of 64-bit words at a byte
 * address; bit i is bit (i % 64) of word i / 64.
 */
static inline bool
bit_get(const char *a, uint32 i)
{
	return (ld64(a + (Size) (i >> 6) * 8) >> (i & 63)) & 1;
}

/* n bits (1..64) at bit position pos. */
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

/*
 * The arrays of one area, and derived per-slot predicates evaluated a word
 * at a time.  The kind argument is always a constant, so each search below
 * compiles to a loop over one specific word expression.
 */
typedef struct QfArrays
{
	char	   *occ;
	char	   *cont;
	char	   *shf;
#ifdef QF_LEGACY
	char	   *cnt;
#endif
	char	   *rem;
	uint32		nslots;
	uint32		nhome;
	int			rbits;
} QfArrays;

typedef enum QfWordKind
{
	W_OCC,						/* occupied */
	W_NOT_CONT,					/* not a continuation: run start or empty */
	W_NOT_SHF,					/* not shifted: decoding can start here */
	W_SHF_CLEAR,				/* not shifted, or a counter digit */
	W_NOT_CNT,					/* not a counter digit */
	W_EMPTY,					/* empty slot */
	W_NONEMPTY					/* used slot */
} QfWordKind;

static inline void
qf_arrays(QfArrays *A, const QfGeom *g, const char *area)
{
	char	   *base = unconstify(char *, area);

	A->occ = base + g->occ_off;
	A->cont = base + g->cont_off;
	A->shf = base + g->shf_off;
#ifdef QF_LEGACY
	A->cnt = base + g->cnt_off;
#endif
	A->rem = base + g->rem_off;
	A->nslots = g->nslots;
	A->nhome = g->nhome;
	A->rbits = g->rbits;
}

static inline uint64
word_of(const QfArrays *A, QfWordKind kind, uint32 w)
{
	Size		o = (Size) w * 8;

	switch (kind)
	{
		case W_OCC:
			return ld64(A->occ + o);
		case W_NOT_CONT:
			return ~ld64(A->cont + o);
#ifdef QF_LEGACY
		case W_NOT_SHF:
		case W_SHF_CLEAR:		/* unused */
			return ~ld64(A->shf + o);
		case W_NOT_CNT:
			return ~ld64(A->cnt + o);
#else
		case W_NOT_SHF:
			/* a counter (continuation without shifted) is shifted too */
			return ~(ld64(A->shf + o) | ld64(A->cont + o));
		case W_SHF_CLEAR:
			return ~ld64(A->shf + o);
		case W_NOT_CNT:
			return ~(ld64(A->cont + o) & ~ld64(A->shf + o));
#endif
		case W_EMPTY:
			return ~(ld64(A->occ + o) | ld64(A->cont + o) | ld64(A->shf + o));
		case W_NONEMPTY:
			return ld64(A->occ + o) | ld64(A->cont + o) | ld64(A->shf + o);
	}
	return 0;
}

/* The word of slot from where kind holds, without the slots before from. */
static inline uint64
word_from(const QfArrays *A, QfWordKind kind, uint32 from)
{
	return word_of(A, kind, from >> 6) & (PG_UINT64_MAX << (from & 63));
}

/* First slot in [from, limit) where kind holds, or limit. */
static inline uint32
next_of(const QfArrays *A, QfWordKind kind, uint32 from, uint32 limit)
{
	uint32		w;
	uint64		x;
	uint32		pos;

	if (from >= limit)
		return limit;
	w = from >> 6;
	x = word_from(A, kind, from);
	while (x == 0)
	{
		w++;
		if ((uint64) w * 64 >= limit)
			return limit;
		x = word_of(A, kind, w);
	}
	pos = w * 64 + pg_rightmost_one_pos64(x);
	return Min(pos, limit);
}

/* Last slot <= from where kind holds, or -1. */
static inline int64
prev_of(const QfArrays *A, QfWordKind kind, uint32 from)
{
	uint32		w = from >> 6;
	uint64		x = word_of(A, kind, w) & qf_mask((int) (from & 63) + 1);

	while (x == 0)
	{
		if (w == 0)
			return -1;
		w--;
		x = word_of(A, kind, w);
	}
	return (int64) w * 64 + pg_leftmost_one_pos64(x);
}

/* Number of slots in [from, to) where kind holds. */
static inline uint32
count_of(const QfArrays *A, QfWordKind kind, uint32 from, uint32 to)
{
	uint32		w = from >> 6;
	uint32		wlast;
	uint64		x;
	uint32		n = 0;

	if (from >= to)
		return 0;
	wlast = (to - 1) >> 6;
	x = word_from(A, kind, from);
	while (w < wlast)
	{
		n += popcount64(x);
		w++;
		x = word_of(A, kind, w);
	}
	x &= qf_mask((int) ((to - 1) & 63) + 1);
	return n + popcount64(x);
}

/* The k-th (1-based) slot at or after from where kind holds, or limit. */
static inline uint32
select_of(const QfArrays *A, QfWordKind kind, uint32 from, uint32 k,
		  uint32 limit)
{
	uint32		w;
	uint64		x;

	if (from >= limit)
		return limit;
	w = from >> 6;
	x = word_from(A, kind, from);
	for (;;)
	{
		uint32		c = popcount64(x);

		if (k <= c)
		{
			uint32		pos = w * 64 + select64(x, (int) k - 1);

			return Min(pos, limit);
		}
		k -= c;
		w++;
		if ((uint64) w * 64 >= limit)
			return limit;
		x = word_of(A, kind, w);
	}
}

static inline uint64
rem_get(const QfArrays *A, uint32 i)
{
	return bits_get(A->rem, (uint64) i * A->rbits, A->rbits);
}

/* Is slot i a counter digit? */
static inline bool
slot_is_cnt(const QfArrays *A, uint32 i)
{
#ifdef QF_LEGACY
	return bit_get(A->cnt, i);
#else
	return bit_get(A->cont, i) && !bit_get(A->shf, i);
#endif
}

/* Decode the d counter digits after the remainder in slot p. */
static inline uint64
count_decode(const QfArrays *A, uint32 p, uint32 d)
{
	uint64		v = 0;

	for (uint32 i = 0; i < d; i++)
	{
		uint32		shift = i * A->rbits;

		/* more digits than a valid count has only in corrupt areas */
		if (shift >= 64)
			break;
		v |= rem_get(A, p + 1 + i) << shift;
	}
	return v == PG_UINT64_MAX ? v : v + 1;
}

/* Counter slots following the remainder in slot p, inside [p, end). */
static inline uint32
digits_at(const QfArrays *A, uint32 p, uint32 end)
{
	return next_of(A, W_NOT_CNT, p + 1, end) - (p + 1);
}

static inline uint64
sat_add(uint64 a, uint64 b)
{
	return a > PG_UINT64_MAX - b ? PG_UINT64_MAX : a + b;
}

/*
 * Last slot <= from that is not shifted, or -1: prev_of(W_NOT_SHF), but
 * searching the shifted bits alone, a word load a step instead of two,
 * and stepping over the counter digits found (rare: only counts above 1
 * have them).  0 if a counter digit is found at slot 0 (a corrupt area).
 */
static inline int64
prev_unshifted(const QfArrays *A, uint32 from)
{
#ifdef QF_LEGACY
	return prev_of(A, W_NOT_SHF, from);
#endif
	for (;;)
	{
		int64		b = prev_of(A, W_SHF_CLEAR, from);

		if (b <= 0 || !slot_is_cnt(A, (uint32) b))
			return b;
		from = (uint32) b - 1;
	}
}

/* First slot after the run starting at s. */
static inline uint32
run_end(const QfArrays *A, uint32 s)
{
	return next_of(A, W_NOT_CONT, s + 1, A->nslots);
}

static inline void
hdr_read(const char *area, QfAreaHeader *h)
{
	memcpy(h, area, sizeof(*h));
}

static inline bool
args_ok(const QfGeom *g, uint32 quotient, uint64 remainder)
{
	return quotient < g->nhome && remainder <= qf_mask(g->rbits);
}

#endif							/* QF_INTERNAL_H */
