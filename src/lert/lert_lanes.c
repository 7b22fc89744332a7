/*-------------------------------------------------------------------------
 *
 * lert_lanes.c
 *	  A LERT's cones as consolidation lanes: sessions consolidate different
 *	  cones at once.
 *
 * The paper's LERT scales with threads because each cone (a hash
 * partition with its own level 0, runs and merges) is locked apart.  Here
 * a cone's round (lert_lane_run) passes over the change log from the
 * cone's own position, applies the records of its keys and only counts
 * the positions of the others, under the cone's lock; rounds of different
 * cones share nothing but the metapage's report stream, counters and
 * pool of free extents, changed under the space lock (lert.h,
 * lert_store.c), and the file's end.  So
 * a writer whose statement finds the log long runs the rounds of the cones
 * no other session is running, and the log head then moves to the slowest
 * cone's position.  Reports come in the order rounds install them, each
 * at its own stream position, which a single pass over the stream would
 * give them too.
 *
 * Locking order: the consolidation lock (rounds that must bring every cone
 * to the end: lert_flush, VACUUM, lert_reported), then a cone's lock (one
 * at a time), then the space lock, then the change log's append lock.  A
 * writer holds no cone lock while it waits for another, and tries the
 * consolidation lock only after its cones' rounds, without waiting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lert.h"
#include "lert_consolidate.h"
#include "miscadmin.h"
#include "ss_changelog.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "streamsketch.h"

/* Count a committed record's observations (the head's stats). */
static void
count_observations(uint64 pos, const SSPendingHeader *hdr,
				   const char *payload, void *arg)
{
	LertItem	item;

	if (hdr->type != SS_PENDING_ITEM || hdr->len < sizeof(LertItem))
		return;					/* the cones' rounds reported it */
	memcpy(&item, payload, sizeof(item));
	*(int64 *) arg += item.count;
}

/*
 * The consolidate callback (a round under the consolidation lock, for
 * callers that need every committed batch applied): bring every cone to
 * the round's end, waiting for a cone whose round another session is
 * running, then count the range's observations for the head's move.
 */
bool
lert_consolidate(SSConsolidation *c)
{
	LertStats  *stats = (LertStats *) c->stats;
	LertMeta	meta;
	int64		observations = 0;

	if (!lert_read_meta(c->rel, &meta))
		elog(ERROR, "LERT \"%s\" has no metapage", RelationGetRelationName(c->rel));
	for (uint32 cone = 0; cone < meta.params.ncones; cone++)
	{
		TransactionId stopped_at;

		CHECK_FOR_INTERRUPTS();
		LockPage(c->rel, LERT_CONE_LOCK(cone), ExclusiveLock);
		(void) lert_lane_run(c->rel, cone, c->end_pos, &stopped_at);
		UnlockPage(c->rel, LERT_CONE_LOCK(cone), ExclusiveLock);
		/* the range holds no batch still committing */
		Assert(!TransactionIdIsValid(stopped_at));
	}
	ss_cons_foreach(c, count_observations, &observations);
	stats->observations += observations;
	return true;
}

void
lert_add_stats(void *metap, const void *statsp)
{
	LertMeta   *meta = (LertMeta *) metap;
	const LertStats *stats = (const LertStats *) statsp;

	meta->stream_pos += stats->observations;
}

/*
 * Move the log head to the slowest cone's position, if the consolidation
 * lock is free.  Returns true if the head moved.
 */
static bool
advance_head(Relation rel)
{
	LertMeta	meta;
	uint64		pos = PG_UINT64_MAX;
	BlockNumber blk = InvalidBlockNumber;
	int64		stream_pos = 0;
	LertStats	stats;

	if (!ConditionalLockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock))
		return false;
	if (!lert_read_meta(rel, &meta))
		elog(ERROR, "LERT \"%s\" has no metapage", RelationGetRelationName(rel));
	for (uint32 c = 0; c < meta.params.ncones; c++)
	{
		const LertCone *cn = &meta.cones[c];

		if (cn->log_pos <= meta.hdr.log.head_pos)
		{
			pos = meta.hdr.log.head_pos;	/* not past the head: no move */
			break;
		}
		if (cn->log_pos < pos)
		{
			pos = cn->log_pos;
			blk = cn->log_blk;
			stream_pos = cn->stream_pos;
		}
	}
	if (pos > meta.hdr.log.head_pos)
	{
		if (stream_pos < meta.stream_pos)
			ss_page_corrupted(rel, SS_METAPAGE_BLKNO, "A cone's stream position %lld is behind the log head's %lld.",
							  (long long) stream_pos, (long long) meta.stream_pos);
		stats.observations = stream_pos - meta.stream_pos;
		ss_log_advance_to(rel, pos, blk, &stats);
	}
	UnlockPage(rel, SS_LOG_CONSOLIDATE_LOCK, ExclusiveLock);
	return pos > meta.hdr.log.head_pos;
}

/*
 * Run cone's round if its lock is free (or, with wait, once it is);
 * returns false if it was busy.  *stopped_at as lert_lane_run's.
 */
static bool
lane_try(Relation rel, uint32 cone, bool wait, TransactionId *stopped_at)
{
	TransactionId stopped;

	CHECK_FOR_INTERRUPTS();
	if (wait)
		LockPage(rel, LERT_CONE_LOCK(cone), ExclusiveLock);
	else if (!ConditionalLockPage(rel, LERT_CONE_LOCK(cone), ExclusiveLock))
		return false;
	(void) lert_lane_run(rel, cone, PG_UINT64_MAX, &stopped);
	UnlockPage(rel, LERT_CONE_LOCK(cone), ExclusiveLock);
	if (TransactionIdIsValid(stopped))
		*stopped_at = stopped;
	return true;
}

/*
 * The consolidate_some callback (writers and readers that find the log
 * long): run the round of every cone no other session is running, the
 * slowest cone first (it holds the log head back), then the others in
 * turn; with wait (the log is many limits long:
 * ss_log_consolidate_if_long) wait for the busy cones afterwards, and
 * then for the transaction a round stopped at.  Then move the head.  The
 * order depends on the metapage only, so a session alone lays its pages
 * out the same way each time.  Returns true if the head moved.
 */
bool
lert_consolidate_some(Relation rel, bool wait)
{
	LertMeta	meta;
	uint32		ncones;
	uint32		first = 0;
	bool		busy[LERT_MAX_CONES] = {0};
	bool		any_busy = false;
	TransactionId stopped_at = InvalidTransactionId;
	bool		moved;

	if (!lert_read_meta(rel, &meta))
		return false;
	ncones = meta.params.ncones;
	for (uint32 c = 1; c < ncones; c++)
		if (Max(meta.cones[c].log_pos, meta.hdr.log.head_pos) <
			Max(meta.cones[first].log_pos, meta.hdr.log.head_pos))
			first = c;
	for (uint32 i = 0; i < ncones; i++)
	{
		uint32		cone = (first + i) % ncones;

		busy[cone] = !lane_try(rel, cone, false, &stopped_at);
		any_busy |= busy[cone];
	}
	if (wait && any_busy)
		for (uint32 i = 0; i < ncones; i++)
			if (busy[(first + i) % ncones])
				(void) lane_try(rel, (first + i) % ncones, true, &stopped_at);
	moved = advance_head(rel);

	/* as ss_log_consolidate_if_long: do not append far past a committer */
	if (wait && TransactionIdIsValid(stopped_at) &&
		!TransactionIdIsCurrentTransactionId(stopped_at) &&
		BackendXidGetPid(stopped_at) != 0)
		XactLockTableWait(stopped_at, rel, NULL, XLTW_None);
	return moved;
}
