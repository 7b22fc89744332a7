/*-------------------------------------------------------------------------
 *
 * bloom.h
 *	  The paged Bloom filter table access method `bloom_filter`, with the
 *	  variants of section 2 of Bender et al., "Don't Thrash: How to Cache
 *	  Your Hash on Flash" (VLDB 2012) as modes: the Bloom filter on disk
 *	  (plain), the elevator Bloom filter (EBF) and the buffered Bloom filter
 *	  with hash localization (BBF, Canim et al. 2010).
 *
 * Geometry (every mode): m = ceil(-n ln p / (ln 2)^2) bits for capacity n
 * and false-positive rate p, k = round(m/n ln 2) hash functions, cut into
 * npages bit pages of at most BLOOM_PAGE_BITS bits (the 8152-byte data
 * area of a page, as 64-bit words).
 *
 * Relation layout:
 *	block 0							metapage (BloomMetaData)
 *	blocks 1 .. npages				bit pages
 *	blocks npages+1 .. +nbufpages	buffer pages (elevator, localized):
 *									subbufs_per_page sub-buffers of
 *									subbuf_cap 64-bit entries each, preceded
 *									by their uint32 fill counts
 *
 * plain		the key's k bits are anywhere in [0, m): bit i is
 *				range(mix(h2, i), m), on page bit / BLOOM_PAGE_BITS.
 *				Committed inserts are consolidated from the change log
 *				(ss_changelog.h) page by page; one insert costs up to k
 *				random page writes.
 * elevator		the same bits, but inserts wait in a persistent buffer of
 *				buffer_size bytes in the relation's own buffer pages.  The
 *				buffer is split into one sub-buffer per buffer page, chosen
 *				by h1 only so that a lookup reads one buffer page; an entry
 *				is the key's 64-bit h2 (its k positions are recomputed from
 *				it, so the buffer holds k times more keys than bit
 *				positions would).  When consolidation finds a
 *				sub-buffer full, the whole buffer is flushed: its entries'
 *				bits are applied in page order, every touched page written
 *				once (the elevator), and every sub-buffer emptied.
 * localized	h0 = range(h1, npages) picks one bit page and the k bits are
 *				inside it: bit i is range(mix(h2, i), bits_per_page).  Each
 *				bit page has its own sub-buffer of buffer_size / npages bytes
 *				(like bcms); a full sub-buffer is applied to its page in one
 *				WAL record with the buffer page.
 *
 * mix(h, i) is the splitmix64 row hash of ss_hash.h: every hash function
 * is an independent mix of h2, not double hashing (g1 + i*g2), whose
 * positions collide all together for two keys agreeing on g1 and g2 modulo
 * the small range of one page.
 *
 * Committed inserts wait in the change log until a consolidation round
 * moves them to the sub-buffers or bits (bloom_consolidate.c); a lookup reads
 * the sub-buffer, then the bits, then the committed log records
 * (bloom_query.c).  Setting a bit is idempotent, so applying an entry
 * twice is harmless, and no applied_pos marks are kept.
 *
 * Locking: sub-buffers and bits are written only under the change log's
 * consolidation lock (rounds and bloom_flush); localized follows bcms (a
 * sub-buffer's buffer page before its bit page).  The metapage is only
 * ever locked alone.
 *
 *-------------------------------------------------------------------------
 */
#ifndef BLOOM_H
#define BLOOM_H

#include "postgres.h"

#include "ss_hash.h"
#include "ss_page.h"
#include "utils/rel.h"

#define BLOOM_MODE_PLAIN		0
#define BLOOM_MODE_ELEVATOR		1
#define BLOOM_MODE_LOCALIZED	2

#define BLOOM_PAGE_WORDS		(SS_PAGE_DATA_SIZE / sizeof(uint64))
#define BLOOM_PAGE_BITS			((uint32) (BLOOM_PAGE_WORDS * 64))
#define BLOOM_MAX_PAGES			(1U << 27)	/* 1 TB of bit pages */
#define BLOOM_MAX_BUFPAGES		(1U << 23)	/* 64 GB of buffer pages */
#define BLOOM_MAX_HASHES		64

/* Entries of a buffer page holding one sub-buffer. */
#define BLOOM_SUBBUF_MAX \
	((uint32) ((SS_PAGE_DATA_SIZE - MAXALIGN(sizeof(uint32))) / sizeof(uint64)))

/* Parameters: frozen into the metapage (and the table's label). */
typedef struct BloomParams
{
	uint32		mode;			/* BLOOM_MODE_* */
	uint32		seed;			/* hash seed */
	int64		capacity;		/* n, as requested */
	float8		fp_rate;		/* p, as requested */
	uint32		buffer_kb;		/* requested buffer size M */

	/* derived by bloom_derive() */
	uint32		nhashes;		/* k */
	uint64		nbits;			/* m: bits in use */
	uint32		npages;			/* bit pages */
	uint32		bits_per_page;	/* localized: bits of each page */
	uint32		nsubbufs;		/* sub-buffers (0 = unbuffered) */
	uint32		subbuf_cap;		/* entries per sub-buffer */
	uint32		subbufs_per_page;
	uint32		nbufpages;
} BloomParams;

/* What a consolidation round or a flush adds to the metapage. */
typedef struct BloomStats
{
	int64		items;
	int64		bits_set;
	int64		flushes;
} BloomStats;

typedef struct BloomMetaData
{
	SSMetaHeader hdr;
	BloomParams params;
	int64		items;			/* rows inserted (committed) */
	int64		bits_set;		/* bits set on the bit pages */
	int64		flushes;		/* buffer flushes (elevator: whole buffer) */
} BloomMetaData;

/* Per-relation state cached in rd_amcache. */
typedef struct BloomState
{
	BloomParams p;
	Oid			keytype;
	int16		keylen;
	bool		keybyval;
} BloomState;

/* ---- geometry and hashing ---- */

static inline uint64
bloom_range64(uint64 h, uint64 n)
{
	return (uint64) (((unsigned __int128) h * n) >> 64);
}

/* plain, elevator: the global position of the key's bit i */
static inline uint64
bloom_global_bit(const BloomParams *p, uint64 h2, uint32 i)
{
	return bloom_range64(ss_hash_row(h2, i), p->nbits);
}

/* localized: the key's page, and bit i inside it */
static inline uint32
bloom_local_page(const BloomParams *p, uint64 h1)
{
	return ss_hash_range(h1, p->npages);
}

static inline uint32
bloom_local_bit(const BloomParams *p, uint64 h2, uint32 i)
{
	return ss_hash_range(ss_hash_row(h2, i), p->bits_per_page);
}

/* the sub-buffer of a key: its bit page (localized) or an h1 partition */
static inline uint32
bloom_subbuf_of(const BloomParams *p, SSHash h)
{
	return p->mode == BLOOM_MODE_LOCALIZED ? bloom_local_page(p, h.h1) :
		ss_hash_range(h.h1, p->nsubbufs);
}

static inline BlockNumber
bloom_bits_blkno(const BloomParams *p, uint32 page)
{
	return 1 + page;
}

static inline BlockNumber
bloom_buffer_blkno(const BloomParams *p, uint32 subbuf)
{
	return 1 + p->npages + subbuf / p->subbufs_per_page;
}

static inline uint32 *
bloom_buf_counts(Page page)
{
	return (uint32 *) SSPageGetData(page);
}

static inline uint64 *
bloom_buf_entries(Page page, const BloomParams *p, uint32 subbuf)
{
	uint32		slot = subbuf % p->subbufs_per_page;

	return (uint64 *) (SSPageGetData(page) +
					   MAXALIGN(p->subbufs_per_page * sizeof(uint32)) +
					   (Size) slot * p->subbuf_cap * sizeof(uint64));
}

static inline bool
bloom_test_bit(const uint64 *words, uint32 bit)
{
	return (words[bit >> 6] >> (bit & 63)) & 1;
}

static inline void
bloom_set_bit(uint64 *words, uint32 bit)
{
	words[bit >> 6] |= UINT64CONST(1) << (bit & 63);
}

/* bloom_am.c */
extern BloomState *bloom_get_state(Relation rel);
extern void bloom_derive(BloomParams *p);
extern const char *bloom_mode_name(uint32 mode);
extern const struct SSStructure bloom_structure;

/* bloom_consolidate.c */
struct SSConsolidation;
extern bool bloom_consolidate(struct SSConsolidation *c);
extern void bloom_add_stats(void *meta, const void *stats);
extern void bloom_check_meta(Relation rel, const void *meta);
extern int64 bloom_flush_all(Relation rel, void *stats);

/* bloom_query.c */

#endif							/* BLOOM_H */
