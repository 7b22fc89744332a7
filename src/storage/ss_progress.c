/*-------------------------------------------------------------------------
 *
 * ss_progress.c
 *	  Progress of long operations (ss_progress.h): one slot per backend in
 *	  shared memory, read by streamsketch_progress().
 *
 * The slots (MaxBackends of them, a backend's at MyBackendId - 1) are a
 * struct of the main shared memory segment (ss_shmem.c).  A backend writes
 * only its own slot, without a lock: it makes the slot's change counter
 * odd, writes, and makes it even again, as PostgreSQL's own backend status
 * does (PGSTAT_BEGIN_WRITE_ACTIVITY), and a reader copies a slot until it
 * got an even counter that did not change meanwhile.  A slot is emptied
 * when its operation ends, when the (sub)transaction the operation started
 * in ends in any way (so an error never leaves it filled), and when its
 * backend exits; a reader also skips a slot whose pid is not its backend's.
 *
 * Without shared_preload_libraries the slots come from the segment's spare
 * memory; if there is none left, operations run unreported and the view
 * says why.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid_d.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/sinvaladt.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "ss_progress.h"
#include "ss_shmem.h"
#include "ss_test.h"

#define SS_PROGRESS_SHMEM_NAME	"streamsketch progress"
/* operations nested in one another that a backend runs at most */
#define SS_PROGRESS_DEPTH		8

typedef struct SSProgressSlot
{
	uint32		changecount;	/* odd while its backend writes the slot */
	int			pid;			/* 0: no operation */
	Oid			dboid;
	Oid			roleid;			/* the session's user, as pg_stat_activity's */
	Oid			relid;
	TimestampTz started;
	int64		done;			/* -1: the phase counts nothing */
	int64		total;			/* -1: unknown */
	char		operation[32];
	char		phase[48];
	char		unit[16];
} SSProgressSlot;

static SSProgressSlot *slots = NULL;
static bool unavailable = false;	/* no shared memory was left for them */
static bool exit_callback = false;

/* this backend's operation */
static int	depth = 0;
static int	levels[SS_PROGRESS_DEPTH];	/* the nest level each started at */
static const char *cur_phase = NULL;
static const char *cur_unit = NULL;
static bool waited = false;

/* streamsketch.test_progress_wait (tests only) */
static int	test_wait = 0;

PG_FUNCTION_INFO_V1(streamsketch_progress);

#define BEGIN_WRITE(s) \
	do { (s)->changecount++; pg_write_barrier(); } while (0)
#define END_WRITE(s) \
	do { pg_write_barrier(); (s)->changecount++; } while (0)

static Size
progress_shmem_size(void)
{
	return mul_size(MaxBackends, sizeof(SSProgressSlot));
}

static void
progress_shmem_init(void *ptr)
{
	memset(ptr, 0, progress_shmem_size());
}

static void
progress_clear(void)
{
	volatile SSProgressSlot *s;

	depth = 0;
	cur_phase = cur_unit = NULL;
	if (slots == NULL || MyBackendId == InvalidBackendId)
		return;
	s = &slots[MyBackendId - 1];
	if (s->pid == 0)
		return;
	BEGIN_WRITE(s);
	s->pid = 0;
	END_WRITE(s);
}

static void
progress_at_exit(int code, Datum arg)
{
	progress_clear();
}

static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (depth > 0 && event != XACT_EVENT_PRE_COMMIT &&
		event != XACT_EVENT_PARALLEL_PRE_COMMIT &&
		event != XACT_EVENT_PRE_PREPARE)
		progress_clear();
}

/* an operation that started in the aborted subtransaction (or deeper) ends */
static void
progress_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while (depth > 0 && levels[Min(depth, SS_PROGRESS_DEPTH) - 1] >= level)
		depth--;
	if (depth == 0)
		progress_clear();
}

void
ss_progress_init(void)
{
	ss_test_define_int("streamsketch.test_progress_wait",
					   "Makes long operations wait in the middle of each phase, until the advisory lock with this key is free (for tests only; 0: never).",
					   "Once per phase, when an operation reports a unit done and more to do, it waits with its progress shown in streamsketch_progress.",
					   &test_wait, 0, 0, INT_MAX, NULL);
	ss_shmem_reserve(progress_shmem_size);
	RegisterXactCallback(progress_xact_callback, NULL);
	RegisterSubXactCallback(progress_subxact_callback, NULL);
}

/*
 * Find or make the slots; false if this backend has none (no backend id)
 * or the segment had no room for them.  Never raises an error: an
 * operation must not fail for want of its progress.
 */
static bool
progress_attach(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (slots != NULL && exit_callback)
		return true;
	if (slots == NULL && (unavailable || MyBackendId == InvalidBackendId ||
		MyBackendId > MaxBackends))
		return false;
	PG_TRY();
	{
		if (slots == NULL)
			slots = ss_shmem_struct(SS_PROGRESS_SHMEM_NAME, progress_shmem_size(),
								progress_shmem_init);
	}
	PG_CATCH();
	{
		/*
		 * ShmemInitStruct had no room.  Carrying on is safe here, unlike
		 * after most errors: the only resource taken since PG_TRY is
		 * AddinShmemInitLock (ShmemInitStruct released its own lock before
		 * raising), released here, which also resumes the interrupts its
		 * acquisition held; no buffer, file or catalog state is involved.
		 */
		MemoryContextSwitchTo(cxt);
		if (LWLockHeldByMe(AddinShmemInitLock))
			LWLockRelease(AddinShmemInitLock);
		FlushErrorState();
		unavailable = true;
	}
	PG_END_TRY();
	if (slots != NULL && !exit_callback)
	{
		before_shmem_exit(progress_at_exit, 0);
		exit_callback = true;
	}
	return slots != NULL;
}

void
ss_progress_start(Relation rel, const char *operation)
{
	volatile SSProgressSlot *s;

	if (depth > 0)
	{
		if (depth < SS_PROGRESS_DEPTH)
			levels[depth] = GetCurrentTransactionNestLevel();
		depth++;
		return;
	}
	if (!progress_attach())
		return;
	levels[0] = GetCurrentTransactionNestLevel();
	depth = 1;
	cur_phase = cur_unit = NULL;
	waited = false;
	s = &slots[MyBackendId - 1];
	BEGIN_WRITE(s);
	s->pid = MyProcPid;
	s->dboid = MyDatabaseId;
	s->roleid = GetSessionUserId();
	s->relid = RelationGetRelid(rel);
	s->started = GetCurrentTimestamp();
	s->done = -1;
	s->total = -1;
	strlcpy((char *) s->operation, operation, sizeof(s->operation));
	s->phase[0] = '\0';
	s->unit[0] = '\0';
	END_WRITE(s);
}

void
ss_progress_report(const char *phase, const char *unit, int64 done,
				   int64 total)
{
	volatile SSProgressSlot *s;

	if (depth == 0)
		return;
	s = &slots[MyBackendId - 1];
	if (unit == NULL)
		done = total = -1;
	else if (total >= 0 && done > total)
		total = done;			/* an estimate that fell short */
	BEGIN_WRITE(s);
	if (phase != cur_phase)
	{
		strlcpy((char *) s->phase, phase, sizeof(s->phase));
		cur_phase = phase;
		waited = false;
	}
	if (unit != cur_unit)
	{
		strlcpy((char *) s->unit, unit ? unit : "", sizeof(s->unit));
		cur_unit = unit;
	}
	s->done = done;
	s->total = total;
	END_WRITE(s);
	if (test_wait > 0 && !waited && done > 0 && (total < 0 || done < total) &&
		CritSectionCount == 0 && InterruptHoldoffCount == 0)
	{
		waited = true;
		ss_test_wait_advisory(test_wait);
	}
}

void
ss_progress_end(void)
{
	if (depth > 1)
		depth--;
	else if (depth == 1)
		progress_clear();
}

/* ---- what operators see ---- */

/* Copy backend i's slot as it was between two writes. */
static void
progress_copy(int i, SSProgressSlot *copy)
{
	volatile SSProgressSlot *s = &slots[i];

	for (;;)
	{
		uint32		before = s->changecount;
		uint32		after;

		pg_read_barrier();
		memcpy(copy, (const SSProgressSlot *) s, sizeof(*copy));
		pg_read_barrier();
		after = s->changecount;
		if (before == after && (before & 1) == 0)
			break;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * streamsketch_progress() returns a row per backend running an operation:
 * pid, database, relation (its oid, and as regclass if it is in the
 * current database), operation, phase, done, total, unit and when it
 * started.  As pg_stat_progress_* do, only a member of pg_read_all_stats
 * or of the backend's session user's role sees more than pid, database
 * and operation.
 */
Datum
streamsketch_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all_stats = has_privs_of_role(GetUserId(),
											  ROLE_PG_READ_ALL_STATS);

	InitMaterializedSRF(fcinfo, 0);
	if (slots == NULL)
	{
		/* raises the segment's error if there is no room */
		slots = ss_shmem_struct(SS_PROGRESS_SHMEM_NAME, progress_shmem_size(),
								progress_shmem_init);
	}
	for (int i = 0; i < MaxBackends; i++)
	{
		SSProgressSlot copy;
		PGPROC	   *proc;
		Datum		values[10];
		bool		nulls[10] = {0};

		progress_copy(i, &copy);
		if (copy.pid == 0)
			continue;
		/* a slot its backend did not empty (it cannot happen) is not shown */
		proc = BackendIdGetProc(i + 1);
		if (proc == NULL || proc->pid != copy.pid)
			continue;
		values[0] = Int32GetDatum(copy.pid);
		values[1] = ObjectIdGetDatum(copy.dboid);
		values[4] = CStringGetTextDatum(copy.operation);
		if (all_stats || has_privs_of_role(GetUserId(), copy.roleid))
		{
			values[2] = ObjectIdGetDatum(copy.relid);
			values[3] = ObjectIdGetDatum(copy.relid);
			nulls[3] = copy.dboid != MyDatabaseId;
			values[5] = CStringGetTextDatum(copy.phase);
			nulls[5] = copy.phase[0] == '\0';
			values[6] = Int64GetDatum(copy.done);
			nulls[6] = copy.done < 0;
			values[7] = Int64GetDatum(copy.total);
			nulls[7] = copy.total < 0;
			values[8] = CStringGetTextDatum(copy.unit);
			nulls[8] = copy.unit[0] == '\0';
			values[9] = TimestampTzGetDatum(copy.started);
		}
		else
		{
			for (int c = 2; c < 10; c++)
				nulls[c] = c != 4;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}
