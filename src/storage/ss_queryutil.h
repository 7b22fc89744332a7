/*-------------------------------------------------------------------------
 *
 * ss_queryutil.h
 *	  What the SQL functions of the structures share: opening a structure
 *	  for a reader of its keys or rows, the row of an info function,
 *	  creation by a constructor, flushing and counting sub-buffers, and for
 *	  the keyed paged structures (bcms, bloom, quotient filters) hashing a
 *	  key argument, the key type check of merging an in-memory value and
 *	  the log records of one key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_QUERYUTIL_H
#define SS_QUERYUTIL_H

#include "fmgr.h"
#include "access/tupdesc.h"
#include "ss_changelog.h"
#include "ss_hash.h"
#include "ss_pending.h"
#include "storage/buf.h"
#include "storage/bufpage.h"
#include "utils/relcache.h"

struct SSStructure;

/*
 * Open relid for fname (e.g. "bcms_estimate()"), a function that returns
 * rows of structure s or facts about its keys: locked AccessShareLock,
 * SELECT privilege, and refused where row-level security applies
 * (ss_sql_check_row_security).
 */
extern Relation ss_sql_open_keyed(Oid relid, const char *fname,
								  const struct SSStructure *s);

/*
 * The result of a function returning SETOF the table's row type
 * (materialized), checked to be rel's row type; fname names the function
 * in the message ("bfile_window").
 */
extern TupleDesc ss_sql_rows_result(FunctionCallInfo fcinfo, Relation rel,
									const char *fname);

/* The row an info function (fname) returns: natts columns, none NULL yet. */
typedef struct SSInfoRow
{
	TupleDesc	tupdesc;
	Datum	   *values;
	bool	   *nulls;
	int			own_atts;		/* the structure's columns, before the log's */
} SSInfoRow;

extern void ss_info_row_begin(FunctionCallInfo fcinfo, SSInfoRow *row,
							  const char *fname, int natts);
extern Datum ss_info_row_datum(SSInfoRow *row);

/*
 * The info function (fname) of structure s: its table, opened for reading
 * (AccessShareLock, SELECT), and its row of natts columns of its own
 * followed by the change log's pending_records and pending_bytes; and its
 * result, which fills those two and closes rel.
 */
extern Relation ss_sql_info_open(FunctionCallInfo fcinfo,
								 const struct SSStructure *s,
								 const char *fname, SSInfoRow *row,
								 int natts);
extern Datum ss_sql_info_result(Relation rel, SSInfoRow *row);

/*
 * A constructor (fname, e.g. "bloom_create") of a keyed structure, whose
 * first two arguments are the table's name and key type: ERROR unless
 * both are given.
 */
extern void ss_sql_create_check(FunctionCallInfo fcinfo, const char *fname);

/*
 * A constructor of a keyed structure s whose other parameters are all
 * arguments (ss_params_from_call), and unlogged_arg the optional unlogged
 * flag: the check above (named by s->constructor), then the table of
 * access method s->amname created with a state filled from the settings
 * and the arguments.
 */
extern Oid	ss_sql_create_keyed(FunctionCallInfo fcinfo,
								const struct SSStructure *s,
								int unlogged_arg);

/*
 * The key argument argno converted to the structure's key type keytype
 * (ss_coerce_key) and hashed with its seed.
 */
extern SSHash ss_sql_key_hash(FunctionCallInfo fcinfo, int argno, Oid keytype,
							  int16 keylen, bool keybyval, uint32 seed);


/*
 * The sub-buffers of a buffered structure: nsubbufs of them, per_page on
 * each buffer page of page_type from block first on.  ss_subbufs_total
 * counts the entries of the npages buffer pages; ss_subbufs_flush applies
 * every non-empty sub-buffer with apply (which returns the entries it
 * applied), adds one to *flushes per sub-buffer that had entries, and
 * returns the entries applied.
 */
typedef uint32 (*SSSubbufApplyFn) (Relation rel, uint32 subbuf, void *arg);

extern int64 ss_subbufs_total(Relation rel, BlockNumber first, uint32 npages,
							  uint16 page_type, uint32 per_page, uint32 cap);
extern int64 ss_subbufs_flush(Relation rel, BlockNumber first,
							  uint32 nsubbufs, uint16 page_type,
							  uint32 per_page, SSSubbufApplyFn apply,
							  void *arg, int64 *flushes);

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

/*
 * What the change log holds for one key of a keyed structure (a membership
 * test's shortcut): ss_key_peek_record is the SSLogRecordFn of a log scan
 * that notes whether a record adding copies of the key (SS_PENDING_KEY)
 * or removing them (SS_PENDING_DELETE) is there.  A record is of the key
 * if its hash equals h under the masks (a quotient filter compares
 * fingerprints, the top bits of h1) and its weight is positive.
 */
typedef struct SSKeyPeek
{
	SSHash		h;
	uint64		h1mask;
	uint64		h2mask;
	bool		inserted;
	bool		deleted;
} SSKeyPeek;

extern void ss_key_peek_record(uint64 pos, const SSPendingHeader *hdr,
							   const char *payload, void *arg);

#endif							/* SS_QUERYUTIL_H */
