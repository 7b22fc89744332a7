/*-------------------------------------------------------------------------
 *
 * streamsketch.h
 *	  Declarations shared by every streamsketch structure: GUCs, the table
 *	  access method helpers, the ops table each structure registers
 *	  (SSStateOps), and its parameters' labels.
 *
 *-------------------------------------------------------------------------
 */
#ifndef STREAMSKETCH_H
#define STREAMSKETCH_H

#include "postgres.h"

#include "access/tableam.h"
#include "lib/stringinfo.h"
#include "utils/rel.h"

/* the storage layer's settings (streamsketch.*) */
extern int	ss_pending_memory_kb;
extern int	ss_change_log_limit_kb;
extern int	ss_max_structure_size_mb;
extern bool ss_maintenance_consolidation;
extern Size ss_consolidation_memory(void);

/* ss_tableam.c: fill the callbacks every structure shares */
struct SSStateOps;
struct SSConsolidation;
extern void ss_tableam_init_common(TableAmRoutine *routine,
								   const struct SSStateOps *ops);
extern bool ss_relation_is_new(Relation rel);
extern bool ss_relam_is_streamsketch(Oid amoid);
extern const char *ss_structure_name(Relation rel);
extern bool ss_scan_claim(TableScanDesc scan);
extern void ss_scan_desc_init(TableScanDesc scan, Relation rel,
							  Snapshot snapshot, int nkeys,
							  struct ScanKeyData *key,
							  ParallelTableScanDesc pscan, uint32 flags);
extern void ss_scan_desc_free(TableScanDesc scan);

/*
 * What the storage layer needs to know of a structure: its metapage, how
 * its state (parameters and column info, cached in rd_amcache) is built,
 * and how its parameters are written to and read from its label (see
 * ss_params.c).  The state struct is the structure's own, of state_size
 * bytes; the metapage's contents are meta_size bytes starting with an
 * SSMetaHeader.
 */
typedef struct SSStateOps
{
	uint32		kind;			/* the kind its metapage is stamped with */
	Size		state_size;
	Size		meta_size;
	/*
	 * How committed changes reach the structure (ss_changelog.h):
	 * consolidate moves a round of committed records into it (false: run
	 * the round again); stats_size and add_stats (adds a round's stats to
	 * the metapage contents, whose log part it must not touch).
	 */
	bool		(*consolidate) (struct SSConsolidation *c);
	/*
	 * Optional, for a structure whose partitions consolidate in lanes of
	 * their own, each with its log position (a LERT's cones: sessions then
	 * consolidate different lanes at once): run what lanes can be run
	 * (with wait, wait for busy ones), then move the head to the slowest
	 * lane's position (ss_log_advance_to).  Called by writers and readers
	 * instead of a round; consolidate (every lane up to the round's end)
	 * still serves the callers that need every committed batch applied
	 * (flushes, VACUUM).  Returns true if the head moved.
	 */
	bool		(*consolidate_some) (Relation rel, bool wait);
	/*
	 * Optional: can the structure take this transaction's pending records
	 * on top of its contents and the log_records waiting in its change
	 * log?  Called at pre-commit under the log's append lock; with final,
	 * raise the error instead of returning false.
	 */
	bool		(*admit) (Relation rel, uint64 log_records, bool final);
	Size		stats_size;
	void		(*add_stats) (void *meta, const void *stats);
	/* check the table's columns; fill st's column fields unless st is NULL */
	void		(*check_columns) (Relation rel, void *st);
	/*
	 * check a metapage's contents read from disk (run by ss_meta_validate:
	 * raise any error on a violated invariant)
	 */
	void		(*check_meta) (Relation rel, const void *meta);
	/* copy the parameters of a checked metapage's contents into st */
	void		(*params_from_meta) (const void *meta, void *st);
	/* the metapage contents of a new, empty structure with st's parameters */
	void		(*init_meta) (const void *st, void *meta);
	/* parameters from the streamsketch.* settings */
	void		(*default_params) (Relation rel, void *st);
	/* st's parameters as a label, "name=value ..." (palloc'd) */
	char	   *(*params_to_label) (const void *st);
	/* parse and validate a label (ss_label_split) into st's parameters */
	void		(*params_from_label) (Relation rel, const char *label, void *st);
	/*
	 * Optional: does the label name the parameters of st (a metapage's)?
	 * Without it, params_from_label's result is compared with st through
	 * params_to_label.  A structure whose label also holds what is not a
	 * parameter (a cbt's definition, bound by object ids in the metapage
	 * and only copied into the label as text) compares the parameters
	 * alone.
	 */
	bool		(*label_agrees) (Relation rel, const char *label,
								 const void *st);
	/*
	 * Optional: a SECURITY LABEL statement gave rel the parameters st
	 * (also in binary-upgrade mode, where rel's files are not there yet);
	 * record what they make the table depend on.
	 */
	void		(*label_set) (Relation rel, const void *st);
	/*
	 * Optional: before a label is written again after DDL (ss_relabel.c),
	 * store in the metapage, bound to this cluster's object ids, what it
	 * still holds as text or as another cluster's ids, or refuse the DDL.
	 */
	void		(*rebind) (Relation rel);
} SSStateOps;

extern bool ss_read_structure_meta(Relation rel, const SSStateOps *ops,
								   void *meta);
extern void *ss_get_state(Relation rel, const SSStateOps *ops);
extern void ss_forget_state(Relation rel);
extern void ss_set_new_filenode(Relation rel, const SSStateOps *ops,
								const RelFileNode *newrnode, char persistence,
								TransactionId *freezeXid, MultiXactId *minmulti);
extern void ss_truncate_in_place(Relation rel, const SSStateOps *ops);
extern const SSStateOps *ss_structure_ops(Relation rel);
extern void ss_tableam_register(const TableAmRoutine *routine,
								const SSStateOps *ops);

/* ss_params.c: parameters in labels, constructors, settings */
#define SS_LABEL_PROVIDER "streamsketch"

extern void ss_params_init(void);
extern void ss_set_label(Oid relid, const char *label);
extern char *ss_get_label(Oid relid);
extern void ss_describe(Relation rel, const SSStateOps *ops, const void *st);
extern void ss_label_split(const char *label, int nkeys,
						   const char *const *keys, char **values);
extern double ss_label_float(const char *key, const char *value);
extern int64 ss_label_int(const char *key, const char *value, int64 min,
						  int64 max);
extern bool ss_label_bool(const char *key, const char *value);
extern void ss_label_append_float(StringInfo buf, const char *key, double v);
extern Oid	ss_create_structure(const SSStateOps *ops, const void *st,
								text *name, Oid keytype,
								const char *second_column,
								const char *amname, bool unlogged);
extern List *ss_parse_column_list(const char *list, const char *what,
								  const char *hint);

/*
 * A user's text parsed inside SQL of ours, which starts offset bytes
 * before it: an error context callback (arg: an SSUserText) makes a parse
 * error's position point into the text, as PL/pgSQL does for a function
 * body, instead of into the statement that called us.
 */
typedef struct SSUserText
{
	const char *text;
	int			offset;
} SSUserText;

extern void ss_user_text_error_callback(void *arg);
extern char *ss_column_list_sql(List *coldefs, Oid *types);
extern Oid	ss_create_structure_columns(const SSStateOps *ops, const void *st,
										text *name, const char *columns,
										const char *amname, bool unlogged);
extern const void *ss_creation_params(Relation rel, const SSStateOps *ops);
extern bool ss_relabel_in_progress(Oid relid);
extern void ss_cluster_init_fork(Relation OldTable, Relation NewTable);
extern void ss_check_settings(const char *const *names);
extern void ss_params_note_placeholders(const char *prefix);
extern void ss_params_find_rejected(void);
extern void ss_setting_assigned(const char *name);
extern void ss_storage_init(void);

/*
 * An assign hook for a setting that gives new structures a parameter: an
 * assignment after the library was loaded (SET, RESET) replaces a value
 * that was rejected when it loaded (ss_params.c).
 */
#define SS_ASSIGN_HOOK(setting, ctype) \
static void \
assign_##setting(ctype newval, void *extra) \
{ \
	ss_setting_assigned("streamsketch." #setting); \
}

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

/* ss_evtrigger.c: an event trigger support function's rows */
struct Tuplestorestate;
extern struct Tuplestorestate *ss_event_trigger_rows(Oid fnoid,
													 TupleDesc *desc);

/* Extend rel (under the extension lock) so that blkno exists. */
extern void ss_extend_to(Relation rel, BlockNumber blkno);

#endif							/* STREAMSKETCH_H */
