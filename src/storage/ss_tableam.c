/*-------------------------------------------------------------------------
 *
 * ss_tableam.c
 *	  Table access method callbacks shared by every streamsketch structure.
 *
 * A structure is not a heap: it has no tuples, TIDs, visibility or
 * indexes.  The callbacks here give every structure the same guard rails:
 * row-level operations other than INSERT fail with a clear error, VACUUM
 * and ANALYZE have nothing to do, VACUUM FULL/CLUSTER and SET TABLESPACE
 * copy the pages as they are, relfrozenxid stays invalid so that
 * anti-wraparound vacuum leaves the relation alone, and unlogged relations
 * get an (empty) init fork: the metapage is created lazily when the main
 * fork has no blocks, which also covers TRUNCATE and the unlogged reset.
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
#include "catalog/catalog.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "catalog/storage.h"
#include "catalog/storage_xlog.h"
#include "commands/defrem.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "ss_pending.h"
#include "storage/smgr.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
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

const char *
ss_structure_name(Relation rel)
{
	char	   *name = get_am_name(rel->rd_rel->relam);

	return name ? name : "streamsketch";
}

bool
ss_relam_is_streamsketch(Oid amoid)
{
	char	   *name;
	bool		result;

	if (!OidIsValid(amoid))
		return false;
	name = get_am_name(amoid);
	if (name == NULL)
		return false;
	result = false;
	for (const SSStructureInfo *s = ss_structures; s->amname; s++)
		result |= strcmp(name, s->amname) == 0;
	pfree(name);
	return result;
}

/* ---- scans ---- */

static const TupleTableSlotOps *
ss_slot_callbacks(Relation rel)
{
	return &TTSOpsVirtual;
}

static TableScanDesc
ss_scan_begin(Relation rel, Snapshot snapshot, int nkeys,
			  struct ScanKeyData *key, ParallelTableScanDesc pscan,
			  uint32 flags)
{
	TableScanDesc scan = palloc0(sizeof(TableScanDescData));

	scan->rs_rd = rel;
	scan->rs_snapshot = snapshot;
	scan->rs_nkeys = nkeys;
	scan->rs_key = key;
	scan->rs_flags = flags;
	scan->rs_parallel = pscan;
	return scan;
}

static void
ss_scan_end(TableScanDesc scan)
{
	if (scan->rs_flags & SO_TEMP_SNAPSHOT)
		UnregisterSnapshot(scan->rs_snapshot);
	pfree(scan);
}

static void
ss_scan_rescan(TableScanDesc scan, struct ScanKeyData *key, bool set_params,
			   bool allow_strat, bool allow_sync, bool allow_pagemode)
{
}

/* Sketches and filters have no rows to enumerate. */
static bool
ss_scan_getnextslot(TableScanDesc scan, ScanDirection direction,
					TupleTableSlot *slot)
{
	ExecClearTuple(slot);
	return false;
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
 * Create the storage of a new relfilenode: an empty main fork (the
 * metapage comes lazily) and, for unlogged relations, an empty init fork,
 * so that the reset after a crash leaves an empty main fork too.
 */
void
ss_create_storage(Relation rel, const RelFileNode *newrnode, char persistence)
{
	SMgrRelation srel = RelationCreateStorage(*newrnode, persistence, true);

	if (persistence == RELPERSISTENCE_UNLOGGED)
	{
		smgrcreate(srel, INIT_FORKNUM, false);
		log_smgrcreate(newrnode, INIT_FORKNUM);
		smgrimmedsync(srel, INIT_FORKNUM);
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
 * parameters come from the metapage if it exists, else from the catalog
 * row, else (a table created before its row was restored) from the GUCs,
 * which are then recorded.
 */
void *
ss_get_state(Relation rel, const SSStateOps *ops)
{
	void	   *st;

	if (rel->rd_amcache)
		return rel->rd_amcache;

	st = MemoryContextAllocZero(CacheMemoryContext, ops->state_size);
	PG_TRY();
	{
		ops->check_columns(rel, st);
		if (!ops->load_params(rel, st))
		{
			ops->default_params(rel, st);
			if (!RecoveryInProgress() && !XactReadOnly)
				ops->store_params(rel, st);
		}
	}
	PG_CATCH();
	{
		pfree(st);
		PG_RE_THROW();
	}
	PG_END_TRY();
	rel->rd_amcache = st;
	return st;
}

void
ss_forget_state(Relation rel)
{
	if (rel->rd_amcache)
		pfree(rel->rd_amcache);
	rel->rd_amcache = NULL;
}

/*
 * relation_set_new_filenode of every structure: CREATE TABLE records the
 * GUC defaults as the table's parameters; TRUNCATE (a new relfilenode)
 * also drops this transaction's earlier pending records.
 */
void
ss_set_new_filenode(Relation rel, const SSStateOps *ops,
					const RelFileNode *newrnode, char persistence,
					TransactionId *freezeXid, MultiXactId *minmulti)
{
	/* no tuples, no xids: anti-wraparound vacuum has nothing to freeze */
	*freezeXid = InvalidTransactionId;
	*minmulti = InvalidMultiXactId;

	ops->check_columns(rel, NULL);
	ss_create_storage(rel, newrnode, persistence);
	if (ss_relation_is_new(rel))
	{
		void	   *st = palloc0(ops->state_size);

		ops->default_params(rel, st);
		ops->store_params(rel, st);
		pfree(st);
	}
	else if (ss_pending_has(RelationGetRelid(rel)))
		ss_pending_add(rel, ops->apply, SS_PENDING_TRUNCATE, NULL, 0);
	ss_forget_state(rel);
}

/* relation_nontransactional_truncate (TRUNCATE of a table new in this xact) */
void
ss_truncate_in_place(Relation rel, const SSStateOps *ops)
{
	RelationTruncate(rel, 0);
	if (ss_pending_has(RelationGetRelid(rel)))
		ss_pending_add(rel, ops->apply, SS_PENDING_TRUNCATE, NULL, 0);
	ss_forget_state(rel);
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

/* ALTER TABLE SET TABLESPACE: copy every fork block by block. */
static void
ss_relation_copy_data(Relation rel, const RelFileNode *newrnode)
{
	SMgrRelation dstrel;

	FlushRelationBuffers(rel);
	dstrel = RelationCreateStorage(*newrnode, rel->rd_rel->relpersistence, true);
	ss_copy_fork_pages(rel, dstrel, MAIN_FORKNUM, rel->rd_rel->relpersistence);
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED)
	{
		/* the init fork is always WAL-logged, like the heap's */
		if (smgrexists(RelationGetSmgr(rel), INIT_FORKNUM))
		{
			smgrcreate(dstrel, INIT_FORKNUM, false);
			log_smgrcreate(newrnode, INIT_FORKNUM);
			RelationCopyStorage(RelationGetSmgr(rel), dstrel, INIT_FORKNUM,
								RELPERSISTENCE_PERMANENT);
		}
	}
	RelationDropStorage(rel);
	smgrclose(dstrel);
}

/*
 * VACUUM FULL and CLUSTER: the structure's pages are copied as they are
 * (there is nothing to compact or sort), so no data is lost.
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
	FlushRelationBuffers(OldTable);
	/* the transient table's catalog row is not needed: OldTable keeps its OID */
	ss_forget_params(RelationGetRelid(NewTable));
	RelationCopyStorage(RelationGetSmgr(OldTable), RelationGetSmgr(NewTable),
						MAIN_FORKNUM, NewTable->rd_rel->relpersistence);
	*xid_cutoff = InvalidTransactionId;
	*multi_cutoff = InvalidMultiXactId;
	*num_tuples = 0;
	*tups_vacuumed = 0;
	*tups_recently_dead = 0;
}

static void
ss_relation_vacuum(Relation rel, struct VacuumParams *params,
				   BufferAccessStrategy bstrategy)
{
	/* nothing is ever dead */
}

static bool
ss_scan_analyze_next_block(TableScanDesc scan, BlockNumber blockno,
						   BufferAccessStrategy bstrategy)
{
	return false;
}

static bool
ss_scan_analyze_next_tuple(TableScanDesc scan, TransactionId OldestXmin,
						   double *liverows, double *deadrows,
						   TupleTableSlot *slot)
{
	return false;
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

static void
ss_relation_estimate_size(Relation rel, int32 *attr_widths,
						  BlockNumber *pages, double *tuples,
						  double *allvisfrac)
{
	*pages = RelationGetNumberOfBlocks(rel);
	*tuples = 0;
	*allvisfrac = 0;
}

static bool
ss_scan_sample_next_block(TableScanDesc scan, struct SampleScanState *scanstate)
{
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

int64
ss_int_datum(Oid inttype, Datum d)
{
	switch (inttype)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

/*
 * Fill the callbacks common to all structures.  The caller sets
 * tuple_insert, relation_set_new_filenode and
 * relation_nontransactional_truncate, and may override the scan.
 */
void
ss_tableam_init_common(TableAmRoutine *r)
{
	r->type = T_TableAmRoutine;
	r->slot_callbacks = ss_slot_callbacks;
	r->scan_begin = ss_scan_begin;
	r->scan_end = ss_scan_end;
	r->scan_rescan = ss_scan_rescan;
	r->scan_getnextslot = ss_scan_getnextslot;
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
	r->tuple_insert_speculative = ss_tuple_insert_speculative;
	r->tuple_complete_speculative = ss_tuple_complete_speculative;
	r->multi_insert = ss_multi_insert;
	r->tuple_delete = ss_tuple_delete;
	r->tuple_update = ss_tuple_update;
	r->tuple_lock = ss_tuple_lock;
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
