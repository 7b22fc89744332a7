/*-------------------------------------------------------------------------
 *
 * cbt_am.h
 *	  The `cbt` access method's state, the runtime of its definition, and
 *	  what its files share (cbt_am.c, cbt_scan.c, cbt_query.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CBT_AM_H
#define CBT_AM_H

#include "postgres.h"

#include "access/tableam.h"
#include "cbt.h"
#include "cbt_agg.h"
#include "ss_pending.h"
#include "streamsketch.h"

/*
 * rd_amcache: the metapage's parameters and definition, and what the
 * definition's text needs of the relation (its columns' names name the
 * keys, results and inputs; cbt_def_deparse).
 */
typedef struct CbtState
{
	CbtParams	params;
	Oid			relid;			/* InvalidOid in a constructor's state */
	Oid			owner;
	int			ncols;
	NameData	colnames[CBT_MAX_COLUMNS];
	char		definition[CBT_DEF_MAX];	/* as stored (cbt_defstore.c) */
	/* a label's definition text, until check_params resolves it */
	char	   *label_definition;
} CbtState;

/* What running a definition needs, per backend (cbt_runtime). */
typedef struct CbtRuntime
{
	MemoryContext cxt;
	char	   *definition;		/* the stored form it was built from */
	Oid			owner;
	int			natts;
	CbtDef	   *def;
	CbtAggRun  *run;
	int		   *input_src;		/* per input-row column: relation column */
	int		   *result_attno;	/* per aggregate: its relation column */
	bool	   *result_takes_input; /* per aggregate: carries an input */
	TupleTableSlot *input_slot;
} CbtRuntime;

typedef struct CbtOwnerSave
{
	Oid			userid;
	int			sec_context;
	int			nest;
} CbtOwnerSave;

extern const SSStructure cbt_structure;

extern CbtState *cbt_get_state(Relation rel);
extern CbtRuntime *cbt_runtime(Relation rel);
extern char *cbt_definition_text(Relation rel);
extern void cbt_check_partition(Relation top, Relation first, Relation other);
extern void cbt_as_owner(Relation rel, CbtOwnerSave *save);
extern void cbt_as_caller(CbtOwnerSave *save);
extern void cbt_init(void);

/* cbt_combine.c: SSStructure.combine_batch */
struct SSLogSource;
extern void cbt_combine_batch(Relation rel, const struct SSLogSource *src,
							  void (*emit) (void *arg,
											const SSPendingHeader *hdr,
											const void *payload),
							  void *emit_arg);

/* cbt_scan.c */
extern const SSScanOps cbt_scan_ops;

/* cbt_lookup.c: one group by its keys (of the key columns' types) */
extern HeapTuple cbt_lookup_tuple(Relation rel, TupleDesc desc,
								  const Datum *keys, const bool *keynulls);

/* cbt_path.c: SSStructure.paths */
extern const SSPathOps cbt_path_ops;

#endif							/* CBT_AM_H */
