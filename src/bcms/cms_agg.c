/*-------------------------------------------------------------------------
 *
 * cms_agg.c
 *	  Aggregates building `cms` values, and cms_estimate().
 *
 * cms_agg(key, [weight,] epsilon, delta) and cms_union_agg(cms) share one
 * transition state: a CmsAggState (a magic word and a CmsData allocated in
 * the aggregate memory context on the first row that contributes, and
 * updated in place).  The sketch already is a valid varlena, so
 * serialization copies its bytes behind a magic word of its own, and the
 * final function returns a copy.  Both aggregates return NULL when no row
 * contributed (zero rows, or only NULL keys, weights or sketches), like
 * sum(); there is no parameter-less empty sketch to return instead.
 *
 * Keys are hashed with ss_hash_datum() and the sketch's seed over their
 * binary form, exactly like bcms, so a cms and a bcms table with the same
 * geometry can be merged.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "cms.h"
#include "ss_aggutil.h"
#include "ss_sqlfunc.h"

PG_FUNCTION_INFO_V1(cms_agg_trans);
PG_FUNCTION_INFO_V1(cms_agg_trans_weighted);
PG_FUNCTION_INFO_V1(cms_union_agg_trans);
PG_FUNCTION_INFO_V1(cms_agg_combine);
PG_FUNCTION_INFO_V1(cms_agg_serial);
PG_FUNCTION_INFO_V1(cms_agg_deserial);
PG_FUNCTION_INFO_V1(cms_agg_final);
PG_FUNCTION_INFO_V1(cms_estimate);

/* What names the sketch in messages about keys. */
#define CMS_KEY_WHAT	"count-min sketch"

/*
 * Detoasted sketches cached by cms_estimate, see cms_estimate_sketch().
 * Each entry remembers the toasted datum it came from.
 */
typedef struct CmsDetoasted
{
	CmsData    *sketch;			/* detoasted copy, in fn_mcxt */
	char	   *source;			/* copy of the toasted datum */
	Size		source_len;
	bool		source_external;	/* source is a TOAST pointer */
	LocalTransactionId lxid;	/* when an external source was read */
	CommandId	cid;
} CmsDetoasted;

#define CMS_DETOAST_CACHE_ENTRIES	16

/* fn_extra of cms_estimate: the key type and the detoasted sketches. */
typedef struct CmsEstimateCache
{
	SSKeyType	key;
	int			nentries;
	Size		cached_bytes;	/* sum of the entries' sketch sizes */
	/* most recently used first */
	CmsDetoasted entries[CMS_DETOAST_CACHE_ENTRIES];
} CmsEstimateCache;

static void
cms_detoasted_free(CmsDetoasted *e)
{
	pfree(e->sketch);
	pfree(e->source);
}

/*
 * The sketch argument of cms_estimate, detoasted once per call site and
 * toasted value rather than once per call.
 *
 * Typical queries pass one or a few stored sketches with many keys, e.g.
 * cms_estimate((SELECT s FROM sketches WHERE ...), key) over a key table,
 * or a join of a sketch table with a key table in either order.  The same
 * TOAST pointers (or inline compressed bytes) then come again and again,
 * and detoasting each time would cost O(sketch size) per estimate instead
 * of O(depth).  Compressed bytes identify their contents, so comparing
 * them is safe anywhere; a TOAST pointer identifies an immutable value,
 * and the transaction and command in the key rule out a value ID reused
 * after a deletion.  The cache holds at most CMS_DETOAST_CACHE_ENTRIES
 * sketches and, beyond the one in use, at most work_mem.
 */
static CmsData *
cms_estimate_sketch(FunctionCallInfo fcinfo, CmsEstimateCache *cache)
{
	struct varlena *raw = (struct varlena *) PG_GETARG_POINTER(0);
	bool		external;
	Size		len;
	CmsData    *sketch;
	CmsDetoasted e;
	MemoryContext oldcxt;
	Size		limit;

	if (VARATT_IS_EXTERNAL_ONDISK(raw))
	{
		external = true;
		len = VARSIZE_EXTERNAL(raw);
	}
	else if (VARATT_IS_COMPRESSED(raw))
	{
		external = false;
		len = VARSIZE(raw);
	}
	else
	{
		/* plain values need no copy; other forms are rare: no caching */
		sketch = DatumGetCmsP(PointerGetDatum(raw));
		cms_check_header(sketch);
		return sketch;
	}

	for (int i = 0; i < cache->nentries; i++)
	{
		CmsDetoasted *c = &cache->entries[i];

		if (c->source_external != external ||
			c->source_len != len ||
			memcmp(c->source, raw, len) != 0)
			continue;
		e = *c;
		memmove(&cache->entries[1], &cache->entries[0],
				i * sizeof(CmsDetoasted));
		if (!external ||
			(e.lxid == MyProc->lxid &&
			 e.cid == GetCurrentCommandId(false)))
		{
			/* a hit: now the most recently used entry */
			cache->entries[0] = e;
			return e.sketch;
		}
		/* same TOAST pointer read by an earlier command: drop it */
		memmove(&cache->entries[0], &cache->entries[1],
				(cache->nentries - 1) * sizeof(CmsDetoasted));
		cache->nentries--;
		cache->cached_bytes -= VARSIZE(e.sketch);
		cms_detoasted_free(&e);
		break;
	}

	/* detoast here, so scratch memory of the fetch stays short-lived */
	sketch = DatumGetCmsP(PointerGetDatum(raw));
	cms_check_header(sketch);

	/*
	 * Make room by dropping the most recently used entries.  A join of a
	 * sketch table with a key table cycles through the sketches; when they
	 * do not all fit, evicting the least recently used one would miss on
	 * every call, while evicting the most recent keeps the others hitting.
	 */
	limit = (Size) work_mem * 1024;
	while (cache->nentries > 0 &&
		   (cache->nentries == CMS_DETOAST_CACHE_ENTRIES ||
			cache->cached_bytes + VARSIZE(sketch) > limit))
	{
		cache->cached_bytes -= VARSIZE(cache->entries[0].sketch);
		cms_detoasted_free(&cache->entries[0]);
		cache->nentries--;
		memmove(&cache->entries[0], &cache->entries[1],
				cache->nentries * sizeof(CmsDetoasted));
	}

	oldcxt = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	e.source = palloc(len);
	memcpy(e.source, raw, len);
	e.source_len = len;
	e.source_external = external;
	e.lxid = MyProc->lxid;
	e.cid = GetCurrentCommandId(false);
	e.sketch = palloc(VARSIZE(sketch));
	memcpy(e.sketch, sketch, VARSIZE(sketch));
	MemoryContextSwitchTo(oldcxt);
	pfree(sketch);

	memmove(&cache->entries[1], &cache->entries[0],
			cache->nentries * sizeof(CmsDetoasted));
	cache->entries[0] = e;
	cache->nentries++;
	cache->cached_bytes += VARSIZE(e.sketch);

	return e.sketch;
}

/*
 * The transition state (internal) of both aggregates, starting with a magic
 * word that every support function checks (ss_agg_state_arg).
 */
#define CMS_AGG_STATE_MAGIC		0x53434d41	/* "AMCS" */

/*
 * The serialized state (bytea): this magic word, then the sketch's bytes
 * after its varlena header (ss_agg_serial_varlena).
 */
#define CMS_AGG_SERIAL_MAGIC	0x53434d53	/* "SMCS" */

typedef struct CmsAggState
{
	uint32		magic;			/* CMS_AGG_STATE_MAGIC */
	CmsData    *cms;			/* in the aggregate context */
} CmsAggState;

static CmsAggState *
cms_state_arg(FunctionCallInfo fcinfo, int argno, const char *fname)
{
	return ss_agg_state_arg(fcinfo, argno, CMS_AGG_STATE_MAGIC, fname,
							"count-min sketch",
							"Use only the cms_agg support functions (cms_agg_trans, cms_agg_trans_weighted, cms_union_agg_trans, cms_agg_combine, cms_agg_serial, cms_agg_deserial, cms_agg_final) together.");
}

static CmsAggState *
cms_state_new(MemoryContext cxt, CmsData *cms)
{
	CmsAggState *state = MemoryContextAlloc(cxt, sizeof(CmsAggState));

	state->magic = CMS_AGG_STATE_MAGIC;
	state->cms = cms;
	return state;
}

/* A copy of a cms value in the given context. */
static CmsData *
cms_copy(MemoryContext cxt, const CmsData *cms)
{
	return (CmsData *) ss_varlena_copy(cxt, (const struct varlena *) cms);
}


/*
 * Transition of cms_agg(key, epsilon, delta) and
 * cms_agg(key, weight, epsilon, delta).
 *
 * A row with a NULL key or a NULL weight is no stream item and is skipped
 * without looking at the other arguments.  epsilon and delta must not be
 * NULL and must be the same on every row: they fix the sketch's geometry.
 * A weight of 0 adds nothing, but the row still counts as input, so the
 * result is an empty sketch rather than NULL.
 */
static Datum
cms_agg_trans_common(FunctionCallInfo fcinfo, bool weighted)
{
	const char *fname = weighted ? "cms_agg_trans_weighted" : "cms_agg_trans";
	MemoryContext aggcontext = ss_agg_context(fcinfo, fname);
	CmsAggState *state = cms_state_arg(fcinfo, 0, fname);
	int			epsarg = weighted ? 3 : 2;
	int64		weight = 1;
	double		epsilon;
	double		delta;
	Oid			keytype;
	SSKeyType  *ki;

	if (PG_ARGISNULL(1) || (weighted && PG_ARGISNULL(2)))
	{
		if (state == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(state);
	}
	if (PG_ARGISNULL(epsarg) || PG_ARGISNULL(epsarg + 1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("epsilon and delta of cms_agg must not be NULL")));
	epsilon = PG_GETARG_FLOAT8(epsarg);
	delta = PG_GETARG_FLOAT8(epsarg + 1);
	if (weighted)
	{
		weight = PG_GETARG_INT64(2);
		if (weight < 0)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("negative weight " INT64_FORMAT " in cms_agg", weight),
					 errdetail("A count-min sketch only adds counts (the cash-register model); its estimates would no longer be upper bounds after a subtraction.")));
	}

	keytype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	ki = (SSKeyType *) fcinfo->flinfo->fn_extra;
	if (ki == NULL)
	{
		ki = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
									sizeof(SSKeyType));
		fcinfo->flinfo->fn_extra = ki;
	}
	ss_key_type_set(ki, keytype, CMS_KEY_WHAT);

	if (state == NULL)
	{
		CmsGeometry g;
		MemoryContext oldcxt;

		cms_geometry_for_bounds(epsilon, delta, &g);
		oldcxt = MemoryContextSwitchTo(aggcontext);
		state = cms_state_new(aggcontext,
							  cms_create_empty(&g, SS_DEFAULT_SEED, keytype,
											   epsilon, delta));
		MemoryContextSwitchTo(oldcxt);
	}
	else if (epsilon != state->cms->epsilon || delta != state->cms->delta)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epsilon and delta of cms_agg must be the same in every row"),
				 errdetail("The aggregate started with epsilon %g and delta %g, but a later row has epsilon %g and delta %g.",
						   state->cms->epsilon, state->cms->delta,
						   epsilon, delta)));

	if (weight > 0)
		cms_add_hash(state->cms,
					 ss_hash_datum(PG_GETARG_DATUM(1), ki->typlen,
								   ki->typbyval, state->cms->seed),
					 weight);

	PG_RETURN_POINTER(state);
}

Datum
cms_agg_trans(PG_FUNCTION_ARGS)
{
	return cms_agg_trans_common(fcinfo, false);
}

Datum
cms_agg_trans_weighted(PG_FUNCTION_ARGS)
{
	return cms_agg_trans_common(fcinfo, true);
}

/* Transition of cms_union_agg(cms): NULL sketches are skipped. */
Datum
cms_union_agg_trans(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = ss_agg_context(fcinfo, "cms_union_agg_trans");
	CmsAggState *state = cms_state_arg(fcinfo, 0, "cms_union_agg_trans");
	CmsData    *in;

	if (PG_ARGISNULL(1))
	{
		if (state == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(state);
	}
	in = PG_GETARG_CMS_P(1);
	cms_check_header(in);
	if (state == NULL)
		state = cms_state_new(aggcontext, cms_copy(aggcontext, in));
	else
		cms_merge_into(state->cms, in);

	PG_RETURN_POINTER(state);
}

/*
 * Combine two partial states.  Either may be NULL (a worker that saw no
 * contributing row).  state2 lives in a short-lived context, so when it is
 * the only one it is copied into the aggregate context, not adopted.
 */
Datum
cms_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = ss_agg_context(fcinfo, "cms_agg_combine");
	CmsAggState *state1 = cms_state_arg(fcinfo, 0, "cms_agg_combine");
	CmsAggState *state2 = cms_state_arg(fcinfo, 1, "cms_agg_combine");

	if (state2 == NULL)
	{
		if (state1 == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(state1);
	}
	if (state1 == NULL)
		PG_RETURN_POINTER(cms_state_new(aggcontext,
										cms_copy(aggcontext, state2->cms)));

	cms_merge_into(state1->cms, state2->cms);
	PG_RETURN_POINTER(state1);
}

/* The sketch is a varlena already: see ss_agg_serial_varlena. */
Datum
cms_agg_serial(PG_FUNCTION_ARGS)
{
	CmsAggState *state;

	(void) ss_agg_context(fcinfo, "cms_agg_serial");
	state = cms_state_arg(fcinfo, 0, "cms_agg_serial");
	if (state == NULL)			/* not STRICT when built by CREATE AGGREGATE */
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(ss_agg_serial_varlena(CMS_AGG_SERIAL_MAGIC,
											(struct varlena *) state->cms));
}

Datum
cms_agg_deserial(PG_FUNCTION_ARGS)
{
	CmsData    *cms;

	(void) ss_agg_context(fcinfo, "cms_agg_deserial");
	cms = (CmsData *) ss_agg_deserial_varlena(PG_GETARG_BYTEA_PP(0),
											  CMS_AGG_SERIAL_MAGIC,
											  CMS_HEADER_SIZE,
											  "count-min sketch");
	cms_check(cms);

	PG_RETURN_POINTER(cms_state_new(CurrentMemoryContext, cms));
}

/*
 * Return a copy: the state belongs to the aggregate, which may finalize it
 * again (window frames) or free it with its context.
 */
Datum
cms_agg_final(PG_FUNCTION_ARGS)
{
	CmsAggState *state;

	(void) ss_agg_context(fcinfo, "cms_agg_final");
	state = cms_state_arg(fcinfo, 0, "cms_agg_final");
	if (state == NULL)
		PG_RETURN_NULL();
	PG_RETURN_POINTER(cms_copy(CurrentMemoryContext, state->cms));
}

/*
 * cms_estimate(cms, key): the count-min estimate of key, never below its
 * true count (up to saturation at 2^63-1).  A key of another type than the
 * sketch's is converted first (ss_coerce_key), because hashing another
 * binary form would silently miss.
 */
Datum
cms_estimate(PG_FUNCTION_ARGS)
{
	CmsEstimateCache *cache = (CmsEstimateCache *) fcinfo->flinfo->fn_extra;
	CmsData    *cms;
	Datum		key;
	Oid			keytype;

	if (cache == NULL)
	{
		cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
									   sizeof(CmsEstimateCache));
		fcinfo->flinfo->fn_extra = cache;
	}
	cms = cms_estimate_sketch(fcinfo, cache);

	key = ss_lookup_key_arg(fcinfo, 1, cms->elemtype, "cms", CMS_KEY_WHAT,
							&keytype);
	ss_key_type_set(&cache->key, keytype, CMS_KEY_WHAT);

	PG_RETURN_INT64(cms_estimate_hash(cms,
									  ss_hash_datum(key, cache->key.typlen,
													cache->key.typbyval,
													cms->seed)));
}
