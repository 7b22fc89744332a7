/*-------------------------------------------------------------------------
 *
 * cbt.h
 *	  The `cbt` table access method: a compressed buffer tree (Amur et
 *	  al., SoCC 2013) kept in the relation's pages, on the storage layer's
 *	  change log (docs/cbt.md).  The definition is in cbt_def.h, the
 *	  aggregates' runtime in cbt_agg.h, the block format in cbt_codec.h.
 *
 * Relation layout: block 0 is the metapage (CbtMeta, with the
 * definition's bound query); every other block belongs to an extent (a
 * node page, a fragment) or to the change log.  Extents are
 * reserved with ss_log_alloc_run and recycled through the metapage's
 * free list, each freed extent stamped with the full xid after which no
 * snapshot can still reach it.
 *
 * Positions: CbtMeta.tree_pos is the change log position up to which the
 * tree holds the committed records; a round skips records before it, so a
 * round redone after a crash between its install and the storage layer's
 * move of the log head counts nothing twice.
 *
 * Locking: consolidators (rounds, cbt_finalize, VACUUM) serialize on the
 * change log's consolidation lock and are the only writers of every page
 * but the log's.  They write new pages only (copy on write) and install a
 * tree by one metapage record.  Readers lock one page at a time, briefly,
 * to copy what they need; they never wait for a consolidator.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CBT_H
#define CBT_H

#include "postgres.h"

#include "access/transam.h"
#include "cbt_codec.h"
#include "cbt_def.h"
#include "lib/stringinfo.h"
#include "ss_page.h"
#include "utils/rel.h"

#define CBT_MAX_FANOUT			64
#define CBT_MAX_FRAGMENTS		16	/* per node: bounds a scan's cursors */
#define CBT_MAX_HEIGHT			16
#define CBT_BLOCK_TARGET_RAW	(32 * 1024) /* PAO bytes per block written */
#define CBT_MAX_FREE_EXTENTS	128
/*
 * The free list goes on in pages beyond the metapage's extents
 * (CbtMeta.overflow_*), up to this many, so that scattered freed extents
 * are remembered rather than leaked; a consolidator holds the whole list
 * in memory (16 bytes an extent).
 */
#define CBT_MAX_OVERFLOW_EXTENTS	(64 * 1024)
/*
 * The definition's bound query lives in the metapage (cbt_defstore.c), so
 * that the storage layer's creation, TRUNCATE and label code handle it as
 * any parameter; a definition whose compressed node tree is larger is
 * refused (about forty aggregates fit).  Its text in a label is bounded
 * too.
 */
#define CBT_DEF_MAX				5120
#define CBT_DEF_MAX_TEXT		(256 * 1024)

/* parameters, captured at creation (streamsketch.cbt_*) */
typedef struct CbtParams
{
	uint32		root_buffer_kb; /* change log a round empties at once */
	uint32		node_buffer_kb; /* compressed bytes before a node empties */
	uint32		fanout;			/* b; a node splits beyond it */
	bool		compression;
	uint32		hash_bits;		/* 64, fewer in tests (forced collisions) */
	uint32		seed;
} CbtParams;

/*
 * The stamp of an extent freed by a pass not installed yet: later than any
 * xid, so never reused before the install stamps it (cbt_consolidate.c).
 */
#define CBT_STAMP_PENDING	FullTransactionIdFromU64(PG_UINT64_MAX)

/* An extent of pages. */
typedef SSExtent CbtExtent;

/*
 * A freed extent, reusable once no snapshot can still reach it: stamp is
 * the next full xid when the install that freed it was made.
 */
typedef struct CbtFreeExtent
{
	BlockNumber start;
	uint32		npages;
	FullTransactionId stamp;
} CbtFreeExtent;

/*
 * Extents of one fragment at most: a fragment larger than every reusable
 * free extent is stored in pieces (cbt_extent_alloc_pieces).
 */
#define CBT_FRAG_MAX_PIECES		32

/*
 * A fragment: a sorted, aggregated run of PAOs.  Its byte stream fills
 * ext, or, when npieces >= 2, ext and then the other pieces listed in its
 * header (cbt_frag_pieces), in block order.  (npieces is 0 in fragments
 * of one extent: it took the structure's padding, zero before it existed.)
 */
typedef struct CbtFragment
{
	CbtExtent	ext;
	uint64		generation;		/* of the install that wrote it */
	uint64		min_hash;
	uint64		max_hash;
	uint64		npaos;
	uint64		raw_bytes;		/* PAO bytes before compression */
	uint64		stored_bytes;	/* header, directory and blocks as stored */
	uint32		nblocks;
	uint32		npieces;		/* 0: ext alone */
} CbtFragment;

StaticAssertDecl(sizeof(CbtFragment) == 64,
				 "node pages hold fragment descriptors of this layout");

/*
 * A node, as its page holds it.  Child i covers hashes [pivot[i],
 * pivot[i + 1]) (the last: up to the node's hi); pivot[0] is the node's lo.
 */
typedef struct CbtNode
{
	uint64		generation;		/* of the install that wrote this page */
	uint32		level;			/* 0: leaf */
	uint32		nchildren;
	uint32		nfragments;
	uint32		unused;
	uint64		lo;				/* hash range [lo, hi], inclusive */
	uint64		hi;
	uint64		pivot[CBT_MAX_FANOUT];
	BlockNumber child[CBT_MAX_FANOUT];
	uint64		child_generation[CBT_MAX_FANOUT];
	/* one more than a page holds: a full node takes one, then is emptied */
	CbtFragment fragments[CBT_MAX_FRAGMENTS + 1];
} CbtNode;

StaticAssertDecl(sizeof(CbtNode) <= SS_PAGE_DATA_SIZE,
				 "a cbt node must fit in a page");

/* metapage contents */
typedef struct CbtMeta
{
	SSMetaHeader hdr;
	CbtParams	params;
	BlockNumber root;			/* InvalidBlockNumber: empty tree */
	uint64		root_generation;
	uint32		height;			/* levels; 0 if empty */
	uint32		unused;
	uint64		generation;		/* installs so far */
	uint64		tree_pos;		/* log position the tree holds up to */
	uint32		nfree;			/* extents on the free list */
	uint32		unused2;
	int64		leaked_pages;	/* dropped from a full free list */
	/* counters */
	int64		rows;			/* committed input rows in the tree */
	int64		groups_estimate;	/* PAOs at the leaves after the last finalize */
	int64		rounds;
	int64		spills;
	int64		splits;
	int64		finalizes;
	uint64		raw_bytes;		/* PAO bytes in every fragment */
	uint64		stored_bytes;
	uint64		fragments;
	uint64		nodes;
	CbtFreeExtent free_ext[CBT_MAX_FREE_EXTENTS];	/* by start block */
	char		definition[CBT_DEF_MAX];	/* bound query (cbt_defstore.c) */

	/*
	 * The rest of the free list, written by the install whose generation
	 * is the metapage's: overflow_extents entries by start block in the
	 * pages from overflow_start.  Its entries freed by that install are
	 * stamped overflow_stamp (read under the metapage's lock, after the
	 * pages were written).  Zero in a table made before it existed.
	 */
	BlockNumber overflow_start;
	uint32		overflow_extents;
	FullTransactionId overflow_stamp;
	uint64		overflow_free_pages;	/* the pages those extents hold */
	uint64		fragments_in_pieces;	/* of fragments; 0 in older tables */
} CbtMeta;

StaticAssertDecl(sizeof(CbtMeta) <= SS_PAGE_DATA_SIZE,
				 "the cbt metapage must fit in a page");

/*
 * The free list a consolidator works on: the metapage's extents and the
 * overflow pages', by start block.
 */
typedef struct CbtFreeList
{
	CbtFreeExtent *ext;
	uint32		n;
	uint32		limit;			/* entries it may hold */
	int64		leaked_pages;	/* forgotten for want of room */
} CbtFreeList;

/* cbt_store.c: extents, pages, nodes, fragments */
extern void cbt_free_list_load(Relation rel, const CbtMeta *meta,
							   CbtFreeList *fl);
extern void cbt_free_list_save(Relation rel, CbtFreeList *fl, CbtMeta *meta);
extern void cbt_free_list_stamp(CbtFreeList *fl, CbtMeta *meta,
								FullTransactionId now);
extern uint32 cbt_overflow_pages(uint32 nextents);
extern CbtExtent cbt_extent_alloc(Relation rel, CbtFreeList *fl,
								  uint32 npages);
extern bool cbt_extent_fits(const CbtFreeList *fl, uint32 npages);
extern uint32 cbt_extent_alloc_pieces(Relation rel, CbtFreeList *fl,
									  uint32 npages, CbtExtent *pieces,
									  uint32 maxpieces);
extern int	cbt_frag_pieces(Relation rel, const CbtFragment *frag,
							CbtExtent *pieces);
extern void cbt_extent_free(CbtFreeList *fl, CbtExtent ext,
							FullTransactionId stamp);
extern void cbt_stale_page(Relation rel, BlockNumber blkno)
			pg_attribute_noreturn();
extern void cbt_write_node(Relation rel, BlockNumber blkno,
						   const CbtNode *node);
extern void cbt_read_node(Relation rel, BlockNumber blkno, uint64 generation,
						  CbtNode *node);

/*
 * Writing a fragment: PAOs in (hash, key) order go into blocks; the
 * fragment is written to a new extent when it ends.  It holds at most
 * what it is given in memory (a node's buffer, a round's records).
 */
typedef struct CbtFragWriter
{
	Relation	rel;
	CbtFreeList *free;			/* the consolidator's */
	uint64		generation;
	bool		compress;
	StringInfoData pending;		/* PAO bytes of the block being filled */
	CbtPaoRef  *paos;
	uint32		npending;
	uint32		maxpending;
	StringInfoData blocks;		/* encoded blocks */
	StringInfoData dir;			/* their directory entries */
	StringInfoData block_raw;	/* their PAO bytes (uint32 each) */
	uint32		nblocks;
	uint64		npaos;
	uint64		raw_bytes;
	uint64		min_hash;
	uint64		max_hash;
} CbtFragWriter;

extern void cbt_frag_writer_begin(CbtFragWriter *w, Relation rel,
								  CbtFreeList *free, uint64 generation,
								  bool compress);
extern void cbt_frag_writer_add(CbtFragWriter *w, uint64 hash,
								const char *pao, uint32 size);
extern bool cbt_frag_writer_end(CbtFragWriter *w, CbtFragment *out);
extern int	cbt_frag_writer_end_split(CbtFragWriter *w, uint64 piece_raw,
									  int maxfrags, CbtFragment *out);

/* Reading a fragment's PAOs in order, one block in memory at a time. */
typedef struct CbtFragCursor
{
	Relation	rel;
	CbtFragment frag;
	CbtExtent	pieces[CBT_FRAG_MAX_PIECES];	/* the stream's extents */
	int			npieces;
	char	   *dir;			/* directory entries */
	uint32		block;			/* next block to load */
	CbtBlockHeader hdr;			/* of the loaded block */
	uint64	   *hashes;
	uint32	   *sizes;
	char	   *data;
	uint32		pos;			/* next PAO of the loaded block */
	Size		offset;			/* its offset in data */
	bool		loaded;
} CbtFragCursor;

extern void cbt_frag_open(CbtFragCursor *c, Relation rel,
						  const CbtFragment *frag);
extern void cbt_frag_seek(CbtFragCursor *c, uint64 hash);
extern bool cbt_frag_next(CbtFragCursor *c, uint64 *hash, const char **pao,
						  uint32 *size);
extern bool cbt_frag_peek_hash(CbtFragCursor *c, uint64 *hash);
extern void cbt_frag_close(CbtFragCursor *c);

#endif							/* CBT_H */
