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
#include "ss_ids.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Every number of ss_ids.h given once (a build with a clash must not run). */
void
ss_check_ids(void)
{
	static const uint32 kinds[] = {SS_KIND_BCMS, SS_KIND_QF, SS_KIND_BLOOM,
	SS_KIND_LERT, SS_KIND_CBT, SS_KIND_BFILE};
	static const uint32 pages[] = {SS_PAGE_META, SS_PAGE_BCMS_SKETCH,
		SS_PAGE_BCMS_BUFFER, SS_PAGE_QF_AREA, SS_PAGE_BLOOM_BITS,
		SS_PAGE_BLOOM_BUFFER, SS_PAGE_QF_UNDO, SS_PAGE_LOG,
		SS_PAGE_LERT_LEVEL0, SS_PAGE_LERT_RUN, SS_PAGE_LERT_INDEX,
		SS_PAGE_LERT_REPORT, SS_PAGE_LERT_FILTER, SS_PAGE_CBT_NODE,
		SS_PAGE_CBT_FRAGMENT, SS_PAGE_BFILE, SS_PAGE_LERT_FREE,
	SS_PAGE_CBT_FREE};

	for (int i = 0; i < lengthof(kinds); i++)
		for (int j = 0; j < i; j++)
			if (kinds[i] == kinds[j])
				elog(ERROR, "streamsketch structure kind %u is given twice",
					 kinds[i]);
	for (int i = 0; i < lengthof(pages); i++)
		for (int j = 0; j < i; j++)
			if (pages[i] == pages[j])
				elog(ERROR, "streamsketch page type %u is given twice",
					 pages[i]);
}

void
_PG_init(void)
{
	/* settings SET before the library was loaded: see ss_params.c */
	ss_check_ids();
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
