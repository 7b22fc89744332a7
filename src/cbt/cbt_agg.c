/*-------------------------------------------------------------------------
 *
 * cbt_agg.c
 *	  A cbt's aggregates outside an Agg node (see cbt_agg.h).
 *
 * Support functions find what they need of an Agg node in fcinfo->context:
 * AggCheckCallContext and AggRegisterCallback read curaggcontext (here,
 * the states' expression context, whose per-tuple memory holds every
 * group's states), AggGetTempMemoryContext reads tmpcontext (the
 * per-row context).  AggGetAggref finds no aggregate: only ordered-set
 * aggregates need one, and definitions refuse them.  fn_expr is the
 * expression nodeAgg builds, so polymorphic functions resolve their
 * argument types.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "cbt_agg.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_agg.h"
#include "utils/datum.h"
#include "utils/expandeddatum.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "common/hashfn.h"
#include "utils/memutils.h"

typedef struct AggFns
{
	FmgrInfo	trans;
	FmgrInfo	combine;
	FmgrInfo	serial;			/* internal states only */
	FmgrInfo	deserial;
	FmgrInfo	final;
	bool		has_final;
	bool		internal;
	int			nargs;			/* transition inputs after the state */
	ExprState **args;
	int			nfinalargs;
	Oid			collation;
	int16		translen;
	bool		transbyval;
	Datum		initval;
	bool		initval_isnull;
	int16		resultlen;
	bool		resultbyval;
} AggFns;

struct CbtAggRun
{
	const CbtDef *def;
	MemoryContext cxt;
	TupleDesc	input_desc;
	ExprContext *row_econtext;	/* arguments, deserialized states */
	ExprContext *state_econtext;	/* per-tuple memory: the states */
	MemoryContext serial_cxt;	/* a serial function's garbage, reset after
								 * each call: a round serializes every group */
	AggState   *aggstate;
	AggFns	   *fns;
	FmgrInfo   *key_hash;		/* the keys' extended hash functions */
	FmgrInfo   *key_eq;			/* and equality functions */
};

/* flags byte of a serialized state */
#define STATE_VALUE		0
#define STATE_NULL		1
#define STATE_NOTRANS	2

CbtAggRun *
cbt_agg_begin(const CbtDef *def, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	CbtAggRun  *run = palloc0(sizeof(CbtAggRun));
	int			ncols = def->nkeys + def->ninputs;

	run->def = def;
	run->cxt = cxt;
	run->input_desc = CreateTemplateTupleDesc(ncols);
	for (int i = 0; i < ncols; i++)
	{
		const CbtColumn *c = i < def->nkeys ? &def->keys[i] :
			&def->inputs[i - def->nkeys];

		TupleDescInitEntry(run->input_desc, i + 1, c->name, c->type, c->typmod, 0);
		TupleDescInitEntryCollation(run->input_desc, i + 1, c->collation);
	}
	run->row_econtext = CreateStandaloneExprContext();
	run->state_econtext = CreateStandaloneExprContext();
	run->serial_cxt = AllocSetContextCreate(cxt, "cbt serialize",
											ALLOCSET_SMALL_SIZES);
	run->aggstate = makeNode(AggState);
	run->aggstate->curaggcontext = run->state_econtext;
	run->aggstate->tmpcontext = run->row_econtext;
	run->aggstate->aggcontexts = palloc(sizeof(ExprContext *));
	run->aggstate->aggcontexts[0] = run->state_econtext;
	run->aggstate->current_set = 0;

	run->key_hash = palloc0(sizeof(FmgrInfo) * def->nkeys);
	run->key_eq = palloc0(sizeof(FmgrInfo) * def->nkeys);
	for (int k = 0; k < def->nkeys; k++)
	{
		TypeCacheEntry *tc = lookup_type_cache(def->keys[k].type,
											   TYPECACHE_HASH_EXTENDED_PROC |
											   TYPECACHE_EQ_OPR);

		if (!OidIsValid(tc->hash_extended_proc) || !OidIsValid(tc->eq_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("group key \"%s\" of type %s cannot be hashed",
							def->keys[k].name, format_type_be(def->keys[k].type)),
					 errdetail("A cbt groups by hashing, as hash aggregation does: the type needs a hash operator class.")));
		fmgr_info_cxt(tc->hash_extended_proc, &run->key_hash[k], cxt);
		fmgr_info_cxt(get_opcode(tc->eq_opr), &run->key_eq[k], cxt);
	}
	run->fns = palloc0(sizeof(AggFns) * def->naggs);
	for (int a = 0; a < def->naggs; a++)
	{
		const CbtAgg *agg = &def->aggs[a];
		Aggref	   *aggref = agg->aggref;
		AggFns	   *f = &run->fns[a];
		Oid			inputTypes[FUNC_MAX_ARGS];
		int			nargs = get_aggregate_argtypes(aggref, inputTypes);
		Expr	   *expr;
		ListCell   *lc;
		int			i = 0;

		f->nargs = nargs;
		f->collation = aggref->inputcollid;
		f->internal = agg->transtype == INTERNALOID;
		get_typlenbyval(agg->transtype, &f->translen, &f->transbyval);
		get_typlenbyval(aggref->aggtype, &f->resultlen, &f->resultbyval);
		f->initval_isnull = agg->initval_isnull;
		f->initval = agg->initval_isnull ? (Datum) 0 :
			datumCopy(agg->initval, f->transbyval, f->translen);

		fmgr_info_cxt(agg->transfn, &f->trans, cxt);
		build_aggregate_transfn_expr(inputTypes, nargs, 0, aggref->aggvariadic,
									 agg->transtype, aggref->inputcollid,
									 agg->transfn, InvalidOid, &expr, NULL);
		fmgr_info_set_expr((Node *) expr, &f->trans);

		/* nodeAgg builds the combine function's call as a transition's */
		fmgr_info_cxt(agg->combinefn, &f->combine, cxt);
		build_aggregate_transfn_expr(unconstify(Oid *, &agg->transtype), 1, 0, false,
									 agg->transtype, aggref->inputcollid,
									 agg->combinefn, InvalidOid, &expr, NULL);
		fmgr_info_set_expr((Node *) expr, &f->combine);

		if (f->internal)
		{
			fmgr_info_cxt(agg->serialfn, &f->serial, cxt);
			build_aggregate_serialfn_expr(agg->serialfn, &expr);
			fmgr_info_set_expr((Node *) expr, &f->serial);
			fmgr_info_cxt(agg->deserialfn, &f->deserial, cxt);
			build_aggregate_deserialfn_expr(agg->deserialfn, &expr);
			fmgr_info_set_expr((Node *) expr, &f->deserial);
		}
		f->has_final = OidIsValid(agg->finalfn);
		if (f->has_final)
		{
			f->nfinalargs = agg->finalextra ? nargs + 1 : 1;
			fmgr_info_cxt(agg->finalfn, &f->final, cxt);
			build_aggregate_finalfn_expr(inputTypes, f->nfinalargs,
										 agg->transtype, aggref->aggtype,
										 aggref->inputcollid, agg->finalfn,
										 &expr);
			fmgr_info_set_expr((Node *) expr, &f->final);
		}

		/*
		 * As the planner prepares a query's expressions: default arguments
		 * inserted, COLLATE clauses reduced to what the executor runs.
		 */
		f->args = palloc0(sizeof(ExprState *) * Max(nargs, 1));
		foreach(lc, aggref->args)
			f->args[i++] = ExecInitExpr(expression_planner(lfirst_node(TargetEntry, lc)->expr),
										NULL);
		if (i != nargs)
			elog(ERROR, "aggregate %u has %d arguments, %d expected",
				 aggref->aggfnoid, i, nargs);
	}
	MemoryContextSwitchTo(old);
	return run;
}

void
cbt_agg_end(CbtAggRun *run, bool commit)
{
	FreeExprContext(run->state_econtext, commit);
	FreeExprContext(run->row_econtext, commit);
}

TupleDesc
cbt_agg_input_desc(CbtAggRun *run)
{
	return run->input_desc;
}

static MemoryContext
state_cxt(CbtAggRun *run)
{
	return run->state_econtext->ecxt_per_tuple_memory;
}

void
cbt_agg_reset_states(CbtAggRun *run)
{
	ReScanExprContext(run->state_econtext);
}

void
cbt_agg_init_states(CbtAggRun *run, CbtStates *st)
{
	MemoryContext old = MemoryContextSwitchTo(state_cxt(run));
	int			n = run->def->naggs;

	st->values = palloc(sizeof(Datum) * n);
	st->isnull = palloc(sizeof(bool) * n);
	st->notrans = palloc(sizeof(bool) * n);
	for (int a = 0; a < n; a++)
	{
		AggFns	   *f = &run->fns[a];

		st->values[a] = f->initval_isnull ? (Datum) 0 :
			datumCopy(f->initval, f->transbyval, f->translen);
		st->isnull[a] = f->initval_isnull;
		st->notrans[a] = f->initval_isnull;
	}
	MemoryContextSwitchTo(old);
}

/*
 * Keep what a transition or combine function returned as the state, as
 * nodeAgg does (ExecAggTransReparent): a new by-reference value is copied
 * into the state context unless it is a read-write expanded object already
 * there, and the old one is freed.
 */
static void
keep_state(CbtAggRun *run, AggFns *f, CbtStates *st, int a, Datum newval,
		   bool newnull)
{
	if (!f->transbyval &&
		DatumGetPointer(newval) != DatumGetPointer(st->values[a]))
	{
		MemoryContext old = MemoryContextSwitchTo(state_cxt(run));

		if (!newnull)
		{
			if (!(DatumIsReadWriteExpandedObject(newval, false, f->translen) &&
				  MemoryContextGetParent(DatumGetEOHP(newval)->eoh_context) ==
				  CurrentMemoryContext))
				newval = datumCopy(newval, f->transbyval, f->translen);
		}
		else
			newval = (Datum) 0;
		if (!st->isnull[a])
		{
			if (DatumIsReadWriteExpandedObject(st->values[a], false, f->translen))
				DeleteExpandedObject(st->values[a]);
			else
				pfree(DatumGetPointer(st->values[a]));
		}
		MemoryContextSwitchTo(old);
	}
	st->values[a] = newval;
	st->isnull[a] = newnull;
	st->notrans[a] = false;
}

/*
 * Call fn (a transition or combine function) on the state of aggregate a
 * and the nargs values already in fcinfo->args[1..]; strictness as
 * nodeAgg's.
 */
static void
transition(CbtAggRun *run, AggFns *f, FmgrInfo *fn, FunctionCallInfo fcinfo,
		   int nargs, CbtStates *st, int a)
{
	MemoryContext old;
	Datum		newval;

	if (fn->fn_strict)
	{
		for (int i = 1; i <= nargs; i++)
			if (fcinfo->args[i].isnull)
				return;
		if (st->notrans[a])
		{
			/* the first non-NULL input is the state (CREATE AGGREGATE checks the types) */
			old = MemoryContextSwitchTo(state_cxt(run));
			st->values[a] = datumCopy(fcinfo->args[1].value, f->transbyval, f->translen);
			st->isnull[a] = false;
			st->notrans[a] = false;
			MemoryContextSwitchTo(old);
			return;
		}
		if (st->isnull[a])
			return;
	}
	fcinfo->args[0].value = st->values[a];
	fcinfo->args[0].isnull = st->isnull[a];
	fcinfo->isnull = false;
	old = MemoryContextSwitchTo(run->row_econtext->ecxt_per_tuple_memory);
	newval = FunctionCallInvoke(fcinfo);
	MemoryContextSwitchTo(old);
	keep_state(run, f, st, a, newval, fcinfo->isnull);
}

void
cbt_agg_advance(CbtAggRun *run, CbtStates *st, TupleTableSlot *input)
{
	ExprContext *ec = run->row_econtext;
	LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);

	ResetExprContext(ec);
	ec->ecxt_scantuple = input;
	for (int a = 0; a < run->def->naggs; a++)
	{
		AggFns	   *f = &run->fns[a];
		MemoryContext old;

		InitFunctionCallInfoData(*fcinfo, &f->trans, f->nargs + 1, f->collation,
								 (Node *) run->aggstate, NULL);
		old = MemoryContextSwitchTo(ec->ecxt_per_tuple_memory);
		for (int i = 0; i < f->nargs; i++)
			fcinfo->args[i + 1].value = ExecEvalExpr(f->args[i], ec,
													 &fcinfo->args[i + 1].isnull);
		MemoryContextSwitchTo(old);
		transition(run, f, &f->trans, fcinfo, f->nargs, st, a);
	}
}

void
cbt_agg_combine(CbtAggRun *run, CbtStates *st, const CbtStates *other)
{
	LOCAL_FCINFO(fcinfo, 2);

	for (int a = 0; a < run->def->naggs; a++)
	{
		AggFns	   *f = &run->fns[a];

		/* a state that never saw an input adds nothing */
		if (other->notrans[a])
			continue;
		InitFunctionCallInfoData(*fcinfo, &f->combine, 2, f->collation,
								 (Node *) run->aggstate, NULL);
		fcinfo->args[1].value = other->values[a];
		fcinfo->args[1].isnull = other->isnull[a];
		transition(run, f, &f->combine, fcinfo, 1, st, a);
	}
}

/*
 * A value's bytes as stored in records and PAOs: the flag, then for a
 * value its length and bytes (a by-value datum's typlen bytes, a varlena
 * whole and detoasted, with an expanded object flattened, a cstring with
 * its NUL, a fixed-length by-reference value's typlen bytes).
 */
static void
value_put(StringInfo buf, Datum value, bool isnull, int16 typlen, bool byval)
{
	uint32		len;
	const char *bytes;
	char		byval_bytes[sizeof(Datum)];

	if (isnull)
	{
		appendStringInfoChar(buf, STATE_NULL);
		return;
	}
	if (byval)
	{
		store_att_byval(byval_bytes, value, typlen);
		len = typlen;
		bytes = byval_bytes;
	}
	else if (typlen == -1)
	{
		struct varlena *v = PG_DETOAST_DATUM(value);

		len = VARSIZE(v);
		bytes = (const char *) v;
	}
	else if (typlen == -2)
	{
		bytes = DatumGetCString(value);
		len = strlen(bytes) + 1;
	}
	else
	{
		len = typlen;
		bytes = DatumGetPointer(value);
	}
	appendStringInfoChar(buf, STATE_VALUE);
	appendBinaryStringInfo(buf, (const char *) &len, sizeof(len));
	appendBinaryStringInfo(buf, bytes, len);
	/* a detoasted (or short-header) varlena was copied */
	if (typlen == -1 && bytes != DatumGetPointer(value))
		pfree((void *) bytes);
}

/*
 * Read a value_put value from data[*pos..len), copied into the current
 * memory context (aligned); false if damaged.  *flag gets the flag byte.
 */
static bool
value_get(const char *data, Size len, Size *pos, int16 typlen, bool byval,
		  bool internal, char *flag, Datum *value, uint32 *vlen_out)
{
	uint32		vlen;
	const char *p;

	if (*pos >= len)
		return false;
	*flag = data[(*pos)++];
	*value = (Datum) 0;
	if (*flag == STATE_NULL || *flag == STATE_NOTRANS)
		return true;
	if (*flag != STATE_VALUE || len - *pos < sizeof(vlen))
		return false;
	memcpy(&vlen, data + *pos, sizeof(vlen));
	*pos += sizeof(vlen);
	if (vlen > len - *pos)
		return false;
	p = data + *pos;
	*pos += vlen;
	*vlen_out = vlen;
	if (internal)
	{
		/* the serial function's bytes, as a bytea for the deserial function */
		bytea	   *b = palloc(VARHDRSZ + vlen);

		SET_VARSIZE(b, VARHDRSZ + vlen);
		memcpy(VARDATA(b), p, vlen);
		*value = PointerGetDatum(b);
		return true;
	}
	if (byval)
	{
		union
		{
			Datum		d;
			char		c[sizeof(Datum)];
		}			aligned;

		if (vlen != (uint32) typlen)
			return false;
		memcpy(aligned.c, p, vlen);
		*value = fetch_att(aligned.c, true, typlen);
		return true;
	}
	if (typlen == -1 ?
		(vlen < VARHDRSZ || VARSIZE((const struct varlena *) p) != vlen) :
		typlen == -2 ?
		(vlen == 0 || memchr(p, '\0', vlen) != p + vlen - 1) :
		vlen != (uint32) typlen)
		return false;
	{
		char	   *copy = palloc(vlen);

		memcpy(copy, p, vlen);
		*value = PointerGetDatum(copy);
	}
	return true;
}

void
cbt_agg_serialize(CbtAggRun *run, const CbtStates *st, StringInfo buf)
{
	for (int a = 0; a < run->def->naggs; a++)
	{
		AggFns	   *f = &run->fns[a];

		if (st->notrans[a])
			appendStringInfoChar(buf, STATE_NOTRANS);
		else if (f->internal && !st->isnull[a])
		{
			LOCAL_FCINFO(fcinfo, 1);
			MemoryContext old = MemoryContextSwitchTo(run->serial_cxt);
			Datum		b;

			InitFunctionCallInfoData(*fcinfo, &f->serial, 1, InvalidOid,
									 (Node *) run->aggstate, NULL);
			fcinfo->args[0].value = st->values[a];
			fcinfo->args[0].isnull = false;
			b = FunctionCallInvoke(fcinfo);
			if (fcinfo->isnull)
				elog(ERROR, "serialization function %u returned NULL",
					 f->serial.fn_oid);
			{
				bytea	   *v = DatumGetByteaPP(b);
				uint32		len = VARSIZE_ANY_EXHDR(v);

				/* buf grows in its own context */
				appendStringInfoChar(buf, STATE_VALUE);
				appendBinaryStringInfo(buf, (const char *) &len, sizeof(len));
				appendBinaryStringInfo(buf, VARDATA_ANY(v), len);
			}
			MemoryContextSwitchTo(old);
			MemoryContextReset(run->serial_cxt);
		}
		else
			value_put(buf, st->values[a], st->isnull[a], f->translen,
					  f->transbyval);
	}
}

bool
cbt_agg_deserialize(CbtAggRun *run, const char *data, Size len, CbtStates *st,
					Size *used)
{
	ExprContext *ec = run->row_econtext;
	MemoryContext old;
	Size		pos = 0;
	int			n = run->def->naggs;
	bool		ok = true;

	ResetExprContext(ec);
	old = MemoryContextSwitchTo(ec->ecxt_per_tuple_memory);
	st->values = palloc(sizeof(Datum) * n);
	st->isnull = palloc(sizeof(bool) * n);
	st->notrans = palloc(sizeof(bool) * n);
	for (int a = 0; a < n && ok; a++)
	{
		AggFns	   *f = &run->fns[a];
		char		flag;
		uint32		vlen;

		ok = value_get(data, len, &pos, f->translen, f->transbyval,
					   f->internal, &flag, &st->values[a], &vlen);
		if (!ok)
			break;
		st->notrans[a] = flag == STATE_NOTRANS;
		st->isnull[a] = flag != STATE_VALUE;
		if (f->internal && flag == STATE_VALUE)
		{
			LOCAL_FCINFO(fcinfo, 2);

			InitFunctionCallInfoData(*fcinfo, &f->deserial, 2, InvalidOid,
									 (Node *) run->aggstate, NULL);
			fcinfo->args[0].value = st->values[a];
			fcinfo->args[0].isnull = false;
			fcinfo->args[1].value = (Datum) 0;
			fcinfo->args[1].isnull = false;
			st->values[a] = FunctionCallInvoke(fcinfo);
			ok = !fcinfo->isnull;
		}
	}
	MemoryContextSwitchTo(old);
	*used = pos;
	return ok;
}

/* ---- input rows and keys ---- */

void
cbt_agg_row_serialize(CbtAggRun *run, TupleTableSlot *slot, int ncols,
					  StringInfo buf)
{
	slot_getsomeattrs(slot, ncols);
	for (int i = 0; i < ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(run->input_desc, i);

		value_put(buf, slot->tts_values[i], slot->tts_isnull[i],
				  att->attlen, att->attbyval);
	}
}

bool
cbt_agg_row_deserialize(CbtAggRun *run, const char *data, Size len, int ncols,
						TupleTableSlot *slot, Size *used)
{
	Size		pos = 0;

	ExecClearTuple(slot);
	for (int i = 0; i < ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(run->input_desc, i);
		char		flag;
		uint32		vlen;

		if (!value_get(data, len, &pos, att->attlen, att->attbyval, false,
					   &flag, &slot->tts_values[i], &vlen) ||
			flag == STATE_NOTRANS)
			return false;
		slot->tts_isnull[i] = flag == STATE_NULL;
	}
	for (int i = ncols; i < run->input_desc->natts; i++)
	{
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
	ExecStoreVirtualTuple(slot);
	*used = pos;
	return true;
}

uint64
cbt_agg_key_hash(CbtAggRun *run, TupleTableSlot *slot, uint64 seed)
{
	uint64		h = seed;

	slot_getsomeattrs(slot, run->def->nkeys);
	for (int k = 0; k < run->def->nkeys; k++)
	{
		uint64		colhash = 0x9e3779b97f4a7c15ULL;	/* NULL's */

		if (!slot->tts_isnull[k])
			colhash = DatumGetUInt64(FunctionCall2Coll(&run->key_hash[k],
													   run->def->keys[k].collation,
													   slot->tts_values[k],
													   UInt64GetDatum(seed)));
		h = hash_combine64(h, colhash);
	}
	return h;
}

bool
cbt_agg_keys_equal(CbtAggRun *run, TupleTableSlot *a, TupleTableSlot *b)
{
	slot_getsomeattrs(a, run->def->nkeys);
	slot_getsomeattrs(b, run->def->nkeys);
	for (int k = 0; k < run->def->nkeys; k++)
	{
		if (a->tts_isnull[k] || b->tts_isnull[k])
		{
			/* GROUP BY puts NULLs in one group */
			if (a->tts_isnull[k] != b->tts_isnull[k])
				return false;
			continue;
		}
		if (!DatumGetBool(FunctionCall2Coll(&run->key_eq[k],
											run->def->keys[k].collation,
											a->tts_values[k], b->tts_values[k])))
			return false;
	}
	return true;
}

void
cbt_agg_finalize(CbtAggRun *run, CbtStates *st, Datum *values, bool *isnull)
{
	for (int a = 0; a < run->def->naggs; a++)
	{
		AggFns	   *f = &run->fns[a];

		if (!f->has_final)
		{
			isnull[a] = st->isnull[a];
			values[a] = st->isnull[a] ? (Datum) 0 :
				datumCopy(st->values[a], f->transbyval, f->translen);
			continue;
		}
		{
			LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);
			bool		anynull = st->isnull[a];

			InitFunctionCallInfoData(*fcinfo, &f->final, f->nfinalargs,
									 f->collation, (Node *) run->aggstate, NULL);
			fcinfo->args[0].value = st->values[a];
			fcinfo->args[0].isnull = st->isnull[a];
			/* the dummy arguments of FINALFUNC_EXTRA, as nodeAgg passes them */
			for (int i = 1; i < f->nfinalargs; i++)
			{
				fcinfo->args[i].value = (Datum) 0;
				fcinfo->args[i].isnull = true;
				anynull = true;
			}
			if (f->final.fn_strict && anynull)
			{
				values[a] = (Datum) 0;
				isnull[a] = true;
				continue;
			}
			values[a] = FunctionCallInvoke(fcinfo);
			isnull[a] = fcinfo->isnull;
			/* not a pointer into a state that the next reset frees */
			if (!f->resultbyval && !isnull[a] &&
				!MemoryContextContains(CurrentMemoryContext,
									   DatumGetPointer(values[a])))
				values[a] = datumCopy(values[a], false, f->resultlen);
		}
	}
}
