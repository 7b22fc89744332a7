/*-------------------------------------------------------------------------
 *
 * qfam_compact.c
 *	  VACUUM FULL of a quotient filter: keep the live levels only.
 *
 * Growth and out-of-place merges leave space behind: every doubling of a
 * quotient_filter writes the new level after the old one, and every level
 * a merge targets keeps a spare run of its size, so a filter occupies up
 * to about twice its live levels.  VACUUM FULL (and CLUSTER) copies the
 * metapage and the live levels, packed one after another, into the new
 * relation file; the next merge into a level allocates a run again.
 *
 * A filter sized to its capacity (layout 3) is left with its live
 * fingerprints only: the levels of a buffered or cascade filter are first
 * merged into the largest one (as qf_resize merges them, without doubling
 * unless they do not fit), and empty levels get their runs after the
 * copied ones, past the end of the file, which holds the metapage and the
 * largest level only (blocks past the end read as empty pages, and the
 * first write of a level-0 page extends the file again).  At the end of a
 * stream, after qf_flush and VACUUM FULL, such a filter takes the pages
 * of a quotient_filter of its capacity.
 *
 * The copy bypasses shared buffers like RelationCopyStorage: every page
 * is WAL-logged as a full image when the relation needs WAL, except
 * never-written (zero) pages, which readers treat as empty whether they
 * exist or not.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/storage.h"

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/storage.h"
#include "miscadmin.h"
#include "qfam.h"
#include "ss_changelog.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/smgr.h"
#include "streamsketch.h"
#include "utils/rel.h"

/* Write page as block blkno of dst, logging it if wanted. */
static void
compact_write(SMgrRelation dst, BlockNumber blkno, Page page, bool use_wal)
{
	if (!PageIsNew(page))
	{
		if (use_wal)
			log_newpage(&dst->smgr_rnode.node, MAIN_FORKNUM, blkno, page, true);
		PageSetChecksumInplace(page, blkno);
	}
	smgrextend(dst, MAIN_FORKNUM, blkno, (char *) page, true);
}

/*
 * Before the copy: finish a merge in place that a crash or an error left
 * unfinished, so that the copy holds installed levels only; then merge
 * every level of a layout-3 buffered or cascade filter into its largest,
 * at its size if they fit it (else doubled until they do).  The old
 * relation's merges are WAL-logged like any merge; its file is dropped
 * after the copy.
 */
static void
qfam_compact_merge(Relation rel)
{
	QfamMeta	meta;
	uint32		last;
	uint32		t;
	double		items = 0;
	bool		others = false;
	uint64		mult;
	int			exp;

	ss_log_lock_consolidation(rel);
	LockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	if (qfam_read_meta(rel, &meta))
	{
		(void) qfam_finish_merge(rel, &meta);
		last = meta.nlevels - 1;
		for (uint32 l = 0; l < meta.nlevels; l++)
		{
			items += (double) meta.levels[l].items;
			if (l < last && (meta.levels[l].items > 0 || meta.levels[l].total > 0))
				others = true;
		}
		if (others && meta.params.layout == QFAM_LAYOUT_SIZED)
		{
			qfam_space(&meta.params, &mult, &exp);
			t = meta.levels[last].t;
			while (items > qfam_max_load(&meta.params) *
				   qfam_level_slots(&meta.params, t, mult, exp))
				t++;
			while (!qfam_merge_levels(rel, &meta, meta.nlevels, last, t))
				t++;
		}
	}
	UnlockPage(rel, SS_METAPAGE_BLKNO, ExclusiveLock);
	UnlockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock);
}

/* Is level l empty (nothing to copy)? */
static inline bool
qfam_level_empty(const QfamLevel *lv)
{
	return lv->items == 0 && lv->total == 0;
}

/*
 * The descriptor's compact: the metapage and the live levels, from a
 * filter whose change log is consolidated and empty (ss_tableam.c).  After
 * a round the copy starts an empty log at the same position (the level
 * pages keep their applied_pos).
 */
void
qfam_compact(Relation OldTable, Relation NewTable)
{
	QfamMeta	meta;
	QfamMeta	newmeta;
	SMgrRelation src;
	SMgrRelation dst;
	BlockNumber src_nblocks;
	BlockNumber next = SS_METAPAGE_BLKNO + 1;
	PGAlignedBlock buf;
	bool		use_wal;
	bool		sized;
	BlockNumber copy_end;

	if (!qfam_read_meta(OldTable, &meta))
		return;					/* keeps the new table's own metapage */
	sized = meta.params.layout == QFAM_LAYOUT_SIZED;
	if (meta.merge_target != 0 || (sized && meta.nlevels > 1))
	{
		qfam_compact_merge(OldTable);
		if (!qfam_read_meta(OldTable, &meta))
			elog(ERROR, "quotient filter metapage disappeared");
	}
	FlushRelationBuffers(OldTable);
	/* the transient table's own metapage is replaced by the copy */
	RelationTruncate(NewTable, 0);
	src = RelationGetSmgr(OldTable);
	src_nblocks = smgrnblocks(src, MAIN_FORKNUM);
	use_wal = XLogIsNeeded() &&
		NewTable->rd_rel->relpersistence == RELPERSISTENCE_PERMANENT;

	/*
	 * The new layout: levels packed after the metapage, no spare runs; in
	 * layout 3 the empty levels last, their runs past the copied blocks.
	 */
	newmeta = meta;
	for (int pass = sized ? 0 : 1; pass < 2; pass++)
	{
		for (uint32 l = 0; l < meta.nlevels; l++)
		{
			QfamMap		map;

			if (sized && qfam_level_empty(&meta.levels[l]) != (pass == 1))
				continue;
			newmeta.levels[l].base = next;
			newmeta.levels[l].alt_base = InvalidBlockNumber;
			qfam_level_map(&meta.params, &meta.levels[l], &map);
			next += (BlockNumber) map.npages;
		}
		if (pass == 0)
			copy_end = next;
	}
	if (!sized)
		copy_end = next;
	newmeta.hdr.log.head_pos = newmeta.hdr.log.end_pos;
	newmeta.hdr.log.head_blk = InvalidBlockNumber;
	newmeta.hdr.log.end_blk = InvalidBlockNumber;
	newmeta.hdr.log.free_blk = InvalidBlockNumber;
	newmeta.hdr.log.npages = 0;
	newmeta.hdr.log.nfree = 0;
	newmeta.hdr.log.nrecords = 0;
	newmeta.hdr.log.alloc_end = next;

	dst = RelationGetSmgr(NewTable);
	smgrread(src, MAIN_FORKNUM, SS_METAPAGE_BLKNO, buf.data);
	memcpy(SSPageGetData((Page) buf.data), &newmeta, sizeof(newmeta));
	compact_write(dst, SS_METAPAGE_BLKNO, (Page) buf.data, use_wal);
	for (uint32 l = 0; l < meta.nlevels; l++)
	{
		QfamMap		map;
		BlockNumber npages;

		qfam_level_map(&meta.params, &meta.levels[l], &map);
		npages = (BlockNumber) map.npages;
		if (newmeta.levels[l].base >= copy_end)
			continue;			/* empty, past the end */

		for (BlockNumber i = 0; i < npages; i++)
		{
			BlockNumber from = meta.levels[l].base + i;

			CHECK_FOR_INTERRUPTS();
			if (from < src_nblocks)
				smgrread(src, MAIN_FORKNUM, from, buf.data);
			else
				memset(buf.data, 0, BLCKSZ);
			compact_write(dst, newmeta.levels[l].base + i, (Page) buf.data,
						  use_wal);
		}
	}

	/* written around shared buffers: make it durable before the commit */
	if (use_wal)
		smgrimmedsync(dst, MAIN_FORKNUM);
	ss_cluster_init_fork(OldTable, NewTable);
}
