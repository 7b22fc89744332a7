/*-------------------------------------------------------------------------
 *
 * ss_ids.h
 *	  The numbers streamsketch writes to disk to say what a relation or a
 *	  page is: structure kinds (stamped in the metapage, SSMetaHeader.kind)
 *	  and page types (SSPageOpaqueData.page_type).  One list, so that no
 *	  number is given twice: a page of one structure is never taken for
 *	  another's.  Each structure's descriptor claims its kind and page
 *	  types, and _PG_init checks that no two claim one (ss_check_structures).
 *	  A number, once written by a released build, is never reused for
 *	  something else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_IDS_H
#define SS_IDS_H

/* structure kinds */
#define SS_KIND_BCMS			1
#define SS_KIND_QF				2	/* the quotient filter family */
#define SS_KIND_BLOOM			3
#define SS_KIND_LERT			4
#define SS_KIND_CBT				5
#define SS_KIND_BFILE			6

/* page types */
#define SS_PAGE_META			1	/* every structure's block 0 */
#define SS_PAGE_BCMS_SKETCH		2
#define SS_PAGE_BCMS_BUFFER		3
#define SS_PAGE_QF_AREA			4
#define SS_PAGE_BLOOM_BITS		5
#define SS_PAGE_BLOOM_BUFFER	6
#define SS_PAGE_QF_UNDO			7
#define SS_PAGE_LOG				8	/* change log pages (ss_changelog.c) */
#define SS_PAGE_LERT_LEVEL0		9
#define SS_PAGE_LERT_RUN		10
#define SS_PAGE_LERT_INDEX		11
#define SS_PAGE_LERT_REPORT		12
#define SS_PAGE_LERT_FILTER		13
#define SS_PAGE_CBT_NODE		14
#define SS_PAGE_CBT_FRAGMENT	15
#define SS_PAGE_BFILE			16
#define SS_PAGE_LERT_FREE		17	/* the pool's spill page (lert_pool.c) */
#define SS_PAGE_CBT_FREE		18	/* the free list's overflow */

/*
 * Earlier builds gave a cbt's free-list overflow pages number 16 too,
 * which is the bfile's: a cbt reads such a page as its own (a cbt has no
 * bfile pages), and writes 18.
 */
#define CBT_FREE_PAGE_TYPE_EARLIER	16

#endif							/* SS_IDS_H */
