/*-------------------------------------------------------------------------
 *
 * streamsketch.c
 *	  Module entry point: calls each part's init, which defines its settings
 *	  (all under streamsketch.*), hooks and callbacks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bcms.h"
#include "bloom.h"
#include "bfile_am.h"
#include "cbt_am.h"
#include "fmgr.h"
#include "lert.h"
#include "qfam.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	/* settings SET before the library was loaded: see ss_params.c */
	ss_params_note_placeholders("streamsketch.");
	ss_storage_init();
	ss_log_init();
	bcms_init();
	qfam_init();
	bloom_init();
	lert_init();
	cbt_init();
	bfile_init();
	ss_params_find_rejected();
	MarkGUCPrefixReserved("streamsketch");

	ss_pending_init();
	ss_guard_init();
	ss_params_init();
}
