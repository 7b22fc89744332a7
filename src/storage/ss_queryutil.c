/*-------------------------------------------------------------------------
 *
 * ss_queryutil.c
 *	  What the SQL functions of the keyed paged structures share
 *	  (ss_queryutil.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "parser/parse_coerce.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "ss_page.h"
#include "ss_queryutil.h"
#include "ss_sqlfunc.h"

/*
 * A key of another type is converted first, because hashing another binary
 * form would silently miss.
 */
SSHash
ss_sql_key_hash(FunctionCallInfo fcinfo, int argno, Oid keytype,
				int16 keylen, bool keybyval, uint32 seed)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Datum		key;

	if (!OidIsValid(argtype))
		elog(ERROR, "could not determine the type of the key");
	key = ss_coerce_key(PG_GETARG_DATUM(argno), argtype, keytype);
	return ss_hash_datum(key, keylen, keybyval, seed);
}

int64
ss_sql_flush(Oid relid, const char *fname, const struct SSStructure *s,
			 SSFlushFn flush)
{
	Relation	rel;
	int64		applied;

	rel = ss_sql_open_structure(relid, RowExclusiveLock, fname, ACL_INSERT,
								s);
	/* with an xid, the commit waits for the flush's WAL to be flushed */
	(void) GetCurrentTransactionId();
	applied = ss_log_flush(rel, flush);
	relation_close(rel, NoLock);
	return applied;
}

/*
 * The value's keys were hashed by their binary form, so they must be of
 * the table's key type or binary-coercible to it; a value without a key
 * type (built from untyped keys) is taken as is.
 */
void
ss_check_merge_key_type(Oid elemtype, const char *typname, Relation rel,
						const char *what, Oid keytype)
{
	ss_check_key_type(elemtype, typname);
	if (OidIsValid(elemtype) && elemtype != keytype &&
		!IsBinaryCoercible(elemtype, keytype))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s of %s keys cannot be merged into %s \"%s\" of %s keys",
						typname, format_type_be(elemtype), what,
						RelationGetRelationName(rel),
						format_type_be(keytype))));
}

/*
 * Taking the pin apart from the lock lets a caller pin several pages
 * first, so that no I/O happens under a content lock.
 */
Page
ss_lock_checked_page(Relation rel, Buffer buf, BlockNumber blkno,
					 uint16 page_type)
{
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (PageIsNew(page))
		return NULL;
	ss_page_check(rel, blkno, page, page_type);
	return page;
}

Buffer
ss_read_checked_page(Relation rel, BlockNumber blkno, uint16 page_type)
{
	Buffer		buf = ss_read_buffer_if_exists(rel, blkno);

	if (!BufferIsValid(buf))
		return InvalidBuffer;
	if (ss_lock_checked_page(rel, buf, blkno, page_type) == NULL)
	{
		UnlockReleaseBuffer(buf);
		return InvalidBuffer;
	}
	return buf;
}
