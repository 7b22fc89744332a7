/*-------------------------------------------------------------------------
 *
 * ss_changelog_int.h
 *	  What the change log's files share (ss_changelog.c: reading and
 *	  consolidating; ss_logappend.c: appending at pre-commit).  Not for
 *	  the structures, which use ss_changelog.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_CHANGELOG_INT_H
#define SS_CHANGELOG_INT_H

#include "postgres.h"

#include "ss_changelog.h"
#include "ss_xlog.h"
#include "storage/bufpage.h"

/* where a log page's bytes start, after its SSLogPageHeader */
#define SS_LOG_DATA_OFFSET		MAXALIGN(sizeof(SSLogPageHeader))

/* streamsketch.test_fail_after_log_append (tests only) */
typedef enum
{
	SS_FAIL_NONE,
	SS_FAIL_ERROR,
	SS_FAIL_PANIC
} SSFailMode;

extern int	ss_test_fail_after_append;

/* streamsketch.test_fail_during_log_append (tests only, ss_logappend.c) */
typedef enum
{
	SS_APPEND_FAIL_NONE,
	SS_APPEND_FAIL_ERROR_LINKING,	/* pages linked past the log's end */
	SS_APPEND_FAIL_PANIC_LINKING,
	SS_APPEND_FAIL_ERROR_FILLING,	/* the batch in the log, not all written */
	SS_APPEND_FAIL_PANIC_FILLING
} SSAppendFailPoint;

extern int	ss_test_fail_during_append;

/* streamsketch.test_log_append_wait (tests only, ss_logappend.c) */
extern int	ss_test_append_wait;

static inline SSLogPageHeader *
ss_log_page_header(Page page)
{
	return (SSLogPageHeader *) SSPageGetData(page);
}

extern void ss_log_corrupted(Relation rel, BlockNumber blkno,
							 const char *detail) pg_attribute_noreturn();
extern void ss_log_meta_read(Relation rel, SSLogMeta *log);
extern SSLogMeta *ss_log_meta_register(Relation rel, SSXLogState *state,
									   Buffer *bufp);
extern BlockNumber ss_log_page_next(Relation rel, BlockNumber blk);

#endif							/* SS_CHANGELOG_INT_H */
