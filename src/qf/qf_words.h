/*-------------------------------------------------------------------------
 *
 * qf_words.h
 *	  64-bit word helpers of the quotient filter core (qf.c), shared with
 *	  the slot layout benchmark (test/unit/qf_repr_bench.c) so that both
 *	  layouts are measured with the same primitives.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QF_WORDS_H
#define QF_WORDS_H

#include "postgres.h"

#include "port/pg_bitutils.h"

/*
 * Word access.  memcpy lets areas sit at any alignment (varlena data is
 * only 4-aligned); compilers turn it into a plain load or store.
 */
static inline uint64
ld64(const char *p)
{
	uint64		v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void
st64(char *p, uint64 v)
{
	memcpy(p, &v, sizeof(v));
}

static inline int
popcount64(uint64 x)
{
#ifdef __POPCNT__
	return __builtin_popcountll(x);
#else
	/* SWAR: pg_popcount64 is in libpgport, which the unit test lacks */
	x = x - ((x >> 1) & UINT64CONST(0x5555555555555555));
	x = (x & UINT64CONST(0x3333333333333333)) +
		((x >> 2) & UINT64CONST(0x3333333333333333));
	x = (x + (x >> 4)) & UINT64CONST(0x0F0F0F0F0F0F0F0F);
	return (int) ((x * UINT64CONST(0x0101010101010101)) >> 56);
#endif
}

/* Position of the k-th (0-based) one bit of x; x has more than k ones. */
static inline int
select64(uint64 x, int k)
{
	uint64		b;
	uint64		prefix;
	int			byte = 0;
	int			before = 0;
	uint64		y;

	/* per-byte popcounts, then their prefix sums, one byte each */
	b = x - ((x >> 1) & UINT64CONST(0x5555555555555555));
	b = (b & UINT64CONST(0x3333333333333333)) +
		((b >> 2) & UINT64CONST(0x3333333333333333));
	b = (b + (b >> 4)) & UINT64CONST(0x0F0F0F0F0F0F0F0F);
	prefix = b * UINT64CONST(0x0101010101010101);
	while (byte < 7 && (int) ((prefix >> (byte * 8)) & 0xFF) <= k)
		byte++;
	if (byte > 0)
		before = (int) ((prefix >> ((byte - 1) * 8)) & 0xFF);
	y = (x >> (byte * 8)) & 0xFF;
	for (k -= before; k > 0; k--)
		y &= y - 1;
	return byte * 8 + pg_rightmost_one_pos64(y);
}

#endif							/* QF_WORDS_H */
