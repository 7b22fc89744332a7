/*-------------------------------------------------------------------------
 *
 * lert_page.h
 *	  The page formats of a LERT's levels, on raw page data areas.
 *
 * Entries.  A key's count at one level is an entry: a fixed header
 * (LertEntry: fingerprint, count, first position, disk count, flags, key
 * length) followed by the key's bytes (none for keys of at most 8 bytes,
 * whose fingerprint is the key), padded to 8 bytes.  Entries are ordered
 * by (fingerprint, key length, key bytes), so equal fingerprints of
 * different keys stay apart and every level lists keys in one order.  An
 * entry never spans pages.
 *
 * Level-0 pages.  A header, then a sorted array of 16-bit offsets growing
 * up and the entries they point to growing down from the end (as a heap
 * page's line pointers): a new key is one offset moved and one entry
 * appended, a count changes in place.  The header keeps the change-log
 * position up to which committed records were applied to the page, and
 * the page's form: keyed (LertEntry and key bytes, any key) or fixed
 * (LertFixedEntry, 24 bytes, for keys of at most 8 bytes, whose
 * fingerprint is the key, in variants that keep no disk count at level 0;
 * its flags live in the low bits of its offset, as a heap line pointer's
 * lp_flags share a word with lp_off).  Level 0 is meant to stay in RAM:
 * the fixed form holds 1.6 times as many keys per page.
 *
 * Run pages (on-disk levels).  A header and entries packed in order; a run
 * is a sequence of such pages written once, front to back.
 *
 * Nothing here calls the backend: no palloc, no elog; a damaged page is
 * reported by the caller when lert_*_check returns false.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LERT_PAGE_H
#define LERT_PAGE_H

#include "postgres.h"

#include "lert_core.h"

typedef struct LertEntry
{
	uint64		fp;
	int64		count;
	int64		first_pos;		/* LERT_REPORTED: the count at the report
								 * (LertCount) */
	int64		disk_sum;		/* level 0: LERT_DISK_KNOWN; runs:
								 * LERT_RUN_KEPT */
	uint32		keylen;			/* key bytes after the header */
	uint16		flags;			/* LERT_REPORTED, LERT_DISK_KNOWN,
								 * LERT_RUN_KEPT */
	uint16		age;			/* unused, zero */
} LertEntry;

/*
 * A run entry flagged LERT_RUN_KEPT also carries, in disk_sum, the key's
 * level-0 count as the merge that wrote it left it (count stretch and
 * immediate keep a key's count above the on-disk thresholds at level 0
 * until the key is reported): level 0 holds only keys observed since the
 * cone's last flush, and the rest of what the rules call level 0 lives
 * in the runs.  The flagged entry of the shallowest level holding one is
 * the current value (a merge writes it at the deepest level it rewrites,
 * and rewrites every shallower level), a flagged entry with disk_sum 0
 * hides deeper ones, and a key present in level 0 took it over there when
 * it was first observed since the flush, at once (immediate) or when its
 * level-0 count could reach T or at the next flush (count stretch,
 * LERT_L0_KEPT_PENDING until then; docs/lert.md, "Level 0").
 */
#define LERT_RUN_KEPT		0x0008

/*
 * A level-0 entry whose count does not include the key's kept count yet
 * (count stretch; a flag bit of a fixed-form entry's offset).
 */
#define LERT_L0_KEPT_PENDING	0x0004

#define LERT_ENTRY_HEADER	((Size) sizeof(LertEntry))	/* 40 */

static inline Size
lert_entry_size(uint32 keylen)
{
	return LERT_ENTRY_HEADER + TYPEALIGN(8, (Size) keylen);
}

static inline const char *
lert_entry_key(const LertEntry *e)
{
	return (const char *) e + LERT_ENTRY_HEADER;
}

/* Order of two keys: fingerprint, then length, then bytes. */
static inline int
lert_key_cmp(uint64 fp1, const char *key1, uint32 len1,
			 uint64 fp2, const char *key2, uint32 len2)
{
	int			c;

	if (fp1 != fp2)
		return fp1 < fp2 ? -1 : 1;
	if (len1 != len2)
		return len1 < len2 ? -1 : 1;
	if (len1 == 0)
		return 0;
	c = memcmp(key1, key2, len1);
	return c < 0 ? -1 : c > 0;
}

/* ---- level-0 pages ---- */

typedef struct LertL0Header
{
	uint64		gen;			/* the level 0 it belongs to (first: see
								 * lert_read_page) */
	uint64		applied_pos;	/* change-log records before it are in */
	uint16		nentries;
	uint16		lower;			/* end of the offsets (from the area start) */
	uint16		upper;			/* start of the entries */
	uint16		form;			/* LERT_L0_KEYED or LERT_L0_FIXED */
} LertL0Header;

#define LERT_L0_KEYED		0
#define LERT_L0_FIXED		1

/* An entry of a fixed-form level-0 page; its flags are in its offset. */
typedef struct LertFixedEntry
{
	uint64		fp;
	int64		count;
	int64		first_pos;		/* as LertEntry's */
} LertFixedEntry;

#define LERT_L0_OFFSET_FLAGS	((uint16) 7)	/* entries are 8-byte aligned */

/* Bytes a new entry takes on a level-0 page of the form, with its offset. */
static inline Size
lert_l0_entry_space(uint16 form, uint32 keylen)
{
	return (form == LERT_L0_FIXED ? sizeof(LertFixedEntry) :
			lert_entry_size(keylen)) + sizeof(uint16);
}

extern void lert_l0_init(char *area, Size area_size, uint64 applied_pos,
						 uint64 gen, uint16 form);
extern bool lert_l0_check(const char *area, Size area_size);
extern int	lert_l0_search(const char *area, uint64 fp, const char *key,
						   uint32 keylen, bool *found);
extern bool lert_l0_has_room(const char *area, uint32 keylen);
extern bool lert_l0_insert(char *area, int at, uint64 fp, const char *key,
						   uint32 keylen);
extern const char *lert_l0_get(const char *area, int i, LertEntry *e);
extern bool lert_l0_put(char *area, int i, int64 count, int64 first_pos,
						int64 disk_sum, uint32 flags);

static inline int
lert_l0_count(const char *area)
{
	return ((const LertL0Header *) area)->nentries;
}

/* ---- run pages ---- */

typedef struct LertRunHeader
{
	uint64		gen;			/* the run it belongs to (first) */
	uint32		nentries;
	uint32		used;			/* bytes of entries after the header */
} LertRunHeader;

extern void lert_run_page_init(char *area, uint64 gen);
extern bool lert_run_page_check(const char *area, Size area_size);
extern bool lert_run_page_add(char *area, Size area_size, const LertEntry *e,
							  const char *key);
extern const LertEntry *lert_run_page_next(const char *area, uint32 *offset);

#endif							/* LERT_PAGE_H */
