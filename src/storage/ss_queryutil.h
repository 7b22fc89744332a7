/*-------------------------------------------------------------------------
 *
 * ss_queryutil.h
 *	  What the SQL functions of the keyed paged structures (bcms, bloom,
 *	  quotient filters) share: hashing a key argument, flushing, and the
 *	  key type check of merging an in-memory value.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_QUERYUTIL_H
#define SS_QUERYUTIL_H

#include "fmgr.h"
#include "ss_changelog.h"
#include "ss_hash.h"
#include "ss_pending.h"
#include "storage/buf.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

struct SSStructure;

/*
 * The key argument argno converted to the structure's key type keytype
 * (ss_coerce_key) and hashed with its seed.
 */
extern SSHash ss_sql_key_hash(FunctionCallInfo fcinfo, int argno, Oid keytype,
							  int16 keylen, bool keybyval, uint32 seed);

/*
 * The <name>_flush(structure) functions: apply the structure's buffers
 * (ss_log_flush) and return what flush reports.
 */
extern int64 ss_sql_flush(Oid relid, const char *fname,
						  const struct SSStructure *s, SSFlushFn flush);

/*
 * ERROR unless an in-memory value with keys of elemtype (typname: "cms")
 * can be merged into rel (what: "bcms table") of keys of keytype.
 */
extern void ss_check_merge_key_type(Oid elemtype, const char *typname,
									Relation rel, const char *what,
									Oid keytype);

/*
 * Share-lock the pinned buffer buf of block blkno and return its page,
 * checked as a page of page_type, or NULL if the page is new (never
 * written: all its contents are zero).  The buffer stays locked either
 * way.
 */
extern Page ss_lock_checked_page(Relation rel, Buffer buf, BlockNumber blkno,
								 uint16 page_type);

/*
 * Block blkno share-locked and checked (ss_lock_checked_page), or
 * InvalidBuffer if it was never written (beyond the end of the file or
 * all zeros).
 */
extern Buffer ss_read_checked_page(Relation rel, BlockNumber blkno,
								   uint16 page_type);

/*
 * Copy the key out of a change record that holds one SSPendingKey (its
 * length says so), for the log readers of lookups and statistics; false
 * for any other record.
 */
static inline bool
ss_record_key(const SSPendingHeader *hdr, const char *payload,
			  SSPendingKey *key)
{
	if (hdr->len != sizeof(*key))
		return false;
	memcpy(key, payload, sizeof(*key));
	return true;
}

#endif							/* SS_QUERYUTIL_H */
