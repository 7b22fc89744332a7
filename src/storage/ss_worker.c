/*-------------------------------------------------------------------------
 *
 * ss_worker.c
 *	  Background consolidation of committed change logs.
 *
 * A transaction that commits records into a structure's change log tells
 * a queue in shared memory (ss_worker_at_commit), and a background worker
 * of the structure's database consolidates it: soon (after
 * streamsketch.background_delay) when someone waits for the records (a
 * LERT with a NOTIFY channel) or the log is past a quarter of
 * streamsketch.change_log_limit, so that writers rarely reach the limit
 * and consolidate themselves; otherwise once no commit has added to it for
 * streamsketch.background_quiet_time.  After a round the worker gives back
 * a free tail of log pages, as VACUUM does, so a bulk load's log leaves
 * the file within seconds.
 *
 * Workers are dynamic background workers registered on demand by the
 * committing backend, so nothing needs shared_preload_libraries: at most
 * one per database, at most streamsketch.max_background_workers in all
 * (they count against max_worker_processes, like parallel workers). A
 * worker sleeps on its latch until an entry of its database is due, and
 * exits after SS_WORKER_IDLE_EXIT_MS without work, when its database is
 * about to be dropped, renamed, moved or copied (those wait for every
 * session of the database to leave), when the extension is dropped, or
 * when the setting turns it off.  It connects as the bootstrap superuser
 * and consolidates each structure as its owner, restricted
 * (SECURITY_RESTRICTED_OPERATION, search_path pinned), in a transaction of
 * its own; an error is logged and the structure retried later.
 *
 * Shared state lives in a small struct of the main shared memory segment
 * (ss_shmem.c).  A server crash resets it with the rest of shared memory;
 * the logs are on disk, and the next commit queues them again.
 * The queue is bounded (SS_WORK_ITEMS entries for the whole cluster); a
 * commit that finds it full is counted and left to the writers, readers and
 * VACUUM, which consolidate as they do without workers.
 *
 * Locking: one LWLock guards the queue and the worker slots; it is never
 * held across anything but memory access.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "funcapi.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
#include "utils/timestamp.h"

#include "ss_changelog.h"
#include "ss_progress.h"
#include "ss_shmem.h"
#include "ss_structure.h"
#include "ss_worker.h"
#include "streamsketch.h"

#define SS_WORK_ITEMS			512
#define SS_WORKER_SLOTS			32
/* a registered worker that has not attached by then never will */
#define SS_WORKER_START_TIMEOUT_MS	10000
#define SS_WORKER_IDLE_EXIT_MS		5000
/* how often a sleeping worker looks whether it must leave its database */
#define SS_WORKER_CHECK_MS			250
/* a structure whose round failed is tried again after this */
#define SS_WORKER_RETRY_MS			10000
/* structures one pass of the loop takes before it looks around again */
#define SS_WORKER_BATCH			16
/* relations one transaction can queue; more are left to the writers */
#define SS_NOTED_MAX			64

typedef struct SSWorkItem
{
	Oid			dboid;			/* InvalidOid: a free entry */
	Oid			relid;
	uint64		log_bytes;		/* as the last commit left the log */
	TimestampTz first_commit;	/* the oldest commit not yet consolidated */
	TimestampTz last_commit;
	TimestampTz due_soon;		/* 0: due once quiet */
} SSWorkItem;

typedef struct SSWorkerSlot
{
	Oid			dboid;			/* InvalidOid: a free slot */
	int			pid;			/* 0 while the worker is starting */
	Latch	   *latch;
	TimestampTz registered;
} SSWorkerSlot;

typedef struct SSWorkerShared
{
	LWLock		lock;
	int			tranche;
	uint64		rounds;			/* structures consolidated by workers */
	uint64		errors;			/* rounds that failed */
	uint64		not_queued;		/* commits the full queue turned away */
	SSWorkerSlot slots[SS_WORKER_SLOTS];
	SSWorkItem	items[SS_WORK_ITEMS];
} SSWorkerShared;

typedef struct SSNoted
{
	Oid			relid;
	uint64		log_bytes;
	bool		awaited;
} SSNoted;

bool		ss_background_consolidation = true;
static int	ss_max_background_workers = 2;
static int	ss_background_delay_ms = 200;
static int	ss_background_quiet_ms = 10000;

static SSWorkerShared *shared = NULL;

/* this transaction's appends, until it ends */
static SSNoted noted[SS_NOTED_MAX];
static int	nnoted = 0;

/* in a worker: its slot, and whether it connected to its database */
static int	my_slot = -1;
static bool connected = false;

PGDLLEXPORT void ss_worker_main(Datum arg);

PG_FUNCTION_INFO_V1(streamsketch_background_queue);
PG_FUNCTION_INFO_V1(streamsketch_background_stats);

static Size
worker_shmem_size(void)
{
	return sizeof(SSWorkerShared);
}

static void
worker_shmem_init(void *ptr)
{
	SSWorkerShared *sh = ptr;

	memset(sh, 0, sizeof(SSWorkerShared));
	sh->tranche = LWLockNewTrancheId();
	LWLockInitialize(&sh->lock, sh->tranche);
}

/*
 * Find or make the shared state.  May fail (no shared memory left): never
 * called where an error cannot be raised.
 */
static void
worker_attach(void)
{
	if (shared != NULL)
		return;
	shared = ss_shmem_struct("streamsketch background consolidation",
							 sizeof(SSWorkerShared), worker_shmem_init);
	LWLockRegisterTranche(shared->tranche, "streamsketch_background");
}

/* ---- settings ---- */

void
ss_worker_init(void)
{
	DefineCustomBoolVariable("streamsketch.background_consolidation",
							 "Consolidates committed change logs in background workers.",
							 "Off: writers past change_log_limit, readers, the flush functions and VACUUM consolidate, as they also do when the workers fall behind.  A session's value decides whether its commits are queued, a worker's (the server's or its database's) whether it runs.",
							 &ss_background_consolidation, true,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.max_background_workers",
							"Maximum number of streamsketch consolidation workers at a time, at most one per database.",
							"They are taken from max_worker_processes, which parallel queries share.",
							&ss_max_background_workers, 2, 1, SS_WORKER_SLOTS,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.background_delay",
							"How soon after a commit a worker consolidates a change log someone waits for.",
							"Applies to a LERT with a NOTIFY channel and to a log past a quarter of change_log_limit; commits within the delay are consolidated in one round.",
							&ss_background_delay_ms, 200, 1, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.background_quiet_time",
							"How long a shorter change log that no one waits for stays unconsolidated after its last commit.",
							NULL,
							&ss_background_quiet_ms, 10000, 10, 24 * 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	ss_shmem_reserve(worker_shmem_size);
}

/* ---- the committing backend ---- */

/*
 * Pre-commit, after rel's batch was appended.  A temporary structure is
 * left out: no other backend can read its pages.
 */
void
ss_worker_note_append(Relation rel, uint64 log_bytes)
{
	const SSStructure *s = ss_structure_ops(rel);

	if (!ss_background_consolidation || nnoted >= SS_NOTED_MAX ||
		RelationUsesLocalBuffers(rel) || RecoveryInProgress())
		return;
	worker_attach();
	noted[nnoted].relid = RelationGetRelid(rel);
	noted[nnoted].log_bytes = log_bytes;
	noted[nnoted].awaited = s != NULL && s->awaited != NULL && s->awaited(rel);
	nnoted++;
}

void
ss_worker_forget(void)
{
	nnoted = 0;
}

/* An entry's due time. */
static TimestampTz
item_due(const SSWorkItem *it)
{
	if (it->due_soon != 0)
		return it->due_soon;
	return TimestampTzPlusMilliseconds(it->last_commit, ss_background_quiet_ms);
}

/*
 * Queue (or update) the entry of a committed append; the lock is held.
 * Returns false if the queue is full.
 */
static bool
queue_commit(Oid dboid, const SSNoted *n, TimestampTz now)
{
	SSWorkItem *it = NULL;
	SSWorkItem *free_item = NULL;
	uint64		soon_bytes = (uint64) ss_change_log_limit_kb * 1024 / 4;

	for (int i = 0; i < SS_WORK_ITEMS; i++)
	{
		SSWorkItem *x = &shared->items[i];

		if (x->dboid == dboid && x->relid == n->relid)
		{
			it = x;
			break;
		}
		if (x->dboid == InvalidOid && free_item == NULL)
			free_item = x;
	}
	if (it == NULL)
	{
		if (free_item == NULL)
			return false;
		it = free_item;
		memset(it, 0, sizeof(*it));
		it->dboid = dboid;
		it->relid = n->relid;
		it->first_commit = now;
	}
	it->log_bytes = n->log_bytes;
	it->last_commit = now;
	if (n->log_bytes >= soon_bytes)
		it->due_soon = now;
	else if (n->awaited && it->due_soon == 0)
		it->due_soon = TimestampTzPlusMilliseconds(now, ss_background_delay_ms);
	return true;
}

/* A slot of dboid's worker, or -1; the lock is held. */
static int
slot_of(Oid dboid)
{
	for (int i = 0; i < SS_WORKER_SLOTS; i++)
	{
		if (shared->slots[i].dboid == dboid)
			return i;
	}
	return -1;
}

/*
 * Claim a slot for a new worker of dboid if the limit allows, or -1; the
 * lock is held exclusively.  A slot whose worker never attached is taken
 * back.
 */
static int
slot_claim(Oid dboid, TimestampTz now)
{
	int			used = 0;
	int			free_slot = -1;

	for (int i = 0; i < SS_WORKER_SLOTS; i++)
	{
		SSWorkerSlot *sl = &shared->slots[i];

		if (sl->dboid != InvalidOid && sl->pid == 0 &&
			TimestampDifferenceExceeds(sl->registered, now,
									   SS_WORKER_START_TIMEOUT_MS))
			sl->dboid = InvalidOid;
		if (sl->dboid != InvalidOid)
			used++;
		else if (free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0 || used >= ss_max_background_workers)
		return -1;
	shared->slots[free_slot].dboid = dboid;
	shared->slots[free_slot].pid = 0;
	shared->slots[free_slot].latch = NULL;
	shared->slots[free_slot].registered = now;
	return free_slot;
}

/* Register a worker for dboid; returns false if none could be. */
static bool
worker_register(Oid dboid)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(bgw.bgw_library_name, "streamsketch", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "ss_worker_main", BGW_MAXLEN);
	snprintf(bgw.bgw_name, BGW_MAXLEN,
			 "streamsketch consolidation worker for database %u", dboid);
	strlcpy(bgw.bgw_type, "streamsketch consolidation", BGW_MAXLEN);
	bgw.bgw_main_arg = ObjectIdGetDatum(dboid);
	bgw.bgw_notify_pid = 0;
	return RegisterDynamicBackgroundWorker(&bgw, NULL);
}

/*
 * Make sure dboid has a worker, or will get one when a slot frees: wakes
 * it, or registers one.  Takes the lock.
 */
static void
worker_wake(Oid dboid)
{
	Latch	   *latch = NULL;
	int			claimed = -1;
	TimestampTz now = GetCurrentTimestamp();
	int			slot;

	LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
	slot = slot_of(dboid);
	if (slot >= 0)
		latch = shared->slots[slot].latch;
	else
		claimed = slot_claim(dboid, now);
	LWLockRelease(&shared->lock);
	if (latch != NULL)
		SetLatch(latch);
	if (claimed >= 0 && !worker_register(dboid))
	{
		LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
		if (shared->slots[claimed].dboid == dboid &&
			shared->slots[claimed].pid == 0)
			shared->slots[claimed].dboid = InvalidOid;
		LWLockRelease(&shared->lock);
	}
}

/*
 * After the commit record: queue what the transaction appended and wake
 * (or start) the database's worker.  Nothing here may raise an error: the
 * transaction is committed.  If no worker can be had (the limit, or no
 * free max_worker_processes slot), the entries wait for the next commit
 * or a worker that finishes elsewhere; the writers' own consolidation
 * past change_log_limit still bounds the log.
 */
void
ss_worker_at_commit(void)
{
	TimestampTz now;
	int			queued = 0;

	if (nnoted == 0)
		return;
	if (shared == NULL || !ss_background_consolidation)
	{
		nnoted = 0;
		return;
	}
	now = GetCurrentTimestamp();
	LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nnoted; i++)
	{
		if (queue_commit(MyDatabaseId, &noted[i], now))
			queued++;
		else
			shared->not_queued++;
	}
	LWLockRelease(&shared->lock);
	nnoted = 0;
	if (queued > 0)
		worker_wake(MyDatabaseId);
}

/* ---- the worker ---- */

/*
 * Take up to max due entries of the database (they leave the queue: a
 * commit meanwhile queues its own); returns how many, and in *next the
 * earliest due time of those left (0 if none).
 */
static int
take_due(Oid dboid, TimestampTz now, Oid *relids, int max, TimestampTz *next)
{
	int			n = 0;

	*next = 0;
	LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SS_WORK_ITEMS; i++)
	{
		SSWorkItem *it = &shared->items[i];
		TimestampTz due;

		if (it->dboid != dboid)
			continue;
		due = item_due(it);
		if (due <= now && n < max)
		{
			relids[n++] = it->relid;
			it->dboid = InvalidOid;
		}
		else if (*next == 0 || due < *next)
			*next = due;
	}
	LWLockRelease(&shared->lock);
	return n;
}

/* Queue relid again to be tried at `when` (after a failure or a busy lock). */
static void
requeue(Oid dboid, Oid relid, TimestampTz when)
{
	SSNoted		n = {relid, 0, false};
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
	if (queue_commit(dboid, &n, now))
	{
		for (int i = 0; i < SS_WORK_ITEMS; i++)
		{
			SSWorkItem *it = &shared->items[i];

			if (it->dboid == dboid && it->relid == relid &&
				(it->due_soon == 0 || it->due_soon > when))
				it->due_soon = when;
		}
	}
	LWLockRelease(&shared->lock);
}

/*
 * Consolidate one structure, in a transaction of its own, as its owner.
 * Returns false to retry it later (its lock was busy).
 */
static bool
consolidate_one(Oid relid)
{
	Relation	rel;
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	bool		done = true;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* as autovacuum: never wait for a lock, come back later instead */
	if (!ConditionalLockRelationOid(relid, AccessShareLock))
		done = false;
	else if ((rel = try_relation_open(relid, NoLock)) == NULL)
		UnlockRelationOid(relid, AccessShareLock);
	else
	{
		if (ss_structure_ops(rel) != NULL && !RelationUsesLocalBuffers(rel))
		{
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("consolidating %s",
											RelationGetRelationName(rel)));
			ss_progress_start(rel, "background consolidation");
			GetUserIdAndSecContext(&save_userid, &save_sec_context);
			SetUserIdAndSecContext(rel->rd_rel->relowner,
								   save_sec_context | SECURITY_RESTRICTED_OPERATION);
			save_nestlevel = NewGUCNestLevel();
			(void) set_config_option("search_path", "pg_catalog, pg_temp",
									 PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
			ss_log_consolidate_background(rel);
			ss_progress_end();
			AtEOXact_GUC(false, save_nestlevel);
			SetUserIdAndSecContext(save_userid, save_sec_context);
		}
		relation_close(rel, NoLock);
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return done;
}

/*
 * May the worker stay?  Not once the extension is gone, nor while a
 * DROP DATABASE (or a rename, move or copy of the database) waits for the
 * database's sessions to leave: those hold a lock on the database that
 * conflicts with the one every connecting session takes.
 */
static bool
worker_may_stay(void)
{
	LOCKTAG		tag;
	bool		stay;

	StartTransactionCommand();
	SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, MyDatabaseId, 0);
	stay = LockAcquire(&tag, RowExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
	if (stay)
		stay = OidIsValid(get_extension_oid("streamsketch", true));
	CommitTransactionCommand();
	return stay;
}

/*
 * Leave the slot (at exit, also after an error that ends the worker).  A
 * worker that could not connect (its database was dropped, or refuses
 * connections) takes the database's entries with it, so that no later
 * worker is started for them in vain; their logs stay on disk for the
 * writers, readers and VACUUM.
 */
static void
worker_detach(int code, Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);

	if (my_slot < 0 || shared == NULL)
		return;
	LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
	if (shared->slots[my_slot].pid == MyProcPid)
		shared->slots[my_slot].dboid = InvalidOid;
	if (!connected)
	{
		for (int i = 0; i < SS_WORK_ITEMS; i++)
		{
			if (shared->items[i].dboid == dboid)
				shared->items[i].dboid = InvalidOid;
		}
	}
	LWLockRelease(&shared->lock);
	my_slot = -1;
}

/*
 * Leave if there is nothing queued for the database; under the lock, so
 * that a commit either sees the slot and wakes us before we look, or
 * finds no worker and starts one.
 */
static bool
worker_exit_if_idle(Oid dboid)
{
	bool		idle = true;

	LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SS_WORK_ITEMS && idle; i++)
		idle = shared->items[i].dboid != dboid;
	if (idle)
		shared->slots[my_slot].dboid = InvalidOid;
	LWLockRelease(&shared->lock);
	if (idle)
		my_slot = -1;
	return idle;
}

/*
 * On leaving for lack of work: a database whose structures wait because
 * every worker was busy elsewhere when they were queued gets a worker now.
 */
static void
worker_hand_over(void)
{
	Oid			waiting = InvalidOid;

	LWLockAcquire(&shared->lock, LW_SHARED);
	for (int i = 0; i < SS_WORK_ITEMS && !OidIsValid(waiting); i++)
	{
		Oid			db = shared->items[i].dboid;

		if (OidIsValid(db) && slot_of(db) < 0)
			waiting = db;
	}
	LWLockRelease(&shared->lock);
	if (OidIsValid(waiting))
		worker_wake(waiting);
}

/* Consolidate the taken structures, each in its own transaction. */
static void
worker_round(Oid dboid, const Oid *relids, int n)
{
	for (int i = 0; i < n; i++)
	{
		MemoryContext cxt = CurrentMemoryContext;
		bool		done = false;

		CHECK_FOR_INTERRUPTS();
		PG_TRY();
		{
			done = consolidate_one(relids[i]);
		}
		PG_CATCH();
		{
			/* as autovacuum: report, clean up, go on with the others */
			HOLD_INTERRUPTS();
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			AbortOutOfAnyTransaction();
			FlushErrorState();
			pgstat_report_activity(STATE_IDLE, NULL);
			RESUME_INTERRUPTS();
			LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
			shared->errors++;
			LWLockRelease(&shared->lock);
			requeue(dboid, relids[i],
					TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												SS_WORKER_RETRY_MS));
			continue;
		}
		PG_END_TRY();
		if (!done)
			requeue(dboid, relids[i],
					TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												ss_background_delay_ms));
		else
		{
			LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
			shared->rounds++;
			LWLockRelease(&shared->lock);
		}
	}
}

void
ss_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	TimestampTz idle_since;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	worker_attach();
	LWLockAcquire(&shared->lock, LW_EXCLUSIVE);
	my_slot = slot_of(dboid);
	if (my_slot >= 0 && shared->slots[my_slot].pid == 0)
	{
		shared->slots[my_slot].pid = MyProcPid;
		shared->slots[my_slot].latch = MyLatch;
	}
	else
		my_slot = -1;			/* taken back after a slow start */
	LWLockRelease(&shared->lock);
	if (my_slot < 0)
		proc_exit(0);
	before_shmem_exit(worker_detach, ObjectIdGetDatum(dboid));

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	connected = true;
	/* rounds are maintenance: no session's timeouts apply */
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("idle_in_transaction_session_timeout", "0",
					PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("application_name", "streamsketch consolidation",
					PGC_SUSET, PGC_S_OVERRIDE);

	idle_since = GetCurrentTimestamp();
	for (;;)
	{
		Oid			relids[SS_WORKER_BATCH];
		TimestampTz now;
		TimestampTz next;
		long		sleep_ms;
		int			n;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!ss_background_consolidation || RecoveryInProgress() ||
			!worker_may_stay())
			break;
		now = GetCurrentTimestamp();
		n = take_due(dboid, now, relids, SS_WORKER_BATCH, &next);
		if (n > 0)
		{
			worker_round(dboid, relids, n);
			idle_since = GetCurrentTimestamp();
			continue;
		}
		if (next == 0 &&
			TimestampDifferenceExceeds(idle_since, now, SS_WORKER_IDLE_EXIT_MS) &&
			worker_exit_if_idle(dboid))
		{
			worker_hand_over();
			break;
		}
		sleep_ms = SS_WORKER_CHECK_MS;
		if (next != 0)
			sleep_ms = Min(sleep_ms,
						   Max(TimestampDifferenceMilliseconds(now, next), 1));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	proc_exit(0);
}

/* ---- what operators see ---- */

/*
 * streamsketch_background_queue() returns the current database's queued
 * structures: relation, queued_since (the oldest commit not yet
 * consolidated), last_commit, due (when the worker takes it) and the
 * database's worker's pid (NULL if none runs).
 */
Datum
streamsketch_background_queue(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			pid = 0;
	int			slot;

	InitMaterializedSRF(fcinfo, 0);
	worker_attach();
	LWLockAcquire(&shared->lock, LW_SHARED);
	slot = slot_of(MyDatabaseId);
	if (slot >= 0)
		pid = shared->slots[slot].pid;
	for (int i = 0; i < SS_WORK_ITEMS; i++)
	{
		const SSWorkItem *it = &shared->items[i];
		Datum		values[5];
		bool		nulls[5] = {0};

		if (it->dboid != MyDatabaseId)
			continue;
		values[0] = ObjectIdGetDatum(it->relid);
		values[1] = TimestampTzGetDatum(it->first_commit);
		values[2] = TimestampTzGetDatum(it->last_commit);
		values[3] = TimestampTzGetDatum(item_due(it));
		values[4] = Int32GetDatum(pid);
		nulls[4] = pid == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(&shared->lock);
	PG_RETURN_VOID();
}

/*
 * streamsketch_background_stats() returns, for the whole server since it
 * started: the workers running, the structures they consolidated, the
 * rounds that failed, and the commits a full queue turned away.
 */
Datum
streamsketch_background_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {0};
	int			workers = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	worker_attach();
	LWLockAcquire(&shared->lock, LW_SHARED);
	for (int i = 0; i < SS_WORKER_SLOTS; i++)
		workers += shared->slots[i].pid != 0 && shared->slots[i].dboid != InvalidOid;
	values[0] = Int32GetDatum(workers);
	values[1] = Int64GetDatum((int64) shared->rounds);
	values[2] = Int64GetDatum((int64) shared->errors);
	values[3] = Int64GetDatum((int64) shared->not_queued);
	LWLockRelease(&shared->lock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
