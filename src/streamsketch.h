/*-------------------------------------------------------------------------
 *
 * streamsketch.h
 *	  Declarations shared by every streamsketch structure: GUCs, the table
 *	  access method helpers, and the catalog of structure parameters.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMSKETCH_H
#define STREAMSKETCH_H

#include "postgres.h"

#include "access/tableam.h"
#include "utils/rel.h"

/* GUCs (streamsketch.*) */
extern double ss_bcms_epsilon;
extern double ss_bcms_delta;
extern int	ss_bcms_mode;
extern bool ss_bcms_conservative;
extern int	ss_bcms_buffer_size_kb;
extern int	ss_pending_memory_kb;
extern int	ss_qf_capacity;
extern double ss_qf_fp_rate;
extern int	ss_qf_fanout;
extern int	ss_qf_buffer_size_kb;
extern int	ss_bloom_capacity;
extern double ss_bloom_fp_rate;
extern int	ss_bloom_mode;
extern int	ss_bloom_buffer_size_kb;

/* ss_tableam.c: fill the callbacks every structure shares */
extern void ss_tableam_init_common(TableAmRoutine *routine);
extern void ss_create_storage(Relation rel, const RelFileNode *newrnode,
							  char persistence);
extern bool ss_relation_is_new(Relation rel);
extern bool ss_relam_is_streamsketch(Oid amoid);
extern const char *ss_structure_name(Relation rel);
extern bool ss_scan_claim(TableScanDesc scan);

/*
 * How a structure's state (its parameters and column info, cached in
 * rd_amcache) is built, for the shared callbacks below.  The state struct
 * is the structure's own, of state_size bytes.
 */
typedef struct SSStateOps
{
	Size		state_size;
	void		(*apply) (Relation rel);	/* its pending-log apply (SSApplyFunc) */
	/* check the table's columns; fill st's column fields unless st is NULL */
	void		(*check_columns) (Relation rel, void *st);
	/* parameters from the metapage, else the catalog; false if neither */
	bool		(*load_params) (Relation rel, void *st);
	/* parameters from the GUCs, and recording them in the catalog */
	void		(*default_params) (Relation rel, void *st);
	void		(*store_params) (Relation rel, const void *st);
} SSStateOps;

extern void *ss_get_state(Relation rel, const SSStateOps *ops);
extern void ss_forget_state(Relation rel);
extern void ss_set_new_filenode(Relation rel, const SSStateOps *ops,
								const RelFileNode *newrnode, char persistence,
								TransactionId *freezeXid, MultiXactId *minmulti);
extern void ss_truncate_in_place(Relation rel, const SSStateOps *ops);

/*
 * The columns of a structure that takes (key [, integer column]): the key
 * of any type and an optional smallint/integer/bigint (weight or count).
 */
typedef struct SSKeyColumns
{
	Oid			keytype;
	int16		keylen;
	bool		keybyval;
	Oid			inttype;		/* InvalidOid if there is no second column */
} SSKeyColumns;

extern void ss_check_key_columns(TupleDesc desc, const char *relname,
								 const char *amname, const char *intname,
								 SSKeyColumns *cols);
extern int64 ss_int_datum(Oid inttype, Datum d);

/* ss_guard.c: refuse operations that would silently lose data */
extern void ss_guard_init(void);

/*
 * Every table access method of the extension, with its parameter catalog
 * table (ss_catalog.c).  Adding a structure means adding a row here.
 */
typedef struct SSStructureInfo
{
	const char *amname;
	const char *params_table;
} SSStructureInfo;

extern const SSStructureInfo ss_structures[];

/* ss_catalog.c: parameters recorded in the extension's catalog tables */
extern const char *ss_extension_schema(void);
extern void ss_forget_params(Oid relid);

/* Extend rel (under the extension lock) so that blkno exists. */
extern void ss_extend_to(Relation rel, BlockNumber blkno);

#endif							/* STREAMSKETCH_H */
