/*-------------------------------------------------------------------------
 *
 * cbt_groups.c
 *	  The groups of one key hash (see cbt_groups.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "cbt_groups.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

static void
damaged(CbtGroups *g, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("cbt \"%s\" holds a damaged %s",
					RelationGetRelationName(g->rel), what)));
}

/* An indexed CbtGroups' entry: a hash and its last group. */
typedef struct IndexEntry
{
	uint64		hash;
	int			last;
} IndexEntry;

/* Slots, states and per-group arrays for groups [from, to). */
static void
groups_grow(CbtGroups *g, int from, int to)
{
	TupleDesc	desc = cbt_agg_input_desc(g->run);

	if (from == 0)
	{
		g->keys = palloc(sizeof(TupleTableSlot *) * to);
		g->states = palloc(sizeof(CbtStates) * to);
		g->rows = palloc(sizeof(uint64) * to);
		g->hashes = palloc(sizeof(uint64) * to);
		g->chain = palloc(sizeof(int) * to);
	}
	else
	{
		g->keys = repalloc(g->keys, sizeof(TupleTableSlot *) * to);
		g->states = repalloc(g->states, sizeof(CbtStates) * to);
		g->rows = repalloc(g->rows, sizeof(uint64) * to);
		g->hashes = repalloc(g->hashes, sizeof(uint64) * to);
		g->chain = repalloc(g->chain, sizeof(int) * to);
	}
	for (int i = from; i < to; i++)
		g->keys[i] = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	g->cap = to;
}

void
cbt_groups_init(CbtGroups *g, Relation rel, CbtAggRun *run, int nkeys)
{
	memset(g, 0, sizeof(*g));
	g->rel = rel;
	g->run = run;
	g->nkeys = nkeys;
	groups_grow(g, 0, 4);
	g->scratch = MakeSingleTupleTableSlot(cbt_agg_input_desc(run),
										  &TTSOpsVirtual);
	g->cxt = AllocSetContextCreate(CurrentMemoryContext, "cbt groups",
								   ALLOCSET_DEFAULT_SIZES);
	g->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "cbt groups row",
									   ALLOCSET_SMALL_SIZES);
}

/* Let g hold groups of any hashes (its index lives in g->cxt). */
void
cbt_groups_index(CbtGroups *g)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(IndexEntry);
	ctl.hcxt = g->cxt;
	g->index = hash_create("cbt groups index", 256, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * The group of the key in g->scratch, of that hash if g is indexed (else
 * every group has its hash), made (initial states) if new.
 */
static int
group_of(CbtGroups *g, uint64 hash)
{
	IndexEntry *e = NULL;
	int			gi;

	if (g->index != NULL)
	{
		bool		found;

		e = hash_search(g->index, &hash, HASH_ENTER, &found);
		if (!found)
			e->last = -1;
		for (gi = e->last; gi >= 0; gi = g->chain[gi])
			if (cbt_agg_keys_equal(g->run, g->keys[gi], g->scratch))
				return gi;
	}
	else
	{
		for (gi = 0; gi < g->n; gi++)
			if (cbt_agg_keys_equal(g->run, g->keys[gi], g->scratch))
				return gi;
	}
	if (g->n == g->cap)
		groups_grow(g, g->cap, g->cap * 2);
	gi = g->n++;
	{
		MemoryContext old = MemoryContextSwitchTo(g->cxt);

		ExecCopySlot(g->keys[gi], g->scratch);
		ExecMaterializeSlot(g->keys[gi]);
		MemoryContextSwitchTo(old);
	}
	cbt_agg_init_states(g->run, &g->states[gi]);
	g->rows[gi] = 0;
	g->hashes[gi] = hash;
	g->chain[gi] = e != NULL ? e->last : -1;
	if (e != NULL)
		e->last = gi;
	return gi;
}

/* Fold an input row (a record's row bytes) into its group. */
static void
add_row(CbtGroups *g, uint64 hash, const char *row, uint32 len)
{
	TupleDesc	desc = cbt_agg_input_desc(g->run);
	MemoryContext old;
	Size		used;
	int			gi;

	/* a group keeps a copy of its first key (group_of): rows are garbage */
	MemoryContextReset(g->row_cxt);
	old = MemoryContextSwitchTo(g->row_cxt);

	if (!cbt_agg_row_deserialize(g->run, row, len, desc->natts, g->scratch,
								 &used) || used != len)
		damaged(g, "change log record");
	MemoryContextSwitchTo(old);
	gi = group_of(g, hash);
	cbt_agg_advance(g->run, &g->states[gi], g->scratch);
	g->rows[gi]++;
}

/* Fold a PAO standing for rows input rows into its group. */
static void
add_pao(CbtGroups *g, uint64 hash, const char *pao, uint32 size,
		uint64 rows)
{
	uint32		keylen;
	CbtStates	other;
	Size		used;
	MemoryContext old;
	int			gi;

	if (size < sizeof(uint32))
		damaged(g, "partial aggregate");
	memcpy(&keylen, pao, sizeof(uint32));
	if (keylen > size - sizeof(uint32))
		damaged(g, "partial aggregate");
	MemoryContextReset(g->row_cxt);
	old = MemoryContextSwitchTo(g->row_cxt);
	if (!cbt_agg_row_deserialize(g->run, pao + sizeof(uint32), keylen,
								 g->nkeys, g->scratch, &used) ||
		used != keylen)
		damaged(g, "partial aggregate key");
	MemoryContextSwitchTo(old);
	gi = group_of(g, hash);
	if (!cbt_agg_deserialize(g->run, pao + sizeof(uint32) + keylen,
							 size - sizeof(uint32) - keylen, &other, &used) ||
		used != size - sizeof(uint32) - keylen)
		damaged(g, "partial aggregate state");
	cbt_agg_combine(g->run, &g->states[gi], &other);
	g->rows[gi] += rows;
}

/* Fold a PAO of a fragment into its group (combine functions). */
void
cbt_groups_add_pao(CbtGroups *g, const char *pao, uint32 size)
{
	add_pao(g, 0, pao, size, 0);
}

/*
 * Fold a change log record of the hash into its group: bytes are what
 * follows the hash, an input row's, or with merge, a PAO's, counted or
 * not.  Returns the input rows it stands for.
 */
uint64
cbt_groups_add_record(CbtGroups *g, uint64 hash, bool merge,
					  const char *bytes, uint32 len)
{
	CbtCountedPao counted;
	uint32		first = 0;

	if (!merge)
	{
		add_row(g, hash, bytes, len);
		return 1;
	}
	if (len >= sizeof(uint32))
		memcpy(&first, bytes, sizeof(uint32));
	if (first == CBT_COUNTED_PAO_MARKER)
	{
		if (len < sizeof(counted))
			damaged(g, "partial aggregate");
		memcpy(&counted, bytes, sizeof(counted));
		add_pao(g, hash, bytes + sizeof(counted), len - sizeof(counted),
				counted.rows);
		return counted.rows;
	}
	add_pao(g, hash, bytes, len, 0);
	return 0;
}

/* Group i as a PAO, into out (reset first). */
void
cbt_groups_pao(CbtGroups *g, int i, StringInfo out)
{
	uint32		keylen = 0;
	int			at;

	resetStringInfo(out);
	appendBinaryStringInfo(out, (const char *) &keylen, sizeof(keylen));
	at = out->len;
	cbt_agg_row_serialize(g->run, g->keys[i], g->nkeys, out);
	keylen = (uint32) (out->len - at);
	memcpy(out->data, &keylen, sizeof(keylen));
	cbt_agg_serialize(g->run, &g->states[i], out);
}

/*
 * The PAO of a group given by its key (the first nkeys columns of key) and
 * its final values, which are its states (cbt_def_restorable); a NULL
 * value is a state that saw no input.
 */
void
cbt_pao_of_results(CbtAggRun *run, int nkeys, TupleTableSlot *key,
				   Datum *values, bool *isnull, StringInfo out)
{
	CbtStates	st;
	uint32		keylen = 0;
	int			at;

	st.values = values;
	st.isnull = isnull;
	st.notrans = isnull;
	resetStringInfo(out);
	appendBinaryStringInfo(out, (const char *) &keylen, sizeof(keylen));
	at = out->len;
	cbt_agg_row_serialize(run, key, nkeys, out);
	keylen = (uint32) (out->len - at);
	memcpy(out->data, &keylen, sizeof(keylen));
	cbt_agg_serialize(run, &st, out);
}

/* Forget every group (their keys and states). */
void
cbt_groups_reset(CbtGroups *g)
{
	for (int i = 0; i < g->n; i++)
		ExecClearTuple(g->keys[i]);
	ExecClearTuple(g->scratch);
	g->n = 0;
	cbt_agg_reset_states(g->run);
	MemoryContextReset(g->cxt);
	if (g->index != NULL)
		cbt_groups_index(g);	/* it went with g->cxt */
}

void
cbt_groups_free(CbtGroups *g)
{
	g->index = NULL;			/* goes with g->cxt */
	cbt_groups_reset(g);
	for (int i = 0; i < g->cap; i++)
		ExecDropSingleTupleTableSlot(g->keys[i]);
	ExecDropSingleTupleTableSlot(g->scratch);
	MemoryContextDelete(g->cxt);
	MemoryContextDelete(g->row_cxt);
}
