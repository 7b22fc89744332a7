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
#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "ss_changelog.h"
#include "ss_page.h"
#include "ss_progress.h"
#include "ss_queryutil.h"
#include "ss_sqlfunc.h"
#include "streamsketch.h"

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
ss_subbufs_total(Relation rel, BlockNumber first, uint32 npages,
				 uint16 page_type, uint32 per_page, uint32 cap)
{
	int64		total = 0;

	for (uint32 b = 0; b < npages; b++)
	{
		Buffer		buf;

		CHECK_FOR_INTERRUPTS();
		buf = ss_read_checked_page(rel, first + b, page_type);
		if (!BufferIsValid(buf))
			continue;
		total += ss_subbuf_total(rel, first + b, BufferGetPage(buf),
								 per_page, cap);
		UnlockReleaseBuffer(buf);
	}
	return total;
}

/* Only pages that exist are read: a flush does not extend the relation. */
int64
ss_subbufs_flush(Relation rel, BlockNumber first, uint32 nsubbufs,
				 uint16 page_type, uint32 per_page, SSSubbufApplyFn apply,
				 void *arg, int64 *flushes)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(rel);
	int64		applied = 0;

	for (uint32 sb = 0; sb < nsubbufs; sb++)
	{
		BlockNumber blk = first + sb / per_page;
		uint32		n;

		CHECK_FOR_INTERRUPTS();
		if (blk >= nblocks)
			break;
		if (sb % per_page == 0)
			ss_progress_report(SS_PHASE_FLUSH, "sub-buffers", sb, nsubbufs);
		if (ss_subbuf_count(rel, blk, page_type, sb % per_page) == 0)
			continue;
		n = apply(rel, sb, arg);
		applied += n;
		*flushes += n > 0;
	}
	return applied;
}

Relation
ss_sql_open_keyed(Oid relid, const char *fname, const struct SSStructure *s)
{
	Relation	rel = ss_sql_open_structure(relid, AccessShareLock, NULL,
											ACL_SELECT, s);

	ss_sql_check_row_security(rel, fname);
	return rel;
}

TupleDesc
ss_sql_rows_result(FunctionCallInfo fcinfo, Relation rel, const char *fname)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != RelationGetDescr(rel)->natts)
		elog(ERROR, "%s: the result is not the table's row type", fname);
	return rsinfo->setDesc;
}

void
ss_info_row_begin(FunctionCallInfo fcinfo, SSInfoRow *row, const char *fname,
				  int natts)
{
	if (get_call_result_type(fcinfo, NULL, &row->tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type of %s must be a row type", fname);
	if (row->tupdesc->natts != natts)
		elog(ERROR, "%s must return %d columns", fname, natts);
	row->values = palloc0(sizeof(Datum) * natts);
	row->nulls = palloc0(sizeof(bool) * natts);
}

Datum
ss_info_row_datum(SSInfoRow *row)
{
	return HeapTupleGetDatum(heap_form_tuple(row->tupdesc, row->values,
											 row->nulls));
}

Relation
ss_sql_info_open(FunctionCallInfo fcinfo, const struct SSStructure *s,
				 const char *fname, SSInfoRow *row, int natts)
{
	Relation	rel = ss_sql_open_structure(PG_GETARG_OID(0), AccessShareLock,
											NULL, ACL_SELECT, s);

	ss_info_row_begin(fcinfo, row, fname, natts + 2);
	row->own_atts = natts;
	return rel;
}

/*
 * The info functions report the work waiting in the change log (what the
 * next rounds will consolidate) instead of doing it.
 */
Datum
ss_sql_info_result(Relation rel, SSInfoRow *row)
{
	SSLogMeta	log;

	ss_log_meta(rel, &log);
	row->values[row->own_atts] = Int64GetDatum((int64) log.nrecords);
	row->values[row->own_atts + 1] =
		Int64GetDatum((int64) (log.end_pos - log.head_pos));
	relation_close(rel, AccessShareLock);
	return ss_info_row_datum(row);
}

void
ss_sql_create_check(FunctionCallInfo fcinfo, const char *fname)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s needs a table name and a key type", fname)));
}

Oid
ss_sql_create_keyed(FunctionCallInfo fcinfo, const struct SSStructure *s,
					int unlogged_arg)
{
	bool		unlogged = PG_ARGISNULL(unlogged_arg) ? false :
		PG_GETARG_BOOL(unlogged_arg);
	void	   *st = palloc0(s->state_size);

	/* "bloom_create()" names the function "bloom_create" in messages */
	ss_sql_create_check(fcinfo, pnstrdup(s->constructor,
										 strcspn(s->constructor, "(")));
	ss_params_from_call(s, fcinfo, st);
	return ss_create_structure(s, st, PG_GETARG_TEXT_PP(0), PG_GETARG_OID(1),
							   NULL, s->amname, unlogged);
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

void
ss_key_peek_record(uint64 pos, const SSPendingHeader *hdr,
				   const char *payload, void *arg)
{
	SSKeyPeek  *kp = arg;
	SSPendingKey key;

	if (!ss_record_key(hdr, payload, &key) || key.weight <= 0 ||
		((key.hash.h1 ^ kp->h.h1) & kp->h1mask) != 0 ||
		((key.hash.h2 ^ kp->h.h2) & kp->h2mask) != 0)
		return;
	if (hdr->type == SS_PENDING_KEY)
		kp->inserted = true;
	else if (hdr->type == SS_PENDING_DELETE)
		kp->deleted = true;
}
