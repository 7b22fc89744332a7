/*-------------------------------------------------------------------------
 *
 * streamsketch.c
 *	  Module entry point: calls each part's init, which defines its settings
 *	  (all under streamsketch.*), hooks and callbacks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bcms/bcms.h"
#include "bloom/bloom.h"
#include "bfile/bfile_am.h"
#include "cbt/cbt_am.h"
#include "fmgr.h"
#include "lert/lert.h"
#include "qf/qfam.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_planner.h"
#include "ss_progress.h"
#include "ss_worker.h"
#include "streamsketch.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* The structures, each declared by its descriptor (ss_structure.h). */
static const SSStructure *const structures[] = {
	&bcms_structure,
	&qfam_structure,
	&bloom_structure,
	&lert_structure,
	&cbt_structure,
	&bfile_structure,
};

void
_PG_init(void)
{
	/* settings SET before the library was loaded: see ss_settings.c */
	ss_check_structures(structures, lengthof(structures));
	ss_params_note_placeholders("streamsketch.");
	ss_storage_init();
	ss_log_init();
	ss_log_cache_init();
	ss_pending_define_settings();
	for (int i = 0; i < lengthof(structures); i++)
	{
		ss_structure_define_settings(structures[i]);
		if (structures[i]->init)
			structures[i]->init();
	}
	ss_planner_init(structures, lengthof(structures));
	ss_worker_init();
	ss_progress_init();
	ss_params_find_rejected();
	MarkGUCPrefixReserved("streamsketch");

	ss_pending_init();
	ss_guard_init();
	ss_params_init();
}
