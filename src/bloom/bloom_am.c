/*-------------------------------------------------------------------------
 *
 * bloom_am.c
 *	  The `bloom_filter` table access method: handler, parameters and their
 *	  catalog, creation, TRUNCATE and INSERT.
 *
 * INSERT only hashes the row's key and appends it to the transaction's
 * pending log (ss_pending.c); bloom_apply_pending() applies the log at
 * pre-commit.
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
#include "bloom.h"
#include "catalog/pg_type.h"
#include "catalog/storage.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "ss_pending.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(bloom_filter_handler);

static TableAmRoutine bloom_routine;
static bool bloom_routine_ready = false;

bool
bloom_relation_is_bloom(Relation rel)
{
	return rel->rd_tableam == &bloom_routine;
}

/* Open relid and check that it is a bloom_filter table. */
Relation
bloom_open(Oid relid, LOCKMODE lockmode)
{
	Relation	rel = relation_open(relid, lockmode);

	if (rel->rd_rel->relkind != RELKIND_RELATION || !bloom_relation_is_bloom(rel))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" is not a bloom_filter table",
						RelationGetRelationName(rel)),
				 errhint("Create one with CREATE TABLE ... USING bloom_filter or bloom_create().")));
	return rel;
}

uint32
bloom_parse_mode(const char *mode)
{
	if (strcmp(mode, "plain") == 0)
		return BLOOM_MODE_PLAIN;
	if (strcmp(mode, "elevator") == 0)
		return BLOOM_MODE_ELEVATOR;
	if (strcmp(mode, "localized") == 0)
		return BLOOM_MODE_LOCALIZED;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid bloom_filter mode \"%s\"", mode),
			 errhint("Use 'plain', 'elevator' or 'localized'.")));
	return 0;					/* keep the compiler quiet */
}

const char *
bloom_mode_name(uint32 mode)
{
	switch (mode)
	{
		case BLOOM_MODE_PLAIN:
			return "plain";
		case BLOOM_MODE_ELEVATOR:
			return "elevator";
		default:
			return "localized";
	}
}

/*
 * Validate the requested parameters and derive the geometry.  The result
 * depends on nothing else, so the metapage and the catalog row agree.
 */
void
bloom_derive(BloomParams *p)
{
	double		m;
	double		k;
	uint64		bytes;

	if (p->capacity < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bloom_filter capacity " INT64_FORMAT " is out of range",
						p->capacity),
				 errdetail("The capacity must be at least 1.")));
	if (!(p->fp_rate > 0 && p->fp_rate < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bloom_filter false-positive rate %g is out of range",
						p->fp_rate),
				 errdetail("The rate must be greater than 0 and less than 1.")));
	if (p->mode > BLOOM_MODE_LOCALIZED)
		elog(ERROR, "invalid bloom_filter mode %u", p->mode);

	m = Max(1.0, ceil(-(double) p->capacity * log(p->fp_rate) / (M_LN2 * M_LN2)));
	if (m > (double) BLOOM_MAX_PAGES * BLOOM_PAGE_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("bloom_filter of capacity " INT64_FORMAT " and false-positive rate %g is too large",
						p->capacity, p->fp_rate),
				 errdetail("It needs %.0f bits; at most %u pages of %u bits are supported.",
						   m, BLOOM_MAX_PAGES, BLOOM_PAGE_BITS),
				 errhint("Use a smaller capacity or a larger false-positive rate.")));
	k = Max(1.0, rint(m / (double) p->capacity * M_LN2));
	if (k > BLOOM_MAX_HASHES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bloom_filter false-positive rate %g is too small", p->fp_rate),
				 errdetail("It needs %.0f hash functions; at most %d are supported.",
						   k, BLOOM_MAX_HASHES)));
	p->nhashes = (uint32) k;
	p->nbits = (uint64) m;
	p->npages = (uint32) ((p->nbits + BLOOM_PAGE_BITS - 1) / BLOOM_PAGE_BITS);
	if (p->mode == BLOOM_MODE_LOCALIZED)
	{
		/* spread m evenly: every page gets the same number of bits */
		p->bits_per_page = (uint32) ((p->nbits + p->npages - 1) / p->npages);
		p->nbits = (uint64) p->npages * p->bits_per_page;
	}
	else
		p->bits_per_page = BLOOM_PAGE_BITS;

	p->nsubbufs = p->subbuf_cap = p->subbufs_per_page = p->nbufpages = 0;
	if (p->mode == BLOOM_MODE_PLAIN || p->buffer_kb == 0)
		return;					/* unbuffered */
	bytes = (uint64) p->buffer_kb * 1024;
	if (p->mode == BLOOM_MODE_ELEVATOR)
	{
		/* one sub-buffer per buffer page, picked by h1 */
		p->nbufpages = (uint32) Min(Max(bytes / BLCKSZ, 1), BLOOM_MAX_BUFPAGES);
		p->subbufs_per_page = 1;
		p->subbuf_cap = BLOOM_SUBBUF_MAX;
		p->nsubbufs = p->nbufpages;
	}
	else
	{
		/* localized: M bytes split evenly over the bit pages, as in bcms */
		uint64		cap = Min(bytes / sizeof(uint64) / p->npages, BLOOM_SUBBUF_MAX);
		uint32		spp;

		if (cap == 0)
			return;
		for (spp = 1;; spp++)
		{
			if (MAXALIGN((spp + 1) * sizeof(uint32)) +
				(spp + 1) * cap * sizeof(uint64) > SS_PAGE_DATA_SIZE)
				break;
		}
		p->subbuf_cap = (uint32) cap;
		p->subbufs_per_page = spp;
		p->nsubbufs = p->npages;
		p->nbufpages = (p->npages + spp - 1) / spp;
	}
}

void
bloom_params_from_gucs(BloomParams *p)
{
	memset(p, 0, sizeof(*p));
	p->mode = (uint32) ss_bloom_mode;
	p->seed = SS_DEFAULT_SEED;
	p->capacity = ss_bloom_capacity;
	p->fp_rate = ss_bloom_fp_rate;
	p->buffer_kb = (uint32) ss_bloom_buffer_size_kb;
	bloom_derive(p);
}

/* Record p as relid's parameters (replacing any earlier row). */
void
bloom_catalog_store(Oid relid, const BloomParams *p)
{
	Oid			argtypes[6] = {OIDOID, TEXTOID, INT8OID, FLOAT8OID, INT4OID, INT8OID};
	Datum		args[6];
	char	   *sql;

	args[0] = ObjectIdGetDatum(relid);
	args[1] = CStringGetTextDatum(bloom_mode_name(p->mode));
	args[2] = Int64GetDatum(p->capacity);
	args[3] = Float8GetDatum(p->fp_rate);
	args[4] = Int32GetDatum((int32) p->buffer_kb);
	args[5] = Int64GetDatum((int64) p->seed);
	/* a BEFORE INSERT trigger on bloom_params replaces an existing row */
	sql = psprintf("INSERT INTO %s.bloom_params (relid, mode, capacity, fp_rate, buffer_size_kb, seed) "
				   "VALUES ($1, $2, $3, $4, $5, $6)", ss_extension_schema());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, 6, argtypes, args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record bloom_filter parameters of relation %u", relid);
	SPI_finish();
	pfree(sql);
}

/* Read relid's parameters from the catalog; false if it has no row. */
static bool
bloom_catalog_load(Oid relid, BloomParams *p)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	char	   *sql;
	bool		found = false;

	args[0] = ObjectIdGetDatum(relid);
	sql = psprintf("SELECT mode, capacity, fp_rate, buffer_size_kb, seed "
				   "FROM %s.bloom_params WHERE relid = $1", ss_extension_schema());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, 1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read bloom_filter parameters of relation %u", relid);
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull[5];
		Datum		v[5];

		for (int i = 0; i < 5; i++)
		{
			v[i] = SPI_getbinval(tup, desc, i + 1, &isnull[i]);
			if (isnull[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("bloom_params row of relation %u has a NULL column", relid)));
		}
		memset(p, 0, sizeof(*p));
		p->mode = bloom_parse_mode(TextDatumGetCString(v[0]));
		p->capacity = DatumGetInt64(v[1]);
		p->fp_rate = DatumGetFloat8(v[2]);
		p->buffer_kb = (uint32) Max(DatumGetInt32(v[3]), 0);
		p->seed = (uint32) DatumGetInt64(v[4]);
		found = true;
	}
	SPI_finish();
	pfree(sql);
	if (found)
		bloom_derive(p);
	return found;
}

/* A bloom_filter table has exactly one column: the key, of any type. */
static void
bloom_check_columns(TupleDesc desc, const char *relname, BloomState *st)
{
	Form_pg_attribute key = NULL;
	int			ncols = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (ncols++ == 0)
			key = att;
	}
	if (ncols != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("a bloom_filter table must have exactly one column, \"%s\" has %d",
						relname, ncols),
				 errdetail("A Bloom filter stores set membership only, no counts or weights."),
				 errhint("Use (key anytype); for counts use quotient_filter or bcms.")));
	if (st)
	{
		st->keytype = key->atttypid;
		st->keylen = key->attlen;
		st->keybyval = key->attbyval;
	}
}

static void
bloom_state_columns(Relation rel, void *st)
{
	bloom_check_columns(RelationGetDescr(rel), RelationGetRelationName(rel), st);
}

static bool
bloom_state_load(Relation rel, void *st)
{
	BloomMetaData meta;

	if (bloom_read_meta(rel, &meta))
	{
		((BloomState *) st)->p = meta.params;
		return true;
	}
	return bloom_catalog_load(RelationGetRelid(rel), &((BloomState *) st)->p);
}

static void
bloom_state_defaults(Relation rel, void *st)
{
	bloom_params_from_gucs(&((BloomState *) st)->p);
}

static void
bloom_state_store(Relation rel, const void *st)
{
	bloom_catalog_store(RelationGetRelid(rel), &((const BloomState *) st)->p);
}

static const SSStateOps bloom_state_ops = {
	.state_size = sizeof(BloomState),
	.apply = bloom_apply_pending,
	.check_columns = bloom_state_columns,
	.load_params = bloom_state_load,
	.default_params = bloom_state_defaults,
	.store_params = bloom_state_store,
};

/* Parameters and column info (ss_get_state). */
BloomState *
bloom_get_state(Relation rel)
{
	return (BloomState *) ss_get_state(rel, &bloom_state_ops);
}

static void
bloom_relation_set_new_filenode(Relation rel, const RelFileNode *newrnode,
								char persistence, TransactionId *freezeXid,
								MultiXactId *minmulti)
{
	ss_set_new_filenode(rel, &bloom_state_ops, newrnode, persistence,
						freezeXid, minmulti);
}

static void
bloom_relation_nontransactional_truncate(Relation rel)
{
	ss_truncate_in_place(rel, &bloom_state_ops);
}

/* One row inserts its key; rows with a NULL key are skipped. */
static void
bloom_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				   int options, struct BulkInsertStateData *bistate)
{
	BloomState *st = bloom_get_state(rel);
	SSPendingKey key;

	slot_getallattrs(slot);
	slot->tts_tableOid = RelationGetRelid(rel);
	ItemPointerSetInvalid(&slot->tts_tid);
	if (slot->tts_isnull[0])
		return;
	key.weight = 1;
	key.hash = ss_hash_datum(slot->tts_values[0], st->keylen, st->keybyval,
							 st->p.seed);
	ss_pending_add(rel, bloom_apply_pending, SS_PENDING_KEY, &key, sizeof(key));
}

Datum
bloom_filter_handler(PG_FUNCTION_ARGS)
{
	if (!bloom_routine_ready)
	{
		MemSet(&bloom_routine, 0, sizeof(bloom_routine));
		ss_tableam_init_common(&bloom_routine);
		bloom_routine.tuple_insert = bloom_tuple_insert;
		bloom_routine.relation_set_new_filenode = bloom_relation_set_new_filenode;
		bloom_routine.relation_nontransactional_truncate = bloom_relation_nontransactional_truncate;
		bloom_routine_ready = true;
	}
	PG_RETURN_POINTER(&bloom_routine);
}
