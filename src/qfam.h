/*-------------------------------------------------------------------------
 *
 * qfam.h
 *	  The quotient filter family of table access methods (Bender et al.,
 *	  "Don't Thrash: How to Cache Your Hash on Flash", VLDB 2012).
 *
 * A filter is a list of levels; each level is a quotient filter cut into
 * 2^page_bits pages, one independent QF area (qf.h) per page, so every
 * operation touches one page and no shift ever crosses a page boundary.
 * The key's fingerprint is the top fp_bits bits of its hash's h1, split as
 * page | quotient | remainder; every level uses the same fp_bits, so levels
 * merge and resize without rehashing.
 *
 *	quotient_filter		one level, updated in place; it grows (doubling its
 *						pages, one remainder bit becomes a page bit) when a
 *						page overflows or the load passes QFAM_MAX_LOAD.
 *
 * Relation layout: block 0 metapage; each level occupies a contiguous run of
 * blocks starting at its base.  A resize writes the new level after
 * everything reserved so far and switches to it with one metapage update,
 * so a crash never leaves a half-resized filter (the old run becomes dead
 * space; VACUUM FULL keeps it).
 *
 * Locking: writers (commit-time apply) hold a share page lock (heavyweight,
 * LOCKTAG_PAGE on block 0) for the whole apply; a resize holds it
 * exclusively.  Buffer locks: one QF page at a time, or the metapage alone.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QFAM_H
#define QFAM_H

#include "postgres.h"

#include "qf.h"
#include "ss_page.h"
#include "utils/rel.h"

#define QFAM_MAX_LEVELS		32
#define QFAM_MAX_LOAD		0.95
#define QFAM_MAX_PAGE_BITS	27	/* 1 TB of pages */

#define QFAM_KIND_QF		1

typedef struct QfamParams
{
	uint32		kind;			/* QFAM_KIND_* */
	uint32		seed;
	int64		capacity;		/* as requested */
	float8		fp_rate;		/* as requested */
	uint32		fanout;			/* cascade filter (future) */
	uint32		fp_bits;		/* fingerprint bits of every level */
	uint32		slot_bits;		/* home slots per page: 2^slot_bits */
	uint32		rbits;			/* remainder bits of the first level */
	uint32		page_bits;		/* page bits of the first level */
} QfamParams;

typedef struct QfamLevel
{
	BlockNumber base;			/* first block of the level */
	uint32		page_bits;
	uint32		rbits;
	uint32		unused;
	int64		items;			/* distinct fingerprints */
	int64		total;			/* sum of counts */
} QfamLevel;

typedef struct QfamMeta
{
	SSMetaHeader hdr;
	QfamParams	params;
	uint32		nlevels;
	BlockNumber reserved_end;	/* first block after every level ever made */
	int64		resizes;
	QfamLevel	levels[QFAM_MAX_LEVELS];
} QfamMeta;

typedef struct QfamState
{
	QfamParams	p;
	Oid			keytype;
	int16		keylen;
	bool		keybyval;
	bool		counted;		/* second column gives the count */
	Oid			counttype;
} QfamState;

/* qfam_am.c */
extern bool qfam_relation_is_qf(Relation rel);
extern Relation qfam_open(Oid relid, LOCKMODE lockmode);
extern QfamState *qfam_get_state(Relation rel);
extern void qfam_derive(QfamParams *p);
extern void qfam_params_from_gucs(QfamParams *p);
extern void qfam_catalog_store(Oid relid, const QfamParams *p);
extern void qfam_geom(const QfamParams *p, uint32 rbits, QfGeom *g);

/* qfam_apply.c */
extern void qfam_apply_pending(Relation rel);
extern bool qfam_read_meta(Relation rel, QfamMeta *meta);
extern void qfam_first_level(const QfamParams *p, QfamMeta *meta);
extern void qfam_resize(Relation rel, const QfamState *st);
extern uint64 qfam_level_count(Relation rel, const QfamParams *p,
							   const QfamLevel *lv, uint64 h1);

#endif							/* QFAM_H */
