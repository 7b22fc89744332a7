/*-------------------------------------------------------------------------
 *
 * bfile_am.c
 *	  The `bfile` access method: parameters (settings, label, metapage),
 *	  INSERT, the consolidation callback and the handler (docs/bfile.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/detoast.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "bfile.h"
#include "bfile_am.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/proc.h"
#include "ss_changelog.h"
#include "ss_pending.h"
#include "ss_xlog.h"
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/date.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(bfile_handler);

/* settings (streamsketch.bfile_*): the defaults of new bfile tables */
char	   *ss_bfile_sample_size = NULL;
double		ss_bfile_min_fraction = 0.8;
int			ss_bfile_buckets = 16;
int			ss_bfile_mode = BFILE_UNIFORM;
char	   *ss_bfile_weight_column = NULL;
char	   *ss_bfile_time_column = NULL;
int			ss_test_bfile_seed = 0;
int			ss_test_bfile_crash = BFILE_CRASH_NONE;
int			ss_test_bfile_coins = 0;

/* the inserts' draws while streamsketch.test_bfile_coins is set */
static pg_prng_state test_coins;

static const struct config_enum_entry bfile_crash_options[] = {
	{"none", BFILE_CRASH_NONE, false},
	{"discarded", BFILE_CRASH_DISCARDED, false},
	{"unrolled", BFILE_CRASH_UNROLLED, false},
	{"installed", BFILE_CRASH_INSTALLED, false},
	{NULL, 0, false}
};

/* Stop the server here if streamsketch.test_bfile_crash says so (tests). */
void
bfile_test_crash(Relation rel, BfileCrashPoint point)
{
	if (ss_test_bfile_crash != (int) point)
		return;
	ss_xlog_flush_own(rel);
	elog(PANIC, "streamsketch.test_bfile_crash: stopping at \"%s\" in a round of \"%s\"",
		 bfile_crash_options[point].name, RelationGetRelationName(rel));
}

static const struct config_enum_entry bfile_mode_options[] = {
	{"uniform", BFILE_UNIFORM, false},
	{"weighted", BFILE_WEIGHTED, false},
	{"decayed", BFILE_DECAYED, false},
	{"weighted_decayed", BFILE_WEIGHTED_DECAYED, false},
	{NULL, 0, false}
};

const char *
bfile_mode_name(uint32 mode)
{
	for (int i = 0; bfile_mode_options[i].name; i++)
		if (bfile_mode_options[i].val == (int) mode)
			return bfile_mode_options[i].name;
	return "?";
}

int
bfile_mode_from_name(const char *name)
{
	for (int i = 0; bfile_mode_options[i].name; i++)
		if (pg_strcasecmp(bfile_mode_options[i].name, name) == 0)
			return bfile_mode_options[i].val;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid bfile mode \"%s\"", name),
			 errhint("Use uniform, weighted, decayed or weighted_decayed.")));
	return -1;					/* keep compiler quiet */
}

static const char *const bfile_settings[] = {
	"streamsketch.bfile_sample_size", "streamsketch.bfile_min_fraction",
	"streamsketch.bfile_buckets", "streamsketch.bfile_mode",
	"streamsketch.bfile_weight_column", "streamsketch.bfile_time_column", NULL
};

/* Refuse a misspelled streamsketch.bfile_* setting (ss_check_settings). */
void
bfile_check_settings(void)
{
	ss_check_settings(bfile_settings);
}

#define BFILE_MIN_BYTES		(INT64CONST(64) * 1024)
#define BFILE_MAX_BYTES		(INT64CONST(1) << 50)

/*
 * s_max as given: a number of rows ("1000000") or a size with a unit
 * ("10GB", as for memory settings); false if it is neither, or out of
 * range.  Bytes count the items as stored (rows with their headers).
 */
bool
bfile_parse_sample_size(const char *s, BfileParams *p)
{
	const char *c = s;
	int			kb;
	const char *hint;

	while (isspace((unsigned char) *c))
		c++;
	if (*c != '\0' && strspn(c, "0123456789") == strlen(c))
	{
		int64		rows;

		errno = 0;
		rows = strtoi64(c, NULL, 10);
		if (errno != 0 || rows < 2 || rows > BFILE_MAX_SAMPLE)
			return false;
		p->sample_size = rows;
		p->sample_bytes = 0;
		return true;
	}
	if (!parse_int(s, &kb, GUC_UNIT_KB, &hint) ||
		(int64) kb * 1024 < BFILE_MIN_BYTES || (int64) kb * 1024 > BFILE_MAX_BYTES)
		return false;
	p->sample_size = BFILE_MAX_SAMPLE;
	p->sample_bytes = (int64) kb * 1024;
	return true;
}

/* s_max as bfile_parse_sample_size reads it (labels, errors). */
char *
bfile_sample_size_text(const BfileParams *p)
{
	if (p->sample_bytes > 0)
		return psprintf(INT64_FORMAT "kB", p->sample_bytes / 1024);
	return psprintf(INT64_FORMAT, p->sample_size);
}

/* Bytes of the items in the installed sample. */
int64
bfile_sample_bytes(const BfileMeta *m)
{
	int64		bytes = (int64) m->tail.bytes;

	for (uint32 i = 0; i < m->nbuckets_live; i++)
		bytes += (int64) m->buckets[i].bytes;
	return bytes;
}

void
bfile_sample_size_error(const char *given)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid bfile sample size \"%s\"", given),
			 errhint("Use 2 to " INT64_FORMAT " rows, or a size from 64kB to 1PB such as '10GB'.",
					 (int64) BFILE_MAX_SAMPLE)));
}

/* The seed of a new bfile: streamsketch.test_bfile_seed in tests. */
uint32
bfile_new_seed(void)
{
	return ss_test_bfile_seed != 0 ? (uint32) ss_test_bfile_seed : SS_DEFAULT_SEED;
}

/* u = round(-1 / ln alpha), in [1, N] (Lemma 4.3) */
uint32
bfile_unroll_every(double alpha, uint32 nbuckets)
{
	double		u = rint(-1.0 / log(alpha));

	if (!(u >= 1))
		u = 1;
	if (u > nbuckets)
		u = nbuckets;
	return (uint32) u;
}

/* Can a column of type typid be a bfile's time column? */
bool
bfile_time_type_ok(Oid typid)
{
	return typid == TIMESTAMPTZOID || typid == TIMESTAMPOID ||
		typid == DATEOID || typid == INT2OID || typid == INT4OID ||
		typid == INT8OID;
}

/* A time column's value as the int64 key items are ordered by. */
int64
bfile_time_key(Oid typid, Datum d)
{
	switch (typid)
	{
		case TIMESTAMPTZOID:
			return DatumGetTimestampTz(d);
		case TIMESTAMPOID:
			return DatumGetTimestamp(d);
		case DATEOID:
			return DatumGetDateADT(d);
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		case INT8OID:
			return DatumGetInt64(d);
	}
	elog(ERROR, "type %u cannot be a bfile time column", typid);
	return 0;					/* keep compiler quiet */
}

/*
 * Check a set of parameters (from arguments, settings or a label) against
 * rel's columns; weight_attnum must name a column of a numeric type in a
 * weighted mode, and no column otherwise.
 */
void
bfile_check_params(Relation rel, const BfileParams *p)
{
	if (p->sample_size < 2 || p->sample_size > BFILE_MAX_SAMPLE ||
		(p->sample_bytes != 0 &&
		 (p->sample_size != BFILE_MAX_SAMPLE || p->sample_bytes < BFILE_MIN_BYTES ||
		  p->sample_bytes > BFILE_MAX_BYTES)))
		bfile_sample_size_error(bfile_sample_size_text(p));
	if (!(p->alpha > 0.0 && p->alpha < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile min_fraction %g is out of range", p->alpha),
				 errhint("Use a fraction strictly between 0 and 1: the smallest sample size over the largest.")));
	if (p->nbuckets < 1 || p->nbuckets > BFILE_MAX_BUCKETS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile buckets %u is out of range", p->nbuckets),
				 errhint("Use 1 to %d.", BFILE_MAX_BUCKETS)));
	if (p->mode > BFILE_WEIGHTED_DECAYED ||
		p->unroll_every != bfile_unroll_every(p->alpha, p->nbuckets))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid bfile parameters")));
	if (BFILE_MODE_WEIGHTED(p->mode))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		Form_pg_attribute att;

		if (p->weight_attnum < 1 || p->weight_attnum > desc->natts ||
			TupleDescAttr(desc, p->weight_attnum - 1)->attisdropped)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a weighted bfile needs a weight column"),
					 errhint("Name it with weight_column, or streamsketch.bfile_weight_column.")));
		att = TupleDescAttr(desc, p->weight_attnum - 1);
		if (att->atttypid != FLOAT8OID && att->atttypid != FLOAT4OID &&
			att->atttypid != INT2OID && att->atttypid != INT4OID &&
			att->atttypid != INT8OID && att->atttypid != NUMERICOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("weight column \"%s\" of a bfile must be of a numeric type, not %s",
							NameStr(att->attname), format_type_be(att->atttypid))));
	}
	else if (p->weight_attnum != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a weight column needs mode weighted or weighted_decayed")));
	if (p->time_attnum != 0)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		Form_pg_attribute att;

		if (p->time_attnum < 0 || p->time_attnum > desc->natts ||
			TupleDescAttr(desc, p->time_attnum - 1)->attisdropped)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the time column of a bfile must be one of its columns")));
		att = TupleDescAttr(desc, p->time_attnum - 1);
		if (!bfile_time_type_ok(att->atttypid))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("time column \"%s\" of a bfile must be a timestamp, timestamptz, date or integer, not %s",
							NameStr(att->attname), format_type_be(att->atttypid))));
	}
}

/* The attnum of column name in rel; an error if there is none. */
int32
bfile_column_attnum(Relation rel, const char *name)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return i + 1;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" of bfile \"%s\" does not exist", name,
					RelationGetRelationName(rel))));
	return 0;					/* keep compiler quiet */
}

static void
bfile_state_defaults(Relation rel, void *stp)
{
	BfileState *st = (BfileState *) stp;
	BfileParams *p = &st->params;

	ss_check_settings(bfile_settings);
	memset(st, 0, sizeof(*st));
	if (!bfile_parse_sample_size(ss_bfile_sample_size, p))
		bfile_sample_size_error(ss_bfile_sample_size);
	p->alpha = ss_bfile_min_fraction;
	p->nbuckets = (uint32) ss_bfile_buckets;
	p->unroll_every = bfile_unroll_every(p->alpha, p->nbuckets);
	p->mode = (uint32) ss_bfile_mode;
	p->seed = bfile_new_seed();
	if (BFILE_MODE_WEIGHTED(p->mode) && ss_bfile_weight_column && ss_bfile_weight_column[0])
		p->weight_attnum = bfile_column_attnum(rel, ss_bfile_weight_column);
	if (ss_bfile_time_column && ss_bfile_time_column[0])
		p->time_attnum = bfile_column_attnum(rel, ss_bfile_time_column);
	bfile_check_params(rel, p);
}

/* ---- the label ---- */

static const char *const bfile_label_keys[] = {
	"sample_size", "min_fraction", "buckets", "mode", "weight_attnum", "seed",
	"time_attnum"
};
#define BFILE_LABEL_NKEYS lengthof(bfile_label_keys)

static char *
bfile_params_to_label(const void *stp)
{
	const BfileParams *p = &((const BfileState *) stp)->params;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "sample_size=%s", bfile_sample_size_text(p));
	ss_label_append_float(&buf, "min_fraction", p->alpha);
	appendStringInfo(&buf, " buckets=%u mode=%s weight_attnum=%d seed=%u time_attnum=%d",
					 p->nbuckets, bfile_mode_name(p->mode), p->weight_attnum,
					 p->seed, p->time_attnum);
	return buf.data;
}

static void
bfile_params_from_label(Relation rel, const char *label, void *stp)
{
	BfileState *st = (BfileState *) stp;
	BfileParams *p = &st->params;
	char	   *v[BFILE_LABEL_NKEYS];

	ss_label_split(label, BFILE_LABEL_NKEYS, bfile_label_keys, v);
	memset(st, 0, sizeof(*st));
	if (v[0] == NULL || !bfile_parse_sample_size(v[0], p))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid bfile sample_size in the label")));
	p->alpha = ss_label_float("min_fraction", v[1]);
	p->nbuckets = (uint32) ss_label_int("buckets", v[2], 1, BFILE_MAX_BUCKETS);
	p->mode = (uint32) bfile_mode_from_name(v[3]);
	p->weight_attnum = (int32) ss_label_int("weight_attnum", v[4], 0, MaxAttrNumber);
	p->seed = (uint32) ss_label_int("seed", v[5], 0, PG_UINT32_MAX);
	p->time_attnum = (int32) ss_label_int("time_attnum", v[6], 0, MaxAttrNumber);
	if (!(p->alpha > 0.0 && p->alpha < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid bfile min_fraction in the label")));
	p->unroll_every = bfile_unroll_every(p->alpha, p->nbuckets);
	bfile_check_params(rel, p);
}

/* ---- state ops ---- */

static void
bfile_state_columns(Relation rel, void *st)
{
	if (RelationGetDescr(rel)->natts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("a bfile table needs at least one column")));
}

static void
check_bucket(const BfileBucket *b, BlockNumber end, const char *what)
{
	if ((b->head == InvalidBlockNumber) != (b->pages == 0) ||
		(b->head != InvalidBlockNumber &&
		 (b->head == SS_METAPAGE_BLKNO || b->head >= end)) ||
		b->items < 0 || b->head_items > b->items ||
		b->pages > end || b->level < 0 || b->level > BFILE_MAX_LEVEL)
		elog(ERROR, "the %s is out of range", what);
}

static void
bfile_check_meta(Relation rel, const void *metap)
{
	const BfileMeta *m = (const BfileMeta *) metap;
	const BfileParams *p = &m->params;
	BlockNumber end = m->hdr.log.alloc_end;
	int64		items = 0;

	if (p->seed != m->hdr.seed)
		elog(ERROR, "the parameters' seed %u differs from the header's %u",
			 p->seed, m->hdr.seed);
	if (p->sample_size < 2 || p->sample_size > BFILE_MAX_SAMPLE ||
		p->sample_bytes < 0 ||
		(p->sample_bytes > 0 && p->sample_size != BFILE_MAX_SAMPLE) ||
		!(p->alpha > 0.0 && p->alpha < 1.0) ||
		p->nbuckets < 1 || p->nbuckets > BFILE_MAX_BUCKETS ||
		p->unroll_every != bfile_unroll_every(p->alpha, p->nbuckets) ||
		p->mode > BFILE_WEIGHTED_DECAYED ||
		(BFILE_MODE_WEIGHTED(p->mode) != (p->weight_attnum > 0)) ||
		p->weight_attnum < 0 || p->weight_attnum > MaxAttrNumber ||
		p->time_attnum < 0 || p->time_attnum > MaxAttrNumber)
		elog(ERROR, "a parameter is out of range");
	if (m->level < 1 || m->tail_level < m->level ||
		m->tail_level > BFILE_MAX_LEVEL ||
		m->nbuckets_live != (uint32) (m->tail_level - m->level) ||
		m->nbuckets_live > p->nbuckets ||
		m->discards_since_unroll > p->nbuckets ||
		m->size < 0 || m->size >= p->sample_size || m->seen < m->size ||
		(p->sample_bytes > 0 && (int64) m->data_bytes >= p->sample_bytes) ||
		m->added < m->size || m->added > m->seen ||
		m->nfree > BFILE_MAX_FREE ||
		m->nspare > BFILE_MAX_SPARE)
		elog(ERROR, "the sample's levels, sizes or counters are out of range");
	for (uint32 i = 0; i < m->nspare; i++)
		if (m->spare[i].count == 0 || m->spare[i].count > BFILE_MAX_RUN ||
			m->spare[i].start == SS_METAPAGE_BLKNO ||
			(uint64) m->spare[i].start + m->spare[i].count > end)
			elog(ERROR, "spare run %u is out of range", i);
	for (uint32 i = 0; i < m->nbuckets_live; i++)
	{
		check_bucket(&m->buckets[i], end, "bucket");
		if (m->buckets[i].level != m->level + (int32) i)
			elog(ERROR, "bucket %u has level %d", i, m->buckets[i].level);
		items += m->buckets[i].items;
	}
	check_bucket(&m->tail, end, "tail");
	if (m->tail.level != m->tail_level)
		elog(ERROR, "the tail's level is out of range");
	items += m->tail.items;
	if (items != m->size)
		elog(ERROR, "the buckets hold " INT64_FORMAT " items, the sample " INT64_FORMAT,
			 items, m->size);
	for (uint32 i = 0; i < m->nfree; i++)
	{
		const BfileFreeChain *f = &m->free_chains[i];

		if (f->head == SS_METAPAGE_BLKNO || f->head >= end || f->pages == 0 ||
			f->pages > end)
			elog(ERROR, "free chain %u is out of range", i);
	}
}

static void
bfile_params_from_meta(const void *metap, void *stp)
{
	((BfileState *) stp)->params = ((const BfileMeta *) metap)->params;
}

static void
bfile_init_meta(const void *stp, void *metap)
{
	const BfileState *st = (const BfileState *) stp;
	BfileMeta  *m = (BfileMeta *) metap;

	memset(m, 0, sizeof(*m));
	ss_meta_header_init(&m->hdr, SS_KIND_BFILE, st->params.seed, 1);
	m->params = st->params;
	m->level = 1;				/* (the paper's 0 is an erratum: docs/bfile.md) */
	m->tail_level = 1 + (int32) st->params.nbuckets;
	m->nbuckets_live = st->params.nbuckets;
	for (uint32 i = 0; i < st->params.nbuckets; i++)
	{
		m->buckets[i].head = InvalidBlockNumber;
		m->buckets[i].level = 1 + (int32) i;
	}
	m->tail.head = InvalidBlockNumber;
	m->tail.level = m->tail_level;
}

static bool bfile_consolidate(SSConsolidation *c);

static const uint16 bfile_page_types[] = {SS_PAGE_BFILE};

const SSStructure bfile_structure = {
	.name = "bfile",
	.amname = "bfile",
	.constructor = "bfile_create()",
	.page_types = bfile_page_types,
	.npage_types = lengthof(bfile_page_types),
	.init = bfile_init,
	.kind = SS_KIND_BFILE,
	.state_size = sizeof(BfileState),
	.meta_size = sizeof(BfileMeta),
	.consolidate = bfile_consolidate,
	.check_columns = bfile_state_columns,
	.check_meta = bfile_check_meta,
	.params_from_meta = bfile_params_from_meta,
	.init_meta = bfile_init_meta,
	.default_params = bfile_state_defaults,
	.params_to_label = bfile_params_to_label,
	.params_from_label = bfile_params_from_label,
};

BfileState *
bfile_get_state(Relation rel)
{
	return (BfileState *) ss_get_state(rel, &bfile_structure);
}

/* ---- INSERT ---- */

/* A row's weight as a float8 (weighted modes): positive and finite. */
static double
row_weight(Relation rel, TupleTableSlot *slot, int32 attnum)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	Datum		d = slot->tts_values[attnum - 1];
	double		w = 0;

	if (slot->tts_isnull[attnum - 1])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("weight column \"%s\" of bfile \"%s\" must not be NULL",
						NameStr(att->attname), RelationGetRelationName(rel))));
	switch (att->atttypid)
	{
		case FLOAT8OID:
			w = DatumGetFloat8(d);
			break;
		case FLOAT4OID:
			w = DatumGetFloat4(d);
			break;
		case INT2OID:
			w = DatumGetInt16(d);
			break;
		case INT4OID:
			w = DatumGetInt32(d);
			break;
		case INT8OID:
			w = (double) DatumGetInt64(d);
			break;
		case NUMERICOID:
			w = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, d));
			break;
	}
	if (!(w > 0) || isinf(w))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("weight %g of a row of bfile \"%s\" is not a positive finite number",
						w, RelationGetRelationName(rel))));
	return w;
}

/* t_len of heap_form_minimal_tuple(desc, values, isnull), without forming it */
static Size
minimal_tuple_len(TupleDesc desc, Datum *values, bool *isnull)
{
	Size		hoff = SizeofMinimalTupleHeader;

	for (int i = 0; i < desc->natts; i++)
		if (isnull[i])
		{
			hoff += BITMAPLEN(desc->natts);
			break;
		}
	return MAXALIGN(hoff) + heap_compute_data_size(desc, values, isnull);
}

/* A uniform number in (0, 1]: a draw of the insert (docs/bfile.md). */
static double
insert_draw(void)
{
	return 1.0 - pg_prng_double(ss_test_bfile_coins != 0 ?
								&test_coins : &pg_global_prng_state);
}

/*
 * L as the metapage showed it at this statement's first row (and every
 * 2^16 rows): a lower bound of L when the round meets the row, because L
 * never falls while the relation keeps its file (TRUNCATE gives a new one,
 * and a new state).  Read without running a round: the writer's statement
 * does that in ss_pending_add when the log is long.
 */
static int32
level_floor(Relation rel, BfileState *st)
{
	LocalTransactionId lxid = MyProc->lxid;
	CommandId	cid = GetCurrentCommandId(false);

	if (st->floor_lxid != lxid || st->floor_cid != cid ||
		++st->floor_rows >= 65536)
	{
		BfileMeta  *meta = palloc(sizeof(BfileMeta));

		st->level_floor = 1;
		if (ss_read_structure_meta(rel, &bfile_structure, meta))
			st->level_floor = Max(meta->level, 1);
		pfree(meta);
		st->floor_lxid = lxid;
		st->floor_cid = cid;
		st->floor_rows = 0;
	}
	return st->level_floor;
}

/*
 * Draw what the insert knows of the item's level (docs/bfile.md, "Levels
 * at the insert"): the weight's part (weighted modes), and whether the
 * level can reach L at all; false drops the item.  The level is offset + g
 * with g geometric, P(g >= k) = alpha^(k-1); an item whose g would have to
 * be at least need > 1 is kept with that probability, and the round draws
 * g given g >= need (memoryless: need - 1 plus a fresh geometric draw).
 * Decayed modes keep every item: its level grows with L at its arrival.
 */
static bool
draw_level(Relation rel, BfileState *st, BfileRecordHeader *rh)
{
	const BfileParams *p = &st->params;
	int32		need;

	rh->level_offset = 0;
	rh->min_draw = 1;
	if (BFILE_MODE_WEIGHTED(p->mode))
	{
		double		c = log(rh->weight) / -log(p->alpha);
		double		fl = floor(c);
		double		f = c - fl;
		double		q = (pow(p->alpha, -f) - 1.0) / (1.0 / p->alpha - 1.0);

		/* beyond every level: the round clamps the level anyway */
		fl = Max(Min(fl, (double) BFILE_MAX_LEVEL + 1), -(double) BFILE_MAX_LEVEL - 1);
		rh->level_offset = (int32) fl + (insert_draw() <= q ? 1 : 0);
	}
	if (BFILE_MODE_DECAYED(p->mode))
		return true;
	need = level_floor(rel, st) - rh->level_offset;
	if (need <= 1)
		return true;
	if (need != st->keep_need)
	{
		st->keep_need = need;
		st->keep_probability = pow(p->alpha, (double) (need - 1));
	}
	if (insert_draw() > st->keep_probability)
		return false;
	rh->min_draw = need;
	return true;
}

/*
 * Count an item dropped at the insert: in the skipped items of this
 * transaction's last record if that is the table's, else in a record of
 * its own (no row).
 */
static void
count_dropped(Relation rel)
{
	uint32		len;
	char	   *last = ss_pending_last_payload(rel, SS_PENDING_ITEM, &len);
	BfileRecordHeader rh;

	if (last != NULL && len >= sizeof(rh))
	{
		memcpy(&rh, last, sizeof(rh));
		rh.skipped++;
		memcpy(last, &rh, sizeof(rh));
		return;
	}
	memset(&rh, 0, sizeof(rh));
	rh.weight = 1.0;
	rh.min_draw = 1;
	rh.skipped = 1;
	ss_pending_add(rel, SS_PENDING_ITEM, &rh, sizeof(rh));
}

/*
 * A row is one stream item: its record is its weight (1 unless weighted),
 * the insert's part of its level, and the row as the sample stores it, a
 * minimal tuple with every value inline and uncompressed.  A row that
 * would not fit in a sample page is refused here, before its transaction
 * commits (also when its level drops it: the refusal must not depend on
 * luck).
 */
static void
bfile_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
				   int options, struct BulkInsertStateData *bistate)
{
	BfileState *st = bfile_get_state(rel);
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	MinimalTuple mt;
	StringInfoData rec;
	BfileRecordHeader rh;
	Size		tuplen;

	pgstat_count_heap_insert(rel, 1);
	slot_getallattrs(slot);
	slot->tts_tableOid = RelationGetRelid(rel);
	ItemPointerSetInvalid(&slot->tts_tid);
	memset(&rh, 0, sizeof(rh));
	rh.weight = 1.0;
	if (BFILE_MODE_WEIGHTED(st->params.mode))
		rh.weight = row_weight(rel, slot, st->params.weight_attnum);
	if (st->params.time_attnum > 0)
	{
		int			t = st->params.time_attnum - 1;

		if (slot->tts_isnull[t])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("time column \"%s\" of bfile \"%s\" must not be NULL",
							NameStr(TupleDescAttr(desc, t)->attname),
							RelationGetRelationName(rel))));
		rh.key = bfile_time_key(TupleDescAttr(desc, t)->atttypid, slot->tts_values[t]);
		rh.has_key = true;
	}

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		values[i] = slot->tts_values[i];
		if (!slot->tts_isnull[i] && att->attlen == -1 &&
			VARATT_IS_EXTENDED(DatumGetPointer(values[i])))
			values[i] = PointerGetDatum(detoast_attr((struct varlena *) DatumGetPointer(values[i])));
	}
	tuplen = minimal_tuple_len(desc, values, slot->tts_isnull);
	if (tuplen > BFILE_MAX_TUPLE)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("row of %zu bytes is too large for bfile \"%s\"",
						tuplen, RelationGetRelationName(rel)),
				 errdetail("A sampled row is stored whole in one page, values uncompressed: at most %zu bytes.",
						   (Size) BFILE_MAX_TUPLE)));
	if (!draw_level(rel, st, &rh))
	{
		count_dropped(rel);
		pfree(values);
		return;
	}
	rh.has_row = true;
	mt = heap_form_minimal_tuple(desc, values, slot->tts_isnull);
	Assert(mt->t_len == tuplen);
	initStringInfo(&rec);
	appendBinaryStringInfo(&rec, (const char *) &rh, sizeof(rh));
	appendBinaryStringInfo(&rec, (const char *) mt, mt->t_len);
	ss_pending_add(rel, SS_PENDING_ITEM, rec.data, (uint32) rec.len);
	pfree(rec.data);
	pfree(mt);
	pfree(values);
}

/* ---- consolidation ---- */

static bool
bfile_consolidate(SSConsolidation *c)
{
	Relation	rel = c->rel;
	BfileMeta  *meta = palloc(sizeof(BfileMeta));

	if (!ss_read_structure_meta(rel, &bfile_structure, meta))
		elog(ERROR, "bfile \"%s\" has a change log but no metapage",
			 RelationGetRelationName(rel));
	bfile_round(rel, meta, c);
	pfree(meta);
	return true;
}

/* ---- the handler and the settings ---- */

static TableAmRoutine bfile_routine;
static bool bfile_routine_ready = false;

Datum
bfile_handler(PG_FUNCTION_ARGS)
{
	if (!bfile_routine_ready)
	{
		MemSet(&bfile_routine, 0, sizeof(bfile_routine));
		ss_tableam_init_common(&bfile_routine, &bfile_structure);
		bfile_routine.tuple_insert = bfile_tuple_insert;
		bfile_scan_init(&bfile_routine);
		bfile_routine_ready = true;
	}
	PG_RETURN_POINTER(&bfile_routine);
}

/* every SET starts the sequence again, so that sessions repeat it */
static void
assign_test_bfile_coins(int newval, void *extra)
{
	pg_prng_seed(&test_coins, (uint64) newval);
}

SS_ASSIGN_HOOK(bfile_sample_size, const char *)

static bool
check_bfile_sample_size(char **newval, void **extra, GucSource source)
{
	BfileParams p;

	if (bfile_parse_sample_size(*newval, &p))
		return true;
	GUC_check_errdetail("Use 2 to " INT64_FORMAT " rows, or a size from 64kB to 1PB such as '10GB'.",
						(int64) BFILE_MAX_SAMPLE);
	return false;
}
SS_ASSIGN_HOOK(bfile_min_fraction, double)
SS_ASSIGN_HOOK(bfile_buckets, int)
SS_ASSIGN_HOOK(bfile_mode, int)
SS_ASSIGN_HOOK(bfile_weight_column, const char *)
SS_ASSIGN_HOOK(bfile_time_column, const char *)

void
bfile_init(void)
{
	DefineCustomStringVariable("streamsketch.bfile_sample_size",
							   "Largest sample of a new bfile: rows, or a size such as '10GB'.",
							   NULL,
							   &ss_bfile_sample_size, "1000000",
							   PGC_USERSET, 0, check_bfile_sample_size,
							   assign_bfile_sample_size, NULL);
	DefineCustomRealVariable("streamsketch.bfile_min_fraction",
							 "Smallest sample of a new bfile over its largest (alpha = s_min / s_max).",
							 "Right after a discard the sample holds this fraction of the largest size, in expectation.",
							 &ss_bfile_min_fraction, 0.8, 0.01, 0.99,
							 PGC_USERSET, 0, NULL, assign_bfile_min_fraction, NULL);
	DefineCustomIntVariable("streamsketch.bfile_buckets",
							"Individual buckets of a new bfile (N); higher levels share the tail.",
							NULL,
							&ss_bfile_buckets, 16, 1, BFILE_MAX_BUCKETS,
							PGC_USERSET, 0, NULL, assign_bfile_buckets, NULL);
	DefineCustomEnumVariable("streamsketch.bfile_mode",
							 "Sampling mode of a new bfile.",
							 NULL,
							 &ss_bfile_mode, BFILE_UNIFORM, bfile_mode_options,
							 PGC_USERSET, 0, NULL, assign_bfile_mode, NULL);
	DefineCustomStringVariable("streamsketch.bfile_weight_column",
							   "Weight column of a new weighted bfile.",
							   NULL,
							   &ss_bfile_weight_column, "",
							   PGC_USERSET, 0, NULL, assign_bfile_weight_column, NULL);
	DefineCustomStringVariable("streamsketch.bfile_time_column",
							   "Time column of a new bfile (empty: arrival order).",
							   NULL,
							   &ss_bfile_time_column, "",
							   PGC_USERSET, 0, NULL, assign_bfile_time_column, NULL);
	DefineCustomIntVariable("streamsketch.test_bfile_seed",
							"Seed of the levels of a new bfile (for tests: 0 is the default seed).",
							NULL,
							&ss_test_bfile_seed, 0, 0, INT_MAX,
							PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("streamsketch.test_bfile_coins",
							"Seeds the draws of this session's bfile inserts (for tests only: 0 draws at random).",
							NULL,
							&ss_test_bfile_coins, 0, 0, INT_MAX,
							PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, assign_test_bfile_coins, NULL);
	DefineCustomEnumVariable("streamsketch.test_bfile_crash",
							 "Stops the server at a point of a bfile's rounds (for tests only).",
							 NULL,
							 &ss_test_bfile_crash, BFILE_CRASH_NONE, bfile_crash_options,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	ss_params_note_placeholders("streamsketch.bfile_");
}
