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

static void
cms_agg_check(const struct varlena *value, bool full)
{
	if (full)
		cms_check((const CmsData *) value);
	else
		cms_check_header((const CmsData *) value);
}

static void *
cms_state_new(MemoryContext cxt, struct varlena *value)
{
	CmsAggState *state = MemoryContextAlloc(cxt, sizeof(CmsAggState));

	state->magic = CMS_AGG_STATE_MAGIC;
	state->cms = (CmsData *) value;
	return state;
}

/* The geometry is the same, so the sketch is merged in place. */
static void
cms_state_merge(void *state, MemoryContext cxt, const struct varlena *value)
{
	cms_merge_into(((CmsAggState *) state)->cms, (const CmsData *) value);
}

static const SSValueAgg cms_agg = {
	.state_magic = CMS_AGG_STATE_MAGIC,
	.serial_magic = CMS_AGG_SERIAL_MAGIC,
	.value_offset = offsetof(CmsAggState, cms),
	.min_size = CMS_HEADER_SIZE,
	.what = "count-min sketch",
	.hint = "Use only the cms_agg support functions (cms_agg_trans, cms_agg_trans_weighted, cms_union_agg_trans, cms_agg_combine, cms_agg_serial, cms_agg_deserial, cms_agg_final) together.",
	.aggname = "cms_agg",
	.trans_fname = {"cms_agg_trans", "cms_agg_trans_weighted"},
	.count_noun = "weight",
	.count_detail = "A count-min sketch only adds counts (the cash-register model); its estimates would no longer be upper bounds after a subtraction.",
	.params_null = "epsilon and delta of cms_agg must not be NULL",
	.check = cms_agg_check,
	.state_new = cms_state_new,
	.merge = cms_state_merge,
};

/* cms_union_agg(cms) and the support functions both aggregates share */
SS_VALUE_AGG_FUNCTIONS(cms, cms_agg);

/*
 * Transition of cms_agg(key, epsilon, delta) and, with one argument more,
 * cms_agg(key, weight, epsilon, delta) (the C function
 * cms_agg_trans_weighted).
 *
 * A row with a NULL key or a NULL weight is no stream item and is skipped
 * without looking at the other arguments.  epsilon and delta must not be
 * NULL and must be the same on every row: they fix the sketch's geometry.
 * A weight of 0 adds nothing, but the row still counts as input, so the
 * result is an empty sketch rather than NULL.
 */
Datum
cms_agg_trans(PG_FUNCTION_ARGS)
{
	SSKeyAggRow row;
	CmsAggState *state;
	double		epsilon;
	double		delta;
	Oid			keytype;
	SSKeyType  *ki = (SSKeyType *) fcinfo->flinfo->fn_extra;

	if (!ss_key_agg_row(fcinfo, &cms_agg, &row))
		return ss_agg_keep_state(fcinfo, row.state);
	state = row.state;
	epsilon = PG_GETARG_FLOAT8(row.paramarg);
	delta = PG_GETARG_FLOAT8(row.paramarg + 1);

	if (ki == NULL)
	{
		ki = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
									sizeof(SSKeyType));
		fcinfo->flinfo->fn_extra = ki;
	}
	keytype = ss_key_type_arg(fcinfo, 1, ki, CMS_KEY_WHAT);

	if (state == NULL)
	{
		CmsGeometry g;
		MemoryContext oldcxt;
		CmsData    *cms;

		cms_geometry_for_bounds(epsilon, delta, &g);
		oldcxt = MemoryContextSwitchTo(row.aggcontext);
		cms = cms_create_empty(&g, SS_DEFAULT_SEED, keytype, epsilon, delta);
		state = cms_state_new(row.aggcontext, (struct varlena *) cms);
		MemoryContextSwitchTo(oldcxt);
	}
	else if (epsilon != state->cms->epsilon || delta != state->cms->delta)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epsilon and delta of cms_agg must be the same in every row"),
				 errdetail("The aggregate started with epsilon %g and delta %g, but a later row has epsilon %g and delta %g.",
						   state->cms->epsilon, state->cms->delta,
						   epsilon, delta)));

	if (row.count > 0)
		cms_add_hash(state->cms,
					 ss_hash_datum(PG_GETARG_DATUM(1), ki->typlen,
								   ki->typbyval, state->cms->seed),
					 row.count);

	PG_RETURN_POINTER(state);
}

Datum
cms_agg_trans_weighted(PG_FUNCTION_ARGS)
{
	return cms_agg_trans(fcinfo);
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
