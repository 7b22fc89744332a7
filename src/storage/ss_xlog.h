/*-------------------------------------------------------------------------
 *
 * ss_xlog.h
 *	  Generic WAL records with a fast page delta.
 *
 * The same interface and the same records as PostgreSQL's GenericXLog
 * (access/generic_xlog.h): rmgr "Generic", one delta of (offset, length,
 * bytes) fragments per page, replayed by the server's own generic_redo, so
 * standbys and pg_waldump need nothing from us.  Only the delta is
 * computed differently: GenericXLog compares the old and new page byte by
 * byte, which was three quarters of the CPU of a sketch update and half of
 * a filter insert; here pages are compared a 64-bit word at a time.  See
 * ss_xlog.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_XLOG_H
#define SS_XLOG_H

#include "postgres.h"

#include "access/xlogdefs.h"
#include "storage/buf.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

#define SS_XLOG_MAX_PAGES	4	/* as MAX_GENERIC_XLOG_PAGES */
#define SS_XLOG_FULL_IMAGE	0x0001	/* as GENERIC_XLOG_FULL_IMAGE */

typedef struct SSXLogState SSXLogState;

extern SSXLogState *ss_xlog_start(Relation rel);
extern Page ss_xlog_register(SSXLogState *state, Buffer buffer, int flags);
extern void ss_xlog_unregister(SSXLogState *state, Buffer buffer);
extern XLogRecPtr ss_xlog_finish(SSXLogState *state);
extern void ss_xlog_abort(SSXLogState *state);
extern void ss_xlog_at_abort(void);
extern void ss_xlog_flush_own(Relation rel);

#endif							/* SS_XLOG_H */
