/*-------------------------------------------------------------------------
 *
 * ss_page.h
 *	  Page and metapage conventions shared by every streamsketch structure.
 *
 * Every page is PageInit'ed with an SSPageOpaqueData in its special space,
 * whose last 16 bits are SS_PAGE_ID (like BRIN and GIN), so tools and our
 * own checks can tell our pages from foreign ones.  Page contents live
 * between the page header and pd_lower, so GenericXLog's hole elimination
 * never drops them.
 *
 * Block 0 is the metapage: SSMetaHeader followed by the structure's own
 * metadata.  Every reader checks magic, version and kind.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_PAGE_H
#define SS_PAGE_H

#include "postgres.h"

#include "access/transam.h"

#include "storage/buf.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

#define SS_PAGE_ID			0xFF8A	/* last 16 bits of special space */
#define SS_META_MAGIC		0x53534B31	/* "SSK1" */
#define SS_META_VERSION		3
#define SS_METAPAGE_BLKNO	0

/* kinds and page types: one list (ss_ids.h) */
#include "ss_ids.h"

typedef struct SSPageOpaqueData
{
	/*
	 * Change log position up to which (exclusive) the log's records have
	 * been applied to this page, set in the same WAL record as the change
	 * (ss_changelog.h); structures whose partitions span several pages keep
	 * it where they document.
	 */
	uint64		applied_pos;
	uint16		page_type;
	uint16		flags;
	uint16		epoch;			/* structure-specific generation number */
	uint16		page_id;		/* SS_PAGE_ID, must be last */
} SSPageOpaqueData;

typedef SSPageOpaqueData *SSPageOpaque;

#define SSPageGetOpaque(page) ((SSPageOpaque) PageGetSpecialPointer(page))

/* Usable bytes between the page header and the special space. */
#define SS_PAGE_DATA_SIZE \
	(BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - MAXALIGN(sizeof(SSPageOpaqueData)))

#define SSPageGetData(page) ((char *) (page) + MAXALIGN(SizeOfPageHeaderData))

/*
 * Where the change log (ss_changelog.c) stands.  Log positions count bytes
 * appended since the relfilenode was created and are never reused.
 */
typedef struct SSLogMeta
{
	uint64		head_pos;		/* first byte not yet consolidated */
	uint64		end_pos;		/* end of the last completely appended batch */
	BlockNumber head_blk;		/* log page holding head_pos, or Invalid */
	BlockNumber end_blk;		/* log page holding end_pos, or Invalid */
	BlockNumber free_blk;		/* first free log page, or Invalid */
	BlockNumber alloc_end;		/* first block after the structure's layout
								 * and every log page; 0: the structure has
								 * no log */
	uint32		npages;			/* pages in the chain from head_blk */
	uint32		nfree;			/* pages on the free list */
	int64		consolidations; /* consolidation rounds that moved the head */
	uint64		nrecords;		/* records between head_pos and end_pos */
} SSLogMeta;

typedef struct SSMetaHeader
{
	uint32		magic;
	uint32		version;
	uint32		kind;			/* the structure's kind (its header) */
	uint32		seed;			/* hash seed of every key hash */
	SSLogMeta	log;
} SSMetaHeader;

/* Initialize a page with our special space; data_size bytes are in use. */
extern void ss_page_init(Page page, uint16 page_type, Size data_size);

/* Check a page read from disk; ereport(ERROR) if it is not ours. */
extern void ss_page_check(Relation rel, BlockNumber blkno, Page page,
						  uint16 page_type);

/* Report a damaged page: ereport(ERROR, ERRCODE_DATA_CORRUPTED). */
extern void ss_page_corrupted(Relation rel, BlockNumber blkno,
							  const char *fmt,...)
			pg_attribute_printf(3, 4) pg_attribute_noreturn();

/* Check a metapage's header; ereport(ERROR) on mismatch. */
extern SSMetaHeader *ss_meta_check(Relation rel, Page page, uint32 kind);

extern uint32 ss_subbuf_count(Relation rel, BlockNumber blkno,
							  uint16 page_type, uint32 slot);
extern uint64 ss_subbuf_total(Relation rel, BlockNumber blkno, Page page,
							  uint32 nslots, uint32 cap);
extern void ss_check_structure_pages(uint64 npages, const char *relname);
extern void ss_meta_validate(Relation rel,
							 void (*check) (Relation rel, const void *meta),
							 const void *meta);
extern bool ss_block_known_to_exist(Relation rel, BlockNumber blkno);
/* bulk reads and writes through rings of buffers (ss_page.c) */
extern BufferAccessStrategy ss_bulk_read_ring(void);
extern BufferAccessStrategy ss_bulk_write_ring(void);
extern BufferAccessStrategy ss_bulk_read_begin(void);
extern void ss_bulk_read_end(BufferAccessStrategy prev);
extern Buffer ss_read_buffer_if_exists(Relation rel, BlockNumber blkno);
extern Buffer ss_read_buffer_with(Relation rel, BlockNumber blkno,
								  BufferAccessStrategy strategy);
extern void ss_prefetch(Relation rel, BlockNumber blkno);
extern Buffer ss_lock_buffer_for_rewrite(Relation rel, BlockNumber blkno,
										 bool full);
extern Buffer ss_lock_buffer_for_rewrite_with(Relation rel, BlockNumber blkno,
											  bool full,
											  BufferAccessStrategy strategy);

/* What WAL gets of a page written whole (ss_write_page_with). */
typedef enum SSWriteMode
{
	SS_WRITE_DELTA,				/* what changed since its last version */
	SS_WRITE_DELTA_OR_NEW,		/* the same, or the image of a new page */
	SS_WRITE_FULL				/* a full image; its old contents unread */
} SSWriteMode;

extern void ss_write_page_with(Relation rel, BlockNumber blkno,
							   uint16 page_type, const char *area, Size size,
							   uint16 epoch, uint64 applied_pos,
							   SSWriteMode mode,
							   BufferAccessStrategy strategy);
extern Buffer ss_read_page_of_type(Relation rel, BlockNumber blkno,
								   uint16 page_type,
								   BufferAccessStrategy strategy);
/* A run of consecutive blocks (a structure's extents, as stored). */
typedef struct SSExtent
{
	BlockNumber start;
	uint32		npages;
} SSExtent;

extern BlockNumber ss_extents_block(const SSExtent *ext, uint32 next,
									uint32 p);
extern FullTransactionId ss_recycle_stamp(void);
extern void ss_stale_page(Relation rel, BlockNumber blkno, const char *what)
			pg_attribute_noreturn();
extern void ss_write_full_page(Relation rel, BlockNumber blkno,
							   uint16 page_type, const char *area);
extern void ss_write_page(Relation rel, BlockNumber blkno, uint16 page_type,
						  const char *area, bool full);
extern bool ss_read_page_area(Relation rel, BlockNumber blkno,
							  uint16 page_type, char *area);
extern bool ss_read_stamped_page(Relation rel, BlockNumber blkno,
								 uint16 page_type, uint64 stamp, char *area);
extern Buffer ss_pin_if_cached(Relation rel, BlockNumber blkno);
struct SSXLogState;
extern void ss_meta_header_init(SSMetaHeader *hdr, uint32 kind, uint32 seed,
								BlockNumber layout_end);
extern void *ss_meta_register(Relation rel, uint32 kind,
							  struct SSXLogState *state, Buffer *bufp);
extern bool ss_read_metapage(Relation rel, uint32 kind, void *meta, Size size);
extern void ss_ensure_metapage(Relation rel, uint32 kind, const void *meta,
							   Size size);

extern Page ss_lock_page_for_write(Relation rel, struct SSXLogState *state,
								   BlockNumber blkno, uint16 page_type,
								   Size data_size, Buffer *bufp, bool *isnew);

#endif							/* SS_PAGE_H */
