/*-------------------------------------------------------------------------
 *
 * sample_agg.c
 *	  sample_agg(value, n [, weight]): a random sample of n of the values,
 *	  as an array, in memory (docs/bfile.md, "What users get").
 *
 * Each value gets a key: log(U) / w for U uniform in (0, 1] and its weight
 * w (1 without one).  The sample is the n values of largest key (the
 * exponential-key method of Efraimidis and Spirakis): uniform without
 * replacement for equal weights, and with weights, each draw takes a
 * remaining value with probability proportional to its weight.  Because
 * the keys are drawn independently per value, the n largest keys of a
 * union are the n largest of the parts' n largest: the combine function
 * keeps that, so a parallel aggregate's result is a sample of the whole
 * input with the same law.
 *
 * The state keeps the n largest keys in a min-heap, with copies of their
 * values, in the aggregate's memory context.  Serialized (parallel
 * query), it is a header and the entries, each value through its type's
 * binary send/receive functions (text output/input where a type has no
 * binary ones).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "ss_aggutil.h"

PG_FUNCTION_INFO_V1(sample_agg_trans);
PG_FUNCTION_INFO_V1(sample_agg_trans_weighted);
PG_FUNCTION_INFO_V1(sample_agg_combine);
PG_FUNCTION_INFO_V1(sample_agg_serial);
PG_FUNCTION_INFO_V1(sample_agg_deserial);
PG_FUNCTION_INFO_V1(sample_agg_final);

#define SAMPLE_AGG_MAGIC	0x53414D50	/* "SAMP" */
#define SAMPLE_AGG_MAX_N	10000000

typedef struct SampleEntry
{
	double		key;
	Datum		value;
} SampleEntry;

typedef struct SampleState
{
	uint32		magic;
	int32		n;				/* the sample's size */
	Oid			elemtype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int32		count;			/* entries in the heap, <= n */
	int32		cap;			/* entries allocated, <= n */
	int64		seen;			/* values offered */
	SampleEntry *heap;			/* min-heap on key */
} SampleState;

static SampleState *
state_check(Datum d)
{
	SampleState *st = (SampleState *) DatumGetPointer(d);

	if (st->magic != SAMPLE_AGG_MAGIC)
		elog(ERROR, "sample_agg: not a sample_agg state");
	return st;
}

static SampleState *
state_new(MemoryContext cxt, int32 n, Oid elemtype)
{
	SampleState *st = MemoryContextAllocZero(cxt, sizeof(SampleState));

	st->magic = SAMPLE_AGG_MAGIC;
	st->n = n;
	st->elemtype = elemtype;
	get_typlenbyvalalign(elemtype, &st->typlen, &st->typbyval, &st->typalign);
	/* grown as values come, up to n */
	st->cap = Min(n, 1024);
	st->heap = MemoryContextAlloc(cxt, sizeof(SampleEntry) * st->cap);
	return st;
}

static inline void
swap_entries(SampleEntry *h, int i, int j)
{
	SampleEntry t = h[i];

	h[i] = h[j];
	h[j] = t;
}

static void
sift_down(SampleEntry *h, int count, int i)
{
	for (;;)
	{
		int			l = 2 * i + 1;
		int			r = l + 1;
		int			m = i;

		if (l < count && h[l].key < h[m].key)
			m = l;
		if (r < count && h[r].key < h[m].key)
			m = r;
		if (m == i)
			return;
		swap_entries(h, i, m);
		i = m;
	}
}

static void
sift_up(SampleEntry *h, int i)
{
	while (i > 0)
	{
		int			p = (i - 1) / 2;

		if (h[p].key <= h[i].key)
			return;
		swap_entries(h, i, p);
		i = p;
	}
}

/*
 * Offer a value with its key; the value is copied into cxt if it is kept.
 * Keeps the n largest keys.
 */
static void
offer(SampleState *st, MemoryContext cxt, double key, Datum value)
{
	Datum		copy;

	if (st->count == st->n && key <= st->heap[0].key)
		return;
	copy = st->typbyval ? value :
		PointerGetDatum(MemoryContextAlloc(cxt, datumGetSize(value, false, st->typlen)));
	if (!st->typbyval)
		memcpy(DatumGetPointer(copy), DatumGetPointer(value),
			   datumGetSize(value, false, st->typlen));
	if (st->count == st->n)
	{
		if (!st->typbyval)
			pfree(DatumGetPointer(st->heap[0].value));
		st->heap[0].key = key;
		st->heap[0].value = copy;
		sift_down(st->heap, st->count, 0);
		return;
	}
	if (st->count == st->cap)
	{
		st->cap = (int32) Min((int64) st->n, (int64) st->cap * 2);
		st->heap = repalloc(st->heap, sizeof(SampleEntry) * st->cap);
	}
	st->heap[st->count].key = key;
	st->heap[st->count].value = copy;
	sift_up(st->heap, st->count);
	st->count++;
}

/* log(U) / w for U uniform in (0, 1]: larger keys are kept. */
static double
draw_key(double weight)
{
	double		u = 1.0 - pg_prng_double(&pg_global_prng_state);	/* (0, 1] */

	return log(u) / weight;
}

/*
 * sample_agg_trans(state, value anyelement, n int) and, with one argument
 * more, sample_agg_trans(state, value anyelement, n int, weight float8)
 * (the C function sample_agg_trans_weighted)
 */
Datum
sample_agg_trans(PG_FUNCTION_ARGS)
{
	bool		weighted = PG_NARGS() == 4;
	MemoryContext cxt = ss_agg_context(fcinfo, "sample_agg_trans");
	SampleState *st = PG_ARGISNULL(0) ? NULL : state_check(PG_GETARG_DATUM(0));
	double		weight = 1.0;
	int32		n;
	Datum		value;

	if (PG_ARGISNULL(2))
		ss_null_argument("the sample size of sample_agg must not be NULL");
	n = PG_GETARG_INT32(2);
	if (n < 1 || n > SAMPLE_AGG_MAX_N)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sample_agg sample size %d is out of range", n),
				 errhint("Use 1 to %d; a bfile table keeps larger samples.",
						 SAMPLE_AGG_MAX_N)));
	if (st == NULL)
		st = state_new(cxt, n, get_fn_expr_argtype(fcinfo->flinfo, 1));
	else if (st->n != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the sample size of sample_agg must be the same for every row")));
	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(st);	/* NULL values are skipped */
	if (weighted)
	{
		if (PG_ARGISNULL(3))
			PG_RETURN_POINTER(st);	/* as is a NULL weight */
		weight = PG_GETARG_FLOAT8(3);
		if (isnan(weight) || isinf(weight) || weight < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sample_agg weight %g is not a finite non-negative number", weight)));
		if (weight == 0)
			PG_RETURN_POINTER(st);	/* never drawn */
	}
	value = PG_GETARG_DATUM(1);
	if (!st->typbyval && st->typlen == -1)
		value = PointerGetDatum(PG_DETOAST_DATUM(value));
	st->seen++;
	offer(st, cxt, draw_key(weight), value);
	PG_RETURN_POINTER(st);
}

Datum
sample_agg_trans_weighted(PG_FUNCTION_ARGS)
{
	return sample_agg_trans(fcinfo);
}

/* The n largest keys of both: a sample of the union with the same law. */
Datum
sample_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = ss_agg_context(fcinfo, "sample_agg_combine");
	SampleState *a = PG_ARGISNULL(0) ? NULL : state_check(PG_GETARG_DATUM(0));
	SampleState *b = PG_ARGISNULL(1) ? NULL : state_check(PG_GETARG_DATUM(1));

	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (a == NULL)
	{
		a = state_new(cxt, b->n, b->elemtype);
	}
	else if (a->n != b->n || a->elemtype != b->elemtype)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot combine sample_agg states of different sample sizes or types")));
	for (int i = 0; i < b->count; i++)
		offer(a, cxt, b->heap[i].key, b->heap[i].value);
	a->seen += b->seen;
	PG_RETURN_POINTER(a);
}

/* header: magic, n, count, seen, the type's name; then key and value per entry */
Datum
sample_agg_serial(PG_FUNCTION_ARGS)
{
	SampleState *st = state_check(PG_GETARG_DATUM(0));
	StringInfoData buf;
	Oid			sendfn;
	bool		varlena;
	bool		binary;
	FmgrInfo	flinfo;

	getTypeBinaryOutputInfo(st->elemtype, &sendfn, &varlena);
	binary = OidIsValid(sendfn);
	if (!binary)
		getTypeOutputInfo(st->elemtype, &sendfn, &varlena);
	fmgr_info(sendfn, &flinfo);

	pq_begintypsend(&buf);
	pq_sendint32(&buf, SAMPLE_AGG_MAGIC);
	pq_sendint32(&buf, (uint32) st->n);
	pq_sendint32(&buf, (uint32) st->count);
	pq_sendint64(&buf, st->seen);
	pq_sendint32(&buf, st->elemtype);
	pq_sendbyte(&buf, binary ? 1 : 0);
	for (int i = 0; i < st->count; i++)
	{
		pq_sendfloat8(&buf, st->heap[i].key);
		if (binary)
		{
			bytea	   *b = SendFunctionCall(&flinfo, st->heap[i].value);

			pq_sendint32(&buf, VARSIZE(b) - VARHDRSZ);
			pq_sendbytes(&buf, VARDATA(b), VARSIZE(b) - VARHDRSZ);
		}
		else
		{
			char	   *s = OutputFunctionCall(&flinfo, st->heap[i].value);

			pq_sendint32(&buf, (uint32) strlen(s));
			pq_sendbytes(&buf, s, strlen(s));
		}
	}
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

static void
damaged_state(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("invalid serialized sample_agg state")));
}

Datum
sample_agg_deserial(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = ss_agg_context(fcinfo, "sample_agg_deserial");
	bytea	   *bytes = PG_GETARG_BYTEA_PP(0);
	StringInfoData buf;
	SampleState *st;
	int32		n,
				count;
	int64		seen;
	Oid			elemtype;
	bool		binary;
	Oid			recvfn;
	Oid			ioparam;
	FmgrInfo	flinfo;

	buf.data = VARDATA_ANY(bytes);
	buf.len = VARSIZE_ANY_EXHDR(bytes);
	buf.maxlen = buf.len;
	buf.cursor = 0;
	if (buf.len < 25 || pq_getmsgint(&buf, 4) != SAMPLE_AGG_MAGIC)
		damaged_state();
	n = (int32) pq_getmsgint(&buf, 4);
	count = (int32) pq_getmsgint(&buf, 4);
	seen = pq_getmsgint64(&buf);
	elemtype = pq_getmsgint(&buf, 4);
	binary = pq_getmsgbyte(&buf) != 0;
	if (n < 1 || n > SAMPLE_AGG_MAX_N || count < 0 || count > n || seen < count ||
		!OidIsValid(elemtype) || count > (buf.len - buf.cursor) / 12)
		damaged_state();
	st = state_new(cxt, n, elemtype);
	st->seen = seen;
	if (binary)
		getTypeBinaryInputInfo(elemtype, &recvfn, &ioparam);
	else
		getTypeInputInfo(elemtype, &recvfn, &ioparam);
	fmgr_info(recvfn, &flinfo);
	for (int i = 0; i < count; i++)
	{
		double		key = pq_getmsgfloat8(&buf);
		uint32		len = pq_getmsgint(&buf, 4);
		const char *data;
		Datum		value;

		if (len > (uint32) (buf.len - buf.cursor) || isnan(key) || key > 0)
			damaged_state();
		data = pq_getmsgbytes(&buf, (int) len);
		if (binary)
		{
			StringInfoData vb;

			initStringInfo(&vb);
			appendBinaryStringInfo(&vb, data, (int) len);
			value = ReceiveFunctionCall(&flinfo, &vb, ioparam, -1);
			pfree(vb.data);
		}
		else
			value = InputFunctionCall(&flinfo, pnstrdup(data, len), ioparam, -1);
		offer(st, cxt, key, value);
	}
	if (buf.cursor != buf.len)
		damaged_state();
	PG_RETURN_POINTER(st);
}

static int
entry_cmp_desc(const void *a, const void *b)
{
	double		x = ((const SampleEntry *) a)->key;
	double		y = ((const SampleEntry *) b)->key;

	return x > y ? -1 : x < y;
}

/* The sample, largest keys first (a random order); NULL if no value. */
Datum
sample_agg_final(PG_FUNCTION_ARGS)
{
	SampleState *st;
	SampleEntry *sorted;
	Datum	   *values;
	ArrayType  *result;

	(void) ss_agg_context(fcinfo, "sample_agg_final");
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	st = state_check(PG_GETARG_DATUM(0));
	if (st->count == 0)
		PG_RETURN_NULL();
	sorted = palloc(sizeof(SampleEntry) * st->count);
	memcpy(sorted, st->heap, sizeof(SampleEntry) * st->count);
	qsort(sorted, st->count, sizeof(SampleEntry), entry_cmp_desc);
	values = palloc(sizeof(Datum) * st->count);
	for (int i = 0; i < st->count; i++)
		values[i] = sorted[i].value;
	result = construct_array(values, st->count, st->elemtype, st->typlen,
							 st->typbyval, st->typalign);
	PG_RETURN_ARRAYTYPE_P(result);
}
