/*-------------------------------------------------------------------------
 *
 * qf.h
 *	  Counting quotient filter areas: the core shared by the paged quotient
 *	  filters (one area per 8 kB page) and the in-memory `qfilter` type (an
 *	  array of areas).
 *
 * A QF area is one contiguous byte area holding an independent quotient
 * filter (Bender et al., "Don't thrash: how to cache your hash on flash",
 * section 3) over nhome home slots (any number) followed by nslack slack
 * slots.
 * There is no wrap-around: a run that would extend past the last slack
 * slot makes the insert fail with QF_FULL, leaving the area unchanged.
 * Keeping every operation inside one area is what lets the paged filters
 * put one area in each page and never shift across pages.
 *
 * This file and qf.c use no backend function (no palloc, no elog): every
 * function returns a status and the caller raises the error, so the code
 * also runs in a standalone unit test (test/unit/qf_test.c).
 *
 * Fingerprints
 * ------------
 * A fingerprint is (quotient, remainder) with quotient < nhome and
 * remainder < 2^rbits.  A paged or multi-area filter (whose areas have
 * nhome = 2^slot_bits home slots) takes the top
 * page_bits + slot_bits + rbits bits of a 64-bit hash: the top page_bits
 * select the area, the next slot_bits are the quotient, the next rbits the
 * remainder (qf_fingerprint_split).  Areas therefore cover contiguous,
 * increasing ranges of the hash space, so iterating the areas in order
 * visits fingerprints in increasing order (what merges need), and moving one
 * bit from the remainder to the page index (qf_split_area) doubles the
 * number of areas without rehashing.
 *
 * Slots and counts
 * ----------------
 * Each slot has an rbits-wide payload and three metadata bits:
 *	 occupied	 (per home slot i) some fingerprint has quotient i
 *	 continuation the slot belongs to the same run as the slot before it
 *	 shifted	 the slot's content is not in its home slot
 * A slot is empty iff occupied, continuation and shifted are all 0.  Runs
 * (all fingerprints of one quotient) hold their remainders in strictly
 * increasing order; clusters are packed: a run starts at
 * max(its home slot, end of the previous run + 1).
 *
 * A fingerprint of multiplicity c is stored as its remainder slot followed
 * by d counter slots whose payloads are the base-2^rbits digits of c - 1,
 * least significant first, with no trailing zero digit (d = 0 for c = 1),
 * so the encoding is unique.  A counter slot is marked continuation = 1,
 * shifted = 0: a combination no remainder has (a continuation is never in
 * its home slot), so the counter needs no fourth bit.  Read as "shifted",
 * a counter slot is shifted.  Counts go up to 2^64-1 (at most
 * ceil(64/rbits) digits) and saturate there: adding to a saturated count
 * leaves it at 2^64-1.
 *
 * Because the layout is a pure function of the multiset of fingerprints
 * (packed runs, sorted remainders, canonical digits, empty slots all-zero),
 * two areas of the same geometry holding the same multiset are
 * byte-identical (except total_count after saturation, see below),
 * whatever the order of operations that built them.
 *
 * Area layout (geometry in QfGeom, offsets in bytes from the area start)
 * -----------
 *	 QfAreaHeader					 QF_HEADER_SIZE (32) bytes
 *	 occupied bits					 nwords 64-bit words, bit i = slot i
 *	 continuation bits				 nwords words
 *	 shifted bits					 nwords words
 *	 payloads (remainders/digits)	 rwords words, packed: slot i occupies
 *									 bits [i*rbits, (i+1)*rbits) of the
 *									 array, bit k of word w being bit
 *									 64*w + k
 * where nwords = ceil(nslots/64) and rwords = ceil(nslots*rbits/64).  Bits
 * past the last slot are zero.  Separate bit arrays let lookups find
 * cluster starts, run starts and empty slots with whole-word operations
 * (popcount, count-trailing-zeros, select) instead of per-slot loops.
 * Words are read and written with memcpy, so the area needs no alignment
 * (a varlena's data can be passed directly); words are in native byte
 * order, like every other page content.
 *
 * Costs: insert, lookup and remove are O(cluster length / 64) word
 * operations plus O(run length) payload reads; iteration is O(nslots).
 *
 * Operations on a corrupted area never read or write outside the area and
 * always terminate, but their results are meaningless; qf_area_check()
 * detects corruption (callers report it with ereport(ERROR,
 * ERRCODE_DATA_CORRUPTED) and the returned message).  Merge and split
 * return QF_INVALID when an input yields fingerprints out of order, which
 * only a corrupted input does.
 *
 * Using areas in pages and values
 * -------------------------------
 * Persist (home slots, rbits, area size) and rebuild the geometry with
 * qf_geom_init_slots(g, nhome, rbits, QF_SLACK_FILL, area_size): after
 * a resize, qf_geom_init(rbits - 1, ...) may choose a different nhome.
 * A page holds one area of at most SS_PAGE_DATA_SIZE bytes (pd_lower must
 * cover g->area_bytes so generic WAL keeps it); a varlena holds an array
 * of areas of the same geometry, at any alignment.  qf_area_check_header()
 * is O(1) and fit for every page read; qf_area_check() is O(nslots).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QF_H
#define QF_H

#include <math.h>

#include "postgres.h"

#include "port/pg_bitutils.h"
#include "ss_page.h"

/*
 * The area of a page of the paged filters (and the stride of a qfilter
 * value's areas): the page's data area, rounded down to the 24 bytes that
 * both the 8-byte words and the 3-word blocks of an area divide.
 */
#define QF_PAGE_AREA_BYTES		((SS_PAGE_DATA_SIZE / 24) * 24)

/*
 * "QFA2" in little-endian memory.  "QFA1" was the layout with a fourth
 * (counter) bit array, which this code does not read.
 */
#define QF_MAGIC			0x32414651
#define QF_HEADER_SIZE		32

#define QF_MIN_RBITS		1
#define QF_MAX_RBITS		60
#define QF_MIN_SLOT_BITS	1
#define QF_MAX_SLOT_BITS	28
#define QF_MIN_HOME			2
#define QF_MAX_HOME			((uint32) 1 << QF_MAX_SLOT_BITS)

/* Most counter digits a fingerprint can have (rbits = 1, c - 1 >= 2^63). */
#define QF_MAX_DIGITS		64

/* qf_geom_init_slots(): use every slot that fits as slack. */
#define QF_SLACK_FILL		PG_UINT32_MAX

typedef enum QfStatus
{
	QF_OK = 0,
	QF_FULL,					/* no room up to the last slack slot; area
								 * unchanged */
	QF_INVALID					/* argument out of range (or out of order for
								 * a builder); area unchanged */
} QfStatus;

/*
 * The header at the start of every area.  rbits, nhome and nslack repeat
 * the geometry so that qf_area_check() can tell an area of another
 * geometry (or a foreign page) from ours.  total_count saturates at
 * 2^64-1 and then stays there (removals cannot know the true sum any
 * more); all other fields are exact.
 */
typedef struct QfAreaHeader
{
	uint32		magic;			/* QF_MAGIC */
	uint8		reserved;		/* 0 (log2 of nhome in QFA1 areas) */
	uint8		rbits;
	uint16		flags;			/* 0, reserved */
	uint32		nslack;
	uint32		nitems;			/* distinct fingerprints */
	uint32		nused;			/* non-empty slots (remainders + digits) */
	uint32		nhome;			/* (0 in QFA1 areas) */
	uint64		total_count;	/* sum of all counts, saturating */
} QfAreaHeader;

/* Geometry of an area: computed by qf_geom_init*, never stored as such. */
typedef struct QfGeom
{
	int			rbits;			/* payload bits per slot */
	uint32		nhome;			/* home slots, QF_MIN_HOME..QF_MAX_HOME */
	uint32		nslack;			/* slack slots after the home slots */
	uint32		nslots;			/* nhome + nslack */
	uint32		nwords;			/* 64-bit words of each metadata array */
	uint32		rwords;			/* 64-bit words of the payload array */
	uint32		occ_off;		/* byte offsets of the arrays */
	uint32		cont_off;
	uint32		shf_off;
	uint32		cnt_off;		/* legacy layout only: counter bits */
	uint32		rem_off;
	Size		area_bytes;		/* bytes the area uses (<= the size given) */
	bool		legacy;			/* the earlier "QFA1" layout (see below) */
} QfGeom;

typedef struct QfStats
{
	uint32		nitems;			/* distinct fingerprints */
	uint32		nused;			/* used slots */
	uint64		total_count;	/* sum of counts (saturating) */
	double		load;			/* nused / home slots (can exceed 1 thanks to
								 * the slack) */
} QfStats;

typedef struct QfIter
{
	const QfGeom *g;
	const char *area;
	uint32		pos;			/* next slot to decode */
	int64		bucket;			/* quotient of the current run, -1 before */
} QfIter;

/* Sequential writer of a fresh area (see qf_builder_add). */
typedef struct QfBuilder
{
	const QfGeom *g;
	char	   *area;
	uint32		next;			/* first free slot */
	int64		lastq;			/* last quotient added, -1 before */
	uint64		lastr;
} QfBuilder;

/*
 * Minimum slack for nhome home slots: QF_PAGE_SLACK (192) from 3072 home
 * slots on, down to 64 for 1024 and fewer (nhome/16 in between).  What
 * overflows past the last home slot is the queue of a linear-probing
 * table at its end, whose length depends on the load, not on the table
 * size, so the slack needed is about a constant.  Measured by
 * test/unit/qf_test.c (fills with random fingerprints): no QF_FULL below
 * 95% load with 64 slack slots after 1024 home slots or 128 after 4096 or
 * 8192 (500 to 2000 fills each), while 32 after 4096 failed in 2.7% of
 * the fills.  Pages sized so that their average load reaches 95% also see
 * the variance of the load between pages: simulated, a page then needs
 * more than 128 slack slots with probability about 3e-6 and the tail falls
 * about 20 times per 32 slots, hence 192 for page-sized areas.
 */
#define QF_PAGE_SLACK		192

static inline uint32
qf_min_slack(uint32 nhome)
{
	return Min(QF_PAGE_SLACK, Max(64, nhome / 16));
}

/*
 * Geometry for payloads of rbits bits in an area of area_bytes bytes: the
 * largest number of home slots such that home slots plus qf_min_slack()
 * fit, then every slot that still fits becomes slack (free bytes are worth
 * more as slack than as nothing).  The result depends only on (rbits,
 * area_bytes), so every area made with the same arguments has the same
 * geometry.  Returns false if rbits is out of range or even QF_MIN_HOME
 * home slots do not fit.  Callers that split fingerprints by bits use the
 * largest power of two up to g->nhome (qf_home_bits).
 */
extern bool qf_geom_init(QfGeom *g, int rbits, Size area_bytes);

/*
 * Geometry with explicit nhome and nslack (or QF_SLACK_FILL: all the
 * slots that fit, at least qf_min_slack()).  Returns false if a parameter
 * is out of range or the area does not fit in area_bytes.
 */
extern bool qf_geom_init_slots(QfGeom *g, uint32 nhome, int rbits,
							   uint32 nslack, Size area_bytes);

/*
 * Geometries of the earlier layout ("QFA1" areas: a fourth bit array for
 * the counter digits, 2^k home slots, 64 to 128 slack slots), which tables
 * and qfilter values written by earlier builds hold.  Every function below
 * reads and writes such an area through its geometry (qf_legacy.c), so
 * they stay usable as they are, and merges and builders can copy their
 * fingerprints into areas of the current layout.
 */
extern bool qf_geom_init_legacy(QfGeom *g, int rbits, Size area_bytes);
extern bool qf_geom_init_slots_legacy(QfGeom *g, uint32 nhome, int rbits,
									  uint32 nslack, Size area_bytes);

/* log2 of the largest power of two <= nhome (nhome >= 1). */
static inline int
qf_home_bits(uint32 nhome)
{
	return pg_leftmost_one_pos32(nhome);
}

/* Bytes an area of rbits-bit payloads and nslots slots takes. */
extern Size qf_area_size(int rbits, uint32 nslots);

/* Make area (g->area_bytes bytes) an empty filter. */
extern void qf_area_init(const QfGeom *g, char *area);

/*
 * Add count copies of a fingerprint (count 0 is a no-op).  QF_FULL and
 * QF_INVALID leave the area unchanged.
 */
extern QfStatus qf_insert(const QfGeom *g, char *area, uint32 quotient,
						  uint64 remainder, uint64 count);

/*
 * qf_count checking the slots it reads (for areas read from disk); false
 * with *msg set if they break the area's invariants.
 */
extern bool qf_count_checked(const QfGeom *g, const char *area,
							 uint32 quotient, uint64 remainder,
							 uint64 *count, const char **msg);

/* Multiplicity of a fingerprint, 0 if absent (or arguments out of range). */
extern uint64 qf_count(const QfGeom *g, const char *area, uint32 quotient,
					   uint64 remainder);

/*
 * Remove count copies of a fingerprint (all of them if it has fewer) and
 * return how many were removed.  Removing the last copy deletes the
 * remainder and shifts the rest of its cluster back.
 */
extern uint64 qf_remove(const QfGeom *g, char *area, uint32 quotient,
						uint64 remainder, uint64 count);

/* Iterate fingerprints in increasing (quotient, remainder) order. */
extern void qf_iter_init(QfIter *it, const QfGeom *g, const char *area);
extern bool qf_iter_next(QfIter *it, uint32 *quotient, uint64 *remainder,
						 uint64 *count);

/* Counters from the header: O(1). */
extern void qf_area_stats(const QfGeom *g, const char *area, QfStats *stats);

/*
 * Validate every invariant of an area against geometry g: header, bit
 * arrays, run and cluster structure, remainder order, count encoding,
 * header counters.  O(nslots).  On failure returns false and sets *msg to
 * a static English message.
 */
extern bool qf_area_check(const QfGeom *g, const char *area, const char **msg);

/*
 * The O(1) part of qf_area_check: magic, geometry and plausible counters.
 * Cheap enough for every access to a page read from disk.
 */
extern bool qf_area_check_header(const QfGeom *g, const char *area,
								 const char **msg);

/*
 * Sequential builder: writes fingerprints given in strictly increasing
 * (quotient, remainder) order into an area it initializes, in O(1) per
 * fingerprint (each one is appended after the previous, no shifting).
 * qf_builder_add returns QF_INVALID for out-of-range or out-of-order
 * input and QF_FULL when the area has no room; either way the area stays a
 * valid filter holding what was added before.
 */
extern void qf_builder_init(QfBuilder *b, const QfGeom *g, char *area);
extern QfStatus qf_builder_add(QfBuilder *b, uint32 quotient,
							   uint64 remainder, uint64 count);

/*
 * Merge areas a and b of geometry g into out (same geometry, must not
 * overlap a or b) by a two-way merge of their iterators; the counts of equal
 * fingerprints are added (saturating).  On QF_FULL, out is a valid but
 * partial filter.
 */
extern QfStatus qf_merge_areas(const QfGeom *g, const char *a, const char *b,
							   char *out);

/*
 * Resize by one bit: distribute the fingerprints of an area of geometry
 * g_old (2^slot_bits home slots, rbits) into two fresh areas of geometry
 * g_new, which must have the same home slots and rbits - 1.  The page index gains one
 * bit: with q, r the old quotient and remainder,
 *	 new page bit  = top bit of q (0: out_lo, 1: out_hi)
 *	 new quotient  = (q << 1 | top bit of r) mod 2^slot_bits
 *	 new remainder = r without its top bit
 * which is exactly where qf_fingerprint_split() with page_bits + 1 and
 * rbits - 1 puts the key's hash, so nothing is rehashed.  Counts carry
 * over.  QF_FULL is possible (smaller digits can need more counter slots,
 * and skewed contents can overload one half); the outputs are then valid
 * but partial.  QF_INVALID if the geometries do not match.
 */
extern QfStatus qf_split_area(const QfGeom *g_old, const char *area,
							  const QfGeom *g_new, char *out_lo,
							  char *out_hi);

/*
 * Sizing shared by the paged filters and the qfilter type, so that filters
 * made with the same capacity and false-positive rate have the same
 * fingerprint size and can be merged.  A QF at load alpha answers yes for
 * an absent key with probability about alpha * 2^-r; filters grow past
 * QF_MAX_LOAD of their home slots.
 */
#define QF_MAX_LOAD			0.95

/* Smallest r >= 1 with QF_MAX_LOAD * 2^-r <= fp_rate (65 if more than 64). */
static inline int
qf_rbits_for_fp_rate(double fp_rate)
{
	double		r = ceil(log2(QF_MAX_LOAD / fp_rate));

	/* compare in double: a denormal rate makes r infinite */
	return r > 64 ? 65 : Max((int) r, 1);
}

/*
 * The load a filter sized to its capacity is sized for and grows past
 * (qf_sized_base): QF_MAX_LOAD, or QF_MAX_LOAD_SHORT for remainders of at
 * most QF_SHORT_RBITS bits where the rate still holds at it (its
 * alpha * 2^-r <= fp_rate, r unchanged).  Short remainders make the
 * metadata bits a larger share of a slot, so their filters need the higher
 * load to be as small as a Bloom filter of the same rate; at 0.97 a page
 * of 192 slack slots overflows before the filter reaches its capacity with
 * a probability of about 5e-6 (simulated), and then grows early.
 */
#define QF_SHORT_RBITS		7
#define QF_MAX_LOAD_SHORT	0.97

static inline double
qf_sized_load(double fp_rate)
{
	int			r = qf_rbits_for_fp_rate(fp_rate);

	return r <= QF_SHORT_RBITS && ldexp(QF_MAX_LOAD_SHORT, -r) <= fp_rate ?
		QF_MAX_LOAD_SHORT : QF_MAX_LOAD;
}

/* Smallest t >= 1 with QF_MAX_LOAD * 2^t >= n (at most 64). */
static inline int
qf_slots_log2_for(double n)
{
	int			t = 1;

	while (t < 64 && ldexp(QF_MAX_LOAD, t) < n)
		t++;
	return t;
}

/* Low n bits set (0 <= n <= 64). */
static inline uint64
qf_mask(int n)
{
	return n >= 64 ? PG_UINT64_MAX : (UINT64CONST(1) << n) - 1;
}

/*
 * Whether bit widths (as read from a page or value header) describe a
 * fingerprint the split and join below can handle: every width in range and
 * 1..64 bits in total.  The widths come from data that may be damaged, and
 * a shift by 64 or more is undefined, so this is a real check rather than
 * an assertion (an assertion is compiled out of production builds).
 */
static inline bool
qf_fingerprint_bits_valid(int page_bits, int slot_bits, int rbits)
{
	return page_bits >= 0 && page_bits <= 64 &&
		slot_bits >= 0 && slot_bits <= QF_MAX_SLOT_BITS &&
		rbits >= 0 && rbits <= QF_MAX_RBITS &&
		page_bits + slot_bits + rbits >= 1 &&
		page_bits + slot_bits + rbits <= 64;
}

/*
 * Split a 64-bit hash into (page, quotient, remainder): the fingerprint is
 * the top page_bits + slot_bits + rbits bits of h (1..64 bits in total).
 * Returns false, with all three set to 0, if the widths are invalid
 * (qf_fingerprint_bits_valid); callers holding widths from a header that
 * they have not validated must check the result.
 */
static inline bool
qf_fingerprint_split(uint64 h, int page_bits, int slot_bits, int rbits,
					 uint64 *page, uint32 *quotient, uint64 *remainder)
{
	int			total = page_bits + slot_bits + rbits;
	uint64		fp;

	if (!qf_fingerprint_bits_valid(page_bits, slot_bits, rbits))
	{
		*page = 0;
		*quotient = 0;
		*remainder = 0;
		return false;
	}
	fp = h >> (64 - total);
	*remainder = fp & qf_mask(rbits);
	*quotient = (uint32) ((fp >> rbits) & qf_mask(slot_bits));
	*page = page_bits == 0 ? 0 : fp >> (slot_bits + rbits);
	return true;
}

/*
 * The inverse: the hash prefix whose split is (page, quotient, remainder),
 * i.e. the fingerprint in the top bits of a 64-bit value, the rest 0.  0
 * for invalid widths (qf_fingerprint_bits_valid), which a caller with
 * widths from an unvalidated header must rule out first.
 */
static inline uint64
qf_fingerprint_join(uint64 page, uint32 quotient, uint64 remainder,
					int page_bits, int slot_bits, int rbits)
{
	int			total = page_bits + slot_bits + rbits;
	uint64		fp;

	if (!qf_fingerprint_bits_valid(page_bits, slot_bits, rbits))
		return 0;
	fp = (remainder & qf_mask(rbits)) |
		(((uint64) quotient & qf_mask(slot_bits)) << rbits);
	if (page_bits > 0)
		fp |= (page & qf_mask(page_bits)) << (slot_bits + rbits);
	return fp << (64 - total);
}

/*
 * Fingerprints sized to a capacity.  A filter of N home slots (any
 * number) and r remainder bits has the fingerprint space M = N * 2^r: a
 * hash h maps to y = floor(h * M / 2^64) (a range reduction by one
 * multiply), its quotient is y >> r and its remainder the low r bits of y.
 * M is given as mult * 2^exp (mult odd or 1): a level of N * 2^j home slots
 * and r - j remainder bits has the same M and the same y for every hash,
 * so the levels of one filter merge and grow without rehashing.  With
 * mult = 1, y is the top exp bits of h, the bit split above.
 */
#ifndef HAVE_INT128
#error "quotient filters need a 128-bit integer type"
#endif

/* Whether mult * 2^exp is a fingerprint space the map handles (<= 2^64). */
static inline bool
qf_space_valid(uint64 mult, int exp)
{
	return mult >= 1 && exp >= 0 && exp <= 64 &&
		(exp == 64 ? mult == 1 : mult <= (PG_UINT64_MAX >> exp));
}

/* y of hash h in the space mult * 2^exp (qf_space_valid). */
static inline uint64
qf_space_y(uint64 h, uint64 mult, int exp)
{
	if (mult == 1)
		return exp == 0 ? 0 : h >> (64 - exp);
	return (uint64) (((uint128) h * mult) >> (64 - exp));
}

/*
 * The smallest hash whose y is y: the 64-bit value that stands for the
 * fingerprint where fingerprints are compared or passed between levels and
 * filters (with mult = 1, y in the top bits), increasing with y.
 */
static inline uint64
qf_space_hash(uint64 y, uint64 mult, int exp)
{
	if (mult == 1)
		return exp == 0 ? 0 : y << (64 - exp);
	return (uint64) ((((uint128) y << (64 - exp)) + (mult - 1)) / mult);
}

/* The hash standing for h's fingerprint (qf_space_hash of its y). */
static inline uint64
qf_space_fp(uint64 h, uint64 mult, int exp)
{
	if (mult == 1)
		return exp == 0 ? 0 : h & ~qf_mask(64 - exp);
	return qf_space_hash(qf_space_y(h, mult, exp), mult, exp);
}

/*
 * Split y into (page, quotient in the page, remainder) for pages of nhome
 * home slots and rbits remainder bits, and back.
 */
static inline void
qf_space_split(uint64 y, int rbits, uint32 nhome, uint64 *page,
			   uint32 *quotient, uint64 *remainder)
{
	uint64		q = y >> rbits;

	*remainder = y & qf_mask(rbits);
	/* a 32-bit division is the faster one on common CPUs */
	*page = q <= PG_UINT32_MAX ? (uint32) q / nhome : q / nhome;
	*quotient = (uint32) (q - *page * nhome);
}

static inline uint64
qf_space_join(uint64 page, uint32 quotient, uint64 remainder, int rbits,
			  uint32 nhome)
{
	return ((page * nhome + quotient) << rbits) | (remainder & qf_mask(rbits));
}

/*
 * Sizing to a capacity, shared by the sized quotient_filter tables and the
 * qfilter type so that both get the same fingerprint space for the same
 * capacity and rate (and qf_merge_value is exact).  The base is P areas of
 * nhome home slots at rbits remainder bits, M = P * nhome * 2^rbits:
 * nhome = what qf_geom_init gives at rbits (areas as full as their slack
 * allows) and P = ceil(ceil(capacity / load) / nhome) rounded up to
 * QF_SIZED_SIG_BITS significant bits (at most 0.1% more), so that nearby
 * capacities share their space; below one area, one area of
 * ceil(capacity / load) home slots rounded likewise.  load is the rate's
 * qf_sized_load.  False if rbits has no area geometry or P would exceed
 * 2^max_page_bits.
 */
#define QF_SIZED_SIG_BITS	10

extern bool qf_sized_base(int64 capacity, double load, int rbits,
						  Size area_bytes, int max_page_bits, uint64 *pages,
						  uint32 *nhome);

/*
 * qf_sized_base with nhome a multiple of align (the full area's home
 * slots rounded down to one, a one-area filter's rounded up), so that
 * levels below it can nest (qf_nested_shape).
 */
extern bool qf_sized_base_aligned(int64 capacity, double load, int rbits,
								  Size area_bytes, int max_page_bits,
								  uint32 align, uint64 *pages,
								  uint32 *nhome);

/*
 * A level j halvings below a base of `pages` areas of nhome home slots at
 * rbits (the space M = pages * nhome * 2^rbits): its remainders have
 * rbits + j bits, its areas nhome / 2^(j - b) home slots for the largest
 * b <= j (nondecreasing in j) that fits an area at each level on the way
 * (and no larger than makes one area of the whole space),
 * so each of its ceil(pages / 2^b) areas covers the fingerprints of 2^b
 * base areas: every area of a larger level lies within one of a smaller
 * level's (the last area may be partly used).  False if nhome is not a
 * multiple of 2^(j - b), or the remainders or home slots run out.
 */
extern bool qf_nested_shape(int rbits, uint64 pages, uint32 nhome, int j,
							Size area_bytes, uint64 *npages,
							uint32 *nhome_j);

/* M = n * 2^rbits as mult * 2^exp, mult odd (n >= 1). */
static inline void
qf_space_of(uint64 n, int rbits, uint64 *mult, int *exp)
{
	int			z = pg_rightmost_one_pos64(n);

	*mult = n >> z;
	*exp = rbits + z;
}

/*
 * The canonical shape of a filter of the space mult * 2^exp at rbits
 * remainder bits in areas of area_bytes: its M / 2^rbits home slots in the
 * fewest areas that divide them evenly with at most what qf_geom_init
 * gives per area (and QF_MAX_HOME).  A function of (M, rbits) alone, so
 * filters of one space agree on it whatever their history.  False if
 * rbits > exp, rbits has no area geometry or it takes more than max_pages
 * areas.
 */
extern bool qf_space_shape(uint64 mult, int exp, int rbits, Size area_bytes,
						   uint64 max_pages, uint32 *nhome, uint64 *npages);

/*
 * The bytes of an area of nhome home slots trimmed to them: nhome +
 * qf_min_slack(nhome) slots, rounded up to 24 bytes as QF_PAGE_AREA_BYTES
 * is; an area of these bytes uses every slot they hold
 * (qf_geom_init_slots with QF_SLACK_FILL).  For nhome up to the home slots
 * qf_geom_init gives a page area at rbits, at most QF_PAGE_AREA_BYTES.
 * What the qfilter type's areas take (the paged filters' areas are the
 * page's).
 */
static inline Size
qf_trimmed_area_bytes(uint32 nhome, int rbits)
{
	return (qf_area_size(rbits, nhome + qf_min_slack(nhome)) + 23) / 24 * 24;
}

#endif							/* QF_H */
