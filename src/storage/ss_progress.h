/*-------------------------------------------------------------------------
 *
 * ss_progress.h
 *	  Progress of long operations, shown in the streamsketch_progress view
 *	  (ss_progress.c).
 *
 * An operation (VACUUM of a structure, a flush function, qf_resize, a
 * consolidation round) starts on a relation, goes through phases, and in a
 * phase reports units done of a total.  Operations nest: one started inside
 * another (the round a flush runs) keeps the outer one's name and relation
 * and only sets phases and units.  An operation ends with
 * ss_progress_end, or with the (sub)transaction it started in, whatever
 * ends it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_PROGRESS_H
#define SS_PROGRESS_H

#include "postgres.h"

#include "utils/rel.h"

extern void ss_progress_init(void);
extern void ss_progress_start(Relation rel, const char *operation);
/*
 * Report done of total units (-1: unknown) in phase, counted in unit (NULL:
 * the phase counts nothing, done is -1), entering the phase if the
 * operation is in another.  Cheap enough to call per page.  Does nothing
 * outside an operation.
 */
extern void ss_progress_report(const char *phase, const char *unit,
							   int64 done, int64 total);
extern void ss_progress_end(void);

#define ss_progress_phase(phase)	ss_progress_report(phase, NULL, -1, -1)

/* the phase of a flush function after its consolidation */
#define SS_PHASE_FLUSH		"emptying buffers"

#endif							/* SS_PROGRESS_H */
