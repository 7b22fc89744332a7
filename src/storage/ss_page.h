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

#include "storage/buf.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

#define SS_PAGE_ID			0xFF8A	/* last 16 bits of special space */
#define SS_META_MAGIC		0x53534B31	/* "SSK1" */
#define SS_META_VERSION		1
#define SS_METAPAGE_BLKNO	0

/*
 * Page types (SSPageOpaqueData.page_type): the metapage's is the storage
 * layer's; each structure defines its own in its header, with numbers
 * unique across structures (so a page of one is never taken for another's),
 * as it defines its kind, the number its metapage is stamped with.
 */
#define SS_PAGE_META		1

typedef struct SSPageOpaqueData
{
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

typedef struct SSMetaHeader
{
	uint32		magic;
	uint32		version;
	uint32		kind;			/* the structure's kind (its header) */
	uint32		seed;			/* hash seed of every key hash */
} SSMetaHeader;

/* Initialize a page with our special space; data_size bytes are in use. */
extern void ss_page_init(Page page, uint16 page_type, Size data_size);

/* Check a page read from disk; ereport(ERROR) if it is not ours. */
extern void ss_page_check(Relation rel, BlockNumber blkno, Page page,
						  uint16 page_type);

/* Check a metapage's header; ereport(ERROR) on mismatch. */
extern SSMetaHeader *ss_meta_check(Relation rel, Page page, uint32 kind);

extern void ss_check_structure_pages(uint64 npages, const char *relname);
extern void ss_meta_validate(Relation rel,
							 void (*check) (Relation rel, const void *meta),
							 const void *meta);
extern bool ss_block_known_to_exist(Relation rel, BlockNumber blkno);
extern Buffer ss_read_buffer_if_exists(Relation rel, BlockNumber blkno);
struct SSXLogState;
extern void ss_meta_header_init(SSMetaHeader *hdr, uint32 kind, uint32 seed);
extern void *ss_meta_register(Relation rel, uint32 kind,
							  struct SSXLogState *state, Buffer *bufp);
extern bool ss_read_metapage(Relation rel, uint32 kind, void *meta, Size size);
extern void ss_ensure_metapage(Relation rel, uint32 kind, const void *meta,
							   Size size);

extern Page ss_lock_page_for_write(Relation rel, struct SSXLogState *state,
								   BlockNumber blkno, uint16 page_type,
								   Size data_size, Buffer *bufp, bool *isnew);

#endif							/* SS_PAGE_H */
