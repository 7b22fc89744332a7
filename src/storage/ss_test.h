/*-------------------------------------------------------------------------
 *
 * ss_test.h
 *	  Test-only settings (streamsketch.test_*, superuser only, not in the
 *	  sample file) that stop the server at a chosen point, so that the
 *	  tests can check crash recovery and standbys there (ss_settings.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_TEST_H
#define SS_TEST_H

#include "postgres.h"

#include "utils/guc.h"
#include "utils/relcache.h"

/*
 * An enum setting naming the point of a structure's work at which to
 * stop: points[i] names point number i (a value of the structure's enum),
 * points[0] is "none"; NULL ends the list.  ss_test_crash_define defines
 * it, ss_test_crash stops there when the setting names the point.
 */
typedef struct SSTestCrash
{
	const char *setting;		/* "streamsketch.test_cbt_crash" */
	const char *short_desc;
	const char *long_desc;
	const char *during;			/* what the points are in: "a round" */
	const char *const *points;
	int			value;			/* the setting's */
} SSTestCrash;

extern void ss_test_define_int(const char *name, const char *short_desc,
							   const char *long_desc, int *var, int boot,
							   int min, int max, GucIntAssignHook assign);
extern void ss_test_wait_advisory(int key);
extern void ss_test_crash_define(SSTestCrash *tc);
extern void ss_test_crash(const SSTestCrash *tc, Relation rel, int point);
extern void ss_test_stop(Relation rel, const char *setting, const char *where)
			pg_attribute_noreturn();

#endif							/* SS_TEST_H */
