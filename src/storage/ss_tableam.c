/*-------------------------------------------------------------------------
 *
 * ss_tableam.c
 *	  Table access method callbacks shared by every streamsketch structure.
 *
 * A structure is not a heap: it has no tuples, TIDs, visibility or
 * indexes.  The callbacks here give every structure the same guard rails:
 * row-level operations other than INSERT fail with a clear error, VACUUM
 * consolidates the change log and advances relfrozenxid (the oldest xid a
 * log batch may hold), ANALYZE has nothing to do, VACUUM FULL/CLUSTER
 * copy the pages as they are (the quotient filters keep their live levels
 * only: qfam_compact.c) and SET TABLESPACE copies them too.
 *
 * Every new relfilenode gets its metapage when it is created: a new table
 * from the constructor's arguments or the settings, TRUNCATE from the old
 * metapage.  An unlogged structure's init fork holds the same metapage (as
 * a btree's does), so the reset after a crash keeps the parameters.
 *
 * Scans return the structure's natural rows.  A parallel scan hands every
 * participant the same descriptor, so the output is claimed by one
 * participant only (ss_scan_claim).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/multixact.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/catalog.h"
#include "catalog/pg_am.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "catalog/storage.h"
#include "catalog/storage_xlog.h"
#include "commands/defrem.h"
#include "commands/vacuum.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "replication/logicalworker.h"
#include "storage/bufmgr.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_progress.h"
#include "storage/smgr.h"
#include "ss_page.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

typedef struct SSParallelScanData
{
	ParallelTableScanDescData base;
	pg_atomic_uint32 claimed;	/* set by the participant that emits rows */
} SSParallelScanData;

static void
refuse(Relation rel, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported on %s table \"%s\"",
					what, ss_structure_name(rel), RelationGetRelationName(rel)),
			 errdetail("A %s table is a streaming summary, not a set of stored rows.",
					   ss_structure_name(rel))));
}

/*
 * Is amoid one of the extension's table access methods?  Those are the
 * table AMs whose handler is a function of this library, whatever their
 * names, so adding a structure needs no list here.
 */
bool
ss_relam_is_streamsketch(Oid amoid)
{
	HeapTuple	tp;
	Oid			handler;
	bool		isnull;
	Datum		probin;
	bool		result = false;

	if (!OidIsValid(amoid))
		return false;
	tp = SearchSysCache1(AMOID, ObjectIdGetDatum(amoid));
	if (!HeapTupleIsValid(tp))
		return false;
	handler = ((Form_pg_am) GETSTRUCT(tp))->amhandler;
	if (((Form_pg_am) GETSTRUCT(tp))->amtype != AMTYPE_TABLE)
		handler = InvalidOid;
	ReleaseSysCache(tp);
	if (!OidIsValid(handler))
		return false;

	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(handler));
	if (!HeapTupleIsValid(tp))
		return false;
	probin = SysCacheGetAttr(PROCOID, tp, Anum_pg_proc_probin, &isnull);
	if (!isnull && ((Form_pg_proc) GETSTRUCT(tp))->prolang == ClanguageId)
	{
		char	   *path = TextDatumGetCString(probin);
		char	   *base = strrchr(path, '/');

		base = base ? base + 1 : path;
		result = strcmp(base, "streamsketch") == 0 ||
			strcmp(base, "streamsketch" DLSUFFIX) == 0;
	}
	ReleaseSysCache(tp);
	return result;
}

/* ---- scans ---- */

static const TupleTableSlotOps *
ss_slot_callbacks(Relation rel)
{
	return &TTSOpsVirtual;
}

/* Free a scan descriptor ss_scan_desc_init filled, and its snapshot. */
void
ss_scan_desc_free(TableScanDesc scan)
{
	if (scan->rs_flags & SO_TEMP_SNAPSHOT)
		UnregisterSnapshot(scan->rs_snapshot);
	pfree(scan);
}

/* Fill the generic part of a scan descriptor (every structure's scans). */
void
ss_scan_desc_init(TableScanDesc scan, Relation rel, Snapshot snapshot,
				  int nkeys, struct ScanKeyData *key,
				  ParallelTableScanDesc pscan, uint32 flags)
{
	scan->rs_rd = rel;
	scan->rs_snapshot = snapshot;
	scan->rs_nkeys = nkeys;
	scan->rs_key = key;
	scan->rs_flags = flags;
	scan->rs_parallel = pscan;
}

/*
 * Sketches and filters have no rows to enumerate: their scans return none.
 */
static TableScanDesc
ss_scan_begin(Relation rel, Snapshot snapshot, int nkeys,
			  struct ScanKeyData *key, ParallelTableScanDesc pscan,
			  uint32 flags)
{
	TableScanDesc scan = palloc0(sizeof(TableScanDescData));

	ss_scan_desc_init(scan, rel, snapshot, nkeys, key, pscan, flags);
	return scan;
}

static void
ss_scan_end(TableScanDesc scan)
{
	ss_scan_desc_free(scan);
}

static void
ss_scan_rescan(TableScanDesc scan, struct ScanKeyData *key, bool set_params,
			   bool allow_strat, bool allow_sync, bool allow_pagemode)
{
}

static bool
ss_scan_getnextslot(TableScanDesc scan, ScanDirection direction,
					TupleTableSlot *slot)
{
	ExecClearTuple(slot);
	return false;
}

/*
 * The scan of a structure with rows (cbt groups, lert reports, bfile
 * samples), whose descriptor gives SSScanOps.  A parallel scan hands every
 * participant the same scan: the first to ask claims the rows
 * (ss_scan_claim).  The structure's callbacks run in the scan's memory
 * context, which rescan and end reset after its stop callback, and find
 * the part of the descriptor after the SSScanDesc zeroed again.
 */
static TableScanDesc
ss_rows_scan_begin(Relation rel, Snapshot snapshot, int nkeys,
				   struct ScanKeyData *key, ParallelTableScanDesc pscan,
				   uint32 flags)
{
	const SSStructure *s = ss_structure_ops(rel);
	SSScanDesc *scan;

	Assert(s->scan->scan_size >= sizeof(SSScanDesc));
	scan = palloc0(s->scan->scan_size);
	ss_scan_desc_init(&scan->base, rel, snapshot, nkeys, key, pscan, flags);
	scan->ops = s->scan;
	scan->cxt = AllocSetContextCreate(CurrentMemoryContext,
									  "streamsketch scan",
									  ALLOCSET_DEFAULT_SIZES);
	return &scan->base;
}

/* Forget what the scan read: the next row starts it again. */
static void
ss_rows_scan_reset(SSScanDesc *scan)
{
	if (scan->started && scan->claimed && scan->ops->stop)
		scan->ops->stop(scan);
	MemoryContextReset(scan->cxt);
	memset((char *) scan + sizeof(SSScanDesc), 0,
		   scan->ops->scan_size - sizeof(SSScanDesc));
	scan->started = false;
	scan->claimed = false;
	scan->done = false;
}

static void
ss_rows_scan_end(TableScanDesc sscan)
{
	SSScanDesc *scan = (SSScanDesc *) sscan;

	ss_rows_scan_reset(scan);
	MemoryContextDelete(scan->cxt);
	ss_scan_desc_free(sscan);
}

static void
ss_rows_scan_rescan(TableScanDesc sscan, struct ScanKeyData *key,
					bool set_params, bool allow_strat, bool allow_sync,
					bool allow_pagemode)
{
	ss_rows_scan_reset((SSScanDesc *) sscan);
}

static bool
ss_rows_scan_getnextslot(TableScanDesc sscan, ScanDirection direction,
						 TupleTableSlot *slot)
{
	SSScanDesc *scan = (SSScanDesc *) sscan;
	MemoryContext old;
	BufferAccessStrategy prev;
	bool		found;

	ExecClearTuple(slot);
	old = MemoryContextSwitchTo(scan->cxt);
	/* a scan reads the whole structure: through the bulk-read ring */
	prev = ss_bulk_read_begin();
	if (!scan->started)
	{
		scan->started = true;
		scan->claimed = ss_scan_claim(sscan);
		if (scan->claimed && scan->ops->start)
			scan->ops->start(scan);
	}
	found = scan->claimed && !scan->done && scan->ops->next(scan, slot);
	if (!found)
		scan->done = true;
	ss_bulk_read_end(prev);
	MemoryContextSwitchTo(old);
	return found;
}

static Size
ss_parallelscan_estimate(Relation rel)
{
	return sizeof(SSParallelScanData);
}

static Size
ss_parallelscan_initialize(Relation rel, ParallelTableScanDesc pscan)
{
	SSParallelScanData *p = (SSParallelScanData *) pscan;

	p->base.phs_relid = RelationGetRelid(rel);
	p->base.phs_syncscan = false;
	p->base.phs_snapshot_any = false;
	pg_atomic_init_u32(&p->claimed, 0);
	return sizeof(SSParallelScanData);
}

static void
ss_parallelscan_reinitialize(Relation rel, ParallelTableScanDesc pscan)
{
	pg_atomic_write_u32(&((SSParallelScanData *) pscan)->claimed, 0);
}

/*
 * Should this participant produce the scan's rows?  Always for a serial
 * scan; for a parallel one, only the first participant to ask.
 */
bool
ss_scan_claim(TableScanDesc scan)
{
	uint32		expected = 0;

	if (scan->rs_parallel == NULL)
		return true;
	return pg_atomic_compare_exchange_u32(&((SSParallelScanData *) scan->rs_parallel)->claimed,
										  &expected, 1);
}

/* ---- index access and TIDs: there are none ---- */

static struct IndexFetchTableData *
ss_index_fetch_begin(Relation rel)
{
	refuse(rel, "an index scan");
	return NULL;
}

static void
ss_index_fetch_reset(struct IndexFetchTableData *data)
{
}

static void
ss_index_fetch_end(struct IndexFetchTableData *data)
{
}

static bool
ss_index_fetch_tuple(struct IndexFetchTableData *scan, ItemPointer tid,
					 Snapshot snapshot, TupleTableSlot *slot,
					 bool *call_again, bool *all_dead)
{
	elog(ERROR, "streamsketch tables have no indexes");
	return false;
}

static bool
ss_tuple_fetch_row_version(Relation rel, ItemPointer tid, Snapshot snapshot,
						   TupleTableSlot *slot)
{
	return false;
}

static bool
ss_tuple_tid_valid(TableScanDesc scan, ItemPointer tid)
{
	return false;
}

static void
ss_tuple_get_latest_tid(TableScanDesc scan, ItemPointer tid)
{
}

static bool
ss_tuple_satisfies_snapshot(Relation rel, TupleTableSlot *slot,
							Snapshot snapshot)
{
	return false;
}

static TransactionId
ss_index_delete_tuples(Relation rel, TM_IndexDeleteOp *delstate)
{
	elog(ERROR, "streamsketch tables have no indexes");
	return InvalidTransactionId;
}

/* ---- modifications other than INSERT ---- */

static void
ss_tuple_insert_speculative(Relation rel, TupleTableSlot *slot, CommandId cid,
							int options, struct BulkInsertStateData *bistate,
							uint32 specToken)
{
	refuse(rel, "INSERT ... ON CONFLICT");
}

static void
ss_tuple_complete_speculative(Relation rel, TupleTableSlot *slot,
							  uint32 specToken, bool succeeded)
{
	refuse(rel, "INSERT ... ON CONFLICT");
}

static void
ss_multi_insert(Relation rel, TupleTableSlot **slots, int nslots,
				CommandId cid, int options, struct BulkInsertStateData *bistate)
{
	for (int i = 0; i < nslots; i++)
		rel->rd_tableam->tuple_insert(rel, slots[i], cid, options, bistate);
}

static TM_Result
ss_tuple_delete(Relation rel, ItemPointer tid, CommandId cid,
				Snapshot snapshot, Snapshot crosscheck, bool wait,
				TM_FailureData *tmfd, bool changingPart)
{
	refuse(rel, "DELETE");
	return TM_Invisible;
}

static TM_Result
ss_tuple_update(Relation rel, ItemPointer otid, TupleTableSlot *slot,
				CommandId cid, Snapshot snapshot, Snapshot crosscheck,
				bool wait, TM_FailureData *tmfd, LockTupleMode *lockmode,
				bool *update_indexes)
{
	refuse(rel, "UPDATE");
	return TM_Invisible;
}

static TM_Result
ss_tuple_lock(Relation rel, ItemPointer tid, Snapshot snapshot,
			  TupleTableSlot *slot, CommandId cid, LockTupleMode mode,
			  LockWaitPolicy wait_policy, uint8 flags, TM_FailureData *tmfd)
{
	refuse(rel, "row locking");
	return TM_Invisible;
}

/* ---- storage ---- */

/*
 * Write block 0 of a fork of a new relfilenode: the metapage of a new,
 * empty structure with st's parameters.  Straight through smgr, as
 * btbuildempty writes its init fork: the relation is not in the relcache
 * under this relfilenode yet.  A WAL-logged page is synced too, because a
 * checkpoint that started before our record does not see a write made
 * outside shared buffers.  Unlogged main forks and temp relations need
 * neither; a permanent relation that skips WAL (wal_level = minimal) is
 * synced at commit by the pending sync RelationCreateStorage registered.
 */
static void
ss_write_metapage(SMgrRelation srel, ForkNumber fork, bool use_wal,
				  const SSStructure *ops, const void *st)
{
	PGAlignedBlock page;

	memset(page.data, 0, BLCKSZ);
	ss_page_init((Page) page.data, SS_PAGE_META, ops->meta_size);
	ss_new_meta(ops, st, SSPageGetData(page.data));
	if (use_wal)
		log_newpage(&srel->smgr_rnode.node, fork, SS_METAPAGE_BLKNO,
					(Page) page.data, true);
	PageSetChecksumInplace((Page) page.data, SS_METAPAGE_BLKNO);
	smgrextend(srel, fork, SS_METAPAGE_BLKNO, page.data, true);
	if (use_wal)
		smgrimmedsync(srel, fork);
}

/*
 * Create the storage of a new relfilenode with its metapage, and for
 * unlogged relations an init fork holding the same metapage, so that the
 * reset after a crash brings back an empty structure with the same
 * parameters.
 */
static void
ss_create_storage(const RelFileNode *newrnode, char persistence,
				  const SSStructure *ops, const void *st)
{
	SMgrRelation srel = RelationCreateStorage(*newrnode, persistence, true);

	ss_write_metapage(srel, MAIN_FORKNUM,
					  persistence == RELPERSISTENCE_PERMANENT && XLogIsNeeded(),
					  ops, st);
	if (persistence == RELPERSISTENCE_UNLOGGED)
	{
		smgrcreate(srel, INIT_FORKNUM, false);
		log_smgrcreate(newrnode, INIT_FORKNUM);
		ss_write_metapage(srel, INIT_FORKNUM, true, ops, st);
	}
	smgrclose(srel);
}

/* True while CREATE TABLE runs: the pg_class row does not exist yet. */
bool
ss_relation_is_new(Relation rel)
{
	return !SearchSysCacheExists1(RELOID,
								  ObjectIdGetDatum(RelationGetRelid(rel)));
}

/*
 * A structure's state (parameters and column info) cached in rd_amcache,
 * which the relcache frees on invalidation (e.g. after TRUNCATE).  The
 * parameters come from the metapage, which every structure has from its
 * creation on.
 */

/*
 * The parameters a structure keeps when its storage is replaced (TRUNCATE):
 * those of its metapage, or of its label if the metapage cannot be read,
 * so that TRUNCATE starts over even a damaged structure.
 *
 * Reading a damaged metapage fails anywhere in the read: in the buffer
 * manager (a checksum failure, with the buffer pinned and its I/O in
 * progress) or under the page's lock.  Only aborting cleans that up, so
 * the read runs in a subtransaction, which is rolled back on a damage
 * error before the label is used instead.
 */
static void *
ss_kept_params(Relation rel, const SSStructure *ops)
{
	void	   *st = palloc0(ops->state_size);
	MemoryContext ctx = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *edata = NULL;
	char	   *label;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		memcpy(st, ss_get_state(rel, ops), ops->state_size);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(ctx);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(ctx);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(ctx);
		CurrentResourceOwner = owner;
		if (edata->sqlerrcode != ERRCODE_DATA_CORRUPTED)
			ReThrowError(edata);
	}
	PG_END_TRY();
	if (edata == NULL)
		return st;

	label = ss_get_label(RelationGetRelid(rel));
	if (label == NULL)
		ReThrowError(edata);
	ereport(WARNING,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("%s", edata->message),
			 errdetail("The new, empty structure gets the parameters of the table's label.")));
	ss_forget_state(rel);
	ops->check_columns(rel, st);
	ss_params_from_label(ops, rel, label, st);
	return st;
}

static void
ss_copy_fork_pages(Relation rel, SMgrRelation dst, ForkNumber fork,
				   char persistence)
{
	if (smgrexists(RelationGetSmgr(rel), fork))
	{
		if (fork != MAIN_FORKNUM)
			smgrcreate(dst, fork, false);
		RelationCopyStorage(RelationGetSmgr(rel), dst, fork, persistence);
	}
}

/*
 * Create the storage of newrnode as a copy of rel's pages (every fork; the
 * init fork is always WAL-logged, like the heap's).
 */
static void
ss_copy_storage(Relation rel, const RelFileNode *newrnode)
{
	SMgrRelation dstrel;

	FlushRelationBuffers(rel);
	dstrel = RelationCreateStorage(*newrnode, rel->rd_rel->relpersistence, true);
	ss_copy_fork_pages(rel, dstrel, MAIN_FORKNUM, rel->rd_rel->relpersistence);
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED &&
		smgrexists(RelationGetSmgr(rel), INIT_FORKNUM))
	{
		smgrcreate(dstrel, INIT_FORKNUM, false);
		log_smgrcreate(newrnode, INIT_FORKNUM);
		RelationCopyStorage(RelationGetSmgr(rel), dstrel, INIT_FORKNUM,
							RELPERSISTENCE_PERMANENT);
	}
	smgrclose(dstrel);
}

/*
 * relation_set_new_filenode of every structure.  A new table gets the
 * parameters of its constructor or the settings, recorded in its label;
 * TRUNCATE (and SECURITY LABEL on a structure never written) writes a new
 * metapage with the kept (or labelled) parameters, and drops this
 * transaction's earlier pending records.
 */
void
ss_set_new_filenode(Relation rel, const SSStructure *ops,
					const RelFileNode *newrnode, char persistence,
					TransactionId *freezeXid, MultiXactId *minmulti)
{
	const void *given = ss_creation_params(rel, ops);
	void	   *st;

	/*
	 * The change log holds xids of batches appended from now on, all at or
	 * after RecentXmin (as for a new heap).
	 */
	*freezeXid = RecentXmin;
	*minmulti = InvalidMultiXactId;

	ops->check_columns(rel, NULL);

	/*
	 * A TRUNCATE replayed by logical replication (a FOR ALL TABLES or TABLES
	 * IN SCHEMA publication includes structures): the publisher's inserts
	 * never reach the subscriber, because generic WAL is not decoded, so
	 * its TRUNCATE must not empty the subscriber's structure either.  The
	 * new relfilenode gets the old contents.
	 */
	if (IsLogicalWorker() && !ss_relation_is_new(rel) && given == NULL)
	{
		ereport(LOG,
				(errmsg("logical replication keeps the contents of %s table \"%s\" on TRUNCATE",
						ss_structure_name(rel), RelationGetRelationName(rel)),
				 errdetail("Changes to streamsketch structures are not replicated logically.")));
		ss_copy_storage(rel, newrnode);
		ss_forget_state(rel);
		return;
	}

	if (given != NULL)
	{
		st = palloc(ops->state_size);
		memcpy(st, given, ops->state_size);
	}
	else if (ss_relation_is_new(rel))
	{
		st = palloc0(ops->state_size);
		ss_params_from_settings(ops, rel, st);
	}
	else
		st = ss_kept_params(rel, ops);

	ss_create_storage(newrnode, persistence, ops, st);
	if (ss_relation_is_new(rel))
		ss_set_label(RelationGetRelid(rel), ss_params_to_label(ops, st));
	if (ss_relation_is_new(rel) || given != NULL)
		ss_describe(rel, ops, st);
	else if (ss_pending_has(RelationGetRelid(rel)))
		ss_pending_add(rel, SS_PENDING_TRUNCATE, NULL, 0);
	ss_forget_state(rel);
}

/* The ops of rel, which our routine's callback was called for. */
static const SSStructure *
ss_routine_ops(Relation rel)
{
	const SSStructure *ops = ss_structure_ops(rel);

	if (ops == NULL)
		elog(ERROR, "relation \"%s\" has no registered streamsketch structure",
			 RelationGetRelationName(rel));
	return ops;
}

static void
ss_relation_set_new_filenode(Relation rel, const RelFileNode *newrnode,
							 char persistence, TransactionId *freezeXid,
							 MultiXactId *minmulti)
{
	ss_set_new_filenode(rel, ss_routine_ops(rel), newrnode, persistence,
						freezeXid, minmulti);
}

/*
 * relation_nontransactional_truncate (TRUNCATE of a table created or
 * truncated in this transaction): the same file, emptied, with a new
 * metapage.  The init fork of an unlogged table keeps its metapage.
 */
void
ss_truncate_in_place(Relation rel, const SSStructure *ops)
{
	void	   *st = ss_kept_params(rel, ops);
	void	   *meta = palloc0(ops->meta_size);

	RelationTruncate(rel, 0);
	if (ss_pending_has(RelationGetRelid(rel)))
		ss_pending_add(rel, SS_PENDING_TRUNCATE, NULL, 0);
	ss_forget_state(rel);
	ss_new_meta(ops, st, meta);
	ss_ensure_metapage(rel, ops->kind, meta, ops->meta_size);
}

static void
ss_relation_nontransactional_truncate(Relation rel)
{
	ss_truncate_in_place(rel, ss_routine_ops(rel));
}

/* ALTER TABLE SET TABLESPACE: copy every fork block by block. */
static void
ss_relation_copy_data(Relation rel, const RelFileNode *newrnode)
{
	ss_copy_storage(rel, newrnode);
	RelationDropStorage(rel);
}

/*
 * VACUUM FULL and CLUSTER of an unlogged structure: the transient table's
 * init fork was written when the pg_class row did not exist yet, so with
 * the settings' parameters; it must hold the metapage of an empty
 * structure with OldTable's parameters, or the reset after a crash would
 * bring the structure back with other parameters (its label then no longer
 * matches: ss_check_meta_against_label reports the metapage as damaged).
 */
void
ss_cluster_init_fork(Relation OldTable, Relation NewTable)
{
	const SSStructure *ops = ss_routine_ops(OldTable);
	SMgrRelation srel = RelationGetSmgr(NewTable);
	PGAlignedBlock page;

	if (NewTable->rd_rel->relpersistence != RELPERSISTENCE_UNLOGGED ||
		!smgrexists(srel, INIT_FORKNUM))
		return;
	memset(page.data, 0, BLCKSZ);
	ss_page_init((Page) page.data, SS_PAGE_META, ops->meta_size);
	ss_new_meta(ops, ss_get_state(OldTable, ops), SSPageGetData(page.data));
	log_newpage(&srel->smgr_rnode.node, INIT_FORKNUM, SS_METAPAGE_BLKNO,
				(Page) page.data, true);
	PageSetChecksumInplace((Page) page.data, SS_METAPAGE_BLKNO);
	smgrwrite(srel, INIT_FORKNUM, SS_METAPAGE_BLKNO, page.data, true);
	smgrimmedsync(srel, INIT_FORKNUM);
}

/*
 * VACUUM FULL and CLUSTER: the structure's pages are copied as they are
 * (nothing to sort), so no data is lost, or by the structure's compact if
 * it has space to give back (the quotient filters: qfam_compact.c).
 */
static void
ss_relation_copy_for_cluster(Relation OldTable, Relation NewTable,
							 Relation OldIndex, bool use_sort,
							 TransactionId OldestXmin,
							 TransactionId *xid_cutoff,
							 MultiXactId *multi_cutoff,
							 double *num_tuples, double *tups_vacuumed,
							 double *tups_recently_dead)
{
	const SSStructure *ops = ss_routine_ops(OldTable);
	TransactionId oldest;

	/*
	 * Under the exclusive lock every batch's transaction has ended: the
	 * copy gets a consolidated log, whose remaining xids (none expected)
	 * bound the new relfrozenxid.
	 */
	(void) ss_log_consolidate(OldTable, true);
	oldest = ss_log_oldest_xid(OldTable);
	if (ops->compact != NULL)
	{
		/* its copy starts an empty log */
		if (TransactionIdIsValid(oldest))
			elog(ERROR, "the change log of \"%s\" still holds batches after its consolidation",
				 RelationGetRelationName(OldTable));
		ops->compact(OldTable, NewTable);
	}
	else
	{
		FlushRelationBuffers(OldTable);
		/* the transient table's own metapage is replaced by the copy */
		RelationTruncate(NewTable, 0);
		RelationCopyStorage(RelationGetSmgr(OldTable),
							RelationGetSmgr(NewTable), MAIN_FORKNUM,
							NewTable->rd_rel->relpersistence);
		ss_cluster_init_fork(OldTable, NewTable);
	}
	if (TransactionIdIsValid(oldest) &&
		TransactionIdPrecedes(oldest, OldestXmin))
		*xid_cutoff = oldest;
	else
		*xid_cutoff = OldestXmin;
	*multi_cutoff = InvalidMultiXactId;
	*num_tuples = 0;
	*tups_vacuumed = 0;
	*tups_recently_dead = 0;
}

/*
 * VACUUM consolidates the change log and advances relfrozenxid
 * (ss_log_vacuum); nothing else is ever dead.  The vacuum is reported to
 * the statistics as heap_vacuum_rel does: that resets the inserts counted
 * since the last vacuum (pgstat_count_heap_insert), without which
 * autovacuum would find the insert threshold passed forever and vacuum
 * the structure again at every naptime, and it sets last_(auto)vacuum and
 * the vacuum counts monitoring reads.  A structure has no tuples to count.
 * Its progress shows in pg_stat_progress_vacuum, which VACUUM leaves to
 * the access method (heap_vacuum_rel starts and ends it too), and in
 * streamsketch_progress.
 */
static void
ss_relation_vacuum(Relation rel, struct VacuumParams *params,
				   BufferAccessStrategy bstrategy)
{
	pgstat_progress_start_command(PROGRESS_COMMAND_VACUUM,
								  RelationGetRelid(rel));
	ss_progress_start(rel, "VACUUM");
	ss_log_vacuum(rel, (params->options & VACOPT_VERBOSE) != 0);
	ss_progress_end();
	pgstat_progress_end_command();
	pgstat_report_vacuum(RelationGetRelid(rel), rel->rd_rel->relisshared,
						 0, 0);
}

/*
 * ANALYZE samples the rows a scan returns (a cbt's groups, a lert's
 * reports, a bfile's sample), so that the planner has their columns'
 * distinct values, frequencies and widths.  Where a row lives in the file
 * says nothing about it, so the first block the block sampler asks for
 * yields every row (its reservoir keeps a uniform sample of them) and the
 * others none.  The sampler's total is exact while the file has no more
 * blocks than the rows it samples, and overestimated beyond; the planner
 * takes a structure's row count from its metapage instead
 * (ss_relation_estimate_size).  A sketch or filter has no rows.
 */
static bool
ss_scan_analyze_next_block(TableScanDesc scan, BlockNumber blockno,
						   BufferAccessStrategy bstrategy)
{
	if (ss_structure_ops(scan->rs_rd)->scan == NULL)
		return false;
	return !((SSScanDesc *) scan)->started;
}

static bool
ss_scan_analyze_next_tuple(TableScanDesc scan, TransactionId OldestXmin,
						   double *liverows, double *deadrows,
						   TupleTableSlot *slot)
{
	if (!ss_rows_scan_getnextslot(scan, ForwardScanDirection, slot))
		return false;
	*liverows += 1;
	return true;
}

static double
ss_index_build_range_scan(Relation table_rel, Relation index_rel,
						  struct IndexInfo *index_info, bool allow_sync,
						  bool anyvisible, bool progress,
						  BlockNumber start_blockno, BlockNumber numblocks,
						  IndexBuildCallback callback, void *callback_state,
						  TableScanDesc scan)
{
	refuse(table_rel, "CREATE INDEX");
	return 0;
}

static void
ss_index_validate_scan(Relation table_rel, Relation index_rel,
					   struct IndexInfo *index_info, Snapshot snapshot,
					   struct ValidateIndexState *state)
{
	refuse(table_rel, "CREATE INDEX");
}

static bool
ss_relation_needs_toast_table(Relation rel)
{
	return false;
}

/*
 * The planner's estimate: the pages, and the rows a scan returns as the
 * structure's metapage counts them (a lert's reports, a bfile's sample, a
 * cbt's rows); none for the structures whose scan returns nothing.  One
 * read of the metapage; what waits in the change log is not counted.
 */
static void
ss_relation_estimate_size(Relation rel, int32 *attr_widths,
						  BlockNumber *pages, double *tuples,
						  double *allvisfrac)
{
	const SSStructure *s = ss_structure_ops(rel);

	*pages = RelationGetNumberOfBlocks(rel);
	*tuples = 0;
	*allvisfrac = 0;
	if (s != NULL && s->estimate_rows != NULL && *pages > 0)
	{
		void	   *meta = palloc(s->meta_size);

		if (ss_read_structure_meta(rel, s, meta))
			*tuples = s->estimate_rows(meta);
		pfree(meta);
	}
}

/*
 * TABLESAMPLE picks blocks and tuple offsets, which mean nothing in a
 * structure's file: refused where a scan has rows to sample (a bfile's
 * documented way is bfile_subsample), and empty like the scan where it
 * has none.
 */
static bool
ss_scan_sample_next_block(TableScanDesc scan, struct SampleScanState *scanstate)
{
	Relation	rel = scan->rs_rd;

	if (ss_structure_ops(rel)->scan == NULL)
		return false;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("TABLESAMPLE is not supported on %s table \"%s\"",
					ss_structure_name(rel), RelationGetRelationName(rel)),
			 errdetail("A %s table's rows are not stored in blocks that a sampling method could pick.",
					   ss_structure_name(rel))));
	return false;
}

static bool
ss_scan_sample_next_tuple(TableScanDesc scan, struct SampleScanState *scanstate,
						  TupleTableSlot *slot)
{
	return false;
}

/* Check the columns (key [, integer]) of a new or opened table. */
void
ss_check_key_columns(TupleDesc desc, const char *relname, const char *amname,
					 const char *intname, SSKeyColumns *out)
{
	int			ncols = 0;
	Form_pg_attribute cols[2] = {NULL, NULL};

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (ncols < 2)
			cols[ncols] = att;
		ncols++;
	}
	if (ncols < 1 || ncols > 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("a %s table must have one or two columns, \"%s\" has %d",
						amname, relname, ncols),
				 errhint("Use (key anytype) or (key anytype, %s bigint).", intname)));
	if (ncols == 2 && cols[1]->atttypid != INT2OID &&
		cols[1]->atttypid != INT4OID && cols[1]->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the second column of %s table \"%s\" must be an integer %s",
						amname, relname, intname),
				 errdetail("Column \"%s\" has type %s.", NameStr(cols[1]->attname),
						   format_type_be(cols[1]->atttypid)),
				 errhint("Use smallint, integer or bigint.")));
	if (out)
	{
		out->keytype = cols[0]->atttypid;
		out->keylen = cols[0]->attlen;
		out->keybyval = cols[0]->attbyval;
		out->inttype = ncols == 2 ? cols[1]->atttypid : InvalidOid;
	}
}

/*
 * The common part of every structure's tuple_insert: count the row (for
 * monitoring and autovacuum's insert threshold), fill the slot's columns,
 * and hash its key into *key, with weight 1 or the value of the second
 * column of type inttype (if valid).  False if the row is skipped, for a
 * NULL key or a NULL second column, as aggregates skip NULLs.  The caller
 * checks the weight's sign.
 */
bool
ss_slot_key(Relation rel, TupleTableSlot *slot, int16 keylen, bool keybyval,
			Oid inttype, uint32 seed, SSPendingKey *key)
{
	pgstat_count_heap_insert(rel, 1);

	slot_getallattrs(slot);
	slot->tts_tableOid = RelationGetRelid(rel);
	ItemPointerSetInvalid(&slot->tts_tid);
	if (slot->tts_isnull[0])
		return false;
	key->weight = 1;
	if (OidIsValid(inttype))
	{
		if (slot->tts_isnull[1])
			return false;
		key->weight = ss_int_datum(inttype, slot->tts_values[1]);
	}
	key->hash = ss_hash_datum(slot->tts_values[0], keylen, keybyval, seed);
	return true;
}

/*
 * The value of a datum of type typid as int64: a smallint, integer or
 * bigint, or the integer a date, timestamp or timestamptz is stored as.
 */
int64
ss_int_datum(Oid typid, Datum d)
{
	switch (typid)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		case DATEOID:
			return DatumGetDateADT(d);
		case INT8OID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return DatumGetInt64(d);
	}
	elog(ERROR, "type %u is not stored as an integer", typid);
	return 0;					/* keep compiler quiet */
}

#define SS_MAX_STRUCTURES 16

/*
 * The table AM routine of structure s, built once: its access method's
 * handler returns it.  (The quotient filter family builds one per kind,
 * with ss_tableam_init_common.)
 */
const TableAmRoutine *
ss_tableam_routine(const SSStructure *s)
{
	static TableAmRoutine routines[SS_MAX_STRUCTURES];
	static const SSStructure *routine_of[SS_MAX_STRUCTURES];
	static int	nroutines = 0;
	TableAmRoutine *r;

	for (int i = 0; i < nroutines; i++)
		if (routine_of[i] == s)
			return &routines[i];
	if (nroutines == SS_MAX_STRUCTURES)
		elog(ERROR, "too many streamsketch structures");
	r = &routines[nroutines];
	MemSet(r, 0, sizeof(*r));
	ss_tableam_init_common(r, s);
	routine_of[nroutines++] = s;
	return r;
}

/*
 * Fill routine r's callbacks: those common to all structures and ops's
 * tuple_insert; register ops as the structure of r.
 */
void
ss_tableam_init_common(TableAmRoutine *r, const SSStructure *ops)
{
	ss_tableam_register(r, ops);
	r->type = T_TableAmRoutine;
	r->slot_callbacks = ss_slot_callbacks;
	r->scan_begin = ops->scan ? ss_rows_scan_begin : ss_scan_begin;
	r->scan_end = ops->scan ? ss_rows_scan_end : ss_scan_end;
	r->scan_rescan = ops->scan ? ss_rows_scan_rescan : ss_scan_rescan;
	r->scan_getnextslot = ops->scan ? ss_rows_scan_getnextslot :
		ss_scan_getnextslot;
	r->parallelscan_estimate = ss_parallelscan_estimate;
	r->parallelscan_initialize = ss_parallelscan_initialize;
	r->parallelscan_reinitialize = ss_parallelscan_reinitialize;
	r->index_fetch_begin = ss_index_fetch_begin;
	r->index_fetch_reset = ss_index_fetch_reset;
	r->index_fetch_end = ss_index_fetch_end;
	r->index_fetch_tuple = ss_index_fetch_tuple;
	r->tuple_fetch_row_version = ss_tuple_fetch_row_version;
	r->tuple_tid_valid = ss_tuple_tid_valid;
	r->tuple_get_latest_tid = ss_tuple_get_latest_tid;
	r->tuple_satisfies_snapshot = ss_tuple_satisfies_snapshot;
	r->index_delete_tuples = ss_index_delete_tuples;
	r->tuple_insert = ops->tuple_insert;
	r->tuple_insert_speculative = ss_tuple_insert_speculative;
	r->tuple_complete_speculative = ss_tuple_complete_speculative;
	r->multi_insert = ss_multi_insert;
	r->tuple_delete = ss_tuple_delete;
	r->tuple_update = ss_tuple_update;
	r->tuple_lock = ss_tuple_lock;
	r->relation_set_new_filenode = ss_relation_set_new_filenode;
	r->relation_nontransactional_truncate = ss_relation_nontransactional_truncate;
	r->relation_copy_data = ss_relation_copy_data;
	r->relation_copy_for_cluster = ss_relation_copy_for_cluster;
	r->relation_vacuum = ss_relation_vacuum;
	r->scan_analyze_next_block = ss_scan_analyze_next_block;
	r->scan_analyze_next_tuple = ss_scan_analyze_next_tuple;
	r->index_build_range_scan = ss_index_build_range_scan;
	r->index_validate_scan = ss_index_validate_scan;
	r->relation_size = table_block_relation_size;
	r->relation_needs_toast_table = ss_relation_needs_toast_table;
	r->relation_estimate_size = ss_relation_estimate_size;
	r->scan_sample_next_block = ss_scan_sample_next_block;
	r->scan_sample_next_tuple = ss_scan_sample_next_tuple;
}
