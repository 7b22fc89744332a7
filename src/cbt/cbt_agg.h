/*-------------------------------------------------------------------------
 *
 * cbt_agg.h
 *	  Running a cbt's aggregates outside an Agg node: transition states of
 *	  groups, advanced by input rows, combined, serialized into PAOs and
 *	  finalized (docs/cbt.md, "Calling aggregate support functions").
 *
 * Every call follows nodeAgg's rules: a strict transition or combine
 * function skips NULL inputs and takes the first non-NULL input as its
 * state when the initial value is NULL; a state is combined into a fresh
 * initial state; a strict final function of a NULL state gives NULL.
 *
 * Memory: a group's states live in the run's state context, which the
 * caller resets (cbt_agg_reset_states) between groups it has serialized or
 * finalized; resetting also runs the callbacks transition functions
 * registered (AggRegisterCallback).
 *
 * The caller runs all of this as the table's owner (cbt_as_owner): the
 * support functions are user code, and so are the argument expressions
 * (constant folding at cbt_agg_begin may run them).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CBT_AGG_H
#define CBT_AGG_H

#include "postgres.h"

#include "cbt_def.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"

typedef struct CbtAggRun CbtAggRun;

/* One group's states: naggs of each. */
typedef struct CbtStates
{
	Datum	   *values;
	bool	   *isnull;
	bool	   *notrans;		/* no value yet (strict, NULL initial value) */
} CbtStates;

/*
 * Prepare def's aggregates in memory context cxt; input rows are slots of
 * cbt_input's columns (keys, then inputs).
 */
extern CbtAggRun *cbt_agg_begin(const CbtDef *def, MemoryContext cxt);
/* Free what cbt_agg_begin made (commit: run shutdown callbacks normally). */
extern void cbt_agg_end(CbtAggRun *run, bool commit);

/* The tuple descriptor of input rows (cbt_input's columns). */
extern TupleDesc cbt_agg_input_desc(CbtAggRun *run);

/* A group's initial states, in the state context. */
extern void cbt_agg_init_states(CbtAggRun *run, CbtStates *st);

/* Add one input row to a group's states. */
extern void cbt_agg_advance(CbtAggRun *run, CbtStates *st, TupleTableSlot *input);

/* Combine a group's states from another PAO's (deserialized) into st. */
extern void cbt_agg_combine(CbtAggRun *run, CbtStates *st,
							const CbtStates *other);

/* Append st serialized to buf; read it back (false: damaged bytes). */
extern void cbt_agg_serialize(CbtAggRun *run, const CbtStates *st,
							  StringInfo buf);
extern bool cbt_agg_deserialize(CbtAggRun *run, const char *data, Size len,
								CbtStates *st, Size *used);

/*
 * The final values of a group's states (values[naggs], isnull[naggs]); by
 * reference ones are allocated in the caller's memory context.
 */
extern void cbt_agg_finalize(CbtAggRun *run, CbtStates *st, Datum *values,
							 bool *isnull);

/*
 * Input rows and group keys as records and PAOs store them: the first
 * ncols columns of an input row (all of them for a record, the keys for a
 * PAO).  Deserialized values are copied into the current memory context;
 * the remaining columns are NULL.
 */
extern void cbt_agg_row_serialize(CbtAggRun *run, TupleTableSlot *slot,
								  int ncols, StringInfo buf);
extern bool cbt_agg_row_deserialize(CbtAggRun *run, const char *data,
									Size len, int ncols, TupleTableSlot *slot,
									Size *used);

/*
 * A group key's hash (the keys' extended hash functions with their
 * collations, combined) and key equality (the types' equality operators;
 * NULL equals NULL, as in GROUP BY).
 */
extern uint64 cbt_agg_key_hash(CbtAggRun *run, TupleTableSlot *slot,
							   uint64 seed);
extern bool cbt_agg_keys_equal(CbtAggRun *run, TupleTableSlot *a,
							   TupleTableSlot *b);

/* Forget every group's states (and run registered callbacks). */
extern void cbt_agg_reset_states(CbtAggRun *run);

#endif							/* CBT_AGG_H */
