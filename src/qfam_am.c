/*-------------------------------------------------------------------------
 *
 * qfam_am.c
 *	  The quotient filter family's table access methods: handler,
 *	  parameters and their catalog, creation, TRUNCATE and INSERT.
 *
 * INSERT hashes the key and appends (hash, count) to the transaction's
 * pending log; qfam_apply_pending() applies it at pre-commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/multixact.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "catalog/storage.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "qfam.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(quotient_filter_handler);

static TableAmRoutine qf_routine;
static bool qf_routine_ready = false;

bool
qfam_relation_is_qf(Relation rel)
{
	return rel->rd_tableam == &qf_routine;
}

Relation
qfam_open(Oid relid, LOCKMODE lockmode)
{
	Relation	rel = relation_open(relid, lockmode);

	if (rel->rd_rel->relkind != RELKIND_RELATION || !qfam_relation_is_qf(rel))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" is not a quotient filter table",
						RelationGetRelationName(rel)),
				 errhint("Create one with CREATE TABLE ... USING quotient_filter or qf_create().")));
	return rel;
}

/* The geometry of one page of a level with rbits remainder bits. */
void
qfam_geom(const QfamParams *p, uint32 rbits, QfGeom *g)
{
	if (!qf_geom_init_slots(g, (int) p->slot_bits, (int) rbits, QF_SLACK_FILL,
							SS_PAGE_DATA_SIZE))
		elog(ERROR, "invalid quotient filter geometry: %u slot bits, %u remainder bits",
			 p->slot_bits, rbits);
}

/*
 * Derive the geometry from capacity and false-positive rate.  A QF at load
 * alpha has false-positive rate about alpha * 2^-r, so r is the smallest
 * remainder with QFAM_MAX_LOAD * 2^-r <= fp_rate; the page count is the
 * smallest power of two whose home slots hold capacity at QFAM_MAX_LOAD.
 */
void
qfam_derive(QfamParams *p)
{
	QfGeom		g;
	int			rbits;
	int			page_bits = 0;
	double		slots_needed;

	if (p->capacity < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("quotient filter capacity " INT64_FORMAT " is out of range",
						p->capacity),
				 errdetail("The capacity must be at least 1.")));
	if (!(p->fp_rate > 0 && p->fp_rate < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("quotient filter false-positive rate %g is out of range",
						p->fp_rate),
				 errdetail("The rate must be greater than 0 and less than 1.")));
	rbits = (int) ceil(log2(QFAM_MAX_LOAD / p->fp_rate));
	rbits = Max(rbits, 1);
	if (rbits > QF_MAX_RBITS || !qf_geom_init(&g, rbits, SS_PAGE_DATA_SIZE))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("quotient filter false-positive rate %g is too small",
						p->fp_rate),
				 errdetail("It needs %d remainder bits; at most %d fit.",
						   rbits, QF_MAX_RBITS)));
	slots_needed = (double) p->capacity / QFAM_MAX_LOAD;
	while ((double) g.nhome * ((uint64) 1 << page_bits) < slots_needed)
	{
		if (++page_bits > QFAM_MAX_PAGE_BITS ||
			page_bits + g.slot_bits + rbits > 64)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("quotient filter capacity " INT64_FORMAT " is too large",
							p->capacity),
					 errdetail("At most 2^%d pages of %u slots are supported.",
							   QFAM_MAX_PAGE_BITS, g.nhome)));
	}
	p->rbits = (uint32) rbits;
	p->slot_bits = (uint32) g.slot_bits;
	p->page_bits = (uint32) page_bits;
	p->fp_bits = p->rbits + p->slot_bits + p->page_bits;
}

void
qfam_params_from_gucs(QfamParams *p)
{
	memset(p, 0, sizeof(*p));
	p->kind = QFAM_KIND_QF;
	p->seed = SS_DEFAULT_SEED;
	p->capacity = ss_qf_capacity;
	p->fp_rate = ss_qf_fp_rate;
	p->fanout = 0;
	qfam_derive(p);
}

static const char *
qfam_kind_name(uint32 kind)
{
	return "quotient_filter";
}

void
qfam_catalog_store(Oid relid, const QfamParams *p)
{
	Oid			argtypes[6] = {OIDOID, TEXTOID, INT8OID, FLOAT8OID, INT4OID, INT8OID};
	Datum		args[6];
	char	   *sql;

	args[0] = ObjectIdGetDatum(relid);
	args[1] = CStringGetTextDatum(qfam_kind_name(p->kind));
	args[2] = Int64GetDatum(p->capacity);
	args[3] = Float8GetDatum(p->fp_rate);
	args[4] = Int32GetDatum((int32) p->fanout);
	args[5] = Int64GetDatum((int64) p->seed);
	sql = psprintf("INSERT INTO %s.qf_params (relid, kind, capacity, fp_rate, fanout, seed) "
				   "VALUES ($1, $2, $3, $4, $5, $6)", ss_extension_schema());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, 6, argtypes, args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record quotient filter parameters of relation %u", relid);
	SPI_finish();
	pfree(sql);
}

static bool
qfam_catalog_load(Oid relid, QfamParams *p)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	char	   *sql;
	bool		found = false;

	args[0] = ObjectIdGetDatum(relid);
	sql = psprintf("SELECT capacity, fp_rate, fanout, seed FROM %s.qf_params WHERE relid = $1",
				   ss_extension_schema());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, 1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read quotient filter parameters of relation %u", relid);
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull[4];
		Datum		v[4];

		for (int i = 0; i < 4; i++)
		{
			v[i] = SPI_getbinval(tup, desc, i + 1, &isnull[i]);
			if (isnull[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("qf_params row of relation %u has a NULL column", relid)));
		}
		memset(p, 0, sizeof(*p));
		p->kind = QFAM_KIND_QF;
		p->capacity = DatumGetInt64(v[0]);
		p->fp_rate = DatumGetFloat8(v[1]);
		p->fanout = (uint32) DatumGetInt32(v[2]);
		p->seed = (uint32) DatumGetInt64(v[3]);
		found = true;
	}
	SPI_finish();
	pfree(sql);
	if (found)
		qfam_derive(p);
	return found;
}

static void
qfam_check_columns(Relation rel, QfamState *st)
{
	SSKeyColumns cols;

	ss_check_key_columns(RelationGetDescr(rel), RelationGetRelationName(rel),
						 ss_structure_name(rel), "count", &cols);
	if (st)
	{
		st->keytype = cols.keytype;
		st->keylen = cols.keylen;
		st->keybyval = cols.keybyval;
		st->counted = OidIsValid(cols.inttype);
		st->counttype = cols.inttype;
	}
}

/* Parameters and columns, cached in rd_amcache (see bcms_get_state). */
QfamState *
qfam_get_state(Relation rel)
{
	QfamState  *st;
	QfamMeta	meta;

	if (rel->rd_amcache)
		return (QfamState *) rel->rd_amcache;

	st = MemoryContextAllocZero(CacheMemoryContext, sizeof(QfamState));
	PG_TRY();
	{
		qfam_check_columns(rel, st);
		if (qfam_read_meta(rel, &meta))
			st->p = meta.params;
		else if (!qfam_catalog_load(RelationGetRelid(rel), &st->p))
		{
			qfam_params_from_gucs(&st->p);
			if (!RecoveryInProgress() && !XactReadOnly)
				qfam_catalog_store(RelationGetRelid(rel), &st->p);
		}
	}
	PG_CATCH();
	{
		pfree(st);
		PG_RE_THROW();
	}
	PG_END_TRY();
	rel->rd_amcache = st;
	return st;
}

static void
qfam_forget_state(Relation rel)
{
	if (rel->rd_amcache)
		pfree(rel->rd_amcache);
	rel->rd_amcache = NULL;
}

static void
qfam_relation_set_new_filenode(Relation rel, const RelFileNode *newrnode,
							   char persistence, TransactionId *freezeXid,
							   MultiXactId *minmulti)
{
	*freezeXid = InvalidTransactionId;
	*minmulti = InvalidMultiXactId;

	qfam_check_columns(rel, NULL);
	ss_create_storage(rel, newrnode, persistence);
	if (ss_relation_is_new(rel))
	{
		QfamParams	p;

		qfam_params_from_gucs(&p);
		qfam_catalog_store(RelationGetRelid(rel), &p);
	}
	else if (ss_pending_has(RelationGetRelid(rel)))
		ss_pending_add(rel, qfam_apply_pending, SS_PENDING_TRUNCATE, NULL, 0);
	qfam_forget_state(rel);
}

static void
qfam_relation_nontransactional_truncate(Relation rel)
{
	RelationTruncate(rel, 0);
	if (ss_pending_has(RelationGetRelid(rel)))
		ss_pending_add(rel, qfam_apply_pending, SS_PENDING_TRUNCATE, NULL, 0);
	qfam_forget_state(rel);
}

/*
 * One row inserts its key once (or `count` times for a table with a count
 * column).  Rows with a NULL key or count are skipped; a negative count is
 * an error.
 */
static void
qfam_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				  int options, struct BulkInsertStateData *bistate)
{
	QfamState  *st = qfam_get_state(rel);
	SSPendingKey key;

	slot_getallattrs(slot);
	slot->tts_tableOid = RelationGetRelid(rel);
	ItemPointerSetInvalid(&slot->tts_tid);
	if (slot->tts_isnull[0])
		return;
	key.weight = 1;
	if (st->counted)
	{
		if (slot->tts_isnull[1])
			return;
		key.weight = ss_int_datum(st->counttype, slot->tts_values[1]);
		if (key.weight < 0)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("quotient filter count " INT64_FORMAT " is negative",
							key.weight),
					 errhint("Use qf_delete() to remove copies of a key.")));
		if (key.weight == 0)
			return;
	}
	key.hash = ss_hash_datum(slot->tts_values[0], st->keylen, st->keybyval,
							 st->p.seed);
	ss_pending_add(rel, qfam_apply_pending, SS_PENDING_KEY, &key, sizeof(key));
}

Datum
quotient_filter_handler(PG_FUNCTION_ARGS)
{
	if (!qf_routine_ready)
	{
		MemSet(&qf_routine, 0, sizeof(qf_routine));
		ss_tableam_init_common(&qf_routine);
		qf_routine.tuple_insert = qfam_tuple_insert;
		qf_routine.relation_set_new_filenode = qfam_relation_set_new_filenode;
		qf_routine.relation_nontransactional_truncate = qfam_relation_nontransactional_truncate;
		qf_routine_ready = true;
	}
	PG_RETURN_POINTER(&qf_routine);
}
