/*-------------------------------------------------------------------------
 *
 * ss_aggutil.c
 *	  What the in-memory aggregates and the functions on their values
 *	  share (ss_aggutil.h).
 *
 * The aggregates' support functions can be combined freely by a superuser
 * with CREATE AGGREGATE (stype = internal), e.g. cms_agg_trans with
 * qfilter_agg_final or with another extension's final function, so every
 * function that receives a state checks its magic word first, and every
 * deserial function the magic word of its bytes: a state of another kind
 * then fails cleanly instead of being read as one of ours.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "ss_aggutil.h"
#include "ss_hash.h"
#include "ss_sqlfunc.h"

MemoryContext
ss_agg_context(FunctionCallInfo fcinfo, const char *fname)
{
	MemoryContext aggcontext;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		elog(ERROR, "%s called in non-aggregate context", fname);
	return aggcontext;
}

/*
 * Any state is a palloc'd chunk of at least 8 bytes, so reading its first
 * word is safe.
 */
void *
ss_agg_state_arg(FunctionCallInfo fcinfo, int argno, uint32 magic,
				 const char *fname, const char *what, const char *hint)
{
	void	   *state;

	if (PG_ARGISNULL(argno))
		return NULL;
	state = PG_GETARG_POINTER(argno);
	if (state == NULL || *(uint32 *) state != magic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s received an aggregate state that is not a %s state",
						fname, what),
				 errdetail("The aggregate combines support functions of different aggregates."),
				 errhint("%s", hint)));
	return state;
}

struct varlena *
ss_varlena_copy(MemoryContext cxt, const struct varlena *v)
{
	struct varlena *copy = MemoryContextAlloc(cxt, VARSIZE(v));

	memcpy(copy, v, VARSIZE(v));
	return copy;
}

bytea *
ss_agg_serial_varlena(uint32 magic, const struct varlena *v)
{
	Size		len = VARSIZE(v) - VARHDRSZ;
	bytea	   *result = (bytea *) palloc(VARHDRSZ + sizeof(magic) + len);

	SET_VARSIZE(result, VARHDRSZ + sizeof(magic) + len);
	memcpy(VARDATA(result), &magic, sizeof(magic));
	memcpy(VARDATA(result) + sizeof(magic), VARDATA(v), len);
	return result;
}

struct varlena *
ss_agg_deserial_varlena(bytea *bytes, uint32 magic, Size min_size,
						const char *what)
{
	Size		len = VARSIZE_ANY_EXHDR(bytes);
	uint32		got = 0;
	struct varlena *v;

	if (len >= sizeof(got))
		memcpy(&got, VARDATA_ANY(bytes), sizeof(got));
	if (len < sizeof(got) + min_size - VARHDRSZ || got != magic)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("invalid serialized %s aggregate state", what),
				 errdetail("The %zu bytes do not start with a %s state; the aggregate may combine the serialization functions of different aggregates.",
						   len, what)));
	len -= sizeof(got);

	/*
	 * Copy to get a 4-byte header and 8-byte aligned contents (len is the
	 * size of an existing bytea, so the allocation is bounded); the caller
	 * then checks all of it like any value from outside: the bytes might
	 * come from another serial function that happens to write our magic.
	 */
	v = (struct varlena *) palloc(len + VARHDRSZ);
	SET_VARSIZE(v, len + VARHDRSZ);
	memcpy(VARDATA(v), VARDATA_ANY(bytes) + sizeof(got), len);
	return v;
}

/* The value a state of agg holds. */
static inline struct varlena *
ss_value_agg_value(const SSValueAgg *agg, const void *state)
{
	return *(struct varlena *const *) ((const char *) state + agg->value_offset);
}

Datum
ss_value_agg_combine(FunctionCallInfo fcinfo, const SSValueAgg *agg,
					 const char *fname)
{
	MemoryContext aggcontext = ss_agg_context(fcinfo, fname);
	void	   *state1 = ss_value_agg_state(fcinfo, 0, agg, fname);
	void	   *state2 = ss_value_agg_state(fcinfo, 1, agg, fname);

	if (state2 == NULL)
		return ss_agg_keep_state(fcinfo, state1);
	PG_RETURN_POINTER(ss_value_agg_add(agg, state1, aggcontext,
									   ss_value_agg_value(agg, state2),
									   false));
}

/*
 * The serial and final functions return the state's value: serialized, or
 * copied.
 */
Datum
ss_value_agg_result(FunctionCallInfo fcinfo, const SSValueAgg *agg,
					const char *fname, bool serial)
{
	void	   *state;
	struct varlena *value;

	(void) ss_agg_context(fcinfo, fname);
	state = ss_value_agg_state(fcinfo, 0, agg, fname);
	if (state == NULL)
		PG_RETURN_NULL();
	value = ss_value_agg_value(agg, state);
	if (serial)
		PG_RETURN_BYTEA_P(ss_agg_serial_varlena(agg->serial_magic, value));
	PG_RETURN_POINTER(ss_varlena_copy(CurrentMemoryContext, value));
}

Datum
ss_value_agg_deserial(FunctionCallInfo fcinfo, const SSValueAgg *agg,
					  const char *fname)
{
	struct varlena *value;

	(void) ss_agg_context(fcinfo, fname);
	value = ss_agg_deserial_varlena(PG_GETARG_BYTEA_PP(0), agg->serial_magic,
									agg->min_size, agg->what);
	agg->check(value, true);
	PG_RETURN_POINTER(agg->state_new(CurrentMemoryContext, value));
}

void
ss_negative_count(int64 count, const char *noun, const char *fname,
				  const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("negative %s " INT64_FORMAT " in %s", noun, count, fname),
			 errdetail("%s", detail)));
}

void
ss_null_argument(const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("%s", msg)));
}

/*
 * Composite keys are refused: their binary form starts with the row type's
 * OID and typmod, and anonymous record typmods are assigned per session,
 * so the same row would hash differently in another session (a count-min
 * estimate below the true count, a filter lookup missing a key that was
 * added).
 */
void
ss_key_type_set(SSKeyType *kt, Oid typid, const char *what)
{
	Oid			elem;

	if (kt->typid == typid && OidIsValid(typid))
		return;
	if (!OidIsValid(typid))
		elog(ERROR, "could not determine the type of the %s key", what);
	elem = get_base_element_type(typid);
	if (type_is_rowtype(typid) ||
		(OidIsValid(elem) && type_is_rowtype(elem)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s keys of type %s are not supported",
						what, format_type_be(typid)),
				 errdetail("Keys are hashed by their binary form, which for composite values includes row type information that differs between sessions."),
				 errhint("Use a scalar key built from the columns, for example a text or bigint value.")));
	get_typlenbyval(typid, &kt->typlen, &kt->typbyval);
	kt->typid = typid;
}

/*
 * A key of another type than the value's is converted first
 * (ss_coerce_key), because hashing another binary form would silently
 * miss.  typname is the value's SQL type ("cms"), what names the structure
 * ("count-min sketch").
 */
Datum
ss_lookup_key_arg(FunctionCallInfo fcinfo, int argno, Oid elemtype,
				  const char *typname, const char *what, Oid *keytype)
{
	Datum		key = PG_GETARG_DATUM(argno);

	*keytype = get_fn_expr_argtype(fcinfo->flinfo, argno);
	if (OidIsValid(elemtype) && *keytype != elemtype)
	{
		ss_check_key_type(elemtype, typname);
		if (!OidIsValid(*keytype))
			elog(ERROR, "could not determine the type of the %s key", what);
		key = ss_coerce_key(key, *keytype, elemtype);
		*keytype = elemtype;
	}
	return key;
}
