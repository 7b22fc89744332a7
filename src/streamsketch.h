/*-------------------------------------------------------------------------
 *
 * streamsketch.h
 *	  Declarations shared by every streamsketch structure: GUCs, the table
 *	  access method helpers, and the catalog of structure parameters.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMSKETCH_H
#define STREAMSKETCH_H

#include "postgres.h"

#include "access/tableam.h"
#include "utils/rel.h"

/* GUCs (streamsketch.*) */
extern double ss_bcms_epsilon;
extern double ss_bcms_delta;
extern int	ss_bcms_mode;
extern bool ss_bcms_conservative;
extern int	ss_bcms_buffer_size_kb;
extern int	ss_pending_memory_kb;

/* ss_tableam.c: fill the callbacks every structure shares */
extern void ss_tableam_init_common(TableAmRoutine *routine);
extern void ss_create_storage(Relation rel, const RelFileNode *newrnode,
							  char persistence);
extern bool ss_relation_is_new(Relation rel);
extern bool ss_relam_is_streamsketch(Oid amoid);
extern const char *ss_structure_name(Relation rel);
extern bool ss_scan_claim(TableScanDesc scan);

/* ss_guard.c: refuse operations that would silently lose data */
extern void ss_guard_init(void);

/* ss_catalog.c: parameters recorded in the extension's catalog tables */
extern const char *ss_extension_schema(void);
extern void ss_forget_params(Oid relid);

/* Extend rel (under the extension lock) so that blkno exists. */
extern void ss_extend_to(Relation rel, BlockNumber blkno);

#endif							/* STREAMSKETCH_H */
