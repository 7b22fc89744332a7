/*-------------------------------------------------------------------------
 *
 * lert_core.h
 *	  The rules of the leveled external-memory reporting tables (LERT;
 *	  Pandey et al., SIGMOD 2020, and ../shared/papers/lert-design-notes.md),
 *	  apart from how levels are stored.
 *
 * A LERT counts the keys of a stream exactly and reports each key once,
 * soon after its T-th occurrence.  Level 0 (in RAM: hot pages) takes the
 * observations; level i >= 1 (on disk) holds up to g^i times level 0's
 * capacity, the last level any amount.  Level 0 is flushed when it is full
 * (count stretch, immediate, cascade) or every C0 / 2^a of its
 * observations (time stretch, C0 its capacity), and a flush numbered n
 * shuffle-merges levels 0..k with k = lert_merge_depth(n): level j >= 1
 * takes part in every g^(j-1)-th flush, the COLA schedule.  A
 * shuffle-merge adds up each key's counts over the levels taking part,
 * reports the key if they reach T, and places its count back according to
 * the variant (lert_place).
 *
 * Positions are indexes in the stream of observations (0, 1, ...); a
 * key's first position is that of its first observation.  The set of
 * reported keys is exact: a reported key keeps an entry flagged
 * LERT_REPORTED (its count keeps growing, so counts stay exact), and
 * before a key is reported the levels that do not take part are asked
 * whether one of them holds the flag (the caller's LertQueryFn).
 *
 * Variants and what bounds their delay (proved in docs/lert.md):
 *	count_stretch	each on-disk level i keeps at most tau_i of a key's
 *					count (smearing, deepest level first; the rest goes
 *					back to level 0).  A key is reported when its level-0
 *					count reaches T, or when a shuffle-merge finds its
 *					count over the levels taking part at T or more, so
 *					its count when reported is below T + sum(tau_i).
 *	immediate		count_stretch, and when a key's level-0 count reaches
 *					T - sum(tau_i) the on-disk levels are queried once for
 *					its count there, kept with the level-0 entry until the
 *					next shuffle-merge: the key is reported by the very
 *					observation that brings it to T.
 *	time_stretch	no tau; a key's whole count goes to the deepest level
 *					taking part whose merge period P_j (P_0 = C0 / 2^a,
 *					P_j = g^(j-1) * P_0) is at most its age (position of
 *					the merge minus its first position) / (2^a - 1), so
 *					the next merge that gathers it comes within
 *					(I_T - I_0) / (2^a - 1) of its T-th occurrence:
 *					time stretch <= 1 + 1 / (2^a - 1).  The paper keeps a
 *					bits of age per key for this; an entry here keeps the
 *					key's first position, which gives the age exactly.
 *	cascade			the cascade filter baseline of the evaluation: no
 *					timeliness, a key's count goes to the deepest level
 *					taking part.
 *
 * No function here calls the backend: no palloc, no elog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LERT_CORE_H
#define LERT_CORE_H

#include "postgres.h"

#define LERT_MAX_LEVELS		8	/* on-disk levels */
#define LERT_MAX_AGE_BITS	4
#define LERT_MAX_GROWTH		16

typedef enum LertVariant
{
	LERT_COUNT_STRETCH = 1,
	LERT_TIME_STRETCH = 2,
	LERT_IMMEDIATE = 3,
	LERT_CASCADE = 4
} LertVariant;

typedef struct LertGeom
{
	uint32		variant;		/* LertVariant */
	uint32		age_bits;		/* a, time_stretch only */
	uint32		growth;			/* g */
	uint32		nlevels;		/* on-disk levels L, 1..LERT_MAX_LEVELS */
	int64		threshold;		/* T */
	int64		level0_capacity;	/* C0: keys level 0 holds */
	int64		tau[LERT_MAX_LEVELS + 1];	/* tau[1..L]: count_stretch,
											 * immediate */
} LertGeom;

/* flags of a key's entry */
#define LERT_REPORTED		0x0001	/* the key was reported */
#define LERT_DISK_KNOWN		0x0002	/* immediate: disk_sum is the key's
									 * count on disk (level 0 only) */

/*
 * A key's count at one level (or over several, in a shuffle-merge).
 *
 * first_pos of an entry flagged LERT_REPORTED is the key's count at its
 * report, not a position: once a key is reported its first position no
 * longer enters any rule (lert_observe, lert_merge_report and lert_place
 * read it only of unreported keys; the report keeps it), and its count at
 * the report is what a lookup of the key's row returns, from the entries
 * it reads anyway instead of the report stream (docs/lert.md, "Plain SQL
 * lookups").  Every entry flagged reported carries it: the entry that made
 * the report, an entry flagged later because a deeper one is (the deeper
 * one's, through LertQueryFn), and a merged entry (lert_fold_first_pos).
 */
typedef struct LertCount
{
	int64		count;
	int64		first_pos;		/* -1: none yet; reported: count at report */
	int64		disk_sum;		/* with LERT_DISK_KNOWN */
	uint32		flags;
} LertCount;

/*
 * Ask the levels that do not hold the count being looked at (the on-disk
 * levels for an observation, levels deeper than k in a shuffle-merge) for
 * the key: its count there and whether one of them flags it reported;
 * first_pos is its first position there, or if it was reported, its count
 * at the report (LertCount).
 */
typedef void (*LertQueryFn) (void *arg, int64 *count, int64 *first_pos,
							 bool *reported);

/* A report: the position that makes it and the key's count there. */
typedef struct LertReport
{
	int64		position;
	int64		count;
	int64		first_pos;
} LertReport;

/*
 * What a key's first_pos becomes with one more of its entries (first_pos,
 * flagged reported or not) gathered, given what was gathered so far (a
 * position or -1; reported: whether an entry gathered so far is flagged,
 * its first_pos then the count at the report).  An entry of a reported key
 * may lie beside unflagged ones (a key reported by a merge keeps its
 * entries of the levels the merge did not take part in): the flagged
 * entry's count wins, and the positions of the others are moot.
 */
static inline int64
lert_fold_first_pos(int64 gathered, bool reported, int64 first_pos,
					bool entry_reported)
{
	if (reported)
		return gathered;
	if (entry_reported || gathered < 0)
		return first_pos;
	if (first_pos < 0)
		return gathered;
	return Min(gathered, first_pos);
}

extern const char *lert_variant_name(uint32 variant);
extern int	lert_variant_from_name(const char *name);
extern void lert_default_taus(uint32 growth, uint32 nlevels, int64 *tau);
extern int64 lert_tau_sum(const LertGeom *g);
extern const char *lert_geom_check(const LertGeom *g);
extern int64 lert_level0_period(const LertGeom *g);
extern int64 lert_level0_limit(const LertGeom *g, int64 kept);
extern int64 lert_merge_period(const LertGeom *g, uint32 level);
extern uint32 lert_merge_depth(const LertGeom *g, uint64 flush_no);
extern int64 lert_count_stretch_bound(const LertGeom *g);
extern double lert_time_stretch_bound(const LertGeom *g);

extern bool lert_observe(const LertGeom *g, LertCount *slot, int64 weight,
						 int64 pos, LertQueryFn query, void *query_arg,
						 LertReport *report);
extern bool lert_merge_report(const LertGeom *g, LertCount *merged,
							  int64 pos, bool deeper_levels,
							  LertQueryFn query, void *query_arg,
							  LertReport *report);
extern void lert_place(const LertGeom *g, uint32 depth, int64 pos,
					   const LertCount *merged, int64 *counts);

/*
 * The fingerprint of a key of at most 8 bytes is an invertible hash of
 * its (zero-padded) bytes: equal fingerprints mean equal keys, and the key
 * is recovered from the fingerprint (as the reference code's exact CQFs).
 * The mix is MurmurHash3's 64-bit finalizer, a bijection.
 */
static inline uint64
lert_fmix64_steps(uint64 k, uint64 m1, uint64 m2)
{
	k ^= k >> 33;
	k *= m1;
	k ^= k >> 33;
	k *= m2;
	k ^= k >> 33;
	return k;
}

static inline uint64
lert_fmix64(uint64 k)
{
	return lert_fmix64_steps(k, UINT64CONST(0xff51afd7ed558ccd),
							 UINT64CONST(0xc4ceb9fe1a85ec53));
}

/*
 * The inverse: the same steps (k ^= k >> 33 undoes itself) with the
 * multiplicative inverses of the two constants mod 2^64, in reverse order.
 */
static inline uint64
lert_fmix64_inverse(uint64 k)
{
	return lert_fmix64_steps(k, UINT64CONST(0x9cb4b2f8129337db),
							 UINT64CONST(0x4f74430c22a54005));
}

static inline uint64
lert_fixed_fingerprint(uint64 packed, uint64 seed)
{
	return lert_fmix64(packed ^ seed);
}

static inline uint64
lert_fixed_key(uint64 fingerprint, uint64 seed)
{
	return lert_fmix64_inverse(fingerprint) ^ seed;
}

#endif							/* LERT_CORE_H */
