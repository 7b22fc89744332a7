/*-------------------------------------------------------------------------
 *
 * cbt_groups.c
 *	  The groups of one key hash (see cbt_groups.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "cbt_groups.h"
#include "utils/memutils.h"

static void
damaged(CbtGroups *g, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("cbt \"%s\" holds a damaged %s",
					RelationGetRelationName(g->rel), what)));
}

void
cbt_groups_init(CbtGroups *g, Relation rel, CbtAggRun *run, int nkeys)
{
	TupleDesc	desc = cbt_agg_input_desc(run);

	memset(g, 0, sizeof(*g));
	g->rel = rel;
	g->run = run;
	g->nkeys = nkeys;
	g->cap = 4;
	g->keys = palloc(sizeof(TupleTableSlot *) * g->cap);
	g->states = palloc(sizeof(CbtStates) * g->cap);
	for (int i = 0; i < g->cap; i++)
		g->keys[i] = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	g->scratch = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	g->cxt = AllocSetContextCreate(CurrentMemoryContext, "cbt groups",
								   ALLOCSET_DEFAULT_SIZES);
}

/* The group of the key in g->scratch, made (initial states) if new. */
static int
group_of(CbtGroups *g)
{
	for (int i = 0; i < g->n; i++)
		if (cbt_agg_keys_equal(g->run, g->keys[i], g->scratch))
			return i;
	if (g->n == g->cap)
	{
		int			newcap = g->cap * 2;
		TupleDesc	desc = cbt_agg_input_desc(g->run);

		g->keys = repalloc(g->keys, sizeof(TupleTableSlot *) * newcap);
		g->states = repalloc(g->states, sizeof(CbtStates) * newcap);
		for (int i = g->cap; i < newcap; i++)
			g->keys[i] = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
		g->cap = newcap;
	}
	{
		MemoryContext old = MemoryContextSwitchTo(g->cxt);

		ExecCopySlot(g->keys[g->n], g->scratch);
		ExecMaterializeSlot(g->keys[g->n]);
		MemoryContextSwitchTo(old);
	}
	cbt_agg_init_states(g->run, &g->states[g->n]);
	return g->n++;
}

/* Fold an input row (a record's row bytes) into its group. */
void
cbt_groups_add_row(CbtGroups *g, const char *row, uint32 len)
{
	TupleDesc	desc = cbt_agg_input_desc(g->run);
	MemoryContext old = MemoryContextSwitchTo(g->cxt);
	Size		used;
	int			gi;

	if (!cbt_agg_row_deserialize(g->run, row, len, desc->natts, g->scratch,
								 &used) || used != len)
		damaged(g, "change log record");
	MemoryContextSwitchTo(old);
	gi = group_of(g);
	cbt_agg_advance(g->run, &g->states[gi], g->scratch);
}

/* Fold a PAO into its group (combine functions). */
void
cbt_groups_add_pao(CbtGroups *g, const char *pao, uint32 size)
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
	old = MemoryContextSwitchTo(g->cxt);
	if (!cbt_agg_row_deserialize(g->run, pao + sizeof(uint32), keylen,
								 g->nkeys, g->scratch, &used) ||
		used != keylen)
		damaged(g, "partial aggregate key");
	MemoryContextSwitchTo(old);
	gi = group_of(g);
	if (!cbt_agg_deserialize(g->run, pao + sizeof(uint32) + keylen,
							 size - sizeof(uint32) - keylen, &other, &used) ||
		used != size - sizeof(uint32) - keylen)
		damaged(g, "partial aggregate state");
	cbt_agg_combine(g->run, &g->states[gi], &other);
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
}

void
cbt_groups_free(CbtGroups *g)
{
	cbt_groups_reset(g);
	for (int i = 0; i < g->cap; i++)
		ExecDropSingleTupleTableSlot(g->keys[i]);
	ExecDropSingleTupleTableSlot(g->scratch);
	MemoryContextDelete(g->cxt);
}
