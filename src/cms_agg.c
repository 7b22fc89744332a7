/*-------------------------------------------------------------------------
 *
 * cms_agg.c
 *	  Aggregates building `cms` values, and cms_estimate().
 *
 * cms_agg(key, [weight,] epsilon, delta) and cms_union_agg(cms) share one
 * transition state: a CmsData allocated in the aggregate memory context on
 * the first row that contributes, and updated in place.  The state already
 * is a valid varlena, so serialization copies its bytes and the final
 * function returns a copy.  Both aggregates return NULL when no row
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

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "cms.h"

PG_FUNCTION_INFO_V1(cms_agg_trans);
PG_FUNCTION_INFO_V1(cms_agg_trans_weighted);
PG_FUNCTION_INFO_V1(cms_union_agg_trans);
PG_FUNCTION_INFO_V1(cms_agg_combine);
PG_FUNCTION_INFO_V1(cms_agg_serial);
PG_FUNCTION_INFO_V1(cms_agg_deserial);
PG_FUNCTION_INFO_V1(cms_agg_final);
PG_FUNCTION_INFO_V1(cms_estimate);

/* Key type properties, cached in fn_extra for the life of the call site. */
typedef struct CmsKeyInfo
{
	Oid			typid;
	int16		typlen;
	bool		typbyval;
} CmsKeyInfo;

/*
 * Look up (once per call site and key type) how to hash keys of typid.
 *
 * Composite keys are refused: their binary form starts with the row type's
 * OID and typmod, and anonymous record typmods are assigned per session,
 * so the same row would hash differently in another session and its
 * estimate could fall below its true count.
 */
static CmsKeyInfo *
cms_key_info(FunctionCallInfo fcinfo, Oid typid)
{
	CmsKeyInfo *ki = (CmsKeyInfo *) fcinfo->flinfo->fn_extra;

	if (ki == NULL)
	{
		ki = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
									sizeof(CmsKeyInfo));
		fcinfo->flinfo->fn_extra = ki;
	}
	if (ki->typid != typid || !OidIsValid(typid))
	{
		Oid			elem;

		if (!OidIsValid(typid))
			elog(ERROR, "could not determine the type of the count-min sketch key");
		elem = get_base_element_type(typid);
		if (type_is_rowtype(typid) ||
			(OidIsValid(elem) && type_is_rowtype(elem)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("count-min sketch keys of type %s are not supported",
							format_type_be(typid)),
					 errdetail("Keys are hashed by their binary form, which for composite values includes row type information that differs between sessions."),
					 errhint("Use a scalar key built from the columns, for example a text or bigint value.")));
		get_typlenbyval(typid, &ki->typlen, &ki->typbyval);
		ki->typid = typid;
	}
	return ki;
}

static CmsData *
cms_state_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : (CmsData *) PG_GETARG_POINTER(argno);
}

static MemoryContext
cms_agg_context(FunctionCallInfo fcinfo, const char *fname)
{
	MemoryContext aggcontext;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		elog(ERROR, "%s called in non-aggregate context", fname);
	return aggcontext;
}

/* A copy of a cms value in the given context. */
static CmsData *
cms_copy(MemoryContext cxt, const CmsData *cms)
{
	CmsData    *copy = (CmsData *) MemoryContextAlloc(cxt, VARSIZE(cms));

	memcpy(copy, cms, VARSIZE(cms));
	return copy;
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
	MemoryContext aggcontext = cms_agg_context(fcinfo, fname);
	CmsData    *state = cms_state_arg(fcinfo, 0);
	int			epsarg = weighted ? 3 : 2;
	int64		weight = 1;
	double		epsilon;
	double		delta;
	Oid			keytype;
	CmsKeyInfo *ki;

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
	ki = cms_key_info(fcinfo, keytype);

	if (state == NULL)
	{
		CmsGeometry g;
		MemoryContext oldcxt;

		cms_geometry_for_bounds(epsilon, delta, &g);
		oldcxt = MemoryContextSwitchTo(aggcontext);
		state = cms_create_empty(&g, SS_DEFAULT_SEED, keytype, epsilon, delta);
		MemoryContextSwitchTo(oldcxt);
	}
	else if (epsilon != state->epsilon || delta != state->delta)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epsilon and delta of cms_agg must be the same in every row"),
				 errdetail("The aggregate started with epsilon %g and delta %g, but a later row has epsilon %g and delta %g.",
						   state->epsilon, state->delta, epsilon, delta)));

	if (weight > 0)
		cms_add_hash(state,
					 ss_hash_datum(PG_GETARG_DATUM(1), ki->typlen,
								   ki->typbyval, state->seed),
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
	MemoryContext aggcontext = cms_agg_context(fcinfo, "cms_union_agg_trans");
	CmsData    *state = cms_state_arg(fcinfo, 0);
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
		state = cms_copy(aggcontext, in);
	else
		cms_merge_into(state, in);

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
	MemoryContext aggcontext = cms_agg_context(fcinfo, "cms_agg_combine");
	CmsData    *state1 = cms_state_arg(fcinfo, 0);
	CmsData    *state2 = cms_state_arg(fcinfo, 1);

	if (state2 == NULL)
	{
		if (state1 == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(state1);
	}
	if (state1 == NULL)
		PG_RETURN_POINTER(cms_copy(aggcontext, state2));

	cms_merge_into(state1, state2);
	PG_RETURN_POINTER(state1);
}

/* The state is a varlena already: the bytea is a copy of its bytes. */
Datum
cms_agg_serial(PG_FUNCTION_ARGS)
{
	CmsData    *state;

	(void) cms_agg_context(fcinfo, "cms_agg_serial");
	state = (CmsData *) PG_GETARG_POINTER(0);
	PG_RETURN_BYTEA_P((bytea *) cms_copy(CurrentMemoryContext, state));
}

Datum
cms_agg_deserial(PG_FUNCTION_ARGS)
{
	bytea	   *bytes;
	Size		len;
	CmsData    *state;

	(void) cms_agg_context(fcinfo, "cms_agg_deserial");
	bytes = PG_GETARG_BYTEA_PP(0);
	len = VARSIZE_ANY_EXHDR(bytes);
	if (len < CMS_HEADER_SIZE - VARHDRSZ || len > MaxAllocSize - VARHDRSZ)
		elog(ERROR, "invalid serialized count-min sketch of %zu bytes", len);

	/* copy to get a 4-byte header and 8-byte aligned counters */
	state = (CmsData *) palloc(len + VARHDRSZ);
	SET_VARSIZE(state, len + VARHDRSZ);
	memcpy((char *) state + VARHDRSZ, VARDATA_ANY(bytes), len);
	cms_check_header(state);

	PG_RETURN_POINTER(state);
}

/*
 * Return a copy: the state belongs to the aggregate, which may finalize it
 * again (window frames) or free it with its context.
 */
Datum
cms_agg_final(PG_FUNCTION_ARGS)
{
	(void) cms_agg_context(fcinfo, "cms_agg_final");
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_POINTER(cms_copy(CurrentMemoryContext,
							   (CmsData *) PG_GETARG_POINTER(0)));
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
	CmsData    *cms = PG_GETARG_CMS_P(0);
	Datum		key = PG_GETARG_DATUM(1);
	Oid			keytype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	CmsKeyInfo *ki;

	cms_check_header(cms);
	if (OidIsValid(cms->elemtype) && keytype != cms->elemtype)
	{
		if (!OidIsValid(keytype))
			elog(ERROR, "could not determine the type of the count-min sketch key");
		key = ss_coerce_key(key, keytype, cms->elemtype);
		keytype = cms->elemtype;
	}
	ki = cms_key_info(fcinfo, keytype);

	PG_RETURN_INT64(cms_estimate_hash(cms,
									  ss_hash_datum(key, ki->typlen,
													ki->typbyval, cms->seed)));
}
