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
 * The analyzed query is what a cbt keeps: its node tree, whose functions,
 * operators, types and collations are object ids, as a view's rule keeps
 * them (cbt_defstore.c stores it in the metapage).  Nothing in it is
 * looked up by name again, so renames follow and no object created later
 * under any name can change what runs.  Text is only the dump's copy (the
 * table's label): it is deparsed from the ids with the table's current
 * column names, and resolved once, when a dump is restored.
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
	Query	   *analyzed;		/* the bound query: object ids, not names */
} CbtDef;

/*
 * Resolve a user's definition (cbt_create) in the current memory context;
 * errors name what is refused (docs/cbt.md).
 */
extern CbtDef *cbt_def_create(const char *group_by, const char *aggregates);

/*
 * Resolve a definition's text (a restored label, an upgraded cluster's
 * label, a table made before definitions were bound) as its table's
 * owner, or, restoring, as the user giving the label, without the
 * privilege checks a restore's later GRANTs satisfy; with qualified names
 * and search_path pinned to pg_catalog, pg_temp.
 */
extern CbtDef *cbt_def_load(const char *query, Oid owner, bool restoring);

/* The definition a bound query (the metapage's) describes, checked. */
extern CbtDef *cbt_def_from_tree(Query *q, Oid owner, bool check_privileges);

/*
 * The definition as SQL, with the given names for the relation's columns
 * (keys, results, inputs no result carries: cbt_def_relation_columns'
 * order) and every object named as it is named now.
 */
extern char *cbt_def_deparse(const CbtDef *def, int ncols,
							 const char *const *colnames);

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
 * so that they cannot be dropped from under it without CASCADE; refuse a
 * temporary object in the definition of a table that is not temporary.
 */
extern void cbt_def_record_dependencies(const CbtDef *def, Oid relid);

/* The relation's columns: keys, results, inputs no result carries. */
extern int	cbt_def_relation_columns(const CbtDef *def, CbtColumn *cols);

/* cbt_defstore.c: the bound query in the metapage (CbtMeta.definition) */
typedef enum CbtDefForm
{
	CBT_DEF_NONE,				/* no definition yet (CREATE TABLE ... USING) */
	CBT_DEF_BOUND,				/* a node tree of this cluster's ids */
	CBT_DEF_BOUND_ELSEWHERE,	/* a node tree of another cluster's ids
								 * (pg_upgrade copied the file) */
	CBT_DEF_TEXT				/* SQL text (tables of earlier versions) */
} CbtDefForm;

extern void cbt_def_store(const CbtDef *def, char *stored);
extern CbtDefForm cbt_def_stored_form(const char *stored);
extern void cbt_def_check_stored(const char *stored);
extern Query *cbt_def_stored_tree(const char *stored);

#endif							/* CBT_DEF_H */
