/*-------------------------------------------------------------------------
 *
 * lert_page.c
 *	  Level-0 and run page formats of a LERT (lert_page.h).
 *
 * The checks validate everything the other functions rely on, so a page
 * read from disk is checked once and then used without further bounds
 * tests: offsets inside the area and 8-byte aligned, entries inside the
 * area and not overlapping the offsets, keys in strictly increasing
 * order.
 *
 * No function here calls the backend.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lert_page.h"

#define L0_OFFSETS		MAXALIGN(sizeof(LertL0Header))
#define RUN_ENTRIES		MAXALIGN(sizeof(LertRunHeader))

StaticAssertDecl(sizeof(LertEntry) == 40, "LertEntry is 40 bytes");

static inline uint16 *
l0_offsets(char *area)
{
	return (uint16 *) (area + L0_OFFSETS);
}

static inline const uint16 *
l0_offsets_const(const char *area)
{
	return (const uint16 *) (area + L0_OFFSETS);
}

/* An empty level-0 page of area_size (< 64 kB) bytes. */
void
lert_l0_init(char *area, Size area_size, uint64 applied_pos, uint64 gen)
{
	LertL0Header *h = (LertL0Header *) area;

	Assert(area_size <= PG_UINT16_MAX);
	memset(area, 0, area_size);
	h->applied_pos = applied_pos;
	h->gen = gen;
	h->nentries = 0;
	h->lower = (uint16) L0_OFFSETS;
	h->upper = (uint16) TYPEALIGN_DOWN(8, area_size);
}

/* Is the level-0 page's layout sound? */
bool
lert_l0_check(const char *area, Size area_size)
{
	const LertL0Header *h = (const LertL0Header *) area;
	const uint16 *off = l0_offsets_const(area);
	const LertEntry *prev = NULL;

	if (area_size > PG_UINT16_MAX ||
		h->lower != L0_OFFSETS + (Size) h->nentries * sizeof(uint16) ||
		h->upper < h->lower || h->upper > area_size || h->upper % 8 != 0)
		return false;
	for (int i = 0; i < h->nentries; i++)
	{
		const LertEntry *e;

		if (off[i] < h->upper || off[i] % 8 != 0 ||
			(Size) off[i] + LERT_ENTRY_HEADER > area_size)
			return false;
		e = (const LertEntry *) (area + off[i]);
		if (e->keylen > area_size ||
			(Size) off[i] + lert_entry_size(e->keylen) > area_size)
			return false;
		if (prev != NULL &&
			lert_key_cmp(prev->fp, lert_entry_key(prev), prev->keylen,
						 e->fp, lert_entry_key(e), e->keylen) >= 0)
			return false;
		prev = e;
	}
	return true;
}

LertEntry *
lert_l0_entry(char *area, int i)
{
	return (LertEntry *) (area + l0_offsets(area)[i]);
}

/*
 * The index of the key's entry (*found) or where it would be inserted to
 * keep the order.
 */
int
lert_l0_search(const char *area, uint64 fp, const char *key, uint32 keylen,
			   bool *found)
{
	const LertL0Header *h = (const LertL0Header *) area;
	const uint16 *off = l0_offsets_const(area);
	int			lo = 0,
				hi = h->nentries;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;
		const LertEntry *e = (const LertEntry *) (area + off[mid]);
		int			c = lert_key_cmp(e->fp, lert_entry_key(e), e->keylen,
									 fp, key, keylen);

		if (c == 0)
		{
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* Bytes free for new entries and their offsets. */
Size
lert_l0_free(const char *area)
{
	const LertL0Header *h = (const LertL0Header *) area;

	return h->upper - h->lower;
}

/*
 * Insert an empty entry for the key at index `at` (from lert_l0_search);
 * NULL if it does not fit.
 */
LertEntry *
lert_l0_insert(char *area, int at, uint64 fp, const char *key, uint32 keylen)
{
	LertL0Header *h = (LertL0Header *) area;
	uint16	   *off = l0_offsets(area);
	Size		size = lert_entry_size(keylen);
	LertEntry  *e;

	if (at < 0 || at > h->nentries ||
		lert_l0_free(area) < size + sizeof(uint16))
		return NULL;
	h->upper -= (uint16) size;
	e = (LertEntry *) (area + h->upper);
	memset(e, 0, size);
	e->fp = fp;
	e->first_pos = -1;
	e->keylen = keylen;
	if (keylen > 0)
		memcpy((char *) e + LERT_ENTRY_HEADER, key, keylen);
	memmove(off + at + 1, off + at, (h->nentries - at) * sizeof(uint16));
	off[at] = h->upper;
	h->nentries++;
	h->lower += sizeof(uint16);
	return e;
}

/* ---- run pages ---- */

void
lert_run_page_init(char *area, uint64 gen)
{
	LertRunHeader *h = (LertRunHeader *) area;

	h->gen = gen;
	h->nentries = 0;
	h->used = 0;
}

/*
 * Append an entry (header e, key bytes key) to a run page; false if it
 * does not fit.  Entries must come in increasing key order.
 */
bool
lert_run_page_add(char *area, Size area_size, const LertEntry *e,
				  const char *key)
{
	LertRunHeader *h = (LertRunHeader *) area;
	Size		size = lert_entry_size(e->keylen);
	char	   *dst;

	if (RUN_ENTRIES + h->used + size > area_size)
		return false;
	dst = area + RUN_ENTRIES + h->used;
	memset(dst, 0, size);
	memcpy(dst, e, LERT_ENTRY_HEADER);
	if (e->keylen > 0)
		memcpy(dst + LERT_ENTRY_HEADER, key, e->keylen);
	h->used += (uint32) size;
	h->nentries++;
	return true;
}

/* Is the run page's layout sound (sizes, count, order)? */
bool
lert_run_page_check(const char *area, Size area_size)
{
	const LertRunHeader *h = (const LertRunHeader *) area;
	const LertEntry *prev = NULL;
	uint32		off = 0;
	uint32		n = 0;

	if (h->used > area_size - RUN_ENTRIES)
		return false;
	while (off < h->used)
	{
		const LertEntry *e = (const LertEntry *) (area + RUN_ENTRIES + off);

		if (h->used - off < LERT_ENTRY_HEADER ||
			e->keylen > area_size ||
			lert_entry_size(e->keylen) > h->used - off)
			return false;
		if (prev != NULL &&
			lert_key_cmp(prev->fp, lert_entry_key(prev), prev->keylen,
						 e->fp, lert_entry_key(e), e->keylen) >= 0)
			return false;
		prev = e;
		off += (uint32) lert_entry_size(e->keylen);
		n++;
	}
	return n == h->nentries;
}

/*
 * The entry at *offset (0: the first) of a checked run page, advancing
 * *offset past it; NULL after the last.
 */
const LertEntry *
lert_run_page_next(const char *area, uint32 *offset)
{
	const LertRunHeader *h = (const LertRunHeader *) area;
	const LertEntry *e;

	if (*offset >= h->used)
		return NULL;
	e = (const LertEntry *) (area + RUN_ENTRIES + *offset);
	*offset += (uint32) lert_entry_size(e->keylen);
	return e;
}
