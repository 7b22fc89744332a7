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
StaticAssertDecl(sizeof(LertFixedEntry) == 24, "LertFixedEntry is 24 bytes");

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
lert_l0_init(char *area, Size area_size, uint64 applied_pos, uint64 gen,
			 uint16 form)
{
	LertL0Header *h = (LertL0Header *) area;

	Assert(area_size <= PG_UINT16_MAX);
	Assert(form == LERT_L0_KEYED || form == LERT_L0_FIXED);
	memset(area, 0, area_size);
	h->applied_pos = applied_pos;
	h->gen = gen;
	h->nentries = 0;
	h->lower = (uint16) L0_OFFSETS;
	h->upper = (uint16) TYPEALIGN_DOWN(8, area_size);
	h->form = form;
}

/* Where entry i of a level-0 page starts (a fixed page's flags masked). */
static inline Size
l0_entry_offset(const LertL0Header *h, uint16 off)
{
	return h->form == LERT_L0_FIXED ? (off & ~LERT_L0_OFFSET_FLAGS) : off;
}

/*
 * The entry at offset at of the end bytes from base, if its header and key
 * (of at most area_size bytes) lie within them and it sorts after prev
 * (NULL: none); else NULL.  The page checks' common part.
 */
static const LertEntry *
entry_checked(const char *base, Size at, Size end, Size area_size,
			  const LertEntry *prev)
{
	const LertEntry *e;

	if (at + LERT_ENTRY_HEADER > end)
		return NULL;
	e = (const LertEntry *) (base + at);
	if (e->keylen > area_size || at + lert_entry_size(e->keylen) > end)
		return NULL;
	if (prev != NULL &&
		lert_key_cmp(prev->fp, lert_entry_key(prev), prev->keylen,
					 e->fp, lert_entry_key(e), e->keylen) >= 0)
		return NULL;
	return e;
}

/* Is the level-0 page's layout sound? */
bool
lert_l0_check(const char *area, Size area_size)
{
	const LertL0Header *h = (const LertL0Header *) area;
	const uint16 *off = l0_offsets_const(area);
	uint64		prev_fp = 0;
	const LertEntry *prev = NULL;

	if (area_size > PG_UINT16_MAX ||
		(h->form != LERT_L0_KEYED && h->form != LERT_L0_FIXED) ||
		h->lower != L0_OFFSETS + (Size) h->nentries * sizeof(uint16) ||
		h->upper < h->lower || h->upper > area_size || h->upper % 8 != 0)
		return false;
	for (int i = 0; i < h->nentries; i++)
	{
		Size		at = l0_entry_offset(h, off[i]);

		if (at < h->upper || at % 8 != 0)
			return false;
		if (h->form == LERT_L0_FIXED)
		{
			const LertFixedEntry *f = (const LertFixedEntry *) (area + at);

			/* a fixed page keeps no disk count: no LERT_DISK_KNOWN */
			if (at + sizeof(LertFixedEntry) > area_size ||
				(off[i] & LERT_DISK_KNOWN) != 0 ||
				(i > 0 && f->fp <= prev_fp))
				return false;
			prev_fp = f->fp;
			continue;
		}
		prev = entry_checked(area, at, area_size, area_size, prev);
		if (prev == NULL)
			return false;
	}
	return true;
}

/*
 * Entry i of a checked level-0 page, copied to *e (keylen 0 and disk_sum
 * 0 on a fixed page); returns its key bytes, in the page.
 */
const char *
lert_l0_get(const char *area, int i, LertEntry *e)
{
	const LertL0Header *h = (const LertL0Header *) area;
	uint16		off = l0_offsets_const(area)[i];
	const char *at = area + l0_entry_offset(h, off);

	if (h->form == LERT_L0_FIXED)
	{
		const LertFixedEntry *f = (const LertFixedEntry *) at;

		memset(e, 0, sizeof(*e));
		e->fp = f->fp;
		e->count = f->count;
		e->first_pos = f->first_pos;
		e->flags = off & LERT_L0_OFFSET_FLAGS;
		return at + sizeof(LertFixedEntry);
	}
	memcpy(e, at, LERT_ENTRY_HEADER);
	return at + LERT_ENTRY_HEADER;
}

/*
 * Store the counts of entry i of a level-0 page.  False if its form
 * cannot hold them: a fixed page keeps no disk count.
 */
bool
lert_l0_put(char *area, int i, int64 count, int64 first_pos, int64 disk_sum,
			uint32 flags)
{
	LertL0Header *h = (LertL0Header *) area;
	uint16	   *off = &l0_offsets(area)[i];
	char	   *at = area + l0_entry_offset(h, *off);

	if (h->form == LERT_L0_FIXED)
	{
		LertFixedEntry *f = (LertFixedEntry *) at;

		if (disk_sum != 0 ||
			(flags & ~(LERT_REPORTED | LERT_L0_KEPT_PENDING)) != 0)
			return false;
		f->count = count;
		f->first_pos = first_pos;
		*off = (uint16) ((*off & ~LERT_L0_OFFSET_FLAGS) | flags);
	}
	else
	{
		LertEntry  *e = (LertEntry *) at;

		e->count = count;
		e->first_pos = first_pos;
		e->disk_sum = disk_sum;
		e->flags = (uint16) flags;
	}
	return true;
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
		const char *at = area + l0_entry_offset(h, off[mid]);
		int			c;

		if (h->form == LERT_L0_FIXED)
		{
			uint64		mid_fp = ((const LertFixedEntry *) at)->fp;

			c = mid_fp < fp ? -1 : mid_fp > fp ? 1 : (keylen > 0 ? -1 : 0);
		}
		else
		{
			const LertEntry *e = (const LertEntry *) at;

			c = lert_key_cmp(e->fp, lert_entry_key(e), e->keylen,
							 fp, key, keylen);
		}
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

/* Can the page take a new entry with keylen key bytes? */
bool
lert_l0_has_room(const char *area, uint32 keylen)
{
	const LertL0Header *h = (const LertL0Header *) area;

	if (h->form == LERT_L0_FIXED && keylen > 0)
		return false;
	return (Size) (h->upper - h->lower) >= lert_l0_entry_space(h->form, keylen);
}

/*
 * Insert an entry for the key at index `at` (from lert_l0_search): count
 * 0, no first position, no flags.  False if it does not fit (or has key
 * bytes, on a fixed page).
 */
bool
lert_l0_insert(char *area, int at, uint64 fp, const char *key, uint32 keylen)
{
	LertL0Header *h = (LertL0Header *) area;
	uint16	   *off = l0_offsets(area);
	Size		size = lert_l0_entry_space(h->form, keylen) - sizeof(uint16);

	if (at < 0 || at > h->nentries || !lert_l0_has_room(area, keylen))
		return false;
	h->upper -= (uint16) size;
	if (h->form == LERT_L0_FIXED)
	{
		LertFixedEntry *f = (LertFixedEntry *) (area + h->upper);

		f->fp = fp;
		f->count = 0;
		f->first_pos = -1;
	}
	else
	{
		LertEntry  *e = (LertEntry *) (area + h->upper);

		memset(e, 0, size);
		e->fp = fp;
		e->first_pos = -1;
		e->keylen = keylen;
		if (keylen > 0)
			memcpy((char *) e + LERT_ENTRY_HEADER, key, keylen);
	}
	memmove(off + at + 1, off + at, (h->nentries - at) * sizeof(uint16));
	off[at] = h->upper;
	h->nentries++;
	h->lower += sizeof(uint16);
	return true;
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
		prev = entry_checked(area + RUN_ENTRIES, off, h->used, area_size, prev);
		if (prev == NULL)
			return false;
		off += (uint32) lert_entry_size(prev->keylen);
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
