/*-------------------------------------------------------------------------
 *
 * cbt_def.h
 *	  The definition of a compressed buffer tree: its group keys, its
 *	  inputs and its aggregates (docs/cbt.md, "Aggregates").
 *
 * A definition is written by the user as a list of group-key columns
 * ('url text, day date') and a SQL select list of aggregate calls whose
 * inputs are declared where they are first used ('count(*) AS hits,
 * sum(bytes::bigint) AS bytes').  It is resolved into the query that
 * computes the same result over a relation of the keys and inputs:
 *
 *	SELECT url, count(*) AS hits, sum(bytes::bigint) AS bytes
 *	FROM (SELECT NULL::text AS url, NULL::bigint AS bytes) cbt_input
 *	GROUP BY url
 *
 * and that query, deparsed with every name outside pg_catalog qualified,
 * is what is stored; it is parsed and analyzed again (same rules) when a
 * backend first needs the definition.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CBT_DEF_H
#define CBT_DEF_H

#include "postgres.h"

#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"

#define CBT_MAX_COLUMNS		64	/* keys + aggregates + inputs */

typedef struct CbtColumn
{
	char	   *name;
	Oid			type;
	int32		typmod;
	Oid			collation;
} CbtColumn;

typedef struct CbtAgg
{
	char	   *name;			/* its result column */
	Aggref	   *aggref;			/* arguments are Vars of cbt_input (varno 1) */
	Oid			transfn;
	Oid			combinefn;
	Oid			serialfn;		/* InvalidOid unless the state is internal */
	Oid			deserialfn;
	Oid			finalfn;		/* InvalidOid: the state is the result */
	bool		finalextra;
	Oid			transtype;
	bool		initval_isnull;
	Datum		initval;
	int			carried_input;	/* the input its result column carries, or -1 */
} CbtAgg;

typedef struct CbtDef
{
	int			nkeys;
	CbtColumn  *keys;			/* cbt_input's columns 1..nkeys */
	int			ninputs;
	CbtColumn  *inputs;			/* cbt_input's columns nkeys+1.. */
	int			naggs;
	CbtAgg	   *aggs;
	char	   *query;			/* the stored, qualified text */
	Query	   *analyzed;		/* the query it was resolved from */
} CbtDef;

/*
 * Resolve a user's definition (cbt_create) in the current memory context;
 * errors name what is refused (docs/cbt.md).
 */
extern CbtDef *cbt_def_create(const char *group_by, const char *aggregates);

/* Resolve a stored definition again, as its table's owner would. */
extern CbtDef *cbt_def_load(const char *query, Oid owner);

/*
 * Whether a row of final values (a dump's) can become its group again:
 * every aggregate's result is its state (no final function, a state of
 * the result's type, not internal).  If not, *bad is the first aggregate
 * whose is not.
 */
extern bool cbt_def_restorable(const CbtDef *def, int *bad);

/*
 * Record that relation relid depends on what its definition names
 * (aggregates, functions, operators, types, collations), as a view does,
 * so that they cannot be dropped from under it without CASCADE.
 */
extern void cbt_def_record_dependencies(const CbtDef *def, Oid relid);

/* The relation's columns: keys, results, inputs no result carries. */
extern int	cbt_def_relation_columns(const CbtDef *def, CbtColumn *cols);

#endif							/* CBT_DEF_H */
