/*-------------------------------------------------------------------------
 *
 * ss_aggutil.h
 *	  What the in-memory aggregates (cms_agg, qfilter_agg, sample_agg) and
 *	  the functions on their values share: the aggregate context, checked
 *	  transition states, the serialized form of a state that is one varlena,
 *	  the support functions of an aggregate building such a value, count and
 *	  NULL arguments, and the key type of a value-building call site.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SS_AGGUTIL_H
#define SS_AGGUTIL_H

#include "fmgr.h"

/* The aggregate memory context, or ERROR if fname is not called as one. */
extern MemoryContext ss_agg_context(FunctionCallInfo fcinfo,
									const char *fname);

/*
 * The state argument argno of an aggregate support function (NULL for a
 * NULL argument), which must start with the uint32 magic.  what names the
 * state in the message ("count-min sketch"), hint lists the support
 * functions that go together.
 */
extern void *ss_agg_state_arg(FunctionCallInfo fcinfo, int argno,
							  uint32 magic, const char *fname,
							  const char *what, const char *hint);

/* A copy of a (plain, 4-byte header) varlena in cxt. */
extern struct varlena *ss_varlena_copy(MemoryContext cxt,
									   const struct varlena *v);

/*
 * A state that is one varlena, serialized: a bytea of magic followed by
 * v's bytes after its varlena header; and back, as a palloc'd varlena
 * with a 4-byte header (not checked beyond its size: the caller checks
 * all of it).  min_size is the smallest value, with its header; what
 * names it in the message ("quotient filter").
 */
extern bytea *ss_agg_serial_varlena(uint32 magic, const struct varlena *v);
extern struct varlena *ss_agg_deserial_varlena(bytea *bytes, uint32 magic,
											   Size min_size,
											   const char *what);

/*
 * The count or weight argument argno of a function adding copies of a key
 * (noun: "weight"), or ERROR (22003) if it is negative, with detail.
 */
extern void ss_negative_count(int64 count, const char *noun,
							  const char *fname, const char *detail)
			pg_attribute_noreturn();

static inline int64
ss_count_arg(FunctionCallInfo fcinfo, int argno, const char *noun,
			 const char *fname, const char *detail)
{
	int64		count = PG_GETARG_INT64(argno);

	if (count < 0)
		ss_negative_count(count, noun, fname, detail);
	return count;
}

/* ERROR (22004) for a NULL argument; msg says which and where. */
extern void ss_null_argument(const char *msg) pg_attribute_noreturn();

/*
 * An aggregate building a varlena value (cms, qfilter) from keys, and its
 * union aggregate building one from values: what their support functions
 * share.  The transition state starts with the uint32 state_magic and
 * points to the value (in the aggregate context) at value_offset;
 * serialized, it is serial_magic followed by the value's bytes
 * (ss_agg_serial_varlena).  The key aggregate's transition function takes
 * (state, key, [count,] two parameters that fix the value's geometry).
 */
typedef struct SSValueAgg
{
	uint32		state_magic;
	uint32		serial_magic;
	Size		value_offset;	/* offsetof the state's value pointer */
	Size		min_size;		/* the smallest value, with its header */
	const char *what;			/* names the value: "count-min sketch" */
	const char *hint;			/* the support functions that go together */
	const char *aggname;		/* the key aggregate: "cms_agg" */
	const char *trans_fname[2]; /* its transition, without and with a count */
	const char *count_noun;		/* the count argument: "weight" */
	const char *count_detail;	/* why a negative count is refused */
	const char *params_null;	/* the message for NULL parameters */
	/* ERROR unless value is valid: all of it if full, else its header */
	void		(*check) (const struct varlena *value, bool full);
	/* a new state in cxt adopting value (which must live in cxt) */
	void	   *(*state_new) (MemoryContext cxt, struct varlena *value);
	/* add value to state (in the aggregate context cxt) */
	void		(*merge) (void *state, MemoryContext cxt,
						  const struct varlena *value);
} SSValueAgg;

/* ss_agg_state_arg for the state of agg. */
static inline void *
ss_value_agg_state(FunctionCallInfo fcinfo, int argno, const SSValueAgg *agg,
				   const char *fname)
{
	return ss_agg_state_arg(fcinfo, argno, agg->state_magic, fname,
							agg->what, agg->hint);
}

/*
 * The state argument, or the SQL NULL a transition or combine function
 * returns while no row contributed: what it returns for a row it skips.
 */
static inline Datum
ss_agg_keep_state(FunctionCallInfo fcinfo, void *state)
{
	if (state == NULL)
		PG_RETURN_NULL();
	PG_RETURN_POINTER(state);
}

/*
 * Add value to state, or without a state make one holding value (a copy
 * in cxt unless adopt, for a value that lives in cxt already).
 */
static inline void *
ss_value_agg_add(const SSValueAgg *agg, void *state, MemoryContext cxt,
				 struct varlena *value, bool adopt)
{
	if (state == NULL)
		return agg->state_new(cxt, adopt ? value : ss_varlena_copy(cxt, value));
	agg->merge(state, cxt, value);
	return state;
}

/*
 * What a row of the key aggregate's transition function starts with (the
 * C function of the form with a count calls the one without).
 */
typedef struct SSKeyAggRow
{
	MemoryContext aggcontext;
	void	   *state;			/* NULL before the first row that counts */
	int64		count;			/* copies of the key: 1 without a count */
	int			paramarg;		/* the first parameter's argument number */
} SSKeyAggRow;

/*
 * Fill row, or return false for a row that is no stream item (a NULL key
 * or count), which is skipped (ss_agg_keep_state) without looking at the
 * parameters.  The parameters must not be NULL, nor the count negative.
 * Inline: it runs once per row.
 */
static inline bool
ss_key_agg_row(FunctionCallInfo fcinfo, const SSValueAgg *agg,
			   SSKeyAggRow *row)
{
	bool		counted = PG_NARGS() == 5;
	const char *fname = agg->trans_fname[counted ? 1 : 0];

	row->aggcontext = ss_agg_context(fcinfo, fname);
	row->state = ss_value_agg_state(fcinfo, 0, agg, fname);
	row->count = 1;
	row->paramarg = counted ? 3 : 2;
	if (PG_ARGISNULL(1) || (counted && PG_ARGISNULL(2)))
		return false;
	if (PG_ARGISNULL(row->paramarg) || PG_ARGISNULL(row->paramarg + 1))
		ss_null_argument(agg->params_null);
	if (counted)
		row->count = ss_count_arg(fcinfo, 2, agg->count_noun, agg->aggname,
								  agg->count_detail);
	return true;
}

/*
 * The union aggregate's transition: NULL values are skipped.  Inline, so
 * that with agg a constant the checks and the merge are direct calls.
 */
static inline Datum
ss_value_agg_union_trans(FunctionCallInfo fcinfo, const SSValueAgg *agg,
						 const char *fname)
{
	MemoryContext aggcontext = ss_agg_context(fcinfo, fname);
	void	   *state = ss_value_agg_state(fcinfo, 0, agg, fname);
	struct varlena *in;

	if (PG_ARGISNULL(1))
		return ss_agg_keep_state(fcinfo, state);
	in = PG_DETOAST_DATUM(PG_GETARG_DATUM(1));
	agg->check(in, false);
	PG_RETURN_POINTER(ss_value_agg_add(agg, state, aggcontext, in, false));
}

/*
 * The other support functions, which serve both aggregates (fname is the
 * C function's name, for messages).  The combine function's second state
 * lives in a short-lived context, so its value is copied, not adopted.
 * ss_value_agg_result is the serial function (serial) and the final one,
 * which returns a copy: the state belongs to the aggregate, which may
 * finalize it again (window frames) or free it with its context.  Both
 * return NULL for a NULL state (they are not STRICT when built by CREATE
 * AGGREGATE).
 */
extern Datum ss_value_agg_combine(FunctionCallInfo fcinfo,
								  const SSValueAgg *agg, const char *fname);
extern Datum ss_value_agg_deserial(FunctionCallInfo fcinfo,
								   const SSValueAgg *agg, const char *fname);
extern Datum ss_value_agg_result(FunctionCallInfo fcinfo,
								 const SSValueAgg *agg, const char *fname,
								 bool serial);

/*
 * Define the C functions <prefix>_union_agg_trans, <prefix>_agg_combine,
 * _serial, _deserial and _final (the names the SQL functions are declared
 * with) as the functions above for the aggregates of agg.
 */
#define SS_VALUE_AGG_FUNCTIONS(prefix, agg) \
PG_FUNCTION_INFO_V1(prefix##_union_agg_trans); \
PG_FUNCTION_INFO_V1(prefix##_agg_combine); \
PG_FUNCTION_INFO_V1(prefix##_agg_serial); \
PG_FUNCTION_INFO_V1(prefix##_agg_deserial); \
PG_FUNCTION_INFO_V1(prefix##_agg_final); \
Datum prefix##_union_agg_trans(PG_FUNCTION_ARGS) \
{ return ss_value_agg_union_trans(fcinfo, &(agg), #prefix "_union_agg_trans"); } \
Datum prefix##_agg_combine(PG_FUNCTION_ARGS) \
{ return ss_value_agg_combine(fcinfo, &(agg), #prefix "_agg_combine"); } \
Datum prefix##_agg_serial(PG_FUNCTION_ARGS) \
{ return ss_value_agg_result(fcinfo, &(agg), #prefix "_agg_serial", true); } \
Datum prefix##_agg_deserial(PG_FUNCTION_ARGS) \
{ return ss_value_agg_deserial(fcinfo, &(agg), #prefix "_agg_deserial"); } \
Datum prefix##_agg_final(PG_FUNCTION_ARGS) \
{ return ss_value_agg_result(fcinfo, &(agg), #prefix "_agg_final", false); }

/* How to hash the keys of a call site, cached for its life. */
typedef struct SSKeyType
{
	Oid			typid;			/* InvalidOid before the first key */
	int16		typlen;
	bool		typbyval;
} SSKeyType;

/*
 * Set up kt for keys of typid (once per call site and key type), or
 * ERROR for a key type that cannot be hashed stably; what names the
 * structure in the message ("quotient filter").
 */
extern void ss_key_type_set(SSKeyType *kt, Oid typid, const char *what);

/* ss_key_type_set for the type of argument argno; returns that type. */
static inline Oid
ss_key_type_arg(FunctionCallInfo fcinfo, int argno, SSKeyType *kt,
				const char *what)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, argno);

	ss_key_type_set(kt, typid, what);
	return typid;
}

/*
 * The key argument argno converted to elemtype, the key type of the value
 * it is looked up in (none: InvalidOid), with its type in *keytype.
 */
extern Datum ss_lookup_key_arg(FunctionCallInfo fcinfo, int argno,
							   Oid elemtype, const char *typname,
							   const char *what, Oid *keytype);

#endif							/* SS_AGGUTIL_H */
