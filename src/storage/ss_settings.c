/*-------------------------------------------------------------------------
 *
 * ss_settings.c
 *	  The storage layer's settings (streamsketch.*), and the refusal of a
 *	  setting whose value was rejected when the library was loaded.  The
 *	  structures' parameter settings are defined from their descriptors
 *	  (ss_structure.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "storage/lock.h"
#include "ss_test.h"
#include "ss_xlog.h"
#include "streamsketch.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"

/* ---- the storage layer's settings ---- */

int			ss_pending_memory_kb = 4096;
int			ss_change_log_limit_kb = 1024;
int			ss_max_structure_size_mb = 64 * 1024;

/* Set while a flush function or VACUUM consolidates (ss_changelog.c). */
bool		ss_maintenance_consolidation = false;

/*
 * Memory one consolidation pass may collect the log into, as GIN's
 * pending-list cleanup: work_mem when a writing statement (or a reader)
 * consolidates, maintenance_work_mem (autovacuum_work_mem in autovacuum)
 * in the flush functions and VACUUM, never less than
 * streamsketch.pending_memory.  Each pass costs a read and a WAL record
 * per page it touches, so fewer, larger passes are cheaper.
 */
Size
ss_consolidation_memory(void)
{
	int			kb = work_mem;

	if (ss_maintenance_consolidation)
	{
		kb = maintenance_work_mem;
		if (IsAutoVacuumWorkerProcess() && autovacuum_work_mem != -1)
			kb = autovacuum_work_mem;
	}
	return (Size) Max(kb, ss_pending_memory_kb) * 1024;
}

/* Called by _PG_init. */
void
ss_storage_init(void)
{
	DefineCustomIntVariable("streamsketch.pending_memory",
							"Memory a transaction's pending streamsketch changes may use before spilling to a temporary file.",
							NULL,
							&ss_pending_memory_kb, 4096, 64, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.change_log_limit",
							"Length of a structure's change log beyond which a writing statement consolidates it.",
							"Larger values consolidate in larger, cheaper rounds; a standby, which never consolidates, scans up to this much log per lookup.",
							&ss_change_log_limit_kb, 1024, 64, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.max_structure_size",
							"Largest size a streamsketch structure may reach.",
							"Creating a structure whose parameters need more, and growing or writing a structure beyond it, fail.",
							&ss_max_structure_size_mb, 64 * 1024, 1, INT_MAX,
							PGC_SUSET, GUC_UNIT_MB, NULL, NULL, NULL);
}

/* ---- test-only settings that stop the server (ss_test.h) ---- */

/*
 * Stop the server for a test: PANIC, once rel's WAL so far is flushed, so
 * that crash recovery (and a standby) finds every record written before
 * this point.  The message is "<setting>: stopping <where> "<rel>"".
 */
void
ss_test_stop(Relation rel, const char *setting, const char *where)
{
	ss_xlog_flush_own(rel);
	elog(PANIC, "%s: stopping %s \"%s\"", setting, where,
		 RelationGetRelationName(rel));
}

/* Stop at point of rel's work if tc's setting names it. */
void
ss_test_crash(const SSTestCrash *tc, Relation rel, int point)
{
	char		where[NAMEDATALEN * 2];

	if (tc->value != point)
		return;
	snprintf(where, sizeof(where), "at \"%s\" in %s of", tc->points[point],
			 tc->during);
	ss_test_stop(rel, tc->setting, where);
}

/*
 * Called by _PG_init (a structure's init): an integer test-only setting,
 * which only a superuser may change.
 */
void
ss_test_define_int(const char *name, const char *short_desc,
				   const char *long_desc, int *var, int boot, int min, int max,
				   GucIntAssignHook assign)
{
	DefineCustomIntVariable(name, short_desc, long_desc, var, boot, min, max,
							PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, assign, NULL);
}

/*
 * Tests hold an operation at a chosen point with a setting naming an
 * advisory lock key (pg_advisory_lock(key)): wait there until that lock
 * is free.  No buffer lock may be held.
 */
void
ss_test_wait_advisory(int key)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, (uint32) key, 1);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}

/* Called by _PG_init (a structure's init): tc's setting, its options from points. */
void
ss_test_crash_define(SSTestCrash *tc)
{
	int			n = 0;
	struct config_enum_entry *options;

	while (tc->points[n] != NULL)
		n++;
	options = MemoryContextAllocZero(TopMemoryContext,
									 sizeof(struct config_enum_entry) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		options[i].name = tc->points[i];
		options[i].val = i;
	}
	DefineCustomEnumVariable(tc->setting, tc->short_desc, tc->long_desc,
							 &tc->value, 0, options,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
}

/* ---- settings rejected when the library was loaded ---- */

/*
 * A SET streamsketch.x issued before the library is loaded makes a
 * placeholder, which PostgreSQL checks only when our _PG_init defines the
 * setting: an invalid value is then dropped with a WARNING, and the
 * setting keeps its default.  A structure created from it would silently
 * get a parameter the user did not ask for, so such settings are
 * remembered and creation from them fails until they are assigned again
 * (SET or RESET: the settings' assign hooks call ss_setting_assigned).
 */
static List *rejected_settings = NIL;

static struct config_generic *
find_setting(const char *name)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
		if (strcmp(vars[i]->name, name) == 0)
			return vars[i];
	return NULL;
}

/* A setting was assigned since the library loaded: it is valid now. */
void
ss_setting_assigned(const char *name)
{
	ListCell   *lc;

	foreach(lc, rejected_settings)
	{
		if (strcmp((const char *) lfirst(lc), name) == 0)
		{
			rejected_settings = foreach_delete_current(rejected_settings, lc);
			break;
		}
	}
}

/*
 * Refuse to use the setting name if it was rejected when the library was
 * loaded and has not been assigned since.
 */
void
ss_check_setting(const char *name)
{
	ListCell   *lc;

	foreach(lc, rejected_settings)
	{
		if (strcmp((const char *) lfirst(lc), name) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("setting \"%s\" has an invalid value", name),
					 errdetail("It was set before the streamsketch library was loaded, and its value was rejected when the library was loaded (see the WARNING then)."),
					 errhint("SET %s to a valid value, or RESET it, before creating the structure.", name)));
	}
}

/* ss_check_setting for each of names (NULL-terminated). */
void
ss_check_settings(const char *const *names)
{
	for (const char *const *n = names; *n; n++)
		ss_check_setting(*n);
}

/*
 * _PG_init calls ss_params_note_placeholders before defining the settings
 * and ss_params_find_rejected after: a placeholder whose value did not
 * survive the definition (the setting is still at its default) was
 * rejected.
 */
static List *placeholders = NIL;

void
ss_params_note_placeholders(const char *prefix)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();
	size_t		len = strlen(prefix);
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	/* only placeholders holding a value: RESET or an expired SET LOCAL leave one at its default */
	for (int i = 0; i < n; i++)
		if ((vars[i]->flags & GUC_CUSTOM_PLACEHOLDER) &&
			vars[i]->source != PGC_S_DEFAULT &&
			strncmp(vars[i]->name, prefix, len) == 0)
			placeholders = lappend(placeholders, pstrdup(vars[i]->name));
	MemoryContextSwitchTo(old);
}

void
ss_params_find_rejected(void)
{
	ListCell   *lc;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	foreach(lc, placeholders)
	{
		struct config_generic *conf = find_setting(lfirst(lc));

		if (conf != NULL && !(conf->flags & GUC_CUSTOM_PLACEHOLDER) &&
			conf->source == PGC_S_DEFAULT)
			rejected_settings = lappend(rejected_settings, lfirst(lc));
	}
	placeholders = NIL;
	MemoryContextSwitchTo(old);
}
