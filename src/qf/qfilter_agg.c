/*-------------------------------------------------------------------------
 *
 * qfilter_agg.c
 *	  Aggregates building `qfilter` values, and the SQL functions on them:
 *	  qfilter_contains, qfilter_count, qfilter_remove, qfilter_union and
 *	  qfilter_resize.
 *
 * qfilter_agg(key, [count,] capacity, fp_rate) and qfilter_union_agg(qfilter)
 * share one transition state: a QFilterAggState in the aggregate memory
 * context with a magic word, the filter (a valid varlena, replaced by a
 * larger one when it grows) and its area geometry.  Serialization copies
 * the filter's bytes behind a magic word of its own.  Both aggregates return NULL when no row contributed (zero rows,
 * or only NULL keys, counts or filters), like sum().
 *
 * When a key does not fit (its area is full), or the filter holds more than
 * 95% of its home slots in distinct fingerprints, the aggregate grows the
 * filter (qfilter_grow: twice the home slots, one remainder bit fewer), so
 * capacity is a sizing hint, not a limit; see qfilter.c for why the result
 * is still canonical.
 *
 * Keys are hashed with ss_hash_datum() and the filter's seed over their
 * binary form, exactly like the paged quotient filters.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/detoast.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "qfilter.h"
#include "ss_aggutil.h"
#include "ss_sqlfunc.h"

PG_FUNCTION_INFO_V1(qfilter_agg_trans);
PG_FUNCTION_INFO_V1(qfilter_agg_trans_counted);
PG_FUNCTION_INFO_V1(qfilter_contains);
PG_FUNCTION_INFO_V1(qfilter_count);
PG_FUNCTION_INFO_V1(qfilter_remove);
PG_FUNCTION_INFO_V1(qfilter_union);
PG_FUNCTION_INFO_V1(qfilter_resize);

/*
 * The transition state starts with a magic word that every support
 * function checks (ss_agg_state_arg).
 */
#define QFILTER_AGG_STATE_MAGIC		0x46514641	/* "AFQF" */

/*
 * The serialized state (bytea): this magic word, then the filter's bytes
 * after its varlena header (ss_agg_serial_varlena).
 */
#define QFILTER_AGG_SERIAL_MAGIC	0x46514653	/* "SFQF" */

typedef struct QFilterAggState
{
	uint32		magic;			/* QFILTER_AGG_STATE_MAGIC */
	QFilterData *qf;			/* in the aggregate context */
	QfGeom		g;				/* geometry of its areas */
	uint64		items;			/* its distinct fingerprints */
	double		max_items;		/* past which it grows (qfilter_max_items) */
} QFilterAggState;

/*
 * Per call site cache (fn_extra): how to hash keys of the current type,
 * and for the lookup functions the last filter argument that needed
 * detoasting, detoasted once instead of once per row (see
 * qfilter_lookup_arg).
 */
typedef enum QFilterCacheKind
{
	QFC_NONE,
	QFC_TOAST,					/* out of line: keyed by its TOAST pointer */
	QFC_INLINE					/* compressed in line: keyed by its bytes */
} QFilterCacheKind;

typedef struct QFilterCallCache
{
	SSKeyType	key;			/* how to hash keys */
	QFilterCacheKind kind;		/* what qf is cached for */
	Oid			toastrelid;		/* QFC_TOAST: the value's TOAST pointer */
	Oid			valueid;
	struct varlena *raw;		/* QFC_INLINE: the compressed bytes */
	QFilterData *qf;			/* detoasted copy in fn_mcxt, or NULL */
	QfGeom		g;				/* its geometry */
	QfGeom		g_plain;		/* geometry of the last uncached value */
} QFilterCallCache;

static QFilterCallCache *
qfilter_call_cache(FunctionCallInfo fcinfo)
{
	QFilterCallCache *c = (QFilterCallCache *) fcinfo->flinfo->fn_extra;

	if (c == NULL)
	{
		c = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
								   sizeof(QFilterCallCache));
		fcinfo->flinfo->fn_extra = c;
	}
	return c;
}

/* What names the filter in messages about keys. */
#define QFILTER_KEY_WHAT	"quotient filter"

/* How to hash keys of typid, set up once per call site and key type. */
static SSKeyType *
qfilter_key_info(FunctionCallInfo fcinfo, Oid typid)
{
	QFilterCallCache *c = qfilter_call_cache(fcinfo);

	ss_key_type_set(&c->key, typid, QFILTER_KEY_WHAT);
	return &c->key;
}

/* A new state in cxt adopting qf (which must live in cxt). */
static void *
qfilter_state_new(MemoryContext cxt, struct varlena *value)
{
	QFilterAggState *state = MemoryContextAlloc(cxt, sizeof(QFilterAggState));
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	QFilterData *qf = qfilter_current(value);

	MemoryContextSwitchTo(oldcxt);

	state->magic = QFILTER_AGG_STATE_MAGIC;
	state->qf = qf;
	qfilter_geom(qf, &state->g);
	state->items = qfilter_items(qf);
	state->max_items = qfilter_max_items(qf);
	return state;
}

/* Replace the state's filter by next (in the aggregate context). */
static void
qfilter_state_replace(QFilterAggState *state, QFilterData *next)
{
	if (next != state->qf)
	{
		pfree(state->qf);
		state->qf = next;
		qfilter_geom(next, &state->g);
		state->items = qfilter_items(next);
		state->max_items = qfilter_max_items(next);
	}
}

/* Grow the state's filter to the next size that fits its contents. */
static void
qfilter_state_grow(QFilterAggState *state, MemoryContext aggcontext)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(aggcontext);
	QFilterData *grown = qfilter_grow(state->qf, 1);

	MemoryContextSwitchTo(oldcxt);
	qfilter_state_replace(state, grown);
}

/*
 * Add count copies of a key hash to a state, growing its filter when the
 * key's area has no room, and after adding a new fingerprint when the
 * filter is above its maximum load.
 */
static void
qfilter_state_insert(QFilterAggState *state, MemoryContext aggcontext,
					 uint64 h1, uint64 count)
{
	bool		added;

	while (qfilter_insert_hash(state->qf, &state->g, h1, count,
							   &added) == QF_FULL)
		qfilter_state_grow(state, aggcontext);
	if (added)
	{
		state->items++;
		if ((double) state->items > state->max_items)
			qfilter_state_grow(state, aggcontext);
	}
}

static void
qfilter_agg_check(const struct varlena *value, bool full)
{
	/* a value of an earlier version is checked as it is converted */
	const QFilterData *qf = qfilter_current(unconstify(struct varlena *, value));

	if (full)
		qfilter_check(qf);
	else
		qfilter_check_header(qf);
}

/* The union replaces the state's filter (it may need a larger one). */
static void
qfilter_state_union(void *statep, MemoryContext aggcontext,
					const struct varlena *value)
{
	QFilterAggState *state = (QFilterAggState *) statep;
	MemoryContext oldcxt = MemoryContextSwitchTo(aggcontext);

	qfilter_state_replace(state,
						  qfilter_union_values(state->qf,
											   qfilter_current(unconstify(struct varlena *, value))));
	MemoryContextSwitchTo(oldcxt);
}

static const SSValueAgg qfilter_agg = {
	.state_magic = QFILTER_AGG_STATE_MAGIC,
	.serial_magic = QFILTER_AGG_SERIAL_MAGIC,
	.value_offset = offsetof(QFilterAggState, qf),
	.min_size = QFILTER_HEADER_SIZE,
	.what = "quotient filter",
	.hint = "Use only the qfilter_agg support functions (qfilter_agg_trans, qfilter_agg_trans_counted, qfilter_union_agg_trans, qfilter_agg_combine, qfilter_agg_serial, qfilter_agg_deserial, qfilter_agg_final) together.",
	.aggname = "qfilter_agg",
	.trans_fname = {"qfilter_agg_trans", "qfilter_agg_trans_counted"},
	.count_noun = "count",
	.count_detail = "A row adds count copies of its key; use qfilter_remove() to take copies away.",
	.params_null = "capacity and fp_rate of qfilter_agg must not be NULL",
	.check = qfilter_agg_check,
	.state_new = qfilter_state_new,
	.merge = qfilter_state_union,
};

/* qfilter_union_agg(qfilter) and the support functions both share */
SS_VALUE_AGG_FUNCTIONS(qfilter, qfilter_agg);

/*
 * Transition of qfilter_agg(key, capacity, fp_rate) and, with one argument
 * more, qfilter_agg(key, count, capacity, fp_rate) (the C function
 * qfilter_agg_trans_counted).
 *
 * A row with a NULL key or a NULL count is no stream item and is skipped
 * without looking at the other arguments.  capacity and fp_rate must not
 * be NULL and must be the same on every row: they fix the filter's
 * fingerprint size.  A count of 0 adds nothing, but the row still counts
 * as input, so the result is an empty filter rather than NULL.
 */
Datum
qfilter_agg_trans(PG_FUNCTION_ARGS)
{
	SSKeyAggRow row;
	QFilterAggState *state;
	int64		capacity;
	double		fp_rate;
	Oid			keytype;
	SSKeyType  *ki;

	if (!ss_key_agg_row(fcinfo, &qfilter_agg, &row))
		return ss_agg_keep_state(fcinfo, row.state);
	state = row.state;
	capacity = PG_GETARG_INT64(row.paramarg);
	fp_rate = PG_GETARG_FLOAT8(row.paramarg + 1);
	ki = &qfilter_call_cache(fcinfo)->key;
	keytype = ss_key_type_arg(fcinfo, 1, ki, QFILTER_KEY_WHAT);

	if (state == NULL)
	{
		MemoryContext oldcxt;
		QFilterData *qf;

		oldcxt = MemoryContextSwitchTo(row.aggcontext);
		qf = qfilter_create_empty(capacity, fp_rate, SS_DEFAULT_SEED, keytype);
		state = qfilter_state_new(row.aggcontext, (struct varlena *) qf);
		MemoryContextSwitchTo(oldcxt);
	}
	else if (capacity != state->qf->capacity || fp_rate != state->qf->fp_rate)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("capacity and fp_rate of qfilter_agg must be the same in every row"),
				 errdetail("The aggregate started with capacity " INT64_FORMAT " and fp_rate %g, but a later row has capacity " INT64_FORMAT " and fp_rate %g.",
						   state->qf->capacity, state->qf->fp_rate,
						   capacity, fp_rate)));

	if (row.count > 0)
	{
		SSHash		h = ss_hash_datum(PG_GETARG_DATUM(1), ki->typlen,
									  ki->typbyval, state->qf->seed);

		qfilter_state_insert(state, row.aggcontext, h.h1, (uint64) row.count);
	}

	PG_RETURN_POINTER(state);
}

Datum
qfilter_agg_trans_counted(PG_FUNCTION_ARGS)
{
	return qfilter_agg_trans(fcinfo);
}

/* ----------------------------------------------------------------
 *		Functions on qfilter values
 * ----------------------------------------------------------------
 */

/*
 * The filter argument of a lookup, with its geometry.
 *
 * A lookup per row of a join or of a table of keys would otherwise
 * detoast the filter once per row: fetch every chunk of a value stored out
 * of line, or decompress a value compressed in line (a small, sparse
 * filter compresses to well under 2 kB and stays in the heap tuple).  So
 * the last such value is kept detoasted in the call site's memory, keyed
 * by its TOAST pointer (which names an immutable value) or by its
 * compressed bytes (compared with memcmp, far cheaper than decompressing).
 * Uncompressed in-line values, e.g. a filter computed by a subquery, need
 * no detoasting.  Queries alternating between several stored filters row
 * by row still detoast each time; see docs/qfilter.md.
 */
static const QFilterData *
qfilter_lookup_arg(FunctionCallInfo fcinfo, QFilterCallCache *c,
				   const QfGeom **g)
{
	struct varlena *v = (struct varlena *) PG_GETARG_POINTER(0);
	QFilterCacheKind kind = QFC_NONE;
	struct varatt_external ext = {0};
	MemoryContext oldcxt;
	QFilterData *qf;

	if (VARATT_IS_EXTERNAL_ONDISK(v))
	{
		kind = QFC_TOAST;
		VARATT_EXTERNAL_GET_POINTER(ext, v);
		if (c->kind == kind && c->toastrelid == ext.va_toastrelid &&
			c->valueid == ext.va_valueid)
		{
			*g = &c->g;
			return c->qf;
		}
	}
	else if (VARATT_IS_COMPRESSED(v))
	{
		kind = QFC_INLINE;
		if (c->kind == kind && VARSIZE(c->raw) == VARSIZE(v) &&
			memcmp(c->raw, v, VARSIZE(v)) == 0)
		{
			*g = &c->g;
			return c->qf;
		}
	}
	else
	{
		qf = PG_GETARG_QFILTER_P(0);
		qfilter_check_header(qf);
		if (c->g_plain.nhome != qf->nhome || c->g_plain.rbits != qf->rbits ||
			c->g_plain.legacy)
			qfilter_geom(qf, &c->g_plain);
		*g = &c->g_plain;
		return qf;
	}

	/* a new value to cache: drop the old one first */
	if (c->qf)
		pfree(c->qf);
	if (c->raw)
		pfree(c->raw);
	c->qf = NULL;
	c->raw = NULL;
	c->kind = QFC_NONE;

	oldcxt = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	qf = qfilter_current(detoast_attr(v));
	if (kind == QFC_INLINE)
	{
		c->raw = palloc(VARSIZE(v));
		memcpy(c->raw, v, VARSIZE(v));
	}
	MemoryContextSwitchTo(oldcxt);
	c->qf = qf;
	qfilter_check_header(qf);
	qfilter_geom(qf, &c->g);
	c->kind = kind;
	c->toastrelid = ext.va_toastrelid;
	c->valueid = ext.va_valueid;
	*g = &c->g;
	return qf;
}

/*
 * The key argument argno hashed for filter qf.  A key of another type than
 * the filter's is converted first (ss_lookup_key_arg).
 */
static uint64
qfilter_key_hash(FunctionCallInfo fcinfo, const QFilterData *qf, int argno)
{
	Oid			keytype;
	Datum		key = ss_lookup_key_arg(fcinfo, argno, qf->elemtype, "qfilter",
										QFILTER_KEY_WHAT, &keytype);
	SSKeyType  *ki = qfilter_key_info(fcinfo, keytype);

	return ss_hash_datum(key, ki->typlen, ki->typbyval, qf->seed).h1;
}

/* qfilter_count(qfilter, key): copies of the key's fingerprint. */
Datum
qfilter_count(PG_FUNCTION_ARGS)
{
	QFilterCallCache *c = qfilter_call_cache(fcinfo);
	const QfGeom *g;
	const QFilterData *qf = qfilter_lookup_arg(fcinfo, c, &g);
	uint64		n = qfilter_count_hash(qf, g, qfilter_key_hash(fcinfo, qf, 1));

	PG_RETURN_INT64((int64) Min(n, (uint64) PG_INT64_MAX));
}

/* qfilter_contains(qfilter, key): whether the key's fingerprint is there. */
Datum
qfilter_contains(PG_FUNCTION_ARGS)
{
	QFilterCallCache *c = qfilter_call_cache(fcinfo);
	const QfGeom *g;
	const QFilterData *qf = qfilter_lookup_arg(fcinfo, c, &g);

	PG_RETURN_BOOL(qfilter_count_hash(qf, g, qfilter_key_hash(fcinfo, qf, 1)) > 0);
}

/*
 * qfilter_remove(qfilter, key [, count]): a copy of the filter with count
 * (default 1) copies of the key's fingerprint removed, or all of them if
 * it has fewer.  Removing a key that was never added removes the copies
 * of any key that shares its fingerprint.
 */
Datum
qfilter_remove(PG_FUNCTION_ARGS)
{
	QFilterData *in = PG_GETARG_QFILTER_P(0);
	int64		count = 1;
	QFilterData *out;
	QfGeom		g;
	uint64		h1;

	qfilter_check_header(in);
	if (PG_NARGS() > 2)
		count = ss_count_arg(fcinfo, 2, "count", "qfilter_remove",
							 "The count is the number of copies of the key to remove.");
	h1 = qfilter_key_hash(fcinfo, in, 1);
	out = (QFilterData *) palloc(VARSIZE(in));
	memcpy(out, in, VARSIZE(in));
	qfilter_geom(out, &g);
	(void) qfilter_remove_hash(out, &g, h1, (uint64) count);
	PG_RETURN_POINTER(out);
}

Datum
qfilter_union(PG_FUNCTION_ARGS)
{
	QFilterData *a = PG_GETARG_QFILTER_P(0);
	QFilterData *b = PG_GETARG_QFILTER_P(1);

	qfilter_check_header(a);
	qfilter_check_header(b);
	PG_RETURN_POINTER(qfilter_union_values(a, b));
}

/*
 * qfilter_resize(qfilter): twice the areas, one remainder bit fewer, same
 * fingerprints (and further steps in the rare case that a split area
 * overflows).
 */
Datum
qfilter_resize(PG_FUNCTION_ARGS)
{
	QFilterData *qf = PG_GETARG_QFILTER_P(0);

	qfilter_check_header(qf);
	PG_RETURN_POINTER(qfilter_grow(qf, 1));
}
