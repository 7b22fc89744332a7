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
#include "streamsketch.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/date.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(bfile_handler);

/*
 * The settings of new bfile tables' columns (streamsketch.bfile_*_column),
 * and the test-only settings.  The other parameters' settings come from
 * bfile_params.
 */
char	   *ss_bfile_weight_column = NULL;
char	   *ss_bfile_time_column = NULL;
int			ss_test_bfile_seed = 0;
int			ss_test_bfile_coins = 0;

/* the inserts' draws while streamsketch.test_bfile_coins is set */
static pg_prng_state test_coins;

/* the names of the BfileCrashPoints, by number */
static const char *const bfile_crash_points[] = {
	"none", "discarded", "unrolled", "installed", NULL
};

SSTestCrash bfile_crash = {
	.setting = "streamsketch.test_bfile_crash",
	.short_desc = "Stops the server at a point of a bfile's rounds (for tests only).",
	.during = "a round",
	.points = bfile_crash_points,
};

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

#define BFILE_MIN_BYTES		(INT64CONST(64) * 1024)
#define BFILE_MAX_BYTES		(INT64CONST(1) << 50)
#define BFILE_SAMPLE_SIZE_HINT \
	"Use 2 to " INT64_FORMAT " rows, or a size from 64kB to 1PB such as '10GB'."

/*
 * s_max as given: a number of rows ("1000000") or a size with a unit
 * ("10GB", as for memory settings); false if it is neither, or out of
 * range.  Bytes count the items as stored (rows with their headers).
 */
static bool
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
static char *
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

/* The seed of a new bfile: streamsketch.test_bfile_seed in tests. */
static uint32
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

/* Refuse a weight column name of type typid if it is not numeric. */
void
bfile_check_weight_type(const char *name, Oid typid)
{
	if (typid != FLOAT8OID && typid != FLOAT4OID && typid != INT2OID &&
		typid != INT4OID && typid != INT8OID && typid != NUMERICOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("weight column \"%s\" of a bfile must be of a numeric type, not %s",
						name, format_type_be(typid))));
}

/* Refuse a time column name of type typid if items cannot be ordered by it. */
void
bfile_check_time_type(const char *name, Oid typid)
{
	if (typid != TIMESTAMPTZOID && typid != TIMESTAMPOID &&
		typid != DATEOID && typid != INT2OID && typid != INT4OID &&
		typid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("time column \"%s\" of a bfile must be a timestamp, timestamptz, date or integer, not %s",
						name, format_type_be(typid))));
}

/*
 * A time column's value as the int64 key items are ordered by: each of
 * the types bfile_check_time_type accepts is stored as an integer in time
 * order.
 */
int64
bfile_time_key(Oid typid, Datum d)
{
	return ss_int_datum(typid, d);
}

/* The attnum of column name in rel; an error if there is none. */
static int32
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

/*
 * rel's weight and time columns: weight_attnum must name a column of a
 * numeric type in a weighted mode, and no column otherwise.
 */
static void
check_columns(Relation rel, const BfileParams *p)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (BFILE_MODE_WEIGHTED(p->mode))
	{
		if (p->weight_attnum < 1 || p->weight_attnum > desc->natts ||
			TupleDescAttr(desc, p->weight_attnum - 1)->attisdropped)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a weighted bfile needs a weight column"),
					 errhint("Name it with weight_column, or streamsketch.bfile_weight_column.")));
		bfile_check_weight_type(NameStr(TupleDescAttr(desc, p->weight_attnum - 1)->attname),
								TupleDescAttr(desc, p->weight_attnum - 1)->atttypid);
	}
	else if (p->weight_attnum != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a weight column needs mode weighted or weighted_decayed")));
	if (p->time_attnum != 0)
	{
		if (p->time_attnum > desc->natts ||
			TupleDescAttr(desc, p->time_attnum - 1)->attisdropped)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the time column of a bfile must be one of its columns")));
		bfile_check_time_type(NameStr(TupleDescAttr(desc, p->time_attnum - 1)->attname),
							  TupleDescAttr(desc, p->time_attnum - 1)->atttypid);
	}
}

/*
 * What the parameter table cannot say: min_fraction is strictly between 0
 * and 1 (a range the table, inclusive, cannot express), u follows from it
 * and N, and the columns fit.  From the settings, the seed is
 * streamsketch.test_bfile_seed's (a test-only setting), and the weight and
 * time columns are named by streamsketch.bfile_weight_column and
 * bfile_time_column: names, while the label keeps attnums, so those two
 * settings are defined in bfile_init and resolved here against rel (a
 * constructor, without a relation yet, resolves them against its column
 * list).
 */
static void
bfile_check_params(Relation rel, void *stp, SSParamSource source)
{
	BfileParams *p = &((BfileState *) stp)->params;

	if (!(p->alpha > 0.0 && p->alpha < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bfile min_fraction %g is out of range", p->alpha),
				 errhint("Use a fraction strictly between 0 and 1: the smallest sample size over the largest.")));
	p->unroll_every = bfile_unroll_every(p->alpha, p->nbuckets);
	if (source == SS_PARAMS_SETTINGS)
	{
		ss_check_setting("streamsketch.bfile_weight_column");
		ss_check_setting("streamsketch.bfile_time_column");
		p->seed = bfile_new_seed();
		if (rel != NULL && BFILE_MODE_WEIGHTED(p->mode) &&
			ss_bfile_weight_column && ss_bfile_weight_column[0])
			p->weight_attnum = bfile_column_attnum(rel, ss_bfile_weight_column);
		if (rel != NULL && ss_bfile_time_column && ss_bfile_time_column[0])
			p->time_attnum = bfile_column_attnum(rel, ss_bfile_time_column);
	}
	if (rel != NULL)
		check_columns(rel, p);
}

/* s_max as a label and a constructor's text give it */
static char *
sample_size_to_text(const void *stp)
{
	return bfile_sample_size_text(&((const BfileState *) stp)->params);
}

static void
sample_size_from_text(const char *value, void *stp)
{
	if (!bfile_parse_sample_size(value, &((BfileState *) stp)->params))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for bfile parameter \"sample_size\": \"%s\"",
						value),
				 errhint(BFILE_SAMPLE_SIZE_HINT, (int64) BFILE_MAX_SAMPLE)));
}

static bool
check_bfile_sample_size(char **newval, void **extra, GucSource source)
{
	BfileParams p;

	if (bfile_parse_sample_size(*newval, &p))
		return true;
	GUC_check_errdetail(BFILE_SAMPLE_SIZE_HINT, (int64) BFILE_MAX_SAMPLE);
	return false;
}

/*
 * The parameters, in label order.  s_max is text: a number of rows or a
 * size with a unit, in the two fields sample_size and sample_bytes.  The
 * uint32 buckets is read as signed (its range fits): a negative argument
 * is then reported as itself.  The seed comes from a test-only setting
 * (bfile_check_params).
 */
static const SSParam bfile_params[] = {
	{.name = "sample_size", .argument = "sample_size", .type = SS_PARAM_TEXT,
		.to_text = sample_size_to_text, .from_text = sample_size_from_text,
		.setting = "bfile_sample_size",
		.short_desc = "Largest sample of a new bfile: rows, or a size such as '10GB'.",
	.boot_text = "1000000", .check_text = check_bfile_sample_size},
	{.name = "min_fraction", .argument = "min_fraction", .type = SS_PARAM_REAL,
		SS_FIELD(BfileState, params.alpha),
		.setting = "bfile_min_fraction",
		.short_desc = "Smallest sample of a new bfile over its largest (alpha = s_min / s_max).",
		.long_desc = "Right after a discard the sample holds this fraction of the largest size, in expectation.",
	.setting_min = 0.01, .setting_max = 0.99, .boot = 0.8},
	{.name = "buckets", .argument = "buckets", .type = SS_PARAM_INT,
		SS_FIELD(BfileState, params.nbuckets), .is_signed = true,
		.min = 1, .max = BFILE_MAX_BUCKETS,
		.setting = "bfile_buckets",
		.short_desc = "Individual buckets of a new bfile (N); higher levels share the tail.",
	.boot = 16},
	{.name = "mode", .argument = "mode", .type = SS_PARAM_ENUM, SS_FIELD(BfileState, params.mode),
		.options = bfile_mode_options,
		.setting = "bfile_mode",
		.short_desc = "Sampling mode of a new bfile.",
	.boot = BFILE_UNIFORM},
	{.name = "weight_attnum", .type = SS_PARAM_INT,
		SS_FIELD(BfileState, params.weight_attnum), .is_signed = true,
	.min = 0, .max = MaxAttrNumber},
	{.name = "seed", .type = SS_PARAM_INT, SS_FIELD(BfileState, params.seed),
		.min = 0, .max = PG_UINT32_MAX, .boot = SS_DEFAULT_SEED,
	.internal = true, .derived = true},
	{.name = "time_attnum", .type = SS_PARAM_INT,
		SS_FIELD(BfileState, params.time_attnum), .is_signed = true,
	.min = 0, .max = MaxAttrNumber},
};

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

/* The planner's row estimate: the rows in the sample. */
static double
bfile_estimate_rows(const void *metap)
{
	return (double) ((const BfileMeta *) metap)->size;
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

/* ss_meta_init's contents, with N empty buckets and an empty tail */
static void
bfile_init_meta(const void *stp, void *metap)
{
	const BfileState *st = (const BfileState *) stp;
	BfileMeta  *m = (BfileMeta *) metap;

	ss_meta_init(&bfile_structure, st, m);
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

static void bfile_tuple_insert(Relation rel, TupleTableSlot *slot,
				CommandId cid, int options,
				struct BulkInsertStateData *bistate);

static const uint16 bfile_page_types[] = {SS_PAGE_BFILE};

const SSStructure bfile_structure = {
	.name = "bfile",
	.amname = "bfile",
	.constructor = "bfile_create()",
	SS_PAGE_TYPES(bfile_page_types),
	.init = bfile_init,
	.kind = SS_KIND_BFILE,
	SS_LAYOUT(BfileState, params, BfileMeta, params),
	.consolidate = bfile_consolidate,
	.check_columns = bfile_state_columns,
	.check_meta = bfile_check_meta,
	.estimate_rows = bfile_estimate_rows,
	.init_meta = bfile_init_meta,
	SS_PARAMS(bfile_params),
	.check_params = bfile_check_params,
	.scan = &bfile_scan_ops,
	.paths = &bfile_path_ops,
	.tuple_insert = bfile_tuple_insert,
};

BfileState *
bfile_get_state(Relation rel)
{
	return (BfileState *) ss_get_state(rel, &bfile_structure);
}

/* ---- INSERT ---- */

/*
 * Value d of a weight column of type typid (bfile_check_weight_type's
 * types) as a float8; 0 for another type.
 */
double
bfile_weight_value(Oid typid, Datum d)
{
	double		w = 0;

	switch (typid)
	{
		case FLOAT8OID:
			w = DatumGetFloat8(d);
			break;
		case FLOAT4OID:
			w = DatumGetFloat4(d);
			break;
		case INT2OID:
		case INT4OID:
		case INT8OID:
			w = (double) ss_int_datum(typid, d);
			break;
		case NUMERICOID:
			w = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, d));
			break;
	}
	return w;
}

/* A row's weight as a float8 (weighted modes): positive and finite. */
static double
row_weight(Relation rel, TupleTableSlot *slot, int32 attnum)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	double		w;

	if (slot->tts_isnull[attnum - 1])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("weight column \"%s\" of bfile \"%s\" must not be NULL",
						NameStr(att->attname), RelationGetRelationName(rel))));
	w = bfile_weight_value(att->atttypid, slot->tts_values[attnum - 1]);
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


Datum
bfile_handler(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(ss_tableam_routine(&bfile_structure));
}

/* every SET starts the sequence again, so that sessions repeat it */
static void
assign_test_bfile_coins(int newval, void *extra)
{
	pg_prng_seed(&test_coins, (uint64) newval);
}

SS_ASSIGN_HOOK(bfile_weight_column, const char *)
SS_ASSIGN_HOOK(bfile_time_column, const char *)

/* Called by _PG_init after the settings of bfile_params are defined. */
void
bfile_init(void)
{
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
	ss_test_define_int("streamsketch.test_bfile_seed",
					   "Seed of the levels of a new bfile (for tests: 0 is the default seed).",
					   NULL, &ss_test_bfile_seed, 0, 0, INT_MAX, NULL);
	ss_test_define_int("streamsketch.test_bfile_coins",
					   "Seeds the draws of this session's bfile inserts (for tests only: 0 draws at random).",
					   NULL, &ss_test_bfile_coins, 0, 0, INT_MAX,
					   assign_test_bfile_coins);
	ss_test_crash_define(&bfile_crash);
}
