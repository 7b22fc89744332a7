/*-------------------------------------------------------------------------
 *
 * ss_worker.h
 *	  Background consolidation: committed change logs are consolidated by
 *	  background workers, one per database at a time, started on demand.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_WORKER_H
#define SS_WORKER_H

#include "postgres.h"

#include "utils/rel.h"

extern bool ss_background_consolidation;

extern void ss_worker_init(void);
/* pre-commit: rel's batch was appended and its log is now log_bytes long */
extern void ss_worker_note_append(Relation rel, uint64 log_bytes);
/* the transaction committed (must not fail), or it did not */
extern void ss_worker_at_commit(void);
extern void ss_worker_forget(void);

#endif							/* SS_WORKER_H */
